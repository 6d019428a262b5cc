"""Conversation profiles against survey outcomes: the profile arithmetic, the regression's honesty
(it finds the synthetic corpus's built-in effects and nothing in noise), the three inputs and the CLI."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from psyattrs import synthesize
from psyattrs.cli import main
from psyattrs.errors import InputFileError
from psyattrs.reports.analyze import (
    OUTCOMES,
    conversation_profiles,
    load_analysis_input,
    match_doc_ids,
    outcome_table,
    relate,
)
from psyattrs.schema import OPELA

FAST = {"repeats": 4, "bootstrap": 200}


@pytest.fixture(scope="module")
def synth():
    return synthesize(160, seed=11)


def _write(tmp_path, fmt: str):
    """The `synth` corpus written by `psyattrs data synth` in the annotated or the public layout
    (free shape, as `synthesize` draws it by default)."""
    path = tmp_path / f"{fmt}.csv"
    assert main(["data", "synth", "--out", str(path), "--dialogues", "160", "--seed", "11", "--format", fmt,
                 "--shape", "free"]) == 0
    return path


def _table(rows):
    frame = pd.DataFrame(rows, columns=["doc_id", "person_type", "is_pause", *(f"labeler_{h}" for h in OPELA.head_names)])
    return frame


def test_profile_shares_and_levels_by_hand():
    #            doc  speaker   pause strange uneasy engage active self empathy
    table = _table([
        ("a", "persona", False, 1, 1, 1, 0, 2, 4),
        ("a", "persona", False, 0, 1, 0, 1, 1, 0),   # strange, empathy not applicable
        ("a", "persona", True, 1, 1, 0, 0, 0, 0),    # pause: left out
        ("a", "user", False, 1, 0, 1, 1, 0, 2),      # uncomfortable
        ("b", "user", False, 1, 1, 0, 0, 1, 0),
    ])
    whole = conversation_profiles(table, by_speaker=False)
    a = whole.loc["a"]
    assert a["n_sentences"] == 3
    assert a["engage_share"] == pytest.approx(2 / 3) and a["active_share"] == pytest.approx(2 / 3)
    assert a["strange_share"] == pytest.approx(1 / 3) and a["uneasy_share"] == pytest.approx(1 / 3)
    assert a["self_level"] == pytest.approx(1.0)
    assert a["empathy_level"] == pytest.approx(3.0)  # (4 + 2) / 2 applicable sentences
    assert np.isnan(whole.loc["b", "empathy_level"])  # no applicable sentence

    per = conversation_profiles(table)  # speakers known -> per speaker
    assert per.loc["a", "n_persona_sentences"] == 2 and per.loc["a", "n_user_sentences"] == 1
    assert per.loc["a", "persona_strange_share"] == 0.5 and per.loc["a", "user_uneasy_share"] == 1.0
    assert per.loc["a", "persona_empathy_level"] == 4.0
    assert per.loc["b", "n_persona_sentences"] == 0 and np.isnan(per.loc["b", "persona_engage_share"])


def test_predicted_profiles_are_expectations_over_probabilities():
    table = pd.DataFrame({"doc_id": ["d", "d"], "speaker": ["persona", "user"], "is_pause": [False, False]})
    for head in OPELA:
        p = np.full((2, head.n_classes), 1 / head.n_classes)
        for k in head.values:
            table[f"{head.name}_proba_{k}"] = p[:, k]
        table[head.name] = 0
    table["engage_proba_0"], table["engage_proba_1"] = [0.2, 0.6], [0.8, 0.4]
    whole = conversation_profiles(table, source="predicted", by_speaker=False)
    assert whole.loc["d", "engage_share"] == pytest.approx(0.6)
    assert whole.loc["d", "empathy_level"] == pytest.approx(2.5)  # uniform over levels 1-4
    per = conversation_profiles(table, source="predicted")
    assert per.loc["d", "persona_engage_share"] == pytest.approx(0.8)


def test_missing_heads_and_bad_source_are_named():
    with pytest.raises(ValueError, match="no final labels .* \\['empathy'\\]"):
        conversation_profiles(_table([("a", "user", False, 1, 1, 1, 1, 1, 1)]).drop(columns="labeler_empathy"))
    with pytest.raises(ValueError, match="source 'gold'"):
        conversation_profiles(_table([]), source="gold")


def test_outcome_table_accepts_the_documented_synonym():
    frame = pd.DataFrame({"doc_id": ["a", "b"], "engaging_persona": [3, 4], "fun_user": ["2", ""]})
    out = outcome_table(frame)
    assert list(out.columns) == ["attract_persona", "fun_user"]
    assert out.loc["a", "attract_persona"] == 3 and np.isnan(out.loc["b", "fun_user"])
    with pytest.raises(ValueError, match="no survey outcome column"):
        outcome_table(pd.DataFrame({"doc_id": ["a"], "x": [1]}))


def test_finds_the_synthetic_effects_per_speaker(synth):
    # the simulator drives each side's ratings by that side's empathy, engagement and activity
    result = relate(conversation_profiles(synth.utterances), outcome_table(synth.conversations), **FAST)
    fits = result.fits.set_index("outcome")
    assert set(fits.index) == set(OUTCOMES) and (fits["n"] == 160).all()
    assert (fits["baseline_cv_r2"] < 0).all() and (fits["baseline_cv_r2"] > -0.05).all()
    assert fits["beats_baseline"].sum() >= 10 and (fits["cv_r2"] > 0.1).sum() >= 10
    effects = result.effects.set_index(["outcome", "feature"])
    assert effects.loc[("fun_persona", "persona_engage_share"), "ci_low"] > 0
    assert effects.loc[("blri_user", "user_engage_share"), "ci_low"] > 0
    assert (effects["ci_low"] <= effects["coef"]).all() and (effects["coef"] <= effects["ci_high"]).all()


def test_nothing_beats_the_baseline_on_noise(synth):
    profiles = conversation_profiles(synth.utterances)
    rng = np.random.default_rng(0)
    noise = pd.DataFrame({"fun_persona": rng.normal(size=len(profiles)), "blri_user": rng.integers(16, 64, len(profiles))},
                         index=profiles.index)
    result = relate(profiles, noise, **FAST)
    assert not result.fits["beats_baseline"].any()
    assert (result.fits["cv_r2"] < 0.02).all()


def test_constant_features_are_left_out_and_settings_checked(synth):
    profiles = conversation_profiles(synth.utterances, by_speaker=False).assign(uneasy_share=0.0)
    result = relate(profiles, outcome_table(synth.conversations)[["fun_user"]], **FAST)
    assert result.dropped_features == ["uneasy_share"]
    assert "uneasy_share" not in set(result.effects["feature"])
    with pytest.raises(ValueError, match="folds=1"):
        relate(profiles, outcome_table(synth.conversations), folds=1)
    with pytest.raises(ValueError, match="no conversation"):
        relate(profiles, outcome_table(synth.conversations).set_axis([f"x{i}" for i in range(160)]))


def test_public_release_needs_no_alignment(tmp_path, synth):
    data = load_analysis_input(_write(tmp_path, "public"))
    assert not data.by_speaker and len(data.profiles) == 160 and len(data.outcomes) == 160
    assert "public release" in data.describe()
    # the whole-conversation profile is the one the sentence table gives (pauses aside: the public
    # release cannot tell them apart, so they count as sentences with all-zero labels)
    direct = match_doc_ids(conversation_profiles(synth.utterances, by_speaker=False), data.outcomes)
    direct = direct.loc[data.profiles.index]
    for feature in ("engage_share", "self_level", "empathy_level"):
        public, sentences = data.profiles[feature].to_numpy(), direct[feature].to_numpy()
        assert np.corrcoef(public, sentences)[0, 1] > 0.9, feature
        assert np.mean(np.abs(public - sentences)) < 0.03, feature


def test_annotated_file_with_outcomes_file_and_cli(tmp_path, synth, capsys):
    annotated = _write(tmp_path, "annotated")
    capsys.readouterr()
    outcomes = tmp_path / "survey.csv"
    synth.conversations.to_csv(outcomes, index=False)
    assert main(["analyze", str(annotated)]) == 2
    assert "no survey outcomes: pass --outcomes" in capsys.readouterr().err

    out = tmp_path / "analysis"
    code = main(["analyze", str(annotated), "--outcomes", str(outcomes), "--out", str(out),
                 "--repeats", "3", "--bootstrap", "100"])
    printed = capsys.readouterr().out
    assert code == 0
    assert "160 conversations profiled (per speaker)" in printed and "outcomes beat the mean-only baseline" in printed
    fits = pd.read_csv(out / "fits.csv")
    assert len(fits) == 14 and {"cv_r2", "baseline_cv_r2", "gain_ci_low", "beats_baseline"} <= set(fits.columns)
    assert len(pd.read_csv(out / "effects.csv")) == 14 * 12
    plots = sorted(p.name for p in (out / "plots").iterdir())
    assert plots == sorted(f"{o}.png" for o in OUTCOMES)
    assert (out / "plots" / "fun_user.png").read_bytes()[:4] == b"\x89PNG"


def test_annotated_ids_match_the_public_release_survey(tmp_path, synth):
    # annotated doc_ids end in the labeler ids; the public release (which holds the survey) has none
    annotated, public = _write(tmp_path, "annotated"), _write(tmp_path, "public")
    data = load_analysis_input(annotated, outcomes=public)
    assert data.by_speaker and data.profiles.index.isin(data.outcomes.index).all()
    assert not data.profiles.index.str.endswith("L1-L2-L3").any()


def test_predicted_attributes_from_a_model(tmp_path, synth):
    from psyattrs import Predictor
    from psyattrs.models.base import build_model
    from psyattrs.labels.soft import mixed_targets

    train = synth.utterances[synth.utterances["doc_id"].isin(synth.conversations["doc_id"][:60])]
    model = build_model("tfidf", OPELA, words="none", char_ngrams=[2, 3], max_iter=200)
    model.fit(train, mixed_targets(train, OPELA, lam=1.0))
    predicted = Predictor(model).predict(synth.utterances.drop(columns=[c for c in synth.utterances if c.startswith(("labeler", "true_"))]))
    path = tmp_path / "predicted.parquet"
    predicted.to_parquet(path)
    with pytest.raises(InputFileError, match="no survey outcomes"):
        load_analysis_input(path)  # predictions carry no survey
    survey = tmp_path / "survey.csv"
    synth.conversations.to_csv(survey, index=False)
    data = load_analysis_input(path, outcomes=survey)
    assert data.kind == "predicted attributes" and data.by_speaker and len(data.profiles) == 160
    result = relate(data.profiles, data.outcomes, **FAST)
    assert len(result.fits) == 14
