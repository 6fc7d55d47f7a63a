"""A page far larger than paper (14,400 pt a side, PDF's maximum) is drawn for the review page at a bounded size —
never a 21,600-pixel image or a MuPDF traceback; the quote highlights, placed in shares of the page, stay in place."""

from __future__ import annotations

import time

import pymupdf

from atlas_pipeline.review.evidence import MAX_PAGE_PIXELS, render_page


def test_a_huge_page_is_drawn_at_a_bounded_size():
    document = pymupdf.open()
    page = document.new_page(width=14_400, height=14_400)
    page.insert_text((100, 200), "We randomised 40 adults to juice or water.", fontsize=200)
    document.new_page(width=595, height=842).insert_text((72, 72), "an A4 page")
    data = document.tobytes()
    began = time.perf_counter()
    image = pymupdf.Pixmap(render_page(data, 1))
    assert max(image.width, image.height) <= MAX_PAGE_PIXELS and time.perf_counter() - began < 30
    a4 = pymupdf.Pixmap(render_page(data, 2))
    assert abs(a4.width - 595 * 1.5) <= 1 and abs(a4.height - 842 * 1.5) <= 1  # an ordinary page keeps 108 dpi
