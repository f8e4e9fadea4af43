"""A decision MILP whose optimum is a lower bound on the step time: memory at
*every* op with a keep-all excess over M, forward and backward, where a swap counts as
absent only when its D2H has ended in time on the serial D2H engine and its H2D fits
before its next reader, and recomp chains keep their rebuilt recipe inputs resident.

It sharpens the checkpoint LP (solvers/milp/bounds/checkpoint.py) in three ways: D2H timing at
every op with an excess, not at four forward checkpoints (elsewhere the LP counts a swap
freed at once); backward ops get the same timing (the LP's backward rows count a swap
absent with no copy at all), plus H2D windows that start at the op; and the decisions
are binary. The bound returned is certified: its LP relaxation's safe dual bound
(solvers/milp/certify/safe_lp.py), raised by the certified branch and bound over the decisions
(solvers/milp/certify/certified_bb.py), valid also when the search stops early. SCIP's solve of
the MILP gives candidate plans and an uncertified bound (``info["milp_bound_s"]``).

The model (times in the unit of :func:`~.checkpoint.time_unit`, microseconds or a power of
ten above, memory in P / 1e4 bytes; ``w_t = latency + s_t / W``
the shortest a copy of t can last; S_k, E_k ideal start and end of op k, T_F the ideal
end of the forward pass; K the ops whose keep-all profile exceeds M):

- binaries ``xs_t, xr_t``, ``xs + xr <= 1`` (no ``xr`` when c_t = inf); ``Sf >= 0`` the
  forward stall, ``Xb >= 0`` the backward stall plus the recompute time; objective
  ``min Sf + Xb``; the bound is ``T* + dual bound``. ``Xb >= sum_t c_t xr_t``.
- For k in K, tensor t *absent-able at k*: live at k (produced at or before k, last
  backward reader at or after k), its forward readers and ready op before k, and k not a
  reader of t. ``z_tk <= xs_t`` in [0, 1] (t is a swap with no device copy and no H2D
  buffer at the real start of k), non-decreasing in k over the forward ops.
  :func:`~.timing.timing_bound` solves the MILP with xs and xr binary first (z binary from the
  start closed the search several times slower: docs/bounds.md, "Settings and the
  measurements behind them"), then, with the time left, with z binary, whose assignments
  are plans more often.
- FIFO: ``Q_g >= Q_{g-1} + sum w_t xs_t`` and ``Q_g >= r_g + sum w_t xs_t`` over the
  tensors whose ready op is g; for t absent-able at k whose group follows g' (and, at a
  backward k, no tensor queued before t has its last backward reader before k):
  ``Q_{g'} + w_t z_tk <= S_k + Sf (+ B_k) + bm (1 - z_tk)``, bm the largest ``Q_{g'} - S_k``
  the rows allow.
- Memory at k in K: ``static_k + sum_{t live at k} s_t res_tk <= M``, where res counts
  what is surely resident: 1 while k <= lastfwd_t; after it, a keep 1, a swap
  ``xs_t - z_tk``, a recomp 0 before its first backward reader and 1 from it on;
  before that, in the backward pass, a recomp tensor rebuilt before k because the
  recipe of a recomp tensor u rebuilt by then reads it counts ``a_tk`` =
  ``xr_t AND OR_u R_uk`` (``R_uk = xr_u`` when firstbwd_u <= k, else ``a_uk``),
  linearised exactly: ``a <= xr_t``, ``a <= sum_u R_uk``, ``a >= xr_t + R_uk - 1``;
  u ranges over the readers with bytes, and where a rebuildable reader without bytes
  (no decision variable) may be rebuilt by k (its first backward reader is at or before
  k, or, recursively, one of its readers may be), ``a <= sum_u R_uk`` is left out.
- Backward delay: ``B_j >= 0`` for backward op j, with ``Xb >= B_j + sum c_t (xr_t -
  a_tj)`` over the recomp tensors with firstbwd_t > j (those not rebuilt before j).
- D2H at k in K, for each threshold theta among the ready times of the absent-able
  tensors: ``sum_{r_t >= theta} w_t z_tk <= S_k - theta + Sf (+ B_k for backward k)``.
- H2D after the forward pass: ``h_t >= z_tk`` for k < firstbwd_t; for each backward op
  j: ``sum_{firstbwd_t <= j} w_t h_t <= (S_j - T_F) + B_j``; and for a recomp tensor u
  whose recipe reads t with firstbwd_u = j < firstbwd_t, with zf_t the z of t at the
  last forward op of K: ``w_t zf_t <= (S_j - T_F) + B_j + w_t (1 - xr_u)``.
- H2D window at backward k in K: with ``next_t(k)`` the first backward reader of t
  after k, for each j among them: ``sum_{next_t(k) <= j} w_t z_tk <= (S_j - S_k) + B_j``;
  and for u as above with k < firstbwd_u = j < next_t(k):
  ``w_t z_tk <= (S_j - S_k) + B_j + w_t (1 - xr_u + a_uk)``.

Why every plan the barrier-free runtime runs to the end satisfies it with its own values
(../shared/spec/semantics.md): set ``xs, xr`` to its decisions, ``Sf`` to its forward
stall and ``Xb`` to its backward stall plus recompute time (``T - T* = Sf + Xb``, the
evaluator's exact split), ``z_tk = 1`` iff t is a swap with neither its device copy nor
an H2D buffer of it allocated at the real start of op k (when k's allocations are made),
``h_t = 1`` iff some such k lies before t's first backward reader, ``a_tk = 1`` iff t is
recomp and rebuilt before the real start of k though firstbwd_t > k, ``B_j`` the backward
stalls and rebuild time before the real start of j, ``Q_g`` the smallest value its rows
allow. The real start of op k is ``S_k`` plus the stalls and rebuilds before it:
``S_k + (forward stall so far) <= S_k + Sf`` in the forward pass and ``S_k + Sf + B_k``
in the backward pass (the backward pass starts at the real end of the forward pass).

- Memory: at the instant op k's allocations are made, the non-saved tensors and
  workspace of op k (``static_profile``) and the saved tensors counted in res are
  resident: a tensor before the end of its last forward reader; a keep to the end of
  its last backward reader; a swap not absent by definition of z (a reader of t has it
  resident: it waits for the H2D or uses the lagging device copy); a recomp tensor from
  its rebuild, which runs before its first backward reader, to its last reader. A recomp
  tensor u rebuilt by k had its recipe inputs resident at its rebuild (a recipe input
  that is itself recomp is rebuilt first, and a rebuilt tensor is freed only after its
  last reader, here a backward op at or after its own first backward reader > k), so a
  recomp input t of u is resident at k: ``a >= xr_t + R_uk - 1``; conversely a recomp
  t with firstbwd_t > k is rebuilt before k only for such a u (its first need), so
  ``a <= xr_t`` and ``a <= sum_u R_uk`` -- unless that u has no bytes: a zero-byte
  recomp tensor has no xr, but its rebuild runs those of its recomp inputs first (with
  the row over the readers with bytes only, ``bwd_delay`` charged such an early rebuild
  again after k: tests/test_bound_point.py, ``zero_byte_early_rebuild``). Memory never
  exceeds M; everything else resident only adds to the left side.
- Monotone z: in the forward pass a freed device copy comes back only by an H2D, and
  no H2D starts before the real end of the forward pass.
- Backward delay: a rebuild runs in the gap before its first need, firstbwd_t or the
  rebuild of a recomp tensor whose recipe reads it (semantics: "a recipe input that is
  itself recomp is rebuilt first"); so it runs before op j iff ``a_tj = 1`` or
  firstbwd_t <= j, and the rebuilds of the other recomp tensors (c_t each) run after
  the real start of j: ``Xb >= B_j +`` their time.
- D2H: a swap absent at k had its device copy freed, which needs its D2H ended, so that
  D2H ran inside [the real end of its ready op, the real start of k]; the former is no
  earlier than the ideal r_t (stalls only delay). The D2H engine runs one copy at a time
  and each lasts at least w_t (latency, then s_t at W; the duplex rate only slows it
  down), so the copies with ``r_t >= theta`` need ``sum w_t`` inside
  ``[theta, real S_k]``. Other copies the engine ran are left out.
- FIFO: copies are queued at the end of the ready op, in that order, one at a time; the
  engine finishes the swaps queued through group g no earlier than Q_g (by induction: a
  group's copies start after its ready time and after the earlier groups' copies). A
  swap t absent at k had its D2H ended by the real start of k, after every swap queued
  before it (ready op before t's) had run: ``Q_{g'} + w_t <= real S_k``. A queued D2H
  is dropped only when its tensor has no reader left; none of those queued before t is
  in the forward pass, nor at a backward k before which none of their last backward
  readers ended (the rows are stated only there). With z = 0 the row allows every
  value of the rows.
- H2D after the forward pass: a swap absent at some k before its first backward reader
  needs an H2D (no device copy left to use) that starts after the real end of the forward
  pass (no H2D starts earlier) and ends before its first backward reader; the H2D engine
  is serial; the real time from the end of the forward pass to the start of j is
  ``S_j - T_F + B_j``. A swap absent in the forward pass (zf = 1) has no device copy
  from then on but the H2D's, so the rebuild of a recomp tensor u whose recipe reads it,
  which runs before op firstbwd_u starts, waits for such an H2D. (A swap first absent
  in the backward pass may have lent its lagging device copy to that rebuild: no row.)
  Re-fetches and the queue order are left out.
- H2D window: a swap absent at backward op k needs an H2D for its next need after k,
  its next backward reader or the rebuild of a recomp u reading it that runs after k
  starts (``xr_u - a_uk = 1``), before op firstbwd_u; that H2D starts after the real
  start of k (no buffer then) and ends before the real start of j; the real time
  between them is ``S_j - S_k + B_j - B_k <= (S_j - S_k) + B_j``; the engine is serial.
- Recompute: every recomp tensor is rebuilt once (it is saved, so a backward op reads
  it), a task of duration c_t on the compute stream, inside ``Xb``.

So the assignment of a run is feasible with objective ``T - T*``: the MILP optimum is at
most that, and so is every dual bound SCIP proves (and the LP optimum).
:func:`timing_point` builds that assignment from a run's trace; tests/test_bound_point.py
checks every row (each named by its family, ``"mem[k]"``, ``"fifo_absent[t,k]"``) on
every plan of small instances. Instances with
views (``Instance.aliased``) get no bound (per-view sizes would count a storage twice).
"""

from __future__ import annotations

import math

import numpy as np

from slackopt.instance import Instance
from slackopt.plan import RECOMP, SWAP
from slackopt.solvers.milp.bounds.checkpoint import bound_arrays
from slackopt.solvers.milp.certify.runpoint import RunView, complete_point, decided
from slackopt.solvers.milp.linear.lin import _INF, _Lin

MAX_THRESHOLDS = 64
"""Ready-time thresholds per op (a subset only weakens the bound)."""


def build_timing_model(inst: Instance, M: int, *, integer: bool = True,
                       max_ops: int | None = None, z_binary: bool = False,
                       deadline: float | None = None) -> tuple[_Lin, dict] | None:
    """The model of the module docstring.

    Args:
        inst: the instance (no views).
        M: budget (bytes).
        integer: binary decisions (else their LP relaxation).
        z_binary: the absence variables z binary too (else in [0, 1]).
        max_ops: time at most this many ops, those with the largest keep-all excess
            (the rows of the others are left out: a relaxation); None: every op in K.
        deadline: perf_counter time after which building stops with ModelTimeout.

    Returns:
        (model, info with its size), or None when the instance has views, no saved
        tensor, or no op with a keep-all excess over M.
    """
    a_ = bound_arrays(inst, M)
    if a_ is None:
        return None
    keep = np.asarray(inst.keep_all_profile, dtype=np.int64) / a_.mu
    K = [k for k in range(inst.n_ops) if keep[k] > a_.Mu]
    if max_ops is not None and len(K) > max_ops:
        K = sorted(sorted(K, key=lambda k: (-keep[k], k))[:max(1, max_ops)])
    if not K:
        return None
    b = _TimingBuilder(inst, a_, integer=integer, z_binary=z_binary, deadline=deadline)
    b.decisions()
    b.fifo_queue()
    for k in K:
        b.timed_op(k)
    b.h2d_after_forward()
    info = {"ops_timed": len(K), "absent_vars": b.n_z, "time_unit_s": a_.tu,
            **b.lin.stats()}
    return b.lin, info


class _TimingBuilder:
    """The state :func:`build_timing_model` shares between its sections: the instance's
    arrays in model units (:class:`~.checkpoint.BoundArrays`), the model being built and
    the variable families added so far. Each section adds the rows of one family of the
    module docstring's model, in the order :func:`build_timing_model` calls them, which
    fixes the model's variable and row order; the B and a variables are added when a row
    first needs them (:meth:`delay`, :meth:`early`). Why each row holds for every run
    is the module docstring's argument, paragraph by paragraph (Memory, Monotone z,
    Backward delay, D2H, FIFO, H2D after the forward pass, H2D window, Recompute)."""

    def __init__(self, inst: Instance, a_, *, integer: bool, z_binary: bool,
                 deadline: float | None) -> None:
        """`a_`: ``bound_arrays(inst, M)``; the other arguments as in
        :func:`build_timing_model`."""
        self.inst, self.a = inst, a_
        self.integer, self.z_binary = integer, z_binary
        self.n, self.nf, nS = inst.n_ops, inst.n_fwd, inst.n_saved
        self.bwd_readers = [sorted({int(j) for j in inst.saved_reader_idx[t].tolist()
                                    if j >= self.nf}) for t in range(nS)]
        s_, c = a_.s, a_.c
        # rebuildable tensors u whose recipe reads t: all t (rb_readers), rebuildable t
        self.rb_readers: dict[int, list[int]] = {}
        for u in a_.rec:
            for t in inst.recipe_inputs[u]:
                if t != u and s_[t] > 0:
                    self.rb_readers.setdefault(int(t), []).append(u)
        # ... and for the rebuilt-early indicators: every rebuildable reader, with bytes or
        # not (a recomp tensor of zero bytes has no xr but its rebuild runs those of its
        # recomp inputs first)
        self.rebuildable = np.isfinite(c)
        self.readers_any: dict[int, list[int]] = {}
        for u in np.flatnonzero(self.rebuildable).tolist():
            for t in inst.recipe_inputs[u]:
                if t != u:
                    self.readers_any.setdefault(int(t), []).append(int(u))
        self.lin = _Lin(deadline)
        self.h: dict[int, int] = {}
        self.n_z = 0
        self.early_cache: dict[int, dict[int, int]] = {}
        self.B: dict[int, int] = {}
        self.z_prev: dict[int, int] = {}     # t -> its z at the previous forward op of K

    def decisions(self) -> None:
        """The decisions ``xs, xr`` (``xs + xr <= 1``), the stalls ``Sf, Xb`` (the
        objective) and the recompute row ``Xb >= sum c_t xr_t``."""
        lin, a_, integer = self.lin, self.a, self.integer
        c, tu = a_.c, a_.tu
        self.xs = {t: lin.var(0, 1, integer, name=f"xs{t}") for t in a_.live}
        self.xr = xr = {t: lin.var(0, 1, integer, name=f"xr{t}") for t in a_.rec}
        for t in a_.rec:
            lin.row([(self.xs[t], 1.0), (xr[t], 1.0)], hi=1.0, name=f"one_decision[{t}]")
        self.Sf = lin.var(0, _INF, obj=1.0, name="Sf")
        self.Xb = lin.var(0, _INF, obj=1.0, name="Xb")
        lin.row([(self.Xb, 1.0)] + [(xr[t], -c[t] / tu) for t in a_.rec], lo=0.0,
                name="recompute")

    def early(self, j: int) -> dict[int, int]:
        """``a_tj`` for backward op j: t recomp and rebuilt before op j starts although its
        first backward reader comes later (a recomp tensor whose recipe reads t was
        rebuilt by then): ``a = xr_t AND OR_u R_uj``, linearised exactly; where a
        zero-byte rebuildable reader (no xr) may have been rebuilt by then, only
        ``a <= xr_t`` and the rows of the readers with bytes."""
        if j in self.early_cache:
            return self.early_cache[j]
        lin, xr, firstb, s_ = self.lin, self.xr, self.a.firstb, self.a.s
        readers_any = self.readers_any
        a: dict[int, int] = {}
        maybe: set[int] = set()     # zero-byte tensors that may be rebuilt before j
        done: set[int] = set()

        def reader(frame: list, u: int) -> None:   # what reader u says of frame's tensor
            if u in xr:
                if firstb[u] <= j:
                    frame[2].append(xr[u])
                elif u in a:
                    frame[2].append(a[u])
            elif s_[u] == 0 and (firstb[u] <= j or u in maybe):
                frame[3] = True     # a zero-byte reader may have rebuilt t before j

        def close(t: int, by: list, free: bool) -> None:
            if t not in xr:
                if s_[t] == 0 and (by or free):
                    maybe.add(t)
                return
            if by or free:
                a[t] = lin.var(0, 1, name=f"a{t}_{j}")
                lin.row([(a[t], 1.0), (xr[t], -1.0)], hi=0.0, name=f"early_recomp[{t},{j}]")
                if not free:
                    lin.row([(a[t], 1.0)] + [(v, -1.0) for v in by], hi=0.0,
                            name=f"early_by_reader[{t},{j}]")
                for v in by:
                    lin.row([(a[t], 1.0), (xr[t], -1.0), (v, -1.0)], lo=-1.0,
                            name=f"early_if_reader[{t},{j}]")

        def visit(root: int) -> None:
            """Depth first over the readers that come after j, each reader closed before
            the tensor it reads; a stack of frames [t, readers left, by, free], not
            recursion (a chain of a thousand rebuildable tensors is that deep)."""
            if root in done:
                return
            done.add(root)
            stack = [[root, iter(readers_any.get(root, [])), [], False]]
            while stack:
                frame = stack[-1]
                for u in frame[1]:
                    if firstb[u] > j and u not in done:
                        done.add(u)
                        stack.append([u, iter(readers_any.get(u, [])), [], False])
                        break
                    reader(frame, u)
                else:
                    stack.pop()
                    close(frame[0], frame[2], frame[3])
                    if stack:
                        reader(stack[-1], frame[0])

        for t in np.flatnonzero(self.rebuildable).tolist():
            if firstb[t] > j:
                visit(int(t))
        self.early_cache[j] = a
        return a

    def delay(self, j: int) -> int:
        """B_j: backward stalls and rebuilds before the real start of backward op j;
        ``Xb >= B_j + sum c_t`` over the recomp tensors rebuilt after it starts."""
        B = self.B
        if j not in B:
            lin, xr, c, tu, firstb = self.lin, self.xr, self.a.c, self.a.tu, self.a.firstb
            B[j] = lin.var(0, _INF, name=f"B{j}")
            a = self.early(j)
            lin.row([(self.Xb, 1.0), (B[j], -1.0)]
                    + [(xr[t], -c[t] / tu) for t in self.a.rec if firstb[t] > j]
                    + [(a[t], c[t] / tu) for t in a], lo=0.0, name=f"bwd_delay[{j}]")
        return B[j]

    def fifo_queue(self) -> None:
        """FIFO D2H queue, by ready op: Q[g] <= the time the engine has finished every swap
        queued through group g, and >= that group's ready time; with ``no_drop`` and
        ``q_ub`` for the FIFO rows of :meth:`absent`."""
        lin, xs, live, ready, r, wd = self.lin, self.xs, self.a.live, self.a.ready, \
            self.a.r, self.a.w_d2h
        self.groups = groups = sorted({int(ready[t]) for t in live})
        self.gpos = {g: i for i, g in enumerate(groups)}
        self.Q = Q = []
        for g in groups:
            mem = [t for t in live if ready[t] == g]
            q = lin.var(0, _INF, name=f"Q{g}")
            rg = float(r[mem[0]])
            lin.row([(q, 1.0)] + [(xs[t], -wd[t]) for t in mem], lo=rg,
                    name=f"fifo_ready[{g}]")
            if Q:
                lin.row([(q, 1.0), (Q[-1], -1.0)] + [(xs[t], -wd[t]) for t in mem], lo=0.0,
                        name=f"fifo_chain[{g}]")
            Q.append(q)
        # no_drop[i]: the smallest last backward reader among the tensors of groups
        # before group i
        self.no_drop = no_drop = [self.n] * (len(groups) + 1)
        for i, g in enumerate(groups):
            lb = min(int(self.a.lastb[t]) for t in live if ready[t] == g)
            no_drop[i + 1] = min(no_drop[i], lb)
        # q_ub[i]: the largest value the smallest Q of group i can take (every tensor a swap)
        self.q_ub = q_ub = []
        for g in groups:
            mem = [t for t in live if ready[t] == g]
            q_ub.append(max(float(r[mem[0]]), q_ub[-1] if q_ub else 0.0)
                        + float(sum(wd[t] for t in mem)))

    def timed_op(self, k: int) -> None:
        """The rows of op k in K: absence, memory, D2H windows and, for a backward k,
        H2D windows."""
        backward = k >= self.nf
        a_ = self.a
        livek = [t for t in a_.live if a_.prod[t] <= k <= a_.lastb[t]]
        elig = [t for t in livek
                if a_.lastf[t] < k and a_.ready[t] < k and k not in self.bwd_readers[t]]
        z = self.absent(k, elig)
        self.memory(k, livek, z)
        if not elig:
            return
        self.d2h_windows(k, elig, z)
        if backward:
            self.h2d_windows(k, elig, z)

    def absent(self, k: int, elig: list[int]) -> dict[int, int]:
        """``z_tk`` for the tensors `elig` absent-able at op k, with ``z <= xs``, monotone
        over the forward ops, the FIFO rows, and ``h_t >= z_tk`` before t's first
        backward reader; returns z."""
        lin, a_, xs, h, z_prev = self.lin, self.a, self.xs, self.h, self.z_prev
        backward = k >= self.nf
        start, wd = a_.start, a_.w_d2h
        z = {t: lin.var(0, 1, self.integer and self.z_binary, name=f"z{t}_{k}")
             for t in elig}
        self.n_z += len(z)
        for t in elig:
            lin.row([(z[t], 1.0), (xs[t], -1.0)], hi=0.0, name=f"absent_swap[{t},{k}]")
            if not backward:
                if t in z_prev:     # freed in the forward pass: stays freed till T_F
                    lin.row([(z[t], 1.0), (z_prev[t], -1.0)], lo=0.0,
                            name=f"fwd_monotone[{t},{k}]")
                z_prev[t] = z[t]
            i = self.gpos[int(a_.ready[t])]
            if i > 0 and self.no_drop[i] >= k:
                # FIFO: every swap queued before t ran before t's D2H ended
                bm = max(0.0, self.q_ub[i - 1] - float(start[k]))
                lin.row([(self.Q[i - 1], 1.0), (self.Sf, -1.0)]
                        + ([(self.delay(k), -1.0)] if backward else [])
                        + [(z[t], wd[t] + bm)], hi=float(start[k]) + bm,
                        name=f"fifo_absent[{t},{k}]")
            if k < a_.firstb[t]:
                if t not in h:
                    h[t] = lin.var(0, 1, name=f"h{t}")
                lin.row([(h[t], 1.0), (z[t], -1.0)], lo=0.0, name=f"h2d_needed[{t},{k}]")
        return z

    def memory(self, k: int, livek: list[int], z: dict[int, int]) -> None:
        """Memory at op k: ``static_k + sum_{t live at k} s_t res_tk <= M``."""
        a_, xr = self.a, self.xr
        sm, lastf, firstb = a_.sm, a_.lastf, a_.firstb
        # recomp tensors rebuilt early, resident before their first backward reader
        a = self.early(k) if k >= self.nf else {}
        const = float(a_.static[k])
        terms: list[tuple[int, float]] = []
        for t in livek:
            const += sm[t]
            if k <= lastf[t]:
                continue
            if t in z:
                terms.append((z[t], -sm[t]))
            if t in xr and k < firstb[t]:
                terms.append((xr[t], -sm[t]))
                if t in a:
                    terms.append((a[t], sm[t]))
        self.lin.row(terms, hi=a_.Mu - const, name=f"mem[{k}]")

    def d2h_windows(self, k: int, elig: list[int], z: dict[int, int]) -> None:
        """D2H at op k: suffix sums over ready time (latest first), one row per
        threshold (at most MAX_THRESHOLDS)."""
        r, start, wd = self.a.r, self.a.start, self.a.w_d2h
        stall = [(self.Sf, -1.0)] + ([(self.delay(k), -1.0)] if k >= self.nf else [])
        order = sorted(elig, key=lambda t: -r[t])
        thetas = sorted({float(r[t]) for t in elig}, reverse=True)
        if len(thetas) > MAX_THRESHOLDS:
            idx = np.linspace(0, len(thetas) - 1, MAX_THRESHOLDS).round().astype(int)
            thetas = [thetas[i] for i in sorted(set(idx.tolist()))]
        _prefix_rows(self.lin, [[t for t in order if r[t] >= th] for th in thetas],
                     {t: (z[t], wd[t]) for t in elig},
                     [float(start[k]) - th for th in thetas], stall, "d2h_window", f"{k},")

    def h2d_windows(self, k: int, elig: list[int], z: dict[int, int]) -> None:
        """H2D window at backward op k: from the real start of k to the next reader's, or
        to the rebuild of a recomp tensor whose recipe reads the swap."""
        a_, xr, delay = self.a, self.xr, self.delay
        start, wh, firstb = a_.start, a_.w_h2d, a_.firstb
        bwd_readers = self.bwd_readers
        # H2D window: from the real start of k to the next reader's
        nxt = {t: next(j for j in bwd_readers[t] if j > k) for t in elig}
        js = sorted(set(nxt.values()))
        _prefix_rows(self.lin, [[t for t in elig if nxt[t] <= j] for j in js],
                     {t: (z[t], wh[t]) for t in elig},
                     [float(start[j] - start[k]) for j in js],
                     [[(delay(j), -1.0)] for j in js], "h2d_gap", f"{k},")
        # ... or to the rebuild of a recomp tensor u whose recipe reads it, if that
        # comes earlier and after k (u recomp, not rebuilt by k: xr_u - a_uk)
        a = self.early(k)
        for t in elig:
            for u in self.rb_readers.get(t, []):
                j = int(firstb[u])
                if k < j < nxt[t]:
                    self.lin.row([(z[t], wh[t]), (delay(j), -1.0), (xr[u], wh[t])]
                                 + ([(a[u], -wh[t])] if u in a else []),
                                 hi=float(start[j] - start[k]) + wh[t],
                                 name=f"h2d_gap_rebuild[{t},{k},{u}]")

    def h2d_after_forward(self) -> None:
        """H2D after the forward pass: prefix sums over first backward reader, and the
        rows before the rebuild of a recomp tensor whose recipe reads a swap."""
        a_, h, delay = self.a, self.h, self.delay
        start, wh, firstb, TF = a_.start, a_.w_h2d, a_.firstb, a_.TF
        if h:
            js = sorted({int(firstb[t]) for t in h})
            _prefix_rows(self.lin, [[t for t in h if firstb[t] <= j] for j in js],
                         {t: (h[t], wh[t]) for t in h},
                         [float(start[j]) - TF for j in js], [[(delay(j), -1.0)] for j in js],
                         "h2d_after_fwd")
        # ... and before the rebuild of a recomp tensor whose recipe reads it, for a swap
        # freed in the forward pass (z_prev: its z at the last forward op of K, the
        # largest); one freed only in the backward pass may have been read by that
        # rebuild before
        for t, zt in self.z_prev.items():
            for u in self.rb_readers.get(t, []):
                j = int(firstb[u])
                if j < firstb[t]:
                    self.lin.row([(zt, wh[t]), (delay(j), -1.0), (self.xr[u], wh[t])],
                                 hi=float(start[j]) - TF + wh[t],
                                 name=f"h2d_after_fwd_rebuild[{t},{u}]")


def _prefix_rows(lin: _Lin, groups: list[list[int]], item: dict[int, tuple[int, float]],
                 rhs: list[float], stall: list, family: str = "prefix", key: str = "") -> None:
    """Rows ``sum_{t in groups[i]} coef_t var_t + stall_i <= rhs[i]`` for nested groups
    (each contains the one before), with one running-sum variable per group; `stall`:
    the terms of every row, or a list of them per row; `family`, `key`: the rows' name
    ``family[key i]`` (the running sums' rows and variables: ``family_sum[key i]``)."""
    q = None
    done: set[int] = set()
    if not stall or isinstance(stall[0], tuple):
        stall = [stall] * len(groups)
    for i, (grp, hi, st) in enumerate(zip(groups, rhs, stall, strict=True)):
        new = [t for t in grp if t not in done]
        done.update(new)
        if new or q is None:
            qn = lin.var(0, _INF, name=f"{family}_sum[{key}{i}]")
            lin.row([(qn, 1.0)] + ([(q, -1.0)] if q is not None else [])
                    + [(item[t][0], -item[t][1]) for t in new], 0.0, 0.0,
                    name=f"{family}_sum[{key}{i}]")
            q = qn
        lin.row([(q, 1.0)] + st, hi=hi, name=f"{family}[{key}{i}]")


def timing_point(inst: Instance, M: int, lin: _Lin, run: RunView) -> list[float]:
    """The point of the timing model `lin` (:func:`build_timing_model` of `inst`, `M`, any
    options) that the run `run` of a plan gives, as the module docstring's argument
    assigns it: ``xs, xr`` its decisions; ``Sf`` its forward stall; ``Xb`` its backward
    stall plus its recompute time; ``z_tk = 1`` iff t is a swap holding no device memory
    (no device copy, no H2D buffer) at the real start of op k; ``h_t = 1`` iff some z of
    t before its first backward reader is 1; ``a_tj = 1`` iff t was rebuilt before the
    real start of op j; ``B_j`` the backward stalls and rebuild time before the real
    start of j; ``Q_g`` the smallest value its rows allow; the running sums from their
    defining rows. Times in the model's unit (``bound_arrays(inst, M).tu``).

    Args:
        inst: the instance (no views; ``run.inst``).
        M: budget (bytes) the model was built for.
        lin: the model.
        run: the run (:func:`slackopt.solvers.milp.certify.runpoint.read_run`).

    Returns:
        One value per variable of `lin`; its objective is ``(T - T*) / tu`` of
        the run. tests/test_bound_point.py checks that it satisfies every row (and the
        integrality of xs, xr and z), for every plan of small instances.
    """
    a_ = bound_arrays(inst, M)
    if a_ is None:
        raise ValueError("the instance has no timing model")
    tu = a_.tu
    nf = inst.n_fwd
    dec = run.dec
    firstb = a_.firstb
    # real time from the end of the forward pass, less the ideal: B_j
    tf_real, tf_ideal = run.end[run.op_task[nf - 1]], float(inst.forward_time_s)
    vals: dict[str, float] = {"Sf": run.stall_fwd / tu,
                              "Xb": (run.stall_bwd + run.recompute) / tu}
    h: dict[int, float] = {}
    q_prev = None
    for nm in lin.names:
        if nm.startswith("xs"):
            vals[nm] = decided(dec, int(nm[2:]), SWAP)
        elif nm.startswith("xr"):
            vals[nm] = decided(dec, int(nm[2:]), RECOMP)
        elif nm.startswith("z"):
            t, k = (int(v) for v in nm[1:].split("_"))
            z = 1.0 if dec[t] == SWAP and not run.occupied(t, run.op_task[k]) else 0.0
            vals[nm] = z
            if k < firstb[t]:
                h[t] = max(h.get(t, 0.0), z)
        elif nm.startswith("a") and "_" in nm:
            t, j = (int(v) for v in nm[1:].split("_"))
            vals[nm] = 1.0 if dec[t] == RECOMP and run.rebuilt_before(t, j) else 0.0
        elif nm.startswith("B") and nm[1:].isdigit():
            j = int(nm[1:])
            b = (run.real_start(j) - tf_real) - (float(inst.start_s[j]) - tf_ideal)
            vals[nm] = max(0.0, b / tu)
        elif nm.startswith("Q") and nm[1:].isdigit():
            g = int(nm[1:])
            mem = [t for t in a_.live if a_.ready[t] == g]
            add = math.fsum(float(a_.w_d2h[t]) for t in mem if dec[t] == SWAP)
            q = float(a_.r[mem[0]]) + add
            if q_prev is not None:
                q = max(q, q_prev + add)
            vals[nm] = q_prev = q
    for nm in lin.names:
        if nm.startswith("h") and nm[1:].isdigit():
            vals[nm] = h.get(int(nm[1:]), 0.0)
    return complete_point(lin, vals)
