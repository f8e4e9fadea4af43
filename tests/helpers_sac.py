"""What a training step under a selective-checkpoint policy really did, seen from outside
the policy's runtime (tests/test_torch_sac.py).

:class:`Observer` is a :class:`~slackopt.torch.StepTracer` (numbering calls and naming
storages as the profiler does) entered inside the step. At the end of the forward pass
:meth:`Observer.snapshot` reads, for every saved tensor of the instance, whether its
storage is alive and how many bytes it holds (a storage freed to the host has 0): the
tensors PyTorch still holds on the device are the ones saved, the empty ones the ones
offloaded, the freed ones the ones dropped. During the backward pass every storage that
a call creates or writes while a checkpoint region is replayed (PyTorch enters the
region's recompute context around it) is compared byte for byte with the forward
storages: an equal one of the same size is the tensor the replay recomputed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from slackopt.torch import StepTracer, run_loss, storage_of


class Observer(StepTracer):
    """See the module docstring.

    Args:
        replaying: the (first, last) forward call indices of the region PyTorch replays
            now (it has entered the region's recompute context), else None.
    """

    def __init__(self, replaying: Callable[[], tuple[int, int] | None]) -> None:
        super().__init__()
        self.replaying = replaying
        self.fwd_ops: list[Any] = []
        self.replayed: set[int] = set()
        self._alias: dict[int, int] = {}   # storage made by the replay -> forward storage

    def _inputs_of(self, args: Any, kwargs: Any) -> list[Any]:
        """Each tensor argument as (storage, offset, shape, strides); a storage the replay
        made stands for the forward storage it remade."""
        sig = []
        for x in tree_flatten((args, kwargs))[0]:
            st = storage_of(x)
            if st is not None:
                k = self._alias.get(st._cdata, st._cdata)
                sig.append((k, x.storage_offset(), tuple(x.shape), tuple(x.stride())))
        return sig

    def _after(self, rec: Any, args: Any, kwargs: Any, out: Any, token: Any) -> None:
        sig = self._inputs_of(args, kwargs)
        if rec.phase == "fwd":
            self.fwd_ops.append((rec, sig))
            return
        span = self.replaying()
        if span is None:
            return
        # The replayed call is the forward call of the region with the same overload and
        # the same arguments: a persistent or cached storage is the forward one itself.
        for f, fsig in self.fwd_ops[span[0]: span[1] + 1]:
            if f.index not in self.replayed and f.label == rec.label and fsig == sig:
                self.replayed.add(f.index)
                for mine, theirs in zip(rec.outputs, f.outputs, strict=False):
                    self._alias[mine] = theirs
                return

    def snapshot(self, names: Iterable[str]) -> dict[str, set[str]]:
        """For the named (saved) tensors: {"saved": alive with their bytes, "offloaded":
        alive with 0 bytes, "dropped": freed}."""
        by_name = {s.name: k for k, s in self.storages.items() if s.name is not None}
        out: dict[str, set[str]] = {"saved": set(), "offloaded": set(), "dropped": set()}
        for n in names:
            k = by_name[n]
            if self.freed(k):
                out["dropped"].add(n)
                continue
            st = torch.UntypedStorage._new_with_weak_ptr(self._refs[k].cdata)
            out["saved" if st.nbytes() > 0 else "offloaded"].add(n)
        return out


def observed_step(model: Any, inputs: Any, loss_fn: Any, instance: Any,
                  replaying: Callable[[], tuple[int, int] | None] = lambda: None,
                  ) -> tuple[float, dict[str, set[str]], list[Any]]:
    """One step (forward, snapshot, backward) under an :class:`Observer`; returns the loss,
    the snapshot of the instance's saved tensors plus "recomputed" (those whose final
    value's call a replay re-ran), and the gradients (parameters in order)."""
    names = list(instance.saved_names)
    model.zero_grad(set_to_none=True)
    obs = Observer(replaying)
    with obs.modules(model), obs:
        loss = run_loss(model, inputs, loss_fn)
        seen = obs.snapshot(names)
        obs.phase = "bwd"
        loss.backward()
    seen["recomputed"] = {n for n in names
                          if instance.op_index(instance.tensor(n).producer) in obs.replayed}
    grads = [None if p.grad is None else p.grad.detach().clone() for p in model.parameters()]
    return float(loss.detach()), seen, grads


__all__ = ["Observer", "observed_step"]
