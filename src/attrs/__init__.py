"""psyattrs: utterance-level psychological attributes (OPELA heads) for open-domain dialogue.

The code lives in `src/attrs/` and imports as `psyattrs`. Heavy backends (LightGBM, MLflow,
torch) are imported where used, not here.
"""

from psyattrs.schema import OPELA, Schema, load_schema

__version__ = "0.1.0"
__all__ = ["OPELA", "Schema", "load_schema", "__version__"]
