"""Decision rules on top of probabilities, tuned on the validation split to maximise macro-F1.

- Binary heads: predict class 1 when P(class 1) >= threshold (0.5 untuned). With a rare class
  (`strange`, `uneasy`) argmax almost never predicts it; a tuned threshold trades accuracy for
  recall of the rare class.
- Multi-class heads: predict argmax(log p + offset) with per-class additive offsets (offset of
  class 0 fixed at 0), tuned by coordinate ascent over a grid.

The validation truth of a row is the argmax of its target distribution (lowest class on ties).
"""

from __future__ import annotations

import numpy as np

_EPS = 1e-12
_OFFSET_GRID = np.round(np.linspace(-4.0, 4.0, 41), 6)


def macro_f1(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int) -> float:
    """Macro-F1 over the classes present in `y_true` or `y_pred` (as scikit-learn, zero_division=0)."""
    y_true = np.asarray(y_true, dtype=np.int64)
    y_pred = np.asarray(y_pred, dtype=np.int64)
    cm = np.bincount(y_true * n_classes + y_pred, minlength=n_classes * n_classes).reshape(n_classes, n_classes)
    tp = np.diag(cm).astype(float)
    denom = cm.sum(axis=0) + cm.sum(axis=1)
    present = denom > 0
    f1 = np.divide(2 * tp, denom, out=np.zeros(n_classes), where=present)
    return float(f1[present].mean()) if present.any() else 0.0


def tune_binary_threshold(p1: np.ndarray, y: np.ndarray) -> float:
    """The threshold t on P(class 1) that maximises macro-F1 of `p1 >= t` against `y`.

    Candidates are the midpoints between distinct predicted values (at most ~1000 quantiles);
    among equally good thresholds the one closest to 0.5 wins.

    Args:
        p1: predicted probability of class 1, shape (n,).
        y: true classes 0/1, shape (n,).

    Returns:
        The threshold, a float in (0, 1]; 0.5 when `y` holds one class only.
    """
    p1 = np.asarray(p1, dtype=float)
    y = np.asarray(y, dtype=np.int64)
    if len(np.unique(y)) < 2:
        return 0.5
    values = np.unique(p1)
    if len(values) > 1000:
        values = np.unique(np.quantile(p1, np.linspace(0, 1, 1001)))
    candidates = np.unique(np.r_[(values[:-1] + values[1:]) / 2, values[0] / 2, 0.5, min(1.0, values[-1] + _EPS)])
    candidates = candidates[(candidates > 0) & (candidates <= 1)]
    # counts of each class with p1 >= t, for all t at once
    order = np.argsort(p1)
    sorted_p, sorted_y = p1[order], y[order]
    above = len(p1) - np.searchsorted(sorted_p, candidates, side="left")  # rows with p >= t
    ones_suffix = np.r_[np.cumsum(sorted_y[::-1])[::-1], 0]
    start = len(p1) - above
    tp1 = ones_suffix[start]
    fp1 = above - tp1
    n1 = sorted_y.sum()
    fn1 = n1 - tp1
    tp0 = (len(p1) - n1) - fp1
    f1_1 = np.divide(2 * tp1, 2 * tp1 + fp1 + fn1, out=np.zeros(len(candidates)), where=(2 * tp1 + fp1 + fn1) > 0)
    f1_0 = np.divide(2 * tp0, 2 * tp0 + fn1 + fp1, out=np.zeros(len(candidates)), where=(2 * tp0 + fn1 + fp1) > 0)
    score = (f1_0 + f1_1) / 2
    best = np.flatnonzero(score >= score.max() - 1e-12)
    return float(candidates[best[np.argmin(np.abs(candidates[best] - 0.5))]])


def tune_class_offsets(proba: np.ndarray, y: np.ndarray, *, sweeps: int = 3) -> np.ndarray:
    """Per-class additive offsets on log-probabilities that maximise macro-F1 of the argmax.

    Coordinate ascent: for each class c >= 1 in turn, try offsets in [-4, 4] (step 0.2) with the
    others fixed and keep the best (the current value on ties); `sweeps` passes.

    Args:
        proba: predicted probabilities (n, K).
        y: true classes in 0..K-1, shape (n,).

    Returns:
        float array (K,), offset of class 0 = 0; all zeros when nothing beats plain argmax.
    """
    logp = np.log(np.clip(np.asarray(proba, dtype=float), _EPS, 1.0))
    y = np.asarray(y, dtype=np.int64)
    k = logp.shape[1]
    offsets = np.zeros(k)
    best = macro_f1(y, np.argmax(logp, axis=1), k)
    for _ in range(sweeps):
        improved = False
        for c in range(1, k):
            for value in _OFFSET_GRID:
                trial = offsets.copy()
                trial[c] = value
                score = macro_f1(y, np.argmax(logp + trial, axis=1), k)
                if score > best + 1e-12:
                    best, offsets, improved = score, trial, True
        if not improved:
            break
    return offsets


def apply_decision(
    proba: np.ndarray, *, threshold: float | None = None, offsets: np.ndarray | None = None
) -> np.ndarray:
    """Class decisions from probabilities (n, K): threshold for binary heads, offsets for
    multi-class heads, plain argmax when neither is given. Returns int64 (n,)."""
    proba = np.asarray(proba, dtype=float)
    if threshold is not None:
        return (proba[:, 1] >= threshold).astype(np.int64)
    if offsets is not None:
        return np.argmax(np.log(np.clip(proba, _EPS, 1.0)) + np.asarray(offsets), axis=1).astype(np.int64)
    return np.argmax(proba, axis=1).astype(np.int64)
