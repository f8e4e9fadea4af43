"""Exact enumeration: branch and bound over decision vectors with the evaluator at the
leaves; on small instances it proves the optimum of the evaluator's semantics.

A plan is one decision per saved tensor (keep, swap, or recomp where c_t < inf) and the
runtime fixes the schedule, so the smallest simulated step time over every decision
vector IS the optimum. The search fixes the tensors one at a time (largest first) in a
depth-first order, simulates every complete vector it reaches with the compiled
evaluator (:func:`slackopt.simulate._kernel.run_barrier_free`, the kernel of
:func:`slackopt.simulate`, equal to it bit for bit) and skips a subtree only when one of
two bounds, each valid for *every* completion of the fixed decisions, shows that no plan
in it can run faster than the incumbent U or run at all:

- Time: every recomp tensor is rebuilt exactly once, as a task of duration c_t on the
  compute stream (it is a saved tensor, so a backward op reads it and the runtime
  inserts its rebuild before the first need; semantics.md, "recomp"), and the compute
  stream runs its tasks one at a time from t = 0, so T = T* + stalls + sum of c_t over
  the recomp tensors. The deficit bound (:mod:`~slackopt.solvers.milp.bounds.deficit`)
  adds the cheapest way to make room at each op with the fixed decisions taken as they
  are (a fixed recomp tensor paid for and its bytes absent where they can be, fixed keep
  and swap tensors no help but through the D2H engine's bytes, the free tensors as
  fractional recomp items); it is a bound for every completion. A subtree with
  ``bound * (1 - 1e-12) >= U`` holds no plan faster than U (the factor covers the
  evaluator's floating-point sums). On a pipeline stage bubbles absorb rebuilds and
  stalls, so T = T* + stalls + rebuilds fails: the node bound takes the deficit bound's
  stage form (:func:`~slackopt.solvers.milp.bounds.deficit.deficit_bound`), in which each
  op's cover counts only the rebuilds surely after it less the ideal idle after it, and
  the fixed rebuilds count only beyond the idle that can absorb them
  (:mod:`~slackopt.solvers.milp.bounds.slack`).
- Memory: during op k every plan holds at least the bytes :func:`floor_profile` counts
  (the non-saved tensors and workspaces of the static profile; every saved tensor from
  its production through its last forward reader and during each backward op that reads
  it), plus, for a tensor fixed to keep, its bytes at every op through its last backward
  reader (resident from production to its last reader), and for one fixed to recomp its
  bytes at every op from its first backward reader through its last (rebuilt before the
  first need, freed after the last reader). An unfixed tensor is counted as the swap
  footprint, which is contained in the keep and the recomp footprints, so the count is
  a lower bound for every completion; when it exceeds M at some op, no completion runs
  (memory never exceeds M in the evaluator).

- Admission (small instances, :mod:`~slackopt.solvers.milp.bounds.admission`): the forward
  stall the D2H queue forces and the H2D copies that the runtime's admission test holds
  back until their tensor is needed, each a whole copy of stall; valid for every
  completion faster than the cutoff, which is what a skip needs. Single passes only: its
  argument reads one forward and one backward pass (no H2D before the end of the
  forward pass, stall = T - T* - rebuilds).

Nothing else is pruned (swap and recomp are not monotone in memory or time, and no
dominance rule is assumed). The bounds are checked at every node, the nodes above the
subtrees of the search's chunks (below) included, so a pruned prefix skips every chunk
under it.

Gap (``gap`` of :meth:`BranchAndBound.run`): with a cutoff of U / (1 + gap) instead of
U, a complete search proves that no plan runs faster than U / (1 + gap), U the final
incumbent (every skipped plan is at least the cutoff of its moment, and cutoffs only
decrease); a coarse gap prunes far more, so the solver runs passes of decreasing gap
(:data:`ENUM_GAPS`).

Proof of optimality (gap 0): when the search ends without hitting its work limit, every
decision vector was either simulated (the incumbent is the fastest of them, or faster:
it only ever changes to a faster simulated plan) or lies in a skipped subtree, where
none runs or none is faster than the incumbent at the moment of the skip (U only
decreases afterwards). So U is the minimum over all decision vectors: the bound is U
itself, and when no vector runs, none exists (the budget is infeasible).

Windows (:meth:`BranchAndBound.run` with ``free``, for
:mod:`~slackopt.solvers.milp.search.lns`): the same search over the tensors of a window, every
other tensor fixed to the incumbent's decision and entering both bounds as a fixed
decision does (its keep or recomp footprint in the memory floor; as a recomp tensor,
its bytes and rebuild time in the deficit bound). A complete window search returns the
fastest plan that agrees with the incumbent outside the window; it proves nothing about
other plans. The deficit bound of a node is computed in parts
(:mod:`~slackopt.solvers.milp.bounds.deficit`): the ops where keep-all exceeds M plus the
D2H engine's bytes (``_deficit_ops``, once), what the fixed prefix leaves at each
(``_fixed_deficits``, once per subtree), and the node's own decisions and the free tensors
(``_cover``), so the bound at a node costs O(those ops x window), not O(ops x saved
tensors) (GPT-2 XL: 581 saved tensors).

Deterministic: the order (tensors by size, then index; options keep, swap, recomp) and
the bounds depend only on the instance, the budget and the incumbent it starts from; the
work limit counts simulated plans, not seconds (a deadline only cuts the search short,
and then it proves nothing).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from slackopt.instance import Instance
from slackopt.jit import njit
from slackopt.plan import KEEP, RECOMP
from slackopt.simulate import _kernel as fast
from slackopt.simulate import kernel_inputs
from slackopt.solvers.milp.bounds.admission import (
    ADMISSION_MAX_WORK,
    admission_arrays,
    admission_bound,
)
from slackopt.solvers.milp.bounds.deficit import (
    _cover,
    _deficit_arrays,
    _deficit_ops,
    _fixed_deficits,
    _time_after,
)
from slackopt.solvers.milp.model.steps import floor_profile
from slackopt.solvers.milp.search.incumbent import Incumbent

ENUM_MAX_SAVED = 27
"""The solver runs the enumeration (phase "enumeration") only on instances with at most
this many saved tensors: beyond, its bounds leave too many plans for the work limit, and
the time goes to the bounds and searches after it."""
ENUM_GAPS = (0.008, 0.004, 0.001, 0.0)
"""The solver's passes, by relative gap (:meth:`BranchAndBound.run`): each complete pass
proves a bound of ``U / (1 + gap)``, the last one (gap 0) the optimum; the passes stop
at the first that does not complete. A coarse gap prunes far more, so an instance whose
optimum is out of reach still gets a certified gap."""
STAGE_MAX_CELLS = 20_000_000
"""On a pipeline stage the branch and bound is prepared only when n_saved x n_ops is at
most this: its footprints are two dense int64 arrays of that many cells (160 MB each
here), and a stage's ops and saved tensors both grow with its microbatches (Llama-3-70B
stage 0 under 1F1B, 16 microbatches: 2,752 x 18,352)."""
CHUNK_PLANS = 20_000
"""The search runs in subtrees of at most about this many nominal plans (fixed prefixes of
the order), so that the deadline is checked between them."""
SLACK = 1e-12
"""Relative slack of the recompute-time bound (floating-point sums in the evaluator)."""


@dataclass
class EnumResult:
    """The outcome of :func:`enumerate_optimum`.

    Attributes:
        complete: every decision vector was simulated or pruned: the incumbent is optimal
            (or, with no incumbent, no plan runs).
        bound_s: U (s) when complete and a plan runs, else None (a partial search proves
            nothing).
        simulated: plans simulated (leaves).
        pruned_time: subtrees skipped by the time bound (the deficit bound).
        pruned_memory: subtrees skipped by the memory bound.
        space: the number of decision vectors (product of options).
        pruned_admission: subtrees skipped by the admission bound
            (:mod:`~slackopt.solvers.milp.bounds.admission`).
        gap: the relative gap the search closed: a complete search proves that no plan
            runs faster than ``incumbent / (1 + gap)`` (0: the optimum).
    """

    complete: bool
    bound_s: float | None
    simulated: int
    pruned_time: int
    pruned_memory: int
    space: int
    pruned_admission: int = 0
    gap: float = 0.0


def search_space(inst: Instance) -> int:
    """The number of decision vectors of `inst`: 3 per rebuildable saved tensor, 2 per
    other one."""
    c = np.asarray(inst.c, dtype=np.float64)
    n3 = int(np.isfinite(c).sum())
    return 3 ** n3 * 2 ** (int(inst.n_saved) - n3)


def _footprints(inst: Instance) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(base, keep_extra, recomp_extra): the floor profile (int64 [n_ops]) and, per saved
    tensor, the bytes keep or recomp add to it (int64 [n_saved, n_ops])."""
    n, nS, is_bwd = inst.n_ops, inst.n_saved, inst.is_bwd
    base = floor_profile(inst)
    s = np.asarray(inst.s, dtype=np.int64)
    keep = np.zeros((nS, n), dtype=np.int64)
    rec = np.zeros((nS, n), dtype=np.int64)
    lastf = inst.saved_last_fwd_idx.tolist()
    firstb = inst.saved_first_bwd_idx.tolist()
    lastb = inst.saved_last_bwd_idx.tolist()
    prod = inst.saved_prod_idx.tolist()
    for t in range(nS):
        # the floor counts t from its production through its last forward reader and at
        # its backward readers; keep adds the rest up to its last reader, recomp the
        # rest from its first backward reader on
        rd = inst.saved_reader_idx[t]
        rd = rd[is_bwd[rd]]
        keep[t, prod[t]:lastb[t] + 1] = s[t]
        rec[t, firstb[t]:lastb[t] + 1] = s[t]
        for row in (keep, rec):
            row[t, prod[t]:lastf[t] + 1] = 0
            row[t, rd] = 0
    return base, keep, rec


@njit(cache=True)
def _apply(prof, keep_x, rec_x, c, t, d, sign):
    """Add (sign 1) or remove (sign -1) option d of tensor t to the memory profile `prof`;
    returns the change in recompute time (s)."""
    if d == KEEP:
        prof += sign * keep_x[t]
    elif d == RECOMP:
        prof += sign * rec_x[t]
        return sign * c[t]
    return 0.0


@njit(cache=True)
def _time_bound(t_star, cost, segcost, seg_slack, cover, stage):
    """The node's bound on the step (s): ``T* + cost + cover`` in a single pass (every
    rebuild paid for); on a stage, T* plus the larger of the fixed rebuilds' time beyond
    the idle that can absorb them (:func:`~slackopt.solvers.milp.bounds.deficit._time_after`)
    and the cover, which counts its own rebuilds."""
    if stage:
        return t_star + max(_time_after(segcost, seg_slack), cover)
    return t_star + cost + cover


@njit(cache=True)
def _node_check(inp, M, order, d0, dec, base, keep_x, rec_x, t_star, cut, nf, ops, kprof,
                cap0, lastf, firstb, sure, slack, seg_of, seg_slack, stage, rho_free, W_,
                adm, adm_on):
    """Whether the node that fixes ``order[:d0]`` to `dec` can hold a plan that runs
    faster than `cut` (s): 0 if it can, else the bound that rules it out (1 time, 2
    memory, 3 admission). Arguments as for :func:`_subtree`."""
    c = inp.c
    prof = base.copy()
    fixed = np.zeros(order.shape[0], dtype=np.bool_)
    segcost = np.zeros(seg_slack.shape[0])
    cost = 0.0
    for i in range(d0):
        cost += _apply(prof, keep_x, rec_x, c, order[i], dec[order[i]], 1)
        if dec[order[i]] == RECOMP:
            segcost[seg_of[order[i]]] += c[order[i]]
        fixed[order[i]] = True
    deficits, late = _fixed_deficits(dec, fixed, inp.s, c, nf, ops, kprof, cap0, M, lastf,
                                     firstb, W_, sure, slack)
    cover = _cover(deficits, late, ops, dec, fixed, order[:0], inp.s, c, nf, lastf, firstb,
                   sure, rho_free, W_, stage)
    if _time_bound(t_star, cost, segcost, seg_slack, cover, stage) * (1.0 - SLACK) >= cut:
        return 1
    if prof.max() > M:
        return 2
    if adm_on and (t_star + cost + admission_bound(dec, fixed, prof, keep_x, M,
                                                   cut - t_star, adm)) * (1.0 - SLACK) >= cut:
        return 3
    return 0


@njit(cache=True)
def _subtree(inp, M, order, nopt, base, keep_x, rec_x, dec0, d0, t_star, U, max_leaves,
             nf, ops, kprof, cap0, lastf, firstb, sure, slack, seg_of, seg_slack, stage,
             rho_free, W_, adm, adm_on, gf):
    """Depth-first search below the prefix ``order[:d0]`` fixed in `dec0` (d0 < len(order);
    `inp` the kernel's inputs (:func:`slackopt.simulate.kernel_inputs`), `M` the budget;
    `base` the floor profile; `ops` from ``_deficit_ops`` and `nf` to `stage` from
    ``_deficit_arrays`` (bounds/deficit.py); `rho_free`
    the rebuildable tensors of ``order[d0:]`` by c_t / s_t; `adm` from
    :func:`~slackopt.solvers.milp.bounds.admission.admission_arrays`, used when `adm_on`; a
    subtree is skipped when no plan in it runs faster than the cutoff ``gf * best``).
    Returns (best value, best decisions, leaves, pruned by time, pruned by memory,
    pruned by admission, finished, found a plan faster than U)."""
    s, c = inp.s, inp.c
    n = order.shape[0]
    dec = dec0.copy()
    prof = base.copy()
    best = U
    best_dec = dec0.copy()
    found = False
    choice = np.full(n + 1, -1, dtype=np.int64)
    fixed = np.zeros(n, dtype=np.bool_)
    segcost = np.zeros(seg_slack.shape[0])
    cost = 0.0
    for i in range(d0):
        cost += _apply(prof, keep_x, rec_x, c, order[i], dec[order[i]], 1)
        if dec[order[i]] == RECOMP:
            segcost[seg_of[order[i]]] += c[order[i]]
        fixed[order[i]] = True
    code = _node_check(inp, M, order, d0, dec, base, keep_x, rec_x, t_star, best * gf, nf,
                       ops, kprof, cap0, lastf, firstb, sure, slack, seg_of, seg_slack,
                       stage, rho_free, W_, adm, adm_on)
    if code != 0:
        return (best, best_dec, 0, int(code == 1), int(code == 2), int(code == 3), True,
                found)
    # the prefix's share of the deficit bound, once; each node adds its own decisions
    deficits, late = _fixed_deficits(dec, fixed, s, c, nf, ops, kprof, cap0, M, lastf,
                                     firstb, W_, sure, slack)
    leaves = 0
    p_time = 0
    p_mem = 0
    p_adm = 0
    depth = d0
    while depth >= d0:
        t = order[depth]
        d = choice[depth]
        if d >= 0:      # undo the previous option at this depth
            cost += _apply(prof, keep_x, rec_x, c, t, d, -1)
            if d == RECOMP:
                segcost[seg_of[t]] -= c[t]
        d += 1
        if d >= nopt[t]:
            choice[depth] = -1
            fixed[t] = False
            depth -= 1
            continue
        if leaves >= max_leaves:
            return best, best_dec, leaves, p_time, p_mem, p_adm, False, found
        choice[depth] = d
        dec[t] = d
        fixed[t] = True
        cost += _apply(prof, keep_x, rec_x, c, t, d, 1)
        if d == RECOMP:
            segcost[seg_of[t]] += c[t]
        if prof.max() > M:
            p_mem += 1
            continue
        cut = best * gf
        cover = _cover(deficits, late, ops, dec, fixed, order[d0:depth + 1], s, c, nf, lastf,
                       firstb, sure, rho_free, W_, stage)
        if _time_bound(t_star, cost, segcost, seg_slack, cover, stage) * (1.0 - SLACK) >= cut:
            p_time += 1
            continue
        if adm_on and (t_star + cost + admission_bound(
                dec, fixed, prof, keep_x, M, cut - t_star, adm)) * (1.0 - SLACK) >= cut:
            p_adm += 1
            continue
        if depth + 1 < n:
            depth += 1
            choice[depth] = -1
            continue
        leaves += 1
        r = fast.run_barrier_free(inp, dec, M)
        if r[0] == 0 and r[1] < best:
            best = r[1]
            best_dec[:] = dec
            found = True
    return best, best_dec, leaves, p_time, p_mem, p_adm, True, found


class BranchAndBound:
    """The branch and bound of this module (module docstring) for one instance and
    budget, prepared once (the simulator's arrays, the keep and recomp footprints, the
    deficit bound's arrays) and run any number of times: over every saved tensor
    (:func:`enumerate_optimum`) or over a window of them with the others fixed to the
    incumbent's decisions (:mod:`~slackopt.solvers.milp.search.lns`).

    Args:
        inst: the (lowered) instance.
        M: the budget (bytes).

    The admission bound (:mod:`~slackopt.solvers.milp.bounds.admission`) joins the deficit
    bound when ``n_saved^2 x n_ops <= ADMISSION_MAX_WORK`` (its cost per node).

    Memory: two int64 arrays [n_saved, n_ops] (GPT-2 XL: 581 x 1355, 6.3 MB each).
    """

    def __init__(self, inst: Instance, M: int) -> None:
        self.inst, self.M = inst, int(M)
        inp = kernel_inputs(inst)
        self._args = (inp, self.M)
        self._adm = admission_arrays(inst, inp)
        # the admission bound is stated for one forward and one backward pass
        self.admission = (inst.single_pass
                          and int(inst.n_saved) ** 2 * int(inst.n_ops) <= ADMISSION_MAX_WORK)
        c = np.asarray(inst.c, dtype=np.float64)
        self.nopt = np.where(np.isfinite(c), 3, 2).astype(np.int64)
        self.base, self._keep_x, self._rec_x = _footprints(inst)
        nf, kprof, cap0, lastf, firstb, rho_order, W, *stage = _deficit_arrays(inst)
        self._dq = (nf, _deficit_ops(kprof, cap0, self.M), kprof, cap0, lastf, firstb,
                    *stage)
        self._rho_order, self._W = rho_order, W

    def run(self, inc: Incumbent, max_plans: int, deadline: float,
            free: np.ndarray | None = None, source: str = "enumeration",
            gap: float = 0.0) -> EnumResult:
        """Search the decision vectors that agree with the incumbent outside `free`,
        improving `inc` in place.

        Args:
            inc: the incumbent, of this instance and budget (its step time is the first
                cutoff U; every faster plan found becomes the incumbent, with `source`).
            max_plans: most plans simulated (a work limit); the search stops, incomplete,
                when the next one would exceed it.
            deadline: ``time.perf_counter()`` time after which no new subtree is started.
            free: the saved tensors searched (int indices, any order, no repeats); the
                others keep ``inc.dec``'s decisions. None: every saved tensor.
            source: the incumbent's source for the plans found.
            gap: relative gap (>= 0): a subtree is skipped when none of its plans runs
                faster than ``U / (1 + gap)`` (U the incumbent's step at that moment),
                so a complete search proves every plan at least ``U_end / (1 + gap)``
                instead of U_end itself; 0 (default) searches for the optimum.

        Returns:
            The :class:`EnumResult` over the searched space (``space``: the decision
            vectors of the free tensors). ``complete`` means every one was simulated or
            pruned; ``bound_s`` (``U / (1 + gap)``, U the incumbent's step at the end)
            is set only when `free` is None, as a window's optimum proves nothing about
            other plans. With ``gap`` 0 it is U: the incumbent is the optimum.

        Raises:
            ValueError: `inc` is of another instance or budget, `free` is given without
                an incumbent, or names a tensor out of range or twice; `gap` is negative
                or not finite.
        """
        inst = self.inst
        if inc.inst is not inst or inc.M != self.M:
            raise ValueError("BranchAndBound.run: the incumbent is of another instance or "
                             "budget than the search was prepared for")
        if not (math.isfinite(gap) and gap >= 0.0):
            raise ValueError(f"BranchAndBound.run: gap must be a finite number >= 0, got {gap}")
        gf = 1.0 / (1.0 + gap)
        nS = int(inst.n_saved)
        s = np.asarray(inst.s, dtype=np.int64)
        nopt = self.nopt
        if free is None:
            dec = np.zeros(nS, dtype=np.int8)
            fixed_part = np.zeros(0, dtype=np.int64)
            free = np.arange(nS, dtype=np.int64)
        else:
            if inc.dec is None:
                raise ValueError("BranchAndBound.run: a window (free) needs an incumbent "
                                 "to fix the other tensors to")
            free = np.asarray(free, dtype=np.int64)
            if free.size and (free.min() < 0 or free.max() >= nS
                              or np.unique(free).size != free.size):
                raise ValueError(f"BranchAndBound.run: free must name distinct saved "
                                 f"tensors in [0, {nS}), got {free.tolist()}")
            dec = np.asarray(inc.dec, dtype=np.int8).copy()
            mask = np.ones(nS, dtype=np.bool_)
            mask[free] = False
            fixed_part = np.flatnonzero(mask).astype(np.int64)
        whole = fixed_part.size == 0
        free_sorted = sorted(free.tolist(), key=lambda t: (-int(s[t]), t))
        order = np.concatenate([fixed_part, np.array(free_sorted, dtype=np.int64)])
        space = math.prod(int(nopt[t]) for t in free_sorted)
        out = EnumResult(False, None, 0, 0, 0, space, 0, float(gap))
        if max_plans <= 0:
            return out
        if len(free_sorted) == 0:
            if whole:   # no saved tensor: the empty plan is the only one
                inc.consider(dec, source)
            out.complete, out.simulated = True, 1 if whole else 0
            out.bound_s = inc.step_s if whole and inc.dec is not None else None
            return out
        if whole and self.base.max(initial=0) > self.M:
            out.complete, out.pruned_memory = True, 1   # the memory bound: no plan runs
            return out
        in_free = np.zeros(nS, dtype=np.bool_)
        in_free[free] = True
        rho_free = self._rho_order[in_free[self._rho_order]]
        t_star = float(inst.ideal_time_s)
        # fixed prefixes: the shortest whose subtrees hold at most CHUNK_PLANS nominal plans
        depth = fixed_part.size
        while depth < nS and math.prod(int(nopt[t]) for t in order[depth:]) > CHUNK_PLANS:
            depth += 1
        for d in self._prefixes(order, fixed_part.size, depth, dec, t_star, inc, gf,
                                rho_free, deadline, out):
            if d is None:   # the deadline
                return out
            best, best_dec, leaves, pt, pm, pa, done, found = _subtree(
                *self._args, order, nopt, self.base, self._keep_x, self._rec_x, d, depth,
                t_star, inc.step_s, max_plans - out.simulated, *self._dq, rho_free,
                self._W, self._adm, self.admission, gf)
            out.simulated += int(leaves)
            out.pruned_time += int(pt)
            out.pruned_memory += int(pm)
            out.pruned_admission += int(pa)
            inc.evaluations += int(leaves)
            if found:
                inc.consider(best_dec.astype(np.int8), source)
            if not done:
                return out
        out.complete = True
        out.bound_s = inc.step_s * gf if whole and inc.dec is not None else None
        return out

    def _prefixes(self, order: np.ndarray, lo: int, depth: int, dec: np.ndarray,
                  t_star: float, inc: Incumbent, gf: float, rho_free: np.ndarray,
                  deadline: float, out: EnumResult) -> Iterator[np.ndarray | None]:
        """The decision vectors fixing ``order[:depth]`` (``order[:lo]`` as in `dec`, the
        rest every option, in the search's order), skipping every shorter prefix that
        the bounds rule out at the incumbent's cutoff of the moment (counted in `out`).
        Yields the vector (reused: copy it to keep it), or None once the deadline has
        passed."""
        if depth == lo:
            yield None if time.perf_counter() >= deadline else dec.copy()
            return
        d = dec.copy()
        choice = [-1] * (depth - lo)
        level = 0
        while level >= 0:
            t = int(order[lo + level])
            choice[level] += 1
            if choice[level] >= int(self.nopt[t]):
                choice[level] = -1
                level -= 1
                continue
            if time.perf_counter() >= deadline:
                yield None
                return
            d[t] = choice[level]
            if lo + level + 1 == depth:
                yield d
                continue
            code = _node_check(*self._args, order, lo + level + 1, d, self.base,
                               self._keep_x, self._rec_x, t_star, inc.step_s * gf,
                               *self._dq, rho_free, self._W, self._adm, self.admission)
            if code == 0:
                level += 1
            elif code == 1:
                out.pruned_time += 1
            elif code == 2:
                out.pruned_memory += 1
            else:
                out.pruned_admission += 1


def enumerate_optimum(inc: Incumbent, max_plans: int, deadline: float,
                      gap: float = 0.0) -> EnumResult:
    """Branch and bound over every decision vector of ``inc.inst`` at ``inc.M`` (module
    docstring), starting from the incumbent `inc` and improving it in place.

    Args:
        inc: the incumbent (its step time is the first cutoff U; every faster plan found
            becomes the incumbent, source "enumeration").
        max_plans: most plans simulated (a work limit); the search stops, incomplete,
            when the next one would exceed it.
        deadline: ``time.perf_counter()`` time after which no new subtree is started.
        gap: relative gap (:meth:`BranchAndBound.run`); 0 searches for the optimum.

    Returns:
        The :class:`EnumResult`; ``complete`` proves that no plan runs faster than
        ``bound_s`` (with ``gap`` 0: the incumbent, if any, is the optimum of the
        evaluator's semantics), and that no plan runs if there is none.
    """
    return BranchAndBound(inc.inst, inc.M).run(inc, max_plans, deadline, gap=gap)
