"""`psyattrs annotate INPUT --model URI --out OUT.parquet [--chunk-size N]`: annotate a corpus.

Streams PersonalDialog JSON lines (any size) or an utterance table (CSV or Parquet) in chunks of
whole conversations with constant memory, showing a progress bar with the rate and the time
left, and writes a Parquet dataset folder (one part per chunk) with every head's class, class
name, probabilities and disagreement. Rejected items go to OUT/_rejects.jsonl with their reasons.
An interrupted run continues after its last finished chunk when the same command is run again
(`--restart` starts over). Ends by printing the reconciliation: read = written + rejected.

Exit codes: 0 done (or stopped by --max-chunks), 1 the counts do not reconcile, 2 bad input or an
output that cannot be written (disk full: resumable), 130 interrupted (resumable).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from psyattrs.cli._options import add_input_format, add_tracking_uri
from psyattrs.errors import OutputFileError
from psyattrs.serving.annotate import DEFAULT_CHUNK_SIZE, annotate, read_manifest


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds the top-level `annotate` command."""
    parser = subparsers.add_parser(
        "annotate",
        help="annotate a large corpus in resumable chunks into a Parquet dataset",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
    )
    parser.add_argument("input", type=Path, metavar="INPUT", help="PersonalDialog JSON lines, or a CSV/Parquet utterance table")
    parser.add_argument("--model", required=True, metavar="URI",
                        help="models:/NAME@ALIAS (pinned to its version), runs:/RUN_ID/model, or a model folder")
    parser.add_argument("--out", required=True, type=Path, metavar="OUT.parquet", help="output folder (Parquet dataset)")
    parser.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK_SIZE,
                        help=f"utterances per chunk, whole conversations (default {DEFAULT_CHUNK_SIZE})")
    add_input_format(parser, choices=("personaldialog", "table", "lewidi"))
    parser.add_argument("--rejects", type=Path, default=None, help="rejects file (default OUT/_rejects.jsonl)")
    parser.add_argument("--restart", action="store_true", help="discard an earlier run in OUT and start over")
    parser.add_argument("--max-chunks", type=int, default=None, help="stop after N chunks (resume later)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_tracking_uri(parser)
    parser.set_defaults(func=handler)


def handler(args: argparse.Namespace) -> int:
    try:
        result = annotate(
            args.input, args.model, args.out, chunk_size=args.chunk_size, format=args.format, rejects=args.rejects,
            restart=args.restart, max_chunks=args.max_chunks, tracking_uri=args.tracking_uri,
            progress=not args.no_progress,
        )
    except KeyboardInterrupt:
        manifest = read_manifest(args.out) if args.out.is_dir() else None
        done = manifest["chunks"] if manifest else 0
        print(f"\ninterrupted after {done} finished chunk(s); run the same command again to continue", file=sys.stderr)
        return 130
    except OutputFileError as exc:
        manifest = read_manifest(args.out) if args.out.is_dir() else None
        done = manifest["chunks"] if manifest else 0
        print(f"psyattrs: error: {exc}; {done} finished chunk(s) are kept: free the space and run the same "
              "command again to continue", file=sys.stderr)
        return 2
    print(f"annotated {args.input} with {result.model} in {result.seconds:.1f}s")
    print(result.reconciliation())
    return 0 if result.balanced else 1
