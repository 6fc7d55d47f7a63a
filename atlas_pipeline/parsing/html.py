"""HTML article pages → markdown and tables with BeautifulSoup.

Navigation, scripts, styles, forms and page chrome are dropped; headings, paragraphs, lists and tables are kept in
reading order. Tables stay HTML (they are already high fidelity) and also appear as their text in the markdown.
"""

from __future__ import annotations

from bs4 import BeautifulSoup, NavigableString, Tag

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
BLOCKS = ("p", "li", "blockquote", "pre", "dd", "dt", "figcaption")
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
    """Markdown blocks for the children of ``root`` in document order; tables are appended to ``tables``."""
    blocks: list[str] = []
    for node in root.descendants:
        if not isinstance(node, Tag):
            continue
        if any(parent.name in ("table", *BLOCKS, *HEADINGS) for parent in node.parents if parent is not root):
            continue
        if node.name == "table":
            table = table_from_element(node, index=len(tables), caption=_caption_of(node))
            tables.append(table)
            if table.caption:
                blocks.append(f"**{table.caption}**")
            blocks.append(table.text)
        elif node.name in HEADINGS:
            text = clean_cell(node.get_text(" "))
            if text:
                blocks.append("#" * HEADINGS[node.name] + " " + text)
        elif node.name in BLOCKS:
            text = clean_cell(node.get_text(" "))
            if text:
                blocks.append(("- " if node.name == "li" else "") + text)
    return blocks


def _loose_text(root: Tag) -> list[str]:
    """Text sitting directly in containers (no <p>): kept so nothing readable is lost."""
    out = []
    for node in root.find_all(string=True):
        if (
            isinstance(node, NavigableString)
            and node.parent
            and node.parent.name in ("div", "section", "article", "body")
        ):
            text = clean_cell(node)
            if len(text) > 40:
                out.append(text)
    return out


def parse_html(data: bytes) -> ParsedDocument:
    soup = BeautifulSoup(decode_text(data), "lxml")
    title = clean_cell(soup.title.get_text()) if soup.title else ""
    for tag in soup.find_all(DROP):
        tag.decompose()
    root = soup.find("article") or soup.find("main") or soup.body or soup
    tables: list[Table] = []
    blocks = render_blocks(root, tables)
    if not blocks:
        blocks = _loose_text(root)
    markdown = "\n\n".join(([f"# {title}"] if title else []) + blocks) + "\n"
    return ParsedDocument(
        media_type="text/html",
        markdown=markdown,
        tables=tables,
        page_count=1,
        engine="beautifulsoup4 (lxml)",
        title=title,
    )
