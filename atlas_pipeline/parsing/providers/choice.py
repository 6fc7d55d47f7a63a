"""Which provider parses which document: the local parser for everything, or a provider for PDFs and images —
for the whole parse (``ATLAS_PARSER``) or for their tables only (``ATLAS_TABLES_PARSER``)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from atlas_pipeline.parsing.media import PDF
from atlas_pipeline.parsing.providers.base import ParsingProvider
from atlas_pipeline.parsing.providers.local import LocalParser


@dataclass(frozen=True)
class ParserChoice:
    local: LocalParser
    text: ParsingProvider | None = None  # parses PDFs and images instead of the local parser
    tables: ParsingProvider | None = None  # gives the tables of PDFs and images; the text stays the text parser's

    def text_provider(self, media_type: str | None) -> ParsingProvider:
        return self.text if self.text is not None and self.text.accepts(media_type) else self.local

    def tables_provider(self, media_type: str | None) -> ParsingProvider | None:
        if self.tables is None or not self.tables.accepts(media_type):
            return None
        return None if self.tables.name == self.text_provider(media_type).name else self.tables

    def fingerprint(self, media_type: str | None) -> str:
        """The parser fingerprint of a document of this type: the local parser's own when it does the whole parse
        (so choosing a provider never re-parses HTML or text), else a hash over the providers involved."""
        text, tables = self.text_provider(media_type), self.tables_provider(media_type)
        if text is self.local and tables is None:
            return self.local.fingerprint()
        parts = [f"text={text.name}:{text.fingerprint()}"]
        if tables is not None:
            parts.append(f"tables={tables.name}:{tables.fingerprint()}")
        return hashlib.sha256("|".join(parts).encode()).hexdigest()[:12]

    def describe(self) -> str:
        """For the extraction version and the UI: who parses a PDF, and its fingerprint."""
        text, tables = self.text_provider(PDF), self.tables_provider(PDF)
        label = text.name + (f"+tables:{tables.name}" if tables else "")
        return f"{label}:{self.fingerprint(PDF)}"

    def summary(self) -> str:
        """One line for people (``atlas run``): who parses PDFs and images, and where."""

        def named(provider: ParsingProvider) -> str:
            where = getattr(provider, "url", "")
            return f"{provider.name} at {where}" if where else f"{provider.name} (here)"

        text, tables = self.text_provider(PDF), self.tables_provider(PDF)
        line = f"PDFs and images: {named(text)}" + (f", tables: {named(tables)}" if tables else "")
        return line if text is self.local and tables is None else line + "; HTML, JATS and text here"
