"""A re-extraction that did not go through (the endpoint never answered, the answers wait at the Batch API, the new
bytes cannot be read) never takes away what people decided: the last extraction that went through is kept beside it,
and the review, the pages and the exports rest on that one until another goes through."""

from __future__ import annotations

from atlas_pipeline.core.statuses import WENT_THROUGH, DocumentStatus
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import record_path
from atlas_pipeline.store.records import ExtractionRecord, read_record, write_record

KEPT = "extraction_kept"  # documents/<key>/extraction_kept.json


def went_through(record: ExtractionRecord | None) -> bool:
    return record is not None and DocumentStatus(record.status) in WENT_THROUGH


def keep_last_good(store: Store, key: str, new: ExtractionRecord) -> None:
    """Before ``new`` replaces the document's extraction record: keep the one it replaces when ``new`` did not go
    through and the old one did; forget the kept one once ``new`` went through."""
    if went_through(new):
        if store.exists(record_path(key, KEPT)):
            store.delete(record_path(key, KEPT))
        return
    previous = read_record(store, key, "extraction", ExtractionRecord)
    if went_through(previous):
        write_record(store, key, KEPT, previous)


def values_record(store: Store, key: str, latest: ExtractionRecord | None) -> ExtractionRecord | None:
    """The extraction whose values the review, the pages and the exports show: ``latest``, or — while the latest did
    not go through — the last one that did, of the same bytes and extraction version (values of other bytes or of
    another version are never shown as this document's: it is re-checked, or stale, as always)."""
    if latest is None or went_through(latest):
        return latest
    kept = read_record(store, key, KEPT, ExtractionRecord)
    same = kept is not None and (kept.sha256, kept.extraction_version) == (latest.sha256, latest.extraction_version)
    return kept if same else latest


def reviewed_extraction(store: Store, key: str) -> ExtractionRecord | None:
    """The document's extraction as people review it (``values_record`` of its latest record)."""
    return values_record(store, key, read_record(store, key, "extraction", ExtractionRecord))
