"""The MILP's lower bounds are valid and its "optimal" is true: checked against every plan
enumerated through the evaluator (slackopt.simulate), on a recorded failing case and on
random small instances (hypothesis).

Checked, for every setting drawn (tier full / exact / aggregated, local search on and off,
warm start on and off, SCIP and HiGHS): ``lower_bound_s <= the enumerated optimum``; a
plan with status "optimal" is the enumerated optimum (within the solver's stated
tolerance); the returned plan is never slower than the best seed it was given (SlackSwap);
and the full-tier model with the optimum's decisions fixed is at most its simulated time
(the no-good loop relies on the bound holding plan by plan).
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from slackopt import Instance, Link, Op, Tensor
from slackopt.plan import SWAP, Plan
from slackopt.simulate import simulate
from slackopt.solvers.milp import _ScipBackend, build_model, model_floor
from slackopt.solvers.milp.bounds.checkpoint import checkpoint_bound
from slackopt.solvers.milp.bounds.timing import timing_bound
from slackopt.solvers.slackswap import SlackSwap
from tests.helpers_milp import case_times, check_solve, enumerate_plans, random_instance
from tests.strategies import budgets, instances

pytestmark = pytest.mark.slow  # every test here takes seconds (a milp solve each)

US = 1e-6


def fixed_model_value(inst, M, dec):
    """The full-tier model's optimum with decisions `dec` fixed (s), or None if the model
    rejects them."""
    m = build_model(inst, M, tier="full")
    be = _ScipBackend(m.lin, threads=1, seed=0, rel_gap=1e-9)
    for j, v in m.hint(np.array(dec, np.int8)).items():
        be.add_row([(j, 1.0)], v, v)
    sol = be.solve(30, None)
    return None if sol.objective is None else sol.objective * m.t_unit


# ---------------------------------------------------------------- the recorded case


def test_case_milp_bound_above_optimum_enumeration():
    """The case's enumeration as recorded: all-swap is the optimum, 12.7776 ms."""
    inst, M, times = case_times()
    best = min(times, key=times.get)
    assert best == (SWAP, SWAP, SWAP, SWAP)
    assert times[best] == pytest.approx(12.7776e-3, abs=1e-7)
    fixed = fixed_model_value(inst, M, best)
    assert fixed is not None and fixed <= times[best] * (1 + 1e-9)


@pytest.mark.parametrize("params", [dict(local_search=False), dict(),
                                    dict(local_search=False, warm_start=False),
                                    dict(local_search=False, backend="highs")])
def test_case_milp_bound_above_optimum(params):
    """milp-bound-above-optimum: the bound never exceeds the enumerated optimum and the
    plan called optimal is the optimum."""
    inst, M, times = case_times()
    check_solve(inst, M, times, **params)


# ---------------------------------------------------------------- random instances


EXAMPLES = int(os.environ.get("MILP_PROPERTY_EXAMPLES", "40"))
"""Random instances per run (CI: 40, about 30 s on 2 shared cores); set
MILP_PROPERTY_EXAMPLES for a longer hunt (before a release)."""
SETTINGS = [dict(local_search=False, warm_start=False),
            dict(local_search=False),
            dict(),
            dict(tier="exact", local_search=False, warm_start=False),
            dict(tier="aggregated", warm_start=False),
            dict(backend="highs", local_search=False, warm_start=False)]


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(seed=st.integers(0, 2**32 - 1), which=st.sets(st.integers(0, len(SETTINGS) - 1), min_size=2,
                                               max_size=2))
def test_bound_valid_on_random_instances(seed, which):
    inst, M = random_instance(seed)
    times = enumerate_plans(inst, M)
    opt = min(times.values())
    if math.isfinite(opt) and inst.n_saved:
        best = min(times, key=times.get)
        fixed = fixed_model_value(inst, M, best)
        # the model solved by a floating-point MILP solver: its tolerances (1e-7 relative)
        assert fixed is not None and fixed <= opt * (1 + 1e-7), (best, fixed, opt)
    for i in sorted(which):
        check_solve(inst, M, times, max_iterations=20, **SETTINGS[i])


STRATEGY_EXAMPLES = int(os.environ.get("MILP_STRATEGY_EXAMPLES", "15"))
"""Instances drawn from tests/strategies.py per run (CI: 15, about 20 s on 2 shared cores)."""


@settings(max_examples=STRATEGY_EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.filter_too_much])
@given(data=st.data())
def test_bound_valid_on_generated_instances(data):
    """test_bound_valid_on_random_instances on instances drawn from the whole instance
    language (tests/strategies.py: views, in-place mutation, RNG state, never_recompute,
    host limits, sibling and chained recipes, rebuild-only ops, 50 MB/s-1 TB/s links, size
    ratios up to 1e9), at budgets from the model floor to P: the full-tier model with the
    optimum's decisions fixed, two of SETTINGS, the checkpoint LP and the timing bound
    (MILP and LP) against the enumerated optimum. Solvers get ``inst.lowered``, as
    :func:`slackopt.solve` gives it to them (one saved unit per storage); instances with
    fewer than two saved units or with the floor at P (one budget, nothing to plan) are
    not drawn."""
    inst = data.draw(instances(max_saved=5))
    low = inst.lowered
    assume(low.n_saved >= 2 and model_floor(low) < inst.P)
    M = data.draw(budgets(inst))
    which = data.draw(st.sets(st.integers(0, len(SETTINGS) - 1), min_size=2, max_size=2))
    times = enumerate_plans(low, M)
    opt = min(times.values())
    if math.isfinite(opt):
        best = min(times, key=times.get)
        fixed = fixed_model_value(low, M, best)
        # the model solved by a floating-point MILP solver: its tolerances (1e-7 relative)
        assert fixed is not None and fixed <= opt * (1 + 1e-7), (best, fixed, opt)
    for i in sorted(which):
        check_solve(low, M, times, max_iterations=20, **SETTINGS[i])
    b = checkpoint_bound(low, M)
    assert b is None or b <= opt * (1 + 1e-9), ("checkpoint", b, opt)
    for integer in (True, False):
        b, info = timing_bound(low, M, 30.0, integer=integer)
        assert b is None or b <= opt * (1 + 1e-9), ("timing", integer, b, opt, info)


# ---------------------------------------------------------------- the checkpoint LP bound
@settings(max_examples=4 * EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(seed=st.integers(0, 2**32 - 1))
def test_checkpoint_bound_valid_on_random_instances(seed):
    """checkpoint_bound (solvers/milp/bounds/checkpoint.py) never exceeds the enumerated optimum
    and never goes below T*."""
    inst, M = random_instance(seed)
    times = enumerate_plans(inst, M)
    opt = min(times.values())
    b = checkpoint_bound(inst, M)
    if b is None:
        return
    assert b >= inst.ideal_time_s * (1 - 1e-12)
    assert b <= opt * (1 + 1e-9), (b, opt, min(times, key=times.get))


def test_checkpoint_bound_on_the_recorded_case():
    inst, M, times = case_times()
    b = checkpoint_bound(inst, M)
    assert b is not None and inst.ideal_time_s <= b <= min(times.values())


def hand_swap_case():
    """(instance, M, enumerated times) of the hand-computed bound tests: a 1.5 MB tensor a
    (f0 -> b1, no recipe) and a 1.5 MB temporary of f1, M = 1.5 MB, 1 ms ops, 1 GB/s, no
    latency; the swap plan runs in 6 ms, keep does not run."""
    ms = 1e-3
    ops = [Op("f0", "fwd", ms), Op("f1", "fwd", ms), Op("b0", "bwd", ms), Op("b1", "bwd", ms)]
    ts = [Tensor("a", 1_500_000, "f0", ("b1",)), Tensor("tmp", 1_500_000, "f1", ())]
    inst = Instance("hand", ops, ts, Link("l", 1e9, 0.85, 0.0))
    M = 1_500_000
    times = enumerate_plans(inst, M)
    assert times[(SWAP,)] == pytest.approx(6 * ms, rel=1e-12)
    return inst, M, times


def test_checkpoint_bound_hand_computed():
    """One 1.5 MB tensor a (f0 -> b1, no recipe) and a 1.5 MB temporary of f1 under
    M = 1.5 MB; 1 ms ops, 1 GB/s, no latency. At f1 a must be offloaded and freed: its
    1.5 ms D2H fits 1 ms between r_a = 1 ms and the end of f1 (2 ms), so >= 0.5 ms of
    forward stall; its 1.5 ms H2D fits 1 ms between T_F and the start of b1, so >= 0.5 ms
    in the backward pass: bound T* + 1 ms = 5 ms. The evaluator's swap plan: 6 ms (f1 waits
    for the whole D2H, 1.5 ms)."""
    ms = 1e-3
    inst, M, times = hand_swap_case()
    assert math.isinf(times[(0,)])
    assert checkpoint_bound(inst, M) == pytest.approx(5 * ms, rel=1e-6)


def test_checkpoint_bound_backward_checkpoint_hand_computed():
    """A 1.5 MB tensor a (f0 -> b1, no recipe) and a 1.5 MB workspace of b0 under M = 1.5
    MB; 1 ms ops, 1 GB/s, no latency; no forward op is over M. At the start of b0, a must
    be absent: its 1.5 ms D2H fits the 1 ms between r_a = 1 ms and the start of b0 (2 ms)
    only with 0.5 ms of stall, and its 1.5 ms H2D fits the 1 ms between the end of the
    forward pass and the start of b1 (3 ms) only with 0.5 ms of backward stall; one 0.5
    ms backward stall pays for both: T* + 0.5 ms = 4.5 ms. Without the backward
    checkpoint rows the LP saw no D2H timing at b0 and no H2D need (4 ms). The
    evaluator: D2H 1-2.5 ms, b0 2.5-3.5 ms, H2D 3.5-5 ms, b1 5-6 ms."""
    ms = 1e-3
    ops = [Op("f0", "fwd", ms), Op("f1", "fwd", ms),
           Op("b0", "bwd", ms, workspace_bytes=1_500_000), Op("b1", "bwd", ms)]
    inst = Instance("hand-bwd", ops, [Tensor("a", 1_500_000, "f0", ("b1",))],
                    Link("l", 1e9, 0.85, 0.0))
    M = 1_500_000
    times = enumerate_plans(inst, M)
    assert times[(SWAP,)] == pytest.approx(6 * ms, rel=1e-12)
    assert math.isinf(times[(0,)])
    assert checkpoint_bound(inst, M) == pytest.approx(4.5 * ms, rel=1e-6)


def test_checkpoint_bound_gpt2_xl_backward_rows():
    """GPT-2 XL at 0.1 P (instances/paper): the backward checkpoints and the rebuild time
    before each backward op (R_j) lift the LP above the deficit bound (464.34 ms; the LP
    without them: 463.49 ms), and it stays at most SlackSwap's simulated step."""
    from pathlib import Path

    from slackopt.instance import budget_bytes
    from slackopt.io import load_instance
    from slackopt.solvers.milp.bounds.deficit import deficit_bound
    root = Path(__file__).resolve().parent.parent
    inst = load_instance(root / "instances" / "paper" / "gpt2-xl_a100-pcie4.json")
    M = budget_bytes(inst, 0.1)
    b = checkpoint_bound(inst, M, 120)
    ss = SlackSwap(min_budget_search=False).solve(inst, M).plan
    ev = simulate(inst, ss, M)
    assert ev.feasible
    assert deficit_bound(inst, M) * 1.005 < b <= ev.step_time_s * (1 + 1e-9)


CHECKPOINT_SOLVERS = ("slackswap", "keep-all", "checkpoint", "recompute-all", "sqrt-checkpoint",
                      "vdnn", "superneurons", "swapadvisor", "slackswap-swap-first",
                      "slackswap-recompute-only", "slackswap-barriers", "titan-auto",
                      "module-offload", "offload-all", "ckpt-offload")


@pytest.mark.parametrize("name,frac", [("chain31-seed0", 0.35), ("chain31-seed0", 0.5),
                                       ("tiny-layers3", 0.5)])
def test_checkpoint_bound_below_every_solvers_plan(name, frac):
    """On shipped instances the checkpoint LP bound and the timing MILP bound (20 s) are
    above T* (they say something) and at most the
    simulated step time of every registered solver's plan that runs (torch-knapsack
    needs torch, milp and genetic take long: left out)."""
    from pathlib import Path

    from slackopt import solve
    from slackopt.instance import budget_bytes
    from slackopt.io import load_instance
    root = Path(__file__).resolve().parent.parent
    inst = load_instance(root / "instances" / "small" / f"{name}_a100-pcie4.json")
    M = budget_bytes(inst, frac)
    b = checkpoint_bound(inst, M)
    assert b is not None
    tb, _ = timing_bound(inst, M, 20.0)
    assert tb is not None
    ran = 0
    for solver in CHECKPOINT_SOLVERS:
        r = solve(inst, solver, budget=M, time_limit_s=20, seed=0)
        if r.plan is None:
            continue
        ev = simulate(inst, r.plan, M)
        if ev.feasible:
            ran += 1
            assert b <= ev.step_time_s * (1 + 1e-9), (solver, b, ev.step_time_s)
            assert tb <= ev.step_time_s * (1 + 1e-9), (solver, tb, ev.step_time_s)
    assert ran >= 3
    if name.startswith("chain"):
        assert b > inst.ideal_time_s * 1.02
        assert tb > inst.ideal_time_s * 1.02


# ---------------------------------------------------------------- the timing MILP bound
@settings(max_examples=4 * EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(seed=st.integers(0, 2**32 - 1))
def test_timing_bound_valid_on_random_instances(seed):
    """timing_bound (solvers/milp/bounds/timing.py), MILP and LP, never exceeds the
    enumerated optimum and never goes below T*."""
    inst, M = random_instance(seed)
    times = enumerate_plans(inst, M)
    opt = min(times.values())
    for integer in (True, False):
        b, info = timing_bound(inst, M, 30.0, integer=integer)
        if b is None:
            continue
        assert b >= inst.ideal_time_s * (1 - 1e-12)
        assert b <= opt * (1 + 1e-9), (integer, b, opt, min(times, key=times.get), info)


def test_timing_bound_on_the_recorded_case():
    inst, M, times = case_times()
    for integer in (True, False):
        b, _ = timing_bound(inst, M, integer=integer)
        assert b is not None and inst.ideal_time_s <= b <= min(times.values()) * (1 + 1e-9)


def test_timing_bound_hand_computed():
    """The instance of test_checkpoint_bound_hand_computed (a 1.5 MB tensor a, f0 -> b1,
    must be freed at f1; 1 ms ops, 1 GB/s, no latency). At the real start of f1, at most
    1 ms + Sf, a's 1.5 ms D2H, started at r_a = 1 ms, has ended: Sf >= 1.5 ms; its 1.5 ms
    H2D starts after the real end of the forward pass and ends before b1, 1 ms later in
    the ideal schedule: >= 0.5 ms of backward stall. Bound T* + 2 ms = 6 ms, the
    evaluator's swap plan exactly (the checkpoint LP, timing the D2H to the end of f1,
    gives 5 ms); the plan read from the MILP is that swap plan."""
    ms = 1e-3
    inst, M, times = hand_swap_case()
    b, info = timing_bound(inst, M)
    assert b == pytest.approx(6 * ms, rel=1e-6)
    assert [d.tolist() for d in info["candidates"]] == [[SWAP]]
    b_lp, lp_info = timing_bound(inst, M, integer=False)
    assert b_lp == pytest.approx(6 * ms, rel=1e-6)
    # the LP's value handed to a later call (the search's timing_lp, then timing_bound
    # phase): the LP is not solved again, the bound and the candidates are the same
    b_given, given = timing_bound(inst, M, lp_value=lp_info["lp_bound"])
    assert given["lp_status"].startswith("given") and "lp_seconds" not in given
    assert b_given == b and [d.tolist() for d in given["candidates"]] == [[SWAP]]
    # a known plan's step as the cutoff: nothing faster is left, the bound is that step
    b_cut, info = timing_bound(inst, M, upper_s=6 * ms)
    assert b_cut == pytest.approx(6 * ms, rel=1e-6)


@pytest.mark.parametrize("name", ["chain8-seed0", "unet2", "unet3", "tiny-layers1"])
def test_timing_bound_below_proven_optima(name):
    """On the small suite, every budget whose optimum is proven (instances/small/
    references.json, the exact enumeration): the timing bound (10 s) is at most it."""
    import json
    from pathlib import Path

    from slackopt.io import load_instance
    root = Path(__file__).resolve().parent.parent / "instances" / "small"
    inst = load_instance(root / f"{name}_a100-pcie4.json")
    refs = json.loads((root / "references.json").read_text())["entries"]
    rows = [e for e in refs if e["instance"] == f"{name}_a100-pcie4"
            and e["status"] == "optimal"]
    assert rows
    for e in rows:
        b, info = timing_bound(inst, e["budget_bytes"], 10.0)
        assert b is not None, info
        assert inst.ideal_time_s <= b <= e["best_step_s"] * (1 + 1e-9), (e, b)


@pytest.mark.parametrize("seed,layers,link", [(1, 10, "pcie4"), (2, 12, "pcie3"),
                                              (3, 11, "pcie4"), (4, 12, "nvlink-c2c")])
def test_timing_bound_below_enumerated_chain_optima(seed, layers, link):
    """Random chains of 11-13 saved tensors (recipes chained: each rebuild reads the
    previous activation; FIFO D2H queues long enough to matter) at 0.45-0.85 P: the
    timing bound is at most the optimum that the exact enumeration proves, and where the
    bound is tight the plan read from the MILP runs at that optimum."""
    from slackopt.solvers.milp.search.enumeration import enumerate_optimum
    from slackopt.solvers.milp.search.incumbent import Incumbent
    from slackopt.workloads.synthetic import chain
    inst = chain(layers, seed=seed, link=link)
    for frac in (0.85, 0.65, 0.45):
        M = int(frac * inst.P)
        inc = Incumbent(inst, M)
        en = enumerate_optimum(inc, 2_000_000, math.inf)
        assert en.complete
        b, info = timing_bound(inst, M, 60.0)
        if inc.dec is None:
            continue            # no plan runs: nothing to compare
        opt = inc.step_s
        assert b is not None and inst.ideal_time_s <= b <= opt * (1 + 1e-9), (frac, b, opt)
        for dec in info["candidates"]:
            ev = simulate(inst, Plan(dec, inst.saved_names), M)
            assert not ev.feasible or ev.step_time_s >= opt * (1 - 1e-12)


def test_timing_bound_candidates_do_not_depend_on_the_time_limit():
    """The milp solver's anytime rule: the plans timing_bound hands back come only from
    MILP solves that ended, in solve order, so a shorter limit gives a prefix of a
    longer limit's list (none when its first solve is cut) and its bound is no larger.
    chain31 at 0.9 P closes in seconds with the long limit."""
    from pathlib import Path

    from slackopt.instance import budget_bytes
    from slackopt.io import load_instance
    root = Path(__file__).resolve().parent.parent
    inst = load_instance(root / "instances" / "small" / "chain31-seed0_a100-pcie4.json")
    M = budget_bytes(inst, 0.9)
    b_long, long = timing_bound(inst, M, 120.0, seed=0)
    assert long["status"] == "optimal" and long["candidates"]
    b_short, short = timing_bound(inst, M, 0.6, seed=0)
    k = len(short["candidates"])
    assert k <= len(long["candidates"])
    for a, b in zip(short["candidates"], long["candidates"][:k], strict=True):
        assert np.array_equal(a, b)
    assert b_short is None or b_short <= b_long * (1 + 1e-12)
