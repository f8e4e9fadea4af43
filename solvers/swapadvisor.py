"""SwapAdvisor (Huang et al., 2020, "SwapAdvisor: Pushing Deep Learning Beyond the GPU
Memory Limit via Smart Swapping"), as the SlackSwap paper runs it.

Paper: the SlackSwap paper (2026), sections 2.1 ("evicts the tensor whose next
use is furthest away (Belady, 1966), issues copies as early as possible, and searches
operator orders and memory-pool layouts with a genetic algorithm") and 4.1 ("Belady
eviction on the planned schedule with as-early-as-possible swaps; we omit its genetic
search over operator order and memory pools, which has little room on these near-linear
graphs with our allocator").

Planning (:func:`belady_victims`): walk the planned schedule (the instance's op order,
no recomputation: SwapAdvisor only swaps) with the memory profile of docs/model.md. At
each op, the saved tensors it allocates or reads are resident; while memory exceeds M,
evict the resident saved tensor with the furthest next use among those the op does not
read and whose forward readers are done (an evicted tensor comes back at its next use and
may be evicted again). The tensors evicted at least once are the swap set; the others
are kept.

Runtime: :mod:`slackopt.simulate.on_demand` with ``eviction="belady"``,
``offload="early"`` (a victim's D2H is queued as soon as it is produced, so its host copy
is ready when memory runs out: the swap-out as early as possible) and ``prefetch="asap"``
(an evicted tensor is copied back as soon as the backward pass and memory allow).

Host pinned-memory limit (``Instance.host_memory_bytes``): this baseline does not
plan for it; the evaluator judges its plan, which is infeasible (the failure names the D2H
that would exceed the limit) when its offloads need more host memory than the limit.
"""

from __future__ import annotations

import heapq

import numpy as np

from slackopt.instance import Instance
from slackopt.plan import KEEP, SWAP, Plan
from slackopt.simulate import simulate
from slackopt.solverbase import BaseSolver, Outcome, Param, Run

RUNTIME = {"eviction": "belady", "offload": "early", "prefetch": "asap"}


def belady_victims(instance: Instance, M: int) -> np.ndarray | None:
    """Saved positions Belady's rule evicts on the planned schedule under budget M
    (module docstring), in production order; None if even evicting every candidate
    leaves some op above M."""
    n, n_fwd = instance.n_ops, instance.n_fwd
    s = instance.s.tolist()
    static = instance.static_profile.tolist()
    readers = [r.tolist() for r in instance.saved_reader_idx]
    prod = instance.saved_prod_idx.tolist()
    last_fwd = instance.saved_last_fwd_idx.tolist()
    produced_at: list[list[int]] = [[] for _ in range(n)]
    read_at: list[list[int]] = [[] for _ in range(n)]
    evictable_after: list[list[int]] = [[] for _ in range(n)]
    for t in range(instance.n_saved):
        produced_at[prod[t]].append(t)
        for i in readers[t]:
            read_at[i].append(t)
        evictable_after[last_fwd[t]].append(t)
    ptr = [0] * len(s)              # index into readers[t] of the next use
    resident = [False] * len(s)
    evictable = [False] * len(s)
    victim = np.zeros(len(s), dtype=bool)
    heap: list[tuple[int, int]] = []  # (-next use, -t) of resident evictable tensors
    held = 0                          # bytes of resident saved tensors

    def next_use(t: int) -> int:
        return readers[t][ptr[t]] if ptr[t] < len(readers[t]) else n

    for i in range(n):
        for t in produced_at[i]:
            resident[t] = True
            held += s[t]
        for t in read_at[i]:
            if not resident[t]:
                resident[t] = True
                held += s[t]
                if evictable[t]:
                    heapq.heappush(heap, (-next_use(t), -t))
        reading = set(read_at[i])
        skipped = []
        while static[i] + held > M:
            if not heap:
                return None
            nu, mt = heapq.heappop(heap)
            t = -mt
            if not resident[t] or -nu != next_use(t):
                continue                          # stale entry
            if t in reading or next_use(t) >= n:
                skipped.append((nu, mt))
                continue
            resident[t] = False
            held -= s[t]
            victim[t] = True
        for e in skipped:
            heapq.heappush(heap, e)
        # After op i: advance next uses, release last uses, open eviction after forward.
        for t in read_at[i]:
            ptr[t] += 1
            if ptr[t] >= len(readers[t]):
                resident[t] = False
                held -= s[t]
            elif evictable[t] and resident[t]:
                heapq.heappush(heap, (-next_use(t), -t))
        if i < n_fwd:
            for t in evictable_after[i]:
                evictable[t] = True
                if resident[t] and next_use(t) < n:
                    heapq.heappush(heap, (-next_use(t), -t))
    return np.flatnonzero(victim)


def swapadvisor_plan(instance: Instance, M: int) -> Plan | None:
    """Swap the Belady victims of :func:`belady_victims`, keep the rest, under the
    on_demand runtime (Belady eviction, early offload, prefetch as early as possible);
    None if no eviction order fits M."""
    victims = belady_victims(instance, M)
    if victims is None:
        return None
    dec = np.full(instance.n_saved, KEEP, dtype=np.int8)
    dec[victims] = SWAP
    dec[np.asarray(instance.s) == 0] = KEEP
    return Plan(dec, instance.saved_names, "on_demand", RUNTIME)


class SwapAdvisor(BaseSolver):
    """SwapAdvisor without its genetic search: Belady eviction, swaps as early as possible.

    Victims chosen on the planned schedule (Huang et al. 2020; SlackSwap paper sec. 4.1).
    Deterministic (the seed is unused).

    Args:
        min_budget_search: on an infeasible answer, find ``info["min_budget_bytes"]``
            by bisection over M (within 0.5% of P).

    ``info``: ``swapped_bytes`` (the planned victims), ``evictions`` (in the evaluation);
    ``reason`` when no eviction order fits M.
    """

    name = "swapadvisor"
    param_specs = {"min_budget_search": Param(bool)}

    def __init__(self, *, min_budget_search: bool = True) -> None:
        self.min_budget_search = min_budget_search

    def plan(self, instance: Instance, budget_bytes: int, run: Run) -> Outcome:
        M = int(budget_bytes)
        pl = swapadvisor_plan(instance, M)
        if pl is None:
            return Outcome(None, status="infeasible",
                           info={"reason": "no eviction order fits M on the planned schedule"})
        ev = simulate(instance, pl, M)
        return Outcome(pl, evaluation=ev, info={
            "swapped_bytes": pl.bytes_by_decision(instance)["swap"], "evictions": ev.evictions})


__all__ = ["SwapAdvisor", "swapadvisor_plan", "belady_victims"]
