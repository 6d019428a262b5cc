"""Experiment configs: defaults, merging, overrides, validation, round trip, sweeps."""

from pathlib import Path

import pytest
import yaml

from psyattrs.errors import InputFileError
from psyattrs.experiments.config import (
    ExperimentConfig,
    default_dict,
    expand_sweep,
    load_config,
    parse_override,
)

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sorted((REPO / "experiments").glob("*.yaml"))


def _write(tmp_path: Path, text: str, name: str = "exp.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_file_states_only_what_differs(tmp_path):
    path = _write(tmp_path, "data: {synthetic: {dialogues: 30}}\nmodel: {kind: lightgbm, params: {n_estimators: 20}}\n")
    config = load_config(path)
    assert config.name == "exp"  # the file name
    assert config.model.kind == "lightgbm" and config.model.params == {"n_estimators": 20}
    assert config.data.synthetic.dialogues == 30 and config.data.synthetic.rare_boost == 1.0
    # everything else from defaults.yaml
    defaults = default_dict()
    assert config.targets.lam == defaults["targets"]["lambda"] == 1.0
    assert config.split.by == "doc" and config.split.folds == 0 and config.context.previous == 0
    assert config.data.schema == "opela" and config.data.format == "auto"
    assert config.tracking.uri is None and config.run_name == "exp"


def test_overrides_are_dotted_and_yaml_parsed(tmp_path):
    path = _write(tmp_path, "data: {synthetic: {dialogues: 30}}\n")
    config = load_config(
        path,
        ["targets.lambda=0.5", "model.calibration=temperature", "model.params.C=2.5", "context.previous=3",
         "model.tune_thresholds=true", "tracking.run_name=my run"],
    )
    assert config.targets.lam == 0.5 and config.model.calibration == "temperature"
    assert config.model.params == {"C": 2.5} and config.context.previous == 3
    assert config.model.tune_thresholds is True and config.run_name == "my run"
    assert parse_override("model.calibration=null") == ("model.calibration", None)
    assert parse_override("data.path=a=b.csv") == ("data.path", "a=b.csv")
    with pytest.raises(ValueError, match="not key=value"):
        parse_override("targets.lambda")


def test_a_later_data_source_replaces_the_earlier_one(tmp_path):
    path = _write(tmp_path, "data: {synthetic: {dialogues: 30}}\n")
    config = load_config(path, ["data.path=corpus.csv"])
    assert config.data.path == str(Path.cwd() / "corpus.csv") and config.data.synthetic is None
    files = load_config(path, ["data.train=a.csv", "data.test=/data/b.csv", "data.schema=my_schema.yaml"])
    assert files.data.source_kind == "files" and files.data.valid is None
    assert files.data.test == "/data/b.csv" and files.data.schema == str(Path.cwd() / "my_schema.yaml")
    back = files.with_overrides({"data.synthetic.dialogues": 12})
    assert back.data.source_kind == "synthetic" and back.data.train is None


@pytest.mark.parametrize(
    "text, message",
    [
        ("modle: {kind: tfidf}\n", r"unknown config key 'modle' \(did you mean 'model'\?\); allowed keys: \['name'"),
        ("model: {knd: tfidf}\n", r"'model.knd'.*allowed keys under 'model': \['kind', 'params'"),
        ("targets: {lamda: 0.5}\n", r"'targets.lamda' \(did you mean 'lambda'\?\)"),
        ("data: {synthetic: {dialogs: 3}}\n", r"'data.synthetic.dialogs'.*\['dialogues', 'seed', 'rare_boost'\]"),
        ("model: {kind: svm}\n", r"model.kind: 'svm' is not one of \['majority', 'tfidf', 'tfidf_annotators', 'lightgbm', 'transformer', 'ensemble'\]"),
        ("split: {by: user}\n", r"split.by: 'user' is not one of \['doc', 'persona'\]"),
        ("targets: {lambda: 1.5}\n", r"targets.lambda: must be in \[0.0, 1.0\], got 1.5"),
        ("split: {folds: 1}\n", r"split.folds: must be >= 2, got 1"),
        ("split: {valid: 0.5, test: 0.5}\n", r"valid \+ test must be below 1"),
        ("context: {previous: two}\n", r"context.previous: must be an integer, got 'two'"),
        ("model: {calibration: isotonic}\n", r"'isotonic' is not one of \[None, 'temperature', 'platt'\]"),
        ("model: {tune_thresholds: 1}\n", r"model.tune_thresholds: must be true or false"),
        ("data: {format: public}\n", r"data.format: 'public' is not one of \['auto', 'annotated', 'generic', 'lewidi', 'long'\]"),
        ("seed: true\n", r"seed: must be an integer"),
        ("sweep: [{targets.lambda: 2}]\n", r"sweep\[0\].*targets.lambda: must be in"),
        ("sweep: [{model.kid: majority}]\n", r"sweep\[0\].*'model.kid'"),
        ("model: {params: {seed: 3}}\n", None),  # valid here; rejected when building settings
    ],
)
def test_bad_keys_and_values_are_named(tmp_path, text, message):
    path = _write(tmp_path, "data: {synthetic: {dialogues: 30}}\n" + text)
    if message is None:
        config = load_config(path)
        with pytest.raises(ValueError, match=r"\['seed'\] are set by other config keys"):
            config.model.settings(context_previous=0, seed=0)
        return
    with pytest.raises(ValueError, match=message) as info:
        load_config(path)
    assert str(path) in str(info.value)


def test_data_sources_must_be_exactly_one(tmp_path):
    with pytest.raises(ValueError, match="set exactly one of data.path.*none is set"):
        load_config(_write(tmp_path, "model: {kind: majority}\n"))
    with pytest.raises(ValueError, match="need both data.train and data.test"):
        load_config(_write(tmp_path, "data: {train: a.csv}\n"))
    with pytest.raises(ValueError, match="path and synthetic are all set"):
        ExperimentConfig.from_dict({"data": {"path": "a.csv", "synthetic": {"dialogues": 9}}}).with_overrides(
            {"data": {"path": "b.csv", "synthetic": {"dialogues": 9}}}
        )


def test_bad_files_are_input_file_errors(tmp_path):
    with pytest.raises(InputFileError, match="experiment config not found"):
        load_config(tmp_path / "missing.yaml")
    with pytest.raises(InputFileError, match="not readable YAML"):
        load_config(_write(tmp_path, "model: {kind: [\n"))
    with pytest.raises(InputFileError, match="a YAML mapping, got list"):
        load_config(_write(tmp_path, "- 1\n- 2\n"))


def test_round_trip_and_flatten(tmp_path):
    path = _write(
        tmp_path,
        "data: {synthetic: {dialogues: 30, seed: 4}}\nmodel: {kind: tfidf, params: {C: 2.0, ngram: [1, 3]}}\n"
        "sweep: [{targets.lambda: 0.0}]\n",
    )
    config = load_config(path)
    assert ExperimentConfig.from_dict(config.to_dict()) == config
    assert ExperimentConfig.from_dict(yaml.safe_load(config.to_yaml())) == config
    flat = config.flatten()
    assert flat["targets.lambda"] == "1.0" and flat["model.params.C"] == "2.0"
    assert flat["model.params.ngram"] == "[1, 3]" and flat["data.synthetic.seed"] == "4"
    assert flat["model.calibration"] == "null" and flat["sweep"] == "[{targets.lambda: 0.0}]"
    assert all(isinstance(v, str) for v in flat.values())


def test_sweep_expands_into_one_config_per_entry(tmp_path):
    path = _write(tmp_path, "data: {synthetic: {dialogues: 30}}\nsweep:\n  - {targets.lambda: 1.0}\n"
                            "  - {targets.lambda: 0.5}\n  - {targets.lambda: 0.0, targets.smoothing: 0.1}\n")
    members = expand_sweep(load_config(path))
    assert [m.targets.lam for m in members] == [1.0, 0.5, 0.0]
    assert [m.targets.smoothing for m in members] == [0.0, 0.0, 0.1]
    assert members[1].run_name == "exp[targets.lambda=0.5]"
    assert all(m.sweep == () for m in members)
    single = load_config(_write(tmp_path, "data: {synthetic: {dialogues: 30}}\n", "one.yaml"))
    assert expand_sweep(single) == [single]


def test_shipped_configs_load_and_state_only_known_keys():
    names = {p.stem for p in SHIPPED}
    assert {"majority", "baseline_tfidf", "lightgbm_context", "soft_vs_hard", "demo"} <= names
    for path in SHIPPED:
        config = load_config(path)
        assert config.name == path.stem
        for member in expand_sweep(config):
            settings = member.model.settings(context_previous=member.context.previous, seed=member.seed)
            assert settings["seed"] == member.seed
    soft = expand_sweep(load_config(REPO / "experiments" / "soft_vs_hard.yaml"))
    assert [m.targets.lam for m in soft] == [1.0, 0.5, 0.0]
    assert len({(m.model.kind, tuple(sorted(m.model.params.items()))) for m in soft}) == 1


def test_an_ensembles_backbone_goes_to_its_transformer_members_that_name_none(tmp_path):
    members = ("[{kind: transformer, seed: 1}, {kind: transformer, backbone: scratch}, "
               "{kind: lightgbm, n_estimators: 5}]")
    path = _write(tmp_path, "data: {synthetic: {dialogues: 30}}\n"
                            f"model: {{kind: ensemble, backbone: /ckpt, params: {{members: {members}}}}}\n")
    settings = load_config(path).model.settings(context_previous=0, seed=0)
    assert [m.get("backbone") for m in settings["members"]] == ["/ckpt", "scratch", None]
    assert "backbone" not in settings  # the ensemble itself takes no backbone
    assert load_config(path).model.params["members"][0] == {"kind": "transformer", "seed": 1}  # config unchanged
    classical = _write(tmp_path, "data: {synthetic: {dialogues: 30}}\nmodel: {kind: ensemble, backbone: /ckpt, "
                                 "params: {members: [{kind: tfidf}, {kind: lightgbm}]}}\n", name="classical.yaml")
    with pytest.raises(ValueError, match="model.backbone: on an ensemble, sets the backbone of its transformer members"):
        load_config(classical)
    with pytest.raises(ValueError, match="model.backbone: applies to model.kind transformer only, not 'tfidf'"):
        load_config(_write(tmp_path, "data: {synthetic: {dialogues: 30}}\nmodel: {kind: tfidf, backbone: /ckpt}\n",
                           name="tfidf.yaml"))


# issue 25: YAML 1.1 read 5e-5 as a string, so the README's fine-tuning command failed
def test_numbers_in_set_and_in_files_parse_as_meant(tmp_path):
    from psyattrs.models.base import build_model
    from psyattrs.schema import OPELA

    config = load_config("transformer_tiny", ["model.params.learning_rate=5e-5", "targets.lambda=5E-1"])
    assert config.model.params["learning_rate"] == 5e-5 and config.targets.lam == 0.5
    build_model("transformer", OPELA, **config.model.settings(context_previous=0, seed=0))  # its checks pass
    path = _write(tmp_path, "data: {synthetic: {dialogues: 1E3}}\n"
                            "model: {kind: tfidf, params: {C: 1e-4, max_iter: 2e3, tol: 1.5E-3}}\n")
    config = load_config(path)
    assert config.data.synthetic.dialogues == 1000 and isinstance(config.data.synthetic.dialogues, int)
    assert {k: config.model.params[k] for k in ("C", "max_iter", "tol")} == {"C": 1e-4, "max_iter": 2000, "tol": 1.5e-3}
    assert isinstance(config.model.params["max_iter"], int)
    assert parse_override("data.path=1e3.csv") == ("data.path", "1e3.csv")
    assert parse_override("data.path='5e-5'") == ("data.path", "5e-5")  # quoted: a string


def test_set_errors_blame_the_set_not_the_file(tmp_path):
    path = _write(tmp_path, "data: {synthetic: {dialogues: 30}}\n")
    with pytest.raises(ValueError) as info:
        load_config(path, ["model.kind=majority", "targets.lamda=0.5"])
    message = str(info.value)
    assert message.startswith("--set 'targets.lamda=0.5': unknown config key 'targets.lamda' (did you mean 'lambda'?)")
    assert str(path) not in message
    with pytest.raises(ValueError, match=r"^--set 'split.folds=1': config split.folds: must be >= 2"):
        load_config(path, ["split.folds=1"])
    bad = _write(tmp_path, "data: {synthetic: {dialogues: 30}}\nsplit: {folds: 1}\n", "bad.yaml")
    with pytest.raises(ValueError, match=r"bad.yaml: config split.folds: must be >= 2"):
        load_config(bad, ["targets.lambda=0.5"])  # the file is at fault, whatever the overrides
    assert load_config(bad, ["split.folds=3"]).split.folds == 3  # an override may mend the file


def test_set_without_equals_is_one_line_exit_2(capsys):
    from psyattrs.cli import main

    with pytest.raises(SystemExit) as info:
        main(["train", "majority", "--set", "targets.lambda", "0.5"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unrecognized arguments" not in err
    assert "--set targets.lambda: not key=value" in err and "--set targets.lambda=VALUE" in err
    with pytest.raises(ValueError, match=r"^--set 'targets.lambda': not key=value"):
        load_config("majority", ["targets.lambda"])


def _laughs(levels: int = 9) -> str:
    """A one-line flow list of 'billion laughs' anchors: 9**levels strings once expanded."""
    items = ["&a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for previous, name in zip("abcdefghij", "bcdefghijk"[:levels - 1]):
        items.append(f"&{name} [{', '.join(['*' + previous] * 9)}]")
    return "[" + ", ".join(items) + "]"


HOSTILE = {
    "billion-laughs": (_laughs(), r"more than 10000 items once its aliases are expanded"),
    "deep-nesting": ("[" * 100_000 + "]" * 100_000, r"nests deeper than 64 levels"),
    "cycle": ("&x [1, *x]", r"refers to a value that contains it"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_yaml_is_refused_in_one_short_line(tmp_path, case):
    import time

    value, message = HOSTILE[case]
    path = _write(tmp_path, f"targets:\n  lambda: {value}\n")
    started = time.perf_counter()
    with pytest.raises(InputFileError, match=message) as info:
        load_config(path)
    assert time.perf_counter() - started < 10  # the laughs ran past 60 s (2.4 GB) before
    assert len(str(info.value)) < 400 and "\n" not in str(info.value)
    with pytest.raises(ValueError, match=r"^--set 'targets.lambda=.*" + message) as info:
        parse_override(f"targets.lambda={value}")
    assert len(str(info.value)) < 700 and "\n" not in str(info.value)


def test_a_large_value_is_cut_in_the_error(tmp_path):
    path = _write(tmp_path, "data: {synthetic: {dialogues: 30}}\ntargets:\n  lambda: [" + ", ".join(["1"] * 5000) + "]\n")
    with pytest.raises(ValueError, match=r"targets.lambda: must be a number, got \[1, 1, 1, 1, 1, 1, \.\.\.\]") as info:
        load_config(path)
    assert len(str(info.value)) < 300
    with pytest.raises(ValueError) as info:
        load_config("majority", ["targets.lambda=" + "x" * 100_000])
    assert len(str(info.value)) < 400
