"""Reading one training step below autograd: which ATen calls run, which storages they
read, write and create.

:class:`StepTracer` is the ``TorchDispatchMode`` both the profiler
(:mod:`slackopt.torch.profile`) and the runtime (:mod:`slackopt.torch.runtime`) run over a
step, so both number the calls and name the storages alike:

- **Operators.** Every non-view ATen call, forward and backward, in the order it runs, is
  one op, named by :func:`op_name` (``f0046.mm``: pass, position in the pass, overload).
  Pure view ops (``func.is_view``, in-place view ops, ``_unsafe_view``) allocate nothing
  and move no data; they are not ops (a read through a view is a read of its storage).
- **Storages.** Identity is the storage object (its ``StorageImpl``), held by a weak
  reference for the whole step, so an address that the allocator reuses after a free is a
  new storage, and all views of one storage are one storage. A storage that exists before
  the step (parameters, buffers, inputs) is *persistent*.
- **Names.** A storage created by a forward op is named after the module that ran the op
  (the innermost module whose forward was running, as ``named_modules`` spells it:
  ``model.layers.3.mlp.up_proj``); the second and later storages a module path creates get
  ``#1``, ``#2``, ... (:func:`storage_name`). A storage made outside any submodule, or in
  the backward pass, is named after its op and output position (``b0012.mm#0``).
- **Reads and writes.** Schema ``Tensor(a!)`` arguments (and training batch norm's running
  statistics, which the schema does not mark) are writes (:func:`written_tensors`); the
  first argument of ``empty_like`` and friends is read for its shape only.
- **Random and never-recompute ops.** Random ops (``torch.Tag.nondeterministic_seeded``
  with non-zero dropout) are ``OpRec.random``; the runtime re-runs them from the RNG state
  saved just before the op (PyTorch keeps generator states on the host, even for CUDA).
  Ops with data-dependent output shapes or values (``torch.Tag.dynamic_output_shape`` /
  ``data_dependent_output``), collectives (``c10d`` namespaces), random ops drawing from
  an explicit generator and ops that write persistent state (BatchNorm's running
  statistics) must never run twice (``OpRec.never_recompute``).

Sources: PyTorch documentation of ``TorchDispatchMode`` (``__torch_dispatch__``,
"Extending PyTorch") and of ``torch.Tag``; ``torch.multiprocessing.reductions.
StorageWeakRef``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

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

# ----------------------------------------------------------------------------- op helpers
def op_label(func: Any) -> str:
    """Short name of an ATen overload: ``addmm`` for ``aten.addmm.default``, ``add.Tensor``."""
    packet = func._overloadpacket.__name__
    ov = func._overloadname
    ns = getattr(func, "namespace", "aten")
    base = packet if ns == "aten" else f"{ns}.{packet}"
    return base if ov == "default" else f"{base}.{ov}"


def op_packet(func: Any) -> str:
    """The overload packet's name of an ATen op: ``addmm`` for ``aten.addmm.default``."""
    return func._overloadpacket.__name__


def is_view_op(func: Any) -> bool:
    """True for ops that only make views (no data moved, nothing allocated)."""
    try:
        if func.is_view:
            return True
        tags = func.tags
    except AttributeError:  # pragma: no cover - higher-order ops
        return False
    return torch.Tag.inplace_view in tags or op_packet(func) in ALIAS_OPS


def op_kind(func: Any) -> str:
    """Operator class: gemm, attention, layernorm, dropout, ..., else pointwise/reduction/other."""
    name = op_packet(func)
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
    elif "p" in names and "dropout" in op_packet(func):
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
    hidden = _HIDDEN_WRITES.get(op_packet(func))
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


def tensor_bytes(t: Any) -> int:
    """Bytes of a tensor's elements (numel x element size; not its storage's size)."""
    return int(t.numel()) * int(t.element_size())


# ----------------------------------------------------------------------------- names
def op_name(phase: str, position: int, label: str) -> str:
    """The name of an op: ``f`` (forward) or ``b`` (backward), its position among the
    pass's non-view ATen calls (4 digits at least), ``.``, its :func:`op_label`:
    ``f0046.mm``, ``b0012.native_layer_norm_backward``. The profiler, the runtime and
    anything matching op calls to an instance made by the profiler number them so.
    """
    return f"{'f' if phase == 'fwd' else 'b'}{position:04d}.{label}"


def storage_name(module: str, op: str, output: int, seen: dict[str, int]) -> str:
    """The instance name of a storage created by op `op` as its `output`-th new storage.

    Args:
        module: the module path the op ran in ("" outside any submodule, and in the
            backward pass).
        op: the op's name (:func:`op_name`).
        output: position of the storage among the op's new storages (0, 1, ...).
        seen: how many storages each module path has named so far in this step; updated.

    Returns:
        `module` for the first storage a module path creates, ``module#n`` for the n-th
        after it; ``op#output`` (``f0046.mm#0``) where `module` is "".
    """
    if not module:
        return f"{op}#{output}"
    n = seen.get(module, 0)
    seen[module] = n + 1
    return module if n == 0 else f"{module}#{n}"


# ----------------------------------------------------------------------------- tracing
@dataclass
class StorageRec:
    """One storage seen during the step.

    Attributes:
        key: identity (the StorageImpl address, unique while the tracer holds a weak ref).
        nbytes: storage size (bytes).
        alloc: index of the op that created it, None for persistent storages.
        name: instance tensor name (:func:`storage_name`), None for persistent storages.
        persistent: existed before the step (parameter, buffer, input, constant).
        device: the device, as ``str(tensor.device)``.
        readers: ops that read it (data or shape), in order.
        writers: ops that wrote it in place after its creation.
        holds: ops through which the step held the storage without reading it (the
            profiler fills them): the first backward op after an unpack, the last
            backward op before the autograd node that unpacked it let it go, the last
            forward op before the model's code dropped it.
        meta_readers: the ops among `readers` that read only its shape.
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
    holds: list[int] = field(default_factory=list)
    meta_readers: list[int] = field(default_factory=list)
    packs: int = 0


@dataclass
class OpRec:
    """One recorded (non-view) ATen call: its index in the step, :func:`op_name`,
    :func:`op_label`, phase ("fwd"/"bwd"), the overload, the storages it reads (data,
    shape only), writes and creates (keys), whether it draws random numbers or must never
    run twice, its kind (:func:`op_kind`), the module path it ran in, and what the
    profiler adds: FLOPs, bytes read and written, duration (s)."""

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
    storages: which op created each, which ops read and wrote it, their names.

    Subclasses hook in through :meth:`_before` (before the call runs, with the index the op
    will get), :meth:`_call` (runs it) and :meth:`_after` (with the :class:`OpRec`).
    While :attr:`paused` is set (inside saved-tensor hooks) calls pass through unrecorded.
    Set :attr:`phase` to "bwd" before the backward pass. Inside :meth:`modules` the
    forward ops get the path of the module they run in (:func:`storage_name` names their
    storages after it).
    """

    def __init__(self) -> None:
        super().__init__()
        self.paused = False
        self.phase = "fwd"
        self.ops: list[OpRec] = []
        self.storages: dict[int, StorageRec] = {}
        self.module_stack: list[str] = []
        self._refs: dict[int, Any] = {}
        self._count = {"fwd": 0, "bwd": 0}
        self._named: dict[str, int] = {}

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

    def freed(self, key: int) -> bool:
        """Storage `key` has been freed (no tensor holds it any more)."""
        return bool(self._refs[key].expired())

    @contextlib.contextmanager
    def pause(self) -> Iterator[None]:
        """Calls inside pass through unrecorded (saved-tensor hooks run their own ops)."""
        old, self.paused = self.paused, True
        try:
            yield
        finally:
            self.paused = old

    @contextlib.contextmanager
    def modules(self, model: Any) -> Iterator[None]:
        """Track the module each forward op runs in (forward pre- and post-hooks on every
        module of `model`, named as ``model.named_modules()`` names them)."""
        stack = self.module_stack
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
        name = op_name(phase, self._count[phase], label)
        module = self.module_stack[-1] if (phase == "fwd" and self.module_stack) else ""
        token = self._before(index, name, func, args, kwargs)
        reads, meta_reads, writes = self._inputs(func, args, kwargs)
        out = self._call(func, args, kwargs, token)
        outputs: list[int] = []
        for t in tree_flatten(out)[0]:
            st = storage_of(t)
            if st is None or st._cdata in self.storages:
                continue
            k = st._cdata
            self._refs[k] = StorageWeakRef(st)
            self.storages[k] = StorageRec(
                k, int(st.nbytes()), index,
                storage_name(module, name, len(outputs), self._named), False, str(t.device))
            outputs.append(k)
        # An op that writes persistent state (BatchNorm running statistics) must not run twice.
        never = (is_never_recompute(func, args, kwargs)
                 or any(self.storages[k].persistent for k in writes))
        rec = OpRec(index, name, label, phase, func, reads, meta_reads, writes, outputs,
                    is_random_op(func, args, kwargs), never, op_kind(func), module)
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

    def _inputs(self, func: Any, args: Any, kwargs: Any) -> tuple[list[int], list[int],
                                                                 list[int]]:
        """The storages a call reads (data), reads for their shape only, and writes."""
        flat_in = [x for x in tree_flatten((args, kwargs))[0] if isinstance(x, torch.Tensor)]
        written = {id(x) for x in written_tensors(func, args, kwargs)}
        meta_ids = {id(args[0])} if (op_packet(func) in META_ONLY_OPS and args
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
        return reads, meta_reads, writes

    def _before(self, index: int, name: str, func: Any, args: Any, kwargs: Any) -> Any:
        return None

    def _call(self, func: Any, args: Any, kwargs: Any, token: Any) -> Any:
        return func(*args, **kwargs)

    def _after(self, rec: OpRec, args: Any, kwargs: Any, out: Any, token: Any) -> None:
        return None


__all__ = [
    "ALIAS_OPS", "COLLECTIVE_NAMESPACES", "META_ONLY_OPS", "OpRec", "StepTracer",
    "StorageRec", "is_never_recompute", "is_random_op", "is_view_op", "op_kind", "op_label",
    "op_name", "op_packet", "storage_name", "storage_of", "tensor_bytes", "written_tensors",
]
