"""Baselines: keep-all and block checkpointing (paper sec. 4.1, docs/model.md)."""

from __future__ import annotations

import numpy as np
import pytest

import slackopt.solvers.baselines as bl
from slackopt import get_solver, simulate, solve
from slackopt.bisection import smallest_true
from slackopt.plan import KEEP, RECOMP, Plan
from slackopt.solvers.baselines import Checkpoint, KeepAll, checkpoint_blocks, checkpoint_plan
from tests.planner_instances import blocks


@pytest.fixture(scope="module")
def tiny():
    wl = pytest.importorskip("slackopt.workloads")
    if hasattr(wl, "make"):
        return wl.make("tiny")
    return pytest.importorskip("slackopt.workloads.transformer").tiny()


def test_registered():
    assert isinstance(get_solver("keep-all"), KeepAll)
    assert isinstance(get_solver("checkpoint"), Checkpoint)


# --------------------------------------------------------------------------- keep_all
def test_keep_all():
    inst = blocks()
    res = KeepAll().solve(inst, inst.P)
    # T = T* and T* bounds every plan: a proven optimum (SolveResult's status words)
    assert res.status == "optimal" and res.plan == Plan.keep_all(inst)
    assert res.info["gap"] == 0.0
    ev = simulate(inst, res.plan, inst.P)
    assert ev.feasible and ev.step_time_s == pytest.approx(inst.ideal_time_s)
    res = solve(inst, "keep-all", inst.P - 1)
    assert res.status == "infeasible"
    assert res.info["min_budget_bytes"] == inst.P
    assert not res.evaluation.feasible


# --------------------------------------------------------------------------- checkpoint
def test_checkpoint_plan_structure():
    inst = blocks(L=4)
    assert checkpoint_blocks(inst) == [0, 1, 2, 3]
    pl = checkpoint_plan(inst, 2)
    dec = dict(zip(inst.saved_names, pl.decisions.tolist(), strict=True))
    # Blocks 0 and 1 recompute a, b and keep their input; the rest is kept.
    assert [dec[n] for n in ("a0", "b0", "a1", "b1")] == [RECOMP] * 4
    assert all(dec[n] == KEEP for n in ("x0", "x1", "x2", "x3", "x4", "z", "a2", "b2", "a3", "b3"))
    assert checkpoint_plan(inst, 0) == Plan.keep_all(inst)


def test_checkpoint_keeps_block_inputs_and_head_tensors(tiny):
    pl = checkpoint_plan(tiny, len(checkpoint_blocks(tiny)))
    cats = tiny.saved_categories
    layers = tiny.saved_layers
    for k, dk in enumerate(pl.decisions.tolist()):
        if cats[k] in ("block_input", "block_output") or not np.isfinite(tiny.c[k]) or (
                layers[k] < 0):
            assert dk == KEEP, tiny.saved_names[k]
        elif layers[k] >= 0:
            assert dk == RECOMP, tiny.saved_names[k]


def smallest_feasible_k(inst, M):
    for k in range(len(checkpoint_blocks(inst)) + 1):
        if simulate(inst, checkpoint_plan(inst, k), M).feasible:
            return k
    return None


@pytest.mark.parametrize("M", range(20, 60, 3))
def test_checkpoint_picks_the_smallest_k(M):
    inst = blocks(L=4)
    res = solve(inst, "checkpoint", M)
    k = smallest_feasible_k(inst, M)
    if k is None:
        assert res.status == "infeasible"
        full = checkpoint_plan(inst, 4)
        assert res.info["min_budget_bytes"] == simulate(inst, full, inst.P).peak_bytes
        assert res.info["min_budget_bytes"] > M
    else:  # k = 0 is keep-all at M >= P: T = T*, proven optimal
        assert res.status == ("optimal" if k == 0 else "feasible")
        assert res.info["k"] == k
        assert res.evaluation.feasible and res.evaluation.peak_bytes <= M


@pytest.mark.parametrize("frac", [0.9, 0.6, 0.4, 0.2])
def test_checkpoint_on_tiny(tiny, frac):
    M = int(frac * tiny.P)
    res = solve(tiny, "checkpoint", M)
    k = smallest_feasible_k(tiny, M)
    assert res.info["k"] == (k if k is not None else len(checkpoint_blocks(tiny)))
    if res.status == "feasible":
        assert res.evaluation.feasible and res.evaluation.peak_bytes <= M


def test_checkpoint_scans_k_once_each_and_stops_at_the_first_fit(monkeypatch):
    inst = blocks(L=16)
    calls = []
    real = bl.simulate

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(bl, "simulate", counting)
    M = int(0.7 * inst.P)
    res = Checkpoint().solve(inst, M)
    assert res.status == "feasible"
    k = smallest_feasible_k(inst, M)
    assert res.info["k"] == k and len(calls) == k == res.info["evaluations"]


def test_checkpoint_finds_k_when_the_peak_is_not_monotone_in_k():
    """On the default chain every activation is rebuildable, so recomputing the last
    blocks rebuilds the whole chain at the start of the backward pass: the peaks of the
    plans k = 0..8 are not monotone (k = 8 is keep-all's P again). A bisection that
    first tests k = L would call 0.7 P infeasible; the scan finds the smallest k."""
    from slackopt import workloads as wl
    inst = wl.make("chain")
    peaks = [simulate(inst, checkpoint_plan(inst, k), bl.UNBOUNDED_BYTES).peak_bytes
             for k in range(9)]
    assert peaks[0] == peaks[8] == inst.P and min(peaks) < 0.7 * inst.P
    M = int(0.7 * inst.P)
    k = next(k for k in range(9) if peaks[k] <= M)
    res = solve(inst, "checkpoint", M)
    assert res.status == "feasible" and res.info["k"] == k
    assert res.evaluation.feasible and res.evaluation.peak_bytes == peaks[k] <= M
    low = solve(inst, "checkpoint", min(peaks) - 1)
    assert low.status == "infeasible" and low.info["min_budget_bytes"] == min(peaks)
    assert low.info["k"] == peaks.index(min(peaks))
    assert solve(inst, "checkpoint", min(peaks)).status == "feasible"


def test_smallest_true():
    thr = 37
    seen = []

    def pred(x):
        seen.append(x)
        return x >= thr

    assert smallest_true(pred, 0, 100) == thr
    assert len(seen) <= 7
    assert smallest_true(lambda x: x >= thr, 0, 1000, tol=10) - thr in range(0, 11)
    with pytest.raises(ValueError):
        smallest_true(pred, 5, 5)


def test_paper_checkpoint_gpt2_xl():
    from slackopt import workloads as wl
    inst = wl.make("gpt2-xl")
    # Sec. 4.2: checkpointing degrades to 80-82% at 15% of the peak and cannot go lower.
    res = solve(inst, "checkpoint", 0.15)
    assert res.status == "feasible" and 0.79 <= res.evaluation.throughput <= 0.84
    res = solve(inst, "checkpoint", 0.10)
    assert res.status == "infeasible"
    assert 0.10 * inst.P < res.info["min_budget_bytes"] < 0.15 * inst.P
