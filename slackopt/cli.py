"""The ``slackopt`` command.

Commands (see DESIGN.md, "Command line"): ``make``, ``describe``, ``solve``, ``simulate``,
``solvers``, ``compare``, ``bench``. Every command takes ``--json``: stdout then holds
exactly one JSON document and nothing else (anything a solver prints goes to stderr).
Exit status: 0 on success (an infeasible budget is an answer, not an error), 2 for bad
input (a :class:`~slackopt.errors.SlackoptError`, an unknown name, a usage error), 1 for an
internal error (and for ``bench`` after it reported a bound violation, a bug), 130 after
Ctrl-C (with one line saying how to go on; a sweep with a ``--store`` resumes). Errors are
one message on stderr, never a traceback; set ``SLACKOPT_DEBUG=1`` to see the traceback of
an internal error.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
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

from slackopt.errors import SlackoptError, interrupt_cause
from slackopt.hardware import GPUS, LINKS
from slackopt.workloads._builder import MAX_LAYERS, MAX_PARAM

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


def _check_time_limit(value: float | None) -> float | None:
    """--time-limit of every command: the one rule of
    :func:`slackopt.solverbase.check_time_limit` (None or finite seconds >= 0)."""
    from slackopt.solverbase import check_time_limit

    try:
        return check_time_limit(value)
    except SlackoptError as e:
        raise typer.BadParameter(str(e), param_hint="'--time-limit'") from None


def _time_limit_opt(help_text: str) -> Any:
    return typer.Option("--time-limit", callback=_check_time_limit,
                        help=f"{help_text} Finite; leave out for no limit.")


def _time_limits(values: list[str] | None) -> dict[str, float | None] | None:
    """--time-limit-for NAME=S (repeatable) as {solver name: seconds}; "none" for no limit.

    Raises:
        typer.BadParameter: a value that is not NAME=SECONDS, or a bad limit.
    """
    from slackopt.solverbase import check_time_limit

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
            out[name] = check_time_limit(lim)
        except SlackoptError:
            raise typer.BadParameter(f"'{v}': the limit must be a finite number of seconds "
                                     f">= 0, or none for no limit (e.g. {name}=300)",
                                     param_hint="'--time-limit-for'") from None
    return out


def _time_limits_opt() -> Any:
    return typer.Option(
        "--time-limit-for",
        help="NAME=SECONDS: a time limit for the runs of one solver (by its name), replacing "
        "--time-limit for them; repeat it for more solvers ('none': no limit).")


HOST_MEMORY_FORMS = ("a size with a unit (480GB, 240GiB; at most 2**62 B) or 'gpu' (the "
                     "GPU's own host memory: Grace's on gh200, gb200)")


def _check_host_memory(value: str | None) -> int | str | None:
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
    callback=_check_host_memory,
    help="Host pinned-memory limit: a size (480GB), or 'gpu' for the GPU's own host memory "
         "(Grace's on gh200, gb200). Default: unlimited.")]


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


INTERRUPTED_EXIT = 130
"""Exit status after Ctrl-C (128 + SIGINT, as shells report it)."""
_RERUN = "nothing was kept; run the same command again to start over"


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with the line that tells the user how to go on (``hint``)."""

    def __init__(self, hint: str) -> None:
        super().__init__(hint)
        self.hint = hint


def _interrupted(e: BaseException) -> None:
    """Print the one-line interrupt message and exit with :data:`INTERRUPTED_EXIT`."""
    hint = e.hint if isinstance(e, Interrupted) else _RERUN
    sys.stderr.write(f"slackopt: interrupted; {hint}\n")
    sys.stderr.flush()
    _REPORTED.append(hint)
    raise typer.Exit(INTERRUPTED_EXIT) from None


EXIT_STATUS_KEY = "_exit_status"
"""A --json command's document may carry this key: the exit status after the document is
printed (``slackopt bench`` exits 1 after reporting a bound violation)."""
_REPORTED: list[str] = []
"""Interrupt lines already written (main() writes one if typer stopped the command first)."""


def _guarded(fn: F) -> F:
    """Turn user errors into exit 2 and internal ones into exit 1, message on stderr."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            if kwargs.get("json_output"):
                with _stdout_to_stderr():
                    doc = fn(*args, **kwargs)
                status = doc.pop(EXIT_STATUS_KEY, 0) if isinstance(doc, dict) else 0
                if doc is not None:
                    _emit_json(doc)
                if status:
                    raise typer.Exit(status)
                return None
            return fn(*args, **kwargs)
        except (typer.Exit, typer.TyperException, typer.Abort):
            raise
        except SlackoptError as e:
            _err(str(e))
            raise typer.Exit(2) from None
        except KeyboardInterrupt as e:
            _interrupted(e)
        except Exception as e:
            if isinstance(interrupt_cause(e), KeyboardInterrupt):
                _interrupted(e)  # Ctrl-C inside compiled code arrives as a SystemError
            if os.environ.get("SLACKOPT_DEBUG", "") not in ("", "0"):
                traceback.print_exc(file=sys.stderr)
            msg = str(e) or "(no message)"
            _err(f"internal error: {type(e).__name__}: {msg}\n(this is a bug in slackopt or "
                 "a solver; rerun with SLACKOPT_DEBUG=1 to see the traceback)")
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


SOLVE_OPTIONS = {"time_limit_s": "--time-limit", "seed": "--seed"}
"""Solver arguments that solve() takes per call: set with these options, not --param."""


def _parse_params(items: list[str] | None,
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


def _fmt_bytes(b: float | None) -> str:
    if b is None:
        return "-"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(b) >= scale:
            return f"{b / scale:.4g} {unit}"
    return f"{int(b)} B"


def _min_budget_line(info: dict, min_b: float | None, frac: float | None) -> str:
    """The line an infeasible answer prints about the smallest budget, in the words its
    ``info["min_budget_basis"]`` allows (slackopt.result.MIN_BUDGET_BASES)."""
    if not isinstance(min_b, (int, float)):
        return "smallest budget this solver reaches: unknown"
    at = _fmt_bytes(min_b) + (f" ({frac:.3f} of P)" if frac is not None else "")
    basis = info.get("min_budget_basis", "solver")
    if basis == "bisection":
        return (f"this solver returns a plan that runs at {at} (bisection between the budget "
                "asked for and P; it may also reach smaller budgets)")
    if basis == "best_plan_peak":
        return (f"the best plan found runs at {at}, its peak; smaller budgets were not "
                "searched")
    if basis == "proven":
        return f"smallest budget any plan runs at: {at} (proven: none runs below it)"
    if basis == "found":
        low = info.get("min_budget_lower_bytes")
        return (f"smallest budget found where a plan runs: {at}"
                + (f"; none runs below {_fmt_bytes(low)} (proven)"
                   if isinstance(low, (int, float)) else ""))
    return f"smallest budget this solver reaches: {at}"


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
        if key.endswith("_per_s"):
            return f"{v:,.4g}/s"
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


def _evaluation_doc(ev: Any) -> dict[str, Any]:
    """An Evaluation as a JSON-ready dict; an infeasible plan has no step time (None) and
    throughput 0 (the time at which it failed is in ``failure``)."""
    d = ev.to_dict()
    if not d.get("feasible"):
        d["step_time_s"] = None
        d["throughput"] = 0.0
    return d


def _print_evaluation(con: Console, ev: Mapping[str, Any]) -> None:
    con.print(_kv_table("Evaluation", _evaluation_rows(ev)))
    if ev.get("failure"):
        con.print(f"infeasible: {ev['failure']}")


def _budget_fraction(m: int, p: int) -> float | None:
    return m / p if p else None


# ----------------------------------------------------------------------------- commands
def _workload_names() -> list[str]:
    from slackopt.workloads import WORKLOADS

    return list(WORKLOADS)


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
                              layers=layers, host_memory_bytes=host_memory, **params)
    except KeyError as e:
        _err(str(e.args[0]) if e.args else f"unknown name in: {workload}")
        raise typer.Exit(2) from None
    except (TypeError, ValueError) as e:
        if isinstance(e, workloads.WorkloadError):
            aliases = workloads.WORKLOADS[workload].aliases
            given = {"seq": seq, "batch": batch, "layers": layers}
            named = [f"--{k} sets '{aliases[k]}'" for k, v in given.items()
                     if v is not None and aliases.get(k, k) != k]
            if named:  # the generator's message names its own parameter
                raise workloads.WorkloadError(f"{e} ({'; '.join(named)})") from None
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
    "link_d2h_bytes_per_s": "link D2H bandwidth W_d2h",
    "link_h2d_bytes_per_s": "link H2D bandwidth W_h2d",
    "link_bytes_per_s": "W of the link budget (D2H)",
    "saved_storages": "saved storages (views merged)",
    "rng_capture": "RNG capture", "host_memory_bytes": "host pinned-memory limit",
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
    low = inst.lowered  # views merged into their storages: bytes counted once
    report = dict(linkbudget.report(low))
    cats: dict[str, dict[str, int]] = {}
    for cat, size in zip(low.saved_categories, low.s.tolist(), strict=True):
        c = cats.setdefault(cat, {"count": 0, "bytes": 0})
        c["count"] += 1
        c["bytes"] += int(size)
    cats = dict(sorted(cats.items(), key=lambda kv: -kv[1]["bytes"]))
    rebuildable = int(np.isfinite(low.c).sum())
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
    solver: Annotated[str, typer.Option("--solver", "-s", help="Registered solver name, or "
                                        "path/to/file.py:ClassName.")],
    budget: Annotated[str, typer.Option("--budget", "-b",
                                        help=f"Memory budget: {BUDGET_HELP}.")],
    time_limit: Annotated[float | None, _time_limit_opt("Solver time limit (s).")] = None,
    seed: Annotated[int | None, typer.Option(help="Random seed.")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o",
                                                help="Plan file to write.")] = None,
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
    from slackopt.io import OutputExistsError, load_instance, load_plan, save_plan
    from slackopt.solver import solve as run_solver

    inst = load_instance(instance)
    m = budget_bytes(inst, budget)
    if output is not None and output.exists() and not force:
        raise OutputExistsError(f"{output}: file exists; pass --force to replace it, or "
                                "choose another path")
    params = _parse_params(param, SOLVE_OPTIONS)
    start = load_plan(start_plan, inst) if start_plan is not None else None
    res = run_solver(inst, solver, m, time_limit_s=time_limit, seed=seed, start_plan=start,
                     **params)
    plan, ev = res.plan, res.evaluation
    min_b = res.info.get("min_budget_bytes") if res.status == "infeasible" else None
    plan_file = None
    if output is not None and plan is not None:
        meta = {"solver": res.solver, "params": res.params, "status": res.status,
                "budget_bytes": m, "seed": res.seed, "planning_time_s": res.planning_time_s,
                "step_time_s": ev.step_time_s if ev is not None and ev.feasible else None,
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
        "evaluation": _evaluation_doc(ev) if ev is not None else None,
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
        _print_evaluation(con, doc["evaluation"])
    if plan is not None:
        con.print(_decision_table(plan.counts(), plan.bytes_by_decision(inst), inst.A))
    if res.status == "infeasible":
        con.print(_min_budget_line(res.info, min_b, doc["min_budget_fraction"]))
    note = res.info.get("note")
    if isinstance(note, str) and note:
        con.print(f"note: {note}")
    info = {str(k): _brief(v) for k, v in res.info.items()
            if k not in ("min_budget_bytes", "min_budget_basis", "note")}
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
    budget: Annotated[str | None, typer.Option(
        "--budget", "-b", help=f"Memory budget: {BUDGET_HELP}. Default: the budget the "
        "plan file records (solve -o writes it), else P.")] = None,
    best_schedule: Annotated[bool, typer.Option(
        "--best-schedule", help="Also bracket the fastest schedule of the plan's "
        "decisions (CP-SAT schedule, verified; fixed-decision relaxation) and split the "
        "step time into what the decisions and the runtime cost.")] = False,
    time_limit: Annotated[float | None, typer.Option(
        "--time-limit", callback=_check_time_limit, help="With --best-schedule: finite "
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
    from slackopt.instance import budget_bytes
    from slackopt.io import load_instance, read_plan_file
    from slackopt.simulate import simulate as run_simulation

    inst = load_instance(instance)
    pf = read_plan_file(plan, inst)
    p, made_for = pf.plan, pf.instance
    if made_for and made_for != inst.name:
        sys.stderr.write(f"slackopt: note: {plan} was made for instance '{made_for}', not "
                         f"'{inst.name}'; its tensor names match, so it is simulated as is\n")
    if budget is not None:
        m, source = budget_bytes(inst, budget), "option"
    elif pf.budget_bytes is not None:
        m, source = pf.budget_bytes, "plan_file"
    else:
        m, source = int(inst.P), "default_P"
    frac = _budget_fraction(m, inst.P)
    said = {"option": "from --budget", "plan_file": "recorded in the plan file",
            "default_P": "P, since the plan file records no budget"}[source]
    sys.stderr.write(f"slackopt: note: budget {_fmt_bytes(m)}"
                     + (f" ({frac:.3f} of P)" if frac is not None else "")
                     + f", {said}" + ("" if source == "option" else
                                      "; give --budget to choose another") + "\n")
    ev = run_simulation(inst, p, m)
    doc = {"instance": inst.name, "plan_instance": made_for, "plan_file": str(plan),
           "policy": p.policy, "budget_bytes": m, "budget_fraction": frac,
           "budget_source": source, "plan_budget_bytes": pf.budget_bytes,
           "decisions": p.counts(), "bytes_by_decision": p.bytes_by_decision(inst),
           "evaluation": _evaluation_doc(ev)}
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
    con = _console()
    con.print(f"{plan} on {inst.name}, budget {_fmt_bytes(m)}"
              + (f" ({frac:.3f} of P)" if frac is not None else "") + f", {said}")
    _print_evaluation(con, doc["evaluation"])
    con.print(_decision_table(p.counts(), p.bytes_by_decision(inst), inst.A))
    if best_schedule:
        g = doc["runtime_gap"]
        keys = ("runtime_step_s", "best_schedule_s", "best_schedule_lower_s",
                "instance_lower_bound_s", "lost_to_runtime_min_s", "lost_to_runtime_max_s",
                "lost_to_decisions_max_s", "schedule_source", "cpsat_status")
        con.print(_kv_table("Runtime gap (runtime step U; best schedule of these "
                            "decisions in [lower, best_schedule])",
                            {k: g[k] for k in keys}))
    return None


def _plain_summary(doc: str) -> str:
    """The first paragraph of a docstring as one line of plain text: reStructuredText
    literals (````x````), roles (``:class:`~a.B``` -> B, ``:func:`text <target>``` ->
    text), emphasis and the paragraph's line breaks removed."""
    import re

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
            row["summary"] = _plain_summary(inspect.getdoc(obj) or "")
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


# ----------------------------------------------------------------------------- compare
def _split_list(text: str, what: str, opt: str) -> list[str]:
    items = [x.strip() for x in text.split(",")]
    if not text.strip() or any(not x for x in items):
        raise typer.BadParameter(f"'{text}' is not a comma-separated list of {what}",
                                 param_hint=f"'{opt}'")
    return items


def _solver_specs(text: str) -> list[Any]:
    """--solvers (:func:`slackopt.compare.grid.parse_solvers`), its errors as the option's."""
    from slackopt.compare.grid import parse_solvers

    try:
        return parse_solvers(text)
    except SlackoptError as e:
        raise typer.BadParameter(str(e), param_hint="'--solvers'") from None


def _records(df: Any) -> list[dict[str, Any]]:
    """JSON-ready rows of a DataFrame (NaN and NA as None)."""
    plain = df.astype(object).where(df.notna(), None)
    return [_plain(r) for r in plain.to_dict("records")]


def _pct(x: Any, digits: int = 1) -> str:
    return "-" if x is None or x != x else f"{float(x):.{digits}%}"


def _note_created(folder: Path | None, opt: str) -> None:
    """Say on stderr that `folder`, missing before, was created for `opt`'s file."""
    if folder is not None and folder.is_dir():
        sys.stderr.write(f"slackopt: note: created the folder {folder} for {opt}\n")


def _sweep_interrupted(store: Path | None) -> Interrupted:
    """The interrupt of a sweep (compare, bench): how many runs the store kept, and how to
    go on."""
    if store is not None:
        from slackopt.compare import ResultStore

        try:
            with ResultStore(store) as st:
                n: Any = len(st.keys())
        except SlackoptError:
            n = "its"
        runs = "finished run" if n == 1 else "finished runs"
        return Interrupted(f"{store} holds {n} {runs}: run the same command again to do "
                           "only the missing ones")
    return Interrupted("finished runs were not kept (pass --store FILE to resume later)")


def _check_results_out(output: Path, store: Path | None, force: bool) -> None:
    """--out of a sweep: a results suffix, not the store, not an existing file unless
    --force."""
    from slackopt.compare import RESULT_SUFFIXES
    from slackopt.errors import FileFormatError
    from slackopt.io import OutputExistsError

    if output.suffix.lower() not in RESULT_SUFFIXES:
        raise FileFormatError(output, "", f"unknown results format "
                              f"'{output.suffix or '(none)'}'",
                              f"end the file name with one of {', '.join(RESULT_SUFFIXES)}")
    if output.exists() and not force:
        raise OutputExistsError(f"{output}: file exists; pass --force to replace it, or "
                                "choose another path")
    if store is not None and output.resolve() == store.resolve():
        raise FileFormatError(output, "", "is also the --store file",
                              "write the table to another file")
    if output.suffix.lower() == ".parquet" and importlib.util.find_spec("pyarrow") is None:
        raise FileFormatError(output, "", "Parquet needs pyarrow, which is not installed",
                              "pip install pyarrow, or write .csv, .json or .sqlite")
    above = output.parent
    while not above.exists() and above != above.parent:
        above = above.parent
    if above.exists() and not above.is_dir():
        raise FileFormatError(output, "", f"cannot be written: {above} is a file, not a "
                              "folder", "choose another path for --out")


@app.command("compare")
@_guarded
def compare_cmd(
    instances: Annotated[list[Path], typer.Argument(help="Instance files.")],
    solvers: Annotated[str, typer.Option(
        "--solvers", help="Comma-separated solver names (or file.py:Class), 'all' for every "
        "registered solver, a suite ('production'), or a JSON list of names (suites "
        "included) and [name, {params}] pairs.")],
    budgets: Annotated[str, typer.Option(
        "--budgets", help="Comma-separated budgets, each a fraction of P <= 1 (0.9,0.5), a "
        "percentage (50%), a multiple of P (1.2P) or a size (11.5GB).")],
    seeds: Annotated[str | None, typer.Option(
        "--seeds", help="Comma-separated seeds (default: none).")] = None,
    output: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Write the table: .csv, .json, .parquet or .sqlite (a missing "
        "folder is created, and stderr says so).")] = None,
    store: Annotated[Path | None, typer.Option(
        "--store", help="SQLite store of finished runs: a rerun resumes, doing only the "
        "missing runs and those that ended in error (an interrupted run is never stored). "
        "A missing folder is created, and stderr says so.")
    ] = None,
    workers: Annotated[int, typer.Option(
        "--workers", min=0, help="Local worker processes (0: one per CPU).")] = 1,
    scheduler: Annotated[str | None, typer.Option(
        "--scheduler", help="Dask scheduler address tcp://HOST:PORT (needs the [dist] "
        "extra).")] = None,
    time_limit: Annotated[float | None, _time_limit_opt(
        "Time limit per solver run (s).")] = None,
    time_limits: Annotated[list[str] | None, _time_limits_opt()] = None,
    references: Annotated[Path | None, typer.Option(
        "--references", help="references.json with best known bounds and steps.")] = None,
    force: ForceOpt = False,
    json_output: JsonOpt = False,
) -> dict[str, Any] | None:
    """Run solvers x budgets x instances (x seeds); one row per run with gaps."""
    from slackopt.compare import compare, write_results
    from slackopt.solver import solver_label

    specs = _solver_specs(solvers)
    budget_list = _split_list(budgets, "budgets", "--budgets")
    seed_list: list[int | None] = [None]
    if seeds is not None:
        try:
            seed_list = [int(x) for x in _split_list(seeds, "integer seeds", "--seeds")]
        except ValueError:
            raise typer.BadParameter(f"'{seeds}' is not a comma-separated list of integers",
                                     param_hint="'--seeds'") from None
    if output is not None:
        _check_results_out(output, store, force)
    new_dir = store.parent if store is not None and not store.parent.exists() else None
    try:
        df = compare(instances, specs, budget_list, seeds=seed_list, time_limit_s=time_limit,
                     time_limits=_time_limits(time_limits), store=store, workers=workers,
                     scheduler=scheduler, progress=True, references=references)
    except KeyboardInterrupt:
        raise _sweep_interrupted(store) from None
    finally:
        _note_created(new_dir, "--store")
    written = None
    if output is not None:
        out_dir = output.parent if not output.parent.exists() else None
        written = str(write_results(df, output, overwrite=force))
        _note_created(out_dir, "--out")
    counts = {"runs": len(df), "runs_from_store": int(df.attrs.get("runs_from_store", 0)),
              "runs_now": int(df.attrs.get("runs_now", len(df)))}
    if json_output:
        return {"format": "slackopt-compare-results", "columns": list(df.columns),
                "rows": _records(df), "out": written, "store": str(store) if store else None,
                **counts}
    con = _console()
    if not con.is_terminal:
        con.width = max(con.width, 160)
    show_seed = df["seed"].notna().any()
    for name, g in df.groupby("instance", sort=False):
        r0 = g.iloc[0]
        t = Table(title=f"{name}: P = {_fmt_bytes(r0['P_bytes'])}, ideal step T* = "
                  f"{_fmt_time(r0['ideal_time_s'])}, link can hide f = "
                  f"{r0['hideable_fraction']:.1%}", title_justify="left")
        cols = ["budget", "solver"] + (["seed"] if show_seed else []) + [
            "status", "step", "throughput", "planning", "gap to bound", "bound from",
            "gap to best"]
        for c in cols:
            t.add_column(c, justify="left" if c in ("solver", "status", "bound from")
                         else "right",
                         no_wrap=c != "solver")
        for r in g.itertuples(index=False):
            solver = solver_label(r.solver, r.params)
            row = [f"{r.budget_fraction:.3g} P" if r.budget_fraction == r.budget_fraction
                   else _fmt_bytes(r.budget_bytes), solver]
            if show_seed:
                row.append("-" if r.seed is None or r.seed != r.seed else str(r.seed))
            row += [r.status, _fmt_time(r.step_time_s) if r.feasible else "-",
                    _pct(r.throughput) if r.feasible else "-", _fmt_time(r.planning_time_s),
                    _pct(r.gap_to_bound, 2),
                    r.best_bound_source if r.gap_to_bound == r.gap_to_bound else "-",
                    _pct(r.gap_to_best, 2)]
            t.add_row(*[str(x) for x in row])
        con.print(t)
    bad = df[df["status"].isin(["error", "timeout"])]
    for r in bad.itertuples(index=False):
        con.print(f"{r.status}: {r.solver} on {r.instance} at {r.budget_fraction:.3g} P: "
                  f"{r.message}")
    con.print(f"{counts['runs']} runs: {counts['runs_now']} run now, "
              f"{counts['runs_from_store']} from the store"
              + (f" ({store})" if store else ""))
    if written:
        con.print(f"wrote {written}")
    return None


# ----------------------------------------------------------------------------- bench
@app.command("bench")
@_guarded
def bench_cmd(
    solvers: Annotated[str, typer.Option(
        "--solvers", help="Solvers, as for compare: names, 'all', a suite ('production') or "
        "a JSON list.")],
    suite: Annotated[str, typer.Option(
        "--suite", help="'bench' or 'shapes' (the repository's instances/bench/ or "
        "instances/shapes/manifest.json), a manifest.json, or a folder holding one.")
    ] = "bench",
    budgets: Annotated[str | None, typer.Option(
        "--budgets", help="Comma-separated budgets (default: those of the references "
        "file, else 0.1,0.3,0.5,0.7).")] = None,
    only: Annotated[str | None, typer.Option(
        "--only", help="Comma-separated instance files, names or globs of the suite.")
    ] = None,
    time_limit: Annotated[float | None, _time_limit_opt(
        "Time limit per solver run (s).")] = None,
    time_limits: Annotated[list[str] | None, _time_limits_opt()] = None,
    store: Annotated[Path | None, typer.Option(
        "--store", help="SQLite store of finished runs and their plans: a rerun resumes; "
        "a new best known plan is recorded from it.")] = None,
    workers: Annotated[int, typer.Option(
        "--workers", min=0, help="Local worker processes (0: one per CPU).")] = 1,
    scheduler: Annotated[str | None, typer.Option(
        "--scheduler", help="Dask scheduler address tcp://HOST:PORT (needs the [dist] "
        "extra).")] = None,
    output: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Write the per-row table (.csv, .json, .parquet or .sqlite), "
        "and beside it STEM.leaderboard.md and STEM.leaderboard.png.")] = None,
    references: Annotated[Path | None, typer.Option(
        "--references", help="The references file (default: references.json beside the "
        "manifest).")] = None,
    force: ForceOpt = False,
    json_output: JsonOpt = False,
) -> dict[str, Any] | None:
    """Run solvers on the benchmark suite; print the leaderboard against its references."""
    from slackopt import plot
    from slackopt.compare import write_results
    from slackopt.compare.bench import LEADERBOARD_HEADERS as HEADERS
    from slackopt.compare.bench import (
        leaderboard_cells,
        leaderboard_markdown,
        load_manifest,
        resolve_suite,
        run_bench,
    )
    from slackopt.compare.gaps import load_references
    from slackopt.errors import FileFormatError
    from slackopt.io import OutputExistsError

    specs = _solver_specs(solvers)
    budget_list = _split_list(budgets, "budgets", "--budgets") if budgets is not None else None
    extra: list[Path] = []
    if output is not None:
        _check_results_out(output, store, force)
        stem = output.with_suffix("")
        extra = [stem.with_name(stem.name + ".leaderboard.md"),
                 stem.with_name(stem.name + ".leaderboard.png")]
        for f in extra:
            if f.exists() and not force:
                raise OutputExistsError(f"{f}: file exists; pass --force to replace it, or "
                                        "choose another --out")
        st = load_manifest(resolve_suite(suite))
        refs = Path(references or st.references)
        reads = {p.resolve() for p in (st.manifest, refs, *(e.path for e in st.instances))}
        if refs.is_file():
            reads |= {(refs.parent / e["best_plan"]).resolve() for e in load_references(refs)
                      if e.get("best_plan")}
        for f in (output, *extra):
            if f.resolve() in reads:
                raise FileFormatError(f, "", "is a file this bench reads (the suite's "
                                      "manifest, references, their plans or an instance)",
                                      "write the results elsewhere with --out")
    new_dir = store.parent if store is not None and not store.parent.exists() else None
    try:
        res = run_bench(suite, specs, budgets=budget_list, time_limit_s=time_limit,
                        time_limits=_time_limits(time_limits), store=store, workers=workers,
                        scheduler=scheduler, references=references, only=only,
                        progress=True)
    except KeyboardInterrupt:
        raise _sweep_interrupted(store) from None
    finally:
        _note_created(new_dir, "--store")
    title = (f"Leaderboard: {len(res.suite.instances)} instances of {res.suite.manifest}, "
             f"{len(res.table)} runs; gaps against "
             + (f"the references {res.references}" if res.references else "T* and the rows' "
                "own bounds (no references file)"))
    written: list[str] = []
    if output is not None:
        out_dir = output.parent if not output.parent.exists() else None
        written.append(str(write_results(res.table, output, overwrite=force)))
        _note_created(out_dir, "--out")
        md = leaderboard_markdown(res.board, f"## {title}")
        for n in res.new_bests:
            md += (f"\nNew best known: {n['instance']} at {n['budget_fraction']:g} P: "
                   f"{n['solver']} runs in {n['step_time_s']!r} s (reference "
                   f"{n['reference_best_s']!r} s); record it with `{n['command']}`\n")
        for v in res.violations:
            md += f"\nBUG: {v['instance']} at {v['budget_fraction']:g} P: {v['problem']}\n"
        extra[0].write_text(md, encoding="utf-8")
        written.append(str(extra[0]))
        written.append(str(plot.save(plot.leaderboard(res.board), extra[1])))
    for v in res.violations:
        _err(f"BUG: {v['instance']} at {v['budget_fraction']:g} P: {v['problem']} (a bound "
             "or the evaluator is wrong; please report it)")
    status = 1 if res.violations else 0
    if json_output:
        return {"format": "slackopt-bench-results", "suite": str(res.suite.manifest),
                "references": str(res.references) if res.references else None,
                "leaderboard": _records(res.board), "new_bests": res.new_bests,
                "violations": res.violations, "written": written,
                "runs": len(res.table),
                "runs_from_store": int(res.table.attrs.get("runs_from_store", 0)),
                "runs_now": int(res.table.attrs.get("runs_now", len(res.table))),
                EXIT_STATUS_KEY: status}
    con = _console()
    if not con.is_terminal:
        con.width = max(con.width, 160)
    t = Table(title=title, title_justify="left")
    for k, h in enumerate(HEADERS):
        t.add_column(h, justify="left" if k == 0 else "right", no_wrap=k > 0)
    for row in leaderboard_cells(res.board):
        t.add_row(*row)
    con.print(t)
    for n in res.new_bests:
        ref = ("no plan" if n["reference_best_s"] is None
               else _fmt_time(n["reference_best_s"]))
        con.print(f"new best known: {n['instance']} at {n['budget_fraction']:g} P: "
                  f"{n['solver']} runs in {_fmt_time(n['step_time_s'])} (reference: {ref}); "
                  f"record it with:\n  {n['command']}")
    for f in written:
        con.print(f"wrote {f}")
    if status:
        raise typer.Exit(status)
    return None


# ----------------------------------------------------------------------------- plot
plot_app = typer.Typer(
    name="plot",
    help="Draw a figure; the -o suffix picks the format (.png, .svg or .pdf).",
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    add_completion=False,
    no_args_is_help=True,
)
app.add_typer(plot_app, name="plot")

FigOutOpt = Annotated[Path, typer.Option("--output", "-o",
                                         help="Figure file: .png, .svg or .pdf.")]
SolverListOpt = Annotated[
    list[str] | None,
    typer.Option("--solver", "-s", help="Registered solver name or path/to/file.py:Class; "
                 "repeat to compare (default: slackswap)."),
]
BudgetOpt = Annotated[str, typer.Option("--budget", "-b", help=f"Memory budget: {BUDGET_HELP}.")]
PlanOpt = Annotated[Path | None, typer.Option("--plan", help="Plot this plan file instead of "
                                              "solving.")]
SeedOpt = Annotated[int | None, typer.Option(help="Random seed passed to the solver.")]
LimitOpt = Annotated[float | None, _time_limit_opt("Solver time limit (s).")]


def _figure_path(output: Path, force: bool) -> None:
    from slackopt.errors import FileFormatError
    from slackopt.io import OutputExistsError
    from slackopt.plot import FORMATS

    if output.suffix.lower() not in FORMATS:
        raise FileFormatError(output, "", f"unknown figure format '{output.suffix or '(none)'}'",
                              f"end the file name with one of {', '.join(FORMATS)}")
    if output.exists() and not force:
        raise OutputExistsError(f"{output}: file exists; pass --force to replace it, or "
                                "choose another path")


def _plans_to_plot(instance: Path, solvers: list[str] | None, budget: str, plan: Path | None,
                   seed: int | None, time_limit: float | None, params: dict[str, Any]
                   ) -> tuple[Any, int, list[dict[str, Any]]]:
    """Load the instance; solve (or read the plan file); simulate each plan with a trace."""
    from slackopt.instance import budget_bytes
    from slackopt.io import load_instance, load_plan
    from slackopt.simulate import simulate as run_simulation
    from slackopt.solver import solve as run_solver

    inst = load_instance(instance)
    m = budget_bytes(inst, budget)
    runs: list[dict[str, Any]] = []
    if plan is not None:
        if solvers:
            raise typer.BadParameter("give --plan or --solver, not both", param_hint="'--plan'")
        p = load_plan(plan, inst)
        runs.append({"label": plan.stem, "solver": None, "status": None, "plan": p})
    else:
        for name in solvers or ["slackswap"]:
            res = run_solver(inst, name, m, time_limit_s=time_limit, seed=seed, **params)
            if res.plan is None:
                raise SlackoptError(f"solver '{name}' returned no plan (status {res.status}) "
                                    "for this budget; nothing to draw")
            runs.append({"label": name, "solver": name, "status": res.status,
                         "plan": res.plan})
    for r in runs:
        r["evaluation"] = run_simulation(inst, r["plan"], m, trace=True)
    return inst, m, runs


def _plot_doc(kind: str, written: Path, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "written": [str(written)], **extra}


def _run_docs(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"label": r["label"], "solver": r["solver"], "status": r["status"],
             "evaluation": _evaluation_doc(r["evaluation"])} for r in runs]


def _instance_plot(kind: str, instance: Path, solver: list[str] | None, budget: str,
                   plan: Path | None, seed: int | None, time_limit: float | None,
                   param: list[str] | None, output: Path, force: bool,
                   json_output: bool) -> dict[str, Any] | None:
    from slackopt import plot

    _figure_path(output, force)
    inst, m, runs = _plans_to_plot(instance, solver, budget, plan, seed, time_limit,
                                   _parse_params(param, SOLVE_OPTIONS))
    evs = {r["label"]: r["evaluation"] for r in runs}
    if kind == "timeline":
        fig = plot.timeline(evs if len(evs) > 1 else runs[0]["evaluation"], inst)
    elif kind == "memory":
        fig = plot.memory_profile(evs if len(evs) > 1 else runs[0]["evaluation"], inst)
    else:
        if len(runs) > 1:
            raise typer.BadParameter("a plan map draws one plan: give one --solver",
                                     param_hint="'--solver'")
        fig = plot.plan_map(inst, runs[0]["plan"], budget_bytes=m)
    path = plot.save(fig, output)
    doc = _plot_doc(kind, path, instance=inst.name, budget_bytes=m,
                    budget_fraction=_budget_fraction(m, inst.P), runs=_run_docs(runs))
    if json_output:
        return doc
    _console().print(f"wrote {path}")
    return None


@plot_app.command("timeline")
@_guarded
def plot_timeline(
    instance: Annotated[Path, typer.Argument(help="Instance file.")],
    output: FigOutOpt,
    solver: SolverListOpt = None,
    budget: BudgetOpt = "0.5",
    plan: PlanOpt = None,
    seed: SeedOpt = None,
    time_limit: LimitOpt = None,
    param: ParamOpt = None,
    force: ForceOpt = False,
    json_output: JsonOpt = False,
) -> dict[str, Any] | None:
    """Step timeline: compute, D2H and H2D lanes, stalls and rebuilds (paper Figure 5)."""
    return _instance_plot("timeline", instance, solver, budget, plan, seed, time_limit, param,
                          output, force, json_output)


@plot_app.command("memory")
@_guarded
def plot_memory(
    instance: Annotated[Path, typer.Argument(help="Instance file.")],
    output: FigOutOpt,
    solver: SolverListOpt = None,
    budget: BudgetOpt = "0.5",
    plan: PlanOpt = None,
    seed: SeedOpt = None,
    time_limit: LimitOpt = None,
    param: ParamOpt = None,
    force: ForceOpt = False,
    json_output: JsonOpt = False,
) -> dict[str, Any] | None:
    """Device memory in use over the step against the budget M."""
    return _instance_plot("memory", instance, solver, budget, plan, seed, time_limit, param,
                          output, force, json_output)


@plot_app.command("planmap")
@_guarded
def plot_planmap(
    instance: Annotated[Path, typer.Argument(help="Instance file.")],
    output: FigOutOpt,
    solver: SolverListOpt = None,
    budget: BudgetOpt = "0.5",
    plan: PlanOpt = None,
    seed: SeedOpt = None,
    time_limit: LimitOpt = None,
    param: ParamOpt = None,
    force: ForceOpt = False,
    json_output: JsonOpt = False,
) -> dict[str, Any] | None:
    """Decision per tensor category per layer (paper Figure 3)."""
    return _instance_plot("planmap", instance, solver, budget, plan, seed, time_limit, param,
                          output, force, json_output)


@plot_app.command("curves")
@_guarded
def plot_curves(
    results: Annotated[Path, typer.Argument(help="Table from slackopt compare --out "
                                            "(.csv, .json, .parquet, .sqlite) or a --store.")],
    output: FigOutOpt,
    instance: Annotated[list[str] | None, typer.Option(
        "--instance", help="Instance name to draw; repeatable (default: all).")] = None,
    force: ForceOpt = False,
    json_output: JsonOpt = False,
) -> dict[str, Any] | None:
    """Throughput against the memory budget per solver (paper Figure 4)."""
    from slackopt import plot
    from slackopt.compare import read_results

    _figure_path(output, force)
    df = read_results(results)
    path = plot.save(plot.throughput_vs_budget(df, instances=instance or None), output)
    if json_output:
        return _plot_doc("curves", path, rows=len(df))
    _console().print(f"wrote {path}")
    return None


@plot_app.command("quality")
@_guarded
def plot_quality(
    results: Annotated[Path, typer.Argument(help="Table from slackopt compare --out or a "
                                            "--store.")],
    output: FigOutOpt,
    quality: Annotated[str, typer.Option(
        help="gap_to_best, gap_to_bound or throughput.")] = "gap_to_best",
    force: ForceOpt = False,
    json_output: JsonOpt = False,
) -> dict[str, Any] | None:
    """Planning time against plan quality per solver."""
    from slackopt import plot
    from slackopt.compare import read_results

    _figure_path(output, force)
    df = read_results(results)
    path = plot.save(plot.planning_time_vs_quality(df, quality=quality), output)
    if json_output:
        return _plot_doc("quality", path, rows=len(df))
    _console().print(f"wrote {path}")
    return None


@plot_app.command("linkbudget")
@_guarded
def plot_linkbudget(
    output: FigOutOpt,
    workload: Annotated[list[str] | None, typer.Option(
        "--workload", help="Workload; repeatable (default: the paper's four).")] = None,
    gpu: Annotated[list[str] | None, typer.Option(
        "--gpu", help=f"GPU preset: {', '.join(GPUS)}; repeatable (default: titanx, v100, "
        "a100, h100).")] = None,
    force: ForceOpt = False,
    json_output: JsonOpt = False,
) -> dict[str, Any] | None:
    """Hideable fraction of saved activations per GPU generation (paper Figure 1)."""
    from slackopt import plot

    _figure_path(output, force)
    try:
        fig = plot.link_budget(workload or plot.PAPER_WORKLOADS, gpu or plot.GPU_GENERATIONS)
    except KeyError as e:
        _err(str(e.args[0]) if e.args else "unknown workload or GPU")
        raise typer.Exit(2) from None
    path = plot.save(fig, output)
    if json_output:
        return _plot_doc("linkbudget", path)
    _console().print(f"wrote {path}")
    return None


@plot_app.command("costs")
@_guarded
def plot_costs(
    instance: Annotated[Path, typer.Argument(help="Instance file.")],
    output: FigOutOpt,
    force: ForceOpt = False,
    json_output: JsonOpt = False,
) -> dict[str, Any] | None:
    """Recompute cost per byte of each saved tensor against an exposed copy (Figure 2)."""
    from slackopt import plot
    from slackopt.io import load_instance

    _figure_path(output, force)
    inst = load_instance(instance)
    path = plot.save(plot.cost_per_byte(inst), output)
    if json_output:
        return _plot_doc("costs", path, instance=inst.name)
    _console().print(f"wrote {path}")
    return None


# ----------------------------------------------------------------------------- profile
@app.command("profile")
@_guarded
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
    name: Annotated[str | None, typer.Option(help="Instance name.")] = None,
    param: ParamOpt = None,
    force: ForceOpt = False,
    json_output: JsonOpt = False,
) -> dict[str, Any] | None:
    """Profile one training step of your PyTorch model into an instance file (needs the
    [torch] extra)."""
    from slackopt.io import OutputExistsError, save_instance

    if output.exists() and not force:
        raise OutputExistsError(f"{output}: file exists; pass --force to replace it, or "
                                "choose another path")
    from slackopt.profile import profile_factory

    timing = timing or ("roofline" if fake else "measure")
    if timing == "roofline" and gpu is None:
        raise SlackoptError(f"{'--fake' if fake else '--timing roofline'} needs --gpu (a "
                            f"preset: {', '.join(GPUS)}; or a JSON file of peaks)")
    inst = profile_factory(target, input_shape or [], input_dtypes=input_dtype,
                           input_high=input_high, params=_parse_params(param), device=device,
                           seed=seed, fake=fake, timing=timing, gpu=gpu, link=link, name=name,
                           warmup=warmup, repeat=repeat, host_memory_bytes=host_memory)
    path = save_instance(inst, output, overwrite=force)
    keys = ("model_class", "input_shapes", "input_dtypes", "input_kwargs", "device", "fake",
            "timing", "gpu", "attn_implementation", "torch_version", "persistent_bytes",
            "recipes")
    doc = {"path": str(path), **inst.summary(), **{k: inst.meta.get(k) for k in keys}}
    if json_output:
        return doc
    con = _console()
    con.print(f"wrote {path}")
    con.print(_kv_table(f"Instance {inst.name} ({doc['model_class']}, {inst.meta['device']}"
                        f"{', fake' if fake else ''}, {timing})",
                        _summary_rows(inst.summary()), _SUMMARY_LABELS))
    con.print(_kv_table("Persistent (outside the budget)",
                        {f"{k}_bytes": v for k, v in inst.meta["persistent_bytes"].items()},
                        {f"{k}_bytes": k for k in inst.meta["persistent_bytes"]}))
    return None


# ----------------------------------------------------------------------------- reproduce
@app.command("reproduce", short_help="The paper's Figures 4, 5, 6a, 6b, GPU generations, "
             "Tables 2, 3.")
@_guarded
def reproduce_cmd(
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for report.md, the PNG "
                                      "figures and the CSV tables; one that already holds a "
                                      "report.md is refused unless --force.")],
    quick: Annotated[bool, typer.Option("--quick", help="Fewer budgets and a 5 s genetic "
                                        "search: a few times faster (docs/figures.md)."
                                        )] = False,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Local worker processes "
                                         "for the sweeps.")] = 2,
    tiny: Annotated[bool, typer.Option("--tiny", hidden=True,
                                       help="Scaled-down workloads (tests only).")] = False,
    force: ForceOpt = False,
    json_output: JsonOpt = False,
) -> dict[str, Any] | None:
    """Regenerate the paper's Figures 4, 5, 6a and 6b, the GPU generations (section 4.5),
    Tables 2 and 3 and the VGG-16 vDNN check, with a report that puts every number beside
    the paper's."""
    from slackopt.experiments.reproduce import reproduce
    from slackopt.io import OutputExistsError

    if (out / "report.md").exists() and not force:
        raise OutputExistsError(f"{out} already holds a reproduction (report.md); pass --force "
                                "to replace its files, or choose another --out")

    before = _file_stamps(out)
    try:
        res = reproduce(out, quick=quick, workers=workers, progress=sys.stderr.isatty(),
                        _tiny=tiny)
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt) or isinstance(interrupt_cause(e), KeyboardInterrupt):
            raise Interrupted(_kept_line(out, before)) from None
        raise
    doc = res.to_dict()
    if json_output:
        return doc
    con = _console()
    con.print(f"{doc['reproduced']} of {doc['compared']} numbers the paper states reproduce "
              f"within tolerance ({res.wall_s:.0f} s); see {res.files[0]}")
    for p in res.files[1:]:
        con.print(f"wrote {p}")
    return None


def _file_stamps(folder: Path) -> dict[str, int]:
    """{name: modification time (ns)} of the files directly in `folder` ({} if none)."""
    if not folder.is_dir():
        return {}
    return {p.name: p.stat().st_mtime_ns for p in folder.iterdir() if p.is_file()}


def _kept_line(folder: Path, before: Mapping[str, int]) -> str:
    """The interrupt line of an interrupted reproduce: the files of `folder` written since
    `before` (:func:`_file_stamps` at the start) stay there; a rerun writes them again."""
    written = sorted(n for n, t in _file_stamps(folder).items() if before.get(n) != t)
    if not written:
        return _RERUN
    return (f"kept {', '.join(written)} in {folder}, written before Ctrl-C (this run wrote "
            "no report.md); run the same command again to make them all")


# ----------------------------------------------------------------------------- entry
def _usage_line(e: Exception) -> str:
    """A usage error (bad option value, unknown option, missing argument) as the one line
    every other bad input gets: click's message (typer's copy of click), then where the help
    is."""
    fmt = getattr(e, "format_message", None)
    msg = " ".join((fmt() if callable(fmt) else str(e)).split())
    ctx = getattr(e, "ctx", None)
    where = ctx.command_path if ctx is not None and ctx.command_path else "slackopt"
    return f"{msg.rstrip('.')}; see '{where} --help'"


def main(argv: list[str] | None = None) -> int:
    """Run the ``slackopt`` command.

    Args:
        argv: the arguments (without the program name); None reads ``sys.argv``.

    Returns:
        The exit status: 0 success, 2 bad input, 1 internal error, 130 interrupted
        (Ctrl-C; one line on stderr says how to go on).
    """
    try:
        rv = app(args=argv, prog_name="slackopt", standalone_mode=False)
    except typer.TyperException as e:  # usage errors (bad option, missing argument, ...)
        if type(e).__name__ == "NoArgsIsHelpError":  # `slackopt` or `slackopt plot` alone:
            e.show(file=sys.stderr)                  # the help is the answer
        else:
            _err(_usage_line(e))
        return 2
    except typer.Abort:
        sys.stderr.write("slackopt: aborted\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write(f"slackopt: interrupted; {_RERUN}\n")
        return INTERRUPTED_EXIT
    if rv == INTERRUPTED_EXIT and not _REPORTED:  # Ctrl-C before a command began
        sys.stderr.write(f"slackopt: interrupted; {_RERUN}\n")
    _REPORTED.clear()
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":
    sys.exit(main())
