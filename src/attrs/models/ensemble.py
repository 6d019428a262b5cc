"""An ensemble of multi-head models with per-head weights fitted on the validation split
(kind `ensemble`).

Members are any other kinds (e.g. the transformer and the LightGBM context model), each given as
a mapping with `kind` and that kind's settings; the shared options (`context_previous`, `seed`,
`class_weight`) are inherited unless a member sets its own. Every member is fitted on the training
split (with the validation split, for its own calibration or early stopping); then, per head, the
members' validation probabilities are combined (`combine`) with weights that minimise the
cross-entropy against the validation targets:

- `log_linear` (default): p proportional to prod_m p_m ** a_m, weights a_m >= 0 (free scale: a
  stacked, tempered product of experts; with one member it is temperature scaling, so the pool
  is never worse on validation than its best member calibrated alone);
- `mixture`: sum_m w_m p_m, weights w_m >= 0 summing to 1 (a linear opinion pool).

Without a validation split the weights are equal (mixture) or 1 (log-linear). The fitted weights
are reported through `metrics_callback` (the experiments layer logs them as
`fit_weight_<head>_<member>`) and kept in `weights_`; calibration and tuned thresholds of the
ensemble itself work as for any backend.

The saved folder holds `model.json` and one sub-folder per member (`member0`, ...).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from psyattrs.models.base import MultiHeadModel, build_model, load_model

INHERITED = ("context_previous", "seed", "class_weight")
COMBINES = ("log_linear", "mixture")
_FLOOR = 1e-12


def fit_mixture_weights(probas: list[np.ndarray], targets: np.ndarray) -> np.ndarray:
    """Mixture weights (M,) minimising the mean cross-entropy of sum_m w_m p_m against targets.

    Args:
        probas: M arrays (n, K) of member probabilities on the same rows.
        targets: (n, K) target distributions; all-NaN rows are ignored.

    Returns:
        float array (M,), non-negative, summing to 1 (equal when no row has a target).
    """
    from scipy.optimize import minimize

    m = len(probas)
    rows = ~np.isnan(targets).any(axis=1)
    if m == 1 or not rows.any():
        return np.full(m, 1.0 / m)
    stack = np.stack([p[rows] for p in probas])  # (M, n, K)
    t = targets[rows]

    def loss(z: np.ndarray) -> float:
        w = np.exp(z - z.max())
        w /= w.sum()
        mix = np.clip(np.tensordot(w, stack, axes=1), 1e-12, None)
        return float(-(t * np.log(mix)).sum(axis=1).mean())

    best = minimize(loss, np.zeros(m), method="Nelder-Mead" if m <= 3 else "Powell",
                    options={"xatol": 1e-4, "fatol": 1e-7, "maxiter": 2000})
    w = np.exp(best.x - best.x.max())
    return w / w.sum()


def fit_log_linear_weights(probas: list[np.ndarray], targets: np.ndarray, *, max_weight: float = 50.0) -> np.ndarray:
    """Weights a (M,) >= 0 of the log-linear pool softmax(sum_m a_m log p_m) minimising the mean
    cross-entropy against targets (L-BFGS-B with the exact gradient, from a = 1/M).

    Args:
        probas: M arrays (n, K) of member probabilities on the same rows.
        targets: (n, K) target distributions; rows with a NaN are ignored.
        max_weight: upper bound of each weight.

    Returns:
        float array (M,), non-negative (ones when no row has a target).
    """
    from scipy.optimize import minimize

    m = len(probas)
    rows = ~np.isnan(targets).any(axis=1)
    if not rows.any():
        return np.ones(m)
    logs = np.log(np.clip(np.stack([p[rows] for p in probas]), _FLOOR, None))  # (M, n, K)
    t = targets[rows]
    mass = t.sum(axis=1, keepdims=True)
    n = len(t)

    def loss(a: np.ndarray) -> tuple[float, np.ndarray]:
        z = np.tensordot(a, logs, axes=1)
        z -= z.max(axis=1, keepdims=True)
        lse = np.log(np.exp(z).sum(axis=1, keepdims=True))
        q = np.exp(z - lse)
        value = float(-(t * (z - lse)).sum() / n)
        dz = (mass * q - t) / n
        return value, np.einsum("mnk,nk->m", logs, dz)

    start = np.full(m, 1.0 / m)
    best = minimize(loss, start, jac=True, method="L-BFGS-B", bounds=[(0.0, max_weight)] * m,
                    options={"maxiter": 500, "ftol": 1e-12, "gtol": 1e-9})
    return np.asarray(best.x if best.fun <= loss(start)[0] else start, dtype=float)


def pool(probas: list[np.ndarray], weights: np.ndarray, combine: str) -> np.ndarray:
    """The ensemble's (n, K) probabilities from the members' `probas` (see `combine`)."""
    stack = np.stack(probas)
    if combine == "mixture":
        return np.tensordot(weights, stack, axes=1)
    z = np.tensordot(weights, np.log(np.clip(stack, _FLOOR, None)), axes=1)
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


class EnsembleModel(MultiHeadModel):
    """Members' probabilities mixed with validation-fitted per-head weights (module docstring)."""

    kind = "ensemble"
    kind_defaults = {"members": [], "combine": "log_linear"}
    _packages = ("numpy", "pandas", "scikit-learn", "scipy")

    def __init__(self, schema, **settings: Any):
        super().__init__(schema, **settings)
        self.metrics_callback: Callable[[dict[str, float], int], None] | None = None
        self.members_: list[MultiHeadModel] = []
        self.weights_: dict[str, np.ndarray] = {}

    def _check_params(self) -> None:
        if self.params["combine"] not in COMBINES:
            raise ValueError(f"combine {self.params['combine']!r} is not one of {list(COMBINES)}")
        members = self.params["members"]
        if not isinstance(members, list) or len(members) < 2:
            raise ValueError(f"an ensemble needs a list of at least two members, got {members!r}")
        for i, member in enumerate(members):
            if not isinstance(member, dict) or "kind" not in member:
                raise ValueError(f"ensemble member {i} must be a mapping with 'kind' and its settings, got {member!r}")
            if member["kind"] == "ensemble":
                raise ValueError(f"ensemble member {i}: an ensemble cannot hold another ensemble")
        for member in self._member_models():  # bad member settings fail here, before any fit
            del member

    def _member_settings(self, member: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        settings = {k: v for k, v in member.items() if k != "kind"}
        for name in INHERITED:
            settings.setdefault(name, getattr(self, name))
        return member["kind"], settings

    def _member_models(self) -> list[MultiHeadModel]:
        out = []
        for i, member in enumerate(self.params["members"]):
            kind, settings = self._member_settings(member)
            try:
                out.append(build_model(kind, self.schema, **settings))
            except (ValueError, TypeError) as exc:
                raise ValueError(f"ensemble member {i} ({kind}): {exc}") from None
        return out

    def member_names(self) -> list[str]:
        return [f"m{i}_{m['kind']}" for i, m in enumerate(self.params["members"])]

    def _fit(self, table: pd.DataFrame, targets: dict[str, np.ndarray], *, progress: bool) -> None:
        valid = getattr(self, "_fit_valid", None)
        self.members_ = self._member_models()
        for member in self.members_:
            member.fit(table, targets, valid=valid, progress=progress)
        self.weights_ = {}
        names = self.member_names()
        probas = [m.predict_proba(valid[0]) for m in self.members_] if valid is not None and len(valid[0]) else None
        mixture = self.params["combine"] == "mixture"
        fit = fit_mixture_weights if mixture else fit_log_linear_weights
        for head in self.schema:
            if probas is None:
                self.weights_[head.name] = np.full(len(self.members_), 1.0 / len(self.members_) if mixture else 1.0)
            else:
                self.weights_[head.name] = fit([p[head.name] for p in probas], valid[1][head.name])
        if self.metrics_callback is not None:
            self.metrics_callback({f"weight_{h}_{n}": float(w[j]) for h, w in self.weights_.items()
                                   for j, n in enumerate(names)}, 0)

    def _predict_raw(self, table: pd.DataFrame) -> dict[str, np.ndarray]:
        probas = [m.predict_proba(table) for m in self.members_]
        return {h.name: pool([p[h.name] for p in probas], self.weights_[h.name], self.params["combine"])
                for h in self.schema}

    def _save_state(self, folder: Path) -> dict[str, Any]:
        for i, member in enumerate(self.members_):
            member.save(folder / f"member{i}")
        return {"weights": {h: w.tolist() for h, w in self.weights_.items()}, "combine": self.params["combine"],
                "members": [f"member{i}" for i in range(len(self.members_))]}

    def _load_state(self, folder: Path, state: dict[str, Any]) -> None:
        self.weights_ = {h: np.asarray(w, dtype=float) for h, w in state["weights"].items()}
        self.params["combine"] = state.get("combine", "mixture")  # folders saved before `combine` hold mixture weights
        self.members_ = [load_model(folder / name) for name in state["members"]]
