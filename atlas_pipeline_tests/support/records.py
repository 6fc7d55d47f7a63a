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


def accepted_report(key: str, values: dict[str, Any], study_id: str = "NCT9", provenance: str = "model_verified"):
    """A done report of ``study_id`` whose review holds ``values`` (field → value) as accepted final values, each
    quoted as "<field> in <key>"."""
    from atlas_pipeline.read_model.document_state import DocumentState
    from atlas_pipeline.review.final_values import FINAL, DocumentReview, FinalField

    extraction = extraction_record(key, sha256=(key * 64)[:64])
    fields = {
        name: FinalField(
            field=name,
            provenance=provenance,
            final_value=value,
            quote=f"{name} in {key}",
            final_state="final" if provenance in FINAL else provenance,  # a solo review: what was accepted is final
        )
        for name, value in values.items()
    }
    review = DocumentReview(
        key=key,
        sha256=extraction.sha256,
        extraction_version=extraction.extraction_version,
        approved=False,
        reviewable=True,
        fields=fields,
    )
    return DocumentState(
        key=key, status=DocumentStatus.DONE, reason="", study_id=study_id, extraction=extraction, review=review
    )
