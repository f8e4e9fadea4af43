"""Synthetic linear chains: small, seeded instances for tests and teaching.

Not from the paper; a chain is the simplest graph with the paper's trade-off (section 3.1):
every layer saves one activation that the backward pass reads, each rebuildable by
re-running its layer from the previous activation. Units: bytes, FLOPs, seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slackopt.hardware import GPU, Link
from slackopt.instance import Instance, Recipe
from slackopt.workloads._builder import (
    GraphBuilder,
    WorkloadError,
    check_int,
    instance_name,
    make_meta,
    resolve_hardware,
)

DEFAULTS = dict(n_layers=8, seed=0, min_bytes=16_000_000, max_bytes=256_000_000,
                min_flops=1e10, max_flops=2e11, bwd_factor=2.0)
"""Default parameters of :func:`chain`."""


def chain(n_layers: int = 8, *, seed: int = 0, gpu: str | GPU = "a100",
          link: str | Link | None = None, min_bytes: int = 16_000_000,
          max_bytes: int = 256_000_000, min_flops: float = 1e10, max_flops: float = 2e11,
          bwd_factor: float = 2.0) -> Instance:
    """A linear chain of ``n_layers`` layers with random activation sizes and FLOPs.

    Structure: ``input`` (zero duration) produces ``x`` (saved, c = inf); layer i's
    forward op ``L{i}.f`` reads the previous activation and produces ``L{i}.a`` (saved,
    recipe: re-run ``L{i}.f`` from the previous activation); ``loss`` reads the last
    activation. Backward: ``loss.bwd`` reads the last activation and writes its gradient;
    ``L{i}.b`` (i = n-1 ... 0) reads the gradient of its output and its input activation
    and writes the gradient of its input (none for layer 0). Every forward op of layer i
    and its backward op have ``layer = i``.

    Sizes are uniform integers in [min_bytes, max_bytes] (bytes), forward FLOPs uniform in
    [min_flops, max_flops]; op time is the GPU's roofline (GEMM efficiency, bytes = input
    + output), backward FLOPs are ``bwd_factor`` x forward. Draws come from
    ``numpy.random.default_rng(seed)`` in a fixed order, so one seed gives one instance.

    Args:
        n_layers: layers (>= 1).
        seed: random seed (int >= 0).
        gpu: GPU preset name or :class:`GPU`.
        link: host-link preset name, :class:`Link`, or None for the GPU's default.
        min_bytes, max_bytes: activation size range (bytes, 0 <= min <= max).
        min_flops, max_flops: forward FLOPs range per layer (0 <= min <= max).
        bwd_factor: backward FLOPs per forward FLOP (>= 0).

    Returns:
        The validated :class:`Instance` named like ``"chain8-seed0_a100-pcie4"``.

    Raises:
        KeyError: unknown GPU or link preset.
        WorkloadError: a parameter out of range.
    """
    g, lk = resolve_hardware(gpu, link)
    n = check_int("n_layers", n_layers)
    seed = check_int("seed", seed, minimum=0)
    lo_b, hi_b = check_int("min_bytes", min_bytes, 0), check_int("max_bytes", max_bytes, 0)
    if lo_b > hi_b:
        raise WorkloadError(f"min_bytes {lo_b} > max_bytes {hi_b}")
    if not (0 <= min_flops <= max_flops) or not np.isfinite(max_flops):
        raise WorkloadError(f"need 0 <= min_flops <= max_flops < inf, got "
                            f"{min_flops!r}, {max_flops!r}")
    if not (np.isfinite(bwd_factor) and bwd_factor >= 0):
        raise WorkloadError(f"bwd_factor must be finite and >= 0, got {bwd_factor!r}")

    rng = np.random.default_rng(seed)
    sizes = rng.integers(lo_b, hi_b, size=n + 1, endpoint=True)  # [0] is the input x
    flops = rng.uniform(min_flops, max_flops, size=n)

    b = GraphBuilder(g)
    prev = b.tensor("x", int(sizes[0]), b.op("input", "fwd", kind="input", duration_s=0.0),
                    category="block_input")
    acts = [prev]
    for i in range(n):
        op = b.op(f"L{i}.f", "fwd", kind="gemm", layer=i, flops=float(flops[i]),
                  bytes_moved=int(sizes[i] + sizes[i + 1]), reads=[prev])
        prev = b.tensor(f"L{i}.a", int(sizes[i + 1]), op, category="act_out",
                        recipe=Recipe((op,), (prev,)))
        acts.append(prev)
    b.mem_op("loss", "fwd", kind="loss", layer=-1, bytes_moved=int(sizes[n]), reads=[prev])
    lb = b.mem_op("loss.bwd", "bwd", kind="loss", layer=-1, bytes_moved=2 * int(sizes[n]),
                  reads=[prev])
    grad = b.tensor(f"d_L{n - 1}.a", int(sizes[n]), lb, category="grad")
    for i in reversed(range(n)):
        op = b.op(f"L{i}.b", "bwd", kind="gemm", layer=i, flops=bwd_factor * float(flops[i]),
                  bytes_moved=int(2 * sizes[i] + sizes[i + 1]), reads=[grad, acts[i]])
        if i > 0:
            grad = b.tensor(f"d_{acts[i]}", int(sizes[i]), op, category="grad")
    params = dict(n_layers=n, seed=seed, min_bytes=lo_b, max_bytes=hi_b,
                  min_flops=float(min_flops), max_flops=float(max_flops),
                  bwd_factor=float(bwd_factor))
    shown = {"seed": seed}
    shown.update({k: v for k, v in params.items()
                  if k not in ("n_layers", "seed") and v != DEFAULTS[k]})
    return b.build(instance_name(f"chain{n}", g, lk, shown), lk,
                   make_meta("chain", params, g, lk))



UNET_DEFAULTS = dict(levels=3, batch=4, size=64, channels=32, dtype_bytes=None)
"""Default parameters of :func:`unet`."""


def unet(levels: int = 3, *, batch: int = 4, size: int = 64, channels: int = 32,
         dtype_bytes: int | None = None, gpu: str | GPU = "a100",
         link: str | Link | None = None) -> Instance:
    """A U-Net-like DAG with long skip connections (Ronneberger et al. 2015, simplified).

    Not from the paper; a small graph whose saved tensors have very different lifetimes:
    an encoder level's activation is read by the decoder level of the same resolution at
    the end of the forward pass (a long skip), and its skip gradient lives through most of
    the backward pass.

    Structure, for level i = 0 .. levels-1 (resolution ``size / 2**i``, ``channels *
    2**i`` channels, so every conv has the same FLOPs): ``enc{i}.conv`` reads the level's
    input (``x`` or ``p{i-1}``) and writes ``e{i}`` (saved; recipe: re-run the conv);
    ``enc{i}.pool`` reads ``e{i}`` and writes ``p{i}`` (saved; recipe: re-run the pool).
    ``mid.conv`` reads ``p{levels-1}`` and writes ``m``. Decoder, i = levels-1 .. 0:
    ``dec{i}.up`` upsamples the level below's output (``m`` or ``d{i+1}``, temporaries)
    to ``u{i}``, ``dec{i}.cat`` concatenates ``u{i}`` with the skip ``e{i}`` into ``k{i}``
    (saved; recipe: re-run the level below's conv, up and cat from that level's ``k``
    (or ``p{levels-1}``) and ``e{i}``, holding the two intermediates), ``dec{i}.conv``
    reads ``k{i}`` and writes ``d{i}``; ``loss`` reads ``d0`` (saved).
    Backward, in reverse: ``loss.bwd``; per decoder level ``dec{i}.conv.b`` (reads the
    gradient and ``k{i}``), ``dec{i}.cat.b`` (splits the gradient: the skip part
    ``g_skip{i}`` lives until the encoder level's backward), ``dec{i}.up.b``;
    ``mid.conv.b`` (reads ``p{levels-1}``); per encoder level ``enc{i}.pool.b`` (reads
    ``e{i}``, the pool gradient and ``g_skip{i}``) and ``enc{i}.conv.b`` (reads the
    level's input). The input ``x`` is kept for ``enc0.conv.b`` and cannot be rebuilt.
    Saved tensors: ``3 * levels + 2`` (x, e_i, p_i, k_i, d0).

    Op times use the GPU's roofline (3x3 convs as GEMMs, memory-bound ops at 85% of HBM);
    backward convs cost twice the forward.

    Args:
        levels: encoder/decoder levels (>= 1).
        batch: images per iteration (>= 1).
        size: input height = width in pixels (>= 2**levels).
        channels: channels at level 0 (>= 1).
        dtype_bytes: bytes per element; None uses the GPU's training dtype.
        gpu: GPU preset name or :class:`GPU`.
        link: host-link preset name, :class:`Link`, or None for the GPU's default.

    Returns:
        The validated :class:`Instance`, named like ``"unet3_a100-pcie4"``.

    Raises:
        KeyError: unknown GPU or link preset.
        WorkloadError: a parameter out of range.
    """
    g, lk = resolve_hardware(gpu, link)
    L = check_int("levels", levels)
    B = check_int("batch", batch)
    S = check_int("size", size, minimum=2 ** L)
    C = check_int("channels", channels)
    db = g.dtype_bytes if dtype_bytes is None else check_int("dtype_bytes", dtype_bytes)
    z = _UNetSizes(S, B, C, db)
    b = GraphBuilder(g)
    x, enc, pools, cats, d0 = _unet_forward(b, z, L)
    _unet_backward(b, z, L, x, enc, pools, cats, d0)
    params = dict(levels=L, batch=B, size=S, channels=C, dtype_bytes=db)
    shown = {k: v for k, v in params.items()
             if k != "levels" and UNET_DEFAULTS[k] is not None and v != UNET_DEFAULTS[k]}
    if dtype_bytes is not None:
        shown["dtype_bytes"] = db
    return b.build(instance_name(f"unet{L}", g, lk, shown), lk,
                   make_meta("unet", params, g, lk))


@dataclass(frozen=True)
class _UNetSizes:
    """The sizes of :func:`unet`'s levels: input side S (pixels), batch B, channels C at
    level 0, bytes per element db."""

    S: int
    B: int
    C: int
    db: int

    def act_bytes(self, i: int, ch_mult: int = 1) -> int:
        """Bytes of a level-i activation (resolution S / 2**i, C * 2**i channels)."""
        side = self.S // 2 ** i
        return self.B * side * side * self.C * 2 ** i * ch_mult * self.db

    def conv_flops(self, i: int) -> float:
        """FLOPs of a level-i 3 x 3 convolution (C * 2**i channels in and out)."""
        side = self.S // 2 ** i
        cin = cout = self.C * 2 ** i
        return 2.0 * self.B * side * side * cin * cout * 9


def _unet_forward(b: GraphBuilder, z: _UNetSizes, L: int
                  ) -> tuple[str, list[str], list[str], list[str], str]:
    """:func:`unet`'s forward pass and loss on `b` (`L` levels).

    Returns:
        (the input x, the encoder activations e_i, the pools p_i, the concatenations k_i
        from level L-1 down to 0, the last decoder output d0).
    """
    act_bytes, conv_flops = z.act_bytes, z.conv_flops
    inp = b.op("input", "fwd", kind="input", duration_s=0.0)
    x = b.tensor("x", z.B * z.S * z.S * z.C * z.db, inp, category="block_input")
    prev, enc, pools = x, [], []
    for i in range(L):
        op = b.op(f"enc{i}.conv", "fwd", kind="conv", layer=i, flops=conv_flops(i),
                  bytes_moved=2 * act_bytes(i), reads=[prev])
        e = b.tensor(f"e{i}", act_bytes(i), op, category="act_out",
                     recipe=Recipe((op,), (prev,)))
        op = b.mem_op(f"enc{i}.pool", "fwd", kind="pool", layer=i,
                      bytes_moved=act_bytes(i) * 5 // 4, reads=[e])
        p = b.tensor(f"p{i}", act_bytes(i) // 4, op, category="pool_out",
                     recipe=Recipe((op,), (e,)))
        enc.append(e)
        pools.append(p)
        prev = p
    mid = b.op("mid.conv", "fwd", kind="conv", layer=L, flops=conv_flops(L),
               bytes_moved=2 * act_bytes(L), reads=[prev])
    m = b.tensor("m", act_bytes(L), mid, category="temp")
    dprev, cats, prev_conv = m, [], None
    for i in reversed(range(L)):
        up = b.mem_op(f"dec{i}.up", "fwd", kind="upsample", layer=i,
                      bytes_moved=act_bytes(i + 1) + act_bytes(i), reads=[dprev])
        u = b.tensor(f"u{i}", act_bytes(i), up, category="temp")
        cat = b.mem_op(f"dec{i}.cat", "fwd", kind="concat", layer=i,
                       bytes_moved=4 * act_bytes(i), reads=[u, enc[i]])
        if prev_conv is None:   # below is the bottleneck: rebuild through it from p
            rec = Recipe((mid, up, cat), (pools[L - 1], enc[i]),
                         act_bytes(L) + act_bytes(i))
        else:                   # rebuild through the level below's conv, from its k
            rec = Recipe((prev_conv, up, cat), (cats[-1], enc[i]),
                         act_bytes(i + 1) + act_bytes(i))
        k = b.tensor(f"k{i}", act_bytes(i, 2), cat, category="concat", recipe=rec)
        cats.append(k)
        op = b.op(f"dec{i}.conv", "fwd", kind="conv", layer=i, flops=2 * conv_flops(i),
                  bytes_moved=3 * act_bytes(i), reads=[k])
        dprev = b.tensor(f"d{i}", act_bytes(i), op, category="act_out",
                         recipe=Recipe((op,), (k,)) if i == 0 else None)
        prev_conv = op
    b.mem_op("loss", "fwd", kind="loss", layer=-1, bytes_moved=act_bytes(0), reads=[dprev])
    return x, enc, pools, cats, dprev


def _unet_backward(b: GraphBuilder, z: _UNetSizes, L: int, x: str, enc: list[str],
                   pools: list[str], cats: list[str], d0: str) -> None:
    """:func:`unet`'s backward pass on `b`, after :func:`_unet_forward` (its outputs)."""
    act_bytes, conv_flops = z.act_bytes, z.conv_flops
    lb = b.mem_op("loss.bwd", "bwd", kind="loss", layer=-1, bytes_moved=2 * act_bytes(0),
                  reads=[d0])
    grad = b.tensor("g_d0", act_bytes(0), lb, category="grad")
    skips: dict[int, str] = {}
    for i in range(L):          # cats were built from level L-1 down to 0
        k = cats[L - 1 - i]
        op = b.op(f"dec{i}.conv.b", "bwd", kind="conv", layer=i, flops=4 * conv_flops(i),
                  bytes_moved=5 * act_bytes(i), reads=[grad, k])
        gk = b.tensor(f"g_k{i}", act_bytes(i, 2), op, category="grad")
        op = b.mem_op(f"dec{i}.cat.b", "bwd", kind="concat", layer=i,
                      bytes_moved=4 * act_bytes(i), reads=[gk])
        gu = b.tensor(f"g_u{i}", act_bytes(i), op, category="grad")
        skips[i] = b.tensor(f"g_skip{i}", act_bytes(i), op, category="grad")
        op = b.mem_op(f"dec{i}.up.b", "bwd", kind="upsample", layer=i,
                      bytes_moved=act_bytes(i) + act_bytes(i + 1), reads=[gu])
        grad = b.tensor(f"g_d{i + 1}" if i + 1 < L else "g_m", act_bytes(i + 1), op,
                        category="grad")
    op = b.op("mid.conv.b", "bwd", kind="conv", layer=L, flops=2 * conv_flops(L),
              bytes_moved=3 * act_bytes(L), reads=[grad, pools[L - 1]])
    grad = b.tensor(f"g_p{L - 1}", act_bytes(L - 1) // 4, op, category="grad")
    for i in reversed(range(L)):
        op = b.mem_op(f"enc{i}.pool.b", "bwd", kind="pool", layer=i,
                      bytes_moved=3 * act_bytes(i), reads=[grad, enc[i], skips[i]])
        ge = b.tensor(f"g_e{i}", act_bytes(i), op, category="grad")
        inp_i = x if i == 0 else pools[i - 1]
        op = b.op(f"enc{i}.conv.b", "bwd", kind="conv", layer=i, flops=2 * conv_flops(i),
                  bytes_moved=3 * act_bytes(i), reads=[ge, inp_i])
        if i > 0:
            grad = b.tensor(f"g_p{i - 1}", act_bytes(i - 1) // 4, op, category="grad")


__all__ = ["chain", "DEFAULTS", "unet", "UNET_DEFAULTS"]
