"""Parts of a document's text that hold no study data: the reference list, a table of contents, running headers and
footers.

A quote found there is in the document, but it does not report the study: a name in the reference list is another
paper's author, a line of a running header is the journal's. Quote grading (``grading.locations``) asks where a quote
lies and never lets such a region support a value on its own. The reference list starts at its heading — a JATS
article's ``<ref-list>`` is not part of its text at all (``parsing.jats``), a PDF or HTML article has a heading
("References", "Bibliography", "Literature cited", …) — and ends at the next heading, table, figure or caption
(author manuscripts put their tables after the references).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

REFERENCES, CONTENTS, RUNNING_HEADER = "the reference list", "a table of contents", "a running header or footer"

_MARKUP = r"[#*_\s]*"
_NUMBERING = r"(?:\d{1,2}(?:\.\d{1,2})*\.?\s+|[IVX]{1,4}\.\s+)?"
_REFERENCES_HEADING = re.compile(
    rf"^{_MARKUP}{_NUMBERING}(?:references(?:\s+cited)?|bibliography|literature\s+cited|works\s+cited|"
    rf"reference\s+list|cited\s+literature){_MARKUP}:?{_MARKUP}$",
    re.IGNORECASE | re.MULTILINE,
)
_CONTENTS_HEADING = re.compile(
    rf"^{_MARKUP}(?:table\s+of\s+)?contents{_MARKUP}:?{_MARKUP}$", re.IGNORECASE | re.MULTILINE
)
# what ends a reference list or a table of contents: a heading, a table, a numbered figure or table caption, an
# appendix or supplementary section ("Figueroa M, …" or "Tablet …" in a reference are not captions)
_SECTION_END = re.compile(
    r"^(?:#{1,6}\s|\||[*_\s]*(?:Table|TABLE|Fig(?:ure)?|FIG(?:URE)?|Supplementary|SUPPLEMENTARY|Supporting|Appendix|"
    r"APPENDIX)\.?\s*(?:S?\d|[IVX]+\b|[A-Z]\b|material|information|data|files?)|[*_\s]*appendix\s*$)",
    re.MULTILINE,
)
_YEAR = re.compile(r"\b(?:19|20)\d\d\b")
_DOT_LEADER = re.compile(r"^[^\n]*?(?:\.\s?){4,}\s*\d+\s*$", re.MULTILINE)
_PAGE_MARKER = re.compile(r"<!--\s*page\s+\d+\s*-->")
_NOT_LETTERS = re.compile(r"[^a-z]+")
_EDGE_LINES = 2  # lines at the top and at the bottom of a page looked at for running headers and footers
_MIN_PAGES = 3  # a line on this many pages' edges is a running header or footer


@dataclass(frozen=True, slots=True)
class Region:
    """A span of the markdown (end-exclusive) that is not the study's own text, and what it is."""

    start: int
    end: int
    kind: str  # REFERENCES | CONTENTS | RUNNING_HEADER

    def holds(self, offset: int) -> bool:
        return self.start <= offset < self.end


def _section_after(markdown: str, heading: re.Match[str]) -> Region | None:
    end_match = _SECTION_END.search(markdown, heading.end() + 1)
    end = end_match.start() if end_match else len(markdown)
    return Region(heading.start(), end, "") if end > heading.start() else None


def reference_list(markdown: str) -> Region | None:
    """The reference list: from the last references heading followed by what references look like (years) to the
    next heading, table or caption (the last heading of any kind when none is)."""
    sections = []
    for heading in _REFERENCES_HEADING.finditer(markdown):
        found = _section_after(markdown, heading)
        if found is not None:
            sections.append(found)
    cited = [found for found in sections if len(_YEAR.findall(markdown[found.start : found.start + 3000])) >= 2]
    chosen = (cited or sections or [None])[-1]
    return Region(chosen.start, chosen.end, REFERENCES) if chosen else None


def _contents(markdown: str) -> list[Region]:
    regions = []
    for heading in _CONTENTS_HEADING.finditer(markdown):
        found = _section_after(markdown, heading)
        if found:
            regions.append(Region(found.start, found.end, CONTENTS))
    regions += [Region(m.start(), m.end(), CONTENTS) for m in _DOT_LEADER.finditer(markdown)]
    return regions


def _edge_lines(page: str, offset: int) -> list[tuple[int, int, str]]:
    """(start, end, letters) of the first and last few non-empty lines of one page's text."""
    lines = []
    position = 0
    for line in page.split("\n"):
        letters = _NOT_LETTERS.sub("", _PAGE_MARKER.sub("", line).lower())
        if letters:
            lines.append((offset + position, offset + position + len(line), letters))
        position += len(line) + 1
    if len(lines) <= 2 * _EDGE_LINES:
        return lines
    return lines[:_EDGE_LINES] + lines[-_EDGE_LINES:]


def _running_lines(markdown: str) -> list[Region]:
    """Lines whose letters recur at the top or bottom of at least three pages (page numbers differ) — every line
    with those letters, wherever it stands (page 1 often has the running line lower down)."""
    cuts = [m.start() for m in _PAGE_MARKER.finditer(markdown)]
    if len(cuts) < _MIN_PAGES:
        return []
    bounds = list(zip(cuts, [*cuts[1:], len(markdown)], strict=True))
    pages: dict[str, set[int]] = defaultdict(set)
    for number, (start, end) in enumerate(bounds):
        for line_start, line_end, letters in _edge_lines(markdown[start:end], start):
            if len(letters) >= 8 and not markdown[line_start:line_end].lstrip().startswith("|"):
                pages[letters].add(number)
    running = {letters for letters, found in pages.items() if len(found) >= _MIN_PAGES}
    if not running:
        return []
    regions, position = [], 0
    for line in markdown.split("\n"):
        is_row = line.lstrip().startswith("|")  # a table row repeated on many pages is data, not a running header
        if not is_row and _NOT_LETTERS.sub("", _PAGE_MARKER.sub("", line).lower()) in running:
            regions.append(Region(position, position + len(line), RUNNING_HEADER))
        position += len(line) + 1
    return regions


def non_study_regions(markdown: str) -> list[Region]:
    """Every part of ``markdown`` whose text reports no study data, in order."""
    regions = _contents(markdown) + _running_lines(markdown)
    references = reference_list(markdown)
    if references:
        regions.append(references)
    return sorted(regions, key=lambda region: (region.start, region.end))


def region_at(regions: list[Region], offset: int) -> Region | None:
    """The non-study region that holds ``offset``, if any."""
    return next((region for region in regions if region.holds(offset)), None)
