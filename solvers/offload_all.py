"""torchtune's ``OffloadActivations``: offload every saved activation to host memory.

Source: torchtune, ``torchtune/training/_activation_offloading.py`` (``OffloadActivations``,
a ``torch.autograd.graph.saved_tensors_hooks`` context: every tensor autograd saves in the
forward pass and whose size is at least ``min_offload_size`` bytes (default 1024) is copied
to pinned host memory on a side stream (``use_streams=True``) and brought back for the
backward pass) and ``torchtune/training/memory.py`` (``get_act_offloading_ctx_manager``:
a ``NoOpManager`` around the model's output projection keeps that Linear's saved tensors
on the device, since offloading them only to fetch them back right away is expensive).
The loss runs outside the context, so the logits it saves stay too.

On a slackopt instance:

- swap: every saved tensor of at least ``min_offload_size`` bytes, except the two below;
- keep: smaller tensors (RNG states, tiny masks), the tensors of category "logits"
  (saved by the loss) and the saved inputs of the op that produces them (the output
  projection's input: the final norm's output).

torchtune has no memory model and no budget: the plan is the same for every M, and the
evaluator decides whether it fits. The side-stream copies run
under the evaluator's barrier-free runtime (offload as soon as a tensor is final,
prefetch by need under the admission rule); torchtune's ``max_fwd_stash_size`` (how long
the device copy is held after its D2H starts) is not modelled. Never recomputes.
"""

from __future__ import annotations

import numpy as np

from slackopt.instance import Instance
from slackopt.plan import KEEP, SWAP, Plan
from slackopt.solverbase import BaseSolver, Outcome, Param, Run

MIN_OFFLOAD_SIZE = 1024
"""torchtune's default ``min_offload_size`` (bytes)."""
HEAD_CATEGORY = "logits"


def output_head_tensors(instance: Instance) -> np.ndarray:
    """Saved positions torchtune keeps around the output head: the tensors of category
    "logits" and the saved tensors read by the ops that produce them. Sorted."""
    cats = instance.saved_categories
    heads = [k for k in range(instance.n_saved) if cats[k] == HEAD_CATEGORY]
    prods = {int(instance.saved_prod_idx[k]) for k in heads}
    keep = set(heads)
    for k in range(instance.n_saved):
        if prods.intersection(int(q) for q in instance.saved_reader_idx[k]):
            keep.add(k)
    return np.array(sorted(keep), dtype=np.int64)


def offload_all_plan(instance: Instance, min_offload_size: int = MIN_OFFLOAD_SIZE) -> Plan:
    """torchtune's plan: swap every saved tensor of >= `min_offload_size` bytes except the
    output head's (:func:`output_head_tensors`); keep the rest."""
    dec = np.where(np.asarray(instance.s) >= int(min_offload_size), SWAP, KEEP).astype(np.int8)
    dec[output_head_tensors(instance)] = KEEP
    return Plan(dec, instance.saved_names)


class OffloadAll(BaseSolver):
    """torchtune's ``OffloadActivations``: swap every saved tensor >= 1 kB, keep the logits.

    The source and every modelling choice are in the module docstring.

    Args:
        min_offload_size: tensors smaller than this (bytes) stay on the device (1024).

    The evaluator decides the status (torchtune has no memory model).
    """

    name = "offload-all"
    param_specs = {"min_offload_size": Param(int, min=0, doc="bytes; smaller tensors stay")}

    def __init__(self, *, min_offload_size: int = MIN_OFFLOAD_SIZE) -> None:
        self.min_offload_size = min_offload_size

    def plan(self, instance: Instance, budget_bytes: int, run: Run) -> Outcome:
        plan = offload_all_plan(instance, self.min_offload_size)
        return Outcome(plan, info={"offloaded_bytes": plan.bytes_by_decision(instance)["swap"]})


__all__ = ["OffloadAll", "offload_all_plan", "output_head_tensors", "MIN_OFFLOAD_SIZE"]
