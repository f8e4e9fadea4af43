"""Workload generators against docs/workloads.md (totals, per-tensor rho, per-layer bytes)
and the structural conventions of docs/model.md ("Transient buffers")."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

from slackopt.errors import SlackoptError
from slackopt.instance import Instance
from slackopt.workloads import WORKLOADS, WorkloadError, make
from slackopt.workloads.synthetic import chain

# docs/workloads.md, "Totals (A100, PCIe 4.0)":
# T_F (s), ideal step (s), A (B), P (B), f, 0.98 W T_F (B).
TARGETS = {
    "gpt2-xl": (135.8e-3, 401e-3, 22.3e9, 23.1e9, 0.152, 3.33e9),
    "bert-large": (30.7e-3, 89.6e-3, 7.02e9, 7.10e9, 0.109, 0.75e9),
    "llama-7b": (532.5e-3, 1639e-3, 35.2e9, 35.7e9, 0.378, 13.05e9),
    "vgg16": (22.7e-3, 65.2e-3, 3.90e9, 3.90e9, 0.145, 0.56e9),
}


@pytest.fixture(scope="module")
def paper() -> dict[str, Instance]:
    return {w: make(w) for w in TARGETS}


def rel(x: float, ref: float) -> float:
    return abs(x - ref) / ref


@pytest.mark.parametrize("w", TARGETS)
def test_totals_match_spec(paper, w):
    inst = paper[w]
    t_f, step, a, p, f, lb = TARGETS[w]
    assert rel(inst.A, a) < 0.02
    assert rel(inst.forward_time_s, t_f) < 0.02
    assert rel(inst.ideal_time_s, step) < 0.02
    assert rel(inst.P, p) < 0.02
    w_link = inst.link.bytes_per_s
    assert abs(min(1.0, w_link * inst.forward_time_s / inst.A) - f) < 0.01
    assert rel(0.98 * w_link * inst.forward_time_s, lb) < 0.03


@pytest.mark.parametrize("w", ["gpt2-xl", "bert-large", "llama-7b"])
def test_transformer_peak_is_saved_plus_logits_gradient(paper, w):
    inst = paper[w]
    assert inst.P == inst.A + inst.tensor("d_logits").size_bytes
    peak_op = inst.scheduled_ops[int(np.argmax(inst.keep_all_profile))]
    assert peak_op.name == "loss.bwd"


# docs/workloads.md, "Saved tensors per layer": (tensor suffix, B/token, rho ps/B).
PER_LAYER = {
    "gpt2-xl": (54_500, [("x", 3200, math.inf), ("ln1_out", 3200, 1.345),
                         ("qkv_out", 9600, 6.901), ("attn_out", 3300, 5.318),
                         ("drop1.mask", 1600, 0.958), ("mid", 3200, 10.583),
                         ("ln2_out", 3200, 1.345), ("fc1_out", 12800, 6.885),
                         ("gelu_out", 12800, 1.202), ("drop2.mask", 1600, 0.958)]),
    "bert-large": (34_880, [("x", 2048, 1.452), ("qkv_out", 6144, 4.475),
                            ("attn_out", 2112, 5.422), ("drop1.mask", 1024, 1.173),
                            ("res1", 2048, 8.444), ("ln1_out", 2048, 1.452),
                            ("fc1_out", 8192, 4.451), ("gelu_out", 8192, 1.228),
                            ("drop2.mask", 1024, 1.173), ("res2", 2048, 21.57)]),
    "llama-7b": (131_712, [("x", 8192, math.inf), ("rms1_out", 8192, 1.228),
                           ("qkv_out", 24576, 17.53), ("attn_out", 8320, 20.92),
                           ("mid", 8192, 19.38), ("rms2_out", 8192, 1.228),
                           ("gate_up_out", 44032, 17.52), ("swiglu_out", 22016, 1.759)]),
}


@pytest.mark.parametrize("w", PER_LAYER)
def test_per_layer_bytes_and_rho(paper, w):
    inst = paper[w]
    p = inst.meta["params"]
    n_tok = p["seq"] * p["batch"]
    per_layer, table = PER_LAYER[w]
    layer = 5
    total = 0
    for suffix, b_tok, rho_ps in table:
        name = f"L{layer}.{suffix}"
        k = inst.saved_position(name)
        assert inst.s[k] == b_tok * n_tok, name
        total += int(inst.s[k])
        if math.isinf(rho_ps):
            assert math.isinf(inst.rho[k]), name
        else:
            assert inst.rho[k] * 1e12 == pytest.approx(rho_ps, rel=0.01), name
    # Everything else saved in the layer is RNG state (8 bytes per dropout).
    in_layer = [inst.saved_names[k] for k in range(inst.n_saved)
                if inst.saved_names[k].startswith(f"L{layer}.")]
    rest = set(in_layer) - {f"L{layer}.{s}" for s, _, _ in table}
    assert all(inst.tensor(n).category == "rng_state" and inst.tensor(n).size_bytes == 8
               for n in rest)
    assert total == per_layer * n_tok


def test_gpt2_outside_layers(paper):
    inst = paper["gpt2-xl"]
    n_tok = 8192
    assert inst.tensor("logits").size_bytes == 100_514 * n_tok
    assert inst.tensor("emb.drop.mask").size_bytes == 1600 * n_tok
    for n in ("head_in", "lnf_out"):
        assert inst.tensor(n).size_bytes == 3200 * n_tok
    assert math.isinf(inst.c[inst.saved_position("head_in")])


def test_vgg_saved_bytes(paper):
    inst = paper["vgg16"]
    assert inst.A / 128 == pytest.approx(30.5e6, rel=0.005)
    assert inst.tensor("image").size_bytes == 301_056 * 128
    conv1 = inst.tensor("relu1_1_out").size_bytes + inst.tensor("relu1_2_out").size_bytes
    assert conv1 / inst.A == pytest.approx(0.421, abs=0.001)
    cats = inst.saved_categories
    assert cats.count("relu_out") == 15
    # Pool outputs are stage (block) inputs, the last one the classifier's input.
    assert cats.count("block_input") == 4 and cats.count("block_output") == 1
    assert inst.tensor("pool2_out").category == "block_input"
    assert {inst.ops[inst.op_index(r)].layer for r in inst.tensor("pool2_out").readers} == {2}
    assert cats.count("image") == 1 and cats.count("logits") == 1
    # A ReLU output is rebuilt by re-running conv + ReLU.
    rec = inst.tensor("relu3_2_out").recipe
    assert rec.ops == ("conv3_2", "relu3_2") and rec.inputs == ("relu3_1_out",)


def test_vgg_titanx_is_fp32():
    a100, titan = make("vgg16"), make("vgg16", gpu="titanx")
    assert titan.link.name == "pcie3-titanx"
    assert titan.tensor("image").size_bytes == 2 * a100.tensor("image").size_bytes
    assert titan.meta["params"]["dtype_bytes"] == 4


@pytest.mark.parametrize("w", list(WORKLOADS))
def test_structure_and_provenance(w):
    inst = make(w)  # the constructor validates
    assert inst.meta["generator"] == w
    assert inst.meta["gpu"] == "a100" and inst.link.name == "pcie4"
    assert inst.name.endswith("_a100-pcie4")
    assert isinstance(inst.meta["params"], dict) and inst.meta["params"]
    for t in inst.tensors:
        if t.category == "rng_state":
            assert t.size_bytes == 8
        if t.category == "mask":
            (regen,) = t.recipe.ops
            assert inst.ops[inst.op_index(regen)].phase == "rebuild"
            assert inst.tensor(t.recipe.inputs[0]).category == "rng_state"
    for k in range(inst.n_saved):
        assert inst.r[k] <= inst.d[k]
    # Dropout ops are random; regen ops are rebuild-only.
    for op in inst.ops:
        assert op.random == (op.kind == "dropout" and op.phase == "fwd")


@pytest.mark.parametrize("w", ["gpt2-xl", "bert-large", "llama-7b", "tiny"])
def test_layers_and_block_inputs(w):
    inst = make(w, layers=3, seq=64, batch=1)
    assert {op.layer for op in inst.ops} == {-1, 0, 1, 2}
    for j in range(3):
        x = inst.tensor(f"L{j}.x")
        assert x.category == "block_input"
        assert any(inst.ops[inst.op_index(r)].layer == j for r in x.readers)
        # Backward ops of the block carry its layer index.
        assert any(op.layer == j and op.phase == "bwd" for op in inst.ops)
    assert inst.tensor("head_in").category == "block_output"
    assert [t.category for t in inst.tensors].count("block_input") == 3


def test_tiny_is_small_and_fast():
    inst = make("tiny")
    assert 10 < inst.n_saved < 60
    assert inst.A < 1e6
    assert inst.meta["params"]["layers"] == 2


def test_gpu_knobs(paper):
    h100 = make("gpt2-xl", gpu="h100")
    assert h100.link.name == "pcie5" and h100.name == "gpt2-xl_h100-pcie5"
    assert h100.A == paper["gpt2-xl"].A
    assert h100.forward_time_s < paper["gpt2-xl"].forward_time_s
    assert make("tiny", gpu="v100").link.name == "pcie3"
    c2c = make("tiny", link="nvlink-c2c")
    assert c2c.link.bytes_per_s == 450e9 and c2c.name == "tiny_a100-nvlink-c2c"
    assert c2c.link.d2h_bytes_per_s == c2c.link.h2d_bytes_per_s == 450e9
    fp32 = make("tiny", dtype_bytes=4)
    assert fp32.tensor("L0.ln1_out").size_bytes == 2 * make("tiny").tensor("L0.ln1_out").size_bytes


def test_todays_presets():
    """H200/B200 time ops faster than the H100 where their datasheets say so (HBM, FLOP/s);
    GH200's default link is asymmetric (D2H 170, H2D 416 GB/s), GB200's is its GPU's
    half of the shared C2C link; every GPU's default link is a preset named as its key;
    Grace's memory becomes the host limit only when asked."""
    from slackopt.hardware import GPUS, LINKS

    for name, lk in LINKS.items():
        assert lk.name == name
    for g in GPUS.values():
        assert g.default_link in LINKS
    h100, h200, b200 = (make("tiny", gpu=g) for g in ("h100", "h200", "b200"))
    assert h200.forward_time_s < h100.forward_time_s and b200.forward_time_s < h200.forward_time_s
    assert h200.link.name == "pcie5-measured" and h200.link.h2d_bytes_per_s == 53e9
    gh = make("tiny", gpu="gh200")
    assert gh.name == "tiny_gh200-gh200-c2c" and gh.host_memory_bytes is None
    assert (gh.link.d2h_bytes_per_s, gh.link.h2d_bytes_per_s) == (170e9, 416e9)
    gb = make("tiny", gpu="gb200", host_memory_bytes="gpu")
    assert gb.link.d2h_bytes_per_s == gb.link.h2d_bytes_per_s == 450e9 / 2
    assert gb.host_memory_bytes == 240_000_000_000
    assert make("tiny", gpu="gh200", host_memory_bytes="gpu").host_memory_bytes == 480e9
    assert make("tiny", gpu="h100", host_memory_bytes=10**9).host_memory_bytes == 10**9
    with pytest.raises(WorkloadError, match="gh200, gb200"):
        make("tiny", gpu="h100", host_memory_bytes="gpu")


@pytest.mark.torch
@pytest.mark.slow
def test_every_solver_plans_on_the_asymmetric_gh200_link():
    """An instance with D2H 170 and H2D 416 GB/s: every registered solver but the two
    search-heavy ones (genetic, milp: their bounds and searches are property-tested on
    asymmetric links in test_milp_point and test_bound_point) plans it, and each plan's
    evaluation is what the reference engine gives; SlackSwap swaps something."""
    from slackopt import Plan, budget_bytes, registered_solvers, simulate, solve

    inst = make("tiny", gpu="gh200", layers=1)
    M = budget_bytes(inst, 0.6)
    for name in registered_solvers():
        if name in ("genetic", "milp"):
            continue
        r = solve(inst, name, M)
        ref = simulate(inst, r.plan, M, engine="reference")
        assert ref.to_dict() == r.evaluation.to_dict(), name
    r = solve(inst, "slackswap", M)
    assert r.evaluation.feasible and r.evaluation.d2h_bytes > 0
    assert simulate(inst, Plan.keep_all(inst), M).feasible is False


def test_overrides_appear_in_name_and_meta():
    inst = make("llama-7b", seq=2048, batch=4)
    assert inst.name == "llama-7b-seq2048-batch4_a100-pcie4"
    assert inst.meta["params"]["seq"] == 2048 and inst.meta["params"]["ffn"] == 11008
    t = make("tiny", hidden=128)
    assert t.meta["params"]["ffn"] == 512 and t.name == "tiny-hidden128_a100-pcie4"


def test_errors():
    with pytest.raises(KeyError, match="gpt2-xl"):
        make("gpt3")
    with pytest.raises(KeyError, match="a100"):
        make("tiny", gpu="tpu9")
    with pytest.raises(KeyError, match="pcie4"):
        make("tiny", link="pcie9")
    with pytest.raises(WorkloadError, match="seq"):
        make("vgg16", seq=128)
    with pytest.raises(WorkloadError, match="no parameter 'foo'"):
        make("tiny", foo=1)
    with pytest.raises(WorkloadError, match="heads"):
        make("tiny", heads=5)
    with pytest.raises(WorkloadError):
        make("tiny", layers=0)
    with pytest.raises(WorkloadError):
        make("vgg16", layers=17)
    assert issubclass(WorkloadError, SlackoptError)


def test_chain_is_deterministic_per_seed():
    a, b = chain(6, seed=3), chain(6, seed=3)
    assert a.name == b.name == "chain6-seed3_a100-pcie4"
    for attr in ("s", "r", "d", "c"):
        assert np.array_equal(getattr(a, attr), getattr(b, attr))
    assert np.array_equal(a.durations_s, b.durations_s)
    other = chain(6, seed=4)
    assert not np.array_equal(a.s, other.s)
    assert a.n_saved == 7  # input + 6 activations
    assert math.isinf(a.c[0]) and np.isfinite(a.c[1:]).all()
    m = make("chain", layers=4, seed=3)
    assert m.meta["params"]["n_layers"] == 4 and m.n_saved == 5


def test_chain_bad_params():
    with pytest.raises(WorkloadError):
        chain(3, min_bytes=10, max_bytes=5)
    with pytest.raises(WorkloadError):
        chain(0)


def test_unet_structure_and_long_skips():
    """levels=2, batch=1, size=8, channels=2, 4-byte elements: level-0 activations are
    1*8*8*2*4 = 512 B, level-1 ones 1*4*4*4*4 = 256 B, pools a quarter of their level."""
    from slackopt.workloads.synthetic import unet
    inst = unet(2, batch=1, size=8, channels=2, dtype_bytes=4)
    names = list(inst.saved_names)
    assert sorted(names) == sorted(["x", "e0", "p0", "e1", "p1", "k1", "k0", "d0"])
    assert len(names) == 3 * 2 + 2
    size = dict(zip(names, inst.s.tolist(), strict=True))
    assert size == {"x": 512, "e0": 512, "p0": 128, "e1": 256, "p1": 64,
                    "k1": 512, "k0": 1024, "d0": 512}
    # the long skip: e0 is produced first and read by the last decoder concat
    tensor = {t.name: t for t in inst.tensors}
    assert tensor["e0"].producer == "enc0.conv"
    assert "dec0.cat" in tensor["e0"].readers and "enc0.pool.b" in tensor["e0"].readers
    assert tensor["x"].recipe is None and not np.isfinite(inst.c[names.index("x")])
    assert nx.is_directed_acyclic_graph(inst.graph)
    with pytest.raises(WorkloadError):
        unet(3, size=4)
