"""Everything MLflow-specific about experiment runs.

Where runs go: the config's `tracking.uri`, else the `MLFLOW_TRACKING_URI` environment variable,
else `sqlite:///<repo>/mlflow/mlflow.db` with artifacts under `<repo>/mlflow/artifacts` (repo =
the folder holding `pyproject.toml` above the installed package; the current folder when there is
none). For any `sqlite:///.../NAME.db` store, a new experiment's artifacts go to an `artifacts`
folder beside the database, never to the current folder.

What a run holds (`start_run` and the `Run` methods):

- params: the flattened resolved config (`ExperimentConfig.flatten`);
- tags: `mlflow.source.git.commit` (and `psyattrs.git_dirty`), `psyattrs.version`,
  `psyattrs.config`, `psyattrs.role` (`single`, `cv` or `fold`), and on failure `psyattrs.error`;
- inputs: the datasets (`mlflow.data.from_pandas`, with digests) with context train/valid/test;
- metrics: `psyattrs.experiments.metrics` names (`test_macro_f1_{head}`, ...);
- artifacts: `config.yaml`, `summary.txt`, `metrics.json`, `floor_prior.json`,
  `reports/classification_{head}.txt`, `plots/confusion.png`, `plots/calibration.png`,
  `predictions/test.parquet`, `set_aside.jsonl` (records the readers set aside, when any) and the
  pyfunc model `model` (`psyattrs.serving.pyfunc`);
- a run that raises ends FAILED with `error.txt` (the traceback).

With cross-validation, each fold is a nested run with its params, datasets, metrics, reports,
plots and predictions (no model); the parent holds the fold means (and `*_std`), the pooled
out-of-fold predictions with their reports and plots, and the model refitted on the whole corpus.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import subprocess
import tempfile
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping
from urllib.parse import urlparse

import numpy as np
import pandas as pd

from psyattrs.data.table import final_column
from psyattrs.experiments import metrics as M
from psyattrs.experiments.config import ExperimentConfig
from psyattrs.schema import Schema

ENV_URI = "MLFLOW_TRACKING_URI"
PREDICTION_COLUMNS = ("doc_id", "sent_id", "position", "person_type", "is_pause", "text")


def repo_root() -> Path | None:
    """The folder holding `pyproject.toml` above the package (a source checkout), or None."""
    here = Path(__file__).resolve()
    for folder in here.parents:
        if (folder / "pyproject.toml").is_file():
            return folder
    return None


def default_tracking_uri() -> str:
    """`sqlite:///<repo>/mlflow/mlflow.db` (the current folder stands in for a missing repo)."""
    root = repo_root() or Path.cwd()
    return f"sqlite:///{(root / 'mlflow' / 'mlflow.db').as_posix()}"


def resolve_tracking_uri(uri: str | None = None) -> str:
    """The tracking URI a run uses: `uri` (the config's), else MLFLOW_TRACKING_URI, else the default."""
    return uri or os.environ.get(ENV_URI) or default_tracking_uri()


def artifact_root(uri: str) -> Path | None:
    """For a `sqlite:///` store, the `artifacts` folder beside the database; None for other stores."""
    parsed = urlparse(uri)
    if parsed.scheme != "sqlite":
        return None
    path = Path(uri[len("sqlite:///"):]) if uri.startswith("sqlite:///") else None
    if path is None or str(path) in ("", ":memory:"):
        return None
    return path.parent / "artifacts"


def _prepare_store(uri: str) -> None:
    root = artifact_root(uri)
    if root is not None:
        root.parent.mkdir(parents=True, exist_ok=True)


@contextlib.contextmanager
def tracking_store(uri: str | None = None) -> Iterator[str]:
    """Points MLflow at the resolved store for the duration of the block, then restores it."""
    import mlflow

    resolved = resolve_tracking_uri(uri)
    _prepare_store(resolved)
    previous = mlflow.get_tracking_uri() if mlflow.is_tracking_uri_set() else None
    mlflow.set_tracking_uri(resolved)
    try:
        yield resolved
    finally:
        mlflow.set_tracking_uri(previous)  # None unsets it (and the environment variable MLflow set)


def ensure_experiment(name: str, uri: str) -> str:
    """The id of experiment `name` in the current store, created (artifacts beside a sqlite db) if new."""
    import mlflow

    found = mlflow.get_experiment_by_name(name)
    if found is not None:
        if found.lifecycle_stage == "deleted":
            raise ValueError(f"MLflow experiment {name!r} is deleted in {uri}; restore it or choose tracking.experiment")
        return found.experiment_id
    root = artifact_root(uri)
    location = (root / _safe_name(name)).resolve().as_uri() if root is not None else None
    return mlflow.create_experiment(name, artifact_location=location)


def _safe_name(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name) or "experiment"


def git_commit() -> tuple[str | None, bool | None]:
    """(commit hash, whether the work tree has uncommitted changes) of the repo; (None, None) outside git."""
    root = repo_root()
    if root is None:
        return None, None
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True, text=True,
            timeout=10, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None, None
    return commit or None, bool(status.strip())


@contextlib.contextmanager
def quiet_mlflow(quiet: bool = True) -> Iterator[None]:
    """Silences MLflow's info logging, its artifact progress bars and its warnings while active."""
    if not quiet:
        yield
        return
    logger = logging.getLogger("mlflow")
    level = logger.level
    previous = os.environ.get("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR")
    logger.setLevel(logging.ERROR)
    os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)
        if previous is None:
            os.environ.pop("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", None)
        else:
            os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = previous


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
        """Logs the model as a pyfunc model named `model`; returns its model URI."""
        return log_pyfunc_model(model, schema, example)


class SilentRun(Run):
    """The run of a process that is not rank 0 of a `torchrun` launch: it trains like the others
    (data parallelism) but logs nothing, so that one launch makes one MLflow run."""

    def log_metrics(self, metrics: Mapping[str, float], *, write_json: bool = True) -> None:
        return None

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
    out = table[[c for c in PREDICTION_COLUMNS if c in table.columns]].reset_index(drop=True).copy()
    for head in schema:
        column = final_column(head.name)
        out[column] = table[column].reset_index(drop=True) if column in table else pd.array([pd.NA] * len(table), "Int64")
        out[f"pred_{head.name}"] = np.asarray(predicted[head.name], dtype=np.int64)
        p = np.asarray(proba[head.name], dtype=np.float64)
        for k in head.values:
            out[f"proba_{head.name}_{k}"] = p[:, k]
    return out


def _grid(n: int):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    cols = min(3, n)
    rows = -(-n // cols)
    fig = Figure(figsize=(4.2 * cols, 3.8 * rows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes


def confusion_figure(table: pd.DataFrame, schema: Schema, predicted: Mapping[str, np.ndarray] | pd.DataFrame):
    """One confusion matrix per head (rows: final label, columns: predicted; shade = row share)."""
    fig, axes = _grid(len(schema))
    for ax, head in zip(axes, schema):
        counts = M.confusion(table, head, predicted[head.name])
        shares = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
        ax.imshow(shares, cmap="Blues", vmin=0, vmax=1)
        for (i, j), n in np.ndenumerate(counts):
            ax.text(j, i, str(n), ha="center", va="center", color="white" if shares[i, j] > 0.5 else "black")
        ax.set_xticks(head.values)
        ax.set_yticks(head.values)
        ax.set_xlabel("predicted")
        ax.set_ylabel("final label")
        ax.set_title(head.name)
    return fig


def calibration_figure(table: pd.DataFrame, schema: Schema, proba: Mapping[str, np.ndarray]):
    """One reliability diagram per head (top-label confidence against accuracy, with the ECE)."""
    fig, axes = _grid(len(schema))
    keep = M.evaluable(table)
    for ax, head in zip(axes, schema):
        column = final_column(head.name)
        final = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=float, na_value=np.nan) if column in table else np.full(len(table), np.nan)
        rows = keep & ~np.isnan(final)
        y, p = final[rows].astype(int), np.asarray(proba[head.name])[rows]
        bins = M.calibration_bins(y, p)
        used = bins[bins["count"] > 0]
        ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1)
        ax.plot(used["confidence"], used["accuracy"], marker="o")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("confidence")
        ax.set_ylabel("accuracy")
        ece = M.expected_calibration_error(y, p)
        ax.set_title(f"{head.name}  ECE {ece:.3f}" if not math.isnan(ece) else f"{head.name}  (no labelled rows)")
    return fig


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

    from psyattrs.serving.pyfunc import AttributesPyfunc, model_signature

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
    from psyattrs import __version__

    commit, dirty = git_commit()
    tags = {"psyattrs.version": __version__, "psyattrs.config": config.name, "psyattrs.role": role}
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
    """
    import mlflow

    if launch_rank() != 0:  # torchrun: only rank 0 tracks
        yield SilentRun(run_id="", artifact_uri="", tracking_uri=resolve_tracking_uri(config.tracking.uri))
        return
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
        try:
            mlflow.log_params(config.flatten())
            mlflow.log_text(config.to_yaml(), "config.yaml")
            yield run
        except BaseException as exc:
            _record_failure(exc)
            mlflow.end_run(status="KILLED" if isinstance(exc, KeyboardInterrupt) else "FAILED")
            raise
        else:
            mlflow.end_run(status="FINISHED")


def _record_failure(exc: BaseException) -> None:
    import mlflow

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    try:
        mlflow.set_tag("psyattrs.error", f"{type(exc).__name__}: {exc}"[:5000])
        mlflow.log_text(text, "error.txt")
    except Exception as logging_error:  # noqa: BLE001 - the original error must still propagate
        warnings.warn(f"could not record the failure in MLflow: {logging_error}", stacklevel=3)


def load_run_config(run_id: str, *, tracking_uri: str | None = None) -> tuple[ExperimentConfig, dict[str, Any]]:
    """The resolved config and the floor prior logged by a run (for `evaluate`).

    Returns:
        (config, extras) where extras holds `floor_prior` (head -> list of probabilities, or None),
        `status`, `role` and `model_uri` (`runs:/<id>/model`).

    Raises:
        ValueError: no such run in the store, or the run has no `config.yaml`.
    """
    import mlflow
    from mlflow.exceptions import MlflowException

    with tracking_store(tracking_uri) as uri, quiet_mlflow():
        try:
            run = mlflow.get_run(run_id)
        except MlflowException:
            raise ValueError(f"no MLflow run {run_id!r} in {uri}") from None
        try:
            text = mlflow.artifacts.load_text(f"{run.info.artifact_uri}/config.yaml")
        except (MlflowException, OSError):
            raise ValueError(f"run {run_id!r} has no config.yaml artifact; was it made by psyattrs train?") from None
        try:
            prior = mlflow.artifacts.load_dict(f"{run.info.artifact_uri}/floor_prior.json")
        except (MlflowException, OSError):
            prior = None
    import yaml

    config = ExperimentConfig.from_dict(yaml.safe_load(text), source=f"run {run_id} config.yaml")
    extras = {"floor_prior": prior, "status": run.info.status, "role": run.data.tags.get("psyattrs.role", "single"),
              "model_uri": f"runs:/{run_id}/model", "tracking_uri": uri}
    return config, extras
