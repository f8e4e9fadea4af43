"""``slackopt profile``: one training step of a PyTorch model into an instance file
(the [torch] extra; :func:`slackopt.torch.profile_factory`); with ``--schedule``, the
step is one microbatch's and the file holds the pipeline stage built from it
(:func:`slackopt.stage.build_stage`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from slackopt.cli._errors import guarded
from slackopt.cli._options import ForceOpt, HostMemoryOpt, JsonOpt, ParamOpt, parse_params
from slackopt.cli._output import SUMMARY_LABELS, console, kv_table, summary_rows
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


def _files_read(target: str, gpu: str | None) -> list[tuple[str, Path]]:
    """The files a profile reads, as (role, path): the Hugging Face config (``hf:PATH``:
    the file, or the folder's config.json), the factory's .py file (a path, or a
    top-level module of the current directory), and a --gpu JSON file of peaks."""
    from slackopt.torch import HF_PREFIX, resolve_factory

    reads: list[tuple[str, Path]] = []
    where = resolve_factory(target)
    if where.startswith(HF_PREFIX):
        cfg = Path(where[len(HF_PREFIX):])
        reads.append(("the Hugging Face config", cfg / "config.json" if cfg.is_dir() else cfg))
    else:
        module = where.rpartition(":")[0]
        if module.endswith(".py"):
            reads.append(("the factory's module file", Path(module)))
    if gpu is not None and (gpu.endswith(".json") or os.path.isfile(gpu)):
        reads.append(("the --gpu file", Path(gpu)))
    return reads


@guarded
def profile_cmd(
    target: Annotated[str, typer.Argument(
        metavar="MODULE:FACTORY",
        help="Your model factory: a module name importable from the current directory, or a "
        ".py file, then ':' and a callable. FACTORY(**params) returns a torch.nn.Module, or a "
        "dict with 'model' and optionally 'loss_fn' (loss_fn(output, *inputs) -> scalar) and "
        "'make_inputs' (make_inputs(shapes, device) -> tensors). Or hf:PATH/config.json: a "
        "Hugging Face model from its config (nothing downloaded; -i BxS tokens; --param "
        "overrides config fields, e.g. num_hidden_layers=1).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Instance file to write.")],
    input_shape: Annotated[list[str] | None, typer.Option(
        "--input-shape", "-i", help="Shape of one positional model input, e.g. 4x128; "
        "repeat once per input.")] = None,
    input_dtype: Annotated[list[str] | None, typer.Option(
        "--input-dtype", help="dtype of the inputs (float32, bf16, int64, ...): once for all "
        "or once per input.")] = None,
    input_high: Annotated[int | None, typer.Option(
        "--input-high", min=1, help="Integer inputs are drawn from [0, N) (token ids; "
        "default: the model's vocabulary, config.vocab_size or its first nn.Embedding).")
    ] = None,
    device: Annotated[str, typer.Option(help="Where to run the step: cpu, cuda, cuda:1.")
                      ] = "cpu",
    timing: Annotated[str | None, typer.Option(
        help="measure (timed on the device) or roofline (from FLOPs and bytes on --gpu); "
        "default measure, roofline with --fake.")] = None,
    fake: Annotated[bool, typer.Option(
        "--fake", help="Trace under PyTorch's FakeTensorMode: no weights or activations are "
        "allocated, so any model size fits; needs --gpu (roofline timing).")] = False,
    gpu: Annotated[str | None, typer.Option(help=f"GPU preset ({', '.join(GPUS)}) or a "
                                            "JSON file of peaks, for roofline timing and "
                                            "the default link. Refused with measure timing "
                                            "on the CPU.")] = None,
    link: Annotated[str | None, typer.Option(help=f"Host-link preset: {', '.join(LINKS)} "
                                             "(default: the GPU's, else pcie4).")] = None,
    host_memory: HostMemoryOpt = None,
    seed: Annotated[int, typer.Option(help="torch seed for the factory and the inputs.")] = 0,
    warmup: Annotated[int, typer.Option(min=0, help="Unrecorded steps first.")] = 1,
    repeat: Annotated[int, typer.Option(min=1, help="Recorded steps (median durations).")
                      ] = 3,
    name: Annotated[str | None, typer.Option(
        help="Instance name (with --schedule, the stage's).")] = None,
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
    """Profile one training step of your PyTorch model into an instance file (needs the
    [torch] extra); with --schedule, one microbatch's step run as a pipeline stage."""
    import warnings

    from slackopt.io import save_instance
    from slackopt.io.outputs import check_output
    from slackopt.torch import ProfileNote, profile_factory

    check_output(output, reads=_files_read(target, gpu), overwrite=force,
                 fix="write the instance to another path (-o)")
    req = stage_request(schedule, stage, stages, microbatches, chunks, hop_s, interconnect)
    timing = timing or ("roofline" if fake else "measure")
    if timing == "roofline" and gpu is None:
        raise SlackoptError(f"{'--fake' if fake else '--timing roofline'} needs --gpu (a "
                            f"preset: {', '.join(GPUS)}; or a JSON file of peaks)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProfileNote)  # said below, once, as a note
        base = profile_factory(target, input_shape or [], input_dtypes=input_dtype,
                               input_high=input_high, params=parse_params(param),
                               device=device, seed=seed, fake=fake, timing=timing, gpu=gpu,
                               link=link, name=None if req else name, warmup=warmup,
                               repeat=repeat, host_memory_bytes=host_memory)
    for note in base.meta.get("notes") or ():
        sys.stderr.write(f"slackopt: note: {note}\n")
    inst = base if req is None else req.build(base, name)
    path = save_instance(inst, output, overwrite=force)
    keys = ("model_class", "input_shapes", "input_dtypes", "input_kwargs", "device", "fake",
            "timing", "gpu", "attn_implementation", "torch_version", "persistent_bytes",
            "recipes", "notes")
    sch = schedule_doc(inst)
    doc = {"path": str(path), **inst.summary(), **{k: base.meta.get(k) for k in keys},
           **({"schedule": sch} if sch else {})}
    if json_output:
        return doc
    con = console()
    con.print(f"wrote {path}")
    con.print(kv_table(f"Instance {inst.name} ({doc['model_class']}, {base.meta['device']}"
                       f"{', fake' if fake else ''}, {timing})",
                       summary_rows(inst.summary()), SUMMARY_LABELS))
    if sch:
        con.print(kv_table("Schedule", schedule_rows(sch), SCHEDULE_LABELS))
    con.print(kv_table("Persistent (outside the budget)",
                       {f"{k}_bytes": v for k, v in base.meta["persistent_bytes"].items()},
                       {f"{k}_bytes": k for k in base.meta["persistent_bytes"]}))
    return None
