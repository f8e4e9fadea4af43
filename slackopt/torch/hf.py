"""Hugging Face models from their configuration alone (``hf:PATH``, no download).

:func:`hf_factory` reads a ``config.json`` (or its folder) with transformers'
``AutoConfig`` and builds the model with the Auto class of its ``architectures``; it is
the factory :func:`slackopt.torch.factories.build_from_factory` calls for an ``hf:``
target. Before transformers reads a config, :func:`check_hf_config` refuses what would
make it fail deep inside the model or silently pick a default.

Source: transformers documentation, ``PretrainedConfig`` and the Auto classes
(``from_config``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from slackopt.torch.errors import ProfileError

HF_PREFIX = "hf:"
"""A target ``hf:PATH`` names a Hugging Face config (a ``config.json`` or its folder)."""

# Hugging Face architecture suffixes -> the Auto class that builds them (token-in models
# whose labels are the input ids).
_HF_AUTO = (("ForCausalLM", "AutoModelForCausalLM"), ("LMHeadModel", "AutoModelForCausalLM"),
            ("ForMaskedLM", "AutoModelForMaskedLM"))


HF_SIZE_FIELDS = ("hidden_size", "num_hidden_layers", "num_attention_heads",
                  "intermediate_size", "vocab_size")
"""Config fields that fix the model's size. Each one the architecture's config class has
(under the name it maps it to: ``n_embd`` for ``hidden_size`` on GPT-2) must be in the
file or given with --param, as an integer >= 1: transformers would otherwise build its
class's example size (4096 wide for Llama and Qwen2) without a word."""


def check_hf_config(raw: Mapping[str, Any], overrides: Mapping[str, Any], file: Any) -> None:
    """Refuse, before transformers reads it, a config whose ``model_type`` transformers
    does not know, that lacks one of the :data:`HF_SIZE_FIELDS` its architecture has, or
    whose size fields, in the file or in the `overrides` of --param, are not integers >=
    1: transformers would build a default size, fail deep inside the model (a negative
    dimension, a zero division) or print pages of text.

    Args:
        raw: the config file's fields (``PretrainedConfig.get_config_dict``).
        overrides: the --param fields.
        file: the config file (for messages).

    Raises:
        ProfileError: one line naming `file`, the field and the fix.
    """
    from transformers import CONFIG_MAPPING

    kind = raw.get("model_type")
    if not isinstance(kind, str) or kind not in CONFIG_MAPPING:
        said = "has no field model_type" if kind is None else (
            f"field model_type {kind!r} is not a model type this transformers knows")
        raise ProfileError(f"'{file}' {said}; fix: set model_type to the model's family "
                           "(llama, gpt2, mistral, ...), or upgrade transformers for a newer "
                           "one")
    names = CONFIG_MAPPING[kind].attribute_map  # hidden_size -> n_embd on GPT-2
    sizes = [names.get(f, f) for f in HF_SIZE_FIELDS]
    checks = [(raw[k], f"'{file}': field {k} is {raw[k]!r}; fix: an integer >= 1 in the file")
              for k in sizes if k in raw]
    checks += [(v, f"--param {k}={v!r}: field {names.get(k, k)} of '{file}' must be an "
                   "integer >= 1; fix: give one")
               for k, v in overrides.items() if names.get(k, k) in sizes]
    for v, bad in checks:
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ProfileError(bad)
    try:
        example = CONFIG_MAPPING[kind]()  # the class's defaults: its example model
    except Exception:  # a config class that needs arguments has no silent defaults
        return
    given = set(raw) | {names.get(k, k) for k in overrides}
    for f, k in zip(HF_SIZE_FIELDS, sizes, strict=True):
        if k not in given and hasattr(example, f):
            raise ProfileError(
                f"'{file}' has no field {k}, which the {kind} architecture needs (transformers "
                f"would build its default, {k}={getattr(example, f)!r}, without a word); fix: "
                f"add {k} to the file, or give --param {k}=N")


def hf_factory(path: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``{"model", "make_inputs"}`` for the Hugging Face config at `path` (see
    :func:`build_from_factory`); run under the caller's fake mode, if any."""
    from pathlib import Path

    try:
        import transformers
    except ImportError:
        raise ProfileError("hf: models need Hugging Face transformers: pip install "
                           "transformers") from None
    cfg_path = Path(path)
    if not path.strip() or not cfg_path.exists():
        raise ProfileError(f"Hugging Face config '{path}' not found (give a config.json or "
                           "the folder that holds one after hf:, e.g. "
                           "hf:instances/configs/llama-3-8b/config.json; a factory in a "
                           "module named hf is hf.py:FACTORY)")
    try:
        raw, _ = transformers.PretrainedConfig.get_config_dict(str(cfg_path),
                                                               local_files_only=True)
        check_hf_config(raw, overrides, cfg_path / "config.json" if cfg_path.is_dir()
                         else cfg_path)
        config = transformers.AutoConfig.from_pretrained(str(cfg_path), local_files_only=True)
    except ProfileError:
        raise
    except Exception as e:
        raise ProfileError(f"cannot read the Hugging Face config '{path}': "
                           f"{type(e).__name__}: {' '.join(str(e).split())}") from None
    for k, v in overrides.items():
        if not hasattr(config, k):
            raise ProfileError(f"the {type(config).__name__} of '{path}' has no field '{k}' "
                               "(--param sets fields of the config for hf: models)")
        setattr(config, k, v)
    archs = list(getattr(config, "architectures", None) or [])
    auto = "AutoModelForCausalLM"
    if archs:
        found = [a for suffix, a in _HF_AUTO if archs[0].endswith(suffix)]
        if not found:
            raise ProfileError(f"'{path}': architecture {archs[0]} is not a causal or masked "
                               "language model (supported: *ForCausalLM, *LMHeadModel, "
                               "*ForMaskedLM)")
        auto = found[0]
    model = getattr(transformers, auto).from_config(config)
    vocab = int(config.vocab_size)

    def make(shapes: Sequence[tuple[int, ...]], device: Any) -> dict[str, Any]:
        if len(shapes) != 1 or len(shapes[0]) != 2:
            raise ProfileError(f"hf: models take one input shape BxS (batch x tokens, e.g. "
                               f"--input-shape 1x8192), got {len(shapes)} shapes"
                               + (f" ({', '.join('x'.join(map(str, s)) for s in shapes)})"
                                  if shapes else ""))
        ids = torch.randint(0, vocab, shapes[0], device=device)
        return {"input_ids": ids, "labels": ids}

    return {"model": model, "make_inputs": make}



def hf_notes(model: Any, inputs: Any) -> list[str]:
    """What a profile of a Hugging Face model on these inputs should be read with.

    Args:
        model: the model :func:`hf_factory` built (its ``config``).
        inputs: its batch (``{"input_ids": B x S, ...}``).

    Returns:
        One line per finding: a sequence longer than the config's
        ``max_position_embeddings`` (``n_positions`` on GPT-2) is profiled as asked, but the
        model was not made for it (a learned position table has no rows for it; a rotary
        model runs it beyond its trained context). Empty when there is nothing to say.
    """
    cfg = getattr(model, "config", None)
    limit = getattr(cfg, "max_position_embeddings", None)
    ids = inputs.get("input_ids") if isinstance(inputs, Mapping) else None
    if isinstance(limit, bool) or not isinstance(limit, int) \
            or not isinstance(ids, torch.Tensor) or ids.dim() != 2:
        return []
    tokens = int(ids.shape[1])
    if tokens <= limit:
        return []
    return [f"{tokens} tokens per sequence (-i {'x'.join(map(str, ids.shape))}) exceed the "
            f"config's max_position_embeddings ({limit}): the step is profiled as asked, but "
            "the model was not made for sequences this long"]


__all__ = ["HF_PREFIX", "HF_SIZE_FIELDS", "check_hf_config", "hf_factory", "hf_notes"]
