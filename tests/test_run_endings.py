"""How runs end: stop signals end a run KILLED with a note, a run left RUNNING by kill -9 is
recognisable, and `evaluate` refuses data files that changed since training.

The signal tests start a real `psyattrs train` process on the shipped majority config with a
synthetic corpus large enough to take several seconds to build, wait until its run exists in a
temporary store, and signal it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from psyattrs.cli import main

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def _client(uri: str):
    import mlflow

    return mlflow.MlflowClient(tracking_uri=uri)


def _start_training(tmp_path: Path) -> tuple[subprocess.Popen, str]:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    _client(uri).search_experiments()  # create the store here, so two processes never migrate it at once
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    env.pop("MLFLOW_TRACKING_URI", None)
    # under `nohup` SIGHUP is ignored, and a child inherits that: psyattrs then leaves it ignored
    # (as it should), so the child gets SIGHUP's default action back to be stoppable by it
    hangup = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "psyattrs", "train", str(EXPERIMENTS / "majority.yaml"), "--quiet",
             "--set", "data.synthetic.dialogues=4000", "--set", f"tracking.uri={uri}",
             "--set", "tracking.experiment=signals"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
    finally:
        signal.signal(signal.SIGHUP, hangup)
    return proc, uri


def _wait_for_running_run(proc: subprocess.Popen, uri: str, timeout: float = 120.0, *, param: str | None = None) -> str:
    """The id of the run `proc` started, once it is RUNNING with its pid (and `param`, when given, logged)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"train ended before its run was seen: {proc.communicate()}")
        experiment = _client(uri).get_experiment_by_name("signals")
        if experiment is not None:
            runs = _client(uri).search_runs([experiment.experiment_id])
            if (runs and runs[0].info.status == "RUNNING" and "psyattrs.pid" in runs[0].data.tags
                    and (param is None or param in runs[0].data.params)):
                return runs[0].info.run_id
        time.sleep(0.2)
    proc.kill()
    raise AssertionError("no run appeared")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stop_signal_ends_the_run_killed_with_a_note(tmp_path, sig):
    proc, uri = _start_training(tmp_path)
    # the run logs features.language just before its first step begins: waiting for it (not for a
    # fixed time after the run appears) keeps a loaded machine from signalling before the step
    run_id = _wait_for_running_run(proc, uri, param="features.language")
    time.sleep(0.5)  # inside the step: building 4000 synthetic dialogues takes seconds
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig, (out, err)
    assert "Traceback" not in err and f"interrupted by {sig.name}" in err
    run = _client(uri).get_run(run_id)
    assert run.info.status == "KILLED"
    note = run.data.tags["psyattrs.interrupted"]
    assert f"interrupted by signal {sig.name} during step 'load and split the data'" in note
    assert run.data.tags["mlflow.note.content"] == note


def test_a_run_left_running_by_kill_9_is_recognisable(tmp_path, capsys):
    proc, uri = _start_training(tmp_path)
    run_id = _wait_for_running_run(proc, uri)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert _client(uri).get_run(run_id).info.status == "RUNNING"  # nothing could close it

    assert main(["runs", "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    assert run_id in out and "never finished" in out and f"pid {proc.pid}" in out
    assert main(["evaluate", "--run", run_id, "--tracking-uri", uri]) == 2
    err = capsys.readouterr().err
    assert "never finished" in err and "only a FINISHED run can be evaluated" in err
    assert main(["register", run_id, "--name", "never", "--tracking-uri", uri]) == 2
    assert "never finished" in capsys.readouterr().err

    assert main(["runs", "--tracking-uri", uri, "--close-abandoned"]) == 0
    assert f"closed {run_id} as KILLED" in capsys.readouterr().out
    run = _client(uri).get_run(run_id)
    assert run.info.status == "KILLED" and "never finished" in run.data.tags["psyattrs.interrupted"]


def test_a_live_run_is_listed_as_running(tmp_path, capsys):
    proc, uri = _start_training(tmp_path)
    run_id = _wait_for_running_run(proc, uri)
    try:
        assert main(["runs", "--tracking-uri", uri, "--unfinished"]) == 0
        out = capsys.readouterr().out
        assert run_id in out and f"running (pid {proc.pid}" in out and "never finished" not in out
    finally:
        proc.kill()
        proc.wait(timeout=60)


# ----------------------------------------------------------------------------------------------
# evaluate: the data must be what the run read


def _train_on(path: Path, uri: str) -> str:
    from psyattrs.experiments.config import load_config
    from psyattrs.experiments.runner import train

    config = load_config(EXPERIMENTS / "majority.yaml", [f"data.path={path}", f"tracking.uri={uri}",
                                                          "tracking.experiment=digests"])
    return train(config, quiet=True).run_id


def test_evaluate_refuses_a_data_file_that_changed_since_training(tmp_path, capsys):
    from psyattrs.synth import synthesize, write_annotated

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    path = write_annotated(synthesize(12, seed=5).utterances, tmp_path / "corpus.csv")
    run_id = _train_on(path, uri)
    assert main(["evaluate", "--run", run_id, "--tracking-uri", uri]) == 0
    capsys.readouterr()

    write_annotated(synthesize(12, seed=6).utterances, path)  # another corpus at the logged path
    assert main(["evaluate", "--run", run_id, "--tracking-uri", uri]) == 2
    err = capsys.readouterr().err
    assert f"{path.resolve()} has changed since the run read it" in err and "--allow-changed-data" in err
    assert len(err.strip().splitlines()) == 1

    assert main(["evaluate", "--run", run_id, "--tracking-uri", uri, "--allow-changed-data"]) == 0
    captured = capsys.readouterr()
    assert "WARNING" in captured.err and "NOT those of the data the run was tested on" in captured.err
    assert "macro" in captured.out.lower() or "f1" in captured.out.lower()

    path.unlink()
    assert main(["evaluate", "--run", run_id, "--tracking-uri", uri]) == 2
    assert "no longer exists" in capsys.readouterr().err


def test_the_encoding_and_digest_of_the_data_are_logged_with_the_run(tmp_path):
    import mlflow

    from psyattrs.synth import synthesize, write_annotated
    from psyattrs.experiments.provenance import file_sha256
    from psyattrs.experiments.store import tracking_store

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    path = write_annotated(synthesize(10, seed=2).utterances, tmp_path / "ko.csv")
    path.write_bytes(path.read_text(encoding="utf-8").encode("cp949"))  # an older Korean file
    run = _client(uri).get_run(_train_on(path, uri))
    assert run.data.tags["psyattrs.encoding"] == "cp949"
    with tracking_store(uri):
        logged = mlflow.artifacts.load_dict(f"{run.info.artifact_uri}/data_files.json")["files"]
    assert logged == [{"path": str(path.resolve()), "size": path.stat().st_size, "sha256": file_sha256(path),
                       "encoding": "cp949"}]


# ----------------------------------------------------------------------------------------------
# a stop signal once the model is logged (issue 26.9): the run and its report finish, the run id
# is printed, the command stops with 128 + N; a second signal stops at once, the run id printed


def test_a_signal_after_the_model_is_logged_is_deferred_once():
    from psyattrs.errors import Interrupted
    from psyattrs.experiments.stopping import finish_once_logged, model_logged

    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        pytest.skip("SIGTERM has a handler here")

    def deliver() -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)  # the handler runs in the main thread at the next bytecode

    with finish_once_logged() as late:
        with pytest.raises(Interrupted):
            deliver()  # before the model is logged: at once, as before
        model_logged("run-a")
        deliver()  # deferred: the step in hand goes on
        assert late.signum == signal.SIGTERM and late.run_id == "run-a"
    with pytest.raises(Interrupted) as info:
        with finish_once_logged():
            model_logged("run-b")
            deliver()
            deliver()  # the second stops at once
    assert info.value.run_id == "run-b"
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


_SIGNAL_IN_REPORT = """
import os, signal, sys
import psyattrs.experiments.runner as runner
from psyattrs.cli import main

original = runner.log_run_report

def log_run_report(*args, **kwargs):  # a stop signal arrives during the report phase
    os.kill(os.getpid(), signal.{sig})
    return original(*args, **kwargs)

runner.log_run_report = log_run_report
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_during_the_report_finishes_the_run_and_prints_its_id(tmp_path, sig):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    env.pop("MLFLOW_TRACKING_URI", None)
    hangup = signal.signal(signal.SIGHUP, signal.SIG_DFL)  # see _start_training
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _SIGNAL_IN_REPORT.replace("{sig}", sig.name), "train", str(EXPERIMENTS / "majority.yaml"),
             "--quiet", "--set", "data.synthetic.dialogues=8", "--set", f"tracking.uri={uri}",
             "--set", "tracking.experiment=late"],
            capture_output=True, text=True, env=env, timeout=600,
        )  # fmt: skip
    finally:
        signal.signal(signal.SIGHUP, hangup)
    # before: exit 143/129 with no output and no report, though the model was logged
    assert proc.returncode == 128 + sig, (proc.stdout, proc.stderr)
    run_id = proc.stdout.strip().splitlines()[-1]
    run = _client(uri).get_run(run_id)
    assert run.info.status == "FINISHED"
    artifacts = [a.path for a in _client(uri).list_artifacts(run_id, "report")]
    assert "report/report.html" in artifacts
    assert f"{sig.name} received after run {run_id} logged its model" in proc.stderr
    assert f"interrupted by {sig.name}; run {run_id} finished, its model and report logged" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_report_on_a_run_that_never_finished_says_so_in_the_words_of_runs(tmp_path, capsys):
    """Issue 26.11: `report` on a run left RUNNING by kill -9 showed RUNNING."""
    import socket

    import mlflow

    from psyattrs.experiments.config import load_config
    from psyattrs.experiments.stopping import run_end

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(gone.stdout)  # a process that has ended, as one killed with kill -9 has
    client = _client(uri)
    experiment = client.create_experiment("never", artifact_location=(tmp_path / "artifacts").as_uri())
    tags = {"psyattrs.pid": str(pid), "psyattrs.pid_start": "1", "psyattrs.host": socket.gethostname(),
            "psyattrs.role": "single"}
    run = client.create_run(experiment, tags=tags, run_name="never")
    client.log_text(run.info.run_id, load_config(EXPERIMENTS / "majority.yaml").to_yaml(), "config.yaml")
    end = run_end("RUNNING", tags)
    assert end.startswith("never finished")

    assert main(["report", "--run", run.info.run_id, "--tracking-uri", uri, "--out", str(tmp_path / "r.html")]) == 0
    said = capsys.readouterr().out
    assert f"run {run.info.run_id}: {end}" in said
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert f"this run did not finish: {end}" in page
    assert main(["runs", "--tracking-uri", uri]) == 0
    assert "never finished" in capsys.readouterr().out
    assert client.get_run(run.info.run_id).info.status == "RUNNING"
