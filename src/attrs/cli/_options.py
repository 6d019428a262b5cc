"""Options shared by several commands: each is defined here once (name, default, help)."""

import argparse
from typing import Any, Iterable


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


def add_schema(parser: argparse.ArgumentParser) -> None:
    """`--schema`: the label schema an input file is read with (None: OPELA)."""
    parser.add_argument("--schema", default=None, help="label schema: 'opela' (default) or a YAML file")


def add_input_format(parser: argparse.ArgumentParser, *, formats: Iterable[str] | None = None,
                     choices: Iterable[str] | None = None, note: str = "") -> None:
    """`--format`: force the format of the input file instead of detecting it (None: detect).

    Args:
        parser: the command's parser.
        formats: the formats to name in the help (free text: the reader says what it knows).
        choices: the only formats the command takes (argparse rejects others).
        note: a clause appended to the help (what a format also changes).
    """
    listed = f" (one of {', '.join(formats)})" if formats is not None and choices is None else ""
    parser.add_argument("--format", default=None, choices=tuple(choices) if choices is not None else None,
                        help=f"force the input format{listed} instead of detecting it{note}")
