"""The exact tier's solver: :class:`MILP`, its parameters and tiers; :meth:`MILP.plan`
runs the phases of :data:`~.phases.PHASES` on one search state."""

from __future__ import annotations

import sys
import time
from typing import Any

from slackopt.instance import Instance
from slackopt.plan import Plan
from slackopt.solverbase import (
    DEPRECATED_SEED_PARAM,
    BaseSolver,
    Outcome,
    Param,
    Run,
    warm_up_instance,
)
from slackopt.solvers.milp.linear.backends import BACKENDS
from slackopt.solvers.milp.model.steps import model_floor
from slackopt.solvers.milp.search.floor import all_swap, min_budget
from slackopt.solvers.milp.search.incumbent import Incumbent
from slackopt.solvers.milp.search.lns import lns
from slackopt.solvers.milp.search.phases import PHASES
from slackopt.solvers.milp.search.state import _Progress, _Search

TIERS = ("auto", "full", "exact", "aggregated")
FULL_MAX_SAVED, FULL_MAX_OPS = 10, 48
"""The "auto" tier uses the full model up to this many saved tensors and ops..."""
EXACT_MAX_SAVED, EXACT_MAX_OPS = 128, 320
"""... one step per op (binary decisions only) up to this size, else aggregated steps."""
MODEL_OPTIONS = ("lagging", "binary_placement", "integral_copies", "fifo", "admission",
                 "integer_evictions")
"""The switches of the time-indexed model a :class:`MILP` parameter may set
(:class:`~slackopt.solvers.milp.model.builder.ModelOptions`)."""


class _StepsParam(Param):
    """``steps``: an int >= 1 (ops per step), "op", "layer" or None (the tier's default)."""

    def rule(self) -> str:
        return "'op', 'layer', " + super().rule()

    def check(self, value: Any) -> Any:
        if isinstance(value, str) and value in ("op", "layer"):
            return value
        return super().check(value)


class MILP(BaseSolver):
    """Exact tier: evaluator-judged search (seeds, enumeration, LNS, MILP) against
    certified lower bounds.

    Plans come from the cheap solvers' seeds, a local search, an exact enumeration (up to
    24 saved tensors), a large-neighbourhood search and the time-indexed MILP with
    no-good cuts; bounds from the deficit bound, the enumeration and LPs whose value is
    a safe dual bound (:mod:`~slackopt.solvers.milp.certify.safe_lp`). "optimal" only when a
    certified bound meets the simulated plan.

    Args:
        backend: "scip" (default), "highs" or "pulp".
        time_limit_s: default wall-clock limit (s) when ``solve`` gets none: 55 s (so
            that a command-line solve, interpreter start and imports included, ends
            within 60 s), or 300 s in the aggregated tier. The solve ends within the
            limit plus the backend's overrun past its own limit (each backend call gets
            90% of the time left, less 0.3 s).
        rel_gap: relative gap at which a MILP solve stops (the backend's gap, and the
            objective cutoff U / (1 + rel_gap)). Status "optimal" needs
            (U - L) / L <= ``OPTIMAL_REL_TOL`` (1e-4) whatever rel_gap is.
        threads: solver threads (OR-Tools' SCIP is sequential; CBC uses them; HiGHS's MIP
            search is sequential).
        warm_start: evaluate SlackSwap's plan and CP-SAT's best recompute-only plan first;
            the better one is the first incumbent (and SCIP's hint).
        tier: "auto", "full", "exact" or "aggregated" (see :func:`build_model`); "auto"
            picks full up to 10 saved tensors and 48 ops, exact up to 128 and 320,
            aggregated beyond.
        steps: override the step granularity ("op", "layer", or ops per step).
        max_iterations: most MILP solves in the no-good loop.
        patience: stop the no-good loop after this many solves in a row that raise
            neither the lower nor the upper bound, once a plan runs (before, the loop
            goes on to the limits: each solve cuts a plan the evaluator refused); None
            (default) picks none (run to the limits) in the full tier and 5 in the exact
            and aggregated tiers, whose looser relaxations admit many plans of equal
            model value, so cutting them one by one seldom raises the bound.
        local_search: evaluator-judged local search
            (:func:`~slackopt.solvers.milp.search.incumbent.improve`) after the seeds and around
            each new MILP incumbent, in every tier.
        search_calls: most candidate plans one local search considers (a work limit,
            not a time limit, so results do not depend on machine speed).
        kick_plans: most plans the iterated local search simulates
            (:func:`~slackopt.solvers.milp.search.incumbent.kick_search`, right after the first
            local search; a work limit). 0 turns it off.
        enum_plans: most plans the exact enumeration simulates, over all its passes
            (:class:`~slackopt.solvers.milp.search.enumeration.BranchAndBound`, gaps
            ``ENUM_GAPS``; instances with at most ``ENUM_MAX_SAVED`` saved tensors);
            each pass that ends within it proves a bound, the last one the optimum,
            and then the model is not built. 0 turns it off.
        lns_plans: most plans the large-neighbourhood search simulates
            (:func:`~slackopt.solvers.milp.search.lns.lns`, after the bounds, before the
            model; every tier). 0 turns it off.
        progress: print the incumbent, the bound and the gap on stderr as the solve
            goes (after each phase, at most every 2 s; only solves longer than 3 s);
            None (default): when stderr is a terminal.
        seed: deprecated (a FutureWarning when not 0): the seed when ``solve`` gets
            none; pass it to ``solve(seed=)``, the one seed source.
        verbose: print the backend's log.
        lagging, binary_placement, integral_copies, fifo, admission, integer_evictions:
            the model switches of :func:`build_model` (None: the tier's default).

    Raises:
        slackopt.solverbase.SolverParamError: a parameter of the wrong type or out of
            range, or an unknown one (a ValueError; the message names it and lists every
            valid key with its type, range and default).
    """

    name = "milp"
    warm_starts = True  # run.start is the first incumbent (phase "seeds")
    min_budget_search = False  # an infeasible answer states the minimum budget itself
    certified_bounds = True  # lower_bound_s is the best certified bound (docs/exact-tier.md);
    # compare marks its bounds "certified" (slackopt.compare.gaps.bound_source)
    param_specs = {
        "backend": Param(str, choices=BACKENDS), "time_limit_s": Param(float, positive=True,
                                                                       none=True),
        "rel_gap": Param(float, min=0.0), "threads": Param(int, min=1),
        "warm_start": Param(bool), "tier": Param(str, choices=TIERS),
        "steps": _StepsParam(int, min=1, none=True), "max_iterations": Param(int, min=1),
        "patience": Param(int, min=1, none=True), "local_search": Param(bool),
        "search_calls": Param(int, min=0), "kick_plans": Param(int, min=0),
        "enum_plans": Param(int, min=0),
        "lns_plans": Param(int, min=0),
        "seed": DEPRECATED_SEED_PARAM,
        "progress": Param(bool, none=True), "verbose": Param(bool),
        "lagging": Param(bool, none=True), "binary_placement": Param(bool, none=True),
        "integral_copies": Param(bool, none=True), "fifo": Param(bool, none=True),
        "admission": Param(bool, none=True), "integer_evictions": Param(bool, none=True),
    }

    def __init__(self, *, backend: str = "scip", time_limit_s: float | None = None,
                 rel_gap: float = 1e-4, threads: int = 1, warm_start: bool = True,
                 tier: str = "auto", steps: str | int | None = None,
                 max_iterations: int = 100, patience: int | None = None,
                 local_search: bool = True, search_calls: int = 20_000,
                 kick_plans: int = 20_000,
                 enum_plans: int = 1_000_000, lns_plans: int = 1_000_000, seed: int = 0,
                 progress: bool | None = None, verbose: bool = False,
                 lagging: bool | None = None, binary_placement: bool | None = None,
                 integral_copies: bool | None = None, fifo: bool | None = None,
                 admission: bool | None = None,
                 integer_evictions: bool | None = None) -> None:
        self.backend = backend
        self.time_limit_s = time_limit_s
        self.rel_gap = rel_gap
        self.threads = threads
        self.warm_start = warm_start
        self.tier = tier
        self.steps = steps
        self.max_iterations = max_iterations
        self.patience = patience
        self.local_search = local_search
        self.search_calls = search_calls
        self.kick_plans = kick_plans
        self.enum_plans = enum_plans
        self.lns_plans = lns_plans
        self.seed = seed
        self.progress = progress
        self.verbose = verbose
        self.lagging = lagging
        self.binary_placement = binary_placement
        self.integral_copies = integral_copies
        self.fifo = fifo
        self.admission = admission
        self.integer_evictions = integer_evictions

    @property
    def model_options(self) -> dict[str, bool]:
        """The model switches set (not None), for :func:`build_model`."""
        return {k: getattr(self, k) for k in MODEL_OPTIONS if getattr(self, k) is not None}

    def tier_for(self, inst: Instance) -> str:
        """The tier used for `inst` ("full", "exact" or "aggregated")."""
        if self.tier != "auto":
            return self.tier
        if inst.n_saved <= FULL_MAX_SAVED and inst.n_ops <= FULL_MAX_OPS:
            return "full"
        if inst.n_saved <= EXACT_MAX_SAVED and inst.n_ops <= EXACT_MAX_OPS:
            return "exact"
        return "aggregated"

    def decision_bound(self, instance: Instance, plan: Plan, budget_bytes: int, *,
                       time_limit_s: float = 30.0) -> tuple[float | None, dict]:
        """A lower bound (s) on every schedule of `plan`'s decisions (not only the
        runtime's): :func:`slackopt.solvers.milp.bounds.decision.decision_bound`, reached
        through the solver registry by :mod:`slackopt.experiments.runtime_gap`."""
        from slackopt.solvers.milp.bounds.decision import decision_bound

        return decision_bound(instance, plan, budget_bytes, time_limit_s=time_limit_s)

    # ------------------------------------------------------------------ min budget
    @staticmethod
    def min_budget(inst: Instance, work: int = 200_000, time_s: float = 30.0
                   ) -> tuple[int, int, bool]:
        """(min budget, model floor, exact), bytes: :func:`~.floor.min_budget`."""
        return min_budget(inst, work, time_s)

    # ------------------------------------------------------------------ solve
    @classmethod
    def warm_up(cls) -> None:
        """Compile the evaluator's, SlackSwap's and the enumeration's kernels: one solve
        of the warm-up chain at 0.8 P (the enumeration proves its optimum there), then
        the large-neighbourhood search's (a window search from the all-swap plan), whose
        phase that solve does not reach."""
        inst = warm_up_instance()
        M = int(0.8 * inst.P)
        cls(threads=1).solve(inst, M, time_limit_s=30.0, seed=0)
        inc = Incumbent(inst, M)
        inc.consider(all_swap(inst), "warm_up")
        lns(inc, 200, 0, time.perf_counter() + 30.0)

    def plan(self, instance: Instance, budget_bytes: int, run: Run) -> Outcome:
        """Plan `instance` under budget M = `budget_bytes` (bytes), within
        ``run.time_limit_s`` (else the ``time_limit_s`` parameter, else the default
        above), with ``run.seed`` (else the deprecated ``seed`` parameter; ``run.seed`` is
        set to the seed used).

        The search is the declared list :data:`PHASES`, run in order on one
        :class:`~.state._Search` state until a phase settles the answer or the plan meets
        the certified bound: each phase only ever improves the incumbent U (the fastest
        plan simulated) and the bounds (docs page "The exact tier").

        Returns:
            An Outcome (:meth:`BaseSolver.solve` makes it a SolveResult) with the best
            plan the evaluator scored (``plan``), the model's optimum or best value
            (``objective_s``, s; reported, never used to rank; the plan's simulated step
            when no MILP solve gave a value, e.g. the enumeration or the local search
            settled the answer, so it is never empty beside a plan) and the largest
            *certified* lower bound (``lower_bound_s``, s; :meth:`_Search.bound`).
            Status "optimal": (U - L) / L <= ``OPTIMAL_REL_TOL`` (1e-4) for a certified
            L, the plan is proven optimal for the evaluator; "bounded": a plan and a
            certified bound with a larger gap; "infeasible": no plan fits
            (``info["min_budget_bytes"]``); "timeout": no plan found that runs and none
            proven impossible. ``info``: ``upper_bound_s``, ``gap`` = (U - L) / L (never
            clamped), ``bounds`` (each certified source's bound, s),
            ``uncertified_bounds`` (the MILP solvers' dual bounds: reported, they decide
            nothing), ``bound_errors`` (sources dropped because their bound exceeded the
            step of a plan the search simulated: a proven error), ``plan_proven_optimal``,
            ``model_optimal`` (a MILP solve proved the model's optimum), ``backend``,
            ``settings``, ``tier``, ``solve_time_s``, ``model`` (size, options, build
            time), ``evaluations``, ``phases`` (after each phase that ran: U, L, how
            much it lifted L and lowered U, the sources it raised;
            :meth:`~.state._Search.mark`),
            ``start_plan_s`` (the start plan's simulated step, None if it does not run;
            only with a start plan), ``seeds``,
            ``iterations`` and their ``log``, ``enumeration``, ``lns``,
            ``deficit_lagrange`` (its op and multipliers), ``checkpoint_bound``,
            ``timing_bound``.
        """
        st = self._start(instance, int(budget_bytes), run)
        for phase in PHASES:
            if st.end is not None:
                break
            if not phase.runs_on(instance):
                continue  # a bound or search whose argument does not cover the instance
            before = st.snapshot()
            if phase.run(self, st) is not False:  # False: the phase is off or has nothing to do
                st.mark(phase.name, before)
            if st.end is None and st.closed():
                st.end = ("optimal", f"the {st.best_source()} bound meets the plan")
        return st.outcome()

    def _start(self, inst: Instance, M: int, run: Run) -> _Search:
        """The search state for one solve: limits, seed, tier, and the trivial answers
        (M >= P: keep-all is optimal; M below the model floor: infeasible)."""
        seed = run.seed = run.seed_or(self.seed)
        tier = self.tier_for(inst)
        limit = run.time_limit_s if run.time_limit_s is not None else self.time_limit_s
        if limit is None:
            limit = 300.0 if tier == "aggregated" else 55.0
        limit = float(limit)
        settings = dict(self.params, tier=tier, time_limit_s=limit, seed=seed)
        show = self.progress if self.progress is not None else sys.stderr.isatty()
        prog = _Progress(show, run.started, float(inst.ideal_time_s))
        st = _Search(inst=inst, M=M, seed=seed, tier=tier, t0=run.started,
                     deadline=run.started + limit, prog=prog,
                     inc=Incumbent(inst, M, on_improve=lambda v, src: prog.update(v, None, src)),
                     info={"backend": self.backend, "tier": tier, "settings": settings},
                     start=run.start)
        if M >= int(inst.P):
            st.model_optimal = True
            st.objective = st.T_star
            st.inc.consider(Plan.keep_all(inst).decisions.copy(), "keep_all")
            st.end = ("optimal", "M >= P: keep-all runs at the ideal step time")
        elif M < model_floor(inst):
            st.model_optimal = True
            st.end = ("infeasible", f"M = {M} B is below the model floor "
                                    f"{model_floor(inst)} B: no plan fits")
        return st
