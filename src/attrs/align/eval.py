"""Naive readings of the public release and scoring of readings against a known truth.

Two naive readings give the floor an aligner has to beat (both one line per label):

- `alternating_reading`: the speakers strictly alternate line by line, the user first; when
  one side runs out the other continues; lines beyond the labels get none.
- `pause_anchored_reading`: the blank persona lines are pinned to label positions that carry the
  pause signature (matched in order, nearest to where an even spread would put them); between
  two pauses, the persona lines of that stretch and a proportional share of the user lines are
  spread evenly over the stretch's labels.

Blank user lines are left out of both (they are visibly not sentences). `score_reading` compares
any reading (these or `align_public`'s) with the true order that `write_public` returns.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from psyattrs.align.priors import SIGNATURE
from psyattrs.data.table import Corpus, final_column, normalize_table

READING_COLUMNS = ("align_confidence", "label_position", "line_start", "line_end")


def _conversation_lines(corpus: Corpus):
    """Per conversation: (doc_id, labels (T, H), persona lines table, user lines table (no blank lines))."""
    if corpus.format != "public" or corpus.label_sequences is None:
        raise ValueError(f"a naive reading needs the public release (format 'public'), got {corpus.format!r}")
    heads = [final_column(h) for h in corpus.schema.head_names]
    seq = {d: g.sort_values("position")[heads].to_numpy(dtype=np.int64) for d, g in corpus.label_sequences.groupby("doc_id", sort=False)}
    lines = {d: g for d, g in corpus.utterances.groupby("doc_id", sort=False)}
    for d in corpus.conversations["doc_id"].astype(str):
        g = lines.get(d, corpus.utterances.iloc[:0])
        p = g[g["person_type"] == "persona"].sort_values("line")
        u = g[(g["person_type"] == "user") & ~g["is_blank"]].sort_values("line")
        yield d, seq.get(d, np.zeros((0, len(heads)), dtype=np.int64)), p, u


def _table(rows: list[dict], corpus: Corpus) -> pd.DataFrame:
    heads = [final_column(h) for h in corpus.schema.head_names]
    cols = ["doc_id", "person_type", "is_pause", "text", "label_position", "line_start", "line_end"] + heads
    table = pd.DataFrame(rows, columns=cols)
    for c in ("label_position", "line_start", "line_end"):
        table[c] = pd.array(table[c].tolist(), dtype="Int64")
    table["align_confidence"] = np.nan
    return normalize_table(table, corpus.schema)


def _row(d: str, lines: pd.DataFrame, i: int, t: int, labels: np.ndarray, heads: list[str]) -> dict:
    line = lines.iloc[i]
    r = {"doc_id": d, "person_type": line["person_type"], "is_pause": bool(line["is_pause"]), "text": line["text"],
         "label_position": t, "line_start": int(line["line"]), "line_end": int(line["line"]) + 1}
    r.update({h: int(v) for h, v in zip(heads, labels[t])})
    return r


def alternating_reading(corpus: Corpus) -> pd.DataFrame:
    """Strict alternation, user first, one line per label (see the module docstring).

    Returns:
        An utterance table like `AlignResult.utterances` (`align_confidence` NaN).
    """
    heads = [final_column(h) for h in corpus.schema.head_names]
    rows = []
    for d, labels, p, u in _conversation_lines(corpus):
        order = []
        for k in range(max(len(p), len(u))):
            if k < len(u):
                order.append((u, k))
            if k < len(p):
                order.append((p, k))
        rows.extend(_row(d, lines, i, t, labels, heads) for t, (lines, i) in enumerate(order[: len(labels)]))
    return _table(rows, corpus)


def _signature_positions(labels: np.ndarray, heads: list[str]) -> np.ndarray:
    cols = [(c, SIGNATURE[h]) for c, h in enumerate(heads) if h in SIGNATURE]
    if not cols or not len(labels):
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.all([labels[:, c] == v for c, v in cols], axis=0))


def _match_in_order(expected: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Increasing candidates for the expected positions (in order), minimising the summed distance;
    when there are fewer candidates than positions, the expected positions themselves."""
    P, S = len(expected), len(candidates)
    if P == 0:
        return np.zeros(0, dtype=np.int64)
    if S < P:
        shifted = np.round(expected).astype(np.int64) - np.arange(P)
        return np.maximum.accumulate(shifted) + np.arange(P)  # strictly increasing
    cost = np.full((P + 1, S + 1), np.inf)
    cost[0, :] = 0.0
    for a in range(1, P + 1):
        for b in range(a, S + 1):
            cost[a, b] = min(cost[a, b - 1], cost[a - 1, b - 1] + abs(candidates[b - 1] - expected[a - 1]))
    chosen, b = [], S
    for a in range(P, 0, -1):
        while cost[a, b] == cost[a, b - 1] and b > a:
            b -= 1
        chosen.append(candidates[b - 1])
        b -= 1
    return np.asarray(chosen[::-1], dtype=np.int64)


def _even_merge(n_a: int, n_b: int) -> list[int]:
    """0/1 sequence spreading n_a items of list 0 and n_b of list 1 evenly, each list in order."""
    keys = [((k + 0.5) / n_a, 0) for k in range(n_a)] + [((k + 0.5) / n_b, 1) for k in range(n_b)]
    return [w for _, w in sorted(keys)]


def pause_anchored_reading(corpus: Corpus) -> pd.DataFrame:
    """Pauses pinned to signature positions, even spreading in between (module docstring).

    Returns:
        An utterance table like `AlignResult.utterances` (`align_confidence` NaN).
    """
    heads = list(corpus.schema.head_names)
    final = [final_column(h) for h in heads]
    rows = []
    for d, labels, p, u in _conversation_lines(corpus):
        T = len(labels)
        blank = p["is_blank"].to_numpy(dtype=bool)
        b_idx = np.flatnonzero(blank)
        n_lines = len(p) + len(u)
        expected = (b_idx + len(u) * b_idx / max(1, len(p))) * T / max(1, n_lines)
        anchors = [int(a) for a in _match_in_order(expected, _signature_positions(labels, heads)) if 0 <= a < T]
        anchors = sorted(set(anchors))[: len(b_idx)]
        # stretches: label ranges between anchors, persona line ranges between blank lines
        bounds_t = [-1] + anchors + [T]
        bounds_p = [-1] + list(b_idx[: len(anchors)]) + [len(p)]
        slots = [bounds_t[k + 1] - bounds_t[k] - 1 for k in range(len(bounds_t) - 1)]
        p_runs = [np.arange(bounds_p[k] + 1, bounds_p[k + 1]) for k in range(len(bounds_p) - 1)]
        need = np.array([max(0, s - len(r)) for s, r in zip(slots, p_runs)], dtype=float)
        share = need / need.sum() * len(u) if need.sum() else np.full(len(need), len(u) / max(1, len(need)))
        cuts = np.concatenate([[0], np.round(np.cumsum(share)).astype(int)])
        cuts[-1] = len(u)
        for k, (lo_t, n_slots, p_run) in enumerate(zip(bounds_t[:-1], slots, p_runs)):
            u_run = np.arange(cuts[k], cuts[k + 1])
            merged = _even_merge(len(p_run), len(u_run))
            pi = ui = 0
            for s, who in enumerate(merged[:n_slots]):
                if who == 0:
                    rows.append(_row(d, p, int(p_run[pi]), lo_t + 1 + s, labels, final))
                    pi += 1
                else:
                    rows.append(_row(d, u, int(u_run[ui]), lo_t + 1 + s, labels, final))
                    ui += 1
            if k < len(anchors):
                rows.append(_row(d, p, int(b_idx[k]), anchors[k], labels, final))
    table = _table(rows, corpus)
    return table.sort_values(["doc_id", "label_position"], kind="stable").reset_index(drop=True)


def score_reading(reading: pd.DataFrame, truth_order: pd.DataFrame, corpus: Corpus) -> dict[str, float]:
    """How well a reading recovers the true order.

    Args:
        reading: an utterance table with `doc_id`, `person_type`, `is_pause`, `line_start`,
            `line_end`, `label_position`, `align_confidence` (NaN allowed).
        truth_order: `PublicTruth.order` of the same file (doc_id, speaker, is_pause,
            line_start, line_end, position).
        corpus: the public corpus read from that file (its label lists).

    Returns:
        `sentences`: true non-pause sentences; `labels_exact`: the share of them for which the
        reading has a row with exactly their lines carrying exactly their labels (what training
        needs); `position_exact`: the share placed with exactly their lines at their true label
        position; `confident_share`: the share of the reading's non-pause rows with confidence
        >= 0.9; `confident_correct`: among those, the share correctly placed (NaN when none).
    """
    heads = [final_column(h) for h in corpus.schema.head_names]
    seq = corpus.label_sequences.set_index(["doc_id", "position"])[heads]
    truth = truth_order[~truth_order["is_pause"].astype(bool) & truth_order["position"].notna()]
    key_t = pd.MultiIndex.from_arrays([truth["doc_id"].astype(str).to_numpy(), truth["speaker"].astype(str).to_numpy(),
                                       truth["line_start"].to_numpy(dtype=float), truth["line_end"].to_numpy(dtype=float)])
    rows = reading[~reading["is_pause"].astype(bool)]
    key_r = pd.MultiIndex.from_arrays([rows["doc_id"].astype(str).to_numpy(), rows["person_type"].astype(str).to_numpy(),
                                       rows["line_start"].to_numpy(dtype=float, na_value=np.nan),
                                       rows["line_end"].to_numpy(dtype=float, na_value=np.nan)])
    r_pos = pd.Series(rows["label_position"].to_numpy(dtype=float, na_value=np.nan), index=key_r)
    r_pos = r_pos[~r_pos.index.duplicated()]
    got = r_pos.reindex(key_t).to_numpy()
    found = ~np.isnan(got)
    true_pos = truth["position"].to_numpy(dtype=float)
    doc = truth["doc_id"].astype(str).to_numpy()
    true_lab = seq.reindex(pd.MultiIndex.from_arrays([doc, true_pos.astype(np.int64)])).to_numpy(dtype=float)
    got_lab = seq.reindex(pd.MultiIndex.from_arrays([doc, np.where(found, got, -1).astype(np.int64)])).to_numpy(dtype=float)
    labels_ok = found & np.all(true_lab == got_lab, axis=1)
    position_ok = found & (got == true_pos)
    t_pos = pd.Series(true_pos, index=key_t)
    t_pos = t_pos[~t_pos.index.duplicated()]
    row_true = t_pos.reindex(key_r).to_numpy()
    row_ok = row_true == rows["label_position"].to_numpy(dtype=float, na_value=np.nan)
    conf = rows["align_confidence"].to_numpy(dtype=float)
    high = conf >= 0.9
    return {
        "sentences": float(len(truth)),
        "labels_exact": float(labels_ok.mean()) if len(truth) else float("nan"),
        "position_exact": float(position_ok.mean()) if len(truth) else float("nan"),
        "confident_share": float(high.mean()) if len(rows) else float("nan"),
        "confident_correct": float(row_ok[high].mean()) if high.any() else float("nan"),
    }
