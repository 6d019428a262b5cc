"""One aligned conversation shown to a reader (`psyattrs data show-aligned`).

`format_dialogue` lays a conversation of a `data align` output out as a two-column dialogue,
persona left and user right, each sentence with its labels and confidence (`?` below
`LOW_CONFIDENCE`); `gold_marks` compares its user lines with hand-made reading orders
(`psyattrs.align.gold`) and says where they differ.
"""

from __future__ import annotations

import unicodedata

import pandas as pd

from psyattrs.align.gold import gold_counts, read_gold, reading_counts
from psyattrs.data.table import final_column
from psyattrs.schema import Schema

LOW_CONFIDENCE = 0.9
"""Sentences below this confidence are marked with `?` (uncertain placement) in `show-aligned`."""


def gold_marks(rows: pd.DataFrame, folder: str, doc: str) -> tuple[dict, str]:
    """Per row label of `rows` (a conversation of an aligned table), the mark of its user lines
    against the hand-made orders in `folder`, and a summary line."""
    gold = read_gold(folder)
    if doc not in gold:
        raise ValueError(f"the gold folder {folder} has no reading of {doc!r} ({len(gold)} conversation(s))")
    for c in ("line_start", "line_end", "is_pause"):
        if c not in rows:
            raise ValueError(f"the table has no {c!r} column: it is not a `psyattrs data align` output")
    rows = rows.assign(
        line_start=pd.to_numeric(rows["line_start"], errors="coerce"), line_end=pd.to_numeric(rows["line_end"], errors="coerce"),
        is_pause=rows["is_pause"].astype(str).str.strip().str.lower().isin({"1", "true"}),
        align_confidence=pd.to_numeric(rows["align_confidence"], errors="coerce"),
    )
    units = rows[~rows["is_pause"] & rows["line_start"].notna()]
    persona = units[units["person_type"] == "persona"]
    used = {i for a, b in zip(persona["line_start"], persona["line_end"]) for i in range(int(a), int(b))}
    size = max([i for who, i in next(iter(gold[doc].orders.values())) if who == "P"] + [-1] + list(used)) + 1
    blank = [i not in used for i in range(size)]
    readers = [gold_counts(o, blank) for o in gold[doc].orders.values()]
    got, _ = reading_counts(rows.reset_index(drop=True).assign(position=range(len(rows))))
    marks, right, total = {}, 0, 0
    for idx, r in units[units["person_type"] == "user"].iterrows():
        notes = []
        for j in range(int(r["line_start"]), int(r["line_end"])):
            values = {c.get(j) for c in readers}
            if len(values) != 1 or None in values:
                notes.append(f"U{j}: readers differ")
                continue
            want = values.pop()
            total += 1
            if got.get(j) == want:
                right += 1
            else:
                notes.append(f"U{j}: readers put it after {want} persona line(s), here {got.get(j)}")
        if notes:
            marks[idx] = "x " + "; ".join(notes)
    share = f"{right / total:.1%}" if total else "n/a"
    summary = (f"gold ({', '.join(sorted(gold[doc].orders))}): {right} of {total} agreed user line(s) placed as the "
               f"readers place them ({share}); x marks the others")
    return marks, summary


def format_dialogue(rows: pd.DataFrame, schema: Schema, width: int, marks: dict | None = None) -> str:
    """One conversation as text: a header, then one block per sentence in two columns.

    Args:
        rows: the conversation's rows of an aligned table (chronological).
        schema: the heads (labels are shown as `head=value`, abbreviated to three letters).
        width: total line width (>= 60).
        marks: optional {row label: note}, printed under the sentence (e.g. where the hand-made
            order differs).

    Returns:
        The dialogue; persona sentences in the left column, user sentences in the right one,
        pauses as a centred marker; each sentence's last line ends with its labels and
        confidence (`?` below `LOW_CONFIDENCE`: an uncertain placement).
    """
    label_w = 4 * len(schema.head_names) + 12
    col = max(20, (width - label_w - 9) // 2)
    first = rows.iloc[0]
    n = len(rows)
    conf = pd.to_numeric(rows["align_confidence"], errors="coerce")
    out = [
        f"{first['doc_id']}: {n} sentence(s), mean confidence {conf.mean():.3f}"
        + (f", {rows['align_mode'].iloc[0]}" if "align_mode" in rows else ""),
        "labels: " + " ".join(f"{h[:3]}={h}" for h in schema.head_names),
        f"{'#':>4} {_pad('persona', col)} | {_pad('user', col)} | labels / confidence",
        "-" * min(width, 4 + 2 * col + label_w + 7),
    ]
    for k, (idx, r) in enumerate(rows.iterrows(), start=1):
        labels = " ".join(
            f"{h[:3]}={'-' if pd.isna(r[final_column(h)]) else int(r[final_column(h)])}" for h in schema.head_names
        )
        c = r["align_confidence"]
        tag = "  n/a" if pd.isna(c) else f"{float(c):.2f}" + ("?" if float(c) < LOW_CONFIDENCE else " ")
        pause = str(r.get("is_pause", 0)).strip().lower() in {"1", "true"}
        text = "" if pd.isna(r["text"]) else str(r["text"])
        if pause:
            body = [_pad("~ pause ~".center(col), col)]
            lines = [f"{k:>4} {body[0]} | {_pad('', col)} | {labels} {tag}"]
        else:
            wrapped = [w for part in text.split("\n") for w in _wrap(part, col)] or [""]
            lines = []
            for j, w in enumerate(wrapped):
                left, right = (w, "") if r["person_type"] == "persona" else ("", w)
                end = f" | {labels} {tag}" if j == len(wrapped) - 1 else " |"
                lines.append(f"{k if j == 0 else '':>4} {_pad(left, col)} | {_pad(right, col)}{end}")
        if marks and idx in marks:
            lines.append(f"{'':>4} {marks[idx]}")
        out.extend(lines)
    return "\n".join(out)


def _cell(ch: str) -> int:
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def _width(text: str) -> int:
    return sum(_cell(ch) for ch in text)


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - _width(text))


def _wrap(text: str, width: int) -> list[str]:
    """Splits text into pieces of at most `width` display cells (wide characters count two),
    breaking at spaces where possible."""
    pieces, current = [], ""
    for word in text.split(" "):
        candidate = f"{current} {word}" if current else word
        if _width(candidate) <= width:
            current = candidate
            continue
        if current:
            pieces.append(current)
        current = ""
        for ch in word:
            if _width(current + ch) > width:
                pieces.append(current)
                current = ""
            current += ch
    pieces.append(current)
    return pieces
