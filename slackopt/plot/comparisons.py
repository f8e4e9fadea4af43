"""The figures of a comparison table (:func:`slackopt.compare.compare`) and of a benchmark
leaderboard: throughput against the budget (the paper's Figure 4), planning time against
plan quality, the leaderboard."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from slackopt.errors import SlackoptError
from slackopt.plot.common import figure, label_colors, line_styles

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


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
    color = label_colors(labels)
    dash = line_styles(labels)
    x_step = min(3.0, 14.0 / max(1, len(labels)))
    n = len(names)
    if ncols is None:
        ncols = 2 if n == 4 else min(n, 3)
    nrows = math.ceil(n / ncols)
    fig = figure(4.6 * ncols + 0.4, 3.4 * nrows + 0.9)
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
    color = label_colors(labels)
    hollow = {lab: i >= 10 for i, lab in enumerate(labels)}  # solvers 11-20: hollow markers
    names = list(dict.fromkeys(d["instance"].astype(str)))
    markers = dict(zip(names, "osD^vP*Xh<>" * 4, strict=False))
    feasible = d["feasible"].astype(bool)
    ok = d[feasible & d[quality].notna() & (d["planning_time_s"] > 0)]
    fig = figure(7.5, 4.6)
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
    color = label_colors(labels)
    fig = figure(7.5, 4.6)
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
