"""The notebooks run headless with small settings, draw their figures, and are committed
without outputs (notebooks/*.ipynb)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"

SMALL = {name: table["cell"].strip() for name, table in tomllib.loads(
    (NOTEBOOKS / "small-settings.toml").read_text(encoding="utf-8")).items()}
"""The small settings of each notebook (notebooks/small-settings.toml; the documentation
site renders the notebooks with them too)."""

CHECKS = {
    # What notebook 02's words say of its tables, checked in its kernel after it ran:
    # "-" exactly where no feasible plan (the throughput of the others), one label per
    # production planner run (the greedy knapsack named), and the bound sources its
    # status section describes.
    "02-compare-solvers.ipynb": """
for r in df.itertuples():
    cell = throughput_table.loc[r.solver, r.budget_fraction]
    assert (cell == "-") == (not r.feasible), (r.solver, cell)
    assert cell == "-" or cell == round(r.throughput * 100, 1), (r.solver, cell)
for _, g in prod.groupby("budget_fraction"):
    assert len(set(g["planner"])) == len(g), list(g["planner"])
assert 'torch-knapsack {"method":"greedy"}' in set(prod["planner"])
ga = df[(df["solver"] == "genetic") & df["lower_bound_s"].notna()]
assert (ga["bound_source"] == "T* (trivial)").all(), ga["bound_source"]
assert ga["status"].isin(["optimal", "bounded", "infeasible", "timeout"]).all(), ga["status"]
mi = df[(df["solver"] == "milp") & (df["lower_bound_s"] > df["ideal_time_s"] * (1 + 1e-9))]
assert (mi["bound_source"] == "certified").all(), mi["bound_source"]
""",
}


def test_every_notebook_has_small_settings() -> None:
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(SMALL)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_committed_without_outputs(name: str) -> None:
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, "one cell tagged 'parameters'"
    for c in nb.cells:
        if c.cell_type == "code":
            assert c.outputs == [] and c.execution_count is None
            assert "def solve(" not in c.source and "class " not in c.source


@pytest.mark.slow
@pytest.mark.notebooks
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.torch)  # torch-knapsack
                                  if n == "02-compare-solvers.ipynb" else n for n in sorted(SMALL)])
def test_notebook_runs(name: str) -> None:
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    i = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    nb.cells.insert(i + 1, nbformat.v4.new_code_cell(SMALL[name]))
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})
    if name in CHECKS:
        nb.cells.append(nbformat.v4.new_code_cell(CHECKS[name]))
    client.execute()  # raises CellExecutionError naming the cell on any error
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.get("output_type") in ("display_data", "execute_result")
              and "image/png" in o.get("data", {})]
    assert len(images) >= 2, "the notebook's figures were not displayed"


def test_notebook01_stalls_are_prefetch_waits() -> None:
    # Notebook 01 explains every stall it shows as a backward task waiting for an H2D
    # (prefetch) that starts no earlier than the end of the forward pass and costs the
    # copy latency plus bytes at W (at 0.85 W while a D2H is in flight). Checked here on
    # its sweep and its default plan (slackswap at 0.9 P), including the 20 MB swap inside
    # the 122 MB link budget that stalls.
    import numpy as np

    import slackopt
    from slackopt import KEEP, RECOMP, SWAP, Plan
    from slackopt.io import load_instance

    inst = load_instance(NOTEBOOKS.parent / "instances" / "teaching" / "chain8_a100-pcie4.json")
    link = inst.link
    tensors = {t.name: t for t in inst.tensors}
    rebuildable = np.flatnonzero(np.isfinite(inst.rho))
    order = rebuildable[np.argsort(-inst.rho[rebuildable], kind="stable")]
    evs = []
    for k in range(len(order) + 1):
        dec = np.full(inst.n_saved, KEEP, dtype=np.int8)
        dec[order] = RECOMP
        dec[order[:k]] = SWAP
        evs.append(slackopt.simulate(inst, Plan(dec, inst.saved_names), inst.P, trace=True))
    m = slackopt.budget_bytes(inst, 0.9)
    # its timeline: slackswap, swap everything, recompute everything at 0.9 P
    for plan in (slackopt.solve(inst, "slackswap", m).plan, Plan.uniform(inst, SWAP),
                 Plan.uniform(inst, RECOMP)):
        evs.append(slackopt.simulate(inst, plan, m, trace=True))
    stalled = {"h2d": 0, "d2h": 0}
    for ev in evs:
        copies = [e for e in ev.trace if e["lane"] in ("h2d", "d2h")]
        for s in (e for e in ev.trace if e["lane"] == "stall"):
            copy = [e for e in copies if abs(e["end_s"] - s["end_s"]) < 1e-12]
            assert len(copy) == 1, s  # the stall ends when one copy ends
            c = copy[0]
            stalled[c["lane"]] += 1
            if c["lane"] == "h2d":  # a prefetch the task reads: not before the backward pass
                assert c["start_s"] >= inst.forward_time_s - 1e-12
                readers = set(tensors[c["name"]].readers) | {
                    f"rebuild:{t.name}" for t in inst.tensors
                    if t.recipe is not None and c["name"] in t.recipe.inputs}
                assert s["name"] in readers, (s, c)
            dur = c["end_s"] - c["start_s"]
            fastest = link.copy_latency_s + c["bytes"] / link.bytes_per_s
            slowest = link.copy_latency_s + c["bytes"] / (link.duplex_factor * link.bytes_per_s)
            assert fastest - 1e-12 <= dur <= slowest + 1e-12
    assert stalled["h2d"] > 0 and stalled["d2h"] > 0
    # the one swap inside the link budget that stalls: 10 us + 19.97 MB / 25 GB/s
    one = evs[1]
    assert inst.s[order[:1]].sum() < link.bytes_per_s * inst.forward_time_s
    assert one.stall_bwd_s == pytest.approx(link.copy_latency_s + inst.s[order[0]] /
                                            link.bytes_per_s, rel=1e-9)
    slackswap = evs[len(order) + 1]
    assert slackswap.stall_bwd_s == pytest.approx(one.stall_bwd_s, rel=1e-9)
