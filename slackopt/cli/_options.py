"""Options shared by several commands and the rules that read their values: budgets,
time limits, ``--param``, ``--host-memory``, comma-separated lists, ``--solvers``, and
the budget a plan file is simulated under."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from slackopt.cli._output import budget_words, note
from slackopt.errors import SlackoptError

if TYPE_CHECKING:  # pragma: no cover
    from slackopt.instance import Instance
    from slackopt.io import PlanFile

BUDGET_HELP = ("fraction of P <= 1 (0.5), percentage (50%), multiple of P (1.2P) or size "
               "(11.5GB)")
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Replace the output file if it exists.")]
ParamOpt = Annotated[
    list[str] | None,
    typer.Option("--param", "-p", metavar="KEY=VALUE",
                 help="Extra keyword parameter (VALUE read as JSON if it parses, None as "
                 "null, else text); repeatable."),
]
InstanceArg = Annotated[Path, typer.Argument(help="Instance file.")]

SOLVE_OPTIONS = {"time_limit_s": "--time-limit", "seed": "--seed"}
"""Solver arguments that solve() takes per call: set with these options, not --param."""


def check_time_limit(value: float | None) -> float | None:
    """--time-limit of every command: the one rule of
    :func:`slackopt.solverbase.check_time_limit` (None or finite seconds >= 0)."""
    from slackopt.solverbase import check_time_limit as rule

    try:
        return rule(value)
    except SlackoptError as e:
        raise typer.BadParameter(str(e), param_hint="'--time-limit'") from None


def time_limit_opt(help_text: str) -> Any:
    """The --time-limit option with `help_text` (finite seconds, or none)."""
    return typer.Option("--time-limit", callback=check_time_limit,
                        help=f"{help_text} Finite; leave out for no limit.")


def time_limits(values: list[str] | None) -> dict[str, float | None] | None:
    """--time-limit-for NAME=S (repeatable) as {solver name: seconds}; "none" for no limit.

    Raises:
        typer.BadParameter: a value that is not NAME=SECONDS, or a bad limit.
    """
    from slackopt.solverbase import check_time_limit as rule

    if not values:
        return None
    out: dict[str, float | None] = {}
    for v in values:
        name, eq, sec = v.partition("=")
        name, sec = name.strip(), sec.strip()
        try:
            if not eq or not name:
                raise ValueError
            lim = None if sec.lower() == "none" else float(sec)
        except ValueError:
            raise typer.BadParameter(f"'{v}' is not NAME=SECONDS (e.g. milp=300, or "
                                     "milp=none for no limit)",
                                     param_hint="'--time-limit-for'") from None
        if name in out:
            raise typer.BadParameter(f"'{name}' is given twice; give each solver one limit",
                                     param_hint="'--time-limit-for'")
        try:
            out[name] = rule(lim)
        except SlackoptError:
            raise typer.BadParameter(f"'{v}': the limit must be a finite number of seconds "
                                     f">= 0, or none for no limit (e.g. {name}=300)",
                                     param_hint="'--time-limit-for'") from None
    return out


def time_limits_opt() -> Any:
    """The --time-limit-for option of the sweeps (compare, bench)."""
    return typer.Option(
        "--time-limit-for",
        help="NAME=SECONDS: a time limit for the runs of one solver (by its name), replacing "
        "--time-limit for them; repeat it for more solvers ('none': no limit).")


HOST_MEMORY_FORMS = ("a size with a unit (480GB, 240GiB; at most 2**62 B) or 'gpu' (the "
                     "GPU's own host memory: Grace's on gh200, gb200)")


def check_host_memory(value: str | None) -> int | str | None:
    """--host-memory of make and profile: a size with a unit (bytes, read by
    :func:`slackopt.instance.parse_budget`), "gpu", or None (unlimited); anything else is
    a BadParameter naming the accepted forms."""
    from slackopt.instance import parse_budget

    if value is None or value.strip().lower() == "gpu":
        return None if value is None else "gpu"
    try:
        kind, size = parse_budget(value)
    except SlackoptError:
        kind = "bad"
    if kind != "bytes" or size > 2**62:  # 50%, 1.2P: no P to take a fraction of here
        raise typer.BadParameter(f"'{value}' is not {HOST_MEMORY_FORMS}",
                                 param_hint="'--host-memory'")
    return int(size)


HostMemoryOpt = Annotated[str | None, typer.Option(
    callback=check_host_memory,
    help="Host pinned-memory limit: a size (480GB), or 'gpu' for the GPU's own host memory "
         "(Grace's on gh200, gb200). Default: unlimited.")]


def parse_params(items: list[str] | None,
                 reserved: dict[str, str] | None = None) -> dict[str, Any]:
    """``KEY=VALUE`` items -> dict (values read as JSON, ``None`` as null like JSON's
    ``null``, else kept as text). A key in `reserved` (key -> the option that sets it) is
    a BadParameter naming that option."""
    out: dict[str, Any] = {}
    for it in items or []:
        key, sep, value = it.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise typer.BadParameter(f"'{it}' is not KEY=VALUE", param_hint="'--param'")
        if reserved and key in reserved:
            raise typer.BadParameter(f"'{key}' is set with {reserved[key]}, not --param",
                                     param_hint="'--param'")
        if value.strip() == "None":  # Python's spelling of JSON's null
            out[key] = None
            continue
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def split_list(text: str, what: str, opt: str) -> list[str]:
    """A comma-separated option value as its items.

    Raises:
        typer.BadParameter: an empty value or an empty item.
    """
    items = [x.strip() for x in text.split(",")]
    if not text.strip() or any(not x for x in items):
        raise typer.BadParameter(f"'{text}' is not a comma-separated list of {what}",
                                 param_hint=f"'{opt}'")
    return items


def solver_specs(text: str) -> list[Any]:
    """--solvers (:func:`slackopt.compare.grid.parse_solvers`), its errors as the option's."""
    from slackopt.compare.grid import parse_solvers

    try:
        return parse_solvers(text)
    except SlackoptError as e:
        raise typer.BadParameter(str(e), param_hint="'--solvers'") from None


PLAN_BUDGET_SOURCES = {"option": "from --budget", "plan_file": "recorded in the plan file",
                       "default_P": "P, since the plan file records no budget"}
"""Where the budget of a plan file's simulation came from, in words."""


def plan_budget(inst: Instance, pf: PlanFile, budget: str | None) -> tuple[int, str]:
    """The budget M (bytes) a plan file is simulated under, and its source (a key of
    :data:`PLAN_BUDGET_SOURCES`): `budget` (--budget) if given, else the budget the file
    records (``solve -o`` writes it), else P. A note on stderr says which, and how to
    choose another.

    Raises:
        BudgetError: a `budget` that cannot be read.
    """
    from slackopt.instance import budget_bytes

    if budget is not None:
        m, source = budget_bytes(inst, budget), "option"
    elif pf.budget_bytes is not None:
        m, source = pf.budget_bytes, "plan_file"
    else:
        m, source = int(inst.P), "default_P"
    note(f"budget {budget_words(m, inst.P)}, {PLAN_BUDGET_SOURCES[source]}"
         + ("" if source == "option" else "; give --budget to choose another"))
    return m, source
