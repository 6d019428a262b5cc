"""The synthetic corpus: determinism, layout, balance, labelers, signal, public format, round trips."""

from __future__ import annotations

import ast
import csv
import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from psyattrs.cli import main
from psyattrs.synth import lexicon as lex
from psyattrs.synth.public import PUBLIC_COLUMNS
from psyattrs.synth import (
    LABELER_CONFUSION,
    PERSONAS,
    annotated_columns,
    synthesize,
    write_annotated,
    write_public,
)
from psyattrs.data.table import BASE_COLUMNS
from psyattrs.schema import OPELA

HEADS = OPELA.head_names
SHARED_SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "data" / "opela_public_sample.csv"
PAUSE_TEXT = re.compile(r"^(\d+시간|하루|이틀|사흘|\d+일|일주일) 후$")


@pytest.fixture(scope="module")
def medium():
    """150 conversations (about 18k sentences): enough for balance and signal checks."""
    return synthesize(150, seed=11)


@pytest.fixture(scope="module")
def small():
    return synthesize(6, seed=2)


def content(df: pd.DataFrame) -> pd.DataFrame:
    return df[~df["is_pause"]]


# ---------------------------------------------------------------------------------------------
# determinism and layout


def test_same_arguments_write_the_same_bytes_and_another_seed_does_not(tmp_path):
    a = write_annotated(synthesize(4, seed=5).utterances, tmp_path / "a.csv")
    b = write_annotated(synthesize(4, seed=5).utterances, tmp_path / "b.csv")
    c = write_annotated(synthesize(4, seed=6).utterances, tmp_path / "c.csv")
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()


def test_output_does_not_depend_on_the_interpreter_hash_seed(tmp_path):
    digests = []
    for hash_seed in ("1", "987"):
        out = tmp_path / f"h{hash_seed}.csv"
        code = (
            "import sys; from psyattrs.synth import synthesize, write_annotated, write_public;"
            "r = synthesize(3, seed=8); write_annotated(r.utterances, sys.argv[1]);"
            "write_public(r.utterances, r.conversations, sys.argv[1] + '.pub', seed=8)"
        )
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        subprocess.run([sys.executable, "-c", code, str(out)], check=True, env=env, capture_output=True)
        digests.append(
            (hashlib.sha256(out.read_bytes()).hexdigest(), hashlib.sha256(Path(f"{out}.pub").read_bytes()).hexdigest())
        )
    assert digests[0] == digests[1]


def test_utterance_table_follows_the_table_contract(small):
    df = small.utterances
    assert list(df.columns[: len(BASE_COLUMNS)]) == list(BASE_COLUMNS)
    for k in (1, 2, 3):
        for h in HEADS:
            assert df[f"labeler{k}_{h}"].dtype == "Int64"
    for h in HEADS:
        assert df[f"labeler_{h}"].dtype == "Int64" and df[f"true_{h}"].dtype == "Int64"
        assert not df[f"labeler_{h}"].isna().any()
    assert df["is_pause"].dtype == bool and df["turn"].dtype == "Int64" and df["position"].dtype == "int64"
    assert df["sent_id"].is_unique
    assert set(df["person_type"]) == {"persona", "user"}


def test_conversations_are_complete_and_consistent(small):
    df, conv = small.utterances, small.conversations
    assert conv["doc_id"].tolist() == list(dict.fromkeys(df["doc_id"]))
    for doc_id, rows in df.groupby("doc_id", sort=False):
        meta = conv.set_index("doc_id").loc[doc_id]
        persona, user, turns, sents, labelers = doc_id.split("_")
        assert (persona, user, labelers) == (meta["persona"], meta["user_name"], "L1-L2-L3")
        assert int(sents) == len(rows) == meta["total_sent"] and int(turns) == meta["total_turn"]
        assert 15 <= int(turns) <= 80 and rows["turn"].max() == int(turns)
        assert rows["position"].tolist() == list(range(len(rows)))
        assert rows["sent_id"].tolist() == [f"{doc_id}_{i}" for i in range(1, len(rows) + 1)]
        assert rows["persona"].nunique() == 1 and rows["persona"].iloc[0] == persona
        personas = rows[rows["person_type"] == "persona"]
        assert set(personas["person_name"]) == {persona}
        assert set(personas["person_name_original"]) == {meta["persona_name_original"]}
        assert set(rows.loc[rows["person_type"] == "user", "person_name"]) == {user}
        assert re.fullmatch(r"user\d{4}", user) and re.fullmatch(r"[0-9a-f]{20}", meta["user_id"])
        times = pd.to_datetime(rows["time"], format="%Y-%m-%d %H:%M")
        assert times.is_monotonic_increasing
        assert (times.iloc[-1] - times.iloc[0]).total_seconds() / 60 == meta["total_minutes"]
        # pauses: count, hours and texts agree
        pauses = rows[rows["is_pause"]]
        hours = ast.literal_eval(meta["pause_hour"])
        assert len(pauses) == meta["pause_count"] == len(hours) and sum(hours) == meta["total_pause"]
        assert [lex.pause_text(h) for h in hours] == pauses["text"].tolist()


def test_personas_have_names_and_concepts(small):
    p = small.personas
    assert len(p) == len(PERSONAS) == 8 and p["persona"].is_unique
    assert p["persona_name_original"].str.len().min() >= 2 and p["concept"].str.len().min() >= 20
    assert {"donut", "ferret"} <= set(p["persona"])


def test_annotated_csv_has_the_documented_columns_and_integers(small, tmp_path):
    path = write_annotated(small.utterances, tmp_path / "corpus.csv")
    raw = path.read_bytes()
    assert not raw.startswith(b"\xef\xbb\xbf")
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    assert header == annotated_columns()
    assert header[:9] == ["doc_id", "sent_id", "person_type", "person_name", "person_name_original",
                          "turn_notation", "time", "is_pause", "text"]  # fmt: skip
    assert header[9:27] == [f"labeler{k}_{h}" for k in (1, 2, 3) for h in HEADS]
    assert header[27] == "person_id" and header[28:34] == [f"labeler_{h}" for h in HEADS]
    assert header[34:] == [f"true_{h}" for h in HEADS]
    body = rows[1:]
    assert len(body) == len(small.utterances)
    int_cols = [i for i, c in enumerate(header) if c.startswith(("labeler", "true_")) or c in ("turn_notation", "is_pause")]
    assert all(re.fullmatch(r"\d+", r[i]) for r in body for i in int_cols)
    text_col = header.index("text")
    assert [r[text_col] for r in body] == small.utterances["text"].tolist()


def test_write_annotated_names_missing_columns(small, tmp_path):
    with pytest.raises(ValueError, match=r"missing column\(s\) \['labeler3_strange'"):
        write_annotated(small.utterances.drop(columns=["labeler3_strange"]), tmp_path / "x.csv")


# ---------------------------------------------------------------------------------------------
# balance, pauses, labelers


TARGETS = {  # FORMATS §3 balance of the final labels, share of all labelled sentences, and tolerance
    ("strange", 0): (0.009, 0.004),
    ("uneasy", 0): (0.002, 0.0015),
    ("engage", 1): (0.65, 0.04),
    ("active", 1): (0.34, 0.04),
    ("self", 0): (0.28, 0.05),
    ("self", 1): (0.58, 0.05),
    ("self", 2): (0.14, 0.04),
    ("empathy", 0): (0.41, 0.04),
    ("empathy", 1): (0.002, 0.002),
    ("empathy", 2): (0.06, 0.035),
    ("empathy", 3): (0.43, 0.04),
    ("empathy", 4): (0.09, 0.03),
}


@pytest.mark.parametrize(("head", "cls"), list(TARGETS))
def test_final_label_balance_is_near_the_real_release(medium, head, cls):
    share = (medium.utterances[f"labeler_{head}"] == cls).mean()
    target, tol = TARGETS[(head, cls)]
    assert abs(share - target) <= tol, f"{head}={cls}: {share:.4f} vs {target}"


def test_rare_boost_raises_the_rare_classes():
    base = synthesize(60, seed=4).utterances
    boosted = synthesize(60, seed=4, rare_boost=8.0).utterances
    for head, cls in (("strange", 0), ("uneasy", 0), ("empathy", 1)):
        before = (content(base)[f"true_{head}"] == cls).mean()
        after = (content(boosted)[f"true_{head}"] == cls).mean()
        assert after > 4 * max(before, 1e-4), f"{head}={cls}: {before:.4f} -> {after:.4f}"
    assert (boosted["labeler_strange"] == 0).mean() > 0.05


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_dialogues": 0}, r"n_dialogues must be an integer >= 1, got 0"),
        ({"n_dialogues": 2, "seed": -1}, r"seed must be a non-negative integer, got -1"),
        ({"n_dialogues": 2, "rare_boost": 0.0}, r"rare_boost must be in \(0, "),
        ({"n_dialogues": 2, "rare_boost": 500.0}, r"rare_boost must be in \(0, .*got 500.0"),
        ({"n_dialogues": 2, "min_turns": 9, "max_turns": 3}, r"1 <= min_turns <= max_turns, got 9, 3"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        synthesize(**kwargs)


def test_pause_rows_carry_the_pause_signature(medium):
    df = medium.utterances
    pauses = df[df["is_pause"]]
    assert len(pauses) > 100
    assert pauses["text"].str.fullmatch(PAUSE_TEXT.pattern).all()
    assert (pauses["person_type"] == "persona").all()
    assert not content(df)["text"].str.fullmatch(PAUSE_TEXT.pattern).any()
    for prefix in ("true_", "labeler1_", "labeler2_", "labeler3_", "labeler_"):
        assert (pauses[[f"{prefix}{h}" for h in ("self", "empathy", "engage", "active")]] == 0).all().all()
        assert (pauses[[f"{prefix}strange", f"{prefix}uneasy"]] == 1).all().all()


@pytest.mark.parametrize("head", ["self", "empathy"])
def test_all_different_items_exist_and_resolve_to_one_of_the_three(medium, head):
    df = medium.utterances
    given = df[[f"labeler{k}_{head}" for k in (1, 2, 3)]].to_numpy(dtype=int)
    all_diff = (given[:, 0] != given[:, 1]) & (given[:, 0] != given[:, 2]) & (given[:, 1] != given[:, 2])
    assert all_diff.sum() >= 50
    final = df[f"labeler_{head}"].to_numpy(dtype=int)
    assert (final[all_diff][:, None] == given[all_diff]).any(axis=1).all()
    # items with a majority take it
    agree = ~all_diff
    majority = np.where(given[:, 0] == given[:, 1], given[:, 0], given[:, 2])
    assert (final[agree] == majority[agree]).all()


@pytest.fixture(scope="module")
def boosted():
    """Rare classes raised tenfold, so that every true class has enough rows to measure a labeler."""
    return synthesize(60, seed=12, rare_boost=10.0)


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("head", HEADS)
def test_labelers_follow_their_stated_confusion_matrices(boosted, k, head):
    df = content(boosted.utterances)
    truth = df[f"true_{head}"].to_numpy(dtype=int)
    given = df[f"labeler{k}_{head}"].to_numpy(dtype=int)
    stated = LABELER_CONFUSION[k][head]
    checked = 0
    for t in range(stated.shape[0]):
        rows = truth == t
        n = int(rows.sum())
        if n < 60:
            continue
        empirical = np.bincount(given[rows], minlength=stated.shape[1]) / n
        tolerance = 0.015 + 4 * np.sqrt(stated[t] * (1 - stated[t]) / n)  # four standard errors
        assert (np.abs(empirical - stated[t]) <= tolerance).all(), f"true {t}: {empirical.round(3)} vs {stated[t]}"
        checked += 1
    assert checked == stated.shape[0]


def test_the_three_labelers_differ_as_documented(medium):
    df = content(medium.utterances)
    agreement = {k: (df[f"labeler{k}_self"] == df["true_self"]).mean() for k in (1, 2, 3)}
    assert agreement[1] > agreement[2] > agreement[3]
    # the lenient labeler pulls self toward the middle class, the careful one does not
    middle = {k: (df[f"labeler{k}_self"] == 1).mean() for k in (1, 2)}
    assert middle[2] > middle[1] + 0.05


# ---------------------------------------------------------------------------------------------
# signal in text and context


def _doc_split(df: pd.DataFrame) -> np.ndarray:
    docs = df["doc_id"].unique()
    return df["doc_id"].isin(set(docs[: int(len(docs) * 0.75)])).to_numpy()


def _partner_message(df: pd.DataFrame) -> pd.Series:
    """For every sentence, the text of the other speaker's previous message ('' at the start)."""
    new = df["person_type"] != df.groupby("doc_id")["person_type"].shift(1)
    msg = new.cumsum()
    text = df.groupby(msg)["text"].agg(" ".join)
    first = msg.groupby(df["doc_id"]).transform("min")
    return pd.Series(np.where(msg > first, text.reindex(msg - 1).to_numpy(), ""), index=df.index)


def _fit_score(train_x, train_y, test_x, test_y):
    from sklearn.svm import LinearSVC

    predicted = LinearSVC(C=0.5).fit(train_x, train_y).predict(test_x)
    return float((predicted == test_y).mean()), predicted


def _char_vectorizer():
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 2), min_df=3, sublinear_tf=True, max_features=2000)


def test_text_predicts_active_and_self_well_above_chance(medium):
    from sklearn.metrics import balanced_accuracy_score

    df = content(medium.utterances).reset_index(drop=True)
    train = _doc_split(df)
    x = _char_vectorizer().fit_transform(df["text"])
    for head, floor in (("active", 0.75), ("self", 0.7)):
        y = df[f"labeler_{head}"].to_numpy(dtype=int)
        _, predicted = _fit_score(x[train], y[train], x[~train], y[~train])
        score = balanced_accuracy_score(y[~train], predicted)
        assert score > floor, f"{head}: balanced accuracy {score:.3f}"


def test_questions_are_active_and_feelings_are_subjective_disclosure(medium):
    df = content(medium.utterances)
    question = df["text"].str.contains(r"\?|뭐|어때", regex=True)
    assert (df.loc[question, "true_active"] == 1).mean() > 0.75
    assert (df.loc[~question, "true_active"] == 1).mean() < 0.2
    feeling = df["text"].str.contains("행복|우울|외로|속상|설레|막막|울었")
    assert (df.loc[feeling, "true_self"] == 2).mean() > 0.5 > (df.loc[~feeling, "true_self"] == 2).mean() + 0.3


def test_partner_disclosure_raises_empathy(medium):
    df = content(medium.utterances).reset_index(drop=True)
    new = df["person_type"] != df.groupby("doc_id")["person_type"].shift(1)
    msg = new.cumsum()
    msg_self = df.groupby(msg)["true_self"].max()
    first = msg.groupby(df["doc_id"]).transform("min")
    partner_self = pd.Series(np.where(msg > first, msg_self.reindex(msg - 1).to_numpy(), -1), index=df.index)
    empathy = df["true_empathy"]
    high = {s: (empathy[partner_self == s] == 4).mean() for s in (0, 1, 2)}
    responsive = {s: (empathy[partner_self == s] >= 3).mean() for s in (0, 1, 2)}
    assert high[2] > 0.15 and high[2] > 3 * high[1] and high[2] > 3 * high[0]
    assert responsive[1] > responsive[0] + 0.15


def test_a_context_model_beats_a_text_only_model_on_empathy(medium):
    from scipy.sparse import hstack

    df = content(medium.utterances).reset_index(drop=True)
    train = _doc_split(df)
    text = _char_vectorizer().fit_transform(df["text"])
    both = hstack([text, _char_vectorizer().fit_transform(_partner_message(df))]).tocsr()
    gains = {}
    for target in ("true_empathy", "labeler_empathy"):
        y = df[target].to_numpy(dtype=int)
        alone, _ = _fit_score(text[train], y[train], text[~train], y[~train])
        with_context, _ = _fit_score(both[train], y[train], both[~train], y[~train])
        gains[target] = with_context - alone
    assert gains["true_empathy"] > 0.01 and gains["labeler_empathy"] > 0.0, gains


def test_strange_sentences_include_ones_that_only_the_context_makes_strange(medium):
    df = content(medium.utterances)
    strange = df[df["true_strange"] == 0]
    reply_wordings = {
        lex.render(t.parts, {}, polite) for act in (lex.REACT4_POS, lex.REACT4_NEG) for t in lex.TEMPLATES[act]
        if not t.slots for polite in (False, True)
    }  # fmt: skip
    looks_normal = strange["text"].map(lambda s: any(s.startswith(w) for w in reply_wordings))
    assert looks_normal.sum() >= 3 and (~looks_normal).sum() >= 20


def test_survey_outcomes_follow_the_utterances(medium):
    df, conv = content(medium.utterances), medium.conversations.set_index("doc_id")
    persona = df[df["person_type"] == "persona"].groupby("doc_id")
    quality = persona["true_empathy"].agg(lambda s: (s >= 3).mean()) + persona["true_engage"].mean()
    for col in ("friend_persona", "fun_persona", "blri_persona"):
        assert conv[col].corr(quality.reindex(conv.index), method="spearman") > 0.3, col
    for item in ("friend", "attract", "connect", "respect", "fun", "natural"):
        for who in ("persona", "user"):
            assert conv[f"{item}_{who}"].between(1, 4).all()
    assert conv["blri_persona"].between(16, 64).all() and conv["blri_user"].between(16, 64).all()
    assert conv["gender"].isin([1, 2, 3]).all() and conv["edu"].between(1, 5).all()
    assert conv["income"].between(1, 5).all() and conv["open_chat_exp"].isin([1, 2]).all()
    assert conv["persona_summary"].str.contains("#|/").all()


def test_vocabulary_is_large_and_quirky(medium):
    texts = content(medium.utterances)["text"]
    words = {w for t in texts for w in t.split()}
    assert len(words) > 3000 and texts.nunique() > 0.6 * len(texts)
    assert texts.str.contains("ㅋㅋ").any() and texts.str.contains("ㅠ").any() and texts.str.contains("_").any()
    assert texts.str.contains("  ").any() and (texts.str.startswith(" ") | texts.str.endswith(" ")).any()
    assert not texts.str.contains("\n").any() and (texts.str.strip() != "").all()


# ---------------------------------------------------------------------------------------------
# the public-release layout


@pytest.fixture(scope="module")
def public(medium, tmp_path_factory):
    path = tmp_path_factory.mktemp("public") / "public.csv"
    truth = write_public(medium.utterances, medium.conversations, path, seed=3)
    return path, truth, pd.read_csv(path, keep_default_na=False)


def test_public_file_has_exactly_the_release_columns(public):
    path, _, frame = public
    assert list(frame.columns) == list(PUBLIC_COLUMNS) and len(PUBLIC_COLUMNS) == 38
    assert len(frame) == 150
    if SHARED_SAMPLE.is_file():  # the real header, when the sample is at hand
        assert list(pd.read_csv(SHARED_SAMPLE, nrows=0).columns) == list(PUBLIC_COLUMNS)
    assert frame["pause_hour"].str.fullmatch(r"\[(\d+(, \d+)*)?\]").all()


def test_public_label_lists_and_truth_mapping_reproduce_the_corpus(medium, public):
    _, truth, frame = public
    df = medium.utterances
    row_of = dict(zip(df["sent_id"], range(len(df))))
    texts = df["text"].tolist()
    finals = df[[f"labeler_{h}" for h in HEADS]].to_numpy(dtype=int)
    assert len(truth.order) == len(df)
    by_doc = {doc: part for doc, part in truth.order.groupby("doc_id", sort=False)}
    for row in frame.itertuples(index=False):
        lists = np.array([ast.literal_eval(getattr(row, f"labeler_{h}")) for h in HEADS]).T
        assert lists.shape == (row.total_sent, len(HEADS))
        lines = {"persona": row.persona_text_all.split("\n"), "user": row.user_text_all.split("\n")}
        doc = by_doc[row.doc_id]
        assert sorted(doc["position"].dropna().astype(int)) == list(range(row.total_sent))
        for o in doc.itertuples(index=False):
            i = row_of[o.sent_id]
            assert " ".join(lines[o.speaker][o.line_start : o.line_end]) == ("" if o.is_pause else texts[i])
            if not pd.isna(o.position):
                assert (lists[int(o.position)] == finals[i]).all()


def test_public_file_has_the_release_quirks(public):
    _, truth, frame = public
    quirks = truth.conversations
    assert (quirks["extra_lines"] > 0).sum() >= 20
    assert (~quirks["pauses_counted"]).sum() >= 2
    assert quirks["trailing_newline"].sum() >= 2 and quirks["blank_user_lines"].sum() >= 1
    lines = frame["persona_text_all"].str.count("\n") + 1 + frame["user_text_all"].str.count("\n") + 1
    adds_up = lines == frame["total_sent"]
    assert adds_up.sum() >= 30 and (~adds_up).sum() >= 20
    # uncounted pauses: the excess is exactly the pause count when nothing else happened
    plain = quirks["extra_lines"].eq(0) & ~quirks["trailing_newline"] & quirks["blank_user_lines"].eq(0)
    uncounted = (~quirks["pauses_counted"] & plain).to_numpy()
    assert ((lines - frame["total_sent"])[uncounted] == frame["pause_count"][uncounted]).all()
    assert frame["persona_text_all"].str.endswith("\n").sum() == quirks["trailing_newline"].sum()
    # every persona that always splits its messages does so
    for persona in ("librarian", "bed"):
        rows = quirks["doc_id"].str.startswith(persona + "_")
        assert rows.any() and (quirks.loc[rows, "extra_lines"] > 0).all()


def test_public_without_quirks_adds_up(small, tmp_path):
    path = tmp_path / "clean.csv"
    write_public(small.utterances, small.conversations, path, quirks=False)
    frame = pd.read_csv(path, keep_default_na=False)
    lines = frame["persona_text_all"].str.count("\n") + 1 + frame["user_text_all"].str.count("\n") + 1
    assert (lines == frame["total_sent"]).all()
    assert (frame["persona_text_all"].map(lambda t: t.split("\n").count("")) == frame["pause_count"]).all()


def test_write_public_rejects_unresolved_labels(small, tmp_path):
    df = small.utterances.copy()
    df.loc[3, "labeler_self"] = pd.NA
    with pytest.raises(ValueError, match=r"final label 'labeler_self' is empty .*resolve the labels first"):
        write_public(df, small.conversations, tmp_path / "x.csv")
    with pytest.raises(ValueError, match=r"doc_id\(s\) without a conversation row"):
        write_public(small.utterances, small.conversations.iloc[1:], tmp_path / "x.csv")


# ---------------------------------------------------------------------------------------------
# round trips through the readers, and the command


def test_annotated_round_trip_through_the_reader(small, tmp_path):
    from psyattrs.data import load_corpus

    path = write_annotated(small.utterances, tmp_path / "corpus.csv")
    corpus = load_corpus(path)
    assert corpus.format == "annotated" and not corpus.problems
    back, orig = corpus.utterances, small.utterances
    cols = ["doc_id", "sent_id", "position", "person_type", "person_name", "person_id", "persona", "turn",
            "time", "is_pause", "text"] + [c for c in orig.columns if c.startswith(("labeler", "true_"))]  # fmt: skip
    pd.testing.assert_frame_equal(back[cols].reset_index(drop=True), orig[cols].reset_index(drop=True), check_dtype=False)


def test_public_round_trip_through_the_reader(medium, public):
    from psyattrs.data import load_corpus

    path, truth, frame = public
    corpus = load_corpus(path)
    assert corpus.format == "public" and not corpus.problems and corpus.n_kept == len(frame)
    seq = corpus.label_sequences.set_index(["doc_id", "position"]).sort_index()
    order = truth.order.dropna(subset=["position"]).astype({"position": int})
    labels = medium.utterances.set_index("sent_id").loc[order["sent_id"], [f"labeler_{h}" for h in HEADS]]
    expected = pd.DataFrame(labels.to_numpy(), index=pd.MultiIndex.from_frame(order[["doc_id", "position"]]),
                            columns=labels.columns).sort_index()  # fmt: skip
    pd.testing.assert_frame_equal(seq[expected.columns], expected, check_dtype=False)


def test_cli_writes_both_formats_and_reports(tmp_path, capsys):
    out = tmp_path / "nested" / "corpus.csv"
    assert main(["data", "synth", "--out", str(out), "--dialogues", "3", "--seed", "4"]) == 0
    said = capsys.readouterr().out
    n = len(pd.read_csv(out))
    assert f"wrote 3 dialogues, {n} sentences" in said and str(out) in said and "annotated" in said
    pub = tmp_path / "pub.csv"
    assert main(["data", "synth", "--out", str(pub), "--dialogues", "3", "--seed", "4", "--format", "public",
                 "--rare-boost", "2"]) == 0  # fmt: skip
    said = capsys.readouterr().out
    assert "public format" in said and (tmp_path / "pub.order.csv").is_file()
    assert len(pd.read_csv(pub)) == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dialogues", "0"], "n_dialogues must be an integer >= 1, got 0"),
        (["--rare-boost", "-1"], "rare_boost must be in (0, "),
        (["--seed", "-3"], "seed must be a non-negative integer, got -3"),
    ],
)
def test_cli_bad_values_exit_2_with_one_line(tmp_path, capsys, args, message):
    assert main(["data", "synth", "--out", str(tmp_path / "c.csv"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.count("\n") == 1


def test_cli_rejects_a_non_csv_output(tmp_path, capsys):
    assert main(["data", "synth", "--out", str(tmp_path / "c.parquet"), "--dialogues", "2"]) == 2
    assert "must end in .csv" in capsys.readouterr().err


def test_unknown_resolution_method_is_named():
    with pytest.raises(ValueError, match=r"unknown method 'vote'; allowed: \['opela'"):
        synthesize(2, method="vote")


def test_public_line_counts_reported_by_the_writer_match_the_file(public):
    _, truth, frame = public
    quirks = truth.conversations.set_index("doc_id").loc[frame["doc_id"]]
    assert (frame["persona_text_all"].str.count("\n").to_numpy() + 1 == quirks["persona_lines"].to_numpy()).all()
    assert (frame["user_text_all"].str.count("\n").to_numpy() + 1 == quirks["user_lines"].to_numpy()).all()
    assert (frame["total_sent"].to_numpy() == quirks["total_sent"].to_numpy()).all()


# ---------------------------------------------------------------------------------------------
# the release's shape (issue 14)


def _runs_and_ends(df: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for doc, g in df.groupby("doc_id", sort=False):
        kinds = np.where(g["is_pause"], "pause", g["person_type"]).tolist()
        speak = [k for k in kinds if k != "pause"]
        pauses_ok = [
            (kinds[i - 1] == "persona" or kinds[i - 1] == "pause") and (i + 1 == len(kinds) or kinds[i + 1] in ("user", "pause"))
            for i, k in enumerate(kinds) if k == "pause"
        ]
        rows.append({"doc_id": doc, "runs": 1 + sum(a != b for a, b in zip(speak, speak[1:])),
                     "user_opens": speak[0] == "user", "persona_closes": kinds[-1] != "user",
                     "pauses_ok": all(pauses_ok), "pauses": len(pauses_ok)})
    return pd.DataFrame(rows)


def test_release_shape_opens_with_the_user_closes_with_the_persona_and_has_exact_turns():
    syn = synthesize(40, seed=13, release_shape=True)
    shape = _runs_and_ends(syn.utterances).merge(syn.conversations[["doc_id", "total_turn"]], on="doc_id")
    assert shape["user_opens"].all() and shape["persona_closes"].all()
    assert (shape["runs"] == 2 * shape["total_turn"]).all()
    assert shape["pauses"].sum() > 40 and shape["pauses_ok"].all()  # a pause closes a persona run
    free = _runs_and_ends(synthesize(40, seed=13).utterances)
    assert 0.1 < 1 - free["user_opens"].mean() < 0.5  # the original simulation: ~30% opened by the persona
    assert not free["pauses_ok"].all()


def test_release_shape_answers_questions_with_shared_words():
    """A reply shares a word with the message before it more often in the release's shape."""

    def shared(df: pd.DataFrame) -> float:
        hits = total = 0
        for _, g in df[~df["is_pause"]].groupby("doc_id", sort=False):
            who, text = g["person_type"].tolist(), g["text"].tolist()
            for i in range(1, len(who)):
                if who[i] != who[i - 1]:
                    a = {w for w in re.findall(r"\w{2,}", text[i - 1])}
                    b = {w for w in re.findall(r"\w{2,}", text[i])}
                    total += 1
                    hits += bool(a & b)
        return hits / total

    release = synthesize(30, seed=14, release_shape=True).utterances
    free = synthesize(30, seed=14).utterances
    assert shared(release) > shared(free) + 0.02


def test_release_shape_must_be_a_boolean():
    with pytest.raises(ValueError, match="release_shape"):
        synthesize(2, release_shape="yes")


@pytest.mark.parametrize(("args", "release"), [([], True), (["--shape", "free"], False), (["--shape", "release"], True)])
def test_cli_public_format_is_release_shaped_unless_told(tmp_path, capsys, args, release):
    from psyattrs.synth import write_public

    out = tmp_path / "pub.csv"
    assert main(["data", "synth", "--out", str(out), "--dialogues", "6", "--seed", "3", "--format", "public", *args]) == 0
    assert ("release shape" if release else "free shape") in capsys.readouterr().out
    syn = synthesize(6, seed=3, release_shape=release)
    write_public(syn.utterances, syn.conversations, tmp_path / "expected.csv", seed=3,
                 truth_path=tmp_path / "expected.order.csv")
    assert out.read_bytes() == (tmp_path / "expected.csv").read_bytes()
    other = synthesize(6, seed=3, release_shape=not release)
    write_public(other.utterances, other.conversations, tmp_path / "other.csv", seed=3, truth_path=tmp_path / "o.csv")
    assert out.read_bytes() != (tmp_path / "other.csv").read_bytes()
