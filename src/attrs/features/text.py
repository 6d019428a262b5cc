"""The TF-IDF `TextFeaturizer`: character n-grams and word (morpheme) n-grams of normalised sentences.

Normalisation and the word tokenisers are `psyattrs.features.tokenizers`. Every language gets the
character n-grams; for a language without its own tokenizer (Arabic, Japanese, Hindi, ...) the
character n-grams carry scripts without spaces, and the whitespace words add what spaces do
separate. `TextFeaturizer` and `TokenNgrams` stay in this module: saved models pickle them under
this path.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.utils.validation import check_is_fitted

from psyattrs.features.tokenizers import (ANALYSIS_UNITS, FALLBACK_TOKENIZER, normalize_distinct, normalize_texts,
                                          tokenize, word_tokenizer, word_tokens)

WORD_MODES: tuple[str, ...] = ("auto", "whitespace", "none")


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
    tokens = word_tokens(words, language) if words else []
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
