"""`psyattrs data synth --out PATH`: writes the synthetic Korean OPELA-style corpus.

The corpus is simulated (`psyattrs.synth`): personas and users chatting over 15-80 turns, three
simulated labelers, final labels from the OPELA resolution, true values in `true_*`. `--format
annotated` (default) writes one row per sentence (docs/formats.md, "The OPELA annotated file");
`--format public` writes one row per conversation in the public-release layout (docs/formats.md,
"The OPELA public release") with its quirks, plus the true order of the labelled sentences beside it
(`PATH` with `.order.csv` in place of its extension). `--shape release` (the default with `--format
public`) shapes every conversation as the real release's are: the user opens, the persona closes,
exactly 2 x total_turn speaker runs, pauses close a persona message, replies answer the message
before them; `--shape free` (the default with `--format annotated`) lets either speaker open and
close. The same arguments always write the same bytes.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

FORMATS: tuple[str, ...] = ("annotated", "public")
SHAPES: tuple[str, ...] = ("free", "release")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds `data synth` to the `data` group."""
    parser = subparsers.add_parser(
        "synth",
        help="write the synthetic Korean OPELA-style corpus",
        description=__doc__.split("\n\n", 1)[1],
    )
    parser.add_argument("--out", metavar="PATH", type=Path, required=True, help="CSV file to write")
    parser.add_argument("--dialogues", metavar="N", type=int, default=300, help="number of conversations (default: 300)")
    parser.add_argument("--seed", metavar="S", type=int, default=0, help="random seed, >= 0 (default: 0)")
    parser.add_argument("--format", choices=FORMATS, default="annotated", help="output layout (default: annotated)")
    parser.add_argument("--shape", choices=SHAPES, default=None,
                        help="conversation shape: release (user opens, persona closes, 2 x total_turn runs) or free "
                             "(default: release with --format public, free with --format annotated)")
    parser.add_argument(
        "--rare-boost",
        metavar="X",
        type=float,
        default=1.0,
        help="multiply the rates of the rare classes (strange=0, uneasy=0, empathy=1) by X (default: 1.0)",
    )
    parser.set_defaults(func=handler)


def order_path(path: Path) -> Path:
    """Where `--format public` writes the true order: `corpus.csv` -> `corpus.order.csv`."""
    return path.with_name(path.stem + ".order.csv")


def handler(args: argparse.Namespace) -> int:
    """Simulates the corpus, writes it and prints what was written; returns 0."""
    # lazy: psyattrs --help imports every cli module
    from psyattrs.synth import synthesize, write_annotated, write_public

    if args.out.suffix.lower() != ".csv":
        raise ValueError(f"output file {str(args.out)!r} must end in .csv")
    if args.out.exists() and args.out.is_dir():
        raise ValueError(f"output path {str(args.out)!r} is a folder; give a file name ending in .csv")
    start = time.perf_counter()
    shape = args.shape or ("release" if args.format == "public" else "free")
    result = synthesize(args.dialogues, seed=args.seed, rare_boost=args.rare_boost, release_shape=shape == "release")
    table = result.utterances
    n_docs, n_sent, n_pause = table["doc_id"].nunique(), len(table), int(table["is_pause"].sum())
    if args.format == "annotated":
        write_annotated(table, args.out)
        print(
            f"wrote {n_docs} dialogues, {n_sent} sentences ({n_pause} pauses), annotated format, "
            f"seed {args.seed}, to {args.out} in {time.perf_counter() - start:.1f} s"
        )
    else:
        truth_path = order_path(args.out)
        truth = write_public(table, result.conversations, args.out, seed=args.seed, truth_path=truth_path)
        quirks = truth.conversations
        print(
            f"wrote {n_docs} dialogues, {n_sent} sentences ({n_pause} pauses), public format, {shape} shape, seed {args.seed}, "
            f"to {args.out} in {time.perf_counter() - start:.1f} s; "
            f"{int((quirks['extra_lines'] > 0).sum())} with multi-line messages, "
            f"{int((~quirks['pauses_counted']).sum())} with uncounted pauses; true order in {truth_path}"
        )
    return 0
