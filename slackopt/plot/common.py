"""What every figure of :mod:`slackopt.plot` shares: the figure itself (built without
pyplot), units and number formats, colours and line styles, titles, and :func:`save`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from slackopt.errors import FileFormatError
from slackopt.plan import KEEP, RECOMP, SWAP

FORMATS = (".png", ".svg", ".pdf")
"""File formats :func:`save` writes."""

DECISION_COLORS = {KEEP: "#4C72B0", SWAP: "#DD8452", RECOMP: "#55A868"}
DECISION_LABELS = {KEEP: "keep (stays on the GPU)", SWAP: "swap (offload + prefetch)",
                   RECOMP: "recompute (rebuilt in backward)"}
COLORS = {"fwd": "#4C72B0", "bwd": "#8172B3", "op": "#4C72B0", "rebuild": "#55A868",
      "stall": "#C44E52", "d2h": "#DD8452", "h2d": "#64B5CD", "evict": "#C44E52",
      "budget": "#C44E52", "peak": "#555555", "keep_all": "#999999", "used": "#4C72B0"}
GPU_LABELS = {"titanx": "Titan X (2015)", "v100": "V100 (2017)", "a100": "A100 (2020)",
              "h100": "H100 (2022)"}
PAPER_WORKLOADS = ("gpt2-xl", "bert-large", "llama-7b", "vgg16")
GPU_GENERATIONS = ("titanx", "v100", "a100", "h100")
"""Colour of each lane and line of the step figures."""


def figure(w: float, h: float) -> Figure:
    """An empty figure of `w` x `h` inches with constrained layout (no pyplot state)."""
    fig = Figure(figsize=(w, h), layout="constrained")
    return fig


def time_unit(t_max: float) -> tuple[float, str]:
    """(scale, unit) to draw times up to `t_max` seconds."""
    if t_max < 2e-3:
        return 1e6, "\u00b5s"
    return 1e3, "ms"


def byte_unit(b_max: float) -> tuple[float, str]:
    """(scale, unit) to draw sizes up to `b_max` bytes (decimal units)."""
    for scale, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if b_max >= scale:
            return scale, unit
    return 1.0, "B"


def fmt_bytes(b: float) -> str:
    """`b` bytes in decimal units, 3 significant digits ('5.76 kB')."""
    s, u = byte_unit(abs(b))
    return f"{b / s:.3g} {u}"


def fmt_time(t: float) -> str:
    """`t` seconds in s, ms or \u00b5s, 4 significant digits ('12.5 ms')."""
    if abs(t) >= 10:
        return f"{t:.4g} s"
    if abs(t) >= 1e-3 or t == 0:
        return f"{t * 1e3:.4g} ms"
    return f"{t * 1e6:.4g} \u00b5s"


def label_colors(labels: Sequence[str]) -> dict[str, Any]:
    """One colour per label, in order (matplotlib's tab10, repeating after ten)."""
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return {lab: cmap(i % 10) for i, lab in enumerate(labels)}


def line_styles(labels: Sequence[str]) -> dict[str, str]:
    """Line style per label: solid for the first ten (one colour each), then dashed, ..."""
    styles = ("-", "--", ":", "-.")
    return {lab: styles[(i // 10) % len(styles)] for i, lab in enumerate(labels)}


def wrap_title(title: str, chars: int) -> str:
    """`title` with each line broken into lines of at most `chars` characters, at phrase
    boundaries where it can: after ", ", "; " and ": ", or before " under " (a budget); a
    phrase longer than `chars` alone is broken between words.

    Args:
        title: the text (its own line breaks are kept).
        chars: the most characters per line (> 0).

    Returns:
        The wrapped text, lines joined by newlines.
    """
    import re
    import textwrap

    out: list[str] = []
    for line in title.split("\n"):
        cur = ""
        for phrase in re.split(r"(?<=[,;:]) | (?=under )", line):
            if cur and len(cur) + 1 + len(phrase) > chars:
                out.append(cur)
                cur = ""
            cur = f"{cur} {phrase}" if cur else phrase
            if len(cur) > chars:
                *full, cur = textwrap.wrap(cur, chars)
                out.extend(full)
        out.append(cur)
    return "\n".join(out)


def save(fig: Figure, path: str | os.PathLike, *, dpi: int = 150) -> Path:
    """Write a figure as PNG, SVG or PDF (by the file's suffix); replaces an existing file.

    Args:
        fig: the figure.
        path: the file (.png, .svg or .pdf); parent directories are created.
        dpi: resolution of PNG files (dots per inch).

    Returns:
        The path written.

    Raises:
        FileFormatError: an unknown suffix, or the file cannot be written.
    """
    p = Path(path)
    if p.suffix.lower() not in FORMATS:
        raise FileFormatError(p, "", f"unknown figure format '{p.suffix or '(none)'}'",
                              f"end the file name with one of {', '.join(FORMATS)}")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(p, dpi=dpi, format=p.suffix.lower()[1:])
    except OSError as e:
        raise FileFormatError(p, "", f"cannot be written ({e.strerror or e})",
                              "check that the directory is writable") from None
    return p

