"""Skip mode (no LLM): a stable JSON wrapper that points at the markdown and tables of a document.

It is the global default while no LLM is configured, so every document still ends with a reviewable record: where
its text and tables are, which engines made them, which identifiers it carries, and which template would apply.
"""

from __future__ import annotations

from typing import Any

from atlas_pipeline.core.templates import Template
from atlas_pipeline.extraction.rules import Rule
from atlas_pipeline.store.records import ParseRecord, SnapshotRecord

WRAPPER_SCHEMA = "atlas.skip_wrapper/1"


def skip_wrapper(
    snapshot: SnapshotRecord,
    parse: ParseRecord,
    template: Template,
    rule: Rule,
    identifiers: dict[str, list[str]],
) -> dict[str, Any]:
    """The wrapper document: same keys for every document, values null where unknown."""
    return {
        "schema": WRAPPER_SCHEMA,
        "document": {
            "key": snapshot.key,
            "source_path": snapshot.source_path,
            "sha256": snapshot.sha256,
            "size_bytes": snapshot.size,
            "media_type": parse.media_type,
            "pages": parse.pages,
            "title": parse.title or None,
        },
        "content": {
            "markdown_path": parse.text_path,
            "tables_path": parse.tables_path,
            "characters": parse.characters,
            "tables": parse.tables,
            "ocr_pages": parse.ocr_pages,
        },
        "providers": {
            "parser": parse.engine,
            "parser_fingerprint": parse.parser,
            "parse_provider": parse.provider or None,
            "parse_provider_task_id": parse.provider_task_id or None,
            "extractor": "skip (no LLM)",
        },
        "identifiers": identifiers,
        "template": {"code": template.code, "version": template.version, "hash": template.content_hash},
        "rule": rule.name,
        "fields": {field.name: None for field in template.fields},
    }
