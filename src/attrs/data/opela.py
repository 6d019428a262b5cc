"""OPELA readers: the annotated per-sentence table (FORMATS §2) and the public release (§3).

The public release has one row per conversation: two per-speaker texts (one sentence per line)
and the final labels as lists in chronological order over both speakers. The interleaving of
the speakers is not in the file, so this reader attaches no label to any line: it exposes the
lines as they are (`corpus.utterances`) and the label lists as sequences
(`corpus.label_sequences`); a later stage reconstructs the order.

Line counting (public release). A text is split at line breaks (`\\n` or `\\r\\n`); a line break
at the very end of a text terminates its last line and does not start an empty one (text-file
convention; FORMATS §3: "an empty last line that is not a pause"). The flag
`persona_trailing_newline`/`user_trailing_newline` records it, so each text is
`"\\n".join(lines) + ("\\n" if trailing_newline else "")`. Each conversation then gets

    excess = persona_lines + user_lines - total_sent
    line_check = "adds up"              if excess == 0
                 "pauses not counted"   if excess == pause_count > 0
                 "N extra line(s)"      if excess > 0  (multi-line messages, blank user lines, ...)
                 "N fewer line(s)"      if excess < 0

On the 135 real rows of `opela_public_rows.csv` this gives 64 / 4 / 67 / 0. FORMATS §3 counts
64 / 5 / 66 because it also counts the empty string after a trailing newline as a line: for
`ferret_user0723_17_44` that makes the excess 3 = `pause_count`; without it the excess is 2, and
that row's label lists show the pause signature at three positions, i.e. its pauses are counted.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from psyattrs.data.generic import TEXT_COLUMNS, build_sentence_corpus
from psyattrs.data.io import PUBLIC_TEXT_COLUMNS, check_file, read_table, require_columns
from psyattrs.data.table import BASE_COLUMNS, Corpus, final_column, labeler_column
from psyattrs.data.validate import Findings, check_label_lists, parse_int_list
from psyattrs.errors import InputFileError
from psyattrs.schema import OPELA, Schema, load_schema

PERSON_TYPES = frozenset({"user", "persona"})
ANNOTATED_REQUIRED: tuple[str, ...] = ("doc_id", "sent_id", "person_type", "text", "is_pause")
PUBLIC_REQUIRED: tuple[str, ...] = ("doc_id", "total_sent", "pause_count") + PUBLIC_TEXT_COLUMNS
SURVEY_SYNONYMS = {"engaging_persona": "attract_persona", "engaging_user": "attract_user"}
"""The documentation's names for two survey columns -> the names the file (and this reader) uses."""
PUBLIC_INT_COLUMNS: tuple[str, ...] = (
    "total_turn", "total_sent", "total_minutes", "pause_count", "total_pause",
    "age", "gender", "edu", "income", "open_chat_exp",
    "friend_persona", "friend_user", "attract_persona", "attract_user",
    "connect_persona", "connect_user", "respect_persona", "respect_user",
    "fun_persona", "fun_user", "natural_persona", "natural_user", "blri_persona", "blri_user",
)  # fmt: skip
LINE_COUNT_COLUMNS: tuple[str, ...] = (
    "persona_lines", "persona_blank_lines", "persona_trailing_newline",
    "user_lines", "user_blank_lines", "user_trailing_newline",
    "lines_total", "line_excess", "line_check",
)  # fmt: skip
UTTERANCE_EXTRA_COLUMNS = ("line", "is_blank")
PUBLIC_STR_COLUMNS: tuple[str, ...] = (
    "doc_id", "user_id", "persona_name_original", "persona_summary", "user_summary", "pause_hour",
) + PUBLIC_TEXT_COLUMNS  # fmt: skip


# ----------------------------------------------------------------------------------------------
# annotated


def read_annotated(path: "str | Path", schema: "Schema | str | Path | None" = OPELA, *, check_labels: bool = True) -> Corpus:
    """Reads the OPELA annotated per-sentence table (FORMATS §2), CSV or Parquet.

    Required columns: `doc_id`, `sent_id`, `person_type` (`user`/`persona`), `text`,
    `is_pause` and `labeler{1,2,3}_{head}` for every head of the schema. Optional and kept:
    `person_name`, `person_name_original`, `person_id`, `time`, `turn_notation` (becomes `turn`;
    kept as well when a cell is not a number), final `labeler_{head}`, `true_{head}`, and any
    other column.

    Args:
        path: the file.
        schema: the heads (default OPELA), a schema YAML path, or "opela".
        check_labels: False leaves label cells unchecked (bad ones read as not rated).

    Returns:
        A `Corpus` (`format="annotated"`, `record_kind="sentence"`): `utterances` are the kept
        rows in file order with the columns of `psyattrs.data.table`; `position` is the row
        order within the `doc_id` in the file (set-aside rows keep their place, so positions can
        have gaps); `persona` is the `person_name` of the conversation's persona rows, else the
        `doc_id` prefix before the first `_`. `conversations`: `doc_id`, `persona`,
        `n_utterances`, `n_pauses`. `problems`: rows set aside (see `psyattrs.data.validate`).

    Raises:
        InputFileError: unreadable file or missing required column (names it).
    """
    schema = load_schema(schema)
    p = check_file(path)
    df = read_table(p, str_columns=TEXT_COLUMNS)
    required = list(ANNOTATED_REQUIRED) + [labeler_column(k, h) for h in schema.head_names for k in (1, 2, 3)]
    require_columns(df.columns, required, p, "the OPELA annotated table")
    return build_sentence_corpus(df, p, schema, format="annotated", person_types=PERSON_TYPES,
                                 check_labels=check_labels)


# ----------------------------------------------------------------------------------------------
# public release


def read_public(path: "str | Path", schema: "Schema | str | Path | None" = OPELA) -> Corpus:
    """Reads the OPELA public release (FORMATS §3): one row per conversation.

    Required columns: `doc_id`, `total_sent`, `pause_count`, `persona_text_all`,
    `user_text_all` and `labeler_{head}` for every head of the schema; every other column is
    kept. `engaging_persona`/`engaging_user` are accepted for `attract_persona`/`attract_user`.

    Rows that contradict themselves are set aside as `Problem`s (label lists that cannot be
    parsed, of different lengths, of a length other than `total_sent`, or holding values
    outside the head's classes; an unusable `total_sent`, `pause_count` or `pause_hour`; an
    empty or repeated `doc_id`). Everything else is kept, including rows whose line counts do
    not add up (see the module docstring).

    Args:
        path: the file (CSV in UTF-8, UTF-8 with BOM or CP949, or Parquet).
        schema: the heads of the label lists (default OPELA).

    Returns:
        A `Corpus` with `format="public"`, `record_kind="conversation"`, and:

        - `conversations`: one row per kept conversation in file order: every column of the
          file except the two texts and the label lists (which live in the tables below),
          survey items as Int64 where every cell is a whole number, `pause_hour` as a list of
          ints (None where the cell is empty), `persona` (doc_id prefix, e.g. `donut`), and the
          line counts `persona_lines`, `persona_blank_lines`, `persona_trailing_newline`,
          `user_lines`, `user_blank_lines`, `user_trailing_newline`, `lines_total`,
          `line_excess` (lines_total - total_sent) and `line_check`.
        - `utterances`: the lines as they are, persona lines then user lines per conversation:
          the base columns of `psyattrs.data.table` plus `line` (0-based index of the line in
          that speaker's text) and `is_blank` (the line is empty or only spaces). `position` is
          <NA> (Int64): the chronological position is unknown in this release; `sent_id` is
          `{doc_id}_{person_type}_{line + 1}` (1-based, like sentence ids elsewhere);
          `is_pause` is True for blank persona lines; blank user lines are kept with `is_blank`
          True and `is_pause` False; `text` is unchanged. No label columns.
        - `label_sequences`: `doc_id`, `position` (0..total_sent-1, chronological over both
          speakers) and `labeler_{head}` (Int64) for each head.

    Raises:
        InputFileError: unreadable file, missing required column, or both `attract_x` and
            `engaging_x` present with different values.
    """
    schema = load_schema(schema)
    p = check_file(path)
    label_cols = [final_column(h) for h in schema.head_names]
    df = read_table(p, str_columns=PUBLIC_STR_COLUMNS + tuple(label_cols))
    df = _merge_synonyms(df, p)
    require_columns(df.columns, list(PUBLIC_REQUIRED) + label_cols, p, "the OPELA public release")
    n_read = len(df)

    doc = df["doc_id"].astype(str).where(df["doc_id"].notna(), "")
    df["doc_id"] = doc
    total_sent, bad_total = _parse_count(df["total_sent"])
    pause_count, bad_pauses = _parse_count(df["pause_count"])
    found, lists = check_label_lists(df, schema, total_sent)
    found.add_row_faults(df)
    found.add(doc.str.strip() == "", "empty doc_id", "doc_id")
    found.add(doc.duplicated(keep="first") & (doc.str.strip() != ""), "doc_id repeats an earlier row", "doc_id")
    found.add(bad_total, "total_sent is not a whole number >= 0", "total_sent")
    found.add(bad_pauses, "pause_count is not a whole number >= 0", "pause_count")
    if "pause_hour" in df:
        df["pause_hour"] = _parse_pause_hours(df["pause_hour"], found)
    df["total_sent"] = total_sent
    df["pause_count"] = pause_count

    bad = found.bad
    problems = found.problems(df["doc_id"])
    kept = df.loc[~bad].reset_index(drop=True)
    kept_lists = {c: [v for v, b in zip(lists[c], bad) if not b] for c in label_cols}
    utterances, counts = _lines(kept)
    conversations = _conversations(kept, counts, label_cols)
    sequences = _label_sequences(kept["doc_id"], kept_lists, label_cols)
    return Corpus(
        utterances=utterances,
        schema=schema,
        format="public",
        source=p,
        conversations=conversations,
        label_sequences=sequences,
        problems=problems,
        n_read=n_read,
        record_kind="conversation",
        encoding=df.attrs.get("encoding"),
    )


def _merge_synonyms(df: pd.DataFrame, path: Path) -> pd.DataFrame:
    for alias, name in SURVEY_SYNONYMS.items():
        if alias not in df:
            continue
        if name not in df:
            df = df.rename(columns={alias: name})
            continue
        a = pd.to_numeric(df[alias], errors="coerce")
        b = pd.to_numeric(df[name], errors="coerce")
        text_a = df[alias].astype(str).str.strip().where(df[alias].notna(), "")
        text_b = df[name].astype(str).str.strip().where(df[name].notna(), "")
        same = (a == b) | (a.isna() & b.isna() & (text_a == text_b))
        if not same.all():
            row = int(np.flatnonzero(~same.to_numpy())[0]) + 1
            raise InputFileError(
                path, f"{alias!r} and {name!r} name the same survey item but disagree", row=row, column=alias
            )
        df = df.drop(columns=[alias])
    return df


def _parse_count(values: pd.Series) -> tuple[pd.Series, np.ndarray]:
    """A column of whole numbers >= 0: (Int64 values, <NA> where bad; bad mask incl. empty)."""
    num = pd.to_numeric(values.astype(str).str.strip().where(values.notna(), ""), errors="coerce")
    good = num.notna() & (num >= 0) & (num % 1 == 0) & (num < 2**53)
    parsed = pd.array(np.where(good, num, np.nan), dtype="Float64").astype("Int64")
    return pd.Series(parsed, index=values.index), ~good.to_numpy()


def _parse_pause_hours(values: pd.Series, found: Findings) -> pd.Series:
    parsed = [None if _is_empty(v) else parse_int_list(v) for v in values.tolist()]
    unparsable = np.array([p is None and not _is_empty(v) for p, v in zip(parsed, values.tolist())])
    found.add(unparsable, "pause_hour is not a list of whole numbers", "pause_hour")
    return pd.Series(parsed, index=values.index, dtype=object)


def _is_empty(value: object) -> bool:
    if isinstance(value, str):
        return not value.strip()
    return value is None or (isinstance(value, float) and np.isnan(value))


def _split_lines(df: pd.DataFrame, column: str, person_type: str) -> tuple[pd.DataFrame, pd.Series]:
    """The lines of one speaker's text column, exploded: (lines table, trailing-newline flags)."""
    text = df[column].astype(str).where(df[column].notna(), "")
    trailing = text.str.endswith("\n")
    body = text.where(~trailing, text.str.replace(r"\r?\n\Z", "", regex=True))
    lines = body.str.split(r"\r?\n", regex=True)
    table = pd.DataFrame({"doc_id": df["doc_id"], "text": lines, "_conv": np.arange(len(df))})
    table = table[text != ""].explode("text")
    table["text"] = table["text"].astype(str)
    table["line"] = table.groupby("_conv", sort=False).cumcount()
    table["person_type"] = person_type
    return table, trailing


def _lines(kept: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The per-speaker lines (utterance table) and the per-conversation line counts."""
    persona, p_trailing = _split_lines(kept, "persona_text_all", "persona")
    user, u_trailing = _split_lines(kept, "user_text_all", "user")
    lines = pd.concat([persona, user], ignore_index=True)
    lines = lines.sort_values(["_conv", "person_type", "line"], ascending=[True, True, True], kind="stable")
    lines = lines.reset_index(drop=True)
    lines["is_blank"] = lines["text"].str.strip() == ""
    lines["is_pause"] = lines["is_blank"] & (lines["person_type"] == "persona")

    parts = kept["doc_id"].str.split("_")
    short = parts.str[0].fillna("")
    user_name = parts.str[1].fillna("")
    conv = lines["_conv"].to_numpy()
    is_persona = (lines["person_type"] == "persona").to_numpy()
    lines["persona"] = short.to_numpy()[conv]
    lines["person_name"] = np.where(is_persona, short.to_numpy()[conv], user_name.to_numpy()[conv])
    user_ids = kept["user_id"].astype(str).where(kept["user_id"].notna(), "") if "user_id" in kept else None
    lines["person_id"] = np.where(is_persona, "", user_ids.to_numpy()[conv]) if user_ids is not None else ""
    lines["sent_id"] = lines["doc_id"] + "_" + lines["person_type"] + "_" + (lines["line"] + 1).astype(str)
    lines["position"] = pd.array([pd.NA] * len(lines), dtype="Int64")
    lines["turn"] = pd.array([pd.NA] * len(lines), dtype="Int64")
    lines["time"] = ""
    for col in ("doc_id", "sent_id", "person_type", "person_name", "person_id", "persona", "time", "text"):
        lines[col] = lines[col].astype(str)
    lines["line"] = lines["line"].astype("int64")
    utterances = lines[list(BASE_COLUMNS) + list(UTTERANCE_EXTRA_COLUMNS)]

    n = len(kept)
    counts = pd.DataFrame(index=range(n))
    for who, trailing in (("persona", p_trailing), ("user", u_trailing)):
        mine = lines[lines["person_type"] == who]
        counts[f"{who}_lines"] = np.bincount(mine["_conv"], minlength=n).astype("int64")
        counts[f"{who}_blank_lines"] = np.bincount(mine["_conv"], weights=mine["is_blank"], minlength=n).astype("int64")
        counts[f"{who}_trailing_newline"] = trailing.to_numpy(dtype=bool)
    return utterances, counts


def _line_check(excess: np.ndarray, pause_count: np.ndarray) -> list[str]:
    out = []
    for e, pc in zip(excess.tolist(), pause_count.tolist()):
        if e == 0:
            out.append("adds up")
        elif e == pc:
            out.append("pauses not counted")
        elif e > 0:
            out.append(f"{e} extra line" + ("s" if e != 1 else ""))
        else:
            out.append(f"{-e} fewer line" + ("s" if e != -1 else ""))
    return out


def _conversations(kept: pd.DataFrame, counts: pd.DataFrame, label_cols: list[str]) -> pd.DataFrame:
    conv = kept.drop(columns=list(PUBLIC_TEXT_COLUMNS) + label_cols).copy()
    for col in PUBLIC_INT_COLUMNS:
        if col in conv and col not in ("total_sent", "pause_count"):
            conv[col] = _int_if_whole(conv[col])
    conv.insert(1, "persona", kept["doc_id"].str.split("_", n=1).str[0].fillna("").astype(str))
    for col in counts.columns:
        conv[col] = counts[col].to_numpy()
    conv["lines_total"] = conv["persona_lines"] + conv["user_lines"]
    excess = conv["lines_total"].to_numpy() - conv["total_sent"].to_numpy(dtype="int64")
    conv["line_excess"] = excess.astype("int64")
    conv["line_check"] = pd.Series(_line_check(excess, conv["pause_count"].to_numpy(dtype="int64")), dtype=str)
    return conv.reset_index(drop=True)


def _int_if_whole(values: pd.Series) -> pd.Series:
    """Int64 when every non-empty cell is a whole number; the column unchanged otherwise."""
    if pd.api.types.is_integer_dtype(values.dtype):
        return values.astype("Int64")
    text = values.astype(str).str.strip().where(values.notna(), "")
    num = pd.to_numeric(text.where(text != ""), errors="coerce")
    if ((text != "") & ~(num.notna() & (num % 1 == 0) & (num.abs() < 2**53))).any():
        return values
    return pd.Series(pd.array(num, dtype="Float64").astype("Int64"), index=values.index)


def _label_sequences(doc_ids: pd.Series, lists: dict[str, list], label_cols: list[str]) -> pd.DataFrame:
    lengths = np.array([len(v) for v in lists[label_cols[0]]], dtype="int64") if label_cols else np.array([])
    total = int(lengths.sum()) if len(lengths) else 0
    data: dict[str, object] = {
        "doc_id": np.repeat(doc_ids.to_numpy(dtype=object), lengths).astype(str) if total else np.array([], dtype=str),
        "position": (np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)).astype("int64"),
    }
    for col in label_cols:
        flat = np.fromiter((x for seq in lists[col] for x in seq), dtype="int64", count=total)
        data[col] = pd.array(flat, dtype="Int64")
    seq = pd.DataFrame(data)
    seq["doc_id"] = seq["doc_id"].astype(str)
    return seq
