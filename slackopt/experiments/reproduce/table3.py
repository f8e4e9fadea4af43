"""Table 3: SlackSwap's ablations, the genetic search, and SlackSwap's planning time."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from slackopt.experiments.reproduce.common import (
    ABLATIONS,
    GA_TIME_LIMIT_S,
    LABELS,
    TABLE3_BUDGETS,
    TRANSFORMERS,
    _Run,
    _table_md,
    _val,
)
from slackopt.solver import PLAN_STATUSES

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def _table3(run: _Run) -> tuple[pd.DataFrame, str]:
    import pandas as pd

    from slackopt.compare import compare
    from slackopt.solver import registered_solvers

    insts = [run.insts[w] for w in TRANSFORMERS]
    budgets = TABLE3_BUDGETS[run.mode]
    df = compare(insts, list(ABLATIONS), list(budgets), workers=run.workers,
                 progress=run.progress)
    ga_note = ""
    if run.mode == "tiny":
        ga_note = "n/a - the genetic search is skipped in the test mode"
    elif "genetic" not in registered_solvers():
        ga_note = "n/a - genetic solver not registered"
    else:
        limit = GA_TIME_LIMIT_S[run.mode]
        ga_budgets = budgets if run.mode == "full" else budgets[:1]
        ga = compare(insts, [("genetic", {"generations": None})], list(ga_budgets),
                     time_limit_s=limit, workers=run.workers, progress=run.progress)
        df = pd.concat([df, ga], ignore_index=True)
        ga_note = (f"genetic search seeded with SlackSwap and the baselines, {limit:.0f} s "
                   f"per budget (the paper: 45 s)")
    df.to_csv(run.out / "table3.csv", index=False)
    return df, ga_note


def _planning_times(run: _Run, fig4: pd.DataFrame, t3: pd.DataFrame) -> dict[tuple, float]:
    """SlackSwap's planning time (s) per feasible (workload, budget) of Figure 4 and
    Table 3, measured in this warm process (a sweep's worker pays for loading the compiled
    evaluator on its first solve, which is not planning)."""
    from slackopt.solver import solve

    fracs = sorted({round(float(f), 6) for df in (fig4, t3)
                    for f in df["budget_fraction"].astype(float)}, reverse=True)
    solve(run.insts["gpt2-xl"], "slackswap", 0.5)  # warm-up
    out = {}
    for w, inst in run.insts.items():
        for f in fracs:
            res = solve(inst, "slackswap", f)
            if res.status in PLAN_STATUSES:  # an infeasible answer also searches a min budget
                out[(w, f)] = res.planning_time_s
    return out


def _table3_md(run: _Run, t3: pd.DataFrame, ga_note: str, plan_s: Mapping[tuple, float]
               ) -> str:
    budgets = sorted(set(np.round(t3["budget_fraction"].astype(float), 6)), reverse=True)
    has_ga = (t3["solver"] == "genetic").any()
    rows = []
    for w in TRANSFORMERS:
        for f in budgets:
            cells = [LABELS[w], f"{f:.0%}"]
            for s in ABLATIONS:
                x = _val(t3, run, w, s, f)
                cells.append("-" if x != x else f"{x:.1%}")
            g = _val(t3, run, w, "genetic", f) if has_ga else math.nan
            cells.append(f"{g:.1%}" if g == g else (ga_note if not has_ga else "not run"))
            pt = plan_s.get((w, round(float(f), 6)), math.nan)
            cells.append("-" if pt != pt else f"{pt * 1e3:.0f} ms")
            rows.append(cells)
    return _table_md(["workload", "budget", "SlackSwap", "swap-first", "recompute-only",
                      "barriers", "GA", "SlackSwap planning"], rows)
