"""Spark: the registered model as `mlflow.pyfunc.spark_udf`, in local mode.

Skipped, saying why, when pyspark (the optional extra `[spark]`) is not installed or when no Java 17
or newer is found (JAVA_HOME, else `java` on the PATH).
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'psyattrs[spark]')")


def java_problem() -> str | None:
    """Why Spark cannot start here (no Java, or one older than 17), or None when Java 17+ is found."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).is_file():
        return "Spark needs Java 17 or newer and none was found (set JAVA_HOME or put java on the PATH)"
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"Spark needs Java 17 or newer; {java} -version failed: {exc}"
    found = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not found:
        return f"Spark needs Java 17 or newer; cannot read the version of {java}"
    major = int(found.group(2)) if found.group(1) == "1" else int(found.group(1))  # "1.8" is Java 8
    return None if major >= 17 else f"Spark needs Java 17 or newer; {java} is Java {major}"


_NO_JAVA = java_problem()
if _NO_JAVA:
    pytest.skip(_NO_JAVA, allow_module_level=True)

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
