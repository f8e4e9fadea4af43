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
- **Resumable.** With ``store=PATH`` every row is written to an SQLite file the moment it
  finishes, keyed by (instance name, instance content hash, budget bytes, solver,
  parameters, seed, time limit, the solver's code identity:
  :func:`slackopt.compare.code_id.solver_code_id`, so edited solver code never returns
  stale rows, and the digest of the plan a run started from, if any), with the run's plan
  beside it (:meth:`ResultStore.plans`; ``compare(..., plans=True)`` returns them).
  Running the same sweep again skips the finished runs and only adds the missing ones; a
  key is never written twice and a stored row is never replaced, except ``"error"`` rows,
  which every rerun runs again (``"timeout"`` rows count as finished). A run stopped by
  Ctrl-C is not a row: the interrupt ends the sweep and the rerun does that run. A file
  that is not a slackopt store is never touched (a 0-byte file or an SQLite file without
  tables, as a kill during creation leaves, holds no data and becomes the store). The time
  limit is part of the key: the same solver under another limit is another experiment.
- **Parallel.** ``workers=N`` runs in N local processes; ``scheduler="tcp://HOST:PORT"``
  (or a ``distributed.Client``) runs on a Dask cluster (the ``[dist]`` extra). Rows come
  back in the grid's order whatever the worker count, and for solvers that are
  deterministic given their seed (not stopped by the clock) every column except
  ``planning_time_s`` is the same.
- **Gaps.** ``best_lower_bound_s`` is the largest lower bound known for the instance and
  budget: the rows' ``lower_bound_s``, a references file's ``lower_bound_s``, and the
  ideal step T* (every plan's step is >= T*, docs/model.md invariant 2); where each comes
  from is in ``bound_source`` (a row's own bound: "T* (trivial)", "certified" from a solver
  with ``certified_bounds = True`` such as milp, "solver-reported") and
  ``best_bound_source`` (the same, or "reference"). ``best_step_s``
  is the smallest feasible step among the rows and the references' ``best_step_s``.
  The references file's format: :mod:`slackopt.compare.gaps`. ``gap_to_bound`` (and
  ``best_lower_bound_s``) is given only for rows whose plan ran under the barrier-free
  runtime (column ``policy``), the runtime the bounds are proven for; other rows get NaN.
  ``gap_to_best`` is given for every row.

One job per module: :mod:`~slackopt.compare.grid` (specs -> runs, store keys),
:mod:`~slackopt.compare.code_id` (the solver code identity in every key),
:mod:`~slackopt.compare.runner` (one run under its deadline -> its columns),
:mod:`~slackopt.compare.pool` (local processes), :mod:`~slackopt.compare.cluster` (Dask),
:mod:`~slackopt.compare.store` (the SQLite store), :mod:`~slackopt.compare.gaps`
(references and gaps), :mod:`~slackopt.compare.table` (columns and dtypes),
:mod:`~slackopt.compare.progress` (progress on stderr), :mod:`~slackopt.compare.files`
(results files). This module runs the sweep: it builds the grid, reads the store, sends
the missing runs to one of the three executors and adds the gaps.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from slackopt.compare.cluster import SCHEDULER_TIMEOUT_S, check_scheduler_address, run_dask
from slackopt.compare.code_id import solver_code_id
from slackopt.compare.files import RESULT_SUFFIXES, RESULTS_FORMAT, read_results, write_results
from slackopt.compare.gaps import REFERENCES_FORMAT, add_gaps, load_references
from slackopt.compare.grid import (
    KEY_COLUMNS,
    SUITES,
    InstanceLike,
    SolverSpec,
    Task,
    canon_json,
    instance_hash,
    key_text,
    load_instances,
    plan_digest,
    requested_fraction,
    resolve_solvers,
    run_key,
)
from slackopt.compare.pool import run_processes
from slackopt.compare.progress import progress_bar
from slackopt.compare.runner import execute
from slackopt.compare.store import STORE_FORMAT, STORE_SCHEMA_VERSION, ResultStore
from slackopt.compare.table import COLUMNS, GAP_COLUMNS, SCHEMA, coerce
from slackopt.errors import SlackoptError
from slackopt.instance import Instance, budget_bytes
from slackopt.plan import Plan
from slackopt.solver import check_worker_importable
from slackopt.solverbase import (
    HARD_TIMEOUT_FACTOR,
    HARD_TIMEOUT_SLACK_S,
    check_time_limit,
    hard_deadline_s,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def _check_start_plans(start_plans: Any) -> dict[tuple[str, int], Plan]:
    """`start_plans` as a dict {(instance name, M in bytes): Plan} ({} for None).

    Raises:
        SlackoptError: not a mapping, a key that is not (name, bytes), or a value that is
            not a Plan.
    """
    if start_plans is None:
        return {}
    if not isinstance(start_plans, Mapping):
        raise SlackoptError(f"start_plans must map (instance name, budget in bytes) to a Plan, "
                            f"got {type(start_plans).__name__}")
    out: dict[tuple[str, int], Plan] = {}
    for k, v in start_plans.items():
        if not (isinstance(k, tuple) and len(k) == 2 and isinstance(k[0], str)
                and isinstance(k[1], (int, np.integer)) and not isinstance(k[1], bool)):
            raise SlackoptError(f"start_plans key {k!r}: give (instance name, budget in bytes "
                                "as an int), e.g. (inst.name, budget_bytes(inst, 0.5))")
        if not isinstance(v, Plan):
            raise SlackoptError(f"start_plans[{k!r}] is a {type(v).__name__}, not a Plan "
                                "(read a plan file with slackopt.io.load_plan)")
        out[(k[0], int(k[1]))] = v
    return out


def _check_time_limits(time_limits: Any, names: set[str]) -> dict[str, float | None]:
    """`time_limits` as a dict {solver name: seconds or None} ({} for None).

    Raises:
        SlackoptError: not a mapping, or a key that is not the name of a solver in `names`.
        SolverError: a limit that is not None or a finite number >= 0.
    """
    if time_limits is None:
        return {}
    if not isinstance(time_limits, Mapping):
        raise SlackoptError("time_limits must map solver names to seconds, e.g. "
                            f"{{'milp': 300}}; got {type(time_limits).__name__}")
    out: dict[str, float | None] = {}
    for k, v in time_limits.items():
        if k not in names:
            raise SlackoptError(f"time limit for {k!r} (--time-limit-for, time_limits): this "
                                "sweep does not run that solver; its solvers are "
                                f"{', '.join(sorted(names))}")
        out[k] = check_time_limit(v)
    return out


def compare(
    instances: Iterable[InstanceLike] | InstanceLike,
    solvers: Iterable[SolverSpec] | str,
    budgets: Iterable[float | int | str] | float | int | str,
    *,
    seeds: Iterable[int | None] = (None,),
    time_limit_s: float | None = None,
    time_limits: Mapping[str, float | None] | None = None,
    store: str | os.PathLike | None = None,
    workers: int = 1,
    scheduler: Any = None,
    progress: bool = True,
    references: str | os.PathLike | Mapping[str, Any] | list | None = None,
    plans: bool = False,
    start_plans: Mapping[tuple[str, int], Plan] | None = None,
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
        time_limits: per solver name, a time limit (s, or None for none) that replaces
            `time_limit_s` for that solver's runs (``{"milp": 300}`` with
            ``time_limit_s=60``: every other solver at 60 s). The limit is part of each
            run's store key and of its row.
        store: SQLite file that keeps finished runs (created if missing): runs already in
            it are not redone, new ones are added as they finish.
        workers: local processes (1: run here, in this process; 0: one per CPU).
        scheduler: a Dask scheduler address ("tcp://HOST:PORT") or a
            ``distributed.Client``; overrides `workers`. Needs the [dist] extra.
        progress: show a progress bar (runs done and left) on stderr.
        references: a references file (see the module docstring), its parsed document, or
            None; its bounds and best steps join the gaps.
        plans: add a column ``plan`` (after :data:`COLUMNS`): each run's plan as a plan
            file document in JSON text (:func:`slackopt.io.plan_from_dict` reads it), None
            for a run without a plan or one read from a store that kept none. A store
            keeps the plans whether or not they are asked for here
            (:meth:`ResultStore.plans`).
        start_plans: plans to start from, by (instance name, M in bytes): each run of that
            instance and budget gets it as :func:`slackopt.solve`'s ``start_plan`` (a
            plan to beat; milp and genetic search from it). A run started from a plan is
            another experiment: the plan's digest is part of its store key
            (:func:`~slackopt.compare.grid.plan_digest`).

    Returns:
        A DataFrame with the columns :data:`COLUMNS`, one row per (instance, budget,
        solver, seed) in that nesting order (duplicates in the grid are run once). Times
        in s, sizes in bytes, gaps and throughput dimensionless (``throughput`` = T*/T).
        ``df.attrs`` holds ``runs_from_store`` (rows read back from `store`) and
        ``runs_now`` (runs done by this call).

    Raises:
        SolverError: an unknown solver name or parameters it rejects, or a time limit
            that is not a finite number >= 0 (:func:`slackopt.solverbase.check_time_limit`).
        SlackoptError: `time_limits` that is not a mapping of names to time limits, or
            names a solver the sweep does not run.
        BudgetError: a budget that cannot be parsed.
        FileFormatError: an unreadable instance or references file, or a store file that
            is not a slackopt store.
        SlackoptError: no instances, bad `workers`, an unreachable Dask scheduler, or
            `start_plans` that is not such a mapping or has a key no run of the sweep has.
        PlanError: a start plan whose tensors are not those of its instance.
        KeyboardInterrupt: passed on (finished runs are already in the store).
    """
    import pandas as pd

    insts = load_instances(instances)
    specs = resolve_solvers(solvers)
    if isinstance(budgets, (str, int, float)):
        budgets = [budgets]
    budgets = list(budgets)
    if not budgets:
        raise SlackoptError("no budgets given")
    seeds = [None if s is None else int(s) for s in seeds] or [None]
    time_limit_s = check_time_limit(time_limit_s)
    limits = _check_time_limits(time_limits, {name for name, _, _ in specs})
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise SlackoptError(f"workers must be an integer >= 0, got {workers!r}")
    if workers == 0:
        workers = os.cpu_count() or 1
    if workers > 1 or scheduler is not None:
        for _, _, obj in specs:  # before any process starts
            check_worker_importable(type(obj))
    refs = references if isinstance(references, list) else load_references(references)
    if isinstance(scheduler, str):
        check_scheduler_address(scheduler)  # before any output or store

    tasks, meta, by_hash = _grid(insts, budgets, specs, seeds, time_limit_s, limits,
                                 _check_start_plans(start_plans))
    rows, plan_texts, n_now = _run_grid(tasks, meta, by_hash, store=store, plans=plans,
                                        progress=progress, scheduler=scheduler,
                                        workers=workers)

    df = pd.DataFrame([rows[t.key] for t in tasks])
    df = add_gaps(coerce(df), refs)[list(COLUMNS)]
    if plans:
        df["plan"] = pd.Series([plan_texts.get(t.key) for t in tasks], dtype=object)
    df.attrs["runs_from_store"] = len(tasks) - n_now
    df.attrs["runs_now"] = n_now
    return df


def _descriptors(insts: list[Instance]) -> tuple[dict[str, Instance], dict[int, dict[str, Any]]]:
    """The instances by content hash, and each instance's descriptor columns (name, hash,
    A, P, T*, T_F, hideable fraction) by ``id``."""
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
    return by_hash, desc


def _grid(insts: list[Instance], budgets: list[Any], specs: list[tuple[str, dict, Any]],
          seeds: list[int | None], time_limit_s: float | None,
          limits: Mapping[str, float | None], starts: Mapping[tuple[str, int], Plan]
          ) -> tuple[list[Task], dict[str, dict[str, Any]], dict[str, Instance]]:
    """The runs of :func:`compare`, nested instance, budget, solver, seed, each once.

    Returns:
        (the tasks, each run's row columns known before it runs by store key, the
        instances by content hash).

    Raises:
        PlanError: a start plan whose tensors are not those of its instance.
        SlackoptError: a start plan no run of the sweep has.
    """
    by_hash, desc = _descriptors(insts)
    used: set[tuple[str, int]] = set()
    tasks: list[Task] = []
    meta: dict[str, dict[str, Any]] = {}  # key -> descriptor + budget columns
    for inst in insts:
        d = desc[id(inst)]
        for b in budgets:
            m = budget_bytes(inst, b)
            frac = requested_fraction(b, m, inst.P)
            start = starts.get((inst.name, int(m)))
            if start is not None:
                start.check(inst)
                used.add((inst.name, int(m)))
            digest = plan_digest(start) if start is not None else None
            for name, params, obj in specs:
                pj = canon_json(params)
                code = solver_code_id(type(obj))
                tl = limits.get(name, time_limit_s)
                for seed in seeds:
                    key = key_text(inst.name, d["instance_hash"], m, name, pj, seed, tl, code,
                                   digest)
                    if key in meta:
                        continue
                    meta[key] = {**d, "budget_fraction": frac, "budget_bytes": int(m),
                                 "solver": name, "params": pj, "seed": seed,
                                 "time_limit_s": math.nan if tl is None else tl}
                    tasks.append(Task(len(tasks), key, d["instance_hash"], m, name, params,
                                      pj, obj, seed, tl, start))
    if len(used) < len(starts):
        grid = sorted({(inst.name, int(budget_bytes(inst, b))) for inst in insts for b in budgets})
        raise SlackoptError(
            f"start_plans: {sorted(set(starts) - used)} match no (instance name, budget in "
            f"bytes) of the sweep; its pairs are {grid}")
    return tasks, meta, by_hash


def _run_grid(tasks: list[Task], meta: Mapping[str, dict[str, Any]],
              by_hash: Mapping[str, Instance], *, store: str | os.PathLike | None,
              plans: bool, progress: bool, scheduler: Any, workers: int
              ) -> tuple[dict[str, dict[str, Any]], dict[str, str], int]:
    """Read the runs `store` holds, run the others (on `scheduler`, `workers` local
    processes, or here) and add each to the store as it finishes.

    Returns:
        (each run's row by store key, the plans as JSON text by store key when `plans`,
        the number of runs done now).
    """
    rows: dict[str, dict[str, Any]] = {}
    plan_texts: dict[str, str] = {}
    st = ResultStore(store) if store is not None else None
    try:
        if st is not None:
            stored = st.rows([t.key for t in tasks], retry_errors=True)
            for rec in stored.to_dict("records"):
                k = rec.pop("key")
                rec.pop("finished_at", None)
                rows[k] = {**rec, **meta[k]}  # descriptors as requested now
            if plans:
                plan_texts.update(st.plans(rows))
        todo = [t for t in tasks if t.key not in rows]

        with progress_bar(len(tasks), len(tasks) - len(todo), progress) as advance:
            def on_result(t: Task, run: dict[str, Any]) -> None:
                transient = run.pop("_transient", False)
                plan = run.pop("_plan", None)
                row = {**meta[t.key], **run}
                if st is not None and not transient:
                    st.add(t.key, row, plan)
                if plans and plan is not None:
                    plan_texts[t.key] = plan
                rows[t.key] = row
                advance(1)

            if not todo:
                pass
            elif scheduler is not None:
                run_dask(todo, by_hash, scheduler, on_result)
            elif workers > 1 and len(todo) > 1:
                run_processes(todo, by_hash, min(workers, len(todo)), on_result)
            else:
                for t in todo:
                    on_result(t, execute(by_hash[t.instance_hash], t))
    finally:
        if st is not None:
            st.close()
    return rows, plan_texts, len(todo)


__all__ = ["COLUMNS", "GAP_COLUMNS", "HARD_TIMEOUT_FACTOR", "HARD_TIMEOUT_SLACK_S",
           "KEY_COLUMNS", "REFERENCES_FORMAT", "RESULTS_FORMAT", "RESULT_SUFFIXES",
           "SCHEDULER_TIMEOUT_S", "SCHEMA", "STORE_FORMAT", "STORE_SCHEMA_VERSION", "SUITES",
           "ResultStore", "add_gaps", "coerce", "compare", "hard_deadline_s", "instance_hash",
           "load_references", "read_results", "run_key", "write_results"]
