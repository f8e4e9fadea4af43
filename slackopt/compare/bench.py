"""The benchmark suite and its leaderboard (``slackopt bench``).

A suite is a folder of instance files listed in a manifest (``manifest.json``)::

    {"format": "slackopt-bench-manifest", "version": 1, "generator": {...},
     "instances": [{"file": "llama3-8b-4k_h100-pcie5.json.gz", "name": "...",
                    "sha256": "<64 hex digits of the file's bytes>", "model": ..., ...}]}

(``file`` relative to the manifest's folder; the other keys describe the instance and are
not read here.) Its reference values sit beside it in ``references.json``
(:mod:`slackopt.compare.gaps` reads the format; ``benchmarks/bench_references.py`` writes
it, :mod:`slackopt.compare.benchrefs`).

:func:`run_bench` checks every file against the manifest's sha256, runs
:func:`slackopt.compare.compare` over the suite (so a bench is resumable with a store and
runs on Dask like any sweep; every plan's step is the evaluator's, never a solver's own
figure) with the references joining the gaps, and condenses the table into a
:func:`leaderboard`. It also reports two things a reference file can learn from a run:

- a **new best known plan** (:func:`new_bests`): a barrier-free plan whose simulated step
  is below the reference ``best_step_s``, with the command that records it;
- a **bound violation** (:func:`bound_violations`): a lower bound above a feasible
  barrier-free plan's simulated step, or a plan that runs under a budget the references
  call below the floor. One of the two is wrong: a bug, reported, never clamped.

Gap statistics: per solver over its rows with a feasible plan and a gap, the geometric
mean of the gaps is ``exp(mean(log(1 + gap))) - 1`` (so a gap of 0, an optimal row, counts
as a factor 1 instead of making the mean 0), and the maximum.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import math
import os
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slackopt.compare.gaps import load_references
from slackopt.errors import FileFormatError, SlackoptError, json_problem

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

MANIFEST_FORMAT = "slackopt-bench-manifest"
MANIFEST_NAME = "manifest.json"
REFERENCES_NAME = "references.json"
DEFAULT_BUDGETS = (0.1, 0.3, 0.5, 0.7)
"""Budgets of the suite, fractions of each instance's keep-all peak P."""
BENCH_MANIFEST = Path(__file__).resolve().parents[2] / "instances" / "bench" / MANIFEST_NAME
"""Where ``--suite bench`` looks: the repository's suite, beside the package's source tree
(an editable install or a clone)."""
SHAPES_MANIFEST = BENCH_MANIFEST.parents[1] / "shapes" / MANIFEST_NAME
"""Where ``--suite shapes`` looks: the repository's CNN suite (benchmarks/make_shapes.py)."""
REFERENCES_SCRIPT = "benchmarks/bench_references.py"
VIOLATION_RTOL = 1e-9
"""A bound more than this (relative) above a simulated step violates it; a step more than
this below the reference best is a new best, and only a plan or a bound better than the
reference by more than this replaces it (float rounding of one sum is not news)."""
LEADERBOARD_COLUMNS = ("solver", "rows", "feasible", "gap_to_bound_geomean", "gap_to_bound_max",
                       "gap_to_best_geomean", "gap_to_best_max", "planning_time_median_s",
                       "planning_time_max_s")
"""The leaderboard's columns: gaps dimensionless (0.01 = 1%), times in s."""


@dataclass(frozen=True)
class SuiteInstance:
    """One instance of a suite: ``file`` as the manifest writes it, ``path`` on disk,
    ``name`` (the instance's name field), ``sha256`` of the file's bytes, and the whole
    manifest entry (``entry``)."""

    file: str
    path: Path
    name: str
    sha256: str
    entry: Mapping[str, Any] = field(repr=False)


@dataclass(frozen=True)
class Suite:
    """A benchmark suite: its manifest file and instances (in manifest order)."""

    manifest: Path
    instances: tuple[SuiteInstance, ...]
    generator: Mapping[str, Any] = field(repr=False)

    @property
    def folder(self) -> Path:
        """The manifest's folder (instance files are relative to it)."""
        return self.manifest.parent

    @property
    def references(self) -> Path:
        """The suite's references file (``references.json`` beside the manifest)."""
        return self.folder / REFERENCES_NAME

    def regenerate_hint(self) -> str:
        """How to rebuild the suite's files: the manifest's ``generator.script`` if it
        names one."""
        script = self.generator.get("script") if isinstance(self.generator, Mapping) else None
        return (f"regenerate the suite with {script}" if isinstance(script, str) and script
                else "regenerate the suite with the script that wrote the manifest (see its "
                     "'generator')")

    def select(self, only: str | None) -> Suite:
        """The instances matching `only`: comma-separated items, each a file or name as in
        the manifest, or a glob pattern (``*``, ``?``, ``[...]``) over both.

        Raises:
            SlackoptError: an item that matches no instance.
        """
        if only is None:
            return self
        keep: list[SuiteInstance] = []
        for item in (x.strip() for x in only.split(",")):
            hits = [e for e in self.instances
                    if item in (e.file, e.name) or fnmatch.fnmatchcase(e.file, item)
                    or fnmatch.fnmatchcase(e.name, item)]
            if not hits:
                raise SlackoptError(f"--only '{item}' matches no instance of {self.manifest} "
                                    "(give a file or name from its manifest, or a glob)")
            keep += [e for e in hits if e not in keep]
        return Suite(self.manifest, tuple(e for e in self.instances if e in keep),
                     self.generator)


def resolve_suite(spec: str | os.PathLike) -> Path:
    """The manifest file of a suite given as ``"bench"`` or ``"shapes"`` (the repository's
    instances/bench/manifest.json, :data:`BENCH_MANIFEST`, or instances/shapes/manifest.json,
    :data:`SHAPES_MANIFEST`; a folder of either name is ``./bench``, ``./shapes``), a
    manifest file, or a folder holding ``manifest.json``.

    Raises:
        SlackoptError: "bench" or "shapes" when this slackopt has no such suite beside its
            source tree (an installed wheel), or a path that is neither (naming the fix).
    """
    named = {"bench": BENCH_MANIFEST, "shapes": SHAPES_MANIFEST}
    if str(spec) in named:
        path = named[str(spec)]
        if not path.is_file():
            raise SlackoptError(
                f"the '{spec}' suite is not beside this slackopt's source tree (no "
                f"{path}): this is an installed package, not a clone. Fix: pass "
                f"--suite path/to/manifest.json (instances/{spec}/manifest.json in a clone "
                "of the repository)")
        return path
    p = Path(spec)
    if p.is_dir():
        p = p / MANIFEST_NAME
    if not p.is_file():
        raise FileFormatError(p, "", "no suite manifest here", "pass --suite bench, a "
                              "manifest.json file, or a folder holding one")
    return p


def load_manifest(path: str | os.PathLike) -> Suite:
    """Read a suite manifest (format in the module docstring).

    Raises:
        FileFormatError: unreadable, not a manifest, or an entry without ``file``,
            ``name`` or a 64-hex-digit ``sha256`` (naming the entry and field), or a file
            listed twice.
    """
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise FileFormatError(p, "", f"cannot be read ({e})", "check the path") from None
    except json.JSONDecodeError as e:
        raise FileFormatError(p, "", json_problem(e),
                              "give a suite manifest.json") from None
    fix = "give the manifest.json the suite's generator wrote"
    if not isinstance(doc, Mapping) or doc.get("format") != MANIFEST_FORMAT:
        raise FileFormatError(p, "format", f"is not '{MANIFEST_FORMAT}'", fix)
    if doc.get("version") != 1:
        raise FileFormatError(p, "version", f"{doc.get('version')!r} is not 1, the version "
                              "this slackopt reads", fix)
    items = doc.get("instances")
    if not isinstance(items, list) or not items:
        raise FileFormatError(p, "instances", "is not a non-empty list", fix)
    out: list[SuiteInstance] = []
    seen: set[str] = set()
    for i, e in enumerate(items):
        where = f"instances[{i}]"
        if not isinstance(e, Mapping):
            raise FileFormatError(p, where, "is not an object", fix)
        for k in ("file", "name"):
            if not isinstance(e.get(k), str) or not e[k]:
                raise FileFormatError(p, f"{where}.{k}", "missing or not a string", fix)
        sha = e.get("sha256")
        if not isinstance(sha, str) or len(sha) != 64 or any(
                c not in "0123456789abcdef" for c in sha):
            raise FileFormatError(p, f"{where}.sha256", "missing or not 64 lowercase hex "
                                  "digits", fix)
        if e["file"] in seen:
            raise FileFormatError(p, f"{where}.file", f"'{e['file']}' is listed twice", fix)
        seen.add(e["file"])
        out.append(SuiteInstance(e["file"], p.parent / e["file"], e["name"], sha, e))
    gen = doc.get("generator")
    return Suite(p, tuple(out), gen if isinstance(gen, Mapping) else {})


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 of a file's bytes (as stored: a .json.gz file's compressed bytes), hex."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def check_files(suite: Suite) -> None:
    """Every instance file of `suite` exists and has the manifest's sha256.

    Raises:
        FileFormatError: a missing file or a sha256 mismatch, naming the file and the fix
            (regenerate the suite with its script).
    """
    for e in suite.instances:
        if not e.path.is_file():
            raise FileFormatError(e.path, "", f"listed in {suite.manifest} but missing",
                                  suite.regenerate_hint())
        got = file_sha256(e.path)
        if got != e.sha256:
            raise FileFormatError(e.path, "", f"its sha256 {got[:16]}... is not the "
                                  f"manifest's {e.sha256[:16]}... ({suite.manifest}): the "
                                  "file changed since the suite was generated",
                                  suite.regenerate_hint())


def reference_budgets(refs: Sequence[Mapping[str, Any]], suite: Suite) -> list[float]:
    """The budget fractions of the reference rows of `suite`'s instances, ascending;
    :data:`DEFAULT_BUDGETS` when there are none."""
    names = {e.name for e in suite.instances}
    fr = sorted({round(float(r["budget_fraction"]), 12) for r in refs
                 if r["instance"] in names and r.get("budget_fraction") is not None})
    return fr or list(DEFAULT_BUDGETS)


def geometric_mean_gap(gaps: Iterable[float]) -> float:
    """``exp(mean(log(1 + g))) - 1`` over the finite gaps (NaN when none): the geometric
    mean of the step ratios, minus 1, so that a gap of 0 counts as a factor 1."""
    vals = [float(g) for g in gaps if g is not None and math.isfinite(float(g))]
    if not vals:
        return math.nan
    return math.expm1(sum(math.log1p(g) for g in vals) / len(vals))


def leaderboard(df: pd.DataFrame) -> pd.DataFrame:
    """Per solver (name and non-default parameters, :func:`slackopt.solver.solver_label`),
    in the order of first appearance: ``rows``, ``feasible`` (rows with a feasible plan),
    the geometric mean (:func:`geometric_mean_gap`) and maximum of ``gap_to_bound`` and of
    ``gap_to_best`` over its feasible rows that have one, and the median and maximum
    planning time (s) over all its rows that report one.

    Args:
        df: a compare table with its gap columns (:func:`slackopt.compare.compare`).

    Returns:
        A DataFrame with the columns :data:`LEADERBOARD_COLUMNS`.
    """
    import pandas as pd

    from slackopt.solver import solver_label

    d = df.copy()
    d["label"] = [solver_label(n, p) for n, p in zip(d["solver"], d["params"], strict=True)]
    out = []
    for lab, g in d.groupby("label", sort=False):
        feas = g[g["feasible"].astype(bool)]
        t = g["planning_time_s"].dropna()
        out.append({
            "solver": lab, "rows": len(g), "feasible": len(feas),
            "gap_to_bound_geomean": geometric_mean_gap(feas["gap_to_bound"]),
            "gap_to_bound_max": _nanmax(feas["gap_to_bound"]),
            "gap_to_best_geomean": geometric_mean_gap(feas["gap_to_best"]),
            "gap_to_best_max": _nanmax(feas["gap_to_best"]),
            "planning_time_median_s": float(t.median()) if len(t) else math.nan,
            "planning_time_max_s": float(t.max()) if len(t) else math.nan})
    return pd.DataFrame(out, columns=list(LEADERBOARD_COLUMNS))


def _nanmax(s: pd.Series) -> float:
    v = s.dropna()
    return float(v.max()) if len(v) else math.nan


def _pct(x: float) -> str:
    return "-" if x != x else f"{x:.2%}"


def _secs(x: float) -> str:
    return "-" if x != x else f"{x:.3g} s"


LEADERBOARD_HEADERS = ("solver", "rows", "feasible", "bound gap gmean", "bound gap max",
                       "best gap gmean", "best gap max", "planning median", "planning max")
"""Column headers of the printed leaderboard (gmean: :func:`geometric_mean_gap`)."""


def leaderboard_cells(board: pd.DataFrame) -> list[list[str]]:
    """The leaderboard as text cells, one list per solver, under
    :data:`LEADERBOARD_HEADERS` (gaps in %, times in s)."""
    return [[str(r.solver), str(r.rows), str(r.feasible), _pct(r.gap_to_bound_geomean),
             _pct(r.gap_to_bound_max), _pct(r.gap_to_best_geomean), _pct(r.gap_to_best_max),
             _secs(r.planning_time_median_s), _secs(r.planning_time_max_s)]
            for r in board.itertuples(index=False)]


def leaderboard_markdown(board: pd.DataFrame, title: str = "") -> str:
    """The leaderboard as a markdown table (rich's markdown box), with `title` above it."""
    from io import StringIO

    from rich import box
    from rich.console import Console
    from rich.table import Table

    t = Table(box=box.MARKDOWN, show_edge=True)
    for k, h in enumerate(LEADERBOARD_HEADERS):
        t.add_column(h, justify="left" if k == 0 else "right")
    for row in leaderboard_cells(board):
        t.add_row(*row)
    buf = StringIO()
    Console(file=buf, width=400, markup=False, emoji=False, highlight=False,
            color_system=None).print(t)
    body = "\n".join(line.rstrip() for line in buf.getvalue().splitlines() if line.strip())
    return (f"{title}\n\n" if title else "") + body + "\n"


def _ref_rows(refs: Sequence[Mapping[str, Any]]) -> dict[tuple[str, int], Mapping[str, Any]]:
    return {(r["instance"], int(r["budget_bytes"])): r for r in refs
            if r.get("budget_bytes") is not None}


def new_bests(df: pd.DataFrame, refs: Sequence[Mapping[str, Any]], suite: Suite, *,
              store: str | os.PathLike | None = None,
              references: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    """The rows whose barrier-free plan beats the reference best step (by more than
    :data:`VIOLATION_RTOL`), or runs where the reference row has no plan, with the command
    that records it (``command``): with a store, ``bench_references.py ... --from-store``
    (the plan is in the store); without one, a rerun of that solver by the script.

    Returns:
        One dict per row: instance, file, budget_fraction, budget_bytes, solver, params,
        step_time_s, reference_best_s (None when the reference row has no plan), command.
    """
    by_key = _ref_rows(refs)
    files = {e.name: e.file for e in suite.instances}
    out = []
    for r in df.itertuples(index=False):
        if not (r.feasible and r.policy == "barrier_free" and r.step_time_s == r.step_time_s):
            continue
        ref = by_key.get((r.instance, int(r.budget_bytes)))
        if ref is None or ref.get("below_floor"):
            continue  # no reference row; below the floor is a violation, not a new best
        best = ref.get("best_step_s")
        if best is not None and not r.step_time_s < best * (1 - VIOLATION_RTOL):
            continue
        argv = ["python", REFERENCES_SCRIPT, "--suite", str(suite.manifest),
                "--only", files.get(r.instance, r.instance),
                "--budgets", f"{float(r.budget_fraction):g}"]
        if references is not None:
            argv += ["--references", str(references)]
        if store is not None:
            argv += ["--from-store", str(store)]
        else:
            spec = json.dumps([[r.solver, json.loads(r.params or "{}")]],
                              separators=(",", ":"))
            argv += ["--solvers", spec]
            if r.time_limit_s == r.time_limit_s:
                argv += ["--time-limit", f"{float(r.time_limit_s):g}"]
        out.append({"instance": r.instance, "file": files.get(r.instance),
                    "budget_fraction": float(r.budget_fraction),
                    "budget_bytes": int(r.budget_bytes), "solver": r.solver, "params": r.params,
                    "step_time_s": float(r.step_time_s), "reference_best_s": best,
                    "command": shlex.join(argv)})
    return out


def bound_violations(df: pd.DataFrame, refs: Sequence[Mapping[str, Any]]
                     ) -> list[dict[str, Any]]:
    """Rows that contradict a bound (a bug somewhere: the bound or the evaluator or the
    plan; reported, never clamped):

    - a feasible barrier-free plan whose simulated step is below the best lower bound of
      its (instance, budget) (``gap_to_bound < -VIOLATION_RTOL``: the reference's bound, a
      certified row bound, or a solver-reported one; ``bound_source`` says which);
    - a feasible barrier-free plan under a budget the references call below the floor
      (the floor is the MILP's, for the barrier-free runtime).

    Returns:
        One dict per violation: instance, budget_fraction, budget_bytes, solver, params,
        step_time_s, bound_s, bound_source, problem (one line).
    """
    by_key = _ref_rows(refs)
    out = []
    for r in df.itertuples(index=False):
        if not (r.feasible and r.step_time_s == r.step_time_s):
            continue
        base = {"instance": r.instance, "budget_fraction": float(r.budget_fraction),
                "budget_bytes": int(r.budget_bytes), "solver": r.solver, "params": r.params,
                "step_time_s": float(r.step_time_s)}
        if r.gap_to_bound == r.gap_to_bound and r.gap_to_bound < -VIOLATION_RTOL:
            out.append({**base, "bound_s": float(r.best_lower_bound_s),
                        "bound_source": r.best_bound_source,
                        "problem": f"lower bound {r.best_lower_bound_s!r} s "
                                   f"({r.best_bound_source}) is above {r.solver}'s simulated "
                                   f"step {r.step_time_s!r} s"})
        ref = by_key.get((r.instance, int(r.budget_bytes)))
        if ref is not None and ref.get("below_floor") and r.policy == "barrier_free":
            out.append({**base, "bound_s": math.inf, "bound_source": "reference",
                        "problem": f"the references say no plan runs under this budget "
                                   f"(smallest budget {ref.get('min_budget_bytes')} bytes), yet "
                                   f"{r.solver}'s plan runs in {r.step_time_s!r} s"})
    return out


@dataclass
class BenchResult:
    """What :func:`run_bench` returns: the suite, the references file used (or None), the
    per-row compare table, the leaderboard, and the new bests and violations."""

    suite: Suite
    references: Path | None
    table: pd.DataFrame
    board: pd.DataFrame
    new_bests: list[dict[str, Any]]
    violations: list[dict[str, Any]]


def run_bench(suite: str | os.PathLike, solvers: Any, *,
              budgets: Sequence[float | str] | None = None, time_limit_s: float | None = None,
              time_limits: Mapping[str, float | None] | None = None,
              store: str | os.PathLike | None = None, workers: int = 1, scheduler: Any = None,
              references: str | os.PathLike | None = None, only: str | None = None,
              progress: bool = True) -> BenchResult:
    """Run solvers on a benchmark suite and build its leaderboard.

    Args:
        suite: "bench", a manifest file or its folder (:func:`resolve_suite`).
        solvers: as :func:`slackopt.compare.compare` takes them.
        budgets: budgets as compare takes them; default those of the references rows
            (:func:`reference_budgets`).
        time_limit_s: per run (s); None for none.
        time_limits: per solver name, a limit replacing `time_limit_s` for its runs
            (``{"milp": 300}``), as for compare.
        store: SQLite store (resumable; keeps the plans for ``--from-store``).
        workers: local processes, as for compare (1: in this process; 0: one per CPU).
        scheduler: a Dask scheduler address or ``distributed.Client``, as for compare;
            overrides `workers`.
        references: a references file; default the suite's ``references.json`` if present.
        only: restrict the suite (:meth:`Suite.select`).
        progress: progress bar on stderr.

    Returns:
        A :class:`BenchResult`.

    Raises:
        SlackoptError / FileFormatError: a suite that cannot be found or read, a file
            whose sha256 differs from the manifest's, a malformed references file, and
            whatever compare raises for bad input.
    """
    from slackopt.compare import compare

    s = load_manifest(resolve_suite(suite)).select(only)
    check_files(s)
    ref_path = Path(references) if references is not None else (
        s.references if s.references.is_file() else None)
    refs = load_references(ref_path)
    if budgets is None:
        budgets = reference_budgets(refs, s)
    df = compare([e.path for e in s.instances], solvers, list(budgets),
                 time_limit_s=time_limit_s, time_limits=time_limits, store=store,
                 workers=workers, scheduler=scheduler, progress=progress, references=refs)
    return BenchResult(s, ref_path, df, leaderboard(df),
                       new_bests(df, refs, s, store=store, references=references),
                       bound_violations(df, refs))


__all__ = ["BENCH_MANIFEST", "SHAPES_MANIFEST", "DEFAULT_BUDGETS", "LEADERBOARD_COLUMNS",
           "LEADERBOARD_HEADERS", "MANIFEST_FORMAT", "BenchResult", "Suite", "SuiteInstance",
           "bound_violations",
           "check_files", "file_sha256", "geometric_mean_gap", "leaderboard",
           "leaderboard_cells", "leaderboard_markdown", "load_manifest", "new_bests",
           "reference_budgets", "resolve_suite", "run_bench"]
