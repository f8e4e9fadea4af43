"""A plan's simulated trace as a point of the time-indexed model (solvers/milp/model/).

The docstring of :mod:`slackopt.solvers.milp.model` ("Why the optimum is a lower bound")
argues that for every plan the evaluator runs to the end, setting the model's variables to
what the plan's trace shows gives a feasible point whose objective is the plan's step time
T. :func:`point_from_trace` builds that point, so the argument can be checked row by row on
every plan (tests/test_milp_point.py): a row the point violates is a row that cuts off a
real run of the runtime, and :meth:`~slackopt.solvers.milp.linear.lin._Lin.violations` names it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from slackopt.instance import Instance
from slackopt.plan import RECOMP, SWAP, Plan
from slackopt.simulate import Evaluation, TaskList, simulate
from slackopt.simulate.rules import copy_time
from slackopt.solvers.milp.certify.runpoint import copy_events
from slackopt.solvers.milp.model.builder import _Model


def _shares(lo: float, hi: float, steps: Sequence[tuple[float, float]]) -> list[float]:
    """Per step, the overlap of the busy interval [lo, hi] (s) with the step's interval
    divided by hi - lo (a copy's share of each step)."""
    d = hi - lo
    out = []
    for a, b in steps:
        ov = min(hi, b) - max(lo, a)
        out.append(ov / d if ov > 0.0 and d > 0.0 else 0.0)
    return out


def _set_cum(x: list[float], D: dict[int, int], per_step: Sequence[float]) -> None:
    """Set the cumulative variables ``D[K]`` (step -> variable) to the running sums of
    `per_step` through K (from step 0, so a share before D's first step is included)."""
    acc = 0.0
    run = []
    for v in per_step:
        acc += v
        run.append(acc)
    for K, j in D.items():
        x[j] = run[K]


def point_from_trace(model: _Model, inst: Instance, plan: Plan, M: int,
                     evaluation: Evaluation | None = None) -> list[float]:
    """The point of `model` that the simulated run of `plan` defines.

    Args:
        model: the model, built by :func:`~slackopt.solvers.milp.model.builder.build_model` on
            `inst` (on ``inst.lowered`` when `inst` has views) at budget `M`.
        inst: the instance.
        plan: a barrier-free plan for `inst`.
        M: the budget (bytes), the one the model was built with.
        evaluation: ``slackopt.simulate(inst, plan, M, trace=True)`` if already at hand
            (it must carry the trace); simulated here otherwise.

    Returns:
        One value per model variable (model units: microseconds, P / 1e4 bytes), set as
        the model docstring's argument says: decisions and rebuild positions as the plan
        and its task list have them; ``tau_K`` the length of step K's interval ``[E(a_K -
        1), E(b_K))`` (E = end of an op in the trace), so the objective is T in model
        units; a swap lags when its first backward read finds the device copy (no H2D of it
        started before that read: its D2H had not ended, or it was dropped); each copy's
        share of a step is the overlap of its busy interval with the step divided by its
        duration (a lagging D2H's in ``L``, a non-lagging one's in ``F``); ``Dn`` = the
        D2H (not lagging) has ended by the end of the step; ``gamma`` = it ended in the gap
        before the step's op (after the previous op ended, no later than the op's start);
        only H2D copies that served a read are counted (``H`` shares, ``Sg`` started
        before the end of the step) and only evictions of a copy that served a read
        (``E``, by the end of the step); ``phi`` = a counted H2D has started. The
        auxiliary variables follow: those defined by an equality row take its value, the
        FIFO chain ``P`` the largest value its own rows allow, ``om`` the smallest.
        Events at a step boundary belong to the later step (the gap before an op belongs
        to the op's step) except a D2H or H2D that ends exactly at the boundary.

    Raises:
        ValueError: the plan is infeasible at `M` (no trace to map), the evaluation has no
            trace, or the model has no variable map.

    Source: solvers/milp/model/__init__.py ("Why the optimum is a lower bound").
    """
    vm = model.vmap
    if not vm:
        raise ValueError("the model carries no variable map (build it with build_model)")
    if inst.saved_unit is not None:
        plan = plan.lowered(inst)
        inst = inst.lowered
    if evaluation is None:
        evaluation = simulate(inst, plan, M, trace=True)
    if not evaluation.feasible:
        raise ValueError(f"the plan is infeasible at M = {M}: {evaluation.failure}")
    if evaluation.trace is None:
        raise ValueError("the evaluation has no trace: simulate with trace=True")
    p = _TracePoint(model, inst, np.asarray(plan.decisions).tolist(), evaluation)
    p.decisions()
    d2h, h2d, evict = copy_events(inst, evaluation)
    p.in_flight_d2h(d2h)
    for t in range(inst.n_saved):
        if p.dec[t] != SWAP or p.s[t] <= 0 or not p.tl.need[t]:
            continue
        p.swap(t, d2h.get(t), h2d.get(t, []), evict.get(t, []))
    # ---- auxiliary variables, in creation order (each reads only earlier ones)
    _set_aux(model, p.x)
    return p.x


class _TracePoint:
    """The point :func:`point_from_trace` builds, section by section: the compute stream
    of the trace (one event per task, in task order), the steps' intervals and the point
    ``x`` (model units) filled so far."""

    def __init__(self, model: _Model, inst: Instance, dec: list[int],
                 evaluation: Evaluation) -> None:
        """`inst` without views, `dec` the plan's decisions, `evaluation` its traced run."""
        self.model, self.vm, self.inst, self.dec = model, model.vmap, inst, dec
        self.evaluation = evaluation
        self.x = [0.0] * model.lin.n_vars
        self.s = np.asarray(inst.s, dtype=np.int64).tolist()
        # ---- the compute stream: one trace event per task, in task order
        self.tl = tl = TaskList(inst, np.asarray(dec, dtype=np.int8))
        comp = [e for e in evaluation.trace if e["lane"] == "compute"]
        if len(comp) != len(tl.task_op):
            raise ValueError("the trace does not match the plan's task list")
        self.t_start = t_start = [float(e["start_s"]) for e in comp]
        self.t_end = [float(e["end_s"]) for e in comp]
        self.op_end = op_end = [0.0] * inst.n_ops
        self.op_start = op_start = [0.0] * inst.n_ops
        for k, op in enumerate(tl.task_op):
            if op >= 0:
                op_end[op] = float(comp[k]["end_s"])
                op_start[op] = t_start[k]
        self.steps = [(op_end[a - 1] if a > 0 else 0.0, op_end[b]) for a, b in model.groups]

    def decisions(self) -> None:
        """Decisions, step durations (``tau_K``, model time units) and rebuild positions."""
        x, vm, dec, tl, steps = self.x, self.vm, self.dec, self.tl, self.steps
        for t in range(self.inst.n_saved):
            if vm["xs"][t] is not None:
                x[vm["xs"][t]] = 1.0 if dec[t] == SWAP else 0.0
            if vm["xr"][t] is not None:
                x[vm["xr"][t]] = 1.0 if dec[t] == RECOMP else 0.0
        for K, j in enumerate(vm["tau"]):
            x[j] = (steps[K][1] - steps[K][0]) / self.model.t_unit
        for k, t in enumerate(tl.task_t):
            if t >= 0:
                g = tl.next_op(k)
                yv = vm["y"][t].get(g)
                if yv is None:
                    raise ValueError(f"'{self.inst.saved_names[t]}' is rebuilt before op {g}, "
                                     f"a gap the model does not offer it "
                                     f"(G = {sorted(vm['y'][t])})")
                x[yv] = 1.0

    def in_flight_d2h(self, d2h: dict[int, tuple[float, float]]) -> None:
        """Add to `d2h` (swap -> busy interval, s) the D2H still in flight when the last
        task ends, which is not in the trace (the trace records copies when they end): it
        is the first copy in queue order (ready op, saved position: the runtime's FIFO)
        that has no trace event and started, i.e. the engine was free, at max(its ready
        time, the previous copy's end), before its last reader ended (else it was
        dropped). Its busy interval is [start, start + d] with any d in [w, dmax] (the
        copy lasts at least w = latency + s / W and at most dmax = latency + s / (duplex
        W)) and >= T - start (it had not ended at T); d = max(w, T - start)."""
        inst, s, dec, tl = self.inst, self.s, self.dec, self.tl
        T = float(self.evaluation.step_time_s)
        link = inst.link
        ready = np.asarray(inst.saved_ready_idx).tolist()
        free_at = 0.0
        for t in sorted((t for t in range(inst.n_saved) if dec[t] == SWAP and s[t] > 0),
                        key=lambda t: (ready[t], t)):
            if t in d2h:
                free_at = d2h[t][1]
                continue
            start = max(self.op_end[ready[t]], free_at)
            if start < self.t_end[tl.need[t][-1]]:
                d = max(copy_time(s[t], float(link.d2h_bytes_per_s),
                                  float(link.copy_latency_s)), T - start)
                d2h[t] = (start, start + d)
                break

    def swap(self, t: int, d2h: tuple[float, float] | None,
             fetches: list[tuple[float, float]], evicts: list[float]) -> None:
        """The copy variables of swap t (bytes > 0, read in the backward pass): its D2H
        busy interval `d2h` (None: none ran), its H2D intervals `fetches` and eviction
        times `evicts` (s); lag, shares, and the counts of the copies that served a read."""
        x, vm, steps, tl = self.x, self.vm, self.steps, self.tl
        nK = len(steps)
        first_read = self.t_start[tl.need[t][0]]
        lags = not any(a < first_read for a, _ in fetches)
        if vm["lag"][t] is not None:
            x[vm["lag"][t]] = 1.0 if lags else 0.0
        sh = _shares(*d2h, steps) if d2h is not None else [0.0] * nK
        _set_cum(x, vm["L"][t] if lags else vm["F"][t], sh)
        if vm["integral_copies"]:
            for K, j in vm["Dn"][t].items():
                x[j] = 1.0 if (not lags and d2h[1] <= steps[K][1]) else 0.0
            for K, j in vm["gamma"][t].items():
                a = self.model.groups[K][0]
                end = d2h[1] if d2h is not None else math.inf
                x[j] = 1.0 if (not lags and steps[K][0] < end <= self.op_start[a]) else 0.0
        # walk t's backward events: which H2D copies and evictions served a read
        ev: list[tuple[float, int, int]] = []        # (time, order, index)
        for i, (a, _) in enumerate(fetches):
            ev.append((a, 1, i))
        for te in evicts:
            ev.append((te, 0, -1))
        for k in tl.need[t]:
            ev.append((self.t_start[k], 2, -1))
        ev.sort()
        cur = "fwd" if lags else None
        served: set[int | str] = set()       # the copies that served a read
        counted_evict: list[float] = []
        for when, kind, i in ev:
            if kind == 0:                # eviction of the current copy
                if cur in served:
                    counted_evict.append(when)
                cur = None
            elif kind == 1:
                cur = i
            else:
                if cur is None:
                    raise ValueError(f"'{self.inst.saved_names[t]}' is read at {when} s "
                                     f"with no device copy")
                served.add(cur)
        counted_fetch = sorted(i for i in served if i != "fwd")
        hsh = [0.0] * nK
        for i in counted_fetch:
            for K, v in enumerate(_shares(*fetches[i], steps)):
                hsh[K] += v
        _set_cum(x, vm["H"][t], hsh)
        if vm["integral_copies"]:
            for K, j in vm["Sg"][t].items():
                x[j] = float(sum(1 for i in counted_fetch if fetches[i][0] < steps[K][1]))
        for K, j in vm["E"][t].items():
            x[j] = float(sum(1 for te in counted_evict if te < steps[K][1]))
        for K, j in vm["phi"][t].items():
            if j not in vm["Sg"][t].values():
                x[j] = 1.0 if any(fetches[i][0] < steps[K][1] for i in counted_fetch) else 0.0


_OWN_ROWS = {"def": ("busy_B_def", "mem_passive_def", "admission_R_def", "rebuild_Q_def",
                     "ycum_def"),
             "max": ("fifo_P_ended", "fifo_P_chain"), "min": ("rebuild_input_def",)}
"""The row families that fix each kind of auxiliary variable."""


def _aux_rows(model: _Model) -> tuple[dict[int, str], dict[int, list[int]]]:
    """Per auxiliary variable its kind and the rows (indices) of its own families, cached
    in the model's variable map until a row is added."""
    lin = model.lin
    hit = model.vmap.get("_aux_rows")
    if hit is not None and hit[0] == len(lin.rows):
        return hit[1], hit[2]
    kinds: dict[int, str] = {}
    for kind, js in model.vmap["aux"].items():
        for j in js:
            kinds[j] = kind
    rows_of: dict[int, list[int]] = {j: [] for j in kinds}
    for i, (idx, _cf, _lo, _hi) in enumerate(lin.rows):
        fam = lin.row_names[i].split("[", 1)[0]
        for j in idx:
            if j in kinds and fam in _OWN_ROWS[kinds[j]]:
                rows_of[j].append(i)
    model.vmap["_aux_rows"] = (len(lin.rows), kinds, rows_of)
    return kinds, rows_of


def _set_aux(model: _Model, x: list[float]) -> None:
    """Set the auxiliary variables (``model.vmap["aux"]``) from the rows that define them:
    "def" from its ``*_def`` equality row, "max" (the FIFO chain P) the largest value its
    own ``fifo_P_*`` rows and its bounds allow, "min" (om) the smallest its
    ``rebuild_input_def`` rows and bounds allow. Variables are set in index order, which is
    creation order: every row used reads only variables set before."""
    lin = model.lin
    kinds, rows_of = _aux_rows(model)
    for j in sorted(kinds):
        kind = kinds[j]
        vals = []
        for i in rows_of[j]:
            idx, cf, lo, hi = lin.rows[i]
            c = 0.0
            rest = []
            for jj, cc in zip(idx, cf, strict=True):
                if jj == j:
                    c = cc
                else:
                    rest.append(cc * x[jj])
            r = math.fsum(rest)
            if kind == "def":
                vals.append((lo - r) / c)
            elif kind == "max" and c > 0 and hi < math.inf:
                vals.append((hi - r) / c)
            elif kind == "min" and c > 0 and lo > -math.inf:
                vals.append((lo - r) / c)
        if kind == "def":
            # its own row is the first that holds it (rows are added after their
            # variable, and a later definition may read it)
            x[j] = vals[0]
        elif kind == "max":
            x[j] = max(lin.lb[j], min([lin.ub[j]] + vals))
        else:
            x[j] = min(lin.ub[j], max([lin.lb[j]] + vals))


def check_point(model: _Model, inst: Instance, plan: Plan, M: int,
                evaluation: Evaluation | None = None, limit: int = 10) -> dict[str, Any]:
    """Map `plan`'s trace to a point (:func:`point_from_trace`) and check it: a dict with
    ``violations`` (the rows and bounds it violates, named, at most `limit`),
    ``objective_s`` (the point's objective in seconds) and ``step_time_s`` (the plan's
    simulated T)."""
    if evaluation is None:
        evaluation = simulate(inst, plan, M, trace=True)
    x = point_from_trace(model, inst, plan, M, evaluation)
    return {"violations": model.lin.violations(x, limit=limit),
            "objective_s": model.lin.objective(x) * model.t_unit,
            "step_time_s": evaluation.step_time_s, "x": x}
