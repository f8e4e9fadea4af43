"""The explorer: one self-contained HTML page with a budget slider over plans solved in
advance.

:func:`solve_grid` plans an instance with each solver at every budget of a grid (as
:func:`slackopt.solve` does, one call per budget) and simulates each plan with its event
trace; :func:`figure` draws the grid as one Plotly figure whose slider shows one budget at
a time: the step timeline (compute stream, D2H and H2D lanes, stalls and rebuilds, one
group of lanes per solver), the device memory in use against the budget M, and each saved
tensor's decision (keep, swap, recompute) per solver; :func:`page` wraps it in an HTML
page with Plotly's script inlined, so it opens from disk with no server and no network.

The colours and lanes are those of :func:`slackopt.plot.timeline` and
:func:`slackopt.plot.memory_profile` (the paper's Figure 5). Plotly is a dependency of
slackopt; it is imported only here.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from slackopt.errors import SlackoptError
from slackopt.instance import Instance, budget_bytes
from slackopt.plan import KEEP, RECOMP, SWAP, Plan
from slackopt.plot.common import (
    DECISION_COLORS,
    byte_unit,
    fmt_bytes,
    fmt_time,
    time_unit,
    wrap_title,
)
from slackopt.plot.trace import end_s, verdict
from slackopt.simulate import Evaluation

if TYPE_CHECKING:  # pragma: no cover
    import plotly.graph_objects as go

DEFAULT_FRACTIONS = (1.0, 0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6, 0.55, 0.5, 0.45, 0.4,
                     0.35, 0.3, 0.25, 0.2, 0.15, 0.1)
"""The default grid of budgets, as fractions of the keep-all peak P."""
DEFAULT_SOLVERS = ("slackswap",)
"""The solvers an explorer shows when none are named."""
_COLORS = {"fwd": "#4C72B0", "bwd": "#8172B3", "rebuild": "#55A868", "stall": "#C44E52",
           "d2h": "#DD8452", "h2d": "#64B5CD", "budget": "#C44E52", "keep_all": "#999999"}
_KIND_LABELS = {"fwd": "forward operator", "bwd": "backward operator",
                "rebuild": "rebuild (recompute)", "stall": "stall (waiting)",
                "d2h": "D2H copy (offload)", "h2d": "H2D copy (prefetch)"}
_DECISION_NAMES = {KEEP: "keep", SWAP: "swap", RECOMP: "recompute"}
_LINE_COLORS = ("#4C72B0", "#DD8452", "#55A868", "#8172B3", "#937860")


@dataclass(frozen=True)
class Run:
    """One solver's answer at one budget of the grid.

    Attributes:
        solver: the solver's label (its name, with its parameters if any were given).
        status: the SolveResult's status word.
        plan: the plan, or None when the solver returned none.
        evaluation: the plan simulated under the budget with its trace, or None.
        min_budget_bytes: the smallest budget the solver reports reaching (bytes), when it
            returned no plan and says so; else None.
    """

    solver: str
    status: str
    plan: Plan | None
    evaluation: Evaluation | None
    min_budget_bytes: int | None = None


@dataclass(frozen=True)
class Frame:
    """One budget of the grid: its fraction of P, M in bytes, and one :class:`Run` per
    solver (in the order the solvers were given)."""

    fraction: float
    budget_bytes: int
    runs: tuple[Run, ...] = field(default_factory=tuple)


def _spec(spec: str | tuple[str, Mapping[str, Any]]) -> tuple[str, dict[str, Any]]:
    if isinstance(spec, str):
        return spec, {}
    name, params = spec
    return name, dict(params)


def _label(name: str, params: Mapping[str, Any]) -> str:
    from slackopt.solver import solver_label

    return solver_label(name, _canon(params)) if params else name


def _canon(params: Mapping[str, Any]) -> str:
    import json

    return json.dumps(dict(params), sort_keys=True, separators=(",", ":"))


def solve_grid(instance: Instance,
               solvers: Sequence[str | tuple[str, Mapping[str, Any]]] = DEFAULT_SOLVERS,
               fractions: Sequence[float] = DEFAULT_FRACTIONS, *,
               time_limit_s: float | None = None, seed: int | None = 0) -> list[Frame]:
    """Plan `instance` with every solver at every budget and simulate each plan with its
    trace.

    Args:
        instance: the instance.
        solvers: registered solver names, or (name, params) pairs.
        fractions: budgets as fractions of P (each > 0), drawn in the order given.
        time_limit_s: each solve's limit (s), or None.
        seed: each solve's seed (the page is the same for the same seed).

    Returns:
        One :class:`Frame` per fraction, in the order given.

    Raises:
        SlackoptError: no solver, no fraction or a fraction <= 0; an unknown solver or bad
            parameters (:class:`~slackopt.errors.SolverError`), as :func:`slackopt.solve`.
    """
    from slackopt.simulate import simulate
    from slackopt.solver import solve

    if not solvers:
        raise SlackoptError("no solvers given; name at least one (e.g. slackswap)")
    if not fractions:
        raise SlackoptError("no budgets given; give fractions of P such as 0.9,0.7,0.5")
    for f in fractions:
        if not (isinstance(f, (int, float)) and math.isfinite(f) and f > 0):
            raise SlackoptError(f"budget fraction {f!r} is not a number > 0 (a fraction of "
                                "the keep-all peak P, e.g. 0.5)")
    specs = [_spec(s) for s in solvers]
    frames = []
    for f in fractions:
        m = int(budget_bytes(instance, float(f)))
        runs = []
        for name, params in specs:
            res = solve(instance, name, m, time_limit_s=time_limit_s, seed=seed, **params)
            ev = None if res.plan is None else simulate(instance, res.plan, m, trace=True)
            mb = res.info.get("min_budget_bytes") if res.plan is None else None
            runs.append(Run(_label(name, params), res.status, res.plan, ev,
                            int(mb) if isinstance(mb, (int, float)) else None))
        frames.append(Frame(float(f), m, tuple(runs)))
    return frames


# ============================================================================ drawing
def _run_line(run: Run, P: int) -> str:
    """One line for one run: step, throughput, stalls and rebuilds; why the plan does not
    run; or why there is no plan."""
    ev = run.evaluation
    if ev is None:
        low = (f"; smallest budget it reaches {fmt_bytes(run.min_budget_bytes)} "
               f"({run.min_budget_bytes / P:.2f} P)" if run.min_budget_bytes and P else "")
        return f"{run.solver}: no plan ({run.status}{low})"
    if not ev.feasible:
        return f"{run.solver} ({run.status}): {verdict(ev)}"
    stalls = ev.stall_fwd_s + ev.stall_bwd_s
    return (f"{run.solver}: step {fmt_time(ev.step_time_s)} ({ev.throughput:.1%} of ideal), "
            f"stalls {fmt_time(stalls)}, rebuilds {fmt_time(ev.recompute_s)}")


def _bars(ev: Evaluation, phases: Mapping[str, str], scale: float
          ) -> dict[str, tuple[list[float], list[float], list[str]]]:
    """{kind: (starts, widths, hover names)} of one traced evaluation, times in ms."""
    out: dict[str, tuple[list[float], list[float], list[str]]] = {
        k: ([], [], []) for k in _KIND_LABELS}
    for e in ev.trace or ():
        lane = e["lane"]
        if lane == "compute":
            kind = "rebuild" if e.get("rebuild") else phases.get(e["name"], "fwd")
            kind = kind if kind in ("fwd", "bwd", "rebuild") else "fwd"
        elif lane in ("stall", "d2h", "h2d"):
            kind = lane
        else:
            continue
        x0, x1 = e["start_s"] * scale, e["end_s"] * scale
        out[kind][0].append(x0)
        out[kind][1].append(x1 - x0)
        extra = f", {fmt_bytes(e['bytes'])}" if lane in ("d2h", "h2d") else ""
        out[kind][2].append(f"{e['name']}{extra}")
    return out


def _memory(ev: Evaluation) -> tuple[list[float], list[float]]:
    """(times s, bytes) of the memory-in-use samples of a traced evaluation, as a step
    curve (the last sample at a time wins)."""
    samples: dict[float, int] = {}
    for e in ev.trace or ():
        if e["lane"] == "memory":
            samples[e["start_s"]] = e["bytes"]
    xs = [0.0, *samples.keys(), end_s(ev)]
    ys = [0.0, *samples.values()]
    ys.append(ys[-1])
    return xs, ys


@dataclass(frozen=True)
class _Axes:
    """The scales every frame of the explorer shares.

    Attributes:
        solvers: the solvers' labels, in the order of each frame's runs.
        P: the keep-all peak (bytes).
        t_max: the longest step of any run, or T* (s).
        ts, tu: seconds -> display unit factor, and the unit's name.
        b_max: the largest of P, the budgets and the runs' peaks (bytes).
        bs, bu: bytes -> display unit divisor, and the unit's name.
        phases: {op name: phase} of the scheduled ops.
        lanes: the timeline's lanes, three per solver (compute, D2H, H2D).
        names: the saved tensors, in production order.
        sizes: their sizes (bytes).
    """

    solvers: list[str]
    P: int
    t_max: float
    ts: float
    tu: str
    b_max: float
    bs: float
    bu: str
    phases: dict[str, str]
    lanes: list[str]
    names: list[str]
    sizes: np.ndarray


def _axes(instance: Instance, frames: Sequence[Frame]) -> _Axes:
    """The shared scales of `frames` (at least one) on `instance`."""
    solvers = [r.solver for r in frames[0].runs]
    P = int(instance.P)
    t_max = max([instance.ideal_time_s]
                + [end_s(r.evaluation) for f in frames for r in f.runs if r.evaluation])
    ts, tu = time_unit(t_max)
    b_max = max([P] + [f.budget_bytes for f in frames]
                + [r.evaluation.peak_bytes for f in frames for r in f.runs if r.evaluation])
    bs, bu = byte_unit(b_max)
    return _Axes(solvers, P, t_max, ts, tu, b_max, bs, bu,
                 {op.name: op.phase for op in instance.scheduled_ops},
                 [f"{s} {lane}" for s in solvers for lane in ("compute", "D2H", "H2D")],
                 list(instance.saved_names), np.asarray(instance.s, dtype=float))


def _timeline_traces(fig: go.Figure, run: Run, ax: _Axes, visible: bool) -> list[int]:
    """Add one run's bars to the timeline panel (row 1): operators, rebuilds and stalls
    on its compute lane, copies on its D2H and H2D lanes; returns the traces' indices."""
    import plotly.graph_objects as go

    assert run.evaluation is not None
    idx: list[int] = []
    tu = ax.tu
    for kind, (x0, w, hover) in _bars(run.evaluation, ax.phases, ax.ts).items():
        if not x0:
            continue
        lane = {"d2h": "D2H", "h2d": "H2D"}.get(kind, "compute")
        fig.add_trace(go.Bar(
            base=x0, x=w, y=[f"{run.solver} {lane}"] * len(x0), orientation="h",
            marker={"color": _COLORS[kind] if kind != "stall" else "rgba(0,0,0,0)",
                    "line": {"color": _COLORS[kind], "width": 1}
                    if kind == "stall" else {"width": 0},
                    "pattern": {"shape": "/", "fgcolor": _COLORS[kind]}
                    if kind == "stall" else None},
            name=_KIND_LABELS[kind], legendgroup=kind, showlegend=False,
            hovertext=hover, hovertemplate=f"%{{hovertext}}<br>%{{base:.3f}} {tu}"
            f" + %{{x:.3f}} {tu}<extra>{_KIND_LABELS[kind]}</extra>",
            visible=visible), row=1, col=1)
        idx.append(len(fig.data) - 1)
    return idx


def _memory_trace(fig: go.Figure, run: Run, si: int, ax: _Axes, visible: bool) -> int:
    """Add the memory-in-use curve of run `si` to the memory panel (row 2); returns the
    trace's index."""
    import plotly.graph_objects as go

    assert run.evaluation is not None
    xs, ys = _memory(run.evaluation)
    fig.add_trace(go.Scatter(
        x=np.asarray(xs) * ax.ts, y=np.asarray(ys) / ax.bs, mode="lines",
        line={"shape": "hv", "color": _LINE_COLORS[si % len(_LINE_COLORS)],
              "width": 2}, name=f"{run.solver}: in use", showlegend=False,
        hovertemplate=f"%{{x:.3f}} {ax.tu}: %{{y:.4g}} {ax.bu}<extra>{run.solver}</extra>",
        visible=visible), row=2, col=1)
    return len(fig.data) - 1


def _budget_trace(fig: go.Figure, fr: Frame, ax: _Axes, visible: bool) -> int:
    """Add the frame's budget M as a dashed line to the memory panel (row 2); returns the
    trace's index."""
    import plotly.graph_objects as go

    fig.add_trace(go.Scatter(
        x=[0, ax.t_max * ax.ts * 1.01], y=[fr.budget_bytes / ax.bs] * 2, mode="lines",
        line={"color": _COLORS["budget"], "dash": "dash", "width": 2},
        name="budget M", legendgroup="budget", showlegend=False,
        hovertemplate=f"M = {fmt_bytes(fr.budget_bytes)} ({fr.fraction:.2f} P)"
        "<extra></extra>", visible=visible), row=2, col=1)
    return len(fig.data) - 1


def _decision_trace(fig: go.Figure, fr: Frame, ax: _Axes, visible: bool) -> int:
    """Add the frame's map of decisions (solvers x saved tensors, coloured keep, swap,
    recompute; blank where a solver has no plan) to the bottom panel (row 3); returns the
    trace's index."""
    import plotly.graph_objects as go

    names = ax.names
    z = np.full((len(ax.solvers), len(names)), np.nan)
    text = [[""] * len(names) for _ in ax.solvers]
    for si, run in enumerate(fr.runs):
        for k, nm in enumerate(names):
            if run.plan is None:
                text[si][k] = f"{nm}: no plan"
                continue
            d = int(run.plan.decisions[k])
            z[si, k] = d
            text[si][k] = f"{nm} ({fmt_bytes(ax.sizes[k])}): {_DECISION_NAMES[d]}"
    fig.add_trace(go.Heatmap(
        z=z, x=list(range(1, len(names) + 1)), y=ax.solvers, text=text, zmin=-0.5, zmax=2.5,
        colorscale=[[a, DECISION_COLORS[d]] for d in (KEEP, SWAP, RECOMP)
                    for a in (d / 3, (d + 1) / 3)],
        showscale=False, xgap=1, ygap=2, hovertemplate="%{text}<extra>%{y}</extra>",
        visible=visible), row=3, col=1)
    return len(fig.data) - 1


def _frame_traces(fig: go.Figure, fr: Frame, ax: _Axes, visible: bool) -> list[int]:
    """Add every trace of one budget (each run's bars and memory curve, the budget line,
    the decision map); returns their indices, which the slider shows together."""
    idx: list[int] = []
    for si, run in enumerate(fr.runs):
        if run.evaluation is None:
            continue
        idx += _timeline_traces(fig, run, ax, visible)
        idx.append(_memory_trace(fig, run, si, ax, visible))
    idx.append(_budget_trace(fig, fr, ax, visible))
    idx.append(_decision_trace(fig, fr, ax, visible))
    return idx


def _fixed_traces(fig: go.Figure, ax: _Axes) -> list[int]:
    """Add the traces every frame shows (the keep-all peak P, every lane of the timeline,
    the legend's entries); returns their indices."""
    import plotly.graph_objects as go

    fig.add_trace(go.Scatter(x=[0, ax.t_max * ax.ts * 1.01], y=[ax.P / ax.bs] * 2,
                             mode="lines", line={"color": _COLORS["keep_all"], "dash": "dot"},
                             name=f"keep-all peak P = {fmt_bytes(ax.P)}",
                             hoverinfo="skip"), row=2, col=1)
    always = [len(fig.data) - 1]
    fig.add_trace(go.Scatter(x=[0] * len(ax.lanes), y=ax.lanes, mode="markers", opacity=0,
                             showlegend=False, hoverinfo="skip"), row=1, col=1)
    always.append(len(fig.data) - 1)  # every lane drawn, even one without a bar
    for kind, lab in _KIND_LABELS.items():
        fig.add_trace(go.Scatter(
            x=[None], y=[None], mode="markers", name=lab, legendgroup=kind,
            marker={"symbol": "square-open" if kind == "stall" else "square", "size": 12,
                    "color": _COLORS[kind]}), row=2, col=1)
        always.append(len(fig.data) - 1)
    for si, s in enumerate(ax.solvers):
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name=f"{s}: memory in use",
                                 line={"color": _LINE_COLORS[si % len(_LINE_COLORS)],
                                       "width": 2}), row=2, col=1)
        always.append(len(fig.data) - 1)
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name="budget M",
                             line={"color": _COLORS["budget"], "dash": "dash", "width": 2}),
                  row=2, col=1)
    always.append(len(fig.data) - 1)
    for d in (KEEP, SWAP, RECOMP):
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers",
                                 marker={"symbol": "square", "size": 12,
                                         "color": DECISION_COLORS[d]},
                                 name=f"tensor: {_DECISION_NAMES[d]}"), row=3, col=1)
        always.append(len(fig.data) - 1)
    return always


def _slider_steps(frames: Sequence[Frame], titles: Sequence[str],
                  per_frame: Sequence[list[int]], always: list[int], n: int
                  ) -> list[dict[str, Any]]:
    """One slider step per frame: its label (the fraction of P) and the update that shows
    its traces and the fixed ones (of `n` traces in all) under its title."""
    steps = []
    for fi, fr in enumerate(frames):
        vis = [False] * n
        for i in per_frame[fi] + always:
            vis[i] = True
        steps.append({"method": "update", "label": f"{fr.fraction:.2f}",
                      "args": [{"visible": vis}, {"title.text": titles[fi]}]})
    return steps


def _default_active(frames: Sequence[Frame]) -> int:
    """The frame nearest 0.5 P among those where the first solver's plan runs (among all
    frames when there are none)."""
    runs = [i for i, f in enumerate(frames)
            if f.runs[0].evaluation is not None and f.runs[0].evaluation.feasible]
    return min(runs or range(len(frames)), key=lambda i: abs(frames[i].fraction - 0.5))


def _layout(fig: go.Figure, instance: Instance, ax: _Axes, titles: Sequence[str],
            steps: list[dict[str, Any]], active: int) -> None:
    """Lay out the figure: the title of frame `active`, the slider over `steps`, the
    legend, the axes' ranges and titles, the ideal step T* as a dotted line."""
    lines = max(t.count("<br>") + 1 for t in titles)
    n_solvers = len(ax.solvers)
    fig.update_layout(
        title={"text": titles[active], "x": 0.01, "xanchor": "left", "font": {"size": 13},
               "yref": "container", "y": 1.0, "yanchor": "top", "pad": {"t": 10}},
        barmode="overlay", bargap=0.25, height=760 + 90 * n_solvers + 17 * lines,
        margin={"l": 120, "r": 20, "t": 130 + 17 * lines, "b": 130},
        legend={"orientation": "h", "y": -0.07, "yanchor": "top", "x": 0,
                "font": {"size": 11}},
        sliders=[{"active": active, "steps": steps, "x": 0, "len": 1.0, "y": 1.0,
                  "yanchor": "bottom", "pad": {"t": 0, "b": 45},
                  "currentvalue": {"prefix": "budget M = ", "suffix": " x P (move the slider)",
                                   "font": {"size": 13}}}],
        modebar={"orientation": "v"}, template="plotly_white")
    x_range = [0, ax.t_max * ax.ts * 1.01]
    fig.update_xaxes(range=x_range, row=1, col=1)
    fig.update_xaxes(range=x_range, row=2, col=1, title_text=f"time since the start of the "
                     f"step ({ax.tu})")
    fig.update_yaxes(categoryorder="array", categoryarray=ax.lanes[::-1], row=1, col=1)
    fig.update_yaxes(range=[0, ax.b_max / ax.bs * 1.08], title_text=f"memory ({ax.bu})",
                     row=2, col=1)
    fig.update_xaxes(title_text=f"decision per saved tensor, in production order (1 to "
                     f"{len(ax.names)}; hover for its name and size)",
                     row=3, col=1, showgrid=False)
    fig.update_yaxes(row=3, col=1, showgrid=False)
    for x in (instance.ideal_time_s,):
        fig.add_vline(x=x * ax.ts, line={"color": "black", "dash": "dot", "width": 1},
                      row=1, col=1)


def figure(instance: Instance, frames: Sequence[Frame], *, active: int | None = None
           ) -> go.Figure:
    """The explorer's figure: a slider over `frames`, three panels per budget.

    Panels: the step timeline (per solver a compute lane, a D2H lane and an H2D lane;
    forward and backward operators, rebuilds, stalls and copies as bars with their task
    or tensor in the hover text), the device memory in use per solver against M and the
    keep-all peak P, and a map of the saved tensors (columns, in production order) by
    solver (rows) coloured by decision. Moving the slider shows another budget's traces
    and title (one line per solver: step, throughput, stalls and rebuilds, or why there is
    no step).

    Args:
        instance: the instance the frames were solved for.
        frames: from :func:`solve_grid` (at least one).
        active: the index of the frame shown first (default: the one nearest 0.5 P among
            those where the first solver's plan runs, else among all).

    Returns:
        A ``plotly.graph_objects.Figure``.

    Raises:
        SlackoptError: no frames.
    """
    from plotly.subplots import make_subplots

    if not frames:
        raise SlackoptError("no frames to draw: solve_grid() returned none")
    ax = _axes(instance, frames)
    n_solvers = len(ax.solvers)
    fig = make_subplots(rows=3, cols=1, vertical_spacing=0.1,
                        row_heights=[0.22 + 0.1 * n_solvers, 0.4, 0.12 + 0.06 * n_solvers],
                        subplot_titles=(f"Step timeline ({ax.tu}): compute stream, D2H and "
                                        "H2D copy engines",
                                        "Device memory in use against the budget M", ""))
    per_frame = [_frame_traces(fig, fr, ax, fi == 0) for fi, fr in enumerate(frames)]
    always = _fixed_traces(fig, ax)
    n = len(fig.data)
    titles = [_title(instance, fr) for fr in frames]
    steps = _slider_steps(frames, titles, per_frame, always, n)
    if active is None:
        active = _default_active(frames)
    for i in range(n):
        fig.data[i].visible = steps[active]["args"][0]["visible"][i]
    _layout(fig, instance, ax, titles, steps, active)
    return fig


def _title(instance: Instance, fr: Frame) -> str:
    head = (f"{html.escape(instance.name)} under M = {fmt_bytes(fr.budget_bytes)} "
            f"({fr.fraction:.2f} P); ideal step T* = {fmt_time(instance.ideal_time_s)} "
            "(dotted line)")
    runs = [wrap_title(_run_line(r, int(instance.P)), 100) for r in fr.runs]
    return "<br>".join([f"<b>{head}</b>"] + [html.escape(r).replace("\n", "<br>   ")
                                             for r in runs])


INTRO = """<p>Each saved activation of one training step is <b>kept</b> on the GPU,
<b>swapped</b> to host memory (an offload, D2H, after it is made and a prefetch, H2D, before
the backward pass reads it) or <b>recomputed</b> (dropped, then rebuilt by re-running its
producer). Move the slider to change the memory budget M: the timeline shows where the
compute stream waits for a copy (hatched red) or rebuilds a tensor (green), the middle panel
the memory in use against M, and the bottom row which decision each tensor gets.</p>"""


def page(instance: Instance, frames: Sequence[Frame], *, title: str | None = None,
         active: int | None = None) -> str:
    """The explorer as one HTML document: a heading, a paragraph that says what to look
    at, and :func:`figure` with Plotly's script inlined (no server, no network).

    Args:
        instance: the instance.
        frames: from :func:`solve_grid`.
        title: the page's title (default: "slackopt explorer: " and the instance name).
        active: the index of the frame shown first (default: :func:`figure`'s).

    Returns:
        The HTML text (UTF-8; about 5 MB, most of it Plotly's script).

    Raises:
        SlackoptError: no frames.
    """
    fig = figure(instance, frames, active=active)
    body = fig.to_html(full_html=False, include_plotlyjs=True, div_id="explorer",
                       config={"displaylogo": False, "responsive": True})
    title = title or f"slackopt explorer: {instance.name}"
    solvers = ", ".join(r.solver for r in frames[0].runs)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 0.8em 1.2em; color: #222; }}
h1 {{ font-size: 1.3em; margin: 0.2em 0; }}
p {{ max-width: 62em; line-height: 1.4; margin: 0.4em 0; }}
</style>
</head>
<body>
<h1>{html.escape(title)}</h1>
{INTRO}
<p>Solvers: {html.escape(solvers)}; {len(frames)} budgets from {min(f.fraction for f in frames):.2f}
to {max(f.fraction for f in frames):.2f} of the keep-all peak P = {fmt_bytes(instance.P)},
each plan solved in advance and scored by slackopt's evaluator.</p>
{body}
</body>
</html>
"""


def write_page(path: str | Path, text: str) -> Path:
    """Write an explorer page (UTF-8); replaces an existing file (the command line checks
    first: :func:`slackopt.io.outputs.check_output`).

    Raises:
        FileFormatError: the file cannot be written.
    """
    from slackopt.errors import FileFormatError

    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    except OSError as e:
        raise FileFormatError(p, "", f"cannot be written ({e.strerror or e})",
                              "check that the directory is writable") from None
    return p


__all__ = ["DEFAULT_FRACTIONS", "DEFAULT_SOLVERS", "Frame", "Run", "figure", "page",
           "solve_grid", "write_page"]
