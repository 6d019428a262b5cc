"""`psyattrs train CONFIG [--set key=value ...] [--quiet] [--resume]`: train, score and track an experiment.

Prints, per run, the per-head table (the model beside the majority floor and the human ceiling)
and ends with the MLflow run id as the last line of standard output (a sweep prints one id per
line, in sweep order, the last run's id last). Progress goes to standard error.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds the top-level `train` command."""
    parser = subparsers.add_parser(
        "train",
        help="train an experiment config and track it in MLflow",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
    )
    parser.add_argument(
        "config", metavar="CONFIG", type=Path,
        help="experiment YAML file, or the name of a shipped one (demo, majority, baseline_tfidf, ...)",
    )
    parser.add_argument(
        "--set", dest="overrides", metavar="KEY=VALUE", action="append", default=[],
        help="override a config key (dotted, YAML value), e.g. --set targets.lambda=0.5; repeatable",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    parser.add_argument(
        "--resume", action="store_true",
        help="transformer: continue an interrupted training from the last checkpoint in model.params.checkpoint_dir",
    )
    parser.set_defaults(func=handler)


def _header(result) -> str:
    c = result.config
    split = f"{c.split.folds}-fold cross-validation" if c.split.folds else "test split"
    return (f"{c.run_name}: {c.model.kind}, lambda {c.targets.lam:g}, context {c.context.previous}, "
            f"by {c.split.by}, {split} (run {result.run_id})")


def resolve_config_path(config: Path) -> Path:
    """`config` itself when it exists, else the shipped `experiments/<config>.yaml` of the checkout
    when that exists (so `psyattrs train demo` works), else `config` (load_config names it)."""
    if config.exists() or config.suffix:
        return config
    from psyattrs.experiments.tracking import repo_root

    root = repo_root()
    shipped = root / "experiments" / f"{config.name}.yaml" if root is not None else None
    return shipped if shipped is not None and shipped.is_file() else config


def handler(args: argparse.Namespace) -> int:
    from psyattrs.experiments.config import expand_sweep, load_config
    from psyattrs.experiments.metrics import format_table
    from psyattrs.experiments.runner import train

    overrides = [*args.overrides, *(["model.params.resume=true"] if args.resume else [])]
    config = load_config(resolve_config_path(args.config), overrides)
    results = []
    for member in expand_sweep(config):
        result = train(member, quiet=args.quiet)
        results.append(result)
        print(_header(result))
        print(format_table(result.summary))
        print()
    last = results[-1]
    print(f"tracking store {last.tracking_uri}, experiment {last.config.tracking.experiment!r}")
    for result in results:
        print(result.run_id)
    return 0
