"""Read one real PyTorch training step into an :class:`~slackopt.instance.Instance`.

:func:`profile_step` runs one forward pass (model and loss) and one backward pass of a
``torch.nn.Module`` and records, below autograd, every ATen operator in execution order
with a duration, and every tensor storage with its size, producer, readers and a
recompute recipe. The result is an ordinary instance: save it with
:func:`slackopt.io.save_instance`, plan it with any solver, score the plan with the
evaluator, and run the plan on the real module with :mod:`slackopt.torch_runtime`.

Needs PyTorch (``pip install 'slackopt[torch]'``); ``import slackopt`` does not import this
module, so the core stays usable without torch. Importing it without torch raises
:class:`MissingTorchError` (a :class:`~slackopt.errors.SlackoptError`).

Usage::

    from slackopt import io, solve
    from slackopt.profile import profile_step
    from slackopt.torch_runtime import execute_plan

    model.train()
    inst = profile_step(model, (idx,), lambda logits, idx: loss(logits, idx))
    io.save_instance(inst, "model.json")
    plan = solve(inst, "slackswap", 0.5).plan
    report = execute_plan(model, (idx,), lambda logits, idx: loss(logits, idx), inst, plan)
    assert report.matches_plan()

From the command line: ``slackopt profile MODULE:FACTORY --input-shape 4x128 -o model.json``
(:func:`build_from_factory` states the factory contract), or a Hugging Face model from its
configuration alone: ``slackopt profile --fake hf:PATH/config.json -i 1x8192 --gpu h100 -o
F.json`` (``hf:`` in :func:`build_from_factory`).

Fake profiling (any model size, no GPU)
---------------------------------------
A model whose parameters are fake tensors (``FakeTensor``, made under PyTorch's
``FakeTensorMode``, ``torch._subclasses.fake_tensor``; ``fake=True`` of
:func:`build_from_factory`) is profiled
by the same tracer inside its fake mode: every ATen call runs its meta kernel, which
computes output shapes, dtypes, strides and storage aliasing but allocates no data, so
memory use does not grow with the model or the batch. The op sequence, storages, views,
in-place writes, random ops and recipes are those of the real step on the same device
type (the tracer sits above the fake mode and sees the calls autograd makes, as in a real
step); durations come from the roofline (fake tensors have no run time to measure). The
tests check that a fake and a real roofline profile of the same models are equal.
Source: PyTorch documentation, "Fake tensor" (torch.compile internals: ``FakeTensorMode``,
meta kernels, ``fake_mode.from_tensor``).

How the step is read
--------------------
- **Operators** come from a ``TorchDispatchMode`` (``torch.utils._python_dispatch``), which
  sees every ATen call below autograd, forward and backward, in the order it runs. Pure view
  ops (``func.is_view``, in-place view ops, ``_unsafe_view``) allocate nothing and move no
  data; they are not instance ops (a read through a view is a read of its storage).
- **Durations** (``timing="measure"``): ``time.perf_counter`` around each CPU call; a pair
  of CUDA events around each call on a GPU (resolved after one synchronisation at the end).
  The per-op median of the repeated steps is kept, and their spread in ``meta["spread"]``.
  Measured CPU durations are not a GPU's: paired with a GPU preset they are refused, and
  alone they come with a warning (``meta["timing_note"]``).
  ``timing="roofline"``: :func:`slackopt.hardware.roofline_s` of the GPU (a preset or a
  JSON file of peaks), at the peak of the op's dtype, from the op's FLOPs
  (``torch.utils.flop_counter``'s formulas; fused attention, CPU flash included, by
  :func:`sdpa_flops`, which also counts grouped-query attention) and the bytes it
  reads and writes. FLOPs are recorded in both modes (``Op.flops``).
- **Tensors** are storages. Identity is the storage object (its ``StorageImpl``), held by a
  weak reference for the whole step, so an address that the allocator reuses after a free
  is a new tensor, and all views of one storage are one tensor of the storage's size.
  A storage first written by op p and then modified in place by ops w1..wk of the same
  pass becomes two instance tensors: ``NAME.pre`` (p until the op before wk) and ``NAME``
  produced by wk, the value autograd saves (it forbids later in-place changes).
- **Saved tensors** are the ones the backward pass reads. ``saved_tensors_hooks`` tells
  which storages autograd packs and when the backward pass unpacks them; every backward
  ATen op reading a storage is a reader, and an unpacked storage no op reads is charged to
  the next backward op. A storage the backward pass reads although autograd never packed it
  (a custom ``autograd.Function`` keeping it as a ``ctx`` attribute) is saved too, but the
  runtime cannot move it: it is listed in ``meta["unmanaged_saved"]``; plan it keep.
- **Persistent tensors** - parameters, buffers, the example inputs and any other storage
  that exists before the step (first seen as an input) - are model state held by the
  caller: they are outside the activation budget, never swapped or recomputed, and not
  instance tensors (their bytes are in ``meta["persistent_bytes"]``).
- **Recipes.** A saved storage is rebuilt by re-running its producer and in-place writers;
  an input of those ops that is saved is a recipe input, a persistent one is always there,
  and an input that is neither is rebuilt inside the same recipe (its producer and writers
  join the recipe and its bytes count as ``transient_bytes``), up to ``max_recipe_ops``
  ops. Inputs read only for their shape (``empty_like`` and friends) are not data inputs.
  No recipe (c = inf) when the chain is longer, reaches a never-recompute op or a pass
  boundary. Random ops (``torch.Tag.nondeterministic_seeded`` with non-zero dropout) are
  marked ``Op.random``; the runtime re-runs them from the RNG state saved just before the
  op (PyTorch keeps generator states on the host, even for CUDA, so they use no device
  memory and the instance holds no tensor for them). Ops with data-dependent output
  shapes or values (``torch.Tag.dynamic_output_shape`` / ``data_dependent_output``),
  collectives (``c10d`` namespaces), random ops drawing from an explicit generator and ops
  that write persistent state (BatchNorm's running statistics) are ``Op.never_recompute``.

Sources: PyTorch documentation of ``torch.autograd.graph.saved_tensors_hooks`` ("Hooks for
saved tensors") and of ``TorchDispatchMode`` (``__torch_dispatch__``, "Extending PyTorch");
Capuchin (Peng et al., ASPLOS 2020) for swapping and recomputing from a measured profile
of one iteration; Checkmate (Jain et al., MLSys 2020) for rebuilding from saved inputs.
"""

from __future__ import annotations

import contextlib
import math
import re
import statistics
import time
import warnings
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

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
from slackopt.instance import Instance, Op, Recipe, Tensor


class MissingTorchError(SlackoptError, ImportError):
    """PyTorch is not installed; ``pip install 'slackopt[torch]'``."""


try:
    import torch
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    from torch.multiprocessing.reductions import StorageWeakRef
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten
except ImportError as _e:  # pragma: no cover - exercised by the no-torch subprocess test
    raise MissingTorchError(
        "slackopt.profile and slackopt.torch_runtime need PyTorch; install it with "
        "pip install 'slackopt[torch]'") from _e


class ProfileError(SlackoptError, ValueError):
    """The step cannot be profiled: a bad loss, bad inputs, or an unknown preset."""


GENERATOR = "torch-profile"
"""``Instance.meta["generator"]`` of profiled instances."""

DEFAULT_LINK = "pcie4"
"""Host link used when neither ``link`` nor ``gpu`` says otherwise."""

# Ops whose first tensor argument is read only for its shape, dtype and strides.
META_ONLY_OPS = frozenset({
    "empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like",
    "randint_like", "new_empty", "new_empty_strided", "new_zeros", "new_ones", "new_full",
})
# Ops that alias their input without a view annotation in their schema.
ALIAS_OPS = frozenset({"_unsafe_view", "lift_fresh", "_reshape_alias"})
COLLECTIVE_NAMESPACES = frozenset({"c10d", "_c10d_functional", "c10d_functional",
                                   "_c10d_functional_autograd", "_dtensor"})

_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("attention", ("scaled_dot_product", "flash_attention", "efficient_attention",
                   "cudnn_attention")),
    ("gemm", ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "_scaled_mm", "addbmm",
              "dot", "mv", "addmv", "_int_mm", "_grouped_mm")),
    ("conv", ("convolution", "_convolution", "cudnn_convolution", "mkldnn_convolution",
              "_slow_conv2d_forward", "convolution_backward", "_slow_conv2d_backward")),
    ("layernorm", ("native_layer_norm", "native_layer_norm_backward", "layer_norm",
                   "rms_norm", "_fused_rms_norm", "_fused_rms_norm_backward")),
    ("batchnorm", ("native_batch_norm", "_native_batch_norm_legit",
                   "_native_batch_norm_legit_functional", "native_batch_norm_backward",
                   "cudnn_batch_norm", "cudnn_batch_norm_backward")),
    ("softmax", ("_softmax", "_safe_softmax", "_log_softmax", "_softmax_backward_data",
                 "_log_softmax_backward_data")),
    ("dropout", ("native_dropout", "native_dropout_backward", "bernoulli", "bernoulli_",
                 "_fused_dropout", "_masked_scale")),
    ("activation", ("relu", "relu_", "gelu", "gelu_backward", "silu", "silu_backward",
                    "tanh", "tanh_backward", "sigmoid", "sigmoid_backward",
                    "threshold_backward", "hardtanh", "leaky_relu")),
    ("embedding", ("embedding", "embedding_dense_backward", "embedding_backward")),
    ("loss", ("nll_loss_forward", "nll_loss_backward", "nll_loss2d_forward",
              "nll_loss2d_backward", "mse_loss", "mse_loss_backward", "cross_entropy_loss")),
)
_KIND_OF = {name: kind for kind, names in _KINDS for name in names}
_LAYER_RE = re.compile(r"(?:^|\.)(\d+)(?:\.|$)")


# ----------------------------------------------------------------------------- op helpers
def op_label(func: Any) -> str:
    """Short name of an ATen overload: ``addmm`` for ``aten.addmm.default``, ``add.Tensor``."""
    packet = func._overloadpacket.__name__
    ov = func._overloadname
    ns = getattr(func, "namespace", "aten")
    base = packet if ns == "aten" else f"{ns}.{packet}"
    return base if ov == "default" else f"{base}.{ov}"


def _packet(func: Any) -> str:
    return func._overloadpacket.__name__


def is_view_op(func: Any) -> bool:
    """True for ops that only make views (no data moved, nothing allocated)."""
    try:
        if func.is_view:
            return True
        tags = func.tags
    except AttributeError:  # pragma: no cover - higher-order ops
        return False
    return torch.Tag.inplace_view in tags or _packet(func) in ALIAS_OPS


def op_kind(func: Any) -> str:
    """Operator class: gemm, attention, layernorm, dropout, ..., else pointwise/reduction/other."""
    name = _packet(func)
    if getattr(func, "namespace", "aten") in COLLECTIVE_NAMESPACES:
        return "collective"
    kind = _KIND_OF.get(name) or _KIND_OF.get(name.rstrip("_"))
    if kind:
        return kind
    for k, keys in _KINDS[:1]:
        if any(s in name for s in keys):
            return k
    tags = getattr(func, "tags", ())
    if torch.Tag.pointwise in tags:
        return "pointwise"
    if torch.Tag.reduction in tags:
        return "reduction"
    return "other"


def _arg(func: Any, args: Sequence[Any], kwargs: Mapping[str, Any], name: str) -> Any:
    for i, a in enumerate(func._schema.arguments):
        if a.name == name:
            if not a.kwarg_only and i < len(args):
                return args[i]
            return kwargs.get(name, a.default_value if a.has_default_value() else None)
    return None


def is_random_op(func: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
    """The op draws random numbers: it has ``torch.Tag.nondeterministic_seeded``, and its
    dropout probability (``dropout_p``, or ``p`` of a dropout op) is not 0."""
    if torch.Tag.nondeterministic_seeded not in getattr(func, "tags", ()):
        return False
    names = {a.name for a in func._schema.arguments}
    if "dropout_p" in names:
        prob = _arg(func, args, kwargs, "dropout_p")
    elif "p" in names and "dropout" in _packet(func):
        prob = _arg(func, args, kwargs, "p")
    else:
        return True
    return not (isinstance(prob, (int, float)) and prob == 0)


def _has_generator(args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
    return any(isinstance(x, torch.Generator) for x in tree_flatten((args, kwargs))[0])


def is_never_recompute(func: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
    """Collectives, data-dependent output shapes or values, and random ops with an explicit
    generator (whose state the runtime cannot restore)."""
    if getattr(func, "namespace", "aten") in COLLECTIVE_NAMESPACES:
        return True
    tags = getattr(func, "tags", ())
    if torch.Tag.dynamic_output_shape in tags or torch.Tag.data_dependent_output in tags:
        return True
    return torch.Tag.nondeterministic_seeded in tags and _has_generator(args, kwargs)


# Ops that update running statistics in training without saying so in their schema.
_HIDDEN_WRITES = {
    "native_batch_norm": ("running_mean", "running_var"),
    "cudnn_batch_norm": ("running_mean", "running_var"),
    "miopen_batch_norm": ("running_mean", "running_var"),
}


def written_tensors(func: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Any]:
    """Tensor arguments the op writes: schema ``Tensor(a!)`` (in-place, ``out=``), and the
    running statistics of training-mode batch norm, whose schema does not mark them."""
    out: list[Any] = []
    for i, a in enumerate(func._schema.arguments):
        if a.alias_info is None or not a.alias_info.is_write:
            continue
        v = args[i] if (not a.kwarg_only and i < len(args)) else kwargs.get(a.name)
        out.extend(x for x in tree_flatten(v)[0] if isinstance(x, torch.Tensor))
    hidden = _HIDDEN_WRITES.get(_packet(func))
    if hidden and _arg(func, args, kwargs, "training"):
        out.extend(x for n in hidden
                   if isinstance(x := _arg(func, args, kwargs, n), torch.Tensor))
    return out


def storage_of(t: Any) -> Any | None:
    """The untyped storage of a dense tensor with memory, else None (meta, sparse, ...)."""
    if not isinstance(t, torch.Tensor) or t.layout != torch.strided or t.is_meta:
        return None
    try:
        return t.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return None


def _tensor_bytes(t: Any) -> int:
    return int(t.numel()) * int(t.element_size())


def _layer_of(module_path: str) -> int:
    m = _LAYER_RE.search(module_path)
    return int(m.group(1)) if m else -1


# ----------------------------------------------------------------------------- tracing
@dataclass
class StorageRec:
    """One storage seen during the step.

    Attributes:
        key: identity (the StorageImpl address, unique while the tracer holds a weak ref).
        nbytes: storage size (bytes).
        alloc: index of the op that created it, None for persistent storages.
        name: instance tensor name (``OPNAME#k``), None for persistent storages.
        persistent: existed before the step (parameter, buffer, input, constant).
        readers: ops that read it (data or shape), in order.
        meta_readers: the ops among `readers` that read only its shape.
        writers: ops that wrote it in place after its creation.
        unpack_readers: backward ops charged with an unpack no op read.
        packs: how often autograd saved a view of it.
    """

    key: int
    nbytes: int
    alloc: int | None
    name: str | None
    persistent: bool
    device: str
    readers: list[int] = field(default_factory=list)
    writers: list[int] = field(default_factory=list)
    unpack_readers: list[int] = field(default_factory=list)
    meta_readers: list[int] = field(default_factory=list)
    packs: int = 0


@dataclass
class OpRec:
    """One recorded (non-view) ATen call."""

    index: int
    name: str
    label: str
    phase: str
    func: Any
    reads: list[int]
    meta_reads: list[int]
    writes: list[int]
    outputs: list[int]
    random: bool
    never_recompute: bool
    kind: str
    module: str = ""
    flops: float = 0.0
    bytes_moved: int = 0
    duration_s: float = 0.0


class StepTracer(TorchDispatchMode):
    """A ``TorchDispatchMode`` that numbers the non-view ATen calls of one step and tracks
    storages: which op created each, which ops read and wrote it.

    Subclasses hook in through :meth:`_before` (before the call runs, with the index the op
    will get), :meth:`_call` (runs it) and :meth:`_after` (with the :class:`OpRec`).
    While :attr:`paused` is set (inside saved-tensor hooks) calls pass through unrecorded.
    """

    def __init__(self) -> None:
        super().__init__()
        self.paused = False
        self.phase = "fwd"
        self.ops: list[OpRec] = []
        self.storages: dict[int, StorageRec] = {}
        self._refs: dict[int, Any] = {}
        self._count = {"fwd": 0, "bwd": 0}

    # -- storages
    def key_of(self, t: Any, *, create: bool = True) -> int | None:
        """Identity of `t`'s storage; registers a persistent storage when first seen."""
        st = storage_of(t)
        if st is None:
            return None
        k = st._cdata
        if k not in self.storages:
            if not create:
                return None
            self._refs[k] = StorageWeakRef(st)
            self.storages[k] = StorageRec(k, int(st.nbytes()), None, None, True,
                                          str(t.device))
        return k

    @contextlib.contextmanager
    def pause(self) -> Iterator[None]:
        old, self.paused = self.paused, True
        try:
            yield
        finally:
            self.paused = old

    # -- dispatch
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        # prim ops (prim.device, ...) are metadata queries a tensor subclass (FakeTensor)
        # answers through dispatch; a real tensor answers them without dispatching.
        if self.paused or is_view_op(func) or func.namespace == "prim":
            return func(*args, **kwargs)
        label = op_label(func)
        index = len(self.ops)
        phase = self.phase
        name = f"{'f' if phase == 'fwd' else 'b'}{self._count[phase]:04d}.{label}"
        token = self._before(index, name, func, args, kwargs)
        flat_in = [x for x in tree_flatten((args, kwargs))[0] if isinstance(x, torch.Tensor)]
        written = {id(x) for x in written_tensors(func, args, kwargs)}
        meta_ids = {id(args[0])} if (_packet(func) in META_ONLY_OPS and args
                                      and isinstance(args[0], torch.Tensor)) else set()
        reads: list[int] = []
        meta_reads: list[int] = []
        writes: list[int] = []
        for t in flat_in:
            k = self.key_of(t)
            if k is None:
                continue
            if id(t) in written:
                if k not in writes:
                    writes.append(k)
            elif id(t) in meta_ids:
                if k not in meta_reads:
                    meta_reads.append(k)
            elif k not in reads:
                reads.append(k)
        out = self._call(func, args, kwargs, token)
        outputs: list[int] = []
        for t in tree_flatten(out)[0]:
            st = storage_of(t)
            if st is None or st._cdata in self.storages:
                continue
            k = st._cdata
            self._refs[k] = StorageWeakRef(st)
            self.storages[k] = StorageRec(k, int(st.nbytes()), index, f"{name}#{len(outputs)}",
                                          False, str(t.device))
            outputs.append(k)
        # An op that writes persistent state (BatchNorm running statistics) must not run twice.
        never = (is_never_recompute(func, args, kwargs)
                 or any(self.storages[k].persistent for k in writes))
        rec = OpRec(index, name, label, phase, func, reads, meta_reads, writes, outputs,
                    is_random_op(func, args, kwargs), never, op_kind(func))
        for k in reads + meta_reads:
            self.storages[k].readers.append(index)
        for k in meta_reads:
            if k not in reads:
                self.storages[k].meta_readers.append(index)
        for k in writes:
            s = self.storages[k]
            (s.writers if not s.persistent else s.readers).append(index)
        self.ops.append(rec)
        self._count[phase] += 1
        self._after(rec, args, kwargs, out, token)
        return out

    def _before(self, index: int, name: str, func: Any, args: Any, kwargs: Any) -> Any:
        return None

    def _call(self, func: Any, args: Any, kwargs: Any, token: Any) -> Any:
        return func(*args, **kwargs)

    def _after(self, rec: OpRec, args: Any, kwargs: Any, out: Any, token: Any) -> None:
        return None


_SDPA_FWD = frozenset({
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu"})
"""Fused attention kernels whose first three arguments are q, k, v as (B, H, S, D)."""
_SDPA_BWD = frozenset(f"{n}_backward" for n in _SDPA_FWD)
"""Their backward kernels: the gradient of the output, then q, k, v."""


def sdpa_flops(q: Sequence[int], k: Sequence[int], v: Sequence[int],
               backward: bool = False) -> float:
    """FLOPs of one fused scaled-dot-product attention kernel from the shapes of q, k, v.

    The count of ``torch.utils.flop_counter`` (``sdpa_flop_count`` and
    ``sdpa_backward_flop_count``: two and five batched matrix products, the backward
    recomputing the scores), extended to grouped-query attention: k and v may have fewer
    heads than q (Llama-3, Mistral), each shared by a group of query heads, which PyTorch's
    formulas refuse in some releases (2.11: an assertion, so the op was priced as if it
    did no arithmetic). The causal mask is not discounted, as in PyTorch's count.

    Args:
        q: (B, Hq, Sq, Dq). k: (B, Hkv, Sk, Dq). v: (B, Hkv, Sk, Dv); Hq a multiple of Hkv.
        backward: the backward kernel (gradients of q, k and v).

    Returns:
        The FLOPs (multiply and add counted as two): 2 B Hq Sq Sk (Dq + Dv) forward,
        2 B Hq Sq Sk (3 Dq + 2 Dv) backward.

    Raises:
        ValueError: shapes that are not 4-D or do not fit one attention.
    """
    if not (len(q) == len(k) == len(v) == 4):
        raise ValueError(f"q, k, v must be 4-D (B, H, S, D), got {q}, {k}, {v}")
    b, hq, sq, dq = q
    if k[0] != b or v[0] != b or k[3] != dq or v[2] != k[2] or k[1] != v[1] \
            or k[1] < 1 or hq % k[1]:
        raise ValueError(f"q {tuple(q)}, k {tuple(k)}, v {tuple(v)} are not one attention")
    sk, dv = k[2], v[3]
    per = 2.0 * b * hq * sq * sk
    return per * (3 * dq + 2 * dv) if backward else per * (dq + dv)


def _flops(func: Any, args: Sequence[Any], kwargs: Mapping[str, Any], out: Any) -> float:
    """FLOPs of one call: :func:`sdpa_flops` for fused attention, :func:`grouped_mm_flops`,
    else ``torch.utils.flop_counter``'s formula (0 where it has none)."""
    from torch.utils import flop_counter as fc

    name = _packet(func)
    try:
        if name in _SDPA_FWD:
            return sdpa_flops(args[0].shape, args[1].shape, args[2].shape)
        if name in _SDPA_BWD:
            return sdpa_flops(args[1].shape, args[2].shape, args[3].shape, backward=True)
        if name == "_grouped_mm":
            return grouped_mm_flops(args[0].shape, args[1].shape)
        fn = fc.flop_registry.get(func._overloadpacket)
        if fn is not None:
            return float(fn(*args, **kwargs, out_val=out))
    except Exception:  # a formula that does not fit these arguments: unknown, not fatal
        return 0.0
    return 0.0


def grouped_mm_flops(a: Sequence[int], b: Sequence[int]) -> float:
    """FLOPs of ``aten._grouped_mm(a, b, offs)`` (``torch.nn.functional.grouped_mm``, the
    grouped GEMM of mixture-of-experts layers) from the shapes of its two matrices.

    The offsets split one dimension into groups (PyTorch's ``grouped_mm`` documentation):
    2D x 3D, ``a`` (M, K) rows split among the E matrices of ``b`` (E, K, N): 2 M K N; 3D x
    2D, the columns of ``b`` (K, N) split among the E matrices of ``a`` (E, M, K): 2 M K N;
    2D x 2D, the shared dimension K of ``a`` (M, K) and ``b`` (K, N) split, one output
    per group: 2 M K N; 3D x 3D, a batch of E products: 2 E M K N. The count assumes the
    offsets cover the whole split dimension (dropless routing: every token goes to its
    experts), which is what a fake tensor leaves to assume (its values are unknown);
    otherwise it is an upper bound.

    Args:
        a: shape of the first matrix (2D or 3D).
        b: shape of the second matrix (2D or 3D).

    Returns:
        The FLOPs (multiply and add counted as two).
    """
    if len(a) == 3 and len(b) == 2:
        return 2.0 * a[1] * a[2] * b[1]
    return 2.0 * math.prod(a) * b[-1]


class _Recorder(StepTracer):
    """The profiling tracer: timings, FLOPs, bytes, module paths, unpack readers."""

    def __init__(self, timing: str, gpu: GPU | None, module_stack: list[str]) -> None:
        super().__init__()
        self.timing = timing
        self.gpu = gpu
        self.module_stack = module_stack
        self.pending_unpacks: list[int] = []
        self._events: list[tuple[OpRec, Any, Any]] = []
        self.n_packs = 0

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
        rec.module = self.module_stack[-1] if (rec.phase == "fwd" and self.module_stack) else ""
        rec.flops = _flops(rec.func, args, kwargs, out)
        seen: set[int] = set()
        nb = 0
        for t in tree_flatten((args, kwargs, out))[0]:
            if isinstance(t, torch.Tensor) and id(t) not in seen and storage_of(t) is not None:
                seen.add(id(t))
                nb += _tensor_bytes(t)
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
                                        _compute_dtype(args, kwargs, out))
        if rec.phase == "bwd" and self.pending_unpacks:
            for k in self.pending_unpacks:
                s = self.storages[k]
                if rec.index not in s.readers and rec.index not in s.unpack_readers:
                    s.unpack_readers.append(rec.index)
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
        return t


def _compute_dtype(args: Any, kwargs: Any, out: Any) -> str | None:
    """The dtype a kernel computes in: that of its first floating-point input, else of its
    first floating-point output ("float32", "bfloat16"); None without one."""
    for group in ((args, kwargs), out):
        for t in tree_flatten(group)[0]:
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                return str(t.dtype).removeprefix("torch.")
    return None


def _cuda_device(args: Any, kwargs: Any) -> Any | None:
    for x in tree_flatten((args, kwargs))[0]:
        if isinstance(x, torch.Tensor) and x.is_cuda:
            return x.device
        if isinstance(x, torch.device) and x.type == "cuda":
            return x
    return None


# ----------------------------------------------------------------------------- the step
def default_loss(output: Any, *example_inputs: Any) -> Any:
    """The loss used when none is given: the sum over the floating-point output tensors
    that require grad of ``mean(out ** 2)`` (computed in float32 or wider).

    Raises:
        ProfileError: the output has no such tensor.
    """
    ts = [t for t in tree_flatten(output)[0]
          if isinstance(t, torch.Tensor) and t.is_floating_point() and t.requires_grad]
    if not ts:
        raise ProfileError("the model output has no floating-point tensor that requires "
                           "grad; pass a loss_fn")
    loss = ts[0].float().pow(2).mean()
    for t in ts[1:]:
        loss = loss + t.float().pow(2).mean()
    return loss


def as_input_tuple(example_inputs: Any) -> tuple[Any, ...]:
    """A single tensor becomes a 1-tuple; a list or tuple becomes a tuple."""
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    if isinstance(example_inputs, (list, tuple)):
        return tuple(example_inputs)
    raise ProfileError(f"example_inputs must be a tensor, a sequence of arguments, a dict of "
                       f"keyword arguments or a callable returning one, got "
                       f"{type(example_inputs).__name__}")


def as_model_inputs(example_inputs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The model's call arguments as (positional tuple, keyword dict).

    Accepts one tensor, a list or tuple of positional arguments, a dict of keyword
    arguments (a Hugging Face batch: ``{"input_ids": ..., "attention_mask": ...,
    "labels": ...}``), or a callable with no arguments returning one of those (called
    once per step).

    Raises:
        ProfileError: anything else (names the type).
    """
    if callable(example_inputs) and not isinstance(example_inputs, torch.Tensor):
        example_inputs = example_inputs()
    if isinstance(example_inputs, Mapping):
        if not all(isinstance(k, str) for k in example_inputs):
            raise ProfileError("a dict of example inputs must have str keys (keyword "
                               "argument names)")
        return (), dict(example_inputs)
    return as_input_tuple(example_inputs), {}


def run_loss(model: Any, inputs: Any, loss_fn: Callable[..., Any] | None,
             kwargs: Mapping[str, Any] | None = None) -> Any:
    """``loss_fn(model(*inputs, **kwargs), *inputs, **kwargs)`` checked to be a scalar
    tensor that needs grad. `inputs` may also be anything :func:`as_model_inputs` takes
    (then `kwargs` must be None). Without a loss_fn, an output with a scalar ``loss``
    attribute or key (a Hugging Face model given ``labels``) gives that loss, else
    :func:`default_loss`."""
    if kwargs is None:
        inputs, kwargs = as_model_inputs(inputs)
    out = model(*inputs, **kwargs)
    if loss_fn is None:
        hf = _output_loss(out)
        loss = hf if hf is not None else default_loss(out, *inputs)
    else:
        loss = loss_fn(out, *inputs, **kwargs)
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise ProfileError("loss_fn must return a tensor with one element, got "
                           f"{type(loss).__name__}"
                           + (f" of shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor)
                              else ""))
    if not loss.requires_grad:
        raise ProfileError("the loss does not require grad: is the model in no_grad mode, "
                           "or are all parameters frozen?")
    return loss


def _output_loss(out: Any) -> Any:
    """The ``loss`` entry of a model output (Hugging Face ``ModelOutput``), or None."""
    loss = out.get("loss") if isinstance(out, Mapping) else getattr(out, "loss", None)
    if isinstance(loss, torch.Tensor) and loss.numel() == 1:
        return loss
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


@contextlib.contextmanager
def _module_tracker(model: Any, stack: list[str]) -> Iterator[None]:
    handles = []

    def pre(name: str) -> Callable[..., None]:
        def hook(mod: Any, args: Any) -> None:
            stack.append(name)
        return hook

    def post(mod: Any, args: Any, out: Any) -> None:
        if stack:
            stack.pop()

    for name, mod in model.named_modules():
        handles.append(mod.register_forward_pre_hook(pre(name)))
        handles.append(mod.register_forward_hook(post))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _trace(model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any],
           loss_fn: Callable[..., Any] | None, timing: str, g: GPU | None) -> _Recorder:
    stack: list[str] = []
    rec = _Recorder(timing, g, stack)
    with _module_tracker(model, stack), rec:
        with torch.autograd.graph.saved_tensors_hooks(rec.pack, rec.unpack):
            loss = run_loss(model, inputs, loss_fn, kwargs)
        rec.phase = "bwd"
        loss.backward()
        if rec.pending_unpacks and rec.ops and rec.ops[-1].phase == "bwd":
            last = rec.ops[-1].index
            for k in rec.pending_unpacks:
                if last not in rec.storages[k].readers:
                    rec.storages[k].unpack_readers.append(last)
            rec.pending_unpacks.clear()
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
    run on it later (:mod:`slackopt.torch_runtime` checks).

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
        name: instance name (default ``<model class>-profile``).
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
    if timing not in ("measure", "roofline"):
        raise ProfileError(f"timing '{timing}' is not 'measure' or 'roofline'")
    if not (isinstance(warmup, int) and warmup >= 0 and isinstance(repeat, int) and repeat >= 1):
        raise ProfileError("warmup must be an integer >= 0 and repeat an integer >= 1")
    if not (isinstance(max_recipe_ops, int) and max_recipe_ops >= 1):
        raise ProfileError("max_recipe_ops must be an integer >= 1")
    g = _resolve_gpu(gpu)
    if timing == "roofline" and g is None:
        raise ProfileError("timing='roofline' needs a GPU preset (gpu='a100', ...)")
    lk = _resolve_link(link, g)
    try:
        host = host_memory_limit(host_memory_bytes, g)
    except ValueError as e:
        raise ProfileError(str(e)) from None
    with _within(fake_mode_of(model)):  # a batch callable makes its tensors fake too
        inputs, kwargs = as_model_inputs(example_inputs)
    fake = fake_mode_of(model, (inputs, kwargs))
    if fake is not None:
        if timing != "roofline":
            raise ProfileError(FAKE_TIMING_ERROR)
        warmup, repeat = 0, 1  # no lazy state to warm; the roofline gives the same each step
    _refuse_compiled(model)
    note = _check_timing(timing, _device_of(model, (inputs, kwargs)), g, lk)
    if note is not None:
        warnings.warn(note, UserWarning, stacklevel=2)
    with _within(fake):
        rec, runs = _run_steps(model, inputs, kwargs, loss_fn, timing, g, warmup, repeat,
                               restore)

    param_keys = {p.untyped_storage()._cdata for p in model.parameters()}
    buffer_keys = {b.untyped_storage()._cdata for b in model.buffers()} - param_keys
    input_keys = {s._cdata for x in tree_flatten((inputs, kwargs))[0]
                  if (s := storage_of(x)) is not None}
    params = next(iter(model.parameters()), None)
    meta = {
        "generator": GENERATOR,
        "params": {"timing": timing, "warmup": warmup, "repeat": repeat,
                   "max_recipe_ops": max_recipe_ops},
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
        "spread": _spread(runs),
        "timing_note": note,
        "torch_version": str(torch.__version__),
        "device": _device_of(model, (inputs, kwargs)),
        "fake": fake is not None,
        "timing": timing,
        "gpu": g.name if g is not None else None,
        "link": lk.name,
    }
    return build_instance(rec.ops, rec.storages, name or f"{type(model).__name__}-profile",
                          lk, meta, max_recipe_ops=max_recipe_ops, param_keys=param_keys,
                          buffer_keys=buffer_keys, input_keys=input_keys, n_packs=rec.n_packs,
                          host_memory_bytes=host)


FAKE_TIMING_ERROR = (
    "fake profiling (FakeTensor parameters, --fake) has no run time to measure: use roofline "
    "timing on a GPU preset (timing='roofline', gpu='h100'; --timing roofline --gpu h100)")


def fake_mode_of(model: Any, example_inputs: Any = ()) -> Any | None:
    """The ``FakeTensorMode`` the model's parameters and buffers and the input tensors
    belong to, or None when they are all real tensors.

    Args:
        model: a ``torch.nn.Module``.
        example_inputs: tensors, sequences or dicts of them (anything ``tree_flatten``
            reads).

    Raises:
        ProfileError: fake and real tensors mixed, or fake tensors of two fake modes (build
            the model and its inputs under one ``FakeTensorMode``, as
            :func:`build_from_factory` with ``fake=True`` does).
    """
    ts = [*model.parameters(), *model.buffers(),
          *(x for x in tree_flatten(example_inputs)[0] if isinstance(x, torch.Tensor))]
    modes = {id(t.fake_mode): t.fake_mode for t in ts if isinstance(t, FakeTensor)}
    if not modes:
        return None
    if len(modes) > 1 or any(not isinstance(t, FakeTensor) for t in ts):
        raise ProfileError("the model and its inputs mix real tensors and fake tensors (or "
                           "fake tensors of two FakeTensorModes): build both under one "
                           "FakeTensorMode (build_from_factory(..., fake=True))")
    return next(iter(modes.values()))


def _within(mode: Any | None) -> Any:
    """`mode` (a FakeTensorMode) as a context manager; no-op for None."""
    return contextlib.nullcontext() if mode is None else mode


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


def _refuse_compiled(model: Any) -> None:
    """``torch.compile`` output is refused: its step is not the eager step the profile and
    the runtime see (they would silently run eager)."""
    mods = [model] + (list(model.modules()) if hasattr(model, "modules") else [])
    for m in mods:
        if type(m).__name__ == "OptimizedModule" or hasattr(m, "_orig_mod") \
                or hasattr(getattr(m, "forward", None), "_torchdynamo_orig_callable"):
            raise ProfileError(
                "the model is a torch.compile'd module: slackopt profiles and runs the eager "
                "step, whose kernels and saved tensors differ from the compiled one. Pass the "
                "module before torch.compile (model._orig_mod), plan it, and compile after "
                "if you do not run the plan")


def _device_of(model: Any, inputs: Any) -> str:
    for x in [*model.parameters(), *tree_flatten(inputs)[0]]:
        if isinstance(x, torch.Tensor):
            return str(x.device)
    return "cpu"


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


# ----------------------------------------------------------------------------- instance
def build_instance(
    ops: Sequence[OpRec],
    storages: Mapping[int, StorageRec],
    name: str,
    link: Link,
    meta: Mapping[str, Any],
    *,
    max_recipe_ops: int = 6,
    param_keys: Collection[int] = (),
    buffer_keys: Collection[int] = (),
    input_keys: Collection[int] = (),
    n_packs: int = 0,
    host_memory_bytes: int | None = None,
) -> Instance:
    """Turn a trace (ops and storages) into an :class:`Instance` (see the module docstring);
    `host_memory_bytes` is its host pinned-memory limit (None: unlimited).

    Raises:
        InstanceError: if the trace breaks an instance rule (a bug here, not user input).
    """
    n_fwd = sum(1 for op in ops if op.phase == "fwd")
    phase_of = [op.phase for op in ops]

    # Versions: `final` is the op that produced the value autograd saves.
    final: dict[int, int] = {}
    for k, s in storages.items():
        if s.persistent or s.alloc is None:
            continue
        same = [w for w in s.writers if phase_of[w] == phase_of[s.alloc]]
        final[k] = max(same) if same else s.alloc

    def readers_after(s: StorageRec, lo: int) -> list[int]:
        # A backward op that reads a forward tensor only for its shape (ones_like(loss))
        # does not make it saved: autograd never packs it.
        assert s.alloc is not None
        ph = phase_of[s.alloc]
        other_writes = [w for w in s.writers if phase_of[w] != ph]
        reads = [i for i in s.readers if phase_of[i] == ph or i not in s.meta_readers]
        return sorted({i for i in (*reads, *other_writes, *s.unpack_readers) if i > lo})

    saved: set[int] = set()
    for k, f in final.items():
        s = storages[k]
        if phase_of[f] == "fwd" and any(phase_of[i] == "bwd" for i in readers_after(s, f)):
            saved.add(k)

    layer = [_layer_of(op.module) if op.phase == "fwd" else -1 for op in ops]
    for op in ops:
        if op.phase == "bwd":
            ls = [layer[storages[k].alloc] for k in op.reads
                  if not storages[k].persistent and phase_of[storages[k].alloc] == "fwd"]
            layer[op.index] = max(ls) if ls else -1

    inst_ops = [Op(op.name, op.phase, float(op.duration_s), layer[op.index], op.kind, 0,
                   float(op.flops), op.never_recompute, op.random) for op in ops]
    op_name = [op.name for op in ops]

    reasons: dict[str, int] = {}
    tensors: list[Tensor] = []
    for k, s in storages.items():
        if k not in final:
            continue
        assert s.name is not None and s.alloc is not None
        f = final[k]
        if f != s.alloc:
            pre = sorted({i for i in (*s.readers, *s.writers) if s.alloc < i < f})
            tensors.append(Tensor(s.name + ".pre", s.nbytes, op_name[s.alloc],
                                  tuple(op_name[i] for i in pre), None,
                                  _category(ops, storages, k)))
        recipe = None
        if k in saved:
            recipe, why = _recipe(k, ops, storages, final, saved, max_recipe_ops)
            if recipe is None:
                reasons[why] = reasons.get(why, 0) + 1
        tensors.append(Tensor(s.name, s.nbytes, op_name[f],
                              tuple(op_name[i] for i in readers_after(s, f)), recipe,
                              _category(ops, storages, k)))

    pers = {"parameters": 0, "buffers": 0, "inputs": 0, "other": 0}
    for k, s in storages.items():
        if not s.persistent:
            continue
        cls = ("parameters" if k in param_keys else "buffers" if k in buffer_keys
               else "inputs" if k in input_keys else "other")
        pers[cls] += s.nbytes
    meta = dict(meta)
    meta["persistent_bytes"] = pers
    meta["ops"] = {"forward": n_fwd, "backward": len(ops) - n_fwd}
    meta["saved_tensor_packs"] = n_packs
    meta["recipes"] = {"rebuildable": len(saved) - sum(reasons.values()),
                       "not_rebuildable": dict(sorted(reasons.items()))}
    # Read by the backward pass without autograd packing them (a custom Function keeping
    # tensors as ctx attributes): the runtime cannot swap or drop these; plan them keep.
    meta["unmanaged_saved"] = sorted(str(storages[k].name) for k in saved
                                     if storages[k].packs == 0)
    return Instance(name, inst_ops, tensors, link, meta=meta, host_memory_bytes=host_memory_bytes)


def _category(ops: Sequence[OpRec], storages: Mapping[int, StorageRec], k: int) -> str:
    s = storages[k]
    assert s.alloc is not None
    chain = [s.alloc, *s.writers]
    if any(ops[i].random for i in chain if ops[i].phase == ops[s.alloc].phase):
        return "mask"
    if ops[s.alloc].phase == "bwd":
        return "grad"
    return ops[chain[-1] if s.writers else s.alloc].kind


def _recipe(target: int, ops: Sequence[OpRec], storages: Mapping[int, StorageRec],
            final: Mapping[int, int], saved: set[int], max_ops: int
            ) -> tuple[Recipe | None, str]:
    """The recipe of saved storage `target`, or (None, reason)."""
    chain: set[int] = set()
    inputs: set[int] = set()
    transient: set[int] = set()
    rebuilt: set[int] = set()

    class _Fail(Exception):
        pass

    def need(k: int, before: int) -> None:
        s = storages[k]
        if s.persistent:
            return
        if k != target and k in saved and final[k] < before:
            inputs.add(k)
            return
        assert s.alloc is not None
        if ops[s.alloc].phase != "fwd":
            raise _Fail("reads a backward tensor")
        if k != target:
            transient.add(k)
        rebuilt.add(k)
        for w in [s.alloc, *[w for w in s.writers if w < before]]:
            if w in chain:
                continue
            op = ops[w]
            if op.phase != "fwd":
                raise _Fail("written in the backward pass")
            if op.never_recompute:
                raise _Fail("never_recompute op")
            chain.add(w)
            if len(chain) > max_ops:
                raise _Fail(f"chain longer than {max_ops} ops")
            for u in op.reads:
                if u != k:
                    need(u, w)

    try:
        need(target, final[target] + 1)
    except _Fail as e:
        return None, str(e)
    if inputs & rebuilt:
        return None, "input also rebuilt"
    for w in chain:
        if any(k not in rebuilt for k in ops[w].writes):
            return None, "writes a tensor outside the recipe"
    order = sorted(chain)
    names = tuple(ops[i].name for i in order)
    ins = tuple(storages[k].name for k in sorted(inputs, key=lambda k: final[k]))
    return Recipe(names, ins, int(sum(storages[k].nbytes for k in transient))), ""  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- factories
_DTYPES = {
    "float32": "float32", "float": "float32", "fp32": "float32", "float64": "float64",
    "double": "float64", "float16": "float16", "half": "float16", "fp16": "float16",
    "bfloat16": "bfloat16", "bf16": "bfloat16", "int64": "int64", "long": "int64",
    "int32": "int32", "int": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8",
    "bool": "bool",
}


def parse_shape(text: str) -> tuple[int, ...]:
    """``"4x128"``, ``"4,128"`` or ``"4 128"`` -> ``(4, 128)``; ``"scalar"`` or ``""`` -> ``()``.

    Raises:
        ProfileError: a part is not an integer >= 1.
    """
    t = text.strip().lower()
    if t in ("", "scalar", "()"):
        return ()
    parts = [p for p in re.split(r"[x,\s*]+", t.strip("()[]")) if p]
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        raise ProfileError(f"input shape '{text}' is not like 4x128 (integers separated by "
                           "x or commas)") from None
    if any(d < 1 for d in dims):
        raise ProfileError(f"input shape '{text}' (--input-shape) has a dimension below 1; "
                           "each must be an integer >= 1 (4x128)")
    return dims


def parse_dtype(text: str) -> Any:
    """A torch dtype from its name ("float32", "bf16", "int64", ...).

    Raises:
        ProfileError: an unknown name.
    """
    key = text.strip().lower().removeprefix("torch.")
    if key not in _DTYPES:
        raise ProfileError(f"dtype '{text}' is unknown; use one of "
                           f"{', '.join(sorted(set(_DTYPES.values())))}")
    return getattr(torch, _DTYPES[key])


def load_factory(target: str) -> Callable[..., Any]:
    """Resolve ``MODULE:FACTORY`` to the callable.

    MODULE is a dotted module name, imported with the current directory first on
    ``sys.path`` (as ``python -m`` does), or a path to a ``.py`` file; FACTORY is an
    attribute of it (dots reach nested attributes: ``models:Zoo.gpt``).

    Raises:
        ProfileError: malformed target, the module cannot be imported (its error is
            quoted), no such attribute, or it is not callable.
    """
    import importlib
    import importlib.util
    import os
    import sys
    from pathlib import Path

    mod_name, sep, attr = target.rpartition(":")
    if not sep or not mod_name or not attr:
        raise ProfileError(f"'{target}' is not MODULE:FACTORY (for example mymodels:make_gpt)")
    try:
        if mod_name.endswith(".py") or os.sep in mod_name or "/" in mod_name:
            path = Path(mod_name)
            if not path.is_file():
                raise ProfileError(f"module file '{mod_name}' not found")
            mname = path.stem if path.stem.isidentifier() else "_slackopt_factory"
            if mname in sys.modules:
                mname = f"_slackopt_factory_{abs(hash(str(path.resolve())))}"
            spec = importlib.util.spec_from_file_location(mname, path)
            if spec is None or spec.loader is None:
                raise ProfileError(f"cannot import '{mod_name}' as a Python file")
            module = importlib.util.module_from_spec(spec)
            here = str(path.resolve().parent)  # sibling imports work as for `python file`
            if here not in sys.path:
                sys.path.insert(0, here)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        else:
            cwd = os.getcwd()
            if cwd not in sys.path:
                sys.path.insert(0, cwd)
            module = importlib.import_module(mod_name)
    except ProfileError:
        raise
    except Exception as e:
        raise ProfileError(f"cannot import module '{mod_name}': {type(e).__name__}: {e}") from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ProfileError(f"module '{mod_name}' has no attribute '{attr}'")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ProfileError(f"'{target}' is not callable")
    return obj


def resolve_factory(target: str) -> str:
    """`target` in a form that loads from any working directory: a ``.py`` path or an
    ``hf:`` config path made absolute, a top-level module found in the current directory
    turned into its absolute file path; a dotted or installed module is kept as it is
    (importable anywhere).

    Raises:
        ProfileError: malformed target.
    """
    import importlib.util
    import os
    from pathlib import Path

    if target.startswith(HF_PREFIX):
        return HF_PREFIX + str(Path(target[len(HF_PREFIX):]).resolve())
    mod_name, sep, attr = target.rpartition(":")
    if not sep or not mod_name or not attr:
        raise ProfileError(f"'{target}' is not MODULE:FACTORY (for example mymodels:make_gpt)")
    if mod_name.endswith(".py") or os.sep in mod_name or "/" in mod_name:
        return f"{Path(mod_name).resolve()}:{attr}"
    if "." not in mod_name:
        local = Path.cwd() / f"{mod_name}.py"
        if local.is_file():
            return f"{local.resolve()}:{attr}"
    try:
        spec = importlib.util.find_spec(mod_name)
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin and "." not in mod_name \
            and Path(spec.origin).parent == Path.cwd():
        return f"{Path(spec.origin).resolve()}:{attr}"
    return target


def vocab_size(model: Any) -> int | None:
    """The vocabulary size of a language model: ``model.config.vocab_size`` (Hugging Face),
    else ``num_embeddings`` of its first ``nn.Embedding``; None if it has neither."""
    cfg = getattr(model, "config", None)
    v = getattr(cfg, "vocab_size", None)
    if isinstance(v, int) and v > 0:
        return v
    for m in model.modules():
        if isinstance(m, torch.nn.Embedding):
            return int(m.num_embeddings)
    return None


def make_inputs(shapes: Sequence[tuple[int, ...]], dtypes: Sequence[Any], device: Any,
                high: int = 2) -> tuple[Any, ...]:
    """Random inputs: ``randn`` for floating dtypes, ``randint(0, high)`` for integer ones,
    random booleans for bool.

    Args:
        shapes: one shape per positional input.
        dtypes: one dtype per input, or one for all.
        device: where to put them.
        high: exclusive upper bound of integer inputs (token ids: the vocabulary size).

    Raises:
        ProfileError: the number of dtypes is neither 1 nor the number of shapes.
    """
    if len(dtypes) == 1:
        dtypes = list(dtypes) * len(shapes)
    if len(dtypes) != len(shapes):
        raise ProfileError(f"{len(dtypes)} input dtypes for {len(shapes)} input shapes; give "
                           "one dtype for all or one per input")
    out = []
    for shp, dt in zip(shapes, dtypes, strict=True):
        if dt == torch.bool:
            out.append(torch.randint(0, 2, shp, device=device).bool())
        elif dt.is_floating_point or dt.is_complex:
            out.append(torch.randn(shp, dtype=dt, device=device))
        else:
            out.append(torch.randint(0, max(int(high), 1), shp, dtype=dt, device=device))
    return tuple(out)


HF_PREFIX = "hf:"
"""A target ``hf:PATH`` names a Hugging Face config (a ``config.json`` or its folder)."""

# Hugging Face architecture suffixes -> the Auto class that builds them (token-in models
# whose labels are the input ids).
_HF_AUTO = (("ForCausalLM", "AutoModelForCausalLM"), ("LMHeadModel", "AutoModelForCausalLM"),
            ("ForMaskedLM", "AutoModelForMaskedLM"))


HF_SIZE_FIELDS = ("hidden_size", "num_hidden_layers", "num_attention_heads",
                  "intermediate_size", "vocab_size")
"""Config fields that must be integers >= 1 where a config has them (under the name its
class maps them to: ``n_embd`` for ``hidden_size`` on GPT-2)."""


def _check_hf_config(raw: Mapping[str, Any], overrides: Mapping[str, Any], file: Any) -> None:
    """Refuse, before transformers reads it, a config whose ``model_type`` transformers
    does not know or whose :data:`HF_SIZE_FIELDS`, in the file or in the `overrides` of
    --param, are not integers >= 1: transformers would fail deep inside the model (a
    negative dimension, a zero division) or print pages of text.

    Raises:
        ProfileError: one line naming `file`, the field and the fix.
    """
    from transformers import CONFIG_MAPPING

    kind = raw.get("model_type")
    if not isinstance(kind, str) or kind not in CONFIG_MAPPING:
        said = "has no field model_type" if kind is None else (
            f"field model_type {kind!r} is not a model type this transformers knows")
        raise ProfileError(f"'{file}' {said}; fix: set model_type to the model's family "
                           "(llama, gpt2, mistral, ...), or upgrade transformers for a newer "
                           "one")
    names = CONFIG_MAPPING[kind].attribute_map  # hidden_size -> n_embd on GPT-2
    sizes = [names.get(f, f) for f in HF_SIZE_FIELDS]
    checks = [(raw[k], f"'{file}': field {k} is {raw[k]!r}; fix: an integer >= 1 in the file")
              for k in sizes if k in raw]
    checks += [(v, f"--param {k}={v!r}: field {names.get(k, k)} of '{file}' must be an "
                   "integer >= 1; fix: give one")
               for k, v in overrides.items() if names.get(k, k) in sizes]
    for v, bad in checks:
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ProfileError(bad)


def _hf_factory(path: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``{"model", "make_inputs"}`` for the Hugging Face config at `path` (see
    :func:`build_from_factory`); run under the caller's fake mode, if any."""
    from pathlib import Path

    try:
        import transformers
    except ImportError:
        raise ProfileError("hf: models need Hugging Face transformers: pip install "
                           "transformers") from None
    cfg_path = Path(path)
    if not path.strip() or not cfg_path.exists():
        raise ProfileError(f"Hugging Face config '{path}' not found (give a config.json or "
                           "the folder that holds one after hf:, e.g. "
                           "hf:instances/configs/llama-3-8b/config.json; a factory in a "
                           "module named hf is hf.py:FACTORY)")
    try:
        raw, _ = transformers.PretrainedConfig.get_config_dict(str(cfg_path),
                                                               local_files_only=True)
        _check_hf_config(raw, overrides, cfg_path / "config.json" if cfg_path.is_dir()
                         else cfg_path)
        config = transformers.AutoConfig.from_pretrained(str(cfg_path), local_files_only=True)
    except ProfileError:
        raise
    except Exception as e:
        raise ProfileError(f"cannot read the Hugging Face config '{path}': "
                           f"{type(e).__name__}: {' '.join(str(e).split())}") from None
    for k, v in overrides.items():
        if not hasattr(config, k):
            raise ProfileError(f"the {type(config).__name__} of '{path}' has no field '{k}' "
                               "(--param sets fields of the config for hf: models)")
        setattr(config, k, v)
    archs = list(getattr(config, "architectures", None) or [])
    auto = "AutoModelForCausalLM"
    if archs:
        found = [a for suffix, a in _HF_AUTO if archs[0].endswith(suffix)]
        if not found:
            raise ProfileError(f"'{path}': architecture {archs[0]} is not a causal or masked "
                               "language model (supported: *ForCausalLM, *LMHeadModel, "
                               "*ForMaskedLM)")
        auto = found[0]
    model = getattr(transformers, auto).from_config(config)
    vocab = int(config.vocab_size)

    def make(shapes: Sequence[tuple[int, ...]], device: Any) -> dict[str, Any]:
        if len(shapes) != 1 or len(shapes[0]) != 2:
            raise ProfileError(f"hf: models take one input shape BxS (batch x tokens, e.g. "
                               f"--input-shape 1x8192), got {len(shapes)} shapes"
                               + (f" ({', '.join('x'.join(map(str, s)) for s in shapes)})"
                                  if shapes else ""))
        ids = torch.randint(0, vocab, shapes[0], device=device)
        return {"input_ids": ids, "labels": ids}

    return {"model": model, "make_inputs": make}


def build_from_factory(
    target: str,
    input_shapes: Sequence[str | Sequence[int]] = (),
    *,
    input_dtypes: Sequence[str] | None = None,
    input_high: int | None = None,
    params: Mapping[str, Any] | None = None,
    device: str = "cpu",
    seed: int = 0,
    fake: bool = False,
) -> tuple[Any, Any, Callable[..., Any] | None]:
    """Build ``(model, inputs, loss_fn)`` from a user's factory, as ``slackopt profile`` does.

    The factory contract: ``FACTORY(**params)`` returns either a ``torch.nn.Module`` or a
    dict with ``"model"`` (the module) and optionally ``"loss_fn"``
    (``loss_fn(output, *inputs) -> scalar tensor``; default :func:`default_loss`) and
    ``"make_inputs"`` (``make_inputs(shapes, device) ->`` a sequence of tensors or a dict
    of keyword arguments, e.g. a Hugging Face batch with ``labels``; default
    :func:`make_inputs` from `input_shapes`, `input_dtypes` and `input_high`). The model is
    moved to `device` and put in ``train()`` mode; ``torch.manual_seed(seed)`` runs before
    the factory is called and again before the inputs are made, so the same arguments give
    the same model and inputs (run a plan on what was profiled by calling this again).

    A target ``hf:PATH`` builds a Hugging Face model from its config alone (PATH a
    ``config.json`` or its folder; read with ``AutoConfig``, nothing downloaded) with the
    Auto class of its ``architectures`` (``AutoModelForCausalLM.from_config`` for
    ``*ForCausalLM`` / ``*LMHeadModel``, ``AutoModelForMaskedLM`` for ``*ForMaskedLM``),
    in the config's dtype and with the attention implementation transformers selects for
    it (SDPA where the model supports it); the inputs are a batch ``{"input_ids",
    "labels"}`` of one shape BxS, and the loss is the model's own.

    Args:
        target: ``MODULE:FACTORY`` (see :func:`load_factory`) or ``hf:PATH``.
        input_shapes: one shape per positional model input ("4x128" or a tuple).
        input_dtypes: one dtype name for all inputs or one per input; default "float32".
        input_high: exclusive upper bound of integer inputs; default the model's
            vocabulary (:func:`vocab_size`), required for integer inputs of a model
            without one.
        params: keyword arguments for the factory; for ``hf:`` fields of the config to
            override (``num_hidden_layers=1``).
        device: "cpu", "cuda", "cuda:1", ...
        seed: the torch seed.
        fake: build the model and the inputs under a fresh ``FakeTensorMode``
            (``torch._subclasses.fake_tensor``): shapes, dtypes and storages without data,
            whatever the size; :func:`profile_step` then profiles it with roofline timing.

    Returns:
        The module, the inputs (a tuple, or a dict of keyword arguments from make_inputs)
        and the loss function (None: the default loss).

    Raises:
        ProfileError: a bad target, factory result, shape, dtype, device or config; a
            make_inputs that fails without input shapes (give ``--input-shape``).
    """
    params = dict(params or {})
    shapes = [s if isinstance(s, tuple) else parse_shape(s) if isinstance(s, str)
              else tuple(int(d) for d in s) for s in input_shapes]
    dtypes = [parse_dtype(d) for d in (input_dtypes or ())] or [torch.float32]
    if target.startswith(HF_PREFIX):
        hf_path = target[len(HF_PREFIX):]

        def fn(**kw: Any) -> Any:
            return _hf_factory(hf_path, kw)
    else:
        fn = load_factory(target)
    try:
        dev = torch.device(device)
    except RuntimeError as e:
        raise ProfileError(f"device '{device}': {e}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ProfileError(f"device '{device}' asked for but CUDA is not available")
    mode = FakeTensorMode() if fake else None
    with _within(mode), warnings.catch_warnings():
        # copy.deepcopy of a fake module (nn.TransformerEncoder clones its layer) warns
        # about the fake data pointer; _adopt_fakes then re-makes those tensors.
        warnings.filterwarnings("ignore", "Accessing the data pointer of FakeTensor")
        return _build(target, fn, params, shapes, dtypes, input_high, dev, seed, mode)


def _adopt_fakes(model: Any, mode: Any) -> None:
    """Make every parameter and buffer of `model` a fake tensor of `mode`, in place.

    A module built under `mode` has such tensors already, except those that
    ``copy.deepcopy`` made (``nn.TransformerEncoder`` clones its layer; the copy of a fake
    tensor belongs to a new fake mode) and real tensors the factory took from elsewhere.
    Each becomes a fake tensor of `mode` with the same shape, strides, dtype, device and
    ``requires_grad`` (no values: none are needed); a tensor shared by two modules stays
    shared. Source: ``FakeTensorConverter.from_meta_and_device``
    (``torch._subclasses.fake_tensor``).
    """
    memo: dict[int, Any] = {}

    def ours(t: Any) -> bool:
        return isinstance(t, FakeTensor) and t.fake_mode is mode

    def adopt(t: Any) -> Any:
        if id(t) not in memo:
            meta = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
            new = mode.fake_tensor_converter.from_meta_and_device(mode, meta, t.device)
            memo[id(t)] = (torch.nn.Parameter(new, requires_grad=t.requires_grad)
                           if isinstance(t, torch.nn.Parameter) else new)
        return memo[id(t)]

    for mod in model.modules():
        for table in (mod._parameters, mod._buffers):
            for n, t in list(table.items()):
                if t is not None and not ours(t):
                    table[n] = adopt(t)


def _on(have: Any, want: Any) -> bool:
    """Tensor device `have` is device `want` ("cuda" matches any CUDA index)."""
    return have.type == want.type and (want.index is None or have.index == want.index)


def _build(target: str, fn: Callable[..., Any], params: Mapping[str, Any],
           shapes: list[tuple[int, ...]], dtypes: list[Any], input_high: int | None,
           dev: Any, seed: int, mode: Any | None
           ) -> tuple[Any, Any, Callable[..., Any] | None]:
    """The factory call and the inputs of :func:`build_from_factory` (inside `mode`, a
    FakeTensorMode, if not None)."""
    torch.manual_seed(seed)
    try:
        made = fn(**params)
    except SlackoptError:
        raise
    except Exception as e:
        raise ProfileError(f"factory '{target}' raised {type(e).__name__}: {e}") from None
    loss_fn = None
    inputs_fn = None
    if isinstance(made, Mapping):
        if "model" not in made:
            raise ProfileError(f"factory '{target}' returned a dict without a 'model' key")
        model, loss_fn, inputs_fn = made["model"], made.get("loss_fn"), made.get("make_inputs")
        unknown = set(made) - {"model", "loss_fn", "make_inputs"}
        if unknown:
            raise ProfileError(f"factory '{target}' returned unknown keys "
                               f"{', '.join(sorted(map(str, unknown)))}; allowed: model, "
                               "loss_fn, make_inputs")
    else:
        model = made
    if not isinstance(model, torch.nn.Module):
        raise ProfileError(f"factory '{target}' must return a torch.nn.Module or a dict with "
                           f"'model', got {type(model).__name__}")
    if mode is not None:
        _adopt_fakes(model, mode)
    if any(not _on(t.device, dev) for t in (*model.parameters(), *model.buffers())):
        model = model.to(dev)  # only when needed: a fake module cannot swap its tensors
    model = model.train()
    torch.manual_seed(seed)
    if inputs_fn is not None:
        try:
            made_in = inputs_fn(shapes, dev)
            inputs = (dict(made_in) if isinstance(made_in, Mapping)
                      else as_input_tuple(made_in))
        except SlackoptError:
            raise
        except Exception as e:
            if not shapes:
                raise ProfileError(
                    f"the make_inputs of '{target}' needs input shapes: give --input-shape "
                    f"(e.g. -i 4x128, once per input) ({type(e).__name__}: {e})") from None
            raise ProfileError(f"make_inputs of '{target}' raised {type(e).__name__}: {e}") \
                from None
    else:
        if not shapes:
            raise ProfileError("give the model's input shapes (--input-shape 4x128, once per "
                               "positional input) or a make_inputs in the factory's dict")
        if input_high is None and any(not (d.is_floating_point or d.is_complex)
                                      and d != torch.bool for d in dtypes):
            input_high = vocab_size(model)
            if input_high is None:
                raise ProfileError(
                    "integer inputs need --input-high N (token ids are drawn from [0, N)): "
                    "the model has no config.vocab_size and no nn.Embedding to take it from")
        inputs = make_inputs(shapes, dtypes, dev, input_high or 2)
    return model, inputs, loss_fn


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
        target, input_shapes, input_dtypes, input_high, params, device, seed, fake: as for
            :func:`build_from_factory` (which states the factory contract and ``hf:``).
        **profile_kwargs: passed to :func:`profile_step` (timing, gpu, link, name, warmup,
            repeat, max_recipe_ops, host_memory_bytes); `fake` needs timing="roofline"
            and a gpu.

    Returns:
        The instance; ``meta`` also records ``factory`` (resolved by
        :func:`resolve_factory`, so :func:`build_from_factory` finds it from any directory),
        ``factory_params``, ``seed``, ``input_high`` and ``attn_implementation`` (the
        attention a Hugging Face model runs, ``config._attn_implementation``: "sdpa",
        "eager", ...; None for other models).

    Raises:
        ProfileError: a bad target, factory result, shape, dtype or device, measured timing
            with `fake`, or the model failing on the inputs (the model's error is quoted).
    """
    if fake and profile_kwargs.get("timing", "measure") != "roofline":
        raise ProfileError(FAKE_TIMING_ERROR)
    model, inputs, loss_fn = build_from_factory(
        target, input_shapes, input_dtypes=input_dtypes, input_high=input_high, params=params,
        device=device, seed=seed, fake=fake)
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
    return inst


__all__ = [
    "FAKE_TIMING_ERROR", "GENERATOR", "HF_PREFIX", "MissingTorchError", "OpRec",
    "ProfileError", "StepTracer", "StorageRec", "as_input_tuple", "as_model_inputs",
    "build_from_factory", "build_instance", "default_loss", "fake_mode_of", "grouped_mm_flops",
    "is_never_recompute", "is_random_op", "is_view_op", "load_factory", "make_inputs",
    "op_kind", "op_label", "parse_dtype", "parse_shape", "profile_factory", "profile_step",
    "resolve_factory", "run_loss", "sdpa_flops", "storage_of", "vocab_size", "written_tensors",
]
