"""Label aggregation: every branch of the OPELA rule on hand-computed cases, majority, Dawid-Skene."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from psyattrs.labels.aggregate import METHODS, DawidSkene, MajorityVote, OpelaResolver, make_aggregator
from psyattrs.labels.resolve import compare_with_final, long_labels, rated_matrix, resolve_final_labels
from psyattrs.schema import Head, Schema


def long(items: dict[str, dict[str, int]]) -> pd.DataFrame:
    """{task: {worker: label}} -> long table."""
    rows = [(t, w, y) for t, ratings in items.items() for w, y in ratings.items()]
    return pd.DataFrame(rows, columns=["task", "worker", "label"])


# Six (a) items of a 3-class head. By hand (rows = class, columns = labelers a, b, c):
#   R = [[1, 1, 0], [1/2, 1, 1], [2/3, 2/3, 2/3]]
#   U = [[2/3, 0, 1], [0, 1/3, 1/3], [0, 0, 0]]
#   share in the majority: a 4/6, b 5/6, c 4/6
A_ITEMS = {
    "T1": {"a": 0, "b": 0, "c": 1},
    "T2": {"a": 1, "b": 1, "c": 1},
    "T3": {"a": 2, "b": 2, "c": 0},
    "T4": {"a": 0, "b": 1, "c": 1},
    "T5": {"a": 2, "b": 1, "c": 2},
    "T6": {"a": 0, "b": 2, "c": 2},
}
# B1: scores R*U: a 1*2/3, b 1*1/3, c 2/3*0 -> a's class 0 (score).
#     weighted R*(1-U): a 1/3, b 2/3, c 2/3 -> tie b/c -> b has the best share -> class 1.
# B2: scores R*U: a 1/2*0, b 2/3*0, c 0*1: all 0 -> tie -> b's class 2 (labeler_share).
#     weighted: a 1/2, b 2/3, c 0 -> b's class 2 (score).
B_ITEMS = {
    "B1": {"a": 0, "b": 1, "c": 2},
    "B2": {"a": 1, "b": 2, "c": 0},
}


@pytest.fixture
def opela_labels() -> pd.DataFrame:
    return long({**A_ITEMS, **B_ITEMS})


def test_opela_reliabilities_match_the_hand_computation(opela_labels):
    res = OpelaResolver().fit(opela_labels, 3)
    expected_r = [[1, 1, 0], [1 / 2, 1, 1], [2 / 3, 2 / 3, 2 / 3]]
    expected_u = [[2 / 3, 0, 1], [0, 1 / 3, 1 / 3], [0, 0, 0]]
    assert list(res.R_.columns) == ["a", "b", "c"] and list(res.R_.index) == [0, 1, 2]
    np.testing.assert_allclose(res.R_.to_numpy(), expected_r)
    np.testing.assert_allclose(res.U_.to_numpy(), expected_u)
    np.testing.assert_allclose(res.majority_share_.to_numpy(), [4 / 6, 5 / 6, 4 / 6])
    assert res.n_majority_items_ == 6


def test_opela_literal_reading_every_branch(opela_labels):
    res = OpelaResolver().fit(opela_labels, 3)
    assert res.labels_.to_dict() == {"T1": 0, "T2": 1, "T3": 2, "T4": 1, "T5": 2, "T6": 2, "B1": 0, "B2": 2}
    assert res.branches_["T1":"T6"].eq("majority").all()
    assert res.branches_["B1"] == "score"
    assert res.branches_["B2"] == "labeler_share"
    # probabilities are the one-hot of the decision
    assert res.probas_.loc["B1"].tolist() == [1.0, 0.0, 0.0]
    assert np.allclose(res.probas_.sum(axis=1), 1.0)


def test_opela_weighted_differs_where_it_should(opela_labels):
    literal = OpelaResolver(weighted=False).fit_predict(opela_labels, 3)
    weighted = OpelaResolver(weighted=True).fit(opela_labels, 3)
    assert weighted.labels_["B1"] == 1 and weighted.branches_["B1"] == "labeler_share"
    assert weighted.labels_["B2"] == 2 and weighted.branches_["B2"] == "score"
    # the (a) items never depend on the reading
    assert weighted.labels_.drop(["B1", "B2"]).equals(literal.drop(["B1", "B2"]))
    assert literal["B1"] != weighted.labels_["B1"]


def symmetric_labels(n_b: int) -> pd.DataFrame:
    """Every labeler always in the majority (shares tie), so all-different items end up random."""
    items = {f"A{c}": {"a": c, "b": c, "c": c} for c in range(5)}
    rng = np.random.default_rng(3)
    for i in range(n_b):
        a, b, c = rng.choice(5, size=3, replace=False)
        items[f"B{i}"] = {"a": int(a), "b": int(b), "c": int(c)}
    return long(items)


def test_opela_random_fallback_is_seeded_and_picks_one_of_the_three():
    labels = symmetric_labels(40)
    first = OpelaResolver(seed=11).fit(labels, 5)
    again = OpelaResolver(seed=11).fit(labels, 5)
    other = OpelaResolver(seed=12).fit(labels, 5)
    b_items = [t for t in first.labels_.index if t.startswith("B")]
    assert first.branches_[b_items].eq("random").all()
    assert first.labels_.equals(again.labels_)
    assert not first.labels_[b_items].equals(other.labels_[b_items])
    given = labels.groupby("task")["label"].apply(set)
    assert all(first.labels_[t] in given[t] for t in b_items)
    # each of the three labelers' classes gets picked some of the time
    picked = [labels[(labels.task == t) & (labels.label == first.labels_[t])].worker.item() for t in b_items]
    assert set(picked) == {"a", "b", "c"}


def test_opela_binary_head_is_majority():
    labels = long({"x": {"a": 0, "b": 0, "c": 1}, "y": {"a": 1, "b": 0, "c": 1}, "z": {"a": 1, "b": 1, "c": 1}})
    res = OpelaResolver().fit(labels, 2)
    assert res.labels_.to_dict() == {"x": 0, "y": 1, "z": 1}
    assert res.branches_.eq("majority").all()
    assert res.R_ is None and res.U_ is None and res.majority_share_ is None


def test_opela_items_with_other_than_three_labels(opela_labels):
    extra = long(
        {
            "single": {"a": 2},
            "pair_tie": {"a": 0, "b": 1},
            "four_major": {"a": 1, "b": 1, "c": 1, "d": 0},
            "four_tie": {"a": 0, "b": 0, "c": 2, "d": 2},
        }
    )
    labels = pd.concat([opela_labels, extra], ignore_index=True)
    res = OpelaResolver(seed=5).fit(labels, 3)
    assert res.labels_["single"] == 2 and res.branches_["single"] == "majority"
    assert res.labels_["four_major"] == 1 and res.branches_["four_major"] == "majority"
    assert res.labels_["pair_tie"] in (0, 1) and res.branches_["pair_tie"] == "random"
    assert res.labels_["four_tie"] in (0, 2) and res.branches_["four_tie"] == "random"
    # R and U are estimated on the exactly-three items only: unchanged by the extra items
    np.testing.assert_allclose(res.R_[["a", "b", "c"]].to_numpy(), OpelaResolver().fit(opela_labels, 3).R_.to_numpy())
    assert np.isnan(res.R_["d"]).all()
    # the random tie-break is seeded: the same seed reproduces it, other seeds reach both classes
    draws = {OpelaResolver(seed=s).fit(labels, 3).labels_["pair_tie"] for s in range(20)}
    assert draws == {0, 1}
    assert OpelaResolver(seed=5).fit_predict(labels, 3).equals(res.labels_)


def test_opela_unestimable_scores_never_win():
    # class 2 never occurs in (a) items: R[2, *] is 0/0; b's R*U is the only defined score (0)
    labels = long({"T1": {"a": 0, "b": 0, "c": 1}, "T2": {"a": 1, "b": 1, "c": 0}, "B": {"a": 2, "b": 1, "c": 0}})
    res = OpelaResolver().fit(labels, 3)
    assert np.isnan(res.R_.loc[2]).all()
    # scores: a NaN, b R[1,b]*U[1,b] = 1*0 = 0, c R[0,c]*U[0,c] = 0*1 = 0 -> tie b/c -> shares a 1, b 1, c 0
    # -> the best share is tied (a, b) -> random among the three classes
    assert res.branches_["B"] == "random"


def test_majority_vote_ties_are_seeded():
    labels = long({"t": {"a": 0, "b": 1}, "u": {"a": 2, "b": 2, "c": 0}})
    mv = MajorityVote(seed=1).fit(labels, 3)
    assert mv.labels_["u"] == 2 and not mv.ties_["u"] and mv.ties_["t"]
    np.testing.assert_allclose(mv.probas_.loc["u"], [1 / 3, 0, 2 / 3])
    np.testing.assert_allclose(mv.probas_.loc["t"], [0.5, 0.5, 0])
    assert MajorityVote(seed=1).fit_predict(labels, 3).equals(mv.labels_)
    assert {MajorityVote(seed=s).fit_predict(labels, 3)["t"] for s in range(20)} == {0, 1}


def simulate(n_tasks: int, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """Two good labelers (90%), two guessers, one who systematically answers c+1 (90% of the time)."""
    rng = np.random.default_rng(seed)
    k = 3
    truth = rng.choice(k, size=n_tasks, p=[0.5, 0.3, 0.2])
    rows = []
    for t, y in enumerate(truth):
        for w, kind in enumerate(["good", "good", "guess", "guess", "shift"]):
            if kind == "good":
                label = y if rng.random() < 0.9 else rng.choice([c for c in range(k) if c != y])
            elif kind == "guess":
                label = rng.integers(k)
            else:
                label = (y + 1) % k if rng.random() < 0.9 else y
            rows.append((t, f"w{w}", int(label)))
    return pd.DataFrame(rows, columns=["task", "worker", "label"]), truth


def test_dawid_skene_recovers_a_systematically_wrong_labeler():
    labels, truth = simulate(600)
    ds = DawidSkene().fit(labels, 3)
    mv_acc = (MajorityVote().fit_predict(labels, 3).to_numpy() == truth).mean()
    ds_acc = (ds.labels_.to_numpy() == truth).mean()
    assert ds_acc > 0.97 and ds_acc > mv_acc + 0.05
    shift = ds.errors_.loc["w4"].to_numpy()  # rows: true class, columns: given class
    assert all(shift[c, (c + 1) % 3] > 0.8 for c in range(3))
    good = ds.errors_.loc["w0"].to_numpy()
    assert np.diag(good).min() > 0.8
    np.testing.assert_allclose(ds.priors_.to_numpy(), [0.5, 0.3, 0.2], atol=0.06)
    np.testing.assert_allclose(ds.probas_.sum(axis=1), 1.0)
    np.testing.assert_allclose(ds.errors_.sum(axis=1), 1.0)
    assert 1 < ds.n_iter_ < 100 and ds.loss_history_[-1] <= ds.loss_history_[0]


@pytest.mark.parametrize(
    ("frame", "n_classes", "error", "match"),
    [
        (pd.DataFrame({"task": [1], "label": [0]}), 2, ValueError, r"no column\(s\) \['worker'\]"),
        (pd.DataFrame({"task": [1, 2], "worker": ["a", "a"], "label": [0, 3]}), 3, ValueError, r"value\(s\) \['3'\].*\[0, 1, 2\]"),
        (pd.DataFrame({"task": [1, 2], "worker": ["a", "a"], "label": [0, None]}), 3, ValueError, "missing labels in rows \\[1\\]"),
        (pd.DataFrame({"task": [1, 1], "worker": ["a", "a"], "label": [0, 1]}), 2, ValueError, r"\(1, 'a'\)"),
        (pd.DataFrame({"task": [1], "worker": ["a"], "label": [0]}), 1, ValueError, "n_classes must be an integer >= 2"),
        (pd.DataFrame({"task": [], "worker": [], "label": []}), 2, ValueError, "empty"),
        ([(1, "a", 0)], 2, TypeError, "pandas DataFrame"),
    ],
)
def test_bad_long_tables_are_named(frame, n_classes, error, match):
    for agg in (MajorityVote(), OpelaResolver(), DawidSkene()):
        with pytest.raises(error, match=match):
            agg.fit(frame, n_classes)


SCHEMA = Schema(
    name="test",
    heads=(Head("abuse", {0: "no", 1: "yes"}), Head("level", {0: "none", 1: "some", 2: "much"}, ordinal=True)),
)


def utterances() -> pd.DataFrame:
    """The OPELA fixture above as an utterance table, plus a context-only row and a pause."""
    items = {**A_ITEMS, **B_ITEMS}
    level = {k: [items[t][w] for t in items] for k, w in ((1, "a"), (2, "b"), (3, "c"))}
    n = len(items)
    df = pd.DataFrame(
        {
            "doc_id": ["d1"] * n,
            "sent_id": [f"d1_{i + 1}" for i in range(n)],
            "text": [f"문장 {i} 이에요 ㅎㅎ" for i in range(n)],
            "is_pause": [False] * n,
            "labeler1_abuse": [0, 0, 1, 1, 0, 0, 1, 1],
            "labeler2_abuse": [0, 1, 1, 1, 0, 1, 0, 1],
            "labeler3_abuse": [1, 1, 1, 0, 0, 0, 1, 0],
            **{f"labeler{k}_level": v for k, v in level.items()},
        }
    )
    context = pd.DataFrame({"doc_id": ["d1"], "sent_id": ["d1_9"], "text": ["맥락만 있는 줄"], "is_pause": [False]})
    df = pd.concat([df, context], ignore_index=True)
    for col in df.columns:
        if col.startswith("labeler"):
            df[col] = df[col].astype("Int64")
    df["labeler_level"] = pd.array([0, 1, 2, 1, 2, 2, 1, 2, pd.NA], dtype="Int64")  # released finals
    df["note"] = "그대로"
    return df


def test_resolve_final_labels_fills_only_the_final_columns():
    df = utterances()
    out = resolve_final_labels(df, SCHEMA, method="opela")
    assert list(out.columns) == list(df.columns) + ["labeler_abuse"]
    assert out["labeler_level"].dtype == "Int64" and out["labeler_abuse"].dtype == "Int64"
    assert out["labeler_level"].tolist() == [0, 1, 2, 1, 2, 2, 0, 2, pd.NA]
    assert out["labeler_abuse"].tolist() == [0, 1, 1, 1, 0, 0, 1, 1, pd.NA]
    unchanged = [c for c in df.columns if c != "labeler_level"]
    pd.testing.assert_frame_equal(out[unchanged], df[unchanged])
    assert df["labeler_level"].tolist()[6] == 1  # the input is not modified
    weighted = resolve_final_labels(df, SCHEMA, method="opela-weighted")
    assert weighted["labeler_level"].tolist()[6:8] == [1, 2]


def test_resolve_final_labels_with_any_number_of_labelers():
    df = pd.DataFrame(
        {
            "doc_id": ["d"] * 4,
            "text": ["가", "나", "다", "라"],
            "labeler1_abuse": pd.array([1, pd.NA, 0, pd.NA], dtype="Int64"),
            "labeler4_abuse": pd.array([1, 1, 0, pd.NA], dtype="Int64"),
            "labeler7_abuse": pd.array([0, pd.NA, 0, pd.NA], dtype="Int64"),
        }
    )
    schema = Schema(name="one", heads=(SCHEMA["abuse"],))
    for method in METHODS:
        out = resolve_final_labels(df, schema, method=method)
        assert out["labeler_abuse"].tolist() == [1, 1, 0, pd.NA], method


def test_resolve_final_labels_errors_name_the_problem():
    df = utterances()
    with pytest.raises(ValueError, match=r"unknown method 'vote'; allowed: \['opela', 'opela-weighted', 'majority', 'dawid-skene'\]"):
        resolve_final_labels(df, SCHEMA, method="vote")
    with pytest.raises(ValueError, match=r"head\(s\) \['abuse'\]"):
        resolve_final_labels(df.drop(columns=["labeler1_abuse", "labeler2_abuse", "labeler3_abuse"]), SCHEMA)
    bad = df.copy()
    bad["labeler2_level"] = bad["labeler2_level"].astype(object)
    bad.loc[4, "labeler2_level"] = 7
    with pytest.raises(ValueError, match=r"'labeler2_level' has value 7 at row 5 \(sent_id 'd1_5'\).*allows \[0, 1, 2\]"):
        resolve_final_labels(bad, SCHEMA)


@pytest.mark.parametrize("method", METHODS)
def test_a_big_table_resolved_on_two_threads_matches_one_head_after_the_other(method, monkeypatch):
    import os
    import threading

    import psyattrs.labels.resolve as R

    big = pd.concat([utterances()] * 300, ignore_index=True)  # 2,700 rows, gaps included
    big["sent_id"] = [f"s{i}" for i in range(len(big))]
    monkeypatch.setattr(R, "PARALLEL_ROWS", 10**9)
    serial = resolve_final_labels(big, SCHEMA, method=method, seed=3)
    monkeypatch.setattr(R, "PARALLEL_ROWS", 1000)
    threads = []
    original = R._resolve_head

    def resolve_head(*args):
        threads.append(threading.current_thread().name)
        return original(*args)

    monkeypatch.setattr(R, "_resolve_head", resolve_head)
    pd.testing.assert_frame_equal(resolve_final_labels(big, SCHEMA, method=method, seed=3), serial)
    if (os.cpu_count() or 1) >= 2:
        assert all(name.startswith("psyattrs-resolve") for name in threads) and len(threads) == len(SCHEMA.heads)
    bad = big.copy()  # an error is the one the serial order meets first
    bad["labeler2_level"] = bad["labeler2_level"].astype(object)
    bad.loc[2000, "labeler2_level"] = 7
    with pytest.raises(ValueError, match=r"'labeler2_level' has value 7 at row 2001 \(sent_id 's2000'\)"):
        resolve_final_labels(bad, SCHEMA, method=method)

def test_long_labels_and_rated_matrix():
    df = utterances()
    matrix, ids = rated_matrix(df, SCHEMA["level"])
    assert ids == [1, 2, 3] and matrix.shape == (9, 3) and np.isnan(matrix[8]).all()
    table = long_labels(matrix, ids)
    assert len(table) == 24 and table.iloc[0].tolist() == [0, 1, 0] and table.iloc[-1].tolist() == [7, 3, 0]


def test_compare_with_final_per_head_and_method():
    df = utterances()
    df["labeler_abuse"] = pd.array([0, 1, 1, 1, 0, 0, 1, 0, pd.NA], dtype="Int64")  # one differs from majority
    table = compare_with_final(df, SCHEMA, methods=["opela", "opela-weighted", "majority"])
    assert list(table.columns) == ["head", "method", "n_items", "agreement", "n_all_different", "agreement_all_different"]
    assert table[["head", "method"]].values.tolist() == [
        ["abuse", "opela"], ["abuse", "opela-weighted"], ["abuse", "majority"],
        ["level", "opela"], ["level", "opela-weighted"], ["level", "majority"],
    ]  # fmt: skip
    level = table[table["head"] == "level"].set_index("method")
    # the released level finals are the weighted reading: B1 -> 1, B2 -> 2
    assert level.loc["opela-weighted", "agreement"] == 1.0
    assert level.loc["opela", "agreement"] == pytest.approx(7 / 8)
    assert level.loc["opela", "n_all_different"] == 2 and level.loc["opela", "agreement_all_different"] == 0.5
    abuse = table[table["head"] == "abuse"].set_index("method")
    assert (abuse["n_items"] == 8).all() and abuse.loc["opela", "agreement"] == pytest.approx(7 / 8)
    assert (abuse["n_all_different"] == 0).all() and abuse["agreement_all_different"].isna().all()
    with pytest.raises(ValueError, match=r"\['labeler_abuse'\]"):
        compare_with_final(df.drop(columns=["labeler_abuse"]), SCHEMA)


def test_make_aggregator_knows_every_method():
    kinds = {m: type(make_aggregator(m)).__name__ for m in METHODS}
    assert kinds == {
        "opela": "OpelaResolver",
        "opela-weighted": "OpelaResolver",
        "majority": "MajorityVote",
        "dawid-skene": "DawidSkene",
    }
    assert make_aggregator("opela-weighted").weighted is True
    with pytest.raises(ValueError, match="allowed"):
        make_aggregator("crowd")


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("holes", [True, False])
def test_fit_matrix_equals_fit_on_the_long_table(method, holes):
    # the table-level fast path must decide exactly as the long-table API does, also when every
    # labeler rated every row (then the matrix is encoded from its shape)
    rng = np.random.default_rng(5)
    matrix = rng.integers(0, 3, size=(400, 4)).astype(float)
    if holes:
        matrix[rng.random(matrix.shape) < 0.2] = np.nan
        matrix[7] = np.nan  # a row nobody rated is not a task
    ids = [3, 1, 7, 2]  # labeler numbers in no particular order
    dense = make_aggregator(method, seed=4).fit_matrix(matrix, ids, 3)
    long = make_aggregator(method, seed=4).fit(long_labels(matrix, ids), 3)
    assert (7 not in dense.labels_.index) == holes
    pd.testing.assert_series_equal(dense.labels_, long.labels_, check_index_type=False)
    pd.testing.assert_frame_equal(dense.probas_, long.probas_, check_index_type=False)
    if hasattr(long, "branches_"):
        assert (dense.branches_.to_numpy() == long.branches_.to_numpy()).all()
        pd.testing.assert_frame_equal(dense.R_, long.R_, check_index_type=False, check_column_type=False)


def test_opela_reliabilities_match_a_count_item_by_item():
    # R, U and the majority shares of a dense five-class matrix, counted one rating at a time
    rng = np.random.default_rng(11)
    matrix = rng.integers(0, 5, size=(3000, 3))
    res = OpelaResolver(seed=2).fit_matrix(matrix.astype(float), [1, 2, 3], 5)
    r_num, r_den, u_num, u_den = (np.zeros((5, 3)) for _ in range(4))
    s_num, s_den = np.zeros(3), np.zeros(3)
    n_items = 0
    for row in matrix.tolist():
        values, n = np.unique(row, return_counts=True)
        if n.max() < 2:
            continue  # all three differ: not an (a) item
        n_items += 1
        major = values[n.argmax()]
        for j, given in enumerate(row):
            r_den[major, j] += 1
            u_den[given, j] += 1
            s_den[j] += 1
            if given == major:
                r_num[major, j] += 1
                s_num[j] += 1
            else:
                u_num[given, j] += 1
    assert np.allclose(res.R_.to_numpy(), r_num / r_den, equal_nan=True)
    assert np.allclose(res.U_.to_numpy(), u_num / u_den, equal_nan=True)
    assert np.allclose(res.majority_share_.to_numpy(), s_num / s_den)
    assert res.n_majority_items_ == n_items


def test_opela_plurality_ties_follow_the_documented_random_keys():
    # items with four labels tied 2-2 are decided by one uniform key per (item, class), drawn for
    # every item in task order; the three-label items around them must not change the draw
    items = {"a": {1: 0, 2: 1, 3: 2}, "t1": {1: 0, 2: 0, 3: 3, 4: 3}, "b": {1: 1, 2: 1, 3: 0},
             "t2": {1: 2, 2: 4, 3: 4, 4: 2}}
    res = OpelaResolver(seed=9).fit(long(items), 5)
    keys = np.random.default_rng(9).random((4, 5))
    assert res.labels_["t1"] == (0 if keys[1, 0] > keys[1, 3] else 3)
    assert res.labels_["t2"] == (2 if keys[3, 2] > keys[3, 4] else 4)
    assert res.branches_[["t1", "t2"]].eq("random").all()


@pytest.mark.parametrize("bit_generator", [np.random.PCG64, np.random.MT19937])
def test_skipped_tie_draws_move_the_generator_as_drawing_would(bit_generator):
    from psyattrs.labels.aggregate import _argmax_random

    counts = np.array([[3, 0, 0], [0, 2, 1], [1, 1, 1]])
    skipped, drawn = np.random.Generator(bit_generator(3)), np.random.Generator(bit_generator(3))
    winners, tied = _argmax_random(counts, skipped, needed=np.array([True, True, False]))
    drawn.random(counts.shape)
    assert winners[:2].tolist() == [0, 1] and tied.tolist() == [False, False, True]
    assert skipped.random(4).tolist() == drawn.random(4).tolist()
