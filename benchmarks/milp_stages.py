"""The exact tier (milp) on the suite's pipeline stages: which bound certifies each row.

Run: python benchmarks/milp_stages.py [--only FILTER] [--budgets 0.1,0.3,0.5,0.7]
         [--time-limit 90] [--seed 0]

The stages are the files of instances/bench/manifest.json whose entry states a
``schedule`` (``--only`` filters them as ``bench_references.py --only`` does: files,
names or globs); the budgets are fractions of each file's keep-all peak P. One solve a
row, in this process; prints one markdown row per file and budget: the milp's status, its
plan's step, its certified bound, the phase whose bound it is (``T*`` when none is above
the ideal step; the phases are those of ``info["bounds"]``, docs/exact-tier.md, "Pipeline
stages"), the certified gap (step / bound - 1), the phase that found the plan
(``info["plan_source"]``) and the wall time (the first solve also pays the imports and
the numba compile).

``benchmarks/bench_references.py`` records the suite's reference values; this script
says where a stage row's bound comes from. Nothing here is asserted by tests;
docs/bounds.md ("Pipeline stages") quotes a run.
"""

from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    """The command (arguments in the module docstring); returns the exit status."""
    import slackopt
    from slackopt.compare.bench import BENCH_MANIFEST, check_files, load_manifest
    from slackopt.errors import SlackoptError
    from slackopt.instance import budget_bytes
    from slackopt.io import load_instance

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None, help="comma-separated stage files, names or globs")
    ap.add_argument("--budgets", default="0.1,0.3,0.5,0.7", help="fractions of P")
    ap.add_argument("--time-limit", type=float, default=90.0, help="per solve (s)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        suite = load_manifest(BENCH_MANIFEST).select(args.only)
        stages = [e for e in suite.instances if "schedule" in e.entry]
        if not stages:
            raise SlackoptError(f"--only {args.only!r}: no pipeline stage of the suite "
                                "matches; give a file stem such as "
                                "'llama-3-70b-pp8-1f1b-s7-m16_h100-pcie5'")
        check_files(suite)
        try:
            fractions = [float(b) for b in args.budgets.split(",") if b.strip()]
        except ValueError:
            fractions = []
        if not fractions or any(not 0 < b <= 1 for b in fractions):
            raise SlackoptError(f"--budgets '{args.budgets}': give fractions of P in (0, 1]")
    except SlackoptError as e:
        print(f"milp_stages: error: {e}", file=sys.stderr)
        return 2
    print("| stage | M/P | status | plan (ms) | bound (ms) | bound from | gap | plan from "
          "| wall (s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for e in stages:
        inst = load_instance(e.path)
        t_star = float(inst.ideal_time_s)
        for frac in fractions:
            t0 = time.perf_counter()
            r = slackopt.solve(inst, "milp", budget_bytes(inst, frac),
                               time_limit_s=args.time_limit, seed=args.seed)
            wall = time.perf_counter() - t0
            ev, lb = r.evaluation, r.lower_bound_s
            step = ev.step_time_s if ev is not None and ev.feasible else None
            src = "T*"
            if lb is not None and lb > t_star:
                src = next((k for k, v in r.info.get("bounds", {}).items() if v == lb), "?")
            gap = "-" if step is None or lb is None else f"{(step - lb) / lb:.3%}"
            print(f"| {e.name} | {frac:g} | {r.status} | "
                  f"{'-' if step is None else f'{step * 1e3:.2f}'} | "
                  f"{'-' if lb is None else f'{lb * 1e3:.2f}'} | {src} | {gap} | "
                  f"{r.info.get('plan_source') or '-'} | {wall:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
