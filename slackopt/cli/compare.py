"""``slackopt compare`` (a sweep of solvers x budgets x instances, one row per run) and
``slackopt bench`` (the benchmark suite's leaderboard). The checks of their output files
live in the library (:func:`slackopt.compare.files.check_results_out`,
:func:`slackopt.compare.benchout.check_bench_out`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from slackopt.cli._errors import EXIT_STATUS_KEY, Interrupted, guarded
from slackopt.cli._options import (
    ForceOpt,
    JsonOpt,
    solver_specs,
    split_list,
    time_limit_opt,
    time_limits,
    time_limits_opt,
)
from slackopt.cli._output import err, fmt_bytes, fmt_time, pct, records, wide_console
from slackopt.errors import SlackoptError

WorkersOpt = Annotated[int, typer.Option(
    "--workers", min=0, help="Local worker processes (0: one per CPU).")]
SchedulerOpt = Annotated[str | None, typer.Option(
    "--scheduler", help="Dask scheduler address tcp://HOST:PORT (needs the [dist] extra).")]
SweepLimitOpt = Annotated[float | None, time_limit_opt("Time limit per solver run (s).")]
TimeLimitsOpt = Annotated[list[str] | None, time_limits_opt()]


def _note_created(folder: Path | None, opt: str) -> None:
    """Say on stderr that `folder`, missing before, was created for `opt`'s file."""
    if folder is not None and folder.is_dir():
        sys.stderr.write(f"slackopt: note: created the folder {folder} for {opt}\n")


def _missing_folder(path: Path | None) -> Path | None:
    """The folder of `path` if it does not exist yet (the sweep will create it)."""
    return path.parent if path is not None and not path.parent.exists() else None


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


def _run_counts(df: Any) -> dict[str, int]:
    """runs, runs_from_store and runs_now of a sweep's table."""
    return {"runs": len(df), "runs_from_store": int(df.attrs.get("runs_from_store", 0)),
            "runs_now": int(df.attrs.get("runs_now", len(df)))}


def _seeds(seeds: str | None) -> list[int | None]:
    """--seeds as integers ([None] when not given)."""
    if seeds is None:
        return [None]
    try:
        return [int(x) for x in split_list(seeds, "integer seeds", "--seeds")]
    except ValueError:
        raise typer.BadParameter(f"'{seeds}' is not a comma-separated list of integers",
                                 param_hint="'--seeds'") from None


def _print_compare(df: Any, counts: dict[str, int], store: Path | None,
                   written: str | None) -> None:
    """compare's human output: one table per instance, one row per run; the errors and
    timeouts; the run counts; the file written."""
    from slackopt.solver import solver_label

    con = wide_console()
    show_seed = df["seed"].notna().any()
    for name, g in df.groupby("instance", sort=False):
        r0 = g.iloc[0]
        t = Table(title=f"{name}: P = {fmt_bytes(r0['P_bytes'])}, ideal step T* = "
                  f"{fmt_time(r0['ideal_time_s'])}, link can hide f = "
                  f"{r0['hideable_fraction']:.1%}", title_justify="left")
        cols = ["budget", "solver"] + (["seed"] if show_seed else []) + [
            "status", "step", "throughput", "planning", "gap to bound", "bound from",
            "gap to best"]
        for c in cols:
            t.add_column(c, justify="left" if c in ("solver", "status", "bound from")
                         else "right", no_wrap=c != "solver")
        for r in g.itertuples(index=False):
            row = [f"{r.budget_fraction:.3g} P" if r.budget_fraction == r.budget_fraction
                   else fmt_bytes(r.budget_bytes), solver_label(r.solver, r.params)]
            if show_seed:
                row.append("-" if r.seed is None or r.seed != r.seed else str(r.seed))
            row += [r.status, fmt_time(r.step_time_s) if r.feasible else "-",
                    pct(r.throughput) if r.feasible else "-", fmt_time(r.planning_time_s),
                    pct(r.gap_to_bound, 2),
                    r.best_bound_source if r.gap_to_bound == r.gap_to_bound else "-",
                    pct(r.gap_to_best, 2)]
            t.add_row(*[str(x) for x in row])
        con.print(t)
    bad = df[df["status"].isin(["error", "timeout"])]
    for r in bad.itertuples(index=False):
        con.print(f"{r.status}: {r.solver} on {r.instance} at {r.budget_fraction:.3g} P: "
                  f"{r.message}")
    con.print(f"{counts['runs']} runs: {counts['runs_now']} run now, "
              f"{counts['runs_from_store']} from the store" + (f" ({store})" if store else ""))
    if written:
        con.print(f"wrote {written}")


@guarded
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
    workers: WorkersOpt = 1,
    scheduler: SchedulerOpt = None,
    time_limit: SweepLimitOpt = None,
    time_limits_for: TimeLimitsOpt = None,
    references: Annotated[Path | None, typer.Option(
        "--references", help="references.json with best known bounds and steps.")] = None,
    force: ForceOpt = False,
    json_output: JsonOpt = False,
) -> dict[str, Any] | None:
    """Run solvers x budgets x instances (x seeds); one row per run with gaps."""
    from slackopt.compare import compare, write_results
    from slackopt.compare.files import check_results_out

    specs = solver_specs(solvers)
    budget_list = split_list(budgets, "budgets", "--budgets")
    seed_list = _seeds(seeds)
    reads = [*(("an instance file", p) for p in instances),
             ("the references file", references)]
    if output is not None:
        check_results_out(output, store=store, reads=reads, overwrite=force)
    new_dir = _missing_folder(store)
    try:
        df = compare(instances, specs, budget_list, seeds=seed_list, time_limit_s=time_limit,
                     time_limits=time_limits(time_limits_for), store=store, workers=workers,
                     scheduler=scheduler, progress=True, references=references)
    except KeyboardInterrupt:
        raise _sweep_interrupted(store) from None
    finally:
        _note_created(new_dir, "--store")
    written = None
    if output is not None:
        out_dir = _missing_folder(output)
        written = str(write_results(df, output, overwrite=force))
        _note_created(out_dir, "--out")
    counts = _run_counts(df)
    if json_output:
        return {"format": "slackopt-compare-results", "columns": list(df.columns),
                "rows": records(df), "out": written, "store": str(store) if store else None,
                **counts}
    _print_compare(df, counts, store, written)
    return None


def _print_bench(res: Any, written: list[str]) -> None:
    """bench's human output: the leaderboard, the new best known plans with the command
    that records each, the files written."""
    from slackopt.compare.bench import LEADERBOARD_HEADERS, leaderboard_cells
    from slackopt.compare.benchout import leaderboard_title

    con = wide_console()
    t = Table(title=leaderboard_title(res), title_justify="left")
    for k, h in enumerate(LEADERBOARD_HEADERS):
        t.add_column(h, justify="left" if k == 0 else "right", no_wrap=k > 0)
    for row in leaderboard_cells(res.board):
        t.add_row(*row)
    con.print(t)
    for n in res.new_bests:
        ref = ("no plan" if n["reference_best_s"] is None
               else fmt_time(n["reference_best_s"]))
        con.print(f"new best known: {n['instance']} at {n['budget_fraction']:g} P: "
                  f"{n['solver']} runs in {fmt_time(n['step_time_s'])} (reference: {ref}); "
                  f"record it with:\n  {n['command']}")
    for f in written:
        con.print(f"wrote {f}")


@guarded
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
    time_limit: SweepLimitOpt = None,
    time_limits_for: TimeLimitsOpt = None,
    store: Annotated[Path | None, typer.Option(
        "--store", help="SQLite store of finished runs and their plans: a rerun resumes; "
        "a new best known plan is recorded from it.")] = None,
    workers: WorkersOpt = 1,
    scheduler: SchedulerOpt = None,
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
    from slackopt.compare.bench import run_bench
    from slackopt.compare.benchout import check_bench_out, write_bench_out

    specs = solver_specs(solvers)
    budget_list = split_list(budgets, "budgets", "--budgets") if budgets is not None else None
    if output is not None:
        check_bench_out(output, suite, references=references, store=store, overwrite=force)
    new_dir = _missing_folder(store)
    try:
        res = run_bench(suite, specs, budgets=budget_list, time_limit_s=time_limit,
                        time_limits=time_limits(time_limits_for), store=store,
                        workers=workers, scheduler=scheduler, references=references,
                        only=only, progress=True)
    except KeyboardInterrupt:
        raise _sweep_interrupted(store) from None
    finally:
        _note_created(new_dir, "--store")
    written: list[str] = []
    if output is not None:
        out_dir = _missing_folder(output)
        written = write_bench_out(res, output, overwrite=force)
        _note_created(out_dir, "--out")
    for v in res.violations:
        err(f"BUG: {v['instance']} at {v['budget_fraction']:g} P: {v['problem']} (a bound "
            "or the evaluator is wrong; please report it)")
    status = 1 if res.violations else 0
    if json_output:
        return {"format": "slackopt-bench-results", "suite": str(res.suite.manifest),
                "references": str(res.references) if res.references else None,
                "leaderboard": records(res.board), "new_bests": res.new_bests,
                "violations": res.violations, "written": written,
                **_run_counts(res.table), EXIT_STATUS_KEY: status}
    _print_bench(res, written)
    if status:
        raise typer.Exit(status)
    return None
