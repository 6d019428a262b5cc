"""The run report: one self-contained HTML page per training run, logged as a run artifact.

`build_report(run_id)` reads a run made by `psyattrs train` from the MLflow store and returns the
page: the run's identity and status, the sentence counts (the ones training printed: non-pause
sentences, `n_{split}_sentences`), the per-head metrics table of `psyattrs train` (the model beside
the majority floor and one labeler scored against the others' majority, with the same legend and
notes), a bar chart of it, the confusion matrices and reliability diagrams drawn from the run's
test predictions, learning curves for every metric logged at more than one step (losses, learning
rate and epoch in separate panels), the fold runs of a cross-validation, and the resolved config.
Plots are embedded PNGs (`data:` URIs); the page has no script and loads nothing from anywhere, so
it opens offline, from the MLflow UI (artifact `report/report.html`) or from a file.

`log_run_report(run_id)` builds it and logs it into the run (and, with `out`, also writes it to a
file). `psyattrs.experiments.train` calls it as its last step, once the run has ended, so every run
trained from the command line or the public API has its report; `psyattrs report` (re)builds it.
"""

from __future__ import annotations

import base64
import html
import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from psyattrs.experiments import figures as plots
from psyattrs.experiments import metrics as M
from psyattrs.experiments.config import ExperimentConfig
from psyattrs.experiments.dataset import run_schema
from psyattrs.experiments.provenance import load_run_config
from psyattrs.experiments.store import quiet_mlflow, tracking_store
from psyattrs.experiments.stopping import run_end
from psyattrs.schema import Schema

REPORT_ARTIFACT = "report/report.html"
_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 72rem;
       padding: 0 1rem; color: #1b1f24; line-height: 1.45; }
h1 { font-size: 1.5rem; margin-bottom: 0.2rem; } h2 { font-size: 1.15rem; margin-top: 2rem;
       border-bottom: 1px solid #d0d7de; padding-bottom: 0.2rem; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0; }
th, td { border: 1px solid #d0d7de; padding: 0.2rem 0.5rem; text-align: right; }
th:first-child, td:first-child { text-align: left; } thead th { background: #f6f8fa; }
img { max-width: 100%; height: auto; display: block; margin: 0.5rem 0; }
pre { background: #f6f8fa; padding: 0.8rem; overflow-x: auto; font-size: 0.8rem; }
.meta td, .meta th { text-align: left; } .wide { overflow-x: auto; } .note { color: #57606a; font-size: 0.85rem; }
"""


@dataclass
class RunContent:
    """What a report shows, read from the store (see `read_run`)."""

    run_id: str
    run_name: str
    status: str
    role: str
    experiment: str
    start_time: str
    tags: dict[str, str]
    metrics: dict[str, float]
    config_yaml: str
    config: ExperimentConfig
    schema: Schema
    predictions: pd.DataFrame | None
    histories: dict[str, pd.DataFrame] = field(default_factory=dict)
    folds: list[dict[str, Any]] = field(default_factory=list)


def _histories(client, run_id: str, keys: Iterable[str]) -> dict[str, pd.DataFrame]:
    out = {}
    for key in sorted(keys):
        history = client.get_metric_history(run_id, key)
        if len({m.step for m in history}) > 1:
            out[key] = pd.DataFrame({"step": [m.step for m in history], "value": [m.value for m in history]}
                                    ).sort_values("step").reset_index(drop=True)
    return out


def read_run(run_id: str, *, tracking_uri: str | None = None) -> RunContent:
    """Everything the report needs from one run.

    Raises:
        ValueError: no such run, or a run not made by `psyattrs train` (no `config.yaml`).
    """
    import mlflow
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    config, extras = load_run_config(run_id, tracking_uri=tracking_uri)
    with tracking_store(extras["tracking_uri"]) as uri, quiet_mlflow():
        client = MlflowClient(uri)
        run = client.get_run(run_id)
        experiment = client.get_experiment(run.info.experiment_id)
        config_yaml = mlflow.artifacts.load_text(f"{run.info.artifact_uri}/config.yaml")
        predictions = None
        with tempfile.TemporaryDirectory() as tmp:
            try:
                local = mlflow.artifacts.download_artifacts(
                    artifact_uri=f"{run.info.artifact_uri}/predictions/test.parquet", dst_path=tmp)
                predictions = pd.read_parquet(local)
            except (MlflowException, OSError):
                predictions = None
        histories = _histories(client, run_id, run.data.metrics.keys())
        folds = []
        if extras["role"] == "cv":
            children = client.search_runs([run.info.experiment_id],
                                          filter_string=f"tags.mlflow.parentRunId = '{run_id}'")
            for child in sorted(children, key=lambda r: r.info.run_name or ""):
                folds.append({"run": child.info.run_name, "run_id": child.info.run_id, "status": child.info.status,
                              "end": run_end(child.info.status, child.data.tags),
                              "test_macro_f1_mean": child.data.metrics.get("test_macro_f1_mean", math.nan),
                              "n_test_sentences": child.data.metrics.get("n_test_sentences", math.nan)})
    start = pd.Timestamp(run.info.start_time, unit="ms", tz="UTC").strftime("%Y-%m-%d %H:%M:%S UTC")
    return RunContent(
        run_id=run_id, run_name=run.info.run_name or "", status=run.info.status, role=extras["role"],
        experiment=experiment.name if experiment else run.info.experiment_id, start_time=start,
        tags=dict(run.data.tags), metrics=dict(run.data.metrics), config_yaml=config_yaml, config=config,
        schema=run_schema(run_id, config, extras), predictions=predictions, histories=histories, folds=folds,
    )


# ------------------------------------------------------------------------------------ rendering


def _img(fig, alt: str) -> str:
    data = base64.b64encode(plots.figure_png(fig)).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _cell(value: Any) -> str:
    if isinstance(value, (float, np.floating)):
        return "–" if math.isnan(value) else f"{value:.3f}"
    return html.escape(str(value))


def _table(frame: pd.DataFrame, *, cls: str = "") -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = "".join("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>"
                   for row in frame.itertuples(index=False))
    attr = f' class="{cls}"' if cls else ""
    return f'<div class="wide"><table{attr}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _prediction_arrays(frame: pd.DataFrame, schema: Schema) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    predicted = {h.name: frame[f"pred_{h.name}"].to_numpy(dtype=np.int64) for h in schema}
    proba = {h.name: frame[[f"proba_{h.name}_{k}" for k in h.values]].to_numpy(dtype=float) for h in schema}
    return predicted, proba


def render_report(content: RunContent) -> str:
    """The HTML page of a run (see the module docstring)."""
    c, schema = content, content.schema
    cfg = c.config
    parts = [f"<h1>psyattrs run report: {html.escape(c.run_name)}</h1>",
             f'<p class="note">run <code>{html.escape(c.run_id)}</code> in experiment '
             f"{html.escape(c.experiment)}</p>"]
    end = run_end(c.status, c.tags)  # the words of `psyattrs runs`
    if end != "finished":
        parts.append(f'<p class="note"><strong>this run did not finish: {html.escape(end)}</strong></p>')
    meta = pd.DataFrame([
        ("status", c.status), ("end", end), ("role", c.role), ("started", c.start_time),
        ("model", cfg.model.kind), ("targets.lambda", f"{cfg.targets.lam:g}"),
        ("context.previous", cfg.context.previous), ("split", f"by {cfg.split.by}, "
         + (f"{cfg.split.folds}-fold cross-validation" if cfg.split.folds else "test split")),
        ("git commit", c.tags.get("mlflow.source.git.commit", "–")), ("psyattrs", c.tags.get("psyattrs.version", "–")),
        ("sentences train / valid / test (pauses not counted)", " / ".join(
            str(int(c.metrics[k])) if k in c.metrics else "–"
            for k in ("n_train_sentences", "n_valid_sentences", "n_test_sentences"))),
        ("fit seconds", _cell(c.metrics.get("fit_seconds", math.nan))),
    ], columns=["", "value"])
    parts.append(_table(meta, cls="meta"))

    summary = M.summary_table(c.metrics, schema)
    parts.append("<h2>Per-head metrics (test split)</h2>")
    if summary.drop(columns=["head", "note"]).isna().all().all():
        parts.append('<p class="note">this run logged no test metrics.</p>')
    else:
        if not summary["note"].str.len().any():
            summary = summary.drop(columns="note")  # nothing to note, as in the printed table
        parts.append('<p class="note">the table `psyattrs train` prints: soft cross-entropy against the '
                     "labelers' distribution; average precision of the rarer class on binary heads. – = does "
                     "not apply or not computable.</p>")
        parts.append(_table(summary))
        legend = [text for key, text in M.TABLE_LEGEND.items() if any(str(h).startswith(key) for h in summary.columns)]
        parts.append("".join(f'<p class="note">{html.escape(text)}</p>' for text in legend))
        parts.append(_img(plots.head_metrics_figure(summary),
                          "macro-F1 per head with the floor and one labeler against the others' majority"))
    if c.predictions is not None and len(c.predictions):
        predicted, proba = _prediction_arrays(c.predictions, schema)
        n = int(M.evaluable(c.predictions).sum())
        label = "pooled out-of-fold predictions" if c.role == "cv" else "test predictions"
        parts.append(f"<h2>Confusion matrices</h2><p class=\"note\">{label}, {n} non-pause sentences; rows: "
                     "final label, columns: predicted, shade: share of the row.</p>")
        parts.append(_img(plots.confusion_figure(c.predictions, schema, predicted), "confusion matrices"))
        parts.append("<h2>Calibration</h2><p class=\"note\">top-label confidence against accuracy "
                     f"({M.ECE_BINS} bins) and the expected calibration error.</p>")
        parts.append(_img(plots.calibration_figure(c.predictions, schema, proba), "reliability diagrams"))
    else:
        parts.append('<h2>Confusion matrices and calibration</h2><p class="note">the run has no '
                     "predictions artifact.</p>")
    parts.append("<h2>Learning curves</h2>")
    if c.histories:
        parts.append(_img(plots.learning_curves_figure(c.histories), "learning curves"))
    else:
        parts.append('<p class="note">no metric was logged at more than one step (this model has no epochs).</p>')
    if c.folds:
        parts.append("<h2>Cross-validation folds</h2>")
        parts.append(_table(pd.DataFrame(c.folds)))
    parts.append("<h2>Config</h2>")
    parts.append(f"<pre>{html.escape(c.config_yaml)}</pre>")
    title = html.escape(f"psyattrs report {c.run_name} ({c.run_id[:8]})")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_CSS}</style>'
            f"</head><body>{''.join(parts)}</body></html>\n")


def build_report(run_id: str, *, tracking_uri: str | None = None) -> str:
    """The report page of a run, as HTML text.

    Raises:
        ValueError: no such run, or not a psyattrs run.
    """
    return render_report(read_run(run_id, tracking_uri=tracking_uri))


def log_run_report(run_id: str, *, tracking_uri: str | None = None, out: "str | Path | None" = None) -> Path | None:
    """Builds the report of a run and logs it as the run's artifact `report/report.html`.

    Args:
        run_id: a run made by `psyattrs train` (finished or not).
        tracking_uri: its store (None = MLFLOW_TRACKING_URI or the project's store).
        out: also write the page to this file (parent folders created).

    Returns:
        `out` as a Path, or None when not given.
    """
    from mlflow.tracking import MlflowClient

    page = build_report(run_id, tracking_uri=tracking_uri)
    with tempfile.TemporaryDirectory() as tmp:
        local = Path(tmp) / "report.html"
        local.write_text(page, encoding="utf-8")
        with tracking_store(tracking_uri) as uri, quiet_mlflow():
            MlflowClient(uri).log_artifact(run_id, str(local), artifact_path=str(Path(REPORT_ARTIFACT).parent))
    if out is None:
        return None
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path
