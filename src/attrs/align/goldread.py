"""The gold-constrained reading of a hand-read conversation (issue 27): the aligner's lattice and
scores, restricted to the readers' interleaving.

A hand-made order (`psyattrs.align.gold`) says how the two speakers' lines interleave, but not
which lines form one message nor which label position each message holds. With the interleaving
fixed, a reading only decides that grouping: which consecutive lines of one speaker share a label,
which blank persona lines are pauses (or skipped), where a pause without a line sits, and the pause
treatment. `gold_reading` scores those choices exactly as `align_public` does (the same
`Lattice`: emissions, length prior, speaker transitions, run ends, coherence, who opens and
closes) and keeps the best, by an exact dynamic programme over the readers' sequence of lines
(`constrained_viterbi`). Each line then gets the labels its position implies: the labels a
model should predict for it if the readers are right.

Where the readers disagree, each reader's order is read and the one whose best reading scores
higher is kept (`reader`); every line is marked `agreed` when all readers place it the same way
(a user line after as many non-blank persona lines, a persona line after as many non-blank user
lines), so scores can leave the disputed lines out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from psyattrs.align import lattice
from psyattrs.align.classifier import FixedScorer, PriorScorer
from psyattrs.align.conversations import Mode, read_conversations
from psyattrs.align.gold import GoldOrder
from psyattrs.align.output import utterance_table
from psyattrs.align.reconstruct import _label_model
from psyattrs.align.rounds import Aligner, Fit
from psyattrs.align.settings import AlignSettings
from psyattrs.data.table import Corpus

_NEG = -np.inf
_NONE = 3  # the state before the first label


@dataclass
class _Seq:
    """A reader's order of one treatment's items: kind (PERSONA / USER) and item index per entry,
    and the persona and user items used before each entry."""

    kind: np.ndarray
    item: np.ndarray
    used_p: np.ndarray
    used_u: np.ndarray


def order_sequence(order: list[tuple[str, int]], mode: Mode) -> _Seq:
    """The treatment's items in the reader's order (lines that are not items, such as blank user
    lines or, when pauses are not counted, blank persona lines, are left out).

    Raises:
        ValueError: the order misses an item, or puts one speaker's lines out of their own order.
    """
    p_index = {int(line): i for i, line in enumerate(mode.p_items)}
    u_index = {int(line): j for j, line in enumerate(mode.u_items)}
    kind, item = [], []
    for who, line in order:
        table = p_index if who == "P" else u_index
        if line in table:
            kind.append(lattice.PERSONA if who == "P" else lattice.USER)
            item.append(table[line])
    kind, item = np.array(kind, dtype=np.int64), np.array(item, dtype=np.int64)
    for k, n, name in ((lattice.PERSONA, len(mode.p_items), "persona"), (lattice.USER, len(mode.u_items), "user")):
        got = item[kind == k]
        if len(got) != n or (np.diff(got) != 1).any() or (n and got[0] != 0):
            raise ValueError(f"the order does not list the {name} lines once each in their own order")
    used_p = np.concatenate([[0], np.cumsum(kind == lattice.PERSONA)])
    used_u = np.concatenate([[0], np.cumsum(kind == lattice.USER)])
    return _Seq(kind, item, used_p, used_u)


def constrained_viterbi(lat: lattice.Lattice, seq: _Seq) -> lattice.Path | None:
    """The best path of `lat` (scored as `psyattrs.align.dp.viterbi` scores it, within the same
    bounds: x = items used - labels in [-max_phantoms, m + n - T + max_phantoms]) among those whose
    units take the items in the order `seq`: only the grouping of consecutive same-speaker items
    into units, pauses, skips and pauses without a line is free. None when no such path has a
    finite score.
    """
    T, S, K = lat.T, len(seq.kind), lat.max_k
    lo, hi = -lat.max_phantoms, lat.m + lat.n - T + lat.max_phantoms
    Z = 4  # persona, user, pause, none
    V = np.full((S + 1, Z, T + 1), _NEG)
    back = np.full((S + 1, Z, T + 1, 3), -1, dtype=np.int64)  # previous s, previous z, action
    V[0, _NONE, 0] = 0.0
    p_run = lat.persona_run if lat.persona_run is not None else np.zeros((lat.m + 1, 2))
    u_run = lat.user_run if lat.user_run is not None else np.zeros((lat.n + 1, 2))
    pu = lat.persona_user if lat.persona_user is not None else np.zeros((lat.m + 1, lat.n + 1))
    up = lat.user_persona if lat.user_persona is not None else np.zeros((lat.m + 1, lat.n + 1))
    ts = np.arange(T)
    SKIP, PAUSE_A, PHANTOM_A = K, K + 1, K + 2
    phantom = lat.log_phantom > _NEG

    def into(s: int, z: int, to: int) -> np.ndarray:
        """(T,) score of stepping from state z into state `to` at label t (at entry s)."""
        out = np.full(T, _NEG)
        if z == _NONE:
            out[:1] = lat.log_start[to]
            return out
        if not T:
            return out
        i, j = seq.used_p[s], seq.used_u[s]
        out = lat.log_trans[:, z, to].copy()
        if z == lattice.PERSONA:
            out += p_run[i, 0 if to == lattice.PERSONA else 1]
            if to == lattice.USER:
                out += pu[i, j]
        elif z == lattice.USER:
            out += u_run[j, 0 if to == lattice.USER else 1]
            if to == lattice.PERSONA:
                out += up[i, j]
        out[0] = _NEG  # only the first label comes from the start
        return out

    def push(s2: int, z2: int, cand: np.ndarray, shift: int, s: int, z: int, act: int) -> None:
        """Relaxes V[s2, z2, t + shift] with cand[t] (t = 0..len(cand)-1)."""
        target = V[s2, z2, shift : shift + len(cand)]
        better = cand > target
        if better.any():
            idx = np.flatnonzero(better) + shift
            V[s2, z2, idx] = cand[better]
            back[s2, z2, idx] = (s, z, act)

    t_all = np.arange(T + 1)
    for s in range(S + 1):
        x = s - t_all
        V[s][:, (x < lo) | (x > hi)] = _NEG  # outside the lattice's bounds
        if phantom and T:  # pauses without a line stay at entry s: from the other states, then chained
            for z in (lattice.PERSONA, lattice.USER, _NONE):
                push(s, lattice.PAUSE, V[s, z, :T] + into(s, z, lattice.PAUSE) + lat.emit_pause + lat.log_phantom,
                     1, s, z, PHANTOM_A)
            chain = into(s, lattice.PAUSE, lattice.PAUSE) + lat.emit_pause + lat.log_phantom
            for t in range(T):
                v = V[s, lattice.PAUSE, t] + chain[t]
                if x[t + 1] >= lo and v > V[s, lattice.PAUSE, t + 1]:
                    V[s, lattice.PAUSE, t + 1] = v
                    back[s, lattice.PAUSE, t + 1] = (s, lattice.PAUSE, PHANTOM_A)
            V[s][:, x < lo] = _NEG
        if s == S:
            continue
        kind, item = int(seq.kind[s]), int(seq.item[s])
        for z in range(Z):
            if not np.isfinite(V[s, z]).any():
                continue
            here = V[s, z, :T]
            if kind == lattice.PERSONA and lat.persona_blank[item]:
                if lat.log_skip > _NEG:
                    push(s + 1, z, V[s, z] + lat.log_skip, 0, s, z, SKIP)
                if lat.log_keep > _NEG:
                    push(s + 1, lattice.PAUSE, here + into(s, z, lattice.PAUSE) + lat.emit_pause + lat.log_keep,
                         1, s, z, PAUSE_A)
                continue
            emit = lat.emit_persona if kind == lattice.PERSONA else lat.emit_user
            step_in = into(s, z, kind)
            for k in range(1, K + 1):
                if s + k > S or seq.kind[s + k - 1] != kind:
                    break
                push(s + k, kind, here + step_in + emit[ts, item, k - 1], 1, s, z, k - 1)
    end = lat.log_end if lat.log_end is not None else np.zeros(3)
    end = np.append(end, 0.0 if T == 0 else _NEG)  # no label: the empty path, from the start state
    finals = V[S, :, T] + end
    if not np.isfinite(finals).any():
        return None
    z = int(np.argmax(finals))
    score = float(finals[z])
    steps, skipped = [], []
    s, t = S, T
    while (s, z, t) != (0, _NONE, 0):
        ps, pz, act = (int(v) for v in back[s, z, t])
        if act == SKIP:
            skipped.append(int(seq.item[ps]))
        elif act == PHANTOM_A:
            steps.append(lattice.Step(t - 1, lattice.PHANTOM, -1, 0))
        elif act == PAUSE_A:
            steps.append(lattice.Step(t - 1, lattice.PAUSE, int(seq.item[ps]), 1))
        else:
            steps.append(lattice.Step(t - 1, int(seq.kind[ps]), int(seq.item[ps]), act + 1))
        t = t - (act != SKIP)
        s, z = ps, pz
    return lattice.Path(score, steps[::-1], sorted(skipped))


def line_agreement(g: GoldOrder, p_blank: np.ndarray, u_blank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(persona lines, user lines) True where every reader places the line after the same number of
    the other speaker's non-blank lines (blank lines: True; a line missing from a reading: False)."""
    out = []
    for who, blank_other, n in (("P", u_blank, len(p_blank)), ("U", p_blank, len(u_blank))):
        other = "U" if who == "P" else "P"
        counts = []
        for order in g.orders.values():
            seen, c = 0, {}
            for w, i in order:
                if w == other:
                    seen += int(not (i < len(blank_other) and blank_other[i]))
                else:
                    c[i] = seen
            counts.append(c)
        out.append(np.array([len({c.get(i, -1 - r) for r, c in enumerate(counts)}) == 1 for i in range(n)]))
    p_ok, u_ok = out
    return p_ok | p_blank, u_ok | u_blank


def gold_readings(corpus: Corpus, gold: dict[str, GoldOrder], *, label_model=None,
                  settings: AlignSettings | None = None) -> pd.DataFrame:
    """The gold-constrained reading (module docstring) of every conversation of `corpus` that has
    a hand-made order.

    Args:
        corpus: the public release as `read_public` returns it.
        gold: `read_gold`.
        label_model: a fitted model scoring the units (as `align_public(label_model=...)`); None:
            the corpus's label marginals (the aligner's round 0: the grouping is then decided by
            the priors and the pause labels alone).
        settings: the aligner's settings (default `AlignSettings()`).

    Returns:
        An utterance table as `AlignResult.utterances` (one row per sentence in the readers'
        order, `labeler_{head}` the labels of its position; `align_confidence` NaN) plus `reader`
        (whose order it follows), `gold_score` (the reading's score) and `agreed` (every line of the
        sentence placed alike by all readers).

    Raises:
        ValueError: an order that does not list a speaker's lines once each in their own order
            (the doc_id named), or no reading of an order fits the conversation's labels.
    """
    s = settings or AlignSettings()
    keep = set(gold)
    convs, _ = read_conversations(corpus)
    convs = [c for c in convs if c.doc_id in keep]
    if not convs:
        return utterance_table([], [], corpus.schema).assign(reader=pd.Series(dtype=str), gold_score=pd.Series(dtype=float),
                                                          agreed=pd.Series(dtype=bool))
    aligner = Aligner(convs, corpus.schema, s)
    if label_model is None:
        logp = PriorScorer(corpus.schema, aligner.all_labels, len(aligner.cands)).log_proba()
    else:
        logp = FixedScorer(corpus.schema, _label_model(label_model, corpus.schema), aligner.unit_table()).log_proba()
    fits, extra = [], []
    for ci, c in enumerate(convs):
        best = None
        lats = aligner._lattices(ci, logp, aligner.priors0)
        for reader, order in sorted(gold[c.doc_id].orders.items()):
            for mode, lat in zip(c.modes, lats):
                try:
                    seq = order_sequence(order, mode)
                except ValueError as e:
                    raise ValueError(f"{c.doc_id}, {reader}: {e}") from None
                path = constrained_viterbi(lat, seq)
                if path is not None and (best is None or path.score > best[0].score):
                    best = (path, mode, reader)
        if best is None:
            raise ValueError(f"{c.doc_id}: no reading of the readers' order fits its {c.T} labels")
        path, mode, reader = best
        fits.append(Fit(mode, path.score, float("nan"), 1.0, None, path, np.full(len(path.steps), np.nan)))
        extra.append((c, reader, path.score))
    table = utterance_table(convs, fits, corpus.schema)
    readers, scores, agreed = [], [], []
    for c, reader, score in extra:
        p_ok, u_ok = line_agreement(gold[c.doc_id], c.p_blank, c.u_blank)
        rows = table[table["doc_id"] == c.doc_id]
        for r in rows.itertuples(index=False):
            ok = p_ok if r.person_type == "persona" else u_ok
            lines = [] if pd.isna(r.line_start) else range(int(r.line_start), int(r.line_end))
            agreed.append(bool(all(ok[i] for i in lines)))
            readers.append(reader)
            scores.append(score)
    table["reader"] = readers
    table["gold_score"] = scores
    table["agreed"] = agreed
    return table
