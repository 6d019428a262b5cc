"""The `psyattrs` command: thin argument parsing over the library functions.

Each command lives in its own module here with a `register(subparsers)` that adds its parser and
sets `func`; `main` turns bad input into one message on standard error and exit code 2, never a
traceback.
"""

from __future__ import annotations

import argparse
import atexit
import os
import sys
import threading
import warnings
from typing import NoReturn, Sequence

from psyattrs._version import __version__
from psyattrs.errors import InputFileError, OutputFileError, PsyattrsWarning
from psyattrs.cli import data_align, data_validate, data_stats, data_synth, labels_next, labels_quality, labels_resolve
from psyattrs.cli import evaluate as evaluate_cmd, train as train_cmd
from psyattrs.cli import annotate as annotate_cmd, predict as predict_cmd, register as register_cmd, serve as serve_cmd
from psyattrs.cli import analyze as analyze_cmd, report as report_cmd, runs as runs_cmd

EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's own errors: exit 2 with usage, as usual
        self.print_usage(sys.stderr)
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="psyattrs", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"psyattrs {__version__}")
    groups = parser.add_subparsers(dest="group", required=True, parser_class=_Parser)

    data = groups.add_parser("data", help="read, validate, synthesize and describe corpora")
    data_cmds = data.add_subparsers(dest="command", required=True, parser_class=_Parser)
    data_validate.register(data_cmds)
    data_stats.register(data_cmds)
    data_synth.register(data_cmds)
    data_align.register(data_cmds)

    labels = groups.add_parser("labels", help="resolve final labels, score label quality, choose what to label next")
    labels_cmds = labels.add_subparsers(dest="command", required=True, parser_class=_Parser)
    labels_resolve.register(labels_cmds)
    labels_quality.register(labels_cmds)
    labels_next.register(labels_cmds)

    train_cmd.register(groups)
    evaluate_cmd.register(groups)
    predict_cmd.register(groups)
    register_cmd.register(groups)
    serve_cmd.register(groups)
    annotate_cmd.register(groups)
    report_cmd.register(groups)
    analyze_cmd.register(groups)
    runs_cmd.register(groups)
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None, _default=warnings.showwarning):
    """The project's own warnings as one line `psyattrs: warning: ...`; others as Python shows them."""
    if issubclass(category, PsyattrsWarning):
        print(f"psyattrs: warning: {message}", file=sys.stderr)
    else:
        _default(message, category, filename, lineno, file, line)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit code (0 ok, 1 failed check, 2 bad input or an output
    that cannot be written, 128 + N stopped by signal N)."""
    return _run(argv)[0]


def console() -> NoReturn:
    """The `psyattrs` program (its console script and `python -m psyattrs`): `main`, then the exit.

    A command whose parser sets `quick_exit` (`predict`, `runs`: they write nothing to a store and
    close their output files before they return) ends the process without tearing the interpreter
    down: standard output and error flushed, the other threads joined and the `atexit` handlers
    run as at any exit (temporary folders removed, logging flushed), then `os._exit`. Freeing the
    modules MLflow, scikit-learn and pandas load took about a second of a one-sentence `predict`
    (issue 25), which the operating system does at no cost when the process ends.
    """
    code, quick = _run(None)
    if quick:
        _exit_now(code)
    sys.exit(code)


def _exit_now(code: int) -> NoReturn:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more reaches it anyway
            pass
    join = getattr(threading, "_shutdown", None)  # what the interpreter's own exit does first
    if join is not None:
        join()
    atexit._run_exitfuncs()
    os._exit(code)


def _run(argv: Sequence[str] | None) -> tuple[int, bool]:
    """(exit code, whether the process may end without tearing the interpreter down)."""
    warnings.showwarning = _show_warning
    parser = build_parser()
    args = parser.parse_args(argv)
    return _call(args), bool(getattr(args, "quick_exit", False))


def _call(args: argparse.Namespace) -> int:
    try:
        code = args.func(args)
    except (InputFileError, OutputFileError) as exc:
        print(f"psyattrs: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt as exc:  # Ctrl-C, or a stop signal during a run (psyattrs.errors.Interrupted)
        name = getattr(exc, "signal_name", "SIGINT")
        note = getattr(exc, "note", None)  # what became of a run whose model was logged (cli.train)
        print(f"psyattrs: interrupted by {name}" + (f"; {note}" if note else ""), file=sys.stderr)
        return 128 + getattr(exc, "signum", 2)
    except OSError as exc:  # a file the command could not read or write: one line, never a traceback
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"psyattrs: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (ValueError, KeyError, TypeError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"psyattrs: error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return int(code or 0)


if __name__ == "__main__":  # pragma: no cover
    console()
