"""The checks on a table of sentences to predict, in one place for `predict()`, the pyfunc model and
the HTTP endpoint.

A table to predict has the utterance-table columns (`psyattrs.data.table`), of which only `text` is
required. Without `doc_id` every row is an independent sentence (doc ids `s1`, `s2`, ..., as
`predict(list_of_strings)` gives); with it, rows sharing a `doc_id` are one conversation, in
order. `check_prediction_table` refuses, naming the column and the rows (counted from 0 in table
order), what `normalize_table` would otherwise coerce silently or fail on with an unlabelled error:

- `text` that is not a string (a number, a list, a missing value on a sentence that is not a pause);
  with `require_text`, a sentence that is empty or only whitespace;
- `doc_id` or `sent_id` that is missing, or neither a string nor an integer; `sent_id` repeated;
- `is_pause` other than true/false or 0/1 (a missing value reads as false);
- `position` that is missing, not an integer, negative, over `MAX_INDEX` or repeated within a
  conversation;
- `turn` that is not an integer (missing is allowed) or outside 0..`MAX_INDEX`; the other text columns
  (`person_type`, `person_name`, `person_id`, `persona`, `time`) holding something other than strings;
- an integer `doc_id` or `sent_id` beyond +-`MAX_INTEGER_ID` (2**53: past it a JSON number is not
  exact; such an id is sent as a string).

Every number is bounded here, before anything is converted to a fixed-width integer: an absurd
value (`1e20`, 2**63 - 1) is a named refusal, never an overflow or a wrapped id further on.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import pandas as pd

TEXT_COLUMNS: tuple[str, ...] = ("person_type", "person_name", "person_id", "persona", "time")
ID_COLUMNS: tuple[str, ...] = ("doc_id", "sent_id")
PAUSE_VALUES = "true/false or 0/1"
MAX_INDEX = 2**31 - 1  # the largest position or turn accepted
MAX_INTEGER_ID = 2**53  # integer ids beyond +-this are not exact as JSON numbers


def _rows(rows: "list[int] | np.ndarray", limit: int = 5) -> str:
    rows = [int(r) for r in rows]
    shown = ", ".join(str(r) for r in rows[:limit])
    more = f" and {len(rows) - limit} more" if len(rows) > limit else ""
    return f"row {shown}" if len(rows) == 1 else f"rows {shown}{more}"


def _show(value: Any, width: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _kind(value: Any) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "a boolean"
    if isinstance(value, numbers.Integral):
        return "an integer"
    if isinstance(value, numbers.Real):
        return "a number"
    if isinstance(value, (list, tuple, np.ndarray)):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, str):
        return "a string"
    return f"a {type(value).__name__}"


def _missing(value: Any) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, float) and value != value


def _is_integer(value: Any) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return False
    if isinstance(value, numbers.Integral):
        return True
    return isinstance(value, numbers.Real) and float(value).is_integer()


def _first_bad(values: np.ndarray, bad) -> tuple[np.ndarray, Any]:
    rows = np.flatnonzero([bad(v) for v in values])
    return rows, (values[rows[0]] if len(rows) else None)


def _check_text(frame: pd.DataFrame, pause: np.ndarray, require_text: bool) -> None:
    values = frame["text"].to_numpy(dtype=object)
    rows = np.flatnonzero([not isinstance(v, str) and not (p and _missing(v)) for v, p in zip(values, pause)])
    if len(rows):
        value = values[rows[0]]
        what = "missing" if _missing(value) else _kind(value)
        raise TypeError(f"column 'text': {_rows(rows)} {'is' if len(rows) == 1 else 'are'} {what}"
                        f"{'' if _missing(value) else ' (' + _show(value) + ')'}, not a string")
    if require_text:
        empty = np.flatnonzero([not p and not v.strip() for v, p in zip(values, pause)])
        if len(empty):
            raise ValueError(f"column 'text': {_rows(empty)} {'is' if len(empty) == 1 else 'are'} empty or only "
                             "whitespace (only pause rows, with is_pause true, may be empty)")


def _check_ids(frame: pd.DataFrame) -> None:
    for column in ID_COLUMNS:
        if column not in frame:
            continue
        values = frame[column].to_numpy(dtype=object)
        rows, value = _first_bad(values, lambda v: _missing(v) or not (isinstance(v, str) or _is_integer(v)))
        if len(rows):
            what = "missing" if _missing(value) else f"{_kind(value)} ({_show(value)})"
            raise TypeError(f"column {column!r}: {_rows(rows)} {'is' if len(rows) == 1 else 'are'} {what}; "
                            "an id is a string or an integer (leave the column out for independent sentences)"
                            if column == "doc_id" else
                            f"column {column!r}: {_rows(rows)} {'is' if len(rows) == 1 else 'are'} {what}; "
                            "an id is a string or an integer")
        rows, value = _first_bad(values, lambda v: not isinstance(v, str) and abs(v) > MAX_INTEGER_ID)
        if len(rows):
            raise ValueError(f"column {column!r}: {_rows(rows)} {'is' if len(rows) == 1 else 'are'} out of range "
                             f"({_show(value)}); an integer id lies within +-{MAX_INTEGER_ID} (send a larger "
                             "one as a string)")
    if "sent_id" in frame:
        ids = frame["sent_id"].astype(str)
        repeated = np.flatnonzero(ids.duplicated(keep="first").to_numpy())
        if len(repeated):
            raise ValueError(f"column 'sent_id': {_rows(repeated)} repeat an earlier sent_id "
                             f"({_show(ids.iloc[repeated[0]])}); sent_ids must be unique")


def _pause_flags(frame: pd.DataFrame) -> np.ndarray:
    if "is_pause" not in frame:
        return np.zeros(len(frame), dtype=bool)
    column = frame["is_pause"]
    if pd.api.types.is_bool_dtype(column.dtype) and not column.hasnans:
        return column.to_numpy(dtype=bool)
    values = column.to_numpy(dtype=object)

    def bad(v: Any) -> bool:
        if _missing(v) or isinstance(v, (bool, np.bool_)):
            return False
        return not (isinstance(v, numbers.Real) and v in (0, 1))

    rows, value = _first_bad(values, bad)
    if len(rows):
        raise ValueError(f"column 'is_pause': {_rows(rows)} {'holds' if len(rows) == 1 else 'hold'} "
                         f"{_show(value)} ({_kind(value)}); allowed: {PAUSE_VALUES}")
    return np.array([False if _missing(v) else bool(v) for v in values], dtype=bool)


def _check_position(frame: pd.DataFrame, doc_ids: pd.Series) -> None:
    if "position" not in frame:
        return
    values = frame["position"].to_numpy(dtype=object)
    rows, value = _first_bad(values, lambda v: _missing(v) or not _is_integer(v))
    if len(rows):
        what = "missing" if _missing(value) else f"{_kind(value)} ({_show(value)})"
        raise TypeError(f"column 'position': {_rows(rows)} {'is' if len(rows) == 1 else 'are'} {what}; a position "
                        "is an integer from 0 (or leave the column out: rows are in order)")
    negative = np.flatnonzero([v < 0 for v in values])
    if len(negative):
        raise ValueError(f"column 'position': {_rows(negative)} {'is' if len(negative) == 1 else 'are'} negative "
                         f"({_show(values[negative[0]])}); positions count from 0")
    large = np.flatnonzero([v > MAX_INDEX for v in values])
    if len(large):
        raise ValueError(f"column 'position': {_rows(large)} {'is' if len(large) == 1 else 'are'} out of range "
                         f"({_show(values[large[0]])}); a position lies in 0..{MAX_INDEX}")
    positions = pd.Series(values.astype(np.int64), index=frame.index)
    keys = pd.DataFrame({"doc_id": doc_ids.to_numpy(), "position": positions.to_numpy()})
    repeated = np.flatnonzero(keys.duplicated(keep="first").to_numpy())
    if len(repeated):
        first = repeated[0]
        raise ValueError(f"column 'position': {_rows(repeated)} repeat position {int(keys['position'].iloc[first])} "
                         f"of conversation {_show(keys['doc_id'].iloc[first])}; each sentence of a conversation "
                         "needs its own position")


def _check_other(frame: pd.DataFrame) -> None:
    if "turn" in frame:
        values = frame["turn"].to_numpy(dtype=object)
        rows, value = _first_bad(values, lambda v: not _missing(v) and not _is_integer(v))
        if len(rows):
            raise TypeError(f"column 'turn': {_rows(rows)} {'is' if len(rows) == 1 else 'are'} {_kind(value)} "
                            f"({_show(value)}), not an integer")
        rows, value = _first_bad(values, lambda v: not _missing(v) and not 0 <= v <= MAX_INDEX)
        if len(rows):
            raise ValueError(f"column 'turn': {_rows(rows)} {'is' if len(rows) == 1 else 'are'} out of range "
                             f"({_show(value)}); a turn lies in 0..{MAX_INDEX}")
    for column in TEXT_COLUMNS:
        if column not in frame or isinstance(frame[column].dtype, pd.StringDtype):
            continue
        values = frame[column].to_numpy(dtype=object)
        rows, value = _first_bad(values, lambda v: not _missing(v) and not isinstance(v, str))
        if len(rows):
            raise TypeError(f"column {column!r}: {_rows(rows)} {'is' if len(rows) == 1 else 'are'} {_kind(value)} "
                            f"({_show(value)}), not a string")


def check_prediction_table(frame: pd.DataFrame, *, require_text: bool = False) -> pd.DataFrame:
    """Checks a table of sentences to predict (see the module docstring) and gives it its doc ids.

    Args:
        frame: a DataFrame with at least `text`; the other utterance-table columns are optional,
            and columns the table contract does not know pass through unchecked.
        require_text: refuse sentences that are empty or only whitespace (pause rows excepted).

    Returns:
        `frame` itself when it has `doc_id`, else a copy with `doc_id` = `s1`, `s2`, ... (one
        conversation per row), ready for `normalize_table`.

    Raises:
        TypeError: not a DataFrame, or a value of the wrong type (names the column and rows).
        ValueError: no `text` column, or a bad value (names the column, the rows and the allowed values).
    """
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"a table to predict is a pandas DataFrame, got {type(frame).__name__}")
    if "text" not in frame.columns:
        raise ValueError("the table lacks column 'text' (the sentences); 'doc_id' (conversation id) and the other "
                         "utterance-table columns are optional")
    duplicated = sorted({str(c) for c in frame.columns[frame.columns.duplicated()]})
    if duplicated:
        raise ValueError(f"the table has column(s) {duplicated} more than once")
    _check_ids(frame)
    pause = _pause_flags(frame)
    _check_text(frame, pause, require_text)
    _check_other(frame)
    if "doc_id" not in frame:
        frame = frame.copy()
        frame.insert(0, "doc_id", [f"s{i}" for i in range(1, len(frame) + 1)])
    _check_position(frame, frame["doc_id"].astype(str))
    return frame
