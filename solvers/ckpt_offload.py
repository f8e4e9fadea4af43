"""DeepSpeed activation checkpointing with ``cpu_checkpointing``: block checkpointing whose
checkpointed block inputs are offloaded to host memory.

Source: DeepSpeed, ``deepspeed/runtime/activation_checkpointing/checkpointing.py``
(``CheckpointFunction``: the wrapped layer runs without saving its internals; with
``cpu_checkpointing`` its activation inputs are copied to the CPU in the forward pass and
moved back to the device when its backward re-runs the layer) and the DeepSpeed config
section ``activation_checkpointing`` (``cpu_checkpointing: true``; the model wraps its
transformer layers, as Megatron-DeepSpeed's ``--checkpoint-activations`` does for every
layer).

On a slackopt instance: the bottom ``blocks`` blocks (default: all) are checkpointed as
:func:`solvers.baselines.checkpoint_plan` does (every rebuildable saved tensor of the block
recomputed, the block boundaries kept), and the input of each checkpointed block
(category "block_input", read by the block's ops) is swapped instead of kept. DeepSpeed
has no memory model and no budget: the plan is the same for every M, and the evaluator
decides whether it fits.

Runtime: DeepSpeed's copies are synchronous (``.to("cpu")`` in the forward pass, and the
input is moved back only when the layer's backward starts). The evaluator runs the plan
under the barrier-free runtime, which overlaps both copies with compute, so the step
reported here is a lower bound on what DeepSpeed's synchronous copies would take.
"""

from __future__ import annotations

import numpy as np

from slackopt.instance import Instance
from slackopt.plan import SWAP, Plan
from slackopt.solverbase import BaseSolver, Outcome, Param, Run
from slackopt.solvers.baselines import checkpoint_plan

BLOCK_INPUT = "block_input"


def block_inputs(instance: Instance) -> dict[int, int]:
    """{block: saved position of its input}: the saved tensor of category "block_input"
    read by a forward op of that block (docs: a block input is produced by the previous
    block, so its own layer is not the block's)."""
    layer_of = [op.layer for op in instance.ops]
    out: dict[int, int] = {}
    for k, cat in enumerate(instance.saved_categories):
        if cat != BLOCK_INPUT:
            continue
        for q in instance.saved_reader_idx[k]:
            q = int(q)
            if not instance.is_bwd[q] and layer_of[q] >= 0:
                out.setdefault(int(layer_of[q]), k)
    return out


def ckpt_offload_plan(instance: Instance, blocks: int | None = None) -> Plan:
    """Checkpoint the bottom `blocks` blocks (all if None) and swap their inputs."""
    all_blocks = list(instance.blocks)
    k = len(all_blocks) if blocks is None else min(int(blocks), len(all_blocks))
    base = checkpoint_plan(instance, k)
    dec = np.array(base.decisions, dtype=np.int8)
    inputs = block_inputs(instance)
    for b in all_blocks[:k]:
        if b in inputs:
            dec[inputs[b]] = SWAP
    return Plan(dec, instance.saved_names)


class CkptOffload(BaseSolver):
    """DeepSpeed's ``cpu_checkpointing``: checkpointed blocks recomputed, their inputs swapped.

    The source and every modelling choice are in the module docstring.

    Args:
        blocks: number of bottom blocks checkpointed (None: every block).

    The evaluator decides the status (DeepSpeed has no memory model).
    """

    name = "ckpt-offload"
    param_specs = {"blocks": Param(int, min=0, none=True,
                                   doc="bottom blocks checkpointed (None: all)")}

    def __init__(self, *, blocks: int | None = None) -> None:
        self.blocks = blocks

    def plan(self, instance: Instance, budget_bytes: int, run: Run) -> Outcome:
        plan = ckpt_offload_plan(instance, self.blocks)
        by = plan.bytes_by_decision(instance)
        return Outcome(plan, info={"blocks": len(instance.blocks),
                                   "offloaded_bytes": by["swap"],
                                   "recomputed_bytes": by["recomp"]})


__all__ = ["CkptOffload", "ckpt_offload_plan", "block_inputs"]
