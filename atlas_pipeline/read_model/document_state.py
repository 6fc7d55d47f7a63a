"""One document as every reader sees it: status and reason, the records behind them, its review, group and study."""

from __future__ import annotations

from dataclasses import dataclass

from atlas_pipeline.core.statuses import DocumentStatus
from atlas_pipeline.review.final_values import DocumentReview, applies_to
from atlas_pipeline.store.records import ExtractionRecord, ParseRecord, SnapshotRecord


@dataclass
class DocumentState:
    """One document as the aggregates see it: status and reason plus the records behind them (if any)."""

    key: str
    status: DocumentStatus
    reason: str
    source_path: str | None = None
    source_removed: bool = False
    stale: bool = False  # extracted with another template version: values withheld until re-extracted
    # failed for a reason outside the document (the endpoint, storage, a crashed step): another run may succeed, and
    # `atlas run` exits with its own status (``cli.exit_status``)
    outside: bool = False
    duplicate_of: str = ""  # the canonical document of the work this one is a copy of (knowledge.duplicates)
    duplicate_evidence: str = ""
    study_id: str = ""  # the study this document reports (``knowledge.studies``), shared by all its reports
    snapshot: SnapshotRecord | None = None
    parse: ParseRecord | None = None
    extraction: ExtractionRecord | None = None
    review: DocumentReview | None = None  # the review of this very extraction (None: none yet, or of an older one)

    @property
    def current_review(self) -> DocumentReview | None:
        return self.review if not self.stale and applies_to(self.review, self.extraction) else None
