"""The certified LP relaxation: a lower bound on a linear model's LP optimum (integrality
dropped) that floating point cannot lift, from GLOP's or HiGHS's duals certified by
:func:`~slackopt.solvers.milp.certify.safe_lp.safe_lp_bound`; the GLOP model kept loaded
for re-solves (:class:`_GlopLP`, the certified branch and bound's node LPs)."""

from __future__ import annotations

import time
from typing import Any

from slackopt.interruptible import interruptible
from slackopt.solvers.milp.certify.safe_lp import lin_arrays, objective_shift, safe_lp_bound
from slackopt.solvers.milp.linear.lin import _INF, ModelTimeout, _Lin, check_deadline

MAX_SHIFTS = 3
"""Re-solves with a shifted objective (:func:`~.safe_lp.objective_shift`) before an LP
relaxation is left without a certified bound."""


def lp_relaxation(lin: _Lin, time_limit_s: float, deadline: float | None = None, *,
                  info: dict | None = None) -> tuple[float | None, list[float] | None]:
    """A certified lower bound on the LP relaxation of `lin` (integrality dropped), so on
    the MILP's optimum, and the LP solution.

    The LP is solved by GLOP (OR-Tools' simplex; deterministic), and when GLOP proves no
    optimum, by HiGHS (scipy.optimize.linprog); the bound is not the solver's objective
    but :func:`~slackopt.solvers.milp.certify.safe_lp.safe_lp_bound` of its duals (Neumaier and
    Shcherbina 2004: weak duality with rounding errors bounded a priori), which no
    floating-point error of the solver can push above the true optimum. When the duals
    leave the sign of a reduced cost on an unbounded variable uncertain, the LP is
    re-solved (up to MAX_SHIFTS times) with that objective coefficient shifted by a
    margin (:func:`~slackopt.solvers.milp.certify.safe_lp.objective_shift`), and the bound is
    computed from the new duals with the true objective.

    Args:
        lin: the model (model units).
        time_limit_s: wall-clock limit of the solves (s).
        deadline: perf_counter time: loading the rows stops with ModelTimeout after it,
            and the solves get at most the time left.
        info: if given, filled with ``lp_objective`` (the solver's optimum of the first
            solve, uncertified, model units, or None), ``lp_bound`` (the certified bound or
            None), ``lp_solver`` ("glop" or "highs"), ``lp_shifts`` (re-solves) and
            ``lp_status`` (why there is no bound, if there is none).

    Returns:
        (certified bound in model units, or None when no solver proved an optimum in time,
        the LP is infeasible or unbounded, or no certificate was found; the solution of the
        last solve, or None).
    """
    info = {} if info is None else info
    info.update(lp_objective=None, lp_bound=None, lp_solver=None, lp_shifts=0)
    t0 = time.perf_counter()
    end = t0 + float(time_limit_s)
    if deadline is not None:
        # GLOP overruns its limit (docs/bounds.md, "Settings and the measurements"): 75%
        end = min(end, t0 + 0.75 * (deadline - t0))
    arrays = lin_arrays(lin)
    bound, x = _glop_certified(lin, arrays, end, deadline, info)
    if bound is None and end - time.perf_counter() > 0.05:
        # GLOP proved no optimum, or its duals gave no certificate: HiGHS
        glop = {k: info[k] for k in ("lp_objective", "lp_status")}
        x_glop = x
        bound, x = _highs_certified(lin, arrays, end, info)
        info["lp_glop"] = glop
        if x is None:
            x = x_glop
    return bound, x


def _certify_loop(lin: _Lin, arrays: dict, solve: Any, end: float, info: dict
                  ) -> tuple[float | None, list[float] | None]:
    """Solve (``solve(shift) -> (status, objective, duals, x)``, shift: {var: change}),
    certify the duals, and re-solve with a shifted objective while they do not certify."""
    shift: dict[int, float] = {}
    st, objv, y, x = solve(shift)
    if st != "optimal":
        info["lp_status"] = st
        return None, None
    info["lp_objective"] = objv
    for k in range(MAX_SHIFTS + 1):
        b = safe_lp_bound(lin, y, arrays=arrays)
        if b is not None:
            info.update(lp_bound=b, lp_status="certified")
            return b, x
        more = objective_shift(lin, y, arrays=arrays)
        if k == MAX_SHIFTS or not more or time.perf_counter() > end:
            break
        for j, e in more.items():
            shift[j] = shift.get(j, 0.0) + e
        info["lp_shifts"] = k + 1
        st, _, y2, x2 = solve(shift)
        if st != "optimal":
            break
        y, x = y2, x2
    info["lp_status"] = "no certificate from the duals"
    return None, x


class _GlopLP:
    """GLOP (OR-Tools pywraplp) loaded once with the LP relaxation of a _Lin, for
    re-solves with changed variable bounds or objective coefficients: the solver object
    is kept, so GLOP can start from its last basis (used by :func:`_glop_certified` and
    by the certified branch and bound, solvers/milp/certify/certified_bb.py)."""

    def __init__(self, lin: _Lin, deadline: float | None = None, *,
                 presolve: bool = True) -> None:
        """Load `lin` (integrality dropped); loading stops with ModelTimeout after
        `deadline` (perf_counter time). ``presolve=False`` turns GLOP's preprocessing
        off: then a re-solve after a change of variable bounds starts from the last
        basis (with preprocessing on, GLOP solved each such re-solve from scratch, and the
        first solve was slower too: docs/bounds.md, "Settings and the measurements behind
        them")."""
        from ortools.linear_solver import pywraplp

        self._pywraplp = pywraplp
        self.lin = lin
        sv = pywraplp.Solver.CreateSolver("GLOP")
        if not presolve:
            sv.SetSolverSpecificParametersAsString("use_preprocessing: false")
        self.sv = sv
        self._inf = inf = sv.infinity()
        self.v = [sv.NumVar(lin.lb[j] if lin.lb[j] > -_INF else -inf,
                            lin.ub[j] if lin.ub[j] < _INF else inf, "")
                  for j in range(lin.n_vars)]
        self.cts = []
        for i, (idx, cf, lo, hi) in enumerate(lin.rows):
            check_deadline(deadline, i, "loading the LP relaxation")
            ct = sv.RowConstraint(lo if lo > -_INF else -inf, hi if hi < _INF else inf, "")
            for j, cj in zip(idx, cf, strict=True):
                ct.SetCoefficient(self.v[j], cj)
            self.cts.append(ct)
        self.obj = sv.Objective()
        for j, cj in enumerate(lin.obj):
            if cj:
                self.obj.SetCoefficient(self.v[j], cj)
        self.obj.SetMinimization()
        self._shifted: set[int] = set()

    def set_bounds(self, j: int, lb: float, ub: float) -> None:
        """Change the box of variable `j` (infinite values allowed)."""
        self.v[j].SetBounds(lb if lb > -_INF else -self._inf, ub if ub < _INF else self._inf)

    def solve(self, end: float, shift: dict[int, float] | None = None
              ) -> tuple[str, float | None, list | None, list | None]:
        """Solve with objective ``obj + shift`` (shift: {variable: change}; variables
        shifted before and not in `shift` get their true coefficient back) before the
        perf_counter time `end`. Returns ("optimal", GLOP's objective, row duals
        (``dual_value()``, sign as :func:`~.safe_lp.safe_lp_bound` takes them), x), or
        (a status text, None, None, None)."""
        shift = shift or {}
        for j in self._shifted | set(shift):
            self.obj.SetCoefficient(self.v[j], self.lin.obj[j] + shift.get(j, 0.0))
        self._shifted = set(shift)
        left = end - time.perf_counter()
        if left <= 0:
            return "time limit", None, None, None
        self.sv.SetTimeLimit(max(1, int(left * 1000)))
        st = interruptible(self.sv.Solve, self.sv.InterruptSolve)
        if st != self._pywraplp.Solver.OPTIMAL:
            return f"GLOP status {st}", None, None, None
        # the duals and values in bulk (the same numbers as ``dual_value()`` and
        # ``solution_value()`` per row and variable, 2-3x faster)
        from ortools.linear_solver import linear_solver_pb2

        res = linear_solver_pb2.MPSolutionResponse()
        self.sv.FillSolutionResponseProto(res)
        return ("optimal", self.obj.Value(), list(res.dual_value), list(res.variable_value))


def _glop_certified(lin: _Lin, arrays: dict, end: float, deadline: float | None, info: dict
                    ) -> tuple[float | None, list[float] | None]:
    """GLOP's solve of the LP relaxation, certified (:func:`_certify_loop`). GLOP's
    preprocessing is off: with it, the duals of the aggregated tier's LP on chain5 at
    0.8 P certified no bound, and the timing LP was much slower (docs/bounds.md,
    "Settings and the measurements behind them")."""
    info["lp_solver"] = "glop"
    glop = _GlopLP(lin, deadline, presolve=False)
    if deadline is not None and end - time.perf_counter() <= 0:
        raise ModelTimeout("loading the LP relaxation took the time left")
    return _certify_loop(lin, arrays, lambda shift: glop.solve(end, shift), end, info)


def _highs_certified(lin: _Lin, arrays: dict, end: float, info: dict
                     ) -> tuple[float | None, list[float] | None]:
    """HiGHS's solve of the LP relaxation (scipy.optimize.linprog, with duals),
    certified (:func:`_certify_loop`)."""
    import numpy as np
    import scipy.sparse as sp
    from scipy.optimize import linprog

    info["lp_solver"] = "highs"
    A, lo, hi = arrays["A"], arrays["lo"], arrays["hi"]
    eq = np.isfinite(lo) & (lo == hi)
    up = np.isfinite(hi) & ~eq
    dn = np.isfinite(lo) & ~eq
    A_ub = sp.vstack([A[up], -A[dn]]).tocsr()
    b_ub = np.concatenate([hi[up], -lo[dn]])
    bounds = [(lb if lb > -_INF else None, ub if ub < _INF else None)
              for lb, ub in zip(lin.lb, lin.ub, strict=True)]
    n_up = int(up.sum())

    def solve(shift: dict[int, float]) -> tuple[str, float | None, Any, list | None]:
        c = arrays["c"].copy()
        for j, e in shift.items():
            c[j] += e
        left = end - time.perf_counter()
        if left <= 0:
            return "time limit", None, None, None
        res = linprog(c, A_ub=A_ub if A_ub.shape[0] else None,
                      b_ub=b_ub if A_ub.shape[0] else None,
                      A_eq=A[eq] if eq.any() else None, b_eq=lo[eq] if eq.any() else None,
                      bounds=bounds, method="highs", options={"time_limit": left})
        if res.status != 0:
            return f"HiGHS status {res.status}: {res.message}", None, None, None
        y = np.zeros(len(lo))
        if eq.any():
            y[eq] = res.eqlin.marginals
        if A_ub.shape[0]:
            mu = res.ineqlin.marginals          # d objective / d b_ub, <= 0
            y[up] += mu[:n_up]
            y[dn] -= mu[n_up:]
        return "optimal", float(res.fun), y, [float(t) for t in res.x]

    return _certify_loop(lin, arrays, solve, end, info)
