"""Write the hand-made edge-case instances of cases 1, 2, 6, 7 and 9 (listed below).

Run from the repository root::

    python instances/edge/make_edge_model.py [--force]

Each instance is small enough to work out by hand; the expected answers (with the
arithmetic) are in tests/test_edge_model.py. Units: bytes, seconds, bytes/s. Every op
lasts 1 s unless noted; the link has no copy latency.

- ``aliasing.json`` (case 1): ``x`` (100 B, made by ``f1``) and its transpose ``xT``
  (a view of ``x``'s storage, made by ``f2``) are both saved; ``y`` (100 B) is kept. The
  keep-all peak counts the storage once: P = 100 + 100 = 200 B (not 300 B). Link
  100 B/s, duplex 0.5.
- ``view_of_unsaved_base.json`` (case 2): ``slice`` (10 B) is a saved view of ``buf``
  (1000 B), which nothing else saves; ``f3`` holds a 900-byte temporary ``w``. Freeing or
  offloading ``slice`` frees the 1000-byte storage, so plans fit in 1000 B although
  P = 1900 B. Recipe of the storage: re-run ``f1``. Link 1000 B/s.
- ``rng_unsupported.json`` (case 6): a dropout ``drop`` (random) makes ``mask`` (50 B,
  rebuilt by the ``regen`` op from the 8-byte ``drop.rng`` state) and ``out`` (100 B,
  rebuilt by re-running ``drop`` from ``x``); ``f3`` holds a 100-byte temporary ``w``, so
  P = 358 B and recomputing ``mask`` would bring the peak to 308 B. The instance says
  ``rng_capture: false``, so neither can be recomputed. Link 1 B/s (too slow to swap).
- ``inplace.json`` (case 7): ``f2`` (0.5 s) mutates ``x`` (100 B) in place; ``x``'s
  recipe re-runs ``f1`` and ``f2`` (c = 1.5 s). ``y`` (100 B) is kept. Link 1 B/s.
- ``inplace_invalid.json`` (case 7): the same with the recipe ``[f1]`` only: it would
  rebuild the pre-mutation value, so loading it fails (exit status 2) naming ``x``,
  ``f2`` and the fix. Written as JSON directly (no Instance can hold it).
- ``host_limit.json`` (case 9): ``a`` and ``b`` (100 B each, rebuildable in 1 s) and
  ``k`` (200 B, kept) with a host pinned-memory limit of 100 B. Link 100 B/s, duplex 0.5.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from slackopt.hardware import Link
from slackopt.instance import Instance, Op, Recipe, Tensor
from slackopt.io import instance_to_dict, save_instance

HERE = Path(__file__).resolve().parent


def _ops(fwd, bwd, rebuild=()):
    """[(name, duration_s, kwargs)] per phase -> Ops."""
    out = []
    for phase, lst in (("fwd", fwd), ("bwd", bwd), ("rebuild", rebuild)):
        for name, dur, *kw in lst:
            out.append(Op(name, phase, float(dur), **(kw[0] if kw else {})))
    return out


def aliasing() -> Instance:
    """Case 1: a tensor and its transpose view share one storage."""
    ops = _ops([("f1", 1), ("f2", 1), ("f3", 1), ("f4", 1)],
               [("b4", 1), ("b3", 1), ("b2", 1), ("b1", 1)])
    ts = [Tensor("x", 100, "f1", ("f2", "b1")),
          Tensor("xT", 100, "f2", ("b2",), storage="x"),
          Tensor("y", 100, "f3", ("f4", "b4"))]
    return Instance("aliasing", ops, ts, Link("edge-100", 100.0, 0.5, 0.0))


def view_of_unsaved_base() -> Instance:
    """Case 2: a small saved view over a big buffer that is not saved otherwise."""
    ops = _ops([("f1", 1), ("f2", 1), ("f3", 1)], [("b2", 1), ("b1", 1)])
    ts = [Tensor("buf", 1000, "f1", ("f2",)),
          Tensor("slice", 10, "f2", ("b1",), Recipe(("f1",)), storage="buf"),
          Tensor("w", 900, "f3")]
    return Instance("view_of_unsaved_base", ops, ts, Link("edge-1000", 1000.0, 0.5, 0.0))


def rng_unsupported() -> Instance:
    """Case 6: dropout outputs cannot be recomputed without RNG capture."""
    ops = _ops([("f1", 1), ("drop", 1, {"kind": "dropout", "random": True}), ("f3", 1)],
               [("b3", 1), ("bdrop", 1), ("b1", 1)],
               [("regen", 0.5, {"kind": "rng_regen"})])
    ts = [Tensor("x", 100, "f1", ("drop", "b1")),
          Tensor("mask", 50, "drop", ("bdrop",), Recipe(("regen",), ("drop.rng",)),
                 category="mask"),
          Tensor("drop.rng", 8, "drop", ("bdrop",), category="rng_state"),
          Tensor("out", 100, "drop", ("f3", "b3"), Recipe(("drop",), ("x",))),
          Tensor("w", 100, "f3")]
    return Instance("rng_unsupported", ops, ts, Link("edge-1", 1.0, 0.5, 0.0),
                    rng_capture=False)


def inplace() -> Instance:
    """Case 7: f2 mutates x in place; x's recipe re-runs the mutation."""
    ops = _ops([("f1", 1), ("f2", 0.5, {"kind": "relu_"}), ("f3", 1)], [("b2", 1), ("b1", 1)])
    ts = [Tensor("x", 100, "f1", ("f2", "b1"), Recipe(("f1", "f2")), mutated_by=("f2",)),
          Tensor("y", 100, "f3", ("b2",))]
    return Instance("inplace", ops, ts, Link("edge-1", 1.0, 0.5, 0.0))


def inplace_invalid_doc() -> dict:
    """Case 7, rejected: x's recipe misses the mutating op f2."""
    doc = instance_to_dict(inplace())
    doc["name"] = "inplace_invalid"
    doc["tensors"][0]["recipe"]["ops"] = ["f1"]
    return doc


def host_limit() -> Instance:
    """Case 9: a host pinned-memory limit of 100 B."""
    ops = _ops([("f1", 1), ("f2", 1), ("f3", 1), ("f4", 1), ("f5", 1)],
               [("b5", 1), ("b4", 1), ("b3", 1), ("b2", 1), ("b1", 1)])
    ts = [Tensor("a", 100, "f1", ("b1",), Recipe(("f1",))),
          Tensor("b", 100, "f2", ("b2",), Recipe(("f2",))),
          Tensor("k", 200, "f4", ("f5", "b5"))]
    return Instance("host_limit", ops, ts, Link("edge-100", 100.0, 0.5, 0.0),
                    host_memory_bytes=100)


BUILDERS = {"aliasing": aliasing, "view_of_unsaved_base": view_of_unsaved_base,
            "rng_unsupported": rng_unsupported, "inplace": inplace, "host_limit": host_limit}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--force", action="store_true", help="replace existing files")
    args = ap.parse_args(argv)
    for name, fn in BUILDERS.items():
        print(save_instance(fn(), HERE / f"{name}.json", overwrite=args.force))
    bad = HERE / "inplace_invalid.json"
    if bad.exists() and not args.force:
        print(f"{bad}: exists; pass --force to replace it", file=sys.stderr)
        return 1
    bad.write_text(json.dumps(inplace_invalid_doc(), indent=1) + "\n")
    print(bad)
    return 0


if __name__ == "__main__":
    sys.exit(main())
