"""Hand-computed timelines, one per rule of docs/model.md.

Every expected number below is worked out by hand in the comment beside it.
"""

from __future__ import annotations

import numpy as np
import pytest

from slackopt import Plan, simulate
from slackopt.errors import BudgetError, PlanError
from slackopt.simulate import build_tasks
from tests.helpers import build, lane

approx = lambda x: pytest.approx(x, rel=1e-12, abs=1e-12)  # noqa: E731


def test_keep_all_at_peak_is_ideal():
    inst = build([("f1", 1), ("f2", 1)], [("b2", 1), ("b1", 1)],
                 [("a", 100, "f1", ["f2", "b1"], None), ("b", 50, "f2", ["b2"], None),
                  ("g", 10, "b2", ["b1"], None)])
    # Peak during b2: a + b + g = 160.
    assert inst.P == 160
    ev = simulate(inst, Plan.keep_all(inst), inst.P)
    assert ev.feasible and ev.step_time_s == 4.0 and ev.throughput == 1.0
    assert ev.peak_bytes == 160 and ev.stall_fwd_s == ev.stall_bwd_s == ev.recompute_s == 0
    assert ev.d2h_bytes == ev.h2d_bytes == 0


def test_offload_fifo_and_copy_latency():
    # W = 100 B/s, latency 0.1 s. a (100 B) produced at t=1: D2H 1.0 -> 1.1 latency -> 2.1.
    # b (50 B) produced at t=2, engine busy until 2.1: 2.1 -> 2.2 -> 2.7 (FIFO).
    # Forward ends at 3. H2D in need order: b (b2) 3.0 -> 3.1 -> 3.6; a (b1) 3.6 -> 3.7 -> 4.7.
    # Compute: b3 [3,4], b2 [4,5] (b ready 3.6), b1 [5,6] (a ready 4.7): no stall.
    inst = build([("f1", 1), ("f2", 1), ("f3", 1)], [("b3", 1), ("b2", 1), ("b1", 1)],
                 [("a", 100, "f1", ["b1"], None), ("b", 50, "f2", ["b2"], None)], lat=0.1)
    plan = Plan.from_mapping(inst, {"a": "swap", "b": "swap"})
    ev = simulate(inst, plan, 10_000, trace=True)
    d2h, h2d = lane(ev, "d2h"), lane(ev, "h2d")
    assert d2h["a"] == (approx(1.0), approx(2.1))
    assert d2h["b"] == (approx(2.1), approx(2.7))
    assert h2d["b"] == (approx(3.0), approx(3.6))
    assert h2d["a"] == (approx(3.6), approx(4.7))
    assert ev.step_time_s == approx(6.0) and ev.stall_bwd_s == 0 and ev.stall_fwd_s == 0
    assert ev.d2h_bytes == 150 and ev.h2d_bytes == 150
    # Device copy of a is freed at its D2H end (2.1): peak is a + b = 150 during [2, 2.1].
    assert ev.peak_bytes == 150


def test_duplex_slowdown_includes_latency_phase_and_deadline_stall():
    # W = 100 B/s, latency 0.05 s, duplex 0.5 (50 B/s each while both directions copy).
    # f1 [0,1] makes a (10 B); f2 [1,1.1] makes b (100 B); f3 [1.1,2.1].
    # D2H a: 1.0 -> 1.05 -> 1.15. D2H b: queued 1.1, starts 1.15 -> 1.2, alone at 100 B/s.
    # Forward ends 2.1: b has moved 90 B. H2D a starts 2.1 (latency to 2.15): b runs at
    # 50 B/s during a's latency (2.5 B), remaining 7.5 B at 50 B/s -> b's D2H ends 2.3;
    # a's H2D moved 7.5 B by 2.3, last 2.5 B at 100 B/s -> 2.325.
    # H2D b: 2.325 -> 2.375 -> 3.375. bA waits for a: [2.325, 3.325], stall 0.225;
    # bB waits for b: [3.375, 4.375], stall 0.05. T* = 4.1, T = 4.375.
    inst = build([("f1", 1), ("f2", 0.1), ("f3", 1)], [("bA", 1), ("bB", 1)],
                 [("a", 10, "f1", ["bA"], None), ("b", 100, "f2", ["bB"], None)],
                 lat=0.05, duplex=0.5)
    ev = simulate(inst, Plan.from_mapping(inst, {"a": "swap", "b": "swap"}), 10_000,
                  trace=True)
    d2h, h2d = lane(ev, "d2h"), lane(ev, "h2d")
    assert d2h["b"][1] == approx(2.3)
    assert h2d["a"] == (approx(2.1), approx(2.325))
    assert h2d["b"] == (approx(2.325), approx(3.375))
    assert ev.step_time_s == approx(4.375)
    assert ev.stall_bwd_s == approx(0.275)
    assert ev.h2d_stall_s == {"a": approx(0.225), "b": approx(0.05)}
    assert ev.step_time_s == approx(inst.ideal_time_s + ev.stall_bwd_s)


def test_asymmetric_link_each_direction_at_its_own_bandwidth():
    # D2H 1 B/s, H2D 4 B/s, no latency, duplex 0.5 (each direction at half its own rate
    # while the other copies). f1 [0,1] makes a (4 B), f2 [1,2] makes b (4 B), f3 [2,5].
    # D2H a alone: [1, 5]. D2H b (queued at 2) starts at 5; the forward pass ends at 5 and
    # a's H2D starts then too: a at 0.5 * 4 = 2 B/s ends at 7; b at 0.5 * 1 B/s moves 1 B
    # by 7, its last 3 B alone at 1 B/s: ends at 10. bX [5,6]; bA waits for a: [7,8]
    # (stall 1); bZ [8,11]; b reaches the host at 10 and its H2D runs alone at 4 B/s:
    # [10, 11]; bB [11,12]. T* = 11, T = 12.
    # (A symmetric 1 B/s link would end a's H2D at 13; H2D at the D2H rate at 13 too.)
    from slackopt import Instance, Link

    src = build([("f1", 1), ("f2", 1), ("f3", 3)],
                [("bX", 1), ("bA", 1), ("bZ", 3), ("bB", 1)],
                [("a", 4, "f1", ["bA"], None), ("b", 4, "f2", ["bB"], None)])
    inst = Instance("asym", src.ops, src.tensors,
                    Link("asym", d2h_bytes_per_s=1.0, h2d_bytes_per_s=4.0,
                         duplex_factor=0.5, copy_latency_s=0.0))
    plan = Plan.from_mapping(inst, {"a": "swap", "b": "swap"})
    ev = simulate(inst, plan, 10_000, trace=True)
    d2h, h2d, comp = lane(ev, "d2h"), lane(ev, "h2d"), lane(ev, "compute")
    assert d2h == {"a": (approx(1.0), approx(5.0)), "b": (approx(5.0), approx(10.0))}
    assert h2d == {"a": (approx(5.0), approx(7.0)), "b": (approx(10.0), approx(11.0))}
    assert comp["bA"] == (approx(7.0), approx(8.0)) and comp["bB"] == (approx(11.0),
                                                                       approx(12.0))
    for e in (ev, simulate(inst, plan, 10_000, engine="compiled")):
        assert e.step_time_s == approx(12.0) and inst.ideal_time_s == approx(11.0)
        assert e.stall_bwd_s == approx(1.0) and e.h2d_stall_s == {"a": approx(1.0)}
        assert e.d2h_bytes == 8 and e.h2d_bytes == 8
    assert simulate(inst, plan, 10_000, engine="compiled").to_dict() == simulate(
        inst, plan, 10_000, engine="reference").to_dict()


def _admission_instance(b4_alloc=0):
    # f1 makes a (100 B, swapped); b1 makes g1 (50 B, read by b2); b2 makes g2 (50 B,
    # read by b3); b4 reads a and holds b4_alloc bytes of workspace.
    return build([("f1", 1), ("f2", 1)],
                 [("b1", 1), ("b2", 1), ("b3", 1), ("b4", 1, b4_alloc)],
                 [("a", 100, "f1", ["b4"], None), ("g1", 50, "b1", ["b2"], None),
                  ("g2", 50, "b2", ["b3"], None)])


@pytest.mark.parametrize("M, h2d_start", [(200, 2.0), (190, 4.0)])
def test_prefetch_admission_counts_next_three_tasks(M, h2d_start):
    # a's D2H [1,2]; forward ends 2; b1 runs [2,3] holding g1 (used 50).
    # M=200: 50 + 100 + next three (b2: 50, b3: 0, b4: 0) = 200 fits -> H2D at 2.
    # M=190: denied at 2; at 3 (b2 running, used 100): 100 + 100 + 0 > 190; at 4 b3 starts
    # with used 50: 50 + 100 = 150 fits -> H2D [4, 5]; b4 at 5: no stall.
    inst = _admission_instance()
    ev = simulate(inst, Plan.from_mapping(inst, {"a": "swap"}), M, trace=True)
    assert lane(ev, "h2d")["a"][0] == approx(h2d_start)
    assert ev.feasible and ev.step_time_s == approx(6.0) and ev.peak_bytes <= M


def test_prefetch_admitted_on_used_plus_size_when_compute_waits():
    # b4 holds 60 B workspace. M=160: at 4 (b3 running, used 50) 50+100+60 > 160, denied.
    # At 5 compute waits for a: used 0 + 100 <= 160 -> H2D [5,6]; b4 [6,7] with 160 B.
    inst = _admission_instance(b4_alloc=60)
    ev = simulate(inst, Plan.from_mapping(inst, {"a": "swap"}), 160, trace=True)
    assert lane(ev, "h2d")["a"] == (approx(5.0), approx(6.0))
    assert ev.feasible and ev.step_time_s == approx(7.0) and ev.stall_bwd_s == approx(1.0)
    assert ev.peak_bytes == 160
    # M=150: the copy is admitted at 5, then b4 needs 60 B with a (100) resident: infeasible.
    ev = simulate(inst, Plan.from_mapping(inst, {"a": "swap"}), 150)
    assert not ev.feasible
    assert "b4" in ev.failure and "10 B short" in ev.failure


def test_rebuild_chain_inputs_first():
    # x kept (c = inf); a = f1(x) recomp (c = 0.5); b = f2(a) recomp (c = 0.25); b read by
    # bB, a by bA after it. Backward tasks: rebuild a, rebuild b, bB, bA.
    # T = T* + 0.75. Memory: x 10 + a 20 + b 40; peak in forward during f2: 10 + 20 + 40.
    inst = build([("f0", 1), ("f1", 0.5), ("f2", 0.25)], [("bB", 1), ("bA", 1), ("bX", 1)],
                 [("x", 10, "f0", ["f1", "bX"], None),
                  ("a", 20, "f1", ["f2", "bA"], (["f1"], ["x"])),
                  ("b", 40, "f2", ["bB"], (["f2"], ["a"], 5))])
    plan = Plan.from_mapping(inst, {"a": "recomp", "b": "recomp"})
    task_op, task_t = build_tasks(inst, plan.decisions)
    names = [inst.ops[o].name if o >= 0 else "rebuild:" + inst.saved_names[t]
             for o, t in zip(task_op, task_t, strict=True)]
    assert names == ["f0", "f1", "f2", "rebuild:a", "rebuild:b", "bB", "bA", "bX"]
    ev = simulate(inst, plan, 1000, trace=True)
    assert ev.recompute_s == approx(0.75)
    assert ev.step_time_s == approx(inst.ideal_time_s + 0.75)
    comp = lane(ev, "compute")
    assert comp["rebuild:a"] == (approx(1.75), approx(2.25))
    assert comp["rebuild:b"] == (approx(2.25), approx(2.5))
    # After the forward pass only x is resident (10); rebuild b holds x + a + b + 5 B of
    # transient = 75: the peak.
    assert ev.peak_bytes == 75
    # With M = 74 the rebuild of b cannot allocate and nothing can be evicted.
    bad = simulate(inst, plan, 74)
    assert not bad.feasible and "rebuild:b" in bad.failure and "1 B short" in bad.failure


def test_eviction_fallback_refetches_by_next_use():
    # a (100 B) swapped; fetched at 2 (b1 running, next three tasks allocate 0).
    # b5 holds 150 B of workspace at t=6: 100 + 150 > 200, no copy in flight -> a (next use
    # b6) is evicted, b5 runs [6,7]. At 7 compute waits for a: H2D [7,8], b6 [8,9].
    inst = build([("f1", 1), ("f2", 1)],
                 [("b1", 1), ("b2", 1), ("b3", 1), ("b4", 1), ("b5", 1, 150), ("b6", 1)],
                 [("a", 100, "f1", ["b6"], None)])
    ev = simulate(inst, Plan.from_mapping(inst, {"a": "swap"}), 200, trace=True)
    assert ev.feasible and ev.evictions == 1
    assert ev.h2d_bytes == 200 and ev.d2h_bytes == 100
    assert ev.step_time_s == approx(9.0) and ev.stall_bwd_s == approx(1.0)
    assert [e["start_s"] for e in ev.trace if e["lane"] == "evict"] == [approx(6.0)]
    # Peak: b5's 150 B workspace alone (a was evicted to make room for it).
    assert ev.peak_bytes == 150


def test_infeasible_allocation_names_task_and_bytes_short():
    inst = build([("f1", 1), ("f2", 1)], [("b2", 1), ("b1", 1)],
                 [("a", 100, "f1", ["f2", "b1"], None), ("b", 50, "f2", ["b2"], None)])
    ev = simulate(inst, Plan.keep_all(inst), 120)
    assert not ev.feasible and ev.throughput == 0.0
    assert ev.failure.startswith("task 'f2' cannot allocate 50 B")
    assert "30 B short" in ev.failure
    assert ev.step_time_s == approx(1.0) and ev.peak_bytes == 100


def test_forward_stall_waits_for_offload():
    # a (100 B) swapped, D2H [1, 2] at 100 B/s. f2 does not read a and allocates 50 B;
    # M = 100: f2 waits until a's D2H frees it at 2: forward stall 1.
    inst = build([("f1", 1), ("f2", 1)], [("b2", 1), ("b1", 1)],
                 [("a", 100, "f1", ["b1"], None), ("b", 50, "f2", ["b2"], None)])
    ev = simulate(inst, Plan.from_mapping(inst, {"a": "swap"}), 100)
    assert ev.feasible and ev.stall_fwd_s == approx(1.0)
    # b2 [3,4] frees b; a comes back [4,5] (waited for, 0 + 100 fits); b1 [5,6].
    assert ev.step_time_s == approx(6.0) and ev.stall_bwd_s == approx(1.0)


def test_lagging_offload_uses_device_copy_and_cancels_prefetch():
    # a (100 B) swapped on a slow link (10 B/s): D2H [1, 11]. Forward ends 2, bA reads a at
    # 2 while the D2H is still running: the device copy is used, no H2D is issued.
    inst = build([("f1", 1), ("f2", 1)], [("bA", 1)], [("a", 100, "f1", ["bA"], None)], W=10)
    ev = simulate(inst, Plan.from_mapping(inst, {"a": "swap"}), 1000)
    assert ev.feasible and ev.h2d_bytes == 0 and ev.d2h_bytes == 100
    assert ev.step_time_s == approx(3.0)


def test_zero_byte_tensors_and_empty_instances_cost_nothing():
    inst = build([("f1", 1)], [("b1", 1)], [("z", 0, "f1", ["b1"], (["f1"], []))])
    for d in ("keep", "swap"):
        ev = simulate(inst, Plan.from_mapping(inst, {"z": d}), 0)
        assert ev.feasible and ev.step_time_s == 2.0 and ev.peak_bytes == 0
        assert ev.d2h_bytes == ev.h2d_bytes == 0
    empty = build([("f1", 1)], [("b1", 1)], [])
    ev = simulate(empty, Plan.keep_all(empty), 0)
    assert ev.feasible and ev.step_time_s == 2.0 and empty.n_saved == 0


def test_bad_plan_and_budget_raise():
    inst = build([("f1", 1)], [("b1", 1)], [("x", 10, "f1", ["b1"], None)])
    with pytest.raises(PlanError, match="cannot be rebuilt"):
        simulate(inst, Plan.from_mapping(inst, {"x": "recomp"}), 100)
    with pytest.raises(BudgetError):
        simulate(inst, Plan.keep_all(inst), -1)


def test_stall_is_charged_to_the_input_that_moved_bytes():
    # y (0 B) and z (100 B) swapped, both read by bA. z's D2H [1, 2]; forward ends at 2;
    # y's H2D is instant, z's runs [2, 3]: bA waits 1 s, charged to z, not to y.
    inst = build([("f1", 1), ("f2", 1)], [("bA", 1)],
                 [("y", 0, "f1", ["bA"], None), ("z", 100, "f1", ["bA"], None)])
    plan = Plan.from_mapping(inst, {"y": "swap", "z": "swap"})
    for engine in ("reference", "compiled"):
        ev = simulate(inst, plan, 1000, engine=engine)
        assert ev.h2d_stall_s == {"z": approx(1.0)} and ev.stall_bwd_s == approx(1.0)


@pytest.mark.parametrize("budget", [0.5, "100", True, None, 2**63])
def test_simulate_takes_bytes(budget):
    inst = build([("f1", 1)], [("b1", 1)], [("x", 10, "f1", ["b1"], None)])
    with pytest.raises(BudgetError):
        simulate(inst, Plan.keep_all(inst), budget)


def test_the_shared_runtime_rules_by_hand():
    """slackopt.simulate.rules, the one statement of every runtime rule,
    and the compiled kernel built from those very functions."""
    from slackopt.simulate import _kernel, rules

    assert rules.ADMISSION_LOOKAHEAD == 3
    assert rules.lookahead_window(5, False, 100) == (5, 8)   # task 5 not started yet
    assert rules.lookahead_window(5, True, 100) == (6, 9)    # task 5 running
    assert rules.lookahead_window(5, True, 7) == (6, 7)      # near the end of the step
    assert rules.lookahead_window(7, False, 7) == (7, 7)
    assert rules.h2d_admits(90, 10, 0, 100) and not rules.h2d_admits(90, 10, 1, 100)
    assert rules.copy_rate(100.0, 0.5, True) == 50.0 and rules.copy_rate(100.0, 0.5, False) == 100.0
    assert rules.copy_time(100, 50.0, 0.1) == approx(2.1)
    assert rules.copy_time(100, 50.0, 0.1, 0.5) == approx(4.1)
    assert rules.allocation_fits(90, 10, 100) and not rules.allocation_fits(90, 11, 100)
    assert rules.shortfall(90, 15, 100) == 5 and rules.shortfall(90, 5, 100) == -5
    assert rules.host_admits(10**9, 1, -1)                       # no host limit
    assert rules.host_admits(90, 10, 100) and not rules.host_admits(90, 11, 100)
    # A 100 B copy at 50 B/s with a 0.25 s latency, started at t = 1: latency phase to
    # 1.25, then 2 s of bytes; an event of another resource at 2.25 leaves 50 B.
    assert rules.copy_start(1.0, 100, 0.25) == (1.25, 100.0)
    assert rules.copy_event(1.0, 1.25, 100.0, 50.0) == 1.25       # in its latency phase
    assert rules.copy_advance(1.0, 1.25, 100.0, 50.0, 1.25, 1.25) == (100.0, False)
    assert rules.copy_event(1.25, 1.25, 100.0, 50.0) == 3.25
    assert rules.copy_advance(1.25, 1.25, 100.0, 50.0, 3.25, 2.25) == (50.0, False)
    assert rules.copy_advance(2.25, 1.25, 50.0, 50.0, 3.25, 3.25) == (50.0, True)
    # FIFO: a copy ready at 2 behind one ending at 3 starts at 3: 3 + 0.25 + 100 / 50.
    assert rules.fifo_copy_end(3.0, 2.0, 100, 50.0, 0.25) == 5.25
    assert rules.fifo_copy_end(1.0, 2.0, 100, 50.0, 0.25) == 4.25
    np.testing.assert_allclose(rules.fifo_ends(np.array([0.0, 0.5, 10.0]),
                                               np.array([2.0, 1.0, 1.0])), [2.0, 3.0, 11.0])
    assert rules.fifo_ends(np.zeros(0), np.zeros(0)).size == 0
    for f in (rules.lookahead_window, rules.h2d_admits, rules.copy_rate, rules.allocation_fits,
              rules.shortfall, rules.host_admits, rules.copy_start, rules.copy_event,
              rules.copy_advance):
        assert getattr(_kernel, "_" + f.__name__).py_func is f
