"""The figure of one row (an instance under one budget): a plan's step against the lower
bound of each source (docs/bounds.md)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from matplotlib.figure import Figure

from slackopt.errors import SlackoptError
from slackopt.plot.common import COLORS, figure, fmt_time, time_unit


def bound_gaps(step_s: float, bounds: Mapping[str, float | None], *, ideal_s: float,
               label: str = "plan", title: str | None = None) -> Figure:
    """One row (an instance under one budget): a plan's simulated step against the lower
    bound of each source, with the gap of the plan to each.

    Each bound is a horizontal bar from 0 to its value, labelled with the gap
    (step - bound) / bound; the plan's step is a vertical line, the ideal step T* a
    dotted one. A bound that reaches the step proves the plan optimal.

    Args:
        step_s: the plan's simulated step time (s).
        bounds: {source name: lower bound (s), or None when the source gave none}, e.g. a
            milp result's ``info["bounds"]`` (certified bounds by source; docs/bounds.md).
        ideal_s: the ideal step T* (s), itself a bound (drawn first).
        label: who made the plan (a solver name), in the legend.
        title: figure title (default: says what is drawn).

    Returns:
        The figure: one bar per source with a value, T* first, then in the order given.

    Raises:
        SlackoptError: a step time or T* that is not a finite number > 0.
    """
    if not (math.isfinite(step_s) and step_s > 0 and math.isfinite(ideal_s) and ideal_s > 0):
        raise SlackoptError(f"bound_gaps() needs a finite step ({step_s}) and T* ({ideal_s}) "
                            "> 0: draw a plan that runs")
    rows = [("T* (ideal step)", float(ideal_s))] + [(str(k), float(v)) for k, v in
                                                     bounds.items() if v is not None]
    scale, unit = time_unit(step_s)
    fig = figure(8.0, 1.3 + 0.42 * len(rows))
    ax = fig.add_subplot()
    ys = np.arange(len(rows))[::-1]
    for y, (_, b) in zip(ys, rows, strict=True):
        gap = (step_s - b) / b
        proven = gap <= 1e-4
        ax.barh(y, b * scale, color="#55A868" if proven else "#4C72B0", height=0.6)
        ax.annotate("reaches the step: optimal" if proven else f"gap {gap:.2%}",
                    (b * scale, y), textcoords="offset points", xytext=(4, 0), va="center",
                    fontsize=8)
    ax.axvline(step_s * scale, color=COLORS["stall"], linewidth=1.6,
               label=f"{label}: step {fmt_time(step_s)}")
    ax.axvline(ideal_s * scale, color="black", linestyle=":", linewidth=1.2,
               label=f"ideal step T* = {fmt_time(ideal_s)}")
    ax.set_yticks(ys, [n.replace("_", " ") for n, _ in rows], fontsize=8)
    lo = min(b for _, b in rows)
    ax.set_xlim(lo * scale * 0.9, step_s * scale * 1.2)
    ax.set_xlabel(f"lower bound on the step time ({unit}; the axis starts at 90% of the "
                  "smallest)")
    ax.grid(axis="x", alpha=0.3)
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=2,
               fontsize=8, frameon=False)
    ax.set_title(title or "Lower bounds by source against the plan's step (a bar that "
                 "reaches the red line proves the plan optimal)", fontsize=10)
    return fig
