"""The discrete-event loop shared by every runtime policy (private).

:class:`Engine` is the barrier-free runtime (docs/model.md, "Plan semantics
under the barrier-free runtime"; SlackSwap paper section 3.4). The other runtimes
(:mod:`.layer_barriers`, :mod:`.on_demand`) subclass it and override the hooks marked
"hook" below; the loop itself, the copy engines, memory accounting, stall accounting and
the Evaluation are shared.

Three resources run side by side: the compute stream executing the tasks of a
:class:`~slackopt.simulate._tasks.TaskList`, a D2H and an H2D copy engine. Memory is
tracked in bytes against M and never exceeds it. Per saved tensor the loop keeps a state:

- ``_ABSENT``: not on the device (not produced yet, recomputed away, or released);
- ``_FWD``: a swapped tensor's device copy while its D2H is pending or forward readers
  still run (a backward reader may use it: a lagging D2H);
- ``_HOST``: only the host copy exists;
- ``_FETCH``: its H2D copy is in flight (buffer allocated);
- ``_DEV``: resident on the device;
- ``_EVICT``: resident, chosen as an eviction victim, freed when its D2H ends (on_demand).

H2D copies are served from one queue ordered by next need (task index). A queued tensor
enters the heap only once its host copy is complete (state ``_HOST``), so a copy whose D2H
has not ended never holds up the others (no head-of-line blocking); the head starts only
after the forward pass has ended, and is admitted by :func:`.rules.h2d_admits` (used +
size + the allocations of the next :data:`.rules.ADMISSION_LOOKAHEAD` compute tasks not
yet started fit in M, or, when the compute stream already waits for it, used + size fits).
D2H copies run one at a time in queue order (FIFO); a queued D2H whose tensor has no
reader left (its last backward reader or rebuild has ended) is dropped and moves no bytes,
while one in flight runs to its end. A task claims every input whose device copy is still
resident (a lagging D2H) when it is considered, whatever the order of its inputs and even
if another input is still missing.
Runtimes differ in when a tensor enters that queue, when a D2H is queued, what gates the
compute stream and what happens when an allocation does not fit.

A copy costs ``link.copy_latency_s``, then moves its bytes at :func:`.rules.copy_rate`
(its direction's bandwidth W, ``link.d2h_bytes_per_s`` or ``link.h2d_bytes_per_s``, or
``duplex_factor * W`` while a copy in the other direction is in flight, its latency phase
included): :func:`.rules.copy_start`, :func:`.rules.copy_event` and
:func:`.rules.copy_advance` move it from event to event. A task starts only if its
allocation fits (:func:`.rules.allocation_fits`).
Host pinned memory (``Instance.host_memory_bytes``, an extension of docs/model.md): a
swapped tensor occupies host memory from the start of its D2H until its last backward
reader ends (or its D2H ends, if that is later); a D2H whose start would raise occupancy
above the limit ends the run as infeasible at that instant (no waiting: host memory is
only freed by the backward pass, so waiting could deadlock). Every runtime shares this
rule, and slackopt.simulate._kernel implements it identically.
Accounting: T = end of the last task; T - T* = stall_fwd_s + stall_bwd_s + recompute_s,
where a stall is compute-stream idle time before a task (charged to the phase of the task
that waited) and recompute_s is the summed duration of rebuild tasks.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Any

from slackopt.instance import Instance
from slackopt.plan import RECOMP, SWAP, Plan
from slackopt.simulate._tasks import ABSENT as _ABSENT
from slackopt.simulate._tasks import DEV as _DEV
from slackopt.simulate._tasks import EVICT as _EVICT
from slackopt.simulate._tasks import FETCH as _FETCH
from slackopt.simulate._tasks import FWD as _FWD
from slackopt.simulate._tasks import HOST as _HOST
from slackopt.simulate._tasks import (
    TaskList,
    _static,
    alloc_failure,
    evaluation,
    h2d_need,
    host_failure,
)
from slackopt.simulate.evaluation import Evaluation
from slackopt.simulate.rules import (
    allocation_fits,
    copy_advance,
    copy_event,
    copy_rate,
    copy_start,
    h2d_admits,
    host_admits,
    lookahead_window,
    shortfall,
)

_INF = float("inf")
_PRESENT = (_DEV, _FWD, _EVICT)
"""States in which the device copy exists (a reader may use it)."""


class Engine:
    """One simulation under the barrier-free runtime; subclasses change the hooks.

    Fields are plain Python values for speed.
    """

    #: State of a swapped tensor's device copy when its producer starts.
    swap_out_state = _FWD

    def __init__(self, inst: Instance, plan: Plan, M: int, trace: bool) -> None:
        self.inst, self.M = inst, M
        st = self.st = _static(inst)
        self.dec = dec = plan.decisions.tolist()
        self.params = plan.resolved_runtime_params()
        tl = self.tl = TaskList(inst, plan.decisions)
        self.task_op, self.task_t = tl.task_op, tl.task_t
        self.dur, self.alloc, self.free, self.reads = tl.dur, tl.alloc, tl.free, tl.reads
        self.cum_alloc, self.need, self.release, self.fwd_rel = (
            tl.cum_alloc, tl.need, tl.release, tl.fwd_rel)
        self.n_tasks = len(tl.dur)
        self.n_fwd = st.n_fwd
        self.task_fwd, self.earliest = tl.is_fwd, tl.earliest
        n_saved = len(dec)
        self.trace: list[dict[str, Any]] | None = [] if trace else None
        self._h2d_end: dict[int, float] = {}   # saved position -> end of its last H2D
        # Tensor state.
        self.state = [_ABSENT] * n_saved
        self.d2h_done = [False] * n_saved
        self.fwd_done = [False] * n_saved
        self.unit_done = [False] * n_saved  # its forward unit has ended: H2D may start
        self.need_ptr = [0] * n_saved
        self.qkey = [-1] * n_saved          # H2D queue key while queued, else -1
        # Heap of (next need task, saved position) of queued tensors on the host; an entry
        # is stale once qkey or the state has changed.
        self.h2dq: list[tuple[int, int]] = []
        self.d2hq: deque[int] = deque()
        self.d2h_queued = [False] * n_saved  # in d2hq and not started (False: dropped)
        # Clock, compute stream, memory.
        self.now = 0.0
        self.used = 0
        self.peak = 0
        self.k = 0                 # next task to start
        self.comp_busy = False
        self.comp_end = _INF
        self.prev_end = 0.0        # end of the previous task (for stall accounting)
        self.wait_inputs_since = -1.0
        # Copy engines: [tensor, latency_end, remaining_bytes, start] or None.
        self.d2h: list[Any] | None = None
        self.h2d: list[Any] | None = None
        # Accounting.
        self.stall_fwd = self.stall_bwd = self.recompute = 0.0
        self.d2h_bytes = self.h2d_bytes = self.evictions = 0
        self.h2d_stall: dict[str, float] = {}
        self.failure: str | None = None
        # Host pinned memory (bytes): a swapped storage is held on the host from its D2H
        # start until its last backward reader ends (or its D2H ends, if later).
        self.host_limit = st.host_limit          # -1: unlimited
        self.host_used = 0
        self.host_held = [False] * n_saved
        self.host_released = [False] * n_saved
        self.init_queues()

    # ================================================================== hooks
    def init_queues(self) -> None:
        """hook: barrier-free queues every swapped tensor's H2D by first need up front
        (each enters the heap when its host copy is complete)."""
        dec, need, qkey = self.dec, self.need, self.qkey
        for t, d in enumerate(dec):
            if d == SWAP and need[t]:
                qkey[t] = need[t][0]

    def gate_open(self, k: int) -> bool:
        """hook: may task k start as far as copies are concerned (barriers)?"""
        return True

    def on_missing_input(self, k: int, t: int) -> None:
        """hook: task k cannot start because swapped input t is not on the device."""

    def on_task_start(self, k: int) -> None:
        """hook: task k has just started."""

    def on_produced(self, t: int) -> None:
        """hook: swapped tensor t is ready (its producer, or its last in-place mutation,
        has ended): queue its D2H (FIFO)."""
        if self.st.s[t] == 0:
            self.d2h_done[t] = True
        else:
            self.queue_d2h(t)

    def on_swap_fwd_released(self, t: int) -> None:
        """hook: the last forward reader of swapped tensor t has ended."""
        self.fwd_done[t] = True
        if self.d2h_done[t] and self.state[t] == _FWD:
            self.to_host(t)

    def on_d2h_done(self, t: int) -> None:
        """hook: the D2H copy of t has ended."""
        self.d2h_done[t] = True
        if self.state[t] == _FWD and self.fwd_done[t]:
            self.to_host(t)
            self.mem_sample()

    def on_d2h_dropped(self, t: int) -> None:
        """hook: t's queued D2H was dropped (no reader of t is left)."""

    def on_arrived(self, t: int) -> None:
        """hook: t's H2D has ended (or moved no bytes); t is on the device."""

    def waits_for(self, t: int) -> bool:
        """hook: is the blocked compute stream waiting for the H2D of t?"""
        k = self.k
        return not self.comp_busy and k < self.n_tasks and t in self.reads[k]

    def relieve(self) -> bool:
        """hook: act on a compute stream blocked for memory before waiting for events.
        Returns True if something changed (start-up is retried)."""
        return False

    def evict_fallback(self, k: int, short: int) -> bool:
        """hook: nothing is in flight and the compute stream cannot go on. Barrier-free:
        free swapped device copies with a host copy, furthest next use first, if together
        they cover `short` bytes, and queue their H2D again by next use."""
        dec, s, need, state = self.dec, self.st.s, self.need, self.state
        d2h_done, need_ptr = self.d2h_done, self.need_ptr
        reading = set(self.reads[k])
        cands = []
        for t, d in enumerate(dec):
            if d == SWAP and state[t] == _DEV and d2h_done[t] and t not in reading \
                    and s[t] > 0 and need_ptr[t] < len(need[t]):
                cands.append((need[t][need_ptr[t]], t))
        if sum(s[t] for _, t in cands) < short:
            return False
        cands.sort(reverse=True)
        freed = 0
        for nxt, t in cands:
            if freed >= short:
                break
            state[t] = _HOST
            freed += s[t]
            self.evictions += 1
            self.push_h2d(t, nxt)
            self.trace_evict(t)
        self.used -= freed
        return True

    # ================================================================== helpers
    def push_h2d(self, t: int, key: int) -> None:
        """Queue t's H2D copy with priority `key` (the task that needs it next); it can
        be chosen once t is on the host and its forward unit has ended (at once if both
        hold already)."""
        self.qkey[t] = key
        if self.state[t] == _HOST and self.unit_done[t]:
            heapq.heappush(self.h2dq, (key, t))

    def to_host(self, t: int) -> None:
        """Free t's device copy (its host copy is complete); a queued H2D becomes
        eligible once t's forward unit has ended."""
        self.state[t] = _HOST
        self.used -= self.st.s[t]
        if self.qkey[t] >= 0 and self.unit_done[t]:
            heapq.heappush(self.h2dq, (self.qkey[t], t))

    def queue_d2h(self, t: int) -> None:
        """Queue t's D2H copy (FIFO)."""
        self.d2hq.append(t)
        self.d2h_queued[t] = True

    def next_need(self, t: int) -> int:
        """Index of the next backward task that reads t (n_tasks if none)."""
        nd, p = self.need[t], self.need_ptr[t]
        return nd[p] if p < len(nd) else self.n_tasks

    def mem_sample(self) -> None:
        if self.trace is not None:
            self.trace.append({"lane": "memory", "name": "used", "start_s": self.now,
                               "end_s": self.now, "bytes": self.used})

    def trace_evict(self, t: int) -> None:
        if self.trace is not None:
            self.trace.append({"lane": "evict", "name": self.st.saved_names[t],
                               "start_s": self.now, "end_s": self.now, "bytes": self.st.s[t]})

    def task_name(self, k: int) -> str:
        return self.tl.task_name(self.inst, k)

    def blocking_copy(self) -> int:
        """hook: the queued copy a blocked compute stream waits for (the queue's head)."""
        return self._head()

    def _head(self) -> int:
        """Saved position of the earliest-need queued tensor on the host (stale entries
        dropped), or -1."""
        h2dq, qkey, state = self.h2dq, self.qkey, self.state
        while h2dq and (qkey[h2dq[0][1]] != h2dq[0][0] or state[h2dq[0][1]] != _HOST):
            heapq.heappop(h2dq)
        return h2dq[0][1] if h2dq else -1

    # ================================================================== start-up
    def _try_start_compute(self) -> bool:
        k = self.k
        if not self.gate_open(k):
            return False
        state, dec, qkey = self.state, self.dec, self.qkey
        rk = self.reads[k]
        missing = -1
        for t in rk:  # every input is looked at: lagging copies are claimed all at once
            stt = state[t]
            if stt == _DEV:
                continue
            if stt == _FWD:
                if not self.task_fwd[k]:  # lagging D2H: use the device copy
                    state[t] = _DEV
                    qkey[t] = -1
                    self.on_arrived(t)
                continue
            if stt == _EVICT:
                self.cancel_eviction(t)
                continue
            if dec[t] != SWAP:  # keep/recomp inputs are resident by construction
                raise RuntimeError(f"internal: '{self.st.saved_names[t]}' is not resident "
                                   f"for task '{self.task_name(k)}'")
            if missing < 0:
                missing = t
        now = self.now
        if missing >= 0:
            if self.wait_inputs_since < 0.0:
                self.wait_inputs_since = now
            self.on_missing_input(k, missing)
            return False
        if self.wait_inputs_since >= 0.0:
            if now > self.wait_inputs_since:
                # The wait is charged to the input whose H2D ended last; a zero-byte
                # input moves nothing and is charged only if no other input was fetched.
                sz = self.st.s
                last = max((t for t in rk if dec[t] == SWAP),
                           key=lambda t: (sz[t] > 0, self._h2d_end.get(t, -1.0), t))
                nm = self.st.saved_names[last]
                self.h2d_stall[nm] = self.h2d_stall.get(nm, 0.0) + now - self.wait_inputs_since
            self.wait_inputs_since = -1.0
        a = self.alloc[k]
        if not allocation_fits(self.used, a, self.M):
            return False
        # Start task k.
        tr = self.trace
        ready = max(self.prev_end, self.earliest[k])  # idle before it is no stall
        idle = now - ready
        if idle > 0.0:
            if self.task_fwd[k]:
                self.stall_fwd += idle
            else:
                self.stall_bwd += idle
            if tr is not None:
                tr.append({"lane": "stall", "name": self.task_name(k),
                           "start_s": ready, "end_s": now, "bytes": 0})
        self.used += a
        if self.used > self.peak:
            self.peak = self.used
        t_r = self.task_t[k]
        if t_r >= 0:
            state[t_r] = _DEV
            self.recompute += self.dur[k]
        else:
            op = self.task_op[k]
            if self.task_fwd[k]:
                out_state = self.swap_out_state
                for t in self.st.outs[op]:
                    state[t] = out_state if dec[t] == SWAP else _DEV
        self.comp_busy = True
        self.comp_end = now + self.dur[k]
        if tr is not None:
            tr.append({"lane": "compute", "name": self.task_name(k), "start_s": now,
                       "end_s": self.comp_end, "bytes": a, "rebuild": t_r >= 0})
            self.mem_sample()
        self.on_task_start(k)
        return True

    def cancel_eviction(self, t: int) -> None:
        """A reader needs t while it is being evicted: keep the device copy."""
        raise RuntimeError("internal: eviction state outside the on-demand runtime")

    def _try_start_h2d(self) -> bool:
        t = self._head()
        if t < 0:
            return False
        if self.waits_for(t):
            reserved = 0
        else:
            first, end = lookahead_window(self.k, self.comp_busy, self.n_tasks)
            reserved = self.cum_alloc[end] - self.cum_alloc[first]
        s = self.st.s
        if not h2d_admits(self.used, s[t], reserved, self.M):
            return False
        heapq.heappop(self.h2dq)
        self.qkey[t] = -1
        self.used += s[t]
        if self.used > self.peak:
            self.peak = self.used
        self._start_h2d(t)
        return True

    def _start_h2d(self, t: int) -> None:
        """Start the H2D copy of t (its buffer is already counted in `used`)."""
        s = self.st.s
        self.h2d_bytes += s[t]
        if s[t] == 0:
            self.state[t] = _DEV
            self._h2d_end[t] = self.now
            self.on_arrived(t)
        else:
            self.state[t] = _FETCH
            self.h2d = [t, *copy_start(self.now, s[t], self.inst.link.copy_latency_s), self.now]
        self.mem_sample()

    def _progress(self) -> None:
        """Start whatever can start at `now`."""
        progressed = True
        while progressed:
            progressed = False
            k = self.k
            if (not self.comp_busy and k < self.n_tasks and self.earliest[k] <= self.now
                    and self._try_start_compute()):
                progressed = True
            d2hq = self.d2hq
            while d2hq and not self.d2h_queued[d2hq[0]]:
                d2hq.popleft()               # dropped: no reader left
            if self.d2h is None and d2hq:
                t = d2hq[0]
                s = self.st.s[t]
                if not self.host_held[t]:
                    if not host_admits(self.host_used, s, self.host_limit):
                        self.failure = host_failure(self.st.saved_names[t], s, self.host_used,
                                                    self.host_limit, self.now)
                        return
                    self.host_held[t] = True
                    self.host_used += s
                d2hq.popleft()
                self.d2h_queued[t] = False
                self.d2h = [t, *copy_start(self.now, s, self.inst.link.copy_latency_s), self.now]
                self.d2h_bytes += s
                progressed = True
            if self.h2d is None and self._try_start_h2d():
                progressed = True

    # ================================================================== main loop
    def run(self) -> Evaluation:
        inst = self.inst
        link = inst.link
        w_d2h, w_h2d, duplex = link.d2h_bytes_per_s, link.h2d_bytes_per_s, link.duplex_factor
        s = self.st.s
        names = self.st.saved_names
        tr = self.trace
        while True:
            self._progress()
            if self.k >= self.n_tasks and not self.comp_busy or self.failure is not None:
                break
            if self.relieve():
                continue
            # ---------------- next event -----------------
            now = self.now
            d2h, h2d = self.d2h, self.h2d
            ev = self.comp_end if self.comp_busy else _INF
            if not self.comp_busy and self.k < self.n_tasks and self.earliest[self.k] > now:
                ev = self.earliest[self.k]  # the compute stream idles until its unit starts
            d2h_rate = copy_rate(w_d2h, duplex, h2d is not None)
            h2d_rate = copy_rate(w_h2d, duplex, d2h is not None)
            d2h_t = h2d_t = _INF
            if d2h is not None:
                d2h_t = copy_event(now, d2h[1], d2h[2], d2h_rate)
                ev = min(ev, d2h_t)
            if h2d is not None:
                h2d_t = copy_event(now, h2d[1], h2d[2], h2d_rate)
                ev = min(ev, h2d_t)
            if ev == _INF:
                if self._stuck():
                    self.mem_sample()
                    continue
                break
            d2h_fin = h2d_fin = False
            if d2h is not None:
                d2h[2], d2h_fin = copy_advance(now, d2h[1], d2h[2], d2h_rate, d2h_t, ev)
            if h2d is not None:
                h2d[2], h2d_fin = copy_advance(now, h2d[1], h2d[2], h2d_rate, h2d_t, ev)
            self.now = now = ev
            # ---------------- completions at `now` -----------------
            if d2h_fin:
                t = d2h[0]
                if tr is not None:
                    tr.append({"lane": "d2h", "name": names[t], "start_s": d2h[3],
                               "end_s": now, "bytes": s[t]})
                self.d2h = None
                self.on_d2h_done(t)
                if self.host_released[t] and self.host_held[t]:
                    self.host_held[t] = False
                    self.host_used -= s[t]
            if h2d_fin:
                t = h2d[0]
                if tr is not None:
                    tr.append({"lane": "h2d", "name": names[t], "start_s": h2d[3],
                               "end_s": now, "bytes": s[t]})
                self.h2d = None
                self.state[t] = _DEV
                self._h2d_end[t] = now
                self.on_arrived(t)
            if self.comp_busy and self.comp_end == ev:
                self._end_task()
        return self._evaluation()

    def _end_task(self) -> None:
        k = self.k
        self.comp_busy = False
        self.comp_end = _INF
        self.prev_end = self.now
        self.used -= self.free[k]
        dec, s, state = self.dec, self.st.s, self.state
        op = self.task_op[k]
        if self.task_fwd[k]:
            for t in self.st.ready[op]:
                if dec[t] == SWAP:
                    self.on_produced(t)
            for t in self.fwd_rel[op]:
                d = dec[t]
                if d == RECOMP:
                    state[t] = _ABSENT
                    self.used -= s[t]
                elif d == SWAP:
                    self.on_swap_fwd_released(t)
            unit_done, qkey = self.unit_done, self.qkey
            for t in self.st.unit_end[op]:  # the forward unit of t ends: its H2D may start
                unit_done[t] = True
                if state[t] == _HOST and qkey[t] >= 0:
                    heapq.heappush(self.h2dq, (qkey[t], t))
        else:
            need_ptr = self.need_ptr
            for t in self.reads[k]:
                need_ptr[t] += 1
        qkey = self.qkey
        for t in self.release[k]:
            if self.d2h_queued[t]:           # no reader left: the D2H is not needed
                self.d2h_queued[t] = False
                self.on_d2h_dropped(t)
            self.host_released[t] = True
            if self.host_held[t] and self.d2h_done[t]:
                self.host_held[t] = False
                self.host_used -= s[t]
            if state[t] in (_DEV, _FWD):
                self.used -= s[t]
            state[t] = _ABSENT
            qkey[t] = -1
        self.mem_sample()
        self.k = k + 1

    def _stuck(self) -> bool:
        """Compute is blocked and nothing is in flight: evict (True) or fail (False)."""
        k = self.k
        s, M, state = self.st.s, self.M, self.state
        names = self.st.saved_names
        if not self.gate_open(k) or any(state[t] not in _PRESENT for t in self.reads[k]):
            head = self.blocking_copy()
            if head < 0 or state[head] != _HOST:  # pragma: no cover - invariant
                raise RuntimeError(f"internal: task '{self.task_name(k)}' waits for "
                                   "a copy that is not queued")
            short = shortfall(self.used, s[head], M)
            what = h2d_need(names[head], s[head])
        else:
            short = shortfall(self.used, self.alloc[k], M)
            what = f"{self.alloc[k]} B for"
        if short <= 0:  # pragma: no cover - invariant
            raise RuntimeError(f"internal: task '{self.task_name(k)}' is blocked "
                               "with memory to spare")
        if self.evict_fallback(k, short):
            return True
        self.failure = alloc_failure(self.task_name(k), what, self.now, self.used, M, short)
        return False

    def _evaluation(self) -> Evaluation:
        return evaluation(
            self.inst, self.M, self.now, self.failure, stall_fwd=self.stall_fwd,
            stall_bwd=self.stall_bwd, recompute=self.recompute, d2h_bytes=self.d2h_bytes,
            h2d_bytes=self.h2d_bytes, evictions=self.evictions, peak=self.peak,
            h2d_stall=self.h2d_stall, trace=self.trace)
