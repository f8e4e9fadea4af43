"""The benchmark suite's reference values: runs the exact MILP (and cheap planners, for
more candidate plans) on every instance of a suite and updates its references.json.

Run: python benchmarks/bench_references.py [--suite bench|shapes|PATH] [--references FILE]
         [--budgets 0.1,0.3,0.5,0.7] [--time-limit 300] [--only FILTER]
         [--solvers milp,checkpoint,production] [--store FILE]
         [--workers N | --scheduler tcp://HOST:PORT] [--from-store FILE]
         [--start-from-references]

- The sweep is :func:`slackopt.compare.compare` over the suite (the manifest's instances,
  each checked against its sha256 first) x the budgets x the solvers, kept in ``--store``
  (default benchmarks/results/bench_references.sqlite) as runs finish, with their plans:
  an interrupted run resumes where it stopped; ``--workers`` or ``--scheduler`` run it in
  local processes or on a Dask cluster.
- ``--start-from-references`` starts each run from its row's best plan
  (:func:`slackopt.solve`'s ``start_plan``: milp takes it as its first incumbent, so its
  large-neighbourhood search polishes it; genetic seeds generation 0 with it): a run
  never returns a slower plan than the one recorded, and the store keys differ from
  runs started cold.
- ``--from-store FILE`` runs nothing: it takes the candidate plans and bounds of the
  suite's instances and budgets from a store (``slackopt bench --store FILE`` wrote it
  and printed this command for a new best known plan).
- The references file is then updated by :func:`slackopt.compare.benchrefs.update_references`:
  every candidate plan re-simulated, a better plan recorded only after its plan file reads
  back to the same step, bounds only from certified sources and never above a plan, rows
  never worse, the file written atomically, provenance recorded.

Exit status: 0; 1 when a contradiction was found (a certified bound above a simulated
plan, a plan under a budget said to be below the floor: a bug, printed, never clamped;
the other rows are written); 2 for bad input; 130 after Ctrl-C (the store keeps the
finished runs, the references file is written only at the end).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_STORE = ROOT / "benchmarks" / "results" / "bench_references.sqlite"


def _interrupted(args: argparse.Namespace) -> int:
    """Ctrl-C: one line on stderr saying what was kept; the exit status 130."""
    where = ("nothing was recorded" if args.from_store is not None else
             f"{args.store} holds the finished runs; the references were not updated")
    print(f"bench_references: interrupted; {where}: run the same command again",
          file=sys.stderr)
    return 130


def main(argv: list[str] | None = None) -> int:
    """The command (arguments in the module docstring); returns the exit status."""
    from slackopt.compare import compare
    from slackopt.compare.bench import (
        DEFAULT_BUDGETS,
        check_files,
        load_manifest,
        resolve_suite,
    )
    from slackopt.compare.benchrefs import reference_plans, rows_from_store, update_references
    from slackopt.compare.grid import parse_solvers
    from slackopt.errors import SlackoptError, interrupt_cause

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="bench",
                    help="bench, shapes, a manifest.json or its folder")
    ap.add_argument("--references", type=Path, default=None,
                    help="the references file (default: references.json beside the manifest)")
    ap.add_argument("--budgets", default=",".join(f"{b:g}" for b in DEFAULT_BUDGETS),
                    help="comma-separated fractions of P")
    ap.add_argument("--time-limit", type=float, default=300.0, help="per run (s)")
    ap.add_argument("--only", default=None, help="comma-separated instance files, names or "
                    "globs")
    ap.add_argument("--solvers", default="milp,checkpoint,production",
                    help="solvers (names, suites, or a JSON list); milp gives the bounds")
    ap.add_argument("--store", type=Path, default=DEFAULT_STORE)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--scheduler", default=None)
    ap.add_argument("--from-store", type=Path, default=None,
                    help="take the plans and bounds from this store; run nothing")
    ap.add_argument("--start-from-references", action="store_true",
                    help="start each run from its row's best plan (milp and genetic "
                    "search from it)")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    try:
        try:
            solvers = parse_solvers(args.solvers)
        except SlackoptError as e:
            raise SlackoptError(f"--solvers: {e}") from None
        full = load_manifest(resolve_suite(args.suite))
        suite = full.select(args.only)
        check_files(suite)
        try:
            budgets = [float(x) for x in args.budgets.split(",") if x.strip()]
        except ValueError:
            budgets = []
        if not budgets or any(not 0 < b <= 1 for b in budgets):
            raise SlackoptError(f"--budgets '{args.budgets}': give fractions of P in (0, 1]")
        refs = args.references or full.references
        starts = None
        if args.from_store is not None:
            df, source = rows_from_store(args.from_store), f"store {args.from_store}"
        else:
            args.store.parent.mkdir(parents=True, exist_ok=True)
            if args.start_from_references:
                if not Path(refs).is_file():
                    raise SlackoptError(f"--start-from-references: no references file {refs} "
                                        "to start from; run once without the option, or give "
                                        "--references")
                starts = reference_plans(suite, refs, budgets)
            df = compare([e.path for e in suite.instances], solvers, budgets,
                         time_limit_s=args.time_limit, store=args.store,
                         workers=args.workers, scheduler=args.scheduler,
                         progress=not args.quiet, plans=True, start_plans=starts)
            source = "run"
        upd = update_references(suite, df, budgets, refs, source=source,
                                order=[e.file for e in full.instances],
                                started=set(starts) if starts else None)
    except SlackoptError as e:
        print(f"bench_references: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:
        if not isinstance(interrupt_cause(e), KeyboardInterrupt):
            raise
        return _interrupted(args)
    except KeyboardInterrupt:
        return _interrupted(args)
    for line in upd.changes:
        print(line)
    print(f"{refs}: {len(upd.rows)} rows, {len(upd.changes)} changes")
    for line in upd.bugs:
        print(f"bench_references: BUG: {line}", file=sys.stderr)
    if upd.bugs:
        print(f"bench_references: {len(upd.bugs)} contradiction(s) between bounds and "
              "plans: those rows were left as they were; report this as a bug",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
