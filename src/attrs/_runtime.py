"""Process-wide defaults that must be in place before LightGBM, scikit-learn or OpenMP load.

Imported first by `psyattrs/__init__.py`, so every entry point (the CLI, `import psyattrs` in a
script or notebook, a served MLflow model, which unpickles `psyattrs.experiments.pyfunc`, or
`psyattrs.serving.pyfunc` for models logged before it moved) gets them.
A value the user set in the environment is never changed.

- `OMP_WAIT_POLICY=PASSIVE`: OpenMP worker threads sleep instead of spinning while they wait. On a
  machine whose cores are shared (two cores, other processes) spinning makes LightGBM several times
  slower (measured: `psyattrs train demo` 70.7 s spinning, 12.7 s passive).
- `MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR=false`: no "Downloading artifacts" bars from MLflow each
  time a model is logged or loaded (set it to `true` to have them back).

Progress bars (`progress_bar`) are shown only on a terminal: in a log file or CI the caller prints
one line per step instead, and in a notebook no widget is needed (no `TqdmWarning`).

OpenMP reads its settings once, when its library loads; if a library holding it (LightGBM,
scikit-learn) was imported before psyattrs, the setting comes too late for that process.
`openmp_loaded_early()` tells, so that LightGBM training can say so (`psyattrs.models.gbm`).
"""

from __future__ import annotations

import os
import sys
from typing import Any

THREAD_DEFAULTS: dict[str, str] = {"OMP_WAIT_POLICY": "PASSIVE", "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}


def _openmp_mapped() -> bool:
    """Whether an OpenMP runtime (libgomp, libomp, libiomp) is already loaded (Linux; else False)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            maps = fh.read()
    except OSError:
        return False
    return any(name in maps for name in ("libgomp", "libomp", "libiomp"))


def apply_thread_defaults() -> dict[str, str]:
    """Sets each of `THREAD_DEFAULTS` the environment does not already hold; returns those set."""
    changed = {}
    for key, value in THREAD_DEFAULTS.items():
        if not os.environ.get(key):
            os.environ[key] = value
            changed[key] = value
    return changed


_SET_BY_US = apply_thread_defaults()
_LOADED_EARLY = "OMP_WAIT_POLICY" in _SET_BY_US and _openmp_mapped()


def openmp_loaded_early() -> bool:
    """True when psyattrs set OMP_WAIT_POLICY but an OpenMP runtime had already loaded (with the
    spinning default) before `import psyattrs`."""
    return _LOADED_EARLY


def on_terminal(stream: Any = None) -> bool:
    """Whether `stream` (default: standard error) is an interactive terminal."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def progress_bar(iterable: Any = None, *, enabled: bool = True, **kwargs: Any):
    """A tqdm bar on standard error when `enabled` and standard error is a terminal, else a
    disabled one (same interface, prints nothing). The plain text bar is used everywhere, so a
    notebook needs no ipywidgets."""
    from tqdm.std import tqdm

    kwargs.setdefault("file", sys.stderr)
    return tqdm(iterable, disable=not (enabled and on_terminal(kwargs["file"])), **kwargs)
