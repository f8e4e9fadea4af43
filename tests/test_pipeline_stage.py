"""Pipeline stages: the instance of a schedule of units and the evaluator's rules for it.

The hand-computed case is a one-op chain (forward f: 1 s, backward b: 2 s, one saved
tensor x of 100 B) as stage i of a 1F1B pipeline of p = 2 stages and m = 4 microbatches,
hop 0.5 s, a link of 100 B/s each way without latency or duplex slowdown (a copy of x
lasts 1 s). Stage 0's order is F0 F1 B0 F2 B1 F3 B2 B3; the pipeline (stage 1 runs
F0 B0 F1 B1 ...) gives its units the earliest starts 0, 1, 5, 7, 8, 10, 12, 15 and T* = 17.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from slackopt import KEEP, RECOMP, SWAP, Instance, Link, Op, Plan, Tensor, UnitSpan, simulate
from slackopt.errors import InstanceError, PlanError
from slackopt.io import instance_from_dict, instance_to_dict, load_instance
from slackopt.stage import build_stage, in_flight, weight_grad_ops
from tests.strategies import stage_sample

ROOT = Path(__file__).resolve().parents[1]
HAND = Instance("hand", [Op("f", "fwd", 1.0), Op("b", "bwd", 2.0)],
                [Tensor("x", 100, "f", ("b",))],
                Link("hand", 100.0, duplex_factor=1.0, copy_latency_s=0.0))


def hand_stage(stage: int) -> Instance:
    return build_stage(HAND, "1f1b", stage, 2, 4, hop_s=0.5)


def lanes(ev, lane: str) -> list[tuple[str, float, float]]:
    return [(e["name"], e["start_s"], e["end_s"]) for e in ev.trace if e["lane"] == lane]


def test_hand_1f1b_units_and_ideal_step():
    s = hand_stage(0)
    assert [(u.kind, u.microbatch) for u in s.units] == [
        ("F", 0), ("F", 1), ("B", 0), ("F", 2), ("B", 1), ("F", 3), ("B", 2), ("B", 3)]
    assert [u.earliest_start_s for u in s.units] == [0.0, 1.0, 5.0, 7.0, 8.0, 10.0, 12.0, 15.0]
    assert s.ideal_time_s == 17.0
    assert not s.single_pass
    assert s.saved_names == ("x@0", "x@1", "x@2", "x@3")
    # d: start of each microbatch's B; r: end of its F
    assert s.r.tolist() == [1.0, 2.0, 8.0, 11.0]
    assert s.d.tolist() == [5.0, 8.0, 12.0, 15.0]


@pytest.mark.parametrize(("stage", "in_flight_max"), [(0, 2), (1, 1)])
def test_hand_keep_all_peak_counts_p_minus_i_microbatches(stage, in_flight_max):
    s = hand_stage(stage)
    assert in_flight(s).max() == in_flight_max
    assert s.P == 100 * in_flight_max
    ev = simulate(s, Plan.uniform(s, KEEP), s.P)
    assert ev.feasible and ev.step_time_s == s.ideal_time_s
    assert ev.peak_bytes == s.P and ev.stall_fwd_s == ev.stall_bwd_s == 0.0


@pytest.mark.parametrize("engine", ["reference", "compiled"])
def test_hand_offloads_hide_behind_other_units(engine):
    """Swap every x at M = 200 B: each offload runs beside the next forward unit, each
    prefetch in a bubble or beside a backward unit; B1 waits 1 s for x@1 (the look-ahead
    keeps the prefetch out until B1 waits for it), a stall the bubble before B3 absorbs:
    the step is T* = 17 s."""
    s = hand_stage(0)
    ev = simulate(s, Plan.uniform(s, SWAP), 200, engine=engine)
    assert ev.feasible
    assert ev.step_time_s == 17.0 == s.ideal_time_s
    assert (ev.stall_fwd_s, ev.stall_bwd_s, ev.recompute_s) == (0.0, 1.0, 0.0)
    assert (ev.d2h_bytes, ev.h2d_bytes, ev.peak_bytes) == (400, 400, 200)
    if engine == "compiled":
        return
    ev = simulate(s, Plan.uniform(s, SWAP), 200, trace=True)
    assert lanes(ev, "compute") == [
        ("f@0", 0.0, 1.0), ("f@1", 1.0, 2.0), ("b@0", 5.0, 7.0), ("f@2", 7.0, 8.0),
        ("b@1", 9.0, 11.0), ("f@3", 11.0, 12.0), ("b@2", 12.0, 14.0), ("b@3", 15.0, 17.0)]
    assert lanes(ev, "d2h") == [("x@0", 1.0, 2.0), ("x@1", 2.0, 3.0), ("x@2", 8.0, 9.0),
                                ("x@3", 12.0, 13.0)]
    # x@0's prefetch starts in the bubble before B0 (the compute stream's next task
    # reads it); no H2D starts before its own microbatch's forward unit has ended.
    assert lanes(ev, "h2d") == [("x@0", 2.0, 3.0), ("x@1", 8.0, 9.0), ("x@2", 11.0, 12.0),
                                ("x@3", 13.0, 14.0)]
    assert lanes(ev, "stall") == [("b@1", 8.0, 9.0)]


def test_no_prefetch_before_its_forward_unit_ends():
    """GPipe stage 1 of 2 (F0..F3, then B0..B3): x@0's host copy is complete at 3 s but
    its prefetch may start only once F0 ended; with M = one tensor the stream of F1..F3
    still holds the device, so every prefetch waits for the backward units."""
    s = build_stage(HAND, "gpipe", 1, 2, 4, hop_s=0.5)
    ev = simulate(s, Plan.uniform(s, SWAP), 200, trace=True)
    assert ev.feasible
    for name, start, _ in lanes(ev, "h2d"):
        j = int(name.split("@")[1])
        f_end = max(e for n, _, e in lanes(ev, "compute") if n == f"f@{j}")
        assert start >= f_end


def test_one_microbatch_schedule_is_the_single_pass_bit_for_bit():
    base = load_instance(ROOT / "instances/paper/gpt2-xl_a100-pcie4.json")
    s = build_stage(base, "1f1b", 0, 1, 1)
    assert [(u.kind, u.earliest_start_s) for u in s.units] == [
        ("F", 0.0), ("B", base.forward_time_s)]
    assert s.single_pass
    assert s.P == base.P and s.ideal_time_s == base.ideal_time_s
    assert np.array_equal(s.r, base.r) and np.array_equal(s.d, base.d)
    for code in (KEEP, SWAP, RECOMP):
        for f in (0.3, 0.7):
            m = int(f * base.P)
            a = simulate(base, Plan.uniform(base, code), m)
            b = simulate(s, Plan.uniform(s, code), m)
            assert (a.feasible, a.step_time_s, a.peak_bytes, a.stall_fwd_s, a.stall_bwd_s,
                    a.d2h_bytes, a.h2d_bytes, a.evictions) == (
                b.feasible, b.step_time_s, b.peak_bytes, b.stall_fwd_s, b.stall_bwd_s,
                b.d2h_bytes, b.h2d_bytes, b.evictions)


def test_stage_file_round_trip_keeps_the_units():
    base = load_instance(ROOT / "instances/teaching/tiny-gpt_a100-pcie4.json")
    s = build_stage(base, "zb-h1", 0, 2, 4)
    back = instance_from_dict(instance_to_dict(s))
    assert back.units == s.units and back.scheduled_units == s.units
    assert back.ideal_time_s == s.ideal_time_s and back.P == s.P
    assert back.meta["schedule"]["name"] == "zb-h1"
    plan = Plan.uniform(s, SWAP)
    a, b = simulate(s, plan, int(0.5 * s.P)), simulate(back, Plan.uniform(back, SWAP),
                                                      int(0.5 * s.P))
    assert (a.step_time_s, a.peak_bytes) == (b.step_time_s, b.peak_bytes)


def test_zero_bubble_defers_the_weight_gradients():
    base = load_instance(ROOT / "instances/teaching/tiny-gpt_a100-pcie4.json")
    w = weight_grad_ops(base)
    assert {n for n in w if n.endswith(".wgrad")} == {
        op.name for op in base.ops if op.name.endswith(".wgrad")}
    s = build_stage(base, "zb-h1", 1, 2, 4)
    kinds = {u.kind for u in s.units}
    assert kinds == {"F", "B", "W"}
    at = 0
    for u in s.units:
        names = [op.name.split("@")[0] for op in s.ops[at:at + u.n_ops]]
        at += u.n_ops
        if u.kind == "W":
            assert set(names) <= w
        elif u.kind == "B":
            assert not set(names) & w


def test_the_input_gradient_stays_in_b_where_the_previous_stage_waits_for_it():
    """dx (the gradient of the stage's input, which no op of the stage reads) is B on
    every stage but the first; dw (a weight gradient, no output) is W."""
    base = Instance("wb", [Op("f", "fwd", 1.0), Op("dw", "bwd", 1.0), Op("dx", "bwd", 1.0)],
                    [Tensor("x", 10, "f", ("dw",)), Tensor("gx", 10, "dx")], HAND.link)
    assert weight_grad_ops(base) == {"dw"}
    assert weight_grad_ops(base, input_grad=False) == {"dw", "dx"}
    s = build_stage(base, "zb-h1", 1, 2, 2, hop_s=0.0)
    assert {(u.kind, s.ops[sum(v.n_ops for v in s.units[:k])].name)
            for k, u in enumerate(s.units) if u.microbatch == 0} == {
        ("F", "f@0"), ("B", "dx@0"), ("W", "dw@0")}


def test_boundary_bytes_is_the_recurring_activation_of_a_profile():
    from slackopt.stage import boundary_bytes

    base = load_instance(ROOT / "instances/bench/llama-3-70b-pp8-stage0_h100-pcie5.json.gz")
    assert boundary_bytes(base) == 8192 * 8192 * 2  # the hidden state, [tokens, h] in bf16


def test_other_runtimes_refuse_a_pipeline_stage():
    s = hand_stage(0)
    with pytest.raises(PlanError, match="pipeline stage"):
        simulate(s, Plan.uniform(s, KEEP, policy="on_demand"), s.P)


@pytest.mark.parametrize(("units", "field", "match"), [
    ([UnitSpan("X", 1), UnitSpan("B", 1)], "units[0].kind", "kind"),
    ([UnitSpan("F", 2)], "units[0].n_ops", "phase 'bwd'"),
    ([UnitSpan("F", 1)], "units", "span 1 of the 2"),
    ([UnitSpan("F", 1), UnitSpan("B", 1, earliest_start_s=-1.0)], "units[1].earliest_start_s",
     "earliest_start_s"),
    ([UnitSpan("F", 1), UnitSpan("F", 1)], "units[1]", "listed twice"),
])
def test_bad_units_are_refused_naming_the_field(units, field, match):
    ops = [Op("f", "fwd", 1.0), Op("b", "bwd", 2.0)]
    if units[1:2] == [UnitSpan("F", 1)]:
        ops = [Op("f", "fwd", 1.0), Op("g", "fwd", 1.0)]
    with pytest.raises(InstanceError, match=match) as e:
        Instance("u", ops, [], HAND.link, units=units)
    assert e.value.field == field


STAGES = stage_sample(12, salt=2)


def _all_plans(s: Instance):
    import itertools

    choices = [[KEEP, SWAP, RECOMP] if np.isfinite(c) else [KEEP, SWAP] for c in s.c]
    for dec in itertools.product(*choices):
        yield Plan(np.array(dec, dtype=np.int8), s.saved_names)


@pytest.mark.slow
@pytest.mark.parametrize("k", range(len(STAGES)))
def test_milp_on_a_stage_claims_only_what_every_plan_obeys(k):
    """On pipeline stages the exact tier's bounds, its model floor and its statuses hold
    for every plan, and its enumeration proves the optimum: brute force over all 3^n
    plans at budgets from the floor to P."""
    from slackopt import solve
    from slackopt.solvers.milp import model_floor

    s = STAGES[k]
    floor = model_floor(s)
    plans = list(_all_plans(s))
    if floor > 0:  # below the floor no plan runs
        assert not any(simulate(s, p, floor - 1).feasible for p in plans)
    for M in sorted({floor, floor + (s.P - floor) // 3, floor + 2 * (s.P - floor) // 3,
                     max(s.P - 1, floor)}):
        steps = [ev.step_time_s for ev in (simulate(s, p, M) for p in plans) if ev.feasible]
        res = solve(s, "milp", M, time_limit_s=5, seed=0)
        if not steps:
            assert res.status in ("infeasible", "timeout")
            continue
        best = min(steps)
        assert res.status != "infeasible"
        if res.lower_bound_s is not None:
            assert res.lower_bound_s <= best * (1 + 1e-12)
        assert not [e for e in res.info["bound_errors"] if e["kind"] == "certified"]
        assert res.status == "optimal"  # the enumeration (or a bound) proves it
        assert res.evaluation.step_time_s <= best * (1 + 1e-9)
