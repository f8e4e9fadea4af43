"""How much of the best plans' step time the runtime policy loses
(slackopt.experiments.runtime_gap).

Run: python benchmarks/runtime_gap.py [--time-limit 10] [--plan-time-limit 20]
         [--paper gpt2-xl_a100-pcie4:0.5,...] [--no-small] [--out FILE.json]

- Small suite (instances/small/, budgets 0.9, 0.7, 0.5 of P): the plan is the milp
  solver's (``--plan-time-limit`` s, seed 0: the best plan it finds, SlackSwap's plan and a
  local search around it included); L is the larger of its lower bound and
  references.json's.
- Paper rows (``--paper``, instance:budget pairs from instances/paper/): SlackSwap's plan;
  L is the largest of T*, the deficit bound and the checkpoint LP bound (the milp
  solver's closed-form and small-LP bounds, each valid for every barrier-free plan).

Per row: the runtime's step U, the best-schedule bracket [L_dec, S_best] (the
fixed-decision relaxation or the compute floor; the CP-SAT schedule verified by the
checker, ``--time-limit`` s each), lost to the runtime (>= U - S_best, <= U - L_dec) and
lost to the decisions (<= S_best - L), as percentages of U, and the seconds spent. Rows are
appended to ``--out`` (JSON lines) as they finish (the README's run:
benchmarks/results/runtime_gap.jsonl); a markdown table goes to stdout.
Wall-clock figures depend on the machine (the README's were taken on 2 shared cores).
Nothing here is asserted by tests.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from slackopt import solve
from slackopt.experiments.runtime_gap import runtime_gap
from slackopt.io import load_instance
from slackopt.solvers.milp.bounds.checkpoint import checkpoint_bound
from slackopt.solvers.milp.bounds.deficit import deficit_bound

ROOT = Path(__file__).resolve().parent.parent
SMALL = ROOT / "instances" / "small"
PAPER = ROOT / "instances" / "paper"
BUDGETS = (0.9, 0.7, 0.5)
PAPER_ROWS = "vgg16_a100-pcie4:0.7,bert-large_a100-pcie4:0.3,gpt2-xl_a100-pcie4:0.5"


def _pct(x: float | None, base: float | None) -> str:
    return "-" if x is None or not base else f"{100.0 * x / base:.2f}%"


def _us(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e6:.6g}"


def _references() -> dict[tuple[str, int], float]:
    path = SMALL / "references.json"
    if not path.exists():
        return {}
    doc = json.loads(path.read_text())
    return {(e["instance"], int(e["budget_bytes"])): e["lower_bound_s"]
            for e in doc["entries"] if e.get("lower_bound_s") is not None}


def row(inst, plan, M: int, frac: float, L: float | None, source: str,
        args: argparse.Namespace) -> dict:
    """One measured row (a dict; times in s)."""
    t0 = time.perf_counter()
    g = runtime_gap(inst, plan, M, time_limit_s=args.time_limit,
                    bound_time_limit_s=args.bound_time_limit, instance_lower_bound_s=L)
    d = g.to_dict()
    d.update(instance=inst.name, budget_fraction=frac, plan=source,
             gap_seconds=time.perf_counter() - t0)
    return d


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=10.0,
                    help="CP-SAT seconds per row (default 10)")
    ap.add_argument("--bound-time-limit", type=float, default=None,
                    help="relaxation seconds per row (default: --time-limit)")
    ap.add_argument("--plan-time-limit", type=float, default=20.0,
                    help="milp seconds per small-suite row for the plan (default 20)")
    ap.add_argument("--paper", default=PAPER_ROWS,
                    help=f"instance:budget rows of instances/paper/ (default {PAPER_ROWS}); "
                    "'' for none")
    ap.add_argument("--no-small", action="store_true", help="skip the small suite")
    ap.add_argument("--out", type=Path, default=None, help="append JSON lines here")
    args = ap.parse_args()
    rows: list[dict] = []

    def emit(d: dict) -> None:
        rows.append(d)
        if args.out is not None:
            with args.out.open("a") as f:
                f.write(json.dumps(d) + "\n")
        print(f"# {d['instance']} {d['budget_fraction']}: U {_us(d['runtime_step_s'])} us, "
              f"[{_us(d['best_schedule_lower_s'])}, {_us(d['best_schedule_s'])}] us "
              f"({d['gap_seconds']:.1f} s)", file=sys.stderr, flush=True)

    if not args.no_small:
        refs = _references()
        for path in sorted(SMALL.glob("*.json")):
            if path.name == "references.json":
                continue
            inst = load_instance(path)
            for frac in BUDGETS:
                M = int(frac * inst.P)
                res = solve(inst, "milp", M, time_limit_s=args.plan_time_limit, seed=0)
                if res.plan is None or res.evaluation is None or not res.evaluation.feasible:
                    print(f"# {inst.name} {frac}: {res.status}, no plan", file=sys.stderr)
                    continue
                bounds = [b for b in (res.lower_bound_s, refs.get((inst.name, M))) if b]
                emit(row(inst, res.plan, M, frac, max(bounds) if bounds else None,
                         f"milp ({res.status})", args))
    for item in filter(None, args.paper.split(",")):
        name, frac_s = item.split(":")
        inst = load_instance(PAPER / f"{name}.json")
        frac = float(frac_s)
        M = int(frac * inst.P)
        res = solve(inst, "slackswap", M)
        if res.plan is None:
            print(f"# {name} {frac}: {res.status}, no plan", file=sys.stderr)
            continue
        L = max(b for b in (inst.ideal_time_s, deficit_bound(inst, M),
                            checkpoint_bound(inst, M, 60.0)) if b is not None)
        emit(row(inst, res.plan, M, frac, L, "slackswap", args))

    print("| instance | budget | plan | U (us) | best schedule [L_dec, S_best] (us) | "
          "lost to runtime | lost to decisions | L (us) | CP-SAT | time (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for d in rows:
        U = d["runtime_step_s"]
        rt_lo = d["lost_to_runtime_min_s"]
        rt_hi = d["lost_to_runtime_max_s"]
        print(f"| {d['instance']} | {d['budget_fraction']} | {d['plan']} | {_us(U)} | "
              f"[{_us(d['best_schedule_lower_s'])}, {_us(d['best_schedule_s'])}] | "
              f"{_pct(rt_lo, U)} .. {_pct(rt_hi, U)} | "
              f"<= {_pct(d['lost_to_decisions_max_s'], U)} | "
              f"{_us(d['instance_lower_bound_s'])} | {d['cpsat_status']} "
              f"({d['schedule_source']}) | {d['gap_seconds']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
