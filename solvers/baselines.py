"""Classic baselines: keep everything, and block checkpointing.

Paper: ../shared/papers/slackswap-2026.txt, section 4.1 ("Baselines": Checkpoint, the
fewest blocks recomputed from their inputs that fit, as in ZeRO-Offload and Megatron-LM);
exact rules in ../shared/spec/semantics.md ("Checkpoint baseline").
"""

from __future__ import annotations

import time
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


__all__ = ["KeepAll", "Checkpoint", "checkpoint_plan", "checkpoint_blocks"]
