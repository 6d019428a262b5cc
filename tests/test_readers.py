"""The readers: OPELA annotated and public release, generic tables, PersonalDialog; detection."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import (
    GENERIC_SCHEMA_YAML,
    HEADS,
    PUBLIC_CASES,
    annotated_frame,
    generic_frame,
    label_lists,
    personaldialog_records,
    public_frame,
    write_csv,
    write_jsonl,
)
from psyattrs.data import (
    FORMATS,
    detect_format,
    iter_personaldialog,
    load_corpus,
    read_annotated,
    read_generic,
    read_personaldialog,
    read_public,
)
from psyattrs.data.table import BASE_COLUMNS, Problem
from psyattrs.errors import InputFileError
from psyattrs.schema import load_schema


# ----------------------------------------------------------------------------------------------
# annotated


def test_annotated_reads_every_row_with_documented_columns_and_types(annotated_csv):
    corpus = read_annotated(annotated_csv)
    utt = corpus.utterances
    assert (corpus.format, corpus.record_kind, corpus.n_read, corpus.n_kept) == ("annotated", "sentence", 7, 7)
    assert corpus.problems == []
    assert list(utt.columns[: len(BASE_COLUMNS)]) == list(BASE_COLUMNS)
    assert utt["position"].tolist() == [0, 1, 2, 3, 0, 1, 2]
    assert utt["turn"].dtype == "Int64" and utt["turn"].tolist() == [1, 1, 2, 2, 1, 1, 2]
    assert "turn_notation" not in utt  # every cell was a number, so it became `turn`
    assert utt["is_pause"].tolist() == [False, False, True, False, False, False, False]
    assert utt["persona"].tolist() == ["donut"] * 4 + ["ferret"] * 3
    assert utt["person_name_original"].iloc[0] == "꼬마 도넛"  # extra columns are kept
    for h in HEADS:
        assert utt[f"labeler2_{h}"].dtype == "Int64"
        assert utt[f"labeler_{h}"].tolist() == annotated_frame()[f"labeler_{h}"].tolist()


def test_annotated_text_is_unchanged_including_quirks_and_na_words(annotated_csv):
    texts = read_annotated(annotated_csv).utterances["text"].tolist()
    assert texts == ["안녕  반가워~! ㅎㅎ", " 나도 피곤하_다 ㅠㅠ", "", "좋아 ♡ ", "뭐 해?", "책 읽어ㅋㅋ", "NA"]


def test_annotated_keeps_true_columns_and_numeric_looking_ids_as_text(tmp_path):
    df = annotated_frame()
    df["doc_id"] = ["007"] * 4 + ["010"] * 3
    df["sent_id"] = ["007_1", "007_2", "007_3", "007_4", "010_1", "010_2", "010_3"]
    df["true_self"] = [2, 1, 0, 0, 1, 2, 1]
    corpus = read_annotated(write_csv(df, tmp_path / "a.csv"))
    assert corpus.utterances["doc_id"].unique().tolist() == ["007", "010"]
    assert corpus.utterances["true_self"].dtype == "Int64"
    assert corpus.utterances["true_self"].tolist() == [2, 1, 0, 0, 1, 2, 1]


def test_annotated_persona_falls_back_to_doc_id_prefix_without_persona_rows(tmp_path):
    df = annotated_frame()
    df.loc[df["doc_id"].str.startswith("ferret"), "person_type"] = "user"
    df = df.drop(columns=["person_name"])
    corpus = read_annotated(write_csv(df, tmp_path / "a.csv"))
    assert corpus.utterances["persona"].tolist() == ["donut"] * 4 + ["ferret"] * 3
    assert corpus.conversations["persona"].tolist() == ["donut", "ferret"]
    assert corpus.conversations["n_pauses"].tolist() == [1, 0]


def test_annotated_keeps_turn_notation_when_some_turns_are_not_numbers(tmp_path):
    df = annotated_frame()
    df["turn_notation"] = df["turn_notation"].astype(str)
    df.loc[2, "turn_notation"] = "2a"
    utt = read_annotated(write_csv(df, tmp_path / "a.csv")).utterances
    assert utt["turn_notation"].tolist()[2] == "2a"
    assert utt["turn"].isna().tolist() == [False, False, True, False, False, False, False]


def test_annotated_sets_aside_exactly_the_faulty_rows_with_reasons(tmp_path):
    df = annotated_frame().astype({"labeler2_self": object, "labeler1_empathy": object})
    df.loc[1, "labeler2_self"] = 7  # outside 0..2
    df.loc[4, "labeler1_empathy"] = "x"  # not a number
    df.loc[5, "text"] = "   "  # empty text on a non-pause row
    df.loc[6, "sent_id"] = df.loc[5, "sent_id"]  # duplicate sent_id: the later row goes
    corpus = read_annotated(write_csv(df, tmp_path / "a.csv"))
    got = {(p.row, p.field): p for p in corpus.problems}
    assert sorted(got) == [(2, "labeler2_self"), (5, "labeler1_empathy"), (6, "text"), (7, "sent_id")]
    assert got[(2, "labeler2_self")].reason == "labeler2_self 7 is not one of [0, 1, 2]"
    assert got[(5, "labeler1_empathy")].reason == "labeler1_empathy 'x' is not one of [0, 1, 2, 3, 4]"
    assert got[(6, "text")].reason == "empty text on a non-pause row"
    assert got[(7, "sent_id")].reason == "duplicate sent_id 'ferret_user0002_2' (first at row 6)"
    assert got[(7, "sent_id")].doc_id == "ferret_user0002_2_3_1_2_3"
    assert corpus.n_read == 7 and corpus.n_kept == 3 and corpus.n_read == corpus.n_kept + len(corpus.problems)
    # the kept rows keep their place in the conversation
    assert corpus.utterances["position"].tolist() == [0, 2, 3]


def test_annotated_row_with_several_faults_is_one_problem_naming_all(tmp_path):
    df = annotated_frame().astype({"is_pause": object, "person_type": object})
    df.loc[0, "is_pause"] = 2
    df.loc[0, "person_type"] = "bot"
    corpus = read_annotated(write_csv(df, tmp_path / "a.csv"))
    assert len(corpus.problems) == 1
    p = corpus.problems[0]
    assert p.row == 1 and p.field == "person_type, is_pause"
    assert p.reason == "person_type 'bot' is not one of ['persona', 'user']; is_pause 2 is not 0 or 1"


def test_annotated_missing_required_column_names_it(tmp_path):
    df = annotated_frame().drop(columns=["labeler3_empathy"])
    with pytest.raises(InputFileError, match=r"column 'labeler3_empathy': required column missing"):
        read_annotated(write_csv(df, tmp_path / "a.csv"))


def test_annotated_missing_column_hint_names_a_near_miss(tmp_path):
    df = annotated_frame().rename(columns={"sent_id": "sent_id "})
    with pytest.raises(InputFileError, match=r"column 'sent_id'.*the file has 'sent_id '"):
        read_annotated(write_csv(df, tmp_path / "a.csv"))


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "cp949"])
def test_annotated_reads_each_encoding(tmp_path, encoding):
    df = annotated_frame()
    df["text"] = df["text"].str.replace("♡", "*")  # '♡' exists in CP949 too, but keep it plain
    corpus = read_annotated(write_csv(df, tmp_path / "a.csv", encoding=encoding))
    assert corpus.utterances["text"].tolist()[:2] == ["안녕  반가워~! ㅎㅎ", " 나도 피곤하_다 ㅠㅠ"]
    assert corpus.utterances.columns[0] == "doc_id"  # no BOM left in the first column name


def test_undecodable_bytes_set_their_row_aside_and_name_it(tmp_path):
    # issue 26: the guarantee is "a row with undecodable bytes is set aside with its row number,
    # the rest kept" (this test used to expect the whole file refused)
    path = write_csv(annotated_frame(), tmp_path / "a.csv")
    raw = path.read_bytes().split(b"\n")
    raw[3] = raw[3] + b"\xff\xfe\xff"  # a few broken bytes in a UTF-8 file (line 4, data row 3)
    path.write_bytes(b"\n".join(raw))
    corpus = read_annotated(path)
    assert [(p.row, p.field) for p in corpus.problems] == [(3, "labeler_empathy")]
    assert "undecodable bytes" in corpus.problems[0].reason
    assert corpus.n_read == corpus.n_kept + 1 == 7


def test_annotated_parquet(tmp_path):
    path = tmp_path / "a.parquet"
    annotated_frame().to_parquet(path)
    corpus = read_annotated(path)
    assert corpus.n_kept == 7 and corpus.utterances["labeler_empathy"].tolist() == [3, 4, 0, 2, 3, 1, 0]
    assert detect_format(path) == "annotated"


def test_malformed_csv_names_the_row(tmp_path):
    path = write_csv(annotated_frame(), tmp_path / "a.csv")
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[3] += ",extra"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputFileError, match=r"row 3: malformed CSV: this row has 35 fields but the header has 34"):
        read_annotated(path)


def test_unclosed_quote_names_the_row(tmp_path):
    path = write_csv(annotated_frame(), tmp_path / "a.csv")
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[5] = lines[5].replace("뭐 해?", '"뭐 해?')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputFileError, match=r"row 5: malformed CSV: a quoted cell is never closed"):
        read_annotated(path)


# ----------------------------------------------------------------------------------------------
# public release


def test_public_line_check_classifies_each_quirk(public_csv):
    corpus = read_public(public_csv)
    conv = corpus.conversations.set_index("doc_id")
    assert (corpus.format, corpus.record_kind, corpus.n_read, corpus.n_kept) == ("public", "conversation", 4, 4)
    for doc, case in PUBLIC_CASES.items():
        row = conv.loc[doc]
        assert row["line_check"] == case["check"], doc
        assert row["persona_lines"] == case["persona_lines"], doc
        assert row["persona_blank_lines"] == case["persona_blank"], doc
        assert row["user_lines"] == case["user_lines"], doc
        assert row["user_blank_lines"] == case["user_blank"], doc
        assert row["line_excess"] == case["persona_lines"] + case["user_lines"] - case["total_sent"], doc
    assert conv["persona_trailing_newline"].tolist() == [False, False, True, False]
    assert conv["user_trailing_newline"].tolist() == [False, False, False, False]


def test_public_utterances_are_the_lines_as_they_are(public_csv):
    utt = read_public(public_csv).utterances
    donut = utt[utt["doc_id"] == "donut_user0001_2_6"]
    assert donut["text"].tolist() == ["", "안녕 반가워~!", "나는 오늘  빵을 구웠어 ㅎㅎ", "안녕하세요 ♡", "저는 피곤하_다 ㅠㅠ", " 빵 좋아해요 "]
    assert donut["person_type"].tolist() == ["persona"] * 3 + ["user"] * 3
    assert donut["line"].tolist() == [0, 1, 2, 0, 1, 2]
    assert donut["is_pause"].tolist() == [True, False, False, False, False, False]
    assert donut["sent_id"].tolist()[:2] == ["donut_user0001_2_6_persona_1", "donut_user0001_2_6_persona_2"]
    assert donut["person_name"].tolist() == ["donut"] * 3 + ["user0001"] * 3
    assert donut["person_id"].tolist() == [""] * 3 + ["61b7014000"] * 3
    assert set(donut["persona"]) == {"donut"}
    assert utt["position"].dtype == "Int64" and utt["position"].isna().all()
    assert not any(c.startswith("labeler") for c in utt.columns)
    # blank user lines are kept, flagged, and are not pauses; the trailing newline adds no line
    lib = utt[utt["doc_id"] == "librarian_user0003_2_4"]
    assert lib["text"].tolist() == ["책 좋아해?", "나는 요즘 소설을", "읽고 있어", "응 좋아해", "", "", "추천해 줘"]
    assert lib["is_blank"].tolist() == [False, False, False, False, True, True, False]
    assert not lib["is_pause"].any()
    assert len(utt) == sum(c["persona_lines"] + c["user_lines"] for c in PUBLIC_CASES.values())


def test_public_texts_can_be_rebuilt_exactly(public_csv):
    corpus = read_public(public_csv)
    utt, conv = corpus.utterances, corpus.conversations.set_index("doc_id")
    for doc, case in PUBLIC_CASES.items():
        for who in ("persona", "user"):
            lines = utt[(utt["doc_id"] == doc) & (utt["person_type"] == who)].sort_values("line")["text"]
            rebuilt = "\n".join(lines) + ("\n" if conv.loc[doc, f"{who}_trailing_newline"] else "")
            assert rebuilt == case[who], (doc, who)


def test_public_label_sequences_are_the_lists_in_order(public_csv):
    seq = read_public(public_csv).label_sequences
    assert list(seq.columns) == ["doc_id", "position"] + [f"labeler_{h}" for h in HEADS]
    for i, (doc, case) in enumerate(PUBLIC_CASES.items()):
        part = seq[seq["doc_id"] == doc]
        assert part["position"].tolist() == list(range(case["total_sent"]))
        for head, values in label_lists(case["total_sent"], seed=i).items():
            assert part[f"labeler_{head}"].tolist() == values
    assert seq["labeler_self"].dtype == "Int64"


def test_public_conversations_hold_survey_and_parsed_pause_hours(public_csv):
    conv = read_public(public_csv).conversations.set_index("doc_id")
    assert conv.loc["ferret_user0002_3_5", "pause_hour"] == [1, 24]
    assert conv.loc["librarian_user0003_2_4", "pause_hour"] == []
    assert conv["blri_user"].dtype == "Int64"
    assert conv["persona"].tolist() == ["donut", "ferret", "librarian", "care"]
    assert conv.loc["donut_user0001_2_6", "persona_summary"] == "#음식 이야기  #날씨"
    for gone in ("persona_text_all", "user_text_all", "labeler_self"):
        assert gone not in conv


def test_public_accepts_engaging_as_attract(tmp_path):
    df = public_frame().rename(columns={"attract_persona": "engaging_persona", "attract_user": "engaging_user"})
    conv = read_public(write_csv(df, tmp_path / "p.csv")).conversations
    assert "engaging_persona" not in conv
    assert conv["attract_persona"].tolist() == public_frame()["attract_persona"].tolist()
    assert conv["attract_user"].tolist() == public_frame()["attract_user"].tolist()


def test_public_both_names_agreeing_is_fine_disagreeing_is_an_error(tmp_path):
    df = public_frame()
    df["engaging_user"] = df["attract_user"]
    assert "engaging_user" not in read_public(write_csv(df, tmp_path / "p.csv")).conversations
    df.loc[2, "engaging_user"] = 9
    with pytest.raises(InputFileError, match=r"row 3, column 'engaging_user': .* disagree"):
        read_public(write_csv(df, tmp_path / "p2.csv"))


def _shorten(cell: str) -> str:
    values = json.loads(cell)
    return str(values[:-1])


def test_public_shortened_list_sets_aside_exactly_that_row(public_csv, tmp_path):
    df = public_frame()
    df.loc[1, "labeler_empathy"] = _shorten(df.loc[1, "labeler_empathy"])
    corpus = read_public(write_csv(df, tmp_path / "p.csv"))
    assert [(p.doc_id, p.field, p.row) for p in corpus.problems] == [("ferret_user0002_3_5", "labeler_empathy", 2)]
    assert corpus.problems[0].reason == "labeler_empathy has 4 elements; total_sent and the other label lists say 5"
    assert corpus.n_read == 4 and corpus.n_kept == 3
    assert "ferret_user0002_3_5" not in set(corpus.conversations["doc_id"])
    assert "ferret_user0002_3_5" not in set(corpus.utterances["doc_id"])
    assert "ferret_user0002_3_5" not in set(corpus.label_sequences["doc_id"])


def test_public_self_contradictions(tmp_path):
    df = public_frame()
    lists = label_lists(5, seed=1)
    df.loc[0, "total_sent"] = 7  # every list has 6: total_sent disagrees
    df.loc[1, "labeler_self"] = str(lists["self"][:2] + [3] + lists["self"][3:])  # 3 is outside 0..2
    df.loc[2, "labeler_active"] = "[1, 0, x]"  # not a list of integers
    df.loc[3, "pause_hour"] = "[1, "
    corpus = read_public(write_csv(df, tmp_path / "p.csv"))
    got = {p.doc_id: p for p in corpus.problems}
    assert got["donut_user0001_2_6"].field == "total_sent"
    assert got["donut_user0001_2_6"].reason == "the label lists have 6 elements but total_sent is 7"
    assert got["ferret_user0002_3_5"].field == "labeler_self"
    assert got["ferret_user0002_3_5"].reason.startswith("labeler_self holds 3 at position 2")
    assert got["librarian_user0003_2_4"].field == "labeler_active"
    assert got["librarian_user0003_2_4"].reason == "labeler_active is not a list of integers"
    assert got["care_user0004_1_3"].field == "pause_hour"
    assert corpus.n_kept == 0 and corpus.n_read == 4


def test_public_repeated_doc_id_keeps_the_first(tmp_path):
    df = pd.concat([public_frame(), public_frame().iloc[[0]]], ignore_index=True)
    corpus = read_public(write_csv(df, tmp_path / "p.csv"))
    assert [(p.row, p.reason) for p in corpus.problems] == [(5, "doc_id repeats an earlier row")]
    assert corpus.n_kept == 4


def test_public_missing_label_list_column_is_an_error(tmp_path):
    df = public_frame().drop(columns=["labeler_uneasy"])
    with pytest.raises(InputFileError, match=r"column 'labeler_uneasy': required column missing"):
        read_public(write_csv(df, tmp_path / "p.csv"))


def test_public_real_rows_all_usable_with_line_check_counts(real_public_rows):
    corpus = read_public(real_public_rows)
    assert corpus.n_read == 135 and corpus.n_kept == 135 and corpus.problems == []
    checks = corpus.conversations["line_check"]
    assert (checks == "adds up").sum() == 64
    assert (checks == "pauses not counted").sum() == 4
    assert checks.str.contains("extra line").sum() == 67
    # FORMATS §3 counts 5 / 66: it counts the empty string after a trailing newline as a line,
    # which turns this row's excess of 2 into 3 = pause_count
    row = corpus.conversations.set_index("doc_id").loc["ferret_user0723_17_44"]
    assert row["line_check"] == "2 extra lines" and row["persona_trailing_newline"] and row["pause_count"] == 3
    assert len(corpus.label_sequences) == 15654
    assert (corpus.conversations["user_blank_lines"] > 0).sum() == 3


def test_public_real_rows_shortened_list_sets_aside_that_row(real_public_rows, tmp_path):
    df = pd.read_csv(real_public_rows, dtype=str, keep_default_na=False)
    df.loc[10, "labeler_self"] = _shorten(df.loc[10, "labeler_self"])
    path = tmp_path / "copy.csv"
    df.to_csv(path, index=False)
    corpus = read_public(path)
    assert [(p.row, p.doc_id, p.field) for p in corpus.problems] == [(11, df.loc[10, "doc_id"], "labeler_self")]
    assert "labeler_self has" in corpus.problems[0].reason
    assert corpus.n_kept == 134


# ----------------------------------------------------------------------------------------------
# generic


def test_generic_any_number_of_labelers_empty_cells_and_context_rows(generic_csv, generic_schema):
    corpus = read_generic(generic_csv, generic_schema)
    utt = corpus.utterances
    assert corpus.schema.head_names == ["abuse", "severity"]
    assert (corpus.format, corpus.n_read, corpus.n_kept, corpus.problems) == ("generic", 6, 6, [])
    assert utt["labeler4_abuse"].isna().tolist() == [True, False, True, False, True, False]
    assert utt["labeler4_abuse"].dropna().tolist() == [1, 0, 1]
    assert utt["labeler3_severity"].isna().sum() == 5
    assert utt["sent_id"].tolist() == ["c1_1", "c1_2", "c1_3", "c2_1", "c2_2", "c2_3"]
    assert utt["text"].tolist()[4] == "둘째  문장"
    label_cols = [c for c in utt.columns if c.startswith("labeler")]
    assert utt[label_cols].isna().all(axis=1).tolist() == [False, False, True, False, True, False]


def test_generic_parquet_and_final_columns(tmp_path, generic_schema):
    df = generic_frame()
    df["labeler_abuse"] = pd.array([0, 1, None, 0, None, 1], dtype="Int64")
    df.to_parquet(tmp_path / "g.parquet")
    corpus = read_generic(tmp_path / "g.parquet", generic_schema)
    assert corpus.utterances["labeler_abuse"].dtype == "Int64"
    assert corpus.utterances["labeler_abuse"].isna().tolist() == [False, False, True, False, True, False]


def test_generic_label_for_unknown_head_is_an_error(tmp_path, generic_schema):
    df = generic_frame()
    df["labeler1_abus"] = 1
    with pytest.raises(InputFileError, match=r"column 'labeler1_abus': label column for head 'abus'"):
        read_generic(write_csv(df, tmp_path / "g.csv"), generic_schema)


def test_generic_label_outside_custom_classes_is_set_aside(tmp_path, generic_schema):
    df = generic_frame()
    df.loc[3, "labeler2_severity"] = 5
    corpus = read_generic(write_csv(df, tmp_path / "g.csv"), generic_schema)
    assert [(p.row, p.field, p.reason) for p in corpus.problems] == [
        (4, "labeler2_severity", "labeler2_severity 5 is not one of [0, 1, 2, 3, 4]")
    ]


def test_generic_needs_doc_id_and_text(tmp_path):
    df = generic_frame().drop(columns=["text"])
    with pytest.raises(InputFileError, match=r"column 'text': required column missing"):
        read_generic(write_csv(df, tmp_path / "g.csv"))


# ----------------------------------------------------------------------------------------------
# PersonalDialog


def test_personaldialog_both_record_kinds_and_variants(personaldialog_jsonl):
    corpus = read_personaldialog(personaldialog_jsonl)
    utt = corpus.utterances
    assert (corpus.format, corpus.record_kind, corpus.n_read, corpus.n_kept) == ("personaldialog", "dialogue", 3, 3)
    assert corpus.schema.language == "zh"
    assert utt["doc_id"].tolist() == ["pd1"] * 3 + ["pd2"] * 3 + ["pd3"] * 3
    assert utt["position"].tolist() == [0, 1, 2] * 3
    assert utt["person_id"].tolist() == ["0", "1", "0", "0", "1", "0", "1", "0", "0"]
    assert utt["speaker_tags"].tolist()[:2] == ["旅游;音乐", ""]  # a tag list holding only "" is no tags
    assert utt["speaker_loc"].tolist()[1] == "福建 厦门"
    assert utt["is_golden"].tolist() == [False] * 5 + [True] + [False] * 2 + [True]
    golden = utt[utt["is_golden"]]
    assert golden["text"].tolist() == ["那 就 好", "最近 忙 吗"]  # the one-element list is unwrapped
    assert golden["speaker_gender"].tolist() == ["male", "female"]
    assert utt["text"].tolist()[6] == "晚上 好"
    # `tag` as a ;-string and as a list holding one: both give the same joined tags
    assert utt["speaker_tags"].tolist()[6:8] == ["电影;游戏", "跑步;读书"]
    conv = corpus.conversations
    assert conv["is_biased"].tolist()[1:] == [True, False] and pd.isna(conv["is_biased"].iloc[0])
    assert conv["has_golden"].tolist() == [False, True, True]


def test_personaldialog_real_samples(tmp_path):
    from conftest import SHARED_DATA

    paths = [SHARED_DATA / f"personaldialog_{k}_sample.jsonl" for k in ("train", "test")]
    if not all(p.is_file() for p in paths):
        pytest.skip("PersonalDialog samples not present in ../shared/data")
    train, test = (read_personaldialog(p) for p in paths)
    assert len(train.utterances) == 4 and not train.utterances["is_golden"].any()
    assert len(test.utterances) == 4 and test.utterances["is_golden"].tolist() == [False, False, False, True]
    assert test.utterances["person_id"].iloc[-1] == "1"  # the responder is profile 1


def test_personaldialog_bad_records_are_set_aside_with_their_line(tmp_path):
    records = personaldialog_records()
    lines = [json.dumps(r, ensure_ascii=False) for r in records]
    bad_uid = dict(records[0], uid=[0, 1])
    out_of_range = dict(records[0], uid=[0, 5, 0])
    empty = dict(records[0], dialog=["好", "  ", "的"])
    lines[1:1] = [json.dumps(bad_uid), "{not json", "", json.dumps(out_of_range), json.dumps(empty), "[1, 2]"]
    path = tmp_path / "pd.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    corpus = read_personaldialog(path)
    got = [(p.row, p.doc_id, p.field) for p in corpus.problems]
    assert got == [(2, "pd2", "uid"), (3, "pd3", "record"), (5, "pd5", "uid"), (6, "pd6", "dialog"), (7, "pd7", "record")]
    assert corpus.problems[1].reason.startswith("not valid JSON")
    assert corpus.problems[3].reason == "empty text at dialog[1]"
    assert corpus.n_read == 8 and corpus.n_kept == 3  # the blank line is not a record
    assert corpus.conversations["doc_id"].tolist() == ["pd1", "pd8", "pd9"]


def test_personaldialog_streams_in_chunks(tmp_path):
    records = personaldialog_records() * 3  # 9 dialogues
    path = write_jsonl(records[:4] + ["oops"] + records[4:], tmp_path / "pd.jsonl")
    problems: list[Problem] = []
    chunks = list(iter_personaldialog(path, chunk_dialogues=4, problems=problems))
    assert [c["doc_id"].nunique() for c in chunks] == [4, 4, 1]
    assert sum(len(c) for c in chunks) == sum(len(r["dialog"]) + ("golden_response" in r) for r in records)
    assert [(p.row, p.field) for p in problems] == [(5, "record")]
    assert chunks[1]["doc_id"].iloc[0] == "pd6"


def test_personaldialog_stream_without_problem_list_raises_at_the_bad_line(tmp_path):
    path = write_jsonl(personaldialog_records()[:2] + [{"dialog": []}], tmp_path / "pd.jsonl")
    with pytest.raises(InputFileError, match=r"row 3, column 'dialog': 'dialog' must be a non-empty list"):
        list(iter_personaldialog(path, chunk_dialogues=1))


def test_personaldialog_limit_and_bad_arguments(personaldialog_jsonl):
    assert read_personaldialog(personaldialog_jsonl, limit=2).conversations["doc_id"].tolist() == ["pd1", "pd2"]
    with pytest.raises(ValueError, match=r"chunk_dialogues must be a positive integer, got 0"):
        list(iter_personaldialog(personaldialog_jsonl, chunk_dialogues=0))
    with pytest.raises(ValueError, match=r"limit must be None or an integer >= 0, got -1"):
        read_personaldialog(personaldialog_jsonl, limit=-1)


def test_personaldialog_with_no_usable_record_is_an_error(tmp_path):
    path = tmp_path / "pd.jsonl"
    path.write_text('{"dialog": 3}\n{"dialog": ["好"], "uid": [4], "profile": [{}]}\n', encoding="utf-8")
    with pytest.raises(InputFileError, match=r"row 1, column 'dialog': no usable dialogue in 2 record\(s\)"):
        read_personaldialog(path)


# ----------------------------------------------------------------------------------------------
# detection and load_corpus


def test_detect_format_from_content_not_name(tmp_path):
    assert detect_format(write_csv(public_frame(), tmp_path / "public.txt")) == "public"
    assert detect_format(write_csv(annotated_frame(), tmp_path / "x.jsonl")) == "annotated"
    assert detect_format(write_csv(generic_frame(), tmp_path / "y.parquet")) == "generic"
    assert detect_format(write_jsonl(personaldialog_records(), tmp_path / "z.csv")) == "personaldialog"
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + write_csv(generic_frame(), tmp_path / "g.csv").read_bytes())
    assert detect_format(bom) == "generic"


def test_detect_format_annotated_missing_a_labeler_falls_back_to_generic(tmp_path):
    df = annotated_frame().drop(columns=[f"labeler3_{h}" for h in HEADS])
    assert detect_format(write_csv(df, tmp_path / "a.csv")) == "generic"


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", r"empty file"),
        (b"\n\n  \n", r"holds only blank lines"),
        (b'[{"dialog": []}]', r"a JSON array"),
        (b'{"text": "hi"}\n', r"row 1: JSON lines without a 'dialog' key \(found \['text'\]\)"),
        (b"{broken\n", r"row 1: not valid JSON lines"),
        (b"a,b\n1,2\n", r"column 'doc_id': required column missing"),
        (b"doc_id,text\x00\n", r"binary content \(NUL byte at line 1\)"),
        (b"persona_text_all,user_text_all\nx,y\n", r"no labeler_\{head\} label-list columns"),
    ],
)
def test_detect_format_errors(tmp_path, content, message):
    path = tmp_path / "f"
    path.write_bytes(content)
    with pytest.raises(InputFileError, match=message):
        detect_format(path)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(InputFileError, match=r"nope\.csv: file not found"):
        load_corpus(tmp_path / "nope.csv")
    with pytest.raises(InputFileError, match=r"is a directory"):
        load_corpus(tmp_path)


def test_load_corpus_dispatches_and_forces(public_csv, annotated_csv, generic_csv, generic_schema, personaldialog_jsonl):
    assert load_corpus(public_csv).format == "public"
    assert load_corpus(annotated_csv).format == "annotated"
    assert load_corpus(generic_csv, schema=generic_schema).format == "generic"
    assert load_corpus(personaldialog_jsonl).format == "personaldialog"
    forced = load_corpus(annotated_csv, format="generic")
    assert forced.format == "generic" and forced.n_kept == 7
    with pytest.raises(InputFileError, match=r"column 'sent_id': required column missing"):
        load_corpus(generic_csv, format="annotated", schema=generic_schema)


def test_load_corpus_bad_format_names_the_allowed(annotated_csv):
    with pytest.raises(ValueError, match=r"format 'tsv' is not one of \['annotated', 'public', 'generic', 'personaldialog', 'lewidi', 'long'\]"):
        load_corpus(annotated_csv, format="tsv")
    assert FORMATS == ("annotated", "public", "generic", "personaldialog", "lewidi", "long")


def test_load_corpus_reads_an_annotated_file_with_another_schema_as_generic(tmp_path, generic_schema):
    df = annotated_frame()
    for k in (1, 2):
        df[f"labeler{k}_abuse"] = [0, 1, 0, 0, 1, 0, 0]
    path = write_csv(df, tmp_path / "a.csv")
    assert detect_format(path) == "annotated"
    # the OPELA heads are unknown to the toy schema: named, not silently ignored
    with pytest.raises(InputFileError, match=r"column 'labeler1_strange': label column for head 'strange'"):
        load_corpus(path, schema=generic_schema)
    kept = df[[c for c in df.columns if not c.startswith("labeler") or c.endswith("_abuse")]]
    corpus = load_corpus(write_csv(kept, tmp_path / "b.csv"), schema=generic_schema)
    assert corpus.format == "generic" and corpus.utterances["labeler2_abuse"].sum() == 2


def test_a_column_whose_type_changes_late_in_a_long_file_reads_as_in_one_pass(tmp_path):
    """pandas parses long files in chunks; a column that is numbers in the first chunk and text
    later comes back as the one-pass reading gives it (text throughout), not a mix of int and str."""
    from psyattrs.data.io import read_table

    n = 600_000  # more rows than one of pandas's parsing chunks
    path = tmp_path / "long.csv"
    half = n // 2
    path.write_text("id,code,empty_then_text\n"
                    + "".join(f"{i},{i},\n" for i in range(half))
                    + "".join(f"{i},c{i},x\n" for i in range(half, n)), encoding="utf-8")
    df = read_table(path)
    assert pd.api.types.is_integer_dtype(df["id"].dtype)
    for col in ("code", "empty_then_text"):
        assert pd.api.types.is_string_dtype(df[col].dtype), (col, df[col].dtype)
    assert df["code"].iloc[0] == "0" and df["code"].iloc[-1] == f"c{n - 1}"
    assert df["empty_then_text"].isna().sum() == half and df["empty_then_text"].iloc[-1] == "x"
