"""The runner end to end: shipped configs shrunk to seconds, tracked in a temporary MLflow store.

Every run here writes to a sqlite store under pytest's tmp_path, never to the repo's mlflow/.
"""

import json
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import mlflow
import pytest
from mlflow.exceptions import MlflowException

from psyattrs.errors import InputFileError
from psyattrs.experiments.config import expand_sweep, load_config
from psyattrs.experiments.runner import build_from_config, evaluate, train
from psyattrs.schema import OPELA

REPO = Path(__file__).resolve().parents[1]
EXPERIMENTS = REPO / "experiments"
SHRINK_DATA = ["data.synthetic.dialogues=8", "data.synthetic.rare_boost=5"]
SHRINK_TFIDF = ["model.params.words=none", "model.params.char_ngrams=[2, 3]", "model.params.max_iter=200"]
BINARY = [h.name for h in OPELA if h.is_binary]


def _uri(folder: Path) -> str:
    return f"sqlite:///{folder / 'mlflow.db'}"


def _client(uri: str):
    return mlflow.MlflowClient(tracking_uri=uri)


def _artifacts(client, run_id: str, path: str = "") -> set[str]:
    out = set()
    for item in client.list_artifacts(run_id, path):
        out |= _artifacts(client, run_id, item.path) if item.is_dir else {item.path}
    return out


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-12)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    """One temporary sqlite store for the module (creating a store takes seconds); tests that count
    runs use their own experiment name."""
    return _uri(tmp_path_factory.mktemp("store"))


@pytest.fixture(scope="module")
def trained(store):
    """The shipped soft_vs_hard config's lambda 0.5 member, shrunk, with context and calibration."""
    before = os.environ.get("MLFLOW_TRACKING_URI")
    config = load_config(
        EXPERIMENTS / "soft_vs_hard.yaml",
        [*SHRINK_DATA, *SHRINK_TFIDF, f"tracking.uri={store}", "model.calibration=temperature",
         "model.tune_thresholds=true"],
    )
    member = expand_sweep(config)[1]
    result = train(member, quiet=True)
    assert os.environ.get("MLFLOW_TRACKING_URI") == before  # the store setting does not leak
    return result, store


def test_run_finishes_with_params_tags_and_datasets(trained):
    result, uri = trained
    run = _client(uri).get_run(result.run_id)
    assert run.info.status == "FINISHED"
    assert run.info.run_name == "soft_vs_hard[targets.lambda=0.5]"
    assert run.data.params["targets.lambda"] == "0.5" and run.data.params["model.kind"] == "tfidf"
    assert run.data.params["context.previous"] == "1" and run.data.params["model.params.words"] == "none"
    assert run.data.tags["psyattrs.role"] == "single" and run.data.tags["psyattrs.config"] == "soft_vs_hard"
    if (REPO / ".git").exists():
        assert len(run.data.tags["mlflow.source.git.commit"]) == 40
    inputs = {i.tags[0].value: i.dataset for i in run.inputs.dataset_inputs}
    assert set(inputs) == {"train", "valid", "test"}
    assert inputs["test"].name == "synthetic:test" and len(inputs["test"].digest) >= 8
    assert len({d.digest for d in inputs.values()}) == 3


def test_metrics_have_the_issue_names_and_sane_values(trained):
    result, uri = trained
    logged = _client(uri).get_run(result.run_id).data.metrics
    for head in OPELA.head_names:
        for metric in ("macro_f1", "accuracy", "kappa", "soft_ce", "jsd", "ece", "truth_accuracy",
                       "floor_macro_f1", "ceiling_macro_f1", "ceiling_accuracy"):
            assert f"test_{metric}_{head}" in logged, f"test_{metric}_{head}"
    for head in BINARY:
        assert f"test_average_precision_{head}" in logged and f"test_balanced_accuracy_{head}" in logged
    assert "test_average_precision_empathy" not in logged
    for name in ("test_macro_f1_mean", "test_floor_macro_f1_mean", "test_ceiling_macro_f1_mean", "fit_seconds"):
        assert name in logged
    assert all(_same(logged[k], v) for k, v in result.metrics.items())
    assert 0 < logged["test_macro_f1_mean"] <= 1 and 0 <= logged["test_jsd_mean"] <= 1
    # even shrunk to a few conversations, the model beats the class prior on a balanced head
    assert logged["test_macro_f1_active"] > logged["test_floor_macro_f1_active"]
    assert logged["n_test_sentences"] > 0 and logged["n_valid_sentences"] > 0


def test_artifacts_are_logged(trained, tmp_path):
    result, uri = trained
    client = _client(uri)
    names = _artifacts(client, result.run_id)
    expected = {"config.yaml", "summary.txt", "metrics.json", "floor_prior.json", "plots/confusion.png",
                "plots/calibration.png", "predictions/test.parquet"}
    expected |= {f"reports/classification_{h}.txt" for h in OPELA.head_names}
    assert expected <= names
    local = Path(client.download_artifacts(result.run_id, "", str(tmp_path)))
    assert (local / "plots" / "confusion.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    config = load_config_text((local / "config.yaml").read_text(encoding="utf-8"))
    assert config == result.config
    predictions = pd.read_parquet(local / "predictions" / "test.parquet")
    assert len(predictions) == result.metrics["n_test_sentences"] + predictions["is_pause"].sum()
    assert {"doc_id", "sent_id", "labeler_empathy", "pred_empathy", "proba_empathy_4"} <= set(predictions.columns)
    proba = predictions[[f"proba_self_{k}" for k in range(3)]].to_numpy()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-9)
    assert "0 strange" in (local / "reports" / "classification_strange.txt").read_text(encoding="utf-8")
    stored = json.loads((local / "metrics.json").read_text(encoding="utf-8"))
    assert stored["test_macro_f1_mean"] == pytest.approx(result.metrics["test_macro_f1_mean"])


def load_config_text(text: str):
    import yaml

    from psyattrs.experiments.config import ExperimentConfig

    return ExperimentConfig.from_dict(yaml.safe_load(text))


def test_pyfunc_model_loads_and_predicts(trained):
    result, uri = trained
    mlflow.set_tracking_uri(uri)
    try:
        loaded = mlflow.pyfunc.load_model(f"runs:/{result.run_id}/model")
    finally:
        mlflow.set_tracking_uri(None)
    frame = pd.DataFrame({
        "doc_id": ["c1", "c1", "c1", "c2"],
        "text": ["안녕하세요 반가워요", "네 저도 반가워요 ㅎㅎ", "오늘 너무 피곤했어요 ㅠㅠ", "주말에 뭐 해요?"],
    })
    out = loaded.predict(frame)
    assert len(out) == 4 and list(out["sent_id"]) == ["c1_1", "c1_2", "c1_3", "c2_1"]
    for head in OPELA:
        proba = out[[f"{head.name}_proba_{k}" for k in head.values]].to_numpy()
        np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-9)
        assert set(out[head.name]) <= set(head.values)
    direct = result.model.predict(frame.assign(is_pause=False))
    for head in OPELA.head_names:
        np.testing.assert_array_equal(out[head].to_numpy(), direct[head].to_numpy())
    with pytest.raises(MlflowException, match="text"):
        loaded.predict(pd.DataFrame({"doc_id": ["c1"], "txt": ["hello"]}))


def test_pyfunc_predict_table_checks_its_input_and_keeps_the_row_order(trained):
    from psyattrs.experiments.pyfunc import output_columns, predict_table

    result, _ = trained
    with pytest.raises(ValueError, match=r"lacks column 'text' \(the sentences\); 'doc_id' .* optional"):
        predict_table(result.model, OPELA, pd.DataFrame({"doc_id": ["a"]}))
    frame = pd.DataFrame({"doc_id": ["b", "a", "b"], "text": ["하나", "둘이요", "셋 ㅋㅋ"], "is_pause": [0, 0, 1]})
    out = predict_table(result.model, OPELA, frame)
    assert list(out.columns) == output_columns(OPELA) and list(out["sent_id"]) == ["b_1", "a_1", "b_2"]


def test_evaluate_rescoring_reproduces_the_logged_test_metrics(trained):
    result, uri = trained
    again = evaluate(result.run_id, tracking_uri=uri)
    test_names = [k for k in result.metrics if k.startswith("test_")]
    assert test_names and all(_same(again[k], result.metrics[k]) for k in test_names)


def test_evaluate_on_another_corpus(trained, tmp_path):
    from psyattrs.synth import synthesize, write_annotated

    result, uri = trained
    path = write_annotated(synthesize(3, seed=99).utterances, tmp_path / "other.csv")
    scored = evaluate(result.run_id, path, tracking_uri=uri)
    assert "eval_macro_f1_mean" in scored and "eval_floor_macro_f1_mean" in scored
    assert not any(k.startswith("test_") for k in scored)
    assert 0 < scored["eval_accuracy_self"] <= 1


def test_training_from_a_file_logs_the_rows_set_aside(tmp_path, store):
    from psyattrs.synth import synthesize, write_annotated

    path = write_annotated(synthesize(8, seed=3).utterances, tmp_path / "corpus.csv")
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame.loc[4, "labeler2_self"] = "7"  # outside self's classes: the reader sets the row aside
    frame.to_csv(path, index=False)
    config = load_config(EXPERIMENTS / "majority.yaml",
                         [f"data.path={path}", f"tracking.uri={store}", "tracking.experiment=from-file"])
    result = train(config, quiet=True)
    client = _client(store)
    run = client.get_run(result.run_id)
    assert run.info.status == "FINISHED" and run.data.metrics["n_set_aside"] == 1
    assert result.metrics["n_set_aside"] == 1
    assert {i.dataset.name for i in run.inputs.dataset_inputs} == {"corpus.csv:train", "corpus.csv:valid", "corpus.csv:test"}
    local = Path(client.download_artifacts(result.run_id, "set_aside.jsonl", str(tmp_path)))
    problem = json.loads(local.read_text(encoding="utf-8").splitlines()[0])
    assert problem["field"] == "labeler2_self" and problem["source"] == str(path)


def test_explicit_train_and_test_files_carve_valid_from_train(tmp_path, store):
    from psyattrs.synth import synthesize, write_annotated

    train_path = write_annotated(synthesize(8, seed=4).utterances, tmp_path / "train.csv")
    test_path = write_annotated(synthesize(3, seed=5).utterances, tmp_path / "test.csv")
    config = load_config(EXPERIMENTS / "majority.yaml", [f"data.train={train_path}", f"data.test={test_path}",
                                                         f"tracking.uri={store}", "tracking.experiment=files"])
    result = train(config, quiet=True)
    run = _client(store).get_run(result.run_id)
    names = {i.tags[0].value: i.dataset.name for i in run.inputs.dataset_inputs}
    assert names == {"train": "train.csv:train", "valid": "train.csv:valid", "test": "test.csv:test"}
    test_rows = pd.read_csv(test_path, usecols=["is_pause"])
    assert result.metrics["n_test_sentences"] == (test_rows["is_pause"] == 0).sum()


def test_failing_run_ends_failed_with_the_error_logged(tmp_path, store):
    uri = store
    bad = tmp_path / "broken.csv"
    bad.write_text("this,is\nnot,a corpus\n", encoding="utf-8")
    config = load_config(EXPERIMENTS / "majority.yaml",
                         [f"data.path={bad}", f"tracking.uri={uri}", "tracking.experiment=failing"])
    with pytest.raises((InputFileError, ValueError)) as info:
        train(config, quiet=True)
    client = _client(uri)
    runs = client.search_runs([client.get_experiment_by_name("failing").experiment_id])
    assert len(runs) == 1 and runs[0].info.status == "FAILED"
    assert str(info.value)[:60] in runs[0].data.tags["psyattrs.error"]
    local = Path(client.download_artifacts(runs[0].info.run_id, "error.txt", str(tmp_path)))
    assert "Traceback" in local.read_text(encoding="utf-8")


def test_bad_model_setting_or_missing_file_fails_before_any_run(store):
    config = load_config(EXPERIMENTS / "majority.yaml", ["model.kind=tfidf", "model.params.ngrams=3",
                                                         f"tracking.uri={store}", "tracking.experiment=never"])
    with pytest.raises(ValueError, match=r"no setting\(s\) \['ngrams'\]"):
        train(config, quiet=True)
    missing = load_config(EXPERIMENTS / "majority.yaml", ["data.path=nowhere.csv", f"tracking.uri={store}",
                                                          "tracking.experiment=never"])
    with pytest.raises(InputFileError, match="nowhere.csv: data.path: corpus file not found"):
        train(missing, quiet=True)
    assert _client(store).get_experiment_by_name("never") is None


def test_every_shipped_config_loads_and_builds():
    built = {}
    for path in sorted(EXPERIMENTS.glob("*.yaml")):
        for member in expand_sweep(load_config(path)):
            model = build_from_config(member)
            assert model.kind == member.model.kind
            assert model.context_previous == member.context.previous
            built[member.run_name] = model.kind
    assert {"majority", "baseline_tfidf", "lightgbm_context", "demo"} <= set(built)
    assert sum(name.startswith("soft_vs_hard[") for name in built) == 3


def test_cross_validation_makes_nested_fold_runs(store):
    uri = store
    config = load_config(EXPERIMENTS / "majority.yaml", [*SHRINK_DATA, "split.folds=2", f"tracking.uri={uri}"])
    result = train(config, quiet=True)
    client = _client(uri)
    assert len(result.fold_run_ids) == 2
    for fold_id in result.fold_run_ids:
        fold = client.get_run(fold_id)
        assert fold.data.tags["mlflow.parentRunId"] == result.run_id and fold.info.status == "FINISHED"
        assert "test_macro_f1_mean" in fold.data.metrics
    folds = [client.get_run(f).data.metrics["test_macro_f1_mean"] for f in result.fold_run_ids]
    parent = client.get_run(result.run_id).data.metrics
    assert parent["test_macro_f1_mean"] == pytest.approx(np.mean(folds))
    assert parent["test_macro_f1_mean_std"] == pytest.approx(np.std(folds, ddof=1))
    with pytest.raises(ValueError, match="cross-validation parent"):
        evaluate(result.run_id, tracking_uri=uri)


def test_cli_train_runs_a_sweep_and_prints_the_run_ids_last(tmp_path, store, capsys):
    from psyattrs.cli import main

    uri = store
    code = main(["train", "soft_vs_hard", "--quiet", "--set", "model.kind=majority",
                 "--set", "data.synthetic.dialogues=5", "--set", f"tracking.uri={uri}"])
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 0
    client = _client(uri)
    ids = out[-3:]
    runs = {i: client.get_run(i) for i in ids}
    assert [runs[i].data.params["targets.lambda"] for i in ids] == ["1.0", "0.5", "0.0"]
    assert all(r.info.status == "FINISHED" for r in runs.values())
    assert any(line.startswith("empathy ") for line in out) and any("floor_macro_f1" in line for line in out)

    code = main(["evaluate", "--run", ids[-1], "--tracking-uri", uri, "--json", str(tmp_path / "m.json")])
    printed = capsys.readouterr().out
    assert code == 0 and "macro_f1" in printed and "empathy" in printed
    assert "test_macro_f1_mean" in json.loads((tmp_path / "m.json").read_text(encoding="utf-8"))


def test_cli_reports_bad_input_in_one_line(tmp_path, store, capsys):
    from psyattrs.cli import main

    assert main(["train", str(tmp_path / "missing.yaml")]) == 2
    assert "experiment config not found" in capsys.readouterr().err
    assert main(["train", "no_such_experiment"]) == 2
    assert "no_such_experiment: experiment config not found" in capsys.readouterr().err
    assert main(["train", str(EXPERIMENTS / "majority.yaml"), "--set", "model.knd=tfidf"]) == 2
    assert "'model.knd'" in capsys.readouterr().err
    assert main(["evaluate", "--run", "0123456789abcdef", "--tracking-uri", store]) == 2
    assert "no MLflow run '0123456789abcdef'" in capsys.readouterr().err


def test_default_store_is_the_repo_mlflow_folder(monkeypatch):
    from psyattrs.experiments.store import artifact_root, default_tracking_uri, resolve_tracking_uri

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert default_tracking_uri() == f"sqlite:///{(REPO / 'mlflow' / 'mlflow.db').as_posix()}"
    assert resolve_tracking_uri(None) == default_tracking_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////elsewhere/x.db")
    assert resolve_tracking_uri(None) == "sqlite:////elsewhere/x.db"
    assert resolve_tracking_uri("sqlite:////mine/y.db") == "sqlite:////mine/y.db"
    assert artifact_root("sqlite:////mine/y.db") == Path("/mine/artifacts")
    assert artifact_root("http://localhost:5000") is None
