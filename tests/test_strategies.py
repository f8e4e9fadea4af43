"""The instance strategies of tests/strategies.py (issue 22, item 2): what they draw is
valid, survives the JSON instance files unchanged and keeps invariant 1 of
spec/semantics.md (keep-all at M = P runs at T*); and a fixed, derandomized sample of them
covers every construct of the instance language (:data:`strategies.CONSTRUCTS`), failing
with the names of the constructs never drawn.

Deterministic (``derandomize=True``, no example database) and a few seconds in all.
"""

from __future__ import annotations

import collections
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from slackopt import Instance
from slackopt.io import instance_from_dict, instance_to_dict, load_instance, save_instance
from slackopt.plan import Plan
from slackopt.simulate import simulate
from tests.strategies import CONSTRUCTS, budgets, constructs, instances

CHECK_EXAMPLES = 80
"""Instances checked for validity, round trip and invariant 1 (about 3 s)."""
COVERAGE_EXAMPLES = 300
"""Instances of the coverage sample (about 6 s); every construct is drawn 20 times or more
in it today, so a change that stops drawing one shows here."""

_SETTINGS = dict(deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                        HealthCheck.filter_too_much])


def same_instance(a: Instance, b: Instance) -> list[str]:
    """The fields in which instances `a` and `b` differ (empty if none): name, ops,
    tensors, link, meta, rng_capture, host_memory_bytes (dataclass equality: floats bit
    for bit) and the derived P and T*."""
    return [f for f in ("name", "ops", "tensors", "link", "meta", "rng_capture",
                        "host_memory_bytes", "P", "ideal_time_s")
            if getattr(a, f) != getattr(b, f)]


@pytest.mark.slow
@settings(max_examples=CHECK_EXAMPLES, **_SETTINGS)
@given(data=st.data())
def test_drawn_instances_load_round_trip_and_keep_all_runs_at_ideal(data):
    """Every drawn instance: its JSON document loads back to the same instance, through
    a dict and through a file; keep-all at M = P is feasible, runs at T* with no stall, no
    recompute and no copy, and peaks at P; a drawn budget lies in [model floor, P]."""
    inst = data.draw(instances())
    assert inst.n_saved <= 6
    back = instance_from_dict(instance_to_dict(inst))
    assert not same_instance(inst, back), same_instance(inst, back)
    with tempfile.TemporaryDirectory() as d:
        path = save_instance(inst, Path(d) / "inst.json")
        loaded = load_instance(path)
    assert not same_instance(inst, loaded), same_instance(inst, loaded)
    assert (inst.aliased, inst.lowered.n_saved) == (loaded.aliased, loaded.lowered.n_saved)
    ev = simulate(inst, Plan.keep_all(inst), inst.P)
    assert ev.feasible, ev.failure
    assert ev.step_time_s == inst.ideal_time_s, (ev.step_time_s, inst.ideal_time_s)
    assert ev.stall_fwd_s == ev.stall_bwd_s == ev.recompute_s == 0.0
    assert ev.d2h_bytes == ev.h2d_bytes == 0
    assert ev.peak_bytes == inst.P
    from slackopt.solvers.milp import model_floor

    M = data.draw(budgets(inst))
    assert model_floor(inst.lowered) <= M <= inst.P


@pytest.mark.slow
def test_sample_covers_every_construct():
    """A fixed sample of :data:`COVERAGE_EXAMPLES` drawn instances exercises every
    construct of :data:`strategies.CONSTRUCTS` (each named if never drawn), and the
    budgets drawn include the model floor and P themselves."""
    seen: collections.Counter[str] = collections.Counter()
    ends = set()

    @settings(max_examples=COVERAGE_EXAMPLES, phases=[Phase.generate], **_SETTINGS)
    @given(data=st.data())
    def draw(data):
        inst = data.draw(instances())
        seen.update(constructs(inst))
        from slackopt.solvers.milp import model_floor

        lo, M = model_floor(inst.lowered), data.draw(budgets(inst))
        if lo < inst.P:
            ends.update({"floor"} if M == lo else {"P"} if M == inst.P else set())

    draw()
    missing = [c for c in CONSTRUCTS if seen[c] == 0]
    assert not missing, ("constructs never drawn in the sample: "
                         + "; ".join(f"{c} ({CONSTRUCTS[c]})" for c in missing))
    assert ends == {"floor", "P"}, ends
    unknown = set(seen) - set(CONSTRUCTS)
    assert not unknown, unknown


def test_constructs_reads_a_hand_built_instance():
    """constructs() on a hand-built instance names exactly what it holds: a tensor with
    two backward readers and a skip, a sibling-reading recipe on a 1 GB/s link with
    latency and duplex 0.5, and nothing else."""
    from slackopt import Link, Op, Recipe, Tensor

    ops = [Op("f0", "fwd", 1e-3), Op("f1", "fwd", 1e-3), Op("f2", "fwd", 1e-3),
           Op("b0", "bwd", 1e-3), Op("b1", "bwd", 1e-3)]
    ts = [Tensor("a", 1000, "f0", ("f2", "b0", "b1")),
          Tensor("b", 1000, "f0", ("b0",), Recipe(("f0",), ("a",)))]
    inst = Instance("hand", ops, ts, Link("l", 1e9, 0.5, 1e-5))
    assert constructs(inst) == {"dag_skip", "several_bwd_readers", "multi_output_all_saved",
                                "unrebuildable", "recipe_sibling_input",
                                "recipe_unrebuildable_input", "latency", "duplex_below_1"}
