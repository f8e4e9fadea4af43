"""The two direct vDNN checks: Figure 5 (the GPT-2 XL step at 50% of P under vDNN and
SlackSwap) and the section 4.1 check (VGG-16 with vDNN's Titan X parameters)."""

from __future__ import annotations

from typing import Any

from slackopt.experiments.reproduce.common import LABELS, TINY_PARAMS, _Run, _vdnn_plan


def _vgg_titanx(run: _Run) -> dict[str, float]:
    import pandas as pd

    from slackopt.simulate import simulate
    from slackopt.workloads import make

    inst = make("vgg16", gpu="titanx", **(TINY_PARAMS["vgg16"] if run.mode == "tiny" else {}))
    out: dict[str, float] = {}
    rows = []
    for cfg in ("conv", "all"):
        ev = simulate(inst, _vdnn_plan(inst, cfg, inst.P), inst.P)
        out[cfg] = ev.step_time_s / ev.ideal_time_s - 1.0
        rows.append({"config": f"vDNN{cfg}", "feasible": ev.feasible,
                     "ideal_ms": ev.ideal_time_s * 1e3, "step_ms": ev.step_time_s * 1e3,
                     "overhead": out[cfg], "stall_fwd_ms": ev.stall_fwd_s * 1e3,
                     "stall_bwd_ms": ev.stall_bwd_s * 1e3, "copied_out_GB": ev.d2h_bytes / 1e9})
    pd.DataFrame(rows).to_csv(run.out / "vgg16_titanx.csv", index=False)
    out["ideal_ms"] = inst.ideal_time_s * 1e3
    return out


def _figure5(run: _Run) -> dict[str, Any]:
    from slackopt.instance import budget_bytes
    from slackopt.plot import save, timeline
    from slackopt.simulate import simulate
    from slackopt.solver import solve

    inst = run.insts["gpt2-xl"]
    M = budget_bytes(inst, 0.5)
    evs = {label: simulate(inst, solve(inst, name, M).plan, M, trace=True)
           for label, name in (("vDNN", "vdnn"), ("SlackSwap", "slackswap"))}
    fig = timeline(evs, inst, title=f"Figure 5: {LABELS['gpt2-xl']} step at 50% of P "
                   f"(ideal {inst.ideal_time_s * 1e3:.0f} ms)")
    save(fig, run.out / "figure5.png")
    steps = [ev.step_time_s * 1e3 for ev in evs.values()]
    return {"vdnn_ms": steps[0], "slackswap_ms": steps[1], "ideal_ms": inst.ideal_time_s * 1e3}
