"""A lower bound on every schedule of one plan's decisions: the relaxation with the
decisions fixed.

:func:`decision_bound` builds the time-indexed relaxation (:func:`build_model`) in the
"exact" tier (one step per op; "aggregated", one step per layer run, beyond the exact
tier's size), fixes the keep/swap/recomp binaries to the plan's, and solves what is left,
a linear program (those tiers have no other integer variable), with GLOP.

Why it bounds *every* schedule of the decisions, not only the runtime's trace (the class
of schedules is defined in :mod:`slackopt.experiments.schedule`): the docstring of
:mod:`slackopt.solvers.milp.model` proves the bound for a trace of the evaluator by mapping the
trace to an assignment (decisions, rebuild positions, step durations from the trace's
op ends, copy shares from the copies' busy intervals, evictions) that satisfies every row.
The rows of the exact and aggregated tiers use no runtime rule: FIFO order (R1), the
work-conserving and lagging rows (R2, R3), the admission rule (R5) and the rebuild-read
row (R6) are full-tier only, and lag binaries are off. What remains are physical rules,
and the same mapping applied to any schedule of the class satisfies them:

- step durations >= the ops' and rebuilds' durations of the step (one compute stream,
  tasks in the plan's order, the rebuilds where :class:`~slackopt.simulate.TaskList`
  places them, which is where the model places them: ``rebuild_gaps``);
- engine capacity ``sum_t w_t share <= tau_K`` with ``w = latency + s / W``: a copy
  lasts at least w (the duplex rate only lengthens it) and one engine runs one copy at a
  time;
- a D2H starts after its producer ends (the class: after the op that makes the tensor
  final, no earlier); an H2D runs in the backward pass (the class: after T_F) and after
  the D2H ended; a backward reader starts after the H2D ended. A resident swap (the
  class's "no copy") is a swap whose D2H share is 0 (``F + L <= xs`` allows it) and
  whose reads then need no H2D share (``H >= D + E``). A swap whose first readers read
  its device copy (the class's ``device_reads``) maps its D2H to the lagging share L,
  which the exact and aggregated tiers do not tie to the D2H's timing (that is R3, full
  tier only) and which no reader row requires an H2D for; its later fetches and the
  class's re-fetches map to H2D shares after evictions E (an eviction follows a read
  and a finished D2H, ``E <= (reads - 1)(F + L)``), as the runtime's evictions do;
- memory at op ends and starts: each tensor counted is resident at that instant in the
  schedule (the class uses the same residency rules as the evaluator), and fractional
  shares only undercount.

So the LP optimum is <= the makespan of every schedule of the class, the runtime's
included. The full tier is not used: its R1-R6 rows state the runtime's rules and can
cut off a faster schedule. The property test (tests/test_runtime_gap.py) checks
``bound <= makespan`` against CP-SAT schedules verified by the checker.
"""

from __future__ import annotations

import time

from slackopt.instance import Instance
from slackopt.plan import Plan
from slackopt.solvers.milp.certify.lp import lp_relaxation
from slackopt.solvers.milp.certify.safe_lp import seconds_below
from slackopt.solvers.milp.linear.lin import ModelTimeout
from slackopt.solvers.milp.model.build import build_model

EXACT_MAX_OPS = 320
"""Up to this many scheduled ops the bound uses one step per op ("exact" tier); beyond,
one step per (phase, layer) run ("aggregated"), as :class:`MILP`'s "auto" does."""


def decision_bound(instance: Instance, plan: Plan, budget_bytes: int, *,
                   time_limit_s: float = 30.0) -> tuple[float | None, dict]:
    """A lower bound (s) on the makespan of every schedule of `plan`'s decisions.

    Args:
        instance: the instance (views lowered as the evaluator does).
        plan: the plan (its decisions; the runtime policy is irrelevant).
        budget_bytes: M (bytes).
        time_limit_s: wall-clock limit for building and solving (s).

    Returns:
        (certified bound in s: a safe dual bound from the LP solver's duals
        (:func:`~slackopt.solvers.milp.certify.lp.lp_relaxation`), or None if the model or
        the LP did not finish in time, the LP has no optimum, its duals certify no
        bound, or the instance is a pipeline stage (the model's steps and H2D rows read
        one forward pass, then one backward pass); info: tier, model size, seconds,
        ``lp_objective_s`` (the LP solver's optimum, uncertified, s), ``lp_status``, and
        why it stopped if it did).

    Source: the module docstring; solvers/milp/model/__init__.py for the relaxation.
    """
    plan.check(instance)
    if instance.saved_unit is not None:
        plan, instance = plan.lowered(instance), instance.lowered
    tier = "exact" if instance.n_ops <= EXACT_MAX_OPS else "aggregated"
    t0 = time.perf_counter()
    deadline = t0 + float(time_limit_s)
    info: dict = {"tier": tier}
    if not instance.single_pass:
        info.update(seconds=0.0, stopped="a pipeline stage: the time-indexed model reads "
                                         "one forward and one backward pass")
        return None, info
    try:
        model = build_model(instance, int(budget_bytes), tier=tier, deadline=deadline)
        lin = model.lin.copy()
        for j, v in model.hint(plan.decisions).items():
            lin.lb[j] = lin.ub[j] = v
        info.update(model.info)
        lpi: dict = {}
        lp, x = lp_relaxation(lin, max(0.05, deadline - time.perf_counter()),
                              deadline=deadline, info=lpi)
        info["lp_objective_s"] = (None if lpi.get("lp_objective") is None
                                  else lpi["lp_objective"] * model.t_unit)
        info["lp_status"] = f"{lpi.get('lp_status')} ({lpi.get('lp_solver')})"
    except ModelTimeout as e:
        info.update(seconds=time.perf_counter() - t0, stopped=str(e))
        return None, info
    info["seconds"] = time.perf_counter() - t0
    if lp is None:
        info["stopped"] = ("no certified LP bound: no optimum in time, the model is "
                           "infeasible, or the duals certify none")
        return None, info
    # lp is certified from the duals (lp_relaxation), in the model's time units
    return seconds_below(0.0, lp, model.t_unit), info
