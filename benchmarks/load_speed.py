"""Instance-file loading speed (MB/s), peak memory per file byte, and how soon a bad field
is reported (early and late in the file).

Run: python benchmarks/load_speed.py [--layers 1000,10000,30000,68000] [--repeat 5]
     [--dir DIR (default: slackopt-load in the system's temporary folder)]

For each size, writes a synthetic chain instance (``slackopt make chain``'s generator,
its 4096-layer cap lifted for this measurement; 68,000 layers is a 46 MB file), then, in
a fresh Python process per run so that nothing is cached, loads it with
:func:`slackopt.io.load_instance` and reports the *median* of --repeat runs (the machine
this ran on is shared, so single runs swing):

- MB/s: file size / load wall time;
- MB/s of CPU: file size / the process's CPU time for the same load (on a machine whose
  cores other work shares, wall time counts the waits for a core, CPU time does not);
- memory / file: the process's peak resident set minus its resident set after the imports
  (the loader's own memory), divided by the file size;
- bad first / bad last: the same file with the first or the last tensor's ``size_bytes``
  made negative; the time until the error naming ``tensors[0].size_bytes`` or
  ``tensors[N].size_bytes``. The schema checks only structure, so a negative size is
  found by the Instance's checks, which run over the whole built file (each rule once,
  in bulk) and name the first bad item: a bad value saves the derived arrays, not the
  parse or the building, wherever it is.

Prints one markdown table. Wall clock on the machine that runs it (noisy on a shared
machine); nothing here is asserted by tests.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
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
c0 = time.process_time()
field = None
try:
    inst = load_instance(sys.argv[1])
except FileFormatError as e:
    field = e.field
dt = time.perf_counter() - t0
cpu = time.process_time() - c0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kB on Linux
print(json.dumps({"s": dt, "cpu": cpu, "extra_kb": peak - base, "field": field}))
"""


def make_file(layers: int, path: Path) -> None:
    """Write a `layers`-layer chain instance to `path` (the generator's cap lifted)."""
    from slackopt.io import save_instance
    from slackopt.workloads import _builder, make

    with mock.patch.dict(_builder._LIMITS, {"n_layers": max(layers, _builder.MAX_LAYERS)}):
        save_instance(make("chain", layers=layers), path, overwrite=True)


def bad_copy(path: Path, out: Path, last: bool) -> str:
    """Copy `path` to `out` with the first (or last) ``size_bytes`` negated; its field."""
    text = path.read_text()
    i = text.rindex('"size_bytes":') if last else text.index('"size_bytes":')
    j = i + len('"size_bytes":')
    out.write_text(text[:j] + "-" + text[j:])
    n = len(json.loads(text)["tensors"])
    return f"tensors[{n - 1 if last else 0}].size_bytes"


def run_child(path: Path) -> dict:
    """Load `path` in a fresh interpreter; its wall s, CPU s, extra peak kB, error field."""
    res = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True,
                         text=True, check=True)
    return json.loads(res.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default="1000,10000,30000,68000")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", default=str(Path(tempfile.gettempdir()) / "slackopt-load"))
    args = ap.parse_args()
    d = Path(args.dir)
    d.mkdir(parents=True, exist_ok=True)
    med = statistics.median
    print(f"load average before: {os.getloadavg()[0]:.1f} (1 min), on {os.cpu_count()} cores;"
          f" medians of {args.repeat} runs")
    print("| chain layers | file MB | load s | MB/s | CPU s | MB/s of CPU | memory / file "
          "| bad first field reported after s | bad last field reported after s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for layers in (int(x) for x in args.layers.split(",")):
        path = d / f"chain{layers}.json"
        if not path.exists():
            make_file(layers, path)
        mb = path.stat().st_size / 1e6
        runs = [run_child(path) for _ in range(args.repeat)]
        assert all(r["field"] is None for r in runs), runs
        wall, cpu = med(r["s"] for r in runs), med(r["cpu"] for r in runs)
        mem = med(r["extra_kb"] for r in runs) / 1e3
        bad_s = []
        for last in (False, True):
            bad = d / f"chain{layers}-bad-{'last' if last else 'first'}.json"
            want = bad_copy(path, bad, last)
            bruns = [run_child(bad) for _ in range(args.repeat)]
            assert all(r["field"] == want for r in bruns), (bruns, want)
            bad_s.append(med(r["s"] for r in bruns))
        print(f"| {layers:,} | {mb:.1f} | {wall:.2f} | {mb / wall:.1f} | {cpu:.2f} | "
              f"{mb / cpu:.1f} | {mem / mb:.1f}x ({mem:.0f} MB) | {bad_s[0]:.2f} | "
              f"{bad_s[1]:.2f} |", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f} (1 min)")


if __name__ == "__main__":
    main()
