"""Which PDF pages need the layout model, and the boxes of those that do not.

pymupdf-layout's model costs ~80% of a PDF parse and pays off on pages with tables, figures and unusual layout; most
pages of a paper are running text that PyMuPDF's own blocks describe well. ``triage_page`` decides per page from cheap
signals (a "Table N" caption, ruling lines, rows of aligned numbers, little or unreadable text, more than two
columns); ``text_boxes`` gives the other pages the same kind of classified boxes the model would (text,
section-header, list-item, page-header/footer, picture), so the one renderer writes every page — headings, lists,
two-column reading order and page markers do not depend on the path a page took.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass
from functools import cached_property

import pymupdf

LAYOUT = "layout"
TEXT = "text"

_CAPTION = re.compile(r"^\s*(table|tab\.)\s*[0-9ivxlc]+\b", re.IGNORECASE)
_NUMBER = re.compile(r"^[-−–+±<>≤≥=(\[]*\d[\d.,·]*%?[)\]]*[,;:]?$")
# a list item's first line: a bullet, or a number ("1." "2)" "[3]") followed by a space
_LIST_MARKER = re.compile(r"^(?:[•●▪■◦○∙·‣⁃]|\d{1,3}[.)](?:\s|$)|\[\d{1,3}\](?:\s|$))")
MIN_TEXT_CHARS = 80  # less text than this on a page: image-only or a figure page (OCR, pictures)
MAX_UNREADABLE_SHARE = 0.02  # more of the characters than this unreadable: let the model (and OCR) see it
MIN_NUMERIC_ROWS = 4  # rows of three or more cells, two of them numbers: a table
MIN_GRID_ROWS = 3  # rows of four or more cells: a table of words (running text gives two, one per column)
MIN_RULES = 10  # horizontal rules across a good part of the page: a ruled grid (a title page has up to ~6)
MAX_TEXT_LINES = 2000  # a page with more lines than this is no page of running text (a paper's has ~150)
MARGIN = 0.065  # top and bottom share of the page that holds running heads and page numbers


_FLAGS = pymupdf.TEXT_PRESERVE_LIGATURES | pymupdf.TEXT_PRESERVE_WHITESPACE | pymupdf.TEXT_MEDIABOX_CLIP


@dataclass
class PageView:
    """What triage and the text path read of a page: its text blocks (no images, no vectors: ~5 ms a page)."""

    page: pymupdf.Page
    blocks: list[dict]

    @classmethod
    def read(cls, page: pymupdf.Page) -> PageView:
        blocks = [block for block in page.get_text("dict", flags=_FLAGS)["blocks"] if block["type"] == 0]
        return cls(page, blocks)

    @cached_property
    def lines(self) -> list[tuple[pymupdf.Rect, list[dict]]]:
        """The page's lines that hold text (box, spans), read once for triage, body size and decorations."""
        return _lines(self.blocks)

    @property
    def characters(self) -> int:
        return sum(len(span["text"].strip()) for _, spans in self.lines for span in spans)

    @cached_property
    def drawings(self) -> list[pymupdf.Rect]:
        """Where the page's vector drawings are (lines, rectangles, curves)."""
        return [pymupdf.Rect(path["rect"]) for path in self.page.get_cdrawings()]

    @property
    def decorated(self) -> bool:
        """Whether a drawing touches a line of text: an underline, a strike-out, a highlight or a shaded box."""
        lines = [rect for rect, _ in self.lines]
        return any(drawing.intersects(line) for drawing in self.drawings for line in lines)


@dataclass(frozen=True)
class Triage:
    """Where a page goes and why (the why is recorded on the parse, for a person checking a page)."""

    route: str
    reason: str


def _lines(blocks: list[dict]) -> list[tuple[pymupdf.Rect, list[dict]]]:
    return [
        (pymupdf.Rect(line["bbox"]), line["spans"])
        for block in blocks
        if block["type"] == 0
        for line in block["lines"]
        if any(span["text"].strip() for span in line["spans"])
    ]


def _rows(lines: list[tuple[pymupdf.Rect, list[dict]]], width: float) -> list[list[str]]:
    """The page's text by row (spans sharing a baseline), each row cut into cells where a gap separates spans."""
    rows: dict[int, list[tuple[float, float, str]]] = {}
    for _, spans in lines:
        for span in spans:
            text = span["text"].strip()
            if text:
                rows.setdefault(round(span["origin"][1] / 2), []).append((span["bbox"][0], span["bbox"][2], text))
    gap = width * 0.02
    result = []
    for spans in rows.values():
        spans.sort()
        cells: list[list] = []
        for x0, x1, text in spans:  # spans close together are one cell
            if cells and x0 - cells[-1][1] < gap:
                cells[-1][1] = x1
                cells[-1][2] += " " + text
            else:
                cells.append([x0, x1, text])
        result.append([text for _, _, text in cells])
    return result


def _is_number(cell: str) -> bool:
    return all(_NUMBER.match(word) for word in cell.split())


def table_rows(lines: list[tuple[pymupdf.Rect, list[dict]]], width: float) -> tuple[int, int]:
    """(rows of three or more cells with at least two numbers, rows of four or more cells): table rows. Running
    text in two columns gives rows of two cells."""
    numeric = grid = 0
    for cells in _rows(lines, width):
        if len(cells) >= 3 and sum(1 for cell in cells if _is_number(cell)) >= 2:
            numeric += 1
        if len(cells) >= 4:
            grid += 1
    return numeric, grid


def _rules(view: PageView) -> int:
    """Horizontal lines (or thin filled rectangles) at least a third of the page wide, outside the margins."""
    width, height = view.page.rect.width, view.page.rect.height
    return sum(
        1
        for rect in view.drawings
        if rect.height <= 2.5 and rect.width >= width / 3 and height * MARGIN < rect.y0 < height * (1 - MARGIN)
    )


def _columns(lines: list[tuple[pymupdf.Rect, list[dict]]], width: float) -> int:
    """How many text columns the page's long lines start in (x positions of line starts, clustered)."""
    starts = Counter(round(rect.x0 / (width * 0.05)) for rect, _ in lines if rect.width > width * 0.15)
    common = [x for x, n in starts.items() if n >= 5]
    common.sort()
    columns = 0
    previous = None
    for x in common:
        if previous is None or x - previous > 2:
            columns += 1
        previous = x
    return columns


def triage_page(view: PageView) -> Triage:
    """Send a page to the layout model or the text path."""
    page = view.page
    lines = view.lines
    text = "".join(span["text"] for _, spans in lines for span in spans)
    characters = len(text.strip())
    if characters < MIN_TEXT_CHARS:
        return Triage(LAYOUT, "little or no text layer")
    if len(lines) > MAX_TEXT_LINES:
        return Triage(LAYOUT, "too many lines for the text path")
    unreadable = sum(1 for c in text if c == "\ufffd" or (ord(c) < 32 and c not in "\t\n"))
    if unreadable / characters > MAX_UNREADABLE_SHARE:
        return Triage(LAYOUT, "unreadable characters")
    for _, spans in lines:
        if _CAPTION.match("".join(span["text"] for span in spans)):
            return Triage(LAYOUT, "a table caption")
    width = page.rect.width
    numeric, grid = table_rows(lines, width)
    if numeric >= MIN_NUMERIC_ROWS:
        return Triage(LAYOUT, "rows of numbers")
    if grid >= MIN_GRID_ROWS:
        return Triage(LAYOUT, "rows of cells")
    if _rules(view) >= MIN_RULES:
        return Triage(LAYOUT, "ruling lines")
    if _columns(lines, width) > 2:
        return Triage(LAYOUT, "more than two columns")
    return Triage(TEXT, "running text")


def body_size(views: list[PageView]) -> float:
    """The font size most of a document's characters are set in: its running text (per document, not per page — a
    page of small-print references would make its larger text look like headings)."""
    sizes: Counter[float] = Counter()
    for view in views:
        for _, spans in view.lines:
            for span in spans:
                sizes[round(span["size"], 1)] += len(span["text"])
    return sizes.most_common(1)[0][0] if sizes else 10.0


def _is_bold(span: dict) -> bool:
    return bool(span["flags"] & pymupdf.TEXT_FONT_BOLD) or "bold" in span["font"].lower()


def _spans(line: dict) -> list[dict]:
    return [span for span in line["spans"] if span["text"].strip()]


def _line_text(line: dict) -> str:
    return "".join(span["text"] for span in line["spans"]).strip()


def _heading_like(line: dict, body: float) -> bool:
    """A short line set apart by its font: larger than the body text, or all bold."""
    spans = _spans(line)
    text = _line_text(line)
    if not spans or len(text) > 120 or text.endswith((",", ";")):
        return False
    return max(span["size"] for span in spans) >= body + 1.5 or all(_is_bold(span) for span in spans)


def _list_start(line: dict) -> bool:
    return bool(_LIST_MARKER.match(_line_text(line)))


def _pitch(lines: list[dict]) -> float:
    """The usual distance between the tops of consecutive lines of a block (its line spacing)."""
    steps = sorted(b["bbox"][1] - a["bbox"][1] for a, b in itertools.pairwise(lines))
    steps = [step for step in steps if step > 0]
    if steps:
        return steps[len(steps) // 2]
    return max((line["bbox"][3] - line["bbox"][1] for line in lines), default=10.0) * 1.2


def _size(line: dict) -> float:
    return max((span["size"] for span in _spans(line)), default=0.0)


def _continues(previous: list[dict], block: list[dict], width: float) -> bool:
    """Whether ``block``'s lines carry on ``previous``'s paragraph: same column, the next line down at the usual
    line spacing, the same type size (PyMuPDF makes a block of each line of loosely set text)."""
    last, first = previous[-1], block[0]
    same_column = abs(first["bbox"][0] - previous[0]["bbox"][0]) <= 0.02 * width
    step = first["bbox"][1] - last["bbox"][1]
    return same_column and 0 < step <= 1.4 * _pitch(previous) and abs(_size(first) - _size(last)) < 0.6


def _paragraph_blocks(blocks: list[dict], width: float) -> list[list[dict]]:
    """The page's lines by block, consecutive blocks that continue one paragraph joined."""
    merged: list[list[dict]] = []
    for block in blocks:
        lines = [line for line in block["lines"] if _spans(line)]
        if not lines:
            continue
        if merged and _continues(merged[-1], lines, width):
            merged[-1].extend(lines)
        else:
            merged.append(lines)
    return merged


def _segments(lines: list[dict], body: float) -> list[list[dict]]:
    """A block's lines cut into paragraphs: PyMuPDF often puts a heading, list items or two paragraphs in one
    block. A cut where the space to the next line is well above the block's line spacing, before a list item
    whose previous line ended short, and after the heading lines that open a paragraph."""
    pitch = _pitch(lines)
    right = max(line["bbox"][2] for line in lines)
    width = right - min(line["bbox"][0] for line in lines)
    paragraphs: list[list[dict]] = [[lines[0]]]
    for previous, line in itertools.pairwise(lines):
        spaced = line["bbox"][1] - previous["bbox"][1] > 1.4 * pitch
        ended_short = previous["bbox"][2] < right - 0.1 * width
        if spaced or (_list_start(line) and (ended_short or _list_start(paragraphs[-1][0]))):
            paragraphs.append([line])
        else:
            paragraphs[-1].append(line)
    segments = []
    for paragraph in paragraphs:
        lead = 0
        while (
            lead < min(3, len(paragraph))
            and _heading_like(paragraph[lead], body)
            and abs(_size(paragraph[lead]) - _size(paragraph[0])) < 0.6  # one heading is set in one size
        ):
            lead += 1
        if 0 < lead < len(paragraph):  # a heading on its own line(s) above the paragraph's text
            segments.extend([paragraph[:lead], paragraph[lead:]])
        else:
            segments.append(paragraph)
    return segments


def _classify(lines: list[dict], page: pymupdf.Rect, body: float) -> str:
    rect = pymupdf.Rect(lines[0]["bbox"])
    for line in lines[1:]:
        rect |= line["bbox"]
    if rect.y1 <= page.height * MARGIN:
        return "page-header"
    if rect.y0 >= page.height * (1 - MARGIN):
        return "page-footer"
    if _list_start(lines[0]):
        return "list-item"
    if len(lines) <= 3 and all(_heading_like(line, body) for line in lines):
        text = " ".join(_line_text(line) for line in lines)
        if not text.endswith(".") or len(text) <= 40:
            return "section-header"
    return "text"


def _one_heading(above: list[dict], below: list[dict]) -> bool:
    """A heading set over two blocks (a long title): the same type size, the next line straight below."""
    last, first = above[-1], below[0]
    step = first["bbox"][1] - last["bbox"][1]
    return abs(_size(first) - _size(last)) < 0.6 and 0 < step <= 1.6 * (last["bbox"][3] - last["bbox"][1])


def text_boxes(view: PageView, body: float) -> list[dict]:
    """Boxes in the shape of pymupdf-layout's raw output (``group_bbox``, ``class_name``): PyMuPDF's blocks cut
    into paragraphs, headings and list items (``body``: the document's running-text font size)."""
    segments: list[tuple[list[dict], str]] = []
    for block in _paragraph_blocks(view.blocks, view.page.rect.width):
        for lines in _segments(block, body):
            kind = _classify(lines, view.page.rect, body)
            if segments and kind == segments[-1][1] == "section-header" and _one_heading(segments[-1][0], lines):
                segments[-1][0].extend(lines)
            else:
                segments.append((lines, kind))
    placed: list[tuple[pymupdf.Rect, str]] = []
    for lines, kind in segments:
        rect = pymupdf.Rect(lines[0]["bbox"])
        for line in lines[1:]:
            rect |= line["bbox"]
        placed.append((rect, kind))
    return [{"group_bbox": tuple(rect), "class_name": kind} for rect, kind in _without_overlaps(placed)]


def _without_overlaps(boxes: list[tuple[pymupdf.Rect, str]]) -> list[tuple[pymupdf.Rect, str]]:
    """Boxes that overlap joined into one: the renderer takes a span into every box holding most of it, so two
    overlapping boxes would print the same words twice (a heading beside a title on one baseline, say)."""
    result: list[tuple[pymupdf.Rect, str]] = []
    for rect, kind in boxes:
        rect = pymupdf.Rect(rect)
        merged = True
        while merged:
            merged = False
            for index, (other, other_kind) in enumerate(result):
                common = rect & other
                if not common.is_empty and common.get_area() > 0.1 * min(rect.get_area(), other.get_area()):
                    rect |= other
                    kind = kind if kind == other_kind else "text"
                    del result[index]
                    merged = True
                    break
        result.append((rect, kind))
    return result
