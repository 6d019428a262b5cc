"""The body of a POST /invocations request, read into a table of sentences or refused with a reason.

A body is JSON (UTF-8) holding an object with exactly one of these keys:

| key                 | value                                                  | rows                          |
|---------------------|--------------------------------------------------------|-------------------------------|
| `dataframe_records` | a list of row objects (`{"text": ..., "doc_id": ...}`) | one per object                |
| `dataframe_split`   | `{"columns": [...], "data": [[...], ...]}` (`index` ignored) | one per data row        |
| `inputs` (or `instances`) | an object of equal-length columns, or anything `psyattrs.predict` accepts: a sentence, a list of sentences, a dialogue (list of turns), a list of dialogues, PersonalDialog records | as `predict` |

A row has the utterance-table columns (`ROW_COLUMNS`): only `text` is required; rows without
`doc_id` are independent sentences (`s1`, `s2`, ...), rows sharing a `doc_id` one conversation in
order. `params` is accepted and ignored (the model takes none). Everything else is a
`RequestError` with an HTTP status and a short message naming the field: 400 for bad JSON (also
nested beyond `MAX_DEPTH`), an unknown key or column, a value of the wrong type (a number where
text belongs is refused, not converted), a missing or empty text, bad `is_pause` or `position`
values; 415 for a body that is not JSON or not UTF-8.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

FORMS = ("dataframe_records", "dataframe_split", "inputs", "instances")
IGNORED_KEYS = ("params",)
ROW_COLUMNS = ("doc_id", "sent_id", "position", "text", "is_pause", "person_type", "person_name", "person_id",
               "persona", "turn", "time")
MAX_DEPTH = 32
_SCALARS = (str, int, float, bool, type(None))


class RequestError(ValueError):
    """A request the server refuses: `status` (an HTTP 4xx code) and a one-line `message`."""

    def __init__(self, status: int, message: str):
        self.status = status
        self.message = message
        super().__init__(message)


def _bad(message: str) -> RequestError:
    return RequestError(400, message)


def _show(value: Any, width: int = 40) -> str:
    text = json.dumps(value, ensure_ascii=False) if isinstance(value, _SCALARS) else type(value).__name__
    return text if len(text) <= width else text[: width - 3] + "..."


def _depth(value: Any, limit: int) -> int:
    """The nesting depth of parsed JSON, stopping once it passes `limit` (iterative: no recursion)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                return deepest
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item if isinstance(v, (dict, list)))
    return deepest


def decode_json(body: bytes) -> Any:
    """The parsed body.

    Raises:
        RequestError: 415 for bytes that are not UTF-8, 400 for invalid JSON or JSON nested too
            deeply for the parser (a message with the line and column of the fault, no echo of
            the body).
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(415, f"the body is not UTF-8 (byte {exc.start}); send JSON encoded as UTF-8") from None
    if not text.strip():
        raise _bad("the body is empty; send a JSON object such as {\"inputs\": [\"sentence\", ...]}")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _bad(f"the body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise _bad(f"the JSON nests deeper than {MAX_DEPTH} levels") from None
    return value


def _check_scalar(value: Any, where: str) -> None:
    if not isinstance(value, _SCALARS):
        kind = "a list" if isinstance(value, list) else "an object"
        raise _bad(f"{where} is {kind}; a cell holds a string, a number, true/false or null")


def _check_columns(columns: Any, where: str) -> None:
    unknown = [c for c in columns if c not in ROW_COLUMNS]
    if unknown:
        raise _bad(f"{where}: unknown column {_show(unknown[0])}; a row has {', '.join(ROW_COLUMNS)} "
                   "(only text is required)")


def _records(value: Any) -> pd.DataFrame:
    if not isinstance(value, list):
        raise _bad(f"dataframe_records must be a list of row objects, got {_kind(value)}")
    for i, row in enumerate(value):
        if not isinstance(row, dict):
            raise _bad(f"dataframe_records[{i}] is {_kind(row)}; a row is an object such as {{\"text\": \"...\"}}")
        _check_columns(row, f"dataframe_records[{i}]")
        for key, cell in row.items():
            _check_scalar(cell, f"dataframe_records[{i}].{key}")
        if "text" not in row:
            raise _bad(f"dataframe_records[{i}] has no text")
    return _frame(value, None)


def _split(value: Any) -> pd.DataFrame:
    if not isinstance(value, dict):
        raise _bad(f"dataframe_split must be an object with columns and data, got {_kind(value)}")
    unknown = [k for k in value if k not in ("columns", "data", "index")]
    if unknown:
        raise _bad(f"dataframe_split: unknown key {_show(unknown[0])}; it holds columns, data (and index)")
    columns, data = value.get("columns"), value.get("data")
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise _bad("dataframe_split.columns must be a list of column names")
    if len(set(columns)) != len(columns):
        raise _bad("dataframe_split.columns names a column twice")
    _check_columns(columns, "dataframe_split.columns")
    if "text" not in columns:
        raise _bad("dataframe_split.columns lacks text")
    if not isinstance(data, list):
        raise _bad(f"dataframe_split.data must be a list of rows, got {_kind(data)}")
    for i, row in enumerate(data):
        if not isinstance(row, list):
            raise _bad(f"dataframe_split.data[{i}] is {_kind(row)}; a row is a list of {len(columns)} cells")
        if len(row) != len(columns):
            raise _bad(f"dataframe_split.data[{i}] has {len(row)} cells for {len(columns)} columns")
        for j, cell in enumerate(row):
            _check_scalar(cell, f"dataframe_split.data[{i}][{j}] ({columns[j]})")
    return _frame(data, columns)


def _columns(value: dict, key: str) -> pd.DataFrame:
    _check_columns(value, key)
    if "text" not in value:
        raise _bad(f"{key} as columns lacks text")
    lengths = {}
    for name, cells in value.items():
        if not isinstance(cells, list):
            raise _bad(f"{key}.{name} must be a list (one cell per row), got {_kind(cells)}")
        for i, cell in enumerate(cells):
            _check_scalar(cell, f"{key}.{name}[{i}]")
        lengths[name] = len(cells)
    if len(set(lengths.values())) > 1:
        raise _bad(f"{key}: the columns have different lengths ({', '.join(f'{k} {n}' for k, n in lengths.items())})")
    return pd.DataFrame({name: pd.Series(cells, dtype=object) for name, cells in value.items()})


def _frame(rows: list, columns: list[str] | None) -> pd.DataFrame:
    """A DataFrame of object columns (no type inference: a number stays a number, to be refused
    where text belongs)."""
    if columns is None:
        names = list(dict.fromkeys(k for row in rows for k in row))
        data = {name: pd.Series([row.get(name) for row in rows], dtype=object) for name in names}
    else:
        data = {name: pd.Series([row[j] for row in rows], dtype=object) for j, name in enumerate(columns)}
    frame = pd.DataFrame(data)
    if len(rows) and "doc_id" in frame and frame["doc_id"].isna().any() and frame["doc_id"].notna().any():
        missing = frame.index[frame["doc_id"].isna()].tolist()
        raise _bad(f"doc_id is missing in row {missing[0]} but given in others: give it on every row "
                   "(conversations) or on none (independent sentences)")
    return frame


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "true/false"
    if value is None:
        return "null"
    return "a number"


def request_inputs(body: bytes) -> "tuple[str, Any]":
    """The form of a request body and its data, before any model sees it.

    Returns:
        (form, data): `table` and a DataFrame of object columns for `dataframe_records`,
        `dataframe_split` and the columns form of `inputs`; `inputs` and the parsed value (for
        `psyattrs.predict`'s input forms) otherwise.

    Raises:
        RequestError: see the module docstring.
    """
    value = decode_json(body)
    if not isinstance(value, dict):
        raise _bad(f"the body must be a JSON object with one of {', '.join(FORMS)}, got {_kind(value)}")
    forms = [k for k in value if k in FORMS]
    unknown = [k for k in value if k not in FORMS and k not in IGNORED_KEYS]
    if unknown:
        raise _bad(f"unknown key {_show(unknown[0])}; the body holds one of {', '.join(FORMS)}")
    if len(forms) != 1:
        raise _bad(f"the body must hold exactly one of {', '.join(FORMS)}"
                   + (f", got {len(forms)}: {', '.join(forms)}" if forms else ""))
    key = forms[0]
    data = value[key]
    if key == "dataframe_records":
        return "table", _records(data)
    if key == "dataframe_split":
        return "table", _split(data)
    if isinstance(data, dict) and "dialog" not in data:
        return "table", _columns(data, key)
    if _depth(data, MAX_DEPTH) > MAX_DEPTH:
        raise _bad(f"{key} nests deeper than {MAX_DEPTH} levels")
    return "inputs", data
