"""Options shared by several commands."""

import argparse
from typing import Any


def add_tracking_uri(parser: argparse.ArgumentParser) -> None:
    """`--tracking-uri`: the MLflow store a command reads or writes."""
    parser.add_argument("--tracking-uri", default=None, help="MLflow store (default: MLFLOW_TRACKING_URI or <repo>/mlflow)")


class SetOverride(argparse.Action):
    """`--set KEY=VALUE` (repeatable): refuses a value without '=' in one line, exit 2, before argparse
    would report the value after a space as an "unrecognized argument"."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        text = str(values)
        if "=" not in text:
            key = text if len(text) <= 60 else text[:57] + "..."
            parser.exit(2, f"{parser.prog}: error: --set {key}: not key=value; write the key, '=' and the value "
                           f"as one argument (--set {key}=VALUE)\n")
        items = list(getattr(namespace, self.dest, None) or [])
        items.append(text)
        setattr(namespace, self.dest, items)


def add_set_option(parser: argparse.ArgumentParser) -> None:
    """`--set KEY=VALUE`: a config override (dotted key, YAML value), repeatable."""
    parser.add_argument(
        "--set", dest="overrides", metavar="KEY=VALUE", action=SetOverride, default=[],
        help="override a config key (dotted, YAML value), e.g. --set targets.lambda=0.5; repeatable",
    )
