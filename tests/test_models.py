"""The multi-head models: majority, tfidf, lightgbm; soft targets, calibration, thresholds, stacking.

The fixtures are small synthetic chats generated here with a fixed RNG: sentence templates carry the
labels of the sentence (self-disclosure, rare "strange" and "uneasy" sentences), and the empathy of a
neutral reply ("아 그렇구나") depends only on what the partner said just before, so only a model
that sees the context can get it.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from psyattrs.features.context import prepare_table
from psyattrs.data.table import final_column, labeler_column, normalize_table
from psyattrs.models import build_model, load_model
from psyattrs.models.base import check_targets, class_weight_vector, expand_soft_targets
from psyattrs.models.calibration import PlattScaling, TemperatureScaling, calibrator_from_dict, cross_entropy
from psyattrs.models.decision import macro_f1, tune_binary_threshold
from psyattrs.models.gbm import GBMHead, LightGBMModel, group_folds, out_of_fold
from psyattrs.models.majority import MajorityModel
from psyattrs.models.tfidf import TfidfModel, make_featurizer
from psyattrs.schema import OPELA, Head, Schema

FOOD = ["김치찌개", "떡볶이", "만두국", "비빔밥", "라면", "치킨", "초밥", "파스타", "순두부", "냉면"]
PLACE = ["회사", "학교", "도서관", "카페", "헬스장", "마트", "공원", "볼링장", "시장", "병원"]
ACT = ["산책했어", "공부했어", "운동했어", "청소했어", "요리했어", "일했어", "쉬었어", "놀았어"]
FEEL = ["너무 외로워", "진짜 속상해", "많이 불안해", "너무 행복해", "정말 서운했어", "마음이 무거워", "요즘 우울해"]
REPLY = ["아 그렇구나", "응응", "오 그래", "음 그렇네", "아하", "그랬구나", "응 알겠어"]
SALAD = ["우산", "하늘이", "달린다", "바나나", "냉장고가", "노래한다", "파랗게", "의자를"]
RUDE = ["아 짜증나 그만 좀 해", "너 진짜 별로다", "귀찮게 하지 마", "말 걸지 마 짜증나"]

# type -> labels (strange, uneasy, engage, active, self, empathy); None = depends on context/noise
TYPES = {
    "question": (1, 1, 1, 1, 0, 0),
    "fact": (1, 1, 1, None, 1, 0),
    "feeling": (1, 1, 1, None, 2, 0),
    "reply": (1, 1, 0, 0, 0, None),
    "strange": (0, 1, 0, 0, 0, 0),
    "rude": (1, 0, 0, 1, 0, 1),
}
REPLY_EMPATHY = {"feeling": 3, "fact": 2, "question": 0, "reply": 0, "strange": 0, "rude": 1}


def _sentence(kind: str, rng: np.random.Generator) -> tuple[str, bool]:
    """(text, exclaimed): the text of one sentence of a kind."""
    bang = bool(rng.random() < 0.4)
    end = "!" if bang else rng.choice(["", " ㅎㅎ", " ㅋㅋㅋ", "~"])
    if kind == "question":
        text = rng.choice([f"오늘 {rng.choice(PLACE)}에서 뭐 했어?", f"너 {rng.choice(FOOD)} 좋아해?", "주말에 뭐 할 거야?"])
        return str(text), False
    if kind == "fact":
        text = rng.choice([f"나 오늘 {rng.choice(PLACE)}에서 {rng.choice(ACT)}", f"나는 {rng.choice(FOOD)} 제일 좋아해"])
        return f"{text}{end}", bang
    if kind == "feeling":
        return f"{rng.choice(FEEL)} {rng.choice(['ㅠㅠ', 'ㅜㅜ', '..', ''])}".strip(), False
    if kind == "reply":
        return str(rng.choice(REPLY)), False
    if kind == "strange":
        return " ".join(rng.choice(SALAD, size=4, replace=False)), False
    return str(rng.choice(RUDE)), False


def make_chats(n_docs: int, seed: int, *, noise: float = 0.15, rare: float = 0.04) -> pd.DataFrame:
    """An utterance table of `n_docs` synthetic chats with three noisy labelers and final labels."""
    rng = np.random.default_rng(seed)
    rows = []
    kinds = ["question", "fact", "feeling", "reply", "strange", "rude"]
    for d in range(n_docs):
        speaker = rng.choice(["user", "persona"])
        last = {"user": None, "persona": None}
        n = int(rng.integers(12, 22))
        for _ in range(n):
            if rng.random() < 0.05:
                rows.append({"doc_id": f"d{d:03d}", "person_type": "persona", "is_pause": True, "text": "1시간 후", "kind": "pause"})
                continue
            if rng.random() < 0.7:
                speaker = "persona" if speaker == "user" else "user"
            other = "persona" if speaker == "user" else "user"
            p = np.array([0.22, 0.24, 0.2, 0.3, rare, rare])
            kind = str(rng.choice(kinds, p=p / p.sum()))
            text, bang = _sentence(kind, rng)
            labels = list(TYPES[kind])
            if labels[3] is None:
                labels[3] = int(bang)
            if labels[5] is None:
                prev = rows[-1] if rows and rows[-1]["kind"] != "pause" else None
                partner = prev["kind"] if prev is not None and prev["person_type"] == other else "reply"
                labels[5] = REPLY_EMPATHY[partner]
            row = {"doc_id": f"d{d:03d}", "person_type": speaker, "is_pause": False, "text": text, "kind": kind}
            for k in (1, 2, 3):
                for head, value in zip(OPELA.heads, labels):
                    flip = rng.random() < noise
                    row[labeler_column(k, head.name)] = int(rng.integers(head.n_classes)) if flip else value
            rows.append(row)
            last[speaker] = kind
    df = pd.DataFrame(rows)
    for head in OPELA:
        votes = df[[labeler_column(k, head.name) for k in (1, 2, 3)]].to_numpy()
        final = []
        for v in votes:
            if np.isnan(v).any():
                final.append(np.nan)
                continue
            vals, counts = np.unique(v, return_counts=True)
            final.append(vals[np.argmax(counts)] if counts.max() >= 2 else v[0])
        df[final_column(head.name)] = final
    return normalize_table(df)


def hard_targets(df: pd.DataFrame, schema: Schema = OPELA) -> dict[str, np.ndarray]:
    """One-hot final labels; NaN rows where there is none or for pauses."""
    out = {}
    for head in schema:
        y = df[final_column(head.name)].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
        t = np.full((len(df), head.n_classes), np.nan)
        ok = ~np.isnan(y) & ~df["is_pause"].to_numpy()
        t[ok] = np.eye(head.n_classes)[y[ok].astype(int)]
        out[head.name] = t
    return out


def soft_targets(df: pd.DataFrame, schema: Schema = OPELA) -> dict[str, np.ndarray]:
    """The three labelers' vote shares; NaN rows for pauses."""
    out = {}
    for head in schema:
        votes = df[[labeler_column(k, head.name) for k in (1, 2, 3)]].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
        t = np.stack([(votes == c).sum(axis=1) for c in head.values], axis=1) / 3.0
        t[np.isnan(votes).any(axis=1) | df["is_pause"].to_numpy()] = np.nan
        out[head.name] = t
    return out


def truth(df: pd.DataFrame, head: str) -> tuple[np.ndarray, np.ndarray]:
    """(mask of rows with a final label, their labels)."""
    y = df[final_column(head)].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    mask = ~np.isnan(y) & ~df["is_pause"].to_numpy()
    return mask, y[mask].astype(int)


FAST_GBM = {"n_estimators": 40, "min_child_samples": 5, "svd_components": 16, "n_jobs": 1}


@pytest.fixture(scope="module")
def chats():
    """(train, valid, test) tables of synthetic chats, disjoint conversations."""
    return make_chats(40, seed=1), make_chats(16, seed=2), make_chats(20, seed=3)


@pytest.fixture(scope="module")
def fitted(chats):
    """One fitted model of each kind (context 1), fitted on the training chats' final labels."""
    train, _, _ = chats
    t = hard_targets(train)
    return {
        "majority": build_model("majority", OPELA).fit(train, t),
        "tfidf": build_model("tfidf", OPELA, context_previous=1).fit(train, t),
        "lightgbm": build_model("lightgbm", OPELA, context_previous=1, **FAST_GBM).fit(train, t),
    }


# ---------------------------------------------------------------------------------------------
# the interface: fit, predict_proba, predict, save, load


@pytest.mark.parametrize("kind", ["majority", "tfidf", "lightgbm"])
def test_every_model_predicts_and_round_trips_through_save_and_load(kind, fitted, chats, tmp_path):
    _, _, test = chats
    test = test.set_index(pd.Index([f"r{i}" for i in range(len(test))]))
    model = fitted[kind]
    proba = model.predict_proba(test)
    assert list(proba) == OPELA.head_names
    for head in OPELA:
        assert proba[head.name].shape == (len(test), head.n_classes)
        np.testing.assert_allclose(proba[head.name].sum(axis=1), 1.0, atol=1e-9)
        assert (proba[head.name] >= 0).all()
    pred = model.predict(test)
    assert list(pred.columns) == OPELA.head_names
    assert pred.index.equals(test.index)
    assert all(pred[h].dtype == np.int64 for h in OPELA.head_names)
    for head in OPELA:
        np.testing.assert_array_equal(pred[head.name].to_numpy(), proba[head.name].argmax(axis=1))

    model.save(tmp_path / "m")
    doc = json.loads((tmp_path / "m" / "model.json").read_text(encoding="utf-8"))
    assert doc["kind"] == kind and doc["schema"]["name"] == "opela"
    assert doc["settings"]["context_previous"] == model.context_previous
    assert "scikit-learn" in doc["versions"]
    loaded = load_model(tmp_path / "m")
    assert type(loaded) is type(model)
    again = loaded.predict_proba(test)
    for head in OPELA.head_names:
        np.testing.assert_array_equal(again[head], proba[head])
    pd.testing.assert_frame_equal(loaded.predict(test), pred)


def test_text_models_beat_the_majority_floor_on_held_out_conversations(fitted, chats):
    _, _, test = chats
    scores = {}
    for kind, model in fitted.items():
        pred = model.predict(test)
        scores[kind] = {}
        for head in ("self", "engage", "empathy"):
            mask, y = truth(test, head)
            scores[kind][head] = macro_f1(y, pred[head].to_numpy()[mask], OPELA[head].n_classes)
    for head in ("self", "engage", "empathy"):
        assert scores["tfidf"][head] > scores["majority"][head] + 0.2, (head, scores)
        assert scores["lightgbm"][head] > scores["majority"][head] + 0.2, (head, scores)
    assert scores["tfidf"]["self"] > 0.75 and scores["lightgbm"]["self"] > 0.75


def test_majority_predicts_the_target_mass_prior_and_ignores_pause_rows():
    table = pd.DataFrame({"doc_id": ["a"] * 5, "text": ["가", "나", "다", "1시간 후", "라"], "is_pause": [0, 0, 0, 1, 0]})
    schema = Schema("one", (Head("x", {0: "no", 1: "yes", 2: "maybe"}),))
    targets = {"x": np.array([[1, 0, 0], [0.5, 0.5, 0], [1, 0, 0], [0, 0, 1], [np.nan] * 3])}
    model = MajorityModel(schema).fit(table, targets)
    # the pause row's class 2 is not a target: mass = (2.5, 0.5, 0) over the three target rows
    np.testing.assert_allclose(model.predict_proba(table.head(1))["x"], [[2.5 / 3, 0.5 / 3, 0.0]])
    assert model.predict(table)["x"].tolist() == [0] * 5


def test_single_sentence_and_empty_tables_are_predicted(fitted):
    one = pd.DataFrame({"doc_id": ["new"], "text": ["요즘 너무 외로워 ㅠㅠ"]})
    for kind, model in fitted.items():
        pred = model.predict(one)
        assert pred.shape == (1, 6)
        empty = model.predict_proba(one.iloc[:0])
        assert all(v.shape == (0, OPELA[h].n_classes) for h, v in empty.items())
    assert fitted["tfidf"].predict(one)["self"].iloc[0] == 2
    assert fitted["lightgbm"].predict(one)["self"].iloc[0] == 2


def test_prediction_does_not_depend_on_row_order_or_other_conversations(fitted, chats):
    _, _, test = chats
    model = fitted["lightgbm"]
    full = model.predict_proba(test)["empathy"]
    shuffled = test.sample(frac=1.0, random_state=0)
    again = model.predict_proba(shuffled)["empathy"]
    np.testing.assert_allclose(again, full[shuffled.index.to_numpy()], atol=1e-12)
    one_doc = test[test["doc_id"] == test["doc_id"].iloc[0]]
    np.testing.assert_allclose(model.predict_proba(one_doc)["empathy"], full[: len(one_doc)], atol=1e-12)


def test_unfitted_model_and_bad_saved_folders_are_reported(tmp_path):
    from sklearn.exceptions import NotFittedError

    from psyattrs.errors import InputFileError

    with pytest.raises(NotFittedError, match="not fitted"):
        build_model("tfidf", OPELA).predict(pd.DataFrame({"doc_id": ["a"], "text": ["응"]}))
    with pytest.raises(InputFileError, match="no model.json"):
        load_model(tmp_path)
    (tmp_path / "model.json").write_text('{"kind": "svm", "schema": {}, "settings": {}, "heads": {}}', encoding="utf-8")
    with pytest.raises(InputFileError, match="unknown model kind 'svm'"):
        load_model(tmp_path)


def test_loading_a_model_of_another_kind_names_both(fitted, tmp_path):
    fitted["majority"].save(tmp_path / "maj")
    with pytest.raises(ValueError, match="holds a 'majority' model, not 'tfidf'"):
        TfidfModel.load(tmp_path / "maj")


# ---------------------------------------------------------------------------------------------
# settings and inputs


def test_build_model_names_allowed_kinds_and_settings():
    with pytest.raises(ValueError, match=r"kind 'svm' is not one of \['ensemble', 'lightgbm', 'majority', 'tfidf', 'tfidf_annotators', 'transformer'\]"):
        build_model("svm", OPELA)
    with pytest.raises(ValueError, match=r"no setting\(s\) \['n_estimator'\]; allowed: .*'n_estimators'"):
        build_model("lightgbm", OPELA, n_estimator=10)
    with pytest.raises(ValueError, match=r"class_weight 'balance' is not one of \[None, 'balanced'\]"):
        build_model("tfidf", OPELA, class_weight="balance")
    with pytest.raises(ValueError, match=r"calibration 'isotonic' is not one of \[None, 'temperature', 'platt'\]"):
        build_model("majority", OPELA, calibration="isotonic")
    with pytest.raises(ValueError, match="context_previous must be an integer >= 0, got -1"):
        build_model("tfidf", OPELA, context_previous=-1)
    with pytest.raises(ValueError, match="'C' must be a positive number, got 0"):
        build_model("tfidf", OPELA, C=0)
    with pytest.raises(ValueError, match="words 'morph' is not one of"):
        build_model("tfidf", OPELA, words="morph")
    with pytest.raises(ValueError, match="char_ngrams must satisfy"):
        build_model("lightgbm", OPELA, char_ngrams=[3, 1])
    settings = build_model("lightgbm", OPELA, n_estimators=10, char_ngrams=(2, 3)).settings
    assert settings["n_estimators"] == 10 and settings["char_ngrams"] == [2, 3] and settings["num_leaves"] == 31
    json.dumps(settings)


def test_options_that_need_a_validation_split_say_so(chats):
    train, _, _ = chats
    t = hard_targets(train)
    with pytest.raises(ValueError, match="calibration need a validation split"):
        build_model("majority", OPELA, calibration="temperature").fit(train, t)
    with pytest.raises(ValueError, match="calibration and tune_thresholds need a validation split"):
        build_model("tfidf", OPELA, calibration="platt", tune_thresholds=True).fit(train, t)


def test_bad_targets_name_the_head_and_rows(chats):
    train, _, _ = chats
    t = hard_targets(train)
    model = build_model("majority", OPELA)
    with pytest.raises(ValueError, match=r"missing head\(s\) \['empathy'\]"):
        model.fit(train, {h: v for h, v in t.items() if h != "empathy"})
    with pytest.raises(ValueError, match=r"targets\['self'\] has shape \(\d+, 2\); expected"):
        model.fit(train, {**t, "self": t["self"][:, :2]})
    bad = t["engage"].copy()
    bad[4] = [0.7, 0.7]
    with pytest.raises(ValueError, match=r"targets\['engage'\]: rows \[4\] do not sum to 1"):
        model.fit(train, {**t, "engage": bad})
    bad[4] = [np.nan, 1.0]
    with pytest.raises(ValueError, match=r"rows \[4\] are partly NaN"):
        model.fit(train, {**t, "engage": bad})
    with pytest.raises(ValueError, match=r"no training row has a target for head\(s\) \['active'\]"):
        model.fit(train, {**t, "active": np.full_like(t["active"], np.nan)})
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['text'\]"):
        model.fit(train.drop(columns="text"), t)


def test_pause_rows_are_never_targets():
    table = pd.DataFrame({"doc_id": ["a", "a"], "text": ["응", "1시간 후"], "is_pause": [False, True]})
    checked = check_targets(OPELA, table, {h.name: np.eye(h.n_classes)[[0, 1]] for h in OPELA})
    for head in OPELA.head_names:
        assert not np.isnan(checked[head][0]).any() and np.isnan(checked[head][1]).all()


# ---------------------------------------------------------------------------------------------
# soft targets


def test_soft_target_expansion_is_exact():
    t = np.array([[0.5, 0.5, 0.0], [np.nan] * 3, [0.0, 0.0, 1.0], [1 / 3, 1 / 3, 1 / 3]])
    rows, labels, weights = expand_soft_targets(t)
    assert rows.tolist() == [0, 0, 2, 3, 3, 3]
    assert labels.tolist() == [0, 1, 2, 0, 1, 2]
    np.testing.assert_allclose(weights, [0.5, 0.5, 1.0, 1 / 3, 1 / 3, 1 / 3])
    # per row, the weights give back the distribution
    np.testing.assert_allclose(np.bincount(rows * 3 + labels, weights, minlength=12).reshape(4, 3)[[0, 2, 3]], t[[0, 2, 3]])
    # balanced: total mass 3 over 3 classes; class masses 0.5+1/3, 0.5+1/3, 1+1/3
    np.testing.assert_allclose(class_weight_vector(t, "balanced"), 3 / (3 * np.array([5 / 6, 5 / 6, 4 / 3])))
    np.testing.assert_allclose(class_weight_vector(t, None), [1, 1, 1])


def _thirds_and_copies(df: pd.DataFrame, schema: Schema, rng) -> tuple[dict, pd.DataFrame, dict]:
    """Soft targets in thirds, and the same data as physical copies (one row per third of mass)."""
    soft = {}
    for head in schema:
        counts = rng.multinomial(3, np.ones(head.n_classes) / head.n_classes, size=len(df))
        soft[head.name] = counts / 3.0
    reps, labels = [], {h.name: [] for h in schema}
    for i in range(len(df)):
        for copy in range(3):
            reps.append(i)
            for head in schema:
                cls = np.repeat(np.arange(head.n_classes), (soft[head.name][i] * 3).round().astype(int))[copy]
                labels[head.name].append(np.eye(head.n_classes)[cls])
    copies = df.iloc[reps].reset_index(drop=True)
    copies["doc_id"] = [f"c{j}" for j in range(len(copies))]  # each copy its own conversation
    return soft, copies, {h: np.array(v) for h, v in labels.items()}


def test_tfidf_fitted_on_soft_weights_equals_fitting_the_expanded_copies(chats):
    train, _, test = chats
    rng = np.random.default_rng(5)
    schema = Schema("two", (Head("a", {0: "x", 1: "y"}), Head("b", {0: "x", 1: "y", 2: "z"})))
    small = train[~train["is_pause"]].head(120).reset_index(drop=True)
    soft, copies, onehot = _thirds_and_copies(small, schema, rng)
    exact = {"min_df": 1, "use_idf": False, "max_iter": 5000, "words": "whitespace"}
    weighted = TfidfModel(schema, C=1.0, **exact).fit(small, soft)
    # three copies per row carry total weight 3 where the soft row carries 1: same optimum at C / 3
    copied = TfidfModel(schema, C=1.0 / 3, **exact).fit(copies, onehot)
    for head in ("a", "b"):
        np.testing.assert_allclose(weighted.heads_[head].estimator_.coef_, copied.heads_[head].estimator_.coef_, atol=2e-4)
        np.testing.assert_allclose(weighted.predict_proba(test)[head], copied.predict_proba(test)[head], atol=1e-4)


def test_lightgbm_head_fitted_on_soft_weights_equals_fitting_the_expanded_copies():
    rng = np.random.default_rng(11)
    X = rng.integers(0, 20, size=(150, 4)).astype(float)
    counts = rng.multinomial(3, [0.5, 0.3, 0.2], size=150)
    soft = counts / 3.0
    reps = np.repeat(np.arange(150), 3)
    y = np.concatenate([np.repeat(np.arange(3), c) for c in counts])
    params = {"num_leaves": 7, "learning_rate": 0.1, "min_data_in_leaf": 1, "min_data_in_bin": 1, "lambda_l2": 0.0,
              "min_sum_hessian_in_leaf": 0.0, "num_threads": 1, "deterministic": True, "force_row_wise": True, "seed": 0}
    weighted = GBMHead(3, params=params, num_boost_round=15).fit(X, soft)
    copied = GBMHead(3, params=params, num_boost_round=15).fit(X[reps], np.eye(3)[y])
    np.testing.assert_allclose(weighted.predict_proba(X), copied.predict_proba(X), atol=1e-6)
    # and a soft target really differs from its argmax as a hard target
    hard = GBMHead(3, params=params, num_boost_round=15).fit(X, np.eye(3)[soft.argmax(axis=1)])
    assert np.abs(hard.predict_proba(X) - weighted.predict_proba(X)).max() > 0.05


def test_soft_targets_give_lower_cross_entropy_against_the_labelers_than_final_labels(chats):
    train, _, test = chats
    rows = ~test["is_pause"].to_numpy()
    soft_test = soft_targets(test)
    ce = {}
    for name, targets in (("hard", hard_targets(train)), ("soft", soft_targets(train))):
        model = build_model("tfidf", OPELA, C=4.0).fit(train, targets)
        proba = model.predict_proba(test)
        ce[name] = np.mean([cross_entropy(proba[h][rows], soft_test[h][rows]) for h in ("self", "engage", "active")])
    assert ce["soft"] < ce["hard"] - 0.02, ce


# ---------------------------------------------------------------------------------------------
# calibration and thresholds


def test_temperature_scaling_recovers_the_temperature_of_overconfident_probabilities():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(4000, 4)) * 1.5
    p_true = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    y = np.array([rng.choice(4, p=p) for p in p_true])
    over = np.exp(3 * z) / np.exp(3 * z).sum(axis=1, keepdims=True)  # three times too sharp
    cal = TemperatureScaling().fit(over, np.eye(4)[y])
    assert 2.6 < cal.temperature_ < 3.4
    assert cross_entropy(cal.transform(over), np.eye(4)[y]) < cross_entropy(over, np.eye(4)[y]) - 0.2
    again = calibrator_from_dict(json.loads(json.dumps(cal.to_dict())))
    np.testing.assert_array_equal(again.transform(over), cal.transform(over))


def test_platt_scaling_fixes_a_shifted_binary_score_and_round_trips():
    rng = np.random.default_rng(1)
    s = rng.normal(size=5000)
    y = (rng.random(5000) < 1 / (1 + np.exp(-(2 * s - 1)))).astype(int)
    wrong = 1 / (1 + np.exp(-s))  # slope 1 and no intercept where the truth has 2 and -1
    proba = np.column_stack([1 - wrong, wrong])
    cal = PlattScaling().fit(proba, np.eye(2)[y])
    assert 1.7 < cal.slope_[1] < 2.3 and -1.3 < cal.intercept_[1] < -0.7
    again = calibrator_from_dict(json.loads(json.dumps(cal.to_dict())))
    np.testing.assert_allclose(again.transform(proba), cal.transform(proba))


@pytest.mark.parametrize("method", ["temperature", "platt"])
def test_calibration_on_valid_lowers_held_out_nll(method):
    # noisier labelers (30% random labels): a nearly unregularised model is overconfident
    train, valid, test = (make_chats(n, seed, noise=0.3) for n, seed in ((40, 1), (16, 2), (20, 3)))
    t = hard_targets(train)
    raw = build_model("tfidf", OPELA, C=200.0).fit(train, t)
    cal = build_model("tfidf", OPELA, C=200.0, calibration=method).fit(train, t, valid=(valid, hard_targets(valid)))
    test_t = hard_targets(test)
    p_raw, p_cal = raw.predict_proba(test), cal.predict_proba(test)
    nll = {}
    for name, p in (("raw", p_raw), ("cal", p_cal)):
        nll[name] = np.mean(
            [cross_entropy(p[h][~np.isnan(test_t[h][:, 0])], test_t[h][~np.isnan(test_t[h][:, 0])]) for h in OPELA.head_names]
        )
    assert nll["cal"] < nll["raw"] - 0.05, nll
    assert set(cal.calibrators_) == set(OPELA.head_names)


def test_binary_threshold_maximises_macro_f1():
    p1 = np.array([0.05, 0.1, 0.2, 0.3, 0.35, 0.6, 0.8, 0.9])
    y = np.array([0, 0, 0, 1, 1, 1, 1, 1])
    t = tune_binary_threshold(p1, y)
    assert 0.2 < t <= 0.3
    assert macro_f1(y, (p1 >= t).astype(int), 2) == 1.0
    assert tune_binary_threshold(p1, np.zeros(8, int)) == 0.5


def _rare_splits():
    """(train, valid, test) of a binary head "odd" with a 6% class whose only cue is weak:
    "뭔가 이상해" is odd 4 times in 10, so P(odd | text) < 0.5 for every text."""
    rng = np.random.default_rng(3)
    n_docs, per_doc = 120, 10
    n = n_docs * per_doc
    rare = rng.random(n) < 0.06
    odd_text = rng.choice(["뭔가 이상해", "그냥 그래"], n, p=[0.5, 0.5])
    fine_text = rng.choice(["뭔가 이상해", "그냥 그래", "좋아 좋아", "그렇지"], n, p=[0.05, 0.35, 0.3, 0.3])
    table = pd.DataFrame({"doc_id": np.repeat([f"d{i}" for i in range(n_docs)], per_doc), "text": np.where(rare, odd_text, fine_text)})
    targets = np.eye(2)[(~rare).astype(int)]
    cuts = [(0, 600), (600, 900), (900, n)]
    return [(table.iloc[a:b].reset_index(drop=True), {"odd": targets[a:b]}) for a, b in cuts]


RARE = Schema("rare", (Head("odd", {0: "odd", 1: "fine"}),))


def test_tuned_thresholds_change_decisions_on_a_rare_class():
    train, valid, (test_table, test_t) = _rare_splits()
    plain = build_model("tfidf", RARE, words="none", min_df=1).fit(*train)
    tuned = build_model("tfidf", RARE, words="none", min_df=1, tune_thresholds=True).fit(*train, valid=valid)
    y = test_t["odd"].argmax(axis=1)
    p_plain, p_tuned = plain.predict(test_table)["odd"].to_numpy(), tuned.predict(test_table)["odd"].to_numpy()
    assert (p_plain == 0).sum() == 0  # argmax never says "odd"
    assert (p_tuned == 0).sum() > 0 and 0.5 < tuned.thresholds_["odd"] < 1
    assert macro_f1(y, p_tuned, 2) > macro_f1(y, p_plain, 2) + 0.1


@pytest.mark.parametrize("kind,extra", [("tfidf", {}), ("lightgbm", {**FAST_GBM, "stack": False})])
def test_balanced_class_weights_make_a_model_predict_the_rare_class(kind, extra):
    train, _, (test_table, test_t) = _rare_splits()
    y = test_t["odd"].argmax(axis=1)
    plain = build_model(kind, RARE, words="none", min_df=1, **extra).fit(*train).predict(test_table)["odd"].to_numpy()
    balanced = build_model(kind, RARE, words="none", min_df=1, class_weight="balanced", **extra).fit(*train)
    pred = balanced.predict(test_table)["odd"].to_numpy()
    recall = lambda p: ((p == 0) & (y == 0)).sum() / (y == 0).sum()
    assert (pred == 0).sum() > 3 * max(1, (plain == 0).sum())
    assert recall(pred) > recall(plain) + 0.3, (recall(pred), recall(plain))


def test_multiclass_offsets_are_tuned_and_saved(chats, tmp_path):
    train, valid, test = chats
    model = build_model("tfidf", OPELA, tune_thresholds=True, calibration="temperature").fit(
        train, hard_targets(train), valid=(valid, hard_targets(valid))
    )
    assert set(model.thresholds_) == {"strange", "uneasy", "engage", "active"}
    assert set(model.offsets_) == {"self", "empathy"} and model.offsets_["self"][0] == 0
    model.save(tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    assert loaded.thresholds_ == model.thresholds_
    pd.testing.assert_frame_equal(loaded.predict(test), model.predict(test))


# ---------------------------------------------------------------------------------------------
# context and stacking


def _empathy_f1(model, test) -> float:
    mask, y = truth(test, "empathy")
    reply = (test["text"].isin(REPLY)).to_numpy()[mask]
    return macro_f1(y[reply], model.predict(test)["empathy"].to_numpy()[mask][reply], 5)


@pytest.mark.parametrize("kind,k,extra", [("tfidf", 1, {}), ("lightgbm", 2, FAST_GBM)])
def test_context_lets_a_model_read_the_partners_previous_sentence(kind, k, extra, chats):
    train, _, test = chats
    t = hard_targets(train)
    without = build_model(kind, OPELA, context_previous=0, **extra).fit(train, t)
    with_ctx = build_model(kind, OPELA, context_previous=k, **extra).fit(train, t)
    # a neutral reply's empathy is only in what the partner said before it
    f_without, f_with = _empathy_f1(without, test), _empathy_f1(with_ctx, test)
    assert f_with > f_without + 0.2, (f_without, f_with)


def test_group_folds_keep_each_conversation_in_one_fold():
    groups = np.repeat(["a", "b", "c", "d", "e", "f", "g"], [3, 1, 4, 2, 2, 5, 1])
    folds = group_folds(groups, 3, seed=4)
    assert set(folds) == {0, 1, 2}
    for g in np.unique(groups):
        assert len(set(folds[groups == g])) == 1
    assert np.bincount([folds[groups == g][0] for g in np.unique(groups)]).tolist() == [3, 2, 2]
    with pytest.raises(ValueError, match="at least 2 conversations"):
        group_folds(["a", "a"], 3)


def test_out_of_fold_never_fits_on_the_predicted_conversation():
    groups = np.repeat([f"d{i}" for i in range(9)], 4)
    folds = group_folds(groups, 3)
    calls = []

    def fit_predict(train, held):
        calls.append((set(groups[train]), set(groups[held])))
        assert not set(groups[train]) & set(groups[held])
        return {"h": np.column_stack([held, held]).astype(float)}

    out = out_of_fold(folds, fit_predict)["h"]
    assert len(calls) == 3
    assert set().union(*(held for _, held in calls)) == set(groups)
    np.testing.assert_array_equal(out[:, 0], np.arange(len(groups)))  # every row predicted once


def test_stacked_first_stage_features_are_out_of_fold():
    # every conversation has its own words and its own label: a first stage that saw a
    # conversation's labels would predict them, one that did not can only guess the prior
    rng = np.random.default_rng(7)
    n_docs = 30
    label = rng.integers(0, 2, n_docs)
    rows = []
    for d in range(n_docs):
        for j in range(6):
            rows.append({"doc_id": f"d{d}", "text": f"낱말{d}가 {['하나', '둘', '셋'][j % 3]}"})
    table = pd.DataFrame(rows)
    schema = Schema("leak", (Head("x", {0: "no", 1: "yes"}),))
    targets = {"x": np.eye(2)[np.repeat(label, 6)]}
    model = LightGBMModel(schema, words="whitespace", min_df=1, **{**FAST_GBM, "svd_components": 4})
    prepared = prepare_table(table)
    X = make_featurizer("ko", model.params).fit(prepared["text"]).transform(prepared["text"])
    oof = model._stage1_oof(X, prepared, targets)["x"][:, 1]
    in_sample = model._stage1_head(2).fit(X, targets["x"]).predict_proba(X)[:, 1]
    y = np.repeat(label, 6)
    # in-sample the first stage separates the conversations' labels; out of fold it cannot
    assert in_sample[y == 1].mean() - in_sample[y == 0].mean() > 0.3
    assert abs(oof[y == 1].mean() - oof[y == 0].mean()) < 0.15


def test_lightgbm_without_stacking_has_no_stacked_features(chats, tmp_path):
    train, _, test = chats
    model = build_model("lightgbm", OPELA, stack=False, **FAST_GBM).fit(train, hard_targets(train))
    assert model.stage1_ is None and not any(n.startswith("stage1_") for n in model.feature_names_)
    imp = model.feature_importance("self")
    assert imp.index[0] in model.feature_names_ and imp.iloc[0] > 0
    model.save(tmp_path / "m")
    pd.testing.assert_frame_equal(load_model(tmp_path / "m").predict(test), model.predict(test))


def test_lightgbm_feature_names_describe_context_and_stacking(fitted):
    names = fitted["lightgbm"].feature_names_
    for name in ("svd0", "since_pause", "prev1_same_speaker", "prev1_svd0", "stage1_self_2", "prev1_stage1_self_2", "laugh_run"):
        assert name in names
    assert len(names) == len(set(names))


def test_models_work_for_english_and_chinese_schemas():
    for language, texts in (
        ("en", ["i feel so lonely", "what did you eat?", "oh i see", "i went to school"]),
        ("zh", ["我 很 难过", "你 吃 了 什么 ?", "哦 我 知道 了", "我 去 学校 了"]),
    ):
        schema = Schema("s", (Head("feel", {0: "no", 1: "yes"}),), language=language)
        table = pd.DataFrame({"doc_id": np.repeat(["a", "b", "c", "d", "e", "f"], 4), "text": texts * 6})
        targets = {"feel": np.eye(2)[[1, 0, 0, 0] * 6]}
        for kind, extra in (("tfidf", {}), ("lightgbm", {**FAST_GBM, "min_child_samples": 2, "svd_components": 3})):
            model = build_model(kind, schema, context_previous=1, min_df=1, **extra).fit(table, targets)
            assert model.predict(table.head(4))["feel"].tolist() == [1, 0, 0, 0], (language, kind)


def test_models_pickle(fitted, chats):
    _, _, test = chats
    for model in fitted.values():
        again = pickle.loads(pickle.dumps(model))
        np.testing.assert_array_equal(again.predict_proba(test)["self"], model.predict_proba(test)["self"])


def test_a_validation_split_without_targets_for_a_head_is_an_error(chats):
    train, valid, _ = chats
    vt = hard_targets(valid)
    vt["uneasy"] = np.full_like(vt["uneasy"], np.nan)
    with pytest.raises(ValueError, match="validation split has no target row for head 'uneasy'"):
        build_model("majority", OPELA, tune_thresholds=True).fit(train, hard_targets(train), valid=(valid, vt))


def test_importing_the_models_does_not_load_heavy_backends():
    code = (
        "import sys, psyattrs.models.gbm, psyattrs.models.tfidf, psyattrs.features.text; "
        "print(sorted(m for m in ('lightgbm', 'kiwipiepy', 'jieba', 'mlflow') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_models_beat_the_floor_on_the_project_synthetic_corpus():
    from psyattrs.synth import synthesize

    df = synthesize(24, seed=3, min_turns=10, max_turns=30).utterances
    docs = df["doc_id"].unique()
    train = df[df["doc_id"].isin(docs[:18])].reset_index(drop=True)
    test = df[df["doc_id"].isin(docs[18:])].reset_index(drop=True)
    t = hard_targets(train)
    scores = {}
    for kind, extra in (("majority", {}), ("tfidf", {}), ("lightgbm", FAST_GBM)):
        pred = build_model(kind, OPELA, context_previous=1, **extra).fit(train, t).predict(test)
        scores[kind] = {
            h: macro_f1(truth(test, h)[1], pred[h].to_numpy()[truth(test, h)[0]], OPELA[h].n_classes)
            for h in ("engage", "active", "self", "empathy")
        }
    for kind in ("tfidf", "lightgbm"):
        for head, floor in scores["majority"].items():
            assert scores[kind][head] > floor + 0.1, (kind, head, scores)


@pytest.mark.parametrize("kind", ["tfidf", "lightgbm"])
def test_a_model_saved_before_the_analysis_setting_keeps_sentence_analysis(kind, fitted, chats, tmp_path):
    import joblib

    _, _, test = chats
    model = fitted[kind]
    assert model.params["analysis"] == "word" and model.featurizer_.analysis == "word"
    model.save(tmp_path / "m")
    doc = json.loads((tmp_path / "m" / "model.json").read_text(encoding="utf-8"))
    del doc["settings"]["analysis"]  # as written before the setting existed
    (tmp_path / "m" / "model.json").write_text(json.dumps(doc), encoding="utf-8")
    state_file = next(p for p in (tmp_path / "m").glob("*.joblib"))
    state = joblib.load(state_file)
    del state["featurizer"].__dict__["analysis"]
    joblib.dump(state, state_file)
    loaded = load_model(tmp_path / "m")
    assert loaded.featurizer_.analysis == "sentence" and loaded.params["analysis"] == "sentence"
    whole = build_model(kind, OPELA, context_previous=1, analysis="sentence",
                        **(FAST_GBM if kind == "lightgbm" else {}))
    assert whole.params["analysis"] == "sentence"
    proba = loaded.predict_proba(test)
    assert all(np.isfinite(proba[h]).all() for h in OPELA.head_names)
