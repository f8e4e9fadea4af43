"""The deficit bound: a closed-form lower bound on the simulated step time of every plan
(:func:`deficit_bound`), and its node form for the exact enumeration's branch and bound
(:func:`_deficit_bound`, :func:`_fixed_deficits`, :func:`_cover`): the same bound with some
decisions fixed, valid for every completion of them.

The argument is in :func:`deficit_bound`'s docstring; with fixed decisions, a tensor fixed
to recomp is paid for (its rebuild time c_t on the compute stream) and its bytes are absent
where they can be, tensors fixed to keep or swap help only through the D2H engine's bytes,
and the unfixed tensors enter as fractional recomp items
(:mod:`~slackopt.solvers.milp.search.enumeration`, "Time"). On a pipeline stage both
take their stage form (:func:`deficit_bound`, :mod:`~.slack`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from numba import njit

from slackopt.instance import Instance
from slackopt.plan import RECOMP
from slackopt.solvers.milp.bounds.deficit_lagrange import lagrangian_deficit_bound
from slackopt.solvers.milp.bounds.slack import stage_slack
from slackopt.solvers.milp.bounds.source import BoundContext, BoundValue


@njit(cache=True)
def _deficit_ops(kprof, cap0, M):
    """The ops where the keep-all profile `kprof` exceeds M plus what the D2H engine can
    have copied by then (`cap0`): the only ops where the deficit bound can exceed T*
    (int64 array, increasing)."""
    n = kprof.shape[0]
    out = np.empty(n, dtype=np.int64)
    m = 0
    for k in range(n):
        if float(kprof[k] - M) - cap0[k] > 0.0:
            out[m] = k
            m += 1
    return out[:m]


@njit(cache=True)
def _fixed_deficits(dec, fixed, s, c, nf, ops, kprof, cap0, M, lastf, firstb, W, sure, slack):
    """Per op k in `ops`: the deficit (bytes) that the tensors with ``fixed[t]`` and
    ``dec[t] == RECOMP`` leave (absent between their last forward and first backward
    reader, and in a backward op W c_t bytes of D2H time each), and their rebuild time
    surely after op k less the ideal idle after it (s; ``sure[t] > k``, ``slack[k]``:
    the stage form, :func:`deficit_bound`). Two float64 arrays [len(ops)]."""
    nS = s.shape[0]
    out = np.empty(ops.shape[0])
    late = np.empty(ops.shape[0])
    for i in range(ops.shape[0]):
        k = ops[i]
        deficit = float(kprof[k] - M) - cap0[k]
        after = -slack[k]
        bwd = k >= nf
        for t in range(nS):
            if fixed[t] and dec[t] == RECOMP:
                if lastf[t] < k < firstb[t]:
                    deficit -= s[t]
                if bwd:
                    deficit -= W * c[t]
                if sure[t] > k:
                    after += c[t]
        out[i] = deficit
        late[i] = after
    return out, late


@njit(cache=True)
def _cover(deficits, late, ops, dec, fixed, more, s, c, nf, lastf, firstb, sure, rho_free,
           W, stage):
    """The largest over the ops of the cheapest cover (s) of ``deficits`` (from
    :func:`_fixed_deficits`) once the tensors in `more` that are fixed to recomp are
    taken off too, by stall (W bytes per s) and the unfixed tensors of `rho_free`
    (rebuildable tensors with bytes, by c_t / s_t) as fractional recomp items; with
    `stage`, plus the op's `late` time (the fixed rebuilds surely after it, less the
    ideal idle after it), at least 0."""
    extra = 0.0
    for i in range(ops.shape[0]):
        deficit = deficits[i]
        if deficit <= 0.0:
            continue
        k = ops[i]
        bwd = k >= nf
        after = late[i]
        for j in range(more.shape[0]):
            t = more[j]
            if fixed[t] and dec[t] == RECOMP:
                if lastf[t] < k < firstb[t]:
                    deficit -= s[t]
                if bwd:
                    deficit -= W * c[t]
                if sure[t] > k:
                    after += c[t]
        if deficit <= 0.0:
            continue    # stage: the op's late time is at most _time_after's value
        e = 0.0
        for q in range(rho_free.shape[0]):
            t = rho_free[q]
            if fixed[t] or not lastf[t] < k < firstb[t]:
                continue
            cap = s[t] + W * c[t] if bwd else float(s[t])
            if c[t] * W >= cap:
                break       # stall (W bytes per s) is as cheap from here on
            if cap >= deficit:
                e += c[t] * deficit / cap
                deficit = 0.0
                break
            e += c[t]
            deficit -= cap
        if deficit > 0.0:
            e += deficit / W
        if stage:
            e += after
        if e > extra:
            extra = e
    return extra


@njit(cache=True)
def _time_after(segcost, seg_slack):
    """Stage form: the largest over the idle-free segments i of the ideal schedule of the
    rebuild time surely in segment i or later (``segcost``, s, per segment) less the
    ideal idle from segment i's start on (``seg_slack``), at least 0 (s)."""
    best = 0.0
    acc = 0.0
    for i in range(segcost.shape[0] - 1, -1, -1):
        acc += segcost[i]
        v = acc - seg_slack[i]
        if v > best:
            best = v
    return best


@njit(cache=True)
def _deficit_bound(dec, fixed, s, c, t_star, M, nf, kprof, cap0, lastf, firstb, rho_order, W,
                   sure, slack, seg_of, seg_slack, stage):
    """:func:`deficit_bound` for the decisions ``dec[t]`` of the tensors with ``fixed[t]``,
    the others free (the arguments after `M`: :func:`_deficit_arrays`). Returns s."""
    ops = _deficit_ops(kprof, cap0, M)
    deficits, late = _fixed_deficits(dec, fixed, s, c, nf, ops, kprof, cap0, M, lastf, firstb,
                                     W, sure, slack)
    more = np.zeros(0, dtype=np.int64)
    cover = _cover(deficits, late, ops, dec, fixed, more, s, c, nf, lastf, firstb, sure,
                   rho_order, W, stage)
    cost = 0.0
    segcost = np.zeros(seg_slack.shape[0])
    for t in range(s.shape[0]):
        if fixed[t] and dec[t] == RECOMP:
            cost += c[t]
            segcost[seg_of[t]] += c[t]
    if stage:
        return t_star + max(_time_after(segcost, seg_slack), cover)
    return t_star + cost + cover


def _deficit_arrays(inst: Instance) -> tuple:
    """The arguments of :func:`_deficit_bound` after `M`: (nf, keep-all profile, cap0,
    lastf, firstb, rho_order, W, sure, slack, seg_of, seg_slack, stage). cap0[k] = W *
    (S*(k) - r0)+, the bytes the D2H engine can have copied by the ideal start of op k;
    rho_order: the rebuildable tensors with bytes by c_t / s_t (then index); sure, slack,
    seg_of, seg_slack: :class:`~.slack.StageSlack`; stage: not a single pass (then nf is
    n_ops: no item gets W c_t bytes, :func:`deficit_bound`)."""
    s = np.asarray(inst.s, dtype=np.int64)
    c = np.asarray(inst.c, dtype=np.float64)
    W = float(inst.link.d2h_bytes_per_s)  # the D2H engine's bytes per second
    rel = np.asarray(inst.r, dtype=np.float64)
    r0 = float(rel.min()) if rel.size else 0.0
    cap0 = W * np.maximum(0.0, np.asarray(inst.start_s, dtype=np.float64) - r0)
    ok = [t for t in range(int(inst.n_saved)) if np.isfinite(c[t]) and s[t] > 0]
    rho_order = np.array(sorted(ok, key=lambda t: (c[t] / s[t], t)), dtype=np.int64)
    firstb = np.asarray(inst.saved_first_bwd_idx, dtype=np.int64)
    stage = not inst.single_pass
    if stage:
        sl = stage_slack(inst)
        extra = (sl.sure, sl.after, sl.seg_of, sl.seg_slack)
    else:  # the single-pass form: no slack, every fixed recomp paid for (segment 0)
        extra = (firstb, np.zeros(int(inst.n_ops)), np.zeros(int(inst.n_saved), dtype=np.int64),
                 np.zeros(1))
    return (int(inst.n_ops if stage else inst.n_fwd),
            np.asarray(inst.keep_all_profile, dtype=np.int64), cap0,
            np.asarray(inst.saved_last_fwd_idx, dtype=np.int64), firstb, rho_order, W,
            *extra, stage)


def deficit_bound(inst: Instance, M: int) -> float:
    """A lower bound on the simulated step time of every plan of `inst` under budget `M`
    (bytes), in s: T* plus the cheapest way, over each op k, to make room at op k.

    At the start of op k a plan holds the keep-all profile (every saved tensor from its
    production through its last backward reader, the non-saved tensors and workspaces)
    minus the saved tensors absent then, and at most M. A saved tensor is absent at op k
    only after its last forward reader and before its last backward one, and only if it
    is recomp and not yet rebuilt (before its first backward reader) or swapped and its
    D2H has ended by the start S(k). The D2H engine moves at most W bytes/s, one copy at
    a time, from the first production r0 on: at most ``W (S(k) - r0)`` bytes by then, with
    ``S(k) = S*(k) + sigma + R_k`` (stalls and rebuild time before k; rebuilds run in the
    backward pass only). With ``T = T* + stalls + rebuild time >= T* + sigma + sum c_t``,
    the extra time is at least the value of the linear program: cover
    ``deficit_k = keep_all(k) - M - W (S*(k) - r0)`` bytes with stall (W bytes per s) or
    recomp tensors absent-able at k (s_t bytes, plus W c_t bytes of extra D2H time when
    k is a backward op, for c_t s each, fractions allowed), solved exactly by the greedy
    order on c_t / bytes. The bound is T* plus the largest such value over k (T* when no
    op has a deficit).

    A pipeline stage (``inst.single_pass`` False; docs/model.md, "A pipeline stage"):
    bubbles absorb stalls and rebuilds, so ``T - T* = stalls + rebuild time`` fails. What
    holds is ``T - T* >= x_k + R_{>k} - slack_k`` (:mod:`~.slack`: x_k = S(k) - S*(k) >= 0
    the delay of op k, R_{>k} the rebuild time after it, slack_k the ideal idle after it).
    A recomp tensor absent at k is rebuilt after k, so its c_t is in R_{>k}; the delay
    gives the D2H engine W x_k more bytes. So the stage form covers the same deficit with
    stall (W bytes per s) and recomp items of s_t bytes for c_t each (no W c_t term: a
    rebuild before k is part of x_k), and the bound is T* plus the largest over k of that
    cover less slack_k, at least 0. With decisions fixed (the node form), a fixed recomp
    tensor whose earliest rebuild gap is after k adds its c_t to R_{>k}; one absent-able
    at k is counted absent for free; and T - T* is also at least the fixed rebuild time
    in each idle-free segment of the ideal schedule and after, less the idle from its
    start on (:func:`_time_after`).

    Source: the memory and link rules of ../shared/spec/semantics.md ("swap", "recomp",
    "Each copy costs a fixed 10 us, then bytes at W"); checked against every simulated
    plan in tests/test_milp_enumerate.py.
    """
    nS = int(inst.n_saved)
    return float(_deficit_bound(np.zeros(nS, dtype=np.int8), np.zeros(nS, dtype=np.bool_),
                                np.asarray(inst.s, dtype=np.int64),
                                np.asarray(inst.c, dtype=np.float64),
                                float(inst.ideal_time_s), int(M), *_deficit_arrays(inst)))


@dataclass(frozen=True)
class DeficitBound:
    """The deficit bounds as a bound source (phase "deficit_bound"): ``deficit``
    (:func:`deficit_bound`, computed in floating point from the instance's data and
    lowered by a relative 1e-12; certified) and ``deficit_lagrange`` (its Lagrangian form
    with the offloads' copy times,
    :func:`~slackopt.solvers.milp.bounds.deficit_lagrange.lagrangian_deficit_bound`: its
    value at the multipliers found, re-summed with ``math.fsum`` and lowered by a margin
    that covers its rounding; certified), with ``info["deficit_lagrange"]`` (its op and
    multipliers). Neither depends on a plan. On a pipeline stage the Lagrangian's search
    stops after `stage_share` of the time left (a stage has many ops with an excess, and
    the phases after it need the time); on a single pass it runs to the deadline."""

    stage_share: float = 0.1
    name: str = "deficit_bound"
    stages: bool = True  # both bounds have a stage form
    single_pass: bool = True

    def __call__(self, inst: Instance, M: int, ctx: BoundContext) -> BoundValue:
        closed = deficit_bound(inst, M) * (1.0 - 1e-12)
        end = ctx.deadline - 0.3
        if not inst.single_pass:
            end = min(end, time.perf_counter() + self.stage_share * ctx.left())
        lb, linfo = lagrangian_deficit_bound(inst, M, deadline=end)
        return BoundValue(bounds={"deficit": closed, "deficit_lagrange": lb},
                          info={"deficit_lagrange": linfo})
