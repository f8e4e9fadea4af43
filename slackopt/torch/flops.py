"""FLOPs of ATen calls, for the roofline durations of a profile (``Op.flops``).

``torch.utils.flop_counter``'s formulas, with two extensions: fused scaled-dot-product
attention (flash, memory-efficient, cuDNN, CPU flash) counted from the shapes of q, k and
v with grouped-query attention (:func:`sdpa_flops`), and the grouped GEMM of
mixture-of-experts layers (:func:`grouped_mm_flops`). :func:`op_flops` picks the formula
of a call; :func:`compute_dtype` names the dtype its kernel computes in (the roofline
uses the GPU's peak for that dtype).

Sources: ``torch.utils.flop_counter`` (``sdpa_flop_count``,
``sdpa_backward_flop_count``, ``flop_registry``); PyTorch's ``grouped_mm`` documentation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from slackopt.torch.trace import op_packet

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


def op_flops(func: Any, args: Sequence[Any], kwargs: Mapping[str, Any], out: Any) -> float:
    """FLOPs of one call (multiply and add counted as two): :func:`sdpa_flops` for fused
    attention, :func:`grouped_mm_flops`, else ``torch.utils.flop_counter``'s formula; 0
    where it has none or its formula does not fit the arguments."""
    from torch.utils import flop_counter as fc

    name = op_packet(func)
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


def compute_dtype(args: Any, kwargs: Any, out: Any) -> str | None:
    """The dtype a kernel computes in: that of its first floating-point input, else of its
    first floating-point output ("float32", "bfloat16"); None without one."""
    for group in ((args, kwargs), out):
        for t in tree_flatten(group)[0]:
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                return str(t.dtype).removeprefix("torch.")
    return None



__all__ = ["compute_dtype", "grouped_mm_flops", "op_flops", "sdpa_flops"]
