"""The figures of one training step, from the evaluator's trace: the step timeline
(compute, D2H and H2D lanes; the paper's Figure 5) and device memory over the step."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from slackopt.instance import Instance
from slackopt.plot.common import (
    COLORS,
    byte_unit,
    figure,
    fmt_bytes,
    fmt_time,
    time_unit,
    wrap_title,
)
from slackopt.plot.trace import end_s, evaluations_by_label, need_trace, verdict
from slackopt.simulate import Evaluation

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes


def _op_phases(instance: Instance | None) -> dict[str, str]:
    if instance is None:
        return {}
    return {op.name: op.phase for op in instance.scheduled_ops}


def _timeline_axes(ax: Axes, ev: Evaluation, instance: Instance | None, scale: float,
                   label: str) -> None:
    trace = need_trace(ev, "timeline")
    phases = _op_phases(instance)
    bars: dict[str, list[tuple[float, float]]] = {k: [] for k in
                                                  ("fwd", "bwd", "op", "rebuild", "stall",
                                                   "d2h", "h2d")}
    evict: list[float] = []
    for e in trace:
        lane = e["lane"]
        x0, x1 = e["start_s"] * scale, e["end_s"] * scale
        if lane == "compute":
            key = "rebuild" if e.get("rebuild") else phases.get(e["name"], "op")
            bars[key if key in bars else "op"].append((x0, x1 - x0))
        elif lane in ("stall", "d2h", "h2d"):
            bars[lane].append((x0, x1 - x0))
        elif lane == "evict":
            evict.append(x0)
    rows = {"compute": 2, "d2h": 1, "h2d": 0}
    h = 0.7
    for key, color in (("fwd", COLORS["fwd"]), ("bwd", COLORS["bwd"]), ("op", COLORS["op"])):
        if bars[key]:
            ax.broken_barh(bars[key], (rows["compute"] - h / 2, h), facecolors=color,
                           edgecolors="none")
    if bars["rebuild"]:  # true widths, plus a tick above each so short ones stay visible
        ax.broken_barh(bars["rebuild"], (rows["compute"] - h / 2, h),
                       facecolors=COLORS["rebuild"], edgecolors="none")
        mids = [x + w / 2 for x, w in bars["rebuild"]]
        ax.plot(mids, [rows["compute"] + h / 2 + 0.12] * len(mids), "|", color=COLORS["rebuild"],
                markersize=5, markeredgewidth=0.8, linestyle="none")
    if bars["stall"]:
        ax.broken_barh(bars["stall"], (rows["compute"] - h / 2, h), facecolors="none",
                       edgecolors=COLORS["stall"], hatch="////", linewidth=0.8)
    for lane in ("d2h", "h2d"):
        if bars[lane]:
            ax.broken_barh(bars[lane], (rows[lane] - h / 2, h), facecolors=COLORS[lane],
                           edgecolors="white", linewidth=0.3)
    if evict:
        ax.plot(evict, [rows["h2d"] + h / 2 + 0.1] * len(evict), "v", color=COLORS["evict"],
                markersize=5, linestyle="none")
    if instance is not None:
        ax.axvline(instance.forward_time_s * scale, color="#333333", linestyle="--",
                   linewidth=0.9)
    ax.axvline(ev.ideal_time_s * scale, color="black", linestyle=":", linewidth=1.2)
    if not ev.feasible:
        ax.axvline(end_s(ev) * scale, color=COLORS["stall"], linewidth=1.5)
    ax.set_yticks([2, 1, 0], ["compute", "D2H copies\n(offload)", "H2D copies\n(prefetch)"])
    ax.set_ylim(-0.6, 2.75)
    ax.set_xlim(0, max(end_s(ev), ev.ideal_time_s) * scale * 1.01)
    ax.grid(axis="x", alpha=0.3)
    head = f"{label}: " if label else ""
    stalls = ev.stall_fwd_s + ev.stall_bwd_s
    parts = [verdict(ev),
             f"stalls {fmt_time(stalls)}" if stalls > 0 else "no stalls",
             f"rebuilds {fmt_time(ev.recompute_s)}" if ev.recompute_s > 0 else "no rebuilds",
             f"{fmt_bytes(ev.d2h_bytes)} offloaded" if ev.d2h_bytes else "nothing offloaded"]
    width_in = ax.figure.get_figwidth()
    ax.set_title(wrap_title(head + "; ".join(parts), max(40, int(width_in * 12))), fontsize=9,
                 loc="left")


def timeline(evaluation: Evaluation | Mapping[str, Evaluation], instance: Instance | None = None,
             *, title: str | None = None, width: float = 11.0) -> Figure:
    """The step timeline (the paper's Figure 5): compute, D2H and H2D lanes over time.

    Forward and backward operators, rebuilds (recompute) and compute-stream stalls are
    marked on the compute lane, each copy on its engine's lane, evictions as red
    triangles. Dashed line: end of the ideal forward pass T_F (needs `instance`); dotted
    line: the ideal step T*.

    Args:
        evaluation: an Evaluation made with ``simulate(..., trace=True)``, or a mapping
            {label: Evaluation} to stack several steps on one time axis (e.g. two solvers;
            each panel's title starts with its label, the solver that made the plan).
        instance: the instance, to tell forward from backward operators and mark T_F.
        title: figure title (default: the instance name and budget).
        width: figure width (inches).

    Returns:
        The figure (one panel per evaluation, time in ms or us).

    Raises:
        SlackoptError: an evaluation without a trace.
    """
    evs = evaluations_by_label(evaluation)
    t_max = max(max(end_s(e), e.ideal_time_s) for e in evs.values())
    scale, unit = time_unit(t_max)
    n = len(evs)
    fig = figure(width, 1.9 * n + 1.3)
    axes = fig.subplots(n, 1, sharex=True, squeeze=False)[:, 0]
    for ax, (label, ev) in zip(axes, evs.items(), strict=True):
        _timeline_axes(ax, ev, instance, scale, label)
        ax.set_xlim(0, t_max * scale * 1.01)
    axes[-1].set_xlabel(f"time since the start of the step ({unit})")
    handles = []
    if instance is not None:
        handles += [Patch(color=COLORS["fwd"], label="forward operator"),
                    Patch(color=COLORS["bwd"], label="backward operator")]
    else:
        handles.append(Patch(color=COLORS["op"], label="operator"))
    handles += [Patch(color=COLORS["rebuild"],
                      label="rebuild (recompute; a tick above marks each)"),
                Patch(facecolor="none", edgecolor=COLORS["stall"], hatch="////",
                      label="stall (waiting for memory or a copy)"),
                Patch(color=COLORS["d2h"], label="D2H copy (offload to host)"),
                Patch(color=COLORS["h2d"], label="H2D copy (prefetch to GPU)")]
    if any(e["lane"] == "evict" for ev in evs.values() for e in ev.trace or []):
        handles.append(Line2D([], [], marker="v", color=COLORS["evict"], linestyle="none",
                              label="eviction"))
    if instance is not None:
        handles.append(Line2D([], [], color="#333333", linestyle="--",
                              label="end of ideal forward pass T_F"))
    handles.append(Line2D([], [], color="black", linestyle=":", label="ideal step T*"))
    ncol = min(len(handles), 5, max(1, int(width / 2.7)))  # about 2.7 in an entry
    fig.legend(handles=handles, loc="outside lower center", ncol=ncol, fontsize=8,
               frameon=False)
    if title is None:
        ev0 = next(iter(evs.values()))
        name = instance.name if instance is not None else "one training step"
        frac = f" ({ev0.budget_bytes / instance.P:.0%} of P)" if instance is not None \
            and instance.P else ""
        title = f"Step timeline of {name} under M = {fmt_bytes(ev0.budget_bytes)}{frac}"
    fig.suptitle(title, fontsize=11)
    return fig


def memory_profile(evaluation: Evaluation | Mapping[str, Evaluation],
                   instance: Instance | None = None, *, title: str | None = None,
                   width: float = 10.0) -> Figure:
    """Device memory in use over the step against the budget M.

    Args:
        evaluation: an Evaluation made with ``simulate(..., trace=True)``, or {label:
            Evaluation} to draw several plans on one axis (labels name who made each
            plan, e.g. the solver).
        instance: adds the keep-all profile of the ideal schedule and its peak P.
        title: figure title (default: the instance; for one evaluation also its label
            and its verdict: step time and throughput, or why it is infeasible).
        width: figure width (inches).

    Returns:
        The figure: memory (GB/MB) against time (ms/us).

    Raises:
        SlackoptError: an evaluation without a trace.
    """
    evs = evaluations_by_label(evaluation)
    t_max = max(max(end_s(e), e.ideal_time_s) for e in evs.values())
    b_max = max(max(e.budget_bytes, e.peak_bytes) for e in evs.values())
    if instance is not None:
        b_max = max(b_max, instance.P)
    ts, tu = time_unit(t_max)
    bs, bu = byte_unit(b_max)
    fig = figure(width, 4.2)
    ax = fig.add_subplot()
    if instance is not None and instance.n_ops:
        x = np.append(instance.start_s, instance.ideal_time_s) * ts
        y = np.append(instance.keep_all_profile, 0) / bs
        ax.step(x, y, where="post", color=COLORS["keep_all"], linewidth=1,
                label="keep everything (ideal schedule, no budget)")
        ax.axhline(instance.P / bs, color=COLORS["peak"], linestyle=":", linewidth=1,
                   label=f"keep-all peak P = {fmt_bytes(instance.P)}")
        ax.axvline(instance.forward_time_s * ts, color="#333333", linestyle="--",
                   linewidth=0.8, label="end of ideal forward pass T_F")
    colors = ["#4C72B0", "#DD8452", "#55A868", "#8172B3", "#937860"]
    budgets = set()
    for i, (label, ev) in enumerate(evs.items()):
        trace = need_trace(ev, "memory_profile")
        samples: dict[float, int] = {}
        for e in trace:
            if e["lane"] == "memory":
                samples[e["start_s"]] = e["bytes"]  # the last sample at a time wins
        xs = np.array([0.0, *samples.keys()], dtype=float)
        ys = np.array([0, *samples.values()], dtype=float)
        if xs.size:
            xs = np.append(xs, end_s(ev))
            ys = np.append(ys, ys[-1])
        name = label or "this plan"
        ax.step(xs * ts, ys / bs, where="post", color=colors[i % len(colors)], linewidth=1.4,
                label=f"{name}: in use (peak {fmt_bytes(ev.peak_bytes)})")
        budgets.add(ev.budget_bytes)
    for m in sorted(budgets):
        ax.axhline(m / bs, color=COLORS["budget"], linestyle="--", linewidth=1.3,
                   label=f"budget M = {fmt_bytes(m)}")
    ax.set_xlabel(f"time since the start of the step ({tu})")
    ax.set_ylabel(f"device memory in use ({bu})")
    ax.set_xlim(0, t_max * ts * 1.01)
    ax.set_ylim(0, b_max / bs * 1.08)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    if title is None:
        label, ev0 = next(iter(evs.items()))
        name = instance.name if instance is not None else "one training step"
        title = f"Memory over the step of {name}"
        if len(evs) == 1:
            title += (f", plan of {label}" if label else "") + f": {verdict(ev0)}"
    ax.set_title(wrap_title(title, max(40, int(width * 11))), fontsize=10)
    return fig

