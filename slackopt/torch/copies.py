"""Host buffers and copies between the device and the host, for swapped tensors.

On the CPU copies are plain synchronous copies. On CUDA they follow the stream semantics
of PyTorch's "CUDA semantics" documentation (streams, events, ``Tensor.record_stream``,
pinned memory, ``non_blocking`` copies): each direction runs on its own side stream
after an event of the compute stream, a prefetch buffer is allocated on the compute
stream (the caching allocator accounts it there, as the evaluator does), and
``record_stream`` marks the copy stream as a user of the block, so the allocator hands a
freed block out again only once the copy has read or written it. That delays the block's
*reuse* (``torch.cuda.memory_reserved``), not its bytes in
``torch.cuda.memory_allocated``, which drop when the last tensor over the block goes. The
CPU test suite does not run the CUDA paths (no GPU in CI); ``benchmarks/gpu_check.py``
does, on a CUDA machine.
"""

from __future__ import annotations

import bisect
from typing import Any

import torch

from slackopt.instance import Instance
from slackopt.plan import SWAP, Plan
from slackopt.torch.errors import PlanRuntimeError


class HostPool:
    """Host buffers for swapped storages, carved from one allocation made once (pinned
    when the device is CUDA), reused by every step that is given the pool.

    First fit over ``[0, capacity)`` with 512-byte aligned slices. On CUDA a freed slice
    remembers the events of the copies that last used it (merged blocks keep all of them);
    the next D2H into it waits for those events on its stream.

    Args:
        capacity: bytes (>= 0): the host pinned-memory limit of the instance when it has
            one, else the bytes the plan swaps.
        pin: page-lock the buffer (CUDA only).

    Raises:
        PlanRuntimeError: a request does not fit (the plan holds more host bytes at once
            than the pool has).
    """

    ALIGN = 512

    def __init__(self, capacity: int, *, pin: bool = False) -> None:
        self.capacity = int(capacity)
        self.buffer = torch.empty(self.capacity, dtype=torch.uint8, pin_memory=pin)
        self._free: list[list[Any]] = [[0, self.capacity, []]]  # offset, size, events

    def take(self, nbytes: int) -> tuple[Any, int, list[Any]]:
        """A slice of `nbytes`: (byte tensor view, offset, CUDA events to wait for)."""
        need = -(-int(nbytes) // self.ALIGN) * self.ALIGN
        for i, (off, size, ev) in enumerate(self._free):
            if size >= need:
                if size == need:
                    self._free.pop(i)
                else:
                    self._free[i] = [off + need, size - need, list(ev)]
                return self.buffer[off: off + int(nbytes)], off, ev
        raise PlanRuntimeError(
            f"the host pool ({self.capacity} B) has no free {need} B slice: the plan holds "
            "more host bytes at once than the pool was made for (pass a larger HostPool)")

    def give(self, offset: int, nbytes: int, event: Any = None) -> None:
        """Return a slice (`event`: the CUDA event of the last copy using it, or None)."""
        need = -(-int(nbytes) // self.ALIGN) * self.ALIGN
        if need == 0:
            return
        bisect.insort(self._free, [offset, need, [event] if event is not None else []],
                      key=lambda blk: blk[0])
        merged: list[list[Any]] = []
        for blk in self._free:
            if merged and merged[-1][0] + merged[-1][1] == blk[0]:
                merged[-1][1] += blk[1]
                merged[-1][2] = merged[-1][2] + blk[2]
            else:
                merged.append(blk)
        self._free = merged


def host_pool_bytes(instance: Instance, plan: Plan) -> int:
    """The pool a plan needs: the instance's host pinned-memory limit if set, else the
    swapped bytes, each rounded up to :attr:`HostPool.ALIGN`."""
    a = HostPool.ALIGN
    total = sum(-(-int(instance.tensor(n).size_bytes) // a) * a
                for n, d in zip(plan.names, plan.decisions, strict=True) if d == SWAP)
    if instance.host_memory_bytes is not None:
        return min(total, -(-int(instance.host_memory_bytes) // a) * a)
    return total


def bytes_of(st: Any) -> Any:
    """A uint8 tensor over a whole untyped storage."""
    return torch.empty(0, dtype=torch.uint8, device=st.device).set_(st)


def copy_d2h(src_st: Any, host: Any, stream: Any, wait: list[Any]) -> Any:
    """Copy a device storage into a host slice (a uint8 tensor of its size).

    Args:
        src_st: the device storage (untyped).
        host: the host slice (:meth:`HostPool.take`).
        stream: the D2H side stream (CUDA; None on CPU).
        wait: CUDA events of copies that last used the host slice.

    Returns:
        The CUDA event of the copy's end (None on CPU, where the copy is done).
    """
    src = bytes_of(src_st)
    if src.device.type != "cuda":
        host.copy_(src)
        return None
    ready = torch.cuda.Event()
    ready.record(torch.cuda.current_stream(src.device))
    stream.wait_event(ready)
    for ev in wait:  # copies that last used this host slice
        stream.wait_event(ev)
    with torch.cuda.stream(stream):
        host.copy_(src, non_blocking=True)
        done = torch.cuda.Event()
        done.record(stream)
    src.record_stream(stream)  # the block is not reused before the copy has read it
    return done


def copy_h2d(host: Any, device: Any, stream: Any, d2h_done: Any) -> tuple[Any, Any, Any]:
    """A new device buffer filled from a host slice. The buffer is allocated on the compute
    (current) stream, so the caching allocator accounts it there, as the evaluator does.

    Args:
        host: the host slice.
        device: the device (a ``torch.device``).
        stream: the H2D side stream (CUDA; None on CPU).
        d2h_done: the CUDA event of the offload that filled the slice, or None.

    Returns:
        (storage, event of the copy's end or None on CPU, the allocating stream or None).
    """
    if device.type != "cuda":
        return host.clone().untyped_storage(), None, None
    comp = torch.cuda.current_stream(device)
    buf = torch.empty(host.numel(), dtype=torch.uint8, device=device)
    ready = torch.cuda.Event()
    ready.record(comp)
    stream.wait_event(ready)
    if d2h_done is not None:
        stream.wait_event(d2h_done)
    with torch.cuda.stream(stream):
        buf.copy_(host, non_blocking=True)
        done = torch.cuda.Event()
        done.record(stream)
    buf.record_stream(stream)
    return buf.untyped_storage(), done, comp


__all__ = ["HostPool", "bytes_of", "copy_d2h", "copy_h2d", "host_pool_bytes"]
