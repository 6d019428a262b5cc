"""`psyattrs labels resolve` and `psyattrs data stats`: outputs, messages and exit codes."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from psyattrs.cli import main
from psyattrs.labels.resolve import resolve_final_labels
from psyattrs.labels.agreement import corpus_agreement
from psyattrs.schema import OPELA

HEADS = OPELA.head_names
TEXTS = ["안녕하세요  반가워요 ", "오늘 뭐 했어?", "피곤하_다 ㅠㅠ", "ㅋㅋㅋ 진짜?", "나도 그래♡", " 음... 글쎄"]


def annotated_rows(n_docs: int = 3, per_doc: int = 14, seed: int = 4) -> tuple[list[str], list[list[str]]]:
    """An OPELA annotated table as text cells: noisy labelers, all-different items, pauses, quirks."""
    rng = np.random.default_rng(seed)
    header = ["doc_id", "sent_id", "person_type", "person_name", "person_name_original", "turn_notation", "time",
              "is_pause", "text"] + [f"labeler{k}_{h}" for k in (1, 2, 3) for h in HEADS] + ["person_id"] + [
              f"labeler_{h}" for h in HEADS] + ["memo"]  # fmt: skip
    rows = []
    for d in range(n_docs):
        doc = f"donut_user{d:04d}_7_{per_doc}_a_b_c"
        for i in range(per_doc):
            pause = i == 5
            who = "persona" if i % 2 == 0 else "user"
            labels = []
            for _ in (1, 2, 3):
                for h in OPELA:
                    labels.append("0" if pause else str(int(rng.integers(h.n_classes))))
            row = [doc, f"{doc}_{i + 1}", who, "donut" if who == "persona" else f"user{d:04d}", "Little Donut",
                   str(i // 2 + 1), f"2022-05-0{d + 1} 1{i % 10}:00", "1" if pause else "0",
                   "1시간 후" if pause else TEXTS[i % len(TEXTS)]] + labels + [f"p{d}"] + [""] * len(HEADS) + [
                   "메모, 쉼표" if i == 0 else ""]  # fmt: skip
            rows.append(row)
    return header, rows


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def read_cells(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(encoding="utf-8", newline="") as fh:
        header, *rows = list(csv.reader(fh))
    return header, rows


def frame(header: list[str], rows: list[list[str]]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=header)
    for col in header:
        if col.startswith("labeler"):
            df[col] = pd.to_numeric(df[col].replace("", None)).astype("Int64")
    df["is_pause"] = df["is_pause"] == "1"
    return df


@pytest.fixture
def annotated(tmp_path: Path) -> Path:
    return write_csv(tmp_path / "annotated.csv", *annotated_rows())


def test_resolve_writes_the_same_table_with_final_labels(annotated, tmp_path, capsys):
    out = tmp_path / "out" / "resolved.csv"
    assert main(["labels", "resolve", str(annotated), "--out", str(out), "--method", "opela", "--seed", "3"]) == 0
    assert "wrote" in capsys.readouterr().out
    header, rows = read_cells(annotated)
    got_header, got_rows = read_cells(out)
    assert got_header == header and len(got_rows) == len(rows)
    finals = [header.index(f"labeler_{h}") for h in HEADS]
    for before, after in zip(rows, got_rows):  # every other cell as it was, spaces included
        assert [c for i, c in enumerate(after) if i not in finals] == [c for i, c in enumerate(before) if i not in finals]
    expected = resolve_final_labels(frame(header, rows), OPELA, method="opela", seed=3)
    for h, i in zip(HEADS, finals):
        assert [r[i] for r in got_rows] == [str(v) for v in expected[f"labeler_{h}"]]
    assert got_rows[0][header.index("text")] == "안녕하세요  반가워요 "
    assert got_rows[0][header.index("memo")] == "메모, 쉼표"
    # binary heads are the majority of the three labelers, written as integers
    for row in got_rows:
        for h in ("strange", "active"):
            votes = [int(row[header.index(f"labeler{k}_{h}")]) for k in (1, 2, 3)]
            assert row[header.index(f"labeler_{h}")] == str(int(sum(votes) >= 2))


def test_resolve_to_parquet_and_methods_differ(annotated, tmp_path):
    outs = {}
    for method in ("majority", "dawid-skene", "opela-weighted"):
        out = tmp_path / f"{method}.parquet"
        assert main(["labels", "resolve", str(annotated), "--out", str(out), "--method", method]) == 0
        outs[method] = pd.read_parquet(out)
    table = outs["majority"]
    assert table.columns.tolist() == read_cells(annotated)[0]
    assert str(table["labeler_self"].dtype) == "Int64" and table["labeler_self"].notna().all()
    assert table["text"].iloc[0] == "안녕하세요  반가워요 "
    header, rows = annotated_rows()
    expected = resolve_final_labels(frame(header, rows), OPELA, method="dawid-skene")
    assert outs["dawid-skene"]["labeler_empathy"].tolist() == expected["labeler_empathy"].tolist()


def test_check_shows_which_reading_reproduces_the_file(tmp_path, capsys):
    header, rows = annotated_rows()
    finals = resolve_final_labels(frame(header, rows), OPELA, method="opela-weighted")
    for h in HEADS:
        i = header.index(f"labeler_{h}")
        for row, v in zip(rows, finals[f"labeler_{h}"]):
            row[i] = str(v)
    path = write_csv(tmp_path / "released.csv", header, rows)
    assert main(["labels", "resolve", str(path), "--check"]) == 0
    text = capsys.readouterr().out
    for word in ("opela", "opela-weighted", "majority", "dawid-skene", "self", "empathy", "all-different"):
        assert word in text
    all_items, all_different = text.split("all-different")[:2]
    cells = row_cells(all_items, "self")
    assert cells[:2] == ["self", "42"]
    assert cells[3] == "100.00%"  # opela-weighted reproduces the file
    assert cells[2] != "100.00%"  # the literal reading differs on all-different items
    different = row_cells(all_different, "self")
    assert different[3] == "100.00%" and float(different[2].rstrip("%")) < 100
    assert int(different[1]) == int((frame(header, rows)[[f"labeler{k}_self" for k in (1, 2, 3)]].nunique(axis=1) == 3).sum())
    assert [p.name for p in tmp_path.iterdir()] == ["released.csv"]  # --check alone writes nothing


def row_cells(text: str, head: str) -> list[str]:
    """The cells of a head's row in a rich table printed as text."""
    line = next(line for line in text.splitlines() if line.strip("│┃ ").startswith(head + " "))
    return [c.strip() for c in re.split("[│┃]", line) if c.strip()]


def test_set_aside_rows_are_left_out_with_a_note(tmp_path, capsys):
    header, rows = annotated_rows()
    rows[4][header.index("labeler2_empathy")] = "9"
    path = write_csv(tmp_path / "bad_cell.csv", header, rows)
    out = tmp_path / "resolved.csv"
    assert main(["labels", "resolve", str(path), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "1 row(s)" in err and "set aside" in err and "data validate" in err
    _, got = read_cells(out)
    assert len(got) == len(rows) - 1
    assert [r[1] for r in got] == [r[1] for i, r in enumerate(rows) if i != 4]


def test_generic_table_with_custom_schema_and_any_number_of_labelers(tmp_path, capsys):
    schema = tmp_path / "schema.yaml"
    schema.write_text("name: abuse-corpus\nheads:\n  - name: abuse\n    classes: {0: no, 1: yes}\n", encoding="utf-8")
    table = tmp_path / "generic.csv"
    table.write_text(
        "doc_id,text,labeler1_abuse,labeler2_abuse,labeler5_abuse,extra\n"
        "c1,첫 문장,1,1,,007\n"
        "c1,둘째,0,,0,\n"
        "c1,맥락만,,,,x\n"
        "c2,셋째,1,0,1,3.50\n",
        encoding="utf-8",
    )
    out = tmp_path / "out.csv"
    assert main(["labels", "resolve", str(table), "--out", str(out), "--schema", str(schema)]) == 0
    assert out.read_text(encoding="utf-8").splitlines() == [
        "doc_id,text,labeler1_abuse,labeler2_abuse,labeler5_abuse,extra,labeler_abuse",
        "c1,첫 문장,1,1,,007,1",
        "c1,둘째,0,,0,,0",
        "c1,맥락만,,,,x,",
        "c2,셋째,1,0,1,3.50,1",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--check", "--out", "{tmp}/x.txt"], r"must end in one of \['.csv', '.parquet', '.pq'\]"),
        ([], "nothing to do: give --out OUT"),
        (["--out", "{tmp}/x.csv", "--method", "vote"], "invalid choice: 'vote'"),
    ],
)
def test_resolve_usage_errors_exit_2(annotated, tmp_path, capsys, args, message):
    argv = ["labels", "resolve", str(annotated)] + [a.replace("{tmp}", str(tmp_path)) for a in args]
    if "vote" in args:
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
    else:
        assert main(argv) == 2
    err = capsys.readouterr().err
    assert re.search(message, err), err
    assert "Traceback" not in err


def test_resolve_bad_inputs_exit_2_with_one_message(tmp_path, capsys):
    missing = tmp_path / "nope.csv"
    assert main(["labels", "resolve", str(missing), "--out", str(tmp_path / "o.csv")]) == 2
    assert "nope.csv" in capsys.readouterr().err
    finals_only = tmp_path / "finals_only.csv"
    finals_only.write_text("doc_id,text,labeler_strange\nd,안녕,1\n", encoding="utf-8")
    assert main(["labels", "resolve", str(finals_only), "--out", str(tmp_path / "o.csv")]) == 2
    err = capsys.readouterr().err
    assert "no labeler{k}_{head} columns" in err and err.count("\n") == 1
    no_finals = tmp_path / "no_finals.csv"
    write_csv(no_finals, ["doc_id", "text", "labeler1_strange"], [["d", "가", "1"]])
    assert main(["labels", "resolve", str(no_finals), "--check"]) == 2
    assert "no final-label column" in capsys.readouterr().err


def test_data_stats_prints_tables_and_writes_json(annotated, tmp_path, capsys):
    out = tmp_path / "stats" / "stats.json"
    assert main(["data", "stats", str(annotated), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    for word in ("strange", "empathy", "alpha", "ordinal", "nominal", "Fleiss", "3 pauses excluded", "L3"):
        assert word in text
    stats = json.loads(out.read_text(encoding="utf-8"))
    header, rows = annotated_rows()
    df = frame(header, rows)
    expected = corpus_agreement(df, OPELA)
    assert stats["heads"] == expected["heads"]
    assert (stats["n_rows"], stats["n_pauses"], stats["format"]) == (42, 3, "annotated")
    assert stats["heads"]["self"]["fleiss_items"] == 39
    assert stats["heads"]["strange"]["class_balance"][0]["count"] == 0  # no final labels in the file


def test_data_stats_on_resolved_output_has_class_balance(annotated, tmp_path, capsys):
    resolved = tmp_path / "resolved.csv"
    assert main(["labels", "resolve", str(annotated), "--out", str(resolved)]) == 0
    out = tmp_path / "stats.json"
    assert main(["data", "stats", str(resolved), "--json", str(out)]) == 0
    stats = json.loads(out.read_text(encoding="utf-8"))
    balance = stats["heads"]["empathy"]["class_balance"]
    assert sum(b["count"] for b in balance) == 39 and abs(sum(b["share"] for b in balance) - 1) < 1e-9
    agreement = stats["heads"]["strange"]["labeler_agreement"]
    assert [a["labeler"] for a in agreement] == [1, 2, 3] and all(a["agreement"] > 0.5 for a in agreement)
    assert "class 4" in capsys.readouterr().out


def test_data_stats_errors_exit_2(tmp_path, capsys):
    assert main(["data", "stats", str(tmp_path / "missing.csv")]) == 2
    err = capsys.readouterr().err
    assert "missing.csv" in err and "Traceback" not in err


def test_data_stats_on_a_public_release_file_uses_the_label_lists(tmp_path, capsys):
    lists = {"strange": "[1, 1, 0]", "uneasy": "[1, 1, 1]", "engage": "[0, 1, 1]", "active": "[0, 0, 1]",
             "self": "[0, 2, 1]", "empathy": "[0, 3, 4]"}  # fmt: skip
    path = tmp_path / "public.csv"
    header = ["doc_id", "total_sent", "pause_count", "persona_text_all", "user_text_all"] + [f"labeler_{h}" for h in HEADS]
    write_csv(path, header, [["donut_user0001_2_3", "3", "1", "\n안녕 반가워", "응 나도!"] + [lists[h] for h in HEADS]])
    out = tmp_path / "stats.json"
    assert main(["data", "stats", str(path), "--json", str(out)]) == 0
    assert "final labels only" in capsys.readouterr().out
    stats = json.loads(out.read_text(encoding="utf-8"))
    assert stats["format"] == "public" and stats["n_items"] == 3
    assert [b["count"] for b in stats["heads"]["empathy"]["class_balance"]] == [1, 0, 0, 1, 1]
    assert stats["heads"]["self"]["krippendorff_alpha"] is None and stats["heads"]["self"]["n_labelers"] == 0


def test_data_stats_without_any_labels_says_so(tmp_path, capsys):
    path = tmp_path / "plain.csv"
    path.write_text("doc_id,text\nd,안녕\nd,반가워\n", encoding="utf-8")
    assert main(["data", "stats", str(path)]) == 0
    text = capsys.readouterr().out
    assert "no labels in this corpus" in text and "Class balance" not in text


def test_data_stats_unwritable_json_exits_2(annotated, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    assert main(["data", "stats", str(annotated), "--json", str(blocker / "stats.json")]) == 2
    assert "cannot write" in capsys.readouterr().err
