"""Gaps of a results table: to the best lower bound and to the best simulated plan,
from the rows themselves and a references file.

Two references formats are read (:func:`load_references`). The small suite's
(``instances/small/references.json``), written with the exact MILP::

    {"format": "slackopt-references", "schema_version": 1,
     "entries": [{"instance": "chain8-seed0_a100-pcie4", "budget_bytes": 726924246,
                  "budget_fraction": 0.7, "lower_bound_s": 0.0161, "best_step_s": 0.0163,
                  "status": "optimal", "solver": "milp", "settings": {...}, "date": "..."}]}

Entries match rows by instance name and budget bytes (or, without bytes, by budget
fraction within 1e-6). And the benchmark suite's (``instances/bench/references.json``,
written by ``benchmarks/bench_references.py``; :mod:`slackopt.compare.benchrefs`)::

    {"format": "slackopt-bench-references", "version": 1,
     "rows": [{"instance": "llama3-8b-4k_h100-pcie5.json.gz", "instance_name": "...",
               "budget_fraction": 0.3, "budget_bytes": 123, "lower_bound_s": 0.51,
               "bound_source": "certified", "best_step_s": 0.52,
               "best_plan": "plans/....json", "status": "bounded", "below_floor": false,
               "min_budget_bytes": null, "provenance": {...}}]}

whose rows match by ``instance_name`` and ``budget_bytes``, and whose bounds come only
from certified sources (``bound_source`` "certified" or "T* (trivial)").
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from slackopt.errors import FileFormatError, json_problem

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

REFERENCES_FORMAT = "slackopt-references"
BENCH_REFERENCES_FORMAT = "slackopt-bench-references"
TRIVIAL, CERTIFIED, REPORTED, REFERENCE = ("T* (trivial)", "certified", "solver-reported",
                                           "reference")
BOUND_SOURCES = (TRIVIAL, CERTIFIED, REPORTED)
"""Where a row's ``lower_bound_s`` comes from (column ``bound_source``): the ideal step T*
(every op once, in order: valid for every plan, and all that a heuristic states); a bound
of a solver that certifies its bounds (class attribute ``certified_bounds = True``: milp,
whose ``lower_bound_s`` is its best certified bound, solvers/milp/__init__.py); any other
solver's bound, as reported. ``best_bound_source`` adds :data:`REFERENCE`: the references
file's bound."""
_TRIVIAL_RTOL = 1e-9
"""A bound within this relative distance of T* is T* (float rounding of the same sum)."""


def bound_source(lower_bound_s: float | None, ideal_time_s: float,
                 certified: bool) -> str | None:
    """Where a solver's lower bound comes from (one of :data:`BOUND_SOURCES`).

    Args:
        lower_bound_s: the bound (s), None or NaN for none.
        ideal_time_s: the instance's ideal step T* (s).
        certified: whether the solver certifies its bounds (``certified_bounds``).

    Returns:
        None without a bound; :data:`TRIVIAL` for a bound at most T* (within 1e-9
        relative); else :data:`CERTIFIED` or :data:`REPORTED`.
    """
    if lower_bound_s is None or lower_bound_s != lower_bound_s:
        return None
    if float(lower_bound_s) <= float(ideal_time_s) * (1 + _TRIVIAL_RTOL):
        return TRIVIAL
    return CERTIFIED if certified else REPORTED


def load_references(references: str | os.PathLike | Mapping[str, Any] | None
                    ) -> list[dict[str, Any]]:
    """Read a references file (or an already parsed document) into its entries.

    Reads both formats of the module docstring: ``slackopt-references`` (schema_version 1,
    ``entries``) and ``slackopt-bench-references`` (version 1, ``rows``). A bench row
    becomes an entry whose ``instance`` is the row's ``instance_name`` (the name rows are
    matched by), with the row's ``instance`` (its file, relative to the manifest) kept as
    ``instance_file``; every key of :data:`BENCH_ROW_KEYS` is required (null where the row
    has no value), one row per instance name and ``budget_bytes``, a ``status`` of
    :data:`BENCH_ROW_STATUSES`, ``best_plan`` a relative path without ".." given exactly
    when ``best_step_s`` is (read from a file: a file beside it that exists), and its
    ``lower_bound_s`` must come from a certified source (``bound_source`` "certified" or
    "T* (trivial)") and lie at most at its ``best_step_s`` (within 1e-9 relative: a bound
    above a plan's step is wrong).

    Args:
        references: path of a references JSON file, the parsed document, or None (no
            references).

    Returns:
        The entries, each with at least ``instance`` and one of ``budget_bytes`` /
        ``budget_fraction``; ``lower_bound_s`` and ``best_step_s`` are floats or None.

    Raises:
        FileFormatError: missing or unreadable file, wrong format, or a malformed entry
            or row (naming it, e.g. ``rows[3]``, and the field).
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
            raise FileFormatError(src, "", json_problem(e),
                                  "give a references.json file") from None
    if isinstance(doc, Mapping) and doc.get("format") == BENCH_REFERENCES_FORMAT:
        return _bench_rows(doc, src, None if isinstance(references, Mapping)
                           else Path(references).parent)
    fix = ('write {"format": "slackopt-references", "schema_version": 1, "entries": '
           '[{"instance": ..., "budget_bytes": ..., "lower_bound_s": ..., "best_step_s": ...}]}')
    if not isinstance(doc, Mapping) or doc.get("format") != REFERENCES_FORMAT:
        raise FileFormatError(src, "format", f"is not '{REFERENCES_FORMAT}' or "
                              f"'{BENCH_REFERENCES_FORMAT}'", fix)
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
        if bb is not None and not _is_count(bb):
            raise FileFormatError(src, f"{where}.budget_bytes", "is not an integer >= 0", fix)
        if bf is not None and (isinstance(bf, bool) or not isinstance(bf, (int, float))):
            raise FileFormatError(src, f"{where}.budget_fraction", "is not a number", fix)
        if bb is None and bf is None:
            raise FileFormatError(src, where, "has neither budget_bytes nor budget_fraction",
                                  fix)
        out.append({**e, **_times(e, src, where, fix)})
    return out


def _is_count(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, int) and v >= 0


def _times(e: Mapping[str, Any], src: str, where: str, fix: str) -> dict[str, float | None]:
    """An entry's ``lower_bound_s`` and ``best_step_s`` as floats or None (checked)."""
    out: dict[str, float | None] = {}
    for k in ("lower_bound_s", "best_step_s"):
        v = e.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                              or not math.isfinite(v) or v < 0):
            raise FileFormatError(src, f"{where}.{k}", "is not a finite number >= 0 or null",
                                  fix)
        out[k] = None if v is None else float(v)
    return out


BENCH_ROW_KEYS = ("instance", "instance_name", "budget_fraction", "budget_bytes",
                  "lower_bound_s", "bound_source", "best_step_s", "best_plan", "status",
                  "below_floor", "min_budget_bytes", "provenance")
"""The keys every ``slackopt-bench-references`` row has (a value may be null)."""
BENCH_ROW_STATUSES = ("optimal", "bounded", "feasible", "unsolved", "infeasible")
"""A bench row's ``status`` (slackopt.compare.benchrefs: what its values prove)."""
BENCH_BOUND_SOURCES = (CERTIFIED, TRIVIAL)
"""The sources a bench references row's ``lower_bound_s`` may come from."""
_BOUND_ABOVE_PLAN_RTOL = 1e-9
"""A bound more than this (relative) above a plan's simulated step is wrong."""


def _bench_rows(doc: Mapping[str, Any], src: str, folder: Path | None = None
                ) -> list[dict[str, Any]]:
    """The rows of a ``slackopt-bench-references`` document as entries (checked); with
    `folder` (the references file's), every ``best_plan`` file must exist there."""
    fix = "regenerate the file with benchmarks/bench_references.py"
    if doc.get("version") != 1:
        raise FileFormatError(src, "version", f"{doc.get('version')!r} is not 1, the version "
                              "this slackopt reads", fix)
    rows = doc.get("rows")
    if not isinstance(rows, list):
        raise FileFormatError(src, "rows", "is not a list", fix)
    out = []
    seen: dict[tuple[str, int], int] = {}
    for i, r in enumerate(rows):
        where = f"rows[{i}]"
        if not isinstance(r, Mapping):
            raise FileFormatError(src, where, "is not an object", fix)
        for k in BENCH_ROW_KEYS:
            if k not in r:
                raise FileFormatError(src, f"{where}.{k}", "is missing (null where a row has "
                                      "no value)", fix)
        for k in ("instance", "instance_name"):
            if not isinstance(r.get(k), str) or not r[k]:
                raise FileFormatError(src, f"{where}.{k}", "missing or not a name", fix)
        if not _is_count(r.get("budget_bytes")):
            raise FileFormatError(src, f"{where}.budget_bytes", "missing or not an integer "
                                  ">= 0", fix)
        bf = r.get("budget_fraction")
        if isinstance(bf, bool) or not isinstance(bf, (int, float)) or not math.isfinite(bf):
            raise FileFormatError(src, f"{where}.budget_fraction", "missing or not a number",
                                  fix)
        t = _times(r, src, where, fix)
        if t["lower_bound_s"] is not None and r.get("bound_source") not in BENCH_BOUND_SOURCES:
            raise FileFormatError(src, f"{where}.bound_source", f"{r.get('bound_source')!r} "
                                  f"is not a certified source ({' or '.join(BENCH_BOUND_SOURCES)})"
                                  "; references hold only certified bounds", fix)
        lb, best = t["lower_bound_s"], t["best_step_s"]
        if lb is not None and best is not None and lb > best * (1 + _BOUND_ABOVE_PLAN_RTOL):
            raise FileFormatError(src, f"{where}.lower_bound_s", f"{lb!r} s is above the row's "
                                  f"best_step_s {best!r} s: the bound or the plan is wrong",
                                  "report it as a bug; regenerate the row with "
                                  "benchmarks/bench_references.py")
        if r["status"] not in BENCH_ROW_STATUSES:
            raise FileFormatError(src, f"{where}.status", f"{r['status']!r} is not one of "
                                  f"{', '.join(BENCH_ROW_STATUSES)}", fix)
        bp = r["best_plan"]
        if bp is not None and (not isinstance(bp, str) or not bp or Path(bp).is_absolute()
                               or ".." in Path(bp).parts):
            raise FileFormatError(src, f"{where}.best_plan", f"{bp!r} is not a path inside "
                                  "the references file's folder (relative, no '..') or null",
                                  fix)
        if (bp is None) != (t["best_step_s"] is None):
            raise FileFormatError(src, f"{where}.best_plan", "is null while best_step_s is "
                                  "not, or the other way round: a row has both or neither",
                                  fix)
        if bp is not None and folder is not None and not (folder / bp).is_file():
            raise FileFormatError(src, f"{where}.best_plan", f"{folder / bp} does not exist",
                                  "restore the plan file (it ships with the references), "
                                  "or regenerate the row")
        key = (r["instance_name"], int(r["budget_bytes"]))
        if key in seen:
            raise FileFormatError(src, where, f"repeats rows[{seen[key]}] (instance "
                                  f"{key[0]}, budget_bytes {key[1]}): one row per instance "
                                  "and budget", fix)
        seen[key] = i
        if not isinstance(r["below_floor"], bool):
            raise FileFormatError(src, f"{where}.below_floor", "is not true or false", fix)
        mb = r.get("min_budget_bytes")
        if mb is not None and not _is_count(mb):
            raise FileFormatError(src, f"{where}.min_budget_bytes", "is not an integer >= 0 "
                                  "or null", fix)
        out.append({**r, "instance": r["instance_name"], "instance_file": r["instance"],
                    "budget_fraction": float(bf), **t})
    return out


def reference_matches(refs: list[dict], name: str, m: int, frac: float) -> list[dict]:
    """The reference entries for instance `name` under budget `m` (bytes): by budget
    bytes when the entry has them, else by budget fraction `frac` within 1e-6."""
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



def add_gaps(df: pd.DataFrame, references: Any = None) -> pd.DataFrame:
    """Fill the gap columns of a results table (in a copy).

    Per (instance, instance_hash, budget_bytes): ``best_lower_bound_s`` = max of the rows'
    ``lower_bound_s``, the matching references' ``lower_bound_s`` and the ideal step
    ``ideal_time_s``, and ``best_bound_source`` where it comes from (:data:`TRIVIAL` when
    nothing beats T* by more than float rounding; else the ``bound_source`` of the row that
    gives it, or :data:`REFERENCE`; on a tie, certified before reference before
    solver-reported); ``best_step_s`` = min of the feasible rows' ``step_time_s`` and the
    references' ``best_step_s``. Then ``gap_to_bound = (step_time_s - best_lower_bound_s)
    / best_lower_bound_s`` and ``gap_to_best = (step_time_s - best_step_s) / best_step_s``
    (dimensionless, NaN for rows without a feasible plan).

    ``best_lower_bound_s`` and ``gap_to_bound`` are given only for rows whose ``policy`` is
    ``"barrier_free"``, NaN for the others (``layer_barriers``, ``on_demand``, and rows
    with an unknown policy, e.g. from a store written before the column): the lower bounds
    (the MILP's, its checkpoint bound, the references') are proven for plans run by the
    barrier-free runtime (the evaluator semantics, docs/model.md), whose runtime rules
    (FIFO D2H, the H2D admission rule, no H2D before the forward pass has ended) the other runtimes
    do not follow, so a plan of another policy may beat them. ``gap_to_best`` is given for
    every row.

    Args:
        df: a table with the columns of :data:`COLUMNS` (gap columns may be missing).
        references: a references file path, its parsed document, a list of entries (as
            :func:`load_references` returns), or None.

    Returns:
        The table with the five gap columns filled.
    """
    import pandas as pd

    refs = references if isinstance(references, list) else load_references(references)
    df = df.copy()
    lbs, bests = [], []
    groups = df.groupby(["instance", "instance_hash", "budget_bytes"], sort=False,
                        dropna=False).groups
    best_lb = pd.Series(math.nan, index=df.index, dtype="float64")
    best_step = pd.Series(math.nan, index=df.index, dtype="float64")
    best_src = pd.Series(None, index=df.index, dtype="object")
    rank = {TRIVIAL: 0, CERTIFIED: 1, REFERENCE: 2, REPORTED: 3}
    for (name, _h, m), idx in groups.items():
        g = df.loc[idx]
        ideal = [float(x) for x in g["ideal_time_s"] if pd.notna(x)]
        t_star = max(ideal) if ideal else math.nan
        # (bound, source): the rows' (a row without a recorded source is solver-reported)
        cands = [(float(x), src if isinstance(src, str) else REPORTED)
                 for x, src in zip(g["lower_bound_s"], g.get("bound_source", [None] * len(g)),
                                   strict=True)
                 if pd.notna(x)]
        lbs = [b for b, _ in cands] + ideal
        feas = g[g["feasible"].astype(bool) & g["step_time_s"].notna()]
        bests = [float(x) for x in feas["step_time_s"]]
        frac = float(g["budget_fraction"].iloc[0]) if g["budget_fraction"].notna().any() \
            else math.nan
        for e in reference_matches(refs, str(name), int(m), frac):
            if e.get("lower_bound_s") is not None:
                lbs.append(e["lower_bound_s"])
                cands.append((e["lower_bound_s"], REFERENCE))
            if e.get("best_step_s") is not None:
                bests.append(e["best_step_s"])
        best_lb[idx] = max(lbs) if lbs else math.nan
        if lbs:
            top = max(lbs)
            if top <= t_star * (1 + _TRIVIAL_RTOL):
                best_src[idx] = TRIVIAL
            else:
                best_src[idx] = min((src for b, src in cands if b == top), key=rank.get)
        best_step[idx] = min(bests) if bests else math.nan
    step = df["step_time_s"].where(df["feasible"].astype(bool)).astype("float64")
    best_lb = best_lb.where(df["policy"] == "barrier_free")
    df["best_lower_bound_s"] = best_lb
    df["best_bound_source"] = best_src.where(best_lb.notna(), None)
    df["best_step_s"] = best_step
    with np.errstate(divide="ignore", invalid="ignore"):
        df["gap_to_bound"] = (step - best_lb) / best_lb
        df["gap_to_best"] = (step - best_step) / best_step
    return df
