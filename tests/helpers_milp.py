"""Shared helpers of the MILP tests: small instances (hand-made, workload, random, the
recorded cases), their exhaustive enumeration through the evaluator (every plan's
simulated step time) and the check of a MILP solve against it."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from slackopt import Instance, Link, Op, Recipe, Tensor
from slackopt.plan import KEEP, RECOMP, SWAP, Plan
from slackopt.simulate import simulate
from slackopt.solver import OPTIMAL_REL_TOL
from slackopt.solvers.milp import MILP, model_floor
from slackopt.solvers.slackswap import SlackSwap
from slackopt.workloads import make
from tests.helpers import build

US = 1e-6
ms = 1e-3


def hand_instance():
    """A hand-made DAG: a tensor read by three backward ops, a recipe chain with
    transient bytes, op workspaces, a zero-byte saved tensor; slow link, 10 us latency."""
    fwd = [("f0", 1e-4), ("f1", 2e-4, 1000), ("f2", 1.5e-4), ("f3", 1e-4)]
    bwd = [("b3", 2e-4), ("b2", 3e-4, 2000), ("b1", 2e-4), ("b0", 2e-4)]
    tensors = [("a0", 4000, "f0", ["f1", "b0", "b1"], None),
               ("a1", 6000, "f1", ["f2", "b1"], (["f1"], ["a0"], 500)),
               ("a2", 3000, "f2", ["f3", "b2"], (["f2"], ["a1"])),
               ("z", 0, "f2", ["b2"], None),
               ("a3", 5000, "f3", ["b3", "b2"], (["f3"], ["a2"])),
               ("g3", 2000, "b3", ["b2"], None), ("g2", 2000, "b2", ["b1"], None),
               ("g1", 2000, "b1", ["b0"], None)]
    return build(fwd, bwd, tensors, W=1e8, lat=1e-5, duplex=0.85)


_CACHE: dict = {}


def instance(key: str):
    if key not in _CACHE:
        _CACHE[key] = {
            "chain5": lambda: make("chain", layers=5),
            "chain5-nvlink": lambda: make("chain", layers=5, link="nvlink-c2c"),
            "hand": hand_instance,
            "unet1": lambda: make("unet", layers=1),
            "unet2-b16-pcie5": lambda: make("unet", layers=2, link="pcie5", batch=16),
        }[key]()
    return _CACHE[key]


def enumerate_plans(inst, M):
    """Every plan's simulated step time (inf if infeasible), by decision tuple."""
    c = np.asarray(inst.c)
    opts = [(KEEP, SWAP, RECOMP) if np.isfinite(c[t]) else (KEEP, SWAP)
            for t in range(inst.n_saved)]
    out = {}
    for dec in itertools.product(*opts):
        ev = simulate(inst, Plan(np.array(dec, np.int8), inst.saved_names), M)
        out[dec] = ev.step_time_s if ev.feasible else float("inf")
    return out


_ENUM: dict = {}


def enumerated(key: str, frac: float):
    if (key, frac) not in _ENUM:
        inst = instance(key)
        _ENUM[key, frac] = enumerate_plans(inst, int(frac * inst.P))
    return _ENUM[key, frac]


def check_solve(inst, M, times, **params):
    """Solve with `params` and check the bound, the status and the plan against the
    enumeration `times`."""
    opt = min(times.values())
    # the exact enumeration (on by default) would prove these optima before the model
    # runs; off unless asked for, so that the model's bounds are what is checked
    r = MILP(time_limit_s=30, **{"enum_plans": 0, **params}).solve(inst, M)
    tag = f"{params}: status {r.status}, bound {r.lower_bound_s}, optimum {opt}"
    # a certified source caught above a simulated plan would be a wrong certified bound
    assert not [e for e in r.info["bound_errors"] if e["kind"] == "certified"], (
        tag, r.info["bound_errors"])
    if not math.isfinite(opt):
        assert r.status in ("infeasible", "timeout"), tag
        return r
    assert r.lower_bound_s is not None and r.lower_bound_s <= opt * (1 + 1e-9), tag
    assert r.plan is not None, tag
    ev = simulate(inst, r.plan, M)
    assert ev.feasible and ev.step_time_s == pytest.approx(r.info["upper_bound_s"], rel=1e-12)
    if params.get("warm_start", True):
        # never slower than the seed it was given
        ss = SlackSwap(min_budget_search=False).solve(inst, M).plan
        ss_ev = simulate(inst, ss, M)
        if ss_ev.feasible:
            assert ev.step_time_s <= ss_ev.step_time_s, tag
    if r.status == "optimal":
        assert ev.step_time_s <= opt * (1 + OPTIMAL_REL_TOL) + 1e-15, tag
    else:
        assert r.status == "bounded", tag
        assert r.info["gap"] > OPTIMAL_REL_TOL, tag
    return r


def case_milp_bound_above_optimum():
    """The case milp-bound-above-optimum (copied from its case file): 4 saved tensors, a 1 GB/s
    link with duplex factor 0.5 and 1 ms latency. A D2H that straddles the end of the
    forward pass runs at the duplex rate; the full tier once costed its forward-step
    share at the full-bandwidth duration, so its work-conserving and lagging rows cut off
    the optimal plan's trace: bound 13.2293 ms above the optimum 12.7776 ms."""
    ops = [Op("f0", "fwd", 1000 * US), Op("f1", "fwd", 2664 * US), Op("f1b", "fwd", 100 * US),
           Op("f2", "fwd", 840 * US), Op("b00", "bwd", 1115 * US), Op("b01", "bwd", 847 * US),
           Op("b02", "bwd", 894 * US), Op("b03", "bwd", 818 * US),
           Op("b1", "bwd", 104 * US, workspace_bytes=663_283), Op("b2", "bwd", 1519 * US),
           Op("b3", "bwd", 79 * US), Op("b30", "bwd", 100 * US), Op("b31", "bwd", 100 * US),
           Op("b32", "bwd", 100 * US), Op("b4", "bwd", 573 * US, workspace_bytes=1_927_440),
           Op("b5", "bwd", 108 * US)]
    tensors = [Tensor("v", 581_665, "f0", ("b1",)), Tensor("w", 339_950, "f0", ("b2",)),
               Tensor("c", 886_090, "f1", ("b3",)), Tensor("t", 384_274, "f1b", ("b2", "b5")),
               Tensor("tmp", 479_825, "f2", ())]
    return Instance("milp-bound", ops, tensors, Link("slow", 1e9, 0.5, 1e-3)), 2_107_001


_CASE: dict = {}


def case_times():
    if not _CASE:
        inst, M = case_milp_bound_above_optimum()
        _CASE.update(inst=inst, M=M, times=enumerate_plans(inst, M))
    return _CASE["inst"], _CASE["M"], _CASE["times"]


def random_instance(seed: int):
    """A random instance with 2-5 saved tensors from ``numpy.random.default_rng(seed)``:
    forward ops with skips (a tensor read by several later forward ops), backward
    readers in any order, some recipes (chained: a recipe may read an earlier saved
    tensor), workspaces, gradient temporaries, a slow or fast link with a duplex factor
    and a latency; and a budget between the model floor and P. Returns (instance, M)."""
    rng = np.random.default_rng(seed)
    pick = lambda xs: xs[int(rng.integers(len(xs)))]  # noqa: E731
    nf, nb = int(rng.integers(2, 6)), int(rng.integers(2, 9))
    dur = lambda: float(rng.integers(20, 3000)) * US  # noqa: E731
    ops = [Op(f"f{i}", "fwd", dur()) for i in range(nf)]
    for i in range(nb):
        ops.append(Op(f"b{i}", "bwd", dur(),
                      workspace_bytes=pick([0, 0, 0, 200_000, 1_500_000])))
    fwd = [o.name for o in ops[:nf]]
    bwd = [o.name for o in ops[nf:]]
    tensors = []
    saved: list[tuple[str, int]] = []
    for j in range(int(rng.integers(2, 6))):
        p = int(rng.integers(nf))
        later = fwd[p + 1:]
        fr = sorted(set(rng.choice(later, size=int(rng.integers(0, 3)), replace=True).tolist())) \
            if later else []
        br = sorted(set(rng.choice(bwd, size=int(rng.integers(1, 3)), replace=True).tolist()))
        size = int(rng.integers(50_000, 2_000_000)) if rng.random() > 0.1 else 0
        recipe = None
        if rng.random() < 0.5:
            inputs = [n for n, q in saved if q <= p]
            inp = [pick(inputs)] if inputs and rng.random() < 0.5 else []
            recipe = Recipe((fwd[p],), tuple(inp), pick([0, 100_000]))
        tensors.append(Tensor(f"a{j}", size, fwd[p], tuple(fr + br), recipe))
        saved.append((f"a{j}", p))
    for i in range(nb - 1):      # gradient temporaries: read by the next backward op
        if rng.random() < 0.5:
            tensors.append(Tensor(f"g{i}", int(rng.integers(1, 800_000)), bwd[i],
                                  (bwd[i + 1],)))
    link = Link("l", pick([2e8, 1e9, 1e9, 1e10, 1e11]), pick([0.5, 0.85, 1.0]),
                pick([0.0, 1e-5, 1e-3]))
    inst = Instance("rand", ops, tensors, link)
    lo = model_floor(inst)
    M = int(lo + pick([0.0, 0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 0.95]) * (int(inst.P) - lo))
    return inst, M


def same_producer() -> Instance:
    """u and v are two outputs of f0 and v's recipe reads u (the audit's minimal case)."""
    ops = [Op("f0", "fwd", 1 * ms), Op("f1", "fwd", 1 * ms), Op("b0", "bwd", 1 * ms),
           Op("b1", "bwd", 1 * ms), Op("rv", "rebuild", 0.1 * ms)]
    tensors = [Tensor("u", 1_000_000, "f0", ("b1",), Recipe(("f0",))),
               Tensor("v", 1_000_000, "f0", ("b0",), Recipe(("rv",), ("u",))),
               Tensor("tmp", 3_000_000, "f1", ())]
    return Instance("same-producer", ops, tensors, Link("slow", 1e8, 0.85, 1e-5))
