"""Which language a batch of sentences is written in, from its letters' scripts.

Used to warn when a model meets text in another language than the one it was trained on (a Korean
model scoring Chinese PersonalDialog turns gives numbers with little meaning). The guess is by
script, cheap and on a sample, so it separates the languages psyattrs tokenises (Korean: Hangul,
Chinese: Han ideographs, English: Latin letters) and Japanese (kana), nothing finer.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice

LANGUAGE_NAMES: dict[str, str] = {"ko": "Korean", "zh": "Chinese", "en": "English", "ja": "Japanese"}
SAMPLE_SIZE = 500  # sentences looked at
MIN_LETTERS = 4  # fewer letters than this in the sample: no guess
DOMINANT_SHARE = 0.6  # a script must hold this share of the letters


def _script(ch: str) -> str | None:
    code = ord(ch)
    if 0xAC00 <= code <= 0xD7A3 or 0x1100 <= code <= 0x11FF or 0x3130 <= code <= 0x318F:
        return "ko"
    if 0x3040 <= code <= 0x30FF:
        return "ja"
    if 0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF:
        return "han"
    if ch.isascii() and ch.isalpha():
        return "en"
    return None


def guess_language(texts: Iterable[str], *, sample: int = SAMPLE_SIZE) -> str | None:
    """The language code (`ko`, `zh`, `en`, `ja`) whose script dominates the first `sample` texts.

    Han ideographs count as Chinese unless kana are present (Japanese mixes both). Laughter and
    crying jamo (ㅋ ㅎ ㅠ) count as Korean.

    Returns:
        The code, or None when there are too few letters or no script holds `DOMINANT_SHARE` of them.
    """
    counts = {"ko": 0, "ja": 0, "han": 0, "en": 0}
    for text in islice(texts, sample):
        for ch in str(text):
            script = _script(ch)
            if script is not None:
                counts[script] += 1
    if counts["ja"]:
        counts["ja"] += counts.pop("han")
    else:
        counts["zh"] = counts.pop("han")
    total = sum(counts.values())
    if total < MIN_LETTERS:
        return None
    code, top = max(counts.items(), key=lambda item: item[1])
    return code if top >= DOMINANT_SHARE * total else None


def language_name(code: str) -> str:
    """`Korean` for `ko` etc.; the code itself when unknown."""
    return LANGUAGE_NAMES.get(code, code)
