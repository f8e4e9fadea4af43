"""torchtitan's ``auto_perf_maxing`` memory policy: a two-level program that splits the
budget per layer into keep / recompute / offload fractions (outer LP), then turns each
layer's fractions into per-tensor tags (inner integer program), identical layers solved once.

Written from the descriptions in the torchtitan pull requests (graph_trainer):
pytorch/torchtitan#3881 (estimators and a first outer program), #3942 and #3943 ("two-level
ILP for joint AC + CPU offload"), #3975 (the same with torchinsights estimators) and #4636
("budget-aware activation memory policy"), whose solver module is
``torchtitan/experiments/graph_trainer/auto_sac_offload_solver.py``. What it does there,
and what that becomes on a slackopt instance (bytes scaled by A and seconds by T* inside
the programs, for the solver's numerics):

**Outer LP** (PuLP/CBC), over the blocks L (``Instance.blocks``: layers >= 0 of the
saved tensors' producers), a_L = the saved bytes produced in block L, variables k_L,
r_L, o_L in [0, 1]:

- ``split``: k_L + r_L + o_L = 1;
- ``mustkeep``: k_L >= (bytes of L that cannot be recomputed) / a_L (torchtitan: RNG ops
  and layer boundaries; here: c = inf, which includes the block inputs and RNG states);
- the last block offloads nothing: o_last = 0;
- peak rows, with E = the saved bytes outside the blocks (embedding and head, always
  kept; torchtitan's fixed bytes) and kept(<L) = sum over l < L of k_l a_l:
  forward at L: E + kept(<L) + o_{L-1} a_{L-1} + a_L <= M (the previous block's
  offloads still in flight); backward at L: E + kept(<L) + a_L + G_L + o_{L-1} a_{L-1} <=
  M, where G_L is the largest non-saved memory (gradients, transients) while block L's
  backward runs (``Instance.static_profile``) and o_{L-1} a_{L-1} the prefetch of the
  block below; loss: E + kept(all) + G_head <= M (G_head: the head's backward, the
  logits gradient);
- copy windows: o_L a_L <= W * F and o_L a_L <= W * B (D2H within a block's forward
  time, H2D within its backward time; F and B are the blocks' average forward and
  backward times, as torchtitan averages them; W the link bandwidth of the copy's
  direction, W_d2h or W_h2d);
- host cap: sum of o_L a_L <= ``Instance.host_memory_bytes`` when set;
- objective: minimize sum of r_L F (recomputing a fraction of a block costs that
  fraction of its forward time; torchtitan's offload price is 0).

Infeasible: torchtitan re-solves with one slack on the peak rows to report the smallest
budget that admits a split, and tags nothing. Here: the keep-all plan (nothing tagged),
status "infeasible", the model's smallest budget in ``info["model_min_budget_bytes"]``
(and, as for every solver, the smallest budget at which the evaluator accepts the plan in
``min_budget_bytes``).

**Inner program**, per block (PuLP/CBC): binaries keep / recompute / offload per saved
tensor of the block, one per tensor; recompute barred where c = inf; offload barred for
tensors that cannot be recomputed (torchtitan's must-keep) and those below
``offload_min_bytes`` (torchtitan: 1 MiB); kept bytes <= k_L a_L (1 + 1e-6) (at least the
block's must-keep bytes: the LP meets k_L >= that share only within CBC's tolerance, a few
hundred bytes on a GB-sized block); offloaded
bytes may pass o_L a_L by at most 5%, the excess charged at its copy time; minimize the
recompute time of the recomputed tensors plus that charge. Blocks whose tensors (category,
size, recompute time, what is barred) and fractions agree are solved once and the tags
copied (torchtitan's layer signatures). Tensors outside the blocks are kept.

The plan runs under the barrier-free runtime. ``objective_s`` = T* + the LP's added
runtime, set exactly when the LP (the planner's memory model) says the budget is met;
the evaluator decides the status and may still find the plan over M (the model counts
a block's saved bytes as all live at once, not its transients in the forward pass nor
rebuild buffers, and the inner program may keep less than the LP asked). ``info`` holds
the LP fractions per block (``fractions``: {block: [k, r, o]}) and the bytes each
block's tags keep / recompute / offload (``tagged_bytes``).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from slackopt.errors import SolverError
from slackopt.instance import Instance
from slackopt.plan import KEEP, RECOMP, SWAP, Plan
from slackopt.simulate import simulate
from slackopt.solverbase import BaseSolver, Outcome, Param, Run

OFFLOAD_MIN_BYTES = 1 << 20
"""torchtitan's ``OFFLOAD_MIN_BYTES``: smaller tensors are not offloaded (bytes)."""
OFFLOAD_OVERSHOOT = 0.05
"""The inner program may offload up to 5% more than the outer LP's offload bytes."""
KEEP_TOLERANCE = 1e-6


def _cbc(time_limit_s: float | None) -> Any:
    from slackopt.solvers.milp.linear.backends import pulp_cbc

    kw: dict[str, Any] = {"msg": 0}
    if time_limit_s is not None:
        kw["timeLimit"] = max(1.0, float(time_limit_s))
    return pulp_cbc(**kw)


def _layer_layout(instance: Instance) -> dict[str, Any]:
    """Per-block quantities of the outer LP (bytes, seconds)."""
    blocks = list(instance.blocks)
    layers = np.asarray(instance.saved_layers)
    s = np.asarray(instance.s, dtype=np.int64)
    fixed = ~np.isfinite(instance.c)
    members = {b: np.flatnonzero(layers == b) for b in blocks}
    a = {b: int(s[m].sum()) for b, m in members.items()}
    floor = {b: int(s[m][fixed[m]].sum()) for b, m in members.items()}
    E = int(s[layers < 0].sum())
    op_layer = np.array([op.layer for op in instance.scheduled_ops], dtype=np.int64)
    is_bwd = np.asarray(instance.is_bwd, dtype=bool)
    static = np.asarray(instance.static_profile, dtype=np.int64)
    dur = np.asarray(instance.durations_s)
    in_block = op_layer >= 0
    G = {b: int(static[is_bwd & (op_layer == b)].max(initial=0)) for b in blocks}
    bwd_idx = np.flatnonzero(is_bwd)
    first_block_bwd = next((int(q) for q in bwd_idx if op_layer[q] >= 0), len(op_layer))
    head = bwd_idx[bwd_idx < first_block_bwd]
    G_head = int(static[head].max(initial=0))
    nb = max(len(blocks), 1)
    F = float(dur[~is_bwd & in_block].sum()) / nb
    B = float(dur[is_bwd & in_block].sum()) / nb
    return {"blocks": blocks, "members": members, "a": a, "floor": floor, "E": E, "G": G,
            "G_head": G_head, "F": F, "B": B}


def outer_lp(instance: Instance, budget_bytes: int, *, time_limit_s: float | None = None,
             elastic: bool = False) -> tuple[dict[int, tuple[float, float, float]] | None,
                                             dict[str, Any]]:
    """Solve the outer LP (module docstring) for budget M = `budget_bytes`.

    Args:
        time_limit_s: seconds for building and solving (None: no limit); the build looks
            at the clock after each block and stops when the time is up (status "Not
            Solved"), CBC gets what is left (at least its 1 s floor).
        elastic: add one slack (bytes) to every peak row and minimize it instead: the
            model's smallest budget is then M + slack.

    Returns:
        (fractions, info): ``fractions`` {block: (k, r, o)} (None if infeasible or not
        solved); ``info`` with ``status`` (PuLP's word), ``added_runtime_s`` (the
        objective, s), ``model_peak_bytes`` (the largest peak row) and, with `elastic`,
        ``slack_bytes``.
    """
    import pulp

    end = None if time_limit_s is None else time.perf_counter() + float(time_limit_s)
    lay = _layer_layout(instance)
    blocks = lay["blocks"]
    U = float(max(int(instance.A), 1))          # bytes -> units of A
    Tu = float(max(instance.ideal_time_s, 1e-12))
    Wd, Wh = float(instance.link.d2h_bytes_per_s), float(instance.link.h2d_bytes_per_s)
    a = {b: lay["a"][b] / U for b in blocks}
    prob = pulp.LpProblem("titan_outer", pulp.LpMinimize)
    k = {b: prob.add_variable(f"k_{b}", 0, 1) for b in blocks}
    r = {b: prob.add_variable(f"r_{b}", 0, 1) for b in blocks}
    o = {b: prob.add_variable(f"o_{b}", 0, 1) for b in blocks}
    slack = prob.add_variable("slack", 0) if elastic else 0
    Mb = int(budget_bytes) / U
    E = lay["E"] / U
    rows: list[Any] = []
    kept = pulp.LpAffineExpression()   # sum of k_q a_q over the blocks below, grown in order
    for i, b in enumerate(blocks):
        prob += k[b] + r[b] + o[b] == 1, f"split_{b}"
        if lay["a"][b] > 0:
            prob += k[b] >= min(1.0, lay["floor"][b] / lay["a"][b]), f"mustkeep_{b}"
        kept_below = kept.copy()
        kept.addterm(k[b], a[b])
        prev = o[blocks[i - 1]] * a[blocks[i - 1]] if i else 0
        fwd = E + kept_below + prev + a[b]
        bwd = E + kept_below + a[b] + lay["G"][b] / U + prev
        prob += fwd <= Mb + slack, f"peak_fwd_{b}"
        prob += bwd <= Mb + slack, f"peak_bwd_{b}"
        rows += [fwd, bwd]
        prob += o[b] * a[b] <= Wd * lay["F"] / U, f"d2h_{b}"
        prob += o[b] * a[b] <= Wh * lay["B"] / U, f"h2d_{b}"
        if end is not None and time.perf_counter() > end:
            return None, {"status": "Not Solved",
                          "note": f"the time limit ended the build after {i + 1} of "
                                  f"{len(blocks)} blocks"}
    if blocks:
        prob += o[blocks[-1]] == 0, "last_no_offload"
        loss = E + pulp.lpSum(k[q] * a[q] for q in blocks) + lay["G_head"] / U
        prob += loss <= Mb + slack, "peak_loss"
        rows.append(loss)
        if instance.host_memory_bytes is not None:
            prob += (pulp.lpSum(o[q] * a[q] for q in blocks)
                     <= instance.host_memory_bytes / U), "host_cap"
    runtime = pulp.lpSum(r[q] * (lay["F"] / Tu) for q in blocks)
    prob += (slack if elastic else runtime), "objective"
    left = None if end is None else max(end - time.perf_counter(), 0.0)
    status = pulp.LpStatus[prob.solve(_cbc(left))]
    info: dict[str, Any] = {"status": status}
    if status != "Optimal":
        return None, info
    frac = {b: (float(k[b].value() or 0.0), float(r[b].value() or 0.0),
                float(o[b].value() or 0.0)) for b in blocks}
    info["added_runtime_s"] = float(pulp.value(runtime) or 0.0) * Tu
    info["model_peak_bytes"] = int(math.ceil(max((float(pulp.value(e)) for e in rows),
                                                 default=0.0) * U))
    if elastic:
        info["slack_bytes"] = int(math.ceil(float(slack.value() or 0.0) * U))
    return frac, info


def inner_tags(instance: Instance, members: np.ndarray, fractions: tuple[float, float, float],
               *, offload_min_bytes: int = OFFLOAD_MIN_BYTES,
               time_limit_s: float | None = None) -> np.ndarray:
    """One block's tags from its (k, r, o) fractions: the inner program (module docstring).

    Args:
        members: saved positions of the block's tensors.
        fractions: the outer LP's (k, r, o) for the block.

    Returns:
        int8 decisions (KEEP/RECOMP/SWAP) aligned with `members`.

    Raises:
        SolverError: the program has no solution (torchtitan refuses to tag then).
    """
    import pulp

    s = np.asarray(instance.s, dtype=np.int64)[members]
    c = np.asarray(instance.c)[members]
    act = int(s.sum())
    if act == 0:
        return np.full(len(members), KEEP, dtype=np.int8)
    U = float(act)
    kf, _, of = fractions
    W = float(instance.link.h2d_bytes_per_s)  # an exposed copy is an H2D the compute waits on
    prob = pulp.LpProblem("titan_inner", pulp.LpMinimize)
    n = len(members)
    xk = [prob.add_variable(f"k{j}", cat="Binary") for j in range(n)]
    xr = [prob.add_variable(f"r{j}", cat="Binary") for j in range(n)]
    xo = [prob.add_variable(f"o{j}", cat="Binary") for j in range(n)]
    for j in range(n):
        prob += xk[j] + xr[j] + xo[j] == 1
        if not np.isfinite(c[j]):
            prob += xr[j] == 0
            prob += xo[j] == 0
        elif s[j] < offload_min_bytes:
            prob += xo[j] == 0
    keep = pulp.lpSum(xk[j] * (s[j] / U) for j in range(n))
    off = pulp.lpSum(xo[j] * (s[j] / U) for j in range(n))
    short = prob.add_variable("off_short", 0)
    # the LP's k_L >= must-keep share holds only within the LP solver's tolerance
    must = float(s[~np.isfinite(c)].sum()) / U
    prob += keep <= max(kf, must) * (1 + KEEP_TOLERANCE) + 1.0 / U, "keep_target"
    prob += short >= off - of, "offload_excess"
    prob += short <= OFFLOAD_OVERSHOOT * of, "offload_cap"
    cost = pulp.lpSum(xr[j] * float(c[j]) for j in range(n) if np.isfinite(c[j]))
    prob += cost + short * (U / W), "objective"
    status = pulp.LpStatus[prob.solve(_cbc(time_limit_s))]
    if status != "Optimal":
        raise SolverError(f"titan-auto: the inner program of a block is {status} for "
                          f"fractions keep {kf:.4f}, offload {of:.4f}; torchtitan refuses "
                          "to tag from an unsolved program")
    dec = np.full(n, KEEP, dtype=np.int8)
    for j in range(n):
        if (xr[j].value() or 0) > 0.5:
            dec[j] = RECOMP
        elif (xo[j].value() or 0) > 0.5:
            dec[j] = SWAP
    return dec


def _signature(instance: Instance, members: np.ndarray, frac: tuple[float, float, float],
               offload_min_bytes: int) -> tuple:
    s = np.asarray(instance.s)
    c = np.asarray(instance.c)
    cats = instance.saved_categories
    items = tuple((cats[q], int(s[q]), float(c[q]) if np.isfinite(c[q]) else None,
                   int(s[q]) >= offload_min_bytes) for q in members.tolist())
    return items, tuple(round(x, 9) for x in frac)


class TitanAuto(BaseSolver):
    """torchtitan's ``auto_perf_maxing``: an LP splits each block into keep/recompute/offload.

    The per-block fractions become per-tensor tags by a small integer program per block;
    the programs and every modelling choice are in the module docstring.

    Args:
        offload_min_bytes: tensors below this size are never offloaded (bytes; torchtitan
            1 MiB).

    Outcomes: M >= P: keep-all (torchtitan: nothing to do). No blocks or an infeasible
    outer LP: the untagged graph, i.e. the keep-all plan, status "infeasible",
    ``info["model_min_budget_bytes"]`` from the elastic LP (no blocks: P). Otherwise the
    tags; the evaluator decides the status and ``objective_s`` is the model's step (so it
    is set exactly when the LP calls the budget met). Requires PuLP's CBC (a slackopt
    dependency).

    Time limit: each CBC program gets the time left (at least CBC's 1 s), the elastic LP
    runs only while time is left, and no block's inner program starts once it is used up:
    the blocks left untagged keep their tensors (``info["note"]`` says how many were
    tagged; status "timeout" when that plan does not run under M). The outer LP cut off
    unsolved gives the keep-all plan with status "timeout".
    """

    name = "titan-auto"
    param_specs = {"offload_min_bytes": Param(int, min=0,
                                              doc="bytes; smaller tensors are not offloaded")}

    def __init__(self, *, offload_min_bytes: int = OFFLOAD_MIN_BYTES) -> None:
        self.offload_min_bytes = offload_min_bytes

    def plan(self, instance: Instance, budget_bytes: int, run: Run) -> Outcome:
        M, P = int(budget_bytes), int(instance.P)
        if M >= P:
            return Outcome(Plan.keep_all(instance), objective_s=instance.ideal_time_s,
                           info={"model_fits": True, "note": "M >= P: nothing to do"})
        if not instance.blocks:
            return Outcome(Plan.keep_all(instance), status="infeasible",
                           info={"model_fits": False, "model_min_budget_bytes": P,
                                 "note": "no blocks (no saved tensor has a layer >= 0): "
                                         "nothing to split"})
        frac, lp = outer_lp(instance, M, time_limit_s=_cbc_limit(run))
        if frac is None:
            if lp["status"] != "Infeasible" and run.expired():
                return Outcome(Plan.keep_all(instance), status="timeout",
                               info={"lp_status": lp["status"],
                                     "note": "the time limit ended the outer LP unsolved"})
            info = {"model_fits": False, "lp_status": lp["status"]}
            if run.expired():
                info["model_min_budget_note"] = "the time limit came before the elastic LP"
                return Outcome(Plan.keep_all(instance), status="infeasible", info=info)
            _, el = outer_lp(instance, M, time_limit_s=_cbc_limit(run), elastic=True)
            if "slack_bytes" in el:
                info["model_min_budget_bytes"] = M + el["slack_bytes"]
            return Outcome(Plan.keep_all(instance), status="infeasible", info=info)
        lay = _layer_layout(instance)
        dec = np.full(instance.n_saved, KEEP, dtype=np.int8)
        cache: dict[tuple, np.ndarray] = {}
        tagged: dict[int, list[int]] = {}
        s = np.asarray(instance.s, dtype=np.int64)
        for b in lay["blocks"]:
            m = lay["members"][b]
            sig = _signature(instance, m, frac[b], self.offload_min_bytes)
            if sig not in cache:
                if run.expired():
                    break
                cache[sig] = inner_tags(instance, m, frac[b],
                                        offload_min_bytes=self.offload_min_bytes,
                                        time_limit_s=_cbc_limit(run))
            dec[m] = cache[sig]
            tagged[b] = [int(s[m][cache[sig] == d].sum()) for d in (KEEP, RECOMP, SWAP)]
        info = {"model_fits": True, "fractions": {b: list(v) for b, v in frac.items()},
                "tagged_bytes": tagged, "inner_solves": len(cache),
                "model_peak_bytes": lp["model_peak_bytes"]}
        plan = Plan(dec, instance.saved_names)
        if len(tagged) == len(lay["blocks"]):
            return Outcome(plan, objective_s=instance.ideal_time_s + lp["added_runtime_s"],
                           info=info)
        # the time limit stopped the tagging: the blocks left untagged keep everything
        info["model_fits"] = False
        info["note"] = (f"the time limit ended the tagging after {len(tagged)} of "
                        f"{len(lay['blocks'])} blocks; the other blocks keep their tensors")
        ev = simulate(instance, plan, M)
        return Outcome(plan, status=None if ev.feasible else "timeout", evaluation=ev,
                       info=info)


def _cbc_limit(run: Run) -> float | None:
    """CBC's time limit for the next program of `run`: the time left (s), None without a
    limit (:func:`_cbc` raises it to CBC's 1 s floor)."""
    return None if run.time_limit_s is None else max(run.remaining(), 0.0)


__all__ = ["TitanAuto", "outer_lp", "inner_tags", "OFFLOAD_MIN_BYTES"]
