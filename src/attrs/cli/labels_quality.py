"""`psyattrs labels quality CORPUS --model URI [--out FILE]`: which labels are likely wrong, and how good each labeler is.

Per item and head a consensus label and its quality score (cleanlab's CROWDLAB: the labelers'
votes weighed against the model's cross-fitted prediction; the model's recipe is refit per fold of
whole conversations on CORPUS, so it never scores an item it trained on), the items most likely
mislabelled first; per labeler a quality score, per head and over all heads. Prints a summary;
`--out` writes the item table (.csv or .parquet) and the labeler table next to it
(`NAME.labelers.csv`, or `--labelers-out`). Under an MLflow run (MLFLOW_RUN_ID set) the tables
and the summary are logged to it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from psyattrs.cli._options import add_input_format, add_tracking_uri
from psyattrs.cli.labels_resolve import output_kind
from psyattrs.data.output import atomic_output

TOP = 10


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds `labels quality` to the `labels` group."""
    parser = subparsers.add_parser(
        "quality",
        help="consensus quality of each labelled item and quality of each labeler (CROWDLAB, cross-fitted)",
        description=__doc__.split("\n\n", 1)[1],
    )
    parser.add_argument("corpus", metavar="CORPUS", type=Path, help="labelled corpus (any format psyattrs reads)")
    parser.add_argument("--model", required=True, metavar="URI",
                        help="models:/NAME@ALIAS, runs:/RUN_ID/model, or a model folder (its recipe is refit per fold)")
    parser.add_argument("--out", metavar="FILE", type=Path, default=None, help="item table: .csv or .parquet")
    parser.add_argument("--labelers-out", metavar="FILE", type=Path, default=None,
                        help="labeler table (.csv or .parquet; default: next to --out as NAME.labelers.csv)")
    parser.add_argument("--heads", default=None, help="comma-separated heads to score (default: all the model's)")
    parser.add_argument("--folds", type=int, default=5, help="cross-fitting folds of whole conversations (default: 5)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the folds (default: 0)")
    add_input_format(parser)
    parser.add_argument("--top", type=int, default=TOP, help=f"items shown in the summary (default: {TOP})")
    add_tracking_uri(parser)
    parser.set_defaults(func=handler)


def split_heads(text: str | None) -> list[str] | None:
    """`a,b` -> ['a', 'b']; None stays None (every head)."""
    if text is None:
        return None
    heads = [h.strip() for h in text.split(",") if h.strip()]
    if not heads:
        raise ValueError("--heads names no head")
    return heads


def labelers_path(out: Path) -> Path:
    """`items.csv` -> `items.labelers.csv` (CSV whatever OUT is)."""
    return out.with_name(f"{out.stem}.labelers.csv")


def handler(args: argparse.Namespace) -> int:
    # lazy: psyattrs --help imports every cli module
    from psyattrs.serving.curation import get_label_quality, log_label_quality

    if args.folds < 2:
        raise ValueError(f"--folds must be at least 2, got {args.folds}")
    kind = output_kind(args.out) if args.out is not None else None
    labelers_out = args.labelers_out or (labelers_path(args.out) if args.out is not None else None)
    labelers_kind = output_kind(labelers_out) if labelers_out is not None else None
    if labelers_out is not None and args.out is not None and labelers_out.resolve() == args.out.resolve():
        raise ValueError(f"--labelers-out {labelers_out} is the same file as --out")

    def on_fold(f: int, n: int) -> None:
        print(f"cross-fitting: fold {f}/{n}", file=sys.stderr, flush=True)

    result = get_label_quality(args.corpus, args.model, heads=split_heads(args.heads), folds=args.folds,
                               seed=args.seed, format=args.format, tracking_uri=args.tracking_uri, on_fold=on_fold)
    for note in result.notes:
        print(f"psyattrs: note: {note}", file=sys.stderr)
    print_summary(result, top=args.top)
    if args.out is not None:
        with atomic_output(args.out, make_parents=True) as tmp_items, \
                atomic_output(labelers_out, make_parents=True) as tmp_labelers:
            _write(result.items, tmp_items, kind)
            _write(result.labelers, tmp_labelers, labelers_kind)
        print(f"wrote {args.out} ({len(result.items)} rows) and {labelers_out} ({len(result.labelers)} rows)")
    run_id = log_label_quality(result, tracking_uri=args.tracking_uri)
    if run_id:
        print(f"logged to MLflow run {run_id}")
    return 0


def _write(table, path: Path, kind: str) -> None:
    if kind == "parquet":
        table.to_parquet(path, index=False)
    else:
        table.to_csv(path, index=False, encoding="utf-8")


def print_summary(result, *, top: int) -> None:
    """Per head: items, mean quality, share below 0.5; the `top` worst items; labelers overall."""
    items, labelers = result.items, result.labelers
    print(f"label quality of {items['sent_id'].nunique()} items, heads {result.heads} "
          f"({result.kind} refit on {result.folds} folds; targets lambda {result.lam:g})")
    print(f"{'head':<10} {'items':>7} {'mean quality':>13} {'below 0.5':>10}")
    for head in result.heads:
        q = items.loc[items["head"] == head, "consensus_quality"]
        print(f"{head:<10} {len(q):>7} {q.mean():>13.3f} {100 * (q < 0.5).mean():>9.1f}%")
    print(f"\nmost likely mislabelled (first {min(top, len(items))}):")
    for row in items.head(top).itertuples():
        text = row.text if len(row.text) <= 40 else row.text[:39] + "…"
        print(f"  {row.consensus_quality:.3f}  {row.head:<8} {row.sent_id}  consensus {row.consensus_label}, "
              f"model {row.model_label}  {text}")
    overall = labelers[labelers["head"] == "(all)"]
    print("\nlabelers (all heads):")
    for row in overall.itertuples():
        print(f"  {row.labeler:<12} quality {row.quality:.3f}  agreement {row.agreement_with_consensus:.3f}  "
              f"labels {row.n_labelled}")
