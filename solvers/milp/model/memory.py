"""The memory rows of the time-indexed model (with a budget): memory at the end of every
op and, with `integral_copies`, at its start (:func:`memory_at_ops`), and at every
possible rebuild start (:func:`rebuild_instants`); sections of
:class:`~slackopt.solvers.milp.model.builder._Builder`'s model, called by
:func:`~slackopt.solvers.milp.model.build.build_model`."""

from __future__ import annotations

from slackopt.solvers.milp.linear.lin import _INF
from slackopt.solvers.milp.model.builder import _Builder


def memory_at_ops(bd: _Builder) -> None:
    """Memory at every op (with a budget): at the end of each op of a single-op step
    (all its allocations live, H2D buffers started during it counted) and, with
    `integral_copies`, at its start (D2H copies that ended in the gap before it, gamma,
    already freed; H2D copies started in that gap not counted; evictions in the gap
    counted); in a multi-op step the tensors no op of the step touches are summed once
    (Z) and each op's row adds the rest."""
    if bd.M is None or bd.n == 0:
        return
    groups, integral_copies, n, nf = bd.groups, bd.opts.integral_copies, bd.n, bd.nf
    nS, lin, mu, Mu, s, sm = bd.nS, bd.lin, bd.mu, bd.Mu, bd.s, bd.sm
    prod, lastf, lastb, rdb, static = bd.prod, bd.lastf, bd.lastb, bd.rdb, bd.static
    single, aux, G, xr = bd.single, bd.aux, bd.G, bd.xr
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
                cst, tm = mem_expr(bd, t, a, *mem_at(bd, a))
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
                        terms += [(v, st) for v, _ in bd.Y(t, a)]
                    if s[t] <= 0 or (a >= nf and a in rdb[t]):
                        continue
                    terms += [(bd.Dv(t, K - 1), -st), (bd.gam(t, K), -st)]
                    if a >= nf:
                        terms += [(bd.Sv(t, K - 1), st), (bd.Ev(t, K), -st)]
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
            cst, tm = mem_expr(bd, t, b if not bwd else a, K, K - 1, K)
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
                cst, tm = mem_expr(bd, t, k, *mem_at(bd, k))
                const += cst
                terms += tm
            lin.row(terms, hi=Mu - const, name=f"mem_op_end[k={k}]")


def rebuild_instants(bd: _Builder) -> None:
    """Memory at rebuild instants (with a budget): Q[g] = saved bytes alive across gap g
    (kept, rebuilt earlier); a rebuild in gap g holds Q[g], its tensor, transient bytes
    and workspace, and each input of its recipe not alive across g (om)."""
    if bd.M is None or bd.n == 0:
        return
    n, nS, lin, mu, Mu, s, sm = bd.n, bd.nS, bd.lin, bd.mu, bd.Mu, bd.s, bd.sm
    lastb, ins, static, s_alloc, ws = bd.lastb, bd.ins, bd.static, bd.s_alloc, bd.ws
    extra, aux, G, xs, xr, y = bd.extra, bd.aux, bd.G, bd.xs, bd.xr, bd.y
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
                    terms += [(v, sm[t]) for v, _ in bd.Y(t, g - 1)]
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
                        rowt += [(v, 1.0) for v, _ in bd.Y(t, g - 1)]
                        lo = -1.0
                    lin.row(rowt, lo=lo, name=f"rebuild_input_def[u={u},g={g},t={t}]")
                    terms.append((om, sm[t]))
                lin.row(terms, hi=Mu - gap_static - Qc[g],
                        name=f"mem_rebuild_start[u={u},g={g}]")


def mem_expr(bd: _Builder, t: int, k: int, Kd: int, Ks: int,
             Ke: int) -> tuple[float, list]:
    """(constant, terms) of t's memory at the end of op k (model units); the
    D2H-ended, H2D-started and eviction counts are read at steps Kd, Ks, Ke."""
    sm, prod, lastf, lastb, xr = bd.sm, bd.prod, bd.lastf, bd.lastb, bd.xr
    st = sm[t]
    if k < prod[t]:
        return 0.0, []      # produced later in the same (multi-op) step
    if k <= lastf[t]:
        return st, []
    if k < bd.nf:
        return st, [(xr[t], -st), (bd.Dv(t, Kd), -st)]
    if k > lastb[t]:
        return 0.0, []
    terms = [(xr[t], -st)] + [(v, st) for v, _ in bd.Y(t, k)]
    if k in bd.rdb[t] or bd.s[t] <= 0:
        return st, terms
    terms += [(bd.Dv(t, Kd), -st), (bd.Sv(t, Ks), st), (bd.Ev(t, Ke), -st)]
    return st, terms


def mem_at(bd: _Builder, k: int) -> tuple[int, int, int]:
    """The steps (Kd, Ks, Ke) at which :func:`mem_expr` reads the counts at the end of
    op k: its own step, the H2D starts of the step before unless k ends its step."""
    K = bd.Kof[k]
    return (K, K, K) if k == bd.groups[K][1] else (K, K - 1, K)
