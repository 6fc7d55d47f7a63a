"""parse_document on real corpus documents: RCT PDFs, HTML, JATS, scans and awkward files."""

import json
import re

import pytest
from rapidfuzz import fuzz

from atlas_pipeline.parsing import (
    LockedDocumentError,
    ParseOptions,
    UnreadableDocumentError,
    UnsupportedDocumentError,
    detect_media_type,
    parse_document,
    parser_fingerprint,
)
from atlas_pipeline.parsing.pdf import ocr_available
from atlas_pipeline.parsing.plain import markdown_tables
from atlas_pipeline_tests.support.corpus import corpus_file, parsed_corpus

needs_ocr = pytest.mark.skipif(not ocr_available(), reason="tesseract-ocr is not installed (make setup installs it)")


def squash(text: str) -> str:
    """Letters and digits only, lower case: compares content, not layout."""
    return re.sub(r"[^a-z0-9]", "", text.lower())


def parse_corpus(relative: str, **options):
    path = corpus_file(relative)
    return parse_document(path.read_bytes(), path.name, ParseOptions(**options) if options else None)


@pytest.fixture(scope="module")
def juice_trial():
    return parsed_corpus("rct/PMC1216327.pdf")


def test_rct_pdf_text_holds_the_human_evidence_quotes(juice_trial):
    quotes = [
        json.loads(line)["evidence_text"]
        for line in corpus_file("gold/evidence_spans.jsonl").read_text().splitlines()
        if json.loads(line)["pmcid"] == "PMC1216327"
    ]
    assert len(quotes) >= 5
    scope = squash(juice_trial.markdown + juice_trial.tables_text)
    found = [q for q in quotes if squash(q) in scope]
    assert len(found) >= len(quotes) - 1, f"missing: {set(quotes) - set(found)}"
    assert juice_trial.page_count == 8
    assert re.match(r"<!-- page 1 -->\n\n(# )?Nutrition Journal", juice_trial.markdown)  # the masthead
    assert [f"<!-- page {n} -->" in juice_trial.markdown for n in range(1, 10)] == [True] * 8 + [False]
    page_3 = juice_trial.markdown.index("<!-- page 3 -->")
    assert juice_trial.markdown.rfind("Page 2 of 8", 0, page_3) > juice_trial.markdown.index("<!-- page 2 -->")
    assert "pymupdf4llm" in juice_trial.engine


def test_rct_pdf_tables_carry_the_publisher_cells(juice_trial):
    gold = json.loads(corpus_file("gold/jats_tables/PMC1216327.tables.json").read_text())
    assert len(juice_trial.tables) >= 5
    ours = squash(juice_trial.tables_text)
    cells = [
        squash(cell["text"])
        for table in gold["tables"]
        if not table.get("graphic_only")
        for row in table["rows"]
        for cell in row
        if squash(cell["text"])
    ]
    share = sum(cell in ours for cell in cells) / len(cells)
    assert share >= 0.85, f"only {share:.0%} of publisher table cells found"
    first = juice_trial.tables[0]
    assert first.page == 2 and first.rows == 4 and first.columns == 7
    assert first.html.startswith("<table>") and "<th>Juice</th>" in first.html and "<td>700</td>" in first.html
    assert "Apple | 700 | 6.2" in first.text
    assert first.caption.startswith("Table 1")


def test_html_article(tmp_path):
    parsed = parse_corpus("html/elife_article.html")
    assert parsed.media_type == "text/html" and parsed.title
    assert parsed.markdown.startswith("# ")
    assert len(parsed.markdown) > 20_000
    assert "<script" not in parsed.markdown and "function(" not in parsed.markdown


def test_jats_article_keeps_sections_and_tables():
    parsed = parse_corpus("rct_jats/PMC3648394.nxml")
    gold = json.loads(corpus_file("gold/jats_tables/PMC3648394.tables.json").read_text())
    assert parsed.media_type == "application/jats+xml"
    assert parsed.markdown.startswith("# Effect of an office worksite-based yoga program")
    assert "## Abstract" in parsed.markdown and "## Methods" in parsed.markdown
    assert len(parsed.tables) == len([t for t in gold["tables"] if not t.get("graphic_only")])
    assert parsed.tables[0].caption.startswith("Table 1")
    assert "<table" in parsed.tables[0].html


def test_markdown_and_text_documents():
    markdown = b"# Trial\n\nSome text.\n\n| arm | n |\n|---|---|\n| drug | 30 |\n| placebo | 31 |\n"
    parsed = parse_document(markdown, "notes.md")
    assert parsed.markdown.startswith("# Trial") and len(parsed.tables) == 1
    assert parsed.tables[0].text == "arm | n\ndrug | 30\nplacebo | 31"
    assert parse_document(b"plain words", "a.txt").tables == []
    assert markdown_tables("no | table here") == []


@needs_ocr
def test_scanned_page_goes_through_ocr():
    parsed = parse_corpus("awkward/scanned/ocrmypdf_linn.pdf")
    reference = corpus_file("awkward/scanned/ocrmypdf_linn.txt").read_text()
    assert parsed.ocr_pages == [1]
    assert fuzz.ratio(squash(parsed.markdown), squash(reference)) > 70
    assert parsed.title == ""  # not OCR's largest type ("FORWARD, LOCATE be touch"): the file name names it


def test_scanned_page_without_ocr_fails_with_a_reason():
    with pytest.raises(UnreadableDocumentError, match=r"no extractable text.*OCR is off"):
        parse_corpus("awkward/scanned/ocrmypdf_linn.pdf", ocr=False)


@pytest.mark.parametrize(
    ("relative", "error", "reason"),
    [
        ("awkward/derived/empty_zero_bytes.pdf", UnreadableDocumentError, r"^empty file \(0 bytes\)$"),
        ("awkward/derived/html_page_saved_with_pdf_extension.pdf", UnreadableDocumentError, r"not a PDF \(HTML"),
        ("awkward/derived/PMC3508963_user_password_aes256.pdf", LockedDocumentError, "encrypted, needs a password"),
        ("awkward/encrypted/pypdf_r4-aes-user-password.pdf", LockedDocumentError, "encrypted, needs a password"),
        ("awkward/encrypted/tabula_encrypted_FLA_audit_table.pdf", LockedDocumentError, "needs a password"),
        ("awkward/malformed/qpdf_bad1.pdf", UnreadableDocumentError, r"not a PDF \(no %PDF- header\)"),
        ("awkward/malformed/ocrmypdf_invalid.pdf", UnreadableDocumentError, "not a readable PDF"),
    ],
)
def test_awkward_inputs_raise_specific_errors(relative, error, reason):
    with pytest.raises(error, match=reason) as raised:
        parse_corpus(relative)
    assert raised.value.status == ("skipped" if error is LockedDocumentError else "failed")


def test_owner_password_pdf_opens_with_a_warning():
    parsed = parse_corpus("awkward/derived/PMC5154016_owner_password_no_copy_aes256.pdf", ocr=False)
    assert parsed.page_count == 5 and len(parsed.markdown) > 10_000
    assert any("do not allow copying" in warning for warning in parsed.warnings)


def test_empty_password_pdf_opens_like_the_unencrypted_one():
    plain = parse_corpus("awkward/encrypted/pypdf_unencrypted.pdf", ocr=False)
    empty = parse_corpus("awkward/encrypted/pypdf_r6-empty-password.pdf", ocr=False)
    assert plain.markdown.strip() and squash(plain.markdown) == squash(empty.markdown)


def test_damaged_pdfs_are_repaired_with_warnings():
    parsed = parse_corpus("awkward/malformed/qpdf_pages-loop.pdf", ocr=False)
    assert parsed.page_count >= 1
    assert any("cycle in page tree" in warning for warning in parsed.warnings)


@pytest.mark.parametrize(
    ("data", "name", "outcome"),
    [
        (b"%PDF-1.7\n...", "paper.bin", "application/pdf"),
        (b"<!DOCTYPE html><html><body>x</body></html>", "page.htm", "text/html"),
        (
            b'<?xml version="1.0"?><!DOCTYPE article PUBLIC "-//NLM//DTD JATS"><article>',
            "a.xml",
            "application/jats+xml",
        ),
        (b"# Title", "notes.md", "text/markdown"),
        (b"\x89PNG\r\n\x1a\n....", "figure.png", "image/png"),
        (b"II*\x00....", "scan.tif", "image/tiff"),
        (b"\xff\xd8\xff\xe0....", "photo.pdf", "image/jpeg"),
        (b"PK\x03\x04....", "paper.docx", UnsupportedDocumentError),
        (b"plain", "paper.pdf", UnreadableDocumentError),
        (b"{}", "data.json", UnsupportedDocumentError),
    ],
)
def test_media_type_comes_from_the_bytes_first(data, name, outcome):
    if isinstance(outcome, str):
        assert detect_media_type(data, name) == outcome
    else:
        with pytest.raises(outcome):
            detect_media_type(data, name)


def test_parser_fingerprint_changes_with_options():
    assert parser_fingerprint(ParseOptions()) == parser_fingerprint(ParseOptions())
    assert parser_fingerprint(ParseOptions(ocr=False)) != parser_fingerprint(ParseOptions())
    assert parser_fingerprint(ParseOptions(engine="legacy")) != parser_fingerprint(ParseOptions())


@needs_ocr
def test_born_digital_pages_are_not_ocrd_unless_asked():
    assert parse_corpus("rct/PMC5154016.pdf").ocr_pages == []  # text layer present: figures are not OCR'd
    everything = parse_corpus("rct/PMC5154016.pdf", ocr_max_text_chars=None)
    assert everything.ocr_pages  # pymupdf4llm alone would OCR the figure pages
