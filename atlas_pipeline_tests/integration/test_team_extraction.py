"""A team that is who it says it is: with accounts, the server keeps two extractors independent (a third is refused,
a completed extraction is closed until the comparison), a workbook is recorded as the person who uploaded it (a row
naming anyone else refused, a workbook dropped in the inbox without an author not applied), and a study's choices and
links are an adjudicator's — refused to an extractor with a page that says why."""

import html
import json
import os
import subprocess
import urllib.parse

import dagster as dg
import openpyxl

from atlas_pipeline.defs.resources import AtlasResource
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.review.accounts import add_account
from atlas_pipeline.review.decisions import load_decisions
from atlas_pipeline.review.extraction_team import load_assignments
from atlas_pipeline.review.workbook_import import import_reports
from atlas_pipeline.store.files import Store
from atlas_pipeline_tests.support.by_hand import processed_by_hand
from atlas_pipeline_tests.support.helpers import BIN, http_request, multipart, post_form, serve, session_cookie
from atlas_pipeline_tests.support.juice_trial import KEY

PASSWORD = "a long passphrase"


def _workbook(exported, rows: dict[str, dict[str, str]], out) -> bytes:
    """The exported workbook with a reviewer's decision cells filled in, for this document's fields."""
    book = openpyxl.load_workbook(exported)
    sheet = book["fields"]
    header = [cell.value for cell in sheet[1]]
    column = {name: header.index(name) + 1 for name in header}
    for number in range(2, sheet.max_row + 1):
        key = (sheet.cell(number, column["document_key"]).value, sheet.cell(number, column["field"]).value)
        for name, value in rows.get(key[1], {}).items() if key[0] == KEY else ():
            sheet.cell(number, column[name]).value = value
    book.save(out)
    return out.read_bytes()


def test_the_server_keeps_the_team_honest(knowledge_base, settings_for, atlas_for, instance, tmp_path):
    from atlas_pipeline.review_page.app import create_app

    settings, atlas = settings_for(knowledge_base), atlas_for(knowledge_base)
    defs, record = processed_by_hand(knowledge_base, settings, atlas, instance)
    assert defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
    shown = {"sha256": record.sha256, "extraction_version": record.extraction_version}
    for name, role in (("Ana", "extractor"), ("Ben", "extractor"), ("Carla", "extractor"), ("Dan", "adjudicator")):
        add_account(settings.review.users, name, role, PASSWORD)
    store = atlas.store()
    # `atlas users assign --round-robin` as the docs say it, DAGSTER_HOME unset: every study to two extractors
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"} | {
        "ATLAS_REVIEW_USERS": settings.review.users,
        "ATLAS_ARTIFACTS": settings.project.artifacts,
        "ATLAS_KNOWLEDGE_BASE": settings.project.knowledge_base,
    }
    shared = subprocess.run(
        [str(BIN / "atlas"), "users", "assign", "--round-robin"], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert shared.returncode == 0, shared.stderr
    assert "1 document(s) of 1 study(ies) shared out among Ana, Ben, Carla" in shared.stdout
    assert load_assignments(store)[KEY].extractors == ("Ana", "Ben")

    with serve(create_app(Deployment.from_settings(settings), instance=lambda: instance)) as site:
        ana, ben, carla, dan = (session_cookie(site, name, PASSWORD)[1] for name in ("Ana", "Ben", "Carla", "Dan"))
        n_control = f"{site}/documents/{KEY}/fields/n_control"
        form = {"action": "assign", "key": KEY, "extractor": ["Ana", "Ben"]}  # the adjudicator shares out by hand
        status, body = post_form(f"{site}/team/assignments", form, dan)
        assert status == 200 and f"{KEY}: extracted by Ana and Ben" in body
        # every name is an extractor's account, and a document takes two: a ghost would keep it waiting for ever
        for names, said in (
            (["Ana", "ghost"], "no account 'ghost'"),
            (["Ana", "Dan"], "Dan is an adjudicator"),
            (["Ana"], "a document takes 2 extractors (ATLAS_REVIEW_EXTRACTORS); 1 named"),
            (["Ana", "Ben", "Carla"], "3 named"),
            (["Ana", "Ana"], "one person named twice"),
        ):
            status, body = post_form(
                f"{site}/team/assignments", {"action": "assign", "key": KEY, "extractor": names}, dan
            )
            assert status == 200 and said in html.unescape(body), (names, body[-300:])
        robin = {"action": "round_robin", "extractor": ["Ana", "ghost"]}
        assert "no account 'ghost'" in html.unescape(post_form(f"{site}/team/assignments", robin, dan)[1])
        assert load_assignments(store)[KEY].extractors == ("Ana", "Ben")  # none of them recorded
        assert post_form(n_control, {**shown, "action": "correct", "value": "30", "note": "Table 1"}, ana)[0] == 200
        assert post_form(n_control, {**shown, "action": "correct", "value": "29"}, ben)[0] == 200
        # a third is told who its extractors are, and nothing is recorded
        status, body = post_form(n_control, {**shown, "action": "correct", "value": "31"}, carla)
        assert status == 409 and "has its extractors already: Ana and Ben (assigned by Dan)" in body
        # Ben sees none of Ana's values, on the page or in the JSON the list refreshes from
        page = http_request(f"{site}/documents/{KEY}?field=n_control", headers={"Cookie": ben})[1]
        assert "Table 1" not in page and "correct → 30" not in page and 'id="independent-note"' in page
        assert (
            "Ana"
            not in http_request(f"{site}/documents/{KEY}?field=n_control", headers={"Cookie": ben})[1].split(
                'id="evidence-pane"'
            )[1]
        )
        listed = json.loads(http_request(f"{site}/api/documents", headers={"Cookie": ben})[1])
        assert listed[0]["disagreements"] == 0 and "Table 1" not in json.dumps(listed)  # they differ: not said

        # an adjudicator settles only once every extraction is complete, and never extracts what they settle
        status, body = post_form(n_control, {**shown, "action": "approve"}, dan)
        assert status == 409 and "is being extracted by Ana and Ben" in body
        # a completed extraction is closed until the comparison opens; reopened, it takes decisions again
        complete = f"{site}/documents/{KEY}/extraction"
        assert post_form(complete, {"action": "complete"}, ana)[0] == 200
        status, body = post_form(n_control, {**shown, "action": "correct", "value": "28"}, ana)
        assert status == 409 and "reopen it (before the comparison opens)" in body
        assert post_form(complete, {"action": "reopen"}, ana)[0] == 200
        assert post_form(complete, {"action": "complete"}, ana)[0] == 200

        # an extractor may neither choose a study's value nor link reports: a page says why and what to do
        for path, form in (
            (f"/studies/{urllib.parse.quote(KEY)}/values", {"field": "n_control", "from_report": KEY}),
            ("/studies/links", {"key": KEY, "action": "apart"}),
        ):
            status, body = post_form(f"{site}{path}", form, ben)
            assert status == 403 and 'id="refused-why"' in body and "takes an adjudicator" in body, path
        study = http_request(f"{site}/studies", headers={"Cookie": ben})[1]
        assert "take this" not in study and 'id="link-form"' not in study

        # Ben's workbook: recorded as Ben; a row naming someone else is refused, never recorded under that name
        filled = _workbook(
            tmp_path / "exports" / "atlas_documents.xlsx",
            {
                "age_control": {"decision": "correct", "corrected_value": "11.09"},
                "age_treatment": {"decision": "correct", "corrected_value": "10.27", "reviewer": "Carla"},
                "male_percent": {"decision": "reject", "reject_reason": "not_reported", "reviewer": "Dan"},
                "funding_source": {"decision": "correct", "corrected_value": "none", "reviewer": "ben"},
            },
            tmp_path / "ben.xlsx",
        )
        body, headers = multipart("workbook", "ben.xlsx", filled)
        status, page = http_request(f"{site}/imports", body, {**headers, "Cookie": ben})
        assert status == 200 and "(uploaded by Ben): 1 decision(s) applied, 3 row(s) refused" in page
        (report,) = import_reports(store)[0]
        assert report.author == "Ben"
        refused = {row.field: row.reason for row in report.refused}
        assert "the row names 'Carla', but Ben uploaded this workbook" in refused["age_treatment"]
        assert "names 'Dan'" in refused["male_percent"] and "names 'ben'" in refused["funding_source"]
        mine = [d for d in load_decisions(store, KEY) if d.field == "age_control"]
        assert [(d.reviewer, d.source) for d in mine] == [("Ben", "workbook:ben.xlsx")]
        # Carla's workbook cannot slip in where she is no extractor
        carla_rows = {
            "age_control": {"decision": "correct", "corrected_value": "11"},
            "p_value": {"decision": "reject"},
        }
        carlas = _workbook(tmp_path / "exports" / "atlas_documents.xlsx", carla_rows, tmp_path / "carla.xlsx")
        body, headers = multipart("workbook", "carla.xlsx", carlas)
        status, page = http_request(f"{site}/imports", body, {**headers, "Cookie": carla})
        assert "(uploaded by Carla): 0 decision(s) applied, 2 row(s) refused" in page
        (report,) = [r for r in import_reports(store)[0] if r.workbook == "carla.xlsx"]
        assert [row.reason.split(":")[0] for row in report.refused] == [f"{KEY} has its extractors already"] * 2

        # both complete: the comparison is open to both, the adjudicator settles
        assert post_form(complete, {"action": "complete"}, ben)[0] == 200
        page = http_request(f"{site}/documents/{KEY}?field=n_control", headers={"Cookie": ben})[1]
        assert 'id="comparison-open"' in page and "correct → 30" in page  # Ana's value in the audit trail now
        listed = http_request(f"{site}/disagreements", headers={"Cookie": dan})[1]
        assert 'data-field="n_control"' in listed and "Note: Table 1" in listed and "Settle on this" in listed
        assert "Settle on this" not in http_request(f"{site}/disagreements", headers={"Cookie": ben})[1]

        # assigning is an adjudicator's: shown to them, refused (with why) to an extractor
        assert 'id="round-robin-form"' in http_request(f"{site}/team", headers={"Cookie": dan})[1]
        assert 'id="round-robin-form"' not in http_request(f"{site}/team", headers={"Cookie": ben})[1]
        status, body = post_form(f"{site}/team/assignments", {"action": "assign", "key": KEY, "extractor": "Ben"}, ben)
        assert status == 403 and "assigning extractors takes an adjudicator" in body
        form = {"action": "assign", "key": KEY, "extractor": ["Ana", "Ben"]}
        status, body = post_form(f"{site}/team/assignments", form, dan)
        assert status == 200 and f"{KEY} is compared already: its extractors stay who they were" in body
        # compared: each extraction stays what it was, the differences are the adjudicator's (not Ben's to undo)
        status, body = post_form(n_control, {**shown, "action": "correct", "value": "30"}, ben)
        assert status == 409 and "is compared: Ana and Ben have completed" in body
        assert post_form(f"{n_control}/undo", {}, ben)[0] == 409
        settle = {**shown, "action": "correct", "value": "30", "role": "adjudicator"}
        assert post_form(n_control, settle, dan)[0] == 200
        assert [(d.reviewer, d.role, d.blind_to) for d in load_decisions(store, KEY)][-1] == ("Dan", "adjudicator", [])

    # a workbook dropped in the inbox has no author anyone verified: not applied while reviewers log in
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    filled = _workbook(tmp_path / "exports" / "atlas_documents.xlsx", {"p_value": {"decision": "approve"}}, inbox / "x")
    (inbox / "x").unlink()
    (inbox / "dropped.xlsx").write_bytes(filled)
    inboxed = settings.updated(review_inbox=str(inbox))
    from atlas_pipeline.definitions import build_definitions

    defs = build_definitions(inboxed)
    context = dg.build_sensor_context(
        instance=instance,
        resources={"atlas": AtlasResource.from_deployment(Deployment.from_settings(inboxed))},
        definitions=defs,
    )
    defs.resolve_sensor_def("review_sensor")(context)
    reports = {r.workbook: r for r in import_reports(Store(inboxed.project.artifacts))[0]}
    assert "has no verified author — upload it on the review page" in reports["dropped.xlsx"].error
    assert not [d for d in load_decisions(store, KEY) if d.field == "p_value"]
