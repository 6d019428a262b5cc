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
    import multiprocessing

    global _JOBS
    _JOBS = jobs
    try:
        with multiprocessing.get_context("fork").Pool(min(workers, len(jobs))) as pool:
            return pool.map(_run, range(len(jobs)), chunksize=1)
    finally:
        _JOBS = None


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
