"""Bisection over a monotone feasibility predicate, shared by solvers.

Solvers use it to find the smallest integer (a budget in bytes) at which they find a
feasible plan: SlackSwap's ``min_budget_bytes`` when it reports
"infeasible", the baselines' and the MILP's smallest budgets. (The block-checkpoint
baseline scans k instead: its peak is not monotone in k.)
"""

from __future__ import annotations

from collections.abc import Callable


def smallest_true(pred: Callable[[int], bool], lo: int, hi: int, *, tol: int = 1) -> int:
    """Smallest integer x in (lo, hi] with ``pred(x)``, by bisection.

    The predicate must be monotone (False up to some threshold, True from it on) and is
    *assumed* False at `lo` and True at `hi`; neither end is evaluated. Bisection stops
    when the bracket is at most `tol` wide and returns its upper end, so the result is
    a point where ``pred`` holds (or `hi`) and lies within `tol` of the true threshold.

    Args:
        pred: monotone predicate over integers.
        lo: a point known (or assumed) to be False.
        hi: a point known (or assumed) to be True; ``hi > lo``.
        tol: stop when ``hi - lo <= tol`` (>= 1).

    Returns:
        The smallest True point found, within `tol` of the threshold. Evaluates
        ``pred`` about ``log2((hi - lo) / tol)`` times.
    """
    lo, hi, tol = int(lo), int(hi), max(1, int(tol))
    if hi <= lo:
        raise ValueError(f"empty bracket: lo={lo} >= hi={hi}")
    while hi - lo > tol:
        mid = lo + (hi - lo) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid
    return hi


__all__ = ["smallest_true"]
