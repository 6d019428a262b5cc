"""PersonalDialog JSON lines (FORMATS §4): Chinese dialogues with speaker traits, no labels.

One JSON object per line. Train records hold `dialog` (utterances), `profile` (one dict per
speaker: `tag`, `loc`, `gender`) and `uid` (the speaker index of each utterance); dev/test
records add `responder_profile`, `golden_response` and `is_biased`. Variants accepted:
`response_profile` for `responder_profile`; utterances and `golden_response` wrapped in a
one-element list; `tag` as a `;`-separated string or a list holding such strings.

Each dialogue becomes rows of the utterance table (`psyattrs.data.table`):

- `doc_id` = `pd{line}` with the 1-based line number of the record in the file (stable for a
  given file, and it points back at the record); `sent_id` = `{doc_id}_{position + 1}`.
- `position` = index of the utterance in the dialogue; `person_id` = the speaker index from
  `uid` (as text; empty when the record has no `uid`); `person_type`, `person_name` and
  `persona` are empty; `is_pause` is False.
- `speaker_gender`, `speaker_loc`, `speaker_tags` (tags joined with `;`, empty tags dropped):
  the speaker's profile, empty when unknown.
- `is_golden`: True for the record's `golden_response`, appended as the last utterance and
  spoken by the responder (`person_id` = the index of the profile equal to the responder
  profile, empty when none is equal; traits from the responder profile).

Records that cannot be used (not JSON, no usable `dialog`, an empty utterance, `uid` that does
not match `dialog` or `profile`) are set aside as `Problem`s with `row` = line number.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Iterator

import pandas as pd

from psyattrs.data.io import check_file, iter_checked_lines, lines_encoding
from psyattrs.data.table import BASE_COLUMNS, Corpus, Problem
from psyattrs.errors import InputFileError
from psyattrs.schema import OPELA, Schema, load_schema

DEFAULT_CHUNK_DIALOGUES = 10_000
TRAIT_COLUMNS: tuple[str, ...] = ("speaker_gender", "speaker_loc", "speaker_tags")
UTTERANCE_COLUMNS: tuple[str, ...] = BASE_COLUMNS + TRAIT_COLUMNS + ("is_golden",)
DIALOGUE_COLUMNS: tuple[str, ...] = ("doc_id", "line", "n_utterances", "n_speakers", "has_golden", "is_biased")
PERSONALDIALOG_SCHEMA: Schema = dataclasses.replace(OPELA, language="zh")
"""The heads the project annotates PersonalDialog with (OPELA's), for Chinese text."""


class RecordError(ValueError):
    """A record that cannot be used: why, and which field."""

    def __init__(self, reason: str, field: str):
        super().__init__(reason)
        self.reason = reason
        self.field = field


def _text(value: Any, field: str) -> str:
    """An utterance: a string, or a one-element list holding one."""
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if not isinstance(value, str):
        raise RecordError(f"{field} is not a string (got {type(value).__name__})", field.split("[")[0])
    if not value.strip():
        raise RecordError(f"empty text at {field}", field.split("[")[0])
    return value


def _tags(value: Any, field: str) -> str:
    """Interest tags as one `;`-joined string (lists, `;`-strings and their mix; empty tags dropped)."""
    if value is None:
        return ""
    items = value if isinstance(value, list) else [value]
    tags: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise RecordError(f"{field} holds a {type(item).__name__}, not text", field.split("[")[0])
        tags.extend(t for t in item.split(";") if t.strip())
    return ";".join(tags)


def _traits(profile: Any, field: str) -> tuple[str, str, str]:
    if not isinstance(profile, dict):
        raise RecordError(f"{field} is not an object", field.split("[")[0])
    out = []
    for key in ("gender", "loc"):
        value = profile.get(key)
        if value is not None and not isinstance(value, str):
            raise RecordError(f"{field}.{key} is not text", field.split("[")[0])
        out.append(value or "")
    return out[0], out[1], _tags(profile.get("tag"), f"{field}.tag")


def decode_line(line: str) -> Any:
    """One JSON line's value; RecordError (field `record`) when it is not valid JSON."""
    try:
        return json.loads(line)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise RecordError(f"not valid JSON: {getattr(exc, 'msg', exc)}", "record") from None


def parse_record(record: Any, doc_id: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Turns one PersonalDialog record into utterance rows and a dialogue row.

    Args:
        record: the parsed JSON object.
        doc_id: the id to give the dialogue.

    Returns:
        (rows, dialogue): the utterance rows (dicts with the keys of `UTTERANCE_COLUMNS` except
        the constant ones) and the dialogue's row (keys of `DIALOGUE_COLUMNS` except `line`).

    Raises:
        RecordError: the record cannot be used (reason and field).
    """
    if not isinstance(record, dict):
        raise RecordError(f"a record must be a JSON object, got {type(record).__name__}", "record")
    dialog = record.get("dialog")
    if not isinstance(dialog, list) or not dialog:
        raise RecordError("'dialog' must be a non-empty list of utterances", "dialog")
    texts = [_text(u, f"dialog[{i}]") for i, u in enumerate(dialog)]
    profiles_raw = record.get("profile", [])
    if not isinstance(profiles_raw, list):
        raise RecordError("'profile' must be a list with one object per speaker", "profile")
    profiles = [_traits(p, f"profile[{i}]") for i, p in enumerate(profiles_raw)]
    uid = record.get("uid")
    if uid is None:
        speakers: list[int | None] = [None] * len(texts)
    else:
        if not isinstance(uid, list) or len(uid) != len(texts):
            raise RecordError(f"'uid' must be a list with one speaker index per utterance ({len(texts)})", "uid")
        if any(isinstance(u, bool) or not isinstance(u, int) for u in uid):
            raise RecordError("'uid' must hold integer speaker indexes", "uid")
        if profiles_raw and any(u < 0 or u >= len(profiles) for u in uid):
            raise RecordError(f"'uid' holds a speaker index outside 0..{len(profiles) - 1} (the profiles)", "uid")
        if any(u < 0 for u in uid):
            raise RecordError("'uid' holds a negative speaker index", "uid")
        speakers = list(uid)
    rows = []
    for position, (text, speaker) in enumerate(zip(texts, speakers)):
        traits = profiles[speaker] if speaker is not None and speaker < len(profiles) else ("", "", "")
        rows.append(_row(doc_id, position, text, "" if speaker is None else str(speaker), traits, False))
    golden = record.get("golden_response")
    if golden is not None:
        text = _text(golden, "golden_response")
        responder_raw = record.get("responder_profile", record.get("response_profile"))
        traits = _traits(responder_raw, "responder_profile") if responder_raw is not None else ("", "", "")
        person = next((str(i) for i, p in enumerate(profiles) if responder_raw is not None and p == traits), "")
        rows.append(_row(doc_id, len(texts), text, person, traits, True))
    biased = record.get("is_biased")
    if biased is not None and not isinstance(biased, bool):
        raise RecordError("'is_biased' must be true or false", "is_biased")
    dialogue = {
        "doc_id": doc_id,
        "n_utterances": len(rows),
        "n_speakers": len({s for s in speakers if s is not None}) if uid is not None else len(profiles),
        "has_golden": golden is not None,
        "is_biased": biased,
    }
    return rows, dialogue


def _row(doc_id: str, position: int, text: str, person_id: str, traits: tuple[str, str, str], golden: bool) -> dict:
    return {
        "doc_id": doc_id,
        "sent_id": f"{doc_id}_{position + 1}",
        "position": position,
        "person_id": person_id,
        "text": text,
        "speaker_gender": traits[0],
        "speaker_loc": traits[1],
        "speaker_tags": traits[2],
        "is_golden": golden,
    }


def _utterance_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=["doc_id", "sent_id", "position", "person_id", "text", *TRAIT_COLUMNS, "is_golden"])
    df["position"] = df["position"].astype("int64")
    for col in ("person_type", "person_name", "persona", "time"):
        df[col] = ""
    df["turn"] = pd.array([pd.NA] * len(df), dtype="Int64")
    df["is_pause"] = False
    df["is_golden"] = df["is_golden"].astype(bool)
    text_columns = ("doc_id", "sent_id", "person_id", "text", "person_type", "person_name", "persona", "time")
    for col in text_columns + TRAIT_COLUMNS:
        df[col] = df[col].astype(str)
    return df[list(UTTERANCE_COLUMNS)]


def _dialogue_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=list(DIALOGUE_COLUMNS))
    df["doc_id"] = df["doc_id"].astype(str)
    for col in ("line", "n_utterances", "n_speakers"):
        df[col] = df[col].astype("int64")
    df["has_golden"] = df["has_golden"].astype(bool)
    df["is_biased"] = df["is_biased"].astype("boolean")
    return df


class PersonalDialogReader:
    """Reads a PersonalDialog file chunk by chunk in constant memory.

    Attributes:
        path: the file.
        chunk_dialogues: dialogues per chunk.
        limit: stop after this many records (None: all).
        problems: records set aside so far (when collecting), each with `row` = line number.
        n_read: records read so far (non-blank lines).
    """

    def __init__(
        self, path: "str | Path", *, chunk_dialogues: int = DEFAULT_CHUNK_DIALOGUES,
        limit: int | None = None, collect_problems: bool = True,
    ):  # fmt: skip
        if isinstance(chunk_dialogues, bool) or not isinstance(chunk_dialogues, int) or chunk_dialogues < 1:
            raise ValueError(f"chunk_dialogues must be a positive integer, got {chunk_dialogues!r}")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ValueError(f"limit must be None or an integer >= 0, got {limit!r}")
        self.path = check_file(path)
        self.chunk_dialogues = chunk_dialogues
        self.limit = limit
        self.collect_problems = collect_problems
        self.problems: list[Problem] = []
        self.n_read = 0

    def chunks(self) -> Iterator[tuple[pd.DataFrame, pd.DataFrame]]:
        """Yields (utterances, dialogues) DataFrames for up to `chunk_dialogues` records each.

        Raises:
            InputFileError: an undecodable line, or (when not collecting problems) the first
                record that cannot be used, naming its line.
        """
        rows: list[dict[str, Any]] = []
        dialogues: list[dict[str, Any]] = []
        for number, line, fault in iter_checked_lines(self.path):
            if fault is None and not line.strip():
                continue
            if self.limit is not None and self.n_read >= self.limit:
                break
            self.n_read += 1
            doc_id = f"pd{number}"
            try:
                if fault is not None:  # undecodable or binary: this line only
                    raise RecordError(fault, "line")
                new_rows, dialogue = parse_record(decode_line(line), doc_id)
            except RecordError as exc:
                if not self.collect_problems:
                    raise InputFileError(self.path, exc.reason, row=number, column=exc.field) from None
                self.problems.append(Problem(doc_id=doc_id, reason=exc.reason, field=exc.field, row=number))
                continue
            rows.extend(new_rows)
            dialogue["line"] = number
            dialogues.append(dialogue)
            if len(dialogues) >= self.chunk_dialogues:
                yield _utterance_frame(rows), _dialogue_frame(dialogues)
                rows, dialogues = [], []
        if dialogues:
            yield _utterance_frame(rows), _dialogue_frame(dialogues)


def iter_personaldialog(
    path: "str | Path",
    *,
    chunk_dialogues: int = DEFAULT_CHUNK_DIALOGUES,
    limit: int | None = None,
    problems: list[Problem] | None = None,
) -> Iterator[pd.DataFrame]:
    """Streams a PersonalDialog file as utterance tables, `chunk_dialogues` dialogues at a time.

    Memory stays constant whatever the file size: lines are read and converted one chunk at a
    time (for millions of dialogues, annotate each chunk and let it go).

    Args:
        path: the JSON-lines file.
        chunk_dialogues: dialogues per yielded table.
        limit: stop after this many records (None: all).
        problems: a list to append set-aside records to; when None, the first unusable record
            raises InputFileError instead (nothing is dropped silently).

    Yields:
        Utterance tables with the columns of `UTTERANCE_COLUMNS` (see the module docstring).

    Raises:
        InputFileError: unreadable file, undecodable line, or an unusable record when
            `problems` is None.
        ValueError: `chunk_dialogues` or `limit` out of range.
    """
    reader = PersonalDialogReader(
        path, chunk_dialogues=chunk_dialogues, limit=limit, collect_problems=problems is not None
    )
    try:
        for utterances, _ in reader.chunks():
            if problems is not None:
                problems.extend(reader.problems)
                reader.problems.clear()
            yield utterances
    finally:
        if problems is not None:
            problems.extend(reader.problems)
            reader.problems.clear()


def read_personaldialog(
    path: "str | Path", *, limit: int | None = None, schema: "Schema | str | Path | None" = None
) -> Corpus:
    """Reads a whole PersonalDialog file (or its first `limit` records) into a `Corpus`.

    Args:
        path: the JSON-lines file.
        limit: read at most this many records (None: all).
        schema: heads the corpus will be annotated with; default OPELA's heads, language `zh`.

    Returns:
        A `Corpus` with `format="personaldialog"`, `record_kind="dialogue"`: `utterances` (see
        the module docstring), `conversations` with `doc_id`, `line`, `n_utterances`,
        `n_speakers`, `has_golden`, `is_biased` (boolean, <NA> when absent), and `problems`.

    Raises:
        InputFileError: unreadable file, undecodable line, no records, or no usable record
            (names the first problem's line).
    """
    schema = PERSONALDIALOG_SCHEMA if schema is None else load_schema(schema)
    reader = PersonalDialogReader(path, chunk_dialogues=DEFAULT_CHUNK_DIALOGUES, limit=limit)
    parts = list(reader.chunks())
    if reader.n_read == 0 and limit != 0:
        raise InputFileError(reader.path, "holds no records (only blank lines)")
    if not parts and reader.problems:
        first = reader.problems[0]
        raise InputFileError(
            reader.path,
            f"no usable dialogue in {reader.n_read} record(s); first: {first.reason}",
            row=first.row,
            column=first.field,
        )
    utterances = pd.concat([u for u, _ in parts], ignore_index=True) if parts else _utterance_frame([])
    dialogues = pd.concat([d for _, d in parts], ignore_index=True) if parts else _dialogue_frame([])
    return Corpus(
        utterances=utterances,
        schema=schema,
        format="personaldialog",
        source=reader.path,
        conversations=dialogues,
        label_sequences=None,
        problems=reader.problems,
        n_read=reader.n_read,
        record_kind="dialogue",
        encoding=lines_encoding(reader.path),
    )
