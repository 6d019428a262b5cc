"""Writes a corpus in the OPELA public-release layout (FORMATS §3), quirks included.

One row per conversation, the 38 columns of the release in its order. Each speaker's sentences go
to `persona_text_all` / `user_text_all`, one per line, a pause as a blank persona line; the final
labels go to Python-style list strings in chronological order over both speakers. The release's
quirks are reproduced on purpose, per conversation and seeded:

- multi-line messages: some sentences are broken over 2-3 lines (per persona: `multiline_rate`
  of its conversations, then 3-30% of their sentences);
- uncounted pauses: in some conversations with pauses the pause sentences are left out of
  `total_sent` and the label lists (their blank lines stay in the persona text);
- a trailing newline after the persona text (an empty last line that is not a pause);
- blank user lines between some user messages (2% of conversations).

What was done is returned (`PublicTruth`) so that order reconstruction can be scored.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from psyattrs.data.output import atomic_output
from psyattrs.synth.people import PersonaSpec, persona_spec
from psyattrs.data.table import final_column
from psyattrs.schema import OPELA

PUBLIC_COLUMNS: tuple[str, ...] = (
    "doc_id", "persona_name_original", "user_id", "total_turn", "total_sent", "total_minutes",
    "pause_count", "total_pause", "pause_hour", "age", "gender", "edu", "income", "open_chat_exp",
    "friend_persona", "friend_user", "attract_persona", "attract_user", "connect_persona",
    "connect_user", "respect_persona", "respect_user", "fun_persona", "fun_user", "natural_persona",
    "natural_user", "blri_persona", "blri_user", "persona_text_all", "user_text_all",
    "persona_summary", "user_summary", "labeler_strange", "labeler_uneasy", "labeler_engage",
    "labeler_active", "labeler_self", "labeler_empathy",
)
_FROM_CONVERSATIONS = PUBLIC_COLUMNS[1:4] + PUBLIC_COLUMNS[5:28] + PUBLIC_COLUMNS[30:32]
_DEFAULT_RATES = (0.3, 0.03, 0.05)  # multiline, uncounted pauses, trailing newline: unknown personas
_BLANK_USER_RATE = 0.02


@dataclass
class PublicTruth:
    """What `write_public` wrote, for scoring order reconstruction.

    Attributes:
        order: one row per sentence of the input table, pauses included, in chronological order:
            doc_id (public id), source_doc_id (the input's doc_id), sent_id, is_pause, speaker
            (`persona` or `user`), line_start and line_end (0-based, end exclusive: the lines of
            that speaker's text, split on "\\n", holding the sentence), position (index in the
            label lists; <NA> for a pause left out of them).
        conversations: one row per conversation: doc_id, source_doc_id, total_sent, pause_count,
            pauses_counted (bool), persona_lines and user_lines (lines after splitting on "\\n"),
            extra_lines (lines beyond one per sentence, from multi-line messages),
            trailing_newline (bool), blank_user_lines (int).
    """

    order: pd.DataFrame
    conversations: pd.DataFrame


def write_public(
    df: pd.DataFrame,
    conversations: pd.DataFrame,
    path: "str | Path",
    *,
    seed: int = 0,
    quirks: bool = True,
    truth_path: "str | Path | None" = None,
) -> PublicTruth:
    """Writes the public-release CSV (FORMATS §3): exactly its 38 columns, UTF-8, one row per conversation.

    Args:
        df: utterance table, chronological within each doc_id, with person_type, is_pause, text
            and the final `labeler_{head}` columns of the six OPELA heads, all filled.
        conversations: one row per doc_id with persona, user_name, persona_name_original, user_id,
            total_turn, total_minutes, pause_count, total_pause, pause_hour, the demographics, the
            survey outcomes and the two summaries (as `SynthResult.conversations`).
        path: the CSV to write (parent folders are created).
        seed: seeds the quirks.
        quirks: False writes a clean file (every conversation adds up).
        truth_path: when given, `PublicTruth.order` is also written there as CSV.

    Returns:
        PublicTruth: the true mapping from label positions to speaker lines, per conversation quirks.

    Raises:
        ValueError: missing columns (named), a doc_id without its conversation row, or an empty
            final label.
    """
    heads = OPELA.head_names
    need = ["doc_id", "person_type", "is_pause", "text"] + [final_column(h) for h in heads]
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise ValueError(f"cannot write the public format: utterance table lacks column(s) {missing}")
    need_conv = ["doc_id", "persona", "user_name", *_FROM_CONVERSATIONS]
    missing = [c for c in need_conv if c not in conversations.columns]
    if missing:
        raise ValueError(f"cannot write the public format: conversations table lacks column(s) {missing}")
    if conversations["doc_id"].duplicated().any():
        dupes = conversations.loc[conversations["doc_id"].duplicated(), "doc_id"].tolist()
        raise ValueError(f"conversations table repeats doc_id(s) {dupes[:5]}")
    meta_by_doc = {rec["doc_id"]: rec for rec in conversations[need_conv].to_dict("records")}
    unknown = [d for d in pd.unique(df["doc_id"]) if d not in meta_by_doc]
    if unknown:
        raise ValueError(f"doc_id(s) without a conversation row: {unknown[:5]}")
    labels = {h: df[final_column(h)] for h in heads}
    for h, col in labels.items():
        if col.isna().any():
            first = df.loc[col.isna(), "sent_id" if "sent_id" in df else "doc_id"].iloc[0]
            raise ValueError(f"final label {final_column(h)!r} is empty (first at {first!r}); resolve the labels first")
    label_arr = {h: col.to_numpy(dtype=np.int64) for h, col in labels.items()}
    pause = df["is_pause"].to_numpy(dtype=bool)
    is_user = (df["person_type"] == "user").to_numpy()
    texts = df["text"].tolist()

    rows, conv_rows = [], []
    order: dict[str, list] = {k: [] for k in ("doc_id", "source_doc_id", "row", "line_start", "line_end", "position")}
    for doc_id, idx in df.groupby("doc_id", sort=False).indices.items():
        meta = meta_by_doc[doc_id]
        try:
            rates = _persona_rates(persona_spec(str(meta["persona"])))
        except ValueError:
            rates = _DEFAULT_RATES
        doc = _DocWriter(random.Random(f"public-{seed}-{doc_id}"), rates, int(meta["pause_count"]), quirks)
        doc.write(idx, pause, is_user, texts)
        total_sent = len(doc.counted)
        public_id = f"{meta['persona']}_{meta['user_name']}_{int(meta['total_turn'])}_{total_sent}"
        row = {c: meta[c] for c in _FROM_CONVERSATIONS}
        row.update(
            doc_id=public_id,
            total_sent=total_sent,
            persona_text_all="\n".join(doc.persona_lines) + ("\n" if doc.trailing else ""),
            user_text_all="\n".join(doc.user_lines),
        )
        counted = np.asarray(doc.counted, dtype=np.int64)
        for h in heads:
            row[final_column(h)] = "[" + ", ".join(map(str, label_arr[h][counted].tolist())) + "]"
        rows.append(row)
        order["doc_id"] += [public_id] * len(idx)
        order["source_doc_id"] += [doc_id] * len(idx)
        order["row"] += idx.tolist()
        order["line_start"] += doc.line_start
        order["line_end"] += doc.line_end
        order["position"] += doc.position
        conv_rows.append(
            {
                "doc_id": public_id,
                "source_doc_id": doc_id,
                "total_sent": total_sent,
                "pause_count": int(pause[idx].sum()),
                "pauses_counted": doc.pauses_counted,
                "persona_lines": len(doc.persona_lines) + int(doc.trailing),
                "user_lines": len(doc.user_lines),
                "extra_lines": doc.extra_lines,
                "trailing_newline": doc.trailing,
                "blank_user_lines": doc.blank_user_lines,
            }
        )
    rows_idx = np.asarray(order.pop("row"), dtype=np.int64)
    order_frame = pd.DataFrame(
        {
            "doc_id": order["doc_id"],
            "source_doc_id": order["source_doc_id"],
            "sent_id": df["sent_id"].to_numpy()[rows_idx] if "sent_id" in df else "",
            "is_pause": pause[rows_idx],
            "speaker": np.where(is_user[rows_idx], "user", "persona"),
            "line_start": np.asarray(order["line_start"], dtype=np.int64),
            "line_end": np.asarray(order["line_end"], dtype=np.int64),
            "position": pd.array(order["position"], dtype="Int64"),
        }
    )
    out = pd.DataFrame(rows, columns=list(PUBLIC_COLUMNS))
    with atomic_output(path, make_parents=True) as tmp:  # complete or absent
        out.to_csv(tmp, index=False, encoding="utf-8", lineterminator="\n")
    truth = PublicTruth(order=order_frame, conversations=pd.DataFrame(conv_rows))
    if truth_path is not None:
        with atomic_output(truth_path, make_parents=True) as tmp:
            truth.order.to_csv(tmp, index=False, encoding="utf-8", lineterminator="\n")
    return truth


def _persona_rates(spec: PersonaSpec) -> tuple[float, float, float]:
    return spec.multiline_rate, spec.uncounted_pause_rate, spec.trailing_newline_rate


class _DocWriter:
    """Lays out one conversation's lines, deciding its quirks."""

    def __init__(self, rng: random.Random, rates: tuple[float, float, float], pause_count: int, quirks: bool):
        self.rng = rng
        multiline, uncounted, trailing = rates if quirks else (0.0, 0.0, 0.0)
        self.split_rate = rng.uniform(0.03, 0.3) if rng.random() < multiline else 0.0
        self.pauses_counted = not (pause_count > 0 and rng.random() < uncounted)
        self.trailing = rng.random() < trailing
        self.blank_rate = rng.uniform(0.1, 0.5) if quirks and rng.random() < _BLANK_USER_RATE else 0.0
        self.persona_lines: list[str] = []
        self.user_lines: list[str] = []
        self.counted: list[int] = []
        self.position: list[object] = []
        self.line_start: list[int] = []
        self.line_end: list[int] = []
        self.extra_lines = 0
        self.blank_user_lines = 0

    def write(self, idx: np.ndarray, pause: np.ndarray, is_user: np.ndarray, texts: list[str]) -> None:
        rng = self.rng
        prev_user = None
        for i in idx.tolist():
            lines = self.user_lines if is_user[i] else self.persona_lines
            if is_user[i] and prev_user is False and self.user_lines and rng.random() < self.blank_rate:
                n_blank = 1 + int(rng.random() * 3) if rng.random() < 0.9 else 10 + int(rng.random() * 30)
                self.user_lines.extend([""] * n_blank)
                self.blank_user_lines += n_blank
            prev_user = bool(is_user[i])
            start = len(lines)
            if pause[i]:
                lines.append("")
            else:
                pieces = _split(texts[i], rng) if self.split_rate and rng.random() < self.split_rate else [texts[i]]
                lines.extend(pieces)
                self.extra_lines += len(pieces) - 1
            self.line_start.append(start)
            self.line_end.append(len(lines))
            if pause[i] and not self.pauses_counted:
                self.position.append(pd.NA)
            else:
                self.position.append(len(self.counted))
                self.counted.append(i)


def _split(text: str, rng: random.Random) -> list[str]:
    """Breaks a sentence over 2-3 lines at spaces that have text on both sides."""
    cuts = [k for k in range(1, len(text) - 1) if text[k] == " " and text[k - 1] != " " and text[k + 1] != " "]
    if not cuts:
        return [text]
    chosen = sorted(rng.sample(cuts, min(len(cuts), 2 if rng.random() < 0.3 else 1)))
    pieces, start = [], 0
    for k in chosen:
        pieces.append(text[start:k])
        start = k + 1
    pieces.append(text[start:])
    return pieces if all(p.strip() for p in pieces) else [text]
