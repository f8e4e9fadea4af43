"""The budget rule (issue 22, item 6): a larger budget never returns a slower plan than a
smaller one with the same limit.

Two parts, each tested here: :func:`slackopt.solve`'s ``start_plan`` (the result is never
slower than the start plan simulated under the budget) and :func:`slackopt.solve_budgets`
(chains the budgets from the smallest, each starting from the best smaller plan), and the
evaluator property the rule leans on (a plan that runs under M1 runs under M2 >= M1 and no
slower), drawn from the whole instance language (tests/strategies.py).
"""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import slackopt
from slackopt import BaseSolver, Instance, Link, Op, Plan, Tensor
from slackopt.cli import app
from slackopt.errors import PlanError
from slackopt.io import save_instance, save_plan
from slackopt.simulate import simulate
from tests.strategies import budgets, instances


def _op(name: str, phase: str, dur: float, ws: int = 0) -> Op:
    return Op(name=name, phase=phase, duration_s=dur, workspace_bytes=ws)


def prefetch_instance() -> Instance:
    """X (10 B, read by b5) and K (100 B, last read by b4, whose workspace is 5 B); link 10
    B/s, no latency, duplex 1. Forward f1, f2 (1 s each), f3 (10 s); backward b0..b5 (1 s).

    Plan {X: swap, K: keep}, by hand:
    - M in [105, 110): f2 cannot allocate K beside X until X's D2H (1-2 s) ends: forward
      ends at 13 s; X's prefetch fits only once b4 has freed K (18 s): H2D 18-19, b5 19-20:
      T = 20 s.
    - M in [110, 115): no forward stall (forward ends at 12); X's H2D starts at 12, but b4
      cannot allocate its workspace beside X and K: X is evicted at 16 and fetched again
      after b4 (17-18): T = 19 s.
    - M >= 115: X's H2D at 12-13 stays; T = 18 s (the ideal T*).
    Keep-all needs P = 110 + 5 = 115 B.
    """
    ops = [_op("f1", "fwd", 1.0), _op("f2", "fwd", 1.0), _op("f3", "fwd", 10.0)]
    ops += [_op(f"b{i}", "bwd", 1.0, 5 if i == 4 else 0) for i in range(6)]
    tensors = [Tensor(name="X", size_bytes=10, producer="f1", readers=("b5",)),
               Tensor(name="K", size_bytes=100, producer="f2", readers=("b4",))]
    link = Link(name="slow", bytes_per_s=10.0, duplex_factor=1.0, copy_latency_s=0.0)
    return Instance(name="prefetch", ops=ops, tensors=tensors, link=link)


def test_the_hand_computed_steps_of_the_prefetch_instance():
    inst = prefetch_instance()
    plan = Plan.from_mapping(inst, {"X": "swap", "K": "keep"})
    steps = {m: simulate(inst, plan, m) for m in (104, 105, 109, 110, 114, 115)}
    assert not steps[104].feasible
    assert [steps[m].step_time_s for m in (105, 109, 110, 114, 115)] == [20, 20, 19, 19, 18]
    assert inst.P == 115


def _Fixed(decisions: dict[str, str] | None, bound: float | None = None) -> BaseSolver:
    """A solver that returns one fixed plan (by tensor name) and an optional lower bound."""

    class Fixed(BaseSolver):
        name = "fixed"
        min_budget_search = False

        def plan(self, instance, budget_bytes, run):
            if decisions is None:
                return None
            plan = Plan.from_mapping(instance, decisions)
            if bound is None:
                return plan
            return slackopt.Outcome(plan=plan, lower_bound_s=bound)

    return Fixed()


SWAP_BOTH = {"X": "swap", "K": "swap"}
SWAP_X = {"X": "swap", "K": "keep"}


def test_a_faster_start_plan_replaces_the_solvers_plan():
    inst = prefetch_instance()
    own = simulate(inst, Plan.from_mapping(inst, SWAP_BOTH), 110)
    assert own.feasible and own.step_time_s > 19  # the solver's plan is slower
    start = Plan.from_mapping(inst, SWAP_X)
    res = slackopt.solve(inst, _Fixed(SWAP_BOTH), 110, start_plan=start)
    assert res.plan == start and res.status == "feasible"
    assert res.evaluation.step_time_s == 19 and res.objective_s == 19
    assert res.info["start_plan"] == {"step_s": 19.0, "solver_step_s": own.step_time_s,
                                      "taken": True}


def test_a_taken_start_plan_keeps_the_solvers_bound_and_earns_its_status():
    inst = prefetch_instance()
    start = Plan.from_mapping(inst, SWAP_X)
    res = slackopt.solve(inst, _Fixed(SWAP_BOTH, bound=18.0), 110, start_plan=start)
    assert res.status == "bounded" and res.lower_bound_s == 18.0
    assert res.info["gap"] == pytest.approx(1 / 18)
    res = slackopt.solve(inst, _Fixed(SWAP_BOTH, bound=19.0), 110, start_plan=start)
    assert res.status == "optimal" and res.info["gap"] == 0.0
    # A bound above the start plan's step is a proven error: dropped, never clamped.
    res = slackopt.solve(inst, _Fixed(SWAP_BOTH, bound=19.5), 110, start_plan=start)
    assert res.status == "feasible" and res.lower_bound_s is None
    assert res.info["bound_error"]["plan_step_s"] == 19.0


def test_a_slower_or_failing_start_plan_is_not_taken():
    inst = prefetch_instance()
    res = slackopt.solve(inst, _Fixed(SWAP_X), 115, start_plan=Plan.from_mapping(inst, SWAP_BOTH))
    assert res.plan == Plan.from_mapping(inst, SWAP_X) and res.evaluation.step_time_s == 18
    assert res.info["start_plan"]["taken"] is False
    keep = Plan.keep_all(inst)  # needs P = 115 B: does not run under 110
    res = slackopt.solve(inst, _Fixed(SWAP_X), 110, start_plan=keep)
    assert res.info["start_plan"] == {"step_s": None, "solver_step_s": 19.0, "taken": False}
    assert res.plan == Plan.from_mapping(inst, SWAP_X)


def test_a_solver_without_a_plan_gets_the_start_plan():
    inst = prefetch_instance()
    res = slackopt.solve(inst, _Fixed(None), 110, start_plan=Plan.from_mapping(inst, SWAP_X))
    assert res.status == "feasible" and res.evaluation.step_time_s == 19
    assert "note" in res.info  # the solver's own note stays: it returned no plan


def test_a_start_plan_of_another_instance_is_refused():
    inst = prefetch_instance()
    other = Instance(name="other", ops=[_op("f", "fwd", 1.0), _op("b", "bwd", 1.0)],
                     tensors=[Tensor(name="Y", size_bytes=4, producer="f", readers=("b",))],
                     link=inst.link)
    with pytest.raises(PlanError):
        slackopt.solve(inst, "slackswap", 110, start_plan=Plan.keep_all(other))


class _WorseWithMemory(BaseSolver):
    """A solver that gets worse as the budget grows: swaps both tensors from 110 B up."""

    name = "worse_with_memory"
    min_budget_search = False

    def plan(self, instance, budget_bytes, run):
        return Plan.from_mapping(instance, SWAP_BOTH if budget_bytes >= 110 else SWAP_X)


def test_solve_budgets_never_returns_a_slower_plan_for_a_larger_budget():
    inst = prefetch_instance()
    alone = [slackopt.solve(inst, _WorseWithMemory(), m).evaluation.step_time_s
             for m in (112, 106)]
    assert alone[0] > alone[1]  # solved alone, the larger budget is slower
    res = slackopt.solve_budgets(inst, _WorseWithMemory(), [112, 106])
    assert [r.evaluation.step_time_s for r in res] == [19, 20]  # order of the budgets given
    assert res[0].info["start_plan"]["taken"] and "budget_chain" not in res[0].info
    assert "start_plan" not in res[1].info  # the smallest budget starts from nothing


def test_solve_budgets_with_the_milp_and_fractions():
    inst = prefetch_instance()
    fractions = [1.0, 0.95, 0.92]
    res = slackopt.solve_budgets(inst, "milp", fractions, time_limit_s=20)
    best = []
    for f in fractions:  # brute force: X and K each kept or swapped (no recipes)
        evs = [simulate(inst, Plan.from_mapping(inst, {"X": a, "K": b}), int(f * inst.P))
               for a in ("keep", "swap") for b in ("keep", "swap")]
        best.append(min(e.step_time_s for e in evs if e.feasible))
    assert [r.evaluation.step_time_s for r in res] == best
    assert best[0] <= best[1] <= best[2] and [r.status for r in res] == ["optimal"] * 3


def test_cli_solve_start_plan(tmp_path):
    inst = prefetch_instance()
    f = save_instance(inst, tmp_path / "i.json")
    start = save_plan(Plan.from_mapping(inst, SWAP_X), tmp_path / "p.json", inst)
    solver = tmp_path / "worse.py"
    solver.write_text(
        "from slackopt import BaseSolver, Plan\n"
        "class Worse(BaseSolver):\n"
        "    name = 'worse'\n"
        "    min_budget_search = False\n"
        "    def plan(self, instance, budget_bytes, run):\n"
        "        return Plan.from_mapping(instance, {'X': 'swap', 'K': 'swap'})\n")
    r = CliRunner().invoke(app, ["solve", str(f), "--solver", f"{solver}:Worse", "--budget",
                                 "112B", "--start-plan", str(start), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["evaluation"]["step_time_s"] == 19 and doc["info"]["start_plan"]["taken"]


# ------------------------------------------------ what the rule can and cannot promise
def test_a_larger_budget_can_slow_a_fixed_plan_down():
    """Why the rule is about the carried plan, not the smaller budget's step (docs/model.md,
    "Invariants"): t3 (20 MB, f3 [0, 1], read by b6) and t9 (11 MB, f6, read by b7), both
    swapped; f6 has a 100 B workspace; link 40 MB/s, duplex 0.1; b6 1 s, b7 0 s.

    M1 = 20,000,000 B: f6 waits for t3's D2H (1-1.5), runs 1.5-2.5; t9's D2H 2.5-2.775;
    t3's prefetch waits for it (31 MB > M1), 2.775-3.275; b6 3.275-4.275; t9's prefetch
    4.275-4.55; b7 at 4.55: T = 4.55 s.
    M2 = 31,000,100 B: f6 runs 1-2 beside t3's D2H; at 2 t9's D2H and t3's prefetch run
    together at 0.1 x 40 MB/s: t9's ends at 4.75 (11 MB), t3's moves its last 9 MB at full
    rate, 4.75-4.975; b6 4.975-5.975; t9's prefetch 4.975-5.25; T = 5.975 s."""
    ops = [Op("f3", "fwd", 1.0), Op("f6", "fwd", 1.0, workspace_bytes=100),
           Op("b6", "bwd", 1.0), Op("b7", "bwd", 0.0)]
    tensors = [Tensor(name="t3", size_bytes=20_000_000, producer="f3", readers=("b6",)),
               Tensor(name="t9", size_bytes=11_000_000, producer="f6", readers=("b7",))]
    inst = Instance(name="duplex", ops=ops, tensors=tensors,
                    link=Link(name="slow", bytes_per_s=40e6, duplex_factor=0.1,
                              copy_latency_s=0.0))
    plan = Plan.from_mapping(inst, {"t3": "swap", "t9": "swap"})
    small, large = simulate(inst, plan, 20_000_000), simulate(inst, plan, 31_000_100)
    assert small.step_time_s == pytest.approx(4.55, abs=1e-12)
    assert large.step_time_s == pytest.approx(5.975, abs=1e-12)
    # solve_budgets carries the smaller plan: the larger budget's result is that plan (no
    # other plan is faster there) and it says it is slower than the smaller budget's.
    res = slackopt.solve_budgets(inst, _Fixed({"t3": "swap", "t9": "swap"}),
                                 ["20000000B", "31000100B"])
    assert res[1].evaluation.step_time_s == pytest.approx(5.975, abs=1e-12)
    chain = res[1].info["budget_chain"]
    assert chain["smaller_budget_bytes"] == 20_000_000
    assert chain["smaller_budget_step_s"] == pytest.approx(4.55, abs=1e-12)
    assert chain["carried_plan_step_s"] == pytest.approx(5.975, abs=1e-12)


def _random_solver() -> BaseSolver:
    """Returns a random plan drawn from the budget (deterministic), often a bad one."""

    class RandomPlans(BaseSolver):
        name = "random-plans"
        min_budget_search = False

        def plan(self, instance, budget_bytes, run):
            rnd = random.Random(budget_bytes)
            dec = [rnd.choice((0, 1, 2)) if np.isfinite(instance.c[i]) else rnd.choice((0, 1))
                   for i in range(instance.n_saved)]
            return Plan(np.array(dec, dtype=np.int8), instance.saved_names)

    return RandomPlans()


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_the_chain_rule_on_generated_instances(data):
    """On the whole instance language (tests/strategies.py), a solver of random plans and
    three budgets: every result is no slower than each smaller budget's result plan
    re-simulated under its budget, and ``budget_chain`` is set exactly where the result
    is slower than a smaller budget's (or runs no plan while one did)."""
    inst = data.draw(instances(max_saved=5)).lowered
    ms = sorted({data.draw(budgets(inst)) for _ in range(3)})
    res = slackopt.solve_budgets(inst, _random_solver(), [f"{m}B" for m in ms])
    steps = [r.evaluation.step_time_s if r.evaluation is not None and r.evaluation.feasible
             else math.inf for r in res]
    for j, (m2, r2) in enumerate(zip(ms, res, strict=True)):
        for r1 in res[:j]:
            if r1.plan is None or not r1.evaluation.feasible:
                continue
            carried = simulate(inst, r1.plan, m2)
            if carried.feasible:
                assert steps[j] <= carried.step_time_s
        slower = any(s < steps[j] for s in steps[:j])
        assert ("budget_chain" in r2.info) == slower, (ms, steps)


@pytest.mark.parametrize("bound", [0.0, -1.0, float("nan")])
def test_a_bound_that_proves_nothing_never_gives_optimal(bound):
    """slackopt.result.proven_status: a bound <= 0 below a positive step proves no gap and
    NaN is no bound: dropped ("feasible"), never "optimal" with gap 0, for the solver's own
    plan and for a taken start plan alike."""
    inst = prefetch_instance()
    res = slackopt.solve(inst, _Fixed(SWAP_X, bound=bound), 110)
    assert res.status == "feasible" and res.lower_bound_s is None and "gap" not in res.info
    res = slackopt.solve(inst, _Fixed(SWAP_BOTH, bound=bound), 110,
                         start_plan=Plan.from_mapping(inst, SWAP_X))
    assert res.info["start_plan"]["taken"]
    assert res.status == "feasible" and res.lower_bound_s is None and "gap" not in res.info
