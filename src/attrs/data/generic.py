"""The generic per-utterance table with a custom label schema (FORMATS §5), CSV or Parquet.

`doc_id` and `text` are required; `sent_id`, `person_type`, `turn_notation` (or `turn`) and
`is_pause` are optional; labels come as `labeler{k}_{head}` for any number of labelers k and
optionally final `labeler_{head}` columns, for the heads of the schema. An empty cell means the
labeler did not rate that sentence; a row without any label is context only and is kept. Rows
are chronological within a `doc_id`.

`build_sentence_corpus` is the part shared with the OPELA annotated reader: it checks the rows
(`validate.check_utterances`), sets the faulty ones aside and shapes the rest into the utterance
table of `psyattrs.data.table`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from psyattrs.data.io import GENERIC_KEY_COLUMNS, check_file, read_table, require_columns
from psyattrs.data.table import Corpus, blank_cells, normalize_table
from psyattrs.data.validate import check_utterances
from psyattrs.errors import InputFileError
from psyattrs.schema import Schema, load_schema

TEXT_COLUMNS: tuple[str, ...] = (
    "doc_id",
    "sent_id",
    "person_type",
    "person_name",
    "person_name_original",
    "person_id",
    "persona",
    "time",
    "text",
)
"""Columns always read as text, so that ids such as `007` keep their form."""

_ANY_LABEL = re.compile(r"^labeler(\d*)_([a-z][a-z0-9]*)$")


def read_generic(path: "str | Path", schema: "Schema | str | Path | None" = None, *, check_labels: bool = True) -> Corpus:
    """Reads a generic multi-annotator utterance table (FORMATS §5).

    Args:
        path: a CSV (UTF-8, UTF-8 with BOM or CP949) or Parquet file.
        schema: the label schema, a schema YAML path, or None for the built-in OPELA schema.
        check_labels: False leaves label cells unchecked (bad ones read as not rated).

    Returns:
        A `Corpus` with `format="generic"`, `record_kind="sentence"`: `utterances` holds the kept
        rows in file order (columns of `psyattrs.data.table`, `position` = row order within the
        `doc_id` in the file, counting set-aside rows; every other column of the file is kept);
        `conversations` has `doc_id`, `persona`, `n_utterances`, `n_pauses`; `problems` the rows
        set aside (see `psyattrs.data.validate`).

    Raises:
        InputFileError: the file cannot be read, lacks `doc_id` or `text`, or has label columns
            for heads that the schema does not define (names the column).
    """
    schema = load_schema(schema)
    p = check_file(path)
    df = read_table(p, str_columns=TEXT_COLUMNS)
    require_columns(df.columns, GENERIC_KEY_COLUMNS, p, "a generic utterance table")
    _reject_unknown_heads(df.columns, schema, p)
    return build_sentence_corpus(df, p, schema, format="generic", check_labels=check_labels)


def _reject_unknown_heads(columns, schema: Schema, path: Path) -> None:
    heads = set(schema.head_names)
    for col in columns:
        m = _ANY_LABEL.match(str(col))
        if m and m.group(2) not in heads:
            raise InputFileError(
                path,
                f"label column for head {m.group(2)!r}, which schema {schema.name!r} does not define "
                f"(heads: {schema.head_names}); pass the matching schema with --schema",
                column=str(col),
            )


def build_sentence_corpus(
    df: pd.DataFrame,
    path: Path,
    schema: Schema,
    *,
    format: str,
    person_types: "frozenset[str] | None" = None,
    check_labels: bool = True,
) -> Corpus:
    """Checks a per-sentence table and shapes the usable rows into a `Corpus`.

    Args:
        df: the table as read (RangeIndex in file order) with at least `doc_id` and `text`;
            modified in place.
        path: the file it came from.
        schema: the label schema.
        format: the corpus format name (`annotated`, `generic`).
        person_types: allowed `person_type` values, None for any.
        check_labels: False skips the label checks (for prediction; bad cells become <NA>).

    Returns:
        The corpus (see `read_generic` for its tables).
    """
    n_read = len(df)
    checked = check_utterances(df, schema, person_types=person_types, check_labels=check_labels)
    doc = df["doc_id"].astype(str)
    df["doc_id"] = doc.where(df["doc_id"].notna(), "") if doc.hasnans else doc
    for col, labels in checked.labels.items():
        df[col] = labels
    df["is_pause"] = checked.is_pause
    if "position" in df:
        df = df.rename(columns={"position": "position_in_file"})
    factorized = pd.factorize(df["doc_id"], sort=False)
    codes = pd.Series(factorized[0], index=df.index)
    df["position"] = codes.groupby(codes.to_numpy(), sort=False).cumcount()  # integer codes group faster than text
    _set_turn(df)
    if "persona" not in df:
        df["persona"] = persona_of(df, factorized)
    kept = df.loc[~checked.bad] if checked.bad.any() else df  # the usual case: no copy of every column
    utterances = normalize_table(kept, schema)
    conversations = conversation_table(utterances)
    return Corpus(
        utterances=utterances,
        schema=schema,
        format=format,
        source=path,
        conversations=conversations,
        label_sequences=None,
        problems=checked.problems,
        n_read=n_read,
        record_kind="sentence",
        encoding=df.attrs.get("encoding"),
    )


def _set_turn(df: pd.DataFrame) -> None:
    """`turn_notation` becomes `turn` (Int64); the original is kept when some cells are not numbers."""
    if "turn" in df or "turn_notation" not in df:
        return
    raw = df["turn_notation"]
    turn = pd.to_numeric(raw, errors="coerce")
    whole = turn.notna() & (turn % 1 == 0)
    df["turn"] = pd.array(np.where(whole, turn, np.nan), dtype="Float64").astype("Int64")
    if (~blank_cells(raw) & ~whole).any():
        return
    del df["turn_notation"]


def persona_of(df: pd.DataFrame, factorized: tuple[np.ndarray, Any] | None = None) -> pd.Series:
    """The conversation's persona for every row.

    The `person_name` of the conversation's first `persona` row when there is one, else the
    `doc_id` prefix before the first `_` (OPELA doc ids start with the persona's short name).
    `factorized`: `pd.factorize` of the (text) `doc_id` column when the caller has it already.
    """
    codes, docs = factorized if factorized is not None else pd.factorize(df["doc_id"].astype(str))
    names = np.array([d.split("_", 1)[0] for d in docs], dtype=object)  # one per conversation
    if "person_name" in df and "person_type" in df:
        candidates = (df["person_type"].astype(str) == "persona") & df["person_name"].notna()
        rows = np.flatnonzero(candidates.to_numpy())
        person = df["person_name"].iloc[rows].astype(str).str.strip()
        named = np.flatnonzero((person != "").to_numpy())
        if len(named):
            first_codes, first = np.unique(codes[rows[named]], return_index=True)  # rows ascend: the first of each
            names[first_codes] = person.iloc[named[first]].to_numpy(dtype=object)
    if not len(codes):
        return pd.Series([], index=df.index, dtype=object).astype(str)
    return pd.Series(pd.array(names, dtype=str).take(codes), index=df.index)


def conversation_table(utterances: pd.DataFrame) -> pd.DataFrame:
    """One row per `doc_id` of an utterance table: `doc_id`, `persona`, `n_utterances`, `n_pauses`."""
    if utterances.empty:
        return pd.DataFrame(
            {"doc_id": pd.Series(dtype=str), "persona": pd.Series(dtype=str),
             "n_utterances": pd.Series(dtype="int64"), "n_pauses": pd.Series(dtype="int64")}
        )
    grouped = utterances.groupby("doc_id", sort=False)
    return pd.DataFrame(
        {
            "persona": grouped["persona"].first(),
            "n_utterances": grouped.size().astype("int64"),
            "n_pauses": grouped["is_pause"].sum().astype("int64"),
        }
    ).reset_index()
