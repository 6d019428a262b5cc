"""What a new user meets first: runtime defaults, --version, config names, the custom-corpus path,
honest output (progress lines, the labeler column, warnings), and the demo's registry name."""

import os
import subprocess
import sys
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest

import psyattrs
from psyattrs.cli import main
from psyattrs.experiments.config import experiments_dir, load_config, resolve_config_path
from psyattrs.experiments.dataset import fill_final_labels
from psyattrs.experiments.runner import train
from psyattrs.schema import load_schema

REPO = Path(__file__).resolve().parents[1]
SCHEMA_YAML = """\
name: toy
language: en
heads:
  - name: abuse
    classes: {0: not abusive, 1: abusive}
  - name: severity
    classes: {0: none, 1: ambiguous, 2: mild, 3: strong, 4: very strong}
    ordinal: true
"""


def _python(code: str, **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**base, **env},
                          timeout=120, check=True)
    return done.stdout.strip()


# ------------------------------------------------------------------------------ runtime defaults


def test_import_sets_passive_openmp_and_no_mlflow_bars_unless_the_user_chose():
    code = "import os, psyattrs; print(os.environ['OMP_WAIT_POLICY'], os.environ['MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR'])"
    assert _python(code) == "PASSIVE false"
    assert _python(code, OMP_WAIT_POLICY="ACTIVE", MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR="true") == "ACTIVE true"


def test_the_cli_and_a_served_model_import_get_the_defaults_before_lightgbm_loads():
    # the CLI module and the pyfunc module (what a served model unpickles) both go through psyattrs/__init__
    code = ("import os, psyattrs.serving.pyfunc, lightgbm, psyattrs._runtime as r; "
            "print(os.environ['OMP_WAIT_POLICY'], r.openmp_loaded_early())")
    assert _python(code) == "PASSIVE False"
    assert _python("import sklearn, psyattrs._runtime as r; print(r.openmp_loaded_early())") == "True"


def test_version_flag(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"psyattrs {psyattrs.__version__}"


# ------------------------------------------------------------------------------ config names


@pytest.mark.parametrize("form", ["demo", "demo.yaml", "experiments/demo.yaml"])
def test_shipped_configs_load_by_name_from_any_folder(tmp_path, monkeypatch, form):
    monkeypatch.chdir(tmp_path)
    assert resolve_config_path(form) == experiments_dir() / "demo.yaml"
    assert load_config(form).name == "demo"


def test_a_local_file_wins_over_a_shipped_name_and_a_missing_one_lists_the_shipped(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "demo.yaml").write_text("model: {kind: majority}\ndata: {synthetic: {dialogues: 5}}\n", encoding="utf-8")
    assert load_config("demo.yaml").model.kind == "majority"
    with pytest.raises(psyattrs.errors.InputFileError, match=r"not found \(shipped configs: baseline_tfidf, demo"):
        load_config("nonesuch")


def test_targets_resolve_is_a_checked_config_key():
    assert load_config("majority").targets.resolve == "opela"
    assert load_config("majority", ["targets.resolve=dawid-skene"]).targets.resolve == "dawid-skene"
    with pytest.raises(ValueError, match=r"targets.resolve.*'vote' is not one of \['opela'"):
        load_config("majority", ["targets.resolve=vote"])


# ------------------------------------------------------------------------------ custom corpus


def _corpus(folder: Path, *, drop_severity: bool = False) -> tuple[Path, Path]:
    """A generic corpus with three labelers per head and no final-label columns."""
    rng = np.random.default_rng(3)
    rows = []
    for d in range(30):
        for p in range(5):
            truth = int(rng.integers(0, 2))
            row = {"doc_id": f"c{d}", "text": ("you are awful" if truth else "what a nice day") + f" {p}"}
            for k in (1, 2, 3):
                row[f"labeler{k}_abuse"] = truth if rng.random() < 0.85 else 1 - truth
                if not drop_severity:
                    row[f"labeler{k}_severity"] = int(rng.integers(0, 5))
            rows.append(row)
    path = folder / ("no_severity.csv" if drop_severity else "corpus.csv")
    pd.DataFrame(rows).to_csv(path, index=False)
    schema = folder / "schema.yaml"
    schema.write_text(SCHEMA_YAML, encoding="utf-8")
    return path, schema


def test_fill_final_labels_resolves_only_heads_without_final_labels(tmp_path):
    path, schema_path = _corpus(tmp_path)
    table = pd.read_csv(path)
    table["labeler_abuse"] = 1
    schema = load_schema(schema_path)
    filled, heads = fill_final_labels(table, schema, method="majority")
    assert heads == ["severity"]
    assert (filled["labeler_abuse"] == 1).all() and filled["labeler_severity"].notna().all()
    same, none = fill_final_labels(filled, schema, method="opela")
    assert none == [] and same is filled


def test_train_resolves_missing_final_labels_and_says_so(tmp_path, capsys):
    path, schema = _corpus(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    code = main(["train", "majority", "--quiet", "--set", f"data.path={path}", "--set", f"data.schema={schema}",
                 "--set", "targets.resolve=majority", "--set", f"tracking.uri={uri}"])
    out = capsys.readouterr().out
    assert code == 0
    assert "final labels resolved from the labelers' labels with 'majority' (targets.resolve) for head(s) " \
           "['abuse', 'severity']" in out
    run = mlflow.MlflowClient(tracking_uri=uri).get_run(out.strip().splitlines()[-1])
    assert run.data.params["targets.resolve"] == "majority"
    assert run.data.params["targets.resolved_heads"] == "abuse,severity"
    assert not np.isnan(run.data.metrics["test_macro_f1_severity"])  # scored against the resolved labels


def test_train_stops_naming_a_head_with_neither_final_nor_labelers_labels(tmp_path, capsys):
    path, schema = _corpus(tmp_path, drop_severity=True)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    code = main(["train", "majority", "--quiet", "--set", f"data.path={path}", "--set", f"data.schema={schema}",
                 "--set", f"tracking.uri={uri}"])
    err = capsys.readouterr().err
    assert code == 2
    assert "head(s) ['severity'] have neither final labels" in err and "Traceback" not in err


def test_train_progress_is_one_plain_line_per_step_off_a_terminal(tmp_path):
    path, schema = _corpus(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    done = subprocess.run(
        [sys.executable, "-m", "psyattrs", "train", "majority", "--set", f"data.path={path}",
         "--set", f"data.schema={schema}", "--set", f"tracking.uri={uri}"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert "\r" not in done.stderr and "\x1b[" not in done.stderr  # no bars, spinners or colours
    assert "Downloading artifacts" not in done.stderr
    steps = [line for line in lines if line.endswith("s") and ": " in line]
    assert steps[0].startswith("load and split the data: ") and steps[1].startswith("fit majority on ")
    assert all(not line.startswith(" ") for line in lines)  # nothing wrapped onto continuation lines


# ------------------------------------------------------------------------------ registry


def test_register_owner_never_moves_an_alias_it_did_not_register(tiny_model):
    from psyattrs.serving.registry import OWNER_TAG, register, resolve_alias

    uri = tiny_model.tracking_uri
    register(tiny_model.run_id, "ux-users-model", tracking_uri=uri)  # the user's own champion
    with pytest.raises(ValueError, match="points at version 1, which make-demo did not register"):
        register(tiny_model.run_id, "ux-users-model", tracking_uri=uri, owner="make-demo")
    assert resolve_alias("ux-users-model", tracking_uri=uri).version == 1
    client = mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)
    assert len(client.search_model_versions("name='ux-users-model'")) == 1  # nothing registered

    first = register(tiny_model.run_id, "ux-demo-model", tracking_uri=uri, owner="make-demo")
    second = register(tiny_model.run_id, "ux-demo-model", tracking_uri=uri, owner="make-demo")
    assert (first.version, second.version) == (1, 2)
    assert resolve_alias("ux-demo-model", tracking_uri=uri).version == 2
    assert client.get_model_version("ux-demo-model", "2").tags[OWNER_TAG] == "make-demo"


def test_make_demo_uses_a_name_of_its_own():
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert "DEMO_MODEL := psyattrs-make-demo" in makefile and "--owner make-demo" in makefile
    assert "models:/psyattrs-demo@" not in makefile


# ------------------------------------------------------------------------------ honest output


def test_evaluate_data_says_when_conversations_were_in_the_training_split(tiny_model, tmp_path, capsys):
    from psyattrs.synth import synthesize, write_annotated
    from psyattrs.experiments.runner import evaluate

    config = tiny_model.result.config
    syn = config.data.synthetic
    same = write_annotated(synthesize(syn.dialogues, seed=config.synthetic_seed, rare_boost=syn.rare_boost).utterances,
                           tmp_path / "same.csv")
    other = write_annotated(synthesize(4, seed=991).utterances, tmp_path / "other.csv")
    seen = evaluate(tiny_model.run_id, same, tracking_uri=tiny_model.tracking_uri)
    n_train = tiny_model.result.metrics["n_train_sentences"]
    assert seen["n_eval_conversations"] == syn.dialogues and n_train > 0
    assert 1 <= seen["n_eval_conversations_in_training"] < syn.dialogues
    assert seen["n_eval_conversations_in_validation"] >= 1  # the run tunes thresholds on a validation split
    fresh = evaluate(tiny_model.run_id, other, tracking_uri=tiny_model.tracking_uri)
    assert fresh["n_eval_conversations_in_training"] == 0 == fresh["n_eval_conversations_in_validation"]

    assert main(["evaluate", "--run", tiny_model.run_id, "--data", str(same), "--tracking-uri", tiny_model.tracking_uri]) == 0
    err = capsys.readouterr().err
    assert f"{int(seen['n_eval_conversations_in_training'])} of the {syn.dialogues} conversations" in err
    assert "were in the run's training split" in err and "not a test" in err
    assert main(["evaluate", "--run", tiny_model.run_id, "--data", str(other), "--tracking-uri", tiny_model.tracking_uri]) == 0
    assert "warning" not in capsys.readouterr().err


def test_guess_language_by_script():
    from psyattrs.features.language import guess_language

    assert guess_language(["오늘 너무 피곤하다 ㅠㅠ", "주말에 뭐 해요?"]) == "ko"
    assert guess_language(["今天 好 冷 啊", "吃饭 了 么"]) == "zh"
    assert guess_language(["what a nice day", "see you"]) == "en"
    assert guess_language(["今日はいい天気ですね"]) == "ja"
    assert guess_language(["ok ㅋㅋㅋ 좋아요 진짜로"]) == "ko"  # a little Latin in Korean chat is Korean
    assert guess_language(["!!", "123"]) is None  # too few letters to tell


def test_predicting_another_language_warns_once_naming_both(tiny_model):
    from psyattrs.errors import PsyattrsWarning
    from psyattrs.serving.predict import Predictor

    predictor = Predictor(tiny_model.model)
    with pytest.warns(PsyattrsWarning) as caught:
        predictor.predict(["今天 好 冷 啊", "吃饭 了 么"])
        predictor.predict(["周末 去 哪里 玩"])
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "trained on Korean (ko)" in message and "looks Chinese (zh)" in message
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", PsyattrsWarning)
        Predictor(tiny_model.model).predict(["안녕하세요 반가워요~", "오늘 너무 피곤했어요 ㅠㅠ"])


def test_cli_prints_the_language_warning_as_one_line(tiny_model, capsys):
    code = main(["predict", "--model", str(tiny_model.folder), "--text", "今天 好 冷 啊", "--text", "吃饭 了 么"])
    err = capsys.readouterr().err
    assert code == 0
    assert err.count("psyattrs: warning: the model was trained on Korean (ko) text") == 1
    assert "PsyattrsWarning" not in err and "warnings.warn" not in err


def test_annotate_off_a_terminal_prints_one_line_per_chunk_and_no_bar(tiny_model, tmp_path, capsys):
    table = pd.DataFrame({"doc_id": [f"c{i // 3}" for i in range(30)],
                          "text": [f"안녕하세요 {i}번째 문장이에요" for i in range(30)]})
    source = tmp_path / "table.csv"
    table.to_csv(source, index=False)
    code = main(["annotate", str(source), "--model", str(tiny_model.folder), "--out", str(tmp_path / "out.parquet"),
                 "--chunk-size", "9"])
    err = capsys.readouterr().err
    assert code == 0
    lines = [line for line in err.splitlines() if line.startswith("annotate: chunk")]
    assert len(lines) >= 3 and lines[0].startswith("annotate: chunk 1 done")
    assert "\r" not in err and "it/s" not in err
