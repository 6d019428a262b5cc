"""What a reconstruction knows: the summary of an alignment, and when not to trust it.

`summarize_alignment` reads the per-conversation report, the sentences' `align_confidence` and
the rounds (what `align_public` returns, or what the alignment cache holds) and says how many
conversations settled, how many were still changing when the rounds stopped, the mean confidence
and the share of sentences at or above `CONFIDENT`, and warns when the reconstruction is not to be
trusted (`AlignSummary.warnings`):

- most aligned conversations were still changing (`rounds_stop` `open`) when the rounds stopped:
  their readings are whatever the last round happened to give;
- fewer than `MIN_CONVERSATIONS` conversations taught the sentence classifier that scores the
  lines (self-training only: with a model trained elsewhere, `label_model`, the count does not
  matter).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

CONFIDENT = 0.9
"""A sentence is placed confidently at or above this `align_confidence`."""
MIN_CONVERSATIONS = 20
"""Fewer aligned conversations than this cannot teach the self-trained sentence classifier (the
rounds cross-fit it over conversations: each half learns from the other); align small files with a
model trained on a larger reconstruction instead (`label_model`, `data align --model`)."""


@dataclass(frozen=True)
class AlignSummary:
    """The summary of one reconstruction (`summarize_alignment`).

    Attributes:
        conversations: conversations of the file (aligned and set aside).
        aligned: conversations aligned.
        settled: aligned conversations whose rounds stopped changing (`rounds_stop` settled,
            flipping or cycle).
        open: aligned conversations still changing when the rounds stopped.
        stopped: how the rounds stopped (`converged`, `cap`, `empty`; "" when not recorded).
        rounds: classifier rounds run (round 0, priors only, not counted).
        last_changed: share of the labels whose unit changed in the last round (NaN: none).
        sentences: sentence rows with a confidence.
        mean_confidence: mean `align_confidence` of those rows (NaN: none).
        confident_share: share of those rows with `align_confidence` >= `CONFIDENT`.
        self_trained: the sentence classifier was trained on the rounds' own readings (False: a
            model trained elsewhere scored the lines).
        warnings: why the reconstruction is not to be trusted (empty: no reason found).
    """

    conversations: int
    aligned: int
    settled: int
    open: int
    stopped: str
    rounds: int
    last_changed: float
    sentences: int
    mean_confidence: float
    confident_share: float
    self_trained: bool
    warnings: tuple[str, ...]

    @property
    def trusted(self) -> bool:
        return not self.warnings

    def lines(self) -> list[str]:
        """The summary for people, one line each (the warnings last, each starting `warning:`)."""
        at = "at the cap of " if self.stopped == "cap" else "when the rounds stopped after "
        out = [
            f"{self.aligned} of {self.conversations} conversation(s) aligned; {self.conversations - self.aligned} set aside",
            f"rounds: {self.settled} conversation(s) settled, {self.open} still changing {at}{self.rounds} round(s)"
            + (f" ({self.last_changed:.1%} of the labels changed unit in the last round)"
               if not math.isnan(self.last_changed) else ""),
            f"confidence: mean {_f(self.mean_confidence)}, {_pct(self.confident_share)} of {self.sentences} "
            f"sentence(s) >= {CONFIDENT}",
            "lines scored by " + ("a classifier trained on the rounds' own readings (self-trained)" if self.self_trained
                                  else "a model trained elsewhere (its predictions fixed; the priors learnt here)"),
        ]
        out += [f"warning: {w}" for w in self.warnings]
        return out

    def params(self) -> dict[str, str]:
        """MLflow parameters (`align.*`)."""
        return {"align.stopped": self.stopped or "unknown", "align.self_trained": str(self.self_trained).lower(),
                "align.trusted": str(self.trusted).lower()}

    def metrics(self) -> dict[str, float]:
        """MLflow metrics (`align_*`; NaN ones left out)."""
        values = {
            "align_conversations": self.conversations, "align_aligned": self.aligned, "align_settled": self.settled,
            "align_open": self.open, "align_rounds": self.rounds, "align_last_changed": self.last_changed,
            "align_mean_confidence": self.mean_confidence, "align_confident_share": self.confident_share,
            "align_warnings": len(self.warnings),
        }
        return {k: float(v) for k, v in values.items() if not math.isnan(float(v))}

    def to_dict(self) -> dict:
        return {**{k: getattr(self, k) for k in self.__dataclass_fields__}, "warnings": list(self.warnings),
                "trusted": self.trusted}


def summarize_alignment(report: pd.DataFrame, confidence: "pd.Series | np.ndarray", history: pd.DataFrame, *,
                        stopped: str | None = None, self_trained: bool = True) -> AlignSummary:
    """The summary of a reconstruction.

    Args:
        report: the per-conversation report (`AlignResult.report`, or `report.jsonl` of the cache).
        confidence: the sentences' `align_confidence` (NaN rows, unlabelled pauses, are left out).
        history: the rounds (`AlignResult.history`); its `stopped` column, when present, says how
            the rounds stopped, unless `stopped` is given.
        stopped: how the rounds stopped (`AlignResult.stopped`).
        self_trained: the lines were scored by the rounds' own classifier (not a `label_model`).
    """
    status = report["status"] if "status" in report else pd.Series([], dtype=object)
    aligned = report[status == "aligned"]
    stop = aligned["rounds_stop"] if "rounds_stop" in aligned else pd.Series(["open"] * len(aligned), dtype=object)
    n_open = int((stop.fillna("open") == "open").sum())
    conf = pd.to_numeric(pd.Series(np.asarray(confidence, dtype=float)), errors="coerce").dropna()
    if stopped is None:
        stopped = str(history["stopped"].iloc[-1]) if "stopped" in history and len(history) else ""
    rounds = int(history["iteration"].iloc[-1]) if len(history) else 0
    last = float(history["changed"].iloc[-1]) if len(history) and "changed" in history else float("nan")
    summary = AlignSummary(
        conversations=len(report), aligned=len(aligned), settled=len(aligned) - n_open, open=n_open,
        stopped=stopped, rounds=rounds, last_changed=last, sentences=len(conf),
        mean_confidence=float(conf.mean()) if len(conf) else float("nan"),
        confident_share=float((conf >= CONFIDENT).mean()) if len(conf) else float("nan"),
        self_trained=self_trained, warnings=(),
    )
    return AlignSummary(**{**summary.__dict__, "warnings": tuple(_warnings(summary))})


def _warnings(s: AlignSummary) -> list[str]:
    if s.aligned == 0:
        return ["no conversation could be aligned"]
    out = []
    if s.open * 2 > s.aligned:
        at = f"at the cap of {s.rounds} round(s)" if s.stopped == "cap" else f"after {s.rounds} round(s)"
        out.append(
            f"the reconstruction is not to be trusted: {s.open} of {s.aligned} conversation(s) were still changing "
            f"{at}, so their readings are whatever the last round gave"
        )
    if s.self_trained and s.aligned < MIN_CONVERSATIONS:
        out.append(
            f"the reconstruction is not to be trusted: {s.aligned} conversation(s) are too few to learn the sentence "
            f"classifier that scores the lines from (at least {MIN_CONVERSATIONS} wanted); align with a model trained "
            "on a larger reconstruction (data align --model URI)"
        )
    return out


def _f(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.3f}"


def _pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.1%}"
