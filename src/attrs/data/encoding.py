"""Telling encodings apart where the bytes alone do not: UTF-16, and CP949 that is not Korean.

CP949 (Unified Hangul Code) accepts most byte pairs whose first byte is >= 0x81, so a Latin-1 or
Windows-1252 file often decodes as CP949 without an error: `\\xc4rger` becomes `훣ger`. Real
Korean CP949 text is almost entirely the KS X 1001 repertoire (the 2,350 common syllables, jamo,
hanja and symbols, the characters EUC-KR can encode); mojibake of Latin-1 is mostly the rare
syllables only UHC adds. `reads_as_korean` is that plausibility check; `psyattrs.data.io` takes
the CP949 fallback only when it passes.

UTF-16 files are recognised by their byte-order mark or by the NUL bytes every other byte of
ASCII text, so that the error can name UTF-16 instead of "binary content".
"""

from __future__ import annotations

import codecs

IMPLAUSIBLE_SHARE = 0.05
"""Above this share of non-ASCII characters outside KS X 1001, CP949-decoded text is not Korean."""
_CHECK_CHARS = 1 << 22
_SNIFF = 4096


def utf16_name(raw: bytes) -> str | None:
    """`UTF-16 LE` / `UTF-16 BE` (with `BOM` noted) when the bytes look like UTF-16, else None.

    Without a byte-order mark: at least 64 bytes in which NUL fills nearly every odd (LE) or even
    (BE) position and almost no other one (ASCII text written as UTF-16).
    """
    if raw.startswith(codecs.BOM_UTF16_LE) and not raw.startswith(codecs.BOM_UTF32_LE):
        return "UTF-16 LE (with BOM)"
    if raw.startswith(codecs.BOM_UTF16_BE):
        return "UTF-16 BE (with BOM)"
    head = raw[:_SNIFF]
    if len(head) < 64:
        return None
    even, odd = head[0::2], head[1::2]
    even_nul, odd_nul = even.count(0) / len(even), odd.count(0) / len(odd)
    if odd_nul > 0.7 and even_nul < 0.05:
        return "UTF-16 LE"
    if even_nul > 0.7 and odd_nul < 0.05:
        return "UTF-16 BE"
    return None


def _in_ks_x_1001(ch: str) -> bool:
    try:
        encoded = ch.encode("euc_kr")
    except UnicodeEncodeError:
        return False
    return len(encoded) == 2  # Python's codec spells the other syllables as 8-byte jamo sequences


def implausible_korean(text: str) -> tuple[float, str | None]:
    """(share of non-ASCII characters outside KS X 1001, the most frequent such character).

    Looks at the first 4 Mi characters. (0.0, None) when the text is ASCII.
    """
    sample = text[:_CHECK_CHARS]
    n_non_ascii = len(sample) - len(sample.encode("ascii", "ignore"))
    if n_non_ascii == 0:
        return 0.0, None
    odd = [ch for ch in set(sample) if ord(ch) > 127 and not _in_ks_x_1001(ch)]
    if not odd:
        return 0.0, None
    counts = {ch: sample.count(ch) for ch in odd}
    worst = max(counts, key=counts.get)
    return sum(counts.values()) / n_non_ascii, worst


def reads_as_korean(text: str) -> bool:
    """Whether CP949-decoded text is plausibly Korean (see the module docstring)."""
    return implausible_korean(text)[0] <= IMPLAUSIBLE_SHARE
