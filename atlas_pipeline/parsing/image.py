"""Images are documents too: photographed or scanned pages (PNG, JPEG, TIFF — multi-page too —, GIF, BMP, WebP)
become image-only PDF pages and are read by OCR, exactly like a scanned PDF."""

from __future__ import annotations

import pymupdf

from atlas_pipeline.parsing.errors import UnreadableDocumentError
from atlas_pipeline.parsing.model import ParsedDocument
from atlas_pipeline.parsing.pdf import describe_error, parse_pdf

FORMATS = {  # media type → the file type MuPDF opens it as
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/tiff": "tiff",
    "image/gif": "gif",
    "image/bmp": "bmp",
    "image/webp": "webp",
}


def parse_image(data: bytes, media_type: str, *, ocr: bool = True, ocr_language: str = "eng") -> ParsedDocument:
    """OCR every page (frame) of an image; a ``DocumentError`` when it cannot be read or OCR is off."""
    if not ocr:
        raise UnreadableDocumentError("an image is read by OCR, and OCR is off (ATLAS_OCR=false)")
    try:
        with pymupdf.open(stream=data, filetype=FORMATS[media_type]) as image:
            pdf = image.convert_to_pdf()
    except Exception as error:
        raise UnreadableDocumentError(f"not a readable image: {describe_error(error)}") from error
    parsed = parse_pdf(pdf, ocr=True, ocr_language=ocr_language, ocr_max_text_chars=None)
    return parsed.model_copy(update={"media_type": media_type, "engine": f"{parsed.engine}, OCR of an image"})
