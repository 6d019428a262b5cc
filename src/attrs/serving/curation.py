"""Curating a multi-annotator corpus with a trained model: label quality, and what to label next.

- `get_label_quality(corpus, model)`: per item and head a CROWDLAB consensus quality score and per
  labeler a quality score (`psyattrs.labels.quality`), from the labelers' labels and the model's
  *cross-fitted* probabilities: the model's kind and settings (its `model.json`: the same config as
  the run that trained it) and the run's targets (`targets.lambda`, `targets.smoothing`, read from
  the run when the URI names one) are refit per fold of whole conversations on the corpus itself
  (`psyattrs.experiments.crossfit`), so no item is scored by a model that trained on it. The
  model's own weights are not used to score: only its recipe.
- `get_next_batch(pool, model, budget=N)`: the N sentences (or conversations) to send to the
  labelers next, with the strategy's score and its parts (`psyattrs.labels.active`). Items without
  labels are scored by the model itself (it never saw them); items with labels (in the pool or in
  `labelled`) by cross-fitted probabilities, as ActiveLab asks.

Both read every format `psyattrs.data.load_corpus` reads, with the model's heads.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import pandas as pd

from psyattrs.data import load_corpus
from psyattrs.data.annotations import annotations_from_slots
from psyattrs.data.table import Corpus, normalize_table
from psyattrs.errors import InputFileError
from psyattrs.labels.active import STRATEGIES, selection_scores, top_k
from psyattrs.labels.quality import ALL_HEADS, HeadLabels, label_quality_tables, wide_labels
from psyattrs.labels.soft import pause_mask
from psyattrs.schema import Schema
from psyattrs.serving.predict import load_for_prediction

UNITS: tuple[str, ...] = ("sentence", "conversation")
_LABELER_HEAD = re.compile(r"^labeler\d+_([a-z][a-z0-9]*)$")


@dataclass
class LabelQuality:
    """What `get_label_quality` returns.

    Attributes:
        items: one row per rated item and head, most likely mislabelled first: `sent_id`, `doc_id`,
            `text`, `head`, `n_labels`, `consensus_label`, `consensus_quality` (0-1, low = likely
            wrong), `annotator_agreement`, `model_label`, `model_proba_consensus`.
        labelers: per labeler one row per head and one `head == "(all)"` row: `labeler`, `head`,
            `quality` (0-1), `agreement_with_consensus`, `n_labelled`, `worst_class`.
        heads: the heads scored.
        folds: the cross-fitting folds.
        model: where the model came from; kind: its kind; lam, smoothing: the targets refit with.
    """

    items: pd.DataFrame
    labelers: pd.DataFrame
    heads: list[str]
    folds: int
    model: str
    kind: str
    lam: float
    smoothing: float
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, float]:
        """Flat metrics: mean consensus quality per head, the share below 0.5, each labeler's overall quality."""
        out: dict[str, float] = {}
        for head, rows in self.items.groupby("head", sort=False):
            out[f"consensus_quality_mean_{head}"] = float(rows["consensus_quality"].mean())
            out[f"consensus_quality_below_half_{head}"] = float((rows["consensus_quality"] < 0.5).mean())
        overall = self.labelers[self.labelers["head"] == ALL_HEADS]
        for name, q in zip(overall["labeler"], overall["quality"]):
            out[f"labeler_quality_{_metric_name(name)}"] = float(q)
        return out


def _metric_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", str(name))


def _model(model: Any, tracking_uri: str | None) -> tuple[Any, Schema, str]:
    return load_for_prediction(model, tracking_uri=tracking_uri)


def run_targets(source: str, tracking_uri: str | None) -> tuple[float, float, str | None]:
    """(lam, smoothing, note): the targets of the run that logged the model at `source`; the
    shipped defaults (1.0, 0.0) and a note saying so when the source names no readable run."""
    if source.startswith(("runs:/", "models:/")):
        import mlflow
        from mlflow.exceptions import MlflowException

        # lazy: scikit-learn via experiments/
        from psyattrs.experiments.provenance import load_run_config
        from psyattrs.experiments.store import quiet_mlflow, tracking_store

        try:
            with tracking_store(tracking_uri), quiet_mlflow():
                run_id = mlflow.models.get_model_info(source).run_id
            config, _ = load_run_config(run_id, tracking_uri=tracking_uri)
            return float(config.targets.lam), float(config.targets.smoothing), None
        except (MlflowException, ValueError, OSError) as exc:  # no readable run: the documented defaults
            return 1.0, 0.0, f"could not read the targets of the run behind {source} ({exc}); refitting with lambda 1.0"
    return 1.0, 0.0, f"{source} names no run: refitting with the default targets (lambda 1.0, smoothing 0)"


def _corpus(data: Any, schema: Schema, fmt: str | None, what: str) -> Corpus:
    if isinstance(data, Corpus):
        corpus = data
    elif isinstance(data, pd.DataFrame):
        if "text" not in data.columns:
            raise ValueError(f"the {what} has no 'text' column")
        corpus = Corpus(normalize_table(data, schema), schema=schema, format="generic")
    else:
        corpus = load_corpus(data, format=fmt, schema=schema)
        if corpus.format == "public":
            raise InputFileError(data, "is an OPELA public-release file (per-speaker texts whose interleaving is "
                                       "unknown); give an utterance table")
    if len(corpus.utterances) == 0 or bool(pause_mask(corpus.utterances).all()):
        raise ValueError(f"the {what} {_name(data)} holds no sentence")
    return corpus


def _name(data: Any) -> str:
    return str(data) if isinstance(data, (str, Path)) else f"({type(data).__name__})"


def _labelled_heads(corpus: Corpus, heads: list[str]) -> tuple[dict[str, HeadLabels], list[str]]:
    labels = wide_labels(corpus.utterances, corpus.schema, annotations=corpus.annotations, heads=heads)
    return labels, [h for h in heads if len(labels[h].rows)]


def _columns_heads(table: pd.DataFrame) -> list[str]:
    """The heads a table has labelers' columns for (whatever the schema)."""
    found = [m.group(1) for m in (_LABELER_HEAD.match(str(c)) for c in table.columns) if m]
    return list(dict.fromkeys(found))


def _chosen(schema: Schema, heads: Iterable[str] | None) -> list[str]:
    if heads is None:
        return list(schema.head_names)
    chosen = list(dict.fromkeys(heads))
    unknown = [h for h in chosen if h not in schema.head_names]
    if unknown or not chosen:
        raise ValueError(f"--heads {unknown or chosen} are not among the model's heads {schema.head_names}")
    return chosen


def _subset(schema: Schema, heads: list[str]) -> Schema:
    return Schema(schema.name, tuple(h for h in schema if h.name in heads), schema.language)


def get_label_quality(
    corpus: Any,
    model: Any,
    *,
    heads: Iterable[str] | None = None,
    folds: int = 5,
    seed: int = 0,
    format: str | None = None,
    tracking_uri: str | None = None,
    on_fold: Callable[[int, int], None] | None = None,
) -> LabelQuality:
    """Consensus quality per item and head, quality per labeler, from cross-fitted predictions.

    Args:
        corpus: a corpus file of any format, a `Corpus`, or an utterance DataFrame, with the
            labelers' labels (two or more on some items).
        model: a model URI (`runs:/ID/model`, `models:/NAME@ALIAS`), a model folder or a model.
        heads: the heads to score (default: every head of the model).
        folds: cross-fitting folds of whole conversations (>= 2).
        seed: the folds' seed.
        format: force the corpus format.
        tracking_uri: the MLflow store of the URI.
        on_fold: progress callback (fold number from 1, folds).

    Returns:
        `LabelQuality` (items most likely mislabelled first, labelers best first).

    Raises:
        ValueError: the model's heads have no labels in the corpus, an unknown head, no item with
            two labels for a head, fewer conversations than folds.
        InputFileError: a corpus file that cannot be read.
    """
    inner, schema, source = _model(model, tracking_uri)
    chosen = _chosen(schema, heads)
    data = _corpus(corpus, schema, format, "corpus")
    labels, rated = _labelled_heads(data, chosen)
    if len(rated) < len(chosen):
        missing = [h for h in chosen if h not in rated]
        has = _columns_heads(data.utterances) if data.annotations is None else sorted(
            data.annotations["head"].astype(str).unique())
        raise ValueError(
            f"the model's head(s) {missing} have no labelers' labels in the corpus {_name(corpus)} "
            f"(it has labels for {has or 'no head'}); pick the heads with --heads or use a model trained on these labels"
        )
    lam, smoothing, note = run_targets(source, tracking_uri)
    # lazy: scikit-learn via experiments/
    from psyattrs.experiments.crossfit import cross_fitted_proba

    proba = cross_fitted_proba(data.utterances, _subset(schema, chosen), kind=inner.kind, settings=inner.settings,
                               folds=folds, seed=seed, lam=lam, smoothing=smoothing, on_fold=on_fold)
    items, labelers = label_quality_tables(labels, proba, data.utterances)
    return LabelQuality(items, labelers, chosen, folds, source, inner.kind, lam, smoothing, [note] if note else [])


def log_label_quality(result: LabelQuality, *, tracking_uri: str | None = None) -> str | None:
    """Logs the tables (`label_quality/items.parquet`, `labelers.csv`) and `summary()` to the
    active MLflow run, or to the run named by MLFLOW_RUN_ID; returns its id, None when there is none."""
    import mlflow

    # lazy: scikit-learn via experiments/
    from psyattrs.experiments.store import quiet_mlflow, tracking_store

    active = mlflow.active_run()
    run_id = active.info.run_id if active is not None else os.environ.get("MLFLOW_RUN_ID")
    if not run_id:
        return None
    import tempfile

    with tracking_store(tracking_uri), quiet_mlflow():
        client = mlflow.MlflowClient()
        with tempfile.TemporaryDirectory() as tmp:
            result.items.to_parquet(Path(tmp) / "items.parquet", index=False)
            result.labelers.to_csv(Path(tmp) / "labelers.csv", index=False)
            client.log_artifacts(run_id, tmp, "label_quality")
        for name, value in result.summary().items():
            client.log_metric(run_id, name, value)
        client.log_param(run_id, "label_quality_folds", result.folds)
    return run_id


def get_next_batch(
    pool: Any,
    model: Any,
    *,
    budget: int,
    labelled: Any = None,
    strategy: str = "combined",
    unit: str = "sentence",
    heads: Iterable[str] | None = None,
    folds: int = 5,
    seed: int = 0,
    format: str | None = None,
    tracking_uri: str | None = None,
) -> pd.DataFrame:
    """The items to send to the labelers next, best first.

    Candidates are the pool's sentences (pause rows excepted) and the sentences of `labelled` that
    the pool lacks (they may be relabelled); the labels so far come from both.

    Args:
        pool: a corpus file of any format, a `Corpus` or an utterance DataFrame.
        model: a model URI, folder or model.
        budget: how many sentences (or conversations with `unit="conversation"`) to return (>= 1,
            at most the candidates).
        labelled: the labels so far (file, `Corpus` or DataFrame), matched by `sent_id`.
        strategy: one of `psyattrs.labels.active.STRATEGIES`.
        unit: `sentence` or `conversation` (a conversation's score is the mean of its sentences').
        heads: the heads to combine (default: every head of the model).
        folds: cross-fitting folds for the labelled items' probabilities.
        seed: the random strategy's and the folds' seed.
        format: force the pool's format.
        tracking_uri: the MLflow store of the URI.

    Returns:
        DataFrame of `budget` rows: `rank` (1 = first), `sent_id`, `doc_id`, `text`, `action`
        (`label` or `relabel`) for sentences, or `doc_id`, `n_sentences` for conversations; then
        `n_labels`, `score`, `pred_disagreement`, `entropy`, `model_doubt`, `few_labels` (and
        `activelab` with that strategy), `strategy`.

    Raises:
        ValueError: bad strategy, unit, budget or heads; an empty pool; a budget larger than the pool.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy {strategy!r} is not one of {list(STRATEGIES)}")
    if unit not in UNITS:
        raise ValueError(f"unit {unit!r} is not one of {list(UNITS)}")
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget < 1:
        raise ValueError(f"budget must be an integer >= 1, got {budget!r}")
    inner, schema, source = _model(model, tracking_uri)
    chosen = _chosen(schema, heads)
    data = _corpus(pool, schema, format, "pool")
    table, annotations = data.utterances, _long(data)
    if labelled is not None:
        known = _corpus(labelled, schema, None, "labelled file")
        _, rated = _labelled_heads(known, chosen)
        if not rated:
            raise ValueError(f"the labelled file {_name(labelled)} has no labels for the heads {chosen}")
        extra = known.utterances[~known.utterances["sent_id"].astype(str).isin(set(table["sent_id"].astype(str)))]
        table = pd.concat([table, extra], ignore_index=True)
        annotations = pd.concat([annotations, _long(known)], ignore_index=True).drop_duplicates(
            ["sent_id", "annotator", "head"], keep="last")
        for col in ("annotator", "head"):
            annotations[col] = annotations[col].astype(str).astype("category")
    candidates = np.flatnonzero(~pause_mask(table))
    n_units = len(candidates) if unit == "sentence" else table["doc_id"].iloc[candidates].nunique()
    if budget > n_units:
        raise ValueError(f"budget {budget} is larger than the pool: {n_units} {unit}s to choose from")
    labels = wide_labels(table, schema, annotations=annotations, heads=chosen)
    proba = inner.predict_proba(table)
    if strategy in ("combined", "activelab"):
        proba = _cross_fit_labelled(table, labels, proba, inner, schema, folds=folds, seed=seed,
                                    source=source, tracking_uri=tracking_uri)
    full_labels = {}
    for head in chosen:
        m = np.full((len(table), labels[head].matrix.shape[1]), np.nan)
        m[labels[head].rows] = labels[head].matrix
        full_labels[head] = m[candidates]
    scores = selection_scores({h: proba[h][candidates] for h in chosen}, full_labels, strategy=strategy,
                              heads=chosen, seed=seed)
    rows = table.iloc[candidates].reset_index(drop=True)
    if unit == "sentence":
        front = pd.DataFrame({"sent_id": rows["sent_id"].astype(str), "doc_id": rows["doc_id"].astype(str),
                              "text": rows["text"].astype(str),
                              "action": np.where(scores["n_labels"] > 0, "relabel", "label")})
        out = pd.concat([front, scores], axis=1)
    else:
        scores["doc_id"] = rows["doc_id"].astype(str).to_numpy()
        grouped = scores.groupby("doc_id", sort=False)
        out = grouped.mean(numeric_only=True).drop(columns="n_labels")
        out.insert(0, "n_labels", grouped["n_labels"].sum())
        out.insert(0, "n_sentences", grouped.size())
        out = out.reset_index()
    first = top_k(out, budget, seed=seed)
    out = out.iloc[first].reset_index(drop=True)
    out.insert(0, "rank", np.arange(1, len(out) + 1))
    front = ["rank", "sent_id", "doc_id", "text", "action"] if unit == "sentence" else ["rank", "doc_id", "n_sentences"]
    out = out[front + ["n_labels", "score", *[c for c in out.columns if c not in (*front, "n_labels", "score")]]]
    out["strategy"] = strategy
    return out


def _long(corpus: Corpus) -> pd.DataFrame:
    return corpus.annotations if corpus.annotations is not None else annotations_from_slots(
        corpus.utterances, corpus.schema)


def _cross_fit_labelled(table: pd.DataFrame, labels: dict[str, HeadLabels], proba: dict[str, np.ndarray], inner: Any,
                        schema: Schema, *, folds: int, seed: int, source: str, tracking_uri: str | None
                        ) -> dict[str, np.ndarray]:
    """`proba` with the rows of labelled conversations replaced by cross-fitted probabilities
    (the heads with labels; when the labelled conversations are fewer than the folds, kept)."""
    rated_heads = [h for h, hl in labels.items() if len(hl.rows)]
    if not rated_heads:
        return proba
    rated_rows = np.unique(np.concatenate([labels[h].rows for h in rated_heads]))
    docs = table["doc_id"].astype(str)
    in_labelled = docs.isin(set(docs.iloc[rated_rows])).to_numpy()
    if docs[in_labelled].nunique() < folds:
        return proba
    # lazy: scikit-learn via experiments/
    from psyattrs.experiments.crossfit import cross_fitted_proba

    lam, smoothing, _ = run_targets(source, tracking_uri)
    part = table[in_labelled].reset_index(drop=True)
    crossed = cross_fitted_proba(part, _subset(schema, rated_heads), kind=inner.kind, settings=inner.settings,
                                 folds=folds, seed=seed, lam=lam, smoothing=smoothing)
    out = {h: p.copy() for h, p in proba.items()}
    for head in rated_heads:
        out[head][in_labelled] = crossed[head]
    return out
