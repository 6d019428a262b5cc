"""Independent pieces of work of the aligner's rounds, run side by side in forked processes.

Between two rounds the aligner refits a dozen models that do not depend on each other: the
sentence classifier per fold and head (`classifier.TfidfScorer.jobs`), the run-end, coherence,
line-continuation and speaker-change models (`Refit`). Each is single-threaded (one BLAS thread),
so on one process they ran one after the other while the other CPUs waited. `run_jobs` hands
them to `workers` forked processes; each job returns what it computed (a fitted model, its
predictions), never the inputs, which the forked workers inherit. The results are the same as
in one process: every job runs the same code on the same data with one BLAS thread.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from typing import Any

_JOBS: list[Callable[[], Any]] | None = None
"""The jobs of the `run_jobs` call in progress: the forked workers read them from here (inherited)."""


def run_jobs(jobs: list[Callable[[], Any]], workers: int) -> list[Any]:
    """`[job() for job in jobs]`, in `workers` forked processes (Linux; elsewhere, with one
    worker or one job, in this one). Jobs should be listed longest first: each worker takes the
    next one when it is done.

    Returns:
        The jobs' results in the order of `jobs` (each pickled back from its worker).
    """
    if workers <= 1 or len(jobs) < 2 or not sys.platform.startswith("linux"):
        return [job() for job in jobs]
    global _JOBS
    _JOBS = jobs
    try:
        with fork_pool(min(workers, len(jobs))) as pool:
            return pool.map(_run, range(len(jobs)), chunksize=1)
    finally:
        _JOBS = None


def fork_pool(processes: int):
    """A `multiprocessing` pool of `processes` forked workers (Linux) that end on SIGTERM, the
    signal the pool stops them with when it closes, whatever handler this process has.

    SIGTERM is blocked while the workers fork: they start with it blocked, take its default action,
    then let it in (`_worker_start`), so one the pool sends before that stays pending and ends them.
    Here the mask is as before once they exist; a SIGTERM meanwhile arrives then.
    """
    import multiprocessing

    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        return multiprocessing.get_context("fork").Pool(processes, initializer=_worker_start)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _worker_start() -> None:
    """A forked worker ends on SIGTERM, as the pool expects when it stops its workers: a handler it
    inherited (a training run's stop-signal handler, or any that returns) could keep it alive, and
    the pool would wait for it for ever. A SIGTERM sent before this ran was held (blocked) and ends
    the worker now."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def _run(k: int) -> Any:
    return _JOBS[k]()


class Refit:
    """A model's `fit(*args)` as a job: run in a worker, it returns the attributes the fit sets
    (`names`, those that exist), and `apply` sets them on this process's model.

    Args:
        model: the model (its `fit` changes the attributes `names` only).
        names: the attributes to bring back.
        args: what `fit` takes.
    """

    def __init__(self, model: Any, names: tuple[str, ...], *args: Any):
        self.model, self.names, self.args = model, names, args

    def __call__(self) -> dict[str, Any]:
        self.model.fit(*self.args)
        return {name: getattr(self.model, name) for name in self.names if hasattr(self.model, name)}

    def apply(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self.model, name, value)
