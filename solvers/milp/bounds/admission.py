"""Admission-aware node bounds for the exact enumeration: the forward stall the offload
queue forces, and the backward stall of prefetches that the runtime's admission test
holds back until their tensor is needed.

The deficit bound of :mod:`~slackopt.solvers.milp.bounds.deficit` charges a plan for memory
only through the D2H engine's bytes and the recomp tensors' rebuilds. On instances whose
last backward layers allocate large gradients (VGG-16: 0.2 to 0.8 GB a task) it misses
what makes most plans slow: a swapped tensor whose H2D copy the runtime admits only when
the compute stream already waits for it, so the whole copy is stall. This module gives
two more lower bounds on the extra time of every completion of a node (fixed decisions
``dec[t]`` where ``fixed[t]``, the others free), in s, disjoint from each other and from
the rebuild time, so ``T >= T* + rebuild time + F + B``.

The runtime rules used (docs/model.md, "Plan semantics under the barrier-free runtime";
slackopt/simulate/rules.py): a swapped tensor stays on the device until its D2H has
ended; D2H copies run one at a time in queue order (the op after which the tensor is
ready, then its position); the H2D queue is ordered by need (task, then tensor index)
and the copy considered is the earliest-need one whose D2H has ended; a considered copy
starts only if used + its size + the allocations of the next ``ADMISSION_LOOKAHEAD``
tasks fit in M (``h2d_admits``), unless the compute stream already waits for it; H2D
copies run one at a time; memory never exceeds M; the rebuilds of a gap run before its
op, recipe inputs first.

**F, forward stall** (:func:`fwd_stall_lb`). Run the fixed swaps alone through the D2H
queue at the full D2H rate from their ideal ready times r_t: their copies end at
``Q_t = max(Q_prev, r_t) + latency + s_t / W_d2h``. No plan ends a fixed swap's D2H
earlier (stalls only delay ready times, free tensors only add queue work, and no H2D
runs in the forward pass, so no copy slows down). A swap is resident until its D2H has
ended, so forward op k, which starts at ``S*_k + sigma_k`` (sigma_k the stall before it),
holds its floor bytes plus every fixed swap t past its last forward reader with
``Q_t > S*_k + sigma_k``; memory never exceeds M, so sigma_k is at least the least sigma
that brings this under M. F is the largest such sigma over the forward ops.

**B, blocked prefetches** (:func:`blocked_stall_lb`). A fixed swap t whose H2D copy
surely runs, and which no instant before its need admits, costs its whole copy as
stall: the copy then starts while the compute stream waits for t (or for a task that
reads t), and that task waits for the copy's end. H2D copies run one at a time, so these
copies, and the stalls they cause, do not overlap; they are backward stall, disjoint
from F. A copy surely runs when no device copy can serve t's need: a swap's device copy
goes when its D2H ends, and one whose D2H lags serves the need, so the copy runs when
that D2H surely ends before t's earliest need (a Lindley backlog over every tensor that
may be swapped, at the slowest D2H rate, from ideal ready times: real ready times only
spread out), or when t's bytes cannot stay on the device through some op before its
earliest need (its keep footprint over M there). Offloads dropped by rule 2 only
shorten the backlog. The instants checked are, for each
backward gap k up to t's latest need (its first backward reader, or the rebuild of a
fixed recomp tensor that reads it): while op k runs, idle before op k, and while a
rebuild of gap k runs or waits. At each, a lower bound on used memory plus ``s_t`` plus
the least allocation of the next tasks (at most ``R[g]`` rebuilds of at least ``m[g]``
bytes each in gap g, then op g) must exceed M. The used-memory bound is the node's floor
profile plus the fixed swaps surely on the device then:

- R1: t's copy is considered only when no queued tensor with an earlier need has its
  D2H ended. A fixed swap u whose need is surely earlier than t's (its latest need gap
  ``ub[u]`` is below t's earliest ``E``) and still to come (k before u's earliest need)
  is therefore on the device: either its D2H has not ended, or it was fetched.
- R2: the same for a fixed swap an op reads after k and before E (or at E, when t's
  need is surely op E itself and u's index is smaller: the queue's tie order).
- R3: the same for a fixed swap read by the rebuild of a fixed recomp tensor whose
  rebuild is surely after gap k and before E.
- R4: a fixed swap that a backward op reads after op k and whose D2H cannot have ended
  by the end of op k in a plan faster than the cutoff U:
  ``Qk_u >= S*_k + dur_k + (U - T* - the rebuilds surely after k)``, where Qk_u is its
  D2H end in the FIFO over the fixed swaps read after op k alone (a queued D2H whose
  tensor has no reader left is dropped, rule 2, so only those surely keep their place).
  This rule holds only for plans faster than U, so B with R4 proves "no completion is
  faster than U", which is what pruning needs, and is no bound on its own.

Idle instants are cheap to rule out: before E, a compute stream idle before op k with
every input present waits for memory (used + the task's allocation > M), and the
copy's reservation includes that allocation; before op k = t's first backward reader,
or before a rebuild that reads t, the wait is for t itself, so the copy is stall.

Checked against the evaluator on random plans and random partial vectors of every test
instance (tests/test_milp_admission.py) and on the suite's VGG-16 rows; the cost is
O(fixed swaps x backward ops x saved tensors) per node, so the enumeration uses it only
on small instances (``ADMISSION_MAX_WORK``).
"""

from __future__ import annotations

import numpy as np

from slackopt.instance import Instance
from slackopt.jit import njit
from slackopt.plan import RECOMP, SWAP
from slackopt.simulate import rules
from slackopt.simulate.rules import ADMISSION_LOOKAHEAD

# The runtime rules the bounds apply, compiled (inlined).
_h2d_admits = njit(inline="always", cache=True)(rules.h2d_admits)
_copy_time = njit(inline="always", cache=True)(rules.copy_time)
_fifo_copy_end = njit(inline="always", cache=True)(rules.fifo_copy_end)

ADMISSION_MAX_WORK = 2_000_000
"""The enumeration computes F and B only when n_saved^2 x n_ops is at most this (VGG-16:
27^2 x 85 = 61,965): their cost per node is about that many steps."""


def admission_arrays(inst: Instance, inp) -> tuple:
    """The static arrays of :func:`admission_bound` for the lowered instance `inst` and
    its kernel inputs `inp` (:func:`slackopt.simulate.kernel_inputs`), as one tuple:

    (nf, firstb, lastf, s, c, cfin, rd_ptr, rd_idx, A, rbx, dptr, didx, porder, rptr,
    ridx, fifo, rel, start, endk, latency, w_d2h, w_d2h_slow, w_h2d), where

    - firstb, lastf: first backward and last forward reader of each saved tensor;
    - A[k]: bytes op k allocates when it starts, its saved outputs included (int64);
    - rbx: bytes a rebuild holds besides its tensor;
    - dptr/didx: per saved tensor, the saved tensors whose recipe reads it (CSR);
    - porder: the saved tensors with every recipe reader before what it reads;
    - rptr/ridx: per saved tensor, its backward op readers, increasing (CSR);
    - fifo: the saved tensors in D2H queue order (ready op, then position);
    - rel, start, endk: ideal ready times, op starts and op ends (s);
    - w_d2h_slow: the slowest D2H rate (duplex factor applied, B/s).
    """
    nS, nf, n = int(inst.n_saved), int(inst.n_fwd), int(inst.n_ops)
    s = np.asarray(inst.s, dtype=np.int64)
    c = np.asarray(inst.c, dtype=np.float64)
    A = np.asarray(inp.op_alloc, dtype=np.int64).copy()
    for o in range(nf):
        A[o] += int(s[inp.out_idx[inp.out_ptr[o]:inp.out_ptr[o + 1]]].sum())
    readers: list[list[int]] = [[] for _ in range(nS)]
    for v in range(nS):
        for p in range(int(inp.ri_ptr[v]), int(inp.ri_ptr[v + 1])):
            readers[int(inp.ri_idx[p])].append(v)
    dptr = np.zeros(nS + 1, dtype=np.int64)
    dptr[1:] = np.cumsum([len(r) for r in readers])
    didx = np.array([v for r in readers for v in r], dtype=np.int64)
    # recipe readers before what they read (a reverse topological order; recipes are
    # acyclic: a recipe input is produced before the tensor it rebuilds)
    porder, seen = [], [False] * nS

    def visit(t: int) -> None:
        stack = [(t, iter(readers[t]))]
        seen[t] = True
        while stack:
            v, it = stack[-1]
            w = next(it, None)
            if w is None:
                stack.pop()
                porder.append(v)
            elif not seen[w]:
                seen[w] = True
                stack.append((w, iter(readers[w])))

    for t in range(nS):
        if not seen[t]:
            visit(t)    # post-order: every reader is appended before what it reads
    bwd = [sorted(int(r) for r in inst.saved_reader_idx[t].tolist() if r >= nf)
           for t in range(nS)]
    rptr = np.zeros(nS + 1, dtype=np.int64)
    rptr[1:] = np.cumsum([len(b) for b in bwd])
    ridx = np.array([r for b in bwd for r in b], dtype=np.int64)
    fifo = np.array([int(inp.rdy_idx[p]) for g in range(n)
                     for p in range(int(inp.rdy_ptr[g]), int(inp.rdy_ptr[g + 1]))],
                    dtype=np.int64)
    start = np.asarray(inst.start_s, dtype=np.float64)
    return (nf, np.asarray(inst.saved_first_bwd_idx, dtype=np.int64),
            np.asarray(inst.saved_last_fwd_idx, dtype=np.int64), s, c, np.isfinite(c),
            np.asarray(inp.rd_ptr, dtype=np.int64), np.asarray(inp.rd_idx, dtype=np.int64),
            A, np.asarray(inp.rb_extra, dtype=np.int64), dptr, didx,
            np.array(porder, dtype=np.int64), rptr, ridx, fifo,
            np.asarray(inst.r, dtype=np.float64), start,
            start + np.asarray(inp.op_dur, dtype=np.float64), float(inp.latency),
            float(inp.w_d2h), rules.copy_rate(float(inp.w_d2h), float(inp.duplex), True),
            float(inp.w_h2d))


@njit(cache=True)
def _d2h_ends(dec, fixed, s, fifo, rel, lat, wd2h, sel):
    """Q[t]: the earliest end of each fixed swap's D2H, the fixed swaps with ``sel[t]``
    alone through the FIFO queue at rate `wd2h`, from ideal ready times; -1 for the
    other tensors and for 0-byte swaps (done at once, never queued)."""
    Q = np.full(s.shape[0], -1.0)
    cur = 0.0
    for i in range(fifo.shape[0]):
        t = fifo[i]
        if fixed[t] and dec[t] == SWAP and s[t] > 0 and sel[t]:
            cur = _fifo_copy_end(cur, rel[t], s[t], wd2h, lat)
            Q[t] = cur
    return Q


@njit(cache=True)
def fwd_stall_lb(dec, fixed, prof, M, nf, s, lastf, start, Q):
    """F (s): the least forward stall of every completion (module docstring).

    Args: decisions `dec` (int8 [n_saved]) where `fixed` (bool), the node's floor
    profile `prof` (bytes [n_ops]), budget `M` (bytes), `nf` forward ops, sizes `s`,
    last forward readers `lastf`, ideal op starts `start` (s), D2H ends `Q`
    (:func:`_d2h_ends`). Returns inf when a forward op cannot fit at any time."""
    nS = s.shape[0]
    best = 0.0
    for k in range(nf):
        over = prof[k] - M
        late = 0     # bytes resident at S*_k only because their D2H has not ended
        for t in range(nS):
            if Q[t] > start[k] and lastf[t] < k:
                late += s[t]
        need = over + late
        if need <= 0:
            continue
        # the least sigma with over + sum{s_t : Q_t > S*_k + sigma} <= 0: take the D2H
        # ends in increasing order
        sig = 0.0
        while need > 0:
            tm = -1
            for t in range(nS):
                if Q[t] > start[k] + sig and lastf[t] < k and (tm < 0 or Q[t] < Q[tm]):
                    tm = t
            if tm < 0:
                sig = np.inf
                break
            sig = Q[tm] - start[k]
            for t in range(nS):
                if Q[t] == Q[tm] and lastf[t] < k:
                    need -= s[t]
        if sig > best:
            best = sig
    return best


@njit(cache=True)
def _lb_tasks(j, slots, n, A, R, m):
    """The least total allocation (bytes) of the next `slots` (at most
    ``ADMISSION_LOOKAHEAD``) tasks from gap j on: in each gap g, at most R[g] rebuilds of
    at least m[g] bytes each, then op g (A[g] bytes)."""
    f = np.zeros(ADMISSION_LOOKAHEAD + 1, dtype=np.int64)   # f[q]: the gaps after the current one
    g_last = j + slots - 1
    if g_last > n - 1:
        g_last = n - 1
    for g in range(g_last, j - 1, -1):
        h = np.zeros(ADMISSION_LOOKAHEAD + 1, dtype=np.int64)
        for q in range(1, slots + 1):
            best = -1
            rmax = R[g] if R[g] < q else q
            for r in range(rmax + 1):
                v = r * m[g]
                if r < q:
                    v += A[g] + f[q - r - 1]
                if best < 0 or v < best:
                    best = v
            h[q] = best
        f = h
    return f[slots] if j < n else 0


@njit(cache=True)
def node_needs(dec, fixed, cfin, firstb, dptr, didx, porder):
    """(mayr, rb_early, en_min, ub) of a node, each [n_saved]:

    - mayr[v]: v may be recomp (fixed recomp, or free and rebuildable);
    - rb_early[v]: the earliest gap in which v may be rebuilt: its first backward
      reader, or the earliest of a recipe reader that may be recomp;
    - en_min[t]: the earliest gap of t's need (first backward reader, or the rebuild of
      a tensor that may be recomp and reads it);
    - ub[t]: the latest gap of t's need: its first backward reader, or the latest need
      of a fixed recomp tensor that reads it (rebuilt no later than that)."""
    nS = firstb.shape[0]
    mayr = np.zeros(nS, dtype=np.bool_)
    for t in range(nS):
        mayr[t] = cfin[t] and ((not fixed[t]) or dec[t] == RECOMP)
    fixr = np.zeros(nS, dtype=np.bool_)
    for t in range(nS):
        fixr[t] = fixed[t] and dec[t] == RECOMP
    rb = firstb.copy()
    ub = firstb.copy()
    for i in range(nS):     # recipe readers first: their values are final
        v = porder[i]
        if mayr[v]:
            rb[v] = _min_readers(rb, firstb[v], v, mayr, dptr, didx)
        ub[v] = _min_readers(ub, firstb[v], v, fixr, dptr, didx)
    en = firstb.copy()
    for t in range(nS):
        en[t] = _min_readers(rb, firstb[t], t, mayr, dptr, didx)
    return mayr, rb, en, ub


@njit(cache=True)
def _min_readers(vals, start, v, sel, dptr, didx):
    """min(start, vals[w] over the recipe readers w of v with sel[w])."""
    out = start
    for p in range(dptr[v], dptr[v + 1]):
        w = didx[p]
        if sel[w] and vals[w] < out:
            out = vals[w]
    return out


@njit(cache=True)
def _gap_rebuilds(mayr, rbe, firstb, s, rbx, n):
    """(R, m) [n + 1]: per gap g, how many tensors may be rebuilt in it (those that may
    be recomp with rb_early <= g <= first backward reader) and the least bytes such a
    rebuild allocates (its tensor plus its transient bytes)."""
    R = np.zeros(n + 1, dtype=np.int64)
    m = np.zeros(n + 1, dtype=np.int64)
    for v in range(s.shape[0]):
        if mayr[v]:
            a = s[v] + rbx[v]
            for j in range(rbe[v], firstb[v] + 1):
                if R[j] == 0 or a < m[j]:
                    m[j] = a
                R[j] += 1
    return R, m


@njit(cache=True)
def _d2h_backlog(dec, fixed, s, fifo, rel, lat, wslow):
    """back[t]: the longest time from t's ideal ready time to the end of its D2H in any
    completion: a Lindley recursion over every tensor that may be swapped, in queue
    order, each copy at the slowest rate `wslow` (real ready times are later and only
    spread out)."""
    back = np.zeros(s.shape[0])
    B = 0.0
    prev = -1.0
    for i in range(fifo.shape[0]):
        v = fifo[i]
        if (fixed[v] and dec[v] != SWAP) or s[v] == 0:  # a 0-byte swap is never queued
            continue
        if prev >= 0.0:
            B -= rel[v] - prev
            if B < 0.0:
                B = 0.0
        B += _copy_time(s[v], wslow, lat)
        back[v] = B
        prev = rel[v]
    return back


@njit(cache=True)
def _d2h_ends_read_after(dec, fixed, s, fifo, rel, lat, wd2h, rptr, ridx, nf, n):
    """Qk[k, u] (k >= nf): the earliest end of fixed swap u's D2H if it ends before op k
    does, -1 where not computed. A queued D2H is dropped once its tensor has no reader
    left (docs/model.md, rule 2), so only the fixed swaps a backward op reads after op k
    surely keep their place in the queue until then; the FIFO over them alone, at the
    full rate, from ideal ready times, gives each of them such an end."""
    nS = s.shape[0]
    Qk = np.full((n, nS), -1.0)
    read_after = np.zeros(nS, dtype=np.bool_)
    for k in range(nf, n):
        for v in range(nS):
            read_after[v] = rptr[v + 1] > rptr[v] and ridx[rptr[v + 1] - 1] > k
        Qk[k] = _d2h_ends(dec, fixed, s, fifo, rel, lat, wd2h, read_after)
    return Qk


@njit(cache=True)
def _reads(ptr, idx, t, v):
    """Whether v is in row t of the CSR (ptr, idx)."""
    for p in range(ptr[t], ptr[t + 1]):
        if idx[p] == v:
            return True
    return False


@njit(cache=True)
def blocked_stall_lb(dec, fixed, prof, keep_x, M, slack_u, nf, firstb, s, c, cfin,
                     rd_ptr, rd_idx, A, rbx, dptr, didx, porder, rptr, ridx, fifo, rel,
                     start, endk, lat, wd2h, wslow, wh2d):
    """B (s): the summed H2D time of the fixed swaps whose prefetch no instant before
    their need admits (module docstring), for a node (`dec`, `fixed`, floor profile
    `prof`, keep footprints `keep_x` [n_saved, n_ops] bytes), budget `M` (bytes),
    ``slack_u = U - T*`` (s; rule R4); the other arguments from
    :func:`admission_arrays`. Valid for every completion faster than U."""
    n = prof.shape[0]
    nS = s.shape[0]
    mayr, rbe, en_min, ub = node_needs(dec, fixed, cfin, firstb, dptr, didx, porder)
    R, m = _gap_rebuilds(mayr, rbe, firstb, s, rbx, n)
    back = _d2h_backlog(dec, fixed, s, fifo, rel, lat, wslow)
    Qk = _d2h_ends_read_after(dec, fixed, s, fifo, rel, lat, wd2h, rptr, ridx, nf, n)
    tot = 0.0
    for t in range(nS):
        if not (fixed[t] and dec[t] == SWAP) or s[t] == 0:
            continue
        E = en_min[t]
        # its H2D surely runs before its need: its D2H surely ends before its earliest
        # need, or its device copy cannot stay until then (a swap's device copy goes
        # when its D2H ends, and only a lagging one, there since its production, serves
        # a need without a prefetch)
        if not back[t] < start[E] - rel[t]:
            fits = True
            for k in range(E):
                if prof[k] + keep_x[t, k] > M:
                    fits = False
                    break
            if fits:
                continue
        # t's need is surely op E's own task (no rebuild reading t can run in gap E or
        # before): a fixed swap of a smaller index first needed by that task comes first
        tie = E == firstb[t]
        for p in range(dptr[t], dptr[t + 1]):
            w = didx[p]
            if mayr[w] and rbe[w] <= firstb[t]:
                tie = False
        if not _some_instant_admits(t, E, tie, dec, fixed, prof, M, slack_u, nf, firstb, s,
                                    c, cfin, rd_ptr, rd_idx, A, dptr, didx, rptr, ridx,
                                    endk, mayr, rbe, en_min, ub, R, m, Qk):
            tot += _copy_time(s[t], wh2d, lat)
    return tot


@njit(cache=True)
def _some_instant_admits(t, E, tie, dec, fixed, prof, M, slack_u, nf, firstb, s, c, cfin,
                         rd_ptr, rd_idx, A, dptr, didx, rptr, ridx, endk, mayr, rbe, en_min,
                         ub, R, m, Qk):
    """Whether some instant from op `nf` to fixed swap t's need admits t's prefetch
    (:func:`blocked_stall_lb`; `E` t's earliest need, `tie` whether t's need is surely op
    E's own task): before op k, while a rebuild of gap k runs or waits, or while op k
    runs. `R` (rebuilds per gap) is restored before returning."""
    K = ub[t]       # t is on the device from its need on, in gap K at the latest
    n = prof.shape[0]
    for k in range(nf, K + 1):
        # rule R4's slack: the time lost before the end of op k in a plan faster than U,
        # less the rebuilds that surely run after op k
        slack_k = slack_u
        for w in range(s.shape[0]):
            if fixed[w] and dec[w] == RECOMP and rbe[w] > k:
                slack_k -= c[w]
        extra = _surely_on(t, k, E, tie, slack_k, dec, fixed, s, rptr, ridx, dptr, didx,
                           rbe, en_min, ub, endk, Qk)
        miss, mayrs, other = _absent_inputs(t, k, E, dec, fixed, s, cfin, rd_ptr, rd_idx)
        base = prof[k] + extra
        # idle before op k (k < K: op K reads t, or comes after t's need): before E
        # every input is on the device, so the wait is for memory and the copy's
        # reservation (which holds A[k]) is refused; from E on, only another missing
        # input can leave room
        if k < K and other and _h2d_admits(
                base - miss, s[t], _lb_tasks(k + 1, ADMISSION_LOOKAHEAD - 1, n, A, R, m), M):
            return True
        # while a rebuild of gap k runs or waits; skipped when every task that may run
        # in gap k before op k rebuilds a fixed recomp tensor that reads t (idle before
        # it with t absent is a wait for t; while it runs, t is present)
        allread = R[k] > 0
        if allread:
            for v in range(s.shape[0]):
                if mayr[v] and rbe[v] <= k and k <= firstb[v]:
                    if not (fixed[v] and dec[v] == RECOMP and _reads(dptr, didx, t, v)):
                        allread = False
                        break
        if R[k] > 0 and not allread:
            # before E, idle before a rebuild is a wait for memory (its inputs are on the
            # device), and while a rebuild runs at most R[k] - 1 others of gap k come
            # before op k
            if k < E:
                R[k] -= 1
                lb = _lb_tasks(k, ADMISSION_LOOKAHEAD, n, A, R, m)
                R[k] += 1
            else:
                lb = _lb_tasks(k, ADMISSION_LOOKAHEAD, n, A, R, m)
            if _h2d_admits(base - A[k] - mayrs, s[t], lb, M):
                return True
        # while op k runs (k < K: from op K on t is on the device)
        if k < K and _h2d_admits(
                base, s[t], _lb_tasks(k + 1, ADMISSION_LOOKAHEAD, n, A, R, m), M):
            return True
    return False


@njit(cache=True)
def _surely_on(t, k, E, tie, slack_k, dec, fixed, s, rptr, ridx, dptr, didx, rbe, en_min,
               ub, endk, Qk):
    """Bytes of the fixed swaps other than t, not read by op k, surely on the device at
    gap k while t waits (rules R1 to R4 of the module docstring; `slack_k` rule R4's
    slack, s)."""
    extra = 0
    for u in range(s.shape[0]):
        if u == t or not (fixed[u] and dec[u] == SWAP) or s[u] == 0:
            continue
        readk = False
        nxt = -1
        for p in range(rptr[u], rptr[u + 1]):
            j = ridx[p]
            if j == k:
                readk = True
            if j > k and nxt < 0:
                nxt = j
        if readk:
            continue     # in prof[k]
        on = False
        if k < en_min[u] and ub[u] < E:
            on = True                        # R1
        elif nxt >= 0 and (nxt < E or (tie and nxt == E and u < t)):
            on = True                        # R2
        else:
            for p in range(dptr[u], dptr[u + 1]):
                w = didx[p]
                if fixed[w] and dec[w] == RECOMP and k < rbe[w] and ub[w] < E:
                    on = True                # R3
                    break
        if not on and nxt >= 0 and Qk[k, u] >= endk[k] + slack_k:
            on = True                        # R4
        if on:
            extra += s[u]
    return extra


@njit(cache=True)
def _absent_inputs(t, k, E, dec, fixed, s, cfin, rd_ptr, rd_idx):
    """Op k's inputs that may be absent while t waits (`E` t's earliest need): (bytes
    that may be absent while op k waits, bytes that may be absent while a rebuild of gap
    k runs or waits, whether another input of op k may be a swap still to arrive)."""
    miss = 0
    mayrs = 0
    other = False
    for p in range(rd_ptr[k], rd_ptr[k + 1]):
        u = rd_idx[p]
        if u == t:
            miss += s[u]
            mayrs += s[u]
            continue
        mays = (fixed[u] and dec[u] == SWAP) or not fixed[u]
        if k >= E and mays:
            miss += s[u]
            other = True
        if (fixed[u] and dec[u] == RECOMP) or (not fixed[u] and cfin[u]):
            mayrs += s[u]
        elif k >= E and mays:
            mayrs += s[u]
    return miss, mayrs, other


@njit(cache=True)
def admission_bound(dec, fixed, prof, keep_x, M, slack_u, adm):
    """F + B (s) of a node (module docstring): every completion faster than U (``slack_u
    = U - T*``, s) has ``T >= T* + its rebuild time + F + B``.

    Args: decisions `dec` (int8 [n_saved]) where `fixed` (bool [n_saved]); the node's
    floor profile `prof` (int64 bytes [n_ops]); keep footprints `keep_x` (int64 bytes
    [n_saved, n_ops], :func:`~slackopt.solvers.milp.search.enumeration._footprints`); budget `M`
    (bytes); `adm` from :func:`admission_arrays`. Returns inf when some forward op
    cannot fit."""
    (nf, firstb, lastf, s, c, cfin, rd_ptr, rd_idx, A, rbx, dptr, didx, porder, rptr,
     ridx, fifo, rel, start, endk, lat, wd2h, wslow, wh2d) = adm
    Q = _d2h_ends(dec, fixed, s, fifo, rel, lat, wd2h, np.ones(s.shape[0], dtype=np.bool_))
    F = fwd_stall_lb(dec, fixed, prof, M, nf, s, lastf, start, Q)
    if F == np.inf:
        return F
    return F + blocked_stall_lb(dec, fixed, prof, keep_x, M, slack_u, nf, firstb, s, c,
                                cfin, rd_ptr, rd_idx, A, rbx, dptr, didx, porder, rptr,
                                ridx, fifo, rel, start, endk, lat, wd2h, wslow, wh2d)
