"""Page triage on real PDFs: the layout model only where a page needs it, and a page's markdown says the same
whichever path it took (words, reading order, headings, list items, page markers, tables)."""

import re

import pymupdf
import pytest
from rapidfuzz import fuzz

from atlas_pipeline.parsing import ParseOptions, parse_document
from atlas_pipeline.parsing.page_triage import LAYOUT, TEXT, PageView, triage_page
from atlas_pipeline.parsing.pages import PAGE_MARKER
from atlas_pipeline_tests.support.corpus import corpus_file, parsed_corpus

# three publishers' layouts: BMC two columns, a Brazilian journal with loosely set lines, BMJ with highlights
PAPERS = [
    "rct/PMC1216327.pdf",
    "rct/PMC5777419.pdf",
    "rct/ussher_2015_BMJ_LEAP_physical_activity_smoking_pregnancy_RCT.pdf",
]
MARKER = re.compile(r"<!-- page (\d+) -->")


def pages_of(markdown: str) -> dict[int, str]:
    pieces = MARKER.split(markdown)
    return {int(number): text for number, text in zip(pieces[1::2], pieces[2::2], strict=True)}


def plain(text: str) -> str:
    """The words of markdown, markup and spacing gone (what a quote is matched against, roughly)."""
    text = re.sub(r"<[^>]+>|[*_#`|]|^\s*- ", " ", text, flags=re.MULTILINE)
    return " ".join(text.split())


def sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.;:?!])\s+", plain(text)) if len(s.split()) >= 8]


@pytest.fixture(scope="module", params=PAPERS)
def both_paths(request):
    path = corpus_file(request.param)
    return parsed_corpus(request.param), parse_document(path.read_bytes(), path.name, ParseOptions(engine="layout"))


def test_every_page_takes_one_path_and_table_pages_take_the_model(both_paths):
    auto, layout = both_paths
    pages = set(range(1, auto.page_count + 1))
    assert set(auto.layout_pages) | set(auto.text_pages) == pages
    assert not set(auto.layout_pages) & set(auto.text_pages)
    assert auto.text_pages, "running-text pages should skip the layout model"
    assert layout.layout_pages == sorted(pages) and layout.text_pages == []
    captioned = {table.page for table in layout.tables if table.caption}
    assert captioned <= set(auto.layout_pages)
    assert [(t.page, t.caption, t.text) for t in layout.tables if t.caption] == [
        (t.page, t.caption, t.text) for t in auto.tables if t.caption
    ]


def test_text_path_pages_say_what_the_layout_model_pages_say(both_paths):
    auto, layout = both_paths
    ours, theirs = pages_of(auto.markdown), pages_of(layout.markdown)
    assert list(ours) == list(theirs) == list(range(1, auto.page_count + 1))  # a marker at every page, in order
    for page in auto.text_pages:
        words = fuzz.token_sort_ratio(plain(ours[page]), plain(theirs[page]))
        assert words >= 97, f"page {page}: the words differ ({words:.0f})"
        # reading order: the model's sentences (two columns read one after the other) appear whole in ours
        expected = sentences(theirs[page])
        kept = [s for s in expected if s in plain(ours[page])]
        assert len(kept) >= 0.9 * len(expected), f"page {page}: {len(kept)}/{len(expected)} sentences kept whole"


def test_text_path_keeps_headings_and_list_items():
    auto = parsed_corpus("rct/PMC1216327.pdf")
    last = pages_of(auto.markdown)[8]
    assert 8 in auto.text_pages
    assert re.search(r"^#+ \*\*Conclusion\*\*", last, re.MULTILINE)
    assert re.search(r"^#+ \*\*References\*\*", last, re.MULTILINE)
    assert re.search(r"^1\. World Health Organization", last, re.MULTILINE)  # each reference its own item
    assert re.search(r"^\s*2\. Brown KB", last, re.MULTILINE)


def test_text_path_keeps_highlights_and_paragraphs_of_loosely_set_lines():
    bmj = parsed_corpus(PAPERS[2])
    highlighted = [page for page in bmj.text_pages if "<mark>RESEARCH</mark>" in pages_of(bmj.markdown)[page]]
    assert highlighted, "MuPDF's style detection must stay on for pages whose text a drawing touches"
    loose = parsed_corpus(PAPERS[1])
    first = pages_of(loose.markdown)[1]
    assert 1 in loose.text_pages
    # one line a block in the PDF, one paragraph in the markdown
    assert "parallel- arm randomized clinical trial" in plain(first) or "parallelarm randomized" in plain(first)
    assert re.search(r"^# Microbiological and clinical effects .* 9-month follow-up", first, re.MULTILINE)


@pytest.mark.parametrize(
    ("relative", "page", "reason"),
    [
        ("rct/PMC1216327.pdf", 2, "a table caption"),
        ("rct/PMC1216327.pdf", 3, "running text"),
        ("tables/tabula/frx_2012_disclosure.pdf", 1, "rows of cells"),  # a table without a caption or numbers
        ("tables/tabula/spanning_cells.pdf", 1, "rows of numbers"),
        ("rct/PMC4210722.pdf", 3, "more than two columns"),
        ("awkward/scanned/ocrmypdf_skew.pdf", 1, "little or no text layer"),
    ],
)
def test_triage_reads_the_page_signals(relative, page, reason):
    with pymupdf.open(corpus_file(relative)) as document:
        decision = triage_page(PageView.read(document[page - 1]))
    assert decision.reason == reason
    assert decision.route == (TEXT if reason == "running text" else LAYOUT)


def test_a_page_marker_starts_every_page_of_every_path():
    parsed = parsed_corpus("rct/PMC5777419.pdf")
    for number in range(1, parsed.page_count + 1):
        assert PAGE_MARKER.format(number=number) in parsed.markdown
