"""SlackSwap's per-instance data: the plan-independent arrays both passes read, computed
once per instance and cached (:func:`_prep`), and saved positions from names."""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from slackopt.instance import Instance
from slackopt.simulate.rules import copy_time


class _Prep:
    """Plan-independent arrays of one instance, computed once and cached."""

    def __init__(self, inst: Instance) -> None:
        n = inst.n_saved
        link = inst.link
        self.n = n
        self.w_h2d = float(link.h2d_bytes_per_s)
        self.lat = float(link.copy_latency_s)
        self.s = np.asarray(inst.s, dtype=np.int64)
        self.sf = self.s.astype(np.float64)
        # Planned copy times, each at its direction's full bandwidth (sec. 3.2).
        self.dur = copy_time(self.sf, float(link.d2h_bytes_per_s), self.lat)   # D2H
        self.dur_h2d = copy_time(self.sf, self.w_h2d, self.lat)                # H2D
        self.r = np.asarray(inst.r, dtype=np.float64)
        self.d = np.asarray(inst.d, dtype=np.float64)
        self.c = np.asarray(inst.c, dtype=np.float64)
        self.finite_c = np.isfinite(self.c)
        self.TF = float(inst.forward_time_s)
        self.n_ops = inst.n_ops
        self.end_s = np.asarray(inst.end_s, dtype=np.float64)
        # The window of each offload and the gate of each prefetch: the forward unit of
        # the tensor's microbatch (a pipeline stage, docs/model.md), from its start to its
        # end; in a single pass [0, T_F] for every tensor.
        self.single = inst.single_pass
        fe = np.asarray(inst.saved_fwd_end_idx, dtype=np.int64)
        first_op = (np.asarray(inst.unit_last_op) + 1
                    - np.array([u.n_ops for u in inst.units], dtype=np.int64))
        fs = first_op[np.asarray(inst.op_unit)[fe]] if n else fe
        self.fwd_end = self.end_s[fe] if n else np.zeros(0)
        self.fwd_start = np.asarray(inst.start_s, dtype=np.float64)[fs] if n else np.zeros(0)
        self.prod = np.asarray(inst.saved_prod_idx, dtype=np.int64)
        self.last_fwd = np.asarray(inst.saved_last_fwd_idx, dtype=np.int64)
        self.first_bwd = np.asarray(inst.saved_first_bwd_idx, dtype=np.int64)
        self.last_bwd = np.asarray(inst.saved_last_bwd_idx, dtype=np.int64)
        # Prefetch credits: every saved tensor frees its bytes when its last backward
        # reader ends (a kept tensor, or a swapped tensor's prefetch buffer);
        # cc[j] = bytes freed by the j+1 earliest releases.
        rel = self.end_s[self.last_bwd] if n else np.zeros(0)
        self.rel_order = np.argsort(rel, kind="stable")
        self.rel_sorted = rel[self.rel_order]
        self.credits = np.cumsum(self.s[self.rel_order])
        # Recipe graph: inputs (given) and dependents (tensors whose recipe reads k).
        self.inputs: list[tuple[int, ...]] = [tuple(x) for x in inst.recipe_inputs]
        deps: list[list[int]] = [[] for _ in range(n)]
        for u, ins in enumerate(self.inputs):
            for k in ins:
                deps[k].append(u)
        self.dependents = deps
        # Dependents before their inputs (reverse topological order of input -> dependent).
        self.topo = _dependents_first(self.inputs, n)
        # Blocks (layers >= 0) in forward order, with their saved positions.
        layers = np.asarray(inst.saved_layers, dtype=np.int64)
        self.layers = layers
        self.blocks = sorted({int(b) for b in layers.tolist() if b >= 0})
        # Saved positions of each block, ascending (one stable sort, not a scan per block).
        by_layer = np.argsort(layers, kind="stable")
        bounds = np.searchsorted(layers[by_layer], self.blocks + [np.iinfo(np.int64).max])
        self.block_members = {b: by_layer[bounds[q]:bounds[q + 1]]
                              for q, b in enumerate(self.blocks)}
        self.static = np.asarray(inst.static_profile, dtype=np.int64)


def _dependents_first(inputs: list[tuple[int, ...]], n: int) -> list[int]:
    """Order of saved positions in which every tensor comes before its recipe inputs."""
    order: list[int] = []
    state = [0] * n  # 0 new, 1 on stack, 2 done
    # Iterative DFS from the last-produced tensors; emit post-order over "dependent ->
    # input" edges reversed: a tensor is emitted after all tensors that read it.
    deps: list[list[int]] = [[] for _ in range(n)]
    for u, ins in enumerate(inputs):
        for k in ins:
            deps[k].append(u)
    for root in range(n - 1, -1, -1):
        if state[root]:
            continue
        stack = [(root, iter(deps[root]))]
        state[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                state[node] = 2
                order.append(node)
            elif state[nxt] == 0:
                state[nxt] = 1
                stack.append((nxt, iter(deps[nxt])))
    # Post-order on the "input -> dependent" graph emits a tensor after every tensor
    # that (transitively) reads it: dependents first.
    return order


_PREP: weakref.WeakKeyDictionary[Instance, _Prep] = weakref.WeakKeyDictionary()


def _prep(inst: Instance) -> _Prep:
    p = _PREP.get(inst)
    if p is None:
        p = _Prep(inst)
        _PREP[inst] = p
    return p


def _positions(instance: Instance, items: Any) -> np.ndarray:
    """Saved positions from an iterable of positions or saved-tensor names."""
    out = []
    for x in items if items is not None else ():
        out.append(instance.saved_position(x) if isinstance(x, str) else int(x))
    return np.array(sorted(set(out)), dtype=np.int64)
