"""psyattrs: utterance-level psychological attributes (OPELA heads) for open-domain dialogue.

The code lives in `src/attrs/` and imports as `psyattrs`. Heavy backends (LightGBM, MLflow,
torch) are imported where used, not here. Importing the package sets the threading defaults of
`psyattrs._runtime` (OMP_WAIT_POLICY=PASSIVE unless set) before anything loads OpenMP.
"""

from psyattrs import _runtime  # noqa: F401  (first: before any import that may load OpenMP)

from typing import Any

from psyattrs._version import __version__
from psyattrs.schema import OPELA, Schema, load_schema

__all__ = ["OPELA", "Predictor", "Schema", "get_label_quality", "get_next_batch", "load_corpus", "load_schema",
           "predict", "synthesize", "train", "__version__"]

_LAZY = {"predict": "psyattrs.serving.predict", "Predictor": "psyattrs.serving.predict",
         "train": "psyattrs.experiments.runner", "load_corpus": "psyattrs.data", "synthesize": "psyattrs.synth",
         "get_label_quality": "psyattrs.serving.curation", "get_next_batch": "psyattrs.serving.curation"}


def __getattr__(name: str) -> Any:
    """`predict`, `Predictor`, `train`, `load_corpus`, `synthesize`, `get_label_quality` and
    `get_next_batch` are imported on first use (they pull in MLflow, the models, pandas); `train`
    trains an experiment and logs its run report (`psyattrs.experiments.runner.train`, also
    `psyattrs.experiments.train`)."""
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'psyattrs' has no attribute {name!r}")
