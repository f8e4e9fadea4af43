"""Write the hand-made edge-case instances of cases 3, 4, 5, 8, 10 and 11 (listed below).

Run from the repository root::

    python instances/edge/make_edge_cases.py [--force]

Each instance is small enough to work out by hand; the expected answers are in
tests/test_edge_cases.py, beside the command that checks them. Units: bytes, seconds,
bytes/s. Unless noted, the link moves 100 B/s per direction with no copy latency and a
duplex factor of 0.5, so a 100-byte copy takes exactly 1 s.

- ``two_readers.json`` (case 3): ``a`` (100 B) is read by the backward ops ``b2`` and
  ``b1``; ``bX`` runs between them with 60 B of workspace. Keeping ``a`` until its *last*
  reader puts the keep-all peak at ``bX``: P = 100 + 60 = 160 B (freeing ``a`` after
  ``b2`` would wrongly give 150 B, the forward peak a + b). ``b`` (50 B) is rebuilt by
  ``f2`` (1.5 s) from ``a``.
- ``recompute_chain.json`` (case 4): ``x`` -> ``a`` -> ``b`` -> ``c`` (10, 20, 40, 80 B),
  each rebuilt by re-running its forward op from the previous one (0.5, 0.25, 0.125 s);
  only ``x`` cannot be rebuilt; ``f4`` holds 100 B of workspace. The link is slow (1 B/s)
  so swapping is useless and recomputation must chain.
- ``never_recompute.json`` (case 5): ``a`` (100 B) is produced by an all-reduce marked
  ``never_recompute``; its recipe runs through it, so c = inf. ``b`` (100 B) is rebuilt
  by ``f2`` from ``a``. Slow link (1 B/s).
- ``slow_link.json`` (case 8): ``a`` (100 B, not rebuildable) and ``f2`` with 100 B of
  workspace on a 10 B/s link: a swap of ``a`` frees its device copy only when its 10 s
  D2H ends.
- ``zero_bytes.json`` (case 10): every tensor has 0 bytes: P = 0.
- ``no_saved.json`` (case 10): one 64-byte forward temporary and no saved tensor: P = 64.
- ``unet2.json`` (case 11): ``unet(2, batch=1, size=8, channels=2, dtype_bytes=4)``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from slackopt.hardware import Link
from slackopt.instance import Instance, Op, Recipe, Tensor
from slackopt.io import save_instance

HERE = Path(__file__).resolve().parent


def _link(bytes_per_s: float = 100.0) -> Link:
    return Link("edge", float(bytes_per_s), 0.5, 0.0)


def two_readers() -> Instance:
    ops = [Op("f1", "fwd", 1.0), Op("f2", "fwd", 1.5),
           Op("b2", "bwd", 1.0), Op("bX", "bwd", 1.0, workspace_bytes=60),
           Op("b1", "bwd", 1.0)]
    tensors = [Tensor("a", 100, "f1", ("f2", "b2", "b1"), None, "block_input"),
               Tensor("b", 50, "f2", ("b2",), Recipe(("f2",), ("a",)), "act")]
    return Instance("two_readers", ops, tensors, _link(), meta={"case": 3})


def recompute_chain() -> Instance:
    ops = [Op("f0", "fwd", 1.0), Op("f1", "fwd", 0.5), Op("f2", "fwd", 0.25),
           Op("f3", "fwd", 0.125), Op("f4", "fwd", 1.0, workspace_bytes=100),
           Op("bC", "bwd", 1.0), Op("bB", "bwd", 1.0), Op("bA", "bwd", 1.0),
           Op("bX", "bwd", 1.0)]
    tensors = [Tensor("x", 10, "f0", ("f1", "bX"), None, "block_input"),
               Tensor("a", 20, "f1", ("f2", "bA"), Recipe(("f1",), ("x",)), "act"),
               Tensor("b", 40, "f2", ("f3", "bB"), Recipe(("f2",), ("a",)), "act"),
               Tensor("c", 80, "f3", ("bC",), Recipe(("f3",), ("b",)), "act")]
    return Instance("recompute_chain", ops, tensors, _link(1.0), meta={"case": 4})


def never_recompute() -> Instance:
    ops = [Op("f0", "fwd", 1.0), Op("allreduce", "fwd", 1.0, kind="collective",
                                    never_recompute=True),
           Op("f2", "fwd", 0.5), Op("f3", "fwd", 1.0, workspace_bytes=100),
           Op("bB", "bwd", 1.0), Op("bA", "bwd", 1.0), Op("bX", "bwd", 1.0)]
    tensors = [Tensor("x", 10, "f0", ("allreduce", "bX"), None, "block_input"),
               Tensor("a", 100, "allreduce", ("f2", "bA"), Recipe(("allreduce",), ("x",)),
                      "act"),
               Tensor("b", 100, "f2", ("bB",), Recipe(("f2",), ("a",)), "act")]
    return Instance("never_recompute", ops, tensors, _link(1.0), meta={"case": 5})


def slow_link() -> Instance:
    ops = [Op("f1", "fwd", 1.0), Op("f2", "fwd", 1.0, workspace_bytes=100),
           Op("b2", "bwd", 1.0), Op("bA", "bwd", 1.0)]
    tensors = [Tensor("a", 100, "f1", ("bA",), None, "block_input")]
    return Instance("slow_link", ops, tensors, _link(10.0), meta={"case": 8})


def zero_bytes() -> Instance:
    ops = [Op("f1", "fwd", 1.0), Op("f2", "fwd", 1.0), Op("b2", "bwd", 1.0),
           Op("b1", "bwd", 1.0)]
    tensors = [Tensor("x", 0, "f1", ("f2", "b1"), None, "block_input"),
               Tensor("z", 0, "f2", ("b2",), Recipe(("f2",), ("x",)), "act"),
               Tensor("g", 0, "b2", ("b1",), None, "grad")]
    return Instance("zero_bytes", ops, tensors, _link(), meta={"case": 10})


def no_saved() -> Instance:
    ops = [Op("f1", "fwd", 1.0), Op("f2", "fwd", 1.0), Op("b1", "bwd", 1.0)]
    tensors = [Tensor("t", 64, "f1", ("f2",), None, "temp")]
    return Instance("no_saved", ops, tensors, _link(), meta={"case": 10})


def unet2() -> Instance:
    from slackopt.workloads.synthetic import unet

    return unet(2, batch=1, size=8, channels=2, dtype_bytes=4)


CASES = {"two_readers": two_readers, "recompute_chain": recompute_chain,
         "never_recompute": never_recompute, "slow_link": slow_link,
         "zero_bytes": zero_bytes, "no_saved": no_saved, "unet2": unet2}
"""File stem -> builder of the instance written to ``<stem>.json``."""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--force", action="store_true", help="replace existing files")
    ap.add_argument("--out", type=Path, default=HERE, help="directory to write to")
    args = ap.parse_args(argv)
    for stem, build in CASES.items():
        path = save_instance(build(), args.out / f"{stem}.json", overwrite=args.force)
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
