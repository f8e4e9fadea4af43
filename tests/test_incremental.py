"""Incremental evaluation (slackopt.simulate.incremental, the kernel's snapshots and
cutoff) equals a run from t = 0, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import slackopt
from slackopt import Plan, simulate
from slackopt.errors import BudgetError
from slackopt.simulate import _kernel, kernel_inputs
from slackopt.simulate.incremental import CUTOFF, OK, Incremental
from slackopt.workloads import make
from tests.helpers_sim import SETTINGS, instances


def full(inc: Incremental, dec: np.ndarray):
    """The kernel's run of `dec` from t = 0 (run_barrier_free, no snapshot)."""
    return _kernel.run_barrier_free(inc.inp, np.asarray(dec, dtype=np.int8), inc.M)


def assert_same(a, b) -> None:
    """Two kernel result tuples are equal field by field (arrays element by element)."""
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        if isinstance(x, np.ndarray):
            assert np.array_equal(x, y)
        else:
            assert x == y


def as_tuple(run):
    """The fields of an incremental Run that a full run also reports."""
    return (run.code, run.step_s, run.stall_fwd_s, run.stall_bwd_s, run.recompute_s,
            run.peak_bytes, run.h2d_stall_s, run.task_op, run.task_t)


def full_tuple(out):
    code, now, sf, sb, rc, _d2h, _h2d, _ev, peak, *_rest, h2d_stall, task_op, task_t = out
    return (code, now, sf, sb, rc, peak, h2d_stall, task_op, task_t)


def random_plan(inst, rng) -> np.ndarray:
    p = rng.dirichlet(np.ones(3))
    dec = rng.choice(3, size=inst.n_saved, p=p).astype(np.int8)
    dec[(dec == 2) & ~np.isfinite(inst.c)] = 1
    return dec


def change(inst, dec, rng, k) -> tuple[np.ndarray, np.ndarray]:
    """`dec` with k random tensors set to another of their decisions."""
    nd = dec.copy()
    ts = rng.choice(inst.n_saved, size=min(k, inst.n_saved), replace=False)
    for t in ts:
        opts = [d for d in ((0, 1, 2) if np.isfinite(inst.c[t]) else (0, 1)) if d != nd[t]]
        nd[t] = rng.choice(opts)
    return nd, ts


@pytest.mark.parametrize("workload, params, frac", [
    ("gpt2-xl", {"layers": 4}, 0.5), ("gpt2-xl", {"layers": 4}, 0.8),
    ("chain", {"n_layers": 16, "link": "pcie3"}, 0.7), ("bert-large", {"layers": 3}, 0.3),
    ("llama-7b", {"layers": 2}, 0.4), ("vgg16", {}, 0.7),
])
def test_resumed_runs_equal_full_runs_on_random_plans_and_changes(workload, params, frac):
    """From random base plans, random changes of one or two tensors (and some of five):
    the run resumed from the base's snapshot equals the run from t = 0; so does the
    resumed rebase of the changed plan, whose snapshots then serve the next change."""
    inst = make(workload, **params).lowered
    M = int(frac * inst.P)
    inc = Incremental(inst, M, snapshots=8)
    rng = np.random.default_rng(11)
    ss = np.asarray(slackopt.solve(inst, "slackswap", M).plan.decisions, dtype=np.int8)
    resumed = feasible = infeasible = 0
    for j in range(6):
        # SlackSwap's plan, lightly or not perturbed, and random plans
        base = random_plan(inst, rng) if j >= 4 else change(inst, ss, rng, 3 * j)[0]
        inc.rebase(base)
        for i in range(20):
            nd, ts = change(inst, base, rng, 1 + i % 2 if i < 16 else 5)
            run = inc.evaluate(nd, ts)
            assert_same(as_tuple(run), full_tuple(full(inc, nd)))
            resumed += run.tasks < len(run.task_op)
            feasible += run.feasible
            infeasible += not run.feasible
            assert run.feasible == simulate(inst, Plan(nd, inst.saved_names), M).feasible
        nd, ts = change(inst, base, rng, 2)
        assert_same(as_tuple(inc.rebase(nd, ts)), full_tuple(full(inc, nd)))
        nd2, ts2 = change(inst, nd, rng, 1)
        assert_same(as_tuple(inc.evaluate(nd2, ts2)), full_tuple(full(inc, nd2)))
    assert resumed > 0 and feasible > 0 and infeasible > 0  # every path exercised


@SETTINGS
@given(instances(), st.integers(0, 2**32 - 1), st.floats(0.0, 1.3))
def test_resumed_runs_equal_full_runs_on_small_random_instances(inst, seed, frac):
    """Hypothesis instances (temporaries, recipes, asymmetric links, zero sizes): every
    snapshot row, every change."""
    rng = np.random.default_rng(seed)
    M = int(frac * inst.P)
    inc = Incremental(inst, M, snapshots=4)
    base = random_plan(inst, rng)
    inc.rebase(base)
    for k in (1, 2):
        nd, ts = change(inst, base, rng, k)
        assert_same(as_tuple(inc.evaluate(nd, ts)), full_tuple(full(inc, nd)))
        assert_same(as_tuple(inc.evaluate(nd)), full_tuple(full(inc, nd)))


@pytest.mark.parametrize("schedule, stage", [("1f1b", 0), ("gpipe", 1), ("zb-h1", 0)])
def test_resumed_runs_equal_full_runs_on_pipeline_stages(schedule, stage):
    """A pipeline stage (several microbatches, units with earliest starts, prefetches as
    soon as a forward unit ends): snapshots only in the forward prefix before the first
    unit ends, and resumed runs equal to full ones."""
    from slackopt.stage import build_stage

    inst = build_stage(make("gpt2-xl", layers=2), schedule, stage, 2, 4, hop_s=1e-4).lowered
    assert inc_prefix_ok(inst)
    rng = np.random.default_rng(2)
    for frac in (0.4, 0.8):
        inc = Incremental(inst, int(frac * inst.P), snapshots=6)
        for _ in range(4):
            base = random_plan(inst, rng)
            inc.rebase(base)
            for k in (1, 2, 1, 2, 5):
                nd, ts = change(inst, base, rng, k)
                assert_same(as_tuple(inc.evaluate(nd, ts)), full_tuple(full(inc, nd)))


def inc_prefix_ok(inst) -> bool:
    """The snapshot prefix ends at or before the first op that ends a forward unit and
    before the first backward op."""
    p = Incremental(inst, inst.P).prefix
    return p <= int(np.asarray(inst.saved_fwd_end_idx).min()) and \
        not np.asarray(inst.is_bwd)[: p + 1].any()


def test_the_snapshot_is_the_state_at_its_task():
    """A resumed run starts where the base run was: a plan equal to the base resumed from
    its last snapshot simulates only the tasks from that snapshot on, and ends where the
    base ended."""
    inst = make("gpt2-xl", layers=4).lowered
    M = int(0.4 * inst.P)
    inc = Incremental(inst, M, snapshots=8)
    dec = random_plan(inst, np.random.default_rng(3))
    base = inc.rebase(dec)
    at = inc._snaps.at
    assert inc._snaps.taken.all() and at[0] == 0 and at[-1] == inst.n_fwd - 1 == inc.prefix
    run = inc.evaluate(dec, np.zeros(0, dtype=np.int64))  # no change: last snapshot
    assert run.step_s == base.step_s and run.code == base.code
    if base.feasible:
        assert run.tasks == len(run.task_op) - at[-1]


def test_cutoff_stops_only_runs_that_cannot_end_below_it():
    """A run cut off at c would have ended after c; a cutoff a relative 1e-9 above the
    step changes nothing (the bound is a float sum of the same durations, equal to the
    step up to rounding)."""
    inst = make("gpt2-xl", layers=4).lowered
    M = int(0.8 * inst.P)
    inc = Incremental(inst, M)
    rng = np.random.default_rng(5)
    cut = kept = 0
    for _ in range(40):
        dec = random_plan(inst, rng)
        ref = inc.evaluate(dec)
        if ref.code != OK:
            continue
        same = inc.evaluate(dec, cutoff=ref.step_s * (1 + 1e-9))
        assert same.code == OK and same.step_s == ref.step_s
        kept += 1
        lower = inc.evaluate(dec, cutoff=ref.step_s * (1 - 1e-6))
        assert lower.code == CUTOFF
        assert lower.fail_task >= 0
        cut += 1
    assert cut > 0 and kept > 0


def test_bad_input_is_refused():
    inst = make("tiny")
    with pytest.raises(BudgetError):
        Incremental(inst, -1)
    inc = Incremental(inst, inst.P)
    with pytest.raises(ValueError, match="decisions"):
        inc.evaluate(np.zeros(inst.n_saved + 1, dtype=np.int8))
    with pytest.raises(ValueError, match="increase"):
        _kernel.snapshots([3, 1], inst.n_saved)


def test_run_barrier_free_is_simulate_from_without_snapshots():
    """The public entry point keeps its result: equal to simulate_from started at t = 0
    with no snapshot rows and no cutoff."""
    inst = make("bert-large", layers=3)
    fs = kernel_inputs(inst)
    dec = random_plan(inst, np.random.default_rng(1))
    M = int(0.3 * inst.P)
    a = _kernel.run_barrier_free(fs, dec, M)
    b = _kernel.simulate_from(fs, dec, M, _kernel.snapshots([], inst.n_saved), -1, False,
                              np.inf)
    assert_same(a, b)
