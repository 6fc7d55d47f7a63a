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


def quick_text(data: bytes, media_type: str | None) -> str:
    """A document's words without parsing it (PyMuPDF's text layer of a PDF, the text of markup, the bytes of
    text): about as long as its parse, for estimates made before anything is parsed. Scans and images give ""."""
    from atlas_pipeline.parsing.media import HTML, JATS, PDF

    if media_type == PDF:
        import pymupdf

        try:
            with pymupdf.open(stream=data, filetype="pdf") as doc:
                if doc.needs_pass:
                    return ""
                return "\n".join(f"{PAGE_MARKER.format(number=n)}\n{page.get_text()}" for n, page in enumerate(doc, 1))
        except Exception:
            return ""
    if media_type in (HTML, JATS):
        from bs4 import BeautifulSoup

        return BeautifulSoup(data, "html.parser" if media_type == HTML else "xml").get_text(" ")
    if media_type is not None and media_type.startswith("text/"):
        return data.decode("utf-8", errors="replace")
    return ""
