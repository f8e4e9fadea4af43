"""Wall-clock figures that tests must not assert (a loaded CI machine fails a correct
submission): how fast bad files are refused, how closely time limits hold.

Run: python benchmarks/timings.py [--limits 0.5,2,5] [--repeat 3]

Prints three markdown tables (wall clock on the machine that runs it; noisy on a shared
machine, so each figure is the worst of --repeat runs where a bound matters, the best
where speed matters):

1. refusal time of malformed instance and plan files through the command line, in
   process (``slackopt describe`` / ``simulate``), after one warm-up call: the loader
   promises one message naming the field "within a second";
2. genetic search under a time limit on GPT-2 XL at 0.5 P, seeding included: elapsed
   time against the limit and the promise ``limit * 1.1 + 1 s``;
3. compare's hard deadline: a solver that ignores its 0.01 s limit is stopped after
   ``1.5 * limit + 1 s``; the sweep's wall time.
"""

from __future__ import annotations

import argparse
import contextlib
import io as _io
import json
import re
import tempfile
import time
from pathlib import Path

from slackopt.cli import main as cli
from slackopt.compare import compare
from slackopt.io import load_instance, save_instance, save_plan
from slackopt.plan import Plan
from slackopt.workloads import make
from solvers.genetic import Genetic

ROOT = Path(__file__).resolve().parent.parent
GPT2 = ROOT / "instances" / "paper" / "gpt2-xl_a100-pcie4.json"


def quiet_cli(argv: list[str]) -> int:
    with contextlib.redirect_stdout(_io.StringIO()), contextlib.redirect_stderr(_io.StringIO()):
        return cli(argv)


def refusal_times(repeat: int) -> None:
    inst = make("tiny")
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        good = save_instance(inst, d / "i.json")
        plan = save_plan(Plan.keep_all(inst), d / "p.json", inst)
        doc = json.loads(good.read_text())
        cases = {
            "truncated instance": good.read_text()[: len(good.read_text()) // 2],
            "negative tensor size": json.dumps({**doc, "tensors": [
                {**doc["tensors"][0], "size_bytes": -1}, *doc["tensors"][1:]]}),
            "NaN op time": re.sub(r'"duration_s":[-0-9.e+]+', '"duration_s":NaN',
                                  good.read_text(), count=1),
            "empty file": "",
        }
        quiet_cli(["describe", str(good), "--json"])  # warm imports and the evaluator
        quiet_cli(["simulate", str(good), str(plan), "--json"])
        print("| malformed file | command | exit | slowest of runs |")
        print("|---|---|---|---|")
        for name, text in cases.items():
            path = d / "bad.json"
            path.write_text(text)
            worst, rc = 0.0, None
            for _ in range(repeat):
                t0 = time.perf_counter()
                rc = quiet_cli(["describe", str(path), "--json"])
                worst = max(worst, time.perf_counter() - t0)
            print(f"| {name} | describe | {rc} | {worst * 1e3:.0f} ms |")
        bad_plan = d / "badplan.json"
        pdoc = json.loads(plan.read_text())
        pdoc["decisions"] = {k: "drop" for k in pdoc["decisions"]}
        bad_plan.write_text(json.dumps(pdoc))
        worst = 0.0
        for _ in range(repeat):
            t0 = time.perf_counter()
            rc = quiet_cli(["simulate", str(good), str(bad_plan), "--json"])
            worst = max(worst, time.perf_counter() - t0)
        print(f"| unknown decision | simulate | {rc} | {worst * 1e3:.0f} ms |")


def genetic_limits(limits: list[float], repeat: int) -> None:
    inst = load_instance(GPT2)
    print()
    print("| limit s | elapsed s (worst) | promise: 1.1 x limit + 1 s | generations | "
          "seeding s | stopped by |")
    print("|---|---|---|---|---|---|")
    for lim in limits:
        worst, res = 0.0, None
        for seed in range(repeat):
            t0 = time.perf_counter()
            res = Genetic(generations=None, progress_s=None).solve(inst, int(0.5 * inst.P),
                                                                   time_limit_s=lim, seed=seed)
            worst = max(worst, time.perf_counter() - t0)
        seeding = sum(e.get("planning_time_s", 0.0) for e in res.info["seeds"])
        print(f"| {lim:g} | {worst:.2f} | {1.1 * lim + 1:.2f} | {res.info['generations']} | "
              f"{seeding:.2f} | {res.info['stopped_by']} |")


class _Sleepy:
    name = "sleepy"
    params: dict = {}

    def solve(self, instance, budget_bytes, *, time_limit_s=None, seed=None):
        time.sleep(60)
        raise RuntimeError("not interrupted")


def compare_deadline() -> None:
    t0 = time.perf_counter()
    df = compare([make("tiny")], [_Sleepy()], [1.0], time_limit_s=0.01, progress=False)
    wall = time.perf_counter() - t0
    print()
    print("| solver past its 0.01 s limit | status | sweep wall s | hard deadline s |")
    print("|---|---|---|---|")
    print(f"| sleeps 60 s | {df['status'].iloc[0]} | {wall:.2f} | {1.5 * 0.01 + 1:.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limits", default="0.5,2,5")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    refusal_times(args.repeat)
    genetic_limits([float(x) for x in args.limits.split(",")], args.repeat)
    compare_deadline()


if __name__ == "__main__":
    main()
