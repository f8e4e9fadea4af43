"""The runtime rules of the model, each stated once.

docs/model.md ("Plan semantics under the barrier-free runtime", "Hardware") states them;
the reference event loops (:mod:`slackopt.simulate._engine` and its subclasses), the
compiled kernel (:mod:`slackopt.simulate._kernel`), the schedule checker and search
(:mod:`slackopt.experiments.schedule`, :mod:`slackopt.experiments.best_schedule`),
SlackSwap's planned schedules and the MILP's rows and bounds all read them from here
(tests/test_rules_home.py fails if one is written anywhere else):

- memory: the allocation test (:func:`allocation_fits`) and the bytes an allocation is
  short (:func:`shortfall`); the host pinned-memory test of a D2H start
  (:func:`host_admits`);
- the H2D admission look-ahead (:data:`ADMISSION_LOOKAHEAD`, :func:`lookahead_window`)
  and the admission test (:func:`h2d_admits`);
- the copy engines: the rate of a copy (:func:`copy_rate`: the direction's bandwidth,
  times the duplex factor while a copy in the other direction is in flight) and the
  progression of a copy in flight (:func:`copy_start`: its latency phase comes first;
  :func:`copy_event`, :func:`copy_advance`: then its bytes move at the rate);
- copies at a constant rate: the length of one (:func:`copy_time`), the end of one queued
  on a FIFO engine (:func:`fifo_copy_end`) and the ends of a whole FIFO queue in closed
  form over arrays (:func:`fifo_ends`).

Each rule but :func:`fifo_ends` is a plain function over scalars that calls nothing: the
reference engine calls it as Python, compiled code compiles it with numba
(``njit(inline="always", cache=True)(rules.f)``), and array code may pass numpy arrays for
the sizes (the arithmetic is elementwise). The operation order is part of the rule: the
engines agree bit for bit because they evaluate the same expression, and a bound that
mirrors the engine's arithmetic uses the function that evaluates it in the engine's order.
"""

from __future__ import annotations

import numpy as np

ADMISSION_LOOKAHEAD = 3
"""An H2D copy not awaited by the compute stream is admitted only if the allocations of
this many next compute tasks not yet started (rebuilds included) still fit beside it."""


def allocation_fits(used, size, budget):
    """The allocation test: may `size` bytes be allocated now (a task's start, a buffer)?

    Args:
        used: device bytes in use (int).
        size: bytes to allocate (int).
        budget: M (bytes, int).

    Returns:
        True when ``used + size <= M`` (memory never exceeds M).
    """
    return used + size <= budget


def shortfall(used, size, budget):
    """Bytes by which an allocation of `size` bytes does not fit: ``used + size - M``
    (int; > 0 exactly when :func:`allocation_fits` is False). Arguments as there."""
    return used + size - budget


def host_admits(host_used, size, host_limit):
    """The host pinned-memory test of a D2H start (``Instance.host_memory_bytes``).

    Args:
        host_used: host pinned bytes held by swapped tensors (int).
        size: the bytes the D2H's tensor will hold from its start (int).
        host_limit: the limit (bytes, int), or a negative value for no limit.

    Returns:
        True when there is no limit or ``host_used + size <= host_limit``; a D2H refused
        ends the run as infeasible (docs/model.md).
    """
    return host_limit < 0 or host_used + size <= host_limit


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
        ``bandwidth * duplex`` while the other direction copies, else ``bandwidth``; with
        ``other_in_flight=True``, the slowest rate a copy of that direction can run at.
    """
    return bandwidth * (duplex if other_in_flight else 1.0)


def copy_start(now, size, latency):
    """A copy that starts at `now` (s): first its latency phase, then its bytes.

    Args:
        now: the start (s).
        size: its bytes (int).
        latency: the fixed cost of every copy (s).

    Returns:
        (latency_end, remaining): the end of its latency phase, ``now + latency`` (s),
        and the bytes still to move, ``float(size)``; the state :func:`copy_event` and
        :func:`copy_advance` read.
    """
    return now + latency, float(size)


def copy_event(now, latency_end, remaining, rate):
    """The next event (s) of a copy in flight: the end of its latency phase while it is
    in it, else the instant its last byte moves if its rate stays `rate` (B/s):
    ``now + remaining / rate``. `latency_end`, `remaining` as :func:`copy_start` gives."""
    return latency_end if now < latency_end else now + remaining / rate


def copy_advance(now, latency_end, remaining, rate, event, until):
    """A copy in flight as time moves from `now` to `until` (s), the next event of any
    resource, at most the copy's own `event` (:func:`copy_event`).

    A copy in its latency phase moves no bytes (at `until` it leaves that phase or is
    still in it); one past it moves ``rate * (until - now)`` bytes, or its last byte when
    `until` is its own event.

    Returns:
        (remaining, done): the bytes still to move at `until` (float, unchanged when
        done) and whether the copy has ended there.
    """
    if now < latency_end:
        return remaining, False
    if event == until:
        return remaining, True
    return remaining - rate * (until - now), False


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


def fifo_copy_end(engine_free, ready, size, rate, latency):
    """End (s) of a copy on a FIFO engine at a constant rate, in the engines' arithmetic.

    Args:
        engine_free: when the copy ahead of it in the queue ends (s; 0 or less if none).
        ready: when its tensor is ready (s).
        size: its bytes.
        rate: its rate (B/s).
        latency: the fixed cost of every copy (s).

    Returns:
        ``start + latency + size / rate`` with ``start = max(engine_free, ready)``:
        :func:`copy_start` then :func:`copy_event` with nothing in between, so the end of
        an uninterrupted copy equals the event loops' bit for bit.
    """
    start = engine_free if engine_free > ready else ready
    return start + latency + size / rate


def fifo_ends(release, duration):
    """Ends (s) of copies served one at a time in the given order on one engine.

    ``end_k = max(release_k, end_{k-1}) + duration_k``, in closed form over arrays:
    ``end_k = C_k + max_{j <= k}(release_j - C_{j-1})`` with C the cumulative durations
    (equal to the recurrence up to rounding; :func:`fifo_copy_end` evaluates it one copy
    at a time in the engines' order).

    Args:
        release: float64 [n], when each copy may start (s).
        duration: float64 [n], each copy's length (s; :func:`copy_time`).

    Returns:
        float64 [n], the end of each copy (s).
    """
    if release.size == 0:
        return np.zeros(0)
    cd = np.cumsum(duration)
    return cd + np.maximum.accumulate(release - (cd - duration))
