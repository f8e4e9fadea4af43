"""SlackSwap: the two-pass keep/swap/recompute planner with validation and repair.

Paper: the SlackSwap paper (2026), section 3 (Algorithm 1); the details the paper leaves
open are pinned in docs/model.md ("SlackSwap details the paper leaves open").

- :func:`pass1` (sec. 3.2, Alg. 1 lines 2-6) spends the link budget: it adds saved
  tensors to the swap set S in decreasing recompute cost per byte rho while both the
  offload schedule (D2H, production order, ends before (1 - g) T_F) and the prefetch
  schedule (H2D from T_F in deadline order, gated by the memory the backward pass
  releases) stay feasible, until S covers the deficit D = P - M.
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
from slackopt.linkbudget import forward_link_budget_bytes
from slackopt.plan import KEEP, RECOMP, SWAP, Plan
from slackopt.simulate import Evaluation, simulate
from slackopt.solverbase import MIN_BUDGET_REL_TOL, BaseSolver, Outcome, Param, Run

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
        self.W = float(link.bytes_per_s)
        self.lat = float(link.copy_latency_s)
        self.s = np.asarray(inst.s, dtype=np.int64)
        self.sf = self.s.astype(np.float64)
        self.dur = self.lat + self.sf / self.W
        self.r = np.asarray(inst.r, dtype=np.float64)
        self.d = np.asarray(inst.d, dtype=np.float64)
        self.c = np.asarray(inst.c, dtype=np.float64)
        self.finite_c = np.isfinite(self.c)
        self.TF = float(inst.forward_time_s)
        self.n_ops = inst.n_ops
        self.end_s = np.asarray(inst.end_s, dtype=np.float64)
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
        self.block_members = {b: np.flatnonzero(layers == b) for b in self.blocks}
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


def _fifo_ends(release: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """End times of jobs served in the given order on one channel.

    ``end_k = max(release_k, end_{k-1}) + dur_k`` in closed form:
    ``end_k = C_k + max_{j <= k}(release_j - C_{j-1})`` with C the cumulative durations.
    """
    if release.size == 0:
        return np.zeros(0)
    cd = np.cumsum(dur)
    return cd + np.maximum.accumulate(release - (cd - dur))


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
        self.sum = [0.0] * (2 * size)
        self.best = [-math.inf] * (2 * size)
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
        i = p + self.size
        sm, bs = self.sum, self.best
        sm[i], bs[i] = dp, self.r_l[p] + dp
        i //= 2
        while i:
            lft, rgt = 2 * i, 2 * i + 1
            sm[i] = sm[lft] + sm[rgt]
            bs[i] = max(bs[lft] + sm[rgt], bs[rgt])
            i //= 2

    def fits_with(self, p: int, dp: float) -> bool:
        """True if the last D2H copy ends by the limit with p (not in S) inserted."""
        i = p + self.size
        sm, bs = self.sum, self.best
        cur_s, cur_b = dp, self.r_l[p] + dp
        while i > 1:
            sib = i ^ 1
            if i & 1:  # right child: the sibling holds earlier positions
                cur_b = max(bs[sib] + cur_s, cur_b)
            else:
                cur_b = max(cur_b + sm[sib], bs[sib])
            cur_s += sm[sib]
            i //= 2
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
    order, each starting no earlier than its r and taking latency + s / W (sec. 3.2)."""
    pr = _prep(instance)
    pos = np.sort(np.asarray(positions, dtype=np.int64))
    return _fifo_ends(pr.r[pos], pr.dur[pos])


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
    return order, _prefetch_ends(pr, pr.s[order])


def _prefetch_ends(pr: _Prep, s_ord: np.ndarray) -> np.ndarray:
    """H2D ends for copies of sizes `s_ord` in queue order, gated by the release credits
    ``pr.credits``."""
    if s_ord.size == 0:
        return np.zeros(0)
    cc = pr.credits
    need = np.cumsum(s_ord)
    ri = np.searchsorted(cc, need, side="left")
    ok = ri < cc.size
    rel = np.full(s_ord.size, np.inf)
    rel[ok] = pr.rel_sorted[ri[ok]]
    rel = np.maximum(rel, pr.TF)
    return _fifo_ends(rel, pr.lat + s_ord.astype(np.float64) / pr.W)


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
      each taking ``copy_latency_s + s / W``; the last ends by ``(1 - g) * T_F``;
    - prefetch: H2D copies from T_F in deadline order (d), each starting only once the
      bytes released so far by the ideal backward pass cover the bytes of all copies up
      to and including it; each copy ends by its d. Memory is assumed full at T_F.

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

    Host pinned-memory limit (``instance.host_memory_bytes``): a candidate joins S only if
    the bytes of S stay within the limit. Host occupancy never exceeds the bytes of S (a
    storage is held at most once, from its D2H start to its last backward use), so every
    plan respects the limit; a tensor skipped for it stays keep and Pass 2 recomputes it
    if memory demands (the fall-back: recompute, else keep).

    Cost: the offload test is O(log n) per candidate and per acceptance (a segment tree
    over positions for ``end_last = max_k (r_k + sum of durations from k on)``, see
    :class:`_OffloadTree`, with an O(n) reference test for the rare candidates within
    rounding of the limit); the prefetch test (only for candidates that pass the offload
    test) recomputes only the queue from the candidate's place j on, O((|S| - j) log n)
    vectorized (closed-form FIFO + searchsorted), with the same additions in the same
    order as a recomputation of the whole queue.

    Args:
        instance: the problem.
        M: memory budget (bytes).
        g: offload guard (share of T_F).
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
    limit = (1.0 - g) * pr.TF
    host_cap = instance.host_memory_bytes
    s, r, d, dur, TF = pr.s, pr.r, pr.d, pr.dur, pr.TF

    inS = np.zeros(n, dtype=bool)
    off_tree = _OffloadTree(n, r, limit)
    # Prefetch state: release credits (fixed, pr.credits); S in queue order (d, then
    # position) as sizes, durations, deadlines and the planned schedule's running values
    # (cumulative bytes, release times, cumulative durations, running maximum of the
    # closed-form FIFO terms), so a test recomputes only the queue from p on.
    cc = pr.credits
    rel_sorted = pr.rel_sorted
    total_credits = int(cc[-1])
    keys: list[tuple[float, int]] = []
    Sdur = np.zeros(0)
    Sd = np.zeros(0)
    Sneed = np.zeros(0, dtype=np.int64)
    Scd = np.zeros(0)
    Sacc = np.zeros(0)
    r_l, d_l, dur_l, s_l = r.tolist(), d.tolist(), dur.tolist(), s.tolist()
    total = 0
    checked = 0
    for p in cand.tolist():
        if total >= D:
            break
        checked += 1
        dp_, rp, ddp = dur_l[p], r_l[p], d_l[p]
        if host_cap is not None and total + s_l[p] > host_cap:
            continue  # host pinned memory full: p stays keep (Pass 2 may recompute it)
        # Quick necessary conditions: the copy alone must fit both windows.
        if rp + dp_ > limit or TF + dp_ > ddp:
            continue
        # Offload test, O(log n): the last D2H end with p inserted.
        if not off_tree.fits_with(p, dp_):
            continue
        # Prefetch test, O((|S| - j) log n): p joins the queue at j; copies before j keep
        # their schedule (it passed when they joined), the rest is recomputed.
        sp = s_l[p]
        if total + sp > total_credits:
            continue  # the releases never cover the queue
        key = (ddp, p)
        j = bisect.bisect_left(keys, key)
        need_suf = np.empty(len(keys) - j + 1, dtype=np.int64)
        need_suf[0] = (int(Sneed[j - 1]) if j else 0) + sp
        need_suf[1:] = Sneed[j:] + sp
        rel_suf = rel_sorted[cc.searchsorted(need_suf)]
        np.maximum(rel_suf, TF, out=rel_suf)
        dur_suf = np.concatenate(((dp_,), Sdur[j:]))
        d_suf = np.concatenate(((ddp,), Sd[j:]))
        if j:
            # Same left-to-right sums as a cumsum over the whole queue.
            cd_suf = np.cumsum(np.concatenate(((Scd[j - 1],), dur_suf)))[1:]
        else:
            cd_suf = np.cumsum(dur_suf)
        acc_suf = np.maximum.accumulate(rel_suf - (cd_suf - dur_suf))
        if j:
            np.maximum(acc_suf, Sacc[j - 1], out=acc_suf)
        if not (cd_suf + acc_suf).__le__(d_suf).all():
            continue
        # Accept p.
        inS[p] = True
        total += sp
        keys.insert(j, key)
        Sdur = np.concatenate((Sdur[:j], dur_suf))
        Sd = np.concatenate((Sd[:j], d_suf))
        Sneed = np.concatenate((Sneed[:j], need_suf))
        Scd = np.concatenate((Scd[:j], cd_suf))
        Sacc = np.concatenate((Sacc[:j], acc_suf))
        off_tree.add(p, dp_)

    pos = np.flatnonzero(inS)
    off = nan.copy()
    off[pos] = _fifo_ends(r[pos], dur[pos])
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
        self.m = pr.static + np.cumsum(delta[:-1])

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
                self.m[a:b + 1] += sk

    def set_decision(self, k: int, new: int) -> None:
        """Change tensor k's decision and update the profile (and its inputs' needs)."""
        if self.dec[k] == new:
            return
        if self.dec[k] == KEEP and new == RECOMP:
            # keep [prod, hi] -> recomp [prod, last_fwd] + [lo, hi]: free the gap.
            a, b = int(self.pr.last_fwd[k]) + 1, int(self.lo[k])
            if b > a:
                self.m[a:b] -= self.pr.s[k]
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
    m = prof.m
    dec = prof.dec
    M = int(M)
    res = Pass2Result(dec, m)
    if pr.n_ops == 0:
        return res
    finite_pos = pr.finite_c & (pr.s > 0)
    c, sf, last_fwd = pr.c, pr.sf, pr.last_fwd
    blocks_left = list(pr.blocks)
    i = 0
    cur_i = -1  # op whose candidate list is cached
    cand = cand_c = cand_s = np.zeros(0)
    alive = 0
    while True:
        if m[i] <= M:
            over = np.flatnonzero(m[i:] > M)
            if over.size == 0:
                break
            i += int(over[0])
        if i != cur_i:
            # Candidates at i: only the chosen one leaves the set while i stays the
            # first violation (needs only move earlier, to ops after i).
            cand = np.flatnonzero((dec == KEEP) & finite_pos & (last_fwd < i) & (prof.lo > i))
            cand_c, cand_s = c[cand], sf[cand]
            alive = cand.size
            cur_i = i
        if alive:
            E = float(m.max() - M)
            j = int(np.argmin(cand_c / np.minimum(cand_s, E)))
            k = int(cand[j])
            cand_c[j] = np.inf  # removed
            alive -= 1
            prof.set_decision(k, RECOMP)
            res.picks.append(k)
            continue
        cur_i = -1
        # Fallback: the earliest block with a non-recomp rebuildable tensor.
        converted = False
        while blocks_left:
            b = blocks_left[0]
            mem = pr.block_members[b]
            todo = mem[(dec[mem] != RECOMP) & finite_pos[mem]]
            if todo.size == 0:
                blocks_left.pop(0)
                continue
            for k in todo.tolist():
                prof.set_decision(k, RECOMP)
            res.fallback_blocks.append(b)
            blocks_left.pop(0)
            converted = True
            break
        if not converted:
            res.fits = False
            break
    res.decisions = dec
    res.profile = m
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
        """Run the validation/repair rounds at budget M; return the best and the log."""
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
        return {"best": best, "rounds": rounds, "evaluations": n_eval, "timed_out": timed_out}

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
                           objective_s=float(ev.step_time_s), info=info)
        # No feasible round.
        last = plan(instance, M, g=self.g, swap_order=self.swap_order, use_link=self.use_link)
        info.update({"swapped_bytes": int(instance.s[last.decisions == SWAP].sum()),
                     "recomputed_bytes": int(instance.s[last.decisions == RECOMP].sum())})
        if out["timed_out"]:
            return Outcome(last.to_plan(instance), status="timeout", min_budget_bytes=None,
                           info=info)
        if self.min_budget_search:  # the base class bisects over feasible_at
            info["min_budget_method"] = (
                "bisection over M in (M, P], SlackSwap feasible at the upper end, "
                f"resolution {MIN_BUDGET_REL_TOL:.1%} of P")
        return Outcome(last.to_plan(instance), status="infeasible", info=info)

    def feasible_at(self, instance: Instance, budget_bytes: int, run: Run | None = None) -> bool:
        """True if SlackSwap's rounds find a feasible plan at budget M (bytes), without a
        time limit (the predicate of the minimum-budget bisection)."""
        if budget_bytes >= instance.P:
            return True
        return self._rounds(instance, int(budget_bytes), None)["best"] is not None

__all__ = ["SlackSwap", "SwapSet", "Pass2Result", "PlannedRound", "pass1", "pass2",
           "pass2_detailed", "plan", "offload_schedule", "prefetch_schedule", "offload_end_op"]
