"""The paper's stated numbers (``slackopt/data/paper_numbers.toml``) beside the reproduced
ones: :class:`Claim`, the values one run computes, and their formats."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from slackopt.experiments.reproduce.common import (
    PAPER_NUMBERS,
    TABLE2_BUDGET,
    TRANSFORMERS,
    _best_baseline,
    _feasible,
    _ok_throughput,
    _pct,
    _Run,
    _val,
)
from slackopt.experiments.reproduce.figure6 import _values_fig6a

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


@dataclass
class Claim:
    """One number the paper states, and ours.

    ``paper`` is (lo, hi) (equal for a single value), ``tol`` the tolerance around that
    range (slackopt/data/paper_numbers.toml); ``ours`` None when not computed in this mode.
    """

    key: str
    where: str
    what: str
    paper: tuple[float, float]
    ours: float | None
    unit: str
    tol: float
    note: str = ""

    @property
    def diff(self) -> float | None:
        if self.ours is None or (isinstance(self.ours, float) and math.isnan(self.ours)):
            return None
        lo, hi = self.paper
        return 0.0 if lo <= self.ours <= hi else (self.ours - lo if self.ours < lo
                                                  else self.ours - hi)

    @property
    def ok(self) -> bool | None:
        d = self.diff
        return None if d is None else abs(d) <= self.tol + 1e-12


def _fmt(x: float | None, unit: str) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if unit == "%":
        return f"{x:.1f}%"
    if unit == "x":
        return f"{x:.3f}x"
    if unit == "GB":
        return f"{x:.2f} GB"
    if unit == "ms":
        return f"{x:.1f} ms"
    if unit == "pt":
        return f"{x:.1f} pt"
    if unit == "steps":
        return f"{x:.2f}"
    if unit == "P":
        return f"{x:.0%} of P"
    if unit == "bool":
        return "yes" if x else "no"
    if unit == "GB/s":
        return f"{x:g} GB/s"
    return f"{x:.4g}"


def _fmt_range(c: Claim) -> str:
    lo, hi = c.paper
    if c.unit == "bool":
        return "yes" if lo else "no"
    if lo == hi:
        return _fmt(lo, c.unit)
    return f"{_fmt(lo, c.unit)} - {_fmt(hi, c.unit)}"


def _fmt_diff(c: Claim) -> str:
    d = c.diff
    if d is None:
        return "n/a"
    if c.unit == "bool":
        return "same" if d == 0 else "differs"
    if d == 0:
        return "in range"
    unit = {"%": " pt", "x": "x", "GB": " GB", "ms": " ms", "pt": " pt", "steps": "",
            "P": "", "GB/s": " GB/s"}.get(c.unit, "")
    if c.unit == "P":
        return f"{d:+.0%} of P"
    return f"{d:+.3g}{unit}"


def paper_numbers() -> dict[str, dict[str, Any]]:
    """The paper's stated numbers, by claim key, from the package data file
    ``slackopt/data/paper_numbers.toml`` (fields: where, what, paper, unit, tol, note)."""
    import tomllib
    from importlib.resources import files

    text = files("slackopt").joinpath("data", PAPER_NUMBERS).read_text(encoding="utf-8")
    return dict(tomllib.loads(text)["claims"])


def _values(run: _Run, fig4: pd.DataFrame, t3: pd.DataFrame, vgg: Mapping[str, float],
            fig5: Mapping[str, float], plan_s: Mapping[tuple, float],
            sens: Mapping[str, pd.DataFrame]
            ) -> tuple[dict[str, float], dict[str, dict[str, str]]]:
    """Our value of every claim this run computes (key -> number, in the claim's unit),
    and the names that fill a claim's text (key -> {"best": baseline})."""
    V: dict[str, float] = {}
    F: dict[str, dict[str, str]] = {}
    v = lambda w, s, f, col="throughput": _val(fig4, run, w, s, f, col)  # noqa: E731
    has = set(np.round(fig4["budget_fraction"].astype(float), 6))

    # Intro / section 4.2 headline at 50%.
    for s in ("vdnn", "superneurons", "swapadvisor"):
        V[f"gpt2.{s}@0.5"] = _pct(v("gpt2-xl", s, 0.5))
    V["gpt2.swapadvisor.d2h@0.5"] = v("gpt2-xl", "swapadvisor", 0.5, "d2h_bytes") / 1e9
    ck = v("gpt2-xl", "checkpoint", 0.5, "recompute_s") / run.insts["gpt2-xl"].ideal_time_s
    V["gpt2.checkpoint.recompute@0.5"] = _pct(ck)
    for w in ("bert-large", "gpt2-xl", "llama-7b"):
        V[f"{w}.slackswap@0.5"] = _pct(v(w, "slackswap", 0.5))
    fracs = (0.5, 0.3) if 0.3 in has else (0.5,)
    for f in fracs:
        for w in TRANSFORMERS:
            if f == 0.3:
                V[f"{w}.slackswap@0.3"] = _pct(v(w, "slackswap", 0.3))
            b, bv = _best_baseline(fig4, run, w, f)
            V[f"{w}.ratio@{f}"] = v(w, "slackswap", f) / bv if bv == bv else math.nan
            F[f"{w}.ratio@{f}"] = {"best": b}
    # Down to 90% (70% for Llama) SlackSwap and SwapAdvisor match the ideal.
    for w in TRANSFORMERS:
        f = 0.7 if w == "llama-7b" else 0.9
        for s in ("slackswap", "swapadvisor"):
            V[f"{w}.{s}.ideal@{f}"] = _pct(v(w, s, f))
    for w in TRANSFORMERS:
        V[f"{w}.superneurons@0.7"] = _pct(v(w, "superneurons", 0.7))
    for w in TRANSFORMERS:
        V[f"{w}.vdnn@0.9"] = _pct(v(w, "vdnn", 0.9))
    for w in TRANSFORMERS:
        V[f"{w}.checkpoint@0.15"] = _pct(v(w, "checkpoint", 0.15))
        V[f"{w}.checkpoint.fits@0.1"] = float(bool(_feasible(fig4, run, w, "checkpoint", 0.1)))
        V[f"{w}.slackswap@0.1"] = _pct(v(w, "slackswap", 0.1))
    if 0.65 in has:
        V["vgg16.slackswap@0.65"] = _pct(v("vgg16", "slackswap", 0.65))
        for s in ("vdnn", "checkpoint"):
            fits70 = _feasible(fig4, run, "vgg16", s, 0.7)
            fits65 = _feasible(fig4, run, "vgg16", s, 0.65)
            V[f"vgg16.{s}.floor"] = float(bool(fits70) and not fits65)
    # Table 2 at 40%.
    if TABLE2_BUDGET in has:
        ideal = {w: run.insts[w].ideal_time_s for w in TRANSFORMERS}
        for ph in ("fwd", "bwd"):
            V[f"gpt2.swapadvisor.stall_{ph}@0.4"] = \
                v("gpt2-xl", "swapadvisor", 0.4, f"stall_{ph}_s") / ideal["gpt2-xl"]
        for w in TRANSFORMERS:
            V[f"{w}.checkpoint.recompute@0.4"] = \
                _pct(v(w, "checkpoint", 0.4, "recompute_s") / ideal[w])
        for w in ("gpt2-xl", "llama-7b"):
            V[f"{w}.slackswap.d2h@0.4"] = v(w, "slackswap", 0.4, "d2h_bytes") / 1e9
            V[f"{w}.slackswap.recompute@0.4"] = \
                _pct(v(w, "slackswap", 0.4, "recompute_s") / ideal[w])
        for w in TRANSFORMERS:
            st = v(w, "slackswap", 0.4, "stall_fwd_s") + v(w, "slackswap", 0.4, "stall_bwd_s")
            V[f"{w}.slackswap.stall@0.4"] = _pct(st / ideal[w])
    # Figure 5.
    V["fig5.vdnn"] = fig5["vdnn_ms"]
    V["fig5.slackswap"] = fig5["slackswap_ms"]
    V["fig5.ideal"] = fig5["ideal_ms"]
    # Table 3.
    tv = lambda w, s, f, col="throughput": _val(t3, run, w, s, f, col)  # noqa: E731
    t3_budgets = sorted(set(np.round(t3["budget_fraction"].astype(float), 6)), reverse=True)
    for s in ("slackswap-swap-first", "slackswap-recompute-only", "slackswap-barriers"):
        for w in TRANSFORMERS:
            for f in t3_budgets:
                V[f"{w}.{s}.loss@{f}"] = (tv(w, "slackswap", f) - tv(w, s, f)) * 100
    if (t3["solver"] == "genetic").any():
        for w in TRANSFORMERS:
            for f in t3_budgets:
                g, s = tv(w, "genetic", f), tv(w, "slackswap", f)
                if g == g and s == s:
                    V[f"{w}.genetic@{f}"] = (g / s - 1) * 100
    if plan_s:
        V["slackswap.planning"] = max(plan_s.values()) * 1e3
    # Section 4.1 check.
    V["vgg.titanx.conv"] = vgg["conv"] * 100
    V["vgg.titanx.all"] = vgg["all"] * 100
    # Section 4.5.
    if "fig6a" in sens:
        _values_fig6a(sens["fig6a"], V, F)
    if "fig6b" in sens:
        d = sens["fig6b"]
        for seq, g in d.groupby("seq"):
            if seq in (2048, 32768):  # the two ends the paper gives f and SlackSwap for
                ss = g[g["solver"] == "slackswap"]
                V[f"fig6b.f@{seq}"] = float(g["hideable_fraction"].iloc[0]) * 100
                V[f"fig6b.slackswap@{seq}"] = _pct(_ok_throughput(ss))
            V[f"fig6b.checkpoint@{seq}"] = _pct(_ok_throughput(g[g["solver"] == "checkpoint"]))
    if "generations" in sens:
        from slackopt.experiments.sensitivity import lead_over_baselines

        for r in lead_over_baselines(sens["generations"], ["workload", "gpu"]).to_dict("records"):
            V[f"gen.{r['workload']}@{r['gpu']}"] = r["ratio"]
            F[f"gen.{r['workload']}@{r['gpu']}"] = {"best": r["best_baseline"]}
    return V, F


def _claims(values: Mapping[str, float], fields: Mapping[str, Mapping[str, str]],
            paper: Mapping[str, Mapping[str, Any]] | None = None) -> list[Claim]:
    """The paper's numbers (data file order) beside ours, for every claim computed.

    Raises:
        KeyError: a computed value whose key the data file lacks (an internal error).
    """
    paper = paper_numbers() if paper is None else paper
    missing = sorted(set(values) - set(paper))
    if missing:
        raise KeyError(f"{PAPER_NUMBERS} has no claim {', '.join(missing)}")
    out = []
    for key, e in paper.items():
        if key not in values:
            continue
        lo, hi = (float(x) for x in e["paper"])
        out.append(Claim(key, e["where"], e["what"].format(**fields.get(key, {})), (lo, hi),
                         values[key], e["unit"], float(e["tol"]), e.get("note", "")))
    return out
