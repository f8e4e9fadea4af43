"""Classic baselines: keep everything, recompute everything, block checkpointing and
Chen et al.'s sqrt(n) checkpointing.

Paper: the SlackSwap paper (2026), section 4.1 ("Baselines": Checkpoint, the
fewest blocks recomputed from their inputs that fit, as in ZeRO-Offload and Megatron-LM)
and section 2.3 / 5 (Chen et al., 2016, "Training Deep Nets with Sublinear Memory Cost":
checkpoint every sqrt(n) layers); exact rules in docs/model.md
("Checkpoint baseline"). None of these policies uses the host link.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from slackopt.instance import Instance
from slackopt.plan import KEEP, RECOMP, Plan
from slackopt.simulate import Evaluation, simulate
from slackopt.solverbase import BaseSolver, Outcome, Param, Run, min_budget_by_bisection

BOUNDARY_CATEGORIES = ("block_input", "block_output")
"""Tensor categories a checkpointed block keeps: its input, and for the last block its
output (the head's input, which the head's backward reads and no block rebuilds)."""


class KeepAll(BaseSolver):
    """Keep every saved tensor (the unlimited-memory reference).

    Feasible iff M >= P (docs/model.md, invariant 1); otherwise the status is
    "infeasible" with ``info["min_budget_bytes"] = P``. The keep-all plan is returned
    either way, so the evaluator can report where it fails. ``lower_bound_s`` = T*.
    """

    name = "keep-all"

    def plan(self, instance: Instance, budget_bytes: int, run: Run) -> Outcome:
        ok = int(budget_bytes) >= int(instance.P)
        return Outcome(Plan.keep_all(instance), status="feasible" if ok else "infeasible",
                       objective_s=instance.ideal_time_s if ok else None,
                       lower_bound_s=instance.ideal_time_s,
                       min_budget_bytes=None if ok else int(instance.P))


def checkpoint_blocks(instance: Instance) -> list[int]:
    """The blocks (layers >= 0 of the saved tensors' producers) in forward order
    (:attr:`slackopt.instance.Instance.blocks`)."""
    return list(instance.blocks)


def checkpoint_plan(instance: Instance, k: int) -> Plan:
    """Block checkpointing of the bottom `k` blocks (docs/model.md, "Checkpoint baseline").

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


def blocks_are_contiguous(instance: Instance) -> bool:
    """True if every block's saved tensors are produced in one run of the forward pass.

    Block checkpointing assumes the blocks follow each other (a chain of blocks: layer
    0's tensors, then layer 1's, ...). In a U-Net (:func:`slackopt.workloads.synthetic.unet`)
    level i's encoder tensors are produced early and its decoder tensors late, with the
    long skip ``e{i}`` spanning the levels in between, so this is False there.
    """
    layers = [int(b) for b in np.asarray(instance.saved_layers).tolist() if b >= 0]
    return all(a <= b for a, b in zip(layers, layers[1:], strict=False))


NO_BLOCKS = ("the instance has no blocks (no saved tensor has a layer >= 0), so there is "
             "nothing to checkpoint")
NOT_CONTIGUOUS_NOTE = (
    "the blocks are not contiguous in the forward pass (a block's tensors are produced "
    "before and after other blocks', e.g. long skip connections), so recomputing the bottom "
    "k blocks may lower the peak little or not at all")


def _keep_all_fits(instance: Instance, info: dict[str, Any]) -> Outcome:
    """M >= P: the keep-all plan, T = T*, with a note saying why nothing is recomputed."""
    info = {**info, "k": 0, "peak_bytes": int(instance.P), "recomputed_bytes": 0,
            "applies": True,
            "note": "M >= P: keep-all fits, so nothing is recomputed (T = T*)"}
    return Outcome(Plan.keep_all(instance), status="feasible",
                   objective_s=instance.ideal_time_s, lower_bound_s=instance.ideal_time_s,
                   info=info)


def _does_not_apply(name: str, instance: Instance, info: dict[str, Any], why: str) -> Outcome:
    """M < P and the policy cannot bring the peak below P: say so and return keep-all
    (status "infeasible", ``min_budget_bytes = P``) instead of a plan that is only slower."""
    P = int(instance.P)
    info = {**info, "k": 0, "peak_bytes": P, "recomputed_bytes": 0, "applies": False,
            "note": f"{name} does not apply: {why}; the smallest budget it reaches is P "
                    f"= {P} B (keep-all)"}
    return Outcome(Plan.keep_all(instance), status="infeasible", min_budget_bytes=P,
                   info=info)


class Checkpoint(BaseSolver):
    """Block checkpointing with the fewest blocks that fit (sec. 4.1).

    Finds the smallest k such that :func:`checkpoint_plan` (bottom k blocks recomputed
    from their inputs) fits the budget M (bytes). The plan never swaps, so it runs without
    waiting and fits iff M covers its unconstrained peak; plans are evaluated once each,
    k = 1, 2, ... until one fits. The scan is linear, not a bisection: the peak is *not*
    monotone in k in general (on a chain whose block inputs are rebuildable, or a U-Net,
    recomputing the last blocks rebuilds everything at the start of the backward pass).

    Outcomes (``info`` keys: ``k``, ``blocks``, ``evaluations``, ``peak_bytes`` of the
    returned plan, ``recomputed_bytes``, ``block_structure``, ``applies``, ``note``):

    - M >= P: keep-all (k = 0), status "feasible", T = T*, no evaluation.
    - the smallest k whose plan peaks at <= M: status "feasible".
    - no k fits: status "infeasible" with the plan of smallest peak (ties: fewest blocks),
      ``info["min_budget_bytes"]`` = that peak, which is < P.
    - no k brings the peak below P (no blocks; or, on a U-Net with one level, every tensor
      live at the keep-all peak is read there or needed to rebuild what is read there):
      the policy does not apply; status "infeasible", the keep-all plan,
      ``min_budget_bytes = P``, ``applies = False`` and a ``note`` saying why.
    - the time limit reached before a k fits (at least k = 1 is scanned): status
      "timeout" with the plan of smallest peak so far, ``min_budget_bytes`` None and a
      ``note`` saying where the scan stopped.

    With ``blocks=k`` the plan is :func:`checkpoint_plan` of exactly min(k, L) blocks
    whatever M (feasible iff M covers its peak, else ``min_budget_bytes`` = its peak).

    So the returned plan's peak never exceeds P (without ``blocks``). ``block_structure``
    is False when the blocks are not contiguous in the forward pass
    (:func:`blocks_are_contiguous`), with a note; the rule is still applied there (on
    ``unet(2)`` recomputing level 0 drops p0 until its backward use, 128 of 4544 B in the
    test's small U-Net).

    Args:
        blocks: None (the fewest blocks that fit), or a fixed number k of bottom blocks.
    """

    name = "checkpoint"
    param_specs = {"blocks": Param(int, min=0, none=True,
                                   doc="recompute exactly the bottom k blocks")}

    def __init__(self, *, blocks: int | None = None) -> None:
        self.blocks = blocks

    def plan(self, instance: Instance, budget_bytes: int, run: Run) -> Outcome:
        M = int(budget_bytes)
        P = int(instance.P)
        blocks = checkpoint_blocks(instance)
        L = len(blocks)
        contiguous = blocks_are_contiguous(instance)
        base: dict[str, Any] = {"blocks": L, "evaluations": 0, "block_structure": contiguous}
        if self.blocks is not None:  # a fixed k, whatever M: budget-oblivious
            k = min(self.blocks, L)
            pl = checkpoint_plan(instance, k)
            return _fixed_plan_result(instance, pl, M, {**base, "k": k, "applies": True})
        if M >= P:
            return _keep_all_fits(instance, base)
        if L == 0:
            return _does_not_apply(self.name, instance, base, NO_BLOCKS)
        peaks: dict[int, int] = {0: P}
        evals: dict[int, Evaluation] = {}

        def result(k: int, status: str, min_budget: int | None = None) -> Outcome:
            pl = checkpoint_plan(instance, k)
            info = {**base, "k": k, "evaluations": len(evals), "peak_bytes": peaks[k],
                    "recomputed_bytes": pl.bytes_by_decision(instance)["recomp"],
                    "applies": True}
            if not contiguous:
                info["note"] = NOT_CONTIGUOUS_NOTE
            ok = status == "feasible"
            return Outcome(pl, status=status, info=info,
                           objective_s=float(evals[k].step_time_s) if ok else None,
                           min_budget_bytes=None if ok else min_budget)

        for k in range(1, L + 1):
            if k > 1 and run.expired():
                out = result(min(peaks, key=lambda q: (peaks[q], q)), "timeout")
                out.info["note"] = (f"the time limit ended the scan after k = {k - 1} of "
                                    f"{L} blocks; none of those plans fits")
                return out
            evals[k] = simulate(instance, checkpoint_plan(instance, k), UNBOUNDED_BYTES)
            peaks[k] = int(evals[k].peak_bytes)
            if peaks[k] <= M:
                return result(k, "feasible")
        best = min(peaks, key=lambda k: (peaks[k], k))
        if best == 0:
            why = (f"recomputing the bottom k blocks never brings the peak below P (the "
                   f"plans k = 1..{L} peak at {min(peaks[k] for k in range(1, L + 1))} B or "
                   "more): the tensors live at the keep-all peak are read there or needed to "
                   "rebuild what is read there")
            if not contiguous:
                why += " (long skip connections: " + NOT_CONTIGUOUS_NOTE.split(" (")[0] + ")"
            base["evaluations"] = len(evals)
            return _does_not_apply(self.name, instance, base, why)
        return result(best, "infeasible", peaks[best])


UNBOUNDED_BYTES = 2**62
"""A budget no instance reaches: simulating under it gives a plan's unconstrained peak."""

def _fixed_plan_result(instance: Instance, plan: Plan, M: int, info: dict[str, Any],
                       ev: Evaluation | None = None) -> Outcome:
    """Outcome of a budget-oblivious plan without swaps: it runs without waiting, so
    it is feasible iff M covers its unconstrained peak, which is its min budget. `ev`:
    the plan's evaluation under an unbounded budget, if the caller has it already."""
    if ev is None:
        ev = simulate(instance, plan, UNBOUNDED_BYTES)
    peak = int(ev.peak_bytes)
    ok = M >= peak
    info = {**info, "peak_bytes": peak,
            "recomputed_bytes": plan.bytes_by_decision(instance)["recomp"]}
    return Outcome(plan, status="feasible" if ok else "infeasible", info=info,
                   objective_s=float(ev.step_time_s) if ok else None,
                   min_budget_bytes=None if ok else peak)


class RecomputeAll(BaseSolver):
    """Recompute every saved tensor that can be rebuilt; keep the others (c = inf).

    The memory floor of pure recomputation without block structure: each tensor is
    dropped after its last forward reader and rebuilt (recipe inputs first) before its
    first backward need. Budget-oblivious: feasible iff M covers the plan's peak, which
    ``info["min_budget_bytes"]`` reports otherwise. Never uses the link.
    """

    name = "recompute-all"

    def plan(self, instance: Instance, budget_bytes: int, run: Run) -> Outcome:
        return _fixed_plan_result(instance, Plan.uniform(instance, RECOMP), int(budget_bytes),
                                  {})


def sqrt_checkpoint_plan(instance: Instance, segment: int | None = None) -> Plan:
    """Chen et al. (2016) sqrt(n) checkpointing over the blocks of `instance`.

    The L blocks (:func:`checkpoint_blocks`) are cut into segments of ``segment`` blocks
    (default ceil(sqrt(L))); the output of the last block of each segment (the block's
    last-produced saved tensor: the next block's input) is a checkpoint and kept; every
    other saved tensor of a block that can be rebuilt is recomputed, rebuilds chaining
    back to the previous checkpoint; tensors that cannot be rebuilt (c = inf) and those
    outside the blocks (embedding, head) are kept.

    In the transformer workloads a block input cannot be rebuilt (docs/workloads.md:
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


class SqrtCheckpoint(BaseSolver):
    """Chen et al. (2016) sqrt(n) checkpointing: keep one block output per sqrt(L) blocks.

    See :func:`sqrt_checkpoint_plan`. The plan never swaps, so it fits iff the budget M
    (bytes) covers its unconstrained peak. Outcomes (``info`` keys: ``blocks``,
    ``segment``, ``peak_bytes`` of the returned plan, ``recomputed_bytes``,
    ``block_structure``, ``applies``, ``note``):

    - M >= P: keep-all, status "feasible", T = T* (the sqrt(n) plan would only be slower).
    - the sqrt(n) plan peaks below P: "feasible" iff its peak <= M, else "infeasible"
      with ``info["min_budget_bytes"]`` = its peak.
    - it does not bring the peak below P, or the instance has no blocks: the policy does
      not apply; status "infeasible", the keep-all plan, ``min_budget_bytes = P``,
      ``applies = False`` and a ``note`` saying why (e.g. ``unet(1)``, whose one level's
      long skip and pool output are needed at the first backward op).

    So the returned plan's peak never exceeds P. On DAGs whose blocks are not contiguous
    in the forward pass (U-Nets) the segments follow layer numbers, not forward order,
    and ``block_structure`` is False with a note.

    Args:
        segment: blocks per segment (default ceil(sqrt(L))).
    """

    name = "sqrt-checkpoint"
    param_specs = {"segment": Param(int, min=1, none=True, doc="blocks per segment")}

    def __init__(self, *, segment: int | None = None) -> None:
        self.segment = segment

    def plan(self, instance: Instance, budget_bytes: int, run: Run) -> Outcome:
        M = int(budget_bytes)
        P = int(instance.P)
        L = len(checkpoint_blocks(instance))
        seg = (self.segment or max(1, math.ceil(math.sqrt(L)))) if L else None
        contiguous = blocks_are_contiguous(instance)
        base: dict[str, Any] = {"blocks": L, "segment": seg, "block_structure": contiguous}
        if M >= P:
            return _keep_all_fits(instance, base)
        if L == 0:
            return _does_not_apply(self.name, instance, base, NO_BLOCKS)
        plan = sqrt_checkpoint_plan(instance, self.segment)
        ev = simulate(instance, plan, UNBOUNDED_BYTES)
        peak = int(ev.peak_bytes)
        if peak >= P:
            why = (f"its plan peaks at {peak} B >= P: the tensors live at the keep-all "
                   "peak are read there or needed to rebuild what is read there")
            if not contiguous:
                why += " (long skip connections)"
            return _does_not_apply(self.name, instance, base, why)
        info = {**base, "applies": True}
        if not contiguous:
            info["note"] = NOT_CONTIGUOUS_NOTE
        return _fixed_plan_result(instance, plan, M, info, ev)


__all__ = ["KeepAll", "Checkpoint", "RecomputeAll", "SqrtCheckpoint", "checkpoint_plan",
           "checkpoint_blocks", "sqrt_checkpoint_plan", "min_budget_by_bisection",
           "blocks_are_contiguous"]
