"""Large-neighbourhood search around the incumbent: free a window of saved tensors, fix
every other tensor to the incumbent's decision, and search the window exactly.

The method is Shaw's large-neighbourhood search (P. Shaw, "Using constraint programming
and local search methods to solve vehicle routing problems", CP 1998): relax part of the
incumbent, re-optimise that part with an exact method, keep the result when it is
better, and move on to another part. Here the exact method is the branch and bound of
:mod:`~slackopt.solvers.milp.search.enumeration` restricted to the window
(:meth:`~slackopt.solvers.milp.search.enumeration.BranchAndBound.run` with ``free``): it prunes a
subtree by the deficit bound with the fixed decisions (those outside the window
included) and by the per-op memory floor, and simulates each leaf with the compiled
evaluator. A window searched to its end yields the best plan that agrees with the
incumbent outside the window (or proves the incumbent is that plan); a local search that
changes up to three tensors (:func:`~slackopt.solvers.milp.search.incumbent.improve`) cannot reach
plans that need many joint changes, e.g. freeing the bytes of several tensors around a
peak to keep another.

Windows (each a set of k live saved tensors, k the window size), four families taken
in turn within a pass (the first window of each, then the second of each, ...): (a) k
consecutive tensors in production order, sliding by k / 2 (the last one ending at the
last tensor), (b) the same over the tensors ranked by c_t / s_t (rebuild seconds per
byte; tensors that cannot be rebuilt last), (c) ``2 ceil(n / k)`` windows of k tensors
drawn uniformly, (d) as many made of two runs of consecutive tensors in production
order at drawn places (an offload added in one place must be paid for by link time or
memory freed elsewhere: joint changes in layers far apart), both drawn by
``numpy.random.default_rng([seed, pass])``. A window
already searched around the same incumbent is skipped (the search is deterministic, so
it would find nothing new). Window sizes grow: after a pass that improves nothing, k
grows by ``WINDOW_STEP``, up to ``WINDOW_MAX``; after one that improves, the same size
runs again. The search ends when a pass at the largest size improves nothing, when one
window covering every live tensor (those with bytes: a zero-byte tensor's decision costs
nothing) was searched to its end, at its work limit, or at the deadline.

Cost: each window gets at most ``window_plans`` simulated plans. The default scales with
the instance: a simulation costs about in proportion to the tasks it runs (ops plus
rebuilds), so ``WINDOW_WORK / n_ops`` plans (at least ``WINDOW_PLANS_MIN``), and the
first window size is the largest k <= ``WINDOW_START`` with 3^k <= 4 window_plans
(chain31, 65 ops: 6153 plans, k = 8; GPT-2 XL, 1355 ops: 500 plans, k = 6). Windows larger than
a window's plans allow are cut short (still improving, proving nothing).

Anytime and deterministic: the order of windows, their sizes and each window's search
depend only on the instance, the budget, the starting incumbent and `seed`; the work
limit counts simulated plans (not seconds), and neither limit changes any step before
it stops the search, so a larger ``max_plans`` or a later deadline replays the same
steps and adds to them: the plan is never slower. The incumbent only ever changes to a
faster simulated plan, so the result is never slower than the start.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from slackopt.solvers.milp.search.enumeration import BranchAndBound
from slackopt.solvers.milp.search.incumbent import Incumbent

WINDOW_START = 8
"""First window size (saved tensors freed at once), before :func:`_start_size` lowers it
for costly simulations."""
WINDOW_STEP = 2
"""Growth of the window size after a pass that improves nothing."""
WINDOW_MAX = 14
"""Largest window size (3^14 = 4.8M nominal plans; pruning leaves far fewer)."""
WINDOW_WORK = 400_000
"""Simulated op-tasks per window: ``window_plans = WINDOW_WORK / n_ops`` by default
(chain31, 65 ops: 6153 plans; GPT-2 XL, 1355 ops: 295, raised to ``WINDOW_PLANS_MIN``)."""
WINDOW_PLANS_MIN = 500
"""Fewest simulated plans a window gets by default."""


@dataclass
class LnsResult:
    """The outcome of :func:`lns`.

    Attributes:
        windows: windows searched (skipped repeats not counted).
        simulated: plans simulated by the window searches.
        improved: windows that found a faster plan.
        passes: passes started.
        window_size: the window size of the last pass.
        converged: a pass at the largest window size improved nothing (a local optimum
            of every window of the schedule), or one window covering every live tensor
            was searched to its end (then the plan is optimal, though nothing here
            states it); false when the work limit or the deadline ended the search.
    """

    windows: int = 0
    simulated: int = 0
    improved: int = 0
    passes: int = 0
    window_size: int = 0
    converged: bool = False


def default_window_plans(n_ops: int) -> int:
    """Simulated plans per window for an instance of `n_ops` ops (module docstring)."""
    return max(WINDOW_PLANS_MIN, WINDOW_WORK // max(1, int(n_ops)))


def _start_size(window_plans: int) -> int:
    """The largest k <= WINDOW_START with 3^k <= 4 * `window_plans` (at least 3): the
    pruning typically leaves under a quarter of a window's nominal plans."""
    k = WINDOW_START
    while k > 3 and 3 ** k > 4 * window_plans:
        k -= 1
    return k


def _windows(order: list[int], k: int) -> list[tuple[int, ...]]:
    """Consecutive windows of `k` tensors of `order`, sliding by max(1, k // 2); the last
    one ends at the last tensor. One window when k >= len(order)."""
    n = len(order)
    if k >= n:
        return [tuple(sorted(order))]
    step = max(1, k // 2)
    starts = list(range(0, n - k + 1, step))
    if starts[-1] != n - k:
        starts.append(n - k)
    return [tuple(sorted(order[i:i + k])) for i in starts]


def _two_blocks(order: list[int], k: int, rng: np.random.Generator) -> tuple[int, ...]:
    """k tensors: two runs of consecutive tensors of `order` (k // 2 and k - k // 2) at
    places drawn by `rng`, disjoint (k <= len(order))."""
    n = len(order)
    a, b = k // 2, k - k // 2
    i = int(rng.integers(n - a + 1))
    rest = [t for j, t in enumerate(order) if not i <= j < i + a]
    m = int(rng.integers(len(rest) - b + 1))
    return tuple(sorted(order[i:i + a] + rest[m:m + b]))


def _interleave(*families: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """The windows of the families in turn (first of each, then second of each, ...), so
    that a search cut short has tried every family."""
    out = []
    for i in range(max(len(f) for f in families)):
        out += [f[i] for f in families if i < len(f)]
    return out


def lns(inc: Incumbent, max_plans: int, seed: int, deadline: float, *,
        window_plans: int | None = None, window_max: int = WINDOW_MAX,
        bb: BranchAndBound | None = None) -> LnsResult:
    """Large-neighbourhood search around the incumbent `inc`, improving it in place
    (module docstring).

    Args:
        inc: the incumbent (must hold a plan; nothing is done without one).
        max_plans: most plans simulated in all (a work limit, not a time limit).
        seed: seeds the drawn windows (families c and d).
        deadline: ``time.perf_counter()`` time after which no new window (nor subtree of
            one) starts; past it, nothing is searched (nor prepared).
        window_plans: most plans simulated per window; None: :func:`default_window_plans`.
        window_max: largest window size (saved tensors); windows start at
            ``min(window_max, _start_size(window_plans))``.
        bb: a :class:`BranchAndBound` prepared for ``inc.inst`` and ``inc.M`` (built here
            when None).

    Returns:
        The :class:`LnsResult`. ``inc`` holds the fastest plan found, never slower than
        the one it started with.

    Raises:
        ValueError: `max_plans` or `window_plans` negative, or `window_max` < 1.
    """
    if max_plans < 0 or (window_plans is not None and window_plans < 0) or window_max < 1:
        raise ValueError(f"lns: max_plans ({max_plans}) and window_plans ({window_plans}) "
                         f"must be >= 0 and window_max ({window_max}) >= 1")
    out = LnsResult()
    if inc.dec is None or max_plans == 0:
        return out
    inst = inc.inst
    s = np.asarray(inst.s, dtype=np.int64)
    c = np.asarray(inst.c, dtype=np.float64)
    live = [t for t in range(int(inst.n_saved)) if s[t] > 0]
    if not live:
        return out
    if window_plans is None:
        window_plans = default_window_plans(inst.n_ops)
    if window_plans == 0 or time.perf_counter() >= deadline:
        return out
    bb = bb if bb is not None else BranchAndBound(inst, inc.M)
    by_prod = sorted(live, key=lambda t: (int(inst.saved_prod_idx[t]), t))
    by_rho = sorted(live, key=lambda t: (c[t] / s[t] if math.isfinite(c[t]) else math.inf, t))
    k = min(window_max, _start_size(window_plans), len(live))
    seen: set[tuple[tuple[int, ...], bytes]] = set()
    while True:
        out.passes += 1
        out.window_size = k
        if k < len(live):
            rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, out.passes])
            m = 2 * math.ceil(len(live) / k)
            drawn = [tuple(sorted(rng.choice(live, size=k, replace=False).tolist()))
                     for _ in range(m)]
            blocks = [_two_blocks(by_prod, k, rng) for _ in range(m)]
            wins = _interleave(_windows(by_prod, k), _windows(by_rho, k), drawn, blocks)
        else:
            wins = _windows(by_prod, k)
        improved = False
        for w in wins:
            key = (w, inc.dec.tobytes())
            if key in seen:
                continue
            seen.add(key)
            left = max_plans - out.simulated
            if left <= 0 or time.perf_counter() >= deadline:
                return out
            before = inc.step_s
            r = bb.run(inc, min(window_plans, left), deadline, free=np.array(w), source="lns")
            out.windows += 1
            out.simulated += r.simulated
            if inc.step_s < before:
                out.improved += 1
                improved = True
            if r.complete and len(w) == len(live):
                out.converged = True    # one window, searched to its end: nothing is left
                return out
        if improved:
            continue
        if k >= min(window_max, len(live)):
            out.converged = True
            return out
        k = min(k + WINDOW_STEP, window_max, len(live))
