"""The MILP on the four paper workloads: certified gaps of the best plan, and times.

Run: python benchmarks/milp_paper.py [--budgets 0.1,0.3,0.5,0.7] [--time-limit 300]
         [--store benchmarks/results/milp_paper.sqlite]

Runs :func:`slackopt.compare.compare` over instances/paper/ x the budgets x (SlackSwap,
the MILP with its default settings) and prints one markdown row per (workload, budget):
SlackSwap's step, the MILP's plan and its status, the MILP's lower bound (valid for
every plan), the certified gap of the best plan ((best step - bound) / bound) and the
MILP's planning time (wall clock on the machine that runs it). Runs are kept in the
``--store`` SQLite file as they finish (an interrupted run resumes).

Nothing here is asserted by tests; the README quotes the table.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from milp_small import _fmt, _ms

from slackopt.compare import compare

ROOT = Path(__file__).resolve().parent.parent
PAPER = ROOT / "instances" / "paper"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budgets", default="0.1,0.3,0.5,0.7")
    ap.add_argument("--time-limit", type=float, default=300.0)
    ap.add_argument("--store", type=Path, default=ROOT / "benchmarks" / "results" /
                    "milp_paper.sqlite")
    args = ap.parse_args()
    budgets = [float(b) for b in args.budgets.split(",") if b]
    args.store.parent.mkdir(parents=True, exist_ok=True)
    paths = sorted(PAPER.glob("*.json"))
    df = compare(paths, ["slackswap", "milp"], budgets, time_limit_s=args.time_limit,
                 store=args.store, progress=True)
    print(f"MILP on instances/paper/, time limit {args.time_limit:g} s\n")
    print("| workload | M/P | SlackSwap (ms) | MILP plan (ms) | MILP status | bound (ms) | "
          "certified gap of the best plan | MILP time (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for (name, frac), g in df.groupby(["instance", "budget_fraction"], sort=False):
        ss = g[g["solver"] == "slackswap"].iloc[0]
        mi = g[g["solver"] == "milp"].iloc[0]
        steps = [float(r["step_time_s"]) for _, r in g.iterrows() if r["feasible"]]
        best = min(steps) if steps else math.nan
        lb = float(mi["lower_bound_s"]) if mi["lower_bound_s"] == mi["lower_bound_s"] \
            else math.nan
        gap = (best - lb) / lb if steps and lb == lb else math.nan
        print(f"| {name.split('_')[0]} | {frac:g} | "
              f"{_ms(ss['step_time_s']) if ss['feasible'] else 'infeasible'} | "
              f"{_ms(mi['step_time_s']) if mi['feasible'] else '-'} | {mi['status']} | "
              f"{_ms(lb) if lb == lb else '-'} | {_fmt(gap, '.2%')} | "
              f"{mi['planning_time_s']:.0f} |")


if __name__ == "__main__":
    main()
