"""Warm starts: :func:`slackopt.solve`'s ``start_plan`` reaches the solvers that search from
a plan (``warm_starts = True``: milp, genetic) as ``run.start``; compare and
benchmarks/bench_references.py pass start plans per (instance, budget), and a run started
from a plan is stored under its own key."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import slackopt
from slackopt import BaseSolver, Plan
from slackopt.compare import ResultStore, compare
from slackopt.errors import PlanError, SlackoptError, SolverError
from slackopt.simulate import simulate
from slackopt.workloads.synthetic import chain
from tests.strategies import budgets, instances

pytestmark = pytest.mark.slow  # every test here takes seconds (a milp solve each)

# the milp with every plan search off: under a tiny time limit only the seeds phase (the
# floor plans, and the start plan) gives plans
COLD = {"enum_plans": 0, "lns_plans": 0, "local_search": False, "warm_start": False}


@pytest.fixture(scope="module")
def chain12() -> tuple[slackopt.Instance, int, Plan, float]:
    """chain(12, seed=3) at 0.5 P and its optimum (proven by the milp's enumeration, in
    about 25 s on an idle 2-core machine; the limit leaves room for a loaded one, the
    search stops as soon as the optimum is proven)."""
    inst = chain(12, seed=3)
    M = int(0.5 * inst.P)
    opt = slackopt.solve(inst, "milp", M, time_limit_s=600, seed=0)
    assert opt.status == "optimal"
    return inst, M, opt.plan, float(opt.evaluation.step_time_s)


def test_the_milp_searches_from_the_start_plan(chain12):
    inst, M, best, T = chain12
    cold = slackopt.solve(inst, "milp", M, time_limit_s=0.01, seed=0, **COLD)
    assert cold.evaluation.step_time_s > 2 * T   # the floor plans only: all-swap, recompute
    warm = slackopt.solve(inst, "milp", M, time_limit_s=0.01, seed=0, start_plan=best, **COLD)
    # the solver's own plan is the start plan (not the start-plan guard of solve)
    assert warm.info["start_plan"] == {"step_s": T, "solver_step_s": T, "taken": False}
    assert warm.info["start_plan_s"] == T
    assert warm.lower_bound_s <= T


def test_the_large_neighbourhood_search_polishes_the_start_plan(chain12):
    """The optimum with one tensor swapped instead (slower, but faster than the floor
    plans) is the incumbent after the seeds phase; the LNS (no other plan search is on)
    takes it to the optimum."""
    inst, M, best, T = chain12
    dec = best.decisions.copy()
    dec[5] = slackopt.plan.SWAP
    start = Plan(dec, inst.saved_names)
    S = simulate(inst, start, M).step_time_s
    kw = dict(COLD, lns_plans=1_000_000)
    res = slackopt.solve(inst, "milp", M, time_limit_s=600, seed=0, start_plan=start, **kw)
    upper = {p["phase"]: p["upper_s"] for p in res.info["phases"]}
    floor = slackopt.solve(inst, "milp", M, time_limit_s=0.01, seed=0, **COLD)
    assert T < S < floor.evaluation.step_time_s
    assert res.info["start_plan_s"] == S and upper["seeds"] == S
    assert upper["lns"] == T and res.evaluation.step_time_s == T


def test_genetic_puts_the_start_plan_in_generation_0(chain12):
    inst, M, best, T = chain12
    kw = dict(seed=0, generations=1, seeding="random", population=4)
    cold = slackopt.solve(inst, "genetic", M, **kw)
    assert cold.evaluation.step_time_s > T
    warm = slackopt.solve(inst, "genetic", M, start_plan=best, **kw)
    assert warm.info["start_plan"] == {"step_s": T, "solver_step_s": T, "taken": False}
    assert warm.info["best_seed"] == "start_plan"
    assert warm.info["seeds"][0] == {"solver": "start_plan", "planning_time_s": 0.0,
                                     "feasible": True, "throughput": inst.ideal_time_s / T,
                                     "step_time_s": T, "over_bytes": 0}
    assert warm.info["seeds"][0] == {"solver": "start_plan", "planning_time_s": 0.0,
                                     "feasible": True, "throughput": inst.ideal_time_s / T,
                                     "step_time_s": T, "over_bytes": 0}
    # the same seed and start give the same plan
    again = slackopt.solve(inst, "genetic", M, start_plan=best, **kw)
    assert again.plan == warm.plan and again.info["history"] == warm.info["history"]


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_a_warm_started_solver_never_returns_a_slower_plan_than_its_start(data):
    """Instances from the whole instance language, any budget from the floor to P, any
    start decisions: the milp's and genetic's own plans (before solve's guard) run no
    slower than the start plan when it runs."""
    inst = data.draw(instances(max_saved=5, max_ops=12), label="instance")
    M = data.draw(budgets(inst), label="M")
    low = inst.lowered
    c = np.isfinite(np.asarray(low.c, dtype=float))
    dec = [data.draw(st.integers(0, 2 if c[t] else 1), label=f"d{t}") for t in range(low.n_saved)]
    start = Plan.from_lowered(inst, Plan(np.array(dec, dtype=np.int8), low.saved_names))
    ev = simulate(inst, start, M)
    for name, kw in (("milp", dict(COLD, time_limit_s=0.01)),
                     ("genetic", dict(generations=1, population=4, seeding="random"))):
        res = slackopt.solve(inst, name, M, seed=0, start_plan=start, **kw)
        own = res.info["start_plan"]["solver_step_s"]
        if ev.feasible:
            assert own is not None and own <= ev.step_time_s, name
            assert not res.info["start_plan"]["taken"]


class _Echo(BaseSolver):
    """Returns its start plan (keep-all without one)."""

    name = "echo"
    warm_starts = True
    min_budget_search = False

    def plan(self, instance, budget_bytes, run):
        dec = run.start if run.start is not None else np.zeros(instance.n_saved, np.int8)
        return Plan(dec, instance.saved_names)


def test_start_decisions_are_checked(chain12):
    inst, M, best, _ = chain12
    with pytest.raises(SolverError, match="expected 13 integer decisions"):
        _Echo().solve(inst, M, start=np.zeros(3, dtype=np.int8))
    bad = best.decisions.copy()
    bad[4] = 7
    with pytest.raises(SolverError, match="decision 7 of saved tensor"):
        _Echo().solve(inst, M, start=bad)
    with pytest.raises(SolverError, match="expected 13 integer decisions"):
        _Echo().solve(inst, M, start=[[0], [1, 2]])          # ragged
    with pytest.raises(PlanError, match="start_plan is a str, not a Plan"):
        slackopt.solve(inst, "milp", M, start_plan="plan.json")
    assert _Echo().solve(inst, M, start=best.decisions).plan == Plan(best.decisions,
                                                                     inst.saved_names)


def test_a_solver_without_warm_starts_does_not_see_the_start_plan(chain12):
    inst, M, best, _ = chain12

    class Blind(_Echo):
        name = "blind"
        warm_starts = False

    res = slackopt.solve(inst, Blind(), M, start_plan=best)
    # keep-all does not run at 0.5 P; the guard of solve then takes the start plan
    assert res.info["start_plan"]["solver_step_s"] is None and res.info["start_plan"]["taken"]


def test_compare_passes_start_plans_and_keys_them_apart(chain12, tmp_path):
    inst, M, best, T = chain12
    store = tmp_path / "s.sqlite"
    cold = compare([inst], [_Echo()], [M], store=store, progress=False)
    warm = compare([inst], [_Echo()], [M], store=store, progress=False,
                   start_plans={(inst.name, M): best})
    assert not bool(cold["feasible"].iloc[0])          # keep-all at 0.5 P
    assert warm["step_time_s"].iloc[0] == T and warm.attrs["runs_now"] == 1
    with ResultStore(store) as s:
        assert len(s.rows()) == 2
    again = compare([inst], [_Echo()], [M], store=store, progress=False,
                    start_plans={(inst.name, M): best})
    assert again.attrs["runs_from_store"] == 1 and again["step_time_s"].iloc[0] == T


@pytest.mark.parametrize("starts, message", [
    ("KEY", r"match no \(instance name, budget in bytes\) of the sweep"),
    ("FRACTION", r"give \(instance name, budget in bytes as an int\)"),
    ("FILE", "is a str, not a Plan"),
    ([], r"must map \(instance name, budget in bytes\) to a Plan"),
])
def test_compare_refuses_start_plans_it_cannot_use(chain12, starts, message):
    inst, M, best, _ = chain12
    if isinstance(starts, str):
        starts = {"KEY": {(inst.name, M + 1): best}, "FRACTION": {(inst.name, 0.5): best},
                  "FILE": {(inst.name, M): "plan.json"}}[starts]
    with pytest.raises(SlackoptError, match=message):
        compare([inst], [_Echo()], [M], progress=False, start_plans=starts)
