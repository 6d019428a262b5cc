"""Predictions in the layout the LeWiDi tasks collect: item id, hard label, soft label per class.

    >>> from psyattrs.serving.lewidi_output import predict_lewidi
    >>> predict_lewidi("MD-Agreement_test.json", model="models:/lewidi@champion", out="preds.json")

The file written (`write_lewidi_predictions`) is one JSON object keyed by item id, in the
harmonised JSON's own terms (FORMATS §7):

    {"17": {"hard_label": "1", "soft_label": {"0": 0.3112, "1": 0.6888}}, ...}

Class keys are the corpus' own values: `"0"`/`"1"` for a binary head, the severity values
(`"-3"` .. `"1"`) for a ConvAbuse-style severity head. An item's prediction is that of its rated
turn (the last utterance of its conversation; the earlier turns are context). `hard_label` is the
model's decision (its tuned threshold, when it has one), not always the argmax of `soft_label`.
`read_lewidi_predictions` reads such a file back.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from psyattrs.data import load_corpus
from psyattrs.data.io import check_file
from psyattrs.data.lewidi import class_values
from psyattrs.errors import InputFileError
from psyattrs.schema import Head, Schema
from psyattrs.serving.predict import Predictor

SHARE_DIGITS = 6


def _head(schema: Schema, head: str | None) -> Head:
    if head is not None:
        return schema[head]
    if len(schema.heads) != 1:
        raise ValueError(f"the model has heads {schema.head_names}: name the one to write with head=")
    return schema.heads[0]


def _keys(head: Head) -> dict[int, str]:
    """Class -> the value the corpus writes for it."""
    return {c: str(v) for v, c in class_values(head).items()}


def lewidi_predictions(frame: pd.DataFrame, schema: Schema, *, head: str | None = None) -> dict[str, dict[str, Any]]:
    """The predictions of `Predictor.predict` as the LeWiDi layout (see the module docstring).

    Args:
        frame: the prediction DataFrame (`doc_id`, `position`, `{head}`, `{head}_proba_{k}`).
        schema: the model's schema.
        head: the head to write; None for the only one.

    Returns:
        item id -> {"hard_label": str, "soft_label": {class value: share}}, in the frame's order.
    """
    spec = _head(schema, head)
    keys = _keys(spec)
    rated = frame.sort_values(["doc_id", "position"], kind="stable").groupby("doc_id", sort=False).tail(1)
    rated = rated.set_index("doc_id").loc[pd.unique(frame["doc_id"])]
    out: dict[str, dict[str, Any]] = {}
    for doc_id, row in rated.iterrows():
        soft = {keys[k]: round(float(row[f"{spec.name}_proba_{k}"]), SHARE_DIGITS) for k in spec.values}
        out[str(doc_id)] = {"hard_label": keys[int(row[spec.name])], "soft_label": soft}
    return out


def write_lewidi_predictions(frame: pd.DataFrame, schema: Schema, path: "str | Path", *, head: str | None = None) -> int:
    """Writes `lewidi_predictions` as one JSON object to `path`; returns the number of items.

    Raises:
        InputFileError: the folder of `path` does not exist.
    """
    p = Path(path)
    if not p.resolve().parent.is_dir():
        raise InputFileError(p, "cannot write the predictions: its folder does not exist")
    items = lewidi_predictions(frame, schema, head=head)
    p.write_text(json.dumps(items, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return len(items)


def read_lewidi_predictions(path: "str | Path") -> pd.DataFrame:
    """Reads a predictions file back.

    Returns:
        DataFrame indexed by item id (`item_id`, str, file order): column `hard_label` (str) and
        one float column `soft_{value}` per class value, in the file's order.

    Raises:
        InputFileError: not a JSON object of {hard_label, soft_label} items, or shares that are not
            numbers summing to 1 (names the item).
    """
    p = check_file(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputFileError(p, f"not a JSON predictions file: {exc}") from None
    if not isinstance(data, dict):
        raise InputFileError(p, "a predictions file is one JSON object: item id -> {hard_label, soft_label}")
    rows = {}
    for item_id, item in data.items():
        if not isinstance(item, dict) or "hard_label" not in item or not isinstance(item.get("soft_label"), dict):
            raise InputFileError(p, f"item {item_id!r} has no hard_label and soft_label object")
        try:
            soft = {f"soft_{k}": float(v) for k, v in item["soft_label"].items()}
        except (TypeError, ValueError):
            raise InputFileError(p, f"item {item_id!r}: a soft_label share is not a number") from None
        total = sum(soft.values())
        if not math.isfinite(total) or abs(total - 1.0) > 1e-3:
            raise InputFileError(p, f"item {item_id!r}: soft_label sums to {total:.4g}, not 1")
        rows[str(item_id)] = {"hard_label": str(item["hard_label"]), **soft}
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.name = "item_id"
    return frame


def predict_lewidi(
    path: "str | Path",
    model: Any,
    *,
    out: "str | Path | None" = None,
    head: str | None = None,
    tracking_uri: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Predicts every item of a LeWiDi file; the Python equivalent of
    `psyattrs predict --model M --input FILE --format lewidi [--out OUT.json]`.

    Args:
        path: a LeWiDi harmonised JSON file (its labels, if any, are ignored).
        model: a model URI, folder or loaded model (see `psyattrs.serving.predict`).
        out: also write the predictions there (JSON).
        head: the head to write; None for the model's only head.
        tracking_uri: the MLflow store that URIs refer to.

    Returns:
        `lewidi_predictions` of the items the reader kept (items it set aside are not predicted).
    """
    predictor = model if isinstance(model, Predictor) else Predictor(model, tracking_uri=tracking_uri)
    corpus = load_corpus(path, format="lewidi", schema=predictor.schema)
    frame = predictor.predict(corpus.utterances)
    if out is not None:
        write_lewidi_predictions(frame, predictor.schema, out, head=head)
    return lewidi_predictions(frame, predictor.schema, head=head)
