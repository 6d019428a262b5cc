"""models stage: every backend implements `MultiHeadModel` (fit, predict_proba, predict, save, load).

Backends: `majority` (`psyattrs.models.majority`), `tfidf` (`psyattrs.models.tfidf`), `lightgbm`
(`psyattrs.models.gbm`); build one with `build_model(kind, schema, **settings)`, load a saved one
with `load_model(path)`. Backends are imported on demand, so importing this package does not load
LightGBM, kiwipiepy or jieba.
"""

from psyattrs.models.base import KINDS, MultiHeadModel, build_model, load_model

__all__ = ["KINDS", "MultiHeadModel", "build_model", "load_model"]
