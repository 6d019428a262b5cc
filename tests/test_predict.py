"""predict() and Predictor: every input form, every model form, the output, and the CLI.

One tiny trained model per session (`tiny_model` in conftest): one previous sentence of context,
tuned thresholds and temperature calibration, so context and decision rules both show.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import personaldialog_records, write_jsonl
from psyattrs import Predictor, predict
from psyattrs.cli import main
from psyattrs.errors import InputFileError
from psyattrs.schema import OPELA
from psyattrs.experiments.pyfunc import disagreement, output_columns, predict_table

SENTENCES = ["안녕하세요 반가워요~", "오늘 너무 피곤했_다 ㅠㅠ", "주말에 뭐 해요?", "저는  산책했어요 ㅎㅎ ♡"]
DIALOGUE = [
    {"speaker": "user", "text": "안녕하세요 반가워요~"},
    {"speaker": "persona", "text": "저도 반가워요 ㅎㅎ"},
    {"speaker": "user", "text": "오늘 너무 피곤했_다 ㅠㅠ"},
    {"speaker": "persona", "text": "헐 무슨 일 있었어요?"},
]
PROBA = {h.name: [f"{h.name}_proba_{k}" for k in h.values] for h in OPELA}


@pytest.fixture(scope="module")
def predictor(tiny_model) -> Predictor:
    return Predictor(tiny_model.model)


def _dialogue_table(turns, doc_id="d1") -> pd.DataFrame:
    return pd.DataFrame({"doc_id": doc_id, "text": [t["text"] for t in turns],
                         "person_type": [t["speaker"] for t in turns]})


def test_strings_are_independent_sentences(predictor):
    out = predictor.predict(SENTENCES)
    assert list(out.columns) == predictor.output_columns
    assert list(out["doc_id"]) == ["s1", "s2", "s3", "s4"] and list(out["sent_id"]) == ["s1_1", "s2_1", "s3_1", "s4_1"]
    assert list(out["text"]) == SENTENCES and (out["position"] == 0).all()
    for i, sentence in enumerate(SENTENCES):
        alone = predictor.predict(sentence)
        assert len(alone) == 1 and alone.loc[0, "doc_id"] == "s1"
        for head in OPELA:
            np.testing.assert_allclose(alone[PROBA[head.name]].to_numpy()[0], out[PROBA[head.name]].to_numpy()[i])


def test_a_dialogue_is_one_conversation_with_context(predictor, tiny_model):
    out = predictor.predict(DIALOGUE)
    assert list(out["doc_id"]) == ["d1"] * 4 and list(out["position"]) == [0, 1, 2, 3]
    assert list(out["speaker"]) == ["user", "persona", "user", "persona"]
    raw = tiny_model.model.predict_proba(_dialogue_table(DIALOGUE))
    for head in OPELA:
        np.testing.assert_allclose(out[PROBA[head.name]].to_numpy(), raw[head.name], rtol=0, atol=1e-12)
    # the third sentence reads differently after the first two than on its own (context is used)
    alone = predictor.predict(DIALOGUE[2]["text"])
    differs = [not np.allclose(alone[PROBA[h]].to_numpy()[0], out[PROBA[h]].to_numpy()[2]) for h in OPELA.head_names]
    assert any(differs)


def test_several_dialogues_and_turns_given_as_strings(predictor):
    out = predictor.predict([DIALOGUE[:2], ["네 좋아요", "그럼 내일 봐요~"]])
    assert list(out["doc_id"]) == ["d1", "d1", "d2", "d2"] and list(out["speaker"]) == ["user", "persona", "", ""]
    first = predictor.predict(DIALOGUE[:2])
    np.testing.assert_allclose(out[PROBA["self"]].to_numpy()[:2], first[PROBA["self"]].to_numpy())


def test_output_values_follow_the_model_and_the_schema(predictor, tiny_model):
    out = predictor.predict(DIALOGUE)
    decided = tiny_model.model.predict(_dialogue_table(DIALOGUE))
    assert tiny_model.model.thresholds_  # tuned decision rules are in play
    for head in OPELA:
        proba = out[PROBA[head.name]].to_numpy()
        np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-9)
        np.testing.assert_array_equal(out[head.name].to_numpy(), decided[head.name].to_numpy())
        assert list(out[f"{head.name}_name"]) == [head.class_name(int(k)) for k in out[head.name]]
        entropy = -(proba * np.log(proba)).sum(axis=1) / np.log(head.n_classes)
        np.testing.assert_allclose(out[f"{head.name}_disagreement"].to_numpy(), entropy, atol=1e-12)
    assert set(out["strange_name"]) <= {"strange", "not strange"}  # 0 = strange, named as such


def test_disagreement_is_zero_for_certainty_and_one_for_uniform():
    values = disagreement(np.array([[1.0, 0.0, 0.0], [1 / 3, 1 / 3, 1 / 3], [0.5, 0.5, 0.0]]))
    np.testing.assert_allclose(values, [0.0, 1.0, np.log(2) / np.log(3)])


def test_as_dicts_carries_the_same_values(predictor):
    frame = predictor.predict(DIALOGUE)
    dicts = predict(DIALOGUE, predictor, as_dicts=True)
    assert len(dicts) == 4 and set(dicts[0]) == {"doc_id", "sent_id", "position", "speaker", "is_pause", "text", "heads"}
    for i, item in enumerate(dicts):
        for head in OPELA:
            got = item["heads"][head.name]
            assert got["class"] == frame.loc[i, head.name] and got["name"] == frame.loc[i, f"{head.name}_name"]
            assert got["probabilities"] == pytest.approx(frame.loc[i, PROBA[head.name]].tolist())
            assert got["disagreement"] == pytest.approx(frame.loc[i, f"{head.name}_disagreement"])
    json.dumps(dicts, ensure_ascii=False)  # plain values only


def test_a_table_keeps_its_index_and_pause_rows(predictor, tiny_model):
    table = pd.DataFrame({
        "doc_id": ["c1", "c1", "c1", "c2"],
        "text": ["안녕하세요~", "", "저 왔어요 ㅋㅋ", "뭐 해요?"],
        "is_pause": [0, 1, 0, 0],
        "person_type": ["user", "persona", "persona", "user"],
    }, index=[10, 11, 12, 13])
    out = predictor.predict(table)
    assert list(out.index) == [10, 11, 12, 13] and list(out["is_pause"]) == [False, True, False, False]
    raw = tiny_model.model.predict_proba(table)
    np.testing.assert_allclose(out[PROBA["empathy"]].to_numpy(), raw["empathy"], atol=1e-12)


def test_personaldialog_records_read_as_the_file_reader_does(predictor, tmp_path):
    from psyattrs.data import read_personaldialog

    records = personaldialog_records()
    out = predictor.predict(records)
    corpus = read_personaldialog(write_jsonl(records, tmp_path / "pd.jsonl"))
    assert list(out["sent_id"]) == list(corpus.utterances["sent_id"])  # pd{line}_{k}, golden appended
    assert list(out["text"]) == list(corpus.utterances["text"])
    from_file = predictor.predict(corpus.utterances)
    np.testing.assert_allclose(out[PROBA["self"]].to_numpy(), from_file[PROBA["self"]].to_numpy())
    one = predictor.predict(records[1])
    assert list(one["doc_id"].unique()) == ["pd1"] and len(one) == 3  # two utterances + golden response


def test_empty_inputs_give_an_empty_frame(predictor):
    out = predictor.predict([])
    assert len(out) == 0 and list(out.columns) == predictor.output_columns
    assert predict([], predictor, as_dicts=True) == []


def test_every_model_form_predicts_the_same(tiny_model, tmp_path):
    import mlflow

    from psyattrs.experiments.store import tracking_store

    expected = Predictor(tiny_model.model).predict(SENTENCES)
    with tracking_store(tiny_model.tracking_uri):
        pyfunc_folder = Path(mlflow.artifacts.download_artifacts(f"runs:/{tiny_model.run_id}/model", dst_path=str(tmp_path)))
        loaded = mlflow.pyfunc.load_model(str(pyfunc_folder))
    forms = [
        tiny_model.registered,
        f"runs:/{tiny_model.run_id}/model",
        str(pyfunc_folder),
        tiny_model.folder,
        loaded,
        Predictor(tiny_model.folder),
    ]
    for form in forms:
        got = predict(SENTENCES, form, tracking_uri=tiny_model.tracking_uri)
        pd.testing.assert_frame_equal(got, expected)


def test_served_columns_are_the_prediction_columns(tiny_model, predictor):
    frame = predictor.predict(DIALOGUE)
    served = predict_table(tiny_model.model, OPELA, _dialogue_table(DIALOGUE))
    assert list(served.columns) == output_columns(OPELA)
    for column in served.columns:
        np.testing.assert_array_equal(served[column].to_numpy(), frame[column].to_numpy())


@pytest.mark.parametrize(
    "inputs, error, match",
    [
        ("   ", ValueError, "empty sentence"),
        (["좋아요", 3], TypeError, "index 1"),
        ([{"text": "좋아요", "mood": "happy"}], ValueError, r"unknown turn key\(s\) \['mood'\]"),
        ([{"speaker": "user"}], ValueError, "needs 'text'"),
        ([{"text": "좋아요", "is_pause": "maybe"}], ValueError, "is_pause"),
        ([["좋아요"], []], ValueError, "dialogue 1: empty dialogue"),
        (pd.DataFrame({"doc_id": ["c1"], "sentence": ["좋아요"]}), ValueError, r"lacks column 'text'"),
        ([{"dialog": ["好", ""]}], ValueError, r"record 0 \(dialog\): empty text"),
        (42, TypeError, "inputs must be a string"),
        ({"text": "좋아요"}, TypeError, "inputs must be"),
    ],
)
def test_bad_inputs_are_named(predictor, inputs, error, match):
    with pytest.raises(error, match=match):
        predictor.predict(inputs)


def test_bad_models_are_named(tiny_model, tmp_path):
    with pytest.raises(InputFileError, match="model folder not found"):
        Predictor(tmp_path / "nothing")
    with pytest.raises(InputFileError, match="neither an MLflow model"):
        Predictor(tmp_path)
    with pytest.raises(ValueError, match="psyattrs-tiny@nobody"):
        Predictor("models:/psyattrs-tiny@nobody", tracking_uri=tiny_model.tracking_uri)
    with pytest.raises(TypeError, match="got int"):
        Predictor(7)


def test_package_exports_predict_lazily():
    code = ("import sys, psyattrs; heavy = [m for m in ('mlflow', 'sklearn') if m in sys.modules]; "
            "assert not heavy, heavy; from psyattrs import Predictor, predict; "
            "assert predict.__module__ == 'psyattrs.serving.predict'; assert 'mlflow' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)


# ------------------------------------------------------------------------------------------ CLI


def test_cli_predict_texts_prints_each_head(tiny_model, capsys):
    assert main(["predict", "--model", str(tiny_model.folder), "--text", SENTENCES[0], "--text", SENTENCES[2]]) == 0
    out = capsys.readouterr().out
    assert "s1_1  안녕하세요 반가워요~" in out and "s2_1  주말에 뭐 해요?" in out
    assert out.count("empathy: ") == 2 and ("strange: strange (" in out or "strange: not strange (" in out)


def test_cli_predict_dialogue_as_json(tiny_model, capsys, predictor):
    texts = [t["text"] for t in DIALOGUE]
    args = ["predict", "--model", str(tiny_model.folder), "--dialogue", "--json"]
    assert main(args + [a for t in texts for a in ("--text", t)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    expected = predictor.predict([{"text": t} for t in texts], as_dicts=True)
    assert [d["sent_id"] for d in lines] == ["d1_1", "d1_2", "d1_3", "d1_4"]
    assert lines[3]["heads"]["self"]["probabilities"] == pytest.approx(expected[3]["heads"]["self"]["probabilities"])


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_cli_predict_file_to_file_reports_set_aside_records(tiny_model, tmp_path, capsys, suffix):
    path = tmp_path / "pd.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in personaldialog_records()) + "{oops\n",
                    encoding="utf-8")
    out = tmp_path / f"pred{suffix}"
    assert main(["predict", "--model", str(tiny_model.folder), "--input", str(path), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "9 sentence(s) predicted" in captured.out
    assert "1 record(s) of" in captured.err and "row 4" in captured.err and "not valid JSON" in captured.err
    if suffix == ".jsonl":
        rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
        assert len(rows) == 9 and rows[0]["sent_id"] == "pd1_1"
    else:
        frame = pd.read_parquet(out) if suffix == ".parquet" else pd.read_csv(out)
        assert len(frame) == 9 and list(frame.columns) == Predictor(tiny_model.folder).output_columns


def test_cli_predict_text_file(tiny_model, tmp_path, capsys):
    path = tmp_path / "sentences.txt"
    path.write_text("\n".join(SENTENCES) + "\n\n", encoding="utf-8")
    assert main(["predict", "--model", str(tiny_model.folder), "--input", str(path), "--json"]) == 0
    assert [json.loads(line)["text"] for line in capsys.readouterr().out.splitlines()] == SENTENCES


@pytest.mark.parametrize(
    "args, match",
    [
        ([], "one of them"),
        (["--text", "좋아요", "--out", "x.txt"], r"\.parquet"),
        (["--input", "nothing.jsonl"], "file not found"),
    ],
)
def test_cli_predict_bad_arguments_exit_2(tiny_model, capsys, args, match):
    assert main(["predict", "--model", str(tiny_model.folder), *args]) == 2
    assert re.search(match, capsys.readouterr().err)
