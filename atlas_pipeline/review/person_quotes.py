"""A person's quote, checked by the grader that checks the model's.

A value a reviewer types or picks comes with the words they selected (or typed) as its quote. The same rules apply
as to a model's answer: ``verified`` only when the document says exactly this — the quote is in the document and it
supports the value (a changed number, sign, comparator or negation is not). The grade, the quote's page and its span
are kept with the decision, so the exports say where a hand-made value was found and whether its quote holds.

A quote made by selecting words on a PDF page (the review page's viewer) is those very words: it is checked against
the page's own text (``page_words``), recorded with that page and the words' places, and graded on them — never
searched for elsewhere in the document, where a similar row of another table could be found instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from atlas_pipeline.core.templates import TemplateField
from atlas_pipeline.grading.fields import grade_field
from atlas_pipeline.grading.locations import EvidenceScope
from atlas_pipeline.parsing.document_parse import load_markdown, load_tables
from atlas_pipeline.review.evidence import page_words
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.records import ParseRecord, SnapshotRecord, read_record

MAX_SELECTED_WORDS = 2000


@dataclass(frozen=True)
class Selection:
    """Words a person selected on a PDF page: the page (1-based) and the first and last word's index among the
    page's words in reading order (``review.evidence.page_words``, what the viewer serves)."""

    page: int
    first: int
    last: int

    @classmethod
    def parse(cls, page: int | None, words: str) -> Selection | None:
        """From the page's form fields (``quote_page``, ``quote_words`` "first-last"); None when not a selection."""
        found = re.fullmatch(r"\s*(\d{1,6})\s*-\s*(\d{1,6})\s*", words or "")
        if page is None or found is None:
            return None
        first, last = sorted((int(found[1]), int(found[2])))
        return cls(page, first, last) if last - first < MAX_SELECTED_WORDS else None


class QuoteCheck(BaseModel):
    """How a person's quote was graded and where it is."""

    tier: str  # verified | approximate | unverified (``grading.fields``)
    note: str = ""  # why it is not verified, in a reviewer's words
    page: int | None = None  # where the grader found it (1-based), else the page the words were selected on
    start: int | None = None  # span in document.md
    end: int | None = None
    table: int | None = None
    row: int | None = None
    selected_on: int | None = None  # the page the reviewer selected the words on (the review page's viewer)
    words: tuple[int, int] | None = None  # the selected words' places on that page (first, last), when selected


def document_scope(store: Store, key: str) -> EvidenceScope | None:
    """The document's text and tables as the grader reads them, or None before it is parsed."""
    parse = read_record(store, key, "parse", ParseRecord)
    if parse is None or not parse.text_path or not store.exists(parse.text_path):
        return None
    try:
        tables = load_tables(store, parse) if parse.tables_path else []
    except (OSError, ValueError):
        tables = []  # the text alone still grades most quotes
    return EvidenceScope(load_markdown(store, parse), tables)


def selected_words(store: Store, key: str, selection: Selection, quote: str) -> EvidenceScope | None:
    """The selected words as the text to grade on, when ``quote`` is exactly them (spacing aside); None when the
    document has no PDF snapshot, the page or words are not there, or the quote was edited after selecting."""
    snapshot = read_record(store, key, "snapshot", SnapshotRecord)
    if snapshot is None or not snapshot.snapshot_path or not (snapshot.media_type or "").endswith("pdf"):
        return None
    try:
        words = page_words(store.read_bytes(snapshot.snapshot_path), selection.page)
    except (OSError, ValueError):
        return None
    if selection.last >= len(words):
        return None
    text = " ".join(word["text"] for word in words[selection.first : selection.last + 1])
    return EvidenceScope(text) if text.split() == quote.split() else None


def check_quote(
    scope: EvidenceScope,
    name: str,
    field: TemplateField | None,
    value: Any,
    quote: str,
    selected_on: int | None = None,
    selection: Selection | None = None,
) -> QuoteCheck:
    """Grade ``quote`` as the support of ``value`` for the field ``name`` (a number the quote does not say, or says
    otherwise, is not verified). With ``selection`` (``scope`` is then the selected words, ``selected_words``) the
    quote is those words on that page."""
    kind = field.kind if field else None
    graded = grade_field(
        name,
        field.type if field else "string",
        "",
        {"value": value, "quote": quote},
        scope,
        field.synonyms if field else None,
        kind,
    )
    if selection is not None:
        return QuoteCheck(
            tier=graded.tier,
            note=graded.note,
            page=selection.page,
            selected_on=selection.page,
            words=(selection.first, selection.last),
        )
    return QuoteCheck(
        tier=graded.tier,
        note=graded.note,
        page=graded.page or selected_on,
        start=graded.start,
        end=graded.end,
        table=graded.table,
        row=graded.row,
        selected_on=selected_on,
    )
