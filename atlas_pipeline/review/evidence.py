"""A value's evidence in context: the PDF page with the quote's rectangles, or the text around its span.

PyMuPDF renders the page from the immutable snapshot and finds where the quote is drawn. A quote is graded against
the markdown (line breaks, hyphenation and table cells differ from the page), so when the whole quote is not found
as one run of text, its pieces are: clauses, then table cells, then runs of words — every rectangle found on the
page is highlighted and the result says how it was matched (``whole``, ``pieces``, or nothing found).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PAGE_ZOOM = 1.5  # 108 dpi: readable on a laptop screen, a few hundred KB per page
MAX_PAGE_PIXELS = 3_000  # the longer side of a page image: a 14,400 pt page is drawn smaller, not at 21,600 px
MIN_PIECE_CHARS = 8
WORDS_PER_PIECE = 5


@dataclass
class Rect:
    """A highlight in page fractions (0–1 from the top left), so it scales with the rendered image."""

    left: float
    top: float
    width: float
    height: float


@dataclass
class PageEvidence:
    page: int  # 1-based
    pages: int
    rects: list[Rect] = field(default_factory=list)
    match: str = "none"  # whole | pieces | none


def _pieces(quote: str) -> list[str]:
    """Parts of a quote that may each be found on the page when the whole is not."""
    parts = [p.strip(" *_|") for p in re.split(r"\s*(?:\||[;:]\s|,\s|\.\s|\n)\s*", quote)]
    pieces = [p for p in parts if len(p) >= MIN_PIECE_CHARS or re.fullmatch(r"[-−+]?\d[\d.,]*%?", p or "")]
    words = quote.replace("|", " ").replace("*", " ").split()
    for start in range(0, len(words), WORDS_PER_PIECE):
        run = " ".join(words[start : start + WORDS_PER_PIECE])
        if len(run) >= MIN_PIECE_CHARS:
            pieces.append(run)
    return list(dict.fromkeys(pieces))


def _find_pieces(page, pieces: list[str]) -> tuple[list, int]:  # page: a pymupdf.Page
    found, distinct = [], 0
    for piece in pieces:
        hits = page.search_for(piece)
        found += hits
        distinct += bool(hits)
    return found, distinct


def locate_quote(pdf: bytes, quote: str | None, page_hint: int | None, pieces: bool = True) -> PageEvidence:
    """The page to show — where the whole quote is (the graded page first), else where most of its pieces are, else
    the graded page or page 1 — and the quote's rectangles on it. ``pieces`` False: the whole quote or nothing (a
    quote the grader did not find in the document: its pieces would light up unrelated words — a surname in the
    references)."""
    import pymupdf

    with pymupdf.open(stream=pdf, filetype="pdf") as document:
        count = document.page_count
        order = list(range(count))
        if page_hint and 1 <= page_hint <= count:
            order.remove(page_hint - 1)
            order.insert(0, page_hint - 1)
        chosen, rects, how = order[0] if order else 0, [], "none"
        if quote:
            whole = " ".join(quote.split())
            for number in order:  # the whole quote: the graded page first
                found = document[number].search_for(whole)
                if found:
                    chosen, rects, how = number, found, "whole"
                    break
            else:  # its pieces: the page where most of them are (the graded page on a tie)
                parts, best = (_pieces(quote) if pieces else []), 0
                for number in order:
                    found, distinct = _find_pieces(document[number], parts)
                    if distinct > best:
                        chosen, rects, how, best = number, found, "pieces", distinct
        page = document[chosen]
        box = page.rect
        evidence = PageEvidence(
            page=chosen + 1,
            pages=count,
            rects=[_fractions(r, box) for r in rects],
            match=how,
        )
    return evidence


def _fractions(rect, box) -> Rect:
    return Rect(
        left=(rect.x0 - box.x0) / box.width,
        top=(rect.y0 - box.y0) / box.height,
        width=rect.width / box.width,
        height=rect.height / box.height,
    )


def page_words(pdf: bytes, number: int) -> list[dict]:
    """The words of one page (1-based) in reading order with their boxes in page fractions: the page's selectable
    text layer, from which a reviewer selects a value's quote."""
    import pymupdf

    with pymupdf.open(stream=pdf, filetype="pdf") as document:
        if not 1 <= number <= document.page_count:
            raise ValueError(f"no page {number} (the document has {document.page_count})")
        return _words(document[number - 1])


def _words(page) -> list[dict]:  # page: a pymupdf.Page
    import pymupdf

    words = page.get_text("words")  # (x0, y0, x1, y1, text, block, line, word): in reading order
    return [{"text": word[4], **vars(_fractions(pymupdf.Rect(word[:4]), page.rect))} for word in words]


def selected_evidence(pdf: bytes, number: int, first: int, last: int) -> PageEvidence:
    """The words a person selected on page ``number`` (``first``–``last`` of ``page_words``), lit up as they are."""
    import pymupdf

    with pymupdf.open(stream=pdf, filetype="pdf") as document:
        pages = document.page_count
        words = _words(document[number - 1]) if 1 <= number <= pages else []
    rects = [Rect(w["left"], w["top"], w["width"], w["height"]) for w in words[first : last + 1]]
    return PageEvidence(number if words else 1, pages, rects, "whole" if rects else "none")


MAX_FIND_HITS = 200


def find_in_document(pdf: bytes, query: str) -> list[dict]:
    """Find-in-document: every page where ``query`` is (case-insensitive, as PyMuPDF searches), with its hits'
    rectangles in page fractions; at most ``MAX_FIND_HITS`` hits in all."""
    import pymupdf

    query = " ".join(query.split())
    if not query:
        return []
    pages, hits = [], 0
    with pymupdf.open(stream=pdf, filetype="pdf") as document:
        for number in range(document.page_count):
            page = document[number]
            found = page.search_for(query)[: MAX_FIND_HITS - hits]
            if found:
                pages.append({"page": number + 1, "rects": [vars(_fractions(r, page.rect)) for r in found]})
                hits += len(found)
            if hits >= MAX_FIND_HITS:
                break
    return pages


ROTATIONS = (0, 90, 180, 270)


def render_page(pdf: bytes, number: int, zoom: float = 1.0, rotate: int = 0) -> bytes:
    """One page (1-based) as PNG, for paging through the document beside the evidence; ``rotate``: degrees
    clockwise (a landscape table read upright). Word boxes stay in the unrotated page's fractions: the viewer turns
    them with the image."""
    if rotate not in ROTATIONS:
        raise ValueError(f"a page turns by one of {', '.join(map(str, ROTATIONS))} degrees, not {rotate}")
    import pymupdf

    with pymupdf.open(stream=pdf, filetype="pdf") as document:
        if not 1 <= number <= document.page_count:
            raise ValueError(f"no page {number} (the document has {document.page_count})")
        page = document[number - 1]
        zoom = min(PAGE_ZOOM * zoom, MAX_PAGE_PIXELS / max(page.rect.width, page.rect.height, 1))
        try:  # the highlights are placed in shares of the page: any resolution keeps them in place
            return page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom).prerotate(rotate)).tobytes("png")
        except Exception as error:  # MuPDF's own errors: a short reason, not its traceback
            raise ValueError(f"page {number} could not be drawn ({type(error).__name__})") from None


_OPEN, _CLOSE = "\ue000", "\ue001"  # private-use marks of the quote's span, through the markdown renderer


def reader_html(text: str, start: int | None, end: int | None, quote: str | None) -> str:
    """A text document's markdown (JATS, HTML, text as parsed) rendered as the report reads — headings, paragraphs,
    lists, its tables as tables — with the quote's span in ``<mark>`` (each line and table cell of it marked on its
    own, so no mark crosses a block); raw HTML in the text is shown as text, never run; an image is its text."""
    from markdown_it import MarkdownIt

    text = text.replace(_OPEN, "").replace(_CLOSE, "")
    if start is None or end is None or not (0 <= start < end <= len(text)):
        found = text.find(quote) if quote else -1
        start, end = (found, found + len(quote or "")) if found >= 0 else (None, None)
    if start is not None and end is not None:
        pieces = re.split(r"(\n|\|)", text[start:end])
        marked = "".join(p if p in ("\n", "|") or not p.strip() else f"{_OPEN}{p}{_CLOSE}" for p in pieces)
        text = text[:start] + marked + text[end:]
    # no images: a picture in the text would make the reviewer's browser fetch it from its host
    rendered = MarkdownIt("commonmark", {"html": False}).enable("table").disable("image").render(text)
    rendered = rendered.replace(_OPEN, '<mark id="evidence">', 1).replace(_OPEN, "<mark>").replace(_CLOSE, "</mark>")
    return rendered
