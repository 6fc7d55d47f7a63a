"""PDF → markdown and tables with pymupdf4llm, parsing every page exactly once.

The layout engine (pymupdf-layout) classifies each page's boxes once; the markdown is rendered from that parse and
the table boxes of the same parse give the tables, so there is no second table-detection pass. Image-only pages are
OCR'd with tesseract when it is installed (pymupdf4llm decides per page).

Engine ``auto`` (the default) runs the layout model only on the pages that need it (``parsing.page_triage``: tables,
unusual layout, little or unreadable text); the other pages get their boxes from PyMuPDF's own blocks. Both kinds of
box go through pymupdf4llm's one reading-order and markdown code, so a page's markdown follows the same conventions
whichever path it took. ``layout`` runs the model on every page.

Every page starts with a marker ``<!-- page N -->`` (an HTML comment: invisible when the markdown is rendered), so an
offset in the text has a page a person can open. Characters the text layer cannot give truthfully are ``�``
(``parsing.text_layer``).
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from importlib.metadata import version

import pymupdf
import pymupdf4llm  # noqa: F401  (activates pymupdf-layout before the helpers are used)
from pymupdf4llm.helpers import document_layout

from atlas_pipeline.parsing.citation import largest_type_on_first_page, reads_as_title
from atlas_pipeline.parsing.errors import LockedDocumentError, UnreadableDocumentError
from atlas_pipeline.parsing.model import ParsedDocument, Table
from atlas_pipeline.parsing.page_triage import LAYOUT, TEXT, PageView, Triage, body_size, text_boxes, triage_page
from atlas_pipeline.parsing.pages import PAGE_MARKER, count_pages  # noqa: F401  (count_pages: public here before)
from atlas_pipeline.parsing.tables import clean_cell, table_from_rows
from atlas_pipeline.parsing.text_layer import (
    join_split_accents,
    map_tex_math_fonts,
    mark_control_characters,
    mark_misdrawn_glyphs,
)

PYMUPDF4LLM_VERSION = version("pymupdf4llm")
# MuPDF and pymupdf4llm chatter goes to Python logging (Dagster captures it) instead of the terminal.
pymupdf.set_messages(pylogging=True, pylogging_name="pymupdf", pylogging_level=logging.DEBUG)
_TABLE_CAPTION = re.compile(r"^\s*(\*\*)?\s*(table|tab\.)\s*[0-9ivxlc]+", re.IGNORECASE)
_PAGE_END = re.compile(r"\n*--- end of page(?:\.page_number)?=(\d+) ---\n*")


@dataclass
class _Routing:
    """One parse's page routing, read by the hooks below while ``_layout_parse`` runs."""

    triage: bool
    ocr_max_text_chars: int | None
    ocr_pages: list[int]
    decisions: dict[int, Triage] = field(default_factory=dict)  # 1-based page → where it went and why
    views: dict[int, PageView] = field(default_factory=dict)  # 0-based page → what triage read (read once)
    body: float | None = None  # the document's running-text font size

    def view(self, page: pymupdf.Page) -> PageView:
        """The page as triage reads it; on first use every page is read, for the document's body font size."""
        if self.body is None:
            self.body = self._body_size(page.parent)
        view = self.views.get(page.number)
        if view is None or view.page.parent is not page.parent or view.page.rotation:  # rotation since removed
            view = self.views[page.number] = PageView.read(page)
        return view

    def _body_size(self, document: pymupdf.Document) -> float:
        """The document's body font size from every page that can be read (a broken page is the business of its
        own parse, which names what was lost); pages read here are kept for their own turn, small ones only."""
        views = []
        for number in range(document.page_count):
            try:
                view = PageView.read(document[number])
            except Exception:  # MuPDF's own error types: this page's parse will meet and report it
                continue
            views.append(view)
            if len(view.blocks) <= MAX_KEPT_BLOCKS:
                self.views[number] = view
        return body_size(views)

    def done(self, page: pymupdf.Page) -> None:
        """Let go of a page's view once its boxes are made (a long document's pages are not all held at once)."""
        self.views.pop(page.number, None)


MAX_KEPT_BLOCKS = 400  # a page with more blocks than this is read again at its turn rather than held


_ROUTING: ContextVar[_Routing | None] = ContextVar("atlas_page_routing", default=None)
# pymupdf4llm's per-page steps that the routing wraps; a pymupdf4llm without them parses every page with the model
_MODEL_LAYOUT = getattr(document_layout, "get_layout_locked", None)
_MODEL_OCR_DECISION = getattr(document_layout, "make_ocr_decision", None)
TRIAGE_AVAILABLE = callable(_MODEL_LAYOUT) and callable(_MODEL_OCR_DECISION)


def _routed_ocr_decision(page: pymupdf.Page, use_ocr: object) -> tuple[bool, int, bool]:
    """pymupdf4llm's first step on a page. Two savings: its OCR analysis (~18 ms a page) only where OCR can happen —
    a page with more text than ``ocr_max_text_chars`` is never OCR'd (``_ocr_function`` vetoes it) unless its text
    is itself an OCR layer; and, the page's path decided here, a text-path page's text extracted without MuPDF's
    style detection (~40 ms a page) when no drawing touches its text (no underline, strike-out or highlight)."""
    routing = _ROUTING.get()
    if routing is None:
        return _MODEL_OCR_DECISION(page, use_ocr)
    view = routing.view(page)
    limit = routing.ocr_max_text_chars
    if use_ocr and limit is not None and view.characters > limit and not _ocr_layer(page):
        needs_ocr = (False, 0, False)
    else:
        needs_ocr = _MODEL_OCR_DECISION(page, use_ocr)
    if routing.triage:
        decision = Triage(LAYOUT, "OCR") if needs_ocr[0] else triage_page(view)
        routing.decisions[page.number + 1] = decision
        if decision.route == TEXT and not view.decorated:
            _without_styles(page)
    return needs_ocr


def _ocr_layer(page: pymupdf.Page) -> bool:
    """Whether the page has text from an earlier OCR (tesseract's invisible font)."""
    return any("GlyphLessFont" in font[3] for font in page.get_fonts())


def _without_styles(page: pymupdf.Page) -> None:
    extract = page.get_textpage

    def get_textpage(clip: object = None, flags: int = 0, matrix: object = None) -> pymupdf.TextPage:
        return extract(clip=clip, flags=flags & ~pymupdf.TEXT_COLLECT_STYLES, matrix=matrix)

    page.get_textpage = get_textpage


def _routed_layout(page: pymupdf.Page, **kwargs: object) -> None:
    """The layout model's boxes for a page that needs them, PyMuPDF's classified blocks for the others."""
    routing = _ROUTING.get()
    if routing is None or not routing.triage:
        return _MODEL_LAYOUT(page, **kwargs)
    number = page.number + 1
    if number in routing.ocr_pages:  # OCR'd: the text the decision saw has changed
        routing.decisions[number] = Triage(LAYOUT, "OCR")
    elif number not in routing.decisions:
        routing.decisions[number] = triage_page(routing.view(page))
    if routing.decisions[number].route == LAYOUT:
        routing.done(page)
        return _MODEL_LAYOUT(page, **kwargs)
    page.layout_information = text_boxes(routing.view(page), routing.body or 10.0)
    routing.done(page)
    return None


if TRIAGE_AVAILABLE:  # without a routing set (pymupdf4llm.to_markdown, other callers) both behave as before
    document_layout.get_layout_locked = _routed_layout
    document_layout.make_ocr_decision = _routed_ocr_decision


def with_page_markers(markdown: str, zero_based: bool = False) -> str:
    """pymupdf4llm's page separators ("--- end of page=N ---" after each page) → a marker at the start of every
    page (``zero_based``: the legacy engine numbers pages from 0)."""
    pieces = _PAGE_END.split(markdown)
    out = []
    for text, number in zip(pieces[0::2], pieces[1::2], strict=False):
        page = int(number) + (1 if zero_based else 0)
        out.append(PAGE_MARKER.format(number=page) + "\n\n" + text.strip("\n") + "\n\n")
    rest = pieces[-1] if len(pieces) % 2 else ""
    if rest.strip():
        out.append(rest.strip("\n") + "\n")
    return "".join(out)


def describe_error(error: BaseException) -> str:
    """A library error as a reason: MuPDF's message without its code prefix ("cycle in page tree")."""
    message = re.sub(r"^code=\d+:\s*", "", str(error).strip())
    return message or type(error).__name__


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


def _ocr_function(ocr: bool, ocr_max_text_chars: int | None, ocr_pages: list[int]) -> Callable[..., None] | None:
    """pymupdf4llm's OCR of a page, vetoed on pages with a real text layer, recording the pages it OCRs."""
    engine_ocr = document_layout.select_ocr_function() if ocr else None
    if engine_ocr is None:
        return None

    def recording_ocr(page: pymupdf.Page, **kwargs: object) -> None:
        if ocr_max_text_chars is not None and len(page.get_text().strip()) > ocr_max_text_chars:
            return  # a real text layer: OCR would only add the words inside figures
        ocr_pages.append(page.number + 1)
        engine_ocr(page, **kwargs)

    return recording_ocr


def _layout_parse(
    doc: pymupdf.Document,
    pages: list[int] | None,
    ocr_function: Callable[..., None] | None,
    ocr_language: str,
    routing: _Routing,
) -> tuple[str, list[Table]]:
    token = _ROUTING.set(routing)
    try:
        parsed = document_layout.parse_document(
            doc,
            pages=pages,
            use_ocr=ocr_function is not None,
            ocr_function=ocr_function,
            force_text=True,
            ocr_language=ocr_language,
            show_progress=False,
        )
    finally:
        _ROUTING.reset(token)
    markdown = parsed.to_markdown(header=True, footer=True, show_progress=False, page_separators=True)
    return markdown, _tables_from_layout(parsed, doc)


def _layout_parse_salvaging(
    doc: pymupdf.Document,
    ocr_function: Callable[..., None] | None,
    ocr_language: str,
    routing: _Routing,
    warnings: list[str],
    lost: list[str],
) -> tuple[str, list[Table]]:
    """The whole document in one layout parse; when MuPDF or the layout model fails on it, page by page, each page
    with the best that works for it (layout with OCR, layout without OCR, plain text), and a note in ``lost`` per
    page that lost something. A page nothing can read is left empty with its reason."""
    try:
        return _layout_parse(doc, None, ocr_function, ocr_language, routing)
    except Exception as error:  # MuPDF raises its own error types (FzErrorFormat, FzErrorLibrary, …)
        warnings.append(f"the one-pass parse failed ({describe_error(error)}); parsed page by page")
        # the per-page notes below name what was lost
    pieces: list[str] = []
    tables: list[Table] = []
    attempts = [("layout with OCR", ocr_function), ("layout", None)] if ocr_function else [("layout", None)]
    for number in range(doc.page_count):
        failures = []
        for label, function in attempts:
            try:
                markdown, page_tables = _layout_parse(doc, [number], function, ocr_language, routing)
            except Exception as error:
                failures.append(f"{label}: {describe_error(error)}")
                continue
            pieces.append(markdown)
            tables.extend(page_tables)
            break
        else:
            pieces.append(_plain_page(doc, number, failures, lost))
            continue
        if failures:
            lost.append(f"page {number + 1}: {'; '.join(failures)}; parsed without OCR")
    reindexed = [table.model_copy(update={"index": index}) for index, table in enumerate(tables)]
    return "".join(pieces), reindexed


def _plain_page(
    doc: pymupdf.Document, number: int, failures: list[str], warnings: list[str], zero_based: bool = False
) -> str:
    """PyMuPDF's plain text of one page (no layout, no tables), or nothing with the reason."""
    separator = f"\n\n--- end of page={number + (0 if zero_based else 1)} ---\n\n"
    try:
        text = doc[number].get_text()
    except Exception as error:
        warnings.append(f"page {number + 1} could not be read: {describe_error(error)}")
        return separator
    warnings.append(f"page {number + 1}: {'; '.join(failures)}; plain text only, no tables")
    return text + separator


def _legacy_parse(doc: pymupdf.Document, lost: list[str]) -> str:
    from pymupdf4llm.helpers import pymupdf_rag

    try:
        return pymupdf_rag.to_markdown(doc, show_progress=False, page_separators=True)
    except Exception as error:
        failure = [f"legacy engine: {describe_error(error)}"]
        return "".join(_plain_page(doc, n, failure, lost, zero_based=True) for n in range(doc.page_count))


def parse_pdf(
    data: bytes,
    *,
    engine: str = "auto",
    ocr: bool = True,
    ocr_language: str = "eng",
    ocr_max_text_chars: int | None = None,
) -> ParsedDocument:
    """Parse PDF bytes. ``engine`` is ``auto`` (text + tables, the layout model on the pages that need it),
    ``layout`` (the model on every page) or ``legacy`` (no layout model, text only).

    pymupdf4llm decides per page whether OCR would help (it also OCRs figures on born-digital pages);
    ``ocr_max_text_chars`` vetoes OCR on pages whose own text layer already has more characters than that."""
    pymupdf.TOOLS.mupdf_warnings()  # reset the warning buffer
    doc = open_pdf(data)
    warnings: list[str] = []
    map_tex_math_fonts(doc)
    misdrawn = mark_misdrawn_glyphs(doc)
    if (doc.permissions & pymupdf.PDF_PERM_COPY) == 0:
        warnings.append("the PDF's permissions do not allow copying text; extracted for review only")
    ocr_pages: list[int] = []
    routing = _Routing(engine == "auto" and TRIAGE_AVAILABLE, ocr_max_text_chars, ocr_pages)
    lost: list[str] = []  # what could not be read: pages, OCR
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            if engine == "legacy":
                markdown, tables = _legacy_parse(doc, lost), []
            else:
                ocr_function = _ocr_function(ocr, ocr_max_text_chars, ocr_pages)
                markdown, tables = _layout_parse_salvaging(doc, ocr_function, ocr_language, routing, warnings, lost)
        page_count = doc.page_count
        title = (doc.metadata or {}).get("title") or ""
        if not reads_as_title(title):  # a typesetter's file name, "Untitled": the largest type on page 1 instead,
            title = largest_type_on_first_page(doc) if 1 not in ocr_pages else ""  # unless OCR wrote page 1's text
    finally:
        doc.close()
    warnings.extend(_collect_warnings())
    markdown = join_split_accents(mark_control_characters(markdown)[0])
    unreadable = markdown.count("\ufffd")
    if unreadable:
        glyphs = f" ({misdrawn} glyph code(s) drawn as another character)" if misdrawn else ""
        warnings.append(f"{unreadable} character(s) of the PDF's text layer are unreadable and shown as �{glyphs}")
    if not _PAGE_END.sub("", markdown).strip() and not tables:
        if lost:
            raise UnreadableDocumentError("no page could be read: " + "; ".join(lost[:3]))
        reason = "no extractable text: the pages have no text layer"
        if not ocr:
            reason += " and OCR is off (ATLAS_OCR=false)"
        elif not ocr_available():
            reason += " and no OCR engine is installed (install tesseract-ocr)"
        raise UnreadableDocumentError(reason)
    return ParsedDocument(
        media_type="application/pdf",
        markdown=with_page_markers(markdown, zero_based=engine == "legacy"),
        tables=tables,
        page_count=page_count,
        ocr_pages=ocr_pages,
        engine=f"pymupdf4llm {PYMUPDF4LLM_VERSION} ({engine})",
        warnings=warnings,
        lost=lost,
        title=title,
        layout_pages=_pages_on(routing, LAYOUT, page_count, engine),
        text_pages=_pages_on(routing, TEXT, page_count, engine),
    )


def _pages_on(routing: _Routing, route: str, page_count: int, engine: str) -> list[int]:
    """The 1-based pages that took ``route``: from the routing's decisions, or every page for engine ``layout``."""
    if engine == "legacy":
        return []
    if not routing.triage:
        return list(range(1, page_count + 1)) if route == LAYOUT else []
    return sorted(number for number, decision in routing.decisions.items() if decision.route == route)
