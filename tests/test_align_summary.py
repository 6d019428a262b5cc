"""What a reconstruction says about itself (issue 27): the summary of `data align`, `AlignResult`
and a `train` run on a public file, and the warnings when it is not to be trusted.

The corpus is a small synthetic public file (`psyattrs data synth --format public`)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from psyattrs.align import AlignSettings, align_public, aligned_corpus_summary, summarize_alignment
from psyattrs.align.summary import CONFIDENT, MIN_CONVERSATIONS
from psyattrs.cli import main
from psyattrs.data.opela import read_public

FAST = dict(model_kind="majority", iterations=1)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PSYATTRS_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def public_file(tmp_path_factory):
    from psyattrs.synth import synthesize, write_public

    path = tmp_path_factory.mktemp("public") / "public.csv"
    syn = synthesize(4, seed=5, min_turns=6, max_turns=9)  # `data synth --format public`, shorter conversations
    write_public(syn.utterances, syn.conversations, path, seed=5)
    return path


def _report(stops: list[str], set_aside: int = 0) -> pd.DataFrame:
    rows = [{"doc_id": f"d{k}", "status": "aligned", "rounds_stop": s} for k, s in enumerate(stops)]
    rows += [{"doc_id": f"x{k}", "status": "set aside", "rounds_stop": None} for k in range(set_aside)]
    return pd.DataFrame(rows)


def _history(rounds: int, stopped: str, last_changed: float = 0.1) -> pd.DataFrame:
    return pd.DataFrame({"iteration": range(rounds + 1), "changed": [np.nan] + [last_changed] * rounds,
                         "stopped": stopped})


def test_the_summary_counts_and_warns_when_most_conversations_are_open():
    many = MIN_CONVERSATIONS + 5
    stops = ["open"] * (many // 2 + 1) + ["settled"] * (many - many // 2 - 2) + ["cycle"]
    conf = np.array([0.95, 0.5, np.nan, 0.9, 0.25])
    s = summarize_alignment(_report(stops, set_aside=2), conf, _history(15, "cap"))
    assert (s.conversations, s.aligned, s.open, s.settled) == (many + 2, many, many // 2 + 1, many - many // 2 - 1)
    assert s.sentences == 4 and s.mean_confidence == pytest.approx(0.65)
    assert s.confident_share == pytest.approx(0.5) and CONFIDENT == 0.9
    assert s.rounds == 15 and s.stopped == "cap" and not s.trusted
    assert len(s.warnings) == 1 and "still changing at the cap of 15 round(s)" in s.warnings[0]
    text = "\n".join(s.lines())
    assert f"{many} of {many + 2} conversation(s) aligned; 2 set aside" in text
    assert f"{many - many // 2 - 1} conversation(s) settled, {many // 2 + 1} still changing at the cap of 15" in text
    assert "mean 0.650, 50.0% of 4 sentence(s) >= 0.9" in text


def test_a_settled_large_reconstruction_is_trusted_and_a_small_one_only_with_a_model_from_elsewhere():
    settled = summarize_alignment(_report(["settled"] * MIN_CONVERSATIONS), [0.95] * 3, _history(4, "converged"))
    assert settled.trusted and settled.warnings == () and settled.open == 0
    small = summarize_alignment(_report(["settled"] * 6), [0.95], _history(4, "converged"))
    assert not small.trusted and "6 conversation(s) are too few" in small.warnings[0]
    assert "--model" in small.warnings[0]
    given = summarize_alignment(_report(["settled"] * 6), [0.95], _history(4, "converged"), self_trained=False)
    assert given.trusted
    none = summarize_alignment(_report([], set_aside=2), [], _history(0, "empty"))
    assert none.warnings == ("no conversation could be aligned",) and np.isnan(none.mean_confidence)
    assert set(settled.metrics()) >= {"align_open", "align_settled", "align_mean_confidence", "align_confident_share"}
    assert settled.params() == {"align.stopped": "converged", "align.self_trained": "true", "align.trusted": "true"}


def test_align_result_summary_matches_its_report_and_the_cache(public_file):
    corpus = read_public(public_file)
    result = align_public(corpus, **FAST)
    s = result.summary
    rep = result.report
    assert s.aligned == int((rep["status"] == "aligned").sum()) == 4
    assert s.open == int((rep["rounds_stop"] == "open").sum()) and s.settled + s.open == s.aligned
    assert s.mean_confidence == pytest.approx(result.utterances["align_confidence"].mean())
    assert s.stopped == result.stopped and (result.history["stopped"] == result.stopped).all()
    assert s.self_trained and any("too few" in w for w in s.warnings)  # four conversations
    # the same summary from a fresh alignment and from the cache
    settings = AlignSettings(**FAST)
    _, fresh = aligned_corpus_summary(read_public(public_file), settings=settings, progress=False)
    _, cached = aligned_corpus_summary(read_public(public_file), settings=settings, progress=False)
    assert fresh == cached == s


def test_cli_align_of_a_small_file_says_what_it_knows_and_warns(public_file, tmp_path, capsys):
    out = tmp_path / "aligned.csv"
    for attempt in ("fresh", "cached"):
        code = main(["data", "align", str(public_file), "--out", str(out), "--quiet", "--iterations", "1",
                     "--model-kind", "majority"])
        captured = capsys.readouterr()
        assert code == 0, attempt
        assert "4 of 4 conversation(s) aligned; 0 set aside" in captured.out
        assert "conversation(s) settled," in captured.out and "still changing" in captured.out
        assert "confidence: mean " in captured.out and "sentence(s) >= 0.9" in captured.out
        assert "psyattrs: warning: the reconstruction is not to be trusted: 4 conversation(s) are too few" in captured.err
    assert "from the alignment cache" in captured.out


def test_train_on_a_public_file_logs_the_reconstruction(public_file, tmp_path, monkeypatch, capsys):
    import mlflow

    import functools

    import psyattrs.align
    from psyattrs.experiments.config import load_config
    from psyattrs.experiments.runner import train
    from pathlib import Path

    fast = functools.partial(aligned_corpus_summary, settings=AlignSettings(**FAST))  # the default, made fast
    monkeypatch.setattr(psyattrs.align, "aligned_corpus_summary", fast)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    config = load_config(Path(__file__).resolve().parents[1] / "experiments" / "majority.yaml",
                         ["data.synthetic=null", f"data.path={public_file}", f"tracking.uri={uri}",
                          "tracking.experiment=align-summary"])
    result = train(config, quiet=True)
    assert "psyattrs: warning: " in capsys.readouterr().err  # and why: below
    mlflow.set_tracking_uri(uri)
    run = mlflow.get_run(result.run_id)
    assert run.data.params["align.stopped"] in ("cap", "converged") and run.data.params["align.trusted"] == "false"
    assert run.data.metrics["align_aligned"] == 4 and run.data.metrics["align_warnings"] >= 1
    assert 0 < run.data.metrics["align_mean_confidence"] <= 1
    folder = Path(mlflow.artifacts.download_artifacts(f"{run.info.artifact_uri}/alignment", dst_path=str(tmp_path / "a")))
    summary = json.loads((folder / "public.csv.summary.json").read_text(encoding="utf-8"))
    assert summary["aligned"] == 4 and summary["trusted"] is False
    assert any("too few to learn the sentence classifier" in w for w in summary["warnings"])
    conf = pd.read_csv(folder / "public.csv.confidence.csv")
    assert list(conf.columns) == ["doc_id", "sent_id", "label_position", "align_confidence"]
    assert conf["align_confidence"].mean() == pytest.approx(run.data.metrics["align_mean_confidence"])


def test_data_align_with_a_model_trained_elsewhere(public_file, tiny_model, tmp_path, capsys):
    """`--model` takes a registry alias, a run or a folder; the model scores the lines (same table
    as `align_public(label_model=...)`), so a small file is not warned about for being small."""
    from psyattrs import Predictor

    corpus = read_public(public_file)
    expected = align_public(corpus, iterations=1, label_model=Predictor(tiny_model.registered,
                                                                        tracking_uri=tiny_model.tracking_uri))
    assert not expected.summary.self_trained and not any("too few" in w for w in expected.summary.warnings)
    for uri in (tiny_model.registered, f"runs:/{tiny_model.run_id}/model", str(tiny_model.folder)):
        out = tmp_path / "aligned.csv"
        code = main(["data", "align", str(public_file), "--out", str(out), "--iterations", "1", "--quiet",
                     "--model", uri, "--tracking-uri", tiny_model.tracking_uri])
        captured = capsys.readouterr()
        assert code == 0, (uri, captured.err)
        assert "lines scored by a model trained elsewhere" in captured.out and "too few" not in captured.err
        got = pd.read_csv(out)
        assert got["text"].fillna("").tolist() == expected.utterances["text"].tolist()
        assert np.allclose(got["align_confidence"], expected.utterances["align_confidence"], equal_nan=True)
    code = main(["data", "align", str(public_file), "--out", str(tmp_path / "x.csv"), "--model", str(tiny_model.folder),
                 "--model-kind", "majority"])
    assert code == 2 and "give one of the two" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------
# speed: the workers change nothing but the time


def test_parallel_workers_give_the_same_reconstruction(public_file):
    corpus = read_public(public_file)
    settings = dict(iterations=2, model_settings={"words": "none", "min_df": 1})
    one = align_public(corpus, workers=1, **settings)
    two = align_public(corpus, workers=2, **settings)
    pd.testing.assert_frame_equal(one.utterances, two.utterances)
    pd.testing.assert_frame_equal(one.report, two.report)
    cols = ["iteration", "changed", "moved", "loglik_per_label", "mean_top_posterior", "frozen", "stopped"]
    pd.testing.assert_frame_equal(one.history[cols], two.history[cols])
    with pytest.raises(ValueError, match="workers must be a whole number >= 1"):
        align_public(corpus, workers=0, **FAST)
