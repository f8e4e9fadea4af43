"""The timing MILP bound (solvers/milp/timing_bound.py) beside the deficit bound and the
checkpoint LP, on the chain rows of the small suite and GPT-2 XL at low budgets.

Run: python benchmarks/timing_bound.py [--time-limit 60] [--rows small|paper|all]

Prints one markdown row per (instance, budget): the deficit bound, the checkpoint LP
bound, the timing bound's certified LP bound (what timing_bound returns) and its MILP
bound (SCIP's dual bound within the time limit, one thread, seed 0: ``milp_bound_s``,
not certified), the seconds each took (wall clock: machine-dependent) and the MILP's
status. Nothing here is asserted by tests; the README quotes the table.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from slackopt.instance import budget_bytes
from slackopt.io import load_instance
from slackopt.solvers.milp.bounds.checkpoint import checkpoint_bound
from slackopt.solvers.milp.bounds.deficit import deficit_bound
from slackopt.solvers.milp.bounds.timing import timing_bound

ROOT = Path(__file__).resolve().parent.parent
ROWS = {
    "small": [(f"small/{n}-seed0_a100-pcie4.json", f) for n in ("chain31", "chain63")
              for f in (0.9, 0.7, 0.5)],
    "paper": [("paper/gpt2-xl_a100-pcie4.json", f) for f in (0.1, 0.3)],
}


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1e3:.4f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--rows", choices=("small", "paper", "all"), default="all")
    args = ap.parse_args()
    rows = ROWS["small"] + ROWS["paper"] if args.rows == "all" else ROWS[args.rows]
    print("| instance | M/P | deficit (ms) | checkpoint LP (ms) | timing LP (ms) | timing "
          "MILP, uncertified (ms) | LP s | MILP s | MILP status |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path, frac in rows:
        inst = load_instance(ROOT / "instances" / path)
        M = budget_bytes(inst, frac)
        db = deficit_bound(inst, M)
        cb = checkpoint_bound(inst, M, args.time_limit)
        t0 = time.perf_counter()
        lp, _ = timing_bound(inst, M, args.time_limit, integer=False)
        t1 = time.perf_counter()
        _, info = timing_bound(inst, M, args.time_limit)
        mb = info.get("milp_bound_s")
        t2 = time.perf_counter()
        print(f"| {inst.name} | {frac} | {_ms(db)} | {_ms(cb)} | {_ms(lp)} | {_ms(mb)} | "
              f"{t1 - t0:.1f} | {t2 - t1:.1f} | {info.get('status', '-')} |", flush=True)


if __name__ == "__main__":
    main()
