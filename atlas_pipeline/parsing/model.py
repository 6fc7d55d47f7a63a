"""What parsing produces: markdown text, tables as HTML plus plain text, and facts about how it was made."""

from __future__ import annotations

from pydantic import BaseModel, Field


class Table(BaseModel):
    """One table: faithful HTML for people and LLMs, plain text (one row a line) for quote search."""

    index: int
    page: int | None = None  # 1-based page of a PDF table
    caption: str = ""
    html: str
    text: str
    rows: int
    columns: int


class ParsedDocument(BaseModel):
    """The parse of one document. ``markdown`` is the full text; tables also appear inside it where found."""

    media_type: str
    markdown: str
    tables: list[Table] = Field(default_factory=list)
    page_count: int = 0
    ocr_pages: list[int] = Field(default_factory=list)  # 1-based pages whose text came from OCR
    engine: str = ""  # e.g. "pymupdf4llm 1.28.2 (auto)"
    layout_pages: list[int] = Field(default_factory=list)  # 1-based PDF pages parsed with the layout model
    text_pages: list[int] = Field(default_factory=list)  # 1-based PDF pages on the fast text path (engine auto)
    warnings: list[str] = Field(default_factory=list)
    lost: list[str] = Field(default_factory=list)  # what could not be read (a page, OCR of a page) and why
    title: str = ""
    authors: list[str] = Field(default_factory=list)  # as the document's own markup names them (JATS, HTML meta)
    year: int | None = None
    provider: str = (
        "local"  # who parsed it: local (pymupdf4llm, bs4: see engine), mineru, docling; "local + tables: mineru"
    )
    provider_task_id: str = ""  # the provider's own id of the task (to find it in its logs)
    provider_version: str = ""  # what the provider reported, or ATLAS_PROVIDER_VERSION
    timings: dict[str, float] = Field(default_factory=dict)  # seconds by phase (upload, queue and parse, …)

    @property
    def tables_text(self) -> str:
        return "\n\n".join(table.text for table in self.tables)
