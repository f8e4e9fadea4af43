"""The joint deficit cover: the deficit bound's argument (:func:`~.deficit.deficit_bound`)
stated at every op at once, over one set of recomp tensors, with the recomp decisions
binary; its optimum, certified by the branch and bound of
:mod:`~slackopt.solvers.milp.certify.certified_bb`, is a lower bound on ``T - T*``.

The deficit bound takes the largest over the ops of a fractional knapsack, each op with
its own fractions. On graphs whose plans pay mostly recompute time (CNNs: large early
activations, few ops where the link can help) both relaxations leave the bound low: a
plan recomputes whole tensors, and the same ones at every op.

The model (times in the unit ``tu`` of :func:`~.checkpoint.time_unit`, memory in
``mu`` = P / 1e4 bytes, as the other bound models; ``W`` the D2H bytes per second, L
the copy latency, ``w_t = L + s_t / W`` the shortest D2H of t, ``r0`` the earliest ready
time of a saved tensor, S*(k) the ideal start of op k, ``tau_k = S*(k) - r0``):

- a binary ``x_t`` per rebuildable saved tensor with bytes (the plan recomputes t),
  ``sigma >= 0`` and ``R`` (row ``rebuild_time``: ``R = sum_t c_t x_t``); objective
  ``min sum_t c_t x_t + sigma``; the bound is ``T* + certified value``.
- for each tensor u with an x that the recipe of another t with an x reads, with
  ``firstb_t < firstb_u`` (the t with the earliest firstb_t: :func:`early_pairs`),
  ``y_u`` in [0, 1] with the row ``both[t,u]``: ``y_u >= x_t + x_u - 1``.
- ``f_k(tau)``: the most bytes of the tensors of ``B_k`` (with bytes, ``lastf_t < k <
  lastb_t``) whose D2H copies fit one after the other in time tau, fractions allowed
  (a fractional knapsack: largest ``s_t / w_t`` first); concave and piecewise linear,
  so each line extending one of its pieces lies above it (:func:`_link_lines`).
- for each op k with ``E_k = keep_all(k) - M > f_k(tau_k)``, ``v_k >= 0`` (bytes of
  swaps absent at k) and the rows ``cover[k]``: ``sum_{t : lastf_t < k < firstb_t} s_t
  x_t - sum_{u : firstb_t(u) <= k < firstb_u} s_u y_u + v_k >= E_k``, and ``link[k,i]``
  for some of the lines ``a_i + b_i tau`` of f_k: ``v_k <= a_i + b_i (tau_k + sigma +
  [k backward] R)``. (An op with ``E_k <= f_k(tau_k)`` has rows that every point meets.)

Why every plan the barrier-free runtime runs satisfies it (../shared/spec/semantics.md):
set ``x_t`` to 1 iff the plan recomputes t, ``y_u = x_t x_u`` for the pair (t, u),
``sigma = T - T* - sum_t c_t x_t`` (its stalls plus the rebuild time of its recomp
tensors without bytes, >= 0 since ``T - T* = stalls + recompute time`` exactly), and
``v_k = max(0, E_k - sum_{t : lastf_t < k < firstb_t} s_t x_t + sum s_u y_u)``; the
objective is then ``T - T*``, and ``both`` and ``cover`` hold.

- At the start of op k the plan holds at most M bytes: the keep-all profile less the
  saved tensors absent then. A tensor is absent only after its last forward reader; a
  recomp tensor only before its rebuild, which runs before its first backward reader, so
  at most the recomp tensors with ``lastf_t < k < firstb_t`` (``x_t = 1``) but those
  rebuilt early (below); a swap only once its D2H has ended (its device copy is freed,
  or evicted, only then) and before its last backward reader (set B_k). So the bytes
  ``Y_k`` of the swaps absent at k are at least ``v_k``.
- Rebuilt early: when t and u are both recomp, t is rebuilt before op firstb_t starts
  and u, a recipe input of t that is itself recomp, is rebuilt before t (inputs
  first); a rebuilt tensor is freed only after its last reader, at or after op
  firstb_u. So at every k with ``firstb_t <= k < firstb_u``, u is resident although
  ``lastf_u < k < firstb_u``: its bytes, counted absent by ``x_u``, are taken back by
  ``y_u = 1``. One t per u, so no u is taken back twice.
- The D2H engine runs one copy at a time, none before r0, each at least w_t (latency,
  then at most W bytes per second; the duplex factor only slows it); the swaps absent
  at k ended theirs by the real start of k, ``S*(k) + sigma_k + R_k`` with sigma_k the
  stalls and R_k the rebuild time before k. So ``Y_k <= f_k(tau_k + sigma_k + R_k)``.
  At a backward k, ``sigma_k + R_k <= T - T* = sigma + R``; at a forward k, R_k = 0
  (rebuilds run in the backward pass only) and ``sigma_k <= sigma`` (sigma holds every
  stall). f_k is non-decreasing and below each of its lines: ``link[k,i]`` holds.

:func:`deficit_cover_point` builds that point from a run; tests/test_bound_point.py checks
it against every row on every plan of small instances. The deficit bound's linear
program is a relaxation of it (one op at a time, fractions, every line ``W tau``, no
latency), so its certified value is at least that closed form up to the LP's rounding.
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
from slackopt.solvers.milp.linear.lin import _INF, ModelTimeout, _Lin

MAX_NONZEROS = 200_000
"""Largest model (nonzeros of its rows) :func:`build_deficit_cover` builds: beyond, its
certified branch and bound does not get past the root LP in the time a solve gives it
(GPT-2 XL, 969 saved tensors: no certificate in 5 s), so the source reports no bound."""
MAX_LINES = 8
"""Lines of f_k per op (:func:`_link_lines`): the piece at tau_k, the 1st, 2nd, 4th,
... after it, and the cap; any subset of the lines keeps the rows valid."""


def _link_lines(s: np.ndarray, w: np.ndarray, tau0: float, max_lines: int | None
                ) -> list[tuple[float, float]]:
    """Lines ``(a, b)``, ``a + b tau`` (bytes, bytes per s), each at or above ``f(tau)``,
    the most bytes of items (sizes `s`, copy times `w` > 0, s) whose copies fit one after
    the other in time tau, fractions allowed: the pieces of f, largest ``s / w`` first,
    from the one at `tau0` on (the piece at tau0 and every ``2^j``-th after it, at most
    `max_lines` of them; None: every one), and the cap ``(sum s, 0)``."""
    order = np.argsort(-(s / w), kind="stable")
    ss, ww = s[order], w[order]
    S = np.concatenate([[0.0], np.cumsum(ss)])
    Wc = np.concatenate([[0.0], np.cumsum(ww)])
    i0 = int(np.searchsorted(Wc, tau0, side="right")) - 1
    pieces = list(range(i0, ss.size))
    if max_lines is not None:
        pieces = [i0 + j for j in [0] + [2 ** e for e in range(ss.size.bit_length() + 1)]
                  if i0 + j < ss.size][:max_lines]
    lines = [(float(S[i] - ss[i] / ww[i] * Wc[i]), float(ss[i] / ww[i])) for i in pieces]
    return lines + [(float(S[-1]), 0.0)]


def build_deficit_cover(inst: Instance, M: int, max_lines: int | None = MAX_LINES, *,
                        deadline: float | None = None) -> tuple[_Lin, dict] | None:
    """The model of the module docstring for `inst` under budget `M` (bytes), with
    `max_lines` lines of f_k per op (None: every piece from tau_k on).

    Raises:
        ModelTimeout: `deadline` (perf_counter s) passed while its rows were added.

    Returns:
        (model, info: ``ops`` the cover rows, ``items`` the binaries, ``pairs``,
        ``time_unit_s``), or None when the instance has views or no saved tensor with
        bytes (:func:`~.checkpoint.bound_arrays`), no rebuildable one, no op whose
        excess the link cannot carry, or more than :data:`MAX_NONZEROS` nonzeros.
    """
    a_ = bound_arrays(inst, M)
    if a_ is None or not a_.rec:
        return None
    W, L = float(inst.link.d2h_bytes_per_s), float(inst.link.copy_latency_s)
    r0 = float(np.min(inst.r))
    excess = np.asarray(inst.keep_all_profile, dtype=np.int64) - int(M)
    tau = np.maximum(0.0, np.asarray(inst.start_s, dtype=np.float64) - r0)
    sb = a_.s.astype(np.float64)
    w = L + sb / W
    live = np.flatnonzero(sb > 0)
    ops, lines = [], []
    for k in np.flatnonzero(excess > 0).tolist():
        B = live[(a_.lastf[live] < k) & (k < a_.lastb[live])]
        ls = _link_lines(sb[B], w[B], float(tau[k]), max_lines)
        if float(excess[k]) > min(a + b * tau[k] for a, b in ls):
            ops.append(k)
            lines.append(ls)
    if not ops:
        return None
    tu, mu, nf = a_.tu, a_.mu, int(inst.n_fwd)
    rec = np.asarray(a_.rec, dtype=np.int64)
    pairs = early_pairs(inst, a_.rec, a_.firstb)
    pu = np.asarray(list(pairs), dtype=np.int64)
    pt = np.asarray(list(pairs.values()), dtype=np.int64)
    # per op: the tensors counted absent (lastf < k < firstb) and the pairs taken back
    # (firstb_t <= k < firstb_u)
    k_ = np.asarray(ops, dtype=np.int64)[:, None]
    absent = (a_.lastf[rec][None, :] < k_) & (k_ < a_.firstb[rec][None, :])
    back = (a_.firstb[pt][None, :] <= k_) & (k_ < a_.firstb[pu][None, :])
    bwd = [k >= nf for k in ops]
    nonzeros = (int(absent.sum() + back.sum()) + len(ops) + rec.size + 1 + 3 * len(pairs)
                + sum(1 + (b > 0) * (1 + bk) for bk, ls in zip(bwd, lines, strict=True)
                      for _, b in ls))
    if nonzeros > MAX_NONZEROS:
        return None
    lin = _Lin(deadline)
    x = [lin.var(0, 1, True, obj=a_.c[t] / tu, name=f"x{t}") for t in a_.rec]
    xi = dict(zip(a_.rec, x, strict=True))
    sigma = lin.var(0, _INF, obj=1.0, name="sigma")
    R = lin.var(0, _INF, name="R")
    lin.row([(R, 1.0)] + [(v, -a_.c[t] / tu) for t, v in xi.items()], 0.0, 0.0,
            name="rebuild_time")
    y = [lin.var(0, 1, name=f"y{t}_{u}") for u, t in pairs.items()]
    for v, (u, t) in zip(y, pairs.items(), strict=True):
        lin.row([(v, 1.0), (xi[t], -1.0), (xi[u], -1.0)], lo=-1.0, name=f"both[{t},{u}]")
    sm = sb / mu
    for i, k in enumerate(ops):
        v = lin.var(0, _INF, name=f"v{k}")
        terms = [(x[j], float(sm[rec[j]])) for j in np.flatnonzero(absent[i])]
        terms += [(y[q], -float(sm[pu[q]])) for q in np.flatnonzero(back[i])]
        lin.row(terms + [(v, 1.0)], lo=float(excess[k]) / mu, name=f"cover[{k}]")
        for q, (a, b) in enumerate(lines[i]):
            bt = b * tu / mu            # memory units per time unit
            lin.row([(v, 1.0)] + ([(sigma, -bt)] if b > 0 else [])
                    + ([(R, -bt)] if b > 0 and bwd[i] else []),
                    hi=(a + b * float(tau[k])) / mu, name=f"link[{k},{q}]")
    return lin, {"ops": len(ops), "items": len(x), "pairs": len(y), "time_unit_s": tu}


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
    x_u``, ``sigma`` its ``T - T*`` less the rebuild time of the tensors with an ``x``,
    ``v_k`` the excess at k less the recomp bytes counted absent there (model units).
    tests/test_bound_point.py checks it against every row."""
    a_ = bound_arrays(inst, M)
    if a_ is None:
        raise ValueError("the instance has no deficit cover model")
    vals = {f"x{t}": decided(run.dec, t, RECOMP) for t in a_.rec}
    pairs = early_pairs(inst, a_.rec, a_.firstb)
    for u, t in pairs.items():
        vals[f"y{t}_{u}"] = vals[f"x{t}"] * vals[f"x{u}"]
    excess = np.asarray(inst.keep_all_profile, dtype=np.int64) - int(M)
    for nm in lin.names:
        if nm.startswith("v"):
            k = int(nm[1:])
            absent = sum(float(a_.s[t]) for t in a_.rec
                         if run.dec[t] == RECOMP and a_.lastf[t] < k < a_.firstb[t])
            absent -= sum(float(a_.s[u]) * vals[f"y{t}_{u}"] for u, t in pairs.items()
                          if a_.firstb[t] <= k < a_.firstb[u])
            vals[nm] = max(0.0, float(excess[k]) - absent) / a_.mu
    paid = sum(float(a_.c[t]) for t in a_.rec if run.dec[t] == RECOMP)
    extra = run.stall_fwd + run.stall_bwd + run.recompute
    vals["sigma"] = (extra - paid) / a_.tu
    return complete_point(lin, vals)


def deficit_cover_bound(inst: Instance, M: int, time_limit_s: float, *,
                        deadline: float | None = None, cutoff_s: float | None = None,
                        nodes: int = NODE_LIMIT, max_lines: int | None = MAX_LINES
                        ) -> tuple[float | None, dict]:
    """``T* +`` the certified value of the joint deficit cover (s), lowered with
    :func:`~slackopt.solvers.milp.certify.safe_lp.seconds_below`, within `time_limit_s`.

    Args:
        inst, M: the instance and the budget (bytes).
        time_limit_s: limit (s) of the model build and the certified branch and bound.
        deadline: perf_counter time after which nothing new starts.
        cutoff_s: a step (s) no plan needs to beat (the incumbent's): nodes bounded at
            or above it are not branched.
        nodes: most node LPs of the branch and bound (its default: ``NODE_LIMIT``).
        max_lines: lines of f_k per op (:func:`build_deficit_cover`).

    Returns:
        (bound in s or None when there is no model (``info["status"]`` "no model":
        :func:`build_deficit_cover` says when), no time to build it (the limit or the
        deadline passed before or while it was built: the status says which) or no
        certificate, info: the model's size and the branch and bound's ``stopped``,
        ``nodes``, ``root_bound_s``).
    """
    end = time.perf_counter() + float(time_limit_s)
    if deadline is not None:
        end = min(end, deadline)
    if time.perf_counter() >= end:
        return None, {"status": "no time left to build the model"}
    try:
        built = build_deficit_cover(inst, M, max_lines, deadline=end)
    except ModelTimeout as e:
        return None, {"status": str(e)}
    if built is None:
        return None, {"status": "no model"}
    lin, info = built
    tu, T_star = info["time_unit_s"], float(inst.ideal_time_s)
    cutoff = None if cutoff_s is None else max(0.0, (cutoff_s - T_star) / tu)
    val, bb = certified_milp_bound(lin, max(0.0, end - time.perf_counter()), cutoff=cutoff,
                                   deadline=end, node_limit=nodes)
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
    stages: bool = False  # one stall for the whole step: a stage's bubbles absorb stalls
    single_pass: bool = True

    def __call__(self, inst: Instance, M: int, ctx: BoundContext) -> BoundValue:
        t0 = time.perf_counter()
        lb, info = deficit_cover_bound(inst, M, self.share * max(0.0, ctx.left() - 0.3),
                                       deadline=ctx.deadline - 0.3, cutoff_s=ctx.upper_s,
                                       nodes=self.nodes)
        info.update(bound_s=lb, seconds=round(time.perf_counter() - t0, 4))
        return BoundValue(bounds={"deficit_cover": lb}, info={"deficit_cover": info})
