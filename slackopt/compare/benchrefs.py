"""The benchmark suite's reference values: ``references.json`` beside the suite's manifest
(format: :mod:`slackopt.compare.gaps`), updated from sweep rows that carry their plans
(``compare(..., plans=True)``, or the plans a store kept). ``benchmarks/bench_references.py``
is the command; this module is its logic.

The rules (:func:`update_references`), per instance of the suite and budget fraction f
(M = floor(f P) bytes, as compare computes it):

- **Plans are re-verified.** Every candidate plan (barrier-free, the runtime the bounds
  are proven for) is read back from its plan document and simulated under M by
  :func:`slackopt.simulate.simulate`; a plan that does not run is no candidate. A faster
  plan replaces the row's best only after its plan file has been written, read back and
  simulated again to the same step; ``best_plan`` then names that file (relative to the
  references file).
- **Bounds only from certified sources**: the rows' ``lower_bound_s`` whose
  ``bound_source`` is "certified" (a solver with ``certified_bounds``: milp), and the
  ideal step T*. A higher bound replaces the old one only if it is at most every
  re-simulated plan's step (the candidates' and the row's recorded best).
- **Rows never get worse**: the best step only falls, the bound only rises, each by more
  than ``VIOLATION_RTOL`` (1e-9, relative; a plan or bound that differs from the row's by
  float rounding alone changes nothing), a budget below the floor (a certified solver's
  "infeasible", with the smallest budget at which a plan runs) stays so.
- **Contradictions are bugs**, collected in :attr:`Update.bugs` (the command prints them
  and exits 1), never clamped: a certified bound above a simulated plan, a plan that runs
  under a budget said to be below the floor, a re-simulation that disagrees with the
  sweep's own simulation of the same plan.

Each row's ``provenance`` has two parts, ``lower_bound`` and ``best_plan``, each with
solver, settings, time_limit_s, seed, slackopt (version), code_id (the solver's code
identity when it ran in this process; None for rows taken from a store), date (UTC),
machine (its kind: architecture, CPUs, Python) and source ("run", "run (started from the
references' best plan)" for a run started from the row's best plan, "store NAME" with the
store's file name, or "T*"). Nothing in the file names a path or a host of the machine
that wrote it."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

from slackopt.compare.bench import VIOLATION_RTOL, Suite
from slackopt.compare.gaps import BENCH_REFERENCES_FORMAT, CERTIFIED, TRIVIAL, load_references
from slackopt.errors import FileFormatError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from slackopt.instance import Instance
    from slackopt.plan import Plan

PLANS_FOLDER = "plans"
"""Folder of the best plans, beside the references file."""
STARTED_NOTE = " (started from the references' best plan)"
"""Added to the provenance source of a row whose run started from its recorded best plan."""
_RESIM_RTOL = 1e-12
"""Two simulations of one plan under one budget agree within this (relative)."""


@dataclass
class Update:
    """What :func:`update_references` did: the rows written, one line per change, and the
    contradictions found (bugs; empty when all is consistent)."""

    rows: list[dict[str, Any]]
    changes: list[str] = field(default_factory=list)
    bugs: list[str] = field(default_factory=list)


def read_document(path: str | os.PathLike) -> dict[str, Any]:
    """The references document at `path` (checked by
    :func:`slackopt.compare.gaps.load_references`), or an empty one if the file is missing.

    Raises:
        FileFormatError: a file that exists but is not a valid bench references file.
    """
    p = Path(path)
    if not p.exists():
        return {"format": BENCH_REFERENCES_FORMAT, "version": 1, "rows": []}
    load_references(p)  # every row checked, naming the row and field
    doc = json.loads(p.read_text(encoding="utf-8"))
    if doc.get("format") != BENCH_REFERENCES_FORMAT:
        raise FileFormatError(p, "format", f"is not '{BENCH_REFERENCES_FORMAT}'",
                              "give the suite's references.json (bench format)")
    return doc


def rows_from_store(store: str | os.PathLike) -> pd.DataFrame:
    """Every run of a compare store as a table with its plans (column ``plan``), for
    :func:`update_references`.

    Raises:
        FileFormatError: a missing file, or one that is not a compare store.
    """
    from slackopt.compare.store import ResultStore
    from slackopt.compare.table import coerce

    if not Path(store).is_file():
        raise FileFormatError(store, "", "file not found", "give the --store file of the "
                              "slackopt bench or compare run that found the plan")
    with ResultStore(store) as st:
        raw = st.rows()
        plans = st.plans()
    keys = list(raw["key"])
    df = coerce(raw.drop(columns=["key", "finished_at"], errors="ignore"))
    df["plan"] = [plans.get(k) for k in keys]
    return df


def reference_plans(suite: Suite, path: str | os.PathLike,
                    budgets: Sequence[float] | None = None) -> dict[tuple[str, int], Plan]:
    """The best plans of the references file at `path` for `suite`'s instances, keyed as
    :func:`slackopt.compare.compare`'s ``start_plans`` takes them: (instance name, M in
    bytes) -> Plan. Rows without a plan are left out, and with `budgets` (fractions of P)
    the rows at other budgets (compare refuses a start plan outside its sweep); no file
    gives {}.

    Raises:
        FileFormatError: a malformed references file, or a plan file that does not read
            for its instance.
    """
    from slackopt.io import load_instance, load_plan

    p = Path(path)
    if not p.is_file():
        return {}
    doc = read_document(p)
    out: dict[tuple[str, int], Plan] = {}
    for e in suite.instances:
        rows = [r for r in doc["rows"] if r.get("instance_name") == e.name and r.get("best_plan")
                and (budgets is None or any(math.isclose(float(r["budget_fraction"]), float(b))
                                            for b in budgets))]
        if not rows:
            continue
        inst = load_instance(e.path)
        for r in rows:
            out[(inst.name, int(r["budget_bytes"]))] = load_plan(p.parent / r["best_plan"], inst)
    return out


def _machine() -> str:
    """The kind of machine (architecture, CPUs, Python), never its name."""
    return f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def portable_source(source: str) -> str:
    """A provenance source as the references file records it: a store by its file name
    (``"store /any/where/bench.sqlite"`` -> ``"store bench.sqlite"``), never a path of
    the machine that ran it; any other source as given."""
    if source.startswith("store "):
        return f"store {PurePath(source[len('store '):]).name}"
    return source


def _provenance(r: Mapping[str, Any] | None, source: str, when: str) -> dict[str, Any]:
    """The provenance of one result: the run `r` (a table row) or, for None, T*."""
    import slackopt

    base = {"slackopt": slackopt.__version__, "date": when, "machine": _machine()}
    if r is None:
        return {"solver": None, "settings": None, "time_limit_s": None, "seed": None,
                "code_id": None, **base, "source": "T*"}
    params = json.loads(r["params"]) if isinstance(r["params"], str) and r["params"] else {}
    code = None
    if source.startswith("run"):  # "run", or "run" + STARTED_NOTE
        from slackopt.compare.code_id import solver_code_id
        from slackopt.solver import get_solver

        code = solver_code_id(type(get_solver(r["solver"], **params)))
    tl, seed = r["time_limit_s"], r["seed"]
    return {"solver": r["solver"], "settings": params,
            "time_limit_s": None if tl is None or tl != tl else float(tl),
            "seed": None if seed is None or seed != seed else int(seed), "code_id": code,
            **base, "source": source}


def _stem(file: str) -> str:
    name = Path(file).name
    for suf in (".json.gz", ".json", ".gz"):
        if name.endswith(suf):
            return name[: -len(suf)]
    return name


def _certified_solver(name: str) -> bool:
    from slackopt.errors import SolverError
    from slackopt.solver import solver_class

    try:
        return bool(getattr(solver_class(name), "certified_bounds", False))
    except SolverError:
        return False


def write_plan(plan: Plan, instance: Instance, budget_bytes: int, step_s: float,
               path: Path, meta: Mapping[str, Any]) -> None:
    """Write `plan` to `path` only once the written file, read back and simulated under
    `budget_bytes`, runs in `step_s` (within 1e-12 relative); atomically (a temporary file
    beside it, then a rename).

    Raises:
        RuntimeError: the plan read back does not run, or runs in another time (a bug in
            the plan files or the evaluator).
    """
    from slackopt.io import load_plan, save_plan
    from slackopt.simulate import simulate

    tmp = path.parent / f".{path.name}.{os.getpid()}.tmp.json"
    try:
        save_plan(plan, tmp, instance, overwrite=True, meta=meta)
        ev = simulate(instance, load_plan(tmp, instance), budget_bytes)
        if not ev.feasible or abs(ev.step_time_s - step_s) > _RESIM_RTOL * step_s:
            raise RuntimeError(f"{path}: the plan read back runs in "
                               f"{ev.step_time_s if ev.feasible else 'no time (infeasible)'}"
                               f", not {step_s} s: a bug in the plan files or the evaluator")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def update_references(suite: Suite, df: pd.DataFrame, budgets: Sequence[float],
                      path: str | os.PathLike, *, source: str = "run",
                      order: Sequence[str] | None = None,
                      started: set[tuple[str, int]] | None = None) -> Update:
    """Update the references file at `path` from the table `df` (rules in the module
    docstring), for `suite`'s instances under `budgets` (fractions of P); write it
    atomically, with the new best plans under ``plans/`` beside it.

    Args:
        suite: the instances to update (other rows of the file are kept as they are).
        df: compare rows with a ``plan`` column (plan documents as JSON text).
        budgets: budget fractions.
        path: the references file (created if missing).
        source: "run" (the rows ran now) or "store PATH" (taken from a store);
            recorded in the provenance, a store by its file name
            (:func:`portable_source`).
        started: the (instance name, M in bytes) whose runs started from the row's best
            plan (``compare``'s ``start_plans``): their provenance source gets " (started
            from the references' best plan)".
        order: instance files in the order the rows are written (default: `suite`'s).

    Returns:
        An :class:`Update` (the rows written, the changes, the bugs found).

    Raises:
        FileFormatError: an existing references file that is malformed; an instance or a
            stored plan that cannot be read.
        RuntimeError: a plan file that does not read back to the same step.
    """
    from slackopt.compare.grid import instance_hash
    from slackopt.instance import budget_bytes
    from slackopt.io import load_instance

    p = Path(path)
    source = portable_source(source)
    doc = read_document(p)
    rows: list[dict[str, Any]] = [dict(r) for r in doc["rows"]]
    index = {(r["instance_name"], int(r["budget_bytes"])): k for k, r in enumerate(rows)}
    when = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    upd = Update(rows)
    (p.parent / PLANS_FOLDER).mkdir(parents=True, exist_ok=True)
    for e in suite.instances:
        inst = load_instance(e.path)
        h = instance_hash(inst)
        for frac in budgets:
            m = budget_bytes(inst, frac)
            src = source + STARTED_NOTE if started and (inst.name, m) in started else source
            cell = _Cell(inst, e.file, e.name, float(frac), m, src, when, p.parent, upd)
            k = index.get((e.name, m))
            row = _updated_row(cell, rows[k] if k is not None else None,
                               df[(df["instance_hash"] == h) & (df["budget_bytes"] == m)])
            if row is None:
                continue
            if k is None:
                index[(e.name, m)] = len(rows)
                rows.append(row)
            else:
                rows[k] = row
    files = list(order) if order is not None else [e.file for e in suite.instances]
    pos = {f: i for i, f in enumerate(files)}
    rows.sort(key=lambda r: (pos.get(r["instance"], len(pos)), r["instance"],
                             r["budget_fraction"]))
    out = {"format": BENCH_REFERENCES_FORMAT, "version": 1, "rows": rows}
    load_references(out)  # what is written must read back
    _write_json(p, out)
    upd.rows = rows
    return upd


@dataclass
class _Cell:
    """One row of the references being updated: the instance (its file and name), the
    budget (fraction of P and M in bytes), the provenance source and time, the folder of
    the references file, and the :class:`Update` that collects changes and bugs."""

    inst: Instance
    file: str
    name: str
    frac: float
    m: int
    src: str
    when: str
    folder: Path
    upd: Update

    @property
    def where(self) -> str:
        """The row, as changes and bugs name it."""
        return f"{self.file} at {self.frac:g} P (M = {self.m} bytes)"

    def fresh_row(self) -> dict[str, Any]:
        """The row before any run: bound T*, no plan, unsolved."""
        return {"instance": self.file, "instance_name": self.name,
                "budget_fraction": self.frac, "budget_bytes": self.m,
                "lower_bound_s": float(self.inst.ideal_time_s), "bound_source": TRIVIAL,
                "best_step_s": None, "best_plan": None, "status": "unsolved",
                "below_floor": False, "min_budget_bytes": None,
                "provenance": {"lower_bound": _provenance(None, self.src, self.when),
                               "best_plan": None}}


def _updated_row(cell: _Cell, old: dict[str, Any] | None, g: pd.DataFrame
                 ) -> dict[str, Any] | None:
    """The row of `cell` after the compare rows `g` of its instance and budget (rules in
    the module docstring): `old` (None for a new row) with the floor, the bound and the
    best plan they establish. A contradiction leaves the row as it was (None for an
    existing row; a new row stays fresh) and is added to ``cell.upd.bugs``."""
    upd = cell.upd
    n_bugs, n_changes = len(upd.bugs), len(upd.changes)
    row: dict[str, Any] = dict(old) if old else cell.fresh_row()
    if old is None:
        upd.changes.append(f"{cell.where}: new row, bound T* = "
                           f"{float(cell.inst.ideal_time_s)!r} s")
    records = g.to_dict("records")
    cands = _resimulated(cell, records)
    old_best = row["best_step_s"]
    steps = [c[0] for c in cands] + ([old_best] if old_best is not None else [])
    lowest = min(steps) if steps else math.inf
    cands = _floor(cell, row, records, cands, bool(steps), lowest)
    _bound(cell, row, records, lowest)
    _best_plan(cell, row, cands, old_best)
    row["status"] = _status(row)
    if len(upd.bugs) > n_bugs:  # a contradiction: nothing of this row changes
        del upd.changes[n_changes:]
        if old is not None:
            return None
        row = cell.fresh_row()
    return row


def _resimulated(cell: _Cell, records: list[dict[str, Any]]
                 ) -> list[tuple[float, Any, Mapping[str, Any]]]:
    """(step, plan, row) of each barrier-free plan of `records` that runs, re-simulated; a
    plan whose step is not its run's is a bug, not a candidate."""
    from slackopt.io import plan_from_dict
    from slackopt.simulate import simulate

    cands: list[tuple[float, Any, Mapping[str, Any]]] = []
    for r in records:
        if r.get("policy") != "barrier_free" or not isinstance(r.get("plan"), str):
            continue
        plan = plan_from_dict(json.loads(r["plan"]), cell.inst,
                              source=f"the plan of {r['solver']} on {cell.where}")
        ev = simulate(cell.inst, plan, cell.m)
        was = r["step_time_s"] if r["feasible"] else None
        now = ev.step_time_s if ev.feasible else None
        if (was is None) != (now is None) or (now is not None and abs(now - was) >
                                              _RESIM_RTOL * now):
            cell.upd.bugs.append(f"{cell.where}: {r['solver']}'s plan re-simulates to {now} "
                                 f"s, its run said {was} s")
            continue
        if now is not None:
            cands.append((float(now), plan, r))
    return cands


def _floor(cell: _Cell, row: dict[str, Any], records: list[dict[str, Any]],
           cands: list[tuple[float, Any, Mapping[str, Any]]], any_step: bool,
           lowest: float) -> list[tuple[float, Any, Mapping[str, Any]]]:
    """The floor: a certified solver's "no plan runs" marks the row below the floor,
    unless a plan runs (`any_step`, the fastest in `lowest` s: a bug). Returns the
    candidates left (none for a row below the floor)."""
    floor = [r for r in records if r["status"] == "infeasible"
             and _certified_solver(r["solver"])]
    upd = cell.upd
    if floor and any_step:
        upd.bugs.append(f"{cell.where}: {floor[0]['solver']} says no plan runs (smallest "
                        f"budget {floor[0]['min_budget_bytes']} bytes), yet a plan "
                        f"runs in {lowest!r} s")
    elif row["below_floor"] and cands:
        upd.bugs.append(f"{cell.where}: the references say no plan runs, yet "
                        f"{cands[0][2]['solver']}'s plan runs in {cands[0][0]!r} s")
        cands = []
    elif floor and not row["below_floor"]:
        mb = floor[0]["min_budget_bytes"]
        row.update(below_floor=True, lower_bound_s=None, bound_source=None,
                   min_budget_bytes=None if mb is None or mb != mb else int(mb))
        row["provenance"] = {"lower_bound": _provenance(floor[0], cell.src, cell.when),
                             "best_plan": None}
        upd.changes.append(f"{cell.where}: below the floor (smallest budget "
                           f"{row['min_budget_bytes']} bytes)")
    return cands


def _bound(cell: _Cell, row: dict[str, Any], records: list[dict[str, Any]],
           lowest: float) -> None:
    """The bound: the highest certified bound of `records` raises the row's, unless it is
    above a plan's step (`lowest` s: a bug)."""
    lbs = [r for r in records if r.get("bound_source") == CERTIFIED
           and r["lower_bound_s"] == r["lower_bound_s"]]
    top = max(lbs, key=lambda r: r["lower_bound_s"]) if lbs else None
    old_lb = row["lower_bound_s"]
    if top is not None and top["lower_bound_s"] > lowest * (1 + VIOLATION_RTOL):
        cell.upd.bugs.append(f"{cell.where}: {top['solver']}'s certified bound "
                             f"{top['lower_bound_s']!r} s is above a re-simulated plan's "
                             f"step {lowest!r} s (not recorded)")
    elif top is not None and not row["below_floor"] and (
            old_lb is None or top["lower_bound_s"] > old_lb * (1 + VIOLATION_RTOL)):
        lb = float(top["lower_bound_s"])
        row.update(lower_bound_s=lb, bound_source=CERTIFIED if lb > float(
            cell.inst.ideal_time_s) * (1 + 1e-9) else TRIVIAL)
        row["provenance"] = {**row["provenance"],
                             "lower_bound": _provenance(top, cell.src, cell.when)}
        cell.upd.changes.append(f"{cell.where}: lower bound {old_lb!r} -> {lb!r} s "
                                f"({top['solver']}, {row['bound_source']})")


def _best_plan(cell: _Cell, row: dict[str, Any],
               cands: list[tuple[float, Any, Mapping[str, Any]]],
               old_best: float | None) -> None:
    """The best plan: the fastest candidate replaces the row's (its plan file written
    under ``plans/``) when faster, unless it runs below the row's bound or the recorded
    plan does not stand for its step (bugs)."""
    if not cands or row["below_floor"]:
        return
    step, plan, r = min(cands, key=lambda c: c[0])
    lb = row["lower_bound_s"]
    upd, m = cell.upd, cell.m
    if lb is not None and lb > step * (1 + VIOLATION_RTOL):
        upd.bugs.append(f"{cell.where}: {r['solver']}'s plan runs in {step!r} s, below "
                        f"the recorded bound {lb!r} s (not recorded)")
    elif old_best is not None and step < old_best * (1 - VIOLATION_RTOL) and (
            why := _recorded_plan_problem(row, cell.folder, cell.inst, m)) is not None:
        upd.bugs.append(f"{cell.where}: {why} (the row is left as it is; regenerate "
                        "it, or restore its plan file)")
    elif old_best is None or step < old_best * (1 - VIOLATION_RTOL):
        rel = f"{PLANS_FOLDER}/{_stem(cell.file)}_M{m}.json"
        write_plan(plan, cell.inst, m, step, cell.folder / rel,
                   {"instance_file": cell.file, "budget_bytes": m,
                    "budget_fraction": cell.frac, "step_time_s": step,
                    "solver": r["solver"], "params": r["params"]})
        row.update(best_step_s=step, best_plan=rel)
        row["provenance"] = {**row["provenance"],
                             "best_plan": _provenance(r, cell.src, cell.when)}
        upd.changes.append(f"{cell.where}: best step {old_best!r} -> {step!r} s "
                           f"({r['solver']})")


def _recorded_plan_problem(row: Mapping[str, Any], folder: Path, inst: Instance,
                           m: int) -> str | None:
    """Why the row's recorded best plan (``best_plan``, relative to `folder`) does not
    stand for its ``best_step_s`` under `m` bytes: a missing or unreadable file, a plan
    that does not run, or one that runs in another time (beyond ``_RESIM_RTOL``); None
    when it does. Checked before a better plan overwrites it, so that a row edited by
    hand never costs a faster plan file."""
    from slackopt.io import load_plan
    from slackopt.simulate import simulate

    f = folder / str(row["best_plan"])
    try:
        ev = simulate(inst, load_plan(f, inst), m)
    except (OSError, FileFormatError) as e:
        return f"its best_plan {f} cannot be read ({e})"
    best = float(row["best_step_s"])
    if not ev.feasible or abs(ev.step_time_s - best) > _RESIM_RTOL * best:
        now = f"{ev.step_time_s!r} s" if ev.feasible else "does not run"
        return f"its best_plan {f} runs in {now}, not in its best_step_s {best!r} s"
    return None


def _status(row: Mapping[str, Any]) -> str:
    """"infeasible" below the floor; "optimal" when the best step is within
    :data:`slackopt.result.OPTIMAL_REL_TOL` of the bound; "bounded" (a certified bound)
    or "feasible" (only T*) with a plan; "unsolved" without one."""
    from slackopt.result import OPTIMAL_REL_TOL

    if row.get("below_floor"):
        return "infeasible"
    lb, best = row.get("lower_bound_s"), row.get("best_step_s")
    if best is None:
        return "unsolved"
    if lb is not None and best - lb <= OPTIMAL_REL_TOL * lb:
        return "optimal"
    return "bounded" if row.get("bound_source") == CERTIFIED else "feasible"


def _write_json(path: Path, doc: Mapping[str, Any]) -> None:
    """Write `doc` to `path` atomically (temporary file, fsync, rename)."""
    tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps(doc, indent=1, allow_nan=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        raise FileFormatError(path, "", f"cannot be written ({e.strerror or e})",
                              "check that the folder is writable") from None
    finally:
        if tmp.exists():
            tmp.unlink()


__all__ = ["PLANS_FOLDER", "Update", "read_document", "rows_from_store", "update_references",
           "write_plan"]
