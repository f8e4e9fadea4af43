"""Figures: step timelines, memory profiles, plan maps, comparison curves, link budgets.

Every function returns a :class:`matplotlib.figure.Figure` built without pyplot (no global
state, safe in scripts, threads and notebooks; in Jupyter a returned figure shows inline
once ``%matplotlib inline`` is active) with axis labels that carry units, a legend and a
title. :func:`save` writes PNG, SVG or PDF. The figures of the SlackSwap paper (2026)
that they redraw:

- :func:`link_budget`: hideable fraction per GPU generation (Figure 1);
- :func:`cost_per_byte`: recompute cost per byte against an exposed copy (Figure 2);
- :func:`plan_map`: the decision per tensor kind per layer (Figure 3);
- :func:`throughput_vs_budget`: throughput against the memory budget per solver (Figure 4);
- :func:`timeline`: compute, D2H and H2D lanes of one step, stalls and rebuilds (Figure 5);
- :func:`memory_profile`: bytes in use over the step against the budget M;
- :func:`stage_memory`: a pipeline stage's memory over its schedule, units marked;
- :func:`planning_time_vs_quality`: planning time against the gap to the best plan;
- :func:`leaderboard`: a benchmark leaderboard, planning time against the gap per solver;
- :func:`bound_gaps`: one row (instance, budget): a plan's step against each lower bound.

Times are drawn in ms (or us for sub-2 ms steps), sizes in GB/MB/kB (decimal), shares in %.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from slackopt.errors import FileFormatError, SlackoptError
from slackopt.instance import Instance
from slackopt.plan import KEEP, RECOMP, SWAP, Plan
from slackopt.simulate import Evaluation

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from matplotlib.axes import Axes

FORMATS = (".png", ".svg", ".pdf")
"""File formats :func:`save` writes."""

DECISION_COLORS = {KEEP: "#4C72B0", SWAP: "#DD8452", RECOMP: "#55A868"}
DECISION_LABELS = {KEEP: "keep (stays on the GPU)", SWAP: "swap (offload + prefetch)",
                   RECOMP: "recompute (rebuilt in backward)"}
_C = {"fwd": "#4C72B0", "bwd": "#8172B3", "op": "#4C72B0", "rebuild": "#55A868",
      "stall": "#C44E52", "d2h": "#DD8452", "h2d": "#64B5CD", "evict": "#C44E52",
      "budget": "#C44E52", "peak": "#555555", "keep_all": "#999999", "used": "#4C72B0"}
GPU_LABELS = {"titanx": "Titan X (2015)", "v100": "V100 (2017)", "a100": "A100 (2020)",
              "h100": "H100 (2022)"}
PAPER_WORKLOADS = ("gpt2-xl", "bert-large", "llama-7b", "vgg16")
GPU_GENERATIONS = ("titanx", "v100", "a100", "h100")


# ============================================================================ helpers
def _fig(w: float, h: float) -> Figure:
    fig = Figure(figsize=(w, h), layout="constrained")
    return fig


def _time_unit(t_max: float) -> tuple[float, str]:
    """(scale, unit) to draw times up to `t_max` seconds."""
    if t_max < 2e-3:
        return 1e6, "\u00b5s"
    return 1e3, "ms"


def _byte_unit(b_max: float) -> tuple[float, str]:
    """(scale, unit) to draw sizes up to `b_max` bytes (decimal units)."""
    for scale, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if b_max >= scale:
            return scale, unit
    return 1.0, "B"


def _fmt_bytes(b: float) -> str:
    s, u = _byte_unit(abs(b))
    return f"{b / s:.3g} {u}"


def _fmt_time(t: float) -> str:
    if abs(t) >= 10:
        return f"{t:.4g} s"
    if abs(t) >= 1e-3 or t == 0:
        return f"{t * 1e3:.4g} ms"
    return f"{t * 1e6:.4g} \u00b5s"


def _need_trace(ev: Evaluation, fn: str) -> list[dict[str, Any]]:
    if not isinstance(ev, Evaluation):
        raise SlackoptError(f"{fn}() needs an Evaluation, got {type(ev).__name__}")
    if ev.trace is None:
        raise SlackoptError(f"{fn}() needs the event trace: evaluate with "
                            "slackopt.simulate(instance, plan, budget_bytes, trace=True)")
    return ev.trace


def _evaluations(evaluation: Evaluation | Mapping[str, Evaluation]) -> dict[str, Evaluation]:
    if isinstance(evaluation, Mapping):
        if not evaluation:
            raise SlackoptError("no evaluations to plot")
        return {str(k): v for k, v in evaluation.items()}
    return {"": evaluation}


def _end_s(ev: Evaluation) -> float:
    """Where the drawn time axis of `ev` ends (s): its step time if feasible; for an
    infeasible plan, which has no step time, the moment it stopped (the step time field
    if the evaluator still gives one, else the last traced event's end)."""
    if ev.step_time_s is not None and math.isfinite(ev.step_time_s):
        return float(ev.step_time_s)
    ends = [e["end_s"] for e in ev.trace or () if e.get("end_s") is not None]
    return float(max(ends, default=0.0))


def _verdict(ev: Evaluation) -> str:
    if not ev.feasible:
        import re

        m = re.search(r"task '([^']+)'.*?(\d+) B short", ev.failure or "")
        why = f": '{m.group(1)}' is {_fmt_bytes(int(m.group(2)))} short of memory" if m else ""
        return f"infeasible{why}, no step time (stopped at {_fmt_time(_end_s(ev))}, red line)"
    return (f"step {_fmt_time(ev.step_time_s)} vs ideal {_fmt_time(ev.ideal_time_s)}, "
            f"throughput {ev.throughput:.1%}")


# ============================================================================ saving
def save(fig: Figure, path: str | os.PathLike, *, dpi: int = 150) -> Path:
    """Write a figure as PNG, SVG or PDF (by the file's suffix); replaces an existing file.

    Args:
        fig: the figure.
        path: the file (.png, .svg or .pdf); parent directories are created.
        dpi: resolution of PNG files (dots per inch).

    Returns:
        The path written.

    Raises:
        FileFormatError: an unknown suffix, or the file cannot be written.
    """
    p = Path(path)
    if p.suffix.lower() not in FORMATS:
        raise FileFormatError(p, "", f"unknown figure format '{p.suffix or '(none)'}'",
                              f"end the file name with one of {', '.join(FORMATS)}")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(p, dpi=dpi, format=p.suffix.lower()[1:])
    except OSError as e:
        raise FileFormatError(p, "", f"cannot be written ({e.strerror or e})",
                              "check that the directory is writable") from None
    return p


# ============================================================================ timeline
def _op_phases(instance: Instance | None) -> dict[str, str]:
    if instance is None:
        return {}
    return {op.name: op.phase for op in instance.scheduled_ops}


def _timeline_axes(ax: Axes, ev: Evaluation, instance: Instance | None, scale: float,
                   label: str) -> None:
    trace = _need_trace(ev, "timeline")
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
    for key, color in (("fwd", _C["fwd"]), ("bwd", _C["bwd"]), ("op", _C["op"])):
        if bars[key]:
            ax.broken_barh(bars[key], (rows["compute"] - h / 2, h), facecolors=color,
                           edgecolors="none")
    if bars["rebuild"]:  # true widths, plus a tick above each so short ones stay visible
        ax.broken_barh(bars["rebuild"], (rows["compute"] - h / 2, h),
                       facecolors=_C["rebuild"], edgecolors="none")
        mids = [x + w / 2 for x, w in bars["rebuild"]]
        ax.plot(mids, [rows["compute"] + h / 2 + 0.12] * len(mids), "|", color=_C["rebuild"],
                markersize=5, markeredgewidth=0.8, linestyle="none")
    if bars["stall"]:
        ax.broken_barh(bars["stall"], (rows["compute"] - h / 2, h), facecolors="none",
                       edgecolors=_C["stall"], hatch="////", linewidth=0.8)
    for lane in ("d2h", "h2d"):
        if bars[lane]:
            ax.broken_barh(bars[lane], (rows[lane] - h / 2, h), facecolors=_C[lane],
                           edgecolors="white", linewidth=0.3)
    if evict:
        ax.plot(evict, [rows["h2d"] + h / 2 + 0.1] * len(evict), "v", color=_C["evict"],
                markersize=5, linestyle="none")
    if instance is not None:
        ax.axvline(instance.forward_time_s * scale, color="#333333", linestyle="--",
                   linewidth=0.9)
    ax.axvline(ev.ideal_time_s * scale, color="black", linestyle=":", linewidth=1.2)
    if not ev.feasible:
        ax.axvline(_end_s(ev) * scale, color=_C["stall"], linewidth=1.5)
    ax.set_yticks([2, 1, 0], ["compute", "D2H copies\n(offload)", "H2D copies\n(prefetch)"])
    ax.set_ylim(-0.6, 2.75)
    ax.set_xlim(0, max(_end_s(ev), ev.ideal_time_s) * scale * 1.01)
    ax.grid(axis="x", alpha=0.3)
    head = f"{label}: " if label else ""
    stalls = ev.stall_fwd_s + ev.stall_bwd_s
    parts = [_verdict(ev),
             f"stalls {_fmt_time(stalls)}" if stalls > 0 else "no stalls",
             f"rebuilds {_fmt_time(ev.recompute_s)}" if ev.recompute_s > 0 else "no rebuilds",
             f"{_fmt_bytes(ev.d2h_bytes)} offloaded" if ev.d2h_bytes else "nothing offloaded"]
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
    evs = _evaluations(evaluation)
    t_max = max(max(_end_s(e), e.ideal_time_s) for e in evs.values())
    scale, unit = _time_unit(t_max)
    n = len(evs)
    fig = _fig(width, 1.9 * n + 1.3)
    axes = fig.subplots(n, 1, sharex=True, squeeze=False)[:, 0]
    for ax, (label, ev) in zip(axes, evs.items(), strict=True):
        _timeline_axes(ax, ev, instance, scale, label)
        ax.set_xlim(0, t_max * scale * 1.01)
    axes[-1].set_xlabel(f"time since the start of the step ({unit})")
    handles = []
    if instance is not None:
        handles += [Patch(color=_C["fwd"], label="forward operator"),
                    Patch(color=_C["bwd"], label="backward operator")]
    else:
        handles.append(Patch(color=_C["op"], label="operator"))
    handles += [Patch(color=_C["rebuild"], label="rebuild (recompute; a tick above marks each)"),
                Patch(facecolor="none", edgecolor=_C["stall"], hatch="////",
                      label="stall (waiting for memory or a copy)"),
                Patch(color=_C["d2h"], label="D2H copy (offload to host)"),
                Patch(color=_C["h2d"], label="H2D copy (prefetch to GPU)")]
    if any(e["lane"] == "evict" for ev in evs.values() for e in ev.trace or []):
        handles.append(Line2D([], [], marker="v", color=_C["evict"], linestyle="none",
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
        title = f"Step timeline of {name} under M = {_fmt_bytes(ev0.budget_bytes)}{frac}"
    fig.suptitle(title, fontsize=11)
    return fig


# ============================================================================ memory
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
    evs = _evaluations(evaluation)
    t_max = max(max(_end_s(e), e.ideal_time_s) for e in evs.values())
    b_max = max(max(e.budget_bytes, e.peak_bytes) for e in evs.values())
    if instance is not None:
        b_max = max(b_max, instance.P)
    ts, tu = _time_unit(t_max)
    bs, bu = _byte_unit(b_max)
    fig = _fig(width, 4.2)
    ax = fig.add_subplot()
    if instance is not None and instance.n_ops:
        x = np.append(instance.start_s, instance.ideal_time_s) * ts
        y = np.append(instance.keep_all_profile, 0) / bs
        ax.step(x, y, where="post", color=_C["keep_all"], linewidth=1,
                label="keep everything (ideal schedule, no budget)")
        ax.axhline(instance.P / bs, color=_C["peak"], linestyle=":", linewidth=1,
                   label=f"keep-all peak P = {_fmt_bytes(instance.P)}")
        ax.axvline(instance.forward_time_s * ts, color="#333333", linestyle="--",
                   linewidth=0.8, label="end of ideal forward pass T_F")
    colors = ["#4C72B0", "#DD8452", "#55A868", "#8172B3", "#937860"]
    budgets = set()
    for i, (label, ev) in enumerate(evs.items()):
        trace = _need_trace(ev, "memory_profile")
        samples: dict[float, int] = {}
        for e in trace:
            if e["lane"] == "memory":
                samples[e["start_s"]] = e["bytes"]  # the last sample at a time wins
        xs = np.array([0.0, *samples.keys()], dtype=float)
        ys = np.array([0, *samples.values()], dtype=float)
        if xs.size:
            xs = np.append(xs, _end_s(ev))
            ys = np.append(ys, ys[-1])
        name = label or "this plan"
        ax.step(xs * ts, ys / bs, where="post", color=colors[i % len(colors)], linewidth=1.4,
                label=f"{name}: in use (peak {_fmt_bytes(ev.peak_bytes)})")
        budgets.add(ev.budget_bytes)
    for m in sorted(budgets):
        ax.axhline(m / bs, color=_C["budget"], linestyle="--", linewidth=1.3,
                   label=f"budget M = {_fmt_bytes(m)}")
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
            title += (f", plan of {label}" if label else "") + f": {_verdict(ev0)}"
    ax.set_title(wrap_title(title, max(40, int(width * 11))), fontsize=10)
    return fig


# ============================================================================ stage memory
_UNIT_COLORS = {"F": _C["fwd"], "B": _C["bwd"], "W": "#937860"}
_UNIT_WORDS = {"F": "forward unit (F)", "B": "backward unit (B)",
               "W": "weight-gradient unit (W)"}


def _memory_samples(ev: Evaluation, fn: str) -> tuple[np.ndarray, np.ndarray]:
    """Device memory in use (bytes) of a traced evaluation as a step function: the times
    (s) and the bytes from each time on, ending at the drawn end of the step."""
    samples: dict[float, int] = {}
    for e in _need_trace(ev, fn):
        if e["lane"] == "memory":
            samples[e["start_s"]] = e["bytes"]  # the last sample at a time wins
    xs = np.array([0.0, *samples.keys(), _end_s(ev)], dtype=float)
    ys = np.array([0, *samples.values()], dtype=float)
    return xs, np.append(ys, ys[-1])


def _unit_spans(instance: Instance, ev: Evaluation | None) -> list[tuple[float, float]]:
    """(start, end) in s of each unit of `instance`: in its ideal schedule (`ev` None), or
    as the traced evaluation `ev` ran it (a unit's rebuilds count as its own; a unit not
    reached by an infeasible plan is (nan, nan))."""
    n = len(instance.units)
    if ev is None:
        last = instance.unit_last_op
        first = last - np.array([u.n_ops for u in instance.units]) + 1
        return list(zip(instance.start_s[first].tolist(), instance.end_s[last].tolist(),
                        strict=True))
    tasks = [e for e in _need_trace(ev, "stage_memory") if e["lane"] == "compute"]
    unit = [None if e.get("rebuild") else int(instance.op_unit[instance.op_index(e["name"])])
            for e in tasks]
    nxt = None
    for k in range(len(tasks) - 1, -1, -1):  # a rebuild belongs to the next op's unit
        unit[k] = nxt = unit[k] if unit[k] is not None else nxt
    lo, hi = np.full(n, np.nan), np.full(n, np.nan)
    for e, u in zip(tasks, unit, strict=True):
        if u is not None:
            lo[u], hi[u] = np.fmin(lo[u], e["start_s"]), np.fmax(hi[u], e["end_s"])
    return list(zip(lo.tolist(), hi.tolist(), strict=True))


def stage_memory(evaluation: Evaluation | Mapping[str, Evaluation], instance: Instance, *,
                 title: str | None = None, width: float = 12.0) -> Figure:
    """Device memory over a pipeline stage's whole schedule: keep-all against the plan,
    the units marked (docs/model.md, "A pipeline stage").

    The top strip draws the units, one row for the ideal schedule (keep-all, no budget)
    and one per plan as it ran, each unit a box labelled with its kind and microbatch
    (``F3``; ``B3c1`` for chunk 1), coloured by kind (F, B, W); gaps are pipeline bubbles
    or stalls. Below, memory in use over time: the keep-all profile of the ideal
    schedule with its peak P (annotated with the microbatches in flight there:
    :func:`slackopt.stage.in_flight`, the warm-up peak under 1F1B), each plan's memory
    in use and its budget M, over shading of the first plan's units by kind.

    Args:
        evaluation: an Evaluation of `instance` made with ``simulate(..., trace=True)``,
            or {label: Evaluation} (labels name who made each plan, e.g. the solver).
        instance: the stage (an instance with ``units``; a single pass draws its F and B).
        title: figure title (default: the instance and its schedule; for one evaluation
            also its label and verdict).
        width: figure width (inches).

    Returns:
        The figure: units above, memory (GB/MB) against time (s, ms or us) below.

    Raises:
        SlackoptError: an evaluation without a trace.
    """
    from slackopt.stage import in_flight, schedule_of

    evs = _evaluations(evaluation)
    t_max = max([instance.ideal_time_s, *(_end_s(e) for e in evs.values())])
    ts, tu = (1.0, "s") if t_max >= 2.0 else _time_unit(t_max)
    b_max = max([instance.P, *(max(e.budget_bytes, e.peak_bytes) for e in evs.values())])
    bs, bu = _byte_unit(b_max)
    rows = {"ideal schedule": _unit_spans(instance, None)}
    for label, ev in evs.items():
        rows[f"{label or 'plan'} (as run)"] = _unit_spans(instance, ev)
    fig = _fig(width, 4.6 + 0.32 * len(rows))
    strip, ax = fig.subplots(2, 1, sharex=True, height_ratios=[0.32 * len(rows) + 0.2, 4.2])
    names = [f"{u.kind}{u.microbatch}" + (f"c{u.chunk}" if u.chunk else "")
             for u in instance.units]
    x_end = t_max * ts * 1.01
    for r, spans in enumerate(rows.values()):
        y = len(rows) - 1 - r
        for u, (a, b), name in zip(instance.units, spans, names, strict=True):
            if a != a:  # not reached
                continue
            strip.add_patch(Rectangle((a * ts, y - 0.4), (b - a) * ts, 0.8,
                                      facecolor=_UNIT_COLORS[u.kind], edgecolor="white",
                                      linewidth=0.4))
            if (b - a) * ts > x_end / 150:  # room for a rotated label
                strip.text((a + b) / 2 * ts, y, name, ha="center", va="center",
                           rotation=90, fontsize=5.5, color="white")
    strip.set_yticks(range(len(rows)), list(rows)[::-1], fontsize=8)
    strip.set_ylim(-0.6, len(rows) - 0.4)
    strip.tick_params(axis="x", labelbottom=False)
    for u, (a, b) in zip(instance.units, list(rows.values())[1], strict=True):
        if a == a:
            ax.axvspan(a * ts, b * ts, color=_UNIT_COLORS[u.kind], alpha=0.08, linewidth=0)
    if instance.n_ops:
        ax.step(np.append(instance.start_s, instance.ideal_time_s) * ts,
                np.append(instance.keep_all_profile, 0) / bs, where="post",
                color=_C["keep_all"], linewidth=1, label="keep everything (ideal schedule, "
                "no budget)")
        k = int(np.argmax(instance.keep_all_profile))
        u = int(instance.op_unit[k])
        live = in_flight(instance)  # after each unit; during a unit, the larger of
        held = int(max(live[u], live[u - 1] if u else 0))  # before and after it
        ax.axhline(instance.P / bs, color=_C["peak"], linestyle=":", linewidth=1,
                   label=f"keep-all peak P = {_fmt_bytes(instance.P)}")
        what = ("microbatch-chunk passes" if any(x.chunk for x in instance.units)
                else "microbatches" if held != 1 else "microbatch")
        ax.annotate(f"keep-all peak: {held} {what} in flight",
                    (instance.start_s[k] * ts, instance.P / bs), xytext=(8, 6),
                    textcoords="offset points", fontsize=8, color=_C["peak"])
    colors = ["#4C72B0", "#DD8452", "#55A868", "#8172B3", "#937860"]
    for i, (label, ev) in enumerate(evs.items()):
        xs, ys = _memory_samples(ev, "stage_memory")
        how = (f"peak {_fmt_bytes(ev.peak_bytes)}" if ev.feasible
               else f"infeasible, stopped at {_fmt_time(_end_s(ev))}")
        ax.step(xs * ts, ys / bs, where="post", color=colors[i % len(colors)], linewidth=1.3,
                label=f"{label or 'this plan'}: in use ({how})")
    for m in sorted({ev.budget_bytes for ev in evs.values()}):
        ax.axhline(m / bs, color=_C["budget"], linestyle="--", linewidth=1.3,
                   label=f"budget M = {_fmt_bytes(m)}")
    handles, _ = ax.get_legend_handles_labels()
    kinds = dict.fromkeys(u.kind for u in instance.units)
    handles += [Patch(color=_UNIT_COLORS[k], label=_UNIT_WORDS[k]) for k in kinds]
    ax.legend(handles=handles, fontsize=8, loc="upper right", ncol=2)
    ax.set_xlabel(f"time since the start of the stage's step ({tu})")
    ax.set_ylabel(f"device memory in use ({bu})")
    ax.set_xlim(0, x_end)
    ax.set_ylim(0, b_max / bs * 1.25)
    ax.grid(alpha=0.3)
    if title is None:
        sch = schedule_of(instance)
        what = (f"{sch['name']}, stage {sch['stage']} of {sch['stages']}, "
                f"{sch['microbatches']} microbatches"
                + (f", {sch['chunks']} chunks" if sch.get("chunks", 1) > 1 else "")
                if sch else f"{len(instance.units)} units")
        title = f"Memory over the schedule of {instance.name} ({what})"
        if len(evs) == 1:
            label, ev0 = next(iter(evs.items()))
            title += (f"; plan of {label}" if label else "") + f": {_verdict(ev0)}"
    fig.suptitle(wrap_title(title, int(width * 11)), fontsize=10)
    return fig


# ============================================================================ plan map
def _layer_columns(instance: Instance) -> tuple[list[str], np.ndarray]:
    """Column labels and the column of each saved tensor: 'embed', blocks, 'head'."""
    layers = np.asarray(instance.saved_layers)
    blocks = sorted({int(b) for b in layers.tolist() if b >= 0})
    first_block_op = min((i for i, op in enumerate(instance.scheduled_ops[: instance.n_fwd])
                          if op.layer >= 0), default=instance.n_ops)
    prod = np.asarray(instance.saved_prod_idx)
    pre = (layers < 0) & (prod < first_block_op)
    post = (layers < 0) & ~pre
    labels, col = [], np.zeros(instance.n_saved, dtype=np.int64)
    if pre.any():
        labels.append("embed")
    base = len(labels)
    pos = {b: base + i for i, b in enumerate(blocks)}
    labels += [str(b) for b in blocks]
    for k, b in enumerate(layers.tolist()):
        if b >= 0:
            col[k] = pos[b]
    col[pre] = 0
    if post.any():
        labels.append("head" if blocks else "other")
        col[post] = len(labels) - 1
    return labels, col


def plan_map(instance: Instance, plan: Plan, *, budget_bytes: int | None = None,
             label: str | None = None, title: str | None = None, width: float | None = None
             ) -> Figure:
    """Decision per tensor category per layer (the paper's Figure 3).

    Each cell holds the saved tensors of one category (row) in one block (column;
    "embed" and "head" for tensors outside the blocks) and is filled by the share of
    their bytes kept, swapped and recomputed (a stacked bar; a cell of one colour has
    one decision). Grey: no such tensor there.

    Args:
        instance: the instance.
        plan: a plan for it.
        budget_bytes: the budget M it was made for (bytes), shown in the title if given.
        label: who made the plan (a solver name), named in the title if given.
        title: figure title (default: instance name, the label, M and bytes per
            decision).
        width: figure width (inches; default grows with the number of layers).

    Returns:
        The figure.

    Raises:
        PlanError: the plan does not fit the instance.
    """
    plan.check(instance)
    cats = list(dict.fromkeys(instance.saved_categories))
    cols, col_of = _layer_columns(instance)
    row_of = {c: i for i, c in enumerate(cats)}
    nr, nc = len(cats), len(cols)
    bytes_ = np.zeros((nr, nc, 3))
    count = np.zeros((nr, nc, 3))
    dec = plan.decisions
    s = np.asarray(instance.s, dtype=float)
    for k in range(instance.n_saved):
        r, c, d = row_of[instance.saved_categories[k]], col_of[k], int(dec[k])
        bytes_[r, c, d] += s[k]
        count[r, c, d] += 1
    if width is None:
        width = min(16.0, max(6.0, 2.5 + 0.2 * nc))
    fig = _fig(width, max(3.2, 1.4 + 0.32 * nr))
    ax = fig.add_subplot()
    ax.add_patch(Rectangle((-0.5, -0.5), nc, nr, facecolor="#EEEEEE", edgecolor="none",
                           zorder=0))
    for r in range(nr):
        for c in range(nc):
            w = bytes_[r, c] if bytes_[r, c].sum() > 0 else count[r, c]
            tot = w.sum()
            if tot <= 0:
                continue
            y = r + 0.45  # row r drawn from top (inverted y): stack downward
            for d in (KEEP, SWAP, RECOMP):
                hgt = 0.9 * w[d] / tot
                if hgt > 0:
                    ax.add_patch(Rectangle((c - 0.45, y - hgt), 0.9, hgt,
                                           facecolor=DECISION_COLORS[d], edgecolor="none"))
                    y -= hgt
    ax.set_xlim(-0.5, nc - 0.5)
    ax.set_ylim(nr - 0.5, -0.5)
    step = 1 if nc <= 26 else (2 if nc <= 52 else 4)
    named = [i for i in range(nc) if not cols[i].isdigit()]
    ticks = [i for i in range(nc) if not cols[i].isdigit()
             or (int(cols[i]) % step == 0 and (step == 1 or all(abs(i - j) > 1
                                                                 for j in named)))]
    ax.set_xticks(ticks, [cols[i] for i in ticks], fontsize=8)
    ax.set_yticks(range(nr), [c.replace("_", " ") for c in cats], fontsize=8)
    ax.set_xlabel("layer (block index; embed: before the blocks, head: after them)")
    ax.set_ylabel("saved tensor category")
    handles = [Patch(color=DECISION_COLORS[d], label=DECISION_LABELS[d])
               for d in (KEEP, SWAP, RECOMP)]
    handles.append(Patch(color="#EEEEEE", label="no tensor of this kind"))
    fig.legend(handles=handles, loc="outside lower center", ncol=4 if width >= 9 else 2,
               fontsize=8, frameon=False)
    if title is None:
        bb = plan.bytes_by_decision(instance)
        tot = max(1, instance.A)
        under = ""
        if budget_bytes is not None:
            under = f" under M = {_fmt_bytes(budget_bytes)}" + (
                f" ({budget_bytes / instance.P:.0%} of P)" if instance.P else "")
        by = f", plan of {label}" if label else ""
        title = (f"Plan map of {instance.name}{by}{under}\nkeep {_fmt_bytes(bb['keep'])} "
                 f"({bb['keep'] / tot:.0%}), swap {_fmt_bytes(bb['swap'])} "
                 f"({bb['swap'] / tot:.0%}), recompute {_fmt_bytes(bb['recomp'])} "
                 f"({bb['recomp'] / tot:.0%}) of A = {_fmt_bytes(instance.A)}; "
                 "each cell: share of its bytes per decision")
    ax.set_title(wrap_title(title, max(40, int(width * 10))), fontsize=10)
    return fig


def wrap_title(title: str, chars: int) -> str:
    """`title` with each line broken into lines of at most `chars` characters, at phrase
    boundaries where it can: after ", ", "; " and ": ", or before " under " (a budget); a
    phrase longer than `chars` alone is broken between words.

    Args:
        title: the text (its own line breaks are kept).
        chars: the most characters per line (> 0).

    Returns:
        The wrapped text, lines joined by newlines.
    """
    import re
    import textwrap

    out: list[str] = []
    for line in title.split("\n"):
        cur = ""
        for phrase in re.split(r"(?<=[,;:]) | (?=under )", line):
            if cur and len(cur) + 1 + len(phrase) > chars:
                out.append(cur)
                cur = ""
            cur = f"{cur} {phrase}" if cur else phrase
            if len(cur) > chars:
                *full, cur = textwrap.wrap(cur, chars)
                out.extend(full)
        out.append(cur)
    return "\n".join(out)


# ============================================================================ comparisons
def _need_columns(df: pd.DataFrame, cols: Sequence[str], fn: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise SlackoptError(f"{fn}() needs a compare table with column(s) "
                            f"{', '.join(missing)} (slackopt.compare.compare or "
                            "slackopt compare --out FILE)")


def _solver_labels(df: pd.DataFrame) -> pd.Series:
    """Solver name, with the parameters that differ from its defaults
    (:func:`slackopt.solver.solver_label`: 'genetic {"population":50}')."""
    from slackopt.solver import solver_label

    lab = df["solver"].astype(str)
    if "params" not in df:
        return lab
    params = df["params"].astype(object).where(df["params"].notna(), "{}").astype(str)
    return type(lab)([solver_label(n, p) for n, p in zip(lab, params, strict=True)],
                     index=df.index, dtype=object)


def _colors(labels: Sequence[str]) -> dict[str, Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return {lab: cmap(i % 10) for i, lab in enumerate(labels)}


def _dashes(labels: Sequence[str]) -> dict[str, str]:
    """Line style per label: solid for the first ten (one colour each), then dashed, ..."""
    styles = ("-", "--", ":", "-.")
    return {lab: styles[(i // 10) % len(styles)] for i, lab in enumerate(labels)}


def throughput_vs_budget(df: pd.DataFrame, *, instances: Sequence[str] | None = None,
                         title: str | None = None, ncols: int | None = None) -> Figure:
    """Throughput against the memory budget, one curve per solver (the paper's Figure 4).

    One panel per instance. A point is the mean throughput (T*/T, in % of the ideal step)
    over the seeds whose plan is feasible; budgets where no run of a solver is feasible
    are marked x on the bottom axis.

    Args:
        df: a compare table (:func:`slackopt.compare.compare`, or
            :func:`slackopt.compare.read_results` of a saved one).
        instances: instance names to draw (default: all, in table order).
        title: figure title.
        ncols: panels per row (default: 2 for four instances, else up to 3).

    Returns:
        The figure.

    Raises:
        SlackoptError: a table without the needed columns, or no rows to draw.
    """
    _need_columns(df, ("instance", "budget_fraction", "solver", "feasible", "throughput"),
                  "throughput_vs_budget")
    names = list(dict.fromkeys(df["instance"].astype(str)))
    if instances is not None:
        unknown = [i for i in instances if i not in names]
        if unknown:
            raise SlackoptError(f"instance(s) {', '.join(unknown)} not in the table; it has "
                                f"{', '.join(names)}")
        names = list(instances)
    if not names:
        raise SlackoptError("the table has no rows to draw")
    d = df.copy()
    d["label"] = _solver_labels(d)
    labels = list(dict.fromkeys(d["label"]))
    color = _colors(labels)
    dash = _dashes(labels)
    x_step = min(3.0, 14.0 / max(1, len(labels)))
    n = len(names)
    if ncols is None:
        ncols = 2 if n == 4 else min(n, 3)
    nrows = math.ceil(n / ncols)
    fig = _fig(4.6 * ncols + 0.4, 3.4 * nrows + 0.9)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    markers = "osD^vP*Xh<>"
    any_infeasible = False
    for idx, name in enumerate(names):
        ax = axes[idx // ncols][idx % ncols]
        g = d[d["instance"].astype(str) == name]
        for j, lab in enumerate(labels):
            gl = g[g["label"] == lab]
            if gl.empty:
                continue
            by = {}
            for frac, gg in gl.groupby("budget_fraction", sort=True):
                ok = gg[gg["feasible"].astype(bool) & gg["throughput"].notna()]
                by[float(frac)] = float(ok["throughput"].mean()) if len(ok) else math.nan
            xs = np.array(sorted(by)) * 100
            ys = np.array([by[k] for k in sorted(by)]) * 100
            ax.plot(xs, ys, marker=markers[j % len(markers)], color=color[lab], linewidth=1.4,
                    linestyle=dash[lab], markersize=4.5, label=lab)
            bad = np.isnan(ys)
            if bad.any():
                any_infeasible = True
                # staggered per solver so that overlapping markers stay apart
                ax.plot(xs[bad], np.full(bad.sum(), 1.0 + x_step * j), "x", color=color[lab],
                        markersize=6, clip_on=False)
        f = g["hideable_fraction"].iloc[0] if "hideable_fraction" in g and len(g) else None
        ax.set_title(name + (f"  (link can hide f = {f:.0%})" if f is not None
                             and pd_notna(f) else ""), fontsize=9)
        ax.set_xlabel("memory budget M (% of keep-all peak P)")
        ax.set_ylabel("throughput (% of ideal step)")
        ax.set_ylim(0, 105)
        ax.grid(alpha=0.3)
    for idx in range(n, nrows * ncols):
        axes[idx // ncols][idx % ncols].set_visible(False)
    handles = [Line2D([], [], color=color[lab], marker=markers[j % len(markers)],
                      linestyle=dash[lab], label=lab) for j, lab in enumerate(labels)]
    if any_infeasible:
        handles.append(Line2D([], [], color="#555555", marker="x", linestyle="none",
                              label="x at the bottom: no feasible plan at that budget"))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 5),
               fontsize=8, frameon=False)
    fig.suptitle(title or "Throughput across memory budgets (higher is better)", fontsize=11)
    return fig


def pd_notna(x: Any) -> bool:
    """True unless `x` is None, NaN or pandas' NA."""
    try:
        return not (x is None or x != x or str(x) == "<NA>")
    except (TypeError, ValueError):
        return True


def planning_time_vs_quality(df: pd.DataFrame, *, quality: str = "gap_to_best",
                             title: str | None = None) -> Figure:
    """Planning time against plan quality, one colour per solver, one marker per instance.

    Args:
        df: a compare table.
        quality: "gap_to_best" (step time over the best plan found, -1, in %) or
            "gap_to_bound" (over the best lower bound; only barrier-free plans have one:
            :func:`slackopt.compare.add_gaps`) or "throughput" (% of ideal).
        title: figure title.

    Returns:
        The figure; only runs with a feasible plan, a value of `quality` and a planning
        time > 0 (the axis is logarithmic) are drawn; the default title counts the runs
        drawn and, by reason, those not drawn. The legends list only the solvers and
        instances with a point.

    Raises:
        SlackoptError: a table without the needed columns, or an unknown `quality`.
    """
    ylabels = {"gap_to_best": "gap to the best plan found (% slower)",
               "gap_to_bound": "gap to the best lower bound (% slower)",
               "throughput": "throughput (% of ideal step)"}
    if quality not in ylabels:
        raise SlackoptError(f"quality '{quality}' is not one of {', '.join(ylabels)}")
    _need_columns(df, ("instance", "solver", "feasible", "planning_time_s", quality),
                  "planning_time_vs_quality")
    d = df.copy()
    d["label"] = _solver_labels(d)
    labels = list(dict.fromkeys(d["label"]))
    color = _colors(labels)
    hollow = {lab: i >= 10 for i, lab in enumerate(labels)}  # solvers 11-20: hollow markers
    names = list(dict.fromkeys(d["instance"].astype(str)))
    markers = dict(zip(names, "osD^vP*Xh<>" * 4, strict=False))
    feasible = d["feasible"].astype(bool)
    ok = d[feasible & d[quality].notna() & (d["planning_time_s"] > 0)]
    fig = _fig(7.5, 4.6)
    ax = fig.add_subplot()
    for lab in labels:
        for name in names:
            g = ok[(ok["label"] == lab) & (ok["instance"].astype(str) == name)]
            if len(g):
                ax.scatter(g["planning_time_s"], g[quality] * 100,
                           facecolors="none" if hollow[lab] else color[lab],
                           edgecolors=color[lab] if hollow[lab] else "none",
                           marker=markers[name], s=28, alpha=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("planning time (s, log scale)")
    ax.set_ylabel(ylabels[quality])
    ax.grid(alpha=0.3, which="both")
    drawn_labels, drawn_names = set(ok["label"]), set(ok["instance"].astype(str))
    h1 = [Patch(facecolor="none" if hollow[lab] else color[lab], edgecolor=color[lab],
                label=lab) for lab in labels if lab in drawn_labels]
    h2 = [Line2D([], [], marker=markers[n], color="#555555", linestyle="none", label=n)
          for n in names if n in drawn_names]
    leg = ax.legend(handles=h1, title="solver", fontsize=8, title_fontsize=8,
                    loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.add_artist(leg)
    ax.legend(handles=h2, title="instance", fontsize=8, title_fontsize=8, loc="lower left",
              bbox_to_anchor=(1.01, 0.0))
    if quality != "throughput":
        ax.set_ylim(bottom=min(0.0, float(ok[quality].min() * 100) if len(ok) else 0.0) - 1)
    if title is None:
        missing = {"gap_to_best": "no gap to the best plan",
                   "gap_to_bound": "no lower bound (not barrier-free)",
                   "throughput": "no throughput"}[quality]
        left = [(int((~feasible).sum()), "without a feasible plan"),
                (int((feasible & d[quality].isna()).sum()), f"feasible, {missing}"),
                (int((feasible & d[quality].notna() & ~(d["planning_time_s"] > 0)).sum()),
                 "feasible, no planning time")]
        why = "; ".join(f"{n} {what}" for n, what in left if n)
        title = (f"Planning time vs plan quality (lower left is better)\n{len(ok)} of {len(d)} "
                 f"runs drawn" + (f"; not drawn: {why}" if why else ""))
    ax.set_title(title, fontsize=10)
    return fig


def leaderboard(board: pd.DataFrame, *, title: str | None = None) -> Figure:
    """A benchmark leaderboard: per solver, the median planning time against the geometric
    mean gap to the best lower bound, with a line up to its largest gap.

    Args:
        board: a leaderboard (:func:`slackopt.compare.bench.leaderboard`: columns solver,
            rows, feasible, gap_to_bound_geomean, gap_to_bound_max,
            planning_time_median_s).
        title: figure title (default: says what is drawn and which solvers are not).

    Returns:
        The figure; solvers without a gap to bound (no feasible barrier-free plan) or
        without a planning time > 0 (the axis is logarithmic) are named in the default
        title, not drawn.

    Raises:
        SlackoptError: a table without those columns.
    """
    _need_columns(board, ("solver", "rows", "feasible", "gap_to_bound_geomean",
                          "gap_to_bound_max", "planning_time_median_s"), "leaderboard")
    labels = [str(x) for x in board["solver"]]
    color = _colors(labels)
    fig = _fig(7.5, 4.6)
    ax = fig.add_subplot()
    left: list[str] = []
    tops: list[float] = []
    n_right = 0
    for r, lab in zip(board.itertuples(index=False), labels, strict=True):
        x, y, top = r.planning_time_median_s, r.gap_to_bound_geomean, r.gap_to_bound_max
        if not (pd_notna(x) and pd_notna(y) and x > 0):
            left.append(lab)
            continue
        ax.plot([x, x], [y * 100, top * 100], color=color[lab], linewidth=1.2, alpha=0.6)
        ax.scatter([x], [y * 100], color=color[lab], s=36, zorder=3,
                   label=f"{lab} ({r.feasible}/{r.rows} feasible)")
        right = x > 1.0  # slow planners sit at the right edge: label them to the left,
        n_right += right  # alternately above and below their dot
        ax.annotate(lab, (x, y * 100), textcoords="offset points", fontsize=8,
                    xytext=((-5, 4 if n_right % 2 else -11) if right else (5, 4)),
                    ha="right" if right else "left")
        tops.append(top * 100)
    ax.set_xscale("log")
    # gaps span 0.01% to several 100%: logarithmic above 0.1%, linear below (0 drawable)
    ax.set_yscale("symlog", linthresh=0.1, linscale=0.5)
    ax.yaxis.set_major_formatter(lambda v, _: f"{v:g}")
    ax.set_xlabel("median planning time (s, log scale)")
    ax.set_ylabel("gap to the best lower bound\n(% slower; log scale above 0.1%)")
    ax.grid(alpha=0.3, which="both")
    if len(left) < len(labels):
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  title="dot: geometric mean; line: up to the max", title_fontsize=8)
    ax.set_ylim(0, max([1.0, *[t for t in tops if pd_notna(t)]]) * 1.6)
    if title is None:
        title = "Benchmark leaderboard (lower left is better)" + (
            f"\nnot drawn (no gap to bound or planning time): {', '.join(left)}" if left
            else "")
    ax.set_title(title, fontsize=10)
    return fig


# ============================================================================ link budget
def link_budget(workloads: Sequence[str] = PAPER_WORKLOADS,
                gpus: Sequence[str] = GPU_GENERATIONS, *, title: str | None = None,
                **make_params: Any) -> Figure:
    """The share of saved activations the host link can hide, per GPU generation (Figure 1).

    For each GPU preset with its own host link, each workload is generated with
    ``slackopt.workloads.make(workload, gpu=gpu)`` and its hideable fraction
    f = min(1, W T_F / A) computed by :mod:`slackopt.linkbudget` (Eq. 1 of the paper).

    Args:
        workloads: workload names (default: the paper's four).
        gpus: GPU preset names in generation order (default: titanx, v100, a100, h100).
        title: figure title.
        **make_params: passed to ``make`` (seq, batch, layers, ...).

    Returns:
        The figure: grouped bars of f (%) per GPU, one bar per workload.

    Raises:
        KeyError: an unknown workload or GPU preset.
    """
    from slackopt.hardware import GPUS
    from slackopt.linkbudget import hideable_fraction
    from slackopt.workloads import make

    vals = np.zeros((len(gpus), len(workloads)))
    links = []
    for i, g in enumerate(gpus):
        for j, w in enumerate(workloads):
            inst = make(w, gpu=g, **make_params)
            vals[i, j] = hideable_fraction(inst)
            if j == 0:
                links.append(inst.link)
    fig = _fig(max(7.0, 1.6 * len(gpus) + 2), 4.4)
    ax = fig.add_subplot()
    width = 0.8 / max(1, len(workloads))
    colors = _colors(list(workloads))
    for j, w in enumerate(workloads):
        xs = np.arange(len(gpus)) + (j - (len(workloads) - 1) / 2) * width
        bars = ax.bar(xs, vals[:, j] * 100, width * 0.95, color=colors[w], label=w)
        ax.bar_label(bars, [f"{v:.0%}" for v in vals[:, j]], fontsize=7, padding=1)
    ticks = []
    for g, lk in zip(gpus, links, strict=True):
        gp = GPUS.get(g)
        dtype = {4: "FP32", 2: "BF16"}.get(gp.dtype_bytes, "") if gp else ""
        flops = f"{gp.peak_flops / 1e12:.0f} TFLOP/s {dtype}" if gp else ""
        bw = (f"{lk.d2h_bytes_per_s / 1e9:.3g} GB/s" if lk.symmetric else
              f"D2H {lk.d2h_bytes_per_s / 1e9:.3g} / H2D {lk.h2d_bytes_per_s / 1e9:.3g} GB/s")
        ticks.append(f"{GPU_LABELS.get(g, g)}\n{flops}\n{lk.name} {bw}")
    ax.set_xticks(np.arange(len(gpus)), ticks, fontsize=8)
    ax.set_xlabel("GPU (peak training FLOP/s) and host link (bandwidth per direction)")
    ax.set_ylabel("hideable fraction f (% of saved bytes)")
    ax.set_ylim(0, 112)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(title="workload", fontsize=8, title_fontsize=8, loc="upper right")
    ax.set_title(title or "Share of saved activations the host link can copy out during the "
                 "forward pass", fontsize=10)
    return fig


def cost_per_byte(instance: Instance, *, by: str = "auto",
                  links: Mapping[str, float] | None = None, title: str | None = None) -> Figure:
    """Recompute cost per byte of each saved tensor against the cost of an exposed copy
    (the paper's Figure 2).

    Each dot is one saved tensor's rho = c / s (rebuild time per byte, ps/B); horizontal
    lines are 1 / W, what a byte costs when its copy is not hidden (W: the H2D bandwidth, the
    copy a stalled backward op waits for), for the instance's link (solid) and the other
    PCIe generations (dotted). Once the link budget is spent,
    a tensor below a line is cheaper to recompute than to copy over that link.

    Args:
        instance: the instance.
        by: "tensor" (one column per saved tensor, named), "category" (one column per
            tensor kind), or "auto" (tensors if there are at most 30, else categories).
        links: {label: bandwidth B/s} of the reference lines (default: PCIe 3.0/4.0/5.0).
        title: figure title.

    Returns:
        The figure (log-scale ps/B).

    Raises:
        SlackoptError: an unknown `by`.
    """
    from slackopt.hardware import LINKS

    if by not in ("auto", "tensor", "category"):
        raise SlackoptError(f"by='{by}' is not auto, tensor or category")
    if by == "auto":
        by = "tensor" if instance.n_saved <= 30 else "category"
    if links is None:
        links = {"PCIe 3.0": LINKS["pcie3"].h2d_bytes_per_s,
                 "PCIe 4.0": LINKS["pcie4"].h2d_bytes_per_s,
                 "PCIe 5.0": LINKS["pcie5"].h2d_bytes_per_s}
    rho = np.asarray(instance.rho, dtype=float) * 1e12
    if by == "tensor":
        cols = list(instance.saved_names)
        col_of = list(range(instance.n_saved))
    else:
        cols = list(dict.fromkeys(instance.saved_categories))
        col_of = [cols.index(c) for c in instance.saved_categories]
    fig = _fig(max(6.5, (0.35 if by == "tensor" else 0.7) * len(cols) + 3), 4.6)
    ax = fig.add_subplot()
    rng = np.random.default_rng(0)
    jitter = 0.0 if by == "tensor" else 0.18
    n_inf = 0
    for i in range(len(cols)):
        v = rho[[k for k in range(instance.n_saved) if col_of[k] == i]]
        fin = v[np.isfinite(v) & (v > 0)]
        n_inf += int((~np.isfinite(v)).sum())
        if fin.size:
            ax.scatter(i + rng.uniform(-jitter, jitter, fin.size), fin, s=18, alpha=0.75,
                       color="#55A868", edgecolors="none")
        else:
            ax.annotate("cannot be\nrebuilt", (i, 0), xycoords=("data", "axes fraction"),
                        xytext=(0, 4), textcoords="offset points", ha="center",
                        va="bottom", fontsize=7, color="#555555")
    ax.scatter([], [], s=18, color="#55A868", label="recompute cost of one saved tensor")
    # A stall waits for an H2D copy: the exposed copy runs at the H2D bandwidth.
    w0 = instance.link.h2d_bytes_per_s
    ax.axhline(1e12 / w0, color="#C44E52", linewidth=1.6,
               label=f"exposed copy on this link ({instance.link.name}, "
                     f"{'' if instance.link.symmetric else 'H2D '}"
                     f"{w0 / 1e9:.3g} GB/s): {1e12 / w0:.3g} ps/B")
    for lab, bw in links.items():
        if abs(bw - w0) / w0 > 1e-9:
            ax.axhline(1e12 / bw, color="#C44E52", linestyle=":", linewidth=1,
                       label=f"exposed copy on {lab} ({bw / 1e9:.3g} GB/s): {1e12 / bw:.3g} ps/B")
    ax.set_yscale("log")
    fin_all = rho[np.isfinite(rho) & (rho > 0)]
    lines = [1e12 / w0] + [1e12 / bw for bw in links.values()]
    lo = min([*fin_all.tolist(), *lines])
    ax.set_ylim(lo / 4, max([*fin_all.tolist(), *lines]) * 2)
    ax.set_xlim(-0.6, len(cols) - 0.4)
    ax.set_xticks(range(len(cols)), [c.replace("_", " ") for c in cols], rotation=30,
                  ha="right", fontsize=8)
    what = "saved tensor" if by == "tensor" else "saved tensor category"
    if n_inf:
        what += (f" ({n_inf} saved tensor{'s' if n_inf > 1 else ''} cannot be rebuilt: "
                 "no dot)")
    ax.set_xlabel(what)
    ax.set_ylabel("cost per byte (ps/B, log scale)")
    ax.grid(axis="y", alpha=0.3, which="both")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=2, fontsize=8,
               frameon=False)
    ax.set_title(title or f"{instance.name}: recomputing a byte vs copying it in the open",
                 fontsize=10)
    return fig


# ============================================================================ bounds
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
    scale, unit = _time_unit(step_s)
    fig = _fig(8.0, 1.3 + 0.42 * len(rows))
    ax = fig.add_subplot()
    ys = np.arange(len(rows))[::-1]
    for y, (_, b) in zip(ys, rows, strict=True):
        gap = (step_s - b) / b
        proven = gap <= 1e-4
        ax.barh(y, b * scale, color="#55A868" if proven else "#4C72B0", height=0.6)
        ax.annotate("reaches the step: optimal" if proven else f"gap {gap:.2%}",
                    (b * scale, y), textcoords="offset points", xytext=(4, 0), va="center",
                    fontsize=8)
    ax.axvline(step_s * scale, color=_C["stall"], linewidth=1.6,
               label=f"{label}: step {_fmt_time(step_s)}")
    ax.axvline(ideal_s * scale, color="black", linestyle=":", linewidth=1.2,
               label=f"ideal step T* = {_fmt_time(ideal_s)}")
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


__all__ = ["FORMATS", "save", "timeline", "memory_profile", "plan_map", "throughput_vs_budget",
           "planning_time_vs_quality", "leaderboard", "link_budget", "cost_per_byte",
           "bound_gaps"]
