"""Benchmark: annotate ~1M synthetic PersonalDialog-style utterances; predict() next to predict_proba.

1. Trains a classical model (default: the demo config's LightGBM with two previous sentences of
   context, on a smaller synthetic corpus; `--kind tfidf` for the TF-IDF baseline; or `--model
   URI` to use a registered one) and saves it to a temporary folder.
2. Writes synthetic PersonalDialog JSON lines (whitespace-tokenised Chinese words, 2-8 utterances
   per dialogue, two speakers with traits, some golden responses) holding `--utterances`
   utterances. NB: the model is the Korean OPELA model (the only labelled data is Korean); it
   annotates the Chinese text anyway, so this measures speed, not quality.
3. Runs `psyattrs annotate` in a fresh process on the whole file and on a tenth of it, and
   reports utterances per second and the child's peak resident memory: with constant memory the
   peak does not grow with the input.
4. In this process, on the same `--compare-rows` rows: the raw model's `predict_proba(table)`,
   `Predictor.predict_table(table)` (what predict() and annotate run) and `predict(records)` from
   the raw records, best of `--repeats`, each call starting with an empty tokenisation cache;
   prints the overhead ratios (aim: under 2x).

    .venv/bin/python benchmarks/annotate_benchmark.py [--utterances 1000000] [--kind lightgbm]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from _docs import add_docs_option, changed, docs_page, wants_docs  # benchmarks/_docs.py

WORDS = ("今天 好 冷 啊 吃饭 了 么 是 的 周末 去 哪里 玩 那么 晚 加班 刚 到 家 呀 没 人性 可以 来 组织 上海 陪 打 经理 "
         "派车 接 小 泉州 哈哈 真的 假的 喜欢 音乐 电影 明天 见 晚安 早 上班 下班 累 死 我 你 他 她 我们").split()
TAGS = ("旅游", "音乐", "学生", "设计师", "宅", "电影", "跑步", "读书", "美食", "")
LOCS = ("上海 浦东新区", "福建 厦门", "山东 济南", "北京 朝阳", "广东 广州", "四川 成都")


def write_corpus(path: Path, utterances: int, seed: int = 0) -> tuple[int, int]:
    """Writes PersonalDialog-style JSON lines with about `utterances` utterances; returns
    (dialogues, utterances) written."""
    rng = random.Random(seed)
    n_dialogues = n_utterances = 0
    with path.open("w", encoding="utf-8") as fh:
        while n_utterances < utterances:
            k = min(rng.randint(2, 8), utterances - n_utterances)
            golden = k >= 3 and rng.random() < 0.2
            k_dialog = k - golden
            profile = [{"tag": rng.sample(TAGS, rng.randint(1, 4)), "loc": rng.choice(LOCS),
                        "gender": rng.choice(("male", "female"))} for _ in range(2)]
            record = {
                "dialog": [" ".join(rng.choices(WORDS, k=rng.randint(2, 12))) for _ in range(k_dialog)],
                "profile": profile,
                "uid": [j % 2 for j in range(k_dialog)],
            }
            if golden:
                record.update(responder_profile=profile[k_dialog % 2], golden_response=" ".join(rng.choices(WORDS, k=4)),
                              is_biased=rng.random() < 0.5)
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            n_dialogues += 1
            n_utterances += k
    return n_dialogues, n_utterances


def train_model(kind: str, dialogues: int, folder: Path) -> str:
    """Fits the demo config's model (or the TF-IDF baseline) on the synthetic Korean corpus."""
    from psyattrs.experiments.config import load_config
    from psyattrs.labels.soft import mixed_targets
    from psyattrs.models.base import build_model
    from psyattrs.synth import synthesize
    from psyattrs.schema import OPELA

    repo = Path(__file__).resolve().parents[1]
    name = "demo.yaml" if kind == "lightgbm" else "baseline_tfidf.yaml"
    config = load_config(repo / "experiments" / name, [f"data.synthetic.dialogues={dialogues}"])
    table = synthesize(dialogues, seed=7, rare_boost=3.0).utterances
    settings = config.model.settings(context_previous=config.context.previous, seed=config.seed)
    settings.update(calibration=None, tune_thresholds=False)  # no validation split here
    model = build_model(config.model.kind, OPELA, **settings)
    model.fit(table, mixed_targets(table, OPELA, lam=config.targets.lam, smoothing=config.targets.smoothing))
    model.save(folder)
    return f"{config.model.kind}, context {config.context.previous}, trained on {len(table):,} synthetic sentences"


def run_annotate(corpus: Path, model: str, out: Path, chunk_size: int) -> dict:
    """`psyattrs annotate` in a fresh process: wall seconds, peak RSS (MB) and its reconciliation."""
    cmd = [sys.executable, "-m", "psyattrs", "annotate", str(corpus), "--model", model, "--out", str(out),
           "--chunk-size", str(chunk_size), "--no-progress", "--restart"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if done.returncode != 0:
        raise SystemExit(f"annotate failed ({done.returncode}):\n{done.stderr[-3000:]}")
    manifest = json.loads((out / "_manifest.json").read_text(encoding="utf-8"))
    inner = re.search(r" in ([\d.]+)s$", done.stdout.strip().splitlines()[0])
    return {"seconds": seconds, "inner": float(inner.group(1)) if inner else float("nan"), "peak_mb": max(peak, before) / 1024, "counts": manifest["counts"],
            "chunks": manifest["chunks"], "stdout": done.stdout.strip()}


def _best(fn, repeats: int) -> float:
    """Best wall time of `repeats` calls, each with an empty tokenisation cache (as on new text)."""
    from psyattrs.features.tokenizers import clear_tokenizer_cache

    best = float("inf")
    for _ in range(repeats):
        clear_tokenizer_cache()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def compare_overhead(corpus: Path, model_spec: str, rows: int, repeats: int) -> list[tuple[str, float, int]]:
    """Seconds of predict_proba, Predictor.predict_table and predict(records) on the same rows."""
    from psyattrs.serving.predict import Predictor
    from psyattrs.serving.sources import PersonalDialogSource

    predictor = Predictor(model_spec)
    chunk = next(iter(PersonalDialogSource(corpus, rows).chunks()))
    table = chunk.table
    with corpus.open(encoding="utf-8") as fh:
        records = [json.loads(next(fh)) for _ in range(chunk.n_records)]
    predictor.model.predict_proba(table.head(50))  # warm caches (tokenisers) before timing
    out = [("model.predict_proba(table)", _best(lambda: predictor.model.predict_proba(table), repeats), len(table)),
           ("Predictor.predict_table(table)", _best(lambda: predictor.predict_table(table), repeats), len(table)),
           ("predict(records) via Predictor", _best(lambda: predictor.predict(records), repeats), len(table))]
    return out


DOCS_INTRO = '`psyattrs annotate` on PersonalDialog-style utterances, and what `predict()` adds over the model alone.'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--utterances", type=int, default=1_000_000)
    parser.add_argument("--kind", choices=("lightgbm", "tfidf"), default="lightgbm")
    parser.add_argument("--train-dialogues", type=int, default=120)
    parser.add_argument("--model", default=None, help="use this model URI or folder instead of training one")
    parser.add_argument("--chunk-size", type=int, default=50_000)
    parser.add_argument("--compare-rows", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None, help="keep the files here (default: a temporary folder)")
    add_docs_option(parser)
    args = parser.parse_args()
    write = wants_docs(args, partial=changed(parser, args, "utterances", "kind", "train_dialogues", "model"))
    with docs_page("annotate", "Annotation benchmark", write=write, intro=DOCS_INTRO):

        with tempfile.TemporaryDirectory() as tmp:
            work = args.workdir or Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            start = time.perf_counter()
            if args.model:
                model, described = args.model, args.model
            else:
                model = str(work / "model")
                described = train_model(args.kind, args.train_dialogues, Path(model))
            train_seconds = time.perf_counter() - start
            big, small = work / "corpus.jsonl", work / "corpus_tenth.jsonl"
            dialogues, utterances = write_corpus(big, args.utterances)
            write_corpus(small, max(args.utterances // 10, 1))
            runs = [(f"{p.name}", run_annotate(p, model, work / f"{p.stem}.parquet", args.chunk_size)) for p in (small, big)]
            compare = compare_overhead(big, model, args.compare_rows, args.repeats)

        cpus = os.cpu_count()
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"annotate benchmark - {platform.python_version()}, {cpus} CPU(s), load average {load:.1f}")
        print(f"model: {described} (ready in {train_seconds:.0f}s); Korean OPELA model on Chinese text: speed only")
        print(f"corpus: {dialogues:,} dialogues, {utterances:,} utterances; chunk size {args.chunk_size:,}")
        print()
        print(f"{'annotate run':<22}{'utterances':>11}{'chunks':>7}{'process s':>10}{'annotate s':>11}{'utt/s':>9}"
              f"{'peak MB':>9}  reconciled")
        for name, r in runs:
            c = r["counts"]
            ok = "yes" if c["read"] == c["written"] + c["rejected"] else "NO"
            print(f"{name:<22}{c['written']:>11,}{r['chunks']:>7}{r['seconds']:>10.1f}{r['inner']:>11.1f}"
                  f"{c['written'] / r['inner']:>9,.0f}{r['peak_mb']:>9,.0f}  {ok} (read {c['read']:,} = "
                  f"written {c['written']:,} + rejected {c['rejected']:,})")
        print()
        base = compare[0][1]
        print(f"{'same ' + format(compare[0][2], ',') + ' rows, best of ' + str(args.repeats):<34}{'seconds':>9}{'utt/s':>10}{'vs raw':>8}")
        for name, seconds, n in compare:
            print(f"{name:<34}{seconds:>9.2f}{n / seconds:>10,.0f}{seconds / base:>7.2f}x")
        print()
        print("process s: the whole `psyattrs annotate` process (start, imports, model loading); annotate s: the")
        print("annotate() call (model loading, reading, predicting, writing); utt/s = utterances / annotate s;")
        print("peak MB: the child process's maximum resident memory.")


if __name__ == "__main__":
    main()
