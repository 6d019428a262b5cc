"""The byte-level field count of `psyattrs.data.row_faults` agrees with the csv module and pandas."""

from __future__ import annotations

import csv
import io

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import numpy as np

from psyattrs.data.row_faults import _count_fields, _short_rows, _short_rows_csv
from psyattrs.errors import InputFileError

CELL = st.text(alphabet=st.sampled_from(list('ab ,"\n\r한') + ["\t"]), max_size=6)


def _fast(raw: bytes):
    return _count_fields(np.frombuffer(raw, dtype=np.uint8))


def _reference(text: str) -> list[int]:
    """Fields per data row by the csv module, blank and spaces-only records dropped (as pandas does)."""
    records = [r for r in csv.reader(io.StringIO(text, newline="")) if r]
    records = [r for r in records if not (len(r) == 1 and not r[0].strip(" \t"))]
    return [len(r) for r in records[1:]]


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.lists(CELL, min_size=1, max_size=4), max_size=8),
    terminator=st.sampled_from(["\n", "\r\n", "\r"]),
    blank_after=st.sets(st.integers(0, 8)),
    final_newline=st.booleans(),
)
def test_written_csv_counts_as_the_csv_module_does(tmp_path_factory, rows, terminator, blank_after, final_newline):
    # quoted cells holding only spaces read as blank records with the csv module; keep them out
    rows = [[c if c.strip(" \t") or len(row) > 1 else "x" for c in row] for row in rows]
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator=terminator)
    writer.writerow(["h1", "h2", "h3", "h4"])
    for i, row in enumerate(rows):
        writer.writerow(row)
        if i in blank_after:
            buffer.write(terminator)
    text = buffer.getvalue()
    if not final_newline:
        text = text[: -len(terminator)] if text.endswith(terminator) else text
    counts = _fast(text.encode("utf-8"))
    assert counts is not None  # csv.writer writes plain quoting
    assert counts.tolist() == _reference(text)
    path = tmp_path_factory.mktemp("csv") / "t.csv"
    path.write_bytes(text.encode("utf-8"))
    df = pd.read_csv(path, keep_default_na=False, na_values=[""], index_col=False, dtype=str)
    if len(counts) == len(df):  # (pandas and the csv module disagree on a few CR-only files)
        assert _short_rows(path, "utf-8", 4, len(df)) == {i: n for i, n in enumerate(counts.tolist()) if n < 4}
    else:  # left to the csv module, as before
        try:
            expected = _short_rows_csv(path, "utf-8", 4, len(df))
        except InputFileError:
            with pytest.raises(InputFileError):
                _short_rows(path, "utf-8", 4, len(df))
        else:
            assert _short_rows(path, "utf-8", 4, len(df)) == expected


@settings(max_examples=400, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(list('a ,"\n\r') + ["\t"]), max_size=40))
def test_any_text_is_counted_right_or_left_to_the_csv_module(text):
    counts = _fast(text.encode("utf-8"))
    if counts is None:
        return  # quoting only a CSV parser can read: the csv module counts
    records = [r for r in csv.reader(io.StringIO(text, newline=""), strict=True) if r]
    # a quoted cell of only spaces (or nothing) is a blank line to the reference but a row to pandas
    assume_plain = all(not (len(r) == 1 and not r[0].strip(" \t") and '"' in text) for r in records)
    if assume_plain:
        assert counts.tolist() == _reference(text)


def test_a_quote_inside_an_unquoted_cell_is_left_to_the_csv_module():
    assert _fast(b'a,b\nx"y,z\n') is None
    assert _fast(b'a,b\n"x"y,z\n') is None
    assert _fast(b'a,b\n"x,""y""",z\n"",\n').tolist() == [2, 2]


def test_utf8_bom_and_cp949_bytes():
    assert _fast("\ufeff\"a\",b\n1\n2,3\n".encode("utf-8")).tolist() == [1, 2]
    assert _fast("a,b\n가,\"나,다\"\n라\n".encode("cp949")).tolist() == [2, 1]
