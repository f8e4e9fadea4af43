"""Invariants of docs/model.md as property tests on random small instances."""

from __future__ import annotations

import pytest
from hypothesis import given

from slackopt import Plan, simulate
from tests.helpers_sim import SETTINGS, cases, instances


@pytest.mark.slow
@SETTINGS
@given(instances())
def test_keep_all_at_or_above_peak_is_ideal(inst):
    for M in (inst.P, inst.P + 7):
        ev = simulate(inst, Plan.keep_all(inst), M)
        assert ev.feasible
        assert ev.step_time_s == inst.ideal_time_s
        assert ev.stall_fwd_s == ev.stall_bwd_s == ev.recompute_s == 0
        assert ev.d2h_bytes == ev.h2d_bytes == 0 and ev.peak_bytes == inst.P


@pytest.mark.slow
@SETTINGS
@given(cases())
def test_feasible_evaluations_keep_the_invariants(case):
    inst, plan, M = case
    ev = simulate(inst, plan, M, trace=True)
    # Invariant 5: deterministic, bit for bit.
    again = simulate(inst, plan, M, trace=True)
    assert ev == again
    mem = [e["bytes"] for e in ev.trace if e["lane"] == "memory"]
    assert max(mem, default=0) <= ev.peak_bytes <= M
    if not ev.feasible:
        assert ev.failure and "short" in ev.failure
        return
    # Invariant 2.
    assert ev.stall_fwd_s >= 0 and ev.stall_bwd_s >= 0 and ev.recompute_s >= 0
    assert ev.step_time_s >= inst.ideal_time_s - 1e-9
    parts = inst.ideal_time_s + ev.stall_fwd_s + ev.stall_bwd_s + ev.recompute_s
    assert abs(ev.step_time_s - parts) <= 1e-9 * max(1.0, ev.step_time_s)
    # Recompute time is exactly the rebuilt tensors' c.
    recomp = plan.decisions == 2
    assert abs(ev.recompute_s - float(inst.c[recomp].sum())) <= 1e-9
    # Invariant 4: no task reads a swapped tensor while an H2D of it is in flight (the
    # first read either uses a lagging device copy or waits for the copy to end).
    starts: dict[str, list[float]] = {}
    for e in ev.trace:
        if e["lane"] == "compute":
            starts.setdefault(e["name"], []).append(e["start_s"])
    for e in ev.trace:
        if e["lane"] != "h2d" or e["end_s"] <= e["start_s"]:
            continue
        k = inst.saved_position(e["name"])
        for i in inst.saved_reader_idx[k]:
            if not inst.is_bwd[i]:
                continue
            for x in starts.get(inst.ops[i].name, []):
                assert not (e["start_s"] <= x < e["end_s"])
    # Swapped bytes go out at most once; a D2H still queued when the last task ends
    # (its tensor already used from the device copy) never starts.
    assert ev.d2h_bytes <= int(inst.s[plan.decisions == 1].sum())
