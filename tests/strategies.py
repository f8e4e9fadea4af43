"""Hypothesis strategies that cover the instance language (issue 22, item 2).

:func:`instances` draws valid :class:`slackopt.Instance` objects, built through the public
constructors (``Op``, ``Tensor``, ``Recipe``, ``Link``, ``Instance``), so the loader's
validation runs on every one of them; nothing it would reject is emitted (the strategy
builds each construct the way the validator accepts it, and a rejection is an error of the
strategy or of the loader, never caught). :func:`budgets` draws budgets between the model
floor and P. :func:`constructs` says which constructs of the language an instance
exercises; :data:`CONSTRUCTS` lists them all, with what each means.

The list comes from the schema and its validation: ``slackopt/instance.py`` (Op, Tensor,
Recipe, Instance and their checks, the "Extensions" of its docstring: storages, RNG
capture, in-place mutation, host pinned-memory limit), ``slackopt/hardware.py`` (Link) and
``slackopt/io/`` (the JSON instance format: the same fields, plus ``meta``; a link with
one bandwidth for both directions or one per direction). Accepted by the loader but not
generated: views of
backward-pass tensors (never saved), a view with its own ``mutated_by``, a recipe declared
only by a view when its base declares none, ``random``/``never_recompute`` flags on backward
ops (they mean nothing there), an instance without ops, rebuild-only ops of duration 0,
values beyond the drawn ranges (links below 50 MB/s or above 1 TB/s, tensors above 9e9 B,
op times above 3 ms, latencies above 2 ms), and recipes of unsaved tensors that name ops
or tensors that do not exist (the loader does not check recipes of unsaved tensors; taken
here for a loader fault, not a construct).

Sizes: by default at most 6 saved tensors (``max_saved``), so that a test can enumerate
all 3^n plans; views of one storage are separate saved tensors here and one saved unit in
``instance.lowered`` (what the solvers and the evaluator plan), which has at most as many.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

from slackopt import Instance, Link, Op, Recipe, Tensor
from slackopt.instance import RNG_REGEN_KIND, RNG_STATE_CATEGORY

US = 1e-6
MIN_BW = 5e7
"""Slowest link drawn (B/s): 50 MB/s."""
MAX_BW = 1e12
"""Fastest link drawn (B/s): 1 TB/s."""

CONSTRUCTS: dict[str, str] = {
    # op graph
    "dag_skip": "a tensor read by a forward op that is not the op right after its producer",
    "dag_branch": "a tensor read by two or more forward ops",
    "multi_output_all_saved": "a forward op with two or more outputs, all of them saved",
    "several_bwd_readers": "a saved tensor read by two or more backward ops",
    "fwd_temporary": "a forward tensor that is not saved (forward readers only)",
    "bwd_tensor": "a tensor produced by a backward op (a gradient temporary)",
    "no_readers": "a tensor that no op reads",
    "zero_byte_saved": "a saved tensor of 0 bytes",
    "zero_duration_op": "a scheduled op of duration 0",
    "no_saved": "an instance without saved tensors",
    "op_layers": "ops in blocks (layer >= 0)",
    "op_flops": "an op with flops > 0",
    "meta": "a non-empty meta dict",
    # recipes
    "unrebuildable": "a saved tensor without a recipe (c = inf)",
    "multi_op_recipe": "a saved tensor whose recipe re-runs two or more forward ops",
    "recipe_rebuild_op": "a saved tensor whose recipe runs a rebuild-only op",
    "unused_rebuild_op": "a rebuild-only op that no recipe runs",
    "recipe_sibling_input": "a recipe reading another output of the same op",
    "recipe_chain": "a recipe reading another rebuildable (recomputable) saved tensor",
    "recipe_unrebuildable_input": "a recipe reading a saved tensor that cannot be rebuilt",
    "recipe_view_input": "a recipe reading a view (which reads its storage)",
    "recipe_transient": "a saved tensor's recipe with transient_bytes > 0",
    "recipe_on_unsaved": "a tensor that is not saved but declares a (valid) recipe",
    # workspaces
    "workspace_fwd": "a forward op with a workspace",
    "workspace_bwd": "a backward op with a workspace",
    "workspace_recipe": "a rebuildable saved tensor whose recipe needs a workspace",
    # in-place mutation
    "in_place_mutation": "a saved tensor with mutated_by (ready at its last mutation)",
    "mutation_rebuildable": "a saved mutated tensor whose recipe re-runs the mutating ops",
    "multiple_mutations": "a tensor mutated in place by two or more ops",
    # storages (views)
    "view_of_saved_base": "a view whose base tensor is saved",
    "view_of_unsaved_base": "a saved view whose base tensor is not saved",
    "view_later_op": "a view produced by a later op than its base",
    "several_views": "a storage with two or more views",
    "view_recipe_conflict": "views of one storage declaring different recipes (no recipe)",
    # RNG
    "random_op": "a random op (dropout)",
    "rng_state": "a saved RNG-state tensor (category rng_state)",
    "rng_regen_recipe": "a rebuildable recipe with an rng_regen op reading RNG state",
    "random_op_recipe": "a rebuildable recipe that re-runs a random op",
    "rng_capture_off_blocks": "rng_capture = false making a recipe invalid (c = inf)",
    # never_recompute
    "never_recompute_blocks": "a saved tensor whose recipe runs a never_recompute op",
    # host
    "host_limit": "a host pinned-memory limit (host_memory_bytes)",
    "host_limit_binding": "a host limit below the saved bytes A (all-swap exceeds it)",
    # link
    "latency": "a copy latency > 0",
    "zero_latency": "a copy latency of 0",
    "duplex_below_1": "a duplex factor < 1",
    "full_duplex": "a duplex factor of 1",
    "bw_50MBps": "a 50 MB/s link direction (the slowest drawn)",
    "bw_1TBps": "a 1 TB/s link direction (the fastest drawn)",
    "bw_slow": "a link direction of at most 200 MB/s",
    "bw_fast": "a link direction of at least 200 GB/s",
    "asym_d2h_slower": "a link whose D2H bandwidth is below its H2D bandwidth (GH200)",
    "asym_h2d_slower": "a link whose H2D bandwidth is below its D2H bandwidth",
    # sizes and timing
    "size_ratio_1e8": "saved sizes whose largest / smallest positive ratio is >= 1e8",
    "d2h_straddles_forward_end": "a saved tensor whose D2H (latency + s / W_d2h from "
                                 "its ready time) ends after the forward pass",
}
"""Every construct :func:`instances` can emit, name -> meaning (:func:`constructs`)."""


# ----------------------------------------------------------------------------- what is in
def constructs(inst: Instance) -> set[str]:
    """The constructs of :data:`CONSTRUCTS` that instance `inst` exercises.

    Read from the instance itself (its ops, tensors, link and derived arrays), not from how
    it was drawn, so it applies to any instance.

    Args:
        inst: a valid instance.

    Returns:
        A set of names, each a key of :data:`CONSTRUCTS`.
    """
    out: set[str] = set()
    ops, tensors = inst.ops, inst.tensors
    oi = inst.op_index
    nf = inst.n_fwd
    by_name = {t.name: t for t in tensors}
    saved = set(inst.saved_names)
    lowc = {n: float(inst.lowered.c[k]) for k, n in enumerate(inst.lowered.saved_names)}

    def rebuildable(name: str) -> bool:
        # a view is rebuildable when its storage is (the lowered instance decides)
        return math.isfinite(lowc.get(inst.storage_of(name), math.inf))

    outputs: dict[str, list[Tensor]] = {}
    for t in tensors:
        outputs.setdefault(t.producer, []).append(t)
        p = oi(t.producer)
        fr = [oi(r) for r in t.readers if oi(r) < nf]
        br = [oi(r) for r in t.readers if oi(r) >= nf]
        if any(q > p + 1 for q in fr):
            out.add("dag_skip")
        if len(fr) >= 2:
            out.add("dag_branch")
        if t.name in saved and len(br) >= 2:
            out.add("several_bwd_readers")
        if p < nf and t.name not in saved and t.readers:
            out.add("fwd_temporary")
        if p >= nf:
            out.add("bwd_tensor")
        if not t.readers:
            out.add("no_readers")
        if t.name in saved and t.size_bytes == 0:
            out.add("zero_byte_saved")
        if t.recipe is not None and t.name not in saved:
            out.add("recipe_on_unsaved")
        if len(t.mutated_by) >= 2:
            out.add("multiple_mutations")
        if t.mutated_by and t.name in saved:
            out.add("in_place_mutation")
            if t.recipe is not None and rebuildable(t.name):
                out.add("mutation_rebuildable")
    for prod, outs in outputs.items():
        if oi(prod) < nf and len(outs) >= 2 and all(t.name in saved for t in outs):
            out.add("multi_output_all_saved")
    if any(o.duration_s == 0 for o in inst.scheduled_ops):
        out.add("zero_duration_op")
    if inst.n_saved == 0:
        out.add("no_saved")
    if any(o.layer >= 0 for o in ops):
        out.add("op_layers")
    if any(o.flops > 0 for o in ops):
        out.add("op_flops")
    if inst.meta:
        out.add("meta")
    if any(o.workspace_bytes > 0 for o in ops[:nf]):
        out.add("workspace_fwd")
    if any(o.workspace_bytes > 0 for o in ops[nf:inst.n_ops]):
        out.add("workspace_bwd")
    if any(o.random for o in ops):
        out.add("random_op")

    # recipes of saved tensors
    used_rebuild: set[str] = {o for t in tensors if t.recipe is not None for o in t.recipe.ops}
    if any(o.phase == "rebuild" and o.name not in used_rebuild for o in ops):
        out.add("unused_rebuild_op")
    for k, name in enumerate(inst.saved_names):
        t = by_name[name]
        if t.category == RNG_STATE_CATEGORY:
            out.add("rng_state")
        rec = t.recipe
        if rec is None:
            if t.storage is None:
                out.add("unrebuildable")
            continue
        rops = [ops[oi(o)] for o in rec.ops]
        fin = rebuildable(name)
        if sum(o.phase == "fwd" for o in rops) >= 2:
            out.add("multi_op_recipe")
        if any(o.phase == "rebuild" for o in rops):
            out.add("recipe_rebuild_op")
        if rec.transient_bytes > 0:
            out.add("recipe_transient")
        if fin and int(inst.recipe_workspace[k]) > 0:
            out.add("workspace_recipe")
        if any(o.never_recompute for o in rops):
            out.add("never_recompute_blocks")
        if fin and any(o.kind == RNG_REGEN_KIND for o in rops) and any(
                by_name[x].category == RNG_STATE_CATEGORY for x in rec.inputs):
            out.add("rng_regen_recipe")
        if fin and any(o.random for o in rops):
            out.add("random_op_recipe")
        if not inst.rng_capture and not fin and not any(o.never_recompute for o in rops) and (
                any(o.random or o.kind == RNG_REGEN_KIND for o in rops)
                or any(by_name[x].category == RNG_STATE_CATEGORY for x in rec.inputs)):
            out.add("rng_capture_off_blocks")
        for x in rec.inputs:
            xt = by_name[x]
            if xt.producer == t.producer:
                out.add("recipe_sibling_input")
            out.add("recipe_chain" if rebuildable(x) else "recipe_unrebuildable_input")
            if xt.storage is not None:
                out.add("recipe_view_input")

    # storages
    views: dict[str, list[Tensor]] = {}
    for t in tensors:
        if t.storage is not None:
            views.setdefault(t.storage, []).append(t)
    for base, vs in views.items():
        b = by_name[base]
        if len(vs) >= 2:
            out.add("several_views")
        if any(oi(v.producer) > oi(b.producer) for v in vs):
            out.add("view_later_op")
        if base in saved:
            out.add("view_of_saved_base")
        elif any(v.name in saved for v in vs):
            out.add("view_of_unsaved_base")
        if len({m.recipe for m in (b, *vs) if m.recipe is not None}) >= 2:
            out.add("view_recipe_conflict")

    # host and link
    lk = inst.link
    if inst.host_memory_bytes is not None:
        out.add("host_limit")
        if inst.host_memory_bytes < inst.A:
            out.add("host_limit_binding")
    out.add("latency" if lk.copy_latency_s > 0 else "zero_latency")
    out.add("duplex_below_1" if lk.duplex_factor < 1 else "full_duplex")
    wd, wh = lk.d2h_bytes_per_s, lk.h2d_bytes_per_s
    if MIN_BW in (wd, wh):
        out.add("bw_50MBps")
    if MAX_BW in (wd, wh):
        out.add("bw_1TBps")
    if min(wd, wh) <= 2e8:
        out.add("bw_slow")
    if max(wd, wh) >= 2e11:
        out.add("bw_fast")
    if wd < wh:
        out.add("asym_d2h_slower")
    if wh < wd:
        out.add("asym_h2d_slower")

    # sizes and timing (storage level: what is copied)
    low = inst.lowered
    pos = [int(s) for s in low.s if s > 0]
    if pos and max(pos) >= 1e8 * min(pos):
        out.add("size_ratio_1e8")
    tf = low.forward_time_s
    for k in range(low.n_saved):
        if low.s[k] > 0 and (low.r[k] + lk.copy_latency_s + low.s[k] / wd) > tf:
            out.add("d2h_straddles_forward_end")
            break
    return out


# ----------------------------------------------------------------------------- drawing
@dataclass
class _Spec:
    """A tensor being drawn (turned into a :class:`Tensor` at the end)."""

    name: str
    producer: int                    # op index
    readers: list[int]               # op indices, ascending
    saved: bool                      # read by a backward op (in this instance, not lowered)
    size: int = -1                   # -1: drawn at the end
    recipe: Recipe | None = None
    category: str = "other"
    storage: str | None = None
    mutated_by: list[int] = field(default_factory=list)
    huge_ok: bool = True             # may be the huge tensor of the size-ratio mode


def _bandwidths() -> st.SearchStrategy[float]:
    """50 MB/s to 1 TB/s: the end points themselves, presets, and a log-spaced grid."""
    grid = st.integers(1, 99).map(lambda e: float(f"{MIN_BW * (MAX_BW / MIN_BW) ** (e / 100):.4g}"))
    return st.one_of(st.sampled_from([MIN_BW, MAX_BW]), st.sampled_from([25e9, 12e9, 1e8, 4e11]),
                     grid)


@st.composite
def _links(draw: st.DrawFn) -> Link:
    """A link: one bandwidth for both directions (half the time, written ``bytes_per_s``)
    or one per direction, drawn independently (either may be the slower)."""
    name = draw(st.sampled_from(["pcie4", "slow", "c2c"]))
    duplex = draw(st.one_of(st.just(1.0), st.just(0.85),
                            st.integers(5, 100).map(lambda k: k / 100)))
    lat = draw(st.one_of(st.just(0.0), st.just(1e-5),
                         st.integers(0, 2000).map(lambda k: k * US)))
    if draw(st.booleans()):
        return Link(name, draw(_bandwidths()), duplex, lat)
    return Link(name, duplex_factor=duplex, copy_latency_s=lat,
                d2h_bytes_per_s=draw(_bandwidths()), h2d_bytes_per_s=draw(_bandwidths()))


@st.composite
def instances(draw: st.DrawFn, max_saved: int = 6, max_ops: int = 14) -> Instance:
    """A valid instance drawn from the whole instance language (:data:`CONSTRUCTS`).

    Built through ``Op``, ``Tensor``, ``Recipe``, ``Link`` and ``Instance``: validation
    runs, and an instance it rejects is an error (of this strategy or of the loader), not
    skipped. Each construct is built the way the validator accepts it: recipes re-run only
    forward ops up to the producer (plus its in-place mutators) and rebuild-only ops, and
    read only saved tensors drawn earlier (so recipes are acyclic) outside their own
    storage; views name a base that owns its storage, produced no later in the forward
    pass, and a view either declares no recipe, its base's (when the base is not mutated)
    or a different one (a conflict: the storage cannot be rebuilt), so that the lowered
    instance is valid too.

    Args:
        max_saved: most saved tensors (views counted one by one; RNG-state tensors
            included); >= 0.
        max_ops: most scheduled (forward + backward) ops, >= 2; rebuild-only ops come on
            top (at most one per recipe, plus one unused).

    Returns:
        A strategy of :class:`slackopt.Instance`.
    """
    if max_saved < 0 or max_ops < 2:
        raise ValueError(f"instances: max_saved >= 0 and max_ops >= 2, got {max_saved}, "
                         f"{max_ops}")
    nf = draw(st.integers(1, min(7, max_ops - 1)))
    nb = 0 if draw(st.integers(0, 24)) == 0 else draw(st.integers(min(nf, max_ops - nf),
                                                                  max_ops - nf))
    n = nf + nb

    def dur() -> float:
        return 0.0 if draw(st.integers(0, 14)) == 0 else draw(st.integers(1, 3000)) * US

    def workspace(p: int) -> int:
        return draw(st.integers(1, 3_000_000)) if draw(st.integers(0, 99)) < p else 0

    def flops() -> float:
        return 0.0 if draw(st.booleans()) else float(draw(st.integers(1, 10**12)))

    ops: list[Op] = []
    for i in range(nf):
        rnd = draw(st.integers(0, 3)) == 0
        ops.append(Op(f"f{i}", "fwd", dur(), layer=draw(st.integers(-1, 2)),
                      kind="dropout" if rnd else draw(st.sampled_from(["gemm", "add", "norm"])),
                      workspace_bytes=workspace(20), flops=flops(),
                      never_recompute=draw(st.integers(0, 7)) == 0, random=rnd))
    for i in range(nb):
        ops.append(Op(f"b{i}", "bwd", dur(), layer=draw(st.integers(-1, 2)),
                      kind=draw(st.sampled_from(["gemm", "add", "norm"])),
                      workspace_bytes=workspace(30), flops=flops()))
    rebuild_ops: list[Op] = []
    fwd, bwd = list(range(nf)), list(range(nf, n))
    specs: list[_Spec] = []
    room = [max_saved]          # saved tensors still allowed

    def subset(xs: list[int], lo: int, hi: int) -> list[int]:
        # lo..hi of xs (as many as there are), in xs's order: one draw of a bit mask (a
        # list of sampled elements costs several draws, and the drawing dominates the
        # time of a test that draws hundreds of instances); shrinks towards the first lo
        if not xs or hi <= 0:
            return []
        if hi == 1 and lo == 1:
            return [xs[draw(st.integers(0, len(xs) - 1))]]
        bits = draw(st.integers(0, 2 ** len(xs) - 1))
        got = [x for b, x in enumerate(xs) if bits >> b & 1]
        at = bits % len(got) if got else 0   # too many: hi of them from a drawn offset
        got = (got[at:] + got[:at])[:hi]
        for x in xs:
            if len(got) >= min(lo, len(xs)):
                break
            if x not in got:
                got.append(x)
        return sorted(got)

    def bwd_readers() -> list[int]:
        # one reader mostly (several readers of one op make every plan hold them together)
        return subset(bwd, 1, 1 if draw(st.integers(0, 2)) else 3)

    def new_rebuild_op(regen: bool = False) -> str:
        name = f"r{len(rebuild_ops)}"
        rebuild_ops.append(Op(name, "rebuild", dur() or 1 * US,
                              kind=RNG_REGEN_KIND if regen else "rebuild",
                              workspace_bytes=workspace(30),
                              never_recompute=(not regen) and draw(st.integers(0, 5)) == 0))
        return name

    def storage(s: _Spec) -> str:
        return s.storage or s.name

    def recipe_for(s: _Spec, p: int) -> Recipe | None:
        """A valid recipe for spec `s` produced at op p (with its mutators), or None."""
        kind = draw(st.integers(0, 9))
        if kind <= 2:
            return None
        if kind <= 5:
            rops = [f"f{p}"]
        elif kind <= 7:
            rops = [f"f{q}" for q in subset(fwd[:p], 1, 3)] + [f"f{p}"]
        else:
            rops = ([f"f{q}" for q in subset(fwd[:p + 1], 0, 2)] + [new_rebuild_op()])
        rops += [f"f{u}" for u in s.mutated_by if f"f{u}" not in rops]
        cands = [x.name for x in specs if x.saved and storage(x) != storage(s)
                 and x.producer <= p]
        inputs = tuple(subset(list(range(len(cands))), 0, 2))
        transient = draw(st.integers(1, 2_000_000)) if draw(st.integers(0, 3)) == 0 else 0
        return Recipe(tuple(rops), tuple(cands[i] for i in inputs), transient)

    counter = [0]

    def new_name(prefix: str) -> str:
        counter[0] += 1
        return f"{prefix}{counter[0]}"

    for p in fwd:
        later = fwd[p + 1:]
        n_out = draw(st.sampled_from([1, 1, 2, 3] if p == 0 else [0, 1, 1, 1, 2, 2, 3]))
        all_saved = n_out >= 2 and draw(st.booleans())
        if ops[p].random and room[0] >= 2 and bwd and draw(st.integers(0, 3)) > 0:
            # dropout: its RNG state (8 bytes, saved) and a mask regenerated from it
            rng = _Spec(new_name("rng"), p, bwd_readers(), True, size=8,
                        category=RNG_STATE_CATEGORY, huge_ok=False)
            specs.append(rng)
            mask = _Spec(new_name("mask"), p, bwd_readers(), True, category="mask")
            mask.recipe = Recipe((new_rebuild_op(regen=True),), (rng.name,))
            specs.append(mask)
            room[0] -= 2
        for _ in range(n_out):
            saved = bool(bwd) and room[0] > 0 and (all_saved or draw(st.integers(0, 9)) < 6)
            fr = subset(later, 0, 3) if not saved or draw(st.booleans()) else []
            s = _Spec(new_name("t"), p, fr + (bwd_readers() if saved else []), saved)
            if saved:
                room[0] -= 1
            if fr and draw(st.integers(0, 2)) == 0:
                k = draw(st.integers(1, min(2, len(fr))))
                s.mutated_by = subset(fr, k, k)
            # a view of an earlier forward tensor that owns its storage
            bases = [b for b in specs if b.storage is None and b.producer <= p
                     and b.category != RNG_STATE_CATEGORY]
            if bases and not s.mutated_by and draw(st.integers(0, 2)) == 0:
                b = bases[draw(st.integers(0, len(bases) - 1))]
                s.storage = b.name
                s.huge_ok = False
                how = draw(st.integers(0, 3))
                if how == 1 and b.recipe is not None and not b.mutated_by:
                    s.recipe = b.recipe
                elif how == 2 and b.recipe is not None and b.recipe != Recipe((f"f{p}",)):
                    s.recipe = Recipe((f"f{p}",))   # differs from the base's: a conflict
            elif saved or draw(st.integers(0, 4)) == 0:
                s.recipe = recipe_for(s, p)
            specs.append(s)
    for i in bwd[:-1]:          # gradient temporaries
        if draw(st.booleans()):
            specs.append(_Spec(new_name("g"), i, subset(bwd[bwd.index(i) + 1:], 0, 2), False))
    if draw(st.integers(0, 9)) == 0:
        new_rebuild_op()

    # sizes: moderate, or tiny ones beside one huge tensor (ratios up to 1e9)
    huge_mode = draw(st.integers(0, 2)) == 0
    cands = [k for k, s in enumerate(specs) if s.saved and s.huge_ok and s.size < 0]
    huge_at = cands[draw(st.integers(0, len(cands) - 1))] if huge_mode and cands else -1
    for k, s in enumerate(specs):
        if s.size >= 0:
            continue
        if k == huge_at:
            s.size = draw(st.integers(1, 9)) * 10 ** draw(st.integers(7, 9))  # <= 9e9
        elif draw(st.integers(0, 11)) == 0:
            s.size = 0
        elif huge_mode:
            s.size = draw(st.one_of(st.just(1), st.integers(1, 64)))
        else:
            s.size = draw(st.integers(1, 9)) * 10 ** draw(st.integers(3, 7))

    names = [o.name for o in ops]
    tensors = [Tensor(s.name, s.size, names[s.producer], tuple(names[r] for r in s.readers),
                      s.recipe, s.category, s.storage,
                      tuple(names[u] for u in s.mutated_by)) for s in specs]
    total = sum(s.size for s in specs if s.saved and s.storage is None)
    host = None
    if draw(st.integers(0, 2)) == 0:
        host = draw(st.one_of(st.just(0), st.integers(0, max(total, 1)),
                              st.integers(total, 2 * total + 1)))
    meta = {"generator": "tests/strategies.py"} if draw(st.booleans()) else {}
    return Instance("drawn", ops + rebuild_ops, tensors, draw(_links()), meta,
                    rng_capture=draw(st.integers(0, 4)) > 0, host_memory_bytes=host)


@st.composite
def stages(draw: st.DrawFn, max_saved: int = 3, max_ops: int = 8) -> Instance:
    """Pipeline stages (docs/model.md, "A pipeline stage"): a single-pass instance of
    :func:`instances` (a profiled microbatch) as stage i of p under a schedule of
    :data:`slackopt.pipeline.SCHEDULES`, m microbatches, v chunks where the schedule
    interleaves, hop times from 0 to 3 ms; so several microbatches in flight, idle gaps
    between units and split backwards (W units) are drawn.

    Args:
        max_saved, max_ops: the base instance's sizes (:func:`instances`); a stage has up
            to m * v times as many.
    """
    base = draw(instances(max_saved=max_saved, max_ops=max_ops))
    return stage_of(base, lambda options: draw(st.sampled_from(options)))


def stage_of(base: Instance, choose: Callable[[Sequence[Any]], Any]) -> Instance:
    """`base` as a pipeline stage, each parameter picked by `choose` from its options:
    a schedule of :data:`slackopt.pipeline.SCHEDULES` (1F1B when a split backward would
    leave a half empty), p in 1-3, m in 1-4 (at least p under 1F1B; a multiple of its
    round size when interleaved), v in 1-2 where interleaved, stage i < p, hop times 0,
    0.1 or 3 ms. What :func:`stages` draws and :func:`stage_sample` picks."""
    from slackopt.pipeline import SCHEDULES
    from slackopt.stage import build_stage, weight_grad_ops

    name = choose(sorted(SCHEDULES))
    spec = SCHEDULES[name]
    p = choose(range(1, 4))
    stage = choose(range(p))
    if spec.split_backward:  # a split needs backward ops in both halves
        w = weight_grad_ops(base, input_grad=stage > 0)
        n_bwd = base.n_ops - base.n_fwd
        if not w or len(w) == n_bwd:
            name, spec = "1f1b", SCHEDULES["1f1b"]
    m = choose(range(p if name == "1f1b" else 1, 5))
    if spec.interleaved:
        while m % max(1, m // p):
            m += 1
    v = choose(range(1, 3)) if spec.interleaved else 1
    return build_stage(base, name, stage, p, m, v,
                       hop_s=choose([0.0, 1e-4, 3e-3]))


def budgets(inst: Instance) -> st.SearchStrategy[int]:
    """Budgets (bytes) from the model floor to P, both included.

    The floor is :func:`slackopt.solvers.milp.model_floor` of ``inst.lowered`` (the
    storage-level instance the solvers and the evaluator plan; ``inst`` itself when it has
    no views): no plan runs below it. Draws the floor, P, fractions 0.1-0.95 of the way
    and any integer in between.

    Args:
        inst: the instance.

    Returns:
        A strategy of ints in [floor, P].

    Raises:
        ValueError: the floor is above P (a fault of model_floor: the all-swap footprint
            is contained in the keep-all one).
    """
    from slackopt.solvers.milp import model_floor

    lo, hi = int(model_floor(inst.lowered)), int(inst.P)
    if lo > hi:
        raise ValueError(f"model floor {lo} above P {hi} on {inst!r}")
    fracs = st.sampled_from([0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 0.95]).map(
        lambda f: lo + int(f * (hi - lo)))
    return st.one_of(fracs, st.integers(lo, hi), st.just(lo), st.just(hi))


__all__ = ["CONSTRUCTS", "budgets", "constructs", "instances", "stage_sample", "stages"]


def sample(n: int, *, max_saved: int = 5, max_ops: int = 14) -> list[tuple[Instance, int]]:
    """A fixed, deterministic sample of `n` (instance, budget) pairs drawn from
    :func:`instances` and :func:`budgets` (derandomized, no example database: the same
    list on every run), for tests that check every plan of each instance outside
    ``@given`` (the plan-by-plan soundness tests). Instances whose floor equals P (one
    budget, nothing to plan) are included: they still exercise the rows."""
    from hypothesis import HealthCheck, Phase, given, settings

    out: list[tuple[Instance, int]] = []

    @settings(max_examples=n, phases=[Phase.generate], deadline=None, derandomize=True,
              database=None, suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def draw(data: st.DataObject) -> None:
        inst = data.draw(instances(max_saved=max_saved, max_ops=max_ops))
        out.append((inst, data.draw(budgets(inst))))

    draw()
    return out


def stage_sample(n: int, *, max_saved: int = 5, base_saved: int = 2, base_ops: int = 6,
                 salt: int = 0) -> list[Instance]:
    """A fixed, deterministic sample of `n` small pipeline stages: bases drawn from
    :func:`instances` (`base_saved` saved tensors, `base_ops` ops; :func:`sample`'s
    draws), each made a stage by :func:`stage_of` with parameters picked by
    ``numpy.random.default_rng([salt, i])``, lowered (the storage-level instance the
    evaluator and the solvers plan), and kept when it has 1 to `max_saved` saved storages
    (every plan can be simulated) and is not a single pass (``Instance.single_pass``
    False: forward and backward units interleave or idle lies between units; single
    passes are :func:`sample`'s). The plan-by-plan soundness tests and the brute-force
    checks of the exact tier run on them; `salt` picks another sample."""
    out: list[Instance] = []
    bases = [b for b, _M in sample(8 * n, max_saved=base_saved, max_ops=base_ops)]
    for i, base in enumerate(bases):
        if len(out) == n:
            break
        rng = np.random.default_rng([salt, i])
        s = stage_of(base, lambda options, rng=rng: options[int(rng.integers(len(options)))])
        s = s.lowered
        if 0 < s.n_saved <= max_saved and not s.single_pass:
            out.append(s)
    return out


def last_stages(n: int, *, max_saved: int = 3, max_ops: int = 8,
                max_plans: int = 729) -> list[Instance]:
    """A fixed sample of up to `n` small last stages under 1F1B (stage p - 1 of p = 1, 2
    or 3, m = 2 or 3, hops of 0, 0.1 or 3 ms), lowered: each microbatch's F and B units
    run back to back, the case the microbatch bound of the exact tier covers
    (solvers/milp/bounds/groups.py). Bases are :func:`sample`'s draws (`max_saved`,
    `max_ops`); stages with more than `max_plans` decision vectors or none are left
    out."""
    from slackopt.stage import build_stage

    out: list[Instance] = []
    for i, (base, _M) in enumerate(sample(2 * n, max_saved=max_saved, max_ops=max_ops)):
        p, m = ((1, 2), (2, 3), (3, 3))[i % 3]
        s = build_stage(base, "1f1b", p - 1, p, m, hop_s=(0.0, 1e-4, 3e-3)[i % 3]).lowered
        plans = math.prod(3 if np.isfinite(c) else 2 for c in s.c.tolist())
        if 0 < s.n_saved and plans <= max_plans and not s.single_pass and len(out) < n:
            out.append(s)
    return out
