"""Property-based tests of the LeWiDi and long readers (issue 26): outlying rating values,
repeated item ids and huge rating lists give a reconciled corpus with a bounded class count, or
one clean error; never a crash, never a class count that follows one value."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import validate_is_clean
from psyattrs.data import read_long
from psyattrs.data.lewidi import read_lewidi
from psyattrs.data.scales import MAX_INFERRED_CLASSES
from psyattrs.errors import InputFileError

FUZZ = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                         HealthCheck.function_scoped_fixture])
RATING = st.one_of(
    st.integers(0, 1), st.integers(0, 1), st.integers(0, 1),  # mostly a plain 0/1 corpus
    st.sampled_from(["-2", "-3", "2", "100000", "1e9", "1e400", "-1e9", "9" * 30, "nan", "x", ""]),
)


@st.composite
def lewidi_text(draw) -> tuple[str, int]:
    """A LeWiDi file as raw JSON text (ids may repeat) and its number of items written."""
    n = draw(st.integers(1, 12))
    ids = draw(st.lists(st.sampled_from([str(i) for i in range(15)]), min_size=n, max_size=n))
    parts = []
    for i, item_id in enumerate(ids):
        if draw(st.integers(0, 9)) == 0:
            votes = [draw(st.integers(0, 1))] * draw(st.integers(200, 1500))  # a huge rating list
        else:
            votes = draw(st.lists(RATING, min_size=0, max_size=7))
        item = {"text": f"item {i}", "annotation task": "offensiveness detection",
                "annotations": ",".join(str(v) for v in votes),
                "annotators": ",".join(f"A{j}" for j in range(len(votes))), "lang": "en", "split": "train"}
        if draw(st.booleans()):
            item["number of annotations"] = len(votes)
        parts.append(f"{json.dumps(item_id)}: {json.dumps(item)}")
    return "{" + ", ".join(parts) + "}", n


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz_lewidi")


@FUZZ
@given(case=lewidi_text())
def test_lewidi_files_with_outliers_repeats_and_huge_lists(scratch, case):
    text, n_written = case
    path = scratch / "items.json"
    path.write_text(text, encoding="utf-8")
    try:
        corpus = read_lewidi(path)
    except InputFileError as exc:
        assert str(exc).startswith(str(path))
    else:
        assert corpus.n_read == n_written == corpus.n_kept + len(corpus.problems)
        head = corpus.schema.heads[0]
        assert 2 <= head.n_classes <= MAX_INFERRED_CLASSES or head.n_classes == 1
        ids = [p.doc_id for p in corpus.problems if p.field == "item id"]
        assert len(ids) == n_written - len(json.loads(text))  # every repeated id set aside, named
    validate_is_clean(path)


@FUZZ
@given(
    labels=st.lists(RATING, min_size=1, max_size=60),
    cut=st.sets(st.integers(0, 59), max_size=3),
    repeat=st.booleans(),
)
def test_long_tables_with_outliers_short_rows_and_repeats(scratch, labels, cut, repeat):
    rows = [f"i{k % 7},w{k // 7 if not repeat else k % 3},{v},text {k}" for k, v in enumerate(labels)]
    rows = [",".join(r.split(",")[:3]) if k in cut else r for k, r in enumerate(rows)]  # 3 of 4 fields
    path = scratch / "long.csv"
    path.write_text("item,worker,label,text\n" + "\n".join(rows) + "\n", encoding="utf-8")
    try:
        corpus = read_long(path)
    except InputFileError as exc:
        assert str(exc).startswith(str(path))
    else:
        assert corpus.n_read == len(labels) == corpus.n_kept + len(corpus.problems)
        assert all(2 <= h.n_classes <= MAX_INFERRED_CLASSES for h in corpus.schema.heads)
        short = {p.row - 1 for p in corpus.problems if p.field == "row"}
        assert short == {k for k in cut if k < len(labels)}  # every row cut short, and no other
        kept = pd.Series(corpus.annotations["label"]) if corpus.annotations is not None else pd.Series([], dtype=int)
        assert kept.between(0, MAX_INFERRED_CLASSES - 1).all()
    validate_is_clean(path)
