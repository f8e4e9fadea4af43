"""Classic baselines: keep everything, recompute everything, block checkpointing and
Chen et al.'s sqrt(n) checkpointing.

Paper: ../shared/papers/slackswap-2026.txt, section 4.1 ("Baselines": Checkpoint, the
fewest blocks recomputed from their inputs that fit, as in ZeRO-Offload and Megatron-LM)
and section 2.3 / 5 (Chen et al., 2016, "Training Deep Nets with Sublinear Memory Cost":
checkpoint every sqrt(n) layers); exact rules in ../shared/spec/semantics.md
("Checkpoint baseline"). None of these policies uses the host link.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from slackopt.bisection import smallest_true
from slackopt.instance import Instance
from slackopt.plan import KEEP, RECOMP, Plan
from slackopt.simulate import Evaluation, simulate
from slackopt.solver import SolveResult

BOUNDARY_CATEGORIES = ("block_input", "block_output")
"""Tensor categories a checkpointed block keeps: its input, and for the last block its
output (the head's input, which the head's backward reads and no block rebuilds)."""


class KeepAll:
    """Keep every saved tensor (the unlimited-memory reference).

    Feasible iff M >= P (semantics.md, invariant 1); otherwise the status is
    "infeasible" with ``info["min_budget_bytes"] = P``. The keep-all plan is returned
    either way, so the evaluator can report where it fails.
    """

    name = "keep_all"

    @property
    def params(self) -> dict[str, Any]:
        return {}

    def solve(self, instance: Instance, budget_bytes: int, *, time_limit_s: float | None = None,
              seed: int | None = None) -> SolveResult:
        t0 = time.perf_counter()
        ok = int(budget_bytes) >= int(instance.P)
        info: dict[str, Any] = {}
        if not ok:
            info["min_budget_bytes"] = int(instance.P)
        return SolveResult(
            plan=Plan.keep_all(instance), solver=self.name, params={},
            status="feasible" if ok else "infeasible",
            objective_s=instance.ideal_time_s if ok else None,
            lower_bound_s=instance.ideal_time_s,
            planning_time_s=time.perf_counter() - t0, seed=seed, info=info)


def checkpoint_blocks(instance: Instance) -> list[int]:
    """The blocks (layers >= 0 of the saved tensors' producers) in forward order."""
    layers = np.asarray(instance.saved_layers)
    return sorted({int(b) for b in layers.tolist() if b >= 0})


def checkpoint_plan(instance: Instance, k: int) -> Plan:
    """Block checkpointing of the bottom `k` blocks (semantics.md, "Checkpoint baseline").

    In each of the first k blocks (forward order) every saved tensor is recomputed except
    the block boundaries (categories "block_input" and "block_output": the input of the
    next block, or of the head) and tensors that cannot be rebuilt (c = inf); all other
    tensors, embedding and head tensors (layer -1) included, are kept.
    """
    blocks = checkpoint_blocks(instance)
    dec = np.full(instance.n_saved, KEEP, dtype=np.int8)
    if k > 0 and blocks:
        chosen = np.isin(np.asarray(instance.saved_layers), blocks[:k])
        cats = np.array([cat not in BOUNDARY_CATEGORIES for cat in instance.saved_categories],
                        dtype=bool)
        dec[chosen & cats & np.isfinite(instance.c)] = RECOMP
    return Plan(dec, instance.saved_names)


class Checkpoint:
    """Block checkpointing with the fewest blocks that fit (sec. 4.1).

    Finds the smallest k such that :func:`checkpoint_plan` (bottom k blocks recomputed
    from their inputs) is feasible under the evaluator, by bisection over k (feasibility
    is monotone in k: each extra block only frees memory between its forward and its
    backward pass). k = 0 is keep-all, taken without evaluation when M >= P. If even all
    blocks do not fit the status is "infeasible" and ``info["min_budget_bytes"]`` is the
    peak of the all-blocks plan simulated with M = P. The policy never swaps.
    """

    name = "checkpoint"

    @property
    def params(self) -> dict[str, Any]:
        return {}

    def solve(self, instance: Instance, budget_bytes: int, *, time_limit_s: float | None = None,
              seed: int | None = None) -> SolveResult:
        t0 = time.perf_counter()
        M = int(budget_bytes)
        blocks = checkpoint_blocks(instance)
        L = len(blocks)
        evals: dict[int, Evaluation] = {}

        def feasible(k: int) -> bool:
            if k not in evals:
                evals[k] = simulate(instance, checkpoint_plan(instance, k), M)
            return bool(evals[k].feasible)

        def result(k: int, status: str, **extra: Any) -> SolveResult:
            pl = checkpoint_plan(instance, k)
            info = {"k": k, "blocks": L, "evaluations": len(evals),
                    "recomputed_bytes": pl.bytes_by_decision(instance)["recomp"], **extra}
            ev = evals.get(k)
            return SolveResult(
                plan=pl, solver=self.name, params={}, status=status,
                objective_s=(float(ev.step_time_s) if ev is not None and ev.feasible
                             else instance.ideal_time_s if k == 0 and status == "feasible"
                             else None),
                planning_time_s=time.perf_counter() - t0, seed=seed, info=info)

        if M >= instance.P:
            return result(0, "feasible")
        if L == 0 or not feasible(L):
            peak = int(simulate(instance, checkpoint_plan(instance, L), int(instance.P)).peak_bytes)
            return result(L, "infeasible", min_budget_bytes=peak)
        k = smallest_true(feasible, 0, L)
        return result(k, "feasible")


UNBOUNDED_BYTES = 2**62
"""A budget no instance reaches: simulating under it gives a plan's unconstrained peak."""

MIN_BUDGET_REL_TOL = 0.005
"""Resolution of the min-budget bisections of the baselines, as a share of P."""


def min_budget_by_bisection(instance: Instance, feasible_at: Callable[[int], bool],
                            lo: int) -> int | None:
    """Smallest budget (bytes) in (lo, P] at which ``feasible_at`` holds, within 0.5% of P.

    Feasibility is assumed monotone in M and False at `lo`; returns None if it does not
    hold at P either (about log2(1 / 0.005) = 8 calls).
    """
    P = int(instance.P)
    if int(lo) >= P or not feasible_at(P):
        return None
    return smallest_true(feasible_at, int(lo), P, tol=max(1, math.ceil(MIN_BUDGET_REL_TOL * P)))


def _fixed_plan_result(name: str, instance: Instance, plan: Plan, M: int, t0: float,
                       seed: int | None, info: dict[str, Any]) -> SolveResult:
    """SolveResult of a budget-oblivious plan without swaps: it runs without waiting, so
    it is feasible iff M covers its unconstrained peak, which is its min budget."""
    ev = simulate(instance, plan, UNBOUNDED_BYTES)
    peak = int(ev.peak_bytes)
    ok = M >= peak
    info = {**info, "peak_bytes": peak,
            "recomputed_bytes": plan.bytes_by_decision(instance)["recomp"]}
    if not ok:
        info["min_budget_bytes"] = peak
    return SolveResult(
        plan=plan, solver=name, params={}, status="feasible" if ok else "infeasible",
        objective_s=float(ev.step_time_s) if ok else None,
        planning_time_s=time.perf_counter() - t0, seed=seed, info=info)


class RecomputeAll:
    """Recompute every saved tensor that can be rebuilt; keep the others (c = inf).

    The memory floor of pure recomputation without block structure: each tensor is
    dropped after its last forward reader and rebuilt (recipe inputs first) before its
    first backward need. Budget-oblivious: feasible iff M covers the plan's peak, which
    ``info["min_budget_bytes"]`` reports otherwise. Never uses the link.
    """

    name = "recompute_all"

    @property
    def params(self) -> dict[str, Any]:
        return {}

    def solve(self, instance: Instance, budget_bytes: int, *, time_limit_s: float | None = None,
              seed: int | None = None) -> SolveResult:
        t0 = time.perf_counter()
        return _fixed_plan_result(self.name, instance, Plan.uniform(instance, RECOMP),
                                  int(budget_bytes), t0, seed, {})


def sqrt_checkpoint_plan(instance: Instance, segment: int | None = None) -> Plan:
    """Chen et al. (2016) sqrt(n) checkpointing over the blocks of `instance`.

    The L blocks (:func:`checkpoint_blocks`) are cut into segments of ``segment`` blocks
    (default ceil(sqrt(L))); the output of the last block of each segment (the block's
    last-produced saved tensor: the next block's input) is a checkpoint and kept; every
    other saved tensor of a block that can be rebuilt is recomputed, rebuilds chaining
    back to the previous checkpoint; tensors that cannot be rebuilt (c = inf) and those
    outside the blocks (embedding, head) are kept.

    In the transformer workloads a block input cannot be rebuilt (spec/workloads.md:
    "block input x, rebuilt by nothing"), so every block input stays and the segments
    collapse to single blocks: the plan equals block checkpointing of all blocks
    (``checkpoint_plan(instance, L)``). On chains (``make("chain")``) it keeps every
    ``segment``-th activation, as in the paper.
    """
    blocks = checkpoint_blocks(instance)
    dec = np.full(instance.n_saved, KEEP, dtype=np.int8)
    if not blocks:
        return Plan(dec, instance.saved_names)
    seg = max(1, int(segment) if segment is not None else math.ceil(math.sqrt(len(blocks))))
    layers = np.asarray(instance.saved_layers)
    rebuildable = np.isfinite(instance.c)
    for j, b in enumerate(blocks):
        members = np.flatnonzero(layers == b)      # production order
        dec[members[rebuildable[members]]] = RECOMP
        if (j + 1) % seg == 0 or j == len(blocks) - 1:
            dec[members[-1]] = KEEP                # the segment's checkpoint
    return Plan(dec, instance.saved_names)


class SqrtCheckpoint:
    """Chen et al. (2016) sqrt(n) checkpointing: keep one block output per sqrt(L) blocks.

    See :func:`sqrt_checkpoint_plan`.

    Budget-oblivious: feasible iff M covers the plan's peak, which
    ``info["min_budget_bytes"]`` reports otherwise. Never uses the link.

    Args:
        segment: blocks per segment (default ceil(sqrt(L))).
    """

    name = "sqrt_checkpoint"

    def __init__(self, *, segment: int | None = None) -> None:
        if segment is not None and int(segment) < 1:
            raise ValueError("segment must be >= 1")
        self.segment = None if segment is None else int(segment)

    @property
    def params(self) -> dict[str, Any]:
        return {"segment": self.segment}

    def solve(self, instance: Instance, budget_bytes: int, *, time_limit_s: float | None = None,
              seed: int | None = None) -> SolveResult:
        t0 = time.perf_counter()
        L = len(checkpoint_blocks(instance))
        seg = (self.segment or max(1, math.ceil(math.sqrt(L)))) if L else None
        res = _fixed_plan_result(self.name, instance,
                                 sqrt_checkpoint_plan(instance, self.segment),
                                 int(budget_bytes), t0, seed, {"blocks": L, "segment": seg})
        res.params = self.params
        return res


__all__ = ["KeepAll", "Checkpoint", "RecomputeAll", "SqrtCheckpoint", "checkpoint_plan",
           "checkpoint_blocks", "sqrt_checkpoint_plan", "min_budget_by_bisection"]
