"""Small builders for hand-made instances used across the tests."""

from __future__ import annotations

from slackopt import Instance, Link, Op, Recipe, Tensor


def build(fwd, bwd, tensors, W=100.0, lat=0.0, duplex=0.5, rebuild_ops=()):
    """Build an instance from compact specs.

    fwd, bwd, rebuild_ops: lists of (name, duration_s) or (name, duration_s, workspace_bytes).
    tensors: list of (name, size, producer, readers, recipe) where recipe is None or
        (ops, inputs) or (ops, inputs, transient_bytes).
    """
    ops = []
    for phase, lst in (("fwd", fwd), ("bwd", bwd), ("rebuild", rebuild_ops)):
        for spec in lst:
            name, dur, *rest = spec
            ops.append(Op(name, phase, float(dur), workspace_bytes=rest[0] if rest else 0))
    ts = []
    for name, size, prod, readers, recipe in tensors:
        rec = None
        if recipe is not None:
            rec = Recipe(tuple(recipe[0]), tuple(recipe[1]),
                         recipe[2] if len(recipe) > 2 else 0)
        ts.append(Tensor(name, size, prod, tuple(readers), rec))
    return Instance("hand", ops, ts, Link("test", W, duplex, lat))


def lane(ev, lane_name):
    """Events of one lane of an Evaluation trace, as {name: (start, end)}."""
    return {e["name"]: (e["start_s"], e["end_s"]) for e in ev.trace if e["lane"] == lane_name}
