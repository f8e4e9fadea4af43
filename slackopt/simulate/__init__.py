"""The evaluator: a discrete-event simulation of one training iteration.

One entry point, :func:`simulate`, scores every plan under the runtime policy the plan
names (``Plan.policy``, with ``Plan.runtime_params``), and returns one result type,
:class:`Evaluation`. Semantics: docs/model.md.

- ``barrier_free`` (SlackSwap's runtime, section 3.4 of the paper; "Plan semantics under
  the barrier-free runtime"): :mod:`slackopt.simulate._engine`, also compiled with numba
  in :mod:`slackopt.simulate._kernel` (equal bit for bit).
- ``layer_barriers`` (vDNN, Rhu et al. 2016): :mod:`slackopt.simulate.layer_barriers`.
- ``on_demand`` (SuperNeurons, Wang et al. 2018; SwapAdvisor, Huang et al. 2020):
  :mod:`slackopt.simulate.on_demand`.

All runtimes share the task list (:func:`build_tasks`: forward ops, then each backward op
preceded by the rebuilds of its recomp inputs), the copy-engine model (each copy pays the
link's ``copy_latency_s``, then moves its bytes at the link's bandwidth, or at
``duplex_factor`` times it while the other direction copies), memory accounting against
M and the step-time accounting T - T* = forward stalls + backward stalls + recompute. The
rules more than one module applies (H2D admission, copy rate and time) live in
:mod:`slackopt.simulate.rules`. :func:`barrier_free_actions` logs the barrier-free
runtime's actions by task position, for a runtime that executes a plan on a real step
(:mod:`slackopt.simulate.actions`).

This package imports :mod:`slackopt.instance`, :mod:`slackopt.plan`,
:mod:`slackopt.errors`, :mod:`slackopt.jit` and numpy (and, for the compiled engine and
:func:`warm_up`, numba and :mod:`slackopt.hardware`); nothing in it imports a solver.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from slackopt import jit
from slackopt.errors import BudgetError, PlanError
from slackopt.instance import Instance
from slackopt.plan import KEEP, RECOMP, SWAP, Plan
from slackopt.simulate._engine import Engine
from slackopt.simulate._tasks import (
    TaskList,
    _Static,
    _static,
    alloc_failure,
    build_tasks,
    evaluation,
    h2d_need,
    host_failure,
)
from slackopt.simulate.actions import Action, ActionSchedule, barrier_free_actions
from slackopt.simulate.evaluation import Evaluation
from slackopt.simulate.layer_barriers import LayerBarriers, runtime_layers
from slackopt.simulate.on_demand import OnDemand

RUNTIMES: dict[str, type[Engine]] = {
    "barrier_free": Engine,
    "layer_barriers": LayerBarriers,
    "on_demand": OnDemand,
}
"""The event loop of each runtime policy (keys: :data:`slackopt.plan.POLICIES`)."""


def simulate(instance: Instance, plan: Plan, budget_bytes: int, *,
             trace: bool = False, engine: str = "auto") -> Evaluation:
    """Simulate one iteration of `plan` on `instance` under memory budget M.

    Args:
        instance: the instance.
        plan: decisions for the instance's saved tensors, and the runtime policy that
            executes them (``plan.policy``, ``plan.runtime_params``).
        budget_bytes: M (bytes, int >= 0).
        trace: also record the event trace (for plots); uses the reference engine.
        engine: "reference" (the Python event loops, the readable statement of the
            semantics), "compiled" (the barrier-free loop compiled with numba in
            slackopt.simulate._kernel; equal bit for bit, faster (docs/speed.md gives the figures);
            barrier_free only), or
            "auto" (compiled for barrier-free plans unless a trace is asked for or this
            process runs its kernels as Python, :mod:`slackopt.jit`).

    Returns:
        The Evaluation. An infeasible plan is an answer (feasible=False, failure set),
        not an exception.

    Raises:
        PlanError: the plan does not fit the instance.
        BudgetError: M is negative.
        ValueError: an unknown engine, or the compiled engine asked for a trace or for a
            policy other than barrier_free.

    Views (``Tensor.storage``): the plan is checked on `instance` (two views of one
    storage with different decisions are a PlanError naming both) and then simulated on
    ``instance.lowered``, where each storage is one saved unit named after its base
    tensor; ``h2d_stall_s`` and trace events name storages by that base name.

    Host memory: with ``instance.host_memory_bytes`` set, a D2H that would raise host
    occupancy (swapped storages from their D2H start to their last backward reader's
    end, or their D2H end if later) above the limit ends the run infeasible; the
    failure names the tensor, the host bytes in use and the limit.

    Source: docs/model.md; SlackSwap paper sections 2.1, 3.4 and 4.1.
    """
    plan.check(instance)
    if instance.saved_unit is not None:
        plan = plan.lowered(instance)
        instance = instance.lowered
    if isinstance(budget_bytes, bool) or not isinstance(budget_bytes, (int, np.integer)):
        raise BudgetError(f"simulate takes the budget in bytes (an int), got {budget_bytes!r}; "
                          "convert fractions and sizes with slackopt.budget_bytes(instance, b)")
    if budget_bytes < 0 or budget_bytes > 2**62:
        raise BudgetError(f"budget {budget_bytes} B is outside [0, 2**62]")
    if engine not in ("auto", "reference", "compiled"):
        raise ValueError(f"engine '{engine}' is not auto, reference or compiled")
    M = int(budget_bytes)
    if engine == "compiled":
        if trace:
            raise ValueError("the compiled engine records no trace; use engine='reference'")
        if plan.policy != "barrier_free":
            raise ValueError(f"the compiled engine implements barrier_free only, not "
                             f"'{plan.policy}'; use engine='reference'")
    if plan.policy != "barrier_free" and not instance.single_pass:
        raise PlanError(f"the {plan.policy} runtime runs one forward and one backward pass; "
                        f"instance '{instance.name}' is a pipeline stage (a schedule of "
                        f"{len(instance.units)} units): plan it for the barrier_free runtime")
    if plan.policy == "barrier_free" and not trace and (
            engine == "compiled" or (engine == "auto" and jit.compiled())):
        return _run_compiled(instance, plan.decisions, M)
    return RUNTIMES[plan.policy](instance, plan, M, trace).run()


_WARM = False


def warm_up() -> None:
    """Compile (or load from numba's on-disk cache) the compiled engine with the
    signatures real calls use: the kernel compile's recipe for the evaluator
    (:mod:`slackopt.compile_kernels`). A no-op past the first call; in a process that runs
    its kernels as Python (:mod:`slackopt.jit`) it runs them once as Python."""
    global _WARM
    if _WARM:
        return
    from slackopt.hardware import Link
    from slackopt.instance import Op, Tensor

    tiny = Instance("warm-up", [Op("f", "fwd", 1.0), Op("b", "bwd", 1.0)],
                    [Tensor("x", 1, "f", ("b",))], Link("warm-up", 1.0))
    for code in (KEEP, SWAP):
        # Through a Plan: its read-only decisions array is the signature real calls use.
        _run_compiled(tiny, Plan.uniform(tiny, code).decisions, 1)
    _WARM = True


def kernel_inputs(inst: Instance):
    """The compiled kernel's :class:`~slackopt.simulate._kernel.KernelInputs` of `inst`
    (built once per instance and cached; the MILP's enumeration runs the kernel on it)."""
    fs = _FAST.get(inst)
    if fs is None:
        from slackopt.simulate import _kernel

        fs = _FAST[inst] = _kernel.kernel_inputs(_static(inst), inst.link)
    return fs


_FAST: weakref.WeakKeyDictionary[Instance, Any] = weakref.WeakKeyDictionary()


def _run_compiled(inst: Instance, decisions: np.ndarray, M: int) -> Evaluation:
    """The compiled barrier-free loop (slackopt.simulate._kernel), wrapped into an
    Evaluation."""
    from slackopt.simulate import _kernel as fast

    fs = kernel_inputs(inst)
    (code, now, stall_fwd, stall_bwd, recompute, d2h_bytes, h2d_bytes, evictions, peak,
     used, fail_task, fail_head, short, h2d_stall, task_op, task_t) = fast.run_barrier_free(
        fs, decisions, M)
    names = inst.saved_names

    def task_name(k: int) -> str:
        op = int(task_op[k])
        return inst.ops[op].name if op >= 0 else f"rebuild:{names[int(task_t[k])]}"

    if code in (fast.INTERNAL_NOT_RESIDENT, fast.INTERNAL_NOT_QUEUED,
                fast.INTERNAL_NO_SHORT):  # pragma: no cover - invariant
        raise RuntimeError(f"internal: evaluator invariant {code} broken at task "
                           f"'{task_name(fail_task)}'")
    failure = None
    if code == fast.FAIL_HOST:  # short = host bytes in use
        failure = host_failure(names[fail_head], int(inst.s[fail_head]), int(short),
                               int(fs.host_limit), now)
    elif code != fast.OK:
        need = int(short) + M - int(used)  # short = used + need - M
        what = h2d_need(names[fail_head], need) if code == fast.FAIL_H2D else f"{need} B for"
        failure = alloc_failure(task_name(fail_task), what, now, int(used), M, int(short))
    return evaluation(
        inst, M, now, failure, stall_fwd=stall_fwd, stall_bwd=stall_bwd, recompute=recompute,
        d2h_bytes=d2h_bytes, h2d_bytes=h2d_bytes, evictions=evictions, peak=peak,
        h2d_stall={names[t]: float(h2d_stall[t]) for t in np.flatnonzero(h2d_stall)})


__all__ = ["Evaluation", "simulate", "warm_up", "build_tasks", "runtime_layers", "RUNTIMES",
           "TaskList", "KEEP", "SWAP", "RECOMP", "_Static", "_static", "kernel_inputs",
           "Action", "ActionSchedule", "barrier_free_actions"]
