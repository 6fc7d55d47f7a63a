"""JATS XML (PubMed Central ``.nxml``) → markdown and tables, following the article's own structure."""

from __future__ import annotations

import re

from bs4 import BeautifulSoup, Tag

from atlas_pipeline.parsing.errors import UnreadableDocumentError
from atlas_pipeline.parsing.model import ParsedDocument, Table
from atlas_pipeline.parsing.tables import clean_cell, table_from_element


def _text(node: Tag | None) -> str:
    return clean_cell(node.get_text(" ")) if node else ""


def _section(sec: Tag, level: int, tables: list[Table], out: list[str]) -> None:
    title = sec.find("title", recursive=False)
    if title:
        out.append("#" * min(level, 6) + " " + _text(title))
    for child in sec.children:
        if not isinstance(child, Tag):
            continue
        if child.name == "sec":
            _section(child, level + 1, tables, out)
        elif child.name == "p":
            _paragraph(child, tables, out)
        elif child.name == "table-wrap":
            _table_wrap(child, tables, out)
        elif child.name in ("list", "disp-quote", "boxed-text"):
            out.append(_text(child))


def _paragraph(p: Tag, tables: list[Table], out: list[str]) -> None:
    nested = p.find_all("table-wrap")
    for wrap in nested:
        wrap.extract()
    text = _text(p)
    if text:
        out.append(text)
    for wrap in nested:
        _table_wrap(wrap, tables, out)


def _table_wrap(wrap: Tag, tables: list[Table], out: list[str]) -> None:
    label = _text(wrap.find("label"))
    caption = " ".join(part for part in (label, _text(wrap.find("caption"))) if part)
    element = wrap.find("table")
    if element is None:  # graphic-only table: nothing to read but its caption
        if caption:
            out.append(f"**{caption}** (table available only as an image)")
        return
    table = table_from_element(element, index=len(tables), caption=caption)
    tables.append(table)
    if caption:
        out.append(f"**{caption}**")
    out.append(table.text)
    footnotes = _text(wrap.find("table-wrap-foot"))
    if footnotes:
        out.append(footnotes)


_DOCTYPE = re.compile(rb"<!DOCTYPE\b[^\[>]*(\[(?P<subset>.*?)\])?\s*>", re.S | re.I)
_ENTITY = re.compile(rb"<!ENTITY\s+(?P<name>[\w.-]+)\s+(?P<quote>[\"'])(?P<value>[^<&\"']*)(?P=quote)\s*>")


def without_internal_subset(data: bytes) -> bytes:
    """The XML with its DOCTYPE's internal subset removed (the XML parser gives up on some of them), its simple
    text entities (``<!ENTITY ndash "&#x2013;">``) expanded once; external entities are never read."""
    match = _DOCTYPE.search(data[:65536])
    if match is None or match.group("subset") is None:
        return data
    entities = {m.group("name"): m.group("value") for m in _ENTITY.finditer(match.group("subset"))}
    body = data[match.end() :]
    for name, value in entities.items():
        body = body.replace(b"&" + name + b";", value)
    return data[: match.start()] + body


_ID_LABELS = {"doi": "DOI", "pmc": "PMCID", "pmcid": "PMCID", "pmid": "PMID"}


def _article_ids(article: Tag) -> str:
    """The article's own identifiers as one line ("DOI: 10.… · PMCID: PMC… · PMID: …"): the text then names the
    work as its PDF does in its header, for identifier-based duplicate recognition and for extraction."""
    meta = article.find("article-meta")
    parts = []
    for node in meta.find_all("article-id", recursive=False) if meta else []:
        label = _ID_LABELS.get((node.get("pub-id-type") or "").lower())
        value = _text(node)
        if label and value:
            if label == "PMCID" and not value.upper().startswith("PMC"):
                value = f"PMC{value}"
            parts.append(f"{label}: {value}")
    return " · ".join(dict.fromkeys(parts))


def parse_jats(data: bytes) -> ParsedDocument:
    soup = BeautifulSoup(without_internal_subset(data), "lxml-xml")
    article = soup.find("article")
    if article is None:
        raise UnreadableDocumentError("not a JATS article (no <article> element)")
    out: list[str] = []
    tables: list[Table] = []
    title = _text(article.find("article-title"))
    if title:
        out.append(f"# {title}")
    ids = _article_ids(article)
    if ids:
        out.append(ids)
    abstract = article.find("abstract")
    if abstract:
        out.append("## Abstract")
        for sec in abstract.find_all("sec", recursive=False) or [abstract]:
            if sec is abstract:
                out.extend(_text(p) for p in abstract.find_all("p"))
            else:
                _section(sec, 3, tables, out)
    body = article.find("body")
    if body:
        for child in body.children:
            if isinstance(child, Tag) and child.name == "sec":
                _section(child, 2, tables, out)
            elif isinstance(child, Tag) and child.name == "p":
                _paragraph(child, tables, out)
            elif isinstance(child, Tag) and child.name == "table-wrap":
                _table_wrap(child, tables, out)
    floats = article.find("floats-group")
    if floats:
        for wrap in floats.find_all("table-wrap"):
            _table_wrap(wrap, tables, out)
    markdown = "\n\n".join(part for part in out if part) + "\n"
    return ParsedDocument(
        media_type="application/jats+xml",
        markdown=markdown,
        tables=tables,
        page_count=1,
        engine="beautifulsoup4 (lxml-xml, JATS)",
        title=title,
        authors=_authors(article),
        year=_year(article),
    )


def _authors(article: Tag) -> list[str]:
    """The article's authors as its front matter names them (given names, then surname)."""
    names = []
    meta = article.find("article-meta") or article
    for contrib in meta.find_all("contrib", attrs={"contrib-type": "author"}):
        name = contrib.find("name")
        if name is None:
            collab = contrib.find("collab")
            if collab is not None:
                names.append(_text(collab))
            continue
        names.append(" ".join(filter(None, [_text(name.find("given-names")), _text(name.find("surname"))])))
    return [name for name in names if name]


def _year(article: Tag) -> int | None:
    """The year of publication (the first ``pub-date`` with a year: epub, ppub or collection)."""
    meta = article.find("article-meta") or article
    for date in meta.find_all("pub-date"):
        year = _text(date.find("year"))
        if year.isdigit():
            return int(year)
    return None
