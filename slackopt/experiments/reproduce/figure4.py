"""Figure 4 (throughput across budgets, every baseline and SlackSwap) and Table 2 (where
the time goes at 40% of P, read from Figure 4's table)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from slackopt.experiments.reproduce.common import (
    FIGURE4_SOLVERS,
    LABELS,
    TABLE2_BUDGET,
    WORKLOADS,
    _Run,
    _table_md,
    _val,
)
from slackopt.solver import PLAN_STATUSES

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def _figure4(run: _Run) -> pd.DataFrame:
    from slackopt.compare import compare
    from slackopt.plot import save, throughput_vs_budget

    df = compare(list(run.insts.values()), list(FIGURE4_SOLVERS), list(run.budgets),
                 workers=run.workers, progress=run.progress)
    df.to_csv(run.out / "figure4.csv", index=False)
    fig = throughput_vs_budget(
        df, title="Figure 4: throughput across memory budgets (A100, PCIe 4.0)")
    save(fig, run.out / "figure4.png")
    return df


def _table2(run: _Run, fig4: pd.DataFrame) -> pd.DataFrame:
    import pandas as pd

    d = fig4[np.isclose(fig4["budget_fraction"].astype(float), TABLE2_BUDGET)]
    rows = []
    for r in d.to_dict("records"):
        ideal = float(r["ideal_time_s"])
        ok = bool(r["feasible"]) and r["status"] in PLAN_STATUSES
        rows.append({
            "workload": run.key_of(r["instance"]), "solver": r["solver"], "feasible": ok,
            "step": float(r["step_time_s"]) / ideal if ok else math.nan,
            "recompute": float(r["recompute_s"]) / ideal if ok else math.nan,
            "stall_fwd": float(r["stall_fwd_s"]) / ideal if ok else math.nan,
            "stall_bwd": float(r["stall_bwd_s"]) / ideal if ok else math.nan,
            "copied_out_GB": float(r["d2h_bytes"]) / 1e9 if ok else math.nan,
        })
    t2 = pd.DataFrame(rows)
    t2.to_csv(run.out / "table2.csv", index=False)
    return t2


def _fig4_md(run: _Run, fig4: pd.DataFrame) -> str:
    out = []
    budgets = list(run.budgets)
    for w in WORKLOADS:
        rows = []
        for s in FIGURE4_SOLVERS:
            cells = []
            for f in budgets:
                x = _val(fig4, run, w, s, f)
                cells.append("-" if x != x else f"{x:.1%}")
            rows.append([s, *cells])
        out.append(f"**{LABELS[w]}** ({run.insts[w].name}; throughput in % of the ideal step, "
                   "- = no feasible plan)\n\n"
                   + _table_md(["solver", *[f"{f:.0%}" for f in budgets]], rows))
    return "\n\n".join(out)


def _table2_md(t2: pd.DataFrame) -> str:
    rows = []
    for r in t2.to_dict("records"):
        if not r["feasible"]:
            rows.append([LABELS.get(r["workload"], r["workload"]), r["solver"], "no fit", "",
                         "", "", ""])
            continue
        rows.append([LABELS.get(r["workload"], r["workload"]), r["solver"], f"{r['step']:.2f}",
                     f"{r['recompute']:.3f}", f"{r['stall_fwd']:.3f}", f"{r['stall_bwd']:.3f}",
                     f"{r['copied_out_GB']:.2f}"])
    return _table_md(["workload", "solver", "step", "recompute", "fwd stall", "bwd stall",
                      "GB out"], rows)
