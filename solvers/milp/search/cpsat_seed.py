"""CP-SAT's exact best recompute-only plan, a first incumbent for the MILP search."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from slackopt.instance import Instance
from slackopt.interruptible import cpsat_sigint_off, interruptible
from slackopt.plan import KEEP, RECOMP
from slackopt.solvers.milp.model.steps import rebuild_gaps


def recompute_only_incumbent(inst: Instance, M: int, time_limit_s: float = 5.0,
                             seed: int = 0, deterministic_time: float | None = None
                             ) -> np.ndarray | None:
    """The best keep/recomp plan (no copies) under the model's memory rows, with CP-SAT.

    With no copies the model's step time is T* + the recompute time and every quantity is
    integral (bytes; recompute time in nanoseconds), so CP-SAT solves it exactly: minimise
    the summed c_u of recomp tensors subject to the exact-tier memory rows (op ends and
    rebuild starts, rebuild positions as in the evaluator). The result is an incumbent for
    the MILP loop, checked by the evaluator; it proves nothing by itself.

    Args:
        inst, M: the instance and the budget (bytes).
        time_limit_s: wall-clock limit (s) for building the model and solving it (None
            is returned when building it takes the whole limit).
        seed: CP-SAT's random seed (one worker: deterministic for a seed).
        deterministic_time: CP-SAT's work limit in its deterministic time units, or None;
            with it the result does not depend on machine speed (unless the wall-clock
            limit ends the search first).

    Returns:
        The decisions (int8 array over saved tensors), or None if CP-SAT finds none
        within its limits (or none exists).
    """
    from ortools.sat.python import cp_model

    end = time.perf_counter() + float(time_limit_s)   # building counts against the limit
    rm = _RecomputeModel(inst, cp_model.CpModel())
    rm.placements()
    rm.placement_order()
    if not rm.memory_at_ops(M, end):
        return None
    rm.memory_at_rebuilds(M)
    cm, xr, cns = rm.cm, rm.xr, rm.cns
    cm.Minimize(sum(cns[u] * xr[u] for u in range(rm.nS) if xr[u] is not None))
    left = end - time.perf_counter()
    if left <= 0.0:
        return None
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(left)
    if deterministic_time is not None:
        solver.parameters.max_deterministic_time = float(deterministic_time)
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = int(seed) % 2**31
    cpsat_sigint_off(solver)
    st = interruptible(lambda: solver.Solve(cm), solver.StopSearch)
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    dec = np.full(rm.nS, KEEP, dtype=np.int8)
    for t in range(rm.nS):
        if xr[t] is not None and solver.Value(xr[t]):
            dec[t] = RECOMP
    return dec


class _RecomputeModel:
    """The CP-SAT model of :func:`recompute_only_incumbent`: the instance's data (bytes;
    rebuild times in ns) and the variables xr (recompute t) and y (u rebuilt in the gap
    before op g); each method adds one family of constraints, in the order the function
    calls them (which fixes the model CP-SAT solves)."""

    def __init__(self, inst: Instance, cm: Any) -> None:
        self.cm = cm
        self.n, self.nS = inst.n_ops, inst.n_saved
        nS = self.nS
        self.s = s = [int(v) for v in np.asarray(inst.s, dtype=np.int64)]
        c = np.asarray(inst.c, dtype=np.float64)
        rec_ok = np.isfinite(c).tolist()
        self.cns = [int(round(x * 1e9)) if ok else 0
                    for x, ok in zip(c.tolist(), rec_ok, strict=True)]
        self.prod = prod = inst.saved_prod_idx.tolist()
        self.lastf = inst.saved_last_fwd_idx.tolist()
        self.firstb = firstb = inst.saved_first_bwd_idx.tolist()
        self.lastb = inst.saved_last_bwd_idx.tolist()
        self.ins = ins = [tuple(int(i) for i in x) for x in inst.recipe_inputs]
        self.deps = deps = [[] for _ in range(nS)]
        for u in range(nS):
            for t in ins[u]:
                deps[t].append(u)
        # candidate gaps (same closure as build_model)
        self.G = rebuild_gaps(prod, rec_ok, deps, firstb)
        self.static = inst.static_profile.tolist()
        self.s_alloc = inst.static_alloc.tolist()
        self.ws = inst.workspace.tolist()
        self.extra = (np.asarray(inst.recipe_transient)
                      + np.asarray(inst.recipe_workspace)).tolist()
        self.xr = [cm.NewBoolVar(f"r{t}") if rec_ok[t] and s[t] > 0 else None
                   for t in range(nS)]
        self.y: list[dict[int, Any]] = [{} for _ in range(nS)]

    def Y(self, u: int, k: int) -> list[Any]:
        """The placements of u in a gap before an op <= k."""
        return [self.y[u][g] for g in self.G[u] if g <= k]

    def placements(self) -> None:
        """A recomp tensor is rebuilt in exactly one of its candidate gaps."""
        cm, xr, y, G = self.cm, self.xr, self.y, self.G
        for u in range(self.nS):
            if xr[u] is None:
                continue
            for g in G[u]:
                y[u][g] = cm.NewBoolVar("")
            cm.Add(sum(y[u].values()) == xr[u])

    def placement_order(self) -> None:
        """A recipe input is rebuilt no later than the tensor that reads it, and before its
        own first backward reader only where a recomp dependent is rebuilt."""
        cm, xr, y, G, deps, firstb, Y = self.cm, self.xr, self.y, self.G, self.deps, \
            self.firstb, self.Y
        for u in range(self.nS):
            if xr[u] is None:
                continue
            for v in deps[u]:
                if xr[v] is None:
                    continue
                for g in G[v]:
                    if g > firstb[u]:
                        continue
                    cm.Add(sum(Y(u, g)) >= sum(Y(v, g)) + xr[u] - 1)
            for g in G[u]:
                if g == firstb[u]:
                    continue
                sup = [y[v][g] for v in deps[u] if xr[v] is not None and g in y[v]]
                cm.Add(y[u][g] <= sum(sup) if sup else y[u][g] == 0)

    def memory_at_ops(self, M: int, end: float) -> bool:
        """Memory at the end of every op <= `M` (bytes). False when the perf_counter time
        `end` passes while building, or an op's fixed bytes alone exceed M."""
        cm, xr, s, Y = self.cm, self.xr, self.s, self.Y
        lastf, lastb, static = self.lastf, self.lastb, self.static
        alive: list[int] = []
        by_prod: list[list[int]] = [[] for _ in range(self.n)]
        for t in range(self.nS):
            by_prod[self.prod[t]].append(t)
        for k in range(self.n):
            if time.perf_counter() > end:
                return False
            alive.extend(by_prod[k])
            const = static[k]
            terms = []
            for t in alive:
                if k <= lastf[t]:
                    const += s[t]
                elif k > lastb[t]:
                    continue
                elif xr[t] is None:
                    const += s[t]
                else:   # absent until rebuilt in a gap up to k (none before the backward ops)
                    const += s[t]
                    terms.append(-s[t] * xr[t])
                    terms += [s[t] * v for v in Y(t, k)]
            if terms:
                cm.Add(sum(terms) <= M - const)
            elif const > M:
                return False
        return True

    def memory_at_rebuilds(self, M: int) -> None:
        """Memory at every possible rebuild start <= `M` (bytes): the bytes alive across
        the gap, the rebuilt tensor, its transient bytes and workspace, and each recipe
        input not alive across it."""
        cm, xr, y, s, G, Y = self.cm, self.xr, self.y, self.s, self.G, self.Y
        prod, lastb, ins, extra = self.prod, self.lastb, self.ins, self.extra
        for u in range(self.nS):
            if xr[u] is None:
                continue
            for g in G[u]:
                const = self.static[g] - self.s_alloc[g] - self.ws[g]
                terms = [(s[u] + extra[u]) * y[u][g]]
                for t in range(self.nS):
                    if lastb[t] >= g and prod[t] < g:
                        if xr[t] is None:
                            const += s[t]
                        else:
                            const += s[t]
                            terms.append(-s[t] * xr[t])
                            terms += [s[t] * v for v in Y(t, g - 1)]
                for t in ins[u]:
                    if lastb[t] >= g:
                        if xr[t] is not None:
                            # t is recomp and not rebuilt before g: count it if y_ug
                            om = cm.NewBoolVar("")
                            cm.Add(om >= y[u][g] + xr[t] - 1 - sum(Y(t, g - 1)))
                            terms.append(s[t] * om)
                    else:
                        terms.append(s[t] * y[u][g])
                cm.Add(sum(terms) <= M - const)
