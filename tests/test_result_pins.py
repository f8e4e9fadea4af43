"""Every shipped instance and plan evaluates exactly as it did when the pins were taken.

The pins (tests/data/result_pins.json, written by ``python tests/result_pins.py``) hold
the evaluations of uniform plans, of SlackSwap's, checkpointing's, vDNN's and
SuperNeurons' plans and of the benchmark suite's shipped plans, every field bit for bit
(see tests/result_pins.py). A refactor of the evaluator or of a solver that changes any of
them fails here, naming the instance and the plan.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.result_pins import ROOT, bench_plan_pins, instance_files, pins_of

PINS = json.loads((Path(__file__).parent / "data" / "result_pins.json").read_text())


def test_every_shipped_instance_is_pinned():
    assert sorted(k for k in PINS if k != "bench/plans") == sorted(
        str(p.relative_to(ROOT)) for p in instance_files())


@pytest.mark.slow
@pytest.mark.parametrize("rel", sorted(k for k in PINS if k != "bench/plans"))
def test_instance_results_bit_for_bit(rel):
    got = pins_of(ROOT / rel)
    want = PINS[rel]
    assert sorted(got) == sorted(want)
    for key in want:
        assert got[key] == want[key], f"{rel}: {key}"


@pytest.mark.slow
def test_bench_plans_bit_for_bit():
    got = bench_plan_pins()
    want = PINS["bench/plans"]
    assert sorted(got) == sorted(want)
    for key in want:
        assert got[key] == want[key], key
