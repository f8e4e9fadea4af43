"""Fake profiling (``slackopt profile --fake``): the step traced under FakeTensorMode.

The central check: on the test models - the nanoGPT-style decoder with dropout, the
ResNet-style CNN (BatchNorm, in-place ReLU), PyTorch's TransformerEncoder (its layers are
deep-copied fake modules) and GPT-2 and Llama built by transformers from the tiny configs
in tests/data/hf - the fake instance equals the real roofline profile of the same model
field by field: every op (name, kind, duration, FLOPs, layer, random, never_recompute),
every tensor (size, producer, readers, recipe, category), the link and the metadata but
for ``fake``. Then: the memory a fake profile needs does not grow with the model, the
Hugging Face path from a config file on the command line, and the errors (measured timing
with --fake, mixed fake and real tensors, bad hf: targets, a factory's make_inputs
without --input-shape).
"""

from __future__ import annotations

import json
import re
import resource
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")  # import guard only: CI installs torch
pytestmark = pytest.mark.torch  # deselect with -m "not torch"

from slackopt import io  # noqa: E402
from slackopt.cli import main  # noqa: E402
from slackopt.hardware import GPUS  # noqa: E402
from slackopt.torch import (  # noqa: E402
    ProfileError,
    build_from_factory,
    profile_factory,
    profile_step,
)
from tests import torch_models  # noqa: E402,F401  (imported once: factories load it by name)

ROOT = Path(__file__).resolve().parents[1]
MODELS = "tests.torch_models"  # by module name: the real and the fake profile name one class
HF = Path(__file__).parent / "data" / "hf"


def profile_pair(target: str, shapes: list[str], params: dict | None = None):
    """The real roofline profile and the fake one of the same factory (h100 roofline)."""
    kw = dict(params=params or {}, timing="roofline", gpu="h100")
    real = profile_factory(target, shapes, warmup=0, repeat=1, **kw)
    fake = profile_factory(target, shapes, fake=True, **kw)
    return real, fake


def assert_same_instance(real, fake) -> None:
    """Field by field: the op list, the tensor list, the link, the metadata but `fake`."""
    a, b = io.instance_to_dict(real), io.instance_to_dict(fake)
    assert [o["name"] for o in a["ops"]] == [o["name"] for o in b["ops"]]
    for x, y in zip(a["ops"], b["ops"], strict=True):
        assert x == y, (x, y)
    assert [t["name"] for t in a["tensors"]] == [t["name"] for t in b["tensors"]]
    for x, y in zip(a["tensors"], b["tensors"], strict=True):
        assert x == y, (x, y)
    assert a["link"] == b["link"]
    assert (a["meta"].pop("fake"), b["meta"].pop("fake")) == (False, True)
    assert a["meta"] == b["meta"]
    assert {k: a[k] for k in a if k not in ("ops", "tensors", "link", "meta")} == \
        {k: b[k] for k in b if k not in ("ops", "tensors", "link", "meta")}


@pytest.mark.slow
def test_fake_equals_real_nanogpt_with_dropout():
    """Random ops (dropout) flagged alike, masks as tensors of category "mask", recipes."""
    real, fake = profile_pair(f"{MODELS}:gpt_factory", ["2x16"], {"dropout": 0.1})
    assert_same_instance(real, fake)
    assert sum(op.random for op in fake.ops) >= 4  # embedding, attention, 2 residual / layer
    assert any(t.category == "mask" for t in fake.tensors)
    assert fake.meta["recipes"]["rebuildable"] > 0 and fake.n_saved > 10


@pytest.mark.slow
def test_fake_equals_real_cnn_inplace_and_batchnorm():
    """In-place ReLU splits a storage into NAME.pre and NAME; BatchNorm never recomputes."""
    real, fake = profile_pair(f"{MODELS}:vision_factory", ["2x3x16x16"])
    assert_same_instance(real, fake)
    assert any(t.name.endswith(".pre") for t in fake.tensors)
    assert any(op.never_recompute and op.kind == "batchnorm" for op in fake.ops)
    assert fake.meta["persistent_bytes"]["buffers"] > 0  # running statistics


@pytest.mark.slow
def test_fake_equals_real_transformer_encoder_deepcopied_layers():
    """nn.TransformerEncoder deep-copies its layer: the copies are re-made in the mode."""
    real, fake = profile_pair(f"{MODELS}:encoder_factory", ["2x8x32"])
    assert_same_instance(real, fake)
    assert any(op.kind == "attention" for op in fake.ops)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2-tiny", "llama-tiny"])
def test_fake_equals_real_hugging_face_from_config(name):
    """GPT-2 (dropout on, tied head) and Llama (GQA, RoPE) from config files: the batch
    is input_ids and labels of one BxS shape; the attention is SDPA and recorded."""
    pytest.importorskip("transformers")  # CI installs it ([dev] extra)
    cfg = HF / name / "config.json"
    real, fake = profile_pair(f"hf:{cfg}", ["2x16"])
    assert_same_instance(real, fake)
    assert fake.meta["attn_implementation"] == "sdpa"
    assert fake.meta["input_kwargs"] == {"input_ids": [[2, 16], "int64"],
                                         "labels": [[2, 16], "int64"]}
    assert fake.meta["factory"] == f"hf:{cfg.resolve()}"
    # SDPA with dropout runs PyTorch's math fallback on the CPU (matmul, softmax, dropout);
    # without dropout (Llama) the fused CPU flash kernel.
    fused = any("scaled_dot_product" in op.name for op in fake.ops)
    assert fused == (name == "llama-tiny")
    assert any(op.kind == "loss" for op in fake.ops)  # the model's cross entropy
    assert any(op.random for op in fake.ops) == (name == "gpt2-tiny")


def test_hf_config_selects_the_attention(tmp_path):
    """A config that asks for eager attention runs it (no SDPA op) and says so."""
    pytest.importorskip("transformers")
    cfg = json.loads((HF / "llama-tiny" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "attn_implementation": "eager"}))
    inst = profile_factory(f"hf:{tmp_path}", ["2x16"], fake=True, timing="roofline",
                           gpu="h100", params={"num_hidden_layers": 1})
    assert inst.meta["attn_implementation"] == "eager"
    assert not any("scaled_dot_product" in op.name for op in inst.ops)
    assert any(op.kind == "softmax" for op in inst.ops)
    assert max(op.layer for op in inst.ops) == 0  # num_hidden_layers overridden to 1


FACTORY = '''
import torch
from torch import nn

def big(width=65536):
    return nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 8))
'''


def test_fake_profile_allocates_no_weights_or_activations(tmp_path):
    """A 17 GB fp32 layer (65536 x 65536) at batch 4096: weights 17.2 GB, activations
    2 x 1.07 GB; the fake profile's peak resident memory grows by far less than either."""
    (tmp_path / "bigmodel.py").write_text(FACTORY)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    inst = profile_factory(f"{tmp_path / 'bigmodel.py'}:big", ["4096x65536"], fake=True,
                           timing="roofline", gpu="h100")
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    w = 65536
    assert inst.meta["persistent_bytes"]["parameters"] == 4 * (w * w + w + 8 * w + 8)
    assert inst.meta["persistent_bytes"]["inputs"] == 4 * 4096 * w
    hidden = 4 * 4096 * w  # the first Linear's output, saved for ReLU's backward
    assert hidden in inst.s.tolist()
    assert grown < 1e9, grown
    gemm = max((op for op in inst.ops if op.kind == "gemm"), key=lambda o: o.flops)
    assert gemm.flops == 2 * 4096 * w * w


def run_cli(capsys, *args):
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.slow
def test_cli_fake_hf_config_then_describe(capsys, tmp_path):
    """The issue's command on a tiny config; describe reads the file."""
    pytest.importorskip("transformers")
    out_path = tmp_path / "F.json"
    rc, out, err = run_cli(capsys, "profile", "--fake", f"hf:{HF / 'llama-tiny' / 'config.json'}",
                           "-i", "1x32", "--gpu", "h100", "-o", out_path, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert (doc["fake"], doc["timing"], doc["gpu"], doc["attn_implementation"]) == (
        True, "roofline", "h100", "sdpa")
    assert doc["saved_tensors"] > 0 and doc["input_kwargs"]["input_ids"] == [[1, 32], "int64"]
    rc, out, err = run_cli(capsys, "describe", out_path, "--json")
    assert rc == 0, err
    d = json.loads(out)
    inst = io.load_instance(out_path)
    assert (d["saved_bytes"], d["peak_bytes"]) == (inst.A, inst.P)


def test_cli_fake_errors(capsys, tmp_path):
    """One line, exit 2, for each mistake; the issue-25 case (no -i) names --input-shape."""
    out_path = tmp_path / "x.json"
    llama = f"hf:{HF / 'llama-tiny' / 'config.json'}"
    cases = [
        (["--fake", f"{MODELS}:gpt_factory", "-i", "2x16", "--timing", "measure",
          "--gpu", "h100"], "roofline"),
        (["--fake", f"{MODELS}:gpt_factory", "-i", "2x16"],
         f"--fake needs --gpu (a preset: {', '.join(GPUS)}; or a JSON file of peaks)"),
        ([f"{MODELS}:gpt_factory"], "--input-shape"),
        (["--fake", "hf:/no/such/config.json", "-i", "2x16", "--gpu", "h100"], "not found"),
        (["--fake", llama, "-i", "2x16", "-i", "4x8", "--gpu", "h100"], "2 shapes (2x16, 4x8)"),
        (["--fake", llama, "-i", "2x16", "--gpu", "h100", "-p", "n_layerz=1"], "n_layerz"),
    ]
    for args, words in cases:
        rc, out, err = run_cli(capsys, "profile", *args, "-o", out_path)
        assert rc == 2, (args, out, err)
        assert out == "" and "Traceback" not in err and words in err, (args, err)
        assert len(err.strip().splitlines()) == 1, err
    assert not out_path.exists()


def test_fake_model_needs_roofline_and_one_mode():
    model, inputs, loss_fn = build_from_factory(f"{MODELS}:gpt_factory", ["2x16"], fake=True)
    with pytest.raises(ProfileError, match="roofline"):
        profile_step(model, inputs, loss_fn)
    real_inputs = (torch.randint(0, 64, (2, 16)),)
    with pytest.raises(ProfileError, match="mix real tensors and fake"):
        profile_step(model, real_inputs, loss_fn, timing="roofline", gpu="h100")


@pytest.mark.slow
def test_plan_made_on_the_fake_profile_runs_on_the_real_model():
    """Plan Llama at 0.5 P from its fake profile, then execute the plan on the real model
    that the stored factory rebuilds: the runtime follows the evaluator task by task (its
    saved-bytes timeline equals the simulated one) with the plan's copies and rebuilds."""
    pytest.importorskip("transformers")
    from slackopt import solve
    from slackopt.instance import budget_bytes
    from slackopt.simulate import simulate
    from slackopt.torch import execute_plan

    cfg = HF / "llama-tiny" / "config.json"
    fake = profile_factory(f"hf:{cfg}", ["2x16"], fake=True, timing="roofline", gpu="h100")
    res = solve(fake, "slackswap", 0.5)
    assert res.evaluation.feasible, res.evaluation.failure
    counts = res.plan.counts()
    assert counts["swap"] + counts["recomp"] > 0
    model, inputs, loss_fn = build_from_factory(fake.meta["factory"], ["2x16"],
                                                seed=fake.meta["seed"])
    rep = execute_plan(model, inputs, loss_fn, fake, res.plan, 0.5)
    ev = simulate(fake, res.plan, budget_bytes(fake, 0.5), engine="reference")
    assert rep.matches_plan(), rep.to_dict()
    assert rep.memory_timeline == rep.simulated_timeline
    assert (rep.d2h_bytes, rep.h2d_bytes) == (ev.d2h_bytes, ev.h2d_bytes)


@pytest.mark.slow
def test_shipped_llama_3_8b_config_has_the_published_dimensions():
    """instances/configs/llama-3-8b: one layer of it, faked, holds the parameters worked
    out by hand from the dimensions (bf16, untied head): embedding and head 2 x 128256 x
    4096, attention 2 x 4096^2 + 2 x 4096 x 1024 (8 KV heads of 128), SwiGLU 3 x 4096 x
    14336, two RMSNorms per layer and a final one. 32 layers are 8.03e9 parameters."""
    pytest.importorskip("transformers")
    cfg = ROOT / "instances" / "configs" / "llama-3-8b" / "config.json"
    inst = profile_factory(f"hf:{cfg}", ["1x64"], fake=True, timing="roofline", gpu="h100",
                           params={"num_hidden_layers": 1})
    h, ffn, vocab, kv = 4096, 14336, 128256, 8 * 128
    layer = 2 * h * h + 2 * h * kv + 3 * h * ffn + 2 * h
    assert 2 * vocab * h + 32 * layer + h == 8_030_261_248
    assert inst.meta["persistent_bytes"]["parameters"] == 2 * (2 * vocab * h + layer + h)
    assert (inst.meta["param_dtype"], inst.meta["attn_implementation"]) == ("bfloat16", "sdpa")
    import transformers

    c = transformers.AutoConfig.from_pretrained(str(cfg), local_files_only=True)
    theta = (getattr(c, "rope_parameters", None) or {}).get("rope_theta") \
        or getattr(c, "rope_theta", None)  # transformers 5 moved it into rope_parameters
    assert (theta, c.max_position_embeddings) == (500000.0, 8192)


@pytest.mark.slow
def test_mixture_of_experts_grouped_gemms_are_counted(tmp_path):
    """A Mixtral-style MoE layer (transformers' grouped_mm experts: sort, histc, grouped
    GEMMs, no data-dependent shapes) traces under FakeTensorMode, and each grouped GEMM is
    a gemm with the FLOPs worked out by hand: S = tokens x top-k routed rows, up/gate
    2 S h (2 f), down 2 S f h; backward the input gradient (same FLOPs) and the weight
    gradient (2D x 2D grouped, same FLOPs)."""
    pytest.importorskip("transformers")
    h, f, tokens, top_k = 64, 96, 32, 2
    cfg = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
           "hidden_size": h, "intermediate_size": f, "num_hidden_layers": 1,
           "num_attention_heads": 4, "num_key_value_heads": 2, "num_local_experts": 4,
           "num_experts_per_tok": top_k, "vocab_size": 128, "torch_dtype": "bfloat16"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    inst = profile_factory(f"hf:{tmp_path / 'config.json'}", [f"1x{tokens}"], fake=True,
                           timing="roofline", gpu="h100")
    grouped = [o for o in inst.ops if o.name.endswith("_grouped_mm")]
    s = tokens * top_k
    up, down = 2.0 * s * h * 2 * f, 2.0 * s * f * h
    assert [o.kind for o in grouped] == ["gemm"] * 6
    assert sorted(o.flops for o in grouped) == sorted([up, down] * 3)
    from slackopt.torch import grouped_mm_flops

    assert grouped_mm_flops((5, 7, 3), (3, 11)) == 2 * 7 * 3 * 11  # 3D x 2D: split columns
    assert grouped_mm_flops((4, 5, 7), (4, 7, 3)) == 2 * 4 * 5 * 7 * 3  # batched


@pytest.mark.slow
def test_cli_profile_host_memory_as_make_reads_it(capsys, tmp_path):
    """--host-memory of profile is make's: 'gpu' takes Grace's memory on gh200, a size is
    bytes, and a mistake is one line naming --host-memory and its forms."""
    out_path = tmp_path / "gh.json"
    base = ["profile", "--fake", f"{MODELS}:gpt_factory", "-i", "2x16", "-o", out_path,
            "--force", "--json"]
    rc, out, err = run_cli(capsys, *base, "--gpu", "gh200", "--host-memory", "gpu")
    assert rc == 0, err
    doc = json.loads(out)
    assert (doc["host_memory_bytes"], doc["link"]) == (480e9, "gh200-c2c")
    assert io.load_instance(out_path).host_memory_bytes == 480_000_000_000
    rc, out, err = run_cli(capsys, *base, "--gpu", "h100", "--host-memory", "2GB")
    assert rc == 0 and json.loads(out)["host_memory_bytes"] == 2e9, err
    for args, words in [(["--gpu", "h100", "--host-memory", "gpu"], ("h100", "gh200")),
                        (["--gpu", "gh200", "--host-memory", "50%"],
                         ("--host-memory", "a size with a unit", "'gpu'"))]:
        rc, out, err = run_cli(capsys, *base, *args)
        assert rc == 2 and out == "" and "Traceback" not in err, (args, err)
        assert len(err.strip().splitlines()) == 1 and all(w in err for w in words), err


@pytest.mark.parametrize("edit, params, shape, words", [
    ({"model_type": "foobar"}, [], "1x16", ["config.json", "model_type", "'foobar'", "fix:"]),
    ({"model_type": None}, [], "1x16", ["config.json", "no field model_type", "fix:"]),
    ({"hidden_size": -64}, [], "1x16", ["config.json", "hidden_size", "-64", ">= 1"]),
    ({"num_hidden_layers": -1}, [], "1x16", ["config.json", "num_hidden_layers", ">= 1"]),
    ({"vocab_size": 0}, [], "1x16", ["config.json", "vocab_size", ">= 1"]),
    ({"num_attention_heads": 0}, [], "1x16", ["config.json", "num_attention_heads", ">= 1"]),
    ({"intermediate_size": 2.5}, [], "1x16", ["config.json", "intermediate_size", "2.5"]),
    ({}, ["num_hidden_layers=-2"], "1x16", ["--param num_hidden_layers=-2", "config.json",
                                            ">= 1"]),
    ({}, ["num_hidden_layers=abc"], "1x16", ["--param num_hidden_layers='abc'", ">= 1"]),
    ({}, [], "1x0", ["--input-shape", "'1x0'", ">= 1"]),
    ({"hidden_size": None}, [], "1x16", ["config.json", "no field hidden_size", "llama",
                                         "hidden_size=4096", "--param hidden_size=N"]),
    ({"intermediate_size": None}, [], "1x16", ["config.json", "no field intermediate_size"]),
    ({"vocab_size": None}, [], "1x16", ["config.json", "no field vocab_size"]),
])
def test_cli_bad_hf_config_is_one_line_naming_the_field(capsys, tmp_path, edit, params, shape,
                                                        words):
    """A config transformers cannot build (or builds into a crash), a bad --param or a zero
    dimension: one line naming the file, the field and the fix, before any model is built."""
    pytest.importorskip("transformers")
    doc = json.loads((HF / "llama-tiny" / "config.json").read_text())
    doc.update(edit)
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({k: v for k, v in doc.items() if v is not None}))
    rc, out, err = run_cli(capsys, "profile", "--fake", f"hf:{cfg}", "-i", shape, "--gpu",
                           "h100", "-o", tmp_path / "x.json",
                           *[a for p in params for a in ("-p", p)])
    assert rc == 2 and out == "" and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("slackopt: error: "), err
    assert all(w in err for w in words), (words, err)


def test_cli_hf_names_the_field_under_the_configs_own_name_and_an_empty_path(capsys,
                                                                             tmp_path):
    """GPT-2 calls num_hidden_layers n_layer: the line names both; 'hf:' alone names hf:."""
    pytest.importorskip("transformers")
    for target, params, words in [
            (f"hf:{HF / 'gpt2-tiny'}", ["-p", "num_hidden_layers=0"],
             ["--param num_hidden_layers=0", "field n_layer", "config.json"]),
            ("hf:", [], ["config ''", "after hf:"])]:
        rc, out, err = run_cli(capsys, "profile", "--fake", target, "-i", "1x16", "--gpu",
                               "h100", "-o", tmp_path / "x.json", *params)
        assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1, err
        assert all(w in err for w in words), (words, err)


def test_cli_hf_config_missing_a_size_is_refused_unless_given(capsys, tmp_path):
    """A size field the architecture has and the file lacks is refused under the config's
    own name (n_embd on GPT-2), and is taken from --param when given there; a field the
    architecture does not have (intermediate_size on GPT-2) is not asked for."""
    pytest.importorskip("transformers")
    doc = json.loads((HF / "gpt2-tiny" / "config.json").read_text())
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({k: v for k, v in doc.items() if k != "n_embd"}))
    base = ["profile", "--fake", f"hf:{cfg}", "-i", "1x16", "--gpu", "h100"]
    rc, out, err = run_cli(capsys, *base, "-o", tmp_path / "x.json")
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert "no field n_embd" in err and "gpt2" in err and "n_embd=768" in err, err
    rc, out, err = run_cli(capsys, *base, "-p", "n_embd=32", "-o", tmp_path / "y.json",
                           "--json")
    assert rc == 0, err
    assert io.load_instance(tmp_path / "y.json").meta["persistent_bytes"]["parameters"] > 0


def test_sequence_beyond_the_position_embeddings_is_said_and_recorded(capsys, tmp_path):
    """llama-tiny has max_position_embeddings 32: 1 x 40 tokens profiles (RoPE runs any
    length), with a note on stderr (a ProfileNote warning from the library) and the same
    note in meta["notes"]; 1 x 32 has none."""
    pytest.importorskip("transformers")
    from slackopt.torch import ProfileNote

    llama = f"hf:{HF / 'llama-tiny' / 'config.json'}"
    with pytest.warns(ProfileNote, match="max_position_embeddings"):
        inst = profile_factory(llama, ["1x40"], fake=True, timing="roofline", gpu="h100")
    assert inst.meta["notes"] == [
        "40 tokens per sequence (-i 1x40) exceed the config's max_position_embeddings (32): "
        "the step is profiled as asked, but the model was not made for sequences this long"]
    out_path = tmp_path / "long.json"
    rc, out, err = run_cli(capsys, "profile", "--fake", llama, "-i", "1x40", "--gpu", "h100",
                           "-o", out_path, "--json")
    assert rc == 0, err
    assert err.strip() == f"slackopt: note: {inst.meta['notes'][0]}"
    assert json.loads(out)["notes"] == inst.meta["notes"]
    assert io.load_instance(out_path).meta["notes"] == inst.meta["notes"]
    short = profile_factory(llama, ["1x32"], fake=True, timing="roofline", gpu="h100")
    assert short.meta["notes"] == []


def test_names_say_model_tokens_gpu_link_and_module_paths():
    """Two fake profiles of one config on two GPUs have different names (model class,
    tokens, GPU, link); a real CPU profile names the device. Tensors made in a module are
    named by its path as named_modules() spells it (model.layers.0.mlp.up_proj), the second
    and later ones a module path makes get #1, #2, ...; the others (made outside any
    submodule) by op and output (f0042.mul.Tensor#0)."""
    pytest.importorskip("transformers")
    llama = f"hf:{HF / 'llama-tiny' / 'config.json'}"
    h100 = profile_factory(llama, ["2x16"], fake=True, timing="roofline", gpu="h100")
    gh200 = profile_factory(llama, ["2x16"], fake=True, timing="roofline", gpu="gh200")
    assert (h100.name, gh200.name) == ("LlamaForCausalLM-2x16-h100-pcie5",
                                       "LlamaForCausalLM-2x16-gh200-gh200-c2c")
    names = [t.name for t in h100.tensors]
    assert len(set(names)) == len(names)
    for want in ("model.embed_tokens", "model.layers.0.mlp.up_proj",
                 "model.layers.1.mlp.down_proj", "model.layers.0.self_attn#1"):
        assert want in names, (want, names)
    assert h100.tensor("model.layers.0.mlp.up_proj").producer.endswith(".mm")
    model = build_from_factory(llama, ["2x16"], fake=True)[0]
    paths = {p for p, _ in model.named_modules() if p}
    for t in h100.tensors:
        base = t.name.removesuffix(".pre").split("#")[0]
        by_op = re.fullmatch(r"[fb]\d{4}\.[\w.]+#\d+", t.name.removesuffix(".pre"))
        assert base in paths or by_op, t.name
        if t.producer.startswith("b"):
            assert by_op, t.name  # the backward pass runs in no module
    real = profile_factory(f"{MODELS}:gpt_factory", ["2x16"], warmup=0, repeat=1,
                           timing="roofline", gpu="a100")
    assert real.name == "TinyGPT-2x16-a100-pcie4"
    assert "blocks.0.mlp.1" in [t.name for t in real.tensors]  # the GELU of block 0

