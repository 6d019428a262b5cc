"""A REST endpoint for a registered or logged model on 127.0.0.1: `psyattrs serve`.

`psyattrs serve --model models:/NAME@champion --port 5000` checks its arguments (a port in
1..65535, the model URI, the port free) before it prints anything, loads the model once, prints
`serving ...` and runs the scoring app of `psyattrs.serving.app` under uvicorn in this process
(with `--workers N` > 1, N worker processes of uvicorn's supervisor, each loading the model).
URIs resolve through MLFLOW_TRACKING_URI or `--tracking-uri`, as for `psyattrs.predict`.
SIGINT (Ctrl-C), SIGTERM and SIGHUP all stop it, workers included, within a few seconds; a
worker whose supervisor dies is stopped by the kernel (PR_SET_PDEATHSIG).

Requests: POST `/invocations` with `Content-Type: application/json` and one of

    {"inputs": ["오늘 너무 피곤했어요 ㅠㅠ", "주말에 뭐 해요?"]}
    {"dataframe_records": [{"text": "안녕하세요"}, {"text": "반가워요"}]}
    {"dataframe_records": [{"doc_id": "c1", "text": "안녕하세요", "person_type": "persona"},
                           {"doc_id": "c1", "text": "반가워요", "person_type": "user"}]}
    {"dataframe_split": {"columns": ["doc_id", "text"], "data": [["c1", "안녕하세요"], ["c1", "반가워요"]]}}
    {"inputs": {"doc_id": ["c1", "c1"], "text": ["안녕하세요", "반가워요"]}}

(rows without `doc_id` are independent sentences; rows sharing a `doc_id` are one conversation, in
order; `inputs` also takes what `psyattrs.predict` takes: a dialogue, a list of dialogues,
PersonalDialog records; see `psyattrs.serving.requests`). The answer is `{"predictions":
[{"doc_id": .., "sent_id": .., "strange": 1, "strange_name": "not strange", "strange_proba_0": ..,
..., "strange_disagreement": .., ...}, ...]}`, one per sentence in request order. A bad request
gets a 4xx with a one-line message naming the field and the server keeps serving (see
`psyattrs.serving.app`). GET `/ping` answers 200 once the model is loaded.

The same model also serves with MLflow's own `mlflow models serve -m URI --env-manager local`
(the logged pyfunc model checks its rows the same way), without the body limit and the request
forms beyond MLflow's.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, Any

DEFAULT_PORT = 5000
DEFAULT_MAX_BODY_MB = 20.0
HOST = "127.0.0.1"
ENV_MODEL = "PSYATTRS_SERVE_MODEL"
ENV_SETTINGS = "PSYATTRS_SERVE_SETTINGS"


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

    # lazy: scikit-learn via experiments/; psyattrs --help imports this module (cli/serve)
    from psyattrs.experiments.store import quiet_mlflow, tracking_store

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


def check_settings(*, port: int, workers: int = 1, timeout: float = 60, max_body_mb: float = DEFAULT_MAX_BODY_MB) -> None:
    """Checks the server settings before anything starts.

    Raises:
        ValueError: a port outside 1..65535, workers outside 1..64, a timeout or body limit not
            positive (names the setting and the allowed range).
    """
    for name, value, low, high in (("port", port, 1, 65535), ("workers", workers, 1, 64)):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"{name} must be an integer in {low}..{high}, got {value!r}")
    for name, value in (("timeout", timeout), ("max_body_mb", max_body_mb)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
            raise ValueError(f"{name} must be a positive number, got {value!r}")


def serve_command(
    model: str, *, port: int = DEFAULT_PORT, workers: int = 1, timeout: float = 60,
    max_body_mb: float = DEFAULT_MAX_BODY_MB,
) -> list[str]:
    """The `psyattrs serve` command line that `ModelServer` runs (this interpreter).

    Raises:
        ValueError: see `check_settings`.
    """
    check_settings(port=port, workers=workers, timeout=timeout, max_body_mb=max_body_mb)
    return [sys.executable, "-m", "psyattrs", "serve", "--model", model, "--port", str(port),
            "--workers", str(workers), "--timeout", f"{timeout:g}", "--max-body-mb", f"{max_body_mb:g}"]


def bind_port(port: int) -> socket.socket:
    """A socket bound to 127.0.0.1:`port` (not yet listening), as uvicorn binds it.

    Raises:
        ValueError: the port is in use, or not ours to take (one line naming the port).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ValueError(f"port {port} on {HOST} is already in use: stop what holds it or choose another --port") from None
        raise ValueError(f"cannot listen on {HOST}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def server_environment(tracking_uri: str | None = None) -> dict[str, str]:
    """The child's environment: ours, with MLFLOW_TRACKING_URI resolved and this environment's
    scripts (uvicorn) first on PATH."""
    # lazy: scikit-learn via experiments/; psyattrs --help imports this module (cli/serve)
    from psyattrs.experiments.store import ENV_URI, resolve_tracking_uri

    env = dict(os.environ)
    env[ENV_URI] = resolve_tracking_uri(tracking_uri)
    scripts = str(Path(sys.executable).parent)
    env["PATH"] = scripts + os.pathsep + env.get("PATH", "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


class ModelServer:
    """One `psyattrs serve` child process, in its own session (see the module docstring).

    Use as a context manager, or `start()` / `wait_ready()` / `stop()`:

        with ModelServer("models:/psyattrs-demo@champion", port=5001) as server:
            server.wait_ready()
            answer = server.invoke({"inputs": {"doc_id": ["c1"], "text": ["안녕하세요"]}})

    Args:
        model: a URI or MLflow model folder (checked with `check_model_uri` on `start`).
        port: the port on 127.0.0.1.
        tracking_uri: the store for URIs (None = MLFLOW_TRACKING_URI or the project's store).
        workers: uvicorn workers.
        timeout: seconds a request may wait for its turn.
        max_body_mb: the largest request body, in MiB.
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
        timeout: float = 60,
        max_body_mb: float = DEFAULT_MAX_BODY_MB,
        log: "IO[Any] | None" = None,
    ):
        self.command = serve_command(model, port=port, workers=workers, timeout=timeout, max_body_mb=max_body_mb)
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
            self.command[self.command.index("--model") + 1] = check_model_uri(self.model, tracking_uri=self.tracking_uri)
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
        try:  # a worker left in the group after its supervisor exited
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def __enter__(self) -> "ModelServer":
        return self.start() if self.process is None else self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _die_with_parent() -> None:
    """Asks Linux to SIGTERM this process when its parent dies (a worker outliving its supervisor)."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def worker_app() -> Any:
    """The ASGI app of one worker process (`--workers` > 1): the model and settings come from the
    environment the supervisor set (ENV_MODEL, ENV_SETTINGS)."""
    _die_with_parent()
    settings = json.loads(os.environ[ENV_SETTINGS])
    return scoring_app(os.environ[ENV_MODEL], **settings).app


def scoring_app(model: Any, *, tracking_uri: str | None = None, timeout: float = 60,
                max_body_mb: float = DEFAULT_MAX_BODY_MB) -> Any:
    """The `psyattrs.serving.app.ScoringApp` of a model (a URI or folder is loaded once)."""
    # lazy: mlflow; psyattrs --help imports this module (cli/serve)
    from psyattrs.serving.app import ScoringApp
    from psyattrs.serving.predict import Predictor

    predictor = model if isinstance(model, Predictor) else Predictor(model, tracking_uri=tracking_uri)
    app = ScoringApp(predictor.model, predictor.schema, max_body=int(max_body_mb * 1024 * 1024),
                     queue_timeout=float(timeout), version=_version())
    app.warm_up()
    return app


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("psyattrs")
    except PackageNotFoundError:
        return "unknown"


def _uvicorn_config(app: Any, *, port: int, workers: int) -> Any:
    import uvicorn

    return uvicorn.Config(app, host=HOST, port=port, workers=workers, factory=isinstance(app, str),
                          timeout_graceful_shutdown=3, log_level="info", lifespan="off")


def serve(
    model: str,
    *,
    port: int = DEFAULT_PORT,
    tracking_uri: str | None = None,
    workers: int = 1,
    timeout: float = 60,
    max_body_mb: float = DEFAULT_MAX_BODY_MB,
    announce: "Any | None" = None,
    loading: "Any | None" = None,
) -> int:
    """Serves a model in the foreground until SIGINT, SIGTERM or SIGHUP; returns 128 + the signal.

    In order: the settings and the model URI are checked, the port is bound (so that a port in use
    fails here), the model is loaded, `announce(url)` is called, and the server runs.

    Args:
        model: a models:/ or runs:/ URI or an MLflow model folder.
        port: the port on 127.0.0.1.
        tracking_uri: the store for URIs (None = MLFLOW_TRACKING_URI or the project's store).
        workers: worker processes (1: the server runs in this process).
        timeout: seconds a request may wait for its turn (then 503).
        max_body_mb: the largest request body, in MiB (a larger one gets 413).
        announce: called with the /invocations URL once the server is about to answer.
        loading: called with no argument once the port is bound, just before the model loads (which
            takes seconds: imports, the store, the tokenizer), so that the caller can say so.

    Raises:
        ValueError: bad settings, a model URI that does not resolve, a port in use.
    """
    # lazy: scikit-learn via experiments/; psyattrs --help imports this module (cli/serve)
    from psyattrs.experiments.store import ENV_URI, resolve_tracking_uri

    check_settings(port=port, workers=workers, timeout=timeout, max_body_mb=max_body_mb)
    model = check_model_uri(model, tracking_uri=tracking_uri)
    sock = bind_port(port)
    try:
        if loading is not None:
            loading()
        if workers > 1:  # each worker loads its own copy; this process only proves that it loads
            # lazy: psyattrs --help imports this module (cli/serve)
            from psyattrs.serving.predict import Predictor

            Predictor(model, tracking_uri=tracking_uri)
            os.environ[ENV_URI] = resolve_tracking_uri(tracking_uri)
            os.environ[ENV_MODEL] = model
            os.environ[ENV_SETTINGS] = json.dumps({"timeout": timeout, "max_body_mb": max_body_mb})
            config = _uvicorn_config(f"{__name__}:worker_app", port=port, workers=workers)
        else:
            app = scoring_app(model, tracking_uri=tracking_uri, timeout=timeout, max_body_mb=max_body_mb)
            config = _uvicorn_config(app.app, port=port, workers=1)
        if announce is not None:
            announce(f"http://{HOST}:{port}/invocations")
        return _run(config, sock)
    finally:
        sock.close()


def _run(config: Any, sock: socket.socket) -> int:
    # lazy: uvicorn; psyattrs --help imports this module (cli/serve)
    from psyattrs.serving._uvicorn import StoppingServer, StoppingSupervisor

    if config.workers > 1:
        supervisor = StoppingSupervisor(config, sockets=[sock])
        supervisor.run()
        return 128 + int(supervisor.stopped_by or signal.SIGTERM)
    server = StoppingServer(config)
    server.run(sockets=[sock])
    return 128 + int(server.stopped_by or signal.SIGTERM)
