"""The milp's anytime floor at short limits against the genetic search.

Run: python benchmarks/anytime_floor.py [--layers 32] [--budgets 0.2,0.3] [--limits 5,10]
     [--seed 1]

For the synthetic chain (`slackopt make chain --layers L`) at each budget (fraction of P)
and time limit (s), prints one markdown row: the milp's simulated step time, the source
of its plan and its certified bound; the genetic search's step time with the same seed
and limit; and the milp's step relative to the genetic search's. Wall-clock limits make
the figures machine-dependent (a loaded machine gets less done in the same limit):
nothing here is asserted by tests; the README quotes the table.
"""

from __future__ import annotations

import argparse

import slackopt
from slackopt.workloads import make


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1e3:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--budgets", default="0.2,0.3")
    ap.add_argument("--limits", default="5,10")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    inst = make("chain", layers=args.layers)
    print(f"chain, {args.layers} layers, seed {args.seed}\n")
    print("| M/P | limit s | milp ms | plan from | bound ms | genetic ms | milp / genetic |")
    print("|---|---|---|---|---|---|---|")
    for f in (float(x) for x in args.budgets.split(",")):
        for lim in (float(x) for x in args.limits.split(",")):
            m = slackopt.solve(inst, "milp", f, time_limit_s=lim, seed=args.seed)
            g = slackopt.solve(inst, "genetic", f, time_limit_s=lim, seed=args.seed)
            ms = m.evaluation.step_time_s if m.evaluation and m.evaluation.feasible else None
            gs = g.evaluation.step_time_s if g.evaluation and g.evaluation.feasible else None
            ratio = f"{ms / gs:.4f}" if ms and gs else "-"
            print(f"| {f:g} | {lim:g} | {_ms(ms)} | {m.info.get('plan_source')} | "
                  f"{_ms(m.lower_bound_s)} | {_ms(gs)} | {ratio} |", flush=True)


if __name__ == "__main__":
    main()
