"""The documentation site builds: ``mkdocs build --strict`` (every page in the nav, no
broken link or anchor, the API reference generated from the docstrings), and the README
stays the short entry point it is meant to be (its examples run in test_readme.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
                          "--site-dir", str(tmp_path / "site")], cwd=ROOT,
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    for page in ("index", "model", "cli", "bounds", "api"):
        assert (tmp_path / "site" / ("index.html" if page == "index" else page)).exists()
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    assert "solve_budgets" in api and "BaseSolver" in api


def test_every_page_is_in_the_nav_and_the_readme_links_it() -> None:
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    in_nav = {next(iter(item.values())) for item in nav}
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert in_nav == pages
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert all(f"(docs/{p})" in readme for p in pages - {"index.md", "api.md"})
    assert len(readme.splitlines()) <= 200
