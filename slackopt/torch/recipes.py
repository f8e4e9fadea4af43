"""Recorded ATen calls that the runtime re-runs to rebuild a recomputed tensor.

While the forward pass runs, the runtime records each call of a recomp tensor's recipe
(:class:`RecordedCall`): the overload, its arguments with every tensor replaced by a
reference (:class:`ActivationArg` for an activation storage, :class:`ConstArg` for a
persistent tensor, :class:`ShapeArg` for a tensor read only for its shape), and the RNG
states just before a random call. No activation data is kept. Rebuilding runs the calls
in order under ``torch.no_grad()``; a call's outputs go into an environment keyed by
storage, so later calls of the same recipe read them, and recipe inputs are the saved
tensors' current device storages. A random call runs inside ``torch.random.fork_rng``
with the recorded states restored, so it draws what it drew in the forward pass and the
global RNG is left as it was.

Source: ``torch.utils.checkpoint`` (re-running ops with a saved RNG state).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import tree_unflatten

from slackopt.torch.errors import PlanRuntimeError


@dataclass(frozen=True, slots=True)
class Geometry:
    """Where a tensor lies in its storage: dtype, shape, strides, offset (elements)."""

    dtype: Any
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int

    @staticmethod
    def of(t: Any) -> Geometry:
        """The geometry of tensor `t`."""
        return Geometry(t.dtype, tuple(t.shape), tuple(t.stride()), int(t.storage_offset()))


def storage_view(storage: Any, g: Geometry) -> Any:
    """A tensor with geometry `g` over an untyped storage."""
    t = torch.empty(0, dtype=g.dtype, device=storage.device)
    return t.set_(storage, g.offset, g.size, g.stride)


@dataclass(frozen=True, slots=True)
class ConstArg:
    """A persistent tensor argument: held as is."""

    tensor: Any


@dataclass(frozen=True, slots=True)
class ShapeArg:
    """An argument read only for its shape: a fresh uninitialised tensor of that layout."""

    size: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: Any
    device: Any


@dataclass(frozen=True, slots=True)
class ActivationArg:
    """An activation argument: storage `key` with geometry `geom`. `record` (an object
    with a ``storage()`` method giving the device storage now) when the storage is a saved
    tensor, a recipe input; None when the same recipe rebuilds it."""

    key: int
    geom: Geometry
    record: Any


@dataclass(slots=True)
class RecordedCall:
    """One recorded ATen call of a recipe: the overload, the argument tree's spec and
    leaves (tensors replaced by the references above), the storage key of each output
    leaf (None for a non-tensor), and for a random call the CPU and per-CUDA-device RNG
    states just before it."""

    func: Any
    spec: Any
    leaves: list[Any]
    out_keys: list[int | None]
    cpu_rng: Any = None
    cuda_rng: dict[int, Any] | None = None

    def run(self, env: dict[int, Any]) -> Any:
        """Run the call on the storages of `env` (storage key -> untyped storage) and the
        recipe inputs' current storages; returns its outputs."""
        leaves = [resolve_arg(x, env) for x in self.leaves]
        args, kwargs = tree_unflatten(leaves, self.spec)
        if self.cpu_rng is None:
            return self.func(*args, **kwargs)
        devs = sorted(self.cuda_rng or {})
        with torch.random.fork_rng(devices=devs, device_type="cuda"):
            torch.set_rng_state(self.cpu_rng)
            for d, st in (self.cuda_rng or {}).items():
                torch.cuda.set_rng_state(st, d)
            return self.func(*args, **kwargs)


def resolve_arg(x: Any, env: dict[int, Any]) -> Any:
    """The value of one recorded argument: a view of its storage (from `env`, else the
    saved tensor's device storage), the persistent tensor, a fresh tensor of a shape-only
    argument's layout, or the non-tensor argument itself.

    Raises:
        PlanRuntimeError: an activation that is neither saved nor rebuilt by the recipe
            (an internal error).
    """
    if isinstance(x, ActivationArg):
        st = env.get(x.key)
        if st is None:
            if x.record is None:
                raise PlanRuntimeError(
                    "internal: a recipe reads a storage that is neither saved nor rebuilt "
                    "by the recipe")
            st = x.record.storage()
        return storage_view(st, x.geom)
    if isinstance(x, ConstArg):
        return x.tensor
    if isinstance(x, ShapeArg):
        return torch.empty_strided(x.size, x.stride, dtype=x.dtype, device=x.device)
    return x


__all__ = ["ActivationArg", "ConstArg", "Geometry", "RecordedCall", "ShapeArg",
           "resolve_arg", "storage_view"]
