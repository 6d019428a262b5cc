"""`psyattrs report --run RUN_ID [--out report.html]`: the run report as one HTML page.

Writes the self-contained page (tables and embedded plots: per-head metrics with the floor and
one labeler against the others' majority, confusion matrices, calibration, learning curves where there are epochs, the config) and
logs it as the run's artifact `report/report.html`, so it opens from the MLflow UI. Training logs
it automatically; this command rebuilds it (e.g. for a run trained before reports existed).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from psyattrs.cli._options import add_tracking_uri


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds the top-level `report` command."""
    parser = subparsers.add_parser(
        "report",
        help="write a run's HTML report and log it as a run artifact",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
    )
    parser.add_argument("--run", dest="run_id", metavar="RUN_ID", required=True, help="MLflow run id from psyattrs train")
    parser.add_argument("--out", metavar="PATH", type=Path, default=Path("report.html"),
                        help="the HTML file to write (default: report.html)")
    add_tracking_uri(parser)
    parser.set_defaults(func=handler)


def handler(args: argparse.Namespace) -> int:
    # lazy: scikit-learn via experiments/; psyattrs --help imports every cli module
    from psyattrs.experiments.report import REPORT_ARTIFACT, log_run_report
    from psyattrs.experiments.tracking import run_ending

    path = log_run_report(args.run_id, tracking_uri=args.tracking_uri, out=args.out)
    print(f"wrote {path} and logged it as artifact {REPORT_ARTIFACT} of run {args.run_id}")
    end = run_ending(args.run_id, tracking_uri=args.tracking_uri)
    if end != "finished":  # the words of `psyattrs runs`: a report of a run that did not finish says so
        print(f"run {args.run_id}: {end}")
    return 0
