"""Text normalisation, tokenisers, the TextFeaturizer, and the context window on hand-built chats."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone

from psyattrs.data.table import normalize_table
from psyattrs.features import tokenizers
from psyattrs.features.context import (
    POSITION_COLUMNS,
    SURFACE_COLUMNS,
    context_features,
    gather_rows,
    position_features,
    prepare_table,
    previous_rows,
    speaker_keys,
    surface_features,
)
from psyattrs.features.text import TextFeaturizer, TokenNgrams
from psyattrs.features.tokenizers import normalize_text, normalize_texts, tokenize

# ---------------------------------------------------------------------------------------------
# normalisation and tokenisers


def test_normalize_text_evens_out_quirks_for_features_only():
    assert normalize_text("  피곤하_다!!!!!   ㅋㅋㅋㅋㅋㅋ ") == "피곤하다!!! ㅋㅋㅋ"
    assert normalize_text("ＯＫ？ Hello～") == "ok? hello~"
    assert normalize_text("ㅠ.ㅠ ♡") == "ㅠ.ㅠ ♡"  # compatibility jamo and symbols stay
    assert normalize_text("") == ""
    assert normalize_texts(["ㅎㅎㅎㅎ", None, "ㅎㅎㅎㅎ"]) == ["ㅎㅎㅎ", "", "ㅎㅎㅎ"]


def test_featurizer_does_not_change_the_stored_text():
    table = pd.DataFrame({"doc_id": ["a", "a"], "text": ["피곤하_다  ㅋㅋㅋㅋ", "응"]})
    before = table.copy()
    TextFeaturizer(min_df=1).fit(table["text"]).transform(table["text"])
    pd.testing.assert_frame_equal(table, before)


def test_korean_tokens_are_kiwi_morphemes_with_tags():
    tokens = tokenize(["나 오늘 떡볶이 먹었어 ㅋㅋ"], "ko")[0]
    assert "먹/VV" in tokens and "떡볶이/NNG" in tokens and "었/EP" in tokens
    assert tokenize([""], "ko") == [()]


def test_chinese_and_english_tokens():
    assert tokenize(["我们 去 吃饭 吧"], "zh")[0] == ("我们", "去", "吃饭", "吧")
    assert tokenize(["i went home, ok?"], "en")[0] == ("i", "went", "home", ",", "ok", "?")
    assert tokenize(["a  b c"], "whitespace")[0] == ("a", "b", "c")
    with pytest.raises(ValueError, match=r"tokenizer language 'jp' is not one of \['en', 'ko', 'whitespace', 'zh'\]"):
        tokenize(["x"], "jp")


def test_tokenisations_are_cached_per_distinct_text():
    tokenizers.clear_tokenizer_cache()
    first = tokenize(["응 그래", "응 그래", "오늘 뭐 했어"], "ko")
    info = tokenizers.tokenizer_cache_info()
    assert info["misses"] == 2 and info["hits"] == 1 and info["size"] == 2
    again = tokenize(["오늘 뭐 했어"], "ko")
    assert tokenizers.tokenizer_cache_info()["misses"] == 2
    assert again[0] is first[2]


PREFETCHED = ["안녕하세요 처음 뵙겠습니다~", "오늘 회사에서  너무 힘들었어요 ㅠㅠㅠㅠㅠ", "헐 진짜요?"]


def test_korean_analysed_ahead_in_a_second_process_gives_the_same_tokens(tmp_path):
    import json
    import os
    import subprocess
    import sys

    # a fresh interpreter: this one may have loaded the analyser already
    script = (
        "import json, sys\n"
        "from psyattrs.features import tokenizers as tk\n"
        "started = tk.prefetch_korean(json.loads(sys.argv[1]))\n"
        "norm = tk.normalize_texts(json.loads(sys.argv[1]))\n"
        "out = {'started': started, 'sentence': tk.tokenize(norm, 'ko'), 'word': tk.tokenize(norm, 'ko', unit='word'),\n"
        "       'analyser_loaded_here': tk._KIWI is not None}\n"
        "print(json.dumps(out, ensure_ascii=False))\n"
    )
    env = {**os.environ, "PSYATTRS_PREFETCH": "1"}
    done = subprocess.run([sys.executable, "-c", script, json.dumps(PREFETCHED)], capture_output=True, text=True,
                          env=env, timeout=300, check=True)
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["started"] and not got["analyser_loaded_here"]
    norm = normalize_texts(PREFETCHED)
    assert [tuple(t) for t in got["sentence"]] == tokenizers._tokenize_ko(norm)
    assert [tuple(t) for t in got["word"]] == tokenize(norm, "ko", unit="word")


def test_a_failed_second_process_leaves_the_analysis_to_this_one(monkeypatch):
    monkeypatch.setenv("PSYATTRS_PREFETCH", "1")
    monkeypatch.setattr(tokenizers, "_CHILD_CODE", "import sys; sys.exit(3)")
    tokenizers.clear_tokenizer_cache()
    assert tokenizers.prefetch_korean(PREFETCHED)
    norm = normalize_texts(PREFETCHED)
    assert tokenize(norm, "ko") == tokenizers._tokenize_ko(norm)
    assert tokenizers._PREFETCH is None


def test_prefetch_starts_only_where_it_can_help(monkeypatch):
    monkeypatch.setenv("PSYATTRS_PREFETCH", "1")
    assert not tokenizers.prefetch_korean(["no korean here", "我们去吃饭吧"])
    assert not tokenizers.prefetch_korean(["안녕" * (tokenizers.PREFETCH_MAX_CHARS // 2 + 1)])
    monkeypatch.setenv("PSYATTRS_PREFETCH", "0")
    assert not tokenizers.prefetch_korean(PREFETCHED)
    assert tokenizers._PREFETCH is None


def test_token_ngrams():
    assert TokenNgrams((1, 2))(("a", "b", "c")) == ["a", "b", "c", "a b", "b c"]
    assert TokenNgrams((2, 3))(("a",)) == []


# ---------------------------------------------------------------------------------------------
# TextFeaturizer

TEXTS = ["나 오늘 떡볶이 먹었어", "너 오늘 뭐 먹었어?", "나 오늘 학교 갔어 ㅋㅋ", "떡볶이 좋아해"]


def test_featurizer_builds_char_and_morpheme_blocks():
    f = TextFeaturizer(min_df=1).fit(TEXTS)
    X = f.transform(TEXTS)
    assert sp.isspmatrix_csr(X) and X.dtype == np.float32
    assert X.shape == (4, f.n_features_out_) == (4, len(f.get_feature_names_out()))
    names = list(f.get_feature_names_out())
    assert "char:떡볶" in names and "word:먹/VV" in names and "word:먹/VV 었/EP" in names
    # each block is L2-normalised: a row's squared norm is 2 (char block + word block)
    np.testing.assert_allclose(X.multiply(X).sum(axis=1).A1, 2.0, rtol=1e-5)
    # an unseen sentence shares the char n-gram 떡볶 with the vocabulary
    new = f.transform(["떡볶이 최고"])
    assert new[0, names.index("char:떡볶")] > 0


def test_featurizer_settings_change_the_features():
    chars_only = TextFeaturizer(words="none", min_df=1).fit(TEXTS)
    assert all(n.startswith("char:") for n in chars_only.get_feature_names_out())
    spaces = TextFeaturizer(words="whitespace", min_df=1).fit(TEXTS)
    assert "word:떡볶이" in spaces.get_feature_names_out()
    frequent = TextFeaturizer(min_df=2).fit(TEXTS)
    assert "word:오늘/MAG" in frequent.get_feature_names_out() and "word:학교/NNG" not in frequent.get_feature_names_out()
    capped = TextFeaturizer(min_df=1, max_features=5).fit(TEXTS)
    assert capped.n_features_out_ == 10


def test_featurizer_is_picklable_and_clonable():
    f = TextFeaturizer(min_df=1, char_ngrams=(2, 3)).fit(TEXTS)
    again = pickle.loads(pickle.dumps(f))
    assert (again.transform(TEXTS) != f.transform(TEXTS)).nnz == 0
    c = clone(f)
    assert c.get_params()["char_ngrams"] == (2, 3) and not hasattr(c, "char_vectorizer_")


WEIRD = ["", " ", "a", "ab", "ΣΑΣ σας", "x\u3000y", "tab\tsep", "ㅋㅋㅋ ㅋㅋㅋ", "İi", "a  b", "\u200b zero", "e\u0301",
         "떡볶이 떡볶이 떡볶이", "!!! ?!", "나\n왔어"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(list("ab 떡볶이 ㅋ!\t\u3000Σς")), max_size=12), min_size=1, max_size=12))
def test_char_wb_transform_equals_scikit_learns(extra):
    from sklearn.feature_extraction.text import TfidfVectorizer

    from psyattrs.features.text import char_wb_transform

    texts = TEXTS + WEIRD
    for sublinear, use_idf in ((True, True), (False, False)):
        vec = TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 3), min_df=1, sublinear_tf=sublinear, use_idf=use_idf,
                              dtype=np.float32).fit(texts)
        docs = texts + extra
        expected, got = vec.transform(docs), char_wb_transform(vec, docs)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        got.sort_indices(), expected.sort_indices()
        assert np.array_equal(got.indptr, expected.indptr) and np.array_equal(got.indices, expected.indices)
        assert np.array_equal(got.data, expected.data)  # bit for bit


def test_transform_features_each_distinct_sentence_once_and_keeps_the_rows():
    f = TextFeaturizer(min_df=1).fit(TEXTS)
    texts = [TEXTS[2], TEXTS[0], TEXTS[2], "  " + TEXTS[0].upper(), None, TEXTS[1], ""]
    X = f.transform(pd.Series(texts, dtype=object))
    one_by_one = sp.vstack([f.transform([t if t is not None else ""]) for t in texts], format="csr")
    assert X.shape == one_by_one.shape and abs(X - one_by_one).max() < 1e-6
    assert (f.transform(TEXTS) != sp.vstack([f.transform([t]) for t in TEXTS])).nnz == 0


def test_word_analysis_tokenises_each_word_alone_the_same_in_fit_and_transform():
    tokenizers.clear_tokenizer_cache()
    sentence = "나 오늘 떡볶이 먹었어"
    words = tokenize(sentence.split(), "ko")
    assert tokenize([sentence], "ko", unit="word")[0] == tuple(t for w in words for t in w)
    assert tokenize(["i went home, ok?"], "en", unit="word") == tokenize(["i went home, ok?"], "en")
    with pytest.raises(ValueError, match=r"tokenizer unit 'eojeol' is not one of \['sentence', 'word'\]"):
        tokenize(["x"], "ko", unit="eojeol")
    f = TextFeaturizer(min_df=1, analysis="word").fit(TEXTS)
    g = TextFeaturizer(min_df=1, analysis="sentence").fit(TEXTS)
    assert f.get_params()["analysis"] == "word"
    word_block = f.word_vectorizer_.transform(tokenize(normalize_texts(TEXTS), "ko", unit="word"))
    assert abs(f.transform(TEXTS)[:, -word_block.shape[1]:] - word_block).max() < 1e-6
    assert set(f.word_vectorizer_.vocabulary_) != set(g.word_vectorizer_.vocabulary_)  # the analyses differ
    with pytest.raises(ValueError, match=r"analysis 'x' is not one of \['sentence', 'word'\]"):
        TextFeaturizer(analysis="x").fit(TEXTS)


@pytest.mark.parametrize("word_ngrams", [(1, 2), (1, 1), (2, 2), (1, 3)])
def test_word_ngram_transform_equals_the_plain_one(word_ngrams):
    from psyattrs.features.text import word_ngram_transform

    f = TextFeaturizer(min_df=1, analysis="word", word_ngrams=word_ngrams).fit(TEXTS + WEIRD)
    docs = list(dict.fromkeys(normalize_texts(TEXTS + WEIRD + ["나 는 ... 바보", "... ...", "떡볶이 ㅋㅋㅋ 먹었어"])))
    expected = f.word_vectorizer_.transform(tokenize(docs, "ko", unit="word"))
    got = word_ngram_transform(f.word_vectorizer_, docs, "ko")
    got.sort_indices(), expected.sort_indices()
    assert np.array_equal(got.indptr, expected.indptr) and np.array_equal(got.indices, expected.indices)
    assert np.array_equal(got.data, expected.data)


def test_a_featurizer_pickled_before_the_analysis_setting_analyses_sentences():
    f = TextFeaturizer(min_df=1).fit(TEXTS)
    state = f.__getstate__()
    del state["analysis"]
    old = TextFeaturizer.__new__(TextFeaturizer)
    old.__setstate__(state)
    assert old.analysis == "sentence" and old.get_params()["analysis"] == "sentence"
    assert (old.transform(TEXTS) != f.transform(TEXTS)).nnz == 0


def test_featurizer_errors_name_the_bad_value():
    with pytest.raises(ValueError, match=r"language 'French!' is not a lower-case language code"):
        TextFeaturizer("French!").fit(TEXTS)
    with pytest.raises(ValueError, match="min_df must be an integer >= 1, got 0"):
        TextFeaturizer(min_df=0).fit(TEXTS)
    with pytest.raises(ValueError, match=r"no text feature occurs in at least min_df=5 of the 4 sentences"):
        TextFeaturizer(min_df=5).fit(TEXTS)


# ---------------------------------------------------------------------------------------------
# the context window on a hand-built conversation
#
#   row  doc  speaker  pause  text
#   0    a    user            안녕 ㅋㅋㅋㅋ
#   1    a    persona         응 안녕?? ^^
#   2    a    persona  yes    1시간 후
#   3    a    user            나 왔어 ㅠㅠ
#   4    a    persona         헐 왜 ㅠ.ㅠ
#   5    a    persona         몰라~~ ♡
#   6    b    user            hi :)
#   7    b    ?               yo...


@pytest.fixture()
def chat() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "doc_id": ["a"] * 6 + ["b"] * 2,
            "text": ["안녕 ㅋㅋㅋㅋ", "응 안녕?? ^^", "1시간 후", "나 왔어 ㅠㅠ", "헐 왜 ㅠ.ㅠ", "몰라~~ ♡", "hi :)", "yo..."],
            "person_type": ["user", "persona", "persona", "user", "persona", "persona", "user", ""],
            "is_pause": [0, 0, 1, 0, 0, 0, 0, 0],
        }
    )


def test_previous_rows_skip_pauses_and_stay_in_the_conversation(chat):
    prev = previous_rows(chat, 2)
    assert prev.tolist() == [[-1, -1], [0, -1], [1, 0], [1, 0], [3, 1], [4, 3], [-1, -1], [6, -1]]
    with_pauses = previous_rows(chat, 1, skip_pauses=False)
    assert with_pauses[:, 0].tolist() == [-1, 0, 1, 2, 3, 4, -1, 6]
    assert previous_rows(chat, 0).shape == (8, 0)
    with pytest.raises(ValueError, match="integer >= 0, got -1"):
        previous_rows(chat, -1)


def test_position_features_on_the_hand_built_conversation(chat):
    pos = position_features(chat)
    assert list(pos.columns) == list(POSITION_COLUMNS)
    assert pos["position"].tolist() == [0, 1, 2, 3, 4, 5, 0, 1]
    assert pos["n_in_conversation"].tolist() == [6] * 6 + [2] * 2
    np.testing.assert_allclose(pos["relative_position"], [0, 0.2, 0.4, 0.6, 0.8, 1.0, 0, 1])
    assert pos["is_first"].tolist() == [1, 0, 0, 0, 0, 0, 1, 0]
    # since the last pause before the row (else since the start): row 3 is the first after it
    assert pos["since_pause"].tolist() == [1, 2, 3, 1, 2, 3, 1, 2]
    assert pos["pauses_before"].tolist() == [0, 0, 0, 1, 1, 1, 0, 0]
    change = pos["speaker_change"].tolist()
    assert np.isnan(change[0]) and change[1:6] == [1, 0, 1, 1, 0] and np.isnan(change[6]) and np.isnan(change[7])
    run = pos["speaker_run"].tolist()
    assert run[:2] == [1, 1] and np.isnan(run[2]) and run[3:] == [1, 1, 2, 1, 1]


def test_surface_features_count_laughter_crying_and_emoticons(chat):
    s = surface_features(chat["text"])
    assert list(s.columns) == list(SURFACE_COLUMNS)
    assert s["laugh_run"].tolist() == [4, 0, 0, 0, 0, 0, 0, 0]
    assert s["cry_count"].tolist() == [0, 0, 0, 2, 2, 0, 0, 0] and s["cry_run"].tolist()[3:5] == [2, 1]
    assert s["n_question"].tolist()[1] == 2 and s["n_tilde"].tolist()[5] == 2
    assert s["n_emoticons"].tolist() == [0, 1, 0, 0, 1, 1, 1, 0]  # ^^, ㅠ.ㅠ, ♡, :)
    assert s["has_ellipsis"].tolist() == [0, 0, 0, 0, 0, 0, 0, 1]
    assert s["n_chars"].tolist()[0] == 6 and s["n_words"].tolist()[0] == 2
    np.testing.assert_allclose(s["jamo_share"].iloc[0], 4 / 6)


def test_context_features_describe_the_previous_sentences(chat):
    ctx = context_features(chat, 2)
    assert ctx.index.equals(pd.RangeIndex(8)) and (ctx.dtypes == np.float32).all()
    assert ctx["prev1_exists"].tolist() == [0, 1, 1, 1, 1, 1, 0, 1]
    # row 3 (user, after the pause): previous sentence = row 1 (persona), two rows back
    assert ctx.loc[3, "prev1_same_speaker"] == 0 and ctx.loc[3, "prev1_distance"] == 2
    assert ctx.loc[5, "prev1_same_speaker"] == 1 and ctx.loc[5, "prev2_same_speaker"] == 0
    assert ctx.loc[4, "prev2_distance"] == 3 and ctx.loc[4, "prev2_n_question"] == 2
    assert np.isnan(ctx.loc[7, "prev1_same_speaker"])  # unknown speaker
    assert np.isnan(ctx.loc[0, "prev1_laugh_run"]) and ctx.loc[1, "prev1_laugh_run"] == 4
    assert ctx.loc[6, "prev1_exists"] == 0  # no leak from conversation a into b
    assert list(context_features(chat, 0).columns) == list(POSITION_COLUMNS) + list(SURFACE_COLUMNS)


def test_context_is_the_same_whatever_the_row_order(chat):
    chat = chat.assign(position=[0, 1, 2, 3, 4, 5, 0, 1])
    shuffled = chat.sample(frac=1.0, random_state=3)
    ctx = context_features(chat, 2)
    again = context_features(shuffled, 2)
    pd.testing.assert_frame_equal(again.reset_index(drop=True), ctx.iloc[shuffled.index].reset_index(drop=True))
    # previous rows point at the shuffled table's own row numbers
    prev = previous_rows(shuffled, 1)[:, 0]
    original = shuffled.index.to_numpy()
    mapped = np.where(prev >= 0, original[np.maximum(prev, 0)], -1)
    assert mapped.tolist() == previous_rows(chat, 1)[original, 0].tolist()


def test_a_single_sentence_is_a_conversation_of_one():
    one = pd.DataFrame({"doc_id": ["x"], "text": ["오늘 너무 피곤해 ㅠㅠ"]})
    ctx = context_features(one, 2)
    assert ctx.shape[0] == 1 and ctx.loc[0, "prev1_exists"] == 0 and ctx.loc[0, "since_pause"] == 1
    assert context_features(one.iloc[:0], 1).shape[0] == 0


def test_speaker_falls_back_to_name_and_id():
    t = pd.DataFrame({"doc_id": ["a"] * 3, "text": ["a", "b", "c"], "person_type": ["", "user", ""],
                      "person_name": ["donut", "", ""], "person_id": ["p1", "u1", "u9"]})
    assert speaker_keys(t).tolist() == ["donut", "user", "u9"]


def test_prepare_table_checks_and_fills_columns():
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['text'\]; required: \['doc_id', 'text'\]"):
        prepare_table(pd.DataFrame({"doc_id": ["a"]}))
    with pytest.raises(TypeError, match="got list"):
        prepare_table([{"doc_id": "a", "text": "b"}])
    with pytest.raises(ValueError, match=r"'is_pause' must hold 0/1 or booleans; rows \[1\]"):
        prepare_table(pd.DataFrame({"doc_id": ["a", "a"], "text": ["x", "y"], "is_pause": [0, 7]}))
    with pytest.raises(ValueError, match=r"'position' must hold integers; rows \[0\]"):
        prepare_table(pd.DataFrame({"doc_id": ["a"], "text": ["x"], "position": ["first"]}))
    out = prepare_table(pd.DataFrame({"doc_id": [1, 1, 2], "text": ["x", None, "z"]}, index=[10, 11, 12]))
    assert out.index.equals(pd.RangeIndex(3)) and out["doc_id"].tolist() == ["1", "1", "2"]
    assert out["text"].tolist() == ["x", "", "z"] and out["position"].tolist() == [0, 1, 0]
    assert out["is_pause"].tolist() == [False] * 3 and out["person_type"].tolist() == [""] * 3


def test_normalized_utterance_tables_work_as_they_are(chat):
    table = normalize_table(chat)
    assert table["is_pause"].dtype == bool
    np.testing.assert_array_equal(context_features(table, 1).to_numpy(), context_features(chat, 1).to_numpy())


def test_gather_rows_picks_rows_and_blanks_missing_ones():
    X = sp.csr_matrix(np.array([[1.0, 0], [0, 2.0], [3.0, 3.0]], dtype=np.float32))
    picked = gather_rows(X, np.array([2, -1, 0]))
    assert sp.issparse(picked)
    np.testing.assert_array_equal(picked.toarray(), [[3, 3], [0, 0], [1, 0]])
    dense = gather_rows(X.toarray(), np.array([-1, 1]))
    assert np.isnan(dense[0]).all() and dense[1].tolist() == [0, 2]


def test_a_pickled_featurizer_names_the_module_saved_models_load_it_from():
    """Saved tfidf models pickle the featurizer and its word analyser: they must stay importable
    from `psyattrs.features.text` (the tokenisers moved to `psyattrs.features.tokenizers`)."""
    import pickle

    featurizer = TextFeaturizer("en", min_df=1, char_ngrams=(1, 2)).fit(["a dog barks", "the cat sleeps"])
    data = pickle.dumps(featurizer)
    assert b"psyattrs.features.text" in data and b"TextFeaturizer" in data and b"TokenNgrams" in data
    assert b"psyattrs.features.tokenizers" not in data  # nothing of the moved module is pickled
    loaded = pickle.loads(data)
    assert (loaded.transform(["a cat"]) != featurizer.transform(["a cat"])).nnz == 0
