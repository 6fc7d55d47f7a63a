"""Parse any supported document into markdown and tables: ``parse_document(data, filename)``.

Usable without Dagster. Raises a ``DocumentError`` subclass (with ``status`` failed/skipped and a specific
``reason``) for unreadable, locked or unsupported input. The format modules (PyMuPDF and the layout model for PDF,
BeautifulSoup for HTML and JATS) are imported when a document of that kind is parsed, so importing this package —
for the errors, the options or media sniffing — stays light.
"""

from __future__ import annotations

import hashlib
import json
import re
from importlib.metadata import version
from typing import Literal

from atlas_pipeline.parsing.errors import (
    DocumentError,
    LockedDocumentError,
    UnreadableDocumentError,
    UnsupportedDocumentError,
)
from atlas_pipeline.parsing.media import HTML, IMAGE_TYPES, JATS, MARKDOWN, PDF, TEXT, detect_media_type
from atlas_pipeline.parsing.model import ParsedDocument, Table

PYMUPDF4LLM_VERSION = version("pymupdf4llm")

__all__ = [
    "DocumentError",
    "LockedDocumentError",
    "ParseOptions",
    "ParsedDocument",
    "Table",
    "UnreadableDocumentError",
    "UnsupportedDocumentError",
    "detect_media_type",
    "parse_document",
    "parser_fingerprint",
]

# Bump when a change to parsing changes its output: cached parses with another fingerprint are redone.
PARSER_REVISION = 7  # 2: page markers, unreadable glyphs as �; 3: pages salvaged one by one; 4: split accents;
# 5: TeX math fonts mapped; 6: JATS article ids; 7: engine auto (the layout model only on pages that need it)


PdfEngine = Literal["auto", "layout", "legacy"]


class ParseOptions(dict):
    """Options that change parse output (and so belong in the cache key). The defaults are defined here, once: the
    ``ATLAS_PDF_ENGINE`` and ``ATLAS_OCR*`` settings take theirs from this class."""

    def __init__(
        self,
        engine: PdfEngine = "auto",
        ocr: bool = True,
        ocr_language: str = "eng",
        ocr_max_text_chars: int | None = 200,  # pages with more text of their own are not OCR'd (None: always ask)
    ) -> None:
        super().__init__(engine=engine, ocr=ocr, ocr_language=ocr_language, ocr_max_text_chars=ocr_max_text_chars)


def parser_fingerprint(options: ParseOptions | None = None) -> str:
    """A short hash of everything that determines parse output: our revision, engine versions, options."""
    material = {
        "revision": PARSER_REVISION,
        "pymupdf4llm": PYMUPDF4LLM_VERSION,
        **(options or ParseOptions()),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:12]


def parse_document(data: bytes, filename: str, options: ParseOptions | None = None) -> ParsedDocument:
    """Parse ``data`` (named ``filename``) into markdown and tables, or raise a ``DocumentError``."""
    options = options or ParseOptions()
    media_type = detect_media_type(data, filename)
    try:
        return _parse(data, media_type, options)
    except DocumentError:
        raise
    except Exception as error:  # a library's own error is never the result: it becomes the document's reason
        message = re.sub(r"^code=\d+:\s*", "", str(error).strip()) or "no message"
        raise UnreadableDocumentError(f"could not be parsed ({type(error).__name__}: {message})") from error


def _parse(data: bytes, media_type: str, options: ParseOptions) -> ParsedDocument:
    if media_type == PDF:
        from atlas_pipeline.parsing.pdf import parse_pdf

        return parse_pdf(
            data,
            engine=options["engine"],
            ocr=options["ocr"],
            ocr_language=options["ocr_language"],
            ocr_max_text_chars=options["ocr_max_text_chars"],
        )
    if media_type in IMAGE_TYPES:
        from atlas_pipeline.parsing.image import parse_image

        return parse_image(data, media_type, ocr=options["ocr"], ocr_language=options["ocr_language"])
    if media_type == HTML:
        from atlas_pipeline.parsing.html import parse_html

        return parse_html(data)
    if media_type == JATS:
        from atlas_pipeline.parsing.jats import parse_jats

        return parse_jats(data)
    if media_type in (MARKDOWN, TEXT):
        from atlas_pipeline.parsing.plain import parse_plain

        return parse_plain(data, media_type)
    raise UnsupportedDocumentError(f"unsupported media type {media_type}")
