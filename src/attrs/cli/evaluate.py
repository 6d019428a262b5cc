"""`psyattrs evaluate --run RUN_ID [--data PATH]`: re-score a trained run with its logged model.

Without `--data` the run's own test split is rebuilt from its logged config and scored again,
after checking that its data files are the ones the run read (SHA-256 logged at training time):
a changed file is refused, or with `--allow-changed-data` scored under a loud warning. With
`--data` every sentence of that corpus is scored. Prints the per-head table (model, floor, one
labeler against the others); `--json OUT` also writes every metric.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from pathlib import Path

from psyattrs.cli._options import add_tracking_uri
from psyattrs.data.output import write_text_atomic


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds the top-level `evaluate` command."""
    parser = subparsers.add_parser(
        "evaluate",
        help="re-score a trained MLflow run (its test split, or another corpus)",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
    )
    parser.add_argument("--run", dest="run_id", metavar="RUN_ID", required=True, help="MLflow run id from psyattrs train")
    parser.add_argument("--data", metavar="PATH", type=Path, default=None, help="corpus to score instead of the test split")
    parser.add_argument("--allow-changed-data", action="store_true",
                        help="without --data: score the run's data files even if they changed since training (warns)")
    add_tracking_uri(parser)
    parser.add_argument("--json", metavar="OUT", type=Path, default=None, help="also write every metric as JSON")
    parser.set_defaults(func=handler)


def _warn_overlap(metrics: dict[str, float], data: Path) -> None:
    """Says on standard error when the scored conversations include the run's own training data."""
    total = int(metrics.get("n_eval_conversations", 0))
    train, valid = metrics.get("n_eval_conversations_in_training"), metrics.get("n_eval_conversations_in_validation")
    if train is None or math.isnan(train):
        print(f"psyattrs: note: the run did not record its training conversations; cannot tell whether {data} "
              "overlaps them", file=sys.stderr)
    elif train or valid:
        print(f"psyattrs: warning: {int(train)} of the {total} conversations in {data} were in the run's training "
              f"split and {int(valid)} in its validation split: the model was fitted or tuned on them, so their "
              "scores are not a test", file=sys.stderr)


def handler(args: argparse.Namespace) -> int:
    # lazy: scikit-learn via experiments/; psyattrs --help imports every cli module
    from psyattrs.experiments.metrics import format_table, summary_table
    from psyattrs.experiments.dataset import run_schema
    from psyattrs.experiments.runner import evaluate
    from psyattrs.experiments.provenance import ChangedDataWarning, load_run_config

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ChangedDataWarning)
        metrics = evaluate(args.run_id, args.data, tracking_uri=args.tracking_uri,
                           allow_changed_data=args.allow_changed_data)
    for w in caught:
        if issubclass(w.category, ChangedDataWarning):
            print(f"WARNING: {w.message}", file=sys.stderr)
        else:  # every other warning reaches the user as it would have without the recording
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    config, extras = load_run_config(args.run_id, tracking_uri=args.tracking_uri)
    prefix = "test_" if args.data is None else "eval_"
    what = "its test split" if args.data is None else str(args.data)
    print(f"run {args.run_id} ({config.run_name}, {config.model.kind}) on {what}")
    if args.data is not None:
        _warn_overlap(metrics, args.data)
    print(format_table(summary_table(metrics, run_schema(args.run_id, config, extras), prefix=prefix)))
    if args.json is not None:
        clean = {k: (None if math.isnan(v) else v) for k, v in metrics.items()}
        write_text_atomic(args.json, json.dumps(clean, indent=2), make_parents=True)
    return 0
