"""The incumbent of the MILP search: every candidate plan is judged by the evaluator, and
the incumbent is the fastest one simulated so far; a deterministic local search around it
(1-flip descent, then paired moves) finds better plans with the evaluator as judge.

Nothing here proves anything: the incumbent's simulated step time is an upper bound U on
the optimum, and the returned plan is never slower than any candidate ever considered
(SlackSwap's plan included), because the incumbent only ever changes to a faster plan.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterator

import numpy as np

from slackopt.instance import Instance
from slackopt.plan import KEEP, RECOMP, SWAP, Plan
from slackopt.simulate import simulate

_INF = float("inf")
SUBSETS_ALL = 400
"""The large-neighbourhood step tries every 2- and 3-subset of tensors when there are at
most this many 3-subsets (up to 14 tensors), else draws subsets until the call budget
ends."""


class Incumbent:
    """The fastest plan simulated so far, and a cache of every simulated decision vector.

    Args:
        inst: the (lowered) instance.
        M: the budget (bytes).
        on_improve: called with (step time in s, source) when the incumbent improves.

    Attributes:
        step_s: the incumbent's simulated step time (s), inf before the first feasible plan.
        dec: its decisions (int8 array over saved tensors), or None.
        source: which phase proposed it ("slackswap", "local_search", "milp:3", ...).
        evaluations: plans simulated (each decision vector once).
    """

    def __init__(self, inst: Instance, M: int,
                 on_improve: Callable[[float, str], None] | None = None) -> None:
        self.inst, self.M = inst, int(M)
        self.step_s = _INF
        self.dec: np.ndarray | None = None
        self.source = ""
        self.evaluations = 0
        self._seen: dict[bytes, float] = {}
        self._on_improve = on_improve

    def consider(self, dec: np.ndarray, source: str) -> float:
        """Simulate `dec` (once; later calls read the cache) and keep it if it is faster
        than the incumbent. Returns its step time (s), inf if it does not run."""
        dec = np.asarray(dec, dtype=np.int8)
        key = dec.tobytes()
        val = self._seen.get(key)
        if val is not None:
            return val
        ev = simulate(self.inst, Plan(dec, self.inst.saved_names), self.M)
        self.evaluations += 1
        val = float(ev.step_time_s) if ev.feasible else _INF
        self._seen[key] = val
        if val < self.step_s:
            self.step_s, self.dec, self.source = val, dec.copy(), source
            if self._on_improve is not None:
                self._on_improve(val, source)
        return val


def improve(inc: Incumbent, calls: int, seed: int, deadline: float) -> int:
    """Local search around the incumbent, at most `calls` calls of ``inc.consider``.

    Rounds of (1) first-improvement 1-flip descent: each tensor in turn tries the other
    decisions (keep, swap, recomp where rebuildable); the first faster plan becomes the
    incumbent and the scan restarts there; (2) once no flip helps, a large-neighbourhood
    step: every joint change of k = 2 or 3 tensors (all subsets on small instances,
    ``SUBSETS_ALL``; else subsets drawn from ``numpy.random.default_rng(seed)`` until
    the budget ends, half of them k tensors adjacent in production order). Tight
    budgets need these: freeing one tensor's bytes pays for keeping
    another (unet2 at 0.8 P: the optimum is three changes away from SlackSwap's plan, and
    no single or paired change improves it). An improvement restarts the descent.

    Deterministic for a given incumbent, `calls` and `seed` (the work limit is counted
    in calls, not seconds); `deadline` (perf_counter seconds) only cuts it short, so a
    later deadline runs a longer prefix of the same sequence of candidates.

    Returns:
        The calls made.
    """
    if inc.dec is None or calls <= 0:
        return 0
    inst = inc.inst
    ok_rec = np.isfinite(np.asarray(inst.c))
    live = [t for t in range(inst.n_saved) if np.asarray(inst.s)[t] > 0]
    order = sorted(live, key=lambda t: (int(inst.saved_prod_idx[t]), t))
    rng = np.random.default_rng(seed)
    made = 0

    def options(t: int) -> tuple[int, ...]:
        return (KEEP, SWAP, RECOMP) if ok_rec[t] else (KEEP, SWAP)

    def subsets() -> Iterator[tuple[int, ...]]:
        """Every 2-subset then every 3-subset when there are at most SUBSETS_ALL of
        them; else an endless draw, alternating k = 2 and 3, half of the draws k
        tensors adjacent in production order (the call budget ends it)."""
        if math.comb(len(live), 3) <= SUBSETS_ALL:
            yield from itertools.combinations(live, 2)
            yield from itertools.combinations(live, 3)
            return
        i = 0
        while True:
            k = 2 + i % 2
            if (i // 2) % 2 == 0:
                j = int(rng.integers(len(order) - k + 1))
                yield tuple(order[j:j + k])
            else:
                yield tuple(sorted(rng.choice(live, size=k, replace=False).tolist()))
            i += 1

    def neighbours(base: np.ndarray) -> Iterator[np.ndarray]:
        """1-flips, then every joint change of the tensors of each subset."""
        for t in live:
            for d in options(t):
                if d != base[t]:
                    nd = base.copy()
                    nd[t] = d
                    yield nd
        for sub in subsets():
            for ds in itertools.product(*(options(t) for t in sub)):
                if any(d == base[t] for t, d in zip(sub, ds, strict=True)):
                    continue    # fewer changes: a smaller subset has them
                nd = base.copy()
                nd[list(sub)] = ds
                yield nd

    while made < calls and time.perf_counter() < deadline:
        cur = inc.step_s
        for nd in neighbours(inc.dec.copy()):
            made += 1
            if inc.consider(nd, "local_search") < cur:
                break       # restart around the new incumbent
            if made >= calls or time.perf_counter() >= deadline:
                return made
        else:
            return made     # a local optimum of the whole neighbourhood
    return made
