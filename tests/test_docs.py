"""The documentation: the MkDocs site builds strictly, the README's quickstart runs as written, and
the benchmarks' page writer records what a run printed.

Which README blocks run: a fenced ```bash or ```python block whose fence line comes right after a
line `<!-- runnable -->` (an HTML comment, invisible on the rendered page). Those blocks are taken in
order and run as written (bash with `-e -o pipefail`, Python with this interpreter), each in one
temporary working directory that first gets what `make demo` leaves behind, shrunk: a small
synthetic corpus in `out/demo/` (`corpus.csv` and its resolved `resolved.csv`), the demo config
trained on it and registered as `psyattrs-make-demo@champion`, all in a local MLflow store in the
temporary directory. A block that exits non-zero fails the test with its output.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MARKER = "<!-- runnable -->"
FENCE = re.compile(r"^```(\w+)\s*$")

sys.path.insert(0, str(ROOT / "benchmarks"))
import _docs  # noqa: E402  (benchmarks/_docs.py)


def runnable_blocks(text: str) -> list[tuple[str, str, int]]:
    """The README's blocks marked runnable: (language, code, line number of the fence), in order."""
    lines = text.splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == MARKER:
            fence = FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
            if fence is None or fence.group(1) not in ("bash", "python"):
                raise AssertionError(f"README line {i + 1}: {MARKER} must come right before a ```bash or ```python fence")
            end = next(j for j in range(i + 2, len(lines)) if lines[j].strip() == "```")
            blocks.append((fence.group(1), "\n".join(lines[i + 2 : end]) + "\n", i + 2))
            i = end
        i += 1
    return blocks


def test_runnable_blocks_are_found_in_order():
    text = "\n".join(["x", MARKER, "```bash", "echo 1", "```", "```bash", "echo skipped", "```",
                      MARKER, "```python", "print(2)", "```"])
    assert runnable_blocks(text) == [("bash", "echo 1\n", 3), ("python", "print(2)\n", 10)]
    with pytest.raises(AssertionError, match="must come right before"):
        runnable_blocks(f"{MARKER}\n\n```bash\necho\n```")


def test_readme_is_a_short_guide_with_runnable_quickstart():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 450
    assert len(runnable_blocks(text)) >= 3
    assert "FORMATS §" not in text
    assert "psyattrs-demo@" not in text  # make demo registers psyattrs-make-demo


def test_no_formats_section_citations_left():
    for path in (ROOT / "src" / "attrs" / "cli" / "data_synth.py", ROOT / "src" / "attrs" / "experiments" / "defaults.yaml"):
        assert "FORMATS §" not in path.read_text(encoding="utf-8"), path


@pytest.mark.skipif(shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None and shutil.which("mkdocs") is None,
                    reason="mkdocs is not installed (it is pinned in requirements.lock; `make test` installs it)")
def test_mkdocs_build_strict(tmp_path):
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or shutil.which("mkdocs")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    out = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "site" / "formats" / "index.html").is_file()


@pytest.mark.skipif(shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None and shutil.which("mkdocs") is None,
                    reason="mkdocs is not installed (it is pinned in requirements.lock; `make test` installs it)")
def test_mkdocs_strict_fails_on_a_broken_link(tmp_path):
    site = tmp_path / "project"
    shutil.copytree(ROOT / "docs", site / "docs", ignore=shutil.ignore_patterns("_incoming"))
    shutil.copy(ROOT / "mkdocs.yml", site / "mkdocs.yml")
    page = site / "docs" / "formats.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nSee [nowhere](no-such-page.md).\n", encoding="utf-8")
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or shutil.which("mkdocs")
    out = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=site,
                         capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=300)
    assert out.returncode != 0
    assert "no-such-page.md" in out.stdout + out.stderr


def test_benchmark_page_records_command_machine_and_output(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [str(ROOT / "benchmarks" / "x_benchmark.py"), "--rounds", "2"])
    with _docs.docs_page("x", "X benchmark", write=True, intro="What X measures.", pages=tmp_path):
        print("step  seconds")
        print("one   1.25")
    assert "one   1.25" in capsys.readouterr().out  # still printed
    page = (tmp_path / "x.md").read_text(encoding="utf-8")
    assert page.startswith("# X benchmark\n")
    assert "What X measures." in page
    assert "- command: `python benchmarks/x_benchmark.py --rounds 2`" in page
    assert re.search(r"- date: \d{4}-\d\d-\d\d \d\d:\d\d UTC", page)
    assert re.search(r"- machine: .+, \d+ cores, load average", page)
    assert "```text\nstep  seconds\none   1.25\n```" in page


def test_benchmark_page_not_written_for_partial_runs_or_failures(tmp_path):
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--dialogues", type=int, default=100)
    _docs.add_docs_option(parser)
    full, partial = parser.parse_args([]), parser.parse_args(["--dialogues", "5"])
    assert _docs.wants_docs(full, partial=_docs.changed(parser, full, "dialogues"))
    assert not _docs.wants_docs(partial, partial=_docs.changed(parser, partial, "dialogues"))
    assert _docs.wants_docs(parser.parse_args(["--dialogues", "5", "--write-docs"]), partial=True)
    assert not _docs.wants_docs(parser.parse_args(["--no-write-docs"]), partial=False)
    with pytest.raises(RuntimeError):
        with _docs.docs_page("y", "Y", write=True, pages=tmp_path):
            print("half a table")
            raise RuntimeError("benchmark failed")
    assert not (tmp_path / "y.md").exists()


def test_page_option_writes_another_page_and_leaves_the_benchmarks_own(tmp_path, capsys):
    import argparse

    parser = argparse.ArgumentParser()
    _docs.add_docs_option(parser)
    args = parser.parse_args(["--page", "x-part"])
    (tmp_path / "x.md").write_text("the whole run's page\n", encoding="utf-8")
    with _docs.docs_page("x", "X benchmark", write=True, pages=tmp_path, page=args.page):
        print("one part")
    assert (tmp_path / "x.md").read_text(encoding="utf-8") == "the whole run's page\n"
    assert (tmp_path / "x-part.md").read_text(encoding="utf-8").startswith("# X benchmark (x-part)\n")
    assert parser.parse_args([]).page is None
    for bad in ("../x", "a b", ""):
        with pytest.raises(SystemExit):
            parser.parse_args(["--page", bad])
    assert "a page name is letters" in capsys.readouterr().err


def test_every_benchmark_writes_its_page():
    pages = ROOT / "docs" / "benchmarks"
    for script in sorted((ROOT / "benchmarks").glob("*_benchmark.py")):
        name = script.name.removesuffix("_benchmark.py")
        source = script.read_text(encoding="utf-8")
        compile(source, str(script), "exec")  # a SyntaxError names the script
        assert "add_docs_option(parser)" in source and f'docs_page("{name}"' in source, script.name
        assert (pages / f"{name}.md").is_file(), f"docs/benchmarks/{name}.md"


def _run(args: list[str], cwd: Path, env: dict, what: str) -> float:
    """Runs one command; fails the test with its output unless it exits 0. Returns its seconds."""
    start = time.perf_counter()
    out = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, f"{what} exited {out.returncode}\n--- stdout\n{out.stdout[-4000:]}\n--- stderr\n{out.stderr[-4000:]}"
    return time.perf_counter() - start


def test_a_failing_snippet_fails_the_run(tmp_path):
    # bash blocks run with -e -o pipefail: a failing command anywhere in a block, or in a pipeline, fails it
    for code in ("false\necho after", "false | tail -n 1\necho after", "X=$(false | tail -n 1)\necho after"):
        with pytest.raises(AssertionError, match="exited 1"):
            _run(["bash", "-e", "-o", "pipefail", "-c", code], tmp_path, dict(os.environ), "block")
    with pytest.raises(AssertionError, match="exited 1"):
        _run([sys.executable, "-c", "raise SystemExit(1)"], tmp_path, dict(os.environ), "block")


@pytest.mark.slow
def test_readme_quickstart_runs_as_written(tmp_path, monkeypatch):
    from psyattrs.cli import main as psyattrs_main
    from psyattrs.experiments.config import load_config
    from psyattrs.experiments.runner import train
    from psyattrs.serving.registry import register

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "MLFLOW_TRACKING_URI": uri,
        "PSYATTRS_CACHE": str(tmp_path / "cache"),
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
    }
    # what `make demo` leaves behind (the Makefile's steps), on a corpus and a model shrunk to seconds,
    # made in this process (the README's blocks below each start their own)
    start = time.perf_counter()
    demo = tmp_path / "out" / "demo"
    demo.mkdir(parents=True)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    assert psyattrs_main(["data", "synth", "--out", str(demo / "corpus.csv"), "--dialogues", "10", "--seed", "7",
                          "--rare-boost", "3"]) == 0
    assert psyattrs_main(["labels", "resolve", str(demo / "corpus.csv"), "--out", str(demo / "resolved.csv"),
                          "--method", "opela"]) == 0
    config = load_config(ROOT / "experiments" / "demo.yaml",
                         [f"data.path={demo / 'resolved.csv'}", "model.params.n_estimators=5", "model.params.svd_components=8",
                          "model.params.max_features=2000", f"tracking.uri={uri}"])
    result = train(config, quiet=True)
    register(result.run_id, "psyattrs-make-demo", alias="champion", tracking_uri=uri, owner="make-demo")
    seconds = [("the demo's steps, shrunk", time.perf_counter() - start)]

    blocks = runnable_blocks(README.read_text(encoding="utf-8"))
    assert blocks
    for lang, code, line in blocks:
        command = ["bash", "-e", "-o", "pipefail", "-c", code] if lang == "bash" else [sys.executable, "-c", code]
        seconds.append((f"README line {line} ({lang})", _run(command, tmp_path, env, f"README block at line {line} ({lang})")))
    print("\n".join(f"{what}: {s:.1f} s" for what, s in seconds))


def test_data_align_help_states_the_aligners_default_rounds():
    # the docs' alignment page explains --iterations; its help said "default 10" while the aligner ran 15
    from psyattrs.align.settings import AlignSettings

    out = subprocess.run([sys.executable, "-m", "psyattrs", "data", "align", "--help"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"(default {AlignSettings().iterations})" in " ".join(out.stdout.split())


def test_every_module_over_500_lines_is_named_in_the_architecture_page():
    """A module that passes 500 lines is usually two ideas: the architecture page says why each stays whole."""
    src = ROOT / "src" / "attrs"
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    long = sorted(str(path.relative_to(src)) for path in src.rglob("*.py")
                  if len(path.read_text(encoding="utf-8").splitlines()) > 500)
    missing = [name for name in long if f"`{name}`" not in page]
    assert not missing, f"modules over 500 lines not named in docs/architecture.md: {missing}"
