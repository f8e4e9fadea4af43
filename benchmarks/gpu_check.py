"""Run planned steps on a CUDA GPU and put them beside the evaluator's simulation.

For two models (a GPT-style decoder and a ResNet-style CNN, tests/torch_models.py, sized
for a GPU), on the first CUDA device:

1. profile one training step on the GPU (``timing="measure"``: CUDA events, median of
   ``--repeat`` steps) with the host link of the GPU (``--link``, default from the device
   name: H100/H200 -> pcie5, else pcie4);
2. solve with SlackSwap at 0.5 P and 0.3 P;
3. execute each plan (:func:`slackopt.torch.measure_plan`: one warm-up step, then
   ``--steps`` measured ones) and one more step after zeroing the gradients, compared with
   the unplanned step's gradients.

4. export the same plan as a policy for PyTorch's selective activation checkpointing
   (:func:`slackopt.torch.export.sac_policy`) and run it
   (:func:`slackopt.torch.sac.measure_policy`): its step time, ``max_memory_allocated``
   and gradient difference sit beside ``execute_plan``'s and the simulation's. A plan
   with tensors the policy cannot express is run with those tensors kept: the row names
   them (``sac_kept``) and gives that plan's own simulation (``sac_simulated_*``).

It prints, per model and budget: the simulated and the measured step time (median), the
simulated peak (bytes the evaluator holds under M), ``torch.cuda.max_memory_allocated``
above the allocation before the step (it also holds what the instance leaves outside M:
parameter gradients), the accounted peak (the simulated peak with every block the runtime
managed held until it was really free and its copy streams were done:
``RuntimeReport.accounted_peak_bytes``, docs/pytorch.md "The plan's peak on the device"),
``torch.cuda.max_memory_reserved`` above the reservation before the step (what blocks
waiting for their streams cost the caching allocator), whether the runtime matched the
simulation (``matches_plan``: the same copies, evictions and rebuilds, the same saved
bytes after every task) and the largest absolute gradient difference to the unplanned
step. The JSON rows also list the blocks held past the evaluator's free of them
(``held_past_drop``).

Usage: ``python benchmarks/gpu_check.py [--steps 3] [--repeat 5] [--link pcie5]
[--json out.json]``. Exit status 2 (with a message) on a machine without CUDA.
``--dry-run`` runs the same flow on the CPU with test-sized models (roofline timing, no
CUDA peak): it checks the script, not a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _models(torch, small: bool, large: bool = False):
    sys.path.insert(0, str(ROOT))  # the tests package
    from tests.torch_models import TinyGPT, TinyResNet, lm_loss

    torch.manual_seed(0)
    if small:  # --dry-run on the CPU: the same flow on test-sized models
        return [("gpt-2x32", TinyGPT(layers=2), (torch.randint(0, 64, (2, 16)),), lm_loss),
                ("resnet-w8", TinyResNet(8), (torch.randn(2, 3, 16, 16),), None)]
    if large:  # kernels long enough for the runtime's per-op cost to be small beside them
        gpt = TinyGPT(vocab=32768, block=1024, d=2048, heads=16, layers=8, dropout=0.1)
        idx = torch.randint(0, 32768, (8, 1024))
        return [("gpt-8x2048", gpt, (idx,), lm_loss)]
    gpt = TinyGPT(vocab=8192, block=512, d=512, heads=8, layers=6, dropout=0.1)
    idx = torch.randint(0, 8192, (8, 512))
    cnn = TinyResNet(width=64, classes=100)
    img = torch.randn(32, 3, 96, 96)
    return [("gpt-6x512", gpt, (idx,), lm_loss), ("resnet-w64", cnn, (img,), None)]


def _default_link(name: str) -> str:
    n = name.lower()
    return "pcie5" if ("h100" in n or "h200" in n) else "pcie4"


def _grads(model):
    return [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]


def _sac_row(torch, model, inputs, loss_fn, inst, plan, frac, steps, ref, simulate):
    """The plan as a selective-checkpoint policy, run and measured: its step time (median),
    ``max_memory_allocated`` above the step's start, and the gradient difference to the
    unplanned step. Tensors the policy cannot express are kept (named in ``sac_kept``),
    and that plan is simulated too."""
    import numpy as np

    from slackopt import KEEP, Plan
    from slackopt.instance import budget_bytes
    from slackopt.torch import run_loss
    from slackopt.torch.export import SACExportError, sac_policy
    from slackopt.torch.sac import SACRun, measure_policy

    kept: list[str] = []
    try:
        policy = sac_policy(inst, plan)
    except SACExportError as e:
        kept = sorted(e.reasons)
        d = np.array([KEEP if n in e.reasons else x for n, x in zip(plan.names, plan.decisions,
                                                                  strict=True)], np.int8)
        plan = Plan(d, plan.names)
        policy = sac_policy(inst, plan)
    ev = simulate(inst, plan, budget_bytes(inst, frac))
    model.zero_grad(set_to_none=True)
    out = measure_policy(model, inputs, loss_fn, policy, steps=steps)
    model.zero_grad(set_to_none=True)
    torch.manual_seed(7)
    with SACRun(model, policy):
        run_loss(model, inputs, loss_fn).backward()
    diff = max(float((g - r).abs().max()) for g, r in zip(_grads(model), ref, strict=True))
    return {"sac_kept": kept, "sac_simulated_step_s": ev.step_time_s if ev.feasible else None,
            "sac_simulated_peak_bytes": ev.peak_bytes, "sac_step_s": out["step_time_s"],
            "sac_peak_bytes": out["peak_bytes"],
            "sac_reserved_peak_bytes": out["reserved_peak_bytes"],
            "sac_d2h_bytes": out["d2h_bytes"], "sac_replays": out["replays"],
            "sac_replayed_calls": out["replayed_calls"], "sac_max_grad_diff": diff,
            "sac_extra": policy.extra}


def cuda_torch(script: str, dry_run: bool):
    """The ``torch`` module, or None after a message on stderr naming `script` where
    PyTorch is missing or (unless `dry_run`) sees no CUDA device."""
    try:
        import torch
    except ImportError:
        print(f"{script}: PyTorch is not installed (pip install 'slackopt[torch]')",
              file=sys.stderr)
        return None
    if not torch.cuda.is_available() and not dry_run:
        print(f"{script}: no CUDA device here (torch.cuda.is_available() is False; this "
              f"PyTorch is {torch.__version__}). Run it on a machine with an NVIDIA GPU and "
              "a CUDA build of PyTorch.", file=sys.stderr)
        return None
    return torch


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=3, help="measured steps per plan")
    ap.add_argument("--repeat", type=int, default=5, help="profiled steps (median)")
    ap.add_argument("--link", default=None, help="host-link preset (default from the GPU)")
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    ap.add_argument("--large", action="store_true",
                    help="one larger model instead (GPT, 8 layers of width 2048, 8 x 1024 "
                    "tokens): kernels long beside the runtime's per-op cost")
    ap.add_argument("--dry-run", action="store_true",
                    help="run the same flow on the CPU with test-sized models and roofline "
                    "A100 timing (checks the script, measures nothing about a GPU)")
    a = ap.parse_args(argv)
    torch = cuda_torch("gpu_check", a.dry_run)
    if torch is None:
        return 2

    import time
    import warnings

    from slackopt import solve
    from slackopt.simulate import simulate
    from slackopt.torch import execute_plan, measure_plan, profile_step, run_loss

    dev = torch.device("cpu") if a.dry_run else torch.device("cuda", 0)
    gpu_name = "cpu (dry run)" if a.dry_run else torch.cuda.get_device_name(dev)
    link = a.link or _default_link(gpu_name)
    timing = {"timing": "roofline", "gpu": "a100"} if a.dry_run else {}
    if a.dry_run:
        warnings.simplefilter("ignore")
    rows = []
    print(f"{gpu_name}, link {link}, torch {torch.__version__}")
    hdr = (f"{'model':<11} {'M/P':>4} {'sim ms':>8} {'meas ms':>8} {'unpl ms':>8} "
           f"{'sim peak MB':>11} {'cuda peak MB':>12} {'acct peak MB':>12} "
           f"{'reserved MB':>11} {'match':>5} {'max |dgrad|':>11} {'sac ms':>8} "
           f"{'sac peak MB':>11} {'sac |dgrad|':>11}")
    print(hdr)
    for name, model, inputs, loss_fn in _models(torch, a.dry_run, a.large):
        model = model.to(dev).train()
        inputs = tuple(x.to(dev) for x in inputs)
        inst = profile_step(model, inputs, loss_fn, link=link, repeat=a.repeat,
                            name=name, **timing)
        # The unplanned step: its time (median of the measured steps) and gradients.
        times = []
        for _ in range(1 + a.steps):
            model.zero_grad(set_to_none=True)
            torch.manual_seed(7)
            if a.dry_run:
                t0 = time.perf_counter()
                run_loss(model, inputs, loss_fn).backward()
                times.append(time.perf_counter() - t0)
                continue
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            run_loss(model, inputs, loss_fn).backward()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        ref = _grads(model)
        unplanned_s = sorted(times[1:])[len(times[1:]) // 2]
        for frac in (0.5, 0.3):
            res = solve(inst, "slackswap", frac)
            ev = res.evaluation
            row = {"model": name, "budget_fraction": frac, "P_bytes": inst.P,
                   "feasible": bool(ev is not None and ev.feasible),
                   "unplanned_step_s": unplanned_s}
            if res.plan is None or not ev.feasible:
                rows.append(row)
                print(f"{name:<11} {frac:>4} {'infeasible':>8}")
                continue
            model.zero_grad(set_to_none=True)
            out = measure_plan(model, inputs, loss_fn, inst, res.plan, frac, steps=a.steps)
            model.zero_grad(set_to_none=True)
            torch.manual_seed(7)
            rep = execute_plan(model, inputs, loss_fn, inst, res.plan, frac)
            diff = max(float((g - r).abs().max()) for g, r in zip(_grads(model), ref,
                                                                   strict=True))
            meas, sim = out["measured"], out["simulated"]
            row.update(simulated_step_s=sim["step_time_s"], measured_step_s=meas["step_time_s"],
                       simulated_peak_bytes=sim["peak_bytes"],
                       cuda_peak_bytes=meas["peak_bytes"],
                       accounted_peak_bytes=meas["accounted_peak_bytes"],
                       reserved_peak_bytes=meas["reserved_peak_bytes"],
                       held_past_drop=meas["held_past_drop"],
                       matches_plan=meas["matches_plan"],
                       last_step_matches_plan=rep.matches_plan(), max_grad_diff=diff,
                       decisions=out["decisions"], d2h_bytes=meas["d2h_bytes"],
                       h2d_bytes=meas["h2d_bytes"], evictions=meas["evictions"])
            sac = _sac_row(torch, model, inputs, loss_fn, inst, res.plan, frac, a.steps,
                           ref, simulate)
            row.update(sac)
            rows.append(row)
            print(f"{name:<11} {frac:>4} {sim['step_time_s'] * 1e3:>8.2f} "
                  f"{meas['step_time_s'] * 1e3:>8.2f} {unplanned_s * 1e3:>8.2f} "
                  f"{sim['peak_bytes'] / 1e6:>11.3f} "
                  f"{(meas['peak_bytes'] or 0) / 1e6:>12.3f} "
                  f"{meas['accounted_peak_bytes'] / 1e6:>12.3f} "
                  f"{(meas['reserved_peak_bytes'] or 0) / 1e6:>11.3f} "
                  f"{str(meas['matches_plan'] and rep.matches_plan()):>5} {diff:>11.3g} "
                  f"{sac['sac_step_s'] * 1e3:>8.2f} {(sac['sac_peak_bytes'] or 0) / 1e6:>11.3f} "
                  f"{sac['sac_max_grad_diff']:>11.3g}"
                  + (f"  (sac keeps {len(sac['sac_kept'])} tensors it cannot express)"
                     if sac["sac_kept"] else ""))
        model.to("cpu")
        if not a.dry_run:
            torch.cuda.empty_cache()
    if a.json:
        Path(a.json).write_text(json.dumps({"gpu": gpu_name, "link": link, "rows": rows},
                                           indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
