"""Validation helpers, the summary, the set-aside report and `psyattrs data validate`."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from conftest import annotated_frame, generic_frame, public_frame, write_csv
from psyattrs.cli import main
from psyattrs.data import load_corpus, read_annotated, read_public
from psyattrs.data.io import parse_label_column
from psyattrs.data.table import blank_cells
from psyattrs.data.table import Problem
from psyattrs.data.summary import format_summary, summarize
from psyattrs.data.validate import check_utterances, parse_flag, parse_int_list, write_report
from psyattrs.errors import InputFileError, OutputFileError
from psyattrs.schema import OPELA


# ----------------------------------------------------------------------------------------------
# parsing helpers


def test_parse_label_column_accepts_numbers_text_and_missing_tokens():
    values = pd.Series(["1", " 2 ", "", "NA", "null", "2.0", "x", "3", "1.5"], dtype=object)
    labels, bad = parse_label_column(values, OPELA["self"])
    assert labels.dtype == "Int64"
    assert labels.isna().tolist() == [False, False, True, True, True, False, True, True, True]
    assert labels.dropna().tolist() == [1, 2, 2]
    assert bad.tolist() == [False, False, False, False, False, False, True, True, True]


def test_parse_label_column_numeric_input():
    labels, bad = parse_label_column(pd.Series([0.0, 4.0, np.nan, 5.0, -1.0]), OPELA["empathy"])
    assert labels.dropna().tolist() == [0, 4]
    assert bad.tolist() == [False, False, False, True, True]


@pytest.mark.parametrize("dtype", ["int64", "int8", "uint64"])
def test_parse_label_column_integer_input(dtype):
    # one pass over an integer column: negative numbers and numbers past the last class are bad
    raw = [0, 4, 2] + ([5, -1] if dtype != "uint64" else [5, 2**63 + 1])
    source = pd.Series(np.array(raw, dtype=dtype))
    labels, bad = parse_label_column(source, OPELA["empathy"])
    assert labels.dtype == "Int64" and labels.isna().tolist() == [False, False, False, True, True]
    assert labels.dropna().tolist() == [0, 4, 2] and bad.tolist() == [False, False, False, True, True]
    labels, bad = parse_label_column(pd.Series(np.array([0, 4, 2], dtype=dtype)), OPELA["empathy"])
    assert labels.tolist() == [0, 4, 2] and not bad.any()



def test_parse_label_column_copies_unless_told_not_to():
    # by default the labels never alias the input; copy=False (a reader replacing the column) may
    # hand over the buffer when nothing needs rewriting, and never when a cell is bad
    source = pd.Series(np.array([0, 1, 2, 1], dtype="int64"))
    labels, _ = parse_label_column(source, OPELA["self"])
    assert not np.shares_memory(labels.array._data, source.to_numpy())
    labels, _ = parse_label_column(source, OPELA["self"], copy=False)
    assert np.shares_memory(labels.array._data, source.to_numpy()) and labels.tolist() == [0, 1, 2, 1]
    with_bad = pd.Series(np.array([0, 7, 2], dtype="int64"))
    labels, bad = parse_label_column(with_bad, OPELA["self"], copy=False)
    assert not np.shares_memory(labels.array._data, with_bad.to_numpy())
    assert with_bad.tolist() == [0, 7, 2] and bad.tolist() == [False, True, False]


@pytest.mark.parametrize("dtype", ["str", "string[pyarrow]", "string[python]", object])
def test_blank_cells_is_what_str_strip_says_for_every_text_dtype(dtype):
    values = ["a", "", " ", None, "\u3000", "x y", "\t\n", "\u200b", "\xa0", "ㅋ", " ok "]
    expected = [v is None or v.strip() == "" for v in values]
    halves = [pd.Series(values[:4], dtype=dtype), pd.Series(values[4:], dtype=dtype)]  # two Arrow chunks
    for series in (pd.Series(values, dtype=dtype), pd.concat(halves, ignore_index=True)):
        got = blank_cells(series)
        assert got.dtype == bool and got.tolist() == expected
    assert blank_cells(pd.Series([], dtype=dtype)).tolist() == []
    assert blank_cells(pd.Series([1.0, np.nan])).tolist() == [False, True]

def test_parse_flag():
    flags, bad = parse_flag(pd.Series(["1", "0", "", "true", "2", "yes?"], dtype=object))
    assert flags.tolist() == [True, False, False, True, False, False]
    assert bad.tolist() == [False, False, False, False, True, True]
    flags, bad = parse_flag(pd.Series([1, 0, 3]))
    assert flags.tolist() == [True, False, False] and bad.tolist() == [False, False, True]


@pytest.mark.parametrize(
    "cell, expected",
    [
        ("[1, 0, 2]", [1, 0, 2]),
        ("[]", []),
        ("[1, 0,]", [1, 0]),  # Python-style trailing comma
        ("[1.0, 2]", [1, 2]),
        ("[1, 'a']", None),
        ("[true]", None),
        ("[[1]]", None),
        ("1, 2", None),
        ("[1, 2", None),
        (3, None),
        ([2, 3], [2, 3]),
    ],
)
def test_parse_int_list(cell, expected):
    assert parse_int_list(cell) == expected


def test_check_utterances_without_optional_columns():
    df = pd.DataFrame({"doc_id": ["a", "a", ""], "text": ["hi", "", "yo"]})
    checked = check_utterances(df, OPELA)
    assert checked.bad.tolist() == [False, True, True]
    assert [(p.row, p.field, p.reason) for p in checked.problems] == [
        (2, "text", "empty text on a non-pause row"),
        (3, "doc_id", "empty doc_id"),
    ]
    assert checked.labels == {}


# ----------------------------------------------------------------------------------------------
# summary


def test_summary_of_annotated_counts_labels_per_head_and_labeler(tmp_path):
    df = annotated_frame()
    df["labeler3_self"] = df["labeler3_self"].astype("Int64")
    df.loc[4, "labeler3_self"] = pd.NA  # one missing annotation
    df.loc[1, "labeler2_engage"] = 9  # set aside
    s = summarize(read_annotated(write_csv(df, tmp_path / "a.csv")))
    assert s["records"] == {"read": 7, "kept": 6, "set_aside": 1}
    assert s["set_aside_by_field"] == {"labeler2_engage": 1}
    assert (s["conversations"], s["utterances"], s["pauses"]) == (2, 6, 1)
    assert s["labelers"] == [1, 2, 3]
    # kept rows: 0, 2, 3, 4, 5, 6 -> self values 2, 0, 0, 1, 2, 1
    assert s["heads"]["self"]["final"] == {"0": 2, "1": 2, "2": 2}
    assert s["heads"]["self"]["labelers"]["3"] == {"counts": {"0": 2, "1": 1, "2": 2}, "missing": 1}
    assert s["heads"]["self"]["final_missing"] == 0
    assert s["heads"]["strange"]["final"] == {"0": 1, "1": 5}
    assert s["context_only"] == 0
    json.dumps(s)  # plain JSON values only


def test_summary_of_public_reports_line_checks(public_csv):
    s = summarize(read_public(public_csv))
    assert s["record_kind"] == "conversation"
    assert s["records"] == {"read": 4, "kept": 4, "set_aside": 0}
    assert s["line_check"] == {"adds up": 1, "pauses not counted": 1, "extra lines": 1, "fewer lines": 1}
    assert s["line_check_detail"]["3 extra lines"] == 1
    assert (s["conversations"], s["utterances"], s["pauses"]) == (4, 22, 3)
    assert s["label_positions"] == 6 + 5 + 4 + 3
    assert s["blank_user_line_rows"] == 1 and s["trailing_newline_rows"] == 1
    assert s["pause_count_mismatch_rows"] == 0
    assert sum(s["heads"]["empathy"]["final"].values()) == 18
    assert "context_only" not in s


def test_summary_of_generic_counts_context_rows(generic_csv, generic_schema):
    s = summarize(load_corpus(generic_csv, schema=generic_schema))
    assert s["schema"] == "toy" and s["labelers"] == [1, 2, 3, 4]
    assert s["context_only"] == 2
    assert s["heads"]["abuse"]["labelers"]["3"] == {"counts": {"0": 1, "1": 1}, "missing": 4}


def test_format_summary_is_readable_text(public_csv):
    text = format_summary(summarize(read_public(public_csv)))
    assert "format public, schema opela" in text
    assert "records (conversations): read 4 = kept 4 + set aside 0" in text
    assert "adds up 1, pauses not counted 1, extra lines 1, fewer lines 1" in text
    assert "labelers: none" in text
    head_lines = [line for line in text.splitlines() if line.strip().startswith(("strange", "empathy"))]
    assert len(head_lines) == 2 and head_lines[1].split()[:2] == ["empathy", "final"]


# ----------------------------------------------------------------------------------------------
# report


def test_write_report_one_json_object_per_record(tmp_path):
    problems = [
        Problem("doc1", "labeler_self has 4 elements", "labeler_self", row=2),
        Problem("문서2", "duplicate sent_id 'x_1' (first at row 1)", "sent_id", row=3, sent_id="x_1"),
    ]
    path = tmp_path / "r.jsonl"
    assert write_report(problems, path) == 2
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert rows == [
        {"doc_id": "doc1", "reason": "labeler_self has 4 elements", "field": "labeler_self", "row": 2},
        {"doc_id": "문서2", "reason": "duplicate sent_id 'x_1' (first at row 1)", "field": "sent_id", "row": 3, "sent_id": "x_1"},
    ]
    assert "문서2" in path.read_text(encoding="utf-8")


def test_write_report_to_an_unwritable_place_is_an_output_error(tmp_path):
    with pytest.raises(OutputFileError, match=r"r.jsonl: cannot write: No such file or directory"):
        write_report([], tmp_path / "missing-dir" / "r.jsonl")


# ----------------------------------------------------------------------------------------------
# the command


def test_cli_validate_prints_summary_and_exits_0(public_csv, capsys):
    assert main(["data", "validate", str(public_csv)]) == 0
    out = capsys.readouterr().out
    assert "read 4 = kept 4 + set aside 0" in out and "pauses not counted 1" in out


def test_cli_validate_writes_the_report(tmp_path, capsys):
    df = public_frame()
    df.loc[0, "labeler_engage"] = str(json.loads(df.loc[0, "labeler_engage"])[:-1])
    path = write_csv(df, tmp_path / "p.csv")
    report = tmp_path / "r.jsonl"
    assert main(["data", "validate", str(path), "--report", str(report)]) == 0
    out = capsys.readouterr().out
    assert "read 4 = kept 3 + set aside 1" in out
    assert "set aside: row 1, donut_user0001_2_6: labeler_engage has 5 elements" in out
    assert [json.loads(line) for line in report.read_text().splitlines()] == [
        {
            "doc_id": "donut_user0001_2_6",
            "reason": "labeler_engage has 5 elements; total_sent and the other label lists say 6",
            "field": "labeler_engage",
            "row": 1,
        }
    ]


def test_cli_validate_report_folder_missing_fails_before_reading(public_csv, tmp_path, capsys):
    assert main(["data", "validate", str(public_csv), "--report", str(tmp_path / "no" / "r.jsonl")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip().endswith("r.jsonl: cannot write the report: its folder does not exist")


def test_cli_validate_with_schema_and_forced_format(generic_csv, generic_schema, capsys):
    assert main(["data", "validate", str(generic_csv), "--schema", str(generic_schema), "--format", "generic"]) == 0
    assert "schema toy" in capsys.readouterr().out


def test_cli_validate_exit_1_when_nothing_is_usable(tmp_path, capsys):
    df = annotated_frame()
    df["text"] = ""
    df["is_pause"] = 0
    assert main(["data", "validate", str(write_csv(df, tmp_path / "a.csv"))]) == 1
    out = capsys.readouterr().out
    assert "read 7 = kept 0 + set aside 7" in out and "no usable record" in out


def test_cli_validate_more_fields_than_header_is_unusable(tmp_path, capsys):
    path = tmp_path / "x.csv"
    path.write_text("doc_id,text\nd1,안녕,extra\nd1,응\n", encoding="utf-8")
    assert main(["data", "validate", str(path)]) == 2
    assert "row 1: malformed CSV: this row has more fields than the header" in capsys.readouterr().err


def _bad_files(tmp_path):
    undecodable = tmp_path / "undecodable.csv"
    undecodable.write_bytes(b"doc_id,text\n1,\xff\xfe\xfd\xfc\x80\x80\n")
    missing_col = write_csv(annotated_frame().drop(columns=["text"]), tmp_path / "nocol.csv")
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    binary = tmp_path / "img.png"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    return [
        (undecodable, r"undecodable bytes at line 2"),
        (missing_col, r"column 'text': required column missing"),
        (empty, r"empty file"),
        (binary, r"(binary content|undecodable bytes)"),
        (tmp_path / "absent.csv", r"file not found"),
        (tmp_path, r"is a directory"),
    ]


def test_cli_validate_unusable_files_exit_2_with_one_message(tmp_path, capsys):
    for path, message in _bad_files(tmp_path):
        assert main(["data", "validate", str(path)]) == 2, path
        captured = capsys.readouterr()
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1, captured.err
        assert lines[0].startswith(f"psyattrs: error: {path}")
        assert re.search(message, lines[0]), lines[0]
        assert captured.out == ""


def test_cli_validate_bad_format_names_the_allowed(annotated_csv, capsys):
    assert main(["data", "validate", str(annotated_csv), "--format", "xml"]) == 2
    err = capsys.readouterr().err
    assert "format 'xml' is not one of ['annotated', 'public', 'generic', 'personaldialog', 'lewidi', 'long']" in err


def test_cli_validate_as_a_subprocess_shows_no_traceback(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_bytes(b"doc_id,text\n1,\"never closed\n")
    out = subprocess.run(
        [sys.executable, "-m", "psyattrs", "data", "validate", str(path)], capture_output=True, text=True
    )
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert out.stderr.strip() == f"psyattrs: error: {path}, row 1: malformed CSV: a quoted cell is never closed"


@pytest.mark.parametrize(
    "values",
    [
        pd.Series([0, 2, 2, None, 1, 7, None], dtype="Int64"),  # the readers' type, with gaps
        pd.Series([0, 2, 2, 1, 7]),  # numpy integers, no gaps
        pd.Series([0, 2, -3, 2, 1, 7]),  # a negative number: no class either
        pd.Series([0.0, 2.0, 2.0, np.nan, 1.0, 7.0]),  # floats: counted by value
        pd.Series(["0", "2", "2", None, "1", "7"], dtype=object),  # text
    ],
)
def test_class_counts_and_gaps_of_any_label_column(values):
    from psyattrs.data.summary import _class_counts

    counts, missing = _class_counts(values, [0, 1, 2])
    assert counts == {"0": 1, "1": 1, "2": 2}  # 7 is no class: not counted
    assert missing == int(values.isna().sum())
    assert _class_counts(values, [-1, 0, 2]) == ({"-1": 0, "0": 1, "2": 2}, missing)


def test_context_only_counts_rows_without_any_label():
    from psyattrs.data.summary import _count_unlabelled

    table = pd.DataFrame({"a": pd.array([1, None, None, 0], dtype="Int64"), "b": pd.array([None, None, 1, None], dtype="Int64")})
    assert _count_unlabelled(table, ["a", "b"]) == 1
    assert _count_unlabelled(table.assign(b=pd.array([1, 0, 1, 1], dtype="Int64")), ["a", "b"]) == 0
    assert _count_unlabelled(table, []) == 4
