"""The three per-document steps as plain functions: snapshot, parse, extract. Assets are thin wrappers over them.

Each step writes its artifacts and a record, and turns a problem with the document itself into a ``Problem`` on the
record (so the document ends ``failed``/``skipped`` with a reason) instead of an exception. Exceptions are left for
faults of the pipeline (storage down, bugs), which Dagster then reports and retries.
"""

from __future__ import annotations

import json
import time

from atlas_pipeline.extraction.extractor import extract_with_llm
from atlas_pipeline.extraction.identifiers import find_identifiers
from atlas_pipeline.extraction.llm import LLMClient, LLMError
from atlas_pipeline.extraction.rules import Rule
from atlas_pipeline.extraction.skip import skip_wrapper
from atlas_pipeline.extraction.templates import Template
from atlas_pipeline.extraction.version import ExtractionVersion, extraction_version
from atlas_pipeline.grading.statuses import DocumentStatus
from atlas_pipeline.knowledge.catalog import CatalogEntry, now_iso, sha256_of
from atlas_pipeline.knowledge.listing import KnowledgeBase, SourceMissingError
from atlas_pipeline.parsing import (
    DocumentError,
    ParsedDocument,
    ParseOptions,
    Table,
    parse_document,
    parser_fingerprint,
)
from atlas_pipeline.parsing.bounded import ParseLimitError, ParseLimits, parse_bounded
from atlas_pipeline.parsing.media import PDF, detect_media_type
from atlas_pipeline.parsing.pages import count_pages
from atlas_pipeline.store import layout
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.records import (
    ExtractionRecord,
    ParseRecord,
    Problem,
    SnapshotRecord,
    write_record,
)


def take_snapshot(
    knowledge_base: KnowledgeBase, store: Store, entry: CatalogEntry, max_bytes: int | None = None
) -> SnapshotRecord:
    """Copy the source bytes into the store (content-addressed, immutable) and record what they are."""
    started = time.perf_counter()
    record = SnapshotRecord(
        key=entry.key,
        source_path=entry.source_path,
        source_url=knowledge_base.url(entry.source_path),
        taken_at=now_iso(),
    )
    if entry.problem:  # the listing refused it (a symlink leaving the knowledge base, too large, …): never read
        record.problem = Problem(status="skipped", reason=entry.problem, stage="snapshot")
        write_record(store, entry.key, "snapshot", record)
        return record
    try:
        data = knowledge_base.read(entry.source_path)
    except SourceMissingError as error:
        record.problem = Problem(status="failed", reason=str(error), stage="snapshot")
        write_record(store, entry.key, "snapshot", record)
        return record
    record.sha256, record.size = sha256_of(data), len(data)
    blob = layout.snapshot_path(record.sha256)
    if not store.exists(blob):
        store.write_bytes(blob, data)
    record.snapshot_path = blob
    try:
        record.media_type = detect_media_type(data, entry.source_path)
        if max_bytes is not None and len(data) > max_bytes:
            limit = max_bytes / 1_000_000
            reason = f"too large: {len(data) / 1_000_000:.1f} MB (limit ATLAS_MAX_DOCUMENT_MB={limit:g})"
            record.problem = Problem(status="skipped", reason=reason, stage="snapshot")
        elif record.media_type == PDF:
            record.pages = count_pages(data)
    except DocumentError as error:
        record.problem = Problem(status=error.status, reason=error.reason, stage="snapshot")
    record.seconds = round(time.perf_counter() - started, 4)
    write_record(store, entry.key, "snapshot", record)
    return record


def parse_snapshot(
    store: Store, snapshot: SnapshotRecord, options: ParseOptions, limits: ParseLimits | None = None
) -> tuple[ParseRecord, ParsedDocument | None]:
    """Markdown and tables of a snapshot, parsed once per (bytes, parser) and cached in the store. With ``limits``
    the parse runs in a child process that is stopped at the limits (``parsing.bounded``)."""
    parser = parser_fingerprint(options)
    record = ParseRecord(key=snapshot.key, sha256=snapshot.sha256, parser=parser, media_type=snapshot.media_type)
    if snapshot.problem:
        record.problem = snapshot.problem
        write_record(store, snapshot.key, "parse", record)
        return record, None
    cached = store.read_json_or(layout.parse_record_path(snapshot.sha256, parser), None)
    if cached is not None:
        cached_record = ParseRecord.model_validate(cached)
        record = cached_record.model_copy(update={"key": snapshot.key, "cached": True})
        write_record(store, snapshot.key, "parse", record)
        return record, None

    started = time.perf_counter()
    data = store.read_bytes(layout.snapshot_path(snapshot.sha256))
    try:
        if limits is None:
            parsed = parse_document(data, snapshot.source_path, options)
        else:
            parsed = parse_bounded(
                data, snapshot.source_path, options, seconds=limits.seconds, memory_mb=limits.memory_mb
            )
    except DocumentError as error:
        record.problem = Problem(status=error.status, reason=error.reason, stage="parse")
        record.seconds = round(time.perf_counter() - started, 4)
        if not isinstance(error, ParseLimitError):  # a higher limit may succeed: a limit is not cached
            store.write_json(layout.parse_record_path(snapshot.sha256, parser), record.model_dump(mode="json"))
        write_record(store, snapshot.key, "parse", record)
        return record, None
    record.seconds = round(time.perf_counter() - started, 4)
    record.text_path = layout.markdown_path(snapshot.sha256, parser)
    store.write_text(record.text_path, parsed.markdown)
    tables = [table.model_dump(mode="json") for table in parsed.tables]
    record.tables_path = layout.tables_path(snapshot.sha256, parser)
    store.write_bytes(record.tables_path, json.dumps(tables, ensure_ascii=False).encode())
    record.engine = parsed.engine
    record.media_type = parsed.media_type
    record.pages = parsed.page_count
    record.characters = len(parsed.markdown)
    record.tables = len(parsed.tables)
    record.ocr_pages = parsed.ocr_pages
    record.warnings = parsed.warnings
    record.lost = parsed.lost
    record.title = parsed.title
    store.write_json(layout.parse_record_path(snapshot.sha256, parser), record.model_dump(mode="json"))
    write_record(store, snapshot.key, "parse", record)
    return record, parsed


def load_markdown(store: Store, record: ParseRecord) -> str:
    return store.read_text(layout.markdown_path(record.sha256, record.parser))


def load_tables(store: Store, record: ParseRecord) -> list[Table]:
    data = store.read_json(layout.tables_path(record.sha256, record.parser))
    return [Table.model_validate(item) for item in data]


def extract_document(
    store: Store,
    snapshot: SnapshotRecord,
    parse: ParseRecord,
    template: Template,
    rule: Rule,
    *,
    mode: str = "skip",
    llm: LLMClient | None = None,
    version: ExtractionVersion | None = None,
) -> ExtractionRecord:
    """Apply the rule to a parsed document: skip mode writes the JSON wrapper, llm mode extracts and grades every
    field against the document. Document problems and LLM failures become statuses with reasons."""
    started = time.perf_counter()
    version = version or extraction_version(template, rule, mode, llm.config.model if llm else "")
    record = ExtractionRecord(
        key=snapshot.key,
        sha256=snapshot.sha256,
        status=DocumentStatus.DONE,
        reason="",
        mode=mode,
        rule=rule.name,
        template_code=template.code,
        template_version=template.version,
        template_hash=template.content_hash,
        extraction_version=version.tag,
        version_parts=version.parts,
        text_path=parse.text_path,
        tables_path=parse.tables_path,
        extracted_at=now_iso(),
    )
    problem = parse.problem or snapshot.problem
    output_path = layout.extraction_output_path(snapshot.key)
    if problem:
        record.status, record.reason = DocumentStatus(problem.status), f"{problem.stage}: {problem.reason}"
    elif mode == "skip":
        record.identifiers = find_identifiers(load_markdown(store, parse))
        wrapper = skip_wrapper(snapshot, parse, template, rule, record.identifiers)
        store.write_json(output_path, wrapper)
        record.extraction_path = output_path
        record.fields = wrapper["fields"]
        record.reason = "skip mode: text and tables ready for review, no LLM extraction configured"
    elif llm is None:
        record.status, record.reason = DocumentStatus.FAILED, "extract: llm mode but no LLM endpoint configured"
    else:
        markdown = load_markdown(store, parse)
        tables = load_tables(store, parse)
        record.identifiers = find_identifiers(markdown)
        record.llm_model = llm.config.model
        try:
            outcome = extract_with_llm(llm, template, rule, markdown, tables)
        except LLMError as error:
            record.status, record.reason = DocumentStatus.FAILED, f"extract: {error.reason}"
            record.llm_calls, record.llm_cache_hits = error.usage.calls, error.usage.cache_hits
            record.prompt_tokens, record.completion_tokens = error.usage.prompt_tokens, error.usage.completion_tokens
        else:
            record.fields = {name: result.to_dict() for name, result in outcome.fields.items()}
            record.status, record.completeness = outcome.status, outcome.completeness
            record.violations = [violation.model_dump() for violation in outcome.violations]
            record.strategy, record.chunks = outcome.strategy, outcome.chunks
            record.llm_calls, record.llm_cache_hits = outcome.usage.calls, outcome.usage.cache_hits
            record.prompt_tokens, record.completion_tokens = (
                outcome.usage.prompt_tokens,
                outcome.usage.completion_tokens,
            )
            record.unverified_fields = sum(1 for r in outcome.fields.values() if r.needs_review)
            record.reason = outcome.reason
            record.extraction_path = output_path
            store.write_json(
                output_path,
                {
                    "schema": "atlas.llm_extraction/1",
                    "document": {"key": snapshot.key, "source_path": snapshot.source_path, "sha256": snapshot.sha256},
                    "template": {"code": template.code, "version": template.version, "hash": template.content_hash},
                    "model": llm.config.model,
                    "strategy": outcome.strategy,
                    "chunks": outcome.chunks,
                    "extraction_version": version.tag,
                    "status": record.status.value,
                    "completeness": outcome.completeness,
                    "violations": record.violations,
                    "fields": record.fields,
                },
            )
    if parse.lost and not problem:
        record.reason += f"; not read: {'; '.join(parse.lost[:3])}" + (" …" if len(parse.lost) > 3 else "")
    record.seconds = round(time.perf_counter() - started, 4)
    record.processing_seconds = round(snapshot.seconds + parse.seconds + record.seconds, 4)
    write_record(store, snapshot.key, "extraction", record)
    return record
