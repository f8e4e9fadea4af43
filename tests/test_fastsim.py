"""The compiled evaluator equals the reference event loop, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slackopt import Instance, Plan, simulate
from slackopt.workloads import make
from tests.helpers_sim import SETTINGS, cases
from tests.strategies import stages


def same(inst, plan, M):
    ref = simulate(inst, plan, M, engine="reference")
    fast = simulate(inst, plan, M, engine="compiled")
    assert fast.to_dict() == ref.to_dict()
    return ref


@pytest.mark.slow
@SETTINGS
@given(cases())
def test_random_small_instances(case):
    same(*case)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_pipeline_stages(data):
    """Several microbatches in flight, idle gaps between units, split backwards."""
    inst = data.draw(stages()).lowered  # one decision per storage
    dec = [data.draw(st.sampled_from([0, 1, 2] if np.isfinite(c) else [0, 1]))
           for c in inst.c.tolist()]
    M = data.draw(st.integers(0, max(1, int(inst.P * 1.5))))
    same(inst, Plan(np.array(dec, dtype=np.int8), inst.saved_names), M)


@pytest.mark.parametrize("workload, params", [
    ("tiny", {}), ("chain", {"n_layers": 12}), ("chain", {"n_layers": 16, "link": "pcie3"}),
    ("gpt2-xl", {"layers": 4}),
    ("bert-large", {"layers": 3}), ("llama-7b", {"layers": 2}), ("vgg16", {}),
])
def test_random_plans_on_workloads(workload, params):
    inst = make(workload, **params)
    rng = np.random.default_rng(7)
    feasible = infeasible = 0
    for _ in range(25):
        p = rng.dirichlet(np.ones(3))
        dec = rng.choice(3, size=inst.n_saved, p=p).astype(np.int8)
        dec[(dec == 2) & ~np.isfinite(inst.c)] = 1
        ev = same(inst, Plan(dec, inst.saved_names), int(inst.P * rng.uniform(0.05, 1.1)))
        feasible += ev.feasible
        infeasible += not ev.feasible
    assert feasible and infeasible  # both paths exercised


@pytest.mark.parametrize("name", ["hol_instance", "drop_instance", "claim_a_first",
                                  "claim_b_first"])
def test_engines_agree_where_the_runtime_rules_fire(name):
    """Every plan of the hand instances of tests/test_runtime_rules.py (each built so that
    one rule fires: no head-of-line blocking, dropped D2H, lagging inputs claimed together),
    at budgets from nothing to twice the peak."""
    import itertools

    from tests import test_runtime_rules as rules

    inst = (rules.claim_instance(name == "claim_a_first") if name.startswith("claim")
            else getattr(rules, name)())
    for dec in itertools.product((0, 1, 2), repeat=inst.n_saved):
        d = np.array(dec, dtype=np.int8)
        if ((d == 2) & ~np.isfinite(inst.c)).any():
            continue
        for frac in (0.3, 0.6, 0.8, 0.9, 1.0, 2.0):
            same(inst, Plan(d, inst.saved_names), int(frac * inst.P))


def test_engines_agree_on_alternating_plans_of_chain16_on_pcie3():
    """The issue's case (lagging D2Hs, dropped D2Hs, H2Ds past copies still in flight), at
    budgets where memory binds and where it does not."""
    from tests import test_runtime_rules as rules

    inst, plan = rules._chain16_alternating()
    flipped = Plan((1 - plan.decisions).astype(np.int8), inst.saved_names)
    for p in (plan, flipped):
        for frac in (0.4, 0.6, 0.8, 1.0, 2.0):
            same(inst, p, int(frac * inst.P))


def test_engines_agree_on_the_slackswap_plan_of_gpt2_xl():
    inst = make("gpt2-xl")
    from slackopt import solve

    res = solve(inst, "slackswap", 0.3)
    ev = same(inst, res.plan, int(0.3 * inst.P))
    assert ev.feasible and ev.d2h_bytes > 0 and ev.recompute_s > 0


def test_engine_argument_is_checked():
    inst = make("tiny")
    with pytest.raises(ValueError, match="engine"):
        simulate(inst, Plan.keep_all(inst), inst.P, engine="gpu")
    with pytest.raises(ValueError, match="no trace"):
        simulate(inst, Plan.keep_all(inst), inst.P, trace=True, engine="compiled")


def test_warm_up_compiles_the_signature_plans_use():
    from slackopt.simulate import warm_up
    from slackopt.simulate._kernel import run_barrier_free

    warm_up()
    before = len(run_barrier_free.signatures)
    inst = make("tiny")
    simulate(inst, Plan.keep_all(inst), inst.P, engine="compiled")
    assert len(run_barrier_free.signatures) == before  # no new compilation


@pytest.mark.slow
@SETTINGS
@given(cases(), st.integers(0, 400))
def test_engines_agree_under_a_host_memory_limit(case, limit):
    """Host pinned-memory limits (issue 7, case 9): both engines refuse the same D2H, at
    the same instant, with the same message, or agree on the whole evaluation."""
    inst, plan, M = case
    limited = Instance(inst.name, inst.ops, inst.tensors, inst.link, host_memory_bytes=limit)
    ev = same(limited, plan, M)
    if ev.failure and "host" in ev.failure:
        assert f"host_memory_bytes = {limit} B" in ev.failure


@pytest.mark.parametrize("name", ["aliasing", "view_of_unsaved_base", "rng_unsupported",
                                  "inplace", "host_limit"])
def test_engines_agree_on_the_edge_instances(name):
    """Every storage-consistent plan of the issue-7 edge instances, at three budgets."""
    import itertools
    from pathlib import Path

    from slackopt.io import load_instance

    inst = load_instance(Path(__file__).resolve().parents[1] / "instances" / "edge"
                         / f"{name}.json")
    low = inst.lowered
    for dec in itertools.product((0, 1, 2), repeat=low.n_saved):
        d = np.array(dec, dtype=np.int8)
        if ((d == 2) & ~np.isfinite(low.c)).any():
            continue
        plan = Plan.from_lowered(inst, Plan(d, low.saved_names))
        for M in (low.P // 2, low.P - 1, low.P):
            ref = simulate(inst, plan, int(M), engine="reference")
            assert simulate(inst, plan, int(M), engine="compiled").to_dict() == ref.to_dict()
