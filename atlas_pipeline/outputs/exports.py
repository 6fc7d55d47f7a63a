"""Exports for reviewers: one row per document, as xlsx, csv, parquet and jsonl at stable paths."""

from __future__ import annotations

import io
import json

import polars as pl

from atlas_pipeline.grading.fields import REVIEW_TIERS
from atlas_pipeline.ops.redaction import redact_value, secret_values
from atlas_pipeline.outputs.completion import DocumentState, TaskCompletion
from atlas_pipeline.outputs.workbook import truncate_for_cells, workbook_bytes
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import EXPORT_STEM, FIELDS_STEM, export_path

FORMATS = ("xlsx", "csv", "parquet", "jsonl")

SCHEMA = {
    "document_key": pl.String,
    "status": pl.String,
    "reason": pl.String,
    "completeness": pl.Float64,
    "source_path": pl.String,
    "source_removed": pl.Boolean,
    "media_type": pl.String,
    "pages": pl.Int64,
    "characters": pl.Int64,
    "tables": pl.Int64,
    "ocr_pages": pl.Int64,
    "sha256": pl.String,
    "size_bytes": pl.Int64,
    "mode": pl.String,
    "template": pl.String,
    "template_hash": pl.String,
    "identifiers": pl.String,
    "text_path": pl.String,
    "tables_path": pl.String,
    "extraction_path": pl.String,
    "parser": pl.String,
    "processing_seconds": pl.Float64,
    "llm_model": pl.String,
    "llm_calls": pl.Int64,
    "llm_cache_hits": pl.Int64,
    "prompt_tokens": pl.Int64,
    "completion_tokens": pl.Int64,
    "extracted_at": pl.String,
}


def document_row(state: DocumentState) -> dict:
    snap, parse, ext = state.snapshot, state.parse, state.extraction
    return {
        "document_key": state.key,
        "status": state.status.value,
        "reason": state.reason,
        "completeness": ext.completeness if ext else None,
        "source_path": state.source_path,
        "source_removed": state.source_removed,
        "media_type": (parse.media_type if parse else None) or (snap.media_type if snap else None),
        "pages": parse.pages if parse and not parse.problem else (snap.pages if snap else None),
        "characters": parse.characters if parse else None,
        "tables": parse.tables if parse else None,
        "ocr_pages": len(parse.ocr_pages) if parse else None,
        "sha256": snap.sha256 if snap else None,
        "size_bytes": snap.size if snap else None,
        "mode": ext.mode if ext else None,
        "template": f"{ext.template_code}@{ext.template_version}" if ext else None,
        "template_hash": ext.template_hash if ext else None,
        "identifiers": "; ".join(f"{k}: {', '.join(v)}" for k, v in ext.identifiers.items()) if ext else None,
        "text_path": parse.text_path or None if parse else None,
        "tables_path": parse.tables_path or None if parse else None,
        "extraction_path": ext.extraction_path or None if ext else None,
        "parser": parse.engine or None if parse else None,
        "processing_seconds": ext.processing_seconds if ext else None,
        "llm_model": ext.llm_model or None if ext else None,
        "llm_calls": ext.llm_calls if ext else None,
        "llm_cache_hits": ext.llm_cache_hits if ext else None,
        "prompt_tokens": ext.prompt_tokens if ext else None,
        "completion_tokens": ext.completion_tokens if ext else None,
        "extracted_at": ext.extracted_at if ext else None,
    }


def documents_frame(states: list[DocumentState]) -> pl.DataFrame:
    secrets = secret_values()
    return pl.DataFrame([redact_value(document_row(s), secrets) for s in states], schema=SCHEMA, orient="row")


FIELD_SCHEMA = {
    "document_key": pl.String,
    "status": pl.String,
    "module": pl.String,
    "field": pl.String,
    "value": pl.String,
    "quote": pl.String,
    "confidence": pl.Float64,
    "tier": pl.String,
    "needs_review": pl.Boolean,
    "page": pl.Int64,
    "start": pl.Int64,
    "end": pl.Int64,
    "table": pl.Int64,
    "table_row": pl.Int64,
    "method": pl.String,
    "note": pl.String,
    "flags": pl.String,
    "chunk": pl.Int64,
}


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def field_rows(states: list[DocumentState]) -> list[dict]:
    """One row per extracted field (LLM mode), the ones that need review first."""
    rows = []
    for state in states:
        record = state.extraction
        if record is None or state.stale:
            continue
        for name, field in record.fields.items():
            if not isinstance(field, dict):
                continue  # skip mode: no values yet
            rows.append(
                {
                    "document_key": state.key,
                    "status": state.status.value,
                    "module": field.get("module"),
                    "field": name,
                    "value": _text(field.get("value")),
                    "quote": field.get("quote"),
                    "confidence": field.get("confidence"),
                    "tier": field.get("tier"),
                    "needs_review": field.get("tier") in REVIEW_TIERS or bool(field.get("flags")),
                    "page": field.get("page"),
                    "start": field.get("start"),
                    "end": field.get("end"),
                    "table": field.get("table"),
                    "table_row": field.get("row"),
                    "method": field.get("method"),
                    "note": field.get("note") or None,
                    "flags": "; ".join(field.get("flags") or []) or None,
                    "chunk": field.get("chunk"),
                }
            )
    rows.sort(key=lambda row: not row["needs_review"])
    return rows


def fields_frame(states: list[DocumentState]) -> pl.DataFrame:
    secrets = secret_values()
    rows = [redact_value(row, secrets) for row in field_rows(states)]
    return pl.DataFrame(rows, schema=FIELD_SCHEMA, orient="row")


def extractions_frame(fields: pl.DataFrame) -> pl.DataFrame:
    """Wide: one row per document, a value column and a tier column per field (template order)."""
    if fields.is_empty():
        return pl.DataFrame(schema={"document_key": pl.String})
    order = list(dict.fromkeys(fields["field"].to_list()))
    values = fields.pivot(on="field", index="document_key", values="value", aggregate_function="first")
    tiers = fields.pivot(on="field", index="document_key", values="tier", aggregate_function="first")
    tiers = tiers.rename({name: f"{name}__tier" for name in order})
    wide = values.join(tiers, on="document_key", how="left")
    columns = ["document_key"] + [column for name in order for column in (name, f"{name}__tier")]
    return wide.select(columns)


def completion_frame(completion: TaskCompletion) -> pl.DataFrame:
    """Task completion as figure rows: counts as whole numbers, rates as shares, times in seconds."""
    rows: list[dict] = [{"figure": f"count_{status}", "count": count} for status, count in completion.counts.items()]
    rows += [{"figure": name, "count": getattr(completion, name)} for name in ("total", "terminal", "open")]
    rows += [
        {"figure": name, "rate": getattr(completion, name)}
        for name in ("completion_rate", "partial_rate", "failure_rate", "skipped_rate")
    ]
    rows += [
        {"figure": name, "count": getattr(completion, name)}
        for name in ("llm_calls", "llm_cache_hits", "prompt_tokens", "completion_tokens", "fields_needing_review")
    ]
    if completion.average_processing_seconds is not None:
        rows.append({"figure": "average_processing_seconds", "seconds": completion.average_processing_seconds})
    schema = {"figure": pl.String, "count": pl.Int64, "rate": pl.Float64, "seconds": pl.Float64}
    return pl.DataFrame(rows, schema=schema)


def _encode(frame: pl.DataFrame, fmt: str, full_in: str = "") -> bytes:
    buffer = io.BytesIO()
    if fmt == "csv":  # long values cut visibly (csv readers have field limits); parquet and jsonl keep them whole
        truncate_for_cells(frame, full_in).write_csv(buffer)
    elif fmt == "parquet":
        frame.write_parquet(buffer)
    elif fmt == "jsonl":
        frame.write_ndjson(buffer)
    else:
        raise ValueError(f"unknown export format {fmt!r}")
    return buffer.getvalue()


def export_files() -> list[str]:
    """Every file ``write_exports`` writes, relative to the exports store."""
    return [export_path(EXPORT_STEM, fmt) for fmt in FORMATS] + [export_path(FIELDS_STEM, fmt) for fmt in FORMATS[1:]]


def write_exports(store: Store, states: list[DocumentState], completion: TaskCompletion) -> dict[str, str]:
    """Write every export under stable names in ``store``; returns name → location.

    ``atlas_documents.*``: one row per document; ``atlas_fields.*``: one row per extracted field (value, quote,
    confidence, tier, evidence location — page, span in document.md or table and row —, consistency flags), fields
    needing review first. The xlsx holds both plus a wide ``extractions`` sheet.
    """
    documents, fields = documents_frame(states), fields_frame(states)
    skip_mode = bool(states) and all(s.extraction is None or s.extraction.mode == "skip" for s in states)
    workbook = workbook_bytes(
        documents, extractions_frame(fields), fields, completion_frame(completion), skip_mode=skip_mode
    )
    written = {"xlsx": store.write_bytes(export_path(EXPORT_STEM, "xlsx"), workbook)}
    for fmt in FORMATS[1:]:
        written[fmt] = store.write_bytes(
            export_path(EXPORT_STEM, fmt), _encode(documents, fmt, export_path(EXPORT_STEM, "parquet"))
        )
        written[f"fields_{fmt}"] = store.write_bytes(
            export_path(FIELDS_STEM, fmt), _encode(fields, fmt, export_path(FIELDS_STEM, "parquet"))
        )
    return written
