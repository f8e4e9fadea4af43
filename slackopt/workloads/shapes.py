"""CNN training steps of every shape: long skips, residual adds, concatenations,
depthwise stacks and branches that merge.

The transformer generators build chains of identical blocks; these families build the
graphs that chains lack (each cited in its generator's docstring):

- :func:`fcn`: FCN-8s, a VGG backbone whose pool3 and pool4 outputs are scored and fused
  with the upsampled coarse scores (Long, Shelhamer and Darrell, CVPR 2015);
- :func:`unet`: U-Net, encoder levels joined to the decoder by long skips through
  concatenation (Ronneberger, Fischer and Brox, MICCAI 2015);
- :func:`resnet`: ResNet-10 to 152, residual adds (He, Zhang, Ren and Sun, CVPR 2016);
- :func:`densenet`: DenseNet-BC, every feature map read by every later layer of its block
  (Huang, Liu, van der Maaten and Weinberger, CVPR 2017);
- :func:`mobilenet`: MobileNetV2, inverted residuals of pointwise and depthwise
  convolutions (Sandler, Howard, Zhu, Zhmoginov and Chen, CVPR 2018);
- :func:`branches`: seeded random cells of 2 to ``max_branches`` branches that merge by an
  add or a concatenation, with skips from earlier cells (the multi-branch cells of
  Inception, Szegedy et al. CVPR 2015, and of NAS cells, Zoph et al. CVPR 2018).

Every family is registered in :data:`slackopt.workloads.WORKLOADS` as ``shapes-<family>``
(``slackopt make shapes-resnet --layers 50 --batch 16 -o r50.json``).

Operator model (docs/workloads.md, "Operator conventions"; every op timed by
:func:`slackopt.hardware.roofline_s`; units bytes, FLOPs, seconds; elements of the GPU's
training dtype unless ``dtype_bytes`` is given):

- A k x k convolution (stride s, g groups, "same" padding) costs 2 B H_o W_o k^2 (C_in /
  g) C_out FLOPs at 75% of peak, bytes = input + output + weights; a depthwise one comes
  out memory-bound from the same roofline. A transposed convolution (FCN's and U-Net's
  upsampling) costs 2 B H_in W_in k^2 C_in C_out. A fully connected layer is a 1 x 1
  convolution on a 1 x 1 map. Backward: ``.dgrad`` and ``.wgrad``, each with the forward
  FLOPs and bytes; the wgrad reads the input, so a convolution's input is saved; no
  ``.dgrad`` for a convolution reading the image.
- Memory-bound ops at 85% of HBM, charged bytes read plus written: BatchNorm 2x its
  output forward, 3x backward (it reads its input: the convolution's output is saved);
  ReLU (ReLU6 in MobileNetV2) 2x forward, 3x backward, applied in place as VGG's
  (:mod:`slackopt.workloads.vgg`): the op before it writes a temporary, the ReLU output is
  saved (its backward reads it), and a rebuild writes into the rebuilt tensor's own
  buffer; max pool in + out forward, 2 in + out backward (reads its input); average and
  global average pool in + out both ways (reads no activation); add: inputs + output;
  concatenation (U-Net): inputs + output. Softmax cross-entropy reads the logits; its
  backward reads them and writes their gradient.
- Gradients, as PyTorch's autograd moves them: an add or a concatenation passes its
  output's gradient to its inputs without a kernel (a concatenation's inputs get views
  of it, so the whole buffer lives until the last of them is consumed), an in-place
  ReLU's backward overwrites its incoming gradient, every other backward op writes its
  input's gradient. Where a tensor has several forward readers, the first backward op
  that reaches it writes its gradient and later ones accumulate into it (a fused
  accumulation; an explicit ``.acc`` add where a pass-through gradient meets an
  existing one).
- Memory (docs/model.md, "Transient buffers"): every tensor lives from its producer's
  start to its last reader's end; workspaces are 0; the loss backward allocates the
  logits' gradient; no dropout is modelled (as VGG's).

Recipes (docs/model.md, "Recompute recipes"): a saved tensor is rebuilt by re-running its
producer from the saved tensors it reads, and the producers of the temporaries in between
(at most :data:`MAX_RECIPE_OPS` ops, as ``slackopt profile``); a temporary that is not
the rebuilt tensor's own buffer (an in-place ReLU writes into it) counts as
``transient_bytes``. The image has no recipe (it comes from the data loader). In the block
families (resnet, densenet, mobilenet) a block's input (the residual stream between
blocks, a dense block's input) has no recipe by default, like the transformers' block
inputs (docs/workloads.md): the checkpoints of Chen et al. 2016 and of
``torch.utils.checkpoint``'s segments; ``rebuild_block_inputs=True`` gives them their
recipe too (Checkmate's setting, Jain et al. MLSys 2020, where every op can be re-run).
Categories: "image", "conv_out" (a convolution output BatchNorm reads), "relu_out",
"pool_out", "block_input" (the input of the next stage or block), "block_output" (the
last one, read by the head), "concat", "feature" (a DenseNet layer's new features),
"fuse" (FCN's fused scores), "score", "pooled", "logits"; "temp" and "grad" are not
saved.

Blocks: ``Op.layer`` is the stage (fcn, unet levels, resnet and mobilenet stages, dense
blocks, cells); stems, heads and losses have layer -1.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from slackopt.hardware import GEMM_EFF, GPU, MEM_EFF, Link
from slackopt.instance import Instance, Recipe
from slackopt.workloads._builder import (
    GraphBuilder,
    WorkloadError,
    check_int,
    instance_name,
    make_meta,
    overrides_of,
    resolve_hardware,
)

MAX_RECIPE_OPS = 6
"""Longest recipe (ops) a generator gives; longer chains get none (``slackopt profile``'s
default ``max_recipe_ops``)."""

_WEIGHTED = ("conv", "deconv")
"""Node kinds with weights: a backward ``.dgrad`` and ``.wgrad`` each."""


@dataclass(frozen=True, slots=True)
class _Node:
    """One forward op: name, kind, stage, the tensors it reads, the one it writes (None
    for the loss) with its bytes, its FLOPs and the HBM bytes it moves (weights
    included)."""

    op: str
    kind: str
    layer: int
    inputs: tuple[str, ...]
    out: str | None
    out_bytes: int
    flops: float = 0.0
    bytes_moved: float = 0.0


class _Net:
    """The forward graph of a CNN as a list of :class:`_Node`, then one
    :class:`GraphBuilder` pass that emits the forward ops with their saved tensors and
    recipes and the backward pass derived from the forward graph (module docstring).

    Args:
        gpu: times every op. dt: bytes per element. batch: images per step.
    """

    def __init__(self, gpu: GPU, dt: int, batch: int) -> None:
        self.gpu, self.dt, self.B = gpu, dt, batch
        self.nodes: list[_Node] = []
        self.shape: dict[str, tuple[int, int, int]] = {}
        self.category: dict[str, str] = {}
        self.no_recipe: set[str] = set()
        self.image = ""

    # ---------------------------------------------------------------- helpers
    def nbytes(self, t: str) -> int:
        """Bytes of activation `t`."""
        c, h, w = self.shape[t]
        return self.B * c * h * w * self.dt

    def _add(self, node: _Node, shape: tuple[int, int, int] | None, category: str) -> str:
        if node.out is not None:
            if node.out in self.shape:
                raise ValueError(f"duplicate tensor '{node.out}'")  # generator bug
            self.shape[node.out] = shape  # type: ignore[assignment]
            self.category[node.out] = category
        self.nodes.append(node)
        return node.out or ""

    def _node(self, op: str, kind: str, layer: int, inputs: Sequence[str], out: str,
              shape: tuple[int, int, int], category: str, flops: float = 0.0,
              moved: float | None = None) -> str:
        c, h, w = shape
        nb = self.B * c * h * w * self.dt
        if moved is None:
            moved = sum(self.nbytes(x) for x in inputs) + nb
        return self._add(_Node(op, kind, layer, tuple(inputs), out, nb, flops, moved),
                         shape, category)

    # ---------------------------------------------------------------- layers
    def input(self, c: int, h: int, w: int) -> str:
        """The image batch: a zero-duration op, the tensor saved (c = inf)."""
        self.image = self._add(_Node("input", "input", -1, (), "image",
                                     self.B * c * h * w * self.dt), (c, h, w), "image")
        self.no_recipe.add("image")
        return "image"

    def conv(self, name: str, x: str, cout: int, *, layer: int, k: int = 3,
             stride: int = 1, groups: int = 1, bn: bool = False, act: bool = True,
             transposed: bool = False, category: str = "relu_out") -> str:
        """Convolution [+ BatchNorm] [+ in-place ReLU]; returns the output tensor.

        Tensors: ``name.c`` (the convolution's output, saved for BatchNorm's backward)
        with ``bn``; the output ``name`` (category `category`). A transposed convolution
        multiplies the side by `stride`, a plain one divides it.
        """
        cin, h, w = self.shape[x]
        if transposed:
            ho, wo = h * stride, w * stride
            flops = 2.0 * self.B * h * w * k * k * cin * cout
        else:
            ho, wo = max(1, h // stride), max(1, w // stride)
            flops = 2.0 * self.B * ho * wo * k * k * (cin // groups) * cout
        wbytes = k * k * (cin // groups) * cout * self.dt
        oshape = (cout, ho, wo)
        cname = name if not (bn or act) else (f"{name}.c" if bn else f"{name}.pre")
        ccat = category if cname == name else ("conv_out" if bn else "temp")
        kind = "deconv" if transposed else "conv"
        moved = self.nbytes(x) + self.B * cout * ho * wo * self.dt + wbytes
        out = self._node(f"{name}.conv", kind, layer, [x], cname, oshape, ccat, flops, moved)
        if bn:
            bout = name if not act else f"{name}.bn_out"
            out = self._node(f"{name}.bn", "bn", layer, [out], bout, oshape,
                             category if bout == name else "temp")
        if act:
            out = self._node(f"{name}.relu", "relu", layer, [out], name, oshape, category)
        return out

    def bn_relu(self, name: str, xs: Sequence[str], *, layer: int,
                category: str = "relu_out") -> str:
        """BatchNorm over the channel concatenation of `xs` (never materialised: the
        shared-storage DenseNet of Pleiss et al. 2017), then an in-place ReLU; its backward
        reads every input."""
        _, h, w = self.shape[xs[0]]
        shape = (sum(self.shape[x][0] for x in xs), h, w)
        t = self._node(f"{name}.bn", "bn", layer, xs, f"{name}.bn_out", shape, "temp")
        return self._node(f"{name}.relu", "relu", layer, [t], name, shape, category)

    def pool(self, name: str, x: str, *, layer: int, kind: str = "max", k: int = 2,
             category: str = "pool_out") -> str:
        """k x k max or average pool with stride k."""
        c, h, w = self.shape[x]
        return self._node(name, f"{kind}pool", layer, [x], name, (c, h // k, w // k),
                          category)

    def gap(self, name: str, x: str, *, layer: int = -1) -> str:
        """Global average pool to a C x 1 x 1 vector (saved: the classifier reads it)."""
        c, _, _ = self.shape[x]
        return self._node(name, "gap", layer, [x], name, (c, 1, 1), "pooled")

    def add(self, name: str, xs: Sequence[str], *, layer: int, act: bool,
            category: str) -> str:
        """Elementwise sum of `xs` [then an in-place ReLU]."""
        shape = self.shape[xs[0]]
        if any(self.shape[x] != shape for x in xs):
            raise ValueError(f"{name}: add of unequal shapes")  # generator bug
        if not act:
            return self._node(name, "add", layer, xs, name, shape, category)
        t = self._node(f"{name}.add", "add", layer, xs, f"{name}.sum", shape, "temp")
        return self._node(f"{name}.relu", "relu", layer, [t], name, shape, category)

    def cat(self, name: str, xs: Sequence[str], *, layer: int,
            category: str = "concat") -> str:
        """Channel concatenation of `xs` (a copy kernel)."""
        _, h, w = self.shape[xs[0]]
        shape = (sum(self.shape[x][0] for x in xs), h, w)
        return self._node(name, "cat", layer, xs, name, shape, category)

    def loss(self, logits: str) -> None:
        """Softmax cross-entropy over `logits` (per pixel or per image)."""
        self._add(_Node("loss", "loss", -1, (logits,), None, 0, 0.0,
                        float(self.nbytes(logits))), None, "")

    # ---------------------------------------------------------------- emission
    def _bwd_reads(self, n: _Node) -> tuple[str, ...]:
        """The forward tensors `n`'s backward reads (hence saved)."""
        if n.kind in _WEIGHTED or n.kind == "maxpool":
            return (n.inputs[0],)
        if n.kind == "bn" or n.kind == "loss":
            return n.inputs
        if n.kind == "relu":
            return (n.out,)  # type: ignore[return-value]
        return ()

    def build(self, name: str, link: Link, meta: dict[str, Any]) -> Instance:
        """Emit the forward ops and tensors with recipes, then the backward pass."""
        nodes = self.nodes
        saved = {t for n in nodes for t in self._bwd_reads(n)}
        producer = {n.out: i for i, n in enumerate(nodes) if n.out is not None}
        consumers: dict[str, list[int]] = {}
        for i, n in enumerate(nodes):
            for x in n.inputs:
                consumers.setdefault(x, []).append(i)

        def own_buffer(t: str) -> str:
            """The buffer temporary `t` ends in: an in-place ReLU writes into its input."""
            cs = consumers.get(t, [])
            while len(cs) == 1 and nodes[cs[0]].kind == "relu":
                t = nodes[cs[0]].out  # type: ignore[assignment]
                cs = consumers.get(t, [])
            return t

        def recipe(y: str) -> Recipe | None:
            if y in self.no_recipe:
                return None
            ops: set[int] = set()
            inputs: list[str] = []
            transient = 0
            todo = [producer[y]]
            while todo:
                i = todo.pop()
                if i in ops:
                    continue
                ops.add(i)
                for x in nodes[i].inputs:
                    if x in saved:
                        if x not in inputs:
                            inputs.append(x)
                    elif producer[x] not in ops:
                        todo.append(producer[x])
                        if own_buffer(x) != y:
                            transient += self.nbytes(x)
            if len(ops) > MAX_RECIPE_OPS:
                return None
            return Recipe(tuple(nodes[i].op for i in sorted(ops)), tuple(inputs), transient)

        b = GraphBuilder(self.gpu)
        for n in nodes:
            if n.kind == "input":
                b.op(n.op, "fwd", kind="input", duration_s=0.0)
            elif n.kind in _WEIGHTED:
                b.op(n.op, "fwd", kind=n.kind, layer=n.layer, flops=n.flops,
                     bytes_moved=n.bytes_moved, efficiency=GEMM_EFF, reads=n.inputs)
            else:
                b.op(n.op, "fwd", kind=n.kind, layer=n.layer, bytes_moved=n.bytes_moved,
                     efficiency=MEM_EFF, reads=n.inputs)
            if n.out is not None:
                is_saved = n.out in saved
                b.tensor(n.out, n.out_bytes, n.op,
                         category=self.category[n.out] if is_saved else "temp",
                         recipe=recipe(n.out) if is_saved else None)
        self._backward(b)
        return b.build(name, link, meta)

    def _backward(self, b: GraphBuilder) -> None:
        grads: dict[str, str] = {}

        def new(x: str, op: str) -> None:
            """`op` writes x's gradient, or accumulates into the one that exists."""
            if x == self.image:
                return
            if x in grads:
                b.read(grads[x], op)
            else:
                grads[x] = b.tensor(f"d_{x}", self.nbytes(x), op, category="grad")

        def alias(x: str, g: str, n: _Node) -> None:
            """x's gradient is (a view of) `g`; added to an existing one by an ``.acc``."""
            if x == self.image:
                return
            if x not in grads:
                grads[x] = g
                return
            nb = self.nbytes(x)
            b.mem_op(f"{n.op}.acc.{x}", "bwd", kind="add", layer=n.layer,
                     bytes_moved=3 * nb, reads=[grads[x], g])

        for n in reversed(self.nodes):
            if n.kind == "input":
                continue
            if n.kind == "loss":
                (lg,) = n.inputs
                op = b.mem_op("loss.bwd", "bwd", kind="loss", layer=-1,
                              bytes_moved=2 * self.nbytes(lg), reads=[lg])
                grads[lg] = b.tensor(f"d_{lg}", self.nbytes(lg), op, category="grad")
                continue
            g = grads[n.out]  # type: ignore[index]
            if n.kind in _WEIGHTED:
                x = n.inputs[0]
                if x != self.image:
                    op = b.op(f"{n.op}.dgrad", "bwd", kind=n.kind, layer=n.layer,
                              flops=n.flops, bytes_moved=n.bytes_moved, reads=[g])
                    new(x, op)
                b.op(f"{n.op}.wgrad", "bwd", kind=n.kind, layer=n.layer, flops=n.flops,
                     bytes_moved=n.bytes_moved, reads=[g, x])
            elif n.kind == "bn":
                op = b.mem_op(f"{n.op}.bwd", "bwd", kind="bn", layer=n.layer,
                              bytes_moved=3 * n.out_bytes, reads=[g, *n.inputs])
                for x in n.inputs:
                    new(x, op)
            elif n.kind == "relu":  # in place: the incoming gradient is overwritten
                b.mem_op(f"{n.op}.bwd", "bwd", kind="relu", layer=n.layer,
                         bytes_moved=3 * n.out_bytes, reads=[g, n.out])  # type: ignore[list-item]
                alias(n.inputs[0], g, n)
            elif n.kind == "maxpool":
                x = n.inputs[0]
                op = b.mem_op(f"{n.op}.bwd", "bwd", kind="pool", layer=n.layer,
                              bytes_moved=2 * self.nbytes(x) + n.out_bytes, reads=[g, x])
                new(x, op)
            elif n.kind in ("avgpool", "gap"):
                x = n.inputs[0]
                op = b.mem_op(f"{n.op}.bwd", "bwd", kind="pool", layer=n.layer,
                              bytes_moved=self.nbytes(x) + n.out_bytes, reads=[g])
                new(x, op)
            elif n.kind in ("add", "cat"):
                for x in n.inputs:
                    alias(x, g, n)
            else:  # pragma: no cover - generator bug
                raise ValueError(f"unknown node kind {n.kind}")


# -------------------------------------------------------------------- parameters
def _check_float(name: str, value: Any, lo: float, hi: float) -> float:
    """``value`` as a float in (lo, hi], else :class:`WorkloadError`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and lo < value <= hi):
        raise WorkloadError(f"parameter '{name}' must be a number in ({lo:g}, {hi:g}], "
                            f"got {value!r}")
    return float(value)


def _int_in(name: str, value: Any, lo: int, hi: int) -> int:
    """``value`` as an int in [lo, hi], else :class:`WorkloadError`."""
    v = check_int(name, value, minimum=lo)
    if v > hi:
        raise WorkloadError(f"parameter '{name}' must be in [{lo}, {hi}], got {v}")
    return v


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise WorkloadError(f"parameter '{name}' must be true or false, got {value!r}")
    return value


def _side(name: str, value: Any, multiple: int) -> int:
    v = check_int(name, value)
    if v % multiple:
        raise WorkloadError(f"parameter '{name}' must be a multiple of {multiple} (the "
                            f"network halves it {int(math.log2(multiple))} times), got {v}")
    return v


def _setup(gpu: str | GPU, link: str | Link | None, batch: Any,
           dtype_bytes: Any) -> tuple[GPU, Link, int, int]:
    g, lk = resolve_hardware(gpu, link)
    batch = check_int("batch", batch)
    dt = check_int("dtype_bytes", g.dtype_bytes if dtype_bytes is None else dtype_bytes)
    return g, lk, batch, dt


def _finish(net: _Net, family: str, stem: str, g: GPU, lk: Link, params: dict[str, Any],
            defaults: dict[str, Any], hidden: Sequence[str],
            first: dict[str, Any] | None = None) -> Instance:
    """Name, meta, build. The name is ``shapes-<stem>[-<param><value>...]_<gpu>-<link>``
    with the parameters that differ from `defaults` (`first` always, ahead of them); a
    flag set to true shows as its name alone (``-bn``; ``rebuild_block_inputs`` as
    ``-rebuild``)."""
    shown = dict(first or {})
    diff = overrides_of({k: v for k, v in params.items() if k not in hidden},
                        dict(defaults, dtype_bytes=g.dtype_bytes))
    for k, v in diff.items():
        if isinstance(v, bool):
            if v:
                shown["rebuild" if k == "rebuild_block_inputs" else k] = ""
        else:
            shown[k] = v
    return net.build(instance_name(f"shapes-{stem}", g, lk, shown), lk,
                     make_meta(f"shapes-{family}", params, g, lk))


# -------------------------------------------------------------------- fcn
VGG_STAGES: dict[int, tuple[int, ...]] = {
    11: (1, 1, 2, 2, 2), 13: (2, 2, 2, 2, 2), 16: (2, 2, 3, 3, 3), 19: (2, 2, 4, 4, 4)}
"""Convolutions per VGG stage (configurations A, B, D, E of Simonyan and Zisserman 2015)."""

FCN_DEFAULTS: dict[str, Any] = dict(depth=16, batch=8, image=512, width=64, classes=21,
                                    bn=False, dtype_bytes=None)
"""Default parameters of :func:`fcn` (PASCAL VOC: 21 classes)."""


def fcn(*, gpu: str | GPU = "a100", link: str | Link | None = None, depth: int = 16,
        batch: int = 8, image: int = 512, width: int = 64, classes: int = 21,
        bn: bool = False, dtype_bytes: int | None = None) -> Instance:
    """FCN-8s semantic segmentation (Long, Shelhamer and Darrell, "Fully Convolutional
    Networks for Semantic Segmentation", CVPR 2015, section 4.2 and figure 3).

    Structure: a VGG backbone (stages of 3 x 3 convolutions with ReLU, [BatchNorm as
    VGG-BN], each stage ending in a 2 x 2 max pool: ``pool1_out`` ... ``pool5_out``;
    stage j's channels are ``width * 2**j`` capped at ``8 * width``), fc6 and fc7 as
    convolutions (7 x 7 and 1 x 1, ``64 * width`` channels, ReLU), ``score_fr`` (1 x 1 to
    `classes`); ``upscore2`` (transposed 4 x 4, stride 2) is added to ``score_pool4``
    (1 x 1 on ``pool4_out``): ``fuse_pool4``; ``upscore_pool4`` (transposed, stride 2) is
    added to ``score_pool3`` (1 x 1 on ``pool3_out``): ``fuse_pool3``; ``upscore8``
    (transposed 16 x 16, stride 8) gives the per-pixel ``logits``, then a softmax
    cross-entropy. Convolutions pad to keep the side (the paper's 100-pixel padding and
    crops are left out). The skips: ``pool3_out`` and ``pool4_out`` are read by the next
    stage and by their score convolution (forward) and by both backward passes, so they
    live from the backbone's first half to the end of the backward pass.

    Saved tensors: 25 with the defaults (image, 13 ReLU outputs, 5 pools, fc6 and fc7,
    ``score_fr``, the two fusions, the logits); depth 11 gives 20, 19 gives 28; ``bn``
    adds the backbone's convolution outputs (13 at depth 16). Every saved tensor but the
    image is rebuildable.

    Args:
        gpu, link: presets (names or objects; None: the GPU's link).
        depth: VGG configuration, 11, 13, 16 or 19.
        batch: images per step.
        image: side in pixels, a multiple of 32.
        width: channels of the first stage (VGG: 64).
        classes: score channels (PASCAL VOC: 21).
        bn: BatchNorm after every convolution of the backbone (VGG-BN).
        dtype_bytes: bytes per element (None: the GPU's training dtype).

    Returns:
        The validated :class:`Instance`, named like ``"shapes-fcn16_a100-pcie4"``.

    Raises:
        KeyError: unknown GPU or link preset.
        WorkloadError: a parameter out of range.
    """
    g, lk, B, dt = _setup(gpu, link, batch, dtype_bytes)
    if depth not in VGG_STAGES:
        raise WorkloadError(f"parameter 'depth' must be one of 11, 13, 16, 19, got {depth!r}")
    image, width = _side("image", image, 32), check_int("width", width)
    classes, bn = check_int("classes", classes), _check_bool("bn", bn)
    net = _Net(g, dt, B)
    x = net.input(3, image, image)
    pools = []
    for s, n in enumerate(VGG_STAGES[depth]):
        ch = width * min(2 ** s, 8)
        for k in range(1, n + 1):
            x = net.conv(f"conv{s + 1}_{k}", x, ch, layer=s, bn=bn)
        x = net.pool(f"pool{s + 1}_out", x, layer=s,
                     category="block_output" if s == 4 else "block_input")
        pools.append(x)
    x = net.conv("fc6", x, 64 * width, k=7, layer=5)
    x = net.conv("fc7", x, 64 * width, k=1, layer=5)
    x = net.conv("score_fr", x, classes, k=1, act=False, layer=5, category="score")
    up = net.conv("upscore2", x, classes, k=4, stride=2, transposed=True, act=False,
                  layer=6, category="score")
    sp = net.conv("score_pool4", pools[3], classes, k=1, act=False, layer=6,
                  category="score")
    x = net.add("fuse_pool4", [up, sp], layer=6, act=False, category="fuse")
    up = net.conv("upscore_pool4", x, classes, k=4, stride=2, transposed=True, act=False,
                  layer=7, category="score")
    sp = net.conv("score_pool3", pools[2], classes, k=1, act=False, layer=7,
                  category="score")
    x = net.add("fuse_pool3", [up, sp], layer=7, act=False, category="fuse")
    x = net.conv("upscore8", x, classes, k=16, stride=8, transposed=True, act=False,
                 layer=8, category="logits")
    net.loss(x)
    params = dict(depth=depth, batch=B, image=image, width=width, classes=classes, bn=bn,
                  dtype_bytes=dt)
    return _finish(net, "fcn", f"fcn{depth}", g, lk, params, FCN_DEFAULTS, ("depth",))


# -------------------------------------------------------------------- unet
UNET_DEFAULTS: dict[str, Any] = dict(levels=4, convs=2, batch=8, image=256, width=64,
                                     classes=2, bn=False, dtype_bytes=None)
"""Default parameters of :func:`unet` (the paper's four poolings, 64 channels, 2 classes)."""


def unet(*, gpu: str | GPU = "a100", link: str | Link | None = None, levels: int = 4,
         convs: int = 2, batch: int = 8, image: int = 256, width: int = 64,
         classes: int = 2, bn: bool = False, dtype_bytes: int | None = None) -> Instance:
    """U-Net (Ronneberger, Fischer and Brox, "U-Net: Convolutional Networks for Biomedical
    Image Segmentation", MICCAI 2015, figure 1), "same" padding.

    Structure: encoder level i (i = 0 .. levels-1, ``width * 2**i`` channels): `convs`
    3 x 3 convolutions with ReLU (``enc{i}_1`` ... ``enc{i}_{convs}``; [BatchNorm]; the
    paper has two) then a 2 x 2 max pool (``pool{i}``); the bottom: `convs` convolutions
    at ``width * 2**levels`` channels; decoder level i (from levels-1 down to 0): a 2 x 2
    transposed convolution halving the channels (``up{i}``, a temporary), the
    concatenation with the long skip, the encoder level's last output (``cat{i}``),
    `convs` convolutions (``dec{i}_1`` ...); a 1 x 1 convolution to `classes` gives the
    logits (``out``), then a per-pixel softmax cross-entropy. The skip is read by its pool
    and its concatenation (forward) and by its ReLU's and the pool's backward: it lives
    from the encoder to the end of the backward pass, and the concatenation's gradient (a
    view of which is the skip's) lives from the decoder's backward to the encoder's.

    Saved tensors: ``2 + levels * (2 * convs + 2) + convs`` (28 with the defaults); ``bn``
    adds the ``convs * (2 * levels + 1)`` convolution outputs (levels 8 and convs 8 with
    BN: 290). Every saved tensor but the image is rebuildable.

    Args:
        gpu, link: presets (names or objects; None: the GPU's link).
        levels: poolings (1 to 12).
        convs: 3 x 3 convolutions per level (1 to 16).
        batch: images per step.
        image: side in pixels, a multiple of ``2**levels``.
        width: channels of level 0.
        classes: output channels.
        bn: BatchNorm after every 3 x 3 convolution.
        dtype_bytes: bytes per element (None: the GPU's training dtype).

    Returns:
        The validated :class:`Instance`, named like ``"shapes-unet4_a100-pcie4"``.

    Raises:
        KeyError: unknown GPU or link preset.
        WorkloadError: a parameter out of range.
    """
    g, lk, B, dt = _setup(gpu, link, batch, dtype_bytes)
    L = _int_in("levels", levels, 1, 12)
    nconv = _int_in("convs", convs, 1, 16)
    image, width = _side("image", image, 2 ** L), check_int("width", width)
    classes, bn = check_int("classes", classes), _check_bool("bn", bn)
    net = _Net(g, dt, B)
    x = net.input(3, image, image)
    skips = []
    for i in range(L):
        for j in range(1, nconv + 1):
            x = net.conv(f"enc{i}_{j}", x, width * 2 ** i, layer=i, bn=bn)
        skips.append(x)
        x = net.pool(f"pool{i}", x, layer=i, category="block_input")
    for j in range(1, nconv + 1):
        x = net.conv(f"mid_{j}", x, width * 2 ** L, layer=L, bn=bn)
    for i in reversed(range(L)):
        u = net.conv(f"up{i}", x, width * 2 ** i, k=2, stride=2, transposed=True,
                     act=False, layer=L + 1 + i, category="upsample")
        x = net.cat(f"cat{i}", [u, skips[i]], layer=L + 1 + i)
        for j in range(1, nconv + 1):
            x = net.conv(f"dec{i}_{j}", x, width * 2 ** i, layer=L + 1 + i, bn=bn)
    x = net.conv("out", x, classes, k=1, act=False, layer=-1, category="logits")
    net.loss(x)
    params = dict(levels=L, convs=nconv, batch=B, image=image, width=width,
                  classes=classes, bn=bn, dtype_bytes=dt)
    return _finish(net, "unet", f"unet{L}", g, lk, params, UNET_DEFAULTS, ("levels",))


# -------------------------------------------------------------------- resnet
RESNET_BLOCKS: dict[int, tuple[str, tuple[int, int, int, int]]] = {
    10: ("basic", (1, 1, 1, 1)), 18: ("basic", (2, 2, 2, 2)), 34: ("basic", (3, 4, 6, 3)),
    50: ("bottleneck", (3, 4, 6, 3)), 101: ("bottleneck", (3, 4, 23, 3)),
    152: ("bottleneck", (3, 8, 36, 3))}
"""Block type and blocks per stage of ResNet-10 ... 152 (He et al. 2016, table 1;
ResNet-10 is the one-block-a-stage variant)."""

RESNET_DEFAULTS: dict[str, Any] = dict(depth=18, batch=32, image=224, width=64, classes=1000,
                                       rebuild_block_inputs=False, dtype_bytes=None)
"""Default parameters of :func:`resnet`."""


def resnet(*, gpu: str | GPU = "a100", link: str | Link | None = None, depth: int = 18,
           batch: int = 32, image: int = 224, width: int = 64, classes: int = 1000,
           rebuild_block_inputs: bool = False, dtype_bytes: int | None = None) -> Instance:
    """ResNet image classification (He, Zhang, Ren and Sun, "Deep Residual Learning for
    Image Recognition", CVPR 2016, table 1; torchvision's layout: stride in the 3 x 3
    convolution, BatchNorm after every convolution, a 1 x 1 projection on the shortcut
    where the shape changes).

    Structure: stem 7 x 7 convolution (stride 2, ``width`` channels, BN, ReLU) and a
    3 x 3 max pool (stride 2, modelled as 2 x 2); four stages of basic blocks (two 3 x 3
    convolutions) or bottleneck blocks (1 x 1, 3 x 3, 1 x 1 with 4x expansion), stage j at
    ``width * 2**j`` channels and stride 2 from the second stage on; each block's output
    ``s{j}b{k}`` = ReLU(BN(last conv) + shortcut), the shortcut being the block's input or
    its projection ``s{j}b{k}.ds``; global average pool, a fully connected layer to
    `classes`, softmax cross-entropy. The residual add passes the output's gradient to
    both the branch and the shortcut, so one gradient buffer runs through each stage's
    backward (accumulated into by the first convolution of every block).

    Saved tensors: basic blocks 4 each (two convolution outputs, the inner ReLU output,
    the block output), bottlenecks 6, a projection 1 more, stem 3 and the image, head 2:
    25 / 41 / 73 / 106 / 208 / 310 for depth 10 / 18 / 34 / 50 / 101 / 152. The block
    outputs and the stem's pool output (the stages' residual stream) are block inputs,
    without recipe unless ``rebuild_block_inputs``.

    Args:
        gpu, link: presets (names or objects; None: the GPU's link).
        depth: 10, 18, 34, 50, 101 or 152.
        batch: images per step.
        image: side in pixels, a multiple of 32.
        width: channels of the first stage (64).
        classes: logits per image.
        rebuild_block_inputs: give the block inputs a recipe (BN, add and ReLU from the
            block's last convolution output and its shortcut).
        dtype_bytes: bytes per element (None: the GPU's training dtype).

    Returns:
        The validated :class:`Instance`, named like ``"shapes-resnet18_a100-pcie4"``.

    Raises:
        KeyError: unknown GPU or link preset.
        WorkloadError: a parameter out of range.
    """
    g, lk, B, dt = _setup(gpu, link, batch, dtype_bytes)
    if depth not in RESNET_BLOCKS:
        raise WorkloadError(f"parameter 'depth' must be one of "
                            f"{', '.join(map(str, RESNET_BLOCKS))}, got {depth!r}")
    image, width = _side("image", image, 32), check_int("width", width)
    classes = check_int("classes", classes)
    rebuild = _check_bool("rebuild_block_inputs", rebuild_block_inputs)
    kind, counts = RESNET_BLOCKS[depth]
    net = _Net(g, dt, B)
    x = net.input(3, image, image)
    x = net.conv("stem", x, width, k=7, stride=2, bn=True, layer=-1)
    x = net.pool("stem.pool", x, layer=-1, category="block_input")
    inputs = [x]
    for j, n in enumerate(counts):
        ch = width * 2 ** j
        for k in range(n):
            stride = 2 if j > 0 and k == 0 else 1
            name = f"s{j}b{k}"
            last = j == len(counts) - 1 and k == n - 1
            if kind == "basic":
                y = net.conv(f"{name}.conv1", x, ch, stride=stride, bn=True, layer=j)
                y = net.conv(f"{name}.conv2", y, ch, bn=True, act=False, layer=j,
                             category="temp")
                out_ch = ch
            else:
                y = net.conv(f"{name}.conv1", x, ch, k=1, bn=True, layer=j)
                y = net.conv(f"{name}.conv2", y, ch, stride=stride, bn=True, layer=j)
                y = net.conv(f"{name}.conv3", y, 4 * ch, k=1, bn=True, act=False, layer=j,
                             category="temp")
                out_ch = 4 * ch
            short = x
            if stride != 1 or net.shape[x][0] != out_ch:
                short = net.conv(f"{name}.ds", x, out_ch, k=1, stride=stride, bn=True,
                                 act=False, layer=j, category="temp")
            x = net.add(name, [y, short], layer=j, act=True,
                        category="block_output" if last else "block_input")
            inputs.append(x)
    if not rebuild:
        net.no_recipe.update(inputs)
    x = net.gap("pool", x)
    x = net.conv("fc", x, classes, k=1, act=False, layer=-1, category="logits")
    net.loss(x)
    params = dict(depth=depth, batch=B, image=image, width=width, classes=classes,
                  rebuild_block_inputs=rebuild, dtype_bytes=dt)
    return _finish(net, "resnet", f"resnet{depth}", g, lk, params, RESNET_DEFAULTS,
                   ("depth",))


# -------------------------------------------------------------------- densenet
DENSENET_DEFAULTS: dict[str, Any] = dict(blocks=3, layers=6, growth=32, batch=32, image=224,
                                         classes=1000, rebuild_block_inputs=False,
                                         dtype_bytes=None)
"""Default parameters of :func:`densenet`."""


def densenet(*, gpu: str | GPU = "a100", link: str | Link | None = None, blocks: int = 3,
             layers: int = 6, growth: int = 32, batch: int = 32, image: int = 224,
             classes: int = 1000, rebuild_block_inputs: bool = False,
             dtype_bytes: int | None = None) -> Instance:
    """DenseNet-BC image classification (Huang, Liu, van der Maaten and Weinberger,
    "Densely Connected Convolutional Networks", CVPR 2017, section 3 and table 1;
    DenseNet-121 is blocks of 6, 12, 24, 16 layers at growth 32).

    Structure: stem 7 x 7 convolution (stride 2, ``2 * growth`` channels, BN, ReLU) and a
    2 x 2 max pool: the first block's input ``b0.in``. Dense block j has `layers` layers;
    layer l: BatchNorm and ReLU over the channel concatenation of the block's input and
    every earlier layer's features (not materialised: one BN reads them all, the
    shared-storage implementation of Pleiss et al. 2017, arXiv:1707.06990), a 1 x 1
    bottleneck convolution to ``4 * growth`` channels, BN, ReLU, a 3 x 3 convolution to
    `growth` channels: the features ``b{j}l{l}``. Each features tensor is read by the
    BatchNorm of every later layer of its block and of the transition, forward and
    backward (its gradient is accumulated by all of them). A transition (BN and ReLU over
    the block's features, a 1 x 1 convolution halving the channels, a 2 x 2 average pool)
    gives the next block's input; after the last block BN and ReLU, global average pool,
    a fully connected layer, softmax cross-entropy.

    Saved tensors: ``4 * blocks * layers`` in the layers, 2 per transition, stem 3 and the
    image, head 3 (83 with the defaults; DenseNet-121's blocks are 232 of them). Block
    inputs (``b{j}.in``) have no recipe unless ``rebuild_block_inputs``.

    Args:
        gpu, link: presets (names or objects; None: the GPU's link).
        blocks: dense blocks (1 to 6).
        layers: layers per block.
        growth: features per layer (k).
        batch: images per step.
        image: side in pixels, a multiple of ``2**(blocks + 1)``.
        classes: logits per image.
        rebuild_block_inputs: give the block inputs a recipe (the transition's
            convolution and pool, or the stem's pool).
        dtype_bytes: bytes per element (None: the GPU's training dtype).

    Returns:
        The validated :class:`Instance`, named like ``"shapes-densenet3x6_a100-pcie4"``.

    Raises:
        KeyError: unknown GPU or link preset.
        WorkloadError: a parameter out of range.
    """
    g, lk, B, dt = _setup(gpu, link, batch, dtype_bytes)
    nb = _int_in("blocks", blocks, 1, 6)
    nl, k = check_int("layers", layers), check_int("growth", growth)
    image, classes = _side("image", image, 2 ** (nb + 1)), check_int("classes", classes)
    rebuild = _check_bool("rebuild_block_inputs", rebuild_block_inputs)
    net = _Net(g, dt, B)
    x = net.input(3, image, image)
    x = net.conv("stem", x, 2 * k, k=7, stride=2, bn=True, layer=-1)
    x = net.pool("b0.in", x, layer=-1, category="block_input")
    inputs = [x]
    for j in range(nb):
        feats = [x]
        for li in range(nl):
            r = net.bn_relu(f"b{j}l{li}.bn1", feats, layer=j)
            r = net.conv(f"b{j}l{li}.conv1", r, 4 * k, k=1, bn=True, layer=j)
            feats.append(net.conv(f"b{j}l{li}", r, k, act=False, layer=j,
                                  category="feature"))
        r = net.bn_relu(f"b{j}.norm", feats, layer=j)
        if j == nb - 1:
            x = r
            break
        c = sum(net.shape[f][0] for f in feats) // 2
        t = net.conv(f"t{j}", r, c, k=1, act=False, layer=j, category="temp")
        x = net.pool(f"b{j + 1}.in", t, layer=j, kind="avg", category="block_input")
        inputs.append(x)
    if not rebuild:
        net.no_recipe.update(inputs)
    x = net.gap("pool", x)
    x = net.conv("fc", x, classes, k=1, act=False, layer=-1, category="logits")
    net.loss(x)
    params = dict(blocks=nb, layers=nl, growth=k, batch=B, image=image, classes=classes,
                  rebuild_block_inputs=rebuild, dtype_bytes=dt)
    return _finish(net, "densenet", f"densenet{nb}x{nl}", g, lk, params, DENSENET_DEFAULTS,
                   ("blocks", "layers"))


# -------------------------------------------------------------------- mobilenet
MOBILENET_V2: tuple[tuple[int, int, int, int], ...] = (
    (1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
    (6, 160, 3, 2), (6, 320, 1, 1))
"""(expansion t, channels c, repeats n, stride s) of MobileNetV2's stages (Sandler et al.
2018, table 2): 17 inverted residual blocks."""

MOBILENET_DEFAULTS: dict[str, Any] = dict(blocks=17, batch=64, image=224, width=1.0,
                                          classes=1000, rebuild_block_inputs=False,
                                          dtype_bytes=None)
"""Default parameters of :func:`mobilenet`."""


def _make_divisible(v: float, d: int = 8) -> int:
    """MobileNet's channel rounding: the nearest multiple of d, never 10% below v."""
    out = max(d, int(v + d / 2) // d * d)
    return out + d if out < 0.9 * v else out


def _stage_repeats(blocks: int) -> list[int]:
    """Blocks per stage: the first `blocks` stages with one block each when blocks < 7;
    otherwise the table's repeats scaled to sum to `blocks` (largest remainders, ties to
    the earlier stage), each at least 1."""
    if blocks < len(MOBILENET_V2):
        return [1] * blocks
    base = [n for _, _, n, _ in MOBILENET_V2]
    share = [n * blocks / sum(base) for n in base]
    out = [max(1, int(s)) for s in share]
    order = sorted(range(len(base)), key=lambda i: (-(share[i] - int(share[i])), i))
    i = 0
    while sum(out) < blocks:
        out[order[i % len(order)]] += 1
        i += 1
    while sum(out) > blocks:  # only when a max(1, .) raised a stage
        j = max(range(len(out)), key=lambda i: (out[i], -i))
        out[j] -= 1
    return out


def mobilenet(*, gpu: str | GPU = "a100", link: str | Link | None = None, blocks: int = 17,
              batch: int = 64, image: int = 224, width: float = 1.0, classes: int = 1000,
              rebuild_block_inputs: bool = False, dtype_bytes: int | None = None
              ) -> Instance:
    """MobileNetV2 image classification (Sandler, Howard, Zhu, Zhmoginov and Chen,
    "MobileNetV2: Inverted Residuals and Linear Bottlenecks", CVPR 2018, table 2).

    Structure: stem 3 x 3 convolution (stride 2, ``32 * width`` channels, BN, ReLU6);
    inverted residual blocks ``s{j}b{k}``: a 1 x 1 expansion (t x the input channels, BN,
    ReLU6; none when t = 1), a 3 x 3 depthwise convolution (groups = channels, the
    stage's stride on the first block, BN, ReLU6), a 1 x 1 linear projection (BN, no
    activation), plus the block's input when the stride is 1 and the channels agree;
    a 1 x 1 convolution to ``1280 * max(1, width)`` channels (BN, ReLU6), global average
    pool, a fully connected layer, softmax cross-entropy. Depthwise convolutions come
    out memory-bound on every GPU preset, so the early, large activations are cheap to
    rebuild per byte and the late, small ones dear.

    `blocks` sets the depth: the table's 17 blocks; fewer than 7 take the first stages
    with one block each, more scale the table's repeats. Saved tensors: 6 per block with
    expansion (expansion and depthwise convolution outputs and their ReLU6 outputs, the
    projection's convolution output, the block output), 4 for t = 1, the stem 2 and the
    image, head 4: 23 for blocks = 3, 107 for 17, 289 for 48. Block outputs (the next
    block's input) have no recipe unless ``rebuild_block_inputs``.

    Args:
        gpu, link: presets (names or objects; None: the GPU's link).
        blocks: inverted residual blocks (1 to 256).
        batch: images per step.
        image: side in pixels, a multiple of 32.
        width: the width multiplier alpha (channels rounded to multiples of 8).
        classes: logits per image.
        rebuild_block_inputs: give the block outputs a recipe (the projection's BN [and
            the add] from the projection's convolution output [and the block's input]).
        dtype_bytes: bytes per element (None: the GPU's training dtype).

    Returns:
        The validated :class:`Instance`, named like ``"shapes-mobilenet17_a100-pcie4"``.

    Raises:
        KeyError: unknown GPU or link preset.
        WorkloadError: a parameter out of range.
    """
    g, lk, B, dt = _setup(gpu, link, batch, dtype_bytes)
    nblk = _int_in("blocks", blocks, 1, 256)
    image = _side("image", image, 32)
    alpha = _check_float("width", width, 0.0, 8.0)
    classes = check_int("classes", classes)
    rebuild = _check_bool("rebuild_block_inputs", rebuild_block_inputs)
    net = _Net(g, dt, B)
    x = net.input(3, image, image)
    x = net.conv("stem", x, _make_divisible(32 * alpha), stride=2, bn=True, layer=-1,
                 category="block_input")
    inputs = [x]
    reps = _stage_repeats(nblk)
    for j, n in enumerate(reps):
        t, c, _, s = MOBILENET_V2[j]
        cout = _make_divisible(c * alpha)
        for k in range(n):
            name = f"s{j}b{k}"
            stride = s if k == 0 else 1
            cin = net.shape[x][0]
            y = x
            if t != 1:
                y = net.conv(f"{name}.expand", y, cin * t, k=1, bn=True, layer=j)
            ch = net.shape[y][0]
            y = net.conv(f"{name}.dw", y, ch, stride=stride, groups=ch, bn=True, layer=j)
            last = j == len(reps) - 1 and k == n - 1
            cat = "block_output" if last else "block_input"
            if stride == 1 and cin == cout:
                y = net.conv(f"{name}.project", y, cout, k=1, bn=True, act=False, layer=j,
                             category="temp")
                x = net.add(name, [y, x], layer=j, act=False, category=cat)
            else:
                x = net.conv(name, y, cout, k=1, bn=True, act=False, layer=j, category=cat)
            inputs.append(x)
    if not rebuild:
        net.no_recipe.update(inputs)
    x = net.conv("head", x, _make_divisible(1280 * max(1.0, alpha)), k=1, bn=True, layer=-1)
    x = net.gap("pool", x)
    x = net.conv("fc", x, classes, k=1, act=False, layer=-1, category="logits")
    net.loss(x)
    params = dict(blocks=nblk, batch=B, image=image, width=alpha, classes=classes,
                  rebuild_block_inputs=rebuild, dtype_bytes=dt)
    return _finish(net, "mobilenet", f"mobilenet{nblk}", g, lk, params, MOBILENET_DEFAULTS,
                   ("blocks",))


# -------------------------------------------------------------------- branches
BRANCHES_DEFAULTS: dict[str, Any] = dict(cells=6, max_branches=3, seed=0, batch=32,
                                         image=64, channels=32, dtype_bytes=None)
"""Default parameters of :func:`branches`."""


def branches(*, gpu: str | GPU = "a100", link: str | Link | None = None, cells: int = 6,
             max_branches: int = 3, seed: int = 0, batch: int = 32, image: int = 64,
             channels: int = 32, dtype_bytes: int | None = None) -> Instance:
    """Seeded random multi-branch cells: branches that fork from one tensor and merge
    (the cells of Inception, Szegedy et al., "Going Deeper with Convolutions", CVPR 2015,
    and of NASNet, Zoph, Vasudevan, Shlens and Le, CVPR 2018, drawn at random).

    Structure: a stem 3 x 3 convolution (``channels``, BN, ReLU); cells ``c{i}``, each
    drawing from ``numpy.random.default_rng(seed)`` in a fixed order: 2 to
    `max_branches` branches from the cell's input, each a chain of 1 to 3 units (a
    k x k convolution, k in {1, 3, 5}, with BN and ReLU); the branches merge by an add
    (then ReLU) or a concatenation followed by a 1 x 1 convolution (BN, ReLU) back to the
    cell's channels; with probability 1/2 the merge also takes the output of a drawn
    earlier cell of the same resolution (a skip). Every third cell (the 3rd, 6th, ...)
    halves the side with stride 2 in every branch's first unit and doubles the channels
    (it takes no skip), so each stage's activations are half the size of the stage's
    before. Head: global average pool, a fully connected layer to 10 classes, softmax
    cross-entropy.

    Saved tensors: 2 per BN unit, 1 per concatenation, 2 per merging convolution or 1
    per add: 87 with the defaults (6 cells, seed 0), 147 for 12 cells with seed 1. Every
    saved tensor but the image is rebuildable.

    Args:
        gpu, link: presets (names or objects; None: the GPU's link).
        cells: cells (1 to 64).
        max_branches: most branches a cell draws (2 to 8).
        seed: random seed (int >= 0); one seed gives one instance.
        batch: images per step.
        image: side in pixels, a multiple of ``2**(cells // 3)``.
        channels: channels of the first stage.
        dtype_bytes: bytes per element (None: the GPU's training dtype).

    Returns:
        The validated :class:`Instance`, named like ``"shapes-branches6-seed0_a100-pcie4"``.

    Raises:
        KeyError: unknown GPU or link preset.
        WorkloadError: a parameter out of range.
    """
    g, lk, B, dt = _setup(gpu, link, batch, dtype_bytes)
    nc = _int_in("cells", cells, 1, 64)
    mb = _int_in("max_branches", max_branches, 2, 8)
    seed = check_int("seed", seed, minimum=0)
    image = _side("image", image, 2 ** (nc // 3))
    ch = ch0 = check_int("channels", channels)
    rng = np.random.default_rng(seed)
    net = _Net(g, dt, B)
    x = net.input(3, image, image)
    x = net.conv("stem", x, ch, bn=True, layer=-1, category="block_input")
    same_res: list[str] = []
    for i in range(nc):
        down = (i + 1) % 3 == 0
        cout = 2 * ch if down else ch
        outs: list[str] = []
        for br in range(int(rng.integers(2, mb, endpoint=True))):
            y = x
            for u in range(int(rng.integers(1, 3, endpoint=True))):
                k = int(rng.choice([1, 3, 5]))
                y = net.conv(f"c{i}.b{br}.u{u}", y, cout, k=k,
                             stride=2 if down and u == 0 else 1, bn=True, layer=i)
            outs.append(y)
        if same_res and not down and rng.random() < 0.5:
            outs.append(same_res[int(rng.integers(len(same_res)))])
        last = i == nc - 1
        cat = "block_output" if last else "block_input"
        if rng.random() < 0.5:
            x = net.add(f"c{i}", outs, layer=i, act=True, category=cat)
        else:
            m = net.cat(f"c{i}.cat", outs, layer=i)
            x = net.conv(f"c{i}", m, cout, k=1, bn=True, layer=i, category=cat)
        if down:
            same_res = []
        same_res.append(x)
        ch = cout
    x = net.gap("pool", x)
    x = net.conv("fc", x, 10, k=1, act=False, layer=-1, category="logits")
    net.loss(x)
    params = dict(cells=nc, max_branches=mb, seed=seed, batch=B, image=image, channels=ch0,
                  dtype_bytes=dt)
    return _finish(net, "branches", f"branches{nc}", g, lk, params, BRANCHES_DEFAULTS,
                   ("cells", "seed"), first={"seed": seed})


FAMILIES: dict[str, Callable[..., Instance]] = {
    "fcn": fcn, "unet": unet, "resnet": resnet, "densenet": densenet,
    "mobilenet": mobilenet, "branches": branches}
"""The families by name; the workload registry names them ``shapes-<family>``."""


__all__ = ["FAMILIES", "MAX_RECIPE_OPS", "fcn", "unet", "resnet", "densenet", "mobilenet",
           "branches", "FCN_DEFAULTS", "UNET_DEFAULTS", "RESNET_DEFAULTS",
           "DENSENET_DEFAULTS", "MOBILENET_DEFAULTS", "BRANCHES_DEFAULTS", "VGG_STAGES",
           "RESNET_BLOCKS", "MOBILENET_V2"]
