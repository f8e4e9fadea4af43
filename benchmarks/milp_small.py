"""The exact MILP on the small instance suite: solve times per backend, and references.

Run: python benchmarks/milp_small.py [--backends scip,highs,pulp] [--time-limit 60]
         [--threads 2] [--store benchmarks/results/milp_small.sqlite] [--write-references]

1. Writes the suite's instance files (:data:`SUITE`) to instances/small/ when missing (an
   existing file is never replaced).
2. Runs :func:`slackopt.compare.compare` over the suite x :data:`BUDGETS` x the MILP
   backends, and SlackSwap for its certified gap. Runs are kept in the ``--store`` SQLite
   file as they finish: an interrupted run resumes where it stopped, and a finished one
   is not redone (delete the store to measure again).
3. Prints two markdown tables: per (instance, budget) and backend the status, solve time
   (s, wall clock on the machine that runs it) and gap (upper - lower) / lower of the
   plan it returns; and the references (largest proven lower bound, best simulated step,
   SlackSwap's gap to that bound).
4. ``--write-references`` writes instances/small/references.json (format in
   :mod:`slackopt.compare`): per (instance, budget) the largest lower bound of any run,
   the best simulated step, their status ("optimal" when within
   slackopt.solver.OPTIMAL_REL_TOL, else "bounded"), the solver, backend and settings
   of the run that proved the bound, and today's date. It asks before replacing an
   existing file unless ``--force`` is given.

Nothing here is asserted by tests; the README quotes the tables.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import sys
from pathlib import Path

import pandas as pd

from slackopt.compare import REFERENCES_FORMAT, compare
from slackopt.io import load_instance, save_instance
from slackopt.solver import OPTIMAL_REL_TOL
from slackopt.workloads import make

ROOT = Path(__file__).resolve().parent.parent
SMALL = ROOT / "instances" / "small"
SUITE = [("tiny", {"layers": n}) for n in (1, 2, 3, 4)] + [
    ("chain", {"layers": n}) for n in (8, 31, 63)] + [
    ("unet", {"layers": n}) for n in (2, 3)]
"""(workload, parameters): 1-4 layer tiny transformers, chains of 9, 32 and 64 saved
tensors (the last one the exact tier's stated size), and U-Net DAGs with long skips."""
BUDGETS = (0.9, 0.7, 0.5)
"""Budgets, fractions of each instance's keep-all peak P."""


def suite_files() -> list[Path]:
    """Write the missing suite instances; return every suite file path."""
    SMALL.mkdir(parents=True, exist_ok=True)
    paths = []
    for workload, params in SUITE:
        inst = make(workload, **params)
        path = SMALL / f"{inst.name}.json"
        if not path.exists():
            save_instance(inst, path)
        paths.append(path)
    return paths


def _fmt(x: float, spec: str = ".3g") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def _ms(v: float | None) -> str:
    return _fmt(None if v is None else 1e3 * v, ".4f")


def pair_status(lower: float | None, best: float | None, status: str) -> str:
    """The status of a references entry, for its (bound, best step) pair: "optimal" when
    the best simulated step is within OPTIMAL_REL_TOL of the largest valid bound,
    "bounded" when both exist with a larger gap, else the bound's run's status
    ("infeasible", "timeout")."""
    if lower is None or best is None:
        return status
    return "optimal" if (best - lower) <= OPTIMAL_REL_TOL * lower else "bounded"


def references(df: pd.DataFrame) -> list[dict]:
    """One references entry per (instance, budget) from the MILP rows of `df`: the largest
    lower bound of any run, the best simulated step of any run (MILP or SlackSwap), and
    their status (:func:`pair_status`)."""
    today = dt.date.today().isoformat()
    out = []
    milp = df[df["solver"] == "milp"]
    for (name, m), g in milp.groupby(["instance", "budget_bytes"], sort=False):
        lbs = g[g["lower_bound_s"].notna()]
        src = lbs.loc[lbs["lower_bound_s"].idxmax()] if len(lbs) else g.iloc[0]
        steps = df[(df["instance"] == name) & (df["budget_bytes"] == m) & df["feasible"]]
        params = json.loads(src["params"])
        lb = None if pd.isna(src["lower_bound_s"]) else float(src["lower_bound_s"])
        best = float(steps["step_time_s"].min()) if len(steps) else None
        out.append({
            "instance": name, "budget_bytes": int(m),
            "budget_fraction": float(src["budget_fraction"]),
            "lower_bound_s": lb, "best_step_s": best,
            "status": pair_status(lb, best, str(src["status"])),
            "min_budget_bytes": None if pd.isna(src["min_budget_bytes"]) else
            int(src["min_budget_bytes"]),
            "solver": "milp", "backend": params.get("backend"),
            "settings": dict(params, time_limit_s=float(src["time_limit_s"])),
            "date": today})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="scip,highs,pulp")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--store", type=Path, default=ROOT / "benchmarks" / "results" /
                    "milp_small.sqlite")
    ap.add_argument("--write-references", action="store_true")
    ap.add_argument("--force", action="store_true", help="replace references.json")
    args = ap.parse_args()
    backends = [b for b in args.backends.split(",") if b]
    args.store.parent.mkdir(parents=True, exist_ok=True)
    solvers = [("milp", {"backend": b, "threads": args.threads}) for b in backends]
    solvers.append("slackswap")
    paths = suite_files()
    df = compare(paths, solvers, list(BUDGETS), time_limit_s=args.time_limit,
                 store=args.store, progress=True)

    print(f"MILP on instances/small/, time limit {args.time_limit:g} s, "
          f"{args.threads} threads; cells: status, solve time (s), plan gap to its bound\n")
    print("| instance | saved | M/P | " + " | ".join(backends) + " |")
    print("|---|---|---|" + "---|" * len(backends))
    saved = {inst.name: inst.n_saved for inst in map(load_instance, paths)}
    df["backend"] = df["params"].map(lambda t: json.loads(t).get("backend"))
    for (name, frac), g in df.groupby(["instance", "budget_fraction"], sort=False):
        cells = []
        for b in backends:
            row = g[(g["solver"] == "milp") & (g["backend"] == b)]
            if not len(row):
                cells.append("-")
                continue
            r = row.iloc[0]
            gap = ((r["step_time_s"] - r["lower_bound_s"]) / r["lower_bound_s"]
                   if r["feasible"] and pd.notna(r["lower_bound_s"]) else math.nan)
            cells.append(f"{r['status']}, {r['planning_time_s']:.1f}, "
                         f"{_fmt(gap, '.2%')}")
        print(f"| {name} | {saved[name]} | {frac:g} | " + " | ".join(cells) + " |")

    refs = references(df)
    print("\n| instance | M/P | status | lower bound (ms) | best step (ms) | "
          "SlackSwap step (ms) | SlackSwap gap to bound |")
    print("|---|---|---|---|---|---|---|")
    for e in refs:
        ss = df[(df["instance"] == e["instance"]) & (df["budget_bytes"] == e["budget_bytes"])
                & (df["solver"] == "slackswap")]
        ss_step = float(ss["step_time_s"].iloc[0]) if len(ss) and ss["feasible"].iloc[0] \
            else math.nan
        lb = e["lower_bound_s"]
        gap = (ss_step - lb) / lb if lb and not math.isnan(ss_step) else math.nan
        print(f"| {e['instance']} | {e['budget_fraction']:g} | {e['status']} | "
              f"{_ms(lb)} | {_ms(e['best_step_s'])} | {_ms(ss_step)} | {_fmt(gap, '.2%')} |")

    if args.write_references:
        path = SMALL / "references.json"
        if path.exists() and not args.force:
            ans = input(f"{path} exists; replace it? [y/N] ") if sys.stdin.isatty() else "n"
            if ans.strip().lower() != "y":
                print(f"{path} kept; pass --force to replace it", file=sys.stderr)
                return
        doc = {"format": REFERENCES_FORMAT, "schema_version": 1, "entries": refs}
        path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        print(f"\nwrote {path} ({len(refs)} entries)")


if __name__ == "__main__":
    main()
