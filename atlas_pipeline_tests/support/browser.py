"""A real headless browser for the page tests: Debian's chromium driven by playwright (no browser download)."""

import contextlib
import os
import shutil
from pathlib import Path

import pytest


@contextlib.contextmanager
def browser_page(width: int = 1400, height: int = 900):
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium")
    if executable is None:
        pytest.fail("chromium is not installed: `make test` installs it (scripts/install_system_deps.sh --tests)")
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True, args=args)
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            browser.close()


def shoot(page, name: str) -> None:
    """A screenshot for the README and docs, when ``ATLAS_TEST_SCREENSHOTS`` names a folder (``make screenshots``)."""
    folder = os.environ.get("ATLAS_TEST_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / name), full_page=False)


def drag_across(page, first: str, last: str, after: int = 0) -> None:
    """Select words on the viewer's page as a person does: press on ``first``, move to ``last``, release
    (``after``: the word index to look from, when the first word occurs earlier too)."""
    words = page.locator("#words .word")
    texts = words.evaluate_all("spans => spans.map(s => s.title)")
    start = texts.index(first, after)
    end = texts.index(last, start)
    a, b = words.nth(start).bounding_box(), words.nth(end).bounding_box()
    page.mouse.move(a["x"] + a["width"] / 2, a["y"] + a["height"] / 2)
    page.mouse.down()
    page.mouse.move(b["x"] + b["width"] / 2, b["y"] + b["height"] / 2, steps=8)
    page.mouse.up()
