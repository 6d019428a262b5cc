"""Executes notebooks in place (their committed outputs): `.venv/bin/python notebooks/execute.py [NAME.ipynb ...]`.

Each runs in a temporary folder, as the tests run them; without arguments every notebook here runs.
"""

import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent


def main(names: list[str]) -> int:
    paths = [HERE / n for n in names] if names else sorted(HERE.glob("*.ipynb"))
    for path in paths:
        start = time.perf_counter()
        nb = nbformat.read(path, as_version=4)
        with tempfile.TemporaryDirectory() as tmp:
            NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": tmp}}).execute()
        nbformat.write(nb, path)
        print(f"{path.name}: {time.perf_counter() - start:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
