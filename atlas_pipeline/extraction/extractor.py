"""LLM extraction of a template from one document, with every value graded against the document itself.

Strategies: ``direct`` (one call with the whole text), ``chunked`` (overlapping chunks, merged per field by the best
verified quote) and ``auto`` (chunked above the rule's chunk size). The chunk size grows when a document would need
more than ``max_chunks`` chunks, so no text is ever left out.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import asdict, dataclass
from typing import Any

from atlas_pipeline.extraction.llm import LLMClient, Usage
from atlas_pipeline.extraction.prompt import build_messages
from atlas_pipeline.extraction.quotes import match_quote
from atlas_pipeline.extraction.rules import Rule
from atlas_pipeline.extraction.schema import answer_model, json_schema
from atlas_pipeline.extraction.templates import Template, TemplateField
from atlas_pipeline.status import DocumentStatus

_NUMBER = re.compile(r"[-\u2212\u2013]?\d[\d,]*(?:[.\u00b7]\d+)?")
DONE_AT = 0.9
PARTIAL_AT = 0.5


@dataclass
class FieldResult:
    """One extracted field as a reviewer sees it."""

    module: str
    value: Any
    quote: str | None
    confidence: float
    tier: str  # verified | approximate | unverified | not_reported
    start: int | None = None
    end: int | None = None
    method: str = "none"
    note: str = ""

    @property
    def counts_as_complete(self) -> bool:
        return self.tier in ("verified", "not_reported")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ExtractionOutcome:
    fields: dict[str, FieldResult]
    usage: Usage
    strategy: str
    chunks: int
    completeness: float
    status: DocumentStatus


def numbers_in(text: str) -> list[float]:
    """Numbers written in ``text`` (unicode minus, middle-dot decimals and thousands separators understood)."""
    found = []
    for raw in _NUMBER.findall(unicodedata.normalize("NFKC", text)):
        cleaned = raw.replace("\u2212", "-").replace("\u2013", "-").replace("\u00b7", ".")
        candidates = {cleaned.replace(",", "")}
        if cleaned.count(",") == 1 and "." not in cleaned:
            candidates.add(cleaned.replace(",", "."))  # decimal comma
        for candidate in candidates:
            try:
                found.append(float(candidate))
            except ValueError:
                continue
    return found


def value_in_quote(value: Any, quote: str) -> bool:
    """A numeric value must be written in its own quote (same number, sign included)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return True
    return any(math.isclose(value, number, rel_tol=0, abs_tol=1e-9) for number in numbers_in(quote))


def grade_field(field: TemplateField, module: str, answer: dict | None, scope: str) -> FieldResult:
    value = (answer or {}).get("value")
    quote = (answer or {}).get("quote")
    if value in (None, "", []) and not quote:
        return FieldResult(module, None, None, 1.0, "not_reported")
    if not quote:
        return FieldResult(module, value, None, 0.0, "unverified", note="no quote given")
    match = match_quote(quote, scope)
    result = FieldResult(module, value, quote, match.confidence, match.tier, match.start, match.end, match.method)
    if value is None:
        result.note = "quote without a value"
    elif not value_in_quote(value, quote):
        result.confidence, result.tier, result.note = 0.0, "unverified", "value is not written in its quote"
    elif match.tier == "unverified":
        result.note = "quote not found in the document"
    return result


def completeness(template: Template, fields: dict[str, FieldResult]) -> float:
    """Weighted share (required fields count twice) of fields verified or explicitly not reported."""
    total = sum(2 if f.required else 1 for f in template.fields)
    good = sum(2 if f.required else 1 for f in template.fields if fields[f.name].counts_as_complete)
    return round(good / total, 4) if total else 1.0


def status_for(score: float) -> DocumentStatus:
    if score >= DONE_AT:
        return DocumentStatus.DONE
    if score >= PARTIAL_AT:
        return DocumentStatus.PARTIAL
    return DocumentStatus.INCOMPLETE


def split_chunks(text: str, size: int, overlap: int, max_chunks: int) -> list[str]:
    """Overlapping chunks cut at paragraph breaks when possible; never more than ``max_chunks``, nothing dropped
    (the chunk size grows until the whole text fits)."""
    size = max(size, math.ceil(len(text) / max_chunks) + overlap, 2 * overlap + 1)
    while True:
        chunks = _cut(text, size, overlap)
        if len(chunks) <= max_chunks:
            return chunks
        size = math.ceil(size * 1.25)


def _cut(text: str, size: int, overlap: int) -> list[str]:
    chunks, start = [], 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            cut = text.rfind("\n\n", start + size // 2, end)
            end = cut if cut > start else end
        chunks.append(text[start:end])
        if end >= len(text):
            break
        start = max(end - overlap, start + 1)
    return chunks or [""]


def _better(candidate: FieldResult, current: FieldResult | None) -> bool:
    if current is None:
        return True
    rank = {"verified": 3, "approximate": 2, "unverified": 1, "not_reported": 0}
    return (rank[candidate.tier], candidate.confidence) > (rank[current.tier], current.confidence)


def extract_with_llm(
    client: LLMClient,
    template: Template,
    rule: Rule,
    markdown: str,
    tables_html: list[str],
    tables_text: str,
) -> ExtractionOutcome:
    """Run the rule's strategy and grade every field against markdown + table text."""
    schema = json_schema(template)
    model = answer_model(template)
    scope = markdown + "\n\n" + tables_text
    strategy = rule.strategy
    if strategy == "auto":
        strategy = "chunked" if len(markdown) > rule.chunk_size_chars else "direct"
    if strategy == "chunked":
        chunks = split_chunks(markdown, rule.chunk_size_chars, rule.chunk_overlap_chars, rule.max_chunks)
    else:
        chunks = [markdown]
    usage = Usage()
    best: dict[str, FieldResult] = {}
    modules = {field.name: module.name for module in template.modules for field in module.fields}
    for index, chunk in enumerate(chunks, 1):
        part = (index, len(chunks)) if len(chunks) > 1 else None
        messages = build_messages(template, chunk, tables_html, rule.custom_instructions, schema=schema, part=part)
        answer = client.complete(messages, schema, model)
        usage.add(answer.usage)
        for field in template.fields:
            graded = grade_field(field, modules[field.name], answer.data.get(field.name), scope)
            if _better(graded, best.get(field.name)):
                best[field.name] = graded
    score = completeness(template, best)
    return ExtractionOutcome(best, usage, strategy, len(chunks), score, status_for(score))
