"""``slackopt solve`` (plan an instance under a budget), ``slackopt simulate`` (score a
plan file) and ``slackopt solvers`` (the registered solvers).

The rule of an infeasible budget, the same for every solver: it is an answer, not an
error. ``solve`` exits 0, states the smallest budget (in the words its basis allows) and
writes a plan file with ``-o`` only when the plan runs under the budget (status optimal,
bounded or feasible); otherwise a note on stderr says the file was not written.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from slackopt.cli._errors import guarded
from slackopt.cli._options import (
    BUDGET_HELP,
    SOLVE_OPTIONS,
    ForceOpt,
    InstanceArg,
    JsonOpt,
    ParamOpt,
    check_time_limit,
    parse_params,
    plan_budget,
    time_limit_opt,
)
from slackopt.cli._output import (
    brief,
    budget_fraction,
    budget_words,
    console,
    decision_table,
    evaluation_doc,
    fmt_time,
    kv_table,
    min_budget_line,
    note,
    plain,
    print_evaluation,
)
from slackopt.errors import SlackoptError


def _write_plan(res: Any, output: Path, inst: Any, m: int, force: bool) -> str | None:
    """Write the plan of `res` to `output` if it runs under the budget M (a plan status),
    with the provenance ``simulate`` and ``plot --plan`` read back; else say on stderr
    that nothing was written. Returns the path written, or None."""
    from slackopt.io import save_plan
    from slackopt.result import PLAN_STATUSES

    plan, ev = res.plan, res.evaluation
    if plan is None or res.status not in PLAN_STATUSES:
        note(f"{output} not written: solver '{res.solver}' has no plan that runs under "
             f"this budget (status {res.status}); an existing file is left as it was")
        return None
    meta = {"solver": res.solver, "params": res.params, "status": res.status,
            "budget_bytes": m, "seed": res.seed, "planning_time_s": res.planning_time_s,
            "step_time_s": ev.step_time_s if ev is not None and ev.feasible else None,
            "feasible": ev.feasible if ev else None}
    return str(save_plan(plan, output, inst, overwrite=force, meta=plain(meta)))


def _solve_doc(inst: Any, res: Any, m: int, plan_file: str | None) -> dict[str, Any]:
    """The --json document of solve."""
    plan, ev = res.plan, res.evaluation
    min_b = res.info.get("min_budget_bytes") if res.status == "infeasible" else None
    return {
        "instance": inst.name, "solver": res.solver, "params": res.params,
        "status": res.status, "budget_bytes": m, "budget_fraction": budget_fraction(m, inst.P),
        "peak_bytes_keep_all": inst.P, "planning_time_s": res.planning_time_s,
        "objective_s": res.objective_s, "lower_bound_s": res.lower_bound_s, "seed": res.seed,
        "decisions": plan.counts() if plan is not None else None,
        "bytes_by_decision": plan.bytes_by_decision(inst) if plan is not None else None,
        "evaluation": evaluation_doc(ev) if ev is not None else None,
        "min_budget_bytes": min_b,
        "min_budget_fraction": (budget_fraction(int(min_b), inst.P)
                                if isinstance(min_b, (int, float)) else None),
        "info": res.info, "plan_file": plan_file,
    }


def _print_solve(inst: Any, res: Any, doc: dict[str, Any]) -> None:
    """solve's human output: the result, the evaluation, the decisions, the smallest
    budget of an infeasible answer, the solver's note and info."""
    con = console()
    head = {"status": res.status, "budget_bytes": doc["budget_bytes"],
            "budget (fraction of P)": doc["budget_fraction"],
            "planning_time_s": res.planning_time_s, "objective_s": res.objective_s,
            "lower_bound_s": res.lower_bound_s}
    con.print(kv_table(f"{res.solver} on {inst.name}", head))
    if res.evaluation is not None:
        print_evaluation(con, doc["evaluation"])
    if res.plan is not None:
        con.print(decision_table(res.plan.counts(), res.plan.bytes_by_decision(inst), inst.A))
    if res.status == "infeasible":
        con.print(min_budget_line(res.info, doc["min_budget_bytes"],
                                  doc["min_budget_fraction"]))
    phases = res.info.get("phases")
    if isinstance(phases, list) and phases and "lifted_s" in phases[0]:
        con.print(_phase_table(phases))
    note_text = res.info.get("note")
    if isinstance(note_text, str) and note_text:
        con.print(f"note: {note_text}")
    info = {str(k): brief(v) for k, v in res.info.items()
            if k not in ("min_budget_bytes", "min_budget_basis", "note")}
    if info:
        con.print(kv_table("Solver info", info))
    if doc["plan_file"]:
        con.print(f"wrote {doc['plan_file']}")


def _phase_table(phases: list[dict[str, Any]]) -> Table:
    """The phases of a search that logs them (milp's ``info["phases"]``): after each,
    the plan (U) and the certified bound (L), how much it lowered U and lifted L, and
    the sources whose certified bound it raised (their values: ``info["bounds"]``;
    docs/exact-tier.md)."""
    t = Table(title="Phases: where the plan and the bound moved", title_justify="left")
    for col in ("phase", "plan", "bound", "lowered", "lifted"):
        t.add_column(col, justify="left" if col == "phase" else "right")
    t.add_column("sources raised")
    for p in phases:
        t.add_row(str(p["phase"]), fmt_time(p["upper_s"]), fmt_time(p["lower_s"]),
                  fmt_time(p["lowered_s"]), fmt_time(p["lifted_s"]),
                  ", ".join(p.get("sources") or {}) or "-")
    return t


@guarded
def solve(
    instance: InstanceArg,
    solver: Annotated[str, typer.Option("--solver", "-s", help="Registered solver name, or "
                                        "path/to/file.py:ClassName.")],
    budget: Annotated[str, typer.Option("--budget", "-b",
                                        help=f"Memory budget: {BUDGET_HELP}.")],
    time_limit: Annotated[float | None, time_limit_opt("Solver time limit (s).")] = None,
    seed: Annotated[int | None, typer.Option(help="Random seed.")] = None,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Plan file to write, when the plan runs under the budget "
        "(an infeasible answer writes none).")] = None,
    param: ParamOpt = None,
    start_plan: Annotated[Path | None, typer.Option(
        "--start-plan", help="Plan file to start from and beat, e.g. one that solve -o "
        "wrote at a smaller budget: the plan returned is never slower than it under this "
        "budget; milp and genetic search from it.")] = None,
    force: ForceOpt = False,
    json_output: JsonOpt = False,
) -> dict[str, Any] | None:
    """Plan an instance under a budget with one solver and evaluate the plan."""
    from slackopt.instance import budget_bytes
    from slackopt.io import load_instance, load_plan
    from slackopt.io.outputs import check_output
    from slackopt.solver import solve as run_solver

    inst = load_instance(instance)
    m = budget_bytes(inst, budget)
    if output is not None:
        ref = solver.rpartition(":")[0]  # path/to/file.py:ClassName reads the file
        check_output(output, overwrite=force, fix="write the plan to another path (-o)",
                     reads=[("the instance file", instance),
                            ("the --start-plan file", start_plan),
                            ("the solver's file", ref if ref.endswith(".py") else None)])
    params = parse_params(param, SOLVE_OPTIONS)
    start = load_plan(start_plan, inst) if start_plan is not None else None
    res = run_solver(inst, solver, m, time_limit_s=time_limit, seed=seed, start_plan=start,
                     **params)
    plan_file = _write_plan(res, output, inst, m, force) if output is not None else None
    doc = _solve_doc(inst, res, m, plan_file)
    if json_output:
        return doc
    _print_solve(inst, res, doc)
    return None


_GAP_KEYS = ("runtime_step_s", "best_schedule_s", "best_schedule_lower_s",
             "instance_lower_bound_s", "lost_to_runtime_min_s", "lost_to_runtime_max_s",
             "lost_to_decisions_max_s", "schedule_source", "cpsat_status")
"""The rows of simulate --best-schedule's runtime-gap table."""


@guarded
def simulate(
    instance: InstanceArg,
    plan: Annotated[Path, typer.Argument(help="Plan file.")],
    budget: Annotated[str | None, typer.Option(
        "--budget", "-b", help=f"Memory budget: {BUDGET_HELP}. Default: the budget the "
        "plan file records (solve -o writes it), else P.")] = None,
    best_schedule: Annotated[bool, typer.Option(
        "--best-schedule", help="Also bracket the fastest schedule of the plan's "
        "decisions (CP-SAT schedule, verified; fixed-decision relaxation) and split the "
        "step time into what the decisions and the runtime cost.")] = False,
    time_limit: Annotated[float | None, typer.Option(
        "--time-limit", callback=check_time_limit, help="With --best-schedule: finite "
        "seconds for the CP-SAT search, and again for the relaxation (default 10).")] = None,
    lower_bound: Annotated[float | None, typer.Option(
        "--lower-bound", help="With --best-schedule: a lower bound L (s) on "
        "every plan's step time (e.g. the milp solver's), for 'lost to decisions'.")] = None,
    json_output: JsonOpt = False,
) -> dict[str, Any] | None:
    """Evaluate a plan file on an instance, under the budget it was planned for unless
    --budget says otherwise (stderr and the JSON say which budget was used); with
    --best-schedule, also how much of the step time the runtime policy loses
    (slackopt.experiments.runtime_gap)."""
    from slackopt.cli._options import PLAN_BUDGET_SOURCES
    from slackopt.io import load_instance, read_plan_file
    from slackopt.simulate import simulate as run_simulation

    inst = load_instance(instance)
    pf = read_plan_file(plan, inst)
    p, made_for = pf.plan, pf.instance
    if made_for and made_for != inst.name:
        note(f"{plan} was made for instance '{made_for}', not '{inst.name}'; its tensor "
             "names match, so it is simulated as is")
    m, source = plan_budget(inst, pf, budget)
    ev = run_simulation(inst, p, m)
    doc = {"instance": inst.name, "plan_instance": made_for, "plan_file": str(plan),
           "policy": p.policy, "budget_bytes": m, "budget_fraction": budget_fraction(m, inst.P),
           "budget_source": source, "plan_budget_bytes": pf.budget_bytes,
           "decisions": p.counts(), "bytes_by_decision": p.bytes_by_decision(inst),
           "evaluation": evaluation_doc(ev)}
    if best_schedule:
        from slackopt.experiments.runtime_gap import runtime_gap

        doc["runtime_gap"] = runtime_gap(
            inst, p, m, time_limit_s=10.0 if time_limit is None else time_limit,
            instance_lower_bound_s=lower_bound).to_dict()
    elif lower_bound is not None or time_limit is not None:
        raise SlackoptError("--lower-bound and --time-limit go with --best-schedule; add "
                            "--best-schedule or drop them")
    if json_output:
        return doc
    con = console()
    con.print(f"{plan} on {inst.name}, budget {budget_words(m, inst.P)}, "
              f"{PLAN_BUDGET_SOURCES[source]}")
    print_evaluation(con, doc["evaluation"])
    con.print(decision_table(p.counts(), p.bytes_by_decision(inst), inst.A))
    if best_schedule:
        g = doc["runtime_gap"]
        con.print(kv_table("Runtime gap (runtime step U; best schedule of these "
                           "decisions in [lower, best_schedule])", {k: g[k] for k in _GAP_KEYS}))
    return None


def plain_summary(doc: str) -> str:
    """The first paragraph of a docstring as one line of plain text: reStructuredText
    literals (````x````), roles (``:class:`~a.B``` -> B, ``:func:`text <target>``` ->
    text), emphasis and the paragraph's line breaks removed."""
    first = " ".join(doc.strip().split("\n\n")[0].split())

    def role(m: re.Match[str]) -> str:
        text = m.group(1)
        label = re.match(r"(.*?)\s*<[^<>]*>$", text)
        if label:
            return label.group(1)
        return text.lstrip("~").rsplit(".", 1)[-1] if text.startswith("~") else text

    first = re.sub(r":[\w:.-]+:`([^`]+)`", role, first)
    first = re.sub(r"``([^`]+)``", r"\1", first)
    first = re.sub(r"\*\*([^*]+)\*\*|\*([^*\s][^*]*)\*",
                   lambda m: m.group(1) or m.group(2), first)
    return re.sub(r"`([^`]+)`_?", r"\1", first)


@guarded
def list_solvers(json_output: JsonOpt = False) -> dict[str, Any] | None:
    """The registered solvers, one line each."""
    from slackopt.solver import registered_solvers

    rows = []
    for name, ep in registered_solvers().items():
        row: dict[str, Any] = {"name": name, "target": ep.value, "summary": None, "error": None}
        try:
            obj = ep.load()
            row["summary"] = plain_summary(inspect.getdoc(obj) or "")
        except Exception as e:  # a broken solver must not hide the others
            row["error"] = f"cannot load: {type(e).__name__}: {e}"
        rows.append(row)
    if json_output:
        return {"solvers": rows}
    con = console()
    t = Table(title="Registered solvers", title_justify="left")
    t.add_column("name")
    t.add_column("description")
    for r in rows:
        t.add_row(r["name"], r["summary"] if r["error"] is None else r["error"])
    con.print(t)
    if not rows:
        con.print("no solvers registered (is slackopt installed? pip install -e .)")
    return None
