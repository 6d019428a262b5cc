"""The long (tidy) annotation layout from CSV or Parquet: one row per (item, annotator, head, label).

This is the shape crowd-kit takes (`task`, `worker`, `label`) and the one corpora with hundreds of
annotators are published in. Columns:

| column                                   | required | meaning                                         |
|------------------------------------------|----------|-------------------------------------------------|
| `task`, `item`, `item_id` or `sent_id`   | yes      | the rated item (the first of these present)     |
| `worker` or `annotator`                  | yes      | who rated it                                    |
| `label`                                  | yes      | the class given (integer 0..K-1 of the head)    |
| `head`                                   | no       | the head; without it the schema's only head      |
| `text`                                   | no       | the item's text (the first non-empty one per item) |
| `doc_id`                                 | no       | the conversation; default: the item id          |
| `position`, `person_type`                | no       | order and speaker within the conversation       |

Without `--schema`, the schema comes from the table: one head per `head` value (or one head
`label`), classes 0..the highest label of the run of consecutive labels around the most frequent
one (`psyattrs.data.scales.seen_run`; at most `MAX_INFERRED_CLASSES`), language `und` (the
fallback tokeniser). A label beyond that run (one `100000` or `1e9` among 0/1 labels) is an
outlying value: its row is set aside, named, and the class count does not follow it.

A rating row is set aside (one `Problem` naming the row, the item and the field) when its item or
annotator id is empty, its label is not a class of its head, its head is not in the schema, it
repeats an (item, annotator, head) already read, or the CSV row itself is damaged (fewer fields
than the header, a NUL byte, undecodable bytes: `read_table`'s `row_faults`, the one reason given). `n_read == n_kept + len(problems)` counts rating
rows; the corpus is `record_kind="rating"`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from psyattrs.data.annotations import make_annotations, vote_slots
from psyattrs.data.io import LONG_ANNOTATOR_COLUMNS, LONG_ITEM_COLUMNS, check_file, read_table, require_columns
from psyattrs.data.scales import MAX_INFERRED_CLASSES, seen_run
from psyattrs.data.table import Corpus, Problem, normalize_table
from psyattrs.errors import InputFileError
from psyattrs.schema import UNKNOWN_LANGUAGE, Head, Schema


def _pick(columns, names: tuple[str, ...], path: Path, what: str) -> str:
    for name in names:
        if name in columns:
            return name
    require_columns(columns, names[:1], path, what)
    return names[0]  # pragma: no cover - require_columns raised


def _infer_schema(heads: pd.Series, labels: np.ndarray, name: str, path: Path) -> Schema:
    """One head per head value, classes 0..K-1: K from the values seen, bounded (`seen_run`: the
    run of consecutive labels around the most frequent one among 0..`MAX_INFERRED_CLASSES` - 1,
    at least 2 classes). A label beyond the run is an outlying value: `read_long` sets its row
    aside, it does not make classes."""
    found = []
    for head in dict.fromkeys(heads.tolist()):
        values = labels[(heads == head).to_numpy() & ~np.isnan(labels)]
        values = values[(values >= 0) & (values == np.floor(values)) & (values < MAX_INFERRED_CLASSES)]
        uniques, counts = np.unique(values.astype(np.int64), return_counts=True)
        try:
            _, high = seen_run(dict(zip(uniques.tolist(), counts.tolist()))) if len(uniques) else (0, 1)
        except ValueError as exc:
            raise InputFileError(path, f"head {head!r}: {exc}", column="label") from None
        k = max(2, high + 1)
        found.append(Head(str(head), {c: str(c) for c in range(k)}))
    return Schema(name=name, heads=tuple(found), language=UNKNOWN_LANGUAGE)


def read_long(path: "str | Path", schema: "Schema | None" = None) -> Corpus:
    """Reads a long annotation table (see the module docstring).

    Args:
        path: CSV (UTF-8, UTF-8 with BOM, CP949) or Parquet.
        schema: the label schema; None = inferred from the table.

    Returns:
        A `Corpus` with `format="long"`, `record_kind="rating"`: `utterances` one row per item
        (vote slots `labeler{k}_{head}`, no final label: `psyattrs labels resolve` adds one),
        `annotations` the kept ratings, `problems` the rating rows set aside.

    Raises:
        InputFileError: unreadable file, or a required column missing (named).
    """
    p = check_file(path)
    df = read_table(p, str_columns=LONG_ITEM_COLUMNS + LONG_ANNOTATOR_COLUMNS + ("head", "doc_id", "text", "person_type"))
    what = "a long annotation table (item, annotator, label)"
    item_col = _pick(df.columns, LONG_ITEM_COLUMNS, p, what)
    who_col = _pick(df.columns, LONG_ANNOTATOR_COLUMNS, p, what)
    require_columns(df.columns, ("label",), p, what)
    items = df[item_col].fillna("").astype(str).str.strip()
    workers = df[who_col].fillna("").astype(str).str.strip()
    labels = pd.to_numeric(df["label"], errors="coerce").to_numpy(dtype=float)
    if schema is None:
        default_head = "label"
    elif len(schema.heads) == 1:
        default_head = schema.heads[0].name
    else:
        default_head = ""
    if "head" in df:
        heads = df["head"].fillna("").astype(str).str.strip().where(lambda s: s != "", default_head)
    elif default_head:
        heads = pd.Series(default_head, index=df.index)
    else:
        raise InputFileError(p, f"schema {schema.name!r} has several heads {schema.head_names}: the table needs "
                                "a 'head' column", column="head")
    if schema is None:
        schema = _infer_schema(heads, labels, name=p.stem, path=p)
    faults: dict[int, list[tuple[str, str]]] = {}

    def add(mask: np.ndarray, field: str, reason) -> None:
        for row in np.flatnonzero(mask):
            faults.setdefault(int(row), []).append((field, reason(row) if callable(reason) else reason))

    add((items == "").to_numpy(), item_col, "empty item id")
    add((workers == "").to_numpy(), who_col, "empty annotator id")
    known = heads.isin(schema.head_names).to_numpy()
    add(~known, "head", lambda r: f"head {heads.iloc[r]!r} is not in schema {schema.name!r} {schema.head_names}")
    n_classes = heads.map({h.name: h.n_classes for h in schema}).to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        in_class = known & (labels >= 0) & (labels == np.floor(labels)) & (labels < n_classes)
    add(known & ~in_class, "label",
        lambda r: f"label {str(df['label'].iloc[r])!r} is not a class of head {heads.iloc[r]!r} "
                  f"(0..{int(n_classes[r]) - 1})")
    dup = pd.DataFrame({"i": items, "w": workers, "h": heads}).duplicated(keep="first").to_numpy()
    add(dup, f"{item_col}, {who_col}", "a second rating of this item by this annotator")
    for row, (reason, field) in (df.attrs.get("row_faults") or {}).items():  # cut short, NUL, undecodable
        faults[int(row)] = [(field, reason)]  # that one reason: the row's other cells are not what was written
    bad = np.zeros(len(df), dtype=bool)
    bad[list(faults)] = True
    problems = [
        Problem(doc_id=str(items.iloc[r]), reason="; ".join(x for _, x in f), field=", ".join(dict.fromkeys(k for k, _ in f)),
                row=r + 1, sent_id=str(items.iloc[r]) or None)
        for r, f in sorted(faults.items())
    ]
    good = ~bad
    annotations = make_annotations(items[good], workers[good], heads[good], labels[good].astype(np.int64))
    utterances = _items_table(df[good], items[good])
    utterances = normalize_table(vote_slots(utterances, annotations, schema), schema)
    conversations = (
        utterances.groupby("doc_id", sort=False).size().rename("n_utterances").reset_index()
        .assign(persona="", n_pauses=0)[["doc_id", "persona", "n_utterances", "n_pauses"]]
    )
    return Corpus(utterances=utterances, schema=schema, format="long", source=p, conversations=conversations,
                  problems=problems, n_read=len(df), record_kind="rating", annotations=annotations)


def _items_table(df: pd.DataFrame, items: pd.Series) -> pd.DataFrame:
    """One row per item, in order of first appearance, with its text, doc_id and position."""
    frame = pd.DataFrame({"sent_id": items.to_numpy()})
    for col in ("text", "doc_id", "person_type", "position"):
        if col in df:
            frame[col] = df[col].to_numpy()
    if "text" in frame:
        frame["text"] = frame["text"].fillna("").astype(str)
        frame["_has"] = frame["text"].str.strip() != ""
        frame = frame.sort_values("_has", ascending=False, kind="stable")
    first = frame.drop_duplicates("sent_id", keep="first").drop(columns=["_has"], errors="ignore")
    order = pd.Index(pd.unique(items.to_numpy()))
    first = first.set_index("sent_id").loc[order].reset_index()
    if "doc_id" not in first:
        first["doc_id"] = first["sent_id"]
    first["doc_id"] = first["doc_id"].fillna("").astype(str).where(lambda s: s.str.strip() != "", first["sent_id"])
    if "position" in first:
        first = first.sort_values(["doc_id", "position"], kind="stable")
        first = first.drop(columns=["position"])
    return first.reset_index(drop=True)
