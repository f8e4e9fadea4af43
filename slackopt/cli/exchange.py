"""Files other tools read or write: ``slackopt export`` (a plan as PyTorch's
selective-checkpoint policy, :mod:`slackopt.torch.export`) and ``slackopt import
checkmate`` (a Checkmate training graph as an instance, :mod:`slackopt.importers`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from slackopt.cli._errors import guarded
from slackopt.cli._options import ForceOpt, HostMemoryOpt, JsonOpt, split_list
from slackopt.cli._output import SUMMARY_LABELS, console, kv_table, summary_rows
from slackopt.errors import SlackoptError
from slackopt.hardware import GPUS, LINKS

EXPORT_FORMATS = ("torch-sac",)
"""What ``slackopt export --to`` writes."""


@guarded
def export_cmd(
    plan: Annotated[Path, typer.Argument(help="Plan file (solve -o writes one).")],
    instance: Annotated[Path, typer.Option(
        "--instance", help="The instance file the plan is for (made by slackopt profile).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Policy file to write.")],
    to: Annotated[str, typer.Option(
        help="What to write: torch-sac, a policy for PyTorch's selective activation "
        "checkpointing (torch.utils.checkpoint.create_selective_checkpoint_contexts).")
    ] = "torch-sac",
    regions: Annotated[str, typer.Option(
        help="Checkpoint regions: 'layers' (every module whose path ends at its first "
        "number, model.layers.3) or comma-separated module paths.")] = "layers",
    unplanned: Annotated[str, typer.Option(
        help="Calls whose outputs the plan does not cover: recompute (re-run in the "
        "replay) or save (cached until it).")] = "recompute",
    force: ForceOpt = False,
    json_output: JsonOpt = False,
) -> dict[str, Any] | None:
    """Write a plan of a profiled instance as a policy PyTorch runs (needs the [torch]
    extra); a plan with tensors the policy cannot express exits 2 naming each one."""
    if to not in EXPORT_FORMATS:
        raise SlackoptError(f"--to {to!r}: slackopt exports {', '.join(EXPORT_FORMATS)}")
    if unplanned not in ("recompute", "save"):
        raise SlackoptError(f"--unplanned {unplanned!r}: give recompute or save")
    from slackopt.io import load_instance, read_plan_file
    from slackopt.io.outputs import check_output
    from slackopt.torch.export import sac_policy, save_policy

    check_output(output, reads=[("the plan", plan), ("the instance", instance)],
                 overwrite=force, fix="write the policy to another path (-o)")
    inst = load_instance(instance)
    pf = read_plan_file(plan, inst)
    which = "layers" if regions == "layers" else split_list(regions, "module paths",
                                                             "--regions")
    policy = sac_policy(inst, pf.plan, regions=which, unplanned=unplanned)
    policy.meta.update({"plan_file": str(plan), "plan_budget_bytes": pf.budget_bytes})
    path = save_policy(policy, output, overwrite=force)
    doc = {"path": str(path), "instance": inst.name, "regions": [r.module for r in
                                                                  policy.regions],
           "decisions": {d: len(policy.tensors_with(d)) for d in ("keep", "swap", "recomp")},
           "calls": {p: sum(1 for c in policy.calls if c.policy == p)
                     for p in ("MUST_SAVE", "MUST_CPU_OFFLOAD", "MUST_RECOMPUTE", "AUTOGRAD")},
           "allow_cache_entry_mutation": policy.allow_cache_entry_mutation,
           "extra": policy.extra}
    if json_output:
        return doc
    con = console()
    con.print(f"wrote {path}")
    con.print(kv_table(f"Selective-checkpoint policy for {inst.name} "
                       f"({len(policy.regions)} regions)",
                       {**doc["calls"], **doc["extra"]}))
    return None


import_app = typer.Typer(
    name="import", help="Read another tool's instance files.", no_args_is_help=True,
    rich_markup_mode=None, add_completion=False)


@import_app.command("checkmate")
@guarded
def import_checkmate_cmd(
    graph: Annotated[Path, typer.Argument(
        help="A Checkmate training graph: networkx node-link JSON, each node with "
        "'backward', 'cost_cpu' and 'cost_ram'.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Instance file to write.")],
    cost_unit: Annotated[str, typer.Option(
        "--cost-unit", help="What one unit of cost_cpu is: a time (1us, 10ns, 0.5ms, 2e-6 "
        "for seconds) or 'flops' (priced on --gpu's roofline). The file does not say.")],
    gpu: Annotated[str, typer.Option(help=f"GPU preset: {', '.join(GPUS)}.")] = "a100",
    link: Annotated[str | None, typer.Option(
        help=f"Host-link preset: {', '.join(LINKS)} (default: the GPU's).")] = None,
    host_memory: HostMemoryOpt = None,
    name: Annotated[str | None, typer.Option(help="Instance name (default: the graph's "
                                             "name).")] = None,
    max_recipe_ops: Annotated[int, typer.Option(
        min=1, help="Longest recompute recipe (nodes).")] = 6,
    force: ForceOpt = False,
    json_output: JsonOpt = False,
) -> dict[str, Any] | None:
    """Build an instance from a Checkmate training graph (docs/workloads.md, "Checkmate
    graphs", states each assumption)."""
    from slackopt.importers.checkmate import read_checkmate
    from slackopt.io import save_instance
    from slackopt.io.outputs import check_output

    check_output(output, reads=[("the graph", graph)], overwrite=force,
                 fix="write the instance to another path (-o)")
    inst = read_checkmate(graph, gpu=gpu, link=link, cost_unit=cost_unit, name=name,
                          max_recipe_ops=max_recipe_ops, host_memory_bytes=host_memory)
    path = save_instance(inst, output, overwrite=force)
    doc = {"path": str(path), **inst.summary(), "checkmate": inst.meta["checkmate"]}
    if json_output:
        return doc
    con = console()
    con.print(f"wrote {path}")
    con.print(kv_table(f"Instance {inst.name} (Checkmate graph {graph.name})",
                       summary_rows(inst.summary()), SUMMARY_LABELS))
    return None


__all__ = ["EXPORT_FORMATS", "export_cmd", "import_app", "import_checkmate_cmd"]
