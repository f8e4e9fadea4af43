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

The package, by figure family: :mod:`slackopt.plot.step` (timeline, memory profile),
:mod:`slackopt.plot.stages` (a pipeline stage's memory), :mod:`slackopt.plot.plans` (plan
map), :mod:`slackopt.plot.comparisons` (throughput against the budget, planning time
against quality, leaderboard), :mod:`slackopt.plot.link` (link budget, cost per byte),
:mod:`slackopt.plot.bounds` (a plan against each bound), over :mod:`slackopt.plot.trace`
(what they read from a traced evaluation) and :mod:`slackopt.plot.common` (figure, units,
colours, :func:`save`).
"""

from slackopt.plot.bounds import bound_gaps
from slackopt.plot.common import (
    DECISION_COLORS,
    DECISION_LABELS,
    FORMATS,
    GPU_GENERATIONS,
    GPU_LABELS,
    PAPER_WORKLOADS,
    save,
    wrap_title,
)
from slackopt.plot.comparisons import (
    leaderboard,
    pd_notna,
    planning_time_vs_quality,
    throughput_vs_budget,
)
from slackopt.plot.link import cost_per_byte, link_budget
from slackopt.plot.plans import plan_map
from slackopt.plot.stages import stage_memory
from slackopt.plot.step import memory_profile, timeline

__all__ = ["DECISION_COLORS", "DECISION_LABELS", "FORMATS", "GPU_GENERATIONS", "GPU_LABELS",
           "PAPER_WORKLOADS", "save", "timeline", "memory_profile", "plan_map",
           "throughput_vs_budget", "planning_time_vs_quality", "leaderboard", "link_budget",
           "cost_per_byte", "pd_notna", "wrap_title", "stage_memory", "bound_gaps"]
