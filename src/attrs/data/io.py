"""Reading input files: encodings, CSV / Parquet / JSON-lines loading and format detection.

Everything that touches raw bytes lives here, so every reader reports a bad file the same way:
an `InputFileError` naming the file and, where known, the row and the column. Text files are
decoded as UTF-8 (a leading BOM is dropped), then as CP949 (older Korean files) when the decoded
text reads as Korean (`psyattrs.data.encoding.reads_as_korean`: a Latin-1 file is not re-read as
CP949 mojibake); a file that is neither is an error naming the line of the first bad byte, and a
UTF-16 file is named as UTF-16. A file that is mostly valid UTF-8 with a few broken bytes is
reported as broken rather than re-read as CP949 mojibake.

Bad rows are set aside, not silently kept: a CSV row with fewer fields than the header (a file
cut short, missing trailing cells) and a row holding a NUL byte, wherever it is in the file, are
listed in `df.attrs["row_faults"]` by `read_table` ({0-based row: (reason, field)}), which the
readers turn into set-aside records; a header with a NUL byte refuses the file. JSON lines are
checked line by line (`iter_checked_lines`): a line that cannot be decoded or holds a NUL byte
is one bad line, not a bad file.

Formats are detected from the content, never from the file name (`detect_format`):

| format           | recognised by                                                               |
|------------------|-----------------------------------------------------------------------------|
| `public`         | a table with `persona_text_all`, `user_text_all` and `labeler_{head}` lists |
| `annotated`      | a table with `doc_id`, `sent_id`, `person_type`, `text` and                 |
|                  | `labeler{1,2,3}_{head}` for the six OPELA heads (FORMATS §2)                |
| `generic`        | any other table with `doc_id` and `text` (FORMATS §5)                       |
| `personaldialog` | JSON lines whose first readable record has a `dialog` key                   |
| `lewidi`         | one JSON object whose first value is an item with `text`, `annotators` and  |
|                  | `annotations` (the LeWiDi harmonised JSON)                                  |
| `long`           | a table with an item column (`task`, `item`, `item_id` or `sent_id`), an    |
|                  | annotator column (`worker` or `annotator`) and `label`: one row per rating  |

Tables are CSV (any of the encodings above) or Parquet (recognised by its `PAR1` magic bytes).
"""

from __future__ import annotations

import codecs
import csv
import difflib
import io
import json
import re
import warnings
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import pandas as pd

from psyattrs.data.encoding import implausible_korean, reads_as_korean, utf16_name
from psyattrs.data.row_faults import row_faults
from psyattrs.errors import InputFileError
from psyattrs.schema import OPELA, Head

FORMATS: tuple[str, ...] = ("annotated", "public", "generic", "personaldialog", "lewidi", "long")
ENCODINGS: tuple[str, ...] = ("utf-8", "utf-8-sig", "cp949")
MISSING_TOKENS = frozenset({"", "na", "nan", "<na>", "none", "null"})
"""Cell values (case-insensitive, surrounding spaces ignored) that mean "not rated" in a label column."""

PUBLIC_TEXT_COLUMNS = ("persona_text_all", "user_text_all")
ANNOTATED_KEY_COLUMNS = ("doc_id", "sent_id", "person_type", "text")
GENERIC_KEY_COLUMNS = ("doc_id", "text")
LONG_ITEM_COLUMNS = ("task", "item", "item_id", "sent_id")
LONG_ANNOTATOR_COLUMNS = ("worker", "annotator")
LEWIDI_ITEM_KEYS = frozenset({"text", "annotators", "annotations"})
"""The keys that make a JSON object a LeWiDi item."""

_PARQUET_MAGIC = b"PAR1"
_SNIFF_BYTES = 1 << 16
_FINAL_LABEL = re.compile(r"^labeler_[a-z][a-z0-9]*$")
_FIELDS_ERROR = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")
_EOF_ERROR = re.compile(r"EOF inside string starting at row (\d+)")


# ----------------------------------------------------------------------------------------------
# files and encodings


def check_file(path: "str | Path") -> Path:
    """Returns `path` as a Path after checking that it is a readable, non-empty regular file.

    Raises:
        InputFileError: missing, a directory, not a regular file, empty, or unreadable.
    """
    p = Path(path)
    try:
        if not p.exists():
            raise InputFileError(p, "file not found")
        if p.is_dir():
            raise InputFileError(p, "is a directory, not a file")
        if not p.is_file():
            raise InputFileError(p, "not a regular file")
        if p.stat().st_size == 0:
            raise InputFileError(p, "empty file")
        with p.open("rb"):
            pass
    except OSError as exc:
        raise InputFileError(p, f"cannot be read: {exc.strerror or exc}") from None
    return p


def read_head(path: "str | Path", n_bytes: int = _SNIFF_BYTES) -> bytes:
    """The first `n_bytes` bytes of a file (InputFileError when it cannot be read)."""
    try:
        with Path(path).open("rb") as fh:
            return fh.read(n_bytes)
    except OSError as exc:
        raise InputFileError(path, f"cannot be read: {exc.strerror or exc}") from None


def _line_of(raw: bytes, offset: int) -> int:
    return raw.count(b"\n", 0, offset) + 1


def _looks_like_broken_utf8(raw: bytes) -> bool:
    """True when most non-ASCII characters decode as UTF-8: a UTF-8 file with a few bad bytes."""
    text = raw.decode("utf-8", errors="replace")
    bad = text.count("\ufffd")
    non_ascii = sum(1 for ch in text if ord(ch) > 127)
    return non_ascii - bad > bad


def decode_bytes(raw: bytes, path: "str | Path", *, partial: bool = False) -> tuple[str, str]:
    """Decodes file bytes with the first encoding of `ENCODINGS` that fits.

    Args:
        raw: the bytes (the whole file, or its beginning when `partial`).
        path: the file, for error messages.
        partial: `raw` may end in the middle of a multi-byte character; that tail is dropped.

    Returns:
        (text, encoding) with encoding one of `ENCODINGS`; a UTF-8 BOM is not part of the text.

    Raises:
        InputFileError: the bytes are not UTF-8, UTF-8 with BOM nor CP949 (names the line of the
            first undecodable byte).
    """
    utf16 = utf16_name(raw)
    if utf16 is not None:
        raise InputFileError(path, f"the file is {utf16} text; psyattrs reads UTF-8 (or CP949): save it as UTF-8")
    bom = raw.startswith(codecs.BOM_UTF8)
    body = raw[len(codecs.BOM_UTF8) :] if bom else raw
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(body, final=not partial), (
            "utf-8-sig" if bom else "utf-8"
        )
    except UnicodeDecodeError as exc:
        utf8_error = exc
    not_korean = ""
    if not bom and not _looks_like_broken_utf8(raw):
        try:
            text = codecs.getincrementaldecoder("cp949")().decode(raw, final=not partial)
        except UnicodeDecodeError:
            pass
        else:
            share, example = implausible_korean(text)
            if reads_as_korean(text):
                return text, "cp949"
            line = text.count("\n", 0, text.find(example)) + 1 if example else 1
            not_korean = (
                f"; read as CP949 it is not Korean ({share:.0%} of its non-ASCII characters are rare, "
                f"e.g. {example!r} on line {line}): is it Latin-1 or Windows-1252? save it as UTF-8"
            )
    offset = utf8_error.start + (len(codecs.BOM_UTF8) if bom else 0)
    if not partial and utf8_error.reason == "unexpected end of data" and utf8_error.end == len(body):
        raise InputFileError(path, f"the file ends inside a UTF-8 character (line {_line_of(raw, offset)}): "
                                   "it was cut short (truncated while written or copied)")
    raise InputFileError(
        path,
        f"undecodable bytes at line {_line_of(raw, offset)} (byte offset {offset}): "
        f"the file is not {', '.join(ENCODINGS[:-1])} or {ENCODINGS[-1]} text{not_korean}",
    )


def detect_encoding(path: "str | Path") -> str:
    """The encoding of a text file (one of `ENCODINGS`), decided from its beginning.

    Readers that later meet an undecodable byte further on call `decode_bytes` on the whole file.
    """
    return decode_head(read_head(path), path)[1]


def _reject_binary(text: str, path: Path) -> None:
    """Refuses a file whose first non-blank line (a CSV header) holds a NUL byte; NUL bytes in
    later rows set those rows aside instead (`read_table`)."""
    start = len(text) - len(text.lstrip("\r\n"))
    end = text.find("\n", start)
    nul = text.find("\x00", 0, end if end >= 0 else len(text))
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise InputFileError(path, f"binary content (NUL byte at line {line}); expected CSV, Parquet or JSON lines")


def lines_encoding(path: Path) -> str:
    """The encoding of a JSON-lines file, tolerating a few bad lines: UTF-8 when most lines of its
    beginning decode as UTF-8 even if one does not."""
    head = read_head(path)
    try:
        return decode_bytes(head, path, partial=True)[1]
    except InputFileError:
        if utf16_name(head) is not None:
            raise
        lines = head.split(b"\n")[:-1] or [head]
        bad = 0
        for line in lines:
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                bad += 1
        if 2 * bad < len(lines):
            return "utf-8-sig" if head.startswith(codecs.BOM_UTF8) else "utf-8"
        raise


def iter_checked_lines(path: "str | Path") -> Iterator[tuple[int, str, str | None]]:
    """Yields (line number, line without its line break, fault) of a text file, decoding lazily.

    `fault` is None for a good line; for a line that the file's encoding cannot decode or that
    holds a NUL byte it says why (and the line is ""), so a reader can set that one line aside.
    Constant memory: the file is read line by line.

    Raises:
        InputFileError: an unreadable file, or one whose beginning is mostly undecodable.
    """
    p = check_file(path)
    encoding = lines_encoding(p)
    codec = "utf-8" if encoding == "utf-8-sig" else encoding
    try:
        with p.open("rb") as fh:
            for number, raw in enumerate(fh, start=1):
                if number == 1 and encoding == "utf-8-sig":
                    raw = raw[len(codecs.BOM_UTF8) :]
                try:
                    line = raw.decode(codec)
                except UnicodeDecodeError as exc:
                    yield number, "", (
                        f"undecodable bytes in this line (byte {exc.start} of the line) for encoding {encoding}"
                    )
                    continue
                if "\x00" in line:
                    yield number, "", "binary content (NUL byte) in this line"
                    continue
                yield number, line.rstrip("\r\n"), None
    except OSError as exc:
        raise InputFileError(p, f"cannot be read: {exc.strerror or exc}") from None


def iter_text_lines(path: "str | Path") -> Iterator[tuple[int, str]]:
    """Yields (line number, line without its line break) of a text file, decoding lazily.

    Constant memory: the file is read line by line (`iter_checked_lines`).

    Raises:
        InputFileError: a line that the file's encoding cannot decode or that holds a NUL byte
            (names the line).
    """
    p = Path(path)
    for number, line, fault in iter_checked_lines(p):
        if fault is not None:
            raise InputFileError(p, fault, row=number)
        yield number, line


# ----------------------------------------------------------------------------------------------
# tables


def is_parquet(path: "str | Path") -> bool:
    """Whether the file starts with Parquet's magic bytes."""
    return read_head(path, len(_PARQUET_MAGIC)) == _PARQUET_MAGIC


def csv_header(path: "str | Path") -> list[str]:
    """The column names of a CSV file, read from its first record.

    Raises:
        InputFileError: undecodable, binary, blank, or a header that names a column twice.
    """
    p = check_file(path)
    text, _ = decode_head(read_head(p), p)
    _reject_binary(text, p)
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        raise InputFileError(p, "holds only blank lines; expected a header row")
    try:
        header = next(csv.reader(io.StringIO("\n".join(lines[first:]))))
    except (csv.Error, StopIteration) as exc:
        raise InputFileError(p, f"the header row is not valid CSV: {exc}", row=0) from None
    seen: set[str] = set()
    for name in header:
        if name in seen:
            raise InputFileError(p, "the header names this column twice", column=name)
        seen.add(name)
    return header


def parquet_columns(path: "str | Path") -> list[str]:
    """The column names of a Parquet file (InputFileError for a damaged file)."""
    import pyarrow
    import pyarrow.parquet as pq

    try:
        return list(pq.read_schema(path).names)
    except (OSError, ValueError, TypeError, pyarrow.ArrowException) as exc:
        raise InputFileError(path, f"not a readable Parquet file: {exc}") from None


def table_columns(path: "str | Path") -> list[str]:
    """The column names of a CSV or Parquet table."""
    return parquet_columns(path) if is_parquet(path) else csv_header(path)


def read_table(path: "str | Path", *, str_columns: Iterable[str] = ()) -> pd.DataFrame:
    """Reads a CSV or Parquet table into a DataFrame, cells unchanged.

    CSV cells keep their text exactly (spaces, `NA`, `null`); only empty cells become missing.
    Columns that pandas would infer as numbers are read as numbers; those named in `str_columns`
    are always strings (so `007` stays `007`).

    Args:
        path: the file.
        str_columns: columns to read as text (ignored when absent).

    Returns:
        The table, one row per data row, columns as in the file. `df.attrs["encoding"]` is the
        text encoding read (None for Parquet); `df.attrs["row_faults"]` maps the 0-based rows to
        set aside to (reason, field): rows with fewer fields than the header, rows with a NUL byte.

    Raises:
        InputFileError: unreadable, undecodable, empty, malformed CSV (a row with more fields
            than the header; names the row), duplicate column names, or a damaged Parquet file.
    """
    p = check_file(path)
    if is_parquet(p):
        df = _read_parquet(p)
        df.attrs.update(encoding=None, row_faults={})
        return df
    header = csv_header(p)
    encoding = detect_encoding(p)
    try:
        df = _read_csv(p, encoding)
    except UnicodeDecodeError:
        raw = p.read_bytes()
        try:
            encoding = decode_bytes(raw, p)[1]
        except InputFileError:
            if not encoding.startswith("utf-8"):
                raise
            return _read_with_undecodable_rows(p, raw, str_columns)  # raises the error above when too many
        df = _read_csv(p, encoding)
    if len(df.columns) != len(header):  # the csv module and pandas read the header differently
        raise InputFileError(
            p, f"the header row is ambiguous: {len(header)} column names by one reading, {len(df.columns)} by another"
        )
    wanted = [c for c in str_columns if c in df.columns and not pd.api.types.is_string_dtype(df[c].dtype)]
    wanted += [c for c in str_columns if c in df.columns and df[c].dtype == object]
    if wanted:  # re-read these columns as text so numbers-looking ids keep their form
        text_cols = _read_csv(p, encoding, usecols=sorted(set(wanted)), dtype=str)
        for col in set(wanted):
            df[col] = text_cols[col]
    df.attrs.update(encoding=encoding, row_faults=row_faults(p, encoding, df, header))
    return df


_UNDECODED = re.compile("[\udc80-\udcff]+")
"""What `surrogateescape` makes of undecodable bytes: one lone surrogate per byte."""


def mostly_utf8(body: bytes, *, partial: bool = False) -> str | None:
    """The text of UTF-8 bytes in which a few lines hold undecodable bytes, each such byte shown as
    U+FFFD; None when the first line (a header) holds one or half of the lines or more do.

    Args:
        body: the bytes, without a BOM.
        partial: `body` is a file's beginning: its last line may be cut and is not counted.
    """
    text = body.decode("utf-8", errors="surrogateescape")  # an undecodable byte -> one lone surrogate
    n_lines = text.count("\n") + (0 if text.endswith("\n") else 1)  # the header counts, a last empty line not
    bad_lines, line, last = set(), 0, 0
    for m in _UNDECODED.finditer(text):  # one pass: the line of each undecodable run
        line += text.count("\n", last, m.start())
        last = m.start()
        if not (partial and line == n_lines - 1):
            bad_lines.add(line)
    if 0 in bad_lines or 2 * len(bad_lines) >= n_lines:
        return None
    return _UNDECODED.sub(lambda m: "\ufffd" * len(m.group()), text)


def decode_head(head: bytes, path: "str | Path") -> tuple[str, str]:
    """`decode_bytes` of a file's beginning, tolerating a few undecodable rows of a UTF-8 file
    (`mostly_utf8`; the readers set those rows aside): (text, encoding).

    Raises:
        InputFileError: as `decode_bytes`, when the beginning is not mostly UTF-8.
    """
    try:
        return decode_bytes(head, path, partial=True)
    except InputFileError:
        if utf16_name(head) is not None:
            raise
        bom = head.startswith(codecs.BOM_UTF8)
        text = mostly_utf8(head[len(codecs.BOM_UTF8):] if bom else head, partial=True)
        if text is None:
            raise
        return text, "utf-8-sig" if bom else "utf-8"


def _read_with_undecodable_rows(path: Path, raw: bytes, str_columns: Iterable[str]) -> pd.DataFrame:
    """`read_table` of a UTF-8 CSV file in which a few rows hold bytes UTF-8 cannot decode.

    Each undecodable byte becomes a NUL byte (same length: every other row reads exactly as
    written) in a private copy that `read_table` reads; the rows holding one are then set aside
    (`row_faults`) as "undecodable bytes" with their row numbers, the rest kept. A file in which
    half of the lines or more are undecodable is refused (`decode_bytes`'s error): it is not UTF-8.
    """
    import tempfile

    bom = raw.startswith(codecs.BOM_UTF8)
    body = raw[len(codecs.BOM_UTF8):] if bom else raw
    if mostly_utf8(body) is None:
        decode_bytes(raw, path)  # raises: the file is not UTF-8
    text = body.decode("utf-8", errors="surrogateescape")
    end = re.search("[\udc80-\udcff]+$", text)
    if end is not None:  # the file ends inside a character: it was cut short, not a bad row
        tail = body[len(body) - len(end.group()):]
        try:
            codecs.getincrementaldecoder("utf-8")().decode(tail, final=False)
        except UnicodeDecodeError:
            pass
        else:
            raise InputFileError(path, f"the file ends inside a UTF-8 character (line {_line_of(raw, len(raw) - len(tail))})"
                                       ": it was cut short (truncated while written or copied)")
    repaired = _UNDECODED.sub(lambda m: "\x00" * len(m.group()), text).encode("utf-8")
    had_nul = b"\x00" in body
    with tempfile.TemporaryDirectory(prefix="psyattrs-") as tmp:
        copy = Path(tmp) / path.name
        copy.write_bytes(repaired)
        try:
            df = read_table(copy, str_columns=str_columns)
        except InputFileError as exc:
            raise InputFileError(path, exc.message, row=exc.row, column=exc.column) from None
    faults = {}
    for row, (reason, field) in df.attrs["row_faults"].items():
        if reason.startswith("binary content: a NUL byte"):
            what = "a NUL byte or undecodable bytes" if had_nul else "undecodable bytes (not UTF-8)"
            reason = f"{what} in column {field!r}"
        faults[row] = (reason, field)
    df.attrs.update(encoding="utf-8-sig" if bom else "utf-8", row_faults=faults)
    return df


def _read_csv(path: Path, encoding: str, **kwargs) -> pd.DataFrame:
    """pandas.read_csv with the reader's settings (see `read_table`) and its errors as InputFileError.

    The file is parsed in pandas's chunked mode (`low_memory`, its default, about 3x faster here
    than one pass: its string columns are built on several threads). A chunk can infer another
    type for a column than the rest (an id column empty in one chunk, numbers in another, text
    later); pandas then warns (DtypeWarning) and the file is read again in one pass, so the result
    is always the one-pass reading's types."""
    df, caught = _parse_csv(path, encoding, low_memory=True, **kwargs)
    if any(issubclass(w.category, pd.errors.DtypeWarning) for w in caught):
        df, caught = _parse_csv(path, encoding, low_memory=False, **kwargs)
    if any(issubclass(w.category, pd.errors.ParserWarning) and "loss of data" in str(w.message) for w in caught):
        # pandas would drop the extra cells (or shift the row onto an implicit index)
        raise InputFileError(path, "malformed CSV: this row has more fields than the header", row=1)
    return df


def _parse_csv(path: Path, encoding: str, *, low_memory: bool, **kwargs) -> tuple[pd.DataFrame, list]:
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            df = pd.read_csv(
                path, encoding=encoding, keep_default_na=False, na_values=[""], low_memory=low_memory,
                index_col=False, **kwargs,
            )  # fmt: skip
    except UnicodeDecodeError:
        raise
    except pd.errors.EmptyDataError:
        raise InputFileError(path, "empty file: no header row") from None
    except pd.errors.ParserError as exc:
        raise _parser_error(path, str(exc)) from None
    except (ValueError, csv.Error, OverflowError, MemoryError, UnicodeError) as exc:
        raise InputFileError(path, f"not a readable CSV file: {exc}") from None
    return df, list(caught)


def _parser_error(path: Path, message: str) -> InputFileError:
    fields = _FIELDS_ERROR.search(message)
    if fields:
        expected, line, saw = (int(g) for g in fields.groups())
        return InputFileError(
            path, f"malformed CSV: this row has {saw} fields but the header has {expected}", row=line - 1
        )
    eof = _EOF_ERROR.search(message)
    if eof:
        return InputFileError(path, "malformed CSV: a quoted cell is never closed", row=int(eof.group(1)))
    return InputFileError(path, f"malformed CSV: {message.strip()}")


def _read_parquet(path: Path) -> pd.DataFrame:
    import pyarrow

    columns = parquet_columns(path)
    seen: set[str] = set()
    for name in columns:
        if name in seen:
            raise InputFileError(path, "the Parquet schema names this column twice", column=name)
        seen.add(name)
    try:
        return pd.read_parquet(path)
    except (OSError, ValueError, TypeError, pyarrow.ArrowException) as exc:
        raise InputFileError(path, f"not a readable Parquet file: {exc}") from None


def require_columns(columns: Iterable[str], required: Iterable[str], path: "str | Path", what: str) -> None:
    """Raises InputFileError naming the first required column that is missing (with a hint).

    Args:
        columns: the columns present.
        required: the columns needed.
        path: the file, for the message.
        what: what the file is read as (`the OPELA annotated table`), for the message.
    """
    present = list(columns)
    missing = [c for c in required if c not in present]
    if not missing:
        return
    hint = ""
    close = difflib.get_close_matches(missing[0], [str(c) for c in present], n=1, cutoff=0.8)
    if close:
        hint = f" (the file has {close[0]!r})"
    more = f"; also missing: {missing[1:]}" if len(missing) > 1 else ""
    raise InputFileError(path, f"required column missing (reading it as {what}){hint}{more}", column=missing[0])


# ----------------------------------------------------------------------------------------------
# label cells


def parse_label_column(values: pd.Series, head: Head, *, copy: bool = True) -> tuple[pd.Series, pd.Series]:
    """Parses one label column: integers of the head's classes, missing cells allowed.

    Accepts integers, integral floats (`1.0`) and their text; empty cells and the tokens in
    `MISSING_TOKENS` are "not rated".

    Args:
        values: the column as read (numbers, text or objects).
        head: the head the column belongs to.
        copy: False lets `labels` share memory with `values` where `values` is a NumPy integer
            column whose every cell is a class (nothing to rewrite), for a caller that replaces
            the column with `labels`: a reader saves a copy of every label column (on 100,000
            rows, 30 fresh arrays of 0.8 MB a fresh process must page in).

    Returns:
        (labels, bad): `labels` is Int64 with <NA> for missing and bad cells; `bad` is a boolean
        Series, True where a non-missing cell is not one of `head.values`.
    """
    n_classes = head.n_classes
    dtype = values.dtype
    if pd.api.types.is_integer_dtype(dtype) and not isinstance(dtype, pd.api.extensions.ExtensionDtype):
        arr = values.to_numpy().astype(np.int64, copy=False)
        in_classes = arr.view(np.uint64) < n_classes  # one pass: a negative number wraps to a huge one
        bad = ~in_classes
        ints = np.where(in_classes, arr, 0) if bad.any() else (arr.copy() if copy else arr)
    else:
        if pd.api.types.is_bool_dtype(dtype):
            num_series = values.astype("Float64")
            missing_series = values.isna()
        elif pd.api.types.is_numeric_dtype(dtype):
            num_series = values.astype("Float64") if isinstance(dtype, pd.api.extensions.ExtensionDtype) else values
            missing_series = values.isna()
        else:
            text = values.astype(str).str.strip()
            missing_series = values.isna() | text.str.lower().isin(MISSING_TOKENS)
            num_series = pd.to_numeric(text.where(~missing_series), errors="coerce")
        arr = np.asarray(num_series.to_numpy(dtype=float, na_value=np.nan), dtype=float)
        missing = missing_series.to_numpy(dtype=bool)
        with np.errstate(invalid="ignore"):
            in_classes = (arr >= 0) & (arr < n_classes) & (arr == np.floor(arr))
        bad = ~missing & ~in_classes
        ints = np.where(in_classes, arr, 0).astype("int64")
    labels = pd.arrays.IntegerArray(ints, ~in_classes)  # new arrays (or, copy=False, the caller's to give)
    return (pd.Series(labels, index=values.index, name=values.name, copy=False),
            pd.Series(bad, index=values.index, copy=False))


# ----------------------------------------------------------------------------------------------
# detection


def classify_columns(columns: Iterable[str], path: "str | Path") -> str:
    """The table format (`public`, `annotated` or `generic`) that a set of columns describes.

    Raises:
        InputFileError: no known table format has these columns (names the missing column).
    """
    cols = set(columns)
    has_final_lists = any(_FINAL_LABEL.match(str(c)) for c in cols)
    if set(PUBLIC_TEXT_COLUMNS) <= cols:
        if has_final_lists:
            return "public"
        raise InputFileError(
            path,
            "looks like the OPELA public release (persona_text_all, user_text_all) but has no "
            "labeler_{head} label-list columns",
        )
    if "label" in cols and cols & set(LONG_ITEM_COLUMNS) and cols & set(LONG_ANNOTATOR_COLUMNS):
        return "long"
    opela_labels = {f"labeler{k}_{h}" for k in (1, 2, 3) for h in OPELA.head_names}
    if set(ANNOTATED_KEY_COLUMNS) <= cols and opela_labels <= cols:
        return "annotated"
    require_columns(cols, GENERIC_KEY_COLUMNS, path, "an utterance table: annotated, generic or public")
    return "generic"


JSON_PROBE_LINES = 100
"""How many non-blank lines format detection tries before a JSON-lines file counts as broken."""


def first_json_record(path: "str | Path") -> object:
    """The first readable record of a JSON-lines file, parsed.

    Lines that are not JSON (or not decodable) are skipped, up to `JSON_PROBE_LINES` non-blank
    lines: a broken first line does not hide the format of the lines after it.

    Raises:
        InputFileError: only blank lines, or none of the first lines is JSON (names the first).
    """
    first_error: InputFileError | None = None
    tried = 0
    for number, line, fault in iter_checked_lines(path):
        if fault is None and not line.strip():
            continue
        tried += 1
        if fault is None:
            try:
                return json.loads(line)
            except (json.JSONDecodeError, RecursionError) as exc:
                fault = f"not valid JSON lines: {exc}"
        first_error = first_error or InputFileError(path, fault, row=number)
        if tried >= JSON_PROBE_LINES:
            break
    if first_error is not None:
        raise first_error
    raise InputFileError(path, "holds only blank lines")


def looks_like_lewidi(start: str) -> bool:
    """True when a JSON text begins as a LeWiDi file: an object whose first value is an object
    with `text`, `annotators` and `annotations` (`LEWIDI_ITEM_KEYS`).

    Args:
        start: the beginning of the file (about 64 KiB), decoded.
    """
    s = start.lstrip()
    m = re.match(r'\{\s*"(?:[^"\\]|\\.)*"\s*:\s*', s)
    if not m:
        return False
    try:
        item, _ = json.JSONDecoder().raw_decode(s, m.end())
    except (json.JSONDecodeError, RecursionError):
        # the first item runs past the sniffed beginning: look for the keys in what there is
        rest = s[m.end() :]
        return rest.startswith("{") and all(f'"{k}"' in rest for k in LEWIDI_ITEM_KEYS)
    return isinstance(item, dict) and LEWIDI_ITEM_KEYS <= set(item)


def detect_format(path: "str | Path") -> str:
    """Detects a file's format from its content.

    Args:
        path: a CSV, Parquet or JSON-lines file.

    Returns:
        One of `FORMATS`: `public`, `annotated`, `generic` or `personaldialog` (see the module
        docstring for the rules).

    Raises:
        InputFileError: missing, empty, undecodable or binary file, a JSON file that is not
            PersonalDialog, or a table without the columns of any known format.
    """
    p = check_file(path)
    head = read_head(p)
    if head.startswith(_PARQUET_MAGIC):
        return classify_columns(parquet_columns(p), p)
    try:
        text, _ = decode_head(head, p)
    except InputFileError:
        if not head.lstrip(b" \t\r\n").startswith(b"{") or utf16_name(head) is not None:
            raise
        text = head.decode("utf-8", errors="replace")  # JSON lines with a bad line: checked line by line
    start = text.lstrip(" \t\r\n\x00")  # a crash can leave a block of NUL bytes before good lines
    if not start.startswith("{"):
        _reject_binary(text, p)
    if not start:
        raise InputFileError(p, "holds only blank lines")
    if start[0] == "[":
        raise InputFileError(p, "a JSON array; JSON input must be JSON lines (one record per line)")
    if start[0] == "{" and looks_like_lewidi(start):
        return "lewidi"
    if start[0] == "{":
        record = first_json_record(p)
        if isinstance(record, dict) and "dialog" in record:
            return "personaldialog"
        keys = sorted(record) if isinstance(record, dict) else type(record).__name__
        raise InputFileError(
            p, f"JSON lines without a 'dialog' key (found {keys}); the JSON format read is PersonalDialog", row=1
        )
    return classify_columns(csv_header(p), p)
