"""Task completion: where every known document stands, and the figures a reviewer asks for first."""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel

from atlas_pipeline.core.clock import now_iso
from atlas_pipeline.core.statuses import ORDER, TERMINAL
from atlas_pipeline.extraction.prices import money
from atlas_pipeline.read_model.document_state import DocumentState
from atlas_pipeline.review.final_values import PROVENANCES
from atlas_pipeline.review.quality import QualityRow, review_quality


class TaskCompletion(BaseModel):
    total: int
    counts: dict[str, int]
    terminal: int
    open: int
    completion_rate: float  # (done + approved) / total
    partial_rate: float  # (partial + incomplete) / total
    failure_rate: float  # failed / total
    skipped_rate: float
    average_processing_seconds: float | None
    total_pages: int
    removed_sources: int
    duplicates: int = 0  # documents that are another version of a work already known (one canonical per work)
    llm_calls: int = 0
    llm_cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_cost: float = 0.0  # of the current extractions whose model has a price
    llm_cost_currency: str = ""
    llm_cost_per_value: float | None = None  # llm_cost over the values those extractions gave
    documents_without_price: int = 0  # LLM extractions whose model has no price: their cost is unknown
    fields_needing_review: int = 0
    documents_approved: int = 0
    documents_awaiting_review: int = 0
    decisions: int = 0
    disagreements: int = 0
    fields_by_provenance: dict[str, int] = {}
    review_quality: list[QualityRow] = []
    computed_at: str

    def cost_line(self) -> str:
        """What the current extractions cost, per value too, and how many have no price."""
        priced = money(self.llm_cost, self.llm_cost_currency or "USD")
        line = f"{priced} for the current extractions"
        if self.llm_cost_per_value is not None:
            line += f" ({money(self.llm_cost_per_value, self.llm_cost_currency or 'USD')} a value)"
        if self.documents_without_price:
            line += f"; {self.documents_without_price} document(s) by a model with no price: cost unknown"
        return line

    def lines(self) -> list[str]:
        """A short human summary, one status a line, used by the CLI and as asset metadata."""
        out = [f"{self.total} documents: {self.terminal} finished, {self.open} open"]
        for status in ORDER:
            count = self.counts.get(status.value, 0)
            if count:
                out.append(f"  {status.value:<11} {count}")
        if self.average_processing_seconds is not None:
            out.append(
                f"average processing time {self.average_processing_seconds:.1f} s per document "
                "(snapshot + parse + extraction, as first made)"
            )
        if self.llm_calls or self.llm_cache_hits:
            out.append(
                f"LLM: {self.llm_calls} call(s), {self.llm_cache_hits} cache hit(s), "
                f"{self.prompt_tokens + self.completion_tokens} tokens"
            )
            out.append("LLM cost: " + self.cost_line())
        if self.documents_approved or self.decisions or self.fields_needing_review:
            by = ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in self.fields_by_provenance.items() if n)
            out.append(
                f"review: {self.fields_needing_review} field(s) to review; {self.documents_approved} document(s) "
                f"approved, {self.documents_awaiting_review} awaiting review; {self.decisions} decision(s); "
                f"fields: {by}"
            )
        if self.duplicates:
            out.append(
                f"{self.duplicates} document(s) are other versions of a work already known "
                f"({self.total - self.duplicates} distinct works; see duplicate_of in the exports)"
            )
        if self.removed_sources:
            out.append(f"{self.removed_sources} source(s) removed from the knowledge base (results kept)")
        return out


def _rate(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


def _costs(records: list) -> dict:
    """Money: the priced LLM extractions' total and per value given, and how many LLM extractions have no price."""
    llm = [r for r in records if r.mode == "llm" and (r.llm_calls or r.llm_cache_hits)]
    priced = [r for r in llm if r.cost is not None]
    total = sum(r.cost for r in priced)
    values = sum(1 for r in priced for field in r.fields.values() if (field or {}).get("value") is not None)
    return {
        "llm_cost": round(total, 6),
        "llm_cost_currency": next((r.cost_currency for r in priced if r.cost_currency), ""),
        "llm_cost_per_value": round(total / values, 8) if values else None,
        "documents_without_price": len(llm) - len(priced),
    }


def summarise(states: list[DocumentState]) -> TaskCompletion:
    counts = Counter(state.status.value for state in states)
    total = len(states)
    times = [s.extraction.processing_seconds for s in states if s.extraction and s.extraction.processing_seconds]
    terminal = sum(counts[status.value] for status in TERMINAL)
    records = [s.extraction for s in states if s.extraction is not None]
    reviews = [review for review in (s.current_review for s in states) if review is not None and review.reviewable]
    provenance = Counter(field.provenance for review in reviews for field in review.fields.values())
    return TaskCompletion(
        total=total,
        counts={status.value: counts.get(status.value, 0) for status in ORDER},
        terminal=terminal,
        open=total - terminal,
        completion_rate=_rate(counts["done"] + counts["approved"], total),
        partial_rate=_rate(counts["partial"] + counts["incomplete"], total),
        failure_rate=_rate(counts["failed"], total),
        skipped_rate=_rate(counts["skipped"], total),
        average_processing_seconds=round(sum(times) / len(times), 3) if times else None,
        total_pages=sum(s.parse.pages for s in states if s.parse),
        removed_sources=sum(1 for s in states if s.source_removed),
        duplicates=sum(1 for s in states if s.duplicate_of),
        llm_calls=sum(r.llm_calls for r in records),
        llm_cache_hits=sum(r.llm_cache_hits for r in records),
        prompt_tokens=sum(r.prompt_tokens for r in records),
        completion_tokens=sum(r.completion_tokens for r in records),
        **_costs(records),
        # one count everywhere (this summary, the review page's list and each document's page): fields awaiting a
        # person or to re-check, under the team's acceptance policy
        fields_needing_review=sum(review.to_review for review in reviews),
        documents_approved=sum(1 for review in reviews if review.approved),
        documents_awaiting_review=sum(1 for review in reviews if not review.approved),
        decisions=sum(review.decisions for review in reviews),
        disagreements=sum(review.disagreements for review in reviews),
        fields_by_provenance={name: provenance.get(name, 0) for name in PROVENANCES},
        review_quality=review_quality(reviews),
        computed_at=now_iso(),
    )


def quality_table(rows: list[QualityRow]) -> str:
    """Markdown table of ``review_quality`` rows (asset metadata, the CLI)."""
    if not rows:
        return "no reviewed fields yet"
    lines = ["| field | tier | reviewed | approved | corrected | rejected | kept |", "|---|---|---|---|---|---|---|"]
    lines += [
        f"| {r.field} | {r.tier} | {r.reviewed} | {r.approved} | {r.corrected} | {r.rejected} | {r.kept_rate:.0%} |"
        for r in rows
    ]
    return "\n".join(lines)
