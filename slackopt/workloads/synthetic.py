"""Synthetic linear chains: small, seeded instances for tests and teaching.

Not from the paper; a chain is the simplest graph with the paper's trade-off (section 3.1):
every layer saves one activation that the backward pass reads, each rebuildable by
re-running its layer from the previous activation. Units: bytes, FLOPs, seconds.
"""

from __future__ import annotations

import numpy as np

from slackopt.hardware import GPU, Link
from slackopt.instance import Instance, Recipe
from slackopt.workloads._builder import (
    GraphBuilder,
    WorkloadError,
    check_int,
    instance_name,
    make_meta,
    resolve_hardware,
)

DEFAULTS = dict(n_layers=8, seed=0, min_bytes=16_000_000, max_bytes=256_000_000,
                min_flops=1e10, max_flops=2e11, bwd_factor=2.0)
"""Default parameters of :func:`chain`."""


def chain(n_layers: int = 8, *, seed: int = 0, gpu: str | GPU = "a100",
          link: str | Link | None = None, min_bytes: int = 16_000_000,
          max_bytes: int = 256_000_000, min_flops: float = 1e10, max_flops: float = 2e11,
          bwd_factor: float = 2.0) -> Instance:
    """A linear chain of ``n_layers`` layers with random activation sizes and FLOPs.

    Structure: ``input`` (zero duration) produces ``x`` (saved, c = inf); layer i's
    forward op ``L{i}.f`` reads the previous activation and produces ``L{i}.a`` (saved,
    recipe: re-run ``L{i}.f`` from the previous activation); ``loss`` reads the last
    activation. Backward: ``loss.bwd`` reads the last activation and writes its gradient;
    ``L{i}.b`` (i = n-1 ... 0) reads the gradient of its output and its input activation
    and writes the gradient of its input (none for layer 0). Every forward op of layer i
    and its backward op have ``layer = i``.

    Sizes are uniform integers in [min_bytes, max_bytes] (bytes), forward FLOPs uniform in
    [min_flops, max_flops]; op time is the GPU's roofline (GEMM efficiency, bytes = input
    + output), backward FLOPs are ``bwd_factor`` x forward. Draws come from
    ``numpy.random.default_rng(seed)`` in a fixed order, so one seed gives one instance.

    Args:
        n_layers: layers (>= 1).
        seed: random seed (int >= 0).
        gpu: GPU preset name or :class:`GPU`.
        link: host-link preset name, :class:`Link`, or None for the GPU's default.
        min_bytes, max_bytes: activation size range (bytes, 0 <= min <= max).
        min_flops, max_flops: forward FLOPs range per layer (0 <= min <= max).
        bwd_factor: backward FLOPs per forward FLOP (>= 0).

    Returns:
        The validated :class:`Instance` named like ``"chain8-seed0_a100-pcie4"``.

    Raises:
        KeyError: unknown GPU or link preset.
        WorkloadError: a parameter out of range.
    """
    g, lk = resolve_hardware(gpu, link)
    n = check_int("n_layers", n_layers)
    seed = check_int("seed", seed, minimum=0)
    lo_b, hi_b = check_int("min_bytes", min_bytes, 0), check_int("max_bytes", max_bytes, 0)
    if lo_b > hi_b:
        raise WorkloadError(f"min_bytes {lo_b} > max_bytes {hi_b}")
    if not (0 <= min_flops <= max_flops) or not np.isfinite(max_flops):
        raise WorkloadError(f"need 0 <= min_flops <= max_flops < inf, got "
                            f"{min_flops!r}, {max_flops!r}")
    if not (np.isfinite(bwd_factor) and bwd_factor >= 0):
        raise WorkloadError(f"bwd_factor must be finite and >= 0, got {bwd_factor!r}")

    rng = np.random.default_rng(seed)
    sizes = rng.integers(lo_b, hi_b, size=n + 1, endpoint=True)  # [0] is the input x
    flops = rng.uniform(min_flops, max_flops, size=n)

    b = GraphBuilder(g)
    prev = b.tensor("x", int(sizes[0]), b.op("input", "fwd", kind="input", duration_s=0.0),
                    category="block_input")
    acts = [prev]
    for i in range(n):
        op = b.op(f"L{i}.f", "fwd", kind="gemm", layer=i, flops=float(flops[i]),
                  bytes_moved=int(sizes[i] + sizes[i + 1]), reads=[prev])
        prev = b.tensor(f"L{i}.a", int(sizes[i + 1]), op, category="act_out",
                        recipe=Recipe((op,), (prev,)))
        acts.append(prev)
    b.mem_op("loss", "fwd", kind="loss", layer=-1, bytes_moved=int(sizes[n]), reads=[prev])
    lb = b.mem_op("loss.bwd", "bwd", kind="loss", layer=-1, bytes_moved=2 * int(sizes[n]),
                  reads=[prev])
    grad = b.tensor(f"d_L{n - 1}.a", int(sizes[n]), lb, category="grad")
    for i in reversed(range(n)):
        op = b.op(f"L{i}.b", "bwd", kind="gemm", layer=i, flops=bwd_factor * float(flops[i]),
                  bytes_moved=int(2 * sizes[i] + sizes[i + 1]), reads=[grad, acts[i]])
        if i > 0:
            grad = b.tensor(f"d_{acts[i]}", int(sizes[i]), op, category="grad")
    params = dict(n_layers=n, seed=seed, min_bytes=lo_b, max_bytes=hi_b,
                  min_flops=float(min_flops), max_flops=float(max_flops),
                  bwd_factor=float(bwd_factor))
    shown = {"seed": seed}
    shown.update({k: v for k, v in params.items()
                  if k not in ("n_layers", "seed") and v != DEFAULTS[k]})
    return b.build(instance_name(f"chain{n}", g, lk, shown), lk,
                   make_meta("chain", params, g, lk))


__all__ = ["chain", "DEFAULTS"]
