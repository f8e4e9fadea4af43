"""The evaluator's result type, shared by every runtime policy."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Evaluation:
    """The evaluator's verdict on one plan.

    Attributes:
        feasible: memory never exceeded the budget and every task ran.
        step_time_s: T, end of the last task including stalls and rebuilds (s); for an
            infeasible plan, the time at which it failed.
        ideal_time_s: T*, the ideal step (s).
        throughput: T* / T (0 if infeasible).
        stall_fwd_s, stall_bwd_s: compute-stream idle time before forward / backward tasks (s).
        recompute_s: total time of rebuild tasks (s). T - T* = stalls + recompute exactly.
        d2h_bytes, h2d_bytes: bytes copied out / in (re-fetches included).
        evictions: device copies freed by eviction (the barrier-free fallback, or the
            on-demand runtime's victims).
        peak_bytes: highest memory in use (bytes), <= budget_bytes when feasible.
        budget_bytes: M.
        failure: why the plan is infeasible (task and bytes short), else None.
        h2d_stall_s: {saved tensor name: compute-stream time spent waiting for its H2D (s)}.
        trace: event list when requested, else None. Each event is a dict with ``lane``
            ("compute", "d2h", "h2d", "stall", "memory", "evict"), ``name``, ``start_s``,
            ``end_s``, and ``bytes`` (copies; memory samples give bytes in use from start_s
            on).
    """

    feasible: bool
    step_time_s: float
    ideal_time_s: float
    throughput: float
    stall_fwd_s: float
    stall_bwd_s: float
    recompute_s: float
    d2h_bytes: int
    h2d_bytes: int
    evictions: int
    peak_bytes: int
    budget_bytes: int
    failure: str | None = None
    h2d_stall_s: dict[str, float] = field(default_factory=dict)
    trace: list[dict[str, Any]] | None = None

    def to_dict(self, with_trace: bool = False) -> dict[str, Any]:
        """JSON-ready dict (trace omitted unless asked)."""
        d = asdict(self)
        if not with_trace:
            d.pop("trace")
        return d
