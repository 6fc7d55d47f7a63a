"""The per-document checks a Dagster user sees on ``document_extraction``, computed from an extraction record.

- ``quote_grounding`` (warning): every extracted value's quote is verified; lists the fields that need review.
- ``value_consistency`` (error): the template's consistency checks hold; lists every violation with its values.

A document that failed or was skipped has no values to vouch for: both checks say so and do not pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from atlas_pipeline.core.statuses import DocumentStatus
from atlas_pipeline.grading.fields import REVIEW_TIERS
from atlas_pipeline.store.records import ExtractionRecord

QUOTE_GROUNDING = "quote_grounding"
VALUE_CONSISTENCY = "value_consistency"


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


def document_checks(record: ExtractionRecord) -> list[CheckResult]:
    if record.status in (DocumentStatus.FAILED, DocumentStatus.SKIPPED):
        why = f"the document is {record.status.value}: {record.reason}"
        metadata = {"status": record.status.value, "reason": record.reason}
        return [
            CheckResult(QUOTE_GROUNDING, False, "warn", why, metadata),
            CheckResult(VALUE_CONSISTENCY, False, "warn", why, metadata),
        ]
    review = fields_needing_review(record)
    grounding = CheckResult(
        QUOTE_GROUNDING,
        not review,
        "warn",
        f"{len(review)} field(s) need review" if review else "every value verified or not reported",
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
    return [grounding, consistency]
