"""The one internal table every reader produces, and the `Corpus` that carries it.

The utterance table is a pandas DataFrame, one row per sentence, chronological within a
conversation. Its columns:

| column        | dtype          | meaning                                                          |
|---------------|----------------|------------------------------------------------------------------|
| doc_id        | str            | conversation id                                                  |
| sent_id       | str            | sentence id, unique in the corpus                                |
| position      | int64          | 0-based index of the sentence in its conversation                |
| person_type   | str            | `persona`, `user`, or `` when unknown                            |
| person_name   | str            | speaker's short name (`donut`, `user0001`), `` when unknown      |
| person_id     | str            | speaker id, `` when unknown                                      |
| persona       | str            | the conversation's persona (groups for unseen-persona splits)    |
| turn          | Int64          | turn number, <NA> when unknown                                   |
| time          | str            | send time as written, `` when unknown                            |
| is_pause      | bool           | the sentence only declares a time gap: context, never a target   |
| text          | str            | the sentence, quirks preserved                                   |
| labeler{k}_{h}| Int64          | labeler k's class for head h, <NA> when that labeler did not rate |
| labeler_{h}   | Int64          | final label for head h, <NA> when none                           |
| true_{h}      | Int64          | synthetic corpora only: the value the simulation drew            |

Readers may add further columns (PersonalDialog speaker traits: `speaker_gender`, `speaker_loc`,
`speaker_tags`); code that does not know a column leaves it alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from psyattrs.schema import OPELA, Schema

BASE_COLUMNS: tuple[str, ...] = (
    "doc_id",
    "sent_id",
    "position",
    "person_type",
    "person_name",
    "person_id",
    "persona",
    "turn",
    "time",
    "is_pause",
    "text",
)
# the columns that name a sentence and hold its text: what a run's predictions artifact and its
# model's input example carry of the table (those present)
SENTENCE_COLUMNS: tuple[str, ...] = ("doc_id", "sent_id", "position", "person_type", "is_pause", "text")
STR_DTYPE = pd.Series([], dtype=str).dtype
"""The dtype `astype(str)` gives (pandas' default text dtype)."""
_STR_COLUMNS = ("doc_id", "sent_id", "person_type", "person_name", "person_id", "persona", "time", "text")
_LABELER_COLUMN = re.compile(r"^labeler(\d+)_([a-z][a-z0-9]*)$")


def final_column(head: str) -> str:
    """Name of the final-label column of a head: `labeler_{head}`."""
    return f"labeler_{head}"


def true_column(head: str) -> str:
    """Name of the synthetic truth column of a head: `true_{head}`."""
    return f"true_{head}"


def labeler_column(k: int, head: str) -> str:
    """Name of labeler k's column for a head: `labeler{k}_{head}`."""
    return f"labeler{k}_{head}"


def labeler_ids(columns: Iterable[str], heads: Iterable[str] | None = None) -> list[int]:
    """The labeler numbers k present as `labeler{k}_{head}` columns, sorted."""
    wanted = set(heads) if heads is not None else None
    ids = set()
    for col in columns:
        m = _LABELER_COLUMN.match(col)
        if m and (wanted is None or m.group(2) in wanted):
            ids.add(int(m.group(1)))
    return sorted(ids)


def labeler_columns(columns: Iterable[str], head: str) -> list[str]:
    """The `labeler{k}_{head}` columns of one head present in `columns`, ordered by k."""
    columns = list(columns)
    present = set(columns)  # a set: one look-up per column, not a scan of the list (quadratic in the slots)
    return [labeler_column(k, head) for k in labeler_ids(columns, [head]) if labeler_column(k, head) in present]


def labeler_matrix(df: pd.DataFrame, head: str) -> np.ndarray:
    """Per-labeler labels of one head as a float array (rows x labelers), NaN where missing."""
    cols = labeler_columns(df.columns, head)
    if not cols:
        return np.empty((len(df), 0))
    return df[cols].astype("Float64").to_numpy(dtype=float, na_value=np.nan)


def blank_cells(values: pd.Series) -> pd.Series:
    """Bool Series: True where a cell is missing, empty or only whitespace (Unicode whitespace, as
    `str.strip` sees it).

    For text columns it asks `str.isspace` and `str.len` instead of comparing `str.strip()` with
    "": the same answer without building a stripped copy of every text (a fresh process pays
    about 0.1 s for that copy of 100,000 sentences). On Arrow-backed text (pandas' default) it asks
    Arrow itself, in one expression over the text's buffers: an empty cell is one of zero bytes
    (read off the offsets, without decoding), whitespace is Arrow's `utf8_is_space`, the test
    pandas' `str.isspace` makes there."""
    dtype = values.dtype
    if getattr(dtype, "storage", None) == "pyarrow" and hasattr(values.array, "__arrow_array__"):
        import pyarrow.compute as pc

        data = values.array.__arrow_array__()
        blank = pc.or_kleene(pc.equal(pc.binary_length(data), 0), pc.utf8_is_space(data)).fill_null(True)
        return pd.Series(blank.to_numpy(zero_copy_only=False), index=values.index, name=values.name)
    if pd.api.types.is_string_dtype(dtype) and dtype != object:
        empty = values.str.len() == 0
        return (values.isna() | empty.fillna(False) | values.str.isspace().fillna(False)).astype(bool)
    if pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype):
        return values.isna()  # a number's text is never empty
    return values.isna() | (values.astype(str).str.strip() == "")


def normalize_table(df: pd.DataFrame, schema: Schema = OPELA) -> pd.DataFrame:
    """Returns `df` with every base column present and typed as documented above.

    Missing optional columns are filled (empty strings, <NA>, False); `position` is derived from
    row order within `doc_id` when absent; `sent_id` from `doc_id` and position. Label columns of
    the schema's heads become nullable Int64. Other columns pass through unchanged.
    """
    out = df.copy(deep=False)  # copy-on-write: nothing done to `out` reaches `df`
    n = len(out)
    if "doc_id" not in out:
        raise ValueError("an utterance table needs a 'doc_id' column")
    if out["doc_id"].dtype != STR_DTYPE:
        out["doc_id"] = out["doc_id"].astype(str)
    if "position" not in out:
        out["position"] = out.groupby("doc_id", sort=False).cumcount()
    out["position"] = out["position"].astype("int64")
    if "sent_id" not in out:
        out["sent_id"] = out["doc_id"] + "_" + (out["position"] + 1).astype(str)
    for col in _STR_COLUMNS:
        if col not in out:
            out[col] = ""
        if out[col].dtype != STR_DTYPE or out[col].hasnans:  # a text column without gaps is already right
            out[col] = out[col].fillna("").astype(str)
    if "turn" not in out:
        out["turn"] = pd.array([pd.NA] * n, dtype="Int64")
    if out["turn"].dtype != "Int64":
        out["turn"] = pd.to_numeric(out["turn"], errors="coerce").astype("Int64")
    if "is_pause" not in out:
        out["is_pause"] = False
    if out["is_pause"].dtype != bool:
        out["is_pause"] = out["is_pause"].fillna(False).astype(int).astype(bool)
    heads = set(schema.head_names)
    dtypes = out.dtypes
    for col in out.columns:
        m = _LABELER_COLUMN.match(col)
        is_label = (m and m.group(2) in heads) or col in {final_column(h) for h in heads} | {
            true_column(h) for h in heads
        }
        if is_label and dtypes[col] != "Int64":
            out[col] = pd.to_numeric(out[col], errors="coerce").astype("Int64")
    ordered = list(BASE_COLUMNS) + [c for c in out.columns if c not in BASE_COLUMNS]
    return out[ordered].reset_index(drop=True)


@dataclass
class Problem:
    """One record set aside: which conversation, why, and the offending field."""

    doc_id: str
    reason: str
    field: str
    row: int | None = None
    sent_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"doc_id": self.doc_id, "reason": self.reason, "field": self.field}
        if self.row is not None:
            d["row"] = self.row
        if self.sent_id is not None:
            d["sent_id"] = self.sent_id
        return d


@dataclass
class Corpus:
    """What a reader returns.

    Attributes:
        utterances: the utterance table (see module docstring); for the public release, the
            per-speaker lines without labels (their interleaving is unknown).
        schema: the label schema of the corpus.
        format: `annotated`, `public`, `generic` or `personaldialog`.
        source: the file read, if any.
        conversations: one row per `doc_id` with conversation-level fields (survey outcomes,
            demographics, summaries, line-count classification for the public release).
        label_sequences: public release only: columns `doc_id`, `position` and `labeler_{head}`,
            the final labels in chronological order over both speakers.
        problems: the records set aside, with reasons.
        n_read: records read from the file (sentences, or conversations for the public release);
            `n_read == n_kept + len(problems)` where each problem is one record.
        record_kind: what a record is: `sentence`, `conversation`, `dialogue`, `item` (a LeWiDi
            item: one conversation) or `rating` (one row of a long annotation table).
        annotations: the long annotation table (`psyattrs.data.annotations`: sent_id, annotator,
            head, label) for corpora whose annotators are many people rather than fixed labelers
            (LeWiDi, the long layout); then `labeler{k}_{head}` are vote slots. None otherwise.
        encoding: the text encoding the file was read in (`utf-8`, `utf-8-sig`, `cp949`); None
            for Parquet or an in-memory corpus.
    """

    utterances: pd.DataFrame
    schema: Schema = OPELA
    format: str = "annotated"
    source: Path | None = None
    conversations: pd.DataFrame = field(default_factory=pd.DataFrame)
    label_sequences: pd.DataFrame | None = None
    problems: list[Problem] = field(default_factory=list)
    n_read: int = 0
    record_kind: str = "sentence"
    annotations: pd.DataFrame | None = None
    encoding: str | None = None

    @property
    def n_kept(self) -> int:
        if self.record_kind == "sentence":
            return len(self.utterances)
        if self.record_kind == "rating":
            return len(self.annotations) if self.annotations is not None else 0
        return len(self.conversations)
