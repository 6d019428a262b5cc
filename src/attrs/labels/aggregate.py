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

The table-level functions `resolve_final_labels` and `compare_with_final` apply a method to every
head of an utterance table (see `psyattrs.data.table`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from psyattrs.data.table import final_column, labeler_column, labeler_ids
from psyattrs.schema import Head, Schema

LONG_COLUMNS: tuple[str, ...] = ("task", "worker", "label")
METHODS: tuple[str, ...] = ("opela", "opela-weighted", "majority", "dawid-skene")
BRANCHES: tuple[str, ...] = ("majority", "score", "labeler_share", "random")
_SCORE_RTOL = 1e-9  # two scores this close are a tie (products of shares, computed in floats)
_EPS = 1e-12


# --------------------------------------------------------------------------------------------
# Input checks and encoding: the one place where the long table is validated.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Encoded:
    """A validated long table as integer codes: task t[i], worker w[i], label y[i]."""

    tasks: pd.Index
    workers: pd.Index
    t: np.ndarray
    w: np.ndarray
    y: np.ndarray
    n_classes: int

    @property
    def n_tasks(self) -> int:
        return len(self.tasks)

    @property
    def n_workers(self) -> int:
        return len(self.workers)

    def vote_counts(self) -> np.ndarray:
        """Votes per task and class, shape (n_tasks, n_classes)."""
        k = self.n_classes
        return np.bincount(self.t * k + self.y, minlength=self.n_tasks * k).reshape(self.n_tasks, k)


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
        t=np.asarray(t, dtype=np.int64),
        w=np.asarray(w, dtype=np.int64),
        y=numeric.to_numpy(dtype=np.int64),
        n_classes=int(n_classes),
    )


def _argmax_random(counts: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per row the column of the maximum, ties broken uniformly at random; also which rows tied."""
    is_max = counts == counts.max(axis=1, keepdims=True)
    keys = rng.random(counts.shape)
    keys[~is_max] = -1.0
    return keys.argmax(axis=1), is_max.sum(axis=1) > 1


def _proba_frame(p: np.ndarray, tasks: pd.Index) -> pd.DataFrame:
    return pd.DataFrame(p, index=tasks, columns=pd.RangeIndex(p.shape[1], name="label"))


def _label_series(labels: np.ndarray, tasks: pd.Index) -> pd.Series:
    return pd.Series(np.asarray(labels, dtype=np.int64), index=tasks, name="agg_label")


class Aggregator:
    """Shared `fit_predict`/`fit_predict_proba`; subclasses set `labels_` and `probas_` in `fit`."""

    labels_: pd.Series
    probas_: pd.DataFrame

    def fit(self, labels: pd.DataFrame, n_classes: int) -> "Aggregator":  # pragma: no cover - abstract
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

    def fit(self, labels: pd.DataFrame, n_classes: int) -> "MajorityVote":
        """Fits on a long table with columns task, worker, label (see the module docstring)."""
        enc = _encode(labels, n_classes)
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

    def fit(self, labels: pd.DataFrame, n_classes: int) -> "OpelaResolver":
        """Fits on a long table with columns task, worker, label (see the module docstring)."""
        enc = _encode(labels, n_classes)
        rng = np.random.default_rng(self.seed)
        counts = enc.vote_counts()
        winners, tied = _argmax_random(counts, rng)
        branches = np.where(tied, "random", "majority").astype(object)
        self.R_ = self.U_ = self.majority_share_ = None
        self.n_majority_items_ = 0
        if enc.n_classes > 2:
            self._resolve_three(enc, counts, winners, branches, rng)
        self.labels_ = _label_series(winners, enc.tasks)
        self.probas_ = _proba_frame(np.eye(enc.n_classes)[winners], enc.tasks)
        self.branches_ = pd.Series(branches, index=enc.tasks, name="branch", dtype=str)
        return self

    def _resolve_three(
        self, enc: _Encoded, counts: np.ndarray, winners: np.ndarray, branches: np.ndarray, rng: np.random.Generator
    ) -> None:
        """Applies (a)/(b) to the items with exactly three labels; updates winners and branches."""
        per_task = counts.sum(axis=1)
        three = np.flatnonzero(per_task == 3)
        order = np.lexsort((enc.w, enc.t))  # by task, then worker
        starts = np.concatenate(([0], np.cumsum(per_task)[:-1]))
        pos = starts[three][:, None] + np.arange(3)
        given = enc.y[order][pos]  # (n_three, 3) classes
        who = enc.w[order][pos]  # (n_three, 3) worker codes
        agree = counts[three].max(axis=1) >= 2
        k, n_w = enc.n_classes, enc.n_workers

        a_given, a_who, a_major = given[agree], who[agree], winners[three][agree]
        in_major = a_given == a_major[:, None]
        r_num = np.bincount((a_major[:, None] * n_w + a_who).ravel(), weights=in_major.ravel(), minlength=k * n_w)
        r_den = np.bincount((a_major[:, None] * n_w + a_who).ravel(), minlength=k * n_w)
        u_num = np.bincount((a_given * n_w + a_who).ravel(), weights=(~in_major).ravel(), minlength=k * n_w)
        u_den = np.bincount((a_given * n_w + a_who).ravel(), minlength=k * n_w)
        s_num = np.bincount(a_who.ravel(), weights=in_major.ravel(), minlength=n_w)
        s_den = np.bincount(a_who.ravel(), minlength=n_w)
        with np.errstate(invalid="ignore", divide="ignore"):
            R = (r_num / r_den).reshape(k, n_w)
            U = (u_num / u_den).reshape(k, n_w)
            share = s_num / s_den
        classes = pd.RangeIndex(k, name="class")
        self.R_ = pd.DataFrame(R, index=classes, columns=enc.workers)
        self.U_ = pd.DataFrame(U, index=classes, columns=enc.workers)
        self.majority_share_ = pd.Series(share, index=enc.workers, name="majority_share")
        self.n_majority_items_ = int(agree.sum())

        branches[three[agree]] = "majority"
        differ = np.flatnonzero(~agree)  # all three differ
        c, j = given[differ], who[differ]
        score = R[c, j] * ((1.0 - U[c, j]) if self.weighted else U[c, j])
        by_score = _unique_best(score)
        by_share = _unique_best(share[j])
        rows = np.arange(len(differ))
        label = np.where(by_score >= 0, c[rows, by_score], c[rows, by_share])
        branch = np.where(by_score >= 0, "score", "labeler_share").astype(object)
        for i in np.flatnonzero((by_score < 0) & (by_share < 0)):  # the authors never saw one
            label[i], branch[i] = rng.choice(c[i]), "random"
        winners[three[differ]] = label
        branches[three[differ]] = branch


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

    def fit(self, labels: pd.DataFrame, n_classes: int) -> "DawidSkene":
        """Fits on a long table with columns task, worker, label (see the module docstring)."""
        enc = _encode(labels, n_classes)
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
# Table level: the utterance table's labeler{k}_{head} columns
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


def rated_matrix(df: pd.DataFrame, head: Head) -> tuple[np.ndarray, list[int]]:
    """One head's per-labeler labels, checked against the head's classes.

    Args:
        df: utterance table with `labeler{k}_{head}` columns (any number of k, empty = not rated).
        head: the head.

    Returns:
        (matrix, ids): float array (n_rows, n_labelers) with NaN where a labeler did not rate, and
        the labeler numbers k of its columns, ascending. Zero columns when the head has none.

    Raises:
        ValueError: a cell holds something other than one of the head's classes (names the column,
            the row, its sent_id where known, and the allowed classes).
    """
    ids = labeler_ids(df.columns, [head.name])
    out = np.full((len(df), len(ids)), np.nan)
    for i, k in enumerate(ids):
        col = labeler_column(k, head.name)
        out[:, i] = label_values(df, col, head)
    return out, ids


def label_values(df: pd.DataFrame, col: str, head: Head) -> np.ndarray:
    """One label column as a float array (NaN = empty cell).

    Raises:
        ValueError: a cell holds something other than one of the head's classes (names the column,
            the 1-based row, its sent_id where known, how many such cells, and the allowed classes).
    """
    raw = df[col]
    numeric = pd.to_numeric(raw, errors="coerce")
    values = numeric.astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    bad = (numeric.isna().to_numpy() & raw.notna().to_numpy() & (raw.astype(str).str.strip() != "").to_numpy()) | (
        ~np.isnan(values) & ~np.isin(values, head.values)
    )
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        where = f"row {row + 1}"
        if "sent_id" in df.columns:
            where += f" (sent_id {df['sent_id'].iloc[row]!r})"
        value = raw.iloc[row]
        value = value.item() if isinstance(value, np.generic) else value
        raise ValueError(
            f"column {col!r} has value {value!r} at {where} ({int(bad.sum())} such cells); "
            f"head {head.name!r} allows {head.values}"
        )
    return values


def long_labels(matrix: np.ndarray, ids: Sequence[int]) -> pd.DataFrame:
    """The long table of a rated matrix: one row per rated cell.

    Args:
        matrix: (n_rows, n_labelers) floats, NaN = not rated (as from `rated_matrix`).
        ids: the labeler number of each matrix column.

    Returns:
        DataFrame with columns task (row position), worker (labeler number k), label (int),
        ordered by task then worker.
    """
    rows, cols = np.nonzero(~np.isnan(matrix))
    return pd.DataFrame(
        {
            "task": rows.astype(np.int64),
            "worker": np.asarray(ids, dtype=np.int64)[cols],
            "label": matrix[rows, cols].astype(np.int64),
        }
    )


def _heads_without_labelers(df: pd.DataFrame, schema: Schema) -> list[str]:
    return [h.name for h in schema if not labeler_ids(df.columns, [h.name])]


def resolve_final_labels(df: pd.DataFrame, schema: Schema, *, method: str = "opela", seed: int = 0) -> pd.DataFrame:
    """Fills the final-label columns of an utterance table from its labelers' columns.

    Every row with at least one labeler's label is resolved, pause rows included (the released
    final labels cover them too, and their (a) items count towards R and U).

    Args:
        df: utterance table with `labeler{k}_{head}` columns for every head of the schema.
        schema: the heads to resolve.
        method: opela, opela-weighted, majority or dawid-skene.
        seed: seeds the random fallbacks of opela and majority.

    Returns:
        A copy of `df` whose `labeler_{head}` columns (Int64, <NA> where no labeler rated) hold the
        resolved labels; an existing column keeps its place, a new one is appended. All other
        columns are unchanged.

    Raises:
        ValueError: unknown method, a head without any labeler columns, or a label outside a head's
            classes.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; allowed: {list(METHODS)}")
    missing = _heads_without_labelers(df, schema)
    if missing:
        raise ValueError(f"no labeler{{k}}_{{head}} columns for head(s) {missing}: nothing to resolve them from")
    out = df.copy()
    for head in schema:
        out[final_column(head.name)] = _resolve_head(df, head, method, seed)
    return out


def _resolve_head(df: pd.DataFrame, head: Head, method: str, seed: int) -> pd.arrays.IntegerArray:
    matrix, ids = rated_matrix(df, head)
    values = np.zeros(len(df), dtype=np.int64)
    mask = np.ones(len(df), dtype=bool)
    long = long_labels(matrix, ids)
    if len(long):
        pred = make_aggregator(method, seed=seed).fit_predict(long, head.n_classes)
        values[pred.index.to_numpy()] = pred.to_numpy()
        mask[pred.index.to_numpy()] = False
    return pd.arrays.IntegerArray(values, mask)


def all_different_mask(matrix: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Which items have at least three labels, and which of those have no two labels alike.

    Args:
        matrix: (n_rows, n_labelers) floats, NaN = not rated, values 0..n_classes-1.
        n_classes: number of classes K.

    Returns:
        (eligible, all_different): two bool arrays of length n_rows.
    """
    counts = np.stack([(matrix == c).sum(axis=1) for c in range(n_classes)], axis=1)
    eligible = counts.sum(axis=1) >= 3
    return eligible, eligible & (counts.max(axis=1, initial=0) <= 1)


def compare_with_final(
    df: pd.DataFrame, schema: Schema, *, methods: Sequence[str] = METHODS, seed: int = 0
) -> pd.DataFrame:
    """How well each method reproduces the final labels already in the table.

    Args:
        df: utterance table with `labeler{k}_{head}` and `labeler_{head}` columns for every head.
        schema: the heads to compare.
        methods: method names (see `METHODS`).
        seed: seeds the random fallbacks.

    Returns:
        DataFrame, one row per head x method (heads in schema order, methods in the given order),
        columns: head, method, n_items (rows with both a final and a resolved label), agreement
        (share of those that match; NaN when n_items is 0), n_all_different (of those, rows with at
        least three labels, no two alike), agreement_all_different (share matching among them).

    Raises:
        ValueError: unknown method, a head without final or labeler columns, a bad label value.
    """
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; allowed: {list(METHODS)}")
    no_final = [h.name for h in schema if final_column(h.name) not in df.columns]
    if no_final:
        raise ValueError(f"no final-label column(s) {[final_column(h) for h in no_final]} to compare with")
    finals = {h.name: label_values(df, final_column(h.name), h) for h in schema}
    resolved = {m: resolve_final_labels(df, schema, method=m, seed=seed) for m in methods}
    rows = []
    for head in schema:
        final = finals[head.name]
        _, all_diff = all_different_mask(rated_matrix(df, head)[0], head.n_classes)
        for m in methods:
            got = resolved[m][final_column(head.name)].to_numpy(dtype=float, na_value=np.nan)
            both = ~np.isnan(final) & ~np.isnan(got)
            match = both & (final == got)
            n, n_diff = int(both.sum()), int((both & all_diff).sum())
            rows.append(
                {
                    "head": head.name,
                    "method": m,
                    "n_items": n,
                    "agreement": match.sum() / n if n else np.nan,
                    "n_all_different": n_diff,
                    "agreement_all_different": (match & all_diff).sum() / n_diff if n_diff else np.nan,
                }
            )
    return pd.DataFrame(rows, columns=["head", "method", "n_items", "agreement", "n_all_different", "agreement_all_different"])
