"""The microbatch bound of a pipeline stage: the single-pass bounds of each microbatch's
own pass, added up along the stage's schedule less the bubbles that absorb them.

A stage's microbatch j (of chunk c) is a *group*: the units (j, F), (j, B) and (j, W)
and the tensors they produce. A group is *contiguous* when its units follow each other
in the schedule, F then B (then W), and no op outside it reads its tensors or runs in
its recipes. Idle between its units in the ideal schedule (``Group.idle_s``, a few
femtoseconds where a unit's earliest start is the previous unit's end rounded) is
charged against its bound. Its ops and tensors then
form a single-pass instance of their own (:attr:`Group.sub`: built by
:func:`microbatch_groups`), the one-microbatch step of the profile for a stage
:func:`slackopt.stage.build_stage` made. Under 1F1B the last stage's microbatches are
all contiguous; where microbatches interleave (the first stages) none is.

Why a single-pass bound of the group bounds the group's part of every stage run
(docs/model.md, "A pipeline stage"): let X_g be the stall and rebuild time of the
group's tasks and d_g <= ``idle_s`` the idle inside it in the run (a unit waits for its
earliest start only as long as the ideal schedule does, or less: the unit before ends
no earlier than ideally). Take the group's origin at the instant its first task could
start (the later of the previous task's end and its unit's earliest start): relative
to it, op k of the group starts at its ideal start in the sub-instance plus the
group's stalls, rebuilds and idle before k; charge the idle as stall of the unit after
it (X_g + d_g in all). Every fact the
certified single-pass bounds use holds for the group's tasks and copies in that frame:
its tensors' bytes are at most M (other groups' bytes only add), each D2H starts after
its tensor's real ready time and lasts at least latency + s / W on a serial engine
(other groups' copies only delay it; none is produced inside the group, so none joins
its FIFO between its copies), no H2D of its tensors starts before the real end of its F
unit, a swap absent at an op comes back by an H2D before its next reader, a recomp
tensor is rebuilt once before its first need, and the group's stalls and rebuilds are
``T_sub - T*_sub`` of its single-pass accounting. So ``X_g + d_g >= L_g``, a certified
bound of one of :data:`RELAXATIONS` on the sub-instance at budget M, less its T*. The
bounds that are not relaxations of those rules prove nothing here: the enumeration's
optimum (other groups' memory and copies can change which plan of the group is
fastest), the time-indexed model (its admission rows). The phase "microbatch" of the
search (:mod:`slackopt.solvers.milp.search.microbatch`) solves each distinct group with
the exact tier and reads these bounds from its ``info["bounds"]``.

Along the schedule (:mod:`~.slack`): ``T - T* >= X_{>=a} - idle_{>=a}`` for every op a,
X_{>=a} the stalls and rebuilds after op a - 1 and idle_{>=a} the ideal idle from its
end on, and X_{>=a} >= the sum of L_g over the contiguous groups that start at or after
a. With ``L_g - idle_s`` for L_g, the bound is T* plus the largest of these over the
idle-free segments' first units (whose own idle before them absorbs nothing after
them), at least 0 (:func:`combine`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from slackopt.instance import Instance
from slackopt.records import Tensor
from slackopt.solvers.milp.bounds.slack import stage_slack

RELAXATIONS = ("deficit", "deficit_lagrange", "checkpoint_lp", "timing_lp")
"""The certified bound sources of the exact tier (``info["bounds"]`` keys) whose argument
is a relaxation of the runtime's rules, and so holds for a contiguous group's part of a
stage run (module docstring): the deficit bound, its Lagrangian, the checkpoint LP, the
timing LP raised by its certified branch and bound. Not the enumeration (an optimum of
the group alone) nor the time-indexed model (its admission rows read the look-ahead
allocations, which other groups' tasks change)."""
REL_MARGIN = 1e-12
"""Relative margin (of T*) the combined bound is lowered by: it adds up differences of
floating-point bounds and times."""


@dataclass(frozen=True)
class Group:
    """One microbatch (and chunk) of a stage whose units run back to back.

    Attributes:
        microbatch, chunk: the group's microbatch and model chunk.
        units: its unit indices in the stage's schedule (consecutive when contiguous).
        idle_s: the ideal idle between its units (s, >= 0; contiguous groups).
        first_op: the stage index of its first scheduled op.
        ops: the stage indices of its scheduled ops (int64, increasing).
        saved: per saved position of :attr:`sub`, the stage's saved position (int64).
        sub: its single-pass instance (the group's ops, rebuild-only ops and tensors,
            the stage's link, RNG capture and host limit).
        key: a signature equal for groups whose instances are equal up to names (the
            copies of one profile): their bounds are computed once.
    """

    microbatch: int
    chunk: int
    units: tuple[int, ...]
    idle_s: float
    first_op: int
    ops: np.ndarray
    saved: np.ndarray
    sub: Instance = field(repr=False)
    key: tuple = field(repr=False)


def microbatch_groups(inst: Instance, *, contiguous: bool = True) -> list[Group]:
    """The contiguous groups of `inst` (module docstring), in schedule order; none for a
    single pass or an instance with views (the solvers see the lowered instance). With
    `contiguous` False, every group whose units run F, B (, W) in that order, wherever
    they lie, and whose tensors and recipes stay inside it (for planning: its bound
    would not hold)."""
    if inst.single_pass or inst.aliased:
        return []
    units = inst.units
    last = np.asarray(inst.unit_last_op, dtype=np.int64)
    first = np.concatenate(([0], last[:-1] + 1))
    end = np.asarray(inst.end_s, dtype=np.float64)
    by_mb: dict[tuple[int, int], list[int]] = {}
    for u, span in enumerate(units):
        by_mb.setdefault((span.microbatch, span.chunk), []).append(u)
    n = int(inst.n_ops)
    op_group = np.full(len(inst.ops), -1, dtype=np.int64)   # scheduled ops: their group
    cands: list[tuple[tuple[int, int], list[int]]] = []
    for key, us in by_mb.items():
        kinds = "".join(units[u].kind for u in us)
        if kinds not in ("FB", "FBW") or (
                contiguous and us != list(range(us[0], us[0] + len(us)))):
            continue
        for u in us:
            op_group[first[u]:last[u] + 1] = len(cands)
        cands.append((key, us))
    ok = [True] * len(cands)
    # a tensor read across groups, or a recipe through another group's op, breaks both
    members: list[list[int]] = [[] for _ in cands]
    idx = inst.op_index
    for ti, t in enumerate(inst.tensors):
        g = int(op_group[idx(t.producer)])
        seen = {g} | {int(op_group[idx(r)]) for r in t.readers}
        if t.recipe is not None:
            seen |= {int(op_group[idx(o)]) for o in t.recipe.ops if idx(o) < n}
        if len(seen) > 1:
            for h in seen:
                if h >= 0:
                    ok[h] = False
        elif g >= 0:
            members[g].append(ti)
    out = []
    for g, ((mb, ch), us) in enumerate(cands):
        if ok[g]:
            idle = sum(max(0.0, units[u].earliest_start_s - float(end[last[u - 1]]))
                       for u in us[1:])
            ops = np.concatenate([np.arange(first[u], last[u] + 1) for u in us])
            grp = _group(inst, mb, ch, us, idle, ops, members[g])
            if grp is not None:
                out.append(grp)
    return out


def _group(inst: Instance, mb: int, ch: int, us: list[int], idle: float, idx: np.ndarray,
           members: list[int]) -> Group | None:
    """The :class:`Group` of scheduled ops `idx` (stage indices, in order) and tensors
    `members` (indices into ``inst.tensors``), or None when they do not make a single
    pass."""
    tensors: list[Tensor] = [inst.tensors[i] for i in members]
    rebuild = sorted({inst.op_index(o) for t in tensors if t.recipe is not None
                      for o in t.recipe.ops if inst.op_index(o) >= inst.n_ops})
    ops = [inst.ops[i] for i in idx.tolist()] + [inst.ops[i] for i in rebuild]
    sub = Instance(f"{inst.name}#{mb}c{ch}", ops, tensors, inst.link,
                   rng_capture=inst.rng_capture, host_memory_bytes=inst.host_memory_bytes)
    if not sub.single_pass:
        return None
    saved = np.array([inst.saved_position(nm) for nm in sub.saved_names], dtype=np.int64)
    return Group(mb, ch, tuple(us), idle, int(idx[0]), idx.astype(np.int64), saved, sub,
                 _signature(sub))


def _signature(sub: Instance) -> tuple:
    """The instance's data with every name replaced by its index."""
    oi, ti = sub.op_index, {t.name: i for i, t in enumerate(sub.tensors)}
    ops = tuple((o.phase, o.duration_s, o.workspace_bytes, o.never_recompute, o.random,
                 o.kind == "rng_regen") for o in sub.ops)
    ts = tuple((t.size_bytes, oi(t.producer), tuple(oi(r) for r in t.readers), t.category,
                None if t.recipe is None else (tuple(oi(o) for o in t.recipe.ops),
                                               tuple(ti[x] for x in t.recipe.inputs),
                                               t.recipe.transient_bytes),
                tuple(oi(u) for u in t.mutated_by)) for t in sub.tensors)
    return ops, ts


def combine(inst: Instance, groups: list[Group], extra_s: list[float]) -> float:
    """T* plus the largest, over the idle-free segments of the ideal schedule, of the
    groups' `extra_s` (s, >= 0 each: their bounds less their T*) summed over the groups
    that start in the segment or after it, less the ideal idle from the segment's start
    on; at least T* (module docstring). Lowered by :data:`REL_MARGIN` x T*."""
    T = float(inst.ideal_time_s)
    if not groups:
        return T
    sl = stage_slack(inst)
    starts = np.array([g.first_op for g in groups], dtype=np.int64)
    extra = np.asarray(extra_s, dtype=np.float64)
    best = 0.0
    for a, idle in zip(sl.seg_start.tolist(), sl.seg_slack.tolist(), strict=True):
        best = max(best, float(np.sum(extra[starts >= a])) - idle)
    return T + max(0.0, best - REL_MARGIN * T)


def microbatch_bound(inst: Instance, groups: list[Group], bounds: dict[tuple, float]
                     ) -> tuple[float, list[float]]:
    """The microbatch bound (s) of `inst`: :func:`combine` over the contiguous `groups`
    (:func:`microbatch_groups`) with ``bounds[group.key]``, a certified bound of the
    group's single pass at the stage's budget from one of :data:`RELAXATIONS` (s), less
    its T* and its idle; a group without one counts 0.

    Returns:
        (the bound, each group's share: its bound less its T* and idle, s).
    """
    extra = [max(0.0, bounds[g.key] - float(g.sub.ideal_time_s) - g.idle_s)
             if g.key in bounds else 0.0 for g in groups]
    return combine(inst, groups, extra), extra
