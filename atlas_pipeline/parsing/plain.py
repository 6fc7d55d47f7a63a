"""Markdown and plain text: kept as they are; markdown pipe tables also become ``Table`` objects."""

from __future__ import annotations

import re

from atlas_pipeline.parsing.html import decode_text
from atlas_pipeline.parsing.model import ParsedDocument, Table
from atlas_pipeline.parsing.tables import table_from_rows

_DIVIDER = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def markdown_tables(markdown: str) -> list[Table]:
    """Pipe tables (a header row, a ``---`` divider, body rows) found in markdown text."""
    lines = markdown.splitlines()
    tables: list[Table] = []
    number = 1
    while number < len(lines):
        if _DIVIDER.match(lines[number]) and "|" in lines[number - 1]:
            rows = [_cells(lines[number - 1])]
            end = number + 1
            while end < len(lines) and "|" in lines[end] and lines[end].strip():
                rows.append(_cells(lines[end]))
                end += 1
            tables.append(table_from_rows(rows, index=len(tables)))
            number = end
        number += 1
    return tables


def parse_plain(data: bytes, media_type: str) -> ParsedDocument:
    text = decode_text(data).replace("\r\n", "\n")
    tables = markdown_tables(text) if media_type == "text/markdown" else []
    return ParsedDocument(media_type=media_type, markdown=text, tables=tables, page_count=1, engine="plain text")
