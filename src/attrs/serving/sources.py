"""Corpora read in chunks of whole conversations, each chunk with an exact resume position.

`psyattrs annotate` (`psyattrs.serving.annotate`) reads its input through one of these sources.
A chunk holds whole conversations only (a model with context needs every earlier sentence of a
conversation): it closes at the first conversation boundary once it holds `chunk_size` items
(utterances, rejected ones included), so a conversation longer than `chunk_size` makes one larger
chunk. The chunk
boundaries depend only on the input and `chunk_size`, so a resumed run cuts the same chunks.

Every input item is accounted for: each chunk carries the utterance rows to annotate, the
rejected items with their reasons, and how many items it read (`n_read == len(table) +
len(rejects)`). An item is one utterance, or, for a PersonalDialog line that is not a readable
record (not JSON, no `dialog` list), the line itself.

Sources:

- `PersonalDialogSource`: JSON lines (FORMATS §4), read from a byte offset; records become rows
  as `psyattrs.data.personaldialog.parse_record` makes them (doc_id `pd{line}`). A record that
  cannot be used rejects each of its utterances (or the line) with the reason; a line that cannot
  be decoded is rejected, not fatal.
- `TableSource`: an utterance table (CSV in UTF-8 or CP949, or Parquet) with `doc_id` and `text`
  (optional: `sent_id`, `position`, `person_type`, `person_name`, `person_id`, `is_pause`,
  `turn`, `time`), rows of a conversation contiguous and in order. Rejected rows: no `doc_id`,
  empty text on a non-pause row, an `is_pause` or `position` that is not a 0/1 flag or an integer,
  rows of a conversation that resumes after other conversations (named in the reason), and CSV
  rows with fewer fields than the header (a file cut short; pandas would pad them with empty
  cells), named as such rather than by the empty cells they leave.
- `LewidiSource`: a LeWiDi harmonised JSON file (FORMATS §7; one JSON object, read whole, as
  `psyattrs.data.lewidi.read_lewidi` reads it); items the reader sets aside are the first chunk's
  rejects, one per item.
"""

from __future__ import annotations

import codecs
import csv
import io
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pandas as pd

from psyattrs.data.io import check_file, detect_encoding, detect_format, is_parquet, table_columns
from psyattrs.data.lewidi import read_lewidi
from psyattrs.data.personaldialog import TRAIT_COLUMNS, RecordError, decode_line, parse_record
from psyattrs.errors import InputFileError

TABLE_COLUMNS: tuple[str, ...] = (
    "doc_id", "sent_id", "position", "person_type", "person_name", "person_id", "is_pause", "turn", "time", "text",
    # read where present: what a transformer's persona_text / speaker_traits input reads
    "person_name_original", "persona_concept", "speaker_gender", "speaker_loc", "speaker_tags",
)  # fmt: skip
_TRUE = {"1", "true", "True", "TRUE"}
_FALSE = {"0", "false", "False", "FALSE", ""}
_INTEGER = re.compile(r"^\s*[+-]?\d+(\.0*)?\s*$")


@dataclass
class Chunk:
    """One chunk of a source.

    Attributes:
        table: the utterance rows to annotate (doc_id, text and what the source knows), whole
            conversations, chronological.
        rejects: one dict per rejected item: `reason`, `field`, where it is (`line` or `row`),
            `doc_id` and `sent_id` when known.
        n_read: items read for this chunk (`len(table) + len(rejects)`).
        position: where the next chunk starts (JSON-serialisable; `Source.chunks(start=...)`).
        progress: how far into the input the source is after this chunk (bytes or rows, the
            unit of `Source.total`).
        n_records: PersonalDialog only: records (lines) read; `n_records_rejected` of them rejected.
    """

    table: pd.DataFrame
    rejects: list[dict[str, Any]]
    n_read: int
    position: dict[str, int]
    progress: int
    n_records: int = 0
    n_records_rejected: int = 0


@dataclass
class _Pending:
    rows: list[dict[str, Any]] = field(default_factory=list)
    rejects: list[dict[str, Any]] = field(default_factory=list)
    n_read: int = 0
    n_records: int = 0
    n_records_rejected: int = 0


def _check_chunk_size(chunk_size: Any) -> int:
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer (utterances per chunk), got {chunk_size!r}")
    return int(chunk_size)


# ------------------------------------------------------------------------------ PersonalDialog


def _utterance_count(record: Any) -> int | None:
    """How many utterances a record holds, when that can be told (dialog list + golden response)."""
    if not isinstance(record, dict) or not isinstance(record.get("dialog"), list):
        return None
    return len(record["dialog"]) + (record.get("golden_response") is not None)


class PersonalDialogSource:
    """PersonalDialog JSON lines in chunks (see the module docstring).

    Args:
        path: the JSON-lines file.
        chunk_size: utterances per chunk (whole records).

    Attributes:
        total: the file size in bytes (the unit of `Chunk.progress`).
        kind: `personaldialog`.
    """

    kind = "personaldialog"
    unit = "B"

    def __init__(self, path: "str | Path", chunk_size: int):
        self.path = check_file(path)
        self.chunk_size = _check_chunk_size(chunk_size)
        self.encoding = detect_encoding(self.path)
        self.total = self.path.stat().st_size

    def chunks(self, start: dict[str, int] | None = None) -> Iterator[Chunk]:
        """Yields chunks from `start` (a previous chunk's `position`; None = the beginning).

        Raises:
            InputFileError: the file cannot be read.
        """
        offset = int((start or {}).get("byte", 0))
        number = int((start or {}).get("line", 1)) - 1
        codec = "utf-8" if self.encoding == "utf-8-sig" else self.encoding
        pending = _Pending()
        try:
            with self.path.open("rb") as fh:
                fh.seek(offset)
                for raw in fh:
                    number += 1
                    offset += len(raw)
                    if number == 1 and raw.startswith(codecs.BOM_UTF8):
                        raw = raw[len(codecs.BOM_UTF8):]
                    self._read_line(raw, number, codec, pending)
                    if pending.n_read >= self.chunk_size:  # rejects count too: memory stays bounded
                        yield self._emit(pending, offset, number)
                        pending = _Pending()
        except OSError as exc:
            raise InputFileError(self.path, f"cannot be read: {exc.strerror or exc}") from None
        if pending.n_read:
            yield self._emit(pending, offset, number)

    def _read_line(self, raw: bytes, number: int, codec: str, pending: _Pending) -> None:
        """Parses one line into `pending`: its rows, or its rejects."""
        doc_id = f"pd{number}"
        try:
            line = raw.decode(codec)
        except UnicodeDecodeError as exc:
            pending.n_read += 1
            pending.n_records += 1
            pending.n_records_rejected += 1
            pending.rejects.append({"line": number, "doc_id": doc_id, "sent_id": None, "field": "record",
                                    "reason": f"undecodable bytes (byte {exc.start} of the line) for {self.encoding}"})
            return
        if not line.strip():
            return
        pending.n_records += 1
        record = None
        try:
            record = decode_line(line)
            rows, _ = parse_record(record, doc_id)
        except RecordError as exc:
            pending.n_records_rejected += 1
            count = _utterance_count(record)
            base = {"line": number, "doc_id": doc_id, "field": exc.field, "reason": exc.reason}
            if count is None:
                pending.n_read += 1
                pending.rejects.append({**base, "sent_id": None})
            else:
                pending.n_read += count
                pending.rejects.extend({**base, "sent_id": f"{doc_id}_{k}"} for k in range(1, count + 1))
            return
        pending.n_read += len(rows)
        pending.rows.extend(rows)

    def _emit(self, pending: _Pending, offset: int, number: int) -> Chunk:
        columns = ["doc_id", "sent_id", "position", "person_id", "text", *TRAIT_COLUMNS, "is_golden"]
        table = pd.DataFrame([{c: r[c] for c in columns} for r in pending.rows], columns=columns)
        table["is_golden"] = table["is_golden"].astype(bool)
        table["position"] = table["position"].astype("int64")
        return Chunk(table, pending.rejects, pending.n_read, {"byte": offset, "line": number + 1}, offset,
                     pending.n_records, pending.n_records_rejected)


# --------------------------------------------------------------------------------------- tables


def _flag(values: pd.Series) -> tuple[pd.Series, pd.Series]:
    """(bool values, bad mask) of an is_pause column read as text."""
    text = values.fillna("").astype(str).str.strip()
    ok = text.isin(_TRUE | _FALSE)
    return text.isin(_TRUE), ~ok


_N_FIELDS = "__psyattrs_n_fields"  # a batch's own column: each CSV row's number of fields
_BYTE_END = "__psyattrs_byte_end"  # and the byte offset where the row ends (a chunk's true progress)


def _field_counts(text: "io.TextIOBase", encoding: str) -> Iterator[tuple[int, int]]:
    """(number of fields, byte offset of the row's end) of each data row of a CSV file opened as
    text in `encoding` (header skipped; blank lines are not rows, as for pandas).

    The offsets count the bytes of the lines the CSV reader has taken when it returns the row, so
    they say how far into the file a chunk's last row is (pandas reads ahead: the file position
    after a batch is not the batch's end).
    """
    limit = csv.field_size_limit()
    csv.field_size_limit(1 << 30)
    consumed = [len(codecs.BOM_UTF8) if encoding == "utf-8-sig" else 0]
    codec = "utf-8" if encoding == "utf-8-sig" else encoding

    def lines() -> Iterator[str]:
        for line in text:
            consumed[0] += len(line.encode(codec, errors="replace"))
            yield line

    try:
        records = ((len(r), consumed[0]) for r in csv.reader(lines()) if r)
        next(records, None)
        yield from records
    finally:
        csv.field_size_limit(limit)


class TableSource:
    """An utterance table (CSV or Parquet) in chunks of whole conversations (module docstring).

    Args:
        path: the table file.
        chunk_size: utterances per chunk.
        batch_rows: rows read from the file at a time.

    Attributes:
        total: rows in the file for Parquet, bytes for CSV (the unit of `Chunk.progress`).
        columns: the file's columns.

    Raises:
        InputFileError: unreadable file, or no `doc_id` / `text` column.
    """

    kind = "table"

    def __init__(self, path: "str | Path", chunk_size: int, *, batch_rows: int = 20_000):
        self.path = check_file(path)
        self.chunk_size = _check_chunk_size(chunk_size)
        self.batch_rows = batch_rows
        self.parquet = is_parquet(self.path)
        self.columns = table_columns(self.path)
        missing = [c for c in ("doc_id", "text") if c not in self.columns]
        if missing:
            raise InputFileError(self.path, f"an utterance table needs columns {missing} (has {self.columns[:12]})",
                                 column=missing[0])
        self.unit = "rows" if self.parquet else "B"
        if self.parquet:
            import pyarrow.parquet as pq

            self.total = pq.ParquetFile(self.path).metadata.num_rows
        else:
            self.total = self.path.stat().st_size
        self.seen: set[str] = set()

    def _batches(self) -> Iterator[tuple[pd.DataFrame, int]]:
        """(batch of rows as text, progress after it)."""
        wanted = [c for c in TABLE_COLUMNS if c in self.columns]
        if self.parquet:
            import pyarrow.parquet as pq

            done = 0
            for batch in pq.ParquetFile(self.path).iter_batches(batch_size=self.batch_rows, columns=wanted):
                frame = batch.to_pandas()
                done += len(frame)
                yield frame.astype(object).where(frame.notna(), "").astype(str), done
            return
        encoding = detect_encoding(self.path)
        with self.path.open("rb") as fh, self.path.open(encoding=encoding, newline="") as text:
            reader = pd.read_csv(fh, encoding=encoding, dtype=str, keep_default_na=False, na_filter=False,
                                 usecols=wanted, chunksize=self.batch_rows)
            counts = _field_counts(text, encoding)
            try:
                for frame in reader:
                    # each row's own field count and end, read beside pandas (which pads short rows)
                    pairs = np.fromiter(itertools.chain.from_iterable(itertools.islice(counts, len(frame))),
                                        dtype=np.int64, count=2 * len(frame)).reshape(-1, 2)
                    frame[_N_FIELDS], frame[_BYTE_END] = pairs[:, 0], pairs[:, 1]
                    yield frame, fh.tell()
            except (pd.errors.ParserError, UnicodeDecodeError, ValueError, csv.Error) as exc:
                raise InputFileError(self.path, f"not readable as CSV: {exc}") from None

    def chunks(self, start: dict[str, int] | None = None) -> Iterator[Chunk]:
        """Yields chunks from `start` (a previous chunk's `position`; None = the beginning).

        Raises:
            InputFileError: an unreadable file or malformed CSV.
        """
        skip = int((start or {}).get("rows", 0))
        row0 = 0  # rows of the file before the buffer
        buffer: list[pd.DataFrame] = []
        buffered = 0
        progress = 0
        for frame, progress in self._batches():
            frame.index = pd.RangeIndex(row0 + buffered, row0 + buffered + len(frame))
            if row0 + buffered + len(frame) <= skip:
                row0 += len(frame)
                continue
            if row0 + buffered < skip:
                cut = skip - row0 - buffered
                frame = frame.iloc[cut:]
                row0 += cut
            buffer.append(frame)
            buffered += len(frame)
            while buffered >= self.chunk_size:
                rows = pd.concat(buffer)
                cut = self._boundary(rows)
                if cut is None:
                    break
                yield self._emit(rows.iloc[:cut], row0 + cut, progress)
                row0 += cut
                rest = rows.iloc[cut:]
                buffer, buffered = ([rest] if len(rest) else []), len(rest)
        if buffered:
            rows = pd.concat(buffer)
            yield self._emit(rows, row0 + len(rows), progress if not self.parquet else row0 + len(rows))

    def _boundary(self, rows: pd.DataFrame) -> int | None:
        """The end of the first conversation boundary at or after `chunk_size` rows, excluding the
        last conversation of the buffer (it may continue in the next batch); None when none."""
        doc = rows["doc_id"].to_numpy()
        change = np.flatnonzero(doc[1:] != doc[:-1]) + 1
        after = change[change >= self.chunk_size]
        return int(after[0]) if len(after) else None

    def _emit(self, rows: pd.DataFrame, consumed: int, progress: int) -> Chunk:
        rows = rows.copy()
        if _BYTE_END in rows:  # CSV: the bytes up to this chunk's last row, not where pandas has read to
            progress = int(rows.pop(_BYTE_END).iloc[-1]) if len(rows) else progress
        numbers = rows.index.to_numpy() + 1  # 1-based data rows
        reasons = np.full(len(rows), None, dtype=object)
        fields = np.full(len(rows), None, dtype=object)

        def reject(mask, reason, column):
            mask = np.asarray(mask) & (reasons == None)  # noqa: E711 - element-wise
            reasons[mask] = reason
            fields[mask] = column

        if _N_FIELDS in rows:  # CSV: rows cut short first, so that they are not called empty
            n_fields = rows.pop(_N_FIELDS).to_numpy()
            for i in np.flatnonzero(n_fields < len(self.columns)):
                n = int(n_fields[i])
                reasons[i] = (f"this row has {n} field(s) but the header has {len(self.columns)} "
                              f"(cut short before column {self.columns[n]!r})")
                fields[i] = "row"
        rows["doc_id"] = rows["doc_id"].astype(str)
        reject(rows["doc_id"].str.strip() == "", "no doc_id", "doc_id")
        doc = rows["doc_id"].to_numpy(dtype=object)
        run = np.cumsum(np.r_[True, doc[1:] != doc[:-1]])
        first_run = pd.Series(run).groupby(doc, sort=False).transform("min").to_numpy()
        finished_before = pd.Series(doc).isin(self.seen).to_numpy()
        reject(finished_before | (run != first_run),
               "the rows of this conversation are not contiguous: it continues after other conversations", "doc_id")
        if "is_pause" in rows:
            pause, bad = _flag(rows["is_pause"])
            reject(bad, "is_pause must be 0/1 or true/false", "is_pause")
            rows["is_pause"] = pause
        else:
            rows["is_pause"] = False
        if "position" in rows:
            text = rows["position"].astype(str)
            bad = ~text.str.match(_INTEGER)
            reject(bad, "position must be an integer", "position")
            rows["position"] = pd.to_numeric(text.where(~bad, "0")).astype("int64")
        else:
            rows["position"] = rows.groupby("doc_id", sort=False).cumcount().astype("int64")
        empty = rows["text"].astype(str).str.strip() == ""
        reject(empty & ~rows["is_pause"].to_numpy(dtype=bool), "empty text (only pause rows may be empty)", "text")
        self.seen.update(d for d in pd.unique(doc) if d)
        keep = reasons == None  # noqa: E711
        rejects = [
            {"row": int(n), "doc_id": d, "sent_id": s, "field": f, "reason": r}
            for n, d, s, f, r in zip(
                numbers[~keep], doc[~keep],
                (rows["sent_id"].to_numpy()[~keep] if "sent_id" in rows else [None] * int((~keep).sum())),
                fields[~keep], reasons[~keep],
            )
        ]
        table = rows[keep].reset_index(drop=True)
        if "turn" in table:
            table["turn"] = pd.to_numeric(table["turn"], errors="coerce").astype("Int64")
        return Chunk(table, rejects, len(rows), {"rows": consumed}, progress)

    def remember(self, doc_ids: "np.ndarray | list[str]") -> None:
        """Marks conversations as finished (on resume, those of the chunks already written)."""
        self.seen.update(str(d) for d in doc_ids)


class LewidiSource:
    """A LeWiDi file in chunks of whole items (see the module docstring).

    Attributes:
        total: items in the file (the unit of `Chunk.progress`).
    """

    kind = "lewidi"
    unit = "items"

    def __init__(self, path: "str | Path", chunk_size: int):
        self.path = check_file(path)
        self.chunk_size = _check_chunk_size(chunk_size)
        self.corpus = read_lewidi(self.path)
        self.total = self.corpus.n_read

    def chunks(self, start: dict[str, int] | None = None) -> Iterator[Chunk]:
        """Yields chunks from `start` (a previous chunk's `position`; None = the beginning)."""
        table = self.corpus.utterances[[c for c in TABLE_COLUMNS if c in self.corpus.utterances.columns]]
        docs = table["doc_id"].to_numpy()
        starts = np.r_[0, np.flatnonzero(docs[1:] != docs[:-1]) + 1, len(docs)]
        done = int((start or {}).get("items", 0))
        rejects = [] if done else [{"row": p.row, "doc_id": p.doc_id, "sent_id": p.sent_id, "field": p.field,
                                    "reason": p.reason} for p in self.corpus.problems]
        n_items = len(starts) - 1
        item = done
        while item < n_items or rejects:
            end = item
            while end < n_items and starts[end] - starts[item] < self.chunk_size:
                end += 1
            rows = table.iloc[starts[item] : starts[end]].reset_index(drop=True)
            yield Chunk(rows, rejects, len(rows) + len(rejects), {"items": end},
                        min(self.total, end + len(self.corpus.problems)))
            rejects = []
            item = end

    def remember(self, doc_ids: "np.ndarray | list[str]") -> None:
        """Nothing to remember: the file is read whole, resumed by item count."""


def open_source(path: "str | Path", chunk_size: int, *, format: str | None = None) -> "PersonalDialogSource | TableSource | LewidiSource":
    """The source for an input file: PersonalDialog JSON lines or an utterance table.

    Args:
        path: the input.
        chunk_size: utterances per chunk.
        format: `personaldialog`, `table`, `lewidi`, or None to detect from the content.

    Raises:
        ValueError: an unknown format, or a chunk_size below 1.
        InputFileError: unreadable file, a public-release file (one row per conversation, no
            sentences to annotate one by one), or a table without `doc_id` / `text`.
    """
    if format not in (None, "personaldialog", "table", "lewidi"):
        raise ValueError(f"format {format!r} is not one of ['personaldialog', 'table', 'lewidi'] (or None to detect)")
    detected = format or detect_format(path)
    if detected == "personaldialog":
        return PersonalDialogSource(path, chunk_size)
    if detected == "lewidi":
        return LewidiSource(path, chunk_size)
    if detected == "public":
        raise InputFileError(path, "is an OPELA public-release file (one row per conversation); annotate the "
                                   "utterance table instead (psyattrs data validate reads it)")
    return TableSource(path, chunk_size)
