"""`train(config) -> TrainResult` and `evaluate(run_id) -> metrics`: the experiment loop.

`train` runs one resolved config (one sweep member):

1. builds the model from the config and checks that the data files exist, so a bad setting or a
   mistyped path fails before any run exists;
2. starts an MLflow run (`psyattrs.experiments.tracking`); from here on, an error ends the run FAILED;
3. loads the corpus (`data.path`, the explicit `data.train`/`valid`/`test` files, or the embedded
   synthetic corpus) and splits it by conversation or persona;
4. builds the targets with `targets.lambda` (`psyattrs.labels.soft.mixed_targets`), fits the model
   with the validation split (calibration, thresholds), scores the test split against the final
   labels, the labelers and the truth, beside the majority floor and one labeler against the others
   (`psyattrs.experiments.metrics`);
5. logs datasets, the records the reader set aside (`n_set_aside`, `set_aside.jsonl`), metrics,
   reports, plots, predictions and the pyfunc model.

With `split.folds = k` the run is a parent with one nested run per fold; its `test_*` metrics are
the means over the folds (`*_std` their standard deviations), its predictions are the pooled
out-of-fold ones, and its model is refitted on the whole corpus. `train_all` runs every member of
a sweep.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pandas as pd

from psyattrs._runtime import on_terminal
from psyattrs.errors import InputFileError
import psyattrs.experiments.metrics as M
from psyattrs.experiments.config import ExperimentConfig, expand_sweep
from psyattrs.schema import Schema, load_schema

EXAMPLE_COLUMNS = ("doc_id", "sent_id", "position", "person_type", "is_pause", "text")


@dataclass
class TrainResult:
    """What `train` returns.

    Attributes:
        run_id: the MLflow run (the cross-validation parent with folds).
        metrics: every logged metric (`test_macro_f1_mean`, ...); NaN where undefined.
        model: the fitted model (with folds: refitted on the whole corpus).
        config: the resolved config that ran.
        schema: the heads.
        summary: per-head table, model beside floor and ceiling (`metrics.summary_table`).
        tracking_uri: the store the run is in.
        artifact_uri: where its artifacts are.
        model_uri: the logged pyfunc model (`models:/...`); load it with `mlflow.pyfunc.load_model`.
        fold_run_ids: the nested fold runs (empty for a single split).
        resolved_heads: the heads whose final labels were resolved from the labelers'
            labels with `targets.resolve`, because the corpus had none for them (empty: none).
    """

    run_id: str
    metrics: dict[str, float]
    model: Any
    config: ExperimentConfig
    schema: Schema
    summary: pd.DataFrame
    tracking_uri: str
    artifact_uri: str
    model_uri: str
    fold_run_ids: list[str] = field(default_factory=list)
    resolved_heads: list[str] = field(default_factory=list)

    @property
    def paths(self) -> dict[str, str]:
        """`tracking`, `artifacts`, `model`, `predictions` and `config` locations of the run."""
        return {
            "tracking": self.tracking_uri,
            "artifacts": self.artifact_uri,
            "model": self.model_uri,
            "predictions": f"{self.artifact_uri}/predictions/test.parquet",
            "config": f"{self.artifact_uri}/config.yaml",
        }


@dataclass
class _Split:
    """The tables a model is fitted and scored on, and where each came from."""

    train: pd.DataFrame
    valid: pd.DataFrame | None
    test: pd.DataFrame | None
    sources: dict[str, Any]
    set_aside: list[dict[str, Any]] = field(default_factory=list)
    resolved: list[str] = field(default_factory=list)  # heads whose final labels the runner resolved


class _Steps:
    """Progress on standard error, silent when quiet: on a terminal a spinner while a step runs
    (rich), elsewhere (logs, CI) one plain line per finished step, `text: seconds`."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        if not quiet:
            from rich.console import Console

            self.console = Console(stderr=True, log_path=False)
            self.terminal = on_terminal()

    @contextlib.contextmanager
    def step(self, text: str, *, spinner: bool = True) -> Iterator[None]:
        """Shows `text` while the block runs (a spinner on a terminal, or nothing where the block
        has its own progress bar), then `text: seconds`. The step is named to the run's tracking
        (the note of a run stopped by a signal says which step it stopped)."""
        from psyattrs.experiments.stopping import mark_step

        mark_step(text)
        if self.quiet:
            yield
            return
        start = time.perf_counter()
        with self.console.status(text) if spinner and self.terminal else contextlib.nullcontext():
            yield
        self._line(f"{text}: {time.perf_counter() - start:.1f}s")

    def _line(self, text: str, *, label: str = "") -> None:
        if self.terminal:
            self.console.log(f"[yellow]{label}[/yellow] {text}" if label else text)
        else:
            print(f"{label} {text}" if label else text, file=sys.stderr, flush=True)

    def warn(self, text: str) -> None:
        if not self.quiet:
            self._line(text, label="warning:")

    def note(self, text: str) -> None:
        if not self.quiet:
            self._line(text)


# ------------------------------------------------------------------------------------ data


def _schema(config: ExperimentConfig) -> Schema:
    """The config's schema; for a LeWiDi corpus under the default `opela`, the file's own."""
    if config.data.schema == "opela":
        first = config.data.path or config.data.train
        if first is not None and Path(first).is_file() and _is_lewidi(first, config):
            from psyattrs.data.lewidi import file_schema

            return file_schema(first)
    return load_schema(config.data.schema)


def fill_final_labels(table: pd.DataFrame, schema: Schema, *, method: str, source: str = "the corpus"
                      ) -> tuple[pd.DataFrame, list[str]]:
    """Resolves the final labels of the heads a corpus has labelers for but no final labels.

    Args:
        table: an utterance table.
        schema: its heads.
        method: the resolution method (`targets.resolve`: opela, opela-weighted, majority,
            dawid-skene; see `psyattrs.labels.resolve.resolve_final_labels`).
        source: how to name the corpus in errors.

    Returns:
        (table, heads): the table with `labeler_{head}` filled for those heads (the same object when
        there were none), and their names in schema order.

    Raises:
        ValueError: a head with neither a final label nor a labeler's label (names the heads).
    """
    from psyattrs.data.table import final_column, labeler_columns
    from psyattrs.labels.resolve import resolve_final_labels

    def labelled(column: str) -> bool:
        return column in table.columns and bool(table[column].notna().any())

    no_final = [h for h in schema if not labelled(final_column(h.name))]
    neither = [h.name for h in no_final if not any(labelled(c) for c in labeler_columns(table.columns, h.name))]
    if neither:
        raise ValueError(
            f"{source}: head(s) {neither} have neither final labels ({final_column('<head>')}) nor labelers' "
            f"labels (labeler<k>_<head>): there is nothing to train or score them on"
        )
    if not no_final:
        return table, []
    subset = Schema(schema.name, tuple(no_final), schema.language)
    return resolve_final_labels(table, subset, method=method, seed=0), [h.name for h in no_final]


def run_schema(run_id: str, config: ExperimentConfig, extras: dict[str, Any]) -> Schema:
    """The schema a run trained with: its `schema.json` (`load_run_config`'s extras), else, for a
    run from before that artifact, what its config says (`data.schema`, or a LeWiDi file's own)."""
    if extras.get("schema"):
        return Schema.from_dict(extras["schema"], source=f"run {run_id} schema.json")
    return _schema(config)


def _is_lewidi(path: str, config: ExperimentConfig) -> bool:
    from psyattrs.data.io import detect_format

    if config.data.format != "auto":
        return config.data.format == "lewidi"
    try:
        return detect_format(path) == "lewidi"
    except InputFileError:
        return False  # reported when the file is read


def _read(path: str, config: ExperimentConfig, schema: Schema) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """The utterance table of a corpus file and the records its reader set aside (as dicts with
    `source`)."""
    from psyattrs.data import load_corpus

    fmt = None if config.data.format == "auto" else config.data.format
    corpus = load_corpus(path, format=fmt, schema=schema)
    from psyattrs.experiments.tracking import note_input_file

    note_input_file(path, corpus.encoding)  # digest and encoding, logged with the active run (if any)
    if corpus.format == "public":  # the public release: its sentence order reconstructed (cached)
        from psyattrs.align import aligned_corpus_summary
        from psyattrs.experiments.tracking import note_alignment

        corpus, summary = aligned_corpus_summary(corpus)
        note_alignment(path, summary, corpus.utterances)  # the run says what its labels rest on
        for warning in summary.warnings:  # printed: the run's MLflow calls silence Python warnings
            print(f"psyattrs: warning: {path}: {warning}", file=sys.stderr, flush=True)
    if corpus.record_kind not in ("sentence", "item", "rating"):
        raise ValueError(
            f"{path}: a {corpus.format!r} corpus has no per-sentence labels to train on; "
            "use the annotated or the generic format"
        )
    if len(corpus.utterances) == 0:
        raise ValueError(f"{path}: no sentence left to train on ({len(corpus.problems)} set aside)")
    return corpus.utterances, [{"source": str(path), **p.to_dict()} for p in corpus.problems]


def _read_labelled(path: str, config: ExperimentConfig, schema: Schema
                   ) -> tuple[pd.DataFrame, list[dict[str, Any]], list[str]]:
    """`_read`, then the final labels the corpus lacks resolved from its labelers
    (`fill_final_labels` with `targets.resolve`); also returns the heads resolved."""
    table, set_aside = _read(path, config, schema)
    table, resolved = fill_final_labels(table, schema, method=config.targets.resolve, source=str(path))
    return table, set_aside, resolved


def _corpus(config: ExperimentConfig, schema: Schema) -> tuple[pd.DataFrame, Any, list[dict[str, Any]], list[str]]:
    """The single corpus of `data.path` or `data.synthetic`, its source description, the
    records set aside while reading it and the heads whose final labels were resolved."""
    if config.data.synthetic is not None:
        from psyattrs.synth import synthesize

        syn = config.data.synthetic
        result = synthesize(syn.dialogues, seed=config.synthetic_seed, rare_boost=syn.rare_boost)
        source = {"generator": "psyattrs.synth.synthesize", "dialogues": syn.dialogues,
                  "seed": config.synthetic_seed, "rare_boost": syn.rare_boost}
        return result.utterances, source, [], []
    table, set_aside, resolved = _read_labelled(config.data.path, config, schema)
    return table, config.data.path, set_aside, resolved


def _split_one(table: pd.DataFrame, config: ExperimentConfig, schema: Schema, *, valid: float, test: float) -> pd.Series:
    from psyattrs.data.splits import train_valid_test

    return train_valid_test(table, by=config.split.by, valid=valid, test=test, seed=config.seed, schema=schema)


def _carve_valid(table: pd.DataFrame, config: ExperimentConfig, schema: Schema) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Splits `split.valid` of the groups of `table` off as validation (None when 0)."""
    if config.split.valid == 0:
        return table, None
    parts = _split_one(table, config, schema, valid=config.split.valid, test=0.0)
    return table[parts.to_numpy() == "train"], table[parts.to_numpy() == "valid"]


def _official_files(config: ExperimentConfig) -> dict[str, str] | None:
    """`data.path` = a LeWiDi `X_train.json` with `X_test.json` (and `X_dev.json`) beside it:
    those files as train/valid/test; else None."""
    from psyattrs.data.lewidi import sibling_splits

    if config.data.path is None or not _is_lewidi(config.data.path, config):
        return None
    found = sibling_splits(config.data.path)
    return {k: str(v) for k, v in found.items()} if found else None


def _official_parts(table: pd.DataFrame) -> np.ndarray | None:
    """The file's own `split` column as train/valid/test, when it names a test split; else None."""
    if "split" not in table:
        return None
    values = table["split"].astype(str).str.strip().str.lower().replace({"dev": "valid", "val": "valid"})
    if not (values == "test").any() or not (values == "train").any():
        return None
    return values.where(values.isin(["train", "valid", "test"]), "train").to_numpy()


def _single_split(config: ExperimentConfig, schema: Schema) -> _Split:
    official = _official_files(config) if config.data.source_kind == "path" else None
    if config.data.source_kind == "files" or official is not None:
        files = official or {k: getattr(config.data, k) for k in ("train", "valid", "test")}
        train, set_aside, resolved = _read_labelled(files["train"], config, schema)
        test, more, resolved_test = _read_labelled(files["test"], config, schema)
        sources = {"train": files["train"], "test": files["test"]}
        if files.get("valid") is not None:
            valid, extra, resolved_valid = _read_labelled(files["valid"], config, schema)
            sources["valid"] = files["valid"]
        else:
            (train, valid), extra, resolved_valid = _carve_valid(train, config, schema), [], []
            sources["valid"] = files["train"]
        heads = [h.name for h in schema if h.name in {*resolved, *resolved_test, *resolved_valid}]
        return _Split(train, valid, test, sources, set_aside + more + extra, heads)
    table, source, set_aside, resolved = _corpus(config, schema)
    parts = _official_parts(table)
    if parts is not None:  # the file's own official split
        valid = table[parts == "valid"] if (parts == "valid").any() else None
        return _Split(table[parts == "train"], valid, table[parts == "test"],
                      {"train": source, "valid": source, "test": source}, set_aside, resolved)
    parts = _split_one(table, config, schema, valid=config.split.valid, test=config.split.test).to_numpy()
    valid = table[parts == "valid"] if config.split.valid > 0 else None
    return _Split(table[parts == "train"], valid, table[parts == "test"],
                  {"train": source, "valid": source, "test": source}, set_aside, resolved)


def _empty_check(split: _Split, config: ExperimentConfig) -> None:
    for name in ("train", "valid", "test"):
        part = getattr(split, name)
        if part is not None and len(part) == 0:
            raise ValueError(
                f"the {name} split is empty: too few {config.split.by} groups for split.valid="
                f"{config.split.valid}, split.test={config.split.test}"
            )


def _dataset_name(source: Any, part: str) -> str:
    base = Path(source).name if isinstance(source, str) else "synthetic"
    return f"{base}:{part}"


# ------------------------------------------------------------------------------- fit and score


def _targets(table: pd.DataFrame, config: ExperimentConfig, schema: Schema) -> dict[str, np.ndarray]:
    from psyattrs.labels.soft import mixed_targets

    return mixed_targets(table, schema, lam=config.targets.lam, smoothing=config.targets.smoothing)


def _build(config: ExperimentConfig, schema: Schema):
    from psyattrs.models.base import build_model

    settings = config.model_settings()
    return build_model(config.model.kind, schema, **settings)


def build_from_config(config: ExperimentConfig):
    """The unfitted model a config describes (checks every model setting; reads no data).

    Raises:
        ValueError: an unknown or bad model setting (named, with the allowed ones).
    """
    return _build(config, _schema(config))


@dataclass
class _Scored:
    model: Any
    proba: dict[str, np.ndarray]
    predicted: pd.DataFrame
    metrics: dict[str, float]
    prior: dict[str, np.ndarray]


def _fit_score(split: _Split, config: ExperimentConfig, schema: Schema, steps: _Steps) -> _Scored:
    model = _build(config, schema)
    if hasattr(model, "metrics_callback"):  # models that report training curves (the transformer)
        from psyattrs.experiments.tracking import training_metrics_logger

        model.metrics_callback = training_metrics_logger()
    valid = (split.valid, _targets(split.valid, config, schema)) if split.valid is not None else None
    with steps.step(f"fit {config.model.kind} on {len(split.train)} sentences", spinner=False):
        start = time.perf_counter()
        model.fit(split.train, _targets(split.train, config, schema), valid=valid, progress=not steps.quiet)
        fit_seconds = time.perf_counter() - start
    with steps.step(f"score {len(split.test)} test sentences"):
        start = time.perf_counter()
        proba = model.predict_proba(split.test)
        predicted = model.predict(split.test)
        predict_seconds = time.perf_counter() - start
        prior = M.class_prior(split.train, schema)
        metrics = M.score_split(split.test, schema, proba, predicted=predicted, prior=prior)
    unlabelled = [h.name for h in schema if np.isnan(metrics.get(f"test_accuracy_{h.name}", np.nan))]
    if unlabelled:
        steps.warn(f"no test sentence has a final label (labeler_<head>) for {unlabelled}: the metrics against "
                   "final labels are NaN there (psyattrs labels resolve adds final labels)")
    keep = {name: M.evaluable(getattr(split, name)).sum() if getattr(split, name) is not None else 0
            for name in ("train", "valid", "test")}
    metrics.update({f"n_{name}_sentences": float(n) for name, n in keep.items()})
    metrics.update({"fit_seconds": fit_seconds, "predict_seconds": predict_seconds})
    return _Scored(model, proba, predicted, metrics, prior)


def conversation_digests(table: pd.DataFrame) -> pd.Series:
    """A digest per conversation of its sentence texts in order (the same conversation read from
    another file, under another doc_id, gets the same digest).

    Returns:
        Series, index = doc_id (order of first appearance), values = 16 hex characters.
    """
    import hashlib

    if len(table) == 0:
        return pd.Series([], dtype=object)
    texts = table["text"].astype(str)
    joined = texts.groupby(table["doc_id"].to_numpy(), sort=False).agg("\x1f".join)
    return joined.map(lambda t: hashlib.blake2b(t.encode("utf-8"), digest_size=8).hexdigest())


def training_overlap(table: pd.DataFrame, seen: dict[str, list[str]] | None) -> dict[str, float]:
    """How many conversations of `table` a run was fitted (`train`) or tuned (`valid`) on.

    Returns:
        `n_eval_conversations`, `n_eval_conversations_in_training`,
        `n_eval_conversations_in_validation` (the last two NaN when `seen` is None: a run that did
        not record its conversations).
    """
    digests = conversation_digests(table)
    out = {"n_eval_conversations": float(len(digests))}
    for part, name in (("train", "training"), ("valid", "validation")):
        known = set((seen or {}).get(part) or [])
        out[f"n_eval_conversations_in_{name}"] = float(digests.isin(known).sum()) if seen is not None else float("nan")
    return out


def resolved_message(heads: list[str], method: str) -> str:
    """The line that says final labels were resolved by the runner (printed by `psyattrs train`)."""
    return (f"final labels resolved from the labelers' labels with {method!r} (targets.resolve) for head(s) "
            f"{heads}: the corpus has none for them")


def _log_split_inputs(run, split: _Split, steps: _Steps, config: ExperimentConfig) -> None:
    """Logs the datasets, the records the readers set aside (`set_aside.jsonl`, `n_set_aside`) and
    which heads had their final labels resolved (param `targets.resolved_heads`)."""
    run.log_metrics({"n_set_aside": float(len(split.set_aside))}, write_json=False)
    run.log_params({"targets.resolved_heads": ",".join(split.resolved) or "none"})
    from psyattrs.experiments.tracking import CONVERSATIONS_ARTIFACT

    fitted = {part: sorted(set(conversation_digests(getattr(split, part)))) for part in ("train", "valid")
              if getattr(split, part) is not None}
    run.log_text(json.dumps(fitted), CONVERSATIONS_ARTIFACT)
    if split.resolved:
        steps.note(resolved_message(split.resolved, config.targets.resolve))
    if split.set_aside:
        run.log_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in split.set_aside), "set_aside.jsonl")
        steps.warn(f"{len(split.set_aside)} record(s) set aside while reading the data (see set_aside.jsonl)")
    for part in ("train", "valid", "test"):
        table = getattr(split, part)
        if table is not None:
            run.log_dataset(table, name=_dataset_name(split.sources[part], part), context=part,
                            source=split.sources[part])


def _example(table: pd.DataFrame) -> pd.DataFrame:
    first = table[table["doc_id"] == table["doc_id"].iloc[0]].head(3)
    return first[[c for c in EXAMPLE_COLUMNS if c in first.columns]].reset_index(drop=True)


def _log_outcome(run, scored: _Scored, test: pd.DataFrame, schema: Schema, steps: _Steps) -> tuple[pd.DataFrame, str]:
    """Logs the scored split and `scored.model`; returns the summary table and the model URI."""
    summary = M.summary_table(scored.metrics, schema)
    with steps.step("log metrics, reports, plots and predictions"):
        run.log_metrics(scored.metrics)
        run.log_evaluation(test, schema, scored.proba, scored.predicted)
        run.log_text(json.dumps({h: p.tolist() for h, p in scored.prior.items()}), "floor_prior.json")
        run.log_text(json.dumps(schema.to_dict(), ensure_ascii=False), "schema.json")  # a corpus' own heads
        run.log_text(M.format_table(summary) + "\n", "summary.txt")
    with steps.step("log the model"):
        model_uri = run.log_model(scored.model, schema, _example(test))
    return summary, model_uri


# ------------------------------------------------------------------------------------- train


def train(config: ExperimentConfig, *, quiet: bool = False) -> TrainResult:
    """Trains, scores and tracks one config (see the module docstring).

    Args:
        config: a resolved config without a sweep (use `train_all` for a sweep).
        quiet: no progress display and no MLflow chatter.

    Returns:
        The `TrainResult` of the run.

    Raises:
        ValueError: the config has a sweep or a bad model setting (both before any run starts),
            or data that cannot be split or trained on (the run ends FAILED, the error logged).
        InputFileError: a missing data or schema file (before any run starts) or one that cannot
            be read (the run ends FAILED).
    """
    if config.sweep:
        raise ValueError(f"config {config.name!r} has a sweep of {len(config.sweep)} runs: use train_all")
    from psyattrs.experiments.tracking import start_run

    schema = _schema(config)
    _build(config, schema)  # a bad model setting or a missing file fails here, before a run exists
    for key in ("path", "train", "valid", "test"):
        path = getattr(config.data, key)
        if path is not None and not Path(path).is_file():
            raise InputFileError(path, f"data.{key}: corpus file not found")
    steps = _Steps(quiet)
    if config.split.folds:
        return _train_cv(config, schema, steps, quiet)
    with start_run(config, role="single", quiet=quiet) as run:
        run.log_params(feature_params(config, schema))
        with steps.step("load and split the data"):
            split = _single_split(config, schema)
            _empty_check(split, config)
            _log_split_inputs(run, split, steps, config)
        scored = _fit_score(split, config, schema, steps)
        scored.metrics["n_set_aside"] = float(len(split.set_aside))
        summary, model_uri = _log_outcome(run, scored, split.test, schema, steps)
    return TrainResult(run.run_id, scored.metrics, scored.model, config, schema, summary,
                       run.tracking_uri, run.artifact_uri, model_uri, resolved_heads=split.resolved)


def feature_params(config: ExperimentConfig, schema: Schema) -> dict[str, str]:
    """The run parameters that say how text is read: `features.language` (the schema's) and
    `features.tokenizer` (e.g. `character n-grams + whitespace words (fallback: ...)`)."""
    from psyattrs.features.text import tokenizer_description

    words = str(config.model.params.get("words", "auto"))
    return {"features.language": schema.language, "features.tokenizer": tokenizer_description(schema.language, words)}


def _fold_mean(per_fold: list[dict[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name in per_fold[0]:
        values = np.array([m.get(name, np.nan) for m in per_fold], dtype=float)
        kept = values[~np.isnan(values)]
        out[name] = float(kept.mean()) if len(kept) else float("nan")
        if name.startswith("test_"):
            out[f"{name}_std"] = float(kept.std(ddof=1)) if len(kept) > 1 else float("nan")
    return out


def _train_cv(config: ExperimentConfig, schema: Schema, steps: _Steps, quiet: bool) -> TrainResult:
    from psyattrs.data.splits import kfold
    from psyattrs.experiments.tracking import start_run

    with start_run(config, role="cv", quiet=quiet) as parent:
        parent.log_params(feature_params(config, schema))
        with steps.step("load the data"):
            table, source, set_aside, resolved = _corpus(config, schema)
            table = table.reset_index(drop=True)
            _log_split_inputs(parent, _Split(table, None, None, {"train": source}, set_aside, resolved), steps, config)
        folds = kfold(table, k=config.split.folds, by=config.split.by, seed=config.seed, schema=schema)
        per_fold, fold_ids = [], []
        oof_proba = {h.name: np.zeros((len(table), h.n_classes)) for h in schema}
        oof_pred = pd.DataFrame(0, index=table.index, columns=schema.head_names, dtype="int64")
        for i, (train_idx, test_idx) in enumerate(folds, start=1):
            train_part, valid_part = _carve_valid(table.iloc[train_idx], config, schema)
            split = _Split(train_part, valid_part, table.iloc[test_idx], {p: source for p in ("train", "valid", "test")},
                           resolved=resolved)
            _empty_check(split, config)
            with start_run(config, role="fold", run_name=f"{config.run_name}/fold{i}", nested=True, quiet=quiet) as child:
                _log_split_inputs(child, split, steps, config)
                scored = _fit_score(split, config, schema, steps)
                child.log_metrics(scored.metrics)
                child.log_evaluation(split.test, schema, scored.proba, scored.predicted)
            per_fold.append(scored.metrics)
            fold_ids.append(child.run_id)
            for head in schema:
                oof_proba[head.name][test_idx] = scored.proba[head.name]
                oof_pred.loc[test_idx, head.name] = scored.predicted[head.name].to_numpy()
        metrics = _fold_mean(per_fold)
        with steps.step("refit on the whole corpus", spinner=False):
            train_all_part, valid_all = _carve_valid(table, config, schema)
            final = _build(config, schema)
            valid = (valid_all, _targets(valid_all, config, schema)) if valid_all is not None else None
            final.fit(train_all_part, _targets(train_all_part, config, schema), valid=valid, progress=not quiet)
        covered = np.zeros(len(table), dtype=bool)
        covered[np.concatenate([t for _, t in folds])] = True
        pooled = _Scored(final, {h: p[covered] for h, p in oof_proba.items()}, oof_pred[covered], metrics,
                         M.class_prior(table, schema))
        oof_table = table[covered]
        summary, model_uri = _log_outcome(parent, pooled, oof_table, schema, steps)
    return TrainResult(parent.run_id, metrics, final, config, schema, summary, parent.tracking_uri,
                       parent.artifact_uri, model_uri, fold_ids, resolved_heads=resolved)


def train_all(config: ExperimentConfig, *, quiet: bool = False) -> list[TrainResult]:
    """Runs every member of the config's sweep (or the config itself), in order."""
    return [train(member, quiet=quiet) for member in expand_sweep(config)]


# ---------------------------------------------------------------------------------- evaluate


def evaluate(
    run_id: str,
    data_path: "str | Path | None" = None,
    *,
    tracking_uri: str | None = None,
    quiet: bool = True,
    allow_changed_data: bool = False,
) -> dict[str, float]:
    """Re-scores a trained run with its logged model.

    Without `data_path`, the run's test split is rebuilt from its logged config (same corpus,
    same seed) and the result equals the run's logged `test_*` metrics. With `data_path`, every
    sentence of that corpus (read with the run's schema and format) is scored, the names start with
    `eval_` instead of `test_`, and the floor uses the prior the run logged from its training split.

    Args:
        run_id: a FINISHED run made by `train`.
        data_path: a corpus file, or None for the run's own test split.
        tracking_uri: the store; None = MLFLOW_TRACKING_URI or the default store.
        quiet: silence MLflow's chatter.
        allow_changed_data: without `data_path`, score the run's data files even when they
            changed since training (a `ChangedDataWarning` says how) instead of refusing.

    Returns:
        metric name -> value, as `metrics.score_split` names them; with `data_path` also
        `n_eval_conversations` and how many of them the run was fitted or tuned on
        (`training_overlap`: scores on those are no test).

    Raises:
        ValueError: unknown run, a run that did not finish (says how it ended: failed, killed,
            or never finished), a cross-validation parent without `data_path` (its model saw the
            whole corpus), a run without a model, or (without `data_path`) data files that
            changed since the run read them (compared by SHA-256).
    """
    import warnings

    import mlflow
    from mlflow.exceptions import MlflowException

    from psyattrs.experiments.tracking import ChangedDataWarning, changed_data, load_run_config, quiet_mlflow, tracking_store

    config, extras = load_run_config(run_id, tracking_uri=tracking_uri)
    if extras["status"] != "FINISHED":
        raise ValueError(f"run {run_id} {extras['end']}; only a FINISHED run can be evaluated")
    if extras["role"] == "fold":
        raise ValueError(f"run {run_id} is one fold of a cross-validation; evaluate its parent run")
    if extras["role"] == "cv" and data_path is None:
        raise ValueError(f"run {run_id} is a cross-validation parent whose model saw the whole corpus: pass --data")
    schema = run_schema(run_id, config, extras)
    with tracking_store(extras["tracking_uri"]), quiet_mlflow(quiet):
        try:
            pyfunc = mlflow.pyfunc.load_model(extras["model_uri"])
        except (MlflowException, OSError) as exc:
            raise ValueError(f"run {run_id} has no loadable model: {exc}") from None
    model = pyfunc.unwrap_python_model().model
    if data_path is None:
        changes = changed_data(extras)
        if changes and not allow_changed_data:
            raise ValueError(f"run {run_id} cannot be re-scored on its data: {'; '.join(changes)}. Its test split "
                             "would not be the one it was scored on; pass --data, or --allow-changed-data to score it anyway")
        split = _single_split(config, schema)
        changes = changes or changed_data({**extras, "inputs": {**extras["inputs"], "files": None}}, split.test)
        if changes:
            message = f"run {run_id}: {'; '.join(changes)}; the scores are NOT those of the data the run was tested on"
            if not allow_changed_data:
                raise ValueError(f"{message}. Pass --allow-changed-data to score it anyway")
            warnings.warn(message, ChangedDataWarning, stacklevel=2)
        table, prefix = split.test, "test_"
        prior = M.class_prior(split.train, schema)
    else:
        (table, set_aside, _), prefix = _read_labelled(str(data_path), config, schema), "eval_"
        saved = extras["floor_prior"]
        prior = {h: np.asarray(p, dtype=float) for h, p in saved.items()} if saved else None
    proba = model.predict_proba(table)
    predicted = model.predict(table)
    metrics = M.score_split(table, schema, proba, predicted=predicted, prior=prior, prefix=prefix)
    metrics[f"n_{prefix}sentences"] = float(M.evaluable(table).sum())
    if data_path is not None:
        metrics["n_set_aside"] = float(len(set_aside))
        metrics.update(training_overlap(table, extras.get("training_conversations")))
    return metrics
