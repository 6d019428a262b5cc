"""The sentence classifier of the public-release aligner: log P(labels | unit) for every candidate
unit (see `psyattrs.align`).

`LabelScorer` and its kinds: `PriorScorer` gives every unit the corpus's label marginals (the
"priors only" start); `TfidfScorer` is a cross-fitted TF-IDF + logistic regression sentence
classifier; `ModelScorer` wraps any `psyattrs.models` kind; `FixedScorer` uses an already trained
model. Cross-fitting: conversations are dealt into folds and a unit is scored by the classifier
trained without its conversation, so a conversation's current reading never scores itself.

The features and models stages (below this one) are imported inside the functions that need
them, so that importing the aligner loads neither scikit-learn nor LightGBM before a classifier is
trained.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import pandas as pd
import scipy.sparse as sp

from psyattrs.schema import Schema

PROBA_FLOOR = 1e-3
"""Mixed into every predicted distribution (uniform share), so that no label is impossible."""


def floored_log(p: np.ndarray, floor: float = PROBA_FLOOR) -> np.ndarray:
    """log((1 - floor) p + floor / K) row-wise for (n, K) probabilities."""
    p = np.asarray(p, dtype=float)
    return np.log((1.0 - floor) * p + floor / p.shape[1])


class LabelScorer(Protocol):
    """Scores every candidate unit: head -> (n_candidates, K) log-probabilities."""

    def fit(self, rows: np.ndarray, targets: dict[str, np.ndarray]) -> None: ...

    def log_proba(self) -> dict[str, np.ndarray]: ...


class PriorScorer:
    """The corpus's label marginals for every unit: no text, no speaker (iteration 0).

    Args:
        schema: the heads.
        labels: (n_labels, n_heads) every label of every kept conversation.
        n_candidates: number of candidate units.
    """

    def __init__(self, schema: Schema, labels: np.ndarray, n_candidates: int):
        self.schema = schema
        self.n = n_candidates
        self.priors = {
            h.name: np.bincount(labels[:, c], minlength=h.n_classes).astype(float) + 1.0
            for c, h in enumerate(schema.heads)
        }

    def fit(self, rows: np.ndarray, targets: dict[str, np.ndarray]) -> None:
        """Nothing to learn."""

    def log_proba(self) -> dict[str, np.ndarray]:
        return {
            name: np.broadcast_to(floored_log((p / p.sum())[None, :]), (self.n, len(p))) for name, p in self.priors.items()
        }


def unit_matrix(line_features: sp.csr_matrix, unit_lines: sp.csr_matrix, is_user: np.ndarray) -> sp.csr_matrix:
    """Features of the candidate units: the L2-normalised sum of their lines' TF-IDF rows, plus
    two speaker columns (user, persona).

    Args:
        line_features: (n_lines, d) TF-IDF rows of every non-blank line.
        unit_lines: (n_units, n_lines) 0/1: which lines each unit holds.
        is_user: (n_units,) the unit's speaker.

    Returns:
        CSR (n_units, d + 2), float32.
    """
    from sklearn.preprocessing import normalize

    summed = normalize(unit_lines @ line_features)
    speaker = sp.csr_matrix(np.column_stack([is_user, ~is_user]).astype(np.float32))
    return sp.hstack([summed, speaker], format="csr", dtype=np.float32)


def _expand(targets: np.ndarray, min_mass: float = 0.02) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows, labels = np.nonzero(targets > min_mass)
    return rows, labels, targets[rows, labels]


class TfidfScorer:
    """Cross-fitted logistic regression per head on the units' TF-IDF features.

    Args:
        schema: the heads.
        X: (n_candidates, d) unit features (`unit_matrix`).
        fold: (n_candidates,) fold of each unit's conversation, 0..n_folds-1; with one fold the
            classifier scores the conversations it was trained on.
        C: inverse regularisation strength.
        max_iter: lbfgs iterations per fit (fits are warm-started from the previous round).
        seed: solver seed.
    """

    def __init__(self, schema: Schema, X: sp.csr_matrix, fold: np.ndarray, *, C: float = 1.0, max_iter: int = 200, seed: int = 0):
        self.schema = schema
        self.X = X
        self.fold = np.asarray(fold)
        self.n_folds = int(self.fold.max()) + 1 if len(self.fold) else 1
        self.C = C
        self.max_iter = max_iter
        self.seed = seed
        self._models: dict[tuple[int, str], object] = {}
        self._log: dict[str, np.ndarray] = {}

    def fit(self, rows: np.ndarray, targets: dict[str, np.ndarray]) -> None:
        """Trains one classifier per fold and head on `rows` (candidate indices) with soft targets
        (head -> (len(rows), K)), then scores every candidate with its fold's classifiers."""
        self.collect([job() for job in self.jobs(rows, targets)])

    def jobs(self, rows: np.ndarray, targets: dict[str, np.ndarray]) -> list:
        """`fit` as independent jobs, one per fold and head (`psyattrs.align.parallel.run_jobs`):
        each returns (fold, head, the fitted model or None, the probabilities of the fold's
        candidates); `collect` takes their results in this order."""
        rows = np.asarray(rows, dtype=np.int64)
        return [_FoldHeadFit(self, rows, targets, f, head) for f in range(self.n_folds) for head in self.schema]

    def collect(self, results: list) -> None:
        """Keeps the fitted models of `jobs`' results (warm starts for the next round) and their scores."""
        out = {h.name: np.zeros((self.X.shape[0], h.n_classes)) for h in self.schema}
        for f, name, model, proba in results:
            if model is not None:
                self._models[(f, name)] = model
            out[name][self._scored(f)] = proba
        self._log = {name: floored_log(p) for name, p in out.items()}

    def _scored(self, f: int) -> np.ndarray:
        return np.flatnonzero(self.fold == f) if self.n_folds > 1 else np.arange(self.X.shape[0])

    def log_proba(self) -> dict[str, np.ndarray]:
        return self._log


class _FoldHeadFit:
    """One fold and head of `TfidfScorer.fit`: a job of `TfidfScorer.jobs`."""

    def __init__(self, scorer: TfidfScorer, rows: np.ndarray, targets: dict[str, np.ndarray], f: int, head):
        self.scorer, self.rows, self.targets, self.f, self.head = scorer, rows, targets, f, head

    def __call__(self) -> tuple[int, str, object, np.ndarray]:
        from sklearn.linear_model import LogisticRegression

        sc, rows, f, head = self.scorer, self.rows, self.f, self.head
        scored = sc._scored(f)
        keep = sc.fold[rows] != f if sc.n_folds > 1 else np.ones(len(rows), dtype=bool)
        train = rows[keep]
        r, y, w = _expand(self.targets[head.name][keep])
        prior = np.bincount(y, weights=w, minlength=head.n_classes) + 1.0
        if len(np.unique(y)) < 2:
            return f, head.name, None, np.broadcast_to(prior / prior.sum(), (len(scored), head.n_classes))
        model = sc._models.get((f, head.name))
        if model is None or not np.array_equal(model.classes_, np.unique(y)):
            model = LogisticRegression(C=sc.C, max_iter=sc.max_iter, tol=1e-3, random_state=sc.seed, warm_start=True)
        model.fit(sc.X[train[r]], y, sample_weight=w)
        proba = np.zeros((len(scored), head.n_classes))
        proba[:, model.classes_] = model.predict_proba(sc.X[scored])
        return f, head.name, model, proba


class ModelScorer:
    """Cross-fitted scorer over any `psyattrs.models` kind (`build_model(kind, schema, **settings)`).

    Args:
        schema: the heads.
        table: one row per candidate unit: doc_id, text, person_type (an utterance table).
        fold: (n_candidates,) fold of each unit's conversation.
        kind: the model kind.
        settings: the model's settings.
    """

    def __init__(self, schema: Schema, table: pd.DataFrame, fold: np.ndarray, kind: str, settings: dict):
        # lazy: scikit-learn, not needed by data show-aligned (align/__init__)
        from psyattrs.models import build_model

        self.schema = schema
        self.table = table.reset_index(drop=True)
        self.fold = np.asarray(fold)
        self.n_folds = int(self.fold.max()) + 1 if len(self.fold) else 1
        self.kind = kind
        self.settings = dict(settings)
        build_model(kind, schema, **self.settings)  # fail early on a bad kind or setting
        self._log: dict[str, np.ndarray] = {}

    def fit(self, rows: np.ndarray, targets: dict[str, np.ndarray]) -> None:
        # lazy: scikit-learn, not needed by data show-aligned (align/__init__)
        from psyattrs.models import build_model

        rows = np.asarray(rows, dtype=np.int64)
        out = {h.name: np.zeros((len(self.table), h.n_classes)) for h in self.schema}
        for f in range(self.n_folds):
            scored = np.flatnonzero(self.fold == f) if self.n_folds > 1 else np.arange(len(self.table))
            keep = self.fold[rows] != f if self.n_folds > 1 else np.ones(len(rows), dtype=bool)
            if not keep.any():  # no aligned unit to learn from: the targets' (or a flat) prior
                for h in self.schema:
                    mass = targets[h.name].sum(axis=0) + 1.0
                    out[h.name][scored] = mass / mass.sum()
                continue
            model = build_model(self.kind, self.schema, **self.settings)
            model.fit(self.table.iloc[rows[keep]], {h: t[keep] for h, t in targets.items()})
            proba = model.predict_proba(self.table.iloc[scored])
            for name, p in proba.items():
                out[name][scored] = p
        self._log = {name: floored_log(p) for name, p in out.items()}

    def log_proba(self) -> dict[str, np.ndarray]:
        return self._log


class FixedScorer:
    """Scores every unit with an already trained model (e.g. one trained on the annotated OPELA
    corpus): its predictions stay the same in every round, only the priors are re-estimated.

    Each unit is scored on its own (as a conversation of one sentence), so a model with context
    features sees no previous sentence.

    Args:
        schema: the heads; the model must predict every one of them with the same classes.
        model: a fitted `psyattrs.models` model (`predict_proba(table)`).
        table: one row per candidate unit: doc_id, text, person_type (an utterance table).
    """

    def __init__(self, schema: Schema, model, table: pd.DataFrame):
        table = table.reset_index(drop=True).copy()
        table["doc_id"] = table["doc_id"].astype(str) + "#" + table.index.astype(str)
        proba = model.predict_proba(table)
        self._log = {}
        for head in schema:
            p = np.asarray(proba[head.name], dtype=float)
            if p.shape != (len(table), head.n_classes):
                raise ValueError(f"the label model predicts {p.shape[1]} classes for {head.name!r}; the corpus has {head.n_classes}")
            self._log[head.name] = floored_log(p)

    def fit(self, rows: np.ndarray, targets: dict[str, np.ndarray]) -> None:
        """Nothing to learn: the model is fixed."""

    def log_proba(self) -> dict[str, np.ndarray]:
        return self._log
