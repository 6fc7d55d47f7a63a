"""docling-serve (docling-project/docling-serve, version 1.0 or later), through its asynchronous convert API.

``POST /v1/convert/file/async`` (multipart ``files`` plus the conversion options as form fields) answers a
``task_id``; ``GET /v1/status/poll/<task_id>`` is asked until ``task_status`` is ``success`` (or ``failure``);
``GET /v1/result/<task_id>`` gives ``{"document": {"md_content", "json_content"}, "status", "errors",
"processing_time"}``. The markdown is asked with a page-break placeholder, which becomes the page markers every parse
has; the tables come from the Docling document (``json_content.tables``: cell grid, page, caption).
"""

from __future__ import annotations

import time
from typing import Any

from atlas_pipeline.parsing.model import ParsedDocument, Table
from atlas_pipeline.parsing.pages import PAGE_MARKER
from atlas_pipeline.parsing.providers.base import ParsingProvider, ProviderError, ProviderLimits, neutral_name
from atlas_pipeline.parsing.providers.http import Deadline, ProviderHTTP, expect
from atlas_pipeline.parsing.tables import clean_cell, table_from_rows

PAGE_BREAK = "<!-- atlas:page-break -->"
RUNNING = ("pending", "started", "queued", "running")


def _grid(table: dict[str, Any]) -> tuple[list[list[str]], int]:
    """The cell texts of a Docling table, row by row, and how many leading rows are column headers."""
    data = table.get("data") or {}
    grid = data.get("grid")
    if isinstance(grid, list) and grid:
        rows = [[clean_cell((cell or {}).get("text")) for cell in row] for row in grid if isinstance(row, list)]
        headers = 0
        for row in grid:
            if row and all(isinstance(cell, dict) and cell.get("column_header") for cell in row):
                headers += 1
            else:
                break
        return rows, headers
    cells = data.get("table_cells") or []
    rows_n, cols_n = int(data.get("num_rows") or 0), int(data.get("num_cols") or 0)
    rows = [[""] * cols_n for _ in range(rows_n)]
    for cell in cells:
        row, col = cell.get("start_row_offset_idx"), cell.get("start_col_offset_idx")
        if isinstance(row, int) and isinstance(col, int) and row < rows_n and col < cols_n:
            rows[row][col] = clean_cell(cell.get("text"))
    return rows, 1


def docling_tables(document: dict[str, Any]) -> list[Table]:
    items = [item for item in document.get("texts") or [] if isinstance(item, dict)]
    texts = {item.get("self_ref"): item.get("text", "") for item in items}
    tables: list[Table] = []
    for item in document.get("tables") or []:
        expect(isinstance(item, dict), "docling", "a table is not an object")
        rows, headers = _grid(item)
        if not any(any(row) for row in rows):
            continue
        # references are written {"$ref": "#/texts/N"} (docling-core's alias of cref)
        refs = [ref for ref in item.get("captions") or [] if isinstance(ref, dict)]
        captions = [str(texts.get(ref.get("$ref") or ref.get("cref"), "")) for ref in refs]
        provenance = item.get("prov")
        first = provenance[0] if isinstance(provenance, list) and provenance else {}
        page = first.get("page_no") if isinstance(first, dict) else None
        tables.append(
            table_from_rows(
                rows,
                index=len(tables),
                page=page if isinstance(page, int) else None,
                caption=" ".join(c for c in captions if c),
                header_rows=max(headers, 1),
            )
        )
    return tables


def with_page_markers(markdown: str) -> tuple[str, int]:
    pages = markdown.split(PAGE_BREAK)
    out = [PAGE_MARKER.format(number=n) + "\n\n" + page.strip("\n") for n, page in enumerate(pages, start=1)]
    return "\n\n".join(out) + "\n", len(pages)


class DoclingServe(ParsingProvider):
    """docling-serve's asynchronous convert API (``ATLAS_DOCLING_URL``, optional ``ATLAS_DOCLING_API_KEY``)."""

    name = "docling"

    def __init__(self, url: str, api_key: str, table_mode: str, ocr: bool, limits: ProviderLimits, version_label=""):
        super().__init__(version_label)
        self.url, self.api_key, self.table_mode, self.ocr, self.limits = url, api_key, table_mode, ocr, limits

    def options(self) -> dict[str, Any]:
        return {"table_mode": self.table_mode, "do_ocr": self.ocr}

    def form(self) -> dict[str, Any]:
        """Exactly the form fields sent beside the file."""
        return {
            "to_formats": ["md", "json"],
            "image_export_mode": "placeholder",
            "do_ocr": str(self.ocr).lower(),
            "do_table_structure": "true",
            "table_mode": self.table_mode,
            "md_page_break_placeholder": PAGE_BREAK,
            "abort_on_error": "false",
        }

    def parse(self, data: bytes, filename: str, media_type: str) -> ParsedDocument:
        name = neutral_name(data, media_type)
        deadline = Deadline(self.limits.max_seconds)
        headers = {"X-Api-Key": self.api_key} if self.api_key else {}
        http = ProviderHTTP("docling", self.url, self.limits, headers=headers)
        started = time.perf_counter()
        try:
            task = http.json(
                "POST",
                "/v1/convert/file/async",
                deadline,
                "submit",
                starts_work=True,
                files={"files": (name, data, media_type)},
                data=self.form(),
            )
            expect(isinstance(task, dict) and bool(task.get("task_id")), "docling", "the submit answered no task_id")
            task_id = str(task["task_id"])
            status = str(task.get("task_status") or "pending")
            while status != "success":
                if status == "failure":
                    meta = task.get("task_meta") or task.get("error_message") or "no message"
                    raise ProviderError(f"docling: task {task_id} failed: {meta}")
                expect(status in RUNNING, "docling", f"unknown task status {status!r}")
                deadline.wait_to_poll(self.limits, f"docling: task {task_id}", f"status: {status}")
                task = http.json("GET", f"/v1/status/poll/{task_id}", deadline, "poll")
                expect(isinstance(task, dict), "docling", "the status poll answered something that is not an object")
                status = str(task.get("task_status") or "")
            parsed_at = time.perf_counter()
            result = http.json("GET", f"/v1/result/{task_id}", deadline, "result")
        finally:
            http.close()
        return self.to_document(result, task_id, started, parsed_at)

    def to_document(self, result: Any, task_id: str, started: float, parsed_at: float) -> ParsedDocument:
        expect(isinstance(result, dict) and isinstance(result.get("document"), dict), "docling", "no 'document'")
        outcome = str(result.get("status") or "")
        errors = [str(e.get("error_message") if isinstance(e, dict) else e) for e in result.get("errors") or []]
        if outcome in ("failure", "skipped"):
            raise ProviderError(f"docling: conversion {outcome}: {'; '.join(errors[:3]) or 'no message'}")
        document = result["document"]
        md_content, json_content = document.get("md_content"), document.get("json_content")
        expect(isinstance(md_content, str) and bool(md_content.strip()), "docling", "no markdown (md_content)")
        expect(isinstance(json_content, dict), "docling", "no Docling document (json_content)")
        markdown, pages = with_page_markers(md_content)
        page_count = len(json_content.get("pages") or {}) or pages
        warnings = [f"docling: {outcome}: {error}" for error in errors[:10]] if outcome == "partial_success" else []
        return ParsedDocument(
            media_type="",
            markdown=markdown,
            tables=docling_tables(json_content),
            page_count=page_count,
            engine=f"docling-serve ({self.table_mode} tables)",
            provider="docling",
            provider_task_id=task_id,
            provider_version="",
            warnings=warnings,
            timings={
                "queue_and_parse_seconds": round(parsed_at - started, 3),
                "processing_seconds": float(result.get("processing_time") or 0.0),
                "provider_seconds": round(time.perf_counter() - started, 3),
            },
        )
