"""Soft targets and the final/soft mix the models train on."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from psyattrs.labels.soft import mixed_targets, pause_mask, soft_targets
from psyattrs.schema import OPELA, Head, Schema

SCHEMA = Schema(
    name="test",
    heads=(Head("abuse", {0: "no", 1: "yes"}), Head("level", {0: "none", 1: "some", 2: "much"}, ordinal=True)),
)


def table() -> pd.DataFrame:
    """Rows: 3 labelers; 2 of 4 labelers; none; a pause; final only; labelers only."""
    na = pd.NA
    return pd.DataFrame(
        {
            "doc_id": ["d"] * 6,
            "text": ["안녕하세요 ㅎㅎ", "그랬구나", "맥락", "1시간 후", "좋아요!", "음..."],
            "is_pause": [False, False, False, True, False, False],
            "labeler1_level": pd.array([0, 2, na, 0, na, 1], dtype="Int64"),
            "labeler2_level": pd.array([1, na, na, 0, na, 1], dtype="Int64"),
            "labeler3_level": pd.array([1, na, na, 0, na, 2], dtype="Int64"),
            "labeler9_level": pd.array([na, 1, na, na, na, na], dtype="Int64"),
            "labeler_level": pd.array([1, 2, na, 0, 2, na], dtype="Int64"),
            "labeler1_abuse": pd.array([1, 0, na, 0, na, 0], dtype="Int64"),
            "labeler_abuse": pd.array([1, 0, na, 0, 1, na], dtype="Int64"),
        }
    )


def test_soft_targets_any_number_of_labelers():
    got = soft_targets(table(), "level", 3)
    expected = np.array(
        [
            [1 / 3, 2 / 3, 0],
            [0, 1 / 2, 1 / 2],  # labelers 1 and 9 only
            [np.nan] * 3,  # nobody rated
            [1, 0, 0],  # pause: soft_targets itself does not drop pauses
            [np.nan] * 3,
            [0, 2 / 3, 1 / 3],
        ]
    )
    np.testing.assert_allclose(got, expected)


def test_soft_targets_smoothing():
    got = soft_targets(table(), SCHEMA["level"], 3, smoothing=1.0)
    np.testing.assert_allclose(got[0], [(1 + 1) / 6, (2 + 1) / 6, (0 + 1) / 6])
    np.testing.assert_allclose(got[1], [1 / 5, 2 / 5, 2 / 5])
    assert np.isnan(got[2]).all()
    np.testing.assert_allclose(np.nansum(got, axis=1)[[0, 1, 3, 5]], 1.0)


def test_soft_targets_bad_input():
    df = table()
    with pytest.raises(ValueError, match="smoothing must be a finite number >= 0, got -0.5"):
        soft_targets(df, "level", 3, smoothing=-0.5)
    with pytest.raises(ValueError, match=r"'labeler1_level' has value 2 at row 2 \(1 such cells\); head 'level' allows \[0, 1\]"):
        soft_targets(df, "level", 2)
    with pytest.raises(ValueError, match=r"no labeler\{k\}_uneasy columns"):
        soft_targets(df, "uneasy", 2)
    with pytest.raises(ValueError, match="has 3 classes, not n_classes=4"):
        soft_targets(df, SCHEMA["level"], 4)


def test_mixed_targets_rows_by_kind():
    got = mixed_targets(table(), SCHEMA, lam=0.25)
    level = got["level"]
    assert set(got) == {"abuse", "level"} and level.shape == (6, 3) and got["abuse"].shape == (6, 2)
    np.testing.assert_allclose(level[0], 0.25 * np.array([0, 1, 0]) + 0.75 * np.array([1 / 3, 2 / 3, 0]))
    np.testing.assert_allclose(level[1], 0.25 * np.array([0, 0, 1]) + 0.75 * np.array([0, 1 / 2, 1 / 2]))
    assert np.isnan(level[2]).all()  # neither
    assert np.isnan(level[3]).all()  # pause, although labelled
    np.testing.assert_allclose(level[4], [0, 0, 1])  # final only: the one-hot
    np.testing.assert_allclose(level[5], [0, 2 / 3, 1 / 3])  # labelers only: their distribution
    np.testing.assert_allclose(got["abuse"][0], [0, 1])  # one labeler who agrees with the final


def test_mixed_targets_lam_one_is_the_one_hot_and_lam_zero_the_soft():
    df = table()
    hard = mixed_targets(df, SCHEMA, lam=1.0)["level"]
    soft = mixed_targets(df, SCHEMA, lam=0.0, smoothing=0.5)["level"]
    np.testing.assert_allclose(hard[[0, 1, 4]], np.eye(3)[[1, 2, 2]])
    expected_soft = soft_targets(df, "level", 3, smoothing=0.5)
    np.testing.assert_allclose(soft[[0, 1, 5]], expected_soft[[0, 1, 5]])
    np.testing.assert_allclose(soft[4], [0, 0, 1])


def test_mixed_targets_without_labeler_columns_uses_finals():
    df = pd.DataFrame({"doc_id": ["d", "d"], "text": ["가", "나"], **{f"labeler_{h}": [0, 1] for h in OPELA.head_names}})
    got = mixed_targets(df, OPELA, lam=0.3)
    np.testing.assert_allclose(got["empathy"], np.eye(5)[[0, 1]])
    np.testing.assert_allclose(got["strange"], np.eye(2)[[0, 1]])


def test_mixed_targets_checks_lam_and_final_values():
    with pytest.raises(ValueError, match=r"lam must be a number in \[0, 1\], got 1.5"):
        mixed_targets(table(), SCHEMA, lam=1.5)
    bad = table()
    bad["labeler_abuse"] = pd.array([1, 0, 2, 0, 1, pd.NA], dtype="Int64")
    with pytest.raises(ValueError, match=r"'labeler_abuse' has value 2 at row 3"):
        mixed_targets(bad, SCHEMA)


def test_pause_mask_reads_bool_numbers_and_text():
    assert pause_mask(pd.DataFrame({"is_pause": [True, False]})).tolist() == [True, False]
    assert pause_mask(pd.DataFrame({"is_pause": ["1", "0", "true", ""]})).tolist() == [True, False, True, False]
    assert pause_mask(pd.DataFrame({"text": ["a"]})).tolist() == [False]
