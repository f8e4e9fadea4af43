"""The protocol every bound source of the exact tier follows, so that the search lists
them in :data:`~slackopt.solvers.milp.search.phases.PHASES` and runs them alike.

A bound source is called with the instance, the budget and a :class:`BoundContext` (the
deadline, the seed, the incumbent's step and the values of the sources that ran before
it) and returns a :class:`BoundValue`: lower bounds on the simulated step time of every
plan the barrier-free runtime runs, by name, each *certified* (floating point cannot
lift it above the true value; these alone decide ``lower_bound_s`` and the status) or
not (a MILP solver's own dual bound: reported, decides nothing), the entries it adds
to the solve's ``info``, and any plans its solves produced (the search simulates them).
The docs page "The exact tier" lists the sources in the order they run and how each
bound is certified.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from slackopt.instance import Instance


@dataclass
class BoundValue:
    """What one bound source found.

    Attributes:
        bounds: certified lower bounds (s) by name (a key of ``info["bounds"]``; None:
            no bound).
        uncertified: uncertified lower bounds (s) by name (``info["uncertified_bounds"]``).
        info: entries for the solve's ``info``, by key.
        plans: decision vectors (int8 [n_saved] each) its solves produced, in order: the
            search simulates each, and none of them is trusted without that.
        model_value: a value in the source's own model units that a later source may
            reuse through :attr:`BoundContext.earlier` (the timing LP's certified bound).
    """

    bounds: dict[str, float | None]
    uncertified: dict[str, float | None] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    plans: list[np.ndarray] = field(default_factory=list)
    model_value: float | None = None


@dataclass(frozen=True)
class BoundContext:
    """What a bound source may use beside the instance and the budget.

    Attributes:
        deadline: ``time.perf_counter()`` time by which the solve must end (s).
        seed: the solve's seed (for a source's MILP solver).
        upper_s: the simulated step (s) of the fastest plan found so far, or None.
        earlier: the values of the sources that ran before in this solve, by name.
    """

    deadline: float
    seed: int
    upper_s: float | None
    earlier: Mapping[str, BoundValue]

    def left(self) -> float:
        """Seconds to the deadline (negative once it has passed)."""
        return self.deadline - time.perf_counter()


class BoundSource(Protocol):
    """A lower bound on the step time of every plan: ``name`` (its phase in
    ``info["phases"]``), ``stages`` and ``single_pass`` (its argument covers pipeline
    stages, ``Instance.single_pass`` False, and single passes; the search skips it where
    it does not) and a call ``source(inst, M, ctx) -> BoundValue`` (`M` in bytes) that
    ends by ``ctx.deadline``."""

    name: str
    stages: bool
    single_pass: bool

    def __call__(self, inst: Instance, M: int, ctx: BoundContext) -> BoundValue: ...
