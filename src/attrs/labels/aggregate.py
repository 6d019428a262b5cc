"""Final labels from several labelers: OPELA resolution, majority vote and Dawid-Skene.

Each method is one small class in the crowd-kit style: settings in the constructor,
`fit(labels, n_classes)`, `fit_predict(...)`, `fit_predict_proba(...)`, fitted results ending in `_`.
Their input is a long table with one row per (task, worker) rating:

| column | meaning                                                    |
|--------|------------------------------------------------------------|
| task   | item id (any hashable; the table-level code uses row numbers) |
| worker | labeler id (any hashable; the table-level code uses k of `labeler{k}_*`) |
| label  | the class given, an integer 0..n_classes-1                  |

Other columns are ignored. A task appears once per worker who rated it; a worker rating the same
task twice is an error, and so is a missing or out-of-range label (unrated cells are simply absent).
Outputs are indexed by task in order of first appearance.

Items with other than three labels (the generic format allows any number of labelers and empty
cells) are resolved by `OpelaResolver` as follows: the FORMATS §6 rule applies to items with exactly
three labels; any other item gets its plurality class (a single label is that label), and a tied
plurality is broken at random among the tied classes (seeded, branch `random`).

The table-level functions (`resolve_final_labels`, `compare_with_final`) live in
`psyattrs.labels.resolve`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Sequence

import numpy as np
import pandas as pd


LONG_COLUMNS: tuple[str, ...] = ("task", "worker", "label")
METHODS: tuple[str, ...] = ("opela", "opela-weighted", "majority", "dawid-skene")
BRANCHES: tuple[str, ...] = ("majority", "score", "labeler_share", "random")
_BRANCH = {name: code for code, name in enumerate(BRANCHES)}
_SCORE_RTOL = 1e-9  # two scores this close are a tie (products of shares, computed in floats)
_EPS = 1e-12


# --------------------------------------------------------------------------------------------
# Input checks and encoding: the one place where the long table is validated.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Encoded:
    """A validated long table as integer codes: task t[i], worker w[i], label y[i].

    When every worker rated every task, `grid` holds the labels as a (n_tasks, n_workers) array
    (workers in order) and t, w, y are derived from it only when asked for, in the order of
    `grid_order` (the grid column of each rating within a task: the order the ratings came in).
    """

    tasks: pd.Index
    workers: pd.Index
    n_classes: int
    codes: "tuple[np.ndarray, np.ndarray, np.ndarray] | None" = None  # (t, w, y)
    grid: "np.ndarray | None" = None
    grid_order: "np.ndarray | None" = None
    task_major: bool = False  # the ratings are already ordered by task, then worker

    @cached_property
    def _ratings(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.codes is not None:
            return self.codes
        n, m = self.grid.shape
        return np.repeat(np.arange(n), m), np.tile(self.grid_order, n), self.grid[:, self.grid_order].ravel()

    @property
    def t(self) -> np.ndarray:
        return self._ratings[0]

    @property
    def w(self) -> np.ndarray:
        return self._ratings[1]

    @property
    def y(self) -> np.ndarray:
        return self._ratings[2]

    @property
    def n_tasks(self) -> int:
        return len(self.tasks)

    @property
    def n_workers(self) -> int:
        return len(self.workers)

    def ratings_per_task(self) -> np.ndarray:
        """How many workers rated each task, shape (n_tasks,)."""
        if self.grid is not None:
            return np.full(self.n_tasks, self.n_workers, dtype=np.int64)
        return np.bincount(self.t, minlength=self.n_tasks)

    def vote_counts(self) -> np.ndarray:
        """Votes per task and class, shape (n_tasks, n_classes)."""
        k = self.n_classes
        return np.bincount(self.t * k + self.y, minlength=self.n_tasks * k).reshape(self.n_tasks, k)

    def vote_columns(self) -> np.ndarray:
        """`vote_counts` stored class by class: a (n_tasks, n_classes) view of a (n_classes,
        n_tasks) array, so that per-class passes (`_argmax_random`) read contiguous memory."""
        n = self.n_tasks
        if self.grid is not None:  # worker by worker: label * n + task, without the per-rating codes
            cells = (self.grid.T * n + np.arange(n)).ravel()
        else:
            cells = self.y * n + self.t
        return np.bincount(cells, minlength=n * self.n_classes).reshape(self.n_classes, n).T


def _first(values: Sequence, n: int = 5) -> str:
    values = list(values)
    more = f" and {len(values) - n} more" if len(values) > n else ""
    return f"{values[:n]}{more}"


def _encode(labels: pd.DataFrame, n_classes: int) -> _Encoded:
    """Checks a long label table and turns it into integer codes (ValueError naming what is wrong)."""
    if not isinstance(labels, pd.DataFrame):
        raise TypeError(f"labels must be a pandas DataFrame with columns {list(LONG_COLUMNS)}, got {type(labels).__name__}")
    if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) or n_classes < 2:
        raise ValueError(f"n_classes must be an integer >= 2, got {n_classes!r}")
    missing = [c for c in LONG_COLUMNS if c not in labels.columns]
    if missing:
        raise ValueError(f"labels has no column(s) {missing}; expected columns {list(LONG_COLUMNS)}")
    data = labels[list(LONG_COLUMNS)]
    if data.empty:
        raise ValueError("labels is empty: there is nothing to aggregate")
    for col in ("task", "worker"):
        bad = data.index[data[col].isna().to_numpy()]
        if len(bad):
            raise ValueError(f"labels has missing {col} ids in rows {_first(bad)}")
    raw = data["label"]
    if raw.isna().any():
        bad = data.index[raw.isna().to_numpy()]
        raise ValueError(f"labels has missing labels in rows {_first(bad)}; leave unrated cells out of the table")
    numeric = pd.to_numeric(raw, errors="coerce")
    allowed = list(range(int(n_classes)))
    not_class = numeric.isna() | ~numeric.isin(allowed)
    if not_class.any():
        bad_rows = data.index[not_class.to_numpy()]
        bad_values = sorted({str(v) for v in raw[not_class]})
        raise ValueError(f"labels has value(s) {_first(bad_values)} (rows {_first(bad_rows)}) outside the classes {allowed}")
    dup = data.duplicated(["task", "worker"], keep=False).to_numpy()
    if dup.any():
        pairs = list(dict.fromkeys(zip(data["task"][dup], data["worker"][dup])))
        raise ValueError(f"labels has several labels from one worker for one task (task, worker): {_first(pairs)}")
    t, tasks = pd.factorize(data["task"], sort=False)
    try:
        w, workers = pd.factorize(data["worker"], sort=True)
    except TypeError:  # worker ids of mixed types cannot be sorted
        w, workers = pd.factorize(data["worker"], sort=False)
    return _Encoded(
        tasks=pd.Index(tasks, name="task"),
        workers=pd.Index(workers, name="worker"),
        n_classes=int(n_classes),
        codes=(np.asarray(t, dtype=np.int64), np.asarray(w, dtype=np.int64), numeric.to_numpy(dtype=np.int64)),
    )


def _encode_matrix(matrix: np.ndarray, ids: Sequence[int], n_classes: int) -> _Encoded:
    """Integer codes of a dense, already checked rating matrix (NaN = not rated)."""
    ids = np.asarray(ids, dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    workers = pd.Index(ids[order], name="worker")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    rated = ~np.isnan(matrix)
    if rated.all():  # every labeler rated every row: the labels as a grid, workers in order
        return _Encoded(
            tasks=pd.Index(np.arange(len(matrix)), dtype=np.int64, name="task"),
            workers=workers,
            n_classes=int(n_classes),
            grid=matrix[:, order].astype(np.int64),
            grid_order=rank,
            task_major=bool(np.all(np.diff(ids) > 0)),
        )
    rows, cols = np.nonzero(rated)  # row-major: by task, then worker
    any_rated = np.zeros(len(matrix), dtype=bool)
    any_rated[rows] = True
    return _Encoded(
        tasks=pd.Index(np.flatnonzero(any_rated), dtype=np.int64, name="task"),
        workers=workers,
        n_classes=int(n_classes),
        codes=((np.cumsum(any_rated) - 1)[rows], rank[cols], matrix[rows, cols].astype(np.int64)),
        task_major=bool(np.all(np.diff(ids) > 0)),  # columns in worker order: rows stay by task, then worker
    )


def _argmax_random(
    counts: np.ndarray, rng: np.random.Generator, *, needed: "np.ndarray | None" = None
) -> tuple[np.ndarray, np.ndarray]:
    """Per row the column of the maximum, ties broken uniformly at random; also which rows tied.

    The random keys are one draw per cell of `counts`, whether or not a row ties, so the stream
    after this call does not depend on the ties. `needed` (bool per row, None = all) marks the rows
    whose tie-break the caller keeps; a tied row outside it gets its first top column. When no
    needed row ties, the draws are skipped and the stream moved on as if they had been made.
    """
    if counts.shape[1] == 2:  # two classes: one comparison each
        first, second = counts[:, 0], counts[:, 1]
        top, winners, tied = np.maximum(first, second), (second > first).astype(np.int64), first == second
    else:
        columns = np.ascontiguousarray(counts.T)  # K is small: column-wise passes beat row-wise reductions
        top = columns.max(axis=0)
        n_top = np.zeros(len(top), dtype=np.int64)
        winners = np.full(len(top), -1, dtype=np.int64)
        for c in range(columns.shape[0]):
            at_top = columns[c] == top
            n_top += at_top
            winners[at_top & (winners < 0)] = c
        tied = n_top > 1
    drawn = tied if needed is None else tied & needed
    if drawn.any():
        keys = rng.random(counts.shape)
        tied_keys = np.where(counts[drawn] == top[drawn, None], keys[drawn], -1.0)
        winners[drawn] = tied_keys.argmax(axis=1)
    else:
        _skip_draws(rng, counts.size)
    return winners, tied


def _skip_draws(rng: np.random.Generator, n: int) -> None:
    """Moves `rng` on exactly as `rng.random(n)` would (one 64-bit step per double), without drawing."""
    if type(rng.bit_generator) is np.random.PCG64:  # the generator of np.random.default_rng
        rng.bit_generator.advance(n)
    else:
        rng.random(n)


def _proba_frame(p: np.ndarray, tasks: pd.Index) -> pd.DataFrame:
    return pd.DataFrame(p, index=tasks, columns=pd.RangeIndex(p.shape[1], name="label"), copy=False)  # p is new


def _label_series(labels: np.ndarray, tasks: pd.Index) -> pd.Series:
    return pd.Series(np.array(labels, dtype=np.int64), index=tasks, name="agg_label", copy=False)


class Aggregator:
    """Shared `fit_predict`/`fit_predict_proba`; subclasses set `labels_` and `probas_` in `fit`."""

    labels_: pd.Series
    probas_: pd.DataFrame

    def fit(self, labels: pd.DataFrame, n_classes: int) -> "Aggregator":
        """Fits on a long table with columns task, worker, label (see the module docstring)."""
        return self._fit(_encode(labels, n_classes))

    def fit_matrix(self, matrix: np.ndarray, ids: Sequence[int], n_classes: int) -> "Aggregator":
        """Fits on a dense rating matrix, the fast path of the table-level code.

        Args:
            matrix: (n_rows, n_labelers) floats, NaN = not rated, values already checked to be
                classes 0..n_classes-1 (as `psyattrs.labels.resolve.rated_matrix` returns them).
            ids: the labeler number of each column (the workers).
            n_classes: number of classes K.

        Returns:
            self, fitted as `fit` would be on the equivalent long table: tasks are the row
            numbers with at least one rating, workers the ids.
        """
        return self._fit(_encode_matrix(matrix, ids, n_classes))

    def _fit(self, enc: "_Encoded") -> "Aggregator":  # pragma: no cover - abstract
        raise NotImplementedError

    def fit_predict(self, labels: pd.DataFrame, n_classes: int) -> pd.Series:
        """Fits and returns `labels_`: index = task, values = int class 0..n_classes-1."""
        return self.fit(labels, n_classes).labels_

    def fit_predict_proba(self, labels: pd.DataFrame, n_classes: int) -> pd.DataFrame:
        """Fits and returns `probas_`: index = task, columns 0..n_classes-1, rows sum to 1."""
        return self.fit(labels, n_classes).probas_


# --------------------------------------------------------------------------------------------
# Majority vote
# --------------------------------------------------------------------------------------------


class MajorityVote(Aggregator):
    """The most frequent class of each task; ties broken at random among the tied classes.

    Args:
        seed: seeds the tie-breaking; the same input and seed give the same labels.

    Attributes:
        labels_: Series, index = task, int class.
        probas_: DataFrame, index = task, columns 0..K-1: the share of the task's votes per class.
        ties_: bool Series, index = task: whether the task's plurality was tied (decided at random).
    """

    def __init__(self, seed: int = 0):
        self.seed = seed

    def _fit(self, enc: _Encoded) -> "MajorityVote":
        counts = enc.vote_counts()
        winners, tied = _argmax_random(counts, np.random.default_rng(self.seed))
        self.labels_ = _label_series(winners, enc.tasks)
        self.probas_ = _proba_frame(counts / counts.sum(axis=1, keepdims=True), enc.tasks)
        self.ties_ = pd.Series(tied, index=enc.tasks, name="tied")
        return self


# --------------------------------------------------------------------------------------------
# OPELA resolution (FORMATS §6)
# --------------------------------------------------------------------------------------------


class OpelaResolver(Aggregator):
    """The OPELA final-label algorithm, read literally (FORMATS §6).

    Binary heads (n_classes == 2): majority of the labels. Multi-class heads, items with exactly
    three labels: (a) if at least two agree, their label; (b) if all three differ, each labeler j
    who gave class c_j scores R[c_j, j] * U[c_j, j] (`weighted=True`: R * (1 - U)), estimated on
    the (a) items, and the class of the best-scoring labeler wins; a tied best score goes to the
    class of the labeler (of all three) with the highest share of (a) items in which they were in
    the majority; if that ties too, a seeded random choice among the three classes. A score that
    cannot be estimated (R or U is 0/0 because the class or labeler never occurs in the (a) items)
    never wins; if no score can be estimated, the item goes to the labeler-share step.
    Items with other than three labels get their plurality class (ties: seeded random).

    Args:
        weighted: use R * (1 - U) instead of the literal R * U.
        seed: seeds the random fallbacks.

    Attributes:
        labels_: Series, index = task, int class.
        probas_: DataFrame, index = task, columns 0..K-1: one-hot of `labels_` (the rule gives no
            graded confidence; use `MajorityVote` or `soft_targets` for vote shares).
        branches_: Series, index = task, what decided each item: `majority`, `score`,
            `labeler_share` or `random`.
        R_: DataFrame, index = class, columns = worker: reliability, the share of (a) items with
            majority c in which the worker gave c (NaN when undefined). None for binary heads.
        U_: DataFrame like R_: unreliability, the share of (a) items in which the worker gave c
            whose majority was not c. None for binary heads.
        majority_share_: Series, index = worker: share of the (a) items the worker rated in which
            they belonged to the majority. None for binary heads.
        n_majority_items_: number of (a) items (three labels, at least two agreeing).
    """

    def __init__(self, weighted: bool = False, seed: int = 0):
        self.weighted = weighted
        self.seed = seed

    def _fit(self, enc: _Encoded) -> "OpelaResolver":
        rng = np.random.default_rng(self.seed)
        counts = enc.vote_columns()
        per_task = enc.ratings_per_task()  # faster than a row sum of counts
        multi = enc.n_classes > 2  # then items with three labels follow (a)/(b), not their plurality
        winners, tied = _argmax_random(counts, rng, needed=per_task != 3 if multi else None)
        branches = np.where(tied, _BRANCH["random"], _BRANCH["majority"]).astype(np.int8)
        self.R_ = self.U_ = self.majority_share_ = None
        self.n_majority_items_ = 0
        if multi:
            self._resolve_three(enc, tied, per_task, winners, branches, rng)
        self.labels_ = _label_series(winners, enc.tasks)
        self._n_classes, self._branch_codes = enc.n_classes, branches
        return self

    @property
    def probas_(self) -> pd.DataFrame:
        """One-hot of `labels_` (index = task, columns 0..K-1), built when asked for."""
        return _proba_frame(np.eye(self._n_classes)[self.labels_.to_numpy()], self.labels_.index)

    @property
    def branches_(self) -> pd.Series:
        """What decided each item (index = task), built when asked for."""
        codes = pd.Categorical.from_codes(self._branch_codes, categories=list(BRANCHES))
        return pd.Series(codes, index=self.labels_.index, name="branch")

    def _resolve_three(
        self,
        enc: _Encoded,
        tied: np.ndarray,
        per_task: np.ndarray,
        winners: np.ndarray,
        branches: np.ndarray,
        rng: np.random.Generator,
    ) -> None:
        """Applies (a)/(b) to the items with exactly three labels; updates winners and branches."""
        three = np.flatnonzero(per_task == 3)
        given, who = _three_labels(enc, per_task, three)
        every = len(three) == len(per_task)
        agree = ~(tied if every else tied[three])  # three labels tie only when all three differ
        k, n_w = enc.n_classes, enc.n_workers

        # (a) items: each rating is a hit (the worker gave the majority class) or a miss; counted by
        # (given class, worker) in one pass, and the misses once more by (majority class, worker);
        # the ratings of the items whose three labels differ go to one extra bin, left out
        major = winners if every else winners[three]
        miss = given != major[:, None]
        code = (given * n_w + who) * 2 + miss
        code[~agree] = 2 * k * n_w
        by_given = np.bincount(code.ravel(), minlength=2 * k * n_w + 1)[:-1].reshape(k, n_w, 2)
        hit, miss_given = by_given[..., 0], by_given[..., 1]
        missed = miss & agree[:, None]
        miss_major = np.bincount((major[:, None] * n_w + who)[missed], minlength=k * n_w).reshape(k, n_w)
        with np.errstate(invalid="ignore", divide="ignore"):
            R = hit / (hit + miss_major)  # of the (a) items with majority c that j rated, j gave c
            U = miss_given / (hit + miss_given)  # of the (a) items in which j gave c, the majority was not c
            share = hit.sum(axis=0) / (hit + miss_given).sum(axis=0)
        classes = pd.RangeIndex(k, name="class")
        self.R_ = pd.DataFrame(R, index=classes, columns=enc.workers)
        self.U_ = pd.DataFrame(U, index=classes, columns=enc.workers)
        self.majority_share_ = pd.Series(share, index=enc.workers, name="majority_share")
        self.n_majority_items_ = int(agree.sum())

        branches[three[agree]] = _BRANCH["majority"]
        differ = np.flatnonzero(~agree)  # all three differ
        c, j = given[differ], who[differ]
        score = R[c, j] * ((1.0 - U[c, j]) if self.weighted else U[c, j])
        by_score = _unique_best(score)
        by_share = _unique_best(share[j])
        rows = np.arange(len(differ))
        label = np.where(by_score >= 0, c[rows, by_score], c[rows, by_share])
        branch = np.where(by_score >= 0, _BRANCH["score"], _BRANCH["labeler_share"]).astype(np.int8)
        for i in np.flatnonzero((by_score < 0) & (by_share < 0)):  # the authors never saw one
            label[i], branch[i] = rng.choice(c[i]), _BRANCH["random"]
        winners[three[differ]] = label
        branches[three[differ]] = branch


def _three_labels(enc: _Encoded, per_task: np.ndarray, three: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(classes, worker codes) of the items `three` (those with three labels), each (n_three, 3)
    in worker order."""
    if enc.grid is not None and enc.n_workers == 3:  # every item has the same three labelers
        return enc.grid, np.broadcast_to(np.arange(3), enc.grid.shape)
    y, w = enc.y, enc.w
    if not enc.task_major:
        order = np.lexsort((enc.w, enc.t))  # by task, then worker
        y, w = y[order], w[order]
    if len(three) == len(per_task) and len(y) == 3 * len(three):  # every item has three labels
        return y.reshape(-1, 3), w.reshape(-1, 3)
    pos = (np.cumsum(per_task) - per_task)[three][:, None] + np.arange(3)  # each item's first rating on
    return y[pos], w[pos]


def _unique_best(values: np.ndarray) -> np.ndarray:
    """Per row, the column of the single largest finite value; -1 where it ties or none is finite."""
    finite = np.isfinite(values)
    top = np.where(finite, values, -np.inf).max(axis=1, keepdims=True)
    at_top = finite & np.isclose(values, top, rtol=_SCORE_RTOL, atol=0.0)
    return np.where(at_top.sum(axis=1) == 1, at_top.argmax(axis=1), -1)


# --------------------------------------------------------------------------------------------
# Dawid-Skene
# --------------------------------------------------------------------------------------------


class DawidSkene(Aggregator):
    """Dawid-Skene: each worker has a confusion matrix; EM over the unknown true classes.

    Initialised from majority-vote shares (M-step first), then alternates E and M steps until the
    mean log-likelihood per task improves by less than `tol` or `n_iter` iterations ran. Confusion
    rows and priors are clipped at 1e-12 before taking logs, so a class a worker never gave does
    not zero out a task. Ties in the posterior go to the lower class.

    Args:
        n_iter: maximum number of EM iterations (>= 1).
        tol: stop when the mean log-likelihood per task changes by less than this.

    Attributes:
        labels_: Series, index = task, int class (argmax of `probas_`).
        probas_: DataFrame, index = task, columns 0..K-1: posterior of the true class.
        priors_: Series, index = class: estimated class prior.
        errors_: DataFrame, index = (worker, true class), columns = given class 0..K-1: each
            worker's estimated confusion matrix, rows sum to 1.
        loss_history_: mean negative log-likelihood per task after each iteration.
        n_iter_: iterations run.
    """

    def __init__(self, n_iter: int = 100, tol: float = 1e-5):
        if isinstance(n_iter, bool) or not isinstance(n_iter, (int, np.integer)) or n_iter < 1:
            raise ValueError(f"n_iter must be an integer >= 1, got {n_iter!r}")
        if not tol >= 0:
            raise ValueError(f"tol must be >= 0, got {tol!r}")
        self.n_iter = n_iter
        self.tol = tol

    def _fit(self, enc: _Encoded) -> "DawidSkene":
        k, n_w = enc.n_classes, enc.n_workers
        counts = enc.vote_counts()
        post = counts / counts.sum(axis=1, keepdims=True)
        cell = enc.w * k + enc.y  # (worker, given class) of each rating
        history: list[float] = []
        for _ in range(self.n_iter):
            priors, errors = self._m_step(post, enc, cell)
            log_err = np.log(np.maximum(errors, _EPS)).transpose(0, 2, 1).reshape(n_w * k, k)  # [w*k+given, true]
            contrib = log_err[cell]
            log_joint = np.log(np.maximum(priors, _EPS)) + np.stack(
                [np.bincount(enc.t, weights=contrib[:, c], minlength=enc.n_tasks) for c in range(k)], axis=1
            )
            top = log_joint.max(axis=1, keepdims=True)
            log_norm = top[:, 0] + np.log(np.exp(log_joint - top).sum(axis=1))
            post = np.exp(log_joint - log_norm[:, None])
            history.append(float(-log_norm.mean()))
            if len(history) > 1 and abs(history[-2] - history[-1]) < self.tol:
                break
        priors, errors = self._m_step(post, enc, cell)
        self.priors_ = pd.Series(priors, index=pd.RangeIndex(k, name="class"), name="prior")
        index = pd.MultiIndex.from_product([enc.workers, range(k)], names=["worker", "true"])
        self.errors_ = pd.DataFrame(errors.reshape(n_w * k, k), index=index, columns=pd.RangeIndex(k, name="label"))
        self.probas_ = _proba_frame(post, enc.tasks)
        self.labels_ = _label_series(post.argmax(axis=1), enc.tasks)
        self.loss_history_ = history
        self.n_iter_ = len(history)
        return self

    @staticmethod
    def _m_step(post: np.ndarray, enc: _Encoded, cell: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Priors (K,) and confusion matrices (workers, true, given) from the task posteriors."""
        k, n_w = enc.n_classes, enc.n_workers
        weights = post[enc.t]  # (n_ratings, K true)
        flat = np.stack([np.bincount(cell, weights=weights[:, c], minlength=n_w * k) for c in range(k)], axis=1)
        errors = flat.reshape(n_w, k, k).transpose(0, 2, 1)  # (worker, true, given)
        totals = errors.sum(axis=2, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            errors = np.where(totals > 0, errors / totals, 1.0 / k)
        return post.mean(axis=0), errors


# --------------------------------------------------------------------------------------------
# Method names
# --------------------------------------------------------------------------------------------


def make_aggregator(method: str, *, seed: int = 0) -> Aggregator:
    """The aggregator of a method name: opela, opela-weighted, majority or dawid-skene."""
    if method == "opela":
        return OpelaResolver(weighted=False, seed=seed)
    if method == "opela-weighted":
        return OpelaResolver(weighted=True, seed=seed)
    if method == "majority":
        return MajorityVote(seed=seed)
    if method == "dawid-skene":
        return DawidSkene()
    raise ValueError(f"unknown method {method!r}; allowed: {list(METHODS)}")
