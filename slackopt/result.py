"""What a solver returns: :class:`SolveResult`, the status words and the status rule.

The contract's vocabulary, shared by :mod:`slackopt.solver` (the registry and
:func:`slackopt.solve`) and :mod:`slackopt.solverbase` (the base class). It imports
neither, so they import it and not each other; both re-export its names, which stay
public under ``slackopt.solver`` (``slackopt.solver.STATUSES``, ...).
:func:`settle_status` is the one function that decides a result's status word.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from slackopt.plan import Plan
from slackopt.simulate import Evaluation

STATUSES = ("optimal", "bounded", "feasible", "infeasible", "timeout", "error")
"""What a result's status may say (see :class:`SolveResult`)."""
OPTIMAL_REL_TOL = 1e-4
"""Status "optimal" needs (U - L) / L <= this (0.01%), U the plan's simulated step time
and L a lower bound valid for every plan. Not tighter: the MILP backends' feasibility
tolerances (1e-6 absolute, on step times of a few hundred model units) make proofs to
1e-6 relative slow or unreliable."""
PLAN_STATUSES = ("optimal", "bounded", "feasible")
"""Statuses that come with a plan the solver believes runs under the budget."""
MIN_BUDGET_BASES = {
    "solver": "the smallest budget at which this solver returns a plan that runs (the peak "
              "of a plan the solver makes whatever the budget)",
    "bisection": "a budget at which this solver returns a plan that runs, found by bisection "
                 "between the budget asked for and P (to 0.5% of P); a solver's success need "
                 "not be monotone in the budget, so it may also reach smaller ones",
    "best_plan_peak": "the peak of the best plan found under the budget asked for: that plan "
                      "runs at it; the solver did not search smaller budgets, and may reach one",
    "proven": "the smallest budget at which any plan runs: a plan runs at it and no plan "
              "runs below it",
    "found": "the smallest budget found at which a plan runs; below "
             "info['min_budget_lower_bytes'] no plan runs (proven), between the two it is "
             "not known",
}
"""What ``info["min_budget_bytes"]`` of an infeasible answer means, by
``info["min_budget_basis"]`` (absent: "solver")."""


@dataclass
class SolveResult:
    """What a solver returns.

    Attributes:
        plan: the plan (None only when the solver produced none).
        solver: registered solver name.
        params: the solver's hyperparameters.
        status: what was proven, one of
            "optimal": the plan's simulated step time is proven minimal: a lower bound
            valid for every plan is within ``OPTIMAL_REL_TOL`` (1e-4, relative) of it;
            "bounded": a plan and a valid lower bound with a gap larger than that
            (``info["gap"]`` = (step - bound) / bound when the solver reports it);
            "feasible": a plan, no bound;
            "infeasible": no plan fits the budget (``info["min_budget_bytes"]``: the
            smallest budget the solver can reach, or None; ``info["min_budget_basis"]``
            says what that number is, :data:`MIN_BUDGET_BASES`);
            "timeout": the time limit ended the search with no plan and no proof;
            "error": the solver failed.
        objective_s: the solver's own model value (s), reported, never used to rank.
        lower_bound_s: a lower bound on the step time of every plan under this budget
            (s), valid for the evaluator's semantics (docs/model.md), or None.
        planning_time_s: wall-clock planning time (s).
        seed: the seed used, or None.
        info: solver-specific details. Infeasible results put the smallest budget the
            solver can reach in ``info["min_budget_bytes"]`` (or None if unknown).
        evaluation: the evaluator's verdict on ``plan`` under the budget: the one
            evaluation of the solve (:meth:`slackopt.solverbase.BaseSolver.solve` makes it
            or takes the solver's own, :func:`slackopt.solve` makes it for a solver that
            hands none), None without a plan.

    Raises:
        ValueError: a status that is not one of :data:`STATUSES`.
    """

    plan: Plan | None
    solver: str
    params: dict[str, Any] = field(default_factory=dict)
    status: str = "feasible"
    objective_s: float | None = None
    lower_bound_s: float | None = None
    planning_time_s: float = 0.0
    seed: int | None = None
    info: dict[str, Any] = field(default_factory=dict)
    evaluation: Evaluation | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status '{self.status}' is not one of {', '.join(STATUSES)}")


def bound_error(info: dict[str, Any], lower_bound_s: float, step_time_s: float) -> bool:
    """Check a solver's lower bound against the simulated step of its own plan.

    The evaluator's semantics define the problem, so a bound L above the step T of a plan
    that runs is a proven error of the solver, never a gap to clamp: record it in
    ``info["bound_error"]`` (L, T and a note), remove ``info["gap"]``, set
    ``info["plan_proven_optimal"]`` to False, and return True (the caller drops the
    bound and any "optimal" or "bounded" status). Returns False when L <= T.

    Args:
        info: the result's info dict (changed in place on an error).
        lower_bound_s: L (s).
        step_time_s: T (s), the simulated step of a plan that runs under the budget.
    """
    if float(lower_bound_s) <= float(step_time_s):
        return False
    info["bound_error"] = {"lower_bound_s": float(lower_bound_s),
                           "plan_step_s": float(step_time_s),
                           "note": "the solver's lower bound exceeds the simulated step of "
                                   "its own plan: the bound is wrong and was dropped"}
    info.pop("gap", None)
    info["plan_proven_optimal"] = False
    return True


def proven_status(info: dict[str, Any], lower_bound_s: float,
                  step_time_s: float) -> str | None:
    """The status word a plan that runs in T with a lower bound L earns (the part of
    :func:`settle_status` for a plan that runs).

    - L above T (or not a number): a proven error of the bound (:func:`bound_error`
      records it): returns None, the caller drops the bound; the plan is "feasible".
    - L <= 0 < T: valid but it proves no relative gap: ``info["bound_note"]`` says so and
      None is returned (the bound is dropped, "feasible").
    - Else "optimal" when (T - L) / L <= :data:`OPTIMAL_REL_TOL` (or T = L = 0), and
      "bounded" otherwise; ``info["gap"]`` = (T - L) / L (0 when T = L = 0).

    Args:
        info: the result's info dict (changed in place).
        lower_bound_s: L (s).
        step_time_s: T (s), the simulated step of the plan, which runs under the budget.

    Returns:
        "optimal", "bounded", or None (drop the bound; the status is "feasible").
    """
    L, T = float(lower_bound_s), float(step_time_s)
    if not L <= T:  # NaN included
        bound_error(info, L, T)
        return None
    if L <= 0.0:
        if T <= 0.0:  # T = L = 0: nothing runs, nothing can be faster
            info["gap"] = 0.0
            return "optimal"
        info.pop("gap", None)
        info["bound_note"] = (f"a lower bound of {L:g} s proves no gap for a step of {T:g} s "
                              "(not above 0): dropped")
        return None
    info["gap"] = (T - L) / L
    return "optimal" if info["gap"] <= OPTIMAL_REL_TOL else "bounded"


def settle_status(claim: str | None, evaluation: Evaluation | None,
                  lower_bound_s: float | None, info: dict[str, Any], *,
                  record: bool = True) -> tuple[str, float | None]:
    """The status word of a result and the lower bound it keeps, from the solver's claim,
    the final plan's evaluation and the solver's bound: the one rule, applied once per
    solve where that evaluation is at hand (:meth:`slackopt.solverbase.BaseSolver.solve`;
    :func:`slackopt.solve` for a solver that hands no evaluation, and for a start plan it
    takes). Words mean what was proven: "optimal" and "bounded" need a plan that runs
    and a bound.

    T is the plan's simulated step time under M, L the solver's lower bound:

    - no plan (`evaluation` None): the claim when it is "infeasible", "timeout" or
      "error", else "infeasible" (a plan status needs a plan); L kept.
    - no claim or a plan status ("optimal", "bounded", "feasible"), and the plan does not
      run under M: "infeasible", L kept (a bound holds for every plan, this one's fate
      does not refute it).
    - no claim or a plan status, and the plan runs: without L, "feasible"; with L, what
      :func:`proven_status` proves: "optimal" or "bounded" with ``info["gap"]``, or
      "feasible" with L dropped (L above T is a proven error, :func:`bound_error`; L <= 0
      proves no gap).
    - "infeasible", "timeout" or "error" with a plan: the claim stands; L is dropped when
      the plan runs in less than L (:func:`bound_error`).

    With `record`, a plan status the facts refute (no plan, a plan that does not run,
    "optimal" or "bounded" without a bound) is recorded in ``info["status_refuted"]`` (the
    claim and why), so a solver's wrong claim stays visible
    (:func:`slackopt.testing.check_solver` fails on it).

    Args:
        claim: the solver's status (one of :data:`STATUSES`), or None to let the
            evaluation decide.
        evaluation: the final plan's evaluation under M, or None when there is no plan.
        lower_bound_s: L (s), or None.
        info: the result's info dict (changed in place: ``gap``, ``bound_error``,
            ``bound_note``, ``plan_proven_optimal``, ``status_refuted``).
        record: record a refuted claim (False where `claim` need not be one: the status
            of a :class:`SolveResult` has a default).

    Returns:
        (status, the lower bound kept or None).

    Raises:
        ValueError: a claim that is not one of :data:`STATUSES`.

    Source: the status words of :class:`SolveResult` (DESIGN.md, "Central types").
    """
    if claim is not None and claim not in STATUSES:
        raise ValueError(f"status '{claim}' is not one of {', '.join(STATUSES)}")
    L = lower_bound_s
    plan_claim = claim in PLAN_STATUSES
    refuted = info if record else {}
    if evaluation is None:
        if plan_claim:
            refuted["status_refuted"] = {"claimed": claim, "why": "no plan"}
        return (claim if claim is not None and not plan_claim else "infeasible"), L
    runs, T = bool(evaluation.feasible), float(evaluation.step_time_s)
    if claim is not None and not plan_claim:
        if runs and L is not None and bound_error(info, L, T):
            L = None
        return claim, L
    if not runs:
        if plan_claim:
            refuted["status_refuted"] = {"claimed": claim, "why": "the plan does not run "
                                         f"under the budget: {evaluation.failure}"}
        return "infeasible", L
    if L is None and claim in ("optimal", "bounded"):
        refuted["status_refuted"] = {"claimed": claim, "why": "no lower bound"}
    status = None if L is None else proven_status(info, L, T)
    return (status, L) if status is not None else ("feasible", None)


__all__ = ["OPTIMAL_REL_TOL", "PLAN_STATUSES", "STATUSES", "SolveResult", "bound_error",
           "proven_status", "settle_status"]
