"""Exports for reviewers: one row per document, as xlsx, csv, parquet and jsonl at stable paths."""

from __future__ import annotations

import io
import json

import polars as pl

from atlas_pipeline.completion import DocumentState, TaskCompletion
from atlas_pipeline.grading.fields import REVIEW_TIERS
from atlas_pipeline.storage import Store

EXPORT_STEM = "atlas_documents"
FIELDS_STEM = "atlas_fields"
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
        "extracted_at": ext.extracted_at if ext else None,
    }


def documents_frame(states: list[DocumentState]) -> pl.DataFrame:
    return pl.DataFrame([document_row(s) for s in states], schema=SCHEMA, orient="row")


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
    return pl.DataFrame(field_rows(states), schema=FIELD_SCHEMA, orient="row")


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
    rows = [{"figure": f"count_{status}", "value": float(count)} for status, count in completion.counts.items()]
    for name in (
        "total",
        "terminal",
        "open",
        "completion_rate",
        "partial_rate",
        "failure_rate",
        "skipped_rate",
    ):
        rows.append({"figure": name, "value": float(getattr(completion, name))})
    if completion.average_processing_seconds is not None:
        rows.append({"figure": "average_processing_seconds", "value": completion.average_processing_seconds})
    return pl.DataFrame(rows, schema={"figure": pl.String, "value": pl.Float64}, orient="row")


def _workbook(documents: pl.DataFrame, fields: pl.DataFrame, completion: TaskCompletion) -> bytes:
    import xlsxwriter

    buffer = io.BytesIO()
    review = {"type": "cell", "criteria": "==", "value": True, "format": {"bg_color": "#FFC7CE"}}
    with xlsxwriter.Workbook(buffer, {"in_memory": True}) as workbook:
        documents.write_excel(workbook, worksheet="documents", autofilter=True, freeze_panes=(1, 1), autofit=True)
        extractions_frame(fields).write_excel(workbook, worksheet="extractions", freeze_panes=(1, 1), autofit=True)
        fields.write_excel(
            workbook,
            worksheet="fields",
            autofilter=True,
            freeze_panes=(1, 0),
            conditional_formats={"needs_review": review},
        )
        completion_frame(completion).write_excel(workbook, worksheet="task_completion", autofit=True)
    return buffer.getvalue()


def _encode(frame: pl.DataFrame, fmt: str) -> bytes:
    buffer = io.BytesIO()
    if fmt == "csv":
        frame.write_csv(buffer)
    elif fmt == "parquet":
        frame.write_parquet(buffer)
    elif fmt == "jsonl":
        frame.write_ndjson(buffer)
    else:
        raise ValueError(f"unknown export format {fmt!r}")
    return buffer.getvalue()


def write_exports(store: Store, states: list[DocumentState], completion: TaskCompletion) -> dict[str, str]:
    """Write every export under stable names in ``store``; returns name → location.

    ``atlas_documents.*``: one row per document; ``atlas_fields.*``: one row per extracted field (value, quote,
    confidence, tier, evidence location — page, span in document.md or table and row —, consistency flags), fields
    needing review first. The xlsx holds both plus a wide ``extractions`` sheet.
    """
    documents, fields = documents_frame(states), fields_frame(states)
    written = {"xlsx": store.write_bytes(f"{EXPORT_STEM}.xlsx", _workbook(documents, fields, completion))}
    for fmt in FORMATS[1:]:
        written[fmt] = store.write_bytes(f"{EXPORT_STEM}.{fmt}", _encode(documents, fmt))
        written[f"fields_{fmt}"] = store.write_bytes(f"{FIELDS_STEM}.{fmt}", _encode(fields, fmt))
    return written
