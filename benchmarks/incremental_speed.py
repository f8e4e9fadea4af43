"""Evaluations per second of a one-tensor change, full against incremental.

Run: python benchmarks/incremental_speed.py [--changes 400] [--repeat 3] [--budget 0.3]
     [--out benchmarks/results/incremental_speed.md]

On GPT-2 XL (the paper's workload, ``make("gpt2-xl")``, and the benchmark suite's profiled
step, instances/bench/gpt2-xl-1024-b8_a100-pcie4) and on the suite's largest instance
(T5-large on H100, 1,411 saved tensors, 8,582 ops), from SlackSwap's plan at --budget:
--changes random changes of one tensor's decision (the local search's moves), each
evaluated

- *full*: the compiled kernel from t = 0 (``slackopt.simulate._kernel.run_barrier_free``,
  what ``simulate`` runs);
- *incremental*: :class:`slackopt.simulate.incremental.Incremental`, resumed from the
  base plan's last snapshot before the changed tensor's producer (equal bit for bit:
  checked here on every change, and by tests/test_incremental.py);
- *incremental + cutoff*: the same with the cutoff at the base plan's step (as the search
  runs them: a change that cannot beat the incumbent stops early).

Figures are CPU time of this process (``time.process_time``; the fastest of --repeat
passes over the same changes), so other processes on a shared machine disturb them less
than wall clock; evaluations/s = changes / seconds. A markdown table goes to stdout and
to --out. Nothing here is asserted by tests.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from slackopt import solve
from slackopt.io import load_instance
from slackopt.simulate import _kernel
from slackopt.simulate.incremental import Incremental
from slackopt.workloads import make

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "instances" / "bench"


def instances() -> list[tuple[str, object]]:
    """(label, lowered instance) of the measured instances."""
    return [
        ("GPT-2 XL (analytic, make('gpt2-xl'))", make("gpt2-xl").lowered),
        ("GPT-2 XL (suite, gpt2-xl-1024-b8_a100-pcie4)",
         load_instance(BENCH / "gpt2-xl-1024-b8_a100-pcie4.json.gz").lowered),
        ("T5-large (suite's largest, t5-large-512-128-b8_h100-pcie5)",
         load_instance(BENCH / "t5-large-512-128-b8_h100-pcie5.json.gz").lowered),
    ]


def changes(inst, base: np.ndarray, n: int, seed: int = 0) -> list[tuple[np.ndarray, int]]:
    """`n` plans, each `base` with one random tensor set to another allowed decision."""
    rng = np.random.default_rng(seed)
    c = np.asarray(inst.c)
    out = []
    for t in rng.integers(0, inst.n_saved, size=n).tolist():
        opts = [d for d in ((0, 1, 2) if np.isfinite(c[t]) else (0, 1)) if d != base[t]]
        nd = base.copy()
        nd[t] = rng.choice(opts)
        out.append((nd, t))
    return out


def cpu(fn, repeat: int) -> float:
    """Fastest CPU time (s) of `repeat` calls of fn."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def measure(inst, frac: float, n: int, repeat: int) -> dict:
    M = int(frac * inst.P)
    base = np.asarray(solve(inst, "slackswap", M).plan.decisions, dtype=np.int8)
    inc = Incremental(inst, M)
    b = inc.rebase(base)
    cases = [(nd, np.array([t])) for nd, t in changes(inst, base, n)]
    for nd, ch in cases:  # equal bit for bit, every change
        full = _kernel.run_barrier_free(inc.inp, nd, M)
        r = inc.evaluate(nd, ch)
        assert (full[0], full[1], full[4]) == (r.code, r.step_s, r.recompute_s)
    cutoff = b.step_s * (1 + 1e-9) if b.feasible else np.inf
    t_full = cpu(lambda: [_kernel.run_barrier_free(inc.inp, nd, M) for nd, _ in cases], repeat)
    t_inc = cpu(lambda: [inc.evaluate(nd, ch) for nd, ch in cases], repeat)
    t_cut = cpu(lambda: [inc.evaluate(nd, ch, cutoff) for nd, ch in cases], repeat)
    return {"n_saved": inst.n_saved, "n_ops": inst.n_ops, "full": n / t_full,
            "incremental": n / t_inc, "cutoff": n / t_cut}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--changes", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--budget", type=float, default=0.3)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" /
                    "incremental_speed.md")
    a = ap.parse_args()
    lines = [f"Evaluations per second (CPU time, fastest of {a.repeat}) of {a.changes} "
             f"one-tensor changes of SlackSwap's plan at {a.budget:g} P.", "",
             "| instance | saved tensors | ops | full | incremental | incremental + cutoff |",
             "|---|---|---|---|---|---|"]
    for label, inst in instances():
        m = measure(inst, a.budget, a.changes, a.repeat)
        lines.append(f"| {label} | {m['n_saved']} | {m['n_ops']} | {m['full']:,.0f} | "
                     f"{m['incremental']:,.0f} ({m['incremental'] / m['full']:.2f}x) | "
                     f"{m['cutoff']:,.0f} ({m['cutoff'] / m['full']:.2f}x) |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    a.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
