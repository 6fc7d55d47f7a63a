"""The desk at the speed of a reviewer's hand: a reviewer's loop in a real browser (Debian's chromium), timed.

The juice trial is processed in the embedded default (no LLM: extraction by hand), then a reviewer on a 1366×768
screen opens a field, goes to page 6, and for several fields in a row selects a row of Table 6, uses it as the quote,
types the value and saves, then moves to the next field (``j``); last, a cell of the outcome grid is saved. Each action
is timed from the key or click to the page being ready again, p50 and p95, two ways in the same run:

- **in place** — the page as it is: a decision or a move replaces only the parts that change;
- **whole page** (the baseline) — every action reloads the page, as before (and as without JavaScript): the paper
  opens where the field's evidence is, or on page 1, so the reviewer goes back to page 6 each time.

The report says on which page the paper was after each action. ``python -m bench.desk``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.report import table, write_report

REPORT = Path(__file__).with_name("reports") / "desk.md"
KEY = "PMC1216327.pdf"
ROW = "Waterx 2.19* 1.63 1.78*** 1.80"  # Table 6, page 6
FIELDS = ["mean_control", "sd_control", "mean_treatment", "sd_treatment", "age_control", "age_treatment"]
ROUNDS = 2  # the loop over FIELDS, per way


def _prepare(folder: Path) -> dict[str, str]:
    from atlas_pipeline.ops.instance import project_file
    from atlas_pipeline_tests.support.corpus import corpus_file

    home, kb = folder / "home", folder / "kb"
    home.mkdir()
    kb.mkdir()
    shutil.copyfile(project_file("dagster.yaml"), home / "dagster.yaml")
    shutil.copyfile(corpus_file(f"rct/{KEY}"), kb / KEY)
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "ATLAS_KNOWLEDGE_BASE": str(kb),
        "ATLAS_ARTIFACTS": str(folder / "artifacts"),
        "ATLAS_EXPORTS": str(folder / "exports"),
        "ATLAS_REVIEW_USERS": str(folder / "users.json"),
        "ATLAS_LLM_GATE_DIR": str(folder / "gate"),
        "ATLAS_REVIEWER": "Ana Bench",
    }
    env.pop("ATLAS_REVIEW", None)
    atlas = Path(sys.executable).with_name("atlas")
    subprocess.run([str(atlas), "run"], env=env, cwd=folder, check=True, capture_output=True)
    return env


def _ready(page, in_place: bool, before: int) -> None:
    """The page is ready for the next action: swapped in place, or a new page loaded with its paper's words."""
    if in_place:  # (a page of another shape is written whole: counted in "whole pages in place")
        page.wait_for_function(f"!window.atlasBench || Number(document.body.dataset.swaps || 0) > {before}")
        page.wait_for_function("document.getElementById('viewer').dataset.wordsLoaded")
    else:
        page.wait_for_function(
            "!window.atlasBench && document.getElementById('viewer') && "
            "document.getElementById('viewer').dataset.wordsLoaded"
        )


def _swaps(page) -> int:
    """The page's count of in-place swaps, marking this page so that a reload is seen."""
    return int(page.evaluate("window.atlasBench = 1, Number(document.body.dataset.swaps || 0)"))


def _to_page_6(page) -> None:
    if page.evaluate("document.getElementById('viewer').dataset.page") != "6":
        page.fill("#page-number", "6")
        page.dispatch_event("#page-number", "change")
    page.wait_for_function("document.getElementById('viewer').dataset.wordsLoaded === '6'")


def _select_row(page) -> None:
    words = page.evaluate("[...document.querySelectorAll('#words .word')].map((w) => w.title)")
    wanted = ROW.split()
    first = next(i for i in range(len(words)) if words[i : i + len(wanted)] == wanted)
    for index in (first, first + len(wanted) - 1):
        page.locator(f"#words .word >> nth={index}").scroll_into_view_if_needed()
    start = page.locator(f"#words .word >> nth={first}").bounding_box()
    page.mouse.move(start["x"] + 2, start["y"] + 2)
    page.mouse.down()
    end = page.locator(f"#words .word >> nth={first + len(wanted) - 1}").bounding_box()
    page.mouse.move(end["x"] + 2, end["y"] + 2)
    page.mouse.up()
    page.click("#use-selection")


def _loop(page, site: str, in_place: bool) -> dict[str, list]:
    page.goto(f"{site}/documents/{KEY}?field={FIELDS[0]}")
    page.evaluate(f"sessionStorage.setItem('atlas-whole-pages', '{'0' if in_place else '1'}')")
    page.reload()
    page.wait_for_function("document.getElementById('viewer').dataset.wordsLoaded")
    times: dict[str, list] = {"save": [], "next field": [], "grid cell": [], "paper after": [], "whole pages": []}
    for _ in range(ROUNDS):
        for number, field in enumerate(FIELDS):
            if page.inner_text("#selected-field") != field:
                page.goto(f"{site}/documents/{KEY}?field={field}")
                page.wait_for_function("document.getElementById('viewer').dataset.wordsLoaded")
            _to_page_6(page)  # the reviewer goes to the table (once in place; after each action as a whole page)
            _select_row(page)
            page.fill("#correct-value", str(2.19 + number / 100))
            before = _swaps(page)
            started = time.perf_counter()
            page.press("#correct-value", "Enter")
            _ready(page, in_place, before)
            times["save"].append(time.perf_counter() - started)
            times["whole pages"].append(page.evaluate("!window.atlasBench"))
            times["paper after"].append(page.evaluate("document.getElementById('viewer').dataset.page"))
            before = _swaps(page)
            started = time.perf_counter()
            page.keyboard.press("j")
            _ready(page, in_place, before)
            times["next field"].append(time.perf_counter() - started)
            times["whole pages"].append(page.evaluate("!window.atlasBench"))
            times["paper after"].append(page.evaluate("document.getElementById('viewer').dataset.page"))
        for _ in range(3):
            cell = page.locator("#grid-outcomes input[name='cell:new:outcome']")
            cell.fill(f"Fecal losses {len(times['grid cell'])}")
            before = _swaps(page)
            started = time.perf_counter()
            page.click("#save-grid-outcomes")
            _ready(page, in_place, before)
            times["grid cell"].append(time.perf_counter() - started)
            times["whole pages"].append(page.evaluate("!window.atlasBench"))
            times["paper after"].append(page.evaluate("document.getElementById('viewer').dataset.page"))
    return times


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main() -> None:
    from atlas_pipeline_tests.support.browser import browser_page
    from scripted_servers.processes import free_port, review_server

    with tempfile.TemporaryDirectory(prefix="atlas-desk-") as tmp:
        folder = Path(tmp)
        print("processing the juice trial (skip mode) …", flush=True)
        env = _prepare(folder)
        port = free_port()
        results = {}
        with review_server({**env, "ATLAS_REVIEW_PORT": str(port)}, port, folder) as site:
            for name, in_place in (("whole page (baseline)", False), ("in place", True)):
                with browser_page(width=1366, height=768) as page:
                    print(f"{name} …", flush=True)
                    results[name] = _loop(page, site, in_place)
    rows = []
    for name, times in results.items():
        for action in ("save", "next field", "grid cell"):
            values = [t * 1000 for t in times[action]]
            rows.append([name, action, len(values), statistics.median(values), _percentile(values, 0.95)])
    baseline, in_place = results["whole page (baseline)"], results["in place"]
    ratio = [
        [action, statistics.median(baseline[action]) / statistics.median(in_place[action])]
        for action in ("save", "next field", "grid cell")
    ]
    papers = [
        [
            name,
            f"{sum(p == '6' for p in times['paper after'])} of {len(times['paper after'])}",
            f"{sum(times['whole pages'])} of {len(times['whole pages'])}",
        ]
        for name, times in results.items()
    ]
    write_report(
        REPORT,
        "The desk: a reviewer's loop in a real browser",
        [
            ("Per action (ms)", table(["way", "action", "n", "p50", "p95"], rows)),
            ("Whole page ÷ in place (p50)", table(["action", "×"], ratio)),
            ("The paper after each action", table(["way", "still on page 6", "a whole page loaded"], papers)),
        ],
    )


if __name__ == "__main__":
    main()
