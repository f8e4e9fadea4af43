"""One planned training step, run and measured: :func:`execute_plan` runs a module's step
(or a pipeline stage's schedule of microbatches) under a plan with
:class:`~slackopt.torch.runtime.PlanRuntime`; :func:`measure_plan` puts the measured steps
beside the simulated one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from slackopt.instance import Instance
from slackopt.plan import DECISION_NAMES, Plan
from slackopt.torch.copies import HostPool, host_pool_bytes
from slackopt.torch.errors import PlanRuntimeError
from slackopt.torch.report import RuntimeReport
from slackopt.torch.runtime import PlanRuntime
from slackopt.torch.schedule import check_executable, runtime_schedule
from slackopt.torch.step import as_model_inputs, refuse_compiled, run_loss


def execute_plan(
    model: Any,
    example_inputs: Any,
    loss_fn: Callable[..., Any] | None,
    instance: Instance,
    plan: Plan,
    budget: float | int | str | None = None,
    *,
    force: bool = False,
    host_pool: HostPool | None = None,
) -> RuntimeReport:
    """Run one forward and backward pass of `model` under `plan` at budget M, with the
    evaluator's barrier-free policy (:class:`PlanRuntime`); for a pipeline stage, its
    schedule of m microbatches.

    Gradients accumulate into ``.grad`` as in an ordinary step (zero them first if you
    compare). The step must be the profiled one: same model, the same ``loss_fn`` (default
    :func:`slackopt.torch.step.default_loss`), inputs of the same shapes and dtypes on the same
    device, the same train/eval mode.

    **A pipeline stage** (:func:`slackopt.stage.build_stage` of a profile; gpipe, 1f1b or
    interleaved-1f1b) runs ``instance.units`` in order on one device: each F unit runs the
    forward pass and loss of its microbatch j through the model of its chunk and keeps the
    loss (and with it the autograd graph); its B unit runs that loss's ``backward()``.
    Gradients accumulate over the microbatches as in pipeline training: with the same
    inputs, ``.grad`` ends as after m unplanned steps, one per microbatch. Units run back
    to back (idle time is not waited for; docs/pytorch.md, "Running a pipeline stage").

    Args:
        model: the ``torch.nn.Module`` that was profiled. For a stage of v > 1 chunks, a
            sequence of v modules, chunk c's model at position c, each one the profiled
            module's architecture (the profile is one chunk's pass).
        example_inputs: one tensor, a sequence of positional arguments, a dict of keyword
            arguments, or a callable returning one of those
            (:func:`slackopt.torch.step.as_model_inputs`). For a stage of m microbatches,
            a list or tuple of m such inputs, microbatch j's at position j (every chunk
            of microbatch j runs on them).
        loss_fn: ``loss_fn(output, *example_inputs) -> scalar tensor`` or None.
        instance: the profiled instance, or a stage built from it.
        plan: the plan to execute (policy barrier_free).
        budget: M as a fraction of P, bytes or a size string (``slackopt.budget_bytes``);
            default P. Use the budget the plan was solved for: the schedule (admissions,
            evictions) depends on it.
        force: run a plan that is infeasible at M (see :class:`PlanRuntime`).
        host_pool: a :class:`HostPool` reused across steps (made once if None).

    Returns:
        The :class:`RuntimeReport` (for a stage: ``loss`` is the sum of the microbatches'
        losses, the timelines have one entry per task of the whole schedule).

    Raises:
        PlanError: the plan does not fit the instance.
        PlanRuntimeError: the step differs from the profiled one; the plan is infeasible at
            M and not forced; a stage with W units (zb-h1, interleaved-zb: refused, see
            :func:`slackopt.torch.runtime.check_executable`); for a stage, not one input
            per microbatch or not one model per chunk.
        ProfileError: the loss is not a scalar that needs grad.
        BudgetError: a bad budget.
    """
    from slackopt.instance import budget_bytes

    m = budget_bytes(instance, instance.P if budget is None else budget)
    check_executable(instance)
    models = _chunk_models(model, instance)
    for mdl in models:
        refuse_compiled(mdl)
    batches = _microbatch_inputs(example_inputs, instance)
    rt = PlanRuntime(instance, plan, m, force=force, host_pool=host_pool)
    params = [p for mdl in models for p in mdl.parameters()]
    cuda = any(isinstance(x, torch.Tensor) and x.is_cuda
               for x in [*params, *tree_flatten(batches)[0]])
    if cuda:
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        base_reserved = torch.cuda.memory_reserved()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    losses: dict[tuple[int, int], Any] = {}  # forward units waiting for their backward
    total = 0.0
    for u in instance.units:
        key = (u.microbatch, u.chunk)
        if u.kind == "F":
            args, kwargs = batches[u.microbatch]
            with rt.forward(models[u.chunk]):
                losses[key] = run_loss(models[u.chunk], args, loss_fn, kwargs)
        else:
            loss = losses.pop(key)
            with rt.backward(params):
                loss.backward()
            total += float(loss.detach())
            del loss
    if cuda:
        torch.cuda.synchronize()
    rep = rt.report()
    rep.step_time_s = time.perf_counter() - t0
    if cuda:
        rep.peak_bytes = int(torch.cuda.max_memory_allocated() - base)
        rep.reserved_peak_bytes = int(torch.cuda.max_memory_reserved() - base_reserved)
    rep.loss = total
    return rep


def _chunk_models(model: Any, instance: Instance) -> list[Any]:
    """The model of each chunk: ``[model]`` for one chunk; a stage of v > 1 chunks takes a
    sequence of v modules.

    Raises:
        PlanRuntimeError: not one module per chunk.
    """
    v = 1 + max((u.chunk for u in instance.units), default=0)
    if v == 1 and not isinstance(model, (list, tuple)):
        return [model]
    if isinstance(model, (list, tuple)) and len(model) == v:
        return list(model)
    got = f"{len(model)} modules" if isinstance(model, (list, tuple)) else "one module"
    raise PlanRuntimeError(
        f"stage '{instance.name}' runs {v} model chunks and execute_plan got {got}: pass "
        f"a list of {v} modules, chunk c's at position c (each one the profiled "
        "chunk's architecture)" if v > 1 else
        f"instance '{instance.name}' runs one model: pass the module, not a list")


def _microbatch_inputs(example_inputs: Any, instance: Instance
                       ) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """The call arguments of each microbatch (:func:`as_model_inputs`): one for a single
    pass; for a pipeline stage, one per microbatch from a list or tuple of m inputs.

    Raises:
        PlanRuntimeError: a stage given anything but a list or tuple of m inputs.
        ProfileError: an input :func:`as_model_inputs` refuses.
    """
    if instance.scheduled_units is None:
        return [as_model_inputs(example_inputs)]
    m = 1 + max((u.microbatch for u in instance.units), default=0)
    if not isinstance(example_inputs, (list, tuple)) or len(example_inputs) != m:
        got = (f"a {type(example_inputs).__name__} of {len(example_inputs)}"
               if isinstance(example_inputs, (list, tuple))
               else f"a {type(example_inputs).__name__}")
        raise PlanRuntimeError(
            f"stage '{instance.name}' runs {m} microbatches and execute_plan got {got}: "
            f"pass a list of {m} inputs, microbatch j's at position j (each one what a "
            "single step takes: a tensor, a tuple of arguments, a dict)")
    return [as_model_inputs(x) for x in example_inputs]


def measure_plan(
    model: Any,
    example_inputs: Any,
    loss_fn: Callable[..., Any] | None,
    instance: Instance,
    plan: Plan,
    budget: float | int | str | None = None,
    *,
    steps: int = 3,
    warmup: int = 1,
) -> dict[str, Any]:
    """The measured step next to the simulated one, for one plan.

    Runs `warmup` planned steps (they create ``.grad``, so later backward passes accumulate
    in place and the measured peak holds activations and temporaries, as the instance
    does), then `steps` measured ones, all with one :class:`HostPool`; gradients
    accumulate across all of them.

    Args:
        model: the ``torch.nn.Module`` that was profiled (a stage of v > 1 chunks: v
            modules, as for :func:`execute_plan`).
        example_inputs: its inputs (as for :func:`execute_plan`; a stage: one per
            microbatch).
        loss_fn: ``loss_fn(output, *example_inputs) -> scalar tensor`` or None.
        instance: the profiled instance, or a pipeline stage built from it (a step is
            then one run of its schedule).
        plan: the plan to execute (policy barrier_free).
        budget: M as a fraction of P, bytes or a size string; default P.
        steps: measured steps (>= 1); the step time is their median, the peak their maximum.
        warmup: unmeasured steps first (>= 0).

    Returns:
        ``{"measured": {step_time_s, peak_bytes and reserved_peak_bytes (None on CPU),
        accounted_peak_bytes, held_past_drop (blocks, of the last step), d2h_bytes,
        h2d_bytes, evictions, rebuilt, matches_plan, timeline_max_diff_bytes,
        still_resident, device},
        "simulated": {step_time_s, ideal_time_s, peak_bytes, feasible, d2h_bytes,
        h2d_bytes, evictions, budget_bytes}, "decisions": counts}``.

    Raises:
        as :func:`execute_plan`.
    """
    import statistics

    from slackopt.instance import budget_bytes

    if not (isinstance(steps, int) and steps >= 1 and isinstance(warmup, int) and warmup >= 0):
        raise PlanRuntimeError("steps must be an integer >= 1 and warmup an integer >= 0")
    m = budget_bytes(instance, instance.P if budget is None else budget)
    pool = HostPool(host_pool_bytes(instance, plan),
                    pin=_on_cuda(_chunk_models(model, instance)))
    reps = [execute_plan(model, example_inputs, loss_fn, instance, plan, m, host_pool=pool)
            for _ in range(warmup + steps)][warmup:]
    ev = runtime_schedule(instance, plan, m).evaluation
    peaks = [r.peak_bytes for r in reps if r.peak_bytes is not None]
    reserved = [r.reserved_peak_bytes for r in reps if r.reserved_peak_bytes is not None]
    last = reps[-1]
    return {
        "measured": {"step_time_s": float(statistics.median(r.step_time_s for r in reps)),
                     "peak_bytes": max(peaks) if peaks else None,
                     "reserved_peak_bytes": max(reserved) if reserved else None,
                     "accounted_peak_bytes": max(r.accounted_peak_bytes for r in reps),
                     "held_past_drop": last.held_past_drop,
                     "d2h_bytes": last.d2h_bytes, "h2d_bytes": last.h2d_bytes,
                     "evictions": last.evictions, "rebuilt": last.rebuilt,
                     "matches_plan": all(r.matches_plan() for r in reps),
                     "timeline_max_diff_bytes": last.timeline_max_diff_bytes(),
                     "still_resident": last.still_resident, "device": last.device},
        "simulated": {"step_time_s": ev.step_time_s, "ideal_time_s": ev.ideal_time_s,
                      "peak_bytes": ev.peak_bytes, "feasible": ev.feasible,
                      "d2h_bytes": ev.d2h_bytes, "h2d_bytes": ev.h2d_bytes,
                      "evictions": ev.evictions, "budget_bytes": m},
        "decisions": plan.counts(),
    }


def _on_cuda(models: list[Any]) -> bool:
    """The models' parameters are on a CUDA device."""
    return any(p.is_cuda for mdl in models for p in mdl.parameters())


def decisions_by_name(instance: Instance, plan: Plan) -> dict[str, str]:
    """{saved tensor name: "keep" | "swap" | "recomp"} (for messages and tests)."""
    return {n: DECISION_NAMES[int(d)] for n, d in zip(instance.saved_names, plan.decisions,
                                                         strict=True)}


__all__ = ["decisions_by_name", "execute_plan", "measure_plan"]
