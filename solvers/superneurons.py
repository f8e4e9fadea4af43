"""SuperNeurons (Wang et al., 2018, "SuperNeurons: Dynamic GPU Memory Management for
Training Deep Neural Networks"), as the SlackSwap paper runs it.

Paper: the SlackSwap paper (2026), sections 2.1 ("recomputes cheap layers,
offloads convolution outputs through an LRU tensor cache when memory runs out, and
prefetches one checkpoint ahead") and 4.1 ("recomputes LayerNorm, GeLU and dropout
outputs, evicts GEMM and attention outputs on demand in LRU order, and prefetches for the
next heavy operator"). The runtime is :mod:`slackopt.simulate.on_demand` with
``eviction="lru"``, ``offload="on_eviction"``, ``prefetch="next_heavy"``.

Decisions by the kind of the tensor's producer (``Op.kind``) and of its recipe's ops:

- **recomp** (cost-aware recomputation of cheap layers): produced by a cheap layer
  (:data:`CHEAP_KINDS`: normalization, activation, dropout, pooling) and rebuildable
  without re-running a heavy operator (a dropout mask from its RNG state, a LayerNorm
  or GeLU output from its input);
- **swap**, i.e. an entry of the LRU tensor cache that the runtime may evict on demand:
  produced by a heavy operator (:data:`slackopt.plan.HEAVY_KINDS`: GEMM, attention,
  convolution), or by a cheap layer whose rebuild would re-run one (VGG's in-place ReLU
  outputs, whose recipe re-runs the convolution: SuperNeurons offloads convolution
  outputs);
- **keep**: everything else (block inputs, residual sums, embeddings, RNG states).

Recomputation is SuperNeurons' static policy, applied at every budget (it does not look
at M); eviction only happens when an allocation does not fit.

Host pinned-memory limit (``Instance.host_memory_bytes``): this baseline does not
plan for it; the evaluator judges its plan, which is infeasible (the failure names the D2H
that would exceed the limit) when its offloads need more host memory than the limit.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from slackopt.instance import Instance
from slackopt.plan import HEAVY_KINDS, KEEP, RECOMP, SWAP, Plan
from slackopt.simulate import simulate
from slackopt.solverbase import BaseSolver, Outcome, Param, Run

CHEAP_KINDS = ("layernorm", "rmsnorm", "gelu", "swiglu", "dropout", "relu", "pool")
"""Producer kinds SuperNeurons treats as cheap layers (recomputed)."""

RUNTIME = {"eviction": "lru", "offload": "on_eviction", "prefetch": "next_heavy"}


def superneurons_plan(instance: Instance, cheap_kinds: Any = CHEAP_KINDS,
                      heavy_kinds: Any = HEAVY_KINDS) -> Plan:
    """SuperNeurons' decisions (module docstring) under the on_demand runtime."""
    cheap, heavy = set(cheap_kinds), set(heavy_kinds)
    ops = instance.ops
    dec = np.full(instance.n_saved, KEEP, dtype=np.int8)
    for k, p in enumerate(instance.saved_prod_idx.tolist()):
        if instance.s[k] == 0:
            continue
        kind = ops[p].kind
        heavy_recipe = any(ops[q].kind in heavy for q in instance.recipe_ops[k])
        if kind in cheap and math.isfinite(instance.c[k]) and not heavy_recipe:
            dec[k] = RECOMP
        elif kind in heavy or (kind in cheap and heavy_recipe):
            dec[k] = SWAP
    return Plan(dec, instance.saved_names, "on_demand",
                {**RUNTIME, "heavy_kinds": list(heavy_kinds)})


class SuperNeurons(BaseSolver):
    """SuperNeurons: recompute cheap layers, evict heavy outputs on demand in LRU order.

    Prefetches for the next heavy operator (Wang et al. 2018; SlackSwap paper sec. 4.1).
    Deterministic (the seed is unused).

    Args:
        cheap_kinds: producer kinds recomputed (default :data:`CHEAP_KINDS`).
        heavy_kinds: heavy operator kinds (default GEMM, attention, convolution).
        min_budget_search: on an infeasible answer, find ``info["min_budget_bytes"]``
            by bisection over M (within 0.5% of P).

    ``info``: ``swappable_bytes``, ``recomputed_bytes``, ``evictions``.
    """

    name = "superneurons"
    param_specs = {"cheap_kinds": Param(tuple), "heavy_kinds": Param(tuple),
                   "min_budget_search": Param(bool)}

    def __init__(self, *, cheap_kinds: Any = CHEAP_KINDS, heavy_kinds: Any = HEAVY_KINDS,
                 min_budget_search: bool = True) -> None:
        self.cheap_kinds = cheap_kinds
        self.heavy_kinds = heavy_kinds
        self.min_budget_search = min_budget_search

    def plan(self, instance: Instance, budget_bytes: int, run: Run) -> Outcome:
        pl = superneurons_plan(instance, self.cheap_kinds, self.heavy_kinds)
        ev = simulate(instance, pl, int(budget_bytes))
        by = pl.bytes_by_decision(instance)
        return Outcome(pl, evaluation=ev, info={
            "swappable_bytes": by["swap"], "recomputed_bytes": by["recomp"],
            "evictions": ev.evictions})


__all__ = ["SuperNeurons", "superneurons_plan", "CHEAP_KINDS"]
