"""`psyattrs data synth` (being written)."""

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds the command's parser; filled in with the command."""
