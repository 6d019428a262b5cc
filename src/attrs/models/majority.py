"""The floor every model is compared with: each head's class prior, the same for every sentence."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from psyattrs.models.base import MultiHeadModel, target_prior


class MajorityModel(MultiHeadModel):
    """Predicts each head's training class distribution (from the target mass) for every row.

    Its decision is the most frequent class (argmax of the prior), unless `tune_thresholds`
    moves it. `context_previous` and `class_weight` are accepted so that any config runs, but have
    no effect: the floor is the plain prior (balanced weights would turn it into a uniform guess).

    Attributes:
        priors_: head -> (K,) class distribution of the training target mass.
    """

    kind = "majority"
    kind_defaults: dict[str, Any] = {}

    def _fit(self, table: pd.DataFrame, targets: dict[str, np.ndarray], *, progress: bool) -> None:
        self.priors_ = {name: target_prior(t) for name, t in targets.items()}

    def _predict_raw(self, table: pd.DataFrame) -> dict[str, np.ndarray]:
        return {name: np.tile(prior, (len(table), 1)) for name, prior in self.priors_.items()}

    def _save_state(self, folder: Path) -> dict[str, Any]:
        return {"priors": {name: prior.tolist() for name, prior in self.priors_.items()}}

    def _load_state(self, folder: Path, state: dict[str, Any]) -> None:
        self.priors_ = {name: np.asarray(prior, dtype=float) for name, prior in state["priors"].items()}
