"""Runs in local worker processes (``compare(..., workers=N)``): a spawn-context process
pool that keeps the instances per worker, leaves Ctrl-C to the parent, and reruns the
runs of a crashed worker one per process so that only the culprit becomes an error row."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

from slackopt.compare.grid import Task
from slackopt.compare.runner import empty_run, execute, transport_error
from slackopt.errors import SlackoptError
from slackopt.instance import Instance

_WORKER_INSTANCES: dict[str, Instance] = {}


def _init_worker(instances: dict[str, Instance], parent_pid: int) -> None:
    """Process-pool initializer: keep the instances; leave Ctrl-C to the parent; end
    within about a second when the parent dies (:func:`slackopt.parentwatch.exit_with_parent`)."""
    from slackopt.parentwatch import exit_with_parent, worker_ignores_sigint

    worker_ignores_sigint()
    exit_with_parent(parent_pid)
    _WORKER_INSTANCES.clear()
    _WORKER_INSTANCES.update(instances)


def _pool_execute(task: Task) -> dict[str, Any]:
    return execute(_WORKER_INSTANCES[task.instance_hash], task)


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


def run_processes(tasks: list[Task], instances: dict[str, Instance], workers: int,
                  on_result: Callable[[Task, dict], None]) -> None:
    """Run `tasks` in `workers` spawned local processes; `on_result(task, run columns)`
    is called in the parent as each run returns. A worker that dies takes its runs to a
    second round, one process per run, so only the culprit becomes an error row; Ctrl-C
    or any other exception kills the pool and is passed on.

    Raises:
        SlackoptError: the processes cannot start at all (the message gives the fix).
    """
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    from slackopt.parentwatch import sigint_blocked

    # spawn: no fork of a parent that may hold threads (progress bar, Jupyter, Dask).
    ctx = multiprocessing.get_context("spawn")
    used = {t.instance_hash for t in tasks}
    payload = {h: instances[h] for h in used}
    pending = list(tasks)
    survivors: list[Task] = []
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
                    row = transport_error(e)
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
            row = empty_run()
            row["message"] = ("the worker process died while running this solver (crash or "
                              "out of memory)")
        except Exception as e:
            row = transport_error(e)
        except BaseException:
            _kill_pool(ex)
            raise
        ex.shutdown(wait=True)
        finished += 1
        on_result(t, row)
