"""The time-indexed relaxation: the steps, the model floor and :func:`build_model` (the
backend-neutral linear model it builds, :class:`~slackopt.solvers.milp.linear.lin._Lin`, is in
solvers/milp/lin.py). The formulation and the argument why each relaxation is one are in
the package docstring (solvers/milp/__init__.py)."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from slackopt.instance import Instance
from slackopt.plan import KEEP, RECOMP, SWAP
from slackopt.simulate.rules import ADMISSION_LOOKAHEAD, copy_time
from slackopt.solvers.milp.linear.lin import _INF, _Lin

TIME_UNIT_S = 1e-6
"""Model time unit (s): step durations are in microseconds."""
MEM_UNITS_PER_P = 1e4
"""Model memory unit: P / 1e4 bytes."""


# =========================================================================== the model
@dataclass
class _Model:
    lin: _Lin
    xs: list[int | None]
    xr: list[int | None]
    groups: list[tuple[int, int]]
    tier: str
    t_unit: float = TIME_UNIT_S
    info: dict[str, Any] = field(default_factory=dict)
    vmap: dict[str, Any] = field(default_factory=dict)
    """The variable families by name (built by :meth:`_Builder.result`), read by
    :func:`slackopt.solvers.milp.model.point.point_from_trace`."""

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
    if inst.n_ops == 0:
        return 0
    prof = floor_profile(inst)
    if ops is not None:
        prof = prof[np.asarray(list(ops), dtype=np.int64)]
    return int(prof.max()) if prof.size else 0


def floor_profile(inst: Instance) -> np.ndarray:
    """Bytes every plan holds during each op (int64 [n_ops]): the static profile (the
    non-saved tensors and workspaces) plus every saved tensor from its production through
    its last forward reader and during each backward op that reads it (the all-swap
    footprint, contained in the keep and recomp ones). :func:`model_floor` is its
    maximum."""
    n, nf = inst.n_ops, inst.n_fwd
    delta = np.zeros(n + 1, dtype=np.int64)
    s = np.asarray(inst.s, dtype=np.int64)
    np.add.at(delta, inst.saved_prod_idx, s)
    np.add.at(delta, np.asarray(inst.saved_last_fwd_idx) + 1, -s)
    prof = np.asarray(inst.static_profile, dtype=np.int64) + np.cumsum(delta[:-1])
    for t in range(inst.n_saved):
        for r in inst.saved_reader_idx[t].tolist():
            if r >= nf:
                prof[r] += s[t]
    return prof


def _rebuild_gaps(prod: Sequence[int], rec_ok: Sequence[bool], deps: Sequence[Sequence[int]],
                  firstb: Sequence[int]) -> list[list[int]]:
    """Candidate rebuild positions: ``G[u]`` = the ops g (sorted) such that saved tensor u
    may be rebuilt in the gap before g, the evaluator's rule: u's first backward reader,
    or any gap where a recomp tensor whose recipe reads u is rebuilt (transitively).

    Args: ``prod[t]`` producer op index, ``rec_ok[t]`` rebuildable, ``deps[t]`` saved
    positions of the tensors whose recipes read t, ``firstb[t]`` first backward reader
    (op index), all over the saved positions."""
    n = len(prod)
    G: list[list[int] | None] = [None] * n
    # post-order over "v's recipe reads u" (iterative: recipe chains may be long). A
    # dependent may share u's producer (two outputs of one op), so no order of the
    # producers visits dependents first.
    for root in range(n):
        stack = [root]
        while stack:
            u = stack[-1]
            if G[u] is not None or not rec_ok[u]:
                stack.pop()
                continue
            todo = [v for v in deps[u] if rec_ok[v] and G[v] is None]
            if todo:
                stack.extend(todo)
                continue
            gs = {firstb[u]}
            for v in deps[u]:
                if rec_ok[v]:
                    gs.update(G[v])
            G[u] = sorted(g for g in gs if g <= firstb[u])
            stack.pop()
    return [g if g is not None else [] for g in G]


def _cum(D: dict[int, int], rng: tuple[int, int], K: int) -> int | None:
    """The variable of a cumulative family `D` (one variable per step of the range `rng`,
    each the share through the end of its step) at step `K`: None before the range (the
    share is 0 there), the last one after it (the share stays at its total)."""
    lo, hi = rng
    if hi < lo or K < lo:
        return None
    return D[min(K, hi)]


def _share(D: dict[int, int], rng: tuple[int, int], K: int,
           coef: float) -> list[tuple[int, float]]:
    """Terms of `coef` times the share of a cumulative family `D` (range `rng`) in step
    `K` alone: ``D[K] - D[K - 1]``, empty outside the range."""
    if not (rng[0] <= K <= rng[1]):
        return []
    out = [(D[K], coef)]
    if K - 1 >= rng[0]:
        out.append((D[K - 1], -coef))
    return out


class _Builder:
    """The state :func:`build_model` shares between its sections: the instance's data in
    model units, the resolved options, the :class:`~slackopt.solvers.milp.linear.lin._Lin` being
    built and the variable families added so far. Each section is one method; they add
    variables and rows in the order :func:`build_model` calls them, which fixes the
    model's variable and row order."""

    def __init__(self, inst: Instance, M: int | None, tier: str,
                 groups: list[tuple[int, int]], *, lagging: bool, binary_placement: bool,
                 integral_copies: bool, fifo: bool, admission: bool,
                 integer_evictions: bool, cumulative_placement: bool,
                 deadline: float | None) -> None:
        """The instance's data in model units (memory: P / 1e4 bytes, time: microseconds)
        and an empty model. Arguments as in :func:`build_model`, the options resolved
        and `groups` the steps (:func:`_groups`)."""
        self.inst, self.M, self.tier, self.groups = inst, M, tier, groups
        self.lagging, self.binary_placement = lagging, binary_placement
        self.integral_copies, self.fifo, self.admission = integral_copies, fifo, admission
        self.integer_evictions = integer_evictions
        self.cumulative_placement = cumulative_placement
        self.n, self.nf, self.nS = n, nf, nS = inst.n_ops, inst.n_fwd, inst.n_saved
        self.lin = _Lin(deadline)
        P = max(1, int(inst.P))
        self.mu = mu = P / MEM_UNITS_PER_P           # bytes per model memory unit
        self.Mu = M / mu if M is not None else None  # the budget (model units)
        tu = TIME_UNIT_S
        self.s = s = np.asarray(inst.s, dtype=np.int64)
        self.sm = s / mu
        c = np.asarray(inst.c, dtype=np.float64)
        self.rec_ok = rec_ok = np.isfinite(c)
        self.cu = np.where(rec_ok, c / tu, 0.0)
        self.dur = np.asarray(inst.durations_s, dtype=np.float64) / tu
        lk = inst.link
        w_d2h, w_h2d = float(lk.d2h_bytes_per_s), float(lk.h2d_bytes_per_s)
        lat = float(lk.copy_latency_s)
        # shortest copy times per direction, and the longest D2H (duplex rate throughout)
        self.w_d2h = np.where(s > 0, copy_time(s, w_d2h, lat) / tu, 0.0)
        self.w_h2d = np.where(s > 0, copy_time(s, w_h2d, lat) / tu, 0.0)
        self.dmax = np.where(s > 0, copy_time(s, w_d2h, lat, float(lk.duplex_factor)) / tu,
                             0.0)
        self.prod = np.asarray(inst.saved_prod_idx, dtype=np.int64).tolist()
        # ready[t]: the op after which t holds its final forward value (its producer, or its
        # last in-place mutation); the runtime queues a swap's D2H when that op ends
        # (slackopt.simulate._engine: Engine._end_task -> on_produced), so every D2H row is
        # stated from ready, not from prod. The D2H queue is FIFO in the order of the keys
        # qkey[t] = (ready[t], t): ops end in order, and the tensors ready at one op are
        # queued in saved-position order (_Static.ready lists them so).
        self.ready = ready = np.asarray(inst.saved_ready_idx, dtype=np.int64).tolist()
        self.qkey = [(ready[t], t) for t in range(nS)]
        self.lastf = np.asarray(inst.saved_last_fwd_idx, dtype=np.int64).tolist()
        self.firstb = np.asarray(inst.saved_first_bwd_idx, dtype=np.int64).tolist()
        self.lastb = np.asarray(inst.saved_last_bwd_idx, dtype=np.int64).tolist()
        self.rdb = [sorted(int(r) for r in inst.saved_reader_idx[t].tolist() if r >= nf)
                    for t in range(nS)]
        self.ins = ins = [tuple(int(i) for i in x) for x in inst.recipe_inputs]
        self.deps = deps = [[] for _ in range(nS)]
        for u in range(nS):
            for t in ins[u]:
                deps[t].append(u)
        self.static = np.asarray(inst.static_profile, dtype=np.int64)
        self.s_alloc = np.asarray(inst.static_alloc, dtype=np.int64)
        self.ws = np.asarray(inst.workspace, dtype=np.int64)
        self.extra = (np.asarray(inst.recipe_transient, dtype=np.int64)
                      + np.asarray(inst.recipe_workspace, dtype=np.int64))
        self.nG = nG = len(groups)
        self.Kof = Kof = [0] * n
        for K, (a, b) in enumerate(groups):
            for k in range(a, b + 1):
                Kof[k] = K
        self.single = [a == b for a, b in groups]
        self.has_bwd = has_bwd = 0 < nf < n
        self.KB0 = Kof[nf] if has_bwd else nG        # first backward step: starts at T_F

        # Auxiliary variables, by how a point of the model fixes them once the others are set
        # (solvers/milp/model_point.py): "def" = defined by one equality row (``*_def``),
        # "max" = the largest value its own upper rows allow (the FIFO chain P), "min" = the
        # smallest value its defining lower rows allow (om).
        self.aux: dict[str, list[int]] = {"def": [], "max": [], "min": []}
        # gamma_tK (exact tier): t's D2H ends in the gap before op a_K (the compute stream
        # waited for it); then all of t's D2H share in step K lies in that gap. Filled by
        # :meth:`gamma`, read by the memory rows at the start of an op.
        self.gm: list[dict[int, int]] = [{} for _ in range(nS)]
        # phi_tK: t's first H2D has started by the end of step K (R5, :meth:`admission_r5`)
        self.phi: list[dict[int, int]] = [{} for _ in range(nS)]

    # ------------------------------------------------------------------- the sections
    def rebuild_candidates(self) -> None:
        """Rebuild candidates: G[u] = ops g such that u may be rebuilt in the gap before g
        (:func:`_rebuild_gaps`); per saved tensor t, gmin[t] (its earliest possible
        backward read), n_reads[t] (its backward reads: readers and recipes that read it),
        multi[t] (read more than once, or by a rebuild before its first reader) and
        late_rebuild_read[t] (a rebuild reading t may come after t's last reader). No
        variables, no rows."""
        nS, rec_ok, prod, firstb, lastb = self.nS, self.rec_ok, self.prod, self.firstb, self.lastb
        rdb, deps = self.rdb, self.deps
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
        self.G, self.gmin, self.n_reads, self.multi = G, gmin, n_reads, multi
        self.late_rebuild_read = late_rebuild_read

    def decisions(self) -> None:
        """Decisions: per saved tensor t the binaries xs (swap), xr (recompute, if t has a
        recipe; at most one decision: ``one_decision``) and, with `lagging`, lag (t's D2H
        is still running at its first backward read; only a swapped tensor lags:
        ``lag_only_swap``)."""
        lagging, nS, lin, s, rec_ok = self.lagging, self.nS, self.lin, self.s, self.rec_ok
        has_bwd = self.has_bwd
        xs: list[int | None] = []
        xr: list[int | None] = []
        lag: list[int | None] = []
        for t in range(nS):
            xs.append(lin.var(0, 1, True, name=f"xs{t}"))
            xr.append(lin.var(0, 1, True, name=f"xr{t}") if rec_ok[t] else None)
            if xr[t] is not None:
                lin.row([(xs[t], 1.0), (xr[t], 1.0)], hi=1.0, name=f"one_decision[t={t}]")
            lag.append(lin.var(0, 1, True, name=f"lag{t}")
                       if (lagging and s[t] > 0 and has_bwd) else None)
            if lag[t] is not None:
                lin.row([(lag[t], 1.0), (xs[t], -1.0)], hi=0.0, name=f"lag_only_swap[t={t}]")
        self.xs, self.xr, self.lag = xs, xr, lag

    def placements(self) -> None:
        """Rebuild placements y[u][g]: a recomputed tensor u is rebuilt in exactly one of
        its candidate gaps (``y_sum``); a tensor with one candidate gap uses xr itself."""
        binary_placement, nS, lin, rec_ok = self.binary_placement, self.nS, self.lin, self.rec_ok
        G, xr = self.G, self.xr
        y: list[dict[int, int]] = [{} for _ in range(nS)]
        for u in range(nS):
            if not rec_ok[u]:
                continue
            if len(G[u]) == 1:
                y[u][G[u][0]] = xr[u]
            else:
                for g in G[u]:
                    y[u][g] = lin.var(0, 1, binary_placement, name=f"y{u}_{g}")
                lin.row([(y[u][g], 1.0) for g in G[u]] + [(xr[u], -1.0)], 0.0, 0.0,
                        name=f"y_sum[u={u}]")
        self.y = y

    def placement_prefix_sums(self) -> None:
        """Prefix sums of the placements, ``ycum[u][g] = sum of y[u][g'] for g' <= g`` (one
        equality row each): 'u rebuilt in a gap before an op <= k' is then one variable, not
        up to |G[u]| terms repeated in every memory and ordering row (BERT-Large: 10M
        nonzeros -> far fewer). A substitution: the relaxation's value is unchanged. On in
        the aggregated tier (``cumulative_placement``), where the chained recipes make G[u]
        long."""
        cumulative_placement, nS, lin, aux = self.cumulative_placement, self.nS, self.lin, self.aux
        G, y = self.G, self.y
        ycum: list[dict[int, int]] = [{} for _ in range(nS)]
        if cumulative_placement:
            for u in range(nS):
                if len(G[u]) <= 2:
                    continue
                prev = None
                for g in G[u]:
                    cv = lin.var(0.0, 1.0, name=f"yc{u}_{g}")
                    aux["def"].append(cv)
                    lin.row([(cv, 1.0), (y[u][g], -1.0)] + ([(prev, -1.0)] if prev is not None
                                                             else []), 0.0, 0.0,
                            name=f"ycum_def[u={u},g={g}]")
                    ycum[u][g] = prev = cv
        self.ycum = ycum

    def placement_order(self) -> None:
        """The order of the rebuilds: an input of a recipe is rebuilt no later than the
        tensor that reads it (``gap_input_first``), and a tensor is rebuilt before its own
        first backward reader only in a gap where a recomputed dependent is rebuilt
        (``gap_when_needed``): the evaluator's rule (:func:`_rebuild_gaps`)."""
        nS, lin, rec_ok, firstb, deps = self.nS, self.lin, self.rec_ok, self.firstb, self.deps
        G, xr, y = self.G, self.xr, self.y
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
                    lin.row(self.Y(u, g) + [(tv, -cf) for tv, cf in self.Y(v, g)] + [(xr[u], -1.0)],
                            lo=-1.0, name=f"gap_input_first[u={u},v={v},g={g}]")
            for g in G[u]:
                if g == firstb[u]:
                    continue
                # ... and no earlier than needed: a recomp dependent is rebuilt there
                sup = [(y[v][g], -1.0) for v in deps[u] if rec_ok[v] and g in y[v]]
                lin.row([(y[u][g], 1.0)] + sup, hi=0.0, name=f"gap_when_needed[u={u},g={g}]")

    def copies(self) -> None:
        """Copies (cumulative shares through the end of each step): per swapped tensor t
        and step K, the D2H shares F (not lagging) and L (lagging), the H2D shares H
        (re-fetches too), the eviction counts E and, with `integral_copies`, the copy
        events Dn (the D2H has ended) and Sg (H2D copies started), else Dn = F and Sg = H;
        each family is monotone in K, the D2H shares total xs (less a lag), and an
        eviction needs a finished D2H."""
        groups, integral_copies, fifo = self.groups, self.integral_copies, self.fifo
        integer_evictions, nS, lin, s = self.integer_evictions, self.nS, self.lin, self.s
        ready, qkey, firstb, lastb, Kof = self.ready, self.qkey, self.firstb, self.lastb, self.Kof
        has_bwd, KB0, gmin, n_reads = self.has_bwd, self.KB0, self.gmin, self.n_reads
        multi, xs, lag = self.multi, self.xs, self.lag
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
        # later_read[t]: the latest step of the first backward read of a copy queued after t
        # (the D2H queue order qkey; -1 if none)
        later_read = [-1] * nS
        if has_bwd:
            run = -1
            for t in sorted(range(nS), key=lambda t: qkey[t], reverse=True):
                later_read[t] = run
                if s[t] > 0:
                    run = max(run, Kof[firstb[t]])
        for t in range(nS):
            if s[t] <= 0 or not has_bwd:
                continue
            Kp = Kof[ready[t]]
            f_lo = Kp + 1 if ready[t] == groups[Kp][1] else Kp   # queued when t is ready
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
            if multi[t] or lag[t] is not None or fifo:
                # A lagging D2H already in flight when its tensor's last reader ends runs to
                # its end (only a queued one is dropped), into any later step. The rows that
                # need busy time from below (R2, R3: fifo) must see that share in the steps
                # where they may need it: up to the first backward read of a copy queued
                # after t (R2 and R3 of that copy; t's own rows end at its first read).
                # Without fifo no row reads L from below, and a share left out only loosens
                # the capacity rows.
                hi_l = max(f_hi, e_rng[t][1])
                if fifo:
                    hi_l = max(hi_l, later_read[t])
                l_rng[t] = (f_lo, hi_l)
                for K in range(l_rng[t][0], l_rng[t][1] + 1):
                    L[t][K] = lin.var(0, 1, name=f"L{t}_{K}")
            if integral_copies:
                for K in range(f_lo, f_hi + 1):
                    Dn[t][K] = lin.var(0, 1, True, name=f"D{t}_{K}")
                    lin.row([(Dn[t][K], 1.0), (F[t][K], -1.0)], hi=0.0,
                            name=f"D_le_F[t={t},K={K}]")
                lin.row([(Dn[t][f_hi], 1.0), (F[t][f_hi], -1.0)], 0.0, 0.0,
                        name=f"D_at_first_read[t={t}]")
                for K in range(h_rng[t][0], h_rng[t][1] + 1):
                    Sg[t][K] = lin.var(0, max(1, n_reads[t]), True, name=f"S{t}_{K}")
                    lin.row([(H[t][K], 1.0), (Sg[t][K], -1.0)], hi=0.0,
                            name=f"H_le_S[t={t},K={K}]")
            else:
                Dn[t], Sg[t] = F[t], H[t]
            mono = [("F", F[t], f_rng[t]), ("L", L[t], l_rng[t]), ("H", H[t], h_rng[t]),
                    ("E", E[t], e_rng[t])]
            if integral_copies:
                mono += [("D", Dn[t], f_rng[t]), ("S", Sg[t], h_rng[t])]
            for nm, D, (lo, hi) in mono:
                for K in range(lo + 1, hi + 1):
                    lin.row([(D[K], 1.0), (D[K - 1], -1.0)], lo=0.0,
                            name=f"monotone_{nm}[t={t},K={K}]")
            l_tot = [(L[t][l_rng[t][1]], 1.0)] if L[t] else []
            if lag[t] is not None:
                lin.row([(F[t][f_hi], 1.0), (xs[t], -1.0), (lag[t], 1.0)], 0.0, 0.0,
                        name=f"d2h_total_lag[t={t}]")
                if l_tot:
                    lin.row(l_tot + [(lag[t], -1.0)], hi=0.0, name=f"L_total[t={t}]")
            else:
                lin.row([(F[t][f_hi], 1.0), (xs[t], -1.0)] + l_tot, hi=0.0,
                        name=f"d2h_total[t={t}]")
            for K in range(e_rng[t][0], e_rng[t][1] + 1):
                # an eviction needs a finished D2H: E <= (reads - 1) * (F + L)
                r = max(1, n_reads[t] - 1)
                lin.row([(E[t][K], 1.0), (_cum(F[t], f_rng[t], K), -r),
                         (_cum(L[t], l_rng[t], K), -r)], hi=0.0,
                        name=f"evict_after_d2h[t={t},K={K}]")
        self.F, self.L, self.H, self.E, self.Dn, self.Sg, self.f_rng = F, L, H, E, Dn, Sg, f_rng
        self.l_rng, self.h_rng, self.e_rng = l_rng, h_rng, e_rng

    def copy_order(self) -> None:
        """The order of the copies of one tensor: an H2D starts after the D2H ended or
        after an eviction, the residency stays >= 0, and every backward read (a reader,
        or a rebuild whose recipe reads t) finds t fetched."""
        nS, lin, s, rec_ok, firstb = self.nS, self.lin, self.s, self.rec_ok, self.firstb
        rdb, deps, Kof, single, has_bwd = self.rdb, self.deps, self.Kof, self.single, self.has_bwd
        G, xs, y, h_rng, e_rng = self.G, self.xs, self.y, self.h_rng, self.e_rng
        for t in range(nS):
            if s[t] <= 0 or not has_bwd:
                continue
            for K in range(h_rng[t][0], h_rng[t][1] + 1):
                # an H2D starts after the D2H ended, or after an eviction: S <= D + E
                lin.row([(self.Sv(t, K), 1.0), (self.Dv(t, K), -1.0), (self.Ev(t, K), -1.0)],
                        hi=0.0, name=f"h2d_after_d2h[t={t},K={K}]")
            for K in range(e_rng[t][0], e_rng[t][1] + 1):
                # residency >= 0: E <= xs - D + S
                lin.row([(self.Ev(t, K), 1.0), (xs[t], -1.0), (self.Dv(t, K), 1.0),
                         (self.Sv(t, K), -1.0)], hi=0.0, name=f"evict_resident[t={t},K={K}]")
            # a backward reader r: fetched (after the D2H, and after each earlier eviction)
            for r in rdb[t]:
                K = Kof[r]
                Ep = self.Ev(t, K) if single[K] else self.Ev(t, K - 1)
                lin.row([(self.Hv(t, K), 1.0), (self.Dv(t, K), -1.0), (Ep, -1.0)], lo=0.0,
                        name=f"reader_fetched[t={t},r={r}]")
            # a rebuild that reads swapped t before t's first backward reader
            for u in deps[t]:
                if not rec_ok[u]:
                    continue
                for g in G[u]:
                    if g >= firstb[t]:
                        continue
                    K = Kof[g]
                    lin.row([(self.Hv(t, K), 1.0), (self.Dv(t, K), -1.0), (self.Ev(t, K - 1), -1.0),
                             (y[u][g], -1.0)], lo=-1.0,
                            name=f"rebuild_read_fetched[t={t},u={u},g={g}]")

    def fifo_r1(self) -> None:
        """FIFO D2H queue (R1): a D2H moves in step K only if every earlier-queued swapped
        tensor's D2H has ended by the end of K (chain P_tK over the queue order qkey =
        (ready, saved position), the runtime's; a non-lagging D2H has ended when Dn = 1, a
        lagging one when L = 1). Zero-byte tensors are never queued."""
        fifo, nS, lin, s, qkey = self.fifo, self.nS, self.lin, self.s, self.qkey
        has_bwd, aux, xs, lag, F = self.has_bwd, self.aux, self.xs, self.lag, self.F
        f_rng, l_rng = self.f_rng, self.l_rng
        if fifo and has_bwd:
            order_t = sorted((t for t in range(nS) if s[t] > 0), key=lambda t: qkey[t])
            prev_P: dict[int, int] = {}
            for i, t in enumerate(order_t):
                if i > 0:
                    for K in range(f_rng[t][0], max(f_rng[t][1], l_rng[t][1]) + 1):
                        rowt = [(_cum(F[t], f_rng[t], K), 1.0), (self.Lv(t, K), 1.0)]
                        Pk = prev_P.get(K)
                        lin.row(rowt + ([(Pk, -1.0)] if Pk is not None else []), hi=0.0,
                                name=f"fifo_R1[t={t},K={K}]")
                if i == len(order_t) - 1:
                    break
                nxt = order_t[i + 1:]
                k_lo = min(f_rng[t2][0] for t2 in nxt)
                k_hi = max(max(f_rng[t2][1], l_rng[t2][1]) for t2 in nxt)
                cur: dict[int, int] = {}
                for K in range(k_lo, k_hi + 1):
                    Pv = lin.var(0, 1, name=f"P{t}_{K}")
                    aux["max"].append(Pv)
                    # P <= 1 - xs + D (+ 1 when t lags: its D2H may be dropped, then it
                    # never ends and does not hold up later copies)
                    row = [(Pv, 1.0), (self.Dv(t, K), -1.0), (xs[t], 1.0)]
                    row += [(lag[t], -1.0)] if lag[t] is not None else [(self.Lv(t, K), -1.0)]
                    lin.row(row, hi=1.0, name=f"fifo_P_ended[t={t},K={K}]")
                    if i > 0:
                        lin.row([(Pv, 1.0)] + ([(prev_P[K], -1.0)] if K in prev_P else []),
                                hi=0.0, name=f"fifo_P_chain[t={t},K={K}]")
                    cur[K] = Pv
                prev_P = cur

    def work_conserving_r2(self) -> None:
        """The D2H engine is work-conserving (R2): while a swapped tensor's D2H is queued or
        running through a whole step (ready, i.e. queued, before the step, not ended by its
        end), the engine is busy the whole step, so it works >= the step's op time in it."""
        groups, fifo, nS, lin, s, dur = self.groups, self.fifo, self.nS, self.lin, self.s, self.dur
        ready, has_bwd, aux, xs, lag = self.ready, self.has_bwd, self.aux, self.xs, self.lag
        f_rng = self.f_rng
        if fifo and has_bwd:
            Bv: dict[int, int] = {}
            for t in range(nS):
                if s[t] <= 0:
                    continue
                for K in range(f_rng[t][0], f_rng[t][1] + 1):
                    a, b = groups[K]
                    if ready[t] >= a:
                        continue
                    if K not in Bv:
                        terms = []
                        for t2 in range(nS):
                            if s[t2] > 0:
                                terms += self.d2h_busy(t2, K)
                        Bv[K] = lin.var(0, _INF, name=f"B{K}")
                        aux["def"].append(Bv[K])
                        lin.row([(Bv[K], 1.0)] + [(v, -cf) for v, cf in terms], 0.0, 0.0,
                                name=f"busy_B_def[K={K}]")
                    dK = float(dur[a:b + 1].sum())
                    row = [(Bv[K], 1.0), (xs[t], -dK), (self.Dv(t, K), dK)]
                    if lag[t] is not None:
                        row.append((lag[t], dK))
                    lin.row(row, lo=0.0, name=f"busy_R2[t={t},K={K}]")

    def lagging_r3(self) -> None:
        """A lagging D2H (R3) keeps the D2H engine busy from the end of its ready op (where
        it is queued) to its first backward read, with copies queued no later (FIFO): in
        each step before that read those copies work >= the step's op time. The first read
        is t's first backward reader or an earlier rebuild that reads it (if one is placed
        there: the y terms). The rows of one step share the busy terms of every copy ready
        no later than t (a superset of those queued no later: the tensors ready at the same
        op but queued after t are counted too, which only admits more)."""
        groups, nS, lin, s, dur = self.groups, self.nS, self.lin, self.s, self.dur
        ready, firstb, Kof, lag = self.ready, self.firstb, self.Kof, self.lag
        busy: dict[tuple[int, int], list[int]] = {}
        for t in range(nS):
            if lag[t] is None:
                continue
            for K in range(Kof[ready[t]] + 1, Kof[firstb[t]]):
                busy.setdefault((K, ready[t]), []).append(t)
        for (K, p), lagged in sorted(busy.items()):
            terms = []
            for t2 in range(nS):
                if s[t2] > 0 and ready[t2] <= p:
                    terms += self.d2h_busy(t2, K)
            a, b = groups[K]
            dK = float(dur[a:b + 1].sum())
            for t in lagged:
                lin.row(terms + [(lag[t], -dK)] + [(v, dK) for v, _ in self.read_by(t, K)], lo=0.0,
                        name=f"lag_busy_R3[t={t},K={K}]")

    def step_durations(self) -> None:
        """Step durations tau_K (the objective): at least the step's op time plus its
        rebuilds, and at least the time its copies need on each engine, with the copies'
        ordering against the ops of the step (a D2H starts when it is queued; an H2D ends
        before its reader, or before a rebuild that reads it, or before the last read of
        its tensor in the step)."""
        groups, nS, lin, s, cu, dur = self.groups, self.nS, self.lin, self.s, self.cu, self.dur
        wd, wh = self.w_d2h, self.w_h2d
        ready, firstb, lastb, rdb = self.ready, self.firstb, self.lastb, self.rdb
        ins, nG, Kof, single, G = self.ins, self.nG, self.Kof, self.single, self.G
        late_rebuild_read, y, H, f_rng = self.late_rebuild_read, self.y, self.H, self.f_rng
        l_rng, h_rng = self.l_rng, self.h_rng
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
                lin.row([(tau[K], 1.0)] + [(y[u][g], -cu[u]) for u, g in reb_in[K]], lo=base,
                        name=f"tau_rebuilds[K={K}]")
            if d2h_in[K]:
                terms = [(tau[K], 1.0)]
                for t in d2h_in[K]:
                    terms += self.d2h_share(t, K, -wd[t])
                lin.row(terms, lo=0.0, name=f"d2h_capacity[K={K}]")
                # a D2H starts when it is queued, at the end of its ready op: it overlaps
                # only the rest of step K
                for p in sorted({ready[t] for t in d2h_in[K] if a <= ready[t] < b}):
                    terms = [(tau[K], 1.0)]
                    for t in d2h_in[K]:
                        if p <= ready[t] < b:
                            terms += self.d2h_share(t, K, -wd[t])
                    lin.row(terms, lo=float(dur[a:p + 1].sum()),
                            name=f"d2h_after_ready[K={K},p={p}]")
            if h2d_in[K]:
                terms = [(tau[K], 1.0)]
                for t in h2d_in[K]:
                    terms += _share(H[t], h_rng[t], K, -wh[t])
                lin.row(terms, lo=0.0, name=f"h2d_capacity[K={K}]")
                if single[K]:
                    # an H2D for a reader of op a ends before op a starts
                    rd = [t for t in h2d_in[K] if a in rdb[t]]
                    if rd:
                        terms = [(tau[K], 1.0)]
                        for t in rd:
                            terms += _share(H[t], h_rng[t], K, -wh[t])
                        lin.row(terms, lo=float(dur[a]), name=f"h2d_before_reader[K={K}]")
                    # ... and one for a rebuild in the gap before op a ends before the rebuild
                    # starts: w h <= tau - dur - c_u y + w (1 - y)
                    for u, g in reb_in[K]:
                        for t in ins[u]:
                            if s[t] <= 0 or g > firstb[t] or not (h_rng[t][0] <= K <= h_rng[t][1]):
                                continue
                            terms = [(tau[K], 1.0), (y[u][g], -cu[u] - wh[t])]
                            terms += _share(H[t], h_rng[t], K, -wh[t])
                            lin.row(terms, lo=float(dur[a]) - wh[t],
                                    name=f"h2d_before_rebuild_R6[t={t},u={u},g={g}]")
                else:
                    # H2D shares in K for tensors last read inside K end before that read
                    for k in sorted({lastb[t] for t in h2d_in[K]
                                     if a <= lastb[t] <= b and not late_rebuild_read[t]}):
                        terms = [(tau[K], 1.0)]
                        for t in h2d_in[K]:
                            if a <= lastb[t] <= k and not late_rebuild_read[t]:
                                terms += _share(H[t], h_rng[t], K, -wh[t])
                        lin.row(terms, lo=float(dur[k:b + 1].sum()),
                                name=f"h2d_before_last_read[K={K},k={k}]")
        self.tau = tau

    def gamma(self) -> None:
        """gamma: a D2H that ends in the gap before op a_K (step K a single op), with
        `integral_copies`: gamma_tK (the binary gm[t][K]) is at most the D2H event of step
        K alone, and then t's whole D2H share in step K lies in the gap before op a_K (the
        compute stream waited for it)."""
        groups, integral_copies, nS, lin = self.groups, self.integral_copies, self.nS, self.lin
        s, dur, w, lastf, Kof, single = (self.s, self.dur, self.w_d2h, self.lastf, self.Kof,
                                         self.single)
        has_bwd, gm, F, f_rng, tau = self.has_bwd, self.gm, self.F, self.f_rng, self.tau
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
                    lin.row([(gv, 1.0), (self.Dv(t, K), -1.0), (self.Dv(t, K - 1), 1.0)], hi=0.0,
                            name=f"gamma_ends[t={t},K={K}]")
                    a = groups[K][0]
                    lin.row([(tau[K], 1.0), (gv, -w[t])] + _share(F[t], f_rng[t], K, -w[t]),
                            lo=float(dur[a]) - w[t], name=f"gamma_in_gap[t={t},K={K}]")

    def memory_at_ops(self) -> None:
        """Memory at every op (with a budget): at the end of each op of a single-op step
        (all its allocations live, H2D buffers started during it counted) and, with
        `integral_copies`, at its start (D2H copies that ended in the gap before it, gamma,
        already freed; H2D copies started in that gap not counted; evictions in the gap
        counted); in a multi-op step the tensors no op of the step touches are summed once
        (Z) and each op's row adds the rest."""
        if self.M is None or self.n == 0:
            return
        groups, integral_copies, n, nf = self.groups, self.integral_copies, self.n, self.nf
        nS, lin, mu, Mu, s, sm = self.nS, self.lin, self.mu, self.Mu, self.s, self.sm
        prod, lastf, lastb, rdb, static = self.prod, self.lastf, self.lastb, self.rdb, self.static
        single, aux, G, xr = self.single, self.aux, self.G, self.xr
        by_prod: list[list[int]] = [[] for _ in range(n)]
        for t in range(nS):
            by_prod[prod[t]].append(t)
        alive: list[int] = []
        for K, (a, b) in enumerate(groups):
            for k in range(a, b + 1):
                alive.extend(by_prod[k])
            if single[K]:
                const = float(static[a]) / mu
                terms: list[tuple[int, float]] = []
                for t in alive:
                    cst, tm = self.mem_expr(t, a, *self.mem_at(a))
                    const += cst
                    terms += tm
                lin.row(terms, hi=Mu - const, name=f"mem_op_end[k={a}]")
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
                            terms += [(v, st) for v, _ in self.Y(t, a)]
                        if s[t] <= 0 or (a >= nf and a in rdb[t]):
                            continue
                        terms += [(self.Dv(t, K - 1), -st), (self.gam(t, K), -st)]
                        if a >= nf:
                            terms += [(self.Sv(t, K - 1), st), (self.Ev(t, K), -st)]
                    lin.row(terms, hi=Mu - const, name=f"mem_op_start[k={a}]")
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
                cst, tm = self.mem_expr(t, b if not bwd else a, K, K - 1, K)
                zc += cst
                zterms += tm
            Z = lin.var(-_INF, _INF, name=f"Z{K}") if zterms else None
            if Z is not None:
                aux["def"].append(Z)
            if Z is not None:
                lin.row([(Z, 1.0)] + [(v, -cf) for v, cf in zterms], 0.0, 0.0,
                        name=f"mem_passive_def[K={K}]")
            for k in range(a, b + 1):
                const = float(static[k]) / mu + zc
                terms = [(Z, 1.0)] if Z is not None else []
                for t in active:
                    cst, tm = self.mem_expr(t, k, *self.mem_at(k))
                    const += cst
                    terms += tm
                lin.row(terms, hi=Mu - const, name=f"mem_op_end[k={k}]")

    def admission_r5(self) -> None:
        """H2D admission (R5, with a budget): an H2D the compute stream is not waiting for
        starts only if used + its size + the next three tasks' allocations fit in M; used >=
        R_K, the bytes alive throughout step K. phi_tK = "t's first H2D has started by the
        end of step K" (= S for a tensor read once, fetched once; a binary otherwise), so
        phi_K - phi_(K-1) = 1 exactly when it starts in step K. The compute stream waits
        for t only before a task that reads t: its backward readers (those steps are
        skipped) and rebuilds whose recipe reads t (the row is relaxed by their y)."""
        if self.M is None or self.n == 0:
            return
        groups, integral_copies, admission = self.groups, self.integral_copies, self.admission
        n, nS, lin, mu, Mu, s, sm = self.n, self.nS, self.lin, self.mu, self.Mu, self.s, self.sm
        rec_ok, prod, lastb, rdb, ins = self.rec_ok, self.prod, self.lastb, self.rdb, self.ins
        static, s_alloc, ws, extra, nG = self.static, self.s_alloc, self.ws, self.extra, self.nG
        Kof, single, has_bwd, KB0, aux = self.Kof, self.single, self.has_bwd, self.KB0, self.aux
        phi, G, n_reads, xs, xr, y = self.phi, self.G, self.n_reads, self.xs, self.xr, self.y
        Sg, h_rng = self.Sg, self.h_rng
        if admission and integral_copies and has_bwd:
            op_alloc = (s_alloc + ws).astype(np.float64)
            y_at: dict[int, list[tuple[int, int]]] = {}
            for u in range(nS):
                for g in G[u]:
                    y_at.setdefault(g, []).append((u, y[u][g]))
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
                    lin.row([(pv, 1.0), (Sg[t][K], -1.0)], hi=0.0,
                            name=f"phi_le_S[t={t},K={K}]")
                    lin.row([(pv, cap), (Sg[t][K], -1.0)], lo=0.0,
                            name=f"phi_ge_S[t={t},K={K}]")
                    if K > lo:
                        lin.row([(pv, 1.0), (phi[t][K - 1], -1.0)], lo=0.0,
                                name=f"monotone_phi[t={t},K={K}]")
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
                    terms += [(v, st) for v, _ in self.Y(t, k - 1)]
                    if s[t] > 0:
                        terms += [(xs[t], st), (self.Dv(t, K), -st), (self.Sv(t, K - 1), st),
                                  (self.Ev(t, K), -st)]
                R = lin.var(-_INF, _INF, name=f"R{k}")
                aux["def"].append(R)
                lin.row([(R, 1.0)] + [(v, -cf) for v, cf in terms], 0.0, 0.0,
                        name=f"admission_R_def[k={k}]")
                # Starting in the gap before op k: used >= R and the next three tasks are
                # ops k, k+1, k+2 unless rebuilds come first; while op k runs: used >= R +
                # op k's allocation and the next tasks start at op k+1. Both are >=
                # alloc(k .. k+2) - sum over rebuilds u placed in gaps k .. k+3 of
                # (Dmax - alloc(u))+: a rebuild allocates its tensor, transient bytes and
                # workspace and displaces at most one op (Dmax = largest op allocation).
                L = ADMISSION_LOOKAHEAD
                base3 = float(op_alloc[k:k + L].sum())
                dmx = float(op_alloc[k:k + L + 1].max())
                ydisp = [(yv, (dmx - float(s[u] + extra[u])) / mu)
                         for g in range(k, min(n, k + L + 1)) for u, yv in y_at.get(g, [])
                         if dmx > float(s[u] + extra[u])]
                for t in cand:
                    coef = (s[t] + base3) / mu
                    row = [(R, 1.0), (phi[t][K], coef)]
                    if K - 1 >= h_rng[t][0]:
                        row.append((phi[t][K - 1], -coef))
                    row += [(yv, -coef) for yv in reb_reads.get((t, K), [])]
                    row += [(yv, -cf) for yv, cf in ydisp]
                    lin.row(row, hi=Mu - const, name=f"admission_R5[t={t},k={k}]")

    def rebuild_instants(self) -> None:
        """Memory at rebuild instants (with a budget): Q[g] = saved bytes alive across gap g
        (kept, rebuilt earlier); a rebuild in gap g holds Q[g], its tensor, transient bytes
        and workspace, and each input of its recipe not alive across g (om)."""
        if self.M is None or self.n == 0:
            return
        n, nS, lin, mu, Mu, s, sm = self.n, self.nS, self.lin, self.mu, self.Mu, self.s, self.sm
        lastb, ins, static, s_alloc, ws = self.lastb, self.ins, self.static, self.s_alloc, self.ws
        extra, aux, G, xs, xr, y = self.extra, self.aux, self.G, self.xs, self.xr, self.y
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
                        terms += [(v, sm[t]) for v, _ in self.Y(t, g - 1)]
                    elif lastb[t] >= g2:
                        # placements of t in [g, g2 - 1] leave Q going backwards in time
                        terms += [(y[t][gg], -sm[t]) for gg in G[t] if g <= gg < g2]
                q = lin.var(-_INF, _INF, name=f"Q{g}")
                aux["def"].append(q)
                lin.row([(q, 1.0)] + [(v, -cf) for v, cf in terms], 0.0, 0.0,
                        name=f"rebuild_Q_def[g={g}]")
                Qc[g], Qv[g] = cst, q
                nxt_c, nxt_v = cst, q
            for u in range(nS):
                for g in G[u]:
                    gap_static = float(static[g] - s_alloc[g] - ws[g]) / mu
                    terms = [(Qv[g], 1.0), (y[u][g], (s[u] + extra[u]) / mu)]
                    for t in ins[u]:
                        om = lin.var(0.0, 1.0, name=f"om{u}_{g}_{t}")
                        aux["min"].append(om)
                        # om >= y_ug - (keep_t + rebuilt before g)  [if t alive across g]
                        rowt = [(om, 1.0), (y[u][g], -1.0)]
                        lo = 0.0
                        if lastb[t] >= g:
                            rowt += [(xs[t], -1.0), (xr[t], -1.0)]
                            rowt += [(v, 1.0) for v, _ in self.Y(t, g - 1)]
                            lo = -1.0
                        lin.row(rowt, lo=lo, name=f"rebuild_input_def[u={u},g={g},t={t}]")
                        terms.append((om, sm[t]))
                    lin.row(terms, hi=Mu - gap_static - Qc[g],
                            name=f"mem_rebuild_start[u={u},g={g}]")

    def result(self) -> _Model:
        """The model: the built :class:`~slackopt.solvers.milp.linear.lin._Lin`, its decision
        variables, its statistics and options, and the variable families (``vmap``)."""
        tier, groups, lagging = self.tier, self.groups, self.lagging
        binary_placement, integral_copies = self.binary_placement, self.integral_copies
        fifo, admission, integer_evictions = self.fifo, self.admission, self.integer_evictions
        lin, aux, gm, phi, xs, xr = self.lin, self.aux, self.gm, self.phi, self.xs, self.xr
        lag, y, F, L, H, E, Dn = self.lag, self.y, self.F, self.L, self.H, self.E, self.Dn
        Sg, tau = self.Sg, self.tau
        info: dict[str, Any] = {"steps": len(groups)}
        info.update(lin.stats())
        info["options"] = {"lagging": lagging, "binary_placement": binary_placement,
                           "integral_copies": integral_copies, "fifo": fifo,
                           "admission": admission,
                           "integer_evictions": integer_evictions}
        # The variable families, for mapping a simulated trace to a point of the model
        # (solvers/milp/model_point.py): per saved position t, dicts step K -> variable.
        vmap = {"xs": xs, "xr": xr, "lag": lag, "y": y, "F": F, "L": L, "H": H, "E": E,
                "Dn": Dn, "Sg": Sg, "gamma": gm, "phi": phi, "tau": tau, "aux": aux,
                "integral_copies": integral_copies}
        return _Model(lin=lin, xs=xs, xr=xr, groups=groups, tier=tier,
                      info=info, vmap=vmap)

    # ------------------------------------------------ terms read by several sections
    def Y(self, u: int, k: int) -> list[tuple[int, float]]:
        """Terms of 'u rebuilt in a gap before an op <= k'."""
        ycum, G, y = self.ycum, self.G, self.y
        if ycum[u]:
            gs = G[u]
            i = bisect.bisect_right(gs, k) - 1
            return [(ycum[u][gs[i]], 1.0)] if i >= 0 else []
        return [(y[u][g], 1.0) for g in G[u] if g <= k]

    def Hv(self, t: int, K: int) -> int | None:
        """t's cumulative H2D share through step K (None: 0)."""
        return _cum(self.H[t], self.h_rng[t], K)

    def Ev(self, t: int, K: int) -> int | None:
        """t's evictions through step K (None: 0)."""
        return _cum(self.E[t], self.e_rng[t], K)

    def Dv(self, t: int, K: int) -> int | None:
        """t's D2H ended by the end of step K (the event, or the share; None: 0)."""
        return _cum(self.Dn[t], self.f_rng[t], K)

    def Sv(self, t: int, K: int) -> int | None:
        """t's H2D copies started through step K (the events, or the share; None: 0)."""
        return _cum(self.Sg[t], self.h_rng[t], K)

    def Lv(self, t: int, K: int) -> int | None:
        """t's lagging D2H share through step K (None: 0)."""
        return _cum(self.L[t], self.l_rng[t], K)

    def gam(self, t: int, K: int) -> int | None:
        """gamma_tK (:meth:`gamma`), None where there is none."""
        return self.gm[t].get(K)

    def d2h_share(self, t: int, K: int, coef: float) -> list[tuple[int, float]]:
        """Terms of `coef` times t's D2H share (lagging or not) in step K alone."""
        return (_share(self.F[t], self.f_rng[t], K, coef)
                + _share(self.L[t], self.l_rng[t], K, coef))

    def d2h_busy(self, t: int, K: int) -> list[tuple[int, float]]:
        """Busy time of the D2H engine in step K, from above: share x the copy's duration,
        which is at most dmax (latency + s / (duplex W_d2h)) in every step. A copy that runs
        wholly in the forward pass lasts w, but one that straddles T_F runs at the duplex
        rate after it, and its share in a forward step is overlap / (its whole duration):
        w would undercount that overlap (case milp-bound-above-optimum,
        tests/test_milp_bounds.py)."""
        return self.d2h_share(t, K, float(self.dmax[t]))

    def read_by(self, t: int, K: int) -> list[tuple[int, float]]:
        """Rebuild reads of t placed in a gap of step <= K (they end the window in which t
        has not been read yet)."""
        y, G, Kof = self.y, self.G, self.Kof
        return [(y[u][g], 1.0) for u in self.deps[t] if self.rec_ok[u] for g in G[u]
                if Kof[g] <= K]

    def mem_expr(self, t: int, k: int, Kd: int, Ks: int,
                 Ke: int) -> tuple[float, list]:
        """(constant, terms) of t's memory at the end of op k (model units); the
        D2H-ended, H2D-started and eviction counts are read at steps Kd, Ks, Ke."""
        sm, prod, lastf, lastb, xr = self.sm, self.prod, self.lastf, self.lastb, self.xr
        st = sm[t]
        if k < prod[t]:
            return 0.0, []      # produced later in the same (multi-op) step
        if k <= lastf[t]:
            return st, []
        if k < self.nf:
            return st, [(xr[t], -st), (self.Dv(t, Kd), -st)]
        if k > lastb[t]:
            return 0.0, []
        terms = [(xr[t], -st)] + [(v, st) for v, _ in self.Y(t, k)]
        if k in self.rdb[t] or self.s[t] <= 0:
            return st, terms
        terms += [(self.Dv(t, Kd), -st), (self.Sv(t, Ks), st), (self.Ev(t, Ke), -st)]
        return st, terms

    def mem_at(self, k: int) -> tuple[int, int, int]:
        """The steps (Kd, Ks, Ke) at which :meth:`mem_expr` reads the counts at the end of
        op k: its own step, the H2D starts of the step before unless k ends its step."""
        K = self.Kof[k]
        return (K, K, K) if k == self.groups[K][1] else (K, K - 1, K)


def build_model(inst: Instance, M: int | None, *, tier: str = "full",
                steps: str | int | None = None, lagging: bool | None = None,
                binary_placement: bool | None = None,
                integral_copies: bool | None = None, fifo: bool | None = None,
                admission: bool | None = None,
                integer_evictions: bool | None = None,
                cumulative_placement: bool | None = None,
                deadline: float | None = None) -> _Model:
    """Build the time-indexed relaxation of ``inst`` at budget ``M`` (bytes).

    Step K covers ops ``a_K .. b_K`` and the interval ``[E(a_K - 1), E(b_K))`` of the
    evaluated run (E = end of an op; the gap before an op, with its stalls and the
    rebuilds inserted before it, belongs to the op's step). Memory is checked at the end
    of every op (all its allocations live, H2D buffers started during it counted) and, in
    the exact tier, at its start (D2H copies that ended while it waited already freed).

    The model is built by the sections of :class:`_Builder`, called in this order (which
    fixes the order of the variables and rows): :meth:`~_Builder.rebuild_candidates`,
    :meth:`~_Builder.decisions`, :meth:`~_Builder.placements`,
    :meth:`~_Builder.placement_prefix_sums`, :meth:`~_Builder.placement_order`,
    :meth:`~_Builder.copies`, :meth:`~_Builder.copy_order`, :meth:`~_Builder.fifo_r1`,
    :meth:`~_Builder.work_conserving_r2`, :meth:`~_Builder.lagging_r3`,
    :meth:`~_Builder.step_durations`, :meth:`~_Builder.gamma`,
    :meth:`~_Builder.memory_at_ops`, :meth:`~_Builder.admission_r5`,
    :meth:`~_Builder.rebuild_instants`; each section's docstring gives its rows and why
    they are valid.

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
        fifo: D2H copies run one at a time in the runtime's queue order (ready op, then
            saved position), the engine is work-conserving, a D2H lags only behind
            copies queued no later (R1-R3); turns `lagging` on.
        admission: the H2D admission rule (used + size + next three tasks' allocations).
        integer_evictions: eviction counts are integers (a tensor is evicted whole).
        cumulative_placement: state "rebuilt before op k" through prefix-sum variables
            of the placements (same relaxation, far fewer nonzeros; default on in the
            aggregated tier only).
        deadline: perf_counter time after which building stops with
            :class:`~slackopt.solvers.milp.linear.lin.ModelTimeout` (the paper workloads' models
            take seconds to build).

    Returns:
        The model with its variable maps.
    """
    if tier not in ("full", "exact", "aggregated"):
        raise ValueError(f"tier '{tier}' is not one of full, exact, aggregated")
    full = tier == "full"
    steps = steps if steps is not None else ("layer" if tier == "aggregated" else "op")
    lagging = full if lagging is None else bool(lagging)
    binary_placement = full if binary_placement is None else bool(binary_placement)
    integral_copies = full if integral_copies is None else bool(integral_copies)
    fifo = full if fifo is None else bool(fifo)
    # R1-R3 exempt a lagging D2H (a dropped one holds up no later copy, one that ends
    # after its tensor's first read is not "queued" after it): they need the lag
    # indicators, so fifo turns lagging on (without them, a dropped D2H would hold up the
    # queue in R1, and R2 would count a lagging D2H as queued after it ended).
    lagging = lagging or fifo
    admission = full if admission is None else bool(admission)
    integer_evictions = full if integer_evictions is None else bool(integer_evictions)
    cumulative_placement = (tier == "aggregated" if cumulative_placement is None
                            else bool(cumulative_placement))
    b = _Builder(inst, M, tier, _groups(inst, steps), lagging=lagging,
                 binary_placement=binary_placement, integral_copies=integral_copies,
                 fifo=fifo, admission=admission, integer_evictions=integer_evictions,
                 cumulative_placement=cumulative_placement, deadline=deadline)
    b.rebuild_candidates()
    b.decisions()
    b.placements()
    b.placement_prefix_sums()
    b.placement_order()
    b.copies()
    b.copy_order()
    b.fifo_r1()
    b.work_conserving_r2()
    b.lagging_r3()
    b.step_durations()
    b.gamma()
    b.memory_at_ops()
    b.admission_r5()
    b.rebuild_instants()
    return b.result()
