"""The large-neighbourhood search of the MILP solver (solvers/milp/search/lns.py) and the window
mode of the enumeration's branch and bound (solvers/milp/search/enumeration.py), against brute
force: every decision vector simulated through slackopt.simulate.

Checked: a window searched to its end returns exactly the fastest plan that agrees with
the start outside the window (from every feasible start, for every window of two
tensors); with a window covering every tensor the search returns the enumerated
optimum; it never returns a plan slower than its start; it is deterministic for a seed;
a larger work limit never gives a slower plan; bad arguments raise; and in the solver the
phase runs after the bounds, never raises the step, and is off with lns_plans=0.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from slackopt.plan import Plan
from slackopt.simulate import simulate
from slackopt.solvers.milp import MILP
from slackopt.solvers.milp.search.enumeration import BranchAndBound, enumerate_optimum
from slackopt.solvers.milp.search.incumbent import Incumbent
from slackopt.solvers.milp.search.lns import (
    _start_size,
    _two_blocks,
    _windows,
    default_window_plans,
    lns,
)
from slackopt.workloads import make
from tests.helpers_milp import enumerate_plans, instance

KEYS = [("hand", 0.75), ("hand", 0.6), ("chain5", 0.8), ("chain5-nvlink", 0.65),
        ("unet1", 0.75)]
_TIMES: dict = {}


def times_of(key, frac):
    """(instance, M, {decision tuple: simulated step time or inf})."""
    if (key, frac) not in _TIMES:
        inst = instance(key)
        M = int(frac * inst.P)
        _TIMES[key, frac] = (inst, M, enumerate_plans(inst, M))
    return _TIMES[key, frac]


def started(inst, M, dec):
    inc = Incumbent(inst, M)
    inc.consider(np.array(dec, np.int8), "start")
    return inc


def feasible_starts(times):
    return sorted((t, d) for d, t in times.items() if math.isfinite(t))


@pytest.mark.slow
@pytest.mark.parametrize("key,frac", KEYS)
def test_window_search_is_the_best_plan_agreeing_outside_the_window(key, frac):
    """For every feasible start and every pair of tensors, the window search ends (far
    within its work limit) with the fastest plan among those that agree with the start
    outside the pair, by brute force over the enumerated times."""
    inst, M, times = times_of(key, frac)
    bb = BranchAndBound(inst, M)
    nS = inst.n_saved
    for T0, start in feasible_starts(times):
        for w in itertools.combinations(range(nS), 2):
            inc = started(inst, M, start)
            r = bb.run(inc, 10**6, math.inf, free=np.array(w), source="window")
            assert r.complete and r.bound_s is None
            outside = [t for t in range(nS) if t not in w]
            best = min(T for d, T in times.items()
                       if all(d[t] == start[t] for t in outside))
            assert inc.step_s == best <= T0, (start, w)
            assert all(inc.dec[t] == start[t] for t in outside)
            assert times[tuple(int(x) for x in inc.dec)] == best


@pytest.mark.parametrize("key,frac", KEYS)
def test_lns_with_a_window_covering_every_tensor_finds_the_optimum(key, frac):
    """These instances have at most 6 saved tensors, not above the first window size (8
    for their few ops, :func:`default_window_plans`): one window covers every tensor
    with bytes, so the search is the exact enumeration (hand's zero-byte tensor changes
    no plan's time) and returns the optimum from any start (the slowest feasible plan
    here), and stops after that one window."""
    inst, M, times = times_of(key, frac)
    assert _start_size(default_window_plans(inst.n_ops)) == 8 >= inst.n_saved
    slowest = feasible_starts(times)[-1][1]
    inc = started(inst, M, slowest)
    r = lns(inc, 10**6, 0, math.inf)
    assert inc.step_s == min(times.values())
    assert simulate(inst, Plan(inc.dec, inst.saved_names), M).step_time_s == inc.step_s
    assert r.converged and r.passes == 1 and r.windows == 1


@pytest.mark.slow
def test_lns_is_never_slower_than_its_start_and_deterministic():
    """From every feasible start, with windows of 2 tensors and small work limits, the
    plan is never slower than the start; the same seed gives the same plan and counts."""
    inst, M, times = times_of("chain5", 0.8)
    for T0, start in feasible_starts(times):
        for plans in (1, 5, 40):
            a, b = started(inst, M, start), started(inst, M, start)
            ra = lns(a, plans, 3, math.inf, window_plans=4, window_max=2)
            rb = lns(b, plans, 3, math.inf, window_plans=4, window_max=2)
            assert a.step_s <= T0 and ra.simulated <= plans
            assert ra == rb and np.array_equal(a.dec, b.dec)


def test_lns_on_a_larger_chain_is_anytime_and_deterministic():
    """chain8 (9 saved tensors, above the window size 6 used here) at 0.7 P, from the
    all-swap plan: a larger work limit never gives a slower plan, the same seed replays
    the same search, and the converged search reaches the optimum that the exact
    enumeration proves (16.023 ms, instances/small/references.json); a passed deadline
    does nothing."""
    inst = make("chain", layers=8)
    M = int(0.7 * inst.P)
    start = np.ones(inst.n_saved, np.int8)
    T0 = started(inst, M, start).step_s
    assert math.isfinite(T0)
    opt = Incumbent(inst, M)
    assert enumerate_optimum(opt, 10**6, math.inf).complete
    prev = T0
    for plans in (10, 100, 1000, 10**6):
        inc = started(inst, M, start)
        r = lns(inc, plans, 7, math.inf, window_plans=300, window_max=6)
        assert inc.step_s <= prev and r.simulated <= plans
        prev = inc.step_s
        again = started(inst, M, start)
        assert lns(again, plans, 7, math.inf, window_plans=300, window_max=6) == r
        assert np.array_equal(again.dec, inc.dec)
    assert r.converged and r.window_size == 6
    assert prev == opt.step_s < T0
    assert prev == pytest.approx(16.023e-3, abs=1e-7)
    late = started(inst, M, start)
    r = lns(late, 10**6, 7, 0.0)
    assert r.windows == 0 and late.step_s == T0


def test_windows_slide_by_half_and_end_at_the_last_tensor():
    assert _windows([4, 1, 3, 0, 2], 2) == [(1, 4), (1, 3), (0, 3), (0, 2)]
    assert _windows([5, 4, 1, 3, 0, 2], 4) == [(1, 3, 4, 5), (0, 1, 2, 3)]
    assert _windows([6, 5, 4, 1, 3, 0, 2], 4) == [(1, 4, 5, 6), (0, 1, 3, 4),
                                                   (0, 1, 2, 3)]
    assert _windows([4, 1, 3], 5) == [(1, 3, 4)]


def test_two_blocks_are_two_disjoint_runs():
    """k // 2 and k - k // 2 tensors consecutive in the order, disjoint, for many draws;
    the same generator state gives the same window."""
    order = [7, 3, 9, 0, 5, 1, 8, 2, 6, 4]
    pos = {t: i for i, t in enumerate(order)}
    rng = np.random.default_rng(0)
    for k in (2, 3, 5, 10):
        for _ in range(50):
            w = _two_blocks(order, k, rng)
            assert len(set(w)) == k == len(w) and w == tuple(sorted(w))
            idx = sorted(pos[t] for t in w)
            runs = 1 + sum(1 for a, b in zip(idx, idx[1:], strict=False) if b != a + 1)
            assert runs <= 2
    assert (_two_blocks(order, 4, np.random.default_rng([1, 2]))
            == _two_blocks(order, 4, np.random.default_rng([1, 2])))


def test_bad_arguments_raise():
    inst, M, times = times_of("hand", 0.75)
    bb = BranchAndBound(inst, M)
    with pytest.raises(ValueError, match="needs an incumbent"):
        bb.run(Incumbent(inst, M), 10, math.inf, free=np.array([0]))
    inc = started(inst, M, feasible_starts(times)[0][1])
    for bad in ([0, 0], [inst.n_saved], [-1]):
        with pytest.raises(ValueError, match="distinct saved tensors"):
            bb.run(inc, 10, math.inf, free=np.array(bad))
    with pytest.raises(ValueError, match="another instance or budget"):
        bb.run(Incumbent(inst, M - 1), 10, math.inf)
    with pytest.raises(ValueError, match="must be >= 0"):
        lns(inc, -1, 0, math.inf)


def test_solver_phase_after_the_bounds():
    """MILP with the seed solvers, the enumeration and the local search off (hand at
    0.75 P: the only seed is the all-swap plan, 2.1 ms, not the optimum): the phase runs
    after the checkpoint bound and the timing LP and, one window covering every tensor with bytes,
    returns the enumerated optimum (1.52 ms); deterministic; lns_plans=0 turns it off."""
    inst, M, times = times_of("hand", 0.75)
    kw = dict(enum_plans=0, local_search=False, warm_start=False, time_limit_s=30,
              max_iterations=2)
    a = MILP(**kw).solve(inst, M, seed=1)
    b = MILP(**kw).solve(inst, M, seed=1)
    phases = [p["phase"] for p in a.info["phases"]]
    assert phases.index("lns") > phases.index("timing_lp") == phases.index("checkpoint_bound") + 1
    up = {p["phase"]: p["upper_s"] for p in a.info["phases"]}
    assert up["lns"] == min(times.values()) == pytest.approx(1.52e-3, rel=1e-9)
    all_swap = tuple(1 if s > 0 else 0 for s in np.asarray(inst.s))
    assert up["seeds"] == times[all_swap] > up["lns"]
    assert a.info["upper_bound_s"] == up["lns"] and a.info["plan_source"] == "lns"
    assert a.info["lns"] == b.info["lns"] and a.plan == b.plan
    off = MILP(**dict(kw, lns_plans=0)).solve(inst, M)
    assert "lns" not in off.info and "lns" not in [p["phase"] for p in off.info["phases"]]
