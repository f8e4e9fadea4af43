"""SlackSwap's plan at one budget (both passes, :func:`plan`) and the solver
(:class:`SlackSwap`) that validates each plan in the evaluator and repairs it (sec. 3.4)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from slackopt.instance import Instance
from slackopt.linkbudget import forward_link_budget_bytes
from slackopt.plan import RECOMP, SWAP, Plan
from slackopt.simulate import Evaluation, simulate
from slackopt.solverbase import (
    MIN_BUDGET_REL_TOL,
    BaseSolver,
    Outcome,
    Param,
    Run,
)
from slackopt.solvers.slackswap.prep import _positions, _prep
from slackopt.solvers.slackswap.recomp_pass import Pass2Result, pass2_detailed
from slackopt.solvers.slackswap.swap_pass import SWAP_ORDERS, SwapSet, offload_end_op, pass1

GUARD_STEP = 0.02
"""Raise of the offload guard g after a round with forward stalls (docs/model.md)."""


@dataclass
class PlannedRound:
    """One planning round (both passes) at one budget.

    Attributes:
        decisions: int8 decisions per saved tensor.
        swap: the Pass 1 result (empty when the link is not used).
        pass2: the Pass 2 result.
        M: the budget planned for (bytes).
        g: the offload guard used.
    """

    decisions: np.ndarray
    swap: SwapSet
    pass2: Pass2Result
    M: int
    g: float

    def to_plan(self, instance: Instance) -> Plan:
        return Plan(self.decisions, instance.saved_names)


def plan(
    instance: Instance,
    M: int,
    *,
    g: float = 0.02,
    excluded: Any = (),
    forced_recomp: Any = (),
    swap_order: str = "rho",
    use_link: bool = True,
) -> PlannedRound:
    """Both passes of Algorithm 1 at budget M (sec. 3.2-3.3).

    Args:
        instance: the problem.
        M: budget (bytes).
        g: offload guard.
        excluded: saved positions or names Pass 1 must not swap.
        forced_recomp: positions or names recomputed from the start (repair, sec. 3.4);
            tensors with c = inf are ignored here. They are also excluded from Pass 1.
        swap_order: "rho" (the paper) or "production" (swap-first ablation).
        use_link: False skips Pass 1 (recompute-only ablation, and the no-swap plan).

    Returns:
        The :class:`PlannedRound`.
    """
    pr = _prep(instance)
    n = pr.n
    dec = np.zeros(n, dtype=np.int8)
    forced = _positions(instance, forced_recomp)
    forced = forced[pr.finite_c[forced]] if forced.size else forced
    dec[forced] = RECOMP
    if use_link:
        ex = np.union1d(_positions(instance, excluded), forced)
        sw = pass1(instance, M, g, ex, order=swap_order)
    else:
        nan = np.full(n, np.nan)
        sw = SwapSet(np.zeros(0, dtype=np.int64), nan, nan.copy(), 0, int(instance.P) - int(M))
    dec[sw.positions] = SWAP
    p2 = pass2_detailed(instance, M, dec, offload_end_op(instance, sw.offload_end_s))
    return PlannedRound(p2.decisions, sw, p2, int(M), float(g))


# --------------------------------------------------------------------------- the solver
def _stalls(ev: Evaluation) -> float:
    return float(ev.stall_fwd_s) + float(ev.stall_bwd_s)


class SlackSwap(BaseSolver):
    """SlackSwap (Algorithm 1 with the validation and repair of sec. 3.4).

    Rounds: each round plans with :func:`plan` and evaluates the plan with
    :func:`slackopt.simulate.simulate` at the true budget M. Repairs before the next round
    (docs/model.md): forward stalls raise g by 0.02; a tensor whose H2D kept the compute
    stream waiting for w seconds becomes recomp in later rounds if c_t < w, else it is
    excluded from S; an infeasible plan is re-planned at ``M * (1 - 0.01 * 2**k)``, k = 0, 1,
    ... (k counts infeasible rounds). At most ``max_rounds`` plans are evaluated in all;
    the last evaluation is reserved for the no-swap plan (Pass 2 alone at M) unless a
    feasible plan without stalls stops the rounds early (or ``max_rounds`` is 1). A plan
    identical to one already evaluated is not evaluated again (it is logged with
    ``duplicate_of``); when a round repairs nothing new the swap rounds end. The fastest
    feasible evaluated plan (step time) is returned.

    ``info``: ``rounds`` (one dict per planning round: kind "swap"/"no_swap",
    ``M_planned_bytes``, ``g``, ``feasible``, ``step_time_s``, ``throughput``, stalls,
    ``recompute_s``, ``peak_bytes``, swapped/recomputed bytes, Pass 2 fallback blocks,
    ``failure``; ``evaluation``, its number among evaluated plans, or ``duplicate_of``),
    ``evaluations``, ``chosen_evaluation``, ``swapped_bytes``,
    ``recomputed_bytes``, ``counts``, ``link_budget_bytes`` ((1 - g) W T_F) and
    ``link_budget_used`` (swapped bytes / link budget).

    Host pinned-memory limit (``instance.host_memory_bytes``): Pass 1 swaps at most the
    limit's worth of bytes in all, so host occupancy never exceeds it; tensors that would
    exceed it fall back to recompute (Pass 2, where memory requires it), else keep.

    If M >= P the keep-all plan is returned without evaluation. If no round is feasible
    the status is "infeasible" and ``info["min_budget_bytes"]`` is the smallest budget at
    which SlackSwap finds a feasible plan, by bisection over M in (M, P] (feasibility
    assumed monotone in M; resolution 0.5% of P; P itself always works: keep-all).

    Args:
        g: offload guard (share of T_F), 0.02 in the paper.
        max_rounds: most evaluated plans per solve (6 in the paper).
        swap_order: "rho" (decreasing recompute cost per byte) or "production"
            (swap-first ablation, sec. 4.4).
        use_link: False drops Pass 1 (recompute-only ablation); its rounds only repair
            infeasibility.
        min_budget_search: compute ``min_budget_bytes`` when infeasible (costs about eight
            more solves).
    """

    name = "slackswap"
    param_specs = {
        "g": Param(float, min=0.0, below=1.0, doc="offload guard, share of T_F"),
        "max_rounds": Param(int, min=1), "swap_order": Param(str, choices=SWAP_ORDERS),
        "use_link": Param(bool), "min_budget_search": Param(bool),
    }

    def __init__(self, *, g: float = 0.02, max_rounds: int = 6, swap_order: str = "rho",
                 use_link: bool = True, min_budget_search: bool = True) -> None:
        self.g = g
        self.max_rounds = max_rounds
        self.swap_order = swap_order
        self.use_link = use_link
        self.min_budget_search = min_budget_search

    # ------------------------------------------------------------------ rounds
    def _rounds(self, inst: Instance, M: int, deadline: float | None) -> dict[str, Any]:
        """Run the validation/repair rounds at budget M; return the best, the log and
        ``seen``, every plan evaluated (decision bytes -> (its Evaluation under M, its
        number))."""
        tol = max(1e-9, 1e-6 * inst.ideal_time_s)
        c = np.asarray(inst.c)
        seen: dict[bytes, tuple[Evaluation, int]] = {}
        rounds: list[dict[str, Any]] = []
        best: tuple[Evaluation, PlannedRound, int] | None = None
        n_eval = 0
        stopped = False
        timed_out = False

        def out_of_time() -> bool:
            return deadline is not None and time.perf_counter() > deadline

        def evaluate(pl: PlannedRound, kind: str) -> tuple[Evaluation, bool]:
            nonlocal n_eval, best
            key = pl.decisions.tobytes()
            if key in seen:
                ev, rid = seen[key]
                rounds.append(self._round_info(inst, pl, ev, kind, duplicate_of=rid))
                return ev, False
            ev = simulate(inst, pl.to_plan(inst), M)
            n_eval += 1
            seen[key] = (ev, n_eval)
            rounds.append(self._round_info(inst, pl, ev, kind, evaluation=n_eval))
            if ev.feasible and (best is None or ev.step_time_s < best[0].step_time_s):
                best = (ev, pl, n_eval)
            return ev, True

        if self.use_link:
            g = self.g
            k_inf = 0
            M_plan = M
            excluded: set[int] = set()
            forced: set[int] = set()
            iters = 0
            swap_cap = max(1, self.max_rounds - 1)  # one evaluation left for the no-swap plan
            while n_eval < swap_cap and iters < 4 * self.max_rounds:
                if out_of_time():
                    timed_out = True
                    break
                iters += 1
                pl = plan(inst, M_plan, g=g, excluded=sorted(excluded),
                          forced_recomp=sorted(forced), swap_order=self.swap_order)
                ev, new = evaluate(pl, "swap")
                if ev.feasible and _stalls(ev) <= tol:
                    stopped = True
                    break
                state = (g, M_plan, len(excluded), len(forced))
                if ev.stall_fwd_s > tol:
                    g = min(g + GUARD_STEP, 0.99)
                for nm, w in (ev.h2d_stall_s or {}).items():
                    if w <= tol:
                        continue
                    k = inst.saved_position(nm)
                    if c[k] < w:
                        forced.add(k)
                    else:
                        excluded.add(k)
                if not ev.feasible:
                    M_plan = int(math.floor(M * (1.0 - 0.01 * 2 ** k_inf)))
                    k_inf += 1
                    if M_plan <= 0:
                        break
                if not new and state == (g, M_plan, len(excluded), len(forced)):
                    break  # nothing left to repair: the rounds would repeat
            if not stopped and not timed_out and n_eval < self.max_rounds:
                evaluate(plan(inst, M, use_link=False), "no_swap")
        else:
            k_inf = 0
            M_plan = M
            while n_eval < self.max_rounds:
                if out_of_time():
                    timed_out = True
                    break
                pl = plan(inst, M_plan, use_link=False)
                ev, new = evaluate(pl, "no_swap")
                if ev.feasible:
                    break  # no swaps: no stall to repair
                M_plan = int(math.floor(M * (1.0 - 0.01 * 2 ** k_inf)))
                k_inf += 1
                if M_plan <= 0:
                    break
        return {"best": best, "rounds": rounds, "evaluations": n_eval, "timed_out": timed_out,
                "seen": seen}

    @staticmethod
    def _round_info(inst: Instance, pl: PlannedRound, ev: Evaluation, kind: str,
                    evaluation: int | None = None,
                    duplicate_of: int | None = None) -> dict[str, Any]:
        s = inst.s
        d = {
            "kind": kind,
            "M_planned_bytes": pl.M,
            "g": pl.g,
            "feasible": bool(ev.feasible),
            "step_time_s": float(ev.step_time_s),
            "throughput": float(ev.throughput),
            "stall_fwd_s": float(ev.stall_fwd_s),
            "stall_bwd_s": float(ev.stall_bwd_s),
            "recompute_s": float(ev.recompute_s),
            "peak_bytes": int(ev.peak_bytes),
            "swapped_bytes": int(s[pl.decisions == SWAP].sum()),
            "recomputed_bytes": int(s[pl.decisions == RECOMP].sum()),
            "fallback_blocks": list(pl.pass2.fallback_blocks),
            "failure": ev.failure,
        }
        if evaluation is not None:
            d["evaluation"] = evaluation
        if duplicate_of is not None:
            d["duplicate_of"] = duplicate_of
        return d

    # ------------------------------------------------------------------ solve
    @classmethod
    def warm_up(cls) -> None:
        """Compile the evaluator's kernels and the planner's (Pass 1's offload sums, the
        prefetch queue, the per-window offload test of pipeline stages): one solve of an
        8-layer chain at 0.9 P, where the plan swaps (at 0.8 P the 4-layer warm-up chain
        has no plan, its minimum budget being 0.89 P, and the kernels of a swapping plan
        would not run), and one of that chain as stage 0 of a 1F1B pipeline of 2."""
        from slackopt.stage import build_stage
        from slackopt.workloads.synthetic import chain

        inst = chain(8, seed=0)
        cls().solve(inst, int(0.9 * inst.P))
        stage = build_stage(inst, "1f1b", 0, 2, 2)
        cls().solve(stage, int(0.6 * stage.P))

    def plan(self, instance: Instance, budget_bytes: int, run: Run) -> Outcome:
        """Plan `instance` under `budget_bytes` (M, bytes); deterministic (the seed is
        unused); the rounds stop at ``run.time_limit_s`` (status "timeout" if none was
        feasible by then)."""
        M = int(budget_bytes)
        P = int(instance.P)
        link_budget = forward_link_budget_bytes(instance, self.g)
        if M >= P:
            return Outcome(
                Plan.keep_all(instance), status="feasible", objective_s=instance.ideal_time_s,
                lower_bound_s=instance.ideal_time_s,
                info={"rounds": [], "evaluations": 0, "swapped_bytes": 0, "recomputed_bytes": 0,
                      "link_budget_bytes": link_budget, "link_budget_used": 0.0,
                      "reason": "M >= P: keep all"})
        deadline = None if run.time_limit_s is None else run.started + float(run.time_limit_s)
        out = self._rounds(instance, M, deadline)
        info: dict[str, Any] = {"rounds": out["rounds"], "evaluations": out["evaluations"],
                                "link_budget_bytes": link_budget}
        best = out["best"]
        if best is not None:
            ev, pl, rid = best
            swapped = int(instance.s[pl.decisions == SWAP].sum())
            info.update({
                "chosen_evaluation": rid,
                "swapped_bytes": swapped,
                "recomputed_bytes": int(instance.s[pl.decisions == RECOMP].sum()),
                "link_budget_used": swapped / link_budget if link_budget > 0 else 0.0,
                "counts": pl.to_plan(instance).counts(),
            })
            return Outcome(pl.to_plan(instance), status="feasible",
                           objective_s=float(ev.step_time_s), evaluation=ev, info=info)
        # No feasible round.
        last = plan(instance, M, g=self.g, swap_order=self.swap_order, use_link=self.use_link)
        info.update({"swapped_bytes": int(instance.s[last.decisions == SWAP].sum()),
                     "recomputed_bytes": int(instance.s[last.decisions == RECOMP].sum())})
        seen = out["seen"].get(last.decisions.tobytes())  # its round's evaluation, if it ran
        ev_last = seen[0] if seen is not None else None
        if out["timed_out"]:
            return Outcome(last.to_plan(instance), status="timeout", min_budget_bytes=None,
                           evaluation=ev_last, info=info)
        if self.min_budget_search:  # the base class bisects over feasible_at
            info["min_budget_method"] = (
                "bisection over M in (M, P], SlackSwap feasible at the upper end, "
                f"resolution {MIN_BUDGET_REL_TOL:.1%} of P")
        return Outcome(last.to_plan(instance), status="infeasible", evaluation=ev_last,
                       info=info)

    def feasible_at(self, instance: Instance, budget_bytes: int, run: Run | None = None) -> bool:
        """True if SlackSwap's rounds find a feasible plan at budget M (bytes), without a
        time limit (the predicate of the minimum-budget bisection)."""
        if budget_bytes >= instance.P:
            return True
        return self._rounds(instance, int(budget_bytes), None)["best"] is not None
