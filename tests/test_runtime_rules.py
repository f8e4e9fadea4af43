"""Hand-computed timelines of the three runtime rules of the barrier-free runtime
(docs/model.md, "Plan semantics under the barrier-free runtime"):

1. no head-of-line blocking in the H2D queue;
2. a D2H that has not started when its tensor has no reader left is dropped;
3. a task claims every lagging device copy it reads at once, whatever its input order.

Every expected number is worked out in the comment beside it, together with what the
runtime gave before the rule (asserted to differ). Both engines are checked.
"""

from __future__ import annotations

import numpy as np
import pytest

from slackopt import Plan, simulate
from slackopt.workloads import make
from tests.helpers import build, lane

approx = lambda x: pytest.approx(x, rel=1e-12, abs=1e-12)  # noqa: E731
M_LARGE = 10_000


def both(inst, plan, M):
    """The reference evaluation with a trace, after checking the compiled engine equals
    the reference one."""
    ref = simulate(inst, plan, M, engine="reference")
    assert simulate(inst, plan, M, engine="compiled").to_dict() == ref.to_dict()
    return simulate(inst, plan, M, trace=True)


def hol_instance():
    """Rule 1. W = 100 B/s, no latency, no duplex slowdown.
    f1 [0,1] makes a (200 B), f2 [1,2] makes b (300 B), f3 [2,3]; backward bY [3,4],
    bB [4,5] reads b, bA [5,6] reads a. T* = 6."""
    return build([("f1", 1), ("f2", 1), ("f3", 1)], [("bY", 1), ("bB", 1), ("bA", 1)],
                 [("a", 200, "f1", ["bA"], None), ("b", 300, "f2", ["bB"], None)],
                 duplex=1.0)


def test_rule1_no_head_of_line_blocking():
    # D2H a [1, 3]; D2H b queued at 2, starts when a's ends: [3, 6]. Forward ends at 3.
    # The H2D queue in need order is b (bB) then a (bA). At 3 b's D2H has not ended, so it
    # does not hold up the queue: a's H2D starts at 3 (its D2H ended at 3): [3, 5].
    # bY [3,4]; bB [4,5] uses b's device copy (lagging D2H: no H2D); bA [5,6]: T = T* = 6.
    # b's D2H, in flight when bB ends at 5, runs to its end at 6 (it is not dropped).
    # Before the rule: b blocked the queue until bB claimed its device copy at 4; a's H2D
    # ran [4, 6] and bA waited [6, 7]: T = 7, stall 1.
    inst = hol_instance()
    ev = both(inst, Plan.from_mapping(inst, {"a": "swap", "b": "swap"}), M_LARGE)
    d2h, h2d = lane(ev, "d2h"), lane(ev, "h2d")
    assert d2h["a"] == (approx(1.0), approx(3.0)) and d2h["b"] == (approx(3.0), approx(6.0))
    assert h2d == {"a": (approx(3.0), approx(5.0))}
    assert lane(ev, "compute")["bA"] == (approx(5.0), approx(6.0))
    assert ev.step_time_s == approx(6.0) and ev.stall_bwd_s == 0 and ev.stall_fwd_s == 0
    assert ev.d2h_bytes == 500 and ev.h2d_bytes == 200
    assert ev.step_time_s < 7.0  # the old runtime's T


def drop_instance():
    """Rule 2. W = 100 B/s, no latency, duplex 0.5 (50 B/s each way while both copy).
    f1 [0,1] makes a (500 B), f2 [1,2] makes b (100 B), f3 [2,3]; backward bB [3,4]
    reads b, bZ [4,8], bA [8,9] reads a. T* = 9."""
    return build([("f1", 1), ("f2", 1), ("f3", 1)], [("bB", 1), ("bZ", 4), ("bA", 1)],
                 [("a", 500, "f1", ["bA"], None), ("b", 100, "f2", ["bB"], None)])


def test_rule2_d2h_without_reader_left_is_dropped():
    # D2H a [1, 6] (500 B alone). b's D2H is queued at 2 behind a's. Forward ends at 3;
    # bB [3, 4] uses b's device copy (lagging) and is b's only reader: at 4 b has no reader
    # left and its D2H, not started, is dropped (no bytes). a's H2D starts when its D2H
    # ends, at 6, alone on the link: [6, 11]. bZ [4, 8]; bA waits [8, 11] (stall 3):
    # [11, 12], T = 12.
    # Before the rule: b's D2H [6, 8] ran beside a's H2D, both at 50 B/s; a moved 100 B by
    # 8 and the last 400 B at 100 B/s: H2D [6, 12], bA [12, 13], T = 13, 600 B copied out.
    inst = drop_instance()
    ev = both(inst, Plan.from_mapping(inst, {"a": "swap", "b": "swap"}), M_LARGE)
    assert lane(ev, "d2h") == {"a": (approx(1.0), approx(6.0))}
    assert lane(ev, "h2d") == {"a": (approx(6.0), approx(11.0))}
    assert ev.d2h_bytes == 500 and ev.h2d_bytes == 500
    assert ev.step_time_s == approx(12.0) and ev.stall_bwd_s == approx(3.0)
    assert ev.h2d_stall_s == {"a": approx(3.0)}
    assert ev.step_time_s < 13.0 and ev.d2h_bytes < 600  # the old runtime's figures


def claim_instance(a_first: bool):
    """Rule 3. W = 100 B/s, no latency, duplex 0.5. f1 [0,1] makes a (100 B), f2 [1,2]
    makes b (100 B), f3 [2,2.5] reads a and b and makes r (10 B), rebuilt by re-running f3
    from a and b (c = 0.5 s); backward bR (1 s) reads r, bX (1 s) reads a and b.

    Backward tasks: rebuild:r, bR, bX. The rebuild's inputs are its recipe's, in the order
    the recipe lists them: (a, b) if `a_first`, else (b, a). (A task's other inputs are in
    production order, so a recipe is where the order is free.)"""
    ins = ["a", "b"] if a_first else ["b", "a"]
    return build([("f1", 1), ("f2", 1), ("f3", 0.5)], [("bR", 1), ("bX", 1)],
                 [("a", 100, "f1", ["f3", "bX"], None), ("b", 100, "f2", ["f3", "bX"], None),
                  ("r", 10, "f3", ["bR"], (["f3"], ins))])


@pytest.mark.parametrize("a_first", [True, False])
def test_rule3_lagging_inputs_are_claimed_together(a_first):
    # D2H a [1, 2]; D2H b from 2. Forward ends at 2.5 (b has moved 50 B); a's device copy
    # is freed then (D2H done, f3 done). a's H2D starts at 2.5; both directions now run at
    # 50 B/s: b's D2H ends at 3.5, a's H2D has moved 50 B by then and its last 50 B take
    # 0.5 s at 100 B/s: [2.5, 4.0].
    # At 2.5 the rebuild of r finds a missing and b's device copy still resident (its D2H
    # lags): it claims b at once, whatever the order of its inputs, and waits for a:
    # rebuild [4, 4.5], bR [4.5, 5.5], bX [5.5, 6.5]: T = 6.5 (T* = 4.5, recompute 0.5,
    # stall 1.5 charged to a), 100 B fetched.
    # Before the rule, with inputs (a, b) the rebuild stopped at the missing a and left b;
    # b's device copy was freed when its D2H ended at 3.5 and b was fetched again [4, 5]:
    # rebuild [5, 5.5], T = 7.5, 200 B fetched. With inputs (b, a) it gave T = 6.5.
    inst = claim_instance(a_first)
    plan = Plan.from_mapping(inst, {"a": "swap", "b": "swap", "r": "recomp"})
    ev = both(inst, plan, M_LARGE)
    assert lane(ev, "d2h") == {"a": (approx(1.0), approx(2.0)),
                               "b": (approx(2.0), approx(3.5))}
    assert lane(ev, "h2d") == {"a": (approx(2.5), approx(4.0))}
    assert lane(ev, "compute")["rebuild:r"] == (approx(4.0), approx(4.5))
    assert ev.step_time_s == approx(6.5) and ev.stall_bwd_s == approx(1.5)
    assert ev.recompute_s == approx(0.5) and ev.h2d_stall_s == {"a": approx(1.5)}
    assert ev.d2h_bytes == 200 and ev.h2d_bytes == 100


def test_rule3_evaluation_does_not_depend_on_the_input_order():
    evs = []
    for a_first in (True, False):
        inst = claim_instance(a_first)
        plan = Plan.from_mapping(inst, {"a": "swap", "b": "swap", "r": "recomp"})
        evs.append(simulate(inst, plan, M_LARGE, trace=True).to_dict())
    assert evs[0] == evs[1]


def _chain16_alternating():
    inst = make("chain", layers=16, link="pcie3")
    # Saved tensors x, L0.a, ..., L15.a: keep, swap, keep, swap, ... (L0.a, L2.a, ... swapped).
    dec = np.array([i % 2 for i in range(inst.n_saved)], dtype=np.int8)
    return inst, Plan(dec, inst.saved_names)


def test_chain16_alternating_plan_at_twice_the_peak():
    """The issue's case: chain16 on PCIe 3.0 (12 GB/s, 10 us per copy, duplex 0.85),
    every other saved tensor swapped, M = 2 P (memory never binds).

    D2H copies run in production order: L0.a from the end of L0.f; the D2Hs of L4.a ...
    L14.a are still queued when their only backward readers (L5.b ... L15.b) end, which use
    the lagging device copies, so they are dropped; L2.a's D2H starts when L0.a's ends and
    runs to its end (L3.b, its reader, uses the device copy meanwhile). L0.a is the only
    tensor fetched: its H2D starts when its D2H ends (forward pass over, nothing ahead of it
    in the queue), beside L2.a's D2H (both at 0.85 W) until that one ends, then alone at W.
    L1.b waits for it; then L1.b and L0.b run back to back.

    On main before the rules: L0.a's H2D waited until 17.39 ms behind the tensors still
    mid-D2H, the D2Hs of L4.a and L6.a ran after their readers and T was 32.62 ms.
    """
    inst, plan = _chain16_alternating()
    ev = both(inst, plan, 2 * inst.P)
    W, lat, f = inst.link.bytes_per_s, inst.link.copy_latency_s, inst.link.duplex_factor
    names = list(inst.saved_names)
    s0, s2 = int(inst.s[names.index("L0.a")]), int(inst.s[names.index("L2.a")])
    comp = lane(ev, "compute")
    d2h_end = comp["L0.f"][1] + lat + s0 / W          # L0.a's D2H, alone on the link
    both_end = d2h_end + lat + s2 / (f * W)           # L2.a's D2H beside L0.a's H2D
    h2d_end = both_end + (s0 - s2) / W                # L0.a's last bytes alone
    d2h, h2d = lane(ev, "d2h"), lane(ev, "h2d")
    rel = lambda x: pytest.approx(x, rel=1e-9)  # noqa: E731
    assert d2h["L0.a"] == (rel(comp["L0.f"][1]), rel(d2h_end))
    assert h2d["L0.a"] == (rel(d2h_end), rel(h2d_end))
    assert d2h["L2.a"] == (rel(d2h_end), rel(both_end))
    assert set(h2d) == {"L0.a"} and set(d2h) == {"L0.a", "L2.a"}
    assert ev.d2h_bytes == s0 + s2 and ev.h2d_bytes == s0  # L4.a ... L14.a: 0 B moved
    assert comp["L1.b"][0] == rel(h2d_end)
    dur = {op.name: op.duration_s for op in inst.ops}
    assert ev.step_time_s == rel(h2d_end + dur["L1.b"] + dur["L0.b"])
    assert ev.h2d_stall_s == {"L0.a": rel(h2d_end - comp["L2.b"][1])}
    assert ev.step_time_s < 32.6e-3   # main: 32.62 ms
