"""The ``slackopt`` command.

Commands (see DESIGN.md, "Command line"): ``make``, ``describe``, ``solve``, ``simulate``,
``solvers``. Every command takes ``--json``: stdout then holds exactly one JSON document
and nothing else (anything a solver prints goes to stderr). Exit status: 0 on success
(an infeasible budget is an answer, not an error), 2 for bad input (a
:class:`~slackopt.errors.SlackoptError`, an unknown name, a usage error), 1 for an
internal error. Errors are one message on stderr, never a traceback; set
``SLACKOPT_DEBUG=1`` to see the traceback of an internal error.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import math
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from slackopt.errors import SlackoptError

app = typer.Typer(
    name="slackopt",
    help="Activation-memory planning for DNN training: keep, swap or recompute each saved "
    "tensor under a GPU memory budget.",
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    add_completion=False,
    no_args_is_help=True,
)

F = TypeVar("F", bound=Callable[..., Any])

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Replace the output file if it exists.")]
ParamOpt = Annotated[
    list[str] | None,
    typer.Option("--param", "-p", metavar="KEY=VALUE",
                 help="Extra keyword parameter (VALUE read as JSON if it parses, else text); "
                 "repeatable."),
]


# ----------------------------------------------------------------------------- plumbing
def _console() -> Console:
    """Human output on the current stdout; no markup, emoji or highlighting of user text."""
    return Console(markup=False, emoji=False, highlight=False)


def _err(message: str) -> None:
    sys.stderr.write(f"slackopt: error: {message}\n")
    sys.stderr.flush()


def _plain(x: Any) -> Any:
    """JSON-ready copy: numpy to Python, tuples to lists, NaN/inf to null, others to str."""
    if isinstance(x, bool) or x is None or isinstance(x, (str, int)):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return _plain(float(x))
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set, frozenset, np.ndarray)):
        return [_plain(v) for v in (sorted(x, key=str) if isinstance(x, (set, frozenset))
                                    else x)]
    if isinstance(x, Path):
        return str(x)
    return str(x)


def _emit_json(doc: Mapping[str, Any]) -> None:
    sys.stdout.write(json.dumps(_plain(doc), allow_nan=False) + "\n")
    sys.stdout.flush()


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Send everything written to stdout (Python or C level) to stderr meanwhile."""
    sys.stdout.flush()
    saved = None
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # pragma: no cover - no file descriptors (embedded use)
        saved = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL(None).fflush(None)
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


def _guarded(fn: F) -> F:
    """Turn user errors into exit 2 and internal ones into exit 1, message on stderr."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            if kwargs.get("json_output"):
                with _stdout_to_stderr():
                    doc = fn(*args, **kwargs)
                if doc is not None:
                    _emit_json(doc)
                return None
            return fn(*args, **kwargs)
        except (typer.Exit, typer.TyperException, typer.Abort):
            raise
        except SlackoptError as e:
            _err(str(e))
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            raise
        except Exception as e:
            if os.environ.get("SLACKOPT_DEBUG", "") not in ("", "0"):
                traceback.print_exc(file=sys.stderr)
            msg = str(e) or "(no message)"
            _err(f"internal error: {type(e).__name__}: {msg}\n(this is a bug in slackopt or "
                 "a solver; rerun with SLACKOPT_DEBUG=1 to see the traceback)")
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


def _parse_params(items: list[str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for it in items or []:
        key, sep, value = it.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise typer.BadParameter(f"'{it}' is not KEY=VALUE", param_hint="'--param'")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def _fmt_bytes(b: float | None) -> str:
    if b is None:
        return "-"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(b) >= scale:
            return f"{b / scale:.4g} {unit}"
    return f"{int(b)} B"


def _fmt_time(t: float | None) -> str:
    if t is None:
        return "-"
    if not math.isfinite(t):
        return str(t)
    if abs(t) >= 1:
        return f"{t:.4g} s"
    if abs(t) >= 1e-3 or t == 0:
        return f"{t * 1e3:.4g} ms"
    return f"{t * 1e6:.4g} us"


def _fmt_value(key: str, v: Any) -> str:
    """Format by the unit its name carries (DESIGN.md, "Units and names")."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float, np.integer, np.floating)):
        v = float(v) if isinstance(v, (float, np.floating)) else int(v)
        if key.endswith("bytes_per_s"):
            return f"{v / 1e9:.4g} GB/s"
        if key.endswith("_bytes") or key in ("A", "P", "M"):
            return _fmt_bytes(v)
        if key.endswith("_s") or key in ("T_F", "T*", "T"):
            return _fmt_time(v)
        if isinstance(v, int):
            return f"{v:,}"
        return f"{v:.4g}"
    if isinstance(v, Mapping):
        return ", ".join(f"{k}={_fmt_value(str(k), x)}" for k, x in v.items())
    return str(v)


def _brief(v: Any) -> Any:
    """A scalar as is; a long container as a count (the full value is in --json)."""
    v = _plain(v)
    if isinstance(v, (list, dict)) and len(json.dumps(v)) > 60:
        return f"({len(v)} {'entries' if isinstance(v, dict) else 'items'}; see --json)"
    return v


def _kv_table(title: str, rows: Mapping[str, Any], labels: Mapping[str, str] | None = None
              ) -> Table:
    t = Table(title=title, show_header=False, title_justify="left")
    t.add_column("quantity")
    t.add_column("value")
    for k, v in rows.items():
        t.add_row((labels or {}).get(k, k), _fmt_value(k, v))
    return t


def _decision_table(counts: Mapping[str, int], nbytes: Mapping[str, int], total: int) -> Table:
    t = Table(title="Decisions", title_justify="left")
    t.add_column("decision")
    t.add_column("tensors", justify="right")
    t.add_column("bytes", justify="right")
    t.add_column("share of A", justify="right")
    for k in counts:
        share = f"{nbytes[k] / total:.1%}" if total else "-"
        t.add_row(k, str(counts[k]), _fmt_bytes(nbytes[k]), share)
    return t


def _evaluation_rows(ev: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("feasible", "step_time_s", "ideal_time_s", "throughput", "stall_fwd_s",
            "stall_bwd_s", "recompute_s", "d2h_bytes", "h2d_bytes", "evictions",
            "peak_bytes", "budget_bytes")
    return {k: ev[k] for k in keys if k in ev}


def _print_evaluation(con: Console, ev: Mapping[str, Any]) -> None:
    con.print(_kv_table("Evaluation", _evaluation_rows(ev)))
    if ev.get("failure"):
        con.print(f"infeasible: {ev['failure']}")


def _budget_fraction(m: int, p: int) -> float | None:
    return m / p if p else None


# ----------------------------------------------------------------------------- commands
def _version(value: bool) -> None:
    if value:
        from slackopt import __version__

        sys.stdout.write(f"slackopt {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Activation-memory planning for DNN training."""


@app.command()
@_guarded
def make(
    workload: Annotated[str, typer.Argument(help="Workload name (gpt2, bert, llama, vgg...).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Instance file to write.")],
    gpu: Annotated[str, typer.Option(help="GPU preset.")] = "a100",
    link: Annotated[str | None, typer.Option(help="Host-link preset (default: the GPU's).")
                    ] = None,
    seq: Annotated[int | None, typer.Option(min=1, help="Sequence length.")] = None,
    batch: Annotated[int | None, typer.Option(min=1, help="Batch size.")] = None,
    layers: Annotated[int | None, typer.Option(min=1, help="Number of blocks.")] = None,
    param: ParamOpt = None,
    force: ForceOpt = False,
    json_output: JsonOpt = False,
) -> dict[str, Any] | None:
    """Generate a workload instance and write it to an instance file."""
    from slackopt import workloads
    from slackopt.io import OutputExistsError, save_instance

    if output.exists() and not force:
        raise OutputExistsError(f"{output}: file exists; pass --force to replace it, or "
                                "choose another path")
    params = _parse_params(param)
    try:
        inst = workloads.make(workload, gpu=gpu, link=link, seq=seq, batch=batch,
                              layers=layers, **params)
    except KeyError as e:
        _err(str(e.args[0]) if e.args else f"unknown name in: {workload}")
        raise typer.Exit(2) from None
    except (TypeError, ValueError) as e:
        if isinstance(e, SlackoptError):
            raise
        _err(f"workload '{workload}': {e}")
        raise typer.Exit(2) from None
    path = save_instance(inst, output, overwrite=force)
    doc = {"path": str(path), **inst.summary()}
    if json_output:
        return doc
    con = _console()
    con.print(f"wrote {path}")
    con.print(_kv_table(f"Instance {inst.name}", _summary_rows(inst.summary()),
                        _SUMMARY_LABELS))
    return None


_SUMMARY_LABELS = {
    "ops": "scheduled ops", "saved_tensors": "saved tensors",
    "rebuildable_tensors": "rebuildable saved tensors (c < inf)",
    "intensity": "intensity I", "hideable_fraction": "hideable fraction f",
    "forward_link_budget_bytes": "forward link budget",
    "saved_bytes": "saved bytes A", "peak_bytes": "keep-all peak P",
    "forward_time_s": "forward time T_F", "ideal_time_s": "ideal step T*",
    "link_bytes_per_s": "link bandwidth W",
}


def _summary_rows(s: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in s.items() if k != "name"}


@app.command()
@_guarded
def describe(
    instance: Annotated[Path, typer.Argument(help="Instance file.")],
    json_output: JsonOpt = False,
) -> dict[str, Any] | None:
    """Sizes, times and link budget of an instance (A, P, T_F, T*, I, f, ...)."""
    from slackopt.io import load_instance

    inst = load_instance(instance)
    from slackopt import linkbudget

    summary = inst.summary()
    report = dict(linkbudget.report(inst))
    cats: dict[str, dict[str, int]] = {}
    for cat, size in zip(inst.saved_categories, inst.s.tolist(), strict=True):
        c = cats.setdefault(cat, {"count": 0, "bytes": 0})
        c["count"] += 1
        c["bytes"] += int(size)
    cats = dict(sorted(cats.items(), key=lambda kv: -kv[1]["bytes"]))
    rebuildable = int(np.isfinite(inst.c).sum())
    doc = {**summary, "path": str(instance), "rebuildable_tensors": rebuildable,
           "link_budget": report, "saved_by_category": cats}
    if json_output:
        return doc
    con = _console()
    rows = {**_summary_rows(summary), "rebuildable_tensors": rebuildable}
    con.print(_kv_table(f"Instance {inst.name}", rows, _SUMMARY_LABELS))
    shown = {*summary, "A", "P", "T_F", "T*", "T_star"}
    extra = {k: v for k, v in report.items() if k not in shown}
    if extra:
        con.print(_kv_table("Link budget", extra, _SUMMARY_LABELS))
    t = Table(title="Saved tensors by category", title_justify="left")
    for col, just in (("category", "left"), ("tensors", "right"), ("bytes", "right"),
                      ("share of A", "right")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for cat, c in cats.items():
        t.add_row(cat, str(c["count"]), _fmt_bytes(c["bytes"]),
                  f"{c['bytes'] / inst.A:.1%}" if inst.A else "-")
    con.print(t)
    return None


@app.command()
@_guarded
def solve(
    instance: Annotated[Path, typer.Argument(help="Instance file.")],
    solver: Annotated[str, typer.Option("--solver", "-s", help="Registered solver name.")],
    budget: Annotated[str, typer.Option("--budget", "-b",
                                        help="Memory budget: fraction of P (0.5) or a size "
                                        "(11.5GB).")],
    time_limit: Annotated[float | None, typer.Option("--time-limit", min=0,
                                                     help="Solver time limit (s).")] = None,
    seed: Annotated[int | None, typer.Option(help="Random seed.")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o",
                                                help="Plan file to write.")] = None,
    param: ParamOpt = None,
    force: ForceOpt = False,
    json_output: JsonOpt = False,
) -> dict[str, Any] | None:
    """Plan an instance under a budget with one solver and evaluate the plan."""
    from slackopt.instance import budget_bytes
    from slackopt.io import OutputExistsError, load_instance, save_plan
    from slackopt.solver import solve as run_solver

    inst = load_instance(instance)
    m = budget_bytes(inst, budget)
    if output is not None and output.exists() and not force:
        raise OutputExistsError(f"{output}: file exists; pass --force to replace it, or "
                                "choose another path")
    params = _parse_params(param)
    res = run_solver(inst, solver, m, time_limit_s=time_limit, seed=seed, **params)
    plan, ev = res.plan, res.evaluation
    min_b = res.info.get("min_budget_bytes") if res.status == "infeasible" else None
    plan_file = None
    if output is not None and plan is not None:
        meta = {"solver": res.solver, "params": res.params, "status": res.status,
                "budget_bytes": m, "seed": res.seed, "planning_time_s": res.planning_time_s,
                "step_time_s": ev.step_time_s if ev else None,
                "feasible": ev.feasible if ev else None}
        plan_file = str(save_plan(plan, output, inst, overwrite=force, meta=_plain(meta)))
    elif output is not None:
        _err(f"solver '{res.solver}' returned no plan (status {res.status}); "
             f"{output} not written")
    doc = {
        "instance": inst.name, "solver": res.solver, "params": res.params,
        "status": res.status, "budget_bytes": m, "budget_fraction": _budget_fraction(m, inst.P),
        "peak_bytes_keep_all": inst.P, "planning_time_s": res.planning_time_s,
        "objective_s": res.objective_s, "lower_bound_s": res.lower_bound_s, "seed": res.seed,
        "decisions": plan.counts() if plan is not None else None,
        "bytes_by_decision": plan.bytes_by_decision(inst) if plan is not None else None,
        "evaluation": ev.to_dict() if ev is not None else None,
        "min_budget_bytes": min_b,
        "min_budget_fraction": (_budget_fraction(int(min_b), inst.P)
                                if isinstance(min_b, (int, float)) else None),
        "info": res.info, "plan_file": plan_file,
    }
    if json_output:
        return doc
    con = _console()
    head = {"status": res.status, "budget_bytes": m, "budget (fraction of P)":
            doc["budget_fraction"], "planning_time_s": res.planning_time_s,
            "objective_s": res.objective_s, "lower_bound_s": res.lower_bound_s}
    con.print(_kv_table(f"{res.solver} on {inst.name}", head))
    if ev is not None:
        _print_evaluation(con, ev.to_dict())
    if plan is not None:
        con.print(_decision_table(plan.counts(), plan.bytes_by_decision(inst), inst.A))
    if res.status == "infeasible":
        if isinstance(min_b, (int, float)):
            frac = doc["min_budget_fraction"]
            con.print(f"smallest budget this solver reaches: {_fmt_bytes(min_b)}"
                      + (f" ({frac:.3f} of P)" if frac is not None else ""))
        else:
            con.print("smallest budget this solver reaches: unknown")
    info = {str(k): _brief(v) for k, v in res.info.items() if k != "min_budget_bytes"}
    if info:
        con.print(_kv_table("Solver info", info))
    if plan_file:
        con.print(f"wrote {plan_file}")
    return None


@app.command()
@_guarded
def simulate(
    instance: Annotated[Path, typer.Argument(help="Instance file.")],
    plan: Annotated[Path, typer.Argument(help="Plan file.")],
    budget: Annotated[str, typer.Option("--budget", "-b",
                                        help="Memory budget: fraction of P (0.5) or a size "
                                        "(11.5GB); default P.")] = "1.0",
    json_output: JsonOpt = False,
) -> dict[str, Any] | None:
    """Evaluate a plan file on an instance under a budget."""
    from slackopt.instance import budget_bytes
    from slackopt.io import load_instance, load_plan
    from slackopt.simulate import simulate as run_simulation

    inst = load_instance(instance)
    p = load_plan(plan, inst)
    m = budget_bytes(inst, budget)
    ev = run_simulation(inst, p, m)
    doc = {"instance": inst.name, "plan_file": str(plan), "policy": p.policy,
           "budget_bytes": m, "budget_fraction": _budget_fraction(m, inst.P),
           "decisions": p.counts(), "bytes_by_decision": p.bytes_by_decision(inst),
           "evaluation": ev.to_dict()}
    if json_output:
        return doc
    con = _console()
    con.print(f"{plan} on {inst.name}, budget {_fmt_bytes(m)}"
              + (f" ({doc['budget_fraction']:.3f} of P)" if inst.P else ""))
    _print_evaluation(con, ev.to_dict())
    con.print(_decision_table(p.counts(), p.bytes_by_decision(inst), inst.A))
    return None


@app.command("solvers")
@_guarded
def list_solvers(json_output: JsonOpt = False) -> dict[str, Any] | None:
    """The registered solvers, one line each."""
    from slackopt.solver import registered_solvers

    rows = []
    for name, ep in registered_solvers().items():
        row: dict[str, Any] = {"name": name, "target": ep.value, "summary": None, "error": None}
        try:
            obj = ep.load()
            doc = inspect.getdoc(obj) or ""
            row["summary"] = doc.strip().splitlines()[0] if doc.strip() else ""
        except Exception as e:  # a broken solver must not hide the others
            row["error"] = f"cannot load: {type(e).__name__}: {e}"
        rows.append(row)
    if json_output:
        return {"solvers": rows}
    con = _console()
    t = Table(title="Registered solvers", title_justify="left")
    t.add_column("name")
    t.add_column("description")
    for r in rows:
        t.add_row(r["name"], r["summary"] if r["error"] is None else r["error"])
    con.print(t)
    if not rows:
        con.print("no solvers registered (is slackopt installed? pip install -e .)")
    return None


# ----------------------------------------------------------------------------- entry
def main(argv: list[str] | None = None) -> int:
    """Run the ``slackopt`` command.

    Args:
        argv: the arguments (without the program name); None reads ``sys.argv``.

    Returns:
        The exit status: 0 success, 2 bad input, 1 internal error.
    """
    try:
        rv = app(args=argv, prog_name="slackopt", standalone_mode=False)
    except typer.TyperException as e:  # usage errors (bad option, missing argument, ...)
        show = getattr(e, "show", None)
        if callable(show):
            show(file=sys.stderr)
        else:  # pragma: no cover - every typer usage error has show()
            _err(e.format_message())
        return 2
    except typer.Abort:
        sys.stderr.write("slackopt: aborted\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("slackopt: interrupted\n")
        return 130
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":
    sys.exit(main())
