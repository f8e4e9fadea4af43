"""The Solver protocol, the solver registry and :func:`solve`.

:class:`~slackopt.result.SolveResult`, the status words and :func:`bound_error` live in
:mod:`slackopt.result` and are re-exported here (``slackopt.solver.STATUSES``, ...).

A solver is any object with ``solve(instance, budget_bytes, *, time_limit_s=None,
seed=None) -> SolveResult``; constructors only store keyword hyperparameters.
Solvers register under the entry-point group ``slackopt.solvers`` (see pyproject.toml),
or at runtime with :func:`register_solver`, or are named by ``"path/to/file.py:ClassName"``;
this module knows no solver by name (:data:`SOLVER_ALIASES` maps old names to
canonical ones, without importing anything). New solvers subclass
:class:`slackopt.solverbase.BaseSolver`. Only the evaluator ranks plans: every result of
:func:`solve` carries the :class:`~slackopt.simulate.Evaluation` of its plan under the
budget, made once per solve.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable

from slackopt.errors import PlanError, SolverError
from slackopt.instance import Instance, budget_bytes
from slackopt.plan import Plan
from slackopt.result import (  # noqa: F401  (re-exported: slackopt.solver.STATUSES, ...)
    OPTIMAL_REL_TOL,
    PLAN_STATUSES,
    STATUSES,
    SolveResult,
    bound_error,
    proven_status,
    settle_status,
)
from slackopt.simulate import simulate
from slackopt.solverbase import describe_params, non_default_params

ENTRY_POINT_GROUP = "slackopt.solvers"
SOLVER_ALIASES: dict[str, str] = {"keep_all": "keep-all", "recompute_all": "recompute-all",
                                  "sqrt_checkpoint": "sqrt-checkpoint"}
"""Old registry names -> their canonical names. Registry names are lowercase words joined
by hyphens (``torch-knapsack``, ``keep-all``); an old name still resolves everywhere a
solver name is taken (:func:`get_solver`, :func:`solve`, compare, ``--solver``) and results
are labelled with the canonical name. Aliases are never listed (:func:`registered_solvers`)
and cannot be registered."""


def canonical_name(name: str) -> str:
    """The canonical registry name of `name` (itself unless it is an old name in
    :data:`SOLVER_ALIASES`)."""
    return SOLVER_ALIASES.get(name, name)


@runtime_checkable
class Solver(Protocol):
    """Plans one instance under one budget (bytes): any object with this ``solve`` is a
    solver (``isinstance(obj, Solver)``).

    The protocol, not the base class: a class that subclasses it must define ``solve``
    itself. To write only ``plan(instance, budget_bytes, run)`` and get ``solve`` (timing,
    status words, minimum budget) written for you, subclass
    :class:`slackopt.BaseSolver` (:mod:`slackopt.solverbase`).

    Raises:
        TypeError: at class definition, for a subclass that does not define ``solve``
            (naming :class:`~slackopt.solverbase.BaseSolver` as the fix).
    """

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if not cls.__dict__.get("_is_protocol", False) and cls.solve is Solver.solve:
            hint = ("; it defines plan(), which is BaseSolver's template"
                    if callable(getattr(cls, "plan", None)) else "")
            raise TypeError(
                f"{cls.__name__} subclasses slackopt.Solver, the protocol, without defining "
                f"solve(){hint}. Subclass slackopt.BaseSolver to write plan() only, or define "
                "solve(instance, budget_bytes, *, time_limit_s=None, seed=None) -> "
                "SolveResult")

    def solve(self, instance: Instance, budget_bytes: int, *, time_limit_s: float | None = None,
              seed: int | None = None) -> SolveResult: ...


class _Registered:
    """A solver registered at runtime, shaped like an entry point (``name``, ``value``,
    ``load()``), so :func:`registered_solvers` lists both kinds alike."""

    def __init__(self, name: str, cls: type) -> None:
        self.name, self.cls = name, cls
        self.value = f"{cls.__module__}:{cls.__qualname__}"

    def load(self) -> type:
        return self.cls


_RUNTIME: dict[str, _Registered] = {}


def register_solver(name: str, cls: Any) -> Any:
    """Register a solver class under `name` for this process (the CLI, :func:`solve`,
    :func:`slackopt.compare.compare`), next to the entry-point solvers.

    Args:
        name: the registry name; must equal ``cls.name`` when the class sets one (results
            are labelled with ``cls.name``).
        cls: a class whose instances have ``solve(instance, budget_bytes, *,
            time_limit_s, seed)``, normally a :class:`slackopt.solverbase.BaseSolver`
            subclass; or a ``"path/to/file.py:ClassName"`` / ``"module:ClassName"`` string.

    Returns:
        The class (so it can be used as a decorator's result).

    Raises:
        SolverError: the name is taken (by an entry point or an earlier registration;
            call :func:`unregister_solver` first), ``cls.name`` differs, or the class has
            no ``solve``.
    """
    if isinstance(cls, str):
        cls = load_solver_class(cls)
    if not isinstance(name, str) or not name or ":" in name:
        raise SolverError(f"solver name {name!r} must be a non-empty string without ':'")
    if name in SOLVER_ALIASES:
        raise SolverError(f"'{name}' is the old name of the installed solver "
                          f"'{SOLVER_ALIASES[name]}'; pick another name")
    if name in _RUNTIME:
        raise SolverError(f"a solver named '{name}' is already registered at runtime "
                          f"({_RUNTIME[name].value}); call "
                          f"slackopt.unregister_solver('{name}') first, or pick another name")
    if name in registered_solvers():
        raise SolverError(f"'{name}' is a solver installed with slackopt "
                          f"({registered_solvers()[name].value}); pick another name")
    if not isinstance(cls, type) or not callable(getattr(cls, "solve", None)):
        raise SolverError(f"{cls!r} is not a solver class (a class with a solve() method)")
    own = getattr(cls, "name", None)
    if isinstance(own, str) and own and own != name:
        raise SolverError(f"{cls.__name__}.name is '{own}' but it is registered as '{name}'; "
                          "register it under its own name (results are labelled by it)")
    _RUNTIME[name] = _Registered(name, cls)
    return cls


def unregister_solver(name: str) -> None:
    """Remove a solver registered with :func:`register_solver` (e.g. to redefine it in a
    notebook).

    Raises:
        SolverError: `name` was not registered at runtime (entry-point solvers stay).
    """
    if name not in _RUNTIME:
        raise SolverError(f"no solver named '{name}' was registered at runtime; runtime "
                          f"registrations: {', '.join(_RUNTIME) or 'none'}")
    del _RUNTIME[name]


def load_solver_class(ref: str) -> type:
    """The class named by ``"path/to/file.py:ClassName"`` or ``"package.module:ClassName"``.

    A file is imported as module ``slackopt_user_<hex of its absolute path>`` (once per
    process: the same path gives the same module). :class:`_UserFileFinder` maps that name
    back to the file, so a worker process (compare's process pool, a Dask worker on the
    same file system) that unpickles one of its solver objects imports the file itself.

    Raises:
        SolverError: malformed reference, missing file or module, import error, or no such
            class in it.
    """
    import importlib
    import os

    path, sep, attr = ref.rpartition(":")
    if not sep or not path or not attr.isidentifier():
        raise SolverError(f"solver reference '{ref}' is not 'path/to/file.py:ClassName' or "
                          "'module:ClassName'")
    try:
        if path.endswith(".py"):
            full = os.path.abspath(path)
            if not os.path.isfile(full):
                raise SolverError(f"solver file '{path}' does not exist (from '{ref}')")
            mod = importlib.import_module(USER_MODULE_PREFIX + full.encode().hex())
        else:
            mod = importlib.import_module(path)
    except SolverError:
        raise
    except Exception as e:
        raise SolverError(f"cannot import the solver from '{ref}': {type(e).__name__}: "
                          f"{e}") from None
    if not hasattr(mod, attr):
        names = sorted(k for k, v in vars(mod).items() if isinstance(v, type)
                       and v.__module__ == mod.__name__ and callable(getattr(v, "solve", None)))
        raise SolverError(f"'{path}' has no class '{attr}'; solver classes there: "
                          f"{', '.join(names) or 'none'}")
    return getattr(mod, attr)


USER_MODULE_PREFIX = "slackopt_user_"


class _UserFileFinder:
    """Import hook: module ``slackopt_user_<hex>`` is the Python file whose absolute path
    is that hex text (see :func:`load_solver_class`). Installed on import of this module."""

    @staticmethod
    def find_spec(name: str, path: Any = None, target: Any = None) -> Any:
        import importlib.util

        if not name.startswith(USER_MODULE_PREFIX) or "." in name:
            return None
        try:
            full = bytes.fromhex(name[len(USER_MODULE_PREFIX):]).decode()
        except ValueError:
            return None
        return importlib.util.spec_from_file_location(name, full)


def _install_finder() -> None:
    import sys

    if not any(f is _UserFileFinder for f in sys.meta_path):
        sys.meta_path.append(_UserFileFinder)  # type: ignore[arg-type]


_install_finder()


def check_worker_importable(cls: type) -> None:
    """Refuse a solver class that worker processes cannot import, before any starts.

    Worker processes (spawned, or Dask) rebuild a solver object from its class's module
    and qualified name. That fails for a class defined in an interactive ``__main__`` (a
    notebook, the REPL, ``python -c``) or inside a function.

    Raises:
        SolverError: with the reason and the fix (put the class in a file and pass
            ``"path/to/file.py:ClassName"``, or register that; or use ``workers=1``).
    """
    import sys

    where = None
    if "<locals>" in cls.__qualname__:
        where = f"inside a function ({cls.__qualname__})"
    elif cls.__module__ == "__main__" and not getattr(sys.modules.get("__main__"),
                                                       "__file__", None):
        where = "in an interactive session (a notebook, the REPL or python -c)"
    if where:
        c, name = cls.__name__, getattr(cls, "name", cls.__name__)
        raise SolverError(
            f"solver class {c} is defined {where}, which worker processes cannot import. "
            f"Fix: save it in a file and pass 'path/to/file.py:{c}' as the solver (or "
            f"slackopt.register_solver('{name}', 'path/to/file.py:{c}')), or run with "
            "workers=1")


def registered_solvers() -> dict[str, Any]:
    """The registered solvers by canonical name: the ``slackopt.solvers`` entry points and
    those of :func:`register_solver`, each with ``name``, ``value`` ("module:Class") and
    ``load()`` (the class). Old names (:data:`SOLVER_ALIASES`) are not listed; an
    installation whose metadata still carries one lists it under its canonical name."""
    eps: dict[str, Any] = {canonical_name(ep.name): ep
                           for ep in entry_points(group=ENTRY_POINT_GROUP)}
    eps.update(_RUNTIME)
    return {k: eps[k] for k in sorted(eps)}


def solver_class(name: str) -> type:
    """The class of a registered solver name (or an old name, :data:`SOLVER_ALIASES`),
    or of a ``"file.py:Class"`` / ``"module:Class"`` reference.

    Raises:
        SolverError: unknown name (the message lists the registered ones).
    """
    if ":" in name:
        cls = load_solver_class(name)
        if not isinstance(cls, type) or not callable(getattr(cls, "solve", None)):
            raise SolverError(f"'{name}' is not a solver class (a class with a solve() "
                              "method, e.g. a slackopt.solverbase.BaseSolver subclass)")
        return cls
    eps = registered_solvers()
    name = canonical_name(name)
    if name not in eps:
        known = ", ".join(eps) or "none (is slackopt installed? pip install -e .)"
        raise SolverError(f"unknown solver '{name}'; registered solvers: {known} (or give "
                          "'path/to/file.py:ClassName')")
    return eps[name].load()


def get_solver(name: str, **params: Any) -> Solver:
    """Instantiate a solver with keyword hyperparameters.

    Args:
        name: a registered name, or ``"path/to/file.py:ClassName"`` / ``"module:Class"``.
        **params: the hyperparameters.

    Raises:
        SolverError: if no solver of that name is registered, or it rejects the parameters
            (the message lists the valid keys).
    """
    cls = solver_class(name)
    try:
        return cls(**params)
    except SolverError:
        raise
    except (TypeError, ValueError) as e:
        raise SolverError(f"solver '{name}': bad parameters {params}: {e}; valid keys: "
                          f"{describe_params(cls)}") from None


def solver_label(name: str, params_json: str | None) -> str:
    """A result row's label: ``name``, then the hyperparameters that differ from the
    solver's defaults as compact JSON (all of them when the class cannot be loaded here),
    e.g. ``'vdnn {"mode":"conv"}'``; for tables and legends."""
    import json

    params = json.loads(params_json) if isinstance(params_json, str) and params_json else {}
    try:
        params = non_default_params(solver_class(name), params)
    except SolverError:
        pass
    return f"{name} {json.dumps(params, separators=(',', ':'))}" if params else name


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
    start_plan: Plan | None = None,
    **params: Any,
) -> SolveResult:
    """Plan `instance` under `budget` with `solver` and evaluate the plan.

    Args:
        instance: the problem.
        solver: a registered name ("slackswap") or a solver object.
        budget: fraction of P (0.5), bytes (int), or a size string ("11.5GB").
        time_limit_s: passed to the solver.
        seed: passed to the solver.
        start_plan: a plan of `instance` to start from and to beat (e.g. the plan found
            at a smaller budget, :func:`solve_budgets`), or None. A solver whose class
            sets ``warm_starts`` (milp, genetic) gets its decisions as ``run.start`` and
            searches from it (milp: its first incumbent, so the large-neighbourhood
            search starts there when nothing faster turns up first; genetic: a seed of
            generation 0); its policy is not passed on. The rule: the result is never slower than
            `start_plan` simulated under this budget. When that plan runs and the solver's
            plan does not, or runs slower, the result takes `start_plan` (with its
            evaluation; ``objective_s`` its step) and keeps the solver's lower bound, which
            is valid for every plan: the status becomes what the bound proves for it
            ("optimal"/"bounded", or "feasible" without a bound); ``info["start_plan"]``
            records both step times and whether it was taken.
        **params: hyperparameters when `solver` is a name.

    Returns:
        The SolveResult with ``evaluation`` set (the plan simulated under the budget) and
        ``planning_time_s`` measured here if the solver left it at 0 (the start plan's
        simulation is not counted).

    One lowering, one evaluation, one status decision: the solver plans
    ``instance.lowered`` (views, ``Tensor.storage``: one saved unit per storage; the
    instance itself without views), every simulation of the solve runs there, and the
    plan is expanded back to every view once at the end (:meth:`Plan.from_lowered`), so
    every solver handles aliasing without knowing about it; ``info`` and the solver's own
    messages name storages by their base tensor. The result's evaluation is the one the
    solve made of its plan (:meth:`~slackopt.solverbase.BaseSolver.solve` makes it, or
    takes the solver's own); only a result that comes without one (a solver written
    against the protocol alone) is simulated here, and its status decided here by
    :func:`slackopt.result.settle_status`. A start plan is lowered once, and simulated
    only when it differs from the solver's plan.

    Raises:
        SolverError: unknown solver or bad parameters, or a solver whose ``solve`` returns
            something else than a SolveResult. BudgetError: unparseable budget.
        PlanError: a `start_plan` that is not a Plan, or whose tensors are not those of
            `instance`.
    """
    low_start = None
    if start_plan is not None:
        if not isinstance(start_plan, Plan):
            raise PlanError(f"start_plan is a {type(start_plan).__name__}, not a Plan (read a "
                            "plan file with slackopt.io.load_plan)")
        low_start = start_plan.lowered(instance)  # checked against `instance` first
    if isinstance(solver, str):
        solver = get_solver(solver, **params)
    elif not isinstance(solver, Solver):
        raise SolverError(f"{solver!r} is neither a registered solver name nor an object with "
                          "solve(instance, budget_bytes, *, time_limit_s, seed)")
    elif params:
        raise SolverError("hyperparameters go to the solver's constructor when passing an object")
    m = budget_bytes(instance, budget)
    low = instance.lowered
    kw: dict[str, Any] = {}
    if low_start is not None and getattr(solver, "warm_starts", False):
        kw["start"] = low_start.decisions
    t0 = time.perf_counter()
    res = solver.solve(low, m, time_limit_s=time_limit_s, seed=seed, **kw)
    elapsed = time.perf_counter() - t0
    if not isinstance(res, SolveResult):
        raise SolverError(f"solver '{solver_name(solver)}': solve() returned "
                          f"{type(res).__name__}, not a slackopt.SolveResult (a class with "
                          "plan() only subclasses slackopt.BaseSolver, which writes solve())")
    if not res.planning_time_s:
        res.planning_time_s = elapsed
    if res.plan is not None and res.evaluation is None:  # a result not judged by its solver
        res.evaluation = simulate(low, res.plan, m)
        # no note of a refuted claim: a SolveResult's status defaults to "feasible"
        res.status, res.lower_bound_s = settle_status(res.status, res.evaluation,
                                                      res.lower_bound_s, res.info, record=False)
    if low_start is not None and _beat_start_plan(res, low, m, low_start):
        res.plan = start_plan
    elif res.plan is not None and low is not instance:
        res.plan = Plan.from_lowered(instance, res.plan)
    return res


def _beat_start_plan(res: SolveResult, low: Instance, m: int, start: Plan) -> bool:
    """The start-plan rule of :func:`solve`: `res` takes `start` when `start` runs under M
    and `res`'s plan does not, or runs slower. `low` is the instance the solver planned
    (``instance.lowered``), `start` the start plan on it and `res`'s plan is on it too.
    The start plan is simulated unless it is `res`'s plan (whose evaluation `res` has).

    Returns:
        True when `res` takes the start plan: its evaluation, step time as objective and
        status (:func:`slackopt.result.settle_status`) are set, the caller sets the plan.
        ``info["start_plan"]`` records both step times and whether it was taken.
    """
    same = res.plan is not None and res.evaluation is not None and res.plan == start
    ev = res.evaluation if same else simulate(low, start, m)
    own = res.evaluation if res.plan is not None and res.status in PLAN_STATUSES else None
    own_step = float(own.step_time_s) if own is not None and own.feasible else None
    taken = ev.feasible and (own_step is None or float(ev.step_time_s) < own_step)
    res.info["start_plan"] = {"step_s": float(ev.step_time_s) if ev.feasible else None,
                              "solver_step_s": own_step, "taken": bool(taken)}
    if not taken:
        return False
    res.evaluation, res.objective_s = ev, float(ev.step_time_s)
    for k in ("gap", "min_budget_bytes", "min_budget_note", "plan_proven_optimal"):
        res.info.pop(k, None)
    # Only a plan status's bound is kept: one that came with "infeasible" or "timeout"
    # claimed something the start plan refutes or does not need.
    L = res.lower_bound_s if res.status in PLAN_STATUSES else None
    res.status, res.lower_bound_s = settle_status("feasible", ev, L, res.info)
    return True


def solve_budgets(
    instance: Instance,
    solver: str | Solver,
    budgets: Iterable[float | int | str],
    *,
    time_limit_s: float | None = None,
    seed: int | None = None,
    **params: Any,
) -> list[SolveResult]:
    """Plan `instance` under several budgets with one solver, chained from the smallest.

    The budgets are solved in increasing order of bytes (ties in the order given), each
    with the same `time_limit_s` and `seed`, and each with the best plan of the smaller
    budgets as :func:`solve`'s `start_plan`. The rule: for budgets M1 <= M2 of one call,
    the plan returned at M2 is never slower than the best plan of the budgets up to M1
    simulated under M2.

    It does not make the step non-increasing in M, and nothing can under the evaluator's
    semantics: a larger budget admits prefetches earlier, so a plan that runs under M1
    can run slower under M2 (copies that overlap at the duplex rate, evictions), or not
    at all under a host memory limit, and the best plan at M2 can be slower than the best
    at M1 (docs/model.md, "Invariants"). Where the larger budget's result is slower than
    a smaller budget's, or finds no plan that runs while a smaller budget did,
    ``info["budget_chain"]`` of its result says so: the smaller budget, its step, and the
    carried plan's step under the larger budget (None when it does not run there).

    Args:
        instance: the problem.
        solver: a registered name or a solver object (one object serves every budget).
        budgets: budgets as :func:`solve` takes them (fraction of P, bytes, size string).
        time_limit_s: the limit of each solve (s), or None.
        seed: the seed of each solve.
        **params: hyperparameters when `solver` is a name.

    Returns:
        One SolveResult per budget, in the order of `budgets`.

    Raises:
        SolverError, BudgetError: as :func:`solve`.
    """
    if isinstance(solver, str):
        solver = get_solver(solver, **params)
    elif params:
        raise SolverError("hyperparameters go to the solver's constructor when passing an object")
    budgets = list(budgets)
    ms = [budget_bytes(instance, b) for b in budgets]
    out: list[SolveResult | None] = [None] * len(ms)
    best: tuple[float, int, Plan] | None = None  # (step, bytes, plan) of the fastest so far
    for i in sorted(range(len(ms)), key=lambda j: ms[j]):
        res = solve(instance, solver, ms[i], time_limit_s=time_limit_s, seed=seed,
                    start_plan=best[2] if best is not None else None)
        ev = res.evaluation
        runs = res.plan is not None and ev is not None and ev.feasible
        T = float(ev.step_time_s) if runs else math.inf  # type: ignore[union-attr]
        if best is not None and T > best[0]:
            res.info["budget_chain"] = {
                "smaller_budget_bytes": best[1], "smaller_budget_step_s": best[0],
                "carried_plan_step_s": res.info["start_plan"]["step_s"],
                "note": "slower than a smaller budget's plan (or no plan that runs): the "
                        "step is not monotone in M under the evaluator's semantics"}
        if runs and (best is None or T <= best[0]):
            best = (T, ms[i], res.plan)  # type: ignore[assignment]
        out[i] = res
    return [r for r in out if r is not None]
