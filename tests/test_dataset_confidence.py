"""`data.min_align_confidence`: fit only on sentences whose order reconstruction is confident.

The table is an annotated file with the `align_confidence` column `psyattrs data align` writes;
the values are made up per row so the test knows which rows pass.
"""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from psyattrs.experiments.config import load_config
from psyattrs.experiments.dataset import build_dataset, keep_confident
from psyattrs.synth import synthesize, write_annotated

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def aligned_file(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("aligned")
    path = write_annotated(synthesize(12, seed=5, rare_boost=5).utterances, folder / "plain.csv")
    table = pd.read_csv(path)
    table["align_confidence"] = np.resize([0.3, 0.95, 0.6, 0.99, 0.8], len(table))
    out = folder / "aligned.csv"
    table.to_csv(out, index=False)
    return out


def _config(path: Path, *sets: str):
    return load_config(REPO / "experiments" / "demo.yaml", [f"data.path={path}", *sets])


def test_fitting_splits_keep_only_confident_sentences_and_the_test_split_keeps_all(aligned_file):
    every = build_dataset(_config(aligned_file))
    confident = build_dataset(_config(aligned_file, "data.min_align_confidence=0.9"))
    assert (every.train["align_confidence"] < 0.9).any()
    assert (confident.train["align_confidence"] >= 0.9).all() and (confident.valid["align_confidence"] >= 0.9).all()
    assert len(confident.train) == int((every.train["align_confidence"] >= 0.9).sum())
    assert len(confident.valid) == int((every.valid["align_confidence"] >= 0.9).sum())
    pd.testing.assert_frame_equal(confident.test, every.test)  # scored on every sentence


def test_cross_validation_folds_fit_on_confident_sentences_and_score_all(aligned_file):
    config = _config(aligned_file, "data.min_align_confidence=0.7", "split.folds=3")
    dataset = build_dataset(config)
    train_rows, test_rows = dataset.folds(config)[0]
    part = dataset.fold(config, train_rows, test_rows)
    assert (part.train["align_confidence"] >= 0.7).all() and (part.valid["align_confidence"] >= 0.7).all()
    assert len(part.test) == len(test_rows) and (part.test["align_confidence"] < 0.7).any()


def test_the_option_needs_a_confidence_and_a_confident_sentence(tmp_path, aligned_file):
    plain = aligned_file.with_name("plain.csv")
    with pytest.raises(ValueError, match="train data has no such column.*public-release file or to what `psyattrs data align`"):
        build_dataset(_config(plain, "data.min_align_confidence=0.5"))
    with pytest.raises(ValueError, match=r"no sentence of the train split is that confident \(the highest align_confidence is 0.990\)"):
        build_dataset(_config(aligned_file, "data.min_align_confidence=0.995"))
    with pytest.raises(ValueError, match=r"data.min_align_confidence: must be in \[0.0, 1.0\], got 1.5"):
        _config(aligned_file, "data.min_align_confidence=1.5")
    table = pd.DataFrame({"align_confidence": [0.2, None, 0.9]})
    assert keep_confident(table, None, "train") is table
    assert keep_confident(table, 0.5, "train")["align_confidence"].tolist() == [0.9]  # no confidence: left out
