"""Solver comparisons at scale: instances x budgets x solvers x seeds -> one tidy table.

:func:`compare` runs every solver on every instance under every budget (and seed), scores
each plan with the one evaluator (:func:`slackopt.simulate.simulate`) and returns a pandas
DataFrame with one row per run (columns: :data:`COLUMNS`). Only the evaluator ranks
plans: a solver's own objective is reported, never used for the gaps.

- **Failures are rows.** A solver that raises becomes a row with status ``"error"`` and
  the exception as ``message``; one that runs past its hard deadline (``1.5 *
  time_limit_s + 1 s``) is interrupted and becomes a ``"timeout"`` row. The sweep goes on.
  (The deadline interrupts Python code through SIGALRM, in local runs; a Dask worker
  thread cannot be interrupted, so a late run there is flagged ``"timeout"`` when it
  returns. A solver class that workers cannot import, e.g. one defined in a notebook, is
  refused before any process starts, with the fix; a run that could not reach a worker
  for another reason is an ``"error"`` row that is not stored, so a rerun retries it.)
- **Resumable.** With ``store=PATH`` every row is written to an SQLite file the moment
  it finishes, keyed by (instance name, instance content hash, budget bytes, solver,
  parameters, seed, time limit, the solver's code identity:
  :func:`slackopt.solverbase.solver_code_id`, so edited solver code never returns stale
  rows). Running the same sweep again skips the finished runs
  and only adds the missing ones; a key is never written twice and a stored row is never
  replaced, except ``"error"`` rows, which every rerun runs again (``"timeout"`` rows
  count as finished). A run stopped by Ctrl-C is not a row: the interrupt ends the sweep
  and the rerun does that run. A file that is not a slackopt store is never touched (a
  0-byte file or an SQLite file without tables, as a kill during creation leaves, holds
  no data and becomes the store). The time limit is part of the key: the same solver
  under another limit is another experiment.
- **Parallel.** ``workers=N`` runs in N local processes; ``scheduler="tcp://HOST:PORT"``
  (or a ``distributed.Client``) runs on a Dask cluster (the ``[dist]`` extra). Rows come
  back in the grid's order whatever the worker count, and for solvers that are
  deterministic given their seed (not stopped by the clock) every column except
  ``planning_time_s`` is the same.
- **Gaps.** ``best_lower_bound_s`` is the largest lower bound known for the instance and
  budget: the rows' ``lower_bound_s``, a references file's ``lower_bound_s``, and the
  ideal step T* (every plan's step is >= T*, docs/model.md invariant 2). ``best_step_s``
  is the smallest feasible step among the rows and the references' ``best_step_s``.

The references file (``instances/small/references.json``, written with the exact MILP)::

    {"format": "slackopt-references", "schema_version": 1,
     "entries": [{"instance": "chain8-seed0_a100-pcie4", "budget_bytes": 726924246,
                  "budget_fraction": 0.7, "lower_bound_s": 0.0161, "best_step_s": 0.0163,
                  "status": "optimal", "solver": "milp", "settings": {...}, "date": "..."}]}

Entries match rows by instance name and budget bytes (or, without bytes, by budget
fraction within 1e-6).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from slackopt.errors import FileFormatError, SlackoptError, SolverError, interrupt_cause
from slackopt.instance import Instance, budget_bytes, parse_budget
from slackopt.solver import (
    check_worker_importable,
    get_solver,
    registered_solvers,
    solver_name,
)
from slackopt.solverbase import BaseSolver, solver_code_id

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

STORE_FORMAT = "slackopt-compare-store"
STORE_SCHEMA_VERSION = 1
RESULTS_FORMAT = "slackopt-compare-results"
REFERENCES_FORMAT = "slackopt-references"

HARD_TIMEOUT_FACTOR = 1.5
"""A run is interrupted after ``HARD_TIMEOUT_FACTOR * time_limit_s + HARD_TIMEOUT_SLACK_S``."""
HARD_TIMEOUT_SLACK_S = 1.0

# Column -> dtype of the tidy table, in order. "Int64"/"boolean" are pandas' nullable types.
SCHEMA: dict[str, str] = {
    # instance descriptors
    "instance": "object",            # instance name
    "instance_hash": "object",       # sha256 of the instance's canonical JSON, 16 hex digits
    "A_bytes": "Int64",              # saved bytes A
    "P_bytes": "Int64",              # keep-all peak P
    "ideal_time_s": "float64",       # T*
    "forward_time_s": "float64",     # T_F
    "hideable_fraction": "float64",  # f = min(1, W T_F / A)
    # the run
    "budget_fraction": "float64",    # M / P (the requested fraction when given as one)
    "budget_bytes": "Int64",         # M
    "solver": "object",
    "params": "object",              # the solver's hyperparameters, canonical JSON text
    "seed": "Int64",                 # <NA> for no seed
    "time_limit_s": "float64",       # NaN for none
    "status": "object",              # optimal, bounded, feasible, infeasible, timeout, error
    "message": "object",             # error / timeout text, or the evaluator's failure
    # the Evaluation of the returned plan: an infeasible plan has no step time (NaN) and
    # throughput 0; both are NaN for a run without a plan (error, timeout)
    "feasible": "bool",
    "step_time_s": "float64",
    "throughput": "float64",
    "stall_fwd_s": "float64",
    "stall_bwd_s": "float64",
    "recompute_s": "float64",
    "d2h_bytes": "Int64",
    "h2d_bytes": "Int64",
    "evictions": "Int64",
    "peak_bytes": "Int64",
    # the solver's own report
    "planning_time_s": "float64",
    "objective_s": "float64",
    "lower_bound_s": "float64",
    "min_budget_bytes": "Int64",
    "n_keep": "Int64",
    "n_swap": "Int64",
    "n_recomp": "Int64",
    # gaps (computed over the table and the references)
    "best_lower_bound_s": "float64",
    "gap_to_bound": "float64",
    "best_step_s": "float64",
    "gap_to_best": "float64",
}
COLUMNS: tuple[str, ...] = tuple(SCHEMA)
"""The columns of :func:`compare`'s DataFrame, in order."""
GAP_COLUMNS = ("best_lower_bound_s", "gap_to_bound", "best_step_s", "gap_to_best")
SUITES: dict[str, tuple[str | tuple[str, dict[str, Any]], ...]] = {
    "production": ("torch-knapsack", ("torch-knapsack", {"method": "greedy"}), "titan-auto",
                   "module-offload", "offload-all", "ckpt-offload", "slackswap"),
}
"""Named solver lists for ``--solvers NAME`` (names, or (name, params) pairs):
``production`` is the planners people train with (PyTorch's knapsack with its default DP
and its greedy solver, torchtitan, Megatron-Core, torchtune, DeepSpeed) beside SlackSwap."""
KEY_COLUMNS = ("instance", "instance_hash", "budget_bytes", "solver", "params", "seed",
               "time_limit_s")
"""What identifies a run in the store, with the solver's code identity (:func:`run_key`)."""
_STORED = tuple(c for c in COLUMNS if c not in GAP_COLUMNS)
_DESCRIPTORS = ("instance", "instance_hash", "A_bytes", "P_bytes", "ideal_time_s",
                "forward_time_s", "hideable_fraction")

InstanceLike = Instance | str | os.PathLike
SolverSpec = str | tuple[str, Mapping[str, Any]] | Any


# ============================================================================ the grid
@dataclass(frozen=True)
class _Task:
    """One run: everything a worker needs besides the instance itself."""

    index: int
    key: str
    instance_hash: str
    budget_bytes: int
    solver: str
    params: dict[str, Any]
    params_json: str
    solver_obj: Any
    seed: int | None
    time_limit_s: float | None


def _canon_json(x: Any) -> str:
    try:
        return json.dumps(x, sort_keys=True, separators=(",", ":"), allow_nan=False,
                          default=_json_default)
    except (TypeError, ValueError) as e:
        raise SolverError(f"solver parameters {x!r} cannot be written as JSON: {e}") from None


def _json_default(x: Any) -> Any:
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, (tuple, set, frozenset)):
        return sorted(x) if isinstance(x, (set, frozenset)) else list(x)
    raise TypeError(f"{type(x).__name__} is not JSON")


def instance_hash(instance: Instance) -> str:
    """Content hash of an instance: sha256 of its canonical JSON, first 16 hex digits.

    Two instances with the same ops, tensors, link, name and meta hash alike, whether
    built in memory or loaded from a file (formatting of the file does not matter).
    """
    from slackopt.io import instance_to_dict

    doc = instance_to_dict(instance)
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _run_key(name: str, ihash: str, m: int, solver: str, params_json: str,
             seed: int | None, time_limit_s: float | None, code: str) -> str:
    text = json.dumps([name, ihash, int(m), solver, params_json, seed, time_limit_s, code],
                      separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def run_key(instance: Instance, budget_bytes: int, solver: Any, *, seed: int | None,
            time_limit_s: float | None, code: str | None = None) -> str:
    """The store key of one run (64 hex digits): sha256 of the instance name and content
    hash, M (bytes), the solver's name, its params as canonical JSON, the seed, the time
    limit (s) and the solver's code identity (`code`, default
    :func:`slackopt.solverbase.solver_code_id` of its class).

    Raises:
        SolverError: params that cannot be written as JSON.
    """
    return _run_key(instance.name, instance_hash(instance), int(budget_bytes),
                    solver_name(solver), _canon_json(dict(getattr(solver, "params", {}) or {})),
                    seed, time_limit_s, solver_code_id(type(solver)) if code is None else code)


def _load_instances(instances: Iterable[InstanceLike]) -> list[Instance]:
    from slackopt.io import load_instance

    if isinstance(instances, (Instance, str, os.PathLike)):
        instances = [instances]
    out = []
    for x in instances:
        if isinstance(x, Instance):
            out.append(x)
        elif isinstance(x, (str, os.PathLike)):
            out.append(load_instance(x))
        else:
            raise SlackoptError(f"instance {x!r} is neither an Instance nor a file path")
    if not out:
        raise SlackoptError("no instances given")
    return out


def _resolve_solvers(solvers: Iterable[SolverSpec] | str) -> list[tuple[str, dict, Any]]:
    """(name, params, solver object) per solver spec; checks names and parameters now."""
    if isinstance(solvers, str):
        solvers = [solvers]
    out = []
    for spec in solvers:
        if isinstance(spec, str):
            spec = (spec, {})
        if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], str) \
                and isinstance(spec[1], Mapping):
            # unknown names and bad parameters fail here, once; "file.py:Class" is
            # labelled by the class's name
            obj = get_solver(spec[0], **spec[1])
            name = solver_name(obj) if ":" in spec[0] else spec[0]
            params = dict(spec[1])
        elif callable(getattr(spec, "solve", None)):
            name, obj = solver_name(spec), spec
            params = dict(getattr(spec, "params", None) or {})
        else:
            raise SolverError(f"solver {spec!r} is not a name, a (name, params) pair or a "
                              "solver object")
        if isinstance(obj, BaseSolver):  # its params are complete and canonical
            params = obj.params
        out.append((name, params, obj))
    if not out:
        raise SolverError(f"no solvers given; registered: {', '.join(registered_solvers())}")
    return out


def _requested_fraction(budget: Any, m: int, p: int) -> float:
    """The fraction of P the user asked for, if the budget was a fraction (0.5, "50%",
    "1.2P"); else M / P."""
    kind, value = parse_budget(budget)
    if kind == "fraction":
        return float(value)
    return m / p if p else math.nan


# ============================================================================ one run
class _HardTimeout(BaseException):
    """Raised inside a run past its hard deadline (BaseException: solvers that catch
    Exception do not swallow it)."""


def hard_deadline_s(time_limit_s: float | None) -> float | None:
    """The wall-clock time (s) after which a run with `time_limit_s` is interrupted."""
    if time_limit_s is None:
        return None
    return HARD_TIMEOUT_FACTOR * float(time_limit_s) + HARD_TIMEOUT_SLACK_S


@contextlib.contextmanager
def _deadline(seconds: float | None) -> Iterator[bool]:
    """Raise _HardTimeout in this thread after `seconds` (SIGALRM; main thread on Unix only).

    Yields whether the deadline is enforced (False: the run can only be flagged after it
    returns, e.g. in a Dask worker thread).
    """
    usable = (seconds is not None and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield False
        return

    def _raise(signum: int, frame: Any) -> None:
        raise _HardTimeout()

    old = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, max(float(seconds), 1e-3))  # type: ignore[arg-type]
    try:
        yield True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _empty_run() -> dict[str, Any]:
    return {"status": "error", "message": "", "feasible": False, "step_time_s": math.nan,
            "throughput": math.nan, "stall_fwd_s": math.nan, "stall_bwd_s": math.nan,
            "recompute_s": math.nan, "d2h_bytes": None, "h2d_bytes": None,
            "evictions": None, "peak_bytes": None, "planning_time_s": math.nan,
            "objective_s": math.nan, "lower_bound_s": math.nan, "min_budget_bytes": None,
            "n_keep": None, "n_swap": None, "n_recomp": None}


def _transport_error(e: BaseException) -> dict[str, Any]:
    """An error row for a run that never reached its solver (not stored: a rerun retries)."""
    row = _empty_run()
    row["message"] = (f"could not run in a worker: {type(e).__name__}: {e} (solver objects "
                      "must be importable by the workers: define them in a module, not in a "
                      "notebook, or use workers=1)")
    row["_transient"] = True
    return row


def _num(x: Any) -> float:
    return math.nan if x is None else float(x)


def _execute(instance: Instance, task: _Task) -> dict[str, Any]:
    """Run one task and return its run fields (never raises for a solver's failure)."""
    from slackopt.solver import solve

    row = _empty_run()
    hard = hard_deadline_s(task.time_limit_s)
    t0 = time.perf_counter()
    try:
        with _deadline(hard):
            res = solve(instance, task.solver_obj, int(task.budget_bytes),
                        time_limit_s=task.time_limit_s, seed=task.seed)
    except (_HardTimeout, Exception) as e:
        cause = e if isinstance(e, _HardTimeout) else interrupt_cause(e)
        if cause is not None and not isinstance(cause, _HardTimeout):
            # Ctrl-C (possibly wrapped in a SystemError by the compiled evaluator): the
            # sweep stops and this run is not a result.
            raise cause from None
        if cause is not None:
            row.update(status="timeout", planning_time_s=time.perf_counter() - t0,
                       message=f"interrupted after {hard:.3g} s (time limit "
                               f"{task.time_limit_s:g} s; hard deadline = "
                               f"{HARD_TIMEOUT_FACTOR:g} x limit + {HARD_TIMEOUT_SLACK_S:g} s)")
            return row
        # a solver's failure is a row, not a crash
        row.update(status="error", planning_time_s=time.perf_counter() - t0,
                   message=f"{type(e).__name__}: {e}" if str(e) else type(e).__name__)
        return row
    elapsed = time.perf_counter() - t0
    ev = res.evaluation
    row.update(status=res.status, planning_time_s=float(res.planning_time_s or elapsed),
               objective_s=_num(res.objective_s), lower_bound_s=_num(res.lower_bound_s))
    mb = (res.info or {}).get("min_budget_bytes")
    row["min_budget_bytes"] = int(mb) if isinstance(mb, (int, float, np.number)) \
        and math.isfinite(mb) else None
    if res.plan is not None:
        counts = res.plan.counts()
        row.update(n_keep=counts["keep"], n_swap=counts["swap"], n_recomp=counts["recomp"])
    if ev is not None:
        row.update(feasible=bool(ev.feasible),
                   step_time_s=float(ev.step_time_s) if ev.feasible else math.nan,
                   throughput=float(ev.throughput) if ev.feasible else 0.0,
                   stall_fwd_s=ev.stall_fwd_s, stall_bwd_s=ev.stall_bwd_s,
                   recompute_s=ev.recompute_s, d2h_bytes=int(ev.d2h_bytes),
                   h2d_bytes=int(ev.h2d_bytes), evictions=int(ev.evictions),
                   peak_bytes=int(ev.peak_bytes), message=ev.failure or "")
    else:
        row["message"] = f"solver returned no plan (status {res.status})"
    if hard is not None and elapsed > hard and row["status"] != "timeout":
        row["message"] = (f"ran {elapsed:.3g} s, past the hard deadline {hard:.3g} s (time "
                          f"limit {task.time_limit_s:g} s)" + (f"; {row['message']}"
                                                               if row["message"] else ""))
        row["status"] = "timeout"
    return row


# ---------------------------------------------------------------- local processes
_WORKER_INSTANCES: dict[str, Instance] = {}


def _init_worker(instances: dict[str, Instance], parent_pid: int) -> None:
    """Process-pool initializer: keep the instances; leave Ctrl-C to the parent; end
    within about a second when the parent dies (:func:`slackopt.parentwatch.exit_with_parent`)."""
    from slackopt.parentwatch import exit_with_parent, worker_ignores_sigint

    worker_ignores_sigint()
    exit_with_parent(parent_pid)
    _WORKER_INSTANCES.clear()
    _WORKER_INSTANCES.update(instances)


def _pool_execute(task: _Task) -> dict[str, Any]:
    return _execute(_WORKER_INSTANCES[task.instance_hash], task)


def _kill_pool(ex: Any) -> None:
    """Stop a ProcessPoolExecutor now, running tasks included."""
    procs = list((getattr(ex, "_processes", None) or {}).values())
    manager = getattr(ex, "_executor_manager_thread", None)
    for p in procs:
        with contextlib.suppress(Exception):
            p.terminate()
    # Wait for the workers before the shutdown frees the pool's semaphores: a worker
    # still starting would otherwise fail on them and print a traceback.
    for p in procs:
        with contextlib.suppress(Exception):
            p.join(timeout=5)
    ex.shutdown(wait=False, cancel_futures=True)
    # Let the pool's manager thread see the dead workers and close its pipes before the
    # interpreter exits (Python 3.11 can otherwise print an ignored OSError at exit).
    if manager is not None:
        with contextlib.suppress(Exception):
            manager.join(timeout=10)


def _run_processes(tasks: list[_Task], instances: dict[str, Instance], workers: int,
                   on_result: Callable[[_Task, dict], None]) -> None:
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    from slackopt.parentwatch import sigint_blocked

    # spawn: no fork of a parent that may hold threads (progress bar, Jupyter, Dask).
    ctx = multiprocessing.get_context("spawn")
    used = {t.instance_hash for t in tasks}
    payload = {h: instances[h] for h in used}
    pending = list(tasks)
    survivors: list[_Task] = []
    finished = 0
    ex = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                             initargs=(payload, os.getpid()))
    try:
        with sigint_blocked():  # workers start with Ctrl-C blocked (parentwatch)
            futs = {ex.submit(_pool_execute, t): t for t in pending}
        while futs:
            done, _ = wait(futs, return_when=FIRST_COMPLETED)
            for f in done:
                t = futs.pop(f)
                try:
                    row = f.result()
                except BrokenProcessPool:
                    survivors.append(t)
                    continue
                except Exception as e:  # the task could not be sent or its result returned
                    row = _transport_error(e)
                finished += 1
                on_result(t, row)
    except BaseException:
        _kill_pool(ex)
        raise
    ex.shutdown(wait=True)
    # A worker died (crash, out of memory): rerun the unfinished runs one per process, so
    # that the culprit only takes itself down and becomes an error row.
    for t in sorted(survivors, key=lambda t: t.index):
        ex = ProcessPoolExecutor(max_workers=1, mp_context=ctx, initializer=_init_worker,
                                 initargs=({t.instance_hash: instances[t.instance_hash]},
                                           os.getpid()))
        try:
            with sigint_blocked():
                fut = ex.submit(_pool_execute, t)
            row = fut.result()
        except BrokenProcessPool:
            if not finished:  # nothing ever ran: the processes cannot start at all
                raise SlackoptError(
                    "worker processes died before running anything. In a script, call "
                    "compare(..., workers=N) under `if __name__ == \"__main__\":` (worker "
                    "processes re-import the main module); otherwise run with workers=1 to "
                    "see the error") from None
            row = _empty_run()
            row["message"] = ("the worker process died while running this solver (crash or "
                              "out of memory)")
        except Exception as e:
            row = _transport_error(e)
        except BaseException:
            _kill_pool(ex)
            raise
        ex.shutdown(wait=True)
        finished += 1
        on_result(t, row)


# ---------------------------------------------------------------- Dask
SCHEDULER_TIMEOUT_S = 5.0
"""Seconds to reach a Dask scheduler before the sweep is refused."""
_SCHEDULER_FIX = ("start one (dask scheduler; dask worker ADDRESS) and give its address as "
                  "tcp://HOST:PORT")


def _check_scheduler_address(address: str) -> None:
    """Refuse, within :data:`SCHEDULER_TIMEOUT_S`, an address that is not HOST:PORT or
    where nothing listens (before Dask's client, whose failed connection waits longer and
    prints a traceback when it is collected).

    Raises:
        SlackoptError: naming the address and the fix.
    """
    import socket
    from urllib.parse import urlsplit

    text = address.strip()
    scheme, _, rest = text.rpartition("://")
    if scheme and scheme not in ("tcp", "tls"):
        return  # other Dask transports (inproc, ucx, ws): let Dask judge them
    try:
        parts = urlsplit(f"tcp://{rest}")
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or port is None:
        raise SlackoptError(f"'{address}' is not a Dask scheduler address (tcp://HOST:PORT). "
                            f"Fix: {_SCHEDULER_FIX}")
    try:
        with socket.create_connection((host, port), timeout=SCHEDULER_TIMEOUT_S):
            pass
    except OSError as e:
        raise SlackoptError(f"cannot reach the Dask scheduler at '{address}': "
                            f"{e.strerror or e}. Fix: {_SCHEDULER_FIX}") from None


def _run_dask(tasks: list[_Task], instances: dict[str, Instance], scheduler: Any,
              on_result: Callable[[_Task, dict], None]) -> None:
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise SlackoptError("running on a Dask cluster needs the [dist] extra: "
                            "pip install 'slackopt[dist]'") from None
    own = isinstance(scheduler, str)
    if own:
        try:
            client = Client(scheduler, timeout=SCHEDULER_TIMEOUT_S, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as e:
            raise SlackoptError(f"cannot reach the Dask scheduler at '{scheduler}': {e}. "
                                f"Fix: {_SCHEDULER_FIX}") from None
    else:
        client = scheduler
    futs: list[Any] = []
    try:
        used = sorted({t.instance_hash for t in tasks})
        scattered = {h: client.scatter(instances[h], hash=False) for h in used}
        by_key = {}
        for t in tasks:
            f = client.submit(_execute, scattered[t.instance_hash], t, pure=False,
                              key=f"slackopt-run-{t.key[:20]}-{os.getpid()}-{time.time_ns()}")
            by_key[f.key] = t
            futs.append(f)
        for f in as_completed(futs, loop=client.loop):
            try:
                row = f.result()
            except Exception as e:  # the task could not be sent or its result returned
                row = _transport_error(e)
            on_result(by_key[f.key], row)
    except BaseException:
        with contextlib.suppress(Exception):
            client.cancel(futs)
        raise
    finally:
        if own:
            with contextlib.suppress(Exception):
                client.close()


# ============================================================================ the store
class ResultStore:
    """An SQLite file of finished runs (table ``runs``, one row per key).

    Opening creates the file if missing, atomically: the schema is written to a temporary
    file beside it, which is then linked to the path, so a kill never leaves a store
    without its schema. An existing file must be a slackopt compare store of a schema
    version this slackopt reads; anything else (another database, a CSV, a newer schema)
    is refused and left untouched, with two exceptions that hold no data and are
    completed into an empty store: a 0-byte file, and an SQLite file with no tables (or
    only this module's ``meta`` table with nothing but its own entries, and no other
    object) - what a kill during creation by an older slackopt, or ``touch``, leaves.

    Rows are only added, never replaced, except rows with status ``"error"``: a rerun of
    the sweep runs those again (:meth:`add` then replaces them), since an error is a
    crash or a transient failure rather than the solver's answer. ``"timeout"`` rows are
    answers and are kept.

    Args:
        path: the SQLite file.

    Raises:
        FileFormatError: the file exists but is not a slackopt compare store, or cannot be
            created.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        if self.path.is_dir():
            raise FileFormatError(self.path, "", "is a directory", "give a file path for the store")
        if not self.path.exists():
            self._create_atomically()
        elif self._check_existing():
            self._complete_empty()
        try:
            self.con = sqlite3.connect(str(self.path), timeout=60)
        except (OSError, sqlite3.Error) as e:
            raise FileFormatError(self.path, "", f"cannot be opened as a store ({e})",
                                  "check that the directory is writable") from None

    _FIX = "give a new file for --store (or the store an earlier compare wrote)"

    def _check_existing(self) -> bool:
        """Check an existing file; True if it holds nothing and may be made a store."""
        fix = self._FIX
        try:
            with self.path.open("rb") as f:
                head = f.read(16)
        except OSError as e:
            raise FileFormatError(self.path, "", f"cannot be read ({e})", fix) from None
        if not head:
            return True  # 0 bytes: no data to lose
        if head != b"SQLite format 3\x00":
            raise FileFormatError(self.path, "", "exists and is not a slackopt compare store "
                                  "(not an SQLite file); refusing to write to it", fix)
        try:
            con = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=60)
            try:
                objects = [(t, n) for (t, n) in con.execute(
                    "SELECT type, name FROM sqlite_master") if not n.startswith("sqlite_")]
                tables = {n for (t, n) in objects if t == "table"}
                meta = (dict(con.execute("SELECT key, value FROM meta").fetchall())
                        if "meta" in tables else {})
            finally:
                con.close()
        except sqlite3.Error as e:
            raise FileFormatError(self.path, "", f"is an SQLite file that cannot be read as a "
                                  f"slackopt compare store ({e}); refusing to write to it",
                                  fix) from None
        if not objects:
            return True  # an SQLite file with no schema at all
        if {n for (_, n) in objects} == {"meta"} and set(meta) <= {"format", "schema_version"} \
                and meta.get("format", STORE_FORMAT) == STORE_FORMAT:
            return True  # our own creation, stopped before the runs table
        if "meta" not in tables:
            raise FileFormatError(self.path, "", "is an SQLite file but not a slackopt compare "
                                  "store (no meta table); refusing to write to it", fix)
        if meta.get("format") != STORE_FORMAT:
            raise FileFormatError(self.path, "meta.format", f"is {meta.get('format')!r}, not "
                                  f"'{STORE_FORMAT}'; refusing to write to it", fix)
        ver = meta.get("schema_version")
        if ver != str(STORE_SCHEMA_VERSION):
            raise FileFormatError(self.path, "meta.schema_version",
                                  f"store schema version {ver} is not {STORE_SCHEMA_VERSION}, "
                                  "the one this slackopt writes",
                                  "use the slackopt that wrote it, or a new store file")
        if "runs" not in tables:
            raise FileFormatError(self.path, "runs", "table missing from a slackopt compare "
                                  "store that holds other data; refusing to write to it", fix)
        return False

    @staticmethod
    def _write_schema(con: sqlite3.Connection) -> None:
        sql_type = {"Int64": "INTEGER", "float64": "REAL", "bool": "INTEGER",
                    "object": "TEXT"}
        cols = ", ".join(f'"{c}" {sql_type[SCHEMA[c]]}' for c in _STORED)
        con.isolation_level = None  # explicit transaction: all of the schema or none
        con.execute("BEGIN IMMEDIATE")
        con.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        con.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                        [("format", STORE_FORMAT),
                         ("schema_version", str(STORE_SCHEMA_VERSION))])
        con.execute(f"CREATE TABLE IF NOT EXISTS runs (key TEXT PRIMARY KEY, {cols}, "
                    "finished_at TEXT)")
        con.execute("COMMIT")

    def _create_atomically(self) -> None:
        tmp = self.path.parent / f".{self.path.name}.{os.getpid()}.creating"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            con = sqlite3.connect(str(tmp))
            try:
                self._write_schema(con)
            finally:
                con.close()
            try:
                os.link(tmp, self.path)  # fails if another process created it meanwhile
            except FileExistsError:
                pass
        except (OSError, sqlite3.Error) as e:
            raise FileFormatError(self.path, "", f"cannot be created as a store ({e})",
                                  "check that the directory is writable") from None
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
        if self._check_existing():  # another process's empty file won the race
            self._complete_empty()

    def _complete_empty(self) -> None:
        try:
            con = sqlite3.connect(str(self.path), timeout=60)
            try:
                self._write_schema(con)
            finally:
                con.close()
        except sqlite3.Error as e:
            raise FileFormatError(self.path, "", f"cannot be made a store ({e})",
                                  self._FIX) from None

    def keys(self) -> set[str]:
        """Keys of the stored runs."""
        return {k for (k,) in self.con.execute("SELECT key FROM runs")}

    def add(self, key: str, row: Mapping[str, Any]) -> bool:
        """Store one run unless its key is there already (an ``"error"`` row under the key
        is replaced); commits at once.

        Returns:
            True if the row was added, False if the key was already stored.
        """
        vals = [key] + [_sql_value(row.get(c)) for c in _STORED] + \
            [time.strftime("%Y-%m-%dT%H:%M:%S")]
        marks = ", ".join("?" * len(vals))
        with self.con:
            self.con.execute("DELETE FROM runs WHERE key = ? AND status = 'error'", (key,))
            cur = self.con.execute(f"INSERT OR IGNORE INTO runs VALUES ({marks})", vals)
        return cur.rowcount == 1

    def rows(self, keys: Iterable[str] | None = None, *, retry_errors: bool = False
             ) -> pd.DataFrame:
        """Stored runs (all, or those with the given keys) with a ``key`` column; with
        `retry_errors`, without the ``"error"`` rows (those a rerun does again)."""
        import pandas as pd

        df = pd.read_sql_query("SELECT * FROM runs", self.con)
        if keys is not None:
            df = df[df["key"].isin(set(keys))]
        if retry_errors:
            df = df[df["status"] != "error"]
        return df

    def close(self) -> None:
        """Close the database connection."""
        self.con.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _sql_value(v: Any) -> Any:
    import pandas as pd

    if v is None or v is pd.NA:
        return None
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return None if math.isnan(v) else float(v)
    return v


# ============================================================================ references
def load_references(references: str | os.PathLike | Mapping[str, Any] | None
                    ) -> list[dict[str, Any]]:
    """Read a references file (or an already parsed document) into its entries.

    Args:
        references: path of a ``slackopt-references`` JSON file, the parsed document, or
            None (no references).

    Returns:
        The entries, each with at least ``instance`` and one of ``budget_bytes`` /
        ``budget_fraction``; ``lower_bound_s`` and ``best_step_s`` are floats or None.

    Raises:
        FileFormatError: missing or unreadable file, wrong format, or a malformed entry
            (naming the entry and field).
    """
    if references is None:
        return []
    if isinstance(references, Mapping):
        doc, src = references, "<references>"
    else:
        src = str(references)
        try:
            text = Path(references).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise FileFormatError(src, "", "file not found", "check the path") from None
        except (OSError, UnicodeDecodeError) as e:
            raise FileFormatError(src, "", f"cannot be read ({e})", "check the path") from None
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise FileFormatError(src, "", f"not valid JSON: {e.msg} at line {e.lineno}",
                                  "give a references.json file") from None
    fix = ('write {"format": "slackopt-references", "schema_version": 1, "entries": '
           '[{"instance": ..., "budget_bytes": ..., "lower_bound_s": ..., "best_step_s": ...}]}')
    if not isinstance(doc, Mapping) or doc.get("format") != REFERENCES_FORMAT:
        raise FileFormatError(src, "format", f"is not '{REFERENCES_FORMAT}'", fix)
    if doc.get("schema_version") != 1:
        raise FileFormatError(src, "schema_version",
                              f"{doc.get('schema_version')!r} is not 1, the version this "
                              "slackopt reads", "regenerate the file with this slackopt")
    entries = doc.get("entries")
    if not isinstance(entries, list):
        raise FileFormatError(src, "entries", "is not a list", fix)
    out = []
    for i, e in enumerate(entries):
        where = f"entries[{i}]"
        if not isinstance(e, Mapping):
            raise FileFormatError(src, where, "is not an object", fix)
        if not isinstance(e.get("instance"), str) or not e["instance"]:
            raise FileFormatError(src, f"{where}.instance", "missing or not a name", fix)
        bb, bf = e.get("budget_bytes"), e.get("budget_fraction")
        if bb is not None and (isinstance(bb, bool) or not isinstance(bb, int) or bb < 0):
            raise FileFormatError(src, f"{where}.budget_bytes", "is not an integer >= 0", fix)
        if bf is not None and (isinstance(bf, bool) or not isinstance(bf, (int, float))):
            raise FileFormatError(src, f"{where}.budget_fraction", "is not a number", fix)
        if bb is None and bf is None:
            raise FileFormatError(src, where, "has neither budget_bytes nor budget_fraction",
                                  fix)
        ent = dict(e)
        for k in ("lower_bound_s", "best_step_s"):
            v = e.get(k)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                                  or not math.isfinite(v) or v < 0):
                raise FileFormatError(src, f"{where}.{k}", "is not a finite number >= 0 or "
                                      "null", fix)
            ent[k] = None if v is None else float(v)
        out.append(ent)
    return out


def _reference_matches(refs: list[dict], name: str, m: int, frac: float) -> list[dict]:
    hits = []
    for e in refs:
        if e["instance"] != name:
            continue
        if e.get("budget_bytes") is not None:
            if int(e["budget_bytes"]) == int(m):
                hits.append(e)
        elif e.get("budget_fraction") is not None and abs(float(e["budget_fraction"]) - frac) \
                <= 1e-6:
            hits.append(e)
    return hits


# ============================================================================ tables
def coerce(df: pd.DataFrame) -> pd.DataFrame:
    """Give a results table the column order and dtypes of :data:`SCHEMA`.

    Missing columns are added empty; extra columns are kept after the known ones. Used on
    tables read back from CSV, JSON, Parquet or SQLite.
    """
    import pandas as pd

    df = df.copy()
    for c, dt in SCHEMA.items():
        if c not in df.columns:
            df[c] = pd.NA if dt != "float64" else math.nan
        col = df[c]
        if dt == "Int64":
            df[c] = pd.to_numeric(col, errors="coerce").round().astype("Int64")
        elif dt == "float64":
            df[c] = pd.to_numeric(col, errors="coerce").astype("float64")
        elif dt == "bool":
            df[c] = col.map(_to_bool).astype(bool)
        else:
            df[c] = col.astype(object).where(col.notna(), None)
    df["message"] = df["message"].map(lambda x: "" if x is None else str(x))
    extra = [c for c in df.columns if c not in SCHEMA]
    return df[list(COLUMNS) + extra].reset_index(drop=True)


def _to_bool(x: Any) -> bool:
    import pandas as pd

    if isinstance(x, str):
        return x.strip().lower() in ("true", "1", "yes")
    if x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x)):
        return False
    return bool(x)


def add_gaps(df: pd.DataFrame, references: Any = None) -> pd.DataFrame:
    """Fill the gap columns of a results table (in a copy).

    Per (instance, instance_hash, budget_bytes): ``best_lower_bound_s`` = max of the rows'
    ``lower_bound_s``, the matching references' ``lower_bound_s`` and the ideal step
    ``ideal_time_s`` (a valid bound for every plan); ``best_step_s`` = min of the feasible
    rows' ``step_time_s`` and the references' ``best_step_s``. Then ``gap_to_bound =
    (step_time_s - best_lower_bound_s) / best_lower_bound_s`` and ``gap_to_best =
    (step_time_s - best_step_s) / best_step_s`` (dimensionless, NaN for rows without a
    feasible plan).

    Args:
        df: a table with the columns of :data:`COLUMNS` (gap columns may be missing).
        references: a references file path, its parsed document, a list of entries (as
            :func:`load_references` returns), or None.

    Returns:
        The table with the four gap columns filled.
    """
    import pandas as pd

    refs = references if isinstance(references, list) else load_references(references)
    df = df.copy()
    lbs, bests = [], []
    groups = df.groupby(["instance", "instance_hash", "budget_bytes"], sort=False,
                        dropna=False).groups
    best_lb = pd.Series(math.nan, index=df.index, dtype="float64")
    best_step = pd.Series(math.nan, index=df.index, dtype="float64")
    for (name, _h, m), idx in groups.items():
        g = df.loc[idx]
        lbs = [float(x) for x in g["lower_bound_s"] if pd.notna(x)]
        lbs += [float(x) for x in g["ideal_time_s"] if pd.notna(x)]
        feas = g[g["feasible"].astype(bool) & g["step_time_s"].notna()]
        bests = [float(x) for x in feas["step_time_s"]]
        frac = float(g["budget_fraction"].iloc[0]) if g["budget_fraction"].notna().any() \
            else math.nan
        for e in _reference_matches(refs, str(name), int(m), frac):
            if e.get("lower_bound_s") is not None:
                lbs.append(e["lower_bound_s"])
            if e.get("best_step_s") is not None:
                bests.append(e["best_step_s"])
        best_lb[idx] = max(lbs) if lbs else math.nan
        best_step[idx] = min(bests) if bests else math.nan
    step = df["step_time_s"].where(df["feasible"].astype(bool)).astype("float64")
    df["best_lower_bound_s"] = best_lb
    df["best_step_s"] = best_step
    with np.errstate(divide="ignore", invalid="ignore"):
        df["gap_to_bound"] = (step - best_lb) / best_lb
        df["gap_to_best"] = (step - best_step) / best_step
    return df


def _progress(total: int, done: int, enabled: bool) -> Any:
    """A rich progress bar on stderr (runs done / left), or a no-op."""
    if not enabled:
        return contextlib.nullcontext(lambda n=1: None)
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = Console(stderr=True)
    if console.is_jupyter:
        try:
            import ipywidgets  # noqa: F401  (rich draws live bars in Jupyter with it)
        except ImportError:
            return _text_progress(total, done)

    @contextlib.contextmanager
    def bar() -> Iterator[Callable[[int], None]]:
        prog = Progress(TextColumn("compare"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("runs, {task.fields[left]} left"), TimeElapsedColumn(),
                        TextColumn("eta"), TimeRemainingColumn(),
                        console=console, transient=False)
        with prog:
            tid = prog.add_task("compare", total=total, completed=done, left=total - done)
            state = {"done": done}

            def advance(n: int = 1) -> None:
                state["done"] += n
                prog.update(tid, advance=n, left=total - state["done"])

            yield advance

    return bar()


@contextlib.contextmanager
def _text_progress(total: int, done: int) -> Iterator[Callable[[int], None]]:
    """A one-line text progress report on stderr, rewritten in place (no live display)."""
    import sys

    state = {"done": done, "shown": 0.0}

    def show(final: bool = False) -> None:
        now = time.monotonic()
        if final or now - state["shown"] >= 0.5:
            state["shown"] = now
            sys.stderr.write(f"\rcompare: {state['done']}/{total} runs, "
                             f"{total - state['done']} left" + ("\n" if final else ""))
            sys.stderr.flush()

    def advance(n: int = 1) -> None:
        state["done"] += n
        show()

    show()
    try:
        yield advance
    finally:
        show(final=True)


# ============================================================================ compare
def compare(
    instances: Iterable[InstanceLike] | InstanceLike,
    solvers: Iterable[SolverSpec] | str,
    budgets: Iterable[float | int | str] | float | int | str,
    *,
    seeds: Iterable[int | None] = (None,),
    time_limit_s: float | None = None,
    store: str | os.PathLike | None = None,
    workers: int = 1,
    scheduler: Any = None,
    progress: bool = True,
    references: str | os.PathLike | Mapping[str, Any] | list | None = None,
) -> pd.DataFrame:
    """Run every solver on every instance under every budget and seed; one row per run.

    Args:
        instances: Instance objects or instance file paths (one or many).
        solvers: registered names ("slackswap"), (name, params) pairs
            (``("milp", {"backend": "highs"})``) or solver objects (their ``name`` and
            ``params`` attributes label the rows); one or many.
        budgets: memory budgets, each a fraction of P (0.5), bytes (int) or a size string
            ("11.5GB"); one or many.
        seeds: seeds passed to the solvers (None: the solver's default).
        time_limit_s: passed to every solver (s); a run still going at
            ``1.5 * time_limit_s + 1`` s is interrupted and becomes a "timeout" row (in
            local runs; on Dask workers a late run is flagged "timeout" when it returns).
        store: SQLite file that keeps finished runs (created if missing): runs already in
            it are not redone, new ones are added as they finish.
        workers: local processes (1: run here, in this process; 0: one per CPU).
        scheduler: a Dask scheduler address ("tcp://HOST:PORT") or a
            ``distributed.Client``; overrides `workers`. Needs the [dist] extra.
        progress: show a progress bar (runs done and left) on stderr.
        references: a references file (see the module docstring), its parsed document, or
            None; its bounds and best steps join the gaps.

    Returns:
        A DataFrame with the columns :data:`COLUMNS`, one row per (instance, budget,
        solver, seed) in that nesting order (duplicates in the grid are run once). Times
        in s, sizes in bytes, gaps and throughput dimensionless (``throughput`` = T*/T).
        ``df.attrs`` holds ``runs_from_store`` (rows read back from `store`) and
        ``runs_now`` (runs done by this call).

    Raises:
        SolverError: an unknown solver name or parameters it rejects.
        BudgetError: a budget that cannot be parsed.
        FileFormatError: an unreadable instance or references file, or a store file that
            is not a slackopt store.
        SlackoptError: no instances, bad `workers`, or an unreachable Dask scheduler.
        KeyboardInterrupt: passed on (finished runs are already in the store).
    """
    import pandas as pd

    insts = _load_instances(instances)
    specs = _resolve_solvers(solvers)
    if isinstance(budgets, (str, int, float)):
        budgets = [budgets]
    budgets = list(budgets)
    if not budgets:
        raise SlackoptError("no budgets given")
    seeds = [None if s is None else int(s) for s in seeds] or [None]
    if time_limit_s is not None:
        if isinstance(time_limit_s, bool) or not isinstance(time_limit_s, (int, float)) \
                or not math.isfinite(time_limit_s) or time_limit_s < 0:
            raise SlackoptError(f"time limit {time_limit_s!r} must be a finite number >= 0 (s)")
        time_limit_s = float(time_limit_s)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise SlackoptError(f"workers must be an integer >= 0, got {workers!r}")
    if workers == 0:
        workers = os.cpu_count() or 1
    if workers > 1 or scheduler is not None:
        for _, _, obj in specs:  # before any process starts
            check_worker_importable(type(obj))
    refs = references if isinstance(references, list) else load_references(references)
    if isinstance(scheduler, str):
        _check_scheduler_address(scheduler)  # before any output or store

    # Instance descriptors and the grid.
    from slackopt.linkbudget import hideable_fraction

    by_hash: dict[str, Instance] = {}
    desc: dict[int, dict[str, Any]] = {}
    for inst in insts:
        if id(inst) in desc:
            continue
        h = instance_hash(inst)
        by_hash.setdefault(h, inst)
        desc[id(inst)] = {"instance": inst.name, "instance_hash": h, "A_bytes": int(inst.A),
                          "P_bytes": int(inst.P), "ideal_time_s": float(inst.ideal_time_s),
                          "forward_time_s": float(inst.forward_time_s),
                          "hideable_fraction": float(hideable_fraction(inst))}
    tasks: list[_Task] = []
    meta: dict[str, dict[str, Any]] = {}  # key -> descriptor + budget columns
    for inst in insts:
        d = desc[id(inst)]
        for b in budgets:
            m = budget_bytes(inst, b)
            frac = _requested_fraction(b, m, inst.P)
            for name, params, obj in specs:
                pj = _canon_json(params)
                code = solver_code_id(type(obj))
                for seed in seeds:
                    key = _run_key(inst.name, d["instance_hash"], m, name, pj, seed,
                                   time_limit_s, code)
                    if key in meta:
                        continue
                    meta[key] = {**d, "budget_fraction": frac, "budget_bytes": m,
                                 "solver": name, "params": pj, "seed": seed,
                                 "time_limit_s": math.nan if time_limit_s is None
                                 else time_limit_s}
                    tasks.append(_Task(len(tasks), key, d["instance_hash"], m, name, params,
                                       pj, obj, seed, time_limit_s))

    rows: dict[str, dict[str, Any]] = {}
    st = ResultStore(store) if store is not None else None
    try:
        if st is not None:
            stored = st.rows([t.key for t in tasks], retry_errors=True)
            for rec in stored.to_dict("records"):
                k = rec.pop("key")
                rec.pop("finished_at", None)
                rows[k] = {**rec, **meta[k]}  # descriptors as requested now
        todo = [t for t in tasks if t.key not in rows]

        with _progress(len(tasks), len(tasks) - len(todo), progress) as advance:
            def on_result(t: _Task, run: dict[str, Any]) -> None:
                transient = run.pop("_transient", False)
                row = {**meta[t.key], **run}
                if st is not None and not transient:
                    st.add(t.key, row)
                rows[t.key] = row
                advance(1)

            if not todo:
                pass
            elif scheduler is not None:
                _run_dask(todo, by_hash, scheduler, on_result)
            elif workers > 1 and len(todo) > 1:
                _run_processes(todo, by_hash, min(workers, len(todo)), on_result)
            else:
                for t in todo:
                    on_result(t, _execute(by_hash[t.instance_hash], t))
    finally:
        if st is not None:
            st.close()

    df = pd.DataFrame([rows[t.key] for t in tasks])
    df = add_gaps(coerce(df), refs)[list(COLUMNS)]
    df.attrs["runs_from_store"] = len(tasks) - len(todo)
    df.attrs["runs_now"] = len(todo)
    return df


# ============================================================================ files
RESULT_SUFFIXES = (".csv", ".json", ".parquet", ".sqlite")


def write_results(df: pd.DataFrame, path: str | os.PathLike, *, overwrite: bool = False
                  ) -> Path:
    """Write a results table by suffix: .csv, .json (versioned document), .parquet (needs
    pyarrow) or .sqlite (table ``results``).

    Raises:
        OutputExistsError: the file exists and `overwrite` is False.
        FileFormatError: an unknown suffix, or the file cannot be written.
    """
    from slackopt.io import OutputExistsError

    p = Path(path)
    suf = p.suffix.lower()
    if suf not in RESULT_SUFFIXES:
        raise FileFormatError(p, "", f"unknown results format '{suf or '(none)'}'",
                              f"use one of {', '.join(RESULT_SUFFIXES)}")
    if p.exists() and not overwrite:
        raise OutputExistsError(f"{p}: file exists; pass --force (overwrite=True) to replace "
                                "it, or choose another path")
    if p.is_dir():
        raise FileFormatError(p, "", "is a directory", "give a file path")
    tmp = p.parent / f".{p.name}.{os.getpid()}.tmp"
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        if suf == ".csv":
            df.to_csv(tmp, index=False)
        elif suf == ".json":
            recs = json.loads(df.to_json(orient="records", double_precision=15))
            doc = {"format": RESULTS_FORMAT, "schema_version": 1, "columns": list(df.columns),
                   "rows": recs}
            tmp.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        elif suf == ".parquet":
            try:
                import pyarrow  # noqa: F401
            except ImportError:
                raise FileFormatError(p, "", "Parquet needs pyarrow, which is not installed",
                                      "pip install pyarrow, or write .csv/.json/.sqlite") \
                    from None
            df.to_parquet(tmp, index=False)
        else:
            con = sqlite3.connect(str(tmp))
            try:
                df.to_sql("results", con, index=False)
            finally:
                con.close()
        os.replace(tmp, p)
    except OSError as e:
        raise FileFormatError(p, "", f"cannot be written ({e})", "check the directory") \
            from None
    finally:
        if tmp.exists():
            tmp.unlink()
    return p


def read_results(path: str | os.PathLike, references: Any = None) -> pd.DataFrame:
    """Read a results table written by :func:`write_results` (or ``slackopt compare
    --out``), or the runs of a store; returns it with :data:`SCHEMA`'s dtypes.

    A store has no gap columns; they are computed here (with `references`, if given).

    Raises:
        FileFormatError: missing file, unknown suffix, or not a results table.
    """
    import pandas as pd

    p = Path(path)
    suf = p.suffix.lower()
    if not p.exists():
        raise FileFormatError(p, "", "file not found", "check the path")
    if suf not in RESULT_SUFFIXES + (".db",):
        raise FileFormatError(p, "", f"unknown results format '{suf or '(none)'}'",
                              f"give a {', '.join(RESULT_SUFFIXES)} file from slackopt compare")
    try:
        if suf == ".csv":
            df = pd.read_csv(p, keep_default_na=True, dtype={"params": str, "message": str})
        elif suf == ".json":
            doc = json.loads(p.read_text(encoding="utf-8"))
            if isinstance(doc, Mapping) and isinstance(doc.get("rows"), list):
                df = pd.DataFrame(doc["rows"])
            elif isinstance(doc, list):
                df = pd.DataFrame(doc)
            else:
                raise FileFormatError(p, "rows", "missing", "give the JSON that slackopt "
                                      "compare --out or --json wrote")
        elif suf == ".parquet":
            df = pd.read_parquet(p)
        else:
            con = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
            try:
                tables = {t for (t,) in con.execute(
                    "SELECT name FROM sqlite_master WHERE type='table'")}
                if "results" in tables:
                    df = pd.read_sql_query("SELECT * FROM results", con)
                elif "runs" in tables:
                    df = pd.read_sql_query("SELECT * FROM runs", con)
                    df = df.drop(columns=["key", "finished_at"], errors="ignore")
                    df = add_gaps(coerce(df), references)
                else:
                    raise FileFormatError(p, "", "has no 'results' or 'runs' table",
                                          "give a file slackopt compare wrote")
            finally:
                con.close()
    except SlackoptError:
        raise
    except Exception as e:  # pandas / sqlite / pyarrow parse errors
        raise FileFormatError(p, "", f"cannot be read as a results table ({type(e).__name__}: "
                              f"{e})", "give a file slackopt compare wrote") from None
    missing = [c for c in ("instance", "budget_fraction", "solver", "status") if c not in df]
    if missing:
        raise FileFormatError(p, missing[0], "column missing; not a slackopt compare table",
                              "give a file slackopt compare wrote")
    return coerce(df)


def summary_columns() -> Sequence[str]:
    """The columns the command line shows in its table."""
    return ("instance", "budget_fraction", "solver", "seed", "status", "step_time_s",
            "throughput", "planning_time_s", "gap_to_bound", "gap_to_best")


__all__ = ["COLUMNS", "SCHEMA", "KEY_COLUMNS", "SUITES", "ResultStore", "add_gaps", "coerce",
           "compare", "hard_deadline_s", "instance_hash", "load_references", "read_results",
           "write_results"]
