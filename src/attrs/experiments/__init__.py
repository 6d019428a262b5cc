"""experiments stage: config-driven training, scoring, tracking and the run report.

`load_config(path, overrides)` reads an experiment YAML (`config`), `build_dataset(config)` turns
it into tables and splits (`dataset`), `train(config)` runs it: build -> fit -> score -> log ->
report (`runner`; the same function as `psyattrs.train`), `evaluate(run_id)` re-scores a run;
`metrics` holds every metric, `tracking` everything MLflow-specific, `report` the run's HTML page.
"""

from psyattrs.experiments.config import ExperimentConfig, expand_sweep, load_config
from psyattrs.experiments.dataset import Dataset, build_dataset
from psyattrs.experiments.runner import TrainResult, evaluate, train, train_all

__all__ = ["Dataset", "ExperimentConfig", "TrainResult", "build_dataset", "evaluate", "expand_sweep", "load_config",
           "train", "train_all"]
