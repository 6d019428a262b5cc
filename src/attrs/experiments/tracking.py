"""Run logging: an MLflow run started, filled and ended (`start_run`, `Run`), and the runs listed.

Where runs go is `psyattrs.experiments.store`; what a run read, and how to check it again, is
`psyattrs.experiments.provenance`; the plots it logs are `psyattrs.experiments.figures`.

What a run holds (`start_run` and the `Run` methods):

- params: the flattened resolved config (`ExperimentConfig.flatten`);
- tags: `mlflow.source.git.commit` (and `psyattrs.git_dirty`), `psyattrs.version`,
  `psyattrs.config`, `psyattrs.role` (`single`, `cv` or `fold`), and on failure `psyattrs.error`;
- inputs: the datasets (`mlflow.data.from_pandas`, with digests) with context train/valid/test;
- metrics: `psyattrs.experiments.metrics` names (`test_macro_f1_{head}`, ...);
- artifacts: `config.yaml`, `summary.txt`, `metrics.json`, `floor_prior.json`, `schema.json`
  (the heads the run trained, which a LeWiDi file or a generic table brings with it),
  `reports/classification_{head}.txt`, `plots/confusion.png`, `plots/calibration.png`,
  `predictions/test.parquet`, `set_aside.jsonl` (records the readers set aside, when any) and the
  pyfunc model `model` (`psyattrs.experiments.pyfunc`);
- a run that raises ends FAILED with `error.txt` (the traceback);
- a run stopped by a signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1/2, SIGALRM, SIGXCPU,
  SIGXFSZ: what schedulers, `timeout` and container stops send) ends KILLED with the note
  `psyattrs.interrupted` (and the MLflow description) naming the signal and the step it stopped;
- every run records `psyattrs.pid`, `psyattrs.pid_start` and `psyattrs.host`, so that a run left
  RUNNING by `kill -9` or a crash is told apart from one still running (`run_end`,
  `list_runs`, `psyattrs runs`).

With cross-validation, each fold is a nested run with its params, datasets, metrics, reports,
plots and predictions (no model); the parent holds the fold means (and `*_std`), the pooled
out-of-fold predictions with their reports and plots, and the model refitted on the whole corpus.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import math
import os
import socket
import time
import tempfile
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import numpy as np
import pandas as pd

from psyattrs._version import __version__
from psyattrs.data.table import SENTENCE_COLUMNS, final_column
import psyattrs.experiments.metrics as M
from psyattrs.errors import Interrupted, OutputFileError
from psyattrs.experiments.config import ExperimentConfig
from psyattrs.experiments.figures import calibration_figure, confusion_figure
from psyattrs.experiments.provenance import git_commit
from psyattrs.experiments.stopping import (
    current_step, model_logged, process_start, run_end, shielded, signals_interrupt,
)
from psyattrs.experiments.store import ensure_experiment, quiet_mlflow, resolve_tracking_uri, tracking_store
from psyattrs.schema import Schema


@dataclass
class Run:
    """An active MLflow run and what the runner logs into it.

    Attributes:
        run_id: the MLflow run id.
        artifact_uri: where its artifacts live.
        tracking_uri: the store it is in.
    """

    run_id: str
    artifact_uri: str
    tracking_uri: str

    def log_metrics(self, metrics: Mapping[str, float], *, write_json: bool = True) -> None:
        """Logs every metric (NaN ones too: MLflow stores them as NaN); with `write_json`, also the
        artifact `metrics.json` (NaN as null)."""
        import mlflow

        mlflow.log_metrics({k: float(v) for k, v in metrics.items()})
        if write_json:
            clean = {k: (None if math.isnan(v) else float(v)) for k, v in metrics.items()}
            mlflow.log_dict(clean, "metrics.json")

    def log_params(self, params: Mapping[str, Any]) -> None:
        """Logs further run parameters (values as text)."""
        import mlflow

        mlflow.log_params({k: str(v) for k, v in params.items()})

    def log_text(self, text: str, path: str) -> None:
        """Writes `text` as the artifact `path`."""
        import mlflow

        mlflow.log_text(text, path)

    def log_dataset(self, df: pd.DataFrame, *, name: str, context: str, source: str | Mapping[str, Any]) -> None:
        """Records a dataset as a run input with its digest.

        Args:
            df: the utterance table of that split.
            name: dataset name (e.g. `corpus.csv:test`).
            context: `train`, `valid` or `test`.
            source: the file it was read from, or a mapping describing how it was generated.
        """
        import mlflow
        from mlflow.data.code_dataset_source import CodeDatasetSource

        if isinstance(source, Mapping):
            src = CodeDatasetSource(tags={str(k): str(v) for k, v in source.items()})
        else:
            src = Path(source).resolve().as_uri()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dataset = mlflow.data.from_pandas(df, source=src, name=name)
            mlflow.log_input(dataset, context=context)

    def log_evaluation(
        self,
        table: pd.DataFrame,
        schema: Schema,
        proba: Mapping[str, np.ndarray],
        predicted: Mapping[str, np.ndarray] | pd.DataFrame,
    ) -> None:
        """Logs the classification reports, confusion and calibration plots and predictions
        (`predictions/test.parquet`, see `predictions_frame`) of the test split."""
        import mlflow

        for head, report in M.classification_reports(table, schema, predicted).items():
            mlflow.log_text(report, f"reports/classification_{head}.txt")
        mlflow.log_figure(confusion_figure(table, schema, predicted), "plots/confusion.png")
        mlflow.log_figure(calibration_figure(table, schema, proba), "plots/calibration.png")
        frame = predictions_frame(table, schema, proba, predicted)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "test.parquet"
            frame.to_parquet(path, index=False)
            mlflow.log_artifact(str(path), "predictions")

    def log_model(self, model: Any, schema: Schema, example: pd.DataFrame) -> str:
        """Logs the model as a pyfunc model named `model`; returns its model URI. From then on a
        stop signal lets the run finish (`psyattrs.experiments.stopping.model_logged`)."""
        uri = log_pyfunc_model(model, schema, example)
        model_logged(self.run_id)
        return uri


class SilentRun(Run):
    """The run of a process that is not rank 0 of a `torchrun` launch: it trains like the others
    (data parallelism) but logs nothing, so that one launch makes one MLflow run."""

    def log_metrics(self, metrics: Mapping[str, float], *, write_json: bool = True) -> None:
        return None

    def log_params(self, params: Mapping[str, Any]) -> None:
        return None  # (MLflow would start a stray run of its own in its default store)

    def log_text(self, text: str, path: str) -> None:
        return None

    def log_dataset(self, df: pd.DataFrame, *, name: str, context: str, source: Any) -> None:
        return None

    def log_evaluation(self, table, schema, proba, predicted) -> None:
        return None

    def log_model(self, model: Any, schema: Schema, example: pd.DataFrame) -> str:
        return ""


def launch_rank() -> int:
    """This process's rank in a `torchrun` / `torch.distributed` launch (RANK), 0 otherwise."""
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        return 0


def predictions_frame(
    table: pd.DataFrame,
    schema: Schema,
    proba: Mapping[str, np.ndarray],
    predicted: Mapping[str, np.ndarray] | pd.DataFrame,
) -> pd.DataFrame:
    """The predictions artifact: one row per sentence of the split.

    Returns:
        Columns `doc_id`, `sent_id`, `position`, `person_type`, `is_pause`, `text` (those present),
        then per head `labeler_{head}` (final label, Int64), `pred_{head}` (int64) and
        `proba_{head}_{k}` (float64).
    """
    out = table[[c for c in SENTENCE_COLUMNS if c in table.columns]].reset_index(drop=True).copy()
    for head in schema:
        column = final_column(head.name)
        out[column] = table[column].reset_index(drop=True) if column in table else pd.array([pd.NA] * len(table), "Int64")
        out[f"pred_{head.name}"] = np.asarray(predicted[head.name], dtype=np.int64)
        p = np.asarray(proba[head.name], dtype=np.float64)
        for k in head.values:
            out[f"proba_{head.name}_{k}"] = p[:, k]
    return out


def pip_requirements(model: Any = None) -> list[str]:
    """Pinned requirements of the pyfunc model (the installed versions of what it imports): the
    classical stack, plus the backend packages a model declares (`_packages`: torch, transformers
    and tokenizers for a transformer, also inside an ensemble)."""
    from importlib.metadata import PackageNotFoundError, version

    names = ["mlflow", "numpy", "pandas", "pyarrow", "scikit-learn", "scipy", "lightgbm", "pyyaml",
             "kiwipiepy", "jieba"]
    for part in [model, *getattr(model, "members_", [])]:
        names += [p for p in getattr(part, "_packages", ()) if p not in names]
    out = []
    for name in names:
        try:
            out.append(f"{name}=={version(name)}")
        except PackageNotFoundError:
            continue
    return out


def training_metrics_logger() -> Callable[[Mapping[str, float], int], None]:
    """A callback that logs a model's training metrics (per step, per epoch) into the active run
    as `fit_<name>` at that step; models receive it as `metrics_callback` (models/ does not import
    MLflow)."""
    import mlflow

    def log(metrics: Mapping[str, float], step: int) -> None:
        mlflow.log_metrics({f"fit_{k}": float(v) for k, v in metrics.items()}, step=int(step))

    return log


def log_pyfunc_model(model: Any, schema: Schema, example: pd.DataFrame) -> str:
    """Saves `model` and logs it as the pyfunc model `model` of the active run.

    Args:
        model: a fitted `MultiHeadModel` (has `save(folder)`).
        schema: its heads (logged as the `schema` artifact).
        example: a few input rows (utterance-table shape) for the input example.

    Returns:
        The logged model's URI.
    """
    import mlflow

    # lazy: mlflow (mlflow.pyfunc)
    from psyattrs.experiments.pyfunc import AttributesPyfunc, model_signature

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "psyattrs_model"
        model.save(folder)
        schema_path = Path(tmp) / "schema.json"
        schema_path.write_text(json.dumps(schema.to_dict(), ensure_ascii=False), encoding="utf-8")
        pyfunc_logger = logging.getLogger("mlflow.pyfunc")
        level = pyfunc_logger.level
        pyfunc_logger.setLevel(logging.ERROR)  # its CloudPickle notice: the class is imported by reference
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                info = mlflow.pyfunc.log_model(
                    name="model",
                    python_model=AttributesPyfunc(),
                    artifacts={"model": str(folder), "schema": str(schema_path)},
                    signature=model_signature(schema),
                    input_example=example,
                    pip_requirements=pip_requirements(model),
                )
        finally:
            pyfunc_logger.setLevel(level)
    return info.model_uri


def _tags(config: ExperimentConfig, role: str) -> dict[str, str]:
    commit, dirty = git_commit()
    tags = {"psyattrs.version": __version__, "psyattrs.config": config.name, "psyattrs.role": role,
            "psyattrs.pid": str(os.getpid()), "psyattrs.pid_start": process_start(os.getpid()) or "",
            "psyattrs.host": socket.gethostname()}
    if commit:
        tags["mlflow.source.git.commit"] = commit
        tags["psyattrs.git_dirty"] = str(dirty).lower()
    return tags


@contextlib.contextmanager
def start_run(
    config: ExperimentConfig,
    *,
    role: str = "single",
    run_name: str | None = None,
    nested: bool = False,
    quiet: bool = False,
) -> Iterator[Run]:
    """Starts a run for `config` in its store and experiment; logs params, tags and `config.yaml`.

    A top-level run (not `nested`) also points MLflow at the store for the whole block. Under
    `torchrun`, processes of rank > 0 get a `SilentRun` that logs nothing (one launch, one run). On an
    exception the run gets `error.txt` (the traceback) and the tag `psyattrs.error`, ends FAILED,
    and the exception propagates.

    Args:
        config: the resolved config (one sweep member).
        role: `single`, `cv` (parent of folds) or `fold`.
        run_name: None = `config.run_name`.
        nested: a child of the active run (cross-validation folds).
        quiet: silence MLflow's own logging and progress bars.

    Yields:
        The `Run`.

    Raises:
        OutputFileError: the store (or its artifacts folder) cannot be written: a full disk, an
            I/O error, a read-only file (`store_write_failure`); one line naming the store, in
            place of MLflow's chain of sqlite tracebacks.
    """
    if launch_rank() != 0:  # torchrun: only rank 0 tracks
        yield SilentRun(run_id="", artifact_uri="", tracking_uri=resolve_tracking_uri(config.tracking.uri))
        return
    try:
        with _tracked_run(config, role=role, run_name=run_name, nested=nested, quiet=quiet) as run:
            yield run
    except Exception as exc:
        reason = store_write_failure(exc)
        if reason is None:
            raise
        uri = mlflow_uri_or(config.tracking.uri)
        raise OutputFileError(_store_location(uri), f"{reason} (the tracking store); free space on its disk, or point "
                                                    "tracking.uri at another store") from None


_STORE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO})
_SQLITE_WRITE_FAILURES = ("full", "disk I/O error", "readonly", "read-only", "unable to open")


def store_write_failure(exc: BaseException | None) -> str | None:
    """The reason, when `exc` (or an exception it was raised from) says that the tracking store or
    its artifacts cannot be written: a full disk, an I/O error, a read-only file; None otherwise."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in _STORE_ERRNOS:
            return os.strerror(exc.errno)
        if type(exc).__module__ == "sqlite3" and type(exc).__name__ == "OperationalError":
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            if any(word in text for word in _SQLITE_WRITE_FAILURES):
                return text
        exc = exc.__cause__ or exc.__context__
    return None


def mlflow_uri_or(uri: str | None) -> str:
    """The store in use: MLflow's current tracking URI when one is set, else `resolve_tracking_uri(uri)`."""
    import mlflow

    return mlflow.get_tracking_uri() if mlflow.is_tracking_uri_set() else resolve_tracking_uri(uri)


def _store_location(uri: str) -> str:
    return uri[len("sqlite:///"):] if uri.startswith("sqlite:///") else uri


@contextlib.contextmanager
def _tracked_run(config: ExperimentConfig, *, role: str, run_name: str | None, nested: bool,
                 quiet: bool) -> Iterator[Run]:
    """`start_run` of rank 0 (see there)."""
    import mlflow

    with contextlib.ExitStack() as stack:
        stack.enter_context(quiet_mlflow(quiet))
        if not nested:
            uri = stack.enter_context(tracking_store(config.tracking.uri))
            experiment_id = ensure_experiment(config.tracking.experiment, uri)
            active = mlflow.start_run(experiment_id=experiment_id, run_name=run_name or config.run_name,
                                      tags=_tags(config, role))
        else:
            uri = mlflow.get_tracking_uri()
            parent = mlflow.active_run()
            if parent is None:
                raise ValueError("a nested run needs an active parent run")
            active = mlflow.start_run(experiment_id=parent.info.experiment_id, run_name=run_name or config.run_name,
                                      nested=True, tags=_tags(config, role))
        run = Run(run_id=active.info.run_id, artifact_uri=active.info.artifact_uri, tracking_uri=uri)
        if not nested:
            stack.enter_context(signals_interrupt())
        started = time.monotonic()
        try:
            mlflow.log_params(config.flatten())
            mlflow.log_text(config.to_yaml(), "config.yaml")
            yield run
        except BaseException as exc:
            killed = isinstance(exc, KeyboardInterrupt)
            with shielded():  # a second signal must not cut the bookkeeping short
                if store_write_failure(exc) is not None:  # the store is full: nothing more can be recorded
                    with contextlib.suppress(Exception):
                        mlflow.end_run(status="FAILED")
                    raise
                if killed:
                    _record_interruption(exc, time.monotonic() - started)
                _record_failure(exc)
                mlflow.end_run(status="KILLED" if killed else "FAILED")
            raise
        else:
            mlflow.end_run(status="FINISHED")


# ------------------------------------------------------------------------ signals and run ends


def _record_interruption(exc: BaseException, seconds: float) -> None:
    import mlflow

    what = f"signal {exc.signal_name}" if isinstance(exc, Interrupted) else "SIGINT (Ctrl-C)"
    step = current_step()
    note = (f"interrupted by {what}" + (f" during step {step!r}" if step else "")
            + f" after {seconds:.1f}s; the run did not finish and its outputs are incomplete")
    try:
        mlflow.set_tags({"psyattrs.interrupted": note, "mlflow.note.content": note})
    except Exception as logging_error:  # noqa: BLE001 - the interruption must still propagate
        warnings.warn(f"could not record the interruption in MLflow: {logging_error}", stacklevel=3)


def run_ending(run_id: str, *, tracking_uri: str | None = None) -> str:
    """How run `run_id` ended, in the words of `psyattrs runs` (`run_end`).

    Raises:
        ValueError: no such run in the store.
    """
    import mlflow
    from mlflow.exceptions import MlflowException

    with tracking_store(tracking_uri) as uri, quiet_mlflow():
        try:
            run = mlflow.MlflowClient(tracking_uri=uri).get_run(run_id)
        except MlflowException:
            raise ValueError(f"no MLflow run {run_id!r} in {uri}") from None
    return run_end(run.info.status, run.data.tags)


def list_runs(*, tracking_uri: str | None = None, experiment: str | None = None) -> pd.DataFrame:
    """The runs of a store, newest first.

    Returns:
        One row per run: `run_id`, `experiment`, `name`, `role`, `status` (MLflow's), `end`
        (`run_end`'s words), `start` (UTC, ISO), `seconds` (None while running),
        `test_macro_f1_mean` (NaN when not logged).

    Raises:
        ValueError: `experiment` is not in the store.
    """
    import mlflow

    with tracking_store(tracking_uri) as uri, quiet_mlflow():
        client = mlflow.MlflowClient(tracking_uri=uri)
        experiments = client.search_experiments()
        if experiment is not None:
            experiments = [e for e in experiments if e.name == experiment]
            if not experiments:
                raise ValueError(f"no experiment {experiment!r} in {uri}")
        names = {e.experiment_id: e.name for e in experiments}
        runs = client.search_runs(list(names), order_by=["attributes.start_time DESC"], max_results=50_000) if names else []
    rows = []
    for run in runs:
        info, tags = run.info, run.data.tags
        start = pd.Timestamp(info.start_time, unit="ms", tz="UTC") if info.start_time else None
        rows.append({
            "run_id": info.run_id, "experiment": names.get(info.experiment_id, ""), "name": info.run_name or "",
            "role": tags.get("psyattrs.role", ""), "status": info.status, "end": run_end(info.status, tags),
            "start": start.isoformat(timespec="seconds") if start is not None else "",
            "seconds": (info.end_time - info.start_time) / 1000 if info.end_time and info.start_time else None,
            "test_macro_f1_mean": run.data.metrics.get("test_macro_f1_mean", float("nan")),
        })  # fmt: skip
    columns = ["run_id", "experiment", "name", "role", "status", "end", "start", "seconds", "test_macro_f1_mean"]
    return pd.DataFrame(rows, columns=columns)


def close_abandoned(*, tracking_uri: str | None = None, experiment: str | None = None) -> list[tuple[str, str]]:
    """Ends KILLED, with a note, every run that never finished (RUNNING, its process gone on this
    machine). Returns (run_id, note) for each."""
    import mlflow

    closed = []
    runs = list_runs(tracking_uri=tracking_uri, experiment=experiment)
    abandoned = runs[(runs["status"] == "RUNNING") & runs["end"].str.startswith("never finished")]
    with tracking_store(tracking_uri) as uri, quiet_mlflow():
        client = mlflow.MlflowClient(tracking_uri=uri)
        for r in abandoned.itertuples():
            note = f"closed by psyattrs runs --close-abandoned: {r.end}"
            client.set_tag(r.run_id, "psyattrs.interrupted", note)
            client.set_tag(r.run_id, "mlflow.note.content", note)
            client.set_terminated(r.run_id, status="KILLED")
            closed.append((r.run_id, note))
    return closed


def _record_failure(exc: BaseException) -> None:
    import mlflow

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    try:
        mlflow.set_tag("psyattrs.error", f"{type(exc).__name__}: {exc}"[:5000])
        mlflow.log_text(text, "error.txt")
    except Exception as logging_error:  # noqa: BLE001 - the original error must still propagate
        warnings.warn(f"could not record the failure in MLflow: {logging_error}", stacklevel=3)


