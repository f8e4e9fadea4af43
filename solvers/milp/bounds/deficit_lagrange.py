"""The deficit bound with copy times: a Lagrangian bound on the step time of every plan
that prices each offload's fixed latency, which the deficit bound
(:func:`~slackopt.solvers.milp.bounds.deficit.deficit_bound`) leaves out.

The relaxation, per op k (indices are schedule positions; S*(k) the ideal start of op k;
r0 the earliest ready time of a saved tensor; W the D2H bandwidth; L the copy latency;
``w_t = L + s_t / W``, the shortest a D2H of t can last; D_k = keep-all(k) - M):

- At the real start of op k a plan holds keep-all(k) minus the saved tensors absent
  then, and at most M (the premise of the deficit bound; docs/model.md, "keep", "swap",
  "recomp", "Out of memory"). A recomp tensor is absent at k only while
  not yet rebuilt, so only if ``lastf_t < k < firstb_t`` (set A_k); a swap only once its
  device copy is freed, which needs its forward readers ended and its one D2H ended, and
  before its last backward reader: ``lastf_t < k < lastb_t`` (set B_k; evictions
  included). So ``sum_{recomp absent} s_t + sum_{swap absent} s_t >= D_k``.
- The D2H engine runs one copy at a time; a copy moves no bytes during its latency and
  at most W bytes per second after it (the duplex factor only slows it down), and it
  starts after the real end of its tensor's ready op, no earlier than r0. The swaps
  absent at k all ended their D2H by the real start of k:
  ``sum_{swap absent} w_t <= S*(k) - r0 + sigma_k + R_k``, with sigma_k the stalls and
  R_k the rebuild time before op k (R_k = 0 in the forward pass: rebuilds run in the
  backward pass only).
- ``T - T* = sigma + R``: the stalls plus the rebuilds, each recomp tensor rebuilt exactly
  once, c_t on the compute stream (solvers/milp/enumerate.py, module docstring); so
  ``sigma_k <= sigma`` and ``R_k <= R = sum_{recomp} c_t``.

Weak duality: for multipliers ``mu >= 0`` (memory) and ``0 <= lam <= 1`` (D2H time), add
``mu (D_k - absent bytes) <= 0`` and ``lam (sum w_t - S*(k) + r0 - sigma_k - R_k) <= 0``
to ``T - T* >= sigma_k + R``. In the backward pass ``- lam R_k >= - lam R``; the stall
term ``(1 - lam) sigma_k`` is at least 0; each tensor then contributes, for its decision,
0 (keep, or a recomp or swap not absent at k), ``c'_t - mu s_t`` (a recomp absent at k,
``c'_t = c_t`` in the forward pass, ``(1 - lam) c_t`` in the backward pass; a recomp not
absent contributes ``c'_t >= 0``) or ``lam w_t - mu s_t`` (a swap absent at k). So every
plan that runs has ``T - T* >= g_k(mu, lam) = mu D_k - lam (S*(k) - r0) + sum_t
min(0, [t in A_k] (c'_t - mu s_t), [t in B_k] (lam w_t - mu s_t))``, for every op k and
every such (mu, lam).

The search for good multipliers (:func:`_best_mu` for mu given lam; lam on a grid at every
op, then a golden-section search at the best ops, :func:`_coarse`, :func:`_refine`) is
heuristic and only picks (k, mu, lam); the bound is g at that point, evaluated again with
``math.fsum`` and lowered by a margin that covers the rounding of its terms
(:func:`_certified_value`).

A pipeline stage (docs/model.md, "A pipeline stage"): bubbles absorb delay, so
``T - T* >= x_k + R_{>k} - slack_k`` replaces ``T - T* = sigma + R``
(:mod:`~slackopt.solvers.milp.bounds.slack`: x_k the delay of op k, R_{>k} the rebuild
time after it, slack_k the ideal idle after it), and the D2H row reads
``sum w_t <= S*(k) - r0 + x_k``. A recomp tensor absent at k is rebuilt after it (in
R_{>k}). The same weak duality, with ``(1 - lam) x_k >= 0``, gives g_k with the
forward-pass terms at every op (``c'_t = c_t``) less slack_k.

It never needs to lose to the deficit bound: with y that bound's price of a byte at op k
(its LP dual, at most 1 / W), g_k at ``mu = y, lam = y W`` is that bound's value at k,
latency or not (a swap term is then ``y W L >= 0``, so 0; a recomp term is the dual's
``-(y s_t - c_t)+`` in the forward pass and ``-(y (s_t + W c_t) - c_t)+`` in the backward
pass). With latency it is larger where offloads are many and small (T5-large on H100 at
0.1 P, about 600 offloads of 4 MB at 10 us each: 162.500 ms against 162.162 ms).
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np

from slackopt.instance import Instance
from slackopt.jit import njit
from slackopt.simulate.rules import copy_time
from slackopt.solvers.milp.bounds.slack import stage_slack

GRID = 16
"""lam values tried on every op with a keep-all excess: 0 and 2^-j for j < GRID - 1 (the
best lam is about mu W, often a few hundredths)."""
CHUNK = 8
"""Ops searched between two looks at the deadline (small enough for a process that runs
the kernels as Python, :mod:`slackopt.jit`)."""
REFINE_OPS = 16
"""Ops whose lam is refined by golden-section search (those with the largest grid value)."""
REFINE_STEPS = 40
"""Golden-section steps per refined op (the interval shrinks to 0.618^40 of [0, 1])."""


@njit(cache=True)
def _units(k, lam, bwd, s, c, w, lastf, firstb, lastb, u, b):
    """Fill `u` (s per byte: the cheapest way t can be absent at op k at multiplier lam) and
    `b` (its bytes) for the tensors that can be absent at k; returns how many."""
    m = 0
    for t in range(s.shape[0]):
        if s[t] <= 0 or lastf[t] >= k:
            continue
        best = np.inf
        if k < firstb[t] and np.isfinite(c[t]):
            best = c[t] * (1.0 - lam) if bwd else c[t]
        if k < lastb[t]:
            best = min(best, lam * w[t])
        if best < np.inf:
            u[m] = best / s[t]
            b[m] = s[t]
            m += 1
    return m


@njit(cache=True)
def _best_mu(k, lam, D, tau, bwd, s, c, w, lastf, firstb, lastb, u, b):
    """(max over mu >= 0 of g_k(mu, lam), that mu): g is concave and piecewise linear in
    mu with slope D minus the bytes of the items with unit cost below mu, so the maximum is
    at the unit cost where the cheapest items first cover D (the largest, when all of them
    do not)."""
    m = _units(k, lam, bwd, s, c, w, lastf, firstb, lastb, u, b)
    if m == 0:
        return -lam * tau, 0.0
    order = np.argsort(u[:m])
    mu = u[order[m - 1]]
    cum = 0.0
    for i in order:
        cum += b[i]
        if cum >= D:
            mu = u[i]
            break
    val = mu * D - lam * tau
    for i in range(m):
        if u[i] < mu:
            val -= b[i] * (mu - u[i])
    return val, mu


@njit(cache=True)
def _coarse(ops, D, tau, nf, s, c, w, lastf, firstb, lastb, grid):
    """Per op in `ops`, the largest value of g over the lam grid (``GRID``; float64)."""
    n = s.shape[0]
    u = np.empty(n)
    b = np.empty(n)
    out = np.empty(ops.shape[0])
    for i in range(ops.shape[0]):
        k = ops[i]
        best = -np.inf
        for j in range(grid):
            lam = 0.0 if j == grid - 1 else 0.5 ** j
            v, _ = _best_mu(k, lam, D[i], tau[i], k >= nf, s, c, w, lastf, firstb, lastb,
                            u, b)
            best = max(best, v)
        out[i] = best
    return out


@njit(cache=True)
def _refine(ops, D, tau, nf, s, c, w, lastf, firstb, lastb, steps, slack):
    """(value, op, mu, lam): the best of a golden-section search over lam in [0, 1] at each
    op in `ops` (g is concave in lam once maximised over mu), less the op's `slack` (the
    stage form; zeros for a single pass); value uncertified."""
    n = s.shape[0]
    u = np.empty(n)
    b = np.empty(n)
    g = (math.sqrt(5.0) - 1.0) / 2.0
    out = (-np.inf, -1, 0.0, 0.0)
    for i in range(ops.shape[0]):
        k = ops[i]
        bwd = k >= nf
        lo, hi = 0.0, 1.0
        for _ in range(steps):
            a = hi - g * (hi - lo)
            bb = lo + g * (hi - lo)
            va, _ = _best_mu(k, a, D[i], tau[i], bwd, s, c, w, lastf, firstb, lastb, u, b)
            vb, _ = _best_mu(k, bb, D[i], tau[i], bwd, s, c, w, lastf, firstb, lastb, u, b)
            if va < vb:
                lo = a
            else:
                hi = bb
        for lam in (lo, 0.5 * (lo + hi), hi, 0.0, 1.0):
            v, mu = _best_mu(k, lam, D[i], tau[i], bwd, s, c, w, lastf, firstb, lastb, u, b)
            v -= slack[i]
            if v > out[0]:
                out = (v, k, mu, lam)
    return out


def _certified_value(k: int, mu: float, lam: float, D: float, tau: float, bwd: bool,
                     s: np.ndarray, c: np.ndarray, w: np.ndarray, lastf: np.ndarray,
                     firstb: np.ndarray, lastb: np.ndarray) -> float:
    """g_k(mu, lam) (s; module docstring), at most its exact value: the items of
    :func:`_units` give the terms ``min(0, (u_t - mu) s_t)``, summed with ``math.fsum``
    (correctly rounded), and the sum is lowered by ``1e-12`` times the magnitudes of every
    operand (``(u_t + mu) s_t``, mu D, lam tau): each term is a few floating-point
    operations, so its rounding error is under 1e-15 of those magnitudes, cancellation
    included (w_t and tau carry one rounding each, counted the same way)."""
    u = np.empty(s.shape[0])
    b = np.empty(s.shape[0])
    m = _units(k, lam, bwd, s, c, w, lastf, firstb, lastb, u, b)
    u, b = u[:m], b[:m]
    terms = [mu * D, -lam * tau, *np.minimum(0.0, (u - mu) * b).tolist()]
    scale = abs(mu * D) + abs(lam * tau) + math.fsum(((u + mu) * b).tolist())
    return math.fsum(terms) - 1e-12 * scale


def lagrangian_deficit_bound(inst: Instance, M: int, *, deadline: float | None = None
                             ) -> tuple[float, dict]:
    """A certified lower bound (s) on the simulated step time of every plan of `inst` (a
    lowered instance: one saved unit per storage) under budget `M` (bytes): T* plus
    g_k(mu, lam) of the module docstring at the op and multipliers the search finds.

    Args:
        inst: the instance (:func:`slackopt.solve` lowers views before a solver sees it).
        M: budget (bytes).
        deadline: ``time.perf_counter()`` time after which no further chunk of ``CHUNK``
            ops is searched and no further op refined (the first of each always is); the
            bound is then the best over the ops searched, still valid.

    Returns:
        (bound in s, never below T*; info: ``op`` (schedule index), ``mu`` (s per byte),
        ``lam``, ``ops`` (ops with a keep-all excess), ``ops_searched``).

    Source: the deficit bound's premises (solvers/milp/enumerate.py, ``deficit_bound``)
    with the copy latency of docs/model.md ("Copy cost"), dualised as in
    Geoffrion, "Lagrangean relaxation for integer programming", Math. Programming Study 2
    (1974).
    """
    T_star = float(inst.ideal_time_s)
    info: dict = {"op": None, "mu": None, "lam": None, "ops": 0, "ops_searched": 0}
    n = int(inst.n_saved)
    keep = np.asarray(inst.keep_all_profile, dtype=np.int64)
    ops = np.flatnonzero(keep > M).astype(np.int64)
    info["ops"] = int(ops.size)
    if n == 0 or ops.size == 0:
        return T_star, info
    s = np.asarray(inst.s, dtype=np.float64)
    c = np.asarray(inst.c, dtype=np.float64)
    W = float(inst.link.d2h_bytes_per_s)
    w = copy_time(s, W, float(inst.link.copy_latency_s))
    r0 = float(np.min(inst.r))
    lastf = np.asarray(inst.saved_last_fwd_idx, dtype=np.int64)
    firstb = np.asarray(inst.saved_first_bwd_idx, dtype=np.int64)
    lastb = np.asarray(inst.saved_last_bwd_idx, dtype=np.int64)
    start = np.asarray(inst.start_s, dtype=np.float64)
    D = (keep[ops] - int(M)).astype(np.float64)
    tau = start[ops] - r0
    stage = not inst.single_pass
    # a stage: no rebuild term in the backward pass (nf = n_ops), less the idle after k
    nf = int(inst.n_ops if stage else inst.n_fwd)
    slack = stage_slack(inst).after[ops] if stage else np.zeros(ops.size)
    coarse = np.full(ops.size, -np.inf)
    for a in range(0, ops.size, CHUNK):
        if deadline is not None and time.perf_counter() > deadline and a:
            break       # the ops searched so far: any subset of ops gives a valid bound
        sl = slice(a, a + CHUNK)
        coarse[sl] = _coarse(ops[sl], D[sl], tau[sl], nf, s, c, w, lastf, firstb, lastb, GRID)
        if stage:
            coarse[sl] -= slack[sl]
        info["ops_searched"] = min(ops.size, a + CHUNK)
    top = np.sort(np.argsort(-coarse, kind="stable")[:REFINE_OPS])
    val, k, mu, lam = -np.inf, -1, 0.0, 0.0
    for j in range(top.size):  # one op per call: a look at the deadline between them
        if deadline is not None and time.perf_counter() > deadline and j:
            break
        sl = top[j:j + 1]
        out = _refine(ops[sl], D[sl], tau[sl], nf, s, c, w, lastf, firstb, lastb, REFINE_STEPS,
                      slack[sl])
        if out[0] > val:  # the first op of the largest value, as _refine takes it
            val, k, mu, lam = out
    if k < 0 or not val > 0.0:
        return T_star, info
    i = int(np.searchsorted(ops, k))
    # D[i] is an exact integer (bytes below 2^53), tau[i] the instance's own float
    g = _certified_value(int(k), float(mu), float(lam), float(D[i]), float(tau[i]),
                         int(k) >= nf, s, c, w, lastf, firstb, lastb) - float(slack[i])
    info.update(op=int(k), mu=float(mu), lam=float(lam))
    return max(T_star, T_star + g - sys.float_info.epsilon * T_star), info
