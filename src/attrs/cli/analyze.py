"""`psyattrs analyze PATH [--outcomes FILE] [--out DIR]`: conversation attribute profiles against survey outcomes.

PATH is the OPELA public release (labels and survey in one file, whole-conversation profiles),
an annotated or aligned sentence table (per-speaker profiles; survey from `--outcomes`), or
predicted attributes (`psyattrs annotate` output, `psyattrs predict --out` file; survey from
`--outcomes`). Prints, per outcome, the conversations used, the cross-validated R² of a ridge
regression on the standardised profile against a mean-only baseline, the gain with its bootstrap
interval and the largest standardised effect; `--out` writes profiles.csv, effects.csv, fits.csv,
summary.txt and one plot per outcome.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds the top-level `analyze` command."""
    parser = subparsers.add_parser(
        "analyze",
        help="relate conversations' utterance-attribute profiles to their survey outcomes",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
    )
    parser.add_argument("path", metavar="PATH", type=Path, help="public release, annotated table or predictions")
    parser.add_argument("--outcomes", metavar="FILE", type=Path, default=None,
                        help="table with doc_id and survey columns (friend_persona, ..., blri_user)")
    parser.add_argument("--out", metavar="DIR", type=Path, default=None, help="folder for tables and plots")
    parser.add_argument("--folds", type=int, default=5, help="cross-validation folds (default 5)")
    parser.add_argument("--repeats", type=int, default=20, help="cross-validation repeats (default 20)")
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples (default 1000)")
    parser.add_argument("--alpha", type=float, default=1.0, help="ridge penalty on standardised features (default 1)")
    parser.add_argument("--seed", type=int, default=0, help="seed of folds and resamples (default 0)")
    parser.set_defaults(func=handler)


def handler(args: argparse.Namespace) -> int:
    # lazy: scikit-learn via experiments/; psyattrs --help imports every cli module
    from psyattrs.reports.analyze import load_analysis_input, relate, write_analysis

    data = load_analysis_input(args.path, outcomes=args.outcomes)
    result = relate(data.profiles, data.outcomes, folds=args.folds, repeats=args.repeats,
                    bootstrap=args.bootstrap, alpha=args.alpha, seed=args.seed)
    result.settings["input"] = data.describe()
    print(data.describe())
    if result.dropped_features:
        print(f"constant features left out: {', '.join(result.dropped_features)}")
    print(result.format())
    beats = int(result.fits["beats_baseline"].sum())
    print(f"{beats} of {len(result.fits)} outcomes beat the mean-only baseline "
          f"(bootstrap {100 * result.settings['level']:.0f}% interval of the CV R² gain above 0)")
    if args.out is not None:
        write_analysis(result, args.out)
        print(f"wrote {args.out}/profiles.csv, effects.csv, fits.csv, summary.txt, plots/")
    return 0
