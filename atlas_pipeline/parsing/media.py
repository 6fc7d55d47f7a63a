"""Decide what a file really is from its bytes first and its name second."""

from __future__ import annotations

import posixpath

from atlas_pipeline.parsing.errors import UnreadableDocumentError, UnsupportedDocumentError

PDF = "application/pdf"
HTML = "text/html"
JATS = "application/jats+xml"
MARKDOWN = "text/markdown"
TEXT = "text/plain"
# images are read by OCR (parsing.image)
IMAGE_TYPES = ("image/png", "image/jpeg", "image/tiff", "image/gif", "image/bmp", "image/webp")
IMAGES = {
    b"\x89PNG": "image/png",
    b"\xff\xd8\xff": "image/jpeg",
    b"II*\x00": "image/tiff",
    b"MM\x00*": "image/tiff",
    b"GIF8": "image/gif",
    b"BM": "image/bmp",
}

_BY_EXTENSION = {
    ".pdf": PDF,
    ".html": HTML,
    ".htm": HTML,
    ".xhtml": HTML,
    ".nxml": JATS,
    ".xml": JATS,
    ".md": MARKDOWN,
    ".markdown": MARKDOWN,
    ".txt": TEXT,
    ".text": TEXT,
}
_BINARY_SIGNATURES = {
    b"PK\x03\x04": "a ZIP/Office file",
    b"\xd0\xcf\x11\xe0": "a legacy Office file",
    b"\x1f\x8b": "a gzip archive",
}


def _head_text(data: bytes) -> str:
    return data[:4096].decode("utf-8", errors="ignore").lstrip("\ufeff \t\r\n").lower()


def _looks_like_html(head: str) -> bool:
    return head.startswith("<!doctype html") or head.startswith("<html") or "<html" in head[:1024]


def _looks_like_jats(head: str) -> bool:
    return "<article" in head and ("jats" in head or "journalpublishing" in head or "article-type" in head)


def detect_media_type(data: bytes, filename: str) -> str:
    """The media type to parse ``data`` as, or a ``DocumentError`` saying why it cannot be parsed at all."""
    extension = posixpath.splitext(filename.lower())[1]
    claimed = _BY_EXTENSION.get(extension)
    if not data:
        raise UnreadableDocumentError("empty file (0 bytes)")
    if b"%PDF-" in data[:1024]:
        return PDF
    for signature, image_type in IMAGES.items():
        if data.startswith(signature) and (signature != b"BM" or extension == ".bmp"):
            return image_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    for signature, what in _BINARY_SIGNATURES.items():
        if data.startswith(signature):
            raise UnsupportedDocumentError(f"unsupported file type: {what} ({extension or 'no extension'})")
    head = _head_text(data)
    if claimed == PDF:
        if _looks_like_html(head):
            raise UnreadableDocumentError("not a PDF (HTML content)")
        raise UnreadableDocumentError("not a PDF (no %PDF- header)")
    if b"\x00" in data[:4096]:
        raise UnsupportedDocumentError(f"unsupported binary file ({extension or 'no extension'})")
    if _looks_like_jats(head) or (claimed == JATS and "<article" in head):
        return JATS
    if _looks_like_html(head) or claimed == HTML:
        return HTML
    if claimed in (MARKDOWN, TEXT):
        return claimed
    if claimed == JATS:
        raise UnsupportedDocumentError("XML that is not a JATS article")
    raise UnsupportedDocumentError(f"unsupported file type ({extension or 'no extension'})")
