"""The joint deficit cover: the deficit bound's argument (:func:`~.deficit.deficit_bound`)
stated at every op at once, over one set of recomp tensors, with the recomp decisions
binary; its optimum, certified by the branch and bound of
:mod:`~slackopt.solvers.milp.certify.certified_bb`, is a lower bound on ``T - T*``.

The deficit bound takes the largest over the ops of a fractional knapsack, each op with
its own fractions. On graphs whose plans pay mostly recompute time (CNNs: large early
activations, few ops where the link can help) both relaxations leave the bound low: a
plan recomputes whole tensors, and the same ones at every op.

The model (times in the unit ``tu`` of :func:`~.checkpoint.time_unit`, memory in
``mu`` = P / 1e4 bytes, as the other bound models; ``W`` the D2H bytes per second, ``r0``
the earliest ready time of a saved tensor, S*(k) the ideal start of op k):

- a binary ``x_t`` per rebuildable saved tensor with bytes (the plan recomputes t), and
  ``sigma >= 0``; objective ``min sum_t c_t x_t + sigma``; the bound is
  ``T* + certified value``.
- for each tensor u with an x that the recipe of another t with an x reads, with
  ``firstb_t < firstb_u`` (the t with the earliest firstb_t: :func:`early_pairs`),
  ``y_u`` in [0, 1] with the row ``both[t,u]``: ``y_u >= x_t + x_u - 1``.
- for each op k with ``D_k = keep_all(k) - M - W (S*(k) - r0) > 0``, the row
  ``cover[k]``: ``sum_{t : lastf_t < k < firstb_t} s_t x_t + [k backward] W R
  - sum_{u : firstb_t(u) <= k < firstb_u} s_u y_u + W sigma >= D_k``, with ``R = sum_t
  c_t x_t`` (row ``rebuild_time``).

Why every plan the barrier-free runtime runs satisfies it (../shared/spec/semantics.md):
set ``x_t`` to 1 iff the plan recomputes t, ``y_u = x_t x_u`` for the pair (t, u), and
``sigma = T - T* - sum_t c_t x_t`` (its stalls plus the rebuild time of its recomp
tensors without bytes, >= 0 since ``T - T* = stalls + recompute time`` exactly); the
objective is then ``T - T*``, and ``both`` holds.

- At the start of op k the plan holds at most M bytes: the keep-all profile less the
  saved tensors absent then. A tensor is absent only after its last forward reader; a
  recomp tensor only before its rebuild, which runs before its first backward reader, so
  at most the recomp tensors with ``lastf_t < k < firstb_t`` (``x_t = 1``); a swap only
  once its D2H has ended (its device copy is freed, or evicted, only then).
- The D2H engine runs one copy at a time, at most W bytes per second, none before r0; so
  by the real start of k it has moved at most ``W (S*(k) - r0 + sigma_k + R_k)`` bytes,
  with sigma_k the stalls and R_k the rebuild time before k. At a backward k,
  ``sigma_k + R_k <= T - T* = sigma + sum_t c_t x_t``; at a forward k, R_k = 0
  (rebuilds run in the backward pass only) and ``sigma_k <= sigma`` (sigma holds every
  stall).
- Rebuilt early: when t and u are both recomp, t is rebuilt before op firstb_t starts
  and u, a recipe input of t that is itself recomp, is rebuilt before t (inputs
  first); a rebuilt tensor is freed only after its last reader, at or after op
  firstb_u. So at every k with ``firstb_t <= k < firstb_u``, u is resident although
  ``lastf_u < k < firstb_u``: its bytes, counted absent by ``x_u``, are taken back by
  ``y_u = 1``. One t per u, so no u is taken back twice.
- So ``keep_all(k) - M <= sum_{recomp, lastf_t < k < firstb_t, not rebuilt early}
  s_t + W (S*(k) - r0) + W sigma [+ W sum_t c_t x_t at a backward k]``: the row
  ``cover[k]``.

:func:`deficit_cover_point` builds that point from a run; tests/test_bound_point.py checks
it against every row on every plan of small instances. It relaxes the deficit bound's
linear program (the same rows, one op at a time, with fractions), so its certified value
is at least the deficit bound's closed form up to the LP's rounding.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from slackopt.instance import Instance
from slackopt.plan import RECOMP
from slackopt.solvers.milp.bounds.checkpoint import bound_arrays
from slackopt.solvers.milp.bounds.source import BoundContext, BoundValue
from slackopt.solvers.milp.certify.certified_bb import NODE_LIMIT, certified_milp_bound
from slackopt.solvers.milp.certify.runpoint import RunView, complete_point, decided
from slackopt.solvers.milp.certify.safe_lp import seconds_below
from slackopt.solvers.milp.linear.lin import _INF, _Lin

MAX_NONZEROS = 200_000
"""Largest model (nonzeros of its rows) :func:`build_deficit_cover` builds: beyond, its
certified branch and bound does not get past the root LP in the time a solve gives it
(GPT-2 XL, 969 saved tensors: no certificate in 5 s), so the source reports no bound."""


def build_deficit_cover(inst: Instance, M: int) -> tuple[_Lin, dict] | None:
    """The model of the module docstring for `inst` under budget `M` (bytes), with
    ``R = sum_t c_t x_t`` as a variable of its own (row ``rebuild_time``) so that the
    backward rows hold one rebuild term, and, of the ops whose rows have the same
    terms, only the row with the largest deficit (it implies the others).

    Returns:
        (model, info: ``ops`` the cover rows, ``items`` the binaries, ``pairs``,
        ``time_unit_s``), or None when the instance has views or no saved tensor with
        bytes (:func:`~.checkpoint.bound_arrays`), no rebuildable one, no op with a
        deficit, or more than :data:`MAX_NONZEROS` nonzeros.
    """
    a_ = bound_arrays(inst, M)
    if a_ is None or not a_.rec:
        return None
    W = float(inst.link.d2h_bytes_per_s)
    r0 = float(np.min(inst.r))
    keep = np.asarray(inst.keep_all_profile, dtype=np.int64)
    start = np.asarray(inst.start_s, dtype=np.float64)
    deficit = (keep - int(M)) - W * np.maximum(0.0, start - r0)
    ops = np.flatnonzero(deficit > 0.0)
    if not ops.size:
        return None
    tu, mu, nf = a_.tu, a_.mu, int(inst.n_fwd)
    rec = np.asarray(a_.rec, dtype=np.int64)
    pairs = early_pairs(inst, a_.rec, a_.firstb)
    pu = np.asarray(list(pairs), dtype=np.int64)
    pt = np.asarray(list(pairs.values()), dtype=np.int64)
    # per op of `ops`: the tensors counted absent (lastf < k < firstb) and the pairs
    # taken back (firstb_t <= k < firstb_u)
    k = ops[:, None]
    absent = (a_.lastf[rec][None, :] < k) & (k < a_.firstb[rec][None, :])
    back = (a_.firstb[pt][None, :] <= k) & (k < a_.firstb[pu][None, :])
    bwd = ops >= nf
    rows: dict[bytes, int] = {}      # the terms' signature -> the op with the largest deficit
    for i in range(ops.size):
        key = bytes([bool(bwd[i])]) + np.packbits(absent[i]).tobytes() \
            + np.packbits(back[i]).tobytes()
        j = rows.get(key)
        if j is None or deficit[ops[i]] > deficit[ops[j]]:
            rows[key] = i
    kept = sorted(rows.values())
    nonzeros = (int(absent[kept].sum() + back[kept].sum() + bwd[kept].sum()) + len(kept)
                + rec.size + 1 + 3 * len(pairs))
    if nonzeros > MAX_NONZEROS:
        return None
    lin = _Lin()
    x = [lin.var(0, 1, True, obj=a_.c[t] / tu, name=f"x{t}") for t in a_.rec]
    xi = dict(zip(a_.rec, x, strict=True))
    sigma = lin.var(0, _INF, obj=1.0, name="sigma")
    R = lin.var(0, _INF, name="R")
    lin.row([(R, 1.0)] + [(v, -a_.c[t] / tu) for t, v in xi.items()], 0.0, 0.0,
            name="rebuild_time")
    y = [lin.var(0, 1, name=f"y{t}_{u}") for u, t in pairs.items()]
    for v, (u, t) in zip(y, pairs.items(), strict=True):
        lin.row([(v, 1.0), (xi[t], -1.0), (xi[u], -1.0)], lo=-1.0, name=f"both[{t},{u}]")
    w_tu = W * tu / mu                      # bytes per time unit, in memory units
    sm = a_.s.astype(np.float64) / mu
    for i in kept:
        terms = [(x[j], float(sm[rec[j]])) for j in np.flatnonzero(absent[i])]
        terms += [(y[q], -float(sm[pu[q]])) for q in np.flatnonzero(back[i])]
        terms += [(sigma, w_tu)] + ([(R, w_tu)] if bwd[i] else [])
        lin.row(terms, lo=float(deficit[ops[i]]) / mu, name=f"cover[{int(ops[i])}]")
    return lin, {"ops": len(kept), "items": len(x), "pairs": len(y), "time_unit_s": tu}


def early_pairs(inst: Instance, rec: list[int], firstb: np.ndarray) -> dict[int, int]:
    """``{u: t}``: for each tensor u of `rec` (rebuildable, with bytes) that the recipe of
    another tensor t of `rec` reads with ``firstb_t < firstb_u``, the one such t with the
    earliest first backward reader (then the smallest index): if both are recomp, u is
    rebuilt by the start of op firstb_t (module docstring, "Rebuilt early")."""
    inrec = set(rec)
    out: dict[int, int] = {}
    for t in rec:
        for v in inst.recipe_inputs[t]:
            u = int(v)
            if u == t or u not in inrec or not firstb[t] < firstb[u]:
                continue
            if u not in out or (firstb[t], t) < (firstb[out[u]], out[u]):
                out[u] = t
    return out


def deficit_cover_point(inst: Instance, M: int, lin: _Lin, run: RunView) -> list[float]:
    """The point of `lin` (:func:`build_deficit_cover` of `inst`, `M`) that the run `run`
    gives, as the module docstring assigns it: ``x_t`` its recomp decisions, ``y_u = x_t
    x_u``, ``sigma`` its ``T - T*`` less the rebuild time of the tensors with an ``x``
    (model units).
    tests/test_bound_point.py checks it against every row."""
    a_ = bound_arrays(inst, M)
    if a_ is None:
        raise ValueError("the instance has no deficit cover model")
    vals = {f"x{t}": decided(run.dec, t, RECOMP) for t in a_.rec}
    for u, t in early_pairs(inst, a_.rec, a_.firstb).items():
        vals[f"y{t}_{u}"] = vals[f"x{t}"] * vals[f"x{u}"]
    paid = sum(float(a_.c[t]) for t in a_.rec if run.dec[t] == RECOMP)
    extra = run.stall_fwd + run.stall_bwd + run.recompute
    vals["sigma"] = (extra - paid) / a_.tu
    return complete_point(lin, vals)


def deficit_cover_bound(inst: Instance, M: int, time_limit_s: float, *,
                        deadline: float | None = None, cutoff_s: float | None = None,
                        nodes: int = NODE_LIMIT) -> tuple[float | None, dict]:
    """``T* +`` the certified value of the joint deficit cover (s), lowered with
    :func:`~slackopt.solvers.milp.certify.safe_lp.seconds_below`, within `time_limit_s`.

    Args:
        inst, M: the instance and the budget (bytes).
        time_limit_s: limit (s) of the certified branch and bound.
        deadline: perf_counter time after which nothing new starts.
        cutoff_s: a step (s) no plan needs to beat (the incumbent's): nodes bounded at
            or above it are not branched.
        nodes: most node LPs of the branch and bound (its default: ``NODE_LIMIT``).

    Returns:
        (bound in s or None when there is no model (``info["status"]`` "no model":
        :func:`build_deficit_cover` says when) or no certificate, info: the model's size
        and the branch and bound's ``stopped``, ``nodes``, ``root_bound_s``).
    """
    built = build_deficit_cover(inst, M)
    if built is None:
        return None, {"status": "no model"}
    lin, info = built
    tu, T_star = info["time_unit_s"], float(inst.ideal_time_s)
    cutoff = None if cutoff_s is None else max(0.0, (cutoff_s - T_star) / tu)
    val, bb = certified_milp_bound(lin, time_limit_s, cutoff=cutoff, deadline=deadline,
                                   node_limit=nodes)
    info.update(stopped=bb.get("stopped"), nodes=bb.get("nodes"))
    if bb.get("root_bound") is not None:
        info["root_bound_s"] = seconds_below(T_star, bb["root_bound"], tu)
    if val is None:
        return None, info
    return seconds_below(T_star, val, tu), info


@dataclass(frozen=True)
class DeficitCover:
    """The joint deficit cover as a bound source (phase "deficit_cover"): certified bound
    ``deficit_cover`` (:func:`deficit_cover_bound`) within `share` of the time left less
    0.3 s and `nodes` node LPs, cut off at the incumbent's step; ``info["deficit_cover"]``
    its size, nodes, root bound and time. It needs no plan."""

    share: float
    nodes: int = NODE_LIMIT
    name: str = "deficit_cover"

    def __call__(self, inst: Instance, M: int, ctx: BoundContext) -> BoundValue:
        t0 = time.perf_counter()
        lb, info = deficit_cover_bound(inst, M, self.share * max(0.0, ctx.left() - 0.3),
                                       deadline=ctx.deadline - 0.3, cutoff_s=ctx.upper_s,
                                       nodes=self.nodes)
        info.update(bound_s=lb, seconds=round(time.perf_counter() - t0, 4))
        return BoundValue(bounds={"deficit_cover": lb}, info={"deficit_cover": info})
