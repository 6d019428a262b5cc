"""The USE sentence-encoder coherence feature (issue 27): the cosine column, learnt like the other
coherence features, the setting that switches it on (off by default), and the per-corpus cache of
the embeddings (a hit embeds nothing, a damaged entry is embedded again). The texts are made up."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from psyattrs.align import AlignSettings, align_public, sentvec
from psyattrs.align.cache import MANIFEST
from psyattrs.align.coherence import FEATURES, USE_FEATURE, CoherenceModel, PairFeaturizer
from psyattrs.data.opela import read_public
from psyattrs.errors import PsyattrsWarning

from test_align import _public


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PSYATTRS_CACHE", str(tmp_path / "cache"))


class _Fake:
    """A stand-in encoder: a fixed random unit vector per distinct text; counts what it embeds."""

    def __init__(self):
        self.calls, self.seen = 0, 0

    def encode(self, texts):
        self.calls += 1
        self.seen += len(texts)
        out = np.array([np.random.default_rng(sum(map(ord, t)) + len(t)).normal(size=sentvec.DIM) for t in texts])
        return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture
def fake(monkeypatch):
    enc = _Fake()
    monkeypatch.setattr(sentvec, "_encoder", lambda: enc)
    return enc


def test_the_real_encoder_puts_a_paraphrase_nearer_than_an_unrelated_line():
    got = sentvec.sentence_vectors(["오늘 날씨가 정말 좋네요", "날씨가 참 맑고 좋아요", "저는 어제 회사에서 야근을 했어요"], progress=False)
    v = {k: x for k, x in got.items()}
    assert all(x.shape == (sentvec.DIM,) and x.dtype == np.float32 for x in v.values())
    assert all(abs(np.linalg.norm(x) - 1) < 1e-3 for x in v.values())
    same = v["오늘 날씨가 정말 좋네요"] @ v["날씨가 참 맑고 좋아요"]
    other = v["오늘 날씨가 정말 좋네요"] @ v["저는 어제 회사에서 야근을 했어요"]
    assert same > other + 0.1


def test_the_cosine_column_follows_the_features_and_is_zero_without_a_vector():
    vectors = {"a": np.array([1.0, 0.0], np.float32), "b": np.array([0.6, 0.8], np.float32),
               "c": np.array([0.0, 1.0], np.float32)}
    feat = PairFeaturizer(["a", "b", "c", "d"], vectors=vectors)
    assert feat.names == (*FEATURES, USE_FEATURE)
    X = feat.features(["a", "d"], ["b", "c"])
    assert X.shape == (2, 2, len(FEATURES) + 1)
    assert X[0, :, -1].tolist() == pytest.approx([0.6, 0.0])
    assert X[1, :, -1].tolist() == [0.0, 0.0]  # "d" has no vector
    # without vectors the design is the one of before: FEATURES only, the same values
    plain = PairFeaturizer(["a", "b", "c", "d"]).features(["a", "d"], ["b", "c"])
    assert plain.shape == (2, 2, len(FEATURES)) and np.array_equal(plain, X[..., :-1])


def _word(rng) -> str:
    """Three random Hangul syllables: lines made of them share no word or bigram by design."""
    return "".join(chr(0xAC00 + int(x)) for x in rng.integers(0, 11172, 3))


def _topic_conversations(n=12, k=5, seed=0):
    """Replies that share no word, bigram or morpheme with the line they answer, only a 'meaning'
    (a topic vector): only the cosine can tell which persona line a user line answers."""
    rng = np.random.default_rng(seed)
    persona, user, events, vectors = [], [], [], {}
    for c in range(n):
        p = [_word(rng) + " " + _word(rng) for j in range(k)]
        u = [_word(rng) + " " + _word(rng) for j in range(k)]
        for j in range(k):
            topic = rng.normal(size=16)
            for line in (p[j], u[j]):
                v = topic + 0.3 * rng.normal(size=16)
                vectors[line] = (v / np.linalg.norm(v)).astype(np.float32)
        persona.append(p)
        user.append(u)
        at = np.ones((k, k))
        change = np.eye(k) * 0.9 + 0.02  # the posterior: after persona line j comes user line j
        events.append((change, at, change.T.copy(), at.copy()))
    return persona, user, events, vectors


@pytest.mark.parametrize("only", [(), (USE_FEATURE,)])
def test_the_model_learns_the_cosine_from_the_posteriors(only, monkeypatch):
    persona, user, events, vectors = _topic_conversations()
    monkeypatch.setattr("psyattrs.align.coherence.sentence_vectors", lambda lines, **kw: vectors)
    model = CoherenceModel(persona, user, np.arange(12) % 2, use=True, only=only)
    if only:
        assert "bigram_overlap" not in model.names and USE_FEATURE in model.names and "a_len" in model.names
    model.fit(events)
    assert model.fitted and model.coef[USE_FEATURE] > 0
    pu = model.scores[4][0]
    off = ~np.eye(5, dtype=bool)
    assert np.diag(pu).mean() > pu[off].mean() + 0.5
    # without the vectors nothing in these lines tells the answer from the others
    blind = CoherenceModel(persona, user, np.arange(12) % 2)
    blind.fit(events)
    assert USE_FEATURE not in blind.coef
    b = blind.scores[4][0]
    assert abs(np.diag(b).mean() - b[off].mean()) < 0.5 * (np.diag(pu).mean() - pu[off].mean())


def test_settings_switch_it_on_and_validate_the_kept_features():
    assert AlignSettings().coherence_use is False and AlignSettings().coherence_only == ()
    s = AlignSettings(coherence_use=True, coherence_only=["use_cosine", "bigram_overlap"])
    assert s.coherence_only == ("use_cosine", "bigram_overlap")
    with pytest.raises(ValueError, match="needs coherence_use"):
        AlignSettings(coherence_only=("use_cosine",))
    with pytest.raises(ValueError, match="coherence_only"):
        AlignSettings(coherence_only=("a_len",))  # one-sided: always kept, not a pair feature
    with pytest.raises(ValueError, match="coherence_only"):
        AlignSettings(coherence_only="bigram_overlap")
    with pytest.raises(ValueError, match="coherence_use"):
        AlignSettings(coherence_use="yes")


def test_the_cache_embeds_a_corpus_once_and_redoes_a_damaged_entry(fake):
    texts = ["안녕하세요", "커피 주세요", "안녕하세요", "네 여기요"]
    first = sentvec.sentence_vectors(texts, progress=False)
    assert sorted(first) == sorted(set(texts)) and fake.seen == 3
    (entry,) = list(sentvec.embeddings_folder().iterdir())
    assert (entry / MANIFEST).is_file() and (entry / "vectors.npy").is_file()
    # a hit: read back, nothing embedded; the order and repeats of the lines do not matter
    again = sentvec.sentence_vectors(list(reversed(texts)), progress=False)
    assert fake.seen == 3 and all(np.array_equal(first[t], again[t]) for t in first)
    # another corpus is another entry
    sentvec.sentence_vectors(texts + ["또 봐요"], progress=False)
    assert fake.seen == 7 and len(list(sentvec.embeddings_folder().iterdir())) == 2
    # a damaged entry: one warning, embedded again, the same vectors
    data = (entry / "vectors.npy").read_bytes()
    (entry / "vectors.npy").write_bytes(data[: len(data) // 2])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        redone = sentvec.sentence_vectors(texts, progress=False)
    assert [str(w.message) for w in caught if issubclass(w.category, PsyattrsWarning)] == [
        f"alignment cache entry {entry} is damaged (vectors.npy has {len(data) // 2:,} bytes, the manifest says "
        f"{len(data)}): discarded, the alignment is redone"]
    assert fake.seen == 10 and all(np.array_equal(first[t], redone[t]) for t in first)
    assert sentvec.sentence_vectors(texts, progress=False) and fake.seen == 10  # re-cached
    # cache=False embeds and writes nothing
    sentvec.sentence_vectors(["새 문장"], cache=False, progress=False)
    assert fake.seen == 11 and len(list(sentvec.embeddings_folder().iterdir())) == 2


def test_the_key_depends_on_the_texts_and_the_encoder_version():
    a = sentvec.corpus_key(["가", "나"], "0.2.1")
    assert a == sentvec.corpus_key(["가", "나"], "0.2.1")
    assert a != sentvec.corpus_key(["가", "나"], "0.2.2") and a != sentvec.corpus_key(["가", "다"], "0.2.1")
    assert a != sentvec.corpus_key(["가나"], "0.2.1")


def test_embedding_says_how_far_it_is_in_a_log(fake, monkeypatch, capsys):
    monkeypatch.setattr(sentvec, "BATCH", 2)
    monkeypatch.setattr(sentvec, "LOG_EVERY", 4)
    sentvec.sentence_vectors([f"문장 {k}" for k in range(9)])
    err = capsys.readouterr().err.splitlines()
    assert err[:2] == ["embedding sentences (USE): 4 of 9, 0s", "embedding sentences (USE): 8 of 9, 0s"]
    assert err[2].startswith("embedded 9 sentences (USE) in ") and len(err) == 3 and fake.calls == 5
    sentvec.sentence_vectors([f"문장 {k}" for k in range(9)])
    assert capsys.readouterr().err.startswith("sentence embeddings (USE) of 9 sentences read from the cache ")


def test_an_alignment_with_the_feature_runs_and_embeds_the_corpus_once(tmp_path, fake):
    convs = []
    for k in range(6):
        convs.append(dict(doc_id=f"cafe_u{k}_2_4", persona=f"어서 오세요 {k}번 손님\n커피 맛있어요", user="안녕하세요\n커피 주세요",
                          turns=2, labels=["s", "s", "s", "s"]))
    corpus = read_public(_public(tmp_path, convs))
    result = align_public(corpus, coherence_use=True, model_kind="majority", iterations=2)
    assert (result.report["status"] == "aligned").all()
    for _, g in result.utterances.groupby("doc_id"):
        assert g["person_type"].tolist() == ["user", "persona", "user", "persona"]
    n_texts = fake.seen
    assert n_texts == len({x for c in convs for x in (c["persona"] + "\n" + c["user"]).split("\n")})
    align_public(corpus, coherence_use=True, model_kind="majority", iterations=1)
    assert fake.seen == n_texts  # the second alignment of the corpus read the cache


def test_the_alignment_cache_keys_of_before_stay_and_the_encoder_version_counts(tmp_path, monkeypatch):
    import hashlib
    import json
    from pathlib import Path

    from psyattrs.align import cache_folder, reconstruct

    path = _public(tmp_path, [dict(doc_id="cafe_u1_1_2", persona="어서 오세요", user="안녕하세요", turns=1, labels=["s", "s"])])
    corpus = read_public(path)
    old = AlignSettings().to_dict()
    del old["coherence_use"], old["coherence_only"]
    digest = hashlib.sha256(Path(path).read_bytes())
    digest.update(json.dumps({"settings": old, "version": reconstruct.ALIGN_VERSION, "schema": corpus.schema.to_dict()},
                             sort_keys=True, default=str).encode())
    assert reconstruct.cache_entry(corpus) == cache_folder() / digest.hexdigest()[:24]  # entries cached before still read
    on = reconstruct.cache_entry(corpus, AlignSettings(coherence_use=True))
    assert on != reconstruct.cache_entry(corpus)
    monkeypatch.setattr(reconstruct, "encoder_version", lambda: "9.9.9")
    assert reconstruct.cache_entry(corpus, AlignSettings(coherence_use=True)) != on


def test_the_benchmark_chooses_a_configuration_on_the_other_conversations_only(monkeypatch, capsys):
    import sys
    from pathlib import Path

    import pandas as pd

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    sys.modules.pop("align_benchmark", None)
    import align_benchmark

    # A places all of d1 right and nothing else, B half of d2 and d3: pooled they tie (10 of 30 each),
    # but held out, each conversation gets the configuration that is worse on it
    out = pd.DataFrame({"agreed lines": [10, 10, 10, 30], "A": [1.0, 0.0, 0.0, 1 / 3], "B": [0.0, 0.5, 0.5, 1 / 3]},
                       index=["d1", "d2", "d3", "all"])
    align_benchmark._loo_choice(out, ["A", "B"])
    text = capsys.readouterr().out
    assert "all: 0.000 of 30 agreed user lines placed right (first listed, A: 0.333)" in text
    rows = {line.split()[0]: line.split()[1] for line in text.splitlines() if line[:2] in ("d1", "d2", "d3")}
    assert rows == {"d1": "B", "d2": "A", "d3": "A"}
