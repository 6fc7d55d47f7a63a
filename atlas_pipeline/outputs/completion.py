"""Task completion: where every known document stands, and the figures a reviewer asks for first."""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel

from atlas_pipeline.core.clock import now_iso
from atlas_pipeline.core.statuses import ORDER, TERMINAL
from atlas_pipeline.extraction.prices import money
from atlas_pipeline.read_model.document_state import DocumentState
from atlas_pipeline.review.final_values import PROVENANCES
from atlas_pipeline.review.quality import QualityRow, counted_decisions, quality_rows


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


class CompletionPart(BaseModel):
    """One document's part of the task completion: what ``summarise`` adds up, kept between refreshes beside the
    document's rows so an unchanged document is not read again."""

    status: str
    source_removed: bool = False
    processing_seconds: float | None = None
    pages: int = 0
    extracted: bool = False  # it has an extraction record (its tokens count)
    llm_calls: int = 0
    llm_cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_priced: bool = False  # an LLM extraction (calls or cache hits) with a price
    llm_unpriced: bool = False  # an LLM extraction whose model has no price
    cost: float = 0.0
    cost_currency: str = ""
    values_given: int = 0  # fields with a value, of a priced LLM extraction
    reviewable: bool = False  # its current review is one a person works on
    to_review: int = 0
    approved: bool = False
    decisions: int = 0
    disagreements: int = 0
    provenance: dict[str, int] = {}
    quality: list[tuple[str, str, str]] = []  # (field, tier, decision) of the fields a person decided


def completion_part(state: DocumentState) -> CompletionPart:
    record, parse = state.extraction, state.parse
    part = CompletionPart(
        status=state.status.value,
        source_removed=state.source_removed,
        pages=parse.pages if parse else 0,
    )
    if record is not None:
        llm = record.mode == "llm" and bool(record.llm_calls or record.llm_cache_hits)
        priced = llm and record.cost is not None
        part.extracted = True
        part.processing_seconds = record.processing_seconds or None
        part.llm_calls, part.llm_cache_hits = record.llm_calls, record.llm_cache_hits
        part.prompt_tokens, part.completion_tokens = record.prompt_tokens, record.completion_tokens
        part.llm_priced, part.llm_unpriced = priced, llm and not priced
        if priced:
            part.cost, part.cost_currency = record.cost or 0.0, record.cost_currency
            part.values_given = sum(1 for f in record.fields.values() if (f or {}).get("value") is not None)
    review = state.current_review
    if review is not None and review.reviewable:
        part.reviewable, part.to_review, part.approved = True, review.to_review, review.approved
        part.decisions, part.disagreements = review.decisions, review.disagreements
        part.provenance = dict(Counter(field.provenance for field in review.fields.values()))
        part.quality = counted_decisions(review)
    return part


def _costs(parts: list[CompletionPart]) -> dict:
    """Money: the priced LLM extractions' total and per value given, and how many LLM extractions have no price."""
    priced = [p for p in parts if p.llm_priced]
    total = sum(p.cost for p in priced)
    values = sum(p.values_given for p in priced)
    return {
        "llm_cost": round(total, 6),
        "llm_cost_currency": next((p.cost_currency for p in priced if p.cost_currency), ""),
        "llm_cost_per_value": round(total / values, 8) if values else None,
        "documents_without_price": sum(1 for p in parts if p.llm_unpriced),
    }


def summarise(states: list[DocumentState]) -> TaskCompletion:
    return summarise_parts([completion_part(s) for s in states], duplicates=sum(1 for s in states if s.duplicate_of))


def summarise_parts(parts: list[CompletionPart], duplicates: int = 0) -> TaskCompletion:
    """Task completion from every document's part (``duplicates``: how many are another version of a known work)."""
    counts = Counter(part.status for part in parts)
    total = len(parts)
    times = [p.processing_seconds for p in parts if p.processing_seconds]
    terminal = sum(counts[status.value] for status in TERMINAL)
    extracted = [p for p in parts if p.extracted]
    reviews = [p for p in parts if p.reviewable]
    provenance = Counter()
    for part in reviews:
        provenance.update(part.provenance)
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
        total_pages=sum(p.pages for p in parts),
        removed_sources=sum(1 for p in parts if p.source_removed),
        duplicates=duplicates,
        llm_calls=sum(p.llm_calls for p in extracted),
        llm_cache_hits=sum(p.llm_cache_hits for p in extracted),
        prompt_tokens=sum(p.prompt_tokens for p in extracted),
        completion_tokens=sum(p.completion_tokens for p in extracted),
        **_costs(parts),
        # one count everywhere (this summary, the review page's list and each document's page): fields awaiting a
        # person or to re-check, under the team's acceptance policy
        fields_needing_review=sum(p.to_review for p in reviews),
        documents_approved=sum(1 for p in reviews if p.approved),
        documents_awaiting_review=sum(1 for p in reviews if not p.approved),
        decisions=sum(p.decisions for p in reviews),
        disagreements=sum(p.disagreements for p in reviews),
        fields_by_provenance={name: provenance.get(name, 0) for name in PROVENANCES},
        review_quality=quality_rows(decision for p in reviews for decision in p.quality),
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
