"""SlackSwap's Pass 2 (sec. 3.3; Algorithm 1, lines 7-12): recompute the cheapest bytes
wherever the planned memory profile exceeds the budget M."""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from slackopt.instance import Instance
from slackopt.plan import KEEP, RECOMP, SWAP
from slackopt.solvers.slackswap.kernels import (
    _mn_query,
    _mn_set,
    _mx_add,
    _mx_build,
    _mx_first_above,
    _mx_point,
    _mx_values,
)
from slackopt.solvers.slackswap.prep import _Prep, _prep


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
