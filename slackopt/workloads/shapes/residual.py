"""The families of residual adds: ResNet (basic and bottleneck blocks) and MobileNetV2
(inverted residuals of pointwise and depthwise convolutions)."""

from __future__ import annotations

from typing import Any

from slackopt.hardware import GPU, Link
from slackopt.instance import Instance
from slackopt.workloads._builder import (
    WorkloadError,
    check_int,
)
from slackopt.workloads.shapes.net import _Net
from slackopt.workloads.shapes.params import (
    _check_bool,
    _check_float,
    _finish,
    _int_in,
    _setup,
    _side,
)

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
