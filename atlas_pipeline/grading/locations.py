"""Where quotes are searched, and where a person can see the evidence: the evidence scope of one document.

The scope is the document's markdown followed by the plain text of each table (one row a line). A quote found in the
markdown has its span in ``document.md`` and the page of its first character (from the parser's page markers); a
quote found in a table's text has the table's index (0-based, as in ``tables.json``), its row (1-based, the first row
being the header) and the table's page, and no markdown span — an offset past the end of ``document.md`` would open
nothing. A quote found on a markdown table line also gets the table and row when the tables have it. A quote that
starts in the reference list, a table of contents or a running header (``parsing.regions``) says which: it is in the
document, but it reports no study data.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from atlas_pipeline.grading.quotes import QuoteMatch, match_quote
from atlas_pipeline.grading.text import BOUNDARY_CHAR, tokenize
from atlas_pipeline.parsing.regions import non_study_regions, region_at

SEPARATOR = f"\n\n{BOUNDARY_CHAR}\n\n"


class TableLike(Protocol):
    text: str
    page: int | None


@dataclass(frozen=True, slots=True)
class Evidence:
    """A graded quote and where it is: a span in the markdown, or a table and row; the page when known."""

    match: QuoteMatch
    start: int | None = None  # span in document.md (end-exclusive)
    end: int | None = None
    page: int | None = None
    table: int | None = None  # index in tables.json
    row: int | None = None  # 1-based row of that table
    region: str = ""  # the non-study region the quote starts in (the reference list, …), else ""


class EvidenceScope:
    """The text one document's quotes are graded against (built once per document, reused for every field)."""

    def __init__(self, markdown: str, tables: Sequence[TableLike] = ()) -> None:
        self.markdown = markdown
        self.tables = list(tables)
        parts, self.table_starts = [markdown], []
        offset = len(markdown)
        for table in self.tables:
            offset += len(SEPARATOR)
            self.table_starts.append(offset)
            parts.append(table.text)
            offset += len(table.text)
        self.text = SEPARATOR.join(parts)  # a hard boundary: no quote runs from the text into a table
        self.regions = non_study_regions(markdown)

    def find(self, quote: str) -> Evidence:
        match = match_quote(quote, self.text)
        if match.start is None or match.end is None:
            return Evidence(match)
        if match.start < len(self.markdown):
            page = tokenize(self.text).page_of(match.start)
            table, row = self._table_row_of_markdown(quote, match.start)
            end = min(match.end, len(self.markdown))
            region = region_at(self.regions, match.start)
            return Evidence(match, match.start, end, page, table, row, region.kind if region else "")
        index = bisect.bisect_right(self.table_starts, match.start) - 1
        table_text = self.tables[index].text
        row = table_text[: match.start - self.table_starts[index]].count("\n") + 1
        return Evidence(match, None, None, self.tables[index].page, index, row)

    def _table_row_of_markdown(self, quote: str, start: int) -> tuple[int | None, int | None]:
        line_start = self.markdown.rfind("\n", 0, start) + 1
        if not self.markdown[line_start:start].lstrip().startswith("|") or not self.tables:
            return None, None
        for index, table in enumerate(self.tables):
            found = match_quote(quote, table.text)
            if found.tier == "verified" and found.start is not None:
                return index, table.text[: found.start].count("\n") + 1
        return None, None
