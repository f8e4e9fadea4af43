"""The fake profiler at scale: the Llama-3-8B dimensions at 1x8192 tokens, 1, 8 and 32 layers.

Run: python benchmarks/profile_scale.py [--layers 1,8,32] [--tokens 8192] [--gpu h100]
     [--config instances/configs/llama-3-8b/config.json]

Each size runs in a fresh Python process (so that peak memory is its own) that does what
``slackopt profile --fake hf:CONFIG -i 1xTOKENS --gpu GPU -p num_hidden_layers=L`` does:
:func:`slackopt.torch.profile_factory` with ``fake=True`` (the model is built by
``AutoModelForCausalLM.from_config`` under PyTorch's ``FakeTensorMode`` in the config's
dtype, bfloat16, and traced with roofline timing), then writes the instance file. It reports

- import s: importing torch, transformers and slackopt.torch (paid once per command);
- profile s: building the fake model, tracing the step and building the instance (wall);
- write s: :func:`slackopt.io.save_instance`;
- peak RSS: the process's peak resident set (``resource.getrusage``, ``ru_maxrss``), all
  included (the interpreter, torch, transformers);
- ops, saved tensors, A (saved bytes) and P (keep-all peak) of the instance.

Prints one markdown table. Wall clock on the machine that runs it (noisy on a shared
machine); nothing here is asserted by tests.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "instances" / "configs" / "llama-3-8b" / "config.json"

CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
import torch, transformers  # noqa: F401
from slackopt import io
from slackopt.torch import profile_factory
t1 = time.perf_counter()
config, layers, tokens, gpu, out = sys.argv[1:]
inst = profile_factory("hf:" + config, ["1x" + tokens], params={"num_hidden_layers": int(layers)},
                       fake=True, timing="roofline", gpu=gpu)
t2 = time.perf_counter()
io.save_instance(inst, out, overwrite=True)
t3 = time.perf_counter()
print(json.dumps({"layers": int(layers), "import_s": t1 - t0, "profile_s": t2 - t1,
                  "write_s": t3 - t2,
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "ops": inst.n_ops, "saved_tensors": inst.n_saved, "A": inst.A, "P": inst.P,
                  "attn": inst.meta["attn_implementation"],
                  "dtype": inst.meta["param_dtype"]}))
"""


def measure(config: Path, layers: int, tokens: int, gpu: str, out: Path) -> dict:
    """One size in a fresh process; the child's JSON line as a dict.

    Raises:
        RuntimeError: the child failed (its stderr is quoted).
    """
    r = subprocess.run([sys.executable, "-c", CHILD, str(config), str(layers), str(tokens),
                        gpu, str(out)], capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        raise RuntimeError(f"{layers} layers failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    """Parse the arguments, measure each size, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default="1,8,32")
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--config", type=Path, default=CONFIG)
    a = ap.parse_args()
    print(f"Llama-3-8B dimensions ({a.config.relative_to(ROOT)}), 1x{a.tokens} tokens, "
          f"--fake on {a.gpu}\n")
    print("| layers | ops | saved tensors | A (GB) | P (GB) | import s | profile s | write s "
          "| peak RSS (GB) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in a.layers.split(",")):
            d = measure(a.config, n, a.tokens, a.gpu, Path(tmp) / f"l{n}.json")
            print(f"| {n} | {d['ops']} | {d['saved_tensors']} | {d['A'] / 1e9:.2f} | "
                  f"{d['P'] / 1e9:.2f} | {d['import_s']:.1f} | {d['profile_s']:.1f} | "
                  f"{d['write_s']:.1f} | {d['peak_rss_bytes'] / 1e9:.2f} |", flush=True)
    print(f"\nattention: {d['attn']}, parameters in {d['dtype']}")


if __name__ == "__main__":
    main()
