"""Benchmark: read, validate and resolve ~100k synthetic utterances, next to plain pandas.read_csv.

Writes a synthetic annotated corpus (the OPELA per-sentence layout) of about 100k sentences to a
temporary folder, then runs each step in a fresh Python process (so peak memory is that step's
own), REPEATS times (round after round: every step once per round, so that a shared machine's
changing load does not land on one step's runs), and prints the median seconds and the peak
resident memory, with the ratio to `pandas.read_csv` of the same file measured in the same run.
Imports are done before the clock starts in every child.

    .venv/bin/python benchmarks/data_benchmark.py [--sentences 100000] [--repeats 3]

Aim (issues 2 and 10): read + validate + resolve under 3x read_csv's time and under 1 GB. The
`gaps:` steps read a copy of the file whose last column has empty cells (every 20th), where the
check for rows cut short runs (on the first file it is skipped: no last cell is empty). The
read / validate / resolve columns split each step's median into its parts (medians of each part);
`cpu s` is the process's CPU time (all threads), steadier than wall time on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _memory import peak_kb  # benchmarks/_memory.py (the script's folder is on sys.path)
from _docs import add_docs_option, changed, docs_page, wants_docs  # benchmarks/_docs.py

STEPS = {
    "read_csv": "pandas.read_csv of the file (reference)",
    "read": "load_corpus (read + type + checks)",
    "read+validate": "load_corpus + summarize",
    "read+validate+resolve": "load_corpus + summarize + resolve (opela)",
    "resolve-all-methods": "load_corpus + compare_with_final (4 methods)",
    "gaps: read": "load_corpus of the same file with every 20th cell of its last column empty",
    "gaps: read+val.+resolve": "the same, + summarize + resolve (opela)",
}
GAPS = "gaps: "
"""Steps on the copy whose last column has empty cells: the short-row check (a row cut short
always leaves the last cell empty) runs on it."""


def _child(step: str, path: str) -> dict:
    import pandas as pd

    from psyattrs.data import load_corpus
    from psyattrs.data.summary import summarize
    from psyattrs.labels.resolve import compare_with_final, resolve_final_labels
    from psyattrs.schema import OPELA

    rss_before = peak_kb()
    t0 = time.perf_counter()
    c0 = time.process_time()
    parts = {"read": float("nan"), "validate": float("nan"), "resolve": float("nan")}
    step = {"gaps: read": "read", "gaps: read+val.+resolve": "read+validate+resolve"}.get(step, step)
    if step == "read_csv":
        n = len(pd.read_csv(path))
    else:
        corpus = load_corpus(path)
        n = len(corpus.utterances)
        parts["read"] = time.perf_counter() - t0
        if step in ("read+validate", "read+validate+resolve"):
            t1 = time.perf_counter()
            summarize(corpus)
            parts["validate"] = time.perf_counter() - t1
        if step == "read+validate+resolve":
            t1 = time.perf_counter()
            resolve_final_labels(corpus.utterances, OPELA, method="opela", seed=0)
            parts["resolve"] = time.perf_counter() - t1
        if step == "resolve-all-methods":
            t1 = time.perf_counter()
            compare_with_final(corpus.utterances, OPELA)
            parts["resolve"] = time.perf_counter() - t1
    seconds = time.perf_counter() - t0
    cpu = time.process_time() - c0
    peak = peak_kb()
    return {"seconds": seconds, "cpu": cpu, "rows": n, "peak_mb": peak / 1024, "imports_mb": rss_before / 1024, **parts}


def _gaps_path(path: Path) -> Path:
    return path.with_name(path.stem + "_gaps.csv")


def _make(sentences: int, path: Path) -> dict:
    import pandas as pd

    from psyattrs.synth import synthesize, write_annotated

    t0 = time.perf_counter()
    n_dialogues = max(1, round(sentences / 116))  # about 116 sentences per dialogue, as in the real release
    table = synthesize(n_dialogues, seed=1).utterances
    if len(table) < sentences:  # top up when the draw came out short
        n_dialogues = int(n_dialogues * sentences / len(table)) + 1
        table = synthesize(n_dialogues, seed=1).utterances
    write_annotated(table, path)
    gaps = pd.read_csv(path, keep_default_na=False, na_values=[""], low_memory=False)
    gaps.iloc[::20, -1] = pd.NA
    gaps.to_csv(_gaps_path(path), index=False)
    return {"sentences": len(table), "dialogues": n_dialogues, "seconds": time.perf_counter() - t0}


def _run(step: str, path: Path) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", step, str(path)], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


DOCS_INTRO = 'Reading, validating and resolving the labels of a synthetic annotated corpus, each step in a fresh process, against `pandas.read_csv` of the same file.'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("STEP", "PATH"), help=argparse.SUPPRESS)
    parser.add_argument("--make", nargs=2, metavar=("SENTENCES", "PATH"), help=argparse.SUPPRESS)
    add_docs_option(parser)
    args = parser.parse_args()
    write = wants_docs(args, partial=changed(parser, args, "sentences") or bool(args.child or args.make))
    with docs_page("data", "Data benchmark", write=write, intro=DOCS_INTRO):
        if args.child:
            print(json.dumps(_child(*args.child)))
            return
        if args.make:
            print(json.dumps(_make(int(args.make[0]), Path(args.make[1]))))
            return

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "corpus.csv"
            # the corpus is made in a child too: Linux carries a parent's peak memory over into the
            # children it starts, so the parent stays small
            made = json.loads(subprocess.run(
                [sys.executable, __file__, "--make", str(args.sentences), str(path)],
                capture_output=True, text=True, check=True,
            ).stdout.strip().splitlines()[-1])
            size_mb = path.stat().st_size / 2**20
            print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
                  f"Python {platform.python_version()}")
            print(f"corpus: {made['sentences']:,} sentences in {made['dialogues']} synthetic dialogues, "
                  f"{size_mb:.1f} MB CSV (synthesized and written in {made['seconds']:.1f} s)")
            print(f"each step in a fresh process, median of {args.repeats} (the steps taken in turn, round after "
                  "round, so a change in the machine's load reaches every step alike)\n")
            by_step: dict[str, list[dict]] = {step: [] for step in STEPS}
            for _ in range(args.repeats):
                for step in STEPS:
                    by_step[step].append(_run(step, _gaps_path(path) if step.startswith(GAPS) else path))
            results = {}
            for step, runs in by_step.items():
                results[step] = {
                    **{part: statistics.median(r[part] for r in runs) for part in ("read", "validate", "resolve")},
                    "seconds": statistics.median(r["seconds"] for r in runs),
                    "cpu": statistics.median(r["cpu"] for r in runs),
                    "peak_mb": max(r["peak_mb"] for r in runs),
                    "imports_mb": statistics.median(r["imports_mb"] for r in runs),
                    "rows": runs[0]["rows"],
                }
            ref = results["read_csv"]["seconds"]
            ref_cpu = results["read_csv"]["cpu"]
            header = (f"{'step':<24} {'rows':>8} {'median s':>9} {'x read_csv':>10} {'cpu s':>6} {'x (cpu)':>7} "
                      f"{'read s':>7} {'valid. s':>8} "
                      f"{'resolve s':>9} {'peak MB':>8} {'after imports MB':>17}")
            print(header)
            print("-" * len(header))

            def cell(value: float, width: int) -> str:
                return f"{'-':>{width}}" if value != value else f"{value:>{width}.2f}"

            for step, r in results.items():
                print(f"{step:<24} {r['rows']:>8,} {r['seconds']:>9.2f} {r['seconds'] / ref:>10.2f} {r['cpu']:>6.2f} "
                      f"{r['cpu'] / ref_cpu:>7.2f} {cell(r['read'], 7)} "
                      f"{cell(r['validate'], 8)} {cell(r['resolve'], 9)} {r['peak_mb']:>8.0f} {r['imports_mb']:>17.0f}")
            print()
            for step, text in STEPS.items():
                print(f"  {step}: {text}")


if __name__ == "__main__":
    main()
