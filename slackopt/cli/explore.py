"""``slackopt explore``: one self-contained HTML page with a budget slider over plans
solved in advance (:mod:`slackopt.explore`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from slackopt.cli._errors import guarded
from slackopt.cli._options import (
    ForceOpt,
    InstanceArg,
    JsonOpt,
    solver_specs,
    split_list,
    time_limit_opt,
)
from slackopt.cli._output import console

SHORT_HELP = "One HTML page with a budget slider over solved plans."


def _fractions(text: str | None) -> list[float]:
    """--budgets as fractions of P (the default grid when not given)."""
    from slackopt.explore import DEFAULT_FRACTIONS

    if text is None:
        return list(DEFAULT_FRACTIONS)
    out = []
    for x in split_list(text, "fractions of P", "--budgets"):
        try:
            f = float(x)
        except ValueError:
            f = float("nan")
        if not (0 < f < float("inf")):
            raise typer.BadParameter(f"'{x}' is not a fraction of P > 0 (e.g. 0.5)",
                                     param_hint="'--budgets'")
        out.append(f)
    return out


@guarded
def explore_cmd(
    instance: InstanceArg,
    output: Annotated[Path, typer.Option("--output", "-o", help="The HTML page to write "
                                         "(.html); an existing file only with --force.")],
    solvers: Annotated[str, typer.Option(
        "--solvers", "-s", help="Comma-separated solver names, a suite, or a JSON list of "
        "names and [name, {params}] pairs.")] = "slackswap",
    budgets: Annotated[str | None, typer.Option(
        "--budgets", "-b", help="Comma-separated fractions of P, one slider step each "
        "(default: 1.0 down to 0.1 in steps of 0.05).")] = None,
    time_limit: Annotated[float | None, time_limit_opt("Time limit of each solve (s).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of every solve.")] = 0,
    force: ForceOpt = False,
    json_output: JsonOpt = False,
) -> dict[str, Any] | None:
    """Write one HTML page (no server, no network: Plotly's script is inlined) with a
    slider over budgets: the step timeline, the memory in use against M and each saved
    tensor's decision, per solver, each plan solved in advance."""
    from slackopt import explore
    from slackopt.errors import FileFormatError
    from slackopt.io import load_instance
    from slackopt.io.outputs import check_output

    if output.suffix.lower() not in (".html", ".htm"):
        raise FileFormatError(output, "", f"is not an HTML file ('{output.suffix or '(none)'}')",
                              "end the page's name with .html")
    check_output(output, overwrite=force, reads=[("the instance file", instance)],
                 fix="write the page to another path (-o)")
    specs = solver_specs(solvers)
    fractions = _fractions(budgets)
    inst = load_instance(instance)
    frames = explore.solve_grid(inst, specs, fractions, time_limit_s=time_limit, seed=seed)
    path = explore.write_page(output, explore.page(inst, frames))
    size = path.stat().st_size
    if json_output:
        return {"instance": inst.name, "written": [str(path)], "bytes": size,
                "budgets": [{"fraction": f.fraction, "budget_bytes": f.budget_bytes,
                             "runs": [{"solver": r.solver, "status": r.status,
                                       "feasible": bool(r.evaluation and r.evaluation.feasible),
                                       "step_time_s": r.evaluation.step_time_s
                                       if r.evaluation and r.evaluation.feasible else None}
                                      for r in f.runs]} for f in frames]}
    console().print(f"wrote {path} ({size / 1e6:.1f} MB, {len(frames)} budgets)")
    return None
