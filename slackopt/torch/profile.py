"""Read one real PyTorch training step into an :class:`~slackopt.instance.Instance`.

:func:`profile_step` runs one forward pass (model and loss) and one backward pass of a
``torch.nn.Module`` under a :class:`~slackopt.torch.trace.StepTracer` and
``torch.autograd.graph.saved_tensors_hooks``, and builds the instance from the trace
(:func:`slackopt.torch.build.build_instance`, which states how tensors, saved tensors,
persistent storages and recipes are read). :func:`profile_factory` does the same for the
model a user's factory builds (what ``slackopt profile`` runs).

- **Durations** (``timing="measure"``): ``time.perf_counter`` around each CPU call; a pair
  of CUDA events around each call on a GPU (resolved after one synchronisation at the
  end). The per-op median of the repeated steps is kept, and their spread in
  ``meta["spread"]``. Measured CPU durations are not a GPU's: paired with a GPU preset
  they are refused, and alone they come with a warning (``meta["timing_note"]``).
  ``timing="roofline"``: :func:`slackopt.hardware.roofline_s` of the GPU (a preset or a
  JSON file of peaks), at the peak of the op's dtype, from the op's FLOPs
  (:mod:`slackopt.torch.flops`) and the bytes it reads and writes. FLOPs are recorded in
  both modes (``Op.flops``).
- **Saved tensors.** The pack hook tells which storages autograd saves, the unpack hook
  when the backward pass takes them back: the first backward op after an unpack reads
  the storage, and so does the last backward op before the storage is freed (the
  autograd node that unpacked it holds it until the node returns; the tracer checks
  which unpacked storages are freed before each backward op).
- **Fake profiling** (any model size, no GPU): a model whose parameters are fake tensors
  (``FakeTensor``, made under PyTorch's ``FakeTensorMode``; ``fake=True`` of
  :func:`slackopt.torch.factories.build_from_factory`) is traced inside its fake mode:
  every ATen call runs its meta kernel (shapes, dtypes, strides and storage aliasing, no
  data), so memory use does not grow with the model or the batch. The op sequence,
  storages, views, in-place writes, random ops and recipes are those of the real step on
  the same device type; durations come from the roofline. The tests check that a fake and
  a real roofline profile of the same models are equal.
- **Name.** By default an instance is named after the model class, the first input's
  shape (the tokens of a language model's batch), the GPU (or the device the step ran on)
  and the host link: ``Qwen2ForCausalLM-1x8192-h100-pcie5`` (:func:`instance_name`).

Sources: PyTorch documentation of ``torch.autograd.graph.saved_tensors_hooks`` ("Hooks for
saved tensors"), "Fake tensor" (``FakeTensorMode``, meta kernels) and "CUDA semantics"
(events); Capuchin (Peng et al., ASPLOS 2020) for swapping and recomputing from a
measured profile of one iteration.
"""

from __future__ import annotations

import statistics
import time
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from slackopt.errors import SlackoptError
from slackopt.hardware import (
    ATTN_BWD_EFF,
    ATTN_FWD_EFF,
    GEMM_EFF,
    GPU,
    Link,
    host_memory_limit,
    resolve_gpu,
    roofline_s,
)
from slackopt.hardware import link as link_preset
from slackopt.instance import Instance
from slackopt.torch.build import GENERATOR, build_instance
from slackopt.torch.errors import ProfileError, ProfileNote
from slackopt.torch.factories import build_from_factory, resolve_factory, vocab_size
from slackopt.torch.flops import compute_dtype, op_flops
from slackopt.torch.hf import HF_PREFIX, hf_notes
from slackopt.torch.step import (
    FAKE_TIMING_ERROR,
    as_model_inputs,
    device_of,
    fake_mode_of,
    refuse_compiled,
    run_loss,
    within,
)
from slackopt.torch.trace import OpRec, StepTracer, storage_of, tensor_bytes

DEFAULT_LINK = "pcie4"
"""Host link used when neither ``link`` nor ``gpu`` says otherwise."""


class _Recorder(StepTracer):
    """The profiling tracer: timings, FLOPs, bytes, unpack readers and holds."""

    def __init__(self, timing: str, gpu: GPU | None) -> None:
        super().__init__()
        self.timing = timing
        self.gpu = gpu
        self.pending_unpacks: list[int] = []
        # Unpacked storages not yet freed -> index of the first op after their last unpack.
        self.held: dict[int, int] = {}
        # Forward storages -> weak references to the tensors the step's code got over them.
        self.objects: dict[int, list[Any]] = {}
        self._events: list[tuple[OpRec, Any, Any]] = []
        self.n_packs = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = super().__torch_dispatch__(func, types, args, kwargs)
        if self.phase == "fwd" and not self.paused:
            for t in tree_flatten(out)[0]:  # views included: they hold the storage too
                st = storage_of(t)
                s = self.storages.get(st._cdata) if st is not None else None
                if s is not None and not s.persistent:
                    self.objects.setdefault(s.key, []).append(weakref.ref(t))
        return out

    def _before(self, index: int, name: str, func: Any, args: Any, kwargs: Any) -> Any:
        if self.phase == "bwd" and self.held:
            self.charge_holds(index - 1, only_freed=True)
        elif self.phase == "fwd" and self.objects:
            self.charge_drops(index - 1, at_end=False)
        return None

    def charge_drops(self, last: int, *, at_end: bool) -> None:
        """Forward op `last` (the op before the one about to run, or the last forward op)
        holds every forward storage whose tensors the step's code has all dropped since
        (every one still watched, with `at_end`): the code held it through that op. The
        tensors autograd saved are not the code's (the pack hook keeps its own alias)."""
        for k, refs in list(self.objects.items()):
            if not at_end and any(r() is not None for r in refs):
                continue
            del self.objects[k]
            s = self.storages[k]
            if last > (s.alloc if s.alloc is not None else last) \
                    and last not in s.readers and last not in s.holds:
                s.holds.append(last)

    def charge_holds(self, last: int, *, only_freed: bool) -> None:
        """Op `last` (the op before the one about to run, or the last op of the step) reads
        every unpacked storage freed since its unpack (every one, with `only_freed`
        False): the autograd node that unpacked it held it through that op."""
        for k, first in list(self.held.items()):
            if only_freed and not self.freed(k):
                continue
            del self.held[k]
            s = self.storages[k]
            if last >= first and last not in s.readers and last not in s.holds:
                s.holds.append(last)

    def _call(self, func: Any, args: Any, kwargs: Any, token: Any) -> Any:
        if self.timing != "measure":
            return func(*args, **kwargs)
        dev = _cuda_device(args, kwargs)
        if dev is not None:
            stream = torch.cuda.current_stream(dev)
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record(stream)
            out = func(*args, **kwargs)
            end.record(stream)
            self._pending_events = (start, end)
            return out
        t0 = time.perf_counter()
        out = func(*args, **kwargs)
        self._pending_cpu = time.perf_counter() - t0
        return out

    def _after(self, rec: OpRec, args: Any, kwargs: Any, out: Any, token: Any) -> None:
        rec.flops = op_flops(rec.func, args, kwargs, out)
        seen: set[int] = set()
        nb = 0
        for t in tree_flatten((args, kwargs, out))[0]:
            if isinstance(t, torch.Tensor) and id(t) not in seen and storage_of(t) is not None:
                seen.add(id(t))
                nb += tensor_bytes(t)
        rec.bytes_moved = nb
        if self.timing == "measure":
            ev = getattr(self, "_pending_events", None)
            if ev is not None:
                self._events.append((rec, *ev))
                self._pending_events = None
            else:
                rec.duration_s = float(getattr(self, "_pending_cpu", 0.0))
        else:
            assert self.gpu is not None
            eff = GEMM_EFF
            if rec.kind == "attention":
                eff = ATTN_FWD_EFF if rec.phase == "fwd" else ATTN_BWD_EFF
            rec.duration_s = roofline_s(self.gpu, rec.flops, rec.bytes_moved, eff,
                                        compute_dtype(args, kwargs, out))
        if rec.phase == "bwd" and self.pending_unpacks:
            for k in self.pending_unpacks:
                s = self.storages[k]
                if rec.index not in s.readers and rec.index not in s.holds:
                    s.holds.append(rec.index)
            self.pending_unpacks.clear()

    def resolve_events(self) -> None:
        if self._events:
            torch.cuda.synchronize()
            for rec, start, end in self._events:
                rec.duration_s = float(start.elapsed_time(end)) / 1e3
            self._events.clear()

    # -- saved-tensor hooks
    def pack(self, t: Any) -> Any:
        with self.pause():
            k = self.key_of(t)
            if k is not None:
                self.storages[k].packs += 1
                self.n_packs += 1
            return (k, t.detach())

    def unpack(self, packed: Any) -> Any:
        k, t = packed
        if k is not None and not self.storages[k].persistent:
            self.pending_unpacks.append(k)
            self.held[k] = len(self.ops)
        return t


def _cuda_device(args: Any, kwargs: Any) -> Any | None:
    for x in tree_flatten((args, kwargs))[0]:
        if isinstance(x, torch.Tensor) and x.is_cuda:
            return x.device
        if isinstance(x, torch.device) and x.type == "cuda":
            return x
    return None


class _StepState:
    """Gradients, buffers and RNG states of a model, to put back after profiling."""

    def __init__(self, model: Any) -> None:
        self.params = list(model.parameters())
        self.grads = [None if p.grad is None else p.grad.detach().clone() for p in self.params]
        self.buffers = [(b, b.detach().clone()) for b in model.buffers()]
        self.cpu_rng = torch.get_rng_state()
        self.cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None

    def restore(self) -> None:
        with torch.no_grad():
            for p, g in zip(self.params, self.grads, strict=True):
                p.grad = None if g is None else g.clone()
            for b, v in self.buffers:
                b.copy_(v)
        torch.set_rng_state(self.cpu_rng)
        if self.cuda_rng is not None:
            torch.cuda.set_rng_state_all(self.cuda_rng)


def _trace(model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any],
           loss_fn: Callable[..., Any] | None, timing: str, g: GPU | None) -> _Recorder:
    """One traced step: the forward pass under the saved-tensor hooks, then the backward."""
    rec = _Recorder(timing, g)
    with rec.modules(model), rec:
        with torch.autograd.graph.saved_tensors_hooks(rec.pack, rec.unpack):
            loss = run_loss(model, inputs, loss_fn, kwargs)
        if rec.ops:
            rec.charge_drops(rec.ops[-1].index, at_end=True)
        rec.phase = "bwd"
        loss.backward()
    if rec.ops and rec.ops[-1].phase == "bwd":
        last = rec.ops[-1].index
        for k in rec.pending_unpacks:
            if last not in rec.storages[k].readers:
                rec.storages[k].holds.append(last)
        rec.charge_holds(last, only_freed=False)
    rec.pending_unpacks.clear()
    rec.held.clear()
    rec.resolve_events()
    return rec


def profile_step(
    model: Any,
    example_inputs: Any,
    loss_fn: Callable[..., Any] | None = None,
    *,
    timing: str = "measure",
    gpu: GPU | str | None = None,
    link: Link | str | None = None,
    name: str | None = None,
    warmup: int = 1,
    repeat: int = 3,
    max_recipe_ops: int = 6,
    restore: bool = True,
    host_memory_bytes: int | str | None = None,
) -> Instance:
    """Profile one training step of a PyTorch module into an instance.

    Runs ``loss = loss_fn(model(*example_inputs), *example_inputs)`` and
    ``loss.backward()`` under a recording ``TorchDispatchMode`` and
    ``torch.autograd.graph.saved_tensors_hooks`` (see the module docstring for what is
    recorded and how). The model runs as it is (put it in ``train()`` mode first, on the
    device you want profiled); the op sequence must be the same every step for a plan to
    run on it later (:mod:`slackopt.torch.runtime` checks).

    Args:
        model: a ``torch.nn.Module`` (any callable whose parameters are reachable through
            ``.parameters()`` and ``.named_modules()``).
        example_inputs: one tensor, a sequence of positional arguments, a dict of keyword
            arguments (a Hugging Face batch) or a callable returning one of those
            (:func:`as_model_inputs`; called once).
        loss_fn: ``loss_fn(output, *args, **kwargs) -> scalar tensor``; default the
            output's ``loss`` (Hugging Face, given ``labels``), else :func:`default_loss`
            (mean of squares of the floating-point outputs).
        timing: "measure" (perf_counter on CPU, CUDA events on a GPU; seconds) or
            "roofline" (:func:`slackopt.hardware.roofline_s` of `gpu` from FLOPs and bytes).
            A fake model (parameters that are fake tensors, see "Fake profiling" in
            the module docstring) needs "roofline"; it is then traced once inside its
            ``FakeTensorMode`` (warmup 0, repeat 1).
        gpu: GPU preset ("a100"), path of a JSON file of peaks
            (:func:`slackopt.hardware.gpu_from_file`) or a GPU; needed for "roofline"
            (which uses the peak of each op's dtype); also picks the default link. Refused
            with "measure" on the CPU (CPU durations with a GPU's link); a measured CPU
            profile without it warns and records ``meta["timing_note"]``.
        link: host link (a :class:`~slackopt.hardware.Link` or preset name); default the
            GPU's link, else "pcie4".
        name: instance name (default :func:`instance_name`: model, tokens, GPU and
            link).
        warmup: unrecorded steps run first (lazy initialisation, allocator warm-up).
        repeat: recorded steps; durations are the per-op median (the op sequence must
            agree). The median of a few steps resists the outliers of a busy machine.
        max_recipe_ops: longest recompute recipe (ops); longer chains get no recipe.
        restore: put gradients, buffers and RNG states back as they were before the call
            (warm-up and profiled steps then leave no trace; every recorded step starts
            from the same state).
        host_memory_bytes: the instance's host pinned-memory limit (bytes), "gpu" for
            the host memory `gpu` attaches by design (Grace's on gh200 and gb200;
            :func:`slackopt.hardware.host_memory_limit`), or None (unlimited).

    Returns:
        The :class:`~slackopt.instance.Instance`; ``meta`` records the provenance (model
        class, input shapes and dtypes, torch version, device, timing mode, persistent
        bytes, recipe statistics).

    Raises:
        ProfileError: unknown timing mode or preset, a bad GPU file, roofline without a
            GPU, a GPU with measured CPU timing, a fake model with measured timing, fake
            and real tensors mixed, bad inputs, a ``torch.compile``d module, a
            loss that is not a scalar needing grad, repeats whose op sequences differ.
        MissingTorchError: PyTorch is not installed (at import).
    """
    _check_args(timing, warmup, repeat, max_recipe_ops)
    g = _resolve_gpu(gpu)
    if timing == "roofline" and g is None:
        raise ProfileError("timing='roofline' needs a GPU preset (gpu='a100', ...)")
    lk = _resolve_link(link, g)
    try:
        host = host_memory_limit(host_memory_bytes, g)
    except ValueError as e:
        raise ProfileError(str(e)) from None
    with within(fake_mode_of(model)):  # a batch callable makes its tensors fake too
        inputs, kwargs = as_model_inputs(example_inputs)
    fake = fake_mode_of(model, (inputs, kwargs))
    if fake is not None:
        if timing != "roofline":
            raise ProfileError(FAKE_TIMING_ERROR)
        warmup, repeat = 0, 1  # no lazy state to warm; the roofline gives the same each step
    refuse_compiled(model)
    note = _check_timing(timing, device_of(model, (inputs, kwargs)), g, lk)
    if note is not None:
        warnings.warn(note, UserWarning, stacklevel=2)
    with within(fake):
        rec, runs = _run_steps(model, inputs, kwargs, loss_fn, timing, g, warmup, repeat,
                               restore)

    device = device_of(model, (inputs, kwargs))
    meta = {
        "generator": GENERATOR,
        "params": {"timing": timing, "warmup": warmup, "repeat": repeat,
                   "max_recipe_ops": max_recipe_ops},
        **_provenance(model, inputs, kwargs),
        "spread": _spread(runs),
        "timing_note": note,
        "torch_version": str(torch.__version__),
        "device": device,
        "fake": fake is not None,
        "timing": timing,
        "gpu": g.name if g is not None else None,
        "link": lk.name,
    }
    name = name or instance_name(model, inputs, kwargs, g.name if g is not None else device,
                                 lk.name)
    return build_instance(rec.ops, rec.storages, name, lk, meta,
                          max_recipe_ops=max_recipe_ops, n_packs=rec.n_packs,
                          host_memory_bytes=host, **_persistent_keys(model, inputs, kwargs))


def _persistent_keys(model: Any, inputs: Any, kwargs: Any) -> dict[str, set[int]]:
    """The storage keys of the parameters, the buffers and the inputs (for
    :func:`~slackopt.torch.build.build_instance`)."""
    param_keys = {p.untyped_storage()._cdata for p in model.parameters()}
    buffer_keys = {b.untyped_storage()._cdata for b in model.buffers()} - param_keys
    input_keys = {s._cdata for x in tree_flatten((inputs, kwargs))[0]
                  if (s := storage_of(x)) is not None}
    return {"param_keys": param_keys, "buffer_keys": buffer_keys, "input_keys": input_keys}


def _check_args(timing: str, warmup: int, repeat: int, max_recipe_ops: int) -> None:
    """The arguments of :func:`profile_step` that need no torch; ProfileError if bad."""
    if timing not in ("measure", "roofline"):
        raise ProfileError(f"timing '{timing}' is not 'measure' or 'roofline'")
    if not (isinstance(warmup, int) and warmup >= 0 and isinstance(repeat, int) and repeat >= 1):
        raise ProfileError("warmup must be an integer >= 0 and repeat an integer >= 1")
    if not (isinstance(max_recipe_ops, int) and max_recipe_ops >= 1):
        raise ProfileError("max_recipe_ops must be an integer >= 1")


def _provenance(model: Any, inputs: tuple[Any, ...], kwargs: Mapping[str, Any]
                ) -> dict[str, Any]:
    """The model class, train mode, input shapes and dtypes and parameter dtype, for
    ``Instance.meta``."""
    params = next(iter(model.parameters()), None)
    return {
        "model_class": f"{type(model).__module__}.{type(model).__qualname__}",
        "training": bool(getattr(model, "training", True)),
        "input_shapes": [list(x.shape) if isinstance(x, torch.Tensor) else None
                         for x in inputs],
        "input_dtypes": [str(x.dtype).removeprefix("torch.") if isinstance(x, torch.Tensor)
                         else type(x).__name__ for x in inputs],
        "input_kwargs": {k: ([list(v.shape), str(v.dtype).removeprefix("torch.")]
                             if isinstance(v, torch.Tensor) else type(v).__name__)
                         for k, v in kwargs.items()},
        "param_dtype": (str(params.dtype).removeprefix("torch.") if params is not None
                        else None),
    }


def instance_name(model: Any, inputs: Sequence[Any], kwargs: Mapping[str, Any], gpu: str,
                  link: str) -> str:
    """The default name of a profiled instance: model, tokens, GPU and link.

    Args:
        model: the module (its class name is the first part).
        inputs, kwargs: the model's call arguments; the shape of ``input_ids`` when there
            is one (a language model's batch: batch x tokens), else of the first tensor
            among the positional and then the keyword arguments, as ``4x128``.
        gpu: the GPU preset's name, or the device the step ran on ("cpu", "cuda:0").
        link: the host link preset's name.

    Returns:
        ``<model class>-<shape>-<gpu>-<link>``, e.g. ``Qwen2ForCausalLM-1x8192-h100-pcie5``
        (the shape part is left out when no input is a tensor).
    """
    tensors = [kwargs["input_ids"]] if isinstance(kwargs.get("input_ids"), torch.Tensor) else []
    tensors += [x for x in (*inputs, *kwargs.values()) if isinstance(x, torch.Tensor)]
    parts = [type(model).__name__]
    if tensors:
        parts.append("x".join(str(int(d)) for d in tensors[0].shape) or "scalar")
    parts += [str(gpu).replace(":", ""), str(link)]
    return "-".join(parts)


def _run_steps(model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any],
               loss_fn: Callable[..., Any] | None, timing: str, g: GPU | None,
               warmup: int, repeat: int, restore: bool
               ) -> tuple[_Recorder, list[_Recorder]]:
    """Warm-up steps, then `repeat` recorded steps; the last recorder with the per-op
    median durations, and all recorders."""
    state = _StepState(model) if restore else None
    params = list(model.parameters())

    def fresh_grads() -> None:
        # Every profiled step starts without .grad: accumulation into an existing gradient
        # is not part of the step (the runtime recognises and skips it).
        for p in params:
            p.grad = None

    try:
        for _ in range(warmup):
            fresh_grads()
            loss = run_loss(model, inputs, loss_fn, kwargs)
            loss.backward()
            del loss
            if state is not None:
                state.restore()
        runs = []
        for _ in range(repeat):
            fresh_grads()
            runs.append(_trace(model, inputs, kwargs, loss_fn, timing, g))
            if state is not None:
                state.restore()
    finally:
        if state is not None:
            state.restore()
    rec = runs[-1]
    if repeat > 1:
        labels = [op.name for op in rec.ops]
        for other in runs[:-1]:
            if [op.name for op in other.ops] != labels:
                raise ProfileError("the op sequence differs between repeated steps; the step "
                                   "is not repeatable (data-dependent control flow?)")
        for i, op in enumerate(rec.ops):
            op.duration_s = float(statistics.median(r.ops[i].duration_s for r in runs))
    return rec, runs


def _spread(runs: Sequence[_Recorder]) -> dict[str, Any]:
    """How much the repeated measurements disagree: per-step totals (forward, backward;
    seconds) and the median over ops of (max - min) / median of each op's duration."""
    fwd = [sum(op.duration_s for op in r.ops if op.phase == "fwd") for r in runs]
    bwd = [sum(op.duration_s for op in r.ops if op.phase == "bwd") for r in runs]
    rel = []
    for i in range(len(runs[-1].ops)):
        ds = [r.ops[i].duration_s for r in runs]
        med = statistics.median(ds)
        if med > 0:
            rel.append((max(ds) - min(ds)) / med)
    return {"repeats": len(runs), "forward_s": fwd, "backward_s": bwd,
            "op_relative_range_median": float(statistics.median(rel)) if rel else 0.0}



def _resolve_gpu(g: GPU | str | None) -> GPU | None:
    if g is None or isinstance(g, GPU):
        return g
    try:
        return resolve_gpu(str(g))
    except KeyError as e:
        raise ProfileError(str(e.args[0])) from None
    except ValueError as e:
        raise ProfileError(str(e)) from None


CPU_TIMING_NOTE = (
    "the durations are measured on the CPU but copies are timed on a GPU host link "
    "({link}): CPU kernels are far slower than a GPU's, so swapping looks almost free "
    "and the plan is not one for a GPU. Profile on the GPU (model and inputs on cuda), or "
    "use timing='roofline' with gpu=PRESET or a JSON file of peaks (--timing roofline "
    "--gpu a100)")


def _check_timing(timing: str, device: str, g: GPU | None, lk: Link) -> str | None:
    """Measured CPU timing paired with a GPU: refused (gpu given) or a warning text."""
    if timing != "measure" or not device.startswith("cpu"):
        return None
    if g is not None:
        raise ProfileError(
            f"gpu='{g.name}' with timing='measure' on the CPU would pair CPU durations with "
            f"the {g.name}'s link; use timing='roofline' with that GPU, or profile on the "
            "GPU itself (then no gpu is needed)")
    return CPU_TIMING_NOTE.format(link=lk.name)


def _resolve_link(lk: Link | str | None, g: GPU | None) -> Link:
    if isinstance(lk, Link):
        return lk
    nm = lk if lk is not None else (g.default_link if g is not None else DEFAULT_LINK)
    try:
        return link_preset(str(nm))
    except KeyError as e:
        raise ProfileError(str(e.args[0])) from None


def profile_factory(
    target: str,
    input_shapes: Sequence[str | Sequence[int]] = (),
    *,
    input_dtypes: Sequence[str] | None = None,
    input_high: int | None = None,
    params: Mapping[str, Any] | None = None,
    device: str = "cpu",
    seed: int = 0,
    fake: bool = False,
    **profile_kwargs: Any,
) -> Instance:
    """Profile the model a user's factory builds (what ``slackopt profile`` runs).

    Args:
        target: ``MODULE:FACTORY`` or ``hf:PATH`` (:func:`build_from_factory` states the
            factory contract and ``hf:``).
        input_shapes: one shape per positional model input ("4x128" or a tuple).
        input_dtypes: one dtype name for all inputs or one per input.
        input_high: exclusive upper bound of integer inputs (default the vocabulary).
        params: keyword arguments of the factory (config fields for ``hf:``).
        device: "cpu", "cuda", "cuda:1", ...
        seed: the torch seed.
        fake: build the model and inputs under a ``FakeTensorMode``.
        **profile_kwargs: passed to :func:`profile_step` (timing, gpu, link, name, warmup,
            repeat, max_recipe_ops, host_memory_bytes); `fake` needs timing="roofline"
            and a gpu.

    Returns:
        The instance; ``meta`` also records ``factory`` (resolved by
        :func:`resolve_factory`, so :func:`build_from_factory` finds it from any directory),
        ``factory_params``, ``seed``, ``input_high``, ``attn_implementation`` (the
        attention a Hugging Face model runs, ``config._attn_implementation``: "sdpa",
        "eager", ...; None for other models) and ``notes`` (what the profile should be
        read with, :func:`slackopt.torch.hf.hf_notes`; each is also a :class:`ProfileNote`
        warning).

    Raises:
        ProfileError: a bad target, factory result, shape, dtype or device, measured timing
            with `fake`, or the model failing on the inputs (the model's error is quoted).
    """
    if fake and profile_kwargs.get("timing", "measure") != "roofline":
        raise ProfileError(FAKE_TIMING_ERROR)
    model, inputs, loss_fn = build_from_factory(
        target, input_shapes, input_dtypes=input_dtypes, input_high=input_high, params=params,
        device=device, seed=seed, fake=fake)
    notes = hf_notes(model, inputs) if target.startswith(HF_PREFIX) else []
    for note in notes:
        warnings.warn(note, ProfileNote, stacklevel=2)
    try:
        inst = profile_step(model, inputs, loss_fn, **profile_kwargs)
    except SlackoptError:
        raise
    except Exception as e:
        shown = ", ".join("x".join(map(str, x.shape)) if isinstance(x, torch.Tensor) else
                          type(x).__name__ for x in tree_flatten(inputs)[0])
        raise ProfileError(f"the model from '{target}' failed on inputs of shapes [{shown}]: "
                           f"{type(e).__name__}: {e}") from None
    inst.meta["factory"] = resolve_factory(target)
    inst.meta["input_high"] = input_high if input_high is not None else vocab_size(model)
    inst.meta["factory_params"] = {str(k): v for k, v in (params or {}).items()}
    inst.meta["seed"] = seed
    inst.meta["attn_implementation"] = getattr(getattr(model, "config", None),
                                               "_attn_implementation", None)
    inst.meta["notes"] = notes
    return inst


__all__ = ["CPU_TIMING_NOTE", "DEFAULT_LINK", "instance_name",
           "profile_factory", "profile_step"]
