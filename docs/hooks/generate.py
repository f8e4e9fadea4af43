"""MkDocs hook (mkdocs.yml, ``hooks:``): what the site shows that slackopt makes at build
time, from the files the repository ships, so no picture drifts from the code.

- ``plots/*.png``: every figure a page shows, drawn by :mod:`slackopt.plot` (the recipes
  are :data:`PAGES`: the tutorial, the model, the bounds, the benchmark and the paper's
  figures, these last from ``slackopt reproduce --quick``);
- ``explore/chain8.html``: a ``slackopt explore`` page (:mod:`slackopt.explore`), which the
  tutorial embeds;
- ``notebooks/*.ipynb``: the notebooks, executed headless with their small settings
  (notebooks/small-settings.toml, as the tests run them) and rendered with their outputs
  by mkdocs-jupyter.

All of it is made into a folder under ``.cache/slackopt-docs/`` named by a digest of
every file it depends on (slackopt's and the solvers' code, the instances, the
leaderboard table, the notebooks, this hook), so a rebuild with nothing changed (``mkdocs
serve``) reuses it and a change to any of them remakes it all.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "slackopt-docs"
TEACHING = ROOT / "instances" / "teaching"
TUTORIAL_INSTANCE = TEACHING / "chain8_a100-pcie4.json"
TUTORIAL_BUDGET = 0.7
"""The tutorial's instance and budget (fraction of P): keep-all and recompute-all fail
there, swap-all stalls, SlackSwap runs 14% above T*, milp proves a faster plan optimal."""
MILP_PARAMS = {"kick_plans": 0}
"""The tutorial's milp settings: its enumeration proves the optimum of 9 saved tensors;
the iterated local search would only cost build time."""
DEPENDS = ("slackopt", "solvers", "pyproject.toml", "instances/teaching", "instances/paper",
           "instances/small", "notebooks", "docs/hooks",
           "benchmarks/results/bench_leaderboard.csv.gz")
"""The files and folders whose content names the cache folder."""
log = logging.getLogger("mkdocs.hooks.slackopt")


# ============================================================================ recipes
def _tutorial(out: dict[str, Any]) -> None:
    """The tutorial's ten figures (timeline and memory of each step) and the explorer."""
    import slackopt
    from slackopt import KEEP, RECOMP, SWAP, Plan, explore, plot
    from slackopt.io import load_instance

    inst = load_instance(TUTORIAL_INSTANCE)
    m = slackopt.budget_bytes(inst, TUTORIAL_BUDGET)
    milp = slackopt.solve(inst, "milp", m, seed=0, **MILP_PARAMS)
    plans = {"keep-all": Plan.uniform(inst, KEEP), "swap-all": Plan.uniform(inst, SWAP),
             "recompute-all": Plan.uniform(inst, RECOMP),
             "slackswap": slackopt.solve(inst, "slackswap", m).plan,
             "milp": milp.plan}
    words = {"keep-all": "keep everything", "swap-all": "swap everything",
             "recompute-all": "recompute everything", "slackswap": "SlackSwap",
             "milp": f"milp ({milp.status})"}
    for name, plan in plans.items():
        ev = slackopt.simulate(inst, plan, m, trace=True)
        out[f"tutorial-{name}-timeline.png"] = plot.timeline(
            {words[name]: ev}, inst, width=8.0,
            title=f"{words[name]} under M = {TUTORIAL_BUDGET} P: " + ", ".join(
                f"{n} {k}" for k, n in plan.counts().items()))
        out[f"tutorial-{name}-memory.png"] = plot.memory_profile(
            {words[name]: ev}, inst, width=8.0)
    out["tutorial-costs.png"] = plot.cost_per_byte(inst)
    frames = explore.solve_grid(inst, ["slackswap", "checkpoint"])
    first = [f.fraction for f in frames].index(TUTORIAL_BUDGET)  # the page's budget first
    out["explore/chain8.html"] = explore.page(inst, frames, active=first).encode("utf-8")
    # the bounds page: this row's certified bounds by source against milp's plan
    names = {"deficit": "deficit bound", "deficit_lagrange": "deficit bound with copy times",
             "checkpoint_lp": "checkpoint LP", "timing_lp": "timing LP",
             "enumeration": "exact enumeration"}
    out["bounds-sources.png"] = plot.bound_gaps(
        milp.evaluation.step_time_s,
        {names.get(k, k): v for k, v in milp.info["bounds"].items()},
        ideal_s=inst.ideal_time_s,
        label="milp's plan",
        title=f"{inst.name} at 0.7 P: milp's plan against each certified bound source")


def _model(out: dict[str, Any]) -> None:
    """The model page: one tensor kept, one swapped, one recomputed."""
    import numpy as np

    import slackopt
    from slackopt import KEEP, RECOMP, SWAP, Plan, plot
    from slackopt.io import load_instance

    inst = load_instance(TUTORIAL_INSTANCE)
    dec = {"L1.a": SWAP, "L4.a": RECOMP}
    plan = Plan(np.array([dec.get(n, KEEP) for n in inst.saved_names], dtype=np.int8),
                inst.saved_names)
    ev = slackopt.simulate(inst, plan, inst.P, trace=True)
    out["model-three-decisions.png"] = plot.timeline(
        {"L1.a swapped, L4.a recomputed, the rest kept": ev}, inst, width=8.0,
        title=f"{inst.name}: the three decisions in one step (M = P)")
    out["model-three-decisions-memory.png"] = plot.memory_profile(
        {"L1.a swapped, L4.a recomputed": ev}, inst, width=8.0)


def _bench(out: dict[str, Any]) -> None:
    """The benchmark page: the leaderboard plot of the shipped runs."""
    import pandas as pd

    from slackopt import plot
    from slackopt.compare.bench import leaderboard

    df = pd.read_csv(ROOT / "benchmarks" / "results" / "bench_leaderboard.csv.gz")
    out["bench-leaderboard.png"] = plot.leaderboard(leaderboard(df))


def _paper(out: dict[str, Any]) -> None:
    """The figures page: what ``slackopt reproduce --quick`` draws."""
    import tempfile

    from slackopt.experiments.reproduce import reproduce

    with tempfile.TemporaryDirectory() as tmp:
        reproduce(tmp, quick=True, workers=max(1, min(2, os.cpu_count() or 1)),
                  progress=False)
        for name in ("figure4.png", "figure5.png", "figure6a.png", "figure6b.png",
                     "gpu_generations.png"):
            out[f"reproduce-{name}"] = (Path(tmp) / name).read_bytes()


PAGES: tuple[Callable[[dict[str, Any]], None], ...] = (_tutorial, _model, _bench, _paper)
"""The recipes: each adds {file name: matplotlib Figure, or bytes} to the dict it gets."""


# ============================================================================ notebooks
def _notebooks(folder: Path) -> list[str]:
    """Execute every notebook with its small settings into `folder`/notebooks/."""
    import nbclient
    import nbformat

    nbdir = ROOT / "notebooks"
    small = tomllib.loads((nbdir / "small-settings.toml").read_text(encoding="utf-8"))
    (folder / "notebooks").mkdir(parents=True, exist_ok=True)
    names = []
    for path in sorted(nbdir.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        i = next(i for i, c in enumerate(nb.cells)
                 if "parameters" in c.metadata.get("tags", []))
        cell = nbformat.v4.new_code_cell(
            "# The settings of this rendering (notebooks/small-settings.toml); delete this "
            "cell to run the defaults above.\n" + small[path.name]["cell"].strip())
        nb.cells.insert(i + 1, cell)
        nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                resources={"metadata": {"path": str(nbdir)}}).execute()
        nbformat.write(nb, folder / "notebooks" / path.name)
        names.append(f"notebooks/{path.name}")
    return names


# ============================================================================ the hook
def _digest() -> str:
    h = hashlib.sha256()
    for dep in DEPENDS:
        p = ROOT / dep
        files = sorted(p.rglob("*")) if p.is_dir() else [p]
        for f in files:
            if f.is_file() and "__pycache__" not in f.parts:
                h.update(str(f.relative_to(ROOT)).encode())
                h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _make(folder: Path) -> None:
    """Make every generated file into `folder` (a fresh one, renamed into place at the
    end so that an interrupted build leaves no half-made cache)."""
    from slackopt.plot import save

    tmp = folder.with_name(folder.name + ".part")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    out: dict[str, Any] = {}
    for recipe in PAGES:
        t0 = time.perf_counter()
        recipe(out)
        log.info("slackopt: made the figures of %s (%.0f s)", recipe.__name__.strip("_"),
                 time.perf_counter() - t0)
    for name, thing in out.items():
        dest = tmp / (name if "/" in name else f"plots/{name}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(thing, bytes):
            dest.write_bytes(thing)
        else:
            save(thing, dest, dpi=110)
    t0 = time.perf_counter()
    _notebooks(tmp)
    log.info("slackopt: executed the notebooks (%.0f s)", time.perf_counter() - t0)
    for old in folder.parent.iterdir():  # the files of older digests
        if old != tmp:
            shutil.rmtree(old, ignore_errors=True)
    tmp.rename(folder)


@event_priority(100)  # before mkdocs-jupyter's on_files sees the notebooks
def on_files(files: Files, config: Any) -> Files:
    """Add the generated files (made now unless the cache folder of this digest exists)."""
    folder = CACHE / _digest()
    if not folder.is_dir():
        _make(folder)
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            files.append(File(p.relative_to(folder).as_posix(), str(folder),
                              config["site_dir"], config["use_directory_urls"]))
    return files

