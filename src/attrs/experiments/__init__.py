"""experiments stage: config-driven training, scoring and MLflow tracking.

`load_config(path, overrides)` reads an experiment YAML (`config`), `train(config)` runs it
(`runner`), `evaluate(run_id)` re-scores a run; `metrics` holds every metric, `tracking`
everything MLflow-specific.
"""

from psyattrs.experiments.config import ExperimentConfig, expand_sweep, load_config
from psyattrs.experiments.runner import TrainResult, evaluate, train, train_all

__all__ = ["ExperimentConfig", "TrainResult", "evaluate", "expand_sweep", "load_config", "train", "train_all"]
