"""The transformer's optional features: `predict.quantize`, persona text and speaker traits in the
input, annotator embeddings for large crowds, and `torchrun -m psyattrs train`.

Tiny models (one layer, 32 wide) on a few synthetic conversations or a generated LeWiDi file;
nothing downloads and no real corpus text is used.
"""

from __future__ import annotations

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
from psyattrs.models.transformer import inputs as inputs_module
from psyattrs.models.transformer.inputs import build_inputs, persona_texts, speaker_profiles
from psyattrs.models.transformer.tokenizer import train_tokenizer
from psyattrs.features.context import prepare_table
from psyattrs.schema import OPELA
from psyattrs.synth import synthesize

REPO = Path(__file__).resolve().parents[1]
TINY = dict(hidden_size=32, layers=1, attention_heads=2, intermediate_size=64, vocab_size=300, max_length=48,
            epochs=1, batch_size=32, learning_rate=2e-3, log_every=1)
SHRINK = ["data.synthetic.dialogues=6", "data.synthetic.rare_boost=5", "model.params.epochs=1",
          "model.params.hidden_size=32", "model.params.layers=1", "model.params.intermediate_size=64",
          "model.params.vocab_size=300", "model.params.max_length=48"]
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
    real = inputs_module.build_inputs

    def spy(table, tokenizer, **kw):
        out = real(table, tokenizer, **kw)
        seen.append((table["sent_id"].astype(str).tolist(), [x.tolist() for x in out.ids]))
        return out

    monkeypatch.setattr(inputs_module, "build_inputs", spy)
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
