"""GPU and host-link presets and the roofline operator-time model.

Source: docs/workloads.md ("Hardware") and section 4.1 of the SlackSwap paper for the
paper's presets (titanx, v100, a100, h100; pcie3, pcie4, pcie5, nvlink-c2c); today's
presets (h200, b200, gh200, gb200; pcie5-measured, gh200-c2c, gb200-c2c) give their
sources where they are defined.
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
        peak_flops_by_dtype: peak FLOP/s per compute dtype (``(("float32", 19.5e12),
            ...)``; names as ``torch.dtype`` prints them without ``torch.``), used by
            :func:`roofline_s` when the kernel's dtype is known; a dtype not listed uses
            ``peak_flops``.
        host_memory_bytes: the host memory a superchip attaches to the GPU by design
            (Grace's LPDDR5X on GH200 and GB200, bytes; for GB200 the share of one GPU),
            None for a GPU in a server of any size. ``--host-memory gpu`` of ``slackopt
            make`` and ``slackopt profile`` (:func:`host_memory_limit`) makes it the
            instance's pinned-host limit (``Instance.host_memory_bytes``); it is never
            applied otherwise.
    """

    name: str
    peak_flops: float
    hbm_bytes_per_s: float
    dtype_bytes: int
    default_link: str
    peak_flops_by_dtype: tuple[tuple[str, float], ...] = ()
    host_memory_bytes: int | None = None

    def peak_for(self, dtype: str | None) -> float:
        """Peak FLOP/s for kernels computing in `dtype` (None: ``peak_flops``)."""
        for name, peak in self.peak_flops_by_dtype:
            if name == dtype:
                return peak
        return self.peak_flops


@dataclass(frozen=True, slots=True, init=False)
class Link:
    """Host link of an instance: what the evaluator needs to time copies.

    Each direction has its own bandwidth (docs/model.md, "Hardware"): a D2H copy
    (offload) moves its bytes at ``d2h_bytes_per_s``, an H2D copy (prefetch) at
    ``h2d_bytes_per_s``, each at ``duplex_factor`` times its own bandwidth while a copy in
    the other direction is in flight (:func:`slackopt.simulate.rules.copy_rate`).

    ``Link(name, W)`` (or ``bytes_per_s=W``) is a symmetric link, W both ways;
    ``Link(name, d2h_bytes_per_s=Wd, h2d_bytes_per_s=Wh)`` an asymmetric one. Giving
    ``bytes_per_s`` with a direction is allowed only if the values agree.

    Attributes:
        name: preset or free-form name ("pcie4").
        d2h_bytes_per_s: device-to-host bandwidth W_d2h (B/s), > 0.
        h2d_bytes_per_s: host-to-device bandwidth W_h2d (B/s), > 0.
        duplex_factor: share of its own bandwidth each direction gets while both
            directions copy (0-1].
        copy_latency_s: fixed cost of every copy (s), >= 0.

    Raises:
        InstanceError: only one direction given without ``bytes_per_s``, no bandwidth at
            all, or ``bytes_per_s`` and a direction that disagree (the field names the
            direction). Values are checked by :class:`~slackopt.instance.Instance`.
    """

    name: str
    d2h_bytes_per_s: float
    h2d_bytes_per_s: float
    duplex_factor: float
    copy_latency_s: float

    def __init__(self, name: str, bytes_per_s: float | None = None,
                 duplex_factor: float = DUPLEX_FACTOR, copy_latency_s: float = COPY_LATENCY_S,
                 *, d2h_bytes_per_s: float | None = None,
                 h2d_bytes_per_s: float | None = None) -> None:
        from slackopt.errors import InstanceError

        d, h = d2h_bytes_per_s, h2d_bytes_per_s
        if bytes_per_s is None and d is None and h is None:
            raise InstanceError(f"link '{name}': no bandwidth", "link.bytes_per_s",
                                "give bytes_per_s (B/s, both directions), or "
                                "d2h_bytes_per_s and h2d_bytes_per_s")
        for key, v in (("d2h_bytes_per_s", d), ("h2d_bytes_per_s", h)):
            if v is None and bytes_per_s is None:
                other = "h2d_bytes_per_s" if key == "d2h_bytes_per_s" else "d2h_bytes_per_s"
                raise InstanceError(
                    f"link '{name}': no {key} (only {other} is given)", f"link.{key}",
                    "give both d2h_bytes_per_s and h2d_bytes_per_s (B/s), or one bytes_per_s "
                    "for both directions")
            if v is not None and bytes_per_s is not None and v != bytes_per_s:
                raise InstanceError(
                    f"link '{name}': {key} = {v!r} disagrees with bytes_per_s = "
                    f"{bytes_per_s!r}", f"link.{key}",
                    "give bytes_per_s alone (both directions equal) or the two directions "
                    "alone")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "d2h_bytes_per_s", bytes_per_s if d is None else d)
        object.__setattr__(self, "h2d_bytes_per_s", bytes_per_s if h is None else h)
        object.__setattr__(self, "duplex_factor", duplex_factor)
        object.__setattr__(self, "copy_latency_s", copy_latency_s)

    @property
    def symmetric(self) -> bool:
        """Whether both directions have the same bandwidth."""
        return self.d2h_bytes_per_s == self.h2d_bytes_per_s

    @property
    def bytes_per_s(self) -> float:
        """The bandwidth of a symmetric link (B/s), both directions; kept for code written
        before links had two.

        Raises:
            ValueError: the directions differ (read ``d2h_bytes_per_s`` or
                ``h2d_bytes_per_s``).
        """
        if not self.symmetric:
            raise ValueError(f"link '{self.name}' has D2H {self.d2h_bytes_per_s!r} B/s and "
                             f"H2D {self.h2d_bytes_per_s!r} B/s: read d2h_bytes_per_s or "
                             "h2d_bytes_per_s")
        return self.d2h_bytes_per_s

    def to_dict(self) -> dict:
        """The fields as a dict (``name``, both bandwidths, duplex factor, latency)."""
        return asdict(self)


GPUS: dict[str, GPU] = {
    "titanx": GPU("titanx", 7e12, 336.5e9, 4, "pcie3-titanx"),
    "v100": GPU("v100", 125e12, 0.9e12, 2, "pcie3",
                (("float16", 125e12), ("float32", 15.7e12))),
    "a100": GPU("a100", 312e12, 2.039e12, 2, "pcie4",
                (("bfloat16", 312e12), ("float16", 312e12), ("float32", 19.5e12))),
    "h100": GPU("h100", 989.4e12, 3.35e12, 2, "pcie5",
                (("bfloat16", 989.4e12), ("float16", 989.4e12), ("float32", 66.9e12))),
    # H200 SXM: the H100's GH100 die with 141 GB of HBM3e at 4.8 TB/s; dense BF16/FP16
    # 989.4 TFLOP/s and FP32 66.9 TFLOP/s as on the H100 (the datasheet's 1,979 TFLOP/s
    # counts 2:4 sparsity). Source: NVIDIA H200 datasheet. Host link: PCIe Gen5.
    "h200": GPU("h200", 989.4e12, 4.8e12, 2, "pcie5-measured",
                (("bfloat16", 989.4e12), ("float16", 989.4e12), ("float32", 66.9e12))),
    # B200 (HGX, 1,000 W): dense BF16/FP16 2.25 PFLOP/s (4.5 with sparsity), FP32
    # 80 TFLOP/s, HBM3e 8 TB/s. Source: NVIDIA Blackwell datasheet (HGX B200: 36 PFLOP/s
    # sparse BF16 and 64 TB/s for 8 GPUs). Host link: the x86 hosts of HGX B200 boards
    # run PCIe Gen5.
    "b200": GPU("b200", 2.25e15, 8e12, 2, "pcie5-measured",
                (("bfloat16", 2.25e15), ("float16", 2.25e15), ("float32", 80e12))),
    # GH200: an H100-class GPU (dense BF16 989.4 TFLOP/s) with 144 GB of HBM3e at
    # 4.9 TB/s, joined to a Grace CPU with 480 GB of LPDDR5X by NVLink-C2C. Source: NVIDIA
    # GH200 datasheet; docs/workloads.md, "Today's hardware".
    "gh200": GPU("gh200", 989.4e12, 4.9e12, 2, "gh200-c2c",
                 (("bfloat16", 989.4e12), ("float16", 989.4e12), ("float32", 66.9e12)),
                 host_memory_bytes=480_000_000_000),
    # GB200: one Grace (480 GB LPDDR5X) and two B200 GPUs at 1,200 W each: dense BF16
    # 2.5 PFLOP/s, FP32 90 TFLOP/s, HBM3e 8 TB/s per GPU. Source: NVIDIA GB200 NVL72
    # datasheet (per-GPU figures). One preset is one GPU: its share of Grace's memory is
    # half, 240 GB.
    "gb200": GPU("gb200", 2.5e15, 8e12, 2, "gb200-c2c",
                 (("bfloat16", 2.5e15), ("float16", 2.5e15), ("float32", 90e12)),
                 host_memory_bytes=240_000_000_000),
}
"""GPU presets (datasheet peaks; ``peak_flops`` is the training dtype's dense tensor-core
peak, FP32 the non-tensor-core peak: PyTorch does not use TF32 for matmuls unless
``torch.backends.cuda.matmul.allow_tf32`` is set). titanx to h100: docs/workloads.md,
"Hardware"; the others: the source beside each."""

LINKS: dict[str, Link] = {
    "pcie3": Link("pcie3", 12e9),
    "pcie3-titanx": Link("pcie3-titanx", 12.8e9),
    "pcie4": Link("pcie4", 25e9),
    "pcie5": Link("pcie5", 50e9),
    "nvlink-c2c": Link("nvlink-c2c", 450e9),
    # PCIe 5.0 x16 as measured: 63 GB/s per direction in the specification, about
    # 51-56 GB/s host-to-device in copies (docs/workloads.md, "Today's hardware") and
    # 52.8 GB/s device-to-host (nvbandwidth device_to_host_memcpy_sm on H100, NVIDIA
    # nvbandwidth issue 24): 53 GB/s both ways.
    "pcie5-measured": Link("pcie5-measured", 53e9),
    # GH200's NVLink-C2C as measured by nvbandwidth (copy engines, 4 x GH200; NVIDIA
    # Megatron-LM issue 6491): host-to-device 411.6-421.1 GB/s, device-to-host
    # 169.9-170.1 GB/s, against 450 GB/s per direction in the specification.
    "gh200-c2c": Link("gh200-c2c", d2h_bytes_per_s=170e9, h2d_bytes_per_s=416e9),
    # GB200's C2C link per GPU: one 900 GB/s link (450 GB/s per direction) between Grace
    # and two B200s. Modelled as half of each direction per GPU, 225 GB/s, since in
    # data-parallel training both GPUs offload and prefetch at the same points of the
    # step. GB300, the same arrangement, measured 211.5 GB/s host-to-device and 193.5 GB/s
    # device-to-host per GPU (Megatron-LM issue 6491); no GB200 measurement is known here.
    "gb200-c2c": Link("gb200-c2c", 225e9),
}
"""Host-link presets, with the default duplex factor and copy latency. pcie3 to nvlink-c2c:
the paper's bandwidths (docs/workloads.md, "Hardware"), the same in both directions;
the others: the source beside each."""


def gpu(name: str) -> GPU:
    """Return the GPU preset `name`; raises KeyError listing the presets."""
    try:
        return GPUS[name]
    except KeyError:
        raise KeyError(f"unknown GPU '{name}'; presets: {', '.join(GPUS)}") from None


def link(name: str) -> Link:
    """Return the Link preset `name`; raises KeyError listing the presets."""
    try:
        return LINKS[name]
    except KeyError:
        raise KeyError(f"unknown link '{name}'; presets: {', '.join(LINKS)}") from None


def roofline_s(
    g: GPU, flops: float = 0.0, bytes_moved: float = 0.0, efficiency: float = GEMM_EFF,
    dtype: str | None = None,
) -> float:
    """Roofline time of one kernel (s).

    Args:
        g: the GPU.
        flops: floating-point operations of the kernel.
        bytes_moved: HBM bytes read plus written.
        efficiency: sustained share of peak FLOP/s for this kernel class.
        dtype: the kernel's compute dtype ("float32", "bfloat16"); None: the GPU's
            training dtype (``g.peak_flops``).

    Returns:
        LAUNCH_S + max(flops / (efficiency * peak), bytes / (MEM_EFF * HBM)), with peak =
        ``g.peak_for(dtype)``.
    """
    compute = flops / (efficiency * g.peak_for(dtype)) if flops else 0.0
    memory = bytes_moved / (MEM_EFF * g.hbm_bytes_per_s) if bytes_moved else 0.0
    return LAUNCH_S + max(compute, memory)


_GPU_FIELDS = {"name": str, "peak_flops": float, "hbm_bytes_per_s": float,
               "dtype_bytes": int, "default_link": str, "peak_flops_by_dtype": dict}


def gpu_from_file(path: str) -> GPU:
    """A GPU read from a JSON file of peaks.

    The file holds one object: ``peak_flops`` (FLOP/s, > 0) and ``hbm_bytes_per_s``
    (B/s, > 0) are required; ``name`` (default: the file's stem), ``dtype_bytes``
    (default 2), ``default_link`` (a link preset, default "pcie4") and
    ``peak_flops_by_dtype`` (``{"float32": 19.5e12, ...}``) are optional. Example::

        {"name": "l4", "peak_flops": 121e12, "hbm_bytes_per_s": 300e9,
         "default_link": "pcie4", "peak_flops_by_dtype": {"float32": 30.3e12}}

    Raises:
        ValueError: the file is missing or not JSON, an unknown or missing field, a value
            of the wrong type or not positive, an unknown link preset (the message names
            the file and the field).
    """
    import json
    from pathlib import Path

    from slackopt.errors import json_problem

    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except OSError as e:
        raise ValueError(f"{path}: cannot read the GPU file ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: {json_problem(e)}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a GPU file holds one JSON object")
    unknown = sorted(set(data) - set(_GPU_FIELDS))
    if unknown:
        raise ValueError(f"{path}: unknown field(s) {', '.join(unknown)}; fields: "
                         f"{', '.join(_GPU_FIELDS)}")
    for f in ("peak_flops", "hbm_bytes_per_s"):
        if f not in data:
            raise ValueError(f"{path}: field '{f}' is required")
    out: dict = {"name": p.stem, "dtype_bytes": 2, "default_link": "pcie4"}
    for f, typ in _GPU_FIELDS.items():
        if f not in data:
            continue
        v = data[f]
        ok = (isinstance(v, (int, float)) and not isinstance(v, bool) if typ is float
              else isinstance(v, typ) and not isinstance(v, bool))
        if not ok:
            raise ValueError(f"{path}: field '{f}' must be {typ.__name__}, got {v!r}")
        out[f] = v
    for f in ("peak_flops", "hbm_bytes_per_s", "dtype_bytes"):
        if not out[f] > 0:
            raise ValueError(f"{path}: field '{f}' must be > 0, got {out[f]!r}")
    if out["default_link"] not in LINKS:
        raise ValueError(f"{path}: field 'default_link' is '{out['default_link']}'; "
                         f"presets: {', '.join(LINKS)}")
    by = out.pop("peak_flops_by_dtype", {})
    for k, v in by.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            raise ValueError(f"{path}: peak_flops_by_dtype['{k}'] must be a number > 0, "
                             f"got {v!r}")
    return GPU(out["name"], float(out["peak_flops"]), float(out["hbm_bytes_per_s"]),
               out["dtype_bytes"], out["default_link"],
               tuple((str(k), float(v)) for k, v in sorted(by.items())))


def host_memory_limit(host: int | str | None, g: GPU | None) -> int | None:
    """The pinned-host limit an instance on `g` gets (``Instance.host_memory_bytes``).

    Args:
        host: a limit in bytes, "gpu" for the host memory `g` attaches by design
            (:attr:`GPU.host_memory_bytes`: Grace's on gh200 and gb200), or None
            (unlimited).
        g: the GPU the instance is timed on (None: none, e.g. a measured CPU profile).

    Returns:
        The limit in bytes, or None for no limit.

    Raises:
        ValueError: "gpu" without a GPU, or for a GPU without host memory of its own
            (names the ones with).
    """
    if host != "gpu":
        return None if host is None else int(host)
    if g is None or g.host_memory_bytes is None:
        own = ", ".join(n for n, x in GPUS.items() if x.host_memory_bytes is not None)
        raise ValueError(f"GPU '{g.name}' has no host memory of its own (only superchips "
                         f"do: {own}); give the limit in bytes" if g is not None else
                         f"host memory 'gpu' needs a GPU preset with host memory of its "
                         f"own ({own}); give one, or the limit in bytes")
    return g.host_memory_bytes


def resolve_gpu(spec: str) -> GPU:
    """A GPU preset name ("a100") or the path of a JSON file of peaks
    (:func:`gpu_from_file`; any spec ending in ``.json`` or naming an existing file).

    Raises:
        KeyError: an unknown preset (lists the presets).
        ValueError: a bad GPU file.
    """
    import os

    if spec.endswith(".json") or os.path.isfile(spec):
        return gpu_from_file(spec)
    return gpu(spec)
