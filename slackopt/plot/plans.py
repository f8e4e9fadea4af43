"""The plan map: the decision per saved-tensor category per layer (the paper's Figure 3)."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from slackopt.instance import Instance
from slackopt.plan import KEEP, RECOMP, SWAP, Plan
from slackopt.plot.common import DECISION_COLORS, DECISION_LABELS, figure, fmt_bytes, wrap_title


def _layer_columns(instance: Instance) -> tuple[list[str], np.ndarray]:
    """Column labels and the column of each saved tensor: 'embed', blocks, 'head'."""
    layers = np.asarray(instance.saved_layers)
    blocks = sorted({int(b) for b in layers.tolist() if b >= 0})
    first_block_op = min((i for i, op in enumerate(instance.scheduled_ops[: instance.n_fwd])
                          if op.layer >= 0), default=instance.n_ops)
    prod = np.asarray(instance.saved_prod_idx)
    pre = (layers < 0) & (prod < first_block_op)
    post = (layers < 0) & ~pre
    labels, col = [], np.zeros(instance.n_saved, dtype=np.int64)
    if pre.any():
        labels.append("embed")
    base = len(labels)
    pos = {b: base + i for i, b in enumerate(blocks)}
    labels += [str(b) for b in blocks]
    for k, b in enumerate(layers.tolist()):
        if b >= 0:
            col[k] = pos[b]
    col[pre] = 0
    if post.any():
        labels.append("head" if blocks else "other")
        col[post] = len(labels) - 1
    return labels, col


def plan_map(instance: Instance, plan: Plan, *, budget_bytes: int | None = None,
             label: str | None = None, title: str | None = None, width: float | None = None
             ) -> Figure:
    """Decision per tensor category per layer (the paper's Figure 3).

    Each cell holds the saved tensors of one category (row) in one block (column;
    "embed" and "head" for tensors outside the blocks) and is filled by the share of
    their bytes kept, swapped and recomputed (a stacked bar; a cell of one colour has
    one decision). Grey: no such tensor there.

    Args:
        instance: the instance.
        plan: a plan for it.
        budget_bytes: the budget M it was made for (bytes), shown in the title if given.
        label: who made the plan (a solver name), named in the title if given.
        title: figure title (default: instance name, the label, M and bytes per
            decision).
        width: figure width (inches; default grows with the number of layers).

    Returns:
        The figure.

    Raises:
        PlanError: the plan does not fit the instance.
    """
    plan.check(instance)
    cats = list(dict.fromkeys(instance.saved_categories))
    cols, col_of = _layer_columns(instance)
    row_of = {c: i for i, c in enumerate(cats)}
    nr, nc = len(cats), len(cols)
    bytes_ = np.zeros((nr, nc, 3))
    count = np.zeros((nr, nc, 3))
    dec = plan.decisions
    s = np.asarray(instance.s, dtype=float)
    for k in range(instance.n_saved):
        r, c, d = row_of[instance.saved_categories[k]], col_of[k], int(dec[k])
        bytes_[r, c, d] += s[k]
        count[r, c, d] += 1
    if width is None:
        width = min(16.0, max(6.0, 2.5 + 0.2 * nc))
    fig = figure(width, max(3.2, 1.4 + 0.32 * nr))
    ax = fig.add_subplot()
    ax.add_patch(Rectangle((-0.5, -0.5), nc, nr, facecolor="#EEEEEE", edgecolor="none",
                           zorder=0))
    for r in range(nr):
        for c in range(nc):
            w = bytes_[r, c] if bytes_[r, c].sum() > 0 else count[r, c]
            tot = w.sum()
            if tot <= 0:
                continue
            y = r + 0.45  # row r drawn from top (inverted y): stack downward
            for d in (KEEP, SWAP, RECOMP):
                hgt = 0.9 * w[d] / tot
                if hgt > 0:
                    ax.add_patch(Rectangle((c - 0.45, y - hgt), 0.9, hgt,
                                           facecolor=DECISION_COLORS[d], edgecolor="none"))
                    y -= hgt
    ax.set_xlim(-0.5, nc - 0.5)
    ax.set_ylim(nr - 0.5, -0.5)
    step = 1 if nc <= 26 else (2 if nc <= 52 else 4)
    named = [i for i in range(nc) if not cols[i].isdigit()]
    ticks = [i for i in range(nc) if not cols[i].isdigit()
             or (int(cols[i]) % step == 0 and (step == 1 or all(abs(i - j) > 1
                                                                 for j in named)))]
    ax.set_xticks(ticks, [cols[i] for i in ticks], fontsize=8)
    ax.set_yticks(range(nr), [c.replace("_", " ") for c in cats], fontsize=8)
    ax.set_xlabel("layer (block index; embed: before the blocks, head: after them)")
    ax.set_ylabel("saved tensor category")
    handles = [Patch(color=DECISION_COLORS[d], label=DECISION_LABELS[d])
               for d in (KEEP, SWAP, RECOMP)]
    handles.append(Patch(color="#EEEEEE", label="no tensor of this kind"))
    fig.legend(handles=handles, loc="outside lower center", ncol=4 if width >= 9 else 2,
               fontsize=8, frameon=False)
    if title is None:
        bb = plan.bytes_by_decision(instance)
        tot = max(1, instance.A)
        under = ""
        if budget_bytes is not None:
            under = f" under M = {fmt_bytes(budget_bytes)}" + (
                f" ({budget_bytes / instance.P:.0%} of P)" if instance.P else "")
        by = f", plan of {label}" if label else ""
        title = (f"Plan map of {instance.name}{by}{under}\nkeep {fmt_bytes(bb['keep'])} "
                 f"({bb['keep'] / tot:.0%}), swap {fmt_bytes(bb['swap'])} "
                 f"({bb['swap'] / tot:.0%}), recompute {fmt_bytes(bb['recomp'])} "
                 f"({bb['recomp'] / tot:.0%}) of A = {fmt_bytes(instance.A)}; "
                 "each cell: share of its bytes per decision")
    ax.set_title(wrap_title(title, max(40, int(width * 10))), fontsize=10)
    return fig

