"""Packaging: the solvers/ folder installs as slackopt.solvers, never as a top-level
`solvers` package (issue 15: a user's own solvers.py must not shadow or be shadowed)."""

from __future__ import annotations

import tomllib
from importlib.metadata import entry_points
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _package_dirs() -> dict[str, Path]:
    """Every package in the repository (a folder with __init__.py) by its installed name."""
    mapping = {name: ROOT / folder for name, folder in CONFIG["package-dir"].items()}
    mapping.setdefault("slackopt", ROOT / "slackopt")
    out: dict[str, Path] = {}
    for name, folder in mapping.items():
        for init in folder.rglob("__init__.py"):
            rel = init.parent.relative_to(folder).parts
            if "__pycache__" not in rel:
                out[".".join((name, *rel))] = init.parent
    return out


def test_no_top_level_package_but_slackopt() -> None:
    assert {p.split(".")[0] for p in CONFIG["packages"]} == {"slackopt"}
    assert CONFIG["package-dir"] == {"slackopt.solvers": "solvers"}


def test_every_package_folder_is_installed() -> None:
    found = set(_package_dirs())
    assert "slackopt.solvers" in found
    assert found == set(CONFIG["packages"]), (
        f"add to [tool.setuptools] packages: {sorted(found - set(CONFIG['packages']))}; "
        f"remove: {sorted(set(CONFIG['packages']) - found)}")


def test_entry_points_name_slackopt_solvers_and_load() -> None:
    eps = entry_points(group="slackopt.solvers")
    assert eps, "no solvers registered: is slackopt installed (pip install -e .)?"
    for ep in eps:
        assert ep.value.startswith("slackopt.solvers."), ep.value
        cls = ep.load()
        assert cls.__module__.startswith("slackopt.solvers."), cls


def test_scipy_is_a_core_dependency() -> None:
    """The milp's certified LP bounds (solvers/milp/certify.py) need scipy, and so does
    torch-knapsack method=ilp (PyTorch's ilp_knapsack): a core dependency, which the
    [torch] extra therefore need not repeat."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(req.split(">")[0].strip() == "scipy" for req in project["dependencies"])
