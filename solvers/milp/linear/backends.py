"""MILP backends: SCIP (OR-Tools pywraplp), HiGHS (OR-Tools MathOpt), PuLP (CBC). Each
solves a :class:`~slackopt.solvers.milp.linear.lin._Lin`, possibly several times with rows
added in between (the no-good loop). None of their bounds is certified; the certified LP
relaxation is :func:`slackopt.solvers.milp.certify.lp.lp_relaxation`."""

from __future__ import annotations

import math
import os
import re
import tempfile
import time
import warnings
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from slackopt.interruptible import SCIP_SIGINT_OFF, interruptible
from slackopt.solvers.milp.linear.lin import _INF, _Lin, check_deadline

BACKENDS = ("scip", "highs", "pulp")
_PULP_FREE = 1e30
"""Right-hand side that CBC and HiGHS read as no bound (PuLP rows need a number)."""


# =========================================================================== backends
@dataclass
class _Sol:
    status: str            # "optimal", "feasible", "infeasible", "unknown", "error"
    x: list[float] | None
    objective: float | None
    bound: float | None    # the solver's dual bound on the model optimum (model units);
    #                        not certified (its LPs carry floating-point tolerances)
    seconds: float
    message: str = ""
    pool: list[list[float]] = field(default_factory=list)   # other feasible solutions


class _Backend(ABC):
    """Solve a _Lin, possibly several times with rows added in between."""

    name = "?"
    pool_size = 100

    def __init__(self, lin: _Lin, *, threads: int, seed: int, rel_gap: float,
                 verbose: bool = False, deadline: float | None = None) -> None:
        """`deadline`: perf_counter time after which loading the rows stops with
        :class:`~slackopt.solvers.milp.linear.lin.ModelTimeout`."""
        self.lin, self.threads, self.seed, self.rel_gap = lin, threads, seed, rel_gap
        self.verbose = verbose
        self.deadline = deadline

    def _load_rows(self) -> None:
        for i, (idx, cf, lo, hi) in enumerate(self.lin.rows):
            check_deadline(self.deadline, i, f"loading the model into {self.name}")
            self.add_row(list(zip(idx, cf, strict=True)), lo, hi)

    @abstractmethod
    def add_row(self, terms: Sequence[tuple[int, float]], lo: float, hi: float) -> Any:
        """Add a row ``lo <= sum coef * var <= hi``; returns a handle for
        :meth:`set_row_hi`."""

    @abstractmethod
    def set_row_hi(self, handle: Any, hi: float) -> None:
        """Change the upper side of the row `handle` (the objective cutoff row)."""

    @abstractmethod
    def solve(self, time_limit_s: float, hint: dict[int, float] | None) -> _Sol:
        """Solve within `time_limit_s` (s), starting from the partial assignment `hint`
        (variable index -> value) where the backend takes one."""


class _ScipBackend(_Backend):
    """OR-Tools pywraplp with SCIP (best bound from SCIP's dual bound)."""

    name = "scip"
    scip_params = "separating/maxroundsroot = 2\nseparating/maxrounds = 0\n"
    """SCIP settings after the seeds. Cutting-plane rounds dominate on the time-indexed
    models at little gain; keep a few at the root (same optima, faster: docs/bounds.md,
    "Settings and the measurements behind them")."""

    def __init__(self, lin: _Lin, **kw: Any) -> None:
        super().__init__(lin, **kw)
        from ortools.linear_solver import pywraplp
        self._pywraplp = pywraplp
        sv = pywraplp.Solver.CreateSolver("SCIP")
        if sv is None:  # pragma: no cover - depends on the OR-Tools build
            raise RuntimeError("OR-Tools was built without SCIP")
        self.sv = sv
        inf = sv.infinity()
        self.v = []
        for j in range(lin.n_vars):
            lb = lin.lb[j] if lin.lb[j] > -_INF else -inf
            ub = lin.ub[j] if lin.ub[j] < _INF else inf
            self.v.append(sv.IntVar(lb, ub, "") if lin.is_int[j] else sv.NumVar(lb, ub, ""))
        self._load_rows()
        obj = sv.Objective()
        for j, cj in enumerate(lin.obj):
            if cj:
                obj.SetCoefficient(self.v[j], cj)
        obj.SetMinimization()

    def add_row(self, terms: Sequence[tuple[int, float]], lo: float, hi: float) -> Any:
        inf = self.sv.infinity()
        ct = self.sv.RowConstraint(lo if lo > -_INF else -inf, hi if hi < _INF else inf, "")
        for j, cj in terms:
            ct.SetCoefficient(self.v[j], cj)
        return ct

    def set_row_hi(self, handle: Any, hi: float) -> None:
        handle.SetUb(hi if hi < _INF else self.sv.infinity())

    def solve(self, time_limit_s: float, hint: dict[int, float] | None) -> _Sol:
        pw = self._pywraplp
        from ortools.linear_solver import linear_solver_pb2
        # pywraplp's SCIP interface does not re-solve a modified model reliably (after a
        # first solve, a re-solve with added rows returned ABNORMAL or stopped at once
        # with a feasible status): ``self.sv`` only holds the model, each solve loads it
        # into a fresh SCIP.
        proto = linear_solver_pb2.MPModelProto()
        self.sv.ExportModelToProto(proto)
        sv = pw.Solver.CreateSolver("SCIP")
        sv.LoadModelFromProto(proto)
        v = sv.variables()
        sv.SetTimeLimit(max(1, int(time_limit_s * 1000)))
        sv.SetNumThreads(max(1, int(self.threads)))
        sv.SetSolverSpecificParametersAsString(
            f"randomization/randomseedshift = {int(self.seed) % 2**31}\n"
            f"randomization/permutationseed = {int(self.seed) % 2**31}\n" + SCIP_SIGINT_OFF
            + self.scip_params)
        if self.verbose:
            sv.EnableOutput()
        else:
            sv.SuppressOutput()
        if hint:
            keys = sorted(hint)
            sv.SetHint([v[j] for j in keys], [hint[j] for j in keys])
        p = pw.MPSolverParameters()
        p.SetDoubleParam(p.RELATIVE_MIP_GAP, self.rel_gap)
        t0 = time.perf_counter()
        st = interruptible(lambda: sv.Solve(p), sv.InterruptSolve)
        secs = time.perf_counter() - t0
        if st == pw.Solver.INFEASIBLE:
            return _Sol("infeasible", None, None, None, secs)
        if st in (pw.Solver.OPTIMAL, pw.Solver.FEASIBLE):
            x = [var.solution_value() for var in v]
            objv = sv.Objective().Value()
            bound = sv.Objective().BestBound()
            pool = []
            while len(pool) < self.pool_size and sv.NextSolution():
                pool.append([var.solution_value() for var in v])
            return _Sol("optimal" if st == pw.Solver.OPTIMAL else "feasible", x, objv,
                        bound if math.isfinite(bound) else None, secs, pool=pool)
        bound = sv.Objective().BestBound()
        return _Sol("unknown", None, None, bound if math.isfinite(bound) else None, secs,
                    f"SCIP status {st}")


class _HighsBackend(_Backend):
    """OR-Tools MathOpt with HiGHS (MathOpt reports HiGHS's dual bound; pywraplp does
    not, and its HiGHS hints crash). HiGHS's MIP search is single-threaded here."""

    name = "highs"

    def __init__(self, lin: _Lin, **kw: Any) -> None:
        super().__init__(lin, **kw)
        from ortools.math_opt.python import mathopt
        self._mo = mathopt
        m = mathopt.Model(name="slackopt-milp")
        self.m = m
        self.v = []
        for j in range(lin.n_vars):
            self.v.append(m.add_variable(lb=lin.lb[j], ub=lin.ub[j], is_integer=lin.is_int[j]))
        self._load_rows()
        m.minimize(mathopt.LinearSum(cj * self.v[j] for j, cj in enumerate(lin.obj) if cj))

    def add_row(self, terms: Sequence[tuple[int, float]], lo: float, hi: float) -> Any:
        mo = self._mo
        expr = mo.LinearSum(cj * self.v[j] for j, cj in terms)
        return self.m.add_linear_constraint(lb=lo, ub=hi, expr=expr)

    def set_row_hi(self, handle: Any, hi: float) -> None:
        handle.upper_bound = hi

    def solve(self, time_limit_s: float, hint: dict[int, float] | None) -> _Sol:
        """Solve within `time_limit_s` (s). `hint` is not passed on: MathOpt's HiGHS
        interface implements no starting solution (its source lists "Starting solution"
        among the unimplemented features, ortools/math_opt/solvers/highs_solver.cc); the
        search's incumbent still reaches HiGHS through the objective cutoff row
        (:meth:`set_row_hi`)."""
        del hint  # taken for the common signature only (docstring)
        from datetime import timedelta
        mo = self._mo
        params = mo.SolveParameters(
            time_limit=timedelta(seconds=max(0.01, float(time_limit_s))),
            relative_gap_tolerance=self.rel_gap, random_seed=int(self.seed) % 2**31,
            enable_output=self.verbose)
        from ortools.util.python.solve_interrupter import SolveInterrupter

        stop = SolveInterrupter()
        t0 = time.perf_counter()
        try:
            res = interruptible(lambda: mo.solve(self.m, mo.SolverType.HIGHS, params=params,
                                                 interrupter=stop), stop.interrupt)
        except Exception as e:  # noqa: BLE001 - MathOpt's error path can itself fail
            # (ortools 9.15 raises AttributeError while translating a HiGHS error status):
            # no solution and no bound from this solve; the search keeps what it has
            return _Sol("unknown", None, None, None, time.perf_counter() - t0,
                        f"HiGHS failed: {type(e).__name__}: {e}")
        secs = time.perf_counter() - t0
        reason = res.termination.reason
        TR = mo.TerminationReason
        bounds = res.termination.objective_bounds
        dual = bounds.dual_bound if math.isfinite(bounds.dual_bound) else None
        if reason == TR.INFEASIBLE:
            return _Sol("infeasible", None, None, None, secs)
        if res.has_primal_feasible_solution():
            vals = res.variable_values()
            x = [float(vals[v]) for v in self.v]
            return _Sol("optimal" if reason == TR.OPTIMAL else "feasible", x,
                        float(res.objective_value()), dual, secs)
        return _Sol("unknown", None, None, dual, secs, f"HiGHS {reason}")


class _PulpBackend(_Backend):
    """PuLP with CBC or HiGHS, whichever is present (a system CBC first, then PuLP's
    bundled CBC, then HiGHS): an independent cross-check. CBC's best bound is read from
    its log; without it, an optimal status with relative gap g gives ``obj - g * |obj|``."""

    name = "pulp"
    PREFERENCE = ("COIN_CMD", "PULP_CBC_CMD", "HiGHS", "HiGHS_CMD")

    def __init__(self, lin: _Lin, **kw: Any) -> None:
        super().__init__(lin, **kw)
        import pulp
        self._pulp = pulp
        avail = set(pulp.listSolvers(onlyAvailable=True))
        names = [x for x in self.PREFERENCE if x in avail]
        if not names:
            raise RuntimeError(f"PuLP finds none of {', '.join(self.PREFERENCE)}")
        self.solver_name = names[0]
        prob = pulp.LpProblem("slackopt_milp", pulp.LpMinimize)
        self.v = []
        for j in range(lin.n_vars):
            lb = lin.lb[j] if lin.lb[j] > -_INF else None
            ub = lin.ub[j] if lin.ub[j] < _INF else None
            cat = pulp.LpInteger if lin.is_int[j] else pulp.LpContinuous
            self.v.append(prob.add_variable(f"v{j}", lowBound=lb, upBound=ub, cat=cat))
        prob += pulp.LpAffineExpression([(self.v[j], cj) for j, cj in enumerate(lin.obj) if cj])
        self.prob = prob
        self._nrow = 0
        self._load_rows()

    def add_row(self, terms: Sequence[tuple[int, float]], lo: float, hi: float) -> Any:
        pulp = self._pulp
        e = pulp.LpAffineExpression([(self.v[j], cj) for j, cj in terms])
        handle = None
        if lo > -_INF and hi < _INF and lo == hi:
            self.prob += pulp.LpConstraint(e, pulp.LpConstraintEQ, f"r{self._nrow}", lo)
        else:
            if lo > -_INF:
                self.prob += pulp.LpConstraint(e, pulp.LpConstraintGE, f"r{self._nrow}", lo)
                self._nrow += 1
            if hi < _INF or lo == -_INF:
                # a free row gets a placeholder bound so that set_row_hi can tighten it
                name = f"r{self._nrow}"
                self.prob += pulp.LpConstraint(e, pulp.LpConstraintLE, name,
                                               hi if hi < _INF else _PULP_FREE)
                handle = name
        self._nrow += 1
        return handle

    def set_row_hi(self, handle: Any, hi: float) -> None:
        self.prob.get_constraint_by_name(handle).changeRHS(hi if hi < _INF else _PULP_FREE)

    def solve(self, time_limit_s: float, hint: dict[int, float] | None) -> _Sol:
        pulp = self._pulp
        warm = bool(hint)
        if hint:
            for j, val in hint.items():
                self.v[j].setInitialValue(val, check=False)
        fd, log = tempfile.mkstemp(prefix="slackopt_cbc_", suffix=".log")
        os.close(fd)
        try:
            # CBC counts whole seconds and PuLP writes and reads files around it: 90%
            kw = dict(msg=self.verbose, timeLimit=max(1, int(0.9 * time_limit_s)),
                      gapRel=self.rel_gap, threads=max(1, int(self.threads)), logPath=log)
            if self.solver_name in ("COIN_CMD", "PULP_CBC_CMD"):
                cmd = pulp_cbc(warmStart=warm,
                               options=[f"randomCbcSeed {int(self.seed) % 2**31 or 1}"], **kw)
            else:
                cmd = getattr(pulp, self.solver_name)(**kw)
            t0 = time.perf_counter()
            self.prob.solve(cmd)
            secs = time.perf_counter() - t0
            with open(log, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        finally:
            try:
                os.unlink(log)
            except OSError:
                pass
        st = pulp.LpStatus.get(self.prob.status, "Undefined")
        sol_st = getattr(self.prob, "sol_status", None)
        if st == "Infeasible":
            return _Sol("infeasible", None, None, None, secs)
        objv = pulp.value(self.prob.objective)
        bound = _cbc_bound(text) if "CBC" in self.solver_name else None
        if st == "Optimal" and sol_st == pulp.LpSolutionOptimal:
            x = [float(v.value() or 0.0) for v in self.v]
            if objv is not None:
                # CBC proved the incumbent within its ratio gap; the "Lower bound" line of
                # its log can still show an older (weaker) tree bound
                proven = objv - self.rel_gap * abs(objv)
                bound = proven if bound is None else max(bound, proven)
            return _Sol("optimal", x, objv, bound, secs)
        if objv is not None and sol_st == pulp.LpSolutionIntegerFeasible:
            x = [float(v.value() or 0.0) for v in self.v]
            return _Sol("feasible", x, objv, bound, secs)
        return _Sol("unknown", None, None, bound, secs, f"CBC status {st}")


def pulp_cbc(**kw: Any) -> Any:
    """PuLP's command for CBC with the options `kw` (``msg``, ``timeLimit``, ...): the
    system CBC (``COIN_CMD``, e.g. from ``pip install pulp[cbc]``) when there is one, else
    the CBC binary PuLP bundles (``PULP_CBC_CMD``). PuLP 3.3 deprecates the bundled one
    for PuLP 4.0, which drops it; pyproject.toml keeps PuLP below 4, so its
    DeprecationWarning is silenced here, the one place that picks it."""
    import pulp

    if pulp.COIN_CMD(msg=False).available():
        return pulp.COIN_CMD(**kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return pulp.PULP_CBC_CMD(**kw)


def _cbc_bound(text: str) -> float | None:
    """CBC's final best possible objective from its log, or None."""
    vals = re.findall(r"best possible\s+(-?[0-9.eE+-]+)", text)
    vals += re.findall(r"Objective bound[: ]+(-?[0-9.eE+-]+)", text)
    m = re.findall(r"Lower bound:\s+(-?[0-9.eE+-]+)", text)
    vals += m
    out = []
    for v in vals:
        try:
            out.append(float(v))
        except ValueError:
            continue
    return out[-1] if out else None


_BACKEND_CLASSES = {"scip": _ScipBackend, "highs": _HighsBackend, "pulp": _PulpBackend}
