"""The gold-constrained reading (issue 27): the aligner's lattice restricted to a hand-made
interleaving, checked against brute force on random lattices and on public-format fixtures made
here whose true order is known; and each sentence's posterior label distribution."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from psyattrs.align import align_public, lattice
from psyattrs.align.conversations import Mode
from psyattrs.align.gold import GoldOrder
from psyattrs.align.goldread import constrained_viterbi, gold_readings, line_agreement, order_sequence
from psyattrs.data.opela import read_public
from psyattrs.synth import synthesize, write_public

from test_align import FAST, _enumerate, _random_lattice  # noqa: F401
from test_align import _own_cache  # noqa: F401 (autouse fixture)


def _interleaving(steps: list[tuple]) -> list[tuple[str, int]]:
    order = []
    for _, kind, start, k in steps:
        if kind in (lattice.PERSONA, lattice.PAUSE):
            order += [("P", i) for i in range(start, start + k)]
        elif kind == lattice.USER:
            order += [("U", j) for j in range(start, start + k)]
    return order


def test_constrained_viterbi_is_the_best_path_of_each_interleaving_by_brute_force():
    rng = np.random.default_rng(11)
    checked = 0
    for _ in range(120):
        lat = dataclasses.replace(_random_lattice(rng), log_skip=-np.inf)  # every item is used: the order says all
        mode = Mode("m", np.arange(lat.m), lat.persona_blank, np.arange(lat.n), lat.max_phantoms, 0.0)
        best: dict[tuple, tuple[float, list]] = {}
        for score, steps, _, _, _ in _enumerate(lat):
            key = tuple(_interleaving(steps))
            if key not in best or score > best[key][0]:
                best[key] = (score, steps)
        for order, (score, steps) in best.items():
            path = constrained_viterbi(lat, order_sequence(list(order), mode))
            assert path is not None and path.score == pytest.approx(score)
            # the same units at the same labels (a pause on a blank line and a pause without one
            # next to it tie: either may come first)
            assert [(s.t, s.kind, s.start, s.k) if s.kind < lattice.PAUSE else (s.t, "pause") for s in path.steps] == [
                st if st[1] < lattice.PAUSE else (st[0], "pause") for st in steps]
            checked += 1
    assert checked > 100


def test_constrained_viterbi_finds_nothing_where_the_order_cannot_hold_the_labels():
    # two labels, one persona and one user line: the user line must hold label 0 if it comes first
    lat = lattice.Lattice(emit_persona=np.array([[[0.0]], [[-np.inf]]]), emit_user=np.array([[[-np.inf]], [[0.0]]]),
                          emit_pause=np.zeros(2), persona_blank=np.zeros(1, bool), log_trans=np.zeros((3, 3)),
                          log_start=np.zeros(3))
    mode = Mode("m", np.arange(1), np.zeros(1, bool), np.arange(1), 0, 0.0)
    assert constrained_viterbi(lat, order_sequence([("U", 0), ("P", 0)], mode)) is None
    assert constrained_viterbi(lat, order_sequence([("P", 0), ("U", 0)], mode)).score == 0.0


def test_order_sequence_rejects_an_order_that_breaks_a_speakers_own_order():
    mode = Mode("m", np.arange(2), np.zeros(2, bool), np.arange(1), 0, 0.0)
    with pytest.raises(ValueError, match="persona lines once each"):
        order_sequence([("P", 1), ("U", 0), ("P", 0)], mode)
    with pytest.raises(ValueError, match="user lines once each"):
        order_sequence([("P", 0), ("P", 1)], mode)


def _synthetic(n: int, seed: int, quirks: bool):
    syn = synthesize(n, seed=seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "public.csv"
        truth = write_public(syn.utterances, syn.conversations, path, seed=seed, quirks=quirks)
        corpus = read_public(path)
    return corpus, truth.order


def _true_gold(order: pd.DataFrame) -> dict[str, GoldOrder]:
    """One reading per conversation: the true interleaving of every line that holds a sentence."""
    gold = {}
    for doc, g in order.groupby("doc_id", sort=False):
        items = []
        for r in g.itertuples(index=False):
            if pd.notna(r.line_start):
                who = "P" if r.speaker == "persona" else "U"
                items += [(who, i) for i in range(int(r.line_start), int(r.line_end))]
        gold[str(doc)] = GoldOrder(str(doc), {"reader1": items}, {"reader1": set()})
    return gold


def test_gold_readings_give_every_line_its_true_labels_when_lines_are_sentences():
    corpus, order = _synthetic(2, seed=4, quirks=False)
    got = gold_readings(corpus, _true_gold(order), settings=dataclasses.replace(_settings(), coherence=False))
    assert got["agreed"].all() and (got["reader"] == "reader1").all()
    truth = order.rename(columns={"speaker": "person_type"}).astype({"line_start": "Int64", "line_end": "Int64"})
    m = truth.merge(got, on=["doc_id", "person_type", "line_start", "line_end"], how="left", validate="1:1")
    assert (m["position_x"].astype("Int64") == m["label_position"]).all()
    assert len(got) == len(order)


def test_gold_readings_keep_the_better_scoring_reader_and_mark_where_readers_disagree():
    corpus, order = _synthetic(1, seed=6, quirks=False)
    gold = _true_gold(order)
    doc = next(iter(gold))
    true = gold[doc].orders["reader1"]
    # reader0 swaps the first user line with the persona line after it
    first_u = next(k for k, (w, _) in enumerate(true) if w == "U" and k + 1 < len(true) and true[k + 1][0] == "P")
    swapped = true[:first_u] + [true[first_u + 1], true[first_u]] + true[first_u + 2:]
    settings = dataclasses.replace(_settings(), coherence=False)
    alone = {}
    for reader, o in (("reader0", swapped), ("reader1", true)):
        one = {doc: GoldOrder(doc, {reader: o}, {reader: set()})}
        alone[reader] = float(gold_readings(corpus, one, settings=settings)["gold_score"].iloc[0])
    assert alone["reader0"] != alone["reader1"]
    gold[doc].orders = {"reader0": swapped, "reader1": true}
    got = gold_readings(corpus, gold, settings=settings)
    assert (got["reader"] == max(alone, key=alone.get)).all() and got["gold_score"].iloc[0] == max(alone.values())
    moved_u, moved_p = true[first_u][1], true[first_u + 1][1]
    off = got[~got["agreed"]]
    assert sorted(zip(off["person_type"], off["line_start"].astype(int))) == [("persona", moved_p), ("user", moved_u)]


def test_line_agreement_counts_the_other_speakers_non_blank_lines():
    g = GoldOrder("d", {"a": [("U", 0), ("P", 0), ("P", 1), ("U", 1), ("P", 2)],
                        "b": [("U", 0), ("P", 0), ("U", 1), ("P", 1), ("P", 2)]}, {})
    p_ok, u_ok = line_agreement(g, np.array([False, True, False]), np.array([False, False]))
    assert p_ok.tolist() == [True, True, True] and u_ok.tolist() == [True, True]  # only the blank P1 moved
    g.orders["b"] = [("P", 0), ("U", 0), ("P", 1), ("U", 1), ("P", 2)]
    p_ok, u_ok = line_agreement(g, np.array([False, True, False]), np.array([False, False]))
    assert p_ok.tolist() == [False, True, True] and u_ok.tolist() == [False, True]


def _settings():
    from psyattrs.align import AlignSettings

    return AlignSettings(**FAST)


def test_label_posteriors_are_distributions_that_give_each_sentences_own_labels_at_least_its_confidence():
    corpus, _ = _synthetic(3, seed=2, quirks=True)
    result = align_public(corpus, workers=1, **FAST)
    u = result.utterances
    for head, dist in result.label_posteriors.items():
        labelled = u[f"labeler_{head}"].notna().to_numpy()
        assert dist.shape[0] == len(u) and np.isnan(dist[~labelled]).all()
        assert np.allclose(dist[labelled].sum(axis=1), 1.0)
        own = dist[labelled][np.arange(labelled.sum()), u.loc[labelled, f"labeler_{head}"].to_numpy(dtype=int)]
        # the sentence's own position alone holds `align_confidence` of its posterior at least
        conf = u.loc[labelled, "align_confidence"].to_numpy()
        assert (own >= conf - 1e-9).all() and (own < 1 - 1e-6).any()


def test_the_benchmarks_downstream_part_skips_plainly_without_the_real_data(tmp_path, capsys):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from _downstream import downstream_part

    downstream_part(tmp_path / "no_gold", tmp_path / "no_rows.csv", iterations=1, quick=True)
    out = capsys.readouterr().out
    assert f"skipped: {tmp_path / 'no_gold'} is absent" in out and "macro-F1" not in out


def test_the_benchmarks_training_options_use_the_posterior_and_the_confidence():
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from _downstream import THRESHOLDS, training_sets

    corpus, _ = _synthetic(2, seed=3, quirks=True)
    result = align_public(corpus, workers=1, **FAST)
    sets = training_sets({"utterances": result.utterances, "posteriors": result.label_posteriors})
    rows, targets = sets["today (best reading)"]
    assert not rows["is_pause"].any() and rows["label_position"].notna().all()
    for t in THRESHOLDS:
        kept, _ = sets[f"confidence >= {t}"]
        assert (kept["align_confidence"] >= t).all() and len(kept) == int((rows["align_confidence"] >= t).sum())
    soft_rows, soft = sets["posterior (soft)"]
    assert len(soft_rows) == len(rows)
    hard = targets["empathy"]
    assert np.isin(hard, (0.0, 1.0)).all() and not np.isin(soft["empathy"], (0.0, 1.0)).all()
    assert np.allclose(soft["empathy"].sum(axis=1), 1.0)


def test_the_benchmarks_option_choice_for_a_conversation_never_looks_at_it():
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from _downstream import chosen_on_the_others
    from psyattrs.schema import OPELA

    rng = np.random.default_rng(0)
    docs = np.repeat(["a", "b", "c"], [30, 30, 10])
    test = pd.DataFrame({"doc_id": docs})
    for h in OPELA.heads:
        test[f"labeler_{h.name}"] = rng.integers(0, h.n_classes, len(docs))

    def guesses(right_on: set[str]) -> dict[str, np.ndarray]:
        out = {}
        for h in OPELA.heads:
            y = test[f"labeler_{h.name}"].to_numpy()
            wrong = (y + 1) % h.n_classes
            out[h.name] = np.eye(h.n_classes)[np.where(np.isin(docs, list(right_on)), y, wrong)] * 0.9 + 0.1 / h.n_classes
        return out

    probas = {"right on a and b": guesses({"a", "b"}), "right on c": guesses({"c"})}
    pooled, chosen = chosen_on_the_others(probas, test)
    # c's own rows favour "right on c", but the choice for c is made on a and b alone
    assert chosen == {"a": "right on a and b", "b": "right on a and b", "c": "right on a and b"}
    for h in OPELA.head_names:
        assert np.array_equal(pooled[h], probas["right on a and b"][h])
