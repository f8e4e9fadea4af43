"""Shared machinery of the workload generators (private).

:class:`GraphBuilder` accumulates ops (timed by :func:`slackopt.hardware.roofline_s`) and
tensors with mutable reader lists, then freezes them into an :class:`Instance`.
:func:`resolve_hardware` turns GPU/link names into presets and :func:`instance_name` /
:func:`make_meta` give every generated instance the same naming and provenance.

Source: docs/workloads.md ("Hardware", "Operator conventions") and
docs/model.md ("Instance", "Transient buffers").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from slackopt.errors import SlackoptError
from slackopt.hardware import GEMM_EFF, GPU, MEM_EFF, Link, roofline_s
from slackopt.hardware import gpu as _gpu
from slackopt.hardware import link as _link
from slackopt.instance import Instance, Op, Recipe, Tensor

MASK_BYTES_PER_ELEMENT = 1
"""A dropout mask stores one byte per element (docs/workloads.md, GPT-2: mask = h B/token)."""

RNG_STATE_BYTES = 8
"""Bytes of the RNG state (seed + offset) a dropout saves to regenerate its mask
(docs/model.md, "Transient buffers")."""

LSE_BYTES_PER_HEAD = 4
"""FlashAttention saves one FP32 logsumexp per head and token (GPT-2: 25 heads -> 100 B/token)."""


class WorkloadError(SlackoptError, ValueError):
    """A workload parameter is unknown to the generator or has a value it cannot build."""


def resolve_hardware(gpu: str | GPU = "a100", link: str | Link | None = None) -> tuple[GPU, Link]:
    """Resolve GPU and link presets.

    Args:
        gpu: a preset name of :data:`slackopt.hardware.GPUS` or a :class:`GPU`.
        link: a preset name of :data:`slackopt.hardware.LINKS`, a :class:`Link`, or None
            for the GPU's default link (``GPU.default_link``).

    Returns:
        (GPU, Link).

    Raises:
        KeyError: an unknown GPU or link name; the message lists the presets.
    """
    g = gpu if isinstance(gpu, GPU) else _gpu(str(gpu))
    if link is None:
        lk = _link(g.default_link)
    elif isinstance(link, Link):
        lk = link
    else:
        lk = _link(str(link))
    return g, lk


def instance_name(workload: str, g: GPU, lk: Link, overrides: Mapping[str, Any]) -> str:
    """``"<workload>[-<param><value>...]_<gpu>-<link>"``, e.g. ``"gpt2-xl_a100-pcie4"``.

    Only parameters that differ from the generator's defaults appear, in the given order
    (``"llama-7b-seq2048_a100-pcie4"``).
    """
    suffix = "".join(f"-{k}{v}" for k, v in overrides.items())
    return f"{workload}{suffix}_{g.name}-{lk.name}"


def make_meta(workload: str, params: Mapping[str, Any], g: GPU, lk: Link) -> dict[str, Any]:
    """Provenance stored in ``Instance.meta``: generator name, resolved parameters, GPU, link."""
    return {"generator": workload, "params": dict(params), "gpu": g.name, "link": lk.name}


def overrides_of(params: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters whose value differs from ``defaults`` (None defaults are 'derived')."""
    out = {}
    for k, v in params.items():
        d = defaults.get(k)
        if d is not None and v != d:
            out[k] = v
    return out


MAX_PARAM = 2**24
"""Largest value of an integer workload parameter (hidden size, sequence, batch, ...)."""
MAX_LAYERS = 4096
"""Largest number of blocks a generator builds (the instance grows linearly with it)."""
_LIMITS = {"layers": MAX_LAYERS, "n_layers": MAX_LAYERS, "min_bytes": 2**53, "max_bytes": 2**53}


def check_int(name: str, value: Any, minimum: int = 1) -> int:
    """Return ``value`` as an int in [minimum, limit] or raise :class:`WorkloadError`.

    The limit is MAX_LAYERS for layer counts and MAX_PARAM otherwise: larger models do not
    exist and would exhaust memory while the instance is built.
    """
    maximum = _LIMITS.get(name, MAX_PARAM)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise WorkloadError(f"parameter '{name}' must be an integer in [{minimum}, {maximum}], "
                            f"got {value!r}")
    return int(value)


class GraphBuilder:
    """Accumulates ops and tensors of one iteration in execution order.

    Args:
        gpu: the GPU whose roofline times the ops.

    Ops are added in schedule order (all forward, then all backward); rebuild-only ops
    (phase "rebuild") may be added at any time and are appended after the schedule.
    """

    def __init__(self, gpu: GPU) -> None:
        self.gpu = gpu
        self._ops: list[Op] = []
        self._rebuild: list[Op] = []
        self._tensors: dict[str, dict[str, Any]] = {}

    # ---------------------------------------------------------------- ops
    def op(
        self,
        name: str,
        phase: str,
        *,
        kind: str,
        layer: int = -1,
        flops: float = 0.0,
        bytes_moved: float = 0.0,
        efficiency: float = GEMM_EFF,
        reads: Iterable[str] = (),
        duration_s: float | None = None,
        workspace_bytes: int = 0,
        random: bool = False,
    ) -> str:
        """Add an op timed by the roofline (unless ``duration_s`` is given); it reads
        ``reads`` (tensor names, which gain it as a reader). Returns the op's name."""
        if duration_s is None:
            duration_s = roofline_s(self.gpu, flops, bytes_moved, efficiency)
        op = Op(name=name, phase=phase, duration_s=float(duration_s), layer=layer, kind=kind,
                workspace_bytes=int(workspace_bytes), flops=float(flops), random=random)
        (self._rebuild if phase == "rebuild" else self._ops).append(op)
        for t in reads:
            rd = self._tensors[t]["readers"]
            if name not in rd:
                rd.append(name)
        return name

    def mem_op(self, name: str, phase: str, *, kind: str, layer: int, bytes_moved: float,
               reads: Iterable[str] = (), random: bool = False) -> str:
        """A memory-bound op charged ``bytes_moved`` (read + written) at 85% of HBM."""
        return self.op(name, phase, kind=kind, layer=layer, bytes_moved=bytes_moved,
                       efficiency=MEM_EFF, reads=reads, random=random)

    # ---------------------------------------------------------------- tensors
    def tensor(
        self,
        name: str,
        size_bytes: float,
        producer: str,
        *,
        category: str,
        recipe: Recipe | None = None,
    ) -> str:
        """Add a tensor produced by ``producer``; readers are added by later ops."""
        if name in self._tensors:
            raise ValueError(f"duplicate tensor '{name}'")  # generator bug
        self._tensors[name] = {"size": int(round(size_bytes)), "producer": producer,
                               "readers": [], "recipe": recipe, "category": category}
        return name

    def read(self, tensor: str, op: str) -> None:
        """Add ``op`` as a reader of ``tensor`` (for ops added before the tensor's reader)."""
        rd = self._tensors[tensor]["readers"]
        if op not in rd:
            rd.append(op)

    # ---------------------------------------------------------------- result
    def build(self, name: str, link: Link, meta: Mapping[str, Any]) -> Instance:
        """Freeze into an :class:`Instance` (validated by its constructor)."""
        tensors = [
            Tensor(name=k, size_bytes=v["size"], producer=v["producer"],
                   readers=tuple(v["readers"]), recipe=v["recipe"], category=v["category"])
            for k, v in self._tensors.items()
        ]
        return Instance(name, self._ops + self._rebuild, tensors, link, meta=meta)


__all__ = ["GraphBuilder", "WorkloadError", "resolve_hardware", "instance_name", "make_meta",
           "overrides_of", "check_int", "MASK_BYTES_PER_ELEMENT", "RNG_STATE_BYTES",
           "LSE_BYTES_PER_HEAD"]
