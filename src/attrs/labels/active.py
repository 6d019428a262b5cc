"""What to label next: per-item selection scores from predicted probabilities and the labels so far.

Every strategy gives each candidate item a score, higher = send to the labelers sooner, computed
per head and averaged over the heads a project cares about. The parts, per head (all in [0, 1]):

- `pred_disagreement`: how likely two labelers are to disagree on the item, read from the model's
  predicted distribution p (trained on the labelers' labels): (1 - sum p^2) / (1 - 1/K).
- `entropy`: the normalised entropy of p (base K), the classic uncertainty-sampling score.
- `model_doubt`: 1 - the largest class probability of the posterior that joins the model and the
  votes so far, (p + counts) / (1 + n): how unsure the consensus still is.
- `few_labels`: 1 / sqrt(1 + n) for an item with n labels so far (1 for a new item): the weight a
  further label still has (the spread of an n-vote proportion shrinks as 1 / sqrt(n)).

Strategies (`STRATEGIES`):
- `random`: a uniform random score (the baseline every other must beat).
- `entropy`: `entropy` (ignores the labels so far).
- `disagreement`: `pred_disagreement` (ignores the labels so far).
- `activelab`: cleanlab's ActiveLab (`cleanlab.multiannotator.get_active_learning_scores`), as
  1 - its score: for items with labels it weighs the CROWDLAB consensus quality against the
  annotators' and the model's estimated reliability, for new items the model's confidence; so it
  chooses between relabelling and labelling new items.
- `combined` (psyattrs' own): (pred_disagreement + model_doubt) / 2 * few_labels: items labelers
  will split on and whose consensus is unsure, new ones first unless an old one is very unsure.

No model here: probabilities come from the caller (out-of-sample for labelled items).
"""

from __future__ import annotations

import contextlib
import io
import warnings
from typing import Iterable

import numpy as np
import pandas as pd

STRATEGIES: tuple[str, ...] = ("combined", "disagreement", "entropy", "activelab", "random")
PART_COLUMNS: tuple[str, ...] = ("pred_disagreement", "entropy", "model_doubt", "few_labels")


def predicted_disagreement(proba: np.ndarray) -> np.ndarray:
    """(1 - sum_c p_c^2) / (1 - 1/K) per row: 0 = the labelers would agree, 1 = uniform."""
    p = np.asarray(proba, dtype=float)
    k = p.shape[1]
    return np.clip((1.0 - (p**2).sum(axis=1)) / (1.0 - 1.0 / k), 0.0, 1.0)


def normalized_entropy(proba: np.ndarray) -> np.ndarray:
    """Entropy of each row in base K (0 = certain, 1 = uniform)."""
    p = np.clip(np.asarray(proba, dtype=float), 1e-12, 1.0)
    return np.clip(-(p * np.log(p)).sum(axis=1) / np.log(p.shape[1]), 0.0, 1.0)


def vote_counts(labels: np.ndarray, n_classes: int) -> np.ndarray:
    """(n, K) counts of each class among a wide label matrix's rows (NaN = no label)."""
    labels = np.asarray(labels, dtype=float)
    counts = np.zeros((labels.shape[0], n_classes))
    for c in range(n_classes):
        counts[:, c] = (labels == c).sum(axis=1)
    return counts


def model_doubt(proba: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """1 - max of (p + counts) / (1 + n) per row: the model counts as one vote."""
    post = (np.asarray(proba, dtype=float) + counts) / (1.0 + counts.sum(axis=1, keepdims=True))
    return 1.0 - post.max(axis=1)


def activelab(proba: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """cleanlab's ActiveLab score per row (lower = more informative), rows with labels and rows
    without in one call; labelers who gave no label in `labels` are dropped first."""
    proba = np.clip(np.asarray(proba, dtype=float), 1e-12, None)
    proba = proba / proba.sum(axis=1, keepdims=True)
    labels = np.asarray(labels, dtype=float).reshape(len(proba), -1)
    labels = labels[:, (~np.isnan(labels)).any(axis=0)] if labels.size else labels
    rated = (~np.isnan(labels)).any(axis=1) if labels.size else np.zeros(len(proba), bool)
    out = np.empty(len(proba))
    # cleanlab prints notes (annotators without overlap) from inside; they are not the user's
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        from cleanlab.multiannotator import get_active_learning_scores

        if rated.any():
            scored, unrated = get_active_learning_scores(
                labels[rated], proba[rated], proba[~rated] if (~rated).any() else None
            )
            out[rated] = scored
            if (~rated).any():
                out[~rated] = unrated
        else:
            out[:] = get_active_learning_scores(pred_probs_unlabeled=proba)[1]
    return out


def selection_scores(proba: dict[str, np.ndarray], labels: dict[str, np.ndarray], *, strategy: str = "combined",
                     heads: Iterable[str] | None = None, seed: int = 0) -> pd.DataFrame:
    """Per candidate item, the strategy's score and its parts, averaged over heads.

    Args:
        proba: head -> float array (n, K): predicted probabilities of the n candidates
            (out-of-sample for those with labels).
        labels: head -> float array (n, M): the labels so far, one column per labeler, NaN where
            none (M may be 0).
        strategy: one of `STRATEGIES`.
        heads: the heads to combine (default: every head of `proba`).
        seed: the random strategy's seed.

    Returns:
        DataFrame (n rows, candidate order): `score` (higher = label sooner), the `PART_COLUMNS`
        averaged over the heads, `n_labels` (the most labels any of the heads has for the item)
        and `activelab` (1 - cleanlab's score, only with that strategy).

    Raises:
        ValueError: an unknown strategy or head (names the allowed ones).
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy {strategy!r} is not one of {list(STRATEGIES)}")
    chosen = list(proba) if heads is None else list(heads)
    unknown = [h for h in chosen if h not in proba]
    if unknown or not chosen:
        raise ValueError(f"head(s) {unknown or chosen} are not among the model's heads {list(proba)}")
    n = len(next(iter(proba.values())))
    parts = {name: np.zeros(n) for name in PART_COLUMNS}
    n_labels = np.zeros(n, dtype=np.int64)
    al = np.zeros(n)
    for head in chosen:
        p = np.asarray(proba[head], dtype=float)
        votes = np.asarray(labels.get(head, np.zeros((n, 0))), dtype=float).reshape(n, -1)
        counts = vote_counts(votes, p.shape[1])
        n_head = counts.sum(axis=1)
        n_labels = np.maximum(n_labels, n_head.astype(np.int64))
        parts["pred_disagreement"] += predicted_disagreement(p)
        parts["entropy"] += normalized_entropy(p)
        parts["model_doubt"] += model_doubt(p, counts)
        parts["few_labels"] += 1.0 / np.sqrt(1.0 + n_head)
        if strategy == "activelab":
            al += 1.0 - activelab(p, votes)
    out = pd.DataFrame({name: v / len(chosen) for name, v in parts.items()})
    out["n_labels"] = n_labels
    if strategy == "random":
        score = np.random.default_rng(seed).random(n)
    elif strategy == "entropy":
        score = out["entropy"].to_numpy()
    elif strategy == "disagreement":
        score = out["pred_disagreement"].to_numpy()
    elif strategy == "activelab":
        out["activelab"] = al / len(chosen)
        score = out["activelab"].to_numpy()
    else:
        score = (out["pred_disagreement"] + out["model_doubt"]).to_numpy() / 2.0 * out["few_labels"].to_numpy()
    out.insert(0, "score", score)
    return out


def top_k(scores: pd.DataFrame, budget: int, *, seed: int = 0) -> np.ndarray:
    """Row positions of the `budget` highest scores, best first (ties broken at random by seed)."""
    tie = np.random.default_rng(seed).random(len(scores))
    order = np.lexsort((tie, -scores["score"].to_numpy()))
    return order[:budget]
