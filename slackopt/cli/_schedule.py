"""The pipeline-stage options of ``make``, ``profile`` and ``stage``: ``--schedule``,
``--stages``, ``--stage``, ``--microbatches``, ``--chunks``, ``--hop-s`` and
``--interconnect``, the rules that read them (those of :mod:`slackopt.pipeline`, its
ValueError as a one-line error naming the option), and the stage they build
(:func:`slackopt.stage.build_stage`; docs/model.md, "A pipeline stage")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from slackopt.pipeline import DEFAULT_INTERCONNECT, INTERCONNECTS, SCHEDULES

if TYPE_CHECKING:  # pragma: no cover
    from slackopt.instance import Instance

OPTION_OF = {"schedule": "--schedule", "stage": "--stage", "stages": "--stages",
             "microbatches": "--microbatches", "chunks": "--chunks", "hop_s": "--hop-s",
             "interconnect": "--interconnect"}
"""The option that sets each argument of :func:`slackopt.stage.build_stage` (the names
slackopt.pipeline's errors begin with)."""

ScheduleOpt = Annotated[str | None, typer.Option(
    "--schedule", help=f"Build pipeline stage --stage of --stages under this schedule: "
    f"{', '.join(SCHEDULES)} (or torch's names: 1F1B, Interleaved1F1B, "
    "InterleavedZeroBubble, GPipe). The profiled step is one microbatch's pass.")]
StagesOpt = Annotated[int | None, typer.Option(
    "--stages", help="Pipeline stages p (with --schedule).")]
StageOpt = Annotated[int | None, typer.Option(
    "--stage", help="The stage i, 0-based: 0 reads the model's input (with --schedule).")]
MicrobatchesOpt = Annotated[int | None, typer.Option(
    "--microbatches", help="Microbatches m of one step (with --schedule).")]
ChunksOpt = Annotated[int | None, typer.Option(
    "--chunks", help="Model chunks v a stage, for interleaved-1f1b and interleaved-zb; the "
    "profiled step is then one chunk's pass (default 1).")]
HopOpt = Annotated[float | None, typer.Option(
    "--hop-s", help="Seconds one activation or gradient takes between stages (default: the "
    "largest saved block input or output over --interconnect; a profile has none, and its "
    "largest saved tensor stands in: give --hop-s for a profiled stage).")]
InterconnectOpt = Annotated[str | None, typer.Option(
    "--interconnect", help=f"Link between stages for the default hop: "
    f"{', '.join(INTERCONNECTS)} (default {DEFAULT_INTERCONNECT}).")]


@dataclass(frozen=True)
class StageRequest:
    """A checked pipeline-stage request: the arguments of
    :func:`slackopt.stage.build_stage` (times in s; `hop_s` None: from the boundary
    activation over `interconnect`)."""

    schedule: str
    stage: int
    stages: int
    microbatches: int
    chunks: int
    hop_s: float | None
    interconnect: str

    def build(self, base: Instance, name: str | None = None) -> Instance:
        """The stage of `base` (one microbatch's single pass), named `name` (None: the
        name build_stage gives, ``BASE@SCHEDULE-pPsImM``).

        Raises:
            InstanceError: `base` is not a single pass, or a split backward with an
                empty half (as build_stage raises them).
        """
        from slackopt.instance import Instance
        from slackopt.stage import build_stage

        st = build_stage(base, self.schedule, self.stage, self.stages, self.microbatches,
                         self.chunks, hop_s=self.hop_s, interconnect=self.interconnect)
        if name is None or name == st.name:
            return st
        return Instance(name, st.ops, st.tensors, st.link, st.meta,
                        rng_capture=st.rng_capture, host_memory_bytes=st.host_memory_bytes,
                        units=st.scheduled_units)


def _bad(arg: str, message: str) -> typer.BadParameter:
    return typer.BadParameter(message, param_hint=f"'{OPTION_OF[arg]}'")


def stage_request(schedule: str | None, stage: int | None, stages: int | None,
                  microbatches: int | None, chunks: int | None, hop_s: float | None,
                  interconnect: str | None) -> StageRequest | None:
    """The stage the options ask for, checked before any work; None without
    ``--schedule``.

    Rules: the other options need ``--schedule``; with it ``--stages``, ``--stage`` and
    ``--microbatches`` are required; ``--hop-s`` and ``--interconnect`` exclude each
    other; every value follows :func:`slackopt.pipeline.stage_timing` (stage < stages,
    one chunk unless interleaved, 1f1b needs microbatches >= stages, the interleaved and
    zero-bubble schedules' multiple of rounds, a finite hop >= 0) and
    :func:`slackopt.pipeline.hop_time_s` (a known interconnect).

    Raises:
        typer.BadParameter: naming the option and the rule (exit 2, one line).
    """
    from slackopt.pipeline import hop_time_s, schedule_name, stage_timing

    given = {"stage": stage, "stages": stages, "microbatches": microbatches,
             "chunks": chunks, "hop_s": hop_s, "interconnect": interconnect}
    if schedule is None:
        for arg, value in given.items():
            if value is not None:
                raise _bad(arg, f"needs --schedule ({', '.join(SCHEDULES)}): it sets a "
                           "pipeline stage's schedule")
        return None
    for arg in ("stages", "stage", "microbatches"):
        if given[arg] is None:
            raise _bad(arg, f"required with --schedule (give {OPTION_OF[arg]} N)")
    if hop_s is not None and interconnect is not None:
        raise _bad("hop_s", "give --hop-s or --interconnect, not both (--interconnect "
                   "sets the default hop)")
    try:
        name = schedule_name(schedule)
        split = SCHEDULES[name].split_backward
        kinds = ("F", "B", "W") if split else ("F", "B")
        stage_timing(name, stage, stages, microbatches, 1 if chunks is None else chunks,
                     durations=dict.fromkeys(kinds, 0.0), hop_s=0.0 if hop_s is None else hop_s)
        if interconnect is not None:
            hop_time_s(0, interconnect)
    except ValueError as e:
        arg, _, rule = str(e).partition(": ")
        if arg not in OPTION_OF:  # pragma: no cover - every rule of pipeline names one
            raise
        raise _bad(arg, rule) from None
    return StageRequest(name, int(stage), int(stages), int(microbatches),  # type: ignore[arg-type]
                        1 if chunks is None else chunks, hop_s,
                        interconnect or DEFAULT_INTERCONNECT)


def schedule_doc(inst: Instance) -> dict[str, Any] | None:
    """What ``describe`` (and ``make``, ``profile``, ``stage``) report of a stage's
    schedule: the parameters build_stage recorded (``meta["schedule"]``: name, stage,
    stages, microbatches, chunks, hop_s, unit_s, makespan_s), the number of units, the
    in-flight peak (:func:`slackopt.stage.in_flight`: microbatches whose activations the
    stage holds at once), and the idle time of the ideal step (``idle_s``: T* minus the
    ops' durations, the pipeline bubbles, s). None for a single-pass instance."""
    from slackopt.stage import in_flight, schedule_of

    if inst.scheduled_units is None:
        return None
    sch = schedule_of(inst) or {}
    units = inst.scheduled_units
    return {**sch, "units": len(units), "in_flight_peak": int(in_flight(inst).max()),
            "idle_s": _idle_s(inst)}


def _idle_s(inst: Instance) -> float:
    """T* minus the ops' busy time, s; 0 where the difference is only the rounding of the
    sum (a schedule without bubbles, such as GPipe's last stage)."""
    idle = inst.ideal_time_s - float(inst.durations_s.sum())
    return idle if idle > 1e-9 * inst.ideal_time_s else 0.0


def schedule_rows(sch: dict[str, Any]) -> dict[str, Any]:
    """:func:`schedule_doc` for a table: the unit durations as one line of times."""
    from slackopt.cli._output import fmt_time

    units = sch.get("unit_s")
    if not isinstance(units, dict):
        return sch
    return {**sch, "unit_s": ", ".join(f"{k} {fmt_time(v)}" for k, v in units.items())}


SCHEDULE_LABELS = {
    "name": "schedule", "stage": "stage i (0-based)", "stages": "stages p",
    "microbatches": "microbatches m", "chunks": "chunks v", "hop_s": "hop between stages",
    "unit_s": "unit durations", "makespan_s": "pipeline makespan", "units": "units",
    "in_flight_peak": "microbatches in flight, at most", "idle_s": "idle in T* (bubbles)",
}
"""Row labels of :func:`schedule_doc`'s keys."""
