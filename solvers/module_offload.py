"""Megatron-Core's fine-grained activation offloading with selective recompute.

Sources: the Megatron-Core developer guide, "Fine-Grained Activation Offloading"
(``--fine-grained-activation-offloading --offload-modules ...``: each named submodule's
*input* is copied to host memory in the forward pass and reloaded before its backward;
choices ``attn_norm``, ``qkv_linear``, ``core_attn``, ``attn_proj``, ``mlp_norm``, and
MoE-only ``expert_fc1``, ``moe_act``; the guide's example offloads ``core_attn
attn_proj expert_fc1``; for cheap modules such as LayerNorm it advises recomputing
instead of offloading, and offloaded tensors must not be recomputed), and
``megatron/core/transformer/transformer_config.py`` (``recompute_granularity="selective"``
with ``recompute_modules``, default ``["core_attn"]``; ``"layernorm"`` recomputes the
input and pre-MLP norms from their inputs).

slackopt names saved tensors by category (slackopt/workloads/transformer.py), so the
user names categories (``--param offload=qkv,attn_out --param recompute=norm_out``).
Megatron's modules map to the categories of the tensors they save:

| Megatron offload module (its input) | category |
|---|---|
| ``attn_norm`` (block input) | block_input |
| ``qkv_linear`` (attention norm output) | norm_out |
| ``core_attn`` (Q, K, V) | qkv |
| ``attn_proj`` (attention output) | attn_out |
| ``mlp_norm`` (residual after attention) | residual |

**Defaults for a dense transformer** (no params): offload ``qkv`` and ``attn_out`` (the
guide's ``core_attn attn_proj``; ``expert_fc1`` has no dense counterpart) and recompute
``norm_out`` (``layernorm``, the guide's cheap module). Megatron's default recompute
module ``core_attn`` rebuilds attention internals (scores, probabilities, dropout mask)
that a FlashAttention workload does not save, so it maps to no saved tensor here.

Only tensors inside the transformer blocks (layer >= 0) are affected, as Megatron's
modules live in ``TransformerLayer``; embedding and head tensors are kept. A tensor that
cannot be rebuilt (c = inf) is kept instead of recomputed. Megatron's
``min_offloaded_tensor_size`` (2^20 elements) is not applied: every offloaded category
of the paper workloads is far above it. Megatron has no memory model or budget: the plan
is the same for every M and the evaluator judges it (barrier-free runtime: offloads on a
side stream, reloads by need).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from slackopt.errors import SolverError
from slackopt.instance import Instance
from slackopt.plan import KEEP, RECOMP, SWAP, Plan
from slackopt.solverbase import BaseSolver, Outcome, Param, Run

DEFAULT_OFFLOAD = ("qkv", "attn_out")
DEFAULT_RECOMPUTE = ("norm_out",)
MEGATRON_CATEGORIES = ("block_input", "norm_out", "qkv", "attn_out", "residual")
"""The categories Megatron's offload modules map to (the module docstring's table)."""


def categories(text: str) -> tuple[str, ...]:
    """A comma-separated list of category names ("qkv,attn_out") -> its names; "" -> ()."""
    return tuple(x.strip() for x in text.split(",") if x.strip())


def module_offload_plan(instance: Instance, offload: Iterable[str] = DEFAULT_OFFLOAD,
                        recompute: Iterable[str] = DEFAULT_RECOMPUTE) -> Plan:
    """Swap the block tensors (layer >= 0) whose category is in `offload`, recompute those
    in `recompute` that can be rebuilt, keep everything else."""
    cats = np.array(instance.saved_categories, dtype=object)
    in_block = np.asarray(instance.saved_layers) >= 0
    dec = np.full(instance.n_saved, KEEP, dtype=np.int8)
    dec[in_block & np.isin(cats, list(offload))] = SWAP
    dec[in_block & np.isin(cats, list(recompute)) & np.isfinite(instance.c)] = RECOMP
    return Plan(dec, instance.saved_names)


class ModuleOffload(BaseSolver):
    """Megatron-Core fine-grained offloading and selective recompute, by tensor category.

    Args:
        offload: saved-tensor categories to offload, comma-separated ("qkv,attn_out").
        recompute: categories to recompute ("norm_out"; "" for none).
        Both default to Megatron's documented dense-transformer settings (module
        docstring); a category in both is refused (Megatron: offloaded tensors are not
        recomputed), and so are an empty item ("qkv,,attn_out"), a category named twice
        in one list, and an empty ``offload`` (no offloading: not this planner).

    Raises:
        SolverParamError: from the constructor, for a category named in both lists or
            twice in one, an empty item, or no category to offload (the message names the
            parameter and the categories Megatron's modules map to).
        SolverError: from ``solve``, when a category given explicitly names no saved
            tensor inside the instance's blocks (the message lists the categories there).

    The evaluator decides the status (Megatron has no memory model).
    """

    name = "module-offload"
    param_specs = {
        "offload": Param(str, doc="categories to offload, comma-separated"),
        "recompute": Param(str, doc="categories to recompute, comma-separated"),
    }

    def __init__(self, *, offload: str = ",".join(DEFAULT_OFFLOAD),
                 recompute: str = ",".join(DEFAULT_RECOMPUTE)) -> None:
        self.offload = offload
        self.recompute = recompute

    def check_params(self) -> None:
        hint = (f"give comma-separated saved-tensor categories, e.g. offload="
                f"{','.join(DEFAULT_OFFLOAD)}; Megatron's modules map to "
                f"{', '.join(MEGATRON_CATEGORIES)} (slackopt describe INSTANCE lists an "
                "instance's categories)")
        for key in ("offload", "recompute"):
            text = getattr(self, key)
            items = [x.strip() for x in text.split(",")]
            if text.strip() and any(not x for x in items):
                raise ValueError(f"{key}={text!r} has an empty item; {hint}")
            dup = sorted({x for x in items if x and items.count(x) > 1})
            if dup:
                raise ValueError(f"{key}={text!r} names {', '.join(dup)} more than once; "
                                 f"{hint}")
        if not categories(self.offload):
            raise ValueError(f"offload={self.offload!r} names no category, and module-offload "
                             f"without offloading is not Megatron's offloading; {hint} (for "
                             "recomputation only, use checkpoint or recompute_all)")
        both = sorted(set(categories(self.offload)) & set(categories(self.recompute)))
        if both:
            raise ValueError(f"offload and recompute share categories {', '.join(both)}; "
                             "Megatron does not recompute an offloaded tensor: name each "
                             "once")

    def plan(self, instance: Instance, budget_bytes: int, run: Run) -> Outcome:
        off, rec = categories(self.offload), categories(self.recompute)
        present = {c for c, b in zip(instance.saved_categories, instance.saved_layers,
                                     strict=True) if b >= 0}
        named: list[str] = []   # categories the user chose that match nothing
        for given, default in ((off, DEFAULT_OFFLOAD), (rec, DEFAULT_RECOMPUTE)):
            if given != default:
                named += [c for c in given if c not in present]
        if named:
            raise SolverError(f"module-offload: categories {', '.join(sorted(set(named)))} "
                              f"name no saved tensor inside the blocks of '{instance.name}'; "
                              f"its categories: {', '.join(sorted(present)) or 'none'}")
        plan = module_offload_plan(instance, off, rec)
        by = plan.bytes_by_decision(instance)
        missing = sorted((set(off) | set(rec)) - present)
        return Outcome(plan, info={"offloaded_bytes": by["swap"],
                                   "recomputed_bytes": by["recomp"],
                                   "unmatched_categories": missing})


__all__ = ["ModuleOffload", "module_offload_plan", "DEFAULT_OFFLOAD", "DEFAULT_RECOMPUTE"]
