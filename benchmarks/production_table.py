"""The production planners' table for the README, from a ``slackopt compare`` results file.

Run: slackopt compare instances/paper/*.json --solvers production --budgets 0.5,0.3,0.1
         --out production.csv
     python benchmarks/production_table.py production.csv
(the committed results, benchmarks/results/production.csv, were written with ``--out
benchmarks/results/production.csv --force``; their table is the README's.)

Prints one markdown row per (workload, budget, solver): status, throughput (T*/T), peak
(GB), bytes moved over the link (D2H + H2D, GB), gap to the best bound and to the best
plan of the table (compare's gap columns), and what the planner's own memory model said.
Only torch-knapsack and titan-auto have a memory model; each sets ``objective_s`` exactly
when its model says the plan fits M (their module docstrings), so a row with
``objective_s`` set and an infeasible evaluation is a plan the planner calls fitting and
the evaluator finds over M ("fits; evaluator: over M"). "fits from M/P": for a plan over M,
the smallest budget (fraction of P) at which the planner's plan runs, found by the solver
contract's bisection over the evaluator (0.5% of P resolution; "never": not even at P).
Nothing here is asserted by tests.
"""

from __future__ import annotations

import argparse
import json
import math

from slackopt.compare import read_results
from slackopt.solver import registered_solvers
from slackopt.solverbase import param_defaults

MODEL_SOLVERS = ("torch-knapsack", "titan-auto")
"""Planners whose ``objective_s`` reports their own memory model's verdict."""


def _pct(x: float, digits: int = 1) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}%}"


def label(solver: str, params_json: str) -> str:
    """The solver's name and the parameters that differ from its defaults."""
    defaults = param_defaults(registered_solvers()[solver].load())
    given = json.loads(params_json or "{}")
    extra = [f"{k}={v}" for k, v in given.items() if defaults.get(k, v) != v]
    return solver + (f" ({', '.join(extra)})" if extra else "")


def model_verdict(row) -> str:
    """The planner's own memory model against the evaluator, in words."""
    if row.solver not in MODEL_SOLVERS:
        return "no model"
    says = row.objective_s == row.objective_s          # not NaN: the model says it fits
    if says and not row.feasible:
        return "**fits; evaluator: over M**"
    return "fits" if says else "does not fit"


def table(path: str) -> str:
    """The markdown table of a compare results file (csv, json, parquet or sqlite)."""
    df = read_results(path)
    lines = ["| workload | M/P | solver | status | throughput | peak GB | moved GB | "
             "gap to bound | gap to best | own memory model | fits from M/P |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in df.itertuples(index=False):
        solver = label(r.solver, r.params)
        mb = r.min_budget_bytes
        reach = "-" if r.feasible else (f"{mb / r.P_bytes:.3f}" if mb == mb and mb else "never")
        moved = (r.d2h_bytes + r.h2d_bytes) / 1e9 if r.feasible else math.nan
        lines.append(
            f"| {r.instance.split('_')[0]} | {r.budget_fraction:.2g} | {solver} | {r.status} "
            f"| {_pct(r.throughput) if r.feasible else '-'} | "
            f"{'-' if not r.feasible else f'{r.peak_bytes / 1e9:.2f}'} | "
            f"{'-' if moved != moved else f'{moved:.2f}'} | {_pct(r.gap_to_bound, 2)} | "
            f"{_pct(r.gap_to_best, 2)} | {model_verdict(r)} | {reach} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", help="a slackopt compare --out file")
    print(table(ap.parse_args().results))


if __name__ == "__main__":
    main()
