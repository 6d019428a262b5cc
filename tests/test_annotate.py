"""annotate: chunks of whole conversations, exact resumption, rejects and the reconciliation.

The model is the session's tiny model, loaded from its saved folder (no MLflow needed); the
corpora are written here (Chinese-looking PersonalDialog records, Korean-looking tables).
"""

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from psyattrs import Predictor
from psyattrs.cli import main
from psyattrs.errors import InputFileError
from psyattrs.serving import annotate as annotate_module
from psyattrs.serving.annotate import MANIFEST, REJECTS, annotate, read_annotations, read_manifest
from psyattrs.serving.sources import PersonalDialogSource, TableSource

WORDS = ["今天", "好", "冷", "啊", "吃饭", "了", "么", "是", "的", "周末", "去", "哪里", "玩"]


def _records(n: int) -> list[dict]:
    """n valid records with 2-4 utterances each, some with a golden response."""
    out = []
    for i in range(n):
        k = 2 + i % 3
        record = {
            "dialog": [" ".join(WORDS[(i + j + m) % len(WORDS)] for m in range(3)) for j in range(k)],
            "profile": [{"tag": ["旅游"], "loc": "上海 浦东", "gender": "female"},
                        {"tag": ["音乐"], "loc": "北京 朝阳", "gender": "male"}],
            "uid": [j % 2 for j in range(k)],
        }
        if i % 4 == 3:
            record["golden_response"] = "好 的"
            record["responder_profile"] = record["profile"][0]
        out.append(record)
    return out


def _write_pd(path: Path, records: list, *, bad: dict[int, str] | None = None) -> Path:
    """JSON lines; `bad` inserts raw lines before the record of that index."""
    lines = []
    for i, record in enumerate(records):
        if bad and i in bad:
            lines.append(bad[i])
        lines.append(json.dumps(record, ensure_ascii=False))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


BAD_LINES = {
    3: "{broken json",                                              # 1 unreadable line
    7: json.dumps({"dialog": ["好 的", "", "嗯"], "uid": [0, 1, 0]}),  # 3 utterances rejected
    9: "",                                                           # blank: not an item
}


@pytest.fixture
def corpus(tmp_path) -> Path:
    return _write_pd(tmp_path / "pd.jsonl", _records(30), bad=BAD_LINES)


@pytest.fixture(scope="module")
def model_folder(tiny_model) -> str:
    return str(tiny_model.folder)


def _run(corpus, model_folder, out, **kwargs):
    return annotate(corpus, model_folder, out, chunk_size=kwargs.pop("chunk_size", 12), progress=False, **kwargs)


def test_personaldialog_every_item_is_written_or_rejected(corpus, model_folder, tmp_path):
    out = tmp_path / "out.parquet"
    result = _run(corpus, model_folder, out)
    n_utterances = sum(len(r["dialog"]) + ("golden_response" in r) for r in _records(30))
    assert result.finished and result.balanced
    assert (result.n_read, result.n_written, result.n_rejected) == (n_utterances + 4, n_utterances, 4)
    assert (result.n_records, result.n_records_rejected) == (32, 2)
    written = read_annotations(out)
    assert len(written) == n_utterances and written["sent_id"].is_unique
    rejects = [json.loads(line) for line in (out / REJECTS).read_text(encoding="utf-8").splitlines()]
    assert [(r["line"], r["sent_id"], r["field"]) for r in rejects] == [
        (4, None, "record"), (9, "pd9_1", "dialog"), (9, "pd9_2", "dialog"), (9, "pd9_3", "dialog")]
    assert "not valid JSON" in rejects[0]["reason"] and "empty text at dialog[1]" in rejects[1]["reason"]
    text = result.reconciliation()
    assert f"read {n_utterances + 4:,} = written {n_utterances:,} + rejected 4" in text
    assert "records read 32 = annotated 30 + rejected 2" in text


def test_chunks_hold_whole_conversations_and_match_predict(corpus, model_folder, tmp_path):
    out = tmp_path / "out.parquet"
    _run(corpus, model_folder, out, chunk_size=10)
    manifest = read_manifest(out)
    parts = [pd.read_parquet(out / f"part-{i:06d}.parquet") for i in range(manifest["chunks"])]
    longest = max(len(r["dialog"]) + 1 for r in _records(30))
    assert len(parts) > 3 and all(len(p) < 10 + longest for p in parts)  # bounded chunks
    assert sum(len(p) for p in parts[:-1]) >= 10 * (len(parts) - 1) - 4  # full, but for the 4 rejected items
    docs = [set(p["doc_id"]) for p in parts]
    assert all(not (a & b) for i, a in enumerate(docs) for b in docs[i + 1:])  # no conversation split
    whole = pd.concat(parts, ignore_index=True)
    records = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines()[:3]]
    expected = Predictor(model_folder).predict(records)  # lines 1-3 = pd1..pd3
    first = whole[whole["doc_id"].isin(["pd1", "pd2", "pd3"])].reset_index(drop=True)
    pd.testing.assert_frame_equal(first.drop(columns="is_golden"), expected)
    assert whole.loc[whole["is_golden"], "text"].eq("好 的").all() and whole["is_golden"].sum() == 7


def test_stopped_run_resumes_to_the_uninterrupted_output(corpus, model_folder, tmp_path):
    full = tmp_path / "full.parquet"
    _run(corpus, model_folder, full)
    part = tmp_path / "part.parquet"
    first = _run(corpus, model_folder, part, max_chunks=2)
    assert not first.finished and first.n_chunks == 2 and "stopped early" in first.reconciliation()
    second = _run(corpus, model_folder, part)
    assert second.finished and second.n_chunks_resumed == 2 and second.balanced
    pd.testing.assert_frame_equal(read_annotations(part), read_annotations(full))
    assert (part / REJECTS).read_bytes() == (full / REJECTS).read_bytes()
    assert (second.n_read, second.n_written, second.n_rejected) == (read_manifest(full)["counts"]["read"],
                                                                   len(read_annotations(full)), 4)


def test_crash_between_part_and_manifest_is_cleaned_up(corpus, model_folder, tmp_path, monkeypatch):
    full = tmp_path / "full.parquet"
    _run(corpus, model_folder, full)
    out = tmp_path / "crash.parquet"
    real = annotate_module._append_rejects
    calls = {"n": 0}

    def crash_on_third(path, rejects):
        calls["n"] += 1
        if calls["n"] == 3:  # the third chunk's part is written, its rejects half-written
            with path.open("ab") as fh:
                fh.write(b'{"half": ')
            raise OSError("disk went away")
        return real(path, rejects)

    monkeypatch.setattr(annotate_module, "_append_rejects", crash_on_third)
    with pytest.raises(OSError, match="disk went away"):
        _run(corpus, model_folder, out)
    assert read_manifest(out)["chunks"] == 2 and (out / "part-000002.parquet").exists()
    monkeypatch.setattr(annotate_module, "_append_rejects", real)
    resumed = _run(corpus, model_folder, out)
    assert resumed.finished and resumed.n_chunks_resumed == 2
    pd.testing.assert_frame_equal(read_annotations(out), read_annotations(full))
    assert (out / REJECTS).read_bytes() == (full / REJECTS).read_bytes()


def test_ctrl_c_during_prediction_resumes_exactly(corpus, model_folder, tmp_path, monkeypatch):
    full = tmp_path / "full.parquet"
    _run(corpus, model_folder, full)
    out = tmp_path / "ctrlc.parquet"
    real = Predictor.predict_table
    calls = {"n": 0}

    def interrupt_second(self, table):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(self, table)

    monkeypatch.setattr(Predictor, "predict_table", interrupt_second)
    with pytest.raises(KeyboardInterrupt):
        _run(corpus, model_folder, out)
    monkeypatch.setattr(Predictor, "predict_table", real)
    assert read_manifest(out)["chunks"] == 1
    _run(corpus, model_folder, out)
    pd.testing.assert_frame_equal(read_annotations(out), read_annotations(full))


def test_a_finished_run_is_not_redone_and_restart_redoes_it(corpus, model_folder, tmp_path):
    out = tmp_path / "out.parquet"
    _run(corpus, model_folder, out)
    stamp = (out / "part-000000.parquet").stat().st_mtime_ns
    again = _run(corpus, model_folder, out)
    assert again.finished and again.n_chunks_resumed == again.n_chunks
    assert (out / "part-000000.parquet").stat().st_mtime_ns == stamp
    redone = _run(corpus, model_folder, out, restart=True)
    assert redone.n_chunks_resumed == 0 and redone.balanced


def test_a_model_that_fails_to_load_leaves_the_earlier_run_alone(corpus, model_folder, tmp_path):
    out = tmp_path / "out.parquet"
    _run(corpus, model_folder, out)
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(InputFileError, match="model folder not found"):
        _run(corpus, str(tmp_path / "no-model"), out, restart=True)
    assert sorted(p.name for p in out.iterdir()) == before and read_manifest(out)["finished"]


def test_resume_refuses_a_changed_input_chunk_size_or_model(corpus, model_folder, tmp_path, tiny_model):
    out = tmp_path / "out.parquet"
    _run(corpus, model_folder, out, max_chunks=1)
    with pytest.raises(ValueError, match="chunk size 12, not 7"):
        _run(corpus, model_folder, out, chunk_size=7)
    with pytest.raises(ValueError, match="was written with model"):
        _run(corpus, f"runs:/{tiny_model.run_id}/model", out)
    with corpus.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(_records(1)[0]) + "\n")
    with pytest.raises(ValueError, match="size, mtime_ns"):
        _run(corpus, model_folder, out)


def test_output_folder_problems_are_named(corpus, model_folder, tmp_path):
    file = tmp_path / "out.parquet"
    file.write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        _run(corpus, model_folder, file)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"did not write \(\['notes.txt'\]\)"):
        _run(corpus, model_folder, other, restart=True)
    assert (other / "notes.txt").read_text() == "mine"
    with pytest.raises(ValueError, match="chunk_size must be a positive integer"):
        _run(corpus, model_folder, tmp_path / "x.parquet", chunk_size=0)


def test_alias_is_pinned_to_its_version(corpus, tiny_model, tmp_path):
    out = tmp_path / "out.parquet"
    result = annotate(corpus, tiny_model.registered, out, chunk_size=50, progress=False, max_chunks=1,
                      tracking_uri=tiny_model.tracking_uri)
    assert re.fullmatch(r"models:/psyattrs-tiny/\d+", result.model)
    manifest = read_manifest(out)
    assert manifest["model"] == result.model and manifest["model_given"] == tiny_model.registered


# ---------------------------------------------------------------------------------- tables


def _table() -> pd.DataFrame:
    rows = []
    for d in range(6):
        for k in range(2 + d % 3):
            rows.append({"doc_id": f"c{d}", "person_type": ["user", "persona"][k % 2],
                         "text": ["안녕하세요~", "반가워요 ㅎㅎ", "뭐 해요?", "산책했_다 ♡"][(d + k) % 4],
                         "is_pause": 0})
    return pd.DataFrame(rows)


def test_table_rejects_rows_with_reasons(model_folder, tmp_path):
    table = _table().astype({"is_pause": object})
    table.loc[2, "text"] = "  "                   # empty text, not a pause
    table.loc[3, "is_pause"] = "maybe"            # bad flag
    table.loc[4, "doc_id"] = ""                   # no conversation
    extra = pd.DataFrame([{"doc_id": "c0", "person_type": "user", "text": "또 왔어요", "is_pause": 0}])
    table = pd.concat([table, extra], ignore_index=True)  # c0 again after other conversations
    path = tmp_path / "table.csv"
    table.to_csv(path, index=False)
    result = annotate(path, model_folder, tmp_path / "out.parquet", chunk_size=5, progress=False)
    assert result.source == "table" and result.balanced
    assert (result.n_read, result.n_written, result.n_rejected) == (len(table), len(table) - 4, 4)
    rejects = [json.loads(line) for line in result.rejects.read_text(encoding="utf-8").splitlines()]
    assert [(r["row"], r["field"]) for r in rejects] == [(3, "text"), (4, "is_pause"), (5, "doc_id"), (len(table), "doc_id")]
    assert "not contiguous" in rejects[-1]["reason"]


def test_table_rows_cut_short_are_rejected_as_such_across_read_batches(model_folder, tmp_path):
    table = _table()
    path = tmp_path / "table.csv"
    table.to_csv(path, index=False)
    columns = list(table.columns)
    lines = path.read_text(encoding="utf-8").splitlines()
    text_at = columns.index("text")
    lines[2] = ",".join(lines[2].split(",")[:text_at])  # data row 2 ends before its text
    lines[6] = ",".join(lines[6].split(",")[:len(columns) - 1])  # data row 6 lacks its last field
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = annotate(path, model_folder, tmp_path / "out.parquet", chunk_size=3, progress=False)
    assert result.balanced and (result.n_read, result.n_rejected) == (len(table), 2)
    rejects = [json.loads(line) for line in result.rejects.read_text(encoding="utf-8").splitlines()]
    assert [(r["row"], r["field"]) for r in rejects] == [(2, "row"), (6, "row")]
    assert rejects[0]["reason"] == (f"this row has {text_at} field(s) but the header has {len(columns)} "
                                    f"(cut short before column 'text')")
    assert "empty text" not in rejects[0]["reason"]
    # read in batches of two rows, the field counts stay with their rows
    chunks = list(TableSource(path, 3, batch_rows=2).chunks())
    assert [(r["row"], r["field"]) for c in chunks for r in c.rejects] == [(2, "row"), (6, "row")]


def test_table_chunks_carry_conversations_across_read_batches(tmp_path):
    table = _table()
    path = tmp_path / "table.csv"
    table.to_csv(path, index=False)
    source = TableSource(path, 4, batch_rows=3)
    chunks = list(source.chunks())
    assert sum(len(c.table) for c in chunks) == len(table)
    docs = [set(c.table["doc_id"]) for c in chunks]
    assert all(not (a & b) for i, a in enumerate(docs) for b in docs[i + 1:])
    assert all(len(c.table) >= 4 for c in chunks[:-1])
    resumed = list(TableSource(path, 4, batch_rows=3).chunks(chunks[1].position))
    assert [list(c.table["doc_id"]) for c in resumed] == [list(c.table["doc_id"]) for c in chunks[2:]]
    positions = pd.concat([c.table for c in chunks])["position"].tolist()
    assert positions == table.groupby("doc_id", sort=False).cumcount().tolist()


def test_parquet_table_matches_predict(model_folder, tmp_path):
    table = _table()
    path = tmp_path / "table.parquet"
    table.to_parquet(path, index=False)
    out = tmp_path / "out.parquet"
    annotate(path, model_folder, out, chunk_size=4, progress=False)
    expected = Predictor(model_folder).predict(table)
    pd.testing.assert_frame_equal(read_annotations(out), expected)


def test_personaldialog_source_resumes_from_a_byte_position(corpus):
    chunks = list(PersonalDialogSource(corpus, 12).chunks())
    later = list(PersonalDialogSource(corpus, 12).chunks(chunks[2].position))
    assert [c.table["sent_id"].tolist() for c in later] == [c.table["sent_id"].tolist() for c in chunks[3:]]
    assert all(c.n_read == len(c.table) + len(c.rejects) for c in chunks)


def test_public_release_and_missing_columns_are_refused(tmp_path, public_csv, model_folder):
    with pytest.raises(InputFileError, match="public-release"):
        annotate(public_csv, model_folder, tmp_path / "a.parquet", progress=False)
    path = tmp_path / "t.csv"
    pd.DataFrame({"doc_id": ["c1"], "sentence": ["안녕"]}).to_csv(path, index=False)
    with pytest.raises(InputFileError, match=r"needs columns \['text'\]"):
        annotate(path, model_folder, tmp_path / "b.parquet", progress=False, format="table")


# ------------------------------------------------------------------------------------- CLI


def test_cli_annotate_prints_progress_and_reconciliation(corpus, model_folder, tmp_path, capsys):
    out = tmp_path / "cli.parquet"
    args = ["annotate", str(corpus), "--model", model_folder, "--out", str(out), "--chunk-size", "12"]
    assert main(args + ["--max-chunks", "1"]) == 0
    first = capsys.readouterr()
    assert "stopped early" in first.out and "annotate" in first.err and "utt/s" in first.err
    assert main(args) == 0
    captured = capsys.readouterr()
    assert re.search(r"read [\d,]+ = written [\d,]+ \+ rejected 4", captured.out)
    assert "(1 from an earlier run), complete" in captured.out and "100%" in captured.err
    assert main(args[:-2] + ["--chunk-size", "5"]) == 2
    assert "chunk size 12, not 5" in capsys.readouterr().err


def test_cli_annotate_missing_input_exits_2(model_folder, tmp_path, capsys):
    assert main(["annotate", str(tmp_path / "none.jsonl"), "--model", model_folder, "--out", str(tmp_path / "o")]) == 2
    assert "file not found" in capsys.readouterr().err
    assert not (tmp_path / "o" / MANIFEST).exists()


def test_csv_chunk_progress_is_the_bytes_up_to_its_last_row(tmp_path):
    """Issue 25: pandas reads a small CSV whole, so every chunk said it had reached 100% of the input."""
    table = _table()
    path = tmp_path / "table.csv"
    table.to_csv(path, index=False, encoding="utf-8-sig")
    raw = path.read_bytes()
    chunks = list(TableSource(path, 4).chunks())
    assert len(chunks) >= 3
    ends = [c.progress for c in chunks]
    assert ends == sorted(ends) and ends[-1] == len(raw) and ends[0] < len(raw)
    for chunk in chunks:  # each progress is the end of the line holding the chunk's last row
        assert raw[chunk.progress - 1:chunk.progress] == b"\n"
        last_row = chunk.position["rows"]
        assert raw[:chunk.progress].count(b"\n") == last_row + 1  # the header and the rows so far


def test_cli_annotate_max_chunks_on_a_csv_tells_the_truth(model_folder, tmp_path, capsys):
    table = _table()
    path = tmp_path / "table.csv"
    table.to_csv(path, index=False)
    args = ["annotate", str(path), "--model", model_folder, "--chunk-size", "4"]
    assert main(args + ["--out", str(tmp_path / "a.parquet"), "--max-chunks", "1"]) == 0
    captured = capsys.readouterr()
    assert "stopped early" in captured.out and "100% of the input" not in captured.err
    share = int(re.search(r"chunk 1 done \((\d+)% of the input\)", captured.err).group(1))
    assert 0 < share < 100
    # the one chunk of a small input was all of it: complete, not "stopped early"
    assert main(args[:-1] + ["1000", "--out", str(tmp_path / "b.parquet"), "--max-chunks", "1"]) == 0
    captured = capsys.readouterr()
    assert "complete" in captured.out and "stopped early" not in captured.out
