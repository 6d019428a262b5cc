"""Models logged before the pyfunc wrapper moved to `psyattrs.experiments.pyfunc` were pickled with
the class path `psyattrs.serving.pyfunc.AttributesPyfunc`; they must still load and predict."""

import json
import pickle

import pandas as pd

import psyattrs.serving.pyfunc as old_home
from psyattrs import Predictor
from psyattrs.experiments import pyfunc as new_home
from psyattrs.experiments.pyfunc import AttributesPyfunc

OLD_PATH = b"psyattrs.serving.pyfunc"
TEXTS = ["안녕하세요 반가워요~", "오늘 너무 피곤했어요 ㅠㅠ", "주말에 뭐 해요?"]


def test_the_old_module_offers_the_same_objects():
    assert old_home.AttributesPyfunc is AttributesPyfunc
    public = [n for n in vars(new_home) if not n.startswith("_")]
    assert {n: getattr(old_home, n) for n in public} == {n: getattr(new_home, n) for n in public}


def test_a_plain_pickle_written_under_the_old_class_path_loads(monkeypatch):
    obj = AttributesPyfunc()
    with monkeypatch.context() as m:
        m.setattr(AttributesPyfunc, "__module__", "psyattrs.serving.pyfunc")
        data = pickle.dumps(obj)
    assert OLD_PATH in data
    assert b"psyattrs.experiments.pyfunc" not in data
    assert type(pickle.loads(data)) is AttributesPyfunc


def test_an_mlflow_model_saved_under_the_old_class_path_loads_and_predicts(tiny_model, tmp_path, monkeypatch):
    import mlflow

    schema_path = tmp_path / "schema.json"
    schema_path.write_text(json.dumps(tiny_model.model.schema.to_dict(), ensure_ascii=False), encoding="utf-8")
    folder = tmp_path / "old_model"
    with monkeypatch.context() as m:
        m.setattr(AttributesPyfunc, "__module__", "psyattrs.serving.pyfunc")
        mlflow.pyfunc.save_model(
            str(folder), python_model=AttributesPyfunc(), pip_requirements=["psyattrs"],
            artifacts={"model": str(tiny_model.folder), "schema": str(schema_path)},
        )
    pickles = list(folder.rglob("*.pkl"))
    assert pickles, "mlflow wrote no pickle"
    blob = b"".join(p.read_bytes() for p in pickles)
    assert OLD_PATH in blob and b"psyattrs.experiments.pyfunc" not in blob

    loaded = Predictor(folder)
    assert loaded.schema.head_names == tiny_model.model.schema.head_names
    table = pd.DataFrame({"doc_id": ["a", "b", "c"], "text": TEXTS})
    got, want = loaded.predict_table(table), Predictor(tiny_model.model).predict_table(table)
    assert len(got) == 3 and got.equals(want)
