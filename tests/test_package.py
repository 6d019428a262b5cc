"""The package imports as psyattrs and leaves the real `attrs` library alone."""

import importlib
import subprocess
import sys
from pathlib import Path

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
