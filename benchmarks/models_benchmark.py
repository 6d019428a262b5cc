"""Benchmark: the classical models on the synthetic corpus, on a generic corpus, and their speed.

Three parts, each printing a table (all figures measured in this run, on this machine):

A. quality (synthetic OPELA-style corpus, conversation-grouped and persona-grouped splits): test
   macro-F1 per head of every model next to the majority floor; the context model next to the same
   model without context on empathy; soft cross-entropy (vs the labelers' distribution) at
   targets.lambda 1, 0.5 and 0.
B. a multi-annotator corpus in the generic format with its own schema (`--generic PATH --schema
   S.yaml`): the best classical config next to a plain TF-IDF + logistic regression on the target
   sentence. Skipped, saying so, when no such file is given: psyattrs ships no real corpus.
C. speed: training the `baseline_tfidf` model on ~100k utterances x 6 heads and predicting them,
   seconds and peak memory in a fresh process, next to a bare scikit-learn pipeline (the same
   TF-IDF features, one LogisticRegression per head on the final labels) in the same run.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/models_benchmark.py [--part A B C]
        [--dialogues 200] [--speed-sentences 100000] [--generic PATH --schema S.yaml]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _memory import peak_kb  # benchmarks/_memory.py (the script's folder is on sys.path)
from _docs import add_docs_option, changed, docs_page, wants_docs  # benchmarks/_docs.py

# name -> (kind, context.previous, targets.lambda, extra settings)
MODELS: dict[str, tuple[str, int, float, dict]] = {
    "majority": ("majority", 0, 1.0, {}),
    "tfidf": ("tfidf", 0, 1.0, {}),
    "tfidf +context": ("tfidf", 1, 1.0, {}),
    "lightgbm": ("lightgbm", 0, 1.0, {"stack": False}),
    "lightgbm +context": ("lightgbm", 2, 1.0, {}),
}
LAMBDAS = (1.0, 0.5, 0.0)
SOFT_MODEL = ("tfidf", 1)  # the model of the soft-vs-hard comparison


def _fit_score(table, split, schema, kind, previous, lam, extra, seed=0) -> dict[str, float]:
    from psyattrs.experiments import metrics as M
    from psyattrs.labels.soft import mixed_targets
    from psyattrs.models.base import build_model

    train, valid, test = (table[split == part].reset_index(drop=True) for part in ("train", "valid", "test"))
    model = build_model(kind, schema, context_previous=previous, seed=seed, **extra)
    t0 = time.perf_counter()
    model.fit(train, mixed_targets(train, schema, lam=lam), valid=(valid, mixed_targets(valid, schema, lam=lam)))
    fit_s = time.perf_counter() - t0
    proba = model.predict_proba(test)
    out = M.score_split(test, schema, proba, predicted=model.predict(test), prior=M.class_prior(train, schema))
    out["fit_seconds"] = fit_s
    return out


def part_a(n_dialogues: int) -> None:
    from psyattrs.data.splits import train_valid_test
    from psyattrs.synth import synthesize
    from psyattrs.schema import OPELA

    table = synthesize(n_dialogues, seed=11, rare_boost=3.0).utterances
    heads = OPELA.head_names
    print(f"A. synthetic corpus: {n_dialogues} dialogues, {len(table):,} sentences (rare classes x3), "
          f"train/valid/test 70/10/20 by group; test macro-F1 per head\n")
    for by in ("doc", "persona"):
        split = train_valid_test(table, by=by, valid=0.1, test=0.2, seed=0)
        rows = {}
        for name, (kind, prev, lam, extra) in MODELS.items():
            rows[name] = _fit_score(table, split, OPELA, kind, prev, lam, extra)
        floor = {h: rows["majority"][f"test_floor_macro_f1_{h}"] for h in heads}
        ceiling = {h: rows["majority"][f"test_ceiling_macro_f1_{h}"] for h in heads}
        print(f"split by {by} ({(split == 'test').sum():,} test sentences)")
        print(f"{'model':<20}" + "".join(f"{h:>9}" for h in heads) + f"{'mean':>9}{'fit s':>8}  beats floor on every head")
        for name, m in rows.items():
            f1 = [m[f"test_macro_f1_{h}"] for h in heads]
            beats = "-" if name == "majority" else ("yes" if all(f > floor[h] for f, h in zip(f1, heads)) else "NO")
            print(f"{name:<20}" + "".join(f"{v:>9.3f}" for v in f1) + f"{m['test_macro_f1_mean']:>9.3f}"
                  f"{m['fit_seconds']:>8.1f}  {beats}")
        print(f"{'floor (class prior)':<20}" + "".join(f"{floor[h]:>9.3f}" for h in heads))
        print(f"{'one labeler vs rest':<20}" + "".join(f"{ceiling[h]:>9.3f}" for h in heads))
        for base in ("tfidf", "lightgbm"):
            a, b = rows[base]["test_macro_f1_empathy"], rows[f"{base} +context"]["test_macro_f1_empathy"]
            print(f"  empathy macro-F1, {base}: no context {a:.3f} -> with context {b:.3f} ({b - a:+.3f})")
        kind, prev = SOFT_MODEL
        soft = {lam: _fit_score(table, split, OPELA, kind, prev, lam, {}) for lam in LAMBDAS}
        print(f"  soft cross-entropy vs the labelers' distribution ({kind}, context {prev}), mean over heads:")
        for lam, m in soft.items():
            print(f"    lambda {lam:<4} soft CE {m['test_soft_ce_mean']:.4f}   JSD {m['test_jsd_mean']:.4f}   "
                  f"macro-F1 {m['test_macro_f1_mean']:.3f}")
        print()


def part_b(path: str | None, schema_path: str | None) -> None:
    if not path:
        print("B. generic multi-annotator corpus: skipped (no --generic PATH --schema S.yaml given; psyattrs "
              "ships no real corpus of this kind)\n")
        return
    from psyattrs.data import load_corpus
    from psyattrs.data.splits import train_valid_test

    corpus = load_corpus(path, format="generic", schema=schema_path)
    table, schema = corpus.utterances, corpus.schema
    if any(f"labeler_{h}" not in table.columns for h in schema.head_names):
        from psyattrs.labels.resolve import resolve_final_labels

        table = resolve_final_labels(table, schema, method="opela")
        print("   (no final labels in the file: resolved with the OPELA method)")
    split = train_valid_test(table, by="doc", valid=0.1, test=0.2, seed=0, schema=schema)
    print(f"B. {path}: {len(table):,} sentences, heads {schema.head_names} (schema {schema_path})")
    configs = {
        "plain TF-IDF + LR, target sentence, lambda 1": ("tfidf", 0, 1.0, {}),
        "tfidf, context 1, lambda 0.5": ("tfidf", 1, 0.5, {}),
        "tfidf, context 1, lambda 0": ("tfidf", 1, 0.0, {}),
        "lightgbm, context 2, lambda 0.5": ("lightgbm", 2, 0.5, {}),
    }
    print(f"{'config':<46}{'macro-F1 mean':>14}{'soft CE mean':>14}")
    for name, (kind, prev, lam, extra) in configs.items():
        m = _fit_score(table, split, schema, kind, prev, lam, extra)
        print(f"{name:<46}{m['test_macro_f1_mean']:>14.3f}{m['test_soft_ce_mean']:>14.4f}")
    print()


# -- C. speed: each side in a fresh process ---------------------------------------------------------


def _speed_child(which: str, path: str) -> dict:
    import numpy as np
    import pandas as pd

    from psyattrs.data.table import final_column, normalize_table
    from psyattrs.labels.soft import mixed_targets
    from psyattrs.models.base import build_model
    from psyattrs.schema import OPELA

    table = normalize_table(pd.read_parquet(path), OPELA)
    rss0 = peak_kb()
    t0 = time.perf_counter()
    if which == "psyattrs":
        model = build_model("tfidf", OPELA, context_previous=0, seed=0)
        model.fit(table, mixed_targets(table, OPELA, lam=1.0))
        fit_s = time.perf_counter() - t0
        model.predict_proba(table)
    else:  # bare scikit-learn on the same features: the same featurizer, one LogisticRegression per head
        from sklearn.linear_model import LogisticRegression

        from psyattrs.features.text import TextFeaturizer
        from psyattrs.models.tfidf import FEATURIZER_DEFAULTS

        model = build_model("tfidf", OPELA)
        C, max_iter = model.params["C"], model.params["max_iter"]
        featurizer = TextFeaturizer("ko", **FEATURIZER_DEFAULTS)
        X = featurizer.fit_transform(table["text"].tolist())
        heads = []
        target = ~table["is_pause"].to_numpy()
        for head in OPELA:
            y = table[final_column(head.name)].to_numpy(dtype=float, na_value=np.nan)
            rows = target & ~np.isnan(y)
            heads.append(LogisticRegression(C=C, max_iter=max_iter, solver="newton-cg").fit(X[rows], y[rows].astype(int)))
        fit_s = time.perf_counter() - t0
        X = featurizer.transform(table["text"].tolist())
        for clf in heads:
            clf.predict_proba(X)
    total = time.perf_counter() - t0
    peak = peak_kb()
    return {"fit_s": fit_s, "predict_s": total - fit_s, "total_s": total, "peak_mb": peak / 1024,
            "after_load_mb": rss0 / 1024, "rows": len(table)}


def part_c(sentences: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "corpus.parquet"
        subprocess.run([sys.executable, __file__, "--make", str(sentences), str(path)], check=True)
        print(f"C. speed: baseline_tfidf (char 1-3 + morpheme 1-2 n-gram TF-IDF, LR per head, no context) on "
              f"synthetic utterances, fit + predict on the same rows, fresh process each")
        runs = {}
        for which in ("sklearn", "psyattrs"):
            out = subprocess.run([sys.executable, __file__, "--speed-child", which, str(path)],
                                 capture_output=True, text=True, check=True)
            runs[which] = json.loads(out.stdout.strip().splitlines()[-1])
        ref = runs["sklearn"]["total_s"]
        print(f"{'':<32}{'rows':>9}{'fit s':>8}{'predict s':>10}{'total s':>9}{'x bare':>8}{'peak MB':>9}")
        for which, label in (("sklearn", "bare scikit-learn, same features"), ("psyattrs", "psyattrs tfidf model")):
            r = runs[which]
            print(f"{label:<32}{r['rows']:>9,}{r['fit_s']:>8.1f}{r['predict_s']:>10.1f}{r['total_s']:>9.1f}"
                  f"{r['total_s'] / ref:>8.2f}{r['peak_mb']:>9.0f}")
        print("  (the psyattrs model also learns from sample-weighted target copies and handles pauses/"
              "unlabelled rows; the bare pipeline fits the final labels directly)\n")


def _make(sentences: int, path: Path) -> None:
    from psyattrs.synth import synthesize

    n = max(1, round(sentences / 116))
    table = synthesize(n, seed=3).utterances
    table.iloc[:sentences].to_parquet(path)


DOCS_INTRO = 'The shipped model kinds against the majority floor, with and without context and soft targets, and their speed.'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", nargs="+", default=["A", "B", "C"], choices=["A", "B", "C"])
    parser.add_argument("--dialogues", type=int, default=200)
    parser.add_argument("--speed-sentences", type=int, default=100_000)
    parser.add_argument("--generic", help="a generic-format multi-annotator corpus (docs/formats.md)")
    parser.add_argument("--schema", help="its schema YAML")
    parser.add_argument("--speed-child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--make", nargs=2, help=argparse.SUPPRESS)
    add_docs_option(parser)
    args = parser.parse_args()
    write = wants_docs(args, partial=changed(parser, args, "part", "dialogues", "speed_sentences") or bool(args.generic or args.speed_child or args.make))
    with docs_page("models", "Models benchmark", write=write, intro=DOCS_INTRO):
        if args.speed_child:
            print(json.dumps(_speed_child(*args.speed_child)))
            return
        if args.make:
            _make(int(args.make[0]), Path(args.make[1]))
            return
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
              f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}\n")
        if "A" in args.part:
            part_a(args.dialogues)
        if "B" in args.part:
            part_b(args.generic, args.schema)
        if "C" in args.part:
            part_c(args.speed_sentences)


if __name__ == "__main__":
    main()
