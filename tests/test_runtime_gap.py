"""Best schedules of a plan's decisions (slackopt.experiments.schedule,
slackopt.experiments.best_schedule) and
the split of a step time into decisions and runtime (slackopt.experiments.runtime_gap).

- Hand-computed cases where the barrier-free runtime is provably slower than the best
  schedule of the same decisions, with the amount worked out beside each.
- The checker: the runtime's own schedule replays to the evaluator's step time and copy
  ends (it is an independent statement of the same physics); every broken rule is
  rejected with a message naming it; the copy-engine timing (duplex, latency) by hand.
- The bounds bracket: compute floor and relaxation <= verified schedule <= runtime, on
  random small instances (every plan) as well.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slackopt import Instance, Plan, simulate
from slackopt.experiments.best_schedule import best_schedule
from slackopt.experiments.runtime_gap import runtime_gap
from slackopt.experiments.schedule import (
    Schedule,
    ScheduleError,
    check_schedule,
    copy_ends,
    runtime_schedule,
)
from tests.helpers import build, lane, mk
from tests.helpers_milp import random_instance

approx = lambda x: pytest.approx(x, rel=1e-9, abs=1e-12)  # noqa: E731


def barrier_instance(b3_workspace: int = 0):
    """tests/test_runtimes.py's case, W = 100 B/s, no latency, no duplex slowdown.
    a (200 B) made by f1 [0,1], read by f2 [1,2] and b1; b (50 B) made by f2, read by
    f3 [2,3] and b2. Backward b3, b2, b1 (1 s each). T* = 6."""
    return mk([("f1", 1, "k1"), ("f2", 1, "k2"), ("f3", 1, "k3")],
              [("b3", 1, "k3", -1, b3_workspace), ("b2", 1, "k2"), ("b1", 1, "k1")],
              [("a", 200, "f1", ["f2", "b1"]), ("b", 50, "f2", ["f3", "b2"])])


def swap_both(inst):
    return Plan.from_mapping(inst, {"a": "swap", "b": "swap"})


# ------------------------------------------------------------------ hand-computed cases
def test_runtime_loses_1_5_s_to_its_queue_order():
    # M = 250 B = P (a and b are both live while f2 runs: no schedule fits less).
    # Runtime (tests/test_runtimes.py): D2H a [1,3], b [3,3.5]; at 3 only a is on the
    # host, so H2D a [3,5] goes first; b's H2D waits for the engine: [5,5.5]; b2 waits
    # for it: [5.5,6.5], b1 [6.5,7.5]: U = 7.5.
    # Best schedules take 6 = T*: both tensors resident (a + b = 250 B = M throughout),
    # or b resident and a offloaded D2H [1,3], fetched H2D [3,5] (b1 reads it at 5; b3
    # holds b 50 + a's buffer 200 = 250). The runtime copies b because its D2H queue is
    # FIFO at production and it fetches in host order; it loses exactly 1.5 s, and the
    # compute floor (6 s) closes the bracket.
    inst = barrier_instance()
    plan, M = swap_both(inst), 250
    g = runtime_gap(inst, plan, M, time_limit_s=10, instance_lower_bound_s=inst.ideal_time_s)
    assert g.runtime_step_s == approx(7.5)
    assert g.best_schedule_s == approx(6.0)
    assert g.compute_floor_s == approx(6.0) and g.best_schedule_lower_s == approx(6.0)
    assert g.lost_to_runtime_min_s == approx(1.5) and g.lost_to_runtime_max_s == approx(1.5)
    # L = T* = 6 bounds every plan: nothing is lost to the decisions
    assert g.lost_to_decisions_max_s == approx(0.0)
    assert g.schedule.check.peak_bytes == 250
    assert g.schedule.source == "cp-sat" and g.schedule.runtime_schedule_s == approx(7.5)
    # the second best schedule above, written by hand, passes the checker
    chk = check_schedule(inst, plan, M, _good())
    assert chk.makespan_s == approx(6.0) and chk.h2d_end_s == {0: approx(5.0)}
    assert chk.d2h_end_s == {0: approx(3.0)} and chk.peak_bytes == 250


def test_runtime_loses_0_5_s_when_memory_is_tight_in_backward():
    # As above with a 50 B workspace on b3 [3,4] (M = 250 B).
    # Runtime: a is freed at 3 (D2H [1,3] and f2 done); b's D2H runs [3,3.5]. b3 starts at
    # 3: used = b 50 + ws 50 = 100; a's H2D needs 100 + 200 > 250: it waits. At 3.5 b is
    # on the host and first in need order: H2D b [3.5,4] (used 100). At 4 b3 ends (used
    # 50): H2D a [4,6] (250); b2 [4,5]; b1 waits for a: [6,7]: U = 7.
    # Best schedule: a resident (never copied), b offloaded: D2H b [2,2.5] (after f2), b's
    # device copy freed at 3 (f3 ends). b3 [3,4] holds a 200 + ws 50 = 250 = M, so b's
    # H2D buffer fits only from 4: [4,4.5]; b2 [4.5,5.5], b1 [5.5,6.5]: 6.5.
    # Every other choice is slower: a offloaded needs a 200 B buffer by 5 (b1), but
    # during b3 the workspace and b (resident, or its device copy until its D2H ends
    # at >= 3.5 behind a's) already hold 100 B, so a's 2 s H2D starts at 4: b1 at 6, T 7;
    # both resident: 300 B at b3.
    inst = barrier_instance(b3_workspace=50)
    plan, M = swap_both(inst), 250
    assert simulate(inst, plan, M).step_time_s == approx(7.0)
    g = runtime_gap(inst, plan, M, time_limit_s=10)
    assert g.runtime_step_s == approx(7.0) and g.best_schedule_s == approx(6.5)
    assert g.lost_to_runtime_min_s == approx(0.5)
    sch = g.schedule.schedule
    assert set(sch.d2h_start_s) == {1} and set(sch.h2d_start_s) == {1}   # a resident
    hand = Schedule((0.0, 1.0, 2.0, 3.0, 4.5, 5.5), {1: 2.0}, {1: 4.0})
    assert check_schedule(inst, plan, M, hand).makespan_s == approx(6.5)
    with pytest.raises(ScheduleError, match="device memory 300 B > M = 250 B"):
        check_schedule(inst, plan, M, Schedule(hand.task_start_s, {1: 2.0}, {1: 3.0}))
    # the bracket: compute floor 6 <= relaxation <= 6.5 <= 7
    assert g.compute_floor_s == approx(6.0)
    assert g.compute_floor_s <= g.best_schedule_lower_s <= g.best_schedule_s
    assert g.lost_to_runtime_max_s == approx(7.0 - g.best_schedule_lower_s)


def test_lagging_offload_replays_as_resident():
    # tests/test_runtime_rules.py rule 1: b's D2H [3,6] lags, bB reads the device copy, so
    # the runtime's schedule has b resident; it replays to U = T* = 6.
    inst = build([("f1", 1), ("f2", 1), ("f3", 1)], [("bY", 1), ("bB", 1), ("bA", 1)],
                 [("a", 200, "f1", ["bA"], None), ("b", 300, "f2", ["bB"], None)],
                 duplex=1.0)
    plan = Plan.from_mapping(inst, {"a": "swap", "b": "swap"})
    sch = runtime_schedule(inst, plan, 10_000)
    assert sch.d2h_start_s == {0: approx(1.0)} and sch.h2d_start_s == {0: approx(3.0)}
    chk = check_schedule(inst, plan, 10_000, sch)
    assert chk.makespan_s == approx(6.0) and chk.h2d_end_s == {0: approx(5.0)}


# ------------------------------------------------------------------ the checker
def test_copy_ends_duplex_and_latency_by_hand():
    # W = 100 B/s, duplex 0.5. D2H 100 B from 0; H2D 100 B from 0.5. D2H alone moves 50 B
    # by 0.5, then both run at 50 B/s: the D2H's last 50 B end at 1.5; the H2D moved 50 B
    # by then and its last 50 B at 100 B/s end at 2.0.
    d, h = copy_ends([(0.0, 100, "x")], [(0.5, 100, "y")], 100.0, 0.5, 0.0)
    assert d == [approx(1.5)] and h == [approx(2.0)]
    # latency 0.25: the D2H moves bytes from 0.25; the H2D is in flight from 0.5 (its
    # latency phase counts): D2H 25 B alone, then 75 B at 50 B/s: ends 2.0; the H2D moves
    # from 0.75 at 50 B/s (62.5 B by 2.0), its last 37.5 B at 100 B/s: ends 2.375.
    d, h = copy_ends([(0.0, 100, "x")], [(0.5, 100, "y")], 100.0, 0.5, 0.25)
    assert d == [approx(2.0)] and h == [approx(2.375)]
    # two copies on one engine: the second may start when the first ends, not before
    d, h = copy_ends([(0.0, 100, "x"), (1.0, 50, "z")], [], 100.0, 0.5, 0.0)
    assert d == [approx(1.0), approx(1.5)] and h == []
    with pytest.raises(ScheduleError, match="D2H engine still copies 'x'"):
        copy_ends([(0.0, 100, "x"), (0.9, 50, "z")], [], 100.0, 0.5, 0.0)


def _good():
    """The best schedule of test_runtime_loses_1_5_s_to_its_queue_order."""
    return Schedule((0.0, 1.0, 2.0, 3.0, 4.0, 5.0), {0: 1.0}, {0: 3.0})


@pytest.mark.parametrize("change, M, message", [
    (dict(task_start_s=(0.0, 0.5, 2.0, 3.0, 4.0, 5.0)), 250,
     "task 'f2' starts at 500 ms, before task 'f1' ends"),
    (dict(task_start_s=(0.0, 1.0, 2.0, 3.0, 4.0)), 250, "5 task starts; the plan has 6"),
    (dict(h2d_start_s={0: 3.5}), 250, "task 'b1' reads 'a' at 5000 ms, before its H2D"),
    (dict(h2d_start_s={0: 2.5}), 250, "starts at 2500 ms, before its D2H ends"),
    (dict(d2h_start_s={0: 0.5}), 250, "before 'f1' makes it final"),
    (dict(d2h_start_s={0: 0.5}, h2d_start_s={0: 2.9}), 10_000,
     "before 'f1' makes it final"),
    (dict(d2h_start_s={0: 1.0, 1: 2.0}, h2d_start_s={0: 3.0, 1: 3.5}), 10_000,
     "D2H engine still copies 'a'"),
    (dict(h2d_start_s={}), 250, "'a' has a D2H copy only"),
    (dict(), 249, "device memory 250 B > M = 249 B at 1000 ms"),
])
def test_checker_rejects_broken_schedules(change, M, message):
    inst = barrier_instance()
    plan = swap_both(inst)
    assert check_schedule(inst, plan, 250, _good()).makespan_s == approx(6.0)
    bad = dataclasses.replace(_good(), **change)
    with pytest.raises(ScheduleError, match=message.replace("(", r"\(")):
        check_schedule(inst, plan, M, bad)


def test_checker_rejects_h2d_before_forward_end_and_copy_of_kept_tensor():
    inst = barrier_instance()
    plan = swap_both(inst)
    # a resident; b offloaded D2H [2,2.5], fetched at 2.6 < T_F = 3
    bad = Schedule((0.0, 1.0, 2.0, 3.0, 4.0, 5.0), {1: 2.0}, {1: 2.6})
    with pytest.raises(ScheduleError, match="before the forward pass ends"):
        check_schedule(inst, plan, 10_000, bad)
    keep_a = Plan.from_mapping(inst, {"b": "swap"})
    with pytest.raises(ScheduleError, match="which the plan does not swap"):
        check_schedule(inst, keep_a, 10_000, _good())


def test_checker_host_limit():
    # a (200 B) is on the host from its D2H start (1) to b1's end (6): over a 150 B limit
    base = barrier_instance()
    inst = Instance(base.name, base.ops, base.tensors, base.link, host_memory_bytes=150)
    with pytest.raises(ScheduleError, match="host memory 200 B > host_memory_bytes = 150 B"):
        check_schedule(inst, swap_both(inst), 250, _good())


def test_checker_evictions_and_refetch_by_hand():
    # a (100 B) made by f1 [0,1], read by b1 and b3; b2 holds a 100 B workspace; M = 150,
    # so a cannot stay through b2: D2H [1,2]; H2D [2,3] (T_F = 2); b1 [3,4]; evicted when
    # b1 ends; b2 [4,5] (100 B); re-fetched [5,6]; b3 [6,7]. Peak 100 B.
    inst = mk([("f1", 1, "k1"), ("f2", 1, "k2")],
              [("b1", 1, "k1"), ("b2", 1, "k2", -1, 100), ("b3", 1, "k3")],
              [("a", 100, "f1", ["b1", "b3"])])
    plan = Plan.from_mapping(inst, {"a": "swap"})
    good = Schedule((0.0, 1.0, 3.0, 4.0, 6.0), {0: 1.0}, {0: 2.0}, {0: ((1, 5.0),)})
    chk = check_schedule(inst, plan, 150, good)
    assert chk.makespan_s == approx(7.0) and chk.peak_bytes == 100
    # without the eviction, a and the workspace meet in b2: 200 B
    with pytest.raises(ScheduleError, match="device memory 200 B > M = 150 B at 4000 ms"):
        check_schedule(inst, plan, 150, dataclasses.replace(good, refetch_s={}))
    # the re-fetch may not start before the eviction (b1's end, 4)
    with pytest.raises(ScheduleError, match="before its eviction after 'b1'"):
        check_schedule(inst, plan, 150, dataclasses.replace(good, refetch_s={0: ((1, 3.5),)}))
    # b3 may not start before the re-fetch ends (6)
    with pytest.raises(ScheduleError, match="task 'b3' reads 'a' at 5500 ms"):
        check_schedule(inst, plan, 150, dataclasses.replace(
            good, task_start_s=(0.0, 1.0, 3.0, 4.0, 5.5)))
    # b1 reads the device copy (kept until b1 ends, 4), the only H2D is for b3
    dev = Schedule((0.0, 1.0, 2.0, 3.0, 6.0), {0: 1.0}, {0: 5.0}, {}, {0: 1})
    chk = check_schedule(inst, plan, 150, dev)
    assert chk.makespan_s == approx(7.0) and chk.h2d_end_s == {0: approx(6.0)}
    with pytest.raises(ScheduleError, match="must increase"):
        check_schedule(inst, plan, 150, dataclasses.replace(dev, refetch_s={0: ((1, 5.0),)}))


# ------------------------------------------------------------------ random instances
@pytest.mark.slow
@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), pick=st.integers(0, 10**6))
def test_runtime_schedule_replays_and_bounds_bracket(seed, pick):
    """The checker replays the runtime's schedule to the evaluator's step time and copy
    ends; and compute floor, relaxation <= verified schedule <= runtime."""
    inst, M = random_instance(seed)
    n = inst.n_saved
    rng = np.random.default_rng(pick)
    codes = rng.integers(0, 3, size=n)
    codes = np.where(np.isfinite(inst.c) | (codes != 2), codes, 0).astype(np.int8)
    plan = Plan(codes, inst.saved_names)
    ev = simulate(inst, plan, M, trace=True)
    sch = runtime_schedule(inst, plan, M)
    if sch is not None:
        chk = check_schedule(inst, plan, M, sch)
        assert chk.makespan_s == pytest.approx(ev.step_time_s, rel=1e-12, abs=1e-15)
        assert chk.peak_bytes <= ev.peak_bytes
        names = inst.saved_names
        d2h = lane(ev, "d2h")
        for t, end in chk.d2h_end_s.items():
            assert end == pytest.approx(d2h[names[t]][1], rel=1e-12, abs=1e-15)
    g = runtime_gap(inst, plan, M, time_limit_s=5, work_limit=2.0)
    assert g.compute_floor_s <= g.best_schedule_lower_s
    if g.best_schedule_s is not None:
        assert g.best_schedule_lower_s <= g.best_schedule_s * (1 + 1e-9), g.to_dict()
        check_schedule(inst, plan, M, g.schedule.schedule)
    if ev.feasible:
        assert sch is None or g.best_schedule_s is not None
        if g.best_schedule_s is not None:
            assert g.best_schedule_s <= ev.step_time_s
            assert g.lost_to_runtime_min_s >= 0


def test_best_schedule_is_deterministic_for_a_seed_and_work_limit():
    inst = barrier_instance(b3_workspace=50)
    a = best_schedule(inst, swap_both(inst), 250, time_limit_s=30, work_limit=5.0, seed=3)
    b = best_schedule(inst, swap_both(inst), 250, time_limit_s=30, work_limit=5.0, seed=3)
    assert a.schedule == b.schedule and a.upper_bound_s == b.upper_bound_s


# ------------------------------------------------------------------ command line
def test_cli_simulate_best_schedule(tmp_path, capsys):
    from slackopt.cli import main
    from slackopt.io import save_instance, save_plan

    inst = barrier_instance()
    ip, pp = tmp_path / "i.json", tmp_path / "p.json"
    save_instance(inst, ip)
    save_plan(swap_both(inst), pp, inst)
    rc = main(["simulate", str(ip), str(pp), "--budget", "250B", "--best-schedule",
               "--lower-bound", "6", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    g = json.loads(out)["runtime_gap"]
    assert g["runtime_step_s"] == approx(7.5) and g["best_schedule_s"] == approx(6.0)
    assert g["lost_to_runtime_min_s"] == approx(1.5)
    assert g["lost_to_decisions_max_s"] == approx(0.0)
    rc = main(["simulate", str(ip), str(pp), "--budget", "250B", "--best-schedule"])
    out, err = capsys.readouterr()
    assert rc == 0 and "lost_to_runtime_min_s" in out and "1.5 s" in out, out
    # the options of the analysis without it: refused, exit 2, no traceback
    rc = main(["simulate", str(ip), str(pp), "--lower-bound", "6"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and "go with --best-schedule" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("extra, message", [
    (["--lower-bound", "7.6"], "lies above this plan's own step time 7.5 s"),  # U = 7.5
    (["--lower-bound", "inf"], "finite number of seconds >= 0, got inf"),
    (["--lower-bound", "nan"], "finite number of seconds >= 0, got nan"),
    (["--lower-bound", "-1"], "finite number of seconds >= 0, got -1"),
    (["--time-limit", "0"], "time_limit_s must be a finite number of seconds > 0, got 0"),
    (["--time-limit", "inf"], "must be a finite number >= 0"),
])
def test_cli_best_schedule_refuses_bad_bounds_and_limits(tmp_path, capsys, extra, message):
    from slackopt.cli import main
    from slackopt.io import save_instance, save_plan

    inst = barrier_instance()
    ip, pp = tmp_path / "i.json", tmp_path / "p.json"
    save_instance(inst, ip)
    save_plan(swap_both(inst), pp, inst)
    rc = main(["simulate", str(ip), str(pp), "--budget", "250B", "--best-schedule", *extra])
    out, err = capsys.readouterr()
    assert rc == 2 and "Traceback" not in err and message in err, err
    # L = U itself is a valid bound (this plan is optimal if nothing is faster)
    g = runtime_gap(inst, swap_both(inst), 250, time_limit_s=5, instance_lower_bound_s=7.5)
    assert g.lost_to_decisions_max_s == approx(6.0 - 7.5)
