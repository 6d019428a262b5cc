"""`psyattrs data stats PATH [--json OUT]`: class balance and agreement per head.

Per head: class balance of the final labels, Krippendorff's alpha (nominal for binary heads,
ordinal for ordinal heads), Fleiss' kappa, each labeler's agreement with the final label and the
share of all-different items, pause rows excluded. Prints readable tables; `--json` writes the same
figures (`corpus_stats` below) to a file.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from psyattrs.cli._options import add_input_format, add_schema
from psyattrs.data import load_corpus
from psyattrs.data.output import write_text_atomic
from psyattrs.labels.agreement import corpus_agreement


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds `data stats` to the `data` group."""
    parser = subparsers.add_parser(
        "stats",
        help="class balance and inter-annotator agreement per head",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
    )
    parser.add_argument("path", metavar="PATH", type=Path, help="corpus file (CSV, Parquet, JSON lines)")
    parser.add_argument("--json", metavar="OUT", type=Path, default=None, help="also write the figures as JSON")
    add_input_format(parser)
    add_schema(parser)
    parser.set_defaults(func=handler)


def corpus_stats(corpus: Any) -> dict[str, Any]:
    """The statistics of a loaded corpus (a `psyattrs.data.table.Corpus`).

    Returns:
        JSON-ready dict: source, format, note (what the figures rest on when not the plain
        utterance table, or that the corpus has no labels at all; else ""), plus everything `corpus_agreement` returns (n_rows, n_pauses, n_items,
        schema, heads). For the public release the figures rest on the final-label sequences, the
        only labels that file holds (no per-labeler columns: agreement figures are None).
    """
    table, note = corpus.utterances, ""
    if corpus.format == "public" and corpus.label_sequences is not None:
        table = corpus.label_sequences
        note = "public release: final labels only (no per-labeler columns), pauses not marked"
    annotations = getattr(corpus, "annotations", None) if table is corpus.utterances else None
    stats = corpus_agreement(table, corpus.schema, annotations=annotations)
    if all(h["n_final"] == 0 and h["n_labelers"] == 0 for h in stats["heads"].values()):
        note = "no labels in this corpus: neither final labels nor labelers' columns"
    head = {"source": str(corpus.source) if corpus.source else None, "format": corpus.format, "note": note}
    return {**head, **stats}


def _pct(share: float | None) -> str:
    if share is None:
        return "-"
    return f"{100 * share:.1f}%" if share >= 0.01 or share == 0 else f"{100 * share:.2f}%"


def _num(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


MAX_LISTED_LABELERS = 8


def _labeler_cell(rows: list[dict[str, Any]]) -> str:
    """Each labeler's agreement, or for many annotators their count and the spread."""
    if not rows:
        return "-"
    if len(rows) <= MAX_LISTED_LABELERS:
        return "  ".join(f"L{a['labeler']} {_num(a['agreement'], 2)}" for a in rows)
    values = np.array([a["agreement"] for a in rows if a["agreement"] is not None], dtype=float)
    if not len(values):
        return f"{len(rows)} annotators"
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return f"{len(rows)} annotators: median {median:.2f} (quartiles {q1:.2f}-{q3:.2f})"


def agreement_table(stats: dict[str, Any]) -> Table:
    """Rich table: one row per head with alpha, kappa, labeler agreement and all-different share."""
    table = Table(title="Agreement per head (pause rows excluded)", title_justify="left")
    for col in ("head", "n", "alpha", "level", "Fleiss kappa", "kappa on", "labelers vs final", "all different"):
        table.add_column(col, justify="left" if col in ("head", "level", "kappa on", "labelers vs final") else "right")
    for name, h in stats["heads"].items():
        labelers = _labeler_cell(h["labeler_agreement"])
        diff = h["all_different"]
        different = f"{_pct(diff['share'])} ({diff['n']}/{diff['n_items']})" if diff["n_items"] else "-"
        kappa_on = f"{h['fleiss_items']} x {h['fleiss_raters']} raters" if h["fleiss_raters"] else "-"
        table.add_row(
            name,
            str(h["n_items"]),
            _num(h["krippendorff_alpha"]),
            h["alpha_level"],
            _num(h["fleiss_kappa"]),
            kappa_on,
            labelers,
            different,
        )
    return table


def balance_table(stats: dict[str, Any]) -> Table:
    """Rich table: class balance of the final labels, one row per head, one column per class."""
    table = Table(title="Class balance of the final labels", title_justify="left")
    n_cols = max(len(h["class_balance"]) for h in stats["heads"].values())
    table.add_column("head")
    table.add_column("labelled", justify="right")
    for c in range(n_cols):
        table.add_column(f"class {c}", justify="right")
    for name, h in stats["heads"].items():
        cells = [f"{b['count']} ({_pct(b['share'])})" for b in h["class_balance"]]
        table.add_row(name, str(h["n_final"]), *cells, *[""] * (n_cols - len(cells)))
    return table


def handler(args: argparse.Namespace) -> int:
    """Loads the corpus, prints the tables, writes --json; returns 0."""
    corpus = load_corpus(args.path, format=args.format, schema=args.schema)
    stats = corpus_stats(corpus)
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    console.print(
        f"{args.path}: {stats['format']}, {stats['n_rows']} rows, {stats['n_pauses']} pauses excluded, "
        f"{stats['n_items']} used (schema {stats['schema']})",
        soft_wrap=True,
    )
    if stats["note"]:
        console.print(f"note: {stats['note']}", soft_wrap=True)
    if any(h["n_final"] or h["n_labelers"] for h in stats["heads"].values()):
        console.print(balance_table(stats))
        console.print(agreement_table(stats))
    if args.json is not None:
        text = json.dumps(stats, ensure_ascii=False, indent=2, allow_nan=False) + "\n"

        write_text_atomic(args.json, text, make_parents=True)
        console.print(f"wrote {args.json}", soft_wrap=True)
    return 0
