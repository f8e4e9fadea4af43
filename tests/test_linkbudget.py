"""Link-budget model (paper section 2.2, Eq. 1) against docs/workloads.md's totals."""

from __future__ import annotations

import math

import pytest

from slackopt.hardware import link
from slackopt.instance import Instance, Op, Tensor
from slackopt.linkbudget import (
    beta,
    forward_link_budget_bytes,
    hideable_fraction,
    intensity,
    report,
)
from slackopt.workloads import make
from slackopt.workloads.synthetic import chain

# docs/workloads.md, "Totals": hideable f and forward link budget 0.98 W T_F (bytes).
TARGETS = {
    "gpt2-xl": (0.152, 3.33e9),
    "bert-large": (0.109, 0.75e9),
    "llama-7b": (0.378, 13.05e9),
    "vgg16": (0.145, 0.56e9),
}


@pytest.fixture(scope="module")
def paper() -> dict[str, Instance]:
    return {w: make(w) for w in TARGETS}


@pytest.mark.parametrize("w", TARGETS)
def test_targets(paper, w):
    inst = paper[w]
    f, lb = TARGETS[w]
    assert hideable_fraction(inst) == pytest.approx(f, abs=0.01)
    assert forward_link_budget_bytes(inst) == pytest.approx(lb, rel=0.03)


@pytest.mark.parametrize("w", TARGETS)
def test_eq1_identity(paper, w):
    inst = paper[w]
    i, b = intensity(inst), beta(inst)
    assert i == pytest.approx(inst.forward_flops / inst.A)
    assert b == pytest.approx(inst.forward_flops / inst.forward_time_s / inst.link.bytes_per_s)
    assert hideable_fraction(inst) == pytest.approx(min(1.0, i / b))
    # The transformers' intensities are in the hundreds to thousands of FLOP/B.
    assert 100 < i < 10_000


def test_report_is_consistent(paper):
    inst = paper["gpt2-xl"]
    r = report(inst)
    assert r["saved_bytes"] == inst.A and r["peak_bytes"] == inst.P
    assert r["forward_time_s"] == inst.forward_time_s
    assert r["ideal_time_s"] == inst.ideal_time_s
    assert r["hideable_fraction"] == hideable_fraction(inst)
    assert r["intensity"] == intensity(inst) and r["beta"] == beta(inst)
    assert r["forward_link_budget_bytes"] == forward_link_budget_bytes(inst)
    assert r["guard"] == 0.02 and r["link"] == "pcie4" and r["link_bytes_per_s"] == 25e9
    assert r["hideable_bytes"] <= inst.A
    assert report(inst, guard=0.1)["forward_link_budget_bytes"] < r["forward_link_budget_bytes"]


def test_guard_validation(paper):
    inst = paper["vgg16"]
    assert forward_link_budget_bytes(inst, 0.0) == math.floor(
        inst.link.bytes_per_s * inst.forward_time_s)
    for bad in (-0.1, 1.0, float("nan"), "0.02"):
        with pytest.raises(ValueError):
            forward_link_budget_bytes(inst, bad)


def test_titanx_vgg_hides_everything():
    # Section 1: on the Titan X the link could move every VGG-16 feature map.
    inst = make("vgg16", gpu="titanx")
    assert hideable_fraction(inst) == 1.0


def test_faster_link_hides_more(paper):
    base = hideable_fraction(paper["gpt2-xl"])
    assert hideable_fraction(make("gpt2-xl", link="pcie5")) == pytest.approx(2 * base)
    assert hideable_fraction(make("gpt2-xl", link="nvlink-c2c")) == 1.0


@pytest.mark.parametrize(("seq", "batch", "f"), [(2048, 8, 0.36), (32768, 1, 0.60)])
def test_llama_sequence_length(seq, batch, f):
    # Section 4 (sequence length): f rises from 36% at 2K tokens to 60% at 32K.
    assert hideable_fraction(make("llama-7b", seq=seq, batch=batch)) == pytest.approx(f, abs=0.01)


def test_no_saved_bytes():
    ops = [Op("a", "fwd", 1e-3, flops=1e9), Op("b", "bwd", 1e-3)]
    inst = Instance("empty", ops, [Tensor("t", 10, "a", readers=())], link("pcie4"))
    assert inst.A == 0
    assert hideable_fraction(inst) == 1.0
    assert intensity(inst) == math.inf
    assert beta(inst) > 0
    r = report(inst)
    assert r["hideable_bytes"] == 0 and r["hideable_fraction"] == 1.0


def test_no_flops():
    inst = chain(3, min_flops=0.0, max_flops=0.0)
    assert intensity(inst) == 0.0 and beta(inst) == 0.0
    f = hideable_fraction(inst)
    assert 0 < f <= 1
    assert f == pytest.approx(min(1.0, inst.link.bytes_per_s * inst.forward_time_s / inst.A))
