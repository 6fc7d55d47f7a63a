"""Task completion: where every known document stands, and the figures a reviewer asks for first."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from pydantic import BaseModel

from atlas_pipeline.grading.statuses import ORDER, TERMINAL, DocumentStatus
from atlas_pipeline.knowledge.catalog import now_iso
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
    snapshot: SnapshotRecord | None = None
    parse: ParseRecord | None = None
    extraction: ExtractionRecord | None = None


class TaskCompletion(BaseModel):
    total: int
    counts: dict[str, int]
    terminal: int
    open: int
    completion_rate: float  # done / total
    partial_rate: float  # (partial + incomplete) / total
    failure_rate: float  # failed / total
    skipped_rate: float
    average_processing_seconds: float | None
    total_pages: int
    removed_sources: int
    llm_calls: int = 0
    llm_cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    fields_needing_review: int = 0
    computed_at: str

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
                f"{self.prompt_tokens + self.completion_tokens} tokens; {self.fields_needing_review} field(s) to review"
            )
        if self.removed_sources:
            out.append(f"{self.removed_sources} source(s) removed from the knowledge base (results kept)")
        return out


def _rate(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


def summarise(states: list[DocumentState]) -> TaskCompletion:
    counts = Counter(state.status.value for state in states)
    total = len(states)
    times = [s.extraction.processing_seconds for s in states if s.extraction and s.extraction.processing_seconds]
    terminal = sum(counts[status.value] for status in TERMINAL)
    records = [s.extraction for s in states if s.extraction is not None]
    return TaskCompletion(
        total=total,
        counts={status.value: counts.get(status.value, 0) for status in ORDER},
        terminal=terminal,
        open=total - terminal,
        completion_rate=_rate(counts["done"], total),
        partial_rate=_rate(counts["partial"] + counts["incomplete"], total),
        failure_rate=_rate(counts["failed"], total),
        skipped_rate=_rate(counts["skipped"], total),
        average_processing_seconds=round(sum(times) / len(times), 3) if times else None,
        total_pages=sum(s.parse.pages for s in states if s.parse),
        removed_sources=sum(1 for s in states if s.source_removed),
        llm_calls=sum(r.llm_calls for r in records),
        llm_cache_hits=sum(r.llm_cache_hits for r in records),
        prompt_tokens=sum(r.prompt_tokens for r in records),
        completion_tokens=sum(r.completion_tokens for r in records),
        fields_needing_review=sum(r.unverified_fields for r in records),
        computed_at=now_iso(),
    )
