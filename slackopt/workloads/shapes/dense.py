"""DenseNet-BC: every feature map read by every later layer of its dense block."""

from __future__ import annotations

from typing import Any

from slackopt.hardware import GPU, Link
from slackopt.instance import Instance
from slackopt.workloads._builder import (
    check_int,
)
from slackopt.workloads.shapes.net import _Net
from slackopt.workloads.shapes.params import (
    _check_bool,
    _finish,
    _int_in,
    _setup,
    _side,
)

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
