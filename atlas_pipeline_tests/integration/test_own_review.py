"""A review of one's own: the README's sequence (the sample, then one's own folder in two commands) never mixes the
two, reviews live side by side, a knowledge base pointed at without a review folder is refused rather than mixed, a
removed document leaves the analysis files; `atlas run` exits with a status a script can trust; a person's value
outlives a failed LLM run; `needs_review` counts what the summary counts."""

from __future__ import annotations

import csv
import json
import os
import shutil
import sys
from pathlib import Path

import openpyxl

from atlas_pipeline.review.decisions import DecisionRequest, decide, load_decisions
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.records import ExtractionRecord, read_record
from atlas_pipeline_tests.support.corpus import copy_into
from atlas_pipeline_tests.support.helpers import http_request, multipart, post_form, run_atlas
from atlas_pipeline_tests.support.juice_trial import KEY, answer
from scripted_servers.processes import free_port, local_env, review_server


def _bare_env() -> dict[str, str]:
    """A user's shell: no ATLAS_* setting, no DAGSTER_HOME (run_atlas lays these over os.environ: emptied here)."""
    return {name: "" for name in os.environ if name.startswith("ATLAS_") or name == "DAGSTER_HOME"}


def _rows(exports: Path, name: str) -> list[dict[str, str]]:
    with (exports / name).open(encoding="utf-8-sig", newline="") as handle:
        return list(csv.DictReader(handle))


def _documents(exports: Path) -> set[str]:
    return {row["document_key"] for row in _rows(exports, "atlas_documents.csv")}


def _files(folder: Path) -> dict[str, int]:
    return {str(path): path.stat().st_mtime_ns for path in folder.rglob("*") if path.is_file()}


def test_the_readme_sequence_keeps_the_sample_and_ones_own_reviews_apart(tmp_path):
    checkout = tmp_path / "checkout"  # where `make run` runs: the sample in seeds/knowledge_base, its state in var/
    sample = checkout / "seeds" / "knowledge_base"
    copy_into(sample, "html/plos_one_article.html", "rct_jats/PMC1216327.nxml")
    env = _bare_env()
    assert not {name for name, value in env.items() if value}
    first = run_atlas("run", env=env, cwd=checkout)
    assert first.returncode == 0, first.stdout + first.stderr
    var = checkout / "var"
    assert _documents(var / "exports") == {"plos_one_article.html", "PMC1216327.nxml"}
    sample_state = _files(var / "exports") | _files(var / "artifacts") | _files(var / "dagster_home")

    # pointing ATLAS_KNOWLEDGE_BASE elsewhere without a review folder: refused, saying how to start a review
    papers = tmp_path / "papers"
    copy_into(papers, "html/elife_article.html")
    mixed = run_atlas("run", env={**env, "ATLAS_KNOWLEDGE_BASE": str(papers)}, cwd=checkout)
    assert mixed.returncode == 2 and "atlas init DIR --knowledge-base" in mixed.stderr, mixed.stderr
    assert "Traceback" not in mixed.stderr
    assert _files(var / "exports") | _files(var / "artifacts") | _files(var / "dagster_home") == sample_state

    # the README's two commands: a review of one's own
    review = tmp_path / "reviews" / "statins"
    started = run_atlas("init", str(review), "--knowledge-base", str(papers), env=env, cwd=checkout)
    assert started.returncode == 0 and f"--review {review} run" in started.stdout, started.stdout + started.stderr
    assert f"`cd {review}` and `{Path(sys.executable).parent / 'atlas'} run`" in started.stdout  # works after the cd
    assert 'knowledge_base = "' + str(papers) in (review / "atlas.toml").read_text()
    again = run_atlas("init", str(review), env=env, cwd=checkout)
    assert again.returncode == 2 and "already a review" in again.stderr
    # DAGSTER_HOME left pointing at the sample's instance: the review's own is used, and said
    own = run_atlas(
        "--review", str(review), "run", env={**env, "DAGSTER_HOME": str(var / "dagster_home")}, cwd=checkout
    )
    assert own.returncode == 0, own.stdout + own.stderr
    assert f"DAGSTER_HOME={var / 'dagster_home'} is not this review's instance" in own.stderr
    assert f"dagster home:   {review / 'state' / 'dagster_home'}" in own.stdout
    exports = review / "exports"
    assert _documents(exports) == {"elife_article.html"}
    assert {row["document_key"] for row in _rows(exports, "atlas_fields.csv")} == {"elife_article.html"}
    studies = _rows(exports, "atlas_revman_study_information.csv")
    assert len(studies) == 1 and "elife_article.html" in studies[0]["Char: Notes"]
    assert _files(var / "exports") | _files(var / "artifacts") | _files(var / "dagster_home") == sample_state

    # a second review side by side, run from inside its folder: each its own instance, state and exports
    other = tmp_path / "other_papers"
    copy_into(other, "rct_jats/PMC1475568.nxml")
    second = tmp_path / "reviews" / "vitamin_d"
    assert run_atlas("init", str(second), "--knowledge-base", str(other), env=env, cwd=tmp_path).returncode == 0
    own_state = _files(exports) | _files(review / "state" / "artifacts")
    beside = run_atlas("run", env=env, cwd=second)
    assert beside.returncode == 0, beside.stdout + beside.stderr
    assert f"dagster home:   {second / 'state' / 'dagster_home'}" in beside.stdout
    assert _documents(second / "exports") == {"PMC1475568.nxml"}
    assert _files(exports) | _files(review / "state" / "artifacts") == own_state
    status = run_atlas("status", env=env, cwd=review)  # any command in a review's folder works on that review
    assert status.returncode == 0 and "1 documents" in status.stdout and "PMC1475568" not in status.stdout

    # a document removed from the sample: kept, marked, in the document exports; out of every analysis file
    (sample / "plos_one_article.html").unlink()
    removed = run_atlas("run", env=env, cwd=checkout)
    assert removed.returncode == 0, removed.stdout + removed.stderr
    rows = {row["document_key"]: row for row in _rows(var / "exports", "atlas_documents.csv")}
    assert rows["plos_one_article.html"]["source_removed"] == "true"
    assert rows["PMC1216327.nxml"]["source_removed"] == "false"
    notes = [row["Char: Notes"] for row in _rows(var / "exports", "atlas_revman_study_information.csv")]
    assert len(notes) == 1 and "PMC1216327.nxml" in notes[0]


def test_exit_statuses_and_a_persons_value_through_a_failed_llm_run(llm_server, knowledge_base, parse_cache, tmp_path):
    copy_into(knowledge_base, f"rct/{KEY}", "awkward/malformed/ocrmypdf_invalid.pdf")
    shutil.copytree(parse_cache, tmp_path / "artifacts" / "parsed")
    env = {
        **_bare_env(),
        **local_env(tmp_path, knowledge_base),
        "DAGSTER_HOME": str(tmp_path / "home"),
        "ATLAS_LLM_BASE_URL": llm_server.base_url,
        "ATLAS_LLM_MAX_RETRIES": "0",
        "ATLAS_LLM_TIMEOUT_SECONDS": "5",
    }
    llm_server.script(default={"content": answer()})
    # an unreadable PDF is an outcome of the run, not a failure of it
    done = run_atlas("run", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ocrmypdf_invalid.pdf: failed: parse:" in done.stdout and f"{KEY}: done" in done.stdout

    # a bad setting: nothing starts
    bad = run_atlas("run", env={**env, "ATLAS_LLM_CONCURRENCY": "many"}, cwd=tmp_path)
    assert bad.returncode == 2 and "ATLAS_LLM_CONCURRENCY='many'" in bad.stderr, bad.stderr

    # a person corrects a value; the exports carry it, and needs_review counts what the summary says
    store = Store(str(tmp_path / "artifacts"))
    record = read_record(store, KEY, "extraction", ExtractionRecord)
    decided = decide(
        store,
        record,
        DecisionRequest(
            "study_id",
            "correct",
            reviewer="ana",
            shown=(record.sha256, record.extraction_version),
            value="Valois 2005a",
            quote="Valois",
        ),
    )
    assert decided is not None
    merged = run_atlas("run", env=env, cwd=tmp_path)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    fields = {row["field"]: row for row in _rows(tmp_path / "exports", "atlas_fields.csv")}
    assert fields["study_id"]["final_value"] == "Valois 2005a"
    waiting = sum(row["needs_review"] == "true" for row in _rows(tmp_path / "exports", "atlas_fields.csv"))
    (summary,) = [line for line in merged.stdout.splitlines() if line.startswith("review: ")]
    assert summary.startswith(f"review: {waiting} field(s) to review"), (summary, waiting)

    # the endpoint goes away: the run says so with its own status, and the person's value stays
    gone = {**env, "ATLAS_LLM_BASE_URL": f"http://127.0.0.1:{free_port()}/v1"}
    shutil.rmtree(tmp_path / "artifacts" / "llm_cache")  # no answer kept from before: the endpoint must answer
    failed = run_atlas("run", "--force", "--only", KEY, env=gone, cwd=tmp_path)
    assert failed.returncode == 3, failed.stdout + failed.stderr
    assert "could not be processed for a reason outside them" in failed.stderr and KEY in failed.stderr
    rows = {row["document_key"]: row for row in _rows(tmp_path / "exports", "atlas_documents.csv")}
    assert rows[KEY]["status"] == "failed" and "extract:" in rows[KEY]["reason"]
    fields = {
        row["field"]: row for row in _rows(tmp_path / "exports", "atlas_fields.csv") if row["document_key"] == KEY
    }
    assert fields["study_id"]["final_value"] == "Valois 2005a"
    assert fields["study_id"]["provenance"] == "reviewer_corrected"
    # the review page shows the values the person decided on, and takes a decision on another one meanwhile
    with review_server({**os.environ, **gone}, free_port(), tmp_path) as site:
        status, page = http_request(f"{site}/documents/{KEY}?field=study_id")
        assert status == 200 and "Valois 2005a" in page and "Nothing to review" not in page
        shown = {"sha256": record.sha256, "extraction_version": record.extraction_version, "reviewer": "ana"}
        status, body = post_form(f"{site}/documents/{KEY}/fields/n_control", {**shown, "action": "approve"})
        assert status == 200, body[-1500:]
    assert [d.field for d in load_decisions(store, KEY) if d.field == "n_control"] == ["n_control"]

    # the endpoint is back: the document goes through again, the decision still applies
    back = run_atlas("run", env=env, cwd=tmp_path)
    assert back.returncode == 0, back.stdout + back.stderr
    fields = {
        row["field"]: row for row in _rows(tmp_path / "exports", "atlas_fields.csv") if row["document_key"] == KEY
    }
    assert fields["study_id"]["final_value"] == "Valois 2005a"
    assert not (tmp_path / "artifacts" / "documents" / KEY / "extraction_kept.json").exists()


def test_atlas_review_alone_shows_a_workbook_decision_at_once(tmp_path):
    papers = tmp_path / "papers"
    copy_into(papers, "rct_jats/PMC1216327.nxml")
    review, env = tmp_path / "review", _bare_env()
    assert run_atlas("init", str(review), "--knowledge-base", str(papers), env=env, cwd=tmp_path).returncode == 0
    assert run_atlas("run", env=env, cwd=review).returncode == 0
    key = "PMC1216327.nxml"
    filled = _filled_workbook(review / "exports" / "atlas_documents.xlsx", key, tmp_path / "mine.xlsx")
    with review_server({**os.environ, **env, "ATLAS_REVIEW": str(review)}, free_port(), tmp_path) as site:
        (before,) = json.loads(http_request(f"{site}/api/documents")[1])
        waiting = [row for row in _rows(review / "exports", "atlas_fields.csv") if row["needs_review"] == "true"]
        assert before["decisions"] == 0 and before["to_review"] == len(waiting) == 30  # one count, page and export
        body, headers = multipart("workbook", "mine.xlsx", filled)
        status, page = http_request(f"{site}/imports", body, headers)
        assert status == 200 and "1 decision(s) applied" in page, page[-2000:]
        # no `atlas run` in between: the list, the document and the studies show the decision
        (after,) = json.loads(http_request(f"{site}/api/documents")[1])
        assert after["decisions"] == 1 and after["to_review"] == 29, after
        studies = http_request(f"{site}/studies")[1]
        team = http_request(f"{site}/team")[1]
        study = http_request(f"{site}/studies/{key}")[1]
        assert "Valois et al. 2005" in study, study[-3000:]
        assert "29 field(s) still wait for a person" in team and key in studies
    stale = run_atlas("status", env=env, cwd=review)
    assert stale.returncode == 0 and "1 decision(s)" in stale.stdout, stale.stdout


def _filled_workbook(exported: Path, key: str, out: Path) -> bytes:
    """The exported workbook with one decision filled in: study_id corrected."""
    book = openpyxl.load_workbook(exported)
    sheet = book["fields"]
    header = [cell.value for cell in sheet[1]]
    column = {name: header.index(name) + 1 for name in header}
    for number in range(2, sheet.max_row + 1):
        if (sheet.cell(number, column["document_key"]).value, sheet.cell(number, column["field"]).value) == (
            key,
            "study_id",
        ):
            sheet.cell(number, column["decision"]).value = "correct"
            sheet.cell(number, column["corrected_value"]).value = "Valois et al. 2005"
            sheet.cell(number, column["reviewer"]).value = "ana"
    book.save(out)
    return out.read_bytes()
