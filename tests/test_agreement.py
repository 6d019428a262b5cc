"""Agreement figures: alpha against the krippendorff package, Fleiss by hand, corpus summary."""

from __future__ import annotations

import json

import krippendorff
import numpy as np
import pandas as pd
import pytest

from psyattrs.labels.agreement import (
    class_balance,
    corpus_agreement,
    fleiss_kappa,
    krippendorff_alpha,
    labeler_agreement,
    modal_rater_items,
)
from psyattrs.schema import Head, Schema

nan = np.nan


def random_ratings(seed: int, n_items: int = 60, n_raters: int = 4, k: int = 5, missing: float = 0.3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, k, n_items)
    ratings = np.where(rng.random((n_items, n_raters)) < 0.6, truth[:, None], rng.integers(0, k, (n_items, n_raters)))
    ratings = ratings.astype(float)
    ratings[rng.random(ratings.shape) < missing] = nan
    return ratings


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_alpha_matches_the_krippendorff_package(level, seed):
    ratings = random_ratings(seed, k=2 if seed == 3 else 5)
    expected = krippendorff.alpha(reliability_data=ratings.T, level_of_measurement=level)
    assert krippendorff_alpha(ratings, level=level) == pytest.approx(expected, abs=1e-12)


def test_alpha_ordinal_with_an_unused_middle_class_matches_the_package():
    ratings = np.array([[0, 0, 4], [4, 4, nan], [0, 1, 1], [1, 4, 4], [nan, 0, 1]], dtype=float)
    expected = krippendorff.alpha(reliability_data=ratings.T, level_of_measurement="ordinal")
    assert krippendorff_alpha(ratings, level="ordinal") == pytest.approx(expected, abs=1e-12)


def test_alpha_by_hand():
    # two raters, items (0,0), (1,1), (0,1): coincidences o00 = o11 = 2, o01 = o10 = 1; n0 = n1 = 3
    # alpha = 1 - (n - 1) * D_o / sum n_c n_k = 1 - 5 * 2 / 18 = 4/9; a lone rating does not count
    ratings = np.array([[0, 0], [1, 1], [0, 1], [1, nan]])
    assert krippendorff_alpha(ratings) == pytest.approx(4 / 9)


def test_alpha_undefined_cases_are_nan_and_bad_level_is_named():
    assert np.isnan(krippendorff_alpha(np.array([[1, 1], [1, 1.0]])))  # a single value
    assert np.isnan(krippendorff_alpha(np.array([[0, nan], [nan, 1]])))  # nothing pairable
    with pytest.raises(ValueError, match=r"unknown level 'ratio'; allowed: \['nominal', 'ordinal', 'interval'\]"):
        krippendorff_alpha(np.zeros((2, 2)), level="ratio")
    with pytest.raises(ValueError, match="2-D"):
        krippendorff_alpha(np.zeros(3))


def test_fleiss_by_hand():
    # P_i = 1, 1/3, 1/3, 1 -> P = 2/3; p = (1/2, 1/2) -> Pe = 1/2; kappa = (2/3 - 1/2) / (1/2) = 1/3
    ratings = np.array([[0, 0, 0], [0, 0, 1], [1, 1, 0], [1, 1, 1]], dtype=float)
    assert fleiss_kappa(ratings) == pytest.approx(1 / 3)
    # items with another number of raters are left out: kappa is unchanged
    with_pairs = np.vstack([ratings, [[0, 1, nan], [nan, 1, 0]]])
    assert fleiss_kappa(with_pairs) == pytest.approx(1 / 3)
    mask, m = modal_rater_items(with_pairs)
    assert m == 3 and mask.tolist() == [True] * 4 + [False] * 2


def test_fleiss_textbook_example():
    # Fleiss (1971) as worked on Wikipedia: 10 items, 14 raters, 5 categories, kappa = 0.210
    counts = [
        [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
    ]  # fmt: skip
    ratings = np.array([np.repeat(np.arange(5), row) for row in counts], dtype=float)
    assert fleiss_kappa(ratings) == pytest.approx(0.20993, abs=1e-5)


def test_fleiss_modal_ties_go_to_more_raters_and_undefined_is_nan():
    ratings = np.array([[0, 1, nan], [1, 1, nan], [0, 0, 1], [1, 1, 1]], dtype=float)
    assert modal_rater_items(ratings)[1] == 3
    assert np.isnan(fleiss_kappa(np.array([[1, 1], [1, 1.0]])))
    assert np.isnan(fleiss_kappa(np.array([[1, nan], [nan, 0.0]])))


def test_labeler_agreement_and_class_balance():
    ratings = np.array([[0, 1], [1, nan], [2, 2], [nan, 0]], dtype=float)
    final = np.array([0, 1, 1, nan])
    table = labeler_agreement(ratings, [1, 4], final)
    assert table.index.tolist() == [1, 4]
    assert table["n"].tolist() == [3, 2]
    np.testing.assert_allclose(table["agreement"], [2 / 3, 0.0])
    head = Head("level", {0: "none", 1: "some", 2: "much"})
    balance = class_balance(np.array([0, 2, 2, nan, 2]), head)
    assert balance["count"].tolist() == [1, 0, 3] and balance["name"].tolist() == ["none", "some", "much"]
    np.testing.assert_allclose(balance["share"], [0.25, 0, 0.75])


SCHEMA = Schema(
    name="test",
    heads=(Head("abuse", {0: "no", 1: "yes"}), Head("level", {0: "none", 1: "some", 2: "much"}, ordinal=True)),
)


def corpus() -> pd.DataFrame:
    na = pd.NA
    rows = {
        "doc_id": ["d"] * 6,
        "text": ["오늘 뭐 했어?", "산책했어 ㅎㅎ", "2시간 후", "좋겠다", "응!", "그래"],
        "is_pause": [False, False, True, False, False, False],
        "labeler1_abuse": [0, 1, 0, 1, 1, 0],
        "labeler2_abuse": [0, 1, 0, 0, 1, 0],
        "labeler3_abuse": [0, 1, 0, 1, 1, na],
        "labeler_abuse": [0, 1, 0, 1, 1, 0],
        "labeler1_level": [0, 2, 0, 1, 0, 0],
        "labeler2_level": [1, 2, 0, 2, 0, 0],
        "labeler3_level": [2, 1, 0, 1, 0, na],
        "labeler_level": [0, 2, 0, 1, 0, 0],
    }
    df = pd.DataFrame(rows)
    for col in df.columns:
        if col.startswith("labeler"):
            df[col] = df[col].astype("Int64")
    return df


def test_corpus_agreement_excludes_pauses_and_collects_every_figure():
    df = corpus()
    got = corpus_agreement(df, SCHEMA)
    assert (got["n_rows"], got["n_pauses"], got["n_items"], got["schema"]) == (6, 1, 5, "test")
    used = df[~df["is_pause"]]
    level = got["heads"]["level"]
    ratings = used[["labeler1_level", "labeler2_level", "labeler3_level"]].astype(float).to_numpy().T
    assert level["alpha_level"] == "ordinal" and got["heads"]["abuse"]["alpha_level"] == "nominal"
    assert level["krippendorff_alpha"] == pytest.approx(krippendorff.alpha(ratings, level_of_measurement="ordinal"))
    assert level["fleiss_kappa"] == pytest.approx(fleiss_kappa(ratings.T[:4]))
    assert (level["fleiss_items"], level["fleiss_raters"]) == (4, 3)
    assert level["class_balance"] == [
        {"class": 0, "name": "none", "count": 3, "share": 0.6},
        {"class": 1, "name": "some", "count": 1, "share": 0.2},
        {"class": 2, "name": "much", "count": 1, "share": 0.2},
    ]
    assert level["labeler_agreement"] == [
        {"labeler": 1, "n": 5, "agreement": 1.0},
        {"labeler": 2, "n": 5, "agreement": 0.6},
        {"labeler": 3, "n": 4, "agreement": 0.5},
    ]
    assert level["all_different"] == {"n_items": 4, "n": 1, "share": 0.25}
    abuse = got["heads"]["abuse"]
    assert abuse["all_different"] == {"n_items": 4, "n": 0, "share": 0.0}
    assert [a["agreement"] for a in abuse["labeler_agreement"]] == [1.0, 0.8, 1.0]
    assert (abuse["n_final"], abuse["n_labelers"]) == (5, 3)
    json.dumps(got, allow_nan=False)  # JSON-ready: no NaN, plain types


def test_corpus_agreement_without_labelers_or_finals_reports_none():
    df = corpus()[["doc_id", "text", "is_pause", "labeler_abuse", "labeler_level"]]
    got = corpus_agreement(df, SCHEMA)["heads"]["level"]
    assert got["krippendorff_alpha"] is None and got["fleiss_kappa"] is None and got["labeler_agreement"] == []
    assert got["n_labelers"] == 0 and got["class_balance"][0]["count"] == 3
    only_labelers = corpus().drop(columns=["labeler_level"])
    none_final = corpus_agreement(only_labelers, SCHEMA)["heads"]["level"]
    assert none_final["n_final"] == 0 and none_final["class_balance"][0]["share"] is None
    assert [a["agreement"] for a in none_final["labeler_agreement"]] == [None, None, None]


def test_corpus_agreement_names_a_bad_cell_by_its_row_in_the_table():
    df = corpus()
    df["labeler2_level"] = df["labeler2_level"].astype(object)
    df.loc[5, "labeler2_level"] = "high"
    with pytest.raises(ValueError, match=r"'labeler2_level' has value 'high' at row 6"):
        corpus_agreement(df, SCHEMA)
