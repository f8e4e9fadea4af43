"""Plans run by PyTorch's selective activation checkpointing (slackopt.torch.export,
slackopt.torch.sac), checked from outside the runtime (tests/helpers_sac.py): at the end
of the forward pass the storages PyTorch holds are exactly the plan's keep tensors, the
emptied ones exactly its swap tensors, the freed ones exactly its recomp tensors; the
calls the replays re-run make exactly the recomp tensors (among the saved ones); the
gradients equal the unplanned step's bit for bit; and three optimizer steps give the
unplanned losses. CPU only.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # import guard only: CI installs torch

from slackopt import KEEP, RECOMP, SWAP, Plan, io, solve  # noqa: E402
from slackopt.cli import main  # noqa: E402
from slackopt.errors import FileFormatError  # noqa: E402
from slackopt.torch import PlanRuntimeError, profile_step, run_loss  # noqa: E402
from slackopt.torch.export import (  # noqa: E402
    SACExportError,
    SACPolicy,
    load_policy,
    sac_policy,
)
from slackopt.torch.sac import SACRun, stock_policy_fn  # noqa: E402
from tests.helpers_sac import observed_step  # noqa: E402
from tests.torch_models import HFStyleLM, TinyGPT, TinyResNet, encoder, hf_batch, lm_loss  # noqa: E402

pytestmark = [pytest.mark.torch]


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """One intra-op thread: the same summation order in every step, so bit-for-bit
    gradient comparisons hold."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def profiled(model, inputs, loss_fn=None):
    torch.manual_seed(0)
    return profile_step(model, inputs, loss_fn, timing="roofline", gpu="a100")


def expressible_plan(inst, seed):
    """A plan with keep, swap and recomp drawn at random, then every tensor the export
    names set to keep until none is left (the export itself changes nothing)."""
    rng = np.random.default_rng(seed)
    d = rng.integers(0, 3, inst.n_saved).astype(np.int8)
    for k, n in enumerate(inst.saved_names):
        if d[k] == RECOMP and inst.tensor(n).recipe is None:
            d[k] = SWAP
    for _ in range(10):
        plan = Plan(d.copy(), inst.saved_names)
        try:
            return plan, sac_policy(inst, plan)
        except SACExportError as e:
            assert e.reasons and set(e.reasons) <= set(inst.saved_names)
            for k, n in enumerate(inst.saved_names):
                if n in e.reasons:
                    d[k] = KEEP
    raise AssertionError("no expressible plan after 10 rounds")


def region_span(run):
    r = run.replaying_region()
    return None if r is None else (r.first, r.last)


def check_policy_step(model, inputs, loss_fn, inst, plan, policy, reference):
    """One step under `policy`: the observed sets are the plan's and the loss and the
    gradients are `reference`'s (loss, grads of the unplanned step)."""
    torch.manual_seed(1)
    run = SACRun(model, policy)
    with run:
        loss, seen, grads = observed_step(model, inputs, loss_fn, inst,
                                          lambda: region_span(run))
    assert seen["saved"] == policy.tensors_with("keep")
    assert seen["offloaded"] == policy.tensors_with("swap")
    assert seen["dropped"] == policy.tensors_with("recomp")
    assert seen["recomputed"] == policy.tensors_with("recomp")
    rep = run.report()
    assert sorted(rep.offloaded) == sorted(rep.reloaded) == sorted(policy.tensors_with("swap"))
    assert rep.restored == []
    swap_bytes = sum(inst.tensor(n).size_bytes for n in policy.tensors_with("swap"))
    assert rep.d2h_bytes == rep.h2d_bytes == swap_bytes
    assert rep.replays == len(policy.regions)
    ref_loss, ref_grads = reference
    assert loss == ref_loss
    for a, b in zip(ref_grads, grads, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            assert torch.equal(a, b)
    return rep


def unplanned(model, inputs, loss_fn, inst):
    torch.manual_seed(1)
    loss, seen, grads = observed_step(model, inputs, loss_fn, inst)
    # the unplanned step holds every saved tensor and replays nothing
    assert seen["saved"] == set(inst.saved_names) and not seen["recomputed"]
    return loss, grads


TEST_MODELS = {
    "gpt": lambda: (TinyGPT(dropout=0.0), (torch.randint(0, 64, (2, 16)),), lm_loss),
    "gpt-dropout": lambda: (TinyGPT(dropout=0.1), (torch.randint(0, 64, (2, 16)),), lm_loss),
    "resnet": lambda: (TinyResNet(), (torch.randn(2, 3, 16, 16),), None),
    "encoder": lambda: (encoder(), (torch.randn(2, 8, 32),), None),
    "hf-style": lambda: (HFStyleLM(), hf_batch(), None),
}


@pytest.mark.parametrize("which", list(TEST_MODELS))
def test_test_models_run_the_plan_and_nothing_else(which):
    """tests/torch_models.py: three drawn plans (keep, swap and recomp mixed) and
    slackswap's plan at 0.5 P, each exported and run."""
    torch.manual_seed(0)
    model, inputs, loss_fn = TEST_MODELS[which]()
    inst = profiled(model, inputs, loss_fn)
    ref = unplanned(model, inputs, loss_fn, inst)
    counts = {"keep": 0, "swap": 0, "recomp": 0}
    for seed in range(3):
        plan, policy = expressible_plan(inst, seed)
        check_policy_step(model, inputs, loss_fn, inst, plan, policy, ref)
        for d in counts:
            counts[d] += len(policy.tensors_with(d))
    assert all(v > 0 for v in counts.values()), counts
    plan = solve(inst, "slackswap", 0.5).plan
    try:
        policy = sac_policy(inst, plan)
    except SACExportError as e:  # named, never changed (a call's kept outputs are named
        # with the recomputed one they go with)
        not_keep = {n for n, d in zip(plan.names, plan.decisions, strict=True) if d != KEEP}
        assert set(e.reasons) <= set(inst.saved_names) and set(e.reasons) & not_keep
    else:
        check_policy_step(model, inputs, loss_fn, inst, plan, policy, ref)


def _hf(cfg_cls, auto, **kw):
    """A model of transformers' `auto` class from a tiny config, without the key/value
    cache (a replay would update it again; SACRun refuses it)."""
    import transformers

    cfg = getattr(transformers, cfg_cls)(**kw)
    cfg.use_cache = False
    return getattr(transformers, auto).from_config(cfg).train()


def _tokens(vocab, shape=(2, 16)):
    ids = torch.randint(0, vocab, shape)
    return {"input_ids": ids, "labels": ids}


HF_FAMILIES = {
    # one tiny config per family of instances/configs/ (two layers, width 32)
    "llama": lambda: (_hf("LlamaConfig", "AutoModelForCausalLM", vocab_size=97,
                          hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2,
                          max_position_embeddings=32), _tokens(97)),
    "mistral": lambda: (_hf("MistralConfig", "AutoModelForCausalLM", vocab_size=97,
                            hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2, sliding_window=8,
                            max_position_embeddings=32), _tokens(97)),
    "mixtral": lambda: (_hf("MixtralConfig", "AutoModelForCausalLM", vocab_size=97,
                            hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2,
                            num_local_experts=4, num_experts_per_tok=2,
                            max_position_embeddings=32), _tokens(97)),
    "gpt2": lambda: (_hf("GPT2Config", "AutoModelForCausalLM", vocab_size=97, n_positions=32,
                         n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0, embd_pdrop=0.0,
                         attn_pdrop=0.0), _tokens(97)),
    "bert": lambda: (_hf("BertConfig", "AutoModelForMaskedLM", vocab_size=97, hidden_size=32,
                         intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                         max_position_embeddings=32, hidden_dropout_prob=0.0,
                         attention_probs_dropout_prob=0.0), _tokens(97)),
    "t5": lambda: (_hf("T5Config", "AutoModelForSeq2SeqLM", vocab_size=97, d_model=32,
                       d_ff=64, d_kv=8, num_layers=2, num_heads=4, dropout_rate=0.0,
                       decoder_start_token_id=0, pad_token_id=0),
                   {"input_ids": torch.randint(0, 97, (2, 12)),
                    "labels": torch.randint(0, 97, (2, 8))}),
    "vit": lambda: (_hf("ViTConfig", "AutoModelForImageClassification", hidden_size=32,
                        intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                        image_size=16, patch_size=4, num_labels=5,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
                    {"pixel_values": torch.randn(2, 3, 16, 16),
                     "labels": torch.randint(0, 5, (2,))}),
}


@pytest.mark.slow
@pytest.mark.parametrize("family", list(HF_FAMILIES))
def test_hugging_face_families_run_the_plan_and_nothing_else(family):
    """A tiny Hugging Face config of each transformers family of instances/configs/
    (random weights, nothing downloaded): two drawn plans, exported and run."""
    pytest.importorskip("transformers")
    torch.manual_seed(0)
    model, batch = HF_FAMILIES[family]()
    inst = profiled(model, batch)
    ref = unplanned(model, batch, None, inst)
    seen = set()
    for seed in range(2):
        plan, policy = expressible_plan(inst, seed)
        check_policy_step(model, batch, None, inst, plan, policy, ref)
        seen |= {d for d in ("keep", "swap", "recomp") if policy.tensors_with(d)}
    assert seen == {"keep", "swap", "recomp"}


@pytest.mark.slow
def test_sd_unet_family_runs_the_plan_and_nothing_else():
    """The diffusers UNet family (instances/configs/sd15-unet) from a tiny config."""
    diffusers = pytest.importorskip("diffusers")
    torch.manual_seed(0)
    unet = diffusers.UNet2DConditionModel(
        sample_size=8, in_channels=4, out_channels=4, layers_per_block=1,
        block_out_channels=(8, 16), down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=8,
        attention_head_dim=2, norm_num_groups=4).train()

    def loss_fn(out, x, t, text):
        return out.sample.float().pow(2).mean()

    inputs = (torch.randn(1, 4, 8, 8), torch.tensor([10]), torch.randn(1, 3, 8))
    inst = profiled(unet, inputs, loss_fn)
    ref = unplanned(unet, inputs, loss_fn, inst)
    plan, policy = expressible_plan(inst, 0)
    check_policy_step(unet, inputs, loss_fn, inst, plan, policy, ref)


@pytest.mark.slow
def test_llama_trains_three_steps_under_an_exported_policy(tmp_path):
    """Done-when of issue 45: a tiny Llama config trains three AdamW steps under a policy
    exported by `slackopt export` (read back from its file) with the losses of the
    unplanned run, and each step saves, offloads and recomputes exactly the plan's
    sets."""
    pytest.importorskip("transformers")
    import copy

    torch.manual_seed(0)
    model, batch = HF_FAMILIES["llama"]()
    inst = profiled(model, batch)
    plan, _ = expressible_plan(inst, 3)
    assert all(plan.counts()[d] > 0 for d in ("keep", "swap", "recomp")), plan.counts()
    io.save_instance(inst, tmp_path / "llama.json")
    io.save_plan(plan, tmp_path / "plan.json", instance=inst)
    assert main(["export", str(tmp_path / "plan.json"), "--instance",
                 str(tmp_path / "llama.json"), "--to", "torch-sac", "-o",
                 str(tmp_path / "policy.json")]) == 0
    policy = load_policy(tmp_path / "policy.json")
    assert policy.decisions == {n: ("keep", "swap", "recomp")[int(d)]
                                for n, d in zip(plan.names, plan.decisions, strict=True)}

    def train(m, run=None):
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
        losses, sets = [], []
        for _ in range(3):
            torch.manual_seed(1)
            loss, seen, _ = observed_step(
                m, batch, None, inst, (lambda: region_span(run)) if run else (lambda: None))
            opt.step()
            losses.append(loss)
            sets.append(seen)
        return losses, sets

    plain = copy.deepcopy(model)
    ref_losses, _ = train(plain)
    planned = copy.deepcopy(model)
    run = SACRun(planned, policy)
    with run:
        losses, sets = train(planned, run)
    assert losses == ref_losses and len(set(losses)) == 3  # the model learns, identically
    for seen in sets:
        assert seen["saved"] == policy.tensors_with("keep")
        assert seen["offloaded"] == policy.tensors_with("swap")
        assert seen["recomputed"] == seen["dropped"] == policy.tensors_with("recomp")
    assert run.report().steps == 3
    for a, b in zip(plain.parameters(), planned.parameters(), strict=True):
        assert torch.equal(a, b)


def test_offload_policy_of_torch_2_13_is_recompute():
    """The fact the runtime is built around: in eager selective checkpointing
    MUST_CPU_OFFLOAD caches nothing; the call is re-run in the backward pass like
    MUST_RECOMPUTE (a PyTorch that implements it fails here: revisit slackopt.torch.sac)."""
    import functools

    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.checkpoint import (
        CheckpointPolicy,
        checkpoint,
        create_selective_checkpoint_contexts,
    )

    calls = []

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            calls.append(func)
            return func(*args, **(kwargs or {}))

    x = torch.randn(4, 4, requires_grad=True)
    w = torch.randn(4, 4, requires_grad=True)
    # the backward pass runs two mm (the gradients of x and w), and the replay's mm
    for answer, mms in [(CheckpointPolicy.MUST_SAVE, 2),
                        (CheckpointPolicy.MUST_CPU_OFFLOAD, 3),
                        (CheckpointPolicy.MUST_RECOMPUTE, 3)]:
        ctx = functools.partial(create_selective_checkpoint_contexts,
                                lambda c, op, *a, ans=answer, **k: ans)
        out = checkpoint(lambda a, b: torch.mm(a, b).sin().sum(), x, w,
                         use_reentrant=False, context_fn=ctx)
        calls.clear()
        with Count():
            out.backward()
        assert calls.count(torch.ops.aten.mm.default) == mms, answer


def test_stock_policy_fn_needs_nothing_but_the_file(tmp_path):
    """A keep/recomp plan runs with stock torch.utils.checkpoint and a policy_fn read from
    the policy file alone (selective checkpointing's own numbering: an overload's k-th
    call in its region), with the sets and gradients of the full runtime."""
    import functools

    from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

    torch.manual_seed(0)
    model, inputs, loss_fn = TEST_MODELS["gpt"]()
    inst = profiled(model, inputs, loss_fn)
    ref = unplanned(model, inputs, loss_fn, inst)
    d = np.array([RECOMP if inst.tensor(n).recipe is not None else KEEP
                  for n in inst.saved_names], dtype=np.int8)
    try:
        policy = sac_policy(inst, Plan(d, inst.saved_names))
    except SACExportError as e:
        d = np.array([KEEP if n in e.reasons else x for n, x in zip(inst.saved_names, d,
                                                                  strict=True)], np.int8)
        policy = sac_policy(inst, Plan(d, inst.saved_names))
    assert policy.tensors_with("recomp") and not policy.tensors_with("swap")
    (tmp_path / "p.json").write_text(json.dumps(policy.to_json()))
    policy = load_policy(tmp_path / "p.json")
    mods = dict(model.named_modules())
    replaying = []
    for k, r in enumerate(policy.regions):
        mod, orig = mods[r.module], mods[r.module].forward

        class Flag:
            def __init__(self, inner, span):
                self.inner, self.span = inner, span

            def __enter__(self):
                replaying.append(self.span)
                return self.inner.__enter__()

            def __exit__(self, *exc):
                replaying.pop()
                return self.inner.__exit__(*exc)

        def ctx(k=k, r=r):
            fwd, rec = create_selective_checkpoint_contexts(stock_policy_fn(policy, k))
            return fwd, Flag(rec, (r.first, r.last))

        mod.forward = functools.partial(checkpoint, orig, use_reentrant=False, context_fn=ctx)
    try:
        torch.manual_seed(1)
        loss, seen, grads = observed_step(model, inputs, loss_fn, inst,
                                          lambda: replaying[-1] if replaying else None)
    finally:
        for r in policy.regions:
            del mods[r.module].forward
    assert seen["saved"] == policy.tensors_with("keep")
    assert seen["recomputed"] == seen["dropped"] == policy.tensors_with("recomp")
    assert loss == ref[0] and all(torch.equal(a, b) for a, b in zip(ref[1], grads,
                                                                     strict=True))


def test_what_a_policy_cannot_express_is_named_and_exits_2(tmp_path, capsys):
    """Recomputing a tensor made outside every region (the final norm of a GPT), and
    splitting one call's outputs between keep and recomp (LayerNorm's output and its
    statistics), are refused naming each tensor with its reason; the command line exits
    2 with the same names and writes nothing."""
    torch.manual_seed(0)
    model, inputs, loss_fn = TEST_MODELS["gpt"]()
    inst = profiled(model, inputs, loss_fn)
    d = np.zeros(inst.n_saved, dtype=np.int8)
    pos = {n: k for k, n in enumerate(inst.saved_names)}
    outside = [n for n in inst.saved_names if n.startswith("ln_f")]
    assert len(outside) == 3 and all(inst.tensor(n).recipe is not None for n in outside)
    for n in outside:
        d[pos[n]] = RECOMP  # the final LayerNorm: output and statistics recomputed
    split = [n for n in inst.saved_names if n.startswith("blocks.0.ln1")]
    assert len(split) == 3 and inst.tensor(split[0]).recipe is not None
    d[pos[split[0]]] = RECOMP  # the output recomputed, its mean and rstd kept
    plan = Plan(d, inst.saved_names)
    with pytest.raises(SACExportError) as err:
        sac_policy(inst, plan)
    assert set(err.value.reasons) == {*outside, *split}
    assert all("outside every checkpoint region" in err.value.reasons[n] for n in outside)
    assert "all its outputs" in err.value.reasons[split[0]]
    io.save_instance(inst, tmp_path / "i.json")
    io.save_plan(plan, tmp_path / "p.json", instance=inst)
    capsys.readouterr()
    rc = main(["export", str(tmp_path / "p.json"), "--instance", str(tmp_path / "i.json"),
               "-o", str(tmp_path / "out.json")])
    err_text = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err_text
    assert all(f"'{n}'" in err_text for n in (*outside, *split)), err_text
    assert not (tmp_path / "out.json").exists()


def test_unplanned_calls_cached_instead_of_replayed():
    """unplanned="save": the calls no decision or recipe covers are cached, so the
    replays re-run only what the plan recomputes; the observed sets and the gradients do
    not change, and the bytes the cache holds beyond the plan are reported."""
    torch.manual_seed(0)
    model, inputs, loss_fn = TEST_MODELS["gpt"]()
    inst = profiled(model, inputs, loss_fn)
    ref = unplanned(model, inputs, loss_fn, inst)
    plan, recompute = expressible_plan(inst, 0)
    save = sac_policy(inst, plan, unplanned="save")
    assert recompute.extra["replayed_ops"] > 0 and save.extra["replayed_ops"] == 0
    assert save.extra["cached_unplanned_bytes"] > recompute.extra["cached_unplanned_bytes"]
    rep = check_policy_step(model, inputs, loss_fn, inst, plan, save, ref)
    rebuilt = sum(1 for c in save.calls if c.policy == "MUST_RECOMPUTE")
    assert rep.replayed_calls <= rebuilt


def test_policy_file_round_trip_and_bad_files(tmp_path):
    torch.manual_seed(0)
    model, inputs, loss_fn = TEST_MODELS["resnet"]()
    inst = profiled(model, inputs, loss_fn)
    _, policy = expressible_plan(inst, 1)
    back = SACPolicy.from_json(json.loads(json.dumps(policy.to_json())))
    assert back == policy
    # BatchNorm then an in-place ReLU: cached whole, so the cache sees a mutation
    assert policy.allow_cache_entry_mutation
    for doc, field in [({"format": "x"}, "format"),
                       ({**policy.to_json(), "version": 99}, "version"),
                       ({**policy.to_json(), "regions": "layers"}, "regions")]:
        (tmp_path / "bad.json").write_text(json.dumps(doc))
        with pytest.raises(FileFormatError) as e:
            load_policy(tmp_path / "bad.json")
        assert e.value.field == field and str(tmp_path / "bad.json") in str(e.value)


def test_a_different_step_is_refused_naming_the_call():
    """Other input shapes give another op sequence (or sizes): refused before the plan
    runs astray, naming the call and the policy's."""
    torch.manual_seed(0)
    model, inputs, loss_fn = TEST_MODELS["gpt"]()
    inst = profiled(model, inputs, loss_fn)
    _, policy = expressible_plan(inst, 0)
    with pytest.raises(PlanRuntimeError, match="differs from the profiled one"):
        with SACRun(model, policy):
            run_loss(model, (torch.randint(0, 64, (2, 8)),), lm_loss).backward()
    other = encoder()
    with pytest.raises(PlanRuntimeError, match="has no module 'blocks.0'"):
        SACRun(other, policy)
    # the wrapper is gone after the run: the model trains as before
    run_loss(model, inputs, lm_loss).backward()
    assert "forward" not in model.blocks[0].__dict__


def test_export_command_writes_a_policy(tmp_path, capsys):
    torch.manual_seed(0)
    model, inputs, loss_fn = TEST_MODELS["hf-style"]()
    inst = profiled(model, inputs, loss_fn)
    plan, _ = expressible_plan(inst, 2)
    io.save_instance(inst, tmp_path / "i.json")
    io.save_plan(plan, tmp_path / "p.json", instance=inst)
    capsys.readouterr()
    rc = main(["export", str(tmp_path / "p.json"), "--instance", str(tmp_path / "i.json"),
               "-o", str(tmp_path / "pol.json"), "--json"])
    out = capsys.readouterr().out
    assert rc == 0
    doc = json.loads(out)
    assert doc["regions"] == ["gpt.blocks.0", "gpt.blocks.1"]
    assert doc["decisions"] == {d: plan.counts()[d] for d in ("keep", "swap", "recomp")}
    assert sum(doc["calls"].values()) == inst.n_fwd
    # an existing file is not replaced without --force; the instance is never the output
    for extra, words in [([], "exists"), (["--force", "-o", str(tmp_path / "i.json")],
                                          "reads")]:
        args = ["export", str(tmp_path / "p.json"), "--instance", str(tmp_path / "i.json"),
                "-o", str(tmp_path / "pol.json"), *extra]
        rc = main(args)
        err = capsys.readouterr().err
        assert rc == 2 and words in err, err
    assert Path(tmp_path / "i.json").read_text().startswith("{")
