"""The Solver protocol, SolveResult, the solver registry and :func:`solve`.

A solver is any object with ``solve(instance, budget_bytes, *, time_limit_s=None,
seed=None) -> SolveResult``; constructors only store keyword hyperparameters.
Solvers register under the entry-point group ``slackopt.solvers`` (see pyproject.toml),
so this module knows no solver by name. Only the evaluator ranks plans: :func:`solve`
re-simulates every returned plan and attaches the :class:`~slackopt.simulate.Evaluation`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Protocol, runtime_checkable

from slackopt.errors import SolverError
from slackopt.instance import Instance, budget_bytes
from slackopt.plan import Plan
from slackopt.simulate import Evaluation, simulate, warm_up

STATUSES = ("optimal", "bounded", "feasible", "infeasible", "timeout", "error")
"""What a result's status may say (see :class:`SolveResult`)."""
OPTIMAL_REL_TOL = 1e-4
"""Status "optimal" needs (U - L) / L <= this (0.01%), U the plan's simulated step time
and L a lower bound valid for every plan. Not tighter: the MILP backends' feasibility
tolerances (1e-6 absolute, on step times of a few hundred model units) make proofs to
1e-6 relative slow or unreliable (unet2 at 0.8 P: over 24 s with SCIP, 13 s at 1e-4)."""
PLAN_STATUSES = ("optimal", "bounded", "feasible")
"""Statuses that come with a plan the solver believes runs under the budget."""
ENTRY_POINT_GROUP = "slackopt.solvers"


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
            smallest budget the solver can reach, or None);
            "timeout": the time limit ended the search with no plan and no proof;
            "error": the solver failed.
        objective_s: the solver's own model value (s), reported, never used to rank.
        lower_bound_s: a lower bound on the step time of every plan under this budget
            (s), valid for the evaluator's semantics (docs/model.md), or None.
        planning_time_s: wall-clock planning time (s).
        seed: the seed used, or None.
        info: solver-specific details. Infeasible results put the smallest budget the
            solver can reach in ``info["min_budget_bytes"]`` (or None if unknown).
        evaluation: the evaluator's verdict on ``plan``, filled in by :func:`solve`.
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


@runtime_checkable
class Solver(Protocol):
    """Plans one instance under one budget (bytes)."""

    def solve(self, instance: Instance, budget_bytes: int, *, time_limit_s: float | None = None,
              seed: int | None = None) -> SolveResult: ...


def int_param(name: str, value: Any, minimum: int | None = None) -> int:
    """A solver hyperparameter that must be an integer (not a bool) >= `minimum`.

    Raises:
        ValueError: naming the parameter, the rule and the value given.
    """
    import numbers
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return int(value)


def real_param(name: str, value: Any, *, minimum: float | None = None,
               positive: bool = False) -> float:
    """A solver hyperparameter that must be a finite real number (not a bool), >=
    `minimum`, and > 0 if `positive`.

    Raises:
        ValueError: naming the parameter, the rule and the value given.
    """
    import math
    import numbers
    if (isinstance(value, bool) or not isinstance(value, numbers.Real)
            or not math.isfinite(value)):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum:g}, got {value!r}")
    if positive and not value > 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return float(value)


def bool_param(name: str, value: Any) -> bool:
    """A solver hyperparameter that must be true or false.

    Raises:
        ValueError: naming the parameter and the value given.
    """
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")
    return value


def registered_solvers() -> dict[str, EntryPoint]:
    """The solvers registered under the ``slackopt.solvers`` entry-point group, by name."""
    eps = entry_points(group=ENTRY_POINT_GROUP)
    return {ep.name: ep for ep in sorted(eps, key=lambda e: e.name)}


def get_solver(name: str, **params: Any) -> Solver:
    """Instantiate the registered solver `name` with keyword hyperparameters.

    Raises:
        SolverError: if no solver of that name is registered, or it rejects the parameters.
    """
    eps = registered_solvers()
    if name not in eps:
        known = ", ".join(eps) or "none (is slackopt installed? pip install -e .)"
        raise SolverError(f"unknown solver '{name}'; registered solvers: {known}")
    cls = eps[name].load()
    try:
        return cls(**params)
    except (TypeError, ValueError) as e:
        raise SolverError(f"solver '{name}': bad parameters {params}: {e}") from None


def solver_name(solver: Solver) -> str:
    """The registered name of a solver object (its ``name`` attribute, else its class)."""
    return getattr(solver, "name", type(solver).__name__)


def solve(
    instance: Instance,
    solver: str | Solver,
    budget: float | int | str,
    *,
    time_limit_s: float | None = None,
    seed: int | None = None,
    **params: Any,
) -> SolveResult:
    """Plan `instance` under `budget` with `solver` and evaluate the plan.

    Args:
        instance: the problem.
        solver: a registered name ("slackswap") or a solver object.
        budget: fraction of P (0.5), bytes (int), or a size string ("11.5GB").
        time_limit_s: passed to the solver.
        seed: passed to the solver.
        **params: hyperparameters when `solver` is a name.

    Returns:
        The SolveResult with ``evaluation`` set (the plan simulated under the budget) and
        ``planning_time_s`` measured here if the solver left it at 0.

    Views (``Tensor.storage``): the solver plans ``instance.lowered`` (one saved unit per
    storage) and its plan is expanded back to every view (:meth:`Plan.from_lowered`), so
    every solver handles aliasing without knowing about it; ``info`` and the solver's own
    messages name storages by their base tensor.

    Raises:
        SolverError: unknown solver or bad parameters. BudgetError: unparseable budget.
    """
    if isinstance(solver, str):
        solver = get_solver(solver, **params)
    elif not isinstance(solver, Solver):
        raise SolverError(f"{solver!r} is neither a registered solver name nor an object with "
                          "solve(instance, budget_bytes, *, time_limit_s, seed)")
    elif params:
        raise SolverError("hyperparameters go to the solver's constructor when passing an object")
    m = budget_bytes(instance, budget)
    warm_up()  # load the compiled evaluator outside the planning-time clock
    low = instance.lowered
    t0 = time.perf_counter()
    res = solver.solve(low, m, time_limit_s=time_limit_s, seed=seed)
    elapsed = time.perf_counter() - t0
    if not res.planning_time_s:
        res.planning_time_s = elapsed
    if res.plan is not None and low is not instance:
        res.plan = Plan.from_lowered(instance, res.plan)
    if res.plan is not None:
        res.evaluation = simulate(instance, res.plan, m)
        if res.status in PLAN_STATUSES and not res.evaluation.feasible:
            res.status = "infeasible"
    return res
