"""SlackSwap-LS (solvers/slackswap_ls.py): the solver contract, the same plan for a seed,
never slower than its starts, the repair of a plan that does not run, the minimum budget
below the floor, the work limit. Incremental evaluation equal to a full one is
tests/test_incremental.py."""

from __future__ import annotations

import numpy as np
import pytest

import slackopt
from slackopt import Plan, simulate
from slackopt.plan import KEEP, SWAP
from slackopt.solvers.slackswap_ls import SMALL, SlackSwapLS, _roles, _Search
from slackopt.testing import check_solver
from slackopt.workloads import make

NO_CLOCK = {"budget_s": 60.0}  # the work limit, not the clock, ends these searches


def step(inst, plan, M) -> float:
    ev = simulate(inst, Plan(plan.decisions, inst.saved_names), M)
    return ev.step_time_s if ev.feasible else float("inf")


def test_contract():
    """slackopt.testing's checks (also run for every registered solver by
    tests/test_solver_contract.py)."""
    check_solver(SlackSwapLS)


@pytest.mark.parametrize("workload, params, frac", [
    ("gpt2-xl", {"layers": 4}, 0.6), ("bert-large", {"layers": 3}, 0.3),
    ("llama-7b", {"layers": 2}, 0.5),
])
def test_same_seed_same_plan_and_never_slower_than_slackswap(workload, params, frac):
    """Two solves with one seed give one plan; the plan runs, at least as fast as
    SlackSwap's (its start) and, with a start plan, as that plan."""
    inst = make(workload, **params).lowered
    M = int(frac * inst.P)
    a = slackopt.solve(inst, SlackSwapLS(**NO_CLOCK), M, seed=3)
    b = slackopt.solve(inst, SlackSwapLS(**NO_CLOCK), M, seed=3)
    assert np.array_equal(a.plan.decisions, b.plan.decisions)
    assert a.info["stopped_by"] in ("work", "local_optimum")
    ss = slackopt.solve(inst, "slackswap", M)
    assert a.evaluation.feasible and ss.evaluation.feasible
    assert a.evaluation.step_time_s <= ss.evaluation.step_time_s
    assert a.objective_s == a.evaluation.step_time_s
    # a start plan is a start: the result is never slower than it
    start = np.where(np.asarray(inst.s) > 0, SWAP, KEEP).astype(np.int8)
    c = slackopt.solve(inst, SlackSwapLS(**NO_CLOCK), M, seed=3,
                       start_plan=Plan(start, inst.saved_names))
    assert c.evaluation.step_time_s <= step(inst, Plan(start, inst.saved_names), M)
    assert c.evaluation.step_time_s <= ss.evaluation.step_time_s


def test_faster_than_slackswap_where_a_move_helps():
    """GPT-2 XL at 0.3 P (48 layers, the paper's workload): the search finds a faster
    plan than SlackSwap's, and says which moves it kept."""
    inst = make("gpt2-xl").lowered
    M = int(0.3 * inst.P)
    r = slackopt.solve(inst, SlackSwapLS(**NO_CLOCK), M, seed=0)
    ss = slackopt.solve(inst, "slackswap", M)
    assert r.evaluation.step_time_s < ss.evaluation.step_time_s
    assert sum(r.info["accepted"].values()) > 0
    assert r.info["evaluations"] > 0 and r.info["work"] > 0


def test_repair_finds_a_plan_where_slackswap_has_none():
    """The 12-layer chain at 0.5 P: SlackSwap's plan does not run (status infeasible);
    the repair changes it until it runs, then the search makes it faster."""
    inst = make("chain", n_layers=12).lowered
    M = int(0.5 * inst.P)
    ss = slackopt.solve(inst, "slackswap", M)
    assert ss.status == "infeasible"
    r = slackopt.solve(inst, SlackSwapLS(**NO_CLOCK), M, seed=0)
    assert r.status == "feasible" and r.evaluation.feasible
    assert r.info["start"].endswith("+repair") and r.info["repair_steps"] > 0


def test_below_the_floor_states_a_budget_that_runs():
    """VGG-16 (the analytic workload) at 0.2 P: no plan runs; the answer is infeasible
    with the smallest budget found, where a solve returns a plan that runs."""
    inst = make("vgg16").lowered
    M = int(0.2 * inst.P)
    r = slackopt.solve(inst, SlackSwapLS(), M, seed=0)
    assert r.status == "infeasible" and not r.evaluation.feasible
    mb = r.info["min_budget_bytes"]
    assert r.info["min_budget_basis"] == "bisection" and M < mb <= inst.P
    r2 = slackopt.solve(inst, SlackSwapLS(), mb, seed=0)
    assert r2.status == "feasible" and r2.evaluation.feasible


def test_the_work_limit_ends_the_search_the_same_way():
    """A small work limit stops the search ("work") at the same plan every time, and a
    larger one never ends slower (the larger search replays the smaller one's moves)."""
    inst = make("gpt2-xl", layers=4).lowered
    M = int(0.6 * inst.P)
    runs = [slackopt.solve(inst, SlackSwapLS(budget_s=60.0, max_work=w), M, seed=0)
            for w in (30_000, 30_000, 300_000)]
    assert runs[0].info["stopped_by"] == "work"
    assert np.array_equal(runs[0].plan.decisions, runs[1].plan.decisions)
    assert runs[2].evaluation.step_time_s <= runs[0].evaluation.step_time_s
    zero = slackopt.solve(inst, SlackSwapLS(budget_s=60.0, max_work=0), M, seed=0)
    assert zero.info["accepted"] == {} and zero.info["stopped_by"] == "work"


def test_keep_all_above_p():
    inst = make("tiny")
    r = slackopt.solve(inst, "slackswap-ls", inst.P)
    assert r.status == "feasible" and r.evaluation.step_time_s == inst.ideal_time_s
    assert r.plan.counts()["keep"] == inst.n_saved


def test_roles_group_one_tensor_per_layer():
    """Roles of GPT-2 XL (48 identical layers): each role has one tensor per layer of
    equal size and rebuild time; every layer's tensors are in some role."""
    inst = make("gpt2-xl").lowered
    s, c = np.asarray(inst.s), np.asarray(inst.c)
    layers = np.asarray(inst.saved_layers)
    roles = _roles(inst, s, c, np.asarray(inst.saved_prod_idx), layers)
    assert roles
    for g in roles:
        assert len(set(layers[g].tolist())) == len(g)  # one per layer
        assert len(set(s[g].tolist())) == 1
        assert len(set(c[g].tolist())) == 1
    covered = np.zeros(inst.n_saved, dtype=bool)
    for g in roles:
        covered[g] = True
    mid = (layers > 0) & (layers < layers.max()) & (s > 0)
    assert covered[mid].all()


def test_a_move_ruled_out_by_its_recompute_time_is_not_simulated():
    """T >= T* + the rebuild times of the recomputed tensors (docs/model.md): a move
    whose recompute alone reaches the incumbent's step is pruned, never simulated."""
    inst = make("gpt2-xl", layers=4).lowered
    M = int(0.6 * inst.P)
    se = _Search(inst, M, 10**9, float("inf"))
    se.set_base(np.asarray(slackopt.solve(inst, "slackswap", M).plan.decisions))
    room = se.T - se.T_star - se.rc
    c = np.asarray(inst.c)
    t = int(np.flatnonzero(np.isfinite(c) & (c > room) & (se.cur != 2))[0])
    runs = se.inc.runs
    run, *_ = se.trial([(t, 2)])
    assert run is None and se.inc.runs == runs and se.pruned == 1


def test_small_instances_get_joint_changes_and_kicks():
    """VGG-16 (22 saved tensors <= SMALL) at 0.7 P: after the descent the kicks run, with
    the seed's draws."""
    inst = make("vgg16").lowered
    assert inst.n_saved <= SMALL
    r = slackopt.solve(inst, SlackSwapLS(**NO_CLOCK), int(0.7 * inst.P), seed=1)
    assert r.evaluation.feasible and r.info["kicks"] > 0


def test_the_fast_tier_seeds_the_searches_first():
    """slackswap-ls is the first cheap seed and gets the whole per-solver limit whatever
    the seeding share left: its plan is the one it gives on its own."""
    from slackopt.solvers.seeds import FIRST_SEEDS, cheap_solver_names, seed_plans

    assert cheap_solver_names()[0] == "slackswap-ls" == FIRST_SEEDS[0]
    inst = make("gpt2-xl", layers=4).lowered
    M = int(0.6 * inst.P)
    plans, log = seed_plans(inst, M, 0, ["slackswap", "slackswap-ls"], 10.0,
                            end=0.0)  # the share ended before seeding began
    assert [e["solver"] for e in log if "skipped" in e] == []  # slackswap had no plan yet
    own = slackopt.solve(inst, SlackSwapLS(), M, seed=0)
    assert dict(plans)["slackswap-ls"] == np.asarray(own.plan.decisions, np.int8).tobytes()


def test_the_milp_is_never_slower_than_the_fast_tier():
    """The exact tier at 5 s on the 32-layer chain at 0.3 P, where SlackSwap has no plan:
    its anytime floor is the fast tier's plan (its first seed)."""
    inst = make("chain", n_layers=32).lowered
    M = int(0.3 * inst.P)
    fast = slackopt.solve(inst, "slackswap-ls", M, seed=0)
    assert fast.evaluation.feasible
    milp = slackopt.solve(inst, "milp", M, time_limit_s=5, seed=0)
    assert milp.evaluation.step_time_s <= fast.evaluation.step_time_s
