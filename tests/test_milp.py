"""The MILP solver against exhaustive enumeration through the evaluator.

On instances with at most 8 saved tensors every plan (3^n, minus recomputing tensors that
cannot be rebuilt) is simulated. Checked: the relaxation's optimum, and its value with the
decisions of sampled plans fixed, never exceed the simulated times (the lower bound is
valid, plan by plan, which the no-good loop relies on); the solver's lower bound never
exceeds the enumerated optimum; the returned plan is within 1% of it; SCIP, HiGHS and
PuLP/CBC agree on the model's optimum; the optimum never gets worse as M grows; a budget
below the model floor is infeasible and reports the floor, which is the exact minimum.
"""

from __future__ import annotations

import numpy as np
import pytest

from slackopt.plan import KEEP, SWAP, Plan
from slackopt.simulate import simulate
from slackopt.solver import OPTIMAL_REL_TOL, get_solver
from slackopt.solver import solve as run_solve
from slackopt.solverbase import SolverParamError
from slackopt.solvers.milp import MILP, build_model, lp_relaxation, model_floor
from slackopt.workloads.synthetic import unet
from tests.helpers import build
from tests.helpers_milp import enumerate_plans, enumerated, instance

TIME_LIMIT_S = 90.0


CASES = [("chain5", 0.95), ("chain5", 0.8), ("chain5-nvlink", 0.8), ("chain5-nvlink", 0.65),
         ("hand", 0.9), ("hand", 0.75), ("hand", 0.6), ("unet1", 0.9), ("unet1", 0.75),
         ("unet2-b16-pcie5", 0.8)]


@pytest.mark.slow
@pytest.mark.parametrize("key,frac", CASES)
def test_bound_valid_and_plan_optimal(key, frac):
    inst = instance(key)
    M = int(frac * inst.P)
    times = enumerated(key, frac)
    best = min(times.values())
    assert np.isfinite(best)
    res = MILP(time_limit_s=TIME_LIMIT_S).solve(inst, M)
    assert res.status == "optimal"
    assert res.lower_bound_s <= best * (1 + 1e-9)
    ev = simulate(inst, res.plan, M)
    assert ev.feasible and ev.step_time_s == pytest.approx(res.info["upper_bound_s"])
    # the returned plan is the enumerated optimum (within 1%); here it is proven
    assert ev.step_time_s <= best * 1.01
    assert res.info["plan_proven_optimal"]
    assert res.info["gap"] <= OPTIMAL_REL_TOL


@pytest.mark.slow
@pytest.mark.parametrize("key,frac", [("chain5", 0.8), ("hand", 0.6), ("unet1", 0.75),
                                      ("unet2-b16-pcie5", 0.8)])
def test_relaxation_is_a_lower_bound_plan_by_plan(key, frac):
    """The model with a plan's decisions fixed is at most the plan's simulated time."""
    inst = instance(key)
    M = int(frac * inst.P)
    times = enumerated(key, frac)
    feasible = sorted((t, d) for d, t in times.items() if np.isfinite(t))
    rng = np.random.default_rng(0)
    picks = feasible[:4] + feasible[-3:] + [feasible[i] for i in
                                             rng.choice(len(feasible), 5, replace=False)]
    model = build_model(inst, M, tier="full")
    from slackopt.solvers.milp import _ScipBackend
    for T, dec in picks:
        be = _ScipBackend(model.lin, threads=1, seed=0, rel_gap=1e-9)
        for j, v in model.hint(np.array(dec, np.int8)).items():
            be.add_row([(j, 1.0)], v, v)
        sol = be.solve(30, None)
        assert sol.status == "optimal"
        assert sol.objective * model.t_unit <= T * (1 + 1e-9), (dec, T)
    # the free optimum, the LP relaxation and the other tiers are lower bounds too
    best = feasible[0][0]
    for tier in ("full", "exact", "aggregated"):
        m = build_model(inst, M, tier=tier)
        lp, _ = lp_relaxation(m.lin, 30)
        assert lp * m.t_unit <= best * (1 + 1e-9)
        r = MILP(tier=tier, time_limit_s=TIME_LIMIT_S, warm_start=False).solve(inst, M)
        assert r.lower_bound_s <= best * (1 + 1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("key,frac", [("chain5", 0.8), ("hand", 0.75)])
def test_backends_agree(key, frac):
    inst = instance(key)
    M = int(frac * inst.P)
    model = build_model(inst, M, tier="full")
    from slackopt.solvers.milp import _BACKEND_CLASSES
    objs = {}
    for name, cls in _BACKEND_CLASSES.items():
        sol = cls(model.lin, threads=1, seed=0, rel_gap=1e-9).solve(60, None)
        assert sol.status == "optimal", name
        objs[name] = sol.objective
        assert sol.bound is not None and sol.bound <= sol.objective * (1 + 1e-6)
    ref = objs["scip"]
    for v in objs.values():
        assert v == pytest.approx(ref, rel=1e-6), objs
    # and the whole solve agrees on the proven optimum
    lows = {b: MILP(backend=b, time_limit_s=TIME_LIMIT_S).solve(inst, M) for b in objs}
    ups = {b: r.info["upper_bound_s"] for b, r in lows.items()}
    assert max(ups.values()) == pytest.approx(min(ups.values()), rel=1e-4)


@pytest.mark.slow
def test_optimum_never_worse_when_budget_grows():
    inst = instance("chain5-nvlink")
    prev = float("inf")
    for frac in (0.62, 0.65, 0.7, 0.8, 0.9, 1.0):
        M = int(frac * inst.P)
        r = MILP(time_limit_s=TIME_LIMIT_S).solve(inst, M)
        assert r.status == "optimal" and r.info["plan_proven_optimal"]
        ub = r.info["upper_bound_s"]
        assert ub <= prev * (1 + 1e-9)
        prev = ub
    assert prev == pytest.approx(inst.ideal_time_s)


@pytest.mark.parametrize("key", ["chain5", "unet1", "hand"])
def test_infeasible_below_floor_reports_the_floor(key):
    inst = instance(key)
    floor = model_floor(inst)
    r = MILP().solve(inst, floor - 1)
    assert r.status == "infeasible"
    assert r.info["min_budget_bytes"] == floor and r.info["min_budget_exact"]
    assert r.info["min_budget_basis"] == "proven"
    # exact: nothing runs below the floor, the all-swap plan runs at it
    times = enumerate_plans(inst, floor - 1)
    assert all(not np.isfinite(t) for t in times.values())
    allswap = Plan(np.where(np.asarray(inst.s) > 0, SWAP, KEEP).astype(np.int8),
                   inst.saved_names)
    assert simulate(inst, allswap, floor).feasible
    r2 = MILP(time_limit_s=TIME_LIMIT_S).solve(inst, floor)
    assert r2.status in ("optimal", "bounded") and r2.plan is not None
    assert simulate(inst, r2.plan, floor).feasible


def test_a_plan_at_the_stated_min_budget_whatever_the_time_limit():
    """The stated minimum budget is where the all-swap plan runs; a solve that found no
    plan tries it last, so at that budget a plan is found even when the limit stops
    everything else (on unet(2) the search alone found none within 2 s on a loaded
    machine)."""
    inst = unet(2).lowered
    r = MILP().solve(inst, int(0.3 * inst.P), time_limit_s=0.05)
    assert r.status == "infeasible" and r.plan is None
    b = r.info["min_budget_bytes"]
    assert b > int(0.3 * inst.P)
    r2 = MILP().solve(inst, b, time_limit_s=0.05)
    assert r2.status in ("optimal", "bounded") and r2.plan is not None
    assert simulate(inst, r2.plan, b).feasible
    assert r2.lower_bound_s <= simulate(inst, r2.plan, b).step_time_s * (1 + 1e-9)


def test_keep_all_at_peak_and_registry():
    inst = instance("chain5")
    r = MILP().solve(inst, int(inst.P))
    assert r.status == "optimal" and r.lower_bound_s == pytest.approx(inst.ideal_time_s)
    assert isinstance(get_solver("milp", backend="highs"), MILP)
    res = run_solve(inst, "milp", 0.8, time_limit_s=TIME_LIMIT_S)
    assert res.evaluation.feasible
    assert res.lower_bound_s <= res.evaluation.step_time_s * (1 + 1e-9)
    assert res.info["upper_bound_s"] == pytest.approx(res.evaluation.step_time_s)
    with pytest.raises(ValueError):
        MILP(backend="gurobi")
    with pytest.raises(ValueError):
        MILP(no_such_option=True)


@pytest.mark.slow
@pytest.mark.parametrize("key,frac", [("hand", 0.6), ("chain5", 0.8)])
def test_deterministic_for_a_seed(key, frac):
    """Runs that stop on the gap (not on the clock) repeat exactly for a seed."""
    inst = instance(key)
    M = int(frac * inst.P)
    a = MILP().solve(inst, M, seed=3)
    b = MILP().solve(inst, M, seed=3)
    assert a.info["plan_proven_optimal"] and b.info["plan_proven_optimal"]
    assert a.plan == b.plan
    assert a.lower_bound_s == b.lower_bound_s
    assert [e.get("status") for e in a.info["log"]] == [e.get("status") for e in b.info["log"]]


def test_whole_number_floats_are_ints():
    """``-p enum_plans=1e3`` reaches the solver as the JSON number 1000.0: read as 1000."""
    m = MILP(enum_plans=1e3, threads=2.0)
    assert m.enum_plans == 1000 and isinstance(m.enum_plans, int)
    assert m.threads == 2 and isinstance(m.threads, int)


@pytest.mark.parametrize("params,words", [
    (dict(threads=0), "threads must be int >= 1, got 0 (below 1)"),
    (dict(threads=1.5), "threads must be int >= 1, got 1.5 (not a whole number)"),
    (dict(rel_gap=float("inf")), "rel_gap must be float >= 0, got inf (not a finite float)"),
    (dict(rel_gap="nan"), "rel_gap must be float >= 0, got 'nan'"),
    (dict(rel_gap=-1e-3), "rel_gap must be float >= 0, got -0.001"),
    (dict(steps=0), "steps must be 'op', 'layer', int >= 1 or None, got 0"),
    (dict(steps="foo"), "steps must be 'op', 'layer', int >= 1 or None, got 'foo'"),
    (dict(warm_start="maybe"), "warm_start must be bool, got 'maybe'"),
    (dict(max_iterations=0), "max_iterations must be int >= 1, got 0"),
    (dict(patience=0), "patience must be int >= 1 or None, got 0"),
    (dict(time_limit_s=0), "time_limit_s must be float > 0 or None, got 0"),
    (dict(seed="x"), "seed must be int, got 'x'"),
    (dict(backend="gurobi"), "backend must be str one of {scip, highs, pulp}, got 'gurobi'"),
    (dict(tier="foo"), "tier must be str one of {auto, full, exact, aggregated}, got 'foo'"),
    (dict(lagging="yes"), "lagging must be bool or None, got 'yes'"),
    (dict(frobnicate=1), "solver 'milp' has no parameter 'frobnicate'; valid keys: backend"),
])
def test_bad_parameters_are_named(params, words):
    with pytest.raises(SolverParamError) as e:
        MILP(**params)
    assert words in str(e.value)
    # every valid key, with its rule and default, is listed
    assert "valid keys: backend (str one of {scip, highs, pulp}, default 'scip')" in str(e.value)
    assert "integer_evictions (bool or None, default None)" in str(e.value)


@pytest.mark.slow
def test_more_iterations_never_a_slower_plan_or_a_lower_bound():
    """Anytime in the work limits: raising max_iterations replays the same phases and
    adds MILP solves, so the plan is never slower and no bound lower. On unet1 at 0.75 P
    the MILP's own (uncertified) bound rises from 134.7 us (one solve) to the optimum
    (eight); being a floating-point solver's claim, it never decides the status, which
    follows the certified bound alone. The exact enumeration, which would prove the
    optimum before the model, and the large-neighbourhood search, whose one window covers
    unet1's five tensors, are off."""
    inst = instance("unet1")
    M = int(0.75 * inst.P)
    prev_up, prev_lo, prev_model = float("inf"), 0.0, 0.0
    results = {}
    for k in (1, 2, 5, 8):
        r = MILP(max_iterations=k, time_limit_s=600, enum_plans=0, lns_plans=0).solve(inst, M)
        up, lo = r.info["upper_bound_s"], r.lower_bound_s
        model_lo = r.info["uncertified_bounds"]["model_milp"]
        assert up <= prev_up and lo >= prev_lo and model_lo >= prev_model, (k, up, lo)
        assert len(r.info["log"]) == k or r.info["uncertified_bounds"]["model_milp"] >= up / (
            1 + 1e-4)
        certified_gap = (up - lo) / lo
        assert r.status == ("optimal" if certified_gap <= 1e-4 else "bounded")
        assert lo == max(r.info["bounds"].values()) and "model_milp" not in r.info["bounds"]
        prev_up, prev_lo, prev_model = up, lo, model_lo
        results[k] = r
    assert results[8].info["uncertified_bounds"]["model_milp"] > 1.05 * (
        results[1].info["uncertified_bounds"]["model_milp"])
    best = min(enumerated("unet1", 0.75).values())
    assert results[8].info["upper_bound_s"] == pytest.approx(best)


def test_local_search_more_calls_never_slower():
    """The local search is deterministic in its call budget: a larger budget runs a longer
    prefix of the same candidates. On unet2 (b16, PCIe 5) at 0.8 P it improves
    SlackSwap's plan to the enumerated optimum, three tensors away."""
    from slackopt.solvers.milp.search.incumbent import Incumbent, improve
    from slackopt.solvers.slackswap import SlackSwap
    inst = instance("unet2-b16-pcie5")
    M = int(0.8 * inst.P)
    seed_plan = SlackSwap(min_budget_search=False).solve(inst, M).plan.decisions
    prev = float("inf")
    for calls in (0, 10, 40, 200, 2000):
        inc = Incumbent(inst, M)
        start = inc.consider(seed_plan, "slackswap")
        made = improve(inc, calls, seed=0, deadline=float("inf"))
        assert made <= calls and inc.step_s <= start and inc.step_s <= prev
        prev = inc.step_s
    assert prev == pytest.approx(min(enumerated("unet2-b16-pcie5", 0.8).values()))
    assert prev < start


@pytest.mark.parametrize("params", [{}, {"enum_plans": 0, "lns_plans": 0}],
                         ids=["enumeration", "model"])
def test_objective_is_never_empty_beside_a_plan(params):
    # milp returned objective_s None whenever no MILP solve gave a model value (the
    # enumeration, a seed or the local search settled it), even with a plan.
    inst = instance("chain5")
    M = int(0.8 * inst.P)
    res = MILP(time_limit_s=TIME_LIMIT_S, **params).solve(inst, M)
    assert res.plan is not None and res.objective_s is not None
    if params:  # the model ran (under the cutoff U / (1 + rel_gap)): a model value
        assert res.info["iterations"] >= 1
        assert res.objective_s <= res.info["upper_bound_s"] * (1 + 1e-9)
    else:  # no MILP solve: the simulated step of the plan returned
        assert res.info["iterations"] == 0
        assert res.objective_s == simulate(inst, res.plan, M).step_time_s


def test_patience_waits_for_a_plan_that_runs():
    # Six 100 B tensors that only keep or swap, a 100 B host pinned-memory limit the model
    # does not see, M = 500 B of P = 600 B: the MILP's first optima swap several tensors,
    # which the evaluator refuses. Without seeds (warm_start=False) or the enumeration,
    # patience (5 solves without a better bound or plan) ended the search after 0.1-0.2 s
    # of a 10 s limit with "timeout"; the 12th solve finds a plan that runs.
    from slackopt import Instance

    n = 6
    base = build([(f"f{i}", 1) for i in range(n)], [(f"b{i}", 1) for i in reversed(range(n))],
                 [(f"a{i}", 100, f"f{i}", [f"b{i}"], None) for i in range(n)], W=1000.0)
    inst = Instance("host-cap", base.ops, base.tensors, base.link, host_memory_bytes=100)
    res = MILP(warm_start=False, enum_plans=0, lns_plans=0, tier="exact",
               time_limit_s=10).solve(inst, 500)
    assert res.status in ("optimal", "bounded"), res.info["log"][-1]
    ev = simulate(inst, res.plan, 500)
    assert ev.feasible and res.plan.bytes_by_decision(inst)["swap"] == 100
    assert res.info["iterations"] > 5  # past the patience of the exact tier
    # the exhaustive search (the enumeration) agrees on the optimum
    assert ev.step_time_s == MILP(time_limit_s=10).solve(inst, 500).info["upper_bound_s"]
