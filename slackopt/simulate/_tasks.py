"""Task lists and per-instance data shared by every runtime of the evaluator (private).

:class:`_Static` holds the plan-independent data of an instance as Python lists (fast in
the event loops; the compiled kernel, slackopt.simulate._kernel, reads the same lists);
:func:`build_tasks` orders the compute stream's tasks of a plan; :class:`TaskList` derives
what every runtime needs from that order: per-task durations, allocations, frees and
saved-tensor reads, the backward tasks that need each saved tensor and where it is
released. Semantics: docs/model.md ("Instance", "Plan semantics").
"""

from __future__ import annotations

import weakref

import numpy as np

from slackopt.instance import Instance
from slackopt.plan import RECOMP
from slackopt.simulate.evaluation import Evaluation

# Per-tensor residency states, shared by the Python runtimes and the compiled kernel.
ABSENT, FWD, HOST, FETCH, DEV, EVICT = 0, 1, 2, 3, 4, 5
"""ABSENT: not on the device (not produced yet, recomputed away, or released); FWD: on
the device, forward readers pending; HOST: only the host copy exists; FETCH: H2D in
flight; DEV: on the device for the backward pass; EVICT: on the device, chosen as an
eviction victim whose D2H is in flight (on_demand runtime)."""


class _Static:
    """Plan-independent per-instance data as Python lists (fast in the event loop)."""

    def __init__(self, inst: Instance) -> None:
        n = inst.n_ops
        self.n, self.n_fwd = n, inst.n_fwd
        ops = inst.scheduled_ops
        self.names = [op.name for op in ops]
        self.kinds = [op.kind for op in ops]
        self.layers = [op.layer for op in ops]
        self.dur = inst.durations_s.tolist()
        self.op_alloc = (inst.static_alloc + inst.workspace).tolist()
        self.op_free = (inst.static_free + inst.workspace).tolist()
        reads: list[list[int]] = [[] for _ in range(n)]
        outs: list[list[int]] = [[] for _ in range(n)]
        for k in range(inst.n_saved):
            outs[int(inst.saved_prod_idx[k])].append(k)
            for i in inst.saved_reader_idx[k].tolist():
                reads[i].append(k)
        self.reads, self.outs = reads, outs
        # Saved tensors whose final forward value exists once op i ends (their producer,
        # or their last in-place mutation): a swap's D2H is queued then.
        ready: list[list[int]] = [[] for _ in range(n)]
        for k in range(inst.n_saved):
            ready[int(inst.saved_ready_idx[k])].append(k)
        self.ready = ready
        self.s = inst.s.tolist()
        self.c = inst.c.tolist()
        self.rebuild_extra = (inst.recipe_transient + inst.recipe_workspace).tolist()
        self.recipe_inputs = inst.recipe_inputs
        self.prod = inst.saved_prod_idx.tolist()
        self.fwd_release = inst.saved_last_fwd_idx.tolist()
        # Pipeline stages (docs/model.md, "A pipeline stage"): which ops are forward ops,
        # each op's earliest start (its unit's), and the saved tensors whose forward unit
        # ends with op i: no H2D of them starts before that (the end of the forward pass
        # in a single pass).
        self.is_fwd = (~inst.is_bwd).tolist()
        self.op_earliest = inst.op_earliest_s.tolist()
        unit_end: list[list[int]] = [[] for _ in range(n)]
        for k, i in enumerate(inst.saved_fwd_end_idx.tolist()):
            unit_end[i].append(k)
        self.unit_end = unit_end
        self.saved_names = inst.saved_names
        self.host_limit = -1 if inst.host_memory_bytes is None else inst.host_memory_bytes


def host_failure(name: str, size: int, host_used: int, limit: int, now: float) -> str:
    """The failure text of a D2H refused by the host pinned-memory limit (both engines)."""
    return (f"the D2H copy of '{name}' ({size} B) at t = {now * 1e3:.6g} ms would exceed "
            f"the host pinned-memory limit: {host_used} B of host_memory_bytes = {limit} B "
            f"in use, {host_used + size - limit} B over")


def h2d_need(name: str, size: int) -> str:
    """The allocation a task waits on when its input's H2D cannot start (both engines)."""
    return f"the H2D copy of '{name}' ({size} B) needed by"


def alloc_failure(task: str, what: str, now: float, used: int, M: int, short: int) -> str:
    """The failure text of an allocation that does not fit M (both engines); `what` is
    ``"<bytes> B for"`` or :func:`h2d_need`."""
    return (f"task '{task}' cannot allocate {what} it at t = {now * 1e3:.6g} ms: {used} B "
            f"of M = {M} B in use, {short} B short")


def evaluation(inst: Instance, M: int, now: float, failure: str | None, *, stall_fwd: float,
               stall_bwd: float, recompute: float, d2h_bytes: int, h2d_bytes: int,
               evictions: int, peak: int, h2d_stall: dict[str, float],
               trace: list | None = None) -> Evaluation:
    """The :class:`Evaluation` of a finished (or failed, `failure` set) run, both engines:
    T = `now` (s), throughput T*/T (1 when T = 0, 0 when infeasible)."""
    ideal = inst.ideal_time_s
    feasible = failure is None
    return Evaluation(
        feasible=feasible, step_time_s=float(now), ideal_time_s=ideal,
        throughput=(ideal / now if now > 0 else 1.0) if feasible else 0.0,
        stall_fwd_s=float(stall_fwd), stall_bwd_s=float(stall_bwd),
        recompute_s=float(recompute), d2h_bytes=int(d2h_bytes), h2d_bytes=int(h2d_bytes),
        evictions=int(evictions), peak_bytes=int(peak), budget_bytes=M, failure=failure,
        h2d_stall_s=h2d_stall, trace=trace)


_STATIC: weakref.WeakKeyDictionary[Instance, _Static] = weakref.WeakKeyDictionary()


def _static(inst: Instance) -> _Static:
    st = _STATIC.get(inst)
    if st is None:
        st = _STATIC[inst] = _Static(inst)
    return st


def build_tasks(inst: Instance, decisions: np.ndarray) -> tuple[list[int], list[int]]:
    """The compute-stream task list of a plan.

    The scheduled ops in order (forward then backward, or the units of a pipeline
    stage), each backward op preceded by the rebuilds of its recomp inputs that are not
    resident yet, recipe inputs first (depth first, in saved order).

    Args:
        inst: the instance.
        decisions: int array (n_saved,) of KEEP/SWAP/RECOMP.

    Returns:
        (task_op, task_tensor): per task the scheduled op index (or -1 for a rebuild) and
        the saved position rebuilt (or -1 for an op).
    """
    st = _static(inst)
    dec = decisions.tolist() if isinstance(decisions, np.ndarray) else list(decisions)
    task_op: list[int] = []
    task_t: list[int] = []
    rebuilt = [False] * len(dec)
    rin = st.recipe_inputs
    is_fwd = st.is_fwd
    for i in range(st.n):
        if is_fwd[i]:
            task_op.append(i)
            task_t.append(-1)
            continue
        for t0 in st.reads[i]:
            if dec[t0] != RECOMP or rebuilt[t0]:
                continue
            # Iterative post-order DFS over recipe inputs that are recomp and not rebuilt.
            stack = [(t0, 0)]
            while stack:
                t, j = stack.pop()
                ins = rin[t]
                while j < len(ins) and (dec[ins[j]] != RECOMP or rebuilt[ins[j]]):
                    j += 1
                if j < len(ins):
                    stack.append((t, j + 1))
                    stack.append((ins[j], 0))
                elif not rebuilt[t]:
                    rebuilt[t] = True
                    task_op.append(-1)
                    task_t.append(t)
        task_op.append(i)
        task_t.append(-1)
    return task_op, task_t


class TaskList:
    """The compute stream of one plan, as plain lists.

    Attributes:
        task_op, task_t: see :func:`build_tasks`.
        dur: task durations (s); a rebuild lasts c_t.
        alloc: bytes a task allocates when it starts (an op: its non-saved outputs and
            workspace, plus its saved outputs in the forward pass; a rebuild: the rebuilt
            tensor plus its recipe's transient bytes and workspace).
        free: non-saved bytes a task frees when it ends.
        reads: saved positions a task reads (a rebuild: its recipe inputs).
        cum_alloc: prefix sums of ``alloc`` (``cum_alloc[k]`` = sum of alloc[:k]).
        need: per saved tensor, the backward tasks that read it, in order.
        release: per task, the saved tensors whose last backward reader it is.
        fwd_rel: per op, the saved tensors whose last forward reader it is (or their
            producer, for tensors without one); empty for backward ops.
        is_fwd: per task, whether it is a forward op (rebuilds are backward tasks).
        earliest: per task, its earliest start (s): that of the unit of its op, or of the
            op a rebuild is inserted before (0 in a single pass).
    """

    def __init__(self, inst: Instance, decisions: np.ndarray) -> None:
        st = _static(inst)
        task_op, task_t = build_tasks(inst, decisions)
        self.task_op, self.task_t = task_op, task_t
        n_tasks = len(task_op)
        s = st.s
        dur, alloc, free, reads = [], [], [], []
        for op, t in zip(task_op, task_t, strict=True):
            if op >= 0:
                dur.append(st.dur[op])
                a = st.op_alloc[op]
                if st.is_fwd[op]:
                    for k in st.outs[op]:
                        a += s[k]
                alloc.append(a)
                free.append(st.op_free[op])
                reads.append(st.reads[op])
            else:
                dur.append(st.c[t])
                alloc.append(s[t] + st.rebuild_extra[t])
                free.append(st.rebuild_extra[t])
                reads.append(list(st.recipe_inputs[t]))
        self.dur, self.alloc, self.free, self.reads = dur, alloc, free, reads
        cum = [0]
        for a in alloc:
            cum.append(cum[-1] + a)
        self.cum_alloc = cum
        n_saved = len(s)
        need: list[list[int]] = [[] for _ in range(n_saved)]
        self.is_fwd = task_fwd = [op >= 0 and st.is_fwd[op] for op in task_op]
        for k in range(n_tasks):
            if not task_fwd[k]:
                for t in reads[k]:
                    need[t].append(k)
        release: list[list[int]] = [[] for _ in range(n_tasks)]
        for t in range(n_saved):
            if need[t]:
                release[need[t][-1]].append(t)
        self.need, self.release = need, release
        fwd_rel: list[list[int]] = [[] for _ in range(st.n)]
        for t in range(n_saved):
            fwd_rel[st.fwd_release[t]].append(t)
        self.fwd_rel = fwd_rel
        earliest = [0.0] * n_tasks
        nxt = 0.0
        for k in range(n_tasks - 1, -1, -1):
            if task_op[k] >= 0:
                nxt = st.op_earliest[task_op[k]]
            earliest[k] = nxt
        self.earliest = earliest

    def task_name(self, inst: Instance, k: int) -> str:
        """Op name of task k, or ``rebuild:<tensor>`` for a rebuild."""
        op = self.task_op[k]
        if op >= 0:
            return inst.ops[op].name
        return f"rebuild:{inst.saved_names[self.task_t[k]]}"

    def next_op(self, k: int) -> int:
        """The scheduled op of task k, or of the op a rebuild task is inserted before."""
        ops = self.task_op
        while ops[k] < 0:
            k += 1
        return ops[k]
