"""Where every artifact lives in the stores — each path is defined here and nowhere else.

The artifact store (``ATLAS_ARTIFACTS``)::

    snapshots/<ab>/<sha256>                        a document's bytes, content-addressed, never overwritten
    parsed/<parser>/<ab>/<sha256>/parse.json       a parse, cached per (bytes, parser fingerprint)
                                  document.md      its markdown
                                  tables.json      its tables
    providers/<name>/<fingerprint>/<ab>/<sha256>.json  a parsing provider's answer (MinerU, docling-serve), never
                                                   asked twice for the same bytes and options
    documents/<key>/cancellation.json              a queued run of the document cancelled: by whom, when, which run
    documents/<key>/<stage>.json                   the latest record of each partition: snapshot, parse, extraction
    documents/<key>/extraction_output.json         the extraction itself: fields, quotes, grades, locations
    documents/<key>/extraction_kept.json           the last extraction that went through, while a later one did not
    catalog/documents.json                         the catalog: every document found, removals, duplicates
    catalog/shards/<ab>.json                       the entries whose key hashes to <ab>: what a run reads for its
                                                   documents (256 small files, not the whole catalog; the per-entry
                                                   files catalog/entries/<key>.json before them are no longer read)
    sensors/<sensor>/<sha256>.json                 what a sensor asked for, per document (its cursor names the file)
    .atlas_knowledge_base.json                     the knowledge base this state belongs to (also in the exports and
                                                   DAGSTER_HOME): another one is refused, never mixed in
    llm_cache/<ab>/<request hash>.json             LLM answers by request, with their original usage
    llm_batches/queued/<request hash>.json         a request waiting to go out in the next Batch API batch
    llm_batches/sent/<request hash>.json           a request in a submitted batch (which one, for which documents)
    llm_batches/failed/<request hash>.json         a request the batch refused for good (the reason, read once)
    llm_batches/batches/<batch id>.json            a submitted batch: its requests, documents and last status
    llm_batches/ready/<key>.json                   a document whose answers arrived: run it again to grade them
    documents/<key>/review.json                    the review: final values merged from the extraction and decisions
    reviews/decisions/<key>/<stamp>-<id>.json      the audit log: one file per decision, written once, never changed
    reviews/imports/<stamp>-<sha256>.json          what a reviewed workbook from the inbox did, row by row
    aggregates/task_completion.json                task completion figures (derived: rebuilt, never migrated over)
    sources/<name>/state.json                      a collector's memory: feed validators, items seen, failures, pause
    sources/domains.json                           when each domain was last asked, robots.txt texts (all sources)
    sources/provenance/<ab>/<sha256>.json          where a collected document came from (source, URL, fetched at)
    duplicates/fingerprints/<parser>/<ab>/<sha>.json  a text's identifiers and shingles (derived, cached)
    duplicates/groups.json                         documents recognised as one work: canonical, members, evidence
    duplicates/splits.json                         groups a person split (kept: a decision, never derived)

The export store (``ATLAS_EXPORTS``) holds the files named in ``outputs.export_files`` (``export_path`` here places
them).

Paths are relative to their store, so records keep working when a store moves (``atlas migrate``).
"""

from __future__ import annotations

import hashlib

SNAPSHOTS = "snapshots"
PARSED = "parsed"
PROVIDERS = "providers"
DOCUMENTS = "documents"
CATALOG_PATH = "catalog/documents.json"
CATALOG_SHARDS = "catalog/shards"
SENSOR_MARKS = "sensors"
STATE_OWNER_PATH = ".atlas_knowledge_base.json"
LLM_CACHE = "llm_cache"
LLM_BATCHES = "llm_batches"
AGGREGATES = "aggregates"
COMPLETION_PATH = f"{AGGREGATES}/task_completion.json"

REVIEWS = "reviews"
DECISIONS = f"{REVIEWS}/decisions"
IMPORTS = f"{REVIEWS}/imports"
ASSIGNMENTS = f"{REVIEWS}/assignments"  # who extracts which document (``review.extraction_team``)

SOURCES = "sources"
SOURCE_DOMAINS_PATH = f"{SOURCES}/domains.json"
DUPLICATES = "duplicates"
FINGERPRINTS = f"{DUPLICATES}/fingerprints"
DUPLICATE_GROUPS_PATH = f"{DUPLICATES}/groups.json"
DUPLICATE_SPLITS_PATH = f"{DUPLICATES}/splits.json"


def snapshot_path(sha256: str) -> str:
    return f"{SNAPSHOTS}/{sha256[:2]}/{sha256}"


def parse_dir(sha256: str, parser: str) -> str:
    return f"{PARSED}/{parser}/{sha256[:2]}/{sha256}"


def parse_record_path(sha256: str, parser: str) -> str:
    return f"{parse_dir(sha256, parser)}/parse.json"


def provider_result_path(provider: str, fingerprint: str, sha256: str) -> str:
    return f"{PROVIDERS}/{provider}/{fingerprint}/{sha256[:2]}/{sha256}.json"


def markdown_path(sha256: str, parser: str) -> str:
    return f"{parse_dir(sha256, parser)}/document.md"


def tables_path(sha256: str, parser: str) -> str:
    return f"{parse_dir(sha256, parser)}/tables.json"


def record_path(key: str, stage: str) -> str:
    return f"{DOCUMENTS}/{key}/{stage}.json"


def extraction_output_path(key: str) -> str:
    return f"{DOCUMENTS}/{key}/extraction_output.json"


def decisions_dir(key: str) -> str:
    return f"{DECISIONS}/{key}"


def decision_path(key: str, stamp: str, decision_id: str) -> str:
    return f"{decisions_dir(key)}/{stamp}-{decision_id}.json"


def import_report_path(stamp: str, sha256: str) -> str:
    return f"{IMPORTS}/{stamp}-{sha256[:16]}.json"


def shard_of(key: str) -> str:
    """Which of 256 shards holds what is kept per key (catalog entries, the aggregates' parts): two hex digits."""
    return hashlib.sha256(key.encode()).hexdigest()[:2]


def catalog_shard_path(key: str) -> str:
    """The shard holding a document's catalog entry: a scan rewrites only the shards of the entries it changed (the
    first scan of 100,000 documents writes 256 files, not 100,000), a run reads one."""
    return f"{CATALOG_SHARDS}/{shard_of(key)}.json"


def llm_cache_path(request_key: str) -> str:
    return f"{LLM_CACHE}/{request_key[:2]}/{request_key}.json"


def llm_batch_request_path(state: str, request_key: str) -> str:
    """A request of the Batch API queue in ``state``: queued, sent or failed."""
    return f"{LLM_BATCHES}/{state}/{request_key}.json"


def llm_batch_ready_path(document: str) -> str:
    """A document whose Batch API answers (or refusals) arrived and are not read by its run yet."""
    return f"{LLM_BATCHES}/ready/{document}.json"


def llm_batch_path(batch_id: str) -> str:
    return f"{LLM_BATCHES}/batches/{batch_id}.json"


def source_state_path(name: str) -> str:
    return f"{SOURCES}/{name}/state.json"


def provenance_path(sha256: str) -> str:
    return f"{SOURCES}/provenance/{sha256[:2]}/{sha256}.json"


def fingerprint_path(sha256: str, parser: str) -> str:
    return f"{FINGERPRINTS}/{parser}/{sha256[:2]}/{sha256}.json"


def export_path(stem: str, fmt: str) -> str:
    return f"{stem}.{fmt}"


def is_derived(relative: str) -> bool:
    """Aggregates are rebuilt from the records: a difference there is not a conflict between two stores."""
    return relative.startswith((f"{AGGREGATES}/", f"{FINGERPRINTS}/", DUPLICATE_GROUPS_PATH, STATE_OWNER_PATH))
