"""Wall time of time-limited solves on a 999-node Checkmate graph, against the contract
"a solve given t seconds returns within 1.5 t + 1 s" (slackopt.solverbase.hard_deadline_s).

Run: python benchmarks/time_limits.py [--time-limit 5] [--budgets 0.4,0.6,0.8]
     [--dir DIR (default: slackopt-time-limits in the system's temporary folder)]

The graph is tests/test_import_checkmate.py's ``training_graph(499, skip=4)`` (499
forward nodes with a skip edge every 4, Loss, 499 backward nodes: 499 blocks of one saved
tensor each), written as Checkmate's node-link JSON and imported by ``slackopt import
checkmate --cost-unit 1us --gpu a100``. Each row is one ``slackopt solve ... --seed 0
--json`` in a fresh process, as a user runs it:

- titan-auto alone (one CBC program per block);
- genetic seeded by titan-auto alone (``-p seed_solvers='["titan-auto"]'``) and with its
  default seeds;
- milp with its default seeds (titan-auto among them) at each budget.

Columns: wall seconds of the whole command, its CPU seconds (user + system of the child),
the planning time it reports, its status, and whether the wall time is within the hard
deadline. Prints one markdown table. Wall clock on the machine that runs it (noisy on a
shared machine; the load average is printed); nothing here is asserted by tests.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from slackopt.solverbase import hard_deadline_s  # noqa: E402
from tests.test_import_checkmate import training_graph  # noqa: E402

CLI = [sys.executable, "-c", "import sys; from slackopt.cli import main; sys.exit(main())"]


def run(args: list[str]) -> tuple[float, float, dict | None, str]:
    """One command: (wall s, CPU s of the child, its JSON document or None, stderr)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(CLI + args, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    try:
        doc = json.loads(p.stdout)
    except json.JSONDecodeError:
        doc = None
    return wall, cpu, doc, p.stderr.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--time-limit", type=float, default=5.0)
    ap.add_argument("--budgets", default="0.4,0.6,0.8")
    ap.add_argument("--dir", type=Path,
                    default=Path(tempfile.gettempdir()) / "slackopt-time-limits")
    a = ap.parse_args()
    a.dir.mkdir(parents=True, exist_ok=True)
    graph, inst = a.dir / "train499.json", a.dir / "train499-instance.json"
    graph.write_text(json.dumps(training_graph(499, skip=4)))
    wall, _, _, err = run(["import", "checkmate", str(graph), "-o", str(inst), "--cost-unit",
                           "1us", "--gpu", "a100", "--force"])
    if not inst.exists():
        sys.exit(f"import failed: {err}")
    t = a.time_limit
    budgets = [b for b in a.budgets.split(",") if b]
    cases = [("titan-auto", budgets[0], []),
             ("genetic, seeded by titan-auto", budgets[0],
              ["-p", 'seed_solvers=["titan-auto"]']),
             ("genetic", budgets[0], [])]
    cases += [("milp", b, []) for b in budgets]
    hard = hard_deadline_s(t)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
          f"time limit {t:g} s, hard deadline {hard:g} s\n")
    print("| solve | budget | wall s | CPU s | planning s | status | within |")
    print("|---|---|---|---|---|---|---|")
    for label, b, extra in cases:
        solver = label.split(",")[0]
        wall, cpu, doc, err = run(["solve", str(inst), "-s", solver, "-b", b, "--time-limit",
                                   f"{t:g}", "--seed", "0", "--json", *extra])
        plan_s = f"{doc['planning_time_s']:.2f}" if doc else "-"
        status = doc["status"] if doc else f"no result: {err.splitlines()[-1] if err else ''}"
        print(f"| {label} | {b} | {wall:.2f} | {cpu:.2f} | {plan_s} | {status} | "
              f"{'yes' if wall <= hard else 'NO'} |", flush=True)


if __name__ == "__main__":
    main()
