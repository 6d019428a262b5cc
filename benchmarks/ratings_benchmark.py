"""Benchmark: reading a LeWiDi file in which one item has many ratings.

One item rated by N annotators (N = 1,000, 2,000, 10,000 by default) beside 80 items of 5 ratings
each, written by the script (no real text). For each N, in a fresh process: the seconds of
`psyattrs.data.load_corpus` plus `psyattrs.data.summary.summarize` (what `psyattrs data validate`
does), median of `--repeats`. The work is linear in the ratings: doubling N should about double
the seconds (it was quadratic before: 1,000 ratings 3.8 s, 2,000 14.5 s, 10,000 more than 120 s).

    .venv/bin/python benchmarks/ratings_benchmark.py [--ratings 1000 2000 10000] [--repeats 3] [--write-docs]

A full run (the default ratings and repeats) writes `docs/benchmarks/ratings.md`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _docs import add_docs_option, changed, docs_page, wants_docs  # benchmarks/_docs.py

DOCS_INTRO = ("Reading and validating a LeWiDi file in which one item has many ratings (80 items of 5 "
              "ratings beside it), in a fresh process: the work should grow linearly with the ratings.")
CHILD = """
import sys, time
from psyattrs.data import load_corpus
from psyattrs.data.summary import summarize
t = time.perf_counter()
corpus = load_corpus(sys.argv[1])
summarize(corpus)
print(time.perf_counter() - t, corpus.n_kept, int(corpus.annotations.shape[0]))
"""


def item(i: int, n: int) -> dict:
    votes = [(i + j) % 2 for j in range(n)]
    share = sum(votes) / n
    return {"text": f"item {i}", "annotation task": "offensiveness detection", "number of annotations": n,
            "annotations": ",".join(map(str, votes)), "annotators": ",".join(f"Ann{j}" for j in range(n)),
            "lang": "en", "hard_label": str(int(share > 0.5)), "soft_label": {"0": 1 - share, "1": share},
            "split": "train", "other_info": {}}


def write_file(path: Path, n: int) -> Path:
    items = {str(i): item(i, 5) for i in range(80)}
    items["many"] = item(80, n)
    path.write_text(json.dumps(items), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ratings", type=int, nargs="+", default=[1000, 2000, 10000])
    parser.add_argument("--repeats", type=int, default=3)
    add_docs_option(parser)
    args = parser.parse_args(argv)
    write = wants_docs(args, partial=changed(parser, args, "ratings", "repeats"))
    with docs_page("ratings", "Many ratings on one item", write=write, intro=DOCS_INTRO):
        _table(args)
    return 0


def _table(args: argparse.Namespace) -> None:
    print(f"{'ratings on one item':>20}  {'read + summarize (s)':>21}  {'items kept':>10}  {'ratings kept':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.ratings:
            path = write_file(Path(tmp) / f"many_{n}.json", n)
            times = []
            for _ in range(args.repeats):
                out = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, check=True)
                seconds, kept, ratings = out.stdout.split()
                times.append(float(seconds))
            print(f"{n:>20,}  {statistics.median(times):>21.2f}  {int(kept):>10}  {int(ratings):>12,}")


if __name__ == "__main__":
    sys.exit(main())
