"""MILP: a time-indexed mixed-integer relaxation of the evaluator that proves lower bounds
and, with the evaluator in the loop, proves optimal plans.

Decisions and steps. Every saved tensor t gets binaries ``xs_t`` (swap) and ``xr_t``
(recomp), keep being ``1 - xs - xr`` (``xr = 0`` when c_t = inf), in the style of
Checkmate (Jain et al. 2020: binary keep/recompute decisions over operator stages) and
POET (Patil et al. 2022: paging, i.e. swap, with per-stage link capacity). The model is
indexed by *steps*: step K covers the scheduled ops ``a_K .. b_K`` and the wall-clock
interval ``[E(a_K - 1), E(b_K))`` of the evaluated iteration (E = end of an op in the
simulated run; the gap before an op, with its stalls and the rebuilds the runtime inserts
there, belongs to the op's step). ``tau_K`` is the step's duration; the objective is
``sum_K tau_K`` (microseconds inside the model, seconds outside; memory in P / 1e4 bytes).

Tiers (``tier``; "auto" picks by size):

- "full" (up to 10 saved tensors and 48 ops): one step per op and every runtime rule
  below that can be stated as a valid linear implication.
- "exact" (up to 128 saved tensors and 320 ops): one step per op; binaries only for the
  decisions (copy shares, rebuild positions and evictions continuous, runtime rules
  R1-R6 off). The LP relaxation is solved first (GLOP; up to 150k nonzeros), then
  the MILP.
- "aggregated" (the paper workloads): one step per (phase, layer) run of ops, as "exact"
  otherwise. GPT-2 XL: 100 steps, 75k variables; its bound is the LP relaxation's, within
  the 300 s default limit.

Model (the names are the variables):

- Copies: cumulative shares through the end of step K of the D2H copy of a swap that does
  not lag (``F``) or lags (``L``: still running at the tensor's first backward read, so
  the device copy is used and its H2D cancelled; ``lag_t`` binary), of H2D copies
  (``H``, re-fetches included) and evictions (``E``, counts). A share is the overlap of
  the copy's busy interval with the step divided by the copy's duration. Each engine is
  busy at most ``tau_K``: ``sum_t w_t * share <= tau_K`` with ``w_t = latency + s_t / W``
  (a copy lasts at least that long; the 10 us latency is included). A D2H starts when
  its producer ends (it overlaps only the rest of that step); an H2D starts after the
  forward pass and after the tensor's D2H ended or an eviction; a backward reader needs
  every earlier eviction re-fetched and the H2D ended before it starts; evictions need a
  finished D2H (``E <= (reads - 1) * (F + L)``).
- Rebuilds: ``y_ug`` places the rebuild of recomp tensor u in the gap before op g, exactly
  where the evaluator does: ``gap(u) = min(first backward reader of u, gap(v) for recomp v
  whose recipe reads u)``; ``tau_K >= op time + sum c_u y_ug``; a swapped recipe input
  is fetched before the rebuild starts.
- Memory, checked at the end of every op (all its allocations live) and, in the full tier,
  at its start: non-saved tensors and workspaces (``static_profile``), kept tensors until
  their last backward reader, recomp tensors until their last forward reader and from
  their rebuild on, swapped tensors from production until their D2H has ended and their
  forward readers are done, then from the start of an H2D until an eviction or release;
  and at every possible rebuild start: the bytes alive across the gap, the rebuilt tensor,
  its transient bytes and workspace, and its recipe inputs. All ``<= M``.
- Full tier only: integral copy events (``Dn``: the D2H has ended by the end of K;
  ``Sg``: H2D copies started; ``g``: the D2H ended in the gap before the op, the compute
  stream waiting for it, so its whole share of that step lies in the gap) so that a
  tensor is freed when its D2H *ends* and an H2D buffer is allocated in full when it
  *starts*; integer evictions; binary lag and rebuild positions; and the runtime rules
  R1 the D2H queue is FIFO in production order (chain ``P``); R2 the D2H engine is
  work-conserving (a queued D2H keeps it busy: ``B``); R3 a D2H lags only if the engine
  stays busy with earlier copies until the tensor's first read; R4 H2D copies start in
  first-need order (chain ``Q``; the first need is bounded below by the plan's rebuild
  positions) and a lagging tensor blocks the H2D queue until its first read; R5 the H2D
  admission rule (a copy the compute stream does not wait for starts only when used + its
  size + the next three tasks' allocations fit in M: ``R`` bounds used from below, and
  rebuilds placed in the window may displace an op's allocation by at most the largest op
  allocation minus their own; ``phi``: the first H2D has started); R6 the H2D reads for a
  rebuild end before it starts.

Why the optimum is a lower bound on the simulated step time of every plan: take any plan
the evaluator runs to the end and its trace. Set the decisions, rebuild positions and lag
indicators to what the trace shows (a swap lags if its D2H had not ended at its first
backward read), ``tau_K`` to the trace's step intervals (they sum to T), each share to the
overlap of the copy's busy interval with the step divided by the copy's duration (for an
H2D, fetches that were evicted before the tensor's first read are left out), ``E`` to the
evictions after the first read (at most one between two reads), and the event indicators
to the trace's events. Every constraint holds (each is an implication of the evaluator's
rules for that trace), so the model's optimum is <= T; the same holds with the decisions
fixed, which the no-good loop below relies on. The places where the model is *looser*
than ../shared/spec/semantics.md (each admits more, never less, so the bound stays valid):

1. Copies are preemptive and fractional within and across steps; in the exact and
   aggregated tiers memory follows the shares (a tensor partly freed while its D2H runs,
   an H2D buffer partly allocated), and a swap may lag without the engine being busy.
2. The duplex slowdown (0.85 W while the other direction copies) is dropped: copies are
   credited the full W (except in R2/R3, where a copy in the backward pass may take up to
   ``latency + s / (0.85 W)``).
3. R1-R6 (full tier) are the only ordering and admission rules; the exact and aggregated
   tiers keep none of them. R4 orders only first H2D copies and only when the order is
   certain; R5 is checked for first H2D copies against a lower bound on "used" (the bytes
   alive throughout the step) and is waived in the gap before any task that reads the
   tensor (the compute stream may be waiting for it there).
4. Memory is checked at op ends and op starts and rebuild starts only, not at every
   instant; a swapped tensor alive across a rebuild gap, other rebuilds of the same gap,
   and a kept (or rebuilt) tensor whose life a later rebuild extends past its last
   backward op reader are not counted. In aggregated steps the counts use step
   boundaries (a D2H through the end of the step, an H2D through the end of the
   previous step), which only undercounts.
5. Evictions may happen at any step between the first and the last backward read of a
   tensor (the evaluator evicts only when the compute stream is blocked).
6. Exact and aggregated tiers: rebuild positions and evictions are continuous.

Upper bound and optimality: candidate plans are SlackSwap's plan and CP-SAT's best
recompute-only plan (warm start), the LP rounding (exact/aggregated tiers), every MILP
solution (SCIP's solution pool too) and a 1-flip local search around each new incumbent;
all are simulated, and the fastest feasible one is the upper bound U and the returned
plan. A cutoff row keeps the MILP to plans whose model value beats U; after each solve a
*no-good cut* excludes every simulated decision vector, so ``min(U, bound of the cut
model)`` stays a lower bound on every plan. The loop stops when
``(U - L) / L <= rel_gap`` (the plan is proven optimal), when the cut model is infeasible
(then U is proven optimal), or at the time or iteration limit. Status "optimal": the
model was solved to proven optimality (its optimum is ``lower_bound_s``) or the plan is
proven optimal; ``info["plan_proven_optimal"]`` and ``info["gap"]`` say how far the plan
is from the bound. Status "feasible": the time limit stopped the MILP first (the bound is
its best bound, or the LP bound). On the enumerated test instances the relaxation can
rank a plan ahead of the evaluator's optimum (mostly through item 3: a prefetch the
admission rule delays, or item 1); the loop then closes the gap or reports it (the test
suite shows the cases).

Infeasible budgets: the model's floor (the smallest M at which it is feasible) has a
closed form: every tensor swapped, each copy as slow as needed, so a swapped tensor is
resident from production to its last forward reader and at its backward readers only:
``floor = max_k (static_k + sum_{prod_t <= k <= lastfwd_t} s_t + sum_{t read by backward
op k} s_t)``. No plan runs in the evaluator below it. The all-swap plan is simulated at
the floor; if it runs, the floor is the exact minimum budget (``min_budget_exact``),
otherwise the smallest budget at which it runs is found by bisection.

Backends: "scip" (OR-Tools pywraplp + SCIP, default; its dual bound is the bound),
"highs" (OR-Tools MathOpt + HiGHS: MathOpt reports HiGHS's true dual bound, which
pywraplp does not, and pywraplp's HiGHS hints crash), "pulp" (PuLP + its bundled CBC, an
independent cross-check; the bound is CBC's, read from its log). CP-SAT computes the exact
best recompute-only plan (keep or recomp, no copies: an all-integer problem in bytes and
nanoseconds, where CP-SAT is exact) as the first incumbent. It is not a backend for the
time-indexed model: that model's shares and step times are continuous, and CP-SAT solves
a mixed model only after scaling continuous variables to integers, which restricts the
model so its optimum is no longer a certified lower bound. Nor can a CP-SAT interval
schedule with the decisions fixed tighten the upper bound: the upper bound is the
evaluator's time for the decisions, and its runtime fixes the schedule.

Determinism: for a given seed and thread count the backends are deterministic when they
stop on the gap; a time limit makes the result depend on machine speed.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import time
import warnings
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from slackopt.bisection import smallest_true
from slackopt.instance import Instance
from slackopt.plan import KEEP, RECOMP, SWAP, Plan
from slackopt.simulate import simulate
from slackopt.solver import SolveResult, bool_param, int_param, real_param

BACKENDS = ("scip", "highs", "pulp")
TIERS = ("auto", "full", "exact", "aggregated")
TIME_UNIT_S = 1e-6
"""Model time unit (s): step durations are in microseconds."""
MEM_UNITS_PER_P = 1e4
"""Model memory unit: P / 1e4 bytes."""
_INF = float("inf")
_PULP_FREE = 1e30
"""Right-hand side that CBC and HiGHS read as no bound (PuLP rows need a number)."""


# =========================================================================== neutral model
class _Lin:
    """A backend-neutral MILP: variables with bounds, integrality, objective; sparse rows
    ``lo <= sum coef * var <= hi``."""

    def __init__(self) -> None:
        self.lb: list[float] = []
        self.ub: list[float] = []
        self.is_int: list[bool] = []
        self.obj: list[float] = []
        self.names: list[str] = []
        self.rows: list[tuple[list[int], list[float], float, float]] = []

    @property
    def n_vars(self) -> int:
        return len(self.lb)

    def var(self, lb: float = 0.0, ub: float = _INF, integer: bool = False,
            obj: float = 0.0, name: str = "") -> int:
        self.names.append(name)
        self.lb.append(float(lb))
        self.ub.append(float(ub))
        self.is_int.append(bool(integer))
        self.obj.append(float(obj))
        return len(self.lb) - 1

    def row(self, terms: Sequence[tuple[int, float]], lo: float = -_INF,
            hi: float = _INF) -> int:
        acc: dict[int, float] = {}
        for j, c in terms:
            if j is None or c == 0.0:
                continue
            acc[j] = acc.get(j, 0.0) + float(c)
        idx = [j for j, c in acc.items() if c != 0.0]
        cf = [acc[j] for j in idx]
        if not idx:
            if lo > 1e-9 or hi < -1e-9:
                # An empty infeasible row: keep it (0 >= lo) so the backend reports it.
                self.rows.append(([], [], float(lo), float(hi)))
            return len(self.rows) - 1
        self.rows.append((idx, cf, float(lo), float(hi)))
        return len(self.rows) - 1

    def copy(self) -> _Lin:
        """An independent copy (rows may be added to either without touching the other)."""
        other = _Lin()
        other.lb, other.ub, other.is_int = list(self.lb), list(self.ub), list(self.is_int)
        other.obj, other.names, other.rows = list(self.obj), list(self.names), list(self.rows)
        return other

    def stats(self) -> dict[str, int]:
        return {"variables": self.n_vars, "binaries": int(sum(self.is_int)),
                "rows": len(self.rows), "nonzeros": int(sum(len(r[0]) for r in self.rows))}


# =========================================================================== the model
@dataclass
class _Model:
    lin: _Lin
    xs: list[int | None]
    xr: list[int | None]
    floor_bytes: int
    groups: list[tuple[int, int]]
    tier: str
    t_unit: float = TIME_UNIT_S
    info: dict[str, Any] = field(default_factory=dict)

    def decode(self, x: Sequence[float]) -> np.ndarray:
        dec = np.full(len(self.xs), KEEP, dtype=np.int8)
        for t, (a, b) in enumerate(zip(self.xs, self.xr, strict=True)):
            if a is not None and x[a] > 0.5:
                dec[t] = SWAP
            elif b is not None and x[b] > 0.5:
                dec[t] = RECOMP
        return dec

    def hint(self, dec: np.ndarray) -> dict[int, float]:
        h: dict[int, float] = {}
        for t, d in enumerate(dec.tolist()):
            if self.xs[t] is not None:
                h[self.xs[t]] = 1.0 if d == SWAP else 0.0
            if self.xr[t] is not None:
                h[self.xr[t]] = 1.0 if d == RECOMP else 0.0
        return h

    def nogood(self, dec: np.ndarray) -> tuple[list[tuple[int, float]], float]:
        """Row terms and lower bound excluding decision vector `dec` (>= 1 tensor differs)."""
        terms: list[tuple[int, float]] = []
        const = 0.0
        for t, d in enumerate(dec.tolist()):
            a, b = self.xs[t], self.xr[t]
            if d == SWAP:       # 1 - xs
                const += 1.0
                terms.append((a, -1.0))
            elif d == RECOMP:   # 1 - xr
                const += 1.0
                terms.append((b, -1.0))
            else:               # xs + xr
                if a is not None:
                    terms.append((a, 1.0))
                if b is not None:
                    terms.append((b, 1.0))
        return terms, 1.0 - const


def _groups(inst: Instance, steps: str | int) -> list[tuple[int, int]]:
    """Steps as (first op, last op) runs; never across the forward/backward boundary."""
    n, nf = inst.n_ops, inst.n_fwd
    if n == 0:
        return []
    if steps == "op":
        return [(k, k) for k in range(n)]
    ops = inst.scheduled_ops
    out: list[tuple[int, int]] = []
    if steps == "layer":
        a = 0
        for k in range(1, n + 1):
            if k == n or k == nf or ops[k].layer != ops[a].layer or ops[k].phase != ops[a].phase:
                out.append((a, k - 1))
                a = k
        return out
    size = int(steps)
    if size < 1:
        raise ValueError("steps must be 'op', 'layer' or an int >= 1")
    for lo, hi in ((0, nf), (nf, n)):
        for a in range(lo, hi, size):
            out.append((a, min(hi, a + size) - 1))
    return out


def model_floor(inst: Instance, ops: Sequence[int] | None = None) -> int:
    """The model's smallest feasible budget (bytes): every tensor swapped and each copy as
    slow as needed, so a swapped tensor is resident from production to its last forward
    reader and at its backward readers only. No plan runs in the evaluator below it."""
    n, nf = inst.n_ops, inst.n_fwd
    if n == 0:
        return 0
    delta = np.zeros(n + 1, dtype=np.int64)
    s = np.asarray(inst.s, dtype=np.int64)
    np.add.at(delta, inst.saved_prod_idx, s)
    np.add.at(delta, np.asarray(inst.saved_last_fwd_idx) + 1, -s)
    prof = np.asarray(inst.static_profile, dtype=np.int64) + np.cumsum(delta[:-1])
    for t in range(inst.n_saved):
        for r in inst.saved_reader_idx[t].tolist():
            if r >= nf:
                prof[r] += s[t]
    if ops is not None:
        prof = prof[np.asarray(list(ops), dtype=np.int64)]
    return int(prof.max()) if prof.size else 0


def _rebuild_gaps(prod: Sequence[int], rec_ok: Sequence[bool], deps: Sequence[Sequence[int]],
                  firstb: Sequence[int]) -> list[list[int]]:
    """Candidate rebuild positions: ``G[u]`` = the ops g (sorted) such that saved tensor u
    may be rebuilt in the gap before g, the evaluator's rule: u's first backward reader,
    or any gap where a recomp tensor whose recipe reads u is rebuilt (dependents first).

    Args: ``prod[t]`` producer op index, ``rec_ok[t]`` rebuildable, ``deps[t]`` saved
    positions of the tensors whose recipes read t, ``firstb[t]`` first backward reader
    (op index), all over the saved positions."""
    n = len(prod)
    G: list[list[int]] = [[] for _ in range(n)]
    for u in sorted(range(n), key=lambda t: -prod[t]):   # dependents first
        if not rec_ok[u]:
            continue
        gs = {firstb[u]}
        for v in deps[u]:
            if rec_ok[v]:
                gs.update(G[v])
        G[u] = sorted(g for g in gs if g <= firstb[u])
    return G


def build_model(inst: Instance, M: int | None, *, tier: str = "full",
                steps: str | int | None = None, lagging: bool | None = None,
                binary_placement: bool | None = None,
                integral_copies: bool | None = None, fifo: bool | None = None,
                queue_order: bool | None = None, admission: bool | None = None,
                integer_evictions: bool | None = None) -> _Model:
    """Build the time-indexed relaxation of ``inst`` at budget ``M`` (bytes).

    Step K covers ops ``a_K .. b_K`` and the interval ``[E(a_K - 1), E(b_K))`` of the
    evaluated run (E = end of an op; the gap before an op, with its stalls and the
    rebuilds inserted before it, belongs to the op's step). Memory is checked at the end
    of every op (all its allocations live, H2D buffers started during it counted) and, in
    the exact tier, at its start (D2H copies that ended while it waited already freed).

    Args:
        inst: the instance.
        M: the budget (bytes); None builds the model without memory rows.
        tier: "full" (one step per op, every option below on), "exact" (one step per op,
            options off: binary decisions, fractional copies, continuous rebuild positions
            and evictions) or "aggregated" (as "exact", one step per (phase, layer) run).
        steps: override the steps: "op", "layer" or a number of ops per step.
        lagging: lag binaries (a D2H still running at the first backward read).
        binary_placement: binary rebuild placements.
        integral_copies: copy *events* are integral: a tensor is freed when its D2H ends,
            an H2D buffer is allocated in full when the copy starts.
        fifo: D2H copies run in production order.
        queue_order: H2D copies start in first-need order (tensors whose first need does
            not depend on the plan), and a lagging tensor blocks the H2D queue until its
            first read.
        admission: the H2D admission rule (used + size + next three tasks' allocations).
        integer_evictions: eviction counts are integers (a tensor is evicted whole).

    Returns:
        The model with its variable maps and the model floor (bytes).
    """
    if tier not in ("full", "exact", "aggregated"):
        raise ValueError(f"tier '{tier}' is not one of full, exact, aggregated")
    full = tier == "full"
    steps = steps if steps is not None else ("layer" if tier == "aggregated" else "op")
    lagging = full if lagging is None else bool(lagging)
    binary_placement = full if binary_placement is None else bool(binary_placement)
    integral_copies = full if integral_copies is None else bool(integral_copies)
    fifo = full if fifo is None else bool(fifo)
    queue_order = full if queue_order is None else bool(queue_order)
    admission = full if admission is None else bool(admission)
    integer_evictions = full if integer_evictions is None else bool(integer_evictions)
    groups = _groups(inst, steps)
    n, nf, nS = inst.n_ops, inst.n_fwd, inst.n_saved
    lin = _Lin()
    P = max(1, int(inst.P))
    mu = P / MEM_UNITS_PER_P                     # bytes per model memory unit
    tu = TIME_UNIT_S
    s = np.asarray(inst.s, dtype=np.int64)
    sm = s / mu
    c = np.asarray(inst.c, dtype=np.float64)
    rec_ok = np.isfinite(c)
    cu = np.where(rec_ok, c / tu, 0.0)
    dur = np.asarray(inst.durations_s, dtype=np.float64) / tu
    W = float(inst.link.bytes_per_s)
    lat = float(inst.link.copy_latency_s)
    w = np.where(s > 0, (lat + s / W) / tu, 0.0)
    dmax = np.where(s > 0, (lat + s / (W * float(inst.link.duplex_factor))) / tu, 0.0)
    prod = np.asarray(inst.saved_prod_idx, dtype=np.int64).tolist()
    lastf = np.asarray(inst.saved_last_fwd_idx, dtype=np.int64).tolist()
    firstb = np.asarray(inst.saved_first_bwd_idx, dtype=np.int64).tolist()
    lastb = np.asarray(inst.saved_last_bwd_idx, dtype=np.int64).tolist()
    rdb = [sorted(int(r) for r in inst.saved_reader_idx[t].tolist() if r >= nf)
           for t in range(nS)]
    ins = [tuple(int(i) for i in x) for x in inst.recipe_inputs]
    deps: list[list[int]] = [[] for _ in range(nS)]
    for u in range(nS):
        for t in ins[u]:
            deps[t].append(u)
    static = np.asarray(inst.static_profile, dtype=np.int64)
    s_alloc = np.asarray(inst.static_alloc, dtype=np.int64)
    ws = np.asarray(inst.workspace, dtype=np.int64)
    extra = (np.asarray(inst.recipe_transient, dtype=np.int64)
             + np.asarray(inst.recipe_workspace, dtype=np.int64))
    nG = len(groups)
    Kof = [0] * n
    for K, (a, b) in enumerate(groups):
        for k in range(a, b + 1):
            Kof[k] = K
    single = [a == b for a, b in groups]
    has_bwd = 0 < nf < n
    KB0 = Kof[nf] if has_bwd else nG        # first backward step: starts at T_F

    # ---- rebuild candidates: G[u] = ops g such that u may be rebuilt in the gap before g
    G = _rebuild_gaps(prod, rec_ok, deps, firstb)
    gmin = []           # earliest possible backward read (reader op, or a rebuild reading t)
    for t in range(nS):
        g = firstb[t]
        for u in deps[t]:
            if rec_ok[u] and G[u]:
                g = min(g, G[u][0])
        gmin.append(g)
    n_reads = [len(rdb[t]) + sum(1 for u in deps[t] if rec_ok[u]) for t in range(nS)]
    multi = [n_reads[t] >= 2 or gmin[t] < firstb[t] for t in range(nS)]
    late_rebuild_read = [any(rec_ok[u] and G[u] and G[u][-1] > lastb[t] for u in deps[t])
                         for t in range(nS)]

    # ---- decisions
    xs: list[int | None] = []
    xr: list[int | None] = []
    lag: list[int | None] = []
    for t in range(nS):
        xs.append(lin.var(0, 1, True, name=f"xs{t}"))
        xr.append(lin.var(0, 1, True, name=f"xr{t}") if rec_ok[t] else None)
        if xr[t] is not None:
            lin.row([(xs[t], 1.0), (xr[t], 1.0)], hi=1.0)
        lag.append(lin.var(0, 1, True, name=f"lag{t}")
                   if (lagging and s[t] > 0 and has_bwd) else None)
        if lag[t] is not None:
            lin.row([(lag[t], 1.0), (xs[t], -1.0)], hi=0.0)

    # ---- rebuild placements y[u][g]
    y: list[dict[int, int]] = [{} for _ in range(nS)]
    for u in range(nS):
        if not rec_ok[u]:
            continue
        if len(G[u]) == 1:
            y[u][G[u][0]] = xr[u]
        else:
            for g in G[u]:
                y[u][g] = lin.var(0, 1, binary_placement, name=f"y{u}_{g}")
            lin.row([(y[u][g], 1.0) for g in G[u]] + [(xr[u], -1.0)], 0.0, 0.0)

    def Y(u: int, k: int) -> list[tuple[int, float]]:
        """Terms of 'u rebuilt in a gap before an op <= k'."""
        return [(y[u][g], 1.0) for g in G[u] if g <= k]

    for u in range(nS):
        if not rec_ok[u]:
            continue
        for v in deps[u]:
            if not rec_ok[v]:
                continue
            for g in G[v]:
                if g > firstb[u]:
                    continue
                # gap(u) <= gap(v) when both are recomp: Y_u(g) - Y_v(g) >= xr_u - 1
                lin.row(Y(u, g) + [(tv, -cf) for tv, cf in Y(v, g)] + [(xr[u], -1.0)],
                        lo=-1.0)
        for g in G[u]:
            if g == firstb[u]:
                continue
            # ... and no earlier than needed: a recomp dependent is rebuilt there
            sup = [(y[v][g], -1.0) for v in deps[u] if rec_ok[v] and g in y[v]]
            lin.row([(y[u][g], 1.0)] + sup, hi=0.0)

    # ---- copies (cumulative shares through the end of each step)
    def cum(D: dict[int, int], rng: tuple[int, int], K: int) -> int | None:
        lo, hi = rng
        if hi < lo or K < lo:
            return None
        return D[min(K, hi)]

    F: list[dict[int, int]] = [{} for _ in range(nS)]   # D2H share (not lagging)
    L: list[dict[int, int]] = [{} for _ in range(nS)]   # D2H share (lagging)
    H: list[dict[int, int]] = [{} for _ in range(nS)]   # H2D shares (re-fetches too)
    E: list[dict[int, int]] = [{} for _ in range(nS)]   # evictions (counts)
    Dn: list[dict[int, int]] = [{} for _ in range(nS)]  # D2H ended (binary) or = F
    Sg: list[dict[int, int]] = [{} for _ in range(nS)]  # H2D copies started or = H
    f_rng: list[tuple[int, int]] = [(0, -1)] * nS
    l_rng: list[tuple[int, int]] = [(0, -1)] * nS
    h_rng: list[tuple[int, int]] = [(0, -1)] * nS
    e_rng: list[tuple[int, int]] = [(0, -1)] * nS
    for t in range(nS):
        if s[t] <= 0 or not has_bwd:
            continue
        Kp = Kof[prod[t]]
        f_lo = Kp + 1 if prod[t] == groups[Kp][1] else Kp    # starts when the producer ends
        f_hi = Kof[firstb[t]]
        f_rng[t] = (f_lo, f_hi)
        for K in range(f_lo, f_hi + 1):
            F[t][K] = lin.var(0, 1, name=f"F{t}_{K}")
        h_hi = Kof[lastb[t]] if multi[t] else Kof[firstb[t]]
        h_rng[t] = (KB0, h_hi)
        for K in range(KB0, h_hi + 1):
            H[t][K] = lin.var(0, _INF, name=f"H{t}_{K}")
        if multi[t]:
            e_rng[t] = (Kof[gmin[t]], Kof[lastb[t]])
            for K in range(e_rng[t][0], e_rng[t][1] + 1):
                E[t][K] = lin.var(0, max(1, n_reads[t] - 1), integer_evictions,
                                  name=f"E{t}_{K}")
        if multi[t] or lag[t] is not None:
            l_rng[t] = (f_lo, max(f_hi, e_rng[t][1]))
            for K in range(l_rng[t][0], l_rng[t][1] + 1):
                L[t][K] = lin.var(0, 1, name=f"L{t}_{K}")
        if integral_copies:
            for K in range(f_lo, f_hi + 1):
                Dn[t][K] = lin.var(0, 1, True, name=f"D{t}_{K}")
                lin.row([(Dn[t][K], 1.0), (F[t][K], -1.0)], hi=0.0)
            lin.row([(Dn[t][f_hi], 1.0), (F[t][f_hi], -1.0)], 0.0, 0.0)
            for K in range(h_rng[t][0], h_rng[t][1] + 1):
                Sg[t][K] = lin.var(0, max(1, n_reads[t]), True, name=f"S{t}_{K}")
                lin.row([(H[t][K], 1.0), (Sg[t][K], -1.0)], hi=0.0)
        else:
            Dn[t], Sg[t] = F[t], H[t]
        mono = [(F[t], f_rng[t]), (L[t], l_rng[t]), (H[t], h_rng[t]), (E[t], e_rng[t])]
        if integral_copies:
            mono += [(Dn[t], f_rng[t]), (Sg[t], h_rng[t])]
        for D, (lo, hi) in mono:
            for K in range(lo + 1, hi + 1):
                lin.row([(D[K], 1.0), (D[K - 1], -1.0)], lo=0.0)
        l_tot = [(L[t][l_rng[t][1]], 1.0)] if L[t] else []
        if lag[t] is not None:
            lin.row([(F[t][f_hi], 1.0), (xs[t], -1.0), (lag[t], 1.0)], 0.0, 0.0)
            if l_tot:
                lin.row(l_tot + [(lag[t], -1.0)], hi=0.0)
        else:
            lin.row([(F[t][f_hi], 1.0), (xs[t], -1.0)] + l_tot, hi=0.0)
        for K in range(e_rng[t][0], e_rng[t][1] + 1):
            # an eviction needs a finished D2H: E <= (reads - 1) * (F + L)
            r = max(1, n_reads[t] - 1)
            lin.row([(E[t][K], 1.0), (cum(F[t], f_rng[t], K), -r),
                     (cum(L[t], l_rng[t], K), -r)], hi=0.0)

    def Hv(t: int, K: int) -> int | None:
        return cum(H[t], h_rng[t], K)

    def Ev(t: int, K: int) -> int | None:
        return cum(E[t], e_rng[t], K)

    def Dv(t: int, K: int) -> int | None:
        return cum(Dn[t], f_rng[t], K)

    def Sv(t: int, K: int) -> int | None:
        return cum(Sg[t], h_rng[t], K)

    def Lv(t: int, K: int) -> int | None:
        return cum(L[t], l_rng[t], K)

    # gamma_tK (exact tier): t's D2H ends in the gap before op a_K (the compute stream
    # waited for it); then all of t's D2H share in step K lies in that gap.
    gm: list[dict[int, int]] = [{} for _ in range(nS)]

    def gam(t: int, K: int) -> int | None:
        return gm[t].get(K)

    for t in range(nS):
        if s[t] <= 0 or not has_bwd:
            continue
        for K in range(h_rng[t][0], h_rng[t][1] + 1):
            # an H2D starts after the D2H ended, or after an eviction: S <= D + E
            lin.row([(Sv(t, K), 1.0), (Dv(t, K), -1.0), (Ev(t, K), -1.0)], hi=0.0)
        for K in range(e_rng[t][0], e_rng[t][1] + 1):
            # residency >= 0: E <= xs - D + S
            lin.row([(Ev(t, K), 1.0), (xs[t], -1.0), (Dv(t, K), 1.0), (Sv(t, K), -1.0)],
                    hi=0.0)
        # a backward reader r: fetched (after the D2H, and after each earlier eviction)
        for r in rdb[t]:
            K = Kof[r]
            Ep = Ev(t, K) if single[K] else Ev(t, K - 1)
            lin.row([(Hv(t, K), 1.0), (Dv(t, K), -1.0), (Ep, -1.0)], lo=0.0)
        # a rebuild that reads swapped t before t's first backward reader
        for u in deps[t]:
            if not rec_ok[u]:
                continue
            for g in G[u]:
                if g >= firstb[t]:
                    continue
                K = Kof[g]
                lin.row([(Hv(t, K), 1.0), (Dv(t, K), -1.0), (Ev(t, K - 1), -1.0),
                         (y[u][g], -1.0)], lo=-1.0)

    def share(D: dict[int, int], rng: tuple[int, int], K: int,
              coef: float) -> list[tuple[int, float]]:
        if not (rng[0] <= K <= rng[1]):
            return []
        out = [(D[K], coef)]
        if K - 1 >= rng[0]:
            out.append((D[K - 1], -coef))
        return out

    def d2h_share(t: int, K: int, coef: float) -> list[tuple[int, float]]:
        return share(F[t], f_rng[t], K, coef) + share(L[t], l_rng[t], K, coef)

    # ---- FIFO D2H queue: a D2H moves in step K only if every earlier-produced swapped
    # tensor's D2H has ended by the end of K (chain P_tK over production order; a
    # non-lagging D2H has ended when Dn = 1, a lagging one when L = 1).
    if fifo and has_bwd:
        order_t = [t for t in range(nS) if s[t] > 0]
        prev_P: dict[int, int] = {}
        for i, t in enumerate(order_t):
            if i > 0:
                for K in range(f_rng[t][0], max(f_rng[t][1], l_rng[t][1]) + 1):
                    rowt = [(cum(F[t], f_rng[t], K), 1.0), (Lv(t, K), 1.0)]
                    Pk = prev_P.get(K)
                    lin.row(rowt + ([(Pk, -1.0)] if Pk is not None else []), hi=0.0)
            if i == len(order_t) - 1:
                break
            nxt = order_t[i + 1:]
            k_lo = min(f_rng[t2][0] for t2 in nxt)
            k_hi = max(max(f_rng[t2][1], l_rng[t2][1]) for t2 in nxt)
            cur: dict[int, int] = {}
            for K in range(k_lo, k_hi + 1):
                Pv = lin.var(0, 1, name=f"P{t}_{K}")
                lin.row([(Pv, 1.0), (Dv(t, K), -1.0), (Lv(t, K), -1.0), (xs[t], 1.0)],
                        hi=1.0)
                if i > 0:
                    lin.row([(Pv, 1.0)] + ([(prev_P[K], -1.0)] if K in prev_P else []),
                            hi=0.0)
                cur[K] = Pv
            prev_P = cur

    # Busy time of the D2H engine: a copy lasts at most w (latency + s / W) before the
    # backward pass (no H2D runs then, so no duplex slowdown) and at most dmax after.
    def d2h_busy(t: int, K: int) -> list[tuple[int, float]]:
        return d2h_share(t, K, float(w[t] if K < KB0 else dmax[t]))

    # ---- the D2H engine is work-conserving: while a swapped tensor's D2H is queued or
    # running through a whole step (produced before the step, not ended by its end), the
    # engine is busy the whole step, so it works >= the step's op time in it.
    if fifo and has_bwd:
        Bv: dict[int, int] = {}
        for t in range(nS):
            if s[t] <= 0:
                continue
            for K in range(f_rng[t][0], f_rng[t][1] + 1):
                a, b = groups[K]
                if prod[t] >= a:
                    continue
                if K not in Bv:
                    terms = []
                    for t2 in range(nS):
                        if s[t2] > 0:
                            terms += d2h_busy(t2, K)
                    Bv[K] = lin.var(0, _INF, name=f"B{K}")
                    lin.row([(Bv[K], 1.0)] + [(v, -cf) for v, cf in terms], 0.0, 0.0)
                dK = float(dur[a:b + 1].sum())
                row = [(Bv[K], 1.0), (xs[t], -dK), (Dv(t, K), dK)]
                if lag[t] is not None:
                    row.append((lag[t], dK))
                lin.row(row, lo=0.0)

    # rebuild reads of t placed in a gap of step <= K (they end the window in which t
    # has not been read yet)
    def read_by(t: int, K: int) -> list[tuple[int, float]]:
        return [(y[u][g], 1.0) for u in deps[t] if rec_ok[u] for g in G[u] if Kof[g] <= K]

    # ---- a lagging D2H keeps the D2H engine busy from its producer's end to its first
    # backward read, with copies produced no later (FIFO): in each step before that read
    # those copies work >= the step's op time. The first read is t's first backward reader
    # or an earlier rebuild that reads it (if one is placed there: the y terms).
    busy: dict[tuple[int, int], list[int]] = {}
    for t in range(nS):
        if lag[t] is None:
            continue
        for K in range(Kof[prod[t]] + 1, Kof[firstb[t]]):
            busy.setdefault((K, prod[t]), []).append(t)
    for (K, p), lagged in sorted(busy.items()):
        terms = []
        for t2 in range(nS):
            if s[t2] > 0 and prod[t2] <= p:
                terms += d2h_busy(t2, K)
        a, b = groups[K]
        dK = float(dur[a:b + 1].sum())
        for t in lagged:
            lin.row(terms + [(lag[t], -dK)] + [(v, dK) for v, _ in read_by(t, K)], lo=0.0)

    # ---- H2D queue order. (b) A lagging tensor sits at the head of the H2D queue (its
    # D2H has not ended) until its first read cancels its H2D: tensors needed later do not
    # start an H2D before that. (d) First H2Ds start in first-need order.
    if queue_order and has_bwd:
        for t in range(nS):
            if lag[t] is None:
                continue
            later = [t2 for t2 in range(nS) if t2 != t and s[t2] > 0
                     and gmin[t2] > firstb[t]]
            for Kc in range(max(KB0, Kof[gmin[t]] - 1), Kof[firstb[t]]):
                if Kc != Kof[firstb[t]] - 1 and not read_by(t, Kc + 1):
                    continue    # the row at the last step before the reader implies it
                lt = [t2 for t2 in later if h_rng[t2][0] <= Kc]
                if not lt:
                    continue
                cap = float(sum(max(1, n_reads[t2]) for t2 in lt))
                lin.row([(Sv(t2, Kc), 1.0) for t2 in lt] + [(lag[t], cap)]
                        + [(v, -cap) for v, _ in read_by(t, Kc)], hi=cap)
        # chain over all swappable tensors in (first backward reader, index) order:
        # Q_iK = "tensors 0..i of the chain that are swapped have started their first H2D
        # (or, lagging, may have been cancelled by their first read) by the end of K".
        # Tensor t2's first need is no earlier than gmin(t2); every tensor whose first
        # reader comes before that is ahead of t2 in the queue (a prefix of the chain).
        chain = [t for _, t in sorted((firstb[t], t) for t in range(nS) if s[t] > 0)]

        def n_ahead(theta: int) -> int:
            return sum(1 for t in chain if firstb[t] < theta)

        # thresholds theta for t2: "no rebuild read of t2 is placed in a gap before theta"
        # implies that t2's first need is >= theta (its reader, or a later rebuild)
        thresholds: dict[int, list[tuple[int, list[int]]]] = {}
        for t2 in chain:
            cands = sorted({g for u in deps[t2] if rec_ok[u] for g in G[u]
                            if g < firstb[t2]} | {firstb[t2]})
            rows_t2 = []
            for theta in cands:
                relax = [y[u][g] for u in deps[t2] if rec_ok[u] for g in G[u] if g < theta]
                if n_ahead(theta) > 0:
                    rows_t2.append((n_ahead(theta), relax))
            thresholds[t2] = rows_t2
        need = max((j for rows_t2 in thresholds.values() for j, _ in rows_t2), default=0)
        k_hi = max((h_rng[t][1] for t in chain), default=KB0 - 1)
        Qs: list[dict[int, int]] = []
        for i, t in enumerate(chain[:need]):
            cur: dict[int, int] = {}
            for K in range(KB0, k_hi + 1):
                Qv = lin.var(0, 1, name=f"Q{t}_{K}")
                # cancelled needs a read: by its first reader (K >= its step) or by a
                # rebuild placed in a gap of a step <= K
                row = [(Qv, 1.0), (Sv(t, K), -1.0), (xs[t], 1.0)]
                if lag[t] is not None and K >= Kof[firstb[t]]:
                    row.append((lag[t], -1.0))
                elif lag[t] is not None:
                    row += [(v, -1.0) for v, _ in read_by(t, K)]
                lin.row(row, hi=1.0)
                if i > 0:
                    lin.row([(Qv, 1.0), (Qs[i - 1][K], -1.0)], hi=0.0)
                cur[K] = Qv
            Qs.append(cur)
        for t2 in chain:
            cap = float(max(1, n_reads[t2]))
            for j, relax in thresholds[t2]:
                for K in range(h_rng[t2][0], h_rng[t2][1] + 1):
                    lin.row([(Sv(t2, K), 1.0), (Qs[j - 1][K], -cap)]
                            + [(yv, -cap) for yv in relax], hi=0.0)

    # ---- step durations
    tau = []
    for a, b in groups:
        tau.append(lin.var(float(dur[a:b + 1].sum()), _INF, obj=1.0, name=f"tau{a}"))
    reb_in: list[list[tuple[int, int]]] = [[] for _ in range(nG)]
    for u in range(nS):
        for g in G[u]:
            reb_in[Kof[g]].append((u, g))
    d2h_in: list[list[int]] = [[] for _ in range(nG)]
    h2d_in: list[list[int]] = [[] for _ in range(nG)]
    for t in range(nS):
        for K in range(f_rng[t][0], max(f_rng[t][1], l_rng[t][1]) + 1):
            d2h_in[K].append(t)
        for K in range(h_rng[t][0], h_rng[t][1] + 1):
            h2d_in[K].append(t)
    for K, (a, b) in enumerate(groups):
        base = float(dur[a:b + 1].sum())
        if reb_in[K]:
            lin.row([(tau[K], 1.0)] + [(y[u][g], -cu[u]) for u, g in reb_in[K]], lo=base)
        if d2h_in[K]:
            terms = [(tau[K], 1.0)]
            for t in d2h_in[K]:
                terms += d2h_share(t, K, -w[t])
            lin.row(terms, lo=0.0)
            # a D2H starts when its producer ends: it overlaps only the rest of step K
            for p in sorted({prod[t] for t in d2h_in[K] if a <= prod[t] < b}):
                terms = [(tau[K], 1.0)]
                for t in d2h_in[K]:
                    if p <= prod[t] < b:
                        terms += d2h_share(t, K, -w[t])
                lin.row(terms, lo=float(dur[a:p + 1].sum()))
        if h2d_in[K]:
            terms = [(tau[K], 1.0)]
            for t in h2d_in[K]:
                terms += share(H[t], h_rng[t], K, -w[t])
            lin.row(terms, lo=0.0)
            if single[K]:
                # an H2D for a reader of op a ends before op a starts
                rd = [t for t in h2d_in[K] if a in rdb[t]]
                if rd:
                    terms = [(tau[K], 1.0)]
                    for t in rd:
                        terms += share(H[t], h_rng[t], K, -w[t])
                    lin.row(terms, lo=float(dur[a]))
                # ... and one for a rebuild in the gap before op a ends before the rebuild
                # starts: w h <= tau - dur - c_u y + w (1 - y)
                for u, g in reb_in[K]:
                    for t in ins[u]:
                        if s[t] <= 0 or g > firstb[t] or not (h_rng[t][0] <= K <= h_rng[t][1]):
                            continue
                        terms = [(tau[K], 1.0), (y[u][g], -cu[u] - w[t])]
                        terms += share(H[t], h_rng[t], K, -w[t])
                        lin.row(terms, lo=float(dur[a]) - w[t])
            else:
                # H2D shares in K for tensors last read inside K end before that read
                for k in sorted({lastb[t] for t in h2d_in[K]
                                 if a <= lastb[t] <= b and not late_rebuild_read[t]}):
                    terms = [(tau[K], 1.0)]
                    for t in h2d_in[K]:
                        if a <= lastb[t] <= k and not late_rebuild_read[t]:
                            terms += share(H[t], h_rng[t], K, -w[t])
                    lin.row(terms, lo=float(dur[k:b + 1].sum()))

    # gamma: a D2H that ends in the gap before op a_K (step K a single op)
    if integral_copies:
        for t in range(nS):
            if s[t] <= 0 or not has_bwd:
                continue
            lo, hi = f_rng[t]
            for K in range(max(lo, Kof[lastf[t]] + 1), hi + 1):
                if not single[K]:
                    continue
                gv = lin.var(0, 1, True, name=f"g{t}_{K}")
                gm[t][K] = gv
                lin.row([(gv, 1.0), (Dv(t, K), -1.0), (Dv(t, K - 1), 1.0)], hi=0.0)
                a = groups[K][0]
                lin.row([(tau[K], 1.0), (gv, -w[t])] + share(F[t], f_rng[t], K, -w[t]),
                        lo=float(dur[a]) - w[t])

    # ---- memory
    floor = model_floor(inst)
    info: dict[str, Any] = {"steps": len(groups)}
    if M is not None and n > 0:
        Mu = M / mu
        by_prod: list[list[int]] = [[] for _ in range(n)]
        for t in range(nS):
            by_prod[prod[t]].append(t)

        def expr(t: int, k: int, Kd: int, Ks: int, Ke: int) -> tuple[float, list]:
            """(constant, terms) of t's memory at the end of op k (model units); the
            D2H-ended, H2D-started and eviction counts are read at steps Kd, Ks, Ke."""
            st = sm[t]
            if k < prod[t]:
                return 0.0, []      # produced later in the same (multi-op) step
            if k <= lastf[t]:
                return st, []
            if k < nf:
                return st, [(xr[t], -st), (Dv(t, Kd), -st)]
            if k > lastb[t]:
                return 0.0, []
            terms = [(xr[t], -st)] + [(v, st) for v, _ in Y(t, k)]
            if k in rdb[t] or s[t] <= 0:
                return st, terms
            terms += [(Dv(t, Kd), -st), (Sv(t, Ks), st), (Ev(t, Ke), -st)]
            return st, terms

        def at(k: int) -> tuple[int, int, int]:
            K = Kof[k]
            return (K, K, K) if k == groups[K][1] else (K, K - 1, K)

        alive: list[int] = []
        for K, (a, b) in enumerate(groups):
            for k in range(a, b + 1):
                alive.extend(by_prod[k])
            if single[K]:
                const = float(static[a]) / mu
                terms: list[tuple[int, float]] = []
                for t in alive:
                    cst, tm = expr(t, a, *at(a))
                    const += cst
                    terms += tm
                lin.row(terms, hi=Mu - const)
                if integral_copies:
                    # at the start of op a: a D2H that ended in the gap before it (gamma)
                    # already freed its tensor; H2D copies started in that gap are not
                    # counted (they may start after op a did); evictions in the gap are.
                    const = float(static[a]) / mu
                    terms = []
                    for t in alive:
                        st = sm[t]
                        if a <= lastf[t]:
                            const += st
                            continue
                        if a >= nf and a > lastb[t]:
                            continue
                        const += st
                        terms.append((xr[t], -st))
                        if a >= nf:
                            terms += [(v, st) for v, _ in Y(t, a)]
                        if s[t] <= 0 or (a >= nf and a in rdb[t]):
                            continue
                        terms += [(Dv(t, K - 1), -st), (gam(t, K), -st)]
                        if a >= nf:
                            terms += [(Sv(t, K - 1), st), (Ev(t, K), -st)]
                    lin.row(terms, hi=Mu - const)
                continue
            bwd = a >= nf
            passive: list[int] = []
            active: list[int] = []
            for t in alive:
                if prod[t] >= a:
                    active.append(t)
                elif not bwd:
                    (passive if lastf[t] < a else active).append(t)
                else:
                    if lastb[t] < a:
                        continue
                    touched = (lastb[t] <= b or any(a <= r <= b for r in rdb[t])
                               or any(a <= g <= b for g in G[t]))
                    (active if touched else passive).append(t)
            zc = 0.0
            zterms: list[tuple[int, float]] = []
            for t in passive:
                cst, tm = expr(t, b if not bwd else a, K, K - 1, K)
                zc += cst
                zterms += tm
            Z = lin.var(-_INF, _INF) if zterms else None
            if Z is not None:
                lin.row([(Z, 1.0)] + [(v, -cf) for v, cf in zterms], 0.0, 0.0)
            for k in range(a, b + 1):
                const = float(static[k]) / mu + zc
                terms = [(Z, 1.0)] if Z is not None else []
                for t in active:
                    cst, tm = expr(t, k, *at(k))
                    const += cst
                    terms += tm
                lin.row(terms, hi=Mu - const)

        # H2D admission: an H2D the compute stream is not waiting for starts only if
        # used + its size + the next three tasks' allocations fit in M; used >= R_K, the
        # bytes alive throughout step K. phi_tK = "t's first H2D has started by the end of
        # step K" (= S for a tensor read once, fetched once; a binary otherwise), so
        # phi_K - phi_(K-1) = 1 exactly when it starts in step K. The compute stream waits
        # for t only before a task that reads t: its backward readers (those steps are
        # skipped) and rebuilds whose recipe reads t (the row is relaxed by their y).
        if admission and integral_copies and has_bwd:
            op_alloc = (s_alloc + ws).astype(np.float64)
            y_at: dict[int, list[tuple[int, int]]] = {}
            for u in range(nS):
                for g in G[u]:
                    y_at.setdefault(g, []).append((u, y[u][g]))
            phi: list[dict[int, int]] = [{} for _ in range(nS)]
            for t in range(nS):
                if s[t] <= 0:
                    continue
                lo, hi = h_rng[t]
                if n_reads[t] == 1:
                    phi[t] = Sg[t]
                    continue
                cap = float(max(1, n_reads[t]))
                for K in range(lo, hi + 1):
                    pv = lin.var(0, 1, True, name=f"phi{t}_{K}")
                    phi[t][K] = pv
                    lin.row([(pv, 1.0), (Sg[t][K], -1.0)], hi=0.0)
                    lin.row([(pv, cap), (Sg[t][K], -1.0)], lo=0.0)
                    if K > lo:
                        lin.row([(pv, 1.0), (phi[t][K - 1], -1.0)], lo=0.0)
            reb_reads: dict[tuple[int, int], list[int]] = {}
            for u in range(nS):
                if not rec_ok[u]:
                    continue
                for g in G[u]:
                    for t in ins[u]:
                        reb_reads.setdefault((t, Kof[g]), []).append(y[u][g])
            for K in range(KB0, nG):
                if not single[K]:
                    continue
                k = groups[K][0]
                cand = [t for t in range(nS) if s[t] > 0 and h_rng[t][0] <= K <= h_rng[t][1]
                        and all(Kof[r] != K for r in rdb[t])]
                if not cand:
                    continue
                const = float(static[k] - s_alloc[k] - ws[k]) / mu
                terms = []
                for t in range(nS):
                    if prod[t] >= k or lastb[t] < k:
                        continue
                    st = sm[t]
                    const += st
                    terms += [(xs[t], -st), (xr[t], -st)]
                    terms += [(v, st) for v, _ in Y(t, k - 1)]
                    if s[t] > 0:
                        terms += [(xs[t], st), (Dv(t, K), -st), (Sv(t, K - 1), st),
                                  (Ev(t, K), -st)]
                R = lin.var(-_INF, _INF, name=f"R{k}")
                lin.row([(R, 1.0)] + [(v, -cf) for v, cf in terms], 0.0, 0.0)
                # Starting in the gap before op k: used >= R and the next three tasks are
                # ops k, k+1, k+2 unless rebuilds come first; while op k runs: used >= R +
                # op k's allocation and the next tasks start at op k+1. Both are >=
                # alloc(k .. k+2) - sum over rebuilds u placed in gaps k .. k+3 of
                # (Dmax - alloc(u))+: a rebuild allocates its tensor, transient bytes and
                # workspace and displaces at most one op (Dmax = largest op allocation).
                base3 = float(op_alloc[k:k + 3].sum())
                dmx = float(op_alloc[k:k + 4].max())
                ydisp = [(yv, (dmx - float(s[u] + extra[u])) / mu)
                         for g in range(k, min(n, k + 4)) for u, yv in y_at.get(g, [])
                         if dmx > float(s[u] + extra[u])]
                for t in cand:
                    coef = (s[t] + base3) / mu
                    row = [(R, 1.0), (phi[t][K], coef)]
                    if K - 1 >= h_rng[t][0]:
                        row.append((phi[t][K - 1], -coef))
                    row += [(yv, -coef) for yv in reb_reads.get((t, K), [])]
                    row += [(yv, -cf) for yv, cf in ydisp]
                    lin.row(row, hi=Mu - const)

        # rebuild instants: Q[g] = saved bytes alive across gap g (kept, rebuilt earlier)
        gaps = sorted({g for u in range(nS) for g in G[u]})
        if gaps:
            Qc: dict[int, float] = {}
            Qv: dict[int, int] = {}
            nxt_c, nxt_v = 0.0, None
            for i in range(len(gaps) - 1, -1, -1):
                g = gaps[i]
                g2 = gaps[i + 1] if i + 1 < len(gaps) else n
                terms = [(nxt_v, 1.0)] if nxt_v is not None else []
                cst = nxt_c
                for t in range(nS):
                    if g <= lastb[t] < g2:
                        cst += sm[t]
                        terms += [(xs[t], -sm[t]), (xr[t], -sm[t])]
                        terms += [(v, sm[t]) for v, _ in Y(t, g - 1)]
                    elif lastb[t] >= g2:
                        # placements of t in [g, g2 - 1] leave Q going backwards in time
                        terms += [(y[t][gg], -sm[t]) for gg in G[t] if g <= gg < g2]
                q = lin.var(-_INF, _INF)
                lin.row([(q, 1.0)] + [(v, -cf) for v, cf in terms], 0.0, 0.0)
                Qc[g], Qv[g] = cst, q
                nxt_c, nxt_v = cst, q
            for u in range(nS):
                for g in G[u]:
                    gap_static = float(static[g] - s_alloc[g] - ws[g]) / mu
                    terms = [(Qv[g], 1.0), (y[u][g], (s[u] + extra[u]) / mu)]
                    for t in ins[u]:
                        om = lin.var(0.0, 1.0)
                        # om >= y_ug - (keep_t + rebuilt before g)  [if t alive across g]
                        rowt = [(om, 1.0), (y[u][g], -1.0)]
                        lo = 0.0
                        if lastb[t] >= g:
                            rowt += [(xs[t], -1.0), (xr[t], -1.0)]
                            rowt += [(v, 1.0) for v, _ in Y(t, g - 1)]
                            lo = -1.0
                        lin.row(rowt, lo=lo)
                        terms.append((om, sm[t]))
                    lin.row(terms, hi=Mu - gap_static - Qc[g])
    info.update(lin.stats())
    info["options"] = {"lagging": lagging, "binary_placement": binary_placement,
                       "integral_copies": integral_copies, "fifo": fifo,
                       "queue_order": queue_order, "admission": admission,
                       "integer_evictions": integer_evictions}
    return _Model(lin=lin, xs=xs, xr=xr, floor_bytes=floor, groups=groups, tier=tier,
                  info=info)


# =========================================================================== backends
@dataclass
class _Sol:
    status: str            # "optimal", "feasible", "infeasible", "unknown", "error"
    x: list[float] | None
    objective: float | None
    bound: float | None    # proven lower bound on the model optimum (model units)
    seconds: float
    message: str = ""
    pool: list[list[float]] = field(default_factory=list)   # other feasible solutions


class _Backend(ABC):
    """Solve a _Lin, possibly several times with rows added in between."""

    name = "?"
    pool_size = 20

    def __init__(self, lin: _Lin, *, threads: int, seed: int, rel_gap: float,
                 verbose: bool = False) -> None:
        self.lin, self.threads, self.seed, self.rel_gap = lin, threads, seed, rel_gap
        self.verbose = verbose

    @abstractmethod
    def add_row(self, terms: Sequence[tuple[int, float]], lo: float, hi: float) -> Any:
        """Add a row ``lo <= sum coef * var <= hi``; returns a handle for
        :meth:`set_row_hi`."""

    @abstractmethod
    def set_row_hi(self, handle: Any, hi: float) -> None:
        """Change the upper side of the row `handle` (the objective cutoff row)."""

    @abstractmethod
    def solve(self, time_limit_s: float, hint: dict[int, float] | None) -> _Sol:
        """Solve within `time_limit_s` (s), starting from the partial assignment `hint`
        (variable index -> value) where the backend takes one."""


class _ScipBackend(_Backend):
    """OR-Tools pywraplp with SCIP (best bound from SCIP's dual bound)."""

    name = "scip"

    def __init__(self, lin: _Lin, **kw: Any) -> None:
        super().__init__(lin, **kw)
        from ortools.linear_solver import pywraplp
        self._pywraplp = pywraplp
        sv = pywraplp.Solver.CreateSolver("SCIP")
        if sv is None:  # pragma: no cover - depends on the OR-Tools build
            raise RuntimeError("OR-Tools was built without SCIP")
        self.sv = sv
        inf = sv.infinity()
        self.v = []
        for j in range(lin.n_vars):
            lb = lin.lb[j] if lin.lb[j] > -_INF else -inf
            ub = lin.ub[j] if lin.ub[j] < _INF else inf
            self.v.append(sv.IntVar(lb, ub, "") if lin.is_int[j] else sv.NumVar(lb, ub, ""))
        for idx, cf, lo, hi in lin.rows:
            self.add_row(list(zip(idx, cf, strict=True)), lo, hi)
        obj = sv.Objective()
        for j, cj in enumerate(lin.obj):
            if cj:
                obj.SetCoefficient(self.v[j], cj)
        obj.SetMinimization()

    def add_row(self, terms: Sequence[tuple[int, float]], lo: float, hi: float) -> Any:
        inf = self.sv.infinity()
        ct = self.sv.RowConstraint(lo if lo > -_INF else -inf, hi if hi < _INF else inf, "")
        for j, cj in terms:
            ct.SetCoefficient(self.v[j], cj)
        return ct

    def set_row_hi(self, handle: Any, hi: float) -> None:
        handle.SetUb(hi if hi < _INF else self.sv.infinity())

    def solve(self, time_limit_s: float, hint: dict[int, float] | None) -> _Sol:
        pw = self._pywraplp
        from ortools.linear_solver import linear_solver_pb2
        # pywraplp's SCIP interface does not re-solve a modified model reliably (after a
        # first solve, a re-solve with added rows returned ABNORMAL or stopped at once
        # with a feasible status): ``self.sv`` only holds the model, each solve loads it
        # into a fresh SCIP.
        proto = linear_solver_pb2.MPModelProto()
        self.sv.ExportModelToProto(proto)
        sv = pw.Solver.CreateSolver("SCIP")
        sv.LoadModelFromProto(proto)
        v = sv.variables()
        sv.SetTimeLimit(max(1, int(time_limit_s * 1000)))
        sv.SetNumThreads(max(1, int(self.threads)))
        # Cutting-plane rounds dominate on these models at little gain; keep a few at
        # the root (measured on the small instances: 2-5x faster, same optima).
        sv.SetSolverSpecificParametersAsString(
            f"randomization/randomseedshift = {int(self.seed) % 2**31}\n"
            f"randomization/permutationseed = {int(self.seed) % 2**31}\n"
            "separating/maxroundsroot = 2\nseparating/maxrounds = 0\n")
        if self.verbose:
            sv.EnableOutput()
        else:
            sv.SuppressOutput()
        if hint:
            keys = sorted(hint)
            sv.SetHint([v[j] for j in keys], [hint[j] for j in keys])
        p = pw.MPSolverParameters()
        p.SetDoubleParam(p.RELATIVE_MIP_GAP, self.rel_gap)
        t0 = time.perf_counter()
        st = sv.Solve(p)
        secs = time.perf_counter() - t0
        if st == pw.Solver.INFEASIBLE:
            return _Sol("infeasible", None, None, None, secs)
        if st in (pw.Solver.OPTIMAL, pw.Solver.FEASIBLE):
            x = [var.solution_value() for var in v]
            objv = sv.Objective().Value()
            bound = sv.Objective().BestBound()
            pool = []
            while len(pool) < self.pool_size and sv.NextSolution():
                pool.append([var.solution_value() for var in v])
            return _Sol("optimal" if st == pw.Solver.OPTIMAL else "feasible", x, objv,
                        bound if math.isfinite(bound) else None, secs, pool=pool)
        bound = sv.Objective().BestBound()
        return _Sol("unknown", None, None, bound if math.isfinite(bound) else None, secs,
                    f"SCIP status {st}")


class _HighsBackend(_Backend):
    """OR-Tools MathOpt with HiGHS (MathOpt reports HiGHS's dual bound; pywraplp does
    not, and its HiGHS hints crash). HiGHS's MIP search is single-threaded here."""

    name = "highs"

    def __init__(self, lin: _Lin, **kw: Any) -> None:
        super().__init__(lin, **kw)
        from ortools.math_opt.python import mathopt
        self._mo = mathopt
        m = mathopt.Model(name="slackopt-milp")
        self.m = m
        self.v = []
        for j in range(lin.n_vars):
            self.v.append(m.add_variable(lb=lin.lb[j], ub=lin.ub[j], is_integer=lin.is_int[j]))
        for idx, cf, lo, hi in lin.rows:
            self.add_row(list(zip(idx, cf, strict=True)), lo, hi)
        m.minimize(mathopt.LinearSum(cj * self.v[j] for j, cj in enumerate(lin.obj) if cj))

    def add_row(self, terms: Sequence[tuple[int, float]], lo: float, hi: float) -> Any:
        mo = self._mo
        expr = mo.LinearSum(cj * self.v[j] for j, cj in terms)
        return self.m.add_linear_constraint(lb=lo, ub=hi, expr=expr)

    def set_row_hi(self, handle: Any, hi: float) -> None:
        handle.upper_bound = hi

    def solve(self, time_limit_s: float, hint: dict[int, float] | None) -> _Sol:
        from datetime import timedelta
        mo = self._mo
        params = mo.SolveParameters(
            time_limit=timedelta(seconds=max(0.01, float(time_limit_s))),
            relative_gap_tolerance=self.rel_gap, random_seed=int(self.seed) % 2**31,
            enable_output=self.verbose)
        t0 = time.perf_counter()
        res = mo.solve(self.m, mo.SolverType.HIGHS, params=params)
        secs = time.perf_counter() - t0
        reason = res.termination.reason
        TR = mo.TerminationReason
        bounds = res.termination.objective_bounds
        dual = bounds.dual_bound if math.isfinite(bounds.dual_bound) else None
        if reason == TR.INFEASIBLE:
            return _Sol("infeasible", None, None, None, secs)
        if res.has_primal_feasible_solution():
            vals = res.variable_values()
            x = [float(vals[v]) for v in self.v]
            return _Sol("optimal" if reason == TR.OPTIMAL else "feasible", x,
                        float(res.objective_value()), dual, secs)
        return _Sol("unknown", None, None, dual, secs, f"HiGHS {reason}")


class _PulpBackend(_Backend):
    """PuLP with CBC or HiGHS, whichever is present (a system CBC first, then PuLP's
    bundled CBC, then HiGHS): an independent cross-check. CBC's best bound is read from
    its log; without it, an optimal status with relative gap g gives ``obj - g * |obj|``."""

    name = "pulp"
    PREFERENCE = ("COIN_CMD", "PULP_CBC_CMD", "HiGHS", "HiGHS_CMD")

    def __init__(self, lin: _Lin, **kw: Any) -> None:
        super().__init__(lin, **kw)
        import pulp
        self._pulp = pulp
        avail = set(pulp.listSolvers(onlyAvailable=True))
        names = [x for x in self.PREFERENCE if x in avail]
        if not names:
            raise RuntimeError(f"PuLP finds none of {', '.join(self.PREFERENCE)}")
        self.solver_name = names[0]
        prob = pulp.LpProblem("slackopt_milp", pulp.LpMinimize)
        add = getattr(prob, "add_variable", None)   # PuLP >= 3.3; LpVariable() before
        self.v = []
        for j in range(lin.n_vars):
            lb = lin.lb[j] if lin.lb[j] > -_INF else None
            ub = lin.ub[j] if lin.ub[j] < _INF else None
            cat = pulp.LpInteger if lin.is_int[j] else pulp.LpContinuous
            if add is not None:
                self.v.append(add(f"v{j}", lowBound=lb, upBound=ub, cat=cat))
            else:  # pragma: no cover - older PuLP
                self.v.append(pulp.LpVariable(f"v{j}", lowBound=lb, upBound=ub, cat=cat))
        prob += pulp.LpAffineExpression([(self.v[j], cj) for j, cj in enumerate(lin.obj) if cj])
        self.prob = prob
        self._nrow = 0
        for idx, cf, lo, hi in lin.rows:
            self.add_row(list(zip(idx, cf, strict=True)), lo, hi)

    def add_row(self, terms: Sequence[tuple[int, float]], lo: float, hi: float) -> Any:
        pulp = self._pulp
        e = pulp.LpAffineExpression([(self.v[j], cj) for j, cj in terms])
        handle = None
        if lo > -_INF and hi < _INF and lo == hi:
            self.prob += pulp.LpConstraint(e, pulp.LpConstraintEQ, f"r{self._nrow}", lo)
        else:
            if lo > -_INF:
                self.prob += pulp.LpConstraint(e, pulp.LpConstraintGE, f"r{self._nrow}", lo)
                self._nrow += 1
            if hi < _INF or lo == -_INF:
                # a free row gets a placeholder bound so that set_row_hi can tighten it
                name = f"r{self._nrow}"
                self.prob += pulp.LpConstraint(e, pulp.LpConstraintLE, name,
                                               hi if hi < _INF else _PULP_FREE)
                handle = name
        self._nrow += 1
        return handle

    def set_row_hi(self, handle: Any, hi: float) -> None:
        self.prob.get_constraint_by_name(handle).changeRHS(hi if hi < _INF else _PULP_FREE)

    def solve(self, time_limit_s: float, hint: dict[int, float] | None) -> _Sol:
        pulp = self._pulp
        warm = bool(hint)
        if hint:
            for j, val in hint.items():
                self.v[j].setInitialValue(val, check=False)
        fd, log = tempfile.mkstemp(prefix="slackopt_cbc_", suffix=".log")
        os.close(fd)
        try:
            # CBC counts whole seconds and PuLP writes and reads files around it: 90%
            kw = dict(msg=self.verbose, timeLimit=max(1, int(0.9 * time_limit_s)),
                      gapRel=self.rel_gap, threads=max(1, int(self.threads)), logPath=log)
            with warnings.catch_warnings():
                # PuLP 3.3 deprecates its bundled CBC (PULP_CBC_CMD) for PuLP 4.0; it is
                # used only when no system CBC (COIN_CMD) is installed.
                warnings.simplefilter("ignore", DeprecationWarning)
                if self.solver_name in ("COIN_CMD", "PULP_CBC_CMD"):
                    cmd = getattr(pulp, self.solver_name)(
                        warmStart=warm, options=[f"randomCbcSeed {int(self.seed) % 2**31 or 1}"],
                        **kw)
                else:
                    cmd = getattr(pulp, self.solver_name)(**kw)
                t0 = time.perf_counter()
                self.prob.solve(cmd)
                secs = time.perf_counter() - t0
            with open(log, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        finally:
            try:
                os.unlink(log)
            except OSError:
                pass
        st = pulp.LpStatus.get(self.prob.status, "Undefined")
        sol_st = getattr(self.prob, "sol_status", None)
        if st == "Infeasible":
            return _Sol("infeasible", None, None, None, secs)
        objv = pulp.value(self.prob.objective)
        bound = _cbc_bound(text) if "CBC" in self.solver_name else None
        if st == "Optimal" and sol_st == pulp.LpSolutionOptimal:
            x = [float(v.value() or 0.0) for v in self.v]
            if objv is not None:
                # CBC proved the incumbent within its ratio gap; the "Lower bound" line of
                # its log can still show an older (weaker) tree bound
                proven = objv - self.rel_gap * abs(objv)
                bound = proven if bound is None else max(bound, proven)
            return _Sol("optimal", x, objv, bound, secs)
        if objv is not None and sol_st == pulp.LpSolutionIntegerFeasible:
            x = [float(v.value() or 0.0) for v in self.v]
            return _Sol("feasible", x, objv, bound, secs)
        return _Sol("unknown", None, None, bound, secs, f"CBC status {st}")


def _cbc_bound(text: str) -> float | None:
    """CBC's final best possible objective from its log, or None."""
    vals = re.findall(r"best possible\s+(-?[0-9.eE+-]+)", text)
    vals += re.findall(r"Objective bound[: ]+(-?[0-9.eE+-]+)", text)
    m = re.findall(r"Lower bound:\s+(-?[0-9.eE+-]+)", text)
    vals += m
    out = []
    for v in vals:
        try:
            out.append(float(v))
        except ValueError:
            continue
    return out[-1] if out else None


_BACKEND_CLASSES = {"scip": _ScipBackend, "highs": _HighsBackend, "pulp": _PulpBackend}


def lp_relaxation(lin: _Lin, time_limit_s: float) -> tuple[float | None, list[float] | None]:
    """Solve the LP relaxation of `lin` (integrality dropped) with GLOP (OR-Tools'
    simplex; deterministic). Its optimum is a lower bound on the MILP's. Returns (optimum
    in model units, or None if not solved to optimality in time; the solution)."""
    from ortools.linear_solver import pywraplp

    sv = pywraplp.Solver.CreateSolver("GLOP")
    inf = sv.infinity()
    v = [sv.NumVar(lin.lb[j] if lin.lb[j] > -_INF else -inf,
                   lin.ub[j] if lin.ub[j] < _INF else inf, "") for j in range(lin.n_vars)]
    for idx, cf, lo, hi in lin.rows:
        ct = sv.RowConstraint(lo if lo > -_INF else -inf, hi if hi < _INF else inf, "")
        for j, cj in zip(idx, cf, strict=True):
            ct.SetCoefficient(v[j], cj)
    obj = sv.Objective()
    for j, cj in enumerate(lin.obj):
        if cj:
            obj.SetCoefficient(v[j], cj)
    obj.SetMinimization()
    sv.SetTimeLimit(max(1, int(time_limit_s * 1000)))
    if sv.Solve() != pywraplp.Solver.OPTIMAL:
        return None, None
    return obj.Value(), [x.solution_value() for x in v]


# =========================================================================== CP-SAT incumbent
def recompute_only_incumbent(inst: Instance, M: int, time_limit_s: float = 5.0,
                             seed: int = 0) -> np.ndarray | None:
    """The best keep/recomp plan (no copies) under the model's memory rows, with CP-SAT.

    With no copies the model's step time is T* + the recompute time and every quantity is
    integral (bytes; recompute time in nanoseconds), so CP-SAT solves it exactly: minimise
    the summed c_u of recomp tensors subject to the exact-tier memory rows (op ends and
    rebuild starts, rebuild positions as in the evaluator). The result is an incumbent for
    the MILP loop, checked by the evaluator; it proves nothing by itself.

    Returns:
        The decisions (int8 array over saved tensors), or None if CP-SAT finds none in
        ``time_limit_s`` seconds (or none exists).
    """
    from ortools.sat.python import cp_model

    n, nf, nS = inst.n_ops, inst.n_fwd, inst.n_saved
    s = [int(v) for v in np.asarray(inst.s, dtype=np.int64)]
    c = np.asarray(inst.c, dtype=np.float64)
    rec_ok = np.isfinite(c).tolist()
    cns = [int(round(x * 1e9)) if ok else 0 for x, ok in zip(c.tolist(), rec_ok, strict=True)]
    prod = inst.saved_prod_idx.tolist()
    lastf = inst.saved_last_fwd_idx.tolist()
    firstb = inst.saved_first_bwd_idx.tolist()
    lastb = inst.saved_last_bwd_idx.tolist()
    ins = [tuple(int(i) for i in x) for x in inst.recipe_inputs]
    deps: list[list[int]] = [[] for _ in range(nS)]
    for u in range(nS):
        for t in ins[u]:
            deps[t].append(u)
    # candidate gaps (same closure as build_model)
    G = _rebuild_gaps(prod, rec_ok, deps, firstb)
    static = inst.static_profile.tolist()
    s_alloc = inst.static_alloc.tolist()
    ws = inst.workspace.tolist()
    extra = (np.asarray(inst.recipe_transient) + np.asarray(inst.recipe_workspace)).tolist()
    cm = cp_model.CpModel()
    xr = [cm.NewBoolVar(f"r{t}") if rec_ok[t] and s[t] > 0 else None for t in range(nS)]
    y: list[dict[int, Any]] = [{} for _ in range(nS)]
    for u in range(nS):
        if xr[u] is None:
            continue
        for g in G[u]:
            y[u][g] = cm.NewBoolVar("")
        cm.Add(sum(y[u].values()) == xr[u])

    def Y(u: int, k: int) -> list[Any]:
        return [y[u][g] for g in G[u] if g <= k]

    for u in range(nS):
        if xr[u] is None:
            continue
        for v in deps[u]:
            if xr[v] is None:
                continue
            for g in G[v]:
                if g > firstb[u]:
                    continue
                cm.Add(sum(Y(u, g)) >= sum(Y(v, g)) + xr[u] - 1)
        for g in G[u]:
            if g == firstb[u]:
                continue
            sup = [y[v][g] for v in deps[u] if xr[v] is not None and g in y[v]]
            cm.Add(y[u][g] <= sum(sup) if sup else y[u][g] == 0)
    alive: list[int] = []
    by_prod: list[list[int]] = [[] for _ in range(n)]
    for t in range(nS):
        by_prod[prod[t]].append(t)
    for k in range(n):
        alive.extend(by_prod[k])
        const = static[k]
        terms = []
        for t in alive:
            if k <= lastf[t]:
                const += s[t]
            elif k > lastb[t]:
                continue
            elif xr[t] is None:
                const += s[t]
            elif k < nf:
                const += s[t]
                terms.append(-s[t] * xr[t])
            else:
                const += s[t]
                terms.append(-s[t] * xr[t])
                terms += [s[t] * v for v in Y(t, k)]
        if terms:
            cm.Add(sum(terms) <= M - const)
        elif const > M:
            return None
    for u in range(nS):
        if xr[u] is None:
            continue
        for g in G[u]:
            const = static[g] - s_alloc[g] - ws[g]
            terms = [(s[u] + extra[u]) * y[u][g]]
            for t in range(nS):
                if lastb[t] >= g and prod[t] < g:
                    if xr[t] is None:
                        const += s[t]
                    else:
                        const += s[t]
                        terms.append(-s[t] * xr[t])
                        terms += [s[t] * v for v in Y(t, g - 1)]
            for t in ins[u]:
                if lastb[t] >= g:
                    if xr[t] is not None:
                        # t is recomp and not rebuilt before g: count it if y_ug
                        om = cm.NewBoolVar("")
                        cm.Add(om >= y[u][g] + xr[t] - 1 - sum(Y(t, g - 1)))
                        terms.append(s[t] * om)
                else:
                    terms.append(s[t] * y[u][g])
            cm.Add(sum(terms) <= M - const)
    cm.Minimize(sum(cns[u] * xr[u] for u in range(nS) if xr[u] is not None))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(max(0.1, time_limit_s))
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = int(seed) % 2**31
    st = solver.Solve(cm)
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    dec = np.full(nS, KEEP, dtype=np.int8)
    for t in range(nS):
        if xr[t] is not None and solver.Value(xr[t]):
            dec[t] = RECOMP
    return dec


# =========================================================================== the solver
@dataclass
class _Best:
    step_s: float = _INF
    dec: np.ndarray | None = None
    source: str = ""


FULL_MAX_SAVED, FULL_MAX_OPS = 10, 48
"""The "auto" tier uses the full model up to this many saved tensors and ops..."""
EXACT_MAX_SAVED, EXACT_MAX_OPS = 128, 320
"""... one step per op (binary decisions only) up to this size, else aggregated steps."""
EXACT_LP_MAX_NONZEROS = 150_000
"""The exact tier solves the LP relaxation first (GLOP, for its rounding) only up to this
many nonzeros: on chain63 (290k) GLOP needed over 30 s and the MILP then ran out of time
before its root bound."""


class MILP:
    """Time-indexed MILP relaxation with the evaluator in the loop (module docstring).

    Args:
        backend: "scip" (default), "highs" or "pulp".
        time_limit_s: default wall-clock limit (s) when ``solve`` gets none: 55 s (so
            that a command-line solve, interpreter start and imports included, ends
            within 60 s), or 300 s in the aggregated tier (the GPT-2 XL solve at 0.5 P
            ends at 294 s: every backend call gets 97% of the time left, less 0.5 s).
        rel_gap: relative gap at which a MILP solve stops, and at which a plan counts as
            proven optimal: (upper - lower) / lower <= rel_gap.
        threads: solver threads (OR-Tools' SCIP is sequential; CBC uses them; HiGHS's MIP
            search is sequential).
        warm_start: evaluate SlackSwap's plan and CP-SAT's best recompute-only plan first;
            the better one is the first incumbent (and SCIP's hint).
        tier: "auto", "full", "exact" or "aggregated" (see :func:`build_model`); "auto"
            picks full up to 10 saved tensors and 48 ops, exact up to 128 and 320,
            aggregated beyond.
        steps: override the step granularity ("op", "layer", or ops per step).
        max_iterations: most MILP solves in the no-good loop.
        patience: stop the no-good loop after this many solves in a row that raise
            neither the lower nor the upper bound; None (default) picks none (run to the
            limits) in the full tier and 5 in the exact and aggregated tiers, whose
            looser relaxations admit many plans of equal model value, so cutting them
            one by one seldom raises the bound.
        local_search: 1-flip local search (evaluator-scored) around each new incumbent,
            in the full and exact tiers.
        seed: default seed when ``solve`` gets none.
        verbose: print the backend's log.
        **model_options: overrides for :func:`build_model` (lagging, binary_placement,
            integral_copies, fifo, queue_order, admission, integer_evictions).

    Raises:
        ValueError: a parameter of the wrong type or out of range, or an unknown one
            (the message names it and lists the known ones).
    """

    name = "milp"

    def __init__(self, *, backend: str = "scip", time_limit_s: float | None = None,
                 rel_gap: float = 1e-4, threads: int = 1, warm_start: bool = True,
                 tier: str = "auto", steps: str | int | None = None,
                 max_iterations: int = 100, patience: int | None = None,
                 local_search: bool = True, seed: int = 0,
                 verbose: bool = False, **model_options: Any) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend {backend!r} is not one of {', '.join(BACKENDS)}")
        if tier not in TIERS:
            raise ValueError(f"tier {tier!r} is not one of {', '.join(TIERS)}")
        if not (steps is None or steps in ("op", "layer")
                or (isinstance(steps, int) and not isinstance(steps, bool) and steps >= 1)):
            raise ValueError(f"steps must be 'op', 'layer', an integer >= 1 (ops per step) or "
                             f"null, got {steps!r}")
        bad = sorted(set(model_options) - set(MODEL_OPTIONS))
        if bad:
            raise ValueError(
                f"unknown parameter(s) {', '.join(map(repr, bad))}; milp takes {', '.join(PARAMS)}"
                f" and the model switches {', '.join(MODEL_OPTIONS)}")
        self.backend = backend
        self.time_limit_s = (None if time_limit_s is None else
                             real_param("time_limit_s", time_limit_s, positive=True))
        self.rel_gap = real_param("rel_gap", rel_gap, minimum=0.0)
        self.threads = int_param("threads", threads, 1)
        self.warm_start = bool_param("warm_start", warm_start)
        self.tier = tier
        self.steps = steps
        self.max_iterations = int_param("max_iterations", max_iterations, 1)
        self.patience = None if patience is None else int_param("patience", patience, 1)
        self.local_search = bool_param("local_search", local_search)
        self.seed = int_param("seed", seed)
        self.verbose = bool_param("verbose", verbose)
        self.model_options = {k: bool_param(k, v) for k, v in model_options.items()}

    @property
    def params(self) -> dict[str, Any]:
        return {"backend": self.backend, "time_limit_s": self.time_limit_s,
                "rel_gap": self.rel_gap, "threads": self.threads,
                "warm_start": self.warm_start, "tier": self.tier, "steps": self.steps,
                "max_iterations": self.max_iterations, "patience": self.patience,
                "local_search": self.local_search,
                "seed": self.seed, **self.model_options}

    def tier_for(self, inst: Instance) -> str:
        """The tier used for `inst` ("full", "exact" or "aggregated")."""
        if self.tier != "auto":
            return self.tier
        if inst.n_saved <= FULL_MAX_SAVED and inst.n_ops <= FULL_MAX_OPS:
            return "full"
        if inst.n_saved <= EXACT_MAX_SAVED and inst.n_ops <= EXACT_MAX_OPS:
            return "exact"
        return "aggregated"

    # ------------------------------------------------------------------ min budget
    @staticmethod
    def min_budget(inst: Instance) -> tuple[int, int, bool]:
        """(min budget, model floor, exact), bytes. The model floor is a proven lower
        bound on the budget any plan needs (:func:`model_floor`); the min budget is the
        smallest budget at which the all-swap plan runs in the evaluator (bisection from
        the floor, within 0.1% of P), equal to the floor when it runs there (exact)."""
        floor = model_floor(inst)
        allswap = Plan(np.where(np.asarray(inst.s) > 0, SWAP, KEEP).astype(np.int8),
                       inst.saved_names)
        if simulate(inst, allswap, floor).feasible:
            return floor, floor, True
        P = int(inst.P)
        hi = smallest_true(lambda m: simulate(inst, allswap, m).feasible, floor,
                           max(P, floor + 1), tol=max(1, int(math.ceil(1e-3 * P))))
        return hi, floor, False

    # ------------------------------------------------------------------ solve
    def solve(self, instance: Instance, budget_bytes: int, *, time_limit_s: float | None = None,
              seed: int | None = None) -> SolveResult:
        """Plan `instance` under budget M = `budget_bytes` (bytes).

        Returns:
            A SolveResult with the best plan the evaluator scored (``plan``), the
            model's optimum (``objective_s``, s; the relaxation's value, reported, never
            used to rank) and its proven lower bound (``lower_bound_s``, s: the best
            bound of the MILP, raised by the no-good loop). Status "optimal": the model
            was solved to proven optimality (so ``lower_bound_s`` is its optimum) or the
            plan is proven optimal; "feasible": the time limit stopped the MILP first
            (``lower_bound_s`` is its best bound); "infeasible": no plan fits
            (``info["min_budget_bytes"]``); "timeout": no plan found that runs and none
            proven impossible. ``info``: ``upper_bound_s`` (evaluator's step time of
            the plan), ``gap`` = (upper - lower) / lower, ``plan_proven_optimal``
            (gap <= rel_gap), ``backend``, ``settings``, ``tier``, ``solve_time_s``,
            ``model`` (size, options, build time), ``iterations`` and their ``log``.
        """
        t0 = time.perf_counter()
        inst = instance
        M = int(budget_bytes)
        seed = self.seed if seed is None else int(seed)
        tier = self.tier_for(inst)
        limit = time_limit_s if time_limit_s is not None else self.time_limit_s
        if limit is None:
            limit = 300.0 if tier == "aggregated" else 55.0
        deadline = t0 + float(limit)
        T_star = float(inst.ideal_time_s)
        settings = dict(self.params, tier=tier, time_limit_s=float(limit), seed=seed)
        info: dict[str, Any] = {"backend": self.backend, "tier": tier, "settings": settings}
        model_optimal = False

        def result(status: str, best: _Best, lower: float | None,
                   objective: float | None = None, **extra: Any) -> SolveResult:
            ub = best.step_s if best.dec is not None else None
            gap = None
            if ub is not None and lower is not None and lower > 0:
                gap = max(0.0, (ub - lower) / lower)
            info.update({"upper_bound_s": ub, "lower_bound_s": lower, "gap": gap,
                         "plan_proven_optimal": (gap is not None
                                                 and gap <= self.rel_gap * (1 + 1e-6)),
                         "model_optimal": model_optimal,
                         "solve_time_s": time.perf_counter() - t0,
                         "plan_source": best.source or None, **extra})
            plan = Plan(best.dec, inst.saved_names) if best.dec is not None else None
            return SolveResult(plan=plan, solver=self.name, params=self.params, status=status,
                               objective_s=objective, lower_bound_s=lower,
                               planning_time_s=time.perf_counter() - t0, seed=seed, info=info)

        # Trivial cases.
        if M >= int(inst.P):
            model_optimal = True
            best = _Best(T_star, Plan.keep_all(inst).decisions.copy(), "keep_all")
            return result("optimal", best, T_star, T_star, iterations=0,
                          reason="M >= P: keep-all runs at the ideal step time")
        floor = model_floor(inst)
        if M < floor:
            model_optimal = True
            mb, fl, exact = self.min_budget(inst)
            info.update({"min_budget_bytes": mb, "min_budget_lower_bytes": fl,
                         "min_budget_exact": exact})
            return result("infeasible", _Best(), None, iterations=0,
                          reason=f"M = {M} B is below the model floor {fl} B: no plan fits")

        best = _Best()
        seen: dict[bytes, float] = {}
        evals = 0

        def consider(dec: np.ndarray, source: str) -> float:
            nonlocal evals
            key = np.asarray(dec, dtype=np.int8).tobytes()
            if key in seen:
                return seen[key]
            ev = simulate(inst, Plan(dec, inst.saved_names), M)
            evals += 1
            val = float(ev.step_time_s) if ev.feasible else _INF
            seen[key] = val
            if val < best.step_s:
                best.step_s, best.dec, best.source = val, np.asarray(dec, np.int8).copy(), source
            return val

        if self.warm_start:
            try:
                from solvers.slackswap import SlackSwap
                ss = SlackSwap(min_budget_search=False).solve(inst, M)
                if ss.plan is not None:
                    consider(ss.plan.decisions, "slackswap")
            except Exception as e:  # noqa: BLE001 - a warm start must not break the solve
                info["warm_start_error"] = repr(e)
            if tier != "aggregated":
                dec = recompute_only_incumbent(inst, M, min(5.0, 0.1 * limit), seed)
                if dec is not None:
                    consider(dec, "cpsat_recompute_only")
        if best.dec is not None and best.step_s <= T_star * (1 + 1e-12):
            model_optimal = True
            return result("optimal", best, T_star, T_star, iterations=0,
                          reason="a warm-start plan runs at the ideal step time T*")

        # Model and backend.
        tb = time.perf_counter()
        model = build_model(inst, M, tier=tier, steps=self.steps, **self.model_options)
        info["model"] = dict(model.info, build_s=time.perf_counter() - tb)
        backend = _BACKEND_CLASSES[self.backend](model.lin, threads=self.threads, seed=seed,
                                                 rel_gap=self.rel_gap, verbose=self.verbose)
        to_s = model.t_unit
        taus = [j for j, cj in enumerate(model.lin.obj) if cj]
        cut: set[bytes] = set()

        def add_cut(dec: np.ndarray) -> None:
            key = np.asarray(dec, dtype=np.int8).tobytes()
            if key in cut:
                return
            cut.add(key)
            terms, lo = model.nogood(np.asarray(dec, dtype=np.int8))
            backend.add_row(terms, lo, _INF)

        # Objective cutoff: only plans whose model value beats the incumbent matter
        # (every other plan is at least as slow as the incumbent).
        def cutoff() -> float:
            return best.step_s / to_s / (1.0 + self.rel_gap) if best.dec is not None else _INF

        log: list[dict[str, Any]] = []
        lower = T_star
        objective: float | None = None
        if tier == "aggregated" or (tier == "exact"
                                    and model.info["nonzeros"] <= EXACT_LP_MAX_NONZEROS):
            # the LP relaxation first: a bound within the time limit even when the MILP
            # search is too large to finish (aggregated tier), and its rounding is a
            # candidate plan (exact tier; a large LP would only take the time the MILP,
            # whose root bound is as strong, needs)
            tl = time.perf_counter()
            share = 0.6 if tier == "aggregated" else 0.15
            lp, xlp = lp_relaxation(model.lin, max(1.0, share * (deadline - tl)))
            entry = {"iteration": "lp", "seconds": round(time.perf_counter() - tl, 4)}
            if lp is not None:
                entry["bound_s"] = lp * to_s
                lower = max(lower, lp * to_s * (1.0 - 1e-9))
                val = consider(model.decode(xlp), "lp_rounding")
                entry["simulated_s"] = None if val == _INF else val
            entry["lower_s"] = lower
            log.append(entry)

        cut_row = backend.add_row([(j, 1.0) for j in taus], -_INF, cutoff())
        if best.dec is not None:
            add_cut(best.dec)

        patience = self.patience if self.patience is not None else (
            None if tier == "full" else 5)
        stale = 0
        for it in range(self.max_iterations):
            before = (lower, best.step_s)
            left = deadline - time.perf_counter()
            if left <= 0.05:
                break
            backend.set_row_hi(cut_row, cutoff())
            hint = model.hint(best.dec) if (best.dec is not None and it == 0) else None
            # a margin for the backend's overrun past its limit and the decoding after it
            sol = backend.solve(max(0.05, 0.97 * left - 0.5), hint)
            entry: dict[str, Any] = {"iteration": it, "status": sol.status,
                                     "seconds": round(sol.seconds, 4)}
            if sol.message:
                entry["message"] = sol.message
            if sol.status == "infeasible":
                # no plan left whose model value beats the cutoff
                model_optimal = True
                if best.dec is not None:
                    lower = max(lower, min(best.step_s, cutoff() * to_s))
                    if objective is None:
                        objective = lower
                entry["lower_s"] = lower
                log.append(entry)
                if best.dec is None:
                    lower = None
                break
            b = sol.bound
            if sol.status == "optimal" and b is None and sol.objective is not None:
                b = sol.objective - self.rel_gap * abs(sol.objective)
            lower_it = max(T_star, b * to_s * (1.0 - 1e-9)) if b is not None else T_star
            if tier != "full" and sol.status != "optimal":
                lower_it = max(lower_it, lower)   # the LP bound holds for every plan
            if sol.status == "optimal":
                model_optimal = True
            if it == 0 and sol.objective is not None:
                objective = sol.objective * to_s
            if sol.x is not None:
                dec = model.decode(sol.x)
                entry["objective_s"] = sol.objective * to_s if sol.objective is not None else None
                val = consider(dec, f"milp:{it}")
                entry["simulated_s"] = None if val == _INF else val
                # the solver's other feasible solutions are plans too: score and cut them
                for xp in sol.pool:
                    dp = model.decode(xp)
                    consider(dp, f"milp:{it}:pool")
                    add_cut(dp)
                entry["pool"] = len(sol.pool)
                if (it == 0 and sol.status == "optimal" and tier != "aggregated"
                        and sol.objective is not None):
                    dl = self._least_traffic(inst, model, sol.objective, seed,
                                             min(deadline, time.perf_counter() + 0.25 * left))
                    if dl is not None:
                        v2 = consider(dl, "milp:least_traffic")
                        entry["least_traffic_s"] = None if v2 == _INF else v2
                        add_cut(dl)
                if (self.local_search and tier != "aggregated" and val < _INF
                        and val <= best.step_s):
                    self._local_search(inst, consider, best,
                                       min(deadline, time.perf_counter() + 0.2 * left))
                add_cut(dec)
            # every cut vector was simulated (>= the incumbent); the rest are >= lower_it
            lower = max(lower, min(best.step_s, lower_it))
            entry.update({"bound_s": lower_it, "lower_s": lower,
                          "upper_s": None if best.dec is None else best.step_s})
            log.append(entry)
            if best.dec is not None and (best.step_s - lower) <= self.rel_gap * lower * (1 + 1e-6):
                break
            if sol.status != "optimal":
                break          # the time limit stopped the backend: its bound is final
            stale = 0 if (lower, best.step_s) != before else stale + 1
            if patience is not None and stale >= patience:
                entry["stopped"] = f"{patience} solves without a better bound or plan"
                break
            if best.dec is not None:
                add_cut(best.dec)
        info.update({"iterations": len(log), "log": log, "evaluations": evals})
        if best.dec is None:
            if lower is None:
                mb, fl, exact = self.min_budget(inst)
                info.update({"min_budget_bytes": mb, "min_budget_lower_bytes": fl,
                             "min_budget_exact": exact})
                return result("infeasible", best, None, None,
                              reason="every plan the model admits was simulated and failed")
            return result("timeout", best, lower, objective)
        proven = (best.step_s - lower) <= self.rel_gap * lower * (1 + 1e-6)
        status = "optimal" if (model_optimal or proven) else "feasible"
        return result(status, best, lower, objective)

    def _least_traffic(self, inst: Instance, model: _Model, optimum: float, seed: int,
                       deadline: float) -> np.ndarray | None:
        """Among the model's optimal solutions, the decisions that move and recompute the
        least: a second solve (lexicographic) that keeps ``sum tau <= optimum (1 + 1e-6)``
        and minimizes copy time ``sum s_t / W`` over swaps plus rebuild time ``sum c_t``
        over recomputes. The model's optima tie often (copies it can hide cost nothing);
        the evaluator's runtime rules (admission, FIFO order, duplex slowdown) charge for
        traffic the model sees as free, so the plan with least traffic is the likeliest
        to run at the model's value. It only proposes a plan: bounds are unaffected."""
        left = deadline - time.perf_counter()
        if left < 0.5:
            return None
        lin = model.lin.copy()
        lin.obj = [0.0] * lin.n_vars
        taus = [j for j, cj in enumerate(model.lin.obj) if cj]
        lin.row([(j, 1.0) for j in taus], hi=optimum * (1.0 + 1e-6) + 1e-9)
        W = float(inst.link.bytes_per_s)
        s, c = np.asarray(inst.s, dtype=float), np.asarray(inst.c)
        for t in range(inst.n_saved):
            if model.xs[t] is not None:
                lin.obj[model.xs[t]] = s[t] / W / model.t_unit
            if model.xr[t] is not None and np.isfinite(c[t]):
                lin.obj[model.xr[t]] = c[t] / model.t_unit
        backend = _BACKEND_CLASSES[self.backend](lin, threads=self.threads, seed=seed,
                                                 rel_gap=self.rel_gap, verbose=self.verbose)
        sol = backend.solve(max(0.05, 0.97 * (deadline - time.perf_counter()) - 0.2), None)
        return model.decode(sol.x) if sol.x is not None else None

    def _local_search(self, inst: Instance, consider: Any, best: _Best,
                      deadline: float) -> None:
        """First-improvement 1-flip search around the incumbent (evaluator-scored)."""
        c = np.asarray(inst.c)
        improved = True
        while improved and time.perf_counter() < deadline:
            improved = False
            base = best.dec.copy()
            cur = best.step_s
            for t in range(inst.n_saved):
                for d in (KEEP, SWAP, RECOMP):
                    if d == base[t] or (d == RECOMP and not np.isfinite(c[t])):
                        continue
                    nd = base.copy()
                    nd[t] = d
                    if consider(nd, "local_search") < cur - 1e-15:
                        improved = True
                        break
                    if time.perf_counter() > deadline:
                        return
                if improved:
                    break


PARAMS = ("backend", "time_limit_s", "rel_gap", "threads", "warm_start", "tier", "steps",
          "max_iterations", "patience", "local_search", "seed", "verbose")
"""The solver's own hyperparameters (besides the model switches)."""
MODEL_OPTIONS = ("lagging", "binary_placement", "integral_copies", "fifo", "queue_order",
                 "admission", "integer_evictions")

__all__ = ["MILP", "build_model", "model_floor", "recompute_only_incumbent",
           "lp_relaxation", "BACKENDS", "TIERS", "MODEL_OPTIONS"]
