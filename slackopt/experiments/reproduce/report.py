"""``report.md``: the setup, the claims, the reasons where the reproduction differs, every
figure and table, and the modelling choices the paper leaves open."""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from slackopt.experiments.reproduce.claims import Claim, _fmt, _fmt_diff, _fmt_range
from slackopt.experiments.reproduce.common import LABELS, TABLE2_BUDGET, _Run, _table_md, _val
from slackopt.experiments.reproduce.figure4 import _fig4_md, _table2_md
from slackopt.experiments.reproduce.figure6 import _sens_md
from slackopt.experiments.reproduce.table3 import _table3_md

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


REASONS = {
    "ideal": (
        "**Ideal step 401.0 ms instead of 399 ms.** The workload parameters reproduce the "
        "paper's GPT-2 XL step to within 2 ms (docs/workloads.md, \"Known gaps\": the paper's "
        "backward-kernel conventions are not stated). Every step time inherits the offset; "
        "relative to the ideal step the SlackSwap step matches ({ss:.3f} x ideal here, "
        "409/399 = 1.025 in the paper)."),
    "bert-ckpt": (
        "**BERT-Large block checkpointing.** The checkpoint baseline (docs/model.md) keeps each "
        "block's input and recomputes everything else in the block. In post-LN BERT the "
        "block input is the previous block's LN2 output, and LN2's backward reads the "
        "second residual sum, whose rebuild re-runs FC2, dropout and the add; so a "
        "checkpointed BERT block re-runs {bert:.0%} of its forward time, against {gpt:.0%} "
        "(GPT-2 XL) and {llama:.0%} (Llama-7B), whose last GEMM feeds the kept block "
        "output. The paper's 80-82% at 15% of P is reached if BERT is checkpointed at the "
        "residual that LN2 reads instead (keep that residual, rebuild the block output by "
        "LN2, equal bytes): that variant gives {r15:.1%} at 15% and {r50:.1%} at 50% "
        "(SlackSwap then leads by {ratio:.3f}x at 50%, inside 1.10-1.11x). The unstated "
        "assumption is where the paper puts BERT's checkpoint boundary; our baseline "
        "follows the spec and is left as it is."),
}
REASONS["barriers"] = (
    "**The barriers ablation on Llama-7B.** The layer_barriers runtime is pinned by two "
    "direct vDNN checks that it reproduces: Figure 5's vDNN step and the Titan X overheads. "
    "Under its prefetch rule (a starting backward layer prefetches the next offloaded "
    "layer, however far) the barriers expose, as shares of SlackSwap's copy time per "
    "direction at 50% of P, {g_f:.0%} forward / {g_b:.0%} backward on GPT-2 XL but "
    "{l_f:.0%} / {l_b:.0%} on Llama-7B: Llama's long backward GEMM layers (its gate|up "
    "dgrad + wgrad alone take 12.6 ms) hide most prefetches, so barriers cost {l_loss:.1f} "
    "points there ({g_loss:.1f} on GPT-2 XL). If a prefetch may only overlap the layer "
    "right before its reader (`lookahead=\"adjacent\"`), the loss becomes {l_adj:.1f} "
    "points on Llama-7B and {g_adj:.1f} on GPT-2 XL (paper: 32-37), but the same "
    "rule breaks the vDNN checks: {f5:.0f} ms instead of 1,105 ms for Figure 5 and "
    "{vgg:.1%} instead of 3.4% for vDNNconv on the Titan X. So the paper's barriers "
    "ablation and its vDNN baseline cannot share one prefetch rule in this model; which "
    "rule the paper's ablation used is not stated. We keep vDNN's rule for both.")
REASONS["fig6a-deficit"] = (
    "**GPT-2 XL at 200 GB/s swaps {sw:.2f} GB, not 16.7 GB.** Pass 1 stops once the swap "
    "set covers the deficit D = P - M (sec. 3.2); at 30% of P (P = {P:.2f} GB) the deficit "
    "is D = {D:.2f} GB, and SlackSwap swaps all of it and recomputes nothing, as in the "
    "paper. A 16.7 GB swap set would be the deficit of a {P_paper:.1f} GB peak, but the "
    "workload model lands on Table 1's P of 23.1 GB (docs/workloads.md, \"Totals\"): the "
    "paper's figure is larger than its own stopping rule allows at this budget. We keep "
    "the rule; the 0.5 GB is not explained.")
REASONS["ga"] = (
    "**The genetic search beats SlackSwap by more than 0.45% on Llama-7B at 20-30% of "
    "P.** Not from a larger search: with the paper's 14,000 plans it already gains "
    "{gain:.2f}% at 30%. The plans differ in {moved}: the search swaps some gate|up "
    "outputs (361 MB each, a 6.3 ms GEMM to rebuild) instead of block inputs and "
    "residuals (67 MB each), so more bytes go through the link budget ({ga_d2h:.2f} GB vs "
    "{ss_d2h:.2f} GB copied out) and less is recomputed ({ga_rec:.2f}% vs {ss_rec:.2f}% of "
    "the step). SlackSwap's Pass 1 admits candidates in decreasing recompute cost per byte, "
    "so the many small block inputs (never rebuildable) take the link budget first. That "
    "ordering is SlackSwap's, not a baseline's; why the paper's search found no such gain "
    "(at most 0.45%) is not resolved here.")

CHOICES = """\
- **Runtime layers (vDNN).** A layer is a run of consecutive ops with the same phase,
  block and kind (a framework layer: one forward kernel; a GEMM's backward is its dgrad
  and wgrad). Offloads of a layer's inputs start with the layer and the next layer waits
  for them; in the backward pass the next offloaded layer is prefetched when a layer starts
  and the following layer waits for it (vDNN synchronizes its memory stream at every layer
  boundary). vDNN's prefetch buffers are allocated when issued and a configuration whose
  allocation fails is rejected (runtime parameter `prefetch="at_issue"`).
- **vDNNconv on transformers** offloads the inputs of the GEMM and attention operators, the
  transformer's compute-heavy layers (a convolution's role); vDNNall offloads every saved
  tensor a forward layer reads (dropout masks and RNG states are layer state, not inputs).
- **SuperNeurons** recomputes tensors produced by cheap layers (normalization, activation,
  dropout, pooling) when the rebuild re-runs no heavy operator, keeps block inputs and
  residual sums, and lets the runtime evict GEMM/attention/convolution outputs on demand in
  LRU order, copying each victim out while the compute stream waits; evicted tensors are
  prefetched for the tasks up to the next heavy operator.
- **SwapAdvisor** picks its victims by Belady's rule on the planned schedule (a pass over the
  op order under M), copies them out as soon as they are produced (their device copies stay
  until memory runs out) and copies them back as early as memory allows; no genetic search
  over op order or memory pools (as in the paper).
- **Budgets** are fractions of the keep-all peak P; model states are outside M (section 4.1).
"""


def _report(run: _Run, claims: list[Claim], fig4: pd.DataFrame, t2: pd.DataFrame,
            t3: pd.DataFrame, ga_note: str, vgg: Mapping[str, float],
            fig5: Mapping[str, float], diag: Mapping[str, Any], plan_s: Mapping[tuple, float],
            wall_s: float) -> str:
    import slackopt

    n_ok = sum(1 for c in claims if c.ok)
    n_known = sum(1 for c in claims if c.ok is not None)
    differs = [c for c in claims if c.ok is False]
    notes = {c.note for c in claims if c.note and c.ok is False}
    bar, ga = diag.get("barriers", {}), diag.get("ga", {})
    reasons: list[str] = []
    if "ideal" in notes:
        reasons.append(REASONS["ideal"].format(ss=fig5["slackswap_ms"] / fig5["ideal_ms"]))
    if "bert-ckpt" in notes:
        r50 = diag.get("bert.residual_boundary@0.5", math.nan)
        ss50 = _val(fig4, run, "bert-large", "slackswap", 0.5)
        reasons.append(REASONS["bert-ckpt"].format(
            bert=diag.get("bert-large.block_share", math.nan),
            gpt=diag.get("gpt2-xl.block_share", math.nan),
            llama=diag.get("llama-7b.block_share", math.nan),
            r15=diag.get("bert.residual_boundary@0.15", math.nan), r50=r50,
            ratio=ss50 / r50 if r50 == r50 and r50 else math.nan))
    if "barriers" in notes and bar:
        reasons.append(REASONS["barriers"].format(
            g_f=bar["gpt2-xl.next_offloaded.fwd_exposed"],
            g_b=bar["gpt2-xl.next_offloaded.bwd_exposed"],
            l_f=bar["llama-7b.next_offloaded.fwd_exposed"],
            l_b=bar["llama-7b.next_offloaded.bwd_exposed"],
            l_loss=bar["llama-7b.next_offloaded.loss"], g_loss=bar["gpt2-xl.next_offloaded.loss"],
            l_adj=bar["llama-7b.adjacent.loss"], g_adj=bar["gpt2-xl.adjacent.loss"],
            f5=bar["fig5.vdnn.adjacent_ms"], vgg=bar["vgg.conv.adjacent"]))
    if "fig6a-deficit" in notes:
        d = diag["sens"]["fig6a"]
        ss = d[(d["solver"] == "slackswap") & np.isclose(d["link_gbps"], 200.0)]
        reasons.append(REASONS["fig6a-deficit"].format(
            D=float(ss["P_bytes"].iloc[0] - ss["budget_bytes"].iloc[0]) / 1e9,
            P=float(ss["P_bytes"].iloc[0]) / 1e9, sw=float(ss["swapped_bytes"].iloc[0]) / 1e9,
            P_paper=16.7 / 0.7))
    if "ga" in notes and ga:
        reasons.append(REASONS["ga"].format(
            gain=ga["gain"], ga_d2h=ga["ga_d2h_GB"], ss_d2h=ga["ss_d2h_GB"],
            ga_rec=ga["ga_recompute"], ss_rec=ga["ss_recompute"],
            moved="; ".join(f"{n} x {k}" for k, n in sorted(ga["moved"].items(),
                                                            key=lambda x: -x[1]))))
    unexplained = [c for c in differs if not c.note]
    date = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    mode_line = {
        "full": "full run",
        "quick": "quick run (fewer budgets in Figure 4 and Table 3; a 5 s genetic search)",
        "tiny": "TEST MODE: scaled-down workloads; the numbers are NOT comparable to the paper",
    }[run.mode]
    setup = _table_md(
        ["workload", "instance", "saved A", "peak P", "forward T_F", "ideal step T*"],
        [[LABELS[w], i.name, f"{i.A / 1e9:.2f} GB", f"{i.P / 1e9:.2f} GB",
          f"{i.forward_time_s * 1e3:.1f} ms", f"{i.ideal_time_s * 1e3:.1f} ms"]
         for w, i in run.insts.items()])
    summary = _table_md(
        ["where", "quantity", "paper", "reproduced", "difference", "status"],
        [[c.where, c.what, _fmt_range(c), _fmt(c.ours, c.unit), _fmt_diff(c),
          "n/a" if c.ok is None else ("reproduces" if c.ok else
                                       ("differs (see below)" if c.note else "differs"))]
         for c in claims])
    timings = ", ".join(f"{k} {v:.1f} s" for k, v in run.timings.items())
    parts = [
        "# The SlackSwap paper's evaluation, reproduced on slackopt",
        f"Generated by `slackopt reproduce` ({mode_line}) on {date}; slackopt "
        f"{getattr(slackopt, '__version__', '?')}; wall time {wall_s:.0f} s ({timings}). "
        "Paper: the SlackSwap paper (2026), section 4. Every number below comes from "
        "the registered solvers and the one evaluator; none is tuned to the paper.",
        "## Setup\n\nA100 (312 TFLOP/s BF16, 2.039 TB/s), PCIe 4.0 at 25 GB/s per direction "
        "(docs/workloads.md). Budgets are fractions of each workload's keep-all peak P.\n\n"
        + setup,
        f"## Summary: {n_ok} of {n_known} stated numbers reproduce within tolerance\n\n"
        "The tolerance: throughput +-6 points at 50%, ratios +-0.03, checkpointing and "
        "the 10% point +-3 points, VGG overheads +-2 points; for the other numbers about "
        "the paper's rounding. A paper range is met when the "
        "reproduced value lies in it; the difference is the distance to the range.\n\n"
        + summary,
        "## Where the reproduction differs, and why\n\n"
        + ("\n\n".join(reasons) if reasons else "Nothing differs beyond tolerance.")
        + ("\n\nNot explained yet: " + "; ".join(c.what for c in unexplained)
           if unexplained else ""),
        "## Figure 4: throughput across memory budgets\n\n![Figure 4](figure4.png)\n\n"
        "Rows of `figure4.csv` (the full compare table). sqrt-checkpoint (Chen et al. 2016) "
        "equals block checkpointing of every block on the transformers (their block inputs "
        "cannot be rebuilt); recompute-all rebuilds every rebuildable tensor.\n\n"
        + _fig4_md(run, fig4),
        f"## Table 2: where the time goes at {TABLE2_BUDGET:.0%} of P\n\nStep, recomputation "
        "and stalls as multiples of the ideal step, GB copied out (`table2.csv`).\n\n"
        + _table2_md(t2),
        "## Figure 5: GPT-2 XL step at 50% of P\n\n![Figure 5](figure5.png)\n\n"
        f"vDNN {fig5['vdnn_ms']:.0f} ms (paper 1,105 ms), SlackSwap {fig5['slackswap_ms']:.0f} "
        f"ms (paper 409 ms), ideal {fig5['ideal_ms']:.0f} ms (paper 399 ms).",
        "## Table 3: ablations and planning time\n\nThroughput in % of the ideal step "
        f"(`table3.csv`). GA: {ga_note}. SlackSwap's planning times are this machine's, in "
        "Python, measured in one warm process (the paper: 67-168 ms here, at most 376 ms "
        "across Figure 4; here at most "
        f"{max(plan_s.values(), default=math.nan) * 1e3:.0f} ms across Figure 4 and "
        "Table 3).\n\n" + _table3_md(run, t3, ga_note, plan_s),
        _sens_md(diag["sens"]),
        "## Section 4.1 check: VGG-16 with vDNN's Titan X parameters\n\n"
        "7 TFLOP/s FP32, 336.5 GB/s, PCIe 3.0 at 12.8 GB/s, batch 128 (`vgg16_titanx.csv`), "
        f"ideal step {vgg['ideal_ms']:.0f} ms: vDNNconv {vgg['conv']:.2%} overhead (paper "
        f"3.4%), vDNNall {vgg['all']:.2%} (paper 22%).",
        "## Modelling choices the paper leaves open\n\nHow each baseline is run "
        "(solvers/vdnn.py, superneurons.py, swapadvisor.py; the runtimes in "
        "slackopt/simulate/):\n\n" + CHOICES,
    ]
    return "\n\n".join(parts) + "\n"
