"""Stop signals and how a run ended, told without MLflow.

During a tracked run (`psyattrs.experiments.tracking.start_run`) the catchable signals whose
default action ends the process raise `psyattrs.errors.Interrupted` (a KeyboardInterrupt), so the
run closes KILLED with a note naming the signal and the step (`mark_step`) it stopped. A run that
cannot close itself (SIGKILL, the out-of-memory killer, a crash) stays RUNNING in the store; it
recorded its process id, the process's start time and the host, so `run_end` tells it apart from
a run still going.

Once a run's model is logged (`model_logged`, called by the tracking layer), the run is nearly
done: inside `finish_once_logged` (the `train` command wraps each run and its report in it) the
first stop signal after that point is deferred, so the run finishes and its report is logged;
the command then prints the run id and stops with 128 + N. A second signal stops at once (the
run ends KILLED with what it logged if it was still open), and the run id is printed all the same.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
from pathlib import Path
from typing import Iterator, Mapping

from psyattrs.errors import Interrupted

STOP_SIGNALS: tuple[str, ...] = ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGXCPU", "SIGXFSZ")
"""The catchable signals whose default action ends the process; during a run they raise
`Interrupted` instead (SIGINT already raises KeyboardInterrupt), so the run ends KILLED."""

_step = threading.local()
_shield = {"on": False}


class LateStop:
    """What `finish_once_logged` saw: `run_id`, the run whose model was logged (None before), and
    `signum`, the stop signal received after that and deferred (None when none came)."""

    def __init__(self) -> None:
        self.run_id: str | None = None
        self.signum: int | None = None


_late: dict[str, "LateStop | None"] = {"current": None}


def model_logged(run_id: str) -> None:
    """Says that the model of run `run_id` is logged: inside `finish_once_logged`, a stop signal
    from now on lets the run and its report finish."""
    late = _late["current"]
    if late is not None and run_id:
        late.run_id = run_id


@contextlib.contextmanager
def finish_once_logged() -> Iterator[LateStop]:
    """Wraps one run and what follows it (its report). Stop signals raise `Interrupted` as in
    `signals_interrupt` until the run's model is logged; the first one after that is deferred
    (read `signum` after the block and stop then), a second one raises `Interrupted` at once.
    An `Interrupted` leaving the block carries `run_id` once the model was logged."""
    late = LateStop()
    outer = _late["current"]
    _late["current"] = late
    try:
        with signals_interrupt():
            yield late
    except KeyboardInterrupt as exc:
        if late.run_id:
            exc.run_id = late.run_id  # type: ignore[attr-defined]
        raise
    finally:
        _late["current"] = outer


def mark_step(text: str | None) -> None:
    """Names the step the current run is in (`runner` calls it), for the note of an interrupted run."""
    _step.text = text


def _raise_interrupted(signum: int, frame) -> None:
    if _shield["on"]:
        return
    late = _late["current"]
    if late is not None and late.run_id and late.signum is None:  # the model is logged: finish the step
        late.signum = signum
        name = Interrupted(signum).signal_name
        message = (f"psyattrs: {name} received after run {late.run_id} logged its model: finishing the run and "
                   f"its report, then stopping (send {name} again to stop at once)\n")
        try:
            os.write(2, message.encode("utf-8", "replace"))  # not print: a handler may interrupt a print
        except OSError:
            pass
        return
    raise Interrupted(signum)


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """While active, each of `STOP_SIGNALS` raises `Interrupted` in the main thread (where it still
    has its default action; handlers someone else installed are left alone). Restored afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for name in STOP_SIGNALS:
        number = getattr(signal, name, None)
        if number is not None and signal.getsignal(number) is signal.SIG_DFL:
            previous[number] = signal.signal(number, _raise_interrupted)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Further stop signals are ignored while a stopped run is being closed."""
    before = _shield["on"]
    _shield["on"] = True
    try:
        yield
    finally:
        _shield["on"] = before


def current_step() -> str | None:
    """The step named by the last `mark_step` in this thread (None before any)."""
    return getattr(_step, "text", None)


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux `/proc`), None where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def process_alive(pid: int, started: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    now = process_start(pid)
    if started and now is not None and now != started:
        return False  # the pid was reused by another process
    return not _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False


def run_end(status: str, tags: Mapping[str, str]) -> str:
    """How a run ended, in words: `finished`, `ended FAILED (error)`, `ended KILLED (note)`,
    `running (pid N on HOST)`, `never finished: ...` (RUNNING, but its process is gone) or
    `running or abandoned (...)` (RUNNING, started on another machine)."""
    if status == "FINISHED":
        return "finished"
    if status == "FAILED":
        return "ended FAILED" + (f" ({tags['psyattrs.error']})" if tags.get("psyattrs.error") else "")
    if status == "KILLED":
        return "ended KILLED" + (f" ({tags['psyattrs.interrupted']})" if tags.get("psyattrs.interrupted") else "")
    if status != "RUNNING":
        return f"ended {status}"
    pid, host = tags.get("psyattrs.pid"), tags.get("psyattrs.host")
    if not pid or not pid.isdigit():
        return "running (no process recorded)"
    where = f"pid {pid} on {host}"
    if host != socket.gethostname():
        return f"running or abandoned ({where}, another machine)"
    if process_alive(int(pid), tags.get("psyattrs.pid_start") or None):
        return f"running ({where})"
    return (f"never finished: marked RUNNING but its process ({where}) is gone "
            "(killed with SIGKILL, out of memory, or a crash); its outputs are incomplete")
