"""Label quality (CROWDLAB, cross-fitted) and what to label next: `psyattrs labels quality|next`.

Corpora are synthetic (`psyattrs.synth`): three simulated labelers with known confusion matrices
(careful, lenient, noisy) rate every sentence. The model is a small TF-IDF model fitted here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from psyattrs.cli import main
from psyattrs.schema import OPELA

from conftest import annotated_frame, generic_frame, write_csv


@pytest.fixture(scope="module")
def synth_corpus():
    from psyattrs.synth import synthesize

    return synthesize(12, seed=3).utterances


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    from psyattrs.labels.soft import mixed_targets
    from psyattrs.models.base import build_model
    from psyattrs.synth import synthesize

    table = synthesize(6, seed=11).utterances
    model = build_model("tfidf", OPELA, words="none", char_ngrams=[2, 3], max_iter=200, context_previous=1)
    model.fit(table, mixed_targets(table, OPELA))
    folder = tmp_path_factory.mktemp("quality") / "model"
    model.save(folder)
    return folder


@pytest.fixture(scope="module")
def corpus_csv(synth_corpus, tmp_path_factory):
    from psyattrs.synth import write_annotated

    return write_annotated(synth_corpus, tmp_path_factory.mktemp("quality_data") / "corpus.csv")


def test_labeler_quality_ranks_careful_lenient_noisy_in_their_true_order(synth_corpus, model_folder):
    from psyattrs.serving.curation import get_label_quality

    result = get_label_quality(synth_corpus, model_folder, folds=3)
    overall = result.labelers[result.labelers["head"] == "(all)"].set_index("labeler")["quality"]
    assert list(overall.sort_values(ascending=False).index) == ["labeler1", "labeler2", "labeler3"]
    assert overall["labeler1"] - overall["labeler3"] > 0.03
    items = result.items
    assert set(items["head"]) == set(OPELA.head_names)
    assert items["consensus_quality"].is_monotonic_increasing  # most likely mislabelled first
    assert items["consensus_quality"].between(0, 1).all()
    # an item whose three labelers split is less trustworthy than one they agree on, on average
    split = items["annotator_agreement"] < 1
    assert items.loc[split, "consensus_quality"].mean() < items.loc[~split, "consensus_quality"].mean()
    assert not synth_corpus["is_pause"].to_numpy()[synth_corpus["sent_id"].isin(items["sent_id"])].any()


def test_consensus_quality_finds_the_items_whose_final_label_is_wrong(synth_corpus, model_folder):
    from psyattrs.serving.curation import get_label_quality

    items = get_label_quality(synth_corpus, model_folder, folds=3, heads=["engage"]).items
    truth = synth_corpus.set_index("sent_id")["true_engage"]
    wrong = (items["consensus_label"].to_numpy() != truth.reindex(items["sent_id"]).to_numpy())
    assert wrong.any() and not wrong.all()
    low = items["consensus_quality"] < items["consensus_quality"].median()
    assert wrong[low.to_numpy()].mean() > 2 * wrong[~low.to_numpy()].mean()


def test_cross_fitting_never_scores_a_conversation_it_trained_on(synth_corpus, monkeypatch):
    from psyattrs.experiments import crossfit
    from psyattrs.models.base import build_model

    seen = []

    class Recorder:
        def __init__(self, inner):
            self.inner, self.fitted = inner, set()

        def fit(self, table, targets, valid=None):
            self.fitted = set(table["doc_id"])
            self.inner.fit(table, targets, valid=valid)
            return self

        def predict_proba(self, table):
            seen.append((self.fitted, set(table["doc_id"])))
            return self.inner.predict_proba(table)

    monkeypatch.setattr(crossfit, "build_model", lambda kind, schema, **s: Recorder(build_model(kind, schema, **s)))
    schema = OPELA.__class__(OPELA.name, OPELA.heads[:2], OPELA.language)
    proba = crossfit.cross_fitted_proba(synth_corpus, schema, kind="majority", settings={}, folds=4)
    assert len(seen) == 4
    assert all(not (fitted & held) for fitted, held in seen)
    assert set().union(*(held for _, held in seen)) == set(synth_corpus["doc_id"])
    assert not np.isnan(proba["strange"]).any()


def test_cleanlab_gives_the_same_scores_on_one_head(synth_corpus):
    """psyattrs' tables are cleanlab's CROWDLAB, head by head, on the wide matrix it builds."""
    from cleanlab.multiannotator import get_label_quality_multiannotator

    from psyattrs.labels.quality import label_quality_tables, wide_labels

    labels = wide_labels(synth_corpus, OPELA, heads=["self"])
    rng = np.random.default_rng(0)
    proba = {"self": rng.dirichlet(np.ones(3), size=len(synth_corpus))}
    items, labelers = label_quality_tables(labels, proba, synth_corpus)
    direct = get_label_quality_multiannotator(pd.DataFrame(labels["self"].matrix, columns=labels["self"].labelers),
                                              proba["self"][labels["self"].rows], verbose=False)
    want = pd.Series(direct["label_quality"]["consensus_quality_score"].to_numpy(),
                     index=synth_corpus["sent_id"].to_numpy()[labels["self"].rows])
    got = items.set_index("sent_id")["consensus_quality"]
    np.testing.assert_allclose(got.reindex(want.index).to_numpy(), want.to_numpy())
    assert labels["self"].labelers == ["labeler1", "labeler2", "labeler3"]


def test_cli_quality_writes_both_tables_and_prints_a_summary(corpus_csv, model_folder, tmp_path, capsys):
    out = tmp_path / "q" / "items.parquet"
    assert main(["labels", "quality", str(corpus_csv), "--model", str(model_folder), "--folds", "2",
                 "--heads", "engage,self", "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert "most likely mislabelled" in printed.out and "labeler1" in printed.out
    assert "fold 2/2" in printed.err
    items = pd.read_parquet(out)
    labelers = pd.read_csv(tmp_path / "q" / "items.labelers.csv")
    assert set(items["head"]) == {"engage", "self"}
    assert set(labelers["head"]) == {"(all)", "engage", "self"}
    assert sorted(p.name for p in out.parent.iterdir()) == ["items.labelers.csv", "items.parquet"]


def test_cli_quality_logs_to_the_mlflow_run_it_runs_under(corpus_csv, model_folder, tmp_path, monkeypatch, capsys):
    import mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    experiment = mlflow.create_experiment("quality", artifact_location=(tmp_path / "artifacts").as_uri())
    with mlflow.start_run(experiment_id=experiment) as run:
        run_id = run.info.run_id
    mlflow.set_tracking_uri(None)
    monkeypatch.setenv("MLFLOW_RUN_ID", run_id)
    assert main(["labels", "quality", str(corpus_csv), "--model", str(model_folder), "--folds", "2",
                 "--heads", "active", "--tracking-uri", uri]) == 0
    assert f"logged to MLflow run {run_id}" in capsys.readouterr().out
    client = mlflow.MlflowClient(uri)
    metrics = client.get_run(run_id).data.metrics
    assert 0 < metrics["labeler_quality_labeler1"] <= 1 and "consensus_quality_mean_active" in metrics
    assert {f.path for f in client.list_artifacts(run_id, "label_quality")} == {
        "label_quality/items.parquet", "label_quality/labelers.csv"}


@pytest.mark.parametrize("strategy", ["combined", "disagreement", "entropy", "activelab", "random"])
def test_next_ranks_new_and_labelled_items_with_the_score_and_its_parts(corpus_csv, model_folder, tmp_path, strategy):
    from psyattrs.serving.curation import get_next_batch

    table = pd.read_csv(corpus_csv)
    docs = table["doc_id"].unique()
    pool = table[table["doc_id"].isin(docs[:4])].copy()
    pool[[c for c in pool.columns if c.startswith("labeler")]] = np.nan
    labelled = table[table["doc_id"].isin(docs[4:])]
    ranked = get_next_batch(write_csv(pool, tmp_path / "pool.csv"), model_folder, budget=25,
                            labelled=write_csv(labelled, tmp_path / "labelled.csv"), strategy=strategy, folds=3)
    assert len(ranked) == 25 and list(ranked["rank"]) == list(range(1, 26))
    assert ranked["score"].is_monotonic_decreasing
    assert {"pred_disagreement", "entropy", "model_doubt", "few_labels", "n_labels"} <= set(ranked.columns)
    assert set(ranked["action"]) <= {"label", "relabel"}
    assert (ranked["action"] == "relabel").eq(ranked["n_labels"] > 0).all()
    if strategy == "disagreement":
        assert (ranked["score"] == ranked["pred_disagreement"]).all()
    if strategy == "combined":  # the few-labels weight makes new items come first on this corpus
        assert (ranked["action"] == "label").all()


def test_next_by_conversation_on_a_subset_of_heads(corpus_csv, model_folder, capsys):
    assert main(["labels", "next", str(corpus_csv), "--model", str(model_folder), "--budget", "3",
                 "--unit", "conversation", "--heads", "strange,uneasy", "--strategy", "entropy"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("next 3 conversations to label (entropy):")
    assert len(out.strip().splitlines()) == 5  # title, header, three conversations


def test_the_package_exports_both_functions_lazily():
    import psyattrs
    from psyattrs.serving import curation

    assert psyattrs.get_label_quality is curation.get_label_quality
    assert psyattrs.get_next_batch is curation.get_next_batch


def test_selection_parts_have_their_documented_extremes():
    from psyattrs.labels.active import model_doubt, normalized_entropy, predicted_disagreement, vote_counts

    p = np.array([[1.0, 0.0, 0.0], [1 / 3, 1 / 3, 1 / 3]])
    np.testing.assert_allclose(predicted_disagreement(p), [0.0, 1.0], atol=1e-9)
    np.testing.assert_allclose(normalized_entropy(p), [0.0, 1.0], atol=1e-6)
    counts = vote_counts(np.array([[0.0, 0.0, np.nan], [0.0, 1.0, 2.0]]), 3)
    np.testing.assert_allclose(model_doubt(p, counts), [0.0, 1 - (1 / 3 + 1) / 4])


def _no_text(tmp_path):
    frame = generic_frame().drop(columns="text")
    return write_csv(frame, tmp_path / "no_text.csv")


def _empty(tmp_path):
    frame = generic_frame().iloc[:0]
    return write_csv(frame, tmp_path / "empty.csv")


def _unlabelled(tmp_path):
    frame = annotated_frame()
    return write_csv(frame.drop(columns=[c for c in frame.columns if c.startswith("labeler")]), tmp_path / "bare.csv")


@pytest.mark.parametrize("command, make, extra, match", [
    ("next", _no_text, [], "text"),
    ("next", _empty, [], "no sentence|empty|no row|holds no"),
    ("next", lambda p: write_csv(annotated_frame(), p / "small.csv"), ["--budget", "7"],
     "budget 7 is larger than the pool: 6 sentences"),
    ("next", lambda p: write_csv(annotated_frame(), p / "small.csv"), ["--budget", "3", "--unit", "conversation"],
     "budget 3 is larger than the pool: 2 conversations"),
    ("quality", _unlabelled, [], "have no labelers' labels in the corpus"),
    ("quality", lambda p: write_csv(generic_frame(), p / "other.csv"), [], "head 'abuse', which schema 'opela' does not define"),
    ("next", lambda p: write_csv(annotated_frame(), p / "small.csv"), ["--heads", "mood"], "not among the model's heads"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(command, make, extra, match, model_folder, tmp_path, capsys):
    data = make(tmp_path)
    out = tmp_path / "out" / "result.csv"
    args = ["labels", command, str(data), "--model", str(model_folder), "--out", str(out), *extra]
    if command == "next" and "--budget" not in extra:
        args += ["--budget", "2"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("psyattrs: error:")
    assert __import__("re").search(match, err), err
    assert not (tmp_path / "out").exists()


def test_a_registered_model_is_refit_with_its_runs_recipe_calibration_included(synth_corpus, tiny_model):
    """models:/NAME@ALIAS: the run's targets are read (no note), and a recipe that calibrates and
    tunes thresholds gets a validation split carved from each fold's training conversations."""
    from psyattrs.serving.curation import get_label_quality

    assert tiny_model.model.settings["calibration"] == "temperature" and tiny_model.model.settings["tune_thresholds"]
    result = get_label_quality(synth_corpus, tiny_model.registered, heads=["active"], folds=2,
                               tracking_uri=tiny_model.tracking_uri)
    assert result.notes == [] and result.kind == "tfidf" and result.lam == 1.0
    assert result.model == tiny_model.registered
    assert set(result.items["head"]) == {"active"} and len(result.items) == int((~synth_corpus["is_pause"]).sum())


def test_a_model_folder_says_which_targets_it_refits_with(synth_corpus, model_folder):
    from psyattrs.serving.curation import get_label_quality

    result = get_label_quality(synth_corpus, model_folder, heads=["active"], folds=2)
    assert result.notes and "names no run" in result.notes[0]
