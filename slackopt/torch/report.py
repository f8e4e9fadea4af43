"""What one planned step did, next to what the evaluator said it would do."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class RuntimeReport:
    """What one planned step did, next to what the evaluator said it would do.

    Attributes:
        device: where the step ran ("cpu", "cuda:0").
        budget_bytes: M the plan was executed under (bytes).
        forced: an infeasible plan was run anyway (its schedule taken without a memory
            limit); ``matches_plan`` is then False.
        d2h_bytes: bytes copied out (device to host); dropped offloads move none.
        h2d_bytes: bytes copied back (host to device), re-fetches after evictions included.
        swapped: D2H copies made. fetched: H2D copies made. dropped_d2h: offloads dropped
            because no reader was left (rule 2). claimed: lagging device copies a reader
            used instead of an H2D (rule 3 / lagging offload). evictions: device copies
            freed to make room.
        rebuilt: storages rebuilt by recompute; rebuilt_bytes: their bytes; rebuild_ops:
            ATen calls re-run.
        kept: saved storages kept in place.
        unplanned_saves: storages autograd saved that the instance does not list as saved
            (kept; should be 0).
        planned: the plan's decision counts.
        simulated: the evaluator's figures for the same plan and M (d2h_bytes, h2d_bytes,
            evictions, rebuilt, peak_bytes, step_time_s).
        memory_timeline: per task of the task list, the bytes of the saved storages the
            runtime held once the task had started (kept, swapped device copies, prefetch
            buffers, rebuilt storages).
        simulated_timeline: the evaluator's saved bytes at the same points
            (``slackopt.simulate.ActionSchedule.saved_timeline``).
        off_schedule: places where the step left the schedule (a reader needed a tensor
            the schedule had not brought, a backward op that differs); empty when it
            followed it.
        extra_backward_ops: backward ATen calls that write into a ``.grad`` that existed
            before the step (gradient accumulation; the profile runs without it); they are
            not tasks and move nothing.
        step_time_s: wall time of the forward and backward pass (s; GPU synchronised).
        peak_bytes: peak device memory allocated during the step above the allocation
            before it (``torch.cuda.max_memory_allocated``; bytes; CUDA only, else None).
        reserved_peak_bytes: peak device memory the caching allocator reserved during the
            step above what it reserved before (``torch.cuda.max_memory_reserved``; bytes;
            CUDA only, else None): allocated bytes plus the cached blocks the allocator
            cannot hand out yet (blocks waiting for their copy streams among them).
        accounted_peak_bytes: the evaluator's peak with every block held until it was
            really free (:class:`slackopt.torch.blocks.BlockLedger`: the evaluator's bytes
            in use at each task start and admitted prefetch, plus the blocks the runtime
            had dropped that a tensor still held or a copy still used there; bytes).
            Equal to ``simulated["peak_bytes"]`` when nothing outlives its free.
        held_past_drop: those blocks (tensor, kind, bytes, the task before which the
            runtime dropped it, the last task at which it was still held).
        loss: the loss value (a pipeline stage: the sum of its microbatches' losses).
        unmanaged: tensors planned swap or recomp that autograd never saved through the
            hooks: they stayed in place.
        still_resident: swapped or recomputed tensors whose device storage was still alive
            after the forward pass (each forward unit's, in a pipeline stage) although the
            runtime had freed it during that pass (something outside autograd holds them,
            so dropping them saved no memory).
    """

    device: str
    budget_bytes: int = 0
    forced: bool = False
    d2h_bytes: int = 0
    h2d_bytes: int = 0
    swapped: int = 0
    fetched: int = 0
    dropped_d2h: int = 0
    claimed: int = 0
    evictions: int = 0
    rebuilt: int = 0
    rebuilt_bytes: int = 0
    rebuild_ops: int = 0
    kept: int = 0
    unplanned_saves: int = 0
    planned: dict[str, int] = field(default_factory=dict)
    simulated: dict[str, Any] = field(default_factory=dict)
    memory_timeline: list[int] = field(default_factory=list)
    simulated_timeline: list[int] = field(default_factory=list)
    off_schedule: list[str] = field(default_factory=list)
    extra_backward_ops: int = 0
    step_time_s: float = 0.0
    peak_bytes: int | None = None
    reserved_peak_bytes: int | None = None
    accounted_peak_bytes: int = 0
    held_past_drop: list[dict[str, Any]] = field(default_factory=list)
    loss: float | None = None
    still_resident: list[str] = field(default_factory=list)
    unmanaged: list[str] = field(default_factory=list)

    def timeline_max_diff_bytes(self) -> int | None:
        """Largest per-task difference between the runtime's and the evaluator's saved
        bytes; None if the timelines have different lengths."""
        a, b = self.memory_timeline, self.simulated_timeline
        if len(a) != len(b):
            return None
        return max((abs(x - y) for x, y in zip(a, b, strict=True)), default=0)

    def matches_plan(self) -> bool:
        """The step did what the evaluator simulated: the same D2H and H2D bytes, the same
        evictions, the same rebuilds, the same saved bytes on the device after every task
        (exactly: both count the same storages at the same task boundaries), every
        dropped tensor really freed (``still_resident`` empty), every planned tensor
        managed, no step off the schedule, not forced."""
        sim = self.simulated
        return (not self.forced and not self.off_schedule and not self.still_resident
                and not self.unmanaged
                and self.d2h_bytes == sim.get("d2h_bytes")
                and self.h2d_bytes == sim.get("h2d_bytes")
                and self.evictions == sim.get("evictions")
                and self.rebuilt == sim.get("rebuilt")
                and self.timeline_max_diff_bytes() == 0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (with ``matches_plan`` and ``timeline_max_diff_bytes``)."""
        return {**asdict(self), "matches_plan": self.matches_plan(),
                "timeline_max_diff_bytes": self.timeline_max_diff_bytes()}


# ----------------------------------------------------------------------------- references


__all__ = ["RuntimeReport"]
