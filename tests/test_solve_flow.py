"""One lowering, one evaluation and one status decision per solve (issue 42, item 4).

:func:`slackopt.solve` lowers the instance once (``Instance.lowered``), every simulation
of the solve runs on the storage-level instance, the evaluation a solver made of its final
plan under M reaches the :class:`~slackopt.result.SolveResult` without being recomputed,
the plan is expanded to the views once, and :func:`slackopt.result.settle_status` decides
the status once per solve. Counted here by wrapping the evaluator, the base class's
``solve``, the plan's lowering maps and the status function, on an instance with views
(instances/edge/aliasing.json).
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import slackopt
import slackopt.result
from slackopt import BaseSolver, Plan
from slackopt.instance import Instance, budget_bytes
from slackopt.io import load_instance
from slackopt.plan import SWAP
from slackopt.result import SolveResult
from slackopt.simulate import Evaluation
from slackopt.solver import get_solver

ALIASING = Path(__file__).resolve().parents[1] / "instances" / "edge" / "aliasing.json"
EVALUATOR = importlib.import_module("slackopt.simulate")  # `slackopt.simulate` is the function
SIMULATE = EVALUATOR.simulate
SETTLE = slackopt.result.settle_status


@dataclass
class Call:
    """One evaluator run: the plan's decisions and policy, M, whether the instance was
    the storage-level one, whether a trace was asked for, and the Evaluation returned."""

    decisions: bytes
    policy: str
    M: int
    storage_level: bool
    trace: bool
    evaluation: Evaluation


@dataclass
class Frame:
    """The evaluator runs and status decisions of one ``BaseSolver.solve`` (``M`` set; its
    result, and the plan it returned, on the instance it was given), or those
    :func:`slackopt.solve` makes outside any (``M`` None)."""

    M: int | None = None
    calls: list[Call] = field(default_factory=list)
    settled: int = 0
    result: SolveResult | None = None
    plan: Plan | None = None


class Recorder:
    """Wraps the evaluator (every module's ``simulate``), ``BaseSolver.solve`` (one frame
    per call, nested calls included: the seed solvers of genetic and milp),
    ``Plan.lowered`` and ``Plan.from_lowered`` (counted when they map between the levels of
    an instance with views) and :func:`slackopt.result.settle_status`."""

    def __init__(self, mp: pytest.MonkeyPatch) -> None:
        self.outside = Frame()
        self.stack: list[Frame] = [self.outside]
        self.solves: list[Frame] = []   # in the order they end: nested ones first
        self.lowered = self.expanded = 0
        rec = self

        def simulate(instance: Instance, plan: Plan, budget: int, **kw: Any) -> Evaluation:
            ev = SIMULATE(instance, plan, budget, **kw)
            rec.stack[-1].calls.append(Call(plan.decisions.tobytes(), plan.policy, int(budget),
                                            instance.saved_unit is None,
                                            bool(kw.get("trace")), ev))
            return ev

        def settle(*a: Any, **kw: Any) -> Any:
            rec.stack[-1].settled += 1
            return SETTLE(*a, **kw)

        # a module first imported under an earlier Recorder holds that one's wrapper
        simulate.wraps = settle.wraps = True  # type: ignore[attr-defined]

        base_solve = BaseSolver.solve

        def solve(self: BaseSolver, instance: Instance, budget: int, **kw: Any) -> SolveResult:
            rec.stack.append(Frame(M=int(budget)))
            try:
                res = base_solve(self, instance, budget, **kw)
            finally:
                frame = rec.stack.pop()
            frame.result, frame.plan = res, res.plan
            rec.solves.append(frame)
            return res

        plan_lowered, from_lowered = Plan.lowered, Plan.from_lowered.__func__  # type: ignore

        def lowered(plan: Plan, instance: Instance) -> Plan:
            rec.lowered += instance.saved_unit is not None
            return plan_lowered(plan, instance)

        def expand(cls: type, instance: Instance, plan: Plan) -> Plan:
            rec.expanded += instance.saved_unit is not None
            return from_lowered(cls, instance, plan)

        for mod in [m for n, m in list(sys.modules.items())   # slackopt's, solvers included
                    if n == "slackopt" or n.startswith("slackopt.")]:
            for attr, fn, wrapper in (("simulate", SIMULATE, simulate),
                                      ("settle_status", SETTLE, settle)):
                bound = getattr(mod, attr, None)
                if bound is fn or getattr(bound, "wraps", False):
                    mp.setattr(mod, attr, wrapper)
        mp.setattr(BaseSolver, "solve", solve)
        mp.setattr(Plan, "lowered", lowered)
        mp.setattr(Plan, "from_lowered", classmethod(expand))

    def final_runs(self, frame: Frame) -> list[Call]:
        """The runs of `frame` (trace runs aside) of the plan it returned under its M."""
        plan = frame.plan
        assert plan is not None
        return [c for c in frame.calls if not c.trace and c.M == frame.M
                and c.decisions == plan.decisions.tobytes() and c.policy == plan.policy]


SOLVERS = [
    ("slackswap", {}, None),
    ("checkpoint", {}, None),
    ("genetic", {"generations": 2, "population": 8, "progress_s": None}, None),
    ("milp", {}, 5.0),
]


@pytest.fixture
def aliasing() -> Instance:
    inst = load_instance(ALIASING)
    assert inst.aliased and inst.lowered.n_saved < inst.n_saved
    return inst


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    for name, params, _ in SOLVERS:      # import every module a solve will use first
        get_solver(name, **params)
    EVALUATOR.warm_up()
    return Recorder(monkeypatch)


@pytest.mark.parametrize("share", [0.5, 0.8, 1.0])
@pytest.mark.parametrize("name, params, limit", SOLVERS, ids=[s[0] for s in SOLVERS])
def test_one_lowering_one_evaluation_one_status_per_solve(
        aliasing: Instance, recorder: Recorder, name: str, params: dict[str, Any],
        limit: float | None, share: float) -> None:
    m = budget_bytes(aliasing, share)
    res = slackopt.solve(aliasing, name, m, time_limit_s=limit, seed=0, **params)
    assert res.plan is not None and res.evaluation is not None
    outer = recorder.solves[-1]
    assert outer.M == m and outer.result is not None
    # slackopt.solve itself simulated nothing and decided nothing: the result came judged
    assert recorder.outside.calls == [] and recorder.outside.settled == 0
    # every solve (the seed solvers' nested ones too) ran its final plan under its M
    # once, decided its status once, and handed that very Evaluation on
    for frame in recorder.solves:
        r = frame.result
        assert r is not None and frame.settled == 1
        if frame.plan is None:
            assert r.evaluation is None
            continue
        runs = recorder.final_runs(frame)
        assert len(runs) == 1, (r.solver, len(runs))
        assert r.evaluation is runs[0].evaluation
    assert res.evaluation is outer.result.evaluation
    # one lowering (the instance's, built with it): every run on the storage level; the
    # plan mapped to the views once, never back
    assert all(c.storage_level for f in [*recorder.solves, recorder.outside] for c in f.calls)
    assert (recorder.lowered, recorder.expanded) == (0, 1)
    # and the evaluation is the plan's on the views: a fresh simulation agrees
    fresh = SIMULATE(aliasing, res.plan, m)
    assert res.evaluation.to_dict() == fresh.to_dict()
    assert res.plan.decisions.shape == (aliasing.n_saved,)


def test_the_start_plan_is_lowered_once_and_not_run_again(aliasing: Instance,
                                                          recorder: Recorder) -> None:
    """A start plan: lowered once; simulated once when the solver's plan differs, not at
    all when the solver returns the same plan (its evaluation is the start plan's)."""
    m = budget_bytes(aliasing, 0.5)
    first = slackopt.solve(aliasing, "checkpoint", m)
    recorder.solves.clear()
    again = slackopt.solve(aliasing, "checkpoint", m, start_plan=first.plan)
    assert np.array_equal(again.plan.decisions, first.plan.decisions)
    assert again.info["start_plan"]["taken"] is False
    assert recorder.outside.calls == [] and recorder.lowered == 1
    swap = Plan.uniform(aliasing, SWAP)
    assert swap != first.plan
    other = slackopt.solve(aliasing, "checkpoint", m, start_plan=swap)
    assert len(recorder.outside.calls) == 1
    call = recorder.outside.calls[0]
    assert call.storage_level and call.decisions == swap.lowered(aliasing).decisions.tobytes()
    assert recorder.lowered == 3   # the two start plans, and the line above
    assert other.info["start_plan"]["step_s"] == (
        call.evaluation.step_time_s if call.evaluation.feasible else None)


class _ClaimsOptimal:
    """A protocol solver (no BaseSolver): returns keep-all, claims "optimal" with T* as
    its bound, and hands no evaluation."""

    name = "claims-optimal"

    def solve(self, instance: Instance, budget_bytes: int, *, time_limit_s: float | None = None,
              seed: int | None = None) -> SolveResult:
        return SolveResult(Plan.keep_all(instance), self.name, status="optimal",
                           lower_bound_s=float(instance.ideal_time_s) * 0.5)


@pytest.mark.parametrize("share, status", [(0.5, "infeasible"), (1.0, "bounded")])
def test_a_protocol_solvers_claim_is_judged_once(aliasing: Instance, recorder: Recorder,
                                                 share: float, status: str) -> None:
    """A result without an evaluation is judged by :func:`slackopt.solve`: one run on the
    storage level and one status decision (keep-all under 0.5 P does not run: "infeasible";
    at P it runs at T*, twice the claimed bound: "bounded", gap 1)."""
    m = budget_bytes(aliasing, share)
    res = slackopt.solve(aliasing, _ClaimsOptimal(), m)
    assert res.status == status
    assert len(recorder.outside.calls) == 1 and recorder.outside.calls[0].storage_level
    assert recorder.outside.settled == 1 and recorder.expanded == 1
    assert res.evaluation is recorder.outside.calls[0].evaluation
    if status == "bounded":
        assert res.info["gap"] == pytest.approx(1.0)
    assert "status_refuted" not in res.info   # a SolveResult's status may be its default


@pytest.mark.parametrize("claim, runs, bound, expect, refuted", [
    (None, True, None, ("feasible", None), False),
    (None, False, None, ("infeasible", None), False),
    ("feasible", True, 1.0, ("optimal", 1.0), False),        # T = L = 1
    ("optimal", True, 0.5, ("bounded", 0.5), False),         # gap 1: the bound decides
    ("bounded", True, 2.0, ("feasible", None), False),       # L > T: a wrong bound, dropped
    ("optimal", True, None, ("feasible", None), True),       # no bound, no proof
    ("feasible", False, 0.5, ("infeasible", 0.5), True),     # the plan does not run
    ("timeout", False, 0.5, ("timeout", 0.5), False),
    ("infeasible", True, 2.0, ("infeasible", None), False),  # a bound above a plan that runs
    (None, None, None, ("infeasible", None), False),         # no plan
    ("optimal", None, 0.5, ("infeasible", 0.5), True),       # a plan status without a plan
    ("error", None, None, ("error", None), False),
])
def test_settle_status(claim: str | None, runs: bool | None, bound: float | None,
                       expect: tuple[str, float | None], refuted: bool) -> None:
    """The one rule, from (claim, evaluation, bound), T = 1 s for a plan: the status and
    the bound kept; a wrong bound recorded in ``info["bound_error"]``, a refuted claim in
    ``info["status_refuted"]``."""
    ev = None if runs is None else Evaluation(
        feasible=runs, step_time_s=1.0, ideal_time_s=1.0, throughput=1.0 if runs else 0.0,
        stall_fwd_s=0.0, stall_bwd_s=0.0, recompute_s=0.0, d2h_bytes=0, h2d_bytes=0,
        evictions=0, peak_bytes=1, budget_bytes=1,
        failure=None if runs in (None, True) else "op 'b' short of 1 B")
    info: dict[str, Any] = {}
    assert SETTLE(claim, ev, bound, info) == expect
    assert ("bound_error" in info) == (bound == 2.0)
    assert ("status_refuted" in info) == refuted
    if refuted:
        assert info["status_refuted"]["claimed"] == claim
    quiet: dict[str, Any] = {}
    assert SETTLE(claim, ev, bound, quiet, record=False) == expect
    assert "status_refuted" not in quiet
    with pytest.raises(ValueError, match="'done' is not one of"):
        SETTLE("done", ev, bound, {})
