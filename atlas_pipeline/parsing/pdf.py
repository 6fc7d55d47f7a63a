"""PDF → markdown and tables with pymupdf4llm, parsing every page exactly once.

The layout engine (pymupdf-layout) classifies each page's boxes once; the markdown is rendered from that parse and
the table boxes of the same parse give the tables, so there is no second table-detection pass. Image-only pages are
OCR'd with tesseract when it is installed (pymupdf4llm decides per page).

Every page starts with a marker ``<!-- page N -->`` (an HTML comment: invisible when the markdown is rendered), so an
offset in the text has a page a person can open. Characters the text layer cannot give truthfully are ``�``
(``parsing.text_layer``).
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
from importlib.metadata import version

import pymupdf
import pymupdf4llm  # noqa: F401  (activates pymupdf-layout before the helpers are used)
from pymupdf4llm.helpers import document_layout

from atlas_pipeline.parsing.errors import LockedDocumentError, UnreadableDocumentError
from atlas_pipeline.parsing.model import ParsedDocument, Table
from atlas_pipeline.parsing.tables import clean_cell, table_from_rows
from atlas_pipeline.parsing.text_layer import mark_control_characters, mark_misdrawn_glyphs

PYMUPDF4LLM_VERSION = version("pymupdf4llm")
# MuPDF and pymupdf4llm chatter goes to Python logging (Dagster captures it) instead of the terminal.
pymupdf.set_messages(pylogging=True, pylogging_name="pymupdf", pylogging_level=logging.DEBUG)
_TABLE_CAPTION = re.compile(r"^\s*(\*\*)?\s*(table|tab\.)\s*[0-9ivxlc]+", re.IGNORECASE)
_PAGE_END = re.compile(r"\n*--- end of page(?:\.page_number)?=(\d+) ---\n*")
PAGE_MARKER = "<!-- page {number} -->"


def with_page_markers(markdown: str) -> str:
    """pymupdf4llm's page separators ("--- end of page=N ---") → a marker at the start of every page."""
    pieces = _PAGE_END.split(markdown)
    pages = pieces[0::2]
    out = []
    for number, text in enumerate(pages[:-1] if len(pages) > 1 else pages, 1):
        out.append(PAGE_MARKER.format(number=number) + "\n\n" + text.strip("\n") + "\n\n")
    if len(pages) > 1 and pages[-1].strip():
        out.append(pages[-1].strip("\n") + "\n")
    return "".join(out)


def open_pdf(data: bytes) -> pymupdf.Document:
    """Open PDF bytes or raise a ``DocumentError`` with the specific reason."""
    try:
        doc = pymupdf.open(stream=data, filetype="pdf")
    except Exception as error:  # PyMuPDF raises plain RuntimeError/FileDataError for broken files
        raise UnreadableDocumentError(f"not a readable PDF: {error}") from error
    if doc.needs_pass:
        doc.close()
        raise LockedDocumentError("encrypted, needs a password")
    if doc.page_count == 0:
        doc.close()
        raise UnreadableDocumentError("not a readable PDF: it has no pages")
    return doc


def count_pages(data: bytes) -> int | None:
    """Page count without parsing, or None when the bytes are not an openable PDF."""
    try:
        with pymupdf.open(stream=data, filetype="pdf") as doc:
            return None if doc.needs_pass else doc.page_count
    except Exception:
        return None


def ocr_available() -> bool:
    """True when tesseract's language data can be found, so image-only pages can be OCR'd."""
    try:
        return bool(pymupdf.get_tessdata())
    except Exception:
        return False


def _box_text(box: document_layout.LayoutBox) -> str:
    lines = box.textlines or []
    return clean_cell(" ".join(span.get("text", "") for line in lines for span in line.get("spans", [])))


def _caption_for(boxes: list[document_layout.LayoutBox], position: int) -> str:
    """The 'Table N …' caption nearest to the table box at ``position`` (captions sit above, sometimes below)."""
    for offset in (-1, -2, 1):
        neighbour = position + offset
        if 0 <= neighbour < len(boxes) and boxes[neighbour].boxclass in ("caption", "text"):
            text = _box_text(boxes[neighbour])
            if _TABLE_CAPTION.match(text):
                return text
    return ""


def _tables_from_layout(parsed: document_layout.ParsedDocument, doc: pymupdf.Document) -> list[Table]:
    tables: list[Table] = []
    for page in parsed.pages:
        for position, box in enumerate(page.boxes):
            if box.boxclass != "table" or not box.table:
                continue
            caption = _caption_for(page.boxes, position)
            rows = [
                [mark_control_characters(str(cell or ""))[0] for cell in row] for row in box.table.get("extract") or []
            ]
            if not rows:  # the layout model saw a table but found no grid: keep its words as one column
                clip = pymupdf.Rect(box.x0, box.y0, box.x1, box.y1)
                words = mark_control_characters(doc[page.page_number - 1].get_text("text", clip=clip))[0]
                rows = [[line] for line in words.splitlines() if line.strip()]
                if not rows:
                    continue
            tables.append(table_from_rows(rows, index=len(tables), page=page.page_number, caption=caption))
    return tables


def _collect_warnings() -> list[str]:
    messages = pymupdf.TOOLS.mupdf_warnings()
    return [line for line in messages.splitlines() if line.strip()][:20] if messages else []


def parse_pdf(
    data: bytes,
    *,
    engine: str = "layout",
    ocr: bool = True,
    ocr_language: str = "eng",
    ocr_max_text_chars: int | None = None,
) -> ParsedDocument:
    """Parse PDF bytes. ``engine`` is ``layout`` (text + tables) or ``legacy`` (no layout model, text only).

    pymupdf4llm decides per page whether OCR would help (it also OCRs figures on born-digital pages);
    ``ocr_max_text_chars`` vetoes OCR on pages whose own text layer already has more characters than that."""
    pymupdf.TOOLS.mupdf_warnings()  # reset the warning buffer
    doc = open_pdf(data)
    warnings: list[str] = []
    misdrawn = mark_misdrawn_glyphs(doc)
    if (doc.permissions & pymupdf.PDF_PERM_COPY) == 0:
        warnings.append("the PDF's permissions do not allow copying text; extracted for review only")
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            if engine == "legacy":
                from pymupdf4llm.helpers import pymupdf_rag

                markdown = pymupdf_rag.to_markdown(doc, show_progress=False, page_separators=True)
                tables: list[Table] = []
                ocr_pages: list[int] = []
            else:
                ocr_pages = []
                engine_ocr = document_layout.select_ocr_function() if ocr else None

                def recording_ocr(page: pymupdf.Page, **kwargs: object) -> None:
                    if ocr_max_text_chars is not None and len(page.get_text().strip()) > ocr_max_text_chars:
                        return  # a real text layer: OCR would only add the words inside figures
                    ocr_pages.append(page.number + 1)
                    engine_ocr(page, **kwargs)

                parsed = document_layout.parse_document(
                    doc,
                    use_ocr=bool(engine_ocr),
                    ocr_function=recording_ocr if engine_ocr else None,
                    force_text=True,
                    ocr_language=ocr_language,
                    show_progress=False,
                )
                markdown = parsed.to_markdown(header=True, footer=True, show_progress=False, page_separators=True)
                tables = _tables_from_layout(parsed, doc)
    except (RuntimeError, ValueError, IndexError, KeyError) as error:
        raise UnreadableDocumentError(f"PDF could not be parsed: {error}") from error
    finally:
        page_count = doc.page_count
        title = (doc.metadata or {}).get("title") or ""
        doc.close()
    warnings.extend(_collect_warnings())
    markdown = mark_control_characters(markdown)[0]
    unreadable = markdown.count("\ufffd")
    if unreadable:
        glyphs = f" ({misdrawn} glyph code(s) drawn as another character)" if misdrawn else ""
        warnings.append(f"{unreadable} character(s) of the PDF's text layer are unreadable and shown as �{glyphs}")
    if not _PAGE_END.sub("", markdown).strip() and not tables:
        reason = "no extractable text: the pages have no text layer"
        if not ocr:
            reason += " and OCR is off (ATLAS_OCR=false)"
        elif not ocr_available():
            reason += " and no OCR engine is installed (install tesseract-ocr)"
        raise UnreadableDocumentError(reason)
    return ParsedDocument(
        media_type="application/pdf",
        markdown=with_page_markers(markdown),
        tables=tables,
        page_count=page_count,
        ocr_pages=ocr_pages,
        engine=f"pymupdf4llm {PYMUPDF4LLM_VERSION} ({engine})",
        warnings=warnings,
        title=title,
    )
