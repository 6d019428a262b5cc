"""Soft targets: the labelers' class distribution per sentence, and its mix with the final label.

The models consume `mixed_targets(df, schema, ...)`: a dict head -> float array (n_rows, K) whose
rows are probability distributions, or all-NaN where a row is no target (pauses, unlabelled rows).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from psyattrs.data.table import final_column
from psyattrs.labels.resolve import label_values, rated_matrix
from psyattrs.schema import Head, Schema


def _vote_counts(matrix: np.ndarray, n_classes: int) -> np.ndarray:
    """Votes per row and class, shape (n_rows, n_classes), from a (n_rows, n_labelers) NaN matrix."""
    return np.stack([(matrix == c).sum(axis=1) for c in range(n_classes)], axis=1).astype(float)


def _check_smoothing(smoothing: float) -> None:
    if not (isinstance(smoothing, (int, float, np.floating)) and np.isfinite(smoothing) and smoothing >= 0):
        raise ValueError(f"smoothing must be a finite number >= 0, got {smoothing!r}")


def _distribution(counts: np.ndarray, smoothing: float) -> np.ndarray:
    """(counts + smoothing) / (n + K * smoothing) per row; NaN rows where no labeler rated."""
    n = counts.sum(axis=1, keepdims=True)
    k = counts.shape[1]
    with np.errstate(invalid="ignore", divide="ignore"):
        dist = (counts + smoothing) / (n + k * smoothing)
    dist[n[:, 0] == 0] = np.nan
    return dist


def _head(head: "str | Head", n_classes: int) -> Head:
    if isinstance(head, Head):
        if head.n_classes != n_classes:
            raise ValueError(f"head {head.name!r} has {head.n_classes} classes, not n_classes={n_classes}")
        return head
    if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) or n_classes < 2:
        raise ValueError(f"n_classes must be an integer >= 2, got {n_classes!r}")
    return Head(str(head), {c: str(c) for c in range(int(n_classes))})


def soft_targets(df: pd.DataFrame, head: "str | Head", n_classes: int, *, smoothing: float = 0.0) -> np.ndarray:
    """Per row, the distribution of the available labelers' classes.

    Works for any number of labelers and empty cells: a row rated by two of five labelers gets the
    distribution of those two. With additive smoothing s, class c gets (votes_c + s) / (n + K * s).

    Args:
        df: utterance table with `labeler{k}_{head}` columns (Int64 or numbers; empty = not rated).
        head: head name (or `Head`).
        n_classes: number of classes K of the head.
        smoothing: additive pseudo-count per class, >= 0.

    Returns:
        float array (n_rows, K), rows summing to 1; all-NaN rows where no labeler rated.
        Pause rows are not treated specially here (see `mixed_targets`).

    Raises:
        ValueError: the head has no labeler columns, a label is outside 0..K-1, bad smoothing.
    """
    _check_smoothing(smoothing)
    spec = _head(head, n_classes)
    matrix, ids = rated_matrix(df, spec)
    if not ids:
        raise ValueError(f"no labeler{{k}}_{spec.name} columns: soft targets need the labelers' own labels")
    return _distribution(_vote_counts(matrix, spec.n_classes), smoothing)


def mixed_targets(df: pd.DataFrame, schema: Schema, *, lam: float = 1.0, smoothing: float = 0.0) -> dict[str, np.ndarray]:
    """Per head, lam * onehot(final label) + (1 - lam) * the labelers' distribution.

    Row by row:
    - pause rows (`is_pause`): all-NaN; a pause is never a target;
    - final label and labelers: the mix above (lam = 1: the one-hot; lam = 0: the distribution);
    - final label, no labeler rated (e.g. the public release): the one-hot, whatever lam is;
    - labelers, no final label: the labelers' distribution, whatever lam is (it stands in for the
      missing final label);
    - neither: all-NaN.

    Args:
        df: utterance table (`labeler_{head}` and/or `labeler{k}_{head}` columns, `is_pause`).
        schema: the heads.
        lam: weight of the final label, 0 <= lam <= 1.
        smoothing: additive smoothing of the labelers' distribution, >= 0.

    Returns:
        dict head name -> float array (n_rows, K_head), rows summing to 1 or all-NaN.

    Raises:
        ValueError: lam or smoothing out of range, a label outside the head's classes.
    """
    if not (isinstance(lam, (int, float, np.floating)) and 0.0 <= lam <= 1.0):
        raise ValueError(f"lam must be a number in [0, 1], got {lam!r}")
    _check_smoothing(smoothing)
    pause = pause_mask(df)
    out: dict[str, np.ndarray] = {}
    for head in schema:
        k = head.n_classes
        matrix, _ = rated_matrix(df, head)
        soft = _distribution(_vote_counts(matrix, k), smoothing)
        has_soft = ~np.isnan(soft[:, 0])
        col = final_column(head.name)
        final = label_values(df, col, head) if col in df.columns else np.full(len(df), np.nan)
        has_final = ~np.isnan(final)
        hard = np.full((len(df), k), np.nan)
        hard[has_final] = np.eye(k)[final[has_final].astype(int)]
        target = np.full((len(df), k), np.nan)
        both = has_final & has_soft
        target[both] = lam * hard[both] + (1.0 - lam) * soft[both]
        target[has_final & ~has_soft] = hard[has_final & ~has_soft]
        target[~has_final & has_soft] = soft[~has_final & has_soft]
        target[pause] = np.nan
        out[head.name] = target
    return out


def pause_mask(df: pd.DataFrame) -> np.ndarray:
    """Bool array: rows whose `is_pause` is true (bool, 1/0, or "true"/"1" text); all False without the column."""
    if "is_pause" not in df.columns:
        return np.zeros(len(df), dtype=bool)
    col = df["is_pause"]
    if pd.api.types.is_bool_dtype(col.dtype):
        return col.fillna(False).to_numpy(dtype=bool)
    numeric = pd.to_numeric(col, errors="coerce")
    text = col.astype(str).str.strip().str.lower().isin(["true", "yes"])
    return ((numeric.fillna(0) != 0) | text).to_numpy(dtype=bool)
