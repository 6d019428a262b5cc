"""The LeWiDi harmonised JSON (FORMATS §7): multi-annotator corpora of the Learning-with-Disagreements tasks.

A file is one JSON object, item id -> item (`text`, `annotators`, `annotations`, `number of
annotations`, `annotation task`, `lang`, `split`, `hard_label`, `soft_label`, `other_info`).

What the reader makes of it (`read_lewidi`):

- every item is a conversation (`doc_id` = item id). A plain item is one utterance whose
  `sent_id` is the item id. A ConvAbuse-style item (`text` is a JSON object with `prev_agent`,
  `prev_user`, `agent`, `user`) is four utterances with speakers `agent`/`user`; only the last
  (`user`, `sent_id` = item id) is rated, the others are context;
- the annotators' ratings go to the long table `Corpus.annotations` (sent_id, annotator, head,
  label; `psyattrs.data.annotations`), and to the vote slots of the utterance table's rated
  turn: `labeler{k}_{head}` the k-th rating, `annotator{k}_{head}` who gave it; `hard_label` becomes the final label `labeler_{head}` of a binary
  head; a severity head's final label is derived the way FORMATS §7 says `hard_label` is made: the
  majority of the item's ratings, a tie broken at random (`severity_final`: ConvAbuse's
  `hard_label` is abusive yes/no, so among tied classes those on its side win, then a random
  choice seeded by the item id); the file's `split`
  (train/dev/test) the column `split`, `other_info` the column `other_info` (JSON text);
- the schema comes from the file unless one is given (`schema_of`): one head named after the
  annotation task (`offensiveness detection` -> `offensiveness`). Its classes are the values seen,
  bounded (`psyattrs.data.scales.seen_run`): the run of consecutive values around the most
  frequent one, at most `MAX_INFERRED_CLASSES`. Binary when that run lies within 0/1, else a
  severity head whose classes are the run's values from the lowest to the highest (ConvAbuse:
  -3..1 -> classes 0..4, named `-3`..`1`; a run within -3..1 always gets that scale). A value
  outside the run (one `-2` or `100000` in a 0/1 file) is an outlying value, not a class: the
  item that gives it is set aside, named, and no other item. The language is the items' `lang`.

An item is set aside, with one `Problem` naming the item id and the field, when its
`annotations` and `annotators` lists differ in length, a label is not one of the schema's
classes, its `soft_label` does not sum to 1 or disagrees with the shares of its annotations,
its `hard_label` is not a class, `number of annotations` is not the length of the lists, or its
text is missing, or its id repeats the id of an earlier item (the first is kept; a JSON reader
would silently keep the last). An item without annotations is kept, unrated (a file to predict).
`n_read == n_kept + len(problems)` counts items, repeated ids included.

`sibling_splits(path)` finds `X_dev.json` and `X_test.json` beside `X_train.json`.
"""

from __future__ import annotations

import functools
import json
import math
import re
import zlib
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from psyattrs.data.annotations import make_annotations, vote_slots
from psyattrs.data.io import LEWIDI_ITEM_KEYS as ITEM_KEYS
from psyattrs.data.io import check_file, decode_bytes
from psyattrs.data.scales import seen_run
from psyattrs.data.table import Corpus, Problem, final_column, normalize_table
from psyattrs.errors import InputFileError
from psyattrs.schema import UNKNOWN_LANGUAGE, Head, Schema

CONVERSATION_TURNS: tuple[tuple[str, str], ...] = (
    ("prev_agent", "agent"), ("prev_user", "user"), ("agent", "agent"), ("user", "user"),
)
"""ConvAbuse's turns in order, with the speaker of each; the last one is rated."""
SPLITS: tuple[str, ...] = ("train", "dev", "test")
CONVABUSE_SCALE = (-3, 1)
"""ConvAbuse's severity values; a file whose values lie within it gets all five classes, so that
train and test files read alike whichever values each happens to hold."""
SOFT_TOLERANCE = 0.01
"""How far a `soft_label` may be from summing to 1, or from its annotations' shares (the files
round shares such as 1/3)."""

_WORD = re.compile(r"[a-z][a-z0-9]*")


# ---------------------------------------------------------------------------------- the file


class Items(dict):
    """A LeWiDi file's items, item id -> item, in file order (the first item of each id).

    Attributes:
        repeated: the items whose id repeats an earlier one, as (position in the file, 1-based;
            item id; position of the first item with that id), in file order.
    """

    repeated: list[tuple[int, str, int]]


def _first_of_each_key(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`json` object hook: a dict that keeps the first of repeated keys (and says which repeat)."""
    out = Items()
    out.repeated = []
    first: dict[str, int] = {}
    for number, (key, value) in enumerate(pairs, start=1):
        if key in first:
            out.repeated.append((number, key, first[key]))
            continue
        first[key] = number
        out[key] = value
    return out


def load_items(path: "str | Path") -> Items:
    """The items of a LeWiDi file: item id -> item dict, in file order.

    An id that repeats an earlier item's id does not replace it: the first is kept, and the
    result's `repeated` lists the others (`read_lewidi` sets them aside).

    Raises:
        InputFileError: not readable, not JSON, not an object of objects.
    """
    p = check_file(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise InputFileError(p, f"cannot be read: {exc.strerror or exc}") from None
    text, _ = decode_bytes(raw, p)
    try:
        data = json.loads(text, object_pairs_hook=_first_of_each_key)
    except (json.JSONDecodeError, RecursionError) as exc:
        line = getattr(exc, "lineno", None)
        raise InputFileError(p, f"not valid JSON: {exc}", row=line) from None
    if not isinstance(data, dict):
        raise InputFileError(p, f"a LeWiDi file is one JSON object (item id -> item), got a {type(data).__name__}")
    if not data:
        raise InputFileError(p, "holds no item (an empty JSON object)")
    for key, item in data.items():
        if not isinstance(item, dict):
            raise InputFileError(p, f"item {key!r} is a {type(item).__name__}, not an object with {sorted(ITEM_KEYS)}")
    return data


def _schema_or_error(items: Items, p: Path) -> Schema:
    try:
        return schema_of(items, name=corpus_name(p))
    except ValueError as exc:
        raise InputFileError(p, str(exc), column="annotations") from None


def sibling_splits(path: "str | Path") -> dict[str, Path] | None:
    """The official split files of a corpus named by its train file.

    `MD-Agreement_train.json` -> {"train": ..._train.json, "valid": ..._dev.json (when present),
    "test": ..._test.json}; None when the name does not end in `_train.json` or no test file is
    beside it.
    """
    p = Path(path)
    m = re.match(r"^(.*)([_-])train(\.json)$", p.name, flags=re.IGNORECASE)
    if not m:
        return None
    stem, sep, suffix = m.groups()
    test = p.with_name(f"{stem}{sep}test{suffix}")
    if not test.is_file():
        return None
    out = {"train": p, "test": test}
    dev = p.with_name(f"{stem}{sep}dev{suffix}")
    if dev.is_file():
        out["valid"] = dev
    return out


# -------------------------------------------------------------------------------- the schema


def _split_list(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v).strip() for v in value]
    if value is None:
        return []
    text = str(value).strip()
    return [v.strip() for v in text.split(",")] if text else []


@functools.lru_cache(maxsize=4096)
def _as_int(value: str) -> int | None:
    """The integer a label text writes (`"1"`, `"-3"`, `"1.0"`), None when it is not one (cached:
    a corpus writes few distinct labels)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(number) or number != int(number):
        return None
    return int(number)


def head_name(task: Any) -> str:
    """The head name of an `annotation task`: its first word, lower-case (`label` without one)."""
    words = _WORD.findall(str(task or "").lower())
    return words[0] if words else "label"


def schema_of(items: Mapping[str, Mapping[str, Any]], *, name: str = "lewidi") -> Schema:
    """The schema a LeWiDi file implies (see the module docstring).

    The classes are the values seen, bounded (`psyattrs.data.scales.seen_run`): the run of
    consecutive values around the most frequent one. An outlying value (one `-2` or `100000` in a
    0/1 file) is not a class: the items that give it are set aside by `read_lewidi`, named.

    Args:
        items: the file's items (`load_items`).
        name: the schema's name (the corpus name, e.g. `MD-Agreement`).

    Raises:
        ValueError: the ratings run over more than `MAX_INFERRED_CLASSES` consecutive values.
    """
    counts: dict[int, int] = {}
    tasks: dict[str, int] = {}
    langs: dict[str, int] = {}
    for item in items.values():
        for v in _split_list(item.get("annotations")):
            number = _as_int(v)
            if number is not None:
                counts[number] = counts.get(number, 0) + 1
        task = head_name(item.get("annotation task"))
        tasks[task] = tasks.get(task, 0) + 1
        lang = str(item.get("lang") or "").strip().lower()
        langs[lang] = langs.get(lang, 0) + 1
    head = max(tasks, key=tasks.get) if tasks else "label"
    low, high = seen_run(counts) if counts else (0, 1)
    if 0 <= low and high <= 1:
        classes = {0: f"not {head}", 1: head}
        ordinal = False
    else:
        if CONVABUSE_SCALE[0] <= low and high <= CONVABUSE_SCALE[1]:  # the documented scale, whole
            low, high = CONVABUSE_SCALE
        classes = {i: str(v) for i, v in enumerate(range(low, high + 1))}
        ordinal = True
    language = max(langs, key=langs.get) if langs else ""
    try:
        Schema(name="probe", heads=(Head("x", {0: "a", 1: "b"}),), language=language)
    except ValueError:
        language = UNKNOWN_LANGUAGE
    return Schema(name=name, heads=(Head(head, classes, ordinal=ordinal),), language=language or UNKNOWN_LANGUAGE)


def class_values(head: Head) -> dict[int, int]:
    """Raw annotation value -> class of a head read from LeWiDi: the identity for 0..K-1 heads,
    the class whose name is the value for a severity head (`-3` -> 0)."""
    names = {c: _as_int(n) for c, n in head.classes.items()}
    if all(v is not None for v in names.values()) and sorted(names.values()) != list(range(head.n_classes)):
        return {v: c for c, v in names.items()}
    return {c: c for c in head.values}


def corpus_name(path: "str | Path") -> str:
    """`MD-Agreement` for `MD-Agreement_train.json`."""
    stem = Path(path).stem
    return re.sub(r"[_-](train|dev|test)$", "", stem, flags=re.IGNORECASE) or stem


# ---------------------------------------------------------------------------------- reading


def _item_text(item: Mapping[str, Any]) -> list[tuple[str, str]] | None:
    """(speaker, text) turns of an item: one turn without speaker, or ConvAbuse's four; None when
    there is no text."""
    text = item.get("text")
    if text is None:
        return None
    if isinstance(text, dict):
        conv = text
    else:
        text = str(text)
        conv = None
        if text.lstrip().startswith("{"):
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError:
                parsed = None
            if isinstance(parsed, dict) and {k for k, _ in CONVERSATION_TURNS} & set(parsed):
                conv = parsed
        if conv is None:
            return [("", text)]
    return [(speaker, "" if conv.get(key) is None else str(conv.get(key))) for key, speaker in CONVERSATION_TURNS]


def _check_item(item: Mapping[str, Any], head: Head, values: dict[int, int], item_id: str = "") -> tuple[list[tuple[str, str]], list[str], list[int], int | None, list[tuple[str, str]]]:
    """Parses one item: (turns, annotators, classes, final class, [(field, reason)] faults)."""
    faults: list[tuple[str, str]] = []
    turns = _item_text(item)
    if turns is None or not turns[-1][1].strip():
        faults.append(("text", "no text"))
        turns = turns or [("", "")]
    annotators = _split_list(item.get("annotators"))
    raw = _split_list(item.get("annotations"))
    if len(raw) != len(annotators):
        faults.append(("annotations", f"{len(raw)} annotations for {len(annotators)} annotators"))
    classes: list[int] = []
    bad = []
    for v in raw:
        number = _as_int(v)
        if number is None or number not in values:
            bad.append(v)
        else:
            classes.append(values[number])
    if bad:
        allowed = sorted(values)
        faults.append(("annotations", f"label(s) {bad[:5]} outside the schema's classes {allowed} (head {head.name!r})"))
    n_stated = item.get("number of annotations")
    if n_stated is not None and _as_int(str(n_stated)) != len(raw):
        faults.append(("number of annotations", f"says {n_stated} but the item has {len(raw)} annotations"))
    final = None
    hard = item.get("hard_label")
    binary_final = head.is_binary or values == {c: c for c in head.values}
    abusive = None
    if hard is not None and str(hard).strip() != "":
        number = _as_int(str(hard))
        if number is None or (binary_final and number not in values):
            faults.append(("hard_label", f"hard_label {hard!r} is not one of the classes {sorted(values)}"))
        elif number in values and binary_final:
            final = values[number]
        elif not binary_final and number in (0, 1):
            abusive = bool(number)
    if not binary_final and classes and not bad:
        final = severity_final(classes, head, values, abusive=abusive, item_id=item_id)
    soft = item.get("soft_label")
    if soft is not None and not bad and classes:
        faults.extend(_check_soft(soft, raw, head, values))
    return turns, annotators, classes, final, faults


def severity_final(classes: list[int], head: Head, values: dict[int, int], *, abusive: bool | None,
                   item_id: str) -> int:
    """The final label of a severity head, derived as FORMATS §7 says the file's `hard_label` is:
    the majority (most frequent) class of the item's ratings, a tie broken at random.

    The file's binary `hard_label` (abusive = a negative value) is the publishers' own tie-break:
    among tied classes, those on its side are kept when there are any; what still ties is decided
    at random, seeded by the item id (the same item gets the same label in every run and file order).

    Args:
        classes: the item's ratings as classes of `head`.
        head: the severity head.
        values: raw value -> class (`class_values`).
        abusive: the file's `hard_label` (True = 1, abusive), None when absent.
        item_id: seeds the random tie-break.
    """
    counts = np.bincount(np.asarray(classes, dtype=np.int64), minlength=head.n_classes)
    tied = np.flatnonzero(counts == counts.max())
    if len(tied) > 1 and abusive is not None:
        raw = {c: v for v, c in values.items()}
        side = [c for c in tied if (raw[int(c)] < 0) == abusive]
        if side:
            tied = np.asarray(side)
    if len(tied) == 1:
        return int(tied[0])
    rng = np.random.default_rng(zlib.crc32(item_id.encode("utf-8")))
    return int(rng.choice(tied))


def _check_soft(soft: Any, raw: list[str], head: Head, values: dict[int, int]) -> list[tuple[str, str]]:
    if not isinstance(soft, dict):
        return [("soft_label", f"soft_label is a {type(soft).__name__}, not an object class -> share")]
    try:
        shares = {str(k).strip(): float(v) for k, v in soft.items()}
    except (TypeError, ValueError):
        return [("soft_label", "soft_label holds a share that is not a number")]
    total = sum(shares.values())
    if not math.isfinite(total) or abs(total - 1.0) > SOFT_TOLERANCE:
        return [("soft_label", f"soft_label sums to {total:.4g}, not 1")]
    numbers = [_as_int(v) for v in raw]
    keys = {_as_int(k) for k in shares}
    severity = values != {c: c for c in head.values}
    if severity and keys <= {0, 1}:  # ConvAbuse: severity annotations, binary shares (negative = 1, abusive)
        abusive = sum(1 for v in numbers if v < 0) / len(numbers)
        observed = {0: 1.0 - abusive, 1: abusive}
    elif keys <= set(values):  # shares over the annotation values themselves
        observed = {k: numbers.count(k) / len(numbers) for k in keys | set(numbers)}
    else:
        return [("soft_label", f"soft_label classes {sorted(shares)} are not the head's classes")]
    stated = {_as_int(k): v for k, v in shares.items()}
    worst = max(abs(stated.get(k, 0.0) - observed.get(k, 0.0)) for k in set(stated) | set(observed))
    if worst > SOFT_TOLERANCE:
        pretty = {str(k): round(v, 4) for k, v in sorted(observed.items())}
        return [("soft_label", f"soft_label {soft} disagrees with the annotations' shares {pretty}")]
    return []


def read_lewidi(path: "str | Path", schema: "Schema | None" = None) -> Corpus:
    """Reads a LeWiDi harmonised JSON file (see the module docstring).

    Args:
        path: the file.
        schema: the label schema; None = `schema_of` the file. A given schema must have one head.

    Returns:
        A `Corpus` with `format="lewidi"`, `record_kind="item"` (a record is an item):
        `utterances` (one row per turn; the rated turn carries `labeler_{head}`, the vote slots
        `labeler{k}_{head}`, `split` and `other_info`), `annotations` (the long table),
        `conversations` (`doc_id`, `persona` = "", `n_utterances`, `n_pauses`, `split`,
        `n_annotations`), `problems` (one per item set aside).

    Raises:
        InputFileError: the file is not a LeWiDi JSON object.
        ValueError: a given schema with other than one head.
    """
    p = check_file(path)
    items = load_items(p)
    if schema is None:
        schema = _schema_or_error(items, p)
    if len(schema.heads) != 1:
        raise ValueError(f"a LeWiDi file has one label per item; schema {schema.name!r} has heads {schema.head_names}")
    head = schema.heads[0]
    values = class_values(head)
    rows: list[dict[str, Any]] = []
    ann_sent: list[str] = []
    ann_who: list[str] = []
    ann_label: list[int] = []
    problems: list[Problem] = []
    conversations = []
    positions = _file_positions(items)
    for item_id, item in items.items():
        item_id = str(item_id)
        number = positions[item_id]
        turns, annotators, classes, final, faults = _check_item(item, head, values, item_id)
        if faults:
            problems.append(Problem(doc_id=item_id, reason="; ".join(r for _, r in faults),
                                    field=", ".join(dict.fromkeys(f for f, _ in faults)), row=number, sent_id=item_id))
            continue
        split = str(item.get("split") or "")
        info = item.get("other_info")
        for position, (speaker, text) in enumerate(turns):
            rated = position == len(turns) - 1
            rows.append({
                "doc_id": item_id,
                "sent_id": item_id if rated else f"{item_id}:{CONVERSATION_TURNS[position][0]}",
                "position": position,
                "person_type": speaker,
                "text": text,
                final_column(head.name): final if rated else None,
                "split": split,
                "other_info": json.dumps(info, ensure_ascii=False) if (rated and info is not None) else "",
            })
        ann_sent.extend([item_id] * len(classes))
        ann_who.extend(annotators)
        ann_label.extend(classes)
        conversations.append({"doc_id": item_id, "persona": "", "n_utterances": len(turns), "n_pauses": 0,
                              "split": split, "n_annotations": len(classes)})
    for number, item_id, first in items.repeated:
        problems.append(Problem(doc_id=item_id, reason=f"item id {item_id!r} repeats the id of item {first} of the "
                                f"file; the first is kept, this one set aside", field="item id", row=number,
                                sent_id=item_id))
    problems.sort(key=lambda problem: problem.row or 0)
    columns = ["doc_id", "sent_id", "position", "person_type", "text", final_column(head.name), "split", "other_info"]
    table = pd.DataFrame(rows, columns=columns)
    table[final_column(head.name)] = pd.array(table[final_column(head.name)].tolist(), dtype="Int64")
    annotations = make_annotations(ann_sent, ann_who, [head.name] * len(ann_sent), ann_label)
    utterances = normalize_table(vote_slots(table, annotations, schema), schema)
    return Corpus(
        utterances=utterances,
        schema=schema,
        format="lewidi",
        source=p,
        conversations=pd.DataFrame(conversations, columns=["doc_id", "persona", "n_utterances", "n_pauses", "split",
                                                           "n_annotations"]),
        label_sequences=None,
        problems=problems,
        n_read=len(items) + len(items.repeated),
        record_kind="item",
        annotations=annotations,
    )


def _file_positions(items: Items) -> dict[str, int]:
    """Item id -> the item's position in the file (1-based, counting repeated ids too)."""
    skipped = sorted(number for number, _, _ in items.repeated)
    out: dict[str, int] = {}
    number, j = 0, 0
    for key in items:
        number += 1
        while j < len(skipped) and skipped[j] == number:
            number += 1
            j += 1
        out[key] = number
    return out


def file_schema(path: "str | Path") -> Schema:
    """The schema a LeWiDi file implies (`schema_of` of its items, named after the corpus)."""
    p = check_file(path)
    return _schema_or_error(load_items(p), p)


def split_counts(corpus: Corpus) -> dict[str, int]:
    """Items per official split value (`train`, `dev`, `test`, or "" when unstated)."""
    if "split" not in corpus.conversations:
        return {}
    counts = corpus.conversations["split"].value_counts()
    return {str(k): int(v) for k, v in counts.items()}
