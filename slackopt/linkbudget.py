"""The link-budget model: how much of a workload's saved activations the host link can hide.

Source: SlackSwap paper (2026), section 2.2 "How much can
the link hide?", Eq. 1 and Table 1; totals in docs/workloads.md ("Totals").

A swapped byte is hidden if its device-to-host copy overlaps the forward pass, so the link
can hide at most W * T_F bytes (W: the link's device-to-host bandwidth W_d2h, B/s, the
direction that runs in the forward pass; T_F: forward time, s).
Against the saved bytes A this is the hideable fraction (Eq. 1)

    f = min(1, I / beta) = min(1, W * T_F / A)

with the workload's intensity I = F / A (forward FLOPs per saved byte, FLOP/B) and the
machine balance beta = (F / T_F) / W (achieved forward FLOP/s per link byte/s, FLOP/B).
SlackSwap spends (1 - g) * W * T_F bytes (guard g = 2% of the forward time) on swaps: the
forward link budget.

All functions take an :class:`~slackopt.instance.Instance` and read its ``A`` (bytes),
``forward_time_s``, ``forward_flops`` (sum of ``Op.flops`` over forward ops) and
``link.d2h_bytes_per_s``. Degenerate instances are handled without errors: no saved bytes
(A = 0) gives f = 1 and I = inf; no FLOPs gives I = beta = 0.
"""

from __future__ import annotations

import math
from typing import Any

from slackopt.instance import Instance

DEFAULT_GUARD = 0.02
"""Offload guard g: the share of the forward time kept free of planned copies (spec)."""


def intensity(instance: Instance) -> float:
    """Intensity I: forward FLOPs per saved byte (FLOP/B), section 2.2.

    Args:
        instance: the iteration (uses ``forward_flops`` and ``A``).

    Returns:
        F / A in FLOP/B; ``math.inf`` if A = 0 (nothing to move), 0.0 if F = 0 and A > 0.
    """
    a = instance.A
    if a <= 0:
        return math.inf
    return instance.forward_flops / a


def beta(instance: Instance) -> float:
    """Machine balance beta: achieved forward FLOP/s per link byte/s (FLOP/B), section 2.2.

    Args:
        instance: the iteration (uses ``forward_flops``, ``forward_time_s`` and
            ``link.d2h_bytes_per_s``).

    Returns:
        (F / T_F) / W in FLOP/B; 0.0 if F = 0; ``math.inf`` if F > 0 and T_F = 0.
    """
    f = instance.forward_flops
    if f <= 0:
        return 0.0
    t_f = instance.forward_time_s
    if t_f <= 0:
        return math.inf
    return f / t_f / instance.link.d2h_bytes_per_s


def hideable_fraction(instance: Instance) -> float:
    """Hideable fraction f of the saved bytes (Eq. 1): min(1, I / beta) = min(1, W T_F / A).

    Computed as W * T_F / A, which equals I / beta whenever both are defined and stays
    defined when the instance records no FLOPs.

    Args:
        instance: the iteration.

    Returns:
        f in [0, 1] (dimensionless); 1.0 if A = 0.
    """
    a = instance.A
    if a <= 0:
        return 1.0
    return min(1.0, instance.link.d2h_bytes_per_s * instance.forward_time_s / a)


def forward_link_budget_bytes(instance: Instance, guard: float = DEFAULT_GUARD) -> int:
    """Forward link budget: bytes the link can copy out during the forward pass with a guard,
    (1 - g) * W * T_F (section 2.2 and section 3; spec "Totals", 0.98 * W * T_F).

    Args:
        instance: the iteration.
        guard: share g of the forward time left free, in [0, 1).

    Returns:
        The budget in bytes (int, rounded down).

    Raises:
        ValueError: if ``guard`` is not a finite number in [0, 1).
    """
    if isinstance(guard, bool) or not isinstance(guard, (int, float)) \
            or not math.isfinite(guard) or not 0 <= guard < 1:
        raise ValueError(f"guard must be a number in [0, 1), got {guard!r}")
    return int(math.floor((1.0 - guard) * instance.link.d2h_bytes_per_s
                          * instance.forward_time_s))


def report(instance: Instance, guard: float = DEFAULT_GUARD) -> dict[str, Any]:
    """Everything the ``describe`` command shows about the link budget, as plain numbers.

    Args:
        instance: the iteration.
        guard: offload guard g for the forward link budget, in [0, 1).

    Returns:
        A dict with ``name``, ``link``, ``link_bytes_per_s`` (the W of Eq. 1: the D2H
        bandwidth, B/s), ``link_h2d_bytes_per_s`` (B/s), ``saved_bytes`` (A),
        ``peak_bytes`` (P), ``forward_time_s`` (T_F), ``ideal_time_s`` (ideal step T*),
        ``forward_flops`` (F), ``intensity`` (I, FLOP/B), ``beta`` (FLOP/B),
        ``hideable_fraction`` (f), ``hideable_bytes`` (min(A, W T_F)), ``guard`` (g) and
        ``forward_link_budget_bytes`` ((1 - g) W T_F). ``intensity`` and ``beta`` may be
        ``inf`` for degenerate instances (see the functions).

    Raises:
        ValueError: if ``guard`` is out of range.
    """
    w = instance.link.d2h_bytes_per_s
    return {
        "name": instance.name,
        "link": instance.link.name,
        "link_bytes_per_s": float(w),
        "link_h2d_bytes_per_s": float(instance.link.h2d_bytes_per_s),
        "saved_bytes": int(instance.A),
        "peak_bytes": int(instance.P),
        "forward_time_s": float(instance.forward_time_s),
        "ideal_time_s": float(instance.ideal_time_s),
        "forward_flops": float(instance.forward_flops),
        "intensity": intensity(instance),
        "beta": beta(instance),
        "hideable_fraction": hideable_fraction(instance),
        "hideable_bytes": int(min(instance.A, math.floor(w * instance.forward_time_s))),
        "guard": float(guard),
        "forward_link_budget_bytes": forward_link_budget_bytes(instance, guard),
    }


__all__ = ["DEFAULT_GUARD", "intensity", "beta", "hideable_fraction",
           "forward_link_budget_bytes", "report"]
