"""The records an :class:`~slackopt.instance.Instance` is built from: :class:`Op`,
:class:`Recipe` and :class:`Tensor`.

Plain frozen dataclasses without checks: :class:`~slackopt.instance.Instance` validates
them (:mod:`slackopt._instance_checks`) and derives the paper's arrays from them. They live
apart from ``instance.py`` so that the checks can name them without importing the module
that imports the checks; ``slackopt.instance`` and ``slackopt`` re-export them, their
public names. Semantics: docs/model.md ("Instance").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Op:
    """One operator (kernel) of the iteration.

    Attributes:
        name: unique name.
        phase: "fwd", "bwd", or "rebuild" (only re-run by recipes, never scheduled).
        duration_s: run time on the compute stream (s), finite and >= 0.
        layer: block index (0-based) or -1 outside the repeated blocks.
        kind: operator class ("gemm", "attention", "layernorm", "dropout", ...).
        workspace_bytes: scratch memory held while the op runs (bytes).
        flops: floating-point operations (for intensity I; 0 if unknown).
        never_recompute: collectives, data-dependent shapes: any recipe through it is invalid.
        random: draws random numbers (dropout): rebuilt only from saved RNG state.
    """

    name: str
    phase: str
    duration_s: float
    layer: int = -1
    kind: str = "other"
    workspace_bytes: int = 0
    flops: float = 0.0
    never_recompute: bool = False
    random: bool = False


@dataclass(frozen=True, slots=True)
class Recipe:
    """How to rebuild a dropped tensor.

    Attributes:
        ops: names of the ops re-run, in order (phase "fwd" or "rebuild").
        inputs: saved tensors the re-run reads; they must be resident (a recomp input is
            rebuilt first, a swapped input is fetched first).
        transient_bytes: intermediates held while the rebuild runs (bytes).
    """

    ops: tuple[str, ...]
    inputs: tuple[str, ...] = ()
    transient_bytes: int = 0


@dataclass(frozen=True, slots=True)
class Tensor:
    """One tensor of the iteration.

    Attributes:
        name: unique name.
        size_bytes: bytes, >= 0.
        producer: name of the scheduled op that produces it.
        readers: names of the scheduled ops that read it (forward and backward).
        recipe: how to rebuild it, or None if it cannot be rebuilt (c = inf).
        category: tensor class ("block_input", "qkv", "mask", "grad", ...).
        storage: None if the tensor owns its storage; else the name of the *base* tensor
            whose storage it views (a transpose, a slice, a reshape). The base must own its
            storage (no chains), and the view must be produced in the same phase as its
            base, no earlier than it. The storage's bytes are the base's ``size_bytes``;
            the view's own ``size_bytes`` (its elements) is informational only. See
            "Storage aliasing" in the :class:`Instance` docstring.
        mutated_by: names of forward ops that overwrite this tensor in place after its
            producer (``relu_``, ``add_``, ``masked_fill_``). Each must be
            one of its readers. The value the backward pass reads is the one after the last
            mutation, so a recipe must re-run every mutating op; a recipe that does not
            is rejected (InstanceError "add the op to the recipe, or drop the recipe").
    """

    name: str
    size_bytes: int
    producer: str
    readers: tuple[str, ...] = ()
    recipe: Recipe | None = None
    category: str = "other"
    storage: str | None = None
    mutated_by: tuple[str, ...] = ()


__all__ = ["Op", "Recipe", "Tensor"]


@dataclass(frozen=True, slots=True)
class UnitSpan:
    """One unit of a pipeline stage's schedule, as an instance runs it.

    A stage runs a schedule of units (docs/model.md, "A pipeline stage"): the forward
    pass of one microbatch through one model chunk (kind ``"F"``), its backward pass
    (``"B"``; with a split backward, the input-gradient half) or the weight-gradient half
    of a split backward (``"W"``). The instance's scheduled ops are the units' ops one
    unit after the other; a unit spans ``n_ops`` of them.

    Attributes:
        kind: ``"F"`` (its ops are forward ops), ``"B"`` or ``"W"`` (backward ops).
        n_ops: how many consecutive scheduled ops the unit runs (>= 1).
        microbatch: the microbatch j, 0-based.
        chunk: the model chunk of the stage, 0-based (0 without interleaving).
        earliest_start_s: the earliest start of the unit's first task (s, >= 0, from the
            stage's start): the compute stream idles until then (a pipeline bubble).
            Rebuilds inserted before the unit's first op belong to the unit and wait too.

    Source: spec of slackopt's pipeline-stage model (docs/model.md); the unit kinds of
    torch.distributed.pipelining (``_ComputationType`` FORWARD, BACKWARD_INPUT,
    BACKWARD_WEIGHT) and of Qi et al. 2024, "Zero Bubble Pipeline Parallelism".
    """

    kind: str
    n_ops: int
    microbatch: int = 0
    chunk: int = 0
    earliest_start_s: float = 0.0
