"""The plans that use the least memory by construction, and the smallest budget at which
a plan runs (the answer of an infeasible solve: :func:`min_budget`)."""

from __future__ import annotations

import math
import time

import numpy as np

from slackopt.bisection import smallest_true
from slackopt.instance import Instance
from slackopt.plan import KEEP, RECOMP, SWAP, Plan
from slackopt.simulate import simulate
from slackopt.solvers.milp.model.steps import model_floor
from slackopt.solvers.milp.search.enumeration import ENUM_MAX_SAVED, enumerate_optimum
from slackopt.solvers.milp.search.incumbent import Incumbent


def floor_plans(inst: Instance) -> dict[str, np.ndarray]:
    """The plans that use the least memory by construction, by name: ``all_swap``, and,
    for when a host pinned-memory limit forbids it, ``recompute_else_swap`` and
    ``recompute_else_keep`` (recompute every tensor that can be rebuilt, swap or keep the
    others). They witness the minimum budget (:func:`min_budget`) and seed every
    search (phase "seeds")."""
    rec = np.isfinite(np.asarray(inst.c, dtype=float))
    sized = np.asarray(inst.s) > 0
    return {"all_swap": all_swap(inst),
            "recompute_else_swap": np.where(rec, RECOMP, np.where(sized, SWAP, KEEP)
                                            ).astype(np.int8),
            "recompute_else_keep": np.where(rec, RECOMP, KEEP).astype(np.int8)}


def all_swap(inst: Instance) -> np.ndarray:
    """The decisions that swap every saved tensor with bytes (keep the empty ones)."""
    return np.where(np.asarray(inst.s) > 0, SWAP, KEEP).astype(np.int8)


def min_budget(inst: Instance, work: int = 200_000, time_s: float = 30.0
               ) -> tuple[int, int, bool]:
    """(min budget, model floor, exact), bytes.

    The model floor (:func:`model_floor`) is a proven lower bound on the budget any
    plan needs. The min budget is the smallest budget found at which a plan runs in
    the evaluator, within 0.1% of P: the all-swap plan, then plans that recompute
    what can be rebuilt and swap or keep the rest (under a host pinned-memory limit
    the all-swap plan may never run), each bisected from the floor up to the best
    budget so far (keep-all always runs at P); on instances with at most
    ``ENUM_MAX_SAVED`` saved tensors the enumeration then searches for any plan that
    runs at the floor and, failing that, bisects below the best witness with it (at
    most `work` plans simulated per budget tried, `time_s` seconds for all of them
    together: a budget whose search is cut short counts as one where no plan was
    shown to run, so the answer is always a budget with a witness). ``exact`` when
    the min budget is the floor: then no plan runs below it."""
    floor = model_floor(inst)
    P = int(inst.P)
    tol = max(1, int(math.ceil(1e-3 * P)))
    best = max(P, floor)
    for dec in floor_plans(inst).values():
        plan = Plan(dec, inst.saved_names)

        def runs(m: int, plan: Plan = plan) -> bool:
            return bool(simulate(inst, plan, m).feasible)

        if runs(floor):
            return floor, floor, True
        if best > floor and runs(best):
            best = smallest_true(runs, floor, best, tol=tol)
    if inst.n_saved <= ENUM_MAX_SAVED and best > floor:
        end = time.perf_counter() + time_s

        def any_runs(m: int) -> bool:
            inc = Incumbent(inst, m)
            enumerate_optimum(inc, work, end)
            return inc.dec is not None

        if any_runs(floor):
            return floor, floor, True
        best = smallest_true(any_runs, floor, best, tol=tol)
    return best, floor, best == floor
