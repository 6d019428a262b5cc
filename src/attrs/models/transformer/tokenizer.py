"""A WordPiece tokenizer trained on the training texts (the `scratch` backbone), with `tokenizers`.

The result is a `transformers` fast tokenizer, saved and loaded with `save_pretrained` /
`AutoTokenizer.from_pretrained` like any hub tokenizer, so the scratch backbone and pretrained ones
share one code path.

Pre-tokenisation splits on whitespace and punctuation and puts every CJK ideograph apart (as BERT
does for Chinese); the text is NFC-normalised and neither lower-cased nor accent-stripped, because
accent stripping decomposes Hangul syllables into jamo. Token ids are renumbered in a fixed order after
training (the trainer's own order varies between processes). Every character seen in training is
in the alphabet, so a Korean or Chinese training sentence never becomes unknown tokens; unseen characters
at prediction time become `[UNK]`.
"""

from __future__ import annotations

from typing import Iterable

SPECIAL_TOKENS: tuple[str, ...] = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
TARGET_OPEN = "[TGT]"
TARGET_CLOSE = "[/TGT]"
MARKERS: tuple[str, str] = (TARGET_OPEN, TARGET_CLOSE)


def train_tokenizer(texts: Iterable[str], *, vocab_size: int = 4000, min_frequency: int = 2):
    """Trains a WordPiece tokenizer on texts.

    Args:
        texts: the training sentences (context sentences included: they are all training text).
        vocab_size: the largest vocabulary (special tokens and the alphabet included), >= 100.
        min_frequency: a merge needs this many occurrences.

    Returns:
        A `transformers.PreTrainedTokenizerFast` with `[PAD] [UNK] [CLS] [SEP] [MASK]` and the
        target markers `[TGT] [/TGT]` as special tokens.

    Raises:
        ValueError: vocab_size below 100, or no text with a character in it.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 100:
        raise ValueError(f"vocab_size must be an integer >= 100, got {vocab_size!r}")
    texts = [t for t in texts if isinstance(t, str) and t.strip()]
    if not texts:
        raise ValueError("cannot train a tokenizer: no training sentence has any character")
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.Sequence(
        [normalizers.NFC(), normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                        strip_accents=False, lowercase=False)]
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    alphabet = sorted({ch for t in texts for ch in t if not ch.isspace()})
    trainer = trainers.WordPieceTrainer(
        vocab_size=max(vocab_size, len(alphabet) + len(SPECIAL_TOKENS) + len(MARKERS) + 1),
        min_frequency=min_frequency,
        special_tokens=[*SPECIAL_TOKENS, *MARKERS],
        initial_alphabet=alphabet,
        limit_alphabet=len(alphabet) + 1,
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    # the trainer numbers tokens of equal count in hash order (differently in every process):
    # renumber them (special tokens, then the rest sorted) so that one seed gives one model
    learnt = tok.get_vocab()
    specials = [*SPECIAL_TOKENS, *MARKERS]
    ordered = specials + sorted(t for t in learnt if t not in specials)
    tok.model = models.WordPiece(vocab={t: i for i, t in enumerate(ordered)}, unk_token="[UNK]",
                                 max_input_chars_per_word=100)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
        mask_token="[MASK]", model_max_length=512,
    )
    fast.add_special_tokens({"additional_special_tokens": list(MARKERS)})
    return fast


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
