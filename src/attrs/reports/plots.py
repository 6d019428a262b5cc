"""Figures of the conversation analysis (`psyattrs.reports.analyze`), and, for notebooks, the
run figures of `psyattrs.experiments.figures` under their old names (matplotlib `Figure`s, no
pyplot state, so they are safe to build anywhere and never open a window).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from psyattrs.experiments.figures import (calibration_figure, confusion_figure, figure_png, head_metrics_figure,
                                          learning_curves_figure, new_figure)

__all__ = [
    "calibration_figure",
    "confusion_figure",
    "effects_figure",
    "figure_png",
    "head_metrics_figure",
    "learning_curves_figure",
    "new_figure",
]


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
