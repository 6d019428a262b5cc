"""The REST endpoint end to end: the real `mlflow models serve` on a free 127.0.0.1 port.

The session's tiny model is trained in a temporary sqlite store and registered as
`psyattrs-tiny@champion` (conftest); the server resolves that alias through MLFLOW_TRACKING_URI.
The server is always stopped (module fixture, `finally`), and every wait is bounded.
"""

import socket
import sys

import numpy as np
import pandas as pd
import pytest

from psyattrs import Predictor
from psyattrs.cli import main
from psyattrs.schema import OPELA
from psyattrs.experiments.pyfunc import output_columns
from psyattrs.serving.serve import ModelServer, check_model_uri, serve_command, server_environment

ROWS = [
    {"doc_id": "c1", "text": "안녕하세요 반가워요~", "person_type": "user"},
    {"doc_id": "c1", "text": "저도 반가워요 ㅎㅎ", "person_type": "persona"},
    {"doc_id": "c1", "text": "오늘 너무 피곤했_다 ㅠㅠ", "person_type": "user"},
    {"doc_id": "c2", "text": "주말에 뭐 해요?", "person_type": "persona"},
    {"doc_id": "c2", "text": "그냥  집에 있었어요 ♡", "person_type": "user"},
]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tiny_model, tmp_path_factory):
    log = (tmp_path_factory.mktemp("server") / "server.log").open("w", encoding="utf-8")
    srv = ModelServer(tiny_model.registered, port=_free_port(), tracking_uri=tiny_model.tracking_uri, log=log)
    try:
        srv.start()
        srv.wait_ready(timeout=240)
        yield srv
    finally:
        srv.stop()
        log.close()


def _expected(tiny_model) -> pd.DataFrame:
    return Predictor(tiny_model.model).predict(pd.DataFrame(ROWS))


def _check_same(answer, expected: pd.DataFrame) -> None:
    got = pd.DataFrame(answer["predictions"])
    assert list(got.columns) == output_columns(OPELA) and len(got) == len(expected)
    for column in got.columns:
        if column.endswith(("_disagreement",)) or "_proba_" in column:
            np.testing.assert_allclose(got[column].to_numpy(), expected[column].to_numpy(), rtol=0, atol=1e-12)
        else:
            assert got[column].tolist() == expected[column].tolist(), column


@pytest.mark.slow
def test_three_request_forms_answer_as_predict(server, tiny_model):
    expected = _expected(tiny_model)
    frame = pd.DataFrame(ROWS)
    forms = {
        "dataframe_records": ROWS,
        "dataframe_split": {"columns": list(frame.columns), "data": frame.values.tolist()},
        "inputs": {c: frame[c].tolist() for c in frame.columns},
    }
    for key, payload in forms.items():
        status, answer = server.invoke({key: payload})
        assert status == 200, (key, answer)
        _check_same(answer, expected)


@pytest.mark.slow
def test_malformed_requests_get_4xx_and_the_server_keeps_serving(server, tiny_model):
    bad = [
        "{not json",
        {"dataframe_records": [{"doc_id": "c1", "txt": "오타"}]},
        {"dataframe_records": [{"doc_id": "c1", "text": "안녕", "position": "first"}]},
        {"rows": ROWS},
    ]
    for payload in bad:
        status, answer = server.invoke(payload)
        assert 400 <= status < 500, (payload, status, answer)
        assert "message" in answer
    status, answer = server.invoke({"dataframe_records": ROWS})
    assert status == 200
    _check_same(answer, _expected(tiny_model))
    assert server.ping()


def test_serve_command_and_environment(tiny_model, monkeypatch):
    command = serve_command("models:/x@champion", port=5123, workers=2)
    assert command[:3] == [sys.executable, "-m", "mlflow"]
    assert command[3:] == ["models", "serve", "-m", "models:/x@champion", "--env-manager", "local", "-h", "127.0.0.1",
                           "-p", "5123", "-w", "2", "-t", "60"]
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    env = server_environment(tiny_model.tracking_uri)
    assert env["MLFLOW_TRACKING_URI"] == tiny_model.tracking_uri
    assert env["PATH"].split(":")[0] == str(__import__("pathlib").Path(sys.executable).parent)
    assert server_environment()["MLFLOW_TRACKING_URI"].endswith("mlflow/mlflow.db")


@pytest.mark.parametrize("port", [0, 70000, "80"])
def test_bad_ports_are_named(port):
    with pytest.raises(ValueError, match="port must be an integer in 1..65535"):
        serve_command("models:/x@champion", port=port)


def test_unservable_models_fail_before_a_server_starts(tiny_model, tmp_path):
    with pytest.raises(ValueError, match="psyattrs-tiny@nobody"):
        check_model_uri("models:/psyattrs-tiny@nobody", tracking_uri=tiny_model.tracking_uri)
    with pytest.raises(ValueError, match="not an MLflow model: serve the run's logged model"):
        check_model_uri(str(tiny_model.folder))
    with pytest.raises(ValueError, match="neither"):
        check_model_uri(str(tmp_path))
    assert check_model_uri(tiny_model.registered, tracking_uri=tiny_model.tracking_uri) == tiny_model.registered


def test_cli_serve_unknown_model_exits_2(tiny_model, capsys):
    code = main(["serve", "--model", "models:/psyattrs-tiny@nobody", "--port", str(_free_port()),
                 "--tracking-uri", tiny_model.tracking_uri])
    assert code == 2 and "nobody" in capsys.readouterr().err
