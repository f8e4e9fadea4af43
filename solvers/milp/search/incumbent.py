"""The incumbent of the MILP search: every candidate plan is judged by the evaluator, and
the incumbent is the fastest one simulated so far; a deterministic local search around it
(1-flip descent, rebuild exchanges, then joint changes of 2 and 3 tensors) and an iterated
local search (kicks, each followed by a descent) find better plans with the evaluator as
judge.

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
from slackopt.simulate import Evaluation, simulate

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
        evaluation: the incumbent's evaluation under M, or None.
    """

    def __init__(self, inst: Instance, M: int,
                 on_improve: Callable[[float, str], None] | None = None) -> None:
        self.inst, self.M = inst, int(M)
        self.step_s = _INF
        self.dec: np.ndarray | None = None
        self.source = ""
        self.evaluation: Evaluation | None = None
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
            self.evaluation = ev
            if self._on_improve is not None:
                self._on_improve(val, source)
        return val


EXCHANGE_CANDIDATES = 40
"""Per recomp tensor, the cheaper rebuilds the exchange step tries in its place."""
EXCHANGE_MIN_SIZE = 0.6
"""An exchange partner holds at least this share of the recomp tensor's bytes."""
KICK_SIZES = (2, 5)
"""A kick changes between this many tensors (both included) of the incumbent."""
KICK_STALE = 1000
"""The iterated local search stops after this many kicks in a row that simulated no new
plan (on small instances every plan near the incumbent has been seen)."""


class _Moves:
    """The neighbourhoods the searches of this module walk, over the saved tensors with
    bytes of `inst` (decision vectors: int8 [n_saved])."""

    def __init__(self, inst: Instance, rng: np.random.Generator) -> None:
        self.s = np.asarray(inst.s, dtype=np.int64)
        self.c = np.asarray(inst.c, dtype=np.float64)
        self.ok_rec = np.isfinite(self.c)
        self.live = [t for t in range(inst.n_saved) if self.s[t] > 0]
        self.order = sorted(self.live, key=lambda t: (int(inst.saved_prod_idx[t]), t))
        # the rebuildable tensors, cheapest rebuild first (the exchange partners' order)
        self.by_cost = sorted((t for t in self.live if self.ok_rec[t]),
                              key=lambda t: (self.c[t], t))
        self.rng = rng

    def options(self, t: int) -> tuple[int, ...]:
        """Tensor t's decisions: keep, swap, and recomp where it can be rebuilt."""
        return (KEEP, SWAP, RECOMP) if self.ok_rec[t] else (KEEP, SWAP)

    def flips(self, base: np.ndarray) -> Iterator[np.ndarray]:
        """Every change of one tensor's decision."""
        for t in self.live:
            for d in self.options(t):
                if d != base[t]:
                    nd = base.copy()
                    nd[t] = d
                    yield nd

    def exchanges(self, base: np.ndarray) -> Iterator[np.ndarray]:
        """Rebuild exchanges: each recomp tensor t, dearest rebuild first, goes to keep or
        to swap while one of the ``EXCHANGE_CANDIDATES`` cheapest-rebuild tensors u that
        are not recomp, rebuild cheaper than t's and hold at least ``EXCHANGE_MIN_SIZE``
        of its bytes becomes recomp: about the same bytes made absent, for less rebuild
        time. 1-flips cannot make this move (t alone back on the device does not fit; u
        alone adds a rebuild)."""
        c, s = self.c, self.s
        rec = sorted((t for t in self.live if base[t] == RECOMP), key=lambda t: (-c[t], t))
        for t in rec:
            found = 0
            for u in self.by_cost:
                if c[u] >= c[t] or found == EXCHANGE_CANDIDATES:
                    break
                if base[u] == RECOMP or s[u] < EXCHANGE_MIN_SIZE * s[t]:
                    continue
                found += 1
                for d in (KEEP, SWAP):
                    nd = base.copy()
                    nd[t], nd[u] = d, RECOMP
                    yield nd

    def subsets(self) -> Iterator[tuple[int, ...]]:
        """Every 2-subset then every 3-subset when there are at most SUBSETS_ALL of
        them; else an endless draw, alternating k = 2 and 3, half of the draws k
        tensors adjacent in production order (the call budget ends it)."""
        live, order, rng = self.live, self.order, self.rng
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

    def joint(self, base: np.ndarray) -> Iterator[np.ndarray]:
        """Every joint change of the tensors of each subset of :meth:`subsets`."""
        for sub in self.subsets():
            for ds in itertools.product(*(self.options(t) for t in sub)):
                if any(d == base[t] for t, d in zip(sub, ds, strict=True)):
                    continue    # fewer changes: a smaller subset has them
                nd = base.copy()
                nd[list(sub)] = ds
                yield nd

    def kick(self, base: np.ndarray) -> np.ndarray:
        """`base` with ``KICK_SIZES`` tensors (a random number, random tensors) changed to
        another of their decisions at random."""
        nd = base.copy()
        k = min(len(self.live), int(self.rng.integers(KICK_SIZES[0], KICK_SIZES[1] + 1)))
        for t in self.rng.choice(self.live, size=k, replace=False).tolist():
            nd[t] = self.rng.choice([d for d in self.options(t) if d != nd[t]])
        return nd


def improve(inc: Incumbent, calls: int, seed: int, deadline: float) -> int:
    """Local search around the incumbent, at most `calls` calls of ``inc.consider``.

    Rounds of (1) first-improvement 1-flip descent: each tensor in turn tries the other
    decisions (keep, swap, recomp where rebuildable); the first faster plan becomes the
    incumbent and the scan restarts there; (2) once no flip helps, the rebuild exchanges
    (:meth:`_Moves.exchanges`: a recomp tensor back to keep or swap, a cheaper rebuild of
    about its size in its place); (3) a large-neighbourhood step: every joint change of
    k = 2 or 3 tensors (all subsets on small instances, ``SUBSETS_ALL``; else subsets
    drawn from ``numpy.random.default_rng(seed)`` until the budget ends, half of them k
    tensors adjacent in production order). Tight budgets need these: freeing one
    tensor's bytes pays for keeping another (unet2 at 0.8 P: the optimum is three changes
    away from SlackSwap's plan, and no single or paired change improves it). An
    improvement restarts the descent.

    Deterministic for a given incumbent, `calls` and `seed` (the work limit is counted
    in calls, not seconds); `deadline` (perf_counter seconds) only cuts it short, so a
    later deadline runs a longer prefix of the same sequence of candidates.

    Returns:
        The calls made.
    """
    if inc.dec is None or calls <= 0:
        return 0
    mv = _Moves(inc.inst, np.random.default_rng(seed))
    made = 0

    def neighbours(base: np.ndarray) -> Iterator[np.ndarray]:
        """1-flips, then the rebuild exchanges, then the joint changes of subsets."""
        yield from mv.flips(base)
        yield from mv.exchanges(base)
        yield from mv.joint(base)

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


def kick_search(inc: Incumbent, plans: int, seed: int, deadline: float) -> int:
    """Iterated local search around the incumbent (Lourenco, Martin and Stuetzle,
    "Iterated local search", Handbook of Metaheuristics, 2003), at most `plans` plans
    simulated (``inc.evaluations``: a plan already simulated is not counted again):
    repeatedly kick the incumbent (:meth:`_Moves.kick`: 2 to 5 random tensors to another
    decision) and, when the kicked plan runs, descend from it to a local optimum of the
    rebuild exchanges and the 1-flips (first improvement: each faster plan replaces the
    current one and the scan goes on from it; then another pass, until a pass changes
    nothing); ``inc.consider`` keeps the fastest plan, so a descent that ends faster
    than the incumbent has made it the incumbent, and the next kick starts there. It
    leaves the basin that :func:`improve` stops in (measured on the SD-1.5 UNet:
    docs/bounds.md and instances/bench/README.md).

    Deterministic for a given incumbent (and the plans `inc` has simulated), `plans` and
    `seed`; `deadline` (perf_counter seconds) only cuts it short.

    Returns:
        The plans simulated.
    """
    if inc.dec is None or plans <= 0:
        return 0
    mv = _Moves(inc.inst, np.random.default_rng(seed))
    first = inc.evaluations

    def spent() -> bool:
        return inc.evaluations - first >= plans or time.perf_counter() >= deadline

    stale = 0       # kicks in a row that simulated nothing new (all of it seen before)
    while not spent() and stale < KICK_STALE:
        before = inc.evaluations
        d = mv.kick(inc.dec)
        val = inc.consider(d, "kick")
        moved = math.isfinite(val)
        while moved and not spent():
            moved = False
            for make in (mv.exchanges, mv.flips):
                for nd in make(d):
                    v = inc.consider(nd, "kick")
                    if v < val:
                        d, val, moved = nd, v, True
                        break       # rebuild the moves around the new plan
                    if spent():
                        return inc.evaluations - first
                if moved:
                    break
        stale = stale + 1 if inc.evaluations == before else 0
    return inc.evaluations - first
