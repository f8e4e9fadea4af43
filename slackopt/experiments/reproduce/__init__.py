"""Reproduce the evaluation of the SlackSwap paper (section 4) on slackopt's model.

:func:`reproduce` regenerates, into one directory:

- Figure 4 (``figure4.png``, ``figure4.csv``): throughput relative to the ideal step
  against the budget, 100% down to 10% of P, every baseline and SlackSwap, four workloads;
- Table 2 (``table2.csv``): at 40% of P, step, recomputation and forward/backward stalls
  as multiples of the ideal step, and GB copied out;
- Table 3 (``table3.csv``): SlackSwap, its ablations (swap-first, recompute-only,
  barriers), the genetic search when a ``genetic`` solver is registered, and planning time;
- the section 4.1 check (``vgg16_titanx.csv``): vDNNconv and vDNNall overhead on VGG-16
  with vDNN's Titan X parameters;
- Figure 5 (``figure5.png``): the GPT-2 XL step at 50% of P under vDNN and SlackSwap;
- section 4.5 at 30% of P (:mod:`slackopt.experiments.sensitivity`): Figure 6a (``figure6a.png``,
  ``.csv``; GPT-2 XL, link 12-450 GB/s: every baseline and SlackSwap, its swapped and
  recomputed bytes), Figure 6b (``figure6b.png``, ``.csv``; Llama-7B, sequence 2K-32K
  at 16K tokens per batch: f, SlackSwap, checkpointing) and the GPU generations
  (``gpu_generations.png``, ``.csv``; V100/A100/H100: SlackSwap's lead over the best
  baseline for GPT-2 XL and Llama-7B);
- ``report.md``: every number the paper states (kept in the package data file
  ``slackopt/data/paper_numbers.toml``, read by :func:`paper_numbers`) next to the
  reproduced one, the difference, and, where they differ, the reason (an assumption the
  paper leaves unstated, with the diagnostic computed here that shows it).

Every number comes from the registered solvers and the one evaluator
(:func:`slackopt.simulate.simulate`) through :func:`slackopt.compare.compare`; nothing is
tuned to the paper. Paper: the SlackSwap paper (2026); workloads and hardware:
docs/workloads.md.

The package, by figure and table: :mod:`~slackopt.experiments.reproduce.figure4` (Figure
4, Table 2), :mod:`~slackopt.experiments.reproduce.table3` (Table 3, planning time),
:mod:`~slackopt.experiments.reproduce.figure5` (Figure 5, the section 4.1 check),
:mod:`~slackopt.experiments.reproduce.figure6` (section 4.5),
:mod:`~slackopt.experiments.reproduce.diagnostics` (the reasons' evidence),
:mod:`~slackopt.experiments.reproduce.claims` (the paper's numbers beside ours) and
:mod:`~slackopt.experiments.reproduce.report` (``report.md``), over
:mod:`~slackopt.experiments.reproduce.common` (modes, the run, shared lookups).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slackopt.experiments.reproduce.claims import Claim, _claims, _values, paper_numbers
from slackopt.experiments.reproduce.common import (
    ABLATIONS,
    FIGURE4_SOLVERS,
    FULL_BUDGETS,
    QUICK_BUDGETS,
    TINY_BUDGETS,
    WORKLOADS,
    _instances,
    _Run,
    _timed,
)
from slackopt.experiments.reproduce.common import _checkpoint_plan as _checkpoint_plan
from slackopt.experiments.reproduce.common import _vdnn_plan as _vdnn_plan
from slackopt.experiments.reproduce.diagnostics import (
    _barrier_diagnostics,
    _bert_diagnostics,
    _ga_diagnostics,
)
from slackopt.experiments.reproduce.figure4 import _figure4, _table2
from slackopt.experiments.reproduce.figure5 import _figure5, _vgg_titanx
from slackopt.experiments.reproduce.figure6 import _sensitivity
from slackopt.experiments.reproduce.report import _report
from slackopt.experiments.reproduce.table3 import _planning_times, _table3

OUTPUT_FILES = ("report.md", "figure4.png", "figure5.png", "figure6a.png", "figure6b.png",
                "gpu_generations.png", "figure4.csv", "table2.csv", "table3.csv",
                "vgg16_titanx.csv", "figure6a.csv", "figure6b.csv", "gpu_generations.csv")
"""The files :func:`reproduce` writes into its directory."""


@dataclass
class ReproduceResult:
    """What :func:`reproduce` wrote and found.

    Attributes:
        out_dir: the directory.
        files: the files written (report.md, PNGs, CSVs).
        claims: the paper's numbers beside ours.
        wall_s: wall-clock time (s).
        timings: seconds per part.
    """

    out_dir: Path
    files: list[Path]
    claims: list[Claim]
    wall_s: float
    timings: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {"out_dir": str(self.out_dir), "files": [str(p) for p in self.files],
                "wall_s": self.wall_s, "timings": self.timings,
                "reproduced": sum(1 for c in self.claims if c.ok),
                "compared": sum(1 for c in self.claims if c.ok is not None),
                "claims": [{"key": c.key, "where": c.where, "what": c.what,
                            "paper": list(c.paper), "ours": c.ours, "unit": c.unit,
                            "difference": c.diff, "reproduces": c.ok} for c in self.claims]}


def reproduce(out_dir: str | Path, *, quick: bool = False, workers: int = 2,
              progress: bool = False, _tiny: bool = False) -> ReproduceResult:
    """Regenerate the paper's Figures 4, 5, 6a and 6b, Tables 2 and 3, the GPU-generation
    comparison and the VGG-16 check.

    Args:
        out_dir: directory for report.md, the PNG figures and the CSV tables (created).
        quick: fewer budgets (Figure 4: 9 instead of 12; Table 3: 50% and 30%) and a 5 s
            genetic search instead of 45 s; section 4.5 is the same in every mode.
        workers: local processes for the Figure 4 and Table 3 sweeps
            (:func:`slackopt.compare.compare`); section 4.5 runs in this process.
        progress: progress bars on stderr.
        _tiny: private test mode: scaled-down workloads, no genetic search.

    Returns:
        The :class:`ReproduceResult`.
    """
    t0 = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    mode = "tiny" if _tiny else ("quick" if quick else "full")
    run = _Run(out, mode, int(workers), bool(progress))
    run.insts = _timed(run, "instances", lambda: _instances(mode))
    fig4 = _timed(run, "figure 4", lambda: _figure4(run))
    t2 = _table2(run, fig4)
    t3, ga_note = _timed(run, "table 3", lambda: _table3(run))
    vgg = _timed(run, "vgg check", lambda: _vgg_titanx(run))
    fig5 = _timed(run, "figure 5", lambda: _figure5(run))
    diag: dict[str, Any] = _timed(run, "diagnostics", lambda: _bert_diagnostics(run))
    diag["barriers"] = _timed(run, "barrier diagnostics", lambda: _barrier_diagnostics(run))
    diag["ga"] = _timed(run, "genetic diagnostics", lambda: _ga_diagnostics(run))
    plan_s = _timed(run, "planning times", lambda: _planning_times(run, fig4, t3))
    sens = _timed(run, "section 4.5", lambda: _sensitivity(run))
    values, fields = _values(run, fig4, t3, vgg, fig5, plan_s, sens)
    claims = _claims(values, fields)
    diag["sens"] = sens
    wall = time.perf_counter() - t0
    (out / "report.md").write_text(
        _report(run, claims, fig4, t2, t3, ga_note, vgg, fig5, diag, plan_s, wall),
        encoding="utf-8")
    files = [out / n for n in OUTPUT_FILES]
    return ReproduceResult(out, files, claims, time.perf_counter() - t0, run.timings)


__all__ = ["reproduce", "ReproduceResult", "Claim", "paper_numbers", "WORKLOADS",
           "FIGURE4_SOLVERS", "ABLATIONS", "FULL_BUDGETS", "QUICK_BUDGETS", "TINY_BUDGETS",
           "OUTPUT_FILES"]
