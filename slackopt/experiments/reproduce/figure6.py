"""Section 4.5 at 30% of P: Figure 6a (link bandwidth), Figure 6b (sequence length) and
the GPU generations, with their numbers and their part of the report."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from slackopt.experiments.reproduce.common import (
    BASELINES,
    LABELS,
    SENS_TINY,
    _ok_throughput,
    _Run,
    _table_md,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def _sensitivity(run: _Run) -> dict[str, pd.DataFrame]:
    """Section 4.5: the link sweep (Figure 6a), the sequence sweep (Figure 6b) and the GPU
    generations, at 30% of P; writes figure6a/6b and gpu_generations (PNG + CSV)."""
    from slackopt.experiments import sensitivity as sn

    tiny = run.mode == "tiny"
    # In this (warm) process: about 70 solves of 0.02-0.5 s each, less than what starting
    # a pool of workers for each sweep costs.
    kw = {"workers": 1, "progress": run.progress}
    out = {
        "fig6a": sn.link_sweep("gpt2-xl", SENS_TINY["links"] if tiny else sn.LINKS_GBPS,
                               solvers=BASELINES + ("slackswap",),
                               **(SENS_TINY["gpt2-xl"] if tiny else {}), **kw),
        "fig6b": sn.sequence_sweep("llama-7b", SENS_TINY["seqs"] if tiny else sn.SEQ_LENGTHS,
                                   **(SENS_TINY["llama-7b"] if tiny else {}), **kw),
        "generations": sn.gpu_generations(("gpt2-xl", "llama-7b"), sn.GPU_GENERATIONS,
                                          solvers=BASELINES + ("slackswap",),
                                          params=SENS_TINY if tiny else None, **kw),
    }
    for name, file in (("fig6a", "figure6a"), ("fig6b", "figure6b"),
                       ("generations", "gpu_generations")):
        out[name].to_csv(run.out / f"{file}.csv", index=False)
    from slackopt.plot import save

    save(_figure6a_plot(out["fig6a"]), run.out / "figure6a.png")
    save(_figure6b_plot(out["fig6b"]), run.out / "figure6b.png")
    save(_generations_plot(out["generations"]), run.out / "gpu_generations.png")
    return out


def _figure6a_plot(d: pd.DataFrame) -> Any:
    from slackopt.plot.common import figure, label_colors

    solvers = list(dict.fromkeys(d["solver"]))
    color = label_colors(solvers)
    fig = figure(10.5, 3.8)
    ax, bx = fig.subplots(1, 2)
    for s in solvers:
        g = d[d["solver"] == s].sort_values("link_gbps")
        thr = [_ok_throughput(g[g["link_gbps"] == w]) * 100 for w in g["link_gbps"]]
        ax.plot(g["link_gbps"], thr, marker="o", markersize=4, color=color[s], label=s)
    ss = d[d["solver"] == "slackswap"].sort_values("link_gbps")
    bx.plot(ss["link_gbps"], ss["swapped_bytes"] / 1e9, marker="o", color="#DD8452",
            label="swapped")
    bx.plot(ss["link_gbps"], ss["recomputed_bytes"] / 1e9, marker="s", color="#55A868",
            label="recomputed")
    for a in (ax, bx):
        a.set_xscale("log")
        a.minorticks_off()
        a.set_xticks(list(ss["link_gbps"]), [f"{w:g}" for w in ss["link_gbps"]])
        a.set_xlabel("host link (GB/s per direction)")
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    ax.set_ylabel("throughput (% of ideal)")
    ax.set_title("throughput at 30% of P", fontsize=10)
    bx.set_ylabel("GB")
    bx.set_title("SlackSwap: swapped and recomputed bytes", fontsize=10)
    fig.suptitle("Figure 6a: GPT-2 XL, link bandwidth sweep (A100)")
    return fig


def _figure6b_plot(d: pd.DataFrame) -> Any:
    from slackopt.plot.common import figure

    fig = figure(6.0, 3.8)
    ax = fig.subplots()
    seqs = sorted(set(d["seq"]))
    f = [float(d[d["seq"] == s]["hideable_fraction"].iloc[0]) * 100 for s in seqs]
    ax.plot(seqs, f, marker="^", color="#8172B3", label="hideable fraction f")
    for s, c in (("slackswap", "#DD8452"), ("checkpoint", "#4C72B0")):
        y = [_ok_throughput(d[(d["seq"] == q) & (d["solver"] == s)]) * 100 for q in seqs]
        ax.plot(seqs, y, marker="o", color=c, label=f"{s} throughput")
    ax.set_xscale("log", base=2)
    ax.minorticks_off()
    ax.set_xticks(seqs, [f"{s // 1024}K" for s in seqs])
    ax.set_xlabel("sequence length (tokens; 16K tokens per batch)")
    ax.set_ylabel("%")
    ax.set_ylim(0, 105)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle("Figure 6b: Llama-7B at 30% of P (A100)")
    return fig


def _generations_plot(d: pd.DataFrame) -> Any:
    from slackopt.experiments.sensitivity import lead_over_baselines
    from slackopt.plot.common import GPU_LABELS, figure

    lead = lead_over_baselines(d, ["workload", "gpu"])
    gpus = list(dict.fromkeys(d["gpu"]))
    fig = figure(6.0, 3.8)
    ax = fig.subplots()
    width = 0.8 / max(1, lead["workload"].nunique())
    for i, (w, g) in enumerate(lead.groupby("workload", sort=False)):
        y = [float(g[g["gpu"] == q]["ratio"].iloc[0]) if (g["gpu"] == q).any() else math.nan
             for q in gpus]
        xs = np.arange(len(gpus)) + (i - 0.5) * width
        ax.bar(xs, y, width, label=LABELS.get(w, w))
        for x, val in zip(xs, y, strict=True):
            if val == val:
                ax.text(x, val, f"{val:.2f}x", ha="center", va="bottom", fontsize=8)
    ax.axhline(1.0, color="#555555", linewidth=0.8)
    ax.set_xticks(np.arange(len(gpus)), [GPU_LABELS.get(q, q) for q in gpus])
    ax.set_ylabel("SlackSwap / best baseline")
    ax.set_ylim(0.9, None)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    fig.suptitle("GPU generations: SlackSwap's lead at 30% of P")
    return fig


def _values_fig6a(d: pd.DataFrame, V: dict[str, float], F: dict[str, dict[str, str]]) -> None:
    from slackopt.experiments.sensitivity import SWAP_CENTRIC, lead_over_baselines

    for W, g in d.groupby("link_gbps"):
        tag = f"{W:g}"
        ss = g[g["solver"] == "slackswap"]
        if len(ss) and W in (12.0, 200.0):  # the two links the paper gives bytes for
            V[f"fig6a.swapped@{tag}"] = float(ss["swapped_bytes"].iloc[0]) / 1e9
            V[f"fig6a.recomputed@{tag}"] = float(ss["recomputed_bytes"].iloc[0]) / 1e9
    for r in lead_over_baselines(d, ["link_gbps"]).to_dict("records"):
        V[f"fig6a.lead@{r['link_gbps']:g}"] = r["lead_points"]
        F[f"fig6a.lead@{r['link_gbps']:g}"] = {"best": r["best_baseline"]}
    for s in SWAP_CENTRIC:
        first = math.nan
        for W, g in d.groupby("link_gbps", sort=True):
            a = _ok_throughput(g[g["solver"] == s])
            b = _ok_throughput(g[g["solver"] == "checkpoint"])
            if a == a and (b != b or a > b):
                first = float(W)
                break
        V[f"fig6a.crossover.{s}"] = first


def _sens_md(sens: Mapping[str, pd.DataFrame]) -> str:
    """Section 4.5 of report.md: the three sweeps as tables."""
    from slackopt.experiments.sensitivity import GPU_GENERATIONS as GPU_ORDER
    from slackopt.experiments.sensitivity import lead_over_baselines

    def pct(x: float) -> str:
        return "-" if x != x else f"{x:.1%}"

    def gb(ss: pd.DataFrame, col: str, digits: int = 2) -> str:
        """SlackSwap's bytes in GB, "-" when its plan is not feasible."""
        x = float(ss[col].iloc[0]) if _ok_throughput(ss) == _ok_throughput(ss) else math.nan
        return "-" if x != x else f"{x / 1e9:.{digits}f}"

    def lead_cell(r: Mapping[str, Any], fmt: str) -> str:
        x = r["lead_points"] if fmt == "pt" else r["ratio"]
        if x != x:
            return "-"
        return (f"{x:+.1f} ({r['best_baseline']})" if fmt == "pt" else f"{x:.3f}x")

    parts = []
    d = sens["fig6a"]
    solvers = list(dict.fromkeys(d["solver"]))
    lead = {r["link_gbps"]: r for r in lead_over_baselines(d, ["link_gbps"]).to_dict("records")}
    rows = []
    for W, g in d.groupby("link_gbps", sort=True):
        ss = g[g["solver"] == "slackswap"]
        r = lead[W]
        rows.append([f"{W:g}", *[pct(_ok_throughput(g[g["solver"] == s])) for s in solvers],
                     gb(ss, "swapped_bytes"), gb(ss, "recomputed_bytes"), lead_cell(r, "pt")])
    parts.append(
        "### Figure 6a: link bandwidth (GPT-2 XL, A100, 30% of P)\n\n![Figure 6a](figure6a.png)"
        "\n\nThroughput in % of the ideal step; SlackSwap's swapped and recomputed GB; its lead "
        "over the best baseline in points (`figure6a.csv`).\n\n"
        + _table_md(["GB/s", *solvers, "swapped GB", "recomputed GB", "lead"], rows))
    d = sens["fig6b"]
    rows = []
    for q, g in d.groupby("seq", sort=True):
        ss = g[g["solver"] == "slackswap"]
        rows.append([f"{q // 1024}K", str(int(g["batch"].iloc[0])),
                     pct(float(g["hideable_fraction"].iloc[0])), pct(_ok_throughput(ss)),
                     pct(_ok_throughput(g[g["solver"] == "checkpoint"])),
                     gb(ss, "swapped_bytes", 1), gb(ss, "recomputed_bytes", 1)])
    parts.append(
        "### Figure 6b: sequence length (Llama-7B, A100, 30% of P, 16K tokens per batch)\n\n"
        "![Figure 6b](figure6b.png)\n\n`figure6b.csv`.\n\n"
        + _table_md(["sequence", "batch", "f", "SlackSwap", "checkpoint", "swapped GB",
                     "recomputed GB"], rows))
    d = sens["generations"]
    rows = []
    gens = lead_over_baselines(d, ["workload", "gpu"])
    gens["_g"] = [GPU_ORDER.index(g) if g in GPU_ORDER else len(GPU_ORDER) for g in gens["gpu"]]
    for r in gens.sort_values(["workload", "_g"], kind="stable").to_dict("records"):
        ss = d[(d["workload"] == r["workload"]) & (d["gpu"] == r["gpu"])
               & (d["solver"] == "slackswap")]
        rows.append([LABELS.get(r["workload"], r["workload"]), r["gpu"],
                     pct(float(ss["hideable_fraction"].iloc[0])), pct(r["slackswap"]),
                     f"{r['best_baseline']} {pct(r['best_throughput'])}", lead_cell(r, "x"),
                     gb(ss, "swapped_bytes"), gb(ss, "recomputed_bytes")])
    parts.append(
        "### GPU generations (30% of P, each GPU with its default link)\n\n"
        "![GPU generations](gpu_generations.png)\n\n`gpu_generations.csv`.\n\n"
        + _table_md(["workload", "GPU", "f", "SlackSwap", "best baseline", "lead",
                     "swapped GB", "recomputed GB"], rows))
    return "## Section 4.5: sensitivity\n\n" + "\n\n".join(parts)
