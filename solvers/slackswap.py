"""SlackSwap: the two-pass keep/swap/recompute planner with validation and repair.

Paper: the SlackSwap paper (2026), section 3 (Algorithm 1); the details the paper leaves
open are pinned in docs/model.md ("SlackSwap details the paper leaves open").

- :func:`pass1` (sec. 3.2, Alg. 1 lines 2-6) spends the link budget: it adds saved
  tensors to the swap set S in decreasing recompute cost per byte rho while both the
  offload schedule (D2H, production order, ends before (1 - g) T_F) and the prefetch
  schedule (H2D from T_F in deadline order, gated by the memory the backward pass
  releases) stay feasible, until S covers the deficit D = P - M. Each schedule runs at
  its direction's bandwidth: offloads (and the link budget) at W_d2h, prefetches at W_h2d.
- :func:`pass2` (sec. 3.3, Alg. 1 lines 7-12) recomputes the cheapest bytes: at the
  first operator whose planned memory m(i) exceeds M it marks recomp the resident,
  unused keep tensor with the lowest c_t / min(s_t, E), E the largest remaining excess;
  with no candidate it converts the earliest block to full recomputation.
- :func:`plan` runs both passes; :class:`SlackSwap` (sec. 3.4) replays each plan in the
  evaluator (:func:`slackopt.simulate.simulate`) and repairs it for at most six rounds.

Runtime rules (docs/model.md, "Plan semantics under the barrier-free runtime"): Pass 1
plans every D2H to end by (1 - g) T_F, before the first H2D may start, so its model needs
none of the three rules that keep the runtime from wasting the link: no H2D waits on an
unfinished D2H (no head-of-line blocking to model), no D2H can be dropped (every swapped
tensor still has its backward readers at T_F) and no device copy lags into the backward
pass (no lagging inputs to claim). Validation replays each plan in the evaluator, which
implements the rules, and the repair rounds act on what it observes.

Planning time (README, "n log n"): Pass 2 and the offload test of Pass 1 cost
O(log n) per step (segment trees, compiled kernels); Pass 1's prefetch test recomputes the
queue after the candidate's place, O(|S|) per candidate at worst (see :func:`pass1`).

All functions are deterministic. Saved tensors are addressed by their position in
``Instance.saved`` (production order).
"""

from __future__ import annotations

import bisect
import math
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from slackopt.instance import Instance
from slackopt.jit import njit
from slackopt.linkbudget import forward_link_budget_bytes
from slackopt.plan import KEEP, RECOMP, SWAP, Plan
from slackopt.simulate import Evaluation, simulate
from slackopt.simulate.rules import copy_time, fifo_ends
from slackopt.solverbase import (
    MIN_BUDGET_REL_TOL,
    BaseSolver,
    Outcome,
    Param,
    Run,
)

SWAP_ORDERS = ("rho", "production")
GUARD_STEP = 0.02
"""Raise of the offload guard g after a round with forward stalls (docs/model.md)."""


# --------------------------------------------------------------------------- per-instance data
class _Prep:
    """Plan-independent arrays of one instance, computed once and cached."""

    def __init__(self, inst: Instance) -> None:
        n = inst.n_saved
        link = inst.link
        self.n = n
        self.w_h2d = float(link.h2d_bytes_per_s)
        self.lat = float(link.copy_latency_s)
        self.s = np.asarray(inst.s, dtype=np.int64)
        self.sf = self.s.astype(np.float64)
        # Planned copy times, each at its direction's full bandwidth (sec. 3.2).
        self.dur = copy_time(self.sf, float(link.d2h_bytes_per_s), self.lat)   # D2H
        self.dur_h2d = copy_time(self.sf, self.w_h2d, self.lat)                # H2D
        self.r = np.asarray(inst.r, dtype=np.float64)
        self.d = np.asarray(inst.d, dtype=np.float64)
        self.c = np.asarray(inst.c, dtype=np.float64)
        self.finite_c = np.isfinite(self.c)
        self.TF = float(inst.forward_time_s)
        self.n_ops = inst.n_ops
        self.end_s = np.asarray(inst.end_s, dtype=np.float64)
        # The window of each offload and the gate of each prefetch: the forward unit of
        # the tensor's microbatch (a pipeline stage, docs/model.md), from its start to its
        # end; in a single pass [0, T_F] for every tensor.
        self.single = inst.single_pass
        fe = np.asarray(inst.saved_fwd_end_idx, dtype=np.int64)
        first_op = (np.asarray(inst.unit_last_op) + 1
                    - np.array([u.n_ops for u in inst.units], dtype=np.int64))
        fs = first_op[np.asarray(inst.op_unit)[fe]] if n else fe
        self.fwd_end = self.end_s[fe] if n else np.zeros(0)
        self.fwd_start = np.asarray(inst.start_s, dtype=np.float64)[fs] if n else np.zeros(0)
        self.prod = np.asarray(inst.saved_prod_idx, dtype=np.int64)
        self.last_fwd = np.asarray(inst.saved_last_fwd_idx, dtype=np.int64)
        self.first_bwd = np.asarray(inst.saved_first_bwd_idx, dtype=np.int64)
        self.last_bwd = np.asarray(inst.saved_last_bwd_idx, dtype=np.int64)
        # Prefetch credits: every saved tensor frees its bytes when its last backward
        # reader ends (a kept tensor, or a swapped tensor's prefetch buffer);
        # cc[j] = bytes freed by the j+1 earliest releases.
        rel = self.end_s[self.last_bwd] if n else np.zeros(0)
        self.rel_order = np.argsort(rel, kind="stable")
        self.rel_sorted = rel[self.rel_order]
        self.credits = np.cumsum(self.s[self.rel_order])
        # Recipe graph: inputs (given) and dependents (tensors whose recipe reads k).
        self.inputs: list[tuple[int, ...]] = [tuple(x) for x in inst.recipe_inputs]
        deps: list[list[int]] = [[] for _ in range(n)]
        for u, ins in enumerate(self.inputs):
            for k in ins:
                deps[k].append(u)
        self.dependents = deps
        # Dependents before their inputs (reverse topological order of input -> dependent).
        self.topo = _dependents_first(self.inputs, n)
        # Blocks (layers >= 0) in forward order, with their saved positions.
        layers = np.asarray(inst.saved_layers, dtype=np.int64)
        self.layers = layers
        self.blocks = sorted({int(b) for b in layers.tolist() if b >= 0})
        # Saved positions of each block, ascending (one stable sort, not a scan per block).
        by_layer = np.argsort(layers, kind="stable")
        bounds = np.searchsorted(layers[by_layer], self.blocks + [np.iinfo(np.int64).max])
        self.block_members = {b: by_layer[bounds[q]:bounds[q + 1]]
                              for q, b in enumerate(self.blocks)}
        self.static = np.asarray(inst.static_profile, dtype=np.int64)


def _dependents_first(inputs: list[tuple[int, ...]], n: int) -> list[int]:
    """Order of saved positions in which every tensor comes before its recipe inputs."""
    order: list[int] = []
    state = [0] * n  # 0 new, 1 on stack, 2 done
    # Iterative DFS from the last-produced tensors; emit post-order over "dependent ->
    # input" edges reversed: a tensor is emitted after all tensors that read it.
    deps: list[list[int]] = [[] for _ in range(n)]
    for u, ins in enumerate(inputs):
        for k in ins:
            deps[k].append(u)
    for root in range(n - 1, -1, -1):
        if state[root]:
            continue
        stack = [(root, iter(deps[root]))]
        state[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                state[node] = 2
                order.append(node)
            elif state[nxt] == 0:
                state[nxt] = 1
                stack.append((nxt, iter(deps[nxt])))
    # Post-order on the "input -> dependent" graph emits a tensor after every tensor
    # that (transitively) reads it: dependents first.
    return order


_PREP: weakref.WeakKeyDictionary[Instance, _Prep] = weakref.WeakKeyDictionary()


def _prep(inst: Instance) -> _Prep:
    p = _PREP.get(inst)
    if p is None:
        p = _Prep(inst)
        _PREP[inst] = p
    return p


def _positions(instance: Instance, items: Any) -> np.ndarray:
    """Saved positions from an iterable of positions or saved-tensor names."""
    out = []
    for x in items if items is not None else ():
        out.append(instance.saved_position(x) if isinstance(x, str) else int(x))
    return np.array(sorted(set(out)), dtype=np.int64)


# --------------------------------------------------------------------------- compiled kernels
# Small numba kernels for the planner's data structures (planning time). Each
# performs the same floating-point operations, in the same order, as the numpy code it
# replaced, so the decisions are unchanged bit for bit (tests/test_slackswap.py compares
# them with decisions recorded before the change).
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


# --------------------------------------------------------------------------- Pass 1
class _OffloadTree:
    """Pass 1's offload test in O(log n) per candidate.

    The planned D2H copies of S run one at a time in production order, copy k from its
    r_k, so the last one ends at ``max_{k in S} (r_k + sum of S durations at positions
    >= k)``. A segment tree over saved positions keeps, per node, the durations' sum and
    that maximum within the node, so both the insertion of a position and the end with a
    candidate inserted cost O(log n).

    The tree sums in another order than the reference test (the O(n) prefix/suffix
    maxima of :meth:`exact_end`, the test Pass 1 has always made), so the two may differ
    in the last bits; a candidate whose tree value lies within a relative 1e-9 of the
    limit (far above the rounding error of n additions) is decided by the reference test,
    so the decisions are those of the reference test, bit for bit.
    """

    REL_TOL = 1e-9

    def __init__(self, n: int, r: np.ndarray, limit: float) -> None:
        size = 1
        while size < max(n, 1):
            size *= 2
        self.size = size
        self.sum = np.zeros(2 * size)
        self.best = np.full(2 * size, -np.inf)
        self.r = r
        self.r_l = r.tolist()
        self.limit = limit
        self.tol = self.REL_TOL * max(abs(limit), 1e-300)
        self.durS = np.zeros(n)
        self.inS = np.zeros(n, dtype=bool)

    def add(self, p: int, dp: float) -> None:
        """Insert position p with copy duration dp (s)."""
        self.durS[p] = dp
        self.inS[p] = True
        _off_add(self.sum, self.best, self.size, p, dp, self.r_l[p])

    def fits_with(self, p: int, dp: float) -> bool:
        """True if the last D2H copy ends by the limit with p (not in S) inserted."""
        cur_b = _off_end_with(self.sum, self.best, self.size, p, dp, self.r_l[p])
        if abs(cur_b - self.limit) > self.tol:
            return cur_b <= self.limit
        return not self.exact_end(p, dp) > self.limit

    def exact_end(self, p: int, dp: float) -> float:
        """The reference test's last D2H end with p inserted, O(n): ``max(PM_p + dp,
        r_p + dp + tail_{p+1}, SM_p)`` with tail the suffix sums of S's durations (summed
        from the last position down), V_k = r_k + tail_k on S, PM_p / SM_p the maxima of V
        before / after p."""
        n = self.durS.size
        tail = np.zeros(n + 1)
        tail[:n] = np.cumsum(self.durS[::-1])[::-1]
        V = np.where(self.inS, self.r + tail[:n], -np.inf)
        pm = V[:p].max() if p > 0 else -np.inf
        sm = V[p + 1:].max() if p + 1 < n else -np.inf
        return max(pm + dp, self.r_l[p] + dp + tail[p + 1], sm)


@dataclass(frozen=True)
class SwapSet:
    """Result of Pass 1.

    Attributes:
        positions: saved positions of the swap set S, in production order.
        offload_end_s: per saved tensor, the end of its D2H copy in the planned offload
            schedule (s), NaN outside S.
        prefetch_end_s: per saved tensor, the end of its H2D copy in the planned prefetch
            schedule (s), NaN outside S.
        swapped_bytes: bytes of S.
        deficit_bytes: D = P - M.
        candidates_checked: number of candidates tested.
    """

    positions: np.ndarray
    offload_end_s: np.ndarray
    prefetch_end_s: np.ndarray
    swapped_bytes: int
    deficit_bytes: int
    candidates_checked: int = 0

    def mask(self) -> np.ndarray:
        m = np.zeros(self.offload_end_s.size, dtype=bool)
        m[self.positions] = True
        return m


def offload_schedule(instance: Instance, positions: Any) -> np.ndarray:
    """End times (s) of the D2H copies of `positions` (saved positions), FIFO in production
    order, each starting no earlier than its r and taking latency + s / W_d2h (sec. 3.2)."""
    pr = _prep(instance)
    pos = np.sort(np.asarray(positions, dtype=np.int64))
    return fifo_ends(pr.r[pos], pr.dur[pos])


def prefetch_schedule(instance: Instance, positions: Any) -> tuple[np.ndarray, np.ndarray]:
    """Planned H2D schedule of swap set `positions` (sec. 3.2).

    Copies start no earlier than T_F, run one at a time in deadline order (d, ties by
    production order) and copy j starts only once the bytes released by the ideal
    backward pass (each saved tensor at the end of its last backward reader) cover the
    bytes of copies 1..j. Memory is assumed full at T_F; a swapped tensor is released
    like a kept one, since its prefetch buffer is freed after its last backward reader
    (see :func:`pass1` for this reading of sec. 3.2).

    Returns:
        (order, ends): saved positions in prefetch order and each copy's end time (s);
        an end is ``inf`` if the releases never cover the copy.
    """
    pr = _prep(instance)
    pos = np.asarray(positions, dtype=np.int64)
    order = pos[np.lexsort((pos, pr.d[pos]))]
    return order, _prefetch_ends(pr, order)


def _prefetch_ends(pr: _Prep, order: np.ndarray) -> np.ndarray:
    """H2D ends for the copies of saved positions `order` in queue order, gated by the
    release credits ``pr.credits`` and by the end of each tensor's forward unit."""
    if order.size == 0:
        return np.zeros(0)
    s_ord = pr.s[order]
    cc = pr.credits
    need = np.cumsum(s_ord)
    ri = np.searchsorted(cc, need, side="left")
    ok = ri < cc.size
    rel = np.full(s_ord.size, np.inf)
    rel[ok] = pr.rel_sorted[ri[ok]]
    rel = np.maximum(rel, pr.fwd_end[order])
    return fifo_ends(rel, copy_time(s_ord.astype(np.float64), pr.w_h2d, pr.lat))


def pass1(
    instance: Instance,
    M: int,
    g: float = 0.02,
    excluded: Any = (),
    *,
    order: str = "rho",
) -> SwapSet:
    """Pass 1 (sec. 3.2; Algorithm 1, lines 2-6): choose the swap set S.

    Candidates are the saved tensors with s > 0 not in `excluded`, in decreasing rho
    (rho = inf first, ties by production order), or in production order when
    ``order="production"`` (the swap-first ablation, sec. 4.4). A candidate joins S only
    if, with it, both planned schedules stay feasible:

    - offload: D2H copies in production order, each no earlier than its r, one at a time,
      each taking ``copy_latency_s + s / W_d2h``; the last ends by ``(1 - g) * T_F``;
    - prefetch: H2D copies from T_F in deadline order (d), each starting only once the
      bytes released so far by the ideal backward pass cover the bytes of all copies up
      to and including it; each copy takes ``copy_latency_s + s / W_h2d`` and ends by its
      d. Memory is assumed full at T_F.

    Reading of sec. 3.2 ("credit the bytes of each kept tensor when its last backward
    reader ends"): once prefetched, a swapped tensor is resident until its last backward
    reader ends, like a kept one, and the runtime frees its buffer then (sec. 3.4,
    docs/model.md), so its bytes are credited at that time too: "kept" is read as
    "resident on the device in the backward pass", and the credits still leave transient
    buffers (gradients, temporaries) to validation. Only copies earlier in
    the queue can be credited this way in a schedule that passes the test (a copy later
    in deadline order is released after its d, which is after every earlier copy's end).
    Crediting kept tensors alone would let the first swapped bytes use up the credits:
    with an all-swap set no byte would ever be released and nothing could be prefetched,
    so Pass 1 stopped at 11.2 GB of the 16.2 GB deficit of GPT-2 XL at 30% of P however
    fast the link (Figure 6a: 16.7 GB at 200 GB/s in the paper). Before Pass 2 decides
    recomputations every tensor outside S counts as kept.

    Pass 1 stops once S covers the deficit D = P - M, or when the candidates run out.

    Pipeline stages (docs/model.md, "A pipeline stage"): the link budget is spent per
    window. A tensor's window is the forward unit of its microbatch, [F_start, F_end]:
    its D2H must end by ``F_start + (1 - g) (F_end - F_start)`` (one FIFO for all
    offloads, each copy tested against its own limit, O(|S|) per candidate) and its H2D
    starts no earlier than F_end, the runtime's rule. A single pass is one window
    [0, T_F], and the test is the one above.

    Host pinned-memory limit (``instance.host_memory_bytes``): a candidate joins S only if
    the bytes of S stay within the limit. Host occupancy never exceeds the bytes of S (a
    storage is held at most once, from its D2H start to its last backward use), so every
    plan respects the limit; a tensor skipped for it stays keep and Pass 2 recomputes it
    if memory demands (the fall-back: recompute, else keep).

    Cost: the offload test is O(log n) per candidate and per acceptance (a segment tree
    over positions for ``end_last = max_k (r_k + sum of durations from k on)``, see
    :class:`_OffloadTree`, with an O(n) reference test for the rare candidates within
    rounding of the limit); the prefetch test (only for candidates that pass the offload
    test) recomputes only the queue from the candidate's place j on (compiled,
    :func:`_prefetch_insert`: closed-form FIFO, each entry's credit index searched
    forward from its previous one), with the same additions in the same order as a
    recomputation of the whole queue. That is still O(|S| - j) per candidate, so Pass 1
    is O(n |S|) in the worst case, the one part of planning above n log n: inserting a
    copy at j adds its bytes to the cumulative need of every later copy, which moves each
    one's release time by its own amount (a step of the credit curve), so no aggregate
    over the queue's suffix survives an insertion unchanged.

    Args:
        instance: the problem.
        M: memory budget (bytes).
        g: offload guard (share of T_F; of each forward unit in a pipeline stage).
        excluded: saved positions or names never to swap.
        order: "rho" or "production".

    Returns:
        The :class:`SwapSet`.
    """
    if order not in SWAP_ORDERS:
        raise ValueError(f"swap order '{order}' is not one of {', '.join(SWAP_ORDERS)}")
    pr = _prep(instance)
    n = pr.n
    D = int(instance.P) - int(M)
    nan = np.full(n, np.nan)
    if D <= 0 or n == 0:
        return SwapSet(np.zeros(0, dtype=np.int64), nan, nan.copy(), 0, D)
    ex = np.zeros(n, dtype=bool)
    exc = _positions(instance, excluded)
    ex[exc] = True
    cand = np.flatnonzero((pr.s > 0) & ~ex)
    if order == "rho":
        cand = cand[np.lexsort((cand, -np.asarray(instance.rho)[cand]))]
    host_cap = instance.host_memory_bytes
    s, r, d, dur = pr.s, pr.r, pr.d, pr.dur
    # Each offload ends by the guard's share of its window: (1 - g) T_F in a single pass;
    # in a pipeline stage, (1 - g) of the way through its forward unit.
    lim = pr.fwd_start + (1.0 - g) * (pr.fwd_end - pr.fwd_start)
    limit = (1.0 - g) * pr.TF
    lim_l, gate_l = lim.tolist(), pr.fwd_end.tolist()

    inS = np.zeros(n, dtype=bool)
    off_tree = _OffloadTree(n, r, limit) if pr.single else None
    # A pipeline stage: S in production order (release, duration, limit of each copy).
    offS: list[int] = []
    rS, durS, limS = np.zeros(cand.size + 1), np.zeros(cand.size + 1), np.zeros(cand.size + 1)
    # Prefetch state: release credits (fixed, pr.credits); S in queue order (d, then
    # position) as sizes, durations, deadlines and the planned schedule's running values
    # (cumulative bytes, release times, cumulative durations, running maximum of the
    # closed-form FIFO terms), so a test recomputes only the queue from p on.
    cc = pr.credits
    rel_sorted = pr.rel_sorted
    total_credits = int(cc[-1])
    keys: list[tuple[float, int]] = []
    cap = cand.size + 1
    Sdur, Sd, Scd, Sacc = np.zeros(cap), np.zeros(cap), np.zeros(cap), np.zeros(cap)
    Sg = np.zeros(cap)
    Sneed, Sri = np.zeros(cap, dtype=np.int64), np.zeros(cap, dtype=np.int64)
    b_need, b_ri = np.zeros(cap, dtype=np.int64), np.zeros(cap, dtype=np.int64)
    b_cd, b_acc = np.zeros(cap), np.zeros(cap)
    r_l, d_l, dur_l, s_l = r.tolist(), d.tolist(), dur.tolist(), s.tolist()
    hdur_l = pr.dur_h2d.tolist()
    total = 0
    checked = 0
    for p in cand.tolist():
        if total >= D:
            break
        checked += 1
        dp_, hp, rp, ddp, gp, lp = dur_l[p], hdur_l[p], r_l[p], d_l[p], gate_l[p], lim_l[p]
        if host_cap is not None and total + s_l[p] > host_cap:
            continue  # host pinned memory full: p stays keep (Pass 2 may recompute it)
        # Quick necessary conditions: the copy alone must fit both windows.
        if rp + dp_ > (limit if off_tree is not None else lp) or gp + hp > ddp:
            continue
        # Offload test: the last D2H end with p inserted, O(log n) (one limit); in a
        # pipeline stage every copy against its own limit, O(|S|).
        if off_tree is not None:
            if not off_tree.fits_with(p, dp_):
                continue
        else:
            jo = bisect.bisect_left(offS, p)
            if not _offload_fits_with(rS, durS, limS, len(offS), jo, rp, dp_, lp):
                continue
        # Prefetch test, O((|S| - j) log n) compiled: p joins the queue at j; copies
        # before j keep their schedule (it passed when they joined), the rest is
        # recomputed, and p is inserted if the test passes.
        sp = s_l[p]
        if total + sp > total_credits:
            continue  # the releases never cover the queue
        key = (ddp, p)
        j = bisect.bisect_left(keys, key)
        if not _prefetch_insert(Sdur, Sd, Sg, Sneed, Sri, Scd, Sacc, len(keys), j, sp, hp,
                                ddp, gp, cc, rel_sorted, b_need, b_ri, b_cd, b_acc):
            continue
        # Accept p.
        inS[p] = True
        total += sp
        keys.insert(j, key)
        if off_tree is not None:
            off_tree.add(p, dp_)
        else:
            k = len(offS)
            rS[jo + 1:k + 1], durS[jo + 1:k + 1], limS[jo + 1:k + 1] = (
                rS[jo:k].copy(), durS[jo:k].copy(), limS[jo:k].copy())
            rS[jo], durS[jo], limS[jo] = rp, dp_, lp
            offS.insert(jo, p)

    pos = np.flatnonzero(inS)
    off = nan.copy()
    off[pos] = fifo_ends(r[pos], dur[pos])
    pre = nan.copy()
    if pos.size:
        order_, ends = prefetch_schedule(instance, pos)
        pre[order_] = ends
    return SwapSet(pos, off, pre, total, D, checked)


def offload_end_op(instance: Instance, offload_end_s: np.ndarray) -> np.ndarray:
    """Index of the scheduled op during which each offload ends (-1 where NaN): the first
    op whose ideal end is at or after the copy's end (clipped to the last op)."""
    pr = _prep(instance)
    out = np.full(pr.n, -1, dtype=np.int64)
    ok = np.isfinite(offload_end_s)
    if pr.n_ops and ok.any():
        idx = np.searchsorted(pr.end_s, offload_end_s[ok], side="left")
        out[ok] = np.minimum(idx, pr.n_ops - 1)
    return out


# --------------------------------------------------------------------------- Pass 2
@dataclass
class Pass2Result:
    """Result of Pass 2.

    Attributes:
        decisions: int8 decisions per saved tensor.
        profile: planned memory m(i) per scheduled op (bytes) after Pass 2.
        picks: saved positions marked recomp one by one, in order.
        fallback_blocks: blocks converted to full recomputation, in order.
        fits: True if the planned profile stays within M.
    """

    decisions: np.ndarray
    profile: np.ndarray
    picks: list[int] = field(default_factory=list)
    fallback_blocks: list[int] = field(default_factory=list)
    fits: bool = True


class _Profile:
    """The planned memory profile of Pass 2 with incremental updates.

    Windows (inclusive op-index ranges) where a saved tensor k holds s_k bytes:

    - keep: [producer, last need];
    - swap: [producer, max(op where its offload ends, last forward reader)] and
      [first need, last need];
    - recomp: [producer, last forward reader] and [first need, last need].

    "First need" is the first backward reader, or earlier when a recomp tensor whose
    recipe reads k is rebuilt earlier (rebuilds run just before their own first need and
    chain: inputs first, sec. 3.3); "last need" likewise extends the last backward reader.
    A rebuild is charged to the op it precedes.

    The profile is kept in a max segment tree over ops with range adds (adds are kept in
    the nodes, never pushed down): a window update, the value at one op, the first op
    from i on above M and the peak cost O(log n) each, not O(n).
    """

    def __init__(self, pr: _Prep, decisions: np.ndarray, off_end: np.ndarray) -> None:
        self.pr = pr
        self.dec = np.array(decisions, dtype=np.int8, copy=True)
        self.off = np.asarray(off_end, dtype=np.int64)
        n = pr.n
        self.lo = pr.first_bwd.copy()
        self.hi = pr.last_bwd.copy()
        dec = self.dec
        for u in pr.topo:  # dependents first: their needs are final when reached
            if dec[u] == RECOMP:
                lu = self.lo[u]
                for k in pr.inputs[u]:
                    if lu < self.lo[k]:
                        self.lo[k] = lu
                    if lu > self.hi[k]:
                        self.hi[k] = lu
        n_ops = pr.n_ops
        delta = np.zeros(n_ops + 1, dtype=np.int64)
        if n:
            a1, b1, a2, b2 = self._windows_all()
            s = pr.s
            np.add.at(delta, a1, s)
            np.add.at(delta, b1 + 1, -s)
            two = a2 >= 0
            np.add.at(delta, a2[two], s[two])
            np.add.at(delta, b2[two] + 1, -s[two])
        m = pr.static + np.cumsum(delta[:-1])
        size = 1
        while size < max(n_ops, 1):
            size *= 2
        self.n_ops = n_ops
        self.size = size
        self.t = np.zeros(2 * size, dtype=np.int64)
        self.add = np.zeros(2 * size, dtype=np.int64)
        _mx_build(self.t, size, np.asarray(m, dtype=np.int64))

    def peak(self) -> int:
        """max_i m(i) (bytes)."""
        return int(self.t[1])

    def value(self, i: int) -> int:
        """m(i) (bytes)."""
        return int(_mx_point(self.t, self.add, self.size, i))

    def first_above(self, i: int, M: int) -> int:
        """The first op index >= i with m > M, or -1."""
        return int(_mx_first_above(self.t, self.add, 1, 0, self.size, i, M, 0))

    def values(self) -> np.ndarray:
        """m over all scheduled ops (int64 bytes)."""
        return _mx_values(self.t, self.add, self.size, self.n_ops)

    def _add(self, a: int, b: int, x: int) -> None:
        if b >= a:
            _mx_add(self.t, self.add, self.size, a, b, x)

    def _windows_all(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        pr, dec = self.pr, self.dec
        keep = dec == KEEP
        e1 = np.where(dec == SWAP, np.maximum(self.off, pr.last_fwd), pr.last_fwd)
        merged = keep | (e1 + 1 >= self.lo)
        b1 = np.where(merged, np.maximum(np.where(keep, self.hi, e1), self.hi), e1)
        a2 = np.where(merged, -1, self.lo)
        b2 = np.where(merged, -1, self.hi)
        return pr.prod, b1, a2, b2

    def windows(self, k: int, dk: int | None = None) -> list[tuple[int, int]]:
        pr = self.pr
        if dk is None:
            dk = self.dec[k]
        prod, hi, lo = int(pr.prod[k]), int(self.hi[k]), int(self.lo[k])
        if dk == KEEP:
            return [(prod, hi)]
        e1 = int(pr.last_fwd[k])
        if dk == SWAP:
            e1 = max(e1, int(self.off[k]))
        if e1 + 1 >= lo:
            return [(prod, max(e1, hi))]
        return [(prod, e1), (lo, hi)]

    def _apply(self, k: int, sign: int, dk: int | None = None,
                wins: list[tuple[int, int]] | None = None) -> None:
        sk = int(self.pr.s[k]) * sign
        if sk:
            for a, b in (wins if wins is not None else self.windows(k, dk)):
                self._add(a, b, sk)

    def set_decision(self, k: int, new: int) -> None:
        """Change tensor k's decision and update the profile (and its inputs' needs)."""
        if self.dec[k] == new:
            return
        if self.dec[k] == KEEP and new == RECOMP:
            # keep [prod, hi] -> recomp [prod, last_fwd] + [lo, hi]: free the gap.
            a, b = int(self.pr.last_fwd[k]) + 1, int(self.lo[k])
            if b > a:
                self._add(a, b - 1, -int(self.pr.s[k]))
        else:
            self._apply(k, -1)
            self._apply(k, +1, new)
        self.dec[k] = new
        self._refresh_inputs(k)

    def _refresh_inputs(self, u: int) -> None:
        pr = self.pr
        stack = list(pr.inputs[u])
        while stack:
            k = stack.pop()
            lo, hi = int(pr.first_bwd[k]), int(pr.last_bwd[k])
            for v in pr.dependents[k]:
                if self.dec[v] == RECOMP:
                    lv = int(self.lo[v])
                    lo = min(lo, lv)
                    hi = max(hi, lv)
            if lo != self.lo[k] or hi != self.hi[k]:
                old = self.windows(k)
                self.lo[k], self.hi[k] = lo, hi
                new = self.windows(k)
                if new != old:
                    self._apply(k, -1, wins=old)
                    self._apply(k, +1, wins=new)
                if self.dec[k] == RECOMP:
                    stack.extend(pr.inputs[k])


class _Candidates:
    """Pass 2's recompute candidates, with the pick rule in O(log n) per pick.

    Saved tensors with finite c and s > 0 sit in slots ordered by (s, position). A tensor
    is admitted once the first violation i passes its last forward reader; whether it is
    still a candidate (keep, first need after i) is checked when it comes out best, and a
    tensor that is not is removed for good (decisions only leave keep, i only grows, needs
    only move earlier). The pick minimizes ``c / min(s, E)`` (ties: earliest produced):
    for s < E the key is c / s (fixed; a min tree over the slots below E), for s >= E it
    is c / E, least for the least c (a min tree over c from the first slot with s >= E);
    the two winners are compared by the same floating-point keys as the O(n) rule
    (``argmin(c / np.minimum(s, E))`` over the candidates in production order).

    c / E can round two different c to one key, which the c tree would not see; when two
    distinct c of the instance lie within a relative 1e-14 (or a c is below 1e-280) this
    can happen, and the pick falls back to the O(n) rule over the admitted tensors.
    """

    def __init__(self, pr: _Prep, finite_pos: np.ndarray) -> None:
        univ = np.flatnonzero(finite_pos)
        by_s = univ[np.lexsort((univ, pr.sf[univ]))]
        self.N = N = by_s.size
        self.pos = by_s
        self.slot_of = np.full(pr.n, -1, dtype=np.int64)
        self.slot_of[by_s] = np.arange(N)
        self.s_sorted = pr.sf[by_s]
        self.c, self.sf = pr.c, pr.sf
        self.key_small = pr.c[by_s] / pr.sf[by_s]
        self.key_c = pr.c[by_s]
        size = 1
        while size < max(N, 1):
            size *= 2
        self.size = size
        big = np.iinfo(np.int64).max
        self.trees = [(np.full(2 * size, np.inf), np.full(2 * size, big, dtype=np.int64),
                       np.full(2 * size, -1, dtype=np.int64)) for _ in range(2)]
        self.enter = univ[np.argsort(pr.last_fwd[univ], kind="stable")]
        self.enter_at_l = pr.last_fwd[self.enter].tolist()
        self.next = 0
        cu = np.unique(pr.c[univ])
        self.exact_fallback = bool(
            (cu.size > 1 and np.any(cu[1:] <= cu[:-1] * (1 + 1e-14)))
            or np.any((cu > 0) & (cu < 1e-280)))
        self.admitted = np.zeros(N, dtype=bool)

    def _admit(self, i: int) -> None:
        nxt, enter_at = self.next, self.enter_at_l
        if nxt >= len(enter_at) or enter_at[nxt] >= i:
            return
        stop = bisect.bisect_left(enter_at, i, nxt)
        (kl, pl, sl), (kc, pc, sc) = self.trees
        for t in self.enter[nxt:stop].tolist():
            q = int(self.slot_of[t])
            _mn_set(kl, pl, sl, self.size, q, float(self.key_small[q]), t)
            _mn_set(kc, pc, sc, self.size, q, float(self.key_c[q]), t)
            self.admitted[q] = True
        self.next = stop

    def remove(self, t: int) -> None:
        """Remove saved position t for good."""
        q = int(self.slot_of[t])
        big = np.iinfo(np.int64).max
        for key, pos, slot in self.trees:
            _mn_set(key, pos, slot, self.size, q, math.inf, big)
        self.admitted[q] = False

    def best(self, i: int, E: float, dec: np.ndarray, lo: np.ndarray) -> int:
        """The candidate at op i to mark recomp with excess E (bytes), or -1 if none."""
        self._admit(i)
        if self.exact_fallback:
            return self._best_reference(i, E, dec, lo)
        split = int(np.searchsorted(self.s_sorted, E))
        (kl, pl, sl), (kc, pc, sc) = self.trees
        size = self.size
        while True:
            a = _mn_query(kl, pl, sl, size, 0, split)
            b = _mn_query(kc, pc, sc, size, split, self.N)
            if a < 0 and b < 0:
                return -1
            ka = kl[size + a] if a >= 0 else math.inf
            kb = kc[size + b] / E if b >= 0 else math.inf
            if a >= 0 and (b < 0 or ka < kb or (ka == kb and self.pos[a] < self.pos[b])):
                q = a
            else:
                q = b
            if not math.isfinite(kl[size + q]):
                return -1
            t = int(self.pos[q])
            if dec[t] == KEEP and lo[t] > i:
                return t
            self.remove(t)

    def _best_reference(self, i: int, E: float, dec: np.ndarray, lo: np.ndarray) -> int:
        """The O(n) rule over the admitted tensors (see the class docstring)."""
        cand = np.sort(self.pos[self.admitted])
        ok = (dec[cand] == KEEP) & (lo[cand] > i)
        for t in cand[~ok].tolist():
            self.remove(t)
        cand = cand[ok]
        if cand.size == 0:
            return -1
        return int(cand[np.argmin(self.c[cand] / np.minimum(self.sf[cand], E))])


def pass2(instance: Instance, M: int, decisions: Any, offload_end_idx: Any = None) -> np.ndarray:
    """Pass 2 (sec. 3.3; Algorithm 1, lines 7-12): mark recomp the cheapest bytes.

    See :func:`pass2_detailed`; this returns only the decisions (int8 array).
    """
    return pass2_detailed(instance, M, decisions, offload_end_idx).decisions


def pass2_detailed(instance: Instance, M: int, decisions: Any,
                   offload_end_idx: Any = None) -> Pass2Result:
    """Pass 2 with its planned profile and the order of its choices.

    Builds the planned memory profile m(i) over the scheduled ops (the static profile of
    non-saved tensors and workspaces plus the windows of :class:`_Profile`). At the first
    op i with m(i) > M, the candidates are keep tensors with finite c and s > 0 resident at
    i but unused there (last forward reader < i < first need); the one minimizing
    ``c_t / min(s_t, E)``, E = max_j (m(j) - M) over the whole profile (docs/model.md), is
    marked recomp (ties: earliest produced) and the profile is updated in place. With no
    candidate at i, the earliest block (``Instance.saved_layers`` >= 0) that still has a
    non-recomp tensor with finite c and s > 0 is converted to full recomputation (every
    such tensor of the block, swapped ones included, becomes recomp: block checkpointing
    as a fallback); with none left, Pass 2 stops and the plan is left to validation.

    Cost: O((n + n_ops) log n) to build, then O(log n) per pick, candidate admission and
    window update (the profile in a max segment tree with range adds, :class:`_Profile`;
    the pick rule on min trees, :class:`_Candidates`), plus the O(|block|) of each block
    fallback; the first violation only moves forward. The decisions are those of the
    O(n)-per-pick rule above, bit for bit (tests/test_slackswap.py keeps it as reference).

    Args:
        instance: the problem.
        M: memory budget (bytes).
        decisions: starting decisions (KEEP/SWAP/RECOMP per saved tensor); SWAP and RECOMP
            entries are never changed except by the block fallback.
        offload_end_idx: per saved tensor, the op during which its offload ends
            (:func:`offload_end_op`); needed for SWAP entries (default: last forward
            reader, i.e. an offload that never lags).

    Returns:
        The :class:`Pass2Result`.
    """
    pr = _prep(instance)
    n = pr.n
    dec0 = np.asarray(decisions, dtype=np.int8)
    if dec0.shape != (n,):
        raise ValueError(f"{dec0.size} decisions for {n} saved tensors")
    off = (np.full(n, -1, dtype=np.int64) if offload_end_idx is None
           else np.asarray(offload_end_idx, dtype=np.int64))
    prof = _Profile(pr, dec0, off)
    dec = prof.dec
    M = int(M)
    res = Pass2Result(dec, prof.values())
    if pr.n_ops == 0:
        return res
    finite_pos = pr.finite_c & (pr.s > 0)
    sel = _Candidates(pr, finite_pos)
    blocks = pr.blocks
    nb = 0  # blocks before nb have nothing left to convert
    i = 0
    while True:
        if prof.value(i) <= M:
            i = prof.first_above(i, M)
            if i < 0:
                break
        # Candidates at i: keep tensors with finite c and s > 0, last forward reader
        # before i and first need after i; tensors enter once i passes their last forward
        # reader and leave (lazily) when picked, converted, or their need moves to i or
        # before (i never decreases, needs only move earlier: they never come back).
        k = sel.best(i, float(prof.peak() - M), dec, prof.lo)
        if k >= 0:
            sel.remove(k)
            prof.set_decision(k, RECOMP)
            res.picks.append(k)
            continue
        # Fallback: the earliest block with a non-recomp rebuildable tensor.
        converted = False
        while nb < len(blocks):
            b = blocks[nb]
            nb += 1
            mem = pr.block_members[b]
            todo = mem[(dec[mem] != RECOMP) & finite_pos[mem]]
            if todo.size == 0:
                continue
            for k in todo.tolist():
                prof.set_decision(k, RECOMP)
            res.fallback_blocks.append(b)
            converted = True
            break
        if not converted:
            res.fits = False
            break
    res.decisions = dec
    res.profile = prof.values()
    return res


# --------------------------------------------------------------------------- one plan
@dataclass
class PlannedRound:
    """One planning round (both passes) at one budget.

    Attributes:
        decisions: int8 decisions per saved tensor.
        swap: the Pass 1 result (empty when the link is not used).
        pass2: the Pass 2 result.
        M: the budget planned for (bytes).
        g: the offload guard used.
    """

    decisions: np.ndarray
    swap: SwapSet
    pass2: Pass2Result
    M: int
    g: float

    def to_plan(self, instance: Instance) -> Plan:
        return Plan(self.decisions, instance.saved_names)


def plan(
    instance: Instance,
    M: int,
    *,
    g: float = 0.02,
    excluded: Any = (),
    forced_recomp: Any = (),
    swap_order: str = "rho",
    use_link: bool = True,
) -> PlannedRound:
    """Both passes of Algorithm 1 at budget M (sec. 3.2-3.3).

    Args:
        instance: the problem.
        M: budget (bytes).
        g: offload guard.
        excluded: saved positions or names Pass 1 must not swap.
        forced_recomp: positions or names recomputed from the start (repair, sec. 3.4);
            tensors with c = inf are ignored here. They are also excluded from Pass 1.
        swap_order: "rho" (the paper) or "production" (swap-first ablation).
        use_link: False skips Pass 1 (recompute-only ablation, and the no-swap plan).

    Returns:
        The :class:`PlannedRound`.
    """
    pr = _prep(instance)
    n = pr.n
    dec = np.zeros(n, dtype=np.int8)
    forced = _positions(instance, forced_recomp)
    forced = forced[pr.finite_c[forced]] if forced.size else forced
    dec[forced] = RECOMP
    if use_link:
        ex = np.union1d(_positions(instance, excluded), forced)
        sw = pass1(instance, M, g, ex, order=swap_order)
    else:
        nan = np.full(n, np.nan)
        sw = SwapSet(np.zeros(0, dtype=np.int64), nan, nan.copy(), 0, int(instance.P) - int(M))
    dec[sw.positions] = SWAP
    p2 = pass2_detailed(instance, M, dec, offload_end_op(instance, sw.offload_end_s))
    return PlannedRound(p2.decisions, sw, p2, int(M), float(g))


# --------------------------------------------------------------------------- the solver
def _stalls(ev: Evaluation) -> float:
    return float(ev.stall_fwd_s) + float(ev.stall_bwd_s)


class SlackSwap(BaseSolver):
    """SlackSwap (Algorithm 1 with the validation and repair of sec. 3.4).

    Rounds: each round plans with :func:`plan` and evaluates the plan with
    :func:`slackopt.simulate.simulate` at the true budget M. Repairs before the next round
    (docs/model.md): forward stalls raise g by 0.02; a tensor whose H2D kept the compute
    stream waiting for w seconds becomes recomp in later rounds if c_t < w, else it is
    excluded from S; an infeasible plan is re-planned at ``M * (1 - 0.01 * 2**k)``, k = 0, 1,
    ... (k counts infeasible rounds). At most ``max_rounds`` plans are evaluated in all;
    the last evaluation is reserved for the no-swap plan (Pass 2 alone at M) unless a
    feasible plan without stalls stops the rounds early (or ``max_rounds`` is 1). A plan
    identical to one already evaluated is not evaluated again (it is logged with
    ``duplicate_of``); when a round repairs nothing new the swap rounds end. The fastest
    feasible evaluated plan (step time) is returned.

    ``info``: ``rounds`` (one dict per planning round: kind "swap"/"no_swap",
    ``M_planned_bytes``, ``g``, ``feasible``, ``step_time_s``, ``throughput``, stalls,
    ``recompute_s``, ``peak_bytes``, swapped/recomputed bytes, Pass 2 fallback blocks,
    ``failure``; ``evaluation``, its number among evaluated plans, or ``duplicate_of``),
    ``evaluations``, ``chosen_evaluation``, ``swapped_bytes``,
    ``recomputed_bytes``, ``counts``, ``link_budget_bytes`` ((1 - g) W T_F) and
    ``link_budget_used`` (swapped bytes / link budget).

    Host pinned-memory limit (``instance.host_memory_bytes``): Pass 1 swaps at most the
    limit's worth of bytes in all, so host occupancy never exceeds it; tensors that would
    exceed it fall back to recompute (Pass 2, where memory requires it), else keep.

    If M >= P the keep-all plan is returned without evaluation. If no round is feasible
    the status is "infeasible" and ``info["min_budget_bytes"]`` is the smallest budget at
    which SlackSwap finds a feasible plan, by bisection over M in (M, P] (feasibility
    assumed monotone in M; resolution 0.5% of P; P itself always works: keep-all).

    Args:
        g: offload guard (share of T_F), 0.02 in the paper.
        max_rounds: most evaluated plans per solve (6 in the paper).
        swap_order: "rho" (decreasing recompute cost per byte) or "production"
            (swap-first ablation, sec. 4.4).
        use_link: False drops Pass 1 (recompute-only ablation); its rounds only repair
            infeasibility.
        min_budget_search: compute ``min_budget_bytes`` when infeasible (costs about eight
            more solves).
    """

    name = "slackswap"
    param_specs = {
        "g": Param(float, min=0.0, below=1.0, doc="offload guard, share of T_F"),
        "max_rounds": Param(int, min=1), "swap_order": Param(str, choices=SWAP_ORDERS),
        "use_link": Param(bool), "min_budget_search": Param(bool),
    }

    def __init__(self, *, g: float = 0.02, max_rounds: int = 6, swap_order: str = "rho",
                 use_link: bool = True, min_budget_search: bool = True) -> None:
        self.g = g
        self.max_rounds = max_rounds
        self.swap_order = swap_order
        self.use_link = use_link
        self.min_budget_search = min_budget_search

    # ------------------------------------------------------------------ rounds
    def _rounds(self, inst: Instance, M: int, deadline: float | None) -> dict[str, Any]:
        """Run the validation/repair rounds at budget M; return the best, the log and
        ``seen``, every plan evaluated (decision bytes -> (its Evaluation under M, its
        number))."""
        tol = max(1e-9, 1e-6 * inst.ideal_time_s)
        c = np.asarray(inst.c)
        seen: dict[bytes, tuple[Evaluation, int]] = {}
        rounds: list[dict[str, Any]] = []
        best: tuple[Evaluation, PlannedRound, int] | None = None
        n_eval = 0
        stopped = False
        timed_out = False

        def out_of_time() -> bool:
            return deadline is not None and time.perf_counter() > deadline

        def evaluate(pl: PlannedRound, kind: str) -> tuple[Evaluation, bool]:
            nonlocal n_eval, best
            key = pl.decisions.tobytes()
            if key in seen:
                ev, rid = seen[key]
                rounds.append(self._round_info(inst, pl, ev, kind, duplicate_of=rid))
                return ev, False
            ev = simulate(inst, pl.to_plan(inst), M)
            n_eval += 1
            seen[key] = (ev, n_eval)
            rounds.append(self._round_info(inst, pl, ev, kind, evaluation=n_eval))
            if ev.feasible and (best is None or ev.step_time_s < best[0].step_time_s):
                best = (ev, pl, n_eval)
            return ev, True

        if self.use_link:
            g = self.g
            k_inf = 0
            M_plan = M
            excluded: set[int] = set()
            forced: set[int] = set()
            iters = 0
            swap_cap = max(1, self.max_rounds - 1)  # one evaluation left for the no-swap plan
            while n_eval < swap_cap and iters < 4 * self.max_rounds:
                if out_of_time():
                    timed_out = True
                    break
                iters += 1
                pl = plan(inst, M_plan, g=g, excluded=sorted(excluded),
                          forced_recomp=sorted(forced), swap_order=self.swap_order)
                ev, new = evaluate(pl, "swap")
                if ev.feasible and _stalls(ev) <= tol:
                    stopped = True
                    break
                state = (g, M_plan, len(excluded), len(forced))
                if ev.stall_fwd_s > tol:
                    g = min(g + GUARD_STEP, 0.99)
                for nm, w in (ev.h2d_stall_s or {}).items():
                    if w <= tol:
                        continue
                    k = inst.saved_position(nm)
                    if c[k] < w:
                        forced.add(k)
                    else:
                        excluded.add(k)
                if not ev.feasible:
                    M_plan = int(math.floor(M * (1.0 - 0.01 * 2 ** k_inf)))
                    k_inf += 1
                    if M_plan <= 0:
                        break
                if not new and state == (g, M_plan, len(excluded), len(forced)):
                    break  # nothing left to repair: the rounds would repeat
            if not stopped and not timed_out and n_eval < self.max_rounds:
                evaluate(plan(inst, M, use_link=False), "no_swap")
        else:
            k_inf = 0
            M_plan = M
            while n_eval < self.max_rounds:
                if out_of_time():
                    timed_out = True
                    break
                pl = plan(inst, M_plan, use_link=False)
                ev, new = evaluate(pl, "no_swap")
                if ev.feasible:
                    break  # no swaps: no stall to repair
                M_plan = int(math.floor(M * (1.0 - 0.01 * 2 ** k_inf)))
                k_inf += 1
                if M_plan <= 0:
                    break
        return {"best": best, "rounds": rounds, "evaluations": n_eval, "timed_out": timed_out,
                "seen": seen}

    @staticmethod
    def _round_info(inst: Instance, pl: PlannedRound, ev: Evaluation, kind: str,
                    evaluation: int | None = None,
                    duplicate_of: int | None = None) -> dict[str, Any]:
        s = inst.s
        d = {
            "kind": kind,
            "M_planned_bytes": pl.M,
            "g": pl.g,
            "feasible": bool(ev.feasible),
            "step_time_s": float(ev.step_time_s),
            "throughput": float(ev.throughput),
            "stall_fwd_s": float(ev.stall_fwd_s),
            "stall_bwd_s": float(ev.stall_bwd_s),
            "recompute_s": float(ev.recompute_s),
            "peak_bytes": int(ev.peak_bytes),
            "swapped_bytes": int(s[pl.decisions == SWAP].sum()),
            "recomputed_bytes": int(s[pl.decisions == RECOMP].sum()),
            "fallback_blocks": list(pl.pass2.fallback_blocks),
            "failure": ev.failure,
        }
        if evaluation is not None:
            d["evaluation"] = evaluation
        if duplicate_of is not None:
            d["duplicate_of"] = duplicate_of
        return d

    # ------------------------------------------------------------------ solve
    @classmethod
    def warm_up(cls) -> None:
        """Compile the evaluator's kernels and the planner's (Pass 1's offload sums, the
        prefetch queue, the per-window offload test of pipeline stages): one solve of an
        8-layer chain at 0.9 P, where the plan swaps (at 0.8 P the 4-layer warm-up chain
        has no plan, its minimum budget being 0.89 P, and the kernels of a swapping plan
        would not run), and one of that chain as stage 0 of a 1F1B pipeline of 2."""
        from slackopt.stage import build_stage
        from slackopt.workloads.synthetic import chain

        inst = chain(8, seed=0)
        cls().solve(inst, int(0.9 * inst.P))
        stage = build_stage(inst, "1f1b", 0, 2, 2)
        cls().solve(stage, int(0.6 * stage.P))

    def plan(self, instance: Instance, budget_bytes: int, run: Run) -> Outcome:
        """Plan `instance` under `budget_bytes` (M, bytes); deterministic (the seed is
        unused); the rounds stop at ``run.time_limit_s`` (status "timeout" if none was
        feasible by then)."""
        M = int(budget_bytes)
        P = int(instance.P)
        link_budget = forward_link_budget_bytes(instance, self.g)
        if M >= P:
            return Outcome(
                Plan.keep_all(instance), status="feasible", objective_s=instance.ideal_time_s,
                lower_bound_s=instance.ideal_time_s,
                info={"rounds": [], "evaluations": 0, "swapped_bytes": 0, "recomputed_bytes": 0,
                      "link_budget_bytes": link_budget, "link_budget_used": 0.0,
                      "reason": "M >= P: keep all"})
        deadline = None if run.time_limit_s is None else run.started + float(run.time_limit_s)
        out = self._rounds(instance, M, deadline)
        info: dict[str, Any] = {"rounds": out["rounds"], "evaluations": out["evaluations"],
                                "link_budget_bytes": link_budget}
        best = out["best"]
        if best is not None:
            ev, pl, rid = best
            swapped = int(instance.s[pl.decisions == SWAP].sum())
            info.update({
                "chosen_evaluation": rid,
                "swapped_bytes": swapped,
                "recomputed_bytes": int(instance.s[pl.decisions == RECOMP].sum()),
                "link_budget_used": swapped / link_budget if link_budget > 0 else 0.0,
                "counts": pl.to_plan(instance).counts(),
            })
            return Outcome(pl.to_plan(instance), status="feasible",
                           objective_s=float(ev.step_time_s), evaluation=ev, info=info)
        # No feasible round.
        last = plan(instance, M, g=self.g, swap_order=self.swap_order, use_link=self.use_link)
        info.update({"swapped_bytes": int(instance.s[last.decisions == SWAP].sum()),
                     "recomputed_bytes": int(instance.s[last.decisions == RECOMP].sum())})
        seen = out["seen"].get(last.decisions.tobytes())  # its round's evaluation, if it ran
        ev_last = seen[0] if seen is not None else None
        if out["timed_out"]:
            return Outcome(last.to_plan(instance), status="timeout", min_budget_bytes=None,
                           evaluation=ev_last, info=info)
        if self.min_budget_search:  # the base class bisects over feasible_at
            info["min_budget_method"] = (
                "bisection over M in (M, P], SlackSwap feasible at the upper end, "
                f"resolution {MIN_BUDGET_REL_TOL:.1%} of P")
        return Outcome(last.to_plan(instance), status="infeasible", evaluation=ev_last,
                       info=info)

    def feasible_at(self, instance: Instance, budget_bytes: int, run: Run | None = None) -> bool:
        """True if SlackSwap's rounds find a feasible plan at budget M (bytes), without a
        time limit (the predicate of the minimum-budget bisection)."""
        if budget_bytes >= instance.P:
            return True
        return self._rounds(instance, int(budget_bytes), None)["best"] is not None

__all__ = ["SlackSwap", "SwapSet", "Pass2Result", "PlannedRound", "pass1", "pass2",
           "pass2_detailed", "plan", "offload_schedule", "prefetch_schedule", "offload_end_op"]
