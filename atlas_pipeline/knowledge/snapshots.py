"""The snapshot step of one document: its bytes read once through the knowledge base's opener and kept immutable,
with a record. A problem with the source (gone, refused at open time) is a ``Problem`` on the record, never an
exception."""

from __future__ import annotations

import time

from atlas_pipeline.core.clock import now_iso
from atlas_pipeline.core.hashing import sha256_of
from atlas_pipeline.knowledge.catalog import CatalogEntry
from atlas_pipeline.knowledge.listing import KnowledgeBase, SourceMissingError, SourceRefusedError
from atlas_pipeline.parsing import (
    DocumentError,
)
from atlas_pipeline.parsing.media import PDF, detect_media_type
from atlas_pipeline.parsing.pages import count_pages
from atlas_pipeline.store import layout
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.records import (
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
