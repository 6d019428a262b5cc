"""Damaged saved files (issue 26.8): a checkpoint or a file of a saved model that is truncated,
garbage, empty or missing is one line naming the file and what is wrong, exit 2 at the command
line; never a traceback."""

import shutil
from pathlib import Path

import pytest
import torch

from psyattrs.errors import InputFileError
from psyattrs.models.base import load_model
from psyattrs.models.transformer.training import CHECKPOINT_FILE, load_checkpoint

from _transformer_tiny import SHRINK

REPO = Path(__file__).resolve().parents[1]


def _damage(file: Path, how: str) -> None:
    data = file.read_bytes()
    if how == "truncated":
        file.write_bytes(data[: len(data) // 2])
    elif how == "garbage":
        file.write_bytes(b"not a saved file at all " * 40)
    elif how == "empty":
        file.write_bytes(b"")
    else:
        file.unlink()


@pytest.mark.parametrize("how, message", [
    ("truncated", "damaged or truncated"), ("garbage", "damaged or truncated"), ("empty", "empty"),
])
def test_a_damaged_checkpoint_is_named(tmp_path, how, message):
    file = tmp_path / CHECKPOINT_FILE
    torch.save({"network": {"w": torch.zeros(2000)}, "epoch": 1}, file)
    _damage(file, how)
    with pytest.raises(InputFileError, match=f"{CHECKPOINT_FILE}: {message}") as info:
        load_checkpoint(tmp_path)
    assert "\n" not in str(info.value) and len(str(info.value)) < 400


def test_a_checkpoint_that_is_not_ours_is_named(tmp_path):
    torch.save([1, 2, 3], tmp_path / CHECKPOINT_FILE)
    with pytest.raises(InputFileError, match="not a psyattrs checkpoint"):
        load_checkpoint(tmp_path)
    torch.save({"network": {}}, tmp_path / CHECKPOINT_FILE)
    with pytest.raises(InputFileError, match="not a complete psyattrs checkpoint \\(no fingerprint, optimizer"):
        load_checkpoint(tmp_path)
    (tmp_path / CHECKPOINT_FILE).unlink()
    assert load_checkpoint(tmp_path) is None  # none yet: resume starts from the beginning


@pytest.mark.parametrize("how", ["truncated", "garbage", "empty", "missing"])
def test_a_damaged_file_of_a_saved_model_is_one_line_exit_2(tiny_model, tmp_path, how, capsys):
    from psyattrs.cli import main

    folder = tmp_path / "model"
    shutil.copytree(tiny_model.folder, folder)
    state = folder / "tfidf.joblib"
    _damage(state, how)
    expected = {"truncated": "damaged or truncated", "garbage": "damaged or truncated", "empty": "empty",
                "missing": "a file of the saved model is missing"}[how]
    with pytest.raises(InputFileError, match=expected) as info:
        load_model(folder)
    assert str(state) in str(info.value)
    assert main(["predict", "--model", str(folder), "--text", "안녕하세요"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(state) in err and "Traceback" not in err


@pytest.mark.slow
def test_resume_from_a_damaged_checkpoint_is_one_line_exit_2(tmp_path, capsys):
    from psyattrs.cli import main

    checkpoints = tmp_path / "ckpt"
    checkpoints.mkdir()
    (checkpoints / CHECKPOINT_FILE).write_bytes(b"\x80\x04garbage" * 10)
    overrides = [a for s in [*SHRINK, f"model.params.checkpoint_dir={checkpoints}",
                             f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}"] for a in ("--set", s)]
    code = main(["train", str(REPO / "experiments" / "transformer_tiny.yaml"), "--resume", "--quiet", *overrides])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.startswith("psyattrs: error")]
    assert len(lines) == 1 and f"{CHECKPOINT_FILE}: damaged or truncated" in lines[0] and "Traceback" not in err
