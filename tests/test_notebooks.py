"""The notebooks run headless with small settings, draw their figures, and are committed
without outputs (notebooks/*.ipynb)."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"

SMALL = {
    "01-keep-swap-recompute.ipynb": 'BUDGET = 0.9\nSOLVER = "slackswap"',
    # Every registered solver, one budget, short limits.
    "02-compare-solvers.ipynb": ("BUDGETS = [0.7]\nSOLVERS = None\nTIME_LIMIT_S = 2.0\n"
                                 'PRODUCTION_INSTANCE = "instances/paper/bert-large_a100-pcie4'
                                 '.json"\nPRODUCTION_BUDGETS = [0.5]'),
    "03-reproduce-slackswap.ipynb": ('INSTANCES = ["gpt2-xl"]\nBUDGETS = [0.5]\n'
                                     'SOLVERS = ["slackswap", "vdnn"]'),
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


@pytest.mark.parametrize("name", sorted(SMALL))
def test_notebook_runs(name: str) -> None:
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    i = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    nb.cells.insert(i + 1, nbformat.v4.new_code_cell(SMALL[name]))
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()  # raises CellExecutionError naming the cell on any error
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.get("output_type") in ("display_data", "execute_result")
              and "image/png" in o.get("data", {})]
    assert len(images) >= 2, "the notebook's figures were not displayed"
