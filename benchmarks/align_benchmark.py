"""Benchmark: reconstructing the sentence order of the OPELA public release (issue 5).

Part 1, synthetic (the truth is known): `psyattrs.synth` simulates `--dialogues`
conversations (`--synth-shape release`, the default: shaped as the real ones read by hand, the user
opening, the persona closing, exactly 2 x `total_turn` speaker runs, pauses closing persona runs,
replies answering; `free`: the simulation of issue 5) and writes them in the public layout with the
release's quirks (multi-line messages, uncounted pauses, trailing newlines, blank user lines);
`align_public` reconstructs the order.
Printed, per round (0 = priors only) and next to the two naive readings measured in the same run:
the share of sentences given exactly their true labels (a row with exactly their lines and their
label vector: what training needs) and the share placed at their true position; then the
calibration of `align_confidence`; then a classical model (TF-IDF + logistic regression) trained
on the aligned public-format corpus next to the same model trained on the true annotated corpus,
on the same training conversations, both scored on the true sentences of the same held-out
conversations (mean macro-F1 over the six heads). A reference row aligns the same file with a
sentence classifier trained on `--reference` other synthetic conversations whose order is known
(`align_public(..., label_model=...)`): what sentence-level label likelihoods can do on this
generator, whose labels are partly random given the text.

Part 2, real: when `../shared/data/opela_public_rows.csv` exists (135 real rows of the release),
this script READS IT and prints how many conversations align, the mean confidence, how often a
labelled pause lands on a pause-signature position, and persona-grouped cross-validated macro-F1
per head of the classical model trained on the aligned real sentences, next to the majority floor.
When the file is absent that part is skipped, and the script says so.

Part 3, gold order (issue 14): with `--gold DIR` (e.g. `../shared/data/opela_gold_order`, hand-made
reading orders of some of the real conversations, two readers each; this script READS them and the
real rows), the real rows are aligned under each configuration of `--configs` (`CONFIGS`: the
settings of issue 5, each new source of evidence alone on top of them, all of them, today's
defaults) and, per gold conversation and overall, the share
of the user lines on which both readers agree that the reconstruction places as they do is printed
next to the readers' agreement with each other; then per configuration the calibration of
`align_confidence` on those lines, the share of conversations with exactly 2 x `total_turn` speaker
runs, opening with the user and closing with the persona, how the rounds stopped; and the
persona-grouped cross-validated macro-F1 of the classical model trained on each reconstruction.
`--subset N` aligns the gold conversations and N others only (faster, for development: the rounds
learn from fewer conversations). `--gold-seeds N` aligns under each configuration with seeds 0..N-1
of the cross-fitting folds and solvers and prints the medians and each seed's overall share: on the
six gold conversations the seed alone moves the overall share by a few hundredths, more than most
differences between configurations. With more than one configuration, a leave-one-conversation-out
choice among them follows: for each gold conversation the configuration that placed the most agreed
lines right on the other gold conversations, scored on it (what keeping the winner is worth on a
conversation it was not chosen on). With a configuration that uses the USE sentence encoder (`use`,
`use_alone`; issue 27), the speaker-change check follows: at each speaker change both readers agree
on, how often the USE cosine, and the character-bigram overlap, pick the true last line of the
previous speaker among it and its two same-speaker neighbours, against chance.
Absent folder or rows: skipped, and the script says so.

Part 4, downstream (issue 27; with `--gold`, unless `--skip-downstream`; `--downstream-only` runs it
alone): the project's standard sentence model trained on the reconstruction of the conversations
without a hand-made order (cached in `$PSYATTRS_CACHE/benchmark`) under each training option (the best
reading's labels; only sentences with `align_confidence` >= 0.5/0.7/0.9; the posterior label
distributions as soft targets), next to a leave-one-conversation-out reference trained on the
gold-constrained readings (`psyattrs.align.goldread`) and the majority floor, scored per head
(macro-F1, soft cross-entropy) on the gold-constrained lines both readers agree on; then the gold
conversations aligned alone (self-trained, and with the today-trained model as `label_model`) next to
the same conversations inside the whole file's alignment (`--whole ALIGNED_CSV` reads a `data align`
output of the whole file instead of aligning it again). See docs/alignment.md.

`--quick` (issue 27) finishes in a few minutes: 30 synthetic conversations with a 6-round cap
and no reference row, no full real-rows part, and (with `--gold`) the gold conversations and 24
others under today's defaults only (unless `--configs` names others), 6 rounds at most, without the
cross-validation: for comparing settings quickly, not for the figures of record (the rounds learn
from fewer conversations). `--rows PATH` reads the real rows from PATH (default
`../shared/data/opela_public_rows.csv` beside the repository); `--workers N` the processes that
align side by side (default: the CPUs, at most 8; the readings do not depend on it).

    .venv/bin/python benchmarks/align_benchmark.py [--dialogues 135] [--seeds 1] [--iterations 15]
    .venv/bin/python benchmarks/align_benchmark.py --skip-synthetic --gold ../shared/data/opela_gold_order
    .venv/bin/python benchmarks/align_benchmark.py --quick --gold ../shared/data/opela_gold_order

Aims (issue 5): >= 95% of sentences with their true labels; aligned-trained model within 0.03
mean macro-F1 of the true-trained one; among sentences with confidence >= 0.9, >= 90% correctly
placed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from _docs import add_docs_option, changed, docs_page, wants_docs  # benchmarks/_docs.py
from _downstream import downstream_part, gold_inputs  # benchmarks/_downstream.py

REAL_ROWS = Path(__file__).resolve().parents[2] / "shared" / "data" / "opela_public_rows.csv"
MODEL = dict(max_features=20_000, C=1.0, max_iter=300)
"""The classical model of the comparisons: the project's TF-IDF kind, trimmed to train fast."""


def _fmt(x: float) -> str:
    return "   n/a" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:6.3f}"


def _macro_f1(train: pd.DataFrame, test: pd.DataFrame, kind: str = "tfidf") -> dict[str, float]:
    from psyattrs.experiments.metrics import macro_f1
    from psyattrs.labels.soft import mixed_targets
    from psyattrs.models import build_model
    from psyattrs.schema import OPELA

    train = train[train[[f"labeler_{h}" for h in OPELA.head_names]].notna().all(axis=1) | train["is_pause"]]
    model = build_model(kind, OPELA, **(MODEL if kind == "tfidf" else {}))
    model.fit(train, mixed_targets(train, OPELA, lam=1.0))
    rows = test[~test["is_pause"].astype(bool)]
    pred = model.predict(rows)
    return {h: macro_f1(rows[f"labeler_{h}"].to_numpy(dtype=int), pred[h].to_numpy()) for h in OPELA.head_names}


def _reference_rows(corpus, truth, dialogues: int, seed: int, shape: str) -> None:
    """The same alignment with a sentence classifier trained on `dialogues` other conversations
    whose true order is known (a disjoint synthetic corpus): how far sentence-level label
    likelihoods can take the alignment on this generator."""
    from psyattrs.align import align_public
    from psyattrs.align.eval import score_reading
    from psyattrs.synth import synthesize
    from psyattrs.labels.soft import mixed_targets
    from psyattrs.models import build_model
    from psyattrs.schema import OPELA

    started = time.perf_counter()
    other = synthesize(dialogues, seed=seed + 1000, release_shape=shape == "release").utterances
    train = other[~other["is_pause"].astype(bool)]
    model = build_model("tfidf", OPELA, max_features=50_000, C=1.0, max_iter=300)
    model.fit(train, mixed_targets(train, OPELA, lam=1.0))
    fit_seconds = time.perf_counter() - started
    result = align_public(corpus, iterations=5, label_model=model, keep_history=True)
    print(f"reference: sentences scored by a classifier trained on {dialogues} other conversations with known order "
          f"({len(train)} sentences, fitted in {fit_seconds:.0f}s):")
    for snap, h in zip(result.snapshots, result.history.itertuples()):
        s = score_reading(snap, truth.order, corpus)
        label = "  round 0 (priors only)" if h.iteration == 0 else f"  round {h.iteration}"
        print(f"{label:<34} {_fmt(s['labels_exact']):>7} {_fmt(s['position_exact']):>9} {_fmt(h.changed):>8} "
              f"{_fmt(h.moved):>6} {h.seconds:6.1f}")


def synthetic_part(dialogues: int, seed: int, iterations: int, reference: int = 0, shape: str = "release") -> dict[str, float]:
    from psyattrs.align import align_public
    from psyattrs.align.eval import alternating_reading, pause_anchored_reading, score_reading
    from psyattrs.data.opela import read_public
    from psyattrs.synth import synthesize, write_public

    print(f"\n== synthetic: {dialogues} conversations, seed {seed}, {shape} shape ==")
    syn = synthesize(dialogues, seed=seed, release_shape=shape == "release")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "public.csv"
        truth = write_public(syn.utterances, syn.conversations, path, seed=seed)
        corpus = read_public(path)
    tc = truth.conversations
    print(
        f"{len(tc)} conversations, {int((~truth.order['is_pause']).sum())} sentences; quirks: "
        f"{int((tc['extra_lines'] > 0).sum())} with multi-line messages ({int(tc['extra_lines'].sum())} extra lines), "
        f"{int((~tc['pauses_counted'] & (tc['pause_count'] > 0)).sum())} with uncounted pauses, "
        f"{int(tc['trailing_newline'].sum())} trailing newlines, {int((tc['blank_user_lines'] > 0).sum())} with blank user lines"
    )
    started = time.perf_counter()
    result = align_public(corpus, iterations=iterations, keep_history=True)
    seconds = time.perf_counter() - started
    print(f"aligned in {seconds:.1f}s ({len(result.history)} rounds, stopped: {result.stopped})")
    shape_true = _true_shape(truth)
    print(f"true order: {shape_true['exact_runs']:.3f} of conversations with exactly 2 x total_turn speaker runs, "
          f"{shape_true['user_opens']:.3f} opened by the user, {shape_true['persona_closes']:.3f} closed by the persona; "
          f"{shape_true['pause_closes']:.3f} of pauses after a persona line and before a user line")
    print(f"{'reading':<34} {'labels':>7} {'position':>9} {'changed':>8} {'moved':>6} {'secs':>6}")
    for name, reading in (("naive: strict alternation", alternating_reading(corpus)),
                          ("naive: pause-anchored spreading", pause_anchored_reading(corpus))):
        s = score_reading(reading, truth.order, corpus)
        print(f"{name:<34} {_fmt(s['labels_exact']):>7} {_fmt(s['position_exact']):>9}")
    for snap, h in zip(result.snapshots, result.history.itertuples()):
        s = score_reading(snap, truth.order, corpus)
        label = "round 0 (priors only)" if h.iteration == 0 else f"round {h.iteration}"
        print(f"{label:<34} {_fmt(s['labels_exact']):>7} {_fmt(s['position_exact']):>9} {_fmt(h.changed):>8} "
              f"{_fmt(h.moved):>6} {h.seconds:6.1f}")
    final = score_reading(result.utterances, truth.order, corpus)
    if reference:
        _reference_rows(corpus, truth, reference, seed, shape)

    print("\ncalibration of align_confidence (non-pause rows):")
    rows = result.utterances[~result.utterances["is_pause"]]
    key = pd.MultiIndex.from_arrays([truth.order["doc_id"], truth.order["speaker"],
                                     truth.order["line_start"].astype(float), truth.order["line_end"].astype(float)])
    true_pos = pd.Series(truth.order["position"].to_numpy(dtype=float), index=key)
    got = true_pos.reindex(pd.MultiIndex.from_arrays([rows["doc_id"], rows["person_type"],
                                                      rows["line_start"].astype(float), rows["line_end"].astype(float)]))
    correct = got.to_numpy() == rows["label_position"].to_numpy(dtype=float)
    conf = rows["align_confidence"].to_numpy()
    print(f"{'confidence':<14} {'share of rows':>14} {'correctly placed':>17}")
    for lo, hi in ((0.0, 0.5), (0.5, 0.9), (0.9, 0.99), (0.99, 1.01), (0.9, 1.01)):
        sel = (conf >= lo) & (conf < hi)
        name = ">= 0.9 (all)" if (lo, hi) == (0.9, 1.01) else f"[{lo:.2f}, {min(hi, 1):.2f}{']' if hi > 1 else ')'}"
        print(f"{name:<14} {sel.mean():14.3f} {(correct[sel].mean() if sel.any() else float('nan')):17.3f}")

    print("\nclassical model (tfidf), trained on 70% of the conversations, scored on the true sentences of the rest:")
    public_to_source = dict(zip(tc["doc_id"], tc["source_doc_id"]))
    docs = np.array(sorted(public_to_source))
    rng = np.random.default_rng(seed)
    test_docs = set(rng.choice(docs, size=max(1, int(0.3 * len(docs))), replace=False))
    aligned = result.utterances.copy()
    aligned["source"] = aligned["doc_id"].map(public_to_source)
    true = syn.utterances
    train_src = {public_to_source[d] for d in docs if d not in test_docs}
    test_src = {public_to_source[d] for d in test_docs}
    f1_true = _macro_f1(true[true["doc_id"].isin(train_src)], true[true["doc_id"].isin(test_src)])
    f1_aligned = _macro_f1(aligned[aligned["source"].isin(train_src)], true[true["doc_id"].isin(test_src)])
    print(f"{'head':<9} {'true':>7} {'aligned':>8}")
    for h in f1_true:
        print(f"{h:<9} {f1_true[h]:7.3f} {f1_aligned[h]:8.3f}")
    mt, ma = np.nanmean(list(f1_true.values())), np.nanmean(list(f1_aligned.values()))
    print(f"{'mean':<9} {mt:7.3f} {ma:8.3f}   difference {mt - ma:+.3f} (aim: within 0.03)")
    return {"labels": final["labels_exact"], "position": final["position_exact"],
            "confident_correct": final["confident_correct"], "f1_gap": mt - ma, "seconds": seconds}


def _true_shape(truth) -> dict[str, float]:
    """The true order's shape: runs per total_turn, who opens and closes, where the pauses sit."""
    o = truth.order.sort_values(["doc_id"], kind="stable")
    out = {"exact_runs": [], "user_opens": [], "persona_closes": [], "pause_closes": []}
    for doc, g in o.groupby("doc_id", sort=False):
        kinds = np.where(g["is_pause"], "pause", g["speaker"]).tolist()
        speak = [k for k in kinds if k != "pause"]
        runs = 1 + sum(a != b for a, b in zip(speak, speak[1:]))
        total_turn = int(str(doc).rsplit("_", 2)[1])  # public doc_id: persona_user_turns_sentences
        out["exact_runs"].append(runs == 2 * total_turn)
        out["user_opens"].append(speak[0] == "user")
        out["persona_closes"].append(kinds[-1] != "user")
        for i, k in enumerate(kinds):
            if k == "pause":
                before = next((x for x in reversed(kinds[:i]) if x != "pause"), None)
                after = next((x for x in kinds[i + 1:] if x != "pause"), None)
                out["pause_closes"].append(before == "persona" and after in ("user", None))
    return {k: float(np.mean(v)) if v else float("nan") for k, v in out.items()}


def real_part(iterations: int) -> None:
    from sklearn.model_selection import GroupKFold

    from psyattrs.align import align_public
    from psyattrs.align.priors import SIGNATURE
    from psyattrs.data.opela import read_public
    from psyattrs.schema import OPELA

    print("\n== real rows ==")
    if not REAL_ROWS.is_file():
        print(f"skipped: {REAL_ROWS} is absent (this part reads the 135 real public-release rows when present)")
        return
    print(f"reading {REAL_ROWS}")
    corpus = read_public(REAL_ROWS)
    started, cpu = time.perf_counter(), _cpu()
    result = align_public(corpus, iterations=iterations)
    rep = result.report
    ok = rep[rep["status"] == "aligned"]
    u = result.utterances
    import os

    print(f"one full reconstruction: {time.perf_counter() - started:.1f}s wall, {_cpu() - cpu:.1f}s CPU (this process and "
          f"its workers), load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs at the end")
    print(f"aligned {len(ok)} of {len(rep)} conversations in {time.perf_counter() - started:.1f}s "
          f"({len(result.history)} rounds; the last changed the unit of {result.history['changed'].iloc[-1]:.1%} of the "
          f"labels and moved {result.history['moved'].iloc[-1]:.1%} of their posterior mass)")
    print(f"the rounds stopped: {result.stopped} (cap: the round cap; converged: every conversation frozen, or at "
          f"most min_change of the labels changed unit or of their posterior mass moved); {_stops(result)}")
    for _, r in rep[rep["status"] != "aligned"].iterrows():
        print(f"  set aside: {r['doc_id']}: {r['reason']}")
    labelled = u[u["label_position"].notna()]
    print(f"sentences: {int((~labelled['is_pause']).sum())} labelled, mean confidence {labelled['align_confidence'].mean():.3f}, "
          f"{(labelled['align_confidence'] >= 0.9).mean():.1%} >= 0.9")
    counted = ok["mode"] == "pauses counted"
    print(f"pause treatment: {int(counted.sum())} counted, {int((~counted).sum())} not counted; "
          f"{int(ok['merged_lines'].sum())} lines merged into {int(ok['multi_line_units'].sum())} multi-line sentences; "
          f"{int(ok['pauses_without_line'].sum())} labelled pause(s) without a blank line; "
          f"{int(ok['blank_lines_skipped'].sum())} blank lines skipped")
    pauses = labelled[labelled["is_pause"]]
    sig = np.all([pauses[f"labeler_{h}"].to_numpy() == v for h, v in SIGNATURE.items()], axis=0)
    print(f"labelled pauses on a pause-signature position: {sig.mean():.3f} ({int(sig.sum())} of {len(pauses)})")
    runs = ok["speaker_runs"] / ok["total_turn"]
    print(f"speaker runs per total_turn: median {runs.median():.2f} (IQR {runs.quantile(0.25):.2f}-{runs.quantile(0.75):.2f})")

    print("\npersona-grouped 4-fold cross-validation on the aligned real sentences (macro-F1):")
    groups = labelled["persona"].to_numpy()
    scores = {"tfidf": [], "majority": []}
    for train_idx, test_idx in GroupKFold(n_splits=4).split(labelled, groups=groups):
        train, test = labelled.iloc[train_idx], labelled.iloc[test_idx]
        for kind in scores:
            scores[kind].append(_macro_f1(train, test, kind))
    print(f"{'head':<9} {'tfidf':>7} {'majority':>9}")
    for h in OPELA.head_names:
        t = np.mean([s[h] for s in scores["tfidf"]])
        m = np.mean([s[h] for s in scores["majority"]])
        print(f"{h:<9} {t:7.3f} {m:9.3f}")
    t = np.mean([np.mean(list(s.values())) for s in scores["tfidf"]])
    m = np.mean([np.mean(list(s.values())) for s in scores["majority"]])
    print(f"{'mean':<9} {t:7.3f} {m:9.3f}")


ISSUE5 = {"turn_shape": 0.0, "coherence": False, "exact_turns": False, "pause_rule": 0.0, "damping": 0.0, "freeze_after": 0}
"""The settings of issue 5 (ALIGN_VERSION 2) where today's defaults differ."""
CONFIGS: dict[str, dict] = {
    "issue5": ISSUE5,
    "turns": {**ISSUE5, "turn_shape": 8.0},
    "exact": {**ISSUE5, "exact_turns": True},
    "pause": {**ISSUE5, "pause_rule": 8.0},
    "coherence": {**ISSUE5, "coherence": True},
    "damped": {**ISSUE5, "damping": 0.5},
    "all": {"turn_shape": 8.0, "exact_turns": True, "pause_rule": 8.0, "coherence": True, "damping": 0.5, "freeze_after": 0},
    "v3": {"freeze_after": 0, "coherence_pairs": False, "coherence_morphemes": False},
    "v4": {"coherence_pairs": False, "coherence_morphemes": False},
    "v5": {"coherence_morphemes": False},
    "defaults": {},
    "use": {"coherence_use": True},
    "use_alone": {"coherence_use": True, "coherence_only": ("use_cosine",)},
    "bigram_alone": {"coherence_only": ("bigram_overlap",)},
}
"""The configurations of the gold part: overrides of `AlignSettings` (issue5: the settings of issue 5;
each new source of evidence alone on top of them; all of them; v3: the defaults of ALIGN_VERSION 3, whose
rounds froze no conversation; v4: those of ALIGN_VERSION 4, whose coherence scores also counted what one
line alone says; v5: those of ALIGN_VERSION 5, whose coherence did not count the content morphemes both
lines hold; defaults: `AlignSettings()` as it is; use: the defaults with the USE sentence-encoder cosine
in the coherence model (issue 27); use_alone / bigram_alone: the coherence model's pair terms reduced
to the USE cosine / to the character-bigram overlap)."""


def _cv(labelled: pd.DataFrame) -> tuple[dict[str, float], dict[str, float]]:
    """Persona-grouped 4-fold CV macro-F1 per head: (tfidf, majority)."""
    from sklearn.model_selection import GroupKFold

    from psyattrs.schema import OPELA

    groups = labelled["persona"].to_numpy()
    scores = {"tfidf": [], "majority": []}
    for train_idx, test_idx in GroupKFold(n_splits=4).split(labelled, groups=groups):
        train, test = labelled.iloc[train_idx], labelled.iloc[test_idx]
        for kind in scores:
            scores[kind].append(_macro_f1(train, test, kind))
    return tuple({h: float(np.mean([s[h] for s in scores[k]])) for h in OPELA.head_names} for k in ("tfidf", "majority"))


def _shape(result) -> dict[str, float]:
    """Share of aligned conversations with exactly 2 x total_turn runs, opening with the user, closing with the persona."""
    rep = result.report[result.report["status"] == "aligned"]
    u = result.utterances
    units = u[~u["is_pause"].astype(bool)].sort_values(["doc_id", "position"])
    first = units.groupby("doc_id")["person_type"].first()
    last = u.sort_values(["doc_id", "position"]).groupby("doc_id").tail(1).set_index("doc_id")
    last_persona = (last["person_type"] == "persona") | last["is_pause"].astype(bool)
    turns = pd.to_numeric(rep["total_turn"], errors="coerce")
    return {"exact_runs": float((rep["speaker_runs"] == 2 * turns).mean()),
            "runs_off_by_1": float(((rep["speaker_runs"] - 2 * turns).abs() <= 1).mean()),
            "user_opens": float((first.reindex(rep["doc_id"]) == "user").mean()),
            "persona_closes": float(last_persona.reindex(rep["doc_id"]).fillna(False).mean())}


def gold_part(gold_dir: Path, iterations: int, configs: list[str], subset: int | None, cv: bool,
              seeds: tuple[int, ...] = (0,)) -> None:
    from psyattrs.align import align_public
    from psyattrs.align.gold import readers_agreement, score_gold, summarize

    print(f"\n== gold order: {gold_dir} ==")
    inputs = gold_inputs(gold_dir, REAL_ROWS)
    if inputs is None:
        return
    gold, corpus = inputs
    if subset is not None:
        docs = corpus.conversations["doc_id"].astype(str)
        others = [d for d in docs if d not in gold][:subset]
        keep = set(gold) | set(others)
        corpus = _subset(corpus, keep)
    n_conv = len(corpus.conversations)
    print(f"reading {REAL_ROWS} ({n_conv} conversations{'' if subset is None else ', a subset'}) and "
          f"{len(gold)} gold conversation(s), readers {sorted({r for g in gold.values() for r in g.orders})}")
    agree = readers_agreement(corpus, gold)
    table, extra, f1 = {}, {}, {}
    for name in configs:
        rights, per_seed, stops = [], [], []
        for seed in seeds:
            started = time.perf_counter()
            result = align_public(corpus, iterations=iterations, seed=seed, **CONFIGS[name])
            seconds = time.perf_counter() - started
            scored = score_gold(result.utterances, corpus, gold)
            rights.append(summarize(scored)["right"])
            a = scored[scored["agreed"]]
            high = a["confidence"] >= 0.9
            h = result.history
            stop = f"{result.stopped} after round {int(h['iteration'].iloc[-1])}"
            stops.append(stop)
            label = name if len(seeds) == 1 else f"{name}, seed {seed}"
            print(f"  {label}: conversations by how their rounds stopped: {_stops(result)}; gold ones: "
                  + ", ".join(f"{d} {r}" for d, r in result.report.set_index("doc_id")["rounds_stop"].reindex(list(gold)).items()))
            per_seed.append({"seconds": seconds, "last_changed": float(h["changed"].iloc[-1]),
                             "conf>=0.9 share": float(high.mean()), "conf>=0.9 right": float(a.loc[high, "right"].mean()),
                             "conf<0.9 right": float(a.loc[~high, "right"].mean()), **_shape(result)})
            if cv and seed == seeds[0]:
                labelled = result.utterances[result.utterances["label_position"].notna()]
                f1[name] = _cv(labelled)
            print(f"  aligned under {label!r} ({CONFIGS[name]}) in {seconds:.0f}s; {stop}")
        # several seeds (of the folds and solvers): the median of each figure, the overall share per seed
        table[name] = pd.concat(rights, axis=1).median(axis=1)
        extra[name] = {**pd.DataFrame(per_seed).median().to_dict(), "stop": "; ".join(stops)}
        if len(seeds) > 1:
            extra[name]["all right per seed"] = " ".join(f"{r['all']:.3f}" for r in rights)
    lines = summarize(score_gold(result.utterances, corpus, gold))["lines"]
    out = pd.DataFrame({"agreed lines": lines, "readers agree": agree.reindex(lines.index)})
    out.loc["all", "readers agree"] = float(np.average(agree.reindex(lines.index[:-1]), weights=None)) if len(agree) else np.nan
    for name in configs:
        out[name] = table[name]
    print("\nshare of agreed user lines placed as both readers place them (readers agree: share of all user lines)"
          + (f"; per configuration the median over seeds {', '.join(map(str, seeds))};" if len(seeds) > 1 else ";"))
    print("in-sample: the aligner's defaults were chosen on these same hand-read conversations")
    print(out.to_string(float_format=lambda x: f"{x:.3f}"))
    print("\nper configuration:")
    print(pd.DataFrame(extra).to_string(float_format=lambda x: f"{x:.3f}"))
    if len(configs) > 1:
        _loo_choice(out, configs)
    if any(CONFIGS[n].get("coherence_use") for n in configs):
        speaker_change_check(corpus, gold)
    if cv:
        print("\npersona-grouped 4-fold CV macro-F1 on the reconstructed real sentences (tfidf per configuration; majority floor):")
        heads = list(next(iter(f1.values()))[0])
        rows = {h: {**{n: f1[n][0][h] for n in f1}, "majority": next(iter(f1.values()))[1][h]} for h in heads}
        df = pd.DataFrame(rows).T
        df.loc["mean"] = df.mean()
        print(df.to_string(float_format=lambda x: f"{x:.3f}"))


def _loo_choice(out: pd.DataFrame, configs: list[str]) -> None:
    """Leave-one-conversation-out choice among the configurations: for each gold conversation, the
    configuration that placed the most agreed user lines right on the other gold conversations (a tie:
    the first listed), scored on the held-out one; nothing is chosen and scored on the same one."""
    per = out.drop(index="all")
    right = per[configs].multiply(per["agreed lines"], axis=0)
    rows, total = [], 0.0
    for doc in per.index:
        rest = right.drop(index=doc).sum()
        pick = max(configs, key=lambda n: (rest[n], -configs.index(n)))
        rows.append({"doc_id": doc, "chosen on the others": pick, "right": per.loc[doc, pick]})
        total += right.loc[doc, pick]
    table = pd.DataFrame(rows).set_index("doc_id")
    print(f"\nleave-one-conversation-out choice among {', '.join(configs)} (chosen on the other gold conversations, "
          "scored on the held-out one):")
    print(table.to_string(float_format=lambda x: f"{x:.3f}"))
    print(f"all: {total / per['agreed lines'].sum():.3f} of {int(per['agreed lines'].sum())} agreed user lines placed right"
          f" (first listed, {configs[0]}: {out.loc['all', configs[0]]:.3f})")


def speaker_change_check(corpus, gold) -> None:
    """At each speaker change both readers agree on (the same two lines adjacent in every reading, blank
    lines skipped), which of the previous speaker's true last line and its two same-speaker neighbours
    (non-blank lines) is closest to the reply: by the USE cosine, by the coherence model's
    character-bigram overlap; chance is 1 / the candidates. Ties count 1 / the tied candidates."""
    from psyattrs.align.coherence import FEATURES, PairFeaturizer
    from psyattrs.align.sentvec import sentence_vectors

    u = corpus.utterances
    u = u[u["doc_id"].astype(str).isin(set(gold))]
    text = {(str(d), "P" if t == "persona" else "U", int(k)): x
            for d, t, k, x, b in zip(u["doc_id"], u["person_type"], u["line"], u["text"], u["is_blank"]) if not b}
    vec = sentence_vectors(list(text.values()))
    feat = PairFeaturizer(list(text.values()))
    big = FEATURES.index("bigram_overlap")
    hits = {"USE cosine": [], "bigram overlap": [], "chance": []}
    for doc, g in gold.items():
        changes = []
        for order in g.orders.values():
            seq = [(w, i) for w, i in order if (doc, w, i) in text]
            changes.append({(a, b) for a, b in zip(seq, seq[1:]) if a[0] != b[0]})
        for (who, i), reply in sorted(set.intersection(*changes)):
            own = sorted(k for (d, w, k) in text if d == doc and w == who)
            r = own.index(i)
            cands = own[max(0, r - 1): r + 2]
            lines = [text[(doc, who, k)] for k in cands]
            right = text[(doc, reply[0], reply[1])]
            truth = cands.index(i)
            scores = {"USE cosine": np.array([float(vec[x] @ vec[right]) for x in lines]),
                      "bigram overlap": feat.features(lines, [right])[:, 0, big]}
            for name, sc in scores.items():
                best = np.flatnonzero(np.isclose(sc, sc.max()))
                hits[name].append(float(truth in best) / len(best))
            hits["chance"].append(1.0 / len(cands))
    n = len(hits["chance"])
    print(f"\nspeaker-change check on the gold conversations: {n} changes both readers agree on; the true last line of the "
          "previous speaker picked among it and its two same-speaker neighbours:")
    print("  " + ", ".join(f"{name} {np.mean(v):.3f}" for name, v in hits.items()))


def _stops(result) -> str:
    """How the aligned conversations' rounds stopped (`rounds_stop`: settled, flipping, cycle, open), with the
    rounds they froze at."""
    rep = result.report[result.report["status"] == "aligned"]
    parts = []
    for reason, g in rep.groupby("rounds_stop"):
        at = g["frozen_round"].dropna()
        parts.append(f"{len(g)} {reason}" + (f" (rounds {int(at.min())}-{int(at.max())})" if len(at) else ""))
    return ", ".join(parts)


def _subset(corpus, keep: set[str]):
    from dataclasses import replace

    conv = corpus.conversations[corpus.conversations["doc_id"].astype(str).isin(keep)].reset_index(drop=True)
    utt = corpus.utterances[corpus.utterances["doc_id"].astype(str).isin(keep)].reset_index(drop=True)
    seq = corpus.label_sequences[corpus.label_sequences["doc_id"].astype(str).isin(keep)].reset_index(drop=True)
    return replace(corpus, conversations=conv, utterances=utt, label_sequences=seq, source=None)


def _cpu() -> float:
    """CPU seconds of this process and its finished children (the aligner's workers)."""
    import os

    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _use_workers(n: int) -> None:
    """Every `align_public` of this script aligns in `n` processes."""
    import functools

    import psyattrs.align as align

    align.align_public = functools.partial(align.align_public, workers=n)


DOCS_INTRO = 'The order reconstruction of the public release (`psyattrs data align`): on synthetic public-format corpora, where the true order is known, and on the real rows (against hand-made orders with `--gold`). Gold-order figures of settings chosen on the six hand-read conversations are in-sample.'


def main(argv: list[str] | None = None) -> int:
    global REAL_ROWS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dialogues", type=int, default=135, help="synthetic conversations (default 135, as the real rows)")
    parser.add_argument("--seeds", type=int, default=1, help="synthetic corpora, seeds 1..N (default 1)")
    parser.add_argument("--iterations", type=int, default=15, help="classifier rounds at most (default 15, as AlignSettings)")
    parser.add_argument("--reference", type=int, default=500, metavar="N",
                        help="also align with a classifier trained on N other synthetic conversations of known order "
                        "(default 500; 0 = skip)")
    parser.add_argument("--synth-shape", choices=("release", "free"), default="release",
                        help="synthetic conversations shaped as the release's (default: the user opens, the persona "
                        "closes, pauses close persona runs, replies answer) or free (the simulation of issue 5)")
    parser.add_argument("--skip-real", action="store_true", help="do not run the real-rows part")
    parser.add_argument("--skip-synthetic", action="store_true", help="do not run the synthetic part")
    parser.add_argument("--gold", type=Path, default=None, metavar="DIR", help="score the real rows against hand-made orders in DIR")
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"gold part configurations (default {','.join(CONFIGS)})")
    parser.add_argument("--subset", type=int, default=None, metavar="N", help="gold part: align the gold conversations and N others only")
    parser.add_argument("--no-cv", action="store_true", help="gold part: skip the downstream cross-validation")
    parser.add_argument("--quick", action="store_true",
                        help="a few minutes: 30 synthetic conversations, 6 rounds, no full real-rows part, gold part on a "
                        "subset of 24 under the defaults only, no CV")
    parser.add_argument("--rows", type=Path, default=None, metavar="PATH",
                        help=f"the real public-release rows (default {REAL_ROWS})")
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="processes that align side by side (default: the CPUs, at most 8)")
    parser.add_argument("--gold-seeds", type=int, default=1, metavar="N",
                        help="gold part: align under each configuration with seeds 0..N-1 of the folds and solvers "
                        "and report medians (default 1: seed 0 only; the CV runs on seed 0)")
    parser.add_argument("--skip-downstream", action="store_true",
                        help="gold part: leave out the downstream table and the small-file comparison")
    parser.add_argument("--downstream-only", action="store_true",
                        help="with --gold: only the downstream table and the small-file comparison (issue 27)")
    parser.add_argument("--whole", type=Path, default=None, metavar="ALIGNED_CSV",
                        help="downstream part: read the whole file's alignment (a `data align` output of --rows under "
                        "today's defaults) for the small-file comparison instead of aligning it again")
    add_docs_option(parser)
    args = parser.parse_args(argv)
    write = wants_docs(args, partial=changed(parser, args, "dialogues", "seeds", "iterations", "reference", "synth_shape",
                                             "skip_real", "skip_synthetic", "configs", "subset", "no_cv", "quick", "rows",
                                             "gold_seeds", "skip_downstream", "downstream_only", "whole"))
    if args.downstream_only and args.gold is None:
        parser.error("--downstream-only needs --gold DIR")
    if args.downstream_only:
        args.skip_synthetic = args.skip_real = True
    if args.rows is not None:
        REAL_ROWS = args.rows.resolve()
    if args.workers is not None:
        if args.workers < 1:
            parser.error("--workers must be >= 1")
        _use_workers(args.workers)
    if args.quick:
        given = {a.split("=")[0] for a in (argv if argv is not None else sys.argv[1:])}
        args.dialogues = args.dialogues if "--dialogues" in given else 30
        args.iterations = args.iterations if "--iterations" in given else 6
        args.reference = args.reference if "--reference" in given else 0
        args.subset = args.subset if "--subset" in given else 24
        args.configs = args.configs if "--configs" in given else "defaults"
        args.skip_real, args.no_cv = True, True
        print(f"--quick: {args.dialogues} synthetic conversations, {args.iterations} rounds at most, no full real-rows "
              f"part, gold part on the gold conversations and {args.subset} others under {args.configs}, no CV")
    with docs_page("align", "Alignment benchmark", write=write, intro=DOCS_INTRO, page=args.page):
        configs = [c for c in args.configs.split(",") if c]
        bad = [c for c in configs if c not in CONFIGS]
        if bad:
            parser.error(f"unknown configuration(s) {bad}; known: {list(CONFIGS)}")
        summaries = [] if args.skip_synthetic else [
            synthetic_part(args.dialogues, seed, args.iterations, args.reference, args.synth_shape)
            for seed in range(1, args.seeds + 1)]
        if len(summaries) > 1:
            print("\n== synthetic, over seeds ==")
            print(pd.DataFrame(summaries).describe().loc[["mean", "min", "max"]].round(3).to_string())
        if not args.skip_real:
            real_part(args.iterations)
        if args.gold is not None and not args.downstream_only:
            gold_part(args.gold, args.iterations, configs, args.subset, not args.no_cv,
                      tuple(range(max(1, args.gold_seeds))))
        if args.gold is not None and not args.skip_downstream:
            downstream_part(args.gold, REAL_ROWS, args.iterations, args.quick, args.whole)
        return 0


if __name__ == "__main__":
    sys.exit(main())
