"""How far the one-microbatch stand-in of a pipeline stage is from the stage itself.

The suite's ``llama-3-70b-pp8-stage0`` profiles one microbatch of Llama-3-70B's first
pipeline stage (PP = 8) and says a device budget B of the stage is "about B / 8" of it;
``llama-3-70b-pp8-1f1b-s0-m16`` is the stage itself, 16 microbatches under 1F1B
(docs/model.md, "A pipeline stage"). This script puts the two side by side on one target:

- the keep-all peaks: the stand-in's P, what it implied for the stage (8 P: every one of
  the 8 microbatches in flight at its own peak at once), and the stage's P;
- at 0.1, 0.3 and 0.5 of each one's P, SlackSwap's step and the genetic search's
  (``generations=None``: it runs until the time limit, 60 s by default; seed 0), each over
  its own T*; and the stage's step the stand-in implied: the stage's T* plus m times the
  stand-in's step above its T* (every microbatch as slow as the stand-in, no overhead
  hidden in a pipeline bubble).

Run from the repository root (prints a markdown table; instances/bench/README.md holds its
output):

    python benchmarks/stage_standin.py                      # H100, 60 s a genetic run
    python benchmarks/stage_standin.py --target gh200-gh200-c2c --time-limit 10
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "instances" / "bench"
STANDIN = "llama-3-70b-pp8-stage0"
STAGE = "llama-3-70b-pp8-1f1b-s0-m16"
FRACTIONS = (0.1, 0.3, 0.5)


def _steps(inst, fraction: float, time_limit_s: float) -> tuple[float | None, float | None]:
    """SlackSwap's and the genetic search's simulated steps (s) at `fraction` of P; None
    where the plan does not run under the budget."""
    from slackopt import solve

    out = []
    for name, params in (("slackswap", {}), ("genetic", {"generations": None})):
        res = solve(inst, name, fraction, seed=0,
                    time_limit_s=time_limit_s if name == "genetic" else None, **params)
        ev = res.evaluation
        out.append(ev.step_time_s if ev is not None and ev.feasible else None)
    return out[0], out[1]


def _ms(t: float | None) -> str:
    return "-" if t is None else f"{t * 1e3:,.1f}"


def _over(t: float | None, ideal: float) -> str:
    return "-" if t is None else f"{t / ideal - 1:+.2%}"


def main(argv: list[str] | None = None) -> int:
    """Print the comparison as markdown; returns the exit status."""
    from slackopt.io import load_instance
    from slackopt.stage import schedule_of

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default="h100-pcie5", help="GPU and link of the files")
    ap.add_argument("--time-limit", type=float, default=60.0,
                    help="seconds of each genetic run")
    args = ap.parse_args(argv)
    one = load_instance(BENCH / f"{STANDIN}_{args.target}.json.gz")
    stage = load_instance(BENCH / f"{STAGE}_{args.target}.json.gz")
    sch = schedule_of(stage) or {}
    m, held = sch["microbatches"], sch["stages"] - sch["stage"]
    print(f"Keep-all peak ({args.target}):\n")
    print("| instance | keep-all peak P (GB) |\n|---|---|")
    print(f"| stand-in `{STANDIN}` (one microbatch) | {one.P / 1e9:.2f} |")
    print(f"| what it implied for the stage, {held} x P | {held * one.P / 1e9:.2f} |")
    print(f"| the stage `{STAGE}` ({sch['name']}, {m} microbatches) | {stage.P / 1e9:.2f} "
          f"({stage.P / (held * one.P) - 1:+.1%}) |")
    print(f"\nSteps in ms, over each one's T* (stand-in {one.ideal_time_s * 1e3:,.1f} ms, "
          f"stage {stage.ideal_time_s * 1e3:,.1f} ms); genetic {args.time_limit:g} s, "
          "seed 0:\n")
    print("| M / P | stand-in M (GB) | stand-in SlackSwap | stand-in genetic | stage implied "
          "by the stand-in's best | stage M (GB) | stage SlackSwap | stage genetic |")
    print("|---|---|---|---|---|---|---|---|")
    for f in FRACTIONS:
        s1, g1 = _steps(one, f, args.time_limit)
        s2, g2 = _steps(stage, f, args.time_limit)
        best1 = min((t for t in (s1, g1) if t is not None), default=None)
        implied = None if best1 is None else stage.ideal_time_s + m * (best1 - one.ideal_time_s)
        print(f"| {f:g} | {f * one.P / 1e9:.2f} | {_ms(s1)} ({_over(s1, one.ideal_time_s)}) | "
              f"{_ms(g1)} ({_over(g1, one.ideal_time_s)}) | {_ms(implied)} "
              f"({_over(implied, stage.ideal_time_s)}) | {f * stage.P / 1e9:.2f} | "
              f"{_ms(s2)} ({_over(s2, stage.ideal_time_s)}) | "
              f"{_ms(g2)} ({_over(g2, stage.ideal_time_s)}) |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
