"""The classic baselines (vDNN, SuperNeurons, SwapAdvisor, sqrt checkpointing, recompute
all) and the SlackSwap ablations: plans, hand-computed timelines, registration.

Paper sections 2.1, 4.1 and 4.4; every expected number is worked out in a comment.
Instances: W = 100 B/s, no copy latency, every op 1 s unless stated.
"""

from __future__ import annotations

import numpy as np
import pytest

from slackopt import get_solver, simulate, solve
from slackopt.plan import KEEP, RECOMP, SWAP, Plan
from slackopt.solvers.baselines import (
    RecomputeAll,
    SqrtCheckpoint,
    checkpoint_blocks,
    checkpoint_plan,
    sqrt_checkpoint_plan,
)
from slackopt.solvers.slackswap import SlackSwap
from slackopt.solvers.slackswap_ablations import (
    SlackSwapBarriers,
    SlackSwapRecomputeOnly,
    SlackSwapSwapFirst,
)
from slackopt.solvers.superneurons import SuperNeurons, superneurons_plan
from slackopt.solvers.swapadvisor import SwapAdvisor, belady_victims, swapadvisor_plan
from slackopt.solvers.vdnn import VDNN, vdnn_plan
from tests.helpers import cache_instance, lane, mk

approx = lambda x: pytest.approx(x, rel=1e-12, abs=1e-12)  # noqa: E731


@pytest.fixture(scope="module")
def tiny():
    from slackopt.workloads import make

    return make("tiny")


def _decisions(inst, plan):
    return dict(zip(inst.saved_names, plan.decisions.tolist(), strict=True))


@pytest.mark.parametrize("name, cls", [
    ("vdnn", VDNN), ("superneurons", SuperNeurons), ("swapadvisor", SwapAdvisor),
    ("sqrt-checkpoint", SqrtCheckpoint), ("recompute-all", RecomputeAll),
    ("slackswap-swap-first", SlackSwapSwapFirst),
    ("slackswap-recompute-only", SlackSwapRecomputeOnly),
    ("slackswap-barriers", SlackSwapBarriers)])
def test_registered(name, cls):
    s = get_solver(name)
    assert isinstance(s, cls) and s.name == name


# ============================================================================ vDNN
def _vdnn_instance(W=100.0):
    # f1 (conv) makes a (100 B), read by f2 (conv) and b2; f2 makes b (100 B), read by f3
    # (relu) and b3. vDNNconv offloads a (a convolution's input); vDNNall a and b.
    return mk([("f1", 1, "conv"), ("f2", 1, "conv"), ("f3", 1, "relu")],
              [("b3", 1, "relu"), ("b2", 1, "conv"), ("b1", 1, "conv")],
              [("a", 100, "f1", ["f2", "b2"]), ("b", 100, "f2", ["f3", "b3"])], W=W)


def test_vdnn_configurations():
    inst = _vdnn_instance()
    assert _decisions(inst, vdnn_plan(inst, "none")) == {"a": KEEP, "b": KEEP}
    assert _decisions(inst, vdnn_plan(inst, "conv")) == {"a": SWAP, "b": KEEP}
    assert _decisions(inst, vdnn_plan(inst, "all")) == {"a": SWAP, "b": SWAP}
    pl = vdnn_plan(inst, "conv")
    assert pl.policy == "layer_barriers" and pl.runtime_params == {"prefetch": "at_issue"}


def test_vdnn_conv_timeline_on_a_slow_link():
    inst = _vdnn_instance(W=50.0)
    ev = simulate(inst, vdnn_plan(inst, "conv"), 1000, trace=True)
    # f1 [0,1]; a's D2H starts with f2: [1, 3] at 50 B/s; f2 [1,2]; f3 waits for it: [3, 4]
    # (forward stall 1). Entering b3 (t=4) prefetches the next offloaded layer (b2's a):
    # [4, 6]; b3 [4, 5]; b2 waits at the barrier: [6, 7]; b1 [7, 8]. T = 8 = T* + 2.
    assert lane(ev, "d2h")["a"] == (approx(1.0), approx(3.0))
    assert lane(ev, "h2d")["a"] == (approx(4.0), approx(6.0))
    assert ev.step_time_s == approx(8.0)
    assert ev.stall_fwd_s == approx(1.0) and ev.stall_bwd_s == approx(1.0)


def test_vdnn_dynamic_policy_picks_the_first_configuration_that_fits():
    inst = _vdnn_instance()
    # Keep-all peak: a + b = 200 (f2 to f3, and b3). M = 200: no offload.
    res = VDNN().solve(inst, 200)
    assert res.status == "feasible" and res.info["config"] == "none"
    # M = 150: keep-all does not fit. vDNNconv: f1 [0,1]; a's D2H [1,2] with f2, which
    # needs b: 200 > 150, so f2 waits until a leaves at 2; f2 [2,3], f3 [3,4] (b only).
    # Backward: entering b3 (t=4) allocates a's prefetch at once: b + a = 200 > 150:
    # vDNNconv is rejected. vDNNall: b's D2H runs [3,4] with f3 and b leaves; entering b3
    # (t=4) prefetches b for b3 itself and a (b2, next offloaded layer): 200 > 150 again.
    res = VDNN().solve(inst, 150)
    assert res.status == "infeasible" and res.info["tried"] == {
        "none": False, "conv": False, "all": False}
    # The smallest budget some configuration fits is 200 (keep-all), to within 0.5% of P.
    assert res.info["min_budget_bytes"] == 200


def test_vdnn_on_tiny_transformer_offloads_heavy_layer_inputs(tiny):
    d = _decisions(tiny, vdnn_plan(tiny, "conv"))
    swapped = {n.split(".", 1)[-1] for n, v in d.items() if v == SWAP}
    # Inputs of the GEMMs and of attention: LN outputs, Q/K/V, attention output, GeLU
    # output, final-LN output; not block inputs, residuals, GeLU inputs or masks.
    assert swapped == {"ln1_out", "qkv_out", "attn_out", "ln2_out", "gelu_out", "lnf_out"}
    res = solve(tiny, "vdnn", 0.5)
    assert res.status == "feasible" and res.info["config"] in ("conv", "all")
    assert res.evaluation.feasible and res.evaluation.throughput < 1.0


# ============================================================================ SuperNeurons
def _superneurons_instance():
    # f1, f2 GEMMs make a and b (100 B); f3 (GeLU) reads b and makes g (100 B), rebuilt by
    # re-running f3 from b. b3 (GeLU bwd) reads g, b2 and b1 (GEMM bwd) read b and a.
    return mk([("f1", 1, "gemm"), ("f2", 1, "gemm"), ("f3", 1, "gelu")],
              [("b3", 1, "gelu"), ("b2", 1, "gemm"), ("b1", 1, "gemm")],
              [("a", 100, "f1", ["b1"]), ("b", 100, "f2", ["f3", "b2"]),
               ("g", 100, "f3", ["b3"], ["f3"], ["b"])])


def test_superneurons_plan_and_timeline():
    inst = _superneurons_instance()
    pl = superneurons_plan(inst)
    assert _decisions(inst, pl) == {"a": SWAP, "b": SWAP, "g": RECOMP}
    assert pl.policy == "on_demand" and pl.runtime_params["eviction"] == "lru"
    ev = simulate(inst, pl, 250, trace=True)
    # f1 [0,1], f2 [1,2] (a + b = 200). f3 needs g: 300 > 250; the LRU swappable tensor
    # that f3 does not read is a: D2H [2, 3], f3 waits; f3 [3, 4]; g is dropped after f3
    # (recomputed). Backward: rebuild g from b [4, 5] (recompute 1 s), b3 [5, 6]. b2 is
    # heavy: when it starts (t=6) a, needed by the next heavy task b1, is queued; b + a fits
    # 250: H2D [6, 7] beside b2 [6, 7]; b1 [7, 8]. T = 8 = T* + 1 stall + 1 recompute.
    assert lane(ev, "d2h") == {"a": (approx(2.0), approx(3.0))}
    assert lane(ev, "h2d") == {"a": (approx(6.0), approx(7.0))}
    assert lane(ev, "compute")["rebuild:g"] == (approx(4.0), approx(5.0))
    assert ev.step_time_s == approx(8.0) and ev.stall_fwd_s == approx(1.0)
    assert ev.recompute_s == approx(1.0) and ev.stall_bwd_s == 0 and ev.evictions == 1
    res = SuperNeurons().solve(inst, 250)
    assert res.status == "feasible" and res.info["evictions"] == 1


def test_superneurons_categories_on_real_workloads(tiny):
    from slackopt.workloads import make

    d = _decisions(tiny, superneurons_plan(tiny))
    kinds = {}
    for n, v in d.items():
        kinds.setdefault(n.split(".")[-1], set()).add(v)
    assert kinds["ln1_out"] == kinds["ln2_out"] == kinds["gelu_out"] == {RECOMP}
    assert kinds["mask"] == {RECOMP}
    assert kinds["qkv_out"] == kinds["attn_out"] == kinds["fc1_out"] == {SWAP}
    assert kinds["x"] == kinds["mid"] == kinds["rng"] == {KEEP}
    # VGG: ReLU outputs are rebuilt by re-running the convolution: swappable, not recomputed.
    vgg = make("vgg16", batch=2)
    dv = _decisions(vgg, superneurons_plan(vgg))
    assert dv["relu1_1_out"] == SWAP and dv["pool1_out"] == RECOMP and dv["image"] == KEEP


# ============================================================================ SwapAdvisor
def test_swapadvisor_belady_victims_and_timeline():
    inst = cache_instance()
    # Planned schedule at M = 250: f1 (a), f2 (b), f3 reads a, f4 makes c: 300 > 250. The
    # furthest next use among a (b1, op 6) and b (b2, op 5) is a's: evict a. Backward: b4
    # releases c, so a fits again at b1.
    assert belady_victims(inst, 250).tolist() == [inst.saved_position("a")]
    assert belady_victims(inst, 300).tolist() == []
    assert belady_victims(inst, 99) is None      # f2 alone holds a + b with a still read
    pl = swapadvisor_plan(inst, 250)
    assert _decisions(inst, pl) == {"a": SWAP, "b": KEEP, "c": KEEP}
    ev = simulate(inst, pl, 250, trace=True)
    # a is copied out as soon as it is made: D2H [1, 2]; at f4 (t=3) it is dropped at
    # once (no stall); it comes back as early as memory allows: b4 [4,5] holds b + c, so
    # after c's release at 5: H2D [5, 6] beside b2; b1 [6, 7]. T = T* = 7.
    assert lane(ev, "d2h") == {"a": (approx(1.0), approx(2.0))}
    assert lane(ev, "h2d") == {"a": (approx(5.0), approx(6.0))}
    assert ev.step_time_s == approx(7.0) and ev.stall_fwd_s == ev.stall_bwd_s == 0
    res = SwapAdvisor().solve(inst, 250)
    assert res.status == "feasible" and res.info["swapped_bytes"] == 100


def test_swapadvisor_infeasible_reports_min_budget():
    inst = cache_instance()
    res = SwapAdvisor().solve(inst, 150)
    # f2 must hold a (read later by f3) and b: 200 B; below that nothing helps.
    assert res.status == "infeasible"
    assert 200 <= res.info["min_budget_bytes"] <= 200 + int(np.ceil(0.005 * inst.P))


# ============================================================================ checkpointing
def _chain4():
    # x (input, c = inf) -> a0 -> a1 -> a2 -> a3, each a_i (100 B) made by f_i (block i),
    # rebuilt by re-running f_i from the previous one; b_i reads a_i.
    fwd = [("in", 0, "input")] + [(f"f{i}", 1, "gemm", i) for i in range(4)]
    bwd = [(f"b{i}", 1, "gemm", i) for i in reversed(range(4))]
    ts = [("x", 10, "in", ["f0", "b0"])]
    prev = "x"
    for i in range(4):
        ts.append((f"a{i}", 100, f"f{i}", ([f"f{i + 1}"] if i < 3 else []) + [f"b{i}"],
                   [f"f{i}"], [prev]))
        prev = f"a{i}"
    return mk(fwd, bwd, ts)


def test_sqrt_checkpoint_keeps_one_output_per_segment():
    inst = _chain4()
    assert checkpoint_blocks(inst) == [0, 1, 2, 3]
    # L = 4 blocks, segments of ceil(sqrt(4)) = 2: a1 and a3 are checkpoints.
    pl = sqrt_checkpoint_plan(inst)
    assert _decisions(inst, pl) == {"x": KEEP, "a0": RECOMP, "a1": KEEP, "a2": RECOMP,
                                    "a3": KEEP}
    ev = simulate(inst, pl, 10_000, trace=True)
    # Backward: b3 [4,5]; rebuild a2 from a1 [5,6]; b2 [6,7]; b1 [7,8]; rebuild a0 from x
    # [8,9]; b0 [9,10]. T = T* + 2.
    comp = lane(ev, "compute")
    assert comp["rebuild:a2"] == (approx(5.0), approx(6.0))
    assert comp["rebuild:a0"] == (approx(8.0), approx(9.0))
    assert ev.step_time_s == approx(10.0) and ev.recompute_s == approx(2.0)
    res = SqrtCheckpoint().solve(inst, 10_000)
    assert res.status == "optimal" and res.info["segment"] == 2  # M >= P: keep-all, T*
    # The plan never swaps, so it fits iff M covers its own peak, reported otherwise.
    peak = ev.peak_bytes
    bad = SqrtCheckpoint().solve(inst, peak - 1)
    assert bad.status == "infeasible" and bad.info["min_budget_bytes"] == peak


def test_sqrt_checkpoint_equals_block_checkpointing_on_transformers(tiny):
    # Block inputs cannot be rebuilt (c = inf), so the segments collapse to single blocks.
    L = len(checkpoint_blocks(tiny))
    assert sqrt_checkpoint_plan(tiny) == checkpoint_plan(tiny, L)


def test_recompute_all_rebuilds_the_whole_chain():
    inst = _chain4()
    pl = Plan.uniform(inst, RECOMP)
    assert _decisions(inst, pl) == {"x": KEEP, "a0": RECOMP, "a1": RECOMP, "a2": RECOMP,
                                    "a3": RECOMP}
    ev = simulate(inst, pl, 10_000, trace=True)
    # b3 needs a3, whose recipe needs a2, a1, a0: rebuilt in that order [4, 8]; each stays
    # until its last reader, so b2, b1, b0 need no rebuild. T = T* + 4.
    comp = lane(ev, "compute")
    assert [comp[f"rebuild:a{i}"][0] for i in range(4)] == [approx(4.0 + i) for i in range(4)]
    assert ev.step_time_s == approx(12.0) and ev.recompute_s == approx(4.0)
    res = RecomputeAll().solve(inst, 10_000)
    assert res.status == "feasible" and res.plan == pl


# ============================================================================ ablations
def test_ablation_variants_are_slackswap_with_one_idea_removed(tiny):
    M = int(0.3 * tiny.P)
    # params are the variant's own keywords (issue 15: no swap_order its constructor
    # rejects); the idea removed is a fixed attribute
    sf = SlackSwapSwapFirst()
    assert sf.params == {"g": 0.02, "max_rounds": 6, "min_budget_search": True}
    assert sf.swap_order == "production"
    assert SlackSwapRecomputeOnly().use_link is False
    ro = solve(tiny, "slackswap-recompute-only", M)
    assert ro.params == sf.params
    assert ro.plan is not None and not (ro.plan.decisions == SWAP).any()
    ss = SlackSwap().solve(tiny, M)
    br = solve(tiny, "slackswap-barriers", M)
    assert br.plan.policy == "layer_barriers"
    assert np.array_equal(br.plan.decisions, ss.plan.decisions)
    # Same decisions, barriers added: never faster than the barrier-free runtime.
    if br.evaluation.feasible:
        assert br.evaluation.step_time_s >= simulate(tiny, ss.plan, M).step_time_s - 1e-12


def test_infeasible_answers_carry_min_budget(tiny):
    M = int(0.02 * tiny.P)
    for name in ("vdnn", "superneurons", "swapadvisor", "sqrt-checkpoint", "recompute-all",
                 "slackswap-barriers"):
        res = solve(tiny, name, M)
        assert res.status == "infeasible", name
        mb = res.info["min_budget_bytes"]
        assert mb is None or M < mb <= tiny.P * 1.5, name
        if mb is not None and name not in ("sqrt-checkpoint", "recompute-all"):
            assert solve(tiny, name, mb).status == "feasible", name
