"""The PyTorch wing: a real training step in, an executed plan out.

Needs PyTorch (``pip install 'slackopt[torch]'``); ``import slackopt`` does not import
this package, so the core stays usable without torch. Importing it without torch raises
:class:`MissingTorchError` (a :class:`~slackopt.errors.SlackoptError`).

Usage::

    from slackopt import io, solve
    from slackopt.torch import execute_plan, profile_step

    model.train()
    inst = profile_step(model, (idx,), lambda logits, idx: loss(logits, idx))
    io.save_instance(inst, "model.json")
    plan = solve(inst, "slackswap", 0.5).plan
    report = execute_plan(model, (idx,), lambda logits, idx: loss(logits, idx), inst, plan,
                          0.5)
    assert report.matches_plan()

From the command line: ``slackopt profile MODULE:FACTORY --input-shape 4x128 -o
model.json`` (:func:`build_from_factory` states the factory contract), or a Hugging Face
model from its configuration alone: ``slackopt profile --fake hf:PATH/config.json -i
1x8192 --gpu h100 -o F.json``.

The modules, each one job, in the order a step goes through them:

- :mod:`~slackopt.torch.trace`: the dispatch-mode tracer both the profiler and the runtime
  run: op numbering (:func:`op_name`), storages, module paths, storage names.
- :mod:`~slackopt.torch.flops`: FLOPs of ATen calls (roofline durations).
- :mod:`~slackopt.torch.step`: the model's call and loss, checks before a step.
- :mod:`~slackopt.torch.profile`: :func:`profile_step`, :func:`profile_factory`.
- :mod:`~slackopt.torch.build`: a trace turned into an instance (tensors, saved tensors,
  recipes, layers).
- :mod:`~slackopt.torch.factories`, :mod:`~slackopt.torch.hf`: models from a user's
  factory or a Hugging Face config; fake (``FakeTensorMode``) models of any size.
- :mod:`~slackopt.torch.runtime`: :class:`PlanRuntime`, the evaluator's barrier-free
  schedule replayed on the real step, over :func:`slackopt.simulate.barrier_free_actions`
  (:mod:`~slackopt.torch.schedule`: :func:`runtime_schedule`, the instances it can run);
  with :mod:`~slackopt.torch.recipes` (recorded calls re-run by recomputes),
  :mod:`~slackopt.torch.copies` (host pool, D2H and H2D copies, CUDA streams) and
  :mod:`~slackopt.torch.blocks` (every block's lifetime, the accounted peak).
- :mod:`~slackopt.torch.execute`: :func:`execute_plan` (one step, or the schedule of a
  pipeline stage built from a profile), :func:`measure_plan`;
  :mod:`~slackopt.torch.report`: :class:`RuntimeReport`.
- :mod:`~slackopt.torch.export`: :func:`sac_policy`, a plan as a policy for PyTorch's
  selective activation checkpointing; :mod:`~slackopt.torch.sac`: :class:`SACRun`, that
  policy applied to a module's training steps, :func:`measure_policy`.

A plan reaches a step only through the profiler's op numbering and storage names
(:func:`op_name`, :func:`~slackopt.torch.trace.storage_name`); anything else that applies a
plan to a step matches op calls the same way.
"""

from __future__ import annotations

from slackopt.torch.errors import MissingTorchError, PlanRuntimeError, ProfileError, ProfileNote

try:
    import torch  # noqa: F401
except ImportError as _e:  # pragma: no cover - exercised by the no-torch subprocess test
    raise MissingTorchError(
        "slackopt.torch needs PyTorch; install it with pip install 'slackopt[torch]'") from _e

from slackopt.torch.blocks import BlockLedger  # noqa: E402
from slackopt.torch.build import GENERATOR, build_instance  # noqa: E402
from slackopt.torch.copies import HostPool, host_pool_bytes  # noqa: E402
from slackopt.torch.execute import decisions_by_name, execute_plan, measure_plan  # noqa: E402
from slackopt.torch.export import SACExportError, SACPolicy, sac_policy  # noqa: E402
from slackopt.torch.factories import (  # noqa: E402
    build_from_factory,
    load_factory,
    make_inputs,
    parse_dtype,
    parse_shape,
    resolve_factory,
    vocab_size,
)
from slackopt.torch.flops import grouped_mm_flops, op_flops, sdpa_flops  # noqa: E402
from slackopt.torch.hf import HF_PREFIX  # noqa: E402
from slackopt.torch.profile import instance_name, profile_factory, profile_step  # noqa: E402
from slackopt.torch.report import RuntimeReport  # noqa: E402
from slackopt.torch.runtime import PlanRuntime  # noqa: E402
from slackopt.torch.sac import SACRun, measure_policy  # noqa: E402
from slackopt.torch.schedule import runtime_schedule  # noqa: E402
from slackopt.torch.step import (  # noqa: E402
    FAKE_TIMING_ERROR,
    as_input_tuple,
    as_model_inputs,
    default_loss,
    fake_mode_of,
    run_loss,
)
from slackopt.torch.trace import (  # noqa: E402
    OpRec,
    StepTracer,
    StorageRec,
    op_kind,
    op_label,
    op_name,
    storage_name,
    storage_of,
)

__all__ = [
    "FAKE_TIMING_ERROR", "GENERATOR", "HF_PREFIX", "BlockLedger", "HostPool",
    "MissingTorchError", "OpRec", "PlanRuntime", "PlanRuntimeError", "ProfileError",
    "ProfileNote", "RuntimeReport", "SACExportError", "SACPolicy", "SACRun", "StepTracer",
    "StorageRec", "as_input_tuple",
    "as_model_inputs", "build_from_factory", "build_instance", "decisions_by_name",
    "default_loss", "execute_plan", "fake_mode_of", "grouped_mm_flops", "host_pool_bytes",
    "instance_name", "load_factory", "make_inputs", "measure_plan", "measure_policy",
    "op_flops", "op_kind",
    "op_label", "op_name", "parse_dtype", "parse_shape", "profile_factory", "profile_step",
    "resolve_factory", "run_loss", "runtime_schedule", "sac_policy", "sdpa_flops",
    "storage_name",
    "storage_of", "vocab_size",
]
