"""Model factories of the benchmark suite (instances/bench/) that ``slackopt profile hf:``
does not build: an encoder-decoder (T5), an image classifier (ViT), the first, a middle
and the last stage of a pipeline-parallel Llama, a diffusion UNet (diffusers) and VGG-16
(PyTorch layers).

Each factory follows the contract of ``slackopt profile MODULE:FACTORY``
(:func:`slackopt.torch.build_from_factory`): it returns ``{"model", "make_inputs",
"loss_fn"}``; ``make_inputs(shapes, device)`` turns the ``-i`` shapes into the step's
inputs. Every model is built in bfloat16 (the training dtype of the suite) from a config
shipped in instances/configs/, so ``slackopt profile --fake`` traces it without
allocating weights. Example::

    slackopt profile --fake instances/bench/models.py:vit \\
        -p config=instances/configs/vit-huge-patch14/config.json -i 32 --gpu h100 -o vit.json

benchmarks/make_bench.py runs them for the suite; instances/bench/README.md says what
each instance is.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

DTYPE = torch.bfloat16


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    """Parameters created meanwhile are of `dtype` (what ``torch_dtype`` does for a
    Hugging Face model)."""
    was = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(was)


def _hf_config(config: str) -> Any:
    """A transformers config read from the config.json at `config` (nothing downloaded)."""
    import transformers

    return transformers.AutoConfig.from_pretrained(config, local_files_only=True)


def _hf_model(auto: str, cfg: Any) -> Any:
    """``transformers.<auto>.from_config(cfg)``, what ``slackopt profile hf:`` runs (the
    config's dtype, the attention transformers selects: SDPA where supported), without
    initialising the weights: their values do not change the step's operators and
    shapes, and ViT's truncated-normal initialisation reads values, which a fake tensor
    does not have. Tied weights are tied as ``from_config`` ties them."""
    import transformers
    from transformers.initialization import no_init_weights

    with no_init_weights():
        model = getattr(transformers, auto).from_config(cfg)
    model.tie_weights()  # (skipped with the initialisation: T5 ties its embeddings)
    return model


def _one_shape(shapes: Sequence[tuple[int, ...]], what: str, ndim: int) -> tuple[int, ...]:
    if len(shapes) != 1 or len(shapes[0]) != ndim:
        raise ValueError(f"give one input shape {what}")
    return shapes[0]


def _own_loss(out: Any, *args: Any, **kwargs: Any) -> Any:
    """The loss a wrapper module returns as its output."""
    return out


def t5(config: str) -> dict[str, Any]:
    """T5 (``T5ForConditionalGeneration``) from `config`, trained on a batch of
    ``-i BxS_enc -i BxS_dec``: encoder input ids and decoder labels (teacher forcing; the
    model shifts the labels right into the decoder inputs), its own cross-entropy loss.

    Args:
        config: path of a T5 config.json.

    Returns:
        The factory dict (model, make_inputs; the loss is the model's).
    """
    cfg = _hf_config(config)
    model = _hf_model("AutoModelForSeq2SeqLM", cfg)
    vocab = int(cfg.vocab_size)

    def make(shapes: Sequence[tuple[int, ...]], device: Any) -> dict[str, Any]:
        if len(shapes) != 2 or any(len(s) != 2 for s in shapes) or shapes[0][0] != shapes[1][0]:
            raise ValueError("give two shapes: -i BxS_enc -i BxS_dec (same batch B)")
        return {"input_ids": torch.randint(0, vocab, shapes[0], device=device),
                "labels": torch.randint(0, vocab, shapes[1], device=device)}

    return {"model": model, "make_inputs": make}


def vit(config: str) -> dict[str, Any]:
    """A ViT image classifier (``ViTForImageClassification``) from `config`, trained on
    ``-i B`` images of the config's size and channels with class labels, its own
    cross-entropy loss.

    Args:
        config: path of a ViT config.json (``num_labels`` classes).

    Returns:
        The factory dict (model, make_inputs; the loss is the model's).
    """
    cfg = _hf_config(config)
    model = _hf_model("AutoModelForImageClassification", cfg)

    def make(shapes: Sequence[tuple[int, ...]], device: Any) -> dict[str, Any]:
        (b,) = _one_shape(shapes, "B (images)", 1)
        px = torch.randn(b, cfg.num_channels, cfg.image_size, cfg.image_size, dtype=DTYPE,
                         device=device)
        return {"pixel_values": px,
                "labels": torch.randint(0, cfg.num_labels, (b,), device=device)}

    return {"model": model, "make_inputs": make}


class _FirstStage(nn.Module):
    """The first stage of a pipeline-parallel decoder: the token embedding and the first
    decoder layers, no final norm, head or loss. Its output goes to the next stage, whose
    gradient comes back: the step's "loss" is ``sum(h * g)`` with ``g`` the received
    gradient (an input), so backward starts from dL/dh = g as it does in the pipeline."""

    def __init__(self, body: nn.Module) -> None:
        super().__init__()
        self.body = body

    def forward(self, input_ids: torch.Tensor, grad_from_next: torch.Tensor) -> torch.Tensor:
        h = self.body(input_ids=input_ids).last_hidden_state
        return (h * grad_from_next).sum()


def llama_first_stage(config: str, layers: int) -> dict[str, Any]:
    """The first pipeline stage of a Llama (``LlamaModel`` of `config` cut to its first
    `layers` decoder layers, with the embedding, without the final RMSNorm and head),
    trained on ``-i BxS`` token ids of one microbatch (see :class:`_FirstStage`). Any
    decoder whose transformers base model has the Llama layout (``embed_tokens``,
    ``layers``, ``norm``) works the same: Mistral, Mixtral.

    Args:
        config: path of a Llama-layout config.json.
        layers: decoder layers in the stage (e.g. 10 = 80 layers / 8 stages).

    Returns:
        The factory dict (model, make_inputs, loss_fn).
    """
    cfg = _hf_config(config)
    cfg.num_hidden_layers = int(layers)
    body = _hf_model("AutoModel", cfg)
    body.norm = nn.Identity()  # the final norm belongs to the last stage
    vocab, hidden = int(cfg.vocab_size), int(cfg.hidden_size)

    def make(shapes: Sequence[tuple[int, ...]], device: Any) -> tuple[torch.Tensor, ...]:
        b, s = _one_shape(shapes, "BxS (microbatch x tokens)", 2)
        return (torch.randint(0, vocab, (b, s), device=device),
                torch.randn(b, s, hidden, dtype=DTYPE, device=device))

    return {"model": _FirstStage(body), "make_inputs": make, "loss_fn": _own_loss}


class _MiddleStage(nn.Module):
    """A middle stage (or model chunk) of a pipeline-parallel decoder: decoder layers
    only. Its input is the hidden state the previous stage sends (it requires grad: the
    backward ends with the gradient sent back); its output goes to the next stage, whose
    gradient ``g`` comes back as an input, so the step's "loss" is ``sum(h * g)``."""

    def __init__(self, body: nn.Module) -> None:
        super().__init__()
        self.body = body

    def forward(self, hidden: torch.Tensor, grad_from_next: torch.Tensor) -> torch.Tensor:
        h = self.body(inputs_embeds=hidden).last_hidden_state
        return (h * grad_from_next).sum()


def llama_middle_stage(config: str, layers: int) -> dict[str, Any]:
    """A middle pipeline stage of a Llama, or one model chunk of an interleaved schedule
    (``LlamaModel`` of `config` cut to `layers` decoder layers, without the embedding,
    the final RMSNorm and the head), trained on ``-i BxS``: one microbatch's hidden state
    from the previous stage (B x S x hidden, BF16, requiring grad) and the gradient of
    its output (see :class:`_MiddleStage`).

    Args:
        config: path of a Llama-layout config.json.
        layers: decoder layers in the stage or chunk (e.g. 5 = 80 layers / (8 stages x 2
            chunks)).

    Returns:
        The factory dict (model, make_inputs, loss_fn).
    """
    cfg = _hf_config(config)
    cfg.num_hidden_layers = int(layers)
    body = _hf_model("AutoModel", cfg)
    body.embed_tokens = None  # the first stage's
    body.norm = nn.Identity()  # the last stage's
    hidden = int(cfg.hidden_size)

    def make(shapes: Sequence[tuple[int, ...]], device: Any) -> tuple[torch.Tensor, ...]:
        b, s = _one_shape(shapes, "BxS (microbatch x tokens)", 2)
        return (torch.randn(b, s, hidden, dtype=DTYPE, device=device, requires_grad=True),
                torch.randn(b, s, hidden, dtype=DTYPE, device=device))

    return {"model": _MiddleStage(body), "make_inputs": make, "loss_fn": _own_loss}


class _LastStage(nn.Module):
    """The last stage of a pipeline-parallel decoder: the last decoder layers, the final
    norm, the head and the loss. Its input is the hidden state the previous stage sends
    (it requires grad: the stage's backward ends with the gradient it sends back)."""

    def __init__(self, lm: nn.Module) -> None:
        super().__init__()
        self.lm = lm

    def forward(self, hidden: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.lm(inputs_embeds=hidden, labels=labels).loss


def llama_last_stage(config: str, layers: int) -> dict[str, Any]:
    """The last pipeline stage of a Llama (``LlamaForCausalLM`` of `config` cut to its
    last `layers` decoder layers, the final RMSNorm, the head and the model's
    cross-entropy, without the token embedding: the first stage's), trained on ``-i
    BxS``: one microbatch's hidden state from the previous stage (B x S x hidden, BF16,
    requiring grad) and its labels (see :class:`_LastStage`).

    Args:
        config: path of a Llama-layout config.json.
        layers: decoder layers in the stage (e.g. 10 = 80 layers / 8 stages).

    Returns:
        The factory dict (model, make_inputs, loss_fn).
    """
    cfg = _hf_config(config)
    cfg.num_hidden_layers = int(layers)
    lm = _hf_model("AutoModelForCausalLM", cfg)
    lm.model.embed_tokens = None  # the first stage's; the input is the hidden state
    vocab, hidden = int(cfg.vocab_size), int(cfg.hidden_size)

    def make(shapes: Sequence[tuple[int, ...]], device: Any) -> tuple[torch.Tensor, ...]:
        b, s = _one_shape(shapes, "BxS (microbatch x tokens)", 2)
        return (torch.randn(b, s, hidden, dtype=DTYPE, device=device, requires_grad=True),
                torch.randint(0, vocab, (b, s), device=device))

    return {"model": _LastStage(lm), "make_inputs": make, "loss_fn": _own_loss}


class _Denoiser(nn.Module):
    """One diffusion training step's loss: the UNet predicts the noise added to the
    latents; the loss is the mean squared error to that noise (the epsilon objective of
    Ho et al. 2020, as Stable Diffusion trains)."""

    def __init__(self, unet: nn.Module) -> None:
        super().__init__()
        self.unet = unet

    def forward(self, noisy: torch.Tensor, timestep: torch.Tensor, text: torch.Tensor,
                noise: torch.Tensor) -> torch.Tensor:
        pred = self.unet(noisy, timestep, encoder_hidden_states=text).sample
        return nn.functional.mse_loss(pred.float(), noise.float())


def sd_unet(config: str, text_tokens: int = 77) -> dict[str, Any]:
    """A diffusion UNet (diffusers' ``UNet2DConditionModel``) from `config`, trained on
    ``-i B`` noisy latents of the config's ``sample_size`` with text conditioning of
    `text_tokens` x ``cross_attention_dim`` (a CLIP text encoder's output, as an input:
    the text encoder is frozen in Stable Diffusion training).

    Args:
        config: path of a diffusers UNet config.json.
        text_tokens: length of the text conditioning (77 for CLIP).

    Returns:
        The factory dict (model, make_inputs, loss_fn).
    """
    from diffusers import UNet2DConditionModel

    cfg = json.loads(Path(config).read_text())
    with _default_dtype(DTYPE):
        unet = UNet2DConditionModel.from_config(cfg)
    c, side, ctx = cfg["in_channels"], cfg["sample_size"], cfg["cross_attention_dim"]

    def make(shapes: Sequence[tuple[int, ...]], device: Any) -> tuple[torch.Tensor, ...]:
        (b,) = _one_shape(shapes, "B (latents)", 1)
        return (torch.randn(b, c, side, side, dtype=DTYPE, device=device),
                torch.randint(0, 1000, (b,), device=device),
                torch.randn(b, text_tokens, ctx, dtype=DTYPE, device=device),
                torch.randn(b, c, side, side, dtype=DTYPE, device=device))

    return {"model": _Denoiser(unet), "make_inputs": make, "loss_fn": _own_loss}


VGG16_LAYERS = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
                512, 512, 512, "M")
"""VGG-16, configuration D of Simonyan and Zisserman (2015), Table 1: 3x3 convolutions
(stride 1, padding 1) and 2x2 max pools ("M")."""


def vgg16(num_classes: int = 1000, image: int = 224) -> dict[str, Any]:
    """VGG-16 (configuration D) with in-place ReLUs and no dropout, the network of the
    SlackSwap paper's VGG-16 workload (docs/workloads.md: the image, 13 ReLU outputs,
    5 max-pool outputs, fc6/fc7 ReLU outputs and the logits saved), trained on ``-i B``
    images with cross-entropy.

    Args:
        num_classes: classes of the last layer.
        image: image side in pixels (224).

    Returns:
        The factory dict (model, make_inputs, loss_fn).
    """
    layers: list[nn.Module] = []
    c = 3
    with _default_dtype(DTYPE):
        for v in VGG16_LAYERS:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(c, int(v), 3, padding=1), nn.ReLU(inplace=True)]
                c = int(v)
        side = image // 32
        model = nn.Sequential(*layers, nn.Flatten(),
                              nn.Linear(512 * side * side, 4096), nn.ReLU(inplace=True),
                              nn.Linear(4096, 4096), nn.ReLU(inplace=True),
                              nn.Linear(4096, num_classes))

    def make(shapes: Sequence[tuple[int, ...]], device: Any) -> tuple[torch.Tensor, ...]:
        (b,) = _one_shape(shapes, "B (images)", 1)
        return (torch.randn(b, 3, image, image, dtype=DTYPE, device=device),
                torch.randint(0, num_classes, (b,), device=device))

    def loss(logits: torch.Tensor, images: torch.Tensor, labels: torch.Tensor) -> Any:
        return nn.functional.cross_entropy(logits.float(), labels)

    return {"model": _Classifier(model), "make_inputs": make, "loss_fn": loss}


class _Classifier(nn.Module):
    """Runs the network on the images only (the labels are the loss's)."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.net(images)
