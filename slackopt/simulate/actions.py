"""The barrier-free runtime's actions, by position in the compute stream's task list.

A simulation answers how long a plan's step takes; a runtime that executes the plan on a
real step needs what the simulated runtime did, and where. :func:`barrier_free_actions`
runs the evaluator's barrier-free event loop (the reference engine, unchanged: docs/model.md,
"Plan semantics under the barrier-free runtime") and logs every action it takes, tagged
with the number of compute tasks started before it, so a runtime that performs, before
task j, every action tagged <= j takes the evaluator's decisions at the same places.
The host pinned-memory limit is the evaluator's too.

Action kinds (``Action.kind``):

- ``d2h``: an offload starts (FIFO, at production); ``d2h_end``: it has ended.
- ``to_host``: a swapped tensor's device copy is freed (its D2H and its forward readers
  are done).
- ``drop``: a queued offload is dropped (no reader of the tensor is left).
- ``h2d``: a prefetch is admitted, its device buffer allocated; ``h2d_end``: it has
  arrived.
- ``claim``: a backward reader uses a lagging device copy (its D2H not yet ended) instead
  of an H2D.
- ``evict``: a prefetched copy is freed to make room; its H2D is queued again.
- ``fwd_free``: a recomputed tensor's last forward reader has ended (its storage is
  freed).
- ``release``: its last backward reader has ended (every device copy of it is freed).

This module imports the engine's internals (it is part of the evaluator); the public
names are :func:`barrier_free_actions`, :class:`ActionSchedule`, :class:`Action` and
:data:`ACTION_KINDS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slackopt.instance import Instance
from slackopt.plan import RECOMP, Plan
from slackopt.simulate._engine import _DEV, _FETCH, _FWD, Engine
from slackopt.simulate.evaluation import Evaluation

ACTION_KINDS = ("d2h", "d2h_end", "to_host", "drop", "h2d", "h2d_end", "claim", "evict",
                "fwd_free", "release")
"""Every :attr:`Action.kind`, in no particular order (the module docstring says what each
one is)."""


@dataclass(frozen=True, slots=True)
class Action:
    """One action of the simulated barrier-free runtime.

    Attributes:
        tag: compute tasks started before it: it comes after task ``tag - 1`` started and
            before task ``tag`` starts.
        kind: one of :data:`ACTION_KINDS`.
        saved: the saved tensor's position (in ``ActionSchedule.saved_names``).
        time_s: the simulated time it happens (s).
        used_bytes: for ``h2d``, the device bytes in use once the prefetch buffer is
            allocated (the evaluator's memory count against M); 0 for the other kinds,
            which allocate nothing.
    """

    tag: int
    kind: str
    saved: int
    time_s: float
    used_bytes: int = 0


@dataclass
class ActionSchedule:
    """What the barrier-free runtime does for one plan at budget M.

    Attributes:
        budget_bytes: M (bytes).
        evaluation: the evaluator's :class:`~slackopt.simulate.Evaluation` of that run.
        task_op, task_t: the compute-stream task list (:func:`slackopt.simulate.build_tasks`:
            op index, or -1 and the saved position a rebuild task rebuilds).
        actions: every :class:`Action`, in simulated-time order (ties in the order the
            event loop took them).
        saved_timeline: per task, the saved-tensor bytes on the device once it has started
            (saved, prefetched and rebuilt storages; transient buffers excluded).
        task_start_s: per task, its simulated start time (s).
        task_used_bytes: per task, the device bytes in use once it has started (its
            allocation included: the evaluator's memory count against M).
        saved_names: the names of the saved positions.

    The evaluation's ``peak_bytes`` is the largest of ``task_used_bytes`` and of the
    ``h2d`` actions' ``used_bytes``: memory grows only when a task starts or a prefetch is
    admitted.
    """

    budget_bytes: int
    evaluation: Evaluation
    task_op: list[int]
    task_t: list[int]
    actions: list[Action]
    saved_timeline: list[int]
    task_start_s: list[float]
    task_used_bytes: list[int]
    saved_names: list[str]


class _ActionRecorder(Engine):
    """The evaluator's barrier-free event loop, unchanged, with its hooks logging each
    action and the tasks' starts."""

    def __init__(self, inst: Instance, plan: Plan, M: int) -> None:
        self.actions: list[Action] = []
        self.saved_timeline: list[int] = []
        self.task_start_s: list[float] = []
        self.task_used_bytes: list[int] = []
        self.started = 0
        self._fetching: set[int] = set()
        self._d2h_cur: list[Any] | None = None
        super().__init__(inst, plan, M, False)

    def _log(self, kind: str, t: int, used: int = 0) -> None:
        self.actions.append(Action(self.started, kind, t, self.now, used))

    # The loop starts a D2H by assigning ``self.d2h``; a property sees it.
    @property  # type: ignore[override]
    def d2h(self) -> list[Any] | None:
        return self._d2h_cur

    @d2h.setter
    def d2h(self, v: list[Any] | None) -> None:
        if v is not None:
            self._log("d2h", int(v[0]))
        self._d2h_cur = v

    def on_task_start(self, k: int) -> None:
        self.started = k + 1
        st, s = self.state, self.st.s
        self.saved_timeline.append(sum(s[t] for t in range(len(st))
                                       if st[t] in (_FWD, _DEV, _FETCH)))
        self.task_start_s.append(self.now)
        self.task_used_bytes.append(self.used)

    def on_d2h_done(self, t: int) -> None:
        self._log("d2h_end", t)
        super().on_d2h_done(t)

    def _start_h2d(self, t: int) -> None:
        self._log("h2d", t, self.used)
        self._fetching.add(t)
        super()._start_h2d(t)

    def on_arrived(self, t: int) -> None:
        if t in self._fetching:
            self._fetching.discard(t)
            self._log("h2d_end", t)
        else:  # a lagging D2H: the reader uses the device copy, no H2D
            self._log("claim", t)

    def to_host(self, t: int) -> None:
        self._log("to_host", t)
        super().to_host(t)

    def on_d2h_dropped(self, t: int) -> None:
        self._log("drop", t)

    def trace_evict(self, t: int) -> None:
        self._log("evict", t)

    def _end_task(self) -> None:
        k = self.k
        op = self.task_op[k]
        if self.task_fwd[k]:  # a forward op (in a pipeline stage, of any forward unit)
            for t in self.fwd_rel[op]:
                if self.dec[t] == RECOMP:
                    self._log("fwd_free", t)
        for t in self.release[k]:
            self._log("release", t)
        super()._end_task()


def barrier_free_actions(instance: Instance, plan: Plan, budget_bytes: int) -> ActionSchedule:
    """Run the evaluator's barrier-free loop on `plan` at M = `budget_bytes` and log its
    actions (see :class:`ActionSchedule` and the module docstring).

    The evaluator's decisions are taken as they are: D2H at production in FIFO order, H2D
    by first need with the admission rule against M, no head-of-line blocking, dropped
    D2Hs, lagging copies claimed together, evictions, the host-memory limit. The run is
    the reference engine's, so ``evaluation`` equals
    ``simulate(instance, plan.with_policy("barrier_free"), budget_bytes)``. Views
    (``Tensor.storage``) are lowered as :func:`slackopt.simulate.simulate` lowers them:
    saved positions are storages.

    Args:
        instance: the instance.
        plan: its decisions (the plan's policy is not read: the barrier-free runtime's
            actions are logged).
        budget_bytes: M (bytes, 0 <= M <= 2**62).

    Returns:
        The :class:`ActionSchedule`.

    Raises:
        PlanError: the plan does not fit the instance.
        ValueError: M outside [0, 2**62].
    """
    plan.check(instance)
    M = int(budget_bytes)
    if not 0 <= M <= 2**62:
        raise ValueError(f"budget {budget_bytes} B is outside [0, 2**62]")
    inst, p = instance, plan
    if instance.saved_unit is not None:
        inst, p = instance.lowered, plan.lowered(instance)
    rec = _ActionRecorder(inst, p, M)
    ev = rec.run()
    return ActionSchedule(M, ev, list(rec.task_op), list(rec.task_t), rec.actions,
                          rec.saved_timeline, rec.task_start_s, rec.task_used_bytes,
                          list(inst.saved_names))


__all__ = ["ACTION_KINDS", "Action", "ActionSchedule", "barrier_free_actions"]
