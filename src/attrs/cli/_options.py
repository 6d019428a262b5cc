"""Options shared by several commands."""

import argparse


def add_tracking_uri(parser: argparse.ArgumentParser) -> None:
    """`--tracking-uri`: the MLflow store a command reads or writes."""
    parser.add_argument("--tracking-uri", default=None, help="MLflow store (default: MLFLOW_TRACKING_URI or <repo>/mlflow)")
