"""GPU and host-link presets and the roofline operator-time model.

Source: docs/workloads.md ("Hardware") and section 4.1 of the SlackSwap paper.
Operator time = launch + max(FLOPs / (efficiency * peak), bytes / (0.85 * HBM bandwidth)).
Units: FLOP/s, bytes/s, seconds, bytes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

LAUNCH_S = 5e-6
"""Per-kernel launch overhead (s)."""

COPY_LATENCY_S = 10e-6
"""Fixed cost of one host<->device copy (s)."""

DUPLEX_FACTOR = 0.85
"""Share of the per-direction link bandwidth each direction gets while both are busy."""

GEMM_EFF = 0.75
ATTN_FWD_EFF = 0.62
ATTN_BWD_EFF = 0.48
MEM_EFF = 0.85


@dataclass(frozen=True, slots=True)
class GPU:
    """A GPU preset.

    Attributes:
        name: preset name ("a100").
        peak_flops: peak FLOP/s in the training dtype.
        hbm_bytes_per_s: HBM bandwidth (B/s).
        dtype_bytes: bytes per element of the training dtype (2 for BF16, 4 for FP32).
        default_link: name of the host-link preset the GPU ships with.
    """

    name: str
    peak_flops: float
    hbm_bytes_per_s: float
    dtype_bytes: int
    default_link: str


@dataclass(frozen=True, slots=True)
class Link:
    """Host link of an instance: what the evaluator needs to time copies.

    Attributes:
        name: preset or free-form name ("pcie4").
        bytes_per_s: bandwidth W per direction (B/s), > 0.
        duplex_factor: share of W each direction gets while both directions copy (0-1].
        copy_latency_s: fixed cost of every copy (s), >= 0.
    """

    name: str
    bytes_per_s: float
    duplex_factor: float = DUPLEX_FACTOR
    copy_latency_s: float = COPY_LATENCY_S

    def to_dict(self) -> dict:
        return asdict(self)


GPUS: dict[str, GPU] = {
    "titanx": GPU("titanx", 7e12, 336.5e9, 4, "pcie3-titanx"),
    "v100": GPU("v100", 125e12, 0.9e12, 2, "pcie3"),
    "a100": GPU("a100", 312e12, 2.039e12, 2, "pcie4"),
    "h100": GPU("h100", 989.4e12, 3.35e12, 2, "pcie5"),
}
"""GPU presets of docs/workloads.md (datasheet peaks)."""

LINKS: dict[str, float] = {
    "pcie3": 12e9,
    "pcie3-titanx": 12.8e9,
    "pcie4": 25e9,
    "pcie5": 50e9,
    "nvlink-c2c": 450e9,
}
"""Host-link presets: bandwidth per direction (B/s)."""


def gpu(name: str) -> GPU:
    """Return the GPU preset `name`; raises KeyError listing the presets."""
    try:
        return GPUS[name]
    except KeyError:
        raise KeyError(f"unknown GPU '{name}'; presets: {', '.join(GPUS)}") from None


def link(name: str) -> Link:
    """Return the Link preset `name` with the default duplex factor and copy latency."""
    try:
        return Link(name, LINKS[name])
    except KeyError:
        raise KeyError(f"unknown link '{name}'; presets: {', '.join(LINKS)}") from None


def roofline_s(
    g: GPU, flops: float = 0.0, bytes_moved: float = 0.0, efficiency: float = GEMM_EFF
) -> float:
    """Roofline time of one kernel (s).

    Args:
        g: the GPU.
        flops: floating-point operations of the kernel.
        bytes_moved: HBM bytes read plus written.
        efficiency: sustained share of peak FLOP/s for this kernel class.

    Returns:
        LAUNCH_S + max(flops / (efficiency * peak), bytes / (MEM_EFF * HBM)).
    """
    compute = flops / (efficiency * g.peak_flops) if flops else 0.0
    memory = bytes_moved / (MEM_EFF * g.hbm_bytes_per_s) if bytes_moved else 0.0
    return LAUNCH_S + max(compute, memory)
