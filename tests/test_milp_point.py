"""Plan-by-plan soundness of the time-indexed model (solvers/milp/model/; issue 22,
item 1): for every plan the evaluator runs, the point that the plan's simulated trace
defines (:func:`~slackopt.solvers.milp.model.point.point_from_trace`, the package
docstring's argument "Why the optimum is a lower bound") satisfies every row of the model
and its objective is the plan's step time. A row that cuts off a real run then fails here
with any plan that exercises it, named by its family (``fifo_R1[t=..,K=..]``), whether
or not that plan is optimal.

Instances come from :func:`instances` (one place to swap in a fuller generator): the random
instances of tests/helpers_milp.py, :func:`rich_instance` (in-place mutation, recipes
that read another output of their own op, multi-op recipes with rebuild-only ops, views,
never_recompute, host limits, links from 50 MB/s to 1 TB/s, zero-byte and huge tensors)
and the cases of issue 22 (tests/data/milp_soundness/). Every decision vector of an
instance with at most ``ENUM_MAX`` saved units is simulated; larger ones get a fixed
sample.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import numpy as np
import pytest

from slackopt import Instance, Link, Op, Recipe, Tensor
from slackopt.io import load_instance
from slackopt.plan import KEEP, RECOMP, SWAP, Plan
from slackopt.simulate import simulate
from slackopt.solvers.milp import build_model, model_floor
from slackopt.solvers.milp.model.point import point_from_trace
from tests.helpers_milp import random_instance
from tests.strategies import sample

DATA = os.path.join(os.path.dirname(__file__), "data", "milp_soundness")
ENUM_MAX = 6
"""Instances with at most this many saved units have every plan checked."""
SAMPLE = 120
"""Plans checked (a fixed random sample) on larger instances."""
ENUM_FEASIBLE = 3**8
"""Larger instances with at most this many decision vectors sample among the plans
that run (the others: among all vectors)."""
N_RANDOM = int(os.environ.get("MILP_POINT_EXAMPLES", "30"))
N_GENERATED = int(os.environ.get("MILP_POINT_GENERATED", "25"))
"""Instances drawn from the whole instance language (tests/strategies.py, up to 5 saved
storages, every plan checked)."""
"""Instances per generator (CI: 30; raise for a longer hunt)."""
CONFIGS = {
    "full": dict(tier="full"),
    "exact": dict(tier="exact"),
    "aggregated": dict(tier="aggregated"),
    "aggregated_all_on": dict(tier="aggregated", lagging=True, binary_placement=True,
                              integral_copies=True, fifo=True, admission=True,
                              integer_evictions=True),
    "exact_fifo": dict(tier="exact", fifo=True),
}
"""The model tiers at their defaults (the full tier has every switch on), the aggregated
steps with every switch on, and the exact tier with the FIFO rows but fractional copies
(fifo without an explicit lagging)."""
CASES = {"full_tier_fifo_inplace": 26_172_517, "full_tier_cuts_off_optimum": 25_974_030,
         "exact_tier_cuts_off_optimum": None}
"""Issue 22's cases (tests/data/milp_soundness/<name>.json) -> budget (bytes; None: the
instance's meta ``budget_bytes`` or 0.7 P)."""


# ------------------------------------------------------------------------- instances
def rich_instance(seed: int) -> tuple[Instance, int]:
    """A random instance with 2-6 saved tensors drawn from ``default_rng(seed)``, with the
    constructs the model's rows reason about: skips and several backward readers,
    in-place mutation (``mutated_by``: the D2H is queued when the tensor is ready),
    recipes that read another output of their own op or earlier saved tensors (chains),
    multi-op recipes with rebuild-only ops and transient bytes, never_recompute ops,
    views of a saved base, workspaces (forward, backward and rebuild-only ops, so recipes
    have workspace too), layers of 1-3 ops (the aggregated tier's steps), gradient
    temporaries, zero-byte and 1e4x larger tensors, links
    from 50 MB/s to 1 TB/s with duplex factors and latency, sometimes a
    host pinned-memory limit; and a budget between the model floor and P.
    Returns (instance, M)."""
    rng = np.random.default_rng(seed)

    def pick(xs):
        return xs[int(rng.integers(len(xs)))]

    us = 1e-6
    nf, nb = int(rng.integers(3, 7)), int(rng.integers(2, 8))
    per = int(rng.integers(1, 4))            # ops per layer: the aggregated tier's steps
    ops = [Op(f"f{i}", "fwd", float(rng.integers(20, 3000)) * us, layer=i // per,
              workspace_bytes=pick([0, 0, 0, 0, 300_000]),
              never_recompute=bool(rng.random() < 0.1)) for i in range(nf)]
    ops += [Op(f"b{i}", "bwd", float(rng.integers(20, 3000)) * us, layer=(nb - 1 - i) // per,
               workspace_bytes=pick([0, 0, 0, 200_000, 1_500_000])) for i in range(nb)]
    n_rb = int(rng.integers(0, 3))
    ops += [Op(f"r{i}", "rebuild", float(rng.integers(5, 500)) * us,
               workspace_bytes=pick([0, 100_000])) for i in range(n_rb)]
    fwd = [o.name for o in ops[:nf]]
    bwd = [o.name for o in ops[nf:nf + nb]]
    tensors: list[Tensor] = []
    made: list[tuple[str, int, tuple[str, ...]]] = []      # saved: name, producer, mutators
    for j in range(int(rng.integers(2, 7))):
        if made and rng.random() < 0.3:
            p = made[int(rng.integers(len(made)))][1]      # a sibling output of one op
        else:
            p = int(rng.integers(nf - 1)) if nf > 1 else 0
        later = fwd[p + 1:]
        fr = sorted(set(rng.choice(later, size=int(rng.integers(0, 3))).tolist())) \
            if later else []
        br = sorted(set(rng.choice(bwd, size=int(rng.integers(1, 4))).tolist()))
        mut: tuple[str, ...] = ()
        if fr and rng.random() < 0.35:
            mut = (pick(fr),)
        u = rng.random()
        size = 0 if u < 0.08 else (int(rng.integers(20_000_000, 60_000_000)) if u < 0.15
                                   else int(rng.integers(5_000, 2_000_000)))
        recipe = None
        if rng.random() < 0.6:
            rops = [fwd[p]] + list(mut)
            if n_rb and rng.random() < 0.3:
                rops.append(f"r{int(rng.integers(n_rb))}")
            cands = [nm for nm, q, _ in made if q <= p]
            inp = sorted(set(rng.choice(cands, size=int(rng.integers(1, 3))).tolist())) \
                if cands and rng.random() < 0.6 else []
            recipe = Recipe(tuple(rops), tuple(inp), pick([0, 0, 100_000]))
        name = f"a{j}"
        tensors.append(Tensor(name, size, fwd[p], tuple(fr + br), recipe, mutated_by=mut))
        made.append((name, p, mut))
    if rng.random() < 0.25:                  # a view of a saved base, produced later
        base, p, _ = made[int(rng.integers(len(made)))]
        q = int(rng.integers(p, nf))
        br = sorted(set(rng.choice(bwd, size=int(rng.integers(1, 3))).tolist()))
        tensors.append(Tensor("v", 1, fwd[q], tuple(br), storage=base))
    for i in range(nb - 1):                  # gradient temporaries: read by the next op
        if rng.random() < 0.5:
            tensors.append(Tensor(f"g{i}", int(rng.integers(1, 800_000)), bwd[i],
                                  (bwd[i + 1],)))
    link = Link("l", pick([5e7, 2e8, 1e9, 1e10, 1e11, 1e12]), pick([0.5, 0.85, 1.0]),
                pick([0.0, 1e-5, 1e-3]))
    host = None
    if rng.random() < 0.15:
        host = int(sum(t.size_bytes for t in tensors) * pick([0.3, 0.6]))
    inst = Instance(f"rich{seed}", ops, tensors, link, host_memory_bytes=host)
    low = inst.lowered
    lo = model_floor(low)
    M = int(lo + pick([0.0, 0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 0.95, 1.0]) * (int(low.P) - lo))
    return inst, M


def case_instance(name: str) -> tuple[Instance, int]:
    """Issue 22's case `name` and its budget (bytes)."""
    inst = load_instance(os.path.join(DATA, f"{name}.json"))
    M = CASES[name]
    if M is None:
        M = int(inst.meta.get("budget_bytes", 0)) or int(0.7 * inst.P)
    return inst, M


def instances() -> Iterator[tuple[str, Instance, int]]:
    """(label, instance, budget in bytes) for the soundness checks: the one place to swap
    in another generator."""
    for name in CASES:
        inst, M = case_instance(name)
        yield name, inst, M
    for seed in range(N_RANDOM):
        inst, M = random_instance(seed)
        yield f"random_instance({seed})", inst, M
    for seed in range(N_RANDOM):
        inst, M = rich_instance(seed)
        yield f"rich_instance({seed})", inst, M
    for i, (inst, M) in enumerate(sample(N_GENERATED)):
        yield f"strategies.sample[{i}]", inst, M


def plans(inst: Instance, M: int) -> Iterator[np.ndarray]:
    """Decision vectors of the (lowered) instance: all of them with at most ``ENUM_MAX``
    saved units; else, with at most ``ENUM_FEASIBLE`` vectors, the fastest and a fixed
    sample of ``SAMPLE`` among those that run at `M` (found with the compiled evaluator);
    else ``SAMPLE`` drawn with a fixed seed."""
    c = np.asarray(inst.c)
    opts = [(KEEP, SWAP, RECOMP) if np.isfinite(c[t]) else (KEEP, SWAP)
            for t in range(inst.n_saved)]
    if inst.n_saved <= ENUM_MAX:
        for d in itertools.product(*opts):
            yield np.array(d, np.int8)
        return
    rng = np.random.default_rng(0)
    if np.prod([len(o) for o in opts]) <= ENUM_FEASIBLE:
        runs = []
        for d in itertools.product(*opts):
            dec = np.array(d, np.int8)
            ev = simulate(inst, Plan(dec, inst.saved_names), M)
            if ev.feasible:
                runs.append((ev.step_time_s, dec))
        if runs:
            yield min(runs, key=lambda r: r[0])[1]
            for i in rng.permutation(len(runs))[:SAMPLE]:
                yield runs[int(i)][1]
        return
    for _ in range(SAMPLE):
        yield np.array([o[int(rng.integers(len(o)))] for o in opts], np.int8)


_RUNS: dict[str, list] = {}


def runs() -> list[tuple[str, Instance, int, list]]:
    """Per instance: (label, lowered instance, M, [(plan, traced evaluation)] for every
    plan that runs), simulated once for all the configurations."""
    if "all" not in _RUNS:
        out = []
        for label, inst, M in instances():
            low = inst.lowered
            done = []
            for dec in plans(low, M):
                plan = Plan(dec, low.saved_names)
                ev = simulate(low, plan, M, trace=True)
                if ev.feasible:
                    done.append((plan, ev))
            out.append((label, low, M, done))
        _RUNS["all"] = out
    return _RUNS["all"]


# ------------------------------------------------------------------------- the checks
@pytest.mark.slow
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_every_plan_is_a_point_of_the_model(config):
    """Every plan the evaluator runs maps to a point that violates no row and whose
    objective is its step time."""
    n_checked = 0
    for label, inst, M, done in runs():
        if not done:
            continue
        m = build_model(inst, M, **CONFIGS[config])
        for plan, ev in done:
            x = point_from_trace(m, inst, plan, M, ev)
            bad = m.lin.violations(x, limit=5)
            tag = f"{label}, M={M}, plan {plan.decisions.tolist()}, {config}"
            assert bad == [], f"{tag}: violates {[v['name'] for v in bad]}: {bad[0]}"
            value = m.lin.objective(x) * m.t_unit
            assert value <= ev.step_time_s * (1 + 1e-9), (tag, value, ev.step_time_s)
            n_checked += 1
    assert n_checked > 100 * N_RANDOM // 30


def test_the_instances_draw_the_constructs():
    """The instances exercise what the rows reason about (a check on the generators, so
    that the test above cannot pass by never drawing them)."""
    seen = set()
    for _label, inst, _M in instances():
        if any(t.storage for t in inst.tensors):
            seen.add("view")
        if inst.host_memory_bytes is not None:
            seen.add("host limit")
    for _label, inst, _M, done in runs():
        ready = np.asarray(inst.saved_ready_idx)
        prod = np.asarray(inst.saved_prod_idx)
        if (ready > prod).any():
            seen.add("in-place mutation")
        for u, ins in enumerate(inst.recipe_inputs):
            if any(prod[t] == prod[u] for t in ins):
                seen.add("recipe reads a sibling output")
        for plan, ev in done:
            lanes = {e["lane"] for e in ev.trace}
            if "evict" in lanes:
                seen.add("eviction")
            names = [e["name"] for e in ev.trace if e["lane"] == "d2h"]
            pos = {nm: t for t, nm in enumerate(inst.saved_names)}
            if any(prod[pos[a]] > prod[pos[b]] for a, b in itertools.pairwise(names)):
                seen.add("D2H order differs from production order")
            if (plan.decisions == RECOMP).sum() >= 2:
                seen.add("two rebuilds")
            if any(e["lane"] == "d2h" and e["end_s"] > ev.step_time_s - 1e-15
                   for e in ev.trace) or (ev.d2h_bytes > sum(
                       e["bytes"] for e in ev.trace if e["lane"] == "d2h")):
                seen.add("D2H in flight at the end")
    assert seen == {"in-place mutation", "recipe reads a sibling output", "eviction",
                    "D2H order differs from production order", "two rebuilds", "view",
                    "host limit", "D2H in flight at the end"}, seen
