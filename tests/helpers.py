"""Helpers shared across the tests: builders of hand-made instances, a trace reader and
the in-process runner of the `slackopt` command."""

from __future__ import annotations

import pytest

from slackopt import Instance, Link, Op, Recipe, Tensor
from slackopt.cli import main

TORCH_SOLVERS = frozenset({"torch-knapsack"})
"""Registered solvers that call PyTorch (the [torch] extra)."""


def solver_params(names):
    """Solver names as pytest parameters, those of :data:`TORCH_SOLVERS` marked ``torch``."""
    return [pytest.param(n, marks=pytest.mark.torch) if n in TORCH_SOLVERS else n
            for n in names]


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


def mk(fwd, bwd, tensors, W=100.0, lat=0.0, duplex=1.0, rebuild_ops=()):
    """An instance from compact specs with op kinds and layers.

    fwd, bwd, rebuild_ops: (name, duration_s, kind[, layer[, workspace_bytes]]).
    tensors: (name, size, producer, readers[, recipe ops, recipe inputs]).
    """
    ops = []
    for phase, lst in (("fwd", fwd), ("bwd", bwd), ("rebuild", rebuild_ops)):
        for name, dur, kind, *rest in lst:
            ops.append(Op(name, phase, float(dur), layer=rest[0] if rest else -1, kind=kind,
                          workspace_bytes=rest[1] if len(rest) > 1 else 0))
    ts = []
    for name, size, prod, readers, *rec in tensors:
        recipe = Recipe(tuple(rec[0]), tuple(rec[1])) if rec else None
        ts.append(Tensor(name, size, prod, tuple(readers), recipe))
    return Instance("hand", ops, ts, Link("test", W, duplex, lat))


def cache_instance():
    """The on_demand runtime's case (tests/test_runtimes.py), built with :func:`mk`."""
    # a, b, c 100 B each. a: made by f1, read by f3 and b1; b: made by f2, read by b2;
    # c: made by f4, read by b4. b2 and b1 are heavy (GEMM) tasks.
    return mk([("f1", 1, "gemm"), ("f2", 1, "gemm"), ("f3", 1, "other"), ("f4", 1, "other")],
              [("b4", 1, "other"), ("b2", 1, "gemm"), ("b1", 1, "gemm")],
              [("a", 100, "f1", ["f3", "b1"]), ("b", 100, "f2", ["b2"]),
               ("c", 100, "f4", ["b4"])])


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the command in-process; returns (exit status, stdout, stderr)."""
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def assert_user_error(rc: int, out: str, err: str, *words: str) -> None:
    """A user error as the command reports it: exit status 2, no traceback, nothing on
    stdout, and each of `words` in stderr."""
    assert rc == 2, (rc, out, err)
    assert "Traceback" not in out + err
    assert out == ""
    for w in words:
        assert w in err, (w, err)
