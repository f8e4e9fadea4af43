"""The documentation site builds: ``mkdocs build --strict`` (every page in the nav, no
broken link or anchor, the API reference generated from the docstrings, no warning of
mkdocstrings or griffe about a docstring), and the README stays the short entry point it
is meant to be (its examples run in test_readme.py): at most 120 lines, and no paragraph
of it or of a docs page over 15 lines."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_README_LINES = 120
MAX_PARAGRAPH_LINES = 15


def build_site(config: Path, site: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of `config` into `site`, without ``-q``: mkdocs counts
    the warnings that --strict turns into a failure through its log, and ``-q`` raises
    the log level above them, so a quiet build exits 0 whatever it warns about."""
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f",
                           str(config), "--site-dir", str(site)], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def assert_built_cleanly(res: subprocess.CompletedProcess) -> None:
    warnings = [ln for ln in res.stderr.splitlines() if ln.startswith(("WARNING", "ERROR"))]
    assert res.returncode == 0 and not warnings, "\n".join(warnings) or res.stderr[-3000:]


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    assert_built_cleanly(build_site(ROOT / "mkdocs.yml", tmp_path / "site"))
    for page in ("index", "model", "cli", "bounds", "api"):
        assert (tmp_path / "site" / ("index.html" if page == "index" else page)).exists()
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    assert "solve_budgets" in api and "BaseSolver" in api


@pytest.mark.slow
def test_a_docstring_warning_fails_the_build(tmp_path: Path) -> None:
    """The check above on a site of one API page whose function documents two
    parameters as one entry (griffe warns twice): the build fails and names it."""
    pytest.importorskip("mkdocs")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# API\n\n::: twoargs.f\n")
    (tmp_path / "twoargs.py").write_text(
        'def f(a: int, b: int) -> int:\n    """Add.\n\n    Args:\n        a, b: the terms.\n'
        '    """\n    return a + b\n')
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    config = re.sub(r"(?ms)^nav:.*?(?=^\S)", "nav:\n  - API: index.md\n", config)
    (tmp_path / "mkdocs.yml").write_text(config)
    res = build_site(tmp_path / "mkdocs.yml", tmp_path / "site")
    with pytest.raises(AssertionError, match="griffe: .*twoargs.py.*'a, b'"):
        assert_built_cleanly(res)
    assert res.returncode == 1


def test_every_page_is_in_the_nav_and_the_readme_links_it() -> None:
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    in_nav = {next(iter(item.values())) for item in nav}
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert in_nav == pages
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert all(f"(docs/{p})" in readme for p in pages - {"index.md", "api.md"})


def paragraphs(text: str) -> list[tuple[int, int]]:
    """(first line, line count) of each paragraph of a markdown page: runs of non-blank
    lines outside fenced blocks that are not headings, tables, list items' first lines
    or HTML comments (a list item's continuation lines count with the item)."""
    out: list[tuple[int, int]] = []
    start, n, fenced = 0, 0, False
    for i, line in enumerate([*text.splitlines(), ""], start=1):
        if line.startswith("```"):
            fenced = not fenced
        new_item = re.match(r"\s*([-*+]|\d+\.)\s", line) is not None
        if fenced or not line.strip() or line.startswith(("#", "|", "<!--", "```")) \
                or new_item:
            if n:
                out.append((start, n))
            start, n = i, (1 if new_item and not fenced else 0)
            continue
        if not n:
            start = i
        n += 1
    return out


def test_no_paragraph_is_over_15_lines_and_the_readme_over_120() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= MAX_README_LINES
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    long = [f"{p.name}:{first} ({n} lines)" for p in pages
            for first, n in paragraphs(p.read_text(encoding="utf-8")) if n > MAX_PARAGRAPH_LINES]
    assert not long, long


def test_paragraphs_are_counted_as_a_reader_sees_them() -> None:
    page = ("# T\n\none\ntwo\n\n- item\n  more\n- next\n\n```text\na\nb\nc\n```\n"
            "| a |\n|---|\n\nlast\n")
    assert paragraphs(page) == [(3, 2), (6, 2), (8, 1), (18, 1)]
