"""The explorer page and the tutorial in a real browser: headless Chromium (the system's,
through Playwright) opens them with every request off this machine refused, sees no
console error, moves the budget slider and sees the figure change. Skipped, with the
reason, where no Chromium or no Playwright is installed (.ci/run installs both)."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slackopt.cli import main

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
"""Chromium's launch flags that work on the development machine and in CI (as root, no
display, no network)."""


def _chromium() -> str | None:
    for name in (os.environ.get("SLACKOPT_CHROMIUM"), "chromium", "chromium-browser",
                 "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="Playwright is not installed (the [dev] extra)")
    exe = _chromium()
    if exe is None:
        pytest.skip("no Chromium installed (apt-get install -y chromium; .ci/run does)")
    with tempfile.TemporaryDirectory() as profile, sync_api.sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            profile, executable_path=exe, headless=True,  # Playwright adds --headless
            args=[f for f in FLAGS if f != "--headless"],
            viewport={"width": 1400, "height": 1100})
        yield ctx
        ctx.close()


class Watch:
    """A page's console errors, uncaught exceptions and the requests refused because they
    would leave this machine."""

    def __init__(self, ctx: Any) -> None:
        self.errors: list[str] = []
        self.refused: list[str] = []
        self.page = ctx.new_page()
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.route("**/*", self._route)

    def _route(self, route: Any) -> None:
        url = route.request.url
        if url.startswith(("file:", "data:", "blob:", "http://127.0.0.1:", "about:")):
            route.continue_()
        else:
            self.refused.append(url)
            route.abort()


def _state(frame: Any) -> dict[str, Any]:
    """What the explorer shows now: the slider's step, the title, the visible traces and
    the widths of the drawn timeline bars (read from the rendered SVG)."""
    return frame.evaluate("""() => {
        const gd = document.getElementById('explorer');
        const bars = [...gd.querySelectorAll('.barlayer path')].map(
            p => p.getBoundingClientRect().width.toFixed(1));
        return {active: gd.layout.sliders[0].active,
                title: gd.querySelector('.gtitle').textContent,
                visible: gd.data.map(t => t.visible !== false),
                bars: bars.join(',')};
    }""")


def _move_slider(frame: Any, page: Any, where: float) -> None:
    """Click the slider's rail at `where` (0: its left end, 1: its right end), as a user
    would."""
    rail = frame.locator(".slider-rail-rect").first
    rail.scroll_into_view_if_needed()
    box = rail.bounding_box()
    assert box is not None, "the slider is not drawn"
    page.mouse.click(box["x"] + 4 + where * (box["width"] - 8), box["y"] + box["height"] / 2)
    page.wait_for_timeout(300)


def _check_explorer(watch: Watch, frame: Any) -> None:
    frame.wait_for_selector("#explorer .slider-rail-rect", timeout=30_000)
    before = _state(frame)
    _move_slider(frame, watch.page, 0.0)  # budget 1.0 P
    after = _state(frame)
    assert after["active"] != before["active"]
    assert after["title"] != before["title"] and "1.00 P" in after["title"], after["title"]
    assert after["visible"] != before["visible"]
    assert after["bars"] != before["bars"], "the timeline's bars did not change"
    _move_slider(frame, watch.page, 1.0)  # budget 0.1 P
    assert "0.10 P" in _state(frame)["title"]
    assert watch.errors == [], watch.errors
    assert watch.refused == [], f"the page asked the network for {watch.refused}"


def test_explorer_page_offline(browser: Any, tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    assert main(["explore", str(ROOT / "instances" / "teaching" / "tiny-gpt_a100-pcie4.json"),
                 "-o", str(page), "--solvers", "slackswap,checkpoint"]) == 0
    assert page.stat().st_size < 10e6
    watch = Watch(browser)
    watch.page.goto(page.as_uri())
    _check_explorer(watch, watch.page)
    watch.page.close()


@pytest.fixture(scope="module")
def served_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The built site (mkdocs build --strict), served on 127.0.0.1 for the test."""
    pytest.importorskip("mkdocs")
    site = tmp_path_factory.mktemp("site")
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
                          "--site-dir", str(site)], cwd=ROOT, capture_output=True, text=True,
                         timeout=900, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join(timeout=10)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


def test_tutorial_in_the_browser(browser: Any, served_site: str) -> None:
    watch = Watch(browser)
    watch.page.goto(f"{served_site}/tutorial/")
    # every figure of the page loaded and is drawn at a readable size
    imgs = watch.page.evaluate("""() => [...document.querySelectorAll('article img')].map(
        i => ({src: i.getAttribute('src'), w: i.naturalWidth, shown: i.clientWidth}))""")
    assert len(imgs) >= 10, imgs
    for img in imgs:
        assert img["w"] > 300 and img["shown"] > 300, img
    frame_el = watch.page.wait_for_selector("iframe.explorer", timeout=30_000)
    frame = frame_el.content_frame()
    assert frame is not None
    _check_explorer(watch, frame)
    watch.page.close()
