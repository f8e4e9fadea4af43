"""The documentation site builds: ``mkdocs build --strict`` (every page in the nav, no
broken link or anchor, the API reference generated from the docstrings), and the README
stays the short entry point it is meant to be (its examples run in test_readme.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built with ``mkdocs build --strict`` (docs/hooks/generate.py makes its
    figures, explorer page and executed notebooks, or reuses them from .cache/)."""
    pytest.importorskip("mkdocs")
    out = tmp_path_factory.mktemp("site")
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
                          "--site-dir", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=900,
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    return out


def test_the_site_builds_strictly(site: Path) -> None:
    for page in ("index", "model", "cli", "bounds", "api", "tutorial"):
        assert (site / ("index.html" if page == "index" else page)).exists()
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    assert "solve_budgets" in api and "BaseSolver" in api


def _images(html: str) -> list[str]:
    return re.findall(r'<img[^>]*\ssrc="([^"]+)"', html)


def test_the_pages_show_figures_made_by_slackopt(site: Path) -> None:
    """At least 12 figures drawn at build time (figures/*.png, from slackopt.plot and
    slackopt reproduce) across the pages, each one a PNG the page's link reaches; the
    tutorial's ten timelines and memory curves among them, and its explorer page."""
    shown: dict[str, list[str]] = {}
    for page in site.rglob("index.html"):
        for src in _images(page.read_text(encoding="utf-8")):
            if "figures/" in src:
                target = (page.parent / src).resolve()
                assert target.read_bytes()[:4] == b"\x89PNG", (page, src)
                shown.setdefault(page.parent.name, []).append(target.name)
    total = sum(len(v) for v in shown.values())
    assert total >= 12, shown
    for page in ("tutorial", "model", "bounds", "bench-command", "figures"):
        assert shown.get(page), f"no figure on {page}"
    steps = ("keep-all", "swap-all", "recompute-all", "slackswap", "milp")
    assert {f"tutorial-{s}-{k}.png" for s in steps for k in ("timeline", "memory")} <= set(
        shown["tutorial"])
    tutorial = (site / "tutorial" / "index.html").read_text(encoding="utf-8")
    assert 'src="../explore/chain8.html"' in tutorial
    page = site / "explore" / "chain8.html"
    assert 0 < page.stat().st_size < 10e6
    assert "<script src=" not in page.read_text(encoding="utf-8")  # Plotly inlined


def test_the_notebooks_are_on_the_site_with_their_outputs(site: Path) -> None:
    for nb in (ROOT / "notebooks").glob("*.ipynb"):
        html = (site / "notebooks" / nb.stem / "index.html").read_text(encoding="utf-8")
        # figures as inline PNGs, and the settings cell of this rendering
        assert html.count("data:image/png;base64") >= 2, nb.name
        assert "small-settings.toml" in html, nb.name


def test_every_page_is_in_the_nav_and_the_readme_links_it() -> None:
    import yaml

    def leaves(items: list) -> list[str]:
        out = []
        for item in items:
            value = next(iter(item.values()))
            out += leaves(value) if isinstance(value, list) else [value]
        return out

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8").replace(
        "!!python/name:", ""))["nav"]
    in_nav = leaves(nav)
    assert in_nav[:2] == ["index.md", "tutorial.md"]  # the tutorial first after home
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    notebooks = {f"notebooks/{p.name}" for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert set(in_nav) == pages | notebooks
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert all(f"(docs/{p})" in readme for p in pages - {"index.md", "api.md"})
    read_more = readme.split("## Read more", 1)[1]
    first_link = re.search(r"\]\((docs/[^)]+)\)", read_more)
    assert first_link and first_link.group(1) == "docs/tutorial.md"
    assert len(readme.splitlines()) <= 200
