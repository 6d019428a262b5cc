"""The scratch tokenizer (`train_tokenizer`): the same vocabulary in every process, the learnt merges
against a plain (non-incremental) BPE, vocab_size and min_frequency, Korean and Chinese pieces, and
the word counting. Texts come from the synthetic corpus and from sentences written here.
"""

import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from psyattrs.models.transformer.tokenizer import MARKERS, SPECIAL_TOKENS, _count_words, _learn_vocabulary, train_tokenizer
from psyattrs.synth import synthesize

SPECIALS = [*SPECIAL_TOKENS, *MARKERS]


def _texts(n_dialogues: int) -> list[str]:
    table = synthesize(n_dialogues, seed=3).utterances
    return table.loc[~table["is_pause"].astype(bool), "text"].tolist()


def _merged(vocab) -> list[str]:
    """The pieces made by merges: neither special nor one character (with or without `##`)."""
    return [p for p in vocab if p not in SPECIALS and len(p.removeprefix("##")) > 1]


TRAIN_AND_SAVE = """
import sys
from psyattrs.models.transformer.tokenizer import train_tokenizer
from psyattrs.synth import synthesize
table = synthesize(12, seed=3).utterances
texts = table.loc[~table["is_pause"].astype(bool), "text"].tolist()
train_tokenizer(texts, vocab_size=1500).save_pretrained(sys.argv[1])
"""


def test_two_processes_save_byte_identical_tokenizers(tmp_path):
    folders = []
    for seed in ("1", "2", "3"):
        folder = tmp_path / f"hashseed{seed}"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-c", TRAIN_AND_SAVE, str(folder)], env=env, check=True, capture_output=True)
        folders.append(folder)
    files = sorted(p.name for p in folders[0].iterdir())
    assert "tokenizer.json" in files
    for other in folders[1:]:
        assert sorted(p.name for p in other.iterdir()) == files
        for name in files:
            assert (other / name).read_bytes() == (folders[0] / name).read_bytes(), name
    vocab = json.loads((folders[0] / "tokenizer.json").read_text())["model"]["vocab"]
    assert len(vocab) == 1500 and len(_merged(vocab)) > 500  # many merges, many of them ties
    assert [t for t, i in sorted(vocab.items(), key=lambda kv: kv[1])][:len(SPECIALS)] == SPECIALS


def _naive_bpe(words: Counter, initial: list[str], vocab_size: int, min_frequency: int) -> list[str]:
    """BPE recounting every pair at every step (slow, obviously right); same tie-break."""
    vocab = list(dict.fromkeys(initial))
    seqs = {w: [ch if k == 0 else "##" + ch for k, ch in enumerate(w)] for w in sorted(words)}
    for seq in seqs.values():
        vocab.extend(p for p in seq if p not in vocab)
    while len(vocab) < vocab_size:
        pairs = Counter()
        for w, seq in seqs.items():
            for pair in zip(seq, seq[1:]):
                pairs[pair] += words[w]
        if not pairs:
            break
        (a, b), count = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))
        if count < max(min_frequency, 1):
            break
        new = a + b.removeprefix("##")
        if new not in vocab:
            vocab.append(new)
        for w, seq in seqs.items():
            out, k = [], 0
            while k < len(seq):
                if k + 1 < len(seq) and seq[k] == a and seq[k + 1] == b:
                    out.append(new)
                    k += 2
                else:
                    out.append(seq[k])
                    k += 1
            seqs[w] = out
    return vocab


@pytest.mark.parametrize("vocab_size, min_frequency", [(900, 2), (1300, 1), (100_000, 3)])
def test_incremental_merges_equal_a_naive_bpe(vocab_size, min_frequency):
    tok = train_tokenizer(["x"]).backend_tokenizer  # its normalizer and pre-tokenizer
    words = _count_words(tok, _texts(3))
    # words that make the same piece by two merge paths (ab + ##c, a + ##bc) and repeated pairs
    words.update({"abc": 3, "ab": 2, "bc": 2, "abcabc": 2, "aaaa": 3, "##": 2})
    alphabet = sorted(set("".join(words)))
    got = _learn_vocabulary(words, SPECIALS + alphabet, vocab_size=vocab_size, min_frequency=min_frequency)
    assert got == _naive_bpe(words, SPECIALS + alphabet, vocab_size, min_frequency)
    assert len(got) == len(set(got)) and len(_merged(got)) > 100


def test_vocab_size_is_respected():
    texts = _texts(12)
    initial = train_tokenizer(texts, vocab_size=100)  # below the alphabet: no merge at all
    assert _merged(initial.get_vocab()) == []
    assert set(initial.get_vocab()) >= set(SPECIALS) | {ch for t in texts for ch in t if not ch.isspace()}
    for size in (len(initial) + 1, 1200, 1500):
        tok = train_tokenizer(texts, vocab_size=size)
        assert len(tok.get_vocab()) == len(tok) == size
    assert sorted(train_tokenizer(texts, vocab_size=1200).get_vocab()) != sorted(tok.get_vocab())


def test_min_frequency_is_respected():
    texts = ["xy xy xy zw zw"]
    assert {"xy", "zw"} <= set(train_tokenizer(texts, vocab_size=100, min_frequency=2).get_vocab())
    three = set(train_tokenizer(texts, vocab_size=100, min_frequency=3).get_vocab())
    assert "xy" in three and "zw" not in three
    assert _merged(train_tokenizer(texts, vocab_size=100, min_frequency=4).get_vocab()) == []
    # on a corpus: every merged piece occurs (where it may: word start or not) min_frequency times or more
    texts = _texts(6)
    words = _count_words(train_tokenizer(["x"]).backend_tokenizer, texts)
    for min_frequency in (2, 5):
        merged = _merged(train_tokenizer(texts, vocab_size=100_000, min_frequency=min_frequency).get_vocab())
        assert merged
        for piece in merged:
            if piece.startswith("##"):
                seen = sum(c for w, c in words.items() if piece[2:] in w[1:])
            else:
                seen = sum(c for w, c in words.items() if w.startswith(piece))
            assert seen >= min_frequency, piece
    assert len(merged) < len(_merged(train_tokenizer(texts, vocab_size=100_000, min_frequency=2).get_vocab()))


def test_korean_and_chinese_training_sentences_have_no_unknown_pieces(tmp_path):
    from transformers import AutoTokenizer

    chinese = ["我今天很开心，你呢？", "今天天气很好。", "周末我们一起去看电影吧", "你最近工作忙不忙？"]
    texts = _texts(6) + chinese * 2
    tok = train_tokenizer(texts, vocab_size=1200)
    assert len(_merged(tok.get_vocab())) > 300  # Hangul words merged into real pieces
    tok.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    for text in texts:
        pieces = loaded.tokenize(text)
        assert "[UNK]" not in pieces, text
        assert "".join(p.removeprefix("##") for p in pieces) == "".join(text.split())
    assert loaded.tokenize("周末我们") == ["周", "末", "我", "们"]  # one ideograph each
    assert loaded.convert_tokens_to_ids("[TGT]") != loaded.unk_token_id


def test_words_are_counted_as_the_pre_tokenizer_cuts_each_text():
    tok = train_tokenizer(["x"]).backend_tokenizer
    texts = ["\u0301abc def", "cafe\u0301 bar!", "a\x00b\tc\n d", "我们，好吗？", "don't-stop...", "끝", "\u0301", "x\r\ny"]
    one_by_one = Counter(w for t in texts for w, _ in tok.pre_tokenizer.pre_tokenize_str(tok.normalizer.normalize_str(t)))
    for chunk in (1, 2, 3, 100):
        assert _count_words(tok, texts, chunk=chunk) == one_by_one
    assert one_by_one["café"] == 1 and "cafe" not in one_by_one  # NFC
    assert "é" in train_tokenizer(["cafe\u0301 cafe\u0301"]).get_vocab()
