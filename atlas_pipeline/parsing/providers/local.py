"""The default provider: pymupdf4llm (and tesseract for image-only pages) here on the CPU, with the parse limits of
``parsing.bounded``. It reads every supported kind of document, HTML, JATS and text included."""

from __future__ import annotations

from typing import ClassVar

from atlas_pipeline.parsing import ParseOptions, parse_document, parser_fingerprint
from atlas_pipeline.parsing.bounded import ParseLimits, parse_bounded
from atlas_pipeline.parsing.model import ParsedDocument
from atlas_pipeline.parsing.providers.base import ParsingProvider


class LocalParser(ParsingProvider):
    name = "pymupdf4llm"
    media_types: ClassVar[frozenset[str]] = frozenset()  # all: see ``accepts``

    def __init__(self, options: ParseOptions | None = None, limits: ParseLimits | None = None) -> None:
        super().__init__()
        self.parse_options = options or ParseOptions()
        self.bounds = limits

    def fingerprint(self) -> str:
        return parser_fingerprint(self.parse_options)

    def accepts(self, media_type: str | None) -> bool:
        return True

    def parse(self, data: bytes, filename: str, media_type: str) -> ParsedDocument:
        if self.bounds is None:
            return parse_document(data, filename, self.parse_options)
        return parse_bounded(
            data, filename, self.parse_options, seconds=self.bounds.seconds, memory_mb=self.bounds.memory_mb
        )
