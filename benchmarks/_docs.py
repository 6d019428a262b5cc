"""Writes a benchmark's printed tables to its page of the documentation site, `docs/benchmarks/NAME.md`.

A benchmark adds the option with `add_docs_option(parser)` and runs its body inside
`docs_page(NAME, TITLE, write=wants_docs(args, partial=...))`: everything the body prints still goes
to the terminal, and, when the page is wanted and the body ends without an error, the page is
replaced by one holding the command, the date, the machine (CPU, cores, load before and after) and
the printed output as it was printed. Nothing is retyped: the page is what the run printed.
`--write-docs` forces the page, `--no-write-docs` suppresses it; by default a full run writes it and
a quick or partial one (the script says which) does not. `--page NAME` writes `docs/benchmarks/NAME.md`
instead of the benchmark's own page, for a run of record of one part that must not replace the page
of the whole (its title says the name).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import io
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Iterator, TextIO

ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT / "docs" / "benchmarks"
# environment variables that change a benchmark's figures; the page names those that were set
ENV_SETTINGS: tuple[str, ...] = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "MKL_NUM_THREADS", "HF_HUB_OFFLINE", "CUDA_VISIBLE_DEVICES")


def add_docs_option(parser: argparse.ArgumentParser) -> None:
    """Adds `--write-docs` / `--no-write-docs` (default: decided by `wants_docs`) and `--page NAME`."""
    parser.add_argument(
        "--write-docs",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="write the printed tables to docs/benchmarks/ (default: on for a full run, off for a quick or partial one)",
    )
    parser.add_argument(
        "--page",
        default=None,
        metavar="NAME",
        type=_page_name,
        help="the page a written run replaces: docs/benchmarks/NAME.md (default: the benchmark's own)",
    )


def _page_name(text: str) -> str:
    """A page name: letters, digits, '-' and '_' (it becomes a file name under docs/benchmarks)."""
    if not text or not all(c.isascii() and (c.isalnum() or c in "-_") for c in text):
        raise argparse.ArgumentTypeError(f"a page name is letters, digits, '-' and '_', not {text!r}")
    return text


def wants_docs(args: argparse.Namespace, *, partial: bool) -> bool:
    """Whether to write the page: the user's `--write-docs`/`--no-write-docs`, else `not partial`."""
    return (not partial) if args.write_docs is None else bool(args.write_docs)


def changed(parser: argparse.ArgumentParser, args: argparse.Namespace, *names: str) -> bool:
    """Whether any of the options `names` (dest names) differs from its default: a partial run."""
    return any(getattr(args, n) != parser.get_default(n) for n in names)


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else what `platform` says."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def load_average() -> str:
    """The 1, 5 and 15-minute load averages, or 'n/a' where the system has none."""
    try:
        return " / ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "n/a"


def git_commit() -> str:
    """The checkout's commit (short hash, '+ changes' when the tree differs), or 'unknown'."""
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if head.returncode != 0:
        return "unknown"
    return head.stdout.strip() + (" + uncommitted changes" if dirty.stdout.strip() else "")


def command_line(argv: list[str] | None = None) -> str:
    """The command as it was run, the script named relative to the repository root."""
    argv = list(sys.argv if argv is None else argv)
    script = Path(argv[0]).resolve()
    try:
        argv[0] = str(script.relative_to(ROOT))
    except ValueError:
        argv[0] = script.name
    return "python " + shlex.join(argv)


def render(title: str, intro: str, command: str, started: dt.datetime, load_before: str, output: str) -> str:
    """The page's markdown: title, what the benchmark measures, how and where it ran, the output."""
    settings = ", ".join(f"`{k}={os.environ[k]}`" for k in ENV_SETTINGS if k in os.environ) or "none of " + ", ".join(ENV_SETTINGS)
    machine = f"{cpu_model()}, {os.cpu_count()} cores, load average {load_before} before and {load_average()} after"
    lines = [
        f"# {title}",
        "",
        "*Written by the benchmark script itself; rerun the command to replace this page.*",
        "",
    ]
    if intro:
        lines += [intro.strip(), ""]
    lines += [
        f"- command: `{command}`",
        f"- date: {started:%Y-%m-%d %H:%M} UTC",
        f"- commit: {git_commit()}",
        f"- machine: {machine}",
        f"- Python {platform.python_version()} on {platform.system()} {platform.release()}",
        f"- settings: {settings}",
        "",
        "```text",
        output.rstrip("\n"),
        "```",
        "",
    ]
    return "\n".join(lines)


class _Tee(io.TextIOBase):
    """Writes to the terminal and keeps a copy."""

    def __init__(self, stream: TextIO):
        self.stream, self.copy = stream, io.StringIO()

    def write(self, text: str) -> int:
        self.copy.write(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()


@contextlib.contextmanager
def docs_page(name: str, title: str, *, write: bool, intro: str = "", pages: Path | None = None,
              page: str | None = None) -> Iterator[None]:
    """Runs the body; when `write` and the body ends without an error, writes `pages/NAME.md`.

    Args:
        name: the page's file name without `.md` (e.g. `data`).
        title: the page's heading.
        write: whether to write the page at all (see `wants_docs`).
        intro: a sentence or two on what the benchmark measures, put above the output.
        pages: the folder of the pages (default: the repository's `docs/benchmarks`).
        page: the user's `--page`: write `PAGE.md` instead, its title followed by "(PAGE)".
    """
    if page is not None and page != name:
        name, title = page, f"{title} ({page})"
    if not write:
        yield
        return
    started, before = dt.datetime.now(dt.timezone.utc), load_average()
    command = command_line()
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        yield
    folder = PAGES if pages is None else pages
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.md"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(render(title, intro, command, started, before, tee.copy.getvalue()), encoding="utf-8")
    os.replace(tmp, path)
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}", file=sys.stderr)
