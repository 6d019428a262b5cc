"""TF-IDF + logistic regression that knows who rated each item (`tfidf_annotators`).

Multi-annotator corpora (LeWiDi, FORMATS §7) name the annotators of every item, in the training
files and in the files to predict alike. This model learns one logistic regression per head on
(item, annotator) rows: the item's TF-IDF features (the same featurizer and context block as
`tfidf`) plus a one-hot column for the annotator (scaled by `annotator_scale`), so each annotator
gets a learnt bias (a strict or a lenient rater), L2-shrunk towards the average annotator. An
item's predicted distribution is the mean of the per-annotator distributions over the annotators
that rate it:

    P(c | item) = mean over its annotators j of softmax(text_logits(item) + bias_j)

which is what the annotators' distribution (the soft label) is the sample mean of. An annotator not
seen in training (or seen fewer than `min_ratings` times) has bias 0, the average annotator; an item
without annotators (a plain text to predict, a table without annotator columns) gets the text-only
distribution softmax(text_logits).

Where the ratings come from: the utterance table's vote slots, `labeler{k}_{head}` (the k-th
rating) and `annotator{k}_{head}` (who gave it), which the readers of corpora with a long
annotation table write (`psyattrs.data.annotations.vote_slots`). A training row with such ratings
contributes one copy per rating, labelled with it and weighted 1/n (n = its ratings), so an item
weighs as much as one row of soft targets and `C` means what it means in `tfidf`; a target row
without them (no `annotator{k}_{head}` columns, or nobody named) is learnt from its target
distribution by the usual sample-weighted expansion, with no annotator column. `class_weight`
multiplies either weight.

Only annotator ids are read at prediction time, never their labels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pandas as pd
import scipy.sparse as sp

from psyattrs._runtime import progress_bar
from psyattrs.data.annotations import slot_annotators
from psyattrs.data.table import labeler_column
from psyattrs.models.base import class_weight_vector, expand_soft_targets, read_saved_file, target_prior
from psyattrs.models.logistic import fit_logistic
from psyattrs.models.tfidf import TfidfModel, check_positive, make_featurizer

STATE_FILE = "tfidf_annotators.joblib"


def row_annotators(table: pd.DataFrame, head: str) -> list[tuple[str, ...]]:
    """Per row the ids of who rated it for a head, in vote-slot order (`annotator{k}_{head}`;
    empty tuples for rows nobody rated and for a table without those columns)."""
    _, ids = slot_annotators(table, head)
    return [tuple(a for a in row if a) for row in ids]


def row_ratings(table: pd.DataFrame, head: str) -> tuple[list[tuple[str, ...]], list[tuple[int, ...]]]:
    """Per row who rated it for a head and what, paired by vote slot: (annotator ids, ratings),
    from the slots that have both an id (`annotator{k}_{head}`) and a rating
    (`labeler{k}_{head}`). Empty tuples for a table without annotator ids."""
    ks, ids = slot_annotators(table, head)
    if not ks:
        return [()] * len(table), [()] * len(table)
    slots = np.column_stack([
        pd.to_numeric(table[labeler_column(k, head)], errors="coerce").to_numpy(dtype=float)
        if labeler_column(k, head) in table.columns else np.full(len(table), np.nan)
        for k in ks
    ])
    use = (ids != "") & ~np.isnan(slots)
    who = [tuple(row[keep]) for row, keep in zip(ids, use)]
    what = [tuple(int(v) for v in row[keep]) for row, keep in zip(slots, use)]
    return who, what


class AnnotatorHead:
    """One head's logistic regression on (item, annotator) rows (see the module docstring).

    Args:
        n_classes: K.
        C: inverse L2 regularisation strength (per item, as in `LinearHead`).
        annotator_scale: value of an annotator's one-hot column (larger = less shrinkage of its bias).
        min_ratings: annotators with fewer training ratings get no bias of their own.
        class_weight: None or `balanced`.
        max_iter: iteration cap of the newton-cg solver.
        seed: random state of the solver.

    Attributes:
        annotators_: annotator id -> column of the one-hot block.
        estimator_: the fitted `LogisticRegression`, or None when fewer than two classes have
            target mass (then `constant_` is predicted).
        constant_: (K,) prior predicted without an estimator.
    """

    def __init__(self, n_classes: int, *, C: float, annotator_scale: float, min_ratings: int,
                 class_weight: str | None, max_iter: int, seed: int):
        self.n_classes = n_classes
        self.C = C
        self.annotator_scale = annotator_scale
        self.min_ratings = min_ratings
        self.class_weight = class_weight
        self.max_iter = max_iter
        self.seed = seed

    def fit(self, X: sp.csr_matrix, targets: np.ndarray, annotators: list[tuple[str, ...]],
            ratings: list[tuple[int, ...]]) -> "AnnotatorHead":
        targets = np.asarray(targets, dtype=float)
        has_target = ~np.isnan(targets).all(axis=1)
        rated = np.array([bool(has_target[i]) and len(r) > 0 and len(r) == len(annotators[i])
                          and all(0 <= v < self.n_classes for v in r) for i, r in enumerate(ratings)], dtype=bool)
        counts: dict[str, int] = {}
        for i in np.flatnonzero(rated):
            for a in annotators[i]:
                counts[a] = counts.get(a, 0) + 1
        self.annotators_ = {a: k for k, a in enumerate(sorted(a for a, n in counts.items() if n >= self.min_ratings))}
        # the per-rating rows
        rows, labels, weights, cols = [], [], [], []
        for i in np.flatnonzero(rated):
            n = len(ratings[i])
            for a, v in zip(annotators[i], ratings[i]):
                rows.append(i)
                labels.append(v)
                weights.append(1.0 / n)
                cols.append(self.annotators_.get(a, -1))
        # the target rows without ratings: sample-weighted expansion of their distribution
        plain = np.where(rated[:, None], np.nan, targets)
        p_rows, p_labels, p_weights = expand_soft_targets(plain)
        rows = np.r_[np.asarray(rows, dtype=np.int64), p_rows]
        labels = np.r_[np.asarray(labels, dtype=np.int64), p_labels]
        weights = np.r_[np.asarray(weights, dtype=float), p_weights]
        cols = np.r_[np.asarray(cols, dtype=np.int64), np.full(len(p_rows), -1, dtype=np.int64)]
        # class weights from the mass each class gets in these rows
        mass = np.zeros((1, self.n_classes))
        np.add.at(mass[0], labels, weights)
        weights = weights * class_weight_vector(mass, self.class_weight)[labels]
        self.constant_ = target_prior(mass if mass.sum() > 0 else targets)
        self.estimator_ = fit_logistic(lambda: self._design(X[rows], cols), labels, weights, C=self.C,
                                       max_iter=self.max_iter, tol=1e-4, seed=self.seed)
        return self

    def _design(self, X: sp.csr_matrix, cols: np.ndarray) -> sp.csr_matrix:
        known = cols >= 0
        onehot = sp.csr_matrix(
            (np.full(int(known.sum()), self.annotator_scale, dtype=np.float32), (np.flatnonzero(known), cols[known])),
            shape=(X.shape[0], len(self.annotators_)),
        )
        return sp.hstack([X, onehot], format="csr", dtype=np.float32)

    def _split_coef(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(text weights (K', d), annotator biases (K', A), intercepts (K',)) of the estimator."""
        coef = self.estimator_.coef_
        n_ann = len(self.annotators_)
        d = coef.shape[1] - n_ann
        return coef[:, :d], coef[:, d:] * self.annotator_scale, self.estimator_.intercept_

    def predict_proba(self, X: sp.csr_matrix, annotators: list[tuple[str, ...]]) -> np.ndarray:
        """(n, K): per row the mean over its annotators of the per-annotator distributions; the
        text-only distribution for a row without annotators (unseen ones have bias 0)."""
        n = X.shape[0]
        if self.estimator_ is None:
            return np.tile(self.constant_, (n, 1))
        w_text, bias, intercept = self._split_coef()
        base = np.asarray(X @ w_text.T) + intercept  # (n, K') text logits
        classes = np.asarray(self.estimator_.classes_, dtype=np.int64)
        rows = np.repeat(np.arange(n), [max(len(a), 1) for a in annotators])
        cols = np.array([self.annotators_.get(a, -1) for who in annotators for a in (who or ("",))], dtype=np.int64)
        logits = base[rows].copy()
        known = cols >= 0
        logits[known] += bias[:, cols[known]].T
        if logits.shape[1] == 1:  # binary: one logit for classes_[1]
            p1 = 1.0 / (1.0 + np.exp(-logits[:, 0]))
            per = np.column_stack([1.0 - p1, p1])
        else:
            z = logits - logits.max(axis=1, keepdims=True)
            e = np.exp(z)
            per = e / e.sum(axis=1, keepdims=True)
        counts = np.bincount(rows, minlength=n).astype(float)
        mean = np.zeros((n, per.shape[1]))
        np.add.at(mean, rows, per)
        mean /= counts[:, None]
        out = np.zeros((n, self.n_classes))
        out[:, classes] = mean
        return out


class AnnotatorTfidfModel(TfidfModel):
    """`tfidf` features + per-annotator biases (see the module docstring).

    Kind-specific settings: those of `tfidf`, plus `annotator_scale` (value of the annotator
    one-hot columns; default 3.0) and `min_ratings` (training ratings an annotator needs for a bias
    of their own; default 1).

    Attributes:
        featurizer_: the fitted `TextFeaturizer`.
        heads_: head name -> fitted `AnnotatorHead`.
    """

    kind = "tfidf_annotators"
    kind_defaults: dict[str, Any] = {**TfidfModel.kind_defaults, "annotator_scale": 3.0, "min_ratings": 1}

    def _check_params(self) -> None:
        super()._check_params()
        check_positive(self.params, "annotator_scale")
        check_positive(self.params, "min_ratings", integer=True)

    def _fit(self, table: pd.DataFrame, targets: dict[str, np.ndarray], *, progress: bool) -> None:
        self.featurizer_ = make_featurizer(self.schema.language, self.params).fit(table["text"])
        X = self._features(table)
        self.heads_ = {}
        for head in progress_bar(self.schema.heads, desc="tfidf_annotators heads", enabled=progress):
            annotators, ratings = row_ratings(table, head.name)
            self.heads_[head.name] = AnnotatorHead(
                head.n_classes,
                C=float(self.params["C"]),
                annotator_scale=float(self.params["annotator_scale"]),
                min_ratings=int(self.params["min_ratings"]),
                class_weight=self.class_weight,
                max_iter=int(self.params["max_iter"]),
                seed=self.seed,
            ).fit(X, targets[head.name], annotators, ratings)

    def _predict_raw(self, table: pd.DataFrame) -> dict[str, np.ndarray]:
        X = self._features(table)
        return {name: head.predict_proba(X, row_annotators(table, name)) for name, head in self.heads_.items()}

    def _save_state(self, folder: Path) -> dict[str, Any]:
        joblib.dump({"featurizer": self.featurizer_, "heads": self.heads_}, folder / STATE_FILE)
        n_annotators = {name: len(head.annotators_) for name, head in self.heads_.items()}
        return {"files": [STATE_FILE], "n_features": int(self.featurizer_.n_features_out_),
                "n_annotators": n_annotators}

    def _load_state(self, folder: Path, state: dict[str, Any]) -> None:
        saved = read_saved_file(folder / STATE_FILE, joblib.load)
        self.featurizer_ = saved["featurizer"]
        self.heads_ = saved["heads"]
