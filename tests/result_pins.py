"""What every shipped instance and plan evaluates to, for the pins of test_result_pins.py.

Run ``python tests/result_pins.py`` to print the pins as JSON (the test compares them with
tests/data/result_pins.json). Each row is computed, never edited by hand:

- every valid shipped instance (instances/**/*.json[.gz]): keep-all, swap-all and
  recompute-all at 0.1, 0.3, 0.5, 0.7 and 1.0 P on the barrier-free runtime, the
  compiled engine (the reference engine too on instances with at most 400 saved tensors);
- SlackSwap's and block checkpointing's plans at 0.3 and 0.5 P (a digest of the decisions
  and the plan's evaluation), on instances with at most 3,000 saved tensors;
- vDNN's (layer_barriers) and SuperNeurons' (on_demand) plans at 0.5 P on the paper's
  and the small instances;
- every plan of instances/bench/plans at the budget in its file name.

An evaluation is pinned by every field: feasible, the step, stalls and recompute time as
float hex, the copy bytes, evictions and the peak.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

from slackopt import Plan, budget_bytes, simulate, solve
from slackopt.errors import FileFormatError
from slackopt.io import load_instance, load_plan
from slackopt.plan import KEEP, RECOMP, SWAP

ROOT = Path(__file__).resolve().parent.parent / "instances"
FRACTIONS = (0.1, 0.3, 0.5, 0.7, 1.0)
REFERENCE_MAX_SAVED = 400
SOLVE_MAX_SAVED = 3000


def instance_files() -> list[Path]:
    """Every shipped instance file (plans, manifests and references are not)."""
    out = []
    for p in sorted(ROOT.rglob("*.json*")):
        if "plans" in p.parts or p.name in ("manifest.json", "references.json"):
            continue
        out.append(p)
    return out


def row(ev) -> list:
    """One evaluation, every field that a change of the runtime could move."""
    return [bool(ev.feasible), float(ev.step_time_s).hex(), float(ev.stall_fwd_s).hex(),
            float(ev.stall_bwd_s).hex(), float(ev.recompute_s).hex(), int(ev.d2h_bytes),
            int(ev.h2d_bytes), int(ev.evictions), int(ev.peak_bytes)]


def plan_digest(plan: Plan) -> str:
    return hashlib.sha256(plan.decisions.tobytes() + plan.policy.encode()).hexdigest()[:16]


def pins_of(path: Path) -> dict:
    """The pins of one instance file (an invalid one pins nothing)."""
    try:
        inst = load_instance(path)
    except FileFormatError:
        return {}
    out: dict = {}
    small = inst.n_saved <= REFERENCE_MAX_SAVED
    for f in FRACTIONS:
        m = int(budget_bytes(inst, f))
        for name, code in (("keep", KEEP), ("swap", SWAP), ("recomp", RECOMP)):
            plan = Plan.uniform(inst, code)
            out[f"{name}@{f}"] = row(simulate(inst, plan, m))
            if small:
                out[f"{name}@{f}/reference"] = row(simulate(inst, plan, m, engine="reference"))
    rel = path.relative_to(ROOT)
    solvers = ["slackswap", "checkpoint"] if inst.n_saved <= SOLVE_MAX_SAVED else []
    if rel.parts[0] in ("paper", "small"):
        solvers += ["vdnn", "superneurons"]
    for name in solvers:
        for f in (0.3, 0.5) if name in ("slackswap", "checkpoint") else (0.5,):
            res = solve(inst, name, budget=f)
            key = f"{name}@{f}"
            if res.plan is None:
                out[key] = [res.status]
                continue
            ev = simulate(inst, res.plan, int(budget_bytes(inst, f)))
            out[key] = [res.status, plan_digest(res.plan), *row(ev)]
    return out


def bench_plan_pins() -> dict:
    """Every shipped best plan of the benchmark suite, at its budget."""
    out = {}
    plans = ROOT / "bench" / "plans"
    for p in sorted(plans.glob("*.json")):
        m = re.fullmatch(r"(.+)_M(\d+)\.json", p.name)
        inst = load_instance(ROOT / "bench" / f"{m.group(1)}.json.gz")
        out[p.name] = row(simulate(inst, load_plan(p, inst), int(m.group(2))))
    return out


def all_pins() -> dict:
    pins = {str(p.relative_to(ROOT)): pins_of(p) for p in instance_files()}
    pins["bench/plans"] = bench_plan_pins()
    return pins


if __name__ == "__main__":
    json.dump(all_pins(), sys.stdout, indent=0, sort_keys=True)
    sys.stdout.write("\n")
