"""A trace (ops and storages, :mod:`slackopt.torch.trace`) turned into an
:class:`~slackopt.instance.Instance`.

- **Tensors** are the storages the step creates. A storage first written by op p and then
  modified in place by ops w1..wk of the same pass becomes two instance tensors:
  ``NAME.pre`` (p until the op before wk) and ``NAME`` produced by wk, the value autograd
  saves (it forbids later in-place changes).
- **Saved tensors** are the ones the backward pass reads. Every backward ATen op reading a
  storage is a reader; a storage autograd unpacks is also read by the first backward op
  after the unpack and by the last backward op before it was freed: an autograd node
  unpacks its saved tensors when it starts and holds them until it returns, so the
  storage lives through every op of the node (the profiler records both,
  ``StorageRec.holds``). A storage the backward pass reads although autograd
  never packed it (a custom ``autograd.Function`` keeping it as a ``ctx`` attribute) is
  saved too, but the runtime cannot move it: it is listed in ``meta["unmanaged_saved"]``;
  plan it keep.
- **Persistent storages** - parameters, buffers, the example inputs and any other storage
  that exists before the step - are model state held by the caller: they are outside the
  activation budget, never swapped or recomputed, and not instance tensors (their bytes
  are in ``meta["persistent_bytes"]``).
- **Recipes.** A saved storage is rebuilt by re-running its producer and in-place
  writers; an input of those ops that is saved is a recipe input, a persistent one is
  always there, and an input that is neither is rebuilt inside the same recipe (its
  producer and writers join the recipe and its bytes count as ``transient_bytes``), up to
  ``max_recipe_ops`` ops. Inputs read only for their shape are not data inputs. No recipe
  (c = inf) when the chain is longer, reaches a never-recompute op or a pass boundary.
- **Layers** of forward ops are the first integer in their module path
  (``model.layers.3.mlp`` is layer 3); a backward op takes the highest layer of the
  forward tensors it reads.

Sources: Checkmate (Jain et al., MLSys 2020) for rebuilding from saved inputs; PyTorch
documentation of ``torch.autograd.graph.saved_tensors_hooks``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from slackopt.hardware import Link
from slackopt.instance import Instance, Op, Recipe, Tensor
from slackopt.torch.trace import OpRec, StorageRec

GENERATOR = "torch-profile"
"""``Instance.meta["generator"]`` of instances profiled from PyTorch (the runtime executes
plans of those only)."""

_LAYER_RE = re.compile(r"(?:^|\.)(\d+)(?:\.|$)")


def layer_of(module_path: str) -> int:
    """The layer of a module path: its first all-digit component, -1 without one."""
    m = _LAYER_RE.search(module_path)
    return int(m.group(1)) if m else -1


def build_instance(
    ops: Sequence[OpRec],
    storages: Mapping[int, StorageRec],
    name: str,
    link: Link,
    meta: Mapping[str, Any],
    *,
    max_recipe_ops: int = 6,
    param_keys: Collection[int] = (),
    buffer_keys: Collection[int] = (),
    input_keys: Collection[int] = (),
    n_packs: int = 0,
    host_memory_bytes: int | None = None,
) -> Instance:
    """Turn a trace into an :class:`Instance` (see the module docstring).

    Args:
        ops, storages: the trace (:class:`~slackopt.torch.trace.StepTracer`'s ``ops`` and
            ``storages``).
        name: the instance name.
        link: its host link.
        meta: provenance; ``persistent_bytes``, ``ops``, ``saved_tensor_packs``,
            ``recipes`` and ``unmanaged_saved`` are added.
        max_recipe_ops: longest recompute recipe (ops).
        param_keys, buffer_keys, input_keys: storage keys of the parameters, buffers and
            inputs (for ``meta["persistent_bytes"]``).
        n_packs: saved-tensor packs seen.
        host_memory_bytes: the instance's host pinned-memory limit (None: unlimited).

    Raises:
        InstanceError: if the trace breaks an instance rule (a bug here, not user input).
    """
    n_fwd = sum(1 for op in ops if op.phase == "fwd")
    phase_of = [op.phase for op in ops]

    # Versions: `final` is the op that produced the value autograd saves.
    final: dict[int, int] = {}
    for k, s in storages.items():
        if s.persistent or s.alloc is None:
            continue
        same = [w for w in s.writers if phase_of[w] == phase_of[s.alloc]]
        final[k] = max(same) if same else s.alloc

    def readers_after(s: StorageRec, lo: int) -> list[int]:
        # A backward op that reads a forward tensor only for its shape (ones_like(loss))
        # does not make it saved: autograd never packs it.
        assert s.alloc is not None
        ph = phase_of[s.alloc]
        other_writes = [w for w in s.writers if phase_of[w] != ph]
        reads = [i for i in s.readers if phase_of[i] == ph or i not in s.meta_readers]
        return sorted({i for i in (*reads, *other_writes, *s.holds) if i > lo})

    saved: set[int] = set()
    for k, f in final.items():
        s = storages[k]
        if phase_of[f] == "fwd" and any(phase_of[i] == "bwd" for i in readers_after(s, f)):
            saved.add(k)

    layer = [layer_of(op.module) if op.phase == "fwd" else -1 for op in ops]
    for op in ops:
        if op.phase == "bwd":
            ls = [layer[storages[k].alloc] for k in op.reads
                  if not storages[k].persistent and phase_of[storages[k].alloc] == "fwd"]
            layer[op.index] = max(ls) if ls else -1

    inst_ops = [Op(op.name, op.phase, float(op.duration_s), layer[op.index], op.kind, 0,
                   float(op.flops), op.never_recompute, op.random) for op in ops]
    op_name = [op.name for op in ops]

    reasons: dict[str, int] = {}
    tensors: list[Tensor] = []
    for k, s in storages.items():
        if k not in final:
            continue
        assert s.name is not None and s.alloc is not None
        f = final[k]
        if f != s.alloc:
            pre = sorted({i for i in (*s.readers, *s.writers) if s.alloc < i < f})
            tensors.append(Tensor(s.name + ".pre", s.nbytes, op_name[s.alloc],
                                  tuple(op_name[i] for i in pre), None,
                                  _category(ops, storages, k)))
        recipe = None
        if k in saved:
            recipe, why = _recipe(k, ops, storages, final, saved, max_recipe_ops)
            if recipe is None:
                reasons[why] = reasons.get(why, 0) + 1
        tensors.append(Tensor(s.name, s.nbytes, op_name[f],
                              tuple(op_name[i] for i in readers_after(s, f)), recipe,
                              _category(ops, storages, k)))

    pers = {"parameters": 0, "buffers": 0, "inputs": 0, "other": 0}
    for k, s in storages.items():
        if not s.persistent:
            continue
        cls = ("parameters" if k in param_keys else "buffers" if k in buffer_keys
               else "inputs" if k in input_keys else "other")
        pers[cls] += s.nbytes
    meta = dict(meta)
    meta["persistent_bytes"] = pers
    meta["ops"] = {"forward": n_fwd, "backward": len(ops) - n_fwd}
    meta["saved_tensor_packs"] = n_packs
    meta["recipes"] = {"rebuildable": len(saved) - sum(reasons.values()),
                       "not_rebuildable": dict(sorted(reasons.items()))}
    # Read by the backward pass without autograd packing them (a custom Function keeping
    # tensors as ctx attributes): the runtime cannot swap or drop these; plan them keep.
    meta["unmanaged_saved"] = sorted(str(storages[k].name) for k in saved
                                     if storages[k].packs == 0)
    return Instance(name, inst_ops, tensors, link, meta=meta, host_memory_bytes=host_memory_bytes)


def _category(ops: Sequence[OpRec], storages: Mapping[int, StorageRec], k: int) -> str:
    s = storages[k]
    assert s.alloc is not None
    chain = [s.alloc, *s.writers]
    if any(ops[i].random for i in chain if ops[i].phase == ops[s.alloc].phase):
        return "mask"
    if ops[s.alloc].phase == "bwd":
        return "grad"
    return ops[chain[-1] if s.writers else s.alloc].kind


def _recipe(target: int, ops: Sequence[OpRec], storages: Mapping[int, StorageRec],
            final: Mapping[int, int], saved: set[int], max_ops: int
            ) -> tuple[Recipe | None, str]:
    """The recipe of saved storage `target`, or (None, reason)."""
    chain: set[int] = set()
    inputs: set[int] = set()
    transient: set[int] = set()
    rebuilt: set[int] = set()

    class _Fail(Exception):
        pass

    def need(k: int, before: int) -> None:
        s = storages[k]
        if s.persistent:
            return
        if k != target and k in saved and final[k] < before:
            inputs.add(k)
            return
        assert s.alloc is not None
        if ops[s.alloc].phase != "fwd":
            raise _Fail("reads a backward tensor")
        if k != target:
            transient.add(k)
        rebuilt.add(k)
        for w in [s.alloc, *[w for w in s.writers if w < before]]:
            if w in chain:
                continue
            op = ops[w]
            if op.phase != "fwd":
                raise _Fail("written in the backward pass")
            if op.never_recompute:
                raise _Fail("never_recompute op")
            chain.add(w)
            if len(chain) > max_ops:
                raise _Fail(f"chain longer than {max_ops} ops")
            for u in op.reads:
                if u != k:
                    need(u, w)

    try:
        need(target, final[target] + 1)
    except _Fail as e:
        return None, str(e)
    if inputs & rebuilt:
        return None, "input also rebuilt"
    for w in chain:
        if any(k not in rebuilt for k in ops[w].writes):
            return None, "writes a tensor outside the recipe"
    order = sorted(chain)
    names = tuple(ops[i].name for i in order)
    ins = tuple(storages[k].name for k in sorted(inputs, key=lambda k: final[k]))
    return Recipe(names, ins, int(sum(storages[k].nbytes for k in transient))), ""  # type: ignore[arg-type]



__all__ = ["GENERATOR", "build_instance", "layer_of"]
