"""The Model Registry: register a run's model, move aliases, load models:/NAME@ALIAS; the CLI.

Uses the session's tiny model and its temporary store (`tiny_model` in conftest); every test
registers under its own name so that version numbers are predictable.
"""

import mlflow
import numpy as np
import pytest

from psyattrs import Predictor
from psyattrs.cli import main
from psyattrs.serving.registry import model_source, pinned_uri, register, resolve_alias, set_alias

SENTENCES = ["안녕하세요 반가워요~", "오늘은 좀 우울하_다 ㅠㅠ"]


def _versions(uri: str, name: str) -> list[int]:
    client = mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)
    return sorted(int(v.version) for v in client.search_model_versions(f"name='{name}'"))


def test_register_sets_champion_and_the_alias_loads_the_run_model(tiny_model):
    reg = register(tiny_model.run_id, "reg-basic", tracking_uri=tiny_model.tracking_uri)
    assert (reg.name, reg.version, reg.aliases, reg.run_id) == ("reg-basic", 1, ("champion",), tiny_model.run_id)
    assert reg.uri == "models:/reg-basic@champion" and reg.source == f"runs:/{tiny_model.run_id}/model"
    by_alias = Predictor(reg.uri, tracking_uri=tiny_model.tracking_uri).predict(SENTENCES)
    direct = Predictor(tiny_model.model).predict(SENTENCES)
    np.testing.assert_allclose(by_alias["self_proba_1"].to_numpy(), direct["self_proba_1"].to_numpy())
    assert resolve_alias("reg-basic", tracking_uri=tiny_model.tracking_uri).version == 1


def test_a_new_version_takes_the_alias_and_set_alias_rolls_back(tiny_model):
    uri = tiny_model.tracking_uri
    register(tiny_model.run_id, "reg-move", tracking_uri=uri)
    second = register(f"runs:/{tiny_model.run_id}/model", "reg-move", alias=["champion", "latest-good"], tracking_uri=uri)
    assert second.version == 2 and second.aliases == ("champion", "latest-good")
    assert resolve_alias("reg-move", "champion", tracking_uri=uri).version == 2
    assert resolve_alias("reg-move", "latest-good", tracking_uri=uri).version == 2
    assert pinned_uri("models:/reg-move@champion", tracking_uri=uri) == "models:/reg-move/2"
    back = set_alias("reg-move", "champion", 1, tracking_uri=uri)
    assert back.version == 1 and back.run_id == tiny_model.run_id
    assert resolve_alias("reg-move", tracking_uri=uri).version == 1
    assert pinned_uri("models:/reg-move@champion", tracking_uri=uri) == "models:/reg-move/1"
    assert pinned_uri("runs:/abc/model") == "runs:/abc/model"


def test_register_without_alias_gives_a_version_uri(tiny_model):
    reg = register(tiny_model.run_id, "reg-plain", alias=None, tracking_uri=tiny_model.tracking_uri)
    assert reg.aliases == () and reg.uri == "models:/reg-plain/1"
    assert len(Predictor(reg.uri, tracking_uri=tiny_model.tracking_uri).predict(SENTENCES)) == 2


@pytest.mark.parametrize("alias", ["latest", "v3", "two words", ""])
def test_bad_aliases_fail_before_anything_is_registered(tiny_model, alias):
    with pytest.raises(ValueError, match="alias"):
        register(tiny_model.run_id, "reg-bad-alias", alias=alias, tracking_uri=tiny_model.tracking_uri)
    assert _versions(tiny_model.tracking_uri, "reg-bad-alias") == []


def test_unknown_runs_names_and_versions_are_named(tiny_model):
    uri = tiny_model.tracking_uri
    with pytest.raises(ValueError, match="no run '0{32}'"):
        register("0" * 32, "reg-x", tracking_uri=uri)
    with pytest.raises(ValueError, match="not a run"):
        register("my-model", "reg-x", tracking_uri=uri)
    with pytest.raises(ValueError, match="may not contain"):
        register(tiny_model.run_id, "team/model", tracking_uri=uri)
    with pytest.raises(ValueError, match="version 9"):
        set_alias(tiny_model.registered.split("/")[1].split("@")[0], "champion", 9, tracking_uri=uri)
    with pytest.raises(ValueError, match="nobody"):
        resolve_alias("psyattrs-tiny", "nobody", tracking_uri=uri)


def test_a_failed_run_is_not_registered(tiny_model):
    client = mlflow.MlflowClient(tracking_uri=tiny_model.tracking_uri)
    run = client.create_run(client.get_run(tiny_model.run_id).info.experiment_id)
    client.set_terminated(run.info.run_id, status="FAILED")
    with pytest.raises(ValueError, match="ended FAILED"):
        register(run.info.run_id, "reg-failed", tracking_uri=tiny_model.tracking_uri)


def test_model_source_accepts_ids_and_runs_uris():
    run_id = "a" * 32
    assert model_source(run_id) == (run_id, f"runs:/{run_id}/model")
    assert model_source(f"runs:/{run_id}") == (run_id, f"runs:/{run_id}/model")
    assert model_source(f"runs:/{run_id}/other/") == (run_id, f"runs:/{run_id}/other")


def test_cli_register_prints_the_uri_last(tiny_model, capsys):
    uri = tiny_model.tracking_uri
    assert main(["register", tiny_model.run_id, "--name", "reg-cli", "--tracking-uri", uri]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == "models:/reg-cli@champion" and "version 1" in lines[0]
    assert main(["register", tiny_model.run_id, "--name", "reg-cli", "--alias", "staging", "--tracking-uri", uri]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "models:/reg-cli@staging"
    assert resolve_alias("reg-cli", "champion", tracking_uri=uri).version == 1
    assert main(["register", "--name", "reg-cli", "--version", "2", "--alias", "champion", "--tracking-uri", uri]) == 0
    assert resolve_alias("reg-cli", "champion", tracking_uri=uri).version == 2


@pytest.mark.parametrize(
    "args, match",
    [
        (["0" * 32, "--name", "reg-cli-bad"], "no run"),
        (["--name", "reg-cli-bad"], "give a RUN_ID"),
        (["RUN", "--name", "n", "--alias", "a", "--no-alias"], "contradict"),
    ],
)
def test_cli_register_bad_input_exits_2(tiny_model, capsys, args, match):
    assert main(["register", *args, "--tracking-uri", tiny_model.tracking_uri]) == 2
    assert match in capsys.readouterr().err
