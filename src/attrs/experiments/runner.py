"""`train(config) -> TrainResult` and `evaluate(run_id) -> metrics`: the experiment loop.

`train` runs one resolved config (one sweep member) as build -> fit -> score -> log -> report:

1. checks the model settings and that the data files exist, so a bad setting or a mistyped path
   fails before any run exists;
2. starts an MLflow run (`psyattrs.experiments.tracking`); from here on, an error ends the run FAILED;
3. **build**: the dataset of the config (`psyattrs.experiments.dataset.build_dataset`: the
   corpus, its schema and its splits by conversation or persona);
4. **fit** the model on targets built with `targets.lambda` (`psyattrs.labels.soft.mixed_targets`),
   with the validation split (calibration, thresholds);
5. **score** the test split against the final labels, the labelers and the truth, beside the
   majority floor and one labeler against the others (`psyattrs.experiments.metrics`);
6. **log** datasets, the records the reader set aside (`n_set_aside`, `set_aside.jsonl`), metrics,
   reports, plots, predictions and the pyfunc model;
7. **report**: once the run has ended, its HTML report (`psyattrs.experiments.report`,
   artifact `report/report.html`); a report that cannot be built is a warning, never a lost run.

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
from typing import Any, Iterable, Iterator, Mapping

import numpy as np
import pandas as pd

from psyattrs._runtime import on_terminal
from psyattrs.data.table import SENTENCE_COLUMNS
import psyattrs.experiments.metrics as M
from psyattrs.experiments.config import ExperimentConfig, expand_sweep, load_config
from psyattrs.experiments.dataset import (Dataset, build_dataset, carve_valid, check_files, config_schema,
                                          read_labelled, run_schema, split_dataset)
from psyattrs.experiments.provenance import (CONVERSATIONS_ARTIFACT, ChangedDataWarning, changed_data,
                                             conversation_digests, load_run_config, training_overlap)
from psyattrs.experiments.report import log_run_report
from psyattrs.experiments.stopping import mark_step
from psyattrs.experiments.store import quiet_mlflow, tracking_store
from psyattrs.experiments.tracking import start_run, training_metrics_logger
from psyattrs.features.tokenizers import tokenizer_description
from psyattrs.labels.soft import mixed_targets
from psyattrs.models.base import build_model
from psyattrs.schema import Schema


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


# ------------------------------------------------------------------------------- fit and score


def _targets(table: pd.DataFrame, config: ExperimentConfig, schema: Schema) -> dict[str, np.ndarray]:
    return mixed_targets(table, schema, lam=config.targets.lam, smoothing=config.targets.smoothing)


def _build(config: ExperimentConfig, schema: Schema):
    settings = config.model_settings()
    return build_model(config.model.kind, schema, **settings)


def build_from_config(config: ExperimentConfig):
    """The unfitted model a config describes (checks every model setting; reads no data).

    Raises:
        ValueError: an unknown or bad model setting (named, with the allowed ones).
    """
    return _build(config, config_schema(config))


@dataclass
class _Scored:
    model: Any
    proba: dict[str, np.ndarray]
    predicted: pd.DataFrame
    metrics: dict[str, float]
    prior: dict[str, np.ndarray]


def _fit_score(split: Dataset, config: ExperimentConfig, steps: _Steps) -> _Scored:
    schema = split.schema
    model = _build(config, schema)
    if hasattr(model, "metrics_callback"):  # models that report training curves (the transformer)

        model.metrics_callback = training_metrics_logger()
    valid = (split.valid, _targets(split.valid, config, schema)) if split.valid is not None else None
    # one count for the progress lines, the logged n_{split}_sentences and the report: non-pause rows
    keep = {name: int(M.evaluable(getattr(split, name)).sum()) if getattr(split, name) is not None else 0
            for name in ("train", "valid", "test")}
    with steps.step(f"fit {config.model.kind} on {keep['train']} sentences"
                    + (f" ({keep['valid']} validation)" if split.valid is not None else ""), spinner=False):
        start = time.perf_counter()
        model.fit(split.train, _targets(split.train, config, schema), valid=valid, progress=not steps.quiet)
        fit_seconds = time.perf_counter() - start
    with steps.step(f"score {keep['test']} test sentences"):
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
    metrics.update({f"n_{name}_sentences": float(n) for name, n in keep.items()})
    metrics.update({"fit_seconds": fit_seconds, "predict_seconds": predict_seconds})
    return _Scored(model, proba, predicted, metrics, prior)


# ------------------------------------------------------------------------------------ log


def _dataset_name(source: Any, part: str) -> str:
    base = Path(source).name if isinstance(source, str) else "synthetic"
    return f"{base}:{part}"


def _log_inputs(run, split: Dataset, steps: _Steps, config: ExperimentConfig) -> None:
    """Logs the datasets, the records the readers set aside (`set_aside.jsonl`, `n_set_aside`) and
    which heads had their final labels resolved (param `targets.resolved_heads`)."""
    run.log_metrics({"n_set_aside": float(len(split.set_aside))}, write_json=False)
    run.log_params({"targets.resolved_heads": ",".join(split.resolved) or "none"})
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
    return first[[c for c in SENTENCE_COLUMNS if c in first.columns]].reset_index(drop=True)


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


def resolved_message(heads: list[str], method: str) -> str:
    """The line that says final labels were resolved by the runner (printed by `psyattrs train`)."""
    return (f"final labels resolved from the labelers' labels with {method!r} (targets.resolve) for head(s) "
            f"{heads}: the corpus has none for them")


def feature_params(config: ExperimentConfig, schema: Schema) -> dict[str, str]:
    """The run parameters that say how text is read: `features.language` (the schema's) and
    `features.tokenizer` (e.g. `character n-grams + whitespace words (fallback: ...)`)."""
    words = str(config.model.params.get("words", "auto"))
    return {"features.language": schema.language, "features.tokenizer": tokenizer_description(schema.language, words)}


# ------------------------------------------------------------------------------------- train


def train(
    config: "ExperimentConfig | str | Path",
    overrides: "Mapping[str, Any] | Iterable[str] | None" = None,
    *,
    quiet: bool = False,
    report: bool = True,
) -> TrainResult:
    """Trains, scores, tracks and reports one config (see the module docstring); `psyattrs.train`.

    Args:
        config: a resolved `ExperimentConfig` without a sweep (use `train_all` for a sweep), or an
            experiment YAML path (or a shipped config's name, as `load_config` takes).
        overrides: `key=value` strings or a mapping, applied when `config` is a path.
        quiet: no progress display and no MLflow chatter.
        report: log the run report (`report/report.html`) once the run has ended; a report that
            cannot be built is a warning on standard error, never a lost run.

    Returns:
        The `TrainResult` of the run.

    Raises:
        ValueError: the config has a sweep or a bad model setting (both before any run starts),
            overrides given with a loaded config, or data that cannot be split or trained on (the
            run ends FAILED, the error logged).
        InputFileError: a missing data or schema file (before any run starts) or one that cannot
            be read (the run ends FAILED).
    """
    if not isinstance(config, ExperimentConfig):
        config = load_config(config, overrides)
    elif overrides:
        raise ValueError("overrides apply to a config file; pass them to load_config for a loaded config")
    if config.sweep:
        raise ValueError(f"config {config.name!r} has a sweep of {len(config.sweep)} runs: use train_all")
    schema = config_schema(config)
    _build(config, schema)  # a bad model setting or a missing file fails here, before a run exists
    check_files(config)
    steps = _Steps(quiet)
    result = _train_cv(config, schema, steps, quiet) if config.split.folds else _train_single(config, schema, steps, quiet)
    if report and result.run_id:  # no run id: a torchrun process of rank > 0 (rank 0 logs the run)
        _report(result, steps)
    return result


def _train_single(config: ExperimentConfig, schema: Schema, steps: _Steps, quiet: bool) -> TrainResult:
    with start_run(config, role="single", quiet=quiet) as run:
        run.log_params(feature_params(config, schema))
        with steps.step("load and split the data"):
            data = build_dataset(config, schema)
            _log_inputs(run, data, steps, config)
        scored = _fit_score(data, config, steps)
        scored.metrics["n_set_aside"] = float(len(data.set_aside))
        summary, model_uri = _log_outcome(run, scored, data.test, schema, steps)
    return TrainResult(run.run_id, scored.metrics, scored.model, config, schema, summary,
                       run.tracking_uri, run.artifact_uri, model_uri, resolved_heads=data.resolved)


def _report(result: TrainResult, steps: _Steps) -> None:
    """Logs the run report of a finished run; a failure is a warning, the run stands."""
    try:
        with steps.step("write the run report"):
            log_run_report(result.run_id, tracking_uri=result.tracking_uri)
    except Exception as exc:  # noqa: BLE001 - the trained run must survive a failing report
        print(f"psyattrs: warning: run {result.run_id}: the run report was not logged: "
              f"{type(exc).__name__}: {exc}", file=sys.stderr)


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
    with start_run(config, role="cv", quiet=quiet) as parent:
        parent.log_params(feature_params(config, schema))
        with steps.step("load the data"):
            data = build_dataset(config, schema)
            _log_inputs(parent, data, steps, config)
        table = data.train
        folds = data.folds(config)
        per_fold, fold_ids = [], []
        oof_proba = {h.name: np.zeros((len(table), h.n_classes)) for h in schema}
        oof_pred = pd.DataFrame(0, index=table.index, columns=schema.head_names, dtype="int64")
        for i, (train_idx, test_idx) in enumerate(folds, start=1):
            part = data.fold(config, train_idx, test_idx)
            with start_run(config, role="fold", run_name=f"{config.run_name}/fold{i}", nested=True, quiet=quiet) as child:
                _log_inputs(child, part, steps, config)
                scored = _fit_score(part, config, steps)
                child.log_metrics(scored.metrics)
                child.log_evaluation(part.test, schema, scored.proba, scored.predicted)
            per_fold.append(scored.metrics)
            fold_ids.append(child.run_id)
            for head in schema:
                oof_proba[head.name][test_idx] = scored.proba[head.name]
                oof_pred.loc[test_idx, head.name] = scored.predicted[head.name].to_numpy()
        metrics = _fold_mean(per_fold)
        with steps.step("refit on the whole corpus", spinner=False):
            train_all_part, valid_all = carve_valid(table, config, schema)
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
                       parent.artifact_uri, model_uri, fold_ids, resolved_heads=data.resolved)


def train_all(config: ExperimentConfig, *, quiet: bool = False, report: bool = True) -> list[TrainResult]:
    """Runs every member of the config's sweep (or the config itself), in order, each with its report."""
    return [train(member, quiet=quiet, report=report) for member in expand_sweep(config)]


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
        split = split_dataset(config, schema)
        changes = changes or changed_data({**extras, "inputs": {**extras["inputs"], "files": None}}, split.test)
        if changes:
            message = f"run {run_id}: {'; '.join(changes)}; the scores are NOT those of the data the run was tested on"
            if not allow_changed_data:
                raise ValueError(f"{message}. Pass --allow-changed-data to score it anyway")
            warnings.warn(message, ChangedDataWarning, stacklevel=2)
        table, prefix = split.test, "test_"
        prior = M.class_prior(split.train, schema)
    else:
        (table, set_aside, _), prefix = read_labelled(str(data_path), config, schema), "eval_"
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
