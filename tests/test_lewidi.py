"""LeWiDi harmonised JSON, the long annotation table, any language, and the LeWiDi outputs.

Every corpus here is built by the tests (no text of the real LeWiDi files is used).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from psyattrs.cli import main
from psyattrs.data import corpus_annotator_labels, detect_format, load_corpus
from psyattrs.data.annotations import annotations_from_slots, crowdkit_table
from psyattrs.data.lewidi import schema_of, sibling_splits
from psyattrs.experiments import metrics as M
from psyattrs.labels.aggregate import DawidSkene
from psyattrs.labels.resolve import resolve_final_labels
from psyattrs.labels.soft import mixed_targets
from psyattrs.models.base import build_model
from psyattrs.models.annotators import row_annotators
from psyattrs.schema import Head, Schema
from psyattrs.features.text import TextFeaturizer
from psyattrs.features.tokenizers import tokenizer_description, word_tokenizer

REPO = Path(__file__).resolve().parents[1]

# words that carry the class: "bad" words make annotators say 1
EN_BAD = ["awful idiots", "stupid trash", "hate you all", "disgusting liars"]
EN_OK = ["lovely morning", "thanks friend", "nice game today", "happy birthday"]
AR_BAD = ["أنت غبي جدا", "كلام قذر وسخيف", "أكرهك يا كاذب", "حقير ومقرف"]
AR_OK = ["صباح الخير يا صديقي", "شكرا جزيلا لك", "مباراة جميلة اليوم", "عيد ميلاد سعيد"]
JA_BAD = ["お前は本当に馬鹿だ", "最低で気持ち悪い", "嘘つきは大嫌いだ", "くだらないゴミだ"]
JA_OK = ["おはようございます", "ありがとうございました", "今日はいい試合でした", "誕生日おめでとう"]


def _item(text, annotators, annotations, *, split="train", lang="en", task="offensiveness detection", soft=None,
          hard=None, n=None):
    votes = [int(v) for v in annotations.split(",")] if annotations else []
    share = sum(1 for v in votes if v == 1) / len(votes) if votes else 0.0
    return {
        "text": text,
        "annotation task": task,
        "number of annotations": len(votes) if n is None else n,
        "annotations": annotations,
        "annotators": annotators,
        "lang": lang,
        "hard_label": str(int(share > 0.5)) if hard is None else hard,
        "soft_label": {"0": round(1 - share, 4), "1": round(share, 4)} if soft is None else soft,
        "split": split,
        "other_info": {"domain": "test"},
    }


def corpus_items(bad, ok, *, split="train", lang="en", n_copies=3, seed=0, start=0):
    """Items whose annotators mostly agree with the word class; a few split 3-2."""
    rng = np.random.default_rng(seed)
    items = {}
    i = start
    for copy in range(n_copies):
        for texts, cls in ((bad, 1), (ok, 0)):
            for t in texts:
                who = rng.choice(40, size=5, replace=False)
                p = 0.85 if cls else 0.1
                votes = (rng.random(5) < p).astype(int)
                items[str(i)] = _item(f"{t} {copy}", ",".join(f"Ann{w}" for w in who),
                                      ",".join(str(v) for v in votes), split=split, lang=lang)
                i += 1
    return items


def write_json(items, path: Path) -> Path:
    path.write_text(json.dumps(items, ensure_ascii=False, indent=4), encoding="utf-8")
    return path


def convabuse_item(item_id_turns, annotations):
    text = json.dumps({"prev_agent": item_id_turns[0], "prev_user": item_id_turns[1], "agent": item_id_turns[2],
                       "user": item_id_turns[3]})
    votes = [int(v) for v in annotations.split(",")]
    abusive = sum(1 for v in votes if v < 0) / len(votes)
    return {"text": text, "annotation task": "abuse detection", "number of annotations": len(votes),
            "annotations": annotations, "annotators": ",".join(f"Ann{k}" for k in range(len(votes))),
            "lang": "en", "hard_label": str(int(abusive > 0.5)),
            "soft_label": {"0": 1 - abusive, "1": abusive}, "split": "train", "other_info": {}}


# ------------------------------------------------------------------------------------ reading


def test_lewidi_file_is_detected_and_read_with_its_own_schema_and_annotator_ids(tmp_path):
    items = {
        "a1": _item("first tweet", "Ann7,Ann3,Ann9,Ann1,Ann2", "0,0,1,0,0", split="train"),
        "a2": _item("second tweet", "Ann3,Ann5,Ann7,Ann8,Ann4", "1,1,0,1,1", split="train"),
    }
    path = write_json(items, tmp_path / "Toy_train.json")
    assert detect_format(path) == "lewidi"
    corpus = load_corpus(path)
    assert corpus.format == "lewidi" and corpus.record_kind == "item"
    assert corpus.schema.head_names == ["offensiveness"] and corpus.schema.language == "en"
    assert corpus.schema.name == "Toy" and corpus.schema["offensiveness"].is_binary
    assert corpus.n_read == 2 == corpus.n_kept and corpus.problems == []
    u = corpus.utterances
    assert u["doc_id"].tolist() == ["a1", "a2"] and u["sent_id"].tolist() == ["a1", "a2"]
    assert u["labeler_offensiveness"].tolist() == [0, 1]
    assert u["split"].tolist() == ["train", "train"]
    assert json.loads(u["other_info"][0]) == {"domain": "test"}
    # five vote slots, not one column per annotator
    slots = [c for c in u.columns if c.startswith("labeler") and c[7:8].isdigit()]
    assert slots == [f"labeler{k}_offensiveness" for k in range(1, 6)]
    assert u.loc[0, slots].tolist() == [0, 0, 1, 0, 0]
    ann = corpus.annotations
    assert list(ann.columns) == ["sent_id", "annotator", "head", "label"]
    assert len(ann) == 10 and ann["annotator"].nunique() == 8
    assert ann[ann["sent_id"] == "a2"]["annotator"].astype(str).tolist() == ["Ann3", "Ann5", "Ann7", "Ann8", "Ann4"]
    # the function per-annotator models use
    per = corpus_annotator_labels(corpus)
    assert per.loc[0, "offensiveness_annotators"] == ("Ann7", "Ann3", "Ann9", "Ann1", "Ann2")
    assert per.loc[1, "offensiveness_labels"] == (1, 1, 0, 1, 1)
    soft = mixed_targets(u, corpus.schema, lam=0.0)["offensiveness"]
    np.testing.assert_allclose(soft, [[0.8, 0.2], [0.2, 0.8]])


def test_convabuse_items_become_four_turn_conversations_with_a_severity_head(tmp_path):
    items = {
        "c1": convabuse_item(["Hello, how can I help?", "", "Tell me more.", "you are useless"], "-2,-1,0"),
        "c2": convabuse_item(["Hi", "what is the weather", "Sunny today.", "great thanks"], "1,0,1"),
    }
    path = write_json(items, tmp_path / "ConvToy_train.json")
    corpus = load_corpus(path)
    head = corpus.schema.heads[0]
    assert head.name == "abuse" and head.ordinal and head.classes == {0: "-3", 1: "-2", 2: "-1", 3: "0", 4: "1"}
    u = corpus.utterances
    c1 = u[u["doc_id"] == "c1"]
    assert c1["person_type"].tolist() == ["agent", "user", "agent", "user"]
    assert c1["text"].tolist() == ["Hello, how can I help?", "", "Tell me more.", "you are useless"]
    assert c1["sent_id"].tolist()[-1] == "c1" and c1["position"].tolist() == [0, 1, 2, 3]
    # only the last turn is rated: -2 -> class 1, -1 -> 2, 0 -> 3
    assert c1["labeler1_abuse"].isna().tolist() == [True, True, True, False]
    assert c1.iloc[3][["labeler1_abuse", "labeler2_abuse", "labeler3_abuse"]].tolist() == [1, 2, 3]
    assert corpus.n_read == 2 == corpus.n_kept


def test_data_validate_names_the_item_and_the_field_and_reconciles(tmp_path, capsys):
    items = {
        "ok": _item("fine", "A1,A2,A3", "0,0,1"),
        "short": _item("lists differ", "A1,A2,A3", "0,1", n=2),
        "sum": _item("bad sum", "A1,A2", "0,1", soft={"0": 0.7, "1": 0.7}),
        "disagree": _item("soft vs votes", "A1,A2,A3", "1,1,1", soft={"0": 0.5, "1": 0.5}),
        "outside": _item("label 7", "A1,A2", "0,7"),
        "count": _item("wrong count", "A1,A2", "0,1", n=4),
    }
    path = write_json(items, tmp_path / "Bad_dev.json")
    corpus = load_corpus(path, schema=Schema("s", (Head("offensiveness", {0: "no", 1: "yes"}),), language="en"))
    by_id = {p.doc_id: p for p in corpus.problems}
    assert corpus.n_read == 6 == corpus.n_kept + len(corpus.problems) and corpus.n_kept == 1
    assert by_id["short"].field == "annotations" and "2 annotations for 3 annotators" in by_id["short"].reason
    assert by_id["sum"].field == "soft_label" and "sums to 1.4" in by_id["sum"].reason
    assert by_id["disagree"].field == "soft_label" and "disagrees with the annotations" in by_id["disagree"].reason
    assert by_id["outside"].field.startswith("annotations") and "['7'] outside the schema's classes" in by_id["outside"].reason
    assert by_id["count"].field == "number of annotations" and by_id["count"].row == 6
    report = tmp_path / "report.jsonl"
    assert main(["data", "validate", str(path), "--report", str(report)]) == 0
    out = capsys.readouterr().out
    assert "read 6 = kept 1 + set aside 5" in out
    assert "short: 2 annotations for 3 annotators [annotations]" in out
    assert "annotators: 3 distinct" in out
    lines = [json.loads(line) for line in report.read_text().splitlines()]
    assert {(r["doc_id"], r["field"]) for r in lines} >= {("sum", "soft_label"), ("short", "annotations")}


def test_a_file_that_is_not_lewidi_json_is_one_clear_error(tmp_path):
    path = tmp_path / "list.json"
    path.write_text('{"a": [1, 2]}', encoding="utf-8")
    assert main(["data", "validate", str(path), "--format", "lewidi"]) == 2


# ------------------------------------------------------------------------- the long layout


def long_frame() -> pd.DataFrame:
    rows = []
    texts = {"t1": "good day", "t2": "awful people", "t3": "nice work", "t4": "stupid idea"}
    truth = {"t1": 0, "t2": 1, "t3": 0, "t4": 1}
    for task, text in texts.items():
        for w in ("w1", "w2", "w3"):
            rows.append({"task": task, "worker": w, "label": truth[task], "text": text})
        # w9 always says 1: a biased annotator Dawid-Skene learns to discount
        rows.append({"task": task, "worker": "w9", "label": 1, "text": text})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_long_layout_from_csv_or_parquet(tmp_path, suffix):
    df = long_frame()
    df.loc[len(df)] = {"task": "t1", "worker": "w1", "label": 0, "text": "good day"}  # a second rating
    df.loc[len(df)] = {"task": "t2", "worker": "w4", "label": 5, "text": "awful people"}  # not a class
    path = tmp_path / f"long{suffix}"
    if suffix == ".csv":
        df.to_csv(path, index=False)
    else:
        df.astype({"label": "int64"}).to_parquet(path, index=False)
    assert detect_format(path) == "long"
    schema = Schema("s", (Head("label", {0: "no", 1: "yes"}),))
    corpus = load_corpus(path, schema=schema)
    assert corpus.format == "long" and corpus.record_kind == "rating"
    assert corpus.n_read == 18 and corpus.n_kept == 16 and len(corpus.problems) == 2
    fields = sorted(p.field for p in corpus.problems)
    assert fields == ["label", "task, worker"]
    assert corpus.utterances["sent_id"].tolist() == ["t1", "t2", "t3", "t4"]
    assert corpus.utterances["text"].tolist() == ["good day", "awful people", "nice work", "stupid idea"]
    assert corpus.annotations["annotator"].nunique() == 4
    # the utterance table names who gave each vote slot, paired with the slot's rating
    first = corpus.annotations.drop_duplicates("sent_id").set_index("sent_id")
    u = corpus.utterances.set_index("sent_id")
    assert u["annotator1_label"].tolist() == first.loc[u.index, "annotator"].astype(str).tolist()
    assert u["labeler1_label"].tolist() == first.loc[u.index, "label"].tolist()
    # aggregators see the annotator ids
    resolved = resolve_final_labels(corpus.utterances, schema, method="dawid-skene", annotations=corpus.annotations)
    expected = DawidSkene().fit_predict(crowdkit_table(corpus.annotations, "label"), 2)
    assert resolved["labeler_label"].tolist() == expected.loc[["t1", "t2", "t3", "t4"]].tolist() == [0, 1, 0, 1]


def test_long_layout_infers_its_schema_and_resolves_on_the_command_line(tmp_path, capsys):
    path = tmp_path / "long.csv"
    long_frame().to_csv(path, index=False)
    out = tmp_path / "resolved.csv"
    assert main(["labels", "resolve", str(path), "--out", str(out), "--method", "majority"]) == 0
    table = pd.read_csv(out)
    assert table["labeler_label"].tolist() == [0, 1, 0, 1]
    assert main(["data", "stats", str(path)]) == 0
    out_text = capsys.readouterr().out
    assert "Lw1 -  Lw2 -  Lw3 -  Lw9 -" in out_text and "4 x 4 raters" in out_text  # annotator ids, no final yet


def test_annotations_from_slots_names_fixed_labelers():
    df = pd.DataFrame({"doc_id": ["d", "d"], "sent_id": ["d_1", "d_2"], "labeler1_x": [0, 1], "labeler2_x": [1, None]})
    schema = Schema("s", (Head("x", {0: "a", 1: "b"}),))
    ann = annotations_from_slots(df, schema)
    assert ann["annotator"].astype(str).tolist() == ["labeler1", "labeler1", "labeler2"]
    assert ann["label"].tolist() == [0, 1, 1]


# ------------------------------------------------------------------------------- languages


def test_any_language_code_is_a_schema_language_and_gets_the_fallback_tokenizer():
    for code in ("ar", "ja", "he", "pt-br", "und"):
        assert Schema("s", (Head("x", {0: "a", 1: "b"}),), language=code).language == code
    with pytest.raises(ValueError, match="is not a language code"):
        Schema("s", (Head("x", {0: "a", 1: "b"}),), language="Arabic!")
    assert Schema.from_dict({"heads": [{"name": "x", "classes": ["a", "b"]}], "language": None}).language == "und"
    assert [word_tokenizer(c) for c in ("ko", "zh-tw", "en-gb", "ar", "ja")] == ["ko", "zh", "en", "whitespace", "whitespace"]
    assert tokenizer_description("ar") == "character n-grams + whitespace words (fallback: no tokenizer of its own for this language)"
    assert tokenizer_description("en") == "character n-grams + English words and punctuation"


@pytest.mark.parametrize("lang, bad, ok", [("ar", AR_BAD, AR_OK), ("ja", JA_BAD, JA_OK)])
def test_right_to_left_and_spaceless_scripts_train_and_predict(lang, bad, ok, tmp_path):
    corpus = load_corpus(write_json(corpus_items(bad, ok, lang=lang), tmp_path / f"{lang}_train.json"))
    assert corpus.schema.language == lang
    featurizer = TextFeaturizer(lang, char_ngrams=(1, 3), min_df=1).fit(corpus.utterances["text"])
    names = set(featurizer.get_feature_names_out())
    if lang == "ar":
        assert "word:غبي" in names  # whitespace words of a right-to-left script
    else:
        assert "char:馬鹿" in names  # character n-grams carry a script without spaces
    model = build_model("tfidf", corpus.schema, min_df=1, C=10.0)
    model.fit(corpus.utterances, mixed_targets(corpus.utterances, corpus.schema, lam=0.0))
    test = pd.DataFrame({"doc_id": ["x", "y"], "text": [bad[0] + " 9", ok[0] + " 9"]})
    proba = model.predict_proba(test)["offensiveness"]
    assert proba[0, 1] > 0.5 > proba[1, 1]


# ----------------------------------------------------------------- metrics, runner, outputs


def test_micro_f1_and_manhattan():
    assert M.micro_f1(np.array([0, 1, 1, 0]), np.array([0, 1, 0, 0])) == pytest.approx(0.75)
    target = np.array([[0.8, 0.2], [0.4, 0.6]])
    proba = np.array([[0.6, 0.4], [0.4, 0.6]])
    assert M.manhattan(target, proba) == pytest.approx(0.2)
    assert np.isnan(M.manhattan(np.empty((0, 2)), np.empty((0, 2))))


def official_files(tmp_path: Path, lang: str = "ar") -> Path:
    write_json(corpus_items(AR_BAD, AR_OK, split="train", lang=lang, n_copies=4, seed=1), tmp_path / "Ar_train.json")
    write_json(corpus_items(AR_BAD, AR_OK, split="dev", lang=lang, n_copies=2, seed=2, start=100), tmp_path / "Ar_dev.json")
    write_json(corpus_items(AR_BAD, AR_OK, split="test", lang=lang, n_copies=1, seed=3, start=200), tmp_path / "Ar_test.json")
    return tmp_path / "Ar_train.json"


def test_sibling_splits_and_the_files_own_split(tmp_path):
    train = official_files(tmp_path)
    found = sibling_splits(train)
    assert found == {"train": train, "test": tmp_path / "Ar_test.json", "valid": tmp_path / "Ar_dev.json"}
    assert sibling_splits(tmp_path / "Ar_dev.json") is None


@pytest.mark.parametrize("name", ["lewidi", "lewidi_annotators"])
def test_lewidi_config_trains_on_the_official_splits_with_the_fallback_tokenizer_stated(name, tmp_path, capsys):
    import mlflow

    from psyattrs.experiments.config import load_config
    from psyattrs.experiments.runner import train

    path = official_files(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    config = load_config(REPO / "experiments" / f"{name}.yaml",
                         [f"data.path={path}", f"tracking.uri={uri}", "model.params.min_df=1"])
    result = train(config, quiet=True)
    assert result.model.kind == {"lewidi": "tfidf", "lewidi_annotators": "tfidf_annotators"}[name]
    assert result.schema.head_names == ["offensiveness"] and result.schema.language == "ar"
    m = result.metrics
    assert m["n_train_sentences"] == 32 and m["n_valid_sentences"] == 16 and m["n_test_sentences"] == 8
    for name in ("macro_f1", "micro_f1", "soft_ce", "manhattan"):
        assert np.isfinite(m[f"test_{name}_offensiveness"])
    assert m["test_soft_ce_offensiveness"] < m["test_floor_soft_ce_offensiveness"]
    params = mlflow.MlflowClient(tracking_uri=uri).get_run(result.run_id).data.params
    assert params["features.language"] == "ar"
    assert "whitespace words (fallback" in params["features.tokenizer"]
    # evaluate on the official test file gives the run's own test scores
    from psyattrs.experiments.runner import evaluate

    again = evaluate(result.run_id, tmp_path / "Ar_test.json", tracking_uri=uri)
    assert again["eval_soft_ce_offensiveness"] == pytest.approx(m["test_soft_ce_offensiveness"])
    assert main(["evaluate", "--run", result.run_id, "--tracking-uri", uri, "--data", str(tmp_path / "Ar_test.json")]) == 0
    assert "offensiveness" in capsys.readouterr().out


def test_a_lewidi_run_reports_its_own_heads(tmp_path, capsys):
    """The run report is built from the heads the run trained (its schema.json), not from the
    config's default schema: a LeWiDi corpus brings its own."""
    import mlflow

    import psyattrs

    path = official_files(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = psyattrs.train(REPO / "experiments" / "lewidi.yaml",
                            [f"data.path={path}", f"tracking.uri={uri}", "model.params.min_df=1"], quiet=True)
    assert "run report was not logged" not in capsys.readouterr().err
    client = mlflow.MlflowClient(tracking_uri=uri)
    schema = mlflow.artifacts.load_dict(f"{client.get_run(result.run_id).info.artifact_uri}/schema.json")
    assert [h["name"] for h in schema["heads"]] == ["offensiveness"]
    page = Path(client.download_artifacts(result.run_id, "report/report.html", str(tmp_path))).read_text("utf-8")
    assert "offensiveness" in page and "strange" not in page
    # evaluate reads the same schema.json: it scores the run's heads even once the training file,
    # whose own heads the config pointed to, is gone
    from psyattrs.experiments.runner import evaluate

    test_file = tmp_path / "Ar_test.json"
    path.rename(tmp_path / "elsewhere.json")
    metrics = evaluate(result.run_id, test_file, tracking_uri=uri)
    assert np.isfinite(metrics["eval_soft_ce_offensiveness"])
    assert main(["evaluate", "--run", result.run_id, "--tracking-uri", uri, "--data", str(test_file)]) == 0
    assert "offensiveness" in capsys.readouterr().out

def test_lewidi_minilm_config_is_a_soft_target_transformer_and_trains_on_the_official_splits(tmp_path):
    """The shipped transformer config with its backbone swapped for the tiny scratch encoder
    (tests/_transformer_tiny.py): no checkpoint is downloaded."""
    from _transformer_tiny import TINY

    from psyattrs.experiments.config import load_config
    from psyattrs.experiments.runner import train

    shipped = load_config(REPO / "experiments" / "lewidi_minilm.yaml")
    assert shipped.model.kind == "transformer" and shipped.model.backbone == "sentence-transformers/all-MiniLM-L6-v2"
    assert shipped.targets.lam == 0.0 and shipped.model.calibration == "temperature"
    path = official_files(tmp_path, lang="en")
    shrink = [f"model.params.{k}={v}" for k, v in TINY.items() if k != "log_every"]
    config = load_config(REPO / "experiments" / "lewidi_minilm.yaml",
                         [f"data.path={path}", f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", "model.backbone=scratch",
                          *shrink])
    result = train(config, quiet=True)
    assert result.model.kind == "transformer" and result.model.params["backbone"] == "scratch"
    m = result.metrics
    assert m["n_train_sentences"] == 32 and m["n_valid_sentences"] == 16 and m["n_test_sentences"] == 8
    for name in ("macro_f1", "soft_ce", "manhattan"):
        assert np.isfinite(m[f"test_{name}_offensiveness"])


def test_one_file_with_a_split_field_is_split_by_it(tmp_path):
    from psyattrs.experiments.config import load_config
    from psyattrs.experiments.dataset import config_schema, split_dataset

    items = {**corpus_items(EN_BAD, EN_OK, split="train", n_copies=2),
             **corpus_items(EN_BAD, EN_OK, split="test", n_copies=1, start=100)}
    path = write_json(items, tmp_path / "one.json")
    config = load_config(REPO / "experiments" / "lewidi.yaml", [f"data.path={path}"])
    split = split_dataset(config, config_schema(config))
    assert len(split.train) == 16 and len(split.test) == 8 and split.valid is None
    assert set(split.test["split"]) == {"test"}


@pytest.mark.parametrize("kind", ["tfidf", "tfidf_annotators"])
def test_predict_format_lewidi_round_trip(kind, tmp_path, capsys):
    from psyattrs import Predictor
    from psyattrs.serving.lewidi_output import predict_lewidi, read_lewidi_predictions

    corpus = load_corpus(write_json(corpus_items(EN_BAD, EN_OK), tmp_path / "En_train.json"))
    model = build_model(kind, corpus.schema, min_df=1)
    model.fit(corpus.utterances, mixed_targets(corpus.utterances, corpus.schema, lam=0.0))
    folder = tmp_path / "model"
    model.save(folder)
    test_path = write_json(corpus_items(EN_BAD, EN_OK, split="test", n_copies=1, start=50), tmp_path / "En_test.json")
    out = tmp_path / "pred.json"
    assert main(["predict", "--model", str(folder), "--input", str(test_path), "--format", "lewidi",
                 "--out", str(out)]) == 0
    assert "8 item(s) predicted" in capsys.readouterr().out
    back = read_lewidi_predictions(out)
    expected = Predictor(folder).predict(load_corpus(test_path).utterances)
    assert back.index.tolist() == [str(i) for i in range(50, 58)]
    np.testing.assert_allclose(back["soft_1"].to_numpy(), expected["offensiveness_proba_1"].to_numpy(), atol=1e-6)
    assert back["hard_label"].tolist() == expected["offensiveness"].astype(str).tolist()
    assert predict_lewidi(test_path, folder) == json.loads(out.read_text())
    assert main(["predict", "--model", str(folder), "--input", str(test_path), "--format", "lewidi",
                 "--out", str(tmp_path / "pred.csv")]) == 2


def test_data_stats_lists_many_annotators_as_a_spread(tmp_path, capsys):
    path = write_json(corpus_items(EN_BAD, EN_OK, n_copies=3), tmp_path / "Many_train.json")
    out = tmp_path / "stats.json"
    assert main(["data", "stats", str(path), "--json", str(out)]) == 0
    assert "annotators: median" in capsys.readouterr().out
    stats = json.loads(out.read_text())
    head = stats["heads"]["offensiveness"]
    assert head["n_labelers"] > 8 and all(isinstance(a["labeler"], str) for a in head["labeler_agreement"])
    assert head["fleiss_raters"] == 5


def test_schema_of_falls_back_to_unknown_language_for_a_bad_code():
    schema = schema_of({"1": _item("x", "A", "0", lang="??")})
    assert schema.language == "und"


def test_annotate_reads_a_lewidi_file_and_accounts_for_every_item(tmp_path, capsys):
    corpus = load_corpus(write_json(corpus_items(EN_BAD, EN_OK), tmp_path / "En_train.json"))
    model = build_model("tfidf", corpus.schema, min_df=1)
    model.fit(corpus.utterances, mixed_targets(corpus.utterances, corpus.schema, lam=0.0))
    model.save(tmp_path / "model")
    items = corpus_items(EN_BAD, EN_OK, split="test", n_copies=2, start=50)
    items["broken"] = _item("lists differ", "A1,A2", "0")
    path = write_json(items, tmp_path / "En_test.json")
    out = tmp_path / "annotated"
    assert main(["annotate", str(path), "--model", str(tmp_path / "model"), "--out", str(out), "--chunk-size", "5"]) == 0
    manifest = json.loads((out / "_manifest.json").read_text())
    parts = [pd.read_parquet(out / f"part-{i:06d}.parquet") for i in range(manifest["chunks"])]
    annotated = pd.concat(parts)
    assert manifest["chunks"] >= 3 and sorted(annotated["doc_id"]) == sorted(str(i) for i in range(50, 66))
    rejects = [json.loads(line) for line in (out / "_rejects.jsonl").read_text().splitlines()]
    assert [(r["doc_id"], r["field"]) for r in rejects] == [("broken", "annotations")]


# ------------------------------------------------------------------ a severity head's final label


def _severity_item(annotations, hard):
    item = convabuse_item(["Hi", "hello", "How can I help?", "whatever"], annotations)
    item["hard_label"] = hard
    return item


def test_a_severity_head_gets_the_majority_of_its_ratings_as_final_label(tmp_path):
    # classes: -3 -> 0, -2 -> 1, -1 -> 2, 0 -> 3, 1 -> 4
    items = {
        "clear": _severity_item("-2,-2,0", "1"),
        "mild": _severity_item("1,1,0,-1", "0"),
        "tie_side": _severity_item("-1,-1,0,0", "0"),      # -1 and 0 tie; the file says not abusive: 0
        "tie_abusive": _severity_item("-1,-1,0,0", "1"),   # same votes, the publishers said abusive: -1
        "tie_random": _severity_item("-3,-1,0,1", "1"),    # all tie; abusive side: -3 or -1, seeded
    }
    path = write_json(items, tmp_path / "Sev_train.json")
    corpus = load_corpus(path)
    assert corpus.problems == [] and corpus.schema.heads[0].ordinal
    rated = corpus.utterances.set_index("sent_id")["labeler_abuse"]
    assert rated["clear"] == 1 and rated["mild"] == 4
    assert rated["tie_side"] == 3 and rated["tie_abusive"] == 2
    assert rated["tie_random"] in (0, 2)
    # the context turns carry no final label; the rated turn names its annotators in slot order
    u = corpus.utterances
    assert u[u["doc_id"] == "clear"]["labeler_abuse"].isna().tolist() == [True, True, True, False]
    clear = u.set_index("sent_id").loc["clear"]
    assert [clear[f"annotator{k}_abuse"] for k in (1, 2, 3)] == ["Ann0", "Ann1", "Ann2"]
    assert (u.set_index("sent_id").loc["clear:agent", ["annotator1_abuse", "annotator2_abuse"]] == "").all()
    # the random tie-break depends on the item alone, not on the file's order
    again = load_corpus(write_json(dict(reversed(list(items.items()))), tmp_path / "Sev2_train.json"))
    assert again.utterances.set_index("sent_id")["labeler_abuse"].dropna().to_dict() == rated.dropna().to_dict()
    # many random ties: both tied classes occur (it is a coin, not a fixed pick)
    ties = {f"t{i}": _severity_item("-3,-1,0,1", "1") for i in range(40)}
    picks = load_corpus(write_json(ties, tmp_path / "Ties_train.json")).utterances["labeler_abuse"].dropna()
    assert set(picks.astype(int)) == {0, 2}


def test_a_severity_corpus_trains_without_resolving_labels(tmp_path):
    from psyattrs.experiments.dataset import fill_final_labels

    items = {f"s{i}": _severity_item(v, h) for i, (v, h) in enumerate(
        [("-2,-2,0", "1"), ("1,1,0", "0"), ("0,0,1", "0"), ("-3,-3,-1", "1")] * 3)}
    corpus = load_corpus(write_json(items, tmp_path / "Sev_train.json"))
    table, resolved = fill_final_labels(corpus.utterances, corpus.schema, method="opela")
    assert resolved == [] and table is corpus.utterances


# ------------------------------------------------------------------ the annotator-aware model

STRICT = [f"S{k}" for k in range(8)]   # call every borderline text offensive
LENIENT = [f"L{k}" for k in range(8)]  # call none of them offensive
BORDER = ["damn that referee", "what a silly take", "crazy stuff tonight", "ugh so dumb"]


def annotator_items(*, n_copies, seed, start=0, split="train", pool=None):
    """Clear items everyone agrees on, and borderline items whose label is who rated them."""
    rng = np.random.default_rng(seed)
    pool = pool or STRICT + LENIENT
    items = {}
    i = start
    for copy in range(n_copies):
        for texts, kind in ((EN_BAD, "bad"), (EN_OK, "ok"), (BORDER, "border")):
            for t in texts:
                who = [pool[k] for k in rng.choice(len(pool), size=5, replace=False)]
                if kind == "border":
                    votes = [int(w.startswith("S")) for w in who]
                else:
                    votes = [int(kind == "bad")] * 5
                items[str(i)] = _item(f"{t} {copy}", ",".join(who), ",".join(map(str, votes)), split=split)
                i += 1
    return items


def _without_annotators(table):
    return table.drop(columns=[c for c in table.columns if c.startswith("annotator")])


def test_tfidf_annotators_learns_who_is_strict_and_averages_over_the_items_own_annotators(tmp_path):
    train = load_corpus(write_json(annotator_items(n_copies=12, seed=1), tmp_path / "A_train.json"))
    test = load_corpus(write_json(annotator_items(n_copies=3, seed=2, start=1000, split="test"),
                                  tmp_path / "A_test.json"), schema=train.schema)
    targets = mixed_targets(train.utterances, train.schema, lam=0.0)
    plain = build_model("tfidf", train.schema, min_df=1).fit(train.utterances, targets)
    aware = build_model("tfidf_annotators", train.schema, min_df=1).fit(train.utterances, targets)
    u = test.utterances
    head = train.schema.heads[0]
    dist = M.labeler_distribution(u, head)
    p_plain = plain.predict_proba(u)["offensiveness"]
    p_aware = aware.predict_proba(u)["offensiveness"]
    border = u["text"].str.rsplit(" ", n=1).str[0].isin(BORDER).to_numpy()
    strict_share = np.array([sum(a.startswith("S") for a in who) / 5 for who in row_annotators(u, "offensiveness")])
    # the borderline items' label is the share of strict raters: only the aware model sees it
    from scipy.stats import spearmanr

    assert spearmanr(p_aware[border, 1], strict_share[border]).statistic > 0.8
    floor = M.soft_cross_entropy(dist[border], dist[border])  # the annotators' own entropy: CE = H + KL
    kl_aware = M.soft_cross_entropy(dist[border], p_aware[border]) - floor
    kl_plain = M.soft_cross_entropy(dist[border], p_plain[border]) - floor
    assert kl_aware < 0.5 * kl_plain
    assert M.soft_cross_entropy(dist, p_aware) < M.soft_cross_entropy(dist, p_plain)
    # the prediction is the mean of the per-annotator distributions: one strict + one lenient rater
    # lies between one strict and one lenient alone
    one = u.iloc[[int(np.flatnonzero(border)[0])]].copy()
    p = {}
    for who in ("S0", "L0", "S0,L0"):
        for k in range(1, 6):
            one[f"annotator{k}_offensiveness"] = (who.split(",") + [""] * 5)[k - 1]
        p[who] = aware.predict_proba(one)["offensiveness"][0, 1]
    assert p["L0"] < p["S0,L0"] < p["S0"] and p["S0,L0"] == pytest.approx((p["S0"] + p["L0"]) / 2)
    assert p["S0"] > 0.7 and p["L0"] < 0.3


def test_tfidf_annotators_falls_back_to_the_text_for_unseen_annotators_and_round_trips(tmp_path):
    train = load_corpus(write_json(annotator_items(n_copies=6, seed=3), tmp_path / "A_train.json"))
    new = [f"N{k}" for k in range(6)]
    unseen = load_corpus(write_json(annotator_items(n_copies=1, seed=4, start=500, pool=new), tmp_path / "N_dev.json"),
                         schema=train.schema)
    aware = build_model("tfidf_annotators", train.schema, min_df=1, min_ratings=2)
    aware.fit(train.utterances, mixed_targets(train.utterances, train.schema, lam=0.0))
    u = unseen.utterances
    with_ids = aware.predict_proba(u)["offensiveness"]
    without = aware.predict_proba(_without_annotators(u))["offensiveness"]
    np.testing.assert_allclose(with_ids, without, atol=1e-12)
    # a table whose annotators the model knows predicts differently from the text alone
    t = train.utterances
    assert np.abs(aware.predict_proba(t)["offensiveness"] - aware.predict_proba(_without_annotators(t))["offensiveness"]).max() > 0.1
    # annotators with fewer than min_ratings ratings get no bias of their own
    ratings = pd.Series([a for who in row_annotators(t, "offensiveness") for a in who]).value_counts()
    assert set(aware.heads_["offensiveness"].annotators_) == set(ratings[ratings >= 2].index)
    # saved and loaded, it predicts the same
    folder = tmp_path / "model"
    aware.save(folder)
    from psyattrs.models.base import load_model

    np.testing.assert_allclose(load_model(folder).predict_proba(t)["offensiveness"], aware.predict_proba(t)["offensiveness"])
    with pytest.raises(ValueError, match="annotator_scale"):
        build_model("tfidf_annotators", train.schema, annotator_scale=0)
