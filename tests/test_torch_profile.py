"""Real PyTorch steps in, executable plans out (slackopt.torch: profile, runtime).

Two models nobody here wrote the internals of: ``torch.nn.TransformerEncoder`` (PyTorch's
own layers, attention through ``scaled_dot_product_attention``) and a GPT-style decoder
built from ``torch.nn`` modules (tests/torch_models.py: explicit causal attention over a
mask buffer, dropout, GELU MLP, tied head). Each is profiled, written to an instance file,
read back, planned with every available planner of interest, executed on the module, and
its gradients compared with an unplanned step: bit for bit when no random op is
recomputed, allclose otherwise; the runtime's bytes moved and tensors rebuilt equal the
plan's. CPU only; the GPU paths of the runtime are not exercised here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # import guard only: CI installs torch

from torch import nn  # noqa: E402

from slackopt import KEEP, RECOMP, SWAP, Plan, io, solve  # noqa: E402
from slackopt.cli import main  # noqa: E402
from slackopt.errors import PlanError  # noqa: E402
from slackopt.hardware import LAUNCH_S, Link  # noqa: E402
from slackopt.instance import budget_bytes  # noqa: E402
from slackopt.simulate import TaskList, simulate  # noqa: E402
from slackopt.solver import registered_solvers  # noqa: E402
from slackopt.torch import (  # noqa: E402
    GENERATOR,
    HostPool,
    PlanRuntimeError,
    ProfileError,
    StepTracer,
    build_from_factory,
    execute_plan,
    measure_plan,
    parse_shape,
    profile_factory,
    profile_step,
    run_loss,
)
from tests.torch_models import (  # noqa: E402
    HFStyleLM,
    TinyGPT,
    TinyResNet,
    encoder,
    hf_batch,
    lm_loss,
)

# The CPU-timing warning is the subject of one test; elsewhere CPU timing is intended.
pytestmark = [pytest.mark.torch,
              pytest.mark.filterwarnings("ignore:the durations are measured on the CPU")]

ROOT = Path(__file__).resolve().parents[1]
MODELS = Path(__file__).with_name("torch_models.py")


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """One intra-op thread: steadier CPU timings and no OpenMP contention on small CI boxes."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@dataclass
class Case:
    model: Any
    inputs: tuple[Any, ...]
    loss_fn: Any
    random: bool


def make_case(kind: str) -> Case:
    torch.manual_seed(0)
    if kind == "encoder":
        return Case(encoder(layers=2, dropout=0.0), (torch.randn(2, 8, 32),), None, False)
    if kind == "encoder_dropout":
        return Case(encoder(layers=3, dropout=0.1), (torch.randn(2, 8, 32),), None, True)
    if kind == "gpt":
        return Case(TinyGPT(layers=2, dropout=0.1), (torch.randint(0, 64, (2, 16)),),
                    lm_loss, True)
    raise KeyError(kind)


@pytest.fixture(scope="module", params=["encoder", "gpt"])
def profiled(request):
    case = make_case(request.param)
    inst = profile_step(case.model, case.inputs, case.loss_fn, repeat=1)
    return request.param, case, inst


def step_grads(case: Case, inst=None, plan=None, seed: int = 7, budget=None):
    """Gradients of one step (unplanned when `plan` is None) and the runtime report."""
    case.model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    rep = None
    if plan is None:
        run_loss(case.model, case.inputs, case.loss_fn).backward()
    else:
        rep = execute_plan(case.model, case.inputs, case.loss_fn, inst, plan, budget)
    grads = [p.grad.detach().clone() for p in case.model.parameters()]
    return grads, rep


def recomputes_random(inst, plan) -> bool:
    rand = {op.name for op in inst.ops if op.random}
    return any(plan.decisions[k] == RECOMP and rand.intersection(inst.tensor(n).recipe.ops)
               for k, n in enumerate(inst.saved_names))


def check_step(case: Case, inst, plan, ref, budget=None) -> Any:
    """Run `plan` at `budget`, compare gradients with `ref`, check the report against the
    evaluator's run of the same plan and budget."""
    got, rep = step_grads(case, inst, plan, budget=budget)
    if recomputes_random(inst, plan):
        for a, b in zip(ref, got, strict=True):
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    else:
        for a, b in zip(ref, got, strict=True):
            assert torch.equal(a, b), (a - b).abs().max()
    m = budget_bytes(inst, inst.P if budget is None else budget)
    ev = simulate(inst, plan, m, engine="reference")
    counts = plan.counts()
    assert rep.matches_plan(), rep.to_dict()
    assert (rep.d2h_bytes, rep.h2d_bytes, rep.evictions) == (ev.d2h_bytes, ev.h2d_bytes,
                                                             ev.evictions)
    assert rep.off_schedule == [] and rep.unmanaged == []
    # Op by op, the saved bytes the runtime held equal the evaluator's, and stay within M.
    assert len(rep.memory_timeline) == len(TaskList(inst, plan.decisions).task_op)
    assert rep.memory_timeline == rep.simulated_timeline
    assert max(rep.memory_timeline, default=0) <= min(m, ev.peak_bytes)
    # Every block held until it was really free: the peak is still the evaluator's.
    assert rep.accounted_peak_bytes == ev.peak_bytes, rep.held_past_drop
    # Every swapped tensor was offloaded unless its D2H was dropped (rule 2).
    assert rep.swapped + rep.dropped_d2h >= counts["swap"] - sum(
        1 for k, n in enumerate(inst.saved_names)
        if plan.decisions[k] == SWAP and inst.s[k] == 0)
    assert rep.rebuilt == sum(1 for t in TaskList(inst, plan.decisions).task_t if t >= 0)
    assert rep.kept == counts["keep"]
    assert rep.unplanned_saves == 0
    assert rep.still_resident == [], "dropped tensors are still held outside autograd"
    return rep


def random_plan(inst, seed: int) -> Plan:
    rng = np.random.default_rng(seed)
    dec = rng.integers(0, 3, inst.n_saved).astype(np.int8)
    dec[(dec == RECOMP) & ~np.isfinite(inst.c)] = KEEP
    return Plan(dec, inst.saved_names)


# ----------------------------------------------------------------------------- profile
def test_profile_records_the_step(profiled):
    kind, case, inst = profiled
    meta = inst.meta
    assert meta["generator"] == GENERATOR
    assert meta["model_class"].endswith(type(case.model).__qualname__)
    assert meta["torch_version"] == torch.__version__
    assert meta["timing"] == "measure" and meta["device"] == "cpu"
    assert meta["input_shapes"] == [list(x.shape) for x in case.inputs]
    assert meta["ops"]["forward"] == inst.n_fwd and inst.n_ops > inst.n_fwd > 0
    assert all(op.duration_s >= 0 for op in inst.ops) and inst.ideal_time_s > 0
    assert any(op.flops > 0 and op.kind == "gemm" for op in inst.ops)
    # Every saved tensor can be rebuilt in these models.
    assert meta["recipes"]["not_rebuildable"] == {}
    assert np.isfinite(inst.c).all()
    # Parameters (the tied GPT weight once), buffers and inputs are persistent.
    params = {p.untyped_storage()._cdata: p.untyped_storage().nbytes()
              for p in case.model.parameters()}
    assert meta["persistent_bytes"]["parameters"] == sum(params.values())
    assert meta["persistent_bytes"]["inputs"] == sum(x.nbytes for x in case.inputs)
    assert meta["persistent_bytes"]["buffers"] == sum(b.nbytes for b in case.model.buffers())
    rand = [op for op in inst.ops if op.random]
    assert bool(rand) == case.random
    if case.random:
        assert "mask" in inst.saved_categories
        assert all(op.kind == "dropout" for op in rand)
    # Blocks are attributed to layers 0 and 1.
    assert set(inst.saved_layers.tolist()) >= {0, 1}


def test_saved_set_is_what_autograd_saves(profiled):
    """Independent check: the distinct non-persistent storages autograd packs (counted with
    our own hooks on a fresh step) are exactly the instance's saved tensors, by number and
    bytes."""
    _, case, inst = profiled
    persistent = {t.untyped_storage()._cdata for t in
                  [*case.model.parameters(), *case.model.buffers(), *case.inputs]}
    keep_alive, sizes = [], {}

    def pack(t):
        st = t.untyped_storage()
        if st._cdata not in persistent:
            keep_alive.append(t)  # holds the storage so its address cannot be reused
            sizes[st._cdata] = st.nbytes()
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = run_loss(case.model, case.inputs, case.loss_fn)
    loss.backward()
    case.model.zero_grad(set_to_none=True)
    assert len(sizes) == inst.n_saved
    assert sum(sizes.values()) == inst.A


def test_storage_identity_address_reuse_and_views():
    tr = StepTracer()
    a = torch.ones(16384)
    ptrs = []
    with tr:
        b = a * 2
        views = (b.t(), b[10:20], b.view(128, 128))
        c = views[2] + 1  # reads b through a view
        del b, views
        for n in (4096, 16384, 16):  # same size, freed at once: blocks come back
            src = a[:n]
            for _ in range(20):
                d = src * 3
                ptrs.append((n, d.data_ptr()))
                del d
    names = [op.name for op in tr.ops]
    assert names[:3] == ["f0000.mul.Tensor", "f0001.add.Tensor", "f0002.mul.Tensor"]
    assert len(names) == 62  # views (and a[:n]) are not ops
    kb = tr.ops[0].outputs[0]
    assert tr.storages[kb].readers == [1]  # the views of b add no storage, only b's reader
    assert tr.storages[kb].nbytes == 16384 * 4
    produced = [op.outputs[0] for op in tr.ops[2:]]
    assert len(set(produced)) == 60, "every allocation is a new tensor"
    assert tr.storages[tr.ops[0].reads[0]].persistent  # `a` existed before the step
    del c
    if len(set(ptrs)) == len(ptrs):
        pytest.skip("the CPU allocator reused no address here (identity still checked)")


class _ConvBN(nn.Module):
    """In-place ReLU, BatchNorm (buffers written in the forward pass), a data-dependent op."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(16, 16)
        self.bn = nn.BatchNorm1d(16)
        self.act = nn.ReLU(inplace=True)
        self.out = nn.Linear(16, 4)

    def forward(self, x):
        h = self.act(self.bn(self.lin(x)))
        keep = torch.nonzero(h.sum(0) > -1e9).flatten()  # data-dependent shape
        return self.out(h[:, keep] * 1.5)


def test_inplace_buffers_and_never_recompute():
    torch.manual_seed(0)
    model = _ConvBN()
    x = torch.randn(8, 16)
    inst = profile_step(model, x, repeat=1)
    never = {op.name.split(".", 1)[1] for op in inst.ops if op.never_recompute}
    assert any(n.startswith("native_batch_norm") or n.startswith("_native_batch_norm")
               for n in never), never  # writes the running statistics
    assert "nonzero" in never
    # The in-place ReLU writes the BatchNorm output: a .pre version and the saved value.
    assert any(t.name.endswith(".pre") for t in inst.tensors)
    assert not np.isfinite(inst.c).all()  # some tensors are not rebuildable
    assert inst.meta["recipes"]["not_rebuildable"]

    def run(plan):
        torch.manual_seed(1)
        m = _ConvBN()
        m.load_state_dict(model.state_dict())
        m.zero_grad(set_to_none=True)
        if plan is None:
            run_loss(m, (x,), None).backward()
            rep = None
        else:
            rep = execute_plan(m, x, None, inst, plan)
        return [p.grad for p in m.parameters()], [b.clone() for b in m.buffers()], rep

    ref_g, ref_b, _ = run(None)
    for plan in (Plan.uniform(inst, SWAP), Plan.uniform(inst, RECOMP), random_plan(inst, 3)):
        g, b, rep = run(plan)
        assert all(torch.equal(u, v) for u, v in zip(ref_g, g, strict=True))
        assert all(torch.equal(u, v) for u, v in zip(ref_b, b, strict=True)), \
            "a rebuild must not update BatchNorm's running statistics again"
        assert rep.matches_plan(), rep.to_dict()


class _CtxSquare(torch.autograd.Function):
    """Keeps its input as a ctx attribute instead of save_for_backward (seen in user code)."""

    @staticmethod
    def forward(ctx, x):
        ctx.x = x
        return x * x

    @staticmethod
    def backward(ctx, g):
        return 2 * ctx.x * g


class _CtxModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        return _CtxSquare.apply(self.lin(x) + 1)  # add saves nothing for backward


def test_tensor_kept_outside_autograd_is_reported():
    torch.manual_seed(0)
    model = _CtxModel()
    x = torch.randn(4, 8)
    inst = profile_step(model, x, repeat=1)
    unmanaged = inst.meta["unmanaged_saved"]
    assert len(unmanaged) == 1 and unmanaged[0] in inst.saved_names
    plan = Plan.from_mapping(inst, {unmanaged[0]: "swap"})
    rep = execute_plan(model, x, None, inst, plan)
    assert rep.unmanaged == unmanaged and not rep.matches_plan()
    model.zero_grad(set_to_none=True)
    rep = execute_plan(model, x, None, inst, Plan.keep_all(inst))
    assert rep.matches_plan() and rep.unmanaged == []


def test_profile_restores_model_state_and_rng():
    torch.manual_seed(0)
    model = encoder(dropout=0.1)
    x = torch.randn(2, 8, 32)
    rng = torch.get_rng_state()
    profile_step(model, x, repeat=2)
    assert all(p.grad is None for p in model.parameters())
    assert torch.equal(rng, torch.get_rng_state())


def test_roofline_timing():
    from slackopt.hardware import gpu as gpu_preset
    from slackopt.hardware import roofline_s

    torch.manual_seed(0)
    model = TinyGPT(layers=1, dropout=0.0)
    idx = torch.randint(0, 64, (2, 16))
    inst = profile_step(model, idx, lm_loss, timing="roofline", gpu="a100", warmup=0,
                        repeat=1)
    a100 = gpu_preset("a100")
    assert inst.meta["timing"] == "roofline" and inst.meta["gpu"] == "a100"
    assert inst.link.name == "pcie4"  # the A100's link
    assert all(op.duration_s >= LAUNCH_S for op in inst.scheduled_ops)
    mm = next(op for op in inst.scheduled_ops if op.kind == "gemm")
    assert mm.flops > 0 and mm.duration_s >= roofline_s(a100, mm.flops)
    with pytest.raises(ProfileError, match="roofline"):
        profile_step(model, idx, lm_loss, timing="roofline")
    with pytest.raises(ProfileError, match="timing"):
        profile_step(model, idx, lm_loss, timing="guess")


def test_bad_loss_and_shapes():
    model = encoder()
    with pytest.raises(ProfileError, match="one element"):
        profile_step(model, torch.randn(2, 8, 32), lambda out, x: out, warmup=0, repeat=1)
    assert parse_shape("4x128") == (4, 128) == parse_shape("4,128")
    with pytest.raises(ProfileError):
        parse_shape("4xabc")


# ----------------------------------------------------------------------------- end to end
SOLVERS = ["slackswap", "milp"]


@pytest.mark.slow
@pytest.mark.parametrize("solver", SOLVERS)
def test_profile_file_solve_execute(profiled, solver, tmp_path):
    """Profile -> instance file -> solve -> execute: gradients match, counts match."""
    if solver not in registered_solvers():
        pytest.skip(f"solver '{solver}' is not registered (yet)")
    kind, case, inst = profiled
    path = io.save_instance(inst, tmp_path / f"{kind}.json")
    loaded = io.load_instance(path)
    assert loaded.saved_names == inst.saved_names and loaded.P == inst.P
    res = solve(loaded, solver, 0.5, time_limit_s=10)  # the MILP's incumbent is enough
    assert res.plan is not None, res.status
    ev = res.evaluation
    assert ev.feasible, ev.failure
    ref, _ = step_grads(case)
    rep = check_step(case, loaded, res.plan, ref, 0.5)
    assert rep.d2h_bytes == ev.d2h_bytes and rep.h2d_bytes == ev.h2d_bytes
    assert rep.evictions == ev.evictions


def test_measure_plan_puts_measured_beside_simulated(profiled):
    _, case, inst = profiled
    res = solve(inst, "slackswap", 0.5)
    out = measure_plan(case.model, case.inputs, case.loss_fn, inst, res.plan, 0.5, steps=2)
    case.model.zero_grad(set_to_none=True)
    meas, sim = out["measured"], out["simulated"]
    assert meas["matches_plan"] and meas["peak_bytes"] is None  # no CUDA here
    assert meas["d2h_bytes"] == sim["d2h_bytes"] and meas["step_time_s"] > 0
    assert sim["feasible"] and sim["budget_bytes"] == int(0.5 * inst.P)


def test_mixed_plans(profiled):
    """Plans with every decision (random mixes, all swap, all recompute)."""
    _, case, inst = profiled
    ref, _ = step_grads(case)
    mixes = [random_plan(inst, 0), random_plan(inst, 1)]
    assert all(min(p.counts().values()) > 0 for p in mixes)  # keep, swap and recomp
    for plan in (*mixes, Plan.uniform(inst, SWAP), Plan.uniform(inst, RECOMP)):
        check_step(case, inst, plan, ref)


def test_random_recompute_encoder():
    """TransformerEncoder with dropout, 3 layers: recomputed dropout masks come back from the
    saved RNG state (allclose required, and bit for bit in practice)."""
    case = make_case("encoder_dropout")
    inst = profile_step(case.model, case.inputs, repeat=1)
    plan = Plan.uniform(inst, RECOMP)
    assert recomputes_random(inst, plan)
    ref, _ = step_grads(case)
    check_step(case, inst, plan, ref)
    got, _ = step_grads(case, inst, plan)
    assert all(torch.equal(a, b) for a, b in zip(ref, got, strict=True))


def test_runtime_rejects_a_different_step():
    case = make_case("encoder")
    inst = profile_step(case.model, case.inputs, warmup=0, repeat=1)
    with pytest.raises(PlanRuntimeError, match="differs from the profiled"):
        execute_plan(case.model, torch.randn(2, 9, 32), None, inst, Plan.keep_all(inst))
    other = make_case("gpt")
    with pytest.raises(PlanRuntimeError, match="differs from the profiled"):
        execute_plan(other.model, other.inputs, other.loss_fn, inst, Plan.keep_all(inst))
    with pytest.raises(PlanError):
        execute_plan(case.model, case.inputs, None, inst,
                     Plan(np.zeros(inst.n_saved - 1, np.int8), inst.saved_names[:-1]))


# ----------------------------------------------------------------------------- the policy
def keep_all_timeline_by_hand(inst) -> list[int]:
    """Saved bytes on the device once each op has started, keep-all: a saved tensor is
    there from its producer's start to its last backward reader's end."""
    out = []
    for j in range(inst.n_ops):
        out.append(sum(int(inst.s[k]) for k in range(inst.n_saved)
                       if inst.saved_prod_idx[k] <= j <= max(inst.saved_reader_idx[k])))
    return out


def test_memory_timeline_equals_the_evaluator_op_by_op(profiled):
    """Keep-all: the runtime's held bytes equal a count by hand at every op, and their peak
    is the instance's saved bytes A. A solved plan at 0.5 P: equal to the evaluator's
    saved bytes at every task (tolerance 0: CPU copies are synchronous, and both sides
    count the same storages at the same task boundaries), never above M."""
    _, case, inst = profiled
    ref, rep = step_grads(case, inst, Plan.keep_all(inst))
    assert rep.memory_timeline == keep_all_timeline_by_hand(inst) == rep.simulated_timeline
    res = solve(inst, "slackswap", 0.5)
    assert res.evaluation.feasible
    rep = check_step(case, inst, res.plan, ref, 0.5)
    assert rep.timeline_max_diff_bytes() == 0
    assert max(rep.memory_timeline) <= int(0.5 * inst.P)


def roofline_case(kind: str, link_bytes_per_s: float):
    """A test model profiled with roofline durations (deterministic) on a given link."""
    case = make_case(kind)
    inst = profile_step(case.model, case.inputs, case.loss_fn, timing="roofline", gpu="a100",
                        link=Link("test-link", link_bytes_per_s), warmup=0, repeat=1)
    return case, inst


@pytest.mark.parametrize("kind", ["encoder", "gpt"])
def test_runtime_claims_lagging_copies_and_drops_useless_offloads(kind):
    """A 100 kB/s link makes offloads lag behind the compute stream: readers claim the
    device copies (no H2D), offloads of tensors with no reader left are dropped (rule 2);
    the runtime does both exactly where the evaluator does, moves the same bytes, and the
    gradients are the unplanned step's."""
    case, inst = roofline_case(kind, 1e5)
    ref, _ = step_grads(case)
    plan = Plan.uniform(inst, SWAP)
    rep = check_step(case, inst, plan, ref)
    assert rep.claimed > 0 and rep.dropped_d2h > 0 and rep.d2h_bytes > 0
    assert rep.swapped + rep.dropped_d2h == sum(1 for k in range(inst.n_saved) if inst.s[k])


def test_runtime_evicts_where_the_evaluator_does():
    """GPT, 100 MB/s link, SlackSwap's plan at 0.4 P: the evaluator evicts a prefetched
    tensor to make room; so does the runtime, and fetches it again."""
    case, inst = roofline_case("gpt", 1e8)
    res = solve(inst, "slackswap", 0.4)
    assert res.evaluation.feasible and res.evaluation.evictions >= 1
    ref, _ = step_grads(case)
    rep = check_step(case, inst, res.plan, ref, 0.4)
    assert rep.evictions == res.evaluation.evictions


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["encoder", "gpt"])
def test_random_plans_follow_the_evaluator(kind):
    """Random keep/swap/recomp mixes, two links (offloads lagging or not), two budgets:
    every plan the evaluator finds feasible runs exactly as simulated (copies, claims,
    drops, evictions, rebuilds, saved bytes after every task) with the unplanned
    gradients. The model holds gradients when it is profiled (the profile ignores them),
    and one step runs on top of existing gradients (their accumulation ops are skipped)."""
    case = make_case(kind)
    ref, _ = step_grads(case)            # leaves .grad set before profiling
    runs = 0
    for w in (1e5, 1e9):
        inst = profile_step(case.model, case.inputs, case.loss_fn, timing="roofline",
                            gpu="a100", link=Link("test-link", w), warmup=0, repeat=1)
        rng = np.random.default_rng(int(w))
        for _ in range(2):
            dec = rng.choice(3, inst.n_saved, p=[0.2, 0.6, 0.2]).astype(np.int8)
            dec[(dec == RECOMP) & ~np.isfinite(inst.c)] = KEEP
            plan = Plan(dec, inst.saved_names)
            for budget in (0.6, 0.5):
                if simulate(inst, plan, budget_bytes(inst, budget)).feasible:
                    check_step(case, inst, plan, ref, budget)
                    runs += 1
    assert runs >= 4
    torch.manual_seed(7)
    rep = execute_plan(case.model, case.inputs, case.loss_fn, inst, plan, 1.0)
    assert rep.matches_plan() and rep.extra_backward_ops > 0


def test_infeasible_plan_is_refused_unless_forced(profiled):
    _, case, inst = profiled
    plan = Plan.keep_all(inst)
    m = int(0.5 * inst.P)
    with pytest.raises(PlanRuntimeError, match="infeasible at M"):
        execute_plan(case.model, case.inputs, case.loss_fn, inst, plan, m)
    ref, _ = step_grads(case)
    case.model.zero_grad(set_to_none=True)
    torch.manual_seed(7)
    rep = execute_plan(case.model, case.inputs, case.loss_fn, inst, plan, m, force=True)
    assert rep.forced and not rep.matches_plan()
    assert all(torch.equal(a, p.grad) for a, p in zip(ref, case.model.parameters(),
                                                       strict=True))


def test_host_pool_first_fit_and_reuse():
    pool = HostPool(4 * 512)
    a, off_a, _ = pool.take(100)
    b, off_b, _ = pool.take(600)        # two 512-byte units
    assert (off_a, off_b) == (0, 512) and a.numel() == 100 and b.numel() == 600
    with pytest.raises(PlanRuntimeError, match="host pool"):
        pool.take(1024)                  # 512 B left
    pool.give(off_a, 100)
    c, off_c, _ = pool.take(512)
    assert off_c == 0                    # first fit reuses the freed slice
    pool.give(off_b, 600)
    pool.give(off_c, 512)
    d, off_d, _ = pool.take(4 * 512)     # freed neighbours merge back into one block
    assert off_d == 0 and d.data_ptr() == pool.buffer.data_ptr()


@pytest.mark.slow
def test_runtime_policy_is_the_evaluators_only():
    case = make_case("encoder")
    inst = profile_step(case.model, case.inputs, warmup=0, repeat=1)
    with pytest.raises(PlanRuntimeError, match="barrier_free"):
        execute_plan(case.model, case.inputs, None, inst,
                     Plan.keep_all(inst).with_policy("on_demand"))


# ----------------------------------------------------------------------------- models
def test_vision_model_profile_solve_execute():
    """torchvision's ResNet structure (BatchNorm, in-place ReLU, strided downsample):
    profile -> solve at 0.5 P and 0.3 P -> execute; BatchNorm is never rebuilt (it writes
    running statistics), gradients are the unplanned step's bit for bit."""
    torch.manual_seed(0)
    case = Case(TinyResNet(8), (torch.randn(2, 3, 16, 16),), None, False)
    inst = profile_step(case.model, case.inputs, warmup=0, repeat=1)
    assert any(op.never_recompute for op in inst.ops)
    ref, _ = step_grads(case)
    for budget in (0.5, 0.3):
        res = solve(inst, "slackswap", budget)
        if not res.evaluation.feasible:
            with pytest.raises(PlanRuntimeError, match="infeasible"):
                execute_plan(case.model, case.inputs, None, inst, res.plan, budget)
            continue
        check_step(case, inst, res.plan, ref, budget)


def test_keyword_inputs_hugging_face_convention():
    """A model called as Hugging Face models are (input_ids=, attention_mask=, labels=; the
    output's loss is the loss) runs from a dict and from a batch callable, no wrapper."""
    torch.manual_seed(0)
    model = HFStyleLM()
    batch = hf_batch()
    inst = profile_step(model, batch, warmup=0, repeat=1)
    assert inst.meta["input_kwargs"]["input_ids"] == [[2, 16], "int64"]
    case = Case(model, batch, None, False)
    ref, _ = step_grads(case)
    res = solve(inst, "slackswap", 0.5)
    check_step(case, inst, res.plan, ref, 0.5)
    case = Case(model, lambda: batch, None, False)
    check_step(case, inst, res.plan, ref, 0.5)


@pytest.mark.slow
def test_compiled_modules_are_refused():
    model = encoder(layers=1)
    compiled = torch.compile(model)
    x = torch.randn(2, 8, 32)
    with pytest.raises(ProfileError, match="torch.compile"):
        profile_step(compiled, x, warmup=0, repeat=1)
    inst = profile_step(model, x, warmup=0, repeat=1)
    with pytest.raises(ProfileError, match="torch.compile"):
        execute_plan(compiled, x, None, inst, Plan.keep_all(inst))


def test_factory_token_ids_and_paths_from_any_directory(tmp_path, monkeypatch):
    """Token ids are drawn from the model's vocabulary (nn.Embedding: 64), and the stored
    factory loads from another working directory."""
    monkeypatch.chdir(MODELS.parent)
    inst = profile_factory("torch_models:encoder_factory", ["2x8x32"], warmup=0, repeat=1)
    assert inst.meta["factory"] == f"{MODELS}:encoder_factory"
    model, inputs, _ = build_from_factory("torch_models:TinyGPT", ["4x16"],
                                          input_dtypes=["int64"])
    assert int(inputs[0].max()) > 1 and int(inputs[0].max()) < 64
    monkeypatch.chdir(tmp_path)
    model, inputs, _ = build_from_factory(inst.meta["factory"], ["2x8x32"])
    assert isinstance(model, nn.TransformerEncoder)
    with pytest.raises(ProfileError, match="input-high"):
        build_from_factory(inst.meta["factory"], ["2x8"], input_dtypes=["int64"])


# ----------------------------------------------------------------------------- timing
def test_sdpa_flops_grouped_query_attention():
    """Fused attention is counted from q, k, v whatever PyTorch's formula does with them:
    the same count as PyTorch's for equal heads (forward: two batched products, backward:
    five), and for grouped-query attention (Llama-3-8B: 32 query heads, 8 key/value heads,
    head 128) the count of 32 full heads. PyTorch 2.11's formula refused those shapes,
    which priced the H200's cuDNN attention of Llama-3-8B at 0.026 ms instead of 0.45."""
    from torch.utils import flop_counter as fc

    from slackopt.torch import op_flops, sdpa_flops

    q, kv = (1, 32, 4096, 128), (1, 8, 4096, 128)
    fwd = 2 * 32 * 4096 * 4096 * (128 + 128)  # QK^T and PV, multiply-add as 2
    bwd = 2 * 32 * 4096 * 4096 * (3 * 128 + 2 * 128)  # scores again, dV, dP, dQ, dK
    assert (sdpa_flops(q, kv, kv), sdpa_flops(q, kv, kv, backward=True)) == (fwd, bwd)
    assert bwd / fwd == 2.5
    mha = (2, 4, 16, 8), (2, 4, 24, 8), (2, 4, 24, 12)
    assert sdpa_flops(*mha) == fc.sdpa_flop_count(*mha)
    go = (2, 4, 16, 12)
    assert sdpa_flops(*mha, backward=True) == fc.sdpa_backward_flop_count(go, *mha)
    for bad in [((1, 32, 16, 8), (1, 6, 16, 8), (1, 6, 16, 8)),  # 32 % 6 != 0
                ((1, 4, 16, 8), (1, 4, 16, 4), (1, 4, 16, 8)),  # k's head size is not q's
                ((4, 16, 8), (4, 16, 8), (4, 16, 8))]:  # 3-D
        with pytest.raises(ValueError):
            sdpa_flops(*bad)
    # Every fused kernel, forward (q, k, v first) and backward (grad_out first), GPU ones
    # included: the op's name decides, so fake and real CUDA ops are counted alike.
    t = {s: torch.empty(s, device="meta") for s in (q, kv)}
    aten = torch.ops.aten
    for op in (aten._scaled_dot_product_flash_attention, aten._scaled_dot_product_cudnn_attention,
               aten._scaled_dot_product_efficient_attention,
               aten._scaled_dot_product_flash_attention_for_cpu):
        assert op_flops(op.default, (t[q], t[kv], t[kv]), {}, None) == fwd
        back = getattr(aten, op._qualified_op_name.split("::")[1] + "_backward")
        assert op_flops(back.default, (t[q], t[q], t[kv], t[kv]), {}, None) == bwd
    assert op_flops(aten._scaled_dot_product_flash_attention.default,
                  (t[q], t[kv][:, :, :7], t[kv]), {}, None) == 0.0  # k, v disagree: unknown


def test_gpu_file_of_peaks_and_dtype_roofline(tmp_path):
    """--gpu takes a JSON file; roofline uses the peak of the model's dtype: FP32 GEMMs on
    the A100 are timed at 19.5 TFLOP/s, not the BF16 312."""
    from slackopt.hardware import gpu as gpu_preset
    from slackopt.hardware import gpu_from_file, roofline_s

    a100 = gpu_preset("a100")
    mm_flops = 2 * 512**3
    assert roofline_s(a100, mm_flops, dtype="float32") == pytest.approx(
        LAUNCH_S + mm_flops / (0.75 * 19.5e12))
    assert roofline_s(a100, mm_flops, dtype="bfloat16") == roofline_s(a100, mm_flops)
    f = tmp_path / "l4.json"
    f.write_text(json.dumps({"peak_flops": 121e12, "hbm_bytes_per_s": 300e9,
                             "peak_flops_by_dtype": {"float32": 30e12}}))
    g = gpu_from_file(str(f))
    assert (g.name, g.peak_for("float32"), g.peak_for("bfloat16"), g.default_link) == (
        "l4", 30e12, 121e12, "pcie4")
    torch.manual_seed(0)
    model, idx = TinyGPT(layers=1, dropout=0.0), torch.randint(0, 64, (2, 16))
    inst = profile_step(model, idx, lm_loss, timing="roofline", gpu=str(f), warmup=0,
                        repeat=1)
    assert inst.meta["gpu"] == "l4" and inst.link.name == "pcie4"
    mm = next(op for op in inst.scheduled_ops if op.kind == "gemm")
    assert mm.duration_s >= roofline_s(g, mm.flops, dtype="float32") > roofline_s(g, mm.flops)
    for bad, words in [({"peak_flops": 1}, "hbm_bytes_per_s"),
                       ({"peak_flops": -1, "hbm_bytes_per_s": 1}, "> 0"),
                       ({"peak_flops": 1, "hbm_bytes_per_s": 1, "speed": 2}, "unknown"),
                       ({"peak_flops": 1, "hbm_bytes_per_s": 1, "default_link": "x"},
                        "default_link")]:
        f.write_text(json.dumps(bad))
        with pytest.raises(ValueError, match=words):
            gpu_from_file(str(f))
        with pytest.raises(ProfileError, match="l4.json"):
            profile_step(model, idx, lm_loss, timing="roofline", gpu=str(f), repeat=1)


def test_measured_cpu_timing_with_a_gpu_is_refused_or_warned():
    torch.manual_seed(0)
    model, idx = TinyGPT(layers=1, dropout=0.0), torch.randint(0, 64, (2, 16))
    with pytest.raises(ProfileError, match="roofline"):
        profile_step(model, idx, lm_loss, gpu="h100", warmup=0, repeat=1)
    with pytest.warns(UserWarning, match="measured on the CPU"):
        inst = profile_step(model, idx, lm_loss, warmup=0, repeat=3)
    assert "measured on the CPU" in inst.meta["timing_note"]
    spread = inst.meta["spread"]
    assert spread["repeats"] == 3 and len(spread["forward_s"]) == 3
    assert spread["op_relative_range_median"] >= 0
    assert inst.forward_time_s == pytest.approx(sum(
        op.duration_s for op in inst.scheduled_ops if op.phase == "fwd"))


# ----------------------------------------------------------------------------- CLI
def run_cli(capsys, *args):
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_profile_solve_execute(capsys, tmp_path):
    inst_path = tmp_path / "gpt.json"
    plan_path = tmp_path / "plan.json"
    rc, out, err = run_cli(capsys, "profile", f"{MODELS}:gpt_factory", "-i", "2x16",
                           "-p", "layers=2", "-o", inst_path, "--repeat", "1", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["path"] == str(inst_path) and doc["model_class"].endswith("TinyGPT")
    assert doc["input_shapes"] == [[2, 16]] and doc["saved_tensors"] > 0
    rc, out, err = run_cli(capsys, "solve", inst_path, "--solver", "slackswap", "--budget",
                           "0.5", "-o", plan_path, "--json")
    assert rc == 0, err
    inst = io.load_instance(inst_path)
    plan = io.load_plan(plan_path, inst)
    assert inst.meta["factory"].endswith(":gpt_factory")
    # The same model and inputs as the command made them.
    model, inputs, loss_fn = build_from_factory(inst.meta["factory"], ["2x16"],
                                                params=inst.meta["factory_params"],
                                                seed=inst.meta["seed"])
    assert loss_fn.__name__ == "lm_loss"
    case = Case(model, inputs, loss_fn, False)
    ref, _ = step_grads(case)
    check_step(case, inst, plan, ref, 0.5)


@pytest.mark.slow
def test_cli_profile_errors(capsys, tmp_path):
    out_path = tmp_path / "x.json"
    cases = [
        (["no_such_module:f", "-i", "2"], "cannot import module"),
        ([f"{MODELS}:nothing", "-i", "2"], "no attribute"),
        ([f"{MODELS}:encoder_factory", "-i", "2x8x31"], "failed on inputs"),
        ([f"{MODELS}:encoder_factory"], "input shapes"),
        ([f"{MODELS}:encoder_factory", "-i", "2x8x32", "--input-dtype", "complex7"],
         "dtype"),
        ([f"{MODELS}:encoder_factory", "-i", "2x8x32", "--timing", "roofline"],
         "--timing roofline needs --gpu (a preset: titanx,"),
        ([f"{MODELS}:encoder_factory", "-i", "2x8x32", "--gpu", "h100"], "roofline"),
        ([f"{MODELS}:encoder_factory", "-i", "2x8x32", "--timing", "roofline", "--gpu",
          str(tmp_path / "nope.json")], "nope.json"),
        ([f"{MODELS}:encoder_factory", "-i", "2x8", "--input-dtype", "int64"],
         "input-high"),
    ]
    for args, words in cases:
        rc, out, err = run_cli(capsys, "profile", *args, "-o", out_path, "--repeat", "1")
        assert rc == 2, (args, out, err)
        assert out == "" and "Traceback" not in err and words in err, (args, err)
    out_path.write_text("{}")
    rc, out, err = run_cli(capsys, "profile", f"{MODELS}:encoder_factory", "-i", "2x8x32",
                           "-o", out_path)
    assert rc == 2 and "exists" in err


@pytest.mark.slow
def test_core_imports_without_torch(tmp_path):
    """`import slackopt` and the command line work where torch is missing; the profiler
    says how to install it."""
    code = textwrap.dedent(f"""
        import sys
        sys.modules["torch"] = None  # any `import torch` now raises ImportError
        import slackopt, slackopt.io, slackopt.cli, slackopt.solver
        from slackopt import solve
        from slackopt.workloads import make
        inst = make("tiny")
        assert solve(inst, "slackswap", 0.5).plan is not None
        assert "torch" not in [m for m in sys.modules if sys.modules[m] is not None]
        try:
            import slackopt.torch
        except slackopt.SlackoptError as e:
            assert "slackopt[torch]" in str(e), e
        else:
            raise AssertionError("slackopt.torch imported without torch")
        rc = slackopt.cli.main(["profile", "m:f", "-i", "2", "-o", {str(tmp_path / "x.json")!r}])
        assert rc == 2, rc
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr
    assert "slackopt[torch]" in r.stderr


@pytest.mark.slow
def test_hugging_face_gpt2_and_llama_from_configs():
    """The README's Hugging Face path: GPT-2 and Llama built from tiny configs (random
    weights, no download), called with a batch dict (input_ids, attention_mask, labels),
    the loss taken from the output: profile -> solve at 0.5 P -> execute; token ids from
    the vocabulary; gradients equal the unplanned step (bit for bit: dropout is off)."""
    transformers = pytest.importorskip("transformers")  # CI installs it ([dev] extra)
    cfgs = [transformers.GPT2Config(vocab_size=97, n_positions=32, n_embd=32, n_layer=2,
                                    n_head=4, resid_pdrop=0.0, embd_pdrop=0.0,
                                    attn_pdrop=0.0),
            transformers.LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64,
                                     num_hidden_layers=2, num_attention_heads=4,
                                     num_key_value_heads=2, max_position_embeddings=32)]
    for cfg in cfgs:
        torch.manual_seed(0)
        model = transformers.AutoModelForCausalLM.from_config(cfg).train()
        ids = torch.randint(0, cfg.vocab_size, (2, 16))
        mask = torch.ones_like(ids)
        mask[1, -4:] = 0
        batch = {"input_ids": ids, "attention_mask": mask, "labels": ids}
        inst = profile_step(model, batch, warmup=0, repeat=1)
        assert inst.n_saved > 0 and inst.meta["input_kwargs"]["labels"] == [[2, 16], "int64"]
        case = Case(model, batch, None, False)
        ref, _ = step_grads(case)
        res = solve(inst, "slackswap", 0.5)
        assert res.evaluation.feasible, res.evaluation.failure
        check_step(case, inst, res.plan, ref, 0.5)
