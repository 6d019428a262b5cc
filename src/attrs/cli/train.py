"""`psyattrs train CONFIG [--set key=value ...] [--quiet] [--resume]`: train, score and track an experiment.

Prints, per run, the per-head table (the model beside the majority floor and one labeler scored
against the others, with a legend) and ends with the MLflow run id as the last line of standard
output (a sweep prints one id per line, in sweep order, the last run's id last). Progress goes to
standard error. Every run gets its HTML report as the artifact `report/report.html`
(`psyattrs.experiments.train`). Launched by `torchrun` (`torchrun --nproc_per_node N -m psyattrs
train CONFIG`), every process trains (data parallelism) and only rank 0 logs the one MLflow run
and prints the results; every rank prints the digest of its final weights to standard error
(`rank R of N: weights DIGEST`: the same on every rank).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from psyattrs.cli._options import add_set_option
from psyattrs.errors import Interrupted


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds the top-level `train` command."""
    parser = subparsers.add_parser(
        "train",
        help="train an experiment config and track it in MLflow",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
    )
    parser.add_argument(
        "config", metavar="CONFIG", type=Path,
        help="experiment YAML file, or a shipped one by name (demo, experiments/demo.yaml, ...), as load_config takes",
    )
    add_set_option(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    parser.add_argument(
        "--resume", action="store_true",
        help="transformer: continue an interrupted training from the last checkpoint in model.params.checkpoint_dir",
    )
    parser.set_defaults(func=handler)


def _world_size() -> int:
    import os

    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return 1


def _header(result) -> str:
    c = result.config
    split = f"{c.split.folds}-fold cross-validation" if c.split.folds else "test split"
    return (f"{c.run_name}: {c.model.kind}, lambda {c.targets.lam:g}, context {c.context.previous}, "
            f"by {c.split.by}, {split} (run {result.run_id})")


def handler(args: argparse.Namespace) -> int:
    # lazy: scikit-learn via experiments/; psyattrs --help imports every cli module
    from psyattrs.experiments.config import expand_sweep, load_config
    from psyattrs.experiments.metrics import format_table
    from psyattrs.experiments.runner import resolved_message, train  # logs the run report too

    overrides = [*args.overrides, *(["model.params.resume=true"] if args.resume else [])]
    config = load_config(args.config, overrides)
    # lazy: scikit-learn via experiments/; psyattrs --help imports every cli module
    from psyattrs.experiments.tracking import launch_rank

    # lazy: scikit-learn via experiments/; psyattrs --help imports every cli module
    from psyattrs.experiments.stopping import finish_once_logged

    rank = launch_rank()
    results = []
    for member in expand_sweep(config):
        with finish_once_logged() as late:  # a stop signal once the model is logged: finish, then stop
            try:
                result = train(member, quiet=args.quiet or rank != 0)
            except KeyboardInterrupt as exc:
                if late.run_id and rank == 0:  # the run id is never lost once its model is logged
                    print(late.run_id, flush=True)
                    exc.note = f"run {late.run_id} has its model logged; it stopped before its run report was logged"
                raise
        results.append(result)
        world = _world_size()
        if world > 1 and hasattr(result.model, "weights_digest"):  # the ranks must agree: say so
            print(f"psyattrs train: rank {rank} of {world}: weights {result.model.weights_digest()}",
                  file=sys.stderr, flush=True)
        if rank != 0:  # torchrun: one launch, one run, one printout (rank 0's)
            continue
        print(_header(result))
        if result.resolved_heads:
            print(resolved_message(result.resolved_heads, result.config.targets.resolve))
        print(format_table(result.summary))
        print()
        if late.signum is not None:
            break
    if rank != 0:
        print(f"psyattrs train: rank {rank} of the torchrun launch trained with the others; rank 0 logs the run "
              "and prints its results", file=sys.stderr)
        return 0
    last = results[-1]
    print(f"tracking store {last.tracking_uri}, experiment {last.config.tracking.experiment!r}")
    for result in results:
        print(result.run_id, flush=True)
    if late.signum is not None:  # deferred until the run and its report were logged
        stopped = Interrupted(late.signum)
        stopped.note = f"run {last.run_id} finished, its model and report logged, before stopping"  # type: ignore[attr-defined]
        raise stopped
    return 0
