"""The long annotation table: one row per (utterance, annotator, head, label), crowd-kit's shape.

Corpora rated by a handful of fixed labelers (OPELA: three) fit the utterance table's
`labeler{k}_{head}` columns. Corpora drawn from hundreds of annotators (MD-Agreement: 5 of more
than 800 per item) do not: one column per person would be hundreds of mostly empty columns. For
those the reader keeps the ratings here, in `Corpus.annotations`:

| column    | dtype    | meaning                                                     |
|-----------|----------|-------------------------------------------------------------|
| sent_id   | str      | the rated utterance (`sent_id` of the utterance table)      |
| annotator | category | the annotator's id as the corpus writes it (`Ann418`)       |
| head      | category | the head                                                    |
| label     | int64    | the class given, 0..K-1 of the head                         |

and the utterance table carries the same ratings as *vote slots*: `labeler{k}_{head}` is the k-th
rating the utterance received (k = 1..the most ratings any utterance has; 5 for MD-Agreement),
not a fixed person, and `annotator{k}_{head}` names who gave it (the one place the utterance
table keeps annotator identity, for models that use it). Everything that is per item (soft targets, majority, the ceiling, Krippendorff's
alpha, Fleiss' kappa) reads the slots; everything that follows a person across items
(Dawid-Skene, the OPELA rule's per-labeler estimates, each annotator's agreement, models with
per-annotator heads) reads this table (`crowdkit_table`, `annotator_labels`).
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import pandas as pd

from psyattrs.data.table import Corpus, labeler_column, labeler_columns
from psyattrs.schema import Schema

ANNOTATION_COLUMNS: tuple[str, ...] = ("sent_id", "annotator", "head", "label")


def make_annotations(sent_ids: Iterable, annotators: Iterable, heads: Iterable, labels: Iterable) -> pd.DataFrame:
    """A long annotation table from four equally long sequences (typed as documented above)."""
    return pd.DataFrame(
        {
            "sent_id": pd.Series(list(sent_ids), dtype=object).astype(str),
            "annotator": pd.Categorical([str(a) for a in annotators]),
            "head": pd.Categorical([str(h) for h in heads]),
            "label": np.asarray(list(labels), dtype=np.int64),
        }
    )


def empty_annotations() -> pd.DataFrame:
    """A long annotation table without rows."""
    return make_annotations([], [], [], [])


def vote_slots(utterances: pd.DataFrame, annotations: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """Adds the vote slots of `annotations` to an utterance table: what each rating was
    (`labeler{k}_{head}`) and who gave it (`annotator{k}_{head}`).

    Args:
        utterances: utterance table with `sent_id`; existing `labeler{k}_{head}` and
            `annotator{k}_{head}` columns of the schema's heads are replaced.
        annotations: long table (`ANNOTATION_COLUMNS`) whose `sent_id`s are in `utterances`.
        schema: the heads.

    Returns:
        A copy of `utterances` with, per head, columns `labeler1_{head}` .. `labeler{m}_{head}`
        (Int64; m = the most ratings one utterance has for that head): the utterance's ratings in
        the order of `annotations`, <NA> where it has fewer; and `annotator1_{head}` ..
        `annotator{m}_{head}` (str, "" for an empty slot): who gave that rating. These columns
        are the one place the utterance table keeps annotator identity: they travel with it
        through splits, training, scoring and prediction, and per-annotator models
        (`tfidf_annotators`, the transformer's annotator embeddings) read them
        (`slot_annotators`).
    """
    out = utterances.copy()
    row_of = pd.Series(np.arange(len(out)), index=out["sent_id"].astype(str).to_numpy())
    for head in schema:
        for col in labeler_columns(out.columns, head.name) + [annotator_column(k, head.name)
                                                              for k in annotator_slot_numbers(out.columns, head.name)]:
            del out[col]
        part, rows, slot = _slots_of(annotations, head.name, row_of)
        if part.empty:
            continue
        labels = part["label"].to_numpy(dtype=np.int64)
        who = part["annotator"].astype(str).to_numpy(dtype=object)
        n_slots = int(slot.max()) + 1
        # one (rows x slots) matrix per kind, filled in one step, and every column added at once:
        # linear in the ratings (adding the columns one by one was quadratic in the slots)
        values = np.zeros((len(out), n_slots), dtype=np.int64)
        mask = np.ones((len(out), n_slots), dtype=bool)
        ids = np.full((len(out), n_slots), "", dtype=object)
        values[rows, slot] = labels
        mask[rows, slot] = False
        ids[rows, slot] = who
        columns: dict[str, Any] = {}
        for k in range(n_slots):
            columns[labeler_column(k + 1, head.name)] = pd.arrays.IntegerArray(values[:, k].copy(), mask[:, k].copy())
            columns[annotator_column(k + 1, head.name)] = ids[:, k]
        out = pd.concat([out, pd.DataFrame(columns, index=out.index)], axis=1)
    return out


def annotator_column(k: int, head: str) -> str:
    """Name of the column holding who gave vote slot k of a head: `annotator{k}_{head}`."""
    return f"annotator{k}_{head}"


def annotator_slot_numbers(columns: Iterable, head: str) -> list[int]:
    """The k of the `annotator{k}_{head}` columns among `columns` (who gave vote slot k), sorted."""
    out = []
    for c in columns:
        if isinstance(c, str) and c.startswith("annotator") and c.endswith(f"_{head}"):
            k = c[len("annotator"):-len(head) - 1]
            if k.isdigit():
                out.append(int(k))
    return sorted(out)


def slot_annotators(table: pd.DataFrame, head: str) -> tuple[list[int], np.ndarray]:
    """Who gave each vote slot of a head: (the slot numbers k, an (n, S) object array of the
    `annotator{k}_{head}` ids, "" where nobody did). S = 0 for a table without those columns."""
    ks = annotator_slot_numbers(table.columns, head)
    ids = np.full((len(table), len(ks)), "", dtype=object)
    for j, k in enumerate(ks):
        ids[:, j] = table[annotator_column(k, head)].fillna("").astype(str).to_numpy(dtype=object)
    return ks, ids


def annotations_from_slots(utterances: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """The long table of a wide utterance table: `labeler{k}_{head}` becomes annotator `labeler{k}`.

    For tables whose labelers are fixed people (OPELA's three, the generic format), so that code
    written for the long table works on every corpus.
    """
    parts = []
    sent = utterances["sent_id"].astype(str).to_numpy()
    for head in schema:
        for col in labeler_columns(utterances.columns, head.name):
            values = pd.to_numeric(utterances[col], errors="coerce").to_numpy(dtype=float)
            rated = ~np.isnan(values)
            parts.append((sent[rated], [col.split("_", 1)[0]] * int(rated.sum()), [head.name] * int(rated.sum()),
                          values[rated].astype(np.int64)))
    if not parts:
        return empty_annotations()
    return make_annotations(*(np.concatenate([np.asarray(p[i], dtype=object) for p in parts]) for i in range(4)))


def crowdkit_table(annotations: pd.DataFrame, head: str) -> pd.DataFrame:
    """One head's ratings as crowd-kit takes them: columns `task` (sent_id), `worker`, `label`.

    This is the input of `psyattrs.labels.aggregate` (MajorityVote, OpelaResolver, DawidSkene) and
    of crowd-kit's own aggregators.
    """
    part = annotations[annotations["head"] == head]
    return pd.DataFrame(
        {
            "task": part["sent_id"].to_numpy(dtype=object),
            "worker": part["annotator"].astype(str).to_numpy(dtype=object),
            "label": part["label"].to_numpy(dtype=np.int64),
        }
    )


def annotator_index(annotations: pd.DataFrame) -> pd.Index:
    """Every annotator id of the table, sorted: position i is annotator i of an embedding table."""
    return pd.Index(sorted(annotations["annotator"].astype(str).unique()), name="annotator")


def annotator_labels(utterances: pd.DataFrame, annotations: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """Per utterance, who rated it and what they gave, per head: the input of per-annotator models.

    Args:
        utterances: the utterance table (its `sent_id` order is kept).
        annotations: the long table (`Corpus.annotations`, or `annotations_from_slots`).
        schema: the heads.

    Returns:
        DataFrame with the index of `utterances`, column `sent_id`, and per head
        `{head}_annotators` (tuple of annotator ids, in rating order) and `{head}_labels` (tuple
        of int classes, same order); empty tuples for utterances nobody rated (context turns).
    """
    out = pd.DataFrame({"sent_id": utterances["sent_id"].astype(str).to_numpy()}, index=utterances.index)
    for head in schema:
        part = annotations[annotations["head"] == head.name]
        grouped = part.groupby("sent_id", sort=False, observed=True)
        who = grouped["annotator"].agg(lambda s: tuple(s.astype(str)))
        what = grouped["label"].agg(lambda s: tuple(int(v) for v in s))
        out[f"{head.name}_annotators"] = [who.get(s, ()) for s in out["sent_id"]]
        out[f"{head.name}_labels"] = [what.get(s, ()) for s in out["sent_id"]]
    return out


def corpus_annotator_labels(corpus: Corpus) -> pd.DataFrame:
    """`annotator_labels` of a corpus: its long table, or for fixed labelers `annotations_from_slots`
    (annotators `labeler1`, `labeler2`, ...). See `annotator_labels` for the columns."""
    annotations = corpus.annotations
    if annotations is None:
        annotations = annotations_from_slots(corpus.utterances, corpus.schema)
    return annotator_labels(corpus.utterances, annotations, corpus.schema)


def _slots_of(annotations: pd.DataFrame, head: str, row_of: pd.Series) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """One head's ratings, the table row of each and its vote slot (the k-th rating of its
    utterance, in `annotations` order, 0-based).

    Raises:
        ValueError: a rating names an utterance that the table does not have.
    """
    part = annotations[annotations["head"] == head]
    if part.empty:
        return part, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    rows = row_of.reindex(part["sent_id"].to_numpy()).to_numpy()
    if np.isnan(rows.astype(float)).any():
        missing = part["sent_id"].to_numpy()[np.isnan(rows.astype(float))][:3].tolist()
        raise ValueError(f"annotations name utterances that the table does not have: {missing}")
    rows = rows.astype(np.int64)
    return part, rows, pd.Series(rows).groupby(rows).cumcount().to_numpy()
