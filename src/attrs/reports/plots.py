"""Figures of the run report and of the conversation analysis (matplotlib `Figure`s, no pyplot
state, so they are safe to build anywhere and never open a window).

`figure_png(fig)` renders one to PNG bytes for embedding. The confusion and calibration grids are
the ones every run logs (`psyattrs.experiments.tracking`), drawn again from its predictions.
"""

from __future__ import annotations

import io
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from psyattrs.experiments.tracking import calibration_figure, confusion_figure

__all__ = [
    "calibration_figure",
    "confusion_figure",
    "curve_groups",
    "effects_figure",
    "figure_png",
    "head_metrics_figure",
    "learning_curves_figure",
    "new_figure",
]


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
    """Bars per head: the model's `metric` beside the majority floor and one labeler scored against
    the others' majority (not a ceiling: `psyattrs.experiments.metrics.TABLE_LEGEND`).

    Args:
        summary: `psyattrs.experiments.metrics.summary_table` (columns `head`, `macro_f1`,
            `floor_macro_f1`, `labeler_macro_f1`, ...).
        metric: the model column; `floor_{metric}` and `labeler_{metric}` are drawn where present.
    """
    heads = summary["head"].tolist()
    x = np.arange(len(heads))
    fig, ax = new_figure(max(6.0, 1.0 * len(heads)), 3.2)
    series = [(metric, "model"), (f"floor_{metric}", "majority floor"),
              (f"labeler_{metric}", "one labeler vs. the others' majority")]
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


CURVE_GROUPS: tuple[tuple[str, str], ...] = (
    ("loss", "loss"), ("learning rate", "learning_rate"), ("epoch", "epoch"),
)
"""(panel, what its metric names hold): the learning-curve panels in order; other metrics share a
last panel, `other`. A loss, a learning rate (1e-5) and an epoch count (1, 2, 3) on one y axis hide
each other."""


def curve_groups(names: Iterable[str]) -> dict[str, list[str]]:
    """The metric names of each learning-curve panel (`CURVE_GROUPS`, then `other`), empty panels left out.

    A name goes to the first panel whose key it holds (`fit_valid_loss` -> loss, `fit_learning_rate`
    -> learning rate, `fit_epoch` -> epoch)."""
    out: dict[str, list[str]] = {}
    for name in names:
        panel = next((p for p, key in CURVE_GROUPS if key in name), "other")
        out.setdefault(panel, []).append(name)
    order = [p for p, _ in CURVE_GROUPS] + ["other"]
    return {p: out[p] for p in order if p in out}


def learning_curves_figure(histories: Mapping[str, pd.DataFrame]):
    """One panel per kind of metric (`curve_groups`: losses, the learning rate, the epoch, the
    rest), one line per metric over its steps, the panels sharing the step axis.

    Args:
        histories: metric name -> DataFrame with `step` and `value`.
    """
    groups = curve_groups(histories)
    fig, axes = new_figure(6.0, 2.2 * len(groups) + 0.6, rows=len(groups))
    axes = np.asarray(axes).ravel()
    for ax, (panel, names) in zip(axes, groups.items()):
        for name in names:
            frame = histories[name]
            ax.plot(frame["step"], frame["value"], marker="o", markersize=3, label=name)
        ax.set_ylabel(panel)
        ax.legend(fontsize=8)
    axes[-1].set_xlabel("step")
    return fig


def effects_figure(effects: pd.DataFrame, *, title: str):
    """Standardised coefficients with their confidence intervals (a forest plot); blue where the
    interval excludes 0.

    Args:
        effects: one outcome's rows of `AnalysisResult.effects` (`feature`, `coef`, `ci_low`, `ci_high`).
        title: the plot's title (the outcome, its CV R² against the baseline).
    """
    effects = effects.iloc[::-1]
    fig, ax = new_figure(6.4, 0.35 * len(effects) + 1.6)
    y = np.arange(len(effects))
    crosses = (effects["ci_low"] > 0) | (effects["ci_high"] < 0)
    for yi, row, clear in zip(y, effects.itertuples(index=False), crosses):
        color = "tab:blue" if clear else "tab:gray"
        ax.errorbar([row.coef], [yi], xerr=[[row.coef - row.ci_low], [row.ci_high - row.coef]], fmt="o",
                    color=color, capsize=3)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(y, effects["feature"])
    ax.set_xlabel("standardised coefficient (95% bootstrap CI)")
    ax.set_title(title, fontsize=9)
    return fig
