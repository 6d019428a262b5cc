"""The figures of a training run: the confusion and calibration grids every run logs
(`psyattrs.experiments.tracking`) and the run report's (`psyattrs.experiments.report`) per-head bars
and learning curves. matplotlib `Figure`s, no pyplot state, so they are safe to build anywhere and
never open a window; `figure_png(fig)` renders one to PNG bytes for embedding.
"""

from __future__ import annotations

import io
import math
from typing import Mapping

import numpy as np
import pandas as pd

import psyattrs.experiments.metrics as M
from psyattrs.data.table import final_column
from psyattrs.schema import Schema


def new_figure(width: float, height: float, rows: int = 1, cols: int = 1):
    """A constrained-layout Figure with an Agg canvas and its axes (an array when rows*cols > 1)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=rows * cols == 1)
    return fig, axes


def figure_png(fig, *, dpi: int = 96) -> bytes:
    """The figure as PNG bytes."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def head_metrics_figure(summary: pd.DataFrame, *, metric: str = "macro_f1"):
    """Bars per head: the model's `metric` beside the majority floor and the human ceiling.

    Args:
        summary: `psyattrs.experiments.metrics.summary_table` (columns `head`, `macro_f1`,
            `floor_macro_f1`, `ceiling_macro_f1`, ...).
        metric: the model column; `floor_{metric}` and `ceiling_{metric}` are drawn where present.
    """
    heads = summary["head"].tolist()
    x = np.arange(len(heads))
    fig, ax = new_figure(max(6.0, 1.0 * len(heads)), 3.2)
    series = [(metric, "model"), (f"floor_{metric}", "majority floor"), (f"ceiling_{metric}", "human ceiling")]
    series = [(c, label) for c, label in series if c in summary]
    width = 0.8 / len(series)
    for i, (column, label) in enumerate(series):
        values = pd.to_numeric(summary[column], errors="coerce").fillna(0.0).to_numpy()
        ax.bar(x + (i - (len(series) - 1) / 2) * width, values, width=width, label=label)
    ax.set_xticks(x, heads)
    ax.set_ylim(0, 1)
    ax.set_ylabel(f"test {metric.replace('_', '-')}")
    ax.legend(fontsize=8, ncols=len(series), loc="upper center", bbox_to_anchor=(0.5, 1.18), frameon=False)
    return fig


def learning_curves_figure(histories: Mapping[str, pd.DataFrame]):
    """One line per metric over its steps (epochs).

    Args:
        histories: metric name -> DataFrame with `step` and `value`.
    """
    fig, ax = new_figure(6.0, 3.2)
    for name, frame in histories.items():
        ax.plot(frame["step"], frame["value"], marker="o", markersize=3, label=name)
    ax.set_xlabel("step (epoch)")
    ax.set_ylabel("value")
    ax.legend(fontsize=8)
    return fig


def _grid(n: int):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    cols = min(3, n)
    rows = -(-n // cols)
    fig = Figure(figsize=(4.2 * cols, 3.8 * rows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes


def confusion_figure(table: pd.DataFrame, schema: Schema, predicted: Mapping[str, np.ndarray] | pd.DataFrame):
    """One confusion matrix per head (rows: final label, columns: predicted; shade = row share)."""
    fig, axes = _grid(len(schema))
    for ax, head in zip(axes, schema):
        counts = M.confusion(table, head, predicted[head.name])
        shares = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
        ax.imshow(shares, cmap="Blues", vmin=0, vmax=1)
        for (i, j), n in np.ndenumerate(counts):
            ax.text(j, i, str(n), ha="center", va="center", color="white" if shares[i, j] > 0.5 else "black")
        ax.set_xticks(head.values)
        ax.set_yticks(head.values)
        ax.set_xlabel("predicted")
        ax.set_ylabel("final label")
        ax.set_title(head.name)
    return fig


def calibration_figure(table: pd.DataFrame, schema: Schema, proba: Mapping[str, np.ndarray]):
    """One reliability diagram per head (top-label confidence against accuracy, with the ECE)."""
    fig, axes = _grid(len(schema))
    keep = M.evaluable(table)
    for ax, head in zip(axes, schema):
        column = final_column(head.name)
        final = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=float, na_value=np.nan) if column in table else np.full(len(table), np.nan)
        rows = keep & ~np.isnan(final)
        y, p = final[rows].astype(int), np.asarray(proba[head.name])[rows]
        bins = M.calibration_bins(y, p)
        used = bins[bins["count"] > 0]
        ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1)
        ax.plot(used["confidence"], used["accuracy"], marker="o")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("confidence")
        ax.set_ylabel("accuracy")
        ece = M.expected_calibration_error(y, p)
        ax.set_title(f"{head.name}  ECE {ece:.3f}" if not math.isnan(ece) else f"{head.name}  (no labelled rows)")
    return fig
