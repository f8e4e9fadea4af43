"""What every family shares around its graph: parameter checks, hardware, and the name
and meta of the instance it builds."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from slackopt.hardware import GPU, Link
from slackopt.instance import Instance
from slackopt.workloads._builder import (
    WorkloadError,
    check_int,
    instance_name,
    make_meta,
    overrides_of,
    resolve_hardware,
)
from slackopt.workloads.shapes.net import _Net


def _check_float(name: str, value: Any, lo: float, hi: float) -> float:
    """``value`` as a float in (lo, hi], else :class:`WorkloadError`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and lo < value <= hi):
        raise WorkloadError(f"parameter '{name}' must be a number in ({lo:g}, {hi:g}], "
                            f"got {value!r}")
    return float(value)


def _int_in(name: str, value: Any, lo: int, hi: int) -> int:
    """``value`` as an int in [lo, hi], else :class:`WorkloadError`."""
    v = check_int(name, value, minimum=lo)
    if v > hi:
        raise WorkloadError(f"parameter '{name}' must be in [{lo}, {hi}], got {v}")
    return v


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise WorkloadError(f"parameter '{name}' must be true or false, got {value!r}")
    return value


def _side(name: str, value: Any, multiple: int) -> int:
    v = check_int(name, value)
    if v % multiple:
        raise WorkloadError(f"parameter '{name}' must be a multiple of {multiple} (the "
                            f"network halves it {int(math.log2(multiple))} times), got {v}")
    return v


def _setup(gpu: str | GPU, link: str | Link | None, batch: Any,
           dtype_bytes: Any) -> tuple[GPU, Link, int, int]:
    g, lk = resolve_hardware(gpu, link)
    batch = check_int("batch", batch)
    dt = check_int("dtype_bytes", g.dtype_bytes if dtype_bytes is None else dtype_bytes)
    return g, lk, batch, dt


def _finish(net: _Net, family: str, stem: str, g: GPU, lk: Link, params: dict[str, Any],
            defaults: dict[str, Any], hidden: Sequence[str],
            first: dict[str, Any] | None = None) -> Instance:
    """Name, meta, build. The name is ``shapes-<stem>[-<param><value>...]_<gpu>-<link>``
    with the parameters that differ from `defaults` (`first` always, ahead of them); a
    flag set to true shows as its name alone (``-bn``; ``rebuild_block_inputs`` as
    ``-rebuild``)."""
    shown = dict(first or {})
    diff = overrides_of({k: v for k, v in params.items() if k not in hidden},
                        dict(defaults, dtype_bytes=g.dtype_bytes))
    for k, v in diff.items():
        if isinstance(v, bool):
            if v:
                shown["rebuild" if k == "rebuild_block_inputs" else k] = ""
        else:
            shown[k] = v
    return net.build(instance_name(f"shapes-{stem}", g, lk, shown), lk,
                     make_meta(f"shapes-{family}", params, g, lk))
