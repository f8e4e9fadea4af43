"""The barrier-free runtime's action log (slackopt.simulate.barrier_free_actions): the run
it logs is the evaluator's, and the log says what a runtime that replays it must do."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from slackopt import Plan, simulate
from slackopt.io import load_instance
from slackopt.plan import KEEP, RECOMP, SWAP
from slackopt.simulate import barrier_free_actions
from slackopt.simulate.actions import ACTION_KINDS
from slackopt.stage import build_stage
from tests.helpers import build
from tests.helpers_milp import random_instance


def _plans(inst, rng):
    yield Plan.keep_all(inst)
    yield Plan.uniform(inst, SWAP)
    for _ in range(3):
        dec = rng.choice(3, inst.n_saved).astype(np.int8)
        dec[(dec == RECOMP) & ~np.isfinite(inst.c)] = KEEP
        yield Plan(dec, inst.saved_names)


@pytest.mark.parametrize("seed", range(12))
def test_log_is_the_evaluators_run(seed):
    """On random instances, plans and budgets: the evaluation is the reference engine's
    field by field; the peak is the largest of the bytes in use at task starts and at
    admitted prefetches; tags and times never decrease; every admitted prefetch arrives
    before the next one of its tensor is admitted; every offload that starts ends, but at
    most one, in flight when the last task ends; no copies for keep and recomp tensors."""
    inst, M = random_instance(seed)
    rng = np.random.default_rng(seed)
    for plan in _plans(inst, rng):
        for m in (M, inst.P):
            log = barrier_free_actions(inst, plan, m)
            ev = simulate(inst, plan, m, engine="reference")
            assert log.evaluation == ev
            n_tasks = len(log.task_op)
            assert len(log.saved_timeline) == len(log.task_used_bytes) == \
                len(log.task_start_s) == (n_tasks if ev.feasible else len(log.task_start_s))
            tags = [a.tag for a in log.actions]
            assert tags == sorted(tags) and all(0 <= t <= n_tasks for t in tags)
            assert {a.kind for a in log.actions} <= set(ACTION_KINDS)
            times = [a.time_s for a in log.actions]
            assert times == sorted(times)
            if ev.feasible:
                grows = log.task_used_bytes + [a.used_bytes for a in log.actions
                                               if a.kind == "h2d"]
                assert max(grows, default=0) == ev.peak_bytes
                unended = 0
                for t in range(inst.n_saved):
                    kinds = [a.kind for a in log.actions if a.saved == t]
                    assert kinds.count("h2d") == kinds.count("h2d_end")
                    assert kinds.count("d2h") - kinds.count("d2h_end") in (0, 1)
                    unended += kinds.count("d2h") - kinds.count("d2h_end")
                    fetch = [k for k in kinds if k in ("h2d", "h2d_end")]
                    assert fetch == ["h2d", "h2d_end"] * (len(fetch) // 2)
                    if plan.decisions[t] != SWAP:
                        assert not {"d2h", "h2d", "evict", "claim"} & set(kinds)
                assert unended <= 1


def test_hand_timeline():
    """Two forward ops, two backward ops, one swapped tensor of 100 B on a 100 B/s link
    without latency. At 0.5 s f0 ends and f1 starts (task 1: tag 2 from then on), then the
    D2H starts (0.5..1.5 s); the device copy is freed when f1, its forward reader, ends
    (2.5 s); the H2D is admitted at once (b0 waits for it; 100 B in use) and arrives at
    3.5 s, when b0 starts; b0's end (4.5 s) releases x, tagged 3 (b0 started, b1 not).
    x is counted from f0's start (its output is allocated when it starts)."""
    inst = build([("f0", 0.5), ("f1", 2.0)], [("b0", 1.0), ("b1", 1.0)],
                 [("x", 100, "f0", ["f1", "b0"], None)], W=100.0, duplex=1.0)
    log = barrier_free_actions(inst, Plan.uniform(inst, SWAP), 10_000)
    got = [(a.tag, a.kind, a.time_s, a.used_bytes) for a in log.actions]
    assert got == [(2, "d2h", 0.5, 0), (2, "d2h_end", 1.5, 0), (2, "to_host", 2.5, 0),
                   (2, "h2d", 2.5, 100), (2, "h2d_end", 3.5, 0), (3, "release", 4.5, 0)]
    assert log.task_start_s == [0.0, 0.5, 3.5, 4.5]
    assert log.saved_timeline == [100, 100, 100, 0]
    assert log.task_used_bytes == [100, 100, 100, 0]
    assert log.evaluation.step_time_s == pytest.approx(5.5)
    assert log.evaluation.peak_bytes == 100


def replayed_timeline(inst, log) -> list[int]:
    """The saved bytes on the device after each task started, from the log alone, as a
    runtime that replays it holds them (slackopt.torch.runtime.PlanRuntime): a saved
    tensor's storage appears when its producer runs (a forward task) or its rebuild task
    runs, and goes with ``to_host``, ``fwd_free``, ``evict`` and ``release``; ``h2d``
    brings a buffer, ``claim`` hands the produced storage to the readers."""
    low = inst.lowered if inst.saved_unit is not None else inst
    prod: dict[int, list[int]] = {}
    for t, op in enumerate(low.saved_prod_idx.tolist()):
        prod.setdefault(op, []).append(t)
    orig, dev = set(), set()
    out, ev = [], 0
    for k, (op, t) in enumerate(zip(log.task_op, log.task_t, strict=True)):
        while ev < len(log.actions) and log.actions[ev].tag <= k:
            a = log.actions[ev]
            ev += 1
            if a.kind in ("to_host", "fwd_free"):
                orig.discard(a.saved)
            elif a.kind == "h2d":
                dev.add(a.saved)
            elif a.kind == "claim":
                orig.discard(a.saved)
                dev.add(a.saved)
            elif a.kind == "evict":
                dev.discard(a.saved)
            elif a.kind == "release":
                orig.discard(a.saved)
                dev.discard(a.saved)
        if op < 0:
            dev.add(t)
        elif not low.is_bwd[op]:
            orig.update(prod.get(op, ()))
        out.append(sum(int(low.s[x]) for x in orig | dev))
    return out


@pytest.mark.parametrize(("schedule", "stage"), [("1f1b", 0), ("1f1b", 1), ("gpipe", 0)])
def test_a_stage_log_says_everything_a_runtime_must_do(schedule, stage):
    """Pipeline stages of the tiny GPT (p = 2, m = 4), every plan kind at P and 0.6 P: a
    runtime that replays the log holds, after every task, the saved bytes the evaluator
    counts; every recomputed tensor's forward copy is freed once (``fwd_free``), after the
    last forward reader in its own microbatch's forward unit, wherever that unit stands
    in the schedule."""
    base = load_instance(Path(__file__).resolve().parents[1]
                         / "instances/teaching/tiny-gpt_a100-pcie4.json")
    inst = build_stage(base, schedule, stage, 2, 4)
    low = inst.lowered if inst.saved_unit is not None else inst
    rng = np.random.default_rng(stage)
    for plan in (*_plans(inst, rng), Plan(np.where(np.isfinite(inst.c), RECOMP, KEEP)
                                          .astype(np.int8), inst.saved_names)):
        for m in (inst.P, int(0.6 * inst.P)):
            log = barrier_free_actions(inst, plan, m)
            if not log.evaluation.feasible:
                continue
            assert replayed_timeline(inst, log) == log.saved_timeline
            dec = plan.lowered(inst).decisions if inst.saved_unit is not None \
                else plan.decisions
            frees = [a for a in log.actions if a.kind == "fwd_free"]
            assert sorted(a.saved for a in frees) == np.flatnonzero(dec == RECOMP).tolist()
            for a in frees:
                last_fwd = int(low.saved_last_fwd_idx[a.saved])
                assert log.task_op[a.tag - 1] == last_fwd
