"""Workload generators: build the :class:`~slackopt.instance.Instance` of one training
iteration from a workload name, a GPU and a host link.

>>> from slackopt.workloads import make
>>> inst = make("gpt2-xl")                      # A100, PCIe 4.0
>>> inst.name
'gpt2-xl_a100-pcie4'
>>> make("tiny", layers=3).n_saved
41

Registered workloads (:data:`WORKLOADS`): "gpt2-xl", "bert-large", "llama-7b", "vgg16",
"tiny" (a 2-layer GPT-style transformer), "chain" (a seeded synthetic chain), "unet" (a
small U-Net-like DAG) and the CNN families of :mod:`slackopt.workloads.shapes`
("shapes-fcn", "shapes-unet", "shapes-resnet", "shapes-densenet", "shapes-mobilenet",
"shapes-branches").
Parameters and the totals they land on: docs/workloads.md.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from slackopt.hardware import GPU, Link, host_memory_limit
from slackopt.instance import Instance
from slackopt.workloads import shapes, synthetic, transformer, vgg
from slackopt.workloads._builder import WorkloadError, resolve_hardware


@dataclass(frozen=True, slots=True)
class Workload:
    """A registered generator.

    Attributes:
        name: registry name.
        fn: the generator; keyword arguments ``gpu``, ``link`` and its parameters.
        description: one line for listings.
        aliases: how :func:`make`'s ``seq``/``batch``/``layers`` map to ``fn``'s parameter
            names (a missing key means the workload has no such knob).
    """

    name: str
    fn: Callable[..., Instance]
    description: str
    aliases: dict[str, str] = field(default_factory=dict)

    def parameters(self) -> dict[str, Any]:
        """The generator's parameters and their defaults (``gpu`` and ``link`` excluded)."""
        sig = inspect.signature(self.fn)
        return {k: p.default for k, p in sig.parameters.items() if k not in ("gpu", "link")}


_TRANSFORMER_ALIASES = {"seq": "seq", "batch": "batch", "layers": "layers"}

WORKLOADS: dict[str, Workload] = {
    "gpt2-xl": Workload("gpt2-xl", transformer.gpt2_xl,
                        "GPT-2 XL: 48 pre-LN layers, h=1600, seq 1024 x batch 8, causal",
                        _TRANSFORMER_ALIASES),
    "bert-large": Workload("bert-large", transformer.bert_large,
                           "BERT-Large: 24 post-LN layers, h=1024, seq 512 x batch 16, MLM head",
                           _TRANSFORMER_ALIASES),
    "llama-7b": Workload("llama-7b", transformer.llama_7b,
                         "Llama-2-7B-style: 32 layers, h=4096, RMSNorm, SwiGLU, seq 4096 x 2",
                         _TRANSFORMER_ALIASES),
    "vgg16": Workload("vgg16", vgg.vgg16, "VGG-16: batch 128, 224 x 224 images, ReLU in place",
                      {"batch": "batch", "layers": "depth"}),
    "tiny": Workload("tiny", transformer.tiny,
                     "tiny GPT-style transformer: 2 layers, h=64, seq 32 x batch 2 (teaching)",
                     _TRANSFORMER_ALIASES),
    "chain": Workload("chain", synthetic.chain,
                      "synthetic linear chain with seeded random sizes and FLOPs",
                      {"layers": "n_layers"}),
    "unet": Workload("unet", synthetic.unet,
                     "U-Net-like DAG: encoder/decoder levels joined by long skip connections",
                     {"layers": "levels", "batch": "batch"}),
    "shapes-fcn": Workload("shapes-fcn", shapes.fcn,
                           "FCN-8s: VGG backbone, pool3/pool4 skip fusions, upsampling",
                           {"layers": "depth", "batch": "batch"}),
    "shapes-unet": Workload("shapes-unet", shapes.unet,
                            "U-Net (2015): two convs a level, long skips by concatenation",
                            {"layers": "levels", "batch": "batch"}),
    "shapes-resnet": Workload("shapes-resnet", shapes.resnet,
                              "ResNet-10..152: residual adds, BatchNorm, projections",
                              {"layers": "depth", "batch": "batch"}),
    "shapes-densenet": Workload("shapes-densenet", shapes.densenet,
                                "DenseNet-BC: every feature map read by every later layer",
                                {"layers": "layers", "batch": "batch"}),
    "shapes-mobilenet": Workload("shapes-mobilenet", shapes.mobilenet,
                                 "MobileNetV2: depthwise + pointwise inverted residuals",
                                 {"layers": "blocks", "batch": "batch"}),
    "shapes-branches": Workload("shapes-branches", shapes.branches,
                                "seeded random cells of branches that fork and merge",
                                {"layers": "cells", "batch": "batch"}),
}
"""The registry :func:`make` dispatches on."""


def make(workload: str, *, gpu: str | GPU = "a100", link: str | Link | None = None,
         seq: int | None = None, batch: int | None = None, layers: int | None = None,
         host_memory_bytes: int | str | None = None, **params: Any) -> Instance:
    """Generate the instance of one training iteration.

    Args:
        workload: a name of :data:`WORKLOADS`.
        gpu: GPU preset ("titanx", "v100", "a100", "h100") or a :class:`GPU`; it times
            every op (roofline) and sets the default element size (FP32 on the Titan X).
        link: host-link preset ("pcie3", "pcie4", "pcie5", "nvlink-c2c", ...), a
            :class:`Link`, or None for the GPU's default link (a100 -> pcie4, h100 -> pcie5).
        seq: tokens per sequence (transformers); None keeps the default.
        batch: sequences or images per iteration; None keeps the default.
        layers: transformer blocks, VGG depth (11/13/16/19) or chain length.
        host_memory_bytes: the host pinned-memory limit of the instance
            (``Instance.host_memory_bytes``, bytes), "gpu" for the host memory the GPU
            preset attaches by design (``GPU.host_memory_bytes``: Grace's on gh200 and
            gb200), or None (unlimited).
        **params: any other parameter of the generator (``hidden``, ``heads``, ``ffn``,
            ``vocab``, ``dtype_bytes``, ``mlm_fraction``, ``seed``, ...); see
            ``WORKLOADS[name].parameters()``.

    Returns:
        A validated :class:`Instance` named ``"<workload>[-<param><value>...]_<gpu>-<link>"``
        with ``meta = {"generator": name, "params": {all resolved parameters},
        "gpu": gpu name, "link": link name}``.

    Raises:
        KeyError: an unknown workload, GPU or link name (the message lists the names).
        WorkloadError: a parameter the workload does not have, or a value it cannot build;
            ``host_memory_bytes="gpu"`` for a GPU without host memory of its own.
    """
    try:
        w = WORKLOADS[workload]
    except KeyError:
        raise KeyError(f"unknown workload '{workload}'; workloads: {', '.join(WORKLOADS)}"
                       ) from None
    known = w.parameters()
    kwargs: dict[str, Any] = {}
    for knob, value in (("seq", seq), ("batch", batch), ("layers", layers)):
        if value is None:
            continue
        if knob not in w.aliases:
            raise WorkloadError(f"workload '{workload}' has no '{knob}' parameter; "
                                f"parameters: {', '.join(known)}")
        kwargs[w.aliases[knob]] = value
    for k, v in params.items():
        if k not in known:
            raise WorkloadError(f"workload '{workload}' has no parameter '{k}'; "
                                f"parameters: {', '.join(known)}")
        if k in kwargs:
            raise WorkloadError(f"parameter '{k}' given twice")
        kwargs[k] = v
    inst = w.fn(gpu=gpu, link=link, **kwargs)
    if host_memory_bytes is None:
        return inst
    try:
        host = host_memory_limit(host_memory_bytes, resolve_hardware(gpu, link)[0])
    except ValueError as e:
        raise WorkloadError(str(e)) from None
    return Instance(inst.name, inst.ops, inst.tensors, inst.link, inst.meta,
                    rng_capture=inst.rng_capture, host_memory_bytes=host)


__all__ = ["WORKLOADS", "Workload", "WorkloadError", "make"]
