"""`psyattrs serve --model URI [--port P]`: a REST endpoint for a model, on 127.0.0.1.

Runs `mlflow models serve --env-manager local -h 127.0.0.1` in this environment, with the
project's tracking store (or `--tracking-uri`) as MLFLOW_TRACKING_URI, until Ctrl-C. POST
`/invocations` with `dataframe_records`, `dataframe_split` or `inputs` rows of the utterance table
(`doc_id`, `text`, optional `position`, `person_type`, `is_pause`, ...); GET `/ping` checks it is up.
See `psyattrs.serving.serve` for the request and answer shapes.
"""

from __future__ import annotations

import argparse

from psyattrs.cli._options import add_tracking_uri


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds the top-level `serve` command."""
    from psyattrs.serving.serve import DEFAULT_PORT

    parser = subparsers.add_parser(
        "serve",
        help="serve a registered or logged model over HTTP (mlflow models serve) on 127.0.0.1",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
    )
    parser.add_argument("--model", required=True, metavar="URI",
                        help="models:/NAME@ALIAS, runs:/RUN_ID/model, or an MLflow model folder")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT})")
    parser.add_argument("--workers", type=int, default=1, help="server worker processes (default 1)")
    add_tracking_uri(parser)
    parser.set_defaults(func=handler)


def handler(args: argparse.Namespace) -> int:
    from psyattrs.serving.serve import HOST, check_model_uri, serve

    check_model_uri(args.model, tracking_uri=args.tracking_uri)
    print(f"serving {args.model} at http://{HOST}:{args.port}/invocations (Ctrl-C stops it)", flush=True)
    return serve(args.model, port=args.port, tracking_uri=args.tracking_uri, workers=args.workers)
