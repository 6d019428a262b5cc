"""The aligner's work between rounds, run side by side in forked processes (issue 27): the same
results as in one process (`psyattrs.align.parallel`)."""

from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest
import scipy.sparse as sp

from psyattrs.align.classifier import TfidfScorer
from psyattrs.align.parallel import Refit, fork_pool, run_jobs
from psyattrs.schema import OPELA


class _Model:
    """Records where its fit ran; `fit` sets `p` and `seen`."""

    def fit(self, value: float) -> None:
        self.p = np.full(3, value)
        self.seen = os.getpid()


@pytest.mark.parametrize("workers", [1, 2])
def test_run_jobs_returns_each_result_in_order_and_refit_brings_the_fit_back(workers):
    models = [_Model() for _ in range(4)]
    refits = [Refit(m, ("p", "seen", "absent"), float(k)) for k, m in enumerate(models)]
    jobs = [*refits, lambda: "last"]
    results = run_jobs(jobs, workers)
    assert results[-1] == "last"
    for k, (refit, state) in enumerate(zip(refits, results)):
        assert set(state) == {"p", "seen"}  # an attribute the fit does not set is not brought back
        refit.apply(state)
        np.testing.assert_array_equal(models[k].p, np.full(3, float(k)))
    ran_here = {m.seen for m in models} == {os.getpid()}
    assert ran_here == (workers == 1)  # with two workers every fit ran in a forked process


def _scorer(seed: int = 0) -> tuple[TfidfScorer, np.ndarray, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    n = 120
    X = sp.random(n, 40, density=0.2, format="csr", random_state=seed, dtype=np.float32)
    fold = np.arange(n) % 2
    rows = rng.permutation(n)[:90]
    targets = {}
    for h in OPELA.heads:
        t = rng.random((len(rows), h.n_classes)) ** 4
        targets[h.name] = t / t.sum(axis=1, keepdims=True)
    targets[OPELA.heads[0].name][:] = np.eye(OPELA.heads[0].n_classes)[0]  # one class only: the prior
    return TfidfScorer(OPELA, X, fold, max_iter=50), rows, targets


def test_tfidf_scorer_fitted_in_workers_scores_as_in_one_process():
    """Two rounds (the second warm-started from the first's models): fitted one fold and head per
    forked worker, the scores and the kept models are those of `fit` in this process."""
    here, rows, targets = _scorer()
    there, _, _ = _scorer()
    for round_no in range(2):
        if round_no:
            targets = {k: np.roll(v, 1, axis=0) for k, v in targets.items()}
        here.fit(rows, targets)
        there.collect(run_jobs(there.jobs(rows, targets), workers=2))
        for name in here.log_proba():
            np.testing.assert_array_equal(here.log_proba()[name], there.log_proba()[name])
        assert here._models.keys() == there._models.keys() and len(here._models) == 2 * (len(OPELA.heads) - 1)
        for key, model in here._models.items():
            np.testing.assert_array_equal(model.coef_, there._models[key].coef_)
    first = OPELA.heads[0]
    p = np.exp(here.log_proba()[first.name])
    assert np.allclose(p[:, 0], p[0, 0]) and p[0, 0] > 0.5  # a head with one class seen: its prior


def test_every_thread_pool_is_limited_to_one_thread_while_aligning(tmp_path):
    """The limit reaches only the libraries loaded when it is set: SciPy's own OpenBLAS (under
    L-BFGS-B) and scikit-learn's OpenMP load with scikit-learn, which the rounds import, and
    kept every CPU's thread (2 on the project's machine: the solvers spun on busy cores). In a
    fresh process, where nothing has loaded them yet."""
    import subprocess
    import sys

    code = """
import json
import psyattrs.align.reconstruct as r
seen = {}
def fake(*args):
    import sklearn.linear_model  # what the rounds load on their first fit
    from threadpoolctl import threadpool_info
    seen['pools'] = [(i['internal_api'], i['num_threads']) for i in threadpool_info()]
    raise SystemExit(0)
r._align_public = fake
try:
    r.align_public(object())
finally:
    print(json.dumps(seen))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    pools = json.loads(out.stdout.strip().splitlines()[-1])["pools"]
    assert {api for api, _ in pools} >= {"openblas", "openmp"}
    assert all(n == 1 for _, n in pools), pools


def _sigterm_is_default(_: object = None) -> bool:
    return signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


@pytest.mark.parametrize("entry", ["run_jobs", "fork_pool"])
def test_the_workers_end_on_sigterm_whatever_handler_the_parent_has(entry):
    # the pool stops its workers with SIGTERM once the jobs are done; an inherited Python handler
    # (a training run's stop-signal handler) could keep a worker alive and the pool waiting on it
    # for ever (seen once in the suite: a train on a public file hung in Pool.terminate). Both the
    # refits between rounds (run_jobs) and the rounds' conversations (reconstruct._map) fork here.
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        if entry == "run_jobs":
            got = run_jobs([_sigterm_is_default, _sigterm_is_default, _sigterm_is_default], workers=2)
        else:
            with fork_pool(2) as pool:
                got = pool.map(_sigterm_is_default, range(3), chunksize=1)
        assert got == [True] * 3
    finally:
        signal.signal(signal.SIGTERM, previous)
