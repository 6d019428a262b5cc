"""Where runs go, and MLflow pointed at it: the store helpers that training, serving and the CLI share.

The store: the config's `tracking.uri`, else the `MLFLOW_TRACKING_URI` environment variable, else
`sqlite:///<repo>/mlflow/mlflow.db` with artifacts under `<repo>/mlflow/artifacts` (repo = the
folder holding `pyproject.toml` above the installed package; the current folder when there is
none). For any `sqlite:///.../NAME.db` store, a new experiment's artifacts go to an `artifacts`
folder beside the database, never to the current folder. `tracking_store(uri)` points MLflow at
it for a block; `quiet_mlflow()` silences MLflow's chatter. MLflow is imported where a function
needs it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from pathlib import Path
from typing import Iterator
from urllib.parse import urlparse

ENV_URI = "MLFLOW_TRACKING_URI"


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
    # creating a sqlite store logs two INFO lines per new database (table creation, migration)
    for name in ("mlflow.store.db.utils", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # a database error is also logged there with its traceback before MLflow raises it: the raised
    # exception carries it (and a full store becomes one line, see tracking.start_run)
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
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
