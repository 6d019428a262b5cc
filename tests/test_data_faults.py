"""Issue 26, items 2-5: outlying label values, repeated LeWiDi ids, many ratings on one item,
long-format rows cut short and CSV rows with undecodable bytes. Every file is built here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from psyattrs.cli import main
from psyattrs.data import load_corpus, read_long
from psyattrs.data.annotations import make_annotations, vote_slots
from psyattrs.data.lewidi import read_lewidi, schema_of
from psyattrs.data.scales import MAX_INFERRED_CLASSES, seen_run
from psyattrs.errors import InputFileError
from psyattrs.schema import Head, Schema


def lewidi_item(i: int, votes: list, n_annotators: int | None = None) -> dict:
    numbers = [v for v in votes if isinstance(v, int) and v in (0, 1)]
    share = sum(numbers) / len(numbers) if numbers else 0.0
    return {
        "text": f"sentence number {i}", "annotation task": "offensiveness detection",
        "number of annotations": len(votes), "annotations": ",".join(str(v) for v in votes),
        "annotators": ",".join(f"Ann{(i + j) % 40}" for j in range(n_annotators or len(votes))),
        "lang": "en", "hard_label": str(int(share > 0.5)), "soft_label": {"0": 1 - share, "1": share},
        "split": "train", "other_info": {},
    }


def eighty_items() -> dict:
    return {str(i): lewidi_item(i, [(i + j) % 2 for j in range(5)]) for i in range(80)}


def write(items: dict, path: Path) -> Path:
    path.write_text(json.dumps(items), encoding="utf-8")
    return path


# ------------------------------------------------------------------ item 2: outlying values


@pytest.mark.parametrize("outlier", ["-2", "100000", "1000000000", "1e9"])
def test_one_outlying_lewidi_rating_sets_aside_its_item_and_no_other(outlier, tmp_path):
    items = eighty_items()
    items["7"]["annotations"] = "1,0,0,1," + outlier
    corpus = read_lewidi(write(items, tmp_path / "x.json"))
    head = corpus.schema.heads[0]
    assert head.n_classes == 2 and not head.ordinal
    assert corpus.n_read == 80 and corpus.n_kept == 79 and len(corpus.problems) == 1
    problem = corpus.problems[0]
    assert problem.doc_id == "7" and problem.field == "annotations" and outlier in problem.reason


def test_convabuse_severity_values_still_make_the_five_class_scale(tmp_path):
    items = {str(i): lewidi_item(i, [-3, -2, -1, 0, 1][i % 5:] + [1]) for i in range(10)}
    head = schema_of(items).heads[0]
    assert head.ordinal and list(head.classes.values()) == ["-3", "-2", "-1", "0", "1"]


def test_the_scale_is_the_run_around_the_most_frequent_value_and_bounded():
    assert seen_run({0: 50, 1: 40, -2: 1, 100000: 1}) == (0, 1)
    assert seen_run({-1: 3, 0: 5, 1: 9, 3: 2}) == (-1, 1)
    with pytest.raises(ValueError, match="--schema"):
        seen_run({v: 1 for v in range(10**6)})  # stops at the bound, does not walk the million


def test_a_lewidi_file_whose_ratings_run_past_the_bound_is_one_error(tmp_path):
    items = {str(i): lewidi_item(i, [i, i + 1]) for i in range(MAX_INFERRED_CLASSES + 5)}
    path = write(items, tmp_path / "wide.json")
    with pytest.raises(InputFileError, match="more than 50 consecutive values"):
        read_lewidi(path)
    assert main(["data", "validate", str(path)]) == 2


def long_rows(n_items: int = 80, n_workers: int = 5) -> list[dict]:
    return [{"item": f"i{i}", "worker": f"w{j}", "label": (i + j) % 2, "text": f"text {i}"}
            for i in range(n_items) for j in range(n_workers)]


@pytest.mark.parametrize("outlier", ["-2", "100000", "1e9"])
def test_one_outlying_long_label_sets_aside_its_row_and_no_other(outlier, tmp_path):
    rows = long_rows()
    rows[3]["label"] = outlier
    path = tmp_path / "long.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    corpus = read_long(path)
    assert corpus.schema.heads[0].n_classes == 2
    assert corpus.n_read == 400 and corpus.n_kept == 399 and [p.row for p in corpus.problems] == [4]
    assert corpus.problems[0].field == "label"


# ------------------------------------------------------------------ item 4: repeated item ids


def test_a_repeated_lewidi_item_id_is_set_aside_and_counted(tmp_path, capsys):
    items = eighty_items()
    text = json.dumps(items)
    repeat = dict(items["5"], text="a different text for the same id")
    path = tmp_path / "dup.json"
    path.write_text(text[:-1] + ', "3": ' + json.dumps(repeat) + "}", encoding="utf-8")
    corpus = read_lewidi(path)
    assert corpus.n_read == 81 and corpus.n_kept == 80 and len(corpus.problems) == 1
    problem = corpus.problems[0]
    assert (problem.doc_id, problem.field, problem.row) == ("3", "item id", 81)
    assert "repeats the id of item 4" in problem.reason
    kept = corpus.utterances.set_index("sent_id").loc["3", "text"]
    assert kept == "sentence number 3"  # the first is kept, not the last
    assert main(["data", "validate", str(path)]) == 0
    assert "read 81 = kept 80 + set aside 1" in capsys.readouterr().out


def test_later_items_keep_their_file_position_after_a_repeated_id(tmp_path):
    items = {"a": lewidi_item(0, [0, 1, 1]), "b": lewidi_item(1, [0, 0, 1])}
    path = tmp_path / "d.json"
    bad = dict(items["b"], annotations="0,1")  # a second fault, after the repeat
    path.write_text('{"a": %s, "a": %s, "b": %s, "c": %s}' % (json.dumps(items["a"]), json.dumps(items["a"]),
                                                             json.dumps(items["b"]), json.dumps(bad)))
    corpus = read_lewidi(path)
    assert [(p.doc_id, p.row) for p in corpus.problems] == [("a", 2), ("c", 4)]
    assert corpus.n_read == 4 == corpus.n_kept + len(corpus.problems)


# ------------------------------------------------------------------ item 3: many ratings


def test_vote_slots_of_an_item_with_many_ratings_hold_every_rating_in_order():
    n = 3000
    schema = Schema(name="s", heads=(Head("h", {0: "a", 1: "b"}),))
    utterances = pd.DataFrame({"sent_id": ["x", "y"], "doc_id": ["x", "y"]})
    labels = [j % 2 for j in range(n)] + [1, 0]
    ann = make_annotations(["x"] * n + ["y", "y"], [f"A{j}" for j in range(n)] + ["B0", "B1"], ["h"] * (n + 2), labels)
    out = vote_slots(utterances, ann, schema)
    assert out.shape[1] == 2 + 2 * n
    assert out[f"labeler{n}_h"].tolist() == [(n - 1) % 2, pd.NA]
    assert out["labeler2_h"].tolist() == [1, 0] and out["annotator2_h"].tolist() == ["A1", "B1"]
    assert out[f"annotator{n}_h"].tolist() == [f"A{n - 1}", ""]


# ------------------------------------------------------------------ item 5: damaged CSV rows


def test_a_long_row_with_three_of_four_fields_is_set_aside(tmp_path):
    path = tmp_path / "short.csv"
    path.write_text("item,worker,label,text\ni1,w1,1,hello\ni1,w2,0,hello\ni2,w1,1\ni2,w2,0,bye\n", encoding="utf-8")
    corpus = read_long(path)
    assert corpus.n_read == 4 and corpus.n_kept == 3
    assert [(p.row, p.field) for p in corpus.problems] == [(3, "row")]
    assert "3 field(s) but the header has 4" in corpus.problems[0].reason


def test_an_undecodable_csv_row_is_set_aside_with_its_row_and_the_rest_kept(tmp_path, capsys):
    path = tmp_path / "bad.csv"
    path.write_bytes(b"doc_id,text,labeler1_strange\nd1,hello,1\nd1,caf\xe9 x,0\nd2,fine,1\nd2,\xff\xfe,0\nd3,ok,1\n")
    corpus = load_corpus(path)
    assert corpus.n_read == 5 and corpus.n_kept == 3
    assert [(p.row, p.field) for p in corpus.problems] == [(2, "text"), (4, "text")]
    assert all("undecodable bytes" in p.reason for p in corpus.problems)
    assert corpus.utterances["text"].tolist() == ["hello", "fine", "ok"]
    long = tmp_path / "long.csv"
    long.write_bytes(b"item,worker,label\ni1,w1,1\ni1,w2,\xe90\ni2,w1,1\ni2,w2,0\n")
    corpus = read_long(long)
    assert corpus.n_kept == 3 and [p.row for p in corpus.problems] == [2]


def test_a_file_that_is_mostly_not_utf8_is_still_refused(tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes("doc_id,text\n".encode() + "".join(f"d{i},café crème {i}\n" for i in range(10)).encode("latin-1"))
    with pytest.raises(InputFileError, match="undecodable bytes"):
        load_corpus(path)
    header = tmp_path / "header.csv"
    header.write_bytes(b"doc_id,t\xe9xt\nd1,a\nd2,b\nd3,c\n")
    with pytest.raises(InputFileError):
        load_corpus(header)


def test_a_long_table_of_only_outlying_labels_keeps_the_class_count_bounded(tmp_path):
    path = tmp_path / "only.csv"
    path.write_text("item,worker,label\ni1,w1,1e9\ni2,w1,100000\ni2,w2,100000\n", encoding="utf-8")
    corpus = read_long(path)
    assert corpus.schema.heads[0].n_classes == 2
    assert corpus.n_read == 3 and corpus.n_kept == 0 and [p.row for p in corpus.problems] == [1, 2, 3]
