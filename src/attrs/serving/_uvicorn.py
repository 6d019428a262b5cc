"""uvicorn's server and worker supervisor, stopped alike by SIGINT, SIGTERM and SIGHUP.

uvicorn's `Server` handles SIGINT and SIGTERM only (and raises them again once it has stopped);
its `Multiprocess` supervisor restarts the workers on SIGHUP. Here all three stop the server
gracefully (in-flight requests get `timeout_graceful_shutdown` seconds), record the first signal
in `stopped_by`, and leave no signal to be raised again. (The supervisor's workers run uvicorn's
own server: the supervisor stops them with SIGTERM.)
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Iterator

import uvicorn
from uvicorn.supervisors import Multiprocess

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class StoppingServer(uvicorn.Server):
    """uvicorn's server; SIGINT, SIGTERM and SIGHUP stop it (a second SIGINT at once)."""

    stopped_by: int | None = None

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig: int, frame: Any) -> None:
        if self.stopped_by is None:
            self.stopped_by = sig
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        self.should_exit = True


class StoppingSupervisor(Multiprocess):
    """uvicorn's worker supervisor; SIGHUP stops the workers as SIGTERM does (not a restart)."""

    stopped_by: int | None = None

    def handle_signals(self) -> None:
        for sig in tuple(self.signal_queue):
            if sig in STOP_SIGNALS and self.stopped_by is None:
                self.stopped_by = sig
        super().handle_signals()

    def handle_hup(self) -> None:
        self.handle_term()
