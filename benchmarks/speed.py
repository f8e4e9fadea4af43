"""Speed of the evaluator and of SlackSwap's planner on the paper workloads.

Run: python benchmarks/speed.py [--repeat 7] [--budgets 0.9,0.5,0.3,0.1]
     [--depths 1,2,4,8,16,32,64] [--depth-repeat 5] [--only depth|bench] [--solver SPEC]

Prints three markdown tables (wall clock on the machine that runs it, one core;
nothing here is asserted by tests):
1. evaluations per second of SlackSwap's plan at 0.5 P, compiled and reference engines;
2. SlackSwap planning time (whole solve, every validation round included) per workload
   and budget (fastest of --repeat runs, as timeit reports: the least disturbed run);
3. growth with model depth: GPT-2 XL with 1x to 64x its 48 layers (--depths): saved
   tensors n, planning time at 0.5 P (whole solve; the median of --depth-repeat runs
   after one warm-up run, wall clock and CPU time of the process, the CPU time being
   the steadier figure on a shared machine), time / (n log n) normalised to the 1x model
   (flat = n log n; the README states the largest ratio) for both, the peak of Python
   and numpy allocations during one more solve (tracemalloc; compiled kernels' scratch
   arrays are not counted), evaluations/s, and the instance's make time and the peak
   memory of the process so far;
4. (``--only bench``) the benchmark suite's largest instances (instances/bench/, by
   saved tensors): loading the gzip file (fastest of --repeat loads), SlackSwap's whole
   solve at each budget that lies above the instance's floor (fastest of --repeat), and
   evaluations/s of the plan found at the smallest of those budgets.

--solver times another planner with the same table, e.g. the planner of a commit where
it is one file: ``git show COMMIT:solvers/slackswap.py > slackswap_other.py`` then
``--solver slackswap_other.py:SlackSwap`` (since the package solvers/slackswap/, run this
script in a checkout of that commit instead).
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from slackopt import simulate, solve
from slackopt.instance import budget_bytes
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
    ap.add_argument("--depths", default="1,2,4,8,16,32,64")
    ap.add_argument("--depth-repeat", type=int, default=5)
    ap.add_argument("--solver", default="slackswap",
                    help="solver of the depth table: a name or path.py:Class")
    ap.add_argument("--only", choices=("depth", "bench"), default=None)
    ap.add_argument("--largest", type=int, default=4,
                    help="--only bench: how many of the largest suite instances")
    args = ap.parse_args()
    if args.only == "bench":
        bench_table(args)
        return
    if args.only != "depth":
        tables(args)
    depth_curve([int(x) for x in args.depths.split(",")], args.depth_repeat, args.solver)


def bench_table(args: argparse.Namespace) -> None:
    import json

    budgets = [float(b) for b in args.budgets.split(",")]
    suite = ROOT / "instances" / "bench"
    entries = json.loads((suite / "manifest.json").read_text())["instances"]
    seen, largest = set(), []
    for e in sorted(entries, key=lambda e: -int(e["saved_tensors"])):
        if e["model"] not in seen:  # one target per model
            seen.add(e["model"])
            largest.append(e)
    print("| instance | saved tensors | ops | load ms | " +
          " | ".join(f"SlackSwap {b:g} P" for b in budgets) + " | evaluations/s |")
    print("|---|---|---|---|" + "---|" * len(budgets) + "---|")
    for e in largest[: args.largest]:
        path = suite / e["file"]
        load_instance(path)
        load_ms = 1e3 * best_time(lambda path=path: load_instance(path), args.repeat)
        inst = load_instance(path)
        cells, last = [], None
        for b in budgets:
            res = solve(inst, "slackswap", b)
            if res.plan is None or not res.evaluation.feasible:
                cells.append("no plan")
                continue
            last = (res.plan, b)
            ms = 1e3 * best_time(lambda inst=inst, b=b: solve(inst, "slackswap", b),
                                 args.repeat)
            cells.append(f"{ms:.0f} ms")
        eps = "-"
        if last is not None:
            M = budget_bytes(inst, last[1])
            eps = f"{evals_per_s(inst, last[0], M, 'compiled'):,.0f}"
        print(f"| {e['file']} | {inst.n_saved:,} | {inst.n_ops:,} | {load_ms:.0f} | "
              + " | ".join(cells) + f" | {eps} |", flush=True)


def tables(args: argparse.Namespace) -> None:
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



def depth_curve(depths: list[int], repeat: int, solver: str = "slackswap") -> None:
    import resource
    import statistics
    import tracemalloc

    print()
    print(f"solver: {solver}; median of {repeat} runs after a warm-up run")
    print()
    print("| GPT-2 XL layers | saved tensors n | planning s at 0.5 P (wall) | "
          "time / (n log n), 1x = 1 | planning CPU s | CPU / (n log n), 1x = 1 | "
          "planning peak alloc MB | evaluations/s compiled | make s | peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    base = base_cpu = None
    for mult in depths:
        t0 = time.perf_counter()
        inst = make("gpt2-xl", layers=48 * mult)
        make_s = time.perf_counter() - t0
        n = inst.n_saved
        res = solve(inst, solver, 0.5)  # warm (JIT, caches)
        walls, cpus = [], []
        for _ in range(repeat):
            c0, w0 = time.process_time(), time.perf_counter()
            solve(inst, solver, 0.5)
            walls.append(time.perf_counter() - w0)
            cpus.append(time.process_time() - c0)
        s, cpu = statistics.median(walls), statistics.median(cpus)
        tracemalloc.start()
        solve(inst, solver, 0.5)
        alloc_mb = tracemalloc.get_traced_memory()[1] / 1e6
        tracemalloc.stop()
        nlogn = n * math.log(n)
        base = base or s / nlogn
        base_cpu = base_cpu or cpu / nlogn
        M = int(0.5 * inst.P)
        eps = evals_per_s(inst, res.plan, M, "compiled")
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
        print(f"| {48 * mult} | {n:,} | {s:.3f} | {s / nlogn / base:.2f} | {cpu:.3f} | "
              f"{cpu / nlogn / base_cpu:.2f} | {alloc_mb:.1f} | {eps:,.0f} | {make_s:.1f} | "
              f"{rss:.0f} |", flush=True)


if __name__ == "__main__":
    main()
