"""Grouped splits: no conversation in two parts, unseen personas, stratification, seeds, errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from psyattrs.data.splits import group_keys, kfold, rare_strata, train_valid_test
from psyattrs.synth import synthesize


@pytest.fixture(scope="module")
def corpus() -> pd.DataFrame:
    """40 synthetic conversations with a shuffled index (splits must keep the caller's index)."""
    df = synthesize(40, seed=21).utterances
    return df.set_axis(np.random.default_rng(0).permutation(len(df)) + 1000)


def parts_of_docs(df: pd.DataFrame, parts: pd.Series) -> pd.Series:
    return parts.groupby(df["doc_id"]).nunique()


def test_doc_split_keeps_every_conversation_in_one_part(corpus):
    parts = train_valid_test(corpus, by="doc", valid=0.1, test=0.2, seed=3)
    assert parts.index.equals(corpus.index) and parts.name == "part"
    assert set(parts) == {"train", "valid", "test"}
    assert (parts_of_docs(corpus, parts) == 1).all()
    docs = corpus.groupby("doc_id")["doc_id"].first().index
    per_part = parts.groupby(corpus["doc_id"]).first().value_counts()
    assert per_part.to_dict() == {"train": 28, "test": 8, "valid": 4} and per_part.sum() == len(docs)


def test_persona_split_holds_out_whole_personas(corpus):
    parts = train_valid_test(corpus, by="persona", valid=0.15, test=0.25, seed=1)
    personas = {p: set(corpus.loc[parts == p, "persona"]) for p in ("train", "valid", "test")}
    assert all(personas.values())
    assert not personas["train"] & personas["valid"] and not personas["train"] & personas["test"]
    assert not personas["valid"] & personas["test"]
    assert (parts_of_docs(corpus, parts) == 1).all()
    assert (parts.groupby(corpus["persona"]).nunique() == 1).all()


def test_same_seed_same_split_and_another_seed_differs(corpus):
    a = train_valid_test(corpus, seed=5)
    assert a.equals(train_valid_test(corpus, seed=5))
    assert not a.equals(train_valid_test(corpus, seed=6))
    folds_a = kfold(corpus, k=4, seed=5)
    folds_b = kfold(corpus, k=4, seed=5)
    assert all(np.array_equal(x[1], y[1]) for x, y in zip(folds_a, folds_b))


def test_empty_valid_part_is_allowed(corpus):
    parts = train_valid_test(corpus, valid=0.0, test=0.25, seed=0)
    assert set(parts) == {"train", "test"}


@pytest.mark.parametrize("by", ["doc", "persona"])
def test_kfold_holds_out_every_group_exactly_once(corpus, by):
    k = 4
    folds = kfold(corpus, k=k, by=by, seed=2)
    assert len(folds) == k
    held = np.concatenate([test for _, test in folds])
    assert np.array_equal(np.sort(held), np.arange(len(corpus)))
    key = "doc_id" if by == "doc" else "persona"
    for train, test in folds:
        assert np.intersect1d(train, test).size == 0 and train.size + test.size == len(corpus)
        assert not set(corpus[key].iloc[train]) & set(corpus[key].iloc[test])
        assert not set(corpus["doc_id"].iloc[train]) & set(corpus["doc_id"].iloc[test])
    sizes = [corpus[key].iloc[test].nunique() for _, test in folds]
    assert max(sizes) - min(sizes) <= 1


def test_stratification_spreads_the_rare_conversations(corpus):
    strata = rare_strata(corpus, group_keys(corpus, "doc"))
    assert strata.nunique() >= 2  # conversations differ in which rare classes they hold
    for seed in range(3):
        parts = train_valid_test(corpus, valid=0.0, test=0.25, seed=seed)
        doc_part = parts.groupby(corpus["doc_id"]).first()
        for stratum, members in strata.groupby(strata):
            in_test = (doc_part.loc[members.index] == "test").sum()
            assert abs(in_test - 0.25 * len(members)) <= 1, (stratum, in_test, len(members))


def test_stratify_by_a_named_column(corpus):
    parts = train_valid_test(corpus, valid=0.0, test=0.5, seed=0, stratify="persona")
    doc_part = parts.groupby(corpus["doc_id"]).first()
    doc_persona = corpus.groupby("doc_id")["persona"].first()
    for persona, docs in doc_persona.groupby(doc_persona):
        assert abs((doc_part.loc[docs.index] == "test").sum() - len(docs) / 2) <= 1, persona


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"by": "speaker"}, r"by='speaker' is not one of \['doc', 'persona'\]"),
        ({"valid": 0.5, "test": 0.5}, r"valid \+ test must be < 1"),
        ({"valid": -0.1}, r"valid must be a number in \[0, 1\), got -0.1"),
        ({"test": 1.2}, r"test must be a number in \[0, 1\), got 1.2"),
        ({"seed": -1}, r"seed must be a non-negative integer, got -1"),
        ({"stratify": "nope"}, r"stratify column\(s\) \['nope'\] not in the table"),
    ],
)
def test_bad_arguments_are_named(corpus, kwargs, message):
    with pytest.raises(ValueError, match=message):
        train_valid_test(corpus, **kwargs)


def test_persona_split_needs_as_many_personas_as_parts(corpus):
    two = corpus[corpus["persona"].isin(sorted(corpus["persona"].unique())[:2])]
    with pytest.raises(ValueError, match=r"split by persona into 3 parts needs at least 3 persona values, the table has 2"):
        train_valid_test(two, by="persona")
    with pytest.raises(ValueError, match=r"3 folds by persona need at least 3 persona values, the table has 2"):
        kfold(two, k=3, by="persona")
    assert set(train_valid_test(two, by="persona", valid=0.0, test=0.5)) == {"train", "test"}


def test_kfold_bad_k(corpus):
    with pytest.raises(ValueError, match=r"k must be an integer >= 2, got 1"):
        kfold(corpus, k=1)


def test_persona_split_rejects_missing_or_mixed_personas():
    df = pd.DataFrame({"doc_id": ["a", "a", "b", "c"], "persona": ["x", "y", "y", "z"], "text": ["1", "2", "3", "4"]})
    with pytest.raises(ValueError, match=r"more than one persona.*\['a'\]"):
        train_valid_test(df, by="persona", valid=0.0, test=0.3)
    df.loc[1, "persona"] = ""
    with pytest.raises(ValueError, match=r"column 'persona' is empty in 1 row\(s\) \(first at row 1\)"):
        train_valid_test(df, by="persona", valid=0.0, test=0.3)
    with pytest.raises(ValueError, match=r"a split by persona needs a 'persona' column"):
        train_valid_test(df.drop(columns=["persona"]), by="persona")


@st.composite
def layouts(draw):
    """A random table: groups of random sizes, personas over groups, a rare label here and there."""
    n_docs = draw(st.integers(3, 30))
    sizes = draw(st.lists(st.integers(1, 5), min_size=n_docs, max_size=n_docs))
    n_personas = draw(st.integers(3, 6))
    persona_of = draw(st.lists(st.integers(0, n_personas - 1), min_size=n_docs, max_size=n_docs))
    docs = np.repeat([f"d{i}" for i in range(n_docs)], sizes)
    personas = np.repeat([f"p{p}" for p in persona_of], sizes)
    rare = draw(st.lists(st.booleans(), min_size=len(docs), max_size=len(docs)))
    df = pd.DataFrame({"doc_id": docs, "persona": personas, "labeler_strange": np.where(rare, 0, 1)})
    df["labeler_strange"] = df["labeler_strange"].astype("Int64")
    order = draw(st.permutations(range(len(df))))
    return df.iloc[list(order)].set_axis([f"r{i}" for i in range(len(df))])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(df=layouts(), valid=st.sampled_from([0.0, 0.1, 0.3]), test=st.sampled_from([0.1, 0.2, 0.4]),
       seed=st.integers(0, 10_000), by=st.sampled_from(["doc", "persona"]))  # fmt: skip
def test_property_no_group_ever_in_two_parts(df, valid, test, seed, by):
    key = "doc_id" if by == "doc" else "persona"
    n_groups = df[key].nunique()
    needed = 2 + (valid > 0)
    if n_groups < needed:
        with pytest.raises(ValueError, match="needs at least"):
            train_valid_test(df, by=by, valid=valid, test=test, seed=seed)
        return
    parts = train_valid_test(df, by=by, valid=valid, test=test, seed=seed)
    assert parts.index.equals(df.index)
    assert (parts.groupby(df[key]).nunique() == 1).all()
    assert (parts.groupby(df["doc_id"]).nunique() == 1).all()
    groups_in = parts.groupby(df[key]).first().value_counts()
    assert groups_in.get("test", 0) >= 1 and groups_in.get("train", 0) >= 1
    assert (groups_in.get("valid", 0) >= 1) == (valid > 0)
    assert groups_in.get("test", 0) <= max(1, round(test * n_groups) + 1)
    k = min(3, n_groups)
    if k >= 2:
        folds = kfold(df, k=k, by=by, seed=seed)
        held = np.sort(np.concatenate([t for _, t in folds]))
        assert np.array_equal(held, np.arange(len(df)))
        for train, held_out in folds:
            assert not set(df[key].iloc[train]) & set(df[key].iloc[held_out])
