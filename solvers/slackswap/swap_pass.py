"""SlackSwap's Pass 1 (sec. 3.2; Algorithm 1, lines 2-6): the swap set S that spends the
link budget, with the planned offload (D2H) and prefetch (H2D) schedules it is tested on."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

import numpy as np

from slackopt.instance import Instance
from slackopt.simulate.rules import copy_time, fifo_ends
from slackopt.solvers.slackswap.kernels import (
    _off_add,
    _off_end_with,
    _offload_fits_with,
    _prefetch_insert,
)
from slackopt.solvers.slackswap.prep import _positions, _Prep, _prep

SWAP_ORDERS = ("rho", "production")
"""The orders of Pass 1's candidates: decreasing rho (the paper), or production order
(the swap-first ablation, sec. 4.4)."""


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

    def limit_of(self, p: int) -> float:
        """The time every copy must end by (s), p's included."""
        return self.limit

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


class _StageOffloads:
    """Pass 1's offload test in a pipeline stage, where each copy has its own limit (the
    guard's share of its forward unit): the FIFO of S in production order, every copy
    against its limit, O(|S|) per candidate (compiled, :func:`_offload_fits_with`).

    Args:
        r: per saved position, the release of its D2H copy (s).
        lim: per saved position, the time its copy must end by (s).
        cap: most copies S will hold.
    """

    def __init__(self, r: np.ndarray, lim: np.ndarray, cap: int) -> None:
        self.r_l, self.lim_l = r.tolist(), lim.tolist()
        self.positions: list[int] = []
        self.rS, self.durS, self.limS = np.zeros(cap), np.zeros(cap), np.zeros(cap)

    def limit_of(self, p: int) -> float:
        """The time position p's copy must end by (s)."""
        return self.lim_l[p]

    def fits_with(self, p: int, dp: float) -> bool:
        """True if every D2H copy ends by its limit with p (not in S, duration dp s)."""
        j = bisect.bisect_left(self.positions, p)
        return _offload_fits_with(self.rS, self.durS, self.limS, len(self.positions), j,
                                  self.r_l[p], dp, self.lim_l[p])

    def add(self, p: int, dp: float) -> None:
        """Insert position p with copy duration dp (s)."""
        j = bisect.bisect_left(self.positions, p)
        k = len(self.positions)
        rS, durS, limS = self.rS, self.durS, self.limS
        rS[j + 1:k + 1], durS[j + 1:k + 1], limS[j + 1:k + 1] = (
            rS[j:k].copy(), durS[j:k].copy(), limS[j:k].copy())
        rS[j], durS[j], limS[j] = self.r_l[p], dp, self.lim_l[p]
        self.positions.insert(j, p)


class _PrefetchQueue:
    """Pass 1's prefetch test: S in queue order (deadline d, then position) as sizes,
    durations, deadlines, gates and the planned schedule's running values (cumulative
    bytes, credit indices, cumulative durations, running maximum of the closed-form FIFO
    terms), so a test recomputes only the queue from the candidate's place j on,
    O((|S| - j) log n) compiled (:func:`_prefetch_insert`); copies before j keep their
    schedule (it passed when they joined).

    Args:
        pr: the instance's arrays (release credits ``credits``, ``rel_sorted``).
        cap: most copies S will hold.
    """

    def __init__(self, pr: _Prep, cap: int) -> None:
        self.cc = pr.credits
        self.rel_sorted = pr.rel_sorted
        self.total_credits = int(self.cc[-1])  # bytes released in all: S holds no more
        self.keys: list[tuple[float, int]] = []
        self.Sdur, self.Sd, self.Scd, self.Sacc = (np.zeros(cap), np.zeros(cap),
                                                   np.zeros(cap), np.zeros(cap))
        self.Sg = np.zeros(cap)
        self.Sneed, self.Sri = np.zeros(cap, dtype=np.int64), np.zeros(cap, dtype=np.int64)
        self.b_need, self.b_ri = np.zeros(cap, dtype=np.int64), np.zeros(cap, dtype=np.int64)
        self.b_cd, self.b_acc = np.zeros(cap), np.zeros(cap)

    def insert_if_fits(self, p: int, sp: int, hp: float, ddp: float, gp: float) -> bool:
        """Insert position p (sp bytes, H2D duration hp s, deadline ddp s, gate gp s: the
        end of its forward unit) if every copy of the queue with it still ends by its
        deadline; True if inserted."""
        key = (ddp, p)
        j = bisect.bisect_left(self.keys, key)
        if not _prefetch_insert(self.Sdur, self.Sd, self.Sg, self.Sneed, self.Sri, self.Scd,
                                self.Sacc, len(self.keys), j, sp, hp, ddp, gp, self.cc,
                                self.rel_sorted, self.b_need, self.b_ri, self.b_cd,
                                self.b_acc):
            return False
        self.keys.insert(j, key)
        return True


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
    pos, total, checked = _greedy(pr, cand, D, g, instance.host_memory_bytes)
    off = nan.copy()
    off[pos] = fifo_ends(pr.r[pos], pr.dur[pos])
    pre = nan.copy()
    if pos.size:
        order_, ends = prefetch_schedule(instance, pos)
        pre[order_] = ends
    return SwapSet(pos, off, pre, total, D, checked)


def _greedy(pr: _Prep, cand: np.ndarray, D: int, g: float,
            host_cap: int | None) -> tuple[np.ndarray, int, int]:
    """Pass 1's greedy loop (:func:`pass1`): each candidate of `cand` (saved positions, in
    the order tested) joins S if the host limit `host_cap` (bytes, None = unlimited), the
    offload test and the prefetch test all pass, until S covers the deficit `D` (bytes).

    Returns:
        (positions of S ascending, bytes of S, candidates tested).
    """
    # Each offload ends by the guard's share of its window: (1 - g) T_F in a single pass;
    # in a pipeline stage, (1 - g) of the way through its forward unit.
    lim = pr.fwd_start + (1.0 - g) * (pr.fwd_end - pr.fwd_start)
    offloads: _OffloadTree | _StageOffloads = (
        _OffloadTree(pr.n, pr.r, (1.0 - g) * pr.TF) if pr.single
        else _StageOffloads(pr.r, lim, cand.size + 1))
    queue = _PrefetchQueue(pr, cand.size + 1)
    inS = np.zeros(pr.n, dtype=bool)
    r_l, d_l, dur_l, s_l = pr.r.tolist(), pr.d.tolist(), pr.dur.tolist(), pr.s.tolist()
    hdur_l, gate_l = pr.dur_h2d.tolist(), pr.fwd_end.tolist()
    total = 0
    checked = 0
    for p in cand.tolist():
        if total >= D:
            break
        checked += 1
        dp_, hp, rp, ddp, gp, sp = dur_l[p], hdur_l[p], r_l[p], d_l[p], gate_l[p], s_l[p]
        if host_cap is not None and total + sp > host_cap:
            continue  # host pinned memory full: p stays keep (Pass 2 may recompute it)
        # Quick necessary conditions: the copy alone must fit both windows.
        if rp + dp_ > offloads.limit_of(p) or gp + hp > ddp:
            continue
        if not offloads.fits_with(p, dp_):
            continue
        if total + sp > queue.total_credits:
            continue  # the releases never cover the queue
        if not queue.insert_if_fits(p, sp, hp, ddp, gp):
            continue
        # Accept p.
        inS[p] = True
        total += sp
        offloads.add(p, dp_)
    return np.flatnonzero(inS), total, checked


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
