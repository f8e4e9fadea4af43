"""Pipeline-parallel schedules of one stage: the order of its units and their start times.

A pipeline-parallel stage does not run one forward and one backward pass: it runs a
*schedule* of units over m microbatches (spec/semantics.md, "A pipeline stage"). This module
builds those schedules from nothing but their parameters; it knows no instance and no
evaluator.

Units
    A :class:`Unit` is one pass of one microbatch through one model chunk of the stage:
    ``F`` its forward, ``B`` its backward and, in zero-bubble schedules whose backward is
    split (Qi et al. 2024, section 2), ``B`` the input-gradient half and ``W`` the
    weight-gradient half. Without a split, ``B`` is the whole backward. Interleaved
    schedules give a stage v model chunks (Narayanan et al. 2021, section 2.2.2); chunk c of
    stage i is the pipeline's global stage ``c * p + i`` (torch's "loop" placement,
    ``generate_stage_to_rank_mapping``). Microbatches and chunks count from 0: the
    semantics' one-microbatch step [(1, F), (1, B)] is ``(Unit(0, "F"), Unit(0, "B"))``,
    what every schedule gives for p = m = 1.

Schedules (:data:`SCHEDULES`, :func:`stage_units`); stage i of p, m microbatches, v chunks
    - ``gpipe`` (``ScheduleGPipe``; Huang et al. 2019, GPipe): every F, then every B.
    - ``1f1b`` (``Schedule1F1B``; Narayanan et al. 2021, section 2.2.1, PipeDream-Flush):
      min(m, p - i) forwards, then one backward and one forward alternating, then the
      remaining backwards. Stage i holds at most p - i microbatches' activations.
    - ``interleaved-1f1b`` (``ScheduleInterleaved1F1B``; Narayanan et al. 2021, section
      2.2.2): 1F1B over v chunks, depth first, in rounds of m / max(1, m // p) microbatches.
    - ``zb-h1`` (``ScheduleInterleavedZeroBubble`` with one chunk a stage; Qi et al. 2024,
      section 2.1, ZB-H1): 1F1B's warm-up with the backward split; stage i defers its first
      i W units, which then fill the cool-down. Stage i holds p - i microbatches until
      their B, as under 1F1B, and every stage p until their W (the paper: the same number
      in flight on every stage).
    - ``interleaved-zb`` (``ScheduleInterleavedZeroBubble``, torch's interleaved form of
      the paper's ZB-1p, v chunks a stage): the interleaved order with the backward split
      and W units deferred as in ZB-H1.

    Each order is the one torch.distributed.pipelining (PyTorch 2.13, ``schedules.py``)
    runs: for GPipe and 1F1B the order of ``_step_microbatches``, for the interleaved
    schedules ``_calculate_single_rank_operations`` and ``_get_1f1b_rank_ops``;
    tests/test_pipeline_schedules.py checks every one against torch. Torch's own names
    (``"1F1B"``, ``"Interleaved1F1B"``, ``"InterleavedZeroBubble"``, ``"GPipe"``, with or
    without the ``Schedule`` prefix, any case) are accepted too.

Timing (:func:`pipeline_timing`, :func:`stage_timing`)
    Start times come from a pipeline of p stages that all run their orders with the same
    unit durations (those of the one profiled microbatch), one unit at a time, each unit as
    early as its dependencies and its stage allow, plus a per-hop communication time
    between stages (:func:`hop_time_s`: boundary activation bytes over an interconnect of
    :data:`INTERCONNECTS`; InfiniBand NDR by default, the usual link between the nodes that
    hold consecutive pipeline stages). A stage idles until a unit's earliest start (a
    pipeline bubble); the makespan is the end of the pipeline's last unit. Where the
    backward is split, B and W take their own durations; Qi et al. 2024 (section 2) take
    T_F = T_B = T_W for their handcrafted schedules.

Sources
    - PyTorch, torch.distributed.pipelining: https://pytorch.org/docs/stable/distributed.pipelining.html
      and ``torch/distributed/pipelining/schedules.py`` (2.13).
    - Y. Huang et al., "GPipe: Efficient Training of Giant Neural Networks using Pipeline
      Parallelism", NeurIPS 2019.
    - D. Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters
      Using Megatron-LM", SC 2021, sections 2.2.1 (1F1B) and 2.2.2 (interleaved).
    - P. Qi, X. Wan, G. Huang, M. Lin, "Zero Bubble (Almost) Pipeline Parallelism", ICLR
      2024, arXiv:2401.10241 (first titled "Zero Bubble Pipeline Parallelism"), section 2.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from slackopt.hardware import COPY_LATENCY_S
from slackopt.simulate.rules import copy_time

KINDS = ("F", "B", "W")
"""Unit kinds: forward, backward (input-gradient half where split), weight-gradient half."""

_UNIT_RE = re.compile(r"([FBW])([0-9]+)(?:c([0-9]+))?")


@dataclass(frozen=True, slots=True)
class Unit:
    """One unit of a stage's schedule: one microbatch's pass through one model chunk.

    Attributes:
        microbatch: the microbatch j, 0-based.
        kind: ``"F"`` forward; ``"B"`` backward (with a split backward its input-gradient
            half); ``"W"`` the weight-gradient half of a split backward.
        chunk: the model chunk of this stage, 0-based; 0 when the stage has one chunk.

    ``str(unit)`` is the short form ``"F3"`` (chunk 0) or ``"B3c1"`` (chunk 1);
    :meth:`from_str` reads it back.

    Raises:
        ValueError: a kind not in :data:`KINDS`, or a negative microbatch or chunk.
    """

    microbatch: int
    kind: str
    chunk: int = 0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Unit.kind: {self.kind!r} is not one of {', '.join(KINDS)}")
        for field in ("microbatch", "chunk"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"Unit.{field}: {value!r} must be an integer >= 0")

    def __str__(self) -> str:
        return f"{self.kind}{self.microbatch}" + (f"c{self.chunk}" if self.chunk else "")

    @classmethod
    def from_str(cls, text: str) -> Unit:
        """The unit written as ``"F3"`` or ``"B3c1"`` (the form ``str`` gives).

        Raises:
            ValueError: not of the form KIND MICROBATCH [c CHUNK].
        """
        match = _UNIT_RE.fullmatch(text) if isinstance(text, str) else None
        if match is None:
            raise ValueError(f"unit {text!r}: write KIND MICROBATCH [c CHUNK], e.g. F3 or "
                             "B3c1, KIND one of F, B, W")
        kind, mb, chunk = match.groups()
        return cls(int(mb), kind, int(chunk or 0))


@dataclass(frozen=True, slots=True)
class ScheduleSpec:
    """What a schedule of :data:`SCHEDULES` is.

    Attributes:
        name: the name :func:`stage_units` takes (``"1f1b"``).
        torch_class: the class of torch.distributed.pipelining.schedules whose order it is.
        split_backward: whether the backward is split into B and W units.
        interleaved: whether a stage may hold several model chunks (``chunks`` > 1).
        source: the paper and section that define it.
    """

    name: str
    torch_class: str
    split_backward: bool
    interleaved: bool
    source: str


SCHEDULES: dict[str, ScheduleSpec] = {s.name: s for s in (
    ScheduleSpec("gpipe", "ScheduleGPipe", False, False, "Huang et al. 2019"),
    ScheduleSpec("1f1b", "Schedule1F1B", False, False, "Narayanan et al. 2021, 2.2.1"),
    ScheduleSpec("interleaved-1f1b", "ScheduleInterleaved1F1B", False, True,
                 "Narayanan et al. 2021, 2.2.2"),
    ScheduleSpec("zb-h1", "ScheduleInterleavedZeroBubble", True, False,
                 "Qi et al. 2024, 2.1 (ZB-H1)"),
    ScheduleSpec("interleaved-zb", "ScheduleInterleavedZeroBubble", True, True,
                 "Qi et al. 2024 (ZB-1p), interleaved as torch does it"),
)}
"""The schedules by name. ``zb-h1`` is torch's ScheduleInterleavedZeroBubble with one chunk
a stage; ``interleaved-zb`` the same class with ``chunks`` chunks (with one chunk it is
``zb-h1``)."""

_ALIASES: dict[str, str] = {
    "gpipe": "gpipe", "1f1b": "1f1b", "interleaved1f1b": "interleaved-1f1b",
    "interleavedzerobubble": "interleaved-zb", "zbh1": "zb-h1",
}


def schedule_name(schedule: str) -> str:
    """The canonical name of a schedule: a key of :data:`SCHEDULES`.

    Accepts the keys themselves and torch's names (``get_schedule_class``'s ``"1F1B"``,
    ``"Interleaved1F1B"``, ``"InterleavedZeroBubble"``, ``"GPipe"``; the class names with
    ``Schedule``), in any case.

    Raises:
        ValueError: an unknown name (the message lists the known ones).
    """
    if isinstance(schedule, str):
        if schedule in SCHEDULES:
            return schedule
        key = schedule.lower().replace("-", "").replace("_", "")
        key = key.removeprefix("schedule")
        if key in _ALIASES:
            return _ALIASES[key]
    raise ValueError(f"schedule: {schedule!r} is not one of {', '.join(SCHEDULES)} "
                     "(or torch's GPipe, 1F1B, Interleaved1F1B, InterleavedZeroBubble)")


MAX_PASSES = 1024
"""The most (microbatch, chunk) passes a stage may hold: microbatches x chunks. A stage
instance holds every op and saved tensor of every pass, so its size grows with the
product (a 100,000-microbatch stage of an 8-op chain is a 638 MB file)."""


def _int_at_least(name: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise ValueError(f"{name}: {value!r} must be an integer >= {low}")
    return int(value)


def _seconds(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (
            math.isfinite(value) and value >= 0):
        raise ValueError(f"{name}: {value!r} must be a finite number of seconds >= 0")
    return float(value)


def _check(schedule: str, stage: int, stages: int, microbatches: int,
           chunks: int) -> ScheduleSpec:
    """The schedule's spec once every argument is valid; ValueError naming the one that
    is not and the rule (torch's constraints included)."""
    spec = SCHEDULES[schedule_name(schedule)]
    p = _int_at_least("stages", stages, 1)
    m = _int_at_least("microbatches", microbatches, 1)
    v = _int_at_least("chunks", chunks, 1)
    i = _int_at_least("stage", stage, 0)
    if i >= p:
        raise ValueError(f"stage: {i} must be below stages = {p} (stages count from 0)")
    if m * v > MAX_PASSES:
        raise ValueError(f"microbatches: {m} x {v} chunk(s) is over {MAX_PASSES} passes a "
                         "stage (the stage holds every op of every pass); plan fewer, larger "
                         "microbatches")
    if v > 1 and not spec.interleaved:
        raise ValueError(f"chunks: {spec.name} runs one model chunk a stage, got {v}; "
                         "use interleaved-1f1b or interleaved-zb for several")
    if spec.name == "1f1b" and m < p:
        raise ValueError(f"microbatches: 1f1b needs microbatches >= stages (torch's "
                         f"Schedule1F1B), got {m} < {p}")
    if spec.torch_class in ("ScheduleInterleaved1F1B", "ScheduleInterleavedZeroBubble"):
        rounds = max(1, m // p)
        if m % rounds:
            raise ValueError(
                f"microbatches: {spec.name} needs microbatches to be a multiple of its "
                f"rounds max(1, microbatches // stages) = {rounds} (torch's "
                f"{spec.torch_class}), got {m}; any multiple of stages is one")
    return spec


def stage_units(schedule: str, stage: int, stages: int, microbatches: int,
                chunks: int = 1) -> tuple[Unit, ...]:
    """The order in which stage ``stage`` of ``stages`` runs its units.

    Args:
        schedule: a name of :data:`SCHEDULES` (or torch's, see :func:`schedule_name`).
        stage: the stage i, 0-based (0 is the first: it reads the model's input).
        stages: the number of pipeline stages p (ranks), >= 1.
        microbatches: the number of microbatches m, >= 1.
        chunks: model chunks v of each stage, >= 1; above 1 only for interleaved schedules.

    Returns:
        The units, one F and one B (and one W where the backward is split) for each
        (microbatch, chunk), in the order torch.distributed.pipelining runs them on rank i.

    Raises:
        ValueError: an argument out of range, naming it and the rule: stage < stages;
            microbatches x chunks <= :data:`MAX_PASSES`; chunks 1 unless interleaved;
            1f1b needs microbatches >= stages; the
            interleaved and zero-bubble schedules need microbatches to be a multiple of
            max(1, microbatches // stages) (torch raises for the same arguments).
    """
    spec = _check(schedule, stage, stages, microbatches, chunks)
    if spec.name == "gpipe":
        return _gpipe(microbatches)
    if spec.name == "1f1b":
        return _one_f_one_b(stage, stages, microbatches)
    return _interleaved(stage, stages, microbatches, chunks, spec.split_backward)


def _gpipe(m: int) -> tuple[Unit, ...]:
    """ScheduleGPipe._step_microbatches: F0 .. F(m-1), then B0 .. B(m-1)."""
    return tuple(Unit(j, "F") for j in range(m)) + tuple(Unit(j, "B") for j in range(m))


def _one_f_one_b(i: int, p: int, m: int) -> tuple[Unit, ...]:
    """Schedule1F1B._step_microbatches: min(m, p - i) warm-up forwards, then B and F
    alternating (B first) while forwards remain, then the remaining backwards."""
    warmup = min(m, p - i)
    units = [Unit(j, "F") for j in range(warmup)]
    for j in range(m):
        units.append(Unit(j, "B"))
        if warmup + j < m:
            units.append(Unit(warmup + j, "F"))
    return tuple(units)


def _interleaved(i: int, p: int, m: int, v: int, zero_bubble: bool) -> tuple[Unit, ...]:
    """torch's _get_1f1b_rank_ops for ScheduleInterleaved1F1B (``zero_bubble`` False) and
    ScheduleInterleavedZeroBubble (True), rank i of p, v local stages (chunks).

    Step k runs F (if k < v*m) then B (if k >= warm-up); the chunk of step k's F is
    (k // per_round) % v, of its B v - 1 - ((k - warm-up) // per_round) % v, with
    per_round = m / max(1, m // p). Warm-up: (v - 1) * per_round + f * (p - 1 - i) steps,
    f = 2 (1F1B) or 1 (zero bubble), at most v*m. Zero bubble: after the first i backward
    steps, each B is followed by the W of the oldest backward without one; the rest of the
    W units close the order.
    """
    per_round = m // max(1, m // p)
    warmup = min((v - 1) * per_round + (1 if zero_bubble else 2) * (p - 1 - i), v * m)
    next_mb = {kind: [0] * v for kind in KINDS}
    units: list[Unit] = []

    def emit(kind: str, chunk: int) -> None:
        units.append(Unit(next_mb[kind][chunk], kind, chunk))
        next_mb[kind][chunk] += 1

    backward_chunks: list[int] = []
    for k in range(v * m + warmup):
        if k < v * m:
            emit("F", (k // per_round) % v)
        if k >= warmup:
            backward_chunks.append(v - 1 - ((k - warmup) // per_round) % v)
            emit("B", backward_chunks[-1])
            if zero_bubble and k - warmup >= i:
                emit("W", backward_chunks[sum(next_mb["W"])])
    while zero_bubble and sum(next_mb["W"]) < len(backward_chunks):
        emit("W", backward_chunks[sum(next_mb["W"])])
    return tuple(units)


@dataclass(frozen=True, slots=True, eq=False)
class StageTiming:
    """The units of one stage and when they run, in a simulated pipeline.

    Attributes:
        stage: the stage i, 0-based.
        units: the stage's units in order (:func:`stage_units`), n of them.
        start_s: earliest start of each unit (s), shape (n,), read-only; 0 is the start of
            the pipeline's first unit (F of microbatch 0 on stage 0).
        end_s: end of each unit (s), shape (n,), read-only: start plus the unit's duration.
        makespan_s: end of the pipeline's last unit over all stages (s).
    """

    stage: int
    units: tuple[Unit, ...]
    start_s: np.ndarray
    end_s: np.ndarray
    makespan_s: float


def _unit_durations(durations: Mapping[str, float | Sequence[float]], spec: ScheduleSpec,
                    chunks: int) -> dict[str, tuple[float, ...]]:
    """Per kind, one duration (s) per chunk; ValueError naming the kind and the rule."""
    if not isinstance(durations, Mapping):
        raise ValueError(f"durations: {durations!r} must map each unit kind to seconds")
    need = KINDS if spec.split_backward else KINDS[:2]
    given = set(durations)
    if given != set(need):
        what = ("F, B (input-gradient half) and W (weight-gradient half)"
                if spec.split_backward else "F and B (the whole backward), no W")
        raise ValueError(f"durations: {spec.name} needs {what}; got "
                         f"{', '.join(sorted(map(str, given))) or 'none'}")
    out = {}
    for kind in need:
        value = durations[kind]
        per_chunk = ((value,) * chunks if isinstance(value, numbers.Real | str)
                     else tuple(value))
        if len(per_chunk) != chunks:
            raise ValueError(f"durations[{kind!r}]: {len(per_chunk)} values for {chunks} "
                             "chunks; give one number or one per chunk")
        out[kind] = tuple(_seconds(f"durations[{kind!r}]", t) for t in per_chunk)
    return out


def _dependency(i: int, unit: Unit, p: int, v: int) -> tuple[int, Unit] | None:
    """The (stage, unit) whose end ``unit`` of stage i waits for; None for the first F.

    Global stage s = chunk * p + i. F waits for the F of the same microbatch on s - 1;
    B for the B on s + 1, or on the last global stage for its own F; W for its own B.
    """
    j, s = unit.microbatch, unit.chunk * p + i
    if unit.kind == "W":
        return i, Unit(j, "B", unit.chunk)
    if unit.kind == "F":
        return None if s == 0 else ((s - 1) % p, Unit(j, "F", (s - 1) // p))
    if s == p * v - 1:
        return i, Unit(j, "F", unit.chunk)
    return (s + 1) % p, Unit(j, "B", (s + 1) // p)


def pipeline_timing(schedule: str, stages: int, microbatches: int, chunks: int = 1, *,
                    durations: Mapping[str, float | Sequence[float]],
                    hop_s: float) -> tuple[StageTiming, ...]:
    """Earliest start of every unit of every stage, from a simulation of the whole pipeline.

    Every stage runs its order (:func:`stage_units`) one unit at a time, each unit at the
    end of the stage's previous unit or of its dependency, whichever is later. The
    dependencies are those torch.distributed.pipelining's runtime waits for (``schedules.py``:
    ``_ready_to_schedule`` of ``_add_send_recv`` and ``_simulate_comms_compute``) and the
    papers draw (Narayanan et al. 2021, section 2.2; Qi et al. 2024, section 2):

    - F of (j, chunk c) on stage i, global stage s = c * p + i: the F of j on global stage
      s - 1 (stage i - 1, chunk c; for stage 0 stage p - 1, chunk c - 1) has ended, plus
      ``hop_s`` (its output activation crosses to this stage). Global stage 0 waits for
      nothing.
    - B of (j, c): the B of j on global stage s + 1 has ended, plus ``hop_s`` (the input
      gradient crosses back); on the last global stage, its own F of j (the loss is local).
      With a split backward this B is the input-gradient half: the previous stage waits
      for it alone, never for a W (Qi et al. 2024, section 2).
    - W of (j, c): its own B of (j, c) has ended, nothing else.

    A hop costs ``hop_s`` between different stages; with ``stages`` = 1 the chunks of the
    one stage pass activations in place, at no cost.

    Args:
        schedule: a name of :data:`SCHEDULES` (see :func:`schedule_name`).
        stages, microbatches, chunks: p, m and v, as for :func:`stage_units`.
        durations: seconds of one microbatch's pass through one chunk, the same on every
            stage, by kind: ``{"F": tF, "B": tB}``, with ``"W": tW`` exactly where the
            schedule splits the backward (then ``"B"`` is the input-gradient half). A value
            is one number for every chunk or a sequence of ``chunks`` numbers.
        hop_s: communication time of one activation or gradient between stages (s), >= 0;
            :func:`hop_time_s` gives it from the boundary activation bytes.

    Returns:
        One :class:`StageTiming` per stage, stage 0 first; every one has the pipeline's
        makespan.

    Raises:
        ValueError: an argument out of range (as :func:`stage_units`), durations that miss
            a kind, name one the schedule lacks, or are negative or not finite, or a
            negative or non-finite ``hop_s``.
        RuntimeError: the stages' orders wait on each other (a bug of this module; every
            schedule of :data:`SCHEDULES` runs to the end).
    """
    spec = _check(schedule, 0, stages, microbatches, chunks)
    times = _unit_durations(durations, spec, chunks)
    hop_s = _seconds("hop_s", hop_s)
    p, v = stages, chunks
    orders = [stage_units(spec.name, i, p, microbatches, v) for i in range(p)]
    starts = [np.zeros(len(order)) for order in orders]
    ends = [np.zeros(len(order)) for order in orders]
    done: dict[tuple[int, Unit], float] = {}
    position, free = [0] * p, [0.0] * p
    left = sum(len(order) for order in orders)
    while left:
        progress = False
        for i, order in enumerate(orders):
            while position[i] < len(order):
                unit = order[position[i]]
                dep = _dependency(i, unit, p, v)
                if dep is not None and dep not in done:
                    break
                ready = 0.0 if dep is None else done[dep] + (hop_s if dep[0] != i else 0.0)
                k = position[i]
                starts[i][k] = max(free[i], ready)
                ends[i][k] = free[i] = done[(i, unit)] = (
                    starts[i][k] + times[unit.kind][unit.chunk])
                position[i] += 1
                left -= 1
                progress = True
        if not progress:
            waiting = ", ".join(f"stage {i}: {orders[i][position[i]]}" for i in range(p)
                                if position[i] < len(orders[i]))
            raise RuntimeError(f"{spec.name}: the stages' orders wait on each other "
                               f"({waiting})")
    makespan = max(free)
    out = []
    for i in range(p):
        starts[i].flags.writeable = ends[i].flags.writeable = False
        out.append(StageTiming(i, orders[i], starts[i], ends[i], makespan))
    return tuple(out)


def stage_timing(schedule: str, stage: int, stages: int, microbatches: int,
                 chunks: int = 1, *, durations: Mapping[str, float | Sequence[float]],
                 hop_s: float) -> StageTiming:
    """Earliest start of each unit of stage ``stage``, and the pipeline's makespan.

    The stage's part of :func:`pipeline_timing` (the same arguments, the same rules and
    errors); ``stage`` is checked as :func:`stage_units` checks it.
    """
    _check(schedule, stage, stages, microbatches, chunks)
    return pipeline_timing(schedule, stages, microbatches, chunks, durations=durations,
                           hop_s=hop_s)[stage]


@dataclass(frozen=True, slots=True)
class Interconnect:
    """A link between the GPUs of consecutive pipeline stages.

    Attributes:
        name: the key in :data:`INTERCONNECTS`.
        bytes_per_s: bandwidth of one direction between two GPUs (B/s), the datasheet's
            line rate.
        latency_s: fixed cost of one transfer (s).
        source: where the bandwidth comes from.
    """

    name: str
    bytes_per_s: float
    latency_s: float
    source: str


INTERCONNECTS: dict[str, Interconnect] = {c.name: c for c in (
    Interconnect("nvlink4", 450e9, COPY_LATENCY_S,
                 "NVIDIA H100 datasheet: NVLink 4, 900 GB/s both directions (H100 SXM, "
                 "within an HGX/DGX H100 node through NVSwitch)"),
    Interconnect("nvlink3", 300e9, COPY_LATENCY_S,
                 "NVIDIA A100 datasheet: NVLink 3, 600 GB/s both directions (A100 SXM)"),
    Interconnect("ib-ndr", 50e9, COPY_LATENCY_S,
                 "InfiniBand NDR, 400 Gb/s a port; NVIDIA DGX H100 datasheet: one "
                 "ConnectX-7 400 Gb/s port a GPU"),
    Interconnect("ib-hdr", 25e9, COPY_LATENCY_S,
                 "InfiniBand HDR, 200 Gb/s a port; NVIDIA DGX A100 datasheet: one "
                 "ConnectX-6 200 Gb/s port a GPU"),
)}
"""Interconnects between pipeline stages. Bandwidths are datasheet line rates of one
direction (an NVLink figure of "900 GB/s" counts both directions; 400 Gb/s is 50e9 B/s);
what NCCL achieves is lower, so these hops are optimistic. Latency: the fixed 10 us
the model charges every copy (:data:`slackopt.hardware.COPY_LATENCY_S`), an assumption of
the order of NCCL's point-to-point latency, not a measurement."""

DEFAULT_INTERCONNECT = "ib-ndr"
"""Consecutive pipeline stages usually sit on different nodes (tensor parallelism takes the
NVLink domain of a node; Narayanan et al. 2021, section 3.2, takeaway 1), so a hop crosses
InfiniBand."""


def hop_time_s(activation_bytes: int, interconnect: str = DEFAULT_INTERCONNECT) -> float:
    """Time (s) to pass one microbatch's boundary activation (or its gradient) to the next
    stage: a copy over the interconnect (:func:`slackopt.simulate.rules.copy_time`:
    ``latency_s``, then ``activation_bytes`` at ``bytes_per_s``).

    For a transformer stage the boundary activation is the hidden state, batch * sequence *
    hidden * dtype bytes (e.g. 1 * 4096 * 8192 * 2 B = 64 MiB for Llama-3-70B in BF16:
    1.35 ms over ib-ndr, 0.16 ms over nvlink4).

    Args:
        activation_bytes: bytes crossing the stage boundary per microbatch, >= 0.
        interconnect: a key of :data:`INTERCONNECTS`.

    Raises:
        ValueError: negative or non-integer bytes, or an unknown interconnect (the message
            lists the known ones).
    """
    size = _int_at_least("activation_bytes", activation_bytes, 0)
    if interconnect not in INTERCONNECTS:
        raise ValueError(f"interconnect: {interconnect!r} is not one of "
                         f"{', '.join(INTERCONNECTS)}")
    link = INTERCONNECTS[interconnect]
    return copy_time(size, link.bytes_per_s, link.latency_s)
