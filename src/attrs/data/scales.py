"""The classes a file implies when no schema is given: the values seen, bounded.

A rating scale is a run of consecutive integers. The classes of a file read without a schema are
the run of consecutive values seen around the most frequent one (`seen_run`): a value that is not
joined to that run by values seen in between (one stray `100000`, `1e9` or `-2` in a 0/1 file) is
an outlying value, not a class. Its ratings are set aside by the reader, named; the class count
never follows it. A run longer than `MAX_INFERRED_CLASSES` is refused: such a file needs a schema.
"""

from __future__ import annotations

from typing import Mapping

MAX_INFERRED_CLASSES = 50
"""The most classes a head read without a schema may get (ConvAbuse has 5, OPELA at most 5)."""


def seen_run(counts: Mapping[int, int]) -> tuple[int, int]:
    """The run of consecutive seen values around the most frequent one.

    Args:
        counts: integer value -> how many ratings gave it (values with a count of 0 are unseen).

    Returns:
        (lowest, highest) of the run, both seen; the most frequent value (the lowest of those
        tied) lies within it.

    Raises:
        ValueError: no value seen, or the run holds more than `MAX_INFERRED_CLASSES` values.
    """
    seen = {v for v, n in counts.items() if n > 0}
    if not seen:
        raise ValueError("no integer rating to build a scale from")
    mode = min(seen, key=lambda v: (-counts[v], v))
    low = high = mode
    while low - 1 in seen and high - low < MAX_INFERRED_CLASSES:
        low -= 1
    while high + 1 in seen and high - low < MAX_INFERRED_CLASSES:
        high += 1
    if high - low + 1 > MAX_INFERRED_CLASSES:
        raise ValueError(f"the ratings run over more than {MAX_INFERRED_CLASSES} consecutive values "
                         f"(around {mode}): give the schema (--schema) that names the classes")
    return low, high
