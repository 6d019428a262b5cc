"""Text features: normalisation, tokenisers and the TF-IDF `TextFeaturizer`.

The stored text keeps its quirks (`피곤하_다`, double spaces, ㅋㅋㅋㅋ, '♡'); only the features see a
normalised copy (`normalize_text`). Word-level tokens come from the schema's language:

| language | tokenizer                                   | token example |
|----------|---------------------------------------------|---------------|
| `ko`     | kiwipiepy morphemes, `form/TAG`             | `먹/VV`       |
| `zh`     | jieba words                                 | `吃饭`        |
| `en`     | lower-cased words and punctuation marks     | `dinner`      |
| any other code, or `und` | whitespace-separated words (the fallback) | `مرحبا`  |

Every language gets the character n-grams; for a language without its own tokenizer (Arabic,
Japanese, Hindi, ...) the character n-grams carry scripts without spaces, and the whitespace words
add what spaces do separate. `word_tokenizer(language)` names the tokenizer a language gets and
`tokenizer_description` says it in words (logged with every run).

kiwipiepy and jieba are imported and loaded once, on first use; tokenisations are cached per
unique normalised text, so re-featurising the same sentences (cross-validation, context windows)
tokenises each sentence once.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import unicodedata
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.utils.validation import check_is_fitted

LANGUAGES: tuple[str, ...] = ("ko", "zh", "en")
"""Languages with their own word tokenizer; any other language code uses the whitespace fallback."""
FALLBACK_TOKENIZER = "whitespace"
_LANGUAGE_CODE = re.compile(r"^[a-z]{2,3}([-_][a-z0-9]{2,8})*$")
WORD_MODES: tuple[str, ...] = ("auto", "whitespace", "none")

# fullwidth ASCII (！？～ etc.) -> ASCII; compatibility jamo (ㅋ ㅎ ㅠ ㅜ) are left alone, which is
# why this is NFC plus a targeted table and not NFKC (NFKC turns ㅋ into a conjoining jamo).
_FULLWIDTH = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)}
_FULLWIDTH[0x3000] = 0x20  # ideographic space
_REPEATS = re.compile(r"(.)\1{3,}")
_SPACES = re.compile(r"\s+")
_EN_TOKEN = re.compile(r"\w+|[^\w\s]")


def normalize_text(text: str) -> str:
    """The form of a sentence that features see; the stored text is never changed.

    NFC, fullwidth ASCII to ASCII, lower case, `_` (a character lost in export) removed, runs of
    one character longer than three cut to three (`ㅋㅋㅋㅋㅋ` -> `ㅋㅋㅋ`, `!!!!` -> `!!!`),
    whitespace collapsed and stripped.

    Args:
        text: one sentence as stored.

    Returns:
        The normalised sentence (possibly empty).
    """
    text = unicodedata.normalize("NFC", str(text)).translate(_FULLWIDTH).lower().replace("_", "")
    text = _REPEATS.sub(r"\1\1\1", text)
    return _SPACES.sub(" ", text).strip()


def normalize_texts(texts: Iterable[str]) -> list[str]:
    """`normalize_text` over many sentences, computing each distinct sentence once."""
    series = pd.Series(list(texts), dtype=object).fillna("").astype(str)
    unique = pd.unique(series)
    mapping = {t: normalize_text(t) for t in unique}
    return [mapping[t] for t in series]


# ----------------------------------------------------------------------------------------------
# tokenizers: loaded lazily, once per process, results cached per (language, text)

_LOCK = threading.Lock()
_KIWI = None
_JIEBA = None
_CACHE: dict[tuple[str, str], tuple[str, ...]] = {}
_CACHE_LIMIT = 200_000  # distinct sentences; a long-lived server or Predictor stays bounded
_cache_stats = {"hits": 0, "misses": 0}


def _kiwi():
    """The process-wide kiwipiepy analyser (loaded on first call, about two seconds)."""
    global _KIWI
    with _LOCK:
        if _KIWI is None:
            from kiwipiepy import Kiwi

            _KIWI = Kiwi(num_workers=max(1, min(2, os.cpu_count() or 1)))
        return _KIWI


def _jieba():
    """The jieba module, initialised on first call with its log quietened."""
    global _JIEBA
    with _LOCK:
        if _JIEBA is None:
            import jieba

            jieba.setLogLevel(logging.WARNING)
            jieba.initialize()
            _JIEBA = jieba
        return _JIEBA


def _tokenize_ko(texts: list[str]) -> list[tuple[str, ...]]:
    kiwi = _kiwi()
    out: list[tuple[str, ...]] = [()] * len(texts)
    todo = [i for i, t in enumerate(texts) if t]
    if todo:
        results = kiwi.tokenize([texts[i] for i in todo])
        for i, tokens in zip(todo, results):
            out[i] = tuple(f"{tok.form}/{tok.tag}" for tok in tokens)
    return out


def _tokenize_zh(texts: list[str]) -> list[tuple[str, ...]]:
    jieba = _jieba()
    return [tuple(w for w in jieba.lcut(t) if w.strip()) for t in texts]


def _tokenize_en(texts: list[str]) -> list[tuple[str, ...]]:
    return [tuple(_EN_TOKEN.findall(t)) for t in texts]


def _tokenize_whitespace(texts: list[str]) -> list[tuple[str, ...]]:
    return [tuple(t.split()) for t in texts]


_TOKENIZERS = {"ko": _tokenize_ko, "zh": _tokenize_zh, "en": _tokenize_en, "whitespace": _tokenize_whitespace}


def word_tokenizer(language: str) -> str:
    """The word tokenizer a language code gets: the code itself for `ko`, `zh` and `en` (also for
    regional variants such as `en-gb`, `zh-tw`), else `whitespace` (the fallback).

    Raises:
        ValueError: `language` is not a lower-case language code.
    """
    if not isinstance(language, str) or not _LANGUAGE_CODE.match(language):
        raise ValueError(f"language {language!r} is not a lower-case language code ('en', 'ar', 'ja', 'und', ...)")
    base = re.split(r"[-_]", language, maxsplit=1)[0]
    return base if base in LANGUAGES else FALLBACK_TOKENIZER


def tokenizer_description(language: str, words: str = "auto") -> str:
    """What a `TextFeaturizer` of this language and `words` mode tokenises with, in words."""
    if words == "none":
        return "character n-grams only"
    name = FALLBACK_TOKENIZER if words == "whitespace" else word_tokenizer(language)
    described = {
        "ko": "kiwipiepy morphemes",
        "zh": "jieba words",
        "en": "English words and punctuation",
        "whitespace": "whitespace words",
    }[name]
    fallback = " (fallback: no tokenizer of its own for this language)" if (
        words == "auto" and name == FALLBACK_TOKENIZER) else ""
    return f"character n-grams + {described}{fallback}"


def tokenize(texts: Sequence[str], language: str) -> list[tuple[str, ...]]:
    """Word-level tokens of already normalised sentences, cached per distinct sentence.

    Args:
        texts: normalised sentences (see `normalize_text`).
        language: `ko` (kiwipiepy morphemes as `form/TAG`), `zh` (jieba words), `en` (words and
            punctuation) or `whitespace` (split on spaces, any language).

    Returns:
        One tuple of tokens per sentence, in input order (empty for an empty sentence).

    Raises:
        ValueError: an unknown language.
    """
    if language not in _TOKENIZERS:
        raise ValueError(f"tokenizer language {language!r} is not one of {sorted(_TOKENIZERS)}")
    texts = [str(t) for t in texts]
    lookup: dict[str, tuple[str, ...]] = {}
    missing: list[str] = []
    for text in dict.fromkeys(texts):
        tokens = _CACHE.get((language, text))
        if tokens is None:
            missing.append(text)
        else:
            lookup[text] = tokens
    _cache_stats["misses"] += len(missing)
    _cache_stats["hits"] += len(texts) - len(missing)
    if missing:
        fresh = _TOKENIZERS[language](missing)
        lookup.update(zip(missing, fresh))
        if len(_CACHE) + len(missing) > _CACHE_LIMIT:
            _CACHE.clear()
        _CACHE.update({(language, t): tok for t, tok in zip(missing, fresh)})
    return [lookup[t] for t in texts]


def tokenizer_cache_info() -> dict[str, int]:
    """Counters of the tokenisation cache: `hits`, `misses` (distinct texts tokenised), `size`."""
    return {**_cache_stats, "size": len(_CACHE)}


def clear_tokenizer_cache() -> None:
    """Empties the tokenisation cache and resets its counters (the loaded analysers stay)."""
    _CACHE.clear()
    _cache_stats.update(hits=0, misses=0)


class TokenNgrams:
    """Analyzer for `TfidfVectorizer` over pre-tokenised documents: the n-grams of a token tuple.

    Picklable (a plain class), unlike a lambda.

    Args:
        ngram_range: (min_n, max_n) of the n-grams, both >= 1.
    """

    def __init__(self, ngram_range: tuple[int, int] = (1, 2)):
        self.ngram_range = tuple(ngram_range)

    def __call__(self, tokens: Sequence[str]) -> list[str]:
        lo, hi = self.ngram_range
        grams: list[str] = []
        for n in range(lo, hi + 1):
            grams.extend(" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
        return grams


def _check_range(name: str, value) -> tuple[int, int]:
    try:
        lo, hi = (int(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be two integers (min_n, max_n), got {value!r}") from None
    if not 1 <= lo <= hi:
        raise ValueError(f"{name} must satisfy 1 <= min_n <= max_n, got {value!r}")
    return lo, hi


class TextFeaturizer(TransformerMixin, BaseEstimator):
    """TF-IDF of character n-grams and word (morpheme) n-grams of normalised sentences.

    scikit-learn compatible (`fit`, `transform`, `get_feature_names_out`, `clone`) and picklable:
    the analysers live in module-level caches, not on the object.

    Args:
        language: a language code: `ko`, `zh` and `en` pick their word tokenizer, any other
            code (or `und`) the whitespace fallback (see module docstring).
        char_ngrams: (min_n, max_n) of the character n-grams (within word boundaries, `char_wb`).
        word_ngrams: (min_n, max_n) of the word/morpheme n-grams.
        words: `auto` (the language's tokenizer), `whitespace` (split on spaces) or `none`
            (character n-grams only; no kiwipiepy/jieba).
        min_df: minimum number of sentences a feature must occur in.
        max_features: cap on the vocabulary of each block (char, word), most frequent first;
            None for no cap.
        sublinear_tf: use 1 + log(tf).
        use_idf: weight by inverse document frequency.

    Attributes:
        char_vectorizer_: the fitted character `TfidfVectorizer`.
        word_vectorizer_: the fitted word `TfidfVectorizer`, or None when `words="none"`.
        n_features_out_: number of output columns.
    """

    def __init__(
        self,
        language: str = "ko",
        *,
        char_ngrams: tuple[int, int] = (1, 3),
        word_ngrams: tuple[int, int] = (1, 2),
        words: str = "auto",
        min_df: int = 2,
        max_features: int | None = 200_000,
        sublinear_tf: bool = True,
        use_idf: bool = True,
    ):
        self.language = language
        self.char_ngrams = char_ngrams
        self.word_ngrams = word_ngrams
        self.words = words
        self.min_df = min_df
        self.max_features = max_features
        self.sublinear_tf = sublinear_tf
        self.use_idf = use_idf

    def _validate(self) -> None:
        word_tokenizer(self.language)  # ValueError for a value that is no language code
        if self.words not in WORD_MODES:
            raise ValueError(f"words {self.words!r} is not one of {list(WORD_MODES)}")
        _check_range("char_ngrams", self.char_ngrams)
        _check_range("word_ngrams", self.word_ngrams)
        if isinstance(self.min_df, bool) or not isinstance(self.min_df, (int, np.integer)) or self.min_df < 1:
            raise ValueError(f"min_df must be an integer >= 1, got {self.min_df!r}")
        cap = self.max_features
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, (int, np.integer)) or cap < 1):
            raise ValueError(f"max_features must be an integer >= 1 or None, got {self.max_features!r}")

    def _word_language(self) -> str:
        return FALLBACK_TOKENIZER if self.words == "whitespace" else word_tokenizer(self.language)

    def _vectorizer(self, **kwargs) -> TfidfVectorizer:
        return TfidfVectorizer(
            min_df=self.min_df,
            max_features=self.max_features,
            sublinear_tf=self.sublinear_tf,
            use_idf=self.use_idf,
            dtype=np.float32,
            **kwargs,
        )

    def fit(self, texts: Iterable[str], y=None) -> "TextFeaturizer":
        """Learns both vocabularies and IDF weights.

        Args:
            texts: sentences as stored (normalised here).
            y: ignored.

        Raises:
            ValueError: bad settings, or no feature occurs in `min_df` sentences (names both).
        """
        self._validate()
        norm = normalize_texts(texts)
        char_range = _check_range("char_ngrams", self.char_ngrams)
        self.char_vectorizer_ = self._vectorizer(analyzer="char_wb", ngram_range=char_range)
        self.word_vectorizer_ = None
        try:
            self.char_vectorizer_.fit(norm)
            if self.words != "none":
                analyzer = TokenNgrams(_check_range("word_ngrams", self.word_ngrams))
                self.word_vectorizer_ = self._vectorizer(analyzer=analyzer)
                self.word_vectorizer_.fit(tokenize(norm, self._word_language()))
        except ValueError as exc:
            if any(m in str(exc) for m in ("empty vocabulary", "no terms remain", "max_df corresponds to < documents")):
                raise ValueError(
                    f"no text feature occurs in at least min_df={self.min_df} of the {len(norm)} sentences; "
                    "lower min_df or give more text"
                ) from None
            raise
        self.n_features_out_ = len(self.char_vectorizer_.vocabulary_) + (
            len(self.word_vectorizer_.vocabulary_) if self.word_vectorizer_ is not None else 0
        )
        return self

    def transform(self, texts: Iterable[str]) -> sp.csr_matrix:
        """TF-IDF rows of the sentences.

        Args:
            texts: sentences as stored.

        Returns:
            float32 CSR matrix (n_sentences, n_features_out_): the character block, then the word
            block, each row L2-normalised within its block.
        """
        check_is_fitted(self, "char_vectorizer_")
        norm = normalize_texts(texts)
        blocks = [self.char_vectorizer_.transform(norm)]
        if self.word_vectorizer_ is not None:
            blocks.append(self.word_vectorizer_.transform(tokenize(norm, self._word_language())))
        return sp.hstack(blocks, format="csr", dtype=np.float32)

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        """Feature names: `char:<n-gram>` then `word:<n-gram>`."""
        check_is_fitted(self, "char_vectorizer_")
        names = [f"char:{n}" for n in self.char_vectorizer_.get_feature_names_out()]
        if self.word_vectorizer_ is not None:
            names += [f"word:{n}" for n in self.word_vectorizer_.get_feature_names_out()]
        return np.asarray(names, dtype=object)
