"""The timing bound: a certified lower bound on the step time of every plan from the
timing model (:mod:`~slackopt.solvers.milp.bounds.timing_model`: the model and why every
run of the barrier-free runtime is a point of it). :func:`timing_bound` solves its LP
relaxation (a safe dual bound), SCIP's MILP for candidate plans and an uncertified bound,
then the certified branch and bound with the time left; :class:`TimingLP` and
:class:`TimingMILP` are its two phases in the search.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from slackopt.instance import Instance
from slackopt.plan import RECOMP, SWAP
from slackopt.solver import OPTIMAL_REL_TOL
from slackopt.solvers.milp.bounds.source import BoundContext, BoundValue
from slackopt.solvers.milp.bounds.timing_model import build_timing_model
from slackopt.solvers.milp.certify.lp import lp_relaxation
from slackopt.solvers.milp.certify.safe_lp import seconds_below
from slackopt.solvers.milp.linear.backends import _ScipBackend
from slackopt.solvers.milp.linear.lin import _INF, ModelTimeout, _Lin

MAX_UNITS = 6_000
"""Every op of K is timed when ``n_saved * |K|`` (absent-able pairs, at most) is at most
this; beyond, the ops with the largest excess, as many as fit."""
MIN_OPS = 4
"""Fewest ops timed: below, the instance is too large for this bound."""
SCIP_SHARE = 0.5
"""Share of the time left after the LP relaxation that the SCIP solves (candidate plans,
uncertified bound) may use; the certified branch and bound (solvers/milp/certify/certified_bb.py)
gets the rest."""
BB_STRONG = 8
"""Strong-branching candidates of the certified branch and bound (they raise the bound in
fewer nodes than the most fractional binary: docs/bounds.md, "Settings and the
measurements behind them")."""


class _BoundScip(_ScipBackend):
    """SCIP for the timing MILP: no cutting-plane rounds (the search closes sooner without
    them: docs/bounds.md, "Settings and the measurements behind them")."""

    scip_params = "separating/maxrounds = 0\nseparating/maxroundsroot = 0\n"


def timing_bound(inst: Instance, M: int, time_limit_s: float = 30.0, *,
                 deadline: float | None = None, integer: bool = True, seed: int = 0,
                 upper_s: float | None = None, max_units: int = MAX_UNITS,
                 lp_value: float | None = None) -> tuple[float | None, dict]:
    """A certified lower bound (s) on the step time of every plan that the barrier-free
    runtime runs under budget `M` (bytes): T* plus the certified bound of the LP
    relaxation of the timing model (:mod:`~.timing_model`; :func:`lp_relaxation`: a safe dual
    bound from the LP solver's duals, Neumaier and Shcherbina 2004). The MILP itself is
    then solved with SCIP for candidate plans (within ``SCIP_SHARE`` of the time left);
    its proven dual bound is not certified (SCIP's LP solves are not checked) and is
    reported as ``info["milp_bound_s"]`` only. With the rest of the time, a certified
    branch and bound (solvers/milp/certify/certified_bb.py: every node bound a safe dual bound)
    raises the bound when it can (``bb_*`` in info, :func:`_certified_bb_stage`).

    Args:
        inst: the instance.
        M: budget (bytes).
        time_limit_s: wall-clock limit for building and solving (s).
        deadline: perf_counter time after which nothing new starts (then the bound found
            so far, or None).
        integer: solve the MILP (SCIP, one thread, seed `seed`); else the LP only.
        seed: SCIP's random seed (the bound is valid whatever it is).
        upper_s: the step time (s) of a plan that runs, if one is known: the MILP then
            only looks for assignments below it (every plan is either at least as slow
            or satisfies the cut model); the bound is at most `upper_s`, and
            ``milp_bound_s`` is `upper_s` when SCIP finds no assignment left.
        max_units: when ``n_saved * |K| > max_units`` (|K|: ops with a keep-all excess
            over M), time only the ``max_units // n_saved`` ops with the largest excess
            (none, and no bound, when that is under ``MIN_OPS``).
        lp_value: ``info["lp_bound"]`` of an earlier call with the same `inst`, `M` and
            `max_units` (the certified LP bound, model units): the LP is not solved again
            (the search's "timing_lp" phase solves it before the large-neighbourhood
            search, this call's MILP stages after it).

    Returns:
        (certified bound in s or None, info: ``ops_timed``, model size, ``lp_status``,
        ``lp_objective`` (the LP solver's optimum, model units, uncertified),
        ``lp_bound`` (its certified bound, model units), ``milp_bound_s`` (T* plus
        SCIP's dual bound of the MILP, or `upper_s` when SCIP proves the model with the
        cut infeasible: UNCERTIFIED, with ``milp_bound_certified`` False; absent when
        SCIP proved nothing), ``status`` (the MILP's), ``seconds``, why it stopped, and
        ``candidates``: the plans read
        from the best assignment of each MILP solve that ended (proven optimal for the
        model; a solve cut by its time limit gives none, so that the list does not
        depend on the limit), in solve order, :func:`_decisions`). The
        bound is never below T*; None when the instance has views, is too large, or
        nothing finished in time.
    """
    t0 = time.perf_counter()
    end = t0 + float(time_limit_s)
    if deadline is not None:
        end = min(end, deadline)
    info: dict = {}
    T_star = float(inst.ideal_time_s)
    keep = np.asarray(inst.keep_all_profile, dtype=np.int64)
    nK = int((keep > M).sum()) if keep.size else 0
    if nK == 0:
        info.update(seconds=0.0, status="no op exceeds M")
        return (T_star if inst.n_ops else None), info
    max_ops = None
    if inst.n_saved * nK > max_units:
        max_ops = max_units // max(1, inst.n_saved)
        if max_ops < MIN_OPS:
            info.update(seconds=0.0, status=f"too large: {inst.n_saved} saved tensors")
            return None, info
        info["ops_left_out"] = nK - max_ops
    if time.perf_counter() >= end:
        info.update(seconds=0.0, status="no time left to build the model")
        return None, info
    try:
        built = build_timing_model(inst, M, integer=integer, max_ops=max_ops, deadline=end)
    except ModelTimeout as e:
        info.update(seconds=time.perf_counter() - t0, status=str(e))
        return None, info
    if built is None:
        info.update(seconds=time.perf_counter() - t0, status="no model (views or no tensor)")
        return None, info
    lin, minfo = built
    lin_x = lin                             # binary xs, xr: the certified B&B's model
    info.update(minfo, candidates=[])
    tu = float(minfo["time_unit_s"])        # the model's time unit (checkpoint.time_unit)
    val: float | None = None
    cut = None
    if upper_s is not None and np.isfinite(upper_s):
        cut = max(0.0, (float(upper_s) - T_star) / tu) * (1.0 + 1e-9)
    acc: dict[str, float | None] = {"milp_val": None, "scip_obj": None}
    try:
        val = _lp_stage(lin, lp_value, t0, end, info)
        _scip_stages(inst, M, lin, max_ops, integer, seed, cut, end, info, acc)
    except ModelTimeout as e:
        info.update(status=str(e))
    milp_val, scip_obj = acc["milp_val"], acc["scip_obj"]
    if integer:
        val = _certified_bb_stage(lin_x, val, cut if cut is not None else scip_obj,
                                  T_star / tu, end, info)
    info["seconds"] = time.perf_counter() - t0
    if milp_val is not None:
        mb = max(T_star, seconds_below(T_star, milp_val, tu))
        info["milp_bound_s"] = min(mb, float(upper_s)) if cut is not None else mb
        info["milp_bound_certified"] = False
    if val is None:
        return None, info
    # val is certified (model units; the LP has no cutoff row, so nothing caps it: a
    # bound above `upper_s` would be an error for the caller to catch, never clamped)
    return max(T_star, seconds_below(T_star, val, tu)), info


def _lp_stage(lin: _Lin, lp_value: float | None, t0: float, end: float,
              info: dict) -> float | None:
    """The certified bound (model units) of the timing model's LP relaxation: `lp_value`
    when an earlier call gave it, else :func:`lp_relaxation` before the perf_counter time
    `end` (GLOP, faster than SCIP's LP solver: docs/bounds.md; else HiGHS, since GLOP
    stops on the big-M rows of chain63 at 0.7 P as ABNORMAL and calls the LP of case
    timing_bound_above_opt infeasible). A bound even when the MILP search ends before
    its root; certified from the duals, never the solver's objective. Fills
    ``lp_status``, ``lp_objective``, ``lp_seconds`` (since `t0`) and ``lp_bound``."""
    if lp_value is None:
        lpi: dict = {}
        val, _ = lp_relaxation(lin, max(0.05, end - time.perf_counter()), deadline=end,
                               info=lpi)
        info["lp_status"] = f"{lpi.get('lp_status')} ({lpi.get('lp_solver')})"
        info["lp_objective"] = lpi.get("lp_objective")
        info["lp_seconds"] = round(time.perf_counter() - t0, 3)
    else:
        val = float(lp_value)
        info["lp_status"] = "given (an earlier call's certified bound)"
    info["lp_bound"] = val
    return val


def _scip_stages(inst: Instance, M: int, lin: _Lin, max_ops: int | None, integer: bool,
                 seed: int, cut: float | None, end: float, info: dict,
                 acc: dict[str, float | None]) -> None:
    """SCIP's solves of the timing MILP within ``SCIP_SHARE`` of the time left (one thread,
    `seed`, cut off at `cut` model units when a plan is known): first with binary xs, xr,
    then, with the time left, with binary z too, whose best assignment is a plan far more
    often. SCIP's dual bound (and its infeasibility proof under the
    cut) cannot be certified from duals: it goes to ``acc["milp_val"]`` (model units) for
    ``info["milp_bound_s"]`` only, never the bound; ``acc["scip_obj"]`` is the first
    MILP's optimum (a cutoff only). The plans of the assignments of the solves that ended
    are appended to ``info["candidates"]``; a solve cut by its limit gives none, so a
    longer limit returns the same candidates and appends to them (the solver's anytime
    rule). Stops with :class:`ModelTimeout` past `end`, `acc` keeping what was found."""
    scip_end = time.perf_counter() + SCIP_SHARE * (end - time.perf_counter())
    for stage, zint in (("status", False), ("status_z", True)):
        if not integer or scip_end - time.perf_counter() <= 0.5:
            break
        milp_val = acc["milp_val"]
        if zint and cut is not None and milp_val is not None and \
                milp_val >= cut * (1.0 - OPTIMAL_REL_TOL):
            break       # the known plan is proven optimal: no plan to look for
        if zint:
            lin = build_timing_model(inst, M, max_ops=max_ops, z_binary=True,
                                     deadline=end)[0]
        be = _BoundScip(lin, threads=1, seed=seed, rel_gap=0.0, deadline=end)
        if cut is not None:
            be.add_row([(j, 1.0) for j, cj in enumerate(lin.obj) if cj], -_INF, cut)
        sol = be.solve(max(0.05, scip_end - time.perf_counter()), None)
        info[stage] = sol.status
        if sol.status == "infeasible":
            if cut is not None:
                acc["milp_val"] = cut      # SCIP says every plan is at least upper_s
            break
        if sol.bound is not None:
            acc["milp_val"] = sol.bound if milp_val is None else max(milp_val, sol.bound)
        if not zint and sol.status == "optimal":
            acc["scip_obj"] = sol.objective
        if sol.x is not None and sol.status == "optimal":
            seen = {d.tobytes() for d in info["candidates"]}
            info["candidates"] += [d for d in _decisions(inst, lin, sol.x)
                                   if d.tobytes() not in seen]


def _certified_bb_stage(lin: _Lin, val: float | None, cut: float | None, t_star: float,
                        end: float, info: dict) -> float | None:
    """The certified branch and bound (:func:`~.certified_bb.certified_milp_bound`,
    ``BB_STRONG`` strong-branching candidates) on the model with binary xs, xr, within
    the time left (perf_counter `end`): returns the larger of `val` (the certified LP
    bound, or None) and its bound, both certified lower bounds on the MILP optimum
    (model units), so on every plan's ``T - T*``.

    `cut` (model units): the known plan's value, or SCIP's optimum of the MILP (not
    certified: it only decides where the search stops, never the bound), or None; nodes
    within half of ``OPTIMAL_REL_TOL`` of the step ``t_star + cut`` (`t_star`: T* in
    model units) are not branched, so a closed search proves the plan optimal to the
    search's rule. Skipped when `val` already reaches that. Fills ``bb_nodes``,
    ``bb_bound`` (model units, or None), ``bb_closed`` (the search ended: its bound is the
    MILP optimum or reaches the cutoff), ``bb_stopped``, ``bb_seconds``."""
    from slackopt.solvers.milp.certify.certified_bb import certified_milp_bound

    stop = None
    if cut is not None and math.isfinite(cut):
        stop = cut - 0.5 * OPTIMAL_REL_TOL * (t_star + cut)
        if val is not None and val >= stop:
            info["bb_stopped"] = "the LP bound reaches the cutoff"
            return val
    if end - time.perf_counter() <= 0.05:
        info["bb_stopped"] = "no time left"
        return val
    bb, bi = certified_milp_bound(lin, end - time.perf_counter(), cutoff=stop, deadline=end,
                                  strong=BB_STRONG)
    info.update(bb_nodes=bi["nodes"], bb_bound=bb, bb_closed=bi["closed"],
                bb_stopped=bi["stopped"], bb_seconds=round(bi["seconds"], 3))
    if bb is None:
        return val
    return bb if val is None else max(val, bb)


def _decisions(inst: Instance, lin: _Lin, x: list[float]) -> list[np.ndarray]:
    """The plans of an assignment (int8 [n_saved] each, distinct): recomp where xr = 1;
    swap where xs = 1 and some z >= 0.5 (a swap never counted absent only pays for
    copies), else keep; and the plan with every xs = 1 a swap."""
    by_z = np.zeros(inst.n_saved, dtype=np.int8)
    by_xs = np.zeros(inst.n_saved, dtype=np.int8)
    for j, nm in enumerate(lin.names):
        if x[j] > 0.5 and nm.startswith("z"):
            by_z[int(nm[1:].split("_")[0])] = SWAP
        elif x[j] > 0.5 and nm.startswith("xs"):
            by_xs[int(nm[2:])] = SWAP
    for j, nm in enumerate(lin.names):
        if x[j] > 0.5 and nm.startswith("xr"):
            by_z[int(nm[2:])] = by_xs[int(nm[2:])] = RECOMP
    by_z = np.where(by_xs == SWAP, by_z, by_xs).astype(np.int8)
    return [by_z] + ([by_xs] if not np.array_equal(by_z, by_xs) else [])


@dataclass(frozen=True)
class TimingLP:
    """The timing model's LP relaxation as a bound source (phase "timing_lp"): certified
    bound ``timing_lp``, within `share` of the time left less 0.3 s. It does not depend
    on the incumbent; its certified value (model units, ``model_value``) is reused by
    :class:`TimingMILP`."""

    share: float
    name: str = "timing_lp"
    stages: bool = False  # its rows read one forward pass then one backward pass
    single_pass: bool = True

    def __call__(self, inst: Instance, M: int, ctx: BoundContext) -> BoundValue:
        tt = time.perf_counter()
        tb, tinfo = timing_bound(inst, M, self.share * (ctx.left() - 0.3),
                                 deadline=ctx.deadline - 0.3, integer=False)
        return BoundValue(
            bounds={"timing_lp": tb}, model_value=tinfo.get("lp_bound"),
            info={"timing_lp": {"bound_s": tb, "seconds": round(time.perf_counter() - tt, 4),
                                "status": tinfo.get("status", tinfo.get("lp_status")),
                                "ops_timed": tinfo.get("ops_timed")}})


@dataclass(frozen=True)
class TimingMILP:
    """The timing MILP as a bound source (phase "timing_bound"), within `share` of the
    time left less 0.3 s: its LP relaxation's certified bound (from the "timing_lp"
    phase when that ended) raised by the certified branch and bound, as ``timing_lp``;
    SCIP's dual bound as the uncertified ``timing_milp``; the plans of its SCIP solves
    that ended, in solve order. Cut off at the incumbent's step."""

    share: float
    name: str = "timing_bound"
    stages: bool = False  # its rows read one forward pass then one backward pass
    single_pass: bool = True

    def __call__(self, inst: Instance, M: int, ctx: BoundContext) -> BoundValue:
        tt = time.perf_counter()
        lp = ctx.earlier.get("timing_lp")
        tb, tinfo = timing_bound(inst, M, self.share * (ctx.left() - 0.3),
                                 deadline=ctx.deadline - 0.3, seed=ctx.seed,
                                 upper_s=ctx.upper_s,
                                 lp_value=lp.model_value if lp is not None else None)
        return BoundValue(
            bounds={"timing_lp": tb}, uncertified={"timing_milp": tinfo.get("milp_bound_s")},
            plans=list(tinfo.get("candidates", [])),
            info={"timing_bound": {"bound_s": tb,
                                   "seconds": round(time.perf_counter() - tt, 4),
                                   "status": tinfo.get("status"),
                                   "milp_bound_s": tinfo.get("milp_bound_s")}})
