"""The review page in a real headless browser (Debian's chromium driven by playwright) against a real Dagster instance
with the real daemon: a person opens a document, sees a field's quote highlighted on the PDF page, approves one
field and corrects another; the review sensor's run puts the decisions into the exports and task completion. A
document uploaded on the page shows its status changing until it is processed.

Screenshots for the README are written to ``ATLAS_TEST_SCREENSHOTS`` when set (``make screenshots``)."""

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from atlas_pipeline.ops.instance import project_file
from atlas_pipeline.review.decisions import load_decisions
from atlas_pipeline.store.files import Store
from atlas_pipeline_tests.support.browser import browser_page, drag_across, shoot
from atlas_pipeline_tests.support.corpus import corpus_file
from atlas_pipeline_tests.support.helpers import BIN, http_request, latest_metadata
from atlas_pipeline_tests.support.juice_trial import KEY, answer
from scripted_servers.processes import (
    dagster_daemon,
    free_port,
    review_server,
    scripted_openai_server,
    watched_folder_env,
)

pytestmark = pytest.mark.daemon
DEADLINE = 240


def _wait(what: str, probe, log: Path, timeout: float = DEADLINE):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(1)
    pytest.fail(f"{what} not within {timeout} s; daemon log:\n{log.read_text()[-4000:]}")


def test_a_person_reviews_in_the_browser_and_the_exports_follow(tmp_path):
    home, kb = tmp_path / "home", tmp_path / "kb"
    home.mkdir()
    kb.mkdir()
    shutil.copyfile(project_file("dagster.yaml"), home / "dagster.yaml")
    shutil.copyfile(corpus_file(f"rct/{KEY}"), kb / KEY)
    llm_port, review_port = free_port(), free_port()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        **watched_folder_env(tmp_path, kb),
        "ATLAS_LLM_BASE_URL": f"http://127.0.0.1:{llm_port}/v1",
        "ATLAS_LLM_MODEL": "scripted-model",
        "ATLAS_REVIEW_INTERVAL_SECONDS": "2",
        "ATLAS_REVIEW_PORT": str(review_port),
    }
    log = tmp_path / "daemon.log"
    dg.DagsterInstance.from_config(str(home)).dispose()  # storage created before three processes open it at once
    with (
        scripted_openai_server(tmp_path, port=llm_port) as llm,
        dagster_daemon(env, tmp_path),
        review_server(env, review_port, tmp_path) as site,
        browser_page() as page,
    ):
        llm.script(default={"content": answer()})
        instance = dg.DagsterInstance.from_config(str(home))
        _wait("the extraction", lambda: latest_metadata(instance, "document_review", KEY), log)

        page.goto(site + "/")
        page.fill("#reviewer-name", "Ana Reviewer")
        page.click('header form[action="/reviewer"] button')
        row = page.locator(f'tr[data-key="{KEY}"]')
        assert row.locator("[data-status]").inner_text() == "done"
        shoot(page, "review-documents.png")

        row.locator("a").click()
        page.click("#field-p_value a >> nth=0")  # choose a field: its evidence on the PDF page
        _wait_field(page, "p_value")
        assert page.inner_text("#selected-field") == "p_value"
        assert "(p = 0.006)" in page.inner_text("#quote")
        highlights = page.locator("#page .highlight")
        assert highlights.count() >= 1 and highlights.first.is_visible()
        image_width = page.eval_on_selector("#page img", "img => img.complete && img.naturalWidth")
        assert image_width and image_width > 500  # the page was rendered from the snapshot
        box, picture = highlights.first.bounding_box(), page.locator("#page img").bounding_box()
        assert picture["y"] <= box["y"] <= picture["y"] + picture["height"]
        shoot(page, "review-evidence.png")

        page.click("#approve")
        page.wait_for_selector("text=approve recorded for p_value by Ana Reviewer")
        assert page.inner_text("#field-p_value [data-provenance]") == "reviewer_approved"

        def approved_in_exports():
            path = tmp_path / "exports" / "atlas_fields.parquet"
            if not path.exists():
                return None
            rows = pl.read_parquet(path).filter((pl.col("document_key") == KEY) & (pl.col("field") == "p_value"))
            return rows.height and rows["provenance"][0] == "reviewer_approved"

        # a decision merged while the aggregates are being written is caught up by aggregates_freshness_sensor
        _wait("the approval in the exports", approved_in_exports, log)

        page.click("#field-n_control a >> nth=0")
        _wait_field(page, "n_control")
        page.fill("#correct-value", "29")
        page.fill("#correct-form input[name=note]", "one infant excluded after randomisation")
        page.click("#correct")
        page.wait_for_selector("text=correct recorded for n_control by Ana Reviewer")
        assert page.inner_text("#field-n_control [data-provenance]") == "reviewer_corrected"
        assert page.inner_text("#selected-field") != "n_control"  # on to the next field needing a person
        page.click("#field-n_control a >> nth=0")
        _wait_field(page, "n_control")
        audit = page.inner_text("#audit")
        assert "Ana Reviewer" in audit and "correct → 29" in audit
        shoot(page, "review-decided.png")

        # the review sensor merges the decisions; the automation sensor refreshes completion and exports
        def exported():
            path = tmp_path / "exports" / "atlas_fields.parquet"
            if not path.exists():
                return None
            fields = pl.read_parquet(path).filter(pl.col("document_key") == KEY)
            rows = {row["field"]: row for row in fields.iter_rows(named=True)}
            corrected = rows.get("n_control", {})
            return rows if corrected.get("provenance") == "reviewer_corrected" else None

        rows = _wait("the corrected value in the exports", exported, log)
        assert (rows["n_control"]["final_value"], rows["n_control"]["model_value"]) == ("29", "30")
        assert rows["n_control"]["decided_by"] == "Ana Reviewer"
        assert rows["p_value"]["provenance"] == "reviewer_approved" and rows["p_value"]["final_value"] == "0.006"
        completion = _wait(
            "decisions counted",
            lambda: (
                (c := json.loads((tmp_path / "artifacts" / "aggregates" / "task_completion.json").read_text()))
                and c["decisions"] == 2
                and c
            ),
            log,
        )
        assert completion["fields_by_provenance"]["reviewer_corrected"] == 1
        assert completion["fields_by_provenance"]["reviewer_approved"] == 1
        assert completion["documents_awaiting_review"] == 1  # the not-reported fields still wait for a person
        finished = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}
        review_runs = _wait(
            "the review runs to finish",
            lambda: (
                (runs := instance.get_runs(dg.RunsFilter(job_name="review_job")))
                and all(run.status in finished for run in runs)
                and runs
            ),
            log,
        )
        assert all(run.status == dg.DagsterRunStatus.SUCCESS for run in review_runs)

        # the header's search box: the corrected value is found, and leads to the document's review
        _wait("the search index", lambda: latest_metadata(instance, "search_index"), log)
        page.fill("header input[name=q]", '"grape juice"')
        page.press("header input[name=q]", "Enter")
        page.wait_for_selector("table.hits")
        hit = page.locator(f'table.hits a[href="/documents/{KEY}"]')
        assert hit.count() == 1 and page.locator("table.hits mark").count() >= 1
        shoot(page, "review-search.png")
        hit.click()
        assert page.inner_text("#selected-field")

        # a document uploaded on the page lands in the knowledge base; its status changes on the list as it runs
        page.goto(site + "/")
        page.set_input_files("input[name=documents]", str(corpus_file("html/plos_one_article.html")))
        page.click("text=Upload to the knowledge base")
        page.wait_for_selector("text=added uploads/plos_one_article.html")
        assert (kb / "uploads" / "plos_one_article.html").exists()
        key = _wait(
            "the uploaded document's partition",
            lambda: next((k for k in instance.get_dynamic_partitions("documents") if "plos" in k), None),
            log,
        )
        # what the list refreshes from, read as soon as the partition is there (a small HTML file may be done before
        # the list's next refresh shows it)
        listed = json.loads(http_request(f"{site}/api/documents")[1])
        seen = {row["status"] for row in listed if row["key"] == key}
        page.wait_for_selector(f'tr[data-key="{key}"]', timeout=30_000)  # the list adds it by itself, no reload
        status = page.locator(f'tr[data-key="{key}"] [data-status]')
        seen.add(status.inner_text())
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline and not seen & {"done", "partial", "incomplete", "failed"}:
            time.sleep(0.5)  # the page refreshes its statuses by itself
            seen.add(status.inner_text())
        assert seen & {"done", "partial", "incomplete", "failed"}, seen
        assert seen & {"pending", "extracting"}, seen  # it was seen waiting or running first


def test_a_reviewer_settles_two_extractors_differences_in_the_browser(tmp_path):
    """Two extractors (``ATLAS_LLM_SECOND_MODEL``) by `atlas run`: on the page a reviewer takes model B's value for one
    difference and enters a value of their own for another; `atlas run` merges both into the exports."""
    home, kb = tmp_path / "home", tmp_path / "kb"
    home.mkdir()
    kb.mkdir()
    shutil.copyfile(project_file("dagster.yaml"), home / "dagster.yaml")
    shutil.copyfile(corpus_file(f"rct/{KEY}"), kb / KEY)
    review_port = free_port()
    (tmp_path / "b").mkdir()
    with scripted_openai_server(tmp_path) as first, scripted_openai_server(tmp_path / "b") as second:
        first.script(default={"content": answer()})
        second.script(
            default={
                "content": answer(
                    n_control={"value": 29, "quote": "30 were given colored and flavored water (WA)"},
                    sd_control={"value": 27.0, "quote": "Water * | 26.5 | 27.4"},
                )
            }
        )
        env = {
            **os.environ,
            "DAGSTER_HOME": str(home),
            **watched_folder_env(tmp_path, kb),
            "ATLAS_LLM_BASE_URL": first.base_url,
            "ATLAS_LLM_MODEL": "model-a",
            "ATLAS_LLM_SECOND_MODEL": "model-b",
            "ATLAS_LLM_SECOND_BASE_URL": second.base_url,
            "ATLAS_REVIEW_PORT": str(review_port),
        }
        ran = subprocess.run([str(BIN / "atlas"), "run"], env=env, cwd=tmp_path, capture_output=True, text=True)
        assert ran.returncode in (0, 1), ran.stdout + ran.stderr
        assert f"{KEY}: " in ran.stdout and "with model B (model-b)" in ran.stdout, ran.stdout
        assert "agreement per field (model A vs B, model vs person, reviewers): " in ran.stdout
        with review_server(env, review_port, tmp_path) as site, browser_page() as page:
            page.goto(f"{site}/documents/{KEY}?field=n_control")
            page.fill("#reviewer-name", "Ana Reviewer")
            page.click('header form[action="/reviewer"] button')
            page.goto(f"{site}/disagreements")  # what waits for a person, and agreement per field
            waiting = page.locator("#extractors + p + table").inner_text()
            assert "n_control" in waiting and "sd_control" in waiting and "n_treatment" not in waiting
            assert "30 were given colored and flavored water" in waiting  # each extractor's value with its quote
            table = page.inner_text("#agreement-table")
            assert "n_control\t0.0% of 1" in table and "n_treatment\t100.0% of 1" in table, table
            page.goto(f"{site}/documents/{KEY}?field=n_control")
            assert "model B (model-b) gives 29" in page.inner_text("main")
            candidate = page.locator("#candidate-B")
            assert (
                "29" in candidate.inner_text() and "30 were given colored and flavored water" in candidate.inner_text()
            )
            shoot(page, "review-two-extractors.png")
            asked: list[str] = []

            def decline(dialog) -> None:
                asked.append(dialog.message)
                dialog.dismiss()

            page.once("dialog", decline)
            page.click("#approve")  # a flagged value: approved only once confirmed — here declined
            page.wait_for_timeout(500)
            assert asked and "model B (model-b) gives 29" in asked[0] and "Approve it anyway?" in asked[0]
            assert page.inner_text("#field-n_control [data-provenance]") == "awaiting_review"
            page.click("#use-candidate-B")  # the reviewer takes model B's value, with its quote
            page.wait_for_selector("text=correct recorded for n_control by Ana Reviewer")
            assert page.inner_text("#field-n_control [data-provenance]") == "reviewer_corrected"

            page.goto(f"{site}/documents/{KEY}?field=sd_control")
            assert "model B (model-b) gives 27" in page.inner_text("main")
            page.fill("#correct-value", "27.4")  # neither model's value as it stands: the reviewer's own reading
            page.click("#correct")
            page.wait_for_selector("text=correct recorded for sd_control by Ana Reviewer")

            # a rejection with its reason, then undone: the value counts as before, the log keeps both
            page.goto(f"{site}/documents/{KEY}?field=age_control")
            page.select_option("#reject-reason", "wrong_value")
            page.click("#reject")
            page.wait_for_selector("text=reject recorded for age_control by Ana Reviewer")
            assert page.inner_text("#field-age_control [data-provenance]") == "rejected"
            page.goto(f"{site}/documents/{KEY}?field=age_control")
            page.click("#undo")
            page.wait_for_selector("text=Ana Reviewer's reject of age_control undone")
            assert page.inner_text("#field-age_control [data-provenance]") == "model_verified"

            def become(name: str) -> None:
                page.fill("#reviewer-name", name)
                page.click('header form[action="/reviewer"] button')

            # two more reviewers check p_value independently: Ben by hand, blind to the models and to Ana and Cara
            become("Ben")
            page.goto(f"{site}/documents/{KEY}?field=p_value&blind=models")
            main = page.inner_text("main")
            assert "0.006" not in main and "hidden" in main and page.locator("#approve").count() == 0
            assert page.locator("#viewer #page-image").count() == 1  # the paper itself, page by page
            assert page.locator("#page .highlight").count() == 0  # and not where the model's quote is
            page.fill("#correct-value", "0.06")
            page.click("#correct")
            page.wait_for_selector("text=correct recorded for p_value by Ben")
            become("Cara")
            page.goto(f"{site}/documents/{KEY}?field=p_value&blind=1")
            page.click("#approve")
            page.wait_for_selector("text=approve recorded for p_value by Cara")

            # the consensus step: every candidate side by side, and an adjudicator's choice settles it
            become("Dan Adjudicator")
            page.goto(f"{site}/disagreements")
            row = page.locator('#consensus tr[data-field="p_value"]')
            shown = row.inner_text()
            assert "model A: 0.006" in shown and "Ben: 0.06 (blind to models and reviewers)" in shown
            assert "Cara: 0.006 (blind to reviewers)" in shown
            shoot(page, "review-consensus.png")
            row.locator('button[data-who="model A"]').click()
            page.wait_for_selector("text=approve recorded for p_value by Dan Adjudicator")
            page.goto(f"{site}/disagreements")
            assert page.locator('#consensus tr[data-field="p_value"]').count() == 0  # settled
        merged = subprocess.run([str(BIN / "atlas"), "run"], env=env, cwd=tmp_path, capture_output=True, text=True)
        assert "review decisions merged for 1 document(s)" in merged.stdout, merged.stdout + merged.stderr
    fields = pl.read_parquet(tmp_path / "exports" / "atlas_fields.parquet").filter(pl.col("document_key") == KEY)
    rows = {row["field"]: row for row in fields.iter_rows(named=True)}
    assert (rows["n_control"]["final_value"], rows["n_control"]["model_value"]) == ("29", "30")
    assert rows["n_control"]["decided_by"] == "Ana Reviewer"
    assert (rows["sd_control"]["final_value"], rows["sd_control"]["provenance"]) == ("27.4", "reviewer_corrected")
    assert rows["n_treatment"]["provenance"] == "model_verified"  # agreed and verified: no person needed
    assert (rows["p_value"]["final_value"], rows["p_value"]["decided_by"]) == ("0.006", "Dan Adjudicator")
    decisions = load_decisions(Store(str(tmp_path / "artifacts")), KEY)
    by = {d.reviewer: d for d in decisions if d.field == "p_value"}
    assert by["Ben"].blind_to == ["models", "reviewers"] and by["Cara"].blind_to == ["reviewers"]
    assert by["Dan Adjudicator"].role == "adjudicator" and by["Ben"].role == "reviewer"
    assert rows["age_control"]["provenance"] == "model_verified"  # the rejection was undone
    log = [
        d for d in load_decisions(Store(str(tmp_path / "artifacts")), KEY, withdrawn=True) if d.field == "age_control"
    ]
    assert [(d.action, d.reason) for d in log] == [("reject", "wrong_value"), ("withdraw", "")]
    assert (rows["n_treatment"]["agreement"], rows["n_treatment"]["second_value"]) == ("agreed", None)
    assert (rows["sd_control"]["agreement"], rows["sd_control"]["second_value"]) == ("disagreed", "27.0")


def _wait_field(page, name: str) -> None:
    page.wait_for_function(f"document.getElementById('selected-field').innerText === {name!r}")


def test_a_team_member_extracts_by_hand_in_the_default_mode_in_the_browser(tmp_path):
    """No LLM at all: `atlas run` processes the juice trial, an extractor logs in, pages through the PDF, finds a
    table, selects the words of a value on page 4 and saves it, fills an outcome in the grid, rejects a field with a
    reason and undoes it; `atlas run` then puts every value into the exports — as hers, not final: with accounts a
    value is final once two extractions are compared."""
    home, kb = tmp_path / "home", tmp_path / "kb"
    home.mkdir()
    kb.mkdir()
    shutil.copyfile(project_file("dagster.yaml"), home / "dagster.yaml")
    shutil.copyfile(corpus_file(f"rct/{KEY}"), kb / KEY)
    review_port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), **watched_folder_env(tmp_path, kb)}
    ran = subprocess.run([str(BIN / "atlas"), "run"], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    made = subprocess.run(
        [str(BIN / "atlas"), "users", "add", "Ana Lima", "--role", "extractor", "--password-stdin"],
        env=env,
        input="grape juice trial\n",
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    with (
        review_server({**env, "ATLAS_REVIEW_PORT": str(review_port)}, review_port, tmp_path) as site,
        browser_page(width=1366, height=768) as page,
    ):
        page.goto(f"{site}/documents/{KEY}")
        page.wait_for_selector("#login-form")  # everyone logs in once there are accounts
        page.fill("#login-name", "Ana Lima")
        page.fill("#login-password", "grape juice trial")
        page.click("#login")
        page.wait_for_selector("#by-hand-note")
        assert page.inner_text("#logged-in").startswith("Ana Lima")

        page.click("#field-age_control a >> nth=0")
        _wait_field(page, "age_control")  # in place: the field's part of the page swapped in, no reload
        assert page.inner_text("#selected-field") == "age_control" and page.locator("#approve").count() == 0
        page.click("#next-page")  # page through the paper
        page.wait_for_function("document.getElementById('viewer').dataset.wordsLoaded === '2'")
        assert page.eval_on_selector("#page-image", "img => img.getAttribute('alt')") == "page 2"
        page.click("#zoom-in")
        assert page.inner_text("#zoom-level") == "125%"
        page.click("#zoom-out")
        page.fill("#find-text", "Age (months)")
        page.click("#find-button")
        page.wait_for_function("document.getElementById('viewer').dataset.wordsLoaded === '4'")
        assert "p. 4" in page.inner_text("#find-results") and page.locator("#page .found").count() >= 1
        drag_across(page, "Age", "4.00")
        assert page.inner_text("#selected-text") == "Age (months) 10.27 4.75 10.27 4.14 11.09 4.00"
        shoot(page, "review-by-hand.png")
        page.click("#use-selection")
        assert page.input_value("#quote-page") == "4"
        page.fill("#correct-value", "11.09")
        page.click("#correct")
        page.wait_for_selector("text=correct recorded for age_control by Ana Lima")
        page.goto(f"{site}/documents/{KEY}?field=age_control")
        assert page.inner_text("#person-quote-tier") == "verified" and "on page 4" in page.inner_text("#person-quote")
        assert page.inner_text("#field-age_control [data-provenance]") == "reviewer_added"
        # on a 1366×768 screen the field and its buttons stay in view while the paper scrolls beside them
        page.fill("#find-text", "Duration of diarrhea")
        page.click("#find-button")
        page.click(".find-hit[data-page='2']")  # the first of the pages it is on
        page.wait_for_function("document.getElementById('viewer').dataset.wordsLoaded === '2'")
        page.eval_on_selector("#paper-scroll", "pane => { pane.scrollTop = pane.scrollHeight; }")  # read on down
        for button in ("#correct", "#reject", "#selected-field", "#find-text", "#next-page"):
            box = page.locator(button).bounding_box()
            assert box["y"] >= 0 and box["y"] + box["height"] <= 768, (button, box)

        # the desk in place: keys move between fields and a decision lands without a reload; the paper keeps its
        # page and its turn; a row of Table 6 selected on page 6 is the quote, graded on those words, on that page
        page.evaluate("window.samePage = true")
        page.goto(f"{site}/documents/{KEY}?field=mean_control")
        page.evaluate("window.samePage = true")
        page.fill("#page-number", "6")
        page.dispatch_event("#page-number", "change")
        page.wait_for_function("document.getElementById('viewer').dataset.wordsLoaded === '6'")
        page.keyboard.press("Escape")  # out of the page box: the keys are the desk's again
        page.keyboard.press("t")
        assert page.get_attribute("#viewer", "data-rotation") == "90"
        assert "rotate=90" in page.get_attribute("#page-image", "src")
        page.keyboard.press("t")
        page.keyboard.press("t")
        page.keyboard.press("t")  # a full turn: upright again
        assert page.get_attribute("#viewer", "data-rotation") == "0"
        page.keyboard.press("j")
        _wait_field(page, "sd_control")  # the next in the template's order
        page.keyboard.press("k")
        _wait_field(page, "mean_control")
        assert page.get_attribute("#viewer", "data-page") == "6"
        drag_across(page, "Waterx", "1.80")
        assert page.inner_text("#selected-text") == "Waterx 2.19* 1.63 1.78*** 1.80"
        page.click("#use-selection")
        page.fill("#correct-value", "2.19")
        page.press("#correct-value", "Enter")
        page.wait_for_selector("text=correct recorded for mean_control by Ana Lima")
        assert page.get_attribute("#viewer", "data-page") == "6"  # the next field has no quote: the paper stays
        page.keyboard.press("k")
        _wait_field(page, "mean_control")
        assert page.inner_text("#person-quote-tier") == "verified" and "on page 6" in page.inner_text("#person-quote")
        assert page.locator("#page .highlight").count() == 5  # exactly the words selected
        assert page.evaluate("window.samePage === true")  # no reload all along
        assert "field=mean_control" in page.url  # the address follows, for a reload or a link
        for button in ("#correct", "#page-image", "#selected-field"):  # 1366×768: the field and the paper in view
            box = page.locator(button).bounding_box()
            assert box["y"] >= 0 and box["y"] < 768, (button, box)

        # the outcome grid: a row by arm, typed from Table 5 on page 5
        grid = page.locator("#grid-outcomes")
        for name, value in {
            "outcome": "Duration of diarrhea",
            "time_point": "after randomization",
            "intervention": "White Grape Juice",
            "comparator": "Water",
            "mean_intervention": "47.5",
            "sd_intervention": "38.9",
            "mean_comparator": "26.5",
            "sd_comparator": "27.4",
        }.items():
            grid.locator(f'input[name="cell:new:{name}"]').fill(value)
        page.click("#save-grid-outcomes")
        page.wait_for_selector("text=outcomes grid: 0 cell(s) changed, entry 1001 added by Ana Lima")
        page.locator('input[name="cell:1001:sd_comparator"]').fill("27.4 ")  # unchanged: no decision
        page.locator('input[name="cell:1001:n_comparator"]').fill("30")
        page.click("#save-grid-outcomes")
        page.wait_for_selector("text=outcomes grid: 1 cell(s) changed by Ana Lima")
        # a cell takes its quote by selection, as a field does: chosen, the row's words dragged across on page 5
        page.click('input[name="cell:1001:mean_intervention"]')
        page.fill("#page-number", "5")
        page.dispatch_event("#page-number", "change")
        page.wait_for_function("document.getElementById('viewer').dataset.wordsLoaded === '5'")
        texts = page.locator("#words .word").evaluate_all("spans => spans.map(s => s.title)")
        row = next(i for i in range(len(texts)) if texts[i : i + 4] == ["White", "Grape", "Juice", "47.5"])
        drag_across(page, "White", "27.4", after=row)  # Table 5's row, not Table 4's header above it
        page.click("#use-selection")
        assert page.input_value('input[name="quote_page:1001:mean_intervention"]') == "5"
        page.eval_on_selector("#flash", "flash => { flash.textContent = ''; }")  # the same message comes again
        page.click("#save-grid-outcomes")
        page.wait_for_selector("text=outcomes grid: 1 cell(s) changed by Ana Lima")
        cell = page.locator('#entry-outcomes-1001 td:has(input[name="cell:1001:mean_intervention"])')
        assert "quoted" in cell.get_attribute("class") and "“White Grape Juice 47.5 38.9" in cell.locator(
            'input[name="cell:1001:mean_intervention"]'
        ).get_attribute("title")
        # the row is continuous: no events columns in it; its name stays in view while the grid scrolls sideways
        assert page.locator('#entry-outcomes-1001 input[name="cell:1001:events_intervention"]').count() == 0
        assert page.locator("#entry-outcomes-1001 td.off").count() > 0
        page.locator("#grid-outcomes").scroll_into_view_if_needed()
        grid = page.locator("#grid-outcomes").bounding_box()
        page.eval_on_selector("#grid-outcomes", "g => { g.scrollLeft = g.scrollWidth; }")
        assert page.eval_on_selector("#grid-outcomes", "g => g.scrollLeft") > 0  # it did scroll
        for name in ("outcome", "time_point", "intervention", "comparator"):
            box = page.locator(f'input[name="cell:1001:{name}"]').bounding_box()
            assert box and grid["x"] <= box["x"] < grid["x"] + grid["width"] / 2, (name, box, grid)
        page.eval_on_selector("#grid-outcomes", "g => { g.scrollLeft = 0; }")
        page.locator("#grid-outcomes").scroll_into_view_if_needed()
        shoot(page, "review-grid.png")

        # a rejection with its reason, then undone
        page.goto(f"{site}/documents/{KEY}?field=funding_source")
        page.select_option("#reject-reason", "not_reported")
        page.click("#reject")
        page.wait_for_selector("text=reject recorded for funding_source by Ana Lima")
        assert page.inner_text("#field-funding_source [data-provenance]") == "rejected"
        page.goto(f"{site}/documents/{KEY}?field=funding_source")
        page.click("#undo")
        page.wait_for_selector("text=Ana Lima's reject of funding_source undone")
        assert page.inner_text("#field-funding_source [data-provenance]") == "awaiting_review"
        page.goto(f"{site}/documents/{KEY}?field=nct_number")
        page.select_option("#reject-reason", "not_reported")
        page.click("#reject")
        page.wait_for_selector("text=reject recorded for nct_number by Ana Lima")
        page.goto(f"{site}/team")
        assert "Ana Lima" in page.inner_text('#team tr[data-reviewer="Ana Lima"]')

    ran = subprocess.run([str(BIN / "atlas"), "run"], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    fields = pl.read_parquet(tmp_path / "exports" / "atlas_fields.parquet").filter(pl.col("document_key") == KEY)
    rows = {row["field"]: row for row in fields.iter_rows(named=True)}
    assert (rows["age_control"]["decided_value"], rows["age_control"]["decided_by"]) == ("11.09", "Ana Lima")
    assert rows["age_control"]["corrected_quote_tier"] == "verified"
    assert rows["outcomes[1001].mean_intervention"]["decided_value"] == "47.5"
    assert rows["outcomes[1001].n_comparator"]["decided_value"] == "30"
    waiting = rows["outcomes[1001].n_comparator"]
    assert waiting["final_value"] is None and waiting["final_state"] == "extracting" and waiting["needs_review"]
    assert "its two extractors extract it" in waiting["waiting_for"]
    assert rows["funding_source"]["provenance"] == "awaiting_review"  # the rejection was undone
    assert rows["nct_number"]["provenance"] == "rejected" and rows["nct_number"]["decision_note"] == "not_reported"
