"""The data stage: every input format becomes one utterance table (`psyattrs.data.table`).

`load_corpus` reads any supported file, detecting its format from the content
(`detect_format`) unless one is forced.
"""

from __future__ import annotations

from pathlib import Path

from psyattrs.data.generic import read_generic
from psyattrs.data.annotations import corpus_annotator_labels
from psyattrs.data.io import FORMATS, detect_format
from psyattrs.data.lewidi import read_lewidi
from psyattrs.data.long import read_long
from psyattrs.data.opela import read_annotated, read_public
from psyattrs.data.personaldialog import iter_personaldialog, read_personaldialog
from psyattrs.data.table import Corpus, Problem
from psyattrs.schema import OPELA, Schema, load_schema

__all__ = [
    "FORMATS",
    "Corpus",
    "Problem",
    "corpus_annotator_labels",
    "detect_format",
    "iter_personaldialog",
    "load_corpus",
    "read_annotated",
    "read_generic",
    "read_lewidi",
    "read_long",
    "read_personaldialog",
    "read_public",
]


def load_corpus(
    path: "str | Path",
    *,
    format: str | None = None,
    schema: "Schema | str | Path | None" = None,
    check_labels: bool = True,
) -> Corpus:
    """Reads a corpus file of any supported format.

    Args:
        path: the file.
        format: one of `FORMATS` to force it, or None to detect it from the content.
        schema: a `Schema`, "opela", a schema YAML path, or None (OPELA; for PersonalDialog,
            OPELA's heads with language `zh`; for LeWiDi and long tables, the schema the file
            implies: `psyattrs.data.lewidi.schema_of`). A file detected as `annotated` but read with a
            schema other than OPELA is read as `generic` (the annotated layout is OPELA's).
        check_labels: False for prediction: label cells are not checked, so a bad label cell
            does not set its sentence aside (it reads as not rated).

    Returns:
        The `Corpus` the format's reader returns.

    Raises:
        ValueError: `format` is not one of `FORMATS`.
        InputFileError: the file cannot be used (see the readers and `detect_format`).
    """
    if format is not None and format not in FORMATS:
        raise ValueError(f"format {format!r} is not one of {list(FORMATS)}")
    resolved = None if schema is None else load_schema(schema)
    fmt = format or detect_format(path)
    if fmt == "personaldialog":
        return read_personaldialog(path, schema=resolved)
    if fmt == "lewidi":
        return read_lewidi(path, resolved)
    if fmt == "long":
        return read_long(path, resolved)
    resolved = resolved or OPELA
    if fmt == "annotated" and format is None and resolved != OPELA:
        fmt = "generic"
    if fmt == "annotated":
        return read_annotated(path, resolved, check_labels=check_labels)
    if fmt == "public":
        return read_public(path, resolved)
    return read_generic(path, resolved, check_labels=check_labels)
