"""What every part of the reproduction shares: the workloads, solvers and budgets of each
mode, the state of one run, the plans of fixed baseline configurations, lookups in a
compare table, and markdown tables."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from slackopt.instance import Instance
from slackopt.solver import PLAN_STATUSES

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


WORKLOADS = ("gpt2-xl", "bert-large", "llama-7b", "vgg16")
TRANSFORMERS = ("gpt2-xl", "bert-large", "llama-7b")
LABELS = {"gpt2-xl": "GPT-2 XL", "bert-large": "BERT-Large", "llama-7b": "Llama-7B",
          "vgg16": "VGG-16"}
BASELINES = ("vdnn", "superneurons", "swapadvisor", "checkpoint")
"""The paper's baselines (section 4.1)."""
FIGURE4_SOLVERS = BASELINES + ("sqrt-checkpoint", "recompute-all", "slackswap")
ABLATIONS = ("slackswap", "slackswap-swap-first", "slackswap-recompute-only",
             "slackswap-barriers")
FULL_BUDGETS = (1.0, 0.9, 0.8, 0.7, 0.65, 0.6, 0.5, 0.4, 0.3, 0.2, 0.15, 0.1)
QUICK_BUDGETS = (1.0, 0.9, 0.7, 0.65, 0.5, 0.4, 0.3, 0.15, 0.1)
TINY_BUDGETS = (1.0, 0.5, 0.4, 0.15)
TABLE2_BUDGET = 0.4
TABLE3_BUDGETS = {"full": (0.5, 0.3, 0.2), "quick": (0.5, 0.3), "tiny": (0.5,)}
GA_TIME_LIMIT_S = {"full": 45.0, "quick": 5.0}
"""The paper runs its genetic search for 45 s (section 4.4)."""
TINY_PARAMS: dict[str, dict[str, int]] = {
    "gpt2-xl": {"layers": 2}, "bert-large": {"layers": 2}, "llama-7b": {"layers": 1},
    "vgg16": {"batch": 4}}
"""Scaled-down workloads of the private test mode (numbers not comparable to the paper)."""
SENS_TINY: dict[str, Any] = {"gpt2-xl": {"layers": 2, "vocab": 4096},
                             "llama-7b": {"layers": 1, "vocab": 4096},
                             "links": (12, 450), "seqs": (2048, 32768)}
"""Section 4.5 sweeps in the test mode: two points each, scaled-down models."""
PAPER_NUMBERS = "paper_numbers.toml"
"""The data file (in slackopt/data/) with every number the paper states."""


@dataclass
class _Run:
    out: Path
    mode: str                       # "full", "quick" or "tiny"
    workers: int
    progress: bool
    insts: dict[str, Instance] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def budgets(self) -> tuple[float, ...]:
        return {"full": FULL_BUDGETS, "quick": QUICK_BUDGETS, "tiny": TINY_BUDGETS}[self.mode]

    def key_of(self, name: str) -> str:
        for k, inst in self.insts.items():
            if inst.name == name:
                return k
        return name


def _instances(mode: str) -> dict[str, Instance]:
    from slackopt.workloads import make

    return {w: make(w, **(TINY_PARAMS[w] if mode == "tiny" else {})) for w in WORKLOADS}


def _timed(run: _Run, name: str, fn: Callable[[], Any]) -> Any:
    t0 = time.perf_counter()
    try:
        return fn()
    finally:
        run.timings[name] = time.perf_counter() - t0


def _vdnn_plan(inst: Any, config: str, M: int) -> Any:
    """The plan of one fixed vDNN configuration, from the registered solver (this module
    imports no solver module)."""
    from slackopt.solver import get_solver

    return get_solver("vdnn", mode=config, min_budget_search=False).solve(inst, M).plan


def _checkpoint_plan(inst: Any, k: int) -> Any:
    """Block checkpointing of exactly the bottom k blocks, from the registered solver."""
    from slackopt.solver import get_solver

    return get_solver("checkpoint", blocks=k).solve(inst, int(inst.P)).plan


def _val(df: pd.DataFrame, run: _Run, w: str, solver: str, frac: float,
         col: str = "throughput") -> float:
    """One value of a compare table (NaN if absent or not feasible)."""
    name = run.insts[w].name
    d = df[(df["instance"] == name) & (df["solver"] == solver)
           & np.isclose(df["budget_fraction"].astype(float), frac)]
    if d.empty:
        return math.nan
    r = d.iloc[0]
    if not (bool(r["feasible"]) and r["status"] in PLAN_STATUSES):
        return math.nan
    v = r[col]
    return float(v) if v is not None and v == v else math.nan


def _feasible(df: pd.DataFrame, run: _Run, w: str, solver: str, frac: float) -> bool | None:
    name = run.insts[w].name
    d = df[(df["instance"] == name) & (df["solver"] == solver)
           & np.isclose(df["budget_fraction"].astype(float), frac)]
    if d.empty:
        return None
    r = d.iloc[0]
    return bool(r["feasible"]) and r["status"] in PLAN_STATUSES


def _best_baseline(df: pd.DataFrame, run: _Run, w: str, frac: float) -> tuple[str, float]:
    vals = {b: _val(df, run, w, b, frac) for b in BASELINES}
    vals = {b: v for b, v in vals.items() if not math.isnan(v)}
    if not vals:
        return "none", math.nan
    b = max(vals, key=lambda x: vals[x])
    return b, vals[b]


def _pct(x: float) -> float:
    return x * 100 if x == x else math.nan


def _ok_throughput(d: pd.DataFrame) -> float:
    """Throughput of the first feasible row of `d` (NaN if none)."""
    ok = d[d["feasible"].astype(bool) & d["status"].isin(PLAN_STATUSES)]
    return float(ok["throughput"].iloc[0]) if len(ok) else math.nan


def _table_md(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        lines.append("| " + " | ".join(str(x) for x in r) + " |")
    return "\n".join(lines)
