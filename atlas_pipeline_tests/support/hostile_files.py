"""Hostile and broken inputs the tests make themselves: each is what people really drop into a shared folder."""

from __future__ import annotations

import zlib

import pymupdf


def _pdf(objects: list[bytes | None], stream: bytes, stream_keys: bytes = b"") -> bytes:
    """A hand-written PDF: ``objects`` are the bodies of objects 1…n (None: the content stream)."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        if body is None:
            head = b"%d 0 obj\n<< %s/Length %d >>\nstream\n" % (number, stream_keys, len(stream))
            out += head + stream + b"\nendstream\nendobj\n"
        else:
            out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def page_tree_cycle_pdf() -> bytes:
    """Two pages in the page tree, the second of which is the tree itself: page 1 is readable, page 2 a cycle."""
    return _pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R 2 0 R] /Count 2 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
            b"/Resources << /Font << /F1 5 0 R >> >> >>",
            None,
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        ],
        b"BT /F1 12 Tf 72 720 Td (Mortality was lower in the treated group: p < 0.05.) Tj ET",
    )


def broken_jpeg_pdf() -> bytes:
    """A readable page of text next to an embedded JPEG whose data is not a JPEG."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "Results: the mean difference was -1.65 (95% CI -2.25 to -1.06).", fontsize=11)
    pixmap = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 64, 64), False)
    pixmap.clear_with(200)
    page.insert_image(pymupdf.Rect(72, 100, 200, 228), stream=pixmap.tobytes("jpeg"))
    doc = pymupdf.open(stream=doc.tobytes())
    for xref in range(1, doc.xref_length()):
        if doc.xref_get_key(xref, "Subtype")[1] == "/Image":
            doc.update_stream(xref, b"\xff\xd8\xff\xe0 not a jpeg " * 10, compress=False)
            doc.xref_set_key(xref, "Filter", "/DCTDecode")
    return doc.tobytes()


def text_pdf(text: str, pages: int = 1) -> bytes:
    """An ordinary small PDF with ``text`` on each of its pages."""
    doc = pymupdf.open()
    for _ in range(pages):
        doc.new_page().insert_text((72, 72), text, fontsize=11)
    return doc.tobytes()


def huge_page_pdf(lines: int = 6000, size: int = 14400) -> bytes:
    """One enormous page (``size`` pt square) holding ``lines`` lines of 2 pt text (66 kB): MuPDF's text-page
    building for the layout parse takes many minutes on it."""
    sentence = b"randomised participants received the intervention or placebo 0.42 0.31 " * 6
    rows = size // 3
    parts = [b"BT /F1 2 Tf"]
    for number in range(lines):
        x, y = 4 + (number // rows) * 1400, size - 4 - (number % rows) * 2.4
        parts.append(b"1 0 0 1 %d %.1f Tm (%s) Tj" % (x, y, sentence))
    parts.append(b"ET")
    stream = zlib.compress(b"\n".join(parts), 9)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>" % (size, size),
        None,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    return _pdf(objects, stream, b"/Filter /FlateDecode ")


def page_images(text: str, pages: int = 1, dpi: int = 200) -> list[pymupdf.Pixmap]:
    """Grayscale pictures of pages holding ``text`` (what a phone or a scanner makes of a printed page)."""
    pictures = []
    for number in range(pages):
        doc = pymupdf.open()
        page = doc.new_page(width=420, height=200)
        page.insert_text((24, 60), f"{text} Page {number + 1}.", fontsize=14)
        pictures.append(page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY))
    return pictures


def multipage_tiff(pictures: list[pymupdf.Pixmap]) -> bytes:
    """An uncompressed 8-bit grayscale TIFF with one page (IFD) per picture."""
    import struct

    out = bytearray(b"II*\x00\x00\x00\x00\x00")
    previous_link = 4
    for pixmap in pictures:
        strip = len(out)
        out += pixmap.samples
        resolution = len(out)
        out += struct.pack("<IIII", 200, 1, 200, 1)
        entries = [
            (256, 4, 1, pixmap.width),
            (257, 4, 1, pixmap.height),
            (258, 3, 1, 8),
            (259, 3, 1, 1),
            (262, 3, 1, 1),
            (273, 4, 1, strip),
            (277, 3, 1, 1),
            (278, 4, 1, pixmap.height),
            (279, 4, 1, len(pixmap.samples)),
            (282, 5, 1, resolution),
            (283, 5, 1, resolution + 8),
            (296, 3, 1, 2),
        ]
        if len(out) % 2:
            out += b"\x00"
        ifd = len(out)
        struct.pack_into("<I", out, previous_link, ifd)
        out += struct.pack("<H", len(entries))
        for tag, kind, count, value in entries:
            out += struct.pack("<HHI", tag, kind, count) + (
                struct.pack("<HH", value, 0) if kind == 3 else struct.pack("<I", value)
            )
        previous_link = len(out)
        out += b"\x00\x00\x00\x00"
    return bytes(out)
