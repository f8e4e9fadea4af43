"""The Lagrangian deficit bound with copy times (solvers/milp/bounds/deficit_lagrange.py): a
hand-computed case where the latency is what the deficit bound misses, and weak duality
checked row by row: at every op with a keep-all excess and at multipliers spread over
their whole range (not only those the search picks), T* + g_k(mu, lam) is at most the
step of every plan the evaluator runs (the enumerated optimum), on random instances and
on instances drawn from the whole instance language (tests/strategies.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import slackopt
from slackopt import Instance, Link, Op, Tensor
from slackopt.plan import KEEP, SWAP
from slackopt.solvers.milp import model_floor
from slackopt.solvers.milp.bounds.deficit import deficit_bound
from slackopt.solvers.milp.bounds.deficit_lagrange import _certified_value, lagrangian_deficit_bound
from slackopt.solvers.milp.bounds.slack import stage_slack
from tests.helpers_milp import enumerate_plans, random_instance
from tests.strategies import budgets, instances, stage_sample

ms = 1e-3
STAGES = stage_sample(12, salt=1)


def test_hand_computed_latency():
    """A 1.5 MB tensor a (f0 -> b1, no recipe) and a 1.5 MB temporary of f1 under M = 1.5
    MB; 1 ms ops, 1 GB/s, 0.2 ms copy latency. At f1 a must be absent, so swapped with its
    D2H ended: it starts at r_a = 1 ms = S*(f1) and lasts 0.2 + 1.5 ms, all stall:
    g = 1.7 ms at lam = 1, mu = 1.7 ms / 1.5 MB, bound T* + 1.7 ms = 5.7 ms. The deficit
    bound prices the 1.5 MB at 1 GB/s only (5.5 ms). The evaluator's swap plan: f1 waits
    to 2.7 ms, the forward pass ends at 3.7 ms, b0 runs 3.7-4.7 ms, the H2D 3.7-5.4 ms,
    b1 5.4-6.4 ms."""
    ops = [Op("f0", "fwd", ms), Op("f1", "fwd", ms), Op("b0", "bwd", ms), Op("b1", "bwd", ms)]
    ts = [Tensor("a", 1_500_000, "f0", ("b1",)), Tensor("tmp", 1_500_000, "f1", ())]
    inst = Instance("hand-latency", ops, ts, Link("l", 1e9, 0.85, 2e-4))
    M = 1_500_000
    times = enumerate_plans(inst, M)
    assert math.isinf(times[(KEEP,)])
    assert times[(SWAP,)] == pytest.approx(6.4 * ms, rel=1e-12)
    b, info = lagrangian_deficit_bound(inst, M)
    assert b == pytest.approx(5.7 * ms, rel=1e-9)
    assert info["op"] == 1 and info["lam"] == pytest.approx(1.0)
    assert deficit_bound(inst, M) == pytest.approx(5.5 * ms, rel=1e-9)
    # the milp reports it as its own source
    r = slackopt.solve(inst, "milp", M, time_limit_s=10, seed=0)
    assert r.info["bounds"]["deficit_lagrange"] == pytest.approx(5.7 * ms, rel=1e-9)


def test_hand_computed_tight_with_a_forward_window():
    """The same tensor a, now with a forward op between its producer and the 1.5 MB
    temporary (f0, f1, f2; tmp of f2) and a 2 ms b0, so that the H2D hides: at f2,
    tau = S*(f2) - r0 = 1 ms, and the D2H's 1.7 ms leave 0.7 ms of stall: bound
    T* + 0.7 ms = 6.7 ms, the evaluator's swap plan exactly (f2 waits to 2.7 ms, b0 runs
    3.7-5.7 ms beside the H2D's 3.7-5.4 ms, b1 5.7-6.7 ms)."""
    ops = [Op("f0", "fwd", ms), Op("f1", "fwd", ms), Op("f2", "fwd", ms),
           Op("b0", "bwd", 2 * ms), Op("b1", "bwd", ms)]
    ts = [Tensor("a", 1_500_000, "f0", ("b1",)), Tensor("tmp", 1_500_000, "f2", ())]
    inst = Instance("hand-latency-window", ops, ts, Link("l", 1e9, 0.85, 2e-4))
    M = 1_500_000
    times = enumerate_plans(inst, M)
    assert times[(SWAP,)] == pytest.approx(6.7 * ms, rel=1e-12) == min(times.values())
    b, info = lagrangian_deficit_bound(inst, M)
    assert info["op"] == 2
    assert b == pytest.approx(6.7 * ms, rel=1e-9) and b <= times[(SWAP,)]


def _rows(inst):
    """Per-op arrays of the relaxation (the function's own inputs)."""
    s = np.asarray(inst.s, dtype=np.float64)
    c = np.asarray(inst.c, dtype=np.float64)
    w = float(inst.link.copy_latency_s) + s / float(inst.link.d2h_bytes_per_s)
    return (s, c, w, np.asarray(inst.saved_last_fwd_idx), np.asarray(inst.saved_first_bwd_idx),
            np.asarray(inst.saved_last_bwd_idx))


def check_weak_duality(inst, M, opt, rng):
    """T* + g_k(mu, lam) <= opt at every op with a keep-all excess, for lam in {0, 1} and
    random values, mu from 0 to beyond every item's unit cost; and the bound the search
    returns is at most opt and at least T*."""
    b, _ = lagrangian_deficit_bound(inst, M)
    T = float(inst.ideal_time_s)
    assert T * (1 - 1e-12) <= b <= opt * (1 + 1e-12), (b, opt)
    s, c, w, lastf, firstb, lastb = _rows(inst)
    keep = np.asarray(inst.keep_all_profile, dtype=np.int64)
    r0 = float(np.min(inst.r))
    # a stage: the forward-pass terms at every op, less the ideal idle after the op
    slack = stage_slack(inst).after if not inst.single_pass else np.zeros(inst.n_ops)
    pos = s > 0
    units = np.concatenate([w[pos] / s[pos], (c[pos & np.isfinite(c)] / s[pos & np.isfinite(c)])])
    top = float(units.max()) if units.size else 1.0
    for k in np.flatnonzero(keep > M):
        D = float(keep[k] - M)
        tau = float(inst.start_s[k]) - r0
        for lam in [0.0, 1.0, *rng.random(4).tolist()]:
            for mu in [0.0, *(top * rng.random(6) * 2.0).tolist(), *units.tolist()]:
                bwd = bool(k >= inst.n_fwd) and inst.single_pass
                g = _certified_value(int(k), mu, lam, D, tau, bwd, s, c, w, lastf, firstb,
                                     lastb) - float(slack[k])
                assert T + g <= opt * (1 + 1e-12), (int(k), mu, lam, T + g, opt)


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(seed=st.integers(0, 2**32 - 1))
def test_weak_duality_on_random_instances(seed):
    """Random DAGs, links, latencies and workspaces (tests/helpers_milp.py)."""
    inst, M = random_instance(seed)
    times = enumerate_plans(inst, M)
    opt = min(times.values())
    assume(math.isfinite(opt))
    check_weak_duality(inst, M, opt, np.random.default_rng(seed))


@pytest.mark.slow
@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.filter_too_much])
@given(data=st.data())
def test_weak_duality_on_generated_instances(data):
    """Instances from the whole instance language (views, in-place mutation, RNG state,
    never_recompute, host limits, recipes, workspaces, zero-byte tensors, 50 MB/s-1 TB/s
    links), lowered as :func:`slackopt.solve` gives them to solvers, at budgets from the
    model floor to P."""
    inst = data.draw(instances(max_saved=5))
    low = inst.lowered
    assume(low.n_saved >= 1 and model_floor(low) < inst.P)
    M = data.draw(budgets(inst))
    times = enumerate_plans(low, M)
    opt = min(times.values())
    assume(math.isfinite(opt))
    check_weak_duality(low, M, opt, np.random.default_rng(data.draw(st.integers(0, 2**16))))


@pytest.mark.parametrize("k", range(12))
def test_weak_duality_on_stages(k):
    """Pipeline stages (several microbatches, idle gaps, split backwards): the stage form
    (forward-pass terms at every op, less the ideal idle after the op) holds at every
    multiplier against the brute-force optimum, at budgets from the floor to P."""
    inst = STAGES[k]
    lo, hi = model_floor(inst), int(inst.P)
    for M in sorted({lo, lo + (hi - lo) // 3, lo + 2 * (hi - lo) // 3}):
        opt = min(enumerate_plans(inst, M).values())
        if math.isfinite(opt):
            check_weak_duality(inst, M, opt, np.random.default_rng(k))


def test_deadline_searches_the_first_chunk_only(monkeypatch):
    """A deadline already past: only the first ``CHUNK`` ops are searched (here 2 of the
    ops with an excess), and the bound, over fewer ops, is at most the full search's."""
    import slackopt.solvers.milp.bounds.deficit_lagrange as dl
    from slackopt.workloads import make

    inst = make("chain", layers=5)
    M = int(0.3 * inst.P)
    full, finfo = lagrangian_deficit_bound(inst, M)
    assert finfo["ops_searched"] == finfo["ops"] > 2
    monkeypatch.setattr(dl, "CHUNK", 2)
    part, pinfo = lagrangian_deficit_bound(inst, M, deadline=0.0)
    assert pinfo["ops_searched"] == 2
    assert float(inst.ideal_time_s) <= part <= full
