"""Hand-made reading orders of public-release conversations, and scoring a reconstruction
against them.

A gold folder holds one subfolder per reader (`reader1/`, `reader2/`, ...), each with one JSON
file per conversation: `{"doc_id", "order", "uncertain", "notes"}`. `order` lists every line of
both speakers once, chronologically, as `P<i>` / `U<j>`: 0-based indices into the persona's and
the user's text split on newlines (blank lines included; blank persona lines are pauses);
`uncertain` the lines that reader was unsure of.

The fair score (`score_gold`): for each non-blank user line, the number of non-blank persona lines
before it. A reconstruction places a user line right where its count equals the readers'; only the
user lines on which all readers agree are scored. It does not depend on how a reading splits lines
into sentences or where it puts the pauses, only on how the two speakers interleave.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from psyattrs.data.table import Corpus
from psyattrs.errors import InputFileError

_ITEM = re.compile(r"^([PU])(\d+)$")


@dataclass
class GoldOrder:
    """The readings of one conversation: per reader, the order (("P" | "U", line), ...) and the
    lines that reader was unsure of."""

    doc_id: str
    orders: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    uncertain: dict[str, set[tuple[str, int]]] = field(default_factory=dict)


def _item(text: object, path: Path) -> tuple[str, int]:
    m = _ITEM.match(str(text))
    if not m:
        raise InputFileError(path, f"order item {text!r} is not P<i> or U<j>")
    return m.group(1), int(m.group(2))


def read_gold(folder: "str | Path") -> dict[str, GoldOrder]:
    """Reads a gold folder (module docstring): {doc_id: GoldOrder}.

    Raises:
        InputFileError: the folder has no reader subfolder with JSON files, or a file is not a
            reading (bad JSON, missing keys, an item that is not P<i> / U<j>, a line twice).
    """
    root = Path(folder)
    if not root.is_dir():
        raise InputFileError(root, "the gold order folder does not exist")
    readers = sorted(p for p in root.iterdir() if p.is_dir() and any(p.glob("*.json")))
    if not readers:
        raise InputFileError(root, "no reader subfolder with <doc_id>.json readings (e.g. reader1/)")
    out: dict[str, GoldOrder] = {}
    for reader in readers:
        for path in sorted(reader.glob("*.json")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                doc, order = str(data["doc_id"]), data["order"]
            except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError) as e:
                raise InputFileError(path, f"not a reading ({{doc_id, order, ...}}): {e}") from None
            items = [_item(x, path) for x in order]
            if len(set(items)) != len(items):
                raise InputFileError(path, "a line appears twice in the order")
            g = out.setdefault(doc, GoldOrder(doc))
            g.orders[reader.name] = items
            g.uncertain[reader.name] = {_item(x, path) for x in data.get("uncertain", []) or []}
    return out


def _persona_blank(corpus: Corpus) -> dict[str, np.ndarray]:
    u = corpus.utterances
    p = u[u["person_type"] == "persona"].sort_values(["doc_id", "line"])
    return {str(d): g["is_blank"].to_numpy(dtype=bool) for d, g in p.groupby("doc_id", sort=False)}


def _user_lines(corpus: Corpus) -> dict[str, np.ndarray]:
    u = corpus.utterances
    rows = u[(u["person_type"] == "user") & ~u["is_blank"].astype(bool)]
    return {str(d): g["line"].to_numpy(dtype=np.int64) for d, g in rows.groupby("doc_id", sort=False)}


def gold_counts(order: list[tuple[str, int]], persona_blank: np.ndarray) -> dict[int, int]:
    """{user line: non-blank persona lines before it} of one reading."""
    out, seen = {}, 0
    for who, i in order:
        if who == "P":
            seen += int(not (i < len(persona_blank) and persona_blank[i]))
        else:
            out[i] = seen
    return out


def reading_counts(rows: pd.DataFrame) -> tuple[dict[int, int], dict[int, float]]:
    """({user line: non-blank persona lines before it}, {user line: its sentence's confidence})
    of one conversation of a reconstruction (`AlignResult.utterances` rows, chronological)."""
    counts, conf, seen = {}, {}, 0
    rows = rows.sort_values("position") if "position" in rows else rows
    for r in rows.itertuples(index=False):
        if bool(r.is_pause) or pd.isna(r.line_start):
            continue
        lines = range(int(r.line_start), int(r.line_end))
        if r.person_type == "persona":
            seen += len(lines)
        else:
            c = float(r.align_confidence) if pd.notna(r.align_confidence) else float("nan")
            for j in lines:
                counts[j], conf[j] = seen, c
    return counts, conf


def score_gold(utterances: pd.DataFrame, corpus: Corpus, gold: dict[str, GoldOrder]) -> pd.DataFrame:
    """Every non-blank user line of the gold conversations, scored.

    Args:
        utterances: a reconstruction (`AlignResult.utterances` or a `data align` table read back).
        corpus: the public corpus it was made from (for the blank persona lines).
        gold: `read_gold`.

    Returns:
        One row per (doc_id, user line): `agreed` (every reader gives it the same count),
        `gold` (the first reader's count), `got` (the reconstruction's; NaN when it has no
        sentence with that line), `right` (`got == gold`), `confidence` (of its sentence) and
        `uncertain` (some reader marked it).
    """
    blank, users = _persona_blank(corpus), _user_lines(corpus)
    by_doc = {str(d): g for d, g in utterances.groupby(utterances["doc_id"].astype(str), sort=False)}
    rows = []
    for doc, g in gold.items():
        if doc not in blank and doc not in users:
            continue
        pb = blank.get(doc, np.zeros(0, dtype=bool))
        per_reader = [gold_counts(o, pb) for o in g.orders.values()]
        unsure = set().union(*g.uncertain.values()) if g.uncertain else set()
        got, conf = reading_counts(by_doc[doc]) if doc in by_doc else ({}, {})
        for j in users.get(doc, np.zeros(0, dtype=np.int64)).tolist():
            values = [c.get(j) for c in per_reader]
            agreed = None not in values and len(set(values)) == 1
            mine = got.get(j)
            rows.append({
                "doc_id": doc, "line": j, "agreed": agreed, "gold": values[0] if values[0] is not None else np.nan,
                "got": np.nan if mine is None else mine, "right": mine is not None and mine == values[0],
                "confidence": conf.get(j, np.nan), "uncertain": ("U", j) in unsure,
            })
    return pd.DataFrame(rows, columns=["doc_id", "line", "agreed", "gold", "got", "right", "confidence", "uncertain"])


def readers_agreement(corpus: Corpus, gold: dict[str, GoldOrder]) -> pd.Series:
    """Per conversation, the share of non-blank user lines on which every reader gives the same count."""
    blank, users = _persona_blank(corpus), _user_lines(corpus)
    out = {}
    for doc, g in gold.items():
        if doc not in users:
            continue
        counts = [gold_counts(o, blank.get(doc, np.zeros(0, dtype=bool))) for o in g.orders.values()]
        lines = users[doc].tolist()
        out[doc] = float(np.mean([len({c.get(j) for c in counts}) == 1 and None not in {c.get(j) for c in counts}
                                  for j in lines])) if lines else float("nan")
    return pd.Series(out, name="readers_agree")


def summarize(scored: pd.DataFrame) -> pd.DataFrame:
    """Per conversation and overall (`all`): agreed user lines, the share placed right."""
    a = scored[scored["agreed"]]
    per = a.groupby("doc_id")["right"].agg(["size", "mean"]).rename(columns={"size": "lines", "mean": "right"})
    per.loc["all"] = [len(a), a["right"].mean() if len(a) else np.nan]
    per["lines"] = per["lines"].astype(int)
    return per
