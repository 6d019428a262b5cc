"""`psyattrs serve --model URI [--port P]`: a REST endpoint for a model, on 127.0.0.1.

Checks the port, the model URI and that the port is free before it prints anything, loads the model,
prints `serving URL`, and answers until SIGINT (Ctrl-C), SIGTERM or SIGHUP, each of which stops
it and its workers. POST `/invocations` with `{"inputs": ["sentence", ...]}`, `dataframe_records`
or `dataframe_split` rows of the utterance table (`text`, optional `doc_id`, `position`,
`person_type`, `is_pause`, ...); GET `/ping` checks it is up. See `psyattrs.serving.serve` for
the request and answer shapes.
"""

from __future__ import annotations

import argparse

from psyattrs.cli._options import add_tracking_uri
from psyattrs.serving.serve import DEFAULT_MAX_BODY_MB, DEFAULT_PORT, serve


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds the top-level `serve` command."""
    parser = subparsers.add_parser(
        "serve",
        help="serve a registered or logged model over HTTP on 127.0.0.1",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
    )
    parser.add_argument("--model", required=True, metavar="URI",
                        help="models:/NAME@ALIAS, runs:/RUN_ID/model, or an MLflow model folder")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT})")
    parser.add_argument("--workers", type=int, default=1, help="server worker processes (default 1)")
    parser.add_argument("--timeout", type=float, default=60, metavar="SECONDS",
                        help="how long a request may wait for its turn before a 503 (default 60)")
    parser.add_argument("--max-body-mb", type=float, default=DEFAULT_MAX_BODY_MB, metavar="MIB",
                        help=f"largest request body; a larger one gets 413 (default {DEFAULT_MAX_BODY_MB:g})")
    add_tracking_uri(parser)
    parser.set_defaults(func=handler)


def handler(args: argparse.Namespace) -> int:
    def announce(url: str) -> None:
        print(f"serving {args.model} at {url} (Ctrl-C stops it)", flush=True)

    def loading() -> None:
        print(f"loading the model {args.model}…", flush=True)

    return serve(args.model, port=args.port, tracking_uri=args.tracking_uri, workers=args.workers,
                 timeout=args.timeout, max_body_mb=args.max_body_mb, announce=announce, loading=loading)
