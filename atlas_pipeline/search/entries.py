"""What is indexed of one document: rows of (part, field, body) with the document's status, source and title, and a
mark that changes whenever any of it may have changed (so the index is updated per document, incrementally)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field

from atlas_pipeline.core.errors import AtlasError
from atlas_pipeline.read_model.document_state import DocumentState
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import provenance_path

MATCH_START, MATCH_END = "\ue000", "\ue001"  # around matches in snippets (private-use: never in a text)
_QUERY_TERM = re.compile(r'"[^"]+"|[^\s"]+')


@dataclass(frozen=True)
class Part:
    part: str  # text | tables | field
    field: str  # the field name for a value ("outcomes[1].name"), else ""
    body: str


@dataclass
class IndexedDocument:
    key: str
    mark: str
    status: str
    source: str  # the collector that brought it ("" for files people dropped in)
    title: str
    path: str
    parts: list[Part] = field(default_factory=list)


@dataclass(frozen=True)
class Hit:
    """A document matching a query: its best passage (snippet with [matches] marked), ranked best first."""

    key: str
    title: str
    status: str
    source: str
    part: str
    field: str
    snippet: str  # matches between MATCH_START and MATCH_END
    score: float

    def marked(self, start: str = "[", end: str = "]") -> str:
        return " ".join(self.snippet.split()).replace(MATCH_START, start).replace(MATCH_END, end)

    def html(self) -> str:
        """The snippet as HTML, its matches in <mark>."""
        from markupsafe import escape

        text = str(escape(" ".join(self.snippet.split())))
        return text.replace(MATCH_START, "<mark>").replace(MATCH_END, "</mark>")


def document_mark(state: DocumentState) -> str:
    """Changes when the text, the extraction, the review or the status of the document may have (its source comes
    with its bytes). Computed without reading anything: unchanged documents cost nothing to skip."""
    return mark_of(mark_material(state), state.duplicate_of)


def mark_material(state: DocumentState) -> list[str]:
    """What a document's mark is made of, but its group (``duplicate_of``, which other documents decide)."""
    parse, extraction, review = state.parse, state.extraction, state.current_review
    return [
        state.status.value,
        parse.sha256 if parse else "",
        parse.parser if parse else "",
        extraction.extracted_at if extraction else "",
        extraction.extraction_version if extraction else "",
        review.decision_mark if review is not None else "",
    ]


def mark_of(material: list[str], duplicate_of: str) -> str:
    return hashlib.sha256(json.dumps([*material, duplicate_of]).encode()).hexdigest()[:20]


def indexable(state: DocumentState) -> bool:
    """Whether the document has a text to search (a removed source's entry is dropped)."""
    parse = state.parse
    return not state.source_removed and parse is not None and not parse.problem and bool(parse.text_path)


def _values(state: DocumentState) -> list[Part]:
    """One part per extracted field of the current review: the final value where one is decided, else the model's,
    with its quote."""
    review = state.current_review
    if review is None or state.stale:
        return []
    parts = []
    for name, item in review.fields.items():
        value = item.final_value if item.decided and item.provenance != "rejected" else item.model_value
        if value in (None, "", []):
            continue
        parts.append(Part("field", name, f"{name.replace('_', ' ')}: {value}. {item.quote or ''}".strip()))
    return parts


def indexed_document(store: Store, state: DocumentState, mark: str = "") -> IndexedDocument | None:
    """The index entry of a document with a text, or None (nothing to search yet)."""
    parse = state.parse
    if parse is None or parse.problem or not parse.text_path:
        return None
    provenance = store.read_json_or(provenance_path(parse.sha256), {}) or {}
    source = provenance.get("source", "")
    try:
        text = store.read_text(parse.text_path)
    except FileNotFoundError:
        return None
    parts = [Part("text", "", text)]
    if parse.tables_path:
        tables = store.read_json_or(parse.tables_path, [])
        table_text = "\n\n".join(t.get("text", "") for t in tables if isinstance(t, dict))
        if table_text.strip():
            parts.append(Part("tables", "", table_text))
    parts += _values(state)
    return IndexedDocument(
        key=state.key,
        mark=mark or document_mark(state),
        status=state.status.value,
        source=source,
        title=parse.title or (state.source_path or state.key),
        path=state.source_path or "",
        parts=parts,
    )


MAX_QUERY_CHARS = 1_000
MAX_QUERY_TERMS = 32


class QueryTooLongError(AtlasError, ValueError):
    """A query past the limits: a search is a few words, not a document (a 4,600-word query is too complex for a
    database to plan, and no person types one)."""


def query_terms(query: str) -> list[str]:
    """The words and "quoted phrases" of a query as a person typed it (operators are not interpreted), at most
    ``MAX_QUERY_TERMS`` of them in ``MAX_QUERY_CHARS`` characters (else ``QueryTooLongError`` says so)."""
    terms = [term.strip('"') for term in _QUERY_TERM.findall(query[: MAX_QUERY_CHARS + 1]) if term.strip('"').strip()]
    if len(query) > MAX_QUERY_CHARS or len(terms) > MAX_QUERY_TERMS:
        words = len(query.split())
        raise QueryTooLongError(
            f'a search takes at most {MAX_QUERY_TERMS} words or "phrases" and {MAX_QUERY_CHARS:,} characters '
            f"(this one: {words:,} words, {len(query):,} characters): search for the few words that matter"
        )
    return terms
