"""The public release's conversations as the aligner reads them (`psyattrs.align`).

`read_conversations` turns a public corpus into `Conversation`s with their pause treatments
(`Mode`); `Candidates` lists every unit a reading may use (runs of 1..K consecutive non-blank lines
of one speaker) with their features and length priors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from psyattrs.align.priors import TokenStats, boundary_features, calibrate
from psyattrs.data.table import Corpus, final_column

COUNTED, NOT_COUNTED = "pauses counted", "pauses not counted"
SKIP_PRIOR = 0.02
"""P(a blank persona line is not a pause) in a conversation with no more blank lines than pauses."""


# ----------------------------------------------------------------------------------------------
# conversations


@dataclass
class Mode:
    name: str
    p_items: np.ndarray  # persona line index of each persona item
    p_blank: np.ndarray  # item is a blank line
    u_items: np.ndarray  # user line index of each user item
    max_phantoms: int
    skip: float  # P(blank item skipped); 0 = never

    def x_range(self, T: int) -> int:
        return len(self.p_items) + len(self.u_items) - T + 2 * self.max_phantoms + 1


@dataclass
class Conversation:
    doc_id: str
    labels: np.ndarray
    p_text: list[str]
    p_blank: np.ndarray
    u_text: list[str]
    u_blank: np.ndarray
    pause_count: int
    total_turn: float
    meta: dict[str, str]
    modes: list[Mode] = field(default_factory=list)
    K: int = 1
    cand: tuple[int, int] = (0, 0)  # candidate id range
    lookup: tuple[np.ndarray, np.ndarray] = (np.zeros((0, 1), int), np.zeros((0, 1), int))

    @property
    def T(self) -> int:
        return len(self.labels)


def reading_modes(c: Conversation, skip_prior: float) -> list[Mode]:
    n_blank = int(c.p_blank.sum())
    u_items = np.flatnonzero(~c.u_blank)
    skip = (n_blank - c.pause_count) / n_blank if n_blank > c.pause_count else skip_prior
    modes = [Mode(COUNTED, np.arange(len(c.p_text)), c.p_blank.copy(), u_items, max(0, c.pause_count - n_blank), skip)]
    if n_blank:
        p = np.flatnonzero(~c.p_blank)
        modes.append(Mode(NOT_COUNTED, p, np.zeros(len(p), dtype=bool), u_items, 0, 0.0))
    return [m for m in modes if m.x_range(c.T) >= 1]


def read_conversations(corpus: Corpus) -> tuple[list[Conversation], list[Conversation]]:
    """(conversations that some reading fits, conversations with too few lines for their labels)."""
    schema = corpus.schema
    heads = [final_column(h) for h in schema.head_names]
    conv = corpus.conversations
    seq = corpus.label_sequences
    if corpus.format != "public" or seq is None:
        raise ValueError(f"align_public needs the public release as read_public returns it (format 'public'), got format {corpus.format!r}")
    labels = {d: g.sort_values("position")[heads].to_numpy(dtype=np.int64) for d, g in seq.groupby("doc_id", sort=False)}
    lines = {d: g for d, g in corpus.utterances.groupby("doc_id", sort=False)}
    empty_lines = corpus.utterances.iloc[:0]
    fits, unfit = [], []
    for row in conv.itertuples(index=False):
        r = row._asdict()
        d = str(r["doc_id"])
        g = lines.get(d, empty_lines)
        p = g[g["person_type"] == "persona"].sort_values("line")
        u = g[g["person_type"] == "user"].sort_values("line")
        turn = pd.to_numeric(pd.Series([r.get("total_turn")]), errors="coerce").iloc[0]
        meta = {
            "persona": str(r.get("persona", "")),
            "persona_name": str(p["person_name"].iloc[0]) if len(p) else str(r.get("persona", "")),
            "user_name": str(u["person_name"].iloc[0]) if len(u) else (d.split("_")[1] if d.count("_") else ""),
            "user_id": str(u["person_id"].iloc[0]) if len(u) else str(r.get("user_id", "") or ""),
            "persona_name_original": str(r.get("persona_name_original", "") or ""),
        }
        c = Conversation(
            doc_id=d,
            labels=labels.get(d, np.zeros((0, len(heads)), dtype=np.int64)),
            p_text=p["text"].tolist(),
            p_blank=p["is_blank"].to_numpy(dtype=bool),
            u_text=u["text"].tolist(),
            u_blank=u["is_blank"].to_numpy(dtype=bool),
            pause_count=int(r["pause_count"]),
            total_turn=float(turn) if pd.notna(turn) else float("nan"),
            meta=meta,
        )
        c.modes = reading_modes(c, SKIP_PRIOR)
        (fits if c.modes else unfit).append(c)
    return fits, unfit


class Candidates:
    """Every unit any reading may use: runs of 1..K consecutive non-blank lines of one speaker."""

    def __init__(self, convs: list[Conversation], max_lines: int):
        conv_ids, speaker, start, ks, texts, line_rows = [], [], [], [], [], []
        self.line_text: list[str] = []
        self.pair_left: list[int] = []  # global line id of a line whose next line is in the same run
        pair_group: list[str] = []
        self.conv_lines: list[tuple[int, int]] = []
        self.cand_range: list[tuple[int, int]] = []
        self.conv_pairs: list[tuple[int, int]] = []
        self.line_ids: list[tuple[np.ndarray, np.ndarray]] = []  # per conversation: global line id of each line (-1 blank)
        for ci, c in enumerate(convs):
            c.K = max(1, min(max_lines, max(m.x_range(c.T) for m in c.modes)))
            first = len(speaker)
            first_line, first_pair = len(self.line_text), len(self.pair_left)
            lookups, ids = [], []
            for s, (text, blank) in enumerate(((c.p_text, c.p_blank), (c.u_text, c.u_blank))):
                n = len(text)
                line_id = np.full(n, -1, dtype=np.int64)
                nb = np.flatnonzero(~blank)
                line_id[nb] = len(self.line_text) + np.arange(len(nb))
                self.line_text.extend(text[i] for i in nb)
                ids.append(line_id)
                run = np.zeros(n + 1, dtype=np.int64)
                for i in range(n - 1, -1, -1):
                    run[i] = 0 if blank[i] else run[i + 1] + 1
                for i in range(n - 1):
                    if run[i] >= 2:
                        self.pair_left.append(int(line_id[i]))
                        pair_group.append(f"{c.meta['persona']}/{s}")
                look = np.full((n, c.K), -1, dtype=np.int64)
                for k in range(1, c.K + 1):
                    a = np.flatnonzero(run[:n] >= k)
                    look[a, k - 1] = len(speaker) + np.arange(len(a))
                    conv_ids.extend([ci] * len(a))
                    speaker.extend([s] * len(a))
                    start.extend(a.tolist())
                    ks.extend([k] * len(a))
                    texts.extend("\n".join(text[i : i + k]) for i in a)
                    line_rows.extend((line_id[i], k) for i in a)
                lookups.append(look)
            c.cand = (first, len(speaker))
            self.cand_range.append(c.cand)
            c.lookup = (lookups[0], lookups[1])
            self.line_ids.append((ids[0], ids[1]))
            self.conv_lines.append((first_line, len(self.line_text)))
            self.conv_pairs.append((first_pair, len(self.pair_left)))
        self.conv = np.asarray(conv_ids, dtype=np.int64)
        self.speaker = np.asarray(speaker, dtype=np.int64)
        self.start = np.asarray(start, dtype=np.int64)
        self.k = np.asarray(ks, dtype=np.int64)
        self.text = texts
        self.first_line = np.asarray([r[0] for r in line_rows], dtype=np.int64)
        self.pair_left_arr = np.asarray(self.pair_left, dtype=np.int64)
        self.pair_left_text = [self.line_text[i] for i in self.pair_left]
        self.pair_right_text = [self.line_text[i + 1] for i in self.pair_left]
        self.pair_features = boundary_features(self.pair_left_text, self.pair_right_text, pair_group, TokenStats(self.line_text))
        self.pair_of_left = np.full(len(self.line_text), -1, dtype=np.int64)
        self.pair_of_left[self.pair_left_arr] = np.arange(len(self.pair_left_arr))
        self.pair_conv = np.zeros(len(self.pair_left_arr), dtype=np.int64)
        for ci, (q0, q1) in enumerate(self.conv_pairs):
            self.pair_conv[q0:q1] = ci

    def run_pairs(self, ci: int, items: np.ndarray, speaker: int) -> np.ndarray:
        """(len(items) + 1,) the line pair at each run-score index of a lattice (-1: none).

        Index i of a lattice's run scores sits between the speaker's items i - 1 and i: it has a
        pair when those are consecutive non-blank lines of the text."""
        out = np.full(len(items) + 1, -1, dtype=np.int64)
        if len(items) < 2:
            return out
        ids = self.line_ids[ci][speaker]
        left, right = items[:-1], items[1:]
        ok = (right - left == 1) & (ids[left] >= 0) & (ids[right] >= 0)
        out[1:-1][ok] = self.pair_of_left[ids[left[ok]]]
        return out

    def __len__(self) -> int:
        return len(self.speaker)

    def unit_lines(self):
        """(n_units, n_lines) 0/1 CSR: the lines of each unit."""
        import scipy.sparse as sp

        rows = np.repeat(np.arange(len(self)), self.k)
        offsets = np.arange(len(rows)) - np.repeat(np.cumsum(self.k) - self.k, self.k)
        cols = np.repeat(self.first_line, self.k) + offsets
        return sp.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(len(self), len(self.line_text)))

    def length_prior(self, ci: int, p_continue: np.ndarray, merges: int) -> np.ndarray:
        """Log-prior of the length of each candidate unit of conversation `ci`.

        Each line either continues into the next line of its run or ends its unit; the
        continuation probabilities come from the boundary model (`p_continue`, one per pair of
        the corpus), shifted on the logit scale so that they add up to `merges`, the lines this
        reading must merge: the model decides which lines merge, the counts how many.

        Returns:
            (n_candidates of ci,) the sum over the unit's pairs of log P(continue) plus log
            P(end) after its last line (0 where its last line cannot continue).
        """
        l0, l1 = self.conv_lines[ci]
        q0, q1 = self.conv_pairs[ci]
        local = self.pair_left_arr[q0:q1] - l0
        c = calibrate(p_continue[q0:q1], merges)
        log_c = np.zeros(l1 - l0)
        log_end = np.zeros(l1 - l0)
        log_c[local] = np.log(c)
        log_end[local] = np.log1p(-c)
        cum = np.concatenate([[0.0], np.cumsum(log_c)])
        a, b = self.cand_range[ci]
        first = self.first_line[a:b] - l0
        last = first + self.k[a:b] - 1
        return cum[last] - cum[first] + log_end[last]
