"""One run of a sweep: call the solver under its hard deadline, score its plan, and turn
the outcome (a plan, a solver's exception, a timeout) into the run's columns."""

from __future__ import annotations

import contextlib
import json
import math
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from slackopt.compare.gaps import bound_source
from slackopt.compare.grid import Task
from slackopt.errors import interrupt_cause
from slackopt.instance import Instance
from slackopt.solverbase import HARD_TIMEOUT_FACTOR, HARD_TIMEOUT_SLACK_S, hard_deadline_s


class _HardTimeout(BaseException):
    """Raised inside a run past its hard deadline (BaseException: solvers that catch
    Exception do not swallow it)."""


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


def empty_run() -> dict[str, Any]:
    """The run columns of a run without a result (status "error", no plan, NaN times)."""
    return {"status": "error", "message": "", "policy": None, "feasible": False,
            "step_time_s": math.nan,
            "throughput": math.nan, "stall_fwd_s": math.nan, "stall_bwd_s": math.nan,
            "recompute_s": math.nan, "d2h_bytes": None, "h2d_bytes": None,
            "evictions": None, "peak_bytes": None, "planning_time_s": math.nan,
            "objective_s": math.nan, "lower_bound_s": math.nan, "bound_source": None,
            "min_budget_bytes": None,
            "n_keep": None, "n_swap": None, "n_recomp": None}


def transport_error(e: BaseException) -> dict[str, Any]:
    """An error row for a run that never reached its solver (not stored: a rerun retries)."""
    row = empty_run()
    row["message"] = (f"could not run in a worker: {type(e).__name__}: {e} (solver objects "
                      "must be importable by the workers: define them in a module, not in a "
                      "notebook, or use workers=1)")
    row["_transient"] = True
    return row


def _num(x: Any) -> float:
    return math.nan if x is None else float(x)


def plan_text(plan: Any, instance: Instance, task: Task) -> str:
    """The plan file document (:func:`slackopt.io.plan_to_dict`) of a run's plan as JSON
    text, with the run in its ``meta`` (solver, params, budget_bytes, seed, time_limit_s):
    what the store keeps beside the row (:meth:`ResultStore.add`)."""
    from slackopt.io import plan_to_dict

    meta = {"solver": task.solver, "params": task.params_json,
            "budget_bytes": int(task.budget_bytes), "seed": task.seed,
            "time_limit_s": task.time_limit_s}
    return json.dumps(plan_to_dict(plan, instance, meta), separators=(",", ":"))


def execute(instance: Instance, task: Task) -> dict[str, Any]:
    """Run one task and return its run fields (never raises for a solver's failure).

    A run with a plan also has ``_plan``: the plan file document as JSON text
    (:func:`plan_text`), which :func:`slackopt.compare.compare` takes out of the row."""
    from slackopt.solver import solve

    row = empty_run()
    hard = hard_deadline_s(task.time_limit_s)
    t0 = time.perf_counter()
    try:
        with _deadline(hard):
            res = solve(instance, task.solver_obj, task.budget_bytes,
                        time_limit_s=task.time_limit_s, seed=task.seed,
                        start_plan=task.start_plan)
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
               objective_s=_num(res.objective_s), lower_bound_s=_num(res.lower_bound_s),
               bound_source=bound_source(res.lower_bound_s, instance.ideal_time_s,
                                         bool(getattr(task.solver_obj, "certified_bounds",
                                                      False))))
    mb = (res.info or {}).get("min_budget_bytes")
    row["min_budget_bytes"] = int(mb) if isinstance(mb, (int, float, np.number)) \
        and math.isfinite(mb) else None
    if res.plan is not None:
        counts = res.plan.counts()
        row.update(n_keep=counts["keep"], n_swap=counts["swap"], n_recomp=counts["recomp"],
                   policy=res.plan.policy)
        row["_plan"] = plan_text(res.plan, instance, task)
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
