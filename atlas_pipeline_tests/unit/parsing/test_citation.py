"""Title, authors and year as the documents state them — not a typesetter's file name from the PDF's metadata."""

import pymupdf
import pytest

from atlas_pipeline.parsing import parse_document
from atlas_pipeline.parsing.citation import authors_in, citation_from_text, largest_type_on_first_page, reads_as_title
from atlas_pipeline_tests.support.corpus import corpus_file, parsed_corpus


def test_the_juice_trial_is_named_by_its_title_not_its_file_name():
    path = corpus_file("rct/PMC1216327.pdf")
    with pymupdf.open(path) as document:
        assert document.metadata["title"] == "1475-2891-4-23.fm"  # what the list showed
        bold = largest_type_on_first_page(document)
    assert bold.startswith("Controlled, double-blind, randomized clinical trial to evaluate the impact of fruit juice")
    parsed = parsed_corpus("rct/PMC1216327.pdf")
    citation = citation_from_text(parsed.markdown, "1475-2891-4-23.fm", bold_title=bold)
    assert citation.title == bold and citation.year == 2005
    assert citation.authors[0] == "Sandra Valois" and citation.authors[-1] == "Fima Lifshitz"
    assert citation.short_authors() == "Valois, Costa-Ribeiro et al."


def test_jats_and_html_name_their_authors_and_year():
    jats = parse_document(corpus_file("rct_jats/PMC3648394.nxml").read_bytes(), "PMC3648394.nxml")
    assert jats.title.startswith("Effect of an office worksite-based yoga program") and jats.year == 2013
    assert len(jats.authors) == 11 and all(len(name.split()) >= 2 for name in jats.authors)
    html = parse_document(corpus_file("html/plos_one_article.html").read_bytes(), "plos_one_article.html")
    assert html.authors[:2] == ["Yang Li", "Tuanjie Wang"] and html.year is not None


@pytest.mark.parametrize(
    "text, reads",
    [
        ("1475-2891-4-23.fm", False),
        ("Microsoft Word - trial draft 3.doc", False),
        ("RESEARCH ARTICLE Open Access", False),
        ("BMC Health Services Research", False),
        ("Nutrition Journal", False),
        ("Physical activity for smoking cessation in pregnancy: randomised controlled trial", True),
    ],
)
def test_what_reads_as_a_title(text, reads):
    assert reads_as_title(text) is reads


def test_an_author_line_and_what_is_not_one():
    line = "Hassan Soleimanpour<sup>1*</sup> , Kamaleddin Hassanzadeh<sup>2</sup> and Samad EJ Golzari<sup>3,4</sup>"
    assert authors_in(line) == ["Hassan Soleimanpour", "Kamaleddin Hassanzadeh", "Samad EJ Golzari"]
    assert authors_in("1 Department of Pediatrics, University of Bahia, Salvador, Brazil") == []
    assert authors_in("Background: Despite the fact that numerous medications have been introduced") == []


def test_a_title_guessed_from_ocr_text_is_not_trusted():
    """A scanned page's OCR lines ("FORWARD, LOCATE be touch") are no title: the PDF's metadata title, else none."""
    markdown = "<!-- page 1 -->\n\n## FORWARD, LOCATE be touch\n\nThe LinnSequencer is a composition tool."
    assert citation_from_text(markdown, bold_title="FORWARD, LOCATE be touch").title == "FORWARD, LOCATE be touch"
    assert citation_from_text(markdown, bold_title="FORWARD, LOCATE be touch", ocr=True).title == ""
    meant = "The LinnSequencer: a composition and performance tool"
    assert citation_from_text(markdown, meant, bold_title=meant, ocr=True).title == meant
