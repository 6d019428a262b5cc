"""Text as the features see it: normalisation and the word tokenisers of each language.

The stored text keeps its quirks (`피곤하_다`, double spaces, ㅋㅋㅋㅋ, '♡'); only the features see a
normalised copy (`normalize_text`). Word-level tokens come from the schema's language:

| language | tokenizer                                   | token example |
|----------|---------------------------------------------|---------------|
| `ko`     | kiwipiepy morphemes, `form/TAG`             | `먹/VV`       |
| `zh`     | jieba words                                 | `吃饭`        |
| `en`     | lower-cased words and punctuation marks     | `dinner`      |
| any other code, or `und` | whitespace-separated words (the fallback) | `مرحبا`  |

`word_tokenizer(language)` names the tokenizer a language gets and `tokenizer_description` says
it in words (logged with every run). kiwipiepy and jieba are imported and loaded once, on first
use; tokenisations are cached per unique normalised text (`tokenizer_cache_info`,
`clear_tokenizer_cache`), so re-featurising the same sentences (cross-validation, context windows)
tokenises each sentence once. The TF-IDF featurizer built on them is `psyattrs.features.text`.

`prefetch_korean` starts the Korean analysis of given sentences in a second process (the analyser
takes about five CPU seconds to load and make its first analysis), so that it overlaps with what
this process loads meanwhile; `psyattrs predict --text` uses it.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import subprocess
import sys
import threading
import unicodedata
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

LANGUAGES: tuple[str, ...] = ("ko", "zh", "en")
"""Languages with their own word tokenizer; any other language code uses the whitespace fallback."""
FALLBACK_TOKENIZER = "whitespace"
_LANGUAGE_CODE = re.compile(r"^[a-z]{2,3}([-_][a-z0-9]{2,8})*$")
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
    if _PREFETCH is not None and key.startswith("ko") and any((key, item) not in _CACHE for item in items):
        _take_prefetch()
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


def word_tokens(words: Sequence[str], language: str) -> list[tuple[str, ...]]:
    """Tokens of distinct whitespace-free words analysed one by one (`tokenize(unit="word")`'s
    pieces), through the cache.

    Args:
        words: distinct words (no spaces), normalised.
        language: as `tokenize` takes it.
    """
    return _cached(list(words), f"{language}:word")


# ----------------------------------------------------------------------------------------------
# the Korean analysis of known sentences, ahead of time in a second process

_HANGUL = re.compile("[\u1100-\u11ff\u3130-\u318f\uac00-\ud7a3]")
_PREFETCH: subprocess.Popen | None = None
PREFETCH_ENV = "PSYATTRS_PREFETCH"
"""`0` turns `prefetch_korean` off, `1` turns it on even with one CPU; unset: on with two CPUs or more."""
PREFETCH_TIMEOUT_S = 120.0
PREFETCH_MAX_CHARS = 100_000
"""Most characters `prefetch_korean` takes: the sentences travel on the second process's command line."""
_CHILD_CODE = ("import json, os, sys; from psyattrs.features.tokenizers import _prefetch_child; "
               "_prefetch_child(json.loads(sys.argv[1])); sys.stdout.flush(); os._exit(0)")
"""The second process; once its tokens are written it ends without tearing the interpreter down
(a third of a second of freeing pandas and the analyser, which the command may be waiting for)."""


def prefetch_korean(texts: Sequence[str]) -> bool:
    """Starts the Korean analysis of `texts` (sentences as stored) in a second process.

    Loading kiwipiepy's analyser and its first analysis take about five CPU seconds, during which
    it holds the interpreter (a thread would not overlap). The second process analyses the
    sentences' normalised forms whole and word by word (both units of `tokenize`) while this one
    goes on loading (MLflow, the model); the first Korean `tokenize` that misses the cache waits for
    it and fills the cache with its tokens, so this process may never load the analyser. The tokens
    are the ones this process would compute: the same function, analyser and settings. Should the
    second process fail, the analysis happens here as without it.

    Args:
        texts: the sentences a later `tokenize` will see, as stored (a few: at most
            `PREFETCH_MAX_CHARS` characters in all).

    Returns:
        Whether the second process started: not without Hangul in `texts`, with one CPU (nothing
        to overlap with), when `PSYATTRS_PREFETCH=0`, for longer texts, or when one is already running.
    """
    global _PREFETCH
    setting = os.environ.get(PREFETCH_ENV, "").strip()
    if setting == "0" or (setting != "1" and (os.cpu_count() or 1) < 2):
        return False
    texts = [str(t) for t in texts]
    if _PREFETCH is not None or sum(map(len, texts)) > PREFETCH_MAX_CHARS or not any(map(_HANGUL.search, texts)):
        return False
    try:
        proc = subprocess.Popen([sys.executable, "-c", _CHILD_CODE, json.dumps(texts)], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except OSError:
        return False
    _PREFETCH = proc
    return True


def _prefetch_child(texts: list[str]) -> None:
    """The second process: prints {"ko": {sentence: tokens}, "ko:word": {word: tokens}} as JSON."""
    distinct, _ = normalize_distinct(texts)
    words = list(dict.fromkeys(w for t in distinct for w in t.split()))
    out = {"ko": dict(zip(distinct, tokenize(distinct, "ko"))), "ko:word": dict(zip(words, word_tokens(words, "ko")))}
    sys.stdout.write(json.dumps(out, ensure_ascii=False))


def _take_prefetch() -> None:
    """Waits for the second process and puts its tokens in the cache; on any failure, nothing."""
    global _PREFETCH
    with _LOCK:
        proc, _PREFETCH = _PREFETCH, None
    if proc is None:
        return
    try:
        out, _ = proc.communicate(timeout=PREFETCH_TIMEOUT_S)
        found = json.loads(out.decode("utf-8")) if proc.returncode == 0 else {}
    except (subprocess.TimeoutExpired, ValueError, OSError):
        _stop(proc)
        return
    for key in ("ko", "ko:word"):
        for item, tokens in found.get(key, {}).items():
            _CACHE[(key, item)] = tuple(tokens)


def _drop_prefetch() -> None:
    """At exit: a second process whose tokens nobody asked for is stopped."""
    global _PREFETCH
    proc, _PREFETCH = _PREFETCH, None
    if proc is not None:
        _stop(proc)


atexit.register(_drop_prefetch)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    try:
        proc.communicate(timeout=10)
    except (subprocess.TimeoutExpired, ValueError, OSError):
        pass

