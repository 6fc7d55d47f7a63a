"""Where each document stands, built from the facts handed in (``RunFacts`` per document, from Dagster) and the
document's own records in the store — the one place the read model is assembled, by the aggregates, the review page,
the CLI and search alike."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from atlas_pipeline.core.document_status import ExtractionFacts, RunFacts, is_stale, status_of
from atlas_pipeline.core.statuses import DocumentStatus
from atlas_pipeline.extraction.kept_extraction import values_record
from atlas_pipeline.extraction.version import ExtractionVersion
from atlas_pipeline.knowledge.catalog import Catalog
from atlas_pipeline.knowledge.duplicate_records import load_groups
from atlas_pipeline.knowledge.studies import Report, group_studies, load_links
from atlas_pipeline.read_model.document_state import DocumentState
from atlas_pipeline.review.decisions import decision_marks
from atlas_pipeline.review.derivations import Derivations
from atlas_pipeline.review.final_values import DocumentReview, current_review
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.records import ExtractionRecord, ParseRecord, SnapshotRecord, read_record

MARKS_READ_ONE_BY_ONE = 50  # up to this many documents asked for, each one's decision marks are read alone


def build_states(
    store: Store,
    catalog: Catalog,
    facts: Mapping[str, RunFacts],
    version: ExtractionVersion | None = None,
    accepted_tiers: frozenset[str] = frozenset({"verified"}),
    derivations: Derivations | None = None,
    every_document: bool = False,
    marks: Mapping[str, str] | None = None,
    team: bool = False,
) -> list[DocumentState]:
    """One state per document of ``facts`` (in its order; ``every_document``: they are all the known documents).

    An extraction made with another extraction ``version`` (template, custom fields or instructions, strategy,
    mode, model, prompt, grading) is stale: the document counts as pending and its old values stay out of the
    exports, so two versions are never mixed. ``marks``: the decision logs' marks when the caller read them already
    (``review.decisions.decision_marks``). ``team``: people log in — values are final once compared
    (``review.finality``)."""
    keys = list(facts)
    duplicates = load_groups(store).duplicate_of
    one_by_one = not every_document and len(keys) <= MARKS_READ_ONE_BY_ONE
    if marks is None:
        marks = decision_marks(store, keys) if one_by_one else decision_marks(store)
    states = [
        _state(store, key, catalog, facts[key], version, accepted_tiers, derivations, marks.get(key, ""), team)
        for key in keys
    ]
    for state in states:
        if state.key in duplicates:
            state.duplicate_of, state.duplicate_evidence = duplicates[state.key]
    reports = [Report(s.key, s.extraction.identifiers if s.extraction else {}, s.duplicate_of) for s in states]
    studies = group_studies(reports, load_links(store))
    for state in states:
        state.study_id = studies.get(state.key, state.key)
    return states


def _state(
    store: Store,
    key: str,
    catalog: Catalog,
    run: RunFacts,
    version: ExtractionVersion | None,
    accepted_tiers: frozenset[str],
    derivations: Derivations | None,
    mark: str,
    team: bool = False,
) -> DocumentState:
    entry = catalog.entries.get(key)
    state = DocumentState(
        key=key,
        status=DocumentStatus.PENDING,
        reason="",
        source_path=entry.source_path if entry else None,
        source_removed=bool(entry and entry.removed),
        snapshot=read_record(store, key, "snapshot", SnapshotRecord),
        parse=read_record(store, key, "parse", ParseRecord),
        extraction=read_record(store, key, "extraction", ExtractionRecord),
        review=read_record(store, key, "review", DocumentReview),
    )
    facts = None
    latest = state.extraction
    if latest is not None and run.extracted and not run.running and not run.crash:
        facts = ExtractionFacts(
            status=latest.status,
            reason=latest.reason,
            stopped_at=latest.stopped_at,
            retryable=latest.retryable,
            version=latest.extraction_version,
        )
        state.stale = is_stale(facts, version.tag if version else None)
        if state.stale and version is not None:
            facts = replace(facts, version_changes=tuple(version.changes_from(latest.version_parts)))
        kept = values_record(store, key, latest)
        if kept is not latest:  # the latest did not go through: the last one that did stays shown
            state.extraction = kept
            facts = replace(facts, kept=True, kept_from=kept.extracted_at[:10])
        # decisions made since the last merge show at once (the page, `atlas run`)
        state.review = current_review(store, state.extraction, state.review, accepted_tiers, derivations, mark, team)
        review = state.current_review
        if review is not None and review.approved:
            facts = replace(facts, approval=review.summary())
    elif state.review is not None and (state.review.team is None or state.review.team is not team):
        # running, or its run crashed: the stored review, but merged again when made before the rule or for another
        # kind of review (solo, team) — never its values as another rule made them final
        state.review = current_review(store, state.extraction, None, accepted_tiers, derivations, mark, team)
    status = status_of(run, facts, version.tag if version else None)
    state.status, state.reason, state.outside = status.status, status.reason, status.outside
    state.stale = status.stale  # the rule the review above was chosen on (``is_stale``)
    return state
