"""The runtime rules that more than one module applies, each stated once.

docs/model.md ("Plan semantics under the barrier-free runtime", "Hardware") states them;
the reference event loops (:mod:`slackopt.simulate._engine` and its subclasses), the
compiled kernel (:mod:`slackopt.simulate._kernel`), SlackSwap's planned schedules, the
MILP's rows and bounds and :mod:`slackopt.linkbudget` all read them from here:

- the H2D admission look-ahead (:data:`ADMISSION_LOOKAHEAD`, :func:`lookahead_window`)
  and the admission test (:func:`h2d_admits`);
- the copy rate of an engine (:func:`copy_rate`: the direction's bandwidth, times the
  duplex factor while a copy in the other direction is in flight) and the length of a
  copy at a constant rate (:func:`copy_time`: the fixed latency, then bytes at that rate).

Each rule is a plain function over scalars, with no import: the reference engine calls it
as Python, the kernel compiles it with numba (``njit(rules.f)``), and array code may pass
numpy arrays for the size (the arithmetic is elementwise). The operation order is part of
the rule: both engines agree bit for bit because they evaluate the same expression.
"""

from __future__ import annotations

ADMISSION_LOOKAHEAD = 3
"""An H2D copy not awaited by the compute stream is admitted only if the allocations of
this many next compute tasks not yet started (rebuilds included) still fit beside it."""


def lookahead_window(k, comp_busy, n_tasks):
    """The compute tasks whose allocations an H2D admission reserves room for.

    Args:
        k: index of the current task (running if `comp_busy`, else the next to start).
        comp_busy: whether task k is running.
        n_tasks: number of tasks of the plan.

    Returns:
        (first, end): the tasks ``first .. end - 1``, the next :data:`ADMISSION_LOOKAHEAD`
        tasks not yet started (fewer at the end of the step). With prefix sums ``cum`` of
        the task allocations, the reserved bytes are ``cum[end] - cum[first]``.
    """
    first = min(k + 1 if comp_busy else k, n_tasks)
    return first, min(first + ADMISSION_LOOKAHEAD, n_tasks)


def h2d_admits(used, size, reserved, budget):
    """The H2D admission test: may a copy of `size` bytes start now?

    Args:
        used: device bytes in use (int).
        size: the copy's bytes; its buffer is allocated when it starts (int).
        reserved: the look-ahead allocations (:func:`lookahead_window`), or 0 when the
            compute stream already waits for this very copy (int).
        budget: M (bytes, int).

    Returns:
        True when ``used + size + reserved <= M``.
    """
    return used + size + reserved <= budget


def copy_rate(bandwidth, duplex, other_in_flight):
    """Bytes per second a copy engine moves.

    Args:
        bandwidth: the bandwidth of the copy's direction (B/s): W_d2h for a D2H copy,
            W_h2d for an H2D copy.
        duplex: the duplex factor in (0, 1].
        other_in_flight: whether a copy in the other direction is in flight (its latency
            phase included).

    Returns:
        ``bandwidth * duplex`` while the other direction copies, else ``bandwidth``.
    """
    return bandwidth * (duplex if other_in_flight else 1.0)


def copy_time(size, bandwidth, latency, duplex=1.0):
    """Length (s) of one copy that runs at a constant rate.

    Args:
        size: bytes copied (a number, or a numpy array of them).
        bandwidth: the bandwidth of the copy's direction (B/s, > 0).
        latency: the fixed cost of every copy (s).
        duplex: 1.0 for the shortest copy (the other direction idle); the duplex factor for
            the longest one (the other direction busy throughout).

    Returns:
        ``latency + size / (bandwidth * duplex)``; a copy whose rate changes midway lasts
        between the two (the event loops integrate :func:`copy_rate` instead).
    """
    return latency + size / (bandwidth * duplex)
