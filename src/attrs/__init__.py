"""psyattrs: utterance-level psychological attributes (OPELA heads) for open-domain dialogue.

The code lives in `src/attrs/` and imports as `psyattrs`. Heavy backends (LightGBM, MLflow,
torch) are imported where used, not here.
"""

from typing import Any

from psyattrs._version import __version__
from psyattrs.schema import OPELA, Schema, load_schema

__all__ = ["OPELA", "Predictor", "Schema", "load_schema", "predict", "__version__"]

_LAZY = {"predict": "psyattrs.serving.predict", "Predictor": "psyattrs.serving.predict"}


def __getattr__(name: str) -> Any:
    """`predict` and `Predictor` are imported on first use (they pull in MLflow and the models)."""
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'psyattrs' has no attribute {name!r}")
