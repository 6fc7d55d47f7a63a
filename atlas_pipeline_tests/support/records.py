"""A done extraction record for unit tests that need one without running the pipeline."""

from __future__ import annotations

from typing import Any

from atlas_pipeline.core.statuses import DocumentStatus
from atlas_pipeline.store.records import ExtractionRecord


def extraction_record(key: str = "trial.pdf", fields: dict[str, Any] | None = None, sha256: str = "a" * 64):
    """A done LLM extraction of the seed template (``fields``: the record's field name → field dict)."""
    return ExtractionRecord(
        key=key,
        sha256=sha256,
        status=DocumentStatus.DONE,
        reason="",
        mode="llm",
        rule="default",
        template_code="rct_base",
        template_version="1",
        template_hash="h",
        extraction_version="x1",
        fields=fields or {},
        extracted_at="2026-11-25T00:00:00Z",
    )
