"""The documentation site builds: ``mkdocs build --strict`` (every page in the nav, no
broken link or anchor, the API reference generated from the docstrings, no warning of
mkdocstrings or griffe about a docstring), and the README stays the short entry point it
is meant to be (its examples run in test_readme.py): at most 120 lines, and no paragraph
of it or of a docs page over 15 lines. The pages show at least 12 figures drawn by
slackopt at build time (docs/hooks/generate.py), the tutorial's claims hold, and the
notebooks are on the site with their outputs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

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


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built strictly and without a warning (docs/hooks/generate.py makes its
    figures, explorer page and executed notebooks, or reuses them from .cache/)."""
    pytest.importorskip("mkdocs")
    out = tmp_path_factory.mktemp("site")
    assert_built_cleanly(build_site(ROOT / "mkdocs.yml", out))
    return out


@pytest.mark.slow
def test_the_site_builds_strictly(site: Path) -> None:
    for page in ("index", "model", "cli", "bounds", "api", "tutorial"):
        assert (site / ("index.html" if page == "index" else page)).exists()
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    assert "solve_budgets" in api and "BaseSolver" in api


def _images(html: str) -> list[str]:
    return re.findall(r'<img[^>]*\ssrc="([^"]+)"', html)


@pytest.mark.slow
def test_the_pages_show_figures_made_by_slackopt(site: Path) -> None:
    """At least 12 figures drawn at build time (plots/*.png, from slackopt.plot and
    slackopt reproduce) across the pages, each one a PNG the page's link reaches; the
    tutorial's ten timelines and memory curves among them, and its explorer page."""
    shown: dict[str, list[str]] = {}
    for page in site.rglob("index.html"):
        for src in _images(page.read_text(encoding="utf-8")):
            if "plots/" in src:
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


@pytest.mark.slow
def test_the_notebooks_are_on_the_site_with_their_outputs(site: Path) -> None:
    for nb in (ROOT / "notebooks").glob("*.ipynb"):
        html = (site / "notebooks" / nb.stem / "index.html").read_text(encoding="utf-8")
        # figures as inline PNGs, and the settings cell of this rendering
        assert html.count("data:image/png;base64") >= 2, nb.name
        assert "small-settings.toml" in html, nb.name


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
    config = re.sub(r"(?ms)^hooks:.*?(?=^\S)", "", config)  # no generated pages here
    (tmp_path / "mkdocs.yml").write_text(config)
    res = build_site(tmp_path / "mkdocs.yml", tmp_path / "site")
    with pytest.raises(AssertionError, match="griffe: .*twoargs.py.*'a, b'"):
        assert_built_cleanly(res)
    assert res.returncode == 1


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


def _hook() -> Any:
    """docs/hooks/generate.py as a module (its tutorial instance, budget and settings)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("generate", ROOT / "docs" / "hooks" /
                                                  "generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_the_tutorial_says_what_its_plans_do() -> None:
    """Every number and claim of docs/tutorial.md (and of the bound-sources paragraph of
    docs/bounds.md) recomputed from the instance, budget and settings its figures use."""
    import slackopt
    from slackopt import KEEP, RECOMP, SWAP, Plan
    from slackopt.io import load_instance
    from slackopt.linkbudget import report

    hook = _hook()
    text = " ".join((ROOT / "docs" / "tutorial.md").read_text(encoding="utf-8").split())
    bounds = " ".join((ROOT / "docs" / "bounds.md").read_text(encoding="utf-8").split())
    inst = load_instance(hook.TUTORIAL_INSTANCE)
    m = slackopt.budget_bytes(inst, hook.TUTORIAL_BUDGET)
    assert f"M = {hook.TUTORIAL_BUDGET} P = {m / 1e6:.0f} MB" in text
    assert f"P = {inst.P / 1e9:.2f} GB" in text and f"T* = {inst.ideal_time_s * 1e3:.2f} ms" \
        in text and f"T_F = {inst.forward_time_s * 1e3:.2f} ms" in text
    assert f"about {report(inst)['forward_link_budget_bytes'] / 1e6:.0f} MB, the **link " \
        "budget**" in text

    def run(plan: Plan) -> Any:
        return slackopt.simulate(inst, plan, m, trace=True)

    keep = run(Plan.uniform(inst, KEEP))
    assert not keep.feasible and "'L7.f'" in keep.failure
    swap = run(Plan.uniform(inst, SWAP))
    assert swap.feasible and swap.stall_fwd_s > 0 and swap.stall_bwd_s > 0
    assert f"swap-all copies {swap.d2h_bytes / 1e6:.0f} MB" in text
    assert f"takes {swap.step_time_s * 1e3:.1f} ms, {swap.step_time_s / inst.ideal_time_s:.1f}" \
        " times T*" in text
    rec = run(Plan.uniform(inst, RECOMP))
    assert not rec.feasible and "'rebuild:L7.a'" in rec.failure
    names = list(inst.saved_names)
    assert Plan.uniform(inst, RECOMP).decisions[names.index("x")] == KEEP  # x cannot be rebuilt
    ss = slackopt.solve(inst, "slackswap", m)
    recomputed = [n for n, d in zip(names, ss.plan.decisions, strict=True) if d == RECOMP]
    assert ss.plan.counts() == {"keep": 5, "swap": 0, "recomp": 4}
    assert "recomputes four (" + ", ".join(f"`{n}`" for n in recomputed) + ")" in text
    ev = ss.evaluation
    assert ev.stall_fwd_s + ev.stall_bwd_s == 0
    assert f"{ev.step_time_s * 1e3:.2f} ms ({ev.throughput:.1%} of the ideal" in text
    milp = slackopt.solve(inst, "milp", m, seed=0, **hook.MILP_PARAMS)
    assert milp.status == "optimal"
    dec = dict(zip(names, milp.plan.decisions, strict=True))
    assert [n for n, d in dec.items() if d == SWAP] == ["L4.a"] and dec["L2.a"] == KEEP
    assert f"from {ev.recompute_s * 1e3:.2f} to {milp.evaluation.recompute_s * 1e3:.2f} ms" \
        in text
    step = milp.evaluation.step_time_s
    assert f"The step is {step * 1e3:.2f} ms ({milp.evaluation.throughput:.1%})" in text
    gaps = {k: step / v - 1 for k, v in milp.info["bounds"].items()}
    assert f"runs {step * 1e3:.2f} ms (red line)" in bounds
    low = [gaps[k] for k in ("deficit", "deficit_lagrange", "checkpoint_lp")]
    assert f"leave {min(low):.1%} to {step / inst.ideal_time_s - 1:.1%}".replace("%", "", 1) \
        in bounds
    assert f"the timing LP {gaps['timing_lp']:.1%}" in bounds and gaps["enumeration"] == 0
