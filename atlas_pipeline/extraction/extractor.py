"""LLM extraction of a template from one document, with every value graded against the document itself.

Strategies: ``direct`` (one call with the whole text and all tables), ``chunked`` (overlapping chunks of the text,
each sent with the tables of its own pages) and ``auto`` (chunked above the rule's chunk size). The chunk size grows
when a document would need more than ``max_chunks`` chunks, so no text is ever left out.

Chunked answers are merged per field: every chunk's candidate is kept (``candidates``), the best graded one is the
value (and ``chunk`` says where it came from), and when any two chunks give different values the field is flagged
with every candidate instead of silently keeping one. Entries of a repeating group are merged by their identity (the
group's identity fields, compared without case, spacing or punctuation): one outcome reported by two chunks is one
entry, its fields merged as above.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from atlas_pipeline.core.statuses import DocumentStatus
from atlas_pipeline.core.templates import Template, TemplateModule, entry_field_name, entry_field_parts
from atlas_pipeline.extraction.llm.client import LLMClient
from atlas_pipeline.extraction.llm.errors import LLMAnswerCutError, LLMError, LLMQueuedError
from atlas_pipeline.extraction.llm.usage import Usage
from atlas_pipeline.extraction.prompt import PromptSources, build_messages, neutralise
from atlas_pipeline.extraction.rob2_proposal import propose_rob2
from atlas_pipeline.extraction.rules import Rule
from atlas_pipeline.extraction.schema import answer_model, json_schema
from atlas_pipeline.grading.consistency import Violation
from atlas_pipeline.grading.fields import (
    TIER_RANK,
    FieldResult,
    apply_checks,
    apply_plausibility,
    document_status,
    grade_field,
)
from atlas_pipeline.grading.locations import EvidenceScope
from atlas_pipeline.grading.text import tokenize
from atlas_pipeline.grading.values import numbers_in  # noqa: F401  (public here before grading/ existed)
from atlas_pipeline.parsing.model import Table

_PAGE_MARKER = re.compile(r"<!--\s*page\s+(\d+)\s*-->")


@dataclass
class ExtractionOutcome:
    fields: dict[str, FieldResult]
    usage: Usage
    strategy: str
    chunks: int
    completeness: float
    status: DocumentStatus
    reason: str
    violations: list[Violation] = field(default_factory=list)
    tables_sent: int = 0  # table HTMLs sent over all calls (each chunk gets the tables of its pages)
    answer_parts: list[str] = field(default_factory=list)  # what was asked in how many requests, when it was split


def chunk_spans(text: str, size: int, overlap: int, max_chunks: int) -> list[tuple[int, int]]:
    """(start, end) of overlapping chunks cut at paragraph breaks when possible; never more than ``max_chunks``,
    nothing dropped (the chunk size grows until the whole text fits)."""
    size = max(size, math.ceil(len(text) / max_chunks) + overlap, 2 * overlap + 1)
    while True:
        spans = _cut(text, size, overlap)
        if len(spans) <= max_chunks:
            return spans
        size = math.ceil(size * 1.25)


def split_chunks(text: str, size: int, overlap: int, max_chunks: int) -> list[str]:
    return [text[start:end] for start, end in chunk_spans(text, size, overlap, max_chunks)]


def _cut(text: str, size: int, overlap: int) -> list[tuple[int, int]]:
    spans, start = [], 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            cut = text.rfind("\n\n", start + size // 2, end)
            end = cut if cut > start else end
        spans.append((start, end))
        if end >= len(text):
            break
        start = max(end - overlap, start + 1)
    return spans or [(0, 0)]


def tables_for_chunks(markdown: str, spans: list[tuple[int, int]], tables: Sequence[Table]) -> list[list[Table]]:
    """The tables each chunk needs: those on the pages the chunk covers (PDF), or whose text is in the chunk (HTML,
    JATS). A table placed in no chunk goes with every chunk, so none is lost."""
    if len(spans) <= 1:
        return [list(tables)]
    view = tokenize(markdown)
    per_chunk: list[list[Table]] = [[] for _ in spans]
    for table in tables:
        homes = []
        for index, (start, end) in enumerate(spans):
            pages = {int(m.group(1)) for m in _PAGE_MARKER.finditer(markdown, start, end)}
            first_page = view.page_of(start)
            if first_page is not None:
                pages.add(first_page)
            head = table.text.split("\n", 1)[0][:200]
            if (table.page is not None and table.page in pages) or (table.page is None and head in markdown[start:end]):
                homes.append(index)
        for index in homes or range(len(spans)):
            per_chunk[index].append(table)
    return per_chunk


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
    return str(a).strip().casefold() == str(b).strip().casefold()


def _merge(name: str, candidates: list[tuple[int, FieldResult]]) -> FieldResult:
    """The kept value of a field over all chunks, with every chunk's candidate; when two chunks give different
    values the field is flagged with every candidate and its chunk, whatever their tiers — a verified quote says the
    document holds that value, not that the other chunk's value is wrong (a subgroup, another time point)."""
    answered = [(chunk, result) for chunk, result in candidates if result.answered] or candidates
    chunk, best = max(answered, key=lambda item: (TIER_RANK[item[1].tier], item[1].confidence, -item[0]))
    best.chunk = chunk
    others = [(c, r) for c, r in candidates if r.tier != "not_reported"]
    best.candidates = [
        {"chunk": c, "value": r.value, "quote": r.quote, "tier": r.tier, "confidence": r.confidence} for c, r in others
    ]
    if any(not _same_value(r.value, others[0][1].value) for _, r in others[1:]):
        said = ", ".join(f"chunk {c}: {r.value!r} ({r.tier})" for c, r in others)
        best.flags.append(f"chunks disagree on {name}: {said}")
    return best


_NOT_WORD = re.compile(r"[\W_]+")


def _identity_part(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:g}"  # 12 and 12.0 are one time point
    return _NOT_WORD.sub(" ", str(value)).strip().casefold()


def _identity(entry: dict[str, FieldResult], fields: list[str]) -> tuple[str, ...] | None:
    """An entry's identity, or None when none of its identity fields has a value (it can match no other entry)."""
    key = tuple(_identity_part(entry[name].value) for name in fields)
    return key if any(key) else None


def _grade_entries(
    group: TemplateModule, given: list | None, scope: EvidenceScope
) -> tuple[list[dict[str, FieldResult]], int]:
    """Every entry the model gave for a group (at most ``max_entries``), graded field by field; and how many more
    it gave (left out, said in the reason)."""
    entries = []
    objects = [entry for entry in (given or []) if isinstance(entry, dict)]  # anything else is not an entry
    for number, entry in enumerate(objects[: group.max_entries], 1):
        graded = {}
        for item in group.fields:
            answer = (entry.get(item.name) or {}) if item.name in entry else None
            name = entry_field_name(group.name, number, item.name)
            graded[item.name] = grade_field(name, item.type, group.name, answer, scope, item.synonyms, item.kind)
        entries.append(graded)
    return entries, max(0, len(objects) - group.max_entries)


def _merge_entries(
    group: TemplateModule, per_chunk: list[tuple[int, list[dict[str, FieldResult]]]]
) -> tuple[dict[str, FieldResult], int]:
    """The group's entries over all chunks — at most ``max_entries`` of them, and how many more there were (left out,
    said in the reason): entries of different chunks with the same identity are one (fields merged like single
    fields); two entries with the same identity in one answer (an ITT and a per-protocol analysis, say) stay two —
    the n-th of a chunk merges with the n-th of another; the rest are kept in the order they were first given."""
    merged: dict[object, list[tuple[int, dict[str, FieldResult]]]] = {}
    for chunk, entries in per_chunk:
        seen: dict[tuple[str, ...], int] = {}
        for position, entry in enumerate(entries):
            identity = _identity(entry, group.identity)
            if identity is None:
                key: object = ("unidentified", chunk, position)
            else:
                seen[identity] = seen.get(identity, 0) + 1
                key = (identity, seen[identity])
            merged.setdefault(key, []).append((chunk, entry))
    fields: dict[str, FieldResult] = {}
    kept = list(merged.values())[: group.max_entries]
    for number, found in enumerate(kept, 1):
        for item in group.fields:
            name = entry_field_name(group.name, number, item.name)
            candidates = [(chunk, entry[item.name]) for chunk, entry in found]
            fields[name] = _merge(name, candidates) if len(candidates) > 1 else candidates[0][1]
    return fields, len(merged) - len(kept)


PAGE_ENTRIES = 8  # entries of a group asked for per request once the group alone does not fit in one answer


@dataclass
class _Asker:
    """Asks the endpoint for (a part of) the template about one text, adding up what every request cost and saying
    what was asked."""

    client: LLMClient
    rule: Rule
    text: str
    tables_html: list[str]
    sources: PromptSources | None
    part: tuple[int, int] | None
    usage: Usage
    asked: list[str] = field(default_factory=list)

    def messages(self, template: Template, instruction: str = "") -> tuple[list[dict[str, str]], dict]:
        """The request for (a part of) the template about this text: its messages and answer schema."""
        schema = json_schema(template)
        messages = build_messages(
            template,
            self.text,
            self.tables_html,
            self.rule.custom_instructions,
            schema=schema,
            part=self.part,
            sources=self.sources,
            instruction=instruction,
        )
        return messages, schema

    def ask(self, template: Template, instruction: str = "") -> dict[str, Any]:
        messages, schema = self.messages(template, instruction)
        try:
            answer = self.client.complete(messages, schema, answer_model(template))
        except LLMError as error:
            self.usage.add(error.usage)  # counted here: the error raised on says it cost nothing more
            raise error.costing(Usage()) from error
        self.usage.add(answer.usage)
        return answer.data


def _answer_that_fits(asker: _Asker, template: Template) -> dict[str, Any]:
    """The answer for the whole template — asked in one request, or, when the endpoint cuts that answer at its
    ``max_tokens``, in parts that each fit: the single fields together, then module by module, and each repeating
    group on its own, in pages of entries continued until the report has no more."""
    try:
        return asker.ask(template)
    except LLMAnswerCutError:
        limit = asker.client.config.max_tokens
        asker.asked.append(f"the whole template did not fit in one answer ({limit} tokens)")
    data: dict[str, Any] = {}
    singles = [module.name for module in template.modules if not module.repeating]
    if template.groups and singles:
        data.update(_single_fields(asker, template, singles))
    else:  # the single fields are the whole template, which did not fit: module by module
        for module in singles:
            data.update(_single_fields(asker, template, [module]))
    for group in template.groups:
        data[group.name] = _entries(asker, template, group)
    return data


def _single_fields(asker: _Asker, template: Template, modules: list[str]) -> dict[str, Any]:
    try:
        data = asker.ask(template.subset(modules))
    except LLMAnswerCutError:
        if len(modules) == 1:
            limit = asker.client.config.max_tokens
            raise LLMAnswerCutError(
                f"the answer for module {modules[0]!r} alone does not fit in ATLAS_LLM_MAX_TOKENS={limit} tokens: "
                "raise ATLAS_LLM_MAX_TOKENS (the model's output limit allowing)"
            ) from None
        data = {}
        for module in modules:
            data.update(_single_fields(asker, template, [module]))
        return data
    asker.asked.append(f"{', '.join(modules)}: one request")
    return data


def _entries(asker: _Asker, template: Template, group: TemplateModule) -> list[dict[str, Any]]:
    """A group's entries in as many requests as they need: all at once, else pages of at most ``PAGE_ENTRIES``
    (halved while one page does not fit), each asking for the entries after those already given."""
    alone = template.subset([group.name])
    try:
        entries = [entry for entry in asker.ask(alone).get(group.name) or [] if isinstance(entry, dict)]
        asker.asked.append(f"{group.name}: one request")
        return entries
    except LLMAnswerCutError:
        pass
    entries: list[dict[str, Any]] = []
    seen: set[tuple[str, ...]] = set()
    size, pages = PAGE_ENTRIES, 0
    while len(entries) < group.max_entries:
        try:
            page = asker.ask(alone, _next_entries(group, entries, size)).get(group.name) or []
        except LLMAnswerCutError:
            if size == 1:
                limit = asker.client.config.max_tokens
                raise LLMAnswerCutError(
                    f"one entry of {group.name!r} does not fit in ATLAS_LLM_MAX_TOKENS={limit} tokens"
                ) from None
            size = max(1, size // 2)
            continue
        pages += 1
        fresh = []
        for entry in [entry for entry in page if isinstance(entry, dict)][:size]:
            identity = tuple(_identity_part((entry.get(name) or {}).get("value")) for name in group.identity)
            if any(identity) and identity in seen:
                continue  # given on an earlier page again (two entries of one page with one identity stay two)
            fresh.append((identity, entry))
        seen.update(identity for identity, _ in fresh)
        entries += [entry for _, entry in fresh]
        if len(page) < size or not fresh:
            break
    asker.asked.append(f"{group.name}: {len(entries)} entries in {pages} request(s) of at most {size}")
    return entries


def _next_entries(group: TemplateModule, given: list[dict[str, Any]], size: int) -> str:
    """What a page request asks: at most ``size`` entries of the group, after the ones already given."""
    lines = [
        f"This request asks only for the {group.name!r} entries, at most {size} in this answer, in the order the "
        "document gives them."
    ]
    if given:
        described = []
        for number, entry in enumerate(given, 1):
            parts = [f"{name}={(entry.get(name) or {}).get('value')!r}" for name in group.identity]
            described.append(f"{number}. " + ", ".join(parts))
        lines.append(
            f"Entries already given ({len(given)}): do not repeat them; give the next ones after them, or an empty "
            "list when the document has no more:\n" + neutralise("\n".join(described))
        )
    return "\n".join(lines)


def _ask_every_chunk(askers: list[_Asker], template: Template) -> list[dict[str, Any] | LLMError]:
    """Every chunk's answer (or the error that ended it), the chunks asked at the same time — the endpoint's gate
    (``ATLAS_LLM_CONCURRENCY``) decides how many requests are in flight."""

    def answer(asker: _Asker) -> dict[str, Any] | LLMError:
        try:
            return _answer_that_fits(asker, template)
        except LLMError as error:  # its cost is on the asker's usage already (a split's own errors cost nothing)
            return error

    if len(askers) == 1:
        return [answer(askers[0])]
    workers = min(len(askers), askers[0].client.config.concurrency)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="atlas-chunk") as pool:
        return list(pool.map(answer, askers))


def plan_requests(
    client: LLMClient, rule: Rule, markdown: str, tables: Sequence[Table], sources: PromptSources | None = None
) -> tuple[str, list[_Asker]]:
    """The rule's strategy for this text and one asker per chunk (its text, its tables, its part number): what
    ``extract_with_llm`` sends, and what ``extraction.estimate`` counts before anything is sent."""
    strategy = rule.strategy
    if strategy == "auto":
        strategy = "chunked" if len(markdown) > rule.chunk_size_chars else "direct"
    if strategy == "chunked":
        spans = chunk_spans(markdown, rule.chunk_size_chars, rule.chunk_overlap_chars, rule.max_chunks)
    else:
        spans = [(0, len(markdown))]
    chunk_tables = tables_for_chunks(markdown, spans, tables)
    askers = [
        _Asker(
            client,
            rule,
            markdown[start:end],
            [table.html for table in chunk_tables[index]],
            sources,
            (index + 1, len(spans)) if len(spans) > 1 else None,
            Usage(),
        )
        for index, (start, end) in enumerate(spans)
    ]
    return strategy, askers


def extract_with_llm(
    client: LLMClient,
    template: Template,
    rule: Rule,
    markdown: str,
    tables: Sequence[Table],
    sources: PromptSources | None = None,
) -> ExtractionOutcome:
    """Run the rule's strategy and grade every field against the markdown and the tables (``sources``: who made
    them, as the prompt names them); a RoB 2 assessment is then proposed per result, domain by domain
    (``extraction.rob2_proposal``)."""
    whole, template = template, template.asked_at_once()
    scope = EvidenceScope(markdown, tables)
    strategy, askers = plan_requests(client, rule, markdown, tables, sources)
    candidates: dict[str, list[tuple[int, FieldResult]]] = {f.name: [] for f in template.fields}
    modules = {f.name: module.name for module in template.modules for f in module.fields}
    group_entries: dict[str, list[tuple[int, list[dict[str, FieldResult]]]]] = {g.name: [] for g in template.groups}
    left_out: dict[str, int] = {}
    answer_parts: list[str] = []
    answers = _ask_every_chunk(askers, template)
    usage = Usage()
    for asker in askers:
        usage.add(asker.usage)
    failed = [(asker, answer) for asker, answer in zip(askers, answers, strict=True) if isinstance(answer, LLMError)]
    failed.sort(key=lambda item: isinstance(item[1], LLMQueuedError))  # a failure for good says more than a wait
    for asker, error in failed[:1]:  # what every request cost, the other chunks' included
        asked = f" (asked: {'; '.join(asker.asked)})" if isinstance(error, LLMAnswerCutError) and asker.asked else ""
        raise error.costing(usage, asked)
    for index, (asker, data) in enumerate(zip(askers, answers, strict=True), 1):
        if asker.asked:
            answer_parts += [f"part {index}: {what}" if asker.part else what for what in asker.asked]
        for item in template.fields:
            # absent from the answer → None (not answered); an explicit null → {} (not reported)
            given = (data[item.name] or {}) if item.name in data else None
            graded = grade_field(item.name, item.type, modules[item.name], given, scope, item.synonyms, item.kind)
            candidates[item.name].append((index, graded))
        for group in template.groups:
            entries, extra = _grade_entries(group, data.get(group.name), scope)
            group_entries[group.name].append((index, entries))
            if extra:
                left_out[group.name] = left_out.get(group.name, 0) + extra
    if len(askers) > 1:
        fields = {name: _merge(name, found) for name, found in candidates.items()}
    else:
        fields = {name: found[0][1] for name, found in candidates.items()}
    required = {f.name: f.required for f in template.fields}
    for group in template.groups:
        entry_fields, beyond = _merge_entries(group, group_entries[group.name])
        if beyond:  # the chunks' entries together pass the cap: the first ones kept, the rest counted
            left_out[group.name] = left_out.get(group.name, 0) + beyond
        fields.update(entry_fields)
        is_required = {item.name: item.required for item in group.fields}
        required.update({name: is_required[entry_field_parts(name)[2]] for name in entry_fields})
    group_of = {item.name: group.name for group in template.groups for item in group.fields}
    apply_plausibility({name: template.field_definition(name) for name in fields}, fields)
    violations = apply_checks(template.checks, fields, group_of)
    status, score, reason = document_status(required, fields, violations)
    for group_name, extra in left_out.items():
        cap = next(g.max_entries for g in template.groups if g.name == group_name)
        reason += f"; {group_name}: {extra} more entries given than its cap of {cap} (left out)"
    if answer_parts:
        reason += f"; the answer did not fit in one request ({client.config.max_tokens} tokens): asked in parts"
    if whole.rob2 is not None:  # the status says what the data extraction found; RoB 2's answers are a person's
        try:
            proposal = propose_rob2(client, whole, fields, rule, markdown, tables, sources)
        except LLMError as error:  # queued at a Batch API: the document waits like for any answer
            usage.add(error.usage)
            raise error.costing(usage) from None
        usage.add(proposal.usage)
        fields.update(proposal.fields)
        reason += f"; {proposal.reason}"
    return ExtractionOutcome(
        fields=fields,
        usage=usage,
        strategy=strategy,
        chunks=len(askers),
        completeness=score,
        status=status,
        reason=reason,
        violations=violations,
        tables_sent=sum(len(asker.tables_html) for asker in askers),
        answer_parts=answer_parts,
    )
