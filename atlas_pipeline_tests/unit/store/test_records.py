"""The records say which stage stopped a document: written by the stage itself, and read from the reason only for a
record made before the stage was kept on its own (``legacy_stage``, at the boundary where records are read)."""

from atlas_pipeline.core.statuses import Stage
from atlas_pipeline.store.records import ExtractionRecord, Problem, legacy_stage

BASE = {"key": "k", "sha256": "0" * 64, "mode": "llm", "rule": "r", "template_code": "t", "template_version": "1"}


def _record(**values) -> ExtractionRecord:
    return ExtractionRecord.model_validate({**BASE, "template_hash": "h", "extracted_at": "2026-11-27", **values})


def test_the_stage_is_the_records_own_and_an_old_records_is_read_from_its_reason():
    assert legacy_stage("parse: the PDF is encrypted") == Stage.PARSE
    assert legacy_stage("snapshot: unsupported file type") == Stage.SNAPSHOT
    assert legacy_stage("extract: HTTP 503") == Stage.EXTRACT
    for reason in ("stale: extracted with version x1", "parsed: fine", "", "no colon here"):
        assert legacy_stage(reason) is None, reason
    old = _record(status="skipped", reason="parse: the PDF is encrypted")  # written before stopped_at existed
    assert old.stopped_at == Stage.PARSE
    said = _record(status="failed", reason="parse: looks like a stage", stopped_at="extract")  # the record's word wins
    assert said.stopped_at == Stage.EXTRACT
    assert _record(status="done", reason="").stopped_at is None
    assert _record(status="failed", reason="a crash", stopped_at=None).stopped_at is None
    assert Problem(status="failed", reason="bad", stage="parse").stage == Stage.PARSE
