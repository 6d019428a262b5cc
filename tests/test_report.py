"""The run report: built from a real run, logged automatically by training, opened in Chromium."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import mlflow
import pytest

from _chromium import find_chromium, open_page

REPO = Path(__file__).resolve().parents[1]
SHRINK = ["data.synthetic.dialogues=8", "data.synthetic.rare_boost=5", "model.params.words=none",
          "model.params.char_ngrams=[2, 3]", "model.params.max_iter=200"]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}"


@pytest.fixture(scope="module")
def trained(store):
    """A tfidf run trained through the public entry `psyattrs.train` (which logs the report)."""
    import psyattrs

    return psyattrs.train(REPO / "experiments" / "baseline_tfidf.yaml", [*SHRINK, f"tracking.uri={store}"],
                          quiet=True)


def _report_artifact(store: str, run_id: str, tmp: Path) -> str:
    with_uri = mlflow.MlflowClient(tracking_uri=store)
    names = [a.path for a in with_uri.list_artifacts(run_id, "report")]
    assert names == ["report/report.html"]
    local = with_uri.download_artifacts(run_id, "report/report.html", str(tmp))
    return Path(local).read_text(encoding="utf-8")


def test_training_logs_the_report_as_a_run_artifact(trained, store, tmp_path):
    page = _report_artifact(store, trained.run_id, tmp_path)
    assert page.startswith("<!DOCTYPE html>")
    assert trained.run_id in page and "baseline_tfidf" in page
    # the per-head table holds the run's own metric, floor and ceiling (3 decimals)
    for key in ("test_macro_f1_empathy", "test_floor_macro_f1_empathy", "test_ceiling_macro_f1_mean"):
        assert f"<td>{trained.metrics[key]:.3f}</td>" in page
    for section in ("Per-head metrics", "Confusion matrices", "Calibration", "Learning curves", "Config"):
        assert f"<h2>{section}" in page
    assert "kind: tfidf" in page  # the resolved config
    # self-contained: every image is an embedded PNG, nothing is fetched from anywhere
    sources = re.findall(r'<img [^>]*src="([^"]+)"', page)
    assert len(sources) == 3
    for src in sources:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert not re.search(r'(src|href)="(https?:|//)', page) and "<script" not in page


def test_cli_report_writes_the_file_and_relogs_it(trained, store, tmp_path, capsys):
    from psyattrs.cli import main

    out = tmp_path / "sub" / "report.html"
    assert main(["report", "--run", trained.run_id, "--tracking-uri", store, "--out", str(out)]) == 0
    assert "logged it as artifact report/report.html" in capsys.readouterr().out
    assert out.read_text(encoding="utf-8") == _report_artifact(store, trained.run_id, tmp_path)


def test_cli_report_of_an_unknown_run_is_one_line(store, capsys):
    from psyattrs.cli import main

    assert main(["report", "--run", "0123456789abcdef", "--tracking-uri", store]) == 2
    err = capsys.readouterr().err
    assert "no MLflow run '0123456789abcdef'" in err and "Traceback" not in err


def test_cross_validation_report_lists_the_folds_and_cli_train_logs_it(store, tmp_path, capsys):
    from psyattrs.cli import main

    code = main(["train", "majority", "--quiet", "--set", "data.synthetic.dialogues=9", "--set", "split.folds=3",
                 "--set", f"tracking.uri={store}", "--set", "tracking.experiment=cv-report"])
    assert code == 0
    run_id = capsys.readouterr().out.strip().splitlines()[-1]
    page = _report_artifact(store, run_id, tmp_path)
    assert "<h2>Cross-validation folds" in page
    assert page.count("/fold") == 3 and "pooled out-of-fold predictions" in page


def test_learning_curves_appear_for_metrics_logged_per_epoch(trained, store):
    from psyattrs.experiments.report import build_report

    client = mlflow.MlflowClient(tracking_uri=store)
    for epoch, loss in enumerate([0.9, 0.6, 0.5]):
        client.log_metric(trained.run_id, "train_loss", loss, step=epoch)
    page = build_report(trained.run_id, tracking_uri=store)
    assert 'alt="learning curves"' in page and "no metric was logged at more than one step" not in page


@pytest.mark.skipif(find_chromium() is None, reason="no Chromium installed (apt-get install chromium); "
                    "the report is not checked in a real browser here")
def test_report_renders_in_headless_chromium(trained, store, tmp_path):
    page_path = tmp_path / "report.html"
    page_path.write_text(_report_artifact(store, trained.run_id, tmp_path), encoding="utf-8")
    seen = open_page(page_path)
    assert seen.title.startswith("psyattrs report baseline_tfidf")
    assert seen.text_length > 500  # the tables and the config rendered as text
    assert len(seen.images) == 3
    for image in seen.images:  # every embedded plot decoded to a real picture
        assert image["complete"] and image["width"] > 300 and image["height"] > 200, image
    assert seen.console_errors == [] and seen.exceptions == [] and seen.failed_requests == []
    assert seen.screenshot[:8] == b"\x89PNG\r\n\x1a\n"


def test_one_train_reports_unless_told_not_to_and_a_run_without_predictions_still_reports(store, tmp_path):
    import shutil
    from urllib.parse import urlparse

    import psyattrs
    from psyattrs.experiments import load_config, train
    from psyattrs.experiments.report import build_report

    assert psyattrs.train is train  # one train: the public name and the experiments' are the same function
    config = load_config(REPO / "experiments" / "majority.yaml",
                         ["data.synthetic.dialogues=6", f"tracking.uri={store}", "tracking.experiment=no-report"])
    result = train(config, quiet=True, report=False)
    client = mlflow.MlflowClient(tracking_uri=store)
    assert client.list_artifacts(result.run_id, "report") == []
    shutil.rmtree(Path(urlparse(result.artifact_uri).path) / "predictions")
    page = build_report(result.run_id, tracking_uri=store)
    assert "the run has no predictions artifact" in page and 'alt="confusion matrices"' not in page
    assert f"<td>{result.metrics['test_macro_f1_mean']:.3f}</td>" in page


def test_a_report_that_cannot_be_built_is_a_warning_and_the_run_stands(store, monkeypatch, capsys):
    from psyattrs.experiments import load_config, runner

    def broken(run_id, **kwargs):
        raise RuntimeError("no figures today")

    monkeypatch.setattr(runner, "log_run_report", broken)
    config = load_config(REPO / "experiments" / "majority.yaml",
                         ["data.synthetic.dialogues=6", f"tracking.uri={store}", "tracking.experiment=broken-report"])
    result = runner.train(config, quiet=True)
    assert mlflow.MlflowClient(tracking_uri=store).get_run(result.run_id).info.status == "FINISHED"
    err = capsys.readouterr().err
    assert f"run {result.run_id}: the run report was not logged: RuntimeError: no figures today" in err
