"""The per-document checks a Dagster user sees on ``document_extraction``, computed from an extraction record.

- ``quote_grounding`` (warning): every extracted value's quote is verified; lists the fields that need review.
- ``value_consistency`` (error): the template's consistency checks hold; lists every violation with its values.
- ``document_outcome``: the document went through — fails (error) for a document that failed, with the stage and
  reason, and (warning) for one that was skipped. The materialisation holds the record of what happened, so task
  completion and the exports count the document; this check is what shows it red in the Dagster UI, partition by
  partition, without failing a run or having the sensor retry a document that cannot be read.

A document that failed or was skipped has no values to vouch for: the first two checks say so and do not pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from atlas_pipeline.core.statuses import DocumentStatus
from atlas_pipeline.grading.fields import REVIEW_TIERS
from atlas_pipeline.store.records import ExtractionRecord

QUOTE_GROUNDING = "quote_grounding"
VALUE_CONSISTENCY = "value_consistency"
DOCUMENT_OUTCOME = "document_outcome"


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    severity: str  # "warn" | "error"
    description: str
    metadata: dict[str, Any] = field(default_factory=dict)


def fields_needing_review(record: ExtractionRecord) -> list[str]:
    return [
        name
        for name, value in record.fields.items()
        if isinstance(value, dict) and (value.get("tier") in REVIEW_TIERS or value.get("flags"))
    ]


def outcome_check(record: ExtractionRecord) -> CheckResult:
    """Whether the document went through: red (error) when it failed, a warning when it was skipped."""
    metadata = {"status": record.status.value, "reason": record.reason}
    if record.status == DocumentStatus.FAILED:
        return CheckResult(DOCUMENT_OUTCOME, False, "error", f"failed: {record.reason}", metadata)
    if record.status == DocumentStatus.SKIPPED:
        return CheckResult(DOCUMENT_OUTCOME, False, "warn", f"skipped: {record.reason}", metadata)
    return CheckResult(DOCUMENT_OUTCOME, True, "error", f"{record.status.value}: {record.reason}", metadata)


def document_checks(record: ExtractionRecord) -> list[CheckResult]:
    outcome = outcome_check(record)
    if record.status in (DocumentStatus.FAILED, DocumentStatus.SKIPPED):
        why = f"the document is {record.status.value}: {record.reason}"
        metadata = {"status": record.status.value, "reason": record.reason}
        return [
            CheckResult(QUOTE_GROUNDING, False, "warn", why, metadata),
            CheckResult(VALUE_CONSISTENCY, False, "warn", why, metadata),
            outcome,
        ]
    review = fields_needing_review(record)
    by_hand = record.mode == "skip"
    grounding = CheckResult(
        QUOTE_GROUNDING,
        not review,
        "warn",
        "skip mode: no model values to ground (a person extracts them by hand, their quotes graded as they are given)"
        if by_hand
        else f"{len(review)} field(s) need review"
        if review
        else "every value verified or not reported",
        {"mode": record.mode, "fields_needing_review": len(review), "fields": ", ".join(review) or "none"},
    )
    violations = record.violations
    consistency = CheckResult(
        VALUE_CONSISTENCY,
        not violations,
        "error",
        "; ".join(v["message"] for v in violations) if violations else "every consistency check holds",
        {
            "mode": record.mode,
            "violations": len(violations),
            "details": [
                {"rule": v["rule"], "fields": v["fields"], "values": v["values"], "message": v["message"]}
                for v in violations
            ],
        },
    )
    return [grounding, consistency, outcome]
