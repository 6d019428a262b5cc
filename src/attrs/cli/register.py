"""`psyattrs register RUN_ID --name NAME [--alias champion]`: put a run's model in the registry.

Registers the run's pyfunc model (`runs:/RUN_ID/model`, logged by `psyattrs train`) as a new
version of NAME and points the alias at it (`--alias` repeatable; `--no-alias` for none). Prints
the version and, as the last line, the URI to use: `models:/NAME@ALIAS`.

`psyattrs register --name NAME --version N --alias ALIAS` (no RUN_ID) moves an alias to an existing
version instead (promotion or rollback).
"""

from __future__ import annotations

import argparse

from psyattrs.cli._options import add_tracking_uri


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds the top-level `register` command."""
    parser = subparsers.add_parser(
        "register",
        help="register a trained run's model in the MLflow Model Registry and set an alias",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
    )
    parser.add_argument("run", nargs="?", default=None, metavar="RUN_ID",
                        help="the run id printed by psyattrs train (or runs:/RUN_ID/model)")
    parser.add_argument("--name", required=True, help="registered model name, e.g. psyattrs-demo")
    parser.add_argument("--alias", action="append", default=None,
                        help="alias to point at the new version (default: champion); repeatable")
    parser.add_argument("--no-alias", action="store_true", help="register without setting an alias")
    parser.add_argument("--version", type=int, default=None,
                        help="without RUN_ID: the existing version to point --alias at")
    parser.add_argument("--owner", default=None,
                        help="tag the new version as registered by OWNER and never move an alias that points "
                             "at a version OWNER did not register (make demo uses make-demo)")
    add_tracking_uri(parser)
    parser.set_defaults(func=handler)


def handler(args: argparse.Namespace) -> int:
    # lazy: psyattrs --help imports every cli module
    from psyattrs.serving.registry import DEFAULT_ALIAS, register as register_run, set_alias

    if args.no_alias and args.alias:
        raise ValueError("--no-alias and --alias contradict each other")
    if args.run is None:
        if args.version is None or not args.alias or len(args.alias) != 1:
            raise ValueError("give a RUN_ID to register, or --version N with one --alias to move an alias")
        reg = set_alias(args.name, args.alias[0], args.version, tracking_uri=args.tracking_uri)
        print(f"alias {args.alias[0]!r} of {reg.name!r} -> version {reg.version} (run {reg.run_id or 'unknown'})")
        print(reg.uri)
        return 0
    if args.version is not None:
        raise ValueError("--version is for moving an alias without RUN_ID; registering creates a new version")
    aliases = None if args.no_alias else (args.alias or [DEFAULT_ALIAS])
    reg = register_run(args.run, args.name, alias=aliases, tracking_uri=args.tracking_uri, owner=args.owner)
    pointed = f"; alias {', '.join(repr(a) for a in reg.aliases)} -> version {reg.version}" if reg.aliases else ""
    print(f"registered {reg.source} as {reg.name!r} version {reg.version} in {reg.tracking_uri}{pointed}")
    print(reg.uri)
    return 0
