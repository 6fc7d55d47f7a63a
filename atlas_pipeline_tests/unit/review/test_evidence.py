"""Where a quote is shown on the PDF page, and the paper's words and find for the review page's viewer."""

from atlas_pipeline.review.evidence import find_in_document, locate_quote, page_words
from atlas_pipeline_tests.support.corpus import corpus_file

JUICE = "rct/PMC1216327.pdf"


def test_a_quote_not_in_the_document_lights_up_nothing():
    pdf = corpus_file(JUICE).read_bytes()
    invented = "Valois et al. found a hazard ratio of 0.42 for death in the juice arm"
    assert locate_quote(pdf, invented, None, pieces=False).rects == []
    assert locate_quote(pdf, invented, None, pieces=False).match == "none"
    whole = locate_quote(pdf, "30 were given colored and flavored water (WA)", None, pieces=False)
    assert whole.match == "whole" and whole.page == 1 and whole.rects


def test_the_viewer_gets_every_pages_words_and_finds_across_pages():
    pdf = corpus_file(JUICE).read_bytes()
    words = page_words(pdf, 4)
    texts = [w["text"] for w in words]
    start = texts.index("Age")
    assert texts[start : start + 8] == ["Age", "(months)", "10.27", "4.75", "10.27", "4.14", "11.09", "4.00"]
    assert all(0 <= w["left"] <= 1 and 0 <= w["top"] <= 1 and w["width"] > 0 for w in words)
    hits = find_in_document(pdf, "duration of diarrhea")  # case-insensitive, every page it is on
    assert [hit["page"] for hit in hits] == [2, 3, 4, 5]
    assert find_in_document(pdf, "   ") == [] and find_in_document(pdf, "no such words anywhere") == []
