"""A small LP lower bound on the step time that does not need the time-indexed model:
memory at a few forward *checkpoints* forces bytes out, by recompute (paid on the compute
stream in the backward pass) or by a finished offload (the D2H engine is serial, and time
it needs beyond the forward prefix is forward stall), and every byte offloaded and freed
must come back over H2D, after the forward pass, before its first backward reader.
The bound holds for plans run by the barrier-free runtime (``Plan.policy ==
"barrier_free"``) only: ``on_demand`` and ``layer_barriers`` plans may prefetch during the
forward pass or allocate buffers by other rules.

The LP (times in the unit of :func:`time_unit`, microseconds or a power of ten above,
memory in P / 1e4 bytes; ``w_t = latency + s_t / W`` the
shortest a copy of t can last):

- decisions ``xs_t, xr_t`` in [0, 1], ``xs + xr <= 1`` (``xr = 0`` when c_t = inf);
  ``Sf >= 0`` the forward stall, ``Sb >= 0`` the backward stall (and the rebuilds of
  tensors without bytes, which get no decision); objective
  ``min Sf + Sb + sum_t c_t xr_t``; the bound is ``T* + optimum``.
- ``R_j`` (backward op j) = ``sum c_t xr_t`` over the rebuildable tensors that a backward
  op up to j reads and, recursively, their rebuildable recipe inputs, with or without
  bytes (the rebuilds that can run before op j starts).
- Forward op k, every k: ``static_k + sum_{prod_t <= k} s_t res_t <= M`` with
  ``res_t = 1`` if ``k <= lastfwd_t``, else ``1 - xr_t - xs_t`` (a swap counted as freed
  at once).
- Forward checkpoint k (a few forward ops with the largest keep-all excess over M):
  ``z_tk`` in [0, ``xs_t``] for tensors with ``lastfwd_t < k`` (the swap of t is freed by
  the end of op k); the memory row with ``res_t = 1 - xr_t - z_tk``; and for each
  threshold ``theta`` among the eligible tensors' ready times r_t:
  ``sum_{r_t >= theta} w_t z_tk <= E_k - theta + Sf``.
- Backward checkpoint j (as many backward ops with the largest keep-all excess): memory
  at the start of op j, ``static_j + sum_{lastbwd_t >= j} s_t res_t <= M`` with
  ``res_t = 1 - xr_t - z_tj`` before t's first backward reader and ``1 - z_tj`` from it
  on, ``z_tj`` in [0, ``xs_t``] for the tensors that op j does not read (0 for those it
  reads); D2H timing as above with ``S_j - theta + Sf + Sb + R_j`` on the right.
- ``h_t >= z_tk`` for every forward checkpoint and every backward checkpoint before t's
  first backward reader (t needs an H2D in the backward pass);
  for each backward op j: ``sum_{firstbwd_t <= j} w_t h_t <= (S_j - T_F) + Sb + R_j``.
- Backward op j: ``static_j + sum_{lastbwd_t >= j} s_t (1 - xs_t - xr_t) +
  sum_{firstbwd_t <= j <= lastbwd_t} s_t xr_t + sum_{t read by j} s_t xs_t <= M``.

Why it is a relaxation (../shared/spec/semantics.md, barrier-free runtime): take any plan
the evaluator runs to the end. Set ``xs, xr`` to its decisions, ``Sf`` to its forward
stall, ``Sb`` to its backward stall plus the rebuild time of its recomp tensors of zero
bytes (those have no ``xr``; so ``T - T* = Sf + Sb + sum c_t xr_t``, the evaluator's
exact split), ``z_tk = 1`` iff t is a swap whose device copy was freed by the end of
forward op k (in the run), ``z_tj = 1`` iff t is a swap holding no device memory (no
device copy, no H2D buffer) at the start of backward op j, ``h_t = max z``
(:func:`checkpoint_point` builds this point from a run's trace; tests/test_bound_point.py
checks every row on every plan of small instances). Every row holds:

- Rebuild time before op j: the runtime runs each rebuild right before the first
  backward op that reads the tensor, after the rebuilds of its recomp recipe inputs
  (slackopt/simulate/_tasks.py), so the rebuilds that end before op j starts are
  rebuilds of tensors in the closure that ``R_j`` sums (the closure passes through
  recomp inputs of zero bytes: a zero-byte recomp tensor rebuilt before op j runs the
  rebuilds of its own recomp inputs first): the time of those with bytes is at most
  ``R_j``, that of the zero-byte ones is in ``Sb``. Op j starts at ``S_j`` plus the
  stalls and rebuilds before it: ``<= S_j + Sf + Sb + R_j``. (With ``Sb`` the backward
  stall alone, a zero-byte recomp tensor rebuilt before op j broke the backward D2H
  and the H2D rows, and so did a closure that stopped at it: tests/test_bound_point.py,
  ``zero_byte_rebuild_time`` and ``zero_byte_rebuild_closure``.)
- Memory (forward): the non-saved bytes and workspace live during op k
  (``static_profile``) and every saved tensor produced by then are resident at the end
  of op k except a recomp tensor whose last forward reader has ended, or a swap whose
  D2H has ended and whose forward readers are done: exactly ``z_tk``; a swap that is
  freed counts 0, one that is not counts ``1 >= 1 - xs``. Memory never exceeds M.
- D2H (checkpoint k): the D2H of t starts no earlier than the real end of its ready op,
  which is no earlier than the ideal r_t (ops run in order; stalls only delay);
  the copies freed by the end of op k have ended by its real end, ``E_k`` plus the forward
  stall so far, ``<= E_k + Sf``. The D2H engine runs one copy at a time and each lasts at
  least ``w_t`` (the latency, then s_t at W; the duplex rate only slows it), so the
  copies with ``r_t >= theta`` need ``sum w_t`` inside ``[theta, E_k + Sf]``. Dropping
  the other copies the engine ran (FIFO predecessors, lagging ones) only admits more.
- D2H (backward checkpoint j): a swapped tensor has no device copy at the start of op j
  only once its D2H has ended (its copy is freed, or evicted, only then; a D2H dropped
  for want of readers belongs to a tensor with no reader left, which no row counts), so
  the copies with ``z_tj = 1`` ran inside ``[theta, start of j]`` as above; a tensor op
  j reads is resident while j runs. Memory never exceeds M, also at that instant.
- H2D: a swap with no device copy at a checkpoint before its first backward reader has
  none at that reader's start unless an H2D brought it back in between, and an H2D
  (at least ``w_t``) runs after the real end of the forward pass (at or after ``T_F +
  Sf``) and ends before that reader starts (at most ``S_j + Sf + Sb + R_j``); the H2D
  engine is serial. Earlier reads by rebuilds, re-fetches after evictions and the
  order of the queue are left out.
- Recompute: each recomp tensor is rebuilt exactly once (it is read by a backward op:
  it is saved), a task of duration c_t (the evaluator's rebuild duration; recipes that
  share ops are charged each).
- Memory (backward): a kept tensor is resident from production to the end of its last
  reader; a recomp tensor from its rebuild (before its first backward reader) to the end
  of its last reader; a swap at least while a backward op reads it. Rebuild transients,
  prefetch buffers held early and the memory of other instants are left out.

All integer quantities are relaxed to [0, 1]; the LP optimum is <= the value of the run's
assignment = T - T*. Instances with views (``Instance.aliased``) get no bound (their
sizes per view would count a storage twice).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from slackopt.instance import Instance
from slackopt.plan import RECOMP, SWAP
from slackopt.simulate.rules import copy_time
from slackopt.solvers.milp.bounds.source import BoundContext, BoundValue
from slackopt.solvers.milp.certify.lp import lp_relaxation
from slackopt.solvers.milp.certify.runpoint import RunView, complete_point, decided
from slackopt.solvers.milp.certify.safe_lp import seconds_below
from slackopt.solvers.milp.linear.lin import _INF, ModelTimeout, _Lin
from slackopt.solvers.milp.model.steps import MEM_UNITS_PER_P, TIME_UNIT_S

MAX_CHECKPOINTS = 4
"""Forward checkpoints with D2H timing (those with the largest keep-all excess over M),
and as many backward ones (more raise the bound little for much more time:
docs/bounds.md, "Settings and the measurements behind them")."""
MAX_THRESHOLDS = 64
"""Ready-time thresholds per checkpoint (a subset only weakens the bound)."""


@dataclass(frozen=True)
class BoundArrays:
    """The instance's arrays in the units of the bound models (times in ``tu`` s, see
    :func:`time_unit`; memory in P / MEM_UNITS_PER_P), over the saved positions unless
    said otherwise.

    Attributes: ``tu`` time unit (s); ``mu`` memory unit (bytes); ``Mu`` the budget;
    ``s`` sizes (bytes, int64) and ``sm`` (units); ``c`` rebuild times (s, inf if none);
    ``w_d2h``, ``w_h2d`` shortest D2H and H2D copy times (latency + s / W_d2h or
    W_h2d: the other direction idle); ``r`` ready times; ``start``, ``end``
    ideal op starts and ends (per op); ``TF`` end of the forward pass; ``prod``,
    ``lastf``, ``ready``, ``firstb``, ``lastb`` op indices (producer, last forward
    reader, ready op, first and last backward reader); ``static`` the static profile
    (per op); ``live`` tensors with bytes; ``rec`` those of them with a recipe."""

    tu: float
    mu: float
    Mu: float
    s: np.ndarray
    sm: np.ndarray
    c: np.ndarray
    w_d2h: np.ndarray
    w_h2d: np.ndarray
    r: np.ndarray
    start: np.ndarray
    end: np.ndarray
    TF: float
    prod: np.ndarray
    lastf: np.ndarray
    ready: np.ndarray
    firstb: np.ndarray
    lastb: np.ndarray
    static: np.ndarray
    live: list[int]
    rec: list[int]


TIME_SCALE_MAX = 1e4
"""The bound models state times in the power of ten of seconds, at least TIME_UNIT_S,
that keeps their largest time at most this many units (:func:`time_unit`)."""


def time_unit(ideal_s: float, copies_s: float) -> float:
    """The time unit (s) of the bound models: the smallest power of ten, at least
    TIME_UNIT_S (1 us), in which both the ideal step `ideal_s` (the op start and end
    times) and `copies_s`, the shortest time of every saved tensor's copy one after the
    other (the D2H queue's end when all are swapped: the largest queue time and big-M
    of the timing MILP), are at most TIME_SCALE_MAX units.

    Why: one 137 MB tensor on a 50 MB/s link makes a 2.7e6 us copy;
    in microseconds its FIFO big-M rows held coefficients of 2.7e6 beside 1 and memory
    rows down to 5e-4, and GLOP called the LP infeasible (and SCIP's LP returned 3.9 times
    the optimum); in milliseconds GLOP solves it. Most instances keep 1 us or 10 us.
    Units change no bound: every time of the models is divided by the same unit and the
    bound multiplied back."""
    e = round(np.log10(TIME_UNIT_S))
    big = max(ideal_s, copies_s, 0.0)
    while np.isfinite(big) and big / 10.0 ** e > TIME_SCALE_MAX:
        e += 1
    return 10.0 ** e


def bound_arrays(inst: Instance, M: int) -> BoundArrays | None:
    """:class:`BoundArrays` of `inst` under budget `M` (bytes); None when `inst` has
    views (per-view sizes would count a storage twice), no saved tensor, or lacks a
    forward or a backward pass (no bound model applies)."""
    n, nf = inst.n_ops, inst.n_fwd
    if inst.aliased or inst.n_saved == 0 or n == 0 or not (0 < nf < n):
        return None
    mu = max(1, int(inst.P)) / MEM_UNITS_PER_P
    s = np.asarray(inst.s, dtype=np.int64)
    c = np.asarray(inst.c, dtype=np.float64)
    w_d2h, w_h2d = float(inst.link.d2h_bytes_per_s), float(inst.link.h2d_bytes_per_s)
    lat = float(inst.link.copy_latency_s)
    live = [t for t in range(inst.n_saved) if s[t] > 0]
    # (the slower direction's queue: the longest; the same as either on a symmetric link)
    tu = time_unit(float(inst.ideal_time_s),
                   float(np.sum(copy_time(s[live], min(w_d2h, w_h2d), lat))))
    end = np.asarray(inst.end_s, dtype=np.float64) / tu
    return BoundArrays(
        tu=tu, mu=mu, Mu=M / mu, s=s, sm=s / mu, c=c, w_d2h=copy_time(s, w_d2h, lat) / tu,
        w_h2d=copy_time(s, w_h2d, lat) / tu,
        r=np.asarray(inst.r, dtype=np.float64) / tu,
        start=np.asarray(inst.start_s, dtype=np.float64) / tu, end=end,
        TF=float(end[inst.n_fwd - 1]),
        prod=np.asarray(inst.saved_prod_idx, dtype=np.int64),
        lastf=np.asarray(inst.saved_last_fwd_idx, dtype=np.int64),
        ready=np.asarray(inst.saved_ready_idx, dtype=np.int64),
        firstb=np.asarray(inst.saved_first_bwd_idx, dtype=np.int64),
        lastb=np.asarray(inst.saved_last_bwd_idx, dtype=np.int64),
        static=np.asarray(inst.static_profile, dtype=np.int64) / mu,
        live=live, rec=[t for t in live if np.isfinite(c[t])])


def _rebuilt_before(inst: Instance, lin: _Lin, xr: dict[int, int], c_units: np.ndarray
                    ) -> dict[int, list[tuple[int, float]]]:
    """Per backward op j, the terms of an upper bound on the rebuild time spent before op
    j starts: ``R_j = sum c_t xr_t`` over the rebuildable tensors that a backward op up to
    j reads and, recursively, their rebuildable recipe inputs (through rebuildable
    tensors of zero bytes too, which have no ``xr``: the rebuild of one runs the rebuilds
    of its recomp inputs; their own time is in ``Sb``).

    The runtime puts each rebuild right before the first backward op that reads the
    tensor, after the rebuilds of its recomp recipe inputs (slackopt/simulate/_tasks.py,
    ``build_tasks``; ../shared/spec/semantics.md, "recomp"), so a tensor rebuilt before op
    j is in that closure; the closure holds more tensors than the plan rebuilds, whose
    terms only add to R_j. One prefix variable per op where the closure grows.

    Returns:
        {j: [(R_j variable, 1.0)]} for the backward ops with a nonempty closure.
    """
    nf, n = inst.n_fwd, inst.n_ops
    firstb = np.asarray(inst.saved_first_bwd_idx, dtype=np.int64)
    rins = inst.recipe_inputs
    # every rebuildable tensor, with bytes or not: a zero-byte recomp tensor has no xr
    # (its rebuild time is in Sb, module docstring) but its rebuild runs the rebuilds of
    # its recomp recipe inputs first, so the closure goes through it
    rebuildable = np.isfinite(np.asarray(inst.c, dtype=np.float64))
    by_first: dict[int, list[int]] = {}
    for t in np.flatnonzero(rebuildable).tolist():
        by_first.setdefault(int(firstb[t]), []).append(t)
    seen: set[int] = set()
    out: dict[int, list[tuple[int, float]]] = {}
    prev = None
    for j in range(nf, n):
        new: list[int] = []
        stack = list(by_first.get(j, []))
        while stack:
            t = stack.pop()
            if t in seen or not rebuildable[t]:
                continue
            seen.add(t)
            if t in xr:
                new.append(t)
            stack.extend(int(u) for u in rins[t])
        if new:
            cur = lin.var(0, _INF, name=f"R{j}")
            lin.row([(cur, 1.0)] + ([(prev, -1.0)] if prev is not None else [])
                    + [(xr[t], -float(c_units[t])) for t in new], 0.0, 0.0,
                    name=f"rebuilt_before[{j}]")
            prev = cur
        if prev is not None:
            out[j] = [(prev, 1.0)]
    return out


def checkpoint_bound(inst: Instance, M: int, time_limit_s: float = 30.0, *,
                     max_checkpoints: int = MAX_CHECKPOINTS,
                     deadline: float | None = None) -> float | None:
    """A certified lower bound (s) on the step time of every plan that runs under budget
    `M` (bytes), from the LP in the module docstring: T* plus a safe dual bound from the
    duals of GLOP (or HiGHS) (:func:`~slackopt.solvers.milp.certify.lp.lp_relaxation`,
    Neumaier and Shcherbina 2004), never the solver's objective; None when the deadline
    ends building or solving it or no certificate is found (see
    :func:`_checkpoint_bound`)."""
    try:
        return _checkpoint_bound(inst, M, time_limit_s, max_checkpoints, deadline)
    except ModelTimeout:
        return None


@dataclass(frozen=True)
class CheckpointLP:
    """The checkpoint LP as a bound source (phase "checkpoint_bound"): certified bound
    ``checkpoint_lp`` (:func:`checkpoint_bound`) within `share` of the time left less
    0.3 s (at least 0.05 s), and ``info["checkpoint_bound"]`` (its bound and seconds).
    It does not depend on a plan."""

    share: float
    name: str = "checkpoint_bound"
    stages: bool = False  # its rows read one forward, then one backward pass
    single_pass: bool = True

    def __call__(self, inst: Instance, M: int, ctx: BoundContext) -> BoundValue:
        tc = time.perf_counter()
        share = max(0.05, self.share * (ctx.left() - 0.3))
        cb = checkpoint_bound(inst, M, share, deadline=min(ctx.deadline - 0.3, tc + share))
        return BoundValue(bounds={"checkpoint_lp": cb}, info={"checkpoint_bound": {
            "bound_s": cb, "seconds": round(time.perf_counter() - tc, 4)}})


def _checkpoint_bound(inst: Instance, M: int, time_limit_s: float, max_checkpoints: int,
                      deadline: float | None) -> float | None:
    """A lower bound (s) on the step time of every plan that runs under budget `M`
    (bytes), from the LP in the module docstring (GLOP).

    Args:
        inst: the instance.
        M: budget (bytes).
        time_limit_s: the LP's time limit (s).
        max_checkpoints: forward ops whose memory row gets D2H timing.
        deadline: perf_counter time after which building or solving stops (then None).

    Returns:
        ``T* +`` the certified bound on the LP optimum (s), never below T*; or None when
        the LP is not solved to optimality in time, is infeasible, its duals certify no
        bound, or the instance has views.
    """
    T_star = float(inst.ideal_time_s)
    if deadline is not None and time.perf_counter() >= deadline:
        return None
    lin = build_checkpoint_model(inst, M, max_checkpoints=max_checkpoints, deadline=deadline)
    if lin is None:
        return None
    tu = bound_arrays(inst, M).tu       # the model's time unit (time_unit)
    if deadline is not None:
        time_limit_s = min(time_limit_s, deadline - time.perf_counter())
        if time_limit_s <= 0:
            return None
    # val: certified from the LP solver's duals (lp_relaxation), not its objective
    val, _ = lp_relaxation(lin, time_limit_s, deadline=deadline)
    if val is None:
        return None
    return max(T_star, seconds_below(T_star, val, tu))


def build_checkpoint_model(inst: Instance, M: int, *, max_checkpoints: int = MAX_CHECKPOINTS,
                           deadline: float | None = None) -> _Lin | None:
    """The LP of the module docstring (its rows named by family, ``"fwd_mem[k]"``), in
    the units of :class:`BoundArrays`; its objective is the extra time over T*.

    Args:
        inst: the instance (no views).
        M: budget (bytes).
        max_checkpoints: forward (and backward) ops whose memory row gets D2H timing.
        deadline: perf_counter time after which building stops with ModelTimeout.

    Returns:
        The model, or None when the instance has views, no saved tensor, or lacks a
        forward or a backward pass.
    """
    a = bound_arrays(inst, M)
    if a is None:
        return None
    cb = _CheckpointBuilder(inst, a, deadline)
    cb.forward_memory()
    cb.forward_checkpoints(max_checkpoints)
    cb.backward_checkpoints(max_checkpoints)
    cb.h2d_windows()
    cb.backward_memory()
    return cb.lin


class _CheckpointBuilder:
    """The checkpoint LP being built (:func:`build_checkpoint_model`): the data of
    :class:`BoundArrays`, the decisions xs and xr, the stalls Sf and Sb, the rebuild time
    before each backward op and the H2D indicators h. Each method adds one family of
    rows, in the order the function calls them (which fixes the LP's row order)."""

    def __init__(self, inst: Instance, a: BoundArrays, deadline: float | None) -> None:
        self.inst, self.a = inst, a
        self.n, self.nf, self.nS = inst.n_ops, inst.n_fwd, inst.n_saved
        self.ready = np.maximum(a.lastf, a.ready)
        self.lin = lin = _Lin(deadline)
        self.xs = {t: lin.var(0, 1, name=f"xs{t}") for t in a.live}
        self.xr = xr = {t: lin.var(0, 1, name=f"xr{t}") for t in a.rec}
        for t in a.rec:
            lin.row([(self.xs[t], 1.0), (xr[t], 1.0)], hi=1.0, name=f"one_decision[{t}]")
        self.Sf = lin.var(0, _INF, obj=1.0, name="Sf")
        self.Sb = lin.var(0, _INF, obj=1.0, name="Sb")
        for t in a.rec:
            lin.obj[xr[t]] = float(a.c[t] / a.tu)
        self.Rb = _rebuilt_before(inst, lin, xr, a.c / a.tu)
        self.h: dict[int, int] = {}

    def gone(self, t: int) -> list[tuple[int, float]]:
        """Terms of 'recomp' for t (none when not rebuildable)."""
        return [(self.xr[t], -self.a.sm[t])] if t in self.xr else []

    def forward_memory(self) -> None:
        """Forward memory, a swap freed at once."""
        a, lin, xs = self.a, self.lin, self.xs
        for k in range(self.nf):
            const = float(a.static[k])
            terms: list[tuple[int, float]] = []
            for t in a.live:
                if a.prod[t] > k:
                    continue
                const += a.sm[t]
                if a.lastf[t] < k:
                    terms += [(xs[t], -a.sm[t])] + self.gone(t)
            if terms or const > a.Mu:
                lin.row(terms, hi=a.Mu - const, name=f"fwd_mem[{k}]")

    def d2h_rows(self, k: int, z: dict[int, int], end: float,
                 slack: list[tuple[int, float]]) -> None:
        """D2H timing for the copies freed by checkpoint k (``z``): those ready at or
        after theta fit between theta and ``end`` plus the ``slack`` terms."""
        lin, r, wd = self.lin, self.a.r, self.a.w_d2h   # wd: shortest D2H copy times
        elig = list(z)
        order = sorted(elig, key=lambda t: -r[t])
        thetas = sorted({float(r[t]) for t in elig}, reverse=True)
        if len(thetas) > MAX_THRESHOLDS:
            idx = np.linspace(0, len(thetas) - 1, MAX_THRESHOLDS).round().astype(int)
            thetas = [thetas[i] for i in sorted(set(idx.tolist()))]
        q = None
        i = 0
        for n_th, th in enumerate(thetas):
            grp = []
            while i < len(order) and r[order[i]] >= th:
                grp.append(order[i])
                i += 1
            if grp or q is None:
                qn = lin.var(0, _INF, name=f"d2h_sum{k}_{n_th}")
                lin.row([(qn, 1.0)] + ([(q, -1.0)] if q is not None else [])
                        + [(z[t], -wd[t]) for t in grp], 0.0, 0.0,
                        name=f"d2h_sum[{k},{n_th}]")
                q = qn
            lin.row([(q, 1.0)] + [(v, -c) for v, c in slack], hi=end - th,
                    name=f"d2h_window[{k},{n_th}]")

    def forward_checkpoints(self, max_checkpoints: int) -> None:
        """Forward checkpoints, the forward ops with the largest keep-all excess over M:
        memory with a swap absent only once its D2H has ended (z), the D2H windows, and
        h (an H2D is needed) for each absent swap."""
        a, lin, xs, nf = self.a, self.lin, self.xs, self.nf
        keep = np.asarray(self.inst.keep_all_profile, dtype=np.float64)[:nf] / a.mu
        over = [k for k in np.argsort(-keep, kind="stable").tolist() if keep[k] > a.Mu]
        cps = sorted(over[:max_checkpoints])
        self.h = h = {t: lin.var(0, 1, name=f"h{t}") for t in a.live}
        for k in cps:
            elig = [t for t in a.live if a.prod[t] <= k and self.ready[t] < k]
            if not elig:
                continue
            z = {}
            for t in elig:
                z[t] = lin.var(0, 1, name=f"z{t}_{k}")
                lin.row([(z[t], 1.0), (xs[t], -1.0)], hi=0.0, name=f"absent_swap[{t},{k}]")
                lin.row([(h[t], 1.0), (z[t], -1.0)], lo=0.0, name=f"h2d_needed[{t},{k}]")
            const = float(a.static[k])
            terms = []
            for t in a.live:
                if a.prod[t] > k:
                    continue
                const += a.sm[t]
                if a.lastf[t] < k:
                    terms += self.gone(t)
                    if t in z:
                        terms.append((z[t], -a.sm[t]))
            lin.row(terms, hi=a.Mu - const, name=f"ckpt_mem[{k}]")
            self.d2h_rows(k, z, float(a.end[k]), [(self.Sf, 1.0)])

    def backward_checkpoints(self, max_checkpoints: int) -> None:
        """Backward checkpoints, the backward ops with the largest keep-all excess over M:
        memory at the start of op j, a swap absent only once its D2H has ended."""
        a, lin, xs, xr, h, nf = self.a, self.lin, self.xs, self.xr, self.h, self.nf
        keep_b = np.asarray(self.inst.keep_all_profile, dtype=np.float64)[nf:] / a.mu
        over_b = [nf + j for j in np.argsort(-keep_b, kind="stable").tolist()
                  if keep_b[j] > a.Mu]
        readers = [set(self.inst.saved_reader_idx[t].tolist()) for t in range(self.nS)]
        for j in sorted(over_b[:max_checkpoints]):
            z = {}
            const = float(a.static[j])
            terms = []
            for t in a.live:
                if a.lastb[t] < j:
                    continue
                const += a.sm[t]
                terms += self.gone(t)
                if t in xr and a.firstb[t] <= j:
                    terms.append((xr[t], a.sm[t]))
                if j not in readers[t]:
                    z[t] = lin.var(0, 1, name=f"z{t}_{j}")
                    lin.row([(z[t], 1.0), (xs[t], -1.0)], hi=0.0,
                            name=f"absent_swap[{t},{j}]")
                    if j < a.firstb[t]:
                        lin.row([(h[t], 1.0), (z[t], -1.0)], lo=0.0,
                                name=f"h2d_needed[{t},{j}]")
                    terms.append((z[t], -a.sm[t]))
            lin.row(terms, hi=a.Mu - const, name=f"bwd_ckpt_mem[{j}]")
            if z:
                self.d2h_rows(j, z, float(a.start[j]),
                              [(self.Sf, 1.0), (self.Sb, 1.0)] + self.Rb.get(j, []))

    def h2d_windows(self) -> None:
        """H2D after the forward pass: prefix sums of the copies by first backward reader,
        each before that reader starts (shortest H2D copy times)."""
        a, lin, h = self.a, self.lin, self.h
        by_first: dict[int, list[int]] = {}
        for t in a.live:
            by_first.setdefault(int(a.firstb[t]), []).append(t)
        p = None
        for j in sorted(by_first):
            pn = lin.var(0, _INF, name=f"h2d_sum{j}")
            lin.row([(pn, 1.0)] + ([(p, -1.0)] if p is not None else [])
                    + [(h[t], -a.w_h2d[t]) for t in by_first[j]], 0.0, 0.0,
                    name=f"h2d_sum[{j}]")
            p = pn
            lin.row([(p, 1.0), (self.Sb, -1.0)] + [(v, -c) for v, c in self.Rb.get(j, [])],
                    hi=float(a.start[j]) - a.TF, name=f"h2d_window[{j}]")

    def backward_memory(self) -> None:
        """Backward memory at every backward op: a swap counts unless it is read there."""
        a, lin, xs, xr = self.a, self.lin, self.xs, self.xr
        reads_by: dict[int, list[int]] = {}
        for t in a.live:
            for j in self.inst.saved_reader_idx[t].tolist():
                if j >= self.nf:
                    reads_by.setdefault(int(j), []).append(t)
        for j in range(self.nf, self.n):
            const = float(a.static[j])
            terms = []
            rd = set(reads_by.get(j, []))
            for t in a.live:
                if a.lastb[t] < j:
                    continue
                const += a.sm[t]
                terms.append((xs[t], -a.sm[t]))
                terms += self.gone(t)
                if t in xr and a.firstb[t] <= j:
                    terms.append((xr[t], a.sm[t]))
                if t in rd:
                    terms.append((xs[t], a.sm[t]))
            if terms or const > a.Mu:
                lin.row(terms, hi=a.Mu - const, name=f"bwd_mem[{j}]")


def checkpoint_point(inst: Instance, M: int, lin: _Lin, run: RunView) -> list[float]:
    """The point of the checkpoint LP `lin` (:func:`build_checkpoint_model` of `inst`, `M`)
    that the run `run` of a plan gives, as the module docstring's argument assigns it:
    ``xs, xr`` its decisions, ``Sf`` its forward stall, ``Sb`` its backward stall plus
    the rebuild time of its recomp tensors without bytes,
    ``z_tk = 1`` (forward checkpoint k) iff t is a swap whose device copy was freed by the
    real end of op k, ``z_tj = 1`` (backward checkpoint j) iff t is a swap holding no
    device memory (no device copy, no H2D buffer) at the real start of op j, ``h_t`` the
    largest z of t that has an ``h2d_needed`` row, and the running sums from their
    defining rows. Times in the model's unit (:class:`BoundArrays` ``tu``).

    Args:
        inst: the instance (no views; ``run.inst``).
        M: budget (bytes) the model was built for.
        lin: the model.
        run: the run (:func:`slackopt.solvers.milp.certify.runpoint.read_run`).

    Returns:
        One value per variable of `lin`; its objective is ``(T - T*) / tu`` of the
        run. The soundness test (tests/test_bound_point.py) checks that it
        satisfies every row, for every plan of small instances.
    """
    tu = bound_arrays(inst, M).tu
    nf = inst.n_fwd
    firstb = inst.saved_first_bwd_idx
    dec = run.dec
    # Sb: the backward stall plus the rebuilds of recomp tensors without bytes (no xr)
    zero = [t for t in range(inst.n_saved) if dec[t] == RECOMP and inst.s[t] == 0]
    sb = run.stall_bwd + math.fsum(float(inst.c[t]) for t in zero)
    vals: dict[str, float] = {"Sf": run.stall_fwd / tu, "Sb": sb / tu}
    h: dict[int, float] = {}
    for nm in lin.names:
        if nm.startswith("xs"):
            vals[nm] = decided(dec, int(nm[2:]), SWAP)
        elif nm.startswith("xr"):
            vals[nm] = decided(dec, int(nm[2:]), RECOMP)
        elif nm.startswith("z"):
            t, k = (int(v) for v in nm[1:].split("_"))
            if dec[t] != SWAP:
                z = 0.0
            elif k < nf:
                f = run.freed_in_forward(t)
                z = 1.0 if f is not None and f <= run.end[run.op_task[k]] else 0.0
            else:
                z = 0.0 if run.occupied(t, run.op_task[k]) else 1.0
            vals[nm] = z
            if k < nf or k < firstb[t]:
                h[t] = max(h.get(t, 0.0), z)
    for nm in lin.names:
        if nm.startswith("h") and nm[1:].isdigit():
            vals[nm] = h.get(int(nm[1:]), 0.0)
    return complete_point(lin, vals)
