"""The readings of one public-release conversation as the exact dynamic programme
(`psyattrs.align.dp`) sees them: `Lattice` (the conversation, scored) goes in; `Posteriors` and
`Path` (of `Step`s) come out.

One conversation of the public release (FORMATS §3) has T labels in chronological order, the
persona's items p_0..p_{m-1} and the user's items u_0..u_{n-1}, each speaker's in its own order.
A reading of the conversation (a *path*) walks through the labels t = 0..T-1 and gives each one
to exactly one *unit*:

- a persona unit: k >= 1 consecutive persona text items (a message broken over k lines);
- a user unit: k >= 1 consecutive user text items;
- a pause: one blank persona item;
- a phantom pause: a pause sentence whose blank line is missing from the text (no item).

Blank persona items that are not made pauses are *skipped* (they consume no label). Every item
is used exactly once, in each speaker's order. A path's score is the sum of the log-scores of its
steps: the unit's emission (`Lattice.emit_*`: log P(label t | unit), plus the unit's length
prior), the speaker transition into that label (`log_trans[t, from, to]` over the states persona, user, pause; the
first unit takes `log_start[to]`), and `log_keep` / `log_skip` / `log_phantom` for blank items
and phantom pauses. A pause does not end a persona or user run for the transition model: it is a
state of its own, so the model learns what precedes and follows pauses.

A speaker's run may also be scored by where in that speaker's list it ends or goes on
(`Lattice.persona_run`, `Lattice.user_run`: the text around item i says whether a message ended
there). At the step into label t >= 1 from a persona state with i persona items used (counted
after the blank items skipped before that step), persona -> persona adds `persona_run[i, 0]`
("stay") and persona -> user or pause adds `persona_run[i, 1]` ("leave"); from a user state with
j user items used, `user_run[j, 0]` and `user_run[j, 1]` likewise. Steps from a pause and the first
label add nothing. The run scores are folded into the transition of each (i, x) state, so the cost
stays that of the 3 x 3 transition per state.

A speaker change may also be scored by the two lines on either side of it (`Lattice.persona_user`,
`Lattice.user_persona`: does the user's next line answer the persona's last one, and the other way
round). At the step into label t >= 1 from a persona state with i persona items and j user items
used, persona -> user adds `persona_user[i, j]` (the pair persona item i - 1, user item j); from a
user state, user -> persona adds `user_persona[i, j]` (user item j - 1, persona item i). Changes
into or out of a pause add nothing. The last unit's state adds `log_end[state]` (who closes the
conversation).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

PERSONA, USER, PAUSE, PHANTOM = 0, 1, 2, 3
"""Step kinds. States of the transition model are PERSONA, USER and PAUSE (a phantom is a pause)."""
N_STATES = 3
STATE_NAMES = ("persona", "user", "pause")
_NEG = -np.inf


@dataclass
class Lattice:
    """One conversation under one pause treatment, scored and ready for the DP.

    Attributes:
        emit_persona: (T, m, K) log-score of the persona unit of items i..i+k (k = index + 1)
            at label t; -inf where the unit is impossible. Entries whose items include a blank
            item or run past the end are forced to -inf.
        emit_user: (T, n, K) the same for user units.
        emit_pause: (T,) log-score of a pause (blank item or phantom) at label t.
        persona_blank: (m,) True where the persona item is blank (a pause or a skipped line).
        log_trans: (T, 3, 3) log-score of the transition last state -> state of label t's unit
            (states persona, user, pause; row t = 0 is unused), or one (3, 3) for every label.
        log_start: (3,) log P(state of the first unit).
        log_keep: log-score of using a blank item as a pause.
        log_skip: log-score of skipping a blank item (-inf: blanks must be pauses).
        log_phantom: log-score of one phantom pause (-inf: none allowed).
        max_phantoms: phantom pauses the lattice makes room for (0 when `log_phantom` is -inf).
        persona_run: (m+1, 2) log-scores of a persona run at i persona items used (after the
            skipped blanks), added at the step into label t >= 1 from a persona state: column 0
            ("stay") on persona -> persona, column 1 ("leave") on persona -> user or pause.
            None: all zeros. Entries may be -inf, not NaN nor +inf.
        user_run: (n+1, 2) the same for a user run at j user items used: column 0 on
            user -> user, column 1 on user -> persona or pause. None: all zeros.
        persona_user: (m+1, n+1) log-score of a persona -> user change at i persona items and
            j user items used (module docstring). None: all zeros. Finite or -inf.
        user_persona: (m+1, n+1) the same for user -> persona. None: all zeros.
        log_end: (3,) log-score of the state of the last unit. None: all zeros.
    """

    emit_persona: np.ndarray
    emit_user: np.ndarray
    emit_pause: np.ndarray
    persona_blank: np.ndarray
    log_trans: np.ndarray
    log_start: np.ndarray
    log_keep: float = 0.0
    log_skip: float = _NEG
    log_phantom: float = _NEG
    max_phantoms: int = 0
    persona_run: np.ndarray | None = None
    user_run: np.ndarray | None = None
    persona_user: np.ndarray | None = None
    user_persona: np.ndarray | None = None
    log_end: np.ndarray | None = None
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.emit_pause = np.asarray(self.emit_pause, dtype=float)
        self.persona_blank = np.asarray(self.persona_blank, dtype=bool)
        T = len(self.emit_pause)
        m = len(self.persona_blank)
        self.emit_persona = np.asarray(self.emit_persona, dtype=float)
        self.emit_user = np.asarray(self.emit_user, dtype=float)
        if self.emit_persona.ndim != 3 or self.emit_persona.shape[:2] != (T, m):
            raise ValueError(f"emit_persona must be (T, m, K) = ({T}, {m}, K), got {self.emit_persona.shape}")
        K = self.emit_persona.shape[2]
        if K < 1 or self.emit_user.ndim != 3 or self.emit_user.shape[0] != T or self.emit_user.shape[2] != K:
            raise ValueError(f"emit_user must be (T, n, K) = ({T}, n, {K}), got {self.emit_user.shape}")
        self.log_trans = np.asarray(self.log_trans, dtype=float)
        if self.log_trans.shape == (N_STATES, N_STATES):
            self.log_trans = np.broadcast_to(self.log_trans, (T, N_STATES, N_STATES))
        if self.log_trans.shape != (T, N_STATES, N_STATES) or np.asarray(self.log_start).shape != (N_STATES,):
            raise ValueError(f"log_trans must be (3, 3) or (T, 3, 3) with T = {T}, and log_start (3,)")
        if self.log_phantom == _NEG:
            self.max_phantoms = 0
        if self.max_phantoms < 0:
            raise ValueError(f"max_phantoms must be >= 0, got {self.max_phantoms}")
        # units may not hold blank items nor run past the end of the list
        ok_p = np.ones((m, K), dtype=bool)
        blank_cum = np.concatenate([[0], np.cumsum(self.persona_blank)])
        for k in range(1, K + 1):
            i = np.arange(m)
            end = i + k
            inside = end <= m
            ok_p[:, k - 1] = inside & ((blank_cum[np.minimum(end, m)] - blank_cum[i]) == 0)
        self.emit_persona = np.where(ok_p[None], self.emit_persona, _NEG)
        n = self.emit_user.shape[1]
        ok_u = (np.arange(n)[:, None] + np.arange(1, K + 1)[None, :]) <= n
        self.emit_user = np.where(ok_u[None], self.emit_user, _NEG)
        for name, size in (("persona_run", m + 1), ("user_run", n + 1)):
            arr = getattr(self, name)
            if arr is None:
                continue
            arr = np.asarray(arr, dtype=float)
            letter = "m" if name == "persona_run" else "n"
            if arr.shape != (size, 2):
                raise ValueError(f"{name} must be ({letter}+1, 2) = ({size}, 2), got {arr.shape}")
            if np.isnan(arr).any() or (arr == np.inf).any():
                raise ValueError(f"{name} must hold finite log-scores or -inf (no NaN nor +inf)")
            setattr(self, name, arr)
        for name in ("persona_user", "user_persona"):
            arr = getattr(self, name)
            if arr is None:
                continue
            arr = np.asarray(arr, dtype=float)
            if arr.shape != (m + 1, n + 1):
                raise ValueError(f"{name} must be (m+1, n+1) = ({m + 1}, {n + 1}), got {arr.shape}")
            if np.isnan(arr).any() or (arr == np.inf).any():
                raise ValueError(f"{name} must hold finite log-scores or -inf (no NaN nor +inf)")
            setattr(self, name, arr)
        if self.log_end is not None:
            self.log_end = np.asarray(self.log_end, dtype=float)
            if self.log_end.shape != (N_STATES,) or np.isnan(self.log_end).any() or (self.log_end == np.inf).any():
                raise ValueError(f"log_end must be (3,) finite log-scores or -inf, got {self.log_end!r}")

    @property
    def T(self) -> int:
        return len(self.emit_pause)

    @property
    def m(self) -> int:
        return len(self.persona_blank)

    @property
    def n(self) -> int:
        return self.emit_user.shape[1]

    @property
    def x_final(self) -> int:
        """i + j - t at the end of every path: m + n - T."""
        return self.m + self.n - self.T

    @property
    def feasible(self) -> bool:
        """Whether any path exists ignoring scores: enough items for the labels, phantoms counted."""
        return self.x_final >= -self.max_phantoms

    @property
    def x_lo(self) -> int:
        return -self.max_phantoms

    @property
    def n_x(self) -> int:
        return max(0, self.x_final + 2 * self.max_phantoms + 1)

    @property
    def max_k(self) -> int:
        """Longest unit the lattice can hold (units longer than the x range are impossible)."""
        return max(1, min(self.emit_persona.shape[2], self.n_x))


@dataclass
class Posteriors:
    """What `forward_backward` returns.

    Attributes:
        loglik: log of the summed exp(score) over all paths (-inf: no path).
        persona: (T, m, K) P(label t is the persona unit starting at item i with k = index+1 items).
        user: (T, n, K) the same for user units.
        pause: (T, m) P(label t is the blank persona item i used as a pause).
        phantom: (T,) P(label t is a phantom pause).
        transitions: (T, 3, 3) expected transitions last state -> state of label t (row 0 zero).
        start: (3,) P(state of the first unit).
        persona_run: (m+1, 2) expected number of persona "stay" (column 0: persona -> persona)
            and "leave" (column 1: persona -> user or pause) steps taken at i persona items used,
            summed over the labels t >= 1; computed whether or not the lattice has run scores.
        user_run: (n+1, 2) the same for user runs at j user items used.
        persona_user: (m+1, n+1) expected persona -> user changes at i persona and j user items
            used (the pair of `Lattice.persona_user`); user_persona likewise for user -> persona.
        persona_at: (m+1, n+1) expected number of labels t >= 1 entered from a persona state at
            i persona and j user items used (whatever the next state); user_at likewise.
    """

    loglik: float
    persona: np.ndarray
    user: np.ndarray
    pause: np.ndarray
    phantom: np.ndarray
    transitions: np.ndarray = field(default_factory=lambda: np.zeros((0, N_STATES, N_STATES)))
    start: np.ndarray = field(default_factory=lambda: np.zeros(N_STATES))
    persona_run: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    user_run: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    persona_user: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    user_persona: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    persona_at: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    user_at: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))


@dataclass(frozen=True)
class Step:
    """One label's unit on a path: label t, kind (PERSONA, USER, PAUSE, PHANTOM), first item, items."""

    t: int
    kind: int
    start: int
    k: int


@dataclass
class Path:
    """What `viterbi` returns: the best score, its steps (label order) and the skipped blank items."""

    score: float
    steps: list[Step]
    skipped: list[int]
