"""Benchmark: the scratch tokenizer's deterministic trainer against `tokenizers`' WordPieceTrainer.

`train_tokenizer` learns its WordPiece vocabulary in Python (incremental BPE, ties broken by the
pair's strings); before, it ran `tokenizers.trainers.WordPieceTrainer` (Rust, ties in hash order).
For synthetic corpora of growing size (`psyattrs.synth`, the non-pause sentences; the first holds
the dialogues of `psyattrs data synth --dialogues 100 --seed 7`, i.e. the demo's conversations
without its `--rare-boost 3`, so not the demo corpus itself) this prints, best of `--rounds`
rounds each: training seconds of both, their vocabulary sizes, the share of pieces they have in
common, and the pieces per word each gives on the same texts. Every figure is measured in this run.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/tokenizer_benchmark.py [--dialogues 100 400]
        [--vocab-size 4000] [--rounds 3] [--write-docs | --no-write-docs]

A run with the default corpora, vocabulary size and rounds writes its output to
docs/benchmarks/tokenizer.md (`benchmarks/_docs.py`).
"""

from __future__ import annotations

import argparse
import time

from _docs import add_docs_option, changed, docs_page, wants_docs  # benchmarks/_docs.py


def reference(texts, *, vocab_size: int = 4000, min_frequency: int = 2):
    """The former `train_tokenizer`'s vocabulary: `tokenizers`' WordPieceTrainer, same settings."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    from psyattrs.models.transformer.tokenizer import MARKERS, SPECIAL_TOKENS

    texts = [t for t in texts if isinstance(t, str) and t.strip()]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.Sequence(
        [normalizers.NFC(), normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                        strip_accents=False, lowercase=False)]
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    alphabet = sorted({ch for t in texts for ch in t if not ch.isspace()})
    trainer = trainers.WordPieceTrainer(
        vocab_size=max(vocab_size, len(alphabet) + len(SPECIAL_TOKENS) + len(MARKERS) + 1),
        min_frequency=min_frequency, special_tokens=[*SPECIAL_TOKENS, *MARKERS],
        initial_alphabet=alphabet, limit_alphabet=len(alphabet) + 1, show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def _best(fn, rounds: int):
    best, out = float("inf"), None
    for _ in range(rounds):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dialogues", type=int, nargs="+", default=[100, 400])
    parser.add_argument("--vocab-size", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=3)
    add_docs_option(parser)
    args = parser.parse_args()
    write = wants_docs(args, partial=changed(parser, args, "dialogues", "vocab_size", "rounds"))
    with docs_page("tokenizer", "Tokenizer benchmark", write=write, intro=INTRO):
        run(args)


INTRO = (
    "The scratch transformer's deterministic WordPiece trainer (`train_tokenizer`) against `tokenizers`' "
    "`WordPieceTrainer` on synthetic corpora (`synthesize(N, seed=7)`, without the demo's `--rare-boost 3`): "
    "training seconds (best of the rounds), vocabulary sizes, the share of pieces in common and pieces per word."
)


def run(args: argparse.Namespace) -> None:
    """Prints the table."""
    from psyattrs.models.transformer.tokenizer import train_tokenizer
    from psyattrs.synth import synthesize

    print(f"vocab_size {args.vocab_size}, min_frequency 2, best of {args.rounds} rounds")
    print(f"{'dialogues':>9} {'sentences':>9} {'ours s':>7} {'tokenizers s':>12} {'ours vocab':>10} "
          f"{'ref vocab':>9} {'shared':>6} {'ours pcs/word':>13} {'ref pcs/word':>12}")
    for n in args.dialogues:
        table = synthesize(n, seed=7).utterances
        texts = table.loc[~table["is_pause"].astype(bool), "text"].tolist()
        ours_s, ours = _best(lambda: train_tokenizer(texts, vocab_size=args.vocab_size), args.rounds)
        ref_s, ref = _best(lambda: reference(texts, vocab_size=args.vocab_size), args.rounds)
        a, b = set(ours.get_vocab()), set(ref.get_vocab())
        words = [w for t in texts for w, _ in ref.pre_tokenizer.pre_tokenize_str(ref.normalizer.normalize_str(t))]
        pieces_ours = sum(len(e.tokens) for e in ours.backend_tokenizer.encode_batch(texts, add_special_tokens=False))
        pieces_ref = sum(len(e.tokens) for e in ref.encode_batch(texts, add_special_tokens=False))
        print(f"{n:>9} {len(texts):>9,} {ours_s:>7.2f} {ref_s:>12.2f} {len(a):>10,} {len(b):>9,} "
              f"{len(a & b) / len(a | b):>6.1%} {pieces_ours / len(words):>13.3f} {pieces_ref / len(words):>12.3f}")


if __name__ == "__main__":
    main()
