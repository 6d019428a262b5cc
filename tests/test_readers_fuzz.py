"""Property-based tests: truncated, garbled and random files give clean errors, never a crash.

Every reader, `detect_format`, `load_corpus` and the `data validate` command must either read the
file (and then reconcile: read = kept + set aside) or raise `InputFileError` / exit 2 with one
message. Example counts are kept small so the file runs in seconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import annotated_frame, generic_frame, personaldialog_records, public_frame, validate_is_clean
from psyattrs.data import (
    Corpus,
    detect_format,
    read_annotated,
    read_generic,
    read_personaldialog,
    read_public,
)
from psyattrs.errors import InputFileError

FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
READERS = [detect_format, read_annotated, read_public, read_generic, read_personaldialog]  # load_corpus: via the CLI


def _csv_bytes(df: pd.DataFrame) -> bytes:
    return df.to_csv(index=False).encode("utf-8")


VALID = {
    "annotated": _csv_bytes(annotated_frame()),
    "public": _csv_bytes(public_frame()),
    "generic": _csv_bytes(generic_frame()),
    "personaldialog": "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in personaldialog_records()).encode(),
}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "input"


def _only_clean_outcomes(path: Path, readers=READERS) -> None:
    """Every reader either returns a reconciled result or raises InputFileError."""
    for reader in readers:
        try:
            result = reader(path)
        except InputFileError as exc:
            assert str(exc).startswith(str(path)), str(exc)
            continue
        if isinstance(result, Corpus):
            assert result.n_read == result.n_kept + len(result.problems)
        else:
            assert result in ("annotated", "public", "generic", "personaldialog")


@FUZZ
@given(data=st.binary(max_size=600))
def test_random_bytes(scratch, data):
    scratch.write_bytes(data)
    _only_clean_outcomes(scratch)
    validate_is_clean(scratch)


@FUZZ
@given(kind=st.sampled_from(sorted(VALID)), cut=st.floats(0, 1))
def test_truncated_files(scratch, kind, cut):
    raw = VALID[kind]
    scratch.write_bytes(raw[: int(len(raw) * cut)])
    _only_clean_outcomes(scratch)
    validate_is_clean(scratch)


@FUZZ
@given(
    kind=st.sampled_from(sorted(VALID)),
    edits=st.lists(st.tuples(st.floats(0, 1), st.binary(min_size=0, max_size=3)), min_size=1, max_size=6),
)
def test_garbled_files(scratch, kind, edits):
    raw = bytearray(VALID[kind])
    for where, replacement in edits:
        i = int(where * (len(raw) - 1))
        raw[i : i + 1] = replacement
    scratch.write_bytes(bytes(raw))
    _only_clean_outcomes(scratch)
    validate_is_clean(scratch)


MATCHING_READER = {"annotated": read_annotated, "public": read_public, "generic": read_generic}
CELL = st.text(alphabet=st.sampled_from(list('01234[], "\n\r\\x안ㅋ_-.eE+')), max_size=12)


@FUZZ
@given(kind=st.sampled_from(["annotated", "public", "generic"]), cells=st.lists(CELL, min_size=1, max_size=80))
def test_valid_header_with_random_cells(scratch, kind, cells):
    # deeper paths: the header is right, the cells are noise (labels, lists, counts, texts)
    header = VALID[kind].split(b"\n", 1)[0].decode()
    width = header.count(",") + 1
    rows = [cells[i : i + width] for i in range(0, len(cells), width)]
    body = "\n".join(",".join('"' + c.replace('"', '""') + '"' for c in row) for row in rows)
    scratch.write_text(header + "\n" + body + "\n", encoding="utf-8")
    _only_clean_outcomes(scratch, readers=[MATCHING_READER[kind]])
    validate_is_clean(scratch)


JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 5) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=12,
)


@FUZZ
@given(
    records=st.lists(
        st.fixed_dictionaries(
            {"dialog": JSON_VALUE},
            optional={"uid": JSON_VALUE, "profile": JSON_VALUE, "golden_response": JSON_VALUE,
                      "responder_profile": JSON_VALUE, "is_biased": JSON_VALUE},
        ),
        min_size=1,
        max_size=5,
    )
)
def test_personaldialog_random_records(scratch, records):
    scratch.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    _only_clean_outcomes(scratch)
    validate_is_clean(scratch)
