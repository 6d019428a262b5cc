"""Per-head probability calibration, fitted on the validation split.

A calibrator maps one head's predicted probabilities (n, K) to calibrated ones (n, K); it is fitted
by minimising the cross-entropy against target distributions (one-hot final labels, soft labeler
distributions or a mix), so soft validation targets work as they are.

- `TemperatureScaling` (`temperature`): p' = softmax(log p / T), one T per head (keeps argmax).
- `PlattScaling` (`platt`): binary heads: P'(1) = sigmoid(a * logit P(1) + b) (Platt 1999);
  multi-class heads: per-class a_c * log p_c + b_c, then softmax ("vector scaling", Guo et al.
  2017), the multi-class extension of Platt's two parameters. Slightly regularised towards the
  identity (a = 1, b = 0) so a class that is absent from the validation split stays finite.

Both round-trip through `to_dict` / `calibrator_from_dict` (plain JSON).
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

import numpy as np
from scipy.optimize import minimize, minimize_scalar

_EPS = 1e-12
METHODS: tuple[str, ...] = ("temperature", "platt")


def _log_proba(proba: np.ndarray) -> np.ndarray:
    return np.log(np.clip(np.asarray(proba, dtype=float), _EPS, 1.0))


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def cross_entropy(proba: np.ndarray, targets: np.ndarray) -> float:
    """Mean cross-entropy -sum_c t_c log p_c over rows (probabilities clipped at 1e-12)."""
    return float(-(np.asarray(targets, dtype=float) * _log_proba(proba)).sum(axis=1).mean())


def _check_pair(proba: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    proba = np.asarray(proba, dtype=float)
    targets = np.asarray(targets, dtype=float)
    if proba.ndim != 2 or proba.shape != targets.shape:
        raise ValueError(f"probabilities {proba.shape} and targets {targets.shape} must both be (n_rows, n_classes)")
    if len(proba) == 0:
        raise ValueError("calibration needs at least one validation row with a target")
    if np.isnan(targets).any() or np.isnan(proba).any():
        raise ValueError("calibration rows must not hold NaN (drop rows that are not targets first)")
    return proba, targets


class Calibrator(abc.ABC):
    """Maps one head's probabilities to calibrated probabilities.

    Subclasses set `method` and implement `fit`, `transform`, `_params` / `_set_params`.
    """

    method: ClassVar[str]

    @abc.abstractmethod
    def fit(self, proba: np.ndarray, targets: np.ndarray) -> "Calibrator":
        """Fits on validation rows.

        Args:
            proba: predicted probabilities (n, K), rows summing to 1.
            targets: target distributions (n, K), rows summing to 1, no NaN rows.

        Returns:
            self, fitted.
        """

    @abc.abstractmethod
    def transform(self, proba: np.ndarray) -> np.ndarray:
        """Calibrated probabilities (n, K), rows summing to 1."""

    def fit_transform(self, proba: np.ndarray, targets: np.ndarray) -> np.ndarray:
        return self.fit(proba, targets).transform(proba)

    @abc.abstractmethod
    def _params(self) -> dict[str, Any]: ...

    @abc.abstractmethod
    def _set_params(self, params: dict[str, Any]) -> None: ...

    def to_dict(self) -> dict[str, Any]:
        """{"method": ..., **fitted parameters} as plain JSON values."""
        return {"method": self.method, **self._params()}


class TemperatureScaling(Calibrator):
    """p' = softmax(log p / T) with one temperature T > 0 (T > 1 softens, T < 1 sharpens).

    Attributes:
        temperature_: the fitted temperature, searched in [0.05, 20].
    """

    method = "temperature"

    def fit(self, proba: np.ndarray, targets: np.ndarray) -> "TemperatureScaling":
        proba, targets = _check_pair(proba, targets)
        logp = _log_proba(proba)

        def loss(log_t: float) -> float:
            return -(targets * np.log(np.clip(_softmax(logp / np.exp(log_t)), _EPS, 1))).sum(axis=1).mean()

        result = minimize_scalar(loss, bounds=(np.log(0.05), np.log(20.0)), method="bounded", options={"xatol": 1e-5})
        self.temperature_ = float(np.exp(result.x)) if loss(result.x) <= loss(0.0) else 1.0
        return self

    def transform(self, proba: np.ndarray) -> np.ndarray:
        return _softmax(_log_proba(proba) / self.temperature_)

    def _params(self) -> dict[str, Any]:
        return {"temperature": self.temperature_}

    def _set_params(self, params: dict[str, Any]) -> None:
        self.temperature_ = float(params["temperature"])


class PlattScaling(Calibrator):
    """Platt scaling (binary) or vector scaling (multi-class), see the module docstring.

    Args:
        l2: strength of the pull towards the identity map, relative to the number of rows.

    Attributes:
        slope_: (K,) per-class slopes a_c (binary: [0, a] on the logit of class 1).
        intercept_: (K,) per-class intercepts b_c (binary: [0, b]).
    """

    method = "platt"

    def __init__(self, l2: float = 1e-3):
        self.l2 = l2

    @staticmethod
    def _features(logp: np.ndarray) -> np.ndarray:
        if logp.shape[1] == 2:  # logit of class 1 in the class-1 column, class 0 as reference
            return np.column_stack([np.zeros(len(logp)), logp[:, 1] - logp[:, 0]])
        return logp

    def fit(self, proba: np.ndarray, targets: np.ndarray) -> "PlattScaling":
        proba, targets = _check_pair(proba, targets)
        x = self._features(_log_proba(proba))
        n, k = x.shape
        free = np.arange(1, k) if k == 2 else np.arange(k)  # binary: class 0 is the reference
        lam = self.l2 * n

        def unpack(theta):
            a, b = np.ones(k), np.zeros(k)
            a[free] = theta[: len(free)]
            b[free] = theta[len(free) :]
            return a, b

        def loss_grad(theta):
            a, b = unpack(theta)
            p = _softmax(x * a + b)
            loss = -(targets * np.log(np.clip(p, _EPS, 1))).sum() + 0.5 * lam * (((a - 1) ** 2).sum() + (b**2).sum())
            r = p - targets
            ga = (r * x).sum(axis=0) + lam * (a - 1)
            gb = r.sum(axis=0) + lam * b
            return loss / n, np.r_[ga[free], gb[free]] / n

        theta0 = np.r_[np.ones(len(free)), np.zeros(len(free))]
        result = minimize(loss_grad, theta0, jac=True, method="L-BFGS-B")
        self.slope_, self.intercept_ = unpack(result.x)
        return self

    def transform(self, proba: np.ndarray) -> np.ndarray:
        x = self._features(_log_proba(proba))
        return _softmax(x * self.slope_ + self.intercept_)

    def _params(self) -> dict[str, Any]:
        return {"l2": self.l2, "slope": self.slope_.tolist(), "intercept": self.intercept_.tolist()}

    def _set_params(self, params: dict[str, Any]) -> None:
        self.l2 = float(params.get("l2", self.l2))
        self.slope_ = np.asarray(params["slope"], dtype=float)
        self.intercept_ = np.asarray(params["intercept"], dtype=float)


_CALIBRATORS: dict[str, type[Calibrator]] = {"temperature": TemperatureScaling, "platt": PlattScaling}


def make_calibrator(method: str) -> Calibrator:
    """A new, unfitted calibrator; ValueError naming the allowed methods for an unknown one."""
    if method not in _CALIBRATORS:
        raise ValueError(f"calibration {method!r} is not one of {sorted(_CALIBRATORS)} (or None)")
    return _CALIBRATORS[method]()


def calibrator_from_dict(data: dict[str, Any]) -> Calibrator:
    """Rebuilds a fitted calibrator from `Calibrator.to_dict()`."""
    calibrator = make_calibrator(data.get("method"))
    calibrator._set_params(data)
    return calibrator
