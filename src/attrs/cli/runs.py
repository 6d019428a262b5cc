"""`psyattrs runs [--experiment E] [--unfinished] [--close-abandoned]`: the runs of the store.

Lists the tracked runs, newest first, with how each ended: finished, failed (the error), killed
(the signal and the step it stopped), running, or never finished (still marked RUNNING but its
process is gone: killed with SIGKILL, out of memory, a crash). `--close-abandoned` marks the runs
that never finished as KILLED, with that note, so that they no longer look as if they ran.
"""

from __future__ import annotations

import argparse
import math

from psyattrs.cli._options import add_tracking_uri


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds the top-level `runs` command."""
    parser = subparsers.add_parser(
        "runs",
        help="list tracked runs and how they ended (finished, failed, killed, never finished)",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
    )
    parser.add_argument("--experiment", default=None, help="only this MLflow experiment")
    parser.add_argument("--unfinished", action="store_true", help="only runs that did not finish")
    parser.add_argument("--close-abandoned", action="store_true",
                        help="mark runs that never finished (process gone) as KILLED")
    parser.add_argument("--limit", type=int, default=50, help="most runs shown (default 50; 0 = all)")
    add_tracking_uri(parser)
    parser.set_defaults(func=handler, quick_exit=True)  # psyattrs.cli.console: no teardown


def handler(args: argparse.Namespace) -> int:
    # lazy: scikit-learn via experiments/; psyattrs --help imports every cli module
    from psyattrs.experiments.store import resolve_tracking_uri
    from psyattrs.experiments.tracking import close_abandoned, list_runs

    if args.close_abandoned:
        for run_id, note in close_abandoned(tracking_uri=args.tracking_uri, experiment=args.experiment):
            print(f"closed {run_id} as KILLED: {note}")
    runs = list_runs(tracking_uri=args.tracking_uri, experiment=args.experiment)
    if args.unfinished:
        runs = runs[runs["status"] != "FINISHED"]
    print(f"{len(runs)} run(s) in {resolve_tracking_uri(args.tracking_uri)}"
          + (f", experiment {args.experiment!r}" if args.experiment else ""))
    shown = runs if args.limit == 0 else runs.head(args.limit)
    for r in shown.itertuples():
        f1 = "" if math.isnan(r.test_macro_f1_mean) else f"  macro-F1 {r.test_macro_f1_mean:.3f}"
        took = "" if r.seconds is None or (isinstance(r.seconds, float) and math.isnan(r.seconds)) else f", {r.seconds:.0f}s"
        print(f"{r.run_id}  {r.start}{took}  {r.experiment}/{r.name} [{r.role or '-'}]  {r.status}{f1}")
        if r.end != "finished":
            print(f"    {r.end}")
    if len(runs) > len(shown):
        print(f"... and {len(runs) - len(shown)} more (--limit 0 shows all)")
    return 0
