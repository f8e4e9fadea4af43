"""What the PyTorch runtime executes: the instances it can run and the action schedule it
replays.

:func:`check_executable` refuses an instance :class:`~slackopt.torch.runtime.PlanRuntime`
cannot run (not profiled from PyTorch, or a pipeline stage with split backward halves);
:func:`runtime_schedule` runs the evaluator's barrier-free event loop on the instance at
budget M (:func:`slackopt.simulate.barrier_free_actions`) and returns every action it
takes, by position in the compute stream's task list, for the runtime to replay.

Sources: docs/model.md, "Plan semantics under the barrier-free runtime".
"""

from __future__ import annotations

from typing import Any

from slackopt.instance import Instance
from slackopt.plan import Plan
from slackopt.simulate import ActionSchedule, barrier_free_actions
from slackopt.torch.build import GENERATOR
from slackopt.torch.errors import PlanRuntimeError


def runtime_schedule(instance: Instance, plan: Plan, budget_bytes: int) -> ActionSchedule:
    """What the barrier-free runtime does for `plan` at M = `budget_bytes`, as the
    evaluator's event loop decides it (:func:`slackopt.simulate.barrier_free_actions`).

    Only the policy ``barrier_free`` is executable.

    Raises:
        PlanError: the plan does not fit the instance.
        PlanRuntimeError: the plan names another runtime policy.
    """
    plan.check(instance)
    if plan.policy != "barrier_free":
        raise PlanRuntimeError(
            f"the PyTorch runtime executes barrier_free plans; this plan names "
            f"'{plan.policy}' (use plan.with_policy('barrier_free'))")
    return barrier_free_actions(instance, plan, int(budget_bytes))


def check_executable(instance: Instance) -> None:
    """Refuse an instance the PyTorch runtime cannot run.

    It runs an instance made by :func:`slackopt.torch.profile.profile_step`, and a
    pipeline stage that :func:`slackopt.stage.build_stage` built from one whose units are
    forward (F) and whole backward (B) passes: gpipe, 1f1b, interleaved-1f1b.

    Raises:
        PlanRuntimeError: the instance (or the stage's base) was not profiled from
            PyTorch; the stage splits its backward into B and W units (zb-h1,
            interleaved-zb): a microbatch's backward runs as one ``loss.backward()``, which
            runs each autograd node's formula whole, so the instance's B ops cannot run
            apart from its W ops (see :class:`PlanRuntime`).
    """
    stage = instance.scheduled_units is not None
    meta: Any = instance.meta
    if stage and isinstance(meta.get("base"), dict):
        meta = meta["base"].get("meta")
    gen = meta.get("generator") if isinstance(meta, dict) else None
    if gen != GENERATOR:
        what, fix = ("instance", "make it with slackopt.torch.profile_step")
        if stage:
            what, fix = ("the base of stage", fix + " and build the stage from it "
                         "(slackopt.stage.build_stage)")
        raise PlanRuntimeError(f"{what} '{instance.name}' was not profiled from PyTorch "
                               f"(meta generator is {gen!r}); {fix}")
    if any(u.kind == "W" for u in instance.units):
        sch = instance.meta.get("schedule")
        name = sch.get("name") if isinstance(sch, dict) else None
        raise PlanRuntimeError(
            f"stage '{instance.name}' splits each backward into B and W units (schedule "
            f"{name!r}); the PyTorch runtime runs a microbatch's backward as one "
            "loss.backward(), which computes each autograd node's input and weight "
            "gradients together, so it cannot run the B ops apart from the W ops. Execute "
            "a gpipe, 1f1b or interleaved-1f1b stage")


__all__ = ["check_executable", "runtime_schedule"]
