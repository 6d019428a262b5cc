"""Label quality of a multi-annotator corpus: CROWDLAB per head, six heads at once.

The scores are cleanlab's CROWDLAB (`cleanlab.multiannotator.get_label_quality_multiannotator`,
Goh, Tkachenko & Mueller 2022), computed head by head from the labelers' labels and a model's
out-of-sample predicted probabilities: a consensus label per item with a quality score in [0, 1]
(low = the consensus is likely wrong: labelers split, or the model disagrees with them), and a
quality score per labeler (agreement with the consensus, weighted against the model). psyattrs
does not re-implement the estimator: it builds cleanlab's wide label matrix from either layout of
the utterance table (fixed `labeler{k}_{head}` columns, or the long annotation table of corpora with
many annotators), leaves out pause rows and unrated rows, runs cleanlab once per head and puts the
heads back together in two long tables. Ordinal heads (`self`, `empathy`) are scored as nominal,
as cleanlab does: a vote one class off counts as wrong as one four classes off.

No model lives here: the probabilities come from the caller (`psyattrs.serving.curation` refits the
model per fold so that it never scores an item it trained on).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Iterable

import numpy as np
import pandas as pd

from psyattrs.data.annotations import annotations_from_slots
from psyattrs.labels.soft import pause_mask
from psyattrs.schema import Schema

ITEM_COLUMNS: tuple[str, ...] = (
    "sent_id", "head", "n_labels", "consensus_label", "consensus_quality", "annotator_agreement",
    "model_label", "model_proba_consensus",
)  # fmt: skip
LABELER_COLUMNS: tuple[str, ...] = ("labeler", "head", "quality", "agreement_with_consensus", "n_labelled", "worst_class")
ALL_HEADS = "(all)"
"""The `head` value of a labeler's row that summarises every head (mean weighted by labels given)."""


@dataclass
class HeadLabels:
    """One head's labels in cleanlab's wide layout.

    Attributes:
        rows: int positions (into the utterance table) of the rated, non-pause rows.
        matrix: float array (len(rows), n_labelers): the class each labeler gave, NaN where none.
        labelers: the labelers' ids, one per matrix column (every one gave at least one label).
    """

    rows: np.ndarray
    matrix: np.ndarray
    labelers: list[str]


def wide_labels(utterances: pd.DataFrame, schema: Schema, *, annotations: pd.DataFrame | None = None,
                heads: Iterable[str] | None = None) -> dict[str, HeadLabels]:
    """Per head, the labels of the rated sentences as a wide matrix (rows x labelers).

    Args:
        utterances: the utterance table (`sent_id`, `is_pause`, `labeler{k}_{head}` columns).
        schema: the heads.
        annotations: the long annotation table of corpora with many annotators (`Corpus.annotations`);
            None reads the fixed labelers' columns (labelers named `labeler1`, `labeler2`, ...).
        heads: the heads to build (default: every head of the schema).

    Returns:
        head -> `HeadLabels`; a head nobody rated has no rows and no labelers.

    Raises:
        ValueError: an unknown head (names the schema's heads).
    """
    wanted = list(schema.head_names) if heads is None else list(heads)
    unknown = [h for h in wanted if h not in schema.head_names]
    if unknown:
        raise ValueError(f"unknown head(s) {unknown}; the schema's heads: {schema.head_names}")
    long = annotations if annotations is not None else annotations_from_slots(utterances, schema)
    row_of = pd.Series(np.arange(len(utterances)), index=utterances["sent_id"].astype(str).to_numpy())
    pause = pause_mask(utterances)
    out: dict[str, HeadLabels] = {}
    for head in wanted:
        part = long[long["head"].astype(str) == head]
        rows = row_of.reindex(part["sent_id"].astype(str).to_numpy()).to_numpy()
        known = ~np.isnan(rows.astype(float))
        part, rows = part[known], rows[known].astype(np.int64)
        keep = ~pause[rows]
        part, rows = part[keep], rows[keep]
        who = part["annotator"].astype(str).to_numpy()
        labelers = sorted(set(who), key=_natural)
        col_of = {name: i for i, name in enumerate(labelers)}
        rated = np.unique(rows)
        pos = np.searchsorted(rated, rows)
        matrix = np.full((len(rated), len(labelers)), np.nan)
        matrix[pos, [col_of[w] for w in who]] = part["label"].to_numpy(dtype=float)
        out[head] = HeadLabels(rated, matrix, labelers)
    return out


def _natural(name: str) -> tuple:
    """Sort key: `labeler2` before `labeler10`."""
    digits = "".join(ch for ch in name if ch.isdigit())
    return (name.rstrip("0123456789"), int(digits) if digits and name.endswith(digits) else -1, name)


def crowdlab(labels: HeadLabels, proba: np.ndarray, *, head: str = "") -> tuple[pd.DataFrame, pd.DataFrame]:
    """CROWDLAB on one head (cleanlab), with psyattrs' names.

    Args:
        labels: the head's wide labels (`wide_labels`).
        proba: float array (len(labels.rows), K): out-of-sample predicted probabilities of the same
            rows, in the same order.
        head: the head's name, written into the tables.

    Returns:
        (items, labelers): items has `ITEM_COLUMNS` plus `row` (the utterance-table position), one
        row per rated item in `labels.rows` order; labelers has `LABELER_COLUMNS`, one row per
        labeler. Scores are in [0, 1], higher = better.

    Raises:
        ValueError: no rated item, no item with two labels or more (CROWDLAB needs some to
            estimate how often labelers agree), or probabilities of the wrong shape.
    """
    n = len(labels.rows)
    proba = np.asarray(proba, dtype=float)
    if proba.shape[0] != n:
        raise ValueError(f"head {head!r}: {proba.shape[0]} rows of probabilities for {n} rated items")
    counts = (~np.isnan(labels.matrix)).sum(axis=1)
    if n == 0 or not (counts >= 2).any():
        raise ValueError(
            f"head {head!r}: label quality needs items rated by two labelers or more; "
            f"{n} item(s) are rated, {int((counts >= 2).sum())} by two or more"
        )
    proba = np.clip(proba, 1e-12, None)
    proba = proba / proba.sum(axis=1, keepdims=True)
    with warnings.catch_warnings():  # cleanlab's notes (annotators with few labels, tqdm) are not the user's problem
        warnings.simplefilter("ignore")
        from cleanlab.multiannotator import get_label_quality_multiannotator

        found = get_label_quality_multiannotator(
            pd.DataFrame(labels.matrix, columns=labels.labelers), proba, verbose=False
        )
    quality = found["label_quality"]
    consensus = quality["consensus_label"].to_numpy(dtype=np.int64)
    items = pd.DataFrame(
        {
            "row": labels.rows,
            "head": head,
            "n_labels": counts.astype(np.int64),
            "consensus_label": consensus,
            "consensus_quality": quality["consensus_quality_score"].to_numpy(dtype=float),
            "annotator_agreement": quality["annotator_agreement"].to_numpy(dtype=float),
            "model_label": proba.argmax(axis=1).astype(np.int64),
            "model_proba_consensus": proba[np.arange(n), consensus],
        }
    )
    stats = found["annotator_stats"]
    labelers = pd.DataFrame(
        {
            "labeler": stats.index.astype(str),
            "head": head,
            "quality": stats["annotator_quality"].to_numpy(dtype=float),
            "agreement_with_consensus": stats["agreement_with_consensus"].to_numpy(dtype=float),
            "n_labelled": stats["num_examples_labeled"].to_numpy(dtype=np.int64),
            "worst_class": stats["worst_class"].to_numpy(dtype=np.int64),
        }
    )
    return items, labelers


def label_quality_tables(labels: dict[str, HeadLabels], proba: dict[str, np.ndarray], utterances: pd.DataFrame
                         ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """CROWDLAB on every head, put together.

    Args:
        labels: head -> `HeadLabels` (`wide_labels`).
        proba: head -> float array (len(utterances), K): out-of-sample probabilities of every row.
        utterances: the utterance table the rows refer to.

    Returns:
        (items, labelers):
        - items: `ITEM_COLUMNS` (plus `doc_id` and `text` after `sent_id`), one row per rated item
          and head, the items most likely mislabelled first (ascending `consensus_quality`, ties
          by head and sent_id);
        - labelers: `LABELER_COLUMNS`, per labeler one row per head and one `head == "(all)"`
          row (quality and agreement averaged over the heads, weighted by the labels given;
          `worst_class` -1 there), best labelers first within each head.
    """
    item_parts, labeler_parts = [], []
    for head, head_labels in labels.items():
        items, who = crowdlab(head_labels, proba[head][head_labels.rows], head=head)
        item_parts.append(items)
        labeler_parts.append(who)
    items = pd.concat(item_parts, ignore_index=True)
    rows = items.pop("row").to_numpy()
    items.insert(0, "text", utterances["text"].astype(str).to_numpy()[rows])
    items.insert(0, "doc_id", utterances["doc_id"].astype(str).to_numpy()[rows])
    items.insert(0, "sent_id", utterances["sent_id"].astype(str).to_numpy()[rows])
    items = items.sort_values(["consensus_quality", "head", "sent_id"], kind="stable").reset_index(drop=True)
    labelers = pd.concat(labeler_parts, ignore_index=True)
    summary = (
        labelers.assign(wq=labelers["quality"] * labelers["n_labelled"],
                        wa=labelers["agreement_with_consensus"] * labelers["n_labelled"])
        .groupby("labeler", sort=False)[["wq", "wa", "n_labelled"]].sum()
    )
    overall = pd.DataFrame(
        {
            "labeler": summary.index.astype(str),
            "head": ALL_HEADS,
            "quality": summary["wq"] / summary["n_labelled"],
            "agreement_with_consensus": summary["wa"] / summary["n_labelled"],
            "n_labelled": summary["n_labelled"].astype(np.int64),
            "worst_class": -1,
        }
    )
    labelers = pd.concat([overall, labelers], ignore_index=True)
    order = {h: i for i, h in enumerate([ALL_HEADS, *labels])}
    labelers = labelers.assign(_h=labelers["head"].map(order)).sort_values(
        ["_h", "quality"], ascending=[True, False], kind="stable").drop(columns="_h").reset_index(drop=True)
    return items, labelers[list(LABELER_COLUMNS)]
