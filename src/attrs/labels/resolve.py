"""Table level: apply an aggregation method to every head of an utterance table.

`resolve_final_labels` fills the `labeler_{head}` columns from the `labeler{k}_{head}` columns;
`compare_with_final` says how well each method reproduces the final labels already present;
`rated_matrix` and `label_values` are the one place where label cells are checked against a head's
classes (see `psyattrs.data.table` for the table).
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np
import pandas as pd

from psyattrs.data.annotations import crowdkit_table
from psyattrs.data.table import final_column, labeler_column, labeler_ids
from psyattrs.labels.aggregate import METHODS, make_aggregator
from psyattrs.schema import Head, Schema


def rated_matrix(df: pd.DataFrame, head: Head) -> tuple[np.ndarray, list[int]]:
    """One head's per-labeler labels, checked against the head's classes.

    Args:
        df: utterance table with `labeler{k}_{head}` columns (any number of k, empty = not rated).
        head: the head.

    Returns:
        (matrix, ids): float array (n_rows, n_labelers) with NaN where a labeler did not rate, and
        the labeler numbers k of its columns, ascending. Zero columns when the head has none.

    Raises:
        ValueError: a cell holds something other than one of the head's classes (names the column,
            the row, its sent_id where known, and the allowed classes).
    """
    ids = labeler_ids(df.columns, [head.name])
    out = np.full((len(df), len(ids)), np.nan, order="F")  # filled column by column: contiguous writes
    for i, k in enumerate(ids):
        col = labeler_column(k, head.name)
        out[:, i] = label_values(df, col, head)
    return out, ids


def label_values(df: pd.DataFrame, col: str, head: Head) -> np.ndarray:
    """One label column as a float array (NaN = empty cell).

    Raises:
        ValueError: a cell holds something other than one of the head's classes (names the column,
            the 1-based row, its sent_id where known, how many such cells, and the allowed classes).
    """
    raw = df[col]
    if raw.dtype == "Int64":  # as the readers type label columns
        values = raw.to_numpy(dtype=float, na_value=np.nan)
        bad = ~np.isnan(values) & ~np.isin(values, head.values)
    elif pd.api.types.is_numeric_dtype(raw.dtype) and not pd.api.types.is_bool_dtype(raw.dtype):
        values = raw.astype("Float64").to_numpy(dtype=float, na_value=np.nan)  # no text cells to check
        bad = ~np.isnan(values) & ~np.isin(values, head.values)
    else:
        numeric = pd.to_numeric(raw, errors="coerce")
        values = numeric.astype("Float64").to_numpy(dtype=float, na_value=np.nan)
        not_a_number = numeric.isna().to_numpy() & raw.notna().to_numpy() & (raw.astype(str).str.strip() != "").to_numpy()
        bad = not_a_number | (~np.isnan(values) & ~np.isin(values, head.values))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        where = f"row {row + 1}"
        if "sent_id" in df.columns:
            where += f" (sent_id {df['sent_id'].iloc[row]!r})"
        value = raw.iloc[row]
        value = value.item() if isinstance(value, np.generic) else value
        raise ValueError(
            f"column {col!r} has value {value!r} at {where} ({int(bad.sum())} such cells); "
            f"head {head.name!r} allows {head.values}"
        )
    return values


def long_labels(matrix: np.ndarray, ids: Sequence[int]) -> pd.DataFrame:
    """The long table of a rated matrix: one row per rated cell.

    Args:
        matrix: (n_rows, n_labelers) floats, NaN = not rated (as from `rated_matrix`).
        ids: the labeler number of each matrix column.

    Returns:
        DataFrame with columns task (row position), worker (labeler number k), label (int),
        ordered by task then worker.
    """
    rows, cols = np.nonzero(~np.isnan(matrix))
    return pd.DataFrame(
        {
            "task": rows.astype(np.int64),
            "worker": np.asarray(ids, dtype=np.int64)[cols],
            "label": matrix[rows, cols].astype(np.int64),
        }
    )


def _heads_without_labelers(df: pd.DataFrame, schema: Schema) -> list[str]:
    return [h.name for h in schema if not labeler_ids(df.columns, [h.name])]


def resolve_final_labels(
    df: pd.DataFrame,
    schema: Schema,
    *,
    method: str = "opela",
    seed: int = 0,
    annotations: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Fills the final-label columns of an utterance table from its labelers' columns.

    Every row with at least one labeler's label is resolved, pause rows included (the released
    final labels cover them too, and their (a) items count towards R and U).

    Args:
        df: utterance table with `labeler{k}_{head}` columns for every head of the schema.
        schema: the heads to resolve.
        method: opela, opela-weighted, majority or dawid-skene.
        seed: seeds the random fallbacks of opela and majority.
        annotations: the corpus' long annotation table (`Corpus.annotations`: sent_id, annotator,
            head, label), for corpora of many annotators: then the aggregators see who gave each
            rating (Dawid-Skene's and the OPELA rule's per-annotator estimates follow a person
            across items) and `labeler{k}_{head}` (vote slots) are not read. None = the
            `labeler{k}_{head}` columns are the labelers.

    Returns:
        A copy of `df` whose `labeler_{head}` columns (Int64, <NA> where no labeler rated) hold the
        resolved labels; an existing column keeps its place, a new one is appended. All other
        columns are unchanged.

    Raises:
        ValueError: unknown method, a head without any labeler columns, or a label outside a head's
            classes.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; allowed: {list(METHODS)}")
    if annotations is not None:
        out = df.copy()
        for head in schema:
            out[final_column(head.name)] = _resolve_long(df, annotations, head, method, seed)
        return out
    missing = _heads_without_labelers(df, schema)
    if missing:
        raise ValueError(f"no labeler{{k}}_{{head}} columns for head(s) {missing}: nothing to resolve them from")
    resolved = dict(zip((final_column(h.name) for h in schema), _per_head(df, schema, method, seed)))
    return df.assign(**resolved)  # one new frame: existing columns keep their place, new ones appended


PARALLEL_ROWS = 20_000
"""From this many rows the heads are resolved on up to two threads at once."""


def _per_head(df: pd.DataFrame, schema: Schema, method: str, seed: int) -> list[pd.arrays.IntegerArray]:
    """`_resolve_head` of every head, in schema order. The heads are independent (each has its own
    seeded aggregator) and NumPy lets go of the interpreter inside its array loops, so on a big
    table two threads resolve them about a quarter faster on two cores; the results are the same
    as one after the other."""
    heads = list(schema)
    workers = min(2, len(heads), os.cpu_count() or 1)
    if len(df) < PARALLEL_ROWS or workers < 2:
        return [_resolve_head(df, head, method, seed) for head in heads]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="psyattrs-resolve") as pool:
        return list(pool.map(lambda head: _resolve_head(df, head, method, seed), heads))


def _resolve_head(df: pd.DataFrame, head: Head, method: str, seed: int) -> pd.arrays.IntegerArray:
    matrix, ids = rated_matrix(df, head)
    if np.isnan(matrix).all():
        return pd.arrays.IntegerArray(np.zeros(len(df), dtype=np.int64), np.ones(len(df), dtype=bool))
    pred = make_aggregator(method, seed=seed).fit_matrix(matrix, ids, head.n_classes).labels_
    if len(pred) == len(df):  # every row is a task (the tasks are the rated rows, ascending)
        return pd.arrays.IntegerArray(pred.to_numpy(dtype=np.int64, copy=True), np.zeros(len(df), dtype=bool))
    values = np.zeros(len(df), dtype=np.int64)
    mask = np.ones(len(df), dtype=bool)
    values[pred.index.to_numpy()] = pred.to_numpy()
    mask[pred.index.to_numpy()] = False
    return pd.arrays.IntegerArray(values, mask)


def _resolve_long(df: pd.DataFrame, annotations: pd.DataFrame, head: Head, method: str, seed: int) -> pd.arrays.IntegerArray:
    values = np.zeros(len(df), dtype=np.int64)
    mask = np.ones(len(df), dtype=bool)
    long = crowdkit_table(annotations, head.name)
    if len(long):
        pred = make_aggregator(method, seed=seed).fit(long, head.n_classes).labels_
        rows = pd.Index(df["sent_id"].astype(str)).get_indexer(pred.index.astype(str))
        found = rows >= 0
        values[rows[found]] = pred.to_numpy()[found]
        mask[rows[found]] = False
    return pd.arrays.IntegerArray(values, mask)


def all_different_mask(matrix: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Which items have at least three labels, and which of those have no two labels alike.

    Args:
        matrix: (n_rows, n_labelers) floats, NaN = not rated, values 0..n_classes-1.
        n_classes: number of classes K.

    Returns:
        (eligible, all_different): two bool arrays of length n_rows.
    """
    counts = np.stack([(matrix == c).sum(axis=1) for c in range(n_classes)], axis=1)
    eligible = counts.sum(axis=1) >= 3
    return eligible, eligible & (counts.max(axis=1, initial=0) <= 1)


def compare_with_final(
    df: pd.DataFrame,
    schema: Schema,
    *,
    methods: Sequence[str] = METHODS,
    seed: int = 0,
    annotations: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """How well each method reproduces the final labels already in the table.

    Args:
        df: utterance table with `labeler{k}_{head}` and `labeler_{head}` columns for every head.
        schema: the heads to compare.
        methods: method names (see `METHODS`).
        seed: seeds the random fallbacks.
        annotations: the long annotation table, as `resolve_final_labels` takes it.

    Returns:
        DataFrame, one row per head x method (heads in schema order, methods in the given order),
        columns: head, method, n_items (rows with both a final and a resolved label), agreement
        (share of those that match; NaN when n_items is 0), n_all_different (of those, rows with at
        least three labels, no two alike), agreement_all_different (share matching among them).

    Raises:
        ValueError: unknown method, a head without final or labeler columns, a bad label value.
    """
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; allowed: {list(METHODS)}")
    no_final = [h.name for h in schema if final_column(h.name) not in df.columns]
    if no_final:
        raise ValueError(f"no final-label column(s) {[final_column(h) for h in no_final]} to compare with")
    finals = {h.name: label_values(df, final_column(h.name), h) for h in schema}
    resolved = {m: resolve_final_labels(df, schema, method=m, seed=seed, annotations=annotations) for m in methods}
    rows = []
    for head in schema:
        final = finals[head.name]
        _, all_diff = all_different_mask(rated_matrix(df, head)[0], head.n_classes)
        for m in methods:
            got = resolved[m][final_column(head.name)].to_numpy(dtype=float, na_value=np.nan)
            both = ~np.isnan(final) & ~np.isnan(got)
            match = both & (final == got)
            n, n_diff = int(both.sum()), int((both & all_diff).sum())
            rows.append(
                {
                    "head": head.name,
                    "method": m,
                    "n_items": n,
                    "agreement": match.sum() / n if n else np.nan,
                    "n_all_different": n_diff,
                    "agreement_all_different": (match & all_diff).sum() / n_diff if n_diff else np.nan,
                }
            )
    return pd.DataFrame(rows, columns=["head", "method", "n_items", "agreement", "n_all_different", "agreement_all_different"])
