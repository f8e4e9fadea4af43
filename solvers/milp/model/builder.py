"""The builder of the time-indexed model: the instance's data in model units and the
sections that state the decisions, the rebuild placements, the copies, the step
durations and the memory rows (:class:`_Builder`), the options that switch rows on
(:class:`ModelOptions`) and the model it returns (:class:`_Model`). The rows of the
runtime rules R1-R3, R5 and the copy events in gaps are in
:mod:`~slackopt.solvers.milp.model.rules`; the order of the sections is
:func:`~slackopt.solvers.milp.model.build.build_model`'s."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from slackopt.instance import Instance
from slackopt.plan import KEEP, RECOMP, SWAP
from slackopt.simulate.rules import copy_time
from slackopt.solvers.milp.linear.lin import _INF, _Lin
from slackopt.solvers.milp.model.steps import MEM_UNITS_PER_P, TIME_UNIT_S, rebuild_gaps


@dataclass(frozen=True)
class ModelOptions:
    """The model's switches, resolved (:meth:`for_tier`). Each turns on rows or integer
    variables that are valid for every trace of the runtime
    (:mod:`slackopt.solvers.milp.model`); off, the model is a looser relaxation of the
    same runs.

    Attributes:
        lagging: lag binaries (a D2H still running at the first backward read).
        binary_placement: binary rebuild placements.
        integral_copies: copy *events* are integral (a tensor is freed when its D2H
            ends, an H2D buffer is allocated whole when the copy starts); with it the
            memory rows at op starts and the gap events gamma.
        fifo: the D2H queue rules R1-R3 (FIFO, work-conserving, lagging only behind
            copies queued no later); implies `lagging`.
        admission: the H2D admission rule R5 (needs `integral_copies`).
        integer_evictions: eviction counts are integers.
        cumulative_placement: "rebuilt before op k" through prefix-sum variables of the
            placements (the same relaxation, far fewer nonzeros).
    """

    lagging: bool
    binary_placement: bool
    integral_copies: bool
    fifo: bool
    admission: bool
    integer_evictions: bool
    cumulative_placement: bool

    @classmethod
    def for_tier(cls, tier: str, *, lagging: bool | None = None,
                 binary_placement: bool | None = None, integral_copies: bool | None = None,
                 fifo: bool | None = None, admission: bool | None = None,
                 integer_evictions: bool | None = None,
                 cumulative_placement: bool | None = None) -> ModelOptions:
        """The options of `tier` ("full": every switch but `cumulative_placement` on;
        "exact": all off; "aggregated": only `cumulative_placement` on), each one given
        (not None) taking precedence; `fifo` turns `lagging` on.

        Raises:
            ValueError: `tier` is not "full", "exact" or "aggregated".
        """
        if tier not in ("full", "exact", "aggregated"):
            raise ValueError(f"tier '{tier}' is not one of full, exact, aggregated")
        full = tier == "full"

        def pick(value: bool | None, default: bool) -> bool:
            return default if value is None else bool(value)

        fifo_on = pick(fifo, full)
        # R1-R3 exempt a lagging D2H (a dropped one holds up no later copy, one that ends
        # after its tensor's first read is not "queued" after it): they need the lag
        # indicators, so fifo turns lagging on (without them, a dropped D2H would hold up
        # the queue in R1, and R2 would count a lagging D2H as queued after it ended).
        return cls(lagging=pick(lagging, full) or fifo_on,
                   binary_placement=pick(binary_placement, full),
                   integral_copies=pick(integral_copies, full), fifo=fifo_on,
                   admission=pick(admission, full),
                   integer_evictions=pick(integer_evictions, full),
                   cumulative_placement=pick(cumulative_placement, tier == "aggregated"))


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
    """The state :func:`~slackopt.solvers.milp.model.build.build_model` shares between its
    sections: the instance's data in model units, the resolved options (:class:`ModelOptions`),
    the :class:`~slackopt.solvers.milp.linear.lin._Lin` being built and the variable
    families added so far. The sections are its methods and the functions of
    :mod:`~slackopt.solvers.milp.model.memory` and :mod:`~slackopt.solvers.milp.model.rules`;
    they add variables and rows in the order ``build_model`` calls them, which fixes the
    model's variable and row order."""

    def __init__(self, inst: Instance, M: int | None, groups: list[tuple[int, int]],
                 opts: ModelOptions, deadline: float | None) -> None:
        """The instance's data in model units (memory: P / 1e4 bytes, time: microseconds)
        and an empty model. `M` the budget (bytes; None: no memory rows), `groups` the
        steps (:func:`~slackopt.solvers.milp.model.steps._groups`), `opts` the resolved
        options, `deadline` as in :func:`~slackopt.solvers.milp.model.build.build_model`."""
        self.inst, self.M, self.groups, self.opts = inst, M, groups, opts
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
        # (solvers/milp/model/point.py): "def" = defined by one equality row (``*_def``),
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
        (:func:`~.steps.rebuild_gaps`); per saved tensor t, gmin[t] (its earliest possible
        backward read), n_reads[t] (its backward reads: readers and recipes that read it),
        multi[t] (read more than once, or by a rebuild before its first reader) and
        late_rebuild_read[t] (a rebuild reading t may come after t's last reader). No
        variables, no rows."""
        nS, rec_ok, prod, firstb, lastb = self.nS, self.rec_ok, self.prod, self.firstb, self.lastb
        rdb, deps = self.rdb, self.deps
        G = rebuild_gaps(prod, rec_ok, deps, firstb)
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
        lagging, nS, lin, s, rec_ok = self.opts.lagging, self.nS, self.lin, self.s, self.rec_ok
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
        binary_placement, nS, lin = self.opts.binary_placement, self.nS, self.lin
        rec_ok = self.rec_ok
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
        cumulative_placement, nS = self.opts.cumulative_placement, self.nS
        lin, aux = self.lin, self.aux
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
        (``gap_when_needed``): the evaluator's rule (:func:`~.steps.rebuild_gaps`)."""
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
        groups, integral_copies, fifo = self.groups, self.opts.integral_copies, self.opts.fifo
        integer_evictions, nS, lin, s = self.opts.integer_evictions, self.nS, self.lin, self.s
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

    def result(self, tier: str) -> _Model:
        """The model: the built :class:`~slackopt.solvers.milp.linear.lin._Lin`, its decision
        variables, its statistics and options, and the variable families (``vmap``)."""
        groups, o = self.groups, self.opts
        lin, aux, gm, phi, xs, xr = self.lin, self.aux, self.gm, self.phi, self.xs, self.xr
        lag, y, F, L, H, E, Dn = self.lag, self.y, self.F, self.L, self.H, self.E, self.Dn
        Sg, tau = self.Sg, self.tau
        info: dict[str, Any] = {"steps": len(groups)}
        info.update(lin.stats())
        info["options"] = {"lagging": o.lagging, "binary_placement": o.binary_placement,
                           "integral_copies": o.integral_copies, "fifo": o.fifo,
                           "admission": o.admission,
                           "integer_evictions": o.integer_evictions}
        # The variable families, for mapping a simulated trace to a point of the model
        # (solvers/milp/model/point.py): per saved position t, dicts step K -> variable.
        vmap = {"xs": xs, "xr": xr, "lag": lag, "y": y, "F": F, "L": L, "H": H, "E": E,
                "Dn": Dn, "Sg": Sg, "gamma": gm, "phi": phi, "tau": tau, "aux": aux,
                "integral_copies": o.integral_copies}
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
