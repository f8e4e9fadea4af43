"""Transformer training iterations: GPT-2 XL, BERT-Large, a Llama-2-7B-style model, tiny.

One shared builder (:class:`_TransformerBuilder`) emits every architecture; the
differences are flags of :class:`Arch`: pre- or post-LN, LayerNorm or RMSNorm, dropout or
not, GeLU MLP or fused SwiGLU, causal or bidirectional attention, LM head or BERT's MLM head.

Source of every convention and number: docs/workloads.md ("Operator
conventions", "Saved tensors per layer", "Totals") and docs/model.md
("Transient buffers"). Units: bytes, FLOPs, seconds. Per-token byte counts below are for
BF16 (dtype 2 B); they scale with ``dtype_bytes`` except dropout masks (1 B/element), RNG
states (8 B) and the FlashAttention logsumexp (FP32, 4 B per head and token).

Operator model (all ops timed by :func:`slackopt.hardware.roofline_s`):

- GEMM [T, K] x [K, N_out]: 2*T*K*N_out FLOPs at 75% of peak, bytes = inputs + output +
  weights. Backward: ``.dgrad`` and ``.wgrad``, each with the forward FLOPs.
- FlashAttention: 4*s^2*h*b FLOPs (halved if causal) at 62%; backward 2.5x at 48%. It
  saves O + logsumexp as one tensor (``attn_out``). RoPE is fused (Llama).
- Memory-bound ops (85% of HBM) are charged bytes read + written per token:
  LayerNorm/RMSNorm 4h, dropout 5h (1-byte mask included), residual add 6h, GeLU
  2 x ffn x dtype (16h for ffn = 4h), fused SwiGLU 3 x ffn x dtype. Backward: norm 6h,
  GeLU 3 x ffn x dtype (24h), SwiGLU 5 x ffn x dtype, dropout 5h, and two residual-gradient
  accumulations per layer at 6h each.
- Embedding: a gather from ``tables`` embedding tables (GPT-2: token + position, 2;
  BERT: token + position + segment, 3; Llama: token, 1) plus the write of the sum:
  (tables + 1) x h x dtype per token, forward and backward (scatter-add). Not specified by
  the spec; it is 0.05% of GPT-2 XL's step.
- Loss (fused softmax cross-entropy): reads the logits (V x dtype per scored token);
  its backward reads them and writes their gradient (2 x V x dtype).
- A dropout op is ``random``; it produces its output, a 1-byte/element mask and an 8-byte
  RNG state. The mask's recipe re-runs a rebuild-only ``.regen`` op (launch + mask bytes
  written, rho 0.958 ps/B on the A100) that reads the RNG state.

Memory (docs/model.md, "Transient buffers"): tensors live from their producer's start to
their last reader's end, readers set by data flow. Forward temporaries are read by the
next op; each backward op writes its input's gradient (category "grad"); a
residual-gradient buffer of 2 x [N, h] is written by the backward op that produces the
gradient of the layer stack's output (final norm backward; BERT: the MLM dense's dgrad)
and read by every op of the layer backward that reads or accumulates the residual-stream
gradient, up to the first op after the stack (embedding dropout backward, or embedding
backward); the loss backward writes the logits gradient. Workspaces are 0. Multi-op
recipes hold one [N, h] intermediate (``transient_bytes``). With these the keep-all peak
P is A + the logits gradient, reached during the loss backward.

Blocks: every op of layer i (forward and backward, rebuild-only ones included) has
``layer = i``. Block i's input is the tensor ``L{i}.x`` (category "block_input"): it is
produced by the last op of block i-1 (or the embedding), so ``Instance.saved_layers``
reports i-1 for it; find block i's input as the "block_input" tensor read by a layer-i op.
The last block's output (final-norm input, or BERT's head input) has category
"block_output".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slackopt.hardware import ATTN_BWD_EFF, ATTN_FWD_EFF, GPU, Link
from slackopt.instance import Instance, Recipe
from slackopt.workloads._builder import (
    LSE_BYTES_PER_HEAD,
    MASK_BYTES_PER_ELEMENT,
    RNG_STATE_BYTES,
    GraphBuilder,
    WorkloadError,
    check_int,
    instance_name,
    make_meta,
    overrides_of,
    resolve_hardware,
)


@dataclass(frozen=True, slots=True)
class Arch:
    """Architecture flags of one transformer family.

    Attributes:
        key: registry name ("gpt2-xl").
        post_ln: BERT-style post-LN (True) or pre-LN (False).
        norm: "layernorm" or "rmsnorm".
        dropout: dropout after the attention projection, the MLP and the embedding.
        mlp: "gelu" (fc1 -> GeLU -> fc2) or "swiglu" (gate|up -> fused silu*mul -> down).
        causal: causal attention (FLOPs halved).
        head: "lm" (final norm + LM head over all tokens) or "mlm" (BERT's MLM transform
            and decoder over ``mlm_fraction`` of the tokens).
        tables: embedding tables gathered per token.
    """

    key: str
    post_ln: bool
    norm: str
    dropout: bool
    mlp: str
    causal: bool
    head: str
    tables: int


GPT2 = Arch("gpt2-xl", post_ln=False, norm="layernorm", dropout=True, mlp="gelu", causal=True,
            head="lm", tables=2)
BERT = Arch("bert-large", post_ln=True, norm="layernorm", dropout=True, mlp="gelu",
            causal=False, head="mlm", tables=3)
LLAMA = Arch("llama-7b", post_ln=False, norm="rmsnorm", dropout=False, mlp="swiglu",
             causal=True, head="lm", tables=1)
TINY = Arch("tiny", post_ln=False, norm="layernorm", dropout=True, mlp="gelu", causal=True,
            head="lm", tables=2)

DEFAULTS: dict[str, dict[str, Any]] = {
    "gpt2-xl": dict(layers=48, hidden=1600, heads=25, ffn=None, seq=1024, batch=8,
                    vocab=50257, dtype_bytes=None),
    "bert-large": dict(layers=24, hidden=1024, heads=16, ffn=None, seq=512, batch=16,
                       vocab=30522, dtype_bytes=None, mlm_fraction=0.15),
    "llama-7b": dict(layers=32, hidden=4096, heads=32, ffn=11008, seq=4096, batch=2,
                     vocab=32000, dtype_bytes=None),
    "tiny": dict(layers=2, hidden=64, heads=4, ffn=None, seq=32, batch=2, vocab=512,
                 dtype_bytes=None),
}
"""Default parameters per architecture (docs/workloads.md). ``dtype_bytes=None`` takes the
GPU's training dtype; ``ffn=None`` means 4 x hidden."""


def _resolve_params(arch: Arch, g: GPU, given: dict[str, Any]) -> dict[str, Any]:
    defaults = DEFAULTS[arch.key]
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise WorkloadError(
            f"workload '{arch.key}' has no parameter {', '.join(map(repr, unknown))}; "
            f"parameters: {', '.join(defaults)}")
    p = dict(defaults)
    p.update({k: v for k, v in given.items() if v is not None})
    for k in ("layers", "hidden", "heads", "seq", "batch", "vocab"):
        p[k] = check_int(k, p[k])
    p["ffn"] = check_int("ffn", 4 * p["hidden"] if p["ffn"] is None else p["ffn"])
    p["dtype_bytes"] = check_int("dtype_bytes", p["dtype_bytes"] if p["dtype_bytes"] is not None
                                 else g.dtype_bytes)
    if p["hidden"] % p["heads"]:
        raise WorkloadError(
            f"hidden size {p['hidden']} is not a multiple of the number of heads {p['heads']}")
    if "mlm_fraction" in p:
        f = p["mlm_fraction"]
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f <= 1:
            raise WorkloadError(f"parameter 'mlm_fraction' must be in (0, 1], got {f!r}")
        p["mlm_fraction"] = float(f)
    p["causal"] = arch.causal
    return p


class _TransformerBuilder:
    """Emits one transformer iteration into a :class:`GraphBuilder`."""

    def __init__(self, arch: Arch, p: dict[str, Any], g: GPU) -> None:
        self.a, self.p, self.g = arch, p, g
        self.b = GraphBuilder(g)
        self.L, self.h, self.ffn = p["layers"], p["hidden"], p["ffn"]
        self.N = p["seq"] * p["batch"]
        self.dt = p["dtype_bytes"]
        self.nk = "layernorm" if arch.norm == "layernorm" else "rmsnorm"
        self.nn = "ln" if arch.norm == "layernorm" else "rms"

    # ---------------------------------------------------------------- sizes
    def act(self, width: int, tokens: int | None = None) -> int:
        """Bytes of a [tokens, width] activation in the training dtype."""
        return (self.N if tokens is None else tokens) * width * self.dt

    @property
    def hN(self) -> int:
        return self.act(self.h)

    # ---------------------------------------------------------------- op helpers
    def gemm(self, name: str, layer: int, k: int, n_out: int, reads: list[str],
             tokens: int | None = None) -> str:
        t = self.N if tokens is None else tokens
        flops = 2.0 * t * k * n_out
        nbytes = (t * k + t * n_out + k * n_out) * self.dt
        return self.b.op(name, "fwd", kind="gemm", layer=layer, flops=flops, bytes_moved=nbytes,
                         reads=reads)

    def gemm_bwd(self, name: str, layer: int, k: int, n_out: int, grad_in: str,
                 saved_in: str, grad_out: str | None, tokens: int | None = None,
                 grad_out_bytes: int | None = None) -> None:
        """``name.dgrad`` (reads ``grad_in`` -> writes tensor ``grad_out``, by default a
        [tokens, k] gradient) then ``name.wgrad`` (reads ``grad_in`` and the saved input)."""
        t = self.N if tokens is None else tokens
        flops = 2.0 * t * k * n_out
        nbytes = (t * k + t * n_out + k * n_out) * self.dt
        b = self.b
        d = b.op(f"{name}.dgrad", "bwd", kind="gemm", layer=layer, flops=flops,
                 bytes_moved=nbytes, reads=[grad_in])
        if grad_out is not None:
            size = self.act(k) if grad_out_bytes is None else grad_out_bytes
            b.tensor(grad_out, size, d, category="grad")
        b.op(f"{name}.wgrad", "bwd", kind="gemm", layer=layer, flops=flops, bytes_moved=nbytes,
             reads=[grad_in, saved_in])

    def attention(self, name: str, layer: int, qkv: str) -> str:
        p = self.p
        flops = 4.0 * p["seq"] ** 2 * self.h * p["batch"] * (0.5 if self.a.causal else 1.0)
        nbytes = self.act(4 * self.h) + self.N * p["heads"] * LSE_BYTES_PER_HEAD
        return self.b.op(name, "fwd", kind="attention", layer=layer, flops=flops,
                         bytes_moved=nbytes, efficiency=ATTN_FWD_EFF, reads=[qkv])

    def attention_bwd(self, name: str, layer: int, reads: list[str]) -> str:
        p = self.p
        flops = 2.5 * 4.0 * p["seq"] ** 2 * self.h * p["batch"] * (0.5 if self.a.causal else 1.0)
        nbytes = self.act(8 * self.h) + self.N * p["heads"] * LSE_BYTES_PER_HEAD
        return self.b.op(f"{name}.bwd", "bwd", kind="attention", layer=layer, flops=flops,
                         bytes_moved=nbytes, efficiency=ATTN_BWD_EFF, reads=reads)

    def norm(self, name: str, layer: int, x: str) -> str:
        return self.b.mem_op(name, "fwd", kind=self.nk, layer=layer,
                             bytes_moved=2 * self.hN, reads=[x])

    def norm_bwd(self, name: str, layer: int, reads: list[str]) -> str:
        return self.b.mem_op(f"{name}.bwd", "bwd", kind=self.nk, layer=layer,
                             bytes_moved=3 * self.hN, reads=reads)

    def add(self, name: str, layer: int, a: str, c: str) -> str:
        return self.b.mem_op(name, "fwd", kind="add", layer=layer, bytes_moved=3 * self.hN,
                             reads=[a, c])

    def res_acc(self, name: str, layer: int, reads: list[str]) -> str:
        return self.b.mem_op(name, "bwd", kind="add", layer=layer, bytes_moved=3 * self.hN,
                             reads=reads)

    def dropout(self, name: str, layer: int, x: str, out: str, out_category: str,
                out_recipe: Recipe | None = None) -> tuple[str, str, str]:
        """Dropout op + its output, mask and RNG state, and the mask's regeneration op.
        Returns (output, mask, rng) tensor names."""
        b = self.b
        mask_b = self.N * self.h * MASK_BYTES_PER_ELEMENT
        op = b.mem_op(name, "fwd", kind="dropout", layer=layer,
                      bytes_moved=2 * self.hN + mask_b, reads=[x], random=True)
        b.tensor(out, self.hN, op, category=out_category, recipe=out_recipe)
        rng = b.tensor(f"{name}.rng", RNG_STATE_BYTES, op, category="rng_state")
        regen = b.mem_op(f"{name}.regen", "rebuild", kind="rng_regen", layer=layer,
                         bytes_moved=mask_b)
        mask = b.tensor(f"{name}.mask", mask_b, op, category="mask",
                        recipe=Recipe((regen,), (rng,)))
        return out, mask, rng

    def dropout_bwd(self, name: str, layer: int, grad: str, mask: str, rng: str,
                    grad_out: str) -> str:
        b = self.b
        mask_b = self.N * self.h * MASK_BYTES_PER_ELEMENT
        op = b.mem_op(f"{name}.bwd", "bwd", kind="dropout", layer=layer,
                      bytes_moved=2 * self.hN + mask_b, reads=[grad, mask, rng])
        b.tensor(grad_out, self.hN, op, category="grad")
        return op

    # ---------------------------------------------------------------- forward
    def embedding(self) -> str:
        """Embedding (and, for BERT, its LayerNorm; with dropout, its dropout).
        Returns the name of block 0's input."""
        b, a, hN = self.b, self.a, self.hN
        emb = b.mem_op("emb", "fwd", kind="embedding", layer=-1,
                       bytes_moved=(a.tables + 1) * hN)
        x0 = "L0.x"
        if a.post_ln:  # BERT: sum -> LayerNorm (input saved) -> dropout -> block input
            s = b.tensor("emb_out", hN, emb, category="embedding", recipe=Recipe((emb,), ()))
            ln = self.norm("emb.ln", -1, s)
            lo = b.tensor("emb.ln_out", hN, ln, category="temp")
            self.dropout("emb.drop", -1, lo, x0, "block_input",
                         out_recipe=Recipe(("emb.ln", "emb.drop"), (s, "emb.drop.mask"), hN))
        elif a.dropout:
            e = b.tensor("emb_out", hN, emb, category="temp")
            self.dropout("emb.drop", -1, e, x0, "block_input")
        else:
            b.tensor(x0, hN, emb, category="block_input")
        return x0

    def pre_ln_layer(self, i: int, x: str, out: str, out_cat: str) -> None:
        """One pre-LN block (GPT-2, Llama, tiny) from block input ``x`` to ``out``."""
        b, h, hN, nn = self.b, self.h, self.hN, self.nn
        P = f"L{i}."
        n1 = self.norm(P + f"{nn}1", i, x)
        n1o = b.tensor(P + f"{nn}1_out", hN, n1, category="norm_out", recipe=Recipe((n1,), (x,)))
        q = self.gemm(P + "qkv", i, h, 3 * h, [n1o])
        qo = b.tensor(P + "qkv_out", self.act(3 * h), q, category="qkv",
                      recipe=Recipe((q,), (n1o,)))
        at = self.attention(P + "attn", i, qo)
        ao = b.tensor(P + "attn_out", hN + self.N * self.p["heads"] * LSE_BYTES_PER_HEAD, at,
                      category="attn_out", recipe=Recipe((at,), (qo,)))
        pr = self.gemm(P + "proj", i, h, h, [ao])
        po = b.tensor(P + "proj_out", hN, pr, category="temp")
        if self.a.dropout:
            d1o, m1, _ = self.dropout(P + "drop1", i, po, P + "drop1_out", "temp")
            a1 = self.add(P + "add1", i, d1o, x)
            mid_recipe = Recipe((pr, P + "drop1", a1), (ao, m1, x), hN)
        else:
            a1 = self.add(P + "add1", i, po, x)
            mid_recipe = Recipe((pr, a1), (ao, x), hN)
        mid = b.tensor(P + "mid", hN, a1, category="residual", recipe=mid_recipe)
        n2 = self.norm(P + f"{nn}2", i, mid)
        n2o = b.tensor(P + f"{nn}2_out", hN, n2, category="norm_out",
                       recipe=Recipe((n2,), (mid,)))
        if self.a.mlp == "gelu":
            f1 = self.gemm(P + "fc1", i, h, self.ffn, [n2o])
            f1o = b.tensor(P + "fc1_out", self.act(self.ffn), f1, category="fc1_out",
                           recipe=Recipe((f1,), (n2o,)))
            ge = b.mem_op(P + "gelu", "fwd", kind="gelu", layer=i,
                          bytes_moved=2 * self.act(self.ffn), reads=[f1o])
            go = b.tensor(P + "gelu_out", self.act(self.ffn), ge, category="act_out",
                          recipe=Recipe((ge,), (f1o,)))
        else:
            f1 = self.gemm(P + "gate_up", i, h, 2 * self.ffn, [n2o])
            f1o = b.tensor(P + "gate_up_out", self.act(2 * self.ffn), f1, category="fc1_out",
                           recipe=Recipe((f1,), (n2o,)))
            ge = b.mem_op(P + "swiglu", "fwd", kind="swiglu", layer=i,
                          bytes_moved=3 * self.act(self.ffn), reads=[f1o])
            go = b.tensor(P + "swiglu_out", self.act(self.ffn), ge, category="act_out",
                          recipe=Recipe((ge,), (f1o,)))
        f2name = P + ("fc2" if self.a.mlp == "gelu" else "down")
        f2 = self.gemm(f2name, i, self.ffn, h, [go])
        f2o = b.tensor(f2name + "_out", hN, f2, category="temp")
        if self.a.dropout:
            d2o, _, _ = self.dropout(P + "drop2", i, f2o, P + "drop2_out", "temp")
            self.add(P + "add2", i, d2o, mid)
        else:
            self.add(P + "add2", i, f2o, mid)
        b.tensor(out, hN, P + "add2", category=out_cat)

    def post_ln_layer(self, i: int, x: str, out: str, out_cat: str) -> None:
        """One post-LN block (BERT) from block input ``x`` to ``out`` (= LN2's output)."""
        b, h, hN = self.b, self.h, self.hN
        P = f"L{i}."
        q = self.gemm(P + "qkv", i, h, 3 * h, [x])
        qo = b.tensor(P + "qkv_out", self.act(3 * h), q, category="qkv",
                      recipe=Recipe((q,), (x,)))
        at = self.attention(P + "attn", i, qo)
        ao = b.tensor(P + "attn_out", hN + self.N * self.p["heads"] * LSE_BYTES_PER_HEAD, at,
                      category="attn_out", recipe=Recipe((at,), (qo,)))
        pr = self.gemm(P + "proj", i, h, h, [ao])
        po = b.tensor(P + "proj_out", hN, pr, category="temp")
        d1o, m1, _ = self.dropout(P + "drop1", i, po, P + "drop1_out", "temp")
        a1 = self.add(P + "add1", i, d1o, x)
        r1 = b.tensor(P + "res1", hN, a1, category="residual",
                      recipe=Recipe((pr, P + "drop1", a1), (ao, m1, x), hN))
        n1 = self.norm(P + "ln1", i, r1)
        n1o = b.tensor(P + "ln1_out", hN, n1, category="norm_out", recipe=Recipe((n1,), (r1,)))
        f1 = self.gemm(P + "fc1", i, h, self.ffn, [n1o])
        f1o = b.tensor(P + "fc1_out", self.act(self.ffn), f1, category="fc1_out",
                       recipe=Recipe((f1,), (n1o,)))
        ge = b.mem_op(P + "gelu", "fwd", kind="gelu", layer=i,
                      bytes_moved=2 * self.act(self.ffn), reads=[f1o])
        go = b.tensor(P + "gelu_out", self.act(self.ffn), ge, category="act_out",
                      recipe=Recipe((ge,), (f1o,)))
        f2 = self.gemm(P + "fc2", i, self.ffn, h, [go])
        f2o = b.tensor(P + "fc2_out", hN, f2, category="temp")
        d2o, m2, _ = self.dropout(P + "drop2", i, f2o, P + "drop2_out", "temp")
        a2 = self.add(P + "add2", i, d2o, n1o)
        r2 = b.tensor(P + "res2", hN, a2, category="residual",
                      recipe=Recipe((f2, P + "drop2", a2), (go, m2, n1o), hN))
        n2 = self.norm(P + "ln2", i, r2)
        b.tensor(out, hN, n2, category=out_cat, recipe=Recipe((n2,), (r2,)))

    def lm_head(self, x: str) -> None:
        """Final norm (input ``x`` saved, c = inf), LM head over all tokens, loss."""
        b, V = self.b, self.p["vocab"]
        nf = self.norm(f"{self.nn}f", -1, x)
        nfo = b.tensor(f"{self.nn}f_out", self.hN, nf, category="norm_out",
                       recipe=Recipe((nf,), (x,)))
        lm = self.gemm("lm_head", -1, self.h, V, [nfo])
        lo = b.tensor("logits", self.act(V), lm, category="logits", recipe=Recipe((lm,), (nfo,)))
        b.mem_op("loss", "fwd", kind="loss", layer=-1, bytes_moved=self.act(V), reads=[lo])

    def mlm_head(self, x: str) -> None:
        """BERT MLM head: dense -> GeLU -> LayerNorm over all tokens (each output saved),
        decoder GEMM h -> V and loss over ``round(mlm_fraction * N)`` tokens."""
        b, h, hN, V = self.b, self.h, self.hN, self.p["vocab"]
        self.n_mlm = max(1, int(round(self.p["mlm_fraction"] * self.N)))
        de = self.gemm("mlm.dense", -1, h, h, [x])
        deo = b.tensor("mlm.dense_out", hN, de, category="fc1_out", recipe=Recipe((de,), (x,)))
        ge = b.mem_op("mlm.gelu", "fwd", kind="gelu", layer=-1, bytes_moved=2 * hN, reads=[deo])
        geo = b.tensor("mlm.gelu_out", hN, ge, category="act_out", recipe=Recipe((ge,), (deo,)))
        ln = self.norm("mlm.ln", -1, geo)
        lno = b.tensor("mlm.ln_out", hN, ln, category="norm_out", recipe=Recipe((ln,), (geo,)))
        dec = self.gemm("mlm.decoder", -1, h, V, [lno], tokens=self.n_mlm)
        lo = b.tensor("logits", self.act(V, self.n_mlm), dec, category="logits",
                      recipe=Recipe((dec,), (lno,)))
        b.mem_op("loss", "fwd", kind="loss", layer=-1, bytes_moved=self.act(V, self.n_mlm),
                 reads=[lo])

    # ---------------------------------------------------------------- backward
    def lm_head_bwd(self, x: str) -> str:
        """Loss, LM head and final-norm backward. Returns the residual-gradient buffer."""
        b, V = self.b, self.p["vocab"]
        lb = b.mem_op("loss.bwd", "bwd", kind="loss", layer=-1,
                      bytes_moved=2 * self.act(V), reads=["logits"])
        dl = b.tensor("d_logits", self.act(V), lb, category="grad")
        self.gemm_bwd("lm_head", -1, self.h, V, dl, f"{self.nn}f_out",
                      f"d_{self.nn}f_out")
        nb = self.norm_bwd(f"{self.nn}f", -1, [f"d_{self.nn}f_out", x])
        return b.tensor("d_residual", 2 * self.hN, nb, category="grad")

    def mlm_head_bwd(self, x: str) -> str:
        b, V, hN = self.b, self.p["vocab"], self.hN
        lb = b.mem_op("loss.bwd", "bwd", kind="loss", layer=-1,
                      bytes_moved=2 * self.act(V, self.n_mlm), reads=["logits"])
        dl = b.tensor("d_logits", self.act(V, self.n_mlm), lb, category="grad")
        self.gemm_bwd("mlm.decoder", -1, self.h, V, dl, "mlm.ln_out",
                      "d_mlm.ln_out", tokens=self.n_mlm)
        nb = self.norm_bwd("mlm.ln", -1, ["d_mlm.ln_out", "mlm.gelu_out"])
        b.tensor("d_mlm.gelu_out", hN, nb, category="grad")
        gb = b.mem_op("mlm.gelu.bwd", "bwd", kind="gelu", layer=-1, bytes_moved=3 * hN,
                      reads=["d_mlm.gelu_out", "mlm.dense_out"])
        b.tensor("d_mlm.dense_out", hN, gb, category="grad")
        # The residual-gradient buffer is 2 x [N, h] (docs/model.md, "Transient buffers").
        self.gemm_bwd("mlm.dense", -1, self.h, self.h, "d_mlm.dense_out", x, "d_residual",
                      grad_out_bytes=2 * hN)
        return "d_residual"

    def pre_ln_layer_bwd(self, i: int, x: str, res: str) -> None:
        b, h, hN, nn = self.b, self.h, self.hN, self.nn
        P = f"L{i}."
        # MLP
        if self.a.dropout:
            self.dropout_bwd(P + "drop2", i, res, P + "drop2.mask", P + "drop2.rng",
                             P + "d_fc2_out")
            g_f2 = P + "d_fc2_out"
        else:
            g_f2 = res
        if self.a.mlp == "gelu":
            self.gemm_bwd(P + "fc2", i, self.ffn, h, g_f2, P + "gelu_out",
                          P + "d_gelu_out")
            gb = b.mem_op(P + "gelu.bwd", "bwd", kind="gelu", layer=i,
                          bytes_moved=3 * self.act(self.ffn),
                          reads=[P + "d_gelu_out", P + "fc1_out"])
            b.tensor(P + "d_fc1_out", self.act(self.ffn), gb, category="grad")
            self.gemm_bwd(P + "fc1", i, h, self.ffn, P + "d_fc1_out", P + f"{nn}2_out",
                          P + f"d_{nn}2_out")
        else:
            self.gemm_bwd(P + "down", i, self.ffn, h, g_f2, P + "swiglu_out",
                          P + "d_swiglu_out")
            sb = b.mem_op(P + "swiglu.bwd", "bwd", kind="swiglu", layer=i,
                          bytes_moved=5 * self.act(self.ffn),
                          reads=[P + "d_swiglu_out", P + "gate_up_out"])
            b.tensor(P + "d_gate_up_out", self.act(2 * self.ffn), sb, category="grad")
            self.gemm_bwd(P + "gate_up", i, h, 2 * self.ffn, P + "d_gate_up_out",
                          P + f"{nn}2_out", P + f"d_{nn}2_out")
        n2b = self.norm_bwd(P + f"{nn}2", i, [P + f"d_{nn}2_out", P + "mid"])
        b.tensor(P + "d_mid", hN, n2b, category="grad")
        self.res_acc(P + "res_acc1", i, [P + "d_mid", res])
        # attention
        if self.a.dropout:
            self.dropout_bwd(P + "drop1", i, res, P + "drop1.mask", P + "drop1.rng",
                             P + "d_proj_out")
            g_pr = P + "d_proj_out"
        else:
            g_pr = res
        self.gemm_bwd(P + "proj", i, h, h, g_pr, P + "attn_out", P + "d_attn_out")
        ab = self.attention_bwd(P + "attn", i, [P + "d_attn_out", P + "qkv_out", P + "attn_out"])
        b.tensor(P + "d_qkv_out", self.act(3 * h), ab, category="grad")
        self.gemm_bwd(P + "qkv", i, h, 3 * h, P + "d_qkv_out", P + f"{nn}1_out",
                      P + f"d_{nn}1_out")
        n1b = self.norm_bwd(P + f"{nn}1", i, [P + f"d_{nn}1_out", x])
        b.tensor(P + "d_x", hN, n1b, category="grad")
        self.res_acc(P + "res_acc2", i, [P + "d_x", res])

    def post_ln_layer_bwd(self, i: int, x: str, res: str) -> None:
        """BERT block backward; LayerNorm backward updates the residual-stream gradient
        buffer in place, the two accumulations add the branch gradients into it."""
        b, h = self.b, self.h
        P = f"L{i}."
        self.norm_bwd(P + "ln2", i, [res, P + "res2"])
        self.dropout_bwd(P + "drop2", i, res, P + "drop2.mask", P + "drop2.rng",
                         P + "d_fc2_out")
        self.gemm_bwd(P + "fc2", i, self.ffn, h, P + "d_fc2_out", P + "gelu_out",
                      P + "d_gelu_out")
        gb = b.mem_op(P + "gelu.bwd", "bwd", kind="gelu", layer=i,
                      bytes_moved=3 * self.act(self.ffn), reads=[P + "d_gelu_out", P + "fc1_out"])
        b.tensor(P + "d_fc1_out", self.act(self.ffn), gb, category="grad")
        self.gemm_bwd(P + "fc1", i, h, self.ffn, P + "d_fc1_out", P + "ln1_out",
                      P + "d_ln1_out")
        self.res_acc(P + "res_acc1", i, [P + "d_ln1_out", res])
        self.norm_bwd(P + "ln1", i, [res, P + "res1"])
        self.dropout_bwd(P + "drop1", i, res, P + "drop1.mask", P + "drop1.rng",
                         P + "d_proj_out")
        self.gemm_bwd(P + "proj", i, h, h, P + "d_proj_out", P + "attn_out",
                      P + "d_attn_out")
        ab = self.attention_bwd(P + "attn", i, [P + "d_attn_out", P + "qkv_out", P + "attn_out"])
        b.tensor(P + "d_qkv_out", self.act(3 * h), ab, category="grad")
        self.gemm_bwd(P + "qkv", i, h, 3 * h, P + "d_qkv_out", x, P + "d_x")
        self.res_acc(P + "res_acc2", i, [P + "d_x", res])

    def embedding_bwd(self, res: str) -> None:
        b, a, hN = self.b, self.a, self.hN
        if a.post_ln:
            self.dropout_bwd("emb.drop", -1, res, "emb.drop.mask", "emb.drop.rng",
                             "d_emb.ln_out")
            nb = self.norm_bwd("emb.ln", -1, ["d_emb.ln_out", "emb_out"])
            g = b.tensor("d_emb_out", hN, nb, category="grad")
        elif a.dropout:
            self.dropout_bwd("emb.drop", -1, res, "emb.drop.mask", "emb.drop.rng", "d_emb_out")
            g = "d_emb_out"
        else:
            g = res
        b.mem_op("emb.bwd", "bwd", kind="embedding", layer=-1,
                 bytes_moved=(a.tables + 1) * hN, reads=[g])

    # ---------------------------------------------------------------- all
    def build(self) -> GraphBuilder:
        a, L = self.a, self.L
        x = self.embedding()
        layer = self.post_ln_layer if a.post_ln else self.pre_ln_layer
        for i in range(L):
            last = i == L - 1
            out = "head_in" if last else f"L{i + 1}.x"
            layer(i, x, out, "block_output" if last else "block_input")
            x = out
        if a.head == "lm":
            self.lm_head(x)
            res = self.lm_head_bwd(x)
        else:
            self.mlm_head(x)
            res = self.mlm_head_bwd(x)
        layer_bwd = self.post_ln_layer_bwd if a.post_ln else self.pre_ln_layer_bwd
        for i in reversed(range(L)):
            layer_bwd(i, f"L{i}.x", res)
        self.embedding_bwd(res)
        return self.b


def build(arch: Arch, *, gpu: str | GPU = "a100", link: str | Link | None = None,
          **params: Any) -> Instance:
    """Build one transformer training iteration.

    Args:
        arch: the architecture flags (:data:`GPT2`, :data:`BERT`, :data:`LLAMA`, :data:`TINY`).
        gpu: GPU preset name or :class:`GPU` (times every op; its dtype is the default).
        link: host-link preset name, :class:`Link`, or None for the GPU's default link.
        **params: the architecture's parameters (:data:`DEFAULTS`); None keeps the default.

    Returns:
        The validated :class:`Instance`, named like ``"gpt2-xl_a100-pcie4"``, with
        ``meta = {"generator", "params", "gpu", "link"}``.

    Raises:
        KeyError: unknown GPU or link preset.
        WorkloadError: an unknown parameter or an impossible value (heads not dividing
            hidden, a non-positive size).
    """
    g, lk = resolve_hardware(gpu, link)
    p = _resolve_params(arch, g, params)
    tb = _TransformerBuilder(arch, p, g)
    b = tb.build()
    shown = {k: v for k, v in p.items() if k in DEFAULTS[arch.key]}
    defaults = dict(DEFAULTS[arch.key], dtype_bytes=g.dtype_bytes)
    if defaults["ffn"] is None:
        defaults["ffn"] = 4 * p["hidden"]
    name = instance_name(arch.key, g, lk, overrides_of(shown, defaults))
    return b.build(name, lk, make_meta(arch.key, p, g, lk))


def gpt2_xl(*, gpu: str | GPU = "a100", link: str | Link | None = None, layers: int = 48,
            hidden: int = 1600, heads: int = 25, ffn: int | None = None, seq: int = 1024,
            batch: int = 8, vocab: int = 50257, dtype_bytes: int | None = None) -> Instance:
    """GPT-2 XL training iteration (pre-LN, GeLU MLP, dropout, causal FlashAttention).

    Args:
        gpu, link: hardware presets (see :func:`build`).
        layers: blocks. hidden: h. heads: attention heads. ffn: MLP width (None: 4h).
        seq: tokens per sequence. batch: sequences. vocab: V. dtype_bytes: bytes per element
            (None: the GPU's training dtype, BF16 = 2).

    Returns:
        The instance; defaults land on docs/workloads.md's totals (A100: A 22.3 GB,
        P 23.1 GB, T_F 135.8 ms, ideal step 401 ms; 54,500 saved B/token per layer).

    Raises:
        KeyError, WorkloadError: see :func:`build`.
    """
    return build(GPT2, gpu=gpu, link=link, layers=layers, hidden=hidden, heads=heads,
                 ffn=ffn, seq=seq, batch=batch, vocab=vocab,
                 dtype_bytes=dtype_bytes)


def bert_large(*, gpu: str | GPU = "a100", link: str | Link | None = None, layers: int = 24,
               hidden: int = 1024, heads: int = 16, ffn: int | None = None, seq: int = 512,
               batch: int = 16, vocab: int = 30522, dtype_bytes: int | None = None,
               mlm_fraction: float = 0.15) -> Instance:
    """BERT-Large pre-training iteration (post-LN, bidirectional, MLM head).

    Args:
        gpu, link: hardware presets (see :func:`build`).
        layers, hidden, heads, ffn (None: 4h), seq, batch, vocab, dtype_bytes: as
            :func:`gpt2_xl`.
        mlm_fraction: share of tokens scored by the MLM decoder and loss (0, 1].

    Returns:
        The instance; defaults land on docs/workloads.md's totals (A100: A 7.02 GB,
        P 7.10 GB, T_F 30.7 ms, ideal step 89.6 ms; 34,880 saved B/token per layer).

    Raises:
        KeyError, WorkloadError: see :func:`build`.
    """
    return build(BERT, gpu=gpu, link=link, layers=layers, hidden=hidden, heads=heads,
                 ffn=ffn, seq=seq, batch=batch, vocab=vocab,
                 dtype_bytes=dtype_bytes, mlm_fraction=mlm_fraction)


def llama_7b(*, gpu: str | GPU = "a100", link: str | Link | None = None, layers: int = 32,
             hidden: int = 4096, heads: int = 32, ffn: int = 11008, seq: int = 4096,
             batch: int = 2, vocab: int = 32000, dtype_bytes: int | None = None) -> Instance:
    """Llama-2-7B-style iteration (RMSNorm, fused SwiGLU, no dropout, RoPE fused, causal).

    Args:
        gpu, link: hardware presets (see :func:`build`).
        layers, hidden, heads, ffn, seq, batch, vocab, dtype_bytes: as :func:`gpt2_xl`
            (ffn is the SwiGLU width; gate|up is 2 x ffn).

    Returns:
        The instance; defaults land on docs/workloads.md's totals (A100: A 35.2 GB,
        P 35.7 GB, T_F 532.5 ms, ideal step 1639 ms; 131,712 saved B/token per layer).

    Raises:
        KeyError, WorkloadError: see :func:`build`.
    """
    return build(LLAMA, gpu=gpu, link=link, layers=layers, hidden=hidden, heads=heads, ffn=ffn,
                 seq=seq, batch=batch, vocab=vocab, dtype_bytes=dtype_bytes)


def tiny(*, gpu: str | GPU = "a100", link: str | Link | None = None, layers: int = 2,
         hidden: int = 64, heads: int = 4, ffn: int | None = None, seq: int = 32,
         batch: int = 2, vocab: int = 512, dtype_bytes: int | None = None) -> Instance:
    """A tiny GPT-style transformer (same structure as :func:`gpt2_xl`) for tests and teaching.

    Args:
        as :func:`gpt2_xl`; defaults 2 layers, h = 64, 4 heads, seq 32, batch 2, V = 512.

    Returns:
        The instance (29 saved tensors with the defaults; launch-dominated op times).

    Raises:
        KeyError, WorkloadError: see :func:`build`.
    """
    return build(TINY, gpu=gpu, link=link, layers=layers, hidden=hidden, heads=heads,
                 ffn=ffn, seq=seq, batch=batch, vocab=vocab,
                 dtype_bytes=dtype_bytes)


__all__ = ["Arch", "GPT2", "BERT", "LLAMA", "TINY", "DEFAULTS", "build", "gpt2_xl",
           "bert_large", "llama_7b", "tiny"]
