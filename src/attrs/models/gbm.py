"""LightGBM per head on text, dialogue-context and stacked first-stage features (kind `lightgbm`).

Features of a sentence (one dense float32 row; NaN where a previous sentence does not exist):
1. text: its TF-IDF row (`TextFeaturizer`) reduced by `TruncatedSVD` (`svd_components`);
2. context (`psyattrs.features.context.context_features`): position, conversation length,
   distance to the last pause, speaker change and run, length, ?/!/~ counts, laughter and crying
   runs (ㅋ ㅎ ㅠ ㅜ), emoticons, and per previous sentence i = 1..k: exists, same/other speaker
   as the target, distance, a few surface features (`PREV_SURFACE_COLUMNS`);
3. the previous k sentences' first `context_svd_components` SVD text features;
4. stacked (`stack`): first-stage probabilities of every head (a `LinearHead` logistic regression
   on the TF-IDF) for the sentence itself and for each of its previous k sentences, so that,
   e.g., the partner's predicted disclosure can inform this sentence's empathy. In training they
   are out-of-fold, folded by conversation (`out_of_fold`): no sentence's first-stage features
   come from a model that saw its own conversation's labels. At prediction time the first stage
   is refitted on all training rows and predicts the new sentences.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Callable

import joblib
import numpy as np
import pandas as pd

from psyattrs import _runtime
from psyattrs.errors import PsyattrsWarning
from psyattrs.features.context import PREV_SURFACE_COLUMNS, context_features, gather_rows, previous_rows
from psyattrs.models.base import MultiHeadModel, read_saved_file, target_prior, weighted_expansion
from psyattrs.models.tfidf import FEATURIZER_DEFAULTS, LinearHead, check_positive, make_featurizer

STATE_FILE = "features.joblib"


def group_folds(groups: "np.ndarray | pd.Series", n_folds: int, *, seed: int = 0) -> np.ndarray:
    """Fold number of every row such that all rows of a group (conversation) share a fold.

    Args:
        groups: group id per row (e.g. `doc_id`).
        n_folds: number of folds (>= 2); capped at the number of groups.
        seed: shuffles the groups before they are dealt round-robin to the folds.

    Returns:
        int64 array (len(groups),) of fold numbers 0..min(n_folds, n_groups)-1.

    Raises:
        ValueError: fewer than two groups, or n_folds < 2.
    """
    codes, uniques = pd.factorize(pd.Series(groups).astype(str), sort=True)
    if n_folds < 2:
        raise ValueError(f"out-of-fold stacking needs stack_folds >= 2, got {n_folds}")
    if len(uniques) < 2:
        raise ValueError(
            f"out-of-fold stacking needs at least 2 conversations (doc_id), got {len(uniques)}; "
            "give more conversations or set stack=False"
        )
    n_folds = min(n_folds, len(uniques))
    permuted = np.random.default_rng(seed).permutation(len(uniques))
    fold_of_group = np.empty(len(uniques), dtype=np.int64)
    fold_of_group[permuted] = np.arange(len(uniques)) % n_folds
    return fold_of_group[codes]


def out_of_fold(
    folds: np.ndarray, fit_predict: Callable[[np.ndarray, np.ndarray], dict[str, np.ndarray]]
) -> dict[str, np.ndarray]:
    """Out-of-fold predictions: every row predicted by a model fitted on the other folds only.

    Args:
        folds: fold number of every row (`group_folds`).
        fit_predict: called once per fold as fit_predict(train_rows, held_rows) with two int arrays
            of row numbers; must fit on `train_rows` only and return head -> (len(held_rows), K).

    Returns:
        head -> float array (len(folds), K), row r predicted in the fold that held r out.
    """
    out: dict[str, np.ndarray] = {}
    for fold in np.unique(folds):
        held = np.flatnonzero(folds == fold)
        train = np.flatnonzero(folds != fold)
        predicted = fit_predict(train, held)
        for head, proba in predicted.items():
            if head not in out:
                out[head] = np.full((len(folds), proba.shape[1]), np.nan)
            out[head][held] = proba
    return out


class GBMHead:
    """One head's LightGBM booster, learning soft targets by sample-weighted expansion.

    Args:
        n_classes: K (binary objective for K = 2, multiclass otherwise).
        params: LightGBM parameters (objective and num_class are set here).
        num_boost_round: number of boosting rounds (trees per class).
        class_weight: None or `balanced`.

    Attributes:
        booster_: the fitted `lightgbm.Booster`, or None when fewer than two classes have
            target mass (then `constant_` is predicted).
        constant_: (K,) prior used without a booster.
    """

    def __init__(
        self, n_classes: int, *, params: dict[str, Any], num_boost_round: int, class_weight: str | None = None
    ):
        self.n_classes = n_classes
        self.params = dict(params)
        self.num_boost_round = num_boost_round
        self.class_weight = class_weight

    def _params(self) -> dict[str, Any]:
        params = {**self.params, "verbosity": -1}
        if self.n_classes == 2:
            params["objective"] = "binary"
        else:
            params.update(objective="multiclass", num_class=self.n_classes)
        return params

    def fit(self, features: np.ndarray, targets: np.ndarray, *, feature_names: list[str] | None = None) -> "GBMHead":
        """Fits on the rows with a target.

        Args:
            features: dense (n, d) float matrix.
            targets: (n, K) distributions, all-NaN rows ignored.
            feature_names: names of the d columns (kept in the booster).
        """
        import lightgbm as lgb

        rows, labels, weights = weighted_expansion(targets, self.class_weight)
        self.constant_ = target_prior(targets)
        self.booster_ = None
        if len(np.unique(labels)) < 2:
            return self
        data = lgb.Dataset(
            features[rows],
            label=labels,
            weight=weights,
            feature_name=feature_names if feature_names is not None else "auto",
            params={"max_bin": self.params.get("max_bin", 255), "verbosity": -1},
            free_raw_data=True,
        )
        self.booster_ = lgb.train(self._params(), data, num_boost_round=self.num_boost_round)
        return self

    def predict_proba(self, features: np.ndarray) -> np.ndarray:
        """Probabilities (n, K)."""
        if self.booster_ is None:
            return np.tile(self.constant_, (features.shape[0], 1))
        raw = self.booster_.predict(features, num_threads=self.params.get("num_threads", 0))
        if self.n_classes == 2:
            return np.column_stack([1.0 - raw, raw])
        return np.asarray(raw, dtype=float)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if state.get("booster_") is not None:
            state["booster_"] = state["booster_"].model_to_string(num_iteration=-1)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        if isinstance(state.get("booster_"), str):
            import lightgbm as lgb

            state["booster_"] = lgb.Booster(model_str=state["booster_"])
        self.__dict__.update(state)


_warned_openmp = False


def _warn_spinning_openmp() -> None:
    """Warns once per process when OpenMP loaded before psyattrs could set OMP_WAIT_POLICY."""
    global _warned_openmp
    if _runtime.openmp_loaded_early() and not _warned_openmp:
        _warned_openmp = True
        warnings.warn(
            "OpenMP was loaded (by scikit-learn or LightGBM) before `import psyattrs` could set "
            "OMP_WAIT_POLICY=PASSIVE, so LightGBM's threads spin while they wait and train several times "
            "slower on a busy machine: import psyattrs first, or set OMP_WAIT_POLICY=PASSIVE in the environment",
            PsyattrsWarning,
            stacklevel=3,
        )


class LightGBMModel(MultiHeadModel):
    """Per-head LightGBM on text, context and stacked features (see the module docstring).

    Kind-specific settings (`kind_defaults`): LightGBM's `n_estimators`, `num_leaves`,
    `learning_rate`, `min_child_samples`, `colsample_bytree`, `subsample` (row share per tree),
    `reg_lambda`, `max_bin`, `n_jobs`;
    `svd_components` (text dimensions), `context_svd_components` (text dimensions of each
    previous sentence); `stack` (first-stage features on/off), `stack_folds`,
    `stack_C` (the first stage's logistic regression C); the featurizer's `char_ngrams`,
    `word_ngrams`, `words`, `min_df`, `max_features`, `sublinear_tf`, `use_idf`.

    Attributes:
        featurizer_: fitted `TextFeaturizer`.
        svd_: fitted `TruncatedSVD`.
        stage1_: head -> `LinearHead` fitted on all training rows (None without `stack`).
        heads_: head -> `GBMHead`.
        feature_names_: the columns the boosters see.
    """

    kind = "lightgbm"
    kind_defaults: dict[str, Any] = {
        "n_estimators": 200,
        "num_leaves": 31,
        "learning_rate": 0.1,
        "min_child_samples": 20,
        "colsample_bytree": 0.4,
        "subsample": 0.8,
        "reg_lambda": 0.0,
        "max_bin": 63,
        "n_jobs": 2,
        "svd_components": 32,
        "context_svd_components": 16,
        "stack": True,
        "stack_folds": 3,
        "stack_C": 2.0,
        **FEATURIZER_DEFAULTS,
        "max_features": 100_000,
    }
    _packages = ("numpy", "pandas", "scikit-learn", "lightgbm")

    def _check_params(self) -> None:
        integers = ("n_estimators", "num_leaves", "min_child_samples", "max_bin", "n_jobs", "svd_components")
        for name in (*integers, "context_svd_components", "stack_folds"):
            check_positive(self.params, name, integer=True)
        for name in ("learning_rate", "stack_C"):
            check_positive(self.params, name)
        for name in ("colsample_bytree", "subsample"):
            value = self.params[name]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
                raise ValueError(f"setting {name!r} must be in (0, 1], got {value!r}")
        if self.params["reg_lambda"] < 0:
            raise ValueError(f"setting 'reg_lambda' must be >= 0, got {self.params['reg_lambda']!r}")
        if not isinstance(self.params["stack"], (bool, np.bool_)):
            raise ValueError(f"setting 'stack' must be true or false, got {self.params['stack']!r}")
        if self.params["stack"] and self.params["stack_folds"] < 2:
            raise ValueError(f"setting 'stack_folds' must be >= 2, got {self.params['stack_folds']!r}")
        make_featurizer(self.schema.language, self.params)

    def _lgb_params(self) -> dict[str, Any]:
        p = self.params
        return {
            "learning_rate": float(p["learning_rate"]),
            "num_leaves": int(p["num_leaves"]),
            "min_data_in_leaf": int(p["min_child_samples"]),
            "feature_fraction": float(p["colsample_bytree"]),
            "bagging_fraction": float(p["subsample"]),
            "bagging_freq": 1 if float(p["subsample"]) < 1 else 0,
            "lambda_l2": float(p["reg_lambda"]),
            "max_bin": int(p["max_bin"]),
            "num_threads": int(p["n_jobs"]),
            "seed": self.seed,
            "deterministic": True,
            "force_col_wise": True,
        }

    def _stage1_head(self, n_classes: int) -> LinearHead:
        # a looser tolerance than the tfidf model's: these are features, refitted per fold
        C = float(self.params["stack_C"])
        return LinearHead(n_classes, C=C, class_weight=self.class_weight, tol=1e-3, seed=self.seed)

    def _stage1_oof(self, X, table: pd.DataFrame, targets: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        folds = group_folds(table["doc_id"].to_numpy(), int(self.params["stack_folds"]), seed=self.seed)

        def fit_predict(train: np.ndarray, held: np.ndarray) -> dict[str, np.ndarray]:
            return {
                h.name: self._stage1_head(h.n_classes).fit(X[train], targets[h.name][train]).predict_proba(X[held])
                for h in self.schema
            }

        return out_of_fold(folds, fit_predict)

    def _assemble(self, table: pd.DataFrame, X, stage1: dict[str, np.ndarray] | None) -> tuple[np.ndarray, list[str]]:
        k = self.context_previous
        Z = self.svd_.transform(X).astype(np.float32)
        ctx = context_features(table, k, prev_surface=PREV_SURFACE_COLUMNS)
        blocks = [Z, ctx.to_numpy(dtype=np.float32)]
        names = [f"svd{j}" for j in range(Z.shape[1])] + list(ctx.columns)
        prev = previous_rows(table, k)
        Zc = Z[:, : int(self.params["context_svd_components"])]
        for i in range(1, k + 1):
            blocks.append(gather_rows(Zc, prev[:, i - 1]).astype(np.float32))
            names += [f"prev{i}_svd{j}" for j in range(Zc.shape[1])]
        if stage1 is not None:
            P = np.hstack([stage1[h.name] for h in self.schema]).astype(np.float32)
            p_names = [f"stage1_{h.name}_{c}" for h in self.schema for c in h.values]
            blocks.append(P)
            names += p_names
            for i in range(1, k + 1):
                blocks.append(gather_rows(P, prev[:, i - 1]).astype(np.float32))
                names += [f"prev{i}_{n}" for n in p_names]
        return np.hstack(blocks).astype(np.float32), names

    def _fit(self, table: pd.DataFrame, targets: dict[str, np.ndarray], *, progress: bool) -> None:
        from sklearn.decomposition import TruncatedSVD

        _warn_spinning_openmp()
        steps = _runtime.progress_bar(total=3 + len(self.schema), desc="lightgbm", enabled=progress)
        self.featurizer_ = make_featurizer(self.schema.language, self.params).fit(table["text"])
        X = self.featurizer_.transform(table["text"])
        if min(X.shape) < 2:
            raise ValueError(
                f"the lightgbm model needs at least 2 training sentences and 2 text features, got {X.shape}; "
                "give more text or lower min_df"
            )
        n_comp = max(1, min(int(self.params["svd_components"]), X.shape[1] - 1, X.shape[0] - 1))
        self.svd_ = TruncatedSVD(n_components=n_comp, random_state=self.seed).fit(X)
        steps.update()
        stage1 = None
        self.stage1_ = None
        if self.params["stack"]:
            stage1 = self._stage1_oof(X, table, targets)
            self.stage1_ = {h.name: self._stage1_head(h.n_classes).fit(X, targets[h.name]) for h in self.schema}
        steps.update()
        features, self.feature_names_ = self._assemble(table, X, stage1)
        steps.update()
        self.heads_ = {}
        for head in self.schema:
            self.heads_[head.name] = GBMHead(
                head.n_classes,
                params=self._lgb_params(),
                num_boost_round=int(self.params["n_estimators"]),
                class_weight=self.class_weight,
            ).fit(features, targets[head.name], feature_names=self.feature_names_)
            steps.update()
        steps.close()

    def _predict_raw(self, table: pd.DataFrame) -> dict[str, np.ndarray]:
        X = self.featurizer_.transform(table["text"])
        stage1 = None
        if self.stage1_ is not None:
            stage1 = {name: head.predict_proba(X) for name, head in self.stage1_.items()}
        features, _ = self._assemble(table, X, stage1)
        return {name: head.predict_proba(features) for name, head in self.heads_.items()}

    def feature_importance(self, head: str, *, importance_type: str = "gain") -> pd.Series:
        """A head's LightGBM feature importance, indexed by feature name, largest first."""
        self._check_fitted()
        booster = self.heads_[self.schema[head].name].booster_
        if booster is None:
            return pd.Series(0.0, index=self.feature_names_)
        values = booster.feature_importance(importance_type=importance_type)
        return pd.Series(values, index=self.feature_names_).sort_values(ascending=False)

    def _save_state(self, folder: Path) -> dict[str, Any]:
        joblib.dump({"featurizer": self.featurizer_, "svd": self.svd_, "stage1": self.stage1_}, folder / STATE_FILE)
        files = [STATE_FILE]
        for name, head in self.heads_.items():
            file = f"lightgbm_{name}.txt"
            if head.booster_ is not None:
                head.booster_.save_model(str(folder / file))
                files.append(file)
        return {
            "files": files,
            "feature_names": self.feature_names_,
            "heads": {
                name: {"n_classes": h.n_classes, "constant": h.constant_.tolist(), "booster": h.booster_ is not None}
                for name, h in self.heads_.items()
            },
        }

    def _load_state(self, folder: Path, state: dict[str, Any]) -> None:
        import lightgbm as lgb

        saved = read_saved_file(folder / STATE_FILE, joblib.load)
        self.featurizer_, self.svd_, self.stage1_ = saved["featurizer"], saved["svd"], saved["stage1"]
        self.params["analysis"] = self.featurizer_.analysis  # `sentence` for a model saved before the setting
        self.feature_names_ = list(state["feature_names"])
        self.heads_ = {}
        for name, info in state["heads"].items():
            head = GBMHead(
                info["n_classes"],
                params=self._lgb_params(),
                num_boost_round=int(self.params["n_estimators"]),
                class_weight=self.class_weight,
            )
            head.constant_ = np.asarray(info["constant"], dtype=float)
            head.booster_ = None
            if info["booster"]:
                file = folder / f"lightgbm_{name}.txt"
                if not file.is_file():
                    raise FileNotFoundError(2, "missing", str(file))
                head.booster_ = lgb.Booster(model_file=str(file))
            self.heads_[name] = head
