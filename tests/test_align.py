"""Order reconstruction of the public release: the DP, the aligner, the naive readings, the CLI.

The DP is checked against brute-force enumeration of every reading of tiny random lattices. The
aligner runs on hand-built conversations whose right reading is forced by what they contain
(uncounted pauses, pauses on signature labels, a message spanning lines, a trailing newline, blank
user lines) and on a small synthetic public file whose truth is known. The texts are made up.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.special import logsumexp

from psyattrs.cli import main
from psyattrs.data import load_corpus
from psyattrs.align import dp, lattice
from psyattrs.align import ALIGN_COLUMNS, AlignSettings, align_public, write_aligned
from psyattrs.align.eval import alternating_reading, pause_anchored_reading, score_reading
from psyattrs.align.priors import calibrate
from psyattrs.data.opela import read_public
from psyattrs.schema import OPELA

HEADS = OPELA.head_names
SIG = {"strange": 1, "uneasy": 1, "engage": 0, "active": 0, "self": 0, "empathy": 0}
FAST = dict(model_kind="majority", iterations=1)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """`data align` and training share an alignment cache: each test gets its own."""
    monkeypatch.setenv("PSYATTRS_CACHE", str(tmp_path / "cache"))


# ----------------------------------------------------------------------------------------------
# the DP against brute force


def _enumerate(lat: lattice.Lattice) -> list[tuple[float, list[tuple], list[int], list[tuple], list[tuple]]]:
    """Every path of a lattice: (score, steps (t, kind, start, k), skipped items, transitions,
    run events (speaker PERSONA / USER, items used, 0 stay / 1 leave))."""
    T, m, n, K = lat.T, lat.m, lat.n, lat.emit_persona.shape[2]
    lo, hi = -lat.max_phantoms, m + n - T + lat.max_phantoms
    p_run = lat.persona_run if lat.persona_run is not None else np.zeros((m + 1, 2))
    u_run = lat.user_run if lat.user_run is not None else np.zeros((n + 1, 2))
    pu = lat.persona_user if lat.persona_user is not None else np.zeros((m + 1, n + 1))
    up = lat.user_persona if lat.user_persona is not None else np.zeros((m + 1, n + 1))
    end = lat.log_end if lat.log_end is not None else np.zeros(3)
    out = []

    def walk(t, i, j, s, score, steps, skipped, trans, runs):
        if not lo <= i + j - t <= hi:
            return
        if i < m and lat.persona_blank[i] and lat.log_skip > -np.inf:
            walk(t, i + 1, j, s, score + lat.log_skip, steps, skipped + [i], trans, runs)
        if t == T:
            if i == m and j == n and s is not None and score + end[s] > -np.inf:
                out.append((score + end[s], steps, skipped, trans, runs))
            elif i == m and j == n and s is None:
                out.append((score, steps, skipped, trans, runs))
            return

        def go(to):
            """Score of the step s -> to, and the run event it makes (None from a pause or at start)."""
            if s is None:
                return lat.log_start[to], []
            col = 0 if to == s else 1
            if s == lattice.PERSONA:
                cross = pu[i, j] if to == lattice.USER else 0.0
                ev = [(lattice.PERSONA, i, col), ("at", lattice.PERSONA, i, j)] + ([("pu", i, j)] if to == lattice.USER else [])
                return lat.log_trans[t, s, to] + p_run[i, col] + cross, ev
            if s == lattice.USER:
                cross = up[i, j] if to == lattice.PERSONA else 0.0
                ev = [(lattice.USER, j, col), ("at", lattice.USER, i, j)] + ([("up", i, j)] if to == lattice.PERSONA else [])
                return lat.log_trans[t, s, to] + u_run[j, col] + cross, ev
            return lat.log_trans[t, s, to], []

        def step(to, t2, i2, j2, emit, st):
            g, ev = go(to)
            total = score + g + emit
            if total > -np.inf:
                walk(t2, i2, j2, to, total, steps + [st], skipped, trans + [(t, s, to)], runs + ev)

        for k in range(1, K + 1):
            if i + k <= m and not lat.persona_blank[i : i + k].any() and lat.emit_persona[t, i, k - 1] > -np.inf:
                step(lattice.PERSONA, t + 1, i + k, j, lat.emit_persona[t, i, k - 1], (t, lattice.PERSONA, i, k))
            if j + k <= n and lat.emit_user[t, j, k - 1] > -np.inf:
                step(lattice.USER, t + 1, i, j + k, lat.emit_user[t, j, k - 1], (t, lattice.USER, j, k))
        if i < m and lat.persona_blank[i] and lat.log_keep > -np.inf:
            step(lattice.PAUSE, t + 1, i + 1, j, lat.log_keep + lat.emit_pause[t], (t, lattice.PAUSE, i, 1))
        if lat.log_phantom > -np.inf:
            step(lattice.PAUSE, t + 1, i, j, lat.log_phantom + lat.emit_pause[t], (t, lattice.PHANTOM, -1, 0))

    walk(0, 0, 0, None, 0.0, [], [], [], [])
    return out


def _random_run(rng: np.random.Generator, size: int) -> np.ndarray:
    r = rng.normal(size=(size, 2)) * 1.5
    r[rng.random((size, 2)) < 0.1] = -np.inf
    return r


def _random_lattice(rng: np.random.Generator) -> lattice.Lattice:
    m, n, K = int(rng.integers(0, 5)), int(rng.integers(0, 5)), int(rng.integers(1, 4))
    phantoms = int(rng.integers(0, 3)) if rng.random() < 0.4 else 0
    T = max(0, m + n - int(rng.integers(-phantoms, 4))) if m + n else 0
    runs = rng.random() < 0.5
    cross = rng.random() < 0.5
    return lattice.Lattice(
        emit_persona=rng.normal(size=(T, m, K)) * 2,
        emit_user=rng.normal(size=(T, n, K)) * 2,
        emit_pause=rng.normal(size=T) * 2,
        persona_blank=rng.random(m) < 0.3,
        log_trans=np.log(rng.dirichlet(np.ones(3), size=(T, 3))),
        log_start=np.log(rng.dirichlet(np.ones(3))),
        log_keep=float(np.log(rng.random())) if rng.random() < 0.9 else -np.inf,
        log_skip=float(np.log(rng.random())) if rng.random() < 0.6 else -np.inf,
        log_phantom=float(np.log(rng.random())) if phantoms else -np.inf,
        max_phantoms=phantoms,
        persona_run=_random_run(rng, m + 1) if runs and rng.random() < 0.8 else None,
        user_run=_random_run(rng, n + 1) if runs and rng.random() < 0.8 else None,
        persona_user=_random_run(rng, (m + 1) * (n + 1))[:, 0].reshape(m + 1, n + 1) if cross and rng.random() < 0.8 else None,
        user_persona=_random_run(rng, (m + 1) * (n + 1))[:, 0].reshape(m + 1, n + 1) if cross and rng.random() < 0.8 else None,
        log_end=np.log(rng.dirichlet(np.ones(3))) if rng.random() < 0.5 else None,
    )


def test_dp_is_exact_against_brute_force():
    rng = np.random.default_rng(7)
    checked = with_runs = with_cross = 0
    for _ in range(150):
        lat = _random_lattice(rng)
        paths = _enumerate(lat)
        post, best = dp.forward_backward(lat), dp.viterbi(lat)
        assert post.persona_run.shape == (lat.m + 1, 2) and post.user_run.shape == (lat.n + 1, 2)
        if not paths:
            assert post.loglik == -np.inf and best.score == -np.inf and best.steps == []
            continue
        checked += 1
        with_runs += lat.persona_run is not None or lat.user_run is not None
        with_cross += lat.persona_user is not None or lat.user_persona is not None
        scores = np.array([p[0] for p in paths])
        Z = logsumexp(scores)
        assert post.loglik == pytest.approx(Z, abs=1e-9)
        assert dp.log_likelihood(lat) == pytest.approx(Z, abs=1e-9)
        assert best.score == pytest.approx(scores.max(), abs=1e-9)
        got = [(s.t, s.kind, s.start, s.k) for s in best.steps]
        assert any(p[1] == got and p[2] == best.skipped and p[0] == pytest.approx(best.score) for p in paths)
        w = np.exp(scores - Z)
        P, U = np.zeros_like(post.persona), np.zeros_like(post.user)
        Z2, F, TR = np.zeros_like(post.pause), np.zeros_like(post.phantom), np.zeros_like(post.transitions)
        ST = np.zeros(3)
        PR, UR = np.zeros((lat.m + 1, 2)), np.zeros((lat.n + 1, 2))
        cells = {key: np.zeros((lat.m + 1, lat.n + 1)) for key in ("pu", "up", lattice.PERSONA, lattice.USER)}
        for wi, (_, steps, _, trans, runs) in zip(w, paths):
            for t, kind, start, k in steps:
                if kind == lattice.PERSONA:
                    P[t, start, k - 1] += wi
                elif kind == lattice.USER:
                    U[t, start, k - 1] += wi
                elif kind == lattice.PAUSE:
                    Z2[t, start] += wi
                else:
                    F[t] += wi
            for t, s, to in trans:
                if s is None:
                    ST[to] += wi
                else:
                    TR[t, s, to] += wi
            for ev in runs:
                if ev[0] == "at":
                    cells[ev[1]][ev[2], ev[3]] += wi
                elif ev[0] in ("pu", "up"):
                    cells[ev[0]][ev[1], ev[2]] += wi
                else:
                    speaker, at, col = ev
                    (PR if speaker == lattice.PERSONA else UR)[at, col] += wi
        for mine, theirs in ((post.persona, P), (post.user, U), (post.pause, Z2), (post.phantom, F),
                             (post.transitions, TR), (post.start, ST), (post.persona_run, PR), (post.user_run, UR),
                             (post.persona_user, cells["pu"]), (post.user_persona, cells["up"]),
                             (post.persona_at, cells[lattice.PERSONA]), (post.user_at, cells[lattice.USER])):
            np.testing.assert_allclose(mine, theirs, atol=1e-9)
    assert checked >= 80
    assert with_runs >= 30 and with_cross >= 30


def test_dp_one_unit_length_shortcut_equals_the_general_passes():
    """The passes take a shortcut when every unit is one line (K = 1, most real conversations):
    the same lattice with a second, impossible unit length goes through the general code (sums and
    maxima over lengths) and must give the same readings and numbers; the ties of integer scores
    must fall the same way."""
    rng = np.random.default_rng(5)
    compared = 0
    for trial in range(40):
        m, n = int(rng.integers(3, 25)), int(rng.integers(3, 25))
        phantoms = int(rng.integers(1, 3))  # with a second unit length possible (lattice.max_k)
        T = m + n + int(rng.integers(-1, 2))  # one line to skip, none, or one phantom label
        ties = trial % 2 == 0  # integer scores: many equal candidates
        draw = (lambda *shape: rng.integers(-3, 1, size=shape).astype(float)) if ties else (lambda *shape: rng.normal(size=shape) * 2)
        kw = dict(
            emit_pause=draw(T), persona_blank=rng.random(m) < 0.2,
            log_trans=draw(T, 3, 3) if ties else np.log(rng.dirichlet(np.ones(3), size=(T, 3))),
            log_start=np.log(rng.dirichlet(np.ones(3))), log_keep=float(np.log(rng.random())),
            log_skip=float(np.log(rng.random())), log_phantom=float(np.log(rng.random())), max_phantoms=phantoms,
            persona_run=_random_run(rng, m + 1) if rng.random() < 0.7 else None,
            user_run=_random_run(rng, n + 1) if rng.random() < 0.7 else None,
            persona_user=_random_run(rng, (m + 1) * (n + 1))[:, 0].reshape(m + 1, n + 1) if rng.random() < 0.5 else None,
            user_persona=_random_run(rng, (m + 1) * (n + 1))[:, 0].reshape(m + 1, n + 1) if rng.random() < 0.5 else None,
        )
        ep, eu = draw(T, m, 1), draw(T, n, 1)
        one = lattice.Lattice(emit_persona=ep, emit_user=eu, **kw)
        pad = lattice.Lattice(emit_persona=np.concatenate([ep, np.full((T, m, 1), -np.inf)], axis=2),
                              emit_user=np.concatenate([eu, np.full((T, n, 1), -np.inf)], axis=2), **kw)
        assert one.max_k == 1 and pad.max_k == 2
        a, b = dp.viterbi(one), dp.viterbi(pad)
        assert a.score == b.score and a.steps == b.steps and a.skipped == b.skipped
        pa, pb = dp.forward_backward(one), dp.forward_backward(pad)
        if a.score == -np.inf:
            assert pa.loglik == pb.loglik == -np.inf
            continue
        compared += 1
        assert pa.loglik == pytest.approx(pb.loglik, rel=1e-12)
        np.testing.assert_allclose(pa.persona, pb.persona[..., :1], rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(pa.user, pb.user[..., :1], rtol=1e-10, atol=1e-14)
        for name in ("pause", "phantom", "transitions", "persona_run", "user_run", "persona_user", "persona_at"):
            np.testing.assert_allclose(getattr(pa, name), getattr(pb, name), rtol=1e-10, atol=1e-14)
    assert compared >= 25


def test_dp_no_skip_where_lines_and_labels_add_up():
    """A skipped blank line leaves a label position over: where the lines add up to the labels
    (one x value, no phantom) no reading skips, so the skip probability changes nothing (the passes
    leave out the skip closure there)."""
    rng = np.random.default_rng(9)
    for _ in range(20):
        m, n, K = int(rng.integers(2, 15)), int(rng.integers(2, 15)), int(rng.integers(1, 4))
        T = m + n
        kw = dict(
            emit_persona=rng.normal(size=(T, m, K)), emit_user=rng.normal(size=(T, n, K)), emit_pause=rng.normal(size=T),
            persona_blank=rng.random(m) < 0.4, log_trans=np.log(rng.dirichlet(np.ones(3), size=(T, 3))),
            log_start=np.log(rng.dirichlet(np.ones(3))), log_keep=float(np.log(rng.random())),
            persona_run=_random_run(rng, m + 1), user_run=_random_run(rng, n + 1),
        )
        kw["persona_blank"][0] = True
        with_skip, without = lattice.Lattice(**kw, log_skip=np.log(0.9)), lattice.Lattice(**kw, log_skip=-np.inf)
        assert with_skip.n_x == 1
        a, b = dp.viterbi(with_skip), dp.viterbi(without)
        assert a.score == b.score and a.steps == b.steps and a.skipped == b.skipped == []
        pa, pb = dp.forward_backward(with_skip), dp.forward_backward(without)
        assert pa.loglik == pb.loglik
        for name in ("persona", "user", "pause", "transitions", "persona_run", "user_run"):
            np.testing.assert_array_equal(getattr(pa, name), getattr(pb, name))


def test_unit_posteriors_name_each_column_as_the_unit_of_that_column():
    """`Fit.unit_posteriors` names its units all at once; each must be the unit `Fit._unit` gives
    its column (persona, user, pause on a blank item, phantom), in the same order, same values."""
    from types import SimpleNamespace

    from psyattrs.align.rounds import Fit

    rng = np.random.default_rng(3)
    for m, n, K, T in ((5, 4, 3, 9), (0, 3, 1, 4), (6, 0, 2, 5), (7, 8, 1, 15)):
        post = SimpleNamespace(persona=rng.random((T, m, K)) ** 4, user=rng.random((T, n, K)) ** 4,
                               pause=rng.random((T, m)) ** 4, phantom=rng.random(T) ** 4)
        mode = SimpleNamespace(p_items=np.sort(rng.choice(50, m, replace=False)), u_items=np.sort(rng.choice(50, n, replace=False)))
        fit = Fit(mode, 0.0, float("nan"), 0.8, post)
        flat = fit._flat() * 0.8
        rows, cols = np.nonzero(flat > 1e-3)
        expected = {(int(t), *fit._unit(int(c))): float(flat[t, c]) for t, c in zip(rows, cols)}
        got = fit.unit_posteriors()
        assert list(got.items()) == list(expected.items())
        assert {key[1] for key in got} == ({lattice.PERSONA} if m else set()) | ({lattice.USER} if n else set()) | (
            {lattice.PAUSE} if m else set()) | {lattice.PHANTOM}


def test_dp_run_scores_none_are_zeros_and_are_used():
    rng = np.random.default_rng(11)
    T, m, n, K = 12, 7, 8, 3
    kw = dict(
        emit_persona=rng.normal(size=(T, m, K)), emit_user=rng.normal(size=(T, n, K)), emit_pause=rng.normal(size=T),
        persona_blank=np.array([False, False, True, False, False, True, False]),
        log_trans=np.log(rng.dirichlet(np.ones(3), size=(T, 3))), log_start=np.log(np.full(3, 1 / 3)),
        log_keep=np.log(0.8), log_skip=np.log(0.2), log_phantom=np.log(0.05), max_phantoms=1,
    )
    none = lattice.Lattice(**kw)
    assert none.persona_run is None and none.user_run is None
    zeros = lattice.Lattice(**kw, persona_run=np.zeros((m + 1, 2)), user_run=np.zeros((n + 1, 2)))
    only_p = lattice.Lattice(**kw, persona_run=np.zeros((m + 1, 2)))
    a = dp.forward_backward(none)
    best = dp.viterbi(none)
    for lat in (zeros, only_p):
        b = dp.forward_backward(lat)
        assert b.loglik == pytest.approx(a.loglik, abs=1e-12)
        for name in ("persona", "user", "pause", "phantom", "transitions", "start", "persona_run", "user_run"):
            np.testing.assert_allclose(getattr(b, name), getattr(a, name), rtol=1e-12, atol=1e-14)
        vb = dp.viterbi(lat)
        assert vb.score == best.score and vb.steps == best.steps and vb.skipped == best.skipped
    # the run events are counted without run scores: one per label after the first, persona
    # stay + leave match the persona rows of the transitions
    total = a.persona_run.sum() + a.user_run.sum() + a.transitions[1:, lattice.PAUSE].sum()
    assert total == pytest.approx(T - 1, abs=1e-9)
    assert a.persona_run[:, 0].sum() == pytest.approx(a.transitions[1:, 0, 0].sum(), abs=1e-9)
    assert a.persona_run[:, 1].sum() == pytest.approx(a.transitions[1:, 0, 1:].sum(), abs=1e-9)
    assert a.user_run[:, 0].sum() == pytest.approx(a.transitions[1:, 1, 1].sum(), abs=1e-9)
    # forbidding every persona stay forbids persona -> persona everywhere
    no_stay = np.zeros((m + 1, 2))
    no_stay[:, 0] = -np.inf
    c = dp.forward_backward(lattice.Lattice(**kw, persona_run=no_stay))
    assert np.isfinite(c.loglik) and c.loglik < a.loglik
    assert np.abs(c.transitions[:, 0, 0]).max() == 0.0 and np.abs(c.persona_run[:, 0]).max() == 0.0
    steps = dp.viterbi(lattice.Lattice(**kw, persona_run=no_stay)).steps
    assert not any(s1.kind == s2.kind == lattice.PERSONA for s1, s2 in zip(steps, steps[1:]))


def test_lattice_validates_run_scores():
    base = (np.zeros((3, 1, 1)), np.zeros((3, 2, 1)), np.zeros(3), np.zeros(1, bool), np.zeros((3, 3)), np.zeros(3))
    with pytest.raises(ValueError, match=r"persona_run must be \(m\+1, 2\) = \(2, 2\)"):
        lattice.Lattice(*base, persona_run=np.zeros((1, 2)))
    with pytest.raises(ValueError, match=r"user_run must be \(n\+1, 2\) = \(3, 2\)"):
        lattice.Lattice(*base, user_run=np.zeros((3,)))
    with pytest.raises(ValueError, match="NaN"):
        lattice.Lattice(*base, user_run=np.full((3, 2), np.nan))
    lattice.Lattice(*base, persona_run=np.full((2, 2), -np.inf), user_run=[[0, 0]] * 3)


def test_posteriors_of_each_label_sum_to_one():
    rng = np.random.default_rng(3)
    lat = lattice.Lattice(
        emit_persona=rng.normal(size=(9, 6, 3)), emit_user=rng.normal(size=(9, 5, 3)), emit_pause=rng.normal(size=9),
        persona_blank=np.array([False, True, False, False, True, False]),
        log_trans=np.log(np.full((3, 3), 1 / 3)), log_start=np.log(np.full(3, 1 / 3)),
        log_keep=np.log(0.9), log_skip=np.log(0.1), log_phantom=np.log(0.05), max_phantoms=1,
    )
    post = dp.forward_backward(lat)
    per_label = post.persona.sum(axis=(1, 2)) + post.user.sum(axis=(1, 2)) + post.pause.sum(axis=1) + post.phantom
    np.testing.assert_allclose(per_label, 1.0, atol=1e-12)
    # every blank item is a pause or skipped; every text line is in exactly one unit
    assert post.pause[:, 1].sum() <= 1 + 1e-12
    used = np.zeros(6)
    for k in range(1, 4):
        for i in range(6):
            used[i : i + k] += post.persona[:, i, k - 1].sum()
    np.testing.assert_allclose(used[~lat.persona_blank], 1.0, atol=1e-12)


def test_lattice_rejects_bad_shapes_and_knows_infeasible():
    with pytest.raises(ValueError, match="emit_persona must be"):
        lattice.Lattice(np.zeros((2, 3)), np.zeros((2, 1, 1)), np.zeros(2), np.zeros(3, bool), np.zeros((3, 3)), np.zeros(3))
    lat = lattice.Lattice(np.zeros((3, 1, 1)), np.zeros((3, 1, 1)), np.zeros(3), np.zeros(1, bool), np.zeros((3, 3)), np.zeros(3))
    assert not lat.feasible  # 2 lines, 3 labels, no phantom
    assert dp.forward_backward(lat).loglik == -np.inf and dp.viterbi(lat).steps == []


def test_calibrate_shifts_to_the_wanted_total():
    p = np.array([0.1, 0.5, 0.9, 0.2])
    c = calibrate(p, 2.0)
    assert c.sum() == pytest.approx(2.0, abs=1e-6)
    assert np.all(np.diff(c[np.argsort(p)]) > 0)  # the order is kept
    assert calibrate(p, 0).max() < 1e-6 and calibrate(p, 9).min() > 1 - 1e-6


# ----------------------------------------------------------------------------------------------
# hand-built conversations


def _labels(rows: list[dict | str]) -> dict[str, str]:
    """Label lists from per-position dicts; "sig" is the pause signature, "q" a question, "s" a statement."""
    presets = {
        "sig": SIG,
        "q": {"strange": 1, "uneasy": 1, "engage": 1, "active": 1, "self": 0, "empathy": 0},
        "s": {"strange": 1, "uneasy": 1, "engage": 1, "active": 0, "self": 1, "empathy": 3},
        "r": {"strange": 1, "uneasy": 1, "engage": 0, "active": 0, "self": 2, "empathy": 4},
    }
    rows = [presets[r] if isinstance(r, str) else r for r in rows]
    return {f"labeler_{h}": str([r[h] for r in rows]) for h in HEADS}


def _public(tmp_path, convs: list[dict], name: str = "public.csv"):
    records = []
    for c in convs:
        r = {"doc_id": c["doc_id"], "persona_name_original": "꼬마도넛", "user_id": "a1b2", "total_turn": c.get("turns", 2),
             "total_sent": len(c["labels"]), "pause_count": c.get("pauses", 0), "persona_text_all": c["persona"],
             "user_text_all": c["user"]}
        r.update(_labels(c["labels"]))
        records.append(r)
    path = tmp_path / name
    pd.DataFrame(records).to_csv(path, index=False)
    return path


def _rows(result, doc: str) -> pd.DataFrame:
    return result.utterances[result.utterances["doc_id"] == doc].reset_index(drop=True)


def test_uncounted_pauses_are_kept_as_unlabelled_context(tmp_path):
    path = _public(tmp_path, [dict(doc_id="donut_u1_2_4", persona="오늘 뭐 했어?\n\n산책 다녀왔어", user="그냥 쉬었어\n좋다",
                                   pauses=1, labels=["q", "s", "s", "s"])])
    result = align_public(read_public(path), **FAST)
    rows = _rows(result, "donut_u1_2_4")
    rep = result.report.set_index("doc_id").loc["donut_u1_2_4"]
    assert rep["mode"] == "pauses not counted" and rep["pauses_unlabelled"] == 1
    pause = rows[rows["is_pause"]]
    assert len(pause) == 1 and pd.isna(pause["label_position"].iloc[0]) and pause["labeler_self"].isna().all()
    labelled = rows[rows["label_position"].notna()]
    assert labelled["label_position"].tolist() == [0, 1, 2, 3]
    assert sorted(labelled["text"]) == sorted(["오늘 뭐 했어?", "산책 다녀왔어", "그냥 쉬었어", "좋다"])
    # the pause goes right before the persona's next message
    after = rows.index[rows["is_pause"]][0] + 1
    assert rows.loc[after, "text"] == "산책 다녀왔어"


def test_counted_pause_takes_the_signature_position(tmp_path):
    path = _public(tmp_path, [dict(doc_id="donut_u2_2_5", persona="안녕~\n\n다시 왔어", user="반가워요\n어서 와요",
                                   pauses=1, labels=["s", "s", "sig", "s", "s"])])
    result = align_public(read_public(path), **FAST)
    rows = _rows(result, "donut_u2_2_5")
    assert result.report.set_index("doc_id").loc["donut_u2_2_5", "mode"] == "pauses counted"
    pause = rows[rows["is_pause"]]
    assert pause["label_position"].tolist() == [2] and pause["line_start"].tolist() == [1]
    assert rows["label_position"].tolist() == [0, 1, 2, 3, 4]
    assert result.report.set_index("doc_id").loc["donut_u2_2_5", "pause_on_signature"] == 1.0


def test_message_over_two_lines_is_merged_and_trailing_newline_and_blank_user_lines_hold_no_label(tmp_path):
    # the blank line (a counted pause) splits the persona text: the one merge the counts need
    # can only join the two lines after it; the persona text ends with a newline; the user has
    # blank lines between messages
    path = _public(tmp_path, [dict(doc_id="librarian_u3_2_5",
                                   persona="책 좋아해?\n\n나는 요즘 소설을\n읽고 있어\n", user="응 좋아해\n\n\n추천해 줘",
                                   pauses=1, labels=["q", "s", "sig", "s", "q"])])
    result = align_public(read_public(path), **FAST)
    rows = _rows(result, "librarian_u3_2_5")
    rep = result.report.set_index("doc_id").loc["librarian_u3_2_5"]
    assert rep["mode"] == "pauses counted" and rep["merged_lines"] == 1 and rep["multi_line_units"] == 1
    assert rep["blank_lines_skipped"] == 2
    merged = rows[rows["text"] == "나는 요즘 소설을\n읽고 있어"]
    assert len(merged) == 1 and (merged["line_start"].iloc[0], merged["line_end"].iloc[0]) == (2, 4)
    assert (rows["text"].str.strip() != "").sum() == 4  # no row for the trailing newline or blank user lines
    assert rows["label_position"].tolist() == [0, 1, 2, 3, 4]


def test_too_few_lines_is_set_aside_with_the_reason_and_reader_problems_pass_through(tmp_path):
    path = _public(tmp_path, [
        dict(doc_id="care_u4_1_3", persona="응", user="안녕", labels=["s", "s", "s"]),
        dict(doc_id="care_u5_1_2", persona="좋아", user="나도", labels=["s", "q"]),
    ])
    df = pd.read_csv(path)
    df.loc[1, "labeler_self"] = "[1]"  # a list of another length: the reader sets the row aside
    df.to_csv(path, index=False)
    result = align_public(read_public(path), **FAST)
    rep = result.report.set_index("doc_id")
    assert rep.loc["care_u4_1_3", "status"] == "set aside"
    assert "too few lines" in rep.loc["care_u4_1_3", "reason"]
    assert rep.loc["care_u5_1_2", "status"] == "set aside"
    reasons = {p.doc_id: p.reason for p in result.problems}
    assert set(reasons) == {"care_u4_1_3", "care_u5_1_2"} and "too few lines" in reasons["care_u4_1_3"]
    assert result.utterances.empty


def test_confidences_are_probabilities_and_columns_are_complete(tmp_path):
    path = _public(tmp_path, [dict(doc_id="donut_u6_2_5", persona="안녕~\n\n다시 왔어", user="반가워요\n어서 와요",
                                   pauses=1, labels=["s", "s", "sig", "s", "s"])])
    result = align_public(read_public(path), **FAST)
    u = result.utterances
    assert set(ALIGN_COLUMNS) <= set(u.columns)
    assert u["align_confidence"].between(0, 1).all()
    assert u["sent_id"].tolist() == [f"donut_u6_2_5_{k}" for k in range(1, 6)]
    assert list(result.history["iteration"]) == [0, 1]


def test_settings_are_validated():
    with pytest.raises(ValueError, match="model_kind 'bert' is not one of"):
        AlignSettings(model_kind="bert")
    with pytest.raises(ValueError, match="'iterations' must be an integer >= 0"):
        AlignSettings(iterations=-1)
    with pytest.raises(ValueError, match=r"unknown for kind 'tfidf'"):
        AlignSettings(model_settings={"alpha": 1})
    with pytest.raises(ValueError, match="unknown align setting"):
        align_public(None, nonsense=1)


def test_a_non_public_corpus_is_refused(annotated_csv):
    with pytest.raises(ValueError, match="format 'public'"):
        align_public(load_corpus(annotated_csv), **FAST)


# ----------------------------------------------------------------------------------------------
# a synthetic public file with known truth


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    from psyattrs.synth import synthesize, write_public

    folder = tmp_path_factory.mktemp("synthetic")
    syn = synthesize(8, seed=3, min_turns=8, max_turns=14)
    truth = write_public(syn.utterances, syn.conversations, folder / "public.csv", seed=3)
    corpus = read_public(folder / "public.csv")
    result = align_public(corpus, iterations=2, model_settings={"words": "none", "min_df": 1}, keep_history=True)
    return corpus, truth, result


def test_aligner_beats_both_naive_readings_and_improves_over_rounds(synthetic):
    corpus, truth, result = synthetic
    naive = [score_reading(r, truth.order, corpus) for r in (alternating_reading(corpus), pause_anchored_reading(corpus))]
    rounds = [score_reading(s, truth.order, corpus) for s in result.snapshots]
    final = rounds[-1]
    assert final["sentences"] == (~truth.order["is_pause"]).sum()
    assert final["labels_exact"] > max(n["labels_exact"] for n in naive) + 0.1
    assert final["position_exact"] > rounds[0]["position_exact"]
    assert final["labels_exact"] >= final["position_exact"]
    # the report's pause treatment matches the truth for every conversation with pauses
    rep = result.report.set_index("doc_id")
    truth_conv = truth.conversations.set_index("doc_id")
    with_pauses = truth_conv[truth_conv["pause_count"] > 0]
    chosen = rep.loc[with_pauses.index, "mode"] == "pauses counted"
    assert (chosen == with_pauses["pauses_counted"]).mean() >= 0.9


def test_naive_readings_use_one_line_per_label(synthetic):
    corpus, truth, _ = synthetic
    for reading in (alternating_reading(corpus), pause_anchored_reading(corpus)):
        assert (reading["line_end"] - reading["line_start"] == 1).all()
        per_doc = reading.groupby("doc_id")["label_position"]
        assert (per_doc.nunique() == per_doc.size()).all()  # one line per label
        assert set(reading["doc_id"]) == set(corpus.conversations["doc_id"])


def test_score_reading_of_the_truth_is_perfect(synthetic):
    corpus, truth, _ = synthetic
    order = truth.order
    rows = order[order["position"].notna()].rename(columns={"speaker": "person_type", "position": "label_position"})
    rows = rows.assign(align_confidence=1.0)
    score = score_reading(rows, order, corpus)
    assert score["labels_exact"] == 1.0 and score["position_exact"] == 1.0 and score["confident_correct"] == 1.0


# ----------------------------------------------------------------------------------------------
# the CLI


def test_cli_align_writes_table_and_report_and_shows_a_conversation(tmp_path, capsys):
    path = _public(tmp_path, [
        dict(doc_id="donut_u7_2_5", persona="안녕~\n\n다시 왔어", user="반가워요\n어서 와요", pauses=1,
             labels=["s", "s", "sig", "s", "s"]),
        dict(doc_id="care_u8_1_3", persona="응", user="안녕", labels=["s", "s", "s"]),
    ])
    out, report = tmp_path / "aligned.csv", tmp_path / "report.jsonl"
    code = main(["data", "align", str(path), "--out", str(out), "--report", str(report), "--iterations", "1",
                 "--model-kind", "majority", "--quiet"])
    text = capsys.readouterr().out
    assert code == 0
    assert "1 of 2 conversation(s) aligned; 1 set aside" in text and "care_u8_1_3" in text
    lines = [json.loads(x) for x in report.read_text(encoding="utf-8").splitlines()]
    assert [x["doc_id"] for x in lines] == ["donut_u7_2_5", "care_u8_1_3"]
    assert lines[0]["mode"] == "pauses counted" and lines[1]["status"] == "set aside"
    back = load_corpus(out)
    assert back.format == "generic" and len(back.utterances) == 5
    assert back.utterances["labeler_self"].tolist() == [1, 1, 0, 1, 1]

    assert main(["data", "show-aligned", str(out), "--doc", "donut_u7_2_5", "--width", "100"]) == 0
    shown = capsys.readouterr().out.splitlines()
    body = [line for line in shown if line[:4].strip().isdigit()]
    assert len(body) == 5
    left = [line for line in body if "안녕~" in line][0]
    right = [line for line in body if "반가워요" in line][0]
    assert left.index("안녕~") < left.index("|") < right.index("반가워요")
    assert "~ pause ~" in shown[[i for i, line in enumerate(shown) if line[:4].strip() == "3"][0]]
    assert all("sel=" in line and "emp=" in line for line in body)

    # issue 25: without --doc, the conversations are listed; an unknown id names a few of them
    assert main(["data", "show-aligned", str(out)]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert "1 conversation(s)" in listed[0] and listed[1].split()[0] == "conversation"
    assert listed[2].split()[:2] == ["donut_u7_2_5", "5"] and len(listed) == 3
    assert main(["data", "show-aligned", str(out), "--doc", "zzz"]) == 2
    assert "it has 1 conversation(s): donut_u7_2_5 (leave out --doc" in capsys.readouterr().err


def test_cli_align_bad_inputs_exit_2(tmp_path, capsys, annotated_csv):
    code = main(["data", "align", str(annotated_csv), "--out", str(tmp_path / "x.csv"), "--quiet"])
    assert code == 2 and "required column missing" in capsys.readouterr().err
    code = main(["data", "align", str(annotated_csv), "--out", str(tmp_path / "no" / "x.csv")])
    assert code == 2 and "folder does not exist" in capsys.readouterr().err
    path = _public(tmp_path, [dict(doc_id="donut_u9_1_2", persona="안녕", user="반가워", labels=["s", "s"])])
    out = tmp_path / "a.csv"
    assert main(["data", "align", str(path), "--out", str(out), "--model-kind", "majority", "--iterations", "0", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["data", "show-aligned", str(out), "--doc", "donut_u9_1_3"]) == 2
    assert "did you mean ['donut_u9_1_2']" in capsys.readouterr().err
    assert main(["data", "align", str(path), "--out", str(out), "--model-kind", "bert", "--quiet"]) == 2
    assert "not one of" in capsys.readouterr().err


def test_write_aligned_round_trips_through_the_generic_reader(tmp_path):
    path = _public(tmp_path, [dict(doc_id="donut_u10_2_4", persona="오늘 뭐 했어?\n\n산책 다녀왔어", user="그냥 쉬었어\n좋다",
                                   pauses=1, labels=["q", "s", "s", "s"])])
    result = align_public(read_public(path), **FAST)
    back = load_corpus(write_aligned(result, tmp_path / "out.csv"))
    u = back.utterances
    assert len(u) == 5 and u["is_pause"].sum() == 1
    assert math.isnan(u.loc[u["is_pause"], "align_confidence"].iloc[0])
    assert u["text"].tolist() == result.utterances["text"].tolist()


# ----------------------------------------------------------------------------------------------
# training straight from the public file


def test_aligned_corpus_is_cached_per_file(tmp_path, monkeypatch):
    from psyattrs.align import aligned_corpus, cache_folder

    monkeypatch.setenv("PSYATTRS_CACHE", str(tmp_path / "cache"))
    path = _public(tmp_path, [
        dict(doc_id="donut_u11_2_5", persona="안녕~\n\n다시 왔어", user="반가워요\n어서 와요", pauses=1,
             labels=["s", "s", "sig", "s", "s"]),
        dict(doc_id="care_u12_1_3", persona="응", user="안녕", labels=["s", "s", "s"]),
    ])
    settings = AlignSettings(model_kind="majority", iterations=1)
    first = aligned_corpus(read_public(path), settings=settings)
    assert cache_folder() == tmp_path / "cache" / "align"
    cached = list(cache_folder().glob("*/aligned.csv"))
    assert len(cached) == 1
    again = aligned_corpus(read_public(path), settings=settings)
    assert again.record_kind == "sentence" and again.format == "generic"
    pd.testing.assert_series_equal(first.utterances["text"], again.utterances["text"], check_names=False)
    assert again.utterances["labeler_empathy"].tolist() == first.utterances["labeler_empathy"].tolist()
    assert [p.doc_id for p in again.problems] == ["care_u12_1_3"] == [p.doc_id for p in first.problems]
    # other settings, another entry
    aligned_corpus(read_public(path), settings=AlignSettings(model_kind="majority", iterations=0))
    assert len(list(cache_folder().glob("*/aligned.csv"))) == 2


def test_training_config_can_point_at_the_public_file(tmp_path, monkeypatch):
    from pathlib import Path

    from psyattrs.experiments.config import load_config
    from psyattrs.experiments.dataset import read_corpus

    monkeypatch.setenv("PSYATTRS_CACHE", str(tmp_path / "cache"))
    path = _public(tmp_path, [dict(doc_id="donut_u13_2_4", persona="오늘 뭐 했어?\n\n산책 다녀왔어",
                                   user="그냥 쉬었어\n좋다", pauses=1, labels=["q", "s", "s", "s"])])
    config = load_config(Path(__file__).resolve().parents[1] / "experiments" / "majority.yaml",
                         ["data.synthetic=null", f"data.path={path}"])
    table, problems = read_corpus(str(path), config, OPELA)
    assert len(table) == 5 and table["align_confidence"].notna().sum() == 4 and problems == []
    assert sorted(table.loc[table["label_position"].notna(), "text"]) == sorted(["오늘 뭐 했어?", "산책 다녀왔어", "그냥 쉬었어", "좋다"])


# ----------------------------------------------------------------------------------------------
# the text models of message lengths and run ends


def test_token_stats_see_words_that_follow_each_other_inside_lines():
    from psyattrs.align.priors import TokenStats, boundary_features

    lines = ["내 주말 루틴이야", "내 주말 계획은 비밀이야", "오늘 뭐 했어?", "주말 어땠어?", "좋아"]
    stats = TokenStats(lines)
    inside = stats.features("엄마랑 수달 보는 게 내", "주말 루틴이야")  # '내 주말' occurs inside lines
    across = stats.features("오늘 뭐 했어?", "좋아")  # '했어?' ends lines, '좋아' starts one
    assert inside["s:bigram"] == pytest.approx(math.log1p(2)) and across["s:bigram"] == 0.0
    assert inside["s:ends"] < across["s:ends"]  # '내' never ends a line, '했어?' always does
    assert stats.features("", "좋아") == {}
    with_stats = boundary_features(["오늘 뭐 했어?"], ["좋아"], ["p/0"], stats)[0]
    assert with_stats["s:ends"] == across["s:ends"] and with_stats["l1=?"] == 1.0


def test_run_model_learns_where_runs_end_and_scores_as_likelihood_ratios():
    from psyattrs.align.priors import RunModel, boundary_features

    rng = np.random.default_rng(0)
    asks = ["뭐 좋아해?", "어디 가?", "주말에 뭐 했어?", "너는 어때?"]
    says = ["나는 커피 좋아해", "어제 바다 갔어", "오늘 좀 바빴어", "나도 그래"]
    left = [str(rng.choice(asks if k % 2 else says)) for k in range(400)]
    right = [str(rng.choice(says)) for _ in range(400)]
    ends = np.array([k % 2 == 1 for k in range(400)], dtype=float)  # a question ends the run
    model = RunModel(left, right, boundary_features(left, right, ["p/0"] * 400), fold=(np.arange(400) // 2) % 2)
    assert not model.fitted and np.all(model.log_scores() == 0)
    model.fit(leave=0.9 * ends + 0.05, stay=0.9 * (1 - ends) + 0.05)
    assert model.fitted and model.base == pytest.approx(0.5, abs=0.01)
    scores = model.log_scores()
    question = ends == 1
    assert (scores[question, 1] > 0.5).all() and (scores[question, 0] < -0.5).all()  # leave favoured after '?'
    assert (scores[~question, 1] < -0.5).all() and (scores[~question, 0] > 0.5).all()
    before = model.p.copy()
    model.fit(leave=np.zeros(400), stay=np.zeros(400))  # no evidence: nothing changes
    np.testing.assert_array_equal(model.p, before)


def test_run_model_can_be_switched_off_and_is_validated(synthetic):
    corpus, truth, _ = synthetic
    with pytest.raises(ValueError, match="'run_model' must be true or false"):
        AlignSettings(run_model="yes")
    off = align_public(corpus, iterations=2, run_model=False, model_settings={"words": "none", "min_df": 1})
    assert off.settings.run_model is False
    assert score_reading(off.utterances, truth.order, corpus)["labels_exact"] > 0.5


# ----------------------------------------------------------------------------------------------
# aligning with an already trained model


def test_a_trained_model_can_score_the_units(synthetic, tiny_model, tmp_path, capsys):
    corpus, truth, _ = synthetic
    result = align_public(corpus, iterations=2, label_model=tiny_model.folder, keep_history=True)
    naive = score_reading(pause_anchored_reading(corpus), truth.order, corpus)
    rounds = [score_reading(s, truth.order, corpus) for s in result.snapshots]
    assert rounds[-1]["labels_exact"] > naive["labels_exact"] + 0.1
    assert rounds[-1]["labels_exact"] > rounds[0]["labels_exact"]
    from psyattrs import Predictor

    by_uri = align_public(corpus, iterations=1, label_model=Predictor(tiny_model.registered, tracking_uri=tiny_model.tracking_uri))
    assert len(by_uri.utterances) == len(result.utterances)
    with pytest.raises(ValueError, match=r"is an MLflow model: pass label_model=psyattrs.Predictor\('models:/"):
        align_public(corpus, iterations=1, label_model=tiny_model.registered)
    with pytest.raises(TypeError, match="label_model must be a psyattrs model"):
        align_public(corpus, iterations=1, label_model=42)

    out = tmp_path / "aligned.csv"
    src = Path(corpus.source)
    code = main(["data", "align", str(src), "--out", str(out), "--iterations", "1", "--quiet",
                 "--label-model", str(tiny_model.folder)])
    assert code == 0 and len(pd.read_csv(out)) == len(by_uri.utterances)
    assert main(["data", "align", str(src), "--out", str(out), "--label-model", str(tmp_path / "nowhere")]) == 2
    assert "nowhere" in capsys.readouterr().err


def test_a_label_model_for_other_heads_is_refused(synthetic):
    from psyattrs.models import build_model
    from psyattrs.schema import Head, Schema

    corpus, _, _ = synthetic
    other = Schema("two", (Head("strange", {0: "strange", 1: "not"}), Head("mood", {0: "bad", 1: "ok", 2: "good"})))
    table = pd.DataFrame({"doc_id": ["d", "d"], "text": ["a", "b"], "person_type": ["user", "persona"]})
    model = build_model("majority", other)
    model.fit(table, {"strange": np.eye(2)[[0, 1]], "mood": np.eye(3)[[0, 2]]})
    with pytest.raises(ValueError, match=r"does not predict \['uneasy \(2 classes\)'"):
        align_public(corpus, iterations=1, label_model=model)
