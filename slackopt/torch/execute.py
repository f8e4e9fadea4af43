"""One planned training step, run and measured: :func:`execute_plan` runs a module's step
under a plan with :class:`~slackopt.torch.runtime.PlanRuntime`; :func:`measure_plan` puts
the measured steps beside the simulated one.
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
from slackopt.torch.runtime import PlanRuntime, runtime_schedule
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
    evaluator's barrier-free policy (:class:`PlanRuntime`).

    Gradients accumulate into ``.grad`` as in an ordinary step (zero them first if you
    compare). The step must be the profiled one: same model, the same ``loss_fn`` (default
    :func:`slackopt.torch.step.default_loss`), inputs of the same shapes and dtypes on the same
    device, the same train/eval mode.

    Args:
        model: the ``torch.nn.Module`` that was profiled.
        example_inputs: one tensor, a sequence of positional arguments, a dict of keyword
            arguments, or a callable returning one of those
            (:func:`slackopt.torch.step.as_model_inputs`).
        loss_fn: ``loss_fn(output, *example_inputs) -> scalar tensor`` or None.
        instance: the profiled instance.
        plan: the plan to execute (policy barrier_free).
        budget: M as a fraction of P, bytes or a size string (``slackopt.budget_bytes``);
            default P. Use the budget the plan was solved for: the schedule (admissions,
            evictions) depends on it.
        force: run a plan that is infeasible at M (see :class:`PlanRuntime`).
        host_pool: a :class:`HostPool` reused across steps (made once if None).

    Returns:
        The :class:`RuntimeReport`.

    Raises:
        PlanError: the plan does not fit the instance.
        PlanRuntimeError: the step differs from the profiled one; the plan is infeasible at
            M and not forced.
        ProfileError: the loss is not a scalar that needs grad.
        BudgetError: a bad budget.
    """
    from slackopt.instance import budget_bytes

    m = budget_bytes(instance, instance.P if budget is None else budget)
    refuse_compiled(model)
    rt = PlanRuntime(instance, plan, m, force=force, host_pool=host_pool)
    args, kwargs = as_model_inputs(example_inputs)
    cuda = any(isinstance(x, torch.Tensor) and x.is_cuda
               for x in [*model.parameters(), *tree_flatten((args, kwargs))[0]])
    if cuda:
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        base_reserved = torch.cuda.memory_reserved()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    with rt.forward(model):
        loss = run_loss(model, args, loss_fn, kwargs)
    with rt.backward(model.parameters()):
        loss.backward()
    if cuda:
        torch.cuda.synchronize()
    rep = rt.report()
    rep.step_time_s = time.perf_counter() - t0
    if cuda:
        rep.peak_bytes = int(torch.cuda.max_memory_allocated() - base)
        rep.reserved_peak_bytes = int(torch.cuda.max_memory_reserved() - base_reserved)
    rep.loss = float(loss.detach())
    return rep


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
        model: the ``torch.nn.Module`` that was profiled.
        example_inputs: its inputs (as for :func:`execute_plan`).
        loss_fn: ``loss_fn(output, *example_inputs) -> scalar tensor`` or None.
        instance: the profiled instance.
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
    pool = HostPool(host_pool_bytes(instance, plan), pin=_on_cuda(model))
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


def _on_cuda(model: Any) -> bool:
    """The model's parameters are on a CUDA device."""
    return any(p.is_cuda for p in model.parameters())


def decisions_by_name(instance: Instance, plan: Plan) -> dict[str, str]:
    """{saved tensor name: "keep" | "swap" | "recomp"} (for messages and tests)."""
    return {n: DECISION_NAMES[int(d)] for n, d in zip(instance.saved_names, plan.decisions,
                                                         strict=True)}


__all__ = ["decisions_by_name", "execute_plan", "measure_plan"]
