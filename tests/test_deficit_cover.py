"""The joint deficit cover (solvers/milp/bounds/deficit_cover.py; issue 47, item 2).

Checked: its certified value with every line of f_k is the optimum of the model,
computed here from the instance's data by brute force over every recomp set (the small
random and mixed instances of the plan-by-plan soundness tests); with the default lines
it is at most that and never below the deficit bound's closed form; never above the
simulated step of any plan (every plan of the small instances, the references' plan of
a U-Net of the shapes suite). The model's rows hold for every plan's own point in
tests/test_bound_point.py; the search runs it as phase "deficit_cover".
"""

from __future__ import annotations

import itertools
import json
import math
import time
from pathlib import Path

import numpy as np
import pytest

from slackopt import Instance, Link
from slackopt.io import load_instance, load_plan
from slackopt.plan import RECOMP
from slackopt.simulate import simulate
from slackopt.solvers.milp.bounds.deficit import deficit_bound
from slackopt.solvers.milp.bounds.deficit_cover import (
    build_deficit_cover,
    deficit_cover_bound,
    deficit_cover_point,
)
from slackopt.solvers.milp.linear.lin import ModelTimeout
from slackopt.solvers.milp.model.steps import model_floor
from tests.helpers_milp import enumerate_plans, random_instance
from tests.test_bound_point import check_plan, mixed_instance

SHAPES = Path(__file__).resolve().parent.parent / "instances" / "shapes"


def cover_data(inst, M):
    """The module docstring's model from the instance's arrays: (items, cost c_t s,
    bytes counted absent [ops x items], backward flag per op, excess per op bytes,
    taken back bytes [ops x items x items] when both are recomp, and per op the
    function ``tau_needed(bytes)``: the least time in which the D2H copies of its B_k
    (largest s / w first, fractions allowed) move those bytes, inf when they cannot,
    and ``tau_k``), over the ops with an excess."""
    s = np.asarray(inst.s, dtype=np.int64)
    c = np.asarray(inst.c, dtype=np.float64)
    W, L = float(inst.link.d2h_bytes_per_s), float(inst.link.copy_latency_s)
    r0 = float(np.min(inst.r))
    tau = np.maximum(0.0, np.asarray(inst.start_s, dtype=np.float64) - r0)
    excess = np.asarray(inst.keep_all_profile, dtype=np.int64) - M
    ops = [k for k in range(inst.n_ops) if excess[k] > 0]
    items = [t for t in range(inst.n_saved) if np.isfinite(c[t]) and s[t] > 0]
    lastf, firstb = inst.saved_last_fwd_idx, inst.saved_first_bwd_idx
    lastb = inst.saved_last_bwd_idx
    A = np.array([[s[t] if lastf[t] < k < firstb[t] else 0 for t in items] for k in ops],
                 dtype=np.float64).reshape(len(ops), len(items))
    bwd = np.array([k >= inst.n_fwd for k in ops])
    # rebuilt early: u read by the recipe of t, both recomp, the earliest such t per u
    first_t = {}
    for t in items:
        for u in inst.recipe_inputs[t]:
            u = int(u)
            if u != t and u in items and firstb[t] < firstb[u]:
                first_t[u] = min(first_t.get(u, (firstb[t], t)), (firstb[t], t))
    back = np.zeros((len(ops), len(items), len(items)))
    for u, (_, t) in first_t.items():
        for i, k in enumerate(ops):
            if firstb[t] <= k < firstb[u]:
                back[i, items.index(t), items.index(u)] = s[u]

    def needed(k):
        copies = sorted(((float(s[t]), L + s[t] / W) for t in range(inst.n_saved)
                         if s[t] > 0 and lastf[t] < k < lastb[t]),
                        key=lambda sw: -sw[0] / sw[1])

        def tau_needed(nbytes):
            done, at = 0.0, 0.0
            for sz, wt in copies:
                if done + sz >= nbytes:
                    return at + (nbytes - done) * wt / sz
                done, at = done + sz, at + wt
            return math.inf
        return tau_needed

    return (items, c[items], A, bwd, excess[ops].astype(np.float64), back,
            [needed(k) for k in ops], tau[ops])


def brute_force(inst, M) -> float:
    """The model's optimum (s) with every line of f_k, over every recomp set: for each,
    the least stall with which every op's link moves what recompute leaves."""
    items, cost, A, bwd, excess, back, needed, tau = cover_data(inst, M)
    best = math.inf
    for x in itertools.product((0, 1), repeat=len(items)):
        xv = np.array(x, dtype=np.float64)
        paid = float(cost @ xv)
        left = excess - A @ xv + np.einsum("kij,i,j->k", back, xv, xv)
        stall = 0.0
        for i in np.flatnonzero(left > 0):
            stall = max(stall, needed[i](left[i]) - tau[i] - (paid if bwd[i] else 0.0))
        best = min(best, paid + stall)
    return best


LINKS = (1e4, 1e7, 1e8)
"""D2H bandwidths (B/s) the random instances are also checked on: from no help by the
link (the bound is a recompute-only cover) to some."""


def cases():
    """(label, instance, M): the random instances of tests/helpers_milp.py, also on the
    links LINKS at 0.1 and 0.4 of the way from the model floor to P, and the mixed
    generator of tests/test_bound_point.py at four budgets from the model floor to 0.6 of
    the way to P; where the model exists (some op has a deficit)."""
    out = [(f"random_instance({seed})", *random_instance(seed)) for seed in range(400)]
    for seed in range(100):
        base = random_instance(seed)[0]
        for W in LINKS:
            inst = Instance(base.name, list(base.ops), list(base.tensors), Link("l", W))
            lo = model_floor(inst)
            out += [(f"random_instance({seed}), W = {W:g}, {f}", inst,
                     int(lo + f * (int(inst.P) - lo))) for f in (0.1, 0.4)]
    for seed in range(60):
        inst = mixed_instance(seed).lowered
        lo = model_floor(inst)
        out += [(f"mixed_instance({seed}), {f}", inst, int(lo + f * (int(inst.P) - lo)))
                for f in (0.0, 0.2, 0.4, 0.6)]
    return [(lb, inst, M) for lb, inst, M in out if build_deficit_cover(inst, M) is not None]


def test_brute_force_optimum_below_every_plan():
    """Where the model exists: the certified bound with every line of f_k is T* plus the
    brute force optimum and at most every plan's simulated step; with MAX_LINES lines it
    is at most that and at least the deficit bound; on many, strictly above it."""
    checked = above = 0
    for label, inst, M in cases():
        every, info = deficit_cover_bound(inst, M, 30.0, max_lines=None)
        assert info["stopped"] == "closed", (label, info)
        exact = float(inst.ideal_time_s) + brute_force(inst, M)
        assert every == pytest.approx(exact, rel=1e-7), label
        bound, info = deficit_cover_bound(inst, M, 30.0)     # MAX_LINES lines: below
        assert info["stopped"] == "closed", (label, info)
        assert bound <= every * (1 + 1e-9), label
        closed_form = deficit_bound(inst, M)
        assert bound >= closed_form * (1 - 1e-8), label    # the 1e-9 shave of seconds_below
        steps = [v for v in enumerate_plans(inst, M).values() if math.isfinite(v)]
        assert not steps or every <= min(steps), label
        checked += 1
        above += bound > closed_form * (1 + 1e-6)
    assert checked >= 400
    assert above >= 200


def test_a_unet_and_its_reference_plan():
    """shapes U-Net (4 levels, PCIe 4) at the references' 0.5 P budget: the bound lifts
    the deficit bound by more than 1% of T*; the references' plan (recomp 10 tensors)
    maps to a point of the model that meets every row, whose value (the stall this
    module's formula needs for its recomp set, plus their rebuild time) lies between the
    bound and the plan's simulated step."""
    name = "shapes-unet4_a100-pcie4"
    inst = load_instance(SHAPES / f"{name}.json.gz")
    ref = next(r for r in json.loads((SHAPES / "references.json").read_text())["rows"]
               if r["instance_name"] == name and r["budget_fraction"] == 0.5)
    M = int(ref["budget_bytes"])
    plan = load_plan(SHAPES / ref["best_plan"], inst)
    bound, info = deficit_cover_bound(inst, M, 60.0)
    assert info["stopped"] == "closed"
    T_star = float(inst.ideal_time_s)
    assert bound - deficit_bound(inst, M) > 0.01 * T_star
    # the model's value at the plan's recomp set
    items, cost, A, bwd, excess, back, needed, tau = cover_data(inst, M)
    xv = np.array([1.0 if plan.decisions[t] == RECOMP else 0.0 for t in items])
    paid = float(cost @ xv)
    left = excess - A @ xv + np.einsum("kij,i,j->k", back, xv, xv)
    stall = max([0.0] + [needed[i](left[i]) - tau[i] - (paid if bwd[i] else 0.0)
                         for i in np.flatnonzero(left > 0)])
    step = simulate(inst, plan, M).step_time_s
    assert bound <= T_star + paid + stall <= step * (1 + 1e-12)   # the sums: rounding only
    assert step == ref["best_step_s"]
    lin, _ = build_deficit_cover(inst, M)
    assert check_plan(inst, M, plan.decisions, [("deficit cover", lin, deficit_cover_point)],
                      name)


def test_no_model_beyond_the_size_limit(monkeypatch: pytest.MonkeyPatch):
    """Over MAX_NONZEROS the builder returns None and the source reports no bound (the
    U-Net's model has about 400 nonzeros)."""
    from slackopt.solvers.milp.bounds import deficit_cover

    inst = load_instance(SHAPES / "shapes-unet4_a100-pcie4.json.gz")
    M = int(0.5 * inst.P)
    lin, _ = build_deficit_cover(inst, M)
    n = lin.stats()["nonzeros"]
    monkeypatch.setattr(deficit_cover, "MAX_NONZEROS", n - 1)
    assert build_deficit_cover(inst, M) is None
    assert deficit_cover_bound(inst, M, 5.0) == (None, {"status": "no model"})
    monkeypatch.setattr(deficit_cover, "MAX_NONZEROS", n)
    assert build_deficit_cover(inst, M) is not None


def test_past_the_deadline_nothing_is_built(monkeypatch: pytest.MonkeyPatch):
    """Past its deadline the source returns at once with no bound (the certified bound
    only weakens), and a build that passes it mid-way stops (tests/test_time_limits.py
    states the rule for the other bounds)."""
    from slackopt.solvers.milp.bounds import deficit_cover

    inst = load_instance(SHAPES / "shapes-unet4_a100-pcie4.json.gz")
    M = int(0.5 * inst.P)

    def refuse(*args, **kwargs):
        raise AssertionError("built past the deadline")

    with monkeypatch.context() as m:
        m.setattr(deficit_cover, "build_deficit_cover", refuse)
        past = time.perf_counter() - 1.0
        assert deficit_cover_bound(inst, M, 10.0, deadline=past) == (
            None, {"status": "no time left to build the model"})
    with pytest.raises(ModelTimeout):
        build_deficit_cover(inst, M, deadline=time.perf_counter() - 1.0)
