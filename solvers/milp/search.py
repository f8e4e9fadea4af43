"""The search: seeds, an evaluator-judged local search, then the MILP with no-good cuts
and the evaluator in the loop; statuses, bounds, progress (package docstring)."""

from __future__ import annotations

import math
import sys
import time
from typing import Any

import numpy as np

from slackopt.bisection import smallest_true
from slackopt.instance import Instance
from slackopt.plan import KEEP, SWAP, Plan
from slackopt.simulate import simulate
from slackopt.solver import OPTIMAL_REL_TOL
from slackopt.solverbase import BaseSolver, Outcome, Param, Run, warm_up_instance
from slackopt.solvers.milp.backends import _BACKEND_CLASSES, BACKENDS, lp_relaxation
from slackopt.solvers.milp.checkpoint import checkpoint_bound
from slackopt.solvers.milp.enumerate import deficit_bound, enumerate_optimum
from slackopt.solvers.milp.incumbent import recompute_only_incumbent
from slackopt.solvers.milp.lns import lns
from slackopt.solvers.milp.model import _INF, ModelTimeout, build_model, model_floor
from slackopt.solvers.milp.primal import Incumbent, improve
from slackopt.solvers.milp.timing_bound import timing_bound

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
many nonzeros: on chain63 (290k) GLOP needed over 30 s and the MILP then ran out of time
before its root bound."""
ENUM_MAX_SAVED = 24
"""The exact enumeration (:mod:`~slackopt.solvers.milp.enumerate`) runs only up to this
many saved tensors: beyond, its bounds leave too many plans for the work limit, and
the time is the model's."""
TIMING_SHARE = 0.7
"""Share of the time left that the timing MILP bound (phase 3b) may use; the rest is the
time-indexed model's."""
BUILD_S_PER_UNIT = 5e-6
"""Model build time (s) per op x saved tensor, from above (GPT-2 XL: 1355 ops x 581
saved tensors, 3.0 s on a shared 2-core machine): the model is skipped when the time
left is under three times this estimate."""


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
    """Time-indexed MILP relaxation with the evaluator in the loop (module docstring).

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
            neither the lower nor the upper bound; None (default) picks none (run to the
            limits) in the full tier and 5 in the exact and aggregated tiers, whose
            looser relaxations admit many plans of equal model value, so cutting them
            one by one seldom raises the bound.
        local_search: evaluator-judged local search (:func:`~slackopt.solvers.milp.primal.improve`)
            after the seeds and around each new MILP incumbent, in every tier.
        search_calls: most candidate plans one local search considers (a work limit,
            not a time limit, so results do not depend on machine speed).
        enum_plans: most plans the exact enumeration simulates
            (:func:`~slackopt.solvers.milp.enumerate.enumerate_optimum`; instances with
            at most ``ENUM_MAX_SAVED`` saved tensors); a search that ends within it
            proves the optimum and the model is not built. 0 turns it off.
        lns_plans: most plans the large-neighbourhood search simulates
            (:func:`~slackopt.solvers.milp.lns.lns`, after the bounds, before the
            model; every tier). 0 turns it off.
        progress: print the incumbent, the bound and the gap on stderr as the solve
            goes (after each phase, at most every 2 s; only solves longer than 3 s);
            None (default): when stderr is a terminal.
        seed: default seed when ``solve`` gets none.
        verbose: print the backend's log.
        lagging, binary_placement, integral_copies, fifo, admission, integer_evictions:
            the model switches of :func:`build_model` (None: the tier's default).

    Raises:
        slackopt.solverbase.SolverParamError: a parameter of the wrong type or out of
            range, or an unknown one (a ValueError; the message names it and lists every
            valid key with its type, range and default).
    """

    name = "milp"
    min_budget_search = False  # an infeasible answer states the minimum budget itself
    param_specs = {
        "backend": Param(str, choices=BACKENDS), "time_limit_s": Param(float, positive=True,
                                                                       none=True),
        "rel_gap": Param(float, min=0.0), "threads": Param(int, min=1),
        "warm_start": Param(bool), "tier": Param(str, choices=TIERS),
        "steps": _StepsParam(int, min=1, none=True), "max_iterations": Param(int, min=1),
        "patience": Param(int, min=1, none=True), "local_search": Param(bool),
        "search_calls": Param(int, min=0), "enum_plans": Param(int, min=0),
        "lns_plans": Param(int, min=0),
        "seed": Param(int),
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
        through the solver registry by :mod:`slackopt.runtime_gap`."""
        from slackopt.solvers.milp.decision_bound import decision_bound

        return decision_bound(instance, plan, budget_bytes, time_limit_s=time_limit_s)

    # ------------------------------------------------------------------ min budget
    @staticmethod
    def min_budget(inst: Instance) -> tuple[int, int, bool]:
        """(min budget, model floor, exact), bytes. The model floor is a proven lower
        bound on the budget any plan needs (:func:`model_floor`); the min budget is the
        smallest budget at which the all-swap plan runs in the evaluator (bisection from
        the floor, within 0.1% of P), equal to the floor when it runs there (exact)."""
        floor = model_floor(inst)
        allswap = Plan(_all_swap(inst), inst.saved_names)
        if simulate(inst, allswap, floor).feasible:
            return floor, floor, True
        P = int(inst.P)
        hi = smallest_true(lambda m: simulate(inst, allswap, m).feasible, floor,
                           max(P, floor + 1), tol=max(1, int(math.ceil(1e-3 * P))))
        return hi, floor, False

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
        above), with ``run.seed`` (else the ``seed`` parameter; ``run.seed`` is set to
        the seed used).

        Phases, in this order (each only ever improves the incumbent U, the fastest plan
        simulated, and the bound L, the largest valid lower bound): (1) seeds: SlackSwap's
        plan and CP-SAT's best recompute-only plan; (2) evaluator-judged local search
        around the incumbent, at most ``search_calls`` candidates; (2a) the deficit bound
        (``deficit_bound``, valid for every plan; "optimal" when the plan meets it);
        (2b) on instances with
        at most ``ENUM_MAX_SAVED`` saved tensors, the exact enumeration (at most
        ``enum_plans`` plans simulated; when it completes the status is "optimal" with
        L = U, or "infeasible", and the model is skipped); (3a) the checkpoint LP bound;
        (3b) the large-neighbourhood search (``lns``, at most ``lns_plans`` plans
        simulated: windows of saved tensors searched exactly, the others fixed to the
        incumbent); (3c) the timing MILP bound (``timing_bound``: SCIP's dual bound, at
        most ``TIMING_SHARE`` of the time left, cut off at U; its assignment read as a
        plan is a candidate); (3) the model: its LP
        relaxation (exact/aggregated tiers) and the MILP with no-good cuts, warm-started
        with the incumbent, each new MILP incumbent followed by a local search.

        Returns:
            An Outcome (:meth:`BaseSolver.solve` makes it a SolveResult) with the best
            plan the evaluator scored (``plan``), the model's
            optimum or best value (``objective_s``, s; reported, never used to rank) and
            a lower bound valid for every plan (``lower_bound_s``, s). Status "optimal":
            (U - L) / L <= ``OPTIMAL_REL_TOL`` (1e-4), the plan is proven optimal for the
            evaluator; "bounded": a plan and a valid bound with a larger gap;
            "infeasible": no plan fits (``info["min_budget_bytes"]``); "timeout": no plan
            found that runs and none proven impossible. ``info``: ``upper_bound_s``,
            ``gap`` = (U - L) / L, ``plan_proven_optimal`` (status "optimal"),
            ``model_optimal`` (a MILP solve proved the model's optimum), ``backend``,
            ``settings``, ``tier``, ``solve_time_s``, ``model`` (size, options, build
            time), ``evaluations``, ``phases`` (U and L after each phase), ``iterations``
            and their ``log``, ``enumeration`` (complete, plans simulated, subtrees
            pruned by time and by memory, the number of decision vectors), ``lns``
            (windows searched, plans simulated, windows that improved, passes, last
            window size, converged).
        """
        t0 = run.started
        inst = instance
        M = int(budget_bytes)
        seed = self.seed if run.seed is None else int(run.seed)
        run.seed = seed
        tier = self.tier_for(inst)
        limit = run.time_limit_s if run.time_limit_s is not None else self.time_limit_s
        if limit is None:
            limit = 300.0 if tier == "aggregated" else 55.0
        limit = float(limit)
        deadline = t0 + limit
        T_star = float(inst.ideal_time_s)
        settings = dict(self.params, tier=tier, time_limit_s=limit, seed=seed)
        info: dict[str, Any] = {"backend": self.backend, "tier": tier, "settings": settings}
        model_optimal = False
        show = self.progress if self.progress is not None else sys.stderr.isatty()
        prog = _Progress(show, t0, T_star)
        inc = Incumbent(inst, M, on_improve=lambda v, src: prog.update(v, None, src))
        # every task runs at least once, in order, on one stream: T* bounds every plan
        lower = T_star
        phases: list[dict[str, Any]] = []

        def mark(phase: str) -> None:
            phases.append({"phase": phase, "upper_s": None if inc.dec is None else inc.step_s,
                           "lower_s": lower, "seconds": round(time.perf_counter() - t0, 4)})
            prog.update(inc.step_s, lower, phase)

        def closed() -> bool:
            """The plan meets the bound: (U - L) / L <= OPTIMAL_REL_TOL."""
            return inc.dec is not None and (inc.step_s - lower) <= OPTIMAL_REL_TOL * lower

        def result(status: str, lower: float | None, objective: float | None = None,
                   **extra: Any) -> Outcome:
            ub = inc.step_s if inc.dec is not None else None
            gap = None
            if ub is not None and lower is not None and lower > 0:
                gap = max(0.0, (ub - lower) / lower)
            if status in ("optimal", "bounded"):
                status = "optimal" if gap is not None and gap <= OPTIMAL_REL_TOL else "bounded"
            info.update({"upper_bound_s": ub, "lower_bound_s": lower, "gap": gap,
                         "plan_proven_optimal": status == "optimal",
                         "model_optimal": model_optimal,
                         "solve_time_s": time.perf_counter() - t0,
                         "evaluations": inc.evaluations, "phases": phases,
                         "plan_source": inc.source or None, **extra})
            prog.done(status, ub, lower)
            plan = Plan(inc.dec, inst.saved_names) if inc.dec is not None else None
            out = Outcome(plan=plan, status=status, objective_s=objective, lower_bound_s=lower,
                          info=info)
            if "min_budget_bytes" in info:  # stated here: no bisection in BaseSolver.solve
                out.min_budget_bytes = info["min_budget_bytes"]
            return out

        # Trivial cases.
        if M >= int(inst.P):
            model_optimal = True
            inc.consider(Plan.keep_all(inst).decisions.copy(), "keep_all")
            return result("optimal", T_star, T_star, iterations=0,
                          reason="M >= P: keep-all runs at the ideal step time")
        floor = model_floor(inst)
        if M < floor:
            model_optimal = True
            mb, fl, exact = self.min_budget(inst)
            info.update({"min_budget_bytes": mb, "min_budget_lower_bytes": fl,
                         "min_budget_exact": exact})
            return result("infeasible", None, iterations=0,
                          reason=f"M = {M} B is below the model floor {fl} B: no plan fits")

        # (1) Seeds.
        if self.warm_start:
            try:
                from slackopt.solvers.slackswap import SlackSwap
                ss = SlackSwap(min_budget_search=False).solve(inst, M)
                if ss.plan is not None:
                    inc.consider(ss.plan.decisions, "slackswap")
            except Exception as e:  # noqa: BLE001 - a warm start must not break the solve
                info["warm_start_error"] = repr(e)
            if tier != "aggregated" and deadline - time.perf_counter() > 0.5:
                dec = recompute_only_incumbent(inst, M, deadline - time.perf_counter() - 0.2,
                                               seed, deterministic_time=CPSAT_WORK)
                if dec is not None:
                    inc.consider(dec, "cpsat_recompute_only")
        mark("seeds")
        if inc.dec is not None and inc.step_s <= T_star * (1 + 1e-12):
            model_optimal = True
            return result("optimal", T_star, T_star, iterations=0,
                          reason="a seed plan runs at the ideal step time T*")

        # (2) Local search around the incumbent (fixed work, deterministic). No phase
        # gets a share of the time left: each runs to its own work limit, and the
        # deadline only ends the last one, so a longer limit replays the same phases
        # and adds to them (anytime by construction, module docstring).
        if self.local_search and inc.dec is not None:
            improve(inc, self.search_calls, seed, deadline)
            mark("local_search")

        # (2a) The deficit bound: the cheapest way to make room at each op (closed form,
        # valid for every plan; solvers/milp/enumerate.py).
        lower = max(lower, deficit_bound(inst, M) * (1.0 - 1e-12))
        mark("deficit_bound")
        if closed():
            info.update({"iterations": 0, "log": []})
            return result("optimal", lower, reason="the deficit bound meets the plan")

        # (2b) Exact enumeration on small instances: branch and bound over the decision
        # vectors with the evaluator at the leaves (fixed work, deterministic). When it
        # ends within its work limit the incumbent is the optimum (or no plan runs).
        if self.enum_plans > 0 and inst.n_saved <= ENUM_MAX_SAVED:
            en = enumerate_optimum(inc, self.enum_plans, deadline)
            info["enumeration"] = {"complete": en.complete, "simulated": en.simulated,
                                   "pruned_time": en.pruned_time,
                                   "pruned_memory": en.pruned_memory, "space": en.space}
            mark("enumeration")
            if en.complete:
                info.update({"iterations": 0, "log": []})
                if inc.dec is None:
                    mb, fl, exact = self.min_budget(inst)
                    info.update({"min_budget_bytes": mb, "min_budget_lower_bytes": fl,
                                 "min_budget_exact": exact})
                    return result("infeasible", None, reason="every decision vector was "
                                  "simulated or pruned by the memory bound: none runs")
                lower = max(lower, en.bound_s)
                return result("optimal", lower, reason="every decision vector was simulated "
                              "or pruned by a bound valid for all its completions")

        # (3a) The checkpoint LP bound (solvers/milp/checkpoint.py): a small LP over the
        # decisions alone, valid for every plan; on the paper workloads it is close to the
        # deficit bound and far tighter than what the time-indexed model's LP reaches.
        tc = time.perf_counter()
        cb = checkpoint_bound(inst, M, max(0.05, deadline - tc - 0.3), deadline=deadline - 0.3)
        info["checkpoint_bound"] = {"bound_s": cb, "seconds": round(time.perf_counter() - tc, 4)}
        if cb is not None:
            lower = max(lower, cb)
        mark("checkpoint_bound")
        if closed():
            info.update({"iterations": 0, "log": []})
            return self._finish(result, inc, lower, None)

        # (3b) Large-neighbourhood search (solvers/milp/lns.py): windows of saved tensors
        # searched exactly by the enumeration's branch and bound, the other tensors fixed
        # to the incumbent; fixed work (lns_plans simulated plans), deterministic; before
        # the timing MILP, whose search is cut off at the plan it leaves.
        if self.lns_plans > 0 and inc.dec is not None:
            ln = lns(inc, self.lns_plans, seed, deadline)
            info["lns"] = {"windows": ln.windows, "simulated": ln.simulated,
                           "improved": ln.improved, "passes": ln.passes,
                           "window_size": ln.window_size, "converged": ln.converged}
            mark("lns")
            if closed():
                info.update({"iterations": 0, "log": []})
                return self._finish(result, inc, lower, None)

        # (3c) The timing MILP bound (solvers/milp/timing_bound.py): memory, D2H and H2D
        # timing at every op with an excess, binary decisions, SCIP's proven dual bound
        # (valid for every plan, also when SCIP stops early) within a share of the time
        # left; the plans read from the assignments of its solves that ended are candidates.
        tt = time.perf_counter()
        tb, tinfo = timing_bound(inst, M, TIMING_SHARE * (deadline - tt - 0.3),
                                 deadline=deadline - 0.3, seed=seed,
                                 upper_s=inc.step_s if inc.dec is not None else None)
        info["timing_bound"] = {"bound_s": tb, "seconds": round(time.perf_counter() - tt, 4),
                                "status": tinfo.get("status")}
        # candidates in the order the MILPs produced them (only from MILP solves that
        # ended, so a longer limit gets the same list and appends to it), each one that
        # improves U followed by a local search: a longer limit replays these steps
        for tdec in tinfo.get("candidates", []):
            before = inc.step_s
            inc.consider(tdec, "timing_bound")
            if inc.step_s < before and self.local_search:
                improve(inc, self.search_calls, seed, deadline)
        if tb is not None:
            lower = max(lower, tb)
        mark("timing_bound")
        if closed():
            info.update({"iterations": 0, "log": []})
            return self._finish(result, inc, lower, None)

        # (3) The model. Building it is pure Python (GPT-2 XL's aggregated model: about
        # 3 s); skip it when it cannot pay off before the deadline.
        est = BUILD_S_PER_UNIT * inst.n_ops * max(1, inst.n_saved)
        if deadline - time.perf_counter() < 3.0 * est + 0.5:
            info.update({"iterations": 0, "log": [],
                         "model": {"skipped": f"{deadline - time.perf_counter():.2f} s left, "
                                              f"the model takes about {est:.2f} s to build"}})
            return self._finish(result, inc, lower, None)
        tb = time.perf_counter()
        try:
            model = build_model(inst, M, tier=tier, steps=self.steps, deadline=deadline - 0.3,
                                **self.model_options)
        except ModelTimeout as e:
            info.update({"iterations": 0, "log": [], "model": {"skipped": str(e)}})
            return self._finish(result, inc, lower, None)
        info["model"] = dict(model.info, build_s=time.perf_counter() - tb)
        to_s = model.t_unit
        log: list[dict[str, Any]] = []
        objective: float | None = None
        if (tier == "aggregated" or (tier == "exact"
                                     and model.info["nonzeros"] <= EXACT_LP_MAX_NONZEROS)):
            # the LP relaxation first: a bound within the time limit even when the MILP
            # search is too large to finish (aggregated tier), and its rounding is a
            # candidate plan (exact tier; a large LP would only take the time the MILP,
            # whose root bound is as strong, needs)
            tl = time.perf_counter()
            try:
                lp, xlp = lp_relaxation(model.lin, max(0.05, deadline - tl - 0.3),
                                        deadline=deadline - 0.3)
            except ModelTimeout:
                lp = xlp = None
            entry: dict[str, Any] = {"iteration": "lp",
                                     "seconds": round(time.perf_counter() - tl, 4)}
            if lp is not None:
                entry["bound_s"] = lp * to_s
                lower = max(lower, lp * to_s * (1.0 - 1e-9))
                val = inc.consider(model.decode(xlp), "lp_rounding")
                entry["simulated_s"] = None if val == _INF else val
                if self.local_search and val < _INF and val <= inc.step_s:
                    entry["search_calls"] = improve(inc, self.search_calls, seed, deadline)
            entry["lower_s"] = lower
            log.append(entry)
            mark("lp")
        if deadline - time.perf_counter() < 2.0 * est + 0.5:
            # loading the model into the backend takes about as long as building it
            info.update({"iterations": len(log), "log": log})
            return self._finish(result, inc, lower, objective)
        # the gap the backend closes and the cutoff's margin: rel_gap, or half of
        # OPTIMAL_REL_TOL when rel_gap is not larger, so that a closed search proves
        # "optimal" (gap <= OPTIMAL_REL_TOL with room for rounding)
        gap_tol = (self.rel_gap if self.rel_gap > OPTIMAL_REL_TOL
                   else min(self.rel_gap, 0.5 * OPTIMAL_REL_TOL))
        try:
            backend = _BACKEND_CLASSES[self.backend](
                model.lin, threads=self.threads, seed=seed, rel_gap=gap_tol,
                verbose=self.verbose, deadline=deadline - 0.5)
        except ModelTimeout as e:
            info.update({"iterations": len(log), "log": log, "backend_skipped": str(e)})
            return self._finish(result, inc, lower, objective)
        taus = [j for j, cj in enumerate(model.lin.obj) if cj]
        cut: set[bytes] = set()

        def add_cut(dec: np.ndarray) -> None:
            key = np.asarray(dec, dtype=np.int8).tobytes()
            if key in cut:
                return
            cut.add(key)
            terms, lo = model.nogood(np.asarray(dec, dtype=np.int8))
            backend.add_row(terms, lo, _INF)

        # Objective cutoff: only plans whose model value beats the incumbent matter
        # (every other plan is at least as slow as the incumbent).
        def cutoff() -> float:
            return inc.step_s / to_s / (1.0 + gap_tol) if inc.dec is not None else _INF

        cut_row = backend.add_row([(j, 1.0) for j in taus], -_INF, cutoff())
        if inc.dec is not None:
            add_cut(inc.dec)

        patience = self.patience if self.patience is not None else (
            None if tier == "full" else 5)
        stale = 0
        for it in range(self.max_iterations):
            before = (lower, inc.step_s)
            left = deadline - time.perf_counter()
            if left <= 0.3:
                break
            backend.set_row_hi(cut_row, cutoff())
            hint = model.hint(inc.dec) if inc.dec is not None else None
            # a margin for the backend's overrun past its limit and the decoding after it
            sol = backend.solve(max(0.05, 0.9 * left - 0.3), hint)
            entry = {"iteration": it, "status": sol.status, "seconds": round(sol.seconds, 4)}
            if sol.message:
                entry["message"] = sol.message
            if sol.status == "infeasible":
                # no plan left whose model value beats the cutoff: every plan not cut is
                # slower than the cutoff, every cut plan was simulated (>= U)
                model_optimal = True
                if inc.dec is not None:
                    lower = max(lower, min(inc.step_s, cutoff() * to_s))
                    if objective is None:
                        objective = lower
                entry["lower_s"] = lower
                log.append(entry)
                if inc.dec is None:
                    lower = None
                break
            b = sol.bound
            if sol.status == "optimal" and b is None and sol.objective is not None:
                b = sol.objective - gap_tol * abs(sol.objective)
            lower_it = max(T_star, b * to_s * (1.0 - 1e-9)) if b is not None else T_star
            if sol.status == "optimal":
                model_optimal = True
            if it == 0 and sol.objective is not None:
                objective = sol.objective * to_s
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
                if self.local_search and val < _INF and val <= inc.step_s:
                    entry["search_calls"] = improve(inc, self.search_calls, seed + it + 1,
                                                    deadline)
                add_cut(dec)
            # every cut vector was simulated (>= the incumbent); the rest are >= lower_it
            lower = max(lower, min(inc.step_s, lower_it))
            entry.update({"bound_s": lower_it, "lower_s": lower,
                          "upper_s": None if inc.dec is None else inc.step_s})
            log.append(entry)
            prog.update(inc.step_s, lower, f"milp {it}")
            if closed():
                break
            if sol.status != "optimal":
                break          # the time limit stopped the backend: its bound is final
            stale = 0 if (lower, inc.step_s) != before else stale + 1
            if patience is not None and stale >= patience:
                entry["stopped"] = f"{patience} solves without a better bound or plan"
                break
            if inc.dec is not None:
                add_cut(inc.dec)
        mark("milp")
        info.update({"iterations": len(log), "log": log})
        if inc.dec is None and lower is None:
            mb, fl, exact = self.min_budget(inst)
            info.update({"min_budget_bytes": mb, "min_budget_lower_bytes": fl,
                         "min_budget_exact": exact})
            return result("infeasible", None, None,
                          reason="every plan the model admits was simulated and failed")
        return self._finish(result, inc, lower, objective)

    @staticmethod
    def _finish(result: Any, inc: Incumbent, lower: float, objective: float | None
                ) -> Outcome:
        """"optimal" or "bounded" (decided by the gap) with a plan, "timeout" without.
        Without a plan, the all-swap plan (the witness of the stated minimum budget,
        :meth:`min_budget`) is tried last, so at that budget a plan is found whatever the
        time limit; tried only here, it never changes a search that found a plan."""
        if inc.dec is None:
            inc.consider(_all_swap(inc.inst), "all_swap")
        if inc.dec is None:
            return result("timeout", lower, objective)
        return result("bounded", lower, objective)


MODEL_OPTIONS = ("lagging", "binary_placement", "integral_copies", "fifo", "admission",
                 "integer_evictions")
