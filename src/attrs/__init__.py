"""psyattrs: utterance-level psychological attributes (OPELA heads) for open-domain dialogue.

The code lives in `src/attrs/` and imports as `psyattrs`. Heavy backends (LightGBM, MLflow,
torch) are imported where used, not here. Importing the package sets the threading defaults of
`psyattrs._runtime` (OMP_WAIT_POLICY=PASSIVE unless set) before anything loads OpenMP.
"""

from psyattrs import _runtime  # noqa: F401  (first: before any import that may load OpenMP)

from typing import Any

from psyattrs.schema import OPELA, Schema, load_schema

__version__ = "0.1.0"
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
