"""One training step of a module as the profiler and the runtime both run it.

The model's call arguments (:func:`as_model_inputs`: a tensor, positional arguments, a
Hugging Face batch dict, or a callable returning one), the loss (:func:`run_loss`: the
caller's ``loss_fn``, else the output's ``loss``, else :func:`default_loss`), and the
checks both make before a step: no ``torch.compile``d module (:func:`refuse_compiled`),
real and fake tensors not mixed (:func:`fake_mode_of`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._pytree import tree_flatten

from slackopt.torch.errors import ProfileError


def default_loss(output: Any, *example_inputs: Any) -> Any:
    """The loss used when none is given: the sum over the floating-point output tensors
    that require grad of ``mean(out ** 2)`` (computed in float32 or wider).

    Raises:
        ProfileError: the output has no such tensor.
    """
    ts = [t for t in tree_flatten(output)[0]
          if isinstance(t, torch.Tensor) and t.is_floating_point() and t.requires_grad]
    if not ts:
        raise ProfileError("the model output has no floating-point tensor that requires "
                           "grad; pass a loss_fn")
    loss = ts[0].float().pow(2).mean()
    for t in ts[1:]:
        loss = loss + t.float().pow(2).mean()
    return loss


def as_input_tuple(example_inputs: Any) -> tuple[Any, ...]:
    """A single tensor becomes a 1-tuple; a list or tuple becomes a tuple."""
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    if isinstance(example_inputs, (list, tuple)):
        return tuple(example_inputs)
    raise ProfileError(f"example_inputs must be a tensor, a sequence of arguments, a dict of "
                       f"keyword arguments or a callable returning one, got "
                       f"{type(example_inputs).__name__}")


def as_model_inputs(example_inputs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The model's call arguments as (positional tuple, keyword dict).

    Accepts one tensor, a list or tuple of positional arguments, a dict of keyword
    arguments (a Hugging Face batch: ``{"input_ids": ..., "attention_mask": ...,
    "labels": ...}``), or a callable with no arguments returning one of those (called
    once per step).

    Raises:
        ProfileError: anything else (names the type).
    """
    if callable(example_inputs) and not isinstance(example_inputs, torch.Tensor):
        example_inputs = example_inputs()
    if isinstance(example_inputs, Mapping):
        if not all(isinstance(k, str) for k in example_inputs):
            raise ProfileError("a dict of example inputs must have str keys (keyword "
                               "argument names)")
        return (), dict(example_inputs)
    return as_input_tuple(example_inputs), {}


def run_loss(model: Any, inputs: Any, loss_fn: Callable[..., Any] | None,
             kwargs: Mapping[str, Any] | None = None) -> Any:
    """``loss_fn(model(*inputs, **kwargs), *inputs, **kwargs)`` checked to be a scalar
    tensor that needs grad. `inputs` may also be anything :func:`as_model_inputs` takes
    (then `kwargs` must be None). Without a loss_fn, an output with a scalar ``loss``
    attribute or key (a Hugging Face model given ``labels``) gives that loss, else
    :func:`default_loss`."""
    if kwargs is None:
        inputs, kwargs = as_model_inputs(inputs)
    out = model(*inputs, **kwargs)
    if loss_fn is None:
        hf = output_loss(out)
        loss = hf if hf is not None else default_loss(out, *inputs)
    else:
        loss = loss_fn(out, *inputs, **kwargs)
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise ProfileError("loss_fn must return a tensor with one element, got "
                           f"{type(loss).__name__}"
                           + (f" of shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor)
                              else ""))
    if not loss.requires_grad:
        raise ProfileError("the loss does not require grad: is the model in no_grad mode, "
                           "or are all parameters frozen?")
    return loss


def output_loss(out: Any) -> Any:
    """The ``loss`` entry of a model output (Hugging Face ``ModelOutput``), or None."""
    loss = out.get("loss") if isinstance(out, Mapping) else getattr(out, "loss", None)
    if isinstance(loss, torch.Tensor) and loss.numel() == 1:
        return loss
    return None


FAKE_TIMING_ERROR = (
    "fake profiling (FakeTensor parameters, --fake) has no run time to measure: use roofline "
    "timing on a GPU preset (timing='roofline', gpu='h100'; --timing roofline --gpu h100)")


def fake_mode_of(model: Any, example_inputs: Any = ()) -> Any | None:
    """The ``FakeTensorMode`` the model's parameters and buffers and the input tensors
    belong to, or None when they are all real tensors.

    Args:
        model: a ``torch.nn.Module``.
        example_inputs: tensors, sequences or dicts of them (anything ``tree_flatten``
            reads).

    Raises:
        ProfileError: fake and real tensors mixed, or fake tensors of two fake modes (build
            the model and its inputs under one ``FakeTensorMode``, as
            :func:`build_from_factory` with ``fake=True`` does).
    """
    ts = [*model.parameters(), *model.buffers(),
          *(x for x in tree_flatten(example_inputs)[0] if isinstance(x, torch.Tensor))]
    modes = {id(t.fake_mode): t.fake_mode for t in ts if isinstance(t, FakeTensor)}
    if not modes:
        return None
    if len(modes) > 1 or any(not isinstance(t, FakeTensor) for t in ts):
        raise ProfileError("the model and its inputs mix real tensors and fake tensors (or "
                           "fake tensors of two FakeTensorModes): build both under one "
                           "FakeTensorMode (build_from_factory(..., fake=True))")
    return next(iter(modes.values()))


def within(mode: Any | None) -> Any:
    """`mode` (a FakeTensorMode) as a context manager; no-op for None."""
    return contextlib.nullcontext() if mode is None else mode


def refuse_compiled(model: Any) -> None:
    """``torch.compile`` output is refused: its step is not the eager step the profile and
    the runtime see (they would silently run eager)."""
    mods = [model] + (list(model.modules()) if hasattr(model, "modules") else [])
    for m in mods:
        if type(m).__name__ == "OptimizedModule" or hasattr(m, "_orig_mod") \
                or hasattr(getattr(m, "forward", None), "_torchdynamo_orig_callable"):
            raise ProfileError(
                "the model is a torch.compile'd module: slackopt profiles and runs the eager "
                "step, whose kernels and saved tensors differ from the compiled one. Pass the "
                "module before torch.compile (model._orig_mod), plan it, and compile after "
                "if you do not run the plan")


def device_of(model: Any, inputs: Any) -> str:
    """The device of the model's first parameter, else of the first input tensor; "cpu"
    without either."""
    for x in [*model.parameters(), *tree_flatten(inputs)[0]]:
        if isinstance(x, torch.Tensor):
            return str(x.device)
    return "cpu"



__all__ = ["FAKE_TIMING_ERROR", "as_input_tuple", "as_model_inputs", "default_loss",
           "device_of", "fake_mode_of", "output_loss", "refuse_compiled", "run_loss", "within"]
