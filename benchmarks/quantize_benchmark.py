"""Benchmark: what `predict.quantize` (dynamic int8 linear layers on CPU) costs and gains.

The shipped `experiments/transformer_tiny.yaml` (synthetic corpus, scratch encoder, two sentences
of context) is trained once through the runner, into a temporary MLflow store; the int8 model is
that trained model with `quantize` on (what `--set predict.quantize=true` stores with a model),
so the two differ by quantisation alone. (Training the config twice, once with
`predict.quantize=true`, does not give the same weights: the scratch tokenizer's training in the
`tokenizers` library breaks ties between equally frequent merges in hash order, which differs
from one training to the next.) Both are scored on the run's own test split; calibration and
thresholds are the ones fitted on the float model. Printed (every figure measured in this run, on this machine):

- test macro-F1, soft cross-entropy and accuracy per head, float against int8, and the mean;
- the largest probability change and how often the predicted class changes;
- prediction throughput (sentences/s, `predict_proba`, six heads, context included) of the float
  and the int8 model on the test split and on every sentence of the corpus, best of `--repeat`;
- how much int8 probabilities depend on batching: dynamic quantisation scales each batch by its
  own range, so the same sentences predicted with the model's `predict_batch_size` (256 rows by
  default; the printed line names the value) and with 8 differ slightly.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/quantize_benchmark.py [--repeat 3] [--set KEY=VALUE ...]
        [--write-docs | --no-write-docs]

A run without `--set` overrides writes its output to docs/benchmarks/quantize.md (`benchmarks/_docs.py`).
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from _docs import add_docs_option, changed, docs_page, wants_docs  # benchmarks/_docs.py

os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "experiments" / "transformer_tiny.yaml"


def _rate(model, frame: pd.DataFrame, repeat: int) -> float:
    model.predict_proba(frame.head(64))  # warm: quantised copy built, threads up
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        model.predict_proba(frame)
        best = min(best, time.perf_counter() - start)
    return len(frame) / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed repetitions of each prediction (best kept)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="further config overrides for both runs (e.g. data.synthetic.dialogues=20)")
    add_docs_option(parser)
    args = parser.parse_args()
    intro = ("What `predict.quantize` (dynamic int8 linear layers on CPU) costs and gains on `experiments/transformer_tiny.yaml` "
             "trained once through the runner: scores on the run's test split, float against int8, probability changes, "
             "batch dependence and throughput.")
    with docs_page("quantize", "Quantisation benchmark", write=wants_docs(args, partial=changed(parser, args, "overrides")), intro=intro):
        run(args)


def run(args: argparse.Namespace) -> None:
    """Trains, scores and times; prints the tables."""
    import torch

    from psyattrs.experiments.config import load_config
    from psyattrs.experiments.runner import train
    from psyattrs.synth import synthesize

    print(f"predict.quantize on {platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared), "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads\n")
    from psyattrs.experiments import metrics as M
    from psyattrs.experiments.dataset import config_schema, split_dataset

    with tempfile.TemporaryDirectory(prefix="quantize-bench-") as store:
        uri = f"sqlite:///{Path(store) / 'mlflow.db'}"
        config = load_config(CONFIG, [*args.overrides, f"tracking.uri={uri}", "tracking.experiment=quantize-bench"])
        start = time.perf_counter()
        run = train(config, quiet=True)
        print(f"trained {CONFIG.name} in {time.perf_counter() - start:.0f} s")
    float_model = run.model
    int8_model = copy.copy(float_model)
    int8_model.params = {**float_model.params, "quantize": True}
    int8_model._quantized = None
    schema = run.schema
    split = split_dataset(config, config_schema(config))  # the run's own split (same seed, same corpus)
    test = split.test
    prior = M.class_prior(split.train, schema)
    scores = {}
    for name, model in (("float", float_model), ("int8", int8_model)):
        scores[name] = M.score_split(test, schema, model.predict_proba(test), predicted=model.predict(test), prior=prior)
    assert abs(scores["float"]["test_macro_f1_mean"] - run.metrics["test_macro_f1_mean"]) < 1e-9  # the run's split
    rows = []
    for head in [h.name for h in schema] + ["mean"]:
        row = {"head": head}
        for metric in ("macro_f1", "soft_ce", "accuracy"):
            a = scores["float"].get(f"test_{metric}_{head}", np.nan)
            b = scores["int8"].get(f"test_{metric}_{head}", np.nan)
            row[f"{metric} float"], row[f"{metric} int8"], row[f"{metric} diff"] = a, b, b - a
        rows.append(row)
    table = pd.DataFrame(rows).set_index("head")
    print(f"\ntest split scores ({len(test)} rows), float against int8:")
    print(table.to_string(float_format=lambda v: f"{v:.4f}"))

    corpus = synthesize(config.data.synthetic.dialogues, seed=config.synthetic_seed,
                        rare_boost=config.data.synthetic.rare_boost).utterances
    p_float = float_model.predict_proba(corpus)
    p_int8 = int8_model.predict_proba(corpus)
    moved = max(float(np.abs(p_float[h] - p_int8[h]).max()) for h in p_float)
    changed = np.mean([float((p_float[h].argmax(1) != p_int8[h].argmax(1)).mean()) for h in p_float])
    print(f"\nwhole corpus ({len(corpus)} sentences): largest probability change {moved:.4f}; "
          f"predicted class changed on {changed:.2%} of sentences (mean over heads)")

    small = copy.copy(int8_model)
    small.params = {**int8_model.params, "predict_batch_size": 8}
    small._quantized = None
    p_small = small.predict_proba(corpus)
    drift = max(float(np.abs(p_int8[h] - p_small[h]).max()) for h in p_int8)
    flips = np.mean([float((p_int8[h].argmax(1) != p_small[h].argmax(1)).mean()) for h in p_int8])
    print(f"int8 batch dependence: predict_batch_size {int8_model.params['predict_batch_size']} against 8, largest probability change {drift:.4f}, "
          f"predicted class changed on {flips:.2%} of sentences")

    print(f"\nprediction throughput (predict_proba, six heads, context {config.context.previous}; best of {args.repeat}):")
    for name, frame in (("test split", test), ("whole corpus", corpus)):
        r_float = _rate(float_model, frame, args.repeat)
        r_int8 = _rate(int8_model, frame, args.repeat)
        print(f"  {name:<16} {len(frame):>6} sentences: float {r_float:>7.0f}/s, int8 {r_int8:>7.0f}/s "
              f"({r_int8 / r_float:.2f}x)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
