"""Disk full and other write failures: every output is complete or absent, the command says so in
one line (path and cause) with exit code 2, and annotate's state stays resumable.

A full disk is simulated in-process: the writer (`DataFrame.to_csv`, `to_parquet`,
`pyarrow.parquet.write_table`) writes the first half of its bytes to the file it was given and
then raises `OSError(ENOSPC)`, as a real full disk does part-way through. `/dev/full` is used where
a command accepts any file name.
"""

from __future__ import annotations

import errno
import io
import json
from pathlib import Path

import pandas as pd
import pytest

from conftest import annotated_frame, write_csv
from psyattrs.cli import main
from psyattrs.data.output import atomic_output, is_temp_name
from psyattrs.errors import OutputFileError

ENOSPC = "No space left on device"


def _half_then_enospc(real):
    """Wraps a DataFrame writer: half of the real output reaches the target, then ENOSPC."""

    def writer(self, target, *args, **kwargs):
        buffer = io.BytesIO()
        if real is pd.DataFrame.to_csv:
            text = real(self, None, *args, **{k: v for k, v in kwargs.items() if k != "encoding"})
            data = text.encode("utf-8")
        else:
            real(self, buffer, *args, **kwargs)
            data = buffer.getvalue()
        Path(target).write_bytes(data[: len(data) // 2])
        raise OSError(errno.ENOSPC, ENOSPC)

    return writer


def _one_line_error(err: str, path: Path) -> None:
    # a one-line warning may precede it (the fixtures are Chinese, the model Korean); the error is one line
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("psyattrs: warning:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert str(path) in lines[0] and ENOSPC in lines[0], lines[0]


def _no_temp_files(folder: Path) -> None:
    assert [p.name for p in folder.iterdir() if p.name.endswith(".tmp")] == []


# ----------------------------------------------------------------------------------------------
# the helper


def test_atomic_output_keeps_the_previous_file_when_the_write_fails(tmp_path):
    dest = tmp_path / "out.csv"
    dest.write_text("old, complete\n", encoding="utf-8")
    with pytest.raises(OutputFileError, match=rf"out.csv: cannot write: {ENOSPC}"):
        with atomic_output(dest) as tmp:
            tmp.write_text("new, half", encoding="utf-8")
            raise OSError(errno.ENOSPC, ENOSPC)
    assert dest.read_text(encoding="utf-8") == "old, complete\n"
    _no_temp_files(tmp_path)


def test_atomic_output_renames_only_when_complete_and_cleans_up_on_any_error(tmp_path):
    dest = tmp_path / "out.txt"
    with pytest.raises(KeyError):
        with atomic_output(dest) as tmp:
            assert tmp.parent == tmp_path and is_temp_name(tmp.name, "out.txt") and not dest.exists()
            tmp.write_text("x", encoding="utf-8")
            raise KeyError("boom")
    assert not dest.exists()
    _no_temp_files(tmp_path)
    with atomic_output(dest) as tmp:
        tmp.write_text("done", encoding="utf-8")
    assert dest.read_text(encoding="utf-8") == "done"
    assert oct(dest.stat().st_mode & 0o777) != oct(0o600)  # a normal new file, not mkstemp's 0600
    _no_temp_files(tmp_path)


def test_atomic_output_to_a_device_writes_in_place_and_reports_enospc():
    with pytest.raises(OutputFileError, match=rf"/dev/full: cannot write: {ENOSPC}"):
        with atomic_output("/dev/full") as target:
            assert str(target) == "/dev/full"
            with open(target, "w", encoding="utf-8") as fh:
                fh.write("x" * 10_000)
                fh.flush()


# ----------------------------------------------------------------------------------------------
# the commands


@pytest.fixture
def annotated(tmp_path) -> Path:
    return write_csv(annotated_frame(), tmp_path / "in.csv")


def test_labels_resolve_disk_full_leaves_no_truncated_output(annotated, tmp_path, monkeypatch, capsys):
    out = tmp_path / "resolved.csv"
    monkeypatch.setattr(pd.DataFrame, "to_csv", _half_then_enospc(pd.DataFrame.to_csv))
    assert main(["labels", "resolve", str(annotated), "--out", str(out)]) == 2
    _one_line_error(capsys.readouterr().err, out)
    assert not out.exists()
    _no_temp_files(tmp_path)


def test_labels_resolve_disk_full_keeps_the_previous_parquet(annotated, tmp_path, monkeypatch, capsys):
    out = tmp_path / "resolved.parquet"
    assert main(["labels", "resolve", str(annotated), "--out", str(out)]) == 0
    before = out.read_bytes()
    capsys.readouterr()
    monkeypatch.setattr(pd.DataFrame, "to_parquet", _half_then_enospc(pd.DataFrame.to_parquet))
    assert main(["labels", "resolve", str(annotated), "--out", str(out), "--method", "majority"]) == 2
    _one_line_error(capsys.readouterr().err, out)
    assert out.read_bytes() == before
    _no_temp_files(tmp_path)


def test_data_synth_disk_full_leaves_no_truncated_corpus(tmp_path, monkeypatch, capsys):
    out = tmp_path / "corpus.csv"
    monkeypatch.setattr(pd.DataFrame, "to_csv", _half_then_enospc(pd.DataFrame.to_csv))
    assert main(["data", "synth", "--out", str(out), "--dialogues", "3"]) == 2
    _one_line_error(capsys.readouterr().err, out)
    assert not out.exists()
    _no_temp_files(tmp_path)


def test_data_align_disk_full_leaves_no_truncated_output(public_csv, tmp_path, monkeypatch, capsys):
    out = tmp_path / "aligned.csv"
    out.write_text("previous,complete\n", encoding="utf-8")
    monkeypatch.setattr(pd.DataFrame, "to_csv", _half_then_enospc(pd.DataFrame.to_csv))
    code = main(["data", "align", str(public_csv), "--out", str(out), "--model-kind", "majority",
                 "--iterations", "0", "--quiet"])
    assert code == 2
    _one_line_error(capsys.readouterr().err, out)
    assert out.read_text(encoding="utf-8") == "previous,complete\n"
    _no_temp_files(tmp_path)


def test_data_validate_report_to_dev_full_is_one_line(tmp_path, capsys):
    frame = annotated_frame()
    frame.loc[1, "labeler1_self"] = 7  # one row set aside, so the report has a line to write
    path = write_csv(frame, tmp_path / "bad.csv")
    assert main(["data", "validate", str(path), "--report", "/dev/full"]) == 2
    _one_line_error(capsys.readouterr().err, Path("/dev/full"))


def test_predict_out_disk_full_leaves_no_truncated_file(tiny_model, annotated, tmp_path, monkeypatch, capsys):
    for suffix, method in ((".csv", "to_csv"), (".parquet", "to_parquet")):
        out = tmp_path / f"pred{suffix}"
        real = getattr(pd.DataFrame, method)
        monkeypatch.setattr(pd.DataFrame, method, _half_then_enospc(real))
        code = main(["predict", "--model", str(tiny_model.folder), "--input", str(annotated), "--out", str(out)])
        monkeypatch.setattr(pd.DataFrame, method, real)
        assert code == 2
        _one_line_error(capsys.readouterr().err, out)
        assert not out.exists()
    _no_temp_files(tmp_path)


def test_predict_out_jsonl_disk_full(tiny_model, annotated, tmp_path, monkeypatch, capsys):
    out = tmp_path / "pred.jsonl"
    from psyattrs.serving import predict as predict_module

    real = predict_module.frame_to_dicts

    def half(frame, schema):
        items = list(real(frame, schema))
        yield from items[: len(items) // 2]
        raise OSError(errno.ENOSPC, ENOSPC)

    monkeypatch.setattr(predict_module, "frame_to_dicts", half)
    assert main(["predict", "--model", str(tiny_model.folder), "--input", str(annotated), "--out", str(out)]) == 2
    _one_line_error(capsys.readouterr().err, out)
    assert not out.exists()
    _no_temp_files(tmp_path)


def _pd_corpus(path: Path, n: int) -> Path:
    records = [{"dialog": ["今天 好 冷", "是 的 啊", "周末 去 哪里"][: 2 + i % 2], "uid": [0, 1, 0][: 2 + i % 2]}
               for i in range(n)]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.mark.parametrize("fail_on", ["part", "manifest", "rejects"])
def test_annotate_disk_full_is_one_line_and_stays_resumable(tiny_model, tmp_path, monkeypatch, capsys, fail_on):
    import pyarrow.parquet as pq

    from psyattrs.serving import annotate as annotate_module

    corpus = _pd_corpus(tmp_path / "pd.jsonl", 30)
    with corpus.open("a", encoding="utf-8") as fh:
        fh.write("{broken json\n")  # one reject, so the rejects file is written too
    _pd_corpus(tmp_path / "more.jsonl", 10)
    corpus.write_text(corpus.read_text(encoding="utf-8") + (tmp_path / "more.jsonl").read_text(encoding="utf-8"),
                      encoding="utf-8")
    reference = tmp_path / "reference.parquet"
    args = ["annotate", str(corpus), "--model", str(tiny_model.folder), "--chunk-size", "20", "--no-progress"]
    assert main(args + ["--out", str(reference)]) == 0
    out = tmp_path / "out.parquet"
    calls = {"n": 0}
    if fail_on == "part":
        real = pq.write_table

        def write_table(table, where, **kwargs):
            calls["n"] += 1
            if calls["n"] == 3:
                Path(where).write_bytes(b"PAR1 half")
                raise OSError(errno.ENOSPC, ENOSPC)
            return real(table, where, **kwargs)

        monkeypatch.setattr(pq, "write_table", write_table)
        failing = out / "part-000002.parquet"
    elif fail_on == "manifest":
        real = annotate_module._write_atomic

        def write_atomic(path, text):
            calls["n"] += 1
            if calls["n"] == 3:  # the manifest after the second chunk
                with annotate_module.atomic_output(path) as tmp:
                    tmp.write_text(text[: len(text) // 2], encoding="utf-8")
                    raise OSError(errno.ENOSPC, ENOSPC)
            return real(path, text)

        monkeypatch.setattr(annotate_module, "_write_atomic", write_atomic)
        failing = out / "_manifest.json"
    else:
        real = annotate_module._append_rejects

        def append(path, rejects):
            if rejects:
                with path.open("ab") as fh:
                    fh.write(b'{"half": ')
                raise annotate_module.OutputFileError(path, ENOSPC)
            return real(path, rejects)

        monkeypatch.setattr(annotate_module, "_append_rejects", append)
        failing = out / "_rejects.jsonl"
    capsys.readouterr()
    assert main(args + ["--out", str(out)]) == 2
    err = capsys.readouterr().err
    _one_line_error(err, failing)
    assert "run the same command again to continue" in err
    monkeypatch.undo()
    assert main(args + ["--out", str(out)]) == 0
    assert "from an earlier run" in capsys.readouterr().out
    pd.testing.assert_frame_equal(pd.read_parquet(out), pd.read_parquet(reference))
    assert (out / "_rejects.jsonl").read_bytes() == (reference / "_rejects.jsonl").read_bytes()
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in reference.iterdir())


# ----------------------------------------------------------------------------------------------
# a full tracking store (issue 26.10): one line naming the store, exit 2 (was five sqlite tracebacks)


def test_a_store_write_failure_is_recognised_through_mlflows_chain():
    import sqlite3

    from mlflow.exceptions import MlflowException

    from psyattrs.experiments.tracking import store_write_failure

    def raised(inner: BaseException) -> BaseException:
        try:
            try:
                raise inner
            except BaseException as exc:
                raise MlflowException(str(exc)) from exc
        except MlflowException as outer:
            return outer

    assert store_write_failure(raised(sqlite3.OperationalError("database or disk is full"))) == "database or disk is full"
    assert store_write_failure(raised(OSError(errno.ENOSPC, ENOSPC))) == ENOSPC
    assert store_write_failure(raised(sqlite3.OperationalError("no such table: runs"))) is None
    assert store_write_failure(ValueError("a bad value")) is None


_FULL_STORE = """
import os, resource, signal, subprocess, sys
size = os.path.getsize(sys.argv[1])
def cannot_grow():  # every file this process writes stops at the database's size, as on a full disk
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
done = subprocess.run([sys.executable, "-m", "psyattrs", *sys.argv[2:]], preexec_fn=cannot_grow)
sys.exit(done.returncode)
"""


@pytest.mark.slow
def test_a_tracking_store_that_cannot_grow_is_one_line_exit_2(tmp_path):
    import os
    import subprocess
    import sys

    import mlflow

    db = tmp_path / "mlflow.db"
    uri = f"sqlite:///{db}"
    mlflow.MlflowClient(tracking_uri=uri).search_experiments()  # the store exists, at its size
    experiments = Path(__file__).resolve().parents[1] / "experiments"
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    done = subprocess.run(
        [sys.executable, "-c", _FULL_STORE, str(db), "train", str(experiments / "majority.yaml"), "--quiet",
         "--set", "data.synthetic.dialogues=8", "--set", f"tracking.uri={uri}"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert lines[0].startswith(f"psyattrs: error: {db}: cannot write: ") and "(the tracking store)" in lines[0]
