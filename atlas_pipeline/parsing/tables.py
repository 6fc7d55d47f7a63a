"""Build ``Table`` objects from cell grids (PDF) or from HTML ``<table>`` elements (HTML, JATS)."""

from __future__ import annotations

import html
import re

from bs4 import BeautifulSoup, Tag

from atlas_pipeline.parsing.model import Table

_SPACE = re.compile(r"\s+")


def clean_cell(value: object) -> str:
    return _SPACE.sub(" ", str(value or "")).strip()


def rows_to_text(rows: list[list[str]]) -> str:
    """Plain text of a table for quote search: one row a line, cells separated by `` | ``."""
    return "\n".join(" | ".join(cell for cell in row) for row in rows if any(row))


def table_from_rows(
    rows: list[list[str]], *, index: int, page: int | None = None, caption: str = "", header_rows: int = 1
) -> Table:
    """A table from a grid of cell texts; the first ``header_rows`` rows become ``<th>`` cells."""
    grid = [[clean_cell(cell) for cell in row] for row in rows]
    width = max((len(row) for row in grid), default=0)
    parts = ["<table>"]
    if caption:
        parts.append(f"<caption>{html.escape(caption)}</caption>")
    for number, row in enumerate(grid):
        tag = "th" if number < header_rows else "td"
        cells = "".join(f"<{tag}>{html.escape(cell)}</{tag}>" for cell in row + [""] * (width - len(row)))
        parts.append(f"<tr>{cells}</tr>")
    parts.append("</table>")
    return Table(
        index=index,
        page=page,
        caption=caption,
        html="".join(parts),
        text=rows_to_text(grid),
        rows=len(grid),
        columns=width,
    )


def table_from_element(element: Tag, *, index: int, caption: str = "") -> Table:
    """A table from an HTML/JATS ``<table>`` element, kept as HTML (spans included) with its text."""
    rows = []
    for row in element.find_all("tr"):
        rows.append([clean_cell(cell.get_text(" ")) for cell in row.find_all(["th", "td"])])
    fragment = BeautifulSoup(str(element), "html.parser")
    for node in fragment.find_all(True):
        node.attrs = {k: v for k, v in node.attrs.items() if k in ("colspan", "rowspan", "scope")}
    table_html = str(fragment)
    if caption and "<caption" not in table_html:
        table_html = table_html.replace("<table>", f"<table><caption>{html.escape(caption)}</caption>", 1)
    return Table(
        index=index,
        caption=caption,
        html=table_html,
        text=rows_to_text(rows),
        rows=len(rows),
        columns=max((len(row) for row in rows), default=0),
    )
