"""SlackSwap's compiled kernels: the segment trees and FIFO tests of both passes.

- Pass 2's memory profile: a max tree over ops with range adds (``_mx_*``,
  :class:`~slackopt.solvers.slackswap.recomp_pass._Profile`); its pick rule: min trees
  over slots (``_mn_*``, :class:`~slackopt.solvers.slackswap.recomp_pass._Candidates`);
- Pass 1's offload test: the offload sums tree (``_off_*``,
  :class:`~slackopt.solvers.slackswap.swap_pass._OffloadTree`) and the per-copy-limit FIFO
  of a pipeline stage (:func:`_offload_fits_with`); its prefetch test
  (:func:`_prefetch_insert`, :func:`_first_covering`).
"""

from __future__ import annotations

import numpy as np

from slackopt.jit import njit

# Each kernel performs the same floating-point operations, in the same order, as the
# plain numpy computation of the same value, so the decisions are those of the reference
# rules bit for bit (tests/test_slackswap.py compares them with recorded decisions).
_NEG = np.iinfo(np.int64).min // 4  # below any profile value (padding leaves)


@njit(cache=True)
def _mx_build(t: np.ndarray, size: int, m: np.ndarray) -> None:
    for i in range(size):
        t[size + i] = m[i] if i < m.size else _NEG
    for v in range(size - 1, 0, -1):
        t[v] = max(t[2 * v], t[2 * v + 1])


@njit(cache=True)
def _mx_add(t: np.ndarray, add: np.ndarray, size: int, lo: int, hi: int, x: int) -> None:
    # Add x on the op range [lo, hi] (inclusive). t[v] = max over v's leaves of their
    # value minus the adds of v's strict ancestors (bottom-up tree, adds never pushed).
    a = lo + size
    b = hi + size + 1
    while a < b:
        if a & 1:
            t[a] += x
            add[a] += x
            a += 1
        if b & 1:
            b -= 1
            t[b] += x
            add[b] += x
        a >>= 1
        b >>= 1
    for v0 in (lo + size, hi + size):
        v = v0 >> 1
        while v:
            t[v] = max(t[2 * v], t[2 * v + 1]) + add[v]
            v >>= 1


@njit(cache=True)
def _mx_point(t: np.ndarray, add: np.ndarray, size: int, i: int) -> int:
    v = i + size
    val = t[v]
    v >>= 1
    while v:
        val += add[v]
        v >>= 1
    return val


@njit(cache=True)
def _mx_first_above(t: np.ndarray, add: np.ndarray, v: int, vl: int, vr: int, i: int,
                    M: int, acc: int) -> int:
    # First op index >= i in v's range [vl, vr) whose value exceeds M, else -1; acc is
    # the sum of the adds of v's strict ancestors.
    if vr <= i or t[v] + acc <= M:
        return -1
    if vr - vl == 1:
        return vl
    mid = (vl + vr) // 2
    acc2 = acc + add[v]
    res = _mx_first_above(t, add, 2 * v, vl, mid, i, M, acc2)
    if res >= 0:
        return res
    return _mx_first_above(t, add, 2 * v + 1, mid, vr, i, M, acc2)


@njit(cache=True)
def _mx_values(t: np.ndarray, add: np.ndarray, size: int, n: int) -> np.ndarray:
    acc = np.zeros(2 * size, dtype=np.int64)
    for v in range(2, 2 * size):
        acc[v] = acc[v >> 1] + add[v >> 1]
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        out[i] = t[size + i] + acc[size + i]
    return out


@njit(cache=True)
def _mn_set(key: np.ndarray, pos: np.ndarray, slot: np.ndarray, size: int, i: int,
            k: float, p: int) -> None:
    # Min tree over slots of (key, position); slot[v] is the leaf slot of v's minimum.
    v = i + size
    key[v] = k
    pos[v] = p
    slot[v] = i
    v >>= 1
    while v:
        a = 2 * v
        b = a + 1
        if key[b] < key[a] or (key[b] == key[a] and pos[b] < pos[a]):
            a = b
        key[v] = key[a]
        pos[v] = pos[a]
        slot[v] = slot[a]
        v >>= 1


@njit(cache=True)
def _mn_query(key: np.ndarray, pos: np.ndarray, slot: np.ndarray, size: int, lo: int,
              hi: int) -> int:
    # Slot of the least (key, position) among slots [lo, hi), -1 if the range is empty.
    best = -1
    bk = np.inf
    bp = np.iinfo(np.int64).max
    a = lo + size
    b = hi + size
    while a < b:
        if a & 1:
            if key[a] < bk or (key[a] == bk and pos[a] < bp):
                bk, bp, best = key[a], pos[a], slot[a]
            a += 1
        if b & 1:
            b -= 1
            if key[b] < bk or (key[b] == bk and pos[b] < bp):
                bk, bp, best = key[b], pos[b], slot[b]
        a >>= 1
        b >>= 1
    return best


@njit(cache=True)
def _off_end_with(sm: np.ndarray, bs: np.ndarray, size: int, p: int, dp: float,
                  rp: float) -> float:
    # The offload tree's last D2H end with position p (duration dp, ready at rp) inserted.
    i = p + size
    cur_s = dp
    cur_b = rp + dp
    while i > 1:
        sib = i ^ 1
        if i & 1:
            cur_b = max(bs[sib] + cur_s, cur_b)
        else:
            cur_b = max(cur_b + sm[sib], bs[sib])
        cur_s += sm[sib]
        i >>= 1
    return cur_b


@njit(cache=True)
def _off_add(sm: np.ndarray, bs: np.ndarray, size: int, p: int, dp: float, rp: float) -> None:
    i = p + size
    sm[i] = dp
    bs[i] = rp + dp
    i >>= 1
    while i:
        a = 2 * i
        sm[i] = sm[a] + sm[a + 1]
        bs[i] = max(bs[a] + sm[a + 1], bs[a + 1])
        i >>= 1


@njit(cache=True)
def _first_covering(cc: np.ndarray, need: int, start: int) -> int:
    # np.searchsorted(cc, need) (the first index with cc >= need) for a need at least
    # cc[start - 1]'s: galloping from start, O(log of the distance).
    if start >= cc.size or cc[start] >= need:
        return start
    step = 1
    lo = start  # cc[lo] < need
    hi = start + 1
    while hi < cc.size and cc[hi] < need:
        lo = hi
        step *= 2
        hi = lo + step
    if hi > cc.size:
        hi = cc.size
    return lo + 1 + np.searchsorted(cc[lo + 1:hi], need)


@njit(cache=True)
def _prefetch_insert(Sdur: np.ndarray, Sd: np.ndarray, Sg: np.ndarray, Sneed: np.ndarray,
                     Sri: np.ndarray, Scd: np.ndarray, Sacc: np.ndarray, nS: int, j: int,
                     sp: int, dp: float, ddp: float, gp: float, cc: np.ndarray,
                     rel_sorted: np.ndarray, b_need: np.ndarray, b_ri: np.ndarray,
                     b_cd: np.ndarray, b_acc: np.ndarray) -> bool:
    # Pass 1's prefetch test for a copy (sp bytes, dp s, deadline ddp, gate gp: the end
    # of its forward unit, T_F in a single pass) joining the queue (first nS entries of
    # the S* arrays, deadline order) at j, and its insertion if it passes. The queue
    # before j keeps its schedule; from j on the closed-form FIFO is recomputed:
    # cumulative bytes, release time (the first credit covering them, not before the
    # copy's gate; Sri holds each entry's credit index, from which the search for the
    # larger need starts), cumulative durations summed left to right, running maximum of
    # ``release - start offset``; each copy must end (cd + acc) by its deadline.
    prev_need = Sneed[j - 1] if j > 0 else 0
    prev_ri = Sri[j - 1] if j > 0 else 0
    prev_cd = Scd[j - 1] if j > 0 else 0.0
    prev_acc = Sacc[j - 1] if j > 0 else -np.inf
    for q in range(nS - j + 1):
        if q == 0:
            need = prev_need + sp
            ri = _first_covering(cc, need, prev_ri)
            du = dp
            dd = ddp
            gate = gp
        else:
            need = Sneed[j + q - 1] + sp
            ri = _first_covering(cc, need, Sri[j + q - 1])
            du = Sdur[j + q - 1]
            dd = Sd[j + q - 1]
            gate = Sg[j + q - 1]
        rel = max(rel_sorted[ri], gate)
        cd = prev_cd + du if (q > 0 or j > 0) else du
        acc = max(prev_acc, rel - (cd - du))
        if not cd + acc <= dd:
            return False
        b_need[q] = need
        b_ri[q] = ri
        b_cd[q] = cd
        b_acc[q] = acc
        prev_cd = cd
        prev_acc = acc
    for q in range(nS - 1, j - 1, -1):
        Sdur[q + 1] = Sdur[q]
        Sd[q + 1] = Sd[q]
        Sg[q + 1] = Sg[q]
    Sdur[j] = dp
    Sd[j] = ddp
    Sg[j] = gp
    for q in range(nS - j + 1):
        Sneed[j + q] = b_need[q]
        Sri[j + q] = b_ri[q]
        Scd[j + q] = b_cd[q]
        Sacc[j + q] = b_acc[q]
    return True


@njit(cache=True)
def _offload_fits_with(rS: np.ndarray, durS: np.ndarray, limS: np.ndarray, nS: int, j: int,
                       rp: float, dp: float, lp: float) -> bool:
    # Pass 1's offload test where each copy has its own limit (a pipeline stage: the end
    # of its forward unit's window): the FIFO of S (production order, first nS entries)
    # with the candidate inserted at j, one copy after the other; every copy must end by
    # its limit. O(|S|).
    end = -np.inf
    for q in range(nS + 1):
        if q < j:
            r, du, lim = rS[q], durS[q], limS[q]
        elif q == j:
            r, du, lim = rp, dp, lp
        else:
            r, du, lim = rS[q - 1], durS[q - 1], limS[q - 1]
        end = max(end, r) + du
        if end > lim:
            return False
    return True

