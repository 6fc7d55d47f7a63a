"""The three per-document steps as plain functions: snapshot, parse, extract. Assets are thin wrappers over them.

Each step writes its artifacts and a record, and turns a problem with the document itself into a ``Problem`` on the
record (so the document ends ``failed``/``skipped`` with a reason) instead of an exception. Exceptions are left for
faults of the pipeline (storage down, bugs), which Dagster then reports and retries.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable

from atlas_pipeline.core.statuses import DocumentStatus
from atlas_pipeline.core.templates import Template
from atlas_pipeline.extraction.estimate import RunEstimate, answer_tokens_guess, estimate_document, seconds_per_answer
from atlas_pipeline.extraction.llm import LLMClient
from atlas_pipeline.extraction.postprocessors import ExtractionInput, postprocessor_for
from atlas_pipeline.extraction.prompt import PromptSources
from atlas_pipeline.extraction.rules import Rule
from atlas_pipeline.extraction.version import ExtractionVersion, extraction_version
from atlas_pipeline.knowledge.catalog import CatalogEntry, now_iso, sha256_of
from atlas_pipeline.knowledge.listing import KnowledgeBase, SourceMissingError, SourceRefusedError
from atlas_pipeline.parsing import (
    DocumentError,
    ParsedDocument,
    ParseOptions,
    Table,
)
from atlas_pipeline.parsing.bounded import ParseLimitError, ParseLimits
from atlas_pipeline.parsing.media import PDF, detect_media_type
from atlas_pipeline.parsing.pages import count_pages, quick_text
from atlas_pipeline.parsing.providers import ParserChoice, ParsingProvider, ProviderError
from atlas_pipeline.parsing.providers.combine import with_tables_from
from atlas_pipeline.parsing.providers.local import LocalParser
from atlas_pipeline.store import layout
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.records import (
    ExtractionRecord,
    ParseRecord,
    Problem,
    SnapshotRecord,
    read_record,
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
    except SourceRefusedError as error:  # became a link leaving the knowledge base (or no file) after the scan
        record.problem = Problem(status="skipped", reason=str(error), stage="snapshot")
        write_record(store, entry.key, "snapshot", record)
        return record
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
    store: Store,
    snapshot: SnapshotRecord,
    options: ParseOptions | ParserChoice,
    limits: ParseLimits | None = None,
) -> tuple[ParseRecord, ParsedDocument | None]:
    """Markdown and tables of a snapshot, parsed once per (bytes, parser) and cached in the store.

    ``options``: the local parser's options, or a ``ParserChoice`` (providers for PDFs and images). With ``limits``
    the local parse runs in a child process that is stopped at the limits (``parsing.bounded``). A provider's answer
    is also cached by (provider, its options, bytes), so choosing another local parser never asks it again."""
    choice = options if isinstance(options, ParserChoice) else ParserChoice(LocalParser(options, limits))
    parser = choice.fingerprint(snapshot.media_type)
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
    # read when a parser needs the bytes: a provider's kept answer does not
    data = functools.cache(lambda: store.read_bytes(layout.snapshot_path(snapshot.sha256)))
    media_type = snapshot.media_type or detect_media_type(data(), snapshot.source_path)
    provider_cached = []
    try:
        text_provider = choice.text_provider(media_type)
        parsed = _provider_parse(store, text_provider, snapshot, data, media_type, provider_cached)
        tables_provider = choice.tables_provider(media_type)
        if tables_provider is not None:
            tables = _provider_parse(store, tables_provider, snapshot, data, media_type, provider_cached)
            parsed = with_tables_from(parsed, tables)
    except DocumentError as error:
        retryable = isinstance(error, ProviderError) and error.retryable
        record.problem = Problem(status=error.status, reason=error.reason, stage="parse", retryable=retryable)
        record.seconds = round(time.perf_counter() - started, 4)
        # a higher limit, or a provider asked again, may succeed: only the local parser's verdicts are cached
        if not isinstance(error, ParseLimitError | ProviderError):
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
    record.media_type = parsed.media_type or media_type
    record.pages = parsed.page_count
    record.characters = len(parsed.markdown)
    record.tables = len(parsed.tables)
    record.ocr_pages = parsed.ocr_pages
    record.layout_pages = parsed.layout_pages
    record.text_pages = parsed.text_pages
    record.warnings = parsed.warnings
    record.lost = parsed.lost
    record.title = parsed.title
    record.provider = parsed.provider
    record.provider_task_id = parsed.provider_task_id
    record.provider_version = parsed.provider_version
    record.provider_cached = bool(provider_cached) and all(provider_cached)
    record.timings = parsed.timings
    store.write_json(layout.parse_record_path(snapshot.sha256, parser), record.model_dump(mode="json"))
    write_record(store, snapshot.key, "parse", record)
    return record, parsed


def _provider_parse(
    store: Store,
    provider: ParsingProvider,
    snapshot: SnapshotRecord,
    data: Callable[[], bytes],
    media_type: str,
    cached: list[bool],
) -> ParsedDocument:
    """``provider.parse``, once per (provider, options, bytes): a remote provider's answer is kept in the store."""
    if isinstance(provider, LocalParser):
        return provider.parse(data(), snapshot.source_path, media_type)
    path = layout.provider_result_path(provider.name, provider.fingerprint(), snapshot.sha256)
    kept = store.read_json_or(path, None)
    if kept is not None:
        cached.append(True)
        return ParsedDocument.model_validate(kept)
    size = snapshot.size or len(data())
    if size > provider.limits.max_bytes:
        limit = provider.limits.max_bytes / 1e6
        reason = f"{provider.name}: not sent: {size / 1e6:.1f} MB is above ATLAS_PROVIDER_MAX_MB={limit:g}"
        raise ProviderError(reason, "skipped")
    try:
        parsed = provider.parse(data(), snapshot.source_path, media_type)
    except DocumentError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as error:  # an answer of another shape
        raise ProviderError(f"{provider.name}: malformed result ({type(error).__name__}: {error})") from error
    parsed.media_type = parsed.media_type or media_type
    label = provider.version_label
    if label and label not in parsed.provider_version:  # what it reported, and the deployment's own label
        parsed.provider_version = f"{parsed.provider_version} ({label})" if parsed.provider_version else label
    store.write_json(path, parsed.model_dump(mode="json"))
    cached.append(False)
    return parsed


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
    if version is None:  # the default parser's (a deployment passes its own: ``AtlasResource.extraction_version``)
        parser = ParserChoice(LocalParser()).describe()
        version = extraction_version(template, rule, mode, llm.config.model if llm else "", parser)
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
        parser=parse.parser,
        extracted_at=now_iso(),
    )
    problem = parse.problem or snapshot.problem
    if problem:
        record.status, record.reason = DocumentStatus(problem.status), f"{problem.stage}: {problem.reason}"
        record.retryable = problem.retryable
    else:
        inputs = ExtractionInput(
            snapshot=snapshot,
            parse=parse,
            template=template,
            rule=rule,
            version=version,
            markdown=lambda: load_markdown(store, parse),
            tables=lambda: load_tables(store, parse),
        )
        output = postprocessor_for(mode, llm).run(inputs, record)
        if output is not None:
            record.extraction_path = layout.extraction_output_path(snapshot.key)
            store.write_json(record.extraction_path, output)
    if parse.lost and not problem:
        record.reason += f"; not read: {'; '.join(parse.lost[:3])}" + (" …" if len(parse.lost) > 3 else "")
    record.seconds = round(time.perf_counter() - started, 4)
    record.processing_seconds = round(snapshot.seconds + parse.seconds + record.seconds, 4)
    write_record(store, snapshot.key, "extraction", record)
    return record


def estimate_extractions(
    knowledge_base: KnowledgeBase,
    store: Store,
    entries: list[CatalogEntry],
    template: Template,
    rule: Rule,
    llm: LLMClient,
) -> RunEstimate:
    """What extracting ``entries`` would send and cost, nothing sent: a document parsed before is counted from its
    parse; one not parsed yet from its words read quickly (``parsing.pages.quick_text``; its tables then not
    counted)."""
    records = [read_record(store, entry.key, "extraction", ExtractionRecord) for entry in entries]
    known = [record for record in records if record is not None]
    answer_tokens, basis = answer_tokens_guess(template, known, llm.config.max_tokens)
    table = RunEstimate(llm.config.model, llm.currency, answer_tokens, basis)
    table.seconds_per_answer = seconds_per_answer(known)
    for entry in entries:
        parse = read_record(store, entry.key, "parse", ParseRecord)
        if entry.problem:
            continue  # never read, never sent
        if parse is not None and parse.sha256 == entry.sha256 and parse.problem is None:
            markdown, tables, note = load_markdown(store, parse), load_tables(store, parse), ""
            sources = PromptSources.of_parse(parse.provider)
        else:
            try:
                data = knowledge_base.read(entry.source_path)
            except SourceMissingError:
                continue
            try:
                media_type = detect_media_type(data, entry.source_path)
            except DocumentError:
                continue
            markdown, tables, sources = quick_text(data, media_type), [], None
            note = "not parsed yet: its words read quickly, tables not counted"
            if not markdown.strip():
                note = "not parsed yet and no text layer (a scan): counted after OCR"
        estimate = estimate_document(llm, template, rule, entry.key, markdown, tables, answer_tokens, store, sources)
        estimate.note = note
        table.documents.append(estimate)
    return table
