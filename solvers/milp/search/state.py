"""The state of one search: the incumbent, the bounds by source (certified or not), the
phases' log and the progress line; and the outcome it makes at the end (status, gap,
``info``)."""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from slackopt.instance import Instance
from slackopt.plan import Plan
from slackopt.solver import OPTIMAL_REL_TOL
from slackopt.solverbase import Outcome
from slackopt.solvers.milp.bounds.source import BoundContext, BoundValue
from slackopt.solvers.milp.linear.lin import _INF
from slackopt.solvers.milp.search.floor import all_swap, min_budget
from slackopt.solvers.milp.search.incumbent import Incumbent


class Settings(Protocol):
    """The solver parameters the phases read (:class:`~.solver.MILP`'s, whose docstring
    gives each one's meaning)."""

    backend: str
    rel_gap: float
    threads: int
    verbose: bool
    warm_start: bool
    steps: str | int | None
    max_iterations: int
    patience: int | None
    local_search: bool
    search_calls: int
    kick_plans: int
    enum_plans: int
    lns_plans: int

    @property
    def model_options(self) -> dict[str, bool]: ...


class _Progress:
    """Incumbent, bound and gap on stderr, for solves longer than 3 s (at most every 2 s,
    and once at the end). Off when `show` is false."""

    def __init__(self, show: bool, t0: float, T_star: float) -> None:
        self.show, self.t0, self.T_star = show, t0, T_star
        self.upper, self.lower = _INF, T_star
        self.last = t0
        self.printed = False

    def update(self, upper: float, lower: float | None, what: str) -> None:
        self.upper = min(self.upper, upper)
        if lower is not None:
            self.lower = max(self.lower, lower)
        now = time.perf_counter()
        if self.show and now - self.t0 >= 3.0 and now - self.last >= 2.0:
            self._line(what, now)

    def _line(self, what: str, now: float) -> None:
        self.last, self.printed = now, True
        up = f"{self.upper * 1e3:.4f} ms" if self.upper < _INF else "none"
        gap = (f"{(self.upper - self.lower) / self.lower:.3%}"
               if self.upper < _INF and self.lower > 0 else "-")
        print(f"milp {now - self.t0:7.1f} s  {what:<14}  plan {up}  bound "
              f"{self.lower * 1e3:.4f} ms  gap {gap}", file=sys.stderr, flush=True)

    def done(self, status: str, upper: float | None, lower: float | None) -> None:
        if self.printed:
            if upper is not None:
                self.upper = upper
            if lower is not None:
                self.lower = lower
            self._line(status, time.perf_counter())


@dataclass(frozen=True)
class PhaseStart:
    """What :meth:`_Search.mark` compares a phase's end with: the step of the fastest
    plan simulated (``upper_s``, s; None before the first), the largest certified bound
    (``lower_s``, s) and the certified bounds by source (s), before the phase ran."""

    upper_s: float | None
    lower_s: float
    bounds: dict[str, float]


@dataclass
class _Search:
    """The state every phase of the search (:data:`~.phases.PHASES`) reads and improves.

    Bounds: ``bounds`` holds the *certified* lower bounds by source (s): T*, the deficit
    bound (closed form), the enumeration (exhaustive), and the LP bounds whose value is a
    safe dual bound (:mod:`~slackopt.solvers.milp.certify.safe_lp`: valid in exact arithmetic
    whatever the LP solver's rounding). ``uncertified`` holds what a MILP solver reports
    as its dual bound (SCIP, HiGHS, CBC; an infeasible cut model): floating-point claims
    that no check here can confirm, so they are reported and may end the no-good loop, but
    never decide a status word or ``lower_bound_s``. :meth:`audit` drops any source whose
    bound exceeds the step of a plan the search has simulated (U): that proves the source
    wrong on this instance, so it is recorded in ``bound_errors`` and never clamped.
    """

    inst: Instance
    M: int
    seed: int
    tier: str
    t0: float
    deadline: float
    prog: _Progress
    inc: Incumbent
    info: dict[str, Any]
    bounds: dict[str, float] = field(default_factory=dict)
    uncertified: dict[str, float] = field(default_factory=dict)
    bound_errors: list[dict[str, Any]] = field(default_factory=list)
    phases: list[dict[str, Any]] = field(default_factory=list)
    log: list[dict[str, Any]] = field(default_factory=list)
    objective: float | None = None
    model_optimal: bool = False
    results: dict[str, BoundValue] = field(default_factory=dict)
    """What each bound source that ran returned, by its name."""
    end: tuple[str, str] | None = None
    """(status, reason) once a phase has settled the answer."""
    start: np.ndarray | None = None
    """The decisions of the plan to start from (``run.start``), or None."""

    @property
    def T_star(self) -> float:
        return float(self.inst.ideal_time_s)

    @property
    def lower(self) -> float:
        """The largest certified bound (s), at least T* (every op runs once, in order, on
        one stream)."""
        self.audit()
        return max([self.T_star, *self.bounds.values()])

    def left(self) -> float:
        """Seconds to the deadline."""
        return self.deadline - time.perf_counter()

    def bound_context(self) -> BoundContext:
        """What a bound source may use: the deadline, the seed, the incumbent's step and
        the earlier sources' values."""
        return BoundContext(deadline=self.deadline, seed=self.seed,
                            upper_s=self.inc.step_s if self.inc.dec is not None else None,
                            earlier=self.results)

    def bound(self, source: str, value_s: float | None, *, certified: bool = True) -> None:
        """Record a lower bound (s) from `source`; a source keeps its largest value."""
        if value_s is None or not math.isfinite(value_s):
            return
        d = self.bounds if certified else self.uncertified
        d[source] = max(d.get(source, -_INF), float(value_s))
        self.audit()

    def audit(self) -> None:
        """Drop every bound above U, the step of the fastest plan simulated (the
        evaluator's semantics is the definition: such a bound is wrong), into
        ``bound_errors``."""
        if self.inc.dec is None:
            return
        U = self.inc.step_s
        for d, kind in ((self.bounds, "certified"), (self.uncertified, "uncertified")):
            for src in [k for k, v in d.items() if v > U]:
                self.bound_errors.append({"source": src, "kind": kind, "bound_s": d.pop(src),
                                          "plan_step_s": U, "plan_source": self.inc.source})

    def best_source(self) -> str:
        lo = self.lower
        return next((k for k, v in self.bounds.items() if v == lo), "ideal step T*")

    def closed(self, *, uncertified: bool = False) -> bool:
        """The plan meets the bound: (U - L) / L <= OPTIMAL_REL_TOL; with `uncertified`,
        L may also be a MILP solver's own bound (only to end the no-good loop)."""
        lo = self.lower
        if uncertified and self.uncertified:
            lo = max(lo, *self.uncertified.values())
        return self.inc.dec is not None and (self.inc.step_s - lo) <= OPTIMAL_REL_TOL * lo

    def snapshot(self) -> PhaseStart:
        """U, L and the certified bounds by source now, before a phase runs (for
        :meth:`mark`)."""
        return PhaseStart(upper_s=None if self.inc.dec is None else self.inc.step_s,
                          lower_s=self.lower, bounds=dict(self.bounds))

    def mark(self, phase: str, before: PhaseStart) -> None:
        """Log `phase` in ``info["phases"]`` and show progress: U (``upper_s``) and L
        (``lower_s``) after it, both s; ``lifted_s``, how much it raised L (L after less
        L `before`; negative only where :meth:`audit` dropped a bound above a plan it
        found); ``lowered_s``, how much it lowered U (U `before` less U after; None
        while no plan ran before it); ``sources``, the certified bound of each source
        it raised (s), so that the lifts of a run name the loose sources."""
        upper = None if self.inc.dec is None else self.inc.step_s
        lower = self.lower
        self.phases.append({
            "phase": phase, "upper_s": upper, "lower_s": lower,
            "lifted_s": lower - before.lower_s,
            "lowered_s": None if before.upper_s is None or upper is None
            else before.upper_s - upper,
            "sources": {k: v for k, v in self.bounds.items()
                        if v > before.bounds.get(k, -_INF)},
            "seconds": round(time.perf_counter() - self.t0, 4)})
        self.prog.update(self.inc.step_s, lower, phase)

    def outcome(self) -> Outcome:
        """The Outcome: the phases' answer if one settled it, else "optimal"/"bounded" by
        the certified gap with a plan (the all-swap plan, the minimum budget's witness, is
        tried last when none was found), "timeout" without."""
        inst = self.inst
        status, reason = self.end if self.end is not None else ("bounded", None)
        if status == "bounded" and self.inc.dec is None:
            self.inc.consider(all_swap(inst), "all_swap")
            if self.inc.dec is None:
                status = "timeout"
        lower: float | None = self.lower
        if status == "infeasible":
            lower = None
            mb, fl, exact = min_budget(inst)
            self.info.update({"min_budget_bytes": mb, "min_budget_lower_bytes": fl,
                              "min_budget_exact": exact,
                              "min_budget_basis": "proven" if exact else "found"})
        U = self.inc.step_s if self.inc.dec is not None else None
        gap = None
        if U is not None and lower is not None and lower > 0:
            gap = (U - lower) / lower
        if status in ("optimal", "bounded"):
            status = "optimal" if gap is not None and gap <= OPTIMAL_REL_TOL else "bounded"
        self.info.update({
            "upper_bound_s": U, "lower_bound_s": lower, "gap": gap,
            "bounds": dict(self.bounds), "uncertified_bounds": dict(self.uncertified),
            "bound_errors": list(self.bound_errors),
            "plan_proven_optimal": status == "optimal", "model_optimal": self.model_optimal,
            "solve_time_s": time.perf_counter() - self.t0, "evaluations": self.inc.evaluations,
            "phases": self.phases, "plan_source": self.inc.source or None,
            "iterations": len(self.log), "log": self.log})
        if reason is not None:
            self.info["reason"] = reason
        self.prog.done(status, U, lower)
        plan = Plan(self.inc.dec, inst.saved_names) if self.inc.dec is not None else None
        # the model's value when a MILP solve gave one, else the search's own objective:
        # the simulated step of the plan returned
        objective = self.objective if self.objective is not None or plan is None else U
        out = Outcome(plan=plan, status=status, objective_s=objective,
                      lower_bound_s=lower, evaluation=self.inc.evaluation, info=self.info)
        if "min_budget_bytes" in self.info:  # stated here: no bisection in BaseSolver.solve
            out.min_budget_bytes = self.info["min_budget_bytes"]
        return out
