"""`psyattrs labels next POOL --model URI --budget N`: which sentences (or conversations) to send to the labelers next.

Scores every sentence of POOL (any format psyattrs reads; pause rows are context only) and, with
`--labelled FILE`, the labelled sentences the pool lacks, by a strategy: `combined` (psyattrs':
predicted labeler disagreement and consensus doubt, weighted toward items with few labels),
`disagreement`, `entropy`, `activelab` (cleanlab's: relabel or label new) or `random`; combined
over `--heads`. Prints the ranked list with the score and its parts, or writes it with `--out`
(.csv or .parquet).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from psyattrs.cli._options import add_input_format, add_tracking_uri
from psyattrs.cli.labels_quality import _write, split_heads
from psyattrs.cli.labels_resolve import output_kind
from psyattrs.data.output import atomic_output
from psyattrs.labels.active import STRATEGIES

UNITS = ("sentence", "conversation")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds `labels next` to the `labels` group."""
    parser = subparsers.add_parser(
        "next",
        help="rank the sentences or conversations to label next (active learning)",
        description=__doc__.split("\n\n", 1)[1],
    )
    parser.add_argument("pool", metavar="POOL", type=Path, help="candidate sentences (any format psyattrs reads)")
    parser.add_argument("--model", required=True, metavar="URI",
                        help="models:/NAME@ALIAS, runs:/RUN_ID/model, or a model folder")
    parser.add_argument("--budget", type=int, required=True, metavar="N", help="how many items to return")
    parser.add_argument("--labelled", metavar="FILE", type=Path, default=None,
                        help="labels so far (matched to the pool by sent_id; its other sentences may be relabelled)")
    parser.add_argument("--strategy", choices=STRATEGIES, default="combined", help="selection strategy (default: combined)")
    parser.add_argument("--unit", choices=UNITS, default="sentence", help="rank sentences or whole conversations")
    parser.add_argument("--heads", default=None, help="comma-separated heads to combine (default: all the model's)")
    parser.add_argument("--folds", type=int, default=5, help="cross-fitting folds for labelled items (default: 5)")
    parser.add_argument("--seed", type=int, default=0, help="seed (random strategy, ties, folds; default: 0)")
    add_input_format(parser)
    parser.add_argument("--out", metavar="FILE", type=Path, default=None, help="write the list: .csv or .parquet")
    add_tracking_uri(parser)
    parser.set_defaults(func=handler)


def handler(args: argparse.Namespace) -> int:
    # lazy: psyattrs --help imports every cli module
    from psyattrs.serving.curation import get_next_batch

    kind = output_kind(args.out) if args.out is not None else None
    if args.folds < 2:
        raise ValueError(f"--folds must be at least 2, got {args.folds}")
    ranked = get_next_batch(args.pool, args.model, budget=args.budget, labelled=args.labelled, strategy=args.strategy,
                            unit=args.unit, heads=split_heads(args.heads), folds=args.folds, seed=args.seed,
                            format=args.format, tracking_uri=args.tracking_uri)
    if args.out is not None:
        with atomic_output(args.out, make_parents=True) as tmp:
            _write(ranked, tmp, kind)
        print(f"wrote the {len(ranked)} {args.unit}s to label next ({args.strategy}) to {args.out}")
        return 0
    show = ranked.drop(columns=["strategy"])
    if "text" in show.columns:
        show["text"] = [t if len(t) <= 40 else t[:39] + "…" for t in show["text"]]
    with_floats = {c: "{:.3f}".format for c in show.columns if show[c].dtype.kind == "f"}
    print(f"next {len(ranked)} {args.unit}s to label ({args.strategy}):")
    sys.stdout.write(show.to_string(index=False, formatters=with_floats) + "\n")
    return 0
