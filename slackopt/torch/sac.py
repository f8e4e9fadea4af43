"""A selective-checkpoint policy (:mod:`slackopt.torch.export`) applied to a module's
training steps with PyTorch's own machinery.

:class:`SACRun` (``with sac_run(model, policy): ...``) wraps the forward of every region
module in ``torch.utils.checkpoint.checkpoint(..., use_reentrant=False,
context_fn=...)`` with the contexts of ``create_selective_checkpoint_contexts``: in the
backward pass PyTorch replays a region's forward, returning the cached outputs of
``MUST_SAVE`` calls and re-running the ``MUST_RECOMPUTE`` ones. Inside, any number of
training steps run as usual (forward, ``loss.backward()``, the optimizer).

A light ``TorchDispatchMode`` numbers the forward calls as the profiler did (from the
model's call until the profile's last forward op; view ops and ``prim`` calls are not
numbered), checks each against the policy (a step that differs from the profiled one is
refused, naming the op), tells the policy function which call it is asked about, and does
the offload that PyTorch 2.13's eager selective checkpointing does not do
(``MUST_CPU_OFFLOAD`` is re-run there like ``MUST_RECOMPUTE``; see
:mod:`slackopt.torch.export`):

- **D2H** of a swapped tensor's storage right after the call that gives it its final
  value: on CUDA on a side stream after an event of the compute stream, into pinned host
  memory (PyTorch's caching host allocator); on the CPU a plain copy.
- **Free** of the device bytes (``untyped_storage().resize_(0)``) after the tensor's last
  forward reader, whoever still references the storage (the selective-checkpoint cache,
  autograd, the model's code); on CUDA ``record_stream`` keeps the block from reuse until
  the copy has read it.
- **H2D** back into the same storage when a call first touches it (a backward op, a
  call the replay re-runs, a view op: PyTorch checks a view against its storage's size),
  on the current stream after the D2H's event. ``detach`` (which checkpointing runs on
  every tensor its replay hands to autograd) does not count as a touch.

Storages still on the host when the next step starts or the run ends are brought back, so
a tensor the caller kept (a model output) is whole again; :meth:`SACRun.report` counts
them.

Without swapped tensors the dispatch mode only numbers and checks the calls: the policy
itself is stock PyTorch, and :func:`stock_policy_fn` gives the same answers from the
policy file alone, with selective checkpointing's own numbering (an overload's k-th call
in its region).

Sources: PyTorch documentation of ``torch.utils.checkpoint`` (non-reentrant checkpoint,
``create_selective_checkpoint_contexts``, ``CheckpointPolicy``), ``TorchDispatchMode``,
"CUDA semantics" (streams, events, ``record_stream``, pinned memory), and
``torch.UntypedStorage.resize_`` (as FSDP frees parameter storages).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
)

from slackopt.torch.copies import bytes_of, copy_d2h
from slackopt.torch.errors import PlanRuntimeError
from slackopt.torch.export import (
    AUTOGRAD,
    MUST_CPU_OFFLOAD,
    MUST_RECOMPUTE,
    MUST_SAVE,
    Offload,
    SACPolicy,
)
from slackopt.torch.step import refuse_compiled
from slackopt.torch.trace import is_view_op, op_label, storage_of, written_tensors

_ANSWER = {MUST_SAVE: CheckpointPolicy.MUST_SAVE,
           MUST_CPU_OFFLOAD: CheckpointPolicy.MUST_SAVE,  # offloaded by SACRun itself
           MUST_RECOMPUTE: CheckpointPolicy.MUST_RECOMPUTE}
_NO_TOUCH = frozenset({"detach", "lift_fresh"})


@dataclass
class SACReport:
    """What the last step under a policy did (:meth:`SACRun.report`).

    Attributes:
        steps: forward passes run under the policy so far.
        offloaded: the swapped tensors whose device bytes were freed after their D2H.
        reloaded: those brought back by their first touch.
        restored: those brought back only at the step's end (no backward call touched
            them; a caller kept them).
        d2h_bytes, h2d_bytes: bytes copied to and from the host.
        replays: region replays (one per region whose backward ran).
        replayed_calls: ATen calls re-run by the replays (views excluded).
        device: the device of the last offloaded storage ("cpu" if none).
    """

    steps: int = 0
    offloaded: list[str] = field(default_factory=list)
    reloaded: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    d2h_bytes: int = 0
    h2d_bytes: int = 0
    replays: int = 0
    replayed_calls: int = 0
    device: str = "cpu"


class _Held:
    """A swapped storage between its D2H and its return: the storage (a strong reference
    to a 0-byte storage once freed), its host copy and the D2H's CUDA event."""

    __slots__ = ("entry", "storage", "host", "done")

    def __init__(self, entry: Offload, storage: Any, host: Any, done: Any) -> None:
        self.entry = entry
        self.storage = storage
        self.host = host
        self.done = done


class _Counter(TorchDispatchMode):
    """Numbers and checks the forward calls; offloads, frees and brings back swapped
    storages (see the module docstring)."""

    def __init__(self, run: SACRun) -> None:
        super().__init__()
        self.run = run
        self.open = False
        self.fwd = 0
        self.last: tuple[int, Any] | None = None
        self.replaying = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        run = self.run
        view = is_view_op(func) or func.namespace == "prim"
        if run.held_by_key and func._overloadpacket.__name__ not in _NO_TOUCH:
            run.touch(args, kwargs)
        if view or not self.open or torch._C._current_graph_task_id() != -1:
            self.last = None
            if self.replaying and not view:
                run.stats.replayed_calls += 1
            return func(*args, **kwargs)
        i = self.fwd
        calls = run.policy.calls
        label = op_label(func)
        if i >= len(calls) or calls[i].label != label:
            want = calls[i].op if i < len(calls) else "the end of the forward pass"
            self.open = False
            raise PlanRuntimeError(
                f"forward call #{i} is '{label}' but the policy has '{want}': the step differs "
                f"from the profiled one of '{run.policy.instance}' (same model, input shapes, "
                "dtypes, device, train/eval mode and loss needed)")
        self.fwd = i + 1
        out = func(*args, **kwargs)
        self.last = (i, func)
        if i in run.offload_at:
            run.produced(i, func, args, kwargs, out)
        if run.pending:
            run.free_after(i)
        if self.fwd == len(calls):
            self.open = False
        return out


class _Replay:
    """The recompute context of region `k`: selective checkpointing's cached-mode context,
    entered with the run told which region PyTorch replays."""

    def __init__(self, inner: Any, k: int, run: SACRun) -> None:
        self.inner, self.k, self.run = inner, k, run

    def __enter__(self) -> Any:
        self.run.replaying.append(self.k)
        self.run.counter.replaying += 1
        self.run.stats.replays += 1
        return self.inner.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        self.run.counter.replaying -= 1
        self.run.replaying.pop()
        return self.inner.__exit__(*exc)


class SACRun:
    """Training steps of `model` under a selective-checkpoint policy (see the module
    docstring). Use as a context manager::

        policy = sac_policy(instance, plan)        # or load_policy("policy.json")
        with SACRun(model, policy) as run:
            for batch in batches:
                loss = loss_fn(model(batch), batch)
                loss.backward()
                opt.step(); opt.zero_grad()
        print(run.report())

    Args:
        model: the ``torch.nn.Module`` that was profiled (not ``torch.compile``d); the
            forward pass starts at its call and ends with the profile's last forward
            op (the loss included when the profile had it).
        policy: the :class:`~slackopt.torch.export.SACPolicy`.

    Raises:
        PlanRuntimeError: a region module is not in the model; a Hugging Face model with
            ``config.use_cache`` on; a call differs from the profiled step; a region
            covers other calls than the policy says.
        ProfileError: a ``torch.compile``d model.
    """

    def __init__(self, model: Any, policy: SACPolicy) -> None:
        refuse_compiled(model)
        if getattr(getattr(model, "config", None), "use_cache", False):
            raise PlanRuntimeError(
                "the model's config.use_cache is True: its layers update a key/value cache "
                "that a checkpoint replay would update again (transformers turns it off "
                "for gradient checkpointing too). Set model.config.use_cache = False, "
                "profile that step and export its plan")
        self.model = model
        self.policy = policy
        mods = dict(model.named_modules())
        missing = [r.module for r in policy.regions if r.module not in mods]
        if missing:
            raise PlanRuntimeError(
                f"the model has no module '{missing[0]}', a checkpoint region of the policy "
                f"for '{policy.instance}': run the policy on the profiled model")
        self.modules = [mods[r.module] for r in policy.regions]
        self.offload_at: dict[int, list[Offload]] = {}
        for o in policy.offloads:
            self.offload_at.setdefault(o.op, []).append(o)
        self.pending: list[_Held] = []
        self.held_by_key: dict[int, _Held] = {}
        self.stats = SACReport()
        self.counter = _Counter(self)
        self.replaying: list[int] = []
        self._stream: Any = None
        self._undo: list[Callable[[], None]] = []
        self._stack = contextlib.ExitStack()

    # -- entering and leaving
    def __enter__(self) -> SACRun:
        for k, mod in enumerate(self.modules):
            self._wrap(k, mod)
        h = self.model.register_forward_pre_hook(self._start_step)
        self._undo.append(h.remove)
        self._stack.enter_context(self.counter)
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._stack.close()
        finally:
            for undo in reversed(self._undo):
                undo()
            self._undo.clear()
            self.restore_all()

    def _start_step(self, module: Any, args: Any) -> None:
        if not torch.is_grad_enabled() or self.counter.open:
            return
        self.restore_all()
        self.stats = SACReport(steps=self.stats.steps + 1)
        self.counter.open = True
        self.counter.fwd = 0

    def _wrap(self, k: int, mod: Any) -> None:
        region = self.policy.regions[k]
        orig = mod.forward
        counter = self.counter

        def context_fn() -> tuple[Any, Any]:
            fwd, rec = create_selective_checkpoint_contexts(
                self.policy_fn, allow_cache_entry_mutation=self.policy.allow_cache_entry_mutation)
            return fwd, _Replay(rec, k, self)

        def forward(*args: Any, **kwargs: Any) -> Any:
            if not (counter.open and torch.is_grad_enabled()):
                return orig(*args, **kwargs)
            start = counter.fwd
            out = checkpoint(orig, *args, use_reentrant=False, context_fn=context_fn,
                             **kwargs)
            self._check_region(region, start, counter.fwd - 1)
            return out

        mod.forward = forward

        def undo() -> None:
            if mod.__dict__.get("forward") is forward:
                del mod.forward

        self._undo.append(undo)

    def _check_region(self, region: Any, start: int, end: int) -> None:
        """The module's call ran forward calls start..end: it must hold the region's, and
        any more must be outside every region in the policy (calls that allocate nothing:
        in-place writes, as a block's final in-place ReLU; the policy cannot recompute
        what they make, so keep and swap are all they carry)."""
        calls = self.policy.calls
        extra = [i for i in (*range(start, region.first), *range(region.last + 1, end + 1))
                 if i < len(calls)]
        bad = [i for i in extra if calls[i].policy != AUTOGRAD]
        if start > region.first or end < region.last or bad:
            raise PlanRuntimeError(
                f"region '{region.module}' ran forward calls #{start}..#{end}, the policy "
                f"#{region.first}..#{region.last}: the step differs from the profiled one, "
                "or the module's call holds calls of other regions; give other regions")

    # -- the policy function selective checkpointing calls after each call of a region
    def policy_fn(self, ctx: Any, func: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
        """The answer for the call that just ran (the counter's last numbered call); a view
        or an unnumbered call is re-run (it moves no data)."""
        last = self.counter.last
        if last is None or last[1] is not func:
            return CheckpointPolicy.MUST_RECOMPUTE
        call = self.policy.calls[last[0]]
        if call.policy == AUTOGRAD:
            # a call at the edge of a region's module that allocates nothing (checked
            # when the region ends): never re-run, as under plain autograd; a swapped
            # tensor it finalises is offloaded like any other
            return CheckpointPolicy.MUST_SAVE
        return _ANSWER[call.policy]

    # -- offload
    def produced(self, i: int, func: Any, args: Any, kwargs: Any, out: Any) -> None:
        """Start the D2H of every swapped storage call `i` finalised."""
        for entry in self.offload_at[i]:
            st = _output_storage(entry, func, args, kwargs, out)
            if st is None or int(st.nbytes()) != entry.nbytes:
                raise PlanRuntimeError(
                    f"tensor '{entry.tensor}' has {None if st is None else int(st.nbytes())} "
                    f"bytes but {entry.nbytes} in the profile: the step differs from the "
                    "profiled one")
            cuda = st.device.type == "cuda"
            host = torch.empty(entry.nbytes, dtype=torch.uint8, pin_memory=cuda)
            stream = None
            if cuda:
                if self._stream is None:
                    self._stream = torch.cuda.Stream(device=st.device)
                stream = self._stream
            done = copy_d2h(st, host, stream, [])
            held = _Held(entry, st, host, done)
            self.pending.append(held)
            self.stats.d2h_bytes += entry.nbytes
            self.stats.device = str(st.device)

    def free_after(self, i: int) -> None:
        """Free the device bytes of every pending storage whose last forward reader is
        call `i` or earlier."""
        keep = []
        for held in self.pending:
            if held.entry.last_forward > i:
                keep.append(held)
                continue
            held.storage.resize_(0)
            self.held_by_key[held.storage._cdata] = held
            self.stats.offloaded.append(held.entry.tensor)
        self.pending = keep

    def touch(self, args: Any, kwargs: Any) -> None:
        """Bring back every freed storage a call's arguments use."""
        for x in tree_flatten((args, kwargs))[0]:
            st = storage_of(x) if isinstance(x, torch.Tensor) else None
            if st is not None and st._cdata in self.held_by_key:
                self.stats.reloaded.append(self._reload(self.held_by_key.pop(st._cdata)))

    def _reload(self, held: _Held) -> str:
        """Copy a freed storage back from the host; returns its tensor's name."""
        st = held.storage
        st.resize_(held.entry.nbytes)
        dst = bytes_of(st)
        if st.device.type == "cuda":
            if held.done is not None:
                torch.cuda.current_stream(st.device).wait_event(held.done)
            dst.copy_(held.host, non_blocking=True)
        else:
            dst.copy_(held.host)
        self.stats.h2d_bytes += held.entry.nbytes
        held.storage = held.host = None
        return held.entry.tensor

    def restore_all(self) -> None:
        """Bring back every storage still on the host (the step's end), and forget the
        pending ones."""
        for held in list(self.held_by_key.values()):
            self.stats.restored.append(self._reload(held))
        self.held_by_key.clear()
        self.pending.clear()

    def replaying_region(self) -> Any:
        """The :class:`~slackopt.torch.export.Region` PyTorch is replaying now, or None."""
        return self.policy.regions[self.replaying[-1]] if self.replaying else None

    def report(self) -> SACReport:
        """What the last step did (:class:`SACReport`)."""
        return self.stats


def _output_storage(entry: Offload, func: Any, args: Any, kwargs: Any, out: Any) -> Any:
    """The storage of `entry` among a call's outputs: the one it writes in place
    (``output == -1``), else its `output`-th new output storage."""
    if entry.output < 0:
        for t in written_tensors(func, args, kwargs):
            st = storage_of(t)
            if st is not None:
                return st
        return None
    ins = {st._cdata for x in tree_flatten((args, kwargs))[0]
           if (st := storage_of(x)) is not None}
    new: list[Any] = []
    for t in tree_flatten(out)[0]:
        st = storage_of(t)
        if st is not None and st._cdata not in ins and all(st._cdata != s._cdata for s in new):
            new.append(st)
    return new[entry.output] if entry.output < len(new) else None


def measure_policy(model: Any, example_inputs: Any, loss_fn: Callable[..., Any] | None,
                   policy: SACPolicy, *, steps: int = 3, warmup: int = 1) -> dict[str, Any]:
    """Training steps under `policy`, measured (the selective-checkpoint counterpart of
    :func:`slackopt.torch.measure_plan`).

    Runs `warmup` then `steps` forward and backward passes in one :class:`SACRun`
    (gradients accumulate, as in :func:`~slackopt.torch.measure_plan`), each timed with
    CUDA events on a GPU (``time.perf_counter`` on the CPU) and, on CUDA, with
    ``torch.cuda.max_memory_allocated`` above the allocation before the step.

    Args:
        model, example_inputs, loss_fn: the profiled step (as for
            :func:`~slackopt.torch.execute_plan`).
        policy: the policy.
        steps: measured steps (>= 1); warmup: unmeasured steps first (>= 0).

    Returns:
        ``{step_time_s (median, s), peak_bytes (max over the steps; None on CPU),
        reserved_peak_bytes, d2h_bytes, h2d_bytes, replays, replayed_calls, device}``
        (the copies and replays of the last step).

    Raises:
        PlanRuntimeError: bad `steps`/`warmup`, or as :class:`SACRun`.
    """
    import statistics
    import time

    from slackopt.torch.step import as_model_inputs, run_loss

    if not (isinstance(steps, int) and steps >= 1 and isinstance(warmup, int) and warmup >= 0):
        raise PlanRuntimeError("steps must be an integer >= 1 and warmup an integer >= 0")
    cuda = any(p.is_cuda for p in model.parameters())
    times: list[float] = []
    peaks: list[int] = []
    reserved: list[int] = []
    with SACRun(model, policy) as run:
        for k in range(warmup + steps):
            args, kwargs = as_model_inputs(example_inputs)
            if cuda:
                torch.cuda.synchronize()
                base = torch.cuda.memory_allocated()
                base_reserved = torch.cuda.memory_reserved()
                torch.cuda.reset_peak_memory_stats()
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
            t0 = time.perf_counter()
            run_loss(model, args, loss_fn, kwargs).backward()
            if cuda:
                end.record()
                torch.cuda.synchronize()
            if k < warmup:
                continue
            if cuda:
                times.append(start.elapsed_time(end) / 1e3)
                peaks.append(int(torch.cuda.max_memory_allocated() - base))
                reserved.append(int(torch.cuda.max_memory_reserved() - base_reserved))
            else:
                times.append(time.perf_counter() - t0)
        rep = run.report()
    return {"step_time_s": float(statistics.median(times)),
            "peak_bytes": max(peaks) if peaks else None,
            "reserved_peak_bytes": max(reserved) if reserved else None,
            "d2h_bytes": rep.d2h_bytes, "h2d_bytes": rep.h2d_bytes, "replays": rep.replays,
            "replayed_calls": rep.replayed_calls, "device": rep.device}


@contextlib.contextmanager
def sac_run(model: Any, policy: SACPolicy) -> Iterator[SACRun]:
    """``with sac_run(model, policy) as run:`` - :class:`SACRun` as a function."""
    with SACRun(model, policy) as run:
        yield run


def stock_policy_fn(policy: SACPolicy, region: int) -> Callable[..., CheckpointPolicy]:
    """A ``policy_fn`` for ``create_selective_checkpoint_contexts`` of one region that uses
    only the policy file and selective checkpointing's own numbering: the k-th call of an
    overload in the region (``CallPolicy.call``). Offloaded calls answer ``MUST_SAVE``
    (PyTorch 2.13 does not offload them), views ``MUST_RECOMPUTE``.

    Each region call needs a fresh one (it counts the calls it is asked about).

    Raises:
        PlanRuntimeError: (when called) an overload called more often than the profile
            says.
    """
    table = {(c.label, c.call): c.policy for c in policy.calls if c.region == region}
    seen: dict[str, int] = {}

    def fn(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
        if is_view_op(func) or func.namespace == "prim":
            return CheckpointPolicy.MUST_RECOMPUTE
        label = op_label(func)
        k = seen.get(label, 0)
        seen[label] = k + 1
        answer = table.get((label, k))
        if answer is None:
            raise PlanRuntimeError(f"region {region} calls '{label}' {k + 1} times; the "
                                   f"policy for '{policy.instance}' knows {k}")
        return _ANSWER[answer]

    return fn


__all__ = ["SACReport", "SACRun", "measure_policy", "sac_run", "stock_policy_fn"]
