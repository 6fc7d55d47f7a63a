"""Bringing an index up to date with the documents: changed ones re-indexed, removed ones dropped."""

from __future__ import annotations

from dataclasses import dataclass

from atlas_pipeline.read_model.document_state import DocumentState
from atlas_pipeline.search.entries import document_mark, indexed_document
from atlas_pipeline.search.index import SearchIndex
from atlas_pipeline.store.files import Store

BATCH = 200


@dataclass
class RefreshReport:
    indexed: int
    updated: int
    removed: int
    unchanged: int

    def summary(self) -> str:
        return (
            f"search index: {self.indexed} document(s); {self.updated} (re)indexed, {self.removed} removed, "
            f"{self.unchanged} unchanged"
        )


def refresh_index(index: SearchIndex, store: Store, states: list[DocumentState]) -> RefreshReport:
    marks = index.marks()
    wanted: set[str] = set()
    batch, updated, unchanged = [], 0, 0
    for state in states:
        if state.source_removed:
            continue
        parse = state.parse
        if parse is None or parse.problem or not parse.text_path:
            continue
        wanted.add(state.key)
        mark = document_mark(state)
        if marks.get(state.key) == mark:
            unchanged += 1
            continue
        document = indexed_document(store, state, mark)
        if document is None:
            wanted.discard(state.key)
            continue
        batch.append(document)
        if len(batch) >= BATCH:
            index.upsert(batch)
            updated += len(batch)
            batch = []
    if batch:
        index.upsert(batch)
        updated += len(batch)
    gone = sorted(set(marks) - wanted)
    index.remove(gone)
    return RefreshReport(indexed=len(wanted), updated=updated, removed=len(gone), unchanged=unchanged)
