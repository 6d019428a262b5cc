"""Check: does a lighter kiwipiepy analyser tokenise exactly as `Kiwi()` does?

`Kiwi()` loads its typo dictionary and its multi-word dictionary (WikiData proper nouns), which
costs about half of its start-up (see benchmarks/startup_benchmark.py). A lighter option set is
only acceptable if the features see the same tokens. For every option set this counts the
sentences whose tokens differ from `Kiwi()`'s, analysing each normalised sentence as the features
do, both ways: whole (`analysis: sentence`) and word by word (`analysis: word`, the default of
the TF-IDF and LightGBM models). The sentences are

- the real rows: every line of `persona_text_all` and `user_text_all` of
  `../shared/data/opela_public_rows.csv` (skipped, saying so, when the file is absent);
- a synthetic corpus (`psyattrs.synth.synthesize`, `--dialogues`, `--seed`, as `psyattrs data
  synth` writes it).

Only counts are printed (no text of the real rows), with the first `--examples` differing
synthetic sentences' tokens. Each option set's load is timed too (wall and CPU seconds of a fresh
analyser up to its first sentence, in this process: indicative only).

First it measures whether loading the analyser in a background thread could overlap with the
main thread's work (imports, MLflow, unpickling: all Python): a thread loads `Kiwi()` and
analyses a first sentence while the main thread only reads the clock; every gap of more than
50 ms between two readings is time the main thread could not run (the analyser holding the GIL,
or the machine's other processes). Gaps as long as the load itself mean no overlap is possible.

    .venv/bin/python benchmarks/kiwi_options_check.py [--rows ../shared/data/opela_public_rows.csv]
        [--dialogues 300] [--seed 0] [--examples 5]
"""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path

import pandas as pd

from psyattrs.features.tokenizers import normalize_text
from psyattrs.synth import synthesize

REPO = Path(__file__).resolve().parents[1]
ROWS = REPO.parent / "shared" / "data" / "opela_public_rows.csv"
OPTION_SETS: dict[str, dict[str, bool]] = {
    "Kiwi()": {},
    "load_typo_dict=False": {"load_typo_dict": False},
    "load_multi_dict=False": {"load_multi_dict": False},
    "both False": {"load_typo_dict": False, "load_multi_dict": False},
}


def real_sentences(path: Path) -> list[str] | None:
    """The normalised, non-empty lines of both text columns, or None when the file is absent."""
    if not path.is_file():
        return None
    frame = pd.read_csv(path, usecols=["persona_text_all", "user_text_all"], dtype=str)
    lines = [line for column in frame.columns for text in frame[column].dropna() for line in text.split("\n")]
    return [s for s in (normalize_text(line) for line in lines) if s]


def synthetic_sentences(dialogues: int, seed: int) -> list[str]:
    """The normalised, non-empty sentences of a synthetic corpus."""
    table = synthesize(dialogues, seed=seed).utterances
    return [s for s in (normalize_text(t) for t in table["text"]) if s]


def analyser(options: dict[str, bool]):
    """A fresh analyser (as `psyattrs.features.tokenizers` makes one, plus `options`), its load timed."""
    from kiwipiepy import Kiwi

    wall, cpu = time.perf_counter(), time.process_time()
    kiwi = Kiwi(num_workers=2, **options)
    kiwi.tokenize("안녕하세요")  # the model is built lazily, on the first analysis
    return kiwi, time.perf_counter() - wall, time.process_time() - cpu


def gil_stalls(threshold: float = 0.05) -> tuple[float, float, float]:
    """(seconds the thread took to load Kiwi() and analyse a first sentence, seconds the main
    thread was stalled in gaps over `threshold`, the longest gap) while the main thread spins."""
    done: dict[str, float] = {}

    def load() -> None:
        start = time.perf_counter()
        analyser({})
        done["load"] = time.perf_counter() - start

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    stalled, longest, last = 0.0, 0.0, time.perf_counter()
    while thread.is_alive():
        now = time.perf_counter()
        if now - last > threshold:
            stalled += now - last
            longest = max(longest, now - last)
        last = now
    thread.join()
    return done["load"], stalled, longest


def tokens(kiwi, texts: list[str]) -> list[tuple[str, ...]]:
    return [tuple(f"{t.form}/{t.tag}" for t in result) for result in kiwi.tokenize(texts)]


def by_sentence(kiwi, sentences: list[str]) -> dict[str, tuple[str, ...]]:
    """Each distinct sentence analysed whole."""
    distinct = list(dict.fromkeys(sentences))
    return dict(zip(distinct, tokens(kiwi, distinct)))


def by_word(kiwi, sentences: list[str]) -> dict[str, tuple[str, ...]]:
    """Each distinct sentence as its words analysed one by one."""
    words = list(dict.fromkeys(w for s in sentences for w in s.split()))
    of_word = dict(zip(words, tokens(kiwi, words)))
    return {s: tuple(t for w in s.split() for t in of_word[w]) for s in dict.fromkeys(sentences)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=Path, default=ROWS, help="the real public rows (skipped when absent)")
    parser.add_argument("--dialogues", type=int, default=300, help="synthetic conversations (default 300)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--examples", type=int, default=5, help="differing synthetic sentences to show")
    args = parser.parse_args()

    load, stalled, longest = gil_stalls()
    print(f"Kiwi() loaded in a thread in {load:.2f} s; the main thread meanwhile stalled {stalled:.2f} s "
          f"({stalled / load:.0%}) in gaps over 50 ms, the longest {longest:.2f} s\n", flush=True)

    corpora: dict[str, list[str]] = {}
    real = real_sentences(args.rows)
    if real is None:
        print(f"{args.rows} is absent: the real rows are skipped")
    else:
        corpora["real rows"] = real
    synthetic = synthetic_sentences(args.dialogues, args.seed)
    corpora[f"synthetic ({args.dialogues} dialogues, seed {args.seed})"] = synthetic

    reference: dict[tuple[str, str], dict[str, tuple[str, ...]]] = {}
    examples: list[str] = []
    print(f"{'options':22s} {'load s (wall / CPU)':>20s}  {'corpus':40s} {'unit':8s} {'sentences':>9s} "
          f"{'distinct':>8s} {'differ':>6s} {'distinct differ':>15s}", flush=True)
    for name, options in OPTION_SETS.items():
        kiwi, wall, cpu = analyser(options)
        for corpus, sentences in corpora.items():
            for unit, analyse in (("sentence", by_sentence), ("word", by_word)):
                got = analyse(kiwi, sentences)
                ref = reference.setdefault((corpus, unit), got)
                differ = {s for s in got if got[s] != ref[s]}
                n_differ = sum(s in differ for s in sentences)
                print(f"{name:22s} {f'{wall:.2f} / {cpu:.2f}':>20s}  {corpus:40s} {unit:8s} {len(sentences):9d} "
                      f"{len(got):8d} {n_differ:6d} {len(differ):15d}", flush=True)
                if corpus.startswith("synthetic") and len(examples) < args.examples:
                    for s in list(differ)[: args.examples - len(examples)]:
                        examples.append(f"{name}, {unit}: {' '.join(ref[s])}  ->  {' '.join(got[s])}")
        del kiwi
    if examples:
        print("\nfirst differing synthetic sentences (tokens with Kiwi() -> with the option):")
        print("\n".join(examples))

if __name__ == "__main__":
    main()
