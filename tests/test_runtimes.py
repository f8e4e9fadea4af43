"""Hand-computed timelines of the layer_barriers and on_demand runtimes, and a property
test that every plan simulates under every runtime parameter combination.

docs/model.md ("Other runtimes"), slackopt/simulate/layer_barriers.py and on_demand.py.
Every expected number is worked out in the comment beside it. Instances: W = 100 B/s, no
copy latency, no duplex slowdown unless stated; every op lasts 1 s.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

from slackopt import Plan, simulate
from slackopt.errors import PlanError
from slackopt.io import instance_to_dict, load_plan, save_plan
from slackopt.plan import RUNTIME_PARAMS
from slackopt.simulate import runtime_layers
from tests.helpers import cache_instance, lane, mk
from tests.strategies import budgets, instances

approx = lambda x: pytest.approx(x, rel=1e-12, abs=1e-12)  # noqa: E731


# ============================================================================ layer_barriers
def _barrier_instance():
    # a (200 B) made by f1, read by f2 and b1; b (50 B) made by f2, read by f3 and b2.
    return mk([("f1", 1, "k1"), ("f2", 1, "k2"), ("f3", 1, "k3")],
              [("b3", 1, "k3"), ("b2", 1, "k2"), ("b1", 1, "k1")],
              [("a", 200, "f1", ["f2", "b1"]), ("b", 50, "f2", ["f3", "b2"])])


def test_layer_barriers_forward_barrier_and_one_layer_ahead_prefetch():
    inst = _barrier_instance()
    plan = Plan.from_mapping(inst, {"a": "swap", "b": "swap"}, policy="layer_barriers")
    ev = simulate(inst, plan, 10_000, trace=True)
    # Forward: f1 [0,1]. Layer f2 reads a: its D2H starts with f2: [1, 3] (200 B at 100 B/s).
    # f2 [1,2]; layer f3 waits for a's D2H: starts at 3 (forward stall 1); b's D2H starts
    # with f3 (b's first forward reader): [3, 3.5]; f3 [3, 4].
    # Backward: entering b3 (t=4) prefetches the next offloaded layer, b2 (b): H2D [4, 4.5];
    # b3 [4,5]. Entering b2 at 5 (b arrived) prefetches b1's a: H2D [5, 7]; b2 [5, 6]; b1
    # waits for that prefetch (the barrier after b2): [7, 8]; backward stall 1.
    d2h, h2d, comp = lane(ev, "d2h"), lane(ev, "h2d"), lane(ev, "compute")
    assert d2h["a"] == (approx(1.0), approx(3.0)) and d2h["b"] == (approx(3.0), approx(3.5))
    assert h2d["b"] == (approx(4.0), approx(4.5)) and h2d["a"] == (approx(5.0), approx(7.0))
    assert comp["f3"] == (approx(3.0), approx(4.0)) and comp["b1"] == (approx(7.0), approx(8.0))
    assert ev.feasible and ev.step_time_s == approx(8.0)
    assert ev.stall_fwd_s == approx(1.0) and ev.stall_bwd_s == approx(1.0)
    assert ev.d2h_bytes == 250 and ev.h2d_bytes == 250
    # Peak: a + b while f2 runs (a's D2H has not ended): 250 B.
    assert ev.peak_bytes == 250


def test_same_plan_barrier_free_is_faster():
    inst = _barrier_instance()
    plan = Plan.from_mapping(inst, {"a": "swap", "b": "swap"})
    ev = simulate(inst, plan, 10_000, trace=True)
    # No barriers: D2H a [1,3] and b (queued at f2's end, FIFO) [3, 3.5]; forward ends at 3.
    # At 3 only a's host copy is complete: b's D2H does not hold up the H2D queue (no
    # head-of-line blocking), so a is fetched first although b is needed earlier: H2D a
    # [3, 5]. b's device copy is freed when its D2H ends at 3.5; its H2D waits for the
    # engine: [5, 5.5]. b3 [3,4]; b2 waits for b: [5.5, 6.5] (stall 1.5); b1 [6.5, 7.5]:
    # T = 7.5, still faster than the barriers' 8. (Blocking the queue behind b, as the
    # runtime did before the rule, would give H2D b [3.5, 4], a [4, 6] and T = 7.)
    assert lane(ev, "h2d")["a"] == (approx(3.0), approx(5.0))
    assert lane(ev, "h2d")["b"] == (approx(5.0), approx(5.5))
    assert ev.step_time_s == approx(7.5) and ev.stall_fwd_s == 0
    assert ev.stall_bwd_s == approx(1.5) and ev.h2d_stall_s == {"b": approx(1.5)}


def test_runtime_layers_group_consecutive_ops_of_one_kind_and_block():
    inst = mk([("f1", 1, "gemm", 0), ("f2", 1, "gelu", 0), ("f3", 1, "gemm", 1)],
              [("g3", 1, "gemm", 1), ("w3", 1, "gemm", 1), ("b2", 1, "gelu", 0),
               ("g1", 1, "gemm", 0), ("w1", 1, "gemm", 0)],
              [("a", 10, "f1", ["f2", "w1"])])
    # dgrad + wgrad of one GEMM (same phase, block and kind) form one layer.
    assert runtime_layers(inst) == [0, 1, 2, 3, 3, 4, 5, 5]


def test_tensor_without_forward_reader_is_offloaded_with_the_next_layer():
    # m (100 B) is read only by b1 (a dropout mask): it is copied while f2 runs.
    inst = mk([("f1", 1, "k1"), ("f2", 1, "k2")], [("b2", 1, "k2"), ("b1", 1, "k1")],
              [("m", 100, "f1", ["b1"])])
    ev = simulate(inst, Plan.from_mapping(inst, {"m": "swap"}, policy="layer_barriers"),
                  10_000, trace=True)
    # D2H [1, 2] with f2; entering b2 (t=2) prefetches b1's m: [2, 3]; b1 [3, 4]: T = T*.
    assert lane(ev, "d2h")["m"] == (approx(1.0), approx(2.0))
    assert lane(ev, "h2d")["m"] == (approx(2.0), approx(3.0))
    assert ev.step_time_s == approx(4.0) and ev.stall_bwd_s == 0


def _combinations(policy):
    """Every combination of `policy`'s enumerated runtime parameters (slackopt.plan.
    RUNTIME_PARAMS; a list-valued one, on_demand's heavy_kinds, keeps its default)."""
    choices = {k: v for k, v in RUNTIME_PARAMS[policy].items() if isinstance(v, tuple)}
    return [dict(zip(choices, vals, strict=True))
            for vals in itertools.product(*choices.values())]


LB_PARAMS = _combinations("layer_barriers")


@pytest.mark.parametrize("params", LB_PARAMS)
def test_output_of_the_last_forward_layer_is_offloaded_before_the_backward_pass(params):
    # The audit's minimal crash (lb_crash1): t (100 B) is made by f1, the only forward
    # layer, and read only by b0; b1 (layer 1) holds no swapped read. The layer after f1 is
    # a backward one, so t is offloaded with f1's own layer: its D2H is queued when f1
    # ends. (Offloaded with b1 instead, its D2H and b0's prefetch sat behind the same
    # barrier, counted twice and released once: "internal: task 'b0' waits for a copy
    # that is not queued" at every M.)
    inst = mk([("f1", 1, "gemm", 1)], [("b1", 1, "gemm", 1), ("b0", 1, "gemm", 0)],
              [("t", 100, "f1", ["b0"])])
    plan = Plan.from_mapping(inst, {"t": "swap"}, policy="layer_barriers",
                             runtime_params=params)
    ev = simulate(inst, plan, 100, trace=True)
    # f1 [0, 1] allocates t (used 100 = M). D2H t [1, 2]; b1 waits for it (stall 1) and at
    # 2 t's device copy is freed (used 0). Entering b1 at 2 issues the next offloaded
    # layer's prefetch (b0's t; with "adjacent" too, b0 being the layer right after b1):
    # when_fits admits it beside the next tasks' allocations (0 B), at_issue allocates its
    # 100 B at once (0 + 100 <= 100): H2D [2, 3] beside b1 [2, 3]. b0's layer waits for
    # the prefetch, which ends at 3: b0 [3, 4]. T = 4 = T* + 1, the stall before b1.
    assert lane(ev, "compute") == {"f1": (0.0, 1.0), "b1": (approx(2.0), approx(3.0)),
                                   "b0": (approx(3.0), approx(4.0))}
    assert lane(ev, "d2h") == {"t": (approx(1.0), approx(2.0))}
    assert lane(ev, "h2d") == {"t": (approx(2.0), approx(3.0))}
    assert ev.feasible and ev.step_time_s == approx(4.0)
    assert ev.stall_fwd_s == 0 and ev.stall_bwd_s == approx(1.0) and ev.h2d_stall_s == {}
    assert ev.d2h_bytes == ev.h2d_bytes == 100 and ev.peak_bytes == 100
    # One byte less and f1 cannot allocate t: infeasible with a reason, not an error.
    ev = simulate(inst, plan, 99)
    assert not ev.feasible and "task 'f1' cannot allocate 100 B" in ev.failure


def test_first_backward_layer_does_not_claim_a_copy_still_going_out():
    # t (100 B) made by f1, read only by b1, the first backward layer. Its D2H is queued
    # when f1 ends, [1, 2]; b1 waits at the forward/backward barrier (no lagging device
    # copy in the backward pass: offloads end within the forward pass), t's device copy is
    # freed at 2, entering b1 issues its own prefetch: H2D [2, 3]; b1 waits for its input:
    # [3, 4]; b0 [4, 5]. T = 5 = T* + 2. (Offloaded with b1, as before the fix, b1 claimed
    # the device copy at 1 and its claim opened the D2H's barrier: T = 3.)
    inst = mk([("f1", 1, "gemm", 1)], [("b1", 1, "gemm", 1), ("b0", 1, "gemm", 0)],
              [("t", 100, "f1", ["b1"])])
    ev = simulate(inst, Plan.from_mapping(inst, {"t": "swap"}, policy="layer_barriers"),
                  100, trace=True)
    assert lane(ev, "d2h") == {"t": (approx(1.0), approx(2.0))}
    assert lane(ev, "h2d") == {"t": (approx(2.0), approx(3.0))}
    assert lane(ev, "compute")["b1"] == (approx(3.0), approx(4.0))
    assert ev.step_time_s == approx(5.0) and ev.stall_bwd_s == approx(2.0)
    assert ev.h2d_stall_s == {"t": approx(1.0)}


@pytest.mark.parametrize("lookahead, h2d_start", [("next_offloaded", 4.0), ("adjacent", 5.0)])
def test_prefetch_lookahead(lookahead, h2d_start):
    # a (100 B) read only by b1; b2 reads nothing swapped. W = 50 B/s (2 s per copy).
    inst = mk([("f1", 1, "k1"), ("f2", 1, "k2"), ("f3", 1, "k3")],
              [("b3", 1, "k3"), ("b2", 1, "k2"), ("b1", 1, "k1")],
              [("a", 100, "f1", ["b1"])], W=50.0)
    plan = Plan.from_mapping(inst, {"a": "swap"}, policy="layer_barriers",
                             runtime_params={"lookahead": lookahead})
    ev = simulate(inst, plan, 10_000, trace=True)
    # a has no forward reader: its D2H runs with f2, [1, 3]; f3 waits: [3, 4].
    # next_offloaded: entering b3 (t=4) prefetches b1's a, however far: H2D [4, 6], and b2
    #   waits for it at the barrier: b2 [6, 7], b1 [7, 8].
    # adjacent: only entering b2 (t=5), the layer right before b1, prefetches a: H2D
    #   [5, 7]; b2 [5, 6]; b1 waits: [7, 8].
    assert lane(ev, "h2d")["a"] == (approx(h2d_start), approx(h2d_start + 2))
    assert ev.step_time_s == approx(8.0) and ev.stall_fwd_s == approx(1.0)
    assert ev.stall_bwd_s == approx(1.0)


def _issue_instance():
    # a (100 B) read only by b1; k (60 B) made by f2, kept, read by b2 (released at its end).
    return mk([("f1", 1, "k1"), ("f2", 1, "k2")], [("b2", 1, "k2"), ("b1", 1, "k1")],
              [("a", 100, "f1", ["b1"]), ("k", 60, "f2", ["b2"])])


def test_prefetch_when_fits_waits_for_memory():
    inst = _issue_instance()
    plan = Plan.from_mapping(inst, {"a": "swap"}, policy="layer_barriers")
    ev = simulate(inst, plan, 150, trace=True)
    # f1 [0, 1]. Entering f2's layer starts a's D2H [1, 2]; f2 needs k (60 B): 100 + 60 >
    # 150, so it waits for the D2H, which frees a at 2: f2 [2, 3] (forward stall 1).
    # Entering b2 at 3 issues a's prefetch: 60 + 100 > 150, held back while b2 runs [3, 4];
    # b2 releases k, b1 waits at the barrier, so the copy is admitted on used + size =
    # 100 <= 150: H2D [4, 5], b1 [5, 6] (backward stall 1). T = 6.
    assert lane(ev, "h2d")["a"] == (approx(4.0), approx(5.0))
    assert ev.feasible and ev.step_time_s == approx(6.0)
    assert ev.stall_fwd_s == approx(1.0) and ev.stall_bwd_s == approx(1.0)
    assert ev.peak_bytes == 100


def test_prefetch_at_issue_must_fit_when_issued():
    inst = _issue_instance()
    plan = Plan.from_mapping(inst, {"a": "swap"}, policy="layer_barriers",
                             runtime_params={"prefetch": "at_issue"})
    # With M = 200: D2H a [1, 2] beside f2 [1, 2] (a + k = 160 fit). Entering b2 at 2
    # allocates a's buffer at once (k 60 + 100 = 160): the copy runs [2, 3] beside b2
    # [2, 3], b1 [3, 4]: T = T* = 4.
    ev = simulate(inst, plan, 200, trace=True)
    assert lane(ev, "h2d")["a"] == (approx(2.0), approx(3.0)) and ev.step_time_s == approx(4.0)
    assert ev.peak_bytes == 160
    # With M = 150, f2 waits for a's D2H (as above) and runs [2, 3]; entering b2 at 3
    # needs 60 + 100 > 150 for the prefetch when it is issued: infeasible, 10 B short.
    ev = simulate(inst, plan, 150)
    assert not ev.feasible and "prefetch of 'a'" in ev.failure and "10 B short" in ev.failure


# ============================================================================ on_demand


def _on_demand(inst, **params):
    return Plan.from_mapping(inst, {"a": "swap", "b": "swap"}, policy="on_demand",
                             runtime_params=params)


def test_on_demand_lru_evicts_the_least_recently_used_and_waits_for_its_copy():
    inst = cache_instance()
    ev = simulate(inst, _on_demand(inst, eviction="lru"), 250, trace=True)
    # f1 [0,1], f2 [1,2], f3 [2,3] (reads a: a used at task 2, b last at task 1). f4 needs
    # c: 300 > 250, 50 B short: the LRU victim is b; its D2H [3, 4] runs while the compute
    # stream waits (forward stall 1); f4 [4, 5].
    # Backward: at the forward end the tasks up to the first heavy one (b2) get their
    # evicted inputs queued: b. b4 [5, 6] holds a + c: 300 > 250 leaves no room for b until
    # b4 releases c; b2 waits for it: H2D [6, 7] (backward stall 1), b2 [7, 8], b1 [8, 9].
    assert lane(ev, "d2h") == {"b": (approx(3.0), approx(4.0))}
    assert lane(ev, "h2d") == {"b": (approx(6.0), approx(7.0))}
    assert [e["name"] for e in ev.trace if e["lane"] == "evict"] == ["b"]
    assert ev.feasible and ev.step_time_s == approx(9.0) and ev.evictions == 1
    assert ev.stall_fwd_s == approx(1.0) and ev.stall_bwd_s == approx(1.0)
    # Peak: a + b, then a + c, then a + b again: 200 B (b leaves before c arrives).
    assert ev.d2h_bytes == ev.h2d_bytes == 100 and ev.peak_bytes == 200


def test_on_demand_belady_evicts_the_furthest_next_use():
    inst = cache_instance()
    ev = simulate(inst, _on_demand(inst, eviction="belady"), 250, trace=True)
    # At f4 the victim is a (next use b1, task 6; b's is b2, task 5): D2H a [3, 4], f4
    # [4, 5]. b4 [5, 6]. b2 is heavy: when it starts (t=6) the tasks up to the next heavy
    # one (b1) get a queued; b (100) + a fits: H2D a [6, 7] beside b2 [6, 7]; b1 [7, 8].
    assert lane(ev, "d2h") == {"a": (approx(3.0), approx(4.0))}
    assert lane(ev, "h2d") == {"a": (approx(6.0), approx(7.0))}
    assert ev.step_time_s == approx(8.0) and ev.stall_fwd_s == approx(1.0)
    assert ev.stall_bwd_s == 0


def test_on_demand_early_offload_frees_victims_at_once_and_prefetches_asap():
    inst = cache_instance()
    ev = simulate(inst, _on_demand(inst, eviction="belady", offload="early", prefetch="asap"),
                  250, trace=True)
    # Early offload: D2H a [1, 2] and b [2, 3] as they are produced; both stay on the device.
    # f4 at 3 needs 50 B more: the victim a has its host copy, so it is freed at once: no
    # stall, f4 [3, 4]. a is queued at once (asap) but H2D waits for the backward pass and
    # for room: b4 [4, 5] holds b + c; at 5 c is released, b2 [5, 6] starts and a comes in
    # beside it [5, 6]; b1 [6, 7]: T = T* = 7.
    assert lane(ev, "d2h") == {"a": (approx(1.0), approx(2.0)), "b": (approx(2.0), approx(3.0))}
    assert lane(ev, "h2d") == {"a": (approx(5.0), approx(6.0))}
    assert ev.step_time_s == approx(7.0) and ev.stall_fwd_s == ev.stall_bwd_s == 0
    assert ev.evictions == 1 and ev.d2h_bytes == 200 and ev.h2d_bytes == 100


def test_on_demand_infeasible_when_no_victim_covers_the_shortfall():
    inst = cache_instance()
    # Only b is swappable. At M = 150, f2 already needs a + b = 200: nothing can be evicted
    # (a is still read by f3, b is being produced): infeasible, 50 B short.
    plan = Plan.from_mapping(inst, {"b": "swap"}, policy="on_demand")
    ev = simulate(inst, plan, 150)
    assert not ev.feasible and "task 'f2' cannot allocate 100 B" in ev.failure
    assert "50 B short" in ev.failure


def test_on_demand_evicts_in_the_backward_pass_and_fetches_on_demand():
    # a (100 B) made by f1, read by b1; z (50 B) made by f2, read by b2, whose 100 B
    # workspace needs room. Slow link: 10 B/s. M = 150.
    inst = mk([("f1", 1, "gemm"), ("f2", 1, "other")],
              [("b2", 1, "gemm", -1, 100), ("b1", 1, "gemm")],
              [("a", 100, "f1", ["b1"]), ("z", 50, "f2", ["b2"])], W=10.0)
    ev = simulate(inst, Plan.from_mapping(inst, {"a": "swap"}, policy="on_demand"), 150,
                  trace=True)
    # f1 [0,1], f2 [1,2] (a + z = 150). b2 at 2 needs 100 B more: a is the only victim; its
    # D2H takes 10 s [2, 12] and b2 waits; b2 [12, 13]. b2 is heavy: when it starts, a
    # (needed by b1) is queued, but a + the workspace + z leave no room until b2 ends and
    # releases both; b1 waits for a: H2D [13, 23], b1 [23, 24]. T = 24, backward stalls 20.
    assert lane(ev, "d2h")["a"] == (approx(2.0), approx(12.0))
    assert lane(ev, "h2d")["a"] == (approx(13.0), approx(23.0))
    assert ev.step_time_s == approx(24.0) and ev.stall_bwd_s == approx(20.0)
    assert ev.evictions == 1 and ev.peak_bytes == 150


def test_runtime_params_are_checked_and_round_trip(tmp_path):
    inst = cache_instance()
    with pytest.raises(PlanError, match="eviction"):
        _on_demand(inst, eviction="fifo")
    with pytest.raises(PlanError, match="unknown for policy 'barrier_free'"):
        Plan.from_mapping(inst, {}, runtime_params={"eviction": "lru"})
    with pytest.raises(PlanError, match="list of op kinds"):
        _on_demand(inst, heavy_kinds="gemm")
    plan = _on_demand(inst, eviction="belady", heavy_kinds=["gemm", "conv"])
    assert plan.resolved_runtime_params() == {
        "eviction": "belady", "offload": "on_eviction", "prefetch": "next_heavy",
        "heavy_kinds": ("gemm", "conv")}
    path = save_plan(plan, tmp_path / "p.json", inst)
    back = load_plan(path, inst)
    assert back == plan and back.runtime_params == plan.runtime_params
    assert back != plan.with_policy("on_demand")          # parameters are part of the plan
    # A barrier-free plan's file has no runtime_params field (files stay as they were).
    assert "runtime_params" not in Plan.keep_all(inst).to_dict()


def test_compiled_engine_is_barrier_free_only():
    inst = cache_instance()
    with pytest.raises(ValueError, match="barrier_free only"):
        simulate(inst, _on_demand(inst), 1000, engine="compiled")
    # "auto" picks the reference loop for the other runtimes, with or without a trace.
    assert simulate(inst, _on_demand(inst), 1000).to_dict() == simulate(
        inst, _on_demand(inst), 1000, trace=True).to_dict()


RUNTIME_SETTINGS = [
    ("layer_barriers", {}), ("layer_barriers", {"prefetch": "at_issue"}),
    ("layer_barriers", {"lookahead": "adjacent"}), ("on_demand", {}),
    ("on_demand", {"eviction": "belady"}), ("on_demand", {"offload": "early"}),
    ("on_demand", {"prefetch": "asap"}),
    ("on_demand", {"eviction": "belady", "offload": "early", "prefetch": "asap"})]


@pytest.mark.parametrize("workload, params, seed", [
    ("gpt2-xl", {"layers": 2}, 3), ("bert-large", {"layers": 2}, 11),
    ("vgg16", {"batch": 4}, 5), ("chain", {"n_layers": 8}, 7)])
def test_invariants_on_random_plans(workload, params, seed):
    # docs/model.md invariants under every runtime setting: keep-all at M = P is ideal;
    # peak <= M; T = T* + stalls + recompute; deterministic; an infeasible plan says why.
    # (bert-large, seed 11 once left a barrier waiting behind an ungated prefetch.)
    import numpy as np

    from slackopt.workloads import make

    inst = make(workload, **params)
    rng = np.random.default_rng(seed)
    plans = []
    for _ in range(15):
        dec = rng.choice(3, size=inst.n_saved, p=rng.dirichlet(np.ones(3))).astype(np.int8)
        dec[(dec == 2) & ~np.isfinite(inst.c)] = 1
        plans.append((dec, int(inst.P * rng.uniform(0.05, 1.1))))
    for policy, prm in RUNTIME_SETTINGS:
        ev = simulate(inst, Plan.keep_all(inst).with_policy(policy, prm), inst.P)
        assert ev.feasible and ev.step_time_s == approx(inst.ideal_time_s)
        assert ev.peak_bytes == inst.P
        for dec, M in plans:
            plan = Plan(dec, inst.saved_names, policy, prm)
            ev = simulate(inst, plan, M)
            assert ev.to_dict() == simulate(inst, plan, M).to_dict()
            if ev.feasible:
                assert ev.peak_bytes <= M
                assert ev.step_time_s == pytest.approx(
                    ev.ideal_time_s + ev.stall_fwd_s + ev.stall_bwd_s + ev.recompute_s,
                    rel=1e-9)
                assert min(ev.stall_fwd_s, ev.stall_bwd_s, ev.recompute_s) >= 0
            else:
                assert ev.failure and "short" in ev.failure


# ============================================================================ properties
INFEASIBLE = ("B short", "host pinned-memory limit")
"""The documented infeasible outcomes: an allocation (a task's, an H2D buffer's, an
at_issue prefetch's) that does not fit M, or a D2H over the host pinned-memory limit."""


@st.composite
def _runtime_cases(draw):
    """An instance of tests/strategies.py (lowered: one saved unit per storage, what the
    runtimes plan), random decisions (recomp only where c is finite) and a budget from the
    model floor to P, or anywhere in [0, 1.3 P]."""
    inst = draw(instances(max_saved=5, max_ops=12))
    low = inst.lowered
    dec = [draw(st.sampled_from([0, 1, 2] if np.isfinite(low.c[k]) else [0, 1]))
           for k in range(low.n_saved)]
    M = draw(st.one_of(budgets(inst), st.integers(0, int(low.P * 1.3) + 1)))
    return low, np.array(dec, dtype=np.int8), M


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["layer_barriers", "on_demand"])
def test_every_plan_simulates_under_every_runtime_setting(policy):
    # Every valid instance and plan runs to an answer under each parameter combination:
    # feasible (peak <= M, T = T* + stalls + recompute) or infeasible with a documented
    # reason; never an internal error. (layer_barriers raised "internal: ... waits for a
    # copy that is not queued" on ~5% of these draws when the last forward layer's output
    # was swapped.)
    # No shrink phase: shrinking these instance structures ran for over ten minutes on a
    # failure; the first failing case is reported whole instead (note() below).
    @settings(max_examples=120, deadline=None, database=None, derandomize=True,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(_runtime_cases())
    def check(case):
        inst, dec, M = case
        note(f"instance {json.dumps(instance_to_dict(inst))}")
        note(f"decisions {dec.tolist()} (saved {list(inst.saved_names)}), M = {M} B")
        for prm in _combinations(policy):
            note(f"runtime_params {prm}")
            ev = simulate(inst, Plan(dec, inst.saved_names, policy, prm), M)
            if not ev.feasible:
                assert any(w in ev.failure for w in INFEASIBLE), ev.failure
                continue
            assert ev.peak_bytes <= M
            assert min(ev.stall_fwd_s, ev.stall_bwd_s, ev.recompute_s) >= 0
            assert ev.step_time_s == pytest.approx(
                ev.ideal_time_s + ev.stall_fwd_s + ev.stall_bwd_s + ev.recompute_s,
                rel=1e-9, abs=1e-12)

    check()
