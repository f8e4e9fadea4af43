"""The rows of the runtime rules that the full tier states as valid linear implications
(:mod:`slackopt.solvers.milp.model`, "Model" and "Why the optimum is a lower bound"): the
FIFO D2H queue (R1, :func:`fifo_r1`), the work-conserving D2H engine (R2,
:func:`work_conserving_r2`), lagging copies (R3, :func:`lagging_r3`), D2H copies that end
in the gap before an op (:func:`gamma`) and the H2D admission rule (R5,
:func:`admission_r5`). Each is a section of
:class:`~slackopt.solvers.milp.model.builder._Builder`'s model, added by
:func:`~slackopt.solvers.milp.model.build.build_model` when its option is on."""

from __future__ import annotations

import numpy as np

from slackopt.simulate.rules import ADMISSION_LOOKAHEAD
from slackopt.solvers.milp.linear.lin import _INF
from slackopt.solvers.milp.model.builder import _Builder, _cum, _share


def fifo_r1(bd: _Builder) -> None:
    """FIFO D2H queue (R1): a D2H moves in step K only if every earlier-queued swapped
    tensor's D2H has ended by the end of K (chain P_tK over the queue order qkey =
    (ready, saved position), the runtime's; a non-lagging D2H has ended when Dn = 1, a
    lagging one when L = 1). Zero-byte tensors are never queued."""
    nS, lin, s, qkey = bd.nS, bd.lin, bd.s, bd.qkey
    has_bwd, aux, xs, lag, F = bd.has_bwd, bd.aux, bd.xs, bd.lag, bd.F
    f_rng, l_rng = bd.f_rng, bd.l_rng
    if has_bwd:
        order_t = sorted((t for t in range(nS) if s[t] > 0), key=lambda t: qkey[t])
        prev_P: dict[int, int] = {}
        for i, t in enumerate(order_t):
            if i > 0:
                for K in range(f_rng[t][0], max(f_rng[t][1], l_rng[t][1]) + 1):
                    rowt = [(_cum(F[t], f_rng[t], K), 1.0), (bd.Lv(t, K), 1.0)]
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
                row = [(Pv, 1.0), (bd.Dv(t, K), -1.0), (xs[t], 1.0)]
                row += [(lag[t], -1.0)] if lag[t] is not None else [(bd.Lv(t, K), -1.0)]
                lin.row(row, hi=1.0, name=f"fifo_P_ended[t={t},K={K}]")
                if i > 0:
                    lin.row([(Pv, 1.0)] + ([(prev_P[K], -1.0)] if K in prev_P else []),
                            hi=0.0, name=f"fifo_P_chain[t={t},K={K}]")
                cur[K] = Pv
            prev_P = cur


def work_conserving_r2(bd: _Builder) -> None:
    """The D2H engine is work-conserving (R2): while a swapped tensor's D2H is queued or
    running through a whole step (ready, i.e. queued, before the step, not ended by its
    end), the engine is busy the whole step, so it works >= the step's op time in it."""
    groups, nS, lin, s, dur = bd.groups, bd.nS, bd.lin, bd.s, bd.dur
    ready, has_bwd, aux, xs, lag = bd.ready, bd.has_bwd, bd.aux, bd.xs, bd.lag
    f_rng = bd.f_rng
    if has_bwd:
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
                            terms += bd.d2h_busy(t2, K)
                    Bv[K] = lin.var(0, _INF, name=f"B{K}")
                    aux["def"].append(Bv[K])
                    lin.row([(Bv[K], 1.0)] + [(v, -cf) for v, cf in terms], 0.0, 0.0,
                            name=f"busy_B_def[K={K}]")
                dK = float(dur[a:b + 1].sum())
                row = [(Bv[K], 1.0), (xs[t], -dK), (bd.Dv(t, K), dK)]
                if lag[t] is not None:
                    row.append((lag[t], dK))
                lin.row(row, lo=0.0, name=f"busy_R2[t={t},K={K}]")


def lagging_r3(bd: _Builder) -> None:
    """A lagging D2H (R3) keeps the D2H engine busy from the end of its ready op (where
    it is queued) to its first backward read, with copies queued no later (FIFO): in
    each step before that read those copies work >= the step's op time. The first read
    is t's first backward reader or an earlier rebuild that reads it (if one is placed
    there: the y terms). The rows of one step share the busy terms of every copy ready
    no later than t (a superset of those queued no later: the tensors ready at the same
    op but queued after t are counted too, which only admits more)."""
    groups, nS, lin, s, dur = bd.groups, bd.nS, bd.lin, bd.s, bd.dur
    ready, firstb, Kof, lag = bd.ready, bd.firstb, bd.Kof, bd.lag
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
                terms += bd.d2h_busy(t2, K)
        a, b = groups[K]
        dK = float(dur[a:b + 1].sum())
        for t in lagged:
            lin.row(terms + [(lag[t], -dK)] + [(v, dK) for v, _ in bd.read_by(t, K)], lo=0.0,
                    name=f"lag_busy_R3[t={t},K={K}]")


def gamma(bd: _Builder) -> None:
    """gamma: a D2H that ends in the gap before op a_K (step K a single op; with
    `integral_copies`): gamma_tK (the binary gm[t][K]) is at most the D2H event of step
    K alone, and then t's whole D2H share in step K lies in the gap before op a_K (the
    compute stream waited for it)."""
    groups, nS, lin = bd.groups, bd.nS, bd.lin
    s, dur, w, lastf, Kof, single = (bd.s, bd.dur, bd.w_d2h, bd.lastf, bd.Kof,
                                     bd.single)
    has_bwd, gm, F, f_rng, tau = bd.has_bwd, bd.gm, bd.F, bd.f_rng, bd.tau
    for t in range(nS):
        if s[t] <= 0 or not has_bwd:
            continue
        lo, hi = f_rng[t]
        for K in range(max(lo, Kof[lastf[t]] + 1), hi + 1):
            if not single[K]:
                continue
            gv = lin.var(0, 1, True, name=f"g{t}_{K}")
            gm[t][K] = gv
            lin.row([(gv, 1.0), (bd.Dv(t, K), -1.0), (bd.Dv(t, K - 1), 1.0)], hi=0.0,
                    name=f"gamma_ends[t={t},K={K}]")
            a = groups[K][0]
            lin.row([(tau[K], 1.0), (gv, -w[t])] + _share(F[t], f_rng[t], K, -w[t]),
                    lo=float(dur[a]) - w[t], name=f"gamma_in_gap[t={t},K={K}]")


def admission_r5(bd: _Builder) -> None:
    """H2D admission (R5, with a budget and `integral_copies`): an H2D the compute stream
    is not waiting for starts only if used + its size + the next three tasks' allocations
    fit in M; used >= R_K, the bytes alive throughout step K. phi_tK = "t's first H2D has
    started by the end of step K" (= S for a tensor read once, fetched once; a binary
    otherwise), so phi_K - phi_(K-1) = 1 exactly when it starts in step K. The compute stream waits
    for t only before a task that reads t: its backward readers (those steps are
    skipped) and rebuilds whose recipe reads t (the row is relaxed by their y)."""
    if bd.M is None or bd.n == 0:
        return
    groups = bd.groups
    n, nS, lin, mu, Mu, s, sm = bd.n, bd.nS, bd.lin, bd.mu, bd.Mu, bd.s, bd.sm
    rec_ok, prod, lastb, rdb, ins = bd.rec_ok, bd.prod, bd.lastb, bd.rdb, bd.ins
    static, s_alloc, ws, extra, nG = bd.static, bd.s_alloc, bd.ws, bd.extra, bd.nG
    Kof, single, has_bwd, KB0, aux = bd.Kof, bd.single, bd.has_bwd, bd.KB0, bd.aux
    phi, G, n_reads, xs, xr, y = bd.phi, bd.G, bd.n_reads, bd.xs, bd.xr, bd.y
    Sg, h_rng = bd.Sg, bd.h_rng
    if has_bwd:
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
                terms += [(v, st) for v, _ in bd.Y(t, k - 1)]
                if s[t] > 0:
                    terms += [(xs[t], st), (bd.Dv(t, K), -st), (bd.Sv(t, K - 1), st),
                              (bd.Ev(t, K), -st)]
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
