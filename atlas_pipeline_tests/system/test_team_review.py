"""Blind dual extraction in a real browser (Debian's chromium driven by playwright) on a corpus trial in the default
mode (no LLM): two extractors and an adjudicator log in. The second extractor, opening the document as it opens, sees
nothing of the first one's values — fields, grid, search, the Disagreements page, the JSON the list refreshes from —
until they complete their own; then both see the comparison; the adjudicator settles a field and a grid cell with both
quotes and notes in view; `atlas run` puts the settled values, once, into the exports and the analysis files.

Screenshots for docs/review.md are written to ``ATLAS_TEST_SCREENSHOTS`` when set (``make screenshots``)."""

import json
import os
import shutil
import subprocess

import polars as pl
import pytest

from atlas_pipeline.ops.instance import project_file
from atlas_pipeline.review.decisions import load_decisions
from atlas_pipeline.store.files import Store
from atlas_pipeline_tests.support.browser import browser_page, shoot
from atlas_pipeline_tests.support.corpus import corpus_file
from atlas_pipeline_tests.support.helpers import BIN
from atlas_pipeline_tests.support.juice_trial import KEY
from scripted_servers.processes import free_port, review_server, watched_folder_env

pytestmark = pytest.mark.daemon
PASSWORD = "grape juice trial"
OUTCOME = {
    "outcome": "Duration of diarrhea",
    "time_point": "after randomization",
    "intervention": "White Grape Juice",
    "comparator": "Water",
    "mean_intervention": "47.5",
    "mean_comparator": "26.5",
    "sd_comparator": "27.4",
    "n_intervention": "30",
    "n_comparator": "30",
}


def _atlas(env, *args, stdin: str | None = None) -> str:
    done = subprocess.run([str(BIN / "atlas"), *args], env=env, input=stdin, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _log_in(page, site: str, name: str) -> None:
    if page.locator("#logout").count():
        page.click("#logout")
    page.goto(f"{site}/login")
    page.fill("#login-name", name)
    page.fill("#login-password", PASSWORD)
    page.click("#login")
    page.wait_for_selector("#logged-in")


def _extract(page, site: str, n_control: str, quote: str, note: str, sd_intervention: str) -> None:
    """One extractor's pass, from the document as it opens: a field with its quote and note, the outcome's row."""
    page.goto(f"{site}/documents/{KEY}")
    page.wait_for_selector("#independent-note")
    for field, value in (("study_id", "Valois Bahia 2005"), ("n_control", n_control)):
        page.goto(f"{site}/documents/{KEY}?field={field}")
        page.fill("#correct-value", value)
        if field == "n_control":
            page.fill("#correct-quote", quote)
            page.fill("#correct-form input[name=note]", note)
        page.click("#correct")
        page.wait_for_selector(f"text=correct recorded for {field}")
    grid = page.locator("#grid-outcomes")
    for name, value in {**OUTCOME, "sd_intervention": sd_intervention}.items():
        grid.locator(f'input[name="cell:new:{name}"]').fill(value)
    page.click("#save-grid-outcomes")
    page.wait_for_selector("text=entry 100")


def _left_out(tmp_path, field: str) -> str:
    """Why the analysis files left ``field`` out (``atlas_analysis_excluded.csv``), or "" when it is in them."""
    excluded = pl.read_csv(tmp_path / "exports" / "atlas_analysis_excluded.csv", infer_schema=False)
    return " | ".join(excluded.filter(pl.col("field") == field)["reason"].to_list())


def test_two_extractors_stay_blind_until_both_complete_then_an_adjudicator_settles(tmp_path):
    home, kb = tmp_path / "home", tmp_path / "kb"
    home.mkdir()
    kb.mkdir()
    shutil.copyfile(project_file("dagster.yaml"), home / "dagster.yaml")
    shutil.copyfile(corpus_file(f"rct/{KEY}"), kb / KEY)
    env = {**os.environ, "DAGSTER_HOME": str(home), **watched_folder_env(tmp_path, kb)}
    _atlas(env, "run")
    for name, role in (("Ana", "extractor"), ("Ben", "extractor"), ("Dan", "adjudicator")):
        _atlas(env, "users", "add", name, "--role", role, "--password-stdin", stdin=PASSWORD + "\n")
    shared = _atlas(env, "users", "assign", "--round-robin")  # every study to two extractors in turn
    assert "1 document(s) of 1 study(ies) shared out among Ana, Ben" in shared, shared
    store = Store(str(tmp_path / "artifacts"))
    port = free_port()
    with (
        review_server({**env, "ATLAS_REVIEW_PORT": str(port)}, port, tmp_path) as site,
        browser_page(width=1366, height=900) as page,
    ):
        _log_in(page, site, "Ana")
        _extract(page, site, "30", "30 were given colored and flavored water (WA)", "Table 1: the water group", "38.9")
        shoot(page, "team-independent.png")
        page.click("#complete-extraction")
        page.wait_for_selector("#waiting-for")
        assert "Waiting for Ben" in page.inner_text("#waiting-for")
        ran = _atlas(env, "run")  # merged, indexed and exported while Ben works: none of it may reach him
        assert "review decisions merged for 1 document(s)" in ran, ran
        # … nor the analysis: uncompared, Ana's values wait for Ben's extraction, named
        assert pl.read_csv(tmp_path / "exports" / "atlas_escalc_continuous.csv").height == 0
        assert "waiting for Ben to complete their extraction" in _left_out(tmp_path, "sd_intervention")

        _log_in(page, site, "Ben")
        page.goto(f"{site}/documents/{KEY}")  # as it opens
        main = page.inner_text("main")
        assert "Your independent extraction" in main and "Table 1: the water group" not in main
        assert "hidden until Ana and Ben have all marked their extraction complete" in main
        assert (
            "Valois Bahia 2005" not in main and "38.9" not in main and page.locator("#entry-outcomes-1001").count() == 0
        )
        assert page.inner_text("#field-n_control [data-provenance]") == "awaiting_review"
        page.goto(f"{site}/documents/{KEY}?field=n_control&blind=")  # no way out of the independent pass
        assert "Table 1" not in page.inner_text("main") and page.locator("#blind-reviewers").count() == 0
        page.goto(f'{site}/search?q="Valois Bahia 2005"')
        assert page.locator("table.hits tbody tr").inner_text() == "Nothing matches."
        assert page.locator("#blind-search").count() == 1  # said always, never counted
        page.goto(f"{site}/disagreements")
        assert KEY not in page.inner_text("#consensus")
        listed = json.loads(page.evaluate("fetch('/api/documents').then(r => r.text())"))
        assert "Table 1" not in json.dumps(listed) and listed[0]["disagreements"] == 0
        page.goto(f"{site}/studies")
        page.click('#studies a[href^="/studies/"]')
        assert "Valois Bahia 2005" not in page.inner_text("#study-values")

        _extract(page, site, "29", "30 were given colored and flavored water (WA)", "one lost to follow-up", "39.8")
        assert page.locator("#entry-outcomes-1001").count() == 0  # his own row, numbered after Ana's: never hers
        page.click("#complete-extraction")
        page.wait_for_selector("#comparison-open")  # both complete: the comparison, for both of them
        _atlas(env, "run")  # compared: what they agree on is final, the difference is left out and named
        assert pl.read_csv(tmp_path / "exports" / "atlas_escalc_continuous.csv").height == 0
        assert "disputed (Ana: correct → 38.9; Ben: correct → 39.8)" in _left_out(tmp_path, "sd_intervention")
        page.goto(f"{site}/documents/{KEY}?field=n_control")
        assert "correct → 30" in page.inner_text("#audit") and "Ana" in page.inner_text("#audit")
        page.goto(f'{site}/search?q="Valois Bahia 2005"')  # the same search finds Ana's value now
        assert "study_id" in page.inner_text("table.hits")
        _log_in(page, site, "Ana")
        page.goto(f"{site}/documents/{KEY}")
        assert "difference(s)" in page.inner_text("#comparison-open")

        _log_in(page, site, "Dan")
        page.goto(f"{site}/disagreements")
        field = page.locator('#consensus tr[data-field="n_control"]')
        shown = field.inner_text()
        assert "Ana: 30" in shown and "Ben: 29" in shown
        assert "Note: Table 1: the water group" in shown and "Note: one lost to follow-up" in shown
        assert shown.count("30 were given colored and flavored water (WA)") == 2
        cell = page.locator('#consensus tr[data-field="outcomes[1001].sd_intervention"]')
        assert "Ana: 38.9" in cell.inner_text() and "Ben: 39.8" in cell.inner_text()
        assert "Duration of diarrhea" in cell.inner_text()  # the entry the cell belongs to
        assert page.locator('#consensus tr[data-field^="outcomes[1002]"]').count() == 0  # Ben's row is the same entry
        assert "model A" not in page.inner_text("#consensus")  # no model gave a value: none offered
        page.goto(f"{site}/analysis")  # the Analysis page names the dispute, and draws nothing from it
        left_out = page.inner_text("#excluded")
        assert "sd_intervention" in left_out and "disputed (Ana: correct → 38.9; Ben: correct → 39.8)" in left_out
        assert page.locator("svg.forest-plot").count() == 0
        page.goto(f"{site}/disagreements")
        shoot(page, "team-consensus.png")
        field.locator('button[data-who="Ana"]').click()
        page.wait_for_selector("text=correct recorded for n_control by Dan")
        page.goto(f"{site}/disagreements")
        page.locator('#consensus tr[data-field="outcomes[1001].sd_intervention"] button[data-who="Ana"]').click()
        page.wait_for_selector("text=correct recorded for outcomes[1001].sd_intervention by Dan")
        page.goto(f"{site}/team")
        assert page.inner_text('#team tr[data-reviewer="Ana"] [data-settled]') == "1"
        shoot(page, "team-progress.png")

    ran = _atlas(env, "run")
    assert "review decisions merged for 1 document(s)" in ran, ran
    fields = pl.read_parquet(tmp_path / "exports" / "atlas_fields.parquet").filter(pl.col("document_key") == KEY)
    rows = {row["field"]: row for row in fields.iter_rows(named=True)}
    assert (rows["n_control"]["final_value"], rows["n_control"]["decided_by"]) == ("30", "Dan")
    assert rows["outcomes[1001].sd_intervention"]["final_value"] == "38.9"
    assert not [name for name in rows if name.startswith("outcomes[1002]")]  # one entry, not two
    escalc = pl.read_csv(tmp_path / "exports" / "atlas_escalc_continuous.csv")
    assert escalc.height == 1 and escalc["sd1i"].to_list() == [38.9], escalc
    assert _left_out(tmp_path, "sd_intervention") == ""  # settled: in every file, named nowhere
    results = (tmp_path / "exports" / "atlas_revman_study_results.csv").read_text("utf-8-sig")
    assert "38.9" in results and "39.8" not in results
    decisions = load_decisions(store, KEY)
    blind = {d.reviewer: d.blind_to for d in decisions if d.field == "n_control"}
    assert blind == {"Ana": ["reviewers"], "Ben": ["reviewers"], "Dan": []}  # recorded by the server
