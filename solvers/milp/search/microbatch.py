"""A pipeline stage through its microbatches: plan one microbatch's single pass with the
exact tier, give every microbatch that plan, and add the pass's certified bounds up along
the schedule (phase "microbatch").

A stage's microbatches are copies of one profiled pass
(:func:`slackopt.stage.build_stage`), and each saved tensor ``t@j`` has a decision of
its own, so the decision vectors grow with m and the stage's own searches reach few of
them in a solve's time. The pass of one microbatch
(:func:`~slackopt.solvers.milp.bounds.groups.microbatch_groups`) is small, and the
exact tier plans and bounds it well (its own seeds, bounds and searches).

- Plans: where microbatches do not overlap (the last stage under 1F1B) the pass is
  planned at budget M, what each microbatch can do on its own; where k microbatches
  are in flight at once, each has about M / k, so the pass is planned at M / k for k = 1
  up to the most in flight (:func:`slackopt.stage.in_flight`). Each plan, given to every
  microbatch, is a candidate the evaluator scores; none is trusted without that.
- Bound: the certified bounds of the pass at M that are relaxations of the runtime's
  rules (:data:`~slackopt.solvers.milp.bounds.groups.RELAXATIONS`) bound each
  contiguous microbatch's stalls and rebuilds, and
  :func:`~slackopt.solvers.milp.bounds.groups.microbatch_bound` adds them up less the
  bubbles that absorb them (the argument is that module's docstring).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from slackopt.instance import Bytes, Instance
from slackopt.plan import KEEP, SWAP
from slackopt.solver import solve
from slackopt.solvers.milp.bounds.groups import (
    RELAXATIONS,
    Group,
    microbatch_bound,
    microbatch_groups,
)
from slackopt.stage import in_flight

MAX_SPLITS = 8
"""The most budgets M / k tried (k = 1 ... this, at most the microbatches in flight)."""
MIN_SOLVE_S = 0.5
"""A microbatch's pass is not planned with less time than this (s)."""


@dataclass
class MicrobatchResult:
    """What :func:`microbatch_search` found.

    Attributes:
        plans: (source ``microbatch_plan/k``, the stage's decisions) per budget M / k
            planned, in order.
        bound_s: the microbatch bound (s, certified), or None without a contiguous
            group or without the pass's bounds at M.
        info: ``groups`` (microbatches planned), ``contiguous`` (those the bound
            covers), ``splits`` (the k tried), ``pass_bounds`` (per distinct pass, its
            relaxation bounds at M by source, s), ``extra_s`` (per contiguous group, its
            share of the bound, s), ``solves`` (per pass solve: k, status, step, bound).
    """

    plans: list[tuple[str, np.ndarray]] = field(default_factory=list)
    bound_s: float | None = None
    info: dict = field(default_factory=dict)


def splits(inst: Instance, groups: list[Group]) -> list[int]:
    """The k of the budgets M / k: 1 where the groups' units do not overlap (each
    group's units consecutive), else 1 to the most microbatches in flight (at most
    :data:`MAX_SPLITS`)."""
    if all(g.units == tuple(range(g.units[0], g.units[0] + len(g.units))) for g in groups):
        return [1]
    return list(range(1, min(MAX_SPLITS, int(in_flight(inst).max(initial=1))) + 1))


def compose(inst: Instance, groups: list[Group], plans: dict[tuple, np.ndarray]
            ) -> np.ndarray:
    """The stage's decisions: each group's from ``plans[group.key]`` (per saved position
    of its sub-instance), every saved tensor outside a group swapped (kept if empty)."""
    s = np.asarray(inst.s)
    dec = np.where(s > 0, SWAP, KEEP).astype(np.int8)
    for g in groups:
        dec[g.saved] = plans[g.key]
    return dec


def microbatch_search(inst: Instance, M: int, deadline: float, seed: int
                      ) -> MicrobatchResult:
    """Plans and the microbatch bound of the stage `inst` at budget `M` (bytes) (module
    docstring): for each k of :func:`splits`, every distinct microbatch pass solved by
    the exact tier at M // k (each solve within an equal share of the time left to
    `deadline`, ``time.perf_counter()``, at least :data:`MIN_SOLVE_S`; seed `seed`) and
    composed (:func:`compose`); the passes' :data:`RELAXATIONS` bounds at M (k = 1) make
    the bound. Nothing for a single pass or when no microbatch's tensors stay in its own
    units."""
    out = MicrobatchResult()
    groups = microbatch_groups(inst, contiguous=False)
    if not groups:
        return out
    contiguous = microbatch_groups(inst)
    keys = list(dict.fromkeys(g.key for g in groups))
    subs = {g.key: g.sub for g in reversed(groups)}
    ks = splits(inst, groups)
    out.info = {"groups": len(groups), "contiguous": len(contiguous), "splits": ks,
                "pass_bounds": [], "solves": []}
    relaxed: dict[tuple, float] = {}
    for i, k in enumerate(ks):
        plans: dict[tuple, np.ndarray] = {}
        for j, key in enumerate(keys):
            share = (deadline - time.perf_counter()) / ((len(ks) - i) * len(keys) - j)
            if share < MIN_SOLVE_S:
                break
            # the exact tier, by its registered name (its class imports this module)
            res = solve(subs[key], "milp", Bytes(int(M) // k), time_limit_s=share,
                        seed=seed, progress=False)
            out.info["solves"].append({"k": k, "status": res.status,
                                       "step_s": res.info.get("upper_bound_s"),
                                       "bound_s": res.lower_bound_s})
            if k == 1:
                b = {src: v for src, v in res.info.get("bounds", {}).items()
                     if src in RELAXATIONS}
                out.info["pass_bounds"].append(b)
                if b:
                    relaxed[key] = max(b.values())
            if res.plan is None:
                break
            plans[key] = np.asarray(res.plan.decisions, dtype=np.int8)
        if len(plans) == len(keys):
            out.plans.append((f"microbatch_plan/{k}", compose(inst, groups, plans)))
        if len(plans) < len(keys) and share < MIN_SOLVE_S:
            break
    if contiguous and relaxed:
        out.bound_s, out.info["extra_s"] = microbatch_bound(inst, contiguous, relaxed)
    return out
