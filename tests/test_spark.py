"""Spark: the registered model as `mlflow.pyfunc.spark_udf`, in local mode.

Skipped when pyspark (the optional extra `[spark]`) is not installed.
"""

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'psyattrs[spark]')")

# pyspark 4.x warns that it does not fully support pandas 3 yet; the test checks the values itself
pytestmark = [
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
]

from psyattrs import Predictor  # noqa: E402
from psyattrs.schema import OPELA  # noqa: E402
from psyattrs.experiments.pyfunc import head_columns  # noqa: E402
from psyattrs.serving.spark import annotate_spark, local_session  # noqa: E402

TEXTS = ["안녕하세요~", "반가워요 ㅎㅎ", "주말에 뭐 해요?", "오늘 너무 피곤했_다 ㅠㅠ", "저도 그래요", "네 좋아요 ♡", "뭐 먹었어요?"]


def _utterances() -> pd.DataFrame:
    rows = []
    for d in range(6):
        for k in range(1 + d % 4):
            rows.append({"doc_id": f"c{d}", "position": k, "person_type": ["user", "persona"][k % 2],
                         "text": TEXTS[(d + 2 * k) % len(TEXTS)], "source": "test"})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def spark():
    session = local_session("psyattrs-test", cores=2, memory="1g")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.mark.slow
def test_spark_udf_annotates_like_predict(spark, tiny_model):
    utterances = _utterances()
    shuffled = spark.createDataFrame(utterances.sample(frac=1.0, random_state=3))  # rows out of order
    annotated = annotate_spark(shuffled, tiny_model.registered, tracking_uri=tiny_model.tracking_uri, partitions=3)
    got = annotated.toPandas()
    assert list(got.columns[:5]) == ["doc_id", "position", "person_type", "text", "source"]
    assert len(got) == len(utterances)
    expected = Predictor(tiny_model.model).predict(utterances)
    merged = got.merge(expected, on=["doc_id", "position"], suffixes=("", "_expected"))
    assert len(merged) == len(utterances)
    assert (merged["sent_id"] == merged["sent_id_expected"]).all()
    for head in OPELA:
        for column in head_columns(head):
            if column.endswith("_name") or column == head.name:
                assert merged[column].tolist() == merged[f"{column}_expected"].tolist(), column
            else:
                np.testing.assert_allclose(merged[column], merged[f"{column}_expected"], rtol=0, atol=1e-12)


def test_spark_needs_position(spark, tiny_model):
    frame = spark.createDataFrame(pd.DataFrame({"doc_id": ["c1"], "text": ["안녕"]}))
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['position'\]"):
        annotate_spark(frame, tiny_model.registered, tracking_uri=tiny_model.tracking_uri)
