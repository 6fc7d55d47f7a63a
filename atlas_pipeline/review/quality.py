"""What the decisions teach: per field and per tier, how often a person kept the model's value as it was.

"How often is ``verified`` right on our documents?" is answered from the reviewed fields themselves: a field a person
approved counts as kept, one they corrected or rejected as changed. Fields accepted by policy alone are not evidence
either way and are left out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from pydantic import BaseModel

from atlas_pipeline.review.final_values import DocumentReview


class QualityRow(BaseModel):
    field: str  # a field name, or "(all)" for the tier over every field
    tier: str
    reviewed: int
    approved: int
    corrected: int
    rejected: int
    kept_rate: float  # approved / reviewed


def review_quality(reviews: list[DocumentReview]) -> list[QualityRow]:
    """Rows per (field, tier) and per tier over all fields, from the decision that counts on each field."""
    return quality_rows(decision for review in reviews for decision in counted_decisions(review))


PERSON_DECIDED = ("reviewer_approved", "reviewer_corrected", "reviewer_added", "rejected")


def counted_decisions(review: DocumentReview) -> list[tuple[str, str, str]]:
    """One review's (field, tier, decision) that count: the fields a person decided (policy alone teaches nothing)."""
    return [
        (field.field, field.tier or "unknown", field.decision)
        for field in review.fields.values()
        if field.provenance in PERSON_DECIDED
    ]


def quality_rows(decisions: Iterable[tuple[str, str, str]]) -> list[QualityRow]:
    """The rows of ``review_quality`` from the counted decisions of any number of reviews."""
    tally: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: {"approve": 0, "correct": 0, "reject": 0})
    for name, tier, decision in decisions:
        for counted in (name, "(all)"):
            tally[(counted, tier)][decision] += 1
    rows = []
    for (name, tier), counts in sorted(tally.items(), key=lambda item: (item[0][0] != "(all)", item[0])):
        reviewed = sum(counts.values())
        rows.append(
            QualityRow(
                field=name,
                tier=tier,
                reviewed=reviewed,
                approved=counts["approve"],
                corrected=counts["correct"],
                rejected=counts["reject"],
                kept_rate=round(counts["approve"] / reviewed, 4) if reviewed else 0.0,
            )
        )
    return rows
