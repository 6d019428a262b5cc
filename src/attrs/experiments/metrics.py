"""Every metric of the project in one place: per head, then the mean over heads.

Which rows count (always excluding pause rows, which are context only):

- against the final labels (`labeler_{head}`): macro-F1, micro-F1 (the LeWiDi tasks' hard score;
  equal to accuracy with one label per row), accuracy, Cohen's kappa (plus quadratic
  kappa on ordinal heads), expected calibration error and, on binary heads, the average precision
  of the rarer class and balanced accuracy: rows whose final label is present;
- against the labelers' distribution (`labeler{k}_{head}`): soft cross-entropy (`soft_ce`, the
  LeWiDi tasks' "cross-entropy", in nats), the Manhattan distance (`manhattan`, sum of absolute
  differences per row) and Jensen-Shannon divergence: rows with at least one per-labeler label;
- against the simulation's truth (`true_{head}`, synthetic corpora): truth accuracy.

A metric with no row to compute it on, or undefined on the rows there are (average precision of a
class absent from the test rows, kappa with a single class), is NaN, never a made-up number.

Metric names: `{prefix}{metric}_{head}` and `{prefix}{metric}_mean`, e.g. `test_macro_f1_empathy`,
`test_macro_f1_mean`. The majority floor (a class-prior predictor fitted on the training rows) and
the labeler reference (each labeler scored against the other labelers' majority, averaged over
labelers) are named `{prefix}floor_{metric}_{head}` and `{prefix}ceiling_{metric}_{head}`.

The `ceiling_` metrics keep their historical name but are no upper bound: they say how well one
person reproduces the others' consensus. A model is scored against the final label resolved from
all the labelers and learns that consensus from thousands of sentences, which averages out any one
labeler's slips, so it can score above a single labeler (the printed table calls the column
`labeler_macro_f1` and says so, `TABLE_LEGEND`).
"""

from __future__ import annotations

import warnings
from typing import Mapping

import numpy as np
import pandas as pd
from sklearn import metrics as skm

from psyattrs.data.table import final_column, labeler_columns, true_column
from psyattrs.schema import Head, Schema

EPS = 1e-15
ECE_BINS = 10
HARD_METRICS = ("macro_f1", "accuracy", "kappa")
MODEL_METRICS = (
    "macro_f1", "micro_f1", "accuracy", "kappa", "kappa_quadratic", "soft_ce", "manhattan", "jsd", "ece",
    "average_precision", "balanced_accuracy", "truth_accuracy",
)
CEILING_METRICS = ("macro_f1", "accuracy", "kappa", "balanced_accuracy")


# ---------------------------------------------------------------- single metrics on arrays


def macro_f1(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Unweighted mean F1 over the classes present in `y_true` or `y_pred`; NaN for no rows."""
    if len(y_true) == 0:
        return float("nan")
    return float(skm.f1_score(y_true, y_pred, average="macro", zero_division=0))


def micro_f1(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Micro-averaged F1 over the classes (the LeWiDi tasks' hard-label score); with one label per
    row it equals accuracy. NaN for no rows."""
    if len(y_true) == 0:
        return float("nan")
    return float(skm.f1_score(y_true, y_pred, average="micro", zero_division=0))


def manhattan(target: np.ndarray, proba: np.ndarray) -> float:
    """Mean over rows of sum_k |target_k - proba_k| (0 = same distribution, 2 = disjoint): the
    Manhattan distance between the annotators' and the predicted distribution; NaN for no rows."""
    if len(target) == 0:
        return float("nan")
    return float(np.mean(np.abs(np.asarray(target, dtype=float) - np.asarray(proba, dtype=float)).sum(axis=1)))


def accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Share of rows predicted right; NaN for no rows."""
    if len(y_true) == 0:
        return float("nan")
    return float(np.mean(np.asarray(y_true) == np.asarray(y_pred)))


def kappa(y_true: np.ndarray, y_pred: np.ndarray, *, weights: str | None = None) -> float:
    """Cohen's kappa (`weights` None, `linear` or `quadratic`); NaN when undefined (one class only)."""
    if len(y_true) == 0:
        return float("nan")
    if len(np.union1d(y_true, y_pred)) < 2:
        return float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value = skm.cohen_kappa_score(y_true, y_pred, weights=weights)
    return float(value)


def balanced_accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Mean recall over the classes present in `y_true`; NaN for no rows."""
    if len(y_true) == 0:
        return float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return float(skm.balanced_accuracy_score(y_true, y_pred))


def soft_cross_entropy(target: np.ndarray, proba: np.ndarray) -> float:
    """Mean over rows of -sum_k target_k * ln(proba_k) (nats), proba clipped at 1e-15; NaN for no rows.

    Args:
        target: (n, K) rows summing to 1 (the labelers' distribution).
        proba: (n, K) predicted probabilities.
    """
    if len(target) == 0:
        return float("nan")
    return float(np.mean(-np.sum(target * np.log(np.clip(proba, EPS, 1.0)), axis=1)))


def jensen_shannon(target: np.ndarray, proba: np.ndarray) -> float:
    """Mean over rows of the Jensen-Shannon divergence in bits (0 = same, 1 = disjoint); NaN for no rows."""
    if len(target) == 0:
        return float("nan")
    p = target / target.sum(axis=1, keepdims=True)
    q = np.clip(proba, 0.0, None)
    q = q / q.sum(axis=1, keepdims=True)
    m = (p + q) / 2

    def kl(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(a > 0, a * np.log2(a / np.where(b > 0, b, 1.0)), 0.0)
        return terms.sum(axis=1)

    return float(np.mean(np.clip(0.5 * kl(p, m) + 0.5 * kl(q, m), 0.0, 1.0)))


def calibration_bins(y_true: np.ndarray, proba: np.ndarray, *, bins: int = ECE_BINS) -> pd.DataFrame:
    """Top-label reliability table: equal-width confidence bins (lo, hi], the first one [0, hi].

    Returns:
        One row per bin with columns `lo`, `hi`, `count`, `confidence` (mean top probability)
        and `accuracy` (share where the top class is right); NaN for empty bins.
    """
    confidence = proba.max(axis=1) if len(proba) else np.empty(0)
    correct = (proba.argmax(axis=1) == np.asarray(y_true)) if len(proba) else np.empty(0, dtype=bool)
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.searchsorted(edges, confidence, side="left") - 1, 0, bins - 1)
    rows = []
    for b in range(bins):
        inside = which == b
        n = int(inside.sum())
        rows.append({
            "lo": edges[b], "hi": edges[b + 1], "count": n,
            "confidence": float(confidence[inside].mean()) if n else float("nan"),
            "accuracy": float(correct[inside].mean()) if n else float("nan"),
        })
    return pd.DataFrame(rows)


def expected_calibration_error(y_true: np.ndarray, proba: np.ndarray, *, bins: int = ECE_BINS) -> float:
    """Sum over confidence bins of (bin share) * |accuracy - mean confidence|; NaN for no rows."""
    if len(y_true) == 0:
        return float("nan")
    table = calibration_bins(y_true, proba, bins=bins)
    used = table[table["count"] > 0]
    return float(np.sum(used["count"] / len(y_true) * np.abs(used["accuracy"] - used["confidence"])))


def rarer_class(y_true: np.ndarray, n_classes: int = 2) -> int:
    """The class with the fewest rows in `y_true` (absent classes count 0; ties -> lowest value)."""
    counts = np.bincount(np.asarray(y_true, dtype=int), minlength=n_classes)
    return int(np.argmin(counts))


def average_precision_rare(y_true: np.ndarray, proba: np.ndarray) -> float:
    """Average precision of the rarer class of a binary head, ranked by its probability.

    NaN when there are no rows or the rarer class has no row (precision-recall undefined).
    """
    if len(y_true) == 0:
        return float("nan")
    rare = rarer_class(y_true, proba.shape[1])
    positive = np.asarray(y_true) == rare
    if not positive.any():
        return float("nan")
    return float(skm.average_precision_score(positive, proba[:, rare]))


# ---------------------------------------------------------------- rows and targets from the table


def evaluable(table: pd.DataFrame) -> np.ndarray:
    """Boolean mask of the rows that are not pauses (pauses are context only)."""
    if "is_pause" not in table:
        return np.ones(len(table), dtype=bool)
    return ~table["is_pause"].fillna(False).astype(bool).to_numpy()


def _labels(table: pd.DataFrame, column: str) -> np.ndarray:
    """A label column as float (NaN where missing), or all NaN when the column is absent."""
    if column not in table:
        return np.full(len(table), np.nan)
    return pd.to_numeric(table[column], errors="coerce").astype("Float64").to_numpy(dtype=float, na_value=np.nan)


def _check_range(values: np.ndarray, head: Head, column: str) -> None:
    present = values[~np.isnan(values)]
    bad = sorted(set(present[(present < 0) | (present >= head.n_classes) | (present != np.round(present))].tolist()))
    if bad:
        raise ValueError(f"column {column!r} holds {bad[:5]}, outside head {head.name!r}'s classes {head.values}")


def labeler_distribution(table: pd.DataFrame, head: Head) -> np.ndarray:
    """The labelers' label distribution per row: (n, K) shares, NaN rows where nobody rated.

    Raises:
        ValueError: a label outside the head's classes (names the column and values).
    """
    dist = np.zeros((len(table), head.n_classes))
    for column in labeler_columns(table.columns, head.name):
        values = _labels(table, column)
        _check_range(values, head, column)
        rated = ~np.isnan(values)
        dist[np.flatnonzero(rated), values[rated].astype(int)] += 1
    totals = dist.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):
        return np.where(totals > 0, dist / np.where(totals > 0, totals, 1), np.nan)


def _check_proba(proba: np.ndarray, n: int, head: Head) -> np.ndarray:
    proba = np.asarray(proba, dtype=float)
    if proba.shape != (n, head.n_classes):
        raise ValueError(
            f"probabilities of head {head.name!r} have shape {proba.shape}, expected ({n}, {head.n_classes})"
        )
    return proba


# ---------------------------------------------------------------- per head and per table


def score_head(
    table: pd.DataFrame, head: Head, proba: np.ndarray, predicted: np.ndarray | None = None
) -> dict[str, float]:
    """All model metrics of one head.

    Args:
        table: utterance table with `is_pause`, `labeler_{head}` and, where available,
            `labeler{k}_{head}` and `true_{head}`.
        head: the head.
        proba: (n, K) predicted class probabilities, rows aligned with `table`.
        predicted: (n,) predicted classes; None = argmax of `proba` (pass the model's own
            predictions when it uses tuned thresholds).

    Returns:
        metric -> value for the names in `MODEL_METRICS` that apply to the head
        (`kappa_quadratic` on ordinal heads, `average_precision`/`balanced_accuracy` on binary
        heads, `truth_accuracy` when `true_{head}` exists); NaN where undefined.
    """
    proba = _check_proba(proba, len(table), head)
    predicted = proba.argmax(axis=1) if predicted is None else np.asarray(predicted, dtype=int)
    keep = evaluable(table)
    final = _labels(table, final_column(head.name))
    _check_range(final, head, final_column(head.name))
    rows = keep & ~np.isnan(final)
    y, pred, p = final[rows].astype(int), predicted[rows], proba[rows]
    out = {"macro_f1": macro_f1(y, pred), "micro_f1": micro_f1(y, pred), "accuracy": accuracy(y, pred),
           "kappa": kappa(y, pred)}
    if head.ordinal:
        out["kappa_quadratic"] = kappa(y, pred, weights="quadratic")
    dist = labeler_distribution(table, head)
    soft_rows = keep & ~np.isnan(dist).any(axis=1)
    out["soft_ce"] = soft_cross_entropy(dist[soft_rows], proba[soft_rows])
    out["manhattan"] = manhattan(dist[soft_rows], proba[soft_rows])
    out["jsd"] = jensen_shannon(dist[soft_rows], proba[soft_rows])
    out["ece"] = expected_calibration_error(y, p)
    if head.is_binary:
        out["average_precision"] = average_precision_rare(y, p)
        out["balanced_accuracy"] = balanced_accuracy(y, pred)
    if true_column(head.name) in table:
        truth = _labels(table, true_column(head.name))
        truth_rows = keep & ~np.isnan(truth)
        out["truth_accuracy"] = accuracy(truth[truth_rows].astype(int), predicted[truth_rows])
    return out


def class_prior(table: pd.DataFrame, schema: Schema) -> dict[str, np.ndarray]:
    """The majority floor's model: per head, the add-one smoothed class frequencies of the
    training rows (`table`, pauses excluded). A row counts its final label; a row without one
    counts its labelers' distribution (so corpora with per-labeler labels only get a floor too).

    Returns:
        head -> (K,) array summing to 1.
    """
    keep = evaluable(table)
    prior = {}
    for head in schema:
        final = _labels(table, final_column(head.name))
        has_final = keep & ~np.isnan(final)
        counts = np.bincount(final[has_final].astype(int), minlength=head.n_classes)[: head.n_classes].astype(float)
        dist = labeler_distribution(table, head)
        soft_only = keep & ~has_final & ~np.isnan(dist).any(axis=1)
        counts += dist[soft_only].sum(axis=0) + 1.0
        prior[head.name] = counts / counts.sum()
    return prior


def floor_scores(table: pd.DataFrame, schema: Schema, prior: Mapping[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """The majority floor on `table`: every row gets the prior, the predicted class is its argmax.

    Returns:
        head -> metric -> value, as `score_head`.
    """
    out = {}
    for head in schema:
        proba = np.tile(np.asarray(prior[head.name], dtype=float), (len(table), 1))
        out[head.name] = score_head(table, head, proba)
    return out


def _others_majority(matrix: np.ndarray, j: int, n_classes: int) -> np.ndarray:
    """Per row, the strict mode of the labels of every labeler but j; NaN where no strict mode."""
    counts = np.zeros((len(matrix), n_classes))
    for k in range(matrix.shape[1]):
        if k == j:
            continue
        rated = ~np.isnan(matrix[:, k])
        counts[np.flatnonzero(rated), matrix[rated, k].astype(int)] += 1
    top = counts.max(axis=1)
    unique_top = (counts == top[:, None]).sum(axis=1) == 1
    return np.where((top > 0) & unique_top, counts.argmax(axis=1), np.nan)


def ceiling_scores(table: pd.DataFrame, schema: Schema) -> dict[str, dict[str, float]]:
    """The human ceiling: each labeler scored against the majority of the other labelers.

    For each head and each labeler j, the rows (non-pause) where j rated and the other labelers'
    labels have a strict mode; j's labels are scored with `CEILING_METRICS` against that mode; the
    scores are averaged over labelers (NaN-skipping). With fewer than two labelers the ceiling is NaN.

    Returns:
        head -> metric -> value (`macro_f1`, `accuracy`, `kappa`; `balanced_accuracy` on binary heads).
    """
    keep = evaluable(table)
    out = {}
    for head in schema:
        columns = labeler_columns(table.columns, head.name)
        names = [m for m in CEILING_METRICS if m != "balanced_accuracy" or head.is_binary]
        per_labeler: dict[str, list[float]] = {m: [] for m in names}
        if len(columns) >= 2:
            matrix = np.column_stack([_labels(table, c) for c in columns])
            for c, values in zip(columns, matrix.T):
                _check_range(values, head, c)
            for j in range(len(columns)):
                reference = _others_majority(matrix, j, head.n_classes)
                rows = keep & ~np.isnan(matrix[:, j]) & ~np.isnan(reference)
                if not rows.any():
                    continue
                y, pred = reference[rows].astype(int), matrix[rows, j].astype(int)
                scores = {"macro_f1": macro_f1(y, pred), "accuracy": accuracy(y, pred), "kappa": kappa(y, pred),
                          "balanced_accuracy": balanced_accuracy(y, pred)}
                for m in names:
                    per_labeler[m].append(scores[m])
        out[head.name] = {m: _nanmean(v) for m, v in per_labeler.items()}
    return out


def _nanmean(values) -> float:
    values = np.asarray(list(values), dtype=float)
    values = values[~np.isnan(values)]
    return float(values.mean()) if len(values) else float("nan")


def name_metrics(per_head: Mapping[str, Mapping[str, float]], *, prefix: str) -> dict[str, float]:
    """Flattens head -> metric -> value into `{prefix}{metric}_{head}` plus `{prefix}{metric}_mean`
    (the NaN-skipping mean over the heads that have the metric)."""
    out: dict[str, float] = {}
    metrics: dict[str, list[float]] = {}
    for head, values in per_head.items():
        for metric, value in values.items():
            out[f"{prefix}{metric}_{head}"] = float(value)
            metrics.setdefault(metric, []).append(value)
    for metric, values in metrics.items():
        out[f"{prefix}{metric}_mean"] = _nanmean(values)
    return out


def score_split(
    table: pd.DataFrame,
    schema: Schema,
    proba: Mapping[str, np.ndarray],
    *,
    predicted: Mapping[str, np.ndarray] | pd.DataFrame | None = None,
    prior: Mapping[str, np.ndarray] | None = None,
    prefix: str = "test_",
) -> dict[str, float]:
    """Model, floor and ceiling metrics of one split, named for MLflow.

    Args:
        table: the split's utterance table.
        schema: its heads.
        proba: head -> (n, K) predicted probabilities.
        predicted: head -> (n,) predicted classes (a dict or a DataFrame with head columns);
            None = argmax of `proba`.
        prior: the floor's class prior (`class_prior` of the training rows); None = no floor.
        prefix: prepended to every name.

    Returns:
        `{prefix}{metric}_{head}`, `{prefix}{metric}_mean`, and the same with `floor_` and
        `ceiling_` after the prefix.
    """
    missing = [h for h in schema.head_names if h not in proba]
    if missing:
        raise ValueError(f"no predicted probabilities for heads {missing}; heads: {schema.head_names}")
    model = {}
    for head in schema:
        pred = None
        if predicted is not None:
            pred = np.asarray(predicted[head.name], dtype=int)
        model[head.name] = score_head(table, head, proba[head.name], pred)
    out = name_metrics(model, prefix=prefix)
    if prior is not None:
        out.update(name_metrics(floor_scores(table, schema, prior), prefix=f"{prefix}floor_"))
    out.update(name_metrics(ceiling_scores(table, schema), prefix=f"{prefix}ceiling_"))
    for head in schema:  # no mean: how many classes the split holds is a fact per head, not a score
        out[f"{prefix}classes_{head.name}"] = float(split_classes(table, head))
    return out


def split_classes(table: pd.DataFrame, head: Head) -> int:
    """How many distinct final labels of `head` the scored rows (non-pause, final label present) hold.

    With one class, every hard metric is trivial: the floor (the training prior's majority class)
    scores macro-F1 1.000 when that class is the training majority, and so does a model that always
    predicts it; `summary_table` marks such a head.
    """
    final = _labels(table, final_column(head.name))
    rows = evaluable(table) & ~np.isnan(final)
    return int(len(np.unique(final[rows])))


def classification_reports(
    table: pd.DataFrame, schema: Schema, predicted: Mapping[str, np.ndarray] | pd.DataFrame
) -> dict[str, str]:
    """Per head, scikit-learn's text classification report on the rows with a final label."""
    keep = evaluable(table)
    out = {}
    for head in schema:
        final = _labels(table, final_column(head.name))
        rows = keep & ~np.isnan(final)
        if not rows.any():
            out[head.name] = f"head {head.name}: no test row has a final label\n"
            continue
        y = final[rows].astype(int)
        pred = np.asarray(predicted[head.name], dtype=int)[rows]
        out[head.name] = skm.classification_report(
            y, pred, labels=head.values, target_names=[f"{v} {head.classes[v]}" for v in head.values],
            zero_division=0, digits=3,
        )
    return out


def confusion(table: pd.DataFrame, head: Head, predicted: np.ndarray) -> np.ndarray:
    """(K, K) counts, rows = final label, columns = predicted class, over non-pause labelled rows."""
    final = _labels(table, final_column(head.name))
    rows = evaluable(table) & ~np.isnan(final)
    if not rows.any():
        return np.zeros((head.n_classes, head.n_classes), dtype=np.int64)
    return skm.confusion_matrix(final[rows].astype(int), np.asarray(predicted, dtype=int)[rows], labels=head.values)


TABLE_LEGEND: dict[str, str] = {
    "floor_": "floor_*: a predictor of the training split's class prior (what a model must beat)",
    "labeler_macro_f1": (
        "labeler_macro_f1: one labeler's labels scored against the majority of the other labelers, averaged "
        "over labelers (how well a single person reproduces the others' consensus). It is not a ceiling: the "
        "model is scored against the final label resolved from all the labelers and learns their consensus "
        "from many sentences, so it can score above any single labeler"
    ),
}
TABLE_LEGEND["note"] = (
    "note: 'one class' = the head's scored rows hold a single class, so its hard scores (and the floor's) say "
    "nothing and lift the mean ('mean' then gives the mean macro-F1 without those heads); 'soft CE > floor' = the "
    "model's probabilities fit the labelers' distribution worse than the training prior does"
)
NOTE_ONE_CLASS = "one class"
NOTE_SOFT_CE = "soft CE > floor"
# summary column -> metric name (after the prefix); the labeler reference is logged as `ceiling_`
_SUMMARY_METRIC = {"labeler_macro_f1": "ceiling_macro_f1"}


def _notes(row: Mapping[str, float], classes: float) -> list[str]:
    notes = []
    if classes == 1:
        notes.append(NOTE_ONE_CLASS)
    if row["soft_ce"] > row["floor_soft_ce"]:  # False when either is NaN
        notes.append(NOTE_SOFT_CE)
    return notes


def summary_table(metrics: Mapping[str, float], schema: Schema, *, prefix: str = "test_") -> pd.DataFrame:
    """The per-head table printed after a run: model beside the floor and one labeler's score.

    Returns:
        One row per head plus `mean`, columns `head`, `macro_f1`, `floor_macro_f1`,
        `labeler_macro_f1` (the logged `ceiling_macro_f1`, see `TABLE_LEGEND`), `micro_f1`,
        `accuracy`, `kappa`, `soft_ce`, `floor_soft_ce`, `manhattan`, `floor_manhattan`,
        `average_precision`, `floor_average_precision` (NaN where a metric does not apply) and
        `note` (text, empty when nothing to say): `NOTE_ONE_CLASS` for a head whose scored rows hold
        one class (from the logged `{prefix}classes_{head}`; runs logged before it have no such
        note), `NOTE_SOFT_CE` where the model's soft CE is above the floor's; on the mean row, the
        mean macro-F1 without the one-class heads when there are some.
    """
    columns = ["macro_f1", "floor_macro_f1", "labeler_macro_f1", "micro_f1", "accuracy", "kappa",
               "soft_ce", "floor_soft_ce", "manhattan", "floor_manhattan", "average_precision",
               "floor_average_precision"]
    rows = []
    one_class = []
    for head in [*schema.head_names, "mean"]:
        row = {"head": head}
        for column in columns:
            row[column] = metrics.get(f"{prefix}{_SUMMARY_METRIC.get(column, column)}_{head}", float("nan"))
        notes = _notes(row, metrics.get(f"{prefix}classes_{head}", float("nan")))
        if NOTE_ONE_CLASS in notes:
            one_class.append(row)
        elif head == "mean" and one_class:
            others = [r["macro_f1"] for r in rows if all(r is not o for o in one_class)]
            notes.insert(0, f"{len(one_class)} one-class head(s) in it; macro_f1 without: {_nanmean(others):.3f}")
        row["note"] = "; ".join(notes)
        rows.append(row)
    return pd.DataFrame(rows, columns=["head", *columns, "note"])


def format_table(table: pd.DataFrame, *, legend: bool = True) -> str:
    """Plain-text rendering of `summary_table` (3 decimals, `-` for NaN), one line per row; with
    `legend`, followed by a line per `TABLE_LEGEND` entry whose column is in the table."""
    if "note" in table and not table["note"].astype(str).str.len().any():
        table = table.drop(columns="note")  # nothing to note: no empty column
    header = [str(c) for c in table.columns]
    body = [[f"{v:.3f}" if isinstance(v, float) and not np.isnan(v) else ("-" if isinstance(v, float) else str(v))
             for v in row] for row in table.itertuples(index=False)]
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(header)]
    left = {0, *(i for i, h in enumerate(header) if h == "note")}  # text columns read left-aligned

    def line(cells: list[str]) -> str:
        return "  ".join(v.ljust(w) if i in left else v.rjust(w) for i, (v, w) in enumerate(zip(cells, widths))).rstrip()

    lines = [line(header), *(line(r) for r in body)]
    notes = [text for key, text in TABLE_LEGEND.items() if any(h.startswith(key) for h in header)]
    if legend and notes:
        lines += ["", *notes]
    return "\n".join(lines)
