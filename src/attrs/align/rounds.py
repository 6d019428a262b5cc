"""The rounds of the public-release aligner (`psyattrs.align`): lattices, and the re-estimation
between rounds.

`Aligner` scores the candidate units of the conversations (`psyattrs.align.conversations`) with
`emissions`, builds one `psyattrs.align.lattice.Lattice` per conversation and treatment, runs the
DP (`align_one`, `decode`) and turns posteriors into training targets and expected counts
(`m_step`). Internal to the aligner: `align_public` is the entry point.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from psyattrs.align import dp, lattice
from psyattrs.align.classifier import ModelScorer, TfidfScorer, unit_matrix
from psyattrs.align.coherence import CoherenceModel
from psyattrs.align.conversations import Candidates, Conversation, Mode
from psyattrs.align.priors import BoundaryModel, Priors, RunModel, SwitchModel
from psyattrs.align.settings import TFIDF_FEATURES, AlignSettings
from psyattrs.data.table import normalize_table
from psyattrs.schema import Schema


# ----------------------------------------------------------------------------------------------
# one conversation, one round


@dataclass
class Fit:
    mode: Mode
    loglik: float
    loglik_other: float
    mode_prob: float
    post: lattice.Posteriors
    path: lattice.Path | None = None  # the best reading, once decoded
    confidence: np.ndarray | None = None  # per step of the path

    def top_posterior(self) -> np.ndarray:
        """(T,) the posterior of each label's most probable unit, times the treatment's posterior."""
        post = self.post
        T = len(post.phantom)
        if T == 0:
            return np.zeros(0)
        flat = np.concatenate([post.persona.reshape(T, -1), post.user.reshape(T, -1), post.pause, post.phantom[:, None]], axis=1)
        return flat.max(axis=1) * self.mode_prob

    def _flat(self) -> np.ndarray:
        post = self.post
        T = len(post.phantom)
        return np.concatenate([post.persona.reshape(T, -1), post.user.reshape(T, -1), post.pause, post.phantom[:, None]], axis=1)

    def _unit(self, code: int) -> tuple:
        """The unit of a column of `_flat`: (kind, first line, lines) in the speaker's text."""
        m, K = self.post.persona.shape[1:]
        n = self.post.user.shape[1]
        if code < m * K:
            return (lattice.PERSONA, int(self.mode.p_items[code // K]), code % K + 1)
        if code < (m + n) * K:
            j, k = divmod(code - m * K, K)
            return (lattice.USER, int(self.mode.u_items[j]), k + 1)
        if code < (m + n) * K + m:
            return (lattice.PAUSE, int(self.mode.p_items[code - (m + n) * K]), 1)
        return (lattice.PHANTOM, -1, 0)

    def placement(self) -> list[tuple]:
        """Per label, the unit of highest posterior: (kind, first line, lines) in the speaker's
        text ((PHANTOM, -1, 0) for a pause without a line)."""
        if len(self.post.phantom) == 0:
            return []
        return [self._unit(code) for code in self._flat().argmax(axis=1).tolist()]

    def unit_posteriors(self, floor: float = 1e-3) -> dict[tuple, float]:
        """{(label, kind, first line, lines): posterior} for the units above `floor`, times the
        treatment's posterior: comparable between rounds whatever treatment each chose."""
        if len(self.post.phantom) == 0:
            return {}
        flat = self._flat() * self.mode_prob
        rows, cols = np.nonzero(flat > floor)
        kind, first, lines = self._units(cols)
        return dict(zip(zip(rows.tolist(), kind, first, lines), flat[rows, cols].tolist()))

    def _units(self, codes: np.ndarray) -> tuple[list[int], list[int], list[int]]:
        """`_unit` of many columns at once: their kinds, first lines and lines (lists of ints)."""
        m, K = self.post.persona.shape[1:]
        n = self.post.user.shape[1]
        kind = np.full(len(codes), lattice.PHANTOM, dtype=np.int64)
        first = np.full(len(codes), -1, dtype=np.int64)
        lines = np.zeros(len(codes), dtype=np.int64)
        p_items, u_items = np.asarray(self.mode.p_items, dtype=np.int64), np.asarray(self.mode.u_items, dtype=np.int64)
        sel = codes < m * K
        kind[sel], first[sel], lines[sel] = lattice.PERSONA, p_items[codes[sel] // K], codes[sel] % K + 1
        sel = (codes >= m * K) & (codes < (m + n) * K)
        j, k = np.divmod(codes[sel] - m * K, K)
        kind[sel], first[sel], lines[sel] = lattice.USER, u_items[j], k + 1
        sel = (codes >= (m + n) * K) & (codes < (m + n) * K + m)
        kind[sel], first[sel], lines[sel] = lattice.PAUSE, p_items[codes[sel] - (m + n) * K], 1
        return kind.tolist(), first.tolist(), lines.tolist()


def item_ids(lookup: np.ndarray, items: np.ndarray, K: int) -> np.ndarray:
    """(n_items, K) candidate ids of the units starting at each item (-1 where impossible: a blank
    item, or lines that are not consecutive in the text because a removed blank lies between)."""
    ids = lookup[items] if len(items) else np.zeros((0, K), dtype=np.int64)
    n = len(items)
    for k in range(2, K + 1):
        end = np.arange(n) + k - 1
        ok = end < n
        ok[ok] = items[end[ok]] - items[ok] == k - 1
        ids[~ok, k - 1] = -1
    return ids


class Aligner:
    """The rounds of `align_public` over prepared conversations."""

    def __init__(self, convs: list[Conversation], schema: Schema, settings: AlignSettings):
        self.convs = convs
        self.schema = schema
        self.settings = settings
        self.cands = Candidates(convs, settings.max_lines)
        self.all_labels = np.concatenate([c.labels for c in convs]) if convs else np.zeros((0, len(schema.heads)), int)
        self.priors0 = Priors.initial(schema, self.all_labels)
        extra = sum(max(0, c.modes[0].x_range(c.T) - 1 - 2 * c.modes[0].max_phantoms) for c in convs)
        self.boundary = BoundaryModel(self.cands.pair_features, extra / max(1, len(self.cands.pair_left)))
        self.switch = SwitchModel(schema, [c.labels for c in convs])
        self.tilt = np.zeros(len(convs))  # per-conversation logit shift of the change probabilities
        rng = np.random.default_rng(settings.seed)
        self.conv_fold = rng.permutation(len(convs)) % settings.folds if convs else np.zeros(0, int)
        self.run = (
            RunModel(self.cands.pair_left_text, self.cands.pair_right_text, self.cands.pair_features,
                     self.conv_fold[self.cands.pair_conv])
            if settings.run_model else None
        )
        self.coherence = None
        self.nonblank = [(np.cumsum(~c.p_blank) - 1, np.cumsum(~c.u_blank) - 1) for c in convs]
        if settings.coherence:
            self.coherence = CoherenceModel(
                [[x for x, b in zip(c.p_text, c.p_blank) if not b] for c in convs],
                [[x for x, b in zip(c.u_text, c.u_blank) if not b] for c in convs],
                self.conv_fold,
                pair_only=settings.coherence_pairs,
                language=schema.language if settings.coherence_morphemes else None,
                use=settings.coherence_use,
                only=settings.coherence_only,
            )
        self.pairs = [  # per conversation and treatment: the line pair at each run-score index
            (self.cands.run_pairs(ci, m.p_items, 0), self.cands.run_pairs(ci, m.u_items, 1))
            for ci, c in enumerate(convs)
            for m in c.modes
        ]
        self.ids = [
            (item_ids(c.lookup[0], m.p_items, c.K), item_ids(c.lookup[1], m.u_items, c.K)) for c in convs for m in c.modes
        ]
        self._mode_index = {}
        i = 0
        for ci, c in enumerate(convs):
            for mi in range(len(c.modes)):
                self._mode_index[(ci, mi)] = i
                i += 1

    # -- scoring ---------------------------------------------------------------------------

    def make_scorer(self):
        s = self.settings
        fold = self.conv_fold[self.cands.conv]
        if s.model_kind == "tfidf":
            # lazy: scikit-learn, not needed by data show-aligned (align/__init__)
            from psyattrs.features.text import TextFeaturizer

            lines = self.cands.line_text
            features = {**TFIDF_FEATURES, **{k: v for k, v in s.model_settings.items() if k not in ("C", "max_iter")}}
            unique = pd.unique(pd.Series(lines, dtype=object))
            try:
                featurizer = TextFeaturizer(self.schema.language, **features).fit(unique)
            except ValueError:  # a tiny corpus where no feature reaches min_df: keep every feature
                featurizer = TextFeaturizer(self.schema.language, **{**features, "min_df": 1}).fit(unique)
            X = unit_matrix(featurizer.transform(lines), self.cands.unit_lines(), self.cands.speaker == 1)
            solver = {k: v for k, v in s.model_settings.items() if k in ("C", "max_iter")}
            return TfidfScorer(self.schema, X, fold, seed=s.seed, **solver)
        return ModelScorer(self.schema, self.unit_table(), fold, s.model_kind, s.model_settings)

    def unit_table(self) -> pd.DataFrame:
        """The candidate units as an utterance table (doc_id, text, person_type), one row each."""
        table = pd.DataFrame(
            {
                "doc_id": [self.convs[i].doc_id for i in self.cands.conv],
                "text": self.cands.text,
                "person_type": np.where(self.cands.speaker == 1, "user", "persona"),
            }
        )
        return normalize_table(table, self.schema)

    def emissions(self, c: Conversation, logp: dict[str, np.ndarray]) -> np.ndarray:
        """(n_candidates of c, T) weighted log P(label | unit) of each candidate unit at each label."""
        a, b = c.cand
        e = np.zeros((b - a, c.T))
        for col, head in enumerate(self.schema.heads):
            e += logp[head.name][a:b][:, c.labels[:, col]]
        return self.settings.emission_weight * e

    def lattice(self, ci: int, mi: int, E: np.ndarray, priors: Priors) -> lattice.Lattice:
        c, mode = self.convs[ci], self.convs[ci].modes[mi]
        ids_p, ids_u = self.ids[self._mode_index[(ci, mi)]]
        a = c.cand[0]

        def emit(ids: np.ndarray) -> np.ndarray:
            local = np.where(ids >= 0, ids - a, 0)
            out = E[local].transpose(2, 0, 1) if len(ids) else np.zeros((c.T, 0, c.K))
            return np.where((ids >= 0)[None], out, -np.inf)

        pauses = bool(mode.p_blank.any() or mode.max_phantoms)
        n_pauses = min(int(mode.p_blank.sum()), c.pause_count) + mode.max_phantoms if pauses else 0
        steps = max(1, c.T - 1 - n_pauses)  # transitions between persona/user units
        wanted = self.switch_target(c, n_pauses, priors)
        wanted = priors.switch * steps if wanted is None else wanted
        q = self.switch.probs(ci, float(np.clip(wanted, 0.02 * steps, 0.95 * steps)) * (c.T - 1) / steps)
        if self.tilt[ci]:
            q = np.clip(q, 1e-9, 1 - 1e-9)
            q = 1 / (1 + np.exp(-(np.log(q) - np.log1p(-q) + self.tilt[ci])))
        log_trans, log_start = priors.log_transitions(q, pauses)
        if pauses and self.settings.pause_rule > 0:  # a pause closes a persona run, the user follows it
            log_trans = log_trans.copy()
            log_trans[:, lattice.USER, lattice.PAUSE] -= self.settings.pause_rule
            log_trans[:, lattice.PAUSE, lattice.PERSONA] -= self.settings.pause_rule
        runs = {}
        if self.run is not None and self.run.fitted:
            scores = self.run.log_scores()
            for name, pair in zip(("persona_run", "user_run"), self.pairs[self._mode_index[(ci, mi)]]):
                runs[name] = np.where((pair >= 0)[:, None], scores[np.maximum(pair, 0)], 0.0)
        log_end = None
        if self.settings.turn_shape > 0:  # the user opens, the persona closes (a pause is the persona's)
            log_start = log_start.copy()
            log_start[[lattice.PERSONA, lattice.PAUSE]] -= self.settings.turn_shape
            log_end = np.array([0.0, -self.settings.turn_shape, 0.0])
        cross = self.cross_scores(ci, mode) if self.coherence is not None and self.coherence.fitted else {}
        return lattice.Lattice(
            emit_persona=emit(ids_p),
            emit_user=emit(ids_u),
            emit_pause=self.settings.emission_weight * priors.log_pause(c.labels, self.schema) if c.T else np.zeros(0),
            persona_blank=mode.p_blank,
            log_trans=log_trans,
            log_start=log_start,
            log_keep=float(np.log1p(-mode.skip)),
            log_skip=float(np.log(mode.skip)) if mode.skip > 0 else -np.inf,
            log_phantom=float(np.log(priors.phantom)) if mode.max_phantoms else -np.inf,
            max_phantoms=mode.max_phantoms,
            log_end=log_end,
            **runs,
            **cross,
        )

    def _pair_index(self, ci: int, mode: Mode) -> tuple[np.ndarray, np.ndarray]:
        """Non-blank line index of each persona item and each user item of a treatment (-1: blank)."""
        c = self.convs[ci]
        nb_p, nb_u = self.nonblank[ci]
        pa = np.where(c.p_blank[mode.p_items], -1, nb_p[mode.p_items]) if len(mode.p_items) else np.zeros(0, int)
        ub = np.where(c.u_blank[mode.u_items], -1, nb_u[mode.u_items]) if len(mode.u_items) else np.zeros(0, int)
        return pa.astype(np.int64), ub.astype(np.int64)

    def cross_scores(self, ci: int, mode: Mode) -> dict[str, np.ndarray]:
        """The coherence model's `persona_user` and `user_persona` of a treatment's lattice."""
        pa, ub = self._pair_index(ci, mode)
        m, n = len(pa), len(ub)
        w = self.settings.coherence_weight
        s_pu, s_up = self.coherence.scores[ci]
        pu, up = np.zeros((m + 1, n + 1)), np.zeros((m + 1, n + 1))
        ok = (pa[:, None] >= 0) & (ub[None, :] >= 0)
        if m and n:
            vals = s_pu[np.maximum(pa, 0)[:, None], np.maximum(ub, 0)[None, :]]
            pu[1:, :n] = np.where(ok, w * vals, 0.0)  # persona item i - 1, then user item j
            vals = s_up[np.maximum(ub, 0)[None, :], np.maximum(pa, 0)[:, None]]
            up[:m, 1:] = np.where(ok, w * vals, 0.0)  # user item j - 1, then persona item i
        return {"persona_user": pu, "user_persona": up}

    def cross_events(self, ci: int, mode: Mode, post: lattice.Posteriors) -> tuple[np.ndarray, ...]:
        """The posterior's changes and states by non-blank line pair (`CoherenceModel.fit`)."""
        c = self.convs[ci]
        pa, ub = self._pair_index(ci, mode)
        n_p, n_u = int((~c.p_blank).sum()), int((~c.u_blank).sum())
        m, n = len(pa), len(ub)
        out = [np.zeros((n_p, n_u)), np.zeros((n_p, n_u)), np.zeros((n_u, n_p)), np.zeros((n_u, n_p))]
        if not (m and n and post.persona_at.size):
            return tuple(out)
        ok = (pa[:, None] >= 0) & (ub[None, :] >= 0)
        rows, cols = np.nonzero(ok)
        for k, arr in enumerate((post.persona_user, post.persona_at)):
            np.add.at(out[k], (pa[rows], ub[cols]), arr[1:, :n][rows, cols])
        for k, arr in enumerate((post.user_persona, post.user_at)):
            np.add.at(out[2 + k], (ub[cols], pa[rows]), arr[:m, 1:][rows, cols])
        return tuple(out)

    def _lattices(self, ci: int, logp: dict[str, np.ndarray], priors: Priors) -> list[lattice.Lattice]:
        c = self.convs[ci]
        E = self.emissions(c, logp)
        lats = []
        for mi, mode in enumerate(c.modes):
            merges = max(0, len(mode.p_items) + len(mode.u_items) - c.T)
            length = self.cands.length_prior(ci, self.boundary.p, merges)
            lats.append(self.lattice(ci, mi, E + length[:, None], priors))
        return lats

    def align_one(self, ci: int, logp: dict[str, np.ndarray], priors: Priors, decode: bool) -> Fit | None:
        """Both pause treatments' likelihoods, the better one's posteriors and, with `decode`, its
        best reading (None when no reading has a finite score)."""
        fit, lat = self._align(ci, logp, priors, decode)
        if fit is not None:
            self._add_posteriors(fit, lat)
        return fit

    def _align(self, ci: int, logp: dict[str, np.ndarray], priors: Priors, decode: bool
               ) -> tuple[Fit | None, lattice.Lattice | None]:
        """`align_one` without the posteriors (the backward pass): the fit and its lattice."""
        lats = self._lattices(ci, logp, priors)
        lls = np.array([dp.log_likelihood(lat) for lat in lats])
        if not np.isfinite(lls).any():
            return None, None
        best = int(np.argmax(lls))
        other = float(np.max(np.delete(lls, best))) if len(lls) > 1 else float("nan")
        prob = 1.0 / (1.0 + np.exp(other - lls[best])) if np.isfinite(other) else 1.0
        fit = Fit(self.convs[ci].modes[best], float(lls[best]), other, float(prob), None)
        if decode:
            fit.path = dp.viterbi(lats[best])
        return fit, lats[best]

    @staticmethod
    def _add_posteriors(fit: Fit, lat: lattice.Lattice) -> None:
        fit.post = dp.forward_backward(lat)
        if fit.path is not None:
            fit.confidence = np.array([step_posterior(fit.post, st) for st in fit.path.steps]) * fit.mode_prob

    def decode(self, ci: int, fit: Fit | None, logp: dict[str, np.ndarray], priors: Priors) -> Fit | None:
        """Adds the best reading to a fit made with the same scores (rebuilding its lattice)."""
        if fit is None or fit.path is not None:
            return fit
        mi = self.convs[ci].modes.index(fit.mode)
        self._decode(fit, self._lattices(ci, logp, priors)[mi])
        return fit

    @staticmethod
    def _decode(fit: Fit, lat: lattice.Lattice) -> None:
        fit.path = dp.viterbi(lat)
        fit.confidence = np.array([step_posterior(fit.post, st) for st in fit.path.steps]) * fit.mode_prob

    @staticmethod
    def speaker_runs(fit: Fit) -> int:
        """Persona/user runs of a fit's best reading (pauses left out)."""
        kinds = [st.kind for st in fit.path.steps if st.kind in (lattice.PERSONA, lattice.USER)]
        return 1 + sum(a != b for a, b in zip(kinds, kinds[1:])) if kinds else 0

    def match_runs(self, ci: int, fit: Fit | None, logp: dict[str, np.ndarray], priors: Priors, tries: int = 10) -> Fit | None:
        """The fit whose best reading has runs_per_turn x total_turn speaker runs, found by
        bisection on the conversation's change shift (`AlignSettings.exact_turns`); the closest
        when none of the tries reaches it (ties: the unshifted fit).

        A reading gains or loses runs mostly two at a time (a run of the other speaker opens inside one),
        so the shifts that give exactly the target can be a narrow window: with 6 tries (a last
        step of about 0.125 in logit) 0.73 of the 135 real conversations reached it, with 10 (0.008)
        0.90 (benchmarks/align_benchmark.py --gold, ALIGN_VERSION 5)."""
        c = self.convs[ci]
        if fit is None or fit.path is None or not np.isfinite(c.total_turn):
            return fit
        target = int(round(self.settings.runs_per_turn * c.total_turn))
        base = float(self.tilt[ci])
        best, best_gap, best_tilt = fit, abs(self.speaker_runs(fit) - target), base
        lo, hi = (base, max(base, 8.0)) if self.speaker_runs(fit) < target else (min(base, -8.0), base)
        best_lat = None  # the tries need the best reading only: the posteriors of the one kept come last
        for _ in range(tries):
            if best_gap == 0:
                break
            mid = (lo + hi) / 2
            self.tilt[ci] = mid
            trial, lat = self._align(ci, logp, priors, decode=True)
            if trial is None:
                break
            runs = self.speaker_runs(trial)
            if abs(runs - target) < best_gap:
                best, best_gap, best_tilt, best_lat = trial, abs(runs - target), mid, lat
            if runs < target:
                lo = mid
            else:
                hi = mid
        self.tilt[ci] = best_tilt
        if best_lat is not None:
            self._add_posteriors(best, best_lat)
        return best

    def update_tilts(self, fits: list[Fit | None], priors: Priors) -> None:
        for ci, f in enumerate(fits):
            if f is not None:
                self._update_tilt(ci, f.mode, f.post, priors)

    def switch_target(self, c: Conversation, n_pauses: int, priors: Priors) -> float | None:
        """Expected persona<->user changes not across a pause: runs_per_turn x total_turn - 1,
        less the pauses expected to sit between two different speakers (None: turns unknown)."""
        if not np.isfinite(c.total_turn):
            return None
        return max(0.0, self.settings.runs_per_turn * c.total_turn - 1 - n_pauses * priors.cross_pause_share())

    def _update_tilt(self, ci: int, mode: Mode, post: lattice.Posteriors, priors: Priors) -> None:
        """One damped Newton step of the conversation's shift toward its expected number of changes."""
        c = self.convs[ci]
        if not self.settings.match_turns or not np.isfinite(c.total_turn) or c.T < 2:
            return
        n_pauses = int(round(post.pause.sum() + post.phantom.sum()))
        target = self.switch_target(c, n_pauses, priors)
        change = post.transitions[:, 0, 1] + post.transitions[:, 1, 0]
        both = post.transitions[:, :2, :2].sum(axis=(1, 2))
        rate = np.divide(change, both, out=np.zeros_like(change), where=both > 0)
        var = float((both * rate * (1 - rate)).sum())
        # half a Newton step: `var` counts the label-based change probabilities only, so with the
        # run model's evidence on top a full step overshoots and the rounds drift (real rows)
        step = 0.5 * (target - change.sum()) / max(var, 1.0)
        self.tilt[ci] = float(np.clip(self.tilt[ci] + step, -6.0, 6.0))

    # -- re-estimation -----------------------------------------------------------------------

    def m_step(self, fits: list[Fit]) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, Any]]:
        """Soft training targets of the units and expected counts for the priors."""
        N = len(self.cands)
        mass = np.zeros(N)
        dist = {h.name: np.zeros((N, h.n_classes)) for h in self.schema}
        pause = {h.name: np.zeros(h.n_classes) for h in self.schema}
        trans, start = np.zeros((3, 3)), np.zeros(3)
        switches = turns = 0.0
        change, both = np.zeros(len(self.switch.p)), np.zeros(len(self.switch.p))
        n_pairs = len(self.cands.pair_left_arr)
        run_stay, run_leave = np.zeros(n_pairs), np.zeros(n_pairs)
        for ci, (c, f) in enumerate(zip(self.convs, fits)):
            if f is None:
                continue
            mi = c.modes.index(f.mode)
            onehot = [np.eye(h.n_classes)[c.labels[:, col]] for col, h in enumerate(self.schema.heads)]
            for ids, post in zip(self.ids[self._mode_index[(ci, mi)]], (f.post.persona, f.post.user)):
                valid = ids >= 0
                if not valid.any():
                    continue
                W = post[:, : ids.shape[0], : ids.shape[1]][:, valid]
                cid = ids[valid]
                mass[cid] += W.sum(axis=0)
                for h, oh in zip(self.schema.heads, onehot):
                    dist[h.name][cid] += W.T @ oh
            for pair, counts in zip(self.pairs[self._mode_index[(ci, mi)]], (f.post.persona_run, f.post.user_run)):
                ok = pair >= 0
                np.add.at(run_stay, pair[ok], counts[ok, 0])
                np.add.at(run_leave, pair[ok], counts[ok, 1])
            w = f.post.pause.sum(axis=1) + f.post.phantom
            for h, oh in zip(self.schema.heads, onehot):
                pause[h.name] += w @ oh
            tr_t = f.post.transitions
            trans += tr_t.sum(axis=0)
            start += f.post.start
            a = self.switch.offsets[ci]
            change[a : a + c.T] = tr_t[:, 0, 1] + tr_t[:, 1, 0]
            both[a : a + c.T] = tr_t[:, :2, :2].sum(axis=(1, 2))
            if np.isfinite(c.total_turn):
                switches += change[a : a + c.T].sum()
                turns += c.total_turn
        coherence = [None] * len(self.convs)
        if self.coherence is not None:
            coherence = [None if f is None else self.cross_events(ci, f.mode, f.post) for ci, f in enumerate(fits)]
        rows = np.flatnonzero(mass >= 0.5)
        targets = {name: d[rows] / mass[rows, None] for name, d in dist.items()}
        cont = self._continuations(mass)
        rate = np.divide(change, both, out=np.zeros_like(change), where=both > 0)
        return rows, targets, {"pause": pause, "trans": trans, "start": start, "switches": switches,
                               "turns": turns, "continuations": cont, "change": rate, "change_weight": both,
                               "run_stay": run_stay, "run_leave": run_leave, "coherence": coherence}

    def _continuations(self, mass: np.ndarray) -> np.ndarray:
        """Posterior that each line pair shares a unit (from the units' posterior mass)."""
        cands = self.cands
        diff = np.zeros(len(cands.line_text) + 1)
        sel = (cands.k >= 2) & (mass > 0)
        np.add.at(diff, cands.first_line[sel], mass[sel])
        np.add.at(diff, cands.first_line[sel] + cands.k[sel] - 1, -mass[sel])
        return np.clip(np.cumsum(diff)[cands.pair_left_arr], 0.0, 1.0)


def step_posterior(post: lattice.Posteriors, st: lattice.Step) -> float:
    if st.kind == lattice.PERSONA:
        return float(post.persona[st.t, st.start, st.k - 1])
    if st.kind == lattice.USER:
        return float(post.user[st.t, st.start, st.k - 1])
    if st.kind == lattice.PAUSE:
        return float(post.pause[st.t, st.start])
    return float(post.phantom[st.t])


