"""How much of a plan's step time is lost to its decisions and how much to the runtime.

A plan fixes keep/swap/recomp per saved tensor; the evaluator runs those decisions under
a fixed runtime policy and reports the step time U. The fastest *schedule* of the same
decisions (the class of schedules obeying the physical rules only:
:mod:`slackopt.experiments.schedule`) takes S_opt <= U. :func:`runtime_gap` brackets S_opt
and splits
the gap between U and the instance's best lower bound L:

- ``S_best`` (upper bound on S_opt): the makespan of an explicit schedule, found by CP-SAT
  (:func:`slackopt.experiments.best_schedule.best_schedule`) or the runtime's own when CP-SAT does
  not beat it, and verified by :func:`slackopt.experiments.schedule.check_schedule`. Valid because a
  schedule that passes the checker is in the class, so the best one is no slower.
- ``L_dec`` (lower bound on S_opt): the larger of (a) the compute floor, the sum of the
  plan's task durations (every schedule runs every task, in order, on one stream: ops
  and rebuilds), and (b) the time-indexed relaxation with the decisions fixed, solved as
  an LP (``solvers/milp/decision_bound.py``, whose docstring argues row by row why it
  holds for every schedule of the class, not only the runtime's trace). (b) is reached
  through the solver registry (``get_solver("milp").decision_bound``), so this module
  does not import solvers/; without the milp solver only (a) is used.
- **Lost to the runtime** >= U - S_best (the runtime could have run the same decisions
  that much faster) and <= U - L_dec.
- **Lost to the decisions** <= S_best - L, with L a lower bound on the step time of every
  plan under the evaluator (the instance's best bound, e.g. the milp solver's
  ``lower_bound_s`` or references.json): even scheduled as well as known, these decisions
  take S_best, and no plan run by the runtime beats L. The two parts add up:
  ``U - L = (U - S_best) + (S_best - L)``. The bound may be negative: L bounds the
  runtime's plans, not schedules, so these decisions well scheduled can beat every plan
  the runtime runs (then the whole certified gap U - L is the runtime's).

Units: seconds throughout; budgets in bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from slackopt.errors import AnalysisError, SolverError
from slackopt.experiments.best_schedule import BestSchedule, best_schedule
from slackopt.experiments.schedule import _lowered
from slackopt.instance import Instance
from slackopt.plan import Plan
from slackopt.simulate import simulate
from slackopt.simulate._tasks import TaskList


@dataclass(frozen=True)
class RuntimeGap:
    """The split of one plan's step time (s) at budget ``budget_bytes``.

    Attributes:
        runtime_step_s: U, the evaluator's step time under the plan's runtime policy
            (None if the runtime fails the plan).
        best_schedule_s: S_best, a verified schedule's makespan (upper bound on the best
            schedule of the decisions; None if none was found).
        best_schedule_lower_s: L_dec, a lower bound on every schedule of the decisions.
        compute_floor_s: the sum of the plan's task durations (part of L_dec).
        relaxation_bound_s: the fixed-decision relaxation's bound (part of L_dec), or
            None (not available, or not solved in time).
        instance_lower_bound_s: L, as given (None if not given).
        lost_to_runtime_min_s: U - S_best (>= 0), None without U or S_best.
        lost_to_runtime_max_s: U - L_dec.
        lost_to_decisions_max_s: S_best - L (may be negative, see the module
            docstring), None without S_best or L.
        schedule: the :class:`~slackopt.experiments.best_schedule.BestSchedule` result.
        info: the relaxation's info (tier, size, seconds).
    """

    budget_bytes: int
    runtime_step_s: float | None
    best_schedule_s: float | None
    best_schedule_lower_s: float
    compute_floor_s: float
    relaxation_bound_s: float | None
    instance_lower_bound_s: float | None
    lost_to_runtime_min_s: float | None
    lost_to_runtime_max_s: float | None
    lost_to_decisions_max_s: float | None
    schedule: BestSchedule
    info: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (the schedule itself left out; its source, CP-SAT status
        and solve time kept)."""
        b = self.schedule
        return {
            "budget_bytes": self.budget_bytes, "runtime_step_s": self.runtime_step_s,
            "best_schedule_s": self.best_schedule_s,
            "best_schedule_lower_s": self.best_schedule_lower_s,
            "compute_floor_s": self.compute_floor_s,
            "relaxation_bound_s": self.relaxation_bound_s,
            "instance_lower_bound_s": self.instance_lower_bound_s,
            "lost_to_runtime_min_s": self.lost_to_runtime_min_s,
            "lost_to_runtime_max_s": self.lost_to_runtime_max_s,
            "lost_to_decisions_max_s": self.lost_to_decisions_max_s,
            "schedule_source": b.source, "cpsat_status": b.cpsat_status,
            "cpsat_s": b.solve_s, "runtime_schedule_s": b.runtime_schedule_s,
            "relaxation": self.info,
        }


def _relaxation_bound(inst: Instance, plan: Plan, M: int, time_limit_s: float
                      ) -> tuple[float | None, dict]:
    """The milp solver's fixed-decision bound through the registry, if installed."""
    from slackopt.solver import get_solver

    try:
        solver = get_solver("milp")
    except SolverError:
        return None, {"skipped": "the milp solver is not installed"}
    fn = getattr(solver, "decision_bound", None)
    if fn is None:
        return None, {"skipped": "the milp solver has no decision_bound"}
    return fn(inst, plan, M, time_limit_s=time_limit_s)


def runtime_gap(instance: Instance, plan: Plan, budget_bytes: int, *,
                time_limit_s: float = 10.0, bound_time_limit_s: float | None = None,
                instance_lower_bound_s: float | None = None, relaxation: bool = True,
                seed: int = 0, work_limit: float | None = None) -> RuntimeGap:
    """Split `plan`'s step time into what its decisions cost and what the runtime adds.

    Args:
        instance: the instance.
        plan: the plan (decisions and runtime policy: U is simulated under the policy).
        budget_bytes: M (bytes).
        time_limit_s: CP-SAT's wall-clock limit for the best schedule (s).
        bound_time_limit_s: limit for the fixed-decision relaxation (s; default
            `time_limit_s`).
        instance_lower_bound_s: L, a lower bound on every plan's step time (s), or None.
        relaxation: use the fixed-decision relaxation (through the milp solver); False
            keeps the compute floor alone as L_dec.
        seed, work_limit: CP-SAT's seed and deterministic work limit.

    Returns:
        A :class:`RuntimeGap`; every bound in it is valid as stated in the module
        docstring.

    Raises:
        PlanError: the plan does not fit the instance.
        AnalysisError (a ValueError): a time limit that is not a finite number > 0; an
            `instance_lower_bound_s` that is not a finite number >= 0, or that lies above
            this plan's own step time (a barrier-free plan that runs: then it is not a
            lower bound on every plan).
    """
    for what, v in (("time_limit_s", time_limit_s), ("bound_time_limit_s", bound_time_limit_s)):
        if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise AnalysisError(f"{what} must be a finite number of seconds > 0, got {v!r}")
    L = instance_lower_bound_s
    if L is not None and not (isinstance(L, (int, float)) and math.isfinite(L) and L >= 0):
        raise AnalysisError(f"the lower bound L must be a finite number of seconds >= 0, "
                            f"got {L!r}")
    M = int(budget_bytes)
    ev = simulate(instance, plan, M)
    U = ev.step_time_s if ev.feasible else None
    if L is not None and U is not None and plan.policy == "barrier_free" \
            and L > U * (1.0 + 1e-9):
        raise AnalysisError(f"the lower bound L = {L:.6g} s lies above this plan's own step "
                            f"time {U:.6g} s, so it is not a lower bound on every plan; "
                            "give a bound in seconds (e.g. the milp solver's lower_bound_s)")
    best = best_schedule(instance, plan, M, time_limit_s=time_limit_s, seed=seed,
                         work_limit=work_limit)
    inst, low = _lowered(instance, plan)
    floor = 0.0
    for d in TaskList(inst, low.decisions).dur:   # summed as a stall-free run ends
        floor += d
    rb, info = (None, {"skipped": "relaxation=False"})
    if relaxation:
        tl = bound_time_limit_s if bound_time_limit_s is not None else time_limit_s
        rb, info = _relaxation_bound(instance, plan, M, tl)
    L_dec = max(floor, rb) if rb is not None else floor
    S = best.upper_bound_s
    return RuntimeGap(
        budget_bytes=M, runtime_step_s=U, best_schedule_s=S, best_schedule_lower_s=L_dec,
        compute_floor_s=floor, relaxation_bound_s=rb, instance_lower_bound_s=L,
        lost_to_runtime_min_s=(U - S) if U is not None and S is not None else None,
        lost_to_runtime_max_s=(U - L_dec) if U is not None else None,
        lost_to_decisions_max_s=(S - L) if S is not None and L is not None else None,
        schedule=best, info=info)
