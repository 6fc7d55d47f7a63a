"""The document page of a failed document: why it failed and what happens next, never an offer to extract by hand
(there is no text to extract from)."""

from types import SimpleNamespace

import pytest

from atlas_pipeline.core.statuses import DocumentStatus
from atlas_pipeline.review.final_values import review_document
from atlas_pipeline.review_page.common import TEMPLATES
from atlas_pipeline.store.records import ExtractionRecord


def _page(record: ExtractionRecord) -> str:
    request = SimpleNamespace(state=SimpleNamespace(user=None), url=SimpleNamespace(path="/documents/k", query=""))
    return TEMPLATES.get_template("document.html").render(
        request=request,
        key=record.key,
        state=None,
        record=record,
        review=review_document(record, [], frozenset()),
        team=None,
        blind="",
        selected=None,
        reviewer="ana",
        query=lambda **changes: "?",
    )


@pytest.mark.parametrize(
    ("mode", "reason", "retryable", "next_step"),
    [
        ("skip", "parse: not a readable PDF: no objects found", False, "The file itself cannot be read"),
        ("llm", "extract: LLM endpoint kept failing: HTTP 500 (gave up after 5 attempts)", True, "tries it again"),
    ],
)
def test_a_failed_document_says_why_and_offers_no_extraction_by_hand(mode, reason, retryable, next_step):
    record = ExtractionRecord(
        key="k",
        sha256="ab" * 32,
        status=DocumentStatus.FAILED,
        reason=reason,
        retryable=retryable,
        mode=mode,
        rule="default",
        template_code="rct_base",
        template_version="1",
        template_hash="h",
        extracted_at="2026-01-01T00:00:00+00:00",
    )
    page = _page(record)
    assert 'id="failed-note"' in page and reason in page and next_step in page
    assert 'id="blind-models"' not in page and 'id="blind-reviewers"' not in page and 'id="by-hand-note"' not in page
