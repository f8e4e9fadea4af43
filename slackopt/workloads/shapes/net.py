"""The forward graph of a CNN (:class:`_Net`) and its emission as an Instance: forward ops,
saved tensors with their recipes, and the backward pass derived from the graph (the
operator model of :mod:`slackopt.workloads.shapes`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from slackopt.hardware import GEMM_EFF, GPU, MEM_EFF, Link
from slackopt.instance import Instance, Recipe
from slackopt.workloads._builder import (
    GraphBuilder,
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
