"""A pipeline stage's schedule run on the real module (slackopt.torch: execute_plan of an
instance built by slackopt.stage.build_stage).

The single-microbatch profile of a GPT-style model (tests/torch_models.py: dropout on, so
recomputed dropout masks come back from saved RNG state) is built into stages of p = 2
with m = 4 microbatches: 1F1B stage 0 (F0 F1 B0 F2 B1 F3 B2 B3, two microbatches in
flight), 1F1B stage 1 (one in flight) and GPipe stage 0 (four). Each runs under keep-all,
all-swap and all-recompute plans and SlackSwap's plan at 0.5 P, on a 100 MB/s link (the
evaluator's offloads lag behind the compute stream, readers claim device copies, offloads
are dropped, prefetched copies are evicted). The checks, on CPU:

- the runtime's saved bytes after every task equal the evaluator's, tolerance 0, task by
  task (the units run back to back; idle time is not waited for, and the actions the
  evaluator took while it idled are performed before the next unit's first task);
- the same D2H and H2D bytes, evictions and rebuilds, and no block held past the
  evaluator's free of it (the accounted peak is the simulated peak);
- the parameters' gradients equal, bit for bit, the sum of the gradients of m unplanned
  steps, one per microbatch, in the order of the schedule's forward units (which fixes
  the order of the dropout masks' draws).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # import guard only: CI installs torch

from slackopt import KEEP, RECOMP, SWAP, Plan, io, solve  # noqa: E402
from slackopt.hardware import Link  # noqa: E402
from slackopt.instance import budget_bytes  # noqa: E402
from slackopt.simulate import TaskList, simulate  # noqa: E402
from slackopt.stage import build_stage  # noqa: E402
from slackopt.torch import (  # noqa: E402
    PlanRuntime,
    PlanRuntimeError,
    execute_plan,
    measure_plan,
    profile_step,
    run_loss,
)
from tests.test_torch_profile import (  # noqa: E402
    _one_thread,  # noqa: F401  (the profile tests' autouse fixture: one intra-op thread)
    keep_all_timeline_by_hand,
)
from tests.torch_models import TinyGPT, lm_loss  # noqa: E402

pytestmark = [pytest.mark.torch]

M_MICRO = 4
SEED = 7


def microbatches(m: int) -> list[tuple[object, ...]]:
    """m deterministic microbatches of 2 x 16 token ids (their own generator, seed 1)."""
    g = torch.Generator().manual_seed(1)
    return [(torch.randint(0, 64, (2, 16), generator=g),) for _ in range(m)]


def profile(model, batch):
    """The single-microbatch profile the stages are built from: roofline durations on the
    A100 (deterministic), a 100 MB/s link."""
    return profile_step(model, batch, lm_loss, timing="roofline", gpu="a100",
                        link=Link("test-link", 1e8), warmup=0, repeat=1)


@pytest.fixture(scope="module")
def gpt():
    torch.manual_seed(0)
    model = TinyGPT(layers=2, dropout=0.1)
    batches = microbatches(M_MICRO)
    return model, batches, profile(model, batches[0])


def unplanned_sum(models, batches, inst) -> list[torch.Tensor]:
    """Per parameter of every chunk's model, the sum of the gradients of one unplanned
    step per forward unit of `inst` (microbatch j through chunk c's model, each from zero
    gradients), in the order of the forward units, summed in that order."""
    torch.manual_seed(SEED)
    sums: dict[int, list[torch.Tensor]] = {}
    for u in inst.units:
        if u.kind != "F":
            continue
        mdl = models[u.chunk]
        mdl.zero_grad(set_to_none=True)
        run_loss(mdl, batches[u.microbatch], lm_loss).backward()
        grads = [p.grad.clone() for p in mdl.parameters()]
        sums[u.chunk] = grads if u.chunk not in sums else [
            a + b for a, b in zip(sums[u.chunk], grads, strict=True)]
    for mdl in models:
        mdl.zero_grad(set_to_none=True)
    return [g for c in sorted(sums) for g in sums[c]]


def run_stage(models, batches, inst, plan, budget):
    """execute_plan of the stage from zero gradients; the report and the gradients."""
    for mdl in models:
        mdl.zero_grad(set_to_none=True)
    torch.manual_seed(SEED)
    arg = models[0] if len(models) == 1 else models
    rep = execute_plan(arg, batches, lm_loss, inst, plan, budget)
    return rep, [p.grad.detach().clone() for mdl in models for p in mdl.parameters()]


def check_stage(models, batches, inst, plan, budget, ref):
    """Run `plan` at `budget`: the step is the simulated one, task by task, and the
    gradients are `ref` bit for bit."""
    rep, got = run_stage(models, batches, inst, plan, budget)
    for a, b in zip(ref, got, strict=True):
        assert torch.equal(a, b), (a - b).abs().max()
    m = budget_bytes(inst, budget)
    ev = simulate(inst, plan, m, engine="reference")
    tasks = TaskList(inst, plan.decisions)
    assert rep.matches_plan(), rep.to_dict()
    assert rep.off_schedule == [] and rep.unmanaged == [] and rep.still_resident == []
    assert len(rep.memory_timeline) == len(tasks.task_op)
    assert rep.memory_timeline == rep.simulated_timeline
    assert max(rep.memory_timeline) <= min(m, ev.peak_bytes)
    assert (rep.d2h_bytes, rep.h2d_bytes, rep.evictions) == (ev.d2h_bytes, ev.h2d_bytes,
                                                             ev.evictions)
    assert rep.rebuilt == sum(1 for t in tasks.task_t if t >= 0)
    assert rep.accounted_peak_bytes == ev.peak_bytes, rep.held_past_drop
    assert rep.unplanned_saves == 0
    return rep


# (schedule, stage, microbatches in flight at the keep-all peak)
STAGES = [("1f1b", 0, 2), ("1f1b", 1, 1), ("gpipe", 0, 4)]


@pytest.mark.slow
@pytest.mark.parametrize(("schedule", "stage", "in_flight"), STAGES)
def test_stage_runs_as_simulated_with_the_summed_gradients(gpt, schedule, stage, in_flight):
    """Keep-all at P, all swap at P, all recompute at P and SlackSwap's plan at 0.5 P,
    each run as the evaluator simulated it (saved bytes after every task, copies,
    evictions, rebuilds), with the gradients of m unplanned microbatches. Keep-all holds
    every saved tensor of microbatch j from its producer to its last backward reader,
    counted by hand: at the peak, the activations of p - i microbatches under 1F1B and of
    all m under GPipe."""
    model, batches, base = gpt
    inst = build_stage(base, schedule, stage, 2, M_MICRO)
    ref = unplanned_sum([model], batches, inst)
    rep = check_stage([model], batches, inst, Plan.keep_all(inst), 1.0, ref)
    assert rep.memory_timeline == keep_all_timeline_by_hand(inst)
    assert max(rep.memory_timeline) == in_flight * base.A
    assert rep.extra_backward_ops > 0  # microbatches 1..m-1 accumulate into .grad
    rep = check_stage([model], batches, inst, Plan.uniform(inst, SWAP), 1.0, ref)
    assert rep.claimed > 0 and rep.dropped_d2h > 0 and rep.h2d_bytes > 0
    rep = check_stage([model], batches, inst, Plan.uniform(inst, RECOMP), 1.0, ref)
    assert rep.rebuilt == inst.n_saved  # dropout masks among them
    res = solve(inst, "slackswap", 0.5)
    assert res.evaluation.feasible, res.evaluation.failure
    rep = check_stage([model], batches, inst, res.plan, 0.5, ref)
    assert rep.swapped > 0


def test_plans_differ_per_microbatch(gpt, tmp_path):
    """A plan decides t@j per microbatch: keep in microbatch 0, swap in 1 and 3,
    recompute in 2, at 0.6 P on the 1F1B stage 0 (read back from its instance file); the
    step follows the evaluator."""
    model, batches, base = gpt
    inst = io.load_instance(io.save_instance(build_stage(base, "1f1b", 0, 2, M_MICRO),
                                             tmp_path / "stage.json"))
    assert inst.scheduled_units is not None
    code = {"0": KEEP, "1": SWAP, "2": RECOMP, "3": SWAP}
    dec = np.array([code[n.rsplit("@", 1)[1]] for n in inst.saved_names], dtype=np.int8)
    plan = Plan(dec, inst.saved_names)
    assert simulate(inst, plan, budget_bytes(inst, 0.6)).feasible
    ref = unplanned_sum([model], batches, inst)
    rep = check_stage([model], batches, inst, plan, 0.6, ref)
    per_mb = base.n_saved
    assert rep.kept == per_mb and rep.rebuilt == per_mb and rep.swapped > 0


@pytest.mark.slow
def test_interleaved_stage_runs_one_model_per_chunk():
    """Interleaved 1F1B, p = 2, stage 0, m = 4, v = 2: the profile is one chunk's pass,
    and each chunk is a module of that architecture with weights of its own; every F unit
    runs microbatch j through its chunk's module. Keep-all and SlackSwap's plan at 0.5 P
    run as simulated; each module's gradients are the sum over its microbatches.
    measure_plan runs the schedule as one step (a warm-up step, then a measured one)."""
    torch.manual_seed(0)
    models = [TinyGPT(layers=1, dropout=0.0), TinyGPT(layers=1, dropout=0.0)]
    batches = microbatches(M_MICRO)
    inst = build_stage(profile(models[0], batches[0]), "interleaved-1f1b", 0, 2, M_MICRO, 2)
    assert {u.chunk for u in inst.units} == {0, 1}
    ref = unplanned_sum(models, batches, inst)
    check_stage(models, batches, inst, Plan.keep_all(inst), 1.0, ref)
    res = solve(inst, "slackswap", 0.5)
    assert res.evaluation.feasible, res.evaluation.failure
    check_stage(models, batches, inst, res.plan, 0.5, ref)
    out = measure_plan(models, batches, lm_loss, inst, res.plan, 0.5, steps=1, warmup=1)
    assert out["measured"]["matches_plan"] and out["measured"]["device"] == "cpu"
    assert out["measured"]["d2h_bytes"] == out["simulated"]["d2h_bytes"] > 0


def test_what_a_stage_refuses(gpt):
    """A split backward (zb-h1's W units) is refused before anything runs, naming the
    schedule and the ones that run; a stage needs one input per microbatch and one module
    per chunk; PlanRuntime's units run in the schedule's order."""
    model, batches, base = gpt
    zb = build_stage(base, "zb-h1", 0, 2, M_MICRO)
    with pytest.raises(PlanRuntimeError, match=r"B and W units \(schedule 'zb-h1'\).*"
                                               r"gpipe, 1f1b or interleaved-1f1b"):
        execute_plan(model, batches, lm_loss, zb, Plan.keep_all(zb))
    inst = build_stage(base, "1f1b", 0, 2, M_MICRO)
    with pytest.raises(PlanRuntimeError, match="4 microbatches.*list of 4 inputs"):
        execute_plan(model, batches[0], lm_loss, inst, Plan.keep_all(inst))
    with pytest.raises(PlanRuntimeError, match="4 microbatches.*a list of 3"):
        execute_plan(model, list(batches[:3]), lm_loss, inst, Plan.keep_all(inst))
    inter = build_stage(base, "interleaved-1f1b", 0, 2, M_MICRO, 2)
    with pytest.raises(PlanRuntimeError, match="2 model chunks.*one module"):
        execute_plan(model, batches, lm_loss, inter, Plan.keep_all(inter))
    rt = PlanRuntime(inst, Plan.keep_all(inst), inst.P)
    with rt.forward(model):
        run_loss(model, batches[0], lm_loss)
    with pytest.raises(PlanRuntimeError, match="next unit is F1, and a backward pass"):
        with rt.backward(model.parameters()):
            pass
