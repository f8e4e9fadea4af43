"""Small PyTorch models for the profiler and runtime tests (imported only where torch is).

- :func:`encoder`: ``torch.nn.TransformerEncoder`` as PyTorch ships it (its attention goes
  through ``scaled_dot_product_attention``).
- :class:`TinyGPT`: a GPT-style decoder written with ``torch.nn`` modules in the usual
  nanoGPT layout: token and position embeddings, pre-norm blocks with causal self-attention
  (explicit ``masked_fill`` + softmax over a registered causal-mask buffer), a GELU MLP,
  dropout, a final LayerNorm and a head tied to the token embedding.
- :func:`lm_loss`: next-token cross entropy, ``lm_loss(logits, idx)``.

Also a factory for the command-line test: :func:`gpt_factory`.
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
