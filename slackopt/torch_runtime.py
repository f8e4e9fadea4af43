"""Execute a plan on the real PyTorch module with the evaluator's runtime policy.

The plan that runs is the plan that was simulated. :func:`runtime_schedule` runs the
evaluator's own barrier-free event loop (:class:`slackopt.simulate._engine.Engine`,
docs/model.md "Plan semantics under the barrier-free runtime") on the profiled instance at
budget M, and logs, by position in the compute stream's task list
(:func:`slackopt.simulate.build_tasks`), every action it takes: D2H at production in FIFO
order, dropped D2Hs of tensors with no reader left, H2D by first need under the admission
rule (used + size + the next three tasks' allocations <= M) with no head-of-line blocking,
lagging device copies claimed together, evictions when an allocation does not fit,
releases; the host pinned-memory limit is the evaluator's too (a plan it refuses is
infeasible). :class:`PlanRuntime` replays those actions at the same places in the real
step and runs the task list's rebuild tasks in its order:

- **Matching.** A ``TorchDispatchMode`` numbers the forward ATen calls exactly as
  :func:`slackopt.profile.profile_step` did (and checks them), so each storage autograd
  saves is matched to its instance tensor; a second mode numbers the backward calls, so
  the runtime knows which task runs next. Pack hooks
  (``torch.autograd.graph.saved_tensors_hooks``) hand autograd a geometry instead of the
  data for swapped and recomputed tensors; unpack hooks return the view of the storage the
  schedule brought back.
- **keep**: held from production to the end of its last backward reader.
- **swap**: the device storage is held from production until the schedule frees it (D2H
  ended and forward readers done); its bytes go to a slice of one host buffer
  (:class:`HostPool`, pinned on CUDA, allocated once and reusable across steps); the H2D
  allocates a device buffer when the schedule admits it; an eviction drops that buffer and
  the schedule fetches it again later.
- **recomp**: the runtime records the ATen calls of the tensor's recipe while the forward
  pass runs (with the RNG state just before each random call) and keeps no data; the
  rebuild task re-runs them under ``torch.no_grad()``, with the saved RNG state restored
  inside ``torch.random.fork_rng`` so the global RNG is untouched.

After every task the runtime sums the bytes of the saved storages it holds; the
:class:`RuntimeReport` puts that timeline beside the evaluator's, and
:meth:`RuntimeReport.matches_plan` requires them equal op by op, with the same D2H and H2D
bytes, evictions and rebuilds. On CPU the copies are synchronous, so the two timelines
agree exactly (tolerance 0 bytes): both count the same storages' sizes at the same task
boundaries. On CUDA the actions are issued at the same places, asynchronously: copies run
on two side streams after events of the compute stream, buffers are allocated on the
compute stream, ``record_stream`` marks every stream that uses a block (so a freed block
is reused only after its copies), prefetch state is changed under a lock (autograd runs
the backward pass in its own threads). The schedule is positional, not timed: where the
GPU's durations differ from the profile's, a copy the evaluator expected to be done may
still run, and the compute stream waits for it (``torch.cuda.max_memory_allocated`` can
then exceed the bookkeeping by the blocks whose copies are still in flight).
``benchmarks/gpu_check.py`` runs these paths on a CUDA machine; the CPU test suite cannot.

Limits: both passes run under a Python dispatch mode, which adds tens of microseconds
per ATen call (visible on small models, small next to large GPU kernels); a model that
installs its own saved-tensor hooks (``torch.utils.checkpoint``, ``save_on_cpu``)
overrides these for its region.

Gradients: swapped and recomputed tensors come back bit for bit (copies of the same bytes;
the same kernels on the same inputs, strides and RNG state), so on CPU a planned step gives
the unplanned step's gradients exactly; the tests check this.

Sources: docs/model.md (the policy); PyTorch documentation of
``torch.autograd.graph.saved_tensors_hooks`` (and ``save_on_cpu``, which this
generalises), ``TorchDispatchMode``, "CUDA semantics" (streams, events,
``Tensor.record_stream``, pinned memory); ``torch.utils.checkpoint`` for re-running ops
with a saved RNG state.
"""

from __future__ import annotations

import bisect
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

try:
    import torch
    from torch.multiprocessing.reductions import StorageWeakRef
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten, tree_unflatten
except ImportError:  # pragma: no cover - without torch, say how to install it
    import slackopt.profile  # noqa: F401  (raises MissingTorchError with the install hint)

    raise

from slackopt.errors import SlackoptError
from slackopt.instance import Instance
from slackopt.plan import DECISION_NAMES, KEEP, RECOMP, SWAP, Plan
from slackopt.profile import (
    OpRec,
    StepTracer,
    _refuse_compiled,
    as_model_inputs,
    is_view_op,
    op_label,
    run_loss,
    storage_of,
    written_tensors,
)
from slackopt.simulate._engine import _DEV, _FETCH, _FWD, Engine


class PlanRuntimeError(SlackoptError, RuntimeError):
    """The step does not match the profiled instance, or the plan cannot be executed."""


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
            (:attr:`RuntimeSchedule.saved_timeline`).
        off_schedule: places where the step left the schedule (a reader needed a tensor
            the schedule had not brought, a backward op that differs); empty when it
            followed it.
        extra_backward_ops: backward ATen calls that write into a ``.grad`` that existed
            before the step (gradient accumulation; the profile runs without it); they are
            not tasks and move nothing.
        step_time_s: wall time of the forward and backward pass (s; GPU synchronised).
        peak_bytes: peak device memory allocated during the step above the allocation
            before it (``torch.cuda.max_memory_allocated``; bytes; CUDA only, else None).
        loss: the loss value.
        unmanaged: tensors planned swap or recomp that autograd never saved through the
            hooks: they stayed in place.
        still_resident: swapped or recomputed tensors whose device storage was still alive
            after the forward pass although the runtime had freed it (something outside
            autograd holds them, so dropping them saved no memory).
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
@dataclass(frozen=True, slots=True)
class _Geom:
    dtype: Any
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int

    @staticmethod
    def of(t: Any) -> _Geom:
        return _Geom(t.dtype, tuple(t.shape), tuple(t.stride()), int(t.storage_offset()))


def _view(storage: Any, g: _Geom) -> Any:
    """A tensor with geometry `g` over an untyped storage."""
    t = torch.empty(0, dtype=g.dtype, device=storage.device)
    return t.set_(storage, g.offset, g.size, g.stride)


@dataclass(frozen=True, slots=True)
class _Const:
    """A persistent tensor argument: held as is."""

    tensor: Any


@dataclass(frozen=True, slots=True)
class _Meta:
    """An argument read only for its shape: a fresh uninitialised tensor of that layout."""

    size: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: Any
    device: Any


@dataclass(frozen=True, slots=True)
class _Act:
    """An activation argument: storage `key` with geometry `geom`; `record` when the
    storage is a saved tensor (a recipe input), else it is rebuilt in the same recipe."""

    key: int
    geom: _Geom
    record: _Record | None


@dataclass(slots=True)
class _Call:
    """One recorded ATen call of a recipe."""

    func: Any
    spec: Any
    leaves: list[Any]
    out_keys: list[int | None]
    cpu_rng: Any = None
    cuda_rng: dict[int, Any] | None = None

    def run(self, env: dict[int, Any]) -> Any:
        leaves = [_resolve(x, env) for x in self.leaves]
        args, kwargs = tree_unflatten(leaves, self.spec)
        if self.cpu_rng is None:
            return self.func(*args, **kwargs)
        devs = sorted(self.cuda_rng or {})
        with torch.random.fork_rng(devices=devs, device_type="cuda"):
            torch.set_rng_state(self.cpu_rng)
            for d, st in (self.cuda_rng or {}).items():
                torch.cuda.set_rng_state(st, d)
            return self.func(*args, **kwargs)


def _resolve(x: Any, env: dict[int, Any]) -> Any:
    if isinstance(x, _Act):
        st = env.get(x.key)
        if st is None:
            if x.record is None:
                raise PlanRuntimeError(
                    "internal: a recipe reads a storage that is neither saved nor rebuilt "
                    "by the recipe")
            st = x.record.storage()
        return _view(st, x.geom)
    if isinstance(x, _Const):
        return x.tensor
    if isinstance(x, _Meta):
        return torch.empty_strided(x.size, x.stride, dtype=x.dtype, device=x.device)
    return x


# ----------------------------------------------------------------------------- schedule
class _ScheduleRecorder(Engine):
    """The evaluator's barrier-free event loop, unchanged, with its hooks logging what the
    runtime must do and where: each action is tagged with the number of compute tasks
    started before it (tag j: after task j-1 started, before task j starts)."""

    def __init__(self, inst: Instance, plan: Plan, M: int) -> None:
        self.events: list[tuple[int, str, int]] = []
        self.saved_timeline: list[int] = []
        self.started = 0
        self._fetching: set[int] = set()
        self._d2h_cur: list[Any] | None = None
        super().__init__(inst, plan, M, False)

    # The loop starts a D2H by assigning ``self.d2h``; a property sees it.
    @property  # type: ignore[override]
    def d2h(self) -> list[Any] | None:
        return self._d2h_cur

    @d2h.setter
    def d2h(self, v: list[Any] | None) -> None:
        if v is not None:
            self.events.append((self.started, "d2h", int(v[0])))
        self._d2h_cur = v

    def on_task_start(self, k: int) -> None:
        self.started = k + 1
        st, s = self.state, self.st.s
        self.saved_timeline.append(sum(s[t] for t in range(len(st))
                                       if st[t] in (_FWD, _DEV, _FETCH)))

    def _start_h2d(self, t: int) -> None:
        self.events.append((self.started, "h2d", t))
        self._fetching.add(t)
        super()._start_h2d(t)

    def on_arrived(self, t: int) -> None:
        if t in self._fetching:
            self._fetching.discard(t)
        else:  # a lagging D2H: the reader uses the device copy, no H2D
            self.events.append((self.started, "claim", t))

    def to_host(self, t: int) -> None:
        self.events.append((self.started, "to_host", t))
        super().to_host(t)

    def on_d2h_dropped(self, t: int) -> None:
        self.events.append((self.started, "drop", t))

    def trace_evict(self, t: int) -> None:
        self.events.append((self.started, "evict", t))

    def _end_task(self) -> None:
        k = self.k
        op = self.task_op[k]
        if 0 <= op < self.n_fwd:
            for t in self.fwd_rel[op]:
                if self.dec[t] == RECOMP:
                    self.events.append((self.started, "fwd_free", t))
        for t in self.release[k]:
            self.events.append((self.started, "release", t))
        super()._end_task()


@dataclass
class RuntimeSchedule:
    """What the barrier-free runtime does for one plan at budget M, as the evaluator's event
    loop decided it (:class:`slackopt.simulate._engine.Engine`, run on the profiled
    durations and link; docs/model.md, "Plan semantics under the barrier-free runtime").

    Attributes:
        budget_bytes: M (bytes).
        evaluation: the evaluator's :class:`~slackopt.simulate.Evaluation` of that run.
        task_op, task_t: the compute-stream task list (:func:`slackopt.simulate.build_tasks`).
        events: ``(tag, kind, saved position)`` in simulated-time order; tag j = the action
            comes after task j-1 started and before task j starts. Kinds: ``d2h`` (an
            offload starts), ``to_host`` (the device copy is freed: D2H and forward readers
            done), ``drop`` (a queued D2H dropped, rule 2), ``h2d`` (a prefetch admitted:
            its buffer is allocated), ``claim`` (a lagging device copy used, rule 3),
            ``evict``, ``fwd_free`` (a recomp tensor's last forward reader ended),
            ``release`` (the last backward reader ended).
        saved_timeline: per task, the saved-tensor bytes on the device when it has started
            (saved, prefetched and rebuilt storages; transient buffers excluded).
        saved_names: the names of the saved positions.
    """

    budget_bytes: int
    evaluation: Any
    task_op: list[int]
    task_t: list[int]
    events: list[tuple[int, str, int]]
    saved_timeline: list[int]
    saved_names: list[str]


def runtime_schedule(instance: Instance, plan: Plan, budget_bytes: int) -> RuntimeSchedule:
    """Run the evaluator's barrier-free loop on `plan` at M = `budget_bytes` and keep what
    the runtime needs to replay it (see :class:`RuntimeSchedule`).

    The evaluator's decisions are taken as they are: D2H at production in FIFO order, H2D
    by first need with the admission rule against M, no head-of-line blocking, dropped
    D2Hs, lagging copies claimed together, evictions, the host-memory limit. Only the
    policy ``barrier_free`` is executable.

    Raises:
        PlanError: the plan does not fit the instance.
        PlanRuntimeError: the plan names another runtime policy.
    """
    plan.check(instance)
    if plan.policy != "barrier_free":
        raise PlanRuntimeError(
            f"the PyTorch runtime executes barrier_free plans; this plan names "
            f"'{plan.policy}' (use plan.with_policy('barrier_free'))")
    inst, p = instance, plan
    if instance.saved_unit is not None:
        inst, p = instance.lowered, plan.lowered(instance)
    rec = _ScheduleRecorder(inst, p, int(budget_bytes))
    ev = rec.run()
    return RuntimeSchedule(int(budget_bytes), ev, list(rec.task_op), list(rec.task_t),
                           rec.events, rec.saved_timeline, list(inst.saved_names))


# ----------------------------------------------------------------------------- host pool
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


# ----------------------------------------------------------------------------- records
class _Record:
    """The runtime state of one saved storage (shared by every saved view of it).

    ``orig`` is the storage produced in the forward pass (held from production until the
    schedule frees it), ``dev`` the storage readers use in the backward pass (a prefetch
    buffer, a rebuilt storage, or ``orig`` itself for a kept tensor or a claimed lagging
    copy), ``host`` the host slice of a swapped one."""

    __slots__ = ("rt", "pos", "name", "decision", "nbytes", "orig", "dev", "host", "host_off",
                 "d2h_done", "h2d_done", "alloc_stream", "streams", "recipe", "packed",
                 "last_read")

    def __init__(self, rt: PlanRuntime, pos: int, name: str, decision: int) -> None:
        self.rt = rt
        self.pos = pos
        self.name = name
        self.decision = decision
        self.nbytes = int(rt.sizes[name])
        self.orig: Any = None
        self.dev: Any = None
        self.host: Any = None
        self.host_off = -1
        self.d2h_done: Any = None     # CUDA events
        self.h2d_done: Any = None
        self.last_read: Any = None    # CUDA: event after the last H2D read of the host slice
        self.alloc_stream: Any = None
        self.streams: set[Any] = set()
        self.recipe: list[_Call] | None = None
        self.packed = False

    def storage(self) -> Any:
        """The device storage a backward reader or a recipe uses now. On CUDA the current
        stream waits for the H2D copy, and ``record_stream`` tells the allocator every
        stream that uses the block."""
        if self.decision == KEEP:
            st = self.orig
        else:
            st = self.dev
            if st is None:
                st = self.rt.off_schedule(self)
        if st is None:
            raise PlanRuntimeError(f"internal: saved tensor '{self.name}' is not on the device")
        if st.device.type == "cuda":
            cur = torch.cuda.current_stream(st.device)
            if self.h2d_done is not None:
                cur.wait_event(self.h2d_done)
            if self.alloc_stream is not None and cur != self.alloc_stream \
                    and cur not in self.streams:
                _bytes_of(st).record_stream(cur)
                self.streams.add(cur)
        return st


def _bytes_of(st: Any) -> Any:
    """A uint8 tensor over a whole untyped storage."""
    return torch.empty(0, dtype=torch.uint8, device=st.device).set_(st)


# ----------------------------------------------------------------------------- copies
# CPU: plain synchronous copies. CUDA: written to the stream semantics of the PyTorch
# "CUDA semantics" documentation (streams, events, record_stream, pinned memory and
# non_blocking copies); the CPU test suite does not run them (no GPU in CI);
# benchmarks/gpu_check.py does, on a CUDA machine.
def _copy_d2h(src_st: Any, host: Any, stream: Any, wait: list[Any]) -> Any:
    """Copy a device storage into a host slice; returns the CUDA event of the copy's end
    (None on CPU)."""
    src = _bytes_of(src_st)
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


def _copy_h2d(host: Any, device: Any, stream: Any, d2h_done: Any) -> tuple[Any, Any, Any]:
    """A new device buffer filled from a host slice. The buffer is allocated on the compute
    (current) stream, so the caching allocator accounts it there, as the evaluator does.

    Returns (storage, event of the copy's end or None on CPU, the allocating stream or None).
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


@dataclass(slots=True)
class _Handle:
    """What autograd stores for one saved view: the record and the view's geometry (or,
    for a kept tensor, the detached alias itself)."""

    record: _Record | None
    tensor: Any = None
    geom: _Geom | None = None


class _RuntimeTracer(StepTracer):
    """Forward-pass tracer of the runtime: checks the op sequence against the instance,
    names storages like the profile, records the calls that recipes re-run."""

    def __init__(self, rt: PlanRuntime) -> None:
        super().__init__()
        self.rt = rt

    def _before(self, index: int, name: str, func: Any, args: Any, kwargs: Any) -> Any:
        rt = self.rt
        if index >= rt.instance.n_fwd or rt.op_names[index] != name:
            want = rt.op_names[index] if index < rt.instance.n_fwd else "the end of the forward"
            raise PlanRuntimeError(
                f"forward op #{index} is '{name}' but the profile has '{want}': the step "
                "differs from the profiled one (same model, input shapes, dtypes, device and "
                "train/eval mode needed)")
        rt.advance(index)
        if index in rt.capture_ops and torch.Tag.nondeterministic_seeded in func.tags:
            cuda = {}
            for x in tree_flatten((args, kwargs))[0]:
                dev = (x.device if isinstance(x, torch.Tensor) else
                       x if isinstance(x, torch.device) else None)
                if dev is not None and dev.type == "cuda":
                    i = dev.index if dev.index is not None else torch.cuda.current_device()
                    if i not in cuda:
                        cuda[i] = torch.cuda.get_rng_state(i)
            return (torch.get_rng_state(), cuda)
        return None

    def _after(self, rec: OpRec, args: Any, kwargs: Any, out: Any, token: Any) -> None:
        rt = self.rt
        for k in rec.outputs:
            st = self.storages[k]
            want = rt.sizes.get(st.name)
            if want is not None and want != st.nbytes:
                raise PlanRuntimeError(
                    f"tensor '{st.name}' has {st.nbytes} bytes but {want} in the profile: the "
                    "step differs from the profiled one (other input shapes or dtypes?)")
            rt.names[k] = st.name
            rt.key_by_name[st.name] = k
        if rec.index in rt.prod_at:
            live: dict[int, Any] = {}
            for x in tree_flatten((args, kwargs, out))[0]:
                s = storage_of(x) if isinstance(x, torch.Tensor) else None
                if s is not None:
                    live[s._cdata] = s
            rt.produced(rec.index, live)
        rt._task_done()
        if rec.index not in rt.capture_ops:
            return
        leaves, spec = tree_flatten((args, kwargs))
        meta_id = id(args[0]) if rec.meta_reads and args else None
        conv: list[Any] = []
        for x in leaves:
            if not isinstance(x, torch.Tensor) or storage_of(x) is None:
                conv.append(x)
                continue
            k = self.key_of(x)
            s = self.storages[k]
            if id(x) == meta_id:
                conv.append(_Meta(tuple(x.shape), tuple(x.stride()), x.dtype, x.device))
            elif s.persistent:
                conv.append(_Const(x))
            else:
                conv.append(_Act(k, _Geom.of(x), rt.record_for(k)))
        out_keys: list[int | None] = []
        for t in tree_flatten(out)[0]:
            st = storage_of(t)
            out_keys.append(st._cdata if st is not None else None)
        call = _Call(rec.func, spec, conv, out_keys)
        if token is not None:
            call.cpu_rng, call.cuda_rng = token
        rt.calls[rec.index] = call


# ----------------------------------------------------------------------------- runtime
class _BackwardCursor(TorchDispatchMode):
    """Numbers the backward pass's non-view ATen calls as the profiler did, so the runtime
    knows which task is about to run."""

    def __init__(self, rt: PlanRuntime) -> None:
        super().__init__()
        self.rt = rt

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self.rt.paused and not is_view_op(func):
            grads = self.rt.grad_storages
            if grads and any((st := storage_of(t)) is not None and st._cdata in grads
                             for t in written_tensors(func, args, kwargs)):
                self.rt.stats.extra_backward_ops += 1  # accumulation into an existing .grad
            else:
                self.rt.before_backward_op(op_label(func))
        return func(*args, **kwargs)


class PlanRuntime:
    """Runs one training step of a module under a plan, with the evaluator's policy.

    The evaluator's barrier-free loop is run first on the instance (durations, link, M:
    :func:`runtime_schedule`); the step then replays its actions at the same places in the
    compute stream: before task j the runtime performs every action the evaluator took
    after task j-1 started and before task j started (offloads, frees of device copies,
    dropped offloads, admitted prefetches, claimed lagging copies, evictions, releases),
    and runs the rebuild tasks of the task list in order. Forward ops are numbered by the
    forward tracer, backward ops by a dispatch mode over ``loss.backward()``, exactly as
    :func:`slackopt.profile.profile_step` numbered them.

    After each task it samples the bytes of the saved storages it holds (kept, swapped
    device copies, prefetch buffers, rebuilt storages), so ``report().memory_timeline``
    can be compared with the evaluator's ``saved_timeline`` op by op.

    Usage (what :func:`execute_plan` does)::

        rt = PlanRuntime(instance, plan, budget_bytes)
        with rt.forward():
            loss = loss_fn(model(*inputs), *inputs)
        with rt.backward():
            loss.backward()
        report = rt.report()

    One runtime serves one step; the step must run the profiled ATen calls.

    Args:
        instance: the profiled instance (:func:`slackopt.profile.profile_step`).
        plan: a barrier_free plan for it.
        budget_bytes: M (bytes) the plan is executed under.
        force: execute a plan the evaluator finds infeasible at M (its schedule is then
            taken at M = 2**62, without memory pressure); default refuse.
        host_pool: a :class:`HostPool` to reuse (one is made if None).

    Raises:
        PlanError: the plan does not fit the instance.
        PlanRuntimeError: the instance was not made by the profiler; the plan is
            infeasible at M (names the evaluator's failure) and not forced; another policy.
    """

    def __init__(self, instance: Instance, plan: Plan, budget_bytes: int, *,
                 force: bool = False, host_pool: HostPool | None = None) -> None:
        plan.check(instance)
        if instance.meta.get("generator") != "torch-profile":
            raise PlanRuntimeError(
                f"instance '{instance.name}' was not profiled from PyTorch (meta generator "
                f"is {instance.meta.get('generator')!r}); make it with slackopt.profile")
        sched = runtime_schedule(instance, plan, budget_bytes)
        self.forced = False
        if not sched.evaluation.feasible:
            if not force:
                raise PlanRuntimeError(
                    f"the plan is infeasible at M = {budget_bytes} B: "
                    f"{sched.evaluation.failure}. Solve for this budget, or pass force=True "
                    "to run it without the memory limit")
            sched = runtime_schedule(instance, plan, 2**62)
            self.forced = True
        self.schedule = sched
        self.instance = instance
        self.plan = plan
        self.op_names = [op.name for op in instance.ops]
        self.n_fwd = instance.n_fwd
        self.sizes = {t.name: int(t.size_bytes) for t in instance.tensors}
        self.pos_of = {n: i for i, n in enumerate(sched.saved_names)}
        self.decision = {n: int(d) for n, d in zip(plan.names, plan.decisions, strict=True)}
        self.recipe_ops: dict[str, list[int]] = {}
        for k, n in enumerate(instance.saved_names):
            if self.decision[n] == RECOMP:
                self.recipe_ops[n] = [int(i) for i in instance.recipe_ops[k]]
        self.capture_ops = {i for ops in self.recipe_ops.values() for i in ops}
        self.prod_at: dict[int, list[int]] = {}
        for k, n in enumerate(instance.saved_names):
            self.prod_at.setdefault(int(instance.saved_prod_idx[k]), []).append(
                self.pos_of[n])
        self.records = [_Record(self, i, n, self.decision[n])
                        for i, n in enumerate(sched.saved_names)]
        self.names: dict[int, str] = {}
        self.key_by_name: dict[str, int] = {}
        self.calls: dict[int, _Call] = {}
        self.host_pool = host_pool
        self.cursor = 0            # next task of the task list
        self._ev = 0               # next schedule event
        self.paused = False
        self.grad_storages: set[int] = set()
        self.lock = threading.RLock()
        self._streams: dict[tuple[str, Any], Any] = {}
        self._tracer: _RuntimeTracer | None = None
        self._dropped: dict[str, Any] = {}
        self._used = False
        self.stats = RuntimeReport(
            device="cpu", planned=plan.counts(), budget_bytes=sched.budget_bytes,
            forced=self.forced,
            simulated={"d2h_bytes": sched.evaluation.d2h_bytes,
                       "h2d_bytes": sched.evaluation.h2d_bytes,
                       "evictions": sched.evaluation.evictions,
                       "rebuilt": sum(1 for t in sched.task_t if t >= 0),
                       "peak_bytes": sched.evaluation.peak_bytes,
                       "step_time_s": sched.evaluation.step_time_s},
            simulated_timeline=list(sched.saved_timeline))

    # -- streams (CUDA only)
    def _stream(self, kind: str, device: Any) -> Any:
        key = (kind, device)
        if key not in self._streams:
            self._streams[key] = torch.cuda.Stream(device=device)
        return self._streams[key]

    def _pool(self, device: Any) -> HostPool:
        if self.host_pool is None:
            self.host_pool = HostPool(host_pool_bytes(self.instance, self.plan),
                                      pin=device.type == "cuda")
        return self.host_pool

    # -- the schedule
    def advance(self, tag: int) -> None:
        """Perform the schedule's actions tagged <= `tag`, in order."""
        ev = self.schedule.events
        while self._ev < len(ev) and ev[self._ev][0] <= tag:
            _, kind, t = ev[self._ev]
            self._ev += 1
            getattr(self, "_do_" + kind)(self.records[t])

    def _do_d2h(self, rec: _Record) -> None:
        src = rec.orig if rec.orig is not None else rec.dev  # dev: claimed before its D2H
        if src is None:
            raise PlanRuntimeError(f"internal: the device copy of '{rec.name}' is gone before "
                                   "its D2H")
        pool = self._pool(src.device)
        rec.host, rec.host_off, wait = pool.take(rec.nbytes)
        stream = self._stream("d2h", src.device) if src.device.type == "cuda" else None
        rec.d2h_done = _copy_d2h(src, rec.host, stream, wait)
        self.stats.d2h_bytes += rec.nbytes
        self.stats.swapped += 1

    def _do_to_host(self, rec: _Record) -> None:
        if rec.orig is not None and self.cursor <= self.n_fwd:
            self._dropped[rec.name] = StorageWeakRef(rec.orig)
        rec.orig = None

    def _do_drop(self, rec: _Record) -> None:
        self.stats.dropped_d2h += 1

    def _do_h2d(self, rec: _Record) -> None:
        if rec.host is None:
            raise PlanRuntimeError(f"internal: swapped tensor '{rec.name}' has no host copy")
        dev = self.stats_device
        stream = self._stream("h2d", dev) if dev.type == "cuda" else None
        rec.dev, rec.h2d_done, rec.alloc_stream = _copy_h2d(rec.host, dev, stream,
                                                            rec.d2h_done)
        rec.streams = set()
        rec.last_read = rec.h2d_done
        self.stats.h2d_bytes += rec.nbytes
        self.stats.fetched += 1

    def _do_claim(self, rec: _Record) -> None:
        rec.dev, rec.orig = rec.orig, None  # the device copy is now the readers' (and may
        self.stats.claimed += 1             # be evicted like a prefetched one)

    def _do_evict(self, rec: _Record) -> None:
        rec.dev = None
        rec.h2d_done = None
        self.stats.evictions += 1

    def _do_fwd_free(self, rec: _Record) -> None:
        if rec.orig is not None:
            self._dropped[rec.name] = StorageWeakRef(rec.orig)
        rec.orig = None

    def _do_release(self, rec: _Record) -> None:
        rec.orig = rec.dev = None
        rec.h2d_done = None
        if rec.host is not None:
            assert self.host_pool is not None
            self.host_pool.give(rec.host_off, rec.nbytes, rec.last_read or rec.d2h_done)
            rec.host = None

    def held_bytes(self) -> int:
        """Bytes of the distinct saved storages the runtime holds on the device now."""
        seen: dict[int, int] = {}
        for rec in self.records:
            for st in (rec.orig, rec.dev):
                if st is not None:
                    seen[st._cdata] = int(st.nbytes())
        return sum(seen.values())

    def _task_done(self) -> None:
        self.stats.memory_timeline.append(self.held_bytes())
        self.cursor += 1

    def _run_rebuilds(self) -> None:
        """Run the rebuild tasks at the cursor (they precede the next backward op)."""
        sched = self.schedule
        while self.cursor < len(sched.task_t) and sched.task_t[self.cursor] >= 0:
            self.advance(self.cursor)
            self._rebuild(self.records[sched.task_t[self.cursor]])
            self._task_done()

    def _rebuild(self, rec: _Record) -> None:
        if rec.recipe is None:
            raise PlanRuntimeError(f"internal: recomputed tensor '{rec.name}' has no recorded "
                                   "recipe (autograd never saved it)")
        env: dict[int, Any] = {}
        with torch.no_grad():
            for call in rec.recipe:
                out = call.run(env)
                for k, t in zip(call.out_keys, tree_flatten(out)[0], strict=False):
                    if k is not None:
                        env[k] = t.untyped_storage()
                self.stats.rebuild_ops += 1
        key = self.key_by_name.get(rec.name)
        st = env.get(key) if key is not None else None
        if st is None:
            raise PlanRuntimeError(f"internal: the recipe of '{rec.name}' did not rebuild it")
        rec.dev = st
        rec.alloc_stream = None
        self.stats.rebuilt += 1
        self.stats.rebuilt_bytes += int(st.nbytes())

    def off_schedule(self, rec: _Record) -> Any:
        """A reader needs `rec` where the schedule has not brought it: fetch or rebuild it
        now (correct gradients), and note it (``matches_plan`` is then False)."""
        self.stats.off_schedule.append(f"{rec.name}@task{self.cursor}")
        if rec.decision == SWAP:
            if rec.dev is None and rec.orig is not None:
                rec.dev = rec.orig
            elif rec.dev is None:
                self._do_h2d(rec)
        else:
            self._rebuild(rec)
        return rec.dev

    # -- hooks
    def record_for(self, key: int) -> _Record | None:
        """The record of storage `key` if it is a saved tensor of the instance, else None."""
        name = self.names.get(key)
        pos = self.pos_of.get(name) if name is not None else None
        return None if pos is None else self.records[pos]

    def captured(self, index: int) -> _Call:
        call = self.calls.get(index)
        if call is None:
            raise PlanRuntimeError(f"internal: recipe op #{index} was not recorded")
        return call

    def produced(self, index: int, storages: dict[int, Any]) -> None:
        """Forward op `index` has run: hold the saved storages it made final."""
        for t in self.prod_at.get(index, ()):
            rec = self.records[t]
            st = storages.get(self.key_by_name.get(rec.name, -1))
            if st is None:
                raise PlanRuntimeError(f"internal: saved tensor '{rec.name}' not found at its "
                                       "producer")
            rec.orig = st
            if rec.decision == KEEP:
                rec.dev = None

    def _pack(self, t: Any) -> Any:
        tr = self._tracer
        assert tr is not None
        with tr.pause():
            st = storage_of(t)
            rec = self.record_for(st._cdata) if st is not None else None
            if rec is None:
                if st is not None and st._cdata in self.names:
                    self.stats.unplanned_saves += 1
                return _Handle(None, t.detach())
            if not rec.packed:
                rec.packed = True
                if rec.decision == KEEP:
                    self.stats.kept += 1
                elif rec.decision == RECOMP:
                    rec.recipe = [self.captured(i) for i in self.recipe_ops[rec.name]]
            if rec.decision == KEEP:
                return _Handle(rec, t.detach())
            return _Handle(rec, None, _Geom.of(t))

    def _unpack(self, h: _Handle) -> Any:
        rec = h.record
        if rec is None or rec.decision == KEEP:
            return h.tensor
        assert h.geom is not None
        with self.lock:
            old, self.paused = self.paused, True
            try:
                if self.cursor >= self.n_fwd:
                    self.advance(self.cursor)
                    self._run_rebuilds()
                    self.advance(self.cursor)
                return _view(rec.storage(), h.geom)
            finally:
                self.paused = old

    def before_backward_op(self, label: str) -> None:
        """The backward pass is about to run its next ATen call (`label`)."""
        with self.lock:
            self.paused = True
            try:
                self._run_rebuilds()
                sched = self.schedule
                k = self.cursor
                if k >= len(sched.task_op):
                    self.stats.off_schedule.append(f"backward op {label} after the last "
                                                   "task")
                    return
                name = self.op_names[sched.task_op[k]]
                if name.split(".", 1)[1] != label:
                    self.stats.off_schedule.append(f"backward op {label} where the profile "
                                                   f"has {name}")
                    return
                self.advance(k)
                self._task_done()
            finally:
                self.paused = False

    # -- the step
    @contextlib.contextmanager
    def forward(self) -> Iterator[None]:
        """Context for the forward pass (model and loss): hooks, op matching, schedule."""
        if self._used:
            raise PlanRuntimeError("a PlanRuntime runs one step; make a new one")
        self._used = True
        tr = _RuntimeTracer(self)
        self._tracer = tr
        ok = False
        try:
            with tr, torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack):
                yield
            ok = True
        finally:
            self.calls.clear()
        if ok and len(tr.ops) != self.n_fwd:
            raise PlanRuntimeError(
                f"the forward pass ran {len(tr.ops)} ops but the profile has "
                f"{self.n_fwd}: the step differs from the profiled one")
        devs = {s.device for s in tr.storages.values() if not s.persistent}
        if devs:
            self.stats.device = sorted(devs)[-1]
        self._tracer = None
        self.stats.still_resident = [n for n, ref in self._dropped.items()
                                     if not ref.expired()]
        self._dropped.clear()

    @property
    def stats_device(self) -> Any:
        return torch.device(self.stats.device)

    @contextlib.contextmanager
    def backward(self, params: Any = ()) -> Iterator[None]:
        """Context for ``loss.backward()``: numbers the backward ops, replays the rest of
        the schedule when it returns.

        Args:
            params: the model's parameters; ATen calls that write into a ``.grad`` they
                already hold (gradient accumulation, which the profile does not have) are
                not tasks (counted in ``extra_backward_ops``).
        """
        self.grad_storages = {p.grad.untyped_storage()._cdata for p in params
                              if p.grad is not None}
        with _BackwardCursor(self):
            yield
        with self.lock:
            self.paused = True
            self._run_rebuilds()
            self.advance(len(self.schedule.task_op) + 1)
            self.paused = False
        if self.cursor != len(self.schedule.task_op):
            self.stats.off_schedule.append(
                f"the backward pass ran {self.cursor - self.n_fwd} tasks, the task list has "
                f"{len(self.schedule.task_op) - self.n_fwd}")

    def report(self) -> RuntimeReport:
        """The counts so far (complete after the backward block)."""
        self.stats.unmanaged = sorted(r.name for r in self.records
                                      if r.decision != KEEP and not r.packed)
        return self.stats


def execute_plan(
    model: Any,
    example_inputs: Any,
    loss_fn: Callable[..., Any] | None,
    instance: Instance,
    plan: Plan,
    budget: float | int | str | None = None,
    *,
    force: bool = False,
    host_pool: HostPool | None = None,
) -> RuntimeReport:
    """Run one forward and backward pass of `model` under `plan` at budget M, with the
    evaluator's barrier-free policy (:class:`PlanRuntime`).

    Gradients accumulate into ``.grad`` as in an ordinary step (zero them first if you
    compare). The step must be the profiled one: same model, the same ``loss_fn`` (default
    :func:`slackopt.profile.default_loss`), inputs of the same shapes and dtypes on the same
    device, the same train/eval mode.

    Args:
        model: the ``torch.nn.Module`` that was profiled.
        example_inputs: one tensor, a sequence of positional arguments, a dict of keyword
            arguments, or a callable returning one of those
            (:func:`slackopt.profile.as_model_inputs`).
        loss_fn: ``loss_fn(output, *example_inputs) -> scalar tensor`` or None.
        instance: the profiled instance.
        plan: the plan to execute (policy barrier_free).
        budget: M as a fraction of P, bytes or a size string (``slackopt.budget_bytes``);
            default P. Use the budget the plan was solved for: the schedule (admissions,
            evictions) depends on it.
        force: run a plan that is infeasible at M (see :class:`PlanRuntime`).
        host_pool: a :class:`HostPool` reused across steps (made once if None).

    Returns:
        The :class:`RuntimeReport`.

    Raises:
        PlanError: the plan does not fit the instance.
        PlanRuntimeError: the step differs from the profiled one; the plan is infeasible at
            M and not forced.
        ProfileError: the loss is not a scalar that needs grad.
        BudgetError: a bad budget.
    """
    from slackopt.instance import budget_bytes

    m = budget_bytes(instance, instance.P if budget is None else budget)
    _refuse_compiled(model)
    rt = PlanRuntime(instance, plan, m, force=force, host_pool=host_pool)
    args, kwargs = as_model_inputs(example_inputs)
    cuda = any(isinstance(x, torch.Tensor) and x.is_cuda
               for x in [*model.parameters(), *tree_flatten((args, kwargs))[0]])
    if cuda:
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    with rt.forward():
        loss = run_loss(model, args, loss_fn, kwargs)
    with rt.backward(model.parameters()):
        loss.backward()
    if cuda:
        torch.cuda.synchronize()
    rep = rt.report()
    rep.step_time_s = time.perf_counter() - t0
    if cuda:
        rep.peak_bytes = int(torch.cuda.max_memory_allocated() - base)
    rep.loss = float(loss.detach())
    return rep


def measure_plan(
    model: Any,
    example_inputs: Any,
    loss_fn: Callable[..., Any] | None,
    instance: Instance,
    plan: Plan,
    budget: float | int | str | None = None,
    *,
    steps: int = 3,
    warmup: int = 1,
) -> dict[str, Any]:
    """The measured step next to the simulated one, for one plan.

    Runs `warmup` planned steps (they create ``.grad``, so later backward passes accumulate
    in place and the measured peak holds activations and temporaries, as the instance
    does), then `steps` measured ones, all with one :class:`HostPool`; gradients
    accumulate across all of them.

    Args:
        model, example_inputs, loss_fn, instance, plan, budget: as for
            :func:`execute_plan`.
        steps: measured steps (>= 1); the step time is their median, the peak their maximum.
        warmup: unmeasured steps first (>= 0).

    Returns:
        ``{"measured": {step_time_s, peak_bytes (None on CPU), d2h_bytes, h2d_bytes,
        evictions, rebuilt, matches_plan, timeline_max_diff_bytes, still_resident, device},
        "simulated": {step_time_s, ideal_time_s, peak_bytes, feasible, d2h_bytes,
        h2d_bytes, evictions, budget_bytes}, "decisions": counts}``.

    Raises:
        as :func:`execute_plan`.
    """
    import statistics

    from slackopt.instance import budget_bytes

    if not (isinstance(steps, int) and steps >= 1 and isinstance(warmup, int) and warmup >= 0):
        raise PlanRuntimeError("steps must be an integer >= 1 and warmup an integer >= 0")
    m = budget_bytes(instance, instance.P if budget is None else budget)
    pool = HostPool(host_pool_bytes(instance, plan), pin=_on_cuda(model))
    reps = [execute_plan(model, example_inputs, loss_fn, instance, plan, m, host_pool=pool)
            for _ in range(warmup + steps)][warmup:]
    ev = runtime_schedule(instance, plan, m).evaluation
    peaks = [r.peak_bytes for r in reps if r.peak_bytes is not None]
    last = reps[-1]
    return {
        "measured": {"step_time_s": float(statistics.median(r.step_time_s for r in reps)),
                     "peak_bytes": max(peaks) if peaks else None,
                     "d2h_bytes": last.d2h_bytes, "h2d_bytes": last.h2d_bytes,
                     "evictions": last.evictions, "rebuilt": last.rebuilt,
                     "matches_plan": all(r.matches_plan() for r in reps),
                     "timeline_max_diff_bytes": last.timeline_max_diff_bytes(),
                     "still_resident": last.still_resident, "device": last.device},
        "simulated": {"step_time_s": ev.step_time_s, "ideal_time_s": ev.ideal_time_s,
                      "peak_bytes": ev.peak_bytes, "feasible": ev.feasible,
                      "d2h_bytes": ev.d2h_bytes, "h2d_bytes": ev.h2d_bytes,
                      "evictions": ev.evictions, "budget_bytes": m},
        "decisions": plan.counts(),
    }


def _on_cuda(model: Any) -> bool:
    return any(p.is_cuda for p in model.parameters())


def decisions_by_name(instance: Instance, plan: Plan) -> dict[str, str]:
    """{saved tensor name: "keep" | "swap" | "recomp"} (for messages and tests)."""
    return {n: DECISION_NAMES[int(d)] for n, d in zip(instance.saved_names, plan.decisions,
                                                         strict=True)}


__all__ = ["HostPool", "PlanRuntime", "PlanRuntimeError", "RuntimeReport", "RuntimeSchedule",
           "decisions_by_name", "execute_plan", "host_pool_bytes", "measure_plan",
           "runtime_schedule"]
