"""Every device block the runtime allocates, from its allocation until it is really free.

The runtime's own count (``RuntimeReport.memory_timeline``) sums the storages it
references. A storage is free only when nothing holds it any more: the autograd node
that runs holds the saved tensors it unpacked until it returns, the model's code holds its
local variables, and on CUDA the caching allocator hands a freed block out again only once
every stream ``record_stream`` named has finished with it (that delays reuse,
``torch.cuda.memory_reserved``; the bytes leave ``torch.cuda.memory_allocated`` when the
last tensor over the block goes). :class:`BlockLedger` keeps, for every block the runtime
allocates or takes over (a saved tensor's storage from its producer, a prefetch buffer, a
rebuilt storage):

- the task at which it was allocated and the task at which the runtime dropped its
  reference;
- the first task at which the storage was seen freed (a weak reference to it is checked
  at every allocation point, so on CPU and on CUDA alike it sees what the allocator sees);
- each copy stream that uses it, until that use has ended in the simulated order (the
  schedule's ``d2h_end`` and ``h2d_end`` actions).

At each point where the simulation's memory grows (a task starts, a prefetch is
admitted: :class:`slackopt.simulate.ActionSchedule`) the runtime calls :meth:`sample`
with the evaluator's bytes in use there; the ledger adds the bytes of the blocks held past
their drop (not yet freed, or a copy stream's use not yet ended) and keeps the largest
sum, the *accounted peak*. It is the simulated peak exactly when no block outlives the
point where the evaluator freed it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch.multiprocessing.reductions import StorageWeakRef

BLOCK_KINDS = ("produced", "prefetched", "rebuilt")
"""A saved tensor's storage made by its producer in the forward pass; a prefetch buffer an
H2D filled; a storage a recompute rebuilt."""


@dataclass
class Block:
    """One device block the runtime managed.

    Attributes:
        tensor: the saved tensor (its name in the instance, lowered to storages).
        kind: one of :data:`BLOCK_KINDS`.
        nbytes: its bytes.
        allocated_at: the task (position in the task list) at or before which it was
            allocated.
        dropped_at: the task before which the runtime dropped its reference (None: held to
            the end of the step).
        freed_at: the first task at which the storage was seen freed (None: not seen).
        pending: copy streams ("d2h", "h2d") whose use of it has not ended in the
            simulated order.
        held_past_drop: the last task at which it was still held (not freed, or a copy's
            use pending) after the runtime had dropped it; -1 if never.
    """

    tensor: str
    kind: str
    nbytes: int
    allocated_at: int
    dropped_at: int | None = None
    freed_at: int | None = None
    pending: set[str] = field(default_factory=set)
    held_past_drop: int = -1


class BlockLedger:
    """The lifetime of every block a runtime manages (see the module docstring).

    Usage: :meth:`allocate` when the runtime takes a storage, :meth:`use` when a copy
    stream starts using it, :meth:`end_use` when that use ends in the simulated order,
    :meth:`drop` when the runtime lets it go, :meth:`sample` at every allocation point
    (after the runtime has performed the actions before it). :attr:`task` is the task
    the runtime is at (it sets it).
    """

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.task = 0
        self.accounted_peak_bytes = 0
        self._live: dict[int, Block] = {}
        self._gone: list[tuple[Block, Any]] = []
        self._of: dict[str, list[Block]] = {}

    def allocate(self, tensor: str, kind: str, storage: Any) -> Block:
        """Register `storage` (untyped) as a block of saved tensor `tensor`; a storage
        already registered is its block."""
        key = storage._cdata
        blk = self._live.get(key)
        if blk is None:
            blk = Block(tensor, kind, int(storage.nbytes()), self.task)
            self._live[key] = blk
            self.blocks.append(blk)
            self._of.setdefault(tensor, []).append(blk)
        return blk

    def use(self, storage: Any, stream: str) -> None:
        """A copy on `stream` ("d2h" or "h2d") starts using the block of `storage`."""
        self._live[storage._cdata].pending.add(stream)

    def end_use(self, tensor: str, stream: str) -> None:
        """The copy on `stream` of saved tensor `tensor` has ended (simulated order): its
        latest block using `stream` is done with it."""
        for blk in reversed(self._of.get(tensor, ())):
            if stream in blk.pending:
                blk.pending.discard(stream)
                return

    def drop(self, storage: Any) -> None:
        """The runtime lets go of `storage`; it stays held until it is freed and its copy
        streams are done."""
        blk = self._live.pop(storage._cdata, None)
        if blk is None:
            return
        blk.dropped_at = self.task
        self._gone.append((blk, StorageWeakRef(storage)))

    def held(self) -> list[Block]:
        """The blocks dropped by the runtime and still held now (not freed, or a copy
        stream's use pending); notes the task at which each one dropped was first seen
        freed."""
        out = []
        keep = []
        for blk, ref in self._gone:
            alive = not ref.expired()
            if not alive and blk.freed_at is None:
                blk.freed_at = self.task
            if alive or blk.pending:
                out.append(blk)
                keep.append((blk, ref))
        self._gone = keep
        return out

    def sample(self, used_bytes: int) -> int:
        """An allocation point where the evaluator holds `used_bytes`: returns the bytes
        held past their drop, and raises the accounted peak to their sum with
        `used_bytes` if that is larger."""
        late = self.held()
        extra = sum(b.nbytes for b in late)
        for b in late:
            b.held_past_drop = self.task
        self.accounted_peak_bytes = max(self.accounted_peak_bytes, int(used_bytes) + extra)
        return extra

    def late_blocks(self) -> list[dict[str, Any]]:
        """The blocks held past their drop at some allocation point, as dicts (tensor,
        kind, bytes, dropped_at, held_until)."""
        return [{"tensor": b.tensor, "kind": b.kind, "bytes": b.nbytes,
                 "dropped_at": b.dropped_at, "held_until": b.held_past_drop}
                for b in self.blocks if b.held_past_drop >= 0]


__all__ = ["BLOCK_KINDS", "Block", "BlockLedger"]
