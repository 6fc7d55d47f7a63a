"""What a document says it is — title, authors, year — read from its first page, for people to recognise it by.

A PDF's metadata title is often a typesetter's file name ("1475-2891-4-23.fm") or "Microsoft Word - draft3.doc": it
is used only when it reads as a title. Otherwise the title is the first heading of the first page that reads as a
sentence (not a journal's name), or, for a PDF whose title is set in bold within a paragraph, the run of the largest
type on page 1 that does. The authors are the names right after the title; the year is the first plausible year on
the first page: the latest it states as the paper's ("© 2012", "Published: 3 May 2013"), else the latest it names (the
studies it cites are older than it). A title guessed from OCR text is not trusted ("FORWARD, LOCATE be touch"): when
the first page was read by OCR, only the metadata title is used, else none (people know the document by its file name).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date

FIRST_PAGE_CHARS = 4000
MIN_TITLE_WORDS = 4
MAX_AUTHORS = 60
_FILE_LIKE = re.compile(r"(?i)(\.(fm|docx?|pdf|tex|indd|qxd|rtf|txt)\b|^microsoft word|^untitled|^[\w\-.]+$)")
_TAGS = re.compile(r"<[^>]+>")
_SUPERSCRIPT = re.compile(r"<sup>.*?</sup>", re.S)
_HEADING = re.compile(r"^#{1,3}\s+(.+?)\s*$", re.M)
_YEAR = re.compile(r"(?<![\d.])(19[5-9]\d|20[0-4]\d)(?![\d.])")
_NAME = re.compile(r"^[A-ZÀ-Ý][\w'’.\-À-ÿ]*(?:\s+[A-Za-zÀ-ÿ][\w'’.\-À-ÿ]*){1,4}$")


@dataclass
class Citation:
    title: str = ""
    authors: list[str] = field(default_factory=list)
    year: int | None = None

    def short_authors(self) -> str:
        return short_authors(self.authors)


_SUFFIXES = frozenset({"jr", "jr.", "sr", "sr.", "ii", "iii", "iv"})


def short_authors(authors: list[str]) -> str:
    """Two surnames and "et al." ("Valois, Costa-Ribeiro et al."): what a list has room for ("Jr" left out)."""
    surnames = []
    for name in authors[:2]:
        words = [word for word in name.split() if word.lower() not in _SUFFIXES] or name.split()
        surnames.append(words[-1])
    return ", ".join(surnames) + (" et al." if len(authors) > 2 else "")


def _plain(text: str) -> str:
    text = _SUPERSCRIPT.sub("", text)
    text = _TAGS.sub("", text).replace("**", "").replace("__", "").replace("*", "")
    return " ".join(text.split()).strip(" .")


_MASTHEAD_WORDS = frozenset(
    {"research", "article", "open", "access", "original", "paper", "study", "protocol", "methodology", "short"}
    | {"report", "brief", "communication", "letter", "review", "editorial", "debate", "commentary"}
)
_JOURNAL = re.compile(r"(?i)^(bmc|plos|the lancet|jama|bmj|nature|science)\b|\bjournal\b")


def reads_as_title(text: str) -> bool:
    """A run of words that could be a paper's title: long enough, not a file name, not a journal's masthead
    ("RESEARCH ARTICLE Open Access", "BMC Health Services Research")."""
    words = text.split()
    if len(words) < MIN_TITLE_WORDS or len(text) > 400 or _FILE_LIKE.search(text.strip()):
        return False
    if all(word.lower().strip(":|") in _MASTHEAD_WORDS for word in words):
        return False
    return not (len(words) <= 6 and _JOURNAL.search(text))


def authors_in(text: str) -> list[str]:
    """The names in an author line ("A. Smith<sup>1</sup>, B. Jones<sup>2*</sup> and C. Wu"), or [] when the line
    does not read as one (an affiliation, the abstract)."""
    plain = _plain(text)
    if (
        not plain
        or len(plain) > 1500
        or re.search(r"(?i)\b(university|department|hospital|abstract|background)\b", plain)
    ):
        return []
    parts = [p.strip(" ,;*†‡§0123456789") for p in re.split(r"\s*(?:,|;|\band\b|&)\s*", plain)]
    names = [p for p in parts if p]
    if not names or len(names) > MAX_AUTHORS or not all(_NAME.match(name) for name in names):
        return []
    return names


_STATED_YEAR = re.compile(
    r"(?i)(?:©|\(c\)|copyright|published(?: online)?:?|accepted:?|epub)\D{0,40}?(19[5-9]\d|20[0-4]\d)(?!\d)"
)


def _year(first_page: str) -> int | None:
    """A year the first page states as the paper's (©, published, accepted), else the latest year it names (the
    studies it cites are older than it)."""
    latest = date.today().year + 1
    stated = [int(m.group(1)) for m in _STATED_YEAR.finditer(first_page) if int(m.group(1)) <= latest]
    if stated:
        return max(stated)
    years = [int(m.group(1)) for m in _YEAR.finditer(first_page) if int(m.group(1)) <= latest]
    return max(years) if years else None


def citation_from_text(markdown: str, metadata_title: str = "", bold_title: str = "", *, ocr: bool = False) -> Citation:
    """Title, authors and year from the start of the document's markdown (``metadata_title``: the file's own
    title field; ``bold_title``: a PDF's largest type on page 1, when no heading reads as a title; ``ocr``: the first
    page's text came from OCR, so neither a heading nor the largest type is taken for the title)."""
    first = markdown[:FIRST_PAGE_CHARS]
    title, after = "", ""
    for match in () if ocr else _HEADING.finditer(first):
        candidate = _plain(match.group(1))
        if reads_as_title(candidate):
            title, after = candidate, first[match.end() :]
            break
    if not title and bold_title and not ocr and reads_as_title(bold_title):
        title = bold_title
        pattern = r"[\s*_]+".join(re.escape(word) for word in bold_title.split())
        found = re.search(pattern + r"[\s*_]*", first)
        after = first[found.end() :] if found else ""
    if not title and reads_as_title(_plain(metadata_title)):
        title = _plain(metadata_title)
    authors: list[str] = []
    for paragraph in re.split(r"\n\s*\n", after)[:3]:
        line = paragraph.split("\n", 1)[0] if paragraph.strip().startswith("#") else paragraph
        authors = authors_in(line.split(" Address:")[0])
        if authors:
            break
    return Citation(title=title, authors=authors, year=_year(first))


def largest_type_on_first_page(document) -> str:  # document: a pymupdf.Document
    """The text set in the largest type on page 1 that reads as a title (a masthead's two words do not)."""
    if document.page_count == 0:
        return ""
    sizes: dict[float, list[str]] = {}
    for block in document[0].get_text("dict").get("blocks", []):
        for line in block.get("lines", []):
            for span in line.get("spans", []):
                text = span.get("text", "").strip()
                if text:
                    sizes.setdefault(round(span.get("size", 0), 1), []).append(text)
    for size in sorted(sizes, reverse=True):
        text = re.sub(r"(\w)- (\w)", r"\1-\2", " ".join(" ".join(sizes[size]).split()))  # "Purchase- Specific"
        if reads_as_title(text):
            return text
    return ""
