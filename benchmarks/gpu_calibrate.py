"""Measure, on a CUDA GPU, what the fake profiles and the link presets assume.

Two checks, on the first CUDA device:

1. **The host link.** Pinned host <-> device copies of ``--link-mib`` MiB (median of 5,
   CUDA events): the D2H (offload) and H2D (prefetch) bandwidth alone, each direction's
   rate while both copy at once on two streams (their ratio to the rate alone is the
   evaluator's ``duplex_factor``), and the time of a 4 KiB copy (the fixed cost
   ``copy_latency_s``). Compare with the presets in slackopt/hardware.py (``pcie5``
   50 GB/s, ``pcie5-measured`` 53 GB/s, duplex 0.85, latency 10 us).
2. **Roofline against measured op times.** For Hugging Face configs shipped in
   instances/configs/ cut to ``--layers`` decoder layers (the suite profiles the full
   models with ``--fake``), one training step is profiled three ways with
   :func:`slackopt.torch.profile_step`: real tensors on the GPU timed by CUDA events
   (``timing="measure"``), the same model timed by the roofline of the GPU's preset
   (``--gpu``, default from the device name), and the model built under fake tensors
   (``build_from_factory(fake=True)``) with that roofline, as ``make_bench.py`` does. It
   prints whether the fake profile saves tensors of the same bytes in the same order as
   the real one (and both P), and the measured / roofline time ratio per op kind,
   forward, backward and in all (T*), next to the step measured without the profiler.

Usage: ``python benchmarks/gpu_calibrate.py [--json out.json] [--gpu h200]
[--models llama-3-8b:1x4096,gpt2-xl:2x1024] [--layers 2]``. Exit status 2 (with a
message) without PyTorch or CUDA, or without transformers for the second check.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODELS = "llama-3-8b:1x4096,mistral-7b:1x4096,gpt2-xl:4x1024"


def _event_time(torch, stream, fn) -> float:
    """Seconds `fn` takes on `stream` (CUDA events), after synchronising everything;
    wall-clock seconds where `stream` is None (the CPU dry run)."""
    if stream is None:
        import time

        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        start.record(stream)
        fn()
        end.record(stream)
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3


def measure_link(torch, mib: int, reps: int = 5) -> dict:
    """Pinned-memory copy rates (B/s) and the small-copy time (s); see the module doc."""
    n = mib << 20
    host_out = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    host_in = torch.full((n,), 1, dtype=torch.uint8, pin_memory=True)
    dev_src = torch.full((n,), 2, dtype=torch.uint8, device="cuda")
    dev_dst = torch.empty(n, dtype=torch.uint8, device="cuda")
    s_d2h, s_h2d = torch.cuda.Stream(), torch.cuda.Stream()

    def d2h():
        host_out.copy_(dev_src, non_blocking=True)

    def h2d():
        dev_dst.copy_(host_in, non_blocking=True)

    for stream, fn in ((s_d2h, d2h), (s_h2d, h2d)):  # warm-up
        _event_time(torch, stream, fn)
    alone_d2h = statistics.median(n / _event_time(torch, s_d2h, d2h) for _ in range(reps))
    alone_h2d = statistics.median(n / _event_time(torch, s_h2d, h2d) for _ in range(reps))
    both_d2h, both_h2d = [], []
    for _ in range(reps):
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        torch.cuda.synchronize()
        with torch.cuda.stream(s_d2h):
            ev[0].record(s_d2h)
            d2h()
            ev[1].record(s_d2h)
        with torch.cuda.stream(s_h2d):
            ev[2].record(s_h2d)
            h2d()
            ev[3].record(s_h2d)
        torch.cuda.synchronize()
        both_d2h.append(n / (ev[0].elapsed_time(ev[1]) / 1e3))
        both_h2d.append(n / (ev[2].elapsed_time(ev[3]) / 1e3))
    small_h = torch.empty(4096, dtype=torch.uint8, pin_memory=True)
    small_d = torch.empty(4096, dtype=torch.uint8, device="cuda")

    def small():
        for _ in range(100):
            small_h.copy_(small_d, non_blocking=True)

    _event_time(torch, s_d2h, small)
    small_s = statistics.median(_event_time(torch, s_d2h, small) / 100 for _ in range(reps))
    assert bool((host_out == 2).all()) and bool((dev_dst == 1).all()), "copies went wrong"
    out = {"mib": mib, "d2h_bytes_per_s": alone_d2h, "h2d_bytes_per_s": alone_h2d,
           "d2h_duplex_bytes_per_s": statistics.median(both_d2h),
           "h2d_duplex_bytes_per_s": statistics.median(both_h2d),
           "copy_4k_s": small_s}
    out["duplex_factor_d2h"] = out["d2h_duplex_bytes_per_s"] / alone_d2h
    out["duplex_factor_h2d"] = out["h2d_duplex_bytes_per_s"] / alone_h2d
    return out


def _step_s(torch, model, inputs, device: str, reps: int = 5) -> float:
    """Median seconds of one unprofiled training step (CUDA events; wall clock on CPU)."""
    from slackopt.torch import run_loss

    stream = torch.cuda.current_stream() if device == "cuda" else None
    times = []
    for _ in range(reps + 1):
        model.zero_grad(set_to_none=True)
        times.append(_event_time(torch, stream,
                                 lambda: run_loss(model, inputs, None).backward()))
    return statistics.median(times[1:])


def compare_roofline(torch, key: str, shape: str, layers: int, gpu: str, link,
                     device: str = "cuda") -> dict:
    """Profile one config three ways (module doc, check 2); the comparison as a dict."""
    from slackopt.torch import build_from_factory, profile_step

    target = f"hf:{ROOT / 'instances' / 'configs' / key / 'config.json'}"
    params = {"num_hidden_layers": layers}
    if device == "cpu":  # the dry run: a model small enough for the CPU
        params.update(hidden_size=64, intermediate_size=128, vocab_size=256)
    model, inputs, _ = build_from_factory(target, [shape], params=params, device=device)
    step_s = _step_s(torch, model, inputs, device)
    name = f"{key}-{layers}l-{shape}"
    meas = profile_step(model, inputs, None, timing="measure", link=link, repeat=5,
                        name=name)
    roof = profile_step(model, inputs, None, timing="roofline", gpu=gpu, link=link,
                        name=name)
    del model, inputs
    if device == "cuda":
        torch.cuda.empty_cache()
    # A fake model needs no GPU: built on the CPU, as make_bench.py builds the suite's.
    fmodel, finputs, _ = build_from_factory(target, [shape], params=params, device="cpu",
                                            fake=True)
    fake = profile_step(fmodel, finputs, None, timing="roofline", gpu=gpu, link=link,
                        name=name)
    same_ops = [o.name for o in meas.scheduled_ops] == [o.name for o in roof.scheduled_ops]
    # Kernel names differ between the devices (CPU flash attention against a GPU's), so
    # the saved tensors are compared by their bytes in production order.
    saved = [int(meas.tensors[i].size_bytes) for i in meas.saved]
    fsaved = [int(fake.tensors[i].size_bytes) for i in fake.saved]
    by_kind: dict[str, list[float]] = {}
    if same_ops:
        for m, r in zip(meas.scheduled_ops, roof.scheduled_ops, strict=True):
            acc = by_kind.setdefault(m.kind, [0, 0.0, 0.0])
            acc[0] += 1
            acc[1] += m.duration_s
            acc[2] += r.duration_s

    def phase(inst, ph):
        return sum(o.duration_s for o in inst.scheduled_ops if o.phase == ph)

    return {
        "config": key, "shape": shape, "layers": layers, "gpu_preset": gpu,
        "saved_tensors": len(saved), "fake_saved_tensors": len(fsaved),
        "P_bytes": int(meas.P), "fake_P_bytes": int(fake.P),
        "fake_saves_same_bytes": saved == fsaved, "same_op_sequence": same_ops,
        "step_unprofiled_s": step_s,
        "measured": {"fwd_s": phase(meas, "fwd"), "bwd_s": phase(meas, "bwd"),
                     "ideal_s": meas.ideal_time_s},
        "roofline": {"fwd_s": phase(roof, "fwd"), "bwd_s": phase(roof, "bwd"),
                     "ideal_s": roof.ideal_time_s},
        "fake_roofline_ideal_s": fake.ideal_time_s,
        "by_kind": {k: {"ops": v[0], "measured_s": v[1], "roofline_s": v[2]}
                    for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1][1])},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default=None, help="also write the results to this file")
    ap.add_argument("--gpu", default=None, help="roofline preset (default from the name)")
    ap.add_argument("--models", default=DEFAULT_MODELS,
                    help="CONFIG:BxS,... (folders of instances/configs)")
    ap.add_argument("--layers", type=int, default=2, help="decoder layers kept")
    ap.add_argument("--link-mib", type=int, default=1024, help="bytes per timed copy (MiB)")
    ap.add_argument("--dry-run", action="store_true",
                    help="check 2 only, on the CPU, with a 1-layer, 64-wide llama-3-8b at "
                    "1x32 (checks the script, measures nothing about a GPU)")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gpu_check import cuda_torch

    torch = cuda_torch("gpu_calibrate", a.dry_run)
    if torch is None:
        return 2
    from slackopt.hardware import GPUS, LINKS, Link

    device = "cpu" if a.dry_run else "cuda"
    name = "cpu (dry run)" if a.dry_run else torch.cuda.get_device_name(0)
    gpu = a.gpu or next((g for g in GPUS if g in name.lower()), "h100")
    print(f"{name}; roofline preset {gpu}; torch {torch.__version__}", flush=True)
    res: dict = {"gpu": name, "torch": torch.__version__, "roofline_preset": gpu}
    if a.dry_run:
        a.models, a.layers = "llama-3-8b:1x32", 1
        link = LINKS["pcie5"]
        print("link: not measured (dry run; pcie5)", flush=True)
    else:
        lk = measure_link(torch, a.link_mib)
        res["link"] = lk
        print(f"link: D2H {lk['d2h_bytes_per_s'] / 1e9:.1f} GB/s, H2D "
              f"{lk['h2d_bytes_per_s'] / 1e9:.1f} GB/s alone; both at once D2H "
              f"{lk['d2h_duplex_bytes_per_s'] / 1e9:.1f}, H2D "
              f"{lk['h2d_duplex_bytes_per_s'] / 1e9:.1f} GB/s (duplex factor "
              f"{lk['duplex_factor_d2h']:.2f} / {lk['duplex_factor_h2d']:.2f}); a 4 KiB "
              f"copy {lk['copy_4k_s'] * 1e6:.1f} us", flush=True)
        link = Link("measured", d2h_bytes_per_s=lk["d2h_bytes_per_s"],
                    h2d_bytes_per_s=lk["h2d_bytes_per_s"])
    res["models"] = []
    for item in a.models.split(","):
        key, shape = item.split(":")
        try:
            r = compare_roofline(torch, key, shape, a.layers, gpu, link, device)
        except Exception as e:  # one model failing must not lose the others' figures
            import traceback

            traceback.print_exc()
            print(f"{key}: failed: {type(e).__name__}: {e}", flush=True)
            res["models"].append({"config": key, "error": f"{type(e).__name__}: {e}"})
            continue
        res["models"].append(r)
        m, f = r["measured"], r["roofline"]
        print(f"\n{key} ({a.layers} layers, {shape}): {r['saved_tensors']} saved tensors, "
              f"P {r['P_bytes']} B; the fake profile {r['fake_saved_tensors']}, P "
              f"{r['fake_P_bytes']} B, the same bytes in order: "
              f"{r['fake_saves_same_bytes']}")
        print(f"  step unprofiled {r['step_unprofiled_s'] * 1e3:.2f} ms; T* measured "
              f"{m['ideal_s'] * 1e3:.2f} ms (fwd {m['fwd_s'] * 1e3:.2f}, bwd "
              f"{m['bwd_s'] * 1e3:.2f}); roofline {f['ideal_s'] * 1e3:.2f} ms (fwd "
              f"{f['fwd_s'] * 1e3:.2f}, bwd {f['bwd_s'] * 1e3:.2f}); fake roofline "
              f"{r['fake_roofline_ideal_s'] * 1e3:.2f} ms; measured / roofline "
              f"{m['ideal_s'] / f['ideal_s']:.2f}")
        for k, v in list(r["by_kind"].items())[:8]:
            print(f"  {k:<14} {v['ops']:>5} ops  measured {v['measured_s'] * 1e3:8.3f} ms  "
                  f"roofline {v['roofline_s'] * 1e3:8.3f} ms  ratio "
                  f"{v['measured_s'] / max(v['roofline_s'], 1e-12):6.2f}", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
