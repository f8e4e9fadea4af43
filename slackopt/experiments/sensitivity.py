"""The sensitivity sweeps of the SlackSwap paper (section 4.5): link bandwidth (Figure 6a),
sequence length (Figure 6b) and GPU generation.

Each sweep builds its instances with :func:`slackopt.workloads.make`, runs the solvers
through :func:`slackopt.compare.compare` (so every number comes from the one evaluator)
and returns a tidy table. SlackSwap's swapped and recomputed bytes, which a compare row
does not carry, are read from its own plan (``SolveResult.info``), re-planned here in
this process (SlackSwap is deterministic: the same plan as the compare row's).

Paper: the SlackSwap paper (2026), section 4.5; hardware presets: docs/workloads.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from slackopt.hardware import Link
from slackopt.instance import Instance
from slackopt.solver import PLAN_STATUSES

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

SENSITIVITY_BUDGET = 0.3
"""Every sweep of section 4.5 runs at 30% of the keep-all peak P."""
LINKS_GBPS = (12, 25, 50, 100, 200, 450)
"""Figure 6a's link bandwidths (GB/s per direction): PCIe 3.0 to NVLink-C2C."""
SEQ_LENGTHS = (2048, 4096, 8192, 16384, 32768)
"""Figure 6b's sequence lengths (tokens)."""
TOKENS_PER_BATCH = 16384
"""Figure 6b: tokens per batch (batch = tokens / sequence, at least one sequence)."""
GPU_GENERATIONS = ("v100", "a100", "h100")
"""The GPU-generation comparison, each with its default link (PCIe 3.0, 4.0, 5.0)."""
SWAP_CENTRIC = ("vdnn", "superneurons", "swapadvisor")
"""Baselines whose plans rest on swapping (section 4.5: they need 100-450 GB/s)."""


def _solve_rows(df: pd.DataFrame, insts: Mapping[Any, Instance], key_col: str) -> pd.DataFrame:
    """Add ``swapped_bytes`` and ``recomputed_bytes`` of SlackSwap's plans (NaN for other
    solvers) and the sweep key column to a compare table."""
    import numpy as np

    from slackopt.plan import RECOMP, SWAP
    from slackopt.solver import solve

    by_name = {inst.name: k for k, inst in insts.items()}
    df = df.copy()
    df.insert(0, key_col, [by_name[n] for n in df["instance"]])
    sw = np.full(len(df), np.nan)
    rc = np.full(len(df), np.nan)
    for i, (key, solver, m) in enumerate(zip(df[key_col], df["solver"], df["budget_bytes"],
                                             strict=True)):
        if solver != "slackswap":
            continue
        inst = insts[key]
        res = solve(inst, "slackswap", int(m))
        if res.plan is not None:
            d = res.plan.decisions
            sw[i] = float(inst.s[d == SWAP].sum())
            rc[i] = float(inst.s[d == RECOMP].sum())
    df["swapped_bytes"] = sw
    df["recomputed_bytes"] = rc
    return df


def link_sweep(workload: str = "gpt2-xl", links_gbps: Sequence[float] = LINKS_GBPS, *,
               solvers: Sequence[str] = ("vdnn", "superneurons", "swapadvisor", "checkpoint",
                                         "slackswap"),
               budget: float = SENSITIVITY_BUDGET, workers: int = 1, progress: bool = False,
               **params: Any) -> pd.DataFrame:
    """Figure 6a: every solver at one budget while the host link's bandwidth varies.

    Args:
        workload: a workload name of :func:`slackopt.workloads.make` (A100 by default).
        links_gbps: link bandwidths W, GB/s per direction (1 GB = 1e9 B); the duplex
            factor and copy latency keep their defaults (docs/workloads.md).
        solvers: registered solver names.
        budget: fraction of each instance's P.
        workers: local processes for :func:`slackopt.compare.compare`.
        progress: progress bar on stderr.
        **params: more parameters of the generator (``layers``, ``vocab``, ``gpu``...).

    Returns:
        The compare table plus ``link_gbps`` (first column), ``swapped_bytes`` and
        ``recomputed_bytes`` (SlackSwap's plan; NaN for other solvers).
    """
    from slackopt.compare import compare
    from slackopt.workloads import make

    insts = {float(w): make(workload, link=Link(f"{float(w):g}GB/s", float(w) * 1e9), **params)
             for w in links_gbps}
    df = compare(list(insts.values()), list(solvers), [budget], workers=workers,
                 progress=progress)
    return _solve_rows(df, insts, "link_gbps")


def sequence_sweep(workload: str = "llama-7b", seq_lengths: Sequence[int] = SEQ_LENGTHS, *,
                   tokens_per_batch: int = TOKENS_PER_BATCH,
                   solvers: Sequence[str] = ("checkpoint", "slackswap"),
                   budget: float = SENSITIVITY_BUDGET, workers: int = 1,
                   progress: bool = False, **params: Any) -> pd.DataFrame:
    """Figure 6b: the hideable fraction f and throughput as the sequence grows.

    The batch is ``max(1, tokens_per_batch // seq)`` sequences, so the last points hold
    more tokens when one sequence is longer than `tokens_per_batch` (the paper: 16K tokens
    per batch, 32K at the last point).

    Args:
        workload: a transformer workload name.
        seq_lengths: sequence lengths (tokens).
        tokens_per_batch: tokens per batch.
        solvers: registered solver names.
        budget: fraction of each instance's P.
        workers, progress: as for :func:`slackopt.compare.compare`.
        **params: more generator parameters (``layers``, ``gpu``...).

    Returns:
        The compare table plus ``seq`` (first column), ``batch``, ``swapped_bytes`` and
        ``recomputed_bytes``; the table's ``hideable_fraction`` column is f (Eq. 1).

    Raises:
        ValueError: a sequence length or `tokens_per_batch` below 1.
    """
    from slackopt.compare import compare
    from slackopt.workloads import make

    if tokens_per_batch < 1 or any(int(s) < 1 for s in seq_lengths):
        raise ValueError("sequence lengths and tokens_per_batch must be >= 1")
    insts = {int(s): make(workload, seq=int(s), batch=max(1, tokens_per_batch // int(s)),
                          **params) for s in seq_lengths}
    df = compare(list(insts.values()), list(solvers), [budget], workers=workers,
                 progress=progress)
    df = _solve_rows(df, insts, "seq")
    df.insert(1, "batch", [max(1, tokens_per_batch // int(s)) for s in df["seq"]])
    return df


def gpu_generations(workloads: Sequence[str] = ("gpt2-xl", "llama-7b"),
                    gpus: Sequence[str] = GPU_GENERATIONS, *,
                    solvers: Sequence[str] = ("vdnn", "superneurons", "swapadvisor",
                                              "checkpoint", "slackswap"),
                    budget: float = SENSITIVITY_BUDGET, workers: int = 1,
                    progress: bool = False,
                    params: Mapping[str, Mapping[str, Any]] | None = None) -> pd.DataFrame:
    """Section 4.5 "GPU generation": every solver on each GPU with its default link.

    Args:
        workloads: workload names.
        gpus: GPU presets (:data:`slackopt.hardware.GPUS`).
        solvers: registered solver names.
        budget: fraction of each instance's P.
        workers, progress: as for :func:`slackopt.compare.compare`.
        params: per workload, more generator parameters (tests use smaller models).

    Returns:
        The compare table plus ``workload`` and ``gpu`` (first columns), ``swapped_bytes``
        and ``recomputed_bytes``.
    """
    from slackopt.compare import compare
    from slackopt.workloads import make

    params = params or {}
    insts = {(w, g): make(w, gpu=g, **dict(params.get(w, {}))) for w in workloads for g in gpus}
    df = compare(list(insts.values()), list(solvers), [budget], workers=workers,
                 progress=progress)
    df = _solve_rows(df, insts, "_key")
    df.insert(0, "workload", [k[0] for k in df["_key"]])
    df.insert(1, "gpu", [k[1] for k in df["_key"]])
    return df.drop(columns=["_key"])


def lead_over_baselines(df: pd.DataFrame, by: Sequence[str],
                        baselines: Sequence[str] = ("vdnn", "superneurons", "swapadvisor",
                                                    "checkpoint")) -> pd.DataFrame:
    """SlackSwap's lead over the best feasible baseline, per group of a sweep table.

    Args:
        df: a table of :func:`link_sweep`, :func:`sequence_sweep` or :func:`gpu_generations`.
        by: the columns that identify one point of the sweep (e.g. ``["link_gbps"]``).
        baselines: the solvers to compare against.

    Returns:
        One row per group: the `by` columns, ``slackswap`` (throughput, NaN if infeasible),
        ``best_baseline`` (name, "none" if no baseline is feasible), ``best_throughput``,
        ``ratio`` (SlackSwap / best) and ``lead_points`` (difference in % of the ideal).
    """
    import math

    import pandas as pd

    def thr(g: pd.DataFrame, s: str) -> float:
        r = g[(g["solver"] == s) & g["feasible"].astype(bool)
              & g["status"].isin(PLAN_STATUSES)]
        return float(r["throughput"].iloc[0]) if len(r) else math.nan

    rows = []
    for key, g in df.groupby(list(by), sort=True):
        key = key if isinstance(key, tuple) else (key,)
        vals = {b: thr(g, b) for b in baselines}
        vals = {b: v for b, v in vals.items() if v == v}
        best = max(vals, key=lambda b: vals[b]) if vals else "none"
        bv = vals.get(best, math.nan)
        ss = thr(g, "slackswap")
        rows.append({**dict(zip(by, key, strict=True)), "slackswap": ss, "best_baseline": best,
                     "best_throughput": bv, "ratio": ss / bv if bv == bv and bv else math.nan,
                     "lead_points": (ss - bv) * 100 if bv == bv else math.nan})
    return pd.DataFrame(rows)


__all__ = ["link_sweep", "sequence_sweep", "gpu_generations", "lead_over_baselines",
           "LINKS_GBPS", "SEQ_LENGTHS", "TOKENS_PER_BATCH", "GPU_GENERATIONS",
           "SENSITIVITY_BUDGET", "SWAP_CENTRIC"]
