"""`predict()` and `Predictor`: the predicted attributes of sentences, from Python.

    >>> import psyattrs
    >>> psyattrs.predict(["오늘 너무 피곤했어요 ㅠㅠ", "주말에 뭐 해요?"], model="models:/psyattrs-demo@champion")

A `Predictor` loads a model once for repeated calls; `predict(inputs, model)` is a one-off
`Predictor(model).predict(inputs)`.

Models (`model=`):

- a registry URI `models:/NAME@ALIAS` or `models:/NAME/VERSION`, a run's model `runs:/RUN_ID/model`,
  a logged model `models:/m-...`, or any other MLflow model URI (looked up in the tracking store:
  `tracking_uri`, else MLFLOW_TRACKING_URI, else the project's store, as training uses);
- a local folder: an MLflow pyfunc model folder (with `MLmodel`) or a folder written by
  `MultiHeadModel.save` (with `model.json`);
- an already loaded model: a fitted `MultiHeadModel`, an MLflow `PyFuncModel` holding the psyattrs
  pyfunc model, or another `Predictor`.

Inputs (`inputs=`) and how they become conversations (context matters: a model with context sees
the earlier sentences of the same conversation, built by the same code as in training):

| input                                   | conversations                                   | doc_id      |
|-----------------------------------------|-------------------------------------------------|-------------|
| a string                                | one conversation of one sentence                | `s1`        |
| a list of strings                       | independent sentences, each its own conversation| `s1`, `s2`..|
| a dialogue: a list of turns             | one conversation, turns in order                | `d1`        |
| a list of dialogues                     | one conversation each                           | `d1`, `d2`..|
| a PersonalDialog record (dict, `dialog`)| one conversation (golden response appended)     | `pd1`       |
| a list of PersonalDialog records        | one conversation each                           | `pd1`, ..   |
| a DataFrame in the utterance-table shape| grouped by its `doc_id`                         | its own     |

A turn is a string (speaker unknown) or a dict with `text` and optionally `speaker` (`persona` and
`user` are the OPELA speaker types; any other value names the speaker), `is_pause`, and the
utterance-table columns `person_type`, `person_name`, `person_id`, `time` and `turn`.
PersonalDialog records are read as `psyattrs.data.personaldialog` reads a file (record i gets
doc_id `pd{i}`, as line i of a file would). A table needs `text` (see
`psyattrs.data.table`); its other columns are optional, and without `doc_id` every row is an
independent sentence (`s1`, `s2`, ...).

Output (a DataFrame by default; with `as_dicts=True` a list of plain dicts), one row per input
sentence in input order:

- DataFrame columns `doc_id`, `sent_id`, `position` (0-based in its conversation), `speaker` (the
  row's `person_type`, else `person_name`, else `person_id`, "" when unknown), `is_pause`, `text`,
  then per head `{head}` (predicted class), `{head}_name` (its name in the schema: "strange" reads
  as strange whatever the 0/1 coding), `{head}_proba_{k}` (probability of class k) and
  `{head}_disagreement` (entropy of the predicted distribution in base K: 0 = the labelers would
  agree, 1 = uniform). The index is the input table's index for a DataFrame, else a RangeIndex.
  The prediction columns are those the served model returns (`psyattrs.experiments.pyfunc`).
- A dict per sentence: `doc_id`, `sent_id`, `position`, `speaker`, `is_pause`, `text` and `heads`:
  head -> {`class`, `name`, `probabilities` (list, index = class), `disagreement`}.
- With `labelers=True` (a transformer trained with per-labeler heads, `model.labeler_heads`):
  also `{head}_labeler{k}`, the class labeler k would give (in a dict: `labelers`: {k: class}
  under each head), so one sees who would disagree.

Pause rows (time-gap markers) are context; they get a row too, marked `is_pause`: their predictions
carry no meaning.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from psyattrs.data.personaldialog import RecordError, parse_record
from psyattrs.data.prediction_input import check_prediction_table
from psyattrs.data.table import normalize_table
from psyattrs.errors import InputFileError, PsyattrsWarning
from psyattrs.features.language import LANGUAGE_NAMES, guess_language, language_name
from psyattrs.schema import Schema

ID_COLUMNS: tuple[str, ...] = ("doc_id", "sent_id", "position", "speaker", "is_pause", "text")
TURN_KEYS: frozenset[str] = frozenset(
    {"text", "speaker", "is_pause", "person_type", "person_name", "person_id", "time", "turn"}
)
SPEAKER_TYPES: frozenset[str] = frozenset({"persona", "user"})
_URI_SCHEMES = ("models:", "runs:", "file:", "mlflow-artifacts:", "s3:", "gs:", "wasbs:", "abfss:", "dbfs:",
                "hdfs:", "http:", "https:")
_FORMS = (
    "a string, a list of strings, a dialogue (list of turns: strings or dicts with 'text'), a list of "
    "dialogues, a PersonalDialog record (dict with 'dialog') or a list of them, or a DataFrame with "
    "'doc_id' and 'text'"
)


# ------------------------------------------------------------------------------------- models


def _from_pyfunc(loaded: Any, source: str) -> tuple[Any, Schema]:
    """The multi-head model and schema inside a loaded MLflow pyfunc model."""
    # lazy: mlflow
    from psyattrs.experiments.pyfunc import AttributesPyfunc

    inner = loaded.unwrap_python_model() if hasattr(loaded, "unwrap_python_model") else loaded
    if not isinstance(inner, AttributesPyfunc):
        raise TypeError(f"{source} is not a psyattrs model (its python model is {type(inner).__name__})")
    if not hasattr(inner, "model"):
        raise TypeError(f"{source}: the psyattrs pyfunc model has not been loaded (load_context was not called)")
    return inner.model, inner.schema


_NO_MLFLOW_WARNINGS = True
"""Loading a model, MLflow's own warnings are silenced (`quiet_mlflow`), so MLflow is told not to
compute them: its check of the model's pip requirements against the installed packages reads the
file list of every installed distribution, the largest single cost of loading a model (measured:
15 of 109 profiled seconds of `psyattrs predict --model runs:/ID/model --text ...` on a busy
two-core machine; benchmarks/startup_benchmark.py)."""


def _load_uri(uri: str, tracking_uri: str | None) -> tuple[Any, Schema]:
    import mlflow
    from mlflow.exceptions import MlflowException

    # lazy: scikit-learn via experiments/
    from psyattrs.experiments.store import quiet_mlflow, tracking_store

    with tracking_store(tracking_uri) as store, quiet_mlflow():
        try:
            loaded = mlflow.pyfunc.load_model(uri, suppress_warnings=_NO_MLFLOW_WARNINGS)
        except (MlflowException, OSError) as exc:
            message = getattr(exc, "message", None) or str(exc)
            raise ValueError(f"cannot load model {uri!r} from the tracking store {store}: {message}") from None
    return _from_pyfunc(loaded, uri)


def _load_folder(folder: Path) -> tuple[Any, Schema]:
    if not folder.exists():
        raise InputFileError(folder, "model folder not found (give a models:/ or runs:/ URI, or a model folder)")
    if not folder.is_dir():
        raise InputFileError(folder, "a model is a folder (an MLflow model with MLmodel, or a saved model with model.json)")
    if (folder / "MLmodel").is_file():
        import mlflow

        # lazy: scikit-learn via experiments/
        from psyattrs.experiments.store import quiet_mlflow

        with quiet_mlflow():
            return _from_pyfunc(mlflow.pyfunc.load_model(str(folder), suppress_warnings=_NO_MLFLOW_WARNINGS), str(folder))
    if (folder / "model.json").is_file():
        # lazy: scikit-learn
        from psyattrs.models.base import load_model

        model = load_model(folder)
        return model, model.schema
    raise InputFileError(folder, "holds neither an MLflow model (MLmodel) nor a saved psyattrs model (model.json)")


def load_for_prediction(model: Any, *, tracking_uri: str | None = None) -> tuple[Any, Schema, str]:
    """Resolves any accepted model (see the module docstring) to (multi-head model, schema, source).

    Args:
        model: a model URI, a local model folder, or a loaded model.
        tracking_uri: the MLflow store for URIs; None = MLFLOW_TRACKING_URI or the project's store.

    Returns:
        (model, schema, source): a fitted model with `predict_proba`/`predict`, its heads, and a
        description of where it came from.

    Raises:
        ValueError: a URI that does not resolve (no such registered model, alias or run).
        InputFileError: a local folder that is missing or holds no model.
        TypeError: an object that is not a psyattrs model.
    """
    # lazy: scikit-learn
    from psyattrs.models.base import MultiHeadModel

    if isinstance(model, Predictor):
        return model.model, model.schema, model.source
    if isinstance(model, MultiHeadModel):
        return model, model.schema, f"{type(model).__name__} object"
    if isinstance(model, (str, Path)):
        text = str(model)
        if not text.strip():
            raise ValueError("model must name a model: a models:/ or runs:/ URI or a model folder, got ''")
        if isinstance(model, str) and text.startswith(_URI_SCHEMES):
            inner, schema = _load_uri(text, tracking_uri)
            return inner, schema, text
        inner, schema = _load_folder(Path(text))
        return inner, schema, str(Path(text).resolve())
    if hasattr(model, "unwrap_python_model") or hasattr(model, "load_context"):
        inner, schema = _from_pyfunc(model, type(model).__name__)
        return inner, schema, f"{type(model).__name__} object"
    raise TypeError(
        f"model must be a models:/ or runs:/ URI, a model folder, a MultiHeadModel, an MLflow pyfunc model "
        f"or a Predictor, got {type(model).__name__}"
    )


# ------------------------------------------------------------------------------------- inputs


def _check_text(text: Any, where: str, *, pause: bool = False) -> str:
    if not isinstance(text, str):
        raise TypeError(f"{where}: a sentence must be a string, got {type(text).__name__}")
    if not text.strip() and not pause:
        raise ValueError(f"{where}: empty sentence (only pause turns may be empty)")
    return text


def _turn_row(turn: Any, doc_id: str, where: str) -> dict[str, Any]:
    if isinstance(turn, str):
        return {"doc_id": doc_id, "text": _check_text(turn, where)}
    if not isinstance(turn, Mapping):
        raise TypeError(f"{where}: a turn is a string or a dict with 'text', got {type(turn).__name__}")
    unknown = sorted(set(turn) - TURN_KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown turn key(s) {unknown}; allowed: {sorted(TURN_KEYS)}")
    if "text" not in turn:
        raise ValueError(f"{where}: a turn needs 'text'")
    pause = turn.get("is_pause", False)
    if pause not in (True, False, 0, 1):
        raise ValueError(f"{where}: 'is_pause' must be true/false or 0/1, got {pause!r}")
    row = {"doc_id": doc_id, "text": _check_text(turn["text"], where, pause=bool(pause)), "is_pause": bool(pause)}
    speaker = turn.get("speaker")
    if speaker is not None:
        if not isinstance(speaker, str):
            raise TypeError(f"{where}: 'speaker' must be a string, got {type(speaker).__name__}")
        row["person_name"] = speaker
        if speaker in SPEAKER_TYPES:
            row["person_type"] = speaker
    for key in ("person_type", "person_name", "person_id", "time", "turn"):
        if key in turn and turn[key] is not None:
            row[key] = turn[key]
    return row


def _dialogue_rows(turns: Sequence[Any], doc_id: str, where: str) -> list[dict[str, Any]]:
    if len(turns) == 0:
        raise ValueError(f"{where}: empty dialogue (no turns)")
    return [_turn_row(turn, doc_id, f"{where} turn {j}") for j, turn in enumerate(turns)]


def _record_rows(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    for i, record in enumerate(records, start=1):
        try:
            new_rows, _ = parse_record(record, f"pd{i}")
        except RecordError as exc:
            raise ValueError(f"PersonalDialog record {i - 1} ({exc.field}): {exc.reason}") from None
        rows.extend(new_rows)
    return pd.DataFrame(rows)


def _is_record(item: Any) -> bool:
    return isinstance(item, Mapping) and "dialog" in item


def inputs_to_table(inputs: Any) -> pd.DataFrame:
    """Turns any accepted input (see the module docstring) into an utterance table.

    Args:
        inputs: a string, list of strings, dialogue, list of dialogues, PersonalDialog record(s)
            or a DataFrame with `doc_id` and `text`.

    Returns:
        The rows as a DataFrame with at least `doc_id` and `text` (plus what the input gave:
        speakers, pause flags, PersonalDialog traits), in input order; a DataFrame input keeps
        its index.

    Raises:
        TypeError: an input of no accepted form (names the forms), a non-string sentence.
        ValueError: an empty sentence or dialogue, an unknown turn key, a table without `text`, an
            unusable PersonalDialog record (names its index and field).
    """
    if isinstance(inputs, pd.DataFrame):
        if "text" not in inputs.columns:
            raise ValueError(
                "the table lacks column 'text' (the sentences); 'doc_id' (conversation id) is optional: "
                "without it every row is an independent sentence"
            )
        return inputs
    if isinstance(inputs, str):
        return pd.DataFrame({"doc_id": ["s1"], "text": [_check_text(inputs, "the sentence")]})
    if _is_record(inputs):
        return _record_rows([inputs])
    if isinstance(inputs, (pd.Series, np.ndarray)):
        inputs = list(inputs)
    if not isinstance(inputs, Sequence) or isinstance(inputs, (bytes, Mapping)):
        raise TypeError(f"inputs must be {_FORMS}; got {type(inputs).__name__}")
    items = list(inputs)
    if not items:
        return pd.DataFrame({"doc_id": pd.Series([], dtype=str), "text": pd.Series([], dtype=str)})
    first = items[0]
    if isinstance(first, str):
        bad = next((i for i, s in enumerate(items) if not isinstance(s, str)), None)
        if bad is not None:
            raise TypeError(f"a list of sentences holds a {type(items[bad]).__name__} at index {bad}; {_FORMS}")
        texts = [_check_text(s, f"sentence {i}") for i, s in enumerate(items)]
        return pd.DataFrame({"doc_id": [f"s{i}" for i in range(1, len(texts) + 1)], "text": texts})
    if _is_record(first):
        bad = next((i for i, r in enumerate(items) if not _is_record(r)), None)
        if bad is not None:
            raise TypeError(f"a list of PersonalDialog records holds something else at index {bad}; {_FORMS}")
        return _record_rows(items)
    if isinstance(first, Mapping):
        return pd.DataFrame(_dialogue_rows(items, "d1", "dialogue"))
    if isinstance(first, Sequence) and not isinstance(first, (bytes, str)):
        rows: list[dict[str, Any]] = []
        for i, dialogue in enumerate(items):
            if isinstance(dialogue, (str, bytes, Mapping)) or not isinstance(dialogue, Sequence):
                raise TypeError(f"a list of dialogues holds a {type(dialogue).__name__} at index {i}; {_FORMS}")
            rows.extend(_dialogue_rows(dialogue, f"d{i + 1}", f"dialogue {i}"))
        return pd.DataFrame(rows)
    raise TypeError(f"inputs must be {_FORMS}; got a list of {type(first).__name__}")


# ---------------------------------------------------------------------------------- predictor


def _speakers(table: pd.DataFrame) -> np.ndarray:
    key = table["person_type"].to_numpy(dtype=object)
    for col in ("person_name", "person_id"):
        values = table[col].to_numpy(dtype=object)
        key = np.where(key == "", values, key)
    return key


def frame_to_dicts(frame: pd.DataFrame, schema: Schema) -> list[dict[str, Any]]:
    """The DataFrame output of `Predictor.predict` as plain dicts (see the module docstring)."""
    out = []
    columns = {c: frame[c].tolist() for c in frame.columns}
    for i in range(len(frame)):
        item = {c: columns[c][i] for c in ID_COLUMNS}
        item["heads"] = {
            head.name: {
                "class": int(columns[head.name][i]),
                "name": columns[f"{head.name}_name"][i],
                "probabilities": [float(columns[f"{head.name}_proba_{k}"][i]) for k in head.values],
                "disagreement": float(columns[f"{head.name}_disagreement"][i]),
            }
            for head in schema
        }
        for head in schema:
            per = [c for c in frame.columns if c.startswith(f"{head.name}_labeler")]
            if per:
                item["heads"][head.name]["labelers"] = {
                    int(c.removeprefix(f"{head.name}_labeler")): int(columns[c][i]) for c in per
                }
        out.append(item)
    return out


class Predictor:
    """A model loaded once, predicting any accepted input (see the module docstring).

    Args:
        model: a model URI (`models:/NAME@ALIAS`, `runs:/RUN_ID/model`, ...), a local model folder,
            or a loaded model.
        tracking_uri: the MLflow store that URIs refer to; None = MLFLOW_TRACKING_URI, else the
            project's store (`psyattrs.experiments.store.default_tracking_uri`).

    Attributes:
        model: the fitted multi-head model.
        schema: its heads.
        source: where the model came from (the URI, the folder, or the object's type).

    Raises:
        ValueError, InputFileError, TypeError: see `load_for_prediction`.
    """

    def __init__(self, model: Any, *, tracking_uri: str | None = None):
        self.model, self.schema, self.source = load_for_prediction(model, tracking_uri=tracking_uri)
        self._language_checked = False

    def _check_language(self, table: pd.DataFrame) -> None:
        """Warns once per Predictor when the text is in another language than the model's (not for a
        model on a multilingual encoder, `model.multilingual`)."""
        if self._language_checked:
            return
        texts = table.loc[~table["is_pause"].to_numpy(dtype=bool), "text"]
        found = guess_language(texts)
        if found is None:
            return  # too little text to tell; look again at the next call
        self._language_checked = True
        trained = self.schema.language
        if getattr(self.model, "multilingual", False):
            return  # a multilingual encoder (e.g. multilingual-e5) reads the other language too
        if trained in LANGUAGE_NAMES and found != trained:
            warnings.warn(
                f"the model was trained on {language_name(trained)} ({trained}) text but this text looks "
                f"{language_name(found)} ({found}): its predictions carry little meaning there",
                PsyattrsWarning,
                stacklevel=4,
            )

    def __repr__(self) -> str:
        return f"Predictor({self.source!r}, heads={self.schema.head_names})"

    @property
    def output_columns(self) -> list[str]:
        """The columns of the DataFrame `predict` returns, in order."""
        # lazy: mlflow
        from psyattrs.experiments.pyfunc import head_columns

        return [*ID_COLUMNS, *(c for head in self.schema for c in head_columns(head))]

    def predict_table(self, table: pd.DataFrame, *, labelers: bool = False) -> pd.DataFrame:
        """Predicts an utterance table (whole conversations; see `psyattrs.data.table`).

        Args:
            table: DataFrame with `doc_id` and `text`; optional columns as the table contract says.
            labelers: add each labeler's predicted class (`{head}_labeler{k}`; models with
                per-labeler heads only, else ValueError).

        Returns:
            The output DataFrame (`output_columns`), one row per table row, same index.

        Raises:
            ValueError, TypeError: no `text` column, or bad values (`is_pause` other than true/false
                or 0/1, repeated or negative `position`s, text that is not a string: see
                `psyattrs.data.prediction_input`; names the column and the rows).
        """
        # lazy: mlflow
        from psyattrs.experiments.pyfunc import prediction_columns

        index = table.index
        normal = normalize_table(check_prediction_table(inputs_to_table(table)), self.schema)
        self._check_language(normal)
        out: dict[str, Any] = {
            "doc_id": normal["doc_id"],
            "sent_id": normal["sent_id"],
            "position": normal["position"],
            "speaker": pd.Series(_speakers(normal), dtype=str),
            "is_pause": normal["is_pause"],
            "text": normal["text"],
        }
        if labelers and not getattr(self.model, "labelers_", None):
            raise ValueError("labelers=True needs a transformer trained with per-labeler heads (model.labeler_heads)")
        if len(normal):
            out.update(prediction_columns(self.model, self.schema, normal))
            frame = pd.DataFrame(out, columns=self.output_columns)
            if labelers:
                per = self.model.predict_labelers(normal)
                for head in self.schema:
                    for k in self.model.labelers_:
                        frame[f"{head.name}_labeler{k}"] = per[f"labeler{k}_{head.name}"].to_numpy()
        else:
            frame = self._empty()
        frame.index = index
        return frame

    def _empty(self) -> pd.DataFrame:
        dtypes = {"doc_id": str, "sent_id": str, "position": "int64", "speaker": str, "is_pause": bool, "text": str}
        for head in self.schema:
            dtypes[head.name] = "int64"
            dtypes[f"{head.name}_name"] = str
        frame = pd.DataFrame({c: pd.Series([], dtype=dtypes.get(c, "float64")) for c in self.output_columns})
        return frame

    def predict(self, inputs: Any, *, as_dicts: bool = False, labelers: bool = False) -> "pd.DataFrame | list[dict[str, Any]]":
        """Predicts every head for every sentence of `inputs`.

        Args:
            inputs: any accepted input (see the module docstring).
            as_dicts: return plain dicts instead of a DataFrame.
            labelers: add each labeler's predicted class (see the module docstring).

        Returns:
            The DataFrame described in the module docstring (`output_columns`), or a list of dicts.

        Raises:
            TypeError, ValueError: an input of no accepted form, or bad values in it (see
                `inputs_to_table`).
        """
        table = inputs_to_table(inputs)
        if not isinstance(inputs, pd.DataFrame):
            table = table.reset_index(drop=True)
        frame = self.predict_table(table, labelers=labelers)
        return frame_to_dicts(frame, self.schema) if as_dicts else frame


def predict(
    inputs: Any, model: Any, *, as_dicts: bool = False, tracking_uri: str | None = None
) -> "pd.DataFrame | list[dict[str, Any]]":
    """Loads `model` and predicts `inputs` (see the module docstring); use `Predictor` to load once.

    Args:
        inputs: a string, list of strings, dialogue, list of dialogues, PersonalDialog record(s)
            or an utterance-table DataFrame.
        model: a model URI, a local model folder, or a loaded model.
        as_dicts: return plain dicts instead of a DataFrame.
        tracking_uri: the MLflow store that URIs refer to (default: as training).

    Returns:
        One row (or dict) per sentence: ids, text and per head the class, its name, the class
        probabilities and the predicted labeler disagreement.
    """
    return Predictor(model, tracking_uri=tracking_uri).predict(inputs, as_dicts=as_dicts)
