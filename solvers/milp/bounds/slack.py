"""What the bubbles of a pipeline stage can absorb: the idle time of the ideal schedule
after each op, and where a rebuild can run at the earliest. The stage forms of the
deficit bounds (:mod:`~.deficit`, :mod:`~.deficit_lagrange`) and the enumeration's time
bound read them.

The argument they serve (docs/model.md, "A pipeline stage"): the compute stream runs its
tasks one at a time, each no earlier than its unit's earliest start, so in every run
each op starts no earlier than its ideal start S*_k, and every task after op k runs
after its real start S_k. Hence, with D_k the ideal durations of ops k..n-1 and R_{>k}
the rebuild time after op k (the rebuilds in the gaps before ops g > k),

    T >= S_k + D_k + R_{>k},   so   T - T* >= (S_k - S*_k) + R_{>k} - slack_k,

where ``slack_k = T* - S*_k - D_k`` is the idle time of the ideal schedule after op k
starts (the bubbles after it). In a single pass it is 0, and the bounds keep their
single-pass form there. The same from the first task of a unit u (a rebuild of its
first gap, or its first op a), which starts no earlier than the later of the previous
task's end and u's earliest start, so no earlier than S*_a:
``T - T* >= X_{>=u} - slack_a``, X_{>=u} the stalls and rebuild time of the tasks from
there on. slack_a is constant over a run of units without idle between them: the
*segments* carry it (:func:`stage_slack`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slackopt.instance import Instance
from slackopt.solvers.milp.model.steps import rebuild_gaps

MARGIN = 1e-12
"""Relative margin (of T*) added to every slack: the ideal times are floating-point sums,
so a computed idle may fall short of the evaluator's by a few units in the last place."""


@dataclass(frozen=True)
class StageSlack:
    """The idle the ideal schedule of a stage leaves, in s, and the earliest rebuild gaps.

    Attributes:
        after: per scheduled op k, the ideal idle after op k starts (``slack_k``, float64
            [n_ops]), raised by :data:`MARGIN` x T*; zeros for a single pass.
        seg_start: the first op of each segment (a maximal run of units without idle
            between them; int64, increasing, starting at 0).
        seg_slack: per segment, the ideal idle after its first unit starts (float64,
            raised by the margin): its first unit starts no earlier than its earliest
            start and the previous unit's end, so the idle just before it absorbs
            nothing that follows.
        seg_of: per saved tensor, the segment of its earliest rebuild gap (int64; the
            last segment for a tensor that cannot be rebuilt).
        sure: per saved tensor, the earliest op before which its rebuild can run (its
            first backward reader, or the gap of a recomp tensor whose recipe reads it,
            transitively: :func:`~slackopt.solvers.milp.model.steps.rebuild_gaps`;
            n_ops for a tensor that cannot be rebuilt). A recomp tensor's rebuild runs
            after op ``sure - 1``.
    """

    after: np.ndarray
    seg_start: np.ndarray
    seg_slack: np.ndarray
    seg_of: np.ndarray
    sure: np.ndarray


def unit_idle(inst: Instance) -> np.ndarray:
    """Per unit, the idle of the ideal schedule before it (s, float64 [n_units]): its
    earliest start less the ideal end of the unit before (0 for the first unit), at least
    0; the instance's ideal schedule (``Instance.start_s``) starts each unit at the later
    of the two."""
    units = inst.units
    ends = np.asarray(inst.end_s, dtype=np.float64)[np.asarray(inst.unit_last_op)]
    prev = np.concatenate(([0.0], ends[:-1])) if len(units) else np.zeros(0)
    earliest = np.array([u.earliest_start_s for u in units], dtype=np.float64)
    return np.maximum(0.0, earliest - prev)


def stage_slack(inst: Instance) -> StageSlack:
    """The :class:`StageSlack` of `inst` (any instance; a single pass has no idle)."""
    n = int(inst.n_ops)
    idle = unit_idle(inst)
    margin = MARGIN * float(inst.ideal_time_s)
    # idle of the units after each unit, and from each unit on
    later = np.concatenate((np.cumsum(idle[::-1])[::-1][1:], [0.0])) if idle.size else idle
    op_unit = np.asarray(inst.op_unit, dtype=np.int64)
    after = later[op_unit] + margin if n else np.zeros(0)
    first_op = np.concatenate(([0], np.asarray(inst.unit_last_op)[:-1] + 1)) \
        if idle.size else np.zeros(0, dtype=np.int64)
    segs = [0] + [u for u in range(1, idle.size) if idle[u] > 0.0]
    seg_start = first_op[segs].astype(np.int64) if idle.size else np.zeros(1, dtype=np.int64)
    seg_slack = (later[segs] if idle.size else np.zeros(1)) + margin
    sure = earliest_rebuild(inst)
    seg_of = np.searchsorted(seg_start, np.minimum(sure, max(n - 1, 0)), side="right") - 1
    return StageSlack(after=np.asarray(after, dtype=np.float64), seg_start=seg_start,
                      seg_slack=np.asarray(seg_slack, dtype=np.float64),
                      seg_of=np.maximum(seg_of, 0).astype(np.int64), sure=sure)


def earliest_rebuild(inst: Instance) -> np.ndarray:
    """Per saved tensor, the earliest op before which the runtime can rebuild it (int64
    [n_saved]; n_ops when it cannot be rebuilt): see :class:`StageSlack` ``sure``."""
    nS, n = int(inst.n_saved), int(inst.n_ops)
    rec_ok = np.isfinite(np.asarray(inst.c, dtype=np.float64)).tolist()
    deps: list[list[int]] = [[] for _ in range(nS)]
    for u in range(nS):
        for t in inst.recipe_inputs[u]:
            if int(t) != u:
                deps[int(t)].append(u)
    G = rebuild_gaps(inst.saved_prod_idx.tolist(), rec_ok, deps,
                     inst.saved_first_bwd_idx.tolist())
    return np.array([min(g) if ok and g else n for g, ok in zip(G, rec_ok, strict=True)],
                    dtype=np.int64)
