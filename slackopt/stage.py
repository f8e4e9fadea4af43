"""A pipeline stage as an instance: one profiled microbatch run under a schedule.

:func:`build_stage` takes the instance of one microbatch's forward and backward pass
through a stage (a profile or a generated workload: a single pass) and a schedule of
:mod:`slackopt.pipeline` (GPipe, 1F1B, interleaved 1F1B, ZB-H1, interleaved zero bubble)
for stage i of p with m microbatches, and builds the instance the evaluator and every
solver plan: the units of the stage's order one after the other, each unit the ops of
one microbatch's pass, every tensor once per microbatch (and chunk) with its own
decision, and each unit's earliest start from a simulation of the whole pipeline
(:func:`slackopt.pipeline.stage_timing`). Semantics: docs/model.md, "A pipeline stage".

Conventions (each an assumption, stated where it is made):

- **Names.** Op and tensor ``x`` of microbatch j is ``x@j``; of chunk c > 0 as well,
  ``x@jcc`` (``f0046.mm#0@3``, ``qkv@2c1``). A plan names the tensors of every
  microbatch.
- **Chunks.** In an interleaved schedule the stage holds v model chunks; the profiled
  microbatch is *one chunk's* pass, and the stage runs v copies of it (chunk c's ops and
  tensors are those of the profile). Profile one chunk (L / (p v) layers) for these
  schedules.
- **Split backward.** Zero-bubble schedules split each backward into B (input gradient)
  and W (weight gradient). W runs the backward ops none of whose outputs any op reads
  (:func:`weight_grad_ops`: weight and bias gradients leave the step, so nothing waits
  for them); B runs the others, in their order. Tensors that both read (an output
  gradient the weight gradient needs) live until the W unit ends, as they do in the
  zero-bubble runtime.
- **Times.** Every stage of the pipeline runs the units in the profiled durations (F, B,
  W: the sums of the unit's op durations) and a hop between stages costs ``hop_s``
  (:func:`slackopt.pipeline.hop_time_s`). Earliest starts are taken from the stage's own
  first unit (its step starts at 0), and they ignore the stalls of this stage: a late
  backward here delays no other stage's unit.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

import numpy as np

from slackopt.errors import InstanceError
from slackopt.instance import Instance, Op, Recipe, Tensor, UnitSpan
from slackopt.pipeline import (
    DEFAULT_INTERCONNECT,
    SCHEDULES,
    hop_time_s,
    schedule_name,
    stage_timing,
    stage_units,
)


def weight_grad_ops(base: Instance, input_grad: bool = True) -> frozenset[str]:
    """The backward ops of `base` that a split backward defers to its W unit: those none
    of whose output tensors any op reads (weight and bias gradients, accumulations whose
    result leaves the step), except, with `input_grad`, the last of them that produces a
    tensor: the gradient of the stage's input, which the previous stage waits for.

    Args:
        base: a single-pass instance (one microbatch).
        input_grad: the stage sends the gradient of its input back (every stage but the
            pipeline's first).

    Returns:
        Their names.

    Source: Qi et al. 2024, "Zero Bubble Pipeline Parallelism", section 2: B computes
    the gradient of the input, W of the weights, and only B is on the pipeline's
    critical path.
    """
    read: set[str] = set()
    produces: set[str] = set()
    for t in base.tensors:
        produces.add(t.producer)
        if t.readers:
            read.add(t.producer)
    sinks = [op.name for op in base.scheduled_ops if op.phase == "bwd" and op.name not in read]
    if input_grad:
        sent = [n for n in sinks if n in produces]
        if sent:
            sinks.remove(sent[-1])
    return frozenset(sinks)


def _suffix(j: int, c: int) -> str:
    return f"@{j}" if c == 0 else f"@{j}c{c}"


def _renamed_ops(ops: Iterable[Op], sfx: str) -> list[Op]:
    return [Op(op.name + sfx, op.phase, op.duration_s, op.layer, op.kind, op.workspace_bytes,
               op.flops, op.never_recompute, op.random) for op in ops]


def _renamed_tensor(t: Tensor, sfx: str) -> Tensor:
    rec = t.recipe
    if rec is not None:
        rec = Recipe(tuple(o + sfx for o in rec.ops), tuple(x + sfx for x in rec.inputs),
                     rec.transient_bytes)
    return Tensor(t.name + sfx, t.size_bytes, t.producer + sfx,
                  tuple(r + sfx for r in t.readers), rec, t.category,
                  None if t.storage is None else t.storage + sfx,
                  tuple(u + sfx for u in t.mutated_by))


def boundary_bytes(base: Instance) -> int:
    """Bytes of the activation a stage passes to the next (per microbatch): the largest
    saved tensor of category ``block_input`` or ``block_output`` in `base` (the
    generators' categories); else the size that recurs most among its saved tensors, the
    larger on a tie (a profiled transformer's hidden state, [tokens, hidden], which every
    layer's norms and residuals save); 0 without a saved tensor."""
    sizes = [int(base.s[k]) for k, cat in enumerate(base.saved_categories)
             if cat in ("block_input", "block_output")]
    if sizes:
        return max(sizes)
    counts: dict[int, int] = {}
    for x in base.s.tolist():
        counts[int(x)] = counts.get(int(x), 0) + 1
    return max(counts, key=lambda x: (counts[x], x), default=0)


def build_stage(base: Instance, schedule: str, stage: int, stages: int, microbatches: int,
                chunks: int = 1, *, hop_s: float | None = None,
                interconnect: str = DEFAULT_INTERCONNECT,
                weight_grad: Collection[str] | None = None) -> Instance:
    """The instance of pipeline stage `stage` of `stages` running `schedule`.

    Args:
        base: one microbatch's step through the stage (for interleaved schedules through
            one chunk): a single-pass instance (``base.single_pass``).
        schedule: a schedule of :data:`slackopt.pipeline.SCHEDULES` (or torch's name).
        stage, stages, microbatches, chunks: i (0-based), p, m and v, as
            :func:`slackopt.pipeline.stage_units` takes them.
        hop_s: time of one activation or gradient between stages (s); None: the
            boundary activation (:func:`boundary_bytes`) over `interconnect`
            (:func:`slackopt.pipeline.hop_time_s`).
        interconnect: a key of :data:`slackopt.pipeline.INTERCONNECTS`, used when
            `hop_s` is None.
        weight_grad: names of the backward ops a split backward runs in its W units;
            None: :func:`weight_grad_ops` (stage 0 sends no input gradient back).
            Ignored without a split.

    Returns:
        The stage's Instance: ``units`` the schedule's units with their earliest starts
        (s, from the stage's first unit; a unit without ops, the backward of a profile
        that has none, is left out), ``meta["schedule"]`` the schedule's
        parameters, unit durations and the pipeline's makespan, ``meta["base"]`` the
        profiled instance's name and meta.

    Raises:
        InstanceError: `base` is not a single pass (field ``units``), a W op that is not
            a backward op of `base` (field ``weight_grad``), or an empty B or W half.
        ValueError: a schedule parameter out of range (as slackopt.pipeline raises it).

    Source: docs/model.md, "A pipeline stage"; torch.distributed.pipelining's schedules.
    """
    if not base.single_pass:
        raise InstanceError(f"instance '{base.name}' is already a pipeline stage; build "
                            "a stage from one microbatch's single pass", "units",
                            "pass the profiled single-microbatch instance")
    name = schedule_name(schedule)
    spec = SCHEDULES[name]
    fwd = [op for op in base.scheduled_ops if op.phase == "fwd"]
    bwd = [op for op in base.scheduled_ops if op.phase == "bwd"]
    rebuild = list(base.ops[base.n_ops:])
    passes: dict[str, list[Op]] = {"F": fwd, "B": bwd}
    if spec.split_backward:
        w = (weight_grad_ops(base, input_grad=stage > 0) if weight_grad is None
             else frozenset(weight_grad))
        unknown = sorted(w - {op.name for op in bwd})
        if unknown:
            raise InstanceError(f"weight_grad names '{unknown[0]}', which is not a backward "
                                f"op of '{base.name}'", "weight_grad",
                                "name backward ops of the profiled instance")
        passes = {"F": fwd, "B": [op for op in bwd if op.name not in w],
                  "W": [op for op in bwd if op.name in w]}
        for kind in ("B", "W"):
            if not passes[kind]:
                raise InstanceError(f"the split backward of '{base.name}' has no {kind} ops",
                                    "weight_grad", "name the weight-gradient ops (W), "
                                    "leaving at least one op in each half")
    durations = {k: float(sum(op.duration_s for op in ops)) for k, ops in passes.items()}
    if hop_s is None:
        hop_s = hop_time_s(boundary_bytes(base), interconnect)
    timing = stage_timing(name, stage, stages, microbatches, chunks, durations=durations,
                          hop_s=hop_s)
    t0 = float(timing.start_s[0])
    ops: list[Op] = []
    units: list[UnitSpan] = []
    for u, start in zip(timing.units, timing.start_s.tolist(), strict=True):
        if not passes[u.kind]:  # a profile without backward ops: no B units
            continue
        sfx = _suffix(u.microbatch, u.chunk)
        ops += _renamed_ops(passes[u.kind], sfx)
        units.append(UnitSpan(u.kind, len(passes[u.kind]), u.microbatch, u.chunk,
                              max(0.0, start - t0)))
    copies = [(u.microbatch, u.chunk) for u in timing.units if u.kind == "F"]
    tensors: list[Tensor] = []
    for j, c in copies:
        sfx = _suffix(j, c)
        ops_rebuild = _renamed_ops(rebuild, sfx)
        ops += ops_rebuild
        tensors += [_renamed_tensor(t, sfx) for t in base.tensors]
    meta: dict[str, Any] = {
        "generator": "stage",
        "schedule": {"name": name, "stage": int(stage), "stages": int(stages),
                     "microbatches": int(microbatches), "chunks": int(chunks),
                     "hop_s": float(hop_s), "unit_s": durations,
                     "makespan_s": float(timing.makespan_s) - t0},
        "base": {"name": base.name, "meta": dict(base.meta)},
    }
    label = f"{name}-p{stages}s{stage}m{microbatches}" + (f"v{chunks}" if chunks > 1 else "")
    return Instance(f"{base.name}@{label}", ops, tensors, base.link, meta,
                    rng_capture=base.rng_capture, host_memory_bytes=base.host_memory_bytes,
                    units=units)


def schedule_of(inst: Instance) -> dict[str, Any] | None:
    """The schedule parameters recorded by :func:`build_stage` (``meta["schedule"]``), or
    None for an instance that was not built as a stage.

    Raises:
        InstanceError: the record names no schedule of :func:`slackopt.pipeline.stage_units`
            (an unknown name, a stage out of range, counts below 1), or one whose unit
            order is not the instance's (field ``meta.schedule``): the record describes the
            stage, so a record that does not is refused rather than shown.
    """
    sch = inst.meta.get("schedule")
    if not isinstance(sch, dict):
        return None
    fix = "rebuild the stage with `slackopt stage` (or `make`/`profile --schedule`)"
    try:
        order = stage_units(str(sch.get("name")), sch.get("stage"), sch.get("stages"),
                            sch.get("microbatches"), sch.get("chunks", 1))
    except (ValueError, KeyError) as e:
        raise InstanceError(str(e), "meta.schedule", fix) from None
    if [(u.kind, u.microbatch, u.chunk) for u in order] != [
            (u.kind, u.microbatch, u.chunk) for u in inst.units]:
        raise InstanceError(
            f"{sch.get('name')!r} stage {sch.get('stage')} of "
            f"{sch.get('stages')} with {sch.get('microbatches')} microbatches runs other "
            "units than the instance's", "meta.schedule", fix)
    return dict(sch)


def in_flight(inst: Instance) -> np.ndarray:
    """Microbatches whose forward unit has begun and whose last backward unit (B, or W
    where the backward is split) has not ended, after each unit of `inst` (int64, one
    per unit): the activations a stage holds (1F1B: at most p - i)."""
    units = inst.units
    last_bwd: dict[tuple[int, int], int] = {}
    for k, u in enumerate(units):
        if u.kind != "F":
            last_bwd[(u.microbatch, u.chunk)] = k
    out = np.zeros(len(units), dtype=np.int64)
    live = 0
    for k, u in enumerate(units):
        if u.kind == "F":
            live += 1
        elif last_bwd[(u.microbatch, u.chunk)] == k:
            live -= 1
        out[k] = live
    return out
