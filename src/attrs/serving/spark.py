"""Annotating on Spark: the registered model as an `mlflow.pyfunc.spark_udf`.

Needs the optional extra `pip install psyattrs[spark]` (pyspark) and Java 17.

    from pyspark.sql import SparkSession
    from psyattrs.serving.spark import annotate_spark

    spark = SparkSession.builder.getOrCreate()
    utterances = spark.read.parquet("utterances.parquet")   # doc_id, position, text, ...
    annotated = annotate_spark(utterances, "models:/psyattrs-demo@champion")
    annotated.write.parquet("annotated.parquet")

Context: a model with context reads the earlier sentences of a conversation, so the rows of one
conversation must reach the model together. `annotate_spark` therefore hash-partitions the rows
by `doc_id` (every conversation lies in one partition) and sets the session's
`spark.sql.execution.arrow.maxRecordsPerBatch` to 0 (no limit), so that the UDF receives each
partition as one batch and never a conversation cut in two; `position` orders the rows of a
conversation. Size the partitions (`partitions=`) so that one fits in an executor's memory
(a few hundred thousand sentences is comfortable; Arrow also caps a batch at
`spark.sql.execution.arrow.maxBytesPerBatch`, 2 GiB by default).

The UDF runs the pyfunc model in the executors' Python (`env_manager="local"`): psyattrs must be
installed there (on a cluster: ship it as a wheel or a cluster library; locally, set
`PYSPARK_PYTHON` to this interpreter, as `local_session` does).

Output: the input columns, then the prediction columns of `psyattrs.experiments.pyfunc`
(`sent_id` when the input has none, and per head the class, its name, the class probabilities
and the disagreement): the same values as `psyattrs.predict` on the same conversations.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from psyattrs.experiments.pyfunc import REQUIRED_INPUT, OPTIONAL_INTEGER_INPUT, OPTIONAL_STRING_INPUT
from psyattrs.experiments.store import quiet_mlflow, tracking_store
from psyattrs.serving.predict import Predictor

NEEDED_COLUMNS: tuple[str, ...] = ("doc_id", "position", "text")
INPUT_COLUMNS: tuple[str, ...] = (*REQUIRED_INPUT, *OPTIONAL_STRING_INPUT, *OPTIONAL_INTEGER_INPUT, "is_pause")
ARROW_BATCH_CONF = "spark.sql.execution.arrow.maxRecordsPerBatch"


def _import_pyspark():
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise ImportError("Spark annotation needs pyspark: pip install 'psyattrs[spark]' (and Java 17)") from None


def local_session(app_name: str = "psyattrs", *, cores: int = 2, memory: str = "2g"):
    """A local-mode SparkSession whose Python workers run this interpreter (for tests and trials).

    Args:
        app_name: the application name.
        cores: local threads (`local[cores]`).
        memory: driver memory, e.g. `2g`.

    Returns:
        The SparkSession (`getOrCreate`: an existing one is returned as it is).
    """
    _import_pyspark()
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.driver.memory", memory)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(max(2, cores)))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )


def _result_type(schema: Any, with_sent_id: bool):
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    fields = [StructField("sent_id", StringType())] if with_sent_id else []
    for head in schema:
        fields.append(StructField(head.name, LongType()))
        fields.append(StructField(f"{head.name}_name", StringType()))
        fields += [StructField(f"{head.name}_proba_{k}", DoubleType()) for k in head.values]
        fields.append(StructField(f"{head.name}_disagreement", DoubleType()))
    return StructType(fields)


def annotate_spark(
    df: Any,
    model_uri: str,
    *,
    partitions: int | None = None,
    tracking_uri: str | None = None,
    column: str = "_psyattrs",
) -> Any:
    """Adds the model's predictions to a Spark DataFrame of utterances (see the module docstring).

    Args:
        df: Spark DataFrame with `doc_id` (string), `position` (integer, order in the
            conversation) and `text`; optional `sent_id`, `person_type`, `person_name`,
            `person_id`, `persona`, `turn`, `time`, `is_pause`. Other columns are carried along.
        model_uri: `models:/NAME@ALIAS`, `runs:/RUN_ID/model` or an MLflow model folder.
        partitions: how many partitions to hash the conversations into; None = the session's
            `spark.sql.shuffle.partitions`.
        tracking_uri: the MLflow store for the URI; None = MLFLOW_TRACKING_URI or the project's.
        column: the temporary struct column's name (must not exist in `df`).

    Returns:
        A Spark DataFrame: the input columns, then the prediction columns (lazily computed).

    Raises:
        ImportError: pyspark is not installed.
        ValueError: a missing column (named), `column` already present, or bad `partitions`.
    """
    _import_pyspark()
    import mlflow
    from pyspark.sql import functions as F

    missing = [c for c in NEEDED_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(
            f"the DataFrame lacks column(s) {missing}; Spark annotation needs {list(NEEDED_COLUMNS)} "
            "(position orders the sentences of a conversation)"
        )
    if column in df.columns:
        raise ValueError(f"the DataFrame already has a column {column!r}; pass another column=")
    if partitions is not None and (isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1):
        raise ValueError(f"partitions must be None or an integer >= 1, got {partitions!r}")
    spark = df.sparkSession
    spark.conf.set(ARROW_BATCH_CONF, "0")
    inputs = [c for c in INPUT_COLUMNS if c in df.columns]

    schema = Predictor(model_uri, tracking_uri=tracking_uri).schema
    with tracking_store(tracking_uri), quiet_mlflow():
        udf = mlflow.pyfunc.spark_udf(
            spark, model_uri, result_type=_result_type(schema, "sent_id" not in df.columns), env_manager="local"
        )
    cast = {"doc_id": "string", "text": "string", "position": "long"}
    grouped = df.repartition(partitions, "doc_id") if partitions else df.repartition("doc_id")
    grouped = grouped.sortWithinPartitions("doc_id", "position")
    args = F.struct(*[F.col(c).cast(cast[c]).alias(c) if c in cast else F.col(c) for c in inputs])
    scored = grouped.withColumn(column, udf(args))
    return scored.select(*[F.col(c) for c in df.columns], f"{column}.*")
