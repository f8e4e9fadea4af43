"""What the step figures read from a traced evaluation (``simulate(..., trace=True)``):
the trace itself, the evaluations by label, where the drawn time axis ends, the verdict
line and the memory samples."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from slackopt.errors import SlackoptError
from slackopt.plot.common import fmt_bytes, fmt_time
from slackopt.simulate import Evaluation


def need_trace(ev: Evaluation, fn: str) -> list[dict[str, Any]]:
    """The event trace of `ev` (``simulate(..., trace=True)``).

    Raises:
        SlackoptError: `ev` is not an Evaluation, or has no trace (naming figure `fn`).
    """
    if not isinstance(ev, Evaluation):
        raise SlackoptError(f"{fn}() needs an Evaluation, got {type(ev).__name__}")
    if ev.trace is None:
        raise SlackoptError(f"{fn}() needs the event trace: evaluate with "
                            "slackopt.simulate(instance, plan, budget_bytes, trace=True)")
    return ev.trace


def evaluations_by_label(evaluation: Evaluation | Mapping[str, Evaluation]
                         ) -> dict[str, Evaluation]:
    """{label: Evaluation} of one evaluation (label "") or of a mapping.

    Raises:
        SlackoptError: an empty mapping.
    """
    if isinstance(evaluation, Mapping):
        if not evaluation:
            raise SlackoptError("no evaluations to plot")
        return {str(k): v for k, v in evaluation.items()}
    return {"": evaluation}


def end_s(ev: Evaluation) -> float:
    """Where the drawn time axis of `ev` ends (s): its step time if feasible; for an
    infeasible plan, which has no step time, the moment it stopped (the step time field
    if the evaluator still gives one, else the last traced event's end)."""
    if ev.step_time_s is not None and math.isfinite(ev.step_time_s):
        return float(ev.step_time_s)
    ends = [e["end_s"] for e in ev.trace or () if e.get("end_s") is not None]
    return float(max(ends, default=0.0))


def verdict(ev: Evaluation) -> str:
    """One line on how a plan ran: step against ideal and throughput, or why it is
    infeasible and where it stopped."""
    if not ev.feasible:
        import re

        m = re.search(r"task '([^']+)'.*?(\d+) B short", ev.failure or "")
        why = f": '{m.group(1)}' is {fmt_bytes(int(m.group(2)))} short of memory" if m else ""
        return f"infeasible{why}, no step time (stopped at {fmt_time(end_s(ev))}, red line)"
    return (f"step {fmt_time(ev.step_time_s)} vs ideal {fmt_time(ev.ideal_time_s)}, "
            f"throughput {ev.throughput:.1%}")


def memory_samples(ev: Evaluation, fn: str) -> tuple[np.ndarray, np.ndarray]:
    """Device memory in use (bytes) of a traced evaluation as a step function: the times
    (s) and the bytes from each time on, ending at the drawn end of the step."""
    samples: dict[float, int] = {}
    for e in need_trace(ev, fn):
        if e["lane"] == "memory":
            samples[e["start_s"]] = e["bytes"]  # the last sample at a time wins
    xs = np.array([0.0, *samples.keys(), end_s(ev)], dtype=float)
    ys = np.array([0, *samples.values()], dtype=float)
    return xs, np.append(ys, ys[-1])
