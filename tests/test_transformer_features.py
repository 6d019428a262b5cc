"""The transformer's optional features: `predict.quantize`, persona text and speaker traits in the
input, annotator embeddings for large crowds, and `torchrun -m psyattrs train`.

Tiny models (one layer, 32 wide) on a few synthetic conversations or a generated LeWiDi file;
nothing downloads and no real corpus text is used.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest

from psyattrs import Predictor
from psyattrs.experiments.config import load_config
from psyattrs.experiments.runner import build_from_config, train
from psyattrs.labels.soft import mixed_targets
from psyattrs.models.base import build_model, load_model
from psyattrs.models.transformer import model as model_module  # the module that calls build_inputs
from psyattrs.models.transformer.inputs import build_inputs, persona_texts, speaker_profiles
from psyattrs.models.transformer.tokenizer import train_tokenizer
from psyattrs.features.context import prepare_table
from psyattrs.schema import OPELA
from psyattrs.synth import synthesize

from _transformer_tiny import SHRINK, TINY

REPO = Path(__file__).resolve().parents[1]
TINY_CONFIG = REPO / "experiments" / "transformer_tiny.yaml"


@pytest.fixture(scope="module")
def corpus():
    table = synthesize(6, seed=3, rare_boost=5).utterances
    docs = table["doc_id"].unique()
    return (table[table["doc_id"].isin(docs[:4])].reset_index(drop=True),
            table[table["doc_id"].isin(docs[4:])].reset_index(drop=True))


def _targets(table):
    return mixed_targets(table, OPELA, lam=0.5)


# ------------------------------------------------------------------------------ predict.quantize


def test_predict_quantize_is_a_predict_key_and_the_old_key_is_refused():
    assert build_from_config(load_config(TINY_CONFIG)).params["quantize"] is False
    model = build_from_config(load_config(TINY_CONFIG, ["predict.quantize=true"]))
    assert model.params["quantize"] is True
    config = load_config(TINY_CONFIG, ["predict.quantize=true"])
    assert config.flatten()["predict.quantize"] == "True" and config.to_dict()["predict"] == {"quantize": True}
    with pytest.raises(ValueError, match=r"model.params.quantize: moved to predict.quantize"):
        build_from_config(load_config(TINY_CONFIG, ["model.params.quantize=true"]))
    with pytest.raises(ValueError, match="predict.quantize: must be true or false"):
        load_config(TINY_CONFIG, ["predict.quantize=3"])
    with pytest.raises(ValueError, match="predict.quantize: applies to model.kind transformer only"):
        load_config(REPO / "experiments" / "majority.yaml", ["predict.quantize=true"])
    with pytest.raises(ValueError, match="unknown config key 'predict.batch'"):
        load_config(TINY_CONFIG, ["predict.batch=3"])


# ------------------------------------------------------------------- persona text, speaker traits


def _profiled():
    return pd.DataFrame({
        "doc_id": ["a"] * 4 + ["b"],
        "position": [0, 1, 2, 3, 0],
        "person_type": ["user", "persona", "user", "persona", "user"],
        "person_name_original": ["민수", "달콤 도넛", "민수", "달콤 도넛", ""],
        "speaker_gender": ["male", "", "male", "", "female"],
        "speaker_loc": ["福建 厦门", "", "福建 厦门", "", ""],
        "speaker_tags": ["旅游;学生", "", "旅游;学生", "", ""],
        "text": ["하나 둘", "셋 넷 다섯", "여섯 일곱", "여덟 아홉 열", "스물"],
    })


def _tokens(tok, enc, row):
    return tok.convert_ids_to_tokens(enc.ids[row].tolist())


def test_persona_text_and_profile_come_first_and_the_context_is_truncated_before_them():
    table = _profiled()
    assert persona_texts(prepare_table(table)).tolist() == ["달콤 도넛"] * 4 + [""]
    assert speaker_profiles(table).tolist() == ["male 福建 厦门 旅游 学生", "", "male 福建 厦门 旅游 学生", "", "female"]
    with_concept = table.assign(persona_concept=["", "디저트 좋아", "", "", ""])
    assert persona_texts(prepare_table(with_concept)).tolist() == ["디저트 좋아"] * 4 + [""]  # the column wins
    words = table["text"].tolist() + ["달콤 도넛 male 福建 厦门 旅游 学生 female"]
    tok = train_tokenizer(words, vocab_size=200, min_frequency=1)
    kw = dict(previous=2, speaker_roles=False, persona_text=True, speaker_traits=True)
    persona = ["달콤", "도넛", "[SEP]"]
    profile = ["male", "福", "建", "厦", "门", "旅", "游", "学", "生", "[SEP]"]
    target = ["[TGT]", "여섯", "일곱", "[/TGT]", "[SEP]"]
    older, newer = ["하나", "둘", "[SEP]"], ["셋", "넷", "다섯", "[SEP]"]

    def row2(max_length, **extra):
        return _tokens(tok, build_inputs(table, tok, max_length=max_length, **{**kw, **extra}), 2)

    assert row2(64) == ["[CLS]", *persona, *profile, *older, *newer, *target]
    # shorter: the context goes first, oldest sentence first; the prefixes stay whole
    assert row2(24) == ["[CLS]", *persona, *profile, *newer, *target]
    assert row2(20) == ["[CLS]", *persona, *profile, *target]
    # then the persona text is cut at its end, then dropped; the profile is kept, the target never
    assert row2(18) == ["[CLS]", "달콤", "[SEP]", *profile, *target]
    assert row2(16) == ["[CLS]", *profile, *target]
    assert row2(10) == ["[CLS]", "male", "福", "建", "[SEP]", *target]
    # prefix_max_length caps the two prefixes together
    assert row2(64, prefix_max_length=12) == ["[CLS]", "달콤", "[SEP]", *profile, *older, *newer, *target]
    assert row2(64, prefix_max_length=0) == _tokens(tok, build_inputs(table, tok, max_length=64, previous=2,
                                                                    speaker_roles=False), 2)
    # a row without a profile gets none; a conversation without a persona gets no persona text
    assert _tokens(tok, build_inputs(table, tok, max_length=64, **kw), 1) == [
        "[CLS]", *persona, *older, "[TGT]", "셋", "넷", "다섯", "[/TGT]", "[SEP]"]
    assert _tokens(tok, build_inputs(table, tok, max_length=64, **kw), 4) == [
        "[CLS]", "female", "[SEP]", "[TGT]", "스물", "[/TGT]", "[SEP]"]
    # the target span still covers the target only
    enc = build_inputs(table, tok, max_length=64, **kw)
    a, b = enc.span[2]
    assert tok.convert_ids_to_tokens(enc.ids[2][a:b].tolist()) == target[:-1]
    with pytest.raises(ValueError, match="prefix_max_length must be an integer >= 0"):
        build_inputs(table, tok, max_length=64, prefix_max_length=-1, **kw)


def test_training_and_prediction_build_identical_inputs(corpus, monkeypatch, tmp_path):
    train_part, valid_part = corpus
    traits = {"speaker_gender": "female", "speaker_loc": "서울", "speaker_tags": "고양이;빵"}
    train_part = train_part.assign(**{k: np.where(train_part["person_type"] == "user", v, "") for k, v in traits.items()})
    valid_part = valid_part.assign(**{k: np.where(valid_part["person_type"] == "user", v, "") for k, v in traits.items()})
    seen = []
    real = build_inputs

    def spy(table, tokenizer, **kw):
        out = real(table, tokenizer, **kw)
        seen.append((table["sent_id"].astype(str).tolist(), [x.tolist() for x in out.ids]))
        return out

    monkeypatch.setattr(model_module, "build_inputs", spy)
    model = build_model("transformer", OPELA, **TINY, context_previous=2, persona_text=True, speaker_traits=True)
    model.fit(train_part, _targets(train_part), valid=(valid_part, _targets(valid_part)))
    trained = {sid: ids for sids, batch in seen for sid, ids in zip(sids, batch)}
    first = train_part[train_part["doc_id"] == train_part["doc_id"].iloc[0]]
    user = first.loc[first["person_type"] == "user", "sent_id"].astype(str).iloc[0]
    text = model._tokenizer.decode(trained[user]).replace(" ", "")
    persona = first.loc[first["person_type"] == "persona", "person_name_original"].iloc[0].replace(" ", "")
    assert text.startswith(f"[CLS]{persona}[SEP]female서울고양이빵[SEP]")  # the scratch tokenizer knows them
    seen.clear()
    model.save(tmp_path / "m")
    Predictor(tmp_path / "m").predict(valid_part)
    predicted = {sid: ids for sids, batch in seen for sid, ids in zip(sids, batch)}
    assert predicted and all(predicted[s] == trained[s] for s in predicted)
    # and the prefixes are really there: without the trait columns the inputs differ
    seen.clear()
    Predictor(tmp_path / "m").predict(valid_part.drop(columns=list(traits)))
    bare = {sid: ids for sids, batch in seen for sid, ids in zip(sids, batch)}
    users = valid_part.loc[valid_part["person_type"] == "user", "sent_id"].astype(str)
    assert all(bare[s] != predicted[s] for s in users)


# ------------------------------------------------------------------------ annotator embeddings

BAD = ["awful idiots", "stupid trash", "hate you all", "disgusting liars", "nasty fools", "ugly cheats"]
OK = ["lovely morning", "thanks friend", "nice game today", "happy birthday", "good luck", "sweet dreams"]
N_ANNOTATORS = 60


def _crowd_file(path: Path, *, seed: int = 0) -> Path:
    """A LeWiDi-format file rated by 60 annotators, 5 per item: Ann0-Ann2 always say 1, Ann3-Ann5
    always 0, the others follow the words (mostly)."""
    rng = np.random.default_rng(seed)
    items = {}
    for i in range(240):
        cls = i % 2
        text = f"{(BAD if cls else OK)[i // 2 % 6]} {i}"
        who = [int(rng.integers(0, 6))] + [int(w) for w in rng.choice(np.arange(6, N_ANNOTATORS), 4, replace=False)]
        votes = [1 if w < 3 else 0 if w < 6 else int(rng.random() < (0.9 if cls else 0.1)) for w in who]
        share = sum(votes) / 5
        split = "train" if i < 160 else "dev" if i < 200 else "test"
        items[str(i)] = {"text": text, "annotation task": "offensiveness detection", "number of annotations": 5,
                         "annotations": ",".join(map(str, votes)), "annotators": ",".join(f"Ann{w}" for w in who),
                         "lang": "en", "hard_label": str(int(share > 0.5)),
                         "soft_label": {"0": round(1 - share, 4), "1": round(share, 4)}, "split": split,
                         "other_info": {}}
    path.write_text(json.dumps(items, indent=1), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def crowd(tmp_path_factory):
    folder = tmp_path_factory.mktemp("crowd")
    path = _crowd_file(folder / "crowd.json")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    config = load_config(TINY_CONFIG, [f"data.path={path}", "model.labeler_heads=true", "context.previous=0",
                                       "model.params.epochs=6", "model.params.batch_size=8", "model.params.hidden_size=32", "model.params.layers=1",
                                       "model.params.intermediate_size=64", "model.params.vocab_size=300",
                                       "model.params.max_length=24", "model.params.learning_rate=0.005",
                                       "model.params.patience=6", "model.calibration=null", f"tracking.uri={uri}"])
    return train(config, quiet=True), path


def test_annotator_embeddings_train_on_a_large_crowd_and_predict_per_annotator(crowd, tmp_path):
    from psyattrs.data import load_corpus

    result, path = crowd
    model = result.model
    assert model.labeler_mode_ == "embeddings" and len(model.annotators_) == N_ANNOTATORS
    assert model._network.heads["annotator_embedding"].num_embeddings == N_ANNOTATORS + 1
    head = model.schema.head_names[0]
    test = load_corpus(path).utterances
    test = test[test["split"] == "test"].reset_index(drop=True)
    # who would say what: the always-1 annotators against the always-0 ones
    per = model.predict_annotators(test, ["Ann0", "Ann1", "Ann2", "Ann3", "Ann4", "Ann5"])
    yes = per[[f"{head}@Ann{k}" for k in range(3)]].to_numpy().mean()
    no = per[[f"{head}@Ann{k}" for k in range(3, 6)]].to_numpy().mean()
    assert yes - no > 0.3, (yes, no)
    # the item's prediction is the mean over its own annotators' distributions
    named = test  # the reader names who gave each vote slot (annotator{k}_{head})
    assert {f"annotator{k}_{head}" for k in range(1, 6)} <= set(named.columns)
    proba = model._predict_raw(named)[head]
    row = 0
    who = [named.loc[row, f"annotator{k}_{head}"] for k in range(1, 6)]
    alone = [model._predict_raw(named.iloc[[row]].assign(**{f"annotator{k}_{head}": (a if k == 1 else "")
                                                          for k in range(1, 6)}))[head][0] for a in who]
    assert np.allclose(proba[row], np.mean(alone, axis=0), atol=1e-5)
    # unknown or absent annotators: the learned average annotator
    absent = model._predict_raw(named.drop(columns=[c for c in named.columns if c.startswith("annotator")]))[head]
    unknown = model._predict_raw(named.assign(**{f"annotator{k}_{head}": "Nobody" for k in range(1, 6)}))[head]
    assert np.allclose(absent, unknown) and not np.allclose(absent, proba)
    # saved and loaded (the logged model, through pyfunc's folder): the same predictions
    model.save(tmp_path / "m")
    again = load_model(tmp_path / "m")
    assert again.annotators_ == model.annotators_
    assert np.allclose(again._predict_raw(named)[head], proba)
    # Predictor on the read file uses the items' annotators, as the run's own scoring does
    assert np.allclose(Predictor(tmp_path / "m").predict(test)[f"{head}_proba_1"], proba[:, 1], atol=1e-5)
    bare = test.drop(columns=[c for c in test.columns if c.startswith("annotator")])
    assert np.allclose(Predictor(tmp_path / "m").predict(bare)[f"{head}_proba_1"], absent[:, 1], atol=1e-5)
    with pytest.raises(ValueError, match="annotator embeddings for 60 annotators"):
        model.predict_labelers(test)
    with pytest.raises(ValueError, match=r"annotator\(s\) \['Ann999'\] are not among the 60"):
        model.predict_annotators(test, ["Ann999"])


def test_per_labeler_heads_stay_for_a_few_labelers_and_crowds_choose_embeddings(corpus, tmp_path):
    from psyattrs.data import load_corpus

    train_part, valid_part = corpus
    few = build_model("transformer", OPELA, **TINY, labeler_heads=True).fit(train_part, _targets(train_part))
    assert few.labeler_mode_ == "heads" and few.labelers_ == [1, 2, 3]
    assert few.predict_labelers(valid_part).shape == (len(valid_part), 3 * len(OPELA))
    many = train_part.copy()
    for k in range(4, 30):
        many[f"labeler{k}_strange"] = many["labeler1_strange"]
    with pytest.raises(ValueError, match="has 29 labelers; per-labeler heads are for corpora with a few labelers"):
        build_model("transformer", OPELA, **TINY, labeler_heads=True, labeler_mode="heads").fit(many, _targets(many))
    auto = build_model("transformer", OPELA, **TINY, labeler_heads=True).fit(many, _targets(many))
    assert auto.labeler_mode_ == "embeddings" and auto.annotators_[:3] == ["labeler1", "labeler10", "labeler11"]
    corpus_ = load_corpus(_crowd_file(tmp_path / "crowd.json"))
    named = corpus_.utterances
    targets = mixed_targets(named, corpus_.schema, lam=0.5)
    with pytest.raises(ValueError, match="vote slots of a crowd"):
        build_model("transformer", corpus_.schema, **TINY, labeler_heads=True, labeler_mode="heads").fit(named, targets)
    with pytest.raises(ValueError, match="labeler_mode 'people' is not one of"):
        build_model("transformer", OPELA, labeler_mode="people")


@pytest.fixture(scope="module")
def quantized_run(tmp_path_factory):
    """The shipped tiny config, shrunk, with predict.quantize and the persona text, trained and tracked."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('quantized') / 'mlflow.db'}"
    config = load_config(TINY_CONFIG, [*SHRINK, "predict.quantize=true", "model.params.persona_text=true",
                                       f"tracking.uri={uri}"])
    return train(config, quiet=True), uri


def test_predict_quantize_reaches_predictor_pyfunc_and_annotate(quantized_run, corpus, tmp_path):
    from psyattrs.serving.annotate import annotate, read_annotations

    result, uri = quantized_run
    client = mlflow.MlflowClient(tracking_uri=uri)
    assert client.get_run(result.run_id).data.params["predict.quantize"] == "True"
    model = result.model
    assert model.params["quantize"] and model._quantized is not None  # the run's test scores were quantised
    frame = corpus[1][["doc_id", "position", "person_type", "person_name_original", "is_pause", "text"]]
    float_model = load_model(_saved(model, tmp_path / "float", quantize=False))
    direct = Predictor(model).predict(frame)
    plain = Predictor(float_model).predict(frame)
    assert not np.allclose(direct["empathy_proba_2"], plain["empathy_proba_2"])  # quantised: not the float model
    mlflow.set_tracking_uri(uri)
    try:
        pyfunc = mlflow.pyfunc.load_model(result.model_uri)
    finally:
        mlflow.set_tracking_uri(None)
    served = pyfunc.predict(frame)
    assert np.allclose(served["empathy_proba_2"], direct["empathy_proba_2"])
    # the persona column reaches the model through the pyfunc signature too
    bare = pyfunc.predict(frame.drop(columns=["person_name_original"]))
    assert not np.allclose(bare["empathy_proba_2"], served["empathy_proba_2"])
    path = tmp_path / "in.csv"
    frame.to_csv(path, index=False)
    # one chunk, so the same batches as above: dynamic int8 scales each batch by its own range,
    # so another batching moves the probabilities slightly
    annotate(path, _saved(model, tmp_path / "q"), tmp_path / "out.parquet", chunk_size=len(frame), progress=False)
    out = read_annotations(tmp_path / "out.parquet")
    assert np.allclose(out["empathy_proba_2"].to_numpy(), direct["empathy_proba_2"].to_numpy())
    assert not np.allclose(out["empathy_proba_2"].to_numpy(), plain["empathy_proba_2"].to_numpy())


def _saved(model, folder: Path, **params) -> Path:
    model.save(folder)
    if params:
        doc = json.loads((folder / "model.json").read_text())
        doc["settings"].update(params)
        (folder / "model.json").write_text(json.dumps(doc))
    return folder


# ------------------------------------------------------------------------ torchrun -m psyattrs


@pytest.mark.slow
def test_torchrun_module_cli_trains_on_two_cpu_processes_with_one_run(tmp_path):
    """`torchrun -m psyattrs train`: both ranks end with the same weights, rank 0 alone makes the run.

    The one torchrun test of the suite (each launch costs tens of seconds on two cores): the CLI runs
    the same `train` as the Python API, so this covers both."""
    if importlib.util.find_spec("torch.distributed.run") is None:
        pytest.skip("torch.distributed.run (torchrun) is not available")
    import torch.distributed

    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("torch.distributed with the gloo backend is not available")
    (tmp_path / "store").mkdir()
    (tmp_path / "cwd").mkdir()
    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    env.pop("MLFLOW_TRACKING_URI", None)
    sets = [a for s in [*SHRINK, "model.params.epochs=2", f"tracking.uri={uri}", "tracking.experiment=ddp-cli"]
            for a in ("--set", s)]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "psyattrs", "train", str(TINY_CONFIG), "--quiet", *sets]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path / "cwd")
    assert done.returncode == 0, done.stderr[-3000:]
    assert list((tmp_path / "cwd").iterdir()) == []  # rank 1 made no store (mlflow.db, mlruns) of its own
    digests = dict(line.split(": rank ", 1)[1].split(" of 2: weights ") for line in done.stderr.splitlines()
                   if line.startswith("psyattrs train: rank ") and ": weights " in line)
    assert sorted(digests) == ["0", "1"] and digests["0"] == digests["1"]
    assert "rank 1 of the torchrun launch trained with the others" in done.stderr
    assert "warning" not in done.stderr.lower()
    run_id = done.stdout.strip().splitlines()[-1]
    assert done.stdout.count("tracking store") == 1  # one printout: rank 0's
    client = mlflow.MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("ddp-cli").experiment_id])
    assert [r.info.run_id for r in runs] == [run_id] and runs[0].info.status == "FINISHED"
    assert [m.value for m in client.get_metric_history(run_id, "fit_epoch")] == [1.0, 2.0]
    logged = Predictor(f"runs:/{run_id}/model", tracking_uri=uri).model
    assert logged.weights_digest() == digests["0"]
