"""Speed of the evaluator and of SlackSwap's planner on the paper workloads.

Run: python benchmarks/speed.py [--repeat 7] [--budgets 0.9,0.5,0.3,0.1]

Prints three markdown tables (wall clock on the machine that runs it, one core;
nothing here is asserted by tests):
1. evaluations per second of SlackSwap's plan at 0.5 P, compiled and reference engines;
2. SlackSwap planning time (whole solve, every validation round included) per workload
   and budget (fastest of --repeat runs, as timeit reports: the least disturbed run);
3. growth with model depth: GPT-2 XL with 1x, 2x and 4x the layers: saved tensors n,
   planning time at 0.5 P, time / (n log n) normalised to the 1x model, evaluations/s.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from slackopt import simulate, solve
from slackopt.io import load_instance
from slackopt.workloads import make

ROOT = Path(__file__).resolve().parent.parent


def best_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def evals_per_s(inst, plan, M, engine: str, seconds: float = 1.0) -> float:
    simulate(inst, plan, M, engine=engine)  # warm (JIT, caches)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        simulate(inst, plan, M, engine=engine)
        n += 1
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--budgets", default="0.9,0.5,0.3,0.1")
    args = ap.parse_args()
    budgets = [float(b) for b in args.budgets.split(",")]
    paths = sorted((ROOT / "instances" / "paper").glob("*.json"))
    insts = [load_instance(p) for p in paths]

    print("| instance | saved tensors | evaluations/s compiled | evaluations/s reference |")
    print("|---|---|---|---|")
    for inst in insts:
        M = int(0.5 * inst.P)
        plan = solve(inst, "slackswap", M).plan
        print(f"| {inst.name} | {inst.n_saved} | {evals_per_s(inst, plan, M, 'compiled'):,.0f} "
              f"| {evals_per_s(inst, plan, M, 'reference'):,.0f} |")

    print()
    print("| instance | " + " | ".join(f"{b:g} P" for b in budgets) + " |")
    print("|---|" + "---|" * len(budgets))
    for inst in insts:
        cells = []
        for b in budgets:
            solve(inst, "slackswap", b)
            ms = 1e3 * best_time(lambda inst=inst, b=b: solve(inst, "slackswap", b), args.repeat)
            cells.append(f"{ms:.1f} ms")
        print(f"| {inst.name} | " + " | ".join(cells) + " |")

    print()
    print("| GPT-2 XL layers | saved tensors n | planning ms at 0.5 P | "
          "time / (n log n), 1x = 1 | evaluations/s compiled |")
    print("|---|---|---|---|---|")
    base = None
    for mult in (1, 2, 4):
        inst = make("gpt2-xl", layers=48 * mult)
        n = inst.n_saved
        solve(inst, "slackswap", 0.5)
        ms = 1e3 * best_time(lambda inst=inst: solve(inst, "slackswap", 0.5), args.repeat)
        norm = ms / (n * math.log(n))
        base = base or norm
        M = int(0.5 * inst.P)
        eps = evals_per_s(inst, solve(inst, "slackswap", 0.5).plan, M, "compiled")
        print(f"| {48 * mult} | {n} | {ms:.1f} | {norm / base:.2f} | {eps:,.0f} |")


if __name__ == "__main__":
    main()
