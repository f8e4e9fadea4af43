"""Plan-by-plan soundness of the bound models outside the time-indexed model (issue 22,
item 1; issue 47): the checkpoint LP (solvers/milp/bounds/checkpoint.py), the timing MILP
(solvers/milp/bounds/timing.py) and the joint deficit cover
(solvers/milp/bounds/deficit_cover.py).

Each module's validity argument assigns every plan that the barrier-free runtime runs a
point of its model whose objective is the plan's extra time ``T - T*``
(:func:`checkpoint_point`, :func:`timing_point`, :func:`deficit_cover_point`, read from
the run's trace by :func:`read_run`). Here, for EVERY plan of small instances (all
decision vectors; a fixed sample where there are more than 729) at several budgets,
the point must satisfy every row (``_Lin.violations``; a failure names the first
violated row families) and the variable bounds and integrality (the timing model with
binary xs, xr and z, and its LP relaxation), and ``T* + objective <= T``. A wrong row
then shows with any plan that exercises it, not only with the optimum.

Instances: :func:`instances` (the random generator of tests/helpers_milp.py, a mixed
generator below with in-place mutation, zero-byte and zero-duration pieces, rebuild-only
ops, multi-input recipes and host limits, the cases of ../shared/cases/milp-soundness
copied to tests/data/milp_soundness/, and the recorded regressions below). The
full-schema hypothesis strategies (tests/strategies.py) replace the two generators there
when they exist. BOUND_POINT_SEEDS sets how many random seeds of each generator run (CI:
a few seconds).
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import numpy as np
import pytest

from slackopt import Instance, Link, Op, Recipe, Tensor
from slackopt.io import load_instance
from slackopt.plan import KEEP, RECOMP, SWAP, Plan
from slackopt.simulate import simulate
from slackopt.solvers.milp.bounds.checkpoint import (
    bound_arrays,
    build_checkpoint_model,
    checkpoint_point,
)
from slackopt.solvers.milp.bounds.deficit_cover import build_deficit_cover, deficit_cover_point
from slackopt.solvers.milp.bounds.timing_model import build_timing_model, timing_point
from slackopt.solvers.milp.certify.runpoint import read_run
from slackopt.solvers.milp.model.steps import model_floor
from tests.helpers_milp import random_instance, same_producer
from tests.strategies import last_stages, sample

DATA = Path(__file__).parent / "data" / "milp_soundness"
SEEDS = int(os.environ.get("BOUND_POINT_SEEDS", "8"))
"""Random seeds per generator (CI: 8, a few seconds; raise it for a longer hunt)."""
MAX_PLANS = 729
"""Every plan up to this many (6 rebuildable saved tensors); beyond, a fixed sample."""
SAMPLE = 60
FRACTIONS = (0.0, 0.4, 0.8)
"""Budgets: the model floor plus these fractions of the way to P."""
MS = 1e-3


# ----------------------------------------------------------------------------- instances
def mixed_instance(seed: int) -> Instance:
    """A random instance from ``numpy.random.default_rng(seed)`` with what the generator
    of tests/helpers_milp.py leaves out: in-place mutation (``mutated_by``, the D2H
    queued after the last mutation), recipes with several inputs (other outputs of the
    same op among them) or run by rebuild-only ops, zero-byte and tiny tensors,
    zero-duration ops, several backward readers, forward temporaries, random ops without
    RNG capture (c = inf), never_recompute ops, host limits, links from 50 MB/s to
    1 TB/s. 2-6 saved tensors."""
    rng = np.random.default_rng(seed)

    def pick(xs):
        return xs[int(rng.integers(len(xs)))]

    def dur():
        if rng.random() < 0.3:
            return float(pick([0, 1, 20, 100, 500, 2000])) * 1e-6
        return float(rng.integers(1, 3000)) * 1e-6

    nf, nb, n_rb = int(rng.integers(2, 6)), int(rng.integers(2, 8)), int(rng.integers(0, 3))
    ops = [Op(f"f{i}", "fwd", dur(), workspace_bytes=pick([0, 0, 100_000]),
              never_recompute=bool(rng.random() < 0.1), random=bool(rng.random() < 0.15))
           for i in range(nf)]
    ops += [Op(f"b{i}", "bwd", dur(), workspace_bytes=pick([0, 0, 0, 200_000, 1_500_000]))
            for i in range(nb)]
    ops += [Op(f"r{i}", "rebuild", dur()) for i in range(n_rb)]
    fwd = [o.name for o in ops[:nf]]
    bwd = [o.name for o in ops[nf:nf + nb]]
    tensors: list[Tensor] = []
    saved: list[tuple[str, int]] = []
    for j in range(int(rng.integers(2, 7))):
        p = int(rng.integers(nf))
        later = fwd[p + 1:]
        fr = sorted(set(rng.choice(later, size=int(rng.integers(0, 3))).tolist())) \
            if later else []
        br = sorted(set(rng.choice(bwd, size=int(rng.integers(1, 4))).tolist()))
        size = pick([0, 8, 1000, int(rng.integers(50_000, 2_000_000)),
                     int(rng.integers(50_000, 2_000_000)), int(rng.integers(50_000, 8_000_000))])
        mut = (pick(fr),) if fr and rng.random() < 0.3 else ()
        recipe = None
        if rng.random() < 0.6:
            inputs = [nm for nm, q in saved if q <= p]
            ins = sorted({pick(inputs) for _ in range(int(rng.integers(0, 3)))}) if inputs else []
            rops = [fwd[p]] if not n_rb or rng.random() < 0.7 else [f"r{rng.integers(n_rb)}"]
            recipe = Recipe(tuple(dict.fromkeys(rops + list(mut))), tuple(ins),
                            pick([0, 100_000]))
        tensors.append(Tensor(f"a{j}", size, fwd[p], tuple(fr + br), recipe, mutated_by=mut))
        saved.append((f"a{j}", p))
    for i in range(nb - 1):
        if rng.random() < 0.5:
            tensors.append(Tensor(f"g{i}", int(rng.integers(1, 800_000)), bwd[i],
                                  (bwd[i + 1],)))
    for i in range(nf - 1):
        if rng.random() < 0.3:
            tensors.append(Tensor(f"tmp{i}", int(rng.integers(1, 800_000)), fwd[i],
                                  (fwd[i + 1],)))
    link = Link("l", pick([5e7, 2e8, 1e9, 1e10, 1e12]), pick([0.5, 0.85, 1.0]),
                pick([0.0, 1e-5, 1e-3]))
    host = int(rng.integers(0, 6_000_000)) if rng.random() < 0.2 else None
    return Instance("mixed", ops, tensors, link, host_memory_bytes=host,
                    rng_capture=bool(rng.random() < 0.9))


def zero_byte_rebuild_time() -> tuple[Instance, int, dict[str, int]]:
    """A zero-byte recomp tensor z (no xr in either model) is rebuilt before b0 while x's
    H2D runs: b0 starts 3 ms after the forward pass (the H2D), of which 1 ms is z's
    rebuild, 2 ms stall. The checkpoint LP's point needs ``Sb`` = stall + that rebuild
    (``h2d_window`` of b0: 3 <= Sb + R_b0); with ``Sb`` the stall alone it failed.
    Returns (instance, budget, plan by name)."""
    ops = [Op("f0", "fwd", 1 * MS), Op("f1", "fwd", 4 * MS), Op("f2", "fwd", 1 * MS),
           Op("b0", "bwd", 1 * MS)]
    tensors = [Tensor("x", 3_000_000, "f0", ("b0",)),
               Tensor("z", 0, "f0", ("b0",), Recipe(("f0",))),
               Tensor("tmp", 1_000_000, "f2", ())]
    inst = Instance("zero-byte-rebuild-time", ops, tensors, Link("l", 1e9, 0.85, 0.0))
    return inst, 4_000_000 - 1, {"x": SWAP, "z": RECOMP}


def zero_byte_rebuild_closure() -> tuple[Instance, int, dict[str, int]]:
    """v's recipe reads the zero-byte z, whose recipe reads u: before b0 the runtime
    rebuilds u, z, v (0.5 ms each) while x's H2D (3 ms) runs. The checkpoint LP's
    ``R_b0`` (rebuild time before b0) stopped its closure at z (no xr), leaving out u:
    ``h2d_window`` of b0, 3 <= Sb + R_b0 = 2 + 0.5, failed; through z it is 2 + 1."""
    ops = [Op("f0", "fwd", 1 * MS), Op("f1", "fwd", 4 * MS), Op("f2", "fwd", 1 * MS),
           Op("b0", "bwd", 1 * MS), Op("b1", "bwd", 1 * MS),
           Op("ru", "rebuild", 0.5 * MS), Op("rz", "rebuild", 0.5 * MS),
           Op("rv", "rebuild", 0.5 * MS)]
    tensors = [Tensor("x", 3_000_000, "f0", ("b0",)),
               Tensor("u", 100_000, "f0", ("b1",), Recipe(("ru",))),
               Tensor("z", 0, "f1", ("b1",), Recipe(("rz",), ("u",))),
               Tensor("v", 100_000, "f1", ("b0",), Recipe(("rv",), ("z",))),
               Tensor("tmp", 1_000_000, "f2", ())]
    inst = Instance("zero-byte-rebuild-closure", ops, tensors, Link("l", 1e9, 0.85, 0.0))
    return inst, 4_000_000 - 1, {"x": SWAP, "u": RECOMP, "z": RECOMP, "v": RECOMP}


def zero_byte_early_rebuild() -> tuple[Instance, int, dict[str, int]]:
    """The zero-byte z (read by b0) is rebuilt from u, whose first backward reader is b2:
    the runtime rebuilds u before b0. The timing model's ``a_u,b1`` (u rebuilt before b1
    though first read later) only looked at readers with bytes, so ``bwd_delay`` of b1
    charged u's rebuild again after b1: ``Xb >= B_b1 + c_u``, 2.5 ms > Xb = 2 ms."""
    ops = [Op("f0", "fwd", 1 * MS), Op("f1", "fwd", 4 * MS), Op("f2", "fwd", 1 * MS),
           Op("b0", "bwd", 1 * MS), Op("b1", "bwd", 1 * MS), Op("b2", "bwd", 1 * MS),
           Op("ru", "rebuild", 0.5 * MS), Op("rz", "rebuild", 0.5 * MS)]
    tensors = [Tensor("x", 3_000_000, "f0", ("b1",)),
               Tensor("u", 100_000, "f0", ("b2",), Recipe(("ru",))),
               Tensor("z", 0, "f1", ("b0",), Recipe(("rz",), ("u",))),
               Tensor("tmp", 1_000_000, "f2", ())]
    inst = Instance("zero-byte-early-rebuild", ops, tensors, Link("l", 1e9, 0.85, 0.0))
    return inst, 4_000_000 - 1, {"x": SWAP, "u": RECOMP, "z": RECOMP}


RECORDED = {f.__name__: f for f in (zero_byte_rebuild_time, zero_byte_rebuild_closure,
                                     zero_byte_early_rebuild)}
REGRESSION_SEEDS = (40, 131, 356)
"""Seeds of tests/helpers_milp.py's random_instance whose plans broke a row: 40 and
356 the checkpoint LP's ``Sb`` (a zero-byte recomp tensor rebuilt before a backward op),
131 the timing MILP's rebuilt-early rows (the same, pulling a recomp input forward)."""
CASE_BUDGETS = {"exact_tier_cuts_off_optimum": 16_029_776,
                "full_tier_cuts_off_optimum": 25_974_030,
                "full_tier_fifo_inplace": 26_172_517,
                "timing_bound_above_opt": 146_632_682}
"""The budgets of the cases' repro.py (the others get the FRACTIONS budgets only)."""


GENERATED = int(os.environ.get("BOUND_POINT_GENERATED", "40"))
"""Instances drawn from the whole instance language (tests/strategies.py)."""


def instances() -> list[tuple[str, Instance]]:
    """The instances checked (label, instance): random ones, the mixed generator, and a
    fixed sample of the full-schema strategies (tests/strategies.py)."""
    seeds = sorted(set(range(SEEDS)) | set(REGRESSION_SEEDS))
    out = [(f"random_instance({s})", random_instance(s)[0]) for s in seeds]
    out += [(f"mixed_instance({s})", mixed_instance(s)) for s in range(SEEDS)]
    out += [(f"strategies.sample[{i}]", inst) for i, (inst, _M) in enumerate(sample(GENERATED))]
    return out


# ----------------------------------------------------------------------------- checks
def models(inst: Instance, M: int) -> list[tuple[str, object, object]]:
    """(label, model, point function) of every bound model of `inst` at budget `M`."""
    out = []
    ck = build_checkpoint_model(inst, M)
    if ck is not None:
        out.append(("checkpoint LP", ck, checkpoint_point))
    for label, kw in (("timing MILP", dict(integer=True, z_binary=True)),
                      ("timing LP", dict(integer=False))):
        built = build_timing_model(inst, M, **kw)
        if built is not None:
            out.append((label, built[0], timing_point))
    cover = build_deficit_cover(inst, M)
    if cover is not None:
        out.append(("deficit cover", cover[0], deficit_cover_point))
    return out


def plans(inst: Instance, seed: int = 0) -> list[tuple[int, ...]]:
    """Every decision vector of `inst`, or (more than MAX_PLANS) keep-all, all-swap,
    every rebuildable tensor recomp, and a fixed random sample."""
    opts = [(KEEP, SWAP, RECOMP) if np.isfinite(inst.c[t]) else (KEEP, SWAP)
            for t in range(inst.n_saved)]
    if np.prod([len(o) for o in opts]) <= MAX_PLANS:
        return list(itertools.product(*opts))
    rng = np.random.default_rng(seed)
    out = [tuple(KEEP for _ in opts), tuple(SWAP for _ in opts), tuple(o[-1] for o in opts)]
    return out + [tuple(int(rng.choice(o)) for o in opts) for _ in range(SAMPLE)]


def check_plan(inst: Instance, M: int, dec, mods, label: str) -> bool:
    """Simulate `dec` on `inst` at `M` and check the point of every model in `mods`;
    False when the plan does not run (nothing to check)."""
    plan = Plan(np.array(dec, dtype=np.int8), inst.saved_names)
    ev = simulate(inst, plan, M, trace=True)
    if not ev.feasible:
        return False
    run = read_run(inst, plan, ev)
    for name, lin, point in mods:
        x = point(inst, M, lin, run)
        bad = lin.violations(x)
        where = f"{label}, M = {M}, plan {tuple(int(d) for d in dec)}, {name}"
        assert not bad, (f"{where}: violated {[b['name'] for b in bad]}; first: {bad[0]}")
        tu = bound_arrays(inst, M).tu       # the models' time unit (s)
        total = inst.ideal_time_s + lin.objective(x) * tu
        assert total <= ev.step_time_s * (1 + 1e-9), \
            f"{where}: T* + objective {total} s above the step {ev.step_time_s} s"
    return True


def check_instance(label: str, inst: Instance, budgets=()) -> int:
    """Check every plan of `inst` (its storage-level instance) at the FRACTIONS budgets
    and `budgets`; the number of runs checked."""
    inst = inst.lowered        # the evaluator simulates the storages
    if inst.n_saved == 0:
        return 0
    lo = model_floor(inst)
    Ms = sorted({int(lo + f * (int(inst.P) - lo)) for f in FRACTIONS} | set(budgets))
    n = 0
    for M in Ms:
        mods = models(inst, M)
        if mods:
            n += sum(check_plan(inst, M, d, mods, label) for d in plans(inst))
    return n


# ----------------------------------------------------------------------------- tests
@pytest.mark.parametrize("name", sorted(RECORDED))
def test_recorded_plan(name):
    """The plan of each recorded regression maps to a feasible point of every model (it
    failed a row before the fix its docstring names), and so does every other plan."""
    inst, M, by_name = RECORDED[name]()
    dec = [by_name.get(nm, KEEP) for nm in inst.saved_names]
    mods = models(inst, M)
    assert {m[0] for m in mods} >= {"checkpoint LP", "timing MILP", "timing LP"}
    assert check_plan(inst, M, dec, mods, name)
    assert check_instance(name, inst, [M]) > 0


def test_soundness_cases():
    """The cases of ../shared/cases/milp-soundness (views lowered, in-place mutation,
    sibling recipe inputs, host limits, a 137 MB tensor on a 50 MB/s link)."""
    files = sorted(DATA.glob("*.json"))
    assert {f.stem for f in files} >= set(CASE_BUDGETS)
    checked = 0
    for f in files:
        inst = load_instance(f)
        M = CASE_BUDGETS.get(f.stem, inst.meta.get("budget_bytes"))
        checked += check_instance(f.stem, inst, [] if M is None else [int(M)])
    checked += check_instance("rebuild_gaps_same_producer", same_producer(),
                              [3_000_000])
    assert checked > 200


@pytest.mark.slow
def test_random_instances():
    """Every plan of the random instances at several budgets."""
    checked = sum(check_instance(label, inst) for label, inst in instances())
    assert checked > 100 * SEEDS


# ----------------------------------------------------------------------------- stages
def check_groups(label: str, inst: Instance, M: int, dec, groups) -> float | None:
    """Simulate `dec` on the stage `inst` at `M`; for each contiguous group, the group's
    part of the run (:func:`group_run`) must be a point of every bound model of its
    single pass (every row), and each certified relaxation bound of the pass must be at
    most the group's T* plus its stalls, rebuilds and inner idle. Returns the step, or
    None when the plan does not run."""
    from slackopt.solvers.milp.bounds.deficit import deficit_bound
    from slackopt.solvers.milp.bounds.deficit_lagrange import lagrangian_deficit_bound
    from slackopt.solvers.milp.certify.runpoint import group_run

    plan = Plan(np.array(dec, dtype=np.int8), inst.saved_names)
    ev = simulate(inst, plan, M, trace=True)
    if not ev.feasible:
        return None
    run = read_run(inst, plan, ev)
    for g in groups:
        sub = group_run(run, g.sub, g.ops, g.saved)
        where = f"{label}, M = {M}, plan {tuple(int(d) for d in dec)}, microbatch {g.microbatch}"
        assert sub.stall_fwd >= -1e-12 and sub.stall_bwd >= -1e-12, where
        for name, lin, point in models(g.sub, M):
            x = point(g.sub, M, lin, sub)
            bad = lin.violations(x)
            assert not bad, f"{where}, {name}: violated {[b['name'] for b in bad]}; {bad[0]}"
            total = g.sub.ideal_time_s + lin.objective(x) * bound_arrays(g.sub, M).tu
            assert total <= sub.step * (1 + 1e-9), (where, name, total, sub.step)
        for name, b in (("deficit", deficit_bound(g.sub, M)),
                        ("deficit_lagrange", lagrangian_deficit_bound(g.sub, M)[0])):
            assert b <= sub.step * (1 + 1e-12), (where, name, b, sub.step)
    return ev.step_time_s


def test_microbatch_groups_of_stages():
    """Pipeline stages whose microbatches run back to back: for every plan at several
    budgets, each microbatch's part of the run is a point of every bound model of its
    single pass (the argument of solvers/milp/bounds/groups.py), and the microbatch bound
    built from the passes' certified bounds is at most the fastest plan."""
    from slackopt.solvers.milp.bounds.checkpoint import checkpoint_bound
    from slackopt.solvers.milp.bounds.deficit import deficit_bound
    from slackopt.solvers.milp.bounds.deficit_lagrange import lagrangian_deficit_bound
    from slackopt.solvers.milp.bounds.groups import microbatch_bound, microbatch_groups
    from slackopt.solvers.milp.bounds.timing import timing_bound

    checked = lifted = 0
    stages = last_stages(20)
    assert len(stages) >= 10
    for i, inst in enumerate(stages):
        label = f"last_stages[{i}] {inst.name}"
        groups = microbatch_groups(inst)
        assert groups and sum(g.sub.n_saved for g in groups) == inst.n_saved, label
        lo = model_floor(inst)
        for M in sorted({int(lo + f * (int(inst.P) - lo)) for f in FRACTIONS}):
            steps = [t for t in (check_groups(label, inst, M, d, groups)
                                 for d in plans(inst)) if t is not None]
            checked += len(steps)
            if not steps:
                continue
            bounds = {}
            for g in groups:
                cands = [deficit_bound(g.sub, M), lagrangian_deficit_bound(g.sub, M)[0],
                         checkpoint_bound(g.sub, M), timing_bound(g.sub, M, 30.0,
                                                                  integer=False)[0]]
                bounds[g.key] = max(v for v in cands if v is not None)
            b, _extra = microbatch_bound(inst, groups, bounds)
            assert b <= min(steps) * (1 + 1e-12), (label, M, b, min(steps))
            lifted += b > inst.ideal_time_s * (1 + 1e-9)
    assert checked > 300 and lifted > 0, (checked, lifted)
