"""The time-indexed model in the search (phase "milp"): its LP relaxation, then the MILP
warm-started with the incumbent in a loop with the evaluator: an objective cutoff keeps
the MILP to plans whose model value beats the incumbent, a no-good cut excludes every
simulated decision vector, and each MILP solution (the backend's pool too) is simulated
and followed by a local search."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from slackopt.solver import OPTIMAL_REL_TOL
from slackopt.solvers.milp.certify.lp import lp_relaxation
from slackopt.solvers.milp.certify.safe_lp import seconds_below
from slackopt.solvers.milp.linear.backends import _BACKEND_CLASSES, _Backend, _Sol
from slackopt.solvers.milp.linear.lin import _INF, ModelTimeout
from slackopt.solvers.milp.model.build import build_model
from slackopt.solvers.milp.model.builder import _Model
from slackopt.solvers.milp.search.incumbent import improve
from slackopt.solvers.milp.search.state import Settings, _Search

EXACT_LP_MAX_NONZEROS = 150_000
"""The exact tier solves the LP relaxation first (GLOP, for its rounding) only up to this
many nonzeros: beyond, GLOP's solve leaves the MILP no time to reach its root bound
(docs/bounds.md, "Settings and the measurements behind them")."""
BUILD_S_PER_UNIT = 5e-6
"""Model build time (s) per op x saved tensor, an estimate from above (docs/speed.md,
"Building the MILP"): the model is skipped when the time left is under three times this
estimate."""


def model_phase(solver: Settings, st: _Search) -> bool | None:
    """The time-indexed model: its LP relaxation (exact/aggregated tiers; a safe dual
    bound, certified; its rounding is a candidate), then the MILP warm-started with the
    incumbent, with an objective cutoff and a no-good cut per simulated plan, each new
    MILP incumbent followed by a local search (:class:`_NoGoodLoop`). The MILP's dual
    bound is uncertified: it ends the loop when it meets U, and is reported, but decides
    no status. Returns False when the model is not built (too little time left)."""
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
    if tier == "aggregated" or (tier == "exact"
                                and model.info["nonzeros"] <= EXACT_LP_MAX_NONZEROS):
        _model_lp(solver, st, model)
    if st.left() < 2.0 * est + 0.5:
        return None  # loading the model into the backend takes about as long as building it
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
        return None
    _NoGoodLoop(solver, st, model, backend, gap_tol).run()
    return None


def _model_lp(solver: Settings, st: _Search, model: _Model) -> None:
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


class _NoGoodLoop:
    """The MILP solves of the time-indexed model with the evaluator in the loop, for one
    search: at most ``max_iterations`` solves, each cut off at U / (1 + `gap_tol`) (U the
    incumbent's step, in model units), with a no-good row for every decision vector
    simulated, so that each solve offers plans not seen before. Its entries go to the
    search's ``log`` (``info["log"]``)."""

    def __init__(self, solver: Settings, st: _Search, model: _Model, backend: _Backend,
                 gap_tol: float) -> None:
        self.solver, self.st, self.model, self.backend = solver, st, model, backend
        self.gap_tol, self.to_s = gap_tol, model.t_unit
        self.cut: set[bytes] = set()

    def add_cut(self, dec: np.ndarray) -> None:
        """Exclude decision vector `dec` from the model (once)."""
        key = np.asarray(dec, dtype=np.int8).tobytes()
        if key not in self.cut:
            self.cut.add(key)
            terms, lo = self.model.nogood(np.asarray(dec, dtype=np.int8))
            self.backend.add_row(terms, lo, _INF)

    def cutoff(self) -> float:
        """Objective cutoff (model units): only plans whose model value beats the
        incumbent matter."""
        inc = self.st.inc
        return inc.step_s / self.to_s / (1.0 + self.gap_tol) if inc.dec is not None else _INF

    def run(self) -> None:
        """Solve until the plan meets the bound (certified or the MILP's own), the cut
        model is reported infeasible, the backend stops on its time limit, ``patience``
        solves in a row raise neither bound once a plan runs, or the iteration or time
        limit is reached."""
        solver, st, inc, backend = self.solver, self.st, self.st.inc, self.backend
        taus = [j for j, cj in enumerate(self.model.lin.obj) if cj]
        cut_row = backend.add_row([(j, 1.0) for j in taus], -_INF, self.cutoff())
        if inc.dec is not None:
            self.add_cut(inc.dec)
        patience = solver.patience if solver.patience is not None else (
            None if st.tier == "full" else 5)
        stale = 0
        for it in range(solver.max_iterations):
            before = (st.uncertified.get("model_milp"), inc.step_s)
            left = st.left()
            if left <= 0.3:
                break
            backend.set_row_hi(cut_row, self.cutoff())
            hint = self.model.hint(inc.dec) if inc.dec is not None else None
            # a margin for the backend's overrun past its limit and the decoding after it
            sol = backend.solve(max(0.05, 0.9 * left - 0.3), hint)
            entry: dict[str, Any] = {"iteration": it, "status": sol.status,
                                     "seconds": round(sol.seconds, 4)}
            if sol.message:
                entry["message"] = sol.message
            if sol.status == "infeasible":
                self._infeasible(entry)
                break
            self._solved(sol, it, entry)
            if st.closed(uncertified=True):
                break
            if sol.status != "optimal":
                break          # the time limit stopped the backend: its bound is final
            # Patience applies once a plan runs: before, each solve cuts one more decision
            # vector the evaluator refused (the model does not see every runtime rule, e.g.
            # a host pinned-memory limit), and stopping could only end in "timeout".
            stale = (0 if inc.dec is None
                     or (st.uncertified.get("model_milp"), inc.step_s) != before
                     else stale + 1)
            if patience is not None and stale >= patience:
                entry["stopped"] = f"{patience} solves without a better bound or plan"
                break
            if inc.dec is not None:
                self.add_cut(inc.dec)

    def _infeasible(self, entry: dict[str, Any]) -> None:
        """The backend says no plan left beats the cutoff (every cut plan was simulated):
        an uncertified claim that U is optimal within ``gap_tol``."""
        st, inc = self.st, self.st.inc
        st.model_optimal = True
        if inc.dec is not None:
            st.bound("model_milp", min(inc.step_s, seconds_below(0.0, self.cutoff(), self.to_s)),
                     certified=False)
            if st.objective is None:
                st.objective = self.cutoff() * self.to_s
        entry["lower_s"] = st.lower
        st.log.append(entry)

    def _solved(self, sol: _Sol, it: int, entry: dict[str, Any]) -> None:
        """Take solve `it`'s answer: its bound (uncertified), its solution and pool as
        candidate plans (simulated, then cut), a local search after an improvement; log
        the entry."""
        solver, st, inc, to_s = self.solver, self.st, self.st.inc, self.to_s
        b = sol.bound
        if sol.status == "optimal" and b is None and sol.objective is not None:
            b = sol.objective - self.gap_tol * abs(sol.objective)
        if sol.status == "optimal":
            st.model_optimal = True
        if it == 0 and sol.objective is not None:
            st.objective = sol.objective * to_s
        if sol.x is not None:
            dec = self.model.decode(sol.x)
            entry["objective_s"] = sol.objective * to_s if sol.objective is not None else None
            val = inc.consider(dec, f"milp:{it}")
            entry["simulated_s"] = None if val == _INF else val
            # the solver's other feasible solutions are plans too: score and cut them
            for xp in sol.pool:
                dp = self.model.decode(xp)
                inc.consider(dp, f"milp:{it}:pool")
                self.add_cut(dp)
            entry["pool"] = len(sol.pool)
            if solver.local_search and val < _INF and val <= inc.step_s:
                entry["search_calls"] = improve(inc, solver.search_calls, st.seed + it + 1,
                                                st.deadline)
            self.add_cut(dec)
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
