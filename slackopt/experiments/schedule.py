"""Explicit schedules of a plan's decisions, and the checker that proves one feasible.

The evaluator (:mod:`slackopt.simulate`) runs a plan under a fixed runtime policy (FIFO
offloads queued at production, the H2D admission rule, evictions, claims). That policy is
one way to schedule the plan's decisions; a *schedule* here is any other way that obeys
the physical rules only, so that the fastest schedule of a plan's decisions separates the
time lost to the decisions from the time lost to the runtime
(:mod:`slackopt.experiments.runtime_gap`).

The class of schedules (what :func:`check_schedule` accepts), for a plan's decisions on an
instance at budget M (docs/model.md, "Instance", "Plan semantics" and "Copy cost", with
the runtime rules dropped):

- Compute: the plan's tasks (:class:`~slackopt.simulate.TaskList`: the forward ops, then
  each backward op preceded by the rebuilds of its recomp inputs) run on one stream in
  that order, each for its duration, without preemption; a task may start later than the
  previous one ends (a stall), never earlier.
- Swapped tensor t (size > 0), either *offloaded* or *resident*. Offloaded: one D2H copy
  that starts no earlier than the end of the op that makes t final (its producer or last
  in-place mutation); the device copy is freed when both the D2H and t's last forward
  reader have ended; one H2D copy that starts no earlier than the D2H's end and than the
  end of the forward pass (T_F, the end of the last forward task: the prefetch belongs to
  the backward pass, as in the runtime and the MILP relaxation), whose buffer is
  allocated at its start; every backward task that reads t (op or rebuild) starts no
  earlier than the H2D's end. Resident: no copy; the device copy stays until t's last
  reader ends (what the runtime does with a lagging offload). Zero-byte swaps move
  nothing and are resident. *Evictions*: an offloaded tensor's fetched copy may be freed
  when one of its backward readers ends and fetched again (another H2D, starting no
  earlier) for the next one; each fetch's buffer lives from its start to the end of the
  last reader it serves. Likewise the first readers of an offloaded tensor may read its
  device copy, kept until they end (and until the D2H ends), the first H2D serving the
  readers after them.
- Copy engines: one D2H and one H2D engine, each running one copy at a time (a copy may
  start no earlier than the previous copy on its engine has ended). A copy lasts the
  link's latency, then moves its bytes at its direction's bandwidth W (W_d2h or W_h2d),
  or at ``duplex_factor * W`` while a copy in the other direction is in flight (its
  latency phase included). The copy ends are *computed* by :func:`copy_ends` from the
  start times, not given.
- Memory, at every instant (frees before allocations at the same instant, as in the
  evaluator): each task allocates its ``TaskList.alloc`` bytes at its start and frees its
  ``TaskList.free`` bytes at its end; a kept tensor lives until its last reader ends; a
  recomp tensor until its last forward reader ends and again from its rebuild's start
  to its last reader's end; a swapped tensor as above. The total is <= M. Host pinned
  memory (``Instance.host_memory_bytes``): an offloaded tensor occupies it from its D2H
  start until its last reader ends; the total is <= the limit.

Times are compared with a tolerance of :data:`TIME_TOL_S` (1 ps) for float rounding: a
schedule whose start times come from integer nanoseconds (:mod:`slackopt.experiments.best_schedule`)
meets the rules exactly in real arithmetic and within rounding in floats.

Views (``Tensor.storage``): a plan is checked on ``instance.lowered`` (one saved unit per
storage), as the evaluator does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from slackopt.errors import SlackoptError
from slackopt.instance import Instance
from slackopt.plan import RECOMP, SWAP, Plan
from slackopt.simulate._tasks import TaskList, _static
from slackopt.simulate.rules import copy_advance, copy_event, copy_rate, copy_start

TIME_TOL_S = 1e-12
"""Tolerance (s) of every time comparison of :func:`check_schedule` (float rounding)."""


class ScheduleError(SlackoptError, ValueError):
    """A schedule breaks a physical rule; the message names the rule, the task or tensor
    and the times (ms) or bytes involved."""


@dataclass(frozen=True)
class Schedule:
    """One schedule of a plan's decisions (see the module docstring for the rules).

    Attributes:
        task_start_s: start time (s) of every task of the plan's
            :class:`~slackopt.simulate.TaskList`, in task order.
        d2h_start_s: saved position (in ``instance.lowered`` when the instance has views)
            -> start (s) of the D2H copy of that offloaded swapped tensor.
        h2d_start_s: saved position -> start (s) of its (first) H2D copy. An offloaded
            tensor is in both maps; a swapped tensor in neither is resident.
        refetch_s: saved position -> further fetches after evictions, as (i, start s)
            pairs with increasing i >= 1: the device copy is evicted when the backward
            task ``need[t][i - 1]`` (TaskList.need) ends, and an H2D starting at `start`
            (no earlier) brings it back for ``need[t][i]`` and the readers after it.
        device_reads: saved position -> i >= 1: the first i backward readers of that
            offloaded tensor read its device copy (kept until ``need[t][i - 1]`` ends, as
            the runtime does with a lagging offload), and its first H2D serves
            ``need[t][i]`` on; re-fetch indices are then > i. Default 0.
    """

    task_start_s: tuple[float, ...]
    d2h_start_s: dict[int, float] = field(default_factory=dict)
    h2d_start_s: dict[int, float] = field(default_factory=dict)
    refetch_s: dict[int, tuple[tuple[int, float], ...]] = field(default_factory=dict)
    device_reads: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ScheduleCheck:
    """What :func:`check_schedule` computed for a feasible schedule.

    Attributes:
        makespan_s: the end of the last task (s), 0 without tasks.
        peak_bytes: the largest device memory in use (bytes).
        d2h_end_s, h2d_end_s: saved position -> end (s) of its copy (the first H2D).
        task_end_s: end (s) of each task.
    """

    makespan_s: float
    peak_bytes: int
    d2h_end_s: dict[int, float]
    h2d_end_s: dict[int, float]
    task_end_s: tuple[float, ...]


def _ms(x: float) -> str:
    return f"{x * 1e3:.9g} ms"


def copy_ends(d2h: list[tuple[float, int, str]], h2d: list[tuple[float, int, str]],
              bandwidths: float | tuple[float, float], duplex_factor: float,
              latency_s: float) -> tuple[list[float], list[float]]:
    """The end of every copy on the two engines, from their start times.

    Each engine runs its copies in start order, one at a time; a copy lasts `latency_s`,
    then moves its bytes at its direction's bandwidth W, or at ``duplex_factor * W`` while
    a copy of the other engine is in flight (started and not ended; docs/model.md, "Copy
    cost").

    Args:
        d2h, h2d: per copy (start time s, size bytes, name for messages), in any order.
        bandwidths: (W_d2h, W_h2d) (B/s, > 0), or one W for both directions.
        duplex_factor: in (0, 1]. latency_s: >= 0.

    Returns:
        (D2H ends, H2D ends) in the order of the inputs (s).

    Raises:
        ScheduleError: a copy starts (by more than TIME_TOL_S) before the previous copy
            on its engine has ended, or at a negative time.
    """
    lists = (d2h, h2d)
    bw = (bandwidths, bandwidths) if isinstance(bandwidths, (int, float)) else bandwidths
    orders = [sorted(range(len(lst)), key=lambda i, lst=lst: (lst[i][0], i)) for lst in lists]
    ends: list[list[float]] = [[0.0] * len(d2h), [0.0] * len(h2d)]
    nxt = [0, 0]                       # next copy (position in `orders`) per engine
    last = [-1, -1]                    # the engine's previous copy (index), for messages
    act: list[list | None] = [None, None]   # per engine: [index, latency end, bytes left]
    label = ("D2H", "H2D")
    inf = float("inf")
    now = 0.0
    while True:
        rates = [copy_rate(bw[e], duplex_factor, act[1 - e] is not None)
                 for e in (0, 1)]
        cand = [inf, inf]
        for e in (0, 1):
            a = act[e]
            if a is not None:
                cand[e] = copy_event(now, a[1], a[2], rates[e])
            elif nxt[e] < len(lists[e]):
                cand[e] = max(now, lists[e][orders[e][nxt[e]]][0])
        t = min(cand)
        if t == inf:
            return ends[0], ends[1]
        for e in (0, 1):
            a = act[e]
            if a is None:
                continue
            a[2], done = copy_advance(now, a[1], a[2], rates[e], cand[e], t)
            if done:                                # its last byte moved at t
                ends[e][a[0]] = t
                last[e] = a[0]
                act[e] = None
        now = t
        for e in (0, 1):
            if act[e] is not None or nxt[e] >= len(lists[e]):
                continue
            i = orders[e][nxt[e]]
            start, size, name = lists[e][i]
            if start > now:
                continue
            if start < -TIME_TOL_S:
                raise ScheduleError(f"the {label[e]} copy of '{name}' starts at "
                                    f"{_ms(start)}, before 0")
            p = last[e]
            if p >= 0 and start < ends[e][p] - TIME_TOL_S:
                raise ScheduleError(
                    f"the {label[e]} copy of '{name}' starts at {_ms(start)}, while the "
                    f"{label[e]} engine still copies '{lists[e][p][2]}' (until "
                    f"{_ms(ends[e][p])}): one copy at a time per engine")
            act[e] = [i, *copy_start(now, size, latency_s)]
            nxt[e] += 1


def _lowered(inst: Instance, plan: Plan) -> tuple[Instance, Plan]:
    plan.check(inst)
    if inst.saved_unit is not None:
        return inst.lowered, plan.lowered(inst)
    return inst, plan


def check_schedule(instance: Instance, plan: Plan, budget_bytes: int,
                   schedule: Schedule) -> ScheduleCheck:
    """Replay `schedule` of `plan`'s decisions and check every rule of the module
    docstring, memory at every event included.

    Args:
        instance: the instance (views are lowered, as in :func:`slackopt.simulate`).
        plan: the plan whose decisions are scheduled (its runtime policy is ignored).
        budget_bytes: M (bytes).
        schedule: the schedule; saved positions refer to the lowered instance.

    Returns:
        The :class:`ScheduleCheck` (makespan, peak, copy ends).

    Raises:
        ScheduleError: the first broken rule: a task out of order or overlapping, a copy
            for a tensor that is not swapped, an offload with one copy only, a copy too
            early, a reader before its H2D ended, two copies at once on one engine,
            device memory above M or host memory above the limit (with the instant, the
            bytes in use and the event).
        PlanError: the plan does not fit the instance.
    """
    r = _Replay(*_lowered(instance, plan), schedule)
    r.check_copies_named()
    r.copy_ends()
    r.check_copy_times()
    peak = r.device_peak(int(budget_bytes))
    r.check_host_memory()
    return ScheduleCheck(makespan_s=r.ends[-1] if r.ends else 0.0, peak_bytes=int(peak),
                         d2h_end_s=r.d2h_end, h2d_end_s=r.h2d_end, task_end_s=tuple(r.ends))


class _Replay:
    """:func:`check_schedule`'s replay of one schedule of a (lowered) plan, one rule group
    per method, called in this order: the compute stream (on construction), the copies
    named, the copy engines, the copy times, device memory, host memory. Each raises
    :class:`ScheduleError` at the first broken rule."""

    def __init__(self, inst: Instance, plan: Plan, schedule: Schedule) -> None:
        self.inst = inst
        self.st = st = _static(inst)
        self.dec = plan.decisions.tolist()
        self.tl = tl = TaskList(inst, plan.decisions)
        self.schedule = schedule
        n = len(tl.dur)
        starts = [float(x) for x in schedule.task_start_s]
        if len(starts) != n:
            raise ScheduleError(f"the schedule gives {len(starts)} task starts; the plan has "
                                f"{n} tasks")
        self.n, self.starts = n, starts
        self.names, self.s = st.saved_names, st.s
        ends = []
        prev_end = 0.0
        for k in range(n):
            if starts[k] < prev_end - TIME_TOL_S:
                what = f"task '{self.task(k - 1)}' ends" if k else "time 0"
                raise ScheduleError(f"task '{self.task(k)}' starts at {_ms(starts[k])}, "
                                    f"before {what} ({_ms(prev_end)}): one compute stream, "
                                    "tasks in order")
            prev_end = starts[k] + tl.dur[k]
            ends.append(prev_end)
        self.ends = ends
        self.t_f = ends[st.n_fwd - 1] if st.n_fwd > 0 else 0.0

    def task(self, k: int) -> str:
        """The name of task k."""
        return self.tl.task_name(self.inst, k)

    def check_copies_named(self) -> None:
        """Copies only of swapped tensors with bytes, both directions or neither;
        re-fetches and device reads only of offloaded tensors, serving increasing readers."""
        dec, s, names, tl, schedule = self.dec, self.s, self.names, self.tl, self.schedule
        d2h_in, h2d_in = dict(schedule.d2h_start_s), dict(schedule.h2d_start_s)
        for t in set(d2h_in) | set(h2d_in):
            if not 0 <= t < len(dec):
                raise ScheduleError(f"the schedule copies saved position {t}; the instance "
                                    f"has {len(dec)} saved units")
            if dec[t] != SWAP or s[t] == 0:
                raise ScheduleError(f"the schedule copies '{names[t]}', which the plan does "
                                    "not swap (or which has no bytes)")
            if (t in d2h_in) != (t in h2d_in):
                raise ScheduleError(f"'{names[t]}' has a " + ("D2H" if t in d2h_in else "H2D")
                                    + " copy only: an offloaded tensor has both, a resident "
                                    "one neither")
        refetch = {t: tuple((int(i), float(x)) for i, x in v)
                   for t, v in schedule.refetch_s.items() if v}
        dev_reads = {t: int(i) for t, i in schedule.device_reads.items() if i}
        for t in set(refetch) | set(dev_reads):
            if t not in d2h_in:
                raise ScheduleError(f"'{names[t]}' has re-fetches or device reads but is not "
                                    "offloaded")
            idx = [dev_reads.get(t, 0)] + [i for i, _ in refetch.get(t, ())]
            if idx != sorted(set(idx)) or idx[0] < 0 or idx[-1] >= len(tl.need[t]):
                raise ScheduleError(f"the fetches of '{names[t]}' serve readers from {idx}: "
                                    f"they must increase within 0..{len(tl.need[t]) - 1}")
        self.d2h_in, self.h2d_in = d2h_in, h2d_in
        self.off = sorted(d2h_in)
        self.refetch, self.dev_reads = refetch, dev_reads

    def copy_ends(self) -> None:
        """Every copy's end on its engine (:func:`copy_ends`), and per offloaded tensor the
        fetches with the readers each serves (``spans``: first reader index, end index,
        start)."""
        off, s, names, dev_reads, refetch = (self.off, self.s, self.names, self.dev_reads,
                                             self.refetch)
        d2h_in, h2d_in = self.d2h_in, self.h2d_in
        link = self.inst.link
        d2h_list = [(float(d2h_in[t]), s[t], names[t]) for t in off]
        fetches = [(t, dev_reads.get(t, 0), float(h2d_in[t])) for t in off]
        fetches += [(t, i, x) for t in sorted(refetch) for i, x in refetch[t]]
        h2d_list = [(x, s[t], names[t]) for t, _, x in fetches]
        de, he = copy_ends(d2h_list, h2d_list,
                           (float(link.d2h_bytes_per_s), float(link.h2d_bytes_per_s)),
                           float(link.duplex_factor), float(link.copy_latency_s))
        self.d2h_end = dict(zip(off, de, strict=True))
        self.fetch_end = {(t, i): e for (t, i, _), e in zip(fetches, he, strict=True)}
        self.h2d_end = {t: self.fetch_end[(t, dev_reads.get(t, 0))] for t in off}
        # per offloaded tensor: (first reader index, start) of each fetch, and the
        # readers' index ranges they serve
        self.spans: dict[int, list[tuple[int, int, float]]] = {}
        for t in off:
            fs = [(dev_reads.get(t, 0), float(h2d_in[t]))] + list(refetch.get(t, ()))
            nd = self.tl.need[t]
            self.spans[t] = [(i, fs[j + 1][0] if j + 1 < len(fs) else len(nd), x)
                             for j, (i, x) in enumerate(fs)]

    def check_copy_times(self) -> None:
        """A D2H after its tensor is final; an H2D after its D2H and after the forward
        pass; a re-fetch after its eviction; every reader after its fetch ends."""
        names, ends, starts, task = self.names, self.ends, self.starts, self.task
        d2h_in, h2d_in, d2h_end, t_f = self.d2h_in, self.h2d_in, self.d2h_end, self.t_f
        ready = self.inst.saved_ready_idx.tolist()
        for t in self.off:
            if d2h_in[t] < ends[ready[t]] - TIME_TOL_S:
                raise ScheduleError(f"the D2H copy of '{names[t]}' starts at "
                                    f"{_ms(d2h_in[t])}, before '{task(ready[t])}' makes it "
                                    f"final ({_ms(ends[ready[t]])})")
            if h2d_in[t] < d2h_end[t] - TIME_TOL_S:
                raise ScheduleError(f"the H2D copy of '{names[t]}' starts at "
                                    f"{_ms(h2d_in[t])}, before its D2H ends "
                                    f"({_ms(d2h_end[t])})")
            if h2d_in[t] < t_f - TIME_TOL_S:
                raise ScheduleError(f"the H2D copy of '{names[t]}' starts at "
                                    f"{_ms(h2d_in[t])}, before the forward pass ends "
                                    f"({_ms(t_f)})")
            nd = self.tl.need[t]
            for i, j, x in self.spans[t]:
                if i > 0 and x < ends[nd[i - 1]] - TIME_TOL_S:
                    raise ScheduleError(f"the re-fetch of '{names[t]}' starts at {_ms(x)}, "
                                        f"before its eviction after '{task(nd[i - 1])}' "
                                        f"({_ms(ends[nd[i - 1]])})")
                for k in nd[i:j]:
                    if starts[k] < self.fetch_end[(t, i)] - TIME_TOL_S:
                        raise ScheduleError(f"task '{task(k)}' reads '{names[t]}' at "
                                            f"{_ms(starts[k])}, before its H2D copy ends "
                                            f"({_ms(self.fetch_end[(t, i)])})")

    def device_peak(self, M: int) -> int:
        """The largest device memory in use (bytes), at most `M`."""
        tl, st, dec, s, names = self.tl, self.st, self.dec, self.s, self.names
        starts, ends, task = self.starts, self.ends, self.task
        # Memory events: (time, order, delta, what); frees (order 0) before allocations
        # (1) at one instant, a free within TIME_TOL_S after an allocation counts as
        # before it.
        ev: list[tuple[float, int, int, str]] = []
        for k in range(self.n):
            if tl.alloc[k]:
                ev.append((starts[k], 1, tl.alloc[k], f"task '{task(k)}' starts"))
            if tl.free[k]:
                ev.append((ends[k] - TIME_TOL_S, 0, -tl.free[k], f"task '{task(k)}' ends"))
        for k in range(st.n_fwd):
            for t in tl.fwd_rel[k]:
                if dec[t] == RECOMP:
                    ev.append((ends[k] - TIME_TOL_S, 0, -s[t], f"'{names[t]}' dropped"))
        for t in self.off:
            i0 = self.dev_reads.get(t, 0)
            kept = ends[tl.need[t][i0 - 1]] if i0 else 0.0
            ev.append((max(self.d2h_end[t], ends[st.fwd_release[t]], kept) - TIME_TOL_S, 0,
                       -s[t], f"'{names[t]}' offloaded"))
            for _i, j, x in self.spans[t]:
                ev.append((x, 1, s[t], f"H2D of '{names[t]}' starts"))
                if j < len(tl.need[t]):   # evicted when the last reader it serves ends
                    ev.append((ends[tl.need[t][j - 1]] - TIME_TOL_S, 0, -s[t],
                               f"'{names[t]}' evicted"))
        for k in range(self.n):
            for t in tl.release[k]:
                ev.append((ends[k] - TIME_TOL_S, 0, -s[t], f"'{names[t]}' released"))
        ev.sort(key=lambda e: (e[0], e[1]))
        used = peak = 0
        for when, _, delta, what in ev:
            used += delta
            if used > M:
                raise ScheduleError(f"device memory {used} B > M = {M} B at "
                                    f"{_ms(max(0.0, when))} ({what})")
            peak = max(peak, used)
        return peak

    def check_host_memory(self) -> None:
        """Host memory within the instance's limit: each offloaded tensor held from its
        D2H start to its last reader (or its D2H end, if later)."""
        inst, off, s, ends = self.inst, self.off, self.s, self.ends
        if inst.host_memory_bytes is None or not off:
            return
        last_reader = {t: ends[self.tl.need[t][-1]] for t in off}
        hev = sorted([(self.d2h_in[t], 1, s[t], t) for t in off]
                     + [(max(last_reader[t], self.d2h_end[t]) - TIME_TOL_S, 0, -s[t], t)
                        for t in off])
        host = 0
        for when, _, delta, t in hev:
            host += delta
            if host > inst.host_memory_bytes:
                raise ScheduleError(f"host memory {host} B > host_memory_bytes = "
                                    f"{inst.host_memory_bytes} B at {_ms(when)} (the D2H "
                                    f"copy of '{self.names[t]}' starts)")


def runtime_schedule(instance: Instance, plan: Plan, budget_bytes: int) -> Schedule | None:
    """The schedule the barrier-free runtime ran, read from the evaluator's trace: each
    swap offloaded and fetched (evictions as re-fetches; a fetch evicted before any read
    is left out, which only frees memory and link time earlier) or resident (a lagging
    offload; its D2H is left out; or read from its device copy first, then evicted and
    fetched). None if the run is infeasible.

    Used as a candidate and a hint by :func:`slackopt.experiments.best_schedule.best_schedule`; its
    replay by :func:`check_schedule` reproduces the evaluator's step time.
    """
    from slackopt.simulate import simulate

    inst, plan = _lowered(instance, plan)
    if plan.policy != "barrier_free":
        plan = Plan(plan.decisions, inst.saved_names, policy="barrier_free")
    ev = simulate(inst, plan, int(budget_bytes), trace=True)
    if not ev.feasible:
        return None
    tl = TaskList(inst, plan.decisions)
    idx = {nm: i for i, nm in enumerate(inst.saved_names)}
    comp = [e["start_s"] for e in ev.trace if e["lane"] == "compute"]
    d2h: dict[int, float] = {}
    h2d: dict[int, list[tuple[float, float]]] = {}
    for e in ev.trace:
        if e["lane"] == "d2h":
            d2h[idx[e["name"]]] = e["start_s"]
        elif e["lane"] == "h2d":
            h2d.setdefault(idx[e["name"]], []).append((e["start_s"], e["end_s"]))
    s = np.asarray(inst.s)
    first, refetch, dev_reads = {}, {}, {}
    for t, fl in h2d.items():
        if s[t] == 0 or t not in d2h:
            continue
        nd = tl.need[t]
        serve = []      # (first reader index served, start) per fetch that serves one
        for j, (x, end) in enumerate(sorted(fl)):
            nxt = sorted(fl)[j + 1][0] if j + 1 < len(fl) else float("inf")
            i = next((i for i, k in enumerate(nd) if end <= comp[k] < nxt), None)
            if i is not None and (not serve or i > serve[-1][0]):
                serve.append((i, x))
        if not serve:
            continue                 # read from its device copy only: resident
        first[t] = serve[0][1]
        if serve[0][0]:
            dev_reads[t] = serve[0][0]
        if len(serve) > 1:
            refetch[t] = tuple(serve[1:])
    # a lagging tensor (D2H, no H2D) is resident; its D2H is left out
    d2h = {t: v for t, v in d2h.items() if t in first}
    return Schedule(tuple(comp), d2h, first, refetch, dev_reads)
