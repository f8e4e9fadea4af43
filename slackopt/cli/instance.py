"""``slackopt make`` (a workload generator -> an instance file), ``slackopt stage`` (a
single-pass instance file -> a pipeline stage's) and ``slackopt describe`` (an instance's
sizes, times, link budget and, for a stage, its schedule)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.table import Table

from slackopt.cli._errors import guarded
from slackopt.cli._options import (
    ForceOpt,
    HostMemoryOpt,
    InstanceArg,
    JsonOpt,
    ParamOpt,
    parse_params,
)
from slackopt.cli._output import SUMMARY_LABELS, console, err, fmt_bytes, kv_table, summary_rows
from slackopt.cli._schedule import (
    SCHEDULE_LABELS,
    ChunksOpt,
    HopOpt,
    InterconnectOpt,
    MicrobatchesOpt,
    ScheduleOpt,
    StageOpt,
    StagesOpt,
    schedule_doc,
    schedule_rows,
    stage_request,
)
from slackopt.errors import SlackoptError
from slackopt.hardware import GPUS, LINKS
from slackopt.workloads._builder import MAX_LAYERS, MAX_PARAM


def _workload_names() -> list[str]:
    from slackopt.workloads import WORKLOADS

    return list(WORKLOADS)


def _make_instance(workload: str, gpu: str, link: str | None, sizes: dict[str, int | None],
                   host_memory: Any, params: dict[str, Any]) -> Any:
    """workloads.make with its errors as bad input: an unknown name, or a generator's
    message with the option that set the parameter it names."""
    from slackopt import workloads

    try:
        return workloads.make(workload, gpu=gpu, link=link, host_memory_bytes=host_memory,
                              **sizes, **params)
    except KeyError as e:
        err(str(e.args[0]) if e.args else f"unknown name in: {workload}")
        raise typer.Exit(2) from None
    except (TypeError, ValueError) as e:
        if isinstance(e, workloads.WorkloadError):
            aliases = workloads.WORKLOADS[workload].aliases
            named = [f"--{k} sets '{aliases[k]}'" for k, v in sizes.items()
                     if v is not None and aliases.get(k, k) != k]
            if named:  # the generator's message names its own parameter
                raise workloads.WorkloadError(f"{e} ({'; '.join(named)})") from None
        if isinstance(e, SlackoptError):
            raise
        err(f"workload '{workload}': {e}")
        raise typer.Exit(2) from None


@guarded
def make(
    workload: Annotated[str, typer.Argument(
        help=f"Workload name: {', '.join(_workload_names())}.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Instance file to write.")],
    gpu: Annotated[str, typer.Option(help=f"GPU preset: {', '.join(GPUS)}.")] = "a100",
    link: Annotated[str | None, typer.Option(
        help=f"Host-link preset: {', '.join(LINKS)} (default: the GPU's).")] = None,
    seq: Annotated[int | None, typer.Option(min=1, max=MAX_PARAM,
                                            help="Sequence length.")] = None,
    batch: Annotated[int | None, typer.Option(min=1, max=MAX_PARAM,
                                              help="Batch size.")] = None,
    layers: Annotated[int | None, typer.Option(min=1, max=MAX_LAYERS,
                                               help="Number of blocks.")] = None,
    host_memory: HostMemoryOpt = None,
    param: ParamOpt = None,
    schedule: ScheduleOpt = None,
    stages: StagesOpt = None,
    stage: StageOpt = None,
    microbatches: MicrobatchesOpt = None,
    chunks: ChunksOpt = None,
    hop_s: HopOpt = None,
    interconnect: InterconnectOpt = None,
    force: ForceOpt = False,
    json_output: JsonOpt = False,
) -> dict[str, Any] | None:
    """Generate a workload instance (with --schedule: a pipeline stage of it) and write it
    to an instance file."""
    from slackopt.io import save_instance
    from slackopt.io.outputs import check_output

    check_output(output, overwrite=force)  # make reads no file
    req = stage_request(schedule, stage, stages, microbatches, chunks, hop_s, interconnect)
    inst = _make_instance(workload, gpu, link, {"seq": seq, "batch": batch, "layers": layers},
                          host_memory, parse_params(param))
    if req is not None:
        inst = req.build(inst)
    return _written(inst, save_instance(inst, output, overwrite=force), json_output)


def _written(inst: Any, path: Path, json_output: bool) -> dict[str, Any] | None:
    """What make and stage answer: the file written, the summary and, for a stage, the
    schedule (:func:`schedule_doc`)."""
    sch = schedule_doc(inst)
    doc = {"path": str(path), **inst.summary(), **({"schedule": sch} if sch else {})}
    if json_output:
        return doc
    con = console()
    con.print(f"wrote {path}")
    con.print(kv_table(f"Instance {inst.name}", summary_rows(inst.summary()), SUMMARY_LABELS))
    if sch:
        con.print(kv_table("Schedule", schedule_rows(sch), SCHEDULE_LABELS))
    return None


@guarded
def stage_cmd(
    instance: InstanceArg,
    output: Annotated[Path, typer.Option("--output", "-o", help="Instance file to write.")],
    schedule: Annotated[str, typer.Option(
        "--schedule", help="The stage's schedule: gpipe, 1f1b, interleaved-1f1b, zb-h1, "
        "interleaved-zb (or torch's names).")],
    stages: StagesOpt = None,
    stage: StageOpt = None,
    microbatches: MicrobatchesOpt = None,
    chunks: ChunksOpt = None,
    hop_s: HopOpt = None,
    interconnect: InterconnectOpt = None,
    name: Annotated[str | None, typer.Option(
        help="Instance name (default: the input's, then @SCHEDULE-pPsImM).")] = None,
    force: ForceOpt = False,
    json_output: JsonOpt = False,
) -> dict[str, Any] | None:
    """Turn one microbatch's single-pass instance file into a pipeline stage's: its units
    under --schedule, the schedule recorded in the file."""
    from slackopt.io import load_instance, save_instance
    from slackopt.io.outputs import check_output

    check_output(output, overwrite=force, reads=[("the instance file", instance)],
                 fix="write the stage to another path (-o)")
    req = stage_request(schedule, stage, stages, microbatches, chunks, hop_s, interconnect)
    assert req is not None  # --schedule is required
    inst = req.build(load_instance(instance), name)
    return _written(inst, save_instance(inst, output, overwrite=force), json_output)


def _saved_by_category(low: Any) -> dict[str, dict[str, int]]:
    """{category: {"count", "bytes"}} of the saved tensors (storages), largest first."""
    cats: dict[str, dict[str, int]] = {}
    for cat, size in zip(low.saved_categories, low.s.tolist(), strict=True):
        c = cats.setdefault(cat, {"count": 0, "bytes": 0})
        c["count"] += 1
        c["bytes"] += int(size)
    return dict(sorted(cats.items(), key=lambda kv: -kv[1]["bytes"]))


@guarded
def describe(
    instance: InstanceArg,
    json_output: JsonOpt = False,
) -> dict[str, Any] | None:
    """Sizes, times and link budget of an instance (A, P, T_F, T*, I, f, ...)."""
    from slackopt import linkbudget
    from slackopt.io import load_instance

    inst = load_instance(instance)
    summary = inst.summary()
    low = inst.lowered  # views merged into their storages: bytes counted once
    report = dict(linkbudget.report(low))
    cats = _saved_by_category(low)
    rebuildable = int(np.isfinite(low.c).sum())
    sch = schedule_doc(inst)
    doc = {**summary, "path": str(instance), "rebuildable_tensors": rebuildable,
           "link_budget": report, "saved_by_category": cats,
           **({"schedule": sch} if sch else {})}
    if json_output:
        return doc
    con = console()
    rows = {**summary_rows(summary), "rebuildable_tensors": rebuildable}
    con.print(kv_table(f"Instance {inst.name}", rows, SUMMARY_LABELS))
    if sch:
        con.print(kv_table("Schedule", schedule_rows(sch), SCHEDULE_LABELS))
    shown = {*summary, "A", "P", "T_F", "T*", "T_star"}
    extra = {k: v for k, v in report.items() if k not in shown}
    if extra:
        con.print(kv_table("Link budget", extra, SUMMARY_LABELS))
    t = Table(title="Saved tensors by category", title_justify="left")
    for col, just in (("category", "left"), ("tensors", "right"), ("bytes", "right"),
                      ("share of A", "right")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for cat, c in cats.items():
        t.add_row(cat, str(c["count"]), fmt_bytes(c["bytes"]),
                  f"{c['bytes'] / inst.A:.1%}" if inst.A else "-")
    con.print(t)
    return None
