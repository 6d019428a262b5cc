"""Reconstructs the sentence order of the OPELA public release (FORMATS §3).

The public file gives each conversation's final labels in chronological order over both speakers,
but the two speakers' lines in separate texts. `align_public` recovers which line(s) each label
belongs to: a monotone merge of the persona and user line lists onto the label positions (each
speaker keeps its own order), chosen to best explain the labels, by exact dynamic programming
over merges (`psyattrs.align.dp`). What a reading may do, as the real release requires:

- a label may take one line or several consecutive non-blank lines of one speaker (a message
  broken over lines; at most `max_lines`);
- blank persona lines are the pauses. Per conversation two treatments compete, decided by
  likelihood: *pauses counted* (each blank persona line holds a label, or is skipped at a small
  prior cost when there are more blanks than `pause_count`; a pause whose blank line is missing
  may hold a label without a line when `pause_count` exceeds the blanks) and *pauses not
  counted* (the blanks hold no label: their pauses are kept as unlabelled context rows);
- blank user lines hold no label (they separate messages);
- the pause signature in the labels is evidence, not a rule: a pause's labels are scored by a
  learnt pause label model that starts at the signature.

A reading's score is the sum over labels of log P(label | its unit) from a sentence classifier,
plus the log-priors of the speaker transitions and of the message lengths:

- speaker changes: a Markov chain over persona and user units whose change probability into each
  label is learnt from the labels themselves (a question is answered by the other speaker, a
  reaction follows the partner's disclosure: `priors.SwitchModel`) and scaled per
  conversation so that the expected number of speaker runs is `runs_per_turn` x `total_turn`;
  pauses are a third state whose place (after which speaker, before which) is learnt;
- where a speaker's run ends: `priors.RunModel`, learnt from the text of the two lines
  around each possible end (a question closes a message, an answer or a reaction opens one),
  as a likelihood ratio on top of the label-based change probability;
- message lengths: where a line continues into the next (`priors.BoundaryModel`, learnt
  from the characters around the break and from where the words around it sit in the corpus's
  lines), scaled per conversation and treatment to the number of lines that treatment must merge.

The loop starts from the priors alone (every unit gets the corpus's label marginals), aligns,
trains the classifier on the aligned units (soft targets: each unit's posterior label
distribution; cross-fitted over conversations so that no conversation's reading scores itself),
re-estimates the priors from expected counts, and realigns, until the most probable units or the
posteriors stop changing (`min_change`), every conversation is frozen (at most `freeze_tol` of its
units changed in `freeze_after` consecutive rounds, or they came back to an earlier round's: it
keeps that round's reading and targets)
or `iterations` rounds are done; the best reading (Viterbi) of each conversation's last round is
the output. With `label_model`, an already trained model scores the
units instead, and only the priors are re-estimated. Forward-backward gives each sentence's
`align_confidence`: the posterior probability that exactly these lines hold exactly this label,
times the posterior of the pause treatment.

The modules of `psyattrs.align` are listed in its `__init__`.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from psyattrs.align.cache import cache_folder, clean_stale, entry_is_sound, write_manifest
from psyattrs.align.classifier import FixedScorer, PriorScorer, TfidfScorer
from psyattrs.align.conversations import COUNTED, NOT_COUNTED, Conversation, read_conversations
from psyattrs.align.output import ALIGN_COLUMNS, REPORT_COLUMNS, report_table, unfit_reason, utterance_table
from psyattrs.align.parallel import Refit, fork_pool, run_jobs
from psyattrs.align.posterior import label_posteriors
from psyattrs.align.rounds import Aligner, Fit
from psyattrs.align.sentvec import encoder_version
from psyattrs.align.settings import AlignSettings
from psyattrs.align.summary import AlignSummary, summarize_alignment
from psyattrs.data.generic import read_generic
from psyattrs.data.output import atomic_output
from psyattrs.data.table import Corpus, Problem, final_column
from psyattrs.errors import OutputFileError, PsyattrsWarning
from psyattrs.schema import Schema

__all__ = [
    "ALIGN_COLUMNS", "COUNTED", "NOT_COUNTED", "REPORT_COLUMNS", "AlignResult", "AlignSettings",
    "align_public", "aligned_corpus", "aligned_corpus_summary", "cache_folder", "output_columns", "write_aligned",
    "write_report",
]  # fmt: skip


@dataclass
class AlignResult:
    """What `align_public` returns.

    Attributes:
        utterances: the reconstructed utterance table (columns of `psyattrs.data.table` plus
            `ALIGN_COLUMNS`), one row per sentence in chronological order: `position` is the row
            order in the conversation, `sent_id` `{doc_id}_{position + 1}`, `labeler_{head}` the
            final labels (<NA> on pause rows whose labels the release left out), `text` the
            lines joined with "\\n" ("" for a pause), `align_confidence` in [0, 1],
            `label_position` the index into the release's label lists (<NA> for an unlabelled
            pause), `line_start`/`line_end` the lines (0-based, end exclusive, numbered as
            `read_public` numbers them) in that speaker's text (<NA> for a pause without a line),
            `align_mode` the conversation's pause treatment.
        report: one row per conversation of the corpus (see `REPORT_COLUMNS`).
        problems: the conversations set aside: the reader's and those no reading fits.
        history: one row per round: `iteration` (0 = priors only), `changed` (share of labels
            whose most probable unit changed since the previous round; NaN for round 0), `moved`
            (mean over labels of the total variation between this round's and the previous
            round's posteriors over units: near-tied readings flipping barely move it),
            `loglik_per_label`, `mean_top_posterior` (mean over labels of the posterior of the
            most probable unit), `pauses_counted` (conversations), `frozen` (conversations
            frozen so far: `AlignSettings.freeze_after`), `align_seconds` (the DP),
            `seconds` (the whole round: the DP, then training the classifier and the priors) and
            `stopped` (`stopped` below, the same on every row: the cache keeps it).
        snapshots: with `keep_history`, the utterance table of every round.
        settings: the settings used.
        schema: the heads.
        stopped: how the rounds stopped: `converged` (every conversation frozen, or at most
            `min_change` of the labels changed unit, or of their posterior mass moved, in the
            last round), `cap` (`iterations` rounds done first) or `empty` (no conversation to
            align). Per conversation, the report's `rounds_stop` says `settled`, `flipping`, `cycle`
            or `open` (still changing when the rounds stopped) and `frozen_round` when.
        self_trained: the lines were scored by a classifier trained on the rounds' own readings
            (False: by a `label_model` trained elsewhere).
        label_posteriors: per head, (len(utterances), n_classes): each sentence's label
            distribution from forward-backward (`psyattrs.align.posterior`; NaN rows for the
            pauses without labels): soft training targets.
    """

    utterances: pd.DataFrame
    report: pd.DataFrame
    problems: list[Problem]
    history: pd.DataFrame
    settings: AlignSettings
    schema: Schema
    snapshots: list[pd.DataFrame] = field(default_factory=list)
    source: Any = None
    stopped: str = ""
    self_trained: bool = True
    label_posteriors: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def summary(self) -> AlignSummary:
        """What the reconstruction knows and whether to trust it (`psyattrs.align.summary`)."""
        return summarize_alignment(self.report, self.utterances["align_confidence"], self.history,
                                   stopped=self.stopped, self_trained=self.self_trained)

    def to_corpus(self) -> Corpus:
        """The reconstructed corpus as an utterance-level `Corpus` (format `generic`: final labels only)."""
        conv = self.report.loc[self.report["status"] == "aligned", ["doc_id", "persona"]].copy()
        conv["n_utterances"] = conv["doc_id"].map(self.utterances.groupby("doc_id").size()).fillna(0).astype("int64")
        return Corpus(
            utterances=self.utterances,
            schema=self.schema,
            format="generic",
            source=self.source,
            conversations=conv.reset_index(drop=True),
            problems=list(self.problems),
            n_read=len(self.utterances),
            record_kind="sentence",
        )


# ----------------------------------------------------------------------------------------------
# the rounds


def align_public(
    corpus: Corpus,
    *,
    settings: AlignSettings | None = None,
    progress: bool = False,
    keep_history: bool = False,
    label_model: Any = None,
    workers: int | None = None,
    **overrides: Any,
) -> AlignResult:
    """Reconstructs the chronological sentence order of a public-release corpus (module docstring).

    Args:
        corpus: what `read_public` (or `load_corpus(..., format="public")`) returns.
        settings: an `AlignSettings`; keyword `overrides` (e.g. `iterations=3`,
            `model_kind="majority"`) replace its fields.
        progress: show a progress bar per round on a terminal, and one line per round on standard
            error (the round, the conversations, what changed, the time left at most).
        keep_history: keep the utterance table of every round in `AlignResult.snapshots`.
        label_model: an already trained model to score the units with instead of a classifier
            trained on the rounds' own alignments (`model_kind` is then unused): a fitted
            `psyattrs.models` model, a saved model folder (`MultiHeadModel.save`) or a
            `psyattrs.Predictor` (which loads models:/ and runs:/ URIs and MLflow model folders:
            `label_model=Predictor("models:/NAME@champion")`), predicting the corpus's heads. Its
            predictions stay fixed; the priors are still re-estimated every round.
        workers: processes that align the conversations of a round side by side (None: the CPUs
            this process may use, at most 8; 1: in this process). Forked on Linux only (elsewhere
            one process); the output is the same whatever the number.

    Returns:
        `AlignResult`: the utterance table, the per-conversation report, the problems (the
        reader's and the conversations with too few lines for their labels) and the rounds.

    Raises:
        ValueError: a corpus that is not the public release, or a bad setting (named).
    """
    base = settings or AlignSettings()
    if not isinstance(base, AlignSettings):
        raise TypeError(f"settings must be an AlignSettings, got {type(base).__name__}")
    unknown = sorted(set(overrides) - set(AlignSettings.__dataclass_fields__))
    if unknown:
        raise ValueError(f"unknown align setting(s) {unknown}; allowed: {sorted(AlignSettings.__dataclass_fields__)}")
    s = AlignSettings(**{**base.to_dict(), **overrides})
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"workers must be a whole number >= 1, got {workers!r}")
    # lazy: scikit-learn, not needed by data show-aligned (align/__init__); loaded before the limit
    # below, which reaches only the thread pools already loaded: SciPy's own OpenBLAS (under the
    # solvers' L-BFGS-B) and scikit-learn's OpenMP load with them and kept every CPU's thread
    # when imported inside it (issue 27)
    import sklearn.linear_model  # noqa: F401
    from threadpoolctl import threadpool_limits

    # one BLAS thread: the solvers' threads spin on busy cores (a logistic regression of the
    # rounds' size fitted 6-8x faster with one thread on two shared cores), and the workers are
    # the parallelism
    with threadpool_limits(limits=1):
        return _align_public(corpus, s, progress, keep_history, label_model,
                             _default_workers() if workers is None else workers)


def _align_public(corpus: Corpus, s: AlignSettings, progress: bool, keep_history: bool, label_model: Any,
                  workers: int) -> AlignResult:
    schema = corpus.schema
    fixed_model = _label_model(label_model, schema) if label_model is not None else None
    convs, unfit = read_conversations(corpus)
    aligner = Aligner(convs, schema, s)
    priors = aligner.priors0
    logp = PriorScorer(schema, aligner.all_labels, len(aligner.cands)).log_proba()
    scorer = None
    history, snapshots = [], []
    previous: list[list[tuple]] | None = None
    previous_post: list[dict[tuple, float]] | None = None
    fits: list[Fit | None] = []
    rounds = _ConversationRounds(len(convs), s.freeze_after, s.freeze_tol, s.freeze_ramp)
    for it in range(s.iterations + 1):
        started = time.perf_counter()
        last = it == s.iterations
        decode = keep_history or last
        todo = [ci for ci in range(len(convs)) if not rounds.frozen(ci)]
        got = dict(zip(todo, _map(lambda ci: aligner.align_one(ci, logp, priors, decode), todo, aligner, workers,
                                  progress, it)))
        fits = [rounds.held[ci] if rounds.frozen(ci) else got[ci] for ci in range(len(convs))]
        placements = [f.placement() if f else [] for f in fits]
        changed = _changed(previous, placements)
        previous = placements
        posteriors = [f.unit_posteriors() if f else {} for f in fits]
        moved = _moved(previous_post, posteriors)
        previous_post = posteriors
        now = rounds.settle(it, placements)  # frozen now: their best readings under these scores
        finals = _map(lambda ci: _final_fit(aligner, ci, fits[ci], logp, priors, s), now, aligner, workers)
        for ci, final in zip(now, finals):
            rounds.held[ci] = fits[ci]
            rounds.output[ci] = final
        converged = it > 0 and (min(changed, moved) <= s.min_change or rounds.all_frozen())
        done = last or converged or not convs
        stopped = "empty" if not convs else "converged" if converged else "cap"
        if done:  # the best readings of the final scores (the frozen ones: of the scores they froze under)
            todo = [ci for ci in range(len(convs)) if not rounds.frozen(ci)]
            got = dict(zip(todo, _map(lambda ci: _final_fit(aligner, ci, fits[ci], logp, priors, s), todo, aligner,
                                      workers)))
            out = [rounds.output[ci] if rounds.frozen(ci) else got[ci] for ci in range(len(convs))]
        align_seconds = time.perf_counter() - started
        if keep_history:
            snapshots.append(utterance_table(convs, out if done else rounds.merged(fits), schema))
        if not done:
            aligner.update_tilts([None if rounds.frozen(ci) else f for ci, f in enumerate(fits)], priors)
            rows, targets, counts = aligner.m_step(fits)
            if scorer is None:
                scorer = aligner.make_scorer() if fixed_model is None else FixedScorer(schema, fixed_model, aligner.unit_table())
            _refit(aligner, scorer, rows, targets, counts, workers)
            fresh = scorer.log_proba()
            if it > 0 and s.damping > 0:  # mix with the last round's classifier: the rounds settle
                logp = {h: np.logaddexp(np.log1p(-s.damping) + fresh[h], np.log(s.damping) + logp[h]) for h in fresh}
            else:
                logp = fresh
            priors = priors.update(schema, counts["pause"], counts["trans"], counts["start"], counts["switches"],
                                   counts["turns"], aligner.priors0)
        history.append(_round_summary(it, changed, moved, fits, convs, align_seconds, time.perf_counter() - started,
                                      rounds.n_frozen()))
        if progress:
            _log_round(history, s.iterations, len(convs), done)
        if done:
            break
    fits = out
    utterances = utterance_table(convs, fits, schema)
    report = report_table(corpus, convs, fits, unfit, schema)
    report = rounds.add_to_report(report, convs)
    problems = list(corpus.problems) + [
        Problem(c.doc_id, unfit_reason(c), "persona_text_all/user_text_all") for c in unfit
    ] + [Problem(c.doc_id, "no reading of the lines scores above zero probability", "labels")
         for c, f in zip(convs, fits) if f is None]
    history = pd.DataFrame(history)
    history["stopped"] = stopped
    return AlignResult(utterances, report, problems, history, s, schema, snapshots, corpus.source, stopped,
                       self_trained=fixed_model is None, label_posteriors=label_posteriors(convs, fits, schema))


def _refit(aligner: Aligner, scorer, rows: np.ndarray, targets: dict[str, np.ndarray], counts: dict[str, Any],
           workers: int) -> None:
    """The models learnt between rounds, side by side in `workers` processes (`run_jobs`): the
    sentence classifier per fold and head (a `TfidfScorer`; another scorer fits here first), the
    coherence, run-end, line-continuation and speaker-change models. None depends on another."""
    jobs: list = []
    if isinstance(scorer, TfidfScorer):
        jobs = scorer.jobs(rows, targets)
    else:
        scorer.fit(rows, targets)
    refits = [Refit(aligner.boundary, ("p",), counts["continuations"]),
              Refit(aligner.switch, ("p",), counts["change"], counts["change_weight"])]
    if aligner.run is not None:
        refits.insert(0, Refit(aligner.run, ("p", "base", "fitted"), counts["run_leave"], counts["run_stay"]))
    if aligner.coherence is not None:
        refits.insert(0, Refit(aligner.coherence, ("scores", "coef", "base", "fitted"), counts["coherence"]))
    results = run_jobs(refits + jobs, workers)  # the slowest first: the coherence and run models
    for refit, state in zip(refits, results):
        refit.apply(state)
    if jobs:
        scorer.collect(results[len(refits):])


def _default_workers() -> int:
    import os

    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(8, cpus))


_WORK: Any = None
"""(function of a conversation index, the Aligner): what the forked workers of `_map` call."""


def _map(fn, cis: list[int], aligner: Aligner, workers: int, progress: bool = False, round_no: int = 0
         ) -> list[Fit | None]:
    """`fn(ci)` (a `Fit` or None) for each conversation index, in `workers` forked processes (Linux;
    elsewhere, or for one conversation, in this one). The workers inherit the round's state; each
    fit comes back with its treatment re-attached (its index travels, not a copy) and the
    conversation's change shift (`match_runs` sets it)."""
    import sys

    if workers <= 1 or len(cis) < 2 or not sys.platform.startswith("linux"):
        return [fn(ci) for ci in _progress(cis, progress, round_no)]
    global _WORK
    _WORK = (fn, aligner)
    try:
        with fork_pool(min(workers, len(cis))) as pool:
            got = list(_progress(pool.imap(_work, cis), progress, round_no, total=len(cis)))
    finally:
        _WORK = None
    out = []
    for ci, (fit, mi, tilt) in zip(cis, got):
        if fit is not None:
            fit.mode = aligner.convs[ci].modes[mi]
        aligner.tilt[ci] = tilt
        out.append(fit)
    return out


def _work(ci: int) -> tuple[Fit | None, int, float]:
    from dataclasses import replace

    fn, aligner = _WORK
    fit = fn(ci)
    tilt = float(aligner.tilt[ci])
    if fit is None:
        return None, -1, tilt
    mi = next(k for k, m in enumerate(aligner.convs[ci].modes) if m is fit.mode)
    return replace(fit, mode=None), mi, tilt


def _final_fit(aligner: Aligner, ci: int, fit: Fit | None, logp: dict[str, np.ndarray], priors, s: AlignSettings
               ) -> Fit | None:
    """A fit's best reading under the scores it was made with (and, with `exact_turns`, the shift
    that gives it 2 x total_turn runs)."""
    fit = aligner.decode(ci, fit, logp, priors)
    return aligner.match_runs(ci, fit, logp, priors) if s.exact_turns else fit


class _ConversationRounds:
    """Which conversations have stopped changing, and why (`AlignSettings.freeze_after`).

    A conversation whose most probable units are the same in `freeze_after` consecutive rounds
    has `settled`; one where at most `tol` of its labels changed unit in each of them (the
    tolerance growing linearly from 0 at round 0 to `tol` at round `ramp`) is `flipping` (a few near-tied readings flipping as the classifier is retrained on them); one
    whose units return to those of an earlier round that is not the last one is in a `cycle`.
    Each is frozen: its reading and training targets stay those of that round, so the rounds are a
    fixed-point iteration over the conversations still open, and stop when none is left.
    """

    def __init__(self, n: int, freeze_after: int, tol: float = 0.0, ramp: int = 0):
        self.freeze_after, self.tol, self.ramp = freeze_after, tol, ramp
        self.exact = [True] * n  # no label changed in the rounds counted by `still`
        self.reason: list[str] = ["open"] * n
        self.at: list[int] = [-1] * n
        self.still = [0] * n  # consecutive rounds without a change
        self.seen: list[list[tuple]] = [[] for _ in range(n)]  # the placements of the rounds so far
        self.held: list[Fit | None] = [None] * n  # the fit each frozen conversation keeps (training)
        self.output: list[Fit | None] = [None] * n  # its best reading

    def frozen(self, ci: int) -> bool:
        return self.reason[ci] != "open"

    def n_frozen(self) -> int:
        return sum(r != "open" for r in self.reason)

    def all_frozen(self) -> bool:
        return bool(self.reason) and self.n_frozen() == len(self.reason)

    def merged(self, fits: list[Fit | None]) -> list[Fit | None]:
        return [self.output[ci] if self.frozen(ci) else f for ci, f in enumerate(fits)]

    def settle(self, it: int, placements: list[list[tuple]]) -> list[int]:
        """Records round `it`'s placements; returns the conversations that freeze now."""
        if self.freeze_after <= 0:
            return []
        now = []
        for ci, p in enumerate(placements):
            if self.frozen(ci):
                continue
            key = tuple(p)
            seen = self.seen[ci]
            diff = _changed([list(seen[-1])], [p]) if seen else 1.0
            if seen and key in seen[:-1] and diff > 0:
                self.reason[ci], self.at[ci] = "cycle", it
                now.append(ci)
            elif diff <= self.tol * (min(1.0, it / self.ramp) if self.ramp > 0 else 1.0):
                self.still[ci] += 1
                self.exact[ci] = self.exact[ci] and diff == 0
                if self.still[ci] >= self.freeze_after:
                    self.reason[ci], self.at[ci] = "settled" if self.exact[ci] else "flipping", it
                    now.append(ci)
            else:
                self.still[ci], self.exact[ci] = 0, True
            seen.append(key)
        return now

    def add_to_report(self, report: pd.DataFrame, convs: list[Conversation]) -> pd.DataFrame:
        """The report's `rounds_stop` (settled, flipping, cycle or open: still changing when the rounds
        stopped) and `frozen_round` (the round it froze at; <NA> for open) per aligned conversation."""
        reason = {c.doc_id: r for c, r in zip(convs, self.reason)}
        at = {c.doc_id: a for c, a in zip(convs, self.at) if a >= 0}
        report = report.copy()
        aligned = report["status"] == "aligned"
        report["rounds_stop"] = report["doc_id"].map(reason).where(aligned)
        report["frozen_round"] = report["doc_id"].map(at).where(aligned).astype("Int64")
        return report


def _label_model(model: Any, schema: Schema):
    """The fitted model behind `label_model`, checked to predict the corpus's heads.

    MLflow models are loaded by the serving stage (`psyattrs.Predictor`), which sits above this one.
    """
    # lazy: scikit-learn, not needed by data show-aligned (align/__init__)
    from psyattrs.models.base import MultiHeadModel, load_model

    if isinstance(model, (str, Path)):
        text = str(model)
        if text.startswith(("models:", "runs:")) or "://" in text or (Path(text) / "MLmodel").is_file():
            raise ValueError(f"label model {text!r} is an MLflow model: pass label_model=psyattrs.Predictor({text!r})")
        inner, source = load_model(text), text
    else:
        inner = getattr(model, "model", model)  # a psyattrs.Predictor holds its fitted model as .model
        source = getattr(model, "source", f"{type(model).__name__} object")
    if not isinstance(inner, MultiHeadModel):
        raise TypeError(f"label_model must be a psyattrs model, a saved model folder or a Predictor, got {type(model).__name__}")
    model_schema = inner.schema
    theirs = {h.name: h.n_classes for h in model_schema}
    missing = [f"{h.name} ({h.n_classes} classes)" for h in schema if theirs.get(h.name) != h.n_classes]
    if missing:
        raise ValueError(f"label model {source} does not predict {missing} of the corpus; it predicts {theirs}")
    return inner


def _progress(it, on: bool, round_no: int, total: int | None = None):
    import sys

    if not on or not sys.stderr.isatty():
        return it
    from tqdm.auto import tqdm

    return tqdm(it, desc=f"align round {round_no}", leave=False, total=total)


def _log_round(history: list[dict], cap: int, n_conv: int, done: bool) -> None:
    """One line on standard error per round: which round, how many conversations, what changed,
    and the time left at most (the rounds still allowed at the mean round's pace)."""
    import sys

    h = history[-1]
    it = int(h["iteration"])
    change = "priors only" if it == 0 else f"{h['changed']:.1%} of labels changed unit"
    if h.get("frozen"):
        change += f", {h['frozen']} conversation(s) frozen"
    seconds = float(np.mean([r["seconds"] for r in history]))
    left = "done" if done else f"at most ~{(cap - it) * seconds / 60:.1f} min left ({cap - it} round(s) at most)"
    print(f"align round {it} of at most {cap}: {n_conv} conversations, {change}, {h['seconds']:.0f}s; {left}",
          file=sys.stderr, flush=True)


def _changed(previous: list[list[tuple]] | None, current: list[list[tuple]]) -> float:
    if previous is None:
        return float("nan")
    total = sum(len(p) for p in current)
    diff = sum(sum(a != b for a, b in zip(p, q)) + abs(len(p) - len(q)) for p, q in zip(previous, current))
    return diff / total if total else 0.0


def _moved(previous: list[dict[tuple, float]] | None, current: list[dict[tuple, float]]) -> float:
    """Mean over labels of the total variation between two rounds' posteriors over units."""
    if previous is None:
        return float("nan")
    total = moved = 0.0
    for p, q in zip(previous, current):
        labels = {key[0] for key in q} | {key[0] for key in p}
        total += len(labels)
        moved += 0.5 * sum(abs(q.get(key, 0.0) - p.get(key, 0.0)) for key in p.keys() | q.keys())
    return moved / total if total else 0.0


def _round_summary(
    it: int, changed: float, moved: float, fits: list[Fit | None], convs: list[Conversation], align_seconds: float,
    seconds: float, frozen: int = 0,
) -> dict:
    ok = [f for f in fits if f is not None]
    n_labels = sum(c.T for c, f in zip(convs, fits) if f is not None)
    conf = np.concatenate([f.top_posterior() for f in ok]) if ok else np.zeros(0)
    return {
        "iteration": it,
        "changed": changed,
        "moved": moved,
        "loglik_per_label": sum(f.loglik for f in ok) / n_labels if n_labels else float("nan"),
        "mean_top_posterior": float(conf.mean()) if len(conf) else float("nan"),
        "pauses_counted": sum(f.mode.name == COUNTED and bool(f.mode.p_blank.any() or f.mode.max_phantoms) for f in ok),
        "frozen": frozen,
        "align_seconds": round(align_seconds, 2),
        "seconds": round(seconds, 2),
    }


# ----------------------------------------------------------------------------------------------
# files


def output_columns(schema: Schema) -> list[str]:
    """Columns `write_aligned` writes, in order: the annotated layout's (FORMATS §2) that the
    public release can fill, the final labels, then the aligner's own."""
    return (
        ["doc_id", "sent_id", "person_type", "person_name", "person_name_original", "is_pause", "text", "person_id"]
        + [final_column(h) for h in schema.head_names]
        + ["persona", "position", *ALIGN_COLUMNS]
    )


def write_aligned(result: AlignResult, path: "str | Path") -> Path:
    """Writes the reconstructed utterance table as CSV (UTF-8, `is_pause` 0/1, empty cells for <NA>).

    Read back with `load_corpus` it is a `generic` corpus with final labels.

    Returns:
        The path written (parent folders are created).
    """
    table = result.utterances[output_columns(result.schema)].copy()
    table["is_pause"] = table["is_pause"].astype(np.int64)
    p = Path(path)
    with atomic_output(p, make_parents=True) as tmp:  # complete or absent
        table.to_csv(tmp, index=False, encoding="utf-8", lineterminator="\n")
    return p


def write_report(result: AlignResult, path: "str | Path") -> Path:
    """Writes the per-conversation report as JSON lines (one object per conversation; NaN as null)."""
    p = Path(path)
    with atomic_output(p, make_parents=True) as tmp:
        result.report.to_json(tmp, orient="records", lines=True, force_ascii=False)
    return p


ALIGN_VERSION = 7
"""Bumped when the aligner's output changes, so cached alignments are redone.

7 (issue 27): every solver at one thread (SciPy's OpenBLAS had kept two), so the solvers' sums run
in another order: on the 135 real rows the rounds diverge from round 3 on through near-tied
readings, and 1,092 of 15,661 sentences (in 88 conversations) are placed differently from
ALIGN_VERSION 6, with the same share of the gold conversations' agreed user lines placed right
(0.782) and 0.483 of them at confidence >= 0.9 (0.931 right) against 0.507 (0.935). Measured again
on 2026-12-07 with the same settings, the code of this bump (fb71fd6), of 37237a0, of 2026-12-06
and of today all place 0.777 (one line of the 211 fewer): the code did not change the
reading; the earlier 0.782 was not reproduced and its cause is not known."""


def cache_entry(corpus: Corpus, settings: AlignSettings | None = None) -> Path | None:
    """The cache folder of one file's alignment under some settings (None: a corpus without a
    source file): a key made of the file's bytes, the settings, the schema and `ALIGN_VERSION`.
    `aligned_corpus` (training) and `psyattrs data align` share it."""
    import hashlib
    import json

    if corpus.source is None:
        return None
    settings = settings or AlignSettings()
    digest = hashlib.sha256(Path(corpus.source).read_bytes())
    key = settings.to_dict()
    if not settings.coherence_use and not settings.coherence_only:  # the keys of before the encoder stay valid
        del key["coherence_use"], key["coherence_only"]
    elif settings.coherence_use:  # another encoder version, another alignment
        key["encoder"] = encoder_version()
    digest.update(json.dumps({"settings": key, "version": ALIGN_VERSION, "schema": corpus.schema.to_dict()},
                             sort_keys=True, default=str).encode())
    return cache_folder() / digest.hexdigest()[:24]


CACHE_FILES = ("aligned.csv", "report.jsonl", "history.csv")
"""What a cache entry holds: `write_aligned`'s table, `write_report`'s report, the rounds (and
`psyattrs.align.cache.MANIFEST`, their sizes, line counts and checksums, written last)."""


def cached_alignment(corpus: Corpus, *, settings: AlignSettings | None = None, progress: bool = False,
                     workers: int | None = None) -> tuple[Path | None, AlignResult | None]:
    """The alignment of a public file, from the cache or made now and cached.

    A cached entry is read only when every file matches the manifest written with it
    (`psyattrs.align.cache`); a damaged one is discarded with one warning and made again.
    Temporary files left in the cache by killed processes are removed on the way.

    Returns:
        (the cache folder holding `CACHE_FILES`, or None for a corpus without a source file or
        when the cache could not be written (a warning says why);
        the `AlignResult` when the alignment ran now, None when it came from the cache).
    """
    folder = cache_entry(corpus, settings)
    if folder is not None:
        clean_stale(folder.parent)
        if entry_is_sound(folder, CACHE_FILES):  # every file checked against the manifest
            return folder, None
    result = align_public(corpus, settings=settings, progress=progress, workers=workers)
    if folder is not None:
        try:  # each file complete or absent (atomic_output); the manifest last: it marks a complete entry
            write_report(result, folder / "report.jsonl")
            with atomic_output(folder / "history.csv", make_parents=True) as tmp:
                result.history.to_csv(tmp, index=False)
            write_aligned(result, folder / "aligned.csv")
            write_manifest(folder, CACHE_FILES)
        except OutputFileError as exc:  # the cache only saves time: the alignment itself is not lost
            warnings.warn(f"the alignment was not cached ({exc}); it is used as it is and redone next time",
                          PsyattrsWarning, stacklevel=2)
            return None, result
    return folder, result


def aligned_corpus(corpus: Corpus, *, settings: AlignSettings | None = None, cache: bool = True,
                   progress: bool = True) -> Corpus:
    """The public release as an utterance-level corpus: `align_public`, cached per file and settings.

    This is how training reads the public file directly (`data.path` pointing at it): the
    alignment runs once and is kept in `cache_folder()` (`cache_entry`: the same entry
    `psyattrs data align` uses with the same settings); later reads of the same file load the
    cached table. `aligned_corpus_summary` also returns what the reconstruction knows.

    Args:
        corpus: what `read_public` returns (its `source` file is hashed for the key; without a
            source nothing is cached).
        settings: the aligner's settings (default `AlignSettings()`).
        cache: False always aligns and writes nothing.
        progress: while aligning, one line per round on standard error (and a bar on a terminal).

    Returns:
        A `Corpus` (format `generic`, record kind `sentence`) whose utterances carry the final labels
        and `ALIGN_COLUMNS`; `problems` lists the conversations set aside (reader's and aligner's).
    """
    return aligned_corpus_summary(corpus, settings=settings, cache=cache, progress=progress)[0]


def aligned_corpus_summary(corpus: Corpus, *, settings: AlignSettings | None = None, cache: bool = True,
                           progress: bool = True) -> tuple[Corpus, AlignSummary]:
    """`aligned_corpus` and the reconstruction's `AlignSummary` (from the cache when the alignment
    came from there)."""
    settings = settings or AlignSettings()
    if not cache or corpus.source is None:
        result = align_public(corpus, settings=settings, progress=progress)
        return result.to_corpus(), result.summary
    folder, result = cached_alignment(corpus, settings=settings, progress=progress)
    if result is not None:
        return result.to_corpus(), result.summary

    cached = read_generic(folder / "aligned.csv", corpus.schema)
    rep = pd.read_json(folder / "report.jsonl", lines=True, dtype={"doc_id": str})
    cached.problems = [Problem(str(r["doc_id"]), str(r["reason"]), "alignment")
                       for _, r in rep[rep["status"] != "aligned"].iterrows()]
    cached.source = corpus.source
    history = pd.read_csv(folder / "history.csv", keep_default_na=False, na_values=[""])
    return cached, summarize_alignment(rep, cached.utterances["align_confidence"], history)
