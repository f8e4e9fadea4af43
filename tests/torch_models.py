"""Small PyTorch models for the profiler and runtime tests (imported only where torch is).

- :func:`encoder`: ``torch.nn.TransformerEncoder`` as PyTorch ships it (its attention goes
  through ``scaled_dot_product_attention``).
- :class:`TinyGPT`: a GPT-style decoder written with ``torch.nn`` modules in the usual
  nanoGPT layout: token and position embeddings, pre-norm blocks with causal self-attention
  (explicit ``masked_fill`` + softmax over a registered causal-mask buffer), a GELU MLP,
  dropout, a final LayerNorm and a head tied to the token embedding.
- :func:`lm_loss`: next-token cross entropy, ``lm_loss(logits, idx)``.

- :class:`TinyResNet`: torchvision's ResNet-18 structure (basic blocks, BatchNorm,
  in-place ReLU, a strided downsample) scaled down.
- :class:`HFStyleLM`: a Hugging Face causal LM's calling convention (keyword inputs,
  ``labels=``, an output with ``loss``) around :class:`TinyGPT`; :func:`hf_batch`.

Factories for the command-line tests: :func:`gpt_factory`, :func:`vision_factory`,
:func:`hf_factory`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def encoder(d_model: int = 32, nhead: int = 4, ff: int = 64, layers: int = 2,
            dropout: float = 0.0) -> nn.Module:
    """``nn.TransformerEncoder`` of `layers` post-norm layers (batch first)."""
    layer = nn.TransformerEncoderLayer(d_model=d_model, nhead=nhead, dim_feedforward=ff,
                                       dropout=dropout, batch_first=True)
    return nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)


class CausalSelfAttention(nn.Module):
    def __init__(self, d: int, heads: int, block: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.attn_drop = nn.Dropout(dropout)
        self.resid_drop = nn.Dropout(dropout)
        self.register_buffer("mask", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        att = self.attn_drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.resid_drop(self.proj(y))


class Block(nn.Module):
    def __init__(self, d: int, heads: int, block: int, dropout: float) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads, block, dropout)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d),
                                 nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int = 64, block: int = 16, d: int = 32, heads: int = 4,
                 layers: int = 2, dropout: float = 0.1) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(block, d)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(d, heads, block, dropout) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight  # weight tying: one parameter, two uses

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.drop(self.tok(idx) + self.pos(pos))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x))


def lm_loss(logits: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Next-token cross entropy."""
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), idx[:, 1:].reshape(-1))


def gpt_factory(layers: int = 2, dropout: float = 0.0) -> dict:
    """Factory for ``slackopt profile tests/torch_models.py:gpt_factory``."""
    return {"model": TinyGPT(layers=layers, dropout=dropout), "loss_fn": lm_loss,
            "make_inputs": lambda shapes, device: (torch.randint(0, 64, shapes[0],
                                                                 device=device),)}


def encoder_factory() -> nn.Module:
    """Factory returning a bare module (inputs from --input-shape, default loss)."""
    return encoder()


class BasicBlock(nn.Module):
    """A ResNet basic block in torchvision's layout: conv3x3-BN-ReLU-conv3x3-BN, plus the
    identity (or a strided 1x1 conv + BN when the shape changes), then ReLU (in place)."""

    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idt = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + idt)


class TinyResNet(nn.Module):
    """torchvision's ResNet-18 structure scaled down: stem conv-BN-ReLU-maxpool, basic-block
    stages (the second strided, with a downsample), global average pool, linear head."""

    def __init__(self, width: int = 8, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False),
                                  nn.BatchNorm2d(width), nn.ReLU(inplace=True),
                                  nn.MaxPool2d(2))
        self.layer1 = nn.Sequential(BasicBlock(width, width), BasicBlock(width, width))
        self.layer2 = nn.Sequential(BasicBlock(width, 2 * width, 2),
                                    BasicBlock(2 * width, 2 * width))
        self.fc = nn.Linear(2 * width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class LMConfig:
    """The part of a Hugging Face config the profiler reads (``vocab_size``)."""

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size


class HFStyleLM(nn.Module):
    """The calling convention of a Hugging Face causal LM, without the library:
    ``model(input_ids=..., attention_mask=..., labels=...)`` returns a dict with ``loss``
    (next-token cross entropy over unmasked positions) and ``logits``; ``config.vocab_size``
    names the vocabulary. Built around :class:`TinyGPT`."""

    def __init__(self, vocab: int = 64, layers: int = 2) -> None:
        super().__init__()
        self.config = LMConfig(vocab)
        self.gpt = TinyGPT(vocab=vocab, layers=layers, dropout=0.0)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None) -> dict:
        logits = self.gpt(input_ids)
        out = {"logits": logits}
        if labels is not None:
            tgt = labels[:, 1:].clone()
            if attention_mask is not None:
                tgt = tgt.masked_fill(attention_mask[:, 1:] == 0, -100)
            out["loss"] = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)),
                                          tgt.reshape(-1), ignore_index=-100)
        return out


def hf_batch(vocab: int = 64, shape: tuple[int, int] = (2, 16)) -> dict:
    """A Hugging Face style batch: input_ids from the vocabulary, a padding mask, labels."""
    ids = torch.randint(0, vocab, shape)
    mask = torch.ones(shape, dtype=torch.long)
    mask[0, -3:] = 0
    return {"input_ids": ids, "attention_mask": mask, "labels": ids}


def vision_factory(width: int = 8) -> nn.Module:
    """Factory for ``slackopt profile tests/torch_models.py:vision_factory -i 2x3x16x16``."""
    return TinyResNet(width)


def hf_factory() -> dict:
    """Factory whose make_inputs returns keyword inputs (a Hugging Face batch)."""
    return {"model": HFStyleLM(), "make_inputs": lambda shapes, device: {
        k: v.to(device) for k, v in hf_batch(64, shapes[0] if shapes else (2, 16)).items()}}
