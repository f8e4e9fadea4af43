"""Which bound source is loose on the shapes suite: each certified source alone on the
rows of instances/shapes/references.json whose certified gap is above a threshold.

Run (from the repository root):

    python benchmarks/shapes_bounds.py                  # rows above 0.5%, 10 s a source
    python benchmarks/shapes_bounds.py --above 0.01 --limit 30 --only unet

For each row: the references' gap (their plan U against their bound), then each
source's gap against the same U: the deficit bound and its Lagrangian form, the joint
deficit cover, the checkpoint LP and the timing LP (solvers/milp/bounds/), each given
``--limit`` seconds, with its time. "-" is no bound in time (or no model). The sources
are the search's (docs/exact-tier.md); the searches and the MILP phases are left out,
so the figures do not depend on a plan found in the same run.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from slackopt.io import load_instance
from slackopt.solvers.milp.bounds.checkpoint import CheckpointLP
from slackopt.solvers.milp.bounds.deficit import DeficitBound
from slackopt.solvers.milp.bounds.deficit_cover import DeficitCover
from slackopt.solvers.milp.bounds.source import BoundContext
from slackopt.solvers.milp.bounds.timing import TimingLP

SUITE = Path(__file__).resolve().parent.parent / "instances" / "shapes"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--above", type=float, default=0.005,
                    help="rows whose reference gap is above this (default 0.005)")
    ap.add_argument("--limit", type=float, default=10.0, help="seconds per source")
    ap.add_argument("--only", default="", help="rows whose instance name contains this")
    args = ap.parse_args()
    rows = json.loads((SUITE / "references.json").read_text())["rows"]
    for r in rows:
        lb, ub = r["lower_bound_s"], r["best_step_s"]
        if not lb or not ub or (ub - lb) / lb <= args.above or args.only not in r["instance"]:
            continue
        inst = load_instance(SUITE / r["instance"])
        M = int(r["budget_bytes"])
        out, earlier = [], {}
        for src in (DeficitBound(), DeficitCover(share=1.0), CheckpointLP(share=1.0),
                    TimingLP(share=1.0)):
            t0 = time.perf_counter()
            ctx = BoundContext(deadline=t0 + args.limit + 0.3, seed=0, upper_s=ub,
                               earlier=earlier)
            value = src(inst, M, ctx)
            earlier[src.name] = value
            took = time.perf_counter() - t0
            for key, b in value.bounds.items():
                gap = "-" if b is None else f"{(ub - b) / b:.2%}"
                out.append(f"{key} {gap} ({took:.1f} s)")
        print(f"{r['instance_name']} {r['budget_fraction']} P: reference "
              f"{(ub - lb) / lb:.2%}; " + ", ".join(out), flush=True)


if __name__ == "__main__":
    main()
