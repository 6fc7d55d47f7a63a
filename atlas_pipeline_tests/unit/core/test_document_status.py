"""``status_of``: each rule of a document's status, one path at a time — the facts as Dagster and the records give
them, the status and reason a reader sees."""

from atlas_pipeline.core.document_status import NOT_YET, ExtractionFacts, RunFacts, is_stale, status_of
from atlas_pipeline.core.statuses import DocumentStatus, Stage

DONE = ExtractionFacts(status=DocumentStatus.DONE, reason="", version="v1")
EXTRACTED = RunFacts(extracted=True)


def test_a_document_no_run_reached_is_pending_with_its_reason():
    assert status_of(RunFacts(), None, "v1") == NOT_YET
    assert NOT_YET.status == DocumentStatus.PENDING and NOT_YET.reason == "known, not processed yet"
    assert status_of(EXTRACTED, None, "v1") == NOT_YET  # materialised, its record not there (yet)


def test_a_run_at_work_wins_over_everything_but_says_so():
    status = status_of(RunFacts(running=True, extracted=True, crash="boom"), DONE, "v1")
    assert (status.status, status.reason, status.outside) == (
        DocumentStatus.EXTRACTING,
        "a run is processing it",
        False,
    )
    cancelled = status_of(RunFacts(running=True, cancelled="cancelled by ana"), None, "v1")
    assert cancelled.status == DocumentStatus.EXTRACTING  # a cancellation never hides a run at work


def test_a_crashed_step_fails_the_document_for_a_reason_outside_it_and_an_interrupted_one_is_pending():
    failed = status_of(RunFacts(crash="document_text: OSError: disk full", extracted=True), DONE, "v1")
    assert (failed.status, failed.reason, failed.outside) == (
        DocumentStatus.FAILED,
        "document_text: OSError: disk full",
        True,
    )
    stopped = status_of(RunFacts(crash="interrupted: its run was stopped", interrupted=True), None, "v1")
    assert (stopped.status, stopped.outside) == (DocumentStatus.PENDING, True)


def test_the_extraction_says_its_own_outcome_and_a_retryable_failure_is_outside_the_document():
    partial = status_of(EXTRACTED, ExtractionFacts(DocumentStatus.PARTIAL, "3 of 9 fields", version="v1"), "v1")
    assert (partial.status, partial.reason, partial.stale) == (DocumentStatus.PARTIAL, "3 of 9 fields", False)
    endpoint = ExtractionFacts(DocumentStatus.FAILED, "extract: 503", Stage.EXTRACT, retryable=True, version="v1")
    assert status_of(EXTRACTED, endpoint, "v1").outside
    broken = ExtractionFacts(DocumentStatus.FAILED, "parse: not a PDF", Stage.PARSE, version="v1")
    assert not status_of(EXTRACTED, broken, "v1").outside


def test_another_version_makes_it_stale_and_pending_unless_the_file_itself_stopped_it():
    old = ExtractionFacts(DocumentStatus.DONE, "", version="v0", version_changes=("template", "model"))
    status = status_of(EXTRACTED, old, "v1")
    assert (status.status, status.stale) == (DocumentStatus.PENDING, True)
    assert status.reason == (
        "stale: extracted with version v0, now v1 (template, model changed); re-extraction pending"
    )
    assert status_of(EXTRACTED, ExtractionFacts(DocumentStatus.DONE, "", version=""), "v1").reason.startswith(
        "stale: extracted with version unknown, now v1 (version changed)"
    )
    for stage in (Stage.SNAPSHOT, Stage.PARSE):  # a locked or broken file: a new version changes nothing for it
        stopped = ExtractionFacts(DocumentStatus.SKIPPED, f"{stage}: locked", stage, version="v0")
        assert not is_stale(stopped, "v1")
        assert status_of(EXTRACTED, stopped, "v1").status == DocumentStatus.SKIPPED
    endpoint = ExtractionFacts(DocumentStatus.FAILED, "extract: 503", Stage.EXTRACT, version="v0")
    assert is_stale(endpoint, "v1")  # the endpoint's failure under the old version: asked again
    assert not is_stale(old, None)  # no version given: every version counts


def test_approval_settles_a_current_extraction_only():
    approved = ExtractionFacts(DocumentStatus.DONE, "", version="v1", approval="9 of 9 fields decided")
    status = status_of(EXTRACTED, approved, "v1")
    assert (status.status, status.reason) == (DocumentStatus.APPROVED, "9 of 9 fields decided")
    stale = ExtractionFacts(DocumentStatus.DONE, "", version="v0", approval="9 of 9 fields decided")
    assert status_of(EXTRACTED, stale, "v1").status == DocumentStatus.PENDING
    failed_after = ExtractionFacts(
        DocumentStatus.FAILED,
        "extract: 503",
        Stage.EXTRACT,
        True,
        "v1",
        kept=True,
        kept_from="2026-11-20",
        approval="all",
    )
    status = status_of(EXTRACTED, failed_after, "v1")  # a failure is never hidden by approval
    assert status.status == DocumentStatus.FAILED
    assert status.reason == "extract: 503; the values of its extraction of 2026-11-20 and their decisions stay"


def test_a_cancelled_run_makes_the_document_cancelled_with_who_and_when():
    cancelled = RunFacts(extracted=True, cancelled="cancelled by ana at 2026-11-27T09:00:00+00:00")
    status = status_of(cancelled, DONE, "v1")
    assert (status.status, status.reason) == (DocumentStatus.CANCELLED, cancelled.cancelled)
    assert status_of(RunFacts(cancelled="cancelled by ana"), None, "v1").status == DocumentStatus.CANCELLED
