"""Exports for reviewers: one row per document, as xlsx, csv, parquet and jsonl at stable paths."""

from __future__ import annotations

import io

import polars as pl

from atlas_pipeline.completion import DocumentState, TaskCompletion
from atlas_pipeline.storage import Store

EXPORT_STEM = "atlas_documents"
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


def _encode(frame: pl.DataFrame, completion: TaskCompletion, fmt: str) -> bytes:
    buffer = io.BytesIO()
    if fmt == "xlsx":
        import xlsxwriter

        with xlsxwriter.Workbook(buffer, {"in_memory": True}) as workbook:
            frame.write_excel(workbook, worksheet="documents", autofilter=True, freeze_panes=(1, 1), autofit=True)
            completion_frame(completion).write_excel(workbook, worksheet="task_completion", autofit=True)
    elif fmt == "csv":
        frame.write_csv(buffer)
    elif fmt == "parquet":
        frame.write_parquet(buffer)
    elif fmt == "jsonl":
        frame.write_ndjson(buffer)
    else:
        raise ValueError(f"unknown export format {fmt!r}")
    return buffer.getvalue()


def write_exports(store: Store, states: list[DocumentState], completion: TaskCompletion) -> dict[str, str]:
    """Write every format under stable names in ``store``; returns format → location."""
    frame = documents_frame(states)
    return {fmt: store.write_bytes(f"{EXPORT_STEM}.{fmt}", _encode(frame, completion, fmt)) for fmt in FORMATS}
