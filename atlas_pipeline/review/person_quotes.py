"""A person's quote, checked by the grader that checks the model's.

A value a reviewer types or picks comes with the words they selected (or typed) as its quote. The same rules apply
as to a model's answer: ``verified`` only when the document says exactly this — the quote is in the document and it
supports the value (a changed number, sign, comparator or negation is not). The grade, the quote's page and its span
are kept with the decision, so the exports say where a hand-made value was found and whether its quote holds.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from atlas_pipeline.core.templates import TemplateField
from atlas_pipeline.grading.fields import grade_field
from atlas_pipeline.grading.locations import EvidenceScope
from atlas_pipeline.parsing.document_parse import load_markdown, load_tables
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.records import ParseRecord, read_record


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


def check_quote(
    scope: EvidenceScope,
    name: str,
    field: TemplateField | None,
    value: Any,
    quote: str,
    selected_on: int | None = None,
) -> QuoteCheck:
    """Grade ``quote`` as the support of ``value`` for the field ``name`` (a number the quote does not say, or says
    otherwise, is not verified)."""
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
