"""Inter-annotator agreement: Krippendorff's alpha, Fleiss' kappa, agreement with the final label.

The matrix functions take ratings as a float array (n_items, n_raters) with NaN where a rater did
not rate (as `rated_matrix` returns them). `corpus_agreement` collects every figure per head of an
utterance table, pause rows excluded.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from psyattrs.data.table import final_column
from psyattrs.labels.resolve import all_different_mask, label_values, rated_matrix
from psyattrs.labels.soft import pause_mask
from psyattrs.schema import Head, Schema

LEVELS: tuple[str, ...] = ("nominal", "ordinal", "interval")


def _as_ratings(ratings: "np.ndarray | Sequence") -> np.ndarray:
    matrix = np.asarray(ratings, dtype=float)
    if matrix.ndim != 2:
        raise ValueError(f"ratings must be a 2-D array (items x raters), got shape {matrix.shape}")
    return matrix


def _value_counts(matrix: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per item, how many raters gave each value: shape (n_items, len(values))."""
    if len(values) == 0:
        return np.zeros((matrix.shape[0], 0))
    return np.stack([(matrix == v).sum(axis=1) for v in values], axis=1).astype(float)


def _distance(level: str, values: np.ndarray, n_v: np.ndarray) -> np.ndarray:
    """The squared difference function delta^2(c, k) of a measurement level."""
    if level == "nominal":
        return 1.0 - np.eye(len(values))
    if level == "interval":
        return (values[:, None] - values[None, :]) ** 2
    # ordinal: (sum of n_g for g from c to k, minus (n_c + n_k) / 2) squared
    cum = np.cumsum(n_v)
    lo = np.minimum.outer(np.arange(len(values)), np.arange(len(values)))
    hi = np.maximum.outer(np.arange(len(values)), np.arange(len(values)))
    between = cum[hi] - cum[lo] + n_v[lo]
    return (between - (n_v[:, None] + n_v[None, :]) / 2.0) ** 2


def krippendorff_alpha(ratings: "np.ndarray | Sequence", *, level: str = "nominal") -> float:
    """Krippendorff's alpha over the values that occur, with missing ratings.

    Items with fewer than two ratings are not pairable and do not count. Matches the
    `krippendorff` package (its default value domain: the values present).

    Args:
        ratings: (n_items, n_raters) numbers, NaN where a rater did not rate.
        level: nominal, ordinal or interval.

    Returns:
        alpha in [-1, 1] (1 = perfect agreement, 0 = chance); NaN when no item has two ratings or
        only one value occurs (expected disagreement is 0, alpha undefined).

    Raises:
        ValueError: unknown level, or ratings not 2-D.
    """
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; allowed: {list(LEVELS)}")
    matrix = _as_ratings(ratings)
    values = np.unique(matrix[~np.isnan(matrix)])
    counts = _value_counts(matrix, values)
    m = counts.sum(axis=1)
    counts, m = counts[m >= 2], m[m >= 2]
    if len(m) == 0 or len(values) < 2:
        return float("nan")
    weighted = counts / (m - 1.0)[:, None]
    coincidence = weighted.T @ counts - np.diag(weighted.sum(axis=0))
    n_v = coincidence.sum(axis=1)
    n = n_v.sum()
    delta = _distance(level, values, n_v)
    expected = (np.outer(n_v, n_v) * delta).sum() / (n - 1.0)
    if expected == 0:
        return float("nan")
    return float(1.0 - (coincidence * delta).sum() / expected)


def modal_rater_items(ratings: "np.ndarray | Sequence") -> tuple[np.ndarray, int]:
    """The items Fleiss' kappa uses: those rated by the most common number of raters (>= 2).

    Args:
        ratings: (n_items, n_raters) numbers, NaN where a rater did not rate.

    Returns:
        (mask, m): bool array over items, and that number of raters m (ties between equally common
        numbers go to the larger; 0 and an all-False mask when no item has two ratings).
    """
    matrix = _as_ratings(ratings)
    per_item = (~np.isnan(matrix)).sum(axis=1)
    rated = per_item[per_item >= 2]
    if len(rated) == 0:
        return np.zeros(len(per_item), dtype=bool), 0
    freq = np.bincount(rated)
    m = int(np.flatnonzero(freq == freq.max())[-1])
    return per_item == m, m


def fleiss_kappa(ratings: "np.ndarray | Sequence") -> float:
    """Fleiss' kappa on the items rated by the modal number of raters (see `modal_rater_items`).

    Fleiss' kappa needs the same number of ratings per item; which raters gave them may differ.
    Items with another number of ratings are left out (for OPELA every item has three).

    Args:
        ratings: (n_items, n_raters) class values, NaN where a rater did not rate.

    Returns:
        kappa = (P - Pe) / (1 - Pe); NaN when no item qualifies or only one class occurs.
    """
    matrix = _as_ratings(ratings)
    mask, m = modal_rater_items(matrix)
    if m == 0:
        return float("nan")
    used = matrix[mask]
    counts = _value_counts(used, np.unique(used[~np.isnan(used)]))
    p_class = counts.sum(axis=0) / counts.sum()
    p_item = ((counts**2).sum(axis=1) - m) / (m * (m - 1.0))
    p_expected = float((p_class**2).sum())
    if p_expected >= 1.0:
        return float("nan")
    return float((p_item.mean() - p_expected) / (1.0 - p_expected))


def labeler_agreement(ratings: np.ndarray, ids: Sequence[int], final: np.ndarray) -> pd.DataFrame:
    """Each labeler's agreement with the final label.

    Args:
        ratings: (n_items, n_labelers), NaN = not rated.
        ids: labeler number of each column.
        final: final labels (n_items,), NaN = none.

    Returns:
        DataFrame, index = labeler number (`labeler`), columns n (items with both a rating and a
        final label) and agreement (share equal; NaN when n is 0).
    """
    ratings = _as_ratings(ratings)
    final = np.asarray(final, dtype=float)
    both = ~np.isnan(ratings) & ~np.isnan(final)[:, None]
    n = both.sum(axis=0)
    same = (both & (ratings == final[:, None])).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(n > 0, same / np.maximum(n, 1), np.nan)
    return pd.DataFrame({"n": n.astype(int), "agreement": share}, index=pd.Index(list(ids), name="labeler"))


def class_balance(final: np.ndarray, head: Head) -> pd.DataFrame:
    """Counts and shares of the final labels of one head.

    Args:
        final: final labels (n_items,), NaN = none.
        head: the head (its classes name the rows).

    Returns:
        DataFrame, index = class 0..K-1 (`class`), columns name, count, share (of the labelled
        items; NaN when none is labelled).
    """
    final = np.asarray(final, dtype=float)
    labelled = final[~np.isnan(final)].astype(int)
    counts = np.bincount(labelled, minlength=head.n_classes)[: head.n_classes]
    total = counts.sum()
    shares = counts / total if total else np.full(head.n_classes, np.nan)
    return pd.DataFrame(
        {"name": [head.classes[c] for c in head.values], "count": counts.astype(int), "share": shares},
        index=pd.RangeIndex(head.n_classes, name="class"),
    )


def _num(x: float) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def annotator_agreement(annotations: pd.DataFrame, df: pd.DataFrame, head: Head,
                        *, rows: np.ndarray | None = None) -> pd.DataFrame:
    """Each annotator's agreement with the final label, from the long annotation table.

    Args:
        annotations: long table (sent_id, annotator, head, label).
        df: utterance table with `sent_id` and `labeler_{head}`.
        head: the head.
        rows: bool mask of the utterances to use (default all).

    Returns:
        DataFrame, index = annotator id (`labeler`, str, sorted), columns n (their ratings of
        utterances with a final label) and agreement (share equal to it; NaN when n is 0).
    """
    col = final_column(head.name)
    final = label_values(df, col, head) if col in df.columns else np.full(len(df), np.nan)
    if rows is not None:
        final = np.where(rows, final, np.nan)
    part = annotations[annotations["head"] == head.name]
    at = pd.Index(df["sent_id"].astype(str)).get_indexer(part["sent_id"].astype(str))
    f = np.where(at >= 0, final[np.maximum(at, 0)], np.nan)
    frame = pd.DataFrame({"labeler": part["annotator"].astype(str).to_numpy(), "has": ~np.isnan(f),
                          "same": (~np.isnan(f)) & (part["label"].to_numpy() == f)})
    grouped = frame.groupby("labeler", sort=True)
    n = grouped["has"].sum().astype(int)
    same = grouped["same"].sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(n > 0, same / np.maximum(n, 1), np.nan)
    return pd.DataFrame({"n": n.to_numpy(), "agreement": share}, index=pd.Index(n.index, name="labeler"))


def head_agreement(df: pd.DataFrame, head: Head, *, rows: np.ndarray | None = None,
                   annotations: pd.DataFrame | None = None) -> dict[str, Any]:
    """All agreement figures of one head.

    Args:
        df: utterance table (`labeler{k}_{head}` and `labeler_{head}` columns, either may be absent).
        head: the head.
        rows: bool mask of the rows to use (default all); the whole table is checked either way,
            so an error names the row as the file counts it.
        annotations: the corpus' long annotation table, for corpora of many annotators: then
            `labeler{k}_{head}` are vote slots (alpha, kappa and all-different are per item and read
            them), while `n_labelers` counts distinct annotators and `labeler_agreement` is per
            annotator id (`annotator_agreement`).

    Returns:
        dict with keys: n_items, n_final (rows with a final label), n_labelers, class_balance (list
        of {class, name, count, share}), alpha_level, krippendorff_alpha, fleiss_kappa,
        fleiss_items, fleiss_raters, labeler_agreement (list of {labeler, n, agreement}),
        all_different ({n_items: rows with >= 3 labels, n: of those with no two alike, share}).
        Undefined figures are None.
    """
    ratings, ids = rated_matrix(df, head)
    col = final_column(head.name)
    final = label_values(df, col, head) if col in df.columns else np.full(len(df), np.nan)
    if rows is not None:
        ratings, final = ratings[rows], final[rows]
    level = "ordinal" if head.ordinal else "nominal"
    fleiss_mask, fleiss_m = modal_rater_items(ratings)
    eligible, all_diff = all_different_mask(ratings, head.n_classes)
    balance = class_balance(final, head)
    if annotations is None:
        agree = labeler_agreement(ratings, ids, final)
        agreement_rows = [{"labeler": int(k), "n": int(r["n"]), "agreement": _num(r["agreement"])}
                          for k, r in agree.iterrows()]
        n_labelers = len(ids)
    else:
        agree = annotator_agreement(annotations, df, head, rows=rows)
        agreement_rows = [{"labeler": str(k), "n": int(r["n"]), "agreement": _num(r["agreement"])}
                          for k, r in agree.iterrows()]
        n_labelers = len(agree)
    n_eligible = int(eligible.sum())
    return {
        "n_items": int(len(final)),
        "n_final": int((~np.isnan(final)).sum()),
        "n_labelers": n_labelers,
        "class_balance": [
            {"class": int(c), "name": r["name"], "count": int(r["count"]), "share": _num(r["share"])}
            for c, r in balance.iterrows()
        ],
        "alpha_level": level,
        "krippendorff_alpha": _num(krippendorff_alpha(ratings, level=level)),
        "fleiss_kappa": _num(fleiss_kappa(ratings)),
        "fleiss_items": int(fleiss_mask.sum()),
        "fleiss_raters": fleiss_m,
        "labeler_agreement": agreement_rows,
        "all_different": {
            "n_items": n_eligible,
            "n": int(all_diff.sum()),
            "share": _num(all_diff.sum() / n_eligible) if n_eligible else None,
        },
    }


def corpus_agreement(df: pd.DataFrame, schema: Schema, *, annotations: pd.DataFrame | None = None) -> dict[str, Any]:
    """Agreement and class balance per head of an utterance table, pause rows excluded.

    Args:
        df: utterance table (`labeler{k}_{head}`, `labeler_{head}`, `is_pause` columns; any may be
            missing: figures that need them are then None).
        schema: the heads.
        annotations: the long annotation table of a corpus of many annotators (see `head_agreement`).

    Returns:
        JSON-ready dict: n_rows, n_pauses (rows excluded), n_items (rows used), schema (name), and
        heads: head name -> `head_agreement` dict. Undefined figures are None.

    Raises:
        ValueError: a label outside its head's classes.
    """
    pause = pause_mask(df)
    return {
        "n_rows": int(len(df)),
        "n_pauses": int(pause.sum()),
        "n_items": int((~pause).sum()),
        "schema": schema.name,
        "heads": {head.name: head_agreement(df, head, rows=~pause, annotations=annotations) for head in schema},
    }
