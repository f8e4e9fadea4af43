"""SlackSwap-LS: SlackSwap's plan improved by a local search, the evaluator as judge, in a
second.

The search (docs/speed.md, "The fast tier", has the figures on the benchmark suite):

1. **Starts.** SlackSwap's plan (:class:`~slackopt.solvers.slackswap.SlackSwap`, its
   validation and repair rounds, sec. 3.4 of the SlackSwap paper), and two plans of its
   Algorithm 1 (:func:`slackopt.solvers.slackswap.plan`) with the offload guard g = 0,
   the second with the *latency-bound* tensors kept out of the swap set (a tensor whose
   D2H copy lasts at most twice the copy latency: the link time it takes is mostly the
   fixed cost, :func:`slackopt.simulate.rules.copy_time`); with ``run.start``
   (``slackopt.solve(start_plan=...)``) that plan too. The fastest one that runs is the
   incumbent.
2. **Repair** (no start runs): the evaluator names the task that cannot allocate; the
   tensors it concerns (the rebuild chain the task belongs to, the rebuilt tensors still
   held, the kept tensors resident there) are tried smallest first, a recomputed one
   kept or swapped, a kept one recomputed or swapped; the first change that moves the
   failure to a later op (or leaves fewer bytes missing there) is taken, until the plan
   runs.
3. **Local search** (first improvement), until no move helps or the work is spent; each
   move is scored by the evaluator and kept only if the step gets shorter:
   latency-bound swaps back to keep (the longest prefix, smallest first, that runs no
   slower: they free link time); *role moves*: one decision for every tensor of a role
   (the same producer kind, size and rebuild time at the same place in each layer) in
   all layers, the first half or the second half; recomputed tensors, dearest rebuild
   first, to swap or keep, else kept with cheaper rebuilds taking the bytes the
   evaluator says are missing (an ejection chain); tensors whose prefetch stalls to keep
   or recompute; exchanges between two roles and between neighbouring tensors; single
   swaps to keep and keeps to swap; on instances of at most :data:`SMALL` tensors every
   joint change of two tensors, then kicks (iterated local search).
4. **Tidy** (at a local optimum only): swaps that buy nothing back to keep, largest
   first, each kept where the step stays the same (less link traffic and host memory).

Evaluations are incremental (:class:`slackopt.simulate.incremental.Incremental`:
resumed from a snapshot of the incumbent's run before the first changed producer, equal
bit for bit to a full run) and cut off as soon as the step cannot beat the incumbent; a
move whose recompute time alone reaches the incumbent's step (T >= T* + sum of c over
recomputed tensors, docs/model.md) is not simulated at all.

Limits and determinism: the primary limit is ``max_work``, counted in simulated tasks
(:func:`_Search.work`), so the plan depends only on the instance, the budget, the seed
(the kicks' draws) and ``max_work``; ``budget_s`` (1 s) and the run's time limit are a
wall-clock safety net that ends the search early on a slow or loaded machine, and only
then does the plan depend on the machine. The result is never slower than any start
(the incumbent only changes to a faster plan), SlackSwap's plan included.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from slackopt.bisection import smallest_true
from slackopt.instance import Instance
from slackopt.plan import KEEP, RECOMP, SWAP, Plan
from slackopt.simulate.incremental import CUTOFF, Incremental
from slackopt.simulate.incremental import Run as SimRun
from slackopt.simulate.rules import copy_time
from slackopt.solverbase import MIN_BUDGET_REL_TOL, BaseSolver, Outcome, Param, Run
from slackopt.solvers import slackswap

INF = math.inf
MAX_WORK = 6_000_000
"""Default work limit (:func:`_Search.work` units; about 0.3 s of search on the 2-core
development machine, 48 ns a unit)."""
RUN_WORK = 550
"""Work charged per evaluator call (its fixed cost, in simulated-task units)."""
LIST_SHARE = 4
"""A run also costs 1/LIST_SHARE unit per task of its plan's task list (building it)."""
START_SHARE = 0.25
"""SlackSwap's rounds get at most this share of the wall-clock budget."""
REPAIR_GRACE = 0.4
"""When no start runs, the repair may go on this share of the budget past it: a plan
that runs is worth more than the budget's last tenths (the local search does not)."""
MIN_BUDGET_SHARE = 0.5
"""The minimum-budget search of an infeasible answer ends this share of the wall-clock
budget past it."""
SMALL = 64
"""Instances with at most this many saved tensors also get the joint changes of two
tensors and the kicks."""
KICK_SIZES = (2, 4)
"""A kick changes between this many tensors (both included)."""
KICK_STALE = 20
"""The kicks end after this many in a row that found no faster plan."""
REL = 1e-9
"""Relative slack of step comparisons that must not reject an equal plan (float sums of
the same durations in another order)."""


class _Search:
    """The incumbent, the incremental evaluator and the neighbourhoods of one solve.

    Args:
        inst: the (lowered) instance.
        M: the budget (bytes).
        max_work: the work limit (:meth:`work` units).
        deadline: perf_counter time at which the search stops whatever the work.
        seed: the seed of the kicks' draws.
    """

    def __init__(self, inst: Instance, M: int, max_work: int, deadline: float,
                 seed: int = 0) -> None:
        self.inst, self.M = inst, int(M)
        self.inc = Incremental(inst, M)
        self.s = np.asarray(inst.s, dtype=np.int64)
        self.c = np.asarray(inst.c, dtype=np.float64)
        self.ok_rec = np.isfinite(self.c)
        self.c0 = np.where(self.ok_rec, self.c, 0.0)
        self.T_star = float(inst.ideal_time_s)
        self.prod = np.asarray(inst.saved_prod_idx, dtype=np.int64)
        self.last_fwd = np.maximum(np.asarray(inst.saved_last_fwd_idx, dtype=np.int64),
                                   self.prod)
        self.first_bwd = np.asarray(inst.saved_first_bwd_idx, dtype=np.int64)
        self.last_bwd = np.asarray(inst.saved_last_bwd_idx, dtype=np.int64)
        self.layers = np.asarray(inst.saved_layers, dtype=np.int64)
        self.n_ops = int(inst.n_ops)
        lk = inst.link
        w, lat = float(lk.d2h_bytes_per_s), float(lk.copy_latency_s)
        self.latency_bound = copy_time(self.s.astype(np.float64), w, lat) <= \
            2 * copy_time(0.0, w, lat)
        self.max_work = int(max_work)
        self.deadline = deadline
        self.rng = np.random.default_rng(seed)
        self.cur = np.zeros(inst.n_saved, dtype=np.int8)
        self.run: SimRun | None = None
        self.T = INF
        self.rc = 0.0
        self.accepted: dict[str, int] = {}
        self.pruned = 0
        self.repair_steps = 0
        self.kicks = 0
        self.stopped_by = ""
        self.roles = _roles(inst, self.s, self.c, self.prod, self.layers)

    # ---------------------------------------------------------------- limits
    def work(self) -> int:
        """Work done: tasks simulated, plus 1/:data:`LIST_SHARE` of each run's task list
        and :data:`RUN_WORK` per run (a regression of the search's CPU time over the
        suite: 48 ns a task, 12 ns a listed task, 26 us a call)."""
        inc = self.inc
        return inc.tasks + inc.listed // LIST_SHARE + RUN_WORK * inc.runs

    def spent(self) -> bool:
        """True once the work or the wall-clock deadline is used up (``stopped_by``)."""
        if self.work() >= self.max_work:
            self.stopped_by = "work"
            return True
        if time.perf_counter() >= self.deadline:
            self.stopped_by = "time"
            return True
        return False

    # ---------------------------------------------------------------- incumbent
    def set_base(self, dec: np.ndarray, changed: Any = None) -> None:
        """Make `dec` the incumbent (simulated, with snapshots)."""
        run = self.inc.rebase(dec, changed)
        self.cur = self.inc.base  # type: ignore[assignment]
        self.run = run
        self.T = run.step_s if run.feasible else INF
        self.rc = float(self.c0[self.cur == RECOMP].sum())

    def trial(self, changes: list[tuple[int, int]], sideways: bool = False
              ) -> tuple[SimRun | None, np.ndarray, float, list[int]]:
        """The incumbent with `changes` ((tensor, decision) pairs) simulated, unless its
        recompute time alone rules it out (then the run is None). Returns the run, the
        decisions, their recompute sum and the tensors changed."""
        cur = self.cur
        nd = cur.copy()
        rc = self.rc
        ch: list[int] = []
        for t, d in changes:
            if nd[t] == d:
                continue
            if nd[t] == RECOMP:
                rc -= self.c0[t]
            if d == RECOMP:
                rc += self.c0[t]
            nd[t] = d
            ch.append(t)
        if not ch:
            return None, nd, rc, ch
        lb = self.T_star + rc  # T = T* + stalls + rebuilds, each recomp tensor rebuilt once
        if lb > self.T * (1 + REL) or (not sideways and lb >= self.T * (1 - 1e-12)):
            self.pruned += 1
            return None, nd, rc, ch
        run = self.inc.evaluate(nd, np.asarray(ch, dtype=np.int64), self.T * (1 + REL))
        return run, nd, rc, ch

    def try_move(self, changes: list[tuple[int, int]], kind: str,
                 sideways: bool = False) -> bool:
        """Apply `changes` if the plan gets faster (or, `sideways`, no slower)."""
        run, nd, _, ch = self.trial(changes, sideways)
        if run is None or not run.feasible:
            return False
        if run.step_s < self.T or (sideways and run.step_s <= self.T):
            self.set_base(nd, np.asarray(ch, dtype=np.int64))
            self.accepted[kind] = self.accepted.get(kind, 0) + 1
            return True
        return False

    def fail_op(self, run: SimRun) -> int:
        """The op at or after the task a failed run stopped at (n_ops if none)."""
        k, ops = run.fail_task, run.task_op
        while k < len(ops) and ops[k] < 0:
            k += 1
        return int(ops[k]) if k < len(ops) else self.n_ops

    # ---------------------------------------------------------------- neighbourhoods
    def keep_latency_bound(self) -> bool:
        """Latency-bound swaps back to keep, smallest first: the longest prefix that runs
        no slower (bisection on its length; a sideways move frees link time)."""
        sw = np.flatnonzero((self.cur == SWAP) & self.latency_bound)
        sw = sw[np.argsort(self.s[sw], kind="stable")]
        lo, hi = 0, int(sw.size)
        mid = hi
        improved = False
        while lo < hi and not self.spent():
            if self.try_move([(int(t), KEEP) for t in sw[lo:mid]], "keep_latency_bound",
                             sideways=True):
                improved = True
                lo = mid
            else:
                hi = mid - 1
            mid = (lo + hi + 1) // 2
        return improved

    def role_moves(self) -> bool:
        """One decision for every member of a role, in all its layers or in each half."""
        improved = False
        for g in self.roles:
            for d in (KEEP, SWAP, RECOMP):
                if d == RECOMP and not self.ok_rec[g].all():
                    continue
                m = len(g)
                for part in (g, g[: m // 2], g[m // 2:]):
                    if self.spent():
                        return improved
                    if self.try_move([(int(t), d) for t in part], "role"):
                        improved = True
        return improved

    def role_pairs(self) -> bool:
        """Exchanges between two roles: the recomputed members of A to swap (or keep)
        while B's members are recomputed, or A's to swap while B's swaps are kept."""
        improved = False
        for A in self.roles:
            ra = A[self.cur[A] == RECOMP]
            for B in self.roles:
                if ra.size == 0:
                    break
                if B is A:
                    continue
                for da, db in ((SWAP, RECOMP), (KEEP, RECOMP), (SWAP, KEEP)):
                    if db == RECOMP and not self.ok_rec[B].all():
                        continue
                    mb = B[self.cur[B] != RECOMP] if db == RECOMP else B[self.cur[B] == SWAP]
                    if mb.size == 0:
                        continue
                    if self.spent():
                        return improved
                    if self.try_move([(int(t), da) for t in ra] + [(int(u), db) for u in mb],
                                     "role_pair"):
                        improved = True
                        ra = A[self.cur[A] == RECOMP]
                        break
        return improved

    def partners(self, nd: np.ndarray, run: SimRun, exclude: set[int]) -> list[int]:
        """Tensors resident at a failed run's op that a rebuild would make absent there
        (not recomputed, rebuildable, last forward reader before it, first backward
        reader at or after it), cheapest rebuild first."""
        f = self.fail_op(run)
        mask = (nd != RECOMP) & self.ok_rec & (self.s > 0) & (self.last_fwd < f) & \
            (self.first_bwd >= f)
        mask[list(exclude)] = False
        cand = np.flatnonzero(mask)
        return cand[np.argsort(self.c[cand], kind="stable")].tolist()

    def eject(self, t: int, depth: int = 3) -> bool:
        """Recomputed t kept; while the plan cannot allocate, the cheapest rebuild of at
        least the missing bytes among the tensors resident there joins, as long as the
        rebuilds added cost less than t's (at most `depth` runs)."""
        changes = [(t, KEEP)]
        for _ in range(depth):
            if self.spent():
                return False
            run, nd, rc, ch = self.trial(changes)
            if run is None or run.code == CUTOFF:
                return False
            if run.feasible:
                if run.step_s < self.T:
                    self.set_base(nd, np.asarray(ch, dtype=np.int64))
                    self.accepted["exchange"] = self.accepted.get("exchange", 0) + 1
                    return True
                return False
            if run.short_bytes <= 0:
                return False
            room = self.T - self.T_star - rc
            pick = None
            for u in self.partners(nd, run, {x for x, _ in changes})[:64]:
                if self.c[u] >= room:
                    break
                if self.s[u] >= run.short_bytes:
                    pick = u
                    break
            if pick is None:
                return False
            changes = changes + [(pick, RECOMP)]
        return False

    def unrecompute(self) -> bool:
        """Recomputed tensors, dearest rebuild first, to swap, to keep, or kept with an
        ejection chain (:meth:`eject`)."""
        improved = False
        rec = np.flatnonzero(self.cur == RECOMP)
        for t in rec[np.argsort(-self.c[rec], kind="stable")].tolist():
            if self.spent():
                return improved
            if self.cur[t] != RECOMP:
                continue
            if self.try_move([(t, SWAP)], "unrecompute") or \
                    self.try_move([(t, KEEP)], "unrecompute") or self.eject(t):
                improved = True
        return improved

    def fix_stalls(self) -> bool:
        """Tensors whose prefetch kept the compute stream waiting, longest wait first, to
        keep or recompute."""
        improved = False
        st = self.run.h2d_stall_s if self.run is not None else np.zeros(0)
        order = np.flatnonzero(st > 0)
        for t in order[np.argsort(-st[order], kind="stable")].tolist():
            if self.spent():
                break
            for d in ((KEEP, RECOMP) if self.ok_rec[t] else (KEEP,)):
                if self.try_move([(t, d)], "stall"):
                    improved = True
                    break
        return improved

    def neighbour_pairs(self, window: int = 6, width: int = 3) -> bool:
        """Exchanges near each recomputed tensor t (dearest first, within `window` saved
        positions): t to swap or keep while one of the `width` cheapest rebuilds per byte
        takes its place, or t to swap while one of the `width` smallest swaps is kept."""
        improved = False
        n = len(self.s)
        rec = np.flatnonzero(self.cur == RECOMP)
        for t in rec[np.argsort(-self.c[rec], kind="stable")].tolist():
            if self.cur[t] != RECOMP:
                continue
            near = np.arange(max(0, t - window), min(n, t + window + 1))
            near = near[(near != t) & (self.s[near] > 0)]
            cu = near[(self.cur[near] != RECOMP) & self.ok_rec[near] &
                      (self.c[near] < self.c[t])]
            cu = cu[np.argsort(self.c[cu] / self.s[cu], kind="stable")][:width]
            su = near[self.cur[near] == SWAP]
            su = su[np.argsort(self.s[su], kind="stable")][:width]
            moves = [[(t, d), (int(u), RECOMP)] for u in cu for d in (SWAP, KEEP)]
            moves += [[(t, SWAP), (int(u), KEEP)] for u in su]
            for mv in moves:
                if self.spent():
                    return improved
                if self.try_move(mv, "neighbour_pair"):
                    improved = True
                    break
        return improved

    def single_flips(self, frm: int, to: int, ascending: bool) -> bool:
        """Every tensor with decision `frm` (with bytes) to `to`, by size."""
        improved = False
        idx = np.flatnonzero((self.cur == frm) & (self.s > 0))
        order = np.argsort(self.s[idx] if ascending else -self.s[idx], kind="stable")
        kind = f"{'KSR'[frm]}->{'KSR'[to]}"
        for t in idx[order].tolist():
            if self.spent():
                break
            if self.try_move([(t, to)], kind):
                improved = True
        return improved

    def joint_pairs(self) -> bool:
        """Every joint change of two tensors (instances of at most :data:`SMALL`)."""
        improved = False
        live = np.flatnonzero(self.s > 0).tolist()
        for i, t in enumerate(live):
            for u in live[i + 1:]:
                for dt in self.options(t):
                    for du in self.options(u):
                        if dt == self.cur[t] or du == self.cur[u]:
                            continue
                        if self.spent():
                            return improved
                        if self.try_move([(t, dt), (u, du)], "joint"):
                            improved = True
        return improved

    def options(self, t: int) -> tuple[int, ...]:
        """Tensor t's decisions: keep, swap, and recomp where it can be rebuilt."""
        return (KEEP, SWAP, RECOMP) if self.ok_rec[t] else (KEEP, SWAP)

    def descend(self) -> bool:
        """Rounds of every neighbourhood until one round improves nothing (True) or the
        work or time is spent (False)."""
        self.keep_latency_bound()
        small = len(self.s) <= SMALL
        while not self.spent():
            improved = False
            for nb in (self.role_moves, self.unrecompute, self.fix_stalls, self.role_pairs,
                       self.neighbour_pairs,
                       lambda: self.single_flips(SWAP, KEEP, ascending=True),
                       lambda: self.single_flips(KEEP, SWAP, ascending=False)):
                improved |= nb()
                if self.spent():
                    return False
            if not improved and small:
                improved = self.joint_pairs()
            if not improved:
                return True
        return False

    def search(self) -> None:
        """The local search from the incumbent (:meth:`descend`), then, on small
        instances, kicks: KICK_SIZES random tensors of the incumbent to another decision
        (the seed's draws), each followed by a descent from the kicked plan, until
        KICK_STALE kicks in a row find nothing faster; the incumbent is the fastest plan
        ever simulated."""
        if not self.descend():
            return
        self.stopped_by = "local_optimum"
        if len(self.s) > SMALL:
            self.tidy()
            return
        live = np.flatnonzero(self.s > 0)
        stale = 0
        while live.size and stale < KICK_STALE and not self.spent():
            best, T_best = self.cur.copy(), self.T
            kicked = best.copy()
            k = min(live.size, int(self.rng.integers(KICK_SIZES[0], KICK_SIZES[1] + 1)))
            for t in self.rng.choice(live, size=k, replace=False).tolist():
                kicked[t] = self.rng.choice([d for d in self.options(t) if d != kicked[t]])
            self.kicks += 1
            self.set_base(kicked)
            if self.T < INF:
                self.descend()
            if self.T < T_best:
                stale = 0
            else:
                stale += 1
                self.set_base(best)
        if self.stopped_by != "work" and self.stopped_by != "time":
            self.stopped_by = "local_optimum"
            self.tidy()

    def tidy(self) -> None:
        """At a local optimum, swaps that buy nothing back to keep, largest first (a
        sideways move: the step stays, the link and the host hold less)."""
        sw = np.flatnonzero((self.cur == SWAP) & (self.s > 0))
        for t in sw[np.argsort(-self.s[sw], kind="stable")].tolist():
            if self.spent():
                break
            self.try_move([(t, KEEP)], "tidy", sideways=True)

    # ---------------------------------------------------------------- repair
    def repair_candidates(self, run: SimRun) -> list[int]:
        """The tensors a failed run's task concerns: the rebuild chain it belongs to
        (last rebuilt first), the rebuilt tensors still held at its op, and, for an op,
        the 16 largest kept tensors resident there and unused."""
        k = run.fail_task
        ops, tt = run.task_op, run.task_t
        a = k
        while a > 0 and ops[a - 1] < 0:
            a -= 1
        b = k
        while b < len(ops) and ops[b] < 0:
            b += 1
        out = [int(tt[j]) for j in range(b - 1, a - 1, -1)]
        f = int(ops[b]) if b < len(ops) else self.n_ops
        seen = set(out)
        for j in range(a - 1, -1, -1):
            y = int(tt[j])
            if y >= 0 and self.last_bwd[y] >= f and y not in seen:
                out.append(y)
                seen.add(y)
        if tt[k] < 0:
            mask = (self.cur == KEEP) & (self.s > 0) & (self.last_fwd < f) & \
                (self.last_bwd >= f)
            extra = np.flatnonzero(mask)
            out += [int(x) for x in extra[np.argsort(-self.s[extra], kind="stable")][:16]
                    if int(x) not in seen]
        return out

    def repair(self, dec: np.ndarray) -> bool:
        """Change `dec` one tensor at a time until it runs (module docstring, step 2);
        stops when no candidate helps or the work or time is spent. Returns whether it
        runs."""
        self.set_base(dec)
        while not self.run.feasible and not self.spent():
            run = self.run
            key0 = (self.fail_op(run), -run.short_bytes)
            cands = sorted(self.repair_candidates(run)[:32], key=lambda t: (int(self.s[t]), t))
            moved = False
            for t in cands:
                opts = (KEEP, SWAP) if self.cur[t] == RECOMP else \
                    ((RECOMP, SWAP) if self.ok_rec[t] else (SWAP,))
                for d in opts:
                    if self.cur[t] == d:
                        continue
                    nd = self.cur.copy()
                    nd[t] = d
                    r = self.inc.evaluate(nd, np.array([t]))
                    if r.feasible or (self.fail_op(r), -r.short_bytes) > key0:
                        self.set_base(nd, np.array([t]))
                        moved = True
                        break
                if moved:
                    break
            self.repair_steps += 1
            if not moved:
                break
        return bool(self.run.feasible)


def _roles(inst: Instance, s: np.ndarray, c: np.ndarray, prod: np.ndarray,
           layers: np.ndarray) -> list[np.ndarray]:
    """Groups of saved tensors that play the same role in different layers: the same
    producer kind, size and rebuild time, and the same rank among such tensors of their
    layer; each group (of at least two) in production order, largest bytes first."""
    ops = inst.scheduled_ops
    rank: dict[tuple, int] = {}
    groups: dict[tuple, list[int]] = {}
    for t in range(inst.n_saved):
        if layers[t] < 0 or s[t] == 0:
            continue
        base = (ops[int(prod[t])].kind, int(s[t]), float(c[t]))
        r = rank.get((int(layers[t]), base), 0)
        rank[(int(layers[t]), base)] = r + 1
        groups.setdefault((base, r), []).append(t)
    out = [np.array(g, dtype=np.int64) for g in groups.values() if len(g) >= 2]
    out.sort(key=lambda g: (-int(s[g].sum()), int(g[0])))
    return out


class SlackSwapLS(BaseSolver):
    """SlackSwap's plan improved by a local search, the evaluator as judge, in a second.

    The module docstring has the starts, the repair, the moves, the limits and what is
    deterministic; docs/speed.md ("The fast tier") the figures on the benchmark suite.

    Args:
        budget_s: wall-clock budget of a solve (s; the run's time limit, when smaller,
            wins): the starts and the search stop at it; a repair, when no start runs, at
            :data:`REPAIR_GRACE` of it later; an infeasible answer's minimum-budget search
            at :data:`MIN_BUDGET_SHARE` of it later. A solve ends within 1.5 budgets
            (plus one SlackSwap round and one evaluation).
        max_work: the search's work limit (:meth:`_Search.work` units, about 48 ns each
            on the development machine), the primary, machine-independent limit.

    ``info``: ``start`` (which start the search began from), ``start_step_s``,
    ``evaluations`` (evaluator runs), ``pruned`` (moves ruled out by their recompute
    time), ``work``, ``accepted`` (moves kept, per kind), ``stopped_by`` ("work",
    "time", "local_optimum"), ``repair_steps``, ``kicks``.
    """

    name = "slackswap-ls"
    warm_starts = True
    param_specs = {
        "budget_s": Param(float, positive=True, doc="wall-clock budget of a solve (s)"),
        "max_work": Param(int, min=0, doc="work limit of the search (simulated tasks)"),
    }

    def __init__(self, *, budget_s: float = 1.0, max_work: int = MAX_WORK) -> None:
        self.budget_s = budget_s
        self.max_work = max_work

    @classmethod
    def warm_up(cls) -> None:
        """Compile the evaluator's resumable kernel and SlackSwap's: one solve of an
        8-layer chain at 0.6 P."""
        from slackopt.workloads.synthetic import chain

        slackswap.SlackSwap.warm_up()
        inst = chain(8, seed=0)
        cls(max_work=200_000).solve(inst, int(0.6 * inst.P), seed=0)

    def _starts(self, inst: Instance, M: int, run: Run, se: _Search, end: float,
                quick: bool) -> list[tuple[str, np.ndarray]]:
        """The start plans (module docstring, step 1): the start plan, SlackSwap's rounds
        (until `end`, at least one), and, while the clock is before `end`, Algorithm 1
        with g = 0 and the variant with the latency-bound tensors kept out of the swap
        set; `quick`: Algorithm 1 with g = 0 only (the minimum-budget search)."""
        if quick:
            return [("slackswap_g0", slackswap.plan(inst, M, g=0.0).decisions)]
        out: list[tuple[str, np.ndarray]] = []
        if run.start is not None:
            out.append(("start_plan", np.asarray(run.start, dtype=np.int8)))
        limit = max(1e-3, end - time.perf_counter())
        ss = slackswap.SlackSwap(min_budget_search=False).solve(inst, M, time_limit_s=limit)
        if ss.plan is not None:
            d = np.asarray(ss.plan.decisions, dtype=np.int8)
            out.append(("slackswap", d))
            lb = (d == RECOMP) & se.latency_bound
            if ss.status != "feasible" and lb.any():  # rebuilds of tiny tensors: chains
                out.append(("slackswap_latency_bound_kept", np.where(lb, KEEP, d)
                            .astype(np.int8)))
        if time.perf_counter() < end:
            out.append(("slackswap_g0", slackswap.plan(inst, M, g=0.0).decisions))
        lbi = np.flatnonzero(se.latency_bound)
        if lbi.size and time.perf_counter() < end:
            out.append(("slackswap_g0_latency_bound_kept",
                        slackswap.plan(inst, M, g=0.0, excluded=lbi).decisions))
        return out

    def _solve_at(self, inst: Instance, M: int, run: Run, deadline: float, search: bool,
                  quick: bool = False, repair_deadline: float | None = None
                  ) -> tuple[_Search, str, float]:
        """Starts, repair and (with `search`) the local search at budget M until
        `deadline` (perf_counter; the repair until `repair_deadline`, when given); returns
        the search state, the start's name and its step (inf when no start ran). Each
        repair and then the search each get ``max_work``."""
        se = _Search(inst, M, self.max_work, deadline, run.seed_or(0))
        t0 = time.perf_counter()
        starts = self._starts(inst, M, run, se, t0 + START_SHARE * (deadline - t0), quick)
        best: tuple[float, str, np.ndarray] | None = None
        for nm, d in starts:
            r = se.inc.evaluate(d)
            v = r.step_s if r.feasible else INF
            if best is None or v < best[0]:
                best = (v, nm, d)
        assert best is not None
        if best[0] < INF:
            se.set_base(best[2])
        else:  # repair each start; the fastest repaired plan is the incumbent
            fixed: list[tuple[float, str, np.ndarray]] = []
            se.deadline = deadline if repair_deadline is None else repair_deadline
            for nm, d in starts:
                se.max_work = se.work() + self.max_work
                if se.repair(d):
                    fixed.append((se.T, nm + "+repair", se.cur.copy()))
                if se.stopped_by == "time":
                    break
            se.deadline = deadline
            if fixed:
                T, nm, d = min(fixed, key=lambda x: x[0])
                se.set_base(d)
                best = (INF, nm, d)
        if search and se.T < INF:
            se.max_work = se.work() + self.max_work
            se.search()
        return se, best[1], best[0]

    def plan(self, instance: Instance, budget_bytes: int, run: Run) -> Outcome:
        """Plan `instance` under M = `budget_bytes` (bytes) within ``budget_s`` and
        ``max_work`` (class docstring); an infeasible answer states the smallest budget
        at which a start or its repair runs (bisection over (M, P], 0.5% of P)."""
        M = int(budget_bytes)
        run.seed = run.seed_or(0)
        if M >= instance.P:
            return Outcome(Plan.keep_all(instance), status="feasible",
                           objective_s=instance.ideal_time_s,
                           info={"reason": "M >= P: keep all"})
        limit = self.budget_s if run.time_limit_s is None else \
            min(self.budget_s, float(run.time_limit_s))
        deadline = run.started + limit
        se, start, start_step = self._solve_at(instance, M, run, deadline, search=True,
                                               repair_deadline=deadline + REPAIR_GRACE * limit)
        info: dict[str, Any] = {
            "start": start, "start_step_s": start_step if start_step < INF else None,
            "evaluations": se.inc.runs, "pruned": se.pruned, "work": se.work(),
            "accepted": dict(se.accepted), "stopped_by": se.stopped_by,
            "repair_steps": se.repair_steps, "kicks": se.kicks}
        plan = Plan(se.cur, instance.saved_names)
        if se.T < INF:
            return Outcome(plan, status="feasible", objective_s=se.T, info=info)
        if se.stopped_by == "time":
            return Outcome(plan, status="timeout", min_budget_bytes=None, info=info)
        mb, note = self._min_budget(instance, M, run, deadline + MIN_BUDGET_SHARE * limit)
        info["min_budget_basis"] = "bisection"
        if note:
            info["min_budget_note"] = note
        return Outcome(plan, status="infeasible", min_budget_bytes=mb, info=info)

    def _min_budget(self, inst: Instance, M: int, run: Run, end: float
                    ) -> tuple[int | None, str]:
        """The smallest budget in (M, P] at which a start or its repair runs (no local
        search: it only makes a running plan faster), by bisection to 0.5% of P; at
        `end` (perf_counter) the smallest budget found so far, with a note."""
        P = int(inst.P)
        found = [P]

        class _Late(Exception):
            pass

        def runs_at(m: int) -> bool:
            if time.perf_counter() >= end:
                raise _Late
            se, _, _ = self._solve_at(inst, m, run, end, search=False, quick=True)
            if se.T < INF:
                found[0] = min(found[0], m)
            return se.T < INF

        try:
            return smallest_true(runs_at, M, P, tol=max(1, math.ceil(MIN_BUDGET_REL_TOL * P))
                                 ), ""
        except _Late:
            return found[0], ("the bisection stopped at its time budget: a plan runs at this "
                              "budget, smaller ones were not all tried")

    def feasible_at(self, instance: Instance, budget_bytes: int, run: Run | None = None
                    ) -> bool:
        """Whether a start or its repair runs under `budget_bytes` (no time limit)."""
        if budget_bytes >= instance.P:
            return True
        r = run or Run(time_limit_s=None, seed=0, started=time.perf_counter())
        se, _, _ = self._solve_at(instance, int(budget_bytes), r, math.inf, search=False,
                                  quick=True)
        return se.T < INF


__all__ = ["SlackSwapLS", "MAX_WORK", "SMALL"]
