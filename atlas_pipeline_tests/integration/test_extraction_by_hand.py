"""Extraction by hand in the default mode (no LLM at all): the juice trial processed in skip mode, then a person
extracts values on the review page — the paper's words and find-in-document to locate them, a quote made of words
selected on page 4 graded by the same grader as a model's, an outcome added and edited in the grid, a field rejected
as not reported — and the exports carry every value with its provenance, quote grade and page."""

import urllib.parse

import polars as pl

from atlas_pipeline.deployment import Deployment
from atlas_pipeline.review.decisions import load_decisions
from atlas_pipeline_tests.support.by_hand import processed_by_hand
from atlas_pipeline_tests.support.helpers import http_request, serve
from atlas_pipeline_tests.support.juice_trial import KEY


def _post(url: str, form: dict) -> tuple[int, str]:
    return http_request(url, urllib.parse.urlencode(form).encode())


def _words(site: str, page: int) -> list[str]:
    import json

    status, body = http_request(f"{site}/documents/{KEY}/pages/{page}/words")
    assert status == 200
    return [word["text"] for word in json.loads(body)]


def _selected(words: list[str], phrase: str) -> str:
    """The words a person drags across: the run of the page's words that reads ``phrase``."""
    wanted = phrase.split()
    for start in range(len(words) - len(wanted) + 1):
        if words[start : start + len(wanted)] == wanted:
            return " ".join(words[start : start + len(wanted)])
    raise AssertionError(f"{phrase!r} is not a run of the page's words")


def test_a_person_extracts_by_hand_in_the_default_mode_and_the_exports_carry_it(
    knowledge_base, settings_for, atlas_for, instance
):
    from atlas_pipeline.review_page.app import create_app

    settings, atlas = settings_for(knowledge_base), atlas_for(knowledge_base)
    assert not settings.llm.base_url and atlas.mode(atlas.load_rule()) == "skip"  # the embedded default
    defs, record = processed_by_hand(knowledge_base, settings, atlas, instance)
    assert record.mode == "skip" and all(v["tier"] == "not_extracted" for v in record.values().values())
    shown = {"sha256": record.sha256, "extraction_version": record.extraction_version, "reviewer": "ana"}

    with serve(create_app(Deployment.from_settings(settings), instance=lambda: instance)) as site:
        status, page = http_request(f"{site}/documents/{KEY}?field=age_control")
        assert status == 200 and "Nothing to review" not in page and 'id="by-hand-note"' in page
        assert 'id="approve"' not in page  # nothing a model gave to approve
        assert 'id="viewer"' in page and 'data-pages="8"' in page and 'id="grid-outcomes"' in page

        # find in the whole paper, then select the table row's words on page 4
        status, found = http_request(f"{site}/documents/{KEY}/find?q=" + urllib.parse.quote("Age (months)"))
        assert status == 200 and '"page": 4' in found.replace('"page":4', '"page": 4')
        quote = _selected(_words(site, 4), "Age (months) 10.27 4.75 10.27 4.14 11.09 4.00")
        status, _ = _post(
            f"{site}/documents/{KEY}/fields/age_control",
            {**shown, "action": "correct", "value": "11.09", "quote": quote, "quote_page": "4"},
        )
        assert status == 200
        # a value its quote does not say: recorded as the person's, but its quote is not verified
        _post(
            f"{site}/documents/{KEY}/fields/age_treatment",
            {**shown, "action": "correct", "value": "10.72", "quote": quote, "quote_page": "4"},
        )
        # the selection is the evidence: a row of Table 6 dragged across on page 6 is those words, graded on them
        words = _words(site, 6)
        row = _selected(words, "Waterx 2.19* 1.63 1.78*** 1.80")
        first = next(i for i in range(len(words)) if " ".join(words[i : i + 5]) == row)
        selected = {"quote": row, "quote_page": "6", "quote_words": f"{first}-{first + 4}"}
        for field, value in (("mean_control", "2.19"), ("sd_control", "2.91")):
            _post(f"{site}/documents/{KEY}/fields/{field}", {**shown, "action": "correct", "value": value, **selected})
        edited = {**selected, "quote": "Water 2.19* 1.63"}  # typed over after selecting: found in the text instead
        _post(f"{site}/documents/{KEY}/fields/n_control", {**shown, "action": "correct", "value": "30", **edited})
        checks = {d.field: d.quote_check for d in load_decisions(atlas.store(), KEY)}
        assert (checks["mean_control"].tier, checks["mean_control"].page) == ("verified", 6)
        assert checks["mean_control"].words == (first, first + 4) and checks["mean_control"].start is None
        assert checks["sd_control"].tier == "unverified" and checks["sd_control"].page == 6  # 2.91 is not there
        assert checks["n_control"].words is None and checks["n_control"].selected_on == 6
        status, page = http_request(f"{site}/documents/{KEY}?field=mean_control")
        assert 'data-page="6"' in page and page.count('class="highlight"') == 5  # exactly the five words
        assert checks["age_control"].tier == "verified" and checks["age_control"].page == 4
        assert checks["age_control"].selected_on == 4 and checks["age_control"].start is not None
        assert checks["age_treatment"].tier == "unverified"
        status, page = http_request(f"{site}/documents/{KEY}?field=age_control")
        assert 'id="person-quote-tier">verified</span> on page 4' in page

        # "not reported", said as such
        _post(f"{site}/documents/{KEY}/fields/funding_source", {**shown, "action": "reject", "reason": "not_reported"})
        status, body = _post(f"{site}/documents/{KEY}/fields/nct_number", {**shown, "action": "approve"})
        assert status == 409 and "no value was extracted for nct_number" in body

        # the outcome grid: a new row from Table 5 on page 5, then one of its cells changed, one emptied
        words = _words(site, 5)
        row_words = _selected(words, "White Grape Juice 47.5 38.9 Water * 26.5 27.4")
        start = next(i for i in range(len(words)) if " ".join(words[i : i + 9]) == row_words)
        cell_quote = {  # the cell chosen, the row's words selected on page 5: the cell's quote, as a field's
            "quote:new:mean_intervention": row_words,
            "quote_page:new:mean_intervention": "5",
            "quote_words:new:mean_intervention": f"{start}-{start + 8}",
        }
        new_row = {
            **cell_quote,
            "cell:new:outcome": "Duration of diarrhea",
            "cell:new:time_point": "after randomization",
            "cell:new:intervention": "White Grape Juice",
            "cell:new:comparator": "Water",
            "cell:new:mean_intervention": "47.5",
            "cell:new:sd_intervention": "38.9",
            "cell:new:mean_comparator": "26.5",
            "cell:new:sd_comparator": "27.4",
            "cell:new:n_comparator": "30",
        }
        status, page = _post(f"{site}/documents/{KEY}/groups/outcomes/grid", {**shown, **new_row})
        assert status == 200 and "outcomes grid: 0 cell(s) changed, entry 1001 added by ana" in page
        edits = {
            "cell:1001:sd_comparator": "27.5",
            "was:1001:sd_comparator": "27.4",
            "cell:1001:n_comparator": "",
            "was:1001:n_comparator": "30",
            "cell:1001:mean_comparator": "26.5",
            "was:1001:mean_comparator": "26.5",
        }
        status, page = _post(f"{site}/documents/{KEY}/groups/outcomes/grid", {**shown, **edits})
        assert status == 200 and "outcomes grid: 2 cell(s) changed by ana" in page
        checks = {d.field: d.quote_check for d in load_decisions(atlas.store(), KEY)}
        assert (checks["outcomes[1001].mean_intervention"].tier, checks["outcomes[1001].mean_intervention"].page) == (
            "verified",
            5,
        )
        quoted = {  # a value left as it was, given its quote: its evidence now, the value unchanged
            "cell:1001:sd_intervention": "38.9",
            "was:1001:sd_intervention": "38.9",
            "quote:1001:sd_intervention": row_words,
            "quote_page:1001:sd_intervention": "5",
            "quote_words:1001:sd_intervention": f"{start}-{start + 8}",
        }
        status, page = _post(f"{site}/documents/{KEY}/groups/outcomes/grid", {**shown, **quoted})
        assert status == 200 and "outcomes grid: 1 cell(s) changed by ana" in page
        assert page.count(" quoted") >= 2  # both cells show they have their quote
        status, page = _post(  # a whole row, analysable: its cell's quote goes with it to RevMan
            f"{site}/documents/{KEY}/groups/outcomes/grid",
            {**shown, **new_row, "cell:new:outcome": "Hospital stay", "cell:new:n_intervention": "30", **cell_quote},
        )
        assert status == 200 and "entry 1002 added" in page
        status, page = _post(
            f"{site}/documents/{KEY}/groups/outcomes/grid",
            {**shown, "cell:1001:sd_comparator": "many", "was:1001:sd_comparator": "27.5"},
        )
        assert status == 409 and "sd_comparator" in page  # a number's cell refuses words, and nothing is recorded
        before = len(load_decisions(atlas.store(), KEY))
        half = {"cell:1001:sd_comparator": "27.6", "was:1001:sd_comparator": "27.5", "cell:new:mean_comparator": "1"}
        status, page = _post(f"{site}/documents/{KEY}/groups/outcomes/grid", {**shown, **half})
        assert status == 409 and "needs at least its outcome" in page
        assert len(load_decisions(atlas.store(), KEY)) == before  # the changed cell was not recorded either

    assert defs.resolve_job_def("review_job").execute_in_process(partition_key=KEY, instance=instance).success
    assert defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
    fields = pl.read_parquet(f"{settings.project.exports}/atlas_fields.parquet")
    rows = {row["field"]: row for row in fields.filter(pl.col("document_key") == KEY).iter_rows(named=True)}
    assert len([n for n in rows if "[" not in n]) == len(atlas.load_template().fields)  # every field, by hand
    age = rows["age_control"]
    assert (age["final_value"], age["provenance"], age["decided_by"]) == ("11.09", "reviewer_added", "ana")
    assert (age["corrected_quote_tier"], age["corrected_quote_page"]) == ("verified", 4)
    assert rows["age_treatment"]["corrected_quote_tier"] == "unverified"
    assert (
        rows["funding_source"]["provenance"] == "rejected" and "not_reported" in rows["funding_source"]["decision_note"]
    )
    assert rows["nct_number"]["provenance"] == "awaiting_review"
    assert rows["outcomes[1001].sd_comparator"]["final_value"] == "27.5"
    assert rows["outcomes[1001].mean_intervention"]["provenance"] == "reviewer_added"
    assert rows["outcomes[1001].n_comparator"]["provenance"] == "rejected"
    assert rows["outcomes[1001].mean_intervention"]["corrected_quote_tier"] == "verified"
    results = pl.read_csv(f"{settings.project.exports}/atlas_revman_study_results.csv", infer_schema=False)
    notes = " ".join(results["Footnotes"].fill_null(""))
    assert f'"{row_words}"' in notes, notes  # the grid cell's quote in RevMan's footnote
