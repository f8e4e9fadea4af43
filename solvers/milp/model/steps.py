"""The steps and units of the time-indexed model and what every plan holds: the step
groups (:func:`_groups`), the model floor (:func:`model_floor`, the smallest budget at
which any plan can run), the floor profile and the rebuild gaps (where the runtime may
rebuild a recomp tensor)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from slackopt.instance import Instance

TIME_UNIT_S = 1e-6
"""Model time unit (s): step durations are in microseconds."""
MEM_UNITS_PER_P = 1e4
"""Model memory unit: P / 1e4 bytes."""


def _groups(inst: Instance, steps: str | int) -> list[tuple[int, int]]:
    """Steps as (first op, last op) runs; never across the forward/backward boundary."""
    n, nf = inst.n_ops, inst.n_fwd
    if n == 0:
        return []
    if steps == "op":
        return [(k, k) for k in range(n)]
    ops = inst.scheduled_ops
    out: list[tuple[int, int]] = []
    if steps == "layer":
        a = 0
        for k in range(1, n + 1):
            if k == n or k == nf or ops[k].layer != ops[a].layer or ops[k].phase != ops[a].phase:
                out.append((a, k - 1))
                a = k
        return out
    size = int(steps)
    if size < 1:
        raise ValueError("steps must be 'op', 'layer' or an int >= 1")
    for lo, hi in ((0, nf), (nf, n)):
        for a in range(lo, hi, size):
            out.append((a, min(hi, a + size) - 1))
    return out


def model_floor(inst: Instance, ops: Sequence[int] | None = None) -> int:
    """The model's smallest feasible budget (bytes): every tensor swapped and each copy as
    slow as needed, so a swapped tensor is resident from production to its last forward
    reader and at its backward readers only. No plan runs in the evaluator below it."""
    if inst.n_ops == 0:
        return 0
    prof = floor_profile(inst)
    if ops is not None:
        prof = prof[np.asarray(list(ops), dtype=np.int64)]
    return int(prof.max()) if prof.size else 0


def floor_profile(inst: Instance) -> np.ndarray:
    """Bytes every plan holds during each op (int64 [n_ops]): the static profile (the
    non-saved tensors and workspaces) plus every saved tensor from its production through
    its last forward reader and during each backward op that reads it (the all-swap
    footprint, contained in the keep and recomp ones). :func:`model_floor` is its
    maximum."""
    n, is_bwd = inst.n_ops, inst.is_bwd
    delta = np.zeros(n + 1, dtype=np.int64)
    s = np.asarray(inst.s, dtype=np.int64)
    np.add.at(delta, inst.saved_prod_idx, s)
    np.add.at(delta, np.asarray(inst.saved_last_fwd_idx) + 1, -s)
    prof = np.asarray(inst.static_profile, dtype=np.int64) + np.cumsum(delta[:-1])
    for t in range(inst.n_saved):
        for r in inst.saved_reader_idx[t].tolist():
            if is_bwd[r]:
                prof[r] += s[t]
    return prof


def rebuild_gaps(prod: Sequence[int], rec_ok: Sequence[bool], deps: Sequence[Sequence[int]],
                  firstb: Sequence[int]) -> list[list[int]]:
    """Candidate rebuild positions: ``G[u]`` = the ops g (sorted) such that saved tensor u
    may be rebuilt in the gap before g, the evaluator's rule: u's first backward reader,
    or any gap where a recomp tensor whose recipe reads u is rebuilt (transitively).

    Args: ``prod[t]`` producer op index, ``rec_ok[t]`` rebuildable, ``deps[t]`` saved
    positions of the tensors whose recipes read t, ``firstb[t]`` first backward reader
    (op index), all over the saved positions."""
    n = len(prod)
    G: list[list[int] | None] = [None] * n
    # post-order over "v's recipe reads u" (iterative: recipe chains may be long). A
    # dependent may share u's producer (two outputs of one op), so no order of the
    # producers visits dependents first.
    for root in range(n):
        stack = [root]
        while stack:
            u = stack[-1]
            if G[u] is not None or not rec_ok[u]:
                stack.pop()
                continue
            todo = [v for v in deps[u] if rec_ok[v] and G[v] is None]
            if todo:
                stack.extend(todo)
                continue
            gs = {firstb[u]}
            for v in deps[u]:
                if rec_ok[v]:
                    gs.update(G[v])
            G[u] = sorted(g for g in gs if g <= firstb[u])
            stack.pop()
    return [g if g is not None else [] for g in G]
