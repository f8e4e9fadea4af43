"""Execute a plan on the real PyTorch module: keep, swap or recompute each saved tensor.

:class:`PlanRuntime` installs, for the forward pass, a pair of
``torch.autograd.graph.saved_tensors_hooks`` and a ``TorchDispatchMode`` that numbers the
ATen calls exactly as :func:`slackopt.profile.profile_step` did, so each storage autograd
saves is matched to its instance tensor and gets the plan's decision:

- **keep**: the pack hook returns a detached alias; the tensor stays where it is.
- **swap**: the first pack of the storage copies all of its bytes to a host buffer and
  drops the device reference, so the storage is freed once the forward pass no longer
  uses it. The first unpack copies it back (one copy per storage, shared by every saved
  view of it) and the copy is freed after the last backward reader (when autograd releases
  the last saved view). On a GPU the host buffer is pinned, D2H runs on a side stream after
  an event recorded on the compute stream, ``record_stream`` keeps the allocator from
  reusing the source block too early, and H2D runs on a second side stream, issued
  ``prefetch_depth`` swapped tensors ahead of first need (at :meth:`begin_backward` and at
  each unpack); the compute stream waits on the copy's event. On CPU both are plain copies
  made when needed.
- **recomp**: the runtime records the ATen calls of the tensor's recipe while the forward
  pass runs (with the RNG state just before each random call) and keeps no data; the first
  unpack re-runs them under ``torch.no_grad()`` on the compute stream, inputs first (a kept
  input is read, a swapped one fetched, a recomputed one rebuilt), with the saved RNG
  state restored inside ``torch.random.fork_rng`` so the global RNG is untouched. The
  rebuilt storage is shared by all saved views and freed after the last backward reader.

Parameters, buffers, inputs and other storages that exist before the step are packed as
they are. :class:`RuntimeReport` counts what moved and what was rebuilt;
:meth:`RuntimeReport.matches_plan` compares it with the plan (D2H and H2D bytes = the
bytes planned swap, rebuilt tensors = the tensors planned recomp).

The CUDA paths (pinned buffers, side streams, events, prefetch) follow PyTorch's "CUDA
semantics" documentation but are not run by the test suite: CI has no GPU.

Limits: the forward pass runs under a Python dispatch mode, which adds tens of
microseconds per ATen call (visible on small models, small next to large GPU kernels);
H2D prefetches are issued a fixed number of tensors ahead, without the evaluator's
admission control against the budget; a model that installs its own saved-tensor hooks
(``torch.utils.checkpoint``, ``save_on_cpu``) overrides these for its region.

Gradients: swapped and recomputed tensors come back bit for bit (copies of the same bytes;
the same kernels on the same inputs, strides and RNG state), so on CPU a planned step gives
the unplanned step's gradients exactly; the tests check this.

Sources: PyTorch documentation of ``torch.autograd.graph.saved_tensors_hooks`` (and
``save_on_cpu``, which this generalises), ``TorchDispatchMode``, CUDA streams and
``Tensor.record_stream``; ``torch.utils.checkpoint`` for re-running ops with a saved RNG
state. The decisions come from slackopt's planners (Capuchin- and Checkmate-style swap and
recompute).
"""

from __future__ import annotations

import bisect
import contextlib
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

try:
    import torch
    from torch.multiprocessing.reductions import StorageWeakRef
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
    as_input_tuple,
    run_loss,
    storage_of,
)


class PlanRuntimeError(SlackoptError, RuntimeError):
    """The step does not match the profiled instance, or the plan cannot be executed."""


@dataclass
class RuntimeReport:
    """What one planned step did.

    Attributes:
        device: where the step ran ("cpu", "cuda:0").
        d2h_bytes: bytes copied out (device to host) for swapped tensors.
        h2d_bytes: bytes copied back (host to device).
        swapped: storages copied out.
        fetched: storages copied back.
        rebuilt: storages rebuilt by recompute.
        rebuilt_bytes: bytes of the rebuilt storages.
        rebuild_ops: ATen calls re-run by rebuilds.
        kept: saved storages kept in place.
        unplanned_saves: storages autograd saved that the instance does not list as saved
            (kept; should be 0).
        planned: the plan's decision counts; planned_swap_bytes: bytes planned swap.
        step_time_s: wall time of the forward and backward pass (s; GPU synchronised).
        peak_bytes: peak device memory allocated during the step (bytes; CUDA only, else
            None), relative to the allocation before the step when ``relative_peak``.
        loss: the loss value.
        unmanaged: tensors planned swap or recomp that autograd never saved through the
            hooks (``meta["unmanaged_saved"]`` of the instance): they stayed in place, and
            ``matches_plan`` is then False.
        still_resident: swapped or recomputed tensors whose device storage was still alive
            when the backward pass began (something outside autograd holds them, so
            dropping them saved no memory); filled by :meth:`PlanRuntime.begin_backward`.
    """

    device: str
    d2h_bytes: int = 0
    h2d_bytes: int = 0
    swapped: int = 0
    fetched: int = 0
    rebuilt: int = 0
    rebuilt_bytes: int = 0
    rebuild_ops: int = 0
    kept: int = 0
    unplanned_saves: int = 0
    planned: dict[str, int] = field(default_factory=dict)
    planned_swap_bytes: int = 0
    step_time_s: float = 0.0
    peak_bytes: int | None = None
    loss: float | None = None
    still_resident: list[str] = field(default_factory=list)
    unmanaged: list[str] = field(default_factory=list)

    def matches_plan(self) -> bool:
        """D2H and H2D bytes equal the planned swap bytes, the swapped and fetched counts
        equal the planned swaps, the rebuilt count equals the planned recomps."""
        n_swap = self.planned.get("swap", 0)
        return (self.d2h_bytes == self.planned_swap_bytes == self.h2d_bytes
                and self.swapped == n_swap == self.fetched
                and self.rebuilt == self.planned.get("recomp", 0))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (with ``matches_plan``)."""
        return {**asdict(self), "matches_plan": self.matches_plan()}


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


# ----------------------------------------------------------------------------- records
class _Record:
    """The runtime state of one saved storage (shared by every saved view of it)."""

    __slots__ = ("rt", "key", "name", "decision", "nbytes", "first_need", "device", "alias",
                 "host", "dev", "d2h_done", "h2d_done", "recipe", "__weakref__")

    def __init__(self, rt: PlanRuntime, key: int, name: str, decision: int) -> None:
        self.rt = rt
        self.key = key
        self.name = name
        self.decision = decision
        self.nbytes = 0
        self.first_need = rt.first_need.get(name, 0)
        self.device: Any = None       # the device of the saved tensor
        self.alias: Any = None        # keep: a detached alias of the saved tensor
        self.host: Any = None         # swap: host bytes
        self.dev: Any = None          # swap / recomp: the device storage once back
        self.d2h_done: Any = None     # CUDA events
        self.h2d_done: Any = None
        self.recipe: list[_Call] | None = None

    # -- forward
    def on_pack(self, t: Any) -> None:
        if self.decision == KEEP:
            if self.alias is None:
                self.alias = t.detach()
                self.rt.stats.kept += 1
        elif self.decision == SWAP:
            if self.host is None:
                self.rt.watch(self.name, t)
                self._offload(t)
        elif self.recipe is None and self.dev is None:
            self.rt.watch(self.name, t)
            self.recipe = [self.rt.captured(i) for i in self.rt.recipe_ops[self.name]]
            self.nbytes = int(t.untyped_storage().nbytes())

    def _offload(self, t: Any) -> None:
        st = t.untyped_storage()
        n = int(st.nbytes())
        self.nbytes = n
        src = torch.empty(0, dtype=torch.uint8, device=t.device).set_(st)
        if t.is_cuda:
            self.host, self.d2h_done = _cuda_d2h(src, self.rt.d2h_stream(t.device))
        else:
            self.host = src.clone()  # CPU: a plain copy; the original is dropped
        self.rt.stats.d2h_bytes += n
        self.rt.stats.swapped += 1

    # -- backward
    def storage(self) -> Any:
        """The device storage, fetched or rebuilt on first use."""
        if self.decision == KEEP:
            if self.alias is None:
                raise PlanRuntimeError(f"internal: kept tensor '{self.name}' was never saved")
            return self.alias.untyped_storage()
        if self.dev is None:
            if self.decision == SWAP:
                self._fetch()
            else:
                self._rebuild()
        if self.h2d_done is not None:
            _cuda_wait_h2d(self.dev, self.h2d_done)
            self.h2d_done = None
        return self.dev

    def _fetch(self) -> None:
        if self.host is None:
            raise PlanRuntimeError(f"internal: swapped tensor '{self.name}' was never saved")
        rt = self.rt
        dev = self.device
        if dev is not None and dev.type == "cuda":
            buf, self.h2d_done = _cuda_h2d(self.host, dev, rt.h2d_stream(dev), self.d2h_done)
        else:
            buf = self.host.clone()  # CPU: a plain copy
        self.dev = buf.untyped_storage()
        self.host = None  # the host copy is no longer needed
        self.d2h_done = None
        rt.stats.h2d_bytes += self.nbytes
        rt.stats.fetched += 1

    def _rebuild(self) -> None:
        if self.recipe is None:
            raise PlanRuntimeError(f"internal: recomputed tensor '{self.name}' has no recorded "
                                   "recipe")
        env: dict[int, Any] = {}
        with torch.no_grad():
            for call in self.recipe:
                out = call.run(env)
                for k, t in zip(call.out_keys, tree_flatten(out)[0], strict=False):
                    if k is not None:
                        env[k] = t.untyped_storage()
                self.rt.stats.rebuild_ops += 1
        st = env.get(self.key)
        if st is None:
            raise PlanRuntimeError(f"internal: the recipe of '{self.name}' did not rebuild it")
        self.dev = st
        self.recipe = None
        self.rt.stats.rebuilt += 1
        self.rt.stats.rebuilt_bytes += int(st.nbytes())


# ----------------------------------------------------------------------------- CUDA copies
# The GPU paths. Not exercised by the CPU test suite (no GPU in CI); written to the stream
# semantics of the PyTorch CUDA documentation ("CUDA semantics": streams, events,
# record_stream, pinned memory and non_blocking copies).
def _cuda_d2h(src: Any, stream: Any) -> tuple[Any, Any]:
    """Copy a device byte tensor to a new pinned host buffer on `stream`, after the work
    already queued on the compute stream (which produced `src`).

    Returns (host buffer, event recorded on `stream` after the copy; None for 0 bytes).
    ``record_stream`` keeps the caching allocator from reusing `src`'s block, once the
    caller drops it, before the copy has read it.
    """
    host = torch.empty(src.numel(), dtype=torch.uint8, pin_memory=True)
    if src.numel() == 0:
        return host, None
    ready = torch.cuda.Event()
    ready.record(torch.cuda.current_stream(src.device))
    stream.wait_event(ready)
    with torch.cuda.stream(stream):
        host.copy_(src, non_blocking=True)
        done = torch.cuda.Event()
        done.record(stream)
    src.record_stream(stream)
    return host, done


def _cuda_h2d(host: Any, device: Any, stream: Any, d2h_done: Any) -> tuple[Any, Any]:
    """Copy a pinned host buffer to a new device byte tensor on `stream`, after its D2H.

    Returns (device buffer, event recorded on `stream` after the copy). The pinned host
    block is not reused before the copy ends (the host allocator records the copy).
    """
    if d2h_done is not None:
        stream.wait_event(d2h_done)
    with torch.cuda.stream(stream):
        buf = torch.empty(host.numel(), dtype=torch.uint8, device=device)
        buf.copy_(host, non_blocking=True)
        done = torch.cuda.Event()
        done.record(stream)
    return buf, done


def _cuda_wait_h2d(storage: Any, done: Any) -> None:
    """Make the current (compute) stream wait for an H2D copy into `storage`, and tell the
    allocator the block is now used on that stream too."""
    cur = torch.cuda.current_stream(storage.device)
    cur.wait_event(done)
    torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage).record_stream(cur)


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
class PlanRuntime:
    """Runs one training step of a module under a plan.

    Usage (what :func:`execute_plan` does)::

        rt = PlanRuntime(instance, plan)
        with rt.forward():
            loss = loss_fn(model(*inputs), *inputs)
        rt.begin_backward()          # optional: starts the first H2D prefetches on a GPU
        loss.backward()
        report = rt.report()

    The forward block must run exactly the ATen calls the instance was profiled from
    (same model, input shapes and dtypes, device, train/eval mode); a difference raises
    :class:`PlanRuntimeError` at the first op that differs. One runtime serves one step.

    Args:
        instance: the profiled instance (:func:`slackopt.profile.profile_step`).
        plan: a plan for it (checked with :meth:`Plan.check`).
        prefetch_depth: on a GPU, how many swapped tensors ahead of the current backward
            position H2D copies are issued (>= 0; 0 fetches on first use).

    Raises:
        PlanError: the plan does not fit the instance.
        PlanRuntimeError: the instance was not made by the profiler.
    """

    def __init__(self, instance: Instance, plan: Plan, *, prefetch_depth: int = 2) -> None:
        plan.check(instance)
        if instance.meta.get("generator") != "torch-profile":
            raise PlanRuntimeError(
                f"instance '{instance.name}' was not profiled from PyTorch (meta generator "
                f"is {instance.meta.get('generator')!r}); make it with slackopt.profile")
        if not (isinstance(prefetch_depth, int) and prefetch_depth >= 0):
            raise PlanRuntimeError("prefetch_depth must be an integer >= 0")
        self.instance = instance
        self.plan = plan
        self.prefetch_depth = prefetch_depth
        self.op_names = [op.name for op in instance.ops[: instance.n_fwd]]
        self.sizes = {t.name: int(t.size_bytes) for t in instance.tensors}
        self.decision = {n: int(d) for n, d in zip(plan.names, plan.decisions, strict=True)}
        self.first_need = {n: int(instance.saved_first_bwd_idx[k])
                           for k, n in enumerate(instance.saved_names)}
        self.recipe_ops: dict[str, list[int]] = {}
        for k, n in enumerate(instance.saved_names):
            if self.decision[n] == RECOMP:
                self.recipe_ops[n] = [int(i) for i in instance.recipe_ops[k]]
        self.capture_ops = {i for ops in self.recipe_ops.values() for i in ops}
        swaps = sorted((self.first_need[n], n) for n, d in self.decision.items() if d == SWAP)
        self._swap_needs = [f for f, _ in swaps]
        self._swap_names = [n for _, n in swaps]
        self._pf_next = 0
        self.names: dict[int, str] = {}
        self.calls: dict[int, _Call] = {}
        self._live: dict[int, _Record] = {}
        self._by_name: weakref.WeakValueDictionary[str, _Record] = weakref.WeakValueDictionary()
        self._streams: dict[tuple[str, Any], Any] = {}
        self._tracer: _RuntimeTracer | None = None
        self._dropped: dict[str, Any] = {}
        self._packed: set[str] = set()
        self._used = False
        counts = plan.counts()
        self.stats = RuntimeReport(device="cpu", planned=counts,
                                   planned_swap_bytes=int(plan.bytes_by_decision(instance)["swap"]))

    # -- streams (CUDA only)
    def d2h_stream(self, device: Any) -> Any:
        return self._stream("d2h", device)

    def h2d_stream(self, device: Any) -> Any:
        return self._stream("h2d", device)

    def _stream(self, kind: str, device: Any) -> Any:
        key = (kind, device)
        if key not in self._streams:
            self._streams[key] = torch.cuda.Stream(device=device)
        return self._streams[key]

    # -- records
    def record_for(self, key: int) -> _Record | None:
        """The record of storage `key` if it is a saved tensor of the instance, else None."""
        rec = self._live.get(key)
        if rec is not None:
            return rec
        name = self.names.get(key)
        if name is None or name not in self.decision:
            return None
        rec = _Record(self, key, name, self.decision[name])
        self._live[key] = rec
        self._by_name[name] = rec
        return rec

    def watch(self, name: str, t: Any) -> None:
        """Keep a weak reference to the storage of a tensor the plan drops."""
        self._dropped[name] = StorageWeakRef(t.untyped_storage())

    def still_resident(self) -> list[str]:
        """Dropped (swap / recomp) tensors whose original storage is still alive."""
        return [n for n, ref in self._dropped.items() if not ref.expired()]

    def captured(self, index: int) -> _Call:
        call = self.calls.get(index)
        if call is None:
            raise PlanRuntimeError(f"internal: recipe op #{index} was not recorded")
        return call

    # -- hooks
    def _pack(self, t: Any) -> Any:
        tr = self._tracer
        assert tr is not None
        with tr.pause():
            st = storage_of(t)
            if st is None or st._cdata not in self.names:
                return _Handle(None, t.detach())
            rec = self.record_for(st._cdata)
            if rec is None:
                self.stats.unplanned_saves += 1
                return _Handle(None, t.detach())
            if rec.device is None:
                rec.device = t.device
            self._packed.add(rec.name)
            rec.on_pack(t)
            if rec.decision == KEEP:
                return _Handle(rec, t.detach())
            return _Handle(rec, None, _Geom.of(t))

    def _unpack(self, h: _Handle) -> Any:
        rec = h.record
        if rec is None or rec.decision == KEEP:
            return h.tensor
        self._prefetch_after(rec.first_need)
        assert h.geom is not None
        return _view(rec.storage(), h.geom)

    def _prefetch_after(self, need: int) -> None:
        """Issue H2D copies (GPU) for the next `prefetch_depth` swapped tensors after `need`."""
        if not self.prefetch_depth or not self._swap_names:
            return
        hi = min(len(self._swap_names),
                 bisect.bisect_right(self._swap_needs, need) + self.prefetch_depth)
        while self._pf_next < hi:
            rec = self._by_name.get(self._swap_names[self._pf_next])
            self._pf_next += 1
            if rec is None or rec.dev is not None or rec.host is None:
                continue
            if rec.device is not None and rec.device.type == "cuda":
                rec._fetch()

    # -- the step
    @contextlib.contextmanager
    def forward(self) -> Iterator[None]:
        """Context for the forward pass (model and loss): hooks and op matching."""
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
            self._live.clear()
            self.calls.clear()
        if ok and len(tr.ops) != self.instance.n_fwd:
            raise PlanRuntimeError(
                f"the forward pass ran {len(tr.ops)} ops but the profile has "
                f"{self.instance.n_fwd}: the step differs from the profiled one")
        devs = {s.device for s in tr.storages.values() if not s.persistent}
        if devs:
            self.stats.device = sorted(devs)[-1]
        self._tracer = None

    def begin_backward(self) -> None:
        """Note which dropped tensors are still alive (``still_resident``), release the
        weak references, and start the first prefetches (GPU). Optional: unpacks also
        prefetch."""
        self.stats.still_resident = self.still_resident()
        self._dropped.clear()
        self._prefetch_after(-1)

    def report(self) -> RuntimeReport:
        """The counts so far (complete after ``loss.backward()``)."""
        self.stats.unmanaged = sorted(n for n, d in self.decision.items()
                                      if d != KEEP and n not in self._packed)
        return self.stats


def execute_plan(
    model: Any,
    example_inputs: Any,
    loss_fn: Callable[..., Any] | None,
    instance: Instance,
    plan: Plan,
    *,
    prefetch_depth: int = 2,
) -> RuntimeReport:
    """Run one forward and backward pass of `model` under `plan`.

    Gradients accumulate into ``.grad`` as in an ordinary step (zero them first if you
    compare). The step must be the profiled one: same model, the same ``loss_fn`` (default
    :func:`slackopt.profile.default_loss`), inputs of the same shapes and dtypes on the same
    device, the same train/eval mode.

    Args:
        model: the ``torch.nn.Module`` that was profiled.
        example_inputs: one tensor or a sequence of positional arguments.
        loss_fn: ``loss_fn(output, *example_inputs) -> scalar tensor`` or None.
        instance: the profiled instance.
        plan: the plan to execute.
        prefetch_depth: see :class:`PlanRuntime`.

    Returns:
        The :class:`RuntimeReport` (bytes moved, tensors rebuilt, step time, peak memory on
        CUDA, the loss).

    Raises:
        PlanError: the plan does not fit the instance.
        PlanRuntimeError: the step differs from the profiled one.
        ProfileError: the loss is not a scalar that needs grad.
    """
    inputs = as_input_tuple(example_inputs)
    rt = PlanRuntime(instance, plan, prefetch_depth=prefetch_depth)
    cuda = any(isinstance(x, torch.Tensor) and x.is_cuda
               for x in [*model.parameters(), *tree_flatten(inputs)[0]])
    if cuda:
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    with rt.forward():
        loss = run_loss(model, inputs, loss_fn)
    rt.begin_backward()
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
    prefetch_depth: int = 2,
) -> dict[str, Any]:
    """The measured step next to the simulated one, for one plan.

    Runs `warmup` planned steps (they create ``.grad``, so later backward passes accumulate
    in place and the measured peak holds activations and temporaries, as the instance
    does), then `steps` measured ones; gradients accumulate across all of them.

    Args:
        model, example_inputs, loss_fn, instance, plan, prefetch_depth: as for
            :func:`execute_plan`.
        budget: the budget M the plan is simulated under (fraction of P, bytes or a size
            string); default P.
        steps: measured steps (>= 1); the step time is their median, the peak their maximum.
        warmup: unmeasured steps first (>= 0).

    Returns:
        ``{"measured": {step_time_s, peak_bytes (None on CPU), d2h_bytes, h2d_bytes,
        rebuilt, matches_plan, still_resident}, "simulated": {step_time_s, ideal_time_s,
        peak_bytes, feasible, d2h_bytes, h2d_bytes, budget_bytes}, "decisions": counts}``.

    Raises:
        as :func:`execute_plan`; BudgetError for a bad budget.
    """
    import statistics

    from slackopt.instance import budget_bytes
    from slackopt.simulate import simulate

    if not (isinstance(steps, int) and steps >= 1 and isinstance(warmup, int) and warmup >= 0):
        raise PlanRuntimeError("steps must be an integer >= 1 and warmup an integer >= 0")
    m = budget_bytes(instance, instance.P if budget is None else budget)
    ev = simulate(instance, plan, m)
    reps = [execute_plan(model, example_inputs, loss_fn, instance, plan,
                         prefetch_depth=prefetch_depth) for _ in range(warmup + steps)][warmup:]
    peaks = [r.peak_bytes for r in reps if r.peak_bytes is not None]
    last = reps[-1]
    return {
        "measured": {"step_time_s": float(statistics.median(r.step_time_s for r in reps)),
                     "peak_bytes": max(peaks) if peaks else None,
                     "d2h_bytes": last.d2h_bytes, "h2d_bytes": last.h2d_bytes,
                     "rebuilt": last.rebuilt,
                     "matches_plan": all(r.matches_plan() for r in reps),
                     "still_resident": last.still_resident, "device": last.device},
        "simulated": {"step_time_s": ev.step_time_s, "ideal_time_s": ev.ideal_time_s,
                      "peak_bytes": ev.peak_bytes, "feasible": ev.feasible,
                      "d2h_bytes": ev.d2h_bytes, "h2d_bytes": ev.h2d_bytes,
                      "budget_bytes": m},
        "decisions": plan.counts(),
    }


def decisions_by_name(instance: Instance, plan: Plan) -> dict[str, str]:
    """{saved tensor name: "keep" | "swap" | "recomp"} (for messages and tests)."""
    return {n: DECISION_NAMES[int(d)] for n, d in zip(instance.saved_names, plan.decisions,
                                                         strict=True)}


__all__ = ["PlanRuntime", "PlanRuntimeError", "RuntimeReport", "decisions_by_name",
           "execute_plan", "measure_plan"]
