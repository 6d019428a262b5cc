"""The trained multi-head model as an MLflow pyfunc model.

`AttributesPyfunc` is what a run logs (see `psyattrs.experiments.tracking.log_pyfunc_model`) and
what serving loads with `mlflow.pyfunc.load_model("runs:/<run id>/model")` or, once registered,
`models:/NAME@champion`. The trained model travels as the artifact `model` (the folder written by
`MultiHeadModel.save`), the label schema as the artifact `schema` (JSON); both are read once in
`load_context`, and `predict` only predicts.

Input: a DataFrame in the utterance-table shape, one row per sentence, chronological within each
`doc_id`: only `text` is required; without `doc_id` every row is an independent sentence (doc ids
`s1`, `s2`, ..., as `psyattrs.predict` gives a list of strings); `sent_id`, `position`,
`person_type`, `person_name`, `person_id`, `persona`, `turn`, `time`, `is_pause` and the
prefix columns of the transformer's input (`person_name_original`, `persona_concept`,
`speaker_gender`, `speaker_loc`, `speaker_tags`) are optional
and filled as `psyattrs.data.table.normalize_table` does (so context features see the same table as
in training). A list of strings is a list of independent sentences. The values are checked first
(`psyattrs.data.prediction_input.check_prediction_table`: no coercion of a number to text, no empty
sentence, `is_pause` true/false or 0/1, positions unique within a conversation).

Output: one row per input row, in input order: `doc_id`, `sent_id`, then per head `{head}` (the
predicted class, int64), `{head}_name` (that class's name in the schema, str),
`{head}_proba_{k}` for every class k (float64) and `{head}_disagreement` (float64: the entropy of
the predicted class distribution in base K, 0 = the labelers would all agree .. 1 = uniform; the
model's estimate of how much the labelers would disagree on the sentence).

Bad input (no `text` column, a value of the wrong type or out of its range) raises an
`MlflowException` with error code INVALID_PARAMETER_VALUE from the pyfunc model, which a scoring
server answers with HTTP 400; the message names the column and the rows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mlflow.pyfunc
import numpy as np
import pandas as pd

from psyattrs.data.prediction_input import check_prediction_table
from psyattrs.data.table import normalize_table
from psyattrs.models.base import MultiHeadModel, load_model
from psyattrs.models.decision import apply_decision
from psyattrs.schema import Head, Schema

REQUIRED_INPUT = ("text",)
OPTIONAL_STRING_INPUT = ("doc_id", "sent_id", "person_type", "person_name", "person_id", "persona", "time",
                         # what a transformer's persona_text / speaker_traits input reads
                         "person_name_original", "persona_concept", "speaker_gender", "speaker_loc", "speaker_tags")
OPTIONAL_INTEGER_INPUT = ("position", "turn")


def head_columns(head: Head) -> list[str]:
    """The output columns of one head, in order: class, name, probabilities, disagreement."""
    return [head.name, f"{head.name}_name", *(f"{head.name}_proba_{k}" for k in head.values),
            f"{head.name}_disagreement"]


def output_columns(schema: Schema) -> list[str]:
    """The output columns for a schema, in order."""
    columns = ["doc_id", "sent_id"]
    for head in schema:
        columns.extend(head_columns(head))
    return columns


def model_signature(schema: Schema):
    """The MLflow signature: the input columns above (optional ones marked so) and the output."""
    from mlflow.models import ModelSignature
    from mlflow.types.schema import ColSpec, Schema as ColSchema

    inputs = [ColSpec("string", name) for name in REQUIRED_INPUT]
    inputs += [ColSpec("string", name, required=False) for name in OPTIONAL_STRING_INPUT]
    inputs += [ColSpec("long", name, required=False) for name in OPTIONAL_INTEGER_INPUT]
    inputs.append(ColSpec("boolean", "is_pause", required=False))
    outputs = [ColSpec("string", "doc_id"), ColSpec("string", "sent_id")]
    for head in schema:
        outputs.append(ColSpec("long", head.name))
        outputs.append(ColSpec("string", f"{head.name}_name"))
        outputs += [ColSpec("double", f"{head.name}_proba_{k}") for k in head.values]
        outputs.append(ColSpec("double", f"{head.name}_disagreement"))
    return ModelSignature(inputs=ColSchema(inputs), outputs=ColSchema(outputs))


def disagreement(proba: np.ndarray) -> np.ndarray:
    """Entropy of each row's class distribution in base K (0 = one class certain, 1 = uniform).

    Args:
        proba: float array (n, K), rows summing to 1.

    Returns:
        float64 array (n,) in [0, 1].
    """
    p = np.asarray(proba, dtype=np.float64)
    k = p.shape[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log(p), 0.0)
    return np.clip(-terms.sum(axis=1) / np.log(k), 0.0, 1.0)


def decisions(model: Any, table: pd.DataFrame, proba: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The class decisions of a model for probabilities it already computed on `table`.

    A `MultiHeadModel` decides from its probabilities with its tuned rules (`thresholds_`,
    `offsets_`) exactly as its `predict` does, without computing them twice; any other model is
    asked for `predict(table)`.

    Returns:
        head -> int64 array (len(table),).
    """
    if isinstance(model, MultiHeadModel):
        return {
            name: apply_decision(p, threshold=model.thresholds_.get(name), offsets=model.offsets_.get(name))
            for name, p in proba.items()
        }
    predicted = model.predict(table)
    return {name: np.asarray(predicted[name], dtype=np.int64) for name in proba}


def prediction_columns(model: Any, schema: Schema, table: pd.DataFrame) -> dict[str, np.ndarray]:
    """Every head's output columns for a normalised utterance table (see the module docstring).

    Args:
        model: a fitted multi-head model (`predict_proba(table)`, `predict(table)`).
        schema: its heads.
        table: an utterance table as `normalize_table` returns it.

    Returns:
        column name -> array of len(table), in the order of `head_columns` for each head.
    """
    proba = model.predict_proba(table)
    predicted = decisions(model, table, proba)
    out: dict[str, np.ndarray] = {}
    for head in schema:
        classes = np.asarray(predicted[head.name], dtype=np.int64)
        p = np.asarray(proba[head.name], dtype=np.float64)
        names = np.array([head.class_name(k) for k in head.values], dtype=object)
        out[head.name] = classes
        out[f"{head.name}_name"] = names[classes] if len(classes) else np.array([], dtype=object)
        for k in head.values:
            out[f"{head.name}_proba_{k}"] = p[:, k]
        out[f"{head.name}_disagreement"] = disagreement(p) if len(p) else np.array([], dtype=np.float64)
    return out


def input_frame(model_input: Any) -> pd.DataFrame:
    """The input as a DataFrame: a DataFrame as it is, a list (or array, Series) of strings as
    independent sentences in a `text` column.

    Raises:
        TypeError: anything else (names the accepted forms).
    """
    if isinstance(model_input, pd.DataFrame):
        return model_input
    if isinstance(model_input, (pd.Series, np.ndarray, list, tuple)):
        values = list(model_input.tolist() if hasattr(model_input, "tolist") else model_input)
        if all(isinstance(v, str) for v in values):
            return pd.DataFrame({"text": pd.Series(values, dtype=object)})
        bad = next(i for i, v in enumerate(values) if not isinstance(v, str))
        raise TypeError(f"a list of sentences holds {type(values[bad]).__name__} at index {bad}, not a string")
    raise TypeError("the input is a DataFrame of the utterance table (with 'text') or a list of sentences, "
                    f"got {type(model_input).__name__}")


def predict_table(model: Any, schema: Schema, frame: pd.DataFrame, *, require_text: bool = True) -> pd.DataFrame:
    """Predicts every head for the sentences of `frame` (see the module docstring for the shapes).

    Args:
        model: a fitted multi-head model.
        schema: its heads.
        frame: the utterance-table rows (only `text` required), or a list of sentences.
        require_text: refuse empty sentences (pause rows excepted).

    Raises:
        TypeError, ValueError: bad input (see `check_prediction_table`; names the column and rows).
    """
    frame = check_prediction_table(input_frame(frame), require_text=require_text)
    table = normalize_table(frame, schema)
    out = {"doc_id": table["doc_id"].to_numpy(dtype=object), "sent_id": table["sent_id"].to_numpy(dtype=object)}
    out.update(prediction_columns(model, schema, table))
    return pd.DataFrame(out, columns=output_columns(schema))


class AttributesPyfunc(mlflow.pyfunc.PythonModel):
    """A psyattrs multi-head model behind MLflow's pyfunc interface.

    Artifacts (set when logging): `model`, the saved model folder; `schema`, a JSON file with
    `Schema.to_dict()`.
    """

    def load_context(self, context: Any) -> None:
        """Loads the schema and the trained model from `context.artifacts`, once."""
        schema_path = Path(context.artifacts["schema"])
        self.schema = Schema.from_dict(json.loads(schema_path.read_text(encoding="utf-8")), source=str(schema_path))
        self.model = load_model(context.artifacts["model"])

    def predict(self, context: Any, model_input: pd.DataFrame, params: dict[str, Any] | None = None) -> pd.DataFrame:
        """One output row per input sentence (`output_columns`).

        Raises:
            MlflowException: INVALID_PARAMETER_VALUE for input the model cannot use (the message
                names the column or rows), so that a server answers 400, not 500.
        """
        from mlflow.exceptions import MlflowException

        try:
            return predict_table(self.model, self.schema, model_input)
        except (ValueError, TypeError) as exc:
            raise MlflowException.invalid_parameter_value(f"bad input: {exc}") from None
