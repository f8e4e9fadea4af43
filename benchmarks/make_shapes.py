"""Regenerate the shapes suite, instances/shapes/: CNN training steps of every shape.

Run (from anywhere):

    python benchmarks/make_shapes.py            # write what is missing, check the rest
    python benchmarks/make_shapes.py --force    # rewrite files whose bytes differ
    python benchmarks/make_shapes.py --list     # the instances and their commands

Each instance is one ``slackopt make shapes-<family> ...`` of the generators in
slackopt/workloads/shapes/ (:data:`SPECS` lists them: every family, 20 to 300 saved
tensors, scarce links (PCIe 3 and 4) and an ample one (GH200's C2C as measured)), built
in this process by :func:`slackopt.workloads.make` (the command's own code path) and
written as ``instances/shapes/<name>.json.gz`` (gzip, ``mtime=0``: the same code gives
the same bytes). ``instances/shapes/manifest.json`` lists every file with its family,
parameters, GPU, link, saved tensors, P, ops, the ``slackopt make`` command that writes
it and the sha256 of its bytes, under a ``generator`` record (this script, its
:data:`VERSION`, slackopt's version); the table of instances/shapes/README.md is
rewritten from it. ``slackopt bench --suite shapes`` and ``python
benchmarks/bench_references.py --suite shapes`` read the suite.

A file whose bytes differ from what the generator gives now is left as it is and
reported (exit status 1) unless ``--force``: its references would no longer describe it.

Exit status: 0 done; 1 files differ (without --force); 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "instances" / "shapes"
MANIFEST = SUITE / "manifest.json"
SCRIPT = "benchmarks/make_shapes.py"
VERSION = 1
"""Bump when the instances this script writes change (specs, naming, generators)."""

PCIE3, PCIE4, C2C = ("a100", "pcie3"), ("a100", "pcie4"), ("gh200", "gh200-c2c")


@dataclass(frozen=True)
class Spec:
    """One instance of the suite: the family (``shapes-<family>``), its parameters (as
    ``slackopt make -p KEY=VALUE``), the (GPU, link) target and a note for the manifest."""

    family: str
    target: tuple[str, str]
    notes: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def workload(self) -> str:
        return f"shapes-{self.family}"

    def make(self):
        """The instance (:func:`slackopt.workloads.make`)."""
        from slackopt.workloads import make

        gpu, link = self.target
        return make(self.workload, gpu=gpu, link=link, **self.params)

    def command(self, out: str) -> str:
        """The ``slackopt make`` command line that writes the same instance to `out`."""
        gpu, link = self.target
        argv = ["slackopt", "make", self.workload, "--gpu", gpu, "--link", link]
        for k, v in self.params.items():
            argv += ["-p", f"{k}={json.dumps(v)}"]
        return " ".join(shlex.quote(a) for a in [*argv, "-o", out])


SPECS: tuple[Spec, ...] = (
    Spec("fcn", PCIE3, "FCN-8s on VGG-11, the smallest row (20 saved tensors).",
         {"depth": 11, "batch": 8, "image": 384}),
    Spec("fcn", PCIE4, "FCN-8s on VGG-16-BN at 512 px: the FCN-8 shape of the public "
         "training graph (a VGG backbone, pool3 and pool4 fusions, upsampling) past the "
         "enumeration's 27 saved tensors.", {"bn": True}),
    Spec("fcn", C2C, "The same FCN-8s on GH200's measured C2C link.", {"bn": True}),
    Spec("unet", PCIE4, "U-Net, four poolings, long skips by concatenation.", {}),
    Spec("unet", C2C, "U-Net with BatchNorm, five poolings.",
         {"levels": 5, "bn": True}),
    Spec("resnet", PCIE4, "ResNet-18: residual adds, block inputs not rebuildable.", {}),
    Spec("resnet", C2C, "ResNet-50: bottleneck blocks.", {"depth": 50, "batch": 16}),
    Spec("densenet", PCIE4, "DenseNet-BC, three blocks of six layers: each feature map "
         "read by every later layer of its block.", {}),
    Spec("densenet", C2C, "DenseNet-BC, four blocks of sixteen layers (269 saved "
         "tensors).", {"blocks": 4, "layers": 16, "batch": 16}),
    Spec("mobilenet", PCIE4, "MobileNetV2 with every tensor but the image rebuildable "
         "(the shape of the public MobileNet training graph).",
         {"rebuild_block_inputs": True}),
    Spec("mobilenet", C2C, "MobileNetV2, block inputs not rebuildable.", {}),
    Spec("mobilenet", PCIE3, "A deep MobileNetV2, 48 blocks at width 0.75 (the suite's "
         "largest row).", {"blocks": 48, "width": 0.75, "batch": 32}),
    Spec("branches", PCIE4, "Random branching cells (seed 0): adds and concatenations "
         "with skips.", {}),
    Spec("branches", C2C, "Twelve random branching cells (seed 1).",
         {"cells": 12, "seed": 1}),
)


def versions() -> dict[str, Any]:
    """The generator record of the manifest."""
    import slackopt

    return {"script": SCRIPT, "version": VERSION, "slackopt": slackopt.__version__}


def instance_bytes(spec: Spec) -> tuple[Any, bytes]:
    """The instance of `spec` and the bytes of its ``.json.gz`` file."""
    from slackopt.io import save_instance

    inst = spec.make()
    with tempfile.TemporaryDirectory(prefix="make_shapes-") as tmp:
        path = save_instance(inst, Path(tmp) / f"{inst.name}.json.gz")
        return inst, path.read_bytes()


def entry(spec: Spec, inst: Any, data: bytes) -> dict[str, Any]:
    """The manifest row of one file."""
    from hashlib import sha256

    file = f"{inst.name}.json.gz"
    gpu, link = spec.target
    return {"file": file, "name": inst.name, "model": spec.workload,
            "params": inst.meta["params"], "gpu": gpu, "link": link,
            "d2h_bytes_per_s": inst.link.d2h_bytes_per_s,
            "h2d_bytes_per_s": inst.link.h2d_bytes_per_s, "saved_tensors": inst.n_saved,
            "rebuildable_tensors": int(sum(1 for c in inst.c if c != float("inf"))),
            "P_bytes": inst.P, "ops": inst.n_ops, "ideal_time_s": inst.ideal_time_s,
            "command": spec.command(file), "sha256": sha256(data).hexdigest(),
            "file_bytes": len(data), "notes": spec.notes}


TABLE_START = "<!-- table: written by benchmarks/make_shapes.py from manifest.json -->"
TABLE_END = "<!-- end of table -->"


def write_table(rows: list[dict[str, Any]]) -> None:
    """Replace the table of instances/shapes/README.md between its two markers."""
    readme = SUITE / "README.md"
    if not readme.is_file():
        return
    text = readme.read_text(encoding="utf-8")
    if TABLE_START not in text or TABLE_END not in text:
        return
    lines = ["| file | family | GPU | link D2H / H2D GB/s | ops | saved (rebuildable) | "
             "P GB | T* ms |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| `{r['file']}` | {r['model'].removeprefix('shapes-')} | {r['gpu']} | "
            f"{r['link']} {r['d2h_bytes_per_s'] / 1e9:g} / {r['h2d_bytes_per_s'] / 1e9:g} | "
            f"{r['ops']} | {r['saved_tensors']} ({r['rebuildable_tensors']}) | "
            f"{r['P_bytes'] / 1e9:.2f} | {r['ideal_time_s'] * 1e3:.2f} |")
    head, rest = text.split(TABLE_START, 1)
    tail = rest.split(TABLE_END, 1)[1]
    readme.write_text(f"{head}{TABLE_START}\n" + "\n".join(lines) + f"\n{TABLE_END}{tail}",
                      encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """The command line (the module docstring); returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--force", action="store_true",
                    help="rewrite files whose bytes differ from the generator's")
    ap.add_argument("--list", action="store_true", help="list the instances and exit")
    args = ap.parse_args(argv)
    built = [(s, *instance_bytes(s)) for s in SPECS]
    names = [inst.name for _, inst, _ in built]
    if len(set(names)) != len(names):  # a spec list edited by mistake
        print("make_shapes: two specs give the same instance name", file=sys.stderr)
        return 2
    if args.list:
        for s, inst, _ in built:
            print(f"{inst.name}.json.gz  saved {inst.n_saved:4d}  {s.command('-')}")
        return 0
    SUITE.mkdir(parents=True, exist_ok=True)
    rows, stale = [], []
    for s, inst, data in built:
        path = SUITE / f"{inst.name}.json.gz"
        if path.is_file() and path.read_bytes() == data:
            state = "up to date"
        elif path.is_file() and not args.force:
            stale.append(path.name)
            print(f"{path.name}: differs from the generator's bytes; kept (--force rewrites "
                  "it; its references then need a new run)")
            continue
        else:
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
            state = "written"
        rows.append(entry(s, inst, data))
        print(f"{path.name}: {state}, {inst.n_saved} saved tensors, P "
              f"{inst.P / 1e9:.2f} GB")
    if stale:
        print(f"make_shapes: {len(stale)} file(s) differ; the manifest was not rewritten",
              file=sys.stderr)
        return 1
    doc = {"format": "slackopt-bench-manifest", "version": 1, "generator": versions(),
           "instances": rows}
    tmp = MANIFEST.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, MANIFEST)
    write_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
