"""A REST endpoint for a registered or logged model: `mlflow models serve` on 127.0.0.1.

`psyattrs serve --model models:/psyattrs-demo@champion --port 5000` runs

    python -m mlflow models serve -m URI --env-manager local -h 127.0.0.1 -p PORT -w WORKERS

in this Python environment (no new virtualenv: the model's code is this installed psyattrs), with
MLFLOW_TRACKING_URI set for the child to the project's store (or `tracking_uri`), so that
`models:/` and `runs:/` URIs resolve exactly as they do for `psyattrs.predict`.

Requests: POST `/invocations` with `Content-Type: application/json` and one of

    {"dataframe_records": [{"doc_id": "c1", "text": "안녕하세요"}, {"doc_id": "c1", "text": "반가워요"}]}
    {"dataframe_split": {"columns": ["doc_id", "text"], "data": [["c1", "안녕하세요"], ["c1", "반가워요"]]}}
    {"inputs": {"doc_id": ["c1", "c1"], "text": ["안녕하세요", "반가워요"]}}

(rows of the utterance table: `doc_id` and `text` required, `position`, `person_type`, `is_pause`
... optional; rows of one `doc_id` are one conversation, in order). The answer is
`{"predictions": [{"doc_id": .., "sent_id": .., "strange": 1, "strange_name": "not strange",
"strange_proba_0": .., ..., "strange_disagreement": .., ...}, ...]}`: the prediction columns of
`psyattrs.predict` (`psyattrs.experiments.pyfunc.output_columns`), one per row in request order.
A malformed request (not JSON, no `text` column, bad `is_pause` values) gets 400 with a message;
the server keeps serving. GET `/ping` answers 200 once the model is loaded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, Any

DEFAULT_PORT = 5000
HOST = "127.0.0.1"


class ServerError(RuntimeError):
    """The model server did not come up (its exit code and the end of its log are in the message)."""


def check_model_uri(model: str, *, tracking_uri: str | None = None) -> str:
    """Checks that a model URI or folder names a servable MLflow model, before starting a server.

    Args:
        model: `models:/NAME@ALIAS`, `models:/NAME/VERSION`, `runs:/RUN_ID/model`, another MLflow
            URI, or a local MLflow model folder (with `MLmodel`).
        tracking_uri: the store; None = MLFLOW_TRACKING_URI or the project's store.

    Returns:
        The URI to serve (a local folder as an absolute path).

    Raises:
        ValueError: the URI does not resolve, or a folder holds no MLflow model (a folder written by
            `MultiHeadModel.save` must be logged first: `psyattrs train` does).
    """
    import mlflow
    from mlflow.exceptions import MlflowException

    from psyattrs.experiments.tracking import quiet_mlflow, tracking_store

    if not isinstance(model, str) or not model.strip():
        raise ValueError(f"--model must be a models:/ or runs:/ URI or an MLflow model folder, got {model!r}")
    if "://" not in model and not model.startswith(("models:/", "runs:/")):
        folder = Path(model)
        if (folder / "MLmodel").is_file():
            return str(folder.resolve())
        if (folder / "model.json").is_file():
            raise ValueError(
                f"{folder} is a saved psyattrs model, not an MLflow model: serve the run's logged model "
                "(runs:/RUN_ID/model) or register it (psyattrs register RUN_ID --name NAME)"
            )
        raise ValueError(f"{model!r} is neither a models:/ or runs:/ URI nor an MLflow model folder (with MLmodel)")
    with tracking_store(tracking_uri) as store, quiet_mlflow():
        try:
            mlflow.models.get_model_info(model)
        except (MlflowException, OSError) as exc:
            message = getattr(exc, "message", None) or str(exc)
            raise ValueError(f"cannot find model {model!r} in the tracking store {store}: {message}") from None
    return model


def serve_command(model: str, *, port: int = DEFAULT_PORT, workers: int = 1, timeout: int = 60) -> list[str]:
    """The `mlflow models serve` command line (this interpreter, local environment, 127.0.0.1).

    Raises:
        ValueError: a port outside 1..65535, workers or timeout below 1.
    """
    for name, value, low, high in (("port", port, 1, 65535), ("workers", workers, 1, 256), ("timeout", timeout, 1, 86400)):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"{name} must be an integer in {low}..{high}, got {value!r}")
    return [sys.executable, "-m", "mlflow", "models", "serve", "-m", model, "--env-manager", "local",
            "-h", HOST, "-p", str(port), "-w", str(workers), "-t", str(timeout)]


def server_environment(tracking_uri: str | None = None) -> dict[str, str]:
    """The child's environment: ours, with MLFLOW_TRACKING_URI resolved and this environment's
    scripts (uvicorn) first on PATH."""
    from psyattrs.experiments.tracking import ENV_URI, resolve_tracking_uri

    env = dict(os.environ)
    env[ENV_URI] = resolve_tracking_uri(tracking_uri)
    scripts = str(Path(sys.executable).parent)
    env["PATH"] = scripts + os.pathsep + env.get("PATH", "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


class ModelServer:
    """One `mlflow models serve` child process (see the module docstring).

    Use as a context manager, or `start()` / `wait_ready()` / `stop()`:

        with ModelServer("models:/psyattrs-demo@champion", port=5001) as server:
            server.wait_ready()
            answer = server.invoke({"inputs": {"doc_id": ["c1"], "text": ["안녕하세요"]}})

    Args:
        model: a URI or MLflow model folder (checked with `check_model_uri` on `start`).
        port: the port on 127.0.0.1.
        tracking_uri: the store for URIs (None = MLFLOW_TRACKING_URI or the project's store).
        workers: uvicorn workers.
        timeout: seconds allowed per request.
        log: a file to receive the server's output (None: inherit ours).

    Attributes:
        url: `http://127.0.0.1:PORT`.
        process: the child (None before `start`).
    """

    def __init__(
        self,
        model: str,
        *,
        port: int = DEFAULT_PORT,
        tracking_uri: str | None = None,
        workers: int = 1,
        timeout: int = 60,
        log: "IO[Any] | None" = None,
    ):
        self.command = serve_command(model, port=port, workers=workers, timeout=timeout)
        self.model = model
        self.port = port
        self.tracking_uri = tracking_uri
        self.log = log
        self.url = f"http://{HOST}:{port}"
        self.process: subprocess.Popen | None = None

    def start(self, *, check: bool = True) -> "ModelServer":
        """Starts the child in its own process group; returns self (not yet ready: `wait_ready`)."""
        if self.process is not None:
            raise ValueError("this server was already started")
        if check:
            self.command[self.command.index("-m", 3) + 1] = check_model_uri(self.model, tracking_uri=self.tracking_uri)
        self.process = subprocess.Popen(
            self.command,
            env=server_environment(self.tracking_uri),
            stdout=self.log,
            stderr=subprocess.STDOUT if self.log is not None else None,
            start_new_session=True,
        )
        return self

    def ping(self) -> bool:
        """Whether GET /ping answers 200 now."""
        try:
            with urllib.request.urlopen(f"{self.url}/ping", timeout=2) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Waits until /ping answers 200.

        Raises:
            ServerError: the child exited, or `timeout` seconds passed (the server is stopped).
        """
        if self.process is None:
            raise ValueError("start the server first")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerError(f"the model server exited with code {self.process.returncode}{self._log_tail()}")
            if self.ping():
                return
            time.sleep(0.5)
        self.stop()
        raise ServerError(f"the model server did not answer /ping within {timeout:g}s{self._log_tail()}")

    def _log_tail(self) -> str:
        name = getattr(self.log, "name", None)
        if not isinstance(name, str) or not Path(name).is_file():
            return ""
        self.log.flush()
        tail = Path(name).read_text(encoding="utf-8", errors="replace")[-3000:]
        return f"; its log ends:\n{tail}"

    def invoke(self, payload: Any, *, timeout: float = 60.0) -> tuple[int, Any]:
        """POSTs a JSON payload to /invocations.

        Returns:
            (HTTP status, parsed JSON answer, or the raw text when it is not JSON).
        """
        data = payload if isinstance(payload, (bytes, str)) else json.dumps(payload, ensure_ascii=False)
        body = data.encode("utf-8") if isinstance(data, str) else data
        request = urllib.request.Request(
            f"{self.url}/invocations", data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                status, text = response.status, response.read().decode("utf-8")
        except urllib.error.HTTPError as exc:
            status, text = exc.code, exc.read().decode("utf-8", errors="replace")
        try:
            return status, json.loads(text)
        except json.JSONDecodeError:
            return status, text

    def stop(self, timeout: float = 15.0) -> None:
        """Stops the child and everything it started (SIGTERM to its process group, then SIGKILL)."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                return
            try:
                process.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # a uvicorn left in the group after the mlflow parent exited
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def __enter__(self) -> "ModelServer":
        return self.start() if self.process is None else self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def serve(model: str, *, port: int = DEFAULT_PORT, tracking_uri: str | None = None, workers: int = 1) -> int:
    """Serves a model in the foreground until the server exits or Ctrl-C; returns its exit code.

    Raises:
        ValueError: the model URI does not resolve, or a bad port / workers value.
    """
    server = ModelServer(model, port=port, tracking_uri=tracking_uri, workers=workers)
    server.start()
    process = server.process
    try:
        return process.wait()
    except KeyboardInterrupt:
        server.stop()
        return 130
