"""What pandas hides when it reads a CSV file: rows cut short and NUL bytes.

pandas pads a row with fewer fields than the header (a file cut short while it was written or
read, missing trailing cells) with empty cells, which a label column reads as "not rated", and
keeps NUL bytes inside cells. `row_faults` finds those rows so that the readers set them aside
with their row numbers (`psyattrs.data.io.read_table` puts them in `df.attrs["row_faults"]`).
Both checks cost next to nothing on a clean file: the field count runs only when the last column
has an empty cell (a short row always leaves it empty), the NUL scan only when the file holds a
NUL byte (one `mmap.find`). The field count is no second CSV parse: `_field_counts` finds the
record ends and separators of the file's bytes with NumPy (the file's encodings, UTF-8 and CP949,
never use the bytes of `"`, `,`, CR and LF inside a multi-byte character); only a file whose
quotes are not plain CSV quoting (a quote inside an unquoted cell), or whose records it counts
differently from pandas, is counted with the csv module instead.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd

from psyattrs.errors import InputFileError


def row_faults(path: Path, encoding: str, df: pd.DataFrame, header: list[str]) -> dict[int, tuple[str, str]]:
    """Rows of a CSV table (as pandas read it) to set aside: {0-based row: (reason, field)}.

    Args:
        path: the CSV file.
        encoding: its encoding (as `pandas.read_csv` was given it).
        df: the table pandas read, one row per data row.
        header: the column names.
    """
    faults: dict[int, tuple[str, str]] = {}
    if len(df) and df.iloc[:, -1].isna().any():  # a short row always leaves the last cell empty
        for row, n in _short_rows(path, encoding, len(header), len(df)).items():
            faults[row] = (f"this row has {n} field(s) but the header has {len(header)} (cut short before "
                           f"column {header[n]!r})", "row")
    if _has_nul(path):
        for col in df.columns:
            values = df[col]
            if values.dtype != object and not pd.api.types.is_string_dtype(values.dtype):
                continue
            hit = values.astype(str).str.contains("\x00", regex=False) & values.notna()
            for row in np.flatnonzero(hit.to_numpy(dtype=bool)):
                faults.setdefault(int(row), (f"binary content: a NUL byte in column {col!r}", str(col)))
    return dict(sorted(faults.items()))


def _has_nul(path: Path) -> bool:
    import mmap

    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        return mm.find(b"\x00") >= 0


def _short_rows(path: Path, encoding: str, n_columns: int, n_rows: int) -> dict[int, int]:
    """{0-based data row: its number of fields} for the rows with fewer fields than the header.

    Counts fields in the bytes with NumPy (`_field_counts`), or with the csv module where that
    cannot tell (blank lines are not rows, as for pandas).

    Raises:
        InputFileError: the csv module and pandas count the rows differently, so the short rows
            cannot be named.
    """
    if n_columns <= 1:
        return {}  # a row has at least one field
    if encoding.replace("_", "-").lower() in _BYTE_SAFE:
        counts = _field_counts(path)
        if counts is not None and len(counts) == n_rows:
            return {int(row): int(counts[row]) for row in np.flatnonzero(counts < n_columns)}
    return _short_rows_csv(path, encoding, n_columns, n_rows)


_BYTE_SAFE = frozenset({"utf-8", "utf-8-sig", "utf8", "cp949", "euc-kr", "ascii", "latin-1"})
"""Encodings in which the bytes of `"`, `,`, CR and LF only ever stand for those characters."""
_QUOTE, _COMMA, _LF, _CR = 0x22, 0x2C, 0x0A, 0x0D


def _field_counts(path: Path) -> "np.ndarray | None":
    """The number of fields of every data row of a CSV file, from its bytes, as pandas splits it.

    Records end at LF, CR LF or a lone CR outside quotes; blank records (empty, or only spaces and
    tabs) are not rows; the first row is the header. None when the file's quotes are not plain
    CSV quoting (a quote opening other than at a cell's start, or closing other than before a
    comma, a line end, another quote or the end of the file), where only a CSV parser can tell.
    """
    import mmap

    with path.open("rb") as fh:
        if path.stat().st_size == 0:
            return np.zeros(0, dtype=np.int64)
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            buf = np.frombuffer(mm, dtype=np.uint8)
            try:
                return _count_fields(buf)
            finally:
                del buf  # the mmap cannot close while a view of it lives


def _count_fields(buf: np.ndarray) -> "np.ndarray | None":
    start = 3 if bytes(buf[:3]) == b"\xef\xbb\xbf" else 0
    buf = buf[start:]
    n = len(buf)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    quotes = np.flatnonzero(buf == _QUOTE)
    if len(quotes):
        if len(quotes) % 2:
            return None
        opens, closes = quotes[0::2], quotes[1::2]
        before = np.where(opens > 0, buf[np.maximum(opens - 1, 0)], _COMMA)
        ok_open = (before == _COMMA) | (before == _LF) | (before == _CR)
        ok_open |= (opens > 0) & (before == _QUOTE)  # the second quote of a doubled one
        after = np.where(closes < n - 1, buf[np.minimum(closes + 1, n - 1)], _COMMA)
        ok_close = (after == _COMMA) | (after == _LF) | (after == _CR) | (after == _QUOTE)
        if not (ok_open.all() and ok_close.all()):
            return None

    # positions only (no array of the file's size but the byte comparisons): a line end is outside
    # quotes when an even number of quotes comes before it
    lf, cr, commas = np.flatnonzero(buf == _LF), np.flatnonzero(buf == _CR), np.flatnonzero(buf == _COMMA)
    if len(quotes):
        lf = lf[np.searchsorted(quotes, lf) % 2 == 0]
        cr = cr[np.searchsorted(quotes, cr) % 2 == 0]
    if len(cr):
        cr = cr[(cr + 1 >= n) | (buf[np.minimum(cr + 1, n - 1)] != _LF)]  # CR LF ends a record once, at LF
        ends = np.union1d(lf, cr)
    else:
        ends = lf
    if not len(ends) or ends[-1] != n - 1:
        ends = np.append(ends, n)  # the last record without a line end
    starts = np.concatenate(([0], ends[:-1] + 1))
    fields = 1 + np.searchsorted(commas, ends) - np.searchsorted(commas, starts)
    if len(quotes):  # less the commas inside each quoted cell, in the record that holds it
        inside = np.searchsorted(commas, closes) - np.searchsorted(commas, opens)
        fields -= np.bincount(np.searchsorted(ends, opens), weights=inside, minlength=len(ends)).astype(np.int64)
    lengths = ends - starts
    blank = (fields == 1) & (lengths == 0)
    for i in np.flatnonzero((fields == 1) & (lengths > 0)):  # a record of spaces and tabs only is blank too
        record = bytes(buf[starts[i]:ends[i]])
        blank[i] = not record.rstrip(b"\r").strip(b" \t")
    fields = fields[~blank]
    return fields[1:] if len(fields) else fields


def _short_rows_csv(path: Path, encoding: str, n_columns: int, n_rows: int) -> dict[int, int]:
    """`_short_rows` with the csv module."""
    short: dict[int, int] = {}
    limit = csv.field_size_limit()
    csv.field_size_limit(1 << 30)
    try:
        with path.open(encoding=encoding, newline="") as fh:
            records = (r for r in csv.reader(fh) if r)
            next(records, None)  # the header
            count = 0
            for count, record in enumerate(records, start=1):
                if len(record) < n_columns:
                    short[count - 1] = len(record)
    except (csv.Error, UnicodeDecodeError) as exc:
        raise InputFileError(path, f"malformed CSV: {exc}") from None
    finally:
        csv.field_size_limit(limit)
    if count != n_rows and short:
        first = min(short)
        raise InputFileError(
            path, f"malformed CSV: {len(short)} row(s) have fewer fields than the header (the first near row "
            f"{first + 1} has {short[first]} of {n_columns})",
        )
    return short
