"""The parse step of one document: its snapshot to markdown and tables (local parser or a provider), recorded and
cached by content. A document that cannot be parsed is a ``Problem`` on the record (the document ends
``failed``/``skipped`` with the reason); exceptions are left for faults of the pipeline."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable

from atlas_pipeline.parsing import (
    DocumentError,
    ParsedDocument,
    ParseOptions,
    Table,
)
from atlas_pipeline.parsing.bounded import ParseLimitError, ParseLimits
from atlas_pipeline.parsing.citation import citation_from_text, reads_as_title
from atlas_pipeline.parsing.media import detect_media_type
from atlas_pipeline.parsing.providers import ParserChoice, ParsingProvider, ProviderError
from atlas_pipeline.parsing.providers.combine import with_tables_from
from atlas_pipeline.parsing.providers.local import LocalParser
from atlas_pipeline.store import layout
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.records import (
    ParseRecord,
    Problem,
    SnapshotRecord,
    write_record,
)


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
    citation = citation_from_text(parsed.markdown, parsed.title, bold_title=parsed.title, ocr=1 in parsed.ocr_pages)
    own = parsed.media_type != "application/pdf" and reads_as_title(parsed.title)  # JATS article-title, citation_title
    record.title = parsed.title if own else citation.title
    record.authors = parsed.authors or citation.authors
    record.year = parsed.year or citation.year
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
