"""SlackSwap planning time and evaluator speed on the shipped paper instances.

Run: python benchmarks/planning_time.py [--repeat 5] [--budgets 0.9,0.5,0.3,0.1]
Prints a markdown table: per instance and budget, the median wall-clock planning time of
`slackopt.solve(..., "slackswap", ...)` (all validation rounds included), the number of
evaluations it ran, and the median time of one evaluator run of the keep-all plan.
Timings are wall clock on the machine that runs it; nothing here is asserted by tests.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from slackopt import Plan, simulate, solve
from slackopt.io import load_instance

ROOT = Path(__file__).resolve().parent.parent


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--budgets", default="0.9,0.5,0.3,0.1")
    args = ap.parse_args()
    budgets = [float(b) for b in args.budgets.split(",")]
    print("| instance | budget | planning ms (median) | evaluations | throughput | "
          "one evaluation ms |")
    print("|---|---|---|---|---|---|")
    for path in sorted((ROOT / "instances" / "paper").glob("*.json")):
        inst = load_instance(path)
        keep = Plan.keep_all(inst)
        sim_ms = 1e3 * median_time(lambda: simulate(inst, keep, inst.P), args.repeat)
        for b in budgets:
            solve(inst, "slackswap", b)  # warm caches
            res = []
            ms = 1e3 * median_time(lambda: res.append(solve(inst, "slackswap", b)),
                                   args.repeat)
            r = res[-1]
            thr = r.evaluation.throughput if r.evaluation else float("nan")
            print(f"| {inst.name} | {b:g} | {ms:.1f} | {r.info.get('evaluations', '-')} | "
                  f"{thr:.4f} | {sim_ms:.1f} |")


if __name__ == "__main__":
    main()
