"""What a bound model's point needs from one simulated run: the reader of an evaluator
trace shared by :func:`~slackopt.solvers.milp.bounds.checkpoint.checkpoint_point` and
:func:`~slackopt.solvers.milp.bounds.timing.timing_point` (the plan-by-plan soundness
check: every plan the barrier-free runtime runs maps to a point of each bound
model whose objective is at most the plan's step time).

The trace (``slackopt.simulate(inst, plan, M, trace=True)``, slackopt/simulate) lists, in
the order the event loop made them, a ``compute`` event per task (op or rebuild) at its
start with its start and end, a ``d2h`` and an ``h2d`` event per copy at its end with its
start and end, and an ``evict`` event per freed device copy. The task order is
:func:`slackopt.simulate.build_tasks`. Residency of a swapped tensor is rebuilt from the
runtime's rules (../shared/spec/semantics.md, "swap"; slackopt/simulate/_engine.py):

- its device copy exists from its producer's start; it is freed (``to_host``) once its
  D2H has ended and its last forward reader has ended, unless a backward task that reads
  it was considered first (a lagging D2H: the task claims the device copy, which then
  stays until an eviction or its release);
- an H2D allocates its buffer when it starts; the copy stays until an eviction or the end
  of its last reader;
- at one instant the loop first completes copies and ends the running task (freeing), then
  starts the next task, then copies. So an event at the very instant a task starts is
  taken as before that start for frees (D2H ends, evictions) and after it for H2D starts.
  Where the loop did otherwise (an event of a later zero-length round at the same
  instant) the reading says *absent* where the copy was there: every row of both models
  still holds with that reading (a swap counted absent at an instant only needs its D2H
  ended and, in the backward pass, an H2D starting no earlier than that instant, both
  true at equal times), so the point stays feasible.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from slackopt.instance import Instance
from slackopt.plan import SWAP, Plan
from slackopt.simulate import Evaluation, build_tasks
from slackopt.solvers.milp.linear.lin import _Lin


@dataclass
class RunView:
    """One simulated barrier-free run, read from its trace (times in seconds).

    Attributes:
        inst: the (storage-level) instance the run was simulated on.
        dec: the decisions (int8 per saved position).
        task_op, task_t: the task list (:func:`slackopt.simulate.build_tasks`).
        start, end: per task, its real start and end.
        op_task: per scheduled op, its task index.
        rebuild_task: {saved position: index of its rebuild task}.
        d2h: {saved position: (start, end)} of its D2H (at most one).
        h2d_starts: {saved position: start times of its H2D copies}.
        evict: {saved position: times its device copy was evicted}.
        first_need: per saved position, the first backward task that reads it (a
            rebuild or an op), or -1.
        stall_fwd, stall_bwd, recompute, step: the evaluation's split of T (s).
    """

    inst: Instance
    dec: np.ndarray
    task_op: list[int]
    task_t: list[int]
    start: list[float]
    end: list[float]
    op_task: list[int]
    rebuild_task: dict[int, int]
    d2h: dict[int, tuple[float, float]]
    h2d_starts: dict[int, list[float]]
    evict: dict[int, list[float]]
    first_need: list[int]
    stall_fwd: float
    stall_bwd: float
    recompute: float
    step: float

    def real_start(self, op: int) -> float:
        """Real start (s) of scheduled op `op`."""
        return self.start[self.op_task[op]]

    def freed_in_forward(self, t: int) -> float | None:
        """The instant (s) the forward device copy of swap `t` was freed because its D2H
        and its forward readers had ended, or None when a backward task claimed it
        first (or its D2H never ended)."""
        if self.dec[t] != SWAP or t not in self.d2h:
            return None
        d_end = self.d2h[t][1]
        c = self.first_need[t]
        if c < 0 or d_end > self.end[c - 1]:
            return None    # the first backward reader was considered before the D2H ended
        lastf = int(self.inst.saved_last_fwd_idx[t])
        return max(d_end, self.end[self.op_task[lastf]])

    def occupied(self, t: int, k: int) -> bool:
        """True if swap `t` holds device memory (its device copy or an H2D buffer) at the
        instant task `k` starts (when its allocations are made); see the module
        docstring for equal times. Only for tasks at or after t's producer and before
        its release (the end of its last reader)."""
        tau = self.start[k]
        lastf = int(self.inst.saved_last_fwd_idx[t])
        events: list[tuple[float, int, str]] = []
        f = self.freed_in_forward(t)
        if f is not None and k > self.op_task[lastf]:
            events.append((f, 0, "off"))
        events += [(e, 0, "off") for e in self.evict.get(t, [])]
        events += [(h, 1, "on") for h in self.h2d_starts.get(t, [])]
        present = True
        for when, order, what in sorted(events):
            if when < tau or (when == tau and order == 0):
                present = what == "on"
        return present

    def rebuilt_before(self, t: int, op: int) -> bool:
        """True if recomp tensor `t` was rebuilt before op `op` started."""
        k = self.rebuild_task.get(t)
        return k is not None and k < self.op_task[op]


def copy_events(inst: Instance, evaluation: Evaluation
                ) -> tuple[dict[int, tuple[float, float]], dict[int, list[tuple[float, float]]],
                           dict[int, list[float]]]:
    """The copies and evictions of a traced run, by saved position: ``d2h[t]`` = (start,
    end) of t's D2H (s), ``h2d[t]`` = (start, end) of each H2D of t in trace order,
    ``evict[t]`` = the instants t's device copy was evicted. Shared by the points of the
    time-indexed model (model_point.py) and of the bound models (:func:`read_run`)."""
    pos = {nm: i for i, nm in enumerate(inst.saved_names)}
    d2h: dict[int, tuple[float, float]] = {}
    h2d: dict[int, list[tuple[float, float]]] = {}
    evict: dict[int, list[float]] = {}
    for e in evaluation.trace or ():
        lane = e["lane"]
        if lane == "d2h":
            d2h[pos[e["name"]]] = (float(e["start_s"]), float(e["end_s"]))
        elif lane == "h2d":
            h2d.setdefault(pos[e["name"]], []).append((float(e["start_s"]), float(e["end_s"])))
        elif lane == "evict":
            evict.setdefault(pos[e["name"]], []).append(float(e["start_s"]))
    return d2h, h2d, evict


def read_run(inst: Instance, plan: Plan, evaluation: Evaluation) -> RunView:
    """Read the run of `plan` on `inst` from `evaluation` (its trace).

    Args:
        inst: the instance the run was simulated on, without views (pass
            ``inst.lowered`` and ``plan.lowered(inst)`` for an instance with views: the
            evaluator runs those).
        plan: the plan (barrier-free runtime).
        evaluation: ``slackopt.simulate(inst, plan, M, trace=True)``, feasible.

    Returns:
        The :class:`RunView`.

    Raises:
        ValueError: the evaluation is infeasible or has no trace, the plan is not run by
            the barrier-free runtime, the instance has views, or the trace does not match
            the plan's task list.
    """
    if inst.aliased:
        raise ValueError("read the run on inst.lowered (the evaluator simulates it)")
    if plan.policy != "barrier_free":
        raise ValueError(f"the bound models cover barrier-free plans, not '{plan.policy}'")
    if not evaluation.feasible or evaluation.trace is None:
        raise ValueError("a feasible evaluation with a trace is needed")
    dec = np.asarray(plan.decisions, dtype=np.int8)
    task_op, task_t = build_tasks(inst, dec)
    comp = [e for e in evaluation.trace if e["lane"] == "compute"]
    if len(comp) != len(task_op):
        raise ValueError(f"the trace has {len(comp)} compute events, the plan "
                         f"{len(task_op)} tasks")
    start = [float(e["start_s"]) for e in comp]
    end = [float(e["end_s"]) for e in comp]
    op_task, rebuild_task = _task_index(inst, task_op, task_t)
    d2h, h2d_spans, evict = copy_events(inst, evaluation)
    h2d = {t: [a for a, _b in spans] for t, spans in h2d_spans.items()}
    return RunView(inst=inst, dec=dec, task_op=task_op, task_t=task_t, start=start, end=end,
                   op_task=op_task, rebuild_task=rebuild_task, d2h=d2h, h2d_starts=h2d,
                   evict=evict, first_need=_first_need(inst, task_op, task_t),
                   stall_fwd=float(evaluation.stall_fwd_s),
                   stall_bwd=float(evaluation.stall_bwd_s),
                   recompute=float(evaluation.recompute_s),
                   step=float(evaluation.step_time_s))


def _task_index(inst: Instance, task_op: list[int], task_t: list[int]
                ) -> tuple[list[int], dict[int, int]]:
    """(per scheduled op its task, {saved position: its rebuild task}) of a task list."""
    op_task = [-1] * inst.n_ops
    rebuild_task: dict[int, int] = {}
    for k, (op, t) in enumerate(zip(task_op, task_t, strict=True)):
        if op >= 0:
            op_task[op] = k
        else:
            rebuild_task[t] = k
    return op_task, rebuild_task


def _first_need(inst: Instance, task_op: list[int], task_t: list[int]) -> list[int]:
    """Per saved position, the first backward task (a rebuild or a backward op) that
    reads it, or -1."""
    first_need = [-1] * inst.n_saved
    reads: list[list[int]] = [[] for _ in range(inst.n_ops)]
    for t in range(inst.n_saved):
        for i in inst.saved_reader_idx[t].tolist():
            reads[i].append(t)
    is_bwd = inst.is_bwd
    for k, (op, t) in enumerate(zip(task_op, task_t, strict=True)):
        if op >= 0 and not is_bwd[op]:
            continue
        for u in (reads[op] if op >= 0 else inst.recipe_inputs[t]):
            if first_need[u] < 0:
                first_need[u] = k
    return first_need


def group_run(run: RunView, sub: Instance, ops: np.ndarray, saved: np.ndarray) -> RunView:
    """The part of a pipeline stage's run `run` that one contiguous microbatch group
    makes, as a run of its single-pass instance `sub`
    (:func:`slackopt.solvers.milp.bounds.groups.microbatch_groups`: `ops`, the stage
    indices of its scheduled ops; `saved`, the stage's saved position of each of
    `sub`'s): its tasks, copies and evictions, timed from the group's origin (the later
    of the end of the task before its first and its first unit's earliest start); its
    forward stall the stalls of its F tasks, its backward stall the rest of its extra
    time (its B and W tasks' stalls and the idle between its units). The soundness test
    of the microbatch bound (tests/test_bound_point.py) checks that it is a point of
    every bound model of `sub`.

    Raises:
        ValueError: the group's tasks in `run` are not `sub`'s task list (not a
            contiguous group of `run.inst`).
    """
    inst = run.inst
    op_of = {int(o): i for i, o in enumerate(ops.tolist())}
    pos_of = {int(t): i for i, t in enumerate(saved.tolist())}
    ks = [k for k, (op, t) in enumerate(zip(run.task_op, run.task_t, strict=True))
          if (op >= 0 and op in op_of) or (op < 0 and t in pos_of)]
    dec = np.asarray(run.dec, dtype=np.int8)[saved]
    task_op, task_t = build_tasks(sub, dec)
    got = [(op_of[run.task_op[k]], -1) if run.task_op[k] >= 0 else (-1, pos_of[run.task_t[k]])
           for k in ks]
    if got != list(zip(task_op, task_t, strict=True)) or ks != list(range(ks[0], ks[-1] + 1)):
        raise ValueError("the group's tasks are not its single pass's task list")
    k0 = ks[0]
    origin = max(run.end[k0 - 1] if k0 > 0 else 0.0, float(inst.op_earliest_s[int(ops[0])]))
    start = [run.start[k] - origin for k in ks]
    end = [run.end[k] - origin for k in ks]
    op_task, rebuild_task = _task_index(sub, task_op, task_t)
    nf = sub.n_fwd
    recompute = math.fsum(end[k] - start[k] for k, op in enumerate(task_op) if op < 0)
    stall_fwd = end[op_task[nf - 1]] - float(sub.forward_time_s) if nf else 0.0
    step = end[-1]
    return RunView(
        inst=sub, dec=dec, task_op=task_op, task_t=task_t, start=start, end=end,
        op_task=op_task, rebuild_task=rebuild_task,
        d2h={pos_of[t]: (a - origin, b - origin) for t, (a, b) in run.d2h.items()
             if t in pos_of},
        h2d_starts={pos_of[t]: [a - origin for a in v] for t, v in run.h2d_starts.items()
                    if t in pos_of},
        evict={pos_of[t]: [a - origin for a in v] for t, v in run.evict.items()
               if t in pos_of},
        first_need=_first_need(sub, task_op, task_t), stall_fwd=stall_fwd,
        stall_bwd=step - float(sub.ideal_time_s) - stall_fwd - recompute,
        recompute=recompute, step=step)


def decided(dec: np.ndarray, t: int, code: int) -> float:
    """1.0 if saved position `t` has decision `code` (SWAP, RECOMP) in `dec`, else 0.0."""
    return 1.0 if int(dec[t]) == code else 0.0


def complete_point(lin: _Lin, values: dict[str, float]) -> list[float]:
    """A point of `lin`: the named variables from `values`; every other variable from the
    equality row that defines it (the running sums of the models: a row ``lo == hi``
    with one variable not yet set, in row order, as the models build them).

    Raises:
        ValueError: a variable that is neither named in `values` nor defined by a row.
    """
    x: list[float | None] = [None] * lin.n_vars
    for j, nm in enumerate(lin.names):
        if nm in values:
            x[j] = float(values[nm])
    for idx, cf, lo, hi in lin.rows:
        if lo != hi:
            continue
        unknown = [(j, c) for j, c in zip(idx, cf, strict=True) if x[j] is None]
        if len(unknown) != 1:
            continue
        j, c = unknown[0]
        rest = math.fsum(c2 * x[j2] for j2, c2 in zip(idx, cf, strict=True) if j2 != j)
        x[j] = (lo - rest) / c
    missing = [lin.names[j] or f"x{j}" for j, v in enumerate(x) if v is None]
    if missing:
        raise ValueError(f"no value for {missing[:5]}")
    return [float(v) for v in x]


__all__ = ["RunView", "read_run", "group_run", "complete_point", "decided"]
