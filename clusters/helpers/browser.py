"""The web view as its users run it: `kubectl trainjob ui` with someone's kubeconfig, and
Debian's Chromium (headless, driven by Playwright) on the page it serves."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from axe_playwright_python.sync_playwright import Axe  # type: ignore[import-untyped]
from playwright.sync_api import Browser, Page, sync_playwright

SCREENSHOTS = Path(os.environ.get("TJ_SCREENSHOTS", "build/screenshots"))


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "the web view's tests need Chromium (apt-get install chromium; ./run test does)"
    return found


@contextmanager
def view_server(kubeconfig: Path | None, *flags: str) -> Iterator[str]:
    """`kubectl trainjob ui --port 0 --no-browser` with `kubeconfig` (None: none, for
    --behind-proxy; a later --port wins); yields its address."""
    process = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "kubectl-trainjob"),
            *(["--kubeconfig", str(kubeconfig)] if kubeconfig else []),
            "ui",
            "--port",
            "0",
            "--no-browser",
            *flags,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert " at http://" in first, f"kubectl trainjob ui said: {first}{process.stdout.read()}"
        yield first.split(" at ", 1)[1].strip()
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        # --no-sandbox: the tests run as root, where Chromium's sandbox will not start.
        launched = playwright.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


@contextmanager
def page_of(url: str, headers: dict[str, str] | None = None) -> Iterator[Page]:
    """A laptop-sized page at `url`, with the browser's console errors and any request to
    another server than the view's made test failures. `headers` go with every request the
    page makes (as an authenticating proxy adds them)."""
    errors: list[str] = []
    elsewhere: list[str] = []
    parts = urllib.parse.urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc}"
    with browser() as b:
        page = b.new_page(viewport={"width": 1366, "height": 768}, extra_http_headers=headers)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on(
            "request",
            lambda r: None if r.url.startswith(origin + "/") else elsewhere.append(r.url),
        )
        page.goto(url)
        yield page
    assert not errors, f"the page raised: {errors}"
    assert not elsewhere, f"the page asked other servers: {elsewhere}"


def accessibility_problems(page: Page) -> list[str]:
    """What axe-core (WCAG 2 A and AA rules) finds wrong on the page as it is now."""
    found = Axe().run(page, options={"runOnly": ["wcag2a", "wcag2aa", "best-practice"]})
    return [
        f"{v['id']} ({v['impact']}): {v['help']}: "
        + "; ".join(
            n["target"][0] if isinstance(n["target"][0], str) else str(n["target"])
            for n in v["nodes"][:3]
        )
        for v in found.response["violations"]
    ]


def screenshot(page: Page, name: str, *, full_page: bool = True) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path
