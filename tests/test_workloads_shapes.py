"""The CNN families of slackopt/workloads/shapes/ and the shapes suite built from them.

Structure (the FCN skips read by the fusion branch forward and backward, DenseNet features
read by every later layer, the residual gradient buffer of ResNet, U-Net's concatenation
gradient living from the decoder's backward to the encoder's, depthwise convolutions
memory-bound), hand-computed sizes and counts, the keep-all invariants of docs/model.md,
the recipes cross-checked by simulating the all-recompute plan, determinism, errors, and
instances/shapes/ against its manifest, its generator and its references.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import sys
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from slackopt import Plan, simulate
from slackopt.hardware import LAUNCH_S, MEM_EFF, gpu
from slackopt.instance import Instance
from slackopt.io import load_instance
from slackopt.plan import KEEP, RECOMP, SWAP
from slackopt.workloads import WORKLOADS, WorkloadError, make
from slackopt.workloads.shapes import (
    FAMILIES,
    MOBILENET_V2,
    _stage_repeats,
    branches,
    densenet,
    fcn,
    mobilenet,
    resnet,
    unet,
)

from .helpers import assert_user_error, run

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "instances" / "shapes"

# Small configurations of every family (milliseconds to build and simulate).
SMALL = {
    "fcn": dict(depth=11, batch=1, image=64, width=8, classes=3),
    "unet": dict(levels=2, batch=1, image=32, width=4),
    "resnet": dict(depth=10, batch=1, image=64, width=8, classes=10),
    "densenet": dict(blocks=2, layers=3, growth=4, batch=1, image=32, classes=10),
    "mobilenet": dict(blocks=3, batch=1, image=64, width=0.25, classes=10),
    "branches": dict(cells=4, batch=1, image=32, channels=4),
}


def small(family: str, **kw) -> Instance:
    return FAMILIES[family](**{**SMALL[family], **kw})


def saved_tensor(inst: Instance, name: str):
    assert name in inst.saved_names, name
    return inst.tensor(name)


def op_index(inst: Instance, name: str) -> int:
    return inst.op_index(name)


# ----------------------------------------------------------------------------- structure
def test_fcn_skips_are_read_by_the_fusion_branch_and_its_backward():
    """FCN-8s: pool4_out feeds conv5_1 and score_pool4 forward, and both wgrads backward;
    the fused scores are rebuilt through the upsampling and the score convolution."""
    inst = small("fcn")
    for pool, score, nxt in (("pool4_out", "score_pool4", "conv5_1"),
                             ("pool3_out", "score_pool3", "conv4_1")):
        t = saved_tensor(inst, pool)
        assert set(t.readers) == {f"{nxt}.conv", f"{score}.conv", f"{score}.conv.wgrad",
                                  f"{nxt}.conv.wgrad"}
        # the skip lives from the backbone to the backbone's backward: its first backward
        # read is the score convolution's wgrad, in the decoder's backward, its last the
        # next stage's wgrad
        k = list(inst.saved_names).index(pool)
        ops = inst.scheduled_ops
        assert ops[int(inst.saved_first_bwd_idx[k])].name == f"{score}.conv.wgrad"
        assert ops[int(inst.saved_last_bwd_idx[k])].name == f"{nxt}.conv.wgrad"
    # 1 x 64 x 64 image, 3 classes, BF16: fuse_pool4 at 64/16 = 4 px: 3*4*4*2 = 96 B
    fuse = saved_tensor(inst, "fuse_pool4")
    assert fuse.size_bytes == 96
    assert fuse.recipe.ops == ("upscore2.conv", "score_pool4.conv", "fuse_pool4")
    assert set(fuse.recipe.inputs) == {"score_fr", "pool4_out"}
    assert fuse.recipe.transient_bytes == 2 * 96     # upscore2 and score_pool4 outputs
    assert inst.tensor("upscore2").category == "temp"  # read by the add only
    # depth 11: image, 8 ReLU outputs, 5 pools, fc6, fc7, score_fr, 2 fusions, logits
    assert inst.n_saved == 20
    assert [fcn(depth=d, batch=1, image=64, width=8).n_saved for d in (16, 19)] == [25, 28]
    assert fcn(batch=1, image=64, width=8, bn=True).n_saved == 25 + 13


def test_unet_long_skip_and_its_concatenation_gradient():
    inst = small("unet")
    skip = saved_tensor(inst, "enc0_2")
    assert {"pool0", "cat0", "enc0_2.relu.bwd", "pool0.bwd"} <= set(skip.readers)
    # the concatenation's gradient (written by dec0_1's dgrad) is the skip's: the pool's
    # backward accumulates into it and the encoder's ReLU backward reads it
    g = inst.tensor("d_cat0")
    assert g.producer == "dec0_1.conv.dgrad"
    assert {"up0.conv.dgrad", "pool0.bwd", "enc0_2.relu.bwd"} <= set(g.readers)
    assert g.size_bytes == 2 * skip.size_bytes
    assert inst.n_saved == 6 * 2 + 4
    assert unet(levels=4, batch=1, image=32, width=4).n_saved == 28
    assert unet(levels=3, batch=1, image=32, width=4, bn=True).n_saved == 22 + 14
    assert unet(levels=3, convs=3, batch=1, image=32, width=4).n_saved == 2 + 3 * 8 + 3


def test_resnet_residual_stream_and_its_gradient_buffer():
    inst = small("resnet", depth=18)
    # identity block s0b1: the add passes one gradient buffer to branch and shortcut;
    # the branch's first convolution accumulates into it
    g = next(t for t in inst.tensors if "s0b1.relu.bwd" in t.readers and t.category == "grad")
    assert {"s0b1.conv2.bn.bwd", "s0b1.conv1.conv.dgrad", "s0b0.relu.bwd"} <= set(g.readers)
    # block inputs: no recipe by default, (BN, add, ReLU) with rebuild_block_inputs
    assert saved_tensor(inst, "s0b1").category == "block_input"
    assert saved_tensor(inst, "s0b1").recipe is None
    assert saved_tensor(inst, "s3b1").category == "block_output"
    r = saved_tensor(small("resnet", depth=18, rebuild_block_inputs=True), "s0b1").recipe
    assert r.ops == ("s0b1.conv2.bn", "s0b1.add", "s0b1.relu")
    assert set(r.inputs) == {"s0b1.conv2.c", "s0b0"}
    assert r.transient_bytes == saved_tensor(inst, "s0b1").size_bytes  # the BN output
    # a projection shortcut where the stride or width changes
    assert "s1b0.ds.c" in inst.saved_names and "s1b1.ds.c" not in inst.saved_names
    counts = {d: resnet(depth=d, batch=1, image=32, width=4).n_saved
              for d in (10, 18, 34, 50, 101, 152)}
    assert counts == {10: 25, 18: 41, 34: 73, 50: 106, 101: 208, 152: 310}
    inputs = [t for t in inst.tensors if t.category in ("block_input", "block_output")]
    assert len(inputs) == 1 + 8 and all(t.recipe is None for t in inputs)


def test_densenet_features_are_read_by_every_later_layer():
    inst = densenet(blocks=1, layers=4, growth=4, batch=1, image=32, classes=10)
    f0 = saved_tensor(inst, "b0l0")
    later = [f"b0l{i}.bn1.bn" for i in (1, 2, 3)] + ["b0.norm.bn"]
    assert set(f0.readers) == {*later, *(f"{x}.bwd" for x in later)}
    # the block input is read by the first layer too, and has no recipe
    assert len(saved_tensor(inst, "b0.in").readers) == 2 * 5
    assert saved_tensor(inst, "b0.in").recipe is None
    # a layer's BN-ReLU reads the virtual concatenation: recipe inputs are every feature
    r = saved_tensor(inst, "b0l3.bn1").recipe
    assert r.ops == ("b0l3.bn1.bn", "b0l3.bn1.relu") and r.transient_bytes == 0
    assert r.inputs == ("b0.in", "b0l0", "b0l1", "b0l2")
    # its size: 1 x (8 + 3*4) channels x 8 x 8 (32 px, stride-2 stem and max pool), BF16
    assert saved_tensor(inst, "b0l3.bn1").size_bytes == (8 + 12) * 8 * 8 * 2
    # the gradient of b0l0: written by the last reader's backward, accumulated by the rest
    g = inst.tensor("d_b0l0")
    assert g.producer == "b0.norm.bn.bwd"
    assert {f"b0l{i}.bn1.bn.bwd" for i in (1, 2, 3)} <= set(g.readers)
    assert inst.n_saved == 4 * 4 + 2 * 1 + 5
    assert densenet(blocks=3, layers=6, growth=4, batch=1, image=32).n_saved == 83


def test_mobilenet_depthwise_is_memory_bound_and_early_tensors_are_large():
    inst = mobilenet(blocks=17, batch=2, image=64, width=1.0, classes=10)
    a100 = gpu("a100")
    dw = inst.ops[op_index(inst, "s1b0.dw.conv")]
    # 2 x 96 x 32 x 32 in, 2 x 96 x 16 x 16 out (stride 2), 3 x 3 x 96 weights, BF16
    moved = (2 * 96 * 32 * 32 + 2 * 96 * 16 * 16 + 9 * 96) * 2
    assert dw.duration_s == pytest.approx(LAUNCH_S + moved / (MEM_EFF * a100.hbm_bytes_per_s),
                                          rel=1e-12)
    assert dw.flops == 2.0 * 2 * 16 * 16 * 9 * 1 * 96
    s = dict(zip(inst.saved_names, inst.s.tolist(), strict=True))
    assert s["s1b0.expand"] >= 20 * s["s6b0"]           # early activations dwarf late ones
    # residual blocks add the input; the first block of a stage projects only
    assert set(inst.tensor("s1b1").readers) >= {"s2b0.expand.conv"}
    assert inst.tensor("s1b1").producer == "s1b1"
    assert inst.tensor("s1b0").producer == "s1b0.bn"
    assert inst.n_saved == 107
    assert [mobilenet(blocks=b, batch=1, image=32, width=0.25).n_saved
            for b in (3, 48)] == [23, 289]


def test_stage_repeats():
    assert _stage_repeats(17) == [n for _, _, n, _ in MOBILENET_V2]
    assert _stage_repeats(3) == [1, 1, 1]
    for b in range(1, 80):
        reps = _stage_repeats(b)
        assert sum(reps) == b and min(reps) >= 1 and len(reps) <= 7


def test_branches_merge_and_are_deterministic_for_a_seed():
    a, b, c = branches(seed=3), branches(seed=3), branches(seed=4)
    assert (a.saved_names, a.s.tolist(), a.c.tolist()) == (b.saved_names, b.s.tolist(),
                                                           b.c.tolist())
    assert a.saved_names != c.saved_names or a.s.tolist() != c.s.tolist()
    # a merge reads at least two branches; a forked cell input has several readers
    merges = [op for op in a.ops if op.phase == "fwd" and op.kind in ("add", "cat")]
    assert merges
    readers = {t.name: t.readers for t in a.tensors}
    for op in merges:
        assert sum(op.name in r for r in readers.values()) >= 2
    assert any(sum(1 for r in t.readers if r.endswith(".conv")) >= 2 for t in a.tensors)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_keep_all_invariants_and_recipes(family):
    """docs/model.md, "Invariants": keep-all at M = P runs at T* with a peak of exactly P
    and does not run at P - 1 byte; P holds every saved byte and the logits' gradient.
    Every recipe is well formed: the plan that recomputes every rebuildable tensor (the
    rest kept) runs at 2P in T* + the sum of the rebuild times, no stall."""
    inst = small(family)
    assert nx.is_directed_acyclic_graph(inst.graph)
    ka = Plan.keep_all(inst)
    ev = simulate(inst, ka, inst.P)
    assert ev.feasible and ev.step_time_s == inst.ideal_time_s and ev.peak_bytes == inst.P
    assert not simulate(inst, ka, inst.P - 1).feasible
    d_logits = inst.tensor(f"d_{_logits(inst)}")
    assert inst.P >= inst.A + d_logits.size_bytes
    assert inst.P == int(inst.keep_all_profile.max())
    assert np.all(inst.r <= inst.d)
    # the image only (and block inputs in the block families) cannot be rebuilt
    blocked = {n for n, c in zip(inst.saved_names, inst.c, strict=True) if math.isinf(c)}
    assert "image" in blocked
    assert all(inst.tensor(n).category in ("image", "block_input", "block_output")
               for n in blocked)
    for t in inst.tensors:
        if t.category == "grad":
            assert t.readers, f"{t.name} is never read"
    dec = np.where(np.isfinite(inst.c), RECOMP, KEEP).astype(np.int8)
    ev = simulate(inst, Plan(dec, inst.saved_names), 2 * inst.P)
    c = float(inst.c[np.isfinite(inst.c)].sum())
    assert ev.feasible and ev.stall_fwd_s == 0 and ev.stall_bwd_s == 0
    assert ev.recompute_s == pytest.approx(c, rel=1e-12)
    assert ev.step_time_s == pytest.approx(inst.ideal_time_s + c, rel=1e-12)
    swap = Plan(np.full(inst.n_saved, SWAP, dtype=np.int8), inst.saved_names)
    assert simulate(inst, swap, inst.P).feasible


def _logits(inst: Instance) -> str:
    (lg,) = [t.name for t in inst.tensors if "loss" in t.readers]
    return lg


@pytest.mark.parametrize("family", list(FAMILIES))
def test_registered_and_sizes_in_range(family):
    """Each family is the workload shapes-<family>; make's --layers and --batch reach the
    family's depth knob; 20 to about 300 saved tensors between two settings."""
    w = WORKLOADS[f"shapes-{family}"]
    assert w.fn is FAMILIES[family]
    lo = {"fcn": dict(layers=11), "unet": dict(layers=2, bn=True),
          "resnet": dict(layers=10), "densenet": dict(layers=1, blocks=3),
          "mobilenet": dict(layers=3), "branches": dict(layers=2, seed=1)}[family]
    hi = {"fcn": dict(layers=19, bn=True), "unet": dict(layers=8, convs=8, bn=True),
          "resnet": dict(layers=152), "densenet": dict(layers=18, blocks=4),
          "mobilenet": dict(layers=48), "branches": dict(layers=24, seed=1)}[family]
    tiny = dict(batch=1)
    n_lo = make(f"shapes-{family}", **lo, **tiny, **_px(family, lo)).n_saved
    n_hi = make(f"shapes-{family}", **hi, **tiny, **_px(family, hi)).n_saved
    assert 20 <= n_lo <= 30, n_lo
    assert family == "fcn" or 250 <= n_hi <= 320, n_hi
    inst = make(f"shapes-{family}", **lo, **tiny, **_px(family, lo))
    assert inst.meta["generator"] == f"shapes-{family}"
    assert inst.name.startswith(f"shapes-{family}") and inst.name.endswith("_a100-pcie4")


def _px(family: str, kw: dict) -> dict:
    """A small image the family's poolings divide."""
    if family == "unet":
        return {"image": 2 ** kw["layers"], "width": 2}
    if family == "branches":
        return {"image": 2 ** (kw["layers"] // 3 + 1), "channels": 2}
    if family == "densenet":
        return {"image": 64, "growth": 2}
    if family == "mobilenet":
        return {"image": 32, "width": 0.25}
    return {"image": 32, "width": 2}


def test_names_show_flags_and_overrides():
    assert make("shapes-resnet", layers=50, batch=16).name == \
        "shapes-resnet50-batch16_a100-pcie4"
    assert make("shapes-fcn", bn=True, batch=1, image=64, width=4).name == \
        "shapes-fcn16-batch1-image64-width4-bn_a100-pcie4"
    assert make("shapes-mobilenet", rebuild_block_inputs=True, batch=1, image=32).name == \
        "shapes-mobilenet17-batch1-image32-rebuild_a100-pcie4"
    assert branches(batch=1, image=64).name == "shapes-branches6-seed0-batch1_a100-pcie4"


@pytest.mark.parametrize("call, word", [
    (lambda: fcn(depth=12), "depth"),
    (lambda: fcn(image=500), "multiple of 32"),
    (lambda: unet(levels=13), "levels"),
    (lambda: unet(levels=3, image=20), "multiple of 8"),
    (lambda: resnet(depth=20), "depth"),
    (lambda: resnet(rebuild_block_inputs=1), "true or false"),
    (lambda: densenet(blocks=7), "blocks"),
    (lambda: densenet(growth=0), "growth"),
    (lambda: mobilenet(width=0.0), "width"),
    (lambda: mobilenet(width=float("nan")), "width"),
    (lambda: mobilenet(blocks=0), "blocks"),
    (lambda: branches(max_branches=1), "max_branches"),
    (lambda: branches(seed=-1), "seed"),
    (lambda: fcn(batch=0), "batch"),
])
def test_bad_parameters(call, word):
    with pytest.raises(WorkloadError, match=word):
        call()


def test_cli_make(tmp_path, capsys):
    out = tmp_path / "r.json"
    rc, stdout, _ = run(capsys, "make", "shapes-resnet", "--layers", "10", "--batch", "2",
                        "-p", "rebuild_block_inputs=true", "-o", out, "--json")
    assert rc == 0
    assert json.loads(stdout)["saved_tensors"] == 25
    inst = load_instance(out)
    assert inst.name == "shapes-resnet10-batch2-rebuild_a100-pcie4"
    assert [n for n, c in zip(inst.saved_names, inst.c, strict=True) if math.isinf(c)] == \
        ["image"]
    rc, stdout, err = run(capsys, "make", "shapes-fcn", "-p", "depth=17", "-o",
                          tmp_path / "f.json")
    assert_user_error(rc, stdout, err, "depth")


# ----------------------------------------------------------------------------- the suite
MANIFEST = json.loads((SUITE / "manifest.json").read_text())
ROWS = MANIFEST["instances"]


def _make_shapes():
    spec = importlib.util.spec_from_file_location("make_shapes",
                                                  ROOT / "benchmarks" / "make_shapes.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_suite_manifest_covers_families_sizes_and_links():
    assert (MANIFEST["format"], MANIFEST["generator"]["script"]) == \
        ("slackopt-bench-manifest", "benchmarks/make_shapes.py")
    assert {r["model"] for r in ROWS} == {f"shapes-{f}" for f in FAMILIES}
    n = [r["saved_tensors"] for r in ROWS]
    assert min(n) == 20 and max(n) >= 250
    assert {r["link"] for r in ROWS} >= {"pcie3", "pcie4", "gh200-c2c"}
    shipped = {p.name for p in SUITE.glob("*.json*")} - {"manifest.json", "references.json"}
    assert shipped == {r["file"] for r in ROWS}


def test_suite_files_are_what_the_generator_writes_now():
    """Every file has its manifest's sha256, and make_shapes.py's specs give these very
    bytes: a change of the generators that changes an instance fails here (regenerate
    the suite and its references)."""
    mod = _make_shapes()
    assert [f"{s.make().name}.json.gz" for s in mod.SPECS] == [r["file"] for r in ROWS]
    for spec, row in zip(mod.SPECS, ROWS, strict=True):
        data = (SUITE / row["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == row["sha256"]
        inst, fresh = mod.instance_bytes(spec)
        assert fresh == data, row["file"]
        assert (inst.n_saved, inst.P, inst.n_ops) == (row["saved_tensors"], row["P_bytes"],
                                                     row["ops"])


def test_suite_resolves_by_name():
    from slackopt.compare.bench import SHAPES_MANIFEST, load_manifest, resolve_suite

    assert resolve_suite("shapes") == SHAPES_MANIFEST == SUITE / "manifest.json"
    assert len(load_manifest(resolve_suite("shapes")).instances) == len(ROWS)


def test_suite_references_are_certified_and_below_their_plans():
    """references.json (bench_references.py --suite shapes): one row per file and budget
    in 0.1-0.7 P; a row below the floor states a smallest budget above its own; every
    other bound is certified (or T*) and at most the row's best plan, which re-simulates
    to exactly that step; SlackSwap's plan, where it runs, is never below the bound."""
    from slackopt import solve
    from slackopt.io import load_plan

    refs = json.loads((SUITE / "references.json").read_text())
    assert refs["format"] == "slackopt-bench-references" and refs["version"] == 1
    rows = refs["rows"]
    assert {(r["instance"], r["budget_fraction"]) for r in rows} == {
        (m["file"], f) for m in ROWS for f in (0.1, 0.3, 0.5, 0.7)}
    insts = {m["file"]: load_instance(SUITE / m["file"]) for m in ROWS}
    for r in rows:
        inst, m = insts[r["instance"]], r["budget_bytes"]
        if r["below_floor"]:
            assert r["status"] == "infeasible" and r["best_step_s"] is None
            assert r["min_budget_bytes"] > m
            continue
        assert r["bound_source"] in ("certified", "T* (trivial)"), r
        lb, best = r["lower_bound_s"], r["best_step_s"]
        assert inst.ideal_time_s * (1 - 1e-9) <= lb <= best, r
        ev = simulate(inst, load_plan(SUITE / r["best_plan"], inst), m)
        assert ev.feasible and ev.step_time_s == best, r
        res = solve(inst, "slackswap", m, seed=0)
        if res.evaluation.feasible:
            assert res.evaluation.step_time_s >= lb, r
