"""The families with long skips: FCN-8s (scores of pool3 and pool4 fused with the
upsampled coarse scores) and U-Net (encoder levels joined to the decoder by
concatenation)."""

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
    _finish,
    _int_in,
    _setup,
    _side,
)

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
