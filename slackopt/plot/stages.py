"""The figure of a pipeline stage: device memory over its whole schedule, keep-all against
each plan, the units (F, B, W per microbatch) marked (docs/model.md, "A pipeline stage")."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

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
from slackopt.plot.trace import end_s, evaluations_by_label, memory_samples, need_trace, verdict
from slackopt.simulate import Evaluation

_UNIT_COLORS = {"F": COLORS["fwd"], "B": COLORS["bwd"], "W": "#937860"}
_UNIT_WORDS = {"F": "forward unit (F)", "B": "backward unit (B)",
               "W": "weight-gradient unit (W)"}


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
    tasks = [e for e in need_trace(ev, "stage_memory") if e["lane"] == "compute"]
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

    evs = evaluations_by_label(evaluation)
    t_max = max([instance.ideal_time_s, *(end_s(e) for e in evs.values())])
    ts, tu = (1.0, "s") if t_max >= 2.0 else time_unit(t_max)
    b_max = max([instance.P, *(max(e.budget_bytes, e.peak_bytes) for e in evs.values())])
    bs, bu = byte_unit(b_max)
    rows = {"ideal schedule": _unit_spans(instance, None)}
    for label, ev in evs.items():
        rows[f"{label or 'plan'} (as run)"] = _unit_spans(instance, ev)
    fig = figure(width, 4.6 + 0.32 * len(rows))
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
                color=COLORS["keep_all"], linewidth=1, label="keep everything (ideal schedule, "
                "no budget)")
        k = int(np.argmax(instance.keep_all_profile))
        u = int(instance.op_unit[k])
        live = in_flight(instance)  # after each unit; during a unit, the larger of
        held = int(max(live[u], live[u - 1] if u else 0))  # before and after it
        ax.axhline(instance.P / bs, color=COLORS["peak"], linestyle=":", linewidth=1,
                   label=f"keep-all peak P = {fmt_bytes(instance.P)}")
        what = ("microbatch-chunk passes" if any(x.chunk for x in instance.units)
                else "microbatches" if held != 1 else "microbatch")
        ax.annotate(f"keep-all peak: {held} {what} in flight",
                    (instance.start_s[k] * ts, instance.P / bs), xytext=(8, 6),
                    textcoords="offset points", fontsize=8, color=COLORS["peak"])
    colors = ["#4C72B0", "#DD8452", "#55A868", "#8172B3", "#937860"]
    for i, (label, ev) in enumerate(evs.items()):
        xs, ys = memory_samples(ev, "stage_memory")
        how = (f"peak {fmt_bytes(ev.peak_bytes)}" if ev.feasible
               else f"infeasible, stopped at {fmt_time(end_s(ev))}")
        ax.step(xs * ts, ys / bs, where="post", color=colors[i % len(colors)], linewidth=1.3,
                label=f"{label or 'this plan'}: in use ({how})")
    for m in sorted({ev.budget_bytes for ev in evs.values()}):
        ax.axhline(m / bs, color=COLORS["budget"], linestyle="--", linewidth=1.3,
                   label=f"budget M = {fmt_bytes(m)}")
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
            title += (f"; plan of {label}" if label else "") + f": {verdict(ev0)}"
    fig.suptitle(wrap_title(title, int(width * 11)), fontsize=10)
    return fig
