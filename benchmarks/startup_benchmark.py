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
  issue 25: at most 1.5x the bare row; the row is labelled `--text (one word)`); the command loads
  the Korean analyser in a second process while it loads MLflow and the model
  (`psyattrs.features.tokenizers.prefetch_korean`), so its CPU seconds include that process's;
- the same with `PSYATTRS_PREFETCH=0`: everything in one process, one step after the other;
- `psyattrs runs`: the store's runs as a table;
- `psyattrs --help`: the command's own imports.

A second table says where the seconds of the `predict` row go: a fresh process takes the steps of
`psyattrs predict` one at a time (`PHASES`: the command's imports, MLflow's, the store, scikit-learn,
LightGBM and the model code, loading the model from the run, the kiwipiepy analyser, its first
analysis, the prediction; all in one process, as with `PSYATTRS_PREFETCH=0`) and times each (wall
and CPU seconds, medians over `--repeats`
processes); the bare row pays the first steps too.

Without `--run`, the demo model (`experiments/demo.yaml`, `--dialogues` synthetic conversations)
is trained into a temporary store first (minutes on two cores).

    .venv/bin/python benchmarks/startup_benchmark.py [--run RUN_ID --tracking-uri sqlite:///...] [--repeats 5]

Synthetic data only (no file of ../shared/data is read).
"""

from __future__ import annotations

import argparse
import datetime
import json
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


# One process taking the steps of `psyattrs predict --model runs:/ID/model --text TEXT` one at a time;
# prints {phase: [wall, cpu]} as JSON. argv: tracking uri, run id, text.
PHASES = r"""
import json, sys, time
uri, run, text = sys.argv[1:4]
marks, last = {}, [time.perf_counter(), time.process_time()]
def mark(name):
    wall, cpu = time.perf_counter(), time.process_time()
    marks[name] = [wall - last[0], cpu - last[1]]
    last[:] = [wall, cpu]
import psyattrs.cli; mark("import psyattrs.cli (argparse, pandas, the command modules)")
import mlflow; mark("import mlflow")
mlflow.set_tracking_uri(uri); mlflow.search_experiments(); mark("the sqlite store: engine, migration check, one query")
import sklearn.base; mark("import scikit-learn (scipy.stats with it)")
import lightgbm, psyattrs.models.gbm, psyattrs.experiments.pyfunc, psyattrs.serving.predict
mark("import LightGBM and the psyattrs model code")
from psyattrs.serving.predict import Predictor
predictor = Predictor(f"runs:/{run}/model", tracking_uri=uri); mark("load the model (pyfunc: resolve, copy, unpickle)")
from psyattrs.features.tokenizers import _kiwi
kiwi = _kiwi(); mark("kiwipiepy: Kiwi()")
kiwi.tokenize(text); mark("kiwipiepy: first analysis (builds the model lazily)")
predictor.predict(text); mark("predict (features, LightGBM, output table)")
print(json.dumps(marks))
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
    predict = [python, "-m", "psyattrs", "predict", "--model", f"runs:/{run}/model", "--text", TEXT]
    one_process = {**env, "PSYATTRS_PREFETCH": "0"}
    rows = [
        ("bare python: import mlflow + search_runs", [python, "-c", bare], env),
        ("psyattrs predict --model runs:/ID/model --text (one word)", predict, env),
        ("  the same in one process (PSYATTRS_PREFETCH=0)", predict, one_process),
        ("psyattrs runs", [python, "-m", "psyattrs", "runs"], env),
        ("psyattrs --help", [python, "-m", "psyattrs", "--help"], env),
    ]
    started = datetime.datetime.now(datetime.timezone.utc)
    for _, command, row_env in rows:  # a first, unmeasured run of each: bytecode caches and the page cache warm
        _timed(command, row_env)
    load_before = os.getloadavg()
    walls: dict[str, list[float]] = {name: [] for name, _, _ in rows}
    cpus: dict[str, list[float]] = {name: [] for name, _, _ in rows}
    for _ in range(args.repeats):
        for name, command, row_env in rows:
            wall, cpu = _timed(command, row_env)
            walls[name].append(wall)
            cpus[name].append(cpu)
    load_after = os.getloadavg()

    print(f"\nstarted {started:%Y-%m-%d %H:%M} UTC, {platform.platform()}, "
          f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load average "
          f"{load_before[0]:.1f} before / {load_after[0]:.1f} after; run {run} in {uri}")
    print(f"medians of {args.repeats} fresh processes per row (taking turns), after one unmeasured run each\n")
    base_wall = statistics.median(walls[rows[0][0]])
    base_cpu = statistics.median(cpus[rows[0][0]])
    width = max(len(name) for name, _, _ in rows)
    print(f"{'command'.ljust(width)}  wall s  fastest  CPU s  wall / bare  CPU / bare")
    for name, _, _ in rows:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        print(f"{name.ljust(width)}  {wall:6.2f}  {min(walls[name]):7.2f}  {cpu:5.2f}  {wall / base_wall:10.2f}x"
              f"  {cpu / base_cpu:9.2f}x")
    _phases(python, uri, run, env, args.repeats)
    tmp.cleanup()


def _phases(python: str, uri: str, run: str, env: dict[str, str], repeats: int) -> None:
    """Prints where the seconds of a one-sentence `predict` go (`PHASES`, medians of fresh processes)."""
    runs, whole = [], []
    for _ in range(repeats):
        before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        done = subprocess.run([python, "-c", PHASES, uri, run, TEXT], env=env, capture_output=True, text=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"the phases of predict failed ({done.returncode}):\n{done.stderr[-2000:]}")
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        whole.append((time.perf_counter() - start,
                      (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)))
    names = list(runs[0])
    width = max(len(n) for n in names)
    print(f"\nwhere the seconds of predict go: its steps one at a time in a fresh process, medians of {repeats}\n")
    print(f"{'step'.ljust(width)}  wall s  CPU s")
    total = [0.0, 0.0]
    for name in names:
        wall = statistics.median(r[name][0] for r in runs)
        cpu = statistics.median(r[name][1] for r in runs)
        total = [total[0] + wall, total[1] + cpu]
        print(f"{name.ljust(width)}  {wall:6.2f}  {cpu:5.2f}")
    print(f"{'sum (after the interpreter started)'.ljust(width)}  {total[0]:6.2f}  {total[1]:5.2f}")
    print(f"{'the whole process (its start and exit too)'.ljust(width)}  "
          f"{statistics.median(w for w, _ in whole):6.2f}  {statistics.median(c for _, c in whole):5.2f}")


if __name__ == "__main__":
    main()
