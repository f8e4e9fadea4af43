"""Regenerate the benchmark suite, instances/bench/: today's training steps, profiled fake.

Run (from anywhere; needs the [torch] and [bench] extras):

    python benchmarks/make_bench.py              # what is missing or out of date
    python benchmarks/make_bench.py --only 'llama-3-8b-4k_h100'   # a regex on names
    python benchmarks/make_bench.py --force      # everything again
    python benchmarks/make_bench.py --list       # the instances, nothing run

Each instance is one ``slackopt profile --fake`` command (in a fresh process, so that one
model's memory does not stay for the next), run from the repository root on a config
shipped in instances/configs/ (a Hugging Face config.json, read with ``hf:``, or a
factory of instances/bench/models.py given the config). A pipeline stage's spec
(:class:`Stage`) adds ``--schedule``, ``--stages``, ``--stage``, ``--microbatches``
(``--chunks``) and ``--hop-s``: the profile is one microbatch's pass and the file holds the
stage's schedule of units (slackopt.stage.build_stage). The instance is then written to
``instances/bench/<name>.json.gz`` (gzip, deterministic: ``mtime=0``) with
``meta["factory"]`` (a stage's ``meta["base"]["meta"]["factory"]``) made
repository-relative, so that the bytes do not depend on where the checkout lies.
``instances/bench/manifest.json`` lists every file with its model, config, tokens, batch,
GPU, link, saved tensors, P, a stage's schedule (``schedule``, ``stage``, ``stages``,
``microbatches``, ``chunks``, ``hop_s``), the sha256 of the bytes shipped and the
versions of slackopt, torch, transformers and diffusers that profiled it (``versions``),
and the generator: this script, its :data:`VERSION` (bump it when the outputs change),
and the package versions of the run that wrote the manifest last.

A file whose bytes match the manifest's sha256 (and whose entry holds the command of the
spec below, under the same VERSION) is skipped unless ``--force`` (its manifest row is
written anew from the file and the spec); each finished file is written,
and the manifest rewritten, before the next profile starts, so Ctrl-C loses at most the
instance under way. Rerunning with the same package versions gives the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "instances" / "bench"
MANIFEST = BENCH / "manifest.json"
SCRIPT = "benchmarks/make_bench.py"
VERSION = 1
"""Bump when the instances this script writes change (specs, naming, meta)."""

MODELS = "instances/bench/models.py"
CONFIGS = "instances/configs"

A100, H100, GH200 = ("a100", "pcie4"), ("h100", "pcie5"), ("gh200", "gh200-c2c")

PP_NOTE = ("Llama-3-70B at pipeline parallelism 8 (80 layers, 10 a stage), tensor "
           "parallelism 1: the first stage, the token embedding and decoder layers 0-9, "
           "without the final RMSNorm and head (the last stage's). One microbatch of 1 x "
           "8192 tokens is profiled; its backward starts from the gradient the next stage "
           "sends back (an input g, loss sum(h * g)). Under 1F1B the first stage holds the "
           "activations of up to 8 microbatches at once (stage i of p holds p - i), so a "
           "device budget B for the stage's activations is about B / 8 for this instance. "
           "The stage itself, 16 microbatches under 1F1B, is llama-3-70b-pp8-1f1b-s0-m16.")

LLAMA70 = ("Llama-3-70B at pipeline parallelism 8 (80 layers), tensor parallelism 1, one "
           "microbatch of 1 x 8192 tokens profiled and run {n} times under {schedule}: {what}")
MIXTRAL_STAGE = (
    "Mixtral-8x7B at pipeline parallelism 8 (32 layers, 4 a stage), tensor parallelism 1: "
    "the first stage, the token embedding and decoder layers 0-3 (8 experts, top-2, "
    "grouped_mm as in mixtral-8x7b-4k), without the final RMSNorm and head. One microbatch "
    "of 1 x 4096 tokens profiled and run 16 times under 1F1B (instances/bench/models.py:"
    "llama_first_stage on the Mixtral config: the same layout of embedding, layers and "
    "norm); its backward starts from the gradient the next stage sends back (loss "
    "sum(h * g)). Stage 0 of 8 holds up to 8 microbatches.")


@dataclass(frozen=True)
class Stage:
    """The pipeline stage a spec's profile is run as (slackopt.pipeline's arguments).

    schedule: a name of slackopt.pipeline.SCHEDULES. stage, stages, microbatches,
    chunks: i (0-based), p, m and v. boundary_bytes: the activation one microbatch passes
    between stages (B x S x hidden x 2 bytes in BF16); the hop is its copy time over
    InfiniBand NDR (:func:`slackopt.pipeline.hop_time_s`, the default interconnect), given
    as ``--hop-s`` because the profile's largest saved tensor, the default's stand-in for
    it, is an MLP activation 3.5 times larger.
    """

    schedule: str
    stage: int
    stages: int
    microbatches: int
    boundary_bytes: int
    chunks: int = 1

    @property
    def hop_s(self) -> float:
        """Seconds of one hop between stages."""
        from slackopt.pipeline import hop_time_s

        return hop_time_s(self.boundary_bytes)

    def options(self) -> list[str]:
        """The ``slackopt profile`` options that build the stage."""
        out = ["--schedule", self.schedule, "--stages", str(self.stages), "--stage",
               str(self.stage), "--microbatches", str(self.microbatches)]
        if self.chunks != 1:
            out += ["--chunks", str(self.chunks)]
        return out + ["--hop-s", repr(self.hop_s)]

    def manifest(self) -> dict[str, Any]:
        """The manifest keys of the stage."""
        return {"schedule": self.schedule, "stage": self.stage, "stages": self.stages,
                "microbatches": self.microbatches, "chunks": self.chunks,
                "hop_s": self.hop_s, "boundary_bytes": self.boundary_bytes}


@dataclass(frozen=True)
class Spec:
    """One model at one size, profiled on each of its targets.

    key: the name stem (the file is ``<key>_<gpu>-<link>.json.gz``). model: in words.
    config: repository-relative config.json. target: ``hf:CONFIG`` or ``FILE:FACTORY``.
    shapes: the ``-i`` shapes. params: the ``-p`` parameters. tokens, batch: the step's
    size (tokens per sequence, image, or latent positions; None for a CNN: sequences or
    images). targets: (GPU
    preset, link preset) pairs. notes: what the instance is, for the manifest. stage: the
    pipeline stage the profiled microbatch is run as (None: the single pass).
    """

    key: str
    model: str
    config: str
    target: str
    shapes: tuple[str, ...]
    tokens: int | None
    batch: int
    targets: tuple[tuple[str, str], ...]
    notes: str
    params: dict[str, Any] = field(default_factory=dict)
    stage: Stage | None = None

    def command(self, gpu: str, link: str, out: str) -> list[str]:
        """The ``slackopt profile`` arguments (after the program) for one target."""
        cmd = ["profile", "--fake", self.target, "--gpu", gpu, "--link", link,
               "--name", self.name(gpu, link), "-o", out, "--force"]
        for s in self.shapes:
            cmd += ["-i", s]
        for k, v in self.params.items():
            cmd += ["-p", f"{k}={v}"]
        return cmd + (self.stage.options() if self.stage else [])

    def name(self, gpu: str, link: str) -> str:
        """The instance name, also the file's stem."""
        return f"{self.key}_{gpu}-{link}"

    def shown(self, gpu: str, link: str) -> str:
        """The command line, as the manifest shows it, that writes the instance file."""
        return " ".join(shlex.quote(c) for c in
                        ["slackopt", *self.command(gpu, link, f"{self.name(gpu, link)}.json.gz")])


def _hf(name: str) -> str:
    return f"hf:{CONFIGS}/{name}/config.json"


def _cfg(name: str) -> str:
    return f"{CONFIGS}/{name}/config.json"


LLAMA3 = ("Llama-3-8B (32 layers, GQA 32/8 heads, SwiGLU 14336, vocabulary 128256), one "
          "sequence of {n} tokens, causal SDPA (flash) attention, the model's "
          "cross-entropy.")
SPECS: tuple[Spec, ...] = (
    Spec("llama-3-8b-4k", "Llama-3-8B", _cfg("llama-3-8b"), _hf("llama-3-8b"), ("1x4096",),
         4096, 1, (A100, H100, GH200), LLAMA3.format(n=4096)),
    Spec("llama-3-8b-16k", "Llama-3-8B", _cfg("llama-3-8b"), _hf("llama-3-8b"),
         ("1x16384",), 16384, 1, (H100, GH200), LLAMA3.format(n=16384)
         + " (beyond the config's 8192 positions: RoPE extrapolates, shapes are exact)"),
    Spec("llama-3-8b-64k", "Llama-3-8B", _cfg("llama-3-8b"), _hf("llama-3-8b"),
         ("1x65536",), 65536, 1, (H100, GH200), LLAMA3.format(n=65536)
         + " (long-context training, positions beyond 8192 as for 16k)"),
    Spec("llama-3-70b-pp8-stage0", "Llama-3-70B", _cfg("llama-3-70b"),
         f"{MODELS}:llama_first_stage", ("1x8192",), 8192, 1, (H100, GH200), PP_NOTE,
         {"config": _cfg("llama-3-70b"), "layers": 10}),
    Spec("mixtral-8x7b-4k", "Mixtral-8x7B", _cfg("mixtral-8x7b"), _hf("mixtral-8x7b"),
         ("1x4096",), 4096, 1, (H100, GH200),
         "Mixtral-8x7B (32 layers, 8 experts, top-2 routing), one sequence of 4096 "
         "tokens. The experts run as transformers' grouped_mm implementation (sort the "
         "token-expert pairs, grouped GEMMs): no data-dependent shapes, so it traces "
         "under fake tensors; its FLOPs assume dropless routing (every token reaches its "
         "two experts), the only assumption a value-free trace allows."),
    Spec("mistral-7b-4k", "Mistral-7B-v0.1", _cfg("mistral-7b"), _hf("mistral-7b"),
         ("1x4096",), 4096, 1, (A100, H100),
         "Mistral-7B-v0.1 (32 layers, GQA 32/8, SwiGLU 14336), one sequence of 4096 "
         "tokens: the sliding window (4096) covers the whole sequence, so attention is "
         "plain causal flash attention."),
    Spec("vit-h14-b32", "ViT-H/14", _cfg("vit-huge-patch14"), f"{MODELS}:vit", ("32",),
         257, 32, (A100, H100),
         "ViT-H/14 (32 layers, width 1280, 16 heads) classifying 32 images of 224 x 224 "
         "(256 patches + the class token = 257 tokens each) into 1000 classes, "
         "bidirectional SDPA attention, cross-entropy.",
         {"config": _cfg("vit-huge-patch14")}),
    Spec("t5-large-512-128-b8", "T5-large", _cfg("t5-large"), f"{MODELS}:t5",
         ("8x512", "8x128"), 512, 8, (A100, H100),
         "T5-large (24 encoder and 24 decoder layers, d_model 1024, ReLU FFN 4096), 8 "
         "sequences of 512 encoder tokens and 128 target tokens (teacher forcing), "
         "dropout 0.1 (the published config), cross-entropy. Attention adds a learned "
         "relative position bias (a float mask) and has dropout: the CPU trace takes SDPA's "
         "math path, so the attention probabilities are stored as eager attention stores "
         "them (a GPU's memory-efficient kernel would keep only O and the logsumexp).",
         {"config": _cfg("t5-large")}),
    Spec("sd15-unet-512px-b8", "Stable Diffusion 1.5 UNet", _cfg("sd15-unet"),
         f"{MODELS}:sd_unet", ("8",), 4096, 8, (A100, H100),
         "The Stable Diffusion 1.5 UNet (diffusers UNet2DConditionModel, 860M parameters) "
         "denoising 8 latents of 64 x 64 (512 x 512 pixel images; 4096 positions at the "
         "top level) with 77 x 768 text conditioning (the frozen CLIP encoder's output, "
         "an input), epsilon-prediction MSE loss.",
         {"config": _cfg("sd15-unet")}),
    Spec("gpt2-xl-1024-b8", "GPT-2 XL", _cfg("gpt2-xl"), _hf("gpt2-xl"), ("8x1024",),
         1024, 8, (A100, GH200),
         "GPT-2 XL (48 layers, width 1600, 25 heads, residual and embedding dropout 0.1), "
         "the paper's workload: 8 sequences of 1024 tokens (docs/workloads.md), the "
         "model's cross-entropy. Attention-probability dropout off (-p attn_pdrop=0.0), "
         "as in the paper's FlashAttention workload: with it, SDPA takes the math path "
         "that stores the 1024 x 1024 score matrices, which flash attention never does.",
         {"attn_pdrop": 0.0}),
    Spec("bert-large-512-b16", "BERT-Large", _cfg("bert-large"), _hf("bert-large"),
         ("16x512",), 512, 16, (A100, GH200),
         "BERT-Large (24 layers, width 1024, 16 heads, hidden dropout 0.1), the paper's "
         "workload: 16 sequences of 512 tokens; masked-LM head on every token (the labels "
         "are the input ids, not the paper's 15% of tokens). Attention-probability "
         "dropout off (-p attention_probs_dropout_prob=0.0), as for GPT-2 XL.",
         {"attention_probs_dropout_prob": 0.0}),
    Spec("llama-2-7b-4k-b2", "Llama-2-7B", _cfg("llama-2-7b"), _hf("llama-2-7b"),
         ("2x4096",), 4096, 2, (A100, GH200),
         "Llama-2-7B (32 layers, 32 heads, SwiGLU 11008), the paper's Llama-7B workload: "
         "2 sequences of 4096 tokens, the model's cross-entropy."),
    Spec("vgg16-b128", "VGG-16", "", f"{MODELS}:vgg16", ("128",), None, 128, (A100, GH200),
         "VGG-16 (configuration D, 138M parameters; in-place ReLU, no dropout, as the "
         "paper's workload), 128 images of 224 x 224, cross-entropy. Built by "
         "instances/bench/models.py:vgg16 (no config file: the network is its layer list)."),
)


_LLAMA70_CFG = {"config": _cfg("llama-3-70b")}
_HIDDEN_70B, _HIDDEN_MIXTRAL = 8192 * 8192 * 2, 4096 * 4096 * 2  # 1 x S x hidden, BF16
STAGE_SPECS: tuple[Spec, ...] = (
    Spec("llama-3-70b-pp8-1f1b-s0-m16", "Llama-3-70B", _cfg("llama-3-70b"),
         f"{MODELS}:llama_first_stage", ("1x8192",), 8192, 1, (H100, GH200),
         LLAMA70.format(n=16, schedule="1F1B", what=(
             "the first stage (stage 0), the token embedding and decoder layers 0-9, "
             "without the final RMSNorm and head; its backward starts from the gradient "
             "the next stage sends back (loss sum(h * g)). It holds up to 8 microbatches. "
             "The single-microbatch stand-in is llama-3-70b-pp8-stage0.")),
         {**_LLAMA70_CFG, "layers": 10}, Stage("1f1b", 0, 8, 16, _HIDDEN_70B)),
    Spec("llama-3-70b-pp8-1f1b-s7-m16", "Llama-3-70B", _cfg("llama-3-70b"),
         f"{MODELS}:llama_last_stage", ("1x8192",), 8192, 1, (H100, GH200),
         LLAMA70.format(n=16, schedule="1F1B", what=(
             "the last stage (stage 7), decoder layers 70-79, the final RMSNorm, the head "
             "and the model's cross-entropy, without the token embedding; its input is "
             "the hidden state from stage 6 (its gradient is sent back). It holds one "
             "microbatch at a time, but the loss's FP32 logits are large.")),
         {**_LLAMA70_CFG, "layers": 10}, Stage("1f1b", 7, 8, 16, _HIDDEN_70B)),
    Spec("llama-3-70b-pp8-interleaved-s3-v2-m16", "Llama-3-70B", _cfg("llama-3-70b"),
         f"{MODELS}:llama_middle_stage", ("1x8192",), 8192, 1, (H100, GH200),
         LLAMA70.format(n=32, schedule="interleaved 1F1B (2 model chunks a stage)", what=(
             "stage 3, which holds chunks 3 and 11 of 16 (layers 15-19 and 55-59); one "
             "chunk of 5 decoder layers is profiled (no embedding, norm or head; the "
             "hidden state comes in, its gradient goes back, loss sum(h * g)) and the "
             "stage runs it once per chunk and microbatch. It holds up to 17 "
             "microbatch-chunks.")),
         {**_LLAMA70_CFG, "layers": 5}, Stage("interleaved-1f1b", 3, 8, 16, _HIDDEN_70B, 2)),
    Spec("mixtral-8x7b-pp8-1f1b-s0-m16", "Mixtral-8x7B", _cfg("mixtral-8x7b"),
         f"{MODELS}:llama_first_stage", ("1x4096",), 4096, 1, (H100, GH200), MIXTRAL_STAGE,
         {"config": _cfg("mixtral-8x7b"), "layers": 4},
         Stage("1f1b", 0, 8, 16, _HIDDEN_MIXTRAL)),
)
"""The pipeline stages of the suite: several microbatches in flight (docs/model.md, "A
pipeline stage")."""


def instances() -> list[tuple[Spec, str, str]]:
    """Every (spec, gpu, link) of the suite, in manifest order."""
    return [(s, g, lk) for s in (*SPECS, *STAGE_SPECS) for g, lk in s.targets]


def sha256(path: Path) -> str:
    """Hex SHA-256 of the file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


PACKAGES = ("slackopt", "torch", "transformers", "diffusers")
"""The packages whose versions a profile depends on."""


def packages(gen: dict[str, Any]) -> dict[str, Any]:
    """The package versions of a generator record (:func:`versions`)."""
    return {k: gen.get(k) for k in PACKAGES}


def versions() -> dict[str, Any]:
    """The generator record of the manifest: the script, its VERSION and the versions of
    :data:`PACKAGES` of the run that wrote it last."""
    from importlib.metadata import PackageNotFoundError, version

    import slackopt

    out: dict[str, Any] = {"script": SCRIPT, "version": VERSION,
                           "slackopt": slackopt.__version__}
    for pkg in ("torch", "transformers", "diffusers"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def entry(spec: Spec, gpu: str, link: str, path: Path, made_with: dict[str, Any]
          ) -> dict[str, Any]:
    """The manifest row of a written file; `made_with`: the package versions of the run
    that profiled it (``versions``: files of one suite may come from different runs)."""
    from slackopt.io import load_instance

    inst = load_instance(path)
    return {"file": path.name, "name": inst.name, "model": spec.model,
            "config": spec.config or None, "tokens": spec.tokens, "batch": spec.batch,
            "gpu": gpu, "link": link, "d2h_bytes_per_s": inst.link.d2h_bytes_per_s,
            "h2d_bytes_per_s": inst.link.h2d_bytes_per_s, "saved_tensors": inst.n_saved,
            "P_bytes": inst.P, "ops": inst.n_ops,
            **(spec.stage.manifest() if spec.stage else {}),
            "command": spec.shown(gpu, link), "sha256": sha256(path),
            "file_bytes": path.stat().st_size, "versions": made_with, "notes": spec.notes}


def profile_one(spec: Spec, gpu: str, link: str, out: Path) -> None:
    """Run ``slackopt profile --fake`` for one target in a fresh process, then write the
    instance to `out` (gzip) with a repository-relative ``meta["factory"]``.

    Raises:
        RuntimeError: the profile command failed (its last output lines quoted).
    """
    from slackopt.io import load_instance, save_instance

    with tempfile.TemporaryDirectory(prefix="make_bench-") as tmp:
        raw = Path(tmp) / "raw.json"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
        run = subprocess.run([sys.executable, "-m", "slackopt.cli",
                              *spec.command(gpu, link, str(raw)), "--json"],
                             cwd=ROOT, env=env, capture_output=True, text=True)
        if run.returncode != 0:
            tail = "\n".join((run.stdout + run.stderr).strip().splitlines()[-5:])
            raise RuntimeError(f"{spec.name(gpu, link)}: slackopt profile failed "
                               f"(exit {run.returncode}):\n{tail}")
        inst = load_instance(raw)
    profiled = inst.meta["base"]["meta"] if spec.stage else inst.meta
    profiled["factory"] = spec.target  # relative to the repository root
    save_instance(inst, out, overwrite=True)


def write_manifest(rows: dict[str, dict[str, Any]], gen: dict[str, Any]) -> None:
    """instances/bench/manifest.json: the rows of the suite's files, in spec order
    (rows of files no spec names are dropped)."""
    order = [f"{s.name(g, lk)}.json.gz" for s, g, lk in instances()]
    doc = {"format": "slackopt-bench-manifest", "version": 1, "generator": gen,
           "instances": [rows[f] for f in order if f in rows]}
    tmp = MANIFEST.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, MANIFEST)
    write_table(doc["instances"])


TABLE_START = "<!-- table: written by benchmarks/make_bench.py from manifest.json -->"
TABLE_END = "<!-- end of table -->"


def write_table(rows: list[dict[str, Any]]) -> None:
    """Replace the table of instances/bench/README.md (between its two markers) with one
    row per manifest entry."""
    readme = BENCH / "README.md"
    if not readme.is_file():
        return
    text = readme.read_text(encoding="utf-8")
    if TABLE_START not in text or TABLE_END not in text:
        return
    lines = ["| file | model | tokens x batch | schedule | GPU | link D2H / H2D GB/s | ops | "
             "saved tensors | P GB | file kB |", "|---|---|---|---|---|---|---|---|---|---|"]
    sizes = {r["file"]: (BENCH / r["file"]).stat().st_size for r in rows}
    for r in rows:
        lines.append(
            f"| `{r['file']}` | {r['model']} | {r['tokens'] or '-'} x {r['batch']} | "
            f"{_schedule_cell(r)} | {r['gpu']} | "
            f"{r['link']} {r['d2h_bytes_per_s'] / 1e9:g} / {r['h2d_bytes_per_s'] / 1e9:g} | "
            f"{r['ops']} | {r['saved_tensors']} | {r['P_bytes'] / 1e9:.2f} | "
            f"{sizes[r['file']] / 1e3:.0f} |")
    total = sum(sizes.values())
    lines.append(f"\n{len(rows)} files, {total / 1e6:.2f} MB in all (gzip).")
    head, rest = text.split(TABLE_START, 1)
    tail = rest.split(TABLE_END, 1)[1]
    readme.write_text(f"{head}{TABLE_START}\n" + "\n".join(lines) + f"\n{TABLE_END}{tail}",
                      encoding="utf-8")


def _schedule_cell(row: dict[str, Any]) -> str:
    """A manifest row's schedule in the README's table: "-" for a single pass, else
    "1f1b p8 i0 m16" (and "v2" for chunks)."""
    if "schedule" not in row:
        return "-"
    chunks = f" v{row['chunks']}" if row.get("chunks", 1) != 1 else ""
    return (f"{row['schedule']} p{row['stages']} i{row['stage']} m{row['microbatches']}"
            f"{chunks}")


def up_to_date(row: dict[str, Any] | None, spec: Spec, gpu: str, link: str, path: Path,
               old_version: int | None) -> bool:
    """Whether the file is the one the manifest lists, made by this VERSION with the
    command the spec gives (the notes and other words of the row may change freely)."""
    if row is None or old_version != VERSION or not path.is_file():
        return False
    return row.get("command") == spec.shown(gpu, link) and sha256(path) == row.get("sha256")


def main(argv: list[str] | None = None) -> int:
    """The command line (the module docstring); returns the exit status: 0 done, 1 a
    profile failed, 2 a bad --only, 130 interrupted."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="regular expression: instance names to (re)make")
    ap.add_argument("--force", action="store_true", help="remake files that are up to date")
    ap.add_argument("--list", action="store_true", help="list the instances and exit")
    args = ap.parse_args(argv)
    todo = instances()
    if args.only:
        try:
            pat = re.compile(args.only)
        except re.error as e:
            print(f"make_bench: --only '{args.only}' is not a regular expression ({e})",
                  file=sys.stderr)
            return 2
        todo = [x for x in todo if pat.search(x[0].name(x[1], x[2]))]
        if not todo:
            print(f"make_bench: --only '{args.only}' matches no instance (see --list)",
                  file=sys.stderr)
            return 2
    if args.list:
        for s, g, lk in todo:
            print(f"{s.name(g, lk)}.json.gz  slackopt {' '.join(s.command(g, lk, '-'))}")
        return 0
    old = json.loads(MANIFEST.read_text()) if MANIFEST.is_file() else {}
    old_gen = old.get("generator") or {}
    old_version = old_gen.get("version")
    rows = {r["file"]: r for r in old.get("instances", [])}
    gen = versions()
    BENCH.mkdir(parents=True, exist_ok=True)
    n = len(todo)
    try:
        for i, (spec, gpu, link) in enumerate(todo, 1):
            path = BENCH / f"{spec.name(gpu, link)}.json.gz"
            if not args.force and up_to_date(rows.get(path.name), spec, gpu, link, path,
                                             old_version):
                print(f"[{i}/{n}] {path.name}: up to date", flush=True)
                made = rows[path.name].get("versions") or packages(old_gen)
                rows[path.name] = entry(spec, gpu, link, path, made)  # (the spec's words)
                continue
            print(f"[{i}/{n}] {path.name}: profiling ...", end="", flush=True)
            t0 = time.perf_counter()
            profile_one(spec, gpu, link, path)
            rows[path.name] = entry(spec, gpu, link, path, packages(gen))
            write_manifest(rows, gen)
            r = rows[path.name]
            print(f" {time.perf_counter() - t0:.0f} s, {r['saved_tensors']} saved tensors, "
                  f"P {r['P_bytes'] / 1e9:.2f} GB, {path.stat().st_size / 1e6:.2f} MB",
                  flush=True)
    except KeyboardInterrupt:
        print("\nmake_bench: interrupted; the files finished so far are kept and listed",
              file=sys.stderr)
        return 130
    except RuntimeError as e:
        print(f"\nmake_bench: {e}", file=sys.stderr)
        return 1
    write_manifest(rows, gen)
    return 0


if __name__ == "__main__":
    sys.exit(main())
