"""Instance-file loading speed (MB/s) and peak memory, valid files and a bad last field.

Run: python benchmarks/load_speed.py [--layers 1000,10000,40000,150000] [--repeat 3]
     [--dir /tmp/slackopt-load]

For each size, writes a synthetic chain instance (``slackopt make chain``'s generator,
its 4096-layer cap lifted for this measurement; 150,000 layers is a 47 MB file), then, in
a fresh Python process per run so that nothing is cached, loads it with
:func:`slackopt.io.load_instance` and reports:

- MB/s: file size / load wall time (best of --repeat runs: the least disturbed one);
- peak memory: the process's peak resident set minus its resident set after the imports
  (the loader's own memory), also as a multiple of the file size;
- bad last field: the same file with the last tensor's ``size_bytes`` made negative; the
  time until the error naming ``tensors[N].size_bytes`` (best of runs).

Prints one markdown table. Wall clock on the machine that runs it (noisy on a shared
machine); nothing here is asserted by tests.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from unittest import mock

CHILD = r"""
import json, resource, sys, time
from slackopt.errors import FileFormatError
from slackopt.io import load_instance
import slackopt.instance, pydantic_core, numpy, networkx  # imports before the baseline
def rss_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
base = rss_kb()
t0 = time.perf_counter()
field = None
try:
    inst = load_instance(sys.argv[1])
except FileFormatError as e:
    field = e.field
dt = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kB on Linux
print(json.dumps({"s": dt, "extra_kb": peak - base, "field": field}))
"""


def make_file(layers: int, path: Path) -> None:
    from slackopt.io import save_instance
    from slackopt.workloads import _builder, make

    with mock.patch.dict(_builder._LIMITS, {"n_layers": max(layers, _builder.MAX_LAYERS)}):
        save_instance(make("chain", layers=layers), path, overwrite=True)


def bad_copy(path: Path, out: Path) -> str:
    text = path.read_text()
    i = text.rindex('"size_bytes":')
    j = i + len('"size_bytes":')
    out.write_text(text[:j] + "-" + text[j:])
    n = json.loads(text)["tensors"]
    return f"tensors[{len(n) - 1}].size_bytes"


def run_child(path: Path) -> dict:
    res = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True,
                         text=True, check=True)
    return json.loads(res.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default="1000,10000,40000,150000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/slackopt-load")
    args = ap.parse_args()
    d = Path(args.dir)
    d.mkdir(parents=True, exist_ok=True)
    print("| chain layers | file MB | load s | MB/s | loader memory MB | memory / file | "
          "bad last field reported after s |")
    print("|---|---|---|---|---|---|---|")
    for layers in (int(x) for x in args.layers.split(",")):
        path = d / f"chain{layers}.json"
        if not path.exists():
            make_file(layers, path)
        mb = path.stat().st_size / 1e6
        runs = [run_child(path) for _ in range(args.repeat)]
        best = min(r["s"] for r in runs)
        mem = max(r["extra_kb"] for r in runs) / 1e3
        bad = d / f"chain{layers}-bad.json"
        want = bad_copy(path, bad)
        bruns = [run_child(bad) for _ in range(args.repeat)]
        assert all(r["field"] == want for r in bruns), (bruns, want)
        print(f"| {layers:,} | {mb:.1f} | {best:.2f} | {mb / best:.1f} | {mem:.0f} | "
              f"{mem / mb:.1f}x | {min(r['s'] for r in bruns):.2f} |")


if __name__ == "__main__":
    main()
