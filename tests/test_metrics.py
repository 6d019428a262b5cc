"""Metrics: hand-computed values on a tiny table, and agreement with scikit-learn / SciPy."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import jensenshannon
from sklearn import metrics as skm

from psyattrs.experiments import metrics as M
from psyattrs.schema import Head, Schema

SCHEMA = Schema(
    name="tiny",
    heads=(
        Head("b", {0: "no", 1: "yes"}),
        Head("s", {0: "none", 1: "some", 2: "much"}, ordinal=True),
    ),
)
NA = pd.NA


def _table() -> pd.DataFrame:
    """Six sentences of one conversation; row 5 is a pause, row 4 has labels from one labeler only."""
    return pd.DataFrame(
        {
            "doc_id": ["d1"] * 6,
            "is_pause": [False, False, False, False, False, True],
            "text": ["안녕하세요", "네 반가워요", "오늘 뭐 했어요?", "그냥 집에 있었어요 ㅋㅋ", "아하", "(1시간 후)"],
            "labeler_b": pd.array([1, 0, 1, 1, NA, 0], dtype="Int64"),
            "labeler1_b": pd.array([1, 0, 1, 1, 1, 0], dtype="Int64"),
            "labeler2_b": pd.array([1, 0, 1, 0, NA, 0], dtype="Int64"),
            "labeler3_b": pd.array([0, 0, 1, 1, NA, 0], dtype="Int64"),
            "true_b": pd.array([1, 1, 1, 0, 0, 1], dtype="Int64"),
            "labeler_s": pd.array([0, 1, 2, 1, 2, 0], dtype="Int64"),
            "labeler1_s": pd.array([0, 1, 2, 1, 2, 0], dtype="Int64"),
            "labeler2_s": pd.array([0, 1, 1, 1, 2, 0], dtype="Int64"),
            "labeler3_s": pd.array([1, 2, 2, 0, 2, 0], dtype="Int64"),
        }
    )


PROBA_B = np.array([[0.2, 0.8], [0.6, 0.4], [0.1, 0.9], [0.7, 0.3], [0.5, 0.5], [0.9, 0.1]])
PROBA_S = np.array(
    [[0.7, 0.2, 0.1], [0.2, 0.5, 0.3], [0.1, 0.3, 0.6], [0.3, 0.4, 0.3], [0.2, 0.2, 0.6], [1.0, 0.0, 0.0]]
)


def test_binary_head_hand_computed():
    # evaluated rows 0..3 (4 has no final label, 5 is a pause): y = 1 0 1 1, predicted = 1 0 1 0
    got = M.score_head(_table(), SCHEMA["b"], PROBA_B)
    assert got["accuracy"] == pytest.approx(0.75)
    assert got["macro_f1"] == pytest.approx((0.8 + 2 / 3) / 2)  # F1(1) = 0.8, F1(0) = 2/3
    assert got["kappa"] == pytest.approx(0.5)  # po 0.75, pe 0.5
    assert got["balanced_accuracy"] == pytest.approx((1 + 2 / 3) / 2)
    # rarer class is 0 (one row); ranked by P(0): row 3 (0.7, wrong), row 1 (0.6, right) -> AP 1/2
    assert got["average_precision"] == pytest.approx(0.5)
    # every row alone in its bin: |1-.8| + |1-.6| + |1-.9| + |0-.7| over 4
    assert got["ece"] == pytest.approx((0.2 + 0.4 + 0.1 + 0.7) / 4)
    # soft rows 0..4 (row 4 has one labeler): labelers' shares of class 1: 2/3, 0, 1, 2/3, 1
    ce = [
        -(1 / 3 * math.log(0.2) + 2 / 3 * math.log(0.8)),
        -math.log(0.6),
        -math.log(0.9),
        -(1 / 3 * math.log(0.7) + 2 / 3 * math.log(0.3)),
        -math.log(0.5),
    ]
    assert got["soft_ce"] == pytest.approx(sum(ce) / 5)
    # truth on rows 0..4: predicted 1 0 1 0 0 (a tie goes to class 0) vs truth 1 1 1 0 0
    assert got["truth_accuracy"] == pytest.approx(0.8)
    assert "kappa_quadratic" not in got


def test_jsd_agrees_with_scipy_and_is_zero_for_the_same_distribution():
    dist = M.labeler_distribution(_table(), SCHEMA["b"])[:5]
    expected = np.mean([jensenshannon(p, q, base=2) ** 2 for p, q in zip(dist, PROBA_B[:5])])
    assert M.jensen_shannon(dist, PROBA_B[:5]) == pytest.approx(expected)
    assert M.jensen_shannon(dist, dist) == pytest.approx(0.0, abs=1e-12)
    assert M.jensen_shannon(np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]])) == pytest.approx(1.0)


def test_labeler_distribution_counts_only_present_labels_and_rejects_bad_values():
    dist = M.labeler_distribution(_table(), SCHEMA["b"])
    np.testing.assert_allclose(dist[0], [1 / 3, 2 / 3])
    np.testing.assert_allclose(dist[4], [0.0, 1.0])  # one labeler only
    bad = _table().assign(labeler2_b=pd.array([1, 0, 3, 0, NA, 0], dtype="Int64"))
    with pytest.raises(ValueError, match=r"labeler2_b.*\[3\.0\].*\[0, 1\]"):
        M.labeler_distribution(bad, SCHEMA["b"])


def test_ordinal_head_agrees_with_sklearn():
    table = _table()
    got = M.score_head(table, SCHEMA["s"], PROBA_S)
    y = np.array([0, 1, 2, 1, 2])  # non-pause rows
    pred = PROBA_S[:5].argmax(axis=1)
    assert got["macro_f1"] == pytest.approx(skm.f1_score(y, pred, average="macro"))
    assert got["accuracy"] == pytest.approx(skm.accuracy_score(y, pred))
    assert got["kappa"] == pytest.approx(skm.cohen_kappa_score(y, pred))
    assert got["kappa_quadratic"] == pytest.approx(skm.cohen_kappa_score(y, pred, weights="quadratic"))
    assert "average_precision" not in got and "balanced_accuracy" not in got
    assert "truth_accuracy" not in got  # no true_s column


def test_explicit_predictions_override_argmax():
    # a model with tuned thresholds predicts class 1 everywhere although P(1) < 0.5 on some rows
    got = M.score_head(_table(), SCHEMA["b"], PROBA_B, predicted=np.ones(6, dtype=int))
    assert got["accuracy"] == pytest.approx(0.75)
    assert got["ece"] == pytest.approx(0.35)  # calibration still reads the probabilities


def test_random_agreement_with_sklearn_on_larger_data():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 300)
    proba = rng.dirichlet([1, 1], 300)
    table = pd.DataFrame({"doc_id": "d", "is_pause": False, "labeler_b": pd.array(y, dtype="Int64")})
    got = M.score_head(table, SCHEMA["b"], proba)
    pred = proba.argmax(axis=1)
    assert got["balanced_accuracy"] == pytest.approx(skm.balanced_accuracy_score(y, pred))
    rare = int(np.argmin(np.bincount(y)))
    assert got["average_precision"] == pytest.approx(skm.average_precision_score(y == rare, proba[:, rare]))
    assert np.isnan(got["soft_ce"])  # no per-labeler columns: undefined, not zero


def test_ece_of_a_perfectly_calibrated_bin_is_zero_and_a_known_gap():
    y = np.array([0, 0, 0, 1])  # confidence 0.75 for class 0 everywhere: accuracy 0.75
    proba = np.tile([0.75, 0.25], (4, 1))
    assert M.expected_calibration_error(y, proba) == pytest.approx(0.0)
    assert M.expected_calibration_error(np.array([1, 1]), np.tile([0.75, 0.25], (2, 1))) == pytest.approx(0.75)
    bins = M.calibration_bins(y, proba)
    assert bins["count"].sum() == 4 and bins.loc[7, "count"] == 4  # (0.7, 0.8]


def test_undefined_metrics_are_nan():
    table = _table().assign(labeler_b=pd.array([1, 1, 1, 1, NA, 0], dtype="Int64"))
    got = M.score_head(table, SCHEMA["b"], np.tile([0.1, 0.9], (6, 1)))
    assert np.isnan(got["average_precision"])  # the rarer class 0 has no test row
    assert np.isnan(got["kappa"])  # one class in truth and prediction
    assert got["accuracy"] == 1.0


def test_floor_is_the_training_prior():
    train = _table().assign(labeler_b=pd.array([1, 1, 1, 0, NA, 0], dtype="Int64"))
    prior = M.class_prior(train, SCHEMA)
    # final labels 1 1 1 0 (the pause's 0 excluded), row 4 has none: its one labeler says 1;
    # counts 1, 4 plus one each
    np.testing.assert_allclose(prior["b"], [2 / 7, 5 / 7])
    labelers_only = train.drop(columns=["labeler_b"])  # row shares of class 1: 2/3, 0, 1, 2/3, 1
    np.testing.assert_allclose(M.class_prior(labelers_only, SCHEMA)["b"], [(1 + 5 / 3) / 7, (1 + 10 / 3) / 7])
    floor = M.floor_scores(_table(), SCHEMA, prior)["b"]
    assert floor["accuracy"] == pytest.approx(0.75)  # always predicts 1; y = 1 0 1 1
    assert floor["macro_f1"] == pytest.approx((6 / 7 + 0) / 2)
    assert floor["kappa"] == pytest.approx(0.0)


def test_ceiling_scores_each_labeler_against_the_others_majority():
    ceiling = M.ceiling_scores(_table(), SCHEMA)["b"]
    # labeler 1: rows 1, 2 scored (others tie on 0 and 3), all right -> 1.0 everywhere
    # labeler 2: rows 1, 2, 3: gives 0 1 0 against 0 1 1 -> acc 2/3, F1 2/3, kappa 0.4, bal 0.75
    # labeler 3: rows 0, 1, 2: gives 0 0 1 against 1 0 1 -> the same values
    assert ceiling["accuracy"] == pytest.approx((1 + 2 / 3 + 2 / 3) / 3)
    assert ceiling["macro_f1"] == pytest.approx((1 + 2 / 3 + 2 / 3) / 3)
    assert ceiling["kappa"] == pytest.approx((1 + 0.4 + 0.4) / 3)
    assert ceiling["balanced_accuracy"] == pytest.approx((1 + 0.75 + 0.75) / 3)
    one_labeler = _table()[["doc_id", "is_pause", "labeler_b", "labeler1_b"]]
    assert np.isnan(M.ceiling_scores(one_labeler, Schema("x", (SCHEMA["b"],)))["b"]["accuracy"])


def test_score_split_names_and_means():
    table = _table()
    prior = M.class_prior(table, SCHEMA)
    got = M.score_split(table, SCHEMA, {"b": PROBA_B, "s": PROBA_S}, prior=prior)
    for name in ("test_macro_f1_b", "test_macro_f1_s", "test_macro_f1_mean", "test_accuracy_b", "test_kappa_s",
                 "test_soft_ce_b", "test_jsd_s", "test_ece_b", "test_average_precision_b",
                 "test_balanced_accuracy_b", "test_truth_accuracy_b", "test_kappa_quadratic_s",
                 "test_floor_macro_f1_b", "test_floor_macro_f1_mean", "test_ceiling_macro_f1_s",
                 "test_ceiling_macro_f1_mean"):
        assert name in got, name
    assert "test_average_precision_s" not in got and "test_truth_accuracy_s" not in got
    assert got["test_macro_f1_mean"] == pytest.approx((got["test_macro_f1_b"] + got["test_macro_f1_s"]) / 2)
    assert got["test_average_precision_mean"] == got["test_average_precision_b"]  # binary heads only
    with pytest.raises(ValueError, match=r"heads \['s'\]"):
        M.score_split(table, SCHEMA, {"b": PROBA_B})
    with pytest.raises(ValueError, match=r"shape \(6, 2\), expected \(6, 3\)"):
        M.score_split(table, SCHEMA, {"b": PROBA_B, "s": PROBA_B})


def test_summary_table_and_text_rendering():
    table = _table()
    metrics = M.score_split(table, SCHEMA, {"b": PROBA_B, "s": PROBA_S}, prior=M.class_prior(table, SCHEMA))
    summary = M.summary_table(metrics, SCHEMA)
    assert list(summary["head"]) == ["b", "s", "mean"]
    assert summary.loc[0, "macro_f1"] == pytest.approx(metrics["test_macro_f1_b"])
    assert np.isnan(summary.loc[1, "average_precision"])
    text = M.format_table(summary)
    lines = text.splitlines()
    assert lines[0].split()[:4] == ["head", "macro_f1", "floor_macro_f1", "labeler_macro_f1"]
    assert lines[1].split()[1] == f"{metrics['test_macro_f1_b']:.3f}" and "-" in lines[2].split()
    assert summary.loc[0, "labeler_macro_f1"] == pytest.approx(metrics["test_ceiling_macro_f1_b"])
    # the LeWiDi tasks' metrics beside ours
    for column in ("micro_f1", "manhattan", "floor_manhattan"):
        assert summary.loc[0, column] == pytest.approx(metrics[f"test_{column}_b"])
        assert summary.loc[2, column] == pytest.approx(metrics[f"test_{column}_mean"])
    assert {"micro_f1", "manhattan", "floor_manhattan"} <= set(lines[0].split())
    legend = text.split("\n\n", 1)[1]
    assert "one labeler's labels scored against the majority of the other labelers" in legend
    assert "It is not a ceiling" in legend and "can score above any single labeler" in legend
    assert M.format_table(summary, legend=False).count("\n") == len(summary)


def test_reports_and_confusion_exclude_pauses_and_unlabelled_rows():
    table = _table()
    predicted = {"b": PROBA_B.argmax(axis=1), "s": PROBA_S.argmax(axis=1)}
    cm = M.confusion(table, SCHEMA["b"], predicted["b"])
    np.testing.assert_array_equal(cm, [[1, 0], [1, 2]])
    reports = M.classification_reports(table, SCHEMA, predicted)
    assert "0 no" in reports["b"] and "2 much" in reports["s"]


def test_summary_table_marks_a_one_class_head_and_soft_ce_worse_than_the_floor():
    """Issue 25: a head whose scored rows hold one class scores 1.000 beside a floor of 1.000 and
    lifts the mean; a model whose soft CE is above the floor's went unflagged."""
    table = _table()
    table["labeler_b"] = pd.array([1, 1, 1, 1, NA, 0], dtype="Int64")  # scored rows 0..3: class 1 only
    always_one = np.tile([0.01, 0.99], (6, 1))  # confident and right on the final labels, poor on the labelers'
    metrics = M.score_split(table, SCHEMA, {"b": always_one, "s": PROBA_S}, prior=M.class_prior(table, SCHEMA))
    assert metrics["test_classes_b"] == 1 and metrics["test_classes_s"] == 3
    assert "test_classes_mean" not in metrics
    summary = M.summary_table(metrics, SCHEMA).set_index("head")
    assert summary.loc["b", "macro_f1"] == 1.0 and summary.loc["b", "floor_macro_f1"] == 1.0
    assert M.NOTE_ONE_CLASS in summary.loc["b", "note"]
    assert summary.loc["b", "soft_ce"] > summary.loc["b", "floor_soft_ce"]
    assert M.NOTE_SOFT_CE in summary.loc["b", "note"] and M.NOTE_ONE_CLASS not in summary.loc["s", "note"]
    assert f"macro_f1 without: {metrics['test_macro_f1_s']:.3f}" in summary.loc["mean", "note"]
    text = M.format_table(summary.reset_index())
    assert text.splitlines()[0].split()[-1] == "note" and "'one class' = " in text
    # nothing to note: no note column
    plain = M.score_split(_table(), SCHEMA, {"b": PROBA_B, "s": PROBA_S})
    assert "note" not in M.format_table(M.summary_table(plain, SCHEMA)).splitlines()[0]
