"""What pandas hides when it reads a CSV file: rows cut short and NUL bytes.

pandas pads a row with fewer fields than the header (a file cut short while it was written or
read, missing trailing cells) with empty cells, which a label column reads as "not rated", and
keeps NUL bytes inside cells. `row_faults` finds those rows so that the readers set them aside
with their row numbers (`psyattrs.data.io.read_table` puts them in `df.attrs["row_faults"]`).
Both checks cost next to nothing on a clean file: the field count runs only when the last column
has an empty cell (a short row always leaves it empty), the NUL scan only when the file holds a
NUL byte (one `mmap.find`).
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

    Counts fields with the csv module (blank lines are not rows, as for pandas).

    Raises:
        InputFileError: the csv module and pandas count the rows differently, so the short rows
            cannot be named.
    """
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
