"""The one logistic-regression fit of the linear heads (`tfidf`'s `LinearHead`, `tfidf_annotators`'
`AnnotatorHead`): multinomial, L2, newton-cg, on sample-weighted rows."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np


def fit_logistic(design: Callable[[], Any], labels: np.ndarray, weights: np.ndarray, *, C: float, max_iter: int, tol: float,
                 seed: int):
    """A fitted scikit-learn `LogisticRegression` of `labels` on the rows of the design matrix, or
    None when the labels hold fewer than two classes (the caller predicts a constant prior then).

    Args:
        design: builds the design matrix (n, d), sparse or dense, one row per label (called only
            when there is something to fit).
        labels: (n,) class indices.
        weights: (n,) sample weights (soft-target mass times class weights).
        C: inverse L2 regularisation strength (on the summed weighted loss).
        max_iter: iteration cap of the solver.
        tol: its stopping tolerance.
        seed: its random state.
    """
    from sklearn.linear_model import LogisticRegression

    if len(np.unique(labels)) < 2:
        return None
    # newton-cg: on these sparse, wide matrices it needs a handful of Hessian-free Newton
    # steps where lbfgs takes 10-50x longer (measured with scikit-learn 1.9 / SciPy 1.17)
    estimator = LogisticRegression(C=C, solver="newton-cg", max_iter=max_iter, tol=tol, random_state=seed)
    estimator.fit(design(), labels, sample_weight=weights)
    return estimator
