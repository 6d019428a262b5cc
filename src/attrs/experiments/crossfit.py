"""Cross-fitted (out-of-fold) probabilities: every row scored by a model that never trained on it.

Label quality and ActiveLab judge a label against a model's prediction; a model that trained on
the label has partly memorised it and vouches for it. `cross_fitted_proba` splits the corpus into
k folds of whole conversations (`psyattrs.data.splits.kfold`, so a sentence's context stays with
it), refits a fresh model of the same kind and settings on the other k - 1 folds, and predicts the
held-out fold. A model that calibrates or tunes decisions on a validation split gets one carved
from its training folds (15% of their conversations).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pandas as pd

from psyattrs.data.splits import kfold
from psyattrs.labels.soft import mixed_targets
from psyattrs.models.base import build_model
from psyattrs.schema import Schema

VALID_SHARE = 0.15


def cross_fitted_proba(
    table: pd.DataFrame,
    schema: Schema,
    *,
    kind: str,
    settings: dict[str, Any],
    folds: int = 5,
    seed: int = 0,
    lam: float = 1.0,
    smoothing: float = 0.0,
    on_fold: Callable[[int, int], None] | None = None,
) -> dict[str, np.ndarray]:
    """Out-of-fold probabilities of every row of a corpus.

    Args:
        table: utterance table (whole conversations; labelled rows are the targets, the rest
            context).
        schema: the heads.
        kind: the model kind (`psyattrs.models.base.KINDS`).
        settings: its settings (`MultiHeadModel.settings` of the model being cross-fitted).
        folds: number of folds (>= 2, at most the number of conversations).
        seed: the fold assignment's seed.
        lam, smoothing: the targets (`psyattrs.labels.soft.mixed_targets`).
        on_fold: called with (fold number from 1, folds) before each fit (progress).

    Returns:
        head -> float array (len(table), K), row i predicted by the model that held out row i's
        conversation.

    Raises:
        ValueError: fewer conversations than folds, or a training part with no target for a head.
    """
    targets = mixed_targets(table, schema, lam=lam, smoothing=smoothing)
    out = {h.name: np.full((len(table), h.n_classes), np.nan) for h in schema}
    needs_valid = bool(settings.get("calibration")) or bool(settings.get("tune_thresholds"))
    for f, (train_rows, held_rows) in enumerate(kfold(table, k=folds, by="doc", seed=seed, stratify=None,
                                                       schema=schema)):
        if on_fold is not None:
            on_fold(f + 1, folds)
        fit_rows, valid = train_rows, None
        if needs_valid:
            fit_rows, valid_rows = _carve(table, train_rows, seed + f)
            valid = (table.iloc[valid_rows], {h: t[valid_rows] for h, t in targets.items()})
        model = build_model(kind, schema, **settings)
        model.fit(table.iloc[fit_rows], {h: t[fit_rows] for h, t in targets.items()}, valid=valid)
        proba = model.predict_proba(table.iloc[held_rows])
        for head in schema:
            out[head.name][held_rows] = proba[head.name]
    return out


def _carve(table: pd.DataFrame, rows: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(fit rows, validation rows): a share of the conversations of `rows` set aside."""
    docs = table["doc_id"].astype(str).to_numpy()[rows]
    keys = np.unique(docs)
    rng = np.random.default_rng(seed)
    n_valid = max(1, int(round(VALID_SHARE * len(keys))))
    held = np.isin(docs, rng.choice(keys, size=n_valid, replace=False))
    return rows[~held], rows[held]
