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
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.utils.validation import check_is_fitted

LANGUAGES: tuple[str, ...] = ("ko", "zh", "en")
"""Languages with their own word tokenizer; any other language code uses the whitespace fallback."""
FALLBACK_TOKENIZER = "whitespace"
_LANGUAGE_CODE = re.compile(r"^[a-z]{2,3}([-_][a-z0-9]{2,8})*$")
WORD_MODES: tuple[str, ...] = ("auto", "whitespace", "none")
ANALYSIS_UNITS: tuple[str, ...] = ("sentence", "word")
"""What the word tokenizer analyses at a time (`tokenize(unit=...)`, `TextFeaturizer(analysis=...)`)."""

# fullwidth ASCII (！？～ etc.) -> ASCII; compatibility jamo (ㅋ ㅎ ㅠ ㅜ) are left alone, which is
# why this is NFC plus a targeted table and not NFKC (NFKC turns ㅋ into a conjoining jamo).
_FULLWIDTH = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)}
_FULLWIDTH[0x3000] = 0x20  # ideographic space
_HAS_FULLWIDTH = re.compile("[\uff01-\uff5e\u3000]")
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
    text = unicodedata.normalize("NFC", str(text))
    if _HAS_FULLWIDTH.search(text):
        text = text.translate(_FULLWIDTH)
    text = text.lower().replace("_", "")
    text = _REPEATS.sub(r"\1\1\1", text)
    return " ".join(text.split())  # str.split and regex \s agree on what whitespace is


def normalize_texts(texts: Iterable[str]) -> list[str]:
    """`normalize_text` over many sentences, computing each distinct sentence once."""
    distinct, inverse = normalize_distinct(texts)
    return [distinct[i] for i in inverse]


def normalize_distinct(texts: Iterable[str]) -> tuple[list[str], np.ndarray]:
    """The distinct normalised forms of the sentences, and where each sentence's form is.

    Each distinct stored sentence is normalised once; two stored sentences with the same
    normalised form share one entry.

    Args:
        texts: sentences as stored (missing values read as empty sentences).

    Returns:
        (distinct, inverse): the distinct normalised sentences in order of first appearance, and
        an int array with `normalize_text(texts[i]) == distinct[inverse[i]]`.
    """
    if isinstance(texts, pd.Series):
        series = texts
    else:
        series = pd.Series(texts if isinstance(texts, (list, tuple)) else list(texts), dtype=object)
    codes, raw = pd.factorize(series.to_numpy(dtype=object, na_value=""), sort=False)
    forms = [normalize_text(t) for t in raw]
    form_codes, distinct = pd.factorize(np.asarray(forms, dtype=object), sort=False)
    inverse = form_codes[codes] if len(codes) else np.zeros(0, dtype=np.intp)
    return list(distinct), inverse


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


def tokenize(texts: Sequence[str], language: str, *, unit: str = "sentence") -> list[tuple[str, ...]]:
    """Word-level tokens of already normalised sentences, cached per distinct sentence (or word).

    Args:
        texts: normalised sentences (see `normalize_text`).
        language: `ko` (kiwipiepy morphemes as `form/TAG`), `zh` (jieba words), `en` (words and
            punctuation) or `whitespace` (split on spaces, any language).
        unit: `sentence` (each sentence analysed whole) or `word` (each whitespace-separated
            word, for Korean an eojeol, analysed alone and once; a sentence's tokens are its
            words' tokens in order). For `en` and `whitespace` both give the same tokens; for
            `ko` and `zh` `word` loses what the analyser infers across word boundaries and is
            several times faster (distinct words repeat far more than distinct sentences).

    Returns:
        One tuple of tokens per sentence, in input order (empty for an empty sentence).

    Raises:
        ValueError: an unknown language or unit.
    """
    if language not in _TOKENIZERS:
        raise ValueError(f"tokenizer language {language!r} is not one of {sorted(_TOKENIZERS)}")
    if unit not in ANALYSIS_UNITS:
        raise ValueError(f"tokenizer unit {unit!r} is not one of {list(ANALYSIS_UNITS)}")
    texts = [str(t) for t in texts]
    if unit == "word":
        split = {text: text.split() for text in dict.fromkeys(texts)}
        words = list(dict.fromkeys(w for parts in split.values() for w in parts))
        of_word = dict(zip(words, _cached(words, f"{language}:word")))
        joined = {text: tuple(tok for w in parts for tok in of_word[w]) for text, parts in split.items()}
        return [joined[t] for t in texts]
    lookup = dict(zip(distinct := list(dict.fromkeys(texts)), _cached(distinct, language)))
    _cache_stats["hits"] += len(texts) - len(distinct)
    return [lookup[t] for t in texts]


def _cached(items: list[str], key: str) -> list[tuple[str, ...]]:
    """Tokens of distinct strings through the cache; `key` is the language, `xx:word` for words."""
    found: list[tuple[str, ...] | None] = [_CACHE.get((key, item)) for item in items]
    missing = [item for item, tokens in zip(items, found) if tokens is None]
    _cache_stats["misses"] += len(missing)
    _cache_stats["hits"] += len(items) - len(missing)
    if not missing:
        return found  # type: ignore[return-value]
    fresh = dict(zip(missing, _TOKENIZERS[key.split(":")[0]](missing)))
    if len(_CACHE) + len(missing) > _CACHE_LIMIT:
        _CACHE.clear()
    _CACHE.update({(key, item): tokens for item, tokens in fresh.items()})
    return [tokens if tokens is not None else fresh[item] for item, tokens in zip(items, found)]


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


def char_wb_transform(vectorizer: TfidfVectorizer, texts: Sequence[str]) -> sp.csr_matrix:
    """`vectorizer.transform(texts)` of a fitted `char_wb` `TfidfVectorizer`, each distinct word
    analysed once.

    `char_wb` n-grams never cross a space: a sentence's n-gram counts are the sums of its
    whitespace-separated words' counts (the words as `str.split` gives them, as scikit-learn's
    analyser splits). So the counts of each distinct word are computed once and summed per
    sentence with one sparse product, then weighted (tf, idf, L2) by the vectorizer's own
    transformer; the result equals `vectorizer.transform(texts)` (tested). A vectorizer with any
    other analyser, a custom preprocessor or tokenizer, or binary counts is run as it is.
    """
    if (vectorizer.analyzer != "char_wb" or vectorizer.preprocessor is not None or vectorizer.binary
            or vectorizer.strip_accents is not None or not isinstance(texts, (list, tuple))):
        return vectorizer.transform(texts)
    words, sentences = _distinct_words(texts)
    if not words:
        return vectorizer.transform(texts)
    per_word = CountVectorizer.transform(vectorizer, words)  # counts, no weighting
    return _weighted(vectorizer, _incidence(sentences, len(words)) @ per_word)


def word_ngram_transform(vectorizer: TfidfVectorizer, texts: Sequence[str], language: str) -> sp.csr_matrix:
    """`vectorizer.transform(tokenize(texts, language, unit="word"))` of a fitted `TokenNgrams`
    vectorizer, each distinct word's n-grams counted once.

    With `unit="word"` a sentence's tokens are its words' tokens one after another, so its
    n-grams are those inside each word plus the bigrams across each boundary between two words
    (the last token of one, the first of the next). The first are counted once per distinct word
    and summed per sentence with a sparse product, the second looked up one by one; the counts
    are then weighted by the vectorizer's own transformer, and the result equals the plain
    transform (tested). N-grams longer than two are counted the plain way.
    """
    analyzer = vectorizer.analyzer
    lo, hi = getattr(analyzer, "ngram_range", (0, 0))
    if not isinstance(analyzer, TokenNgrams) or not (1 <= lo <= hi <= 2) or vectorizer.binary:
        return vectorizer.transform(tokenize(texts, language, unit="word"))
    words, sentences = _distinct_words(texts)
    tokens = _cached(words, f"{language}:word") if words else []
    vocabulary = vectorizer.vocabulary_
    first = [t[0] if t else None for t in tokens]
    last = [t[-1] if t else None for t in tokens]
    extra_ptr, extra = [0], []
    for ids in sentences:
        if hi == 2:
            previous = None
            for j in ids:
                if first[j] is None:
                    continue  # a word without tokens: the tokens on either side are adjacent
                if previous is not None:
                    k = vocabulary.get(f"{previous} {first[j]}")
                    if k is not None:
                        extra.append(k)
                previous = last[j]
        extra_ptr.append(len(extra))
    n_features = len(vocabulary)
    counts = sp.csr_matrix(
        (np.ones(len(extra), dtype=np.float32), np.asarray(extra, dtype=np.int64), np.asarray(extra_ptr, dtype=np.int64)),
        shape=(len(texts), n_features),
    )
    if words:
        counts = counts + _incidence(sentences, len(words)) @ CountVectorizer.transform(vectorizer, tokens)
    return _weighted(vectorizer, counts, drop_zeros=True)


def _distinct_words(texts: Sequence[str]) -> tuple[list[str], list[list[int]]]:
    """The distinct whitespace-separated words of texts (first appearance first) and, per text,
    the index of each of its words in that list."""
    word_ids: dict[str, int] = {}
    sentences: list[list[int]] = []
    for text in texts:
        ids = []
        for word in text.split():
            j = word_ids.get(word)
            if j is None:
                j = word_ids[word] = len(word_ids)
            ids.append(j)
        sentences.append(ids)
    return list(word_ids), sentences


def _incidence(sentences: list[list[int]], n_words: int) -> sp.csr_matrix:
    """(texts x distinct words) matrix with a 1 per occurrence of the word in the text."""
    indptr = np.cumsum([0] + [len(ids) for ids in sentences], dtype=np.int64)
    indices = np.fromiter((j for ids in sentences for j in ids), dtype=np.int64, count=int(indptr[-1]))
    return sp.csr_matrix((np.ones(len(indices), dtype=np.float32), indices, indptr), shape=(len(sentences), n_words))


def _weighted(vectorizer: TfidfVectorizer, counts, *, drop_zeros: bool = False) -> sp.csr_matrix:
    """Raw n-gram counts weighted (tf, idf, L2) by the fitted vectorizer's own transformer."""
    counts = sp.csr_matrix(counts, dtype=vectorizer.dtype)
    counts.sum_duplicates()
    counts.sort_indices()
    if drop_zeros:
        counts.eliminate_zeros()
    return vectorizer._tfidf.transform(counts, copy=False)


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
        analysis: what the word tokenizer analyses at a time: `sentence` (the whole sentence)
            or `word` (each whitespace-separated word alone, once per distinct word; for
            Korean an eojeol; several times faster, see `tokenize`). The same in fit and
            transform; a featurizer saved before this setting existed analyses sentences.
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
        analysis: str = "sentence",
        min_df: int = 2,
        max_features: int | None = 200_000,
        sublinear_tf: bool = True,
        use_idf: bool = True,
    ):
        self.language = language
        self.char_ngrams = char_ngrams
        self.word_ngrams = word_ngrams
        self.words = words
        self.analysis = analysis
        self.min_df = min_df
        self.max_features = max_features
        self.sublinear_tf = sublinear_tf
        self.use_idf = use_idf

    def __setstate__(self, state: dict) -> None:
        # a featurizer pickled before `analysis` existed tokenised whole sentences
        state.setdefault("analysis", "sentence")
        self.__dict__.update(state)

    def _validate(self) -> None:
        word_tokenizer(self.language)  # ValueError for a value that is no language code
        if self.words not in WORD_MODES:
            raise ValueError(f"words {self.words!r} is not one of {list(WORD_MODES)}")
        if self.analysis not in ANALYSIS_UNITS:
            raise ValueError(f"analysis {self.analysis!r} is not one of {list(ANALYSIS_UNITS)}")
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
                self.word_vectorizer_.fit(tokenize(norm, self._word_language(), unit=self.analysis))
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
        distinct, inverse = normalize_distinct(texts)
        blocks = [char_wb_transform(self.char_vectorizer_, distinct)]
        if self.word_vectorizer_ is not None:
            if self.analysis == "word":
                blocks.append(word_ngram_transform(self.word_vectorizer_, distinct, self._word_language()))
            else:
                blocks.append(self.word_vectorizer_.transform(tokenize(distinct, self._word_language())))
        X = blocks[0] if len(blocks) == 1 else sp.hstack(blocks, format="csr", dtype=np.float32)
        X = sp.csr_matrix(X, dtype=np.float32)
        if len(distinct) == len(inverse) and np.array_equal(inverse, np.arange(len(inverse))):
            return X  # every sentence distinct, in order
        return X[inverse]

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        """Feature names: `char:<n-gram>` then `word:<n-gram>`."""
        check_is_fitted(self, "char_vectorizer_")
        names = [f"char:{n}" for n in self.char_vectorizer_.get_feature_names_out()]
        if self.word_vectorizer_ is not None:
            names += [f"word:{n}" for n in self.word_vectorizer_.get_feature_names_out()]
        return np.asarray(names, dtype=object)
