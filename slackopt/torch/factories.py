"""Models from a user's factory, as ``slackopt profile MODULE:FACTORY`` builds them.

:func:`build_from_factory` states the factory contract and returns ``(model, inputs,
loss_fn)``; ``hf:PATH`` targets are Hugging Face configs (:mod:`slackopt.torch.hf`).
With ``fake=True`` the model and its inputs are made under one ``FakeTensorMode``
(``torch._subclasses.fake_tensor``): shapes, dtypes and storages without data, whatever
the size. Also here: the parsers of ``--input-shape`` and ``--input-dtype``
(:func:`parse_shape`, :func:`parse_dtype`), the factory loader (:func:`load_factory`,
:func:`resolve_factory`) and random inputs (:func:`make_inputs`).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from slackopt.errors import SlackoptError
from slackopt.torch.errors import ProfileError
from slackopt.torch.hf import HF_PREFIX, hf_factory
from slackopt.torch.step import as_input_tuple, within

_DTYPES = {
    "float32": "float32", "float": "float32", "fp32": "float32", "float64": "float64",
    "double": "float64", "float16": "float16", "half": "float16", "fp16": "float16",
    "bfloat16": "bfloat16", "bf16": "bfloat16", "int64": "int64", "long": "int64",
    "int32": "int32", "int": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8",
    "bool": "bool",
}


def parse_shape(text: str) -> tuple[int, ...]:
    """``"4x128"``, ``"4,128"`` or ``"4 128"`` -> ``(4, 128)``; ``"scalar"`` or ``""`` -> ``()``.

    Raises:
        ProfileError: a part is not an integer >= 1.
    """
    t = text.strip().lower()
    if t in ("", "scalar", "()"):
        return ()
    parts = [p for p in re.split(r"[x,\s*]+", t.strip("()[]")) if p]
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        raise ProfileError(f"input shape '{text}' is not like 4x128 (integers separated by "
                           "x or commas)") from None
    if any(d < 1 for d in dims):
        raise ProfileError(f"input shape '{text}' (--input-shape) has a dimension below 1; "
                           "each must be an integer >= 1 (4x128)")
    return dims


def parse_dtype(text: str) -> Any:
    """A torch dtype from its name ("float32", "bf16", "int64", ...).

    Raises:
        ProfileError: an unknown name.
    """
    key = text.strip().lower().removeprefix("torch.")
    if key not in _DTYPES:
        raise ProfileError(f"dtype '{text}' is unknown; use one of "
                           f"{', '.join(sorted(set(_DTYPES.values())))}")
    return getattr(torch, _DTYPES[key])


def load_factory(target: str) -> Callable[..., Any]:
    """Resolve ``MODULE:FACTORY`` to the callable.

    MODULE is a dotted module name, imported with the current directory first on
    ``sys.path`` (as ``python -m`` does), or a path to a ``.py`` file; FACTORY is an
    attribute of it (dots reach nested attributes: ``models:Zoo.gpt``).

    Raises:
        ProfileError: malformed target, the module cannot be imported (its error is
            quoted), no such attribute, or it is not callable.
    """
    import importlib
    import importlib.util
    import os
    import sys
    from pathlib import Path

    mod_name, sep, attr = target.rpartition(":")
    if not sep or not mod_name or not attr:
        raise ProfileError(f"'{target}' is not MODULE:FACTORY (for example mymodels:make_gpt)")
    try:
        if mod_name.endswith(".py") or os.sep in mod_name or "/" in mod_name:
            path = Path(mod_name)
            if not path.is_file():
                raise ProfileError(f"module file '{mod_name}' not found")
            mname = path.stem if path.stem.isidentifier() else "_slackopt_factory"
            if mname in sys.modules:
                mname = f"_slackopt_factory_{abs(hash(str(path.resolve())))}"
            spec = importlib.util.spec_from_file_location(mname, path)
            if spec is None or spec.loader is None:
                raise ProfileError(f"cannot import '{mod_name}' as a Python file")
            module = importlib.util.module_from_spec(spec)
            here = str(path.resolve().parent)  # sibling imports work as for `python file`
            if here not in sys.path:
                sys.path.insert(0, here)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        else:
            cwd = os.getcwd()
            if cwd not in sys.path:
                sys.path.insert(0, cwd)
            module = importlib.import_module(mod_name)
    except ProfileError:
        raise
    except Exception as e:
        raise ProfileError(f"cannot import module '{mod_name}': {type(e).__name__}: {e}") from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ProfileError(f"module '{mod_name}' has no attribute '{attr}'")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ProfileError(f"'{target}' is not callable")
    return obj


def resolve_factory(target: str) -> str:
    """`target` in a form that loads from any working directory: a ``.py`` path or an
    ``hf:`` config path made absolute, a top-level module found in the current directory
    turned into its absolute file path; a dotted or installed module is kept as it is
    (importable anywhere).

    Raises:
        ProfileError: malformed target.
    """
    import importlib.util
    import os
    from pathlib import Path

    if target.startswith(HF_PREFIX):
        return HF_PREFIX + str(Path(target[len(HF_PREFIX):]).resolve())
    mod_name, sep, attr = target.rpartition(":")
    if not sep or not mod_name or not attr:
        raise ProfileError(f"'{target}' is not MODULE:FACTORY (for example mymodels:make_gpt)")
    if mod_name.endswith(".py") or os.sep in mod_name or "/" in mod_name:
        return f"{Path(mod_name).resolve()}:{attr}"
    if "." not in mod_name:
        local = Path.cwd() / f"{mod_name}.py"
        if local.is_file():
            return f"{local.resolve()}:{attr}"
    try:
        spec = importlib.util.find_spec(mod_name)
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin and "." not in mod_name \
            and Path(spec.origin).parent == Path.cwd():
        return f"{Path(spec.origin).resolve()}:{attr}"
    return target


def vocab_size(model: Any) -> int | None:
    """The vocabulary size of a language model: ``model.config.vocab_size`` (Hugging Face),
    else ``num_embeddings`` of its first ``nn.Embedding``; None if it has neither."""
    cfg = getattr(model, "config", None)
    v = getattr(cfg, "vocab_size", None)
    if isinstance(v, int) and v > 0:
        return v
    for m in model.modules():
        if isinstance(m, torch.nn.Embedding):
            return int(m.num_embeddings)
    return None


def make_inputs(shapes: Sequence[tuple[int, ...]], dtypes: Sequence[Any], device: Any,
                high: int = 2) -> tuple[Any, ...]:
    """Random inputs: ``randn`` for floating dtypes, ``randint(0, high)`` for integer ones,
    random booleans for bool.

    Args:
        shapes: one shape per positional input.
        dtypes: one dtype per input, or one for all.
        device: where to put them.
        high: exclusive upper bound of integer inputs (token ids: the vocabulary size).

    Raises:
        ProfileError: the number of dtypes is neither 1 nor the number of shapes.
    """
    if len(dtypes) == 1:
        dtypes = list(dtypes) * len(shapes)
    if len(dtypes) != len(shapes):
        raise ProfileError(f"{len(dtypes)} input dtypes for {len(shapes)} input shapes; give "
                           "one dtype for all or one per input")
    out = []
    for shp, dt in zip(shapes, dtypes, strict=True):
        if dt == torch.bool:
            out.append(torch.randint(0, 2, shp, device=device).bool())
        elif dt.is_floating_point or dt.is_complex:
            out.append(torch.randn(shp, dtype=dt, device=device))
        else:
            out.append(torch.randint(0, max(int(high), 1), shp, dtype=dt, device=device))
    return tuple(out)


def build_from_factory(
    target: str,
    input_shapes: Sequence[str | Sequence[int]] = (),
    *,
    input_dtypes: Sequence[str] | None = None,
    input_high: int | None = None,
    params: Mapping[str, Any] | None = None,
    device: str = "cpu",
    seed: int = 0,
    fake: bool = False,
) -> tuple[Any, Any, Callable[..., Any] | None]:
    """Build ``(model, inputs, loss_fn)`` from a user's factory, as ``slackopt profile`` does.

    The factory contract: ``FACTORY(**params)`` returns either a ``torch.nn.Module`` or a
    dict with ``"model"`` (the module) and optionally ``"loss_fn"``
    (``loss_fn(output, *inputs) -> scalar tensor``; default :func:`default_loss`) and
    ``"make_inputs"`` (``make_inputs(shapes, device) ->`` a sequence of tensors or a dict
    of keyword arguments, e.g. a Hugging Face batch with ``labels``; default
    :func:`make_inputs` from `input_shapes`, `input_dtypes` and `input_high`). The model is
    moved to `device` and put in ``train()`` mode; ``torch.manual_seed(seed)`` runs before
    the factory is called and again before the inputs are made, so the same arguments give
    the same model and inputs (run a plan on what was profiled by calling this again).

    A target ``hf:PATH`` builds a Hugging Face model from its config alone (PATH a
    ``config.json`` or its folder; read with ``AutoConfig``, nothing downloaded) with the
    Auto class of its ``architectures`` (``AutoModelForCausalLM.from_config`` for
    ``*ForCausalLM`` / ``*LMHeadModel``, ``AutoModelForMaskedLM`` for ``*ForMaskedLM``),
    in the config's dtype and with the attention implementation transformers selects for
    it (SDPA where the model supports it); the inputs are a batch ``{"input_ids",
    "labels"}`` of one shape BxS, and the loss is the model's own.

    Args:
        target: ``MODULE:FACTORY`` (see :func:`load_factory`) or ``hf:PATH``.
        input_shapes: one shape per positional model input ("4x128" or a tuple).
        input_dtypes: one dtype name for all inputs or one per input; default "float32".
        input_high: exclusive upper bound of integer inputs; default the model's
            vocabulary (:func:`vocab_size`), required for integer inputs of a model
            without one.
        params: keyword arguments for the factory; for ``hf:`` fields of the config to
            override (``num_hidden_layers=1``).
        device: "cpu", "cuda", "cuda:1", ...
        seed: the torch seed.
        fake: build the model and the inputs under a fresh ``FakeTensorMode``
            (``torch._subclasses.fake_tensor``): shapes, dtypes and storages without data,
            whatever the size; :func:`profile_step` then profiles it with roofline timing.

    Returns:
        The module, the inputs (a tuple, or a dict of keyword arguments from make_inputs)
        and the loss function (None: the default loss).

    Raises:
        ProfileError: a bad target, factory result, shape, dtype, device or config; a
            make_inputs that fails without input shapes (give ``--input-shape``).
    """
    params = dict(params or {})
    shapes = [s if isinstance(s, tuple) else parse_shape(s) if isinstance(s, str)
              else tuple(int(d) for d in s) for s in input_shapes]
    dtypes = [parse_dtype(d) for d in (input_dtypes or ())] or [torch.float32]
    if target.startswith(HF_PREFIX):
        hf_path = target[len(HF_PREFIX):]

        def fn(**kw: Any) -> Any:
            return hf_factory(hf_path, kw)
    else:
        fn = load_factory(target)
    try:
        dev = torch.device(device)
    except RuntimeError as e:
        raise ProfileError(f"device '{device}': {e}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ProfileError(f"device '{device}' asked for but CUDA is not available")
    mode = FakeTensorMode() if fake else None
    with within(mode), warnings.catch_warnings():
        # copy.deepcopy of a fake module (nn.TransformerEncoder clones its layer) warns
        # about the fake data pointer; _adopt_fakes then re-makes those tensors.
        warnings.filterwarnings("ignore", "Accessing the data pointer of FakeTensor")
        return _build(target, fn, params, shapes, dtypes, input_high, dev, seed, mode)


def _adopt_fakes(model: Any, mode: Any) -> None:
    """Make every parameter and buffer of `model` a fake tensor of `mode`, in place.

    A module built under `mode` has such tensors already, except those that
    ``copy.deepcopy`` made (``nn.TransformerEncoder`` clones its layer; the copy of a fake
    tensor belongs to a new fake mode) and real tensors the factory took from elsewhere.
    Each becomes a fake tensor of `mode` with the same shape, strides, dtype, device and
    ``requires_grad`` (no values: none are needed); a tensor shared by two modules stays
    shared. Source: ``FakeTensorConverter.from_meta_and_device``
    (``torch._subclasses.fake_tensor``).
    """
    memo: dict[int, Any] = {}

    def ours(t: Any) -> bool:
        return isinstance(t, FakeTensor) and t.fake_mode is mode

    def adopt(t: Any) -> Any:
        if id(t) not in memo:
            meta = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
            new = mode.fake_tensor_converter.from_meta_and_device(mode, meta, t.device)
            memo[id(t)] = (torch.nn.Parameter(new, requires_grad=t.requires_grad)
                           if isinstance(t, torch.nn.Parameter) else new)
        return memo[id(t)]

    for mod in model.modules():
        for table in (mod._parameters, mod._buffers):
            for n, t in list(table.items()):
                if t is not None and not ours(t):
                    table[n] = adopt(t)


def _on(have: Any, want: Any) -> bool:
    """Tensor device `have` is device `want` ("cuda" matches any CUDA index)."""
    return have.type == want.type and (want.index is None or have.index == want.index)


def _build(target: str, fn: Callable[..., Any], params: Mapping[str, Any],
           shapes: list[tuple[int, ...]], dtypes: list[Any], input_high: int | None,
           dev: Any, seed: int, mode: Any | None
           ) -> tuple[Any, Any, Callable[..., Any] | None]:
    """The factory call and the inputs of :func:`build_from_factory` (inside `mode`, a
    FakeTensorMode, if not None)."""
    torch.manual_seed(seed)
    try:
        made = fn(**params)
    except SlackoptError:
        raise
    except Exception as e:
        raise ProfileError(f"factory '{target}' raised {type(e).__name__}: {e}") from None
    loss_fn = None
    inputs_fn = None
    if isinstance(made, Mapping):
        if "model" not in made:
            raise ProfileError(f"factory '{target}' returned a dict without a 'model' key")
        model, loss_fn, inputs_fn = made["model"], made.get("loss_fn"), made.get("make_inputs")
        unknown = set(made) - {"model", "loss_fn", "make_inputs"}
        if unknown:
            raise ProfileError(f"factory '{target}' returned unknown keys "
                               f"{', '.join(sorted(map(str, unknown)))}; allowed: model, "
                               "loss_fn, make_inputs")
    else:
        model = made
    if not isinstance(model, torch.nn.Module):
        raise ProfileError(f"factory '{target}' must return a torch.nn.Module or a dict with "
                           f"'model', got {type(model).__name__}")
    if mode is not None:
        _adopt_fakes(model, mode)
    if any(not _on(t.device, dev) for t in (*model.parameters(), *model.buffers())):
        model = model.to(dev)  # only when needed: a fake module cannot swap its tensors
    model = model.train()
    torch.manual_seed(seed)
    if inputs_fn is not None:
        try:
            made_in = inputs_fn(shapes, dev)
            inputs = (dict(made_in) if isinstance(made_in, Mapping)
                      else as_input_tuple(made_in))
        except SlackoptError:
            raise
        except Exception as e:
            if not shapes:
                raise ProfileError(
                    f"the make_inputs of '{target}' needs input shapes: give --input-shape "
                    f"(e.g. -i 4x128, once per input) ({type(e).__name__}: {e})") from None
            raise ProfileError(f"make_inputs of '{target}' raised {type(e).__name__}: {e}") \
                from None
    else:
        if not shapes:
            raise ProfileError("give the model's input shapes (--input-shape 4x128, once per "
                               "positional input) or a make_inputs in the factory's dict")
        if input_high is None and any(not (d.is_floating_point or d.is_complex)
                                      and d != torch.bool for d in dtypes):
            input_high = vocab_size(model)
            if input_high is None:
                raise ProfileError(
                    "integer inputs need --input-high N (token ids are drawn from [0, N)): "
                    "the model has no config.vocab_size and no nn.Embedding to take it from")
        inputs = make_inputs(shapes, dtypes, dev, input_high or 2)
    return model, inputs, loss_fn



__all__ = ["build_from_factory", "load_factory", "make_inputs", "parse_dtype", "parse_shape",
           "resolve_factory", "vocab_size"]
