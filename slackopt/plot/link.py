"""The figures of the host link: the share of saved activations it can hide per GPU
generation (the paper's Figure 1) and recompute cost per byte against an exposed copy
(Figure 2)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from slackopt.errors import SlackoptError
from slackopt.instance import Instance
from slackopt.plot.common import GPU_GENERATIONS, GPU_LABELS, PAPER_WORKLOADS, figure, label_colors


def link_budget(workloads: Sequence[str] = PAPER_WORKLOADS,
                gpus: Sequence[str] = GPU_GENERATIONS, *, title: str | None = None,
                **make_params: Any) -> Figure:
    """The share of saved activations the host link can hide, per GPU generation (Figure 1).

    For each GPU preset with its own host link, each workload is generated with
    ``slackopt.workloads.make(workload, gpu=gpu)`` and its hideable fraction
    f = min(1, W T_F / A) computed by :mod:`slackopt.linkbudget` (Eq. 1 of the paper).

    Args:
        workloads: workload names (default: the paper's four).
        gpus: GPU preset names in generation order (default: titanx, v100, a100, h100).
        title: figure title.
        **make_params: passed to ``make`` (seq, batch, layers, ...).

    Returns:
        The figure: grouped bars of f (%) per GPU, one bar per workload.

    Raises:
        KeyError: an unknown workload or GPU preset.
    """
    from slackopt.hardware import GPUS
    from slackopt.linkbudget import hideable_fraction
    from slackopt.workloads import make

    vals = np.zeros((len(gpus), len(workloads)))
    links = []
    for i, g in enumerate(gpus):
        for j, w in enumerate(workloads):
            inst = make(w, gpu=g, **make_params)
            vals[i, j] = hideable_fraction(inst)
            if j == 0:
                links.append(inst.link)
    fig = figure(max(7.0, 1.6 * len(gpus) + 2), 4.4)
    ax = fig.add_subplot()
    width = 0.8 / max(1, len(workloads))
    colors = label_colors(list(workloads))
    for j, w in enumerate(workloads):
        xs = np.arange(len(gpus)) + (j - (len(workloads) - 1) / 2) * width
        bars = ax.bar(xs, vals[:, j] * 100, width * 0.95, color=colors[w], label=w)
        ax.bar_label(bars, [f"{v:.0%}" for v in vals[:, j]], fontsize=7, padding=1)
    ticks = []
    for g, lk in zip(gpus, links, strict=True):
        gp = GPUS.get(g)
        dtype = {4: "FP32", 2: "BF16"}.get(gp.dtype_bytes, "") if gp else ""
        flops = f"{gp.peak_flops / 1e12:.0f} TFLOP/s {dtype}" if gp else ""
        bw = (f"{lk.d2h_bytes_per_s / 1e9:.3g} GB/s" if lk.symmetric else
              f"D2H {lk.d2h_bytes_per_s / 1e9:.3g} / H2D {lk.h2d_bytes_per_s / 1e9:.3g} GB/s")
        ticks.append(f"{GPU_LABELS.get(g, g)}\n{flops}\n{lk.name} {bw}")
    ax.set_xticks(np.arange(len(gpus)), ticks, fontsize=8)
    ax.set_xlabel("GPU (peak training FLOP/s) and host link (bandwidth per direction)")
    ax.set_ylabel("hideable fraction f (% of saved bytes)")
    ax.set_ylim(0, 112)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(title="workload", fontsize=8, title_fontsize=8, loc="upper right")
    ax.set_title(title or "Share of saved activations the host link can copy out during the "
                 "forward pass", fontsize=10)
    return fig


def cost_per_byte(instance: Instance, *, by: str = "auto",
                  links: Mapping[str, float] | None = None, title: str | None = None) -> Figure:
    """Recompute cost per byte of each saved tensor against the cost of an exposed copy
    (the paper's Figure 2).

    Each dot is one saved tensor's rho = c / s (rebuild time per byte, ps/B); horizontal
    lines are 1 / W, what a byte costs when its copy is not hidden (W: the H2D bandwidth, the
    copy a stalled backward op waits for), for the instance's link (solid) and the other
    PCIe generations (dotted). Once the link budget is spent,
    a tensor below a line is cheaper to recompute than to copy over that link.

    Args:
        instance: the instance.
        by: "tensor" (one column per saved tensor, named), "category" (one column per
            tensor kind), or "auto" (tensors if there are at most 30, else categories).
        links: {label: bandwidth B/s} of the reference lines (default: PCIe 3.0/4.0/5.0).
        title: figure title.

    Returns:
        The figure (log-scale ps/B).

    Raises:
        SlackoptError: an unknown `by`.
    """
    from slackopt.hardware import LINKS

    if by not in ("auto", "tensor", "category"):
        raise SlackoptError(f"by='{by}' is not auto, tensor or category")
    if by == "auto":
        by = "tensor" if instance.n_saved <= 30 else "category"
    if links is None:
        links = {"PCIe 3.0": LINKS["pcie3"].h2d_bytes_per_s,
                 "PCIe 4.0": LINKS["pcie4"].h2d_bytes_per_s,
                 "PCIe 5.0": LINKS["pcie5"].h2d_bytes_per_s}
    rho = np.asarray(instance.rho, dtype=float) * 1e12
    if by == "tensor":
        cols = list(instance.saved_names)
        col_of = list(range(instance.n_saved))
    else:
        cols = list(dict.fromkeys(instance.saved_categories))
        col_of = [cols.index(c) for c in instance.saved_categories]
    fig = figure(max(6.5, (0.35 if by == "tensor" else 0.7) * len(cols) + 3), 4.6)
    ax = fig.add_subplot()
    rng = np.random.default_rng(0)
    jitter = 0.0 if by == "tensor" else 0.18
    n_inf = 0
    for i in range(len(cols)):
        v = rho[[k for k in range(instance.n_saved) if col_of[k] == i]]
        fin = v[np.isfinite(v) & (v > 0)]
        n_inf += int((~np.isfinite(v)).sum())
        if fin.size:
            ax.scatter(i + rng.uniform(-jitter, jitter, fin.size), fin, s=18, alpha=0.75,
                       color="#55A868", edgecolors="none")
        else:
            ax.annotate("cannot be\nrebuilt", (i, 0), xycoords=("data", "axes fraction"),
                        xytext=(0, 4), textcoords="offset points", ha="center",
                        va="bottom", fontsize=7, color="#555555")
    ax.scatter([], [], s=18, color="#55A868", label="recompute cost of one saved tensor")
    # A stall waits for an H2D copy: the exposed copy runs at the H2D bandwidth.
    w0 = instance.link.h2d_bytes_per_s
    ax.axhline(1e12 / w0, color="#C44E52", linewidth=1.6,
               label=f"exposed copy on this link ({instance.link.name}, "
                     f"{'' if instance.link.symmetric else 'H2D '}"
                     f"{w0 / 1e9:.3g} GB/s): {1e12 / w0:.3g} ps/B")
    for lab, bw in links.items():
        if abs(bw - w0) / w0 > 1e-9:
            ax.axhline(1e12 / bw, color="#C44E52", linestyle=":", linewidth=1,
                       label=f"exposed copy on {lab} ({bw / 1e9:.3g} GB/s): {1e12 / bw:.3g} ps/B")
    ax.set_yscale("log")
    fin_all = rho[np.isfinite(rho) & (rho > 0)]
    lines = [1e12 / w0] + [1e12 / bw for bw in links.values()]
    lo = min([*fin_all.tolist(), *lines])
    ax.set_ylim(lo / 4, max([*fin_all.tolist(), *lines]) * 2)
    ax.set_xlim(-0.6, len(cols) - 0.4)
    ax.set_xticks(range(len(cols)), [c.replace("_", " ") for c in cols], rotation=30,
                  ha="right", fontsize=8)
    what = "saved tensor" if by == "tensor" else "saved tensor category"
    if n_inf:
        what += (f" ({n_inf} saved tensor{'s' if n_inf > 1 else ''} cannot be rebuilt: "
                 "no dot)")
    ax.set_xlabel(what)
    ax.set_ylabel("cost per byte (ps/B, log scale)")
    ax.grid(axis="y", alpha=0.3, which="both")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=2, fontsize=8,
               frameon=False)
    ax.set_title(title or f"{instance.name}: recomputing a byte vs copying it in the open",
                 fontsize=10)
    return fig

