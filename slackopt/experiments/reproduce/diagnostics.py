"""The diagnostics behind the report's reasons where the reproduction differs: BERT's
checkpoint boundary, what the barriers expose, what a paper-sized genetic search changes."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from slackopt.experiments.reproduce.common import (
    TINY_PARAMS,
    TRANSFORMERS,
    _checkpoint_plan,
    _Run,
    _vdnn_plan,
)


def _bert_diagnostics(run: _Run) -> dict[str, float]:
    """Why BERT's block checkpointing is slower than the paper's (see the report)."""
    from slackopt.instance import budget_bytes
    from slackopt.plan import KEEP, RECOMP, Plan
    from slackopt.simulate import simulate

    out: dict[str, float] = {}
    for w in TRANSFORMERS:
        inst = run.insts[w]
        ops = inst.scheduled_ops[: inst.n_fwd]
        b0 = inst.blocks[0]
        fwd = sum(op.duration_s for op in ops if op.layer == b0)
        pl = _checkpoint_plan(inst, 1)
        rec = float(np.where(pl.decisions == RECOMP, inst.c, 0.0).sum())
        out[f"{w}.block_share"] = rec / fwd if fwd else math.nan
    inst = run.insts["bert-large"]
    blocks = inst.blocks

    def residual_boundary(k: int) -> Plan:
        """Checkpoint k blocks at the residual the block's output norm reads (post-LN):
        keep that residual, rebuild the block output (the next block's input) from it."""
        dec = _checkpoint_plan(inst, k).decisions.copy()
        layers = np.asarray(inst.saved_layers)
        for b in blocks[:k]:
            for t in np.flatnonzero(layers == b):
                if inst.saved_categories[t] == "block_input" and np.isfinite(inst.c[t]) \
                        and len(inst.recipe_inputs[t]) == 1:
                    dec[inst.recipe_inputs[t][0]] = KEEP
                    dec[t] = RECOMP
        return Plan(dec, inst.saved_names)

    for frac in (0.5, 0.15):
        M = budget_bytes(inst, frac)
        thr = math.nan
        for k in range(len(blocks) + 1):
            ev = simulate(inst, residual_boundary(k), M)
            if ev.feasible:
                thr = ev.throughput
                break
        out[f"bert.residual_boundary@{frac}"] = thr
    return out


def _barrier_diagnostics(run: _Run) -> dict[str, float]:
    """How much of the copy time the barriers expose, per workload, under vDNN's prefetch
    rule and under the narrower "adjacent" one (see the report)."""
    from slackopt.instance import budget_bytes
    from slackopt.plan import SWAP
    from slackopt.simulate import simulate
    from slackopt.solver import solve
    from slackopt.workloads import make

    out: dict[str, float] = {}
    for w in TRANSFORMERS:
        inst = run.insts[w]
        M = budget_bytes(inst, 0.5)
        res = solve(inst, "slackswap", M)
        copy = float(inst.s[res.plan.decisions == SWAP].sum()) / inst.link.d2h_bytes_per_s
        for la in ("next_offloaded", "adjacent"):
            ev = simulate(inst, res.plan.with_policy("layer_barriers", {"lookahead": la}), M)
            out[f"{w}.{la}.loss"] = (res.evaluation.throughput - ev.throughput) * 100 \
                if ev.feasible else math.nan
            out[f"{w}.{la}.fwd_exposed"] = ev.stall_fwd_s / copy if copy else math.nan
            out[f"{w}.{la}.bwd_exposed"] = ev.stall_bwd_s / copy if copy else math.nan
    inst = run.insts["gpt2-xl"]
    adj = {"prefetch": "at_issue", "lookahead": "adjacent"}
    M = budget_bytes(inst, 0.5)
    ev = simulate(inst, _vdnn_plan(inst, "conv", M).with_policy("layer_barriers", adj), M)
    out["fig5.vdnn.adjacent_ms"] = ev.step_time_s * 1e3
    tx = make("vgg16", gpu="titanx", **(TINY_PARAMS["vgg16"] if run.mode == "tiny" else {}))
    ev = simulate(tx, _vdnn_plan(tx, "conv", tx.P).with_policy("layer_barriers", adj), tx.P)
    out["vgg.conv.adjacent"] = ev.step_time_s / ev.ideal_time_s - 1.0
    return out


def _ga_diagnostics(run: _Run) -> dict[str, Any]:
    """What a genetic search of the paper's size (14,000 plans) changes in SlackSwap's
    Llama-7B plan at 30% of P (see the report); empty when no ``genetic`` solver."""
    from slackopt.plan import DECISION_NAMES
    from slackopt.solver import registered_solvers, solve

    if run.mode == "tiny" or "genetic" not in registered_solvers():
        return {}
    inst = run.insts["llama-7b"]
    ss = solve(inst, "slackswap", 0.3)
    ga = solve(inst, "genetic", 0.3, time_limit_s=120.0, generations=None,
               max_evaluations=14000)
    if ga.plan is None or not ga.evaluation.feasible:
        return {}
    moved: dict[str, int] = {}
    a, b = ss.plan.decisions, ga.plan.decisions
    for k in np.flatnonzero(a != b):
        key = (f"{inst.saved_categories[k]} {DECISION_NAMES[a[k]]} -> "
               f"{DECISION_NAMES[b[k]]}")
        moved[key] = moved.get(key, 0) + 1
    e1, e2 = ss.evaluation, ga.evaluation
    return {"gain": (e2.throughput / e1.throughput - 1) * 100,
            "evaluations": ga.info.get("evaluations"), "moved": moved,
            "ss_d2h_GB": e1.d2h_bytes / 1e9, "ga_d2h_GB": e2.d2h_bytes / 1e9,
            "ss_recompute": e1.recompute_s / inst.ideal_time_s * 100,
            "ga_recompute": e2.recompute_s / inst.ideal_time_s * 100}
