"""The admission-aware node bounds of the enumeration (solvers/milp/bounds/admission.py) against
the evaluator, plan by plan, and the enumeration's gap passes against brute force.

The claim checked (the module docstring's): for a node (some decisions fixed) and a
cutoff U, every completion whose simulated step T is below U has
``T >= T* + (rebuild time of the fixed recomp tensors) + F + B``. For a plan p with step
T_p, the node that fixes any subset of p's decisions, with U just above T_p, has p among
those completions, so ``T_p >= T* + cost + admission_bound`` must hold; F alone must not
exceed p's forward stall. Checked for every plan (or a fixed sample) of the instances of
tests/test_bound_point.py (random, mixed and full-schema generated ones, with every
subset of a few sizes fixed), of the recorded soundness cases, and on samples of plans
and partial vectors of the suite's VGG-16 at 0.5 and 0.7 P, where the bound prunes
(its own 27 saved tensors are beyond brute force).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from slackopt.io import load_instance
from slackopt.plan import KEEP, RECOMP, SWAP, Plan
from slackopt.simulate import _kernel as fast
from slackopt.simulate import kernel_inputs, simulate
from slackopt.solvers.milp import MILP
from slackopt.solvers.milp.bounds.admission import (
    _d2h_ends,
    admission_arrays,
    admission_bound,
    fwd_stall_lb,
)
from slackopt.solvers.milp.model.steps import model_floor
from slackopt.solvers.milp.search.enumeration import ENUM_GAPS, BranchAndBound, _footprints
from slackopt.solvers.milp.search.incumbent import Incumbent
from tests.helpers_milp import enumerate_plans, instance
from tests.test_bound_point import DATA, instances, plans

ROOT = Path(__file__).resolve().parents[1]
VGG = ROOT / "instances" / "bench"


class Checker:
    """The admission bound of nodes of one (lowered) instance at budget M."""

    def __init__(self, inst, M: int) -> None:
        self.inst, self.M = inst, int(M)
        self.inp = kernel_inputs(inst)
        self.adm = admission_arrays(inst, self.inp)
        self.base, self.keep_x, self.rec_x = _footprints(inst)
        self.c = np.asarray(inst.c, dtype=np.float64)
        self.T_star = float(inst.ideal_time_s)

    def node(self, dec: np.ndarray, fixed: np.ndarray) -> tuple[np.ndarray, float]:
        """The node's floor profile (bytes) and the rebuild time of its fixed recomp
        tensors (s)."""
        prof = (self.base + self.keep_x[fixed & (dec == KEEP)].sum(axis=0)
                + self.rec_x[fixed & (dec == RECOMP)].sum(axis=0))
        return prof, float(self.c[fixed & (dec == RECOMP)].sum())

    def check(self, dec: np.ndarray, fixed: np.ndarray, T: float, stall_fwd: float,
              where: str) -> float:
        """Assert the bound for the plan `dec` (step T, forward stall, s) at the node
        that fixes `fixed`; returns the bound's F + B (s)."""
        prof, cost = self.node(dec, fixed)
        if prof.max() > self.M:     # the memory bound rules the node out; no claim
            return 0.0
        x = admission_bound(dec, fixed, prof, self.keep_x, self.M,
                            T * (1 + 1e-12) - self.T_star, self.adm)
        assert self.T_star + cost + x <= T * (1 + 1e-9), (
            f"{where}: plan {dec.tolist()}, fixed {fixed.astype(int).tolist()}: "
            f"T* + rebuilds + F + B = {self.T_star + cost + x} s above the step {T} s")
        a = self.adm
        Q = _d2h_ends(dec, fixed, a[3], a[15], a[16], a[19], a[20],
                       np.ones(len(dec), dtype=np.bool_))
        f = fwd_stall_lb(dec, fixed, prof, self.M, a[0], a[3], a[2], a[17], Q)
        assert f <= stall_fwd * (1 + 1e-9) + 1e-15, (
            f"{where}: plan {dec.tolist()}, fixed {fixed.astype(int).tolist()}: "
            f"F = {f} s above the forward stall {stall_fwd} s")
        return x


def subsets(n: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Every decision fixed, none, each single tensor, and three random subsets."""
    out = [np.ones(n, dtype=np.bool_), np.zeros(n, dtype=np.bool_)]
    for t in range(n):
        one = np.zeros(n, dtype=np.bool_)
        one[t] = True
        out.append(one)
    return out + [rng.random(n) < 0.5 for _ in range(3)]


def check_instance(label: str, inst, budgets=(), seed: int = 0) -> tuple[int, int]:
    """Check every plan (or the sample of tests/test_bound_point.plans) of `inst` at the
    floor and 0.4 and 0.8 of the way to P; (nodes checked, nodes with a positive bound)."""
    inst = inst.lowered
    if inst.n_saved == 0:
        return 0, 0
    rng = np.random.default_rng(seed)
    lo = int(model_floor(inst))
    Ms = sorted({int(lo + f * (int(inst.P) - lo)) for f in (0.0, 0.4, 0.8)} | set(budgets))
    n = pos = 0
    for M in Ms:
        ck = Checker(inst, M)
        for dec in plans(inst, seed):
            d = np.array(dec, dtype=np.int8)
            r = fast.run_barrier_free(ck.inp, d, M)
            if r[0] != 0:
                continue
            for fx in subsets(inst.n_saved, rng):
                x = ck.check(d, fx, float(r[1]), float(r[2]), f"{label}, M = {M}")
                n += 1
                pos += x > 0
    return n, pos


def test_bound_holds_on_every_plan_of_the_generated_instances():
    """Random, mixed and full-schema instances (tests/test_bound_point.instances): every
    plan, every node of a few fixed subsets; the bound must be positive somewhere."""
    n = pos = 0
    for label, inst in instances():
        a, b = check_instance(label, inst)
        n, pos = n + a, pos + b
    assert n > 2000 and pos > 50, (n, pos)


def test_bound_holds_on_the_soundness_cases():
    """The cases of ../shared/cases/milp-soundness (tests/data/milp_soundness)."""
    n = 0
    for f in sorted(DATA.glob("*.json")):
        inst = load_instance(f)
        M = inst.meta.get("budget_bytes")
        n += check_instance(f.stem, inst, [] if M is None else [int(M)])[0]
    assert n > 200


@pytest.mark.parametrize("target", ["a100-pcie4", "gh200-gh200-c2c"])
@pytest.mark.parametrize("frac", [0.5, 0.7])
def test_bound_holds_and_prunes_on_vgg16(target, frac):
    """The suite's VGG-16 (27 saved tensors, 85 ops): random plans, each at every
    decision fixed and at a random half fixed; the bound is positive on many (the rows
    the enumeration certifies only with it)."""
    inst = load_instance(VGG / f"vgg16-b128_{target}.json.gz").lowered
    M = int(frac * inst.P)
    ck = Checker(inst, M)
    cfin = np.isfinite(ck.c)
    rng = np.random.default_rng(7)
    n = pos = 0
    while n < 300:
        u = rng.random(inst.n_saved)
        p = rng.uniform(0.2, 0.6)
        d = np.where(u < p, SWAP, np.where(u < p + (1 - p) / 2, KEEP, RECOMP)).astype(np.int8)
        d[~cfin & (d == RECOMP)] = KEEP
        r = fast.run_barrier_free(ck.inp, d, M)
        if r[0] != 0:
            continue
        for fx in (np.ones(inst.n_saved, dtype=np.bool_), rng.random(inst.n_saved) < 0.5):
            pos += ck.check(d, fx, float(r[1]), float(r[2]), f"vgg16 {target} {frac} P") > 0
            n += 1
    assert pos > 20, pos


@pytest.mark.parametrize("key,frac", [("hand", 0.75), ("chain5", 0.8), ("unet1", 0.75),
                                      ("chain5-nvlink", 0.65)])
@pytest.mark.parametrize("gap", [0.004, 0.05])
def test_gap_pass_bound_against_brute_force(key, frac, gap):
    """A complete pass with a gap proves ``U / (1 + gap)``: at most the brute-force
    optimum, at least it / (1 + gap), from the worst and from no starting plan."""
    inst = instance(key)
    M = int(frac * inst.P)
    times = enumerate_plans(inst, M)
    opt = min(times.values())
    worst = max((t, d) for d, t in times.items() if math.isfinite(t))
    for start in (None, worst[1]):
        inc = Incumbent(inst, M)
        if start is not None:
            inc.consider(np.array(start, dtype=np.int8), "start")
        r = BranchAndBound(inst, M).run(inc, 10**6, float("inf"), gap=gap)
        assert r.complete and r.gap == gap
        assert r.bound_s == inc.step_s / (1 + gap)
        assert r.bound_s <= opt <= inc.step_s <= opt * (1 + gap)


def test_gap_is_checked():
    inst = instance("hand")
    M = int(0.75 * inst.P)
    for bad in (-0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="gap"):
            BranchAndBound(inst, M).run(Incumbent(inst, M), 10, float("inf"), gap=bad)


def test_solver_runs_the_gap_passes_then_proves_the_optimum():
    """The MILP's enumeration phase: one pass per ENUM_GAPS entry, each complete with a
    bound at most the optimum, the last (gap 0) at the optimum."""
    inst = instance("unet1")
    M = int(0.75 * inst.P)
    opt = min(enumerate_plans(inst, M).values())
    r = MILP().solve(inst, M, seed=2)
    passes = r.info["enumeration"]["passes"]
    assert [p["gap"] for p in passes] == list(ENUM_GAPS)
    assert all(p["complete"] and p["bound_s"] <= opt for p in passes)
    assert passes[-1]["bound_s"] == opt == r.lower_bound_s
    assert r.status == "optimal" and r.info["enumeration"]["complete"]
    assert simulate(inst, r.plan, M).step_time_s == opt


def blocked_prefetch(M: int):
    """x (1 MB, offloaded 1-2 ms at 1 GB/s) is read by b1 only; b0 (3-4 ms) allocates its
    2 MB gradient g, read by b1; b2 allocates 3 MB. While b0 runs the admission test
    counts g + x + the next tasks b1 (0) and b2 (3 MB): 6 MB. Returns (lowered instance,
    x's index)."""
    from slackopt import Instance, Link, Op, Tensor

    ops = [Op("f0", "fwd", 1e-3), Op("f1", "fwd", 2e-3), Op("b0", "bwd", 1e-3),
           Op("b1", "bwd", 1e-3), Op("b2", "bwd", 1e-3)]
    tensors = [Tensor("x", 1_000_000, "f0", ("b1",)), Tensor("g", 2_000_000, "b0", ("b1",)),
               Tensor("tmp", 3_000_000, "b2", ())]
    inst = Instance("blocked-prefetch", ops, tensors, Link("l", 1e9, 0.85, 0.0)).lowered
    return inst, list(inst.saved_names).index("x")


@pytest.mark.parametrize("M,stall", [(3_500_000, 1e-3), (6_000_000, 0.0)])
def test_blocked_prefetch_by_hand(M, stall):
    """At M = 3.5 MB the test refuses x's prefetch until b1 waits for it (then only
    used + x = 3 MB must fit): the whole 1 ms copy is stall, and B is exactly that; at
    6 MB the copy starts with b0, no stall, and B is 0. With x free, B is 0."""
    inst, t = blocked_prefetch(M)
    ck = Checker(inst, M)
    dec = np.zeros(inst.n_saved, dtype=np.int8)
    dec[t] = SWAP
    ev = simulate(inst, Plan(dec, inst.saved_names), M)
    assert ev.feasible and ev.stall_fwd_s == 0.0
    assert ev.stall_bwd_s == pytest.approx(stall, abs=1e-12)
    fixed = np.ones(inst.n_saved, dtype=np.bool_)
    assert ck.check(dec, fixed, ev.step_time_s, 0.0, "blocked") == pytest.approx(stall, abs=1e-12)
    assert ck.check(dec, ~fixed, ev.step_time_s, 0.0, "blocked, free") == 0.0


CASES = Path(__file__).parent / "data" / "admission"


@pytest.mark.parametrize("name,M,dec", [
    ("r4_dropped_offload", 254_261_056, [0, 2, 1, 1]),
    ("lagging_then_evicted", 106_413_792, [1, 1, 0, 2, 2, 0, 1, 0])])
def test_cases_of_the_independent_verifier(name, M, dec):
    """Two plans on which a first version claimed more stall than they have, found by
    an independent check with its own instance generator: in r4_dropped_offload, rule R4
    took a swap whose offload was still queued for resident after its last reader had
    ended (the runtime drops that offload and frees the tensor); in
    lagging_then_evicted, a1's need (a2's rebuild) was served by its lagging device copy
    and only a later re-fetch ran, overlapping other work. The plan and every plan of
    the instance (a sample) must pass now."""
    inst = load_instance(CASES / f"{name}.json").lowered
    ck = Checker(inst, M)
    d = np.array(dec, dtype=np.int8)
    r = fast.run_barrier_free(ck.inp, d, M)
    assert r[0] == 0
    ck.check(d, np.ones(len(d), dtype=np.bool_), float(r[1]), float(r[2]), name)
    assert check_instance(name, inst, [M])[0] > 100
