"""The solver base class: hyperparameters, validation, timing and results written once.

A solver is a class in the style of scikit-learn's estimators (Pedregosa et al., JMLR
2011; Buitinck et al., "API design for machine learning software", 2013):

- its ``__init__`` takes **keyword-only** hyperparameters with defaults and only stores
  each one under its own name (``self.k = k``), nothing else;
- :attr:`BaseSolver.params` is derived from that signature (never written by hand), so
  ``type(s)(**s.params)`` rebuilds an equal solver;
- ``param_specs`` (a class attribute, one :class:`Param` per hyperparameter) declares each
  one's type, range and choices; the class is refused at definition time if a parameter has
  no spec or a spec no parameter. The specs are checked at construction, after ``__init__``
  ran, and the stored values are normalized (numpy integers -> int, lists -> tuples);
- :meth:`BaseSolver.solve` (timing, the :class:`~slackopt.result.SolveResult`, the status
  words, the minimum-budget search) is written here once; a solver implements only
  :meth:`BaseSolver.plan`, which returns a :class:`~slackopt.plan.Plan` or an
  :class:`Outcome`.

A complete solver (see the README, "Your own solver")::

    class KeepSmall(BaseSolver):
        '''Keep the smallest tensors, swap the rest.'''
        name = "keep_small"
        param_specs = {"keep_share": Param(float, min=0.0, max=1.0)}

        def __init__(self, *, keep_share: float = 0.5) -> None:
            self.keep_share = keep_share

        def plan(self, instance, budget_bytes, run):
            ...
            return Plan(decisions, instance.saved_names)

Rules for ``plan(instance, budget_bytes, run)``:

- ``instance`` is already lowered (one saved unit per storage, :func:`slackopt.solve`);
  return decisions for ``instance.saved_names``. ``budget_bytes`` is M, an int.
- Randomness comes only from ``run.seed``, the seed given to ``solve(seed=)``
  (``np.random.default_rng(run.seed_or(0))``, and ``run.seed = run.seed_or(0)`` to report
  the default used): the same seed gives the same plan (checked with no time limit). The
  seed has one source, the call's; a ``seed`` hyperparameter is deprecated
  (:data:`DEPRECATED_SEED_PARAM`).
- ``run.start`` (int8 [n_saved] or None): the decisions of a plan to start from, given
  only to a solver whose class sets ``warm_starts = True`` (:func:`slackopt.solve`'s
  ``start_plan``). Such a solver scores it like any plan it finds and searches from it
  when it is the best (milp: its first incumbent; genetic: a seed of generation 0).
- ``run.time_limit_s`` (s, or None): a search polls ``run.expired()`` /
  ``run.remaining()`` and returns its best plan so far; the whole call must end within
  1.5 x limit + 1 s (:func:`hard_deadline_s`). Report "timeout" only
  when the limit stopped the search before any feasible plan (the plan returned, if
  any, is not feasible); "optimal" only for a proven optimum of the evaluator's semantics; a
  ``lower_bound_s`` only if valid for every plan.
- A bare Plan is judged by the evaluator under M. An :class:`Outcome` may set the status
  (one of :data:`slackopt.result.STATUSES`), ``objective_s``, ``lower_bound_s``,
  ``min_budget_bytes`` (skips the bisection), ``evaluation`` and ``info``. A solver that
  simulated its final plan under M hands that ``evaluation`` on: it becomes the result's,
  and the plan is not simulated again (one evaluation per solve).
- Infeasible answers get ``info["min_budget_bytes"]`` by bisection over
  :meth:`BaseSolver.feasible_at` (which re-runs ``plan`` at another budget; override it
  with something cheaper, or set ``min_budget_search = False``).

Registration: ``slackopt.register_solver(name, cls)`` at runtime, an entry point in the
``slackopt.solvers`` group, or ``"path/to/file.py:ClassName"`` wherever a solver name is
taken. Conformance: :func:`slackopt.testing.check_solver`.

Bad hyperparameters raise :class:`SolverParamError` (a :class:`~slackopt.errors.SolverError`
that is also a ``ValueError`` and a ``TypeError``), whose message names the solver, the
offending key and every valid key with its type, range and default.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from slackopt._source import module_digest
from slackopt.bisection import smallest_true
from slackopt.errors import SolverError
from slackopt.instance import Instance
from slackopt.plan import KEEP, RECOMP, Plan
from slackopt.result import PLAN_STATUSES, STATUSES, SolveResult, settle_status
from slackopt.simulate import Evaluation, simulate

MIN_BUDGET_REL_TOL = 0.005
"""Resolution of :func:`min_budget_by_bisection`, as a share of P."""


class SolverParamError(SolverError, ValueError, TypeError):
    """A solver hyperparameter is unknown or out of its declared range.

    The message names the solver, the key, the rule broken, the value given, and lists
    every valid key with its type, range and default (:func:`describe_params`).
    """


_UNSET: Any = object()


class _OutOfTime(Exception):
    """The minimum-budget search ran into the time limit."""


@dataclass(frozen=True)
class Param:
    """The declared type and range of one hyperparameter.

    Args:
        type: ``int``, ``float``, ``bool``, ``str`` or ``tuple`` (a sequence of strings,
            stored as a tuple and reported as a list). ``bool`` is never accepted for
            ``int``/``float``; ``int`` is accepted for ``float`` (stored as float).
        min: smallest allowed value (inclusive), ints and floats.
        max: largest allowed value (inclusive), ints and floats.
        below: the value must be < this (exclusive upper end), ints and floats.
        positive: the value must be > 0 (floats: an open lower end).
        choices: the allowed values (``str``), or the allowed items (``tuple``).
        none: None is allowed (means "the solver's default rule").
        doc: one line for messages and ``slackopt solvers``.
        deprecated: why the hyperparameter is deprecated and what replaces it; a value
            other than the ``__init__`` default then warns (FutureWarning) at
            construction. The key stays accepted and in ``params`` (so store keys of
            earlier runs still match).
    """

    type: type
    min: float | None = None
    max: float | None = None
    below: float | None = None
    positive: bool = False
    choices: Sequence[Any] | None = None
    none: bool = False
    doc: str = ""
    deprecated: str = ""

    def rule(self) -> str:
        """The constraint in words, e.g. ``"int >= 1 or None"``."""
        name = {tuple: "list of str"}.get(self.type, self.type.__name__)
        parts = []
        if self.choices is not None:
            sep = "items from " if self.type is tuple else "one of "
            parts.append(sep + "{" + ", ".join(map(str, self.choices)) + "}")
        if self.positive:
            parts.append("> 0")
        if self.min is not None:
            parts.append(f">= {self.min:g}")
        if self.max is not None:
            parts.append(f"<= {self.max:g}")
        if self.below is not None:
            parts.append(f"< {self.below:g}")
        return " ".join([name, " and ".join(parts)] if parts else [name]) + \
            (" or None" if self.none else "")

    def check(self, value: Any) -> Any:
        """The normalized value, or a ValueError whose message states :meth:`rule`."""
        if value is None:
            if self.none:
                return None
            raise ValueError("None is not allowed")
        t = self.type
        if t is bool:
            if not isinstance(value, bool):
                raise ValueError("not true/false")
            return value
        if t in (int, float):
            ok = isinstance(value, numbers.Real)
            if isinstance(value, bool) or not ok or not math.isfinite(value):
                raise ValueError(f"not a finite {t.__name__}")
            if t is int and not isinstance(value, numbers.Integral):
                if not float(value).is_integer():  # 1e3 (JSON reads it as 1000.0) is 1000
                    raise ValueError("not a whole number")
            value = t(value)
            if self.positive and not value > 0:
                raise ValueError("not > 0")
            if self.min is not None and value < self.min:
                raise ValueError(f"below {self.min:g}")
            if self.max is not None and value > self.max:
                raise ValueError(f"above {self.max:g}")
            if self.below is not None and not value < self.below:
                raise ValueError(f"not below {self.below:g}")
            return value
        if t is str:
            if not isinstance(value, str):
                raise ValueError("not a string")
            if self.choices is not None and value not in self.choices:
                raise ValueError("not an allowed choice")
            return value
        if t is tuple:
            if isinstance(value, str) or not isinstance(value, Sequence) or \
                    not all(isinstance(x, str) for x in value):
                raise ValueError("not a list of strings")
            bad = [x for x in value if self.choices is not None and x not in self.choices]
            if bad:
                raise ValueError(f"unknown items {bad}")
            return tuple(value)
        raise TypeError(f"Param type {t!r} is not int, float, bool, str or tuple")

    def report(self, value: Any) -> Any:
        """The JSON form of a stored value (tuples become lists)."""
        return list(value) if isinstance(value, tuple) else value


DEPRECATED_SEED_PARAM = Param(
    int, deprecated="the seed comes from solve(seed=) (slackopt.solve(..., seed=K), "
    "--seed K), the one seed source; this hyperparameter, used only when solve() gets "
    "seed=None, will be removed")
"""The spec of a ``seed`` hyperparameter kept for compatibility (genetic, milp): accepted
and reported in ``params`` (store keys of earlier runs still match), a FutureWarning when
set to anything but its default."""


def param_names(cls: type) -> list[str]:
    """The keyword hyperparameters of ``cls.__init__``, in signature order.

    Raises:
        TypeError: if ``__init__`` takes positional parameters or ``*args``/``**kwargs``
            (scikit-learn's rule: hyperparameters are explicit keywords).
    """
    init = getattr(cls.__init__, "__wrapped__", cls.__init__)
    if init is object.__init__:
        return []
    names: list[str] = []
    for p in list(inspect.signature(init).parameters.values())[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"{cls.__name__}.__init__ takes *{p.name}: solver "
                            "hyperparameters must be explicit keywords")
        names.append(p.name)
    return names


def param_defaults(cls: type) -> dict[str, Any]:
    """``{name: default}`` from ``cls.__init__``'s signature (``inspect.Parameter.empty``
    for a parameter without default)."""
    init = getattr(cls.__init__, "__wrapped__", cls.__init__)
    if init is object.__init__:
        return {}
    ps = list(inspect.signature(init).parameters.values())[1:]
    return {p.name: p.default for p in ps}


def non_default_params(cls: type, params: dict[str, Any]) -> dict[str, Any]:
    """The entries of `params` that differ from ``cls.__init__``'s defaults (compared in
    their JSON form: tuples as lists), for short labels; keys the signature lacks are kept."""
    defaults = param_defaults(cls)

    def js(v: Any) -> Any:
        return list(v) if isinstance(v, tuple) else v

    return {k: v for k, v in params.items()
            if k not in defaults or js(defaults[k]) != js(v)}


def describe_params(cls: type) -> str:
    """Every valid key of `cls` with its rule and default, for error messages:
    ``"segment (int >= 1 or None, default None), ..."``, or ``"none"``."""
    specs: dict[str, Param] = getattr(cls, "param_specs", {}) or {}
    out = []
    for k, d in param_defaults(cls).items():
        rule = specs[k].rule() if k in specs else "any"
        dflt = "required" if d is inspect.Parameter.empty else f"default {d!r}"
        out.append(f"{k} ({rule}, {dflt})")
    return ", ".join(out) or "none (this solver takes no parameters)"


def _solver_label(cls: type) -> str:
    return f"solver '{getattr(cls, 'name', cls.__name__)}'"


def _checked_init(init: Callable[..., None]) -> Callable[..., None]:
    """Wrap a solver's ``__init__``: refuse unknown or positional keys (those of the class
    that defines this ``__init__``, so a subclass may call ``super().__init__`` with fixed
    values of other keywords), then, in the most derived class only, check and normalize
    every stored hyperparameter against ``param_specs``."""

    @functools.wraps(init)
    def __init__(self: BaseSolver, *args: Any, **kwargs: Any) -> None:
        owner = getattr(__init__, "_owner", type(self))
        if args:
            raise SolverParamError(
                f"{_solver_label(type(self))} takes keyword parameters only, got {len(args)} "
                f"positional; valid keys: {describe_params(type(self))}")
        names = param_names(owner)
        unknown = [k for k in kwargs if k not in names]
        if unknown:
            raise SolverParamError(
                f"{_solver_label(owner)} has no parameter "
                f"{', '.join(repr(k) for k in unknown)}; valid keys: {describe_params(owner)}")
        init(self, **kwargs)
        if type(self).__init__ is __init__:  # the most derived class checks, once
            self._check_params()

    return __init__


class BaseSolver:
    """Base class of slackopt solvers (module docstring: the contract).

    Class attributes a subclass sets:
        name: the registry name, labels every result (default: the class name).
        param_specs: ``{hyperparameter: Param}``, one per ``__init__`` keyword.
        min_budget_search: False to never run the minimum-budget bisection (default True;
            a hyperparameter of the same name overrides it per instance).
        warm_starts: True when :meth:`plan` reads ``run.start``, a plan to start from
            (default False: the start plan of :func:`slackopt.solve` is then only a plan
            to beat).

    What a subclass writes: ``__init__`` (store the keywords) and :meth:`plan`.
    Optionally :meth:`feasible_at` (a cheaper feasibility test for the bisection).

    Conformance: :func:`slackopt.testing.check_solver` checks a subclass against this
    contract.
    """

    name: ClassVar[str] = ""
    param_specs: ClassVar[dict[str, Param]] = {}
    min_budget_search: ClassVar[bool] = True
    warm_starts: ClassVar[bool] = False

    @_checked_init
    def __init__(self) -> None:
        """No hyperparameters (subclasses declare their own keywords)."""

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        import sys

        if cls.__module__ in sys.modules:  # snapshot the source being run (code identity)
            module_digest(sys.modules[cls.__module__])
        if "name" not in cls.__dict__ or not cls.__dict__["name"]:
            cls.name = cls.__name__
        if "__init__" in cls.__dict__:
            cls.__init__ = _checked_init(cls.__dict__["__init__"])  # type: ignore[method-assign]
            cls.__init__._owner = cls  # type: ignore[attr-defined]
        names = param_names(cls)
        specs = cls.param_specs or {}
        missing = [k for k in names if k not in specs]
        extra = [k for k in specs if k not in names]
        if missing or extra:
            raise TypeError(
                f"solver class {cls.__name__}: param_specs must declare exactly the "
                f"__init__ keywords; missing specs: {missing or 'none'}, specs without a "
                f"parameter: {extra or 'none'}")

    def _check_params(self) -> None:
        cls = type(self)
        for k in param_names(cls):
            if not hasattr(self, k):
                raise TypeError(f"{cls.__name__}.__init__ must store {k} as self.{k} "
                                "(params are read back from the attributes)")
            try:
                setattr(self, k, cls.param_specs[k].check(getattr(self, k)))
            except ValueError as e:
                raise SolverParamError(
                    f"{_solver_label(cls)}: {k} must be {cls.param_specs[k].rule()}, got "
                    f"{getattr(self, k)!r} ({e}); valid keys: {describe_params(cls)}"
                ) from None
            if cls.param_specs[k].deprecated and getattr(self, k) != param_defaults(cls)[k]:
                import warnings

                warnings.warn(f"{_solver_label(cls)}: {k}={getattr(self, k)!r}: "
                              f"{cls.param_specs[k].deprecated}", FutureWarning, stacklevel=3)
        try:
            self.check_params()
        except ValueError as e:
            raise SolverParamError(f"{_solver_label(cls)}: {e}; valid keys: "
                                   f"{describe_params(cls)}") from None

    @classmethod
    def warm_up(cls) -> None:
        """Compile what this solver runs compiled (numba kernels: the evaluator's and the
        solver's own) through the calls a solve makes, so that numba's on-disk cache holds
        the signatures solves use. The kernel compile (:mod:`slackopt.compile_kernels`)
        calls it for slackopt's solvers that override it; a solve never does (what a
        solve waits for counts in its planning time). Default: one simulation of the
        warm-up chain, which compiles the evaluator. A solver with kernels of its own
        solves a small instance here (e.g. ``cls().solve(warm_up_instance(), ...)``)."""
        inst = warm_up_instance()
        simulate(inst, Plan.keep_all(inst), int(inst.P))

    def check_params(self) -> None:
        """Rules between hyperparameters that one :class:`Param` cannot state (e.g.
        ``elites < population``); runs after the specs. Raise ValueError naming the keys
        and the rule; it becomes a :class:`SolverParamError` listing the valid keys.
        Default: none."""

    @property
    def params(self) -> dict[str, Any]:
        """The hyperparameters, ``{keyword: value}`` in signature order, JSON-ready
        (tuples as lists); ``type(self)(**self.params)`` is an equal solver."""
        specs = type(self).param_specs
        return {k: specs[k].report(getattr(self, k)) for k in param_names(type(self))}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.params == self.params  # type: ignore

    def __hash__(self) -> int:
        return hash((type(self), repr(self)))

    # ------------------------------------------------------------------ the template
    def plan(self, instance: Instance, budget_bytes: int, run: Run) -> Plan | Outcome | None:
        """Plan `instance` under `budget_bytes` (M, bytes). Subclasses implement this.

        Args:
            instance: the problem (views already lowered by :func:`slackopt.solve`).
            budget_bytes: M, an int.
            run: the seed, the time limit and the clock of this call (:class:`Run`).

        Returns:
            A :class:`~slackopt.plan.Plan` (the evaluator then decides feasible or
            infeasible under M, and the objective is its step time), an :class:`Outcome`
            (to report a status, objective, lower bound, minimum budget or ``info``
            yourself), or None (no plan: status "infeasible").
        """
        raise NotImplementedError(f"{type(self).__name__} must implement plan()")

    def feasible_at(self, instance: Instance, budget_bytes: int, run: Run) -> bool:
        """Whether this solver finds a feasible plan under `budget_bytes`; the predicate of
        the minimum-budget bisection. Default: :meth:`plan` at that budget, judged by the
        evaluator (or by the Outcome's evaluation/status when it gives one)."""
        out = _as_outcome(self.plan(instance, int(budget_bytes), run))
        if out.status is not None and out.status not in PLAN_STATUSES:
            return False
        if out.plan is None:
            return False
        ev = out.evaluation or simulate(instance, out.plan, int(budget_bytes))
        return bool(ev.feasible)

    def solve(self, instance: Instance, budget_bytes: int, *, time_limit_s: float | None = None,
              seed: int | None = None, start: np.ndarray | None = None) -> SolveResult:
        """Plan, judge and time one instance under one budget; the result of :meth:`plan`
        assembled into a :class:`~slackopt.result.SolveResult`.

        Evaluation: the Outcome's ``evaluation`` of its plan under M when it has one,
        else one simulation of the plan; the result carries it (``evaluation``).
        Status: :func:`slackopt.result.settle_status` of the Outcome's claim, that
        evaluation and ``lower_bound_s``: without a claim "feasible" or "infeasible" as the
        plan runs under M or not; a plan status with a plan that does not run becomes
        "infeasible"; with a bound, a plan that runs is "optimal" when its simulated step
        is within ``OPTIMAL_REL_TOL`` (relative) of the bound, else "bounded", with
        ``info["gap"]``; a bound above the simulated step is a proven error, dropped into
        ``info["bound_error"]`` (status "feasible"). ``objective_s``: the
        Outcome's, else the evaluated step time of a plan that runs. On an "infeasible"
        status without ``info["min_budget_bytes"]``, the minimum budget is searched by
        :func:`min_budget_by_bisection` over :meth:`feasible_at` (when the
        ``min_budget_search`` hyperparameter or class attribute is true; else None); the
        search stops at the time limit, leaving None and ``info["min_budget_note"]``.
        A known minimum budget comes with ``info["min_budget_basis"]``, what it means
        (:data:`slackopt.result.MIN_BUDGET_BASES`; "solver" unless the solver set another).
        ``planning_time_s`` covers all of it (perf_counter), the loading (or, in
        ``SLACKOPT_KERNELS=compiled`` on a cold cache, the compiling) of the kernels the
        solve calls included (:mod:`slackopt.jit`); ``seed`` is ``run.seed``.
        When :meth:`plan` returns no plan, ``info["note"]`` says so (unless the solver set
        a note of its own): the reason an "infeasible" without a plan is shown.

        Args:
            instance: the problem.
            budget_bytes: M (bytes).
            time_limit_s: seconds the solver may use (None: no limit); solvers that search
                stop by ``run.expired()``, returning status "timeout" only when no feasible
                plan was found in time.
            seed: the seed (None: the solver's fixed default); the same seed gives the
                same plan.
            start: decisions of a plan to start from (int, one per saved tensor of
                `instance`: 0 keep, 1 swap, 2 recomp), or None; passed to :meth:`plan` as
                ``run.start`` when the class sets ``warm_starts`` (else ignored). The
                same seed and start give the same plan.

        Raises:
            SolverError: a time limit that is not None or a finite number >= 0
                (:func:`check_time_limit`); a `start` that is not one decision per saved
                tensor, each in {0, 1, 2}.
        """
        time_limit_s = check_time_limit(time_limit_s)
        if start is not None and self.warm_starts:
            start = check_start(instance, start)
        else:
            start = None
        run = Run(time_limit_s=time_limit_s, seed=seed, started=time.perf_counter(),
                  start=start)
        M = int(budget_bytes)
        out = _as_outcome(self.plan(instance, M, run))
        info = dict(out.info)
        if out.plan is None and not info.get("note"):
            info["note"] = f"{self.name} returned no plan"
        ev = None
        if out.plan is not None:
            ev = out.evaluation if out.evaluation is not None else simulate(instance, out.plan, M)
        status, lower = settle_status(out.status, ev, out.lower_bound_s, info)
        objective = out.objective_s
        if objective is None and out.status is None and ev is not None and ev.feasible:
            objective = float(ev.step_time_s)
        if out.min_budget_bytes is not _UNSET:
            info["min_budget_bytes"] = out.min_budget_bytes
            if out.min_budget_bytes is not None:
                info.setdefault("min_budget_basis", "solver")
        elif status == "infeasible" and "min_budget_bytes" not in info:
            info["min_budget_bytes"] = None
            if getattr(self, "min_budget_search", True):
                def pred(m: int) -> bool:
                    if run.expired():
                        raise _OutOfTime
                    return self.feasible_at(instance, m, run)
                try:
                    info["min_budget_bytes"] = min_budget_by_bisection(instance, pred, M)
                    info["min_budget_basis"] = "bisection"
                except _OutOfTime:
                    info["min_budget_note"] = ("the minimum-budget search stopped at the time "
                                               f"limit ({run.time_limit_s:g} s)")
        return SolveResult(
            plan=out.plan, solver=self.name, params=self.params, status=status,
            objective_s=objective, lower_bound_s=lower,
            planning_time_s=time.perf_counter() - run.started, seed=run.seed, info=info,
            evaluation=ev)


def check_start(instance: Instance, start: Any) -> np.ndarray:
    """A start plan's decisions as :meth:`BaseSolver.solve` passes them on: int8, one per
    saved tensor of `instance`, each KEEP, SWAP or RECOMP (recomp only where c_t is
    finite); a copy, so the solver may change it.

    Raises:
        SolverError: another length, or a value outside those, naming the tensor.
    """
    n = int(instance.n_saved)
    try:
        d = np.asarray(start)
    except ValueError:      # a ragged sequence
        d = np.asarray(start, dtype=object)
    if d.shape != (n,) or (d.size and not np.issubdtype(d.dtype, np.integer)):
        raise SolverError(f"start plan: expected {n} integer decisions (one per saved tensor "
                          f"of {instance.name}), got shape {d.shape} of {d.dtype}")
    c = np.asarray(instance.c, dtype=np.float64)
    bad = np.flatnonzero((d < KEEP) | (d > RECOMP) | ((d == RECOMP) & ~np.isfinite(c)))
    if bad.size:
        t = int(bad[0])
        raise SolverError(f"start plan: decision {int(d[t])} of saved tensor "
                          f"'{instance.saved_names[t]}' is not keep (0), swap (1) or, for a "
                          "rebuildable tensor, recomp (2)")
    return d.astype(np.int8).copy()


def check_time_limit(time_limit_s: Any) -> float | None:
    """A time limit as every solver and sweep takes it: None (no limit) or a finite number
    of seconds >= 0, returned as a float. The one rule for :meth:`BaseSolver.solve`,
    :func:`slackopt.compare.compare` and the command line's ``--time-limit``.

    Raises:
        SolverError: anything else (inf, NaN, a negative number, a bool, a string),
            naming the rule and the fix.
    """
    if time_limit_s is None:
        return None
    if isinstance(time_limit_s, bool) or not isinstance(time_limit_s, numbers.Real) \
            or not math.isfinite(time_limit_s) or time_limit_s < 0:
        raise SolverError(f"time limit {time_limit_s!r} must be a finite number >= 0 (s); "
                          "for no limit, leave --time-limit out (in Python: time_limit_s=None)")
    return float(time_limit_s)


HARD_TIMEOUT_FACTOR = 1.5
"""A solve may take up to ``HARD_TIMEOUT_FACTOR * time_limit_s + HARD_TIMEOUT_SLACK_S``
(:func:`hard_deadline_s`)."""
HARD_TIMEOUT_SLACK_S = 1.0


def hard_deadline_s(time_limit_s: float | None) -> float | None:
    """The wall-clock time (s) a solve with `time_limit_s` may take: ``1.5 t + 1 s``, the
    contract's tolerance on a time limit (a search polls its clock and stops between
    steps). :func:`slackopt.compare.compare` interrupts a run past it;
    :func:`slackopt.testing.check_time_limit` checks a solver keeps to it. None for no
    limit."""
    if time_limit_s is None:
        return None
    return HARD_TIMEOUT_FACTOR * float(time_limit_s) + HARD_TIMEOUT_SLACK_S


@functools.cache
def warm_up_instance() -> Instance:
    """The small instance solvers compile their kernels on: a 4-layer chain (seed 0, A100,
    PCIe 4.0; :func:`slackopt.workloads.synthetic.chain`), built once per process."""
    from slackopt.workloads.synthetic import chain

    return chain(4, seed=0)


@dataclass
class Run:
    """One call of :meth:`BaseSolver.solve`: its seed, time limit and clock.

    Attributes:
        time_limit_s: seconds allowed (None: no limit).
        seed: the seed given to ``solve(seed=)`` (None: use a fixed default through
            :meth:`seed_or`). A solver that substitutes its default sets ``run.seed`` to
            the seed it used; the SolveResult reports ``run.seed``.
        started: ``time.perf_counter()`` at the start of the call.
        start: the decisions of a plan to start from (int8 [n_saved]), or None; set only
            for a solver whose class has ``warm_starts = True``.
    """

    time_limit_s: float | None
    seed: int | None
    started: float
    start: np.ndarray | None = None

    def elapsed(self) -> float:
        """Seconds since the call started."""
        return time.perf_counter() - self.started

    def remaining(self) -> float:
        """Seconds left before the time limit (inf without one; may be negative)."""
        return math.inf if self.time_limit_s is None else self.time_limit_s - self.elapsed()

    def expired(self) -> bool:
        """True once the time limit is used up."""
        return self.remaining() <= 0

    def seed_or(self, default: int = 0) -> int:
        """The seed of this call as an int, or `default` when ``solve`` got seed=None;
        every seeded solver draws its seed here (genetic, milp)."""
        return default if self.seed is None else int(self.seed)


@dataclass
class Outcome:
    """What :meth:`BaseSolver.plan` returns when a bare Plan does not say enough.

    Attributes:
        plan: the plan, or None.
        status: one of :data:`slackopt.result.STATUSES`, or None to let the evaluator
            decide ("feasible"/"infeasible" under M).
        objective_s: the solver's own model value (s); None: the evaluated step time.
        lower_bound_s: a lower bound on the step time valid for every plan (s), or None.
        min_budget_bytes: the smallest budget (bytes) this solver reaches, when the solver
            knows it (e.g. a budget-oblivious plan's peak); left unset, an infeasible
            answer triggers the bisection; None means unknown. A number that means
            something else sets ``info["min_budget_basis"]``
            (:data:`slackopt.result.MIN_BUDGET_BASES`).
        evaluation: the evaluation the solver made of `plan` under M (the same plan:
            decisions, policy and runtime parameters), or None. It becomes the result's
            evaluation as it is: :meth:`BaseSolver.solve` simulates the plan only without
            one. :func:`slackopt.testing.check_solver` checks it against a fresh
            simulation.
        info: solver-specific details (JSON-ready values).
    """

    plan: Plan | None
    status: str | None = None
    objective_s: float | None = None
    lower_bound_s: float | None = None
    min_budget_bytes: int | None = _UNSET
    evaluation: Evaluation | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status is not None and self.status not in STATUSES:
            raise ValueError(f"status '{self.status}' is not one of {', '.join(STATUSES)}")


def _as_outcome(x: Plan | Outcome | None) -> Outcome:
    if isinstance(x, Outcome):
        return x
    if x is None or isinstance(x, Plan):
        return Outcome(plan=x)
    raise TypeError(f"plan() returned {type(x).__name__}; expected a Plan, an Outcome or None")


def min_budget_by_bisection(instance: Instance, feasible_at: Callable[[int], bool],
                            lo: int) -> int | None:
    """Smallest budget (bytes) in (lo, P] at which ``feasible_at`` holds, within
    :data:`MIN_BUDGET_REL_TOL` (0.5%) of P, by :func:`slackopt.bisection.smallest_true`.

    Feasibility is assumed monotone in M and False at `lo`; the returned budget is one at
    which ``feasible_at`` held. Returns None if it does not hold at P either (about
    log2(1 / 0.005) = 8 calls).
    """
    P = int(instance.P)
    if int(lo) >= P or not feasible_at(P):
        return None
    return smallest_true(feasible_at, int(lo), P, tol=max(1, math.ceil(MIN_BUDGET_REL_TOL * P)))


__all__ = ["BaseSolver", "DEPRECATED_SEED_PARAM", "HARD_TIMEOUT_FACTOR", "HARD_TIMEOUT_SLACK_S",
           "MIN_BUDGET_REL_TOL", "Outcome", "Param", "Run", "SolverParamError",
           "check_time_limit", "describe_params", "hard_deadline_s", "min_budget_by_bisection",
           "non_default_params", "param_names"]

