"""Review decisions on a real extraction (the juice trial through the scripted OpenAI-compatible server): final values
and provenance, two reviewers, refusals, re-checks after a template change, re-runs and cache hits, and the
spreadsheet round trip with good and bad rows."""

import html
import io
import json
import os
import re
import shutil
import urllib.error
import urllib.parse
import urllib.request

import dagster as dg
import openpyxl
import polars as pl
import pytest

from atlas_pipeline.config.settings import PROJECT_ROOT, load_settings
from atlas_pipeline.core.statuses import DocumentStatus
from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.document_states import document_states
from atlas_pipeline.defs.resources import AtlasResource
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.review.decisions import DecisionRefused, DecisionRequest, decide, load_decisions
from atlas_pipeline.review.final_values import review_document
from atlas_pipeline.review.workbook_import import import_inbox, import_reports, import_workbook
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.records import ExtractionRecord, read_record
from atlas_pipeline_tests.support.corpus import copy_into
from atlas_pipeline_tests.support.helpers import NoRedirect, http_request, latest_metadata, multipart, run_atlas, serve
from atlas_pipeline_tests.support.juice_trial import API_KEY, KEY, answer
from scripted_servers.processes import local_env

VERIFIED = frozenset({"verified"})


def _decide(atlas: Deployment, record: ExtractionRecord, field: str, action: str, reviewer: str = "ana", **extra):
    template = {f.name: f for f in atlas.load_template().fields}
    return decide(
        atlas.store(),
        record,
        DecisionRequest(
            field,
            action,
            reviewer=reviewer,
            shown=(record.sha256, record.extraction_version),
            template_field=template.get(field),
            **extra,
        ),
    )


def _refresh(run, instance) -> None:
    """What the daemon does after a decision: the document's review, then the aggregates."""
    defs = run.defs
    assert defs.resolve_job_def("review_job").execute_in_process(partition_key=KEY, instance=instance).success
    assert defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success


def test_decisions_become_final_values_with_provenance_and_approve_the_document(llm_server, run, instance, tmp_path):
    llm_server.script({"content": answer(age_control={"value": 11.9, "quote": "Age (months) 10.27 4.75"})})
    _, record = run()
    atlas, store = run.atlas, run.atlas.store()
    first = review_document(record, [], VERIFIED)
    assert first.fields["n_treatment"].provenance == "model_verified" and first.fields["n_treatment"].final_value == 30
    assert first.fields["age_control"].provenance == "awaiting_review"  # unverified: a person must look
    assert first.fields["hr_value"].provenance == "awaiting_review"  # not reported: not accepted by default
    assert not first.approved

    waiting = [name for name, field in first.fields.items() if field.provenance == "awaiting_review"]
    _decide(atlas, record, "age_control", "correct", value="11.09", note="the table says 11.09")
    _decide(atlas, record, "study_id", "approve")  # verified already: a person may still confirm it
    for name in waiting:
        if name != "age_control":
            _decide(atlas, record, name, "reject" if name.startswith("hr_") else "approve")
    _refresh(run, instance)

    review = read_record(store, KEY, "review", type(first))
    age = review.fields["age_control"]
    assert (age.provenance, age.final_value, age.model_value, age.reviewer) == (
        "reviewer_corrected",
        11.09,
        11.9,
        "ana",
    )
    assert review.fields["study_id"].provenance == "reviewer_approved"
    assert review.fields["hr_value"].provenance == "rejected" and review.fields["hr_value"].final_value is None
    assert review.approved
    state = {s.key: s for s in document_states(instance, atlas)}[KEY]
    assert state.status == DocumentStatus.APPROVED
    metadata = latest_metadata(instance, "document_review", KEY)
    assert metadata["status"].value == "approved" and metadata["fields_reviewer_corrected"].value == 1

    completion = json.loads((tmp_path / "artifacts" / "aggregates" / "task_completion.json").read_text())
    assert completion["counts"]["approved"] == 1 and completion["documents_approved"] == 1
    assert completion["fields_by_provenance"]["reviewer_corrected"] == 1
    quality = {(row["field"], row["tier"]): row for row in completion["review_quality"]}
    assert quality[("age_control", "unverified")]["corrected"] == 1
    assert quality[("study_id", "verified")]["kept_rate"] == 1.0

    fields = pl.read_parquet(tmp_path / "exports" / "atlas_fields.parquet")
    row = fields.filter(pl.col("field") == "age_control").row(0, named=True)
    assert (row["final_value"], row["provenance"], row["decided_by"], row["model_value"]) == (
        "11.09",
        "reviewer_corrected",
        "ana",
        "11.9",
    )
    assert row["decision_note"] == "the table says 11.09" and row["decided_at"]
    approved = pl.read_parquet(tmp_path / "exports" / "atlas_approved.parquet")
    assert approved["document_key"].to_list() == [KEY]
    assert approved.schema["age_control"] == pl.Float64 and approved["age_control"][0] == 11.09
    assert approved.schema["n_treatment"] == pl.Int64 and approved["n_treatment"][0] == 30
    assert approved["hr_value"][0] is None
    quality_csv = pl.read_csv(tmp_path / "exports" / "atlas_review_quality.csv")
    assert set(quality_csv.columns) >= {"field", "tier", "reviewed", "approved", "corrected", "kept_rate"}


def test_a_later_decision_on_another_value_means_recheck_not_the_older_decision(llm_server, run):
    llm_server.script({"content": answer()})
    _, record = run()
    alice = _decide(run.atlas, record, "n_control", "approve", reviewer="alice")  # on 30
    bob = alice.model_copy(
        update={
            "id": "b0b",
            "reviewer": "bob",
            "action": "correct",
            "value": 29,
            "decided_at": alice.decided_at.replace(alice.decided_at[:4], str(int(alice.decided_at[:4]) + 1)),
            "made_on": alice.made_on.model_copy(update={"model_value": 31}),  # the model said 31 meanwhile
        }
    )
    field = review_document(record, [alice, bob], VERIFIED).fields["n_control"]  # the model says 30 again
    assert (field.provenance, field.previous_model_value, field.reviewer) == ("recheck", 31, "bob")


def test_two_reviewers_the_later_wins_and_both_stay_in_the_audit_trail(llm_server, run):
    llm_server.script({"content": answer()})
    _, record = run()
    _decide(run.atlas, record, "n_control", "approve", reviewer="ana")
    _decide(run.atlas, record, "n_control", "correct", reviewer="ben", value="29", note="excluded one")
    decisions = load_decisions(run.atlas.store(), KEY)
    assert [(d.reviewer, d.action) for d in decisions] == [("ana", "approve"), ("ben", "correct")]
    field = review_document(record, decisions, VERIFIED).fields["n_control"]
    assert (field.provenance, field.final_value, field.reviewer, field.decisions) == (
        "reviewer_corrected",
        29,
        "ben",
        2,
    )
    assert field.disagreement == {"ana": "approve", "ben": "correct → 29"}
    _decide(run.atlas, record, "n_control", "correct", reviewer="ana", value="29")  # ana settles it
    field = review_document(record, load_decisions(run.atlas.store(), KEY), VERIFIED).fields["n_control"]
    assert field.disagreement == {} and field.decisions == 3 and field.reviewer == "ana"


def test_a_decision_on_a_changed_extraction_or_of_the_wrong_type_is_refused(llm_server, run):
    llm_server.script({"content": answer()})
    _, record = run()
    store = run.atlas.store()
    with pytest.raises(DecisionRefused, match="changed since this was shown"):
        decide(
            store, record, DecisionRequest("n_control", "approve", reviewer="ana", shown=(record.sha256, "0ld-version"))
        )
    with pytest.raises(DecisionRefused, match="'thirty' is not a whole number"):
        _decide(run.atlas, record, "n_control", "correct", value="thirty")
    with pytest.raises(DecisionRefused, match="has no extracted field 'n_patients'"):
        _decide(run.atlas, record, "n_patients", "approve")
    with pytest.raises(DecisionRefused, match="enter your name"):
        _decide(run.atlas, record, "n_control", "approve", reviewer=" ")
    with pytest.raises(DecisionRefused, match="not one of low, some concerns, high, unclear"):
        _decide(run.atlas, record, "rob_blinding", "correct", value="medium")
    assert load_decisions(store, KEY) == []  # nothing half-recorded


def test_decisions_survive_a_rerun_a_cache_hit_and_a_template_change_shown_as_recheck(
    llm_server, run, instance, tmp_path, settings_for
):
    llm_server.script({"content": answer()})
    _, record = run()
    _decide(run.atlas, record, "n_control", "correct", value="29")
    _decide(run.atlas, record, "mean_control", "approve")
    _, again = run()  # the same bytes and version: the LLM answer comes from the cache
    assert again.llm_cache_hits == 1
    review = read_record(run.atlas.store(), KEY, "review", type(review_document(again, [], VERIFIED)))
    assert (
        review.fields["n_control"].provenance == "reviewer_corrected" and review.fields["n_control"].final_value == 29
    )

    # a template change: a new extraction version; the model now reads another control mean
    seeds = tmp_path / "seeds"
    shutil.copytree(PROJECT_ROOT / "seeds" / "templates", seeds / "templates")
    (seeds / "rules").mkdir()
    rule = {"name": "default", "custom_instructions": "Report means as printed in the tables."}
    (seeds / "rules" / "default.json").write_text(json.dumps(rule))
    options = {"seeds_dir": str(seeds), "llm_base_url": llm_server.base_url, "llm_model": "scripted-model"}
    settings = settings_for(tmp_path / "kb", **options)
    llm_server.script({"content": answer(mean_control={"value": 27.4, "quote": "Water * | 26.5 | 27.4"})})
    defs = build_definitions(settings)
    assert defs.resolve_job_def("document_job").execute_in_process(partition_key=KEY, instance=instance).success
    changed = read_record(run.atlas.store(), KEY, "extraction", ExtractionRecord)
    assert changed.extraction_version != record.extraction_version
    review = read_record(run.atlas.store(), KEY, "review", type(review))
    mean = review.fields["mean_control"]
    assert (mean.provenance, mean.previous_model_value, mean.model_value) == ("recheck", 26.5, 27.4)
    assert review.fields["n_control"].provenance == "reviewer_corrected"  # its value did not change: kept
    assert len(load_decisions(run.atlas.store(), KEY)) == 2  # nothing lost


def _fill(path, rows: dict[tuple[str, str], dict[str, str]], tamper_sha_of: str = "") -> bytes:
    """The exported workbook with decision cells filled in as a reviewer would in Excel."""
    book = openpyxl.load_workbook(path)
    sheet = book["fields"]
    header = [cell.value for cell in sheet[1]]
    column = {name: header.index(name) + 1 for name in header}
    for number in range(2, sheet.max_row + 1):
        key = (sheet.cell(number, column["document_key"]).value, sheet.cell(number, column["field"]).value)
        for name, value in rows.get(key, {}).items():
            sheet.cell(number, column[name]).value = value
        if key[1] == tamper_sha_of:
            sheet.cell(number, column["sha256"]).value = "0" * 64
    extra = sheet.max_row + 1
    for name, value in {"document_key": "PMC0000000.pdf", "field": "n_control", "decision": "approve"}.items():
        sheet.cell(extra, column[name]).value = value
    out = path.with_name("reviewed.xlsx")
    book.save(out)
    return out.read_bytes()


def test_the_spreadsheet_round_trip_applies_good_rows_and_refuses_bad_ones_with_reasons(
    llm_server, run, instance, tmp_path
):
    llm_server.script({"content": answer()})
    run()
    assert run.defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
    workbook = _fill(
        tmp_path / "exports" / "atlas_documents.xlsx",
        {
            (KEY, "n_control"): {"decision": "correct", "corrected_value": "29", "review_note": "one excluded"},
            (KEY, "study_id"): {"decision": "approve", "reviewer": "carla"},
            (KEY, "n_treatment"): {"decision": "correct", "corrected_value": "thirty"},
            (KEY, "sd_control"): {"decision": "maybe"},
            (KEY, "mean_control"): {"decision": "approve"},  # its sha256 is tampered below: an older extraction
            # values the model left empty: one filled in by hand, one confirmed as not reported, with its reason
            (KEY, "funding_source"): {"decision": "correct", "corrected_value": "none declared"},
            (KEY, "male_percent"): {"decision": "reject", "reject_reason": "not_reported"},
        },
        tamper_sha_of="mean_control",
    )
    store = run.atlas.store()
    template = run.atlas.load_template()
    report = import_workbook(store, workbook, "reviewed.xlsx", template, default_reviewer="dan")
    assert sorted((row.field, row.decision) for row in report.applied) == [
        ("funding_source", "correct"),
        ("male_percent", "reject"),
        ("n_control", "correct"),
        ("study_id", "approve"),
    ]
    refused = {row.field or row.document: row.reason for row in report.refused}
    assert refused["n_treatment"] == "'thirty' is not a whole number"
    assert refused["sd_control"] == "unknown decision 'maybe': use approve, correct or reject"
    assert "changed since this was shown" in refused["mean_control"]
    assert [r.reason for r in report.refused if r.document == "PMC0000000.pdf"] == ["unknown document 'PMC0000000.pdf'"]
    assert report.rows_without_decision > 20
    decisions = {d.field: d for d in load_decisions(store, KEY)}
    assert set(decisions) == {"n_control", "study_id", "funding_source", "male_percent"}
    assert decisions["male_percent"].reason == "not_reported" and decisions["funding_source"].value == "none declared"
    assert (decisions["n_control"].value, decisions["n_control"].reviewer) == (29, "dan")
    assert decisions["study_id"].reviewer == "carla" and decisions["study_id"].source == "workbook:reviewed.xlsx"
    assert import_reports(store)[0][0].sha256 == report.sha256  # kept, for the review page

    # the same rows in another copy of the workbook: nothing applied twice; a row that cannot be a number is refused
    again = _fill(
        tmp_path / "exports" / "atlas_documents.xlsx",
        {
            (KEY, "n_control"): {"decision": "correct", "corrected_value": "29", "review_note": "one excluded"},
            (KEY, "n_treatment"): {"decision": "correct", "corrected_value": "inf"},
            (KEY, "age_control"): {"decision": "correct", "corrected_value": "1e400"},
        },
    )
    second = import_workbook(store, again, "reviewed (2).xlsx", template, default_reviewer="dan")
    assert [row.field for row in second.already_applied] == ["n_control"] and second.applied == []
    assert {row.field: row.reason for row in second.refused if row.document == KEY} == {
        "n_treatment": "'inf' is not a whole number",
        "age_control": "'1e400' is beyond any plausible age_control (at most 1e+15 in size)",
    }
    assert len(load_decisions(store, KEY)) == 4

    # dropped into the inbox, the review sensor imports it once and asks for the document's review
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "second.xlsx").write_bytes(
        _fill(tmp_path / "exports" / "atlas_documents.xlsx", {(KEY, "p_value"): {"decision": "approve"}})
    )
    (inbox / "notes.txt").write_text("not a workbook")
    (inbox / "broken.xlsx").write_bytes(b"PK\x03\x04 not really")
    (inbox / "old.xls").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1 Excel 97-2003")
    (inbox / "~$second.xlsx").write_bytes(b"Excel's lock file")
    settings = run.settings.updated(review_inbox=str(inbox), reviewer="erin")
    defs = build_definitions(settings)
    sensor = defs.resolve_sensor_def("review_sensor")
    resources = {"atlas": AtlasResource.from_deployment(Deployment.from_settings(settings))}
    context = dg.build_sensor_context(instance=instance, resources=resources, definitions=defs)
    result = sensor(context)
    assert [request.partition_key for request in result.run_requests] == [KEY]
    reports = {r.workbook: r for r in import_reports(store)[0]}
    assert [(row.field, row.decision) for row in reports["second.xlsx"].applied] == [("p_value", "approve")]
    assert "not a workbook" in reports["broken.xlsx"].error
    assert "only reviewed workbooks (.xlsx" in reports["notes.txt"].error  # every file in the inbox: read or said
    assert "a .xls file is not the exported workbook — save it as .xlsx" in reports["old.xls"].error
    assert "~$second.xlsx" not in reports  # Excel's lock file while the workbook is open
    assert import_inbox(Store(str(inbox)), store, template) == []  # imported once, by content
    again = sensor(
        dg.build_sensor_context(instance=instance, cursor=result.cursor, definitions=defs, resources=resources)
    )
    assert list(again.run_requests) == []  # no new decision since: nothing to merge


def test_decisions_merge_on_atlas_run_and_survive_atlas_migrate_to_postgres_and_s3(
    llm_server, knowledge_base, tmp_path, new_deployment
):
    copy_into(knowledge_base, f"rct/{KEY}")
    llm_server.script(default={"content": answer()})
    llm = {"ATLAS_LLM_BASE_URL": llm_server.base_url, "ATLAS_LLM_MODEL": "scripted-model"}
    old = {"DAGSTER_HOME": str(tmp_path / "old_home"), **local_env(tmp_path, knowledge_base), **llm}
    first = run_atlas("run", env=old, cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    old_store = Store(old["ATLAS_ARTIFACTS"])
    record = read_record(old_store, KEY, "extraction", ExtractionRecord)
    shown = (record.sha256, record.extraction_version)
    decide(old_store, record, DecisionRequest("n_control", "correct", reviewer="ana", shown=shown, value=29))
    decide(old_store, record, DecisionRequest("p_value", "approve", reviewer="ben", shown=shown))

    again = run_atlas("run", env=old, cwd=tmp_path)  # no daemon: `atlas run` merges the decisions
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"review decisions merged for 1 document(s): {KEY}" in again.stdout
    fields = pl.read_parquet(tmp_path / "exports" / "atlas_fields.parquet")
    before = {row["field"]: row for row in fields.iter_rows(named=True)}
    assert before["n_control"]["final_value"] == "29" and before["p_value"]["decided_by"] == "ben"

    source = ["--from-home", old["DAGSTER_HOME"], "--from-artifacts", old["ATLAS_ARTIFACTS"]]
    source += ["--from-exports", old["ATLAS_EXPORTS"]]
    kb = {"ATLAS_KNOWLEDGE_BASE": old["ATLAS_KNOWLEDGE_BASE"], **llm}
    migrated = run_atlas("migrate", *source, env={**new_deployment, **kb}, cwd=tmp_path)
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    new_store = Store(new_deployment["ATLAS_ARTIFACTS"])
    assert load_decisions(new_store, KEY) == load_decisions(old_store, KEY)  # the audit log, decision for decision

    settings = load_settings({**new_deployment, **kb})
    with dg.DagsterInstance.from_config(new_deployment["DAGSTER_HOME"]) as instance:
        defs = build_definitions(settings)
        assert defs.resolve_job_def("review_job").execute_in_process(partition_key=KEY, instance=instance).success
        assert defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
    exported = pl.read_parquet(io.BytesIO(Store(new_deployment["ATLAS_EXPORTS"]).read_bytes("atlas_fields.parquet")))
    after = {row["field"]: row for row in exported.iter_rows(named=True)}
    for name in ("n_control", "p_value", "study_id"):
        assert {k: after[name][k] for k in ("final_value", "provenance", "decided_by", "decided_at")} == {
            k: before[name][k] for k in ("final_value", "provenance", "decided_by", "decided_at")
        }


def test_the_review_page_refuses_what_it_must_and_shows_no_secret(llm_server, run, instance, knowledge_base):
    from atlas_pipeline.review_page.app import create_app

    llm_server.script({"content": answer()})
    _, record = run()
    with serve(create_app(Deployment.from_settings(run.settings), instance=lambda: instance)) as site:
        status, page = http_request(f"{site}/documents/{KEY}?field=n_control")
        assert status == 200 and "30 were given colored and flavored water" in page and 'class="highlight"' in page
        listing = (
            http_request(f"{site}/")[1] + http_request(f"{site}/api/documents")[1] + http_request(f"{site}/imports")[1]
        )
        assert API_KEY not in page + listing and "sk-" not in page + listing

        form = {"action": "approve", "reviewer": "ana", "sha256": record.sha256, "extraction_version": "older"}
        status, body = http_request(f"{site}/documents/{KEY}/fields/n_control", urllib.parse.urlencode(form).encode())
        assert status == 409 and "changed since this was shown" in body
        form["extraction_version"] = record.extraction_version
        status, body = http_request(
            f"{site}/documents/{KEY}/fields/n_control",
            urllib.parse.urlencode(form).encode(),
            {"Origin": "http://attacker.example"},
        )
        assert status == 403
        assert load_decisions(run.atlas.store(), KEY) == []  # neither was recorded
        status, _ = http_request(f"{site}/documents/{KEY}/fields/n_control", urllib.parse.urlencode(form).encode())
        assert status == 200 and [d.action for d in load_decisions(run.atlas.store(), KEY)] == ["approve"]

        shown_other = urllib.parse.urlencode({**form, "model_value": "0.05"}).encode()
        status, body = http_request(f"{site}/documents/{KEY}/fields/p_value", shown_other)
        expected = "the model's value of p_value changed since this was shown ('0.05', now '0.006')"
        assert status == 409 and expected in html.unescape(body)
        status, _ = http_request(f"{site}/", headers={"Host": "attacker.example"})  # a DNS-rebinding page
        assert status == 400
        name = urllib.parse.urlencode({"reviewer": "Anna Łukasz 李明", "back": "//attacker.example/"}).encode()
        request = urllib.request.Request(f"{site}/reviewer", data=name, method="POST")
        urllib.request.build_opener(NoRedirect).open(request, timeout=30).close()
        redirect = NoRedirect.last
        assert redirect.status == 303 and redirect.headers["location"] == "/"  # never to another site
        cookie = redirect.headers["set-cookie"].split(";")[0]
        status, page = http_request(f"{site}/", headers={"Cookie": cookie})
        assert status == 200 and 'value="Anna Łukasz 李明"' in page

        assert http_request(f"{site}/documents/..%2Fetc")[0] == 404
        assert http_request(f"{site}/documents/{KEY}/pages/99.png") == (404, "no page 99 (the document has 8)")
        status, _ = http_request(f"{site}/documents/{KEY}", b"")  # state changes only by POST to their own routes
        assert status == 405

        body, headers = multipart("documents", "new trial.html", b"<html><body><p>We randomised 40.</p></body></html>")
        status, page = http_request(f"{site}/upload", body, headers)
        assert status == 200 and "added uploads/new trial.html" in page
        assert (knowledge_base / "uploads" / "new trial.html").read_bytes().startswith(b"<html>")
        status, page = http_request(f"{site}/upload", body, headers)
        assert "uploads/new trial.html is already in the knowledge base" in page
        body, headers = multipart("documents", ".hidden.pdf", b"%PDF-1.4")
        assert "is not a document file name" in http_request(f"{site}/upload", body, headers)[1]
    listed = run.settings.updated(trusted_hosts="Review.Lab.example, ")  # ATLAS_TRUSTED_HOSTS
    with serve(create_app(Deployment.from_settings(listed), instance=lambda: instance)) as site:
        assert http_request(f"{site}/", headers={"Host": "review.lab.example:3001"})[0] == 200
        assert http_request(f"{site}/", headers={"Host": "attacker.example"})[0] == 400


def test_a_decision_made_while_atlas_run_works_reaches_that_runs_exports(llm_server, knowledge_base, tmp_path):
    """A reviewer approves a value of the first document while `atlas run` still waits for the second one's answer:
    the run says so, merges the decision and writes its exports again — never exports that silently miss it."""
    import subprocess
    import time

    from atlas_pipeline_tests.support.helpers import BIN

    copy_into(knowledge_base, f"rct/{KEY}", "html/plos_one_article.html")
    slow = {"when": "reticuloendotheliosis", "content": answer(), "delay": 20}  # the second document's answer
    llm_server.script(slow, default={"content": answer()})
    env = {"DAGSTER_HOME": str(tmp_path / "home"), **local_env(tmp_path, knowledge_base)}
    env |= {"ATLAS_LLM_BASE_URL": llm_server.base_url, "ATLAS_LLM_MODEL": "scripted-model"}
    store = Store(env["ATLAS_ARTIFACTS"])
    command = [str(BIN / "atlas"), "run", "--batch", "1"]  # one document a run: the first is reviewed before
    process = subprocess.Popen(command, env={**os.environ, **env}, cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and process.poll() is None:
            waiting = any("reticuloendotheliosis" in json.dumps(r) for r in llm_server.requests())
            if waiting and store.exists(f"documents/{KEY}/review.json"):
                break
            time.sleep(0.5)
        assert process.poll() is None, "the run ended before the second document's answer came"
        record = read_record(store, KEY, "extraction", ExtractionRecord)
        decide(
            store,
            record,
            DecisionRequest("p_value", "approve", reviewer="ana", shown=(record.sha256, record.extraction_version)),
        )
        said, _ = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, said
    assert "1 document(s) decided on while this run worked: merged, exports written again" in said
    fields = pl.read_parquet(tmp_path / "exports" / "atlas_fields.parquet")
    row = fields.filter((pl.col("document_key") == KEY) & (pl.col("field") == "p_value")).row(0, named=True)
    assert (row["decided_by"], row["provenance"]) == ("ana", "reviewer_approved")


def test_a_text_report_reads_as_formatted_text_with_the_span_marked_and_nothing_run():
    from atlas_pipeline.review.evidence import reader_html

    text = (
        "# Methods\n\nIntro <script>alert(1)</script>. We randomised 40 adults to drug or placebo. End.\n\n"
        "| Arm | n |\n|---|---|\n| Drug | 20 |\n| Placebo | 20 |\n\n[x](javascript:alert(1))\n"
    )
    start = text.index("We randomised")
    html = reader_html(text, start, start + len("We randomised 40 adults"), "We randomised 40 adults")
    assert '<mark id="evidence">We randomised 40 adults</mark>' in html and "<script>" not in html
    assert "&lt;script&gt;" in html and "<h1>Methods</h1>" in html and 'href="javascript' not in html
    assert "<table>" in html and "<td>Drug</td>" in html  # the report's table is a table
    row = text.index("Drug | 20")
    across = reader_html(text, row, row + len("Drug | 20"), None)  # a span across cells: a mark in each
    assert '<td><mark id="evidence">Drug </mark></td>' in across and "<mark> 20</mark>" in across
    assert "<mark" not in reader_html(text, None, None, "not in the text")
    assert "<img" not in reader_html("![chart](http://tracker.example/x.png)", None, None, None)  # nothing fetched


def test_a_reviewer_name_must_read_as_written(llm_server, run):
    """Until reviewers log in, the name is what the audit log has: a right-to-left override that shows one person
    for another, control characters, an endless name — each refused with the reason; a plain name is kept as typed."""
    llm_server.script({"content": answer()})
    _, record = run()
    for name, reason in (
        ("\u202eecila", "direction characters (U+202E)"),
        ("ana\x1b[2Jbob", "control or direction characters (U+001B)"),
        ("ana" * 40_000, "at most 80 characters (this one: 120,000)"),
        ("   ", "say who decides"),
    ):
        with pytest.raises(DecisionRefused, match=re.escape(reason)):
            _decide(run.atlas, record, "n_control", "approve", reviewer=name)
    kept = _decide(run.atlas, record, "n_control", "approve", reviewer="  José Ñúñez  ")
    assert kept.reviewer == "José Ñúñez"
