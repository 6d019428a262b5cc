"""TF-IDF of character and word/morpheme n-grams + logistic regression per head.

Text features come from `psyattrs.features.text.TextFeaturizer` (morphemes for Korean, jieba words
for Chinese, words for English: the schema's language). With `context_previous = k > 0` each
sentence's row also carries the TF-IDF rows of its previous k sentences (`previous_rows`), scaled by
`context_scale` and put in one block for the other speaker's sentences and one for the same
speaker's, plus two indicator columns per step; with k = 0 the model sees the sentence alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pandas as pd
import scipy.sparse as sp

from psyattrs._runtime import progress_bar
from psyattrs.features.context import gather_rows, previous_rows, speaker_keys
from psyattrs.features.text import TextFeaturizer
from psyattrs.models.base import MultiHeadModel, full_proba, read_saved_file, target_prior, weighted_expansion
from psyattrs.models.logistic import fit_logistic

STATE_FILE = "tfidf.joblib"

FEATURIZER_DEFAULTS: dict[str, Any] = {
    "char_ngrams": (1, 3),
    "word_ngrams": (1, 2),
    "words": "auto",
    "analysis": "word",
    "min_df": 2,
    "max_features": 200_000,
    "sublinear_tf": True,
    "use_idf": True,
}


def check_positive(params: dict[str, Any], name: str, *, integer: bool = False) -> None:
    """ValueError naming `name` unless params[name] is a positive number (an integer if asked)."""
    value = params[name]
    kinds = (int, np.integer) if integer else (int, float, np.integer, np.floating)
    if isinstance(value, bool) or not isinstance(value, kinds) or not value > 0:
        raise ValueError(f"setting {name!r} must be a positive {'integer' if integer else 'number'}, got {value!r}")


def make_featurizer(language: str, params: dict[str, Any]) -> TextFeaturizer:
    """A `TextFeaturizer` from the model settings named in `FEATURIZER_DEFAULTS` (validated)."""
    featurizer = TextFeaturizer(language, **{k: params[k] for k in FEATURIZER_DEFAULTS})
    featurizer._validate()
    return featurizer


class LinearHead:
    """Logistic regression of one head on a feature matrix, learning soft targets by
    sample-weighted expansion (`weighted_expansion`).

    Args:
        n_classes: K.
        C: inverse L2 regularisation strength (scikit-learn's C, on the summed weighted loss).
        class_weight: None or `balanced`.
        max_iter: iteration cap of the newton-cg solver.
        tol: its stopping tolerance.
        seed: random state of the solver.

    Attributes:
        estimator_: the fitted `LogisticRegression`, or None when fewer than two classes have
            target mass (then `constant_` is predicted).
        constant_: (K,) the prior predicted when there is no estimator.
    """

    def __init__(
        self,
        n_classes: int,
        *,
        C: float = 2.0,
        class_weight: str | None = None,
        max_iter: int = 1000,
        tol: float = 1e-4,
        seed: int = 0,
    ):
        self.n_classes = n_classes
        self.C = C
        self.tol = tol
        self.class_weight = class_weight
        self.max_iter = max_iter
        self.seed = seed

    def fit(self, X, targets: np.ndarray) -> "LinearHead":
        """Fits on rows of X with a target.

        Args:
            X: feature matrix (n, d), sparse or dense.
            targets: (n, K) distributions, all-NaN rows ignored.
        """
        rows, labels, weights = weighted_expansion(targets, self.class_weight)
        self.constant_ = target_prior(targets)
        self.estimator_ = fit_logistic(lambda: X[rows], labels, weights, C=self.C, max_iter=self.max_iter, tol=self.tol,
                                       seed=self.seed)
        return self

    def predict_proba(self, X) -> np.ndarray:
        """Probabilities (n, K); classes without training mass get 0."""
        if self.estimator_ is None:
            return np.tile(self.constant_, (X.shape[0], 1))
        return full_proba(self.estimator_.predict_proba(X), self.estimator_.classes_, self.n_classes)


def context_matrix(X: sp.csr_matrix, table: pd.DataFrame, k: int, scale: float) -> sp.csr_matrix:
    """The sentence's TF-IDF row followed by its previous k sentences' rows.

    Args:
        X: TF-IDF rows of every table row (n, d).
        table: the prepared utterance table X was computed from.
        k: previous sentences (0 returns X).
        scale: factor on the previous sentences' rows.

    Returns:
        CSR (n, d * (1 + 2k) + 2k): X, then per step i = 1..k: the i-th previous sentence's row when
        it is by the other speaker, the same when it is by the same (or an unknown) speaker, and
        the two indicator columns [other speaker, same or unknown speaker] (0 without such a
        sentence).
    """
    if k == 0:
        return sp.csr_matrix(X)
    prev = previous_rows(table, k)
    speakers = speaker_keys(table).to_numpy()
    blocks = [X]
    indicators = []
    for i in range(k):
        rows = prev[:, i]
        has = rows >= 0
        other_spk = speakers[np.maximum(rows, 0)]
        other = has & (speakers != "") & (other_spk != "") & (speakers != other_spk)
        same = has & ~other
        picked = gather_rows(X, rows)
        blocks.append(sp.diags((other * scale).astype(np.float32)) @ picked)
        blocks.append(sp.diags((same * scale).astype(np.float32)) @ picked)
        indicators.append(np.column_stack([other, same]).astype(np.float32))
    blocks.append(sp.csr_matrix(np.hstack(indicators)))
    return sp.hstack(blocks, format="csr", dtype=np.float32)


class TfidfModel(MultiHeadModel):
    """TF-IDF n-grams + one logistic regression per head (see the module docstring).

    Kind-specific settings (`kind_defaults`): the featurizer's `char_ngrams`, `word_ngrams`,
    `words` (`auto`, `whitespace`, `none`), `analysis` (`word`: each whitespace word analysed alone,
    the default; `sentence`: whole sentences, as models saved before the setting), `min_df`,
    `max_features`, `sublinear_tf`, `use_idf`;
    `C` (inverse regularisation of the logistic regressions), `max_iter`, `context_scale` (weight
    of the previous sentences' features).

    Attributes:
        featurizer_: the fitted `TextFeaturizer`.
        heads_: head name -> fitted `LinearHead`.
    """

    kind = "tfidf"
    kind_defaults: dict[str, Any] = {**FEATURIZER_DEFAULTS, "C": 2.0, "max_iter": 1000, "context_scale": 0.5}

    def _check_params(self) -> None:
        check_positive(self.params, "C")
        check_positive(self.params, "max_iter", integer=True)
        check_positive(self.params, "context_scale")
        make_featurizer(self.schema.language, self.params)

    def _features(self, table: pd.DataFrame) -> sp.csr_matrix:
        X = self.featurizer_.transform(table["text"])
        return context_matrix(X, table, self.context_previous, float(self.params["context_scale"]))

    def _fit(self, table: pd.DataFrame, targets: dict[str, np.ndarray], *, progress: bool) -> None:
        self.featurizer_ = make_featurizer(self.schema.language, self.params).fit(table["text"])
        X = self._features(table)
        self.heads_ = {}
        for head in progress_bar(self.schema.heads, desc="tfidf heads", enabled=progress):
            self.heads_[head.name] = LinearHead(
                head.n_classes,
                C=float(self.params["C"]),
                class_weight=self.class_weight,
                max_iter=int(self.params["max_iter"]),
                seed=self.seed,
            ).fit(X, targets[head.name])

    def _predict_raw(self, table: pd.DataFrame) -> dict[str, np.ndarray]:
        X = self._features(table)
        return {name: head.predict_proba(X) for name, head in self.heads_.items()}

    def _save_state(self, folder: Path) -> dict[str, Any]:
        joblib.dump({"featurizer": self.featurizer_, "heads": self.heads_}, folder / STATE_FILE)
        return {"files": [STATE_FILE], "n_features": int(self.featurizer_.n_features_out_)}

    def _load_state(self, folder: Path, state: dict[str, Any]) -> None:
        saved = read_saved_file(folder / STATE_FILE, joblib.load)
        self.featurizer_ = saved["featurizer"]
        self.heads_ = saved["heads"]
        self.params["analysis"] = self.featurizer_.analysis  # `sentence` for a model saved before the setting
