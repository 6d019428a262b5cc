"""Benchmark: start-up time of the psyattrs command, against a bare Python with MLflow.

Each row is a command run as a fresh process (`--repeats` times, the rows taking turns so that a
change in the machine's load falls on all of them alike); the table gives the median and the
fastest wall-clock seconds, the median CPU seconds of the process (user + system, its threads
included: much less sensitive than wall time to other processes on a shared machine), and the
ratio of each median to the bare row's:

- `bare python: import mlflow + search_runs`: `import mlflow; mlflow.search_runs(...)` on the same
  sqlite store (what any tool that reads the store pays: MLflow's imports, the store's engine and
  migration check, one query);
- `psyattrs predict --model runs:/ID/model --text 안녕하세요`: one sentence from a logged run (aim,
  issue 25: at most 1.5x the bare row; the row is labelled `--text (one word)`);
- `psyattrs runs`: the store's runs as a table;
- `psyattrs --help`: the command's own imports.

Without `--run`, the demo model (`experiments/demo.yaml`, `--dialogues` synthetic conversations)
is trained into a temporary store first (minutes on two cores).

    .venv/bin/python benchmarks/startup_benchmark.py [--run RUN_ID --tracking-uri sqlite:///...] [--repeats 5]

Synthetic data only (no file of ../shared/data is read).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _docs import add_docs_option, changed, docs_page, wants_docs  # benchmarks/_docs.py

REPO = Path(__file__).resolve().parents[1]
TEXT = "안녕하세요"
DOCS_INTRO = """
Start-up of the `psyattrs` command as fresh processes against a bare Python that imports MLflow and
searches the runs of the same sqlite store (aim, issue 25: predicting one sentence from a run at
most 1.5x the bare row). CPU seconds (the process's user + system time) move much less than wall
seconds with the load of a shared machine.
"""


def _train_demo(uri: str, dialogues: int) -> str:
    """Trains the demo config into `uri`; returns the run id (the last line `psyattrs train` prints)."""
    command = [sys.executable, "-m", "psyattrs", "train", str(REPO / "experiments" / "demo.yaml"), "--quiet",
               "--set", f"tracking.uri={uri}", "--set", f"data.synthetic.dialogues={dialogues}"]
    print(f"training the demo model into {uri} ({dialogues} dialogues) ...", flush=True)
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def _timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of `command` as a fresh process; fails loudly."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(command)}\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default=None, help="a run id with a logged model (default: train the demo)")
    parser.add_argument("--tracking-uri", default=None, help="the run's store (default: a temporary one)")
    parser.add_argument("--dialogues", type=int, default=100, help="synthetic dialogues for the demo model")
    parser.add_argument("--repeats", type=int, default=5, help="fresh processes per row (default 5)")
    add_docs_option(parser)
    args = parser.parse_args()
    if args.run and not args.tracking_uri:
        parser.error("--run needs --tracking-uri (the store that holds it)")
    write = wants_docs(args, partial=changed(parser, args, "repeats", "dialogues"))
    with docs_page("startup", "Start-up benchmark", write=write, intro=DOCS_INTRO):
        _measure(args)


def _measure(args: argparse.Namespace) -> None:
    """Trains the demo unless given a run, times the rows, prints the table."""
    tmp = tempfile.TemporaryDirectory(prefix="psyattrs-startup-")
    uri = args.tracking_uri or f"sqlite:///{Path(tmp.name) / 'mlflow.db'}"
    run = args.run or _train_demo(uri, args.dialogues)
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri}
    python = sys.executable
    bare = ("import mlflow; mlflow.set_tracking_uri(%r); "
            "mlflow.search_runs(search_all_experiments=True)" % uri)
    rows = [
        ("bare python: import mlflow + search_runs", [python, "-c", bare]),
        ("psyattrs predict --model runs:/ID/model --text (one word)",
         [python, "-m", "psyattrs", "predict", "--model", f"runs:/{run}/model", "--text", TEXT]),
        ("psyattrs runs", [python, "-m", "psyattrs", "runs"]),
        ("psyattrs --help", [python, "-m", "psyattrs", "--help"]),
    ]
    started = datetime.datetime.now(datetime.timezone.utc)
    for _, command in rows:  # a first, unmeasured run of each: bytecode caches and the page cache warm
        _timed(command, env)
    load_before = os.getloadavg()
    walls: dict[str, list[float]] = {name: [] for name, _ in rows}
    cpus: dict[str, list[float]] = {name: [] for name, _ in rows}
    for _ in range(args.repeats):
        for name, command in rows:
            wall, cpu = _timed(command, env)
            walls[name].append(wall)
            cpus[name].append(cpu)
    load_after = os.getloadavg()

    print(f"\nstarted {started:%Y-%m-%d %H:%M} UTC, {platform.platform()}, "
          f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load average "
          f"{load_before[0]:.1f} before / {load_after[0]:.1f} after; run {run} in {uri}")
    print(f"medians of {args.repeats} fresh processes per row (taking turns), after one unmeasured run each\n")
    base_wall = statistics.median(walls[rows[0][0]])
    base_cpu = statistics.median(cpus[rows[0][0]])
    width = max(len(name) for name, _ in rows)
    print(f"{'command'.ljust(width)}  wall s  fastest  CPU s  wall / bare  CPU / bare")
    for name, _ in rows:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        print(f"{name.ljust(width)}  {wall:6.2f}  {min(walls[name]):7.2f}  {cpu:5.2f}  {wall / base_wall:10.2f}x"
              f"  {cpu / base_cpu:9.2f}x")
    tmp.cleanup()


if __name__ == "__main__":
    main()
