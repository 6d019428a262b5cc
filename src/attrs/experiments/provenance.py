"""What a run read and what it was fitted on, recorded so that it can be checked later.

- `git_commit()`: the commit (and whether the work tree was dirty) a run was trained from;
- `note_input_file(path, encoding)`: a data file a run read, with its size, SHA-256 and encoding
  (artifact `data_files.json`, tag `psyattrs.encoding`);
- `conversation_digests(table)` and `CONVERSATIONS_ARTIFACT`: the conversations a run was fitted
  and tuned on, as digests of their texts; `training_overlap` counts them in another corpus;
- `changed_data(extras)`: how the data on disk differs from what a run read;
- `load_run_config(run_id)`: a run's resolved config and what it recorded (floor prior, schema,
  conversations, inputs, how it ended), for `evaluate` and the run report.
"""

from __future__ import annotations

import subprocess
import threading
import warnings
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from psyattrs._yaml import load_yaml
from psyattrs.experiments.config import ExperimentConfig
from psyattrs.experiments.stopping import run_end
from psyattrs.experiments.store import quiet_mlflow, repo_root, tracking_store

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


CONVERSATIONS_ARTIFACT = "split_conversations.json"  # {"train": [digest, ...], "valid": [...]}


DATA_FILES_ARTIFACT = "data_files.json"


_inputs = threading.local()


class ChangedDataWarning(UserWarning):
    """`evaluate` was told to score data that differs from what the run was trained on."""


def file_sha256(path: "str | Path") -> str:
    """The SHA-256 of a file's bytes (read in 1 MiB blocks)."""
    import hashlib

    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def note_input_file(path: "str | Path", encoding: str | None) -> None:
    """Records, in the active run (if any), a data file it read: its path, size, SHA-256 and text
    encoding (artifact `data_files.json`, tag `psyattrs.encoding`); `evaluate` checks them."""
    import mlflow

    active = mlflow.active_run()
    if active is None:
        return
    p = Path(path).resolve()
    files = getattr(_inputs, "files", {})
    if getattr(_inputs, "files_run", None) != active.info.run_id:
        files = {}
    files[str(p)] = {"path": str(p), "size": p.stat().st_size, "sha256": file_sha256(p), "encoding": encoding}
    _inputs.files, _inputs.files_run = files, active.info.run_id
    mlflow.log_dict({"files": list(files.values())}, DATA_FILES_ARTIFACT)
    encodings = sorted({f"{Path(f['path']).name}={f['encoding'] or 'parquet'}" for f in files.values()})
    mlflow.set_tag("psyattrs.encoding", encodings[0].split("=", 1)[1] if len(encodings) == 1 else "; ".join(encodings))


ALIGNMENT_FOLDER = "alignment"
"""Where a run on a public-release file logs its reconstruction (`note_alignment`)."""


def note_alignment(path: "str | Path", summary: Any, utterances: pd.DataFrame) -> None:
    """Records, in the active run (if any), the reconstruction a public-release file's labels rest
    on: the summary (`psyattrs.align.AlignSummary`) as parameters `align.*` and metrics `align_*`
    and as `alignment/<file>.summary.json`, and each sentence's `align_confidence` as
    `alignment/<file>.confidence.csv` (doc_id, sent_id, label_position, align_confidence). A second
    public file in the same run (a separate test file) gets its parameters and metrics with the
    suffix `_2` (then `_3`)."""
    import mlflow

    active = mlflow.active_run()
    if active is None:
        return
    if getattr(_inputs, "aligned_run", None) != active.info.run_id:
        _inputs.aligned_run, _inputs.aligned = active.info.run_id, []
    _inputs.aligned.append(str(path))
    n = len(_inputs.aligned)
    suffix = "" if n == 1 else f"_{n}"
    mlflow.log_params({k + suffix: v for k, v in summary.params().items()})
    mlflow.log_metrics({k + suffix: v for k, v in summary.metrics().items()})
    name = Path(path).name
    mlflow.log_dict({"file": str(path), **summary.to_dict()}, f"{ALIGNMENT_FOLDER}/{name}.summary.json")
    columns = [c for c in ("doc_id", "sent_id", "label_position", "align_confidence") if c in utterances]
    mlflow.log_text(utterances[columns].to_csv(index=False, lineterminator="\n"), f"{ALIGNMENT_FOLDER}/{name}.confidence.csv")


def _dataset_inputs(run) -> dict[str, Any]:
    """What a run logged about its data: `files` (from `data_files.json`, None when absent) and
    `digests` ({context: MLflow dataset digest})."""
    import mlflow
    from mlflow.exceptions import MlflowException

    try:
        files = mlflow.artifacts.load_dict(f"{run.info.artifact_uri}/{DATA_FILES_ARTIFACT}")["files"]
    except (MlflowException, OSError, KeyError, TypeError):
        files = None
    digests = {}
    for item in getattr(run.inputs, "dataset_inputs", None) or []:
        context = next((t.value for t in item.tags if t.key == "mlflow.data.context"), None)
        if context:
            digests[context] = item.dataset.digest
    return {"files": files, "digests": digests}


def changed_data(extras: Mapping[str, Any], test: pd.DataFrame | None = None) -> list[str]:
    """How the data a run was trained on differs from what is on disk now (empty when it does not).

    Compares each recorded file's SHA-256 with the file's bytes now; for a run without recorded
    files (older runs, synthetic data), compares the digest of the rebuilt `test` split with the
    logged test dataset digest.
    """
    files = extras.get("inputs", {}).get("files")
    changes = []
    if files:
        for f in files:
            p = Path(f["path"])
            if not p.is_file():
                changes.append(f"{p} no longer exists")
            elif p.stat().st_size != f["size"] or file_sha256(p) != f["sha256"]:
                changes.append(f"{p} has changed since the run read it (sha256 {f['sha256'][:12]} then, "
                               f"{file_sha256(p)[:12]} now)")
        return changes
    logged = extras.get("inputs", {}).get("digests", {}).get("test")
    if logged and test is not None:
        import mlflow

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            now = mlflow.data.from_pandas(test).digest
        if now != logged:
            changes.append(f"the rebuilt test split differs from the one the run logged (digest {logged} then, {now} now)")
    return changes


def load_run_config(run_id: str, *, tracking_uri: str | None = None) -> tuple[ExperimentConfig, dict[str, Any]]:
    """The resolved config and the floor prior logged by a run (for `evaluate`).

    Returns:
        (config, extras) where extras holds `floor_prior` (head -> list of probabilities, or None),
        `schema` (the run's heads as `Schema.to_dict` wrote them, or None for older runs),
        `training_conversations` (`train`/`valid` -> conversation digests the model was fitted
        or tuned on, see `CONVERSATIONS_ARTIFACT`; None for older runs), `status`, `role`,
        `model_uri` (`runs:/<id>/model`), `tracking_uri`, `end` (`run_end`) and `inputs` (`files`
        recorded by `note_input_file` or None, `digests` by dataset context).

    Raises:
        ValueError: no such run in the store, or the run has no `config.yaml` (for a run that did
            not finish, the message says how it ended).
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
            if run.info.status != "FINISHED":  # killed before the config was logged: say how it ended
                raise ValueError(f"run {run_id} {run_end(run.info.status, run.data.tags)} and logged no config.yaml; "
                                 "only a FINISHED run can be evaluated") from None
            raise ValueError(f"run {run_id!r} has no config.yaml artifact; was it made by psyattrs train?") from None
        try:
            prior = mlflow.artifacts.load_dict(f"{run.info.artifact_uri}/floor_prior.json")
        except (MlflowException, OSError):
            prior = None
        try:
            schema = mlflow.artifacts.load_dict(f"{run.info.artifact_uri}/schema.json")
        except (MlflowException, OSError):  # a run from before the artifact existed
            schema = None
        try:
            seen = mlflow.artifacts.load_dict(f"{run.info.artifact_uri}/{CONVERSATIONS_ARTIFACT}")
        except (MlflowException, OSError):  # a run from before the artifact existed
            seen = None
        inputs = _dataset_inputs(run)
    config = ExperimentConfig.from_dict(load_yaml(text), source=f"run {run_id} config.yaml")
    extras = {"floor_prior": prior, "schema": schema, "training_conversations": seen, "status": run.info.status,
              "role": run.data.tags.get("psyattrs.role", "single"),
              "model_uri": f"runs:/{run_id}/model", "tracking_uri": uri,
              "end": run_end(run.info.status, run.data.tags), "inputs": inputs}
    return config, extras


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
