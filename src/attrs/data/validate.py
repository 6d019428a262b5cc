"""Validation: the checks that set records aside, and the set-aside report (the corpus summary
that `psyattrs data validate` prints is `psyattrs.data.summary`).

Readers call the checks here and drop the records that fail them; every dropped record becomes
one `Problem` (doc_id, reason, offending field, data row, sent_id), so that
`corpus.n_read == corpus.n_kept + len(corpus.problems)`.

What sets a record aside:

- any CSV table: a row with fewer fields than the header (cut short) or with a NUL byte
  (`df.attrs["row_faults"]` of `psyattrs.data.io.read_table`); such a row gets that one reason,
  not the faults its padded empty cells would add ("empty text", ...);
- sentence tables (annotated, generic): a label outside the head's classes (or not a number),
  an `is_pause` value other than 0/1, empty text on a non-pause row, a duplicate `sent_id` (the
  first occurrence is kept, later ones are set aside), an empty `doc_id`, and for the annotated
  table a `person_type` other than `user`/`persona`. A row with several faults gets one
  problem whose reason lists them all (`; `-separated) and whose field names them all.
- public-release conversations: label lists that cannot be parsed, hold values outside the
  head's classes, or whose lengths disagree with each other or with `total_sent`; an unusable
  `total_sent`/`pause_count`/`pause_hour`; an empty or repeated `doc_id`.
"""

from __future__ import annotations

import ast
import json
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable, NamedTuple, Sequence

import numpy as np
import pandas as pd

from psyattrs.data.io import parse_label_column
from psyattrs.data.output import atomic_output
from psyattrs.data.table import STR_DTYPE, Problem, blank_cells, final_column, labeler_ids, true_column
from psyattrs.schema import Schema

_TRUE = frozenset({"1", "1.0", "true", "yes"})
_FALSE = frozenset({"0", "0.0", "false", "no", "", "na", "nan", "<na>", "none", "null"})


class Findings:
    """Per-row faults gathered check by check, without a Python loop over the rows."""

    def __init__(self, n_rows: int):
        self.n_rows = n_rows
        self._batches: list[pd.DataFrame] = []
        self._exclusive = np.zeros(n_rows, dtype=bool)

    def add(
        self,
        mask: "np.ndarray | pd.Series",
        reason: "str | Callable[[np.ndarray], Sequence[str]]",
        field: str,
        *,
        exclusive: bool = False,
    ) -> None:
        """Records a fault for the rows in `mask`.

        Args:
            mask: boolean, True for the faulty rows.
            reason: one text for all of them, or a function of the faulty rows' positions that
                returns one text per row (only called when some row is faulty).
            field: the offending field(s).
            exclusive: the fault explains the row by itself (a row cut short): its problem names
                only the exclusive faults, not what other checks find in its cells.
        """
        mask = np.asarray(mask, dtype=bool)
        if not mask.any():
            return
        rows = np.flatnonzero(mask)
        reasons = [reason] * len(rows) if isinstance(reason, str) else list(reason(rows))
        self._batches.append(pd.DataFrame({"row": rows, "reason": reasons, "field": field, "exclusive": exclusive}))
        if exclusive:
            self._exclusive[rows] = True

    def add_row_faults(self, df: pd.DataFrame) -> None:
        """Adds, as exclusive faults, the rows `read_table` found faulty (`df.attrs["row_faults"]`)."""
        faults = df.attrs.get("row_faults") or {}
        by_field: dict[str, list[int]] = {}
        for row, (_, field) in faults.items():
            by_field.setdefault(field, []).append(int(row))
        for field, rows in by_field.items():
            mask = np.zeros(self.n_rows, dtype=bool)
            mask[rows] = True
            self.add(mask, lambda positions: [faults[int(i)][0] for i in positions], field, exclusive=True)

    @property
    def bad(self) -> np.ndarray:
        mask = np.zeros(self.n_rows, dtype=bool)
        for batch in self._batches:
            mask[batch["row"].to_numpy()] = True
        return mask

    def problems(self, doc_ids: pd.Series, sent_ids: "pd.Series | None" = None) -> list[Problem]:
        """One Problem per faulty row, rows 1-based; reasons and fields joined in check order."""
        if not self._batches:
            return []
        found = pd.concat(self._batches, ignore_index=True).sort_values("row", kind="stable")
        found = found[found["exclusive"] | ~self._exclusive[found["row"].to_numpy()]]
        grouped = found.groupby("row", sort=True).agg(
            reason=("reason", "; ".join), field=("field", lambda f: ", ".join(dict.fromkeys(f)))
        )
        rows = grouped.index.to_numpy()
        docs = doc_ids.iloc[rows].fillna("").astype(str).tolist()
        sents = sent_ids.iloc[rows].fillna("").astype(str).tolist() if sent_ids is not None else [None] * len(rows)
        return [
            Problem(doc_id=d, reason=r, field=f, row=int(row) + 1, sent_id=s or None)
            for d, r, f, row, s in zip(docs, grouped["reason"], grouped["field"], rows, sents)
        ]


class CheckedTable(NamedTuple):
    """What `check_utterances` returns.

    Attributes:
        bad: boolean array, True for rows to set aside.
        problems: one Problem per bad row.
        labels: parsed label columns (Int64, <NA> where not rated or bad), by column name; they
            may share memory with the table's columns (the caller replaces those with them).
        is_pause: parsed `is_pause` (bool; False where absent or bad).
    """

    bad: np.ndarray
    problems: list[Problem]
    labels: dict[str, pd.Series]
    is_pause: pd.Series


def label_columns_of(columns: Iterable[str], schema: Schema) -> dict[str, str]:
    """Label columns of the schema's heads present in `columns`: column -> head name.

    Covers `labeler{k}_{head}` for any k, the final `labeler_{head}` and synthetic `true_{head}`.
    """
    columns = list(columns)
    present = set(columns)  # one look-up per column, not a scan of the list (quadratic in the slots)
    found: dict[str, str] = {}
    for head in schema.head_names:
        for k in labeler_ids(columns, [head]):
            if f"labeler{k}_{head}" in present:
                found[f"labeler{k}_{head}"] = head
        for col in (final_column(head), true_column(head)):
            if col in present:
                found[col] = head
    return found


def parse_flag(values: pd.Series) -> tuple[pd.Series, np.ndarray]:
    """Parses a 0/1 flag column (`is_pause`): 0/1, true/false, empty = False.

    Returns:
        (flags, bad): a bool Series, and a boolean array True where the value is not a flag.
    """
    if pd.api.types.is_bool_dtype(values.dtype):
        return values.fillna(False).astype(bool), np.zeros(len(values), dtype=bool)
    if pd.api.types.is_numeric_dtype(values.dtype):
        num = values.astype(float)
        bad = (num.notna() & ~num.isin([0.0, 1.0])).to_numpy()
        return (num == 1.0).fillna(False).astype(bool), bad
    text = values.astype(str).str.strip().str.lower().where(values.notna(), "")
    flags = text.isin(_TRUE)
    bad = (~flags & ~text.isin(_FALSE)).to_numpy()
    return flags.astype(bool), bad


def check_utterances(
    df: pd.DataFrame, schema: Schema, *, person_types: "frozenset[str] | None" = None, check_labels: bool = True
) -> CheckedTable:
    """Checks a per-sentence table (annotated or generic) row by row, vectorised.

    Args:
        df: the table as read, RangeIndex in file order; needs `doc_id` and `text`; `sent_id`,
            `is_pause`, `person_type` and label columns are checked when present.
        schema: the heads whose label columns are checked.
        person_types: allowed `person_type` values, or None to accept any.
        check_labels: False skips the label columns (neither checked nor parsed).

    Returns:
        A `CheckedTable`: rows to set aside with their problems, and the parsed labels and pauses.
    """
    found = Findings(len(df))
    found.add_row_faults(df)
    doc = df["doc_id"]
    found.add(blank_cells(doc), "empty doc_id", "doc_id")

    if "person_type" in df and person_types is not None:
        ptype = df["person_type"].astype(str).where(df["person_type"].notna(), "")
        allowed = sorted(person_types)
        reason = _describe(ptype, "person_type ", f" is not one of {allowed}")
        found.add(~ptype.isin(person_types), reason, "person_type")

    if "is_pause" in df:
        is_pause, bad_pause = parse_flag(df["is_pause"])
        found.add(bad_pause, _describe(df["is_pause"], "is_pause ", " is not 0 or 1"), "is_pause")
    else:
        is_pause = pd.Series(False, index=df.index)

    labels: dict[str, pd.Series] = {}
    for col, head_name in (label_columns_of(df.columns, schema) if check_labels else {}).items():
        head, values = schema[head_name], df[col]
        parsed, bad = parse_label_column(values, head, copy=False)  # they replace df's columns
        labels[col] = parsed
        found.add(bad, _describe(values, f"{col} ", f" is not one of {head.values}"), col)

    text = df["text"]
    empty_text = blank_cells(text)
    found.add(empty_text & ~is_pause, "empty text on a non-pause row", "text")

    if "sent_id" in df:
        raw = df["sent_id"]
        sent = raw.astype(str).where(raw.notna(), "") if raw.dtype != STR_DTYPE or raw.hasnans else raw
        blank = blank_cells(raw)
        found.add(blank, "empty sent_id", "sent_id")
        repeats = not sent.is_unique  # cheaper than `duplicated`, which runs only when some sent_id repeats
        dup = sent.duplicated(keep="first") & ~blank if repeats else np.zeros(len(sent), dtype=bool)
        if dup.any():
            first_row = pd.Series(np.arange(len(df)) + 1, index=df.index).groupby(sent).transform("min")

            def duplicate(rows: np.ndarray) -> list[str]:
                quoted = _quoted(sent.iloc[rows]).tolist()
                return [f"duplicate sent_id {q} (first at row {r})" for q, r in zip(quoted, first_row.iloc[rows])]

            found.add(dup, duplicate, "sent_id")
    sent_ids = df["sent_id"] if "sent_id" in df else None
    problems = found.problems(doc, sent_ids)
    return CheckedTable(bad=found.bad, problems=problems, labels=labels, is_pause=is_pause)


def _describe(values: pd.Series, prefix: str, suffix: str) -> Callable[[np.ndarray], list[str]]:
    """A reason builder: `prefix + <the row's value as repr shows it> + suffix`."""

    def build(rows: np.ndarray) -> list[str]:
        return [prefix + q + suffix for q in _quoted(values.iloc[rows]).tolist()]

    return build


def _quoted(values: pd.Series) -> pd.Series:
    """The cells as `repr` would show them ('x' for text, 7 for numbers), as strings."""
    if pd.api.types.is_numeric_dtype(values.dtype) and not pd.api.types.is_bool_dtype(values.dtype):
        num = values.astype(float)
        integral = num.notna() & (num % 1 == 0) & (num.abs() < 2**53)
        out = num.astype(str)
        return out.where(~integral, num.where(integral, 0).astype("int64").astype(str))
    return "'" + values.astype(str).str.replace("'", "\\'", regex=False) + "'"


# ----------------------------------------------------------------------------------------------
# public-release label lists


def parse_int_list(cell: Any) -> "list[int] | None":
    """Parses a Python/JSON-style list of integers (`"[1, 0, 2]"`); None when it is not one.

    Integral floats (`1.0`) count as integers; booleans, nested lists and other values do not.
    """
    if isinstance(cell, (list, tuple, np.ndarray)):
        items = list(cell)
    elif isinstance(cell, str):
        text = cell.strip()
        if not text.startswith("["):
            return None
        try:
            items = json.loads(text)
        except ValueError:
            try:
                items = ast.literal_eval(text)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                return None
        if not isinstance(items, (list, tuple)):
            return None
    else:
        return None
    out: list[int] = []
    for item in items:
        if isinstance(item, (bool, np.bool_)):
            return None
        if isinstance(item, (int, np.integer)):
            out.append(int(item))
        elif isinstance(item, (float, np.floating)) and float(item).is_integer():
            out.append(int(item))
        else:
            return None
    return out


def check_label_lists(
    df: pd.DataFrame, schema: Schema, total_sent: pd.Series
) -> tuple[Findings, dict[str, list["list[int] | None"]]]:
    """Checks the public release's final-label lists of each conversation.

    Args:
        df: one row per conversation with a `labeler_{head}` column per schema head.
        schema: the heads.
        total_sent: the parsed `total_sent` (Int64, <NA> when unusable).

    Returns:
        (findings, lists): the faults per row, and per column the parsed lists (None when
        unparsable) in row order.
    """
    found = Findings(len(df))
    lists: dict[str, list[list[int] | None]] = {}
    cols = [final_column(h) for h in schema.head_names]
    for col in cols:
        parsed = [parse_int_list(v) for v in df[col].tolist()]
        lists[col] = parsed
        unparsable = np.array([p is None for p in parsed], dtype=bool)
        found.add(unparsable, f"{col} is not a list of integers", col)
        allowed = set(schema[col[len("labeler_") :]].values)
        reasons = []
        for p in parsed:
            outside = [] if p is None else [(i, v) for i, v in enumerate(p) if v not in allowed]
            reasons.append(
                f"{col} holds {outside[0][1]} at position {outside[0][0]} "
                f"({len(outside)} value(s) outside {sorted(allowed)})"
                if outside
                else ""
            )
        found.add(np.array([r != "" for r in reasons]), lambda rows, r=reasons: [r[i] for i in rows], col)
    total = total_sent.to_numpy(dtype=float, na_value=np.nan)
    for i in range(len(df)):
        lengths = {c: len(lists[c][i]) for c in cols if lists[c][i] is not None}
        if not lengths:
            continue
        expected = total[i]
        if np.isnan(expected):
            if len(set(lengths.values())) > 1:
                majority = Counter(lengths.values()).most_common(1)[0][0]
                odd = [c for c, n in lengths.items() if n != majority]
                detail = ", ".join(f"{c} has {lengths[c]} elements" for c in odd)
                _add_one(found, i, f"{detail}, the other label lists {majority}", odd)
            continue
        odd = [c for c, n in lengths.items() if n != expected]
        if not odd:
            continue
        if len(odd) == len(lengths) and len(set(lengths.values())) == 1:
            n = next(iter(lengths.values()))
            _add_one(found, i, f"the label lists have {n} elements but total_sent is {int(expected)}", ["total_sent"])
        else:
            detail = ", ".join(f"{c} has {lengths[c]} elements" for c in odd)
            _add_one(found, i, f"{detail}; total_sent and the other label lists say {int(expected)}", odd)
    return found, lists


def _add_one(found: Findings, row: int, reason: str, fields: list[str]) -> None:
    mask = np.zeros(found.n_rows, dtype=bool)
    mask[row] = True
    found.add(mask, reason, ", ".join(fields))


# ----------------------------------------------------------------------------------------------
# the set-aside report


def write_report(problems: Iterable[Problem], path: "str | Path") -> int:
    """Writes the set-aside records as JSON lines, one object per record.

    Each object has `doc_id`, `reason`, `field`, and `row` (1-based data row) and `sent_id`
    where known. Text is written as UTF-8, non-ASCII characters unescaped.

    Returns:
        The number of records written.

    Raises:
        OutputFileError: the report cannot be written (names the path and the cause; nothing is
            left at the path).
    """
    n = 0
    with atomic_output(path) as tmp:  # complete or absent
        with tmp.open("w", encoding="utf-8") as fh:
            for problem in problems:
                fh.write(json.dumps(problem.to_dict(), ensure_ascii=False) + "\n")
                n += 1
    return n
