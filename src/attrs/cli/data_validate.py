"""`psyattrs data validate PATH [--format F] [--schema S] [--report R.jsonl]`.

Reads a corpus file, prints its summary (records read = kept + set aside, conversations,
utterances, pauses, label counts per head, labelers, missing annotations, and for the public
release the line-count classification) and optionally writes the set-aside records as JSON lines.

Exit codes: 0 the file is usable; 1 it was read but no record is usable; 2 the file cannot be
used at all (one message naming the file, and the row and column where known).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from psyattrs.cli._options import add_input_format, add_schema
from psyattrs.data import FORMATS, load_corpus
from psyattrs.data.summary import format_summary, summarize
from psyattrs.data.validate import write_report
from psyattrs.errors import InputFileError

SHOWN_PROBLEMS = 5


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds `validate` to the `data` command group."""
    parser = subparsers.add_parser(
        "validate",
        help="read a corpus file, report what is usable and what is set aside",
        description=__doc__.split("\n\n", 1)[1].strip(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("path", help="CSV, Parquet or JSON-lines file")
    add_input_format(parser, formats=FORMATS)
    add_schema(parser)
    parser.add_argument("--report", default=None, metavar="R.jsonl", help="write the set-aside records here")
    parser.set_defaults(func=handler)


def handler(args: argparse.Namespace) -> int:
    """Runs the command; returns the exit code."""
    if args.report and not Path(args.report).resolve().parent.is_dir():
        raise InputFileError(args.report, "cannot write the report: its folder does not exist")
    corpus = load_corpus(args.path, format=args.format, schema=args.schema)
    summary = summarize(corpus)
    print(format_summary(summary))
    if corpus.problems:
        for problem in corpus.problems[:SHOWN_PROBLEMS]:
            where = f"row {problem.row}, " if problem.row is not None else ""
            print(f"  set aside: {where}{problem.doc_id}: {problem.reason} [{problem.field}]")
        if len(corpus.problems) > SHOWN_PROBLEMS:
            print(f"  ... and {len(corpus.problems) - SHOWN_PROBLEMS} more")
    if args.report:
        n = write_report(corpus.problems, args.report)
        print(f"report: {n} set-aside record(s) written to {args.report}")
    elif corpus.problems:
        print("(use --report R.jsonl to write every set-aside record)")
    if corpus.n_kept == 0:
        print("no usable record in this file")
        return 1
    return 0
