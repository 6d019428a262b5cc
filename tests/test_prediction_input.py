"""The checks on tables to predict (`psyattrs.data.prediction_input`), through `predict()` and the
logged pyfunc model as well as directly."""

import mlflow
import numpy as np
import pandas as pd
import pytest

from psyattrs import Predictor
from psyattrs.data.prediction_input import check_prediction_table
from psyattrs.experiments.store import quiet_mlflow, tracking_store

SENTENCES = ["안녕하세요 반가워요~", "오늘 너무 피곤했_다 ㅠㅠ", "주말에 뭐 해요?"]


@pytest.fixture(scope="module")
def predictor(tiny_model):
    return Predictor(tiny_model.model)


BAD_TABLES = {
    "is_pause yes": ({"doc_id": ["c1", "c1"], "text": ["안녕", "응"], "is_pause": [False, "yes"]},
                     ValueError, r"column 'is_pause': row 1 holds 'yes' \(a string\); allowed: true/false or 0/1"),
    "is_pause 2": ({"doc_id": ["c1", "c1"], "text": ["안녕", "응"], "is_pause": [0, 2]},
                   ValueError, r"column 'is_pause': row 1 holds 2 \(an integer\)"),
    "repeated position": ({"doc_id": ["c1", "c1", "c2"], "text": ["안녕", "응", "뭐"], "position": [0, 0, 0]},
                          ValueError, r"column 'position': row 1 repeat position 0 of conversation 'c1'"),
    "negative position": ({"doc_id": ["c1"], "text": ["안녕"], "position": [-2]},
                          ValueError, r"column 'position': row 0 is negative \(-2\)"),
    "position a float": ({"doc_id": ["c1"], "text": ["안녕"], "position": [0.5]},
                         TypeError, r"column 'position': row 0 is a number \(0.5\)"),
    "text a number": ({"doc_id": ["c1", "c1"], "text": ["안녕", 7]}, TypeError,
                      r"column 'text': row 1 is an integer \(7\), not a string"),
    "doc_id a list": ({"doc_id": [["c1"]], "text": ["안녕"]}, TypeError, r"column 'doc_id': row 0 is a list"),
    "repeated sent_id": ({"doc_id": ["c1", "c1"], "sent_id": ["a", "a"], "text": ["안녕", "응"]},
                         ValueError, r"column 'sent_id': row 1 repeat an earlier sent_id"),
    "turn a word": ({"doc_id": ["c1"], "text": ["안녕"], "turn": ["one"]}, TypeError, r"column 'turn': row 0"),
    "speaker a number": ({"doc_id": ["c1"], "text": ["안녕"], "person_type": [1]}, TypeError,
                         r"column 'person_type': row 0 is an integer"),
    "no text": ({"doc_id": ["c1"], "sentence": ["안녕"]}, ValueError, r"lacks column 'text'"),
}


@pytest.mark.parametrize("case", list(BAD_TABLES))
def test_predict_raises_a_labelled_error_for_bad_values(predictor, case):
    columns, error, message = BAD_TABLES[case]
    with pytest.raises(error, match=message):
        predictor.predict(pd.DataFrame(columns))


def test_a_table_without_doc_id_is_independent_sentences(predictor):
    from_list = predictor.predict(SENTENCES)
    from_table = predictor.predict(pd.DataFrame({"text": SENTENCES}))
    pd.testing.assert_frame_equal(from_table, from_list)
    assert from_table["doc_id"].tolist() == ["s1", "s2", "s3"]


def test_good_tables_pass_unchanged():
    table = pd.DataFrame({"doc_id": ["c1", "c1", 7], "text": ["안녕", "", "응"], "is_pause": [0, 1, np.nan],
                          "position": [0, 1, 0], "turn": [1, None, 2], "person_type": ["user", None, "persona"]})
    assert check_prediction_table(table) is table
    with pytest.raises(ValueError, match="column 'text': row 0 is empty"):
        check_prediction_table(pd.DataFrame({"text": [" "]}), require_text=True)
    check_prediction_table(pd.DataFrame({"text": ["", "응"], "is_pause": [True, False]}), require_text=True)
    named = check_prediction_table(pd.DataFrame({"text": ["a", "b"]}, index=[5, 9]))
    assert named["doc_id"].tolist() == ["s1", "s2"] and named.index.tolist() == [5, 9]


def test_the_logged_model_takes_rows_without_doc_id_and_refuses_bad_ones(tiny_model, predictor):
    with tracking_store(tiny_model.tracking_uri), quiet_mlflow():
        loaded = mlflow.pyfunc.load_model(tiny_model.registered)
    expected = predictor.predict(SENTENCES)
    got = loaded.predict(pd.DataFrame({"text": SENTENCES}))
    assert got["doc_id"].tolist() == ["s1", "s2", "s3"]
    np.testing.assert_allclose(got["strange_proba_0"], expected["strange_proba_0"], rtol=0, atol=1e-12)
    for pause in (["no", "yes"], [0, 2]):  # MLflow's schema check or ours: refused either way, naming the column
        with pytest.raises(mlflow.exceptions.MlflowException, match="is_pause"):
            loaded.predict(pd.DataFrame({"text": ["안녕", "응"], "is_pause": pause}))
    with pytest.raises(mlflow.exceptions.MlflowException, match="column 'position': row 1 repeat position 0"):
        loaded.predict(pd.DataFrame({"doc_id": ["c1", "c1"], "text": ["안녕", "응"], "position": [0, 0]}))


OUT_OF_RANGE = {  # issue 26.6: 1e20 overflowed (a 500), 2**63 - 1 wrapped into a negative sent_id
    "position 1e20": ("position", 1e20, r"column 'position': row 0 is out of range \(1e\+20\); a position lies in"),
    "position 2**63 - 1": ("position", 2**63 - 1, r"column 'position': row 0 is out of range \(9223372036854775807\)"),
    "position 2**31": ("position", 2**31, r"column 'position': row 0 is out of range"),
    "turn 1e30": ("turn", 1e30, r"column 'turn': row 0 is out of range \(1e\+30\); a turn lies in 0\.\.2147483647"),
    "turn -1": ("turn", -1, r"column 'turn': row 0 is out of range \(-1\)"),
    "sent_id 10**30": ("sent_id", 10**30, r"column 'sent_id': row 0 is out of range"),
    "doc_id -2**60": ("doc_id", -2**60, r"column 'doc_id': row 0 is out of range"),
}


@pytest.mark.parametrize("case", list(OUT_OF_RANGE))
def test_absurd_numbers_are_refused_by_name_before_any_conversion(case):
    column, value, message = OUT_OF_RANGE[case]
    table = pd.DataFrame({"doc_id": pd.Series(["c1"], dtype=object), "text": ["안녕"]})
    table[column] = pd.Series([value], dtype=object)
    with pytest.raises(ValueError, match=message):
        check_prediction_table(table)


def test_the_largest_numbers_in_range_pass():
    table = pd.DataFrame({"doc_id": pd.Series([2**53, 2**53], dtype=object), "text": ["안녕", "응"],
                          "position": pd.Series([0, 2**31 - 1], dtype=object),
                          "turn": pd.Series([0, 2**31 - 1], dtype=object)})
    assert check_prediction_table(table) is table
