"""What the commands print: JSON documents, tables, values formatted by the unit their
name carries, and the one-line messages on stderr (``slackopt: error: ...``,
``slackopt: note: ...``)."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table


def console() -> Console:
    """Human output on the current stdout; no markup, emoji or highlighting of user text."""
    return Console(markup=False, emoji=False, highlight=False)


def wide_console() -> Console:
    """:func:`console`, at least 160 columns wide when stdout is not a terminal (tables of
    a sweep are not cut in a file or a pipe)."""
    con = console()
    if not con.is_terminal:
        con.width = max(con.width, 160)
    return con


def err(message: str) -> None:
    """Write ``slackopt: error: MESSAGE`` on stderr."""
    sys.stderr.write(f"slackopt: error: {message}\n")
    sys.stderr.flush()


def note(message: str) -> None:
    """Write ``slackopt: note: MESSAGE`` on stderr (an answer, not an error)."""
    sys.stderr.write(f"slackopt: note: {message}\n")
    sys.stderr.flush()


def plain(x: Any) -> Any:
    """JSON-ready copy: numpy to Python, tuples to lists, NaN/inf to null, others to str."""
    if isinstance(x, bool) or x is None or isinstance(x, (str, int)):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return plain(float(x))
    if isinstance(x, Mapping):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set, frozenset, np.ndarray)):
        return [plain(v) for v in (sorted(x, key=str) if isinstance(x, (set, frozenset))
                                   else x)]
    if isinstance(x, Path):
        return str(x)
    return str(x)


def emit_json(doc: Mapping[str, Any]) -> None:
    """Print `doc` as one JSON document (one line) on stdout."""
    sys.stdout.write(json.dumps(plain(doc), allow_nan=False) + "\n")
    sys.stdout.flush()


def records(df: Any) -> list[dict[str, Any]]:
    """JSON-ready rows of a DataFrame (NaN and NA as None)."""
    p = df.astype(object).where(df.notna(), None)
    return [plain(r) for r in p.to_dict("records")]


def fmt_bytes(b: float | None) -> str:
    """Bytes in GB, MB, kB (4 significant digits) or B; "-" for None."""
    if b is None:
        return "-"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(b) >= scale:
            return f"{b / scale:.4g} {unit}"
    return f"{int(b)} B"


def fmt_time(t: float | None) -> str:
    """Seconds in s, ms or us (4 significant digits); "-" for None."""
    if t is None:
        return "-"
    if not math.isfinite(t):
        return str(t)
    if abs(t) >= 1:
        return f"{t:.4g} s"
    if abs(t) >= 1e-3 or t == 0:
        return f"{t * 1e3:.4g} ms"
    return f"{t * 1e6:.4g} us"


def pct(x: Any, digits: int = 1) -> str:
    """A fraction as a percentage; "-" for None or NaN."""
    return "-" if x is None or x != x else f"{float(x):.{digits}%}"


def fmt_value(key: str, v: Any) -> str:
    """Format by the unit its name carries (DESIGN.md, "Units and names")."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float, np.integer, np.floating)):
        v = float(v) if isinstance(v, (float, np.floating)) else int(v)
        if key.endswith("bytes_per_s"):
            return f"{v / 1e9:.4g} GB/s"
        if key.endswith("_bytes") or key in ("A", "P", "M"):
            return fmt_bytes(v)
        if key.endswith("_per_s"):
            return f"{v:,.4g}/s"
        if key.endswith("_s") or key in ("T_F", "T*", "T"):
            return fmt_time(v)
        if isinstance(v, int):
            return f"{v:,}"
        return f"{v:.4g}"
    if isinstance(v, Mapping):
        return ", ".join(f"{k}={fmt_value(str(k), x)}" for k, x in v.items())
    return str(v)


def brief(v: Any) -> Any:
    """A scalar as is; a long container as a count (the full value is in --json)."""
    v = plain(v)
    if isinstance(v, (list, dict)) and len(json.dumps(v)) > 60:
        word = ("entry" if len(v) == 1 else "entries") if isinstance(v, dict) else (
            "item" if len(v) == 1 else "items")
        return f"({len(v)} {word}; see --json)"
    return v


def kv_table(title: str, rows: Mapping[str, Any], labels: Mapping[str, str] | None = None
             ) -> Table:
    """A two-column table of quantities and their values (:func:`fmt_value`)."""
    t = Table(title=title, show_header=False, title_justify="left")
    t.add_column("quantity")
    t.add_column("value")
    for k, v in rows.items():
        t.add_row((labels or {}).get(k, k), fmt_value(k, v))
    return t


def decision_table(counts: Mapping[str, int], nbytes: Mapping[str, int], total: int) -> Table:
    """Tensors, bytes and share of A per decision."""
    t = Table(title="Decisions", title_justify="left")
    t.add_column("decision")
    t.add_column("tensors", justify="right")
    t.add_column("bytes", justify="right")
    t.add_column("share of A", justify="right")
    for k in counts:
        share = f"{nbytes[k] / total:.1%}" if total else "-"
        t.add_row(k, str(counts[k]), fmt_bytes(nbytes[k]), share)
    return t


SUMMARY_LABELS = {
    "ops": "scheduled ops", "saved_tensors": "saved tensors",
    "rebuildable_tensors": "rebuildable saved tensors (c < inf)",
    "intensity": "intensity I", "hideable_fraction": "hideable fraction f",
    "forward_link_budget_bytes": "forward link budget",
    "saved_bytes": "saved bytes A", "peak_bytes": "keep-all peak P",
    "forward_time_s": "forward time T_F", "ideal_time_s": "ideal step T*",
    "link_d2h_bytes_per_s": "link D2H bandwidth W_d2h",
    "link_h2d_bytes_per_s": "link H2D bandwidth W_h2d",
    "link_bytes_per_s": "W of the link budget (D2H)",
    "saved_storages": "saved storages (views merged)",
    "rng_capture": "RNG capture", "host_memory_bytes": "host pinned-memory limit",
}
"""Row labels of an instance summary (``Instance.summary()`` keys)."""


def summary_rows(s: Mapping[str, Any]) -> dict[str, Any]:
    """An instance summary without its name (the table's title says it)."""
    return {k: v for k, v in s.items() if k != "name"}


def evaluation_doc(ev: Any) -> dict[str, Any]:
    """An Evaluation as a JSON-ready dict; an infeasible plan has no step time (None) and
    throughput 0 (the time at which it failed is in ``failure``)."""
    d = ev.to_dict()
    if not d.get("feasible"):
        d["step_time_s"] = None
        d["throughput"] = 0.0
    return d


def print_evaluation(con: Console, ev: Mapping[str, Any]) -> None:
    """The Evaluation table of :func:`evaluation_doc`'s dict, then why it is infeasible."""
    keys = ("feasible", "step_time_s", "ideal_time_s", "throughput", "stall_fwd_s",
            "stall_bwd_s", "recompute_s", "d2h_bytes", "h2d_bytes", "evictions",
            "peak_bytes", "budget_bytes")
    con.print(kv_table("Evaluation", {k: ev[k] for k in keys if k in ev}))
    if ev.get("failure"):
        con.print(f"infeasible: {ev['failure']}")


def budget_fraction(m: int, p: int) -> float | None:
    """M / P, or None when P is 0."""
    return m / p if p else None


def budget_words(m: int, p: int) -> str:
    """A budget as ``"1.5 MB (0.500 of P)"`` (the fraction left out when P is 0)."""
    frac = budget_fraction(m, p)
    return fmt_bytes(m) + (f" ({frac:.3f} of P)" if frac is not None else "")


def min_budget_line(info: dict, min_b: float | None, frac: float | None) -> str:
    """The line an infeasible answer prints about the smallest budget, in the words its
    ``info["min_budget_basis"]`` allows (slackopt.result.MIN_BUDGET_BASES)."""
    if not isinstance(min_b, (int, float)):
        return "smallest budget this solver reaches: unknown"
    at = fmt_bytes(min_b) + (f" ({frac:.3f} of P)" if frac is not None else "")
    basis = info.get("min_budget_basis", "solver")
    if basis == "bisection":
        return (f"this solver returns a plan that runs at {at} (bisection between the budget "
                "asked for and P; it may also reach smaller budgets)")
    if basis == "best_plan_peak":
        return (f"the best plan found runs at {at}, its peak; smaller budgets were not "
                "searched")
    if basis == "proven":
        return f"smallest budget any plan runs at: {at} (proven: none runs below it)"
    if basis == "found":
        low = info.get("min_budget_lower_bytes")
        return (f"smallest budget found where a plan runs: {at}"
                + (f"; none runs below {fmt_bytes(low)} (proven)"
                   if isinstance(low, (int, float)) else ""))
    return f"smallest budget this solver reaches: {at}"
