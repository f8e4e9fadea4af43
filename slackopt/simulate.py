"""The evaluator: a discrete-event simulation of one training iteration.

Implements ../shared/spec/semantics.md ("Plan semantics under the barrier-free runtime",
the SlackSwap runtime of section 3.4 of the paper) exactly. Three resources run side by
side: one compute stream executing *tasks* (the scheduled ops plus a rebuild task inserted
before the first backward need of every recomp tensor, recipe inputs first), a D2H and an
H2D copy engine. Memory is tracked in bytes against the budget M and never exceeds it.

Rules, in the spec's words where they are short:

- keep: resident from producer start to the end of its last reader (rebuilds included).
- swap: resident from producer start until both its D2H and its last forward reader are
  done. D2H copies are queued at production, FIFO. H2D copies are queued by first need
  (task index) and the head of the queue starts only after the forward pass has ended and
  the tensor's D2H has ended; it is admitted when used + size + the allocations of the next
  three compute tasks not yet started fit in M, or, when the compute stream already waits
  for it, when used + size fits. Its buffer is allocated at the start and freed after the
  last backward reader. If the device copy is still resident when a task needs it (a
  lagging D2H), the task uses it and its H2D is cancelled.
- recomp: resident until its last forward reader ends; rebuilt on the compute stream
  before its first need; the rebuilt tensor is allocated at the rebuild's start, its recipe
  transient bytes and workspace are held during the rebuild.
- A task that cannot allocate waits while a D2H is in flight or queued or an H2D is in
  flight; otherwise the runtime evicts device copies of swapped tensors that have a host
  copy (furthest next use first, only if that makes room) and queues their H2D again; if
  that cannot make room the plan is infeasible and the Evaluation names the task and the
  bytes missing.
- A copy costs ``link.copy_latency_s`` then its bytes at W, or at ``duplex_factor * W``
  while a copy in the other direction is in flight (its latency phase included).
- Zero-byte swapped tensors move nothing: no copy is issued for them.

Accounting: T = end of the last task; T - T* = stall_fwd_s + stall_bwd_s + recompute_s,
where a stall is compute-stream idle time before a task (charged to the phase of the task
that waited) and recompute_s is the summed duration of rebuild tasks.
"""

from __future__ import annotations

import heapq
import weakref
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from slackopt.errors import BudgetError
from slackopt.instance import Instance
from slackopt.plan import KEEP, RECOMP, SWAP, Plan

_INF = float("inf")
# Per-tensor residency states.
_ABSENT, _FWD, _HOST, _FETCH, _DEV = 0, 1, 2, 3, 4


@dataclass
class Evaluation:
    """The evaluator's verdict on one plan.

    Attributes:
        feasible: memory never exceeded the budget and every task ran.
        step_time_s: T, end of the last task including stalls and rebuilds (s); for an
            infeasible plan, the time at which it failed.
        ideal_time_s: T*, the ideal step (s).
        throughput: T* / T (0 if infeasible).
        stall_fwd_s, stall_bwd_s: compute-stream idle time before forward / backward tasks (s).
        recompute_s: total time of rebuild tasks (s). T - T* = stalls + recompute exactly.
        d2h_bytes, h2d_bytes: bytes copied out / in (re-fetches included).
        evictions: device copies freed by the eviction fallback.
        peak_bytes: highest memory in use (bytes), <= budget_bytes when feasible.
        budget_bytes: M.
        failure: why the plan is infeasible (task and bytes short), else None.
        h2d_stall_s: {saved tensor name: compute-stream time spent waiting for its H2D (s)}.
        trace: event list when requested, else None. Each event is a dict with ``lane``
            ("compute", "d2h", "h2d", "stall", "memory"), ``name``, ``start_s``, ``end_s``,
            and ``bytes`` (copies; memory samples give bytes in use from start_s on).
    """

    feasible: bool
    step_time_s: float
    ideal_time_s: float
    throughput: float
    stall_fwd_s: float
    stall_bwd_s: float
    recompute_s: float
    d2h_bytes: int
    h2d_bytes: int
    evictions: int
    peak_bytes: int
    budget_bytes: int
    failure: str | None = None
    h2d_stall_s: dict[str, float] = field(default_factory=dict)
    trace: list[dict[str, Any]] | None = None

    def to_dict(self, with_trace: bool = False) -> dict[str, Any]:
        """JSON-ready dict (trace omitted unless asked)."""
        d = asdict(self)
        if not with_trace:
            d.pop("trace")
        return d


class _Static:
    """Plan-independent per-instance data as Python lists (fast in the event loop)."""

    def __init__(self, inst: Instance) -> None:
        n = inst.n_ops
        self.n, self.n_fwd = n, inst.n_fwd
        self.names = [op.name for op in inst.scheduled_ops]
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
        self.s = inst.s.tolist()
        self.c = inst.c.tolist()
        self.rebuild_extra = (inst.recipe_transient + inst.recipe_workspace).tolist()
        self.recipe_inputs = inst.recipe_inputs
        self.fwd_release = inst.saved_last_fwd_idx.tolist()
        self.saved_names = inst.saved_names


_STATIC: weakref.WeakKeyDictionary[Instance, _Static] = weakref.WeakKeyDictionary()


def _static(inst: Instance) -> _Static:
    st = _STATIC.get(inst)
    if st is None:
        st = _STATIC[inst] = _Static(inst)
    return st


def build_tasks(inst: Instance, decisions: np.ndarray) -> tuple[list[int], list[int]]:
    """The compute-stream task list of a plan.

    Forward ops in order, then each backward op preceded by the rebuilds of its recomp
    inputs that are not resident yet, recipe inputs first (depth first, in saved order).

    Args:
        inst: the instance.
        decisions: int array (n_saved,) of KEEP/SWAP/RECOMP.

    Returns:
        (task_op, task_tensor): per task the scheduled op index (or -1 for a rebuild) and
        the saved position rebuilt (or -1 for an op).
    """
    st = _static(inst)
    dec = decisions.tolist() if isinstance(decisions, np.ndarray) else list(decisions)
    task_op = list(range(st.n_fwd))
    task_t = [-1] * st.n_fwd
    rebuilt = [False] * len(dec)
    rin = st.recipe_inputs
    for i in range(st.n_fwd, st.n):
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


def simulate(instance: Instance, plan: Plan, budget_bytes: int, *,
             trace: bool = False, engine: str = "auto") -> Evaluation:
    """Simulate one iteration of `plan` on `instance` under memory budget M.

    Args:
        instance: the instance.
        plan: decisions for the instance's saved tensors (policy "barrier_free").
        budget_bytes: M (bytes, int >= 0).
        trace: also record the event trace (for plots); uses the reference engine.
        engine: "reference" (the Python event loop below, the readable statement of the
            semantics), "compiled" (the same loop compiled with numba in
            slackopt._fastsim; equal bit for bit, about 40x faster), or "auto" (compiled
            unless a trace is asked for).

    Returns:
        The Evaluation. An infeasible plan is an answer (feasible=False, failure set),
        not an exception.

    Raises:
        PlanError: the plan does not fit the instance.
        BudgetError: M is negative.

    Source: ../shared/spec/semantics.md; SlackSwap paper section 3.4 (runtime) and 4.1.
    """
    plan.check(instance)
    if budget_bytes < 0:
        raise BudgetError(f"budget {budget_bytes} B is negative")
    if engine not in ("auto", "reference", "compiled"):
        raise ValueError(f"engine '{engine}' is not auto, reference or compiled")
    if engine == "reference" or (engine == "auto" and trace):
        return _Run(instance, plan.decisions, int(budget_bytes), trace).run()
    if trace:
        raise ValueError("the compiled engine records no trace; use engine='reference'")
    return _run_compiled(instance, plan.decisions, int(budget_bytes))


def _fast_static(inst: Instance):
    fs = _FAST.get(inst)
    if fs is None:
        from slackopt._fastsim import FastStatic

        fs = _FAST[inst] = FastStatic(_static(inst))
    return fs


_FAST: weakref.WeakKeyDictionary[Instance, Any] = weakref.WeakKeyDictionary()


def _run_compiled(inst: Instance, decisions: np.ndarray, M: int) -> Evaluation:
    """The compiled barrier-free loop (slackopt._fastsim), wrapped into an Evaluation."""
    from slackopt import _fastsim as fast

    fs = _fast_static(inst)
    link = inst.link
    (code, now, stall_fwd, stall_bwd, recompute, d2h_bytes, h2d_bytes, evictions, peak,
     used, fail_task, fail_head, short, h2d_stall, task_op, task_t) = fast.run_barrier_free(
        *fs.args(), decisions, M, float(link.bytes_per_s), float(link.duplex_factor),
        float(link.copy_latency_s))
    names = inst.saved_names

    def task_name(k: int) -> str:
        op = int(task_op[k])
        return inst.ops[op].name if op >= 0 else f"rebuild:{names[int(task_t[k])]}"

    if code >= fast.INTERNAL_NOT_RESIDENT:  # pragma: no cover - invariant
        raise RuntimeError(f"internal: evaluator invariant {code} broken at task "
                           f"'{task_name(fail_task)}'")
    failure = None
    if code != fast.OK:
        need = int(short) + M - int(used)  # short = used + need - M
        if code == fast.FAIL_H2D:
            what = f"the H2D copy of '{names[fail_head]}' ({need} B) needed by"
        else:
            what = f"{need} B for"
        failure = (f"task '{task_name(fail_task)}' cannot allocate {what} it at "
                   f"t = {now * 1e3:.6g} ms: {used} B of M = {M} B in use, {short} B short")
    ideal = inst.ideal_time_s
    feasible = failure is None
    return Evaluation(
        feasible=feasible,
        step_time_s=float(now),
        ideal_time_s=ideal,
        throughput=(ideal / now if now > 0 else 1.0) if feasible else 0.0,
        stall_fwd_s=float(stall_fwd),
        stall_bwd_s=float(stall_bwd),
        recompute_s=float(recompute),
        d2h_bytes=int(d2h_bytes),
        h2d_bytes=int(h2d_bytes),
        evictions=int(evictions),
        peak_bytes=int(peak),
        budget_bytes=M,
        failure=failure,
        h2d_stall_s={names[t]: float(h2d_stall[t]) for t in np.flatnonzero(h2d_stall)},
        trace=None,
    )


class _Run:
    """One simulation. Fields are plain Python values for speed."""

    def __init__(self, inst: Instance, decisions: np.ndarray, M: int, trace: bool) -> None:
        self.inst, self.M = inst, M
        st = self.st = _static(inst)
        self.dec = dec = decisions.tolist()
        task_op, task_t = build_tasks(inst, decisions)
        self.task_op, self.task_t = task_op, task_t
        n_tasks = len(task_op)
        s = st.s
        # Per-task durations, fixed allocations / frees, saved reads.
        dur, alloc, free, reads = [], [], [], []
        for op, t in zip(task_op, task_t, strict=True):
            if op >= 0:
                dur.append(st.dur[op])
                a = st.op_alloc[op]
                if op < st.n_fwd:
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
        # Backward reader tasks of each saved tensor; release at the last one.
        n_saved = len(dec)
        need: list[list[int]] = [[] for _ in range(n_saved)]
        for k in range(st.n_fwd, n_tasks):
            for t in reads[k]:
                need[t].append(k)
        release: list[list[int]] = [[] for _ in range(n_tasks)]
        for t in range(n_saved):
            if need[t]:
                release[need[t][-1]].append(t)
        self.need, self.release = need, release
        fwd_rel: list[list[int]] = [[] for _ in range(st.n_fwd)]
        for t in range(n_saved):
            fwd_rel[st.fwd_release[t]].append(t)
        self.fwd_rel = fwd_rel
        self.trace: list[dict[str, Any]] | None = [] if trace else None
        self._h2d_end: dict[int, float] = {}   # saved position -> end of its last H2D
        self._freed = 0
        self._n_evicted = 0

    # ------------------------------------------------------------------ main loop
    def run(self) -> Evaluation:  # noqa: C901 - one event loop, kept in one place
        inst, st, M = self.inst, self.st, self.M
        dec, s = self.dec, st.s
        dur, alloc, free, reads = self.dur, self.alloc, self.free, self.reads
        task_op, task_t, need, cum = self.task_op, self.task_t, self.need, self.cum_alloc
        n_tasks, n_fwd = len(dur), st.n_fwd
        W = inst.link.bytes_per_s
        duplex = inst.link.duplex_factor
        lat = inst.link.copy_latency_s
        tr = self.trace

        state = [_ABSENT] * len(dec)
        d2h_done = [False] * len(dec)
        fwd_done = [False] * len(dec)
        need_ptr = [0] * len(dec)
        qkey = [-1] * len(dec)          # H2D queue key while queued, else -1
        h2dq: list[tuple[int, int]] = []  # heap of (next need task, saved position)
        for t, d in enumerate(dec):
            if d == SWAP and need[t]:
                qkey[t] = need[t][0]
                h2dq.append((qkey[t], t))
        heapq.heapify(h2dq)
        d2hq: deque[int] = deque()

        now = 0.0
        used = 0
        peak = 0
        k = 0                 # next task to start
        comp_busy = False
        comp_end = _INF
        prev_end = 0.0        # end of the previous task (for stall accounting)
        fwd_finished = n_fwd == 0
        stall_fwd = stall_bwd = recompute = 0.0
        d2h_bytes = h2d_bytes = evictions = 0
        wait_inputs_since = -1.0
        h2d_stall: dict[str, float] = {}
        # Copy engines: [tensor, latency_end, remaining_bytes, start] or None.
        d2h: list[Any] | None = None
        h2d: list[Any] | None = None
        failure: str | None = None
        names = st.saved_names

        def mem_sample() -> None:
            if tr is not None:
                tr.append({"lane": "memory", "name": "used", "start_s": now, "end_s": now,
                           "bytes": used})

        while True:
            # ---------------- start whatever can start at `now` -----------------
            progressed = True
            while progressed:
                progressed = False
                # Compute stream.
                if not comp_busy and k < n_tasks:
                    rk = reads[k]
                    missing = -1
                    for t in rk:
                        stt = state[t]
                        if stt == _DEV:
                            continue
                        if stt == _FWD:
                            if k >= n_fwd:      # lagging D2H: use the device copy
                                state[t] = _DEV
                                qkey[t] = -1
                            continue
                        if dec[t] != SWAP:  # keep/recomp inputs are resident by construction
                            raise RuntimeError(f"internal: '{names[t]}' is not resident for "
                                               f"task '{self._task_name(k)}'")
                        missing = t
                        break
                    if missing < 0:
                        if wait_inputs_since >= 0.0 and now > wait_inputs_since:
                            last = max((t for t in rk if dec[t] == SWAP),
                                       key=lambda t: (self._h2d_end.get(t, -1.0), t))
                            h2d_stall[names[last]] = (h2d_stall.get(names[last], 0.0)
                                                      + now - wait_inputs_since)
                        wait_inputs_since = -1.0
                        a = alloc[k]
                        if used + a <= M:
                            # Start task k.
                            idle = now - prev_end
                            if idle > 0.0:
                                if k < n_fwd:
                                    stall_fwd += idle
                                else:
                                    stall_bwd += idle
                                if tr is not None:
                                    tr.append({"lane": "stall", "name": self._task_name(k),
                                               "start_s": prev_end, "end_s": now, "bytes": 0})
                            used += a
                            if used > peak:
                                peak = used
                            t_r = task_t[k]
                            if t_r >= 0:
                                state[t_r] = _DEV
                                recompute += dur[k]
                            else:
                                op = task_op[k]
                                if op < n_fwd:
                                    for t in st.outs[op]:
                                        state[t] = _FWD if dec[t] == SWAP else _DEV
                            comp_busy = True
                            comp_end = now + dur[k]
                            if tr is not None:
                                tr.append({"lane": "compute", "name": self._task_name(k),
                                           "start_s": now, "end_s": comp_end,
                                           "bytes": a, "rebuild": t_r >= 0})
                                mem_sample()
                            progressed = True
                    elif wait_inputs_since < 0.0:
                        wait_inputs_since = now
                # D2H engine: FIFO, no memory needed.
                if d2h is None and d2hq:
                    t = d2hq.popleft()
                    d2h = [t, now + lat, float(s[t]), now]
                    d2h_bytes += s[t]
                    progressed = True
                # H2D engine: head of the need-ordered queue.
                if h2d is None and fwd_finished:
                    while h2dq and qkey[h2dq[0][1]] != h2dq[0][0]:
                        heapq.heappop(h2dq)
                    if h2dq:
                        t = h2dq[0][1]
                        if state[t] == _HOST:
                            waiting = (not comp_busy and k < n_tasks and t in reads[k])
                            if waiting:
                                extra = 0
                            else:
                                k0 = k + 1 if comp_busy else k
                                k0 = min(k0, n_tasks)
                                extra = cum[min(k0 + 3, n_tasks)] - cum[k0]
                            if used + s[t] + extra <= M:
                                heapq.heappop(h2dq)
                                qkey[t] = -1
                                used += s[t]
                                if used > peak:
                                    peak = used
                                h2d_bytes += s[t]
                                if s[t] == 0:
                                    state[t] = _DEV
                                    self._h2d_end[t] = now
                                else:
                                    state[t] = _FETCH
                                    h2d = [t, now + lat, float(s[t]), now]
                                mem_sample()
                                progressed = True

            # ---------------- next event -----------------
            if k >= n_tasks and not comp_busy:
                break
            ev = comp_end if comp_busy else _INF
            d2h_rate = W * (duplex if h2d is not None else 1.0)
            h2d_rate = W * (duplex if d2h is not None else 1.0)
            d2h_t = h2d_t = _INF
            if d2h is not None:
                d2h_t = d2h[1] if now < d2h[1] else now + d2h[2] / d2h_rate
                ev = min(ev, d2h_t)
            if h2d is not None:
                h2d_t = h2d[1] if now < h2d[1] else now + h2d[2] / h2d_rate
                ev = min(ev, h2d_t)
            if ev == _INF:
                # Compute is blocked and nothing is in flight: evict or give up.
                while h2dq and qkey[h2dq[0][1]] != h2dq[0][0]:
                    heapq.heappop(h2dq)
                if any(state[t] not in (_DEV, _FWD) for t in reads[k]):
                    head = h2dq[0][1] if h2dq else -1
                    if head < 0 or state[head] != _HOST:  # pragma: no cover - invariant
                        raise RuntimeError(f"internal: task '{self._task_name(k)}' waits for "
                                           "an input whose H2D copy is not queued")
                    short = used + s[head] - M
                    what = f"the H2D copy of '{names[head]}' ({s[head]} B) needed by"
                else:
                    short = used + alloc[k] - M
                    what = f"{alloc[k]} B for"
                if short <= 0:  # pragma: no cover - invariant
                    raise RuntimeError(f"internal: task '{self._task_name(k)}' is blocked "
                                       "with memory to spare")
                if self._evict(k, short, state, d2h_done, need_ptr, qkey, h2dq, now):
                    used -= self._freed
                    evictions += self._n_evicted
                    mem_sample()
                    continue
                failure = (f"task '{self._task_name(k)}' cannot allocate {what} it at "
                           f"t = {now * 1e3:.6g} ms: {used} B of M = {M} B in use, "
                           f"{short} B short")
                break
            dt = ev - now
            # A copy in its latency phase moves no bytes; one whose event is `ev` either
            # leaves its latency phase (transfer starts) or has moved its last byte.
            d2h_fin = d2h is not None and d2h_t == ev and now >= d2h[1]
            h2d_fin = h2d is not None and h2d_t == ev and now >= h2d[1]
            if d2h is not None and not d2h_fin and now >= d2h[1]:
                d2h[2] -= d2h_rate * dt
            if h2d is not None and not h2d_fin and now >= h2d[1]:
                h2d[2] -= h2d_rate * dt
            now = ev
            # ---------------- completions at `now` -----------------
            if d2h_fin:
                t = d2h[0]
                if tr is not None:
                    tr.append({"lane": "d2h", "name": names[t], "start_s": d2h[3],
                               "end_s": now, "bytes": s[t]})
                d2h = None
                d2h_done[t] = True
                if state[t] == _FWD and fwd_done[t]:
                    state[t] = _HOST
                    used -= s[t]
                    mem_sample()
            if h2d_fin:
                t = h2d[0]
                if tr is not None:
                    tr.append({"lane": "h2d", "name": names[t], "start_s": h2d[3],
                               "end_s": now, "bytes": s[t]})
                h2d = None
                state[t] = _DEV
                self._h2d_end[t] = now
            if comp_busy and comp_end == ev:
                comp_busy = False
                comp_end = _INF
                prev_end = now
                used -= free[k]
                op = task_op[k]
                if 0 <= op < n_fwd:
                    for t in st.outs[op]:
                        if dec[t] == SWAP:
                            if s[t] == 0:
                                d2h_done[t] = True
                            else:
                                d2hq.append(t)
                    for t in self.fwd_rel[op]:
                        d = dec[t]
                        if d == RECOMP:
                            state[t] = _ABSENT
                            used -= s[t]
                        elif d == SWAP:
                            fwd_done[t] = True
                            if d2h_done[t] and state[t] == _FWD:
                                state[t] = _HOST
                                used -= s[t]
                    if op == n_fwd - 1:
                        fwd_finished = True
                else:
                    for t in reads[k]:
                        need_ptr[t] += 1
                for t in self.release[k]:
                    if state[t] in (_DEV, _FWD):
                        used -= s[t]
                    state[t] = _ABSENT
                    qkey[t] = -1
                mem_sample()
                k += 1

        T = now
        feasible = failure is None
        ideal = inst.ideal_time_s
        return Evaluation(
            feasible=feasible,
            step_time_s=T,
            ideal_time_s=ideal,
            throughput=(ideal / T if T > 0 else 1.0) if feasible else 0.0,
            stall_fwd_s=stall_fwd,
            stall_bwd_s=stall_bwd,
            recompute_s=recompute,
            d2h_bytes=d2h_bytes,
            h2d_bytes=h2d_bytes,
            evictions=evictions,
            peak_bytes=peak,
            budget_bytes=M,
            failure=failure,
            h2d_stall_s=h2d_stall,
            trace=tr,
        )

    def _task_name(self, k: int) -> str:
        op = self.task_op[k]
        if op >= 0:
            return self.st.names[op]
        return f"rebuild:{self.st.saved_names[self.task_t[k]]}"

    def _evict(self, k: int, short: int, state: list[int], d2h_done: list[bool],
               need_ptr: list[int], qkey: list[int], h2dq: list[tuple[int, int]],
               now: float) -> bool:
        """Eviction fallback: free swapped device copies with a host copy, furthest next
        use first, if together they cover `short` bytes. Sets _freed and _n_evicted."""
        dec, s, need = self.dec, self.st.s, self.need
        reading = set(self.reads[k])
        cands = []
        for t, d in enumerate(dec):
            if d == SWAP and state[t] == _DEV and d2h_done[t] and t not in reading \
                    and s[t] > 0 and need_ptr[t] < len(need[t]):
                cands.append((need[t][need_ptr[t]], t))
        if sum(s[t] for _, t in cands) < short:
            return False
        cands.sort(reverse=True)
        freed = n = 0
        for nxt, t in cands:
            if freed >= short:
                break
            state[t] = _HOST
            freed += s[t]
            n += 1
            qkey[t] = nxt
            heapq.heappush(h2dq, (nxt, t))
            if self.trace is not None:
                self.trace.append({"lane": "evict", "name": self.st.saved_names[t],
                                   "start_s": now, "end_s": now, "bytes": s[t]})
        self._freed, self._n_evicted = freed, n
        return True


__all__ = ["Evaluation", "simulate", "build_tasks", "KEEP", "SWAP", "RECOMP"]
