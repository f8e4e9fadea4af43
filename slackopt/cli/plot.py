"""``slackopt plot KIND``: the figures of :mod:`slackopt.plot`, one command per row of
:data:`PLOTS`.

Every kind writes ``-o FILE`` (.png, .svg or .pdf; an existing file only with ``--force``,
never a file the command reads) and takes ``--json``. The kinds that draw plans
(timeline, memory, planmap) solve the instance with ``--solver`` (default slackswap)
under ``--budget`` (default 0.5 P), or draw a ``--plan`` file under the budget it records
(as ``slackopt simulate`` does; ``--budget`` chooses another); each panel or title names
the solver whose plan it draws.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from slackopt.cli._errors import guarded
from slackopt.cli._options import (
    BUDGET_HELP,
    SOLVE_OPTIONS,
    ForceOpt,
    InstanceArg,
    JsonOpt,
    ParamOpt,
    parse_params,
    plan_budget,
    time_limit_opt,
)
from slackopt.cli._output import budget_fraction, console, err, evaluation_doc, min_budget_line
from slackopt.errors import SlackoptError
from slackopt.hardware import GPUS


def _param(name: str, annotation: Any, default: Any = inspect.Parameter.empty
           ) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=annotation)


OUTPUT = _param("output", Annotated[Path, typer.Option(
    "--output", "-o", help="Figure file: .png, .svg or .pdf.")])
FORCE = _param("force", ForceOpt, False)
JSON = _param("json_output", JsonOpt, False)
INSTANCE = _param("instance", InstanceArg)
RESULTS = _param("results", Annotated[Path, typer.Argument(
    help="Table from slackopt compare --out (.csv, .json, .parquet, .sqlite) or a --store.")])
PLAN_PARAMS = (
    INSTANCE,
    _param("solver", Annotated[list[str] | None, typer.Option(
        "--solver", "-s", help="Registered solver name or path/to/file.py:Class; repeat to "
        "compare (default: slackswap).")], None),
    _param("budget", Annotated[str | None, typer.Option(
        "--budget", "-b", help=f"Memory budget: {BUDGET_HELP}. Default: with --plan the "
        "budget the plan file records (else P), otherwise 0.5.")], None),
    _param("plan", Annotated[Path | None, typer.Option(
        "--plan", help="Plot this plan file instead of solving.")], None),
    _param("seed", Annotated[int | None, typer.Option(
        help="Random seed passed to the solver.")], None),
    _param("time_limit", Annotated[float | None, time_limit_opt("Solver time limit (s).")],
           None),
    _param("param", ParamOpt, None),
)
READS = {"instance": "the instance file", "plan": "the --plan file",
         "results": "the results file"}
"""The parameters that name a file the command reads, and its role in messages."""


@dataclass(frozen=True)
class PlotKind:
    """One ``slackopt plot`` command.

    Attributes:
        name: the command (``slackopt plot NAME``).
        help: its help line.
        params: its parameters besides ``-o``, ``--force`` and ``--json`` (arguments first).
        draw: called with those parameters; returns the figure and the keys the --json
            document adds to ``kind`` and ``written``.
    """

    name: str
    help: str
    params: tuple[inspect.Parameter, ...]
    draw: Callable[..., tuple[Any, dict[str, Any]]]


# ----------------------------------------------------------------------------- plans
def _runs(inst: Any, solver: list[str] | None, budget: str | None, plan: Path | None,
          seed: int | None, time_limit: float | None, params: dict[str, Any]
          ) -> tuple[int, list[dict[str, Any]]]:
    """The budget M and the plans to draw, each simulated with a trace: the --plan file's
    (under the budget it records unless --budget is given, as simulate), or each solver's
    (under --budget, default 0.5 P).

    Raises:
        SlackoptError: a solver that returned no plan (with the smallest budget, as
            solve states it).
    """
    from slackopt.instance import budget_bytes
    from slackopt.io import read_plan_file
    from slackopt.simulate import simulate as run_simulation
    from slackopt.solver import solve as run_solver

    runs: list[dict[str, Any]] = []
    if plan is not None:
        if solver:
            raise typer.BadParameter("give --plan or --solver, not both", param_hint="'--plan'")
        pf = read_plan_file(plan, inst)
        m, _ = plan_budget(inst, pf, budget)
        name = pf.meta.get("solver") if isinstance(pf.meta.get("solver"), str) else None
        status = pf.meta.get("status") if isinstance(pf.meta.get("status"), str) else None
        runs.append({"label": f"{name} ({plan.name})" if name else plan.name, "solver": name,
                     "status": status, "plan": pf.plan})
    else:
        m = budget_bytes(inst, "0.5" if budget is None else budget)
        for name in solver or ["slackswap"]:
            res = run_solver(inst, name, m, time_limit_s=time_limit, seed=seed, **params)
            if res.plan is None:
                min_b = res.info.get("min_budget_bytes")
                frac = (budget_fraction(int(min_b), inst.P)
                        if isinstance(min_b, (int, float)) else None)
                raise SlackoptError(f"solver '{name}' returned no plan (status {res.status}) "
                                    "for this budget; nothing to draw ("
                                    f"{min_budget_line(res.info, min_b, frac)})")
            runs.append({"label": name, "solver": name, "status": res.status,
                         "plan": res.plan})
    for r in runs:
        r["evaluation"] = run_simulation(inst, r["plan"], m, trace=True)
    return m, runs


def _plan_kind(figure: Callable[[Any, int, list[dict[str, Any]]], Any]
               ) -> Callable[..., tuple[Any, dict[str, Any]]]:
    """The draw function of a kind that draws plans: `figure(inst, M, runs)` on the plans
    of :func:`_runs`."""

    def draw(instance: Path, solver: list[str] | None, budget: str | None, plan: Path | None,
             seed: int | None, time_limit: float | None, param: list[str] | None
             ) -> tuple[Any, dict[str, Any]]:
        from slackopt.io import load_instance

        inst = load_instance(instance)
        params = parse_params(param, SOLVE_OPTIONS)
        m, runs = _runs(inst, solver, budget, plan, seed, time_limit, params)
        runs_doc = [{"label": r["label"], "solver": r["solver"], "status": r["status"],
                     "evaluation": evaluation_doc(r["evaluation"])} for r in runs]
        return figure(inst, m, runs), {"instance": inst.name, "budget_bytes": m,
                                       "budget_fraction": budget_fraction(m, inst.P),
                                       "runs": runs_doc}

    return draw


def _labelled(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {r["label"]: r["evaluation"] for r in runs}


def _timeline(inst: Any, m: int, runs: list[dict[str, Any]]) -> Any:
    from slackopt import plot

    return plot.timeline(_labelled(runs), inst)


def _memory(inst: Any, m: int, runs: list[dict[str, Any]]) -> Any:
    from slackopt import plot

    if inst.scheduled_units is not None:  # a pipeline stage: the whole schedule, units
        return plot.stage_memory(_labelled(runs), inst)
    return plot.memory_profile(_labelled(runs), inst)


def _planmap(inst: Any, m: int, runs: list[dict[str, Any]]) -> Any:
    from slackopt import plot

    if len(runs) > 1:
        raise typer.BadParameter("a plan map draws one plan: give one --solver",
                                 param_hint="'--solver'")
    return plot.plan_map(inst, runs[0]["plan"], budget_bytes=m, label=runs[0]["label"])


# ----------------------------------------------------------------------------- others
def _results_kind(figure: Callable[..., Any]) -> Callable[..., tuple[Any, dict[str, Any]]]:
    """The draw function of a kind that draws a results table: `figure(df, **options)`."""

    def draw(results: Path, **options: Any) -> tuple[Any, dict[str, Any]]:
        from slackopt.compare import read_results

        df = read_results(results)
        return figure(df, **options), {"rows": len(df)}

    return draw


def _curves(df: Any, instances: list[str] | None) -> Any:
    from slackopt import plot

    return plot.throughput_vs_budget(df, instances=instances or None)


def _quality(df: Any, quality: str) -> Any:
    from slackopt import plot

    return plot.planning_time_vs_quality(df, quality=quality)


def _linkbudget(workload: list[str] | None, gpu: list[str] | None
                ) -> tuple[Any, dict[str, Any]]:
    from slackopt import plot

    try:
        return plot.link_budget(workload or plot.PAPER_WORKLOADS,
                                gpu or plot.GPU_GENERATIONS), {}
    except KeyError as e:
        err(str(e.args[0]) if e.args else "unknown workload or GPU")
        raise typer.Exit(2) from None


def _costs(instance: Path) -> tuple[Any, dict[str, Any]]:
    from slackopt import plot
    from slackopt.io import load_instance

    inst = load_instance(instance)
    return plot.cost_per_byte(inst), {"instance": inst.name}


PLOTS = (
    PlotKind("timeline", "Step timeline: compute, D2H and H2D lanes, stalls and rebuilds "
             "(paper Figure 5).", PLAN_PARAMS, _plan_kind(_timeline)),
    PlotKind("memory", "Device memory in use over the step against the budget M (a pipeline "
             "stage: over its schedule, keep-all against the plan, units marked).",
             PLAN_PARAMS, _plan_kind(_memory)),
    PlotKind("planmap", "Decision per tensor category per layer (paper Figure 3).",
             PLAN_PARAMS, _plan_kind(_planmap)),
    PlotKind("curves", "Throughput against the memory budget per solver (paper Figure 4).",
             (RESULTS, _param("instances", Annotated[list[str] | None, typer.Option(
                 "--instance", help="Instance name to draw; repeatable (default: all).")],
                 None)), _results_kind(_curves)),
    PlotKind("quality", "Planning time against plan quality per solver.",
             (RESULTS, _param("quality", Annotated[str, typer.Option(
                 help="gap_to_best, gap_to_bound or throughput.")], "gap_to_best")),
             _results_kind(_quality)),
    PlotKind("linkbudget", "Hideable fraction of saved activations per GPU generation "
             "(paper Figure 1).",
             (_param("workload", Annotated[list[str] | None, typer.Option(
                 "--workload", help="Workload; repeatable (default: the paper's four).")],
                 None),
              _param("gpu", Annotated[list[str] | None, typer.Option(
                  "--gpu", help=f"GPU preset: {', '.join(GPUS)}; repeatable (default: "
                  "titanx, v100, a100, h100).")], None)), _linkbudget),
    PlotKind("costs", "Recompute cost per byte of each saved tensor against an exposed "
             "copy (Figure 2).", (INSTANCE,), _costs),
)
"""Every plot command, in the order ``slackopt plot --help`` lists them."""


def _check_figure(output: Path, force: bool, kw: dict[str, Any]) -> None:
    """-o of a plot: a figure suffix, no file the command reads, no existing file unless
    --force."""
    from slackopt.errors import FileFormatError
    from slackopt.io.outputs import check_output
    from slackopt.plot import FORMATS

    if output.suffix.lower() not in FORMATS:
        raise FileFormatError(output, "", f"unknown figure format '{output.suffix or '(none)'}'",
                              f"end the file name with one of {', '.join(FORMATS)}")
    check_output(output, overwrite=force, fix="write the figure to another path (-o)",
                 reads=[(role, kw.get(k)) for k, role in READS.items()])


def plot_command(kind: PlotKind) -> Callable[..., dict[str, Any] | None]:
    """The command function of `kind`: its arguments, ``-o``, its options, ``--force``
    and ``--json`` (the signature typer reads); it checks ``-o``, draws, saves, and
    returns the --json document (``kind``, ``written`` and the draw's keys) or prints
    where it wrote."""

    def command(**kw: Any) -> dict[str, Any] | None:
        from slackopt import plot

        output, force, json_output = kw.pop("output"), kw.pop("force"), kw.pop("json_output")
        _check_figure(output, force, kw)
        fig, extra = kind.draw(**kw)
        path = plot.save(fig, output)
        if json_output:
            return {"kind": kind.name, "written": [str(path)], **extra}
        console().print(f"wrote {path}")
        return None

    args = [p for p in kind.params if isinstance(_typer_info(p), typer.models.ArgumentInfo)]
    opts = [p for p in kind.params if p not in args]
    command.__signature__ = inspect.Signature([*args, OUTPUT, *opts, FORCE, JSON])  # type: ignore[attr-defined]
    command.__name__ = command.__qualname__ = f"plot_{kind.name}"
    command.__doc__ = kind.help
    return guarded(command)


def _typer_info(p: inspect.Parameter) -> Any:
    """The typer.Argument / typer.Option of an Annotated parameter."""
    return next(iter(getattr(p.annotation, "__metadata__", ())), None)


plot_app = typer.Typer(
    name="plot",
    help="Draw a figure; the -o suffix picks the format (.png, .svg or .pdf).",
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    add_completion=False,
    no_args_is_help=True,
)
for _kind in PLOTS:
    plot_app.command(_kind.name, help=_kind.help)(plot_command(_kind))
