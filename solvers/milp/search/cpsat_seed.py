"""CP-SAT's exact best recompute-only plan, a first incumbent for the MILP search."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from slackopt.instance import Instance
from slackopt.interruptible import cpsat_sigint_off, interruptible
from slackopt.plan import KEEP, RECOMP
from slackopt.solvers.milp.model.steps import rebuild_gaps


# =========================================================================== CP-SAT incumbent
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
    n, nf, nS = inst.n_ops, inst.n_fwd, inst.n_saved
    s = [int(v) for v in np.asarray(inst.s, dtype=np.int64)]
    c = np.asarray(inst.c, dtype=np.float64)
    rec_ok = np.isfinite(c).tolist()
    cns = [int(round(x * 1e9)) if ok else 0 for x, ok in zip(c.tolist(), rec_ok, strict=True)]
    prod = inst.saved_prod_idx.tolist()
    lastf = inst.saved_last_fwd_idx.tolist()
    firstb = inst.saved_first_bwd_idx.tolist()
    lastb = inst.saved_last_bwd_idx.tolist()
    ins = [tuple(int(i) for i in x) for x in inst.recipe_inputs]
    deps: list[list[int]] = [[] for _ in range(nS)]
    for u in range(nS):
        for t in ins[u]:
            deps[t].append(u)
    # candidate gaps (same closure as build_model)
    G = rebuild_gaps(prod, rec_ok, deps, firstb)
    static = inst.static_profile.tolist()
    s_alloc = inst.static_alloc.tolist()
    ws = inst.workspace.tolist()
    extra = (np.asarray(inst.recipe_transient) + np.asarray(inst.recipe_workspace)).tolist()
    cm = cp_model.CpModel()
    xr = [cm.NewBoolVar(f"r{t}") if rec_ok[t] and s[t] > 0 else None for t in range(nS)]
    y: list[dict[int, Any]] = [{} for _ in range(nS)]
    for u in range(nS):
        if xr[u] is None:
            continue
        for g in G[u]:
            y[u][g] = cm.NewBoolVar("")
        cm.Add(sum(y[u].values()) == xr[u])

    def Y(u: int, k: int) -> list[Any]:
        return [y[u][g] for g in G[u] if g <= k]

    for u in range(nS):
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
    alive: list[int] = []
    by_prod: list[list[int]] = [[] for _ in range(n)]
    for t in range(nS):
        by_prod[prod[t]].append(t)
    for k in range(n):
        if time.perf_counter() > end:
            return None
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
            elif k < nf:
                const += s[t]
                terms.append(-s[t] * xr[t])
            else:
                const += s[t]
                terms.append(-s[t] * xr[t])
                terms += [s[t] * v for v in Y(t, k)]
        if terms:
            cm.Add(sum(terms) <= M - const)
        elif const > M:
            return None
    for u in range(nS):
        if xr[u] is None:
            continue
        for g in G[u]:
            const = static[g] - s_alloc[g] - ws[g]
            terms = [(s[u] + extra[u]) * y[u][g]]
            for t in range(nS):
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
    cm.Minimize(sum(cns[u] * xr[u] for u in range(nS) if xr[u] is not None))
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
    dec = np.full(nS, KEEP, dtype=np.int8)
    for t in range(nS):
        if xr[t] is not None and solver.Value(xr[t]):
            dec[t] = RECOMP
    return dec
