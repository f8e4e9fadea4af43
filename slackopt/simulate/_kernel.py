"""Compiled barrier-free evaluator (numba), the kernel behind ``engine="compiled"``.

The reference implementation is the Python event loop of :mod:`slackopt.simulate._engine`;
this module runs the same algorithm, statement for statement, over flat arrays so that
search (genetic, repair rounds, sweeps, the MILP's enumeration) can afford thousands of
evaluations per second. The runtime rules both apply are compiled from
:mod:`slackopt.simulate.rules`, and every other floating-point operation is performed in
the same order as in the reference, so the two agree bit for bit; tests/test_fastsim.py
checks that on every test instance and on random plans. Traces are only produced by the
reference loop.

The plan-independent data of an instance is one structure of arrays,
:class:`KernelInputs` (built once by :func:`kernel_inputs`, cached by the caller);
:func:`run_barrier_free` takes it, a decision vector and the budget, and returns plain
numbers.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from slackopt.jit import njit
from slackopt.plan import RECOMP, SWAP
from slackopt.simulate import rules
from slackopt.simulate._tasks import ABSENT, DEV, FETCH, FWD, HOST

# The runtime rules, compiled (inlined: no call overhead in the event loop).
_allocation_fits = njit(inline="always", cache=True)(rules.allocation_fits)
_shortfall = njit(inline="always", cache=True)(rules.shortfall)
_host_admits = njit(inline="always", cache=True)(rules.host_admits)
_lookahead_window = njit(inline="always", cache=True)(rules.lookahead_window)
_h2d_admits = njit(inline="always", cache=True)(rules.h2d_admits)
_copy_rate = njit(inline="always", cache=True)(rules.copy_rate)
_copy_start = njit(inline="always", cache=True)(rules.copy_start)
_copy_event = njit(inline="always", cache=True)(rules.copy_event)
_copy_advance = njit(inline="always", cache=True)(rules.copy_advance)

# Result codes.
OK, FAIL_ALLOC, FAIL_H2D, INTERNAL_NOT_RESIDENT, INTERNAL_NOT_QUEUED, INTERNAL_NO_SHORT = (
    0, 1, 2, 3, 4, 5)
FAIL_HOST = 6
"""A D2H would exceed the host pinned-memory limit (fail_head: the tensor; short: the
host bytes in use)."""


def _csr(lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.zeros(len(lists) + 1, dtype=np.int64)
    for i, lst in enumerate(lists):
        ptr[i + 1] = ptr[i] + len(lst)
    idx = np.fromiter((x for lst in lists for x in lst), dtype=np.int64, count=int(ptr[-1]))
    return ptr, idx


class KernelInputs(NamedTuple):
    """Plan-independent data of one instance in the layout the kernel reads.

    Lists of lists are stored as CSR pairs (``*_ptr``: int64 offsets, one per row plus
    one; ``*_idx``: int64 entries), rows indexed by scheduled op or saved position.

    Attributes:
        op_fwd: whether each op is a forward op, bool [n_ops].
        op_earliest: earliest start of each op's unit (s), float64 [n_ops]: 0 in a single
            pass; in a pipeline stage the compute stream idles until then.
        ue_ptr, ue_idx: per op, the saved tensors whose forward unit ends with it (no
            H2D of them starts before).
        op_dur: op durations (s), float64 [n_ops].
        op_alloc, op_free: bytes an op allocates when it starts (non-saved outputs and
            workspace) and frees when it ends, int64 [n_ops].
        rd_ptr, rd_idx: saved tensors each op reads.
        out_ptr, out_idx: saved tensors each op produces.
        fr_ptr, fr_idx: per op, the saved tensors whose last forward reader it is.
        s: saved tensor sizes (bytes), int64 [n_saved].
        c: rebuild times (s, inf when not rebuildable), float64 [n_saved].
        rb_extra: bytes a rebuild holds besides its tensor (transient and workspace).
        ri_ptr, ri_idx: recipe inputs of each saved tensor.
        rdy_ptr, rdy_idx: per op, the saved tensors ready when it ends (D2H queued then).
        host_limit: host pinned-memory limit (bytes), -1 for unlimited.
        w_d2h, w_h2d: the link's D2H and H2D bandwidths (B/s).
        duplex: the link's duplex factor.
        latency: the fixed cost of every copy (s).
    """

    op_fwd: np.ndarray
    op_earliest: np.ndarray
    ue_ptr: np.ndarray
    ue_idx: np.ndarray
    op_dur: np.ndarray
    op_alloc: np.ndarray
    op_free: np.ndarray
    rd_ptr: np.ndarray
    rd_idx: np.ndarray
    out_ptr: np.ndarray
    out_idx: np.ndarray
    fr_ptr: np.ndarray
    fr_idx: np.ndarray
    s: np.ndarray
    c: np.ndarray
    rb_extra: np.ndarray
    ri_ptr: np.ndarray
    ri_idx: np.ndarray
    rdy_ptr: np.ndarray
    rdy_idx: np.ndarray
    host_limit: int
    w_d2h: float
    w_h2d: float
    duplex: float
    latency: float


def kernel_inputs(st, link) -> KernelInputs:
    """The :class:`KernelInputs` of an instance, from the reference evaluator's
    per-instance lists (``st``: :class:`slackopt.simulate._tasks._Static`) and its
    :class:`~slackopt.hardware.Link`, so both engines read the same data."""
    fwd_rel: list[list[int]] = [[] for _ in range(st.n)]
    for t, i in enumerate(st.fwd_release):
        fwd_rel[i].append(t)
    return KernelInputs(
        np.asarray(st.is_fwd, dtype=np.bool_), np.asarray(st.op_earliest, dtype=np.float64),
        *_csr(st.unit_end), np.asarray(st.dur, dtype=np.float64),
        np.asarray(st.op_alloc, dtype=np.int64), np.asarray(st.op_free, dtype=np.int64),
        *_csr(st.reads), *_csr(st.outs), *_csr(fwd_rel),
        np.asarray(st.s, dtype=np.int64), np.asarray(st.c, dtype=np.float64),
        np.asarray(st.rebuild_extra, dtype=np.int64),
        *_csr([list(x) for x in st.recipe_inputs]), *_csr(st.ready),
        int(st.host_limit), float(link.d2h_bytes_per_s), float(link.h2d_bytes_per_s),
        float(link.duplex_factor), float(link.copy_latency_s))


@njit(cache=True)
def _heap_push(hk, ht, n, key, t):
    # Binary min-heap on (key, t); arrays grown by the caller.
    i = n
    hk[i] = key
    ht[i] = t
    while i > 0:
        p = (i - 1) // 2
        if hk[p] < hk[i] or (hk[p] == hk[i] and ht[p] <= ht[i]):
            break
        hk[p], hk[i] = hk[i], hk[p]
        ht[p], ht[i] = ht[i], ht[p]
        i = p
    return n + 1


@njit(cache=True)
def _heap_pop(hk, ht, n):
    n -= 1
    hk[0] = hk[n]
    ht[0] = ht[n]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= n:
            break
        m = left
        r = left + 1
        if r < n and (hk[r] < hk[left] or (hk[r] == hk[left] and ht[r] < ht[left])):
            m = r
        if hk[i] < hk[m] or (hk[i] == hk[m] and ht[i] <= ht[m]):
            break
        hk[m], hk[i] = hk[i], hk[m]
        ht[m], ht[i] = ht[i], ht[m]
        i = m
    return n


@njit(cache=True)
def build_tasks(inp, dec):
    """Task list of a plan (`inp`: :class:`KernelInputs`; `dec`: int8 decisions): same
    order as slackopt.simulate.build_tasks. Returns (task_op, task_t)."""
    op_fwd, rd_ptr, rd_idx = inp.op_fwd, inp.rd_ptr, inp.rd_idx
    ri_ptr, ri_idx = inp.ri_ptr, inp.ri_idx
    n_ops = inp.op_dur.shape[0]
    ns = dec.shape[0]
    task_op = np.empty(n_ops + ns, dtype=np.int64)
    task_t = np.empty(n_ops + ns, dtype=np.int64)
    nt = 0
    rebuilt = np.zeros(ns, dtype=np.bool_)
    stack_t = np.empty(ns + 1, dtype=np.int64)
    stack_j = np.empty(ns + 1, dtype=np.int64)
    for i in range(n_ops):
        if op_fwd[i]:
            task_op[nt] = i
            task_t[nt] = -1
            nt += 1
            continue
        for p in range(rd_ptr[i], rd_ptr[i + 1]):
            t0 = rd_idx[p]
            if dec[t0] != RECOMP or rebuilt[t0]:
                continue
            stack_t[0] = t0
            stack_j[0] = 0
            sp = 1
            while sp > 0:
                sp -= 1
                t = stack_t[sp]
                j = stack_j[sp]
                a = ri_ptr[t]
                b = ri_ptr[t + 1]
                while a + j < b and (dec[ri_idx[a + j]] != RECOMP or rebuilt[ri_idx[a + j]]):
                    j += 1
                if a + j < b:
                    stack_t[sp] = t
                    stack_j[sp] = j + 1
                    sp += 1
                    stack_t[sp] = ri_idx[a + j]
                    stack_j[sp] = 0
                    sp += 1
                elif not rebuilt[t]:
                    rebuilt[t] = True
                    task_op[nt] = -1
                    task_t[nt] = t
                    nt += 1
        task_op[nt] = i
        task_t[nt] = -1
        nt += 1
    return task_op[:nt], task_t[:nt]


@njit(cache=True)
def run_barrier_free(inp, dec, M):
    """One iteration under the barrier-free runtime (see slackopt.simulate), with its
    runtime rules: the H2D heap holds only queued tensors whose host copy is complete (no
    head-of-line blocking), a queued D2H is dropped when its tensor's last backward reader
    ends, and a task claims every lagging device copy it reads before it waits.

    Args:
        inp: the instance's :class:`KernelInputs`.
        dec: int8 decisions per saved tensor (KEEP/SWAP/RECOMP).
        M: the budget (bytes).

    Returns (code, now, stall_fwd, stall_bwd, recompute, d2h_bytes, h2d_bytes, evictions,
    peak, used, fail_task, fail_head, short, h2d_stall, task_op, task_t); for FAIL_HOST,
    fail_head is the tensor whose D2H was refused and short the host bytes in use.
    """
    op_fwd, op_earliest, ue_ptr, ue_idx = inp.op_fwd, inp.op_earliest, inp.ue_ptr, inp.ue_idx
    op_dur, op_alloc, op_free = inp.op_dur, inp.op_alloc, inp.op_free
    rd_ptr, rd_idx, out_ptr, out_idx = inp.rd_ptr, inp.rd_idx, inp.out_ptr, inp.out_idx
    fr_ptr, fr_idx, rdy_ptr, rdy_idx = inp.fr_ptr, inp.fr_idx, inp.rdy_ptr, inp.rdy_idx
    s, c, rb_extra, ri_ptr, ri_idx = inp.s, inp.c, inp.rb_extra, inp.ri_ptr, inp.ri_idx
    host_limit, duplex, lat = inp.host_limit, inp.duplex, inp.latency
    w_d2h, w_h2d = inp.w_d2h, inp.w_h2d
    ns = dec.shape[0]
    INF = np.inf
    task_op, task_t = build_tasks(inp, dec)
    nt = task_op.shape[0]
    # Per-task phase (forward op or not) and earliest start (that of the unit of its op,
    # or of the op a rebuild is inserted before).
    task_fwd = np.zeros(nt, dtype=np.bool_)
    task_rel = np.zeros(nt, dtype=np.float64)
    nxt = 0.0
    for k in range(nt - 1, -1, -1):
        op = task_op[k]
        if op >= 0:
            task_fwd[k] = op_fwd[op]
            nxt = op_earliest[op]
        task_rel[k] = nxt
    # Per-task durations, allocations, frees and reads (CSR).
    dur = np.empty(nt, dtype=np.float64)
    alloc = np.empty(nt, dtype=np.int64)
    free = np.empty(nt, dtype=np.int64)
    tr_ptr = np.zeros(nt + 1, dtype=np.int64)
    for k in range(nt):
        op = task_op[k]
        if op >= 0:
            tr_ptr[k + 1] = tr_ptr[k] + (rd_ptr[op + 1] - rd_ptr[op])
        else:
            t = task_t[k]
            tr_ptr[k + 1] = tr_ptr[k] + (ri_ptr[t + 1] - ri_ptr[t])
    tr_idx = np.empty(tr_ptr[nt], dtype=np.int64)
    for k in range(nt):
        op = task_op[k]
        q = tr_ptr[k]
        if op >= 0:
            dur[k] = op_dur[op]
            a = op_alloc[op]
            if op_fwd[op]:
                for p in range(out_ptr[op], out_ptr[op + 1]):
                    a += s[out_idx[p]]
            alloc[k] = a
            free[k] = op_free[op]
            for p in range(rd_ptr[op], rd_ptr[op + 1]):
                tr_idx[q] = rd_idx[p]
                q += 1
        else:
            t = task_t[k]
            dur[k] = c[t]
            alloc[k] = s[t] + rb_extra[t]
            free[k] = rb_extra[t]
            for p in range(ri_ptr[t], ri_ptr[t + 1]):
                tr_idx[q] = ri_idx[p]
                q += 1
    cum = np.zeros(nt + 1, dtype=np.int64)
    for k in range(nt):
        cum[k + 1] = cum[k] + alloc[k]
    # Backward reader tasks of each saved tensor (CSR, task order) and releases.
    ncnt = np.zeros(ns, dtype=np.int64)
    for k in range(nt):
        if task_fwd[k]:
            continue
        for p in range(tr_ptr[k], tr_ptr[k + 1]):
            ncnt[tr_idx[p]] += 1
    nd_ptr = np.zeros(ns + 1, dtype=np.int64)
    for t in range(ns):
        nd_ptr[t + 1] = nd_ptr[t] + ncnt[t]
    nd_idx = np.empty(nd_ptr[ns], dtype=np.int64)
    fill = nd_ptr[:ns].copy()
    for k in range(nt):
        if task_fwd[k]:
            continue
        for p in range(tr_ptr[k], tr_ptr[k + 1]):
            t = tr_idx[p]
            nd_idx[fill[t]] = k
            fill[t] += 1
    rcnt = np.zeros(nt + 1, dtype=np.int64)
    for t in range(ns):
        if ncnt[t] > 0:
            rcnt[nd_idx[nd_ptr[t + 1] - 1] + 1] += 1
    for k in range(nt):
        rcnt[k + 1] += rcnt[k]
    rl_idx = np.empty(rcnt[nt], dtype=np.int64)
    rfill = rcnt[:nt].copy()
    for t in range(ns):
        if ncnt[t] > 0:
            last = nd_idx[nd_ptr[t + 1] - 1]
            rl_idx[rfill[last]] = t
            rfill[last] += 1

    state = np.zeros(ns, dtype=np.int8)
    d2h_done = np.zeros(ns, dtype=np.bool_)
    fwd_done = np.zeros(ns, dtype=np.bool_)
    unit_done = np.zeros(ns, dtype=np.bool_)  # its forward unit ended: H2D may start
    need_ptr = np.zeros(ns, dtype=np.int64)
    qkey = np.full(ns, -1, dtype=np.int64)
    cap = 2 * ns + 16
    hk = np.empty(cap, dtype=np.int64)
    ht = np.empty(cap, dtype=np.int64)
    hn = 0
    # H2D queue: qkey[t] >= 0 while queued; the heap holds queued tensors on the host
    # (pushed when their host copy is complete: no head-of-line blocking). A tensor's copy
    # turns complete at most once (FWD -> HOST), so keeping hn + ns <= capacity before
    # every eviction push (the only other push) leaves room for those pushes.
    for t in range(ns):
        if dec[t] == SWAP and ncnt[t] > 0:
            qkey[t] = nd_idx[nd_ptr[t]]
    d2hq = np.empty(ns + 1, dtype=np.int64)
    d2h_q = np.zeros(ns, dtype=np.bool_)  # queued and not started (False: dropped)
    qh = 0
    qt = 0
    h2d_end = np.full(ns, -1.0)
    h2d_stall = np.zeros(ns)
    reading = np.zeros(ns, dtype=np.bool_)
    host_held = np.zeros(ns, dtype=np.bool_)
    host_rel = np.zeros(ns, dtype=np.bool_)
    host_used = 0

    now = 0.0
    used = 0
    peak = 0
    k = 0
    comp_busy = False
    comp_end = INF
    prev_end = 0.0
    stall_fwd = 0.0
    stall_bwd = 0.0
    recompute = 0.0
    d2h_bytes = 0
    h2d_bytes = 0
    evictions = 0
    wait_since = -1.0
    # Copy engines: tensor (-1 idle), latency end, remaining bytes.
    d_t = -1
    d_lat = 0.0
    d_rem = 0.0
    h_t = -1
    h_lat = 0.0
    h_rem = 0.0
    code = OK
    fail_task = -1
    fail_head = -1
    short = 0

    while True:
        progressed = True
        while progressed:
            progressed = False
            if not comp_busy and k < nt and task_rel[k] <= now:
                missing = -1
                for p in range(tr_ptr[k], tr_ptr[k + 1]):
                    t = tr_idx[p]
                    stt = state[t]
                    if stt == DEV:
                        continue
                    if stt == FWD:
                        if not task_fwd[k]:
                            state[t] = DEV
                            qkey[t] = -1
                        continue
                    if dec[t] != SWAP:
                        return (INTERNAL_NOT_RESIDENT, now, 0.0, 0.0, 0.0, 0, 0, 0, 0, 0, k, t,
                                0, h2d_stall, task_op, task_t)
                    if missing < 0:
                        missing = t
                if missing < 0:
                    if wait_since >= 0.0 and now > wait_since:
                        last = -1
                        best = -2.0
                        best_nz = False
                        for p in range(tr_ptr[k], tr_ptr[k + 1]):
                            t = tr_idx[p]
                            if dec[t] == SWAP:
                                e = h2d_end[t]
                                nz = s[t] > 0
                                if (last < 0 or (nz and not best_nz)
                                        or (nz == best_nz and (e > best
                                                               or (e == best and t > last)))):
                                    best = e
                                    best_nz = nz
                                    last = t
                        h2d_stall[last] = h2d_stall[last] + now - wait_since
                    wait_since = -1.0
                    a = alloc[k]
                    if _allocation_fits(used, a, M):
                        idle = now - max(prev_end, task_rel[k])
                        if idle > 0.0:
                            if task_fwd[k]:
                                stall_fwd += idle
                            else:
                                stall_bwd += idle
                        used += a
                        if used > peak:
                            peak = used
                        t_r = task_t[k]
                        if t_r >= 0:
                            state[t_r] = DEV
                            recompute += dur[k]
                        else:
                            op = task_op[k]
                            if task_fwd[k]:
                                for p in range(out_ptr[op], out_ptr[op + 1]):
                                    t = out_idx[p]
                                    state[t] = FWD if dec[t] == SWAP else DEV
                        comp_busy = True
                        comp_end = now + dur[k]
                        progressed = True
                elif wait_since < 0.0:
                    wait_since = now
            while qh < qt and not d2h_q[d2hq[qh]]:
                qh += 1
            if d_t < 0 and qh < qt:
                t = d2hq[qh]
                if not host_held[t]:
                    if not _host_admits(host_used, s[t], host_limit):
                        code = FAIL_HOST
                        fail_task = k
                        fail_head = t
                        short = host_used
                        break
                    host_held[t] = True
                    host_used += s[t]
                qh += 1
                d2h_q[t] = False
                d_t = t
                d_lat, d_rem = _copy_start(now, s[t], lat)
                d2h_bytes += s[t]
                progressed = True
            if h_t < 0:
                while hn > 0 and (qkey[ht[0]] != hk[0] or state[ht[0]] != HOST):
                    hn = _heap_pop(hk, ht, hn)
                if hn > 0:
                    t = ht[0]
                    waiting = False
                    if not comp_busy and k < nt:
                        for p in range(tr_ptr[k], tr_ptr[k + 1]):
                            if tr_idx[p] == t:
                                waiting = True
                                break
                    if waiting:
                        reserved = 0
                    else:
                        first, end = _lookahead_window(k, comp_busy, nt)
                        reserved = cum[end] - cum[first]
                    if _h2d_admits(used, s[t], reserved, M):
                        hn = _heap_pop(hk, ht, hn)
                        qkey[t] = -1
                        used += s[t]
                        if used > peak:
                            peak = used
                        h2d_bytes += s[t]
                        if s[t] == 0:
                            state[t] = DEV
                            h2d_end[t] = now
                        else:
                            state[t] = FETCH
                            h_t = t
                            h_lat, h_rem = _copy_start(now, s[t], lat)
                        progressed = True

        if code != OK:
            break
        if k >= nt and not comp_busy:
            break
        ev = comp_end if comp_busy else INF
        if not comp_busy and k < nt and task_rel[k] > now:
            ev = task_rel[k]  # the compute stream idles until its unit starts
        d_rate = _copy_rate(w_d2h, duplex, h_t >= 0)
        h_rate = _copy_rate(w_h2d, duplex, d_t >= 0)
        d_ev = INF
        h_ev = INF
        if d_t >= 0:
            d_ev = _copy_event(now, d_lat, d_rem, d_rate)
            ev = min(ev, d_ev)
        if h_t >= 0:
            h_ev = _copy_event(now, h_lat, h_rem, h_rate)
            ev = min(ev, h_ev)
        if ev == INF:
            while hn > 0 and (qkey[ht[0]] != hk[0] or state[ht[0]] != HOST):
                hn = _heap_pop(hk, ht, hn)
            missing_input = False
            for p in range(tr_ptr[k], tr_ptr[k + 1]):
                stt = state[tr_idx[p]]
                if stt != DEV and stt != FWD:
                    missing_input = True
                    break
            head = -1
            if missing_input:
                head = ht[0] if hn > 0 else -1
                if head < 0 or state[head] != HOST:
                    return (INTERNAL_NOT_QUEUED, now, 0.0, 0.0, 0.0, 0, 0, 0, 0, 0, k, head,
                            0, h2d_stall, task_op, task_t)
                short = _shortfall(used, s[head], M)
            else:
                short = _shortfall(used, alloc[k], M)
            if short <= 0:
                return (INTERNAL_NO_SHORT, now, 0.0, 0.0, 0.0, 0, 0, 0, 0, 0, k, head, short,
                        h2d_stall, task_op, task_t)
            # Eviction fallback: furthest next use first, only if that makes room.
            for p in range(tr_ptr[k], tr_ptr[k + 1]):
                reading[tr_idx[p]] = True
            total = 0
            nc = 0
            ckey = np.empty(ns, dtype=np.int64)
            for t in range(ns):
                if (dec[t] == SWAP and state[t] == DEV and d2h_done[t] and not reading[t]
                        and s[t] > 0 and need_ptr[t] < ncnt[t]):
                    ckey[nc] = nd_idx[nd_ptr[t] + need_ptr[t]] * ns + t
                    nc += 1
                    total += s[t]
            for p in range(tr_ptr[k], tr_ptr[k + 1]):
                reading[tr_idx[p]] = False
            if total >= short:
                order = np.sort(ckey[:nc])[::-1]
                freed = 0
                for q in range(nc):
                    if freed >= short:
                        break
                    t = order[q] % ns
                    nxt = order[q] // ns
                    state[t] = HOST
                    freed += s[t]
                    evictions += 1
                    qkey[t] = nxt
                    if hn + ns + 1 > hk.shape[0]:
                        # Keep room for the <= ns pushes of host copies completing later.
                        hk2 = np.empty(2 * hk.shape[0], dtype=np.int64)
                        ht2 = np.empty(2 * hk.shape[0], dtype=np.int64)
                        hk2[:hn] = hk[:hn]
                        ht2[:hn] = ht[:hn]
                        hk = hk2
                        ht = ht2
                    hn = _heap_push(hk, ht, hn, nxt, t)
                used -= freed
                continue
            code = FAIL_H2D if missing_input else FAIL_ALLOC
            fail_task = k
            fail_head = head
            break
        d_fin = False
        h_fin = False
        if d_t >= 0:
            d_rem, d_fin = _copy_advance(now, d_lat, d_rem, d_rate, d_ev, ev)
        if h_t >= 0:
            h_rem, h_fin = _copy_advance(now, h_lat, h_rem, h_rate, h_ev, ev)
        now = ev
        if d_fin:
            t = d_t
            d_t = -1
            d2h_done[t] = True
            if state[t] == FWD and fwd_done[t]:
                state[t] = HOST
                used -= s[t]
                if qkey[t] >= 0 and unit_done[t]:
                    hn = _heap_push(hk, ht, hn, qkey[t], t)
            if host_rel[t] and host_held[t]:
                host_held[t] = False
                host_used -= s[t]
        if h_fin:
            t = h_t
            h_t = -1
            state[t] = DEV
            h2d_end[t] = now
        if comp_busy and comp_end == ev:
            comp_busy = False
            comp_end = INF
            prev_end = now
            used -= free[k]
            op = task_op[k]
            if op >= 0 and op_fwd[op]:
                for p in range(rdy_ptr[op], rdy_ptr[op + 1]):
                    t = rdy_idx[p]
                    if dec[t] == SWAP:
                        if s[t] == 0:
                            d2h_done[t] = True
                        else:
                            d2hq[qt] = t
                            qt += 1
                            d2h_q[t] = True
                for p in range(fr_ptr[op], fr_ptr[op + 1]):
                    t = fr_idx[p]
                    d = dec[t]
                    if d == RECOMP:
                        state[t] = ABSENT
                        used -= s[t]
                    elif d == SWAP:
                        fwd_done[t] = True
                        if d2h_done[t] and state[t] == FWD:
                            state[t] = HOST
                            used -= s[t]
                            if qkey[t] >= 0 and unit_done[t]:
                                hn = _heap_push(hk, ht, hn, qkey[t], t)
                for p in range(ue_ptr[op], ue_ptr[op + 1]):
                    t = ue_idx[p]  # the forward unit of t ends: its H2D may start
                    unit_done[t] = True
                    if state[t] == HOST and qkey[t] >= 0:
                        hn = _heap_push(hk, ht, hn, qkey[t], t)
            else:
                for p in range(tr_ptr[k], tr_ptr[k + 1]):
                    need_ptr[tr_idx[p]] += 1
            for p in range(rcnt[k], rcnt[k + 1]):
                t = rl_idx[p]
                d2h_q[t] = False  # no reader left: a D2H not started yet is dropped
                host_rel[t] = True
                if host_held[t] and d2h_done[t]:
                    host_held[t] = False
                    host_used -= s[t]
                if state[t] == DEV or state[t] == FWD:
                    used -= s[t]
                state[t] = ABSENT
                qkey[t] = -1
            k += 1

    return (code, now, stall_fwd, stall_bwd, recompute, d2h_bytes, h2d_bytes, evictions,
            peak, used, fail_task, fail_head, short, h2d_stall, task_op, task_t)
