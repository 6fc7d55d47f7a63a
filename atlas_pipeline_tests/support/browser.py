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
