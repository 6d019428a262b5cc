"""A WordPiece tokenizer trained on the training texts (the `scratch` backbone), with `tokenizers`.

The result is a `transformers` fast tokenizer, saved and loaded with `save_pretrained` /
`AutoTokenizer.from_pretrained` like any hub tokenizer, so the scratch backbone and pretrained ones
share one code path.

Pre-tokenisation splits on whitespace and punctuation and puts every CJK ideograph apart (as BERT
does for Chinese); the text is NFC-normalised and neither lower-cased nor accent-stripped, because
accent stripping decomposes Hangul syllables into jamo. Every character seen in training is in the
alphabet, so a Korean or Chinese training sentence never becomes unknown tokens; unseen characters at
prediction time become `[UNK]`.

The vocabulary is learnt here rather than by `tokenizers`' `WordPieceTrainer`, which breaks ties
between equally frequent merges in hash order (differently in every process): the same BPE merges
(a word starts as its first character and `##`-prefixed continuation characters; the most frequent
adjacent pair is merged until the vocabulary is full or the top pair is rarer than `min_frequency`),
with ties broken by the pair's strings, so the same texts and arguments give the same vocabulary, and
the same token ids, in every process.
"""

from __future__ import annotations

import heapq
from collections import Counter
from typing import Iterable, Mapping

SPECIAL_TOKENS: tuple[str, ...] = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
TARGET_OPEN = "[TGT]"
TARGET_CLOSE = "[/TGT]"
MARKERS: tuple[str, str] = (TARGET_OPEN, TARGET_CLOSE)


def train_tokenizer(texts: Iterable[str], *, vocab_size: int = 4000, min_frequency: int = 2):
    """Trains a WordPiece tokenizer on texts.

    Args:
        texts: the training sentences (context sentences included: they are all training text).
        vocab_size: the largest vocabulary (special tokens and the alphabet included), >= 100;
            the vocabulary always holds the special tokens, every training character and the `##`
            form of every character seen inside a word, so it is larger when these are more.
        min_frequency: a merge needs this many occurrences.

    Returns:
        A `transformers.PreTrainedTokenizerFast` with `[PAD] [UNK] [CLS] [SEP] [MASK]` and the
        target markers `[TGT] [/TGT]` as special tokens.

    Raises:
        ValueError: vocab_size below 100, or no text with a character in it.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 100:
        raise ValueError(f"vocab_size must be an integer >= 100, got {vocab_size!r}")
    texts = [t for t in texts if isinstance(t, str) and t.strip()]
    if not texts:
        raise ValueError("cannot train a tokenizer: no training sentence has any character")
    tok = Tokenizer(models.WordPiece(vocab={"[UNK]": 0}, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.Sequence(
        [normalizers.NFC(), normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                        strip_accents=False, lowercase=False)]
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    words = _count_words(tok, texts)
    # the raw characters and those of the normalised words (NFC may compose new ones)
    alphabet = sorted({ch for ch in set("".join(texts)) if not ch.isspace()} | set("".join(words)))
    specials = [*SPECIAL_TOKENS, *MARKERS]
    learnt = _learn_vocabulary(words, specials + alphabet,
                               vocab_size=max(vocab_size, len(specials) + len(alphabet) + 1),
                               min_frequency=min_frequency)
    ordered = specials + sorted(t for t in learnt if t not in specials)  # special tokens, then the rest sorted
    tok.model = models.WordPiece(vocab={t: i for i, t in enumerate(ordered)}, unk_token="[UNK]",
                                 max_input_chars_per_word=100)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
        mask_token="[MASK]", model_max_length=512,
    )
    fast.add_special_tokens({"additional_special_tokens": list(MARKERS)})
    return fast


def _count_words(tok, texts: list[str], chunk: int = 32) -> Counter:
    """Counts the words of texts as `tok`'s normalizer and pre-tokenizer cut them.

    Texts go through in chunks joined by newlines (a few calls instead of one per text): a newline
    is a starter that composes with nothing (NFC), becomes a space (clean_text) and separates words,
    so the words are those of the texts one by one.
    """
    normalize, pre_tokenize = tok.normalizer.normalize_str, tok.pre_tokenizer.pre_tokenize_str
    words: Counter = Counter()
    for start in range(0, len(texts), chunk):
        words.update(w for w, _ in pre_tokenize(normalize("\n".join(texts[start:start + chunk]))))
    return words


def _learn_vocabulary(words: Mapping[str, int], initial: list[str], *, vocab_size: int,
                      min_frequency: int, prefix: str = "##") -> list[str]:
    """Learns a WordPiece vocabulary with BPE merges, deterministically.

    Each word starts as its first character and its other characters with `prefix`; the most
    frequent adjacent pair of pieces (ties: the smaller pair of strings) is merged into one piece
    (`a` + `##b` -> `ab`, `##a` + `##b` -> `##ab`) until the vocabulary holds `vocab_size` pieces
    or the top pair occurs fewer than `min_frequency` times (or not at all). Only the words that hold
    the merged pair are updated (pair counts and a lazy max-heap kept incrementally).

    Args:
        words: word -> count (pre-tokenised, normalised training words).
        initial: the pieces the vocabulary starts with (special tokens and the alphabet).
        vocab_size: stop once the vocabulary has this many pieces.
        min_frequency: a merge needs this many occurrences.

    Returns:
        The vocabulary: `initial`, the continuation characters and the merged pieces, in the order
        they were added (no piece twice).
    """
    ids: dict[str, int] = {}
    names: list[str] = []

    def piece(name: str) -> int:
        i = ids.get(name)
        if i is None:
            i = ids[name] = len(names)
            names.append(name)
        return i

    for name in initial:
        piece(name)
    seqs: list[list[int]] = []
    counts: list[int] = []
    for word in sorted(words):
        seqs.append([piece(ch if k == 0 else prefix + ch) for k, ch in enumerate(word)])
        counts.append(words[word])
    pair_count: dict[tuple[int, int], int] = {}
    where: dict[tuple[int, int], set[int]] = {}  # pair -> the words that hold (or held) it
    for w, seq in enumerate(seqs):
        for pair in zip(seq, seq[1:]):
            pair_count[pair] = pair_count.get(pair, 0) + counts[w]
            where.setdefault(pair, set()).add(w)
    heap = [(-c, names[a], names[b], a, b) for (a, b), c in pair_count.items()]
    heapq.heapify(heap)
    cut = len(prefix)
    while heap and len(names) < vocab_size:
        neg, sa, sb, a, b = heapq.heappop(heap)
        count = pair_count.get((a, b), 0)
        if count != -neg:  # stale: counts only fall, so push it back with its count
            if count > 0:
                heapq.heappush(heap, (-count, sa, sb, a, b))
            continue
        if count < max(min_frequency, 1):
            break
        new = piece(sa + (sb[cut:] if sb.startswith(prefix) else sb))
        delta: dict[tuple[int, int], int] = {}
        for w in where.pop((a, b)):
            seq = seqs[w]
            out: list[int] = []
            k, n = 0, len(seq)
            while k < n:
                if k + 1 < n and seq[k] == a and seq[k + 1] == b:
                    out.append(new)
                    k += 2
                else:
                    out.append(seq[k])
                    k += 1
            if len(out) == n:
                continue
            c = counts[w]
            for pair in zip(seq, seq[1:]):
                delta[pair] = delta.get(pair, 0) - c
            for pair in zip(out, out[1:]):
                delta[pair] = delta.get(pair, 0) + c
                if new in pair:
                    where.setdefault(pair, set()).add(w)
            seqs[w] = out
        for pair, d in delta.items():
            if d:
                left = pair_count[pair] = pair_count.get(pair, 0) + d
                if d > 0:
                    heapq.heappush(heap, (-left, names[pair[0]], names[pair[1]], *pair))
                elif left == 0:
                    del pair_count[pair]
    return names


def add_markers(tokenizer) -> bool:
    """Adds the target markers to a (pretrained) tokenizer that lacks them.

    Returns:
        True when tokens were added (the encoder's embeddings must then be resized).
    """
    missing = [m for m in MARKERS if m not in tokenizer.get_vocab()]
    if not missing:
        return False
    tokenizer.add_special_tokens({"additional_special_tokens": list(MARKERS)})
    return True
