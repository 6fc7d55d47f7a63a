"""Bringing an index up to date with the documents: changed ones re-indexed, removed ones dropped."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from atlas_pipeline.read_model.document_state import DocumentState
from atlas_pipeline.search.entries import document_mark, indexable, indexed_document
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


@dataclass(frozen=True)
class Candidate:
    """A document as the index is brought up to date with it: whether it has a text to search, and its mark."""

    key: str
    indexable: bool
    mark: str


def refresh_index(index: SearchIndex, store: Store, states: list[DocumentState]) -> RefreshReport:
    by_key = {state.key: state for state in states}
    candidates = [Candidate(s.key, indexable(s), document_mark(s) if indexable(s) else "") for s in states]
    return refresh_candidates(index, store, candidates, lambda keys: [by_key[key] for key in keys])


def refresh_candidates(
    index: SearchIndex,
    store: Store,
    candidates: list[Candidate],
    load: Callable[[list[str]], list[DocumentState]],
) -> RefreshReport:
    """Re-index the documents whose mark changed (their states read by ``load``, ``BATCH`` at a time), drop those
    gone; an unchanged document costs a comparison of marks."""
    marks = index.marks()
    wanted: set[str] = set()
    changed: list[Candidate] = []
    unchanged = 0
    for candidate in candidates:
        if not candidate.indexable:
            continue
        wanted.add(candidate.key)
        if marks.get(candidate.key) == candidate.mark:
            unchanged += 1
        else:
            changed.append(candidate)
    updated = 0
    for start in range(0, len(changed), BATCH):
        chunk = {candidate.key: candidate.mark for candidate in changed[start : start + BATCH]}
        batch = []
        for state in load(list(chunk)):
            document = indexed_document(store, state, chunk[state.key])
            if document is None:
                wanted.discard(state.key)
                continue
            batch.append(document)
        if batch:
            index.upsert(batch)
            updated += len(batch)
    gone = sorted(set(marks) - wanted)
    index.remove(gone)
    return RefreshReport(indexed=len(wanted), updated=updated, removed=len(gone), unchanged=unchanged)
