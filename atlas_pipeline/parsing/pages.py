"""Pages: the marker that starts every page of every parse (whoever made it), and a PDF's page count without
parsing it (PyMuPDF alone, without the layout model: cheap to import and run)."""

from __future__ import annotations

# an HTML comment, invisible when the markdown is rendered; an offset in the text has a page a person can open
PAGE_MARKER = "<!-- page {number} -->"


def count_pages(data: bytes) -> int | None:
    """Page count without parsing, or None when the bytes are not an openable PDF."""
    import pymupdf

    try:
        with pymupdf.open(stream=data, filetype="pdf") as doc:
            return None if doc.needs_pass else doc.page_count
    except Exception:
        return None
