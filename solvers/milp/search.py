"""The search: seeds, an evaluator-judged local search, then the MILP with no-good cuts
and the evaluator in the loop; statuses, bounds, progress (package docstring)."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from slackopt.bisection import smallest_true
from slackopt.instance import Instance
from slackopt.plan import KEEP, RECOMP, SWAP, Plan
from slackopt.simulate import simulate
from slackopt.solver import OPTIMAL_REL_TOL
from slackopt.solverbase import (
    DEPRECATED_SEED_PARAM,
    BaseSolver,
    Outcome,
    Param,
    Run,
    warm_up_instance,
)
from slackopt.solvers.milp.backends import _BACKEND_CLASSES, BACKENDS, lp_relaxation
from slackopt.solvers.milp.certify import seconds_below
from slackopt.solvers.milp.checkpoint import checkpoint_bound
from slackopt.solvers.milp.cpsat_seed import recompute_only_incumbent
from slackopt.solvers.milp.deficit_lagrange import lagrangian_deficit_bound
from slackopt.solvers.milp.enumerate import BranchAndBound, deficit_bound, enumerate_optimum
from slackopt.solvers.milp.incumbent import Incumbent, improve, kick_search
from slackopt.solvers.milp.lin import _INF, ModelTimeout
from slackopt.solvers.milp.lns import lns
from slackopt.solvers.milp.model import build_model, model_floor
from slackopt.solvers.milp.timing_bound import timing_bound
from slackopt.solvers.seeds import cheap_solver_names, seed_plans

TIERS = ("auto", "full", "exact", "aggregated")


# =========================================================================== the solver
FULL_MAX_SAVED, FULL_MAX_OPS = 10, 48
"""The "auto" tier uses the full model up to this many saved tensors and ops..."""
EXACT_MAX_SAVED, EXACT_MAX_OPS = 128, 320
"""... one step per op (binary decisions only) up to this size, else aggregated steps."""
CPSAT_WORK = 5.0
"""CP-SAT's work limit for the recompute-only seed, in its deterministic time units
(about seconds), so that the seed does not depend on machine speed."""
EXACT_LP_MAX_NONZEROS = 150_000
"""The exact tier solves the LP relaxation first (GLOP, for its rounding) only up to this
many nonzeros: beyond, GLOP's solve left the MILP no time to reach its root bound
(docs/bounds.md, "Settings and the measurements behind them")."""
ENUM_MAX_SAVED = 27
"""The exact enumeration (:mod:`~slackopt.solvers.milp.enumerate`) runs only up to this
many saved tensors: beyond, its bounds leave too many plans for the work limit, and
the time is the model's. 27 since the admission bound
(:mod:`~slackopt.solvers.milp.admission`): it covers the suite's VGG-16 (27 saved
tensors; 1% or better on its four rows in seconds); the 29- and 32-tensor instances of
instances/small and instances/teaching were not measured with it and stay with the
model."""
ENUM_GAPS = (0.008, 0.004, 0.001, 0.0)
"""The enumeration's passes, by relative gap (:meth:`BranchAndBound.run
<slackopt.solvers.milp.enumerate.BranchAndBound.run>`): each complete pass proves a
bound of ``U / (1 + gap)``, the last one (gap 0) the optimum; the passes stop at the
first that does not complete. A coarse gap prunes far more (VGG-16 on GH200 at 0.5 P:
the 0.8% pass ends in seconds, the 0.4% pass not in 240 s), so a row whose optimum is
out of reach still gets a certified gap."""
ENUM_PASS_SHARE = 0.5
"""Share of the time left that each pass but the last may use."""
SEED_SHARE = 0.2
"""Share of the time limit the cheap seed solvers may use together (phase 1); a solver
not started when it is spent is skipped, unless no plan was found yet."""
SEED_LIMIT_S = 10.0
"""Time limit (s) passed to each cheap seed solver."""
CHECKPOINT_SHARE = 0.4
"""Share of the time left that the checkpoint LP (phase "checkpoint_bound" of
:data:`PHASES`) may use: on the benchmark suite's largest instances its LP does not end
in any time the row has (T5-large on H100 at 0.3 P: 229 of 300 s, no bound), and with the
whole time left it starved the timing LP and the large-neighbourhood search after it."""
TIMING_LP_SHARE = 0.5
"""Share of the time left that the timing model's LP relaxation (phase "timing_lp" of
:data:`PHASES`, before the large-neighbourhood search) may use: a certified bound that on
the benchmark suite's LLM rows closes gaps the checkpoint LP leaves (Llama-3-8B at 0.3 P,
4k tokens on H100: 2.07% to 0.18%, in 6 s), which the search would otherwise only reach
after the large-neighbourhood search had used the time limit."""
TIMING_SHARE = 0.7
"""Share of the time left that the timing MILP bound (phase "timing_bound" of
:data:`PHASES`) may use; the rest is the time-indexed model's."""
BUILD_S_PER_UNIT = 5e-6
"""Model build time (s) per op x saved tensor, an estimate from above (docs/speed.md,
"Building the MILP"): the model is skipped when the time left is under three times this
estimate."""


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


def _floor_plans(inst: Instance) -> dict[str, np.ndarray]:
    """The plans that use the least memory by construction, by name: ``all_swap``, and,
    for when a host pinned-memory limit forbids it, ``recompute_else_swap`` and
    ``recompute_else_keep`` (recompute every tensor that can be rebuilt, swap or keep the
    others). They witness the minimum budget (:meth:`MILP.min_budget`) and seed every
    search (phase 1)."""
    rec = np.isfinite(np.asarray(inst.c, dtype=float))
    sized = np.asarray(inst.s) > 0
    return {"all_swap": _all_swap(inst),
            "recompute_else_swap": np.where(rec, RECOMP, np.where(sized, SWAP, KEEP)
                                            ).astype(np.int8),
            "recompute_else_keep": np.where(rec, RECOMP, KEEP).astype(np.int8)}


def _all_swap(inst: Instance) -> np.ndarray:
    """The decisions that swap every saved tensor with bytes (keep the empty ones)."""
    return np.where(np.asarray(inst.s) > 0, SWAP, KEEP).astype(np.int8)


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
    a safe dual bound (:mod:`~slackopt.solvers.milp.certify`). "optimal" only when a
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
            (:func:`~slackopt.solvers.milp.incumbent.improve`) after the seeds and around
            each new MILP incumbent, in every tier.
        search_calls: most candidate plans one local search considers (a work limit,
            not a time limit, so results do not depend on machine speed).
        kick_plans: most plans the iterated local search simulates
            (:func:`~slackopt.solvers.milp.incumbent.kick_search`, right after the first
            local search; a work limit). 0 turns it off.
        enum_plans: most plans the exact enumeration simulates, over all its passes
            (:class:`~slackopt.solvers.milp.enumerate.BranchAndBound`, gaps
            ``ENUM_GAPS``; instances with at most ``ENUM_MAX_SAVED`` saved tensors);
            each pass that ends within it proves a bound, the last one the optimum,
            and then the model is not built. 0 turns it off.
        lns_plans: most plans the large-neighbourhood search simulates
            (:func:`~slackopt.solvers.milp.lns.lns`, after the bounds, before the
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
    certified_bounds = True  # lower_bound_s is the best certified bound (package docstring);
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
        runtime's): :func:`slackopt.solvers.milp.decision_bound.decision_bound`, reached
        through the solver registry by :mod:`slackopt.experiments.runtime_gap`."""
        from slackopt.solvers.milp.decision_bound import decision_bound

        return decision_bound(instance, plan, budget_bytes, time_limit_s=time_limit_s)

    # ------------------------------------------------------------------ min budget
    @staticmethod
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
        for dec in _floor_plans(inst).values():
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
        inc.consider(_all_swap(inst), "warm_up")
        lns(inc, 200, 0, time.perf_counter() + 30.0)

    def plan(self, instance: Instance, budget_bytes: int, run: Run) -> Outcome:
        """Plan `instance` under budget M = `budget_bytes` (bytes), within
        ``run.time_limit_s`` (else the ``time_limit_s`` parameter, else the default
        above), with ``run.seed`` (else the deprecated ``seed`` parameter; ``run.seed`` is
        set to the seed used).

        The search is the declared list :data:`PHASES`, run in order on one
        :class:`_Search` state until a phase settles the answer or the plan meets the
        certified bound: each phase only ever improves the incumbent U (the fastest plan
        simulated) and the bounds (package docstring, "Search").

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
            time), ``evaluations``, ``phases`` (U and L after each phase),
            ``start_plan_s`` (the start plan's simulated step, None if it does not run;
            only with a start plan), ``seeds``,
            ``iterations`` and their ``log``, ``enumeration``, ``lns``,
            ``deficit_lagrange`` (its op and multipliers), ``checkpoint_bound``,
            ``timing_bound``.
        """
        st = self._start(instance, int(budget_bytes), run)
        for name, phase in PHASES:
            if st.end is not None:
                break
            if phase(self, st) is not False:  # False: the phase is off or has nothing to do
                st.mark(name)
            if st.end is None and st.closed():
                st.end = ("optimal", f"the {st.best_source()} bound meets the plan")
        return st.outcome(self)

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


# =========================================================================== the search
@dataclass
class _Search:
    """The state every phase of :meth:`MILP.plan` reads and improves.

    Bounds: ``bounds`` holds the *certified* lower bounds by source (s): T*, the deficit
    bound (closed form), the enumeration (exhaustive), and the LP bounds whose value is a
    safe dual bound (:mod:`~slackopt.solvers.milp.certify`: valid in exact arithmetic
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
    timing_lp: float | None = None
    """The timing model's certified LP bound (model units) once phase "timing_lp" ended."""
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

    def mark(self, phase: str) -> None:
        """Log U and L after `phase` (``info["phases"]``) and show progress."""
        self.phases.append({"phase": phase,
                            "upper_s": None if self.inc.dec is None else self.inc.step_s,
                            "lower_s": self.lower,
                            "seconds": round(time.perf_counter() - self.t0, 4)})
        self.prog.update(self.inc.step_s, self.lower, phase)

    def outcome(self, solver: MILP) -> Outcome:
        """The Outcome: the phases' answer if one settled it, else "optimal"/"bounded" by
        the certified gap with a plan (the all-swap plan, the minimum budget's witness, is
        tried last when none was found), "timeout" without."""
        inst = self.inst
        status, reason = self.end if self.end is not None else ("bounded", None)
        if status == "bounded" and self.inc.dec is None:
            self.inc.consider(_all_swap(inst), "all_swap")
            if self.inc.dec is None:
                status = "timeout"
        lower: float | None = self.lower
        if status == "infeasible":
            lower = None
            mb, fl, exact = solver.min_budget(inst)
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


# --------------------------------------------------------------------------- phases
def _seeds(solver: MILP, st: _Search) -> bool | None:
    """(1) Seeds, the anytime floor: the start plan (``run.start``, when
    :func:`slackopt.solve` got one), the plans of :func:`_floor_plans` (all-swap, and
    recompute what can be rebuilt with the rest swapped or kept); with ``warm_start``,
    the plans of the cheap registered solvers
    (:func:`~slackopt.solvers.seeds.cheap_solver_names`: SlackSwap, the baselines, the
    production planners), their decisions re-simulated under the barrier-free runtime,
    sharing at most ``SEED_SHARE`` of the limit, then CP-SAT's best recompute-only plan (a
    work limit, :data:`CPSAT_WORK`). The incumbent is never slower than any of them."""
    inst, M = st.inst, st.M
    if st.start is not None:
        v = st.inc.consider(st.start, "start_plan")
        st.info["start_plan_s"] = v if math.isfinite(v) else None  # None: it does not run
    for source, dec in _floor_plans(inst).items():
        st.inc.consider(dec, source)
    if not solver.warm_start:
        return
    end = time.perf_counter() + SEED_SHARE * max(0.0, st.left())
    plans, log = seed_plans(inst, M, st.seed, cheap_solver_names(), SEED_LIMIT_S, end)
    for nm, key in plans:
        st.inc.consider(np.frombuffer(key, dtype=np.int8).copy(), nm)
    st.info["seeds"] = [{k: v for k, v in e.items() if k != "_key"} for e in log]
    if st.tier != "aggregated" and st.left() > 0.5:
        dec = recompute_only_incumbent(inst, M, st.left() - 0.2, st.seed,
                                       deterministic_time=CPSAT_WORK)
        if dec is not None:
            st.inc.consider(dec, "cpsat_recompute_only")
    if st.inc.dec is not None and st.inc.step_s <= st.T_star * (1 + 1e-12):
        st.model_optimal = True
        st.objective = st.T_star
        st.end = ("optimal", "a seed plan runs at the ideal step time T*")


def _local_search(solver: MILP, st: _Search) -> bool | None:
    """(2) Local search around the incumbent (fixed work, deterministic). The searches
    that yield plans run to their own work limits and the deadline only cuts them short,
    so a longer limit replays the same steps and adds to them; the bound phases before
    it (the LPs) take wall time, not plans."""
    if not solver.local_search or st.inc.dec is None:
        return False
    improve(st.inc, solver.search_calls, st.seed, st.deadline)
    return True


def _kicks(solver: MILP, st: _Search) -> bool | None:
    """(2') Iterated local search (solvers/milp/incumbent.py, :func:`kick_search`): kicks
    of 2 to 5 tensors from the incumbent, each followed by a descent over the 1-flips
    and the rebuild exchanges; fixed work (``kick_plans``), deterministic."""
    if not solver.local_search or solver.kick_plans <= 0 or st.inc.dec is None:
        return False
    st.info["kick_plans"] = kick_search(st.inc, solver.kick_plans, st.seed, st.deadline)
    return True


def _deficit(solver: MILP, st: _Search) -> bool | None:
    """(2a) The deficit bound: the cheapest way to make room at each op (closed form,
    valid for every plan; solvers/milp/enumerate.py). Certified: it is computed in
    floating point from the instance's data and lowered by a relative 1e-12. Then its
    Lagrangian form with the offloads' copy times (solvers/milp/deficit_lagrange.py;
    certified: its value at the multipliers found, re-summed with ``math.fsum`` and
    lowered by a margin that covers its rounding)."""
    st.bound("deficit", deficit_bound(st.inst, st.M) * (1.0 - 1e-12))
    lb, linfo = lagrangian_deficit_bound(st.inst, st.M, deadline=st.deadline - 0.3)
    st.info["deficit_lagrange"] = linfo
    st.bound("deficit_lagrange", lb)


def _enumeration(solver: MILP, st: _Search) -> bool | None:
    """(2b) Exact enumeration on instances with at most ``ENUM_MAX_SAVED`` saved tensors:
    branch and bound over the decision vectors with the evaluator at the leaves (fixed
    work, ``enum_plans`` plans over all passes), in passes of decreasing gap
    (``ENUM_GAPS``, each but the last within ``ENUM_PASS_SHARE`` of the time left). A
    pass that ends within its limits proves that no plan runs faster than the incumbent
    / (1 + gap), a certified bound since every vector was simulated or pruned by a bound
    valid for all its completions; the last pass (gap 0) proves the optimum, or that no
    plan runs."""
    if solver.enum_plans <= 0 or st.inst.n_saved > ENUM_MAX_SAVED:
        return False
    bb = BranchAndBound(st.inst, st.M)
    passes: list[dict[str, Any]] = []
    total = {"complete": False, "simulated": 0, "pruned_time": 0, "pruned_memory": 0,
             "pruned_admission": 0, "space": 0, "passes": passes}
    st.info["enumeration"] = total
    for gap in ENUM_GAPS:
        now = time.perf_counter()
        end = st.deadline if gap == 0.0 else min(
            st.deadline, now + ENUM_PASS_SHARE * max(0.0, st.deadline - now))
        en = bb.run(st.inc, solver.enum_plans - total["simulated"], end, gap=gap)
        passes.append({"gap": gap, "complete": en.complete, "bound_s": en.bound_s,
                       "simulated": en.simulated})
        for key in ("simulated", "pruned_time", "pruned_memory", "pruned_admission"):
            total[key] += getattr(en, key)
        total["space"], total["complete"] = en.space, en.complete and gap == 0.0
        if not en.complete:
            return
        if st.inc.dec is None:
            total["complete"] = True
            st.end = ("infeasible", "every decision vector was simulated or pruned by the "
                                    "memory bound: none runs")
            return
        st.bound("enumeration", en.bound_s)
    st.end = ("optimal", "every decision vector was simulated or pruned by a bound valid "
                         "for all its completions")


def _checkpoint(solver: MILP, st: _Search) -> bool | None:
    """(3a) The checkpoint LP bound (solvers/milp/checkpoint.py): a small LP over the
    decisions, valid for every plan; its value is a safe dual bound (certified). Within
    ``CHECKPOINT_SHARE`` of the time left."""
    tc = time.perf_counter()
    share = max(0.05, CHECKPOINT_SHARE * (st.left() - 0.3))
    cb = checkpoint_bound(st.inst, st.M, share, deadline=min(st.deadline - 0.3, tc + share))
    st.info["checkpoint_bound"] = {"bound_s": cb, "seconds": round(time.perf_counter() - tc, 4)}
    st.bound("checkpoint_lp", cb)


def _lns(solver: MILP, st: _Search) -> bool | None:
    """(3b) Large-neighbourhood search (solvers/milp/lns.py): windows of saved tensors
    searched exactly by the enumeration's branch and bound, the other tensors fixed to
    the incumbent; fixed work (``lns_plans``), deterministic."""
    if solver.lns_plans <= 0 or st.inc.dec is None:
        return False
    ln = lns(st.inc, solver.lns_plans, st.seed, st.deadline)
    st.info["lns"] = {"windows": ln.windows, "simulated": ln.simulated,
                      "improved": ln.improved, "passes": ln.passes,
                      "window_size": ln.window_size, "converged": ln.converged}


def _timing_lp(solver: MILP, st: _Search) -> bool | None:
    """(3a') The timing model's LP relaxation (solvers/milp/timing_bound.py) within
    ``TIMING_LP_SHARE`` of the time left: its safe dual bound is certified. It does not
    depend on the incumbent, so it runs before the large-neighbourhood search, which
    may use the rest of the time limit; phase "timing_bound" reuses its value."""
    tt = time.perf_counter()
    tb, tinfo = timing_bound(st.inst, st.M, TIMING_LP_SHARE * (st.left() - 0.3),
                             deadline=st.deadline - 0.3, integer=False)
    st.timing_lp = tinfo.get("lp_bound")
    st.info["timing_lp"] = {"bound_s": tb, "seconds": round(time.perf_counter() - tt, 4),
                            "status": tinfo.get("status", tinfo.get("lp_status")),
                            "ops_timed": tinfo.get("ops_timed")}
    st.bound("timing_lp", tb)


def _timing(solver: MILP, st: _Search) -> bool | None:
    """(3c) The timing MILP bound (solvers/milp/timing_bound.py) within ``TIMING_SHARE``
    of the time left: its LP relaxation's safe dual bound (from phase "timing_lp" when it
    ended) is certified; SCIP's dual bound of the MILP is recorded as uncertified. The
    plans read from the assignments of its solves that ended are candidates, in solve
    order, each improvement followed by a local search (so a longer limit replays these
    steps)."""
    tt = time.perf_counter()
    tb, tinfo = timing_bound(st.inst, st.M, TIMING_SHARE * (st.left() - 0.3),
                             deadline=st.deadline - 0.3, seed=st.seed,
                             upper_s=st.inc.step_s if st.inc.dec is not None else None,
                             lp_value=st.timing_lp)
    st.info["timing_bound"] = {"bound_s": tb, "seconds": round(time.perf_counter() - tt, 4),
                               "status": tinfo.get("status"),
                               "milp_bound_s": tinfo.get("milp_bound_s")}
    for tdec in tinfo.get("candidates", []):
        before = st.inc.step_s
        st.inc.consider(tdec, "timing_bound")
        if st.inc.step_s < before and solver.local_search:
            improve(st.inc, solver.search_calls, st.seed, st.deadline)
    st.bound("timing_lp", tb)
    st.bound("timing_milp", tinfo.get("milp_bound_s"), certified=False)


def _model(solver: MILP, st: _Search) -> bool | None:
    """(3) The time-indexed model: its LP relaxation (exact/aggregated tiers; a safe dual
    bound, certified; its rounding is a candidate), then the MILP warm-started with the
    incumbent, with an objective cutoff and a no-good cut per simulated plan, each new
    MILP incumbent followed by a local search. The MILP's dual bound is uncertified: it
    ends the loop when it meets U, and is reported, but decides no status."""
    inst, tier = st.inst, st.tier
    # Building it is pure Python (BUILD_S_PER_UNIT); skip it when it cannot pay off before
    # the deadline.
    est = BUILD_S_PER_UNIT * inst.n_ops * max(1, inst.n_saved)
    if st.left() < 3.0 * est + 0.5:
        st.info["model"] = {"skipped": f"{st.left():.2f} s left, the model takes about "
                                       f"{est:.2f} s to build"}
        return False
    tb = time.perf_counter()
    try:
        model = build_model(inst, st.M, tier=tier, steps=solver.steps,
                            deadline=st.deadline - 0.3, **solver.model_options)
    except ModelTimeout as e:
        st.info["model"] = {"skipped": str(e)}
        return False
    st.info["model"] = dict(model.info, build_s=time.perf_counter() - tb)
    to_s = model.t_unit
    if tier == "aggregated" or (tier == "exact"
                                and model.info["nonzeros"] <= EXACT_LP_MAX_NONZEROS):
        _model_lp(solver, st, model)
    if st.left() < 2.0 * est + 0.5:
        return  # loading the model into the backend takes about as long as building it
    # the gap the backend closes and the cutoff's margin: rel_gap, or half of
    # OPTIMAL_REL_TOL when rel_gap is not larger
    gap_tol = (solver.rel_gap if solver.rel_gap > OPTIMAL_REL_TOL
               else min(solver.rel_gap, 0.5 * OPTIMAL_REL_TOL))
    try:
        backend = _BACKEND_CLASSES[solver.backend](
            model.lin, threads=solver.threads, seed=st.seed, rel_gap=gap_tol,
            verbose=solver.verbose, deadline=st.deadline - 0.5)
    except ModelTimeout as e:
        st.info["backend_skipped"] = str(e)
        return
    taus = [j for j, cj in enumerate(model.lin.obj) if cj]
    cut: set[bytes] = set()
    inc = st.inc

    def add_cut(dec: np.ndarray) -> None:
        key = np.asarray(dec, dtype=np.int8).tobytes()
        if key not in cut:
            cut.add(key)
            terms, lo = model.nogood(np.asarray(dec, dtype=np.int8))
            backend.add_row(terms, lo, _INF)

    # Objective cutoff: only plans whose model value beats the incumbent matter.
    def cutoff() -> float:
        return inc.step_s / to_s / (1.0 + gap_tol) if inc.dec is not None else _INF

    cut_row = backend.add_row([(j, 1.0) for j in taus], -_INF, cutoff())
    if inc.dec is not None:
        add_cut(inc.dec)
    patience = solver.patience if solver.patience is not None else (
        None if tier == "full" else 5)
    stale = 0
    for it in range(solver.max_iterations):
        before = (st.uncertified.get("model_milp"), inc.step_s)
        left = st.left()
        if left <= 0.3:
            break
        backend.set_row_hi(cut_row, cutoff())
        hint = model.hint(inc.dec) if inc.dec is not None else None
        # a margin for the backend's overrun past its limit and the decoding after it
        sol = backend.solve(max(0.05, 0.9 * left - 0.3), hint)
        entry: dict[str, Any] = {"iteration": it, "status": sol.status,
                                 "seconds": round(sol.seconds, 4)}
        if sol.message:
            entry["message"] = sol.message
        if sol.status == "infeasible":
            # the backend says no plan left beats the cutoff (every cut plan was
            # simulated): an uncertified claim that U is optimal within gap_tol
            st.model_optimal = True
            if inc.dec is not None:
                st.bound("model_milp", min(inc.step_s, seconds_below(0.0, cutoff(), to_s)),
                         certified=False)
                if st.objective is None:
                    st.objective = cutoff() * to_s
            entry["lower_s"] = st.lower
            st.log.append(entry)
            break
        b = sol.bound
        if sol.status == "optimal" and b is None and sol.objective is not None:
            b = sol.objective - gap_tol * abs(sol.objective)
        if sol.status == "optimal":
            st.model_optimal = True
        if it == 0 and sol.objective is not None:
            st.objective = sol.objective * to_s
        if sol.x is not None:
            dec = model.decode(sol.x)
            entry["objective_s"] = sol.objective * to_s if sol.objective is not None else None
            val = inc.consider(dec, f"milp:{it}")
            entry["simulated_s"] = None if val == _INF else val
            # the solver's other feasible solutions are plans too: score and cut them
            for xp in sol.pool:
                dp = model.decode(xp)
                inc.consider(dp, f"milp:{it}:pool")
                add_cut(dp)
            entry["pool"] = len(sol.pool)
            if solver.local_search and val < _INF and val <= inc.step_s:
                entry["search_calls"] = improve(inc, solver.search_calls, st.seed + it + 1,
                                                st.deadline)
            add_cut(dec)
        if b is not None:
            # every cut vector was simulated (>= U); the rest are >= the model's bound
            # in seconds rounded down like the certified values (a MILP optimum equal to
            # the plan's value otherwise reads one ulp above it)
            st.bound("model_milp", min(inc.step_s, max(st.T_star, seconds_below(0.0, b, to_s))),
                     certified=False)
            entry["bound_s"] = b * to_s
        entry.update({"lower_s": st.lower,
                      "upper_s": None if inc.dec is None else inc.step_s})
        st.log.append(entry)
        st.prog.update(inc.step_s, st.lower, f"milp {it}")
        if st.closed(uncertified=True):
            break
        if sol.status != "optimal":
            break          # the time limit stopped the backend: its bound is final
        # Patience applies once a plan runs: before, each solve cuts one more decision
        # vector the evaluator refused (the model does not see every runtime rule, e.g. a
        # host pinned-memory limit), and stopping could only end in "timeout".
        stale = (0 if inc.dec is None
                 or (st.uncertified.get("model_milp"), inc.step_s) != before else stale + 1)
        if patience is not None and stale >= patience:
            entry["stopped"] = f"{patience} solves without a better bound or plan"
            break
        if inc.dec is not None:
            add_cut(inc.dec)


def _model_lp(solver: MILP, st: _Search, model: Any) -> None:
    """The model's LP relaxation first: a certified bound within the time limit even when
    the MILP search is too large to finish (aggregated tier), and its rounding is a
    candidate plan (exact tier; a large LP would only take the time the MILP needs)."""
    tl = time.perf_counter()
    try:
        lp, xlp = lp_relaxation(model.lin, max(0.05, st.left() - 0.3),
                                deadline=st.deadline - 0.3)
    except ModelTimeout:
        lp = xlp = None
    entry: dict[str, Any] = {"iteration": "lp", "seconds": round(time.perf_counter() - tl, 4)}
    if lp is not None:
        entry["bound_s"] = seconds_below(0.0, lp, model.t_unit)
        st.bound("model_lp", entry["bound_s"])
    if xlp is not None:
        val = st.inc.consider(model.decode(xlp), "lp_rounding")
        entry["simulated_s"] = None if val == _INF else val
        if solver.local_search and val < _INF and val <= st.inc.step_s:
            entry["search_calls"] = improve(st.inc, solver.search_calls, st.seed, st.deadline)
    entry["lower_s"] = st.lower
    st.log.append(entry)


PHASES: tuple[tuple[str, Callable[[MILP, _Search], bool | None]], ...] = (
    ("seeds", _seeds),
    ("deficit_bound", _deficit),
    ("checkpoint_bound", _checkpoint),
    ("timing_lp", _timing_lp),
    ("local_search", _local_search),
    ("kicks", _kicks),
    ("enumeration", _enumeration),
    ("lns", _lns),
    ("timing_bound", _timing),
    ("milp", _model),
)
"""The search of :meth:`MILP.plan`, in order: (name in ``info["phases"]``, function of
the solver and the shared :class:`_Search` state, returning False when it is off or has
nothing to do, so that ``info["phases"]`` lists only the phases that ran). A phase that
settles the answer sets ``state.end``; the loop also stops when the plan meets the
certified bound. The bounds that do not depend on a plan (deficit, checkpoint LP, timing
LP) run right after the seeds: the local search and the large-neighbourhood search have
work limits that on instances with hundreds of saved tensors outlast a short time limit
(Llama-3-8B at 4k tokens on H100, 0.3 P, 30 s on a shared 2-core machine: the local
search took 17 s and the LPs were left without time, a 2.07% gap to the deficit bound)."""


MODEL_OPTIONS = ("lagging", "binary_placement", "integral_copies", "fifo", "admission",
                 "integer_evictions")
