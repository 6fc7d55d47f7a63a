"""HTML article pages → markdown and tables with BeautifulSoup.

Navigation, scripts, styles, forms and page chrome are dropped; headings, paragraphs, lists, tables and any other
text are kept in reading order. The page's declared charset is honoured (BeautifulSoup reads the bytes). Tables
stay HTML (they are already high fidelity) and also appear as their text in the markdown.
"""

from __future__ import annotations

import re

from bs4 import BeautifulSoup, CData, Comment, Declaration, Doctype, NavigableString, ProcessingInstruction, Tag

from atlas_pipeline.parsing.model import ParsedDocument, Table
from atlas_pipeline.parsing.tables import clean_cell, table_from_element

DROP = (
    "script",
    "style",
    "noscript",
    "nav",
    "header",
    "footer",
    "form",
    "button",
    "svg",
    "iframe",
    "aside",
    "template",
)
BLOCKS = ("p", "li", "blockquote", "pre", "dd", "dt", "figcaption", "caption", "summary")
INLINE = (
    "a",
    "abbr",
    "b",
    "bdi",
    "bdo",
    "cite",
    "code",
    "data",
    "del",
    "dfn",
    "em",
    "font",
    "i",
    "ins",
    "kbd",
    "label",
    "mark",
    "q",
    "s",
    "samp",
    "small",
    "span",
    "strong",
    "sub",
    "sup",
    "time",
    "tt",
    "u",
    "var",
    "wbr",
)
_NOT_TEXT = (Comment, Declaration, Doctype, ProcessingInstruction, CData)
HEADINGS = {f"h{level}": level for level in range(1, 7)}


def decode_text(data: bytes) -> str:
    for encoding in ("utf-8", "cp1252", "latin-1"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    return data.decode("utf-8", errors="replace")


def _caption_of(table: Tag) -> str:
    caption = table.find("caption")
    if caption:
        return clean_cell(caption.get_text(" "))
    wrapper = table.find_parent(["figure", "div"], class_=lambda c: c and "table" in " ".join(c).lower())
    if wrapper:
        label = wrapper.find(["figcaption", "header", "h2", "h3", "h4", "span", "p"])
        if label:
            return clean_cell(label.get_text(" "))[:300]
    return ""


def render_blocks(root: Tag, tables: list[Table]) -> list[str]:
    """Markdown blocks for everything readable below ``root``, in document order: headings, paragraphs, list items
    and tables as such, and text that sits in no block (a ``div``, a ``span``, a table-less layout) as paragraphs of
    its own — nothing readable is dropped, however short. Tables are appended to ``tables``."""
    blocks: list[str] = []
    inline: list[str] = []

    def flush() -> None:
        text = clean_cell(" ".join(inline))
        inline.clear()
        if text:
            blocks.append(text)

    def walk(node: Tag) -> None:
        for child in node.children:
            if isinstance(child, NavigableString):
                if not isinstance(child, _NOT_TEXT):
                    inline.append(str(child))
                continue
            if not isinstance(child, Tag):
                continue
            if child.name == "table":
                flush()
                table = table_from_element(child, index=len(tables), caption=_caption_of(child))
                tables.append(table)
                if table.caption:
                    blocks.append(f"**{table.caption}**")
                blocks.append(table.text)
            elif child.name in HEADINGS or child.name in BLOCKS:
                flush()
                text = clean_cell(child.get_text(" "))
                if text and child.name in HEADINGS:
                    blocks.append("#" * HEADINGS[child.name] + " " + text)
                elif text:
                    blocks.append(("- " if child.name == "li" else "") + text)
            elif child.name == "br":
                flush()
            elif child.name in INLINE:
                walk(child)
            else:  # div, section, article, figure, ul, dl, center, …: a block boundary around its content
                flush()
                walk(child)
                flush()

    walk(root)
    flush()
    return blocks


def parse_html(data: bytes) -> ParsedDocument:
    soup = BeautifulSoup(data, "lxml")  # bytes: BeautifulSoup honours the page's declared charset
    title = clean_cell(soup.title.get_text()) if soup.title else ""
    cited = _meta(soup, "citation_title")  # Highwire Press tags, as journals' article pages carry them
    authors = _meta(soup, "citation_author")
    dates = _meta(soup, "citation_publication_date") or _meta(soup, "citation_date")
    year = int(match.group(0)) if dates and (match := re.search(r"(19|20)\d\d", dates[0])) else None
    for tag in soup.find_all(DROP):
        tag.decompose()
    root = soup.find("article") or soup.find("main") or soup.body or soup
    tables: list[Table] = []
    blocks = render_blocks(root, tables)
    markdown = "\n\n".join(([f"# {title}"] if title else []) + blocks) + "\n"
    return ParsedDocument(
        media_type="text/html",
        markdown=markdown,
        tables=tables,
        page_count=1,
        engine="beautifulsoup4 (lxml)",
        title=cited[0] if cited else title,
        authors=authors,
        year=year,
    )


def _meta(soup: BeautifulSoup, name: str) -> list[str]:
    values = [clean_cell(str(tag.get("content") or "")) for tag in soup.find_all("meta", attrs={"name": name})]
    return [value for value in values if value]
