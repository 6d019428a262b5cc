"""The label-free parts of the public-release aligner's score (see `psyattrs.align`), each learnt
from the aligner's own posteriors:

- `BoundaryModel`: P(a line continues into the next line of the same message), a logistic
  regression on the characters around the line break and on where its words sit in the corpus's
  lines (`TokenStats`).
- `RunModel`: P(a speaker's run ends between two of its lines), a logistic regression on the
  text of both lines.
- `SwitchModel`: P(the speaker changes into a label), learnt from the labels themselves.
- `Priors`: the pause label model (starting at `SIGNATURE`) and the speaker-transition model
  (start, persona/user/pause), re-estimated from expected counts after each alignment.

scikit-learn is imported inside the functions that fit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from psyattrs.schema import Schema

SIGNATURE: dict[str, int] = {"strange": 1, "uneasy": 1, "engage": 0, "active": 0, "self": 0, "empathy": 0}
"""The labels a pause sentence carries in OPELA (FORMATS §3): the starting point of the pause model."""


# ----------------------------------------------------------------------------------------------
# message length: where a line continues into the next


_PUNCT = set(".?!~^;)♡♥")


class TokenStats:
    """Where words sit in the corpus's lines: how often a word ends a line, starts a line, and how
    often two words follow each other inside one line. A line break between two words that often
    follow each other inside lines, after a word that rarely ends a line, is likely a message
    broken over lines; the statistics come from the corpus itself, so no labelled pairs are needed.

    Args:
        lines: every non-blank line of the corpus.
    """

    def __init__(self, lines: list[str]):
        from collections import Counter

        self.count: Counter = Counter()
        self.first: Counter = Counter()
        self.last: Counter = Counter()
        self.tail: Counter = Counter()  # last two characters of a word, anywhere
        self.tail_last: Counter = Counter()  # ... of a line's last word
        self.bigram: Counter = Counter()
        for line in lines:
            words = line.split()
            if not words:
                continue
            self.count.update(words)
            self.first[words[0]] += 1
            self.last[words[-1]] += 1
            self.tail.update(w[-2:] for w in words)
            self.tail_last[words[-1][-2:]] += 1
            self.bigram.update(zip(words, words[1:]))

    @staticmethod
    def _logit(k: int, n: int) -> float:
        p = (k + 0.5) / (n + 1.0)
        return float(np.log(p / (1.0 - p)))

    def features(self, a: str, b: str) -> dict[str, float]:
        """Numeric features of a break after line `a` before line `b` (empty dict for a blank side)."""
        wa, wb = a.split(), b.split()
        if not wa or not wb:
            return {}
        x, y = wa[-1], wb[0]
        return {
            "s:ends": self._logit(self.last[x], self.count[x]),
            "s:tail_ends": self._logit(self.tail_last[x[-2:]], self.tail[x[-2:]]),
            "s:starts": self._logit(self.first[y], self.count[y]),
            "s:bigram": float(np.log1p(self.bigram[(x, y)])),
        }


def boundary_features(
    left: list[str], right: list[str], group: list[str], stats: "TokenStats | None" = None
) -> list[dict[str, float]]:
    """Features of the break between a line and the next line of the same speaker.

    Args:
        left: the earlier lines.
        right: the lines that follow them.
        group: a grouping key per pair (persona and speaker), so each group can have its own rate.
        stats: word statistics of the corpus's lines (`TokenStats`), adding how often the words
            around the break end / start lines and follow each other inside lines.

    Returns:
        One feature dict per pair: the last one and two characters before the break, the first
        one and two after it, whether the earlier line ends in punctuation or laughter, length
        buckets of both lines and, with `stats`, the word statistics.
    """
    feats = []
    for a, b, g in zip(left, right, group):
        a_s, b_s = a.rstrip(), b.lstrip()
        last = a_s[-1:] or "<e>"
        first = b_s[:1] or "<e>"
        f = {
            f"g={g}": 1.0,
            f"l1={last}": 1.0,
            f"l2={a_s[-2:]}": 1.0,
            f"r1={first}": 1.0,
            f"r2={b_s[:2]}": 1.0,
            f"la={min(len(a_s) // 8, 6)}": 1.0,
            f"lb={min(len(b_s) // 8, 6)}": 1.0,
            "end_punct": float(last in _PUNCT or last in "ㅋㅎㅠㅜ"),
            "bias": 1.0,
        }
        if stats is not None:
            f.update(stats.features(a_s, b_s))
        feats.append(f)
    return feats


class BoundaryModel:
    """P(line continues into the next line of the same message) for every adjacent line pair.

    Starts from one corpus-wide rate; `fit` learns a logistic regression on `boundary_features`
    from soft targets (the aligner's posterior that the two lines share a unit).

    Args:
        features: one feature dict per pair (`boundary_features`).
        rate: the starting continuation probability of every pair.
    """

    def __init__(self, features: list[dict[str, float]], rate: float):
        from sklearn.feature_extraction import DictVectorizer

        self.vectorizer = DictVectorizer()
        self.X = self.vectorizer.fit_transform(features) if features else sp.csr_matrix((0, 1))
        self.p = np.full(len(features), float(np.clip(rate, 1e-4, 0.5)))

    def fit(self, targets: np.ndarray) -> None:
        """Learns from (n_pairs,) posterior continuation probabilities."""
        from sklearn.linear_model import LogisticRegression

        t = np.clip(np.asarray(targets, dtype=float), 0.0, 1.0)
        if len(t) == 0 or t.max() < 1e-6 or t.min() > 1 - 1e-6:
            return
        X = sp.vstack([self.X, self.X], format="csr")
        y = np.r_[np.ones(len(t)), np.zeros(len(t))]
        w = np.r_[t, 1.0 - t]
        keep = w > 1e-6
        model = LogisticRegression(C=1.0, max_iter=500)
        model.fit(X[keep], y[keep], sample_weight=w[keep])
        self.p = np.clip(model.predict_proba(self.X)[:, 1], 1e-4, 1 - 1e-4)


class RunModel:
    """P(a speaker's run ends between two of its consecutive lines | the lines are two units).

    Where a message ends shows in its text: a question closes it (the partner answers next), an
    answer or a reaction opens the next one. For every pair of consecutive non-blank lines of one
    speaker (the pairs of `BoundaryModel`) a logistic regression on character n-grams of both
    lines and the break features of `boundary_features` gives the probability that the speaker's
    run ends there, given that the two lines are not one unit. It is learnt from the aligner's
    posteriors (expected run ends and continuations at each pair), cross-fitted over
    conversations like the sentence classifier, and enters the DP as a likelihood ratio against
    the corpus-wide rate (`log_scores`), so that where the text says nothing the label-based
    speaker-change model alone decides.

    Args:
        left: the earlier line of each pair; right: the line after it.
        features: `boundary_features` of each pair.
        fold: (n_pairs,) cross-fitting fold of each pair's conversation.
    """

    def __init__(self, left: list[str], right: list[str], features: list[dict[str, float]], fold: np.ndarray):
        from sklearn.feature_extraction import DictVectorizer
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.fold = np.asarray(fold, dtype=np.int64)
        self.n_folds = int(self.fold.max()) + 1 if len(self.fold) else 1
        blocks = [DictVectorizer().fit_transform(features)] if features else []
        for texts in (left, right):
            if texts:
                try:
                    blocks.append(TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 3), min_df=2, sublinear_tf=True).fit_transform(texts))
                except ValueError:  # too few lines for min_df: no n-gram block
                    pass
        self.X = sp.hstack(blocks, format="csr") if blocks else sp.csr_matrix((len(self.fold), 1))
        self.p = np.full(len(self.fold), 0.5)
        self.base = 0.5
        self.fitted = False

    def fit(self, leave: np.ndarray, stay: np.ndarray) -> None:
        """Learns from the expected run ends (`leave`) and run continuations (`stay`) at each pair."""
        from sklearn.linear_model import LogisticRegression

        leave = np.clip(np.asarray(leave, dtype=float), 0.0, None)
        stay = np.clip(np.asarray(stay, dtype=float), 0.0, None)
        total = leave + stay
        if len(total) == 0 or total.sum() < 1.0:
            return
        self.base = float(np.clip(leave.sum() / total.sum(), 1e-3, 1 - 1e-3))
        out = np.full(len(total), self.base)
        for f in range(self.n_folds):
            scored = self.fold == f if self.n_folds > 1 else np.ones(len(total), dtype=bool)
            train = ~scored if self.n_folds > 1 else scored
            t_leave, t_stay = leave[train], stay[train]
            if t_leave.sum() < 1.0 or t_stay.sum() < 1.0:
                continue
            X = self.X[train]
            Xs = sp.vstack([X, X], format="csr")
            y = np.r_[np.ones(X.shape[0]), np.zeros(X.shape[0])]
            w = np.r_[t_leave, t_stay]
            keep = w > 1e-4
            model = LogisticRegression(C=1.0, max_iter=300, tol=1e-3)
            model.fit(Xs[keep], y[keep], sample_weight=w[keep])
            out[scored] = model.predict_proba(self.X[scored])[:, 1]
        self.p = np.clip(out, 1e-3, 1 - 1e-3)
        self.fitted = True

    def log_scores(self) -> np.ndarray:
        """(n_pairs, 2) log-likelihood ratios against the corpus rate: stay, leave (zeros before `fit`)."""
        if not self.fitted:
            return np.zeros((len(self.p), 2))
        return np.column_stack([np.log1p(-self.p) - np.log1p(-self.base), np.log(self.p) - np.log(self.base)])


def calibrate(p: np.ndarray, total: float) -> np.ndarray:
    """p shifted on the logit scale so that it sums to `total` (clipped away from 0 and 1).

    Args:
        p: (n,) probabilities in (0, 1).
        total: the wanted sum; <= 0 or >= n give all-(near-)0 or all-(near-)1.
    """
    eps = 1e-9
    p = np.clip(np.asarray(p, dtype=float), eps, 1 - eps)
    if len(p) == 0:
        return p
    if total <= 0:
        return np.full(len(p), eps)
    if total >= len(p):
        return np.full(len(p), 1 - eps)
    logit = np.log(p) - np.log1p(-p)
    lo, hi = -40.0, 40.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if (1 / (1 + np.exp(-(logit + mid)))).sum() > total:
            hi = mid
        else:
            lo = mid
    return np.clip(1 / (1 + np.exp(-(logit + (lo + hi) / 2))), eps, 1 - eps)


class SwitchModel:
    """P(the speaker changes into label t | the labels at t-1 and at t).

    The labels themselves say where a change is likely: a question is answered by the other
    speaker, a reaction (empathy 2-4) follows the partner's disclosure. A logistic regression on
    the one-hot labels of both positions (and the products of the previous position's `active`
    and `self` with the current `empathy` and `self`) is learnt from the aligner's posterior
    changes; it starts at one rate everywhere. `probs` shifts a conversation's probabilities so
    that their sum is its expected number of changes (from `total_turn`).

    Args:
        schema: the heads.
        labels: the label matrix (T, n_heads) of each conversation.
    """

    CROSS = (("active", "empathy"), ("active", "self"), ("self", "empathy"), ("self", "self"))

    def __init__(self, schema: Schema, labels: list[np.ndarray]):
        from sklearn.feature_extraction import DictVectorizer

        names = schema.head_names
        feats, self.offsets = [], [0]
        for lab in labels:
            for t in range(len(lab)):
                prev = lab[t - 1] if t else None
                f = {"bias": 1.0}
                for c, h in enumerate(names):
                    f[f"c:{h}={lab[t, c]}"] = 1.0
                    if prev is not None:
                        f[f"p:{h}={prev[c]}"] = 1.0
                if prev is not None:
                    for a, b in self.CROSS:
                        if a in names and b in names:
                            f[f"x:{a}={prev[names.index(a)]}:{b}={lab[t, names.index(b)]}"] = 1.0
                else:
                    f["first"] = 1.0
                feats.append(f)
            self.offsets.append(len(feats))
        self.vectorizer = DictVectorizer()
        self.X = self.vectorizer.fit_transform(feats) if feats else sp.csr_matrix((0, 1))
        self.p = np.full(len(feats), 0.5)

    def fit(self, targets: np.ndarray, weights: np.ndarray) -> None:
        """Learns from (n,) posterior change probabilities with (n,) weights (the posterior that
        both sides of the position are persona or user units)."""
        from sklearn.linear_model import LogisticRegression

        t = np.clip(np.asarray(targets, dtype=float), 0.0, 1.0)
        w = np.asarray(weights, dtype=float)
        y = np.r_[np.ones(len(t)), np.zeros(len(t))]
        sw = np.r_[t * w, (1.0 - t) * w]
        keep = sw > 1e-6
        if len(np.unique(y[keep])) < 2:
            return
        X = sp.vstack([self.X, self.X], format="csr")
        model = LogisticRegression(C=1.0, max_iter=500)
        model.fit(X[keep], y[keep], sample_weight=sw[keep])
        self.p = model.predict_proba(self.X)[:, 1]

    def probs(self, ci: int, switches: float) -> np.ndarray:
        """(T,) change probabilities of conversation `ci` summing to `switches` over t >= 1."""
        a, b = self.offsets[ci], self.offsets[ci + 1]
        out = np.zeros(b - a)
        if b - a > 1:
            out[1:] = calibrate(self.p[a + 1 : b], switches)
        return out


# ----------------------------------------------------------------------------------------------
# pause labels and speaker transitions


@dataclass
class Priors:
    """The aligner's label-free model parts (states: 0 persona, 1 user, 2 pause).

    Attributes:
        pause: head -> (K,) label distribution of a pause sentence.
        start: (3,) distribution of the first unit's state.
        to_pause: (2,) rate of pauses after a persona unit, after a user unit.
        after_pause: (3,) distribution of the state after a pause.
        run_ratio: speaker changes per turn (`total_turn`), excluding changes across a pause.
        switch: switch probability used where `total_turn` is unknown.
        skip: P(a blank persona line is not a pause) when there are no more blanks than pauses.
        phantom: P(a pause has no blank line), where `pause_count` exceeds the blank lines.
    """

    pause: dict[str, np.ndarray]
    start: np.ndarray = field(default_factory=lambda: np.array([0.45, 0.45, 0.10]))
    to_pause: np.ndarray = field(default_factory=lambda: np.array([0.03, 0.03]))
    after_pause: np.ndarray = field(default_factory=lambda: np.array([0.5, 0.45, 0.05]))
    run_ratio: float = 1.8
    switch: float = 0.4
    skip: float = 0.02
    phantom: float = 0.01

    def cross_pause_share(self) -> float:
        """Share of pauses expected between two different speakers (persona before, user after or
        the reverse), from the rates of pauses after each speaker and the state after a pause."""
        before = np.asarray(self.to_pause, dtype=float)
        before = before / before.sum() if before.sum() > 0 else np.full(2, 0.5)
        after = np.asarray(self.after_pause[:2], dtype=float)
        after = after / after.sum() if after.sum() > 0 else np.full(2, 0.5)
        return float(before[0] * after[1] + before[1] * after[0])

    @classmethod
    def initial(cls, schema: Schema, labels: np.ndarray) -> "Priors":
        """Starting values: the pause signature where the schema has OPELA's heads, else the
        corpus's label marginals."""
        pause = {}
        for c, head in enumerate(schema.heads):
            marginal = np.bincount(labels[:, c], minlength=head.n_classes).astype(float) + 1.0
            marginal /= marginal.sum()
            if head.name in SIGNATURE and SIGNATURE[head.name] < head.n_classes:
                dist = 0.1 * marginal
                dist[SIGNATURE[head.name]] += 0.9
            else:
                dist = marginal
            pause[head.name] = dist
        return cls(pause=pause)

    def log_pause(self, labels: np.ndarray, schema: Schema) -> np.ndarray:
        """(T,) log P(labels of each position | pause)."""
        return sum(np.log(self.pause[h.name][labels[:, c]]) for c, h in enumerate(schema.heads))

    def log_transitions(self, q: np.ndarray, pauses: bool) -> tuple[np.ndarray, np.ndarray]:
        """(T, 3, 3) log-scores of the state of label t given the last state, and (3,) of the first.

        Between persona and user units the scores are a Markov chain with change probability
        q[t] into label t. The pause entries are relative preferences (the likeliest 1), not
        probabilities: the number of pauses is fixed by the blank lines, so only where they go is
        scored, and a reading without pauses is not favoured for having fewer of them. Without
        pauses the pause state is unreachable.
        """
        q = np.asarray(q, dtype=float)
        before = np.asarray(self.to_pause, dtype=float)
        before = before / before.max() if pauses else np.zeros(2)
        after = np.asarray(self.after_pause, dtype=float)
        after = after / after.max() if pauses else np.array([1.0, 1.0, 0.0])
        trans = np.zeros((len(q), 3, 3))
        trans[:, 0, 0] = trans[:, 1, 1] = 1 - q
        trans[:, 0, 1] = trans[:, 1, 0] = q
        trans[:, 0, 2], trans[:, 1, 2] = before
        trans[:, 2, :] = after
        start = np.asarray(self.start, dtype=float).copy()
        if not pauses:
            start[2] = 0.0
        start = start / start.max()
        with np.errstate(divide="ignore"):
            return np.log(trans), np.log(start)

    def update(
        self,
        schema: Schema,
        pause_counts: dict[str, np.ndarray],
        transitions: np.ndarray,
        start: np.ndarray,
        switches: float,
        turns: float,
        initial: "Priors",
    ) -> "Priors":
        """New priors from expected counts summed over conversations (smoothed toward `initial`).

        Args:
            schema: the heads.
            pause_counts: head -> (K,) expected label counts at pause positions.
            transitions: (3, 3) expected transition counts (conversations whose pauses are counted).
            start: (3,) expected first states.
            switches: expected persona<->user changes; turns: the summed `total_turn` of the same
                conversations.
            initial: the starting priors (pseudo-counts).
        """
        pause = {}
        for h in schema.heads:
            counts = pause_counts[h.name] + 5.0 * initial.pause[h.name]
            pause[h.name] = counts / counts.sum()
        tr = transitions + 0.5
        to_pause = np.array([tr[0, 2] / tr[0].sum(), tr[1, 2] / tr[1].sum()])
        after = tr[2] / tr[2].sum()
        st = start + 0.5
        ratio = switches / turns if turns > 0 else self.run_ratio
        non_pause = tr[:2, :2].sum()
        switch = (tr[0, 1] + tr[1, 0]) / non_pause if non_pause > 0 else self.switch
        return Priors(pause=pause, start=st / st.sum(), to_pause=to_pause, after_pause=after,
                      run_ratio=float(ratio), switch=float(switch), skip=self.skip, phantom=self.phantom)
