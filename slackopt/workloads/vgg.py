"""VGG training iteration (VGG-16 by default; 11, 13 and 19 also available).

Source: docs/workloads.md ("Saved tensors per layer", "Totals"), Simonyan and Zisserman (2015),
configurations A/B/D/E. Units: bytes, FLOPs, seconds. Element size is the GPU's training
dtype unless ``dtype_bytes`` is given (A100: BF16, 2 B; Titan X: FP32, 4 B).

Operator model (all ops timed by :func:`slackopt.hardware.roofline_s`):

- ``input``: a zero-duration op producing the image batch (saved: conv1_1's weight
  gradient reads it; c = inf, it comes from the data loader).
- 3x3 convolution (pad 1): 2 x H x W x 9 x C_in x C_out FLOPs per image at 75% of peak,
  bytes = input + output + weights. Backward: ``.dgrad`` and ``.wgrad`` with the forward
  FLOPs each (no ``.dgrad`` for conv1_1: the image needs no gradient).
- ReLU: a separate memory-bound kernel (reads and writes its tensor, 2 x size), applied
  in place: the convolution's output is not saved, the ReLU's output is (its backward
  reads it). The pair is the ReLU output's producer chain, so its recipe re-runs
  conv + ReLU from the previous saved tensor; the rebuild writes the convolution's output
  into the rebuilt tensor's own buffer and applies the ReLU there, so it holds no
  intermediate (``transient_bytes`` = 0). In the forward schedule the allocator of
  docs/model.md has no aliasing, so the convolution output is a temporary that lives
  until the ReLU ends (the ReLU kernel briefly holds input and output, as the
  transformers' dropout and add do: conservative by one output for one kernel); A and P
  are unaffected. Separate ReLU kernels are what make the forward time come out at
  22.7 ms (a fused conv+ReLU gives 18.6 ms).
- 2x2 max pool: memory-bound, input + output bytes; backward reads the output gradient
  and the pool input and writes the input gradient. Its output is saved (read by the next
  layer's weight gradient), recipe = the pool from the ReLU output.
- Classifier fc6 (25088 -> 4096), fc7 (4096 -> 4096), each with a ReLU (same pattern), fc8
  (4096 -> classes) producing the saved logits; softmax cross-entropy loss (reads the
  logits; its backward reads them and writes their gradient). Dropout in the classifier
  is not modelled (the spec lists no masks).
- Backward ReLU: reads its output and the incoming gradient and writes the gradient
  (3 x size), in place like the forward (Caffe/cuDNN semantics, vDNN's setting): the
  convolution's backward then reads the same gradient buffer. Gradients otherwise follow
  docs/model.md: each backward op writes its input's gradient, freed after its last reader.

Saved per image (BF16, VGG-16): image 301 KB, 13 conv ReLU outputs, 5 pool outputs,
fc6/fc7 ReLU outputs, logits = 30.5 MB; conv1_1 + conv1_2 hold 42.1%.

Blocks: ``Op.layer`` is the VGG stage (0-4: "block1" ... "block5" of the usual naming,
each ending with its pool); the input op, the classifier and the loss have layer -1.
Stage j's input is the image (category "image", c = inf) or the previous stage's pool
output, which therefore has category "block_input" (produced by the last op of stage j-1,
as a transformer block input is); the last pool output, the classifier's input, has
category "block_output". Other saved tensors: "relu_out" (conv and fc6/fc7 ReLU outputs),
"logits".
"""

from __future__ import annotations

from typing import Any

from slackopt.hardware import GPU, Link
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

CONFIGS: dict[int, tuple[tuple[int, ...], ...]] = {
    11: ((64,), (128,), (256, 256), (512, 512), (512, 512)),
    13: ((64, 64), (128, 128), (256, 256), (512, 512), (512, 512)),
    16: ((64, 64), (128, 128), (256, 256, 256), (512, 512, 512), (512, 512, 512)),
    19: ((64, 64), (128, 128), (256,) * 4, (512,) * 4, (512,) * 4),
}
"""Convolution output channels per stage for VGG-11/13/16/19 (configurations A, B, D, E)."""

DEFAULTS: dict[str, Any] = dict(depth=16, batch=128, image=224, classes=1000, dtype_bytes=None)
"""Default parameters (docs/workloads.md: VGG-16, batch 128, 224 x 224 images)."""


def vgg16(*, gpu: str | GPU = "a100", link: str | Link | None = None, depth: int = 16,
          batch: int = 128, image: int = 224, classes: int = 1000,
          dtype_bytes: int | None = None) -> Instance:
    """A VGG training iteration.

    Args:
        gpu: GPU preset name or :class:`GPU`.
        link: host-link preset name, :class:`Link`, or None for the GPU's default link.
        depth: 11, 13, 16 or 19 (VGG configuration).
        batch: images per iteration.
        image: image side in pixels (a multiple of 32).
        classes: logits per image.
        dtype_bytes: bytes per element (None: the GPU's training dtype).

    Returns:
        The validated :class:`Instance` named like ``"vgg16_a100-pcie4"``. With the
        defaults on the A100: A = 3.90 GB, T_F = 22.7 ms, ideal step 65.2 ms (as the
        spec); P = 3.92 GB (spec 3.90 GB): the keep-all peak is in pool5's backward, which
        writes a 4x larger input gradient while little has been freed yet.

    Raises:
        KeyError: unknown GPU or link preset.
        WorkloadError: unsupported depth, a non-positive size, or an image side that is
            not a multiple of 32.
    """
    g, lk = resolve_hardware(gpu, link)
    if depth not in CONFIGS:
        raise WorkloadError(f"VGG depth must be one of {', '.join(map(str, CONFIGS))}, "
                            f"got {depth!r}")
    batch = check_int("batch", batch)
    image = check_int("image", image)
    classes = check_int("classes", classes)
    if image % 32:
        raise WorkloadError(f"image side must be a multiple of 32 (five 2x2 pools), got {image}")
    dt = check_int("dtype_bytes", g.dtype_bytes if dtype_bytes is None else dtype_bytes)
    params = dict(depth=depth, batch=batch, image=image, classes=classes, dtype_bytes=dt)

    b = GraphBuilder(g)
    B = batch
    H, C = image, 3
    img = b.tensor("image", B * C * H * H * dt,
                   b.op("input", "fwd", kind="input", duration_s=0.0), category="image")
    prev = img
    # Forward layers in order, for the backward pass: (kind, op, relu op, layer, input
    # tensor, output tensor, FLOPs, bytes of input, output and weights).
    fwd: list[tuple[str, str, str, int, str, str, float, int, int, int]] = []

    def linear_relu(kind: str, name: str, rname: str, layer: int, flops: float, in_b: int,
                    out_b: int, w_b: int) -> str:
        """conv/fc op writing a temporary, then the in-place ReLU whose output is saved."""
        op = b.op(name, "fwd", kind=kind, layer=layer, flops=flops,
                  bytes_moved=in_b + out_b + w_b, reads=[prev])
        pre = b.tensor(f"{name}_out", out_b, op, category="temp")
        rl = b.mem_op(rname, "fwd", kind="relu", layer=layer, bytes_moved=2 * out_b,
                      reads=[pre])
        out = b.tensor(f"{rname}_out", out_b, rl, category="relu_out",
                       recipe=Recipe((op, rl), (prev,)))
        fwd.append((kind, op, rl, layer, prev, out, flops, in_b, out_b, w_b))
        return out

    for s, chans in enumerate(CONFIGS[depth]):
        for k, cout in enumerate(chans, start=1):
            prev = linear_relu("conv", f"conv{s + 1}_{k}", f"relu{s + 1}_{k}", s,
                               2.0 * H * H * 9 * C * cout * B, B * C * H * H * dt,
                               B * cout * H * H * dt, 9 * C * cout * dt)
            C = cout
        in_b = B * C * H * H * dt
        H //= 2
        out_b = B * C * H * H * dt
        pl = b.mem_op(f"pool{s + 1}", "fwd", kind="pool", layer=s, bytes_moved=in_b + out_b,
                      reads=[prev])
        last_stage = s == len(CONFIGS[depth]) - 1
        po = b.tensor(f"pool{s + 1}_out", out_b, pl,
                      category="block_output" if last_stage else "block_input",
                      recipe=Recipe((pl,), (prev,)))
        fwd.append(("pool", pl, "", s, prev, po, 0.0, in_b, out_b, 0))
        prev = po

    # Classifier: fc6 and fc7 with ReLU, fc8 -> logits, loss.
    k_in = C * H * H
    for name, n in (("fc6", 4096), ("fc7", 4096)):
        prev = linear_relu("gemm", name, "relu" + name[2:], -1, 2.0 * B * k_in * n,
                           B * k_in * dt, B * n * dt, k_in * n * dt)
        k_in = n
    fl = 2.0 * B * k_in * classes
    in_b, out_b, w_b = B * k_in * dt, B * classes * dt, k_in * classes * dt
    fc8 = b.op("fc8", "fwd", kind="gemm", layer=-1, flops=fl, bytes_moved=in_b + out_b + w_b,
               reads=[prev])
    logits = b.tensor("logits", out_b, fc8, category="logits", recipe=Recipe((fc8,), (prev,)))
    fwd.append(("gemm", fc8, "", -1, prev, logits, fl, in_b, out_b, w_b))
    b.mem_op("loss", "fwd", kind="loss", layer=-1, bytes_moved=out_b, reads=[logits])

    # ---------------------------------------------------------------- backward
    lb = b.mem_op("loss.bwd", "bwd", kind="loss", layer=-1, bytes_moved=2 * out_b,
                  reads=[logits])
    grad = b.tensor("d_logits", out_b, lb, category="grad")  # gradient of the current output
    for kind, op, rl, layer, inp, out, flops, in_b, out_b, w_b in reversed(fwd):
        if kind == "pool":
            pb = b.mem_op(f"{op}.bwd", "bwd", kind="pool", layer=layer,
                          bytes_moved=2 * in_b + out_b, reads=[grad, inp])
            grad = b.tensor(f"d_{inp}", in_b, pb, category="grad")
            continue
        if rl:  # in place: the ReLU backward overwrites its incoming gradient
            b.mem_op(f"{rl}.bwd", "bwd", kind="relu", layer=layer, bytes_moved=3 * out_b,
                     reads=[grad, out])
        nbytes = in_b + out_b + w_b
        d = None
        if inp != img:  # the image needs no gradient
            d = b.op(f"{op}.dgrad", "bwd", kind=kind, layer=layer, flops=flops,
                     bytes_moved=nbytes, reads=[grad])
        b.op(f"{op}.wgrad", "bwd", kind=kind, layer=layer, flops=flops, bytes_moved=nbytes,
             reads=[grad, inp])
        if d is not None:
            grad = b.tensor(f"d_{inp}", in_b, d, category="grad")
    defaults = dict(DEFAULTS, dtype_bytes=g.dtype_bytes)
    name = f"vgg{depth}" if depth != 16 else "vgg16"
    inst_name = instance_name(
        name, g, lk, overrides_of({k: v for k, v in params.items() if k != "depth"}, defaults))
    return b.build(inst_name, lk, make_meta("vgg16", params, g, lk))


__all__ = ["vgg16", "CONFIGS", "DEFAULTS"]
