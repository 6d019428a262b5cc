"""The multi-head interface every model backend implements, and what they share.

A model predicts every head of a `Schema` for every row of an utterance table (see
`psyattrs.data.table`): ALL rows of each conversation in chronological order, pause rows and
unlabelled rows included, since they are context. Targets are per-head float arrays
(len(table), K): a distribution per row (one-hot final labels, the labelers' soft distribution or a
mix, as `psyattrs.labels.soft.mixed_targets` builds them); an all-NaN row is no target. Pause rows
are never targets, whatever their row holds.

Soft targets are learnt by sample-weighted expansion: a row with distribution p becomes one copy
per class c with p_c > 0, labelled c, with weight p_c (`expand_soft_targets`). For a loss that is
a weighted sum over rows this is exactly the cross-entropy against p.

Options shared by every model (constructor keywords):
- `context_previous`: how many earlier sentences of the conversation the model sees.
- `class_weight`: None or `balanced` (class c weighted total_mass / (K_present * mass_c)).
- `tune_thresholds`: tune decisions on `valid` (binary: threshold on P(class 1); multi-class:
  per-class log-probability offsets), see `psyattrs.models.decision`.
- `calibration`: None, `temperature` or `platt`, fitted per head on `valid`.
- `seed`: every random choice of the model.

A saved model is a folder: `model.json` (kind, schema, settings, versions, per-head decision
rules and calibrators) plus the backend's files. Saved models hold pickles (joblib): load only
models you trust.
"""

from __future__ import annotations

import abc
import importlib
import json
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from sklearn.exceptions import NotFittedError

from psyattrs.errors import InputFileError
from psyattrs.features.context import prepare_table
from psyattrs.models.calibration import Calibrator, calibrator_from_dict, make_calibrator
from psyattrs.models.decision import apply_decision, tune_binary_threshold, tune_class_offsets
from psyattrs.schema import Schema

FORMAT_VERSION = 1
MODEL_FILE = "model.json"
CLASS_WEIGHTS: tuple[str | None, ...] = (None, "balanced")
CALIBRATIONS: tuple[str | None, ...] = (None, "temperature", "platt")
KINDS: dict[str, str] = {
    "majority": "psyattrs.models.majority:MajorityModel",
    "tfidf": "psyattrs.models.tfidf:TfidfModel",
    "tfidf_annotators": "psyattrs.models.annotators:AnnotatorTfidfModel",
    "lightgbm": "psyattrs.models.gbm:LightGBMModel",
    "transformer": "psyattrs.models.transformer.model:TransformerModel",
    "ensemble": "psyattrs.models.ensemble:EnsembleModel",
}
MODEL_KINDS: tuple[str, ...] = tuple(KINDS)  # the `model.kind` values a config may name
_ROW_SUM_TOLERANCE = 1e-6


# ----------------------------------------------------------------------------------------------
# soft targets and class weights


def expand_soft_targets(targets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sample-weighted expansion of soft targets: one weighted copy per class with mass.

    Args:
        targets: float array (n, K); rows are distributions or all-NaN (no target).

    Returns:
        (rows, labels, weights), three 1-D arrays of equal length: for every target row r and
        class c with targets[r, c] > 0, the row number r (int64), the class c (int64) and the
        weight targets[r, c] (float64). Ordered by row, then class; NaN rows do not appear.
    """
    targets = np.asarray(targets, dtype=float)
    mass = np.where(np.isnan(targets), 0.0, targets)
    rows, labels = np.nonzero(mass > 0)
    return rows.astype(np.int64), labels.astype(np.int64), mass[rows, labels]


def class_weight_vector(targets: np.ndarray, class_weight: str | None) -> np.ndarray:
    """Per-class weight multipliers (K,) from the training target mass.

    Args:
        targets: float array (n, K) with NaN rows for non-targets.
        class_weight: None (all ones) or `balanced`: total_mass / (K_present * mass_c) for classes
            with mass, 0 for classes without (they have no rows to weight).

    Returns:
        float array (K,).
    """
    k = targets.shape[1]
    if class_weight is None:
        return np.ones(k)
    mass = np.nansum(np.asarray(targets, dtype=float), axis=0)
    present = mass > 0
    out = np.zeros(k)
    out[present] = mass.sum() / (present.sum() * mass[present])
    return out


def weighted_expansion(targets: np.ndarray, class_weight: str | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`expand_soft_targets` with the weights multiplied by `class_weight_vector`."""
    rows, labels, weights = expand_soft_targets(targets)
    return rows, labels, weights * class_weight_vector(targets, class_weight)[labels]


def full_proba(proba: np.ndarray, classes: np.ndarray, n_classes: int) -> np.ndarray:
    """Spreads an estimator's probability columns (for `classes`) into all K classes (0 elsewhere)."""
    out = np.zeros((proba.shape[0], n_classes))
    out[:, np.asarray(classes, dtype=np.int64)] = proba
    return out


def target_prior(targets: np.ndarray) -> np.ndarray:
    """The class distribution of the target mass (K,); uniform when there is no mass."""
    mass = np.nansum(np.asarray(targets, dtype=float), axis=0)
    total = mass.sum()
    return mass / total if total > 0 else np.full(targets.shape[1], 1.0 / targets.shape[1])


def check_targets(schema: Schema, table: pd.DataFrame, targets: Any, *, what: str = "targets") -> dict[str, np.ndarray]:
    """Validates targets against a table; returns float copies with pause rows blanked (NaN).

    Args:
        schema: the model's schema; every head needs a target array.
        table: the utterance table the targets belong to (row i of each array = `table.iloc[i]`).
        targets: head name -> array (len(table), K_head).
        what: how to name the targets in errors (`targets`, `valid targets`).

    Returns:
        head -> float64 array (len(table), K), rows distributions or all-NaN; pause rows all-NaN.

    Raises:
        TypeError: targets is not a mapping.
        ValueError: a missing or unknown head, a wrong shape, partly-NaN rows, negative values or
            rows not summing to 1 (names the head and the first bad rows).
    """
    if not isinstance(targets, dict):
        raise TypeError(f"{what} must be a dict head name -> array, got {type(targets).__name__}")
    missing = [h for h in schema.head_names if h not in targets]
    unknown = sorted(set(targets) - set(schema.head_names))
    if missing or unknown:
        raise ValueError(
            f"{what}: missing head(s) {missing}, unknown head(s) {unknown}; the schema's heads: {schema.head_names}"
        )
    pause = prepare_table(table)["is_pause"].to_numpy() if "is_pause" in table.columns else np.zeros(len(table), bool)
    out: dict[str, np.ndarray] = {}
    for head in schema:
        arr = np.array(targets[head.name], dtype=float, copy=True)
        if arr.shape != (len(table), head.n_classes):
            raise ValueError(
                f"{what}[{head.name!r}] has shape {arr.shape}; "
                f"expected (rows, classes) = {(len(table), head.n_classes)}"
            )
        nan = np.isnan(arr)
        partly = np.flatnonzero(nan.any(axis=1) & ~nan.all(axis=1))
        if len(partly):
            raise ValueError(
                f"{what}[{head.name!r}]: rows {partly[:5].tolist()} are partly NaN; a row is a distribution or all NaN"
            )
        rows = ~nan.all(axis=1)
        if np.isinf(arr[rows]).any() or (arr[rows] < 0).any():
            bad = np.flatnonzero(rows & ((arr < 0) | np.isinf(arr)).any(axis=1))
            raise ValueError(f"{what}[{head.name!r}]: rows {bad[:5].tolist()} hold negative or infinite values")
        sums = arr[rows].sum(axis=1)
        off = np.flatnonzero(rows)[np.abs(sums - 1.0) > _ROW_SUM_TOLERANCE]
        if len(off):
            raise ValueError(
                f"{what}[{head.name!r}]: rows {off[:5].tolist()} do not sum to 1 (a row is a distribution)"
            )
        arr[pause] = np.nan
        out[head.name] = arr
    return out


# ----------------------------------------------------------------------------------------------
# the interface


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value


def _versions(packages: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for name in packages:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


class MultiHeadModel(abc.ABC):
    """One model that predicts every head of a schema (see the module docstring).

    Args:
        schema: the heads to predict.
        context_previous: earlier sentences of the conversation the model sees (>= 0).
        class_weight: None or `balanced`.
        tune_thresholds: tune per-head decisions on `valid` (needs `valid` in `fit`).
        calibration: None, `temperature` or `platt` (needs `valid` in `fit`).
        seed: random seed.
        **kind_specific: the backend's own settings (`kind_defaults` lists them and their
            defaults).

    Attributes:
        kind: `majority`, `tfidf` or `lightgbm`.
        kind_defaults: the backend's settings and their defaults.
        params: the backend's settings in effect.
        calibrators_: head -> fitted `Calibrator` (only with `calibration`).
        thresholds_: head -> threshold on P(class 1) (binary heads, only with `tune_thresholds`).
        offsets_: head -> per-class log-probability offsets (multi-class heads, ditto).
        n_targets_: head -> number of training rows with a target.

    Raises:
        TypeError: schema is not a `Schema`.
        ValueError: a bad option value or an unknown backend setting (names it and the allowed).
    """

    kind: ClassVar[str]
    kind_defaults: ClassVar[dict[str, Any]] = {}
    _packages: ClassVar[tuple[str, ...]] = ("numpy", "pandas", "scikit-learn")

    def __init__(
        self,
        schema: Schema,
        *,
        context_previous: int = 0,
        class_weight: str | None = None,
        tune_thresholds: bool = False,
        calibration: str | None = None,
        seed: int = 0,
        **kind_specific: Any,
    ):
        if not isinstance(schema, Schema):
            raise TypeError(f"schema must be a psyattrs Schema, got {type(schema).__name__}")
        k = context_previous
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
            raise ValueError(f"context_previous must be an integer >= 0, got {context_previous!r}")
        if class_weight not in CLASS_WEIGHTS:
            raise ValueError(f"class_weight {class_weight!r} is not one of {list(CLASS_WEIGHTS)}")
        if not isinstance(tune_thresholds, (bool, np.bool_)):
            raise ValueError(f"tune_thresholds must be true or false, got {tune_thresholds!r}")
        if calibration not in CALIBRATIONS:
            raise ValueError(f"calibration {calibration!r} is not one of {list(CALIBRATIONS)}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise ValueError(f"seed must be an integer, got {seed!r}")
        unknown = sorted(set(kind_specific) - set(self.kind_defaults))
        if unknown:
            raise ValueError(
                f"model kind {self.kind!r} has no setting(s) {unknown}; allowed: {sorted(self.kind_defaults)}"
            )
        self.schema = schema
        self.context_previous = int(context_previous)
        self.class_weight = class_weight
        self.tune_thresholds = bool(tune_thresholds)
        self.calibration = calibration
        self.seed = int(seed)
        self.params: dict[str, Any] = {**self.kind_defaults, **kind_specific}
        self._check_params()
        self.calibrators_: dict[str, Calibrator] = {}
        self.thresholds_: dict[str, float] = {}
        self.offsets_: dict[str, np.ndarray] = {}
        self.n_targets_: dict[str, int] = {}
        self._fitted = False

    # -- hooks for backends --------------------------------------------------------------------

    def _check_params(self) -> None:
        """Validates `self.params` (ValueError naming the bad value); override in backends."""

    @abc.abstractmethod
    def _fit(self, table: pd.DataFrame, targets: dict[str, np.ndarray], *, progress: bool) -> None:
        """Fits on a prepared table (RangeIndex) and checked targets (pause rows NaN)."""

    @abc.abstractmethod
    def _predict_raw(self, table: pd.DataFrame) -> dict[str, np.ndarray]:
        """Uncalibrated head -> (len(table), K) probabilities for a prepared, non-empty table."""

    @abc.abstractmethod
    def _save_state(self, folder: Path) -> dict[str, Any]:
        """Writes the backend's files into `folder`; returns JSON state for model.json."""

    @abc.abstractmethod
    def _load_state(self, folder: Path, state: dict[str, Any]) -> None:
        """Restores what `_save_state` wrote."""

    # -- the interface -------------------------------------------------------------------------

    @property
    def settings(self) -> dict[str, Any]:
        """Every constructor argument except the schema, as plain JSON values (log these)."""
        return _jsonable(
            {
                "context_previous": self.context_previous,
                "class_weight": self.class_weight,
                "tune_thresholds": self.tune_thresholds,
                "calibration": self.calibration,
                "seed": self.seed,
                **self.params,
            }
        )

    def fit(
        self,
        table: pd.DataFrame,
        targets: dict[str, np.ndarray],
        *,
        valid: tuple[pd.DataFrame, dict[str, np.ndarray]] | None = None,
        progress: bool = False,
    ) -> "MultiHeadModel":
        """Fits every head; then calibrators and decision rules on `valid` when asked for.

        Args:
            table: utterance table, all rows of each training conversation (see module docstring).
            targets: head -> float array (len(table), K): distributions, all-NaN for no target.
            valid: (table, targets) of the validation split; required by `calibration` and
                `tune_thresholds`, unused otherwise.
            progress: show a progress bar over the slow steps.

        Returns:
            self, fitted.

        Raises:
            ValueError: bad targets (see `check_targets`), a head without any target row,
                `calibration` / `tune_thresholds` without `valid`, or a validation split with no
                target row for a head.
        """
        options = (("calibration", self.calibration), ("tune_thresholds", self.tune_thresholds))
        needs = [name for name, on in options if on]
        if needs and valid is None:
            raise ValueError(f"{' and '.join(needs)} need a validation split: pass valid=(table, targets) to fit")
        prepared = prepare_table(table)
        checked = check_targets(self.schema, table, targets)
        empty = [h for h, t in checked.items() if not (~np.isnan(t).all(axis=1)).any()]
        if empty:
            raise ValueError(f"no training row has a target for head(s) {empty}; every head needs some")
        valid_checked = None
        if valid is not None:
            if not (isinstance(valid, tuple) and len(valid) == 2):
                raise TypeError("valid must be a tuple (table, targets)")
            valid_table = prepare_table(valid[0])
            valid_checked = check_targets(self.schema, valid[0], valid[1], what="valid targets")
        self.calibrators_, self.thresholds_, self.offsets_ = {}, {}, {}
        self.n_targets_ = {h: int((~np.isnan(t).all(axis=1)).sum()) for h, t in checked.items()}
        # the prepared validation split, for backends that stop early on it (the transformer)
        self._fit_valid = (valid_table, valid_checked) if valid is not None else None
        self._fit(prepared, checked, progress=progress)
        self._fit_valid = None
        self._fitted = True
        if needs:
            self._fit_post(valid_table, valid_checked)
        return self

    def _fit_post(self, table: pd.DataFrame, targets: dict[str, np.ndarray]) -> None:
        raw = self._predict_raw(table) if len(table) else {}
        for head in self.schema:
            t = targets[head.name]
            rows = ~np.isnan(t).all(axis=1)
            if not rows.any():
                raise ValueError(
                    f"the validation split has no target row for head {head.name!r}; "
                    "calibration and tune_thresholds need some"
                )
            proba = raw[head.name][rows]
            if self.calibration:
                self.calibrators_[head.name] = make_calibrator(self.calibration).fit(proba, t[rows])
                proba = self.calibrators_[head.name].transform(proba)
            if self.tune_thresholds:
                truth = np.argmax(t[rows], axis=1)
                if head.is_binary:
                    self.thresholds_[head.name] = tune_binary_threshold(proba[:, 1], truth)
                else:
                    self.offsets_[head.name] = tune_class_offsets(proba, truth)

    def _check_fitted(self) -> None:
        if not self._fitted:
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet: call fit first")

    def predict_proba(self, table: pd.DataFrame) -> dict[str, np.ndarray]:
        """Calibrated class probabilities of every row.

        Args:
            table: utterance table (whole conversations, or one sentence = a conversation of one).

        Returns:
            head -> float64 array (len(table), K), row i for `table.iloc[i]`, rows summing to 1.
        """
        self._check_fitted()
        prepared = prepare_table(table)
        if len(prepared) == 0:
            return {h.name: np.zeros((0, h.n_classes)) for h in self.schema}
        raw = self._predict_raw(prepared)
        out = {}
        for head in self.schema:
            p = np.asarray(raw[head.name], dtype=float)
            if head.name in self.calibrators_:
                p = self.calibrators_[head.name].transform(p)
            out[head.name] = p / p.sum(axis=1, keepdims=True)
        return out

    def predict(self, table: pd.DataFrame) -> pd.DataFrame:
        """Class decisions of every row (argmax, or the tuned decision rule).

        Args:
            table: utterance table.

        Returns:
            DataFrame indexed like `table`, one int64 column per head (schema order), values in
            0..K-1.
        """
        proba = self.predict_proba(table)
        columns = {
            head.name: apply_decision(
                proba[head.name], threshold=self.thresholds_.get(head.name), offsets=self.offsets_.get(head.name)
            )
            for head in self.schema
        }
        return pd.DataFrame(columns, index=table.index, columns=self.schema.head_names)

    def save(self, path: "str | Path") -> None:
        """Writes the fitted model into a folder (created if needed; our files are overwritten).

        The folder holds `model.json` (kind, format version, schema, settings, library versions,
        per-head calibrators and decision rules, backend state) and the backend's files.
        """
        self._check_fitted()
        folder = Path(path)
        if folder.exists() and not folder.is_dir():
            raise ValueError(f"cannot save a model to {folder}: it is a file, a model is a folder")
        folder.mkdir(parents=True, exist_ok=True)
        state = self._save_state(folder)
        doc = {
            "kind": self.kind,
            "format_version": FORMAT_VERSION,
            "schema": self.schema.to_dict(),
            "settings": self.settings,
            "versions": _versions(("psyattrs", *self._packages)),
            "n_targets": self.n_targets_,
            "heads": {
                h.name: {
                    "calibrator": self.calibrators_[h.name].to_dict() if h.name in self.calibrators_ else None,
                    "threshold": self.thresholds_.get(h.name),
                    "offsets": self.offsets_[h.name].tolist() if h.name in self.offsets_ else None,
                }
                for h in self.schema
            },
            "state": _jsonable(state),
        }
        (folder / MODEL_FILE).write_text(json.dumps(doc, ensure_ascii=False, indent=2), encoding="utf-8")

    @classmethod
    def load(cls, path: "str | Path") -> "MultiHeadModel":
        """Reads a model written by `save`.

        Raises:
            InputFileError: no readable `model.json` in the folder, or a file of the model missing.
            ValueError: the folder holds another kind of model than `cls` (use `load_model`).
        """
        folder = Path(path)
        doc = _read_model_json(folder)
        if cls is not MultiHeadModel and doc["kind"] != cls.kind:
            raise ValueError(f"{folder} holds a {doc['kind']!r} model, not {cls.kind!r}; use load_model")
        target = _kind_class(doc["kind"]) if cls is MultiHeadModel else cls
        saved = doc.get("versions", {})
        current = _versions(target._packages)
        differ = {p: (saved[p], v) for p, v in current.items() if p in saved and saved[p] != v}
        if differ:
            warnings.warn(f"{folder}: saved with other library versions {differ} (saved, now)", stacklevel=2)
        schema = Schema.from_dict(doc["schema"], source=str(folder / MODEL_FILE))
        model = target(schema, **doc["settings"])
        model.n_targets_ = dict(doc.get("n_targets", {}))
        for name, head in doc["heads"].items():
            if head.get("calibrator"):
                model.calibrators_[name] = calibrator_from_dict(head["calibrator"])
            if head.get("threshold") is not None:
                model.thresholds_[name] = float(head["threshold"])
            if head.get("offsets") is not None:
                model.offsets_[name] = np.asarray(head["offsets"], dtype=float)
        try:
            model._load_state(folder, doc.get("state", {}))
        except FileNotFoundError as exc:
            raise InputFileError(exc.filename or folder, "a file of the saved model is missing") from None
        except InputFileError:
            raise
        except Exception as exc:  # a reader failing on a file of the folder: damaged, not our fault
            raise damaged_file(getattr(exc, "filename", None) or folder, exc) from None
        model._fitted = True
        return model


def damaged_file(path: "str | Path", exc: BaseException) -> InputFileError:
    """The one-line error for a saved file (model state, checkpoint) that its reader cannot read:
    truncated, empty or not the file it should be."""
    text = " ".join(str(exc).split())
    reason = f"{type(exc).__name__}: {text[:120]}" if text else type(exc).__name__
    size = Path(path).stat().st_size if Path(path).is_file() else None
    kind = "empty" if size == 0 else "damaged or truncated"
    return InputFileError(path, f"{kind} ({reason}); restore it from a copy, or train again")


def read_saved_file(path: "str | Path", reader: Any) -> Any:
    """`reader(path)` for a file of a saved model; a file that is missing raises FileNotFoundError,
    one that the reader cannot read an InputFileError naming it (`damaged_file`)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(2, "missing", str(path))
    try:
        return reader(path)
    except FileNotFoundError:
        raise
    except Exception as exc:  # pickle, zip, safetensors, EOF, ...: every reader fails its own way
        raise damaged_file(path, exc) from None


def _read_model_json(folder: Path) -> dict[str, Any]:
    file = folder / MODEL_FILE
    if not file.is_file():
        raise InputFileError(file, "not a saved model folder (no model.json)")
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputFileError(file, f"not readable JSON: {exc}") from None
    for key in ("kind", "schema", "settings", "heads"):
        if key not in doc:
            raise InputFileError(file, f"lacks the key {key!r} of a saved model")
    if doc.get("format_version", FORMAT_VERSION) > FORMAT_VERSION:
        raise InputFileError(
            file, f"format version {doc['format_version']} is newer than this psyattrs reads ({FORMAT_VERSION})"
        )
    if doc["kind"] not in KINDS:
        raise InputFileError(file, f"unknown model kind {doc['kind']!r}; known: {sorted(KINDS)}", column="kind")
    return doc


def _kind_class(kind: str) -> type[MultiHeadModel]:
    if kind not in KINDS:
        raise ValueError(f"model kind {kind!r} is not one of {sorted(KINDS)}")
    module, name = KINDS[kind].split(":")
    return getattr(importlib.import_module(module), name)


def build_model(kind: str, schema: Schema, **settings: Any) -> MultiHeadModel:
    """A new, unfitted model of a kind.

    Args:
        kind: `majority`, `tfidf`, `lightgbm`, `transformer` or `ensemble`.
        schema: the heads to predict.
        **settings: the shared options (context_previous, class_weight, tune_thresholds,
            calibration, seed) and the kind's own settings (`kind_defaults`).

    Raises:
        ValueError: an unknown kind or setting (names the allowed ones), or a bad value.
    """
    return _kind_class(kind)(schema, **settings)


def load_model(path: "str | Path") -> MultiHeadModel:
    """Loads a saved model of any kind (dispatches on model.json's `kind`)."""
    return MultiHeadModel.load(path)
