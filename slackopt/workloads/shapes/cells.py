"""Seeded random cells of branches that merge by an add or a concatenation, with skips
from earlier cells (Inception and NAS cells)."""

from __future__ import annotations

from typing import Any

import numpy as np

from slackopt.hardware import GPU, Link
from slackopt.instance import Instance
from slackopt.workloads._builder import (
    check_int,
)
from slackopt.workloads.shapes.net import _Net
from slackopt.workloads.shapes.params import (
    _finish,
    _int_in,
    _setup,
    _side,
)

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
