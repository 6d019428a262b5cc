"""Reconstructing real conversations the way a reader does (issue 14): scoring against hand-made
reading orders, the cross-speaker coherence model, the user-opens / persona-closes prior, and
`show-aligned --gold`. The conversations and the gold folders are made up here.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from psyattrs.align import AlignSettings, align_public, write_aligned
from psyattrs.align.coherence import FEATURES, CoherenceModel, PairFeaturizer, content_morphemes, is_question
from psyattrs.align.gold import gold_counts, read_gold, readers_agreement, score_gold, summarize
from psyattrs.cli import main
from psyattrs.data.opela import read_public
from psyattrs.errors import InputFileError

from test_align import FAST, _own_cache, _public  # noqa: F401 (_own_cache: autouse fixture)


def _gold(tmp_path, doc: str, readings: dict[str, list[str]], uncertain: dict[str, list[str]] | None = None):
    root = tmp_path / "gold"
    for reader, order in readings.items():
        (root / reader).mkdir(parents=True, exist_ok=True)
        body = {"doc_id": doc, "order": order, "uncertain": (uncertain or {}).get(reader, []), "notes": ""}
        (root / reader / f"{doc}.json").write_text(json.dumps(body), encoding="utf-8")
    return root


CONV = dict(doc_id="cafe_u1_2_6", persona="어서 오세요!\n\n크로칸슈가 제일 유명해요", user="안녕하세요\n제일 인기 많은 메뉴가 뭐에요?\n좋아요",
            pauses=1, turns=2, labels=["s", "s", "sig", "q", "s", "s"])


def test_gold_counts_count_non_blank_persona_lines_before_each_user_line():
    order = [("U", 0), ("P", 0), ("P", 1), ("U", 1), ("P", 2), ("U", 2)]
    assert gold_counts(order, np.array([False, True, False])) == {0: 0, 1: 1, 2: 2}


def test_score_gold_scores_agreed_user_lines_only(tmp_path):
    corpus = read_public(_public(tmp_path, [CONV]))
    # both readers: U0 P0 P1(pause) U1 P2 U2; they differ on nothing but where the pause goes
    gold = read_gold(_gold(tmp_path, CONV["doc_id"], {
        "reader1": ["U0", "P0", "P1", "U1", "P2", "U2"],
        "reader2": ["U0", "P0", "U1", "P1", "P2", "U2"],
    }, {"reader1": ["U2"]}))
    assert readers_agreement(corpus, gold)[CONV["doc_id"]] == 1.0
    truth = pd.DataFrame({
        "doc_id": CONV["doc_id"], "position": range(5), "is_pause": False, "align_confidence": [1.0, 0.95, 0.5, 0.99, 0.2],
        "person_type": ["user", "persona", "user", "persona", "user"],
        "line_start": [0, 0, 1, 2, 2], "line_end": [1, 1, 2, 3, 3],
    })
    scored = score_gold(truth, corpus, gold)
    assert scored["agreed"].all() and scored["right"].all() and scored["uncertain"].tolist() == [False, False, True]
    wrong = truth.assign(position=[0, 1, 3, 2, 4])  # U1 after P2 instead of before it
    per = summarize(score_gold(wrong, corpus, gold))
    assert per.loc["all", "lines"] == 3 and per.loc["all", "right"] == pytest.approx(2 / 3)
    # a reading that lacks a line places it wrong
    assert not score_gold(truth.iloc[:4], corpus, gold)["right"].iloc[2]


def test_read_gold_refuses_bad_folders(tmp_path):
    with pytest.raises(InputFileError, match="does not exist"):
        read_gold(tmp_path / "none")
    (tmp_path / "empty" / "reader1").mkdir(parents=True)
    with pytest.raises(InputFileError, match="no reader subfolder"):
        read_gold(tmp_path / "empty")
    root = _gold(tmp_path, "d", {"reader1": ["U0", "X1"]})
    with pytest.raises(InputFileError, match="not P<i> or U<j>"):
        read_gold(root)
    root = _gold(tmp_path, "d", {"reader1": ["U0", "U0"]})
    with pytest.raises(InputFileError, match="twice"):
        read_gold(root)


def test_question_detection_and_pair_features_see_the_echo():
    assert is_question("제일 인기 많은 메뉴가 뭐에요?") and is_question("내일 뭐 할까") and not is_question("커피 좋아해요")
    lines = ["메뉴가 뭐에요?", "크로칸슈가 가장 유명해요", "커피 좋아해요", "여자친구랑 커피 마셨어", "날씨 좋다", "안녕하세요"]
    feat = PairFeaturizer(lines)
    X = feat.features(["여자친구랑 커피 마셨어", "안녕하세요"], ["커피 좋아해요", "날씨 좋다", "안녕하세요"])
    f = {n: k for k, n in enumerate(FEATURES)}
    assert X.shape == (2, 3, len(FEATURES))
    assert X[0, 0, f["word_overlap"]] > 0 and X[0, 1, f["word_overlap"]] == 0  # "커피" echoed
    assert X[0, 0, f["bigram_overlap"]] > X[0, 1, f["bigram_overlap"]]
    assert X[1, 2, f["both_greet"]] == 1 and X[0, 2, f["both_greet"]] == 0


def test_coherence_model_learns_that_answers_echo_and_is_cross_fitted():
    rng = np.random.default_rng(0)
    topics = ["커피", "강아지", "여행", "영화", "축구", "요리", "음악", "수영", "독서", "게임"]
    persona, user, events = [], [], []
    for c in range(12):
        ts = rng.permutation(topics)[:5]
        p = [f"{t} 좋아해?" for t in ts]
        u = [f"응 {t} 정말 좋아" for t in ts]  # user line k answers persona line k
        persona.append(p)
        user.append(u)
        at = np.ones((5, 5))
        change = np.eye(5) * 0.9 + 0.02  # the posterior says: after persona line k comes user line k
        events.append((change, at, change.T.copy(), at.copy()))
    model = CoherenceModel(persona, user, np.arange(12) % 2)
    model.fit(events)
    assert model.fitted and model.coef["word_overlap"] > 0
    pu, up = model.scores[3]
    assert pu.shape == (5, 5) and up.shape == (5, 5)
    assert (np.diag(pu) > pu.max(axis=1, initial=-np.inf) - 1e-9).all()  # the echo scores highest in each row
    assert np.diag(pu).mean() > 0 > pu[~np.eye(5, dtype=bool)].mean()


def test_content_morphemes_keep_nouns_and_stems_not_endings():
    got = content_morphemes(["카레를 많이 만들었어요 ㅎㅎ", "영화 보셨어요?", ""], "ko")
    assert got[0] == ["카레/NNG", "많이/MAG", "만들/VV"]  # no particle, ending or laughter
    assert got[1] == ["영화/NNG", "보/VV"]  # the honorific and the past ending go: 보셨어요 and 봤어요 share 보
    assert got[2] == []
    assert content_morphemes(["I watched Up twice"], "en") == [["watched", "up", "twice"]]


def test_morpheme_features_count_what_both_lines_hold_by_rarity():
    corpus = ["카레 먹었어요", "카레 좋아해요", "영화 봤어요", "영화 보셨어요?", "오늘 영화 봐요", "날씨 좋네요"]
    f = {name: k for k, name in enumerate(FEATURES)}
    feat = PairFeaturizer(corpus, "ko")
    X = feat.features(["영화 보셨어요?"], ["저는 어제 봤어요", "카레 먹었어요", "영화 봤어요"])
    idf = dict(zip(feat.morphs.index, feat.morphs.idf))
    assert X[0, 0, f["morph_echo"]] == 1 and X[0, 0, f["morph_rare"]] == pytest.approx(idf["보/VV"])
    assert X[0, 1, f["morph_echo"]] == 0 and X[0, 1, f["morph_overlap"]] == 0 and X[0, 1, f["morph_rare"]] == 0
    # two shared morphemes: their rarity summed (log1p), the rarer of the two
    assert X[0, 2, f["morph_overlap"]] == pytest.approx(np.log1p(idf["보/VV"] + idf["영화/NNG"]), rel=1e-5)
    assert X[0, 2, f["morph_rare"]] == pytest.approx(max(idf["보/VV"], idf["영화/NNG"]), rel=1e-5)
    # the word and bigram overlaps miss 보셨어요 / 봤어요; without a language the morpheme features stay 0
    assert X[0, 0, f["word_overlap"]] == 0
    plain = PairFeaturizer(corpus).features(["영화 보셨어요?"], ["저는 어제 봤어요"])
    assert plain[0, 0, [f["morph_overlap"], f["morph_echo"], f["morph_rare"]]].tolist() == [0, 0, 0]


def test_coherence_model_learns_the_morpheme_echo():
    # the reply shares only an inflected stem with the line before it (먹었 / 먹어, 봤 / 보셨):
    # no word in common, so what is learnt is the morphemes'
    rng = np.random.default_rng(2)
    stems = [("먹었어요?", "먹어요"), ("보셨어요?", "봤어요"), ("만드셨어요?", "만들었어요"), ("가셨어요?", "갔어요"),
             ("읽으셨어요?", "읽었어요"), ("들으셨어요?", "들었어요")]
    persona, user, events = [], [], []
    for c in range(12):
        order = rng.permutation(len(stems))[:5]
        persona.append([f"어제 {stems[k][0]}" for k in order])
        user.append([f"네 저도 {stems[k][1]}" for k in order])
        at = np.ones((5, 5))
        change = np.eye(5) * 0.9 + 0.02
        events.append((change, at, change.T.copy(), at.copy()))
    model = CoherenceModel(persona, user, np.arange(12) % 2, language="ko")
    model.fit(events)
    assert model.coef["morph_echo"] > 0 and model.coef["morph_overlap"] > 0
    pu = model.scores[5][0]
    assert np.diag(pu).mean() > pu[~np.eye(5, dtype=bool)].mean() + 0.5


def test_pair_only_coherence_leaves_where_a_run_ends_to_the_run_model():
    # the posterior changes after every long persona line whatever follows, and after a short one
    # only into the user line that echoes it: the length of the last line is run-end evidence (the
    # run model's), the echo is the pair's
    rng = np.random.default_rng(1)
    topics = ["커피", "강아지", "여행", "영화", "축구", "요리", "음악", "수영", "독서", "게임"]
    persona, user, events = [], [], []
    for c in range(12):
        ts = rng.permutation(topics)[:6]
        p = [f"{t} 좋아" if k % 2 else f"나는 요즘 주말마다 친구들이랑 {t} 이야기를 정말 많이 해" for k, t in enumerate(ts)]
        u = [f"응 {t} 정말 좋아" for t in ts]
        persona.append(p)
        user.append(u)
        at = np.ones((6, 6))
        long = np.array([k % 2 == 0 for k in range(6)])
        change = np.where(long[:, None], 0.9, np.eye(6) * 0.8 + 0.05)
        events.append((change, at, change.T.copy(), at.copy()))
    scores = {}
    for pair_only in (False, True):
        model = CoherenceModel(persona, user, np.arange(12) % 2, pair_only=pair_only)
        model.fit(events)
        assert model.fitted and model.coef["a_len"] > 0
        scores[pair_only] = model.scores[3][0]
    off = ~np.eye(6, dtype=bool)
    long_rows, short_rows = off[::2], off[1::2]
    full, pairs = scores[False], scores[True]
    # with the one-sided terms, a change after a long line scores well whatever the reply
    assert full[::2][long_rows].mean() > full[1::2][short_rows].mean() + 0.5
    # pair terms only: the long line no longer helps a reply that does not echo it; the echo still does
    gap_full = full[::2][long_rows].mean() - full[1::2][short_rows].mean()
    gap_pairs = pairs[::2][long_rows].mean() - pairs[1::2][short_rows].mean()
    assert abs(gap_pairs) < 0.25 * gap_full
    assert np.diag(pairs).mean() > pairs[off].mean() + 0.5
    assert AlignSettings().coherence_pairs
    with pytest.raises(ValueError, match="coherence_pairs"):
        AlignSettings(coherence_pairs="yes")


def test_turn_shape_makes_the_user_open_and_the_persona_close(tmp_path):
    # labels favour nothing: without the prior the persona may open; with it the user does
    conv = dict(doc_id="donut_u3_1_2", persona="안녕", user="반가워", labels=["s", "s"], turns=1)
    corpus = read_public(_public(tmp_path, [conv]))
    shaped = align_public(corpus, turn_shape=8.0, **FAST).utterances
    assert shaped["person_type"].tolist() == ["user", "persona"]
    # a conversation that can only be read persona-first still aligns
    conv2 = dict(doc_id="donut_u4_1_2", persona="안녕\n또 봐", user="", labels=["s", "s"], turns=1)
    corpus2 = read_public(_public(tmp_path, [conv2], name="p2.csv"))
    result = align_public(corpus2, turn_shape=8.0, **FAST)
    assert (result.report["status"] == "aligned").all()
    with pytest.raises(ValueError, match="turn_shape"):
        AlignSettings(turn_shape=-1.0)
    with pytest.raises(ValueError, match="coherence_weight"):
        AlignSettings(coherence_weight=0)


def test_alignment_with_coherence_runs_and_learns(tmp_path):
    convs = []
    for k in range(6):
        convs.append(dict(doc_id=f"cafe_u{k}_2_4", persona=f"어서 오세요 {k}번 손님\n커피 맛있어요", user="안녕하세요\n커피 주세요",
                          turns=2, labels=["s", "s", "s", "s"]))
    corpus = read_public(_public(tmp_path, convs))
    result = align_public(corpus, coherence=True, turn_shape=8.0, model_kind="majority", iterations=2)
    assert (result.report["status"] == "aligned").all()
    for _, g in result.utterances.groupby("doc_id"):
        assert g["person_type"].tolist() == ["user", "persona", "user", "persona"]


def test_show_aligned_marks_where_the_gold_order_differs(tmp_path, capsys):
    path = _public(tmp_path, [CONV])
    out = tmp_path / "aligned.csv"
    write_aligned(align_public(read_public(path), **FAST), out)
    table = pd.read_csv(out)
    # make the gold disagree with whatever the reconstruction did for the last user line
    root = _gold(tmp_path, CONV["doc_id"], {r: ["U0", "U1", "U2", "P0", "P1", "P2"] for r in ("reader1", "reader2")})
    assert main(["data", "show-aligned", str(out), "--doc", CONV["doc_id"], "--gold", str(root), "--width", "100"]) == 0
    text = capsys.readouterr().out
    assert "agreed user line(s) placed as the readers place them" in text
    persona_before = table.sort_values("position")
    wrong = 0
    seen = 0
    for r in persona_before.itertuples():
        if r.person_type == "persona" and not r.is_pause:
            seen += int(r.line_end - r.line_start)
        elif r.person_type == "user":
            wrong += sum(seen != 0 for _ in range(int(r.line_start), int(r.line_end)))
    assert f"{3 - wrong} of 3 agreed" in text
    assert text.count("readers put it after 0 persona line(s)") == wrong
    assert main(["data", "show-aligned", str(out), "--doc", CONV["doc_id"], "--gold", str(tmp_path / "none")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_data_align_and_training_share_one_cache(tmp_path, capsys):
    from psyattrs.align import aligned_corpus
    from psyattrs.align.reconstruct import cache_entry

    path = _public(tmp_path, [CONV])
    out = tmp_path / "a.csv"
    args = ["data", "align", str(path), "--out", str(out), "--model-kind", "majority", "--iterations", "1"]
    assert main(args) == 0
    first = capsys.readouterr()
    assert "from the alignment cache" not in first.out
    assert "align round 0 of at most 1: 1 conversations, priors only" in first.err  # one line per round
    entry = cache_entry(read_public(path), AlignSettings(model_kind="majority", iterations=1))
    assert (entry / "aligned.csv").read_text(encoding="utf-8") == out.read_text(encoding="utf-8")
    assert main(args + ["--report", str(tmp_path / "r.jsonl")]) == 0
    again = capsys.readouterr()
    assert f"from the alignment cache: {entry}" in again.out and "align round" not in again.err
    assert (tmp_path / "r.jsonl").read_text(encoding="utf-8") == (entry / "report.jsonl").read_text(encoding="utf-8")
    corpus = aligned_corpus(read_public(path), settings=AlignSettings(model_kind="majority", iterations=1))
    assert "align round" not in capsys.readouterr().err  # training found the same entry
    assert len(corpus.utterances) == len(pd.read_csv(out))


def test_exact_turns_reaches_the_turn_count_where_it_can(tmp_path):
    # five one-line messages each; total_turn says 2 exchanges (4 runs): the lines allow it
    conv = dict(doc_id="donut_u5_2_6", persona="그렇구나\n좋아", user="안녕\n오늘 뭐 해?\n나는 산책\n너는?", turns=2,
                labels=["s", "s", "q", "s", "q", "s"])
    corpus = read_public(_public(tmp_path, [conv]))
    shaped = align_public(corpus, turn_shape=8.0, exact_turns=True, **FAST)
    kinds = shaped.utterances["person_type"].tolist()
    runs = 1 + sum(a != b for a, b in zip(kinds, kinds[1:]))
    assert runs == 4 and kinds[0] == "user" and kinds[-1] == "persona"
    assert shaped.report["speaker_runs"].iloc[0] == 4
    with pytest.raises(ValueError, match="exact_turns"):
        AlignSettings(exact_turns=1)


def test_match_runs_moves_the_change_shift_until_the_runs_match(tmp_path):
    from psyattrs.align.classifier import PriorScorer
    from psyattrs.align.conversations import read_conversations
    from psyattrs.align.rounds import Aligner

    conv = dict(doc_id="donut_u6_3_8", persona="그렇구나\n좋아\n응\n그래", user="안녕\n오늘 뭐 해?\n나는 산책\n너는?", turns=3,
                labels=["s"] * 8)
    corpus = read_public(_public(tmp_path, [conv]))
    convs, _ = read_conversations(corpus)
    aligner = Aligner(convs, corpus.schema, AlignSettings(turn_shape=8.0, model_kind="majority"))
    logp = PriorScorer(corpus.schema, aligner.all_labels, len(aligner.cands)).log_proba()
    aligner.tilt[0] = -6.0  # far too few changes
    fit = aligner.align_one(0, logp, aligner.priors0, decode=True)
    before = aligner.speaker_runs(fit)
    assert before < 6
    matched = aligner.match_runs(0, fit, logp, aligner.priors0, tries=8)
    # text-free and label-free, every change is alike: the runs jump from fewest to most, and the
    # closest reading is kept
    assert abs(aligner.speaker_runs(matched) - 6) < abs(before - 6) and aligner.tilt[0] > -6.0
    assert matched.confidence is not None and len(matched.confidence) == 8


def _kinds(rows: pd.DataFrame) -> list[str]:
    return np.where(rows["is_pause"], "pause", rows["person_type"]).tolist()


def test_pause_rule_puts_the_user_after_a_pause_and_a_persona_line_before_it(tmp_path):
    # pause-count 1, five labels: the pause (signature) is third; text-free and with the labels
    # alike, the pause may sit between two persona lines; the rule puts the user's line after it
    conv = dict(doc_id="donut_u7_2_5", persona="오늘 뭐 했어?\n\n산책 다녀왔어", user="그냥 쉬었어\n좋다", pauses=1, turns=2,
                labels=["s", "s", "sig", "s", "s"])
    corpus = read_public(_public(tmp_path, [conv]))
    plain = align_public(corpus, turn_shape=0.0, pause_rule=0.0, **FAST)
    ruled = align_public(corpus, pause_rule=8.0, **FAST)
    kinds = _kinds(ruled.utterances.sort_values("position"))
    assert (ruled.report["mode"] == "pauses counted").all()
    k = kinds.index("pause")
    assert kinds[k - 1] == "persona" and kinds[k + 1] == "user"
    # a conversation that breaks the rule still aligns (the rule is a penalty)
    conv2 = dict(doc_id="donut_u8_1_3", persona="\n안녕\n또 봐", user="", pauses=1, turns=1, labels=["sig", "s", "s"])
    result = align_public(read_public(_public(tmp_path, [conv2], name="p2.csv")), pause_rule=8.0, **FAST)
    assert (result.report["status"] == "aligned").all()
    assert _kinds(plain.utterances.sort_values("position")) == ["persona", "user", "pause", "persona", "user"]
    with pytest.raises(ValueError, match="pause_rule"):
        AlignSettings(pause_rule=-1.0)


def test_the_rounds_say_how_they_stopped_and_damping_is_validated(tmp_path):
    conv = dict(doc_id="donut_u9_2_4", persona="오늘 뭐 했어?\n산책 다녀왔어", user="그냥 쉬었어\n좋다", turns=2,
                labels=["q", "s", "s", "s"])
    corpus = read_public(_public(tmp_path, [conv]))
    capped = align_public(corpus, model_kind="majority", iterations=0)
    assert capped.stopped == "cap" and len(capped.history) == 1
    settled = align_public(corpus, model_kind="majority", iterations=6, damping=0.5)
    assert settled.stopped == "converged" and len(settled.history) < 7
    for bad in (1.0, -0.1, True):
        with pytest.raises(ValueError, match="damping"):
            AlignSettings(damping=bad)


def test_conversation_rounds_freeze_settled_and_cycling_readings():
    from psyattrs.align.reconstruct import _ConversationRounds

    rounds = _ConversationRounds(3, freeze_after=2)
    a, b, c = [("p", 0, 1)], [("u", 0, 1)], [("u", 1, 2)]
    assert rounds.settle(0, [a, a, a]) == []
    assert rounds.settle(1, [a, b, b]) == []  # conversation 0 unchanged once: still open
    assert rounds.settle(2, [a, a, b]) == [0, 1]  # 0 settled (twice unchanged); 1 is back to round 0's reading
    assert [rounds.reason[i] for i in range(3)] == ["settled", "cycle", "open"] and rounds.at[:2] == [2, 2]
    assert rounds.settle(3, [b, c, b]) == [2]  # frozen conversations are not looked at again
    assert rounds.all_frozen() and rounds.n_frozen() == 3
    loose = _ConversationRounds(1, freeze_after=2, tol=0.5)  # at most half of the labels may change
    two, flip = [("p", 0, 1), ("u", 0, 1)], [("p", 0, 1), ("u", 0, 2)]
    assert loose.settle(0, [two]) == [] and loose.settle(1, [flip]) == [] and loose.settle(2, [flip]) == [0]
    assert loose.reason == ["flipping"]
    ramped = _ConversationRounds(1, freeze_after=1, tol=0.5, ramp=4)  # round 1: 0.125, round 2: 0.25, ...
    assert ramped.settle(0, [two]) == [] and ramped.settle(1, [flip]) == []  # half changed: above 0.125
    assert ramped.settle(2, [two]) == [0] and ramped.reason == ["cycle"]  # back to round 0's reading
    late = _ConversationRounds(1, freeze_after=1, tol=0.5, ramp=4)
    readings = [two, flip] + [two[:1] + [("u", k, 1)] for k in (1, 2, 3)]  # each round: half the labels change
    assert [late.settle(i, [p]) for i, p in enumerate(readings)] == [[], [], [], [], [0]]
    assert late.reason == ["flipping"] and late.at == [4]  # tolerated from round 4 (0.5) on
    never = _ConversationRounds(1, freeze_after=0)
    assert all(never.settle(i, [a]) == [] for i in range(4)) and not never.all_frozen()
    with pytest.raises(ValueError, match="freeze_after"):
        AlignSettings(freeze_after=-1)


def test_the_report_says_how_each_conversation_stopped(tmp_path):
    convs = [dict(doc_id=f"donut_u{k}_2_4", persona="오늘 뭐 했어?\n산책 다녀왔어", user="그냥 쉬었어\n좋다", turns=2,
                  labels=["q", "s", "s", "s"]) for k in (3, 4)]
    corpus = read_public(_public(tmp_path, convs))
    result = align_public(corpus, model_kind="majority", iterations=8, min_change=0.0, freeze_after=1)
    rep = result.report
    assert result.stopped == "converged" and len(result.history) < 9  # every conversation frozen
    assert set(rep["rounds_stop"]) <= {"settled", "flipping", "cycle"} and rep["frozen_round"].notna().all()
    assert int(result.history["frozen"].iloc[-1]) == 2
    # without freezing nothing is frozen: the rounds stop at min_change or the cap
    plain = align_public(corpus, model_kind="majority", iterations=3, min_change=0.0, freeze_after=0)
    assert set(plain.report["rounds_stop"]) == {"open"} and plain.report["frozen_round"].isna().all()
    assert (plain.history["frozen"] == 0).all()


def test_exact_turns_search_finds_a_narrow_window_of_shifts():
    # runs come two at a time: only shifts in [1.03, 1.04) give exactly 2 x total_turn = 8 runs;
    # 6 halvings of [0, 8] step over that window, the default 10 land in it
    from types import SimpleNamespace

    from psyattrs.align.rounds import Aligner

    def fit_at(tilt: float):
        runs = 6 if tilt < 1.03 else 8 if tilt < 1.04 else 10
        return SimpleNamespace(path=object(), runs=runs, tilt=tilt)

    def fake() -> SimpleNamespace:
        me = SimpleNamespace(convs=[SimpleNamespace(total_turn=4.0)], settings=AlignSettings(), tilt=np.zeros(1),
                             speaker_runs=lambda f: f.runs)
        # the search's tries align without posteriors (`_align`: the fit and its lattice)
        me._align = lambda ci, logp, priors, decode: (fit_at(float(me.tilt[ci])), None)
        return me

    me = fake()
    assert Aligner.match_runs(me, 0, fit_at(0.0), None, None, tries=6).runs != 8
    me = fake()
    best = Aligner.match_runs(me, 0, fit_at(0.0), None, None)
    assert best.runs == 8 and 1.03 <= me.tilt[0] < 1.04
