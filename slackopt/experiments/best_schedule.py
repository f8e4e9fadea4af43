"""A fast schedule of a plan's decisions, found with CP-SAT: an upper bound on the best.

The runtime (:mod:`slackopt.simulate`) schedules a plan's decisions by fixed rules; the
class of all schedules that obey the physical rules only is defined in
:mod:`slackopt.experiments.schedule`. :func:`best_schedule` searches that class with OR-Tools CP-SAT
and returns an explicit schedule whose makespan S is an **upper bound** on the fastest
schedule of the decisions, by construction: every schedule it returns has been replayed
by :func:`slackopt.experiments.schedule.check_schedule`, which checks every rule in exact (float)
arithmetic, and S is the checker's makespan, not the model's.

The CP-SAT model (integer nanoseconds) is a *restriction* of the class, so that each of its
solutions is a feasible schedule:

- task k starts at ``ts_k`` and ends at ``ts_k + ceil(tau_k)`` (durations rounded up to
  whole nanoseconds; the true task ends no later);
- per swapped tensor (size > 0), a Boolean *offloaded* (else resident); an offloaded
  tensor has an optional D2H and an optional H2D interval, each engine a no-overlap
  constraint; the D2H starts after the task that makes the tensor final ends, the H2D
  after the D2H ends and after the forward pass ends, the first backward reader (op or
  rebuild) after the H2D ends;
- copy durations are costed conservatively, rounded up: ``latency + s / (duplex W)``, W
  the bandwidth of the copy's direction (the longest a copy can last), except a D2H whose
  (model) end is at or before the end of the forward pass, which no H2D can overlap,
  costed ``latency + s / W``, and an H2D that starts after every D2H has ended, costed
  the same. The true copy ends no later;
- memory: a cumulative constraint (capacity M) over memory blocks: the non-saved bytes
  while each task runs and in the gap after it (levels known from the task list), and
  per saved tensor its resident intervals by the rules of :mod:`slackopt.experiments.schedule` (a
  swapped tensor freed at a time >= both its D2H end and its last forward reader's
  end); host pinned memory the same way when the instance sets a limit. (A reservoir
  constraint over the same events found no solution in seconds even at 1.5 P.)

Because true ends are never later than the model's, every dependency holds and device
memory at every instant is at most the model's level, so each solution is feasible
(the checker confirms it). The model has evictions (an optional re-fetch before each later
reader, the buffer freed when the reader before it ends) but no device read of a lagging
offload (each swap is offloaded or resident): a restriction again. The
runtime's own schedule (:func:`slackopt.experiments.schedule.runtime_schedule`; in the
class whenever
the runtime runs the plan, its evictions as re-fetches) is a hint for CP-SAT and a
candidate, so the result is never slower than the runtime.

"optimal" in CP-SAT's status means optimal for this restricted model only, not for the
class; :mod:`slackopt.experiments.runtime_gap` brackets the best schedule with a lower bound.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from slackopt.experiments.schedule import (
    Schedule,
    ScheduleCheck,
    ScheduleError,
    _lowered,
    check_schedule,
    runtime_schedule,
)
from slackopt.instance import Instance
from slackopt.interruptible import cpsat_sigint_off, interruptible
from slackopt.plan import RECOMP, SWAP, Plan
from slackopt.simulate._tasks import TaskList, _static
from slackopt.simulate.rules import copy_time

TICK_S = 1e-9
"""The model's time unit (s): CP-SAT schedules in whole nanoseconds."""


@dataclass(frozen=True)
class BestSchedule:
    """The result of :func:`best_schedule`.

    Attributes:
        schedule: the fastest verified schedule found (None if none was found: CP-SAT
            found no solution in time and the runtime fails the plan).
        check: its :class:`~slackopt.experiments.schedule.ScheduleCheck` (makespan, peak), or None.
        upper_bound_s: ``check.makespan_s`` (s): the fastest schedule of the decisions
            takes at most this long; None without a schedule.
        source: "cp-sat" or "runtime" (the runtime's own schedule was not beaten).
        cpsat_status: CP-SAT's status name ("OPTIMAL" is optimal for the restricted,
            conservatively costed model only), "NOT_RUN" when the plan has no task.
        runtime_schedule_s: the checker's makespan of the runtime's schedule (equal to
            the evaluator's step time), None if the runtime fails the plan.
        solve_s: wall-clock seconds spent in CP-SAT.
        model_lower_bound_s: CP-SAT's bound on its restricted model (s); not a bound on
            the class (the model is a restriction), reported for diagnosis only.
    """

    schedule: Schedule | None
    check: ScheduleCheck | None
    upper_bound_s: float | None
    source: str | None
    cpsat_status: str
    runtime_schedule_s: float | None
    solve_s: float
    model_lower_bound_s: float | None


def _ticks(x_s: float) -> int:
    return int(math.ceil(x_s / TICK_S - 1e-9)) if x_s > 0 else 0


def best_schedule(instance: Instance, plan: Plan, budget_bytes: int, *,
                  time_limit_s: float = 10.0, work_limit: float | None = None,
                  seed: int = 0, workers: int = 8, interleave: bool = True
                  ) -> BestSchedule:
    """Search a fast schedule of `plan`'s decisions at budget M with CP-SAT.

    Args:
        instance: the instance (views are lowered, as in :func:`slackopt.simulate`).
        plan: the plan whose keep/swap/recomp decisions are scheduled; its runtime
            policy only matters for the hint (the barrier-free runtime's schedule).
        budget_bytes: M (bytes).
        time_limit_s: wall-clock limit of the CP-SAT search (s, > 0).
        work_limit: CP-SAT's deterministic time limit (its work units), for results that
            do not depend on machine speed; None: the wall-clock limit only.
        seed: CP-SAT's random seed.
        workers: CP-SAT's workers (its portfolio of search strategies; one worker alone
            finds a schedule far later: docs/runtime-gap.md, "CP-SAT's workers").
        interleave: run the workers interleaved on one thread (CP-SAT's
            ``interleave_search``): deterministic for a given seed and work_limit, and
            one core only (the machine is shared). False: one thread per worker.

    Returns:
        A :class:`BestSchedule`; its schedule passed :func:`check_schedule`.

    Raises:
        PlanError: the plan does not fit the instance.
        ValueError: time_limit_s <= 0 or workers < 1.
        RuntimeError: CP-SAT returned a schedule the checker rejects (a bug in the model;
            the checker's message is attached).

    Source: docs/model.md; the class of schedules in :mod:`slackopt.experiments.schedule`.
    """
    if not time_limit_s > 0:
        raise ValueError(f"time_limit_s must be > 0, got {time_limit_s}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    from ortools.sat.python import cp_model

    inst, plan = _lowered(instance, plan)
    M = int(budget_bytes)
    # the runtime's schedule: a candidate and a hint
    rt = runtime_schedule(inst, plan, M)
    rt_check = None
    if rt is not None:
        try:
            rt_check = check_schedule(inst, plan, M, rt)
        except ScheduleError:
            rt, rt_check = None, None
    best: tuple[Schedule, ScheduleCheck, str] | None = (
        (rt, rt_check, "runtime") if rt is not None and rt_check is not None else None)
    b = _Restriction(inst, plan, M, cp_model.CpModel())
    if b.n == 0:
        return _result(best, "NOT_RUN", rt_check, 0.0, None)
    b.tasks()
    b.copies()
    b.device_memory()
    b.host_memory()
    b.m.Minimize(b.te[b.n - 1])
    if rt is not None:
        b.hint(rt)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit_s)
    if work_limit is not None:
        solver.parameters.max_deterministic_time = float(work_limit)
    solver.parameters.num_workers = int(workers)
    if interleave:
        solver.parameters.interleave_search = True
    solver.parameters.random_seed = int(seed)
    t0 = time.perf_counter()
    cpsat_sigint_off(solver)
    status = interruptible(lambda: solver.Solve(b.m), solver.StopSearch)
    secs = time.perf_counter() - t0
    name = solver.StatusName(status)
    model_lb = None
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        model_lb = solver.BestObjectiveBound() * TICK_S
        sched = b.schedule(solver)
        try:
            chk = check_schedule(inst, plan, M, sched)
        except ScheduleError as e:  # pragma: no cover - a model bug
            raise RuntimeError(f"internal: the CP-SAT schedule fails the checker: {e}") from e
        if best is None or chk.makespan_s < best[1].makespan_s:
            best = (sched, chk, "cp-sat")
    return _result(best, name, rt_check, secs, model_lb)


class _Restriction:
    """The CP-SAT model of the module docstring, built in sections: the state they share
    (the task list, the swaps, their copy durations in ticks, the horizon) and the
    variables added so far. The sections add variables and constraints in the order
    :func:`best_schedule` calls them (tasks, copies, device memory, host memory), which
    fixes the model and so CP-SAT's deterministic search."""

    def __init__(self, inst: Instance, plan: Plan, M: int, m) -> None:
        """The data of `plan` on `inst` (lowered) at budget `M` (bytes); `m`: an empty
        ``cp_model.CpModel``."""
        self.inst, self.M, self.m = inst, M, m
        self.st = st = _static(inst)
        self.tl = tl = TaskList(inst, plan.decisions)
        self.dec = plan.decisions.tolist()
        self.n, self.nf = len(tl.dur), st.n_fwd
        self.s = s = st.s
        link = inst.link
        Wd, Wh = float(link.d2h_bytes_per_s), float(link.h2d_bytes_per_s)
        duplex, lat = float(link.duplex_factor), float(link.copy_latency_s)
        self.swaps = swaps = [t for t in range(len(self.dec))
                              if self.dec[t] == SWAP and s[t] > 0 and tl.need[t]]
        self.dk = dk = [_ticks(d) for d in tl.dur]
        # per direction (0: D2H, 1: H2D), the copy at full rate and at the duplex rate
        self.w_fast = [{t: _ticks(copy_time(s[t], W, lat)) for t in swaps} for W in (Wd, Wh)]
        self.w_slow = w_slow = [{t: _ticks(copy_time(s[t], W, lat, duplex)) for t in swaps}
                                for W in (Wd, Wh)]
        self.H = (sum(dk) + sum(w_slow[0].values()) + sum(w_slow[1].values())
                  + 2 * len(swaps) + self.n + 1)
        self.off: dict = {}
        self.ds: dict = {}
        self.hs: dict = {}
        self.rel: dict = {}
        self.evs: dict = {}

    def tasks(self) -> None:
        """Task k on [ts_k, ts_k + ceil(tau_k)], in task order; t_f the forward pass's end."""
        m, n, H = self.m, self.n, self.H
        self.ts = ts = [m.NewIntVar(0, H, f"ts{k}") for k in range(n)]
        self.te = te = [ts[k] + self.dk[k] for k in range(n)]
        for k in range(1, n):
            m.Add(ts[k] >= te[k - 1])
        self.t_f = te[self.nf - 1] if self.nf > 0 else 0

    def copies(self) -> None:
        """Per swap: offloaded or resident; the D2H and H2D intervals of an offloaded swap
        (full rate only where no copy of the other direction can overlap), its optional
        re-fetches before later readers, and one no-overlap per engine."""
        m, H, tl, ts, te, t_f = self.m, self.H, self.tl, self.ts, self.te, self.t_f
        w_fast, w_slow, st = self.w_fast, self.w_slow, self.st
        off, ds, hs, rel, evs = self.off, self.ds, self.hs, self.rel, self.evs
        d2h_iv, h2d_iv = [], []
        de, he = {}, {}
        d_last = m.NewIntVar(0, H, "d2h_last_end")
        ready = self.inst.saved_ready_idx.tolist()
        for t in self.swaps:
            o = off[t] = m.NewBoolVar(f"off{t}")
            ds[t] = m.NewIntVar(0, H, f"ds{t}")
            de[t] = m.NewIntVar(0, H, f"de{t}")
            hs[t] = m.NewIntVar(0, H, f"hs{t}")
            he[t] = m.NewIntVar(0, H, f"he{t}")
            rel[t] = m.NewIntVar(0, H, f"rel{t}")
            dd = m.NewIntVar(w_fast[0][t], w_slow[0][t], f"dd{t}")
            hd = m.NewIntVar(w_fast[1][t], w_slow[1][t], f"hd{t}")
            d2h_iv.append(m.NewOptionalIntervalVar(ds[t], dd, de[t], o, f"d2h{t}"))
            h2d_iv.append(m.NewOptionalIntervalVar(hs[t], hd, he[t], o, f"h2d{t}"))
            m.Add(ds[t] >= te[ready[t]]).OnlyEnforceIf(o)
            m.Add(hs[t] >= de[t]).OnlyEnforceIf(o)
            m.Add(hs[t] >= t_f).OnlyEnforceIf(o)
            m.Add(ts[tl.need[t][0]] >= he[t]).OnlyEnforceIf(o)
            m.Add(rel[t] >= de[t]).OnlyEnforceIf(o)
            m.Add(rel[t] >= te[st.fwd_release[t]]).OnlyEnforceIf(o)
            m.Add(d_last >= de[t]).OnlyEnforceIf(o)
            # full rate only where no copy of the other direction can overlap
            early = m.NewBoolVar(f"early{t}")
            m.Add(de[t] <= t_f).OnlyEnforceIf(early)
            m.Add(dd == w_slow[0][t]).OnlyEnforceIf(early.Not())
            m.Add(dd == w_fast[0][t]).OnlyEnforceIf(early)
            late = m.NewBoolVar(f"late{t}")
            m.Add(hs[t] >= d_last).OnlyEnforceIf(late)
            m.Add(hd == w_slow[1][t]).OnlyEnforceIf(late.Not())
            m.Add(hd == w_fast[1][t]).OnlyEnforceIf(late)
            # evictions: after reader i - 1 the buffer may be freed and fetched again for i
            nd = tl.need[t]
            evs[t] = {}
            for i in range(1, len(nd)):
                e = m.NewBoolVar(f"ev{t}_{i}")
                m.AddImplication(e, o)
                x, y = m.NewIntVar(0, H, f"rs{t}_{i}"), m.NewIntVar(0, H, f"re{t}_{i}")
                rd = m.NewIntVar(w_fast[1][t], w_slow[1][t], f"rd{t}_{i}")
                h2d_iv.append(m.NewOptionalIntervalVar(x, rd, y, e, f"refetch{t}_{i}"))
                m.Add(x >= te[nd[i - 1]]).OnlyEnforceIf(e)
                m.Add(ts[nd[i]] >= y).OnlyEnforceIf(e)
                lt = m.NewBoolVar(f"late{t}_{i}")
                m.Add(x >= d_last).OnlyEnforceIf(lt)
                m.Add(rd == w_slow[1][t]).OnlyEnforceIf(lt.Not())
                m.Add(rd == w_fast[1][t]).OnlyEnforceIf(lt)
                evs[t][i] = (e, x)
        if d2h_iv:
            m.AddNoOverlap(d2h_iv)
            m.AddNoOverlap(h2d_iv)

    def device_memory(self) -> None:
        """Device memory: a cumulative (capacity M) over memory blocks (half-open
        intervals, so a block freed at t and one allocated at t do not overlap: frees
        first, as in the checker)."""
        m, H, n, nf, tl, st, s = self.m, self.H, self.n, self.nf, self.tl, self.st, self.s
        ts, te, dec, off, rel, evs = self.ts, self.te, self.dec, self.off, self.rel, self.evs
        outs_bytes = [0] * n
        for k in range(n):
            if tl.task_op[k] >= 0 and tl.task_op[k] < nf:
                outs_bytes[k] = sum(s[t] for t in st.outs[tl.task_op[k]])
            elif tl.task_op[k] < 0:
                outs_bytes[k] = s[tl.task_t[k]]
        ivs, dem = [], []

        def block(start, end, size: int, name: str, active=None) -> None:
            if size <= 0:
                return
            ln = m.NewIntVar(0, H, f"len_{name}")
            if active is None:
                ivs.append(m.NewIntervalVar(start, ln, end, name))
            else:
                ivs.append(m.NewOptionalIntervalVar(start, ln, end, active, name))
            dem.append(int(size))

        # the non-saved bytes (temporaries, gradients, workspaces, recipe transients): known
        # levels while task k runs and in the gap after it
        level = 0
        for k in range(n):
            level += tl.alloc[k] - outs_bytes[k]
            block(ts[k], te[k], max(0, level), f"run{k}")
            level -= tl.free[k]
            if k + 1 < n:
                block(te[k], ts[k + 1], max(0, level), f"gap{k}")
        rebuild_of = {tl.task_t[k]: k for k in range(n) if tl.task_op[k] < 0}
        last_task = {}
        for k in range(n):
            for t in tl.release[k]:
                last_task[t] = k
        swapset = set(self.swaps)
        for t in range(len(dec)):
            if t not in last_task or s[t] == 0:
                continue
            born, end = ts[st.prod[t]], te[last_task[t]]
            if dec[t] == RECOMP:
                block(born, te[st.fwd_release[t]], s[t], f"fwd{t}")
                block(ts[rebuild_of[t]], end, s[t], f"reb{t}")
            elif t in swapset:
                block(born, rel[t], s[t], f"out{t}", off[t])
                block(born, end, s[t], f"res{t}", off[t].Not())
                # fetched: from the H2D to the first reader's end, then per later reader
                # either kept (stay) or evicted and fetched again
                nd = tl.need[t]
                block(self.hs[t], te[nd[0]], s[t], f"in{t}", off[t])
                for i in range(1, len(nd)):
                    e, x = evs[t][i]
                    stay = m.NewBoolVar(f"stay{t}_{i}")
                    m.Add(stay + e == off[t])
                    block(te[nd[i - 1]], te[nd[i]], s[t], f"stay{t}_{i}", stay)
                    block(x, te[nd[i]], s[t], f"back{t}_{i}", e)
            else:
                block(born, end, s[t], f"keep{t}")
        if ivs:
            m.AddCumulative(ivs, dem, self.M)

    def host_memory(self) -> None:
        """Host pinned memory, when the instance sets a limit: an offloaded swap holds its
        bytes from its D2H's start to its last reader's end."""
        m, swaps, s, host = self.m, self.swaps, self.s, self.inst.host_memory_bytes
        if host is None or not swaps:
            return
        hiv = [m.NewOptionalIntervalVar(self.ds[t], m.NewIntVar(0, self.H, f"hl{t}"),
                                        self.te[self.tl.need[t][-1]], self.off[t], f"host{t}")
               for t in swaps]
        m.AddCumulative(hiv, [int(s[t]) for t in swaps], int(host))

    def hint(self, rt: Schedule) -> None:
        """The runtime's schedule `rt` as CP-SAT's hint."""
        m, evs = self.m, self.evs
        for k in range(self.n):
            m.AddHint(self.ts[k], int(round(rt.task_start_s[k] / TICK_S)))
        for t in self.swaps:
            m.AddHint(self.off[t], t in rt.d2h_start_s)
            if t in rt.d2h_start_s:
                m.AddHint(self.ds[t], int(round(rt.d2h_start_s[t] / TICK_S)))
                m.AddHint(self.hs[t], int(round(rt.h2d_start_s[t] / TICK_S)))
            again = dict(rt.refetch_s.get(t, ()))
            for i, (e, x) in evs[t].items():
                m.AddHint(e, i in again)
                if i in again:
                    m.AddHint(x, int(round(again[i] / TICK_S)))

    def schedule(self, solver) -> Schedule:
        """The schedule of `solver`'s solution (seconds)."""
        v, swaps, evs, off = solver.Value, self.swaps, self.evs, self.off
        return Schedule(
            tuple(v(self.ts[k]) * TICK_S for k in range(self.n)),
            {t: v(self.ds[t]) * TICK_S for t in swaps if v(off[t])},
            {t: v(self.hs[t]) * TICK_S for t in swaps if v(off[t])},
            {t: tuple((i, v(x) * TICK_S) for i, (e, x) in sorted(evs[t].items()) if v(e))
             for t in swaps if any(v(e) for e, _ in evs[t].values())})


def _result(best, status: str, rt_check: ScheduleCheck | None, secs: float,
            model_lb: float | None) -> BestSchedule:
    return BestSchedule(
        schedule=best[0] if best else None, check=best[1] if best else None,
        upper_bound_s=best[1].makespan_s if best else None,
        source=best[2] if best else None, cpsat_status=status,
        runtime_schedule_s=rt_check.makespan_s if rt_check is not None else None,
        solve_s=secs, model_lower_bound_s=model_lb)
