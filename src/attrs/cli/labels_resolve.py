"""`psyattrs labels resolve IN --out OUT`: fills the final labels from the labelers' labels.

Writes the input table with its `labeler_{head}` columns (re)computed by one method (opela,
opela-weighted, majority, dawid-skene); every other column keeps its text and place, and a head
without a final column gets one appended. Rows the reader sets aside are left out (a note says how
many). `--check` prints, per head and for every method, how often the resolution agrees with the
final labels already in the file, so a user holding the annotated release sees which reading
reproduces it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from psyattrs.cli._options import add_input_format, add_schema
from psyattrs.data import load_corpus
from psyattrs.data.io import decode_bytes, detect_encoding, is_parquet, read_table
from psyattrs.data.output import atomic_output
from psyattrs.data.table import final_column
from psyattrs.errors import InputFileError
from psyattrs.labels.aggregate import METHODS
from psyattrs.labels.resolve import compare_with_final, resolve_final_labels
from psyattrs.schema import Schema

OUTPUT_SUFFIXES: dict[str, str] = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds `labels resolve` to the `labels` group."""
    parser = subparsers.add_parser(
        "resolve",
        help="fill the final labels (labeler_*) from the labelers' columns",
        description=__doc__.split("\n\n", 1)[1],
    )
    parser.add_argument("input", metavar="IN", type=Path, help="utterance table (CSV or Parquet)")
    parser.add_argument("--out", metavar="OUT", type=Path, default=None, help="output file: .csv or .parquet")
    parser.add_argument("--method", choices=METHODS, default="opela", help="resolution method (default: opela)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random fallbacks (default: 0)")
    parser.add_argument(
        "--check", action="store_true", help="print every method's agreement with the final labels in IN"
    )
    add_input_format(parser)
    add_schema(parser)
    parser.set_defaults(func=handler)


def output_kind(path: Path) -> str:
    """`csv` or `parquet` from the output file's extension (ValueError naming the allowed ones)."""
    kind = OUTPUT_SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise ValueError(f"output file {str(path)!r} must end in one of {sorted(OUTPUT_SUFFIXES)}")
    return kind


def handler(args: argparse.Namespace) -> int:
    """Loads IN, prints the check table and/or writes OUT; returns 0."""
    if args.out is None and not args.check:
        raise ValueError("nothing to do: give --out OUT to write the resolved table, --check, or both")
    kind = output_kind(args.out) if args.out is not None else None
    corpus = load_corpus(args.input, format=args.format, schema=args.schema)
    if corpus.record_kind != "sentence" and corpus.annotations is None:
        raise ValueError(
            f"{args.input} is read as {corpus.format!r}, which has no per-labeler labels to resolve; "
            "labels resolve needs an annotated or generic per-sentence table with labeler{k}_{head} columns"
        )
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    if args.check:
        for table in check_tables(compare_with_final(corpus.utterances, corpus.schema, seed=args.seed,
                                                       annotations=corpus.annotations)):
            console.print(table)
    if args.out is not None:
        resolved = resolve_final_labels(corpus.utterances, corpus.schema, method=args.method, seed=args.seed,
                                        annotations=corpus.annotations)
        if corpus.annotations is not None:  # LeWiDi JSON, long table: the utterance table it became
            table = resolved
        else:
            table = output_table(corpus.source or args.input, resolved, corpus.schema)
        write_table(table, args.out, kind)
        console.print(
            f"resolved {len(table)} rows with method {args.method} (seed {args.seed}); wrote {args.out}", soft_wrap=True
        )
    if corpus.problems:
        print(
            f"note: {len(corpus.problems)} row(s) of {args.input} were set aside by the reader and are not "
            f"resolved (see: psyattrs data validate {args.input} --report REPORT.jsonl)",
            file=sys.stderr,
        )
    return 0


def check_tables(comparison: pd.DataFrame) -> list[Table]:
    """Rich tables of `compare_with_final`: one row per head, one column per method.

    The first table gives the agreement on all items with a final label (and each method's mean
    over the heads), the second on the all-different items only, where the readings differ. The
    best method of a head is bold.
    """
    return [
        _method_table(comparison, "n_items", "agreement", "Agreement with the final labels in the file (all items)"),
        _method_table(
            comparison,
            "n_all_different",
            "agreement_all_different",
            "Agreement on the all-different items (3+ labels, no two alike)",
        ),
    ]


def _method_table(comparison: pd.DataFrame, n_col: str, value_col: str, title: str) -> Table:
    methods = list(dict.fromkeys(comparison["method"]))
    table = Table(title=title, title_justify="left")
    table.add_column("head")
    table.add_column("n", justify="right")
    for m in methods:
        table.add_column(m, justify="right")
    for head, rows in comparison.groupby("head", sort=False):
        rows = rows.set_index("method")
        best = rows[value_col].max()
        cells = [
            f"[bold]{_pct(v)}[/bold]" if not np.isnan(best) and v == best else _pct(v) for v in rows[value_col][methods]
        ]
        table.add_row(str(head), str(int(rows[n_col].max())), *cells)
    if value_col == "agreement":
        means = comparison.groupby("method", sort=False)[value_col].mean()
        table.add_section()
        table.add_row("mean", "", *[_pct(means[m]) for m in methods])
    return table


def _pct(x: float) -> str:
    return "-" if x is None or np.isnan(x) else f"{100 * x:.2f}%"


def output_table(source: Path, resolved: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """The input file's own table with the resolved final labels put in.

    The file is read again with every column as text, so each cell is written back as it was;
    rows are matched to the corpus by (doc_id, row order within the doc_id), which the readers keep
    for set-aside rows too. Set-aside rows are left out.

    Args:
        source: the input file (CSV or Parquet).
        resolved: the corpus' utterance table with resolved `labeler_{head}` columns.
        schema: the heads.

    Returns:
        The input's columns in its order (text as read), `labeler_{head}` columns replaced by the
        resolved labels (Int64), missing ones appended in schema order.
    """
    raw = _read_as_text(source)
    doc = raw["doc_id"].astype(str).where(raw["doc_id"].notna(), "")
    raw_key = pd.MultiIndex.from_arrays([doc, doc.groupby(doc, sort=False).cumcount()])
    kept_key = pd.MultiIndex.from_arrays([resolved["doc_id"], resolved["position"]])
    rows = raw_key.get_indexer(kept_key)
    if (rows < 0).any() or len(set(rows)) != len(rows):
        raise InputFileError(source, "the rows read could not be matched back to the file's rows")
    out = raw.iloc[rows].reset_index(drop=True)
    for col in _parquet_integer_columns(source):  # pandas reads those with nulls as floats
        if pd.api.types.is_float_dtype(out[col].dtype):
            out[col] = out[col].astype("Int64")
    for head in schema:
        col = final_column(head.name)
        out[col] = pd.Series(resolved[col].array, index=out.index, dtype="Int64")
    return out


def _read_as_text(source: Path) -> pd.DataFrame:
    """The input table with every CSV cell as its text ("" for an empty cell); Parquet as typed."""
    if is_parquet(source):
        return read_table(source)
    encoding = detect_encoding(source)
    options = dict(dtype=str, keep_default_na=False, na_filter=False, low_memory=False)
    try:
        return pd.read_csv(source, encoding=encoding, **options)
    except UnicodeDecodeError:  # the beginning looked like one encoding, the rest is another
        return pd.read_csv(source, encoding=decode_bytes(source.read_bytes(), source)[1], **options)


def _parquet_integer_columns(source: Path) -> list[str]:
    """The integer-typed columns of a Parquet file; [] for a CSV file."""
    if not is_parquet(source):
        return []
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pq.read_schema(source)
    return [f.name for f in schema if pa.types.is_integer(f.type)]


def write_table(table: pd.DataFrame, path: Path, kind: str) -> None:
    """Writes a table as UTF-8 CSV (no index; integers as integers) or Parquet, complete or not at
    all (`psyattrs.data.output.atomic_output`; OutputFileError naming the path and the cause)."""
    with atomic_output(path, make_parents=True) as tmp:
        if kind == "parquet":
            table.to_parquet(tmp, index=False)
        else:
            table.to_csv(tmp, index=False, encoding="utf-8")
