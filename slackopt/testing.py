"""Conformance checks of the solver contract, for the built-in solvers and for yours.

In the style of scikit-learn's ``check_estimator`` / ``parametrize_with_checks``
(``sklearn.utils.estimator_checks``): each check is a function ``check(cls, ctx)`` that
raises AssertionError (or the solver's own error) with a message naming what broke.
:func:`check_solver` runs them all on one class; :func:`parametrize_with_checks` makes one
pytest test per (solver, check), so a failure names both::

    from slackopt.testing import check_solver, parametrize_with_checks
    check_solver(MySolver)              # raises AssertionError naming the failed check

    @parametrize_with_checks([MySolver, "slackswap"])   # None: every registered solver
    def test_contract(solver, check):
        check(solver)

The checks (the contract of :class:`slackopt.solverbase.BaseSolver`):

- ``check_base_class``: a BaseSolver subclass whose ``cls()`` builds with defaults.
- ``check_params_round_trip``: ``params`` has exactly the ``__init__`` keywords, is
  JSON text, and ``cls(**s.params).params == s.params``.
- ``check_distinct_keys``: changing any one hyperparameter to another valid value changes
  the ``params`` JSON, the solver's part of the store key (:func:`slackopt.compare.run_key`,
  which adds the seed and the code identity itself); ``name`` is a non-empty string.
- ``check_bad_params``: an unknown key, and for each hyperparameter a value its spec
  refuses, raise :class:`~slackopt.errors.SolverError` naming every valid key.
- ``check_same_seed_same_plan``: two solves with the same seed give the same status and
  decisions.
- ``check_plans_feasible``: over the check instances and budgets, every status is one of
  :data:`slackopt.result.STATUSES`, ``result.solver == cls.name``, every plan is
  re-simulated by the evaluator and the result's ``evaluation`` equals that simulation
  (a solver's ``Outcome.evaluation`` is its plan's under M), no claimed status was
  refuted (``info["status_refuted"]``, :func:`slackopt.result.settle_status`), and every
  plan reported "feasible"/"optimal" is feasible with a peak <= M.
- ``check_min_budget_reachable``: where an infeasible result states
  ``info["min_budget_bytes"] = b``, solving at b gives a feasible plan (re-simulated).
- ``check_time_limit``: with ``time_limit_s = t`` a solve returns within the hard
  deadline :func:`slackopt.solverbase.hard_deadline_s` (``1.5 t + 1 s``, the tolerance
  compare() enforces), measured with perf_counter around the call. A contract with a
  tolerance, not a speed test: a solver that ignores its limit fails it; a slow machine
  does not, as long as the solver polls its clock.
"""

from __future__ import annotations

import functools
import inspect
import json
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from slackopt.errors import SolverError
from slackopt.instance import Instance
from slackopt.result import PLAN_STATUSES, STATUSES, SolveResult
from slackopt.simulate import simulate
from slackopt.solverbase import BaseSolver, Param, hard_deadline_s, param_names

Check = Callable[[type, "CheckContext"], None]


def _default_instances() -> list[Instance]:
    from slackopt.workloads.synthetic import chain, unet

    return [chain(8, seed=0), unet(2)]


@dataclass
class CheckContext:
    """What the checks run on.

    Attributes:
        instances: small instances (default: ``chain(8, seed=0)`` and ``unet(2)``).
        fractions: budgets as fractions of P (default 1.0, 0.6, 0.3).
        time_limit_s: the time limit of every solve (s, default 2.0).
        params: hyperparameters for the solver under test (default: its defaults).
    """

    instances: list[Instance] = field(default_factory=_default_instances)
    fractions: tuple[float, ...] = (1.0, 0.6, 0.3)
    time_limit_s: float = 2.0
    params: dict[str, Any] = field(default_factory=dict)
    _cache: dict[Any, SolveResult] = field(default_factory=dict, repr=False)

    def budgets(self, inst: Instance) -> list[int]:
        """The budgets (bytes) of the grid on `inst`."""
        return [int(f * inst.P) for f in self.fractions]

    def solve(self, cls: type, inst: Instance, m: int, seed: int | None = 0) -> SolveResult:
        """``cls(**params).solve`` on the lowered instance, cached per (instance, M, seed)."""
        key = (cls, id(inst), int(m), seed)
        if key not in self._cache:
            self._cache[key] = cls(**self.params).solve(
                inst.lowered, int(m), time_limit_s=self.time_limit_s, seed=seed)
        return self._cache[key]


def _fail(cls: type, what: str) -> AssertionError:
    return AssertionError(f"{cls.__name__}: {what}")


def check_base_class(cls: type, ctx: CheckContext) -> None:
    """A BaseSolver subclass that builds with its defaults (and ctx.params)."""
    if not (isinstance(cls, type) and issubclass(cls, BaseSolver)):
        raise _fail(cls, "is not a slackopt.solverbase.BaseSolver subclass")
    cls(**ctx.params)


def check_params_round_trip(cls: type, ctx: CheckContext) -> None:
    """params == the __init__ keywords, JSON-ready, and rebuilds an equal solver."""
    s = cls(**ctx.params)
    p = s.params
    if list(p) != param_names(cls):
        raise _fail(cls, f"params keys {list(p)} != __init__ keywords {param_names(cls)}")
    try:
        json.dumps(p, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise _fail(cls, f"params {p!r} are not JSON: {e}") from None
    again = cls(**p).params
    if again != p:
        raise _fail(cls, f"cls(**params).params = {again!r} differs from params {p!r}")


def _other_value(spec: Param, value: Any) -> Any:
    """A valid value different from `value` under `spec` (None if none is known)."""
    if spec.none and value is not None:
        return None
    t = spec.type
    if t is bool:
        return not value
    if t is str:
        return next((c for c in (spec.choices or ()) if c != value), None)
    if t is tuple:
        items = list(spec.choices or value or ())
        return [] if value else items[:1] or None
    if t in (int, float):
        lo = spec.min if spec.min is not None else (1 if spec.positive else 0)
        base = value if value is not None else lo
        for cand in (base + 1, base * 2, lo, (spec.max if spec.max is not None else base + 3),
                     (base + lo) / 2):
            if cand is None or cand == value:
                continue
            cand = t(cand)
            try:
                return spec.check(cand)
            except ValueError:
                continue
    return None


def _bad_values(spec: Param) -> list[Any]:
    """Values `spec` must refuse."""
    t = spec.type
    out: list[Any] = [] if spec.none else [None]
    if t is bool:
        out += ["no", 1]
    elif t in (int, float):
        out += [True, "3", float("nan")]
        if t is int:
            out.append(1.5)
        if spec.min is not None:
            out.append(t(spec.min) - 1)
        if spec.max is not None:
            out.append(t(spec.max) + 1)
        if spec.positive:
            out.append(t(0))
    elif t is str:
        out += [3]
        if spec.choices is not None:
            out.append("no-such-choice")
    elif t is tuple:
        out += ["abc", [1, 2]]
        if spec.choices is not None:
            out.append(["no-such-item"])
    return out


def check_distinct_keys(cls: type, ctx: CheckContext) -> None:
    """Another hyperparameter value gives other ``params`` JSON: the solver's part of a
    store key (:func:`slackopt.compare.run_key` adds the instance, budget, seed, time
    limit and code identity), so two settings never share stored rows."""
    s = cls(**ctx.params)
    if not isinstance(s.name, str) or not s.name:
        raise _fail(cls, f"name {s.name!r} is not a non-empty string (results are labelled "
                         "and keyed by it)")
    text = json.dumps(s.params, sort_keys=True)
    for k, spec in cls.param_specs.items():
        alt = _other_value(spec, getattr(s, k))
        if alt is None:
            continue
        with warnings.catch_warnings():  # a deprecated hyperparameter warns when set
            if spec.deprecated:
                warnings.simplefilter("ignore", FutureWarning)
            other = cls(**{**s.params, k: alt})
        if json.dumps(other.params, sort_keys=True) == text:
            raise _fail(cls, f"{k}={alt!r} is accepted but params do not change "
                             f"(the store key would not either)")


def check_bad_params(cls: type, ctx: CheckContext) -> None:
    """Unknown keys and out-of-spec values raise SolverError naming every valid key."""
    names = param_names(cls)

    def expect(kwargs: dict[str, Any], what: str) -> None:
        try:
            cls(**kwargs)
        except SolverError as e:
            msg = str(e)
            missing = [n for n in names if n not in msg]
            if missing:
                raise _fail(cls, f"{what}: the error does not name the valid keys "
                                 f"{missing}: {msg}") from None
            return
        except Exception as e:
            raise _fail(cls, f"{what}: raised {type(e).__name__}, not a SolverError naming "
                             f"the valid keys: {e}") from None
        raise _fail(cls, f"{what}: accepted, expected a SolverError")

    expect({**ctx.params, "no_such_param_xyz": 1}, "unknown key 'no_such_param_xyz'")
    for k, spec in cls.param_specs.items():
        for v in _bad_values(spec):
            expect({**ctx.params, k: v}, f"{k}={v!r} ({spec.rule()})")


def check_same_seed_same_plan(cls: type, ctx: CheckContext) -> None:
    """Same seed, same status and plan (no time limit and the solver warmed up first, so
    neither the clock nor a first solve's kernel loads can decide)."""
    inst = ctx.instances[0]
    m = int(0.6 * inst.P)
    if hasattr(cls, "warm_up"):
        cls.warm_up()
    for seed in (0, 7):
        a = cls(**ctx.params).solve(inst.lowered, m, time_limit_s=None, seed=seed)
        b = cls(**ctx.params).solve(inst.lowered, m, time_limit_s=None, seed=seed)
        same_plan = (a.plan is None and b.plan is None) or (
            a.plan is not None and b.plan is not None
            and np.array_equal(a.plan.decisions, b.plan.decisions)
            and a.plan.policy == b.plan.policy)
        if a.status != b.status or not same_plan:
            raise _fail(cls, f"seed {seed} gave two answers on {inst.name} at 0.6 P: "
                             f"{a.status} vs {b.status}, same plan: {same_plan}")


def check_plans_feasible(cls: type, ctx: CheckContext) -> None:
    """Shared status words; every plan re-simulated: the result's evaluation is that of
    its plan under M (the one a solver hands on in ``Outcome.evaluation`` included), and
    a feasible/optimal plan never goes over M."""
    for inst in ctx.instances:
        low = inst.lowered
        for m in ctx.budgets(inst):
            r = ctx.solve(cls, inst, m)
            where = f"{inst.name} at M = {m} B"
            if r.status not in STATUSES:
                raise _fail(cls, f"{where}: status {r.status!r} not in {STATUSES}")
            if r.solver != cls.name:
                raise _fail(cls, f"{where}: result.solver {r.solver!r} != name {cls.name!r}")
            ev = None if r.plan is None else simulate(low, r.plan, m)
            if ev is not None and (r.evaluation is None
                                   or r.evaluation.to_dict() != ev.to_dict()):
                raise _fail(cls, f"{where}: the result's evaluation is not its plan's "
                                 f"under M: {r.evaluation} vs a fresh simulation {ev}")
            refuted = (r.info or {}).get("status_refuted")
            if refuted is not None:
                says = ("there is no plan" if ev is None else f"feasible={ev.feasible}, peak "
                        f"{ev.peak_bytes} B ({ev.failure or refuted['why']})")
                raise _fail(cls, f"{where}: reported {refuted['claimed']} but the evaluator "
                                 f"says {says}")
            if r.status in PLAN_STATUSES:
                if r.plan is None or ev is None:
                    raise _fail(cls, f"{where}: status {r.status} without a plan")
                if not ev.feasible or ev.peak_bytes > m:
                    raise _fail(cls, f"{where}: reported {r.status} but the evaluator says "
                                     f"feasible={ev.feasible}, peak {ev.peak_bytes} B "
                                     f"({ev.failure})")


def check_min_budget_reachable(cls: type, ctx: CheckContext) -> None:
    """A stated ``info["min_budget_bytes"]`` is a budget where the solver succeeds."""
    for inst in ctx.instances:
        for m in ctx.budgets(inst):
            r = ctx.solve(cls, inst, m)
            b = (r.info or {}).get("min_budget_bytes")
            if r.status != "infeasible" or b is None:
                continue
            r2 = ctx.solve(cls, inst, int(b))
            ok = r2.status in PLAN_STATUSES and r2.plan is not None and \
                simulate(inst.lowered, r2.plan, int(b)).feasible
            if not ok:
                raise _fail(cls, f"{inst.name} at M = {m} B states min_budget_bytes = {b}, "
                                 f"but at {b} B the status is {r2.status}")
            break  # one per instance: each costs a solve


def check_time_limit(cls: type, ctx: CheckContext) -> None:
    """A solve with time_limit_s = t returns within 1.5 t + 1 s (compare's hard deadline)."""
    inst = max(ctx.instances, key=lambda i: i.n_saved)
    t = ctx.time_limit_s
    t0 = time.perf_counter()
    cls(**ctx.params).solve(inst.lowered, int(0.5 * inst.P), time_limit_s=t, seed=0)
    took = time.perf_counter() - t0
    if took > hard_deadline_s(t):  # type: ignore[operator]
        raise _fail(cls, f"time_limit_s={t:g} but the solve took {took:.3g} s (> the "
                         f"tolerance 1.5 x limit + 1 s = {hard_deadline_s(t):.3g} s)")


CHECKS: tuple[Check, ...] = (
    check_base_class, check_params_round_trip, check_distinct_keys, check_bad_params,
    check_same_seed_same_plan, check_plans_feasible, check_min_budget_reachable,
    check_time_limit,
)
"""Every check, in the order :func:`check_solver` runs them."""


def parametrize_with_checks(solvers: Iterable[type | str] | None = None,
                            ctx: CheckContext | None = None) -> Any:
    """A pytest decorator that runs every check (:data:`CHECKS`) on every solver, one test
    per pair, as scikit-learn's ``parametrize_with_checks`` does for estimators.

    The decorated test takes ``solver`` (the class) and ``check`` (the check with `ctx`
    bound: call ``check(solver)``); test ids are ``"<solver name>-<check name>"``. The
    checks of one class share `ctx`, so they share its cached solves.

    Args:
        solvers: solver classes, registered names, or ``"file.py:Class"`` references;
            None: every registered solver (:func:`slackopt.solver.registered_solvers`).
        ctx: instances, budgets, time limit and hyperparameters (default
            :class:`CheckContext`).

    Returns:
        A ``pytest.mark.parametrize`` mark over ``("solver", "check")``.

    Raises:
        SolverError: an unknown solver name. ImportError: pytest is not installed (the
            ``[dev]`` extra).
    """
    import pytest

    from slackopt.solver import registered_solvers, solver_class

    specs = list(registered_solvers()) if solvers is None else list(solvers)
    classes = [solver_class(x) if isinstance(x, str) else x for x in specs]
    ctx = ctx or CheckContext()
    return pytest.mark.parametrize(("solver", "check"), [
        pytest.param(cls, functools.partial(check, ctx=ctx),
                     id=f"{getattr(cls, 'name', None) or cls.__name__}-{check.__name__}")
        for cls in classes for check in CHECKS])


def check_solver(cls: type, ctx: CheckContext | None = None) -> None:
    """Run every conformance check (module docstring) on solver class `cls`.

    Args:
        cls: the solver class (not an instance).
        ctx: instances, budgets, time limit and hyperparameters (default
            :class:`CheckContext`: ``chain(8)`` and ``unet(2)`` at 1.0, 0.6, 0.3 P, 2 s).

    Raises:
        AssertionError: naming the first failed check, the solver and what broke.
    """
    if not inspect.isclass(cls):
        raise TypeError(f"check_solver takes a class, got {cls!r}")
    from slackopt.simulate import warm_up

    ctx = ctx or CheckContext()
    warm_up()  # compile the evaluator outside the solvers' clocks
    for check in CHECKS:
        try:
            check(cls, ctx)
        except AssertionError as e:
            raise AssertionError(f"{check.__name__}: {e}") from None


__all__ = ["CHECKS", "CheckContext", "check_solver", "parametrize_with_checks", "check_base_class",
           "check_params_round_trip", "check_distinct_keys", "check_bad_params",
           "check_same_seed_same_plan", "check_plans_feasible", "check_min_budget_reachable",
           "check_time_limit"]
