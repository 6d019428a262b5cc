"""The package imports as psyattrs and leaves the real `attrs` library alone."""

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_psyattrs_is_the_src_attrs_folder():
    import psyattrs

    assert Path(psyattrs.__file__).resolve() == REPO / "src" / "attrs" / "__init__.py"


def test_import_attrs_gives_the_real_attrs_library():
    attrs = importlib.import_module("attrs")
    # the real library has define/field/frozen and lives in site-packages, not in src/
    assert callable(attrs.define) and callable(attrs.field)
    assert "site-packages" in Path(attrs.__file__).parts
    assert Path(attrs.__file__).resolve().parent != REPO / "src" / "attrs"


def test_import_attrs_from_repo_root_in_a_fresh_interpreter():
    # a user running python from the repository root still gets the real attrs
    code = "import attrs, psyattrs; print(attrs.__file__); print(hasattr(attrs, 'define'))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    path, has_define = out.stdout.split()
    assert "site-packages" in path and has_define == "True"


def test_cli_entry_point_prints_help():
    out = subprocess.run([sys.executable, "-m", "psyattrs", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    assert "data" in out.stdout and "labels" in out.stdout


# `psyattrs predict` and `psyattrs runs` end their process without tearing the interpreter down
# (psyattrs.cli.console, issue 25): what a normal exit does before the teardown must still happen.
_QUICK_EXIT = """
import atexit, sys, threading, time
from psyattrs import cli
def late():
    time.sleep(0.3)
    print("thread finished", flush=True)
threading.Thread(target=late).start()
atexit.register(lambda: print("atexit ran", flush=True))
sys.stdout.write("buffered, no newline")
cli._exit_now(int(sys.argv[1]))
print("never printed")
"""


@pytest.mark.parametrize("code", [0, 3])
def test_the_quick_exit_joins_threads_runs_atexit_and_flushes(code):
    done = subprocess.run([sys.executable, "-c", _QUICK_EXIT, str(code)], capture_output=True, text=True, timeout=60)
    assert done.returncode == code
    assert done.stdout == "buffered, no newlinethread finished\natexit ran\n"


def test_only_commands_that_write_no_store_exit_quickly():
    from psyattrs import cli

    parser = cli.build_parser()
    quick = {" ".join(argv) for argv in (["predict", "--model", "m", "--text", "x"], ["runs"], ["train", "c.yaml"],
                                          ["data", "validate", "f.csv"], ["register", "r", "--name", "n"])
             if getattr(parser.parse_args(argv), "quick_exit", False)}
    assert quick == {"predict --model m --text x", "runs"}


def test_the_console_script_keeps_exit_codes_and_output(tmp_path):
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    empty = subprocess.run([sys.executable, "-m", "psyattrs", "runs", "--tracking-uri", store],
                           capture_output=True, text=True, timeout=120)
    assert empty.returncode == 0 and empty.stdout.strip(), empty.stderr
    bad = subprocess.run([sys.executable, "-m", "psyattrs", "predict", "--model", str(tmp_path / "absent"),
                          "--text", "안녕하세요"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("psyattrs: error:"), bad.stderr


# A script run next to a clone named psyattrs/ (issue 25). The script's folder is first on sys.path;
# an editable install finds the package through an import hook that Python consults after sys.path,
# so without the repository's root __init__.py the clone was imported as an empty namespace package.
_EDITABLE = """
import importlib.abc, importlib.util, sys, warnings
SRC = {src!r}
class Editable(importlib.abc.MetaPathFinder):  # what a setuptools editable install appends
    def find_spec(self, name, path=None, target=None):
        if name == "psyattrs":
            return importlib.util.spec_from_file_location(name, SRC + "/__init__.py", submodule_search_locations=[SRC])
        return None
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]  # this venv's own
sys.meta_path.append(Editable())
sys.path[:] = [p for p in sys.path if "site-packages" in p or "python3" in p or p == ""]
warnings.simplefilter("always")
import psyattrs
print(psyattrs.__file__)
print(psyattrs.__version__, callable(psyattrs.load_schema))
"""


def _clone(tmp_path: Path, code: "Path | None" = None) -> Path:
    """A folder named psyattrs/ laid out like a clone: the repository's root files, src/attrs."""
    clone = tmp_path / "psyattrs"
    (clone / "src").mkdir(parents=True)
    if (REPO / "__init__.py").exists():
        (clone / "__init__.py").write_bytes((REPO / "__init__.py").read_bytes())
    if code is None:
        (clone / "src" / "attrs").mkdir()
    else:
        (clone / "src" / "attrs").symlink_to(code, target_is_directory=True)
    return clone


def _run_beside(tmp_path: Path, src: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", _EDITABLE.format(src=str(src))], cwd=tmp_path, env=env,
                          capture_output=True, text=True)


def test_a_script_beside_a_clone_named_psyattrs_gets_the_installed_package(tmp_path):
    code = REPO / "src" / "attrs"
    _clone(tmp_path)
    out = _run_beside(tmp_path, code)
    assert out.returncode == 0, out.stderr
    path, line = out.stdout.splitlines()
    assert Path(path).resolve() == code / "__init__.py" and line.endswith(" True")
    assert f"the folder {tmp_path / 'psyattrs'} next to this script is named like the package" in out.stderr
    assert f"loaded from {code}" in out.stderr


def test_a_clone_whose_code_is_the_installed_one_imports_silently(tmp_path):
    clone = _clone(tmp_path, code=REPO / "src" / "attrs")
    out = _run_beside(tmp_path, clone / "src" / "attrs")
    assert out.returncode == 0, out.stderr
    assert "named like the package" not in out.stderr


def test_a_clone_named_psyattrs_and_no_installed_package_says_how_to_install(tmp_path):
    clone = _clone(tmp_path)
    # -S -E: no site-packages, no PYTHONPATH: psyattrs is not installed in this interpreter
    out = subprocess.run([sys.executable, "-S", "-E", "-c", "import psyattrs"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith(f"ImportError: `import psyattrs` found the folder {clone} (a clone")
    assert f"pip install -e {clone}" in last


# Heavy optional backends are imported where used (STYLE rule 8, issue 25): neither importing the
# package nor the command line's start (`--help` builds every subcommand's parser) loads them.
HEAVY = ("torch", "transformers", "lightgbm", "matplotlib", "mlflow", "sklearn", "scipy", "pyspark", "fastapi",
         "uvicorn", "safetensors", "kiwipiepy", "jieba", "cleanlab")
_LOADED = """
import sys, runpy
if sys.argv[1] == "--help":
    sys.argv = ["psyattrs", "--help"]
    try:
        runpy.run_module("psyattrs", run_name="__main__")
    except SystemExit:
        pass
else:
    __import__(sys.argv[1])
print("loaded:", " ".join(sorted({name.split(".")[0] for name in sys.modules})), file=sys.stderr)
"""


@pytest.mark.parametrize("what", ["psyattrs", "psyattrs.cli", "--help"])
def test_start_up_loads_no_heavy_backend(what):
    out = subprocess.run([sys.executable, "-c", _LOADED, what], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    loaded = set(out.stderr.rpartition("loaded: ")[2].split())
    assert "psyattrs" in loaded  # the import ran
    assert sorted(loaded & set(HEAVY)) == []
