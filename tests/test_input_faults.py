"""Faulty input files: rows cut short, NUL bytes, encodings, broken JSON lines, clear messages.

Each case is a file a fault-injection pass produced (truncated, mis-encoded, binary bytes); the
reader must set aside exactly the faulty records, with their row and reason, or refuse the file
with one message that says what it is.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from conftest import annotated_frame, generic_frame, personaldialog_records, public_frame, write_csv, write_jsonl
from psyattrs.cli import main
from psyattrs.data import load_corpus
from psyattrs.data.summary import summarize
from psyattrs.errors import InputFileError


def _lines(path):
    return path.read_text(encoding="utf-8").splitlines()


# ----------------------------------------------------------------------------------------------
# rows with too few fields


def test_a_row_cut_short_is_set_aside_with_its_row_and_both_counts(tmp_path):
    path = write_csv(annotated_frame(), tmp_path / "a.csv")
    lines = _lines(path)
    n_columns = len(lines[0].split(","))
    lines[3] = ",".join(lines[3].split(",")[:5])  # data row 3 keeps its first 5 fields
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    corpus = load_corpus(path)
    assert (corpus.n_read, corpus.n_kept) == (7, 6)
    [problem] = corpus.problems
    assert problem.row == 3 and problem.field == "row"
    assert f"this row has 5 field(s) but the header has {n_columns}" in problem.reason
    assert "empty text" not in problem.reason  # a row cut short is not called "empty text"
    assert summarize(corpus)["records"] == {"read": 7, "kept": 6, "set_aside": 1}


def test_a_file_truncated_mid_row_sets_aside_the_last_row_and_the_summary_reconciles(tmp_path, capsys):
    path = write_csv(annotated_frame(), tmp_path / "a.csv")
    raw = path.read_bytes()
    cut = raw.rstrip(b"\n").rfind(b"\n") + 40  # 40 bytes into the last row
    path.write_bytes(raw[:cut])
    assert main(["data", "validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "read 7 = kept 6 + set aside 1" in out
    assert "row 7" in out and "but the header has" in out


def test_a_file_cut_inside_a_character_says_it_was_cut_short(tmp_path):
    path = write_csv(annotated_frame(), tmp_path / "a.csv")
    raw = path.read_bytes()
    cut = raw.rindex("좋아".encode()) + 1  # inside the first byte sequence of 좋
    path.write_bytes(raw[:cut])
    with pytest.raises(InputFileError, match=r"ends inside a UTF-8 character \(line 5\): it was cut short"):
        load_corpus(path)


def test_missing_trailing_cells_written_as_empty_fields_are_not_short(tmp_path):
    frame = annotated_frame()
    frame["labeler_empathy"] = frame["labeler_empathy"].astype("Int64")
    frame.loc[2, "labeler_empathy"] = pd.NA  # the last column: an empty cell written as ",", not missing
    corpus = load_corpus(write_csv(frame, tmp_path / "a.csv"))
    assert corpus.problems == [] and corpus.n_kept == 7


def test_generic_and_public_rows_cut_short_are_set_aside(tmp_path, generic_schema):
    path = write_csv(generic_frame(), tmp_path / "g.csv")
    lines = _lines(path)
    lines[2] = ",".join(lines[2].split(",")[:2])
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    corpus = load_corpus(path, schema=generic_schema)
    assert [(p.row, p.field) for p in corpus.problems] == [(2, "row")]
    assert corpus.n_read == corpus.n_kept + 1

    public = public_frame()
    public = public[[c for c in public.columns if c != "user_text_all"] + ["user_text_all"]]
    path = write_csv(public, tmp_path / "p.csv")
    raw = path.read_bytes()
    last = raw.rindex(public["doc_id"].iloc[-1].encode()) + len(public["doc_id"].iloc[-1]) + 1
    path.write_bytes(raw[:last])  # the last conversation cut short after its doc_id
    corpus = load_corpus(path)
    assert [p.field for p in corpus.problems] == ["row"]
    assert "but the header has" in corpus.problems[0].reason
    assert corpus.n_read == corpus.n_kept + 1 == len(public)


# ----------------------------------------------------------------------------------------------
# NUL bytes


def _big_annotated(n_copies: int) -> pd.DataFrame:
    frame = pd.concat([annotated_frame()] * n_copies, ignore_index=True)
    frame["sent_id"] = [f"s{i}" for i in range(len(frame))]
    return frame


@pytest.mark.parametrize("where", ["early", "past the first 64 KiB"])
def test_a_nul_byte_sets_aside_its_row_wherever_it_is(tmp_path, where):
    frame = _big_annotated(2000)
    row = 2 if where == "early" else len(frame) - 3
    frame.loc[row, "text"] = "bad\x00text"
    path = write_csv(frame, tmp_path / "nul.csv")
    assert where == "early" or path.read_bytes().index(b"\x00") > 1 << 16
    corpus = load_corpus(path)
    assert [(p.row, p.field) for p in corpus.problems] == [(row + 1, "text")]
    assert "NUL byte" in corpus.problems[0].reason
    assert not corpus.utterances["text"].str.contains("\x00", regex=False).any()


def test_a_nul_byte_in_the_header_refuses_the_file(tmp_path):
    path = tmp_path / "bin.csv"
    path.write_bytes(b"doc_id,te\x00xt\nd1,hello\n")
    with pytest.raises(InputFileError, match="binary content"):
        load_corpus(path)


# ----------------------------------------------------------------------------------------------
# JSON lines


def _pd_lines(tmp_path, bad_line: bytes, at: int):
    path = write_jsonl(personaldialog_records(), tmp_path / "pd.jsonl")
    lines = path.read_bytes().splitlines(keepends=True)
    lines.insert(at, bad_line + b"\n")
    path.write_bytes(b"".join(lines))
    return path, len(lines)


@pytest.mark.parametrize("bad", [b'{"dialog": ["caf\xe9"]}', b'{"dialog": ["a\x00b"]}'], ids=["bad bytes", "NUL"])
def test_validate_jsonl_sets_aside_the_one_bad_line(tmp_path, capsys, bad):
    path, n_lines = _pd_lines(tmp_path, bad, 2)
    assert main(["data", "validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "set aside 1" in out and "row 3" in out
    corpus = load_corpus(path)
    assert [p.row for p in corpus.problems if p.field == "line"] == [3]


@pytest.mark.parametrize("bad", [b"{broken json", b'{"dialog": ["caf\xe9"]}', b"\x00\x00"], ids=["json", "bytes", "NUL"])
def test_a_broken_first_line_does_not_stop_format_detection(tmp_path, bad):
    path, _ = _pd_lines(tmp_path, bad, 0)
    corpus = load_corpus(path)
    assert corpus.format == "personaldialog"
    assert 1 in [p.row for p in corpus.problems]


def test_jsonl_whose_lines_are_all_broken_is_still_refused(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text("{broken\n{also broken\n", encoding="utf-8")
    with pytest.raises(InputFileError, match=r"row 1: not valid JSON"):
        load_corpus(path)


# ----------------------------------------------------------------------------------------------
# encodings


def test_latin1_is_not_read_as_korean_cp949(tmp_path):
    path = tmp_path / "latin.csv"
    path.write_bytes("doc_id,text\nd1,\xc4rger heute\nd1,\xc4rger morgen\n".encode("latin-1"))
    assert "\xc4rger".encode("latin-1").decode("cp949") == "훣ger"  # what was read before
    with pytest.raises(InputFileError, match=r"not Korean.*'훣' on line 2.*Latin-1"):
        load_corpus(path)


def test_cp949_korean_is_read_and_its_encoding_is_in_the_summary(tmp_path, capsys):
    path = write_csv(annotated_frame(), tmp_path / "ko.csv", encoding="cp949")
    corpus = load_corpus(path)
    assert corpus.encoding == "cp949" and corpus.utterances["text"].iloc[0] == "안녕  반가워~! ㅎㅎ"
    assert main(["data", "validate", str(path)]) == 0
    assert "encoding cp949" in capsys.readouterr().out.splitlines()[0]
    assert load_corpus(write_csv(annotated_frame(), tmp_path / "u.csv")).encoding == "utf-8"


@pytest.mark.parametrize("codec,name", [("utf-16", "UTF-16 LE"), ("utf-16-be", "UTF-16 BE")])
def test_a_utf16_file_is_named_as_utf16(tmp_path, capsys, codec, name):
    path = tmp_path / "u16.csv"
    path.write_bytes(annotated_frame().to_csv(index=False).encode(codec))
    with pytest.raises(InputFileError, match=name):
        load_corpus(path)
    assert main(["data", "validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert name in err and "binary" not in err and len(err.strip().splitlines()) == 1


# ----------------------------------------------------------------------------------------------
# messages


def test_a_duplicate_parquet_column_is_named_in_one_short_line(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "dup.parquet"
    table = pa.table([pa.array(["d1"]), pa.array(["안녕"]), pa.array(["x"])], names=["doc_id", "text", "text"])
    pq.write_table(table, path)
    with pytest.raises(InputFileError, match=r"column 'text': the Parquet schema names this column twice"):
        load_corpus(path)
    assert main(["data", "validate", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and len(err) < 200


def test_predict_input_does_not_skip_sentences_for_bad_label_cells(tiny_model, tmp_path, capsys):
    frame = annotated_frame()
    frame.loc[1, "labeler2_self"] = 9  # a label outside the head's classes
    frame["labeler_engage"] = frame["labeler_engage"].astype(object)
    frame.loc[4, "labeler_engage"] = "x"
    path = write_csv(frame, tmp_path / "in.csv")
    out = tmp_path / "pred.jsonl"
    assert main(["predict", "--model", str(tiny_model.folder), "--input", str(path), "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 7
    assert "set aside" not in capsys.readouterr().err
