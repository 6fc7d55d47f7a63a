"""What the aggregates read, once per run: each document's part (``outputs.document_products``) — made again only
for documents whose stamp changed since the last refresh (``read_model.document_stamps``) —, the export tables
assembled from the parts, and the states of the documents that the studies and analysis files are made from.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import dagster as dg

from atlas_pipeline.core.redaction import redact, secret_values
from atlas_pipeline.core.templates import Template
from atlas_pipeline.defs.document_states import (
    PartitionFacts,
    collect_document_states,
    known_keys,
    partition_facts,
)
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.knowledge.catalog import Catalog, load_catalog
from atlas_pipeline.knowledge.duplicate_records import load_groups
from atlas_pipeline.knowledge.studies import Report, group_studies, load_links
from atlas_pipeline.outputs.completion import TaskCompletion, summarise_parts
from atlas_pipeline.outputs.document_products import (
    DocumentFacts,
    Part,
    assemble,
    kept_facts,
    make_part,
    read_shard,
    update_shard,
)
from atlas_pipeline.outputs.exports import ExportTables
from atlas_pipeline.outputs.study_parts import (
    Analysis,
    EntriesError,
    StudyPart,
    analysis_of,
    read_study_shard,
    study_stamp,
    write_study_shard,
)
from atlas_pipeline.outputs.study_parts import make_part as make_study_part
from atlas_pipeline.outputs.study_report import studies
from atlas_pipeline.read_model.document_stamps import document_stamps, record_versions, settings_stamp
from atlas_pipeline.read_model.document_state import DocumentState
from atlas_pipeline.review.decisions import decision_marks
from atlas_pipeline.review.study_values import StudyChoice
from atlas_pipeline.search.entries import indexable, mark_material, mark_of
from atlas_pipeline.search.refresh import Candidate
from atlas_pipeline.store.layout import shard_of

LOG = logging.getLogger("atlas.aggregates")
STATES_PER_READ = 500  # documents whose states are built at once (what a refresh holds besides the parts)


@dataclass
class StateReader:
    """Builds documents' states as the whole knowledge base places them (the partitions' facts and the decision
    logs read once for all)."""

    instance: dg.DagsterInstance
    deployment: Deployment
    catalog: Catalog
    partitions: PartitionFacts
    marks: dict[str, str]
    study_of: dict[str, str]

    def __call__(self, keys: list[str]) -> list[DocumentState]:
        deployment = self.deployment
        states = collect_document_states(
            self.instance,
            deployment.store(),
            self.catalog,
            deployment.extraction_version(),
            keys,
            deployment.accepted_tiers(),
            deployment.derivations(),
            facts=lambda _: self.partitions,
            marks=self.marks,
            team=deployment.team_review(),
        )
        for state in states:  # the study the whole knowledge base places it in (not just these documents)
            state.study_id = self.study_of.get(state.key, state.key)
        return states


@dataclass
class AggregateInputs:
    """Every known document's part of the aggregates, as of ``read_at``."""

    read_at: float
    order: list[str]  # every known document, in the order the exports list them
    facts: dict[str, DocumentFacts]
    tables: ExportTables
    duplicates: dict[str, tuple[str, str]]  # key → (canonical, evidence)
    made: int  # parts made this refresh (the others were kept)
    states: StateReader
    stamps: dict[str, str]
    settings: str
    studies_made: int = 0  # study parts made by ``analysis`` (the others were kept)

    def completion(self) -> TaskCompletion:
        parts = [self.facts[key].completion for key in self.order]
        return summarise_parts(parts, duplicates=sum(1 for key in self.order if key in self.duplicates))

    def search_candidates(self) -> list[Candidate]:
        candidates = []
        for key in self.order:
            fact = self.facts[key]
            canonical = self.duplicates[key][0] if key in self.duplicates else ""
            candidates.append(Candidate(key, fact.indexable, mark_of(fact.search_material, canonical)))
        return candidates

    def analysis(self, template: Template | None, choices: Mapping[str, list[StudyChoice]]) -> Analysis:
        """The studies, their entries and the agreement report. Each study one of whose reports was extracted (the
        others have no value to report) is made again from its reports' states only when its stamp changed — one of
        its reports' parts, the team's choices for it, the settings —; the others are read from their shards."""
        if template is None:
            return Analysis()
        agreement = [fact.agreement for key in self.order if (fact := self.facts[key]).agreement is not None]
        entries_error = ""
        members: dict[str, list[str]] = defaultdict(list)
        for key in self.order:
            members[self.states.study_of.get(key, key)].append(key)
        stamps = {
            study: study_stamp(
                study,
                [(key, self.stamps[key], self.duplicates.get(key, ("", ""))[0]) for key in keys],
                choices.get(study, []),
                self.settings,
            )
            for study, keys in members.items()
            if any(self.facts[key].extracted for key in keys)
        }
        store = self.states.deployment.store()
        by_shard: dict[str, list[str]] = defaultdict(list)
        for study in stamps:
            by_shard[shard_of(study)].append(study)
        parts: list[StudyPart] = []
        for shard in sorted(by_shard):
            kept = read_study_shard(store, shard)
            wanted = by_shard[shard]
            changed = [study for study in wanted if study not in kept or kept[study].stamp != stamps[study]]
            made: dict[str, StudyPart] = {}
            unkept: dict[str, StudyPart] = {}  # made without their entries (they failed): not kept, made again
            for chunk in _chunks(changed, STATES_PER_READ):
                states = self.states([key for study in chunk for key in members[study]])
                try:
                    found = studies(states, template, choices)
                except Exception as failure:  # as when made at once: no file made from the studies is written
                    return analysis_of([], agreement, redact(f"{type(failure).__name__}: {failure}"))
                for study in found:
                    try:
                        made[study.id] = make_study_part(study, template, stamps[study.id])
                    except EntriesError as failure:  # the analysis files are not written; the studies export is
                        entries_error = entries_error or str(failure)
                        unkept[study.id] = make_study_part(study, template, "", entries=False)
            current = {study: kept[study] for study in wanted if study in kept and study not in changed}
            current.update(made)
            if made or set(kept) != set(current):
                try:
                    write_study_shard(store, shard, current)
                except Exception as failure:  # kept in memory for this refresh; made again by the next
                    LOG.error("aggregates: study shard %s not written: %s", shard, failure)
            self.studies_made += len(made) + len(unkept)
            parts.extend([*current.values(), *unkept.values()])
        return analysis_of(parts, agreement, entries_error=entries_error)


def _chunks(keys: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(keys), size):
        yield keys[start : start + size]


def aggregate_inputs(instance: dg.DagsterInstance, deployment: Deployment) -> AggregateInputs:
    """Read what the aggregates need: the parts of documents whose stamp changed are made again from their states
    (``STATES_PER_READ`` at a time) and their shards rewritten; the others are read from their shards."""
    read_at = time.time()
    store = deployment.store()
    catalog = load_catalog(store)
    order = known_keys(instance, catalog)
    partitions = partition_facts(instance, store, order)
    runs = {key: partitions.run_facts(key) for key in order}
    template = deployment.load_template()
    version, secrets = deployment.extraction_version(), secret_values()
    masked = hashlib.sha256(json.dumps(sorted(secrets)).encode()).hexdigest()
    settings = settings_stamp(version.tag, deployment.final_values_policy(), masked)
    marks = decision_marks(store)
    stamps = document_stamps(order, record_versions(store), marks, runs, catalog, settings)
    reader = StateReader(instance, deployment, catalog, partitions, marks, {})
    by_shard: dict[str, list[str]] = defaultdict(list)
    for key in order:
        by_shard[shard_of(key)].append(key)
    facts: dict[str, DocumentFacts] = {}
    frames, made = [], 0
    for shard in sorted(by_shard):
        keys = by_shard[shard]
        kept = read_shard(store, shard, template)
        old = kept_facts(kept, stamps) if kept is not None else {}
        changed = [key for key in keys if key not in old]
        parts: list[Part] = []
        for chunk in _chunks(changed, STATES_PER_READ):
            for state in reader(chunk):
                stamp = stamps[state.key]
                review = state.current_review
                if review is not None and review.decision_mark != marks.get(state.key, ""):
                    stamp = ""  # a decision it could not read, or one made since the listing: made again next time
                parts.append(make_part(state, stamp, template, secrets, mark_material(state), indexable(state)))
        frames.append(update_shard(store, shard, kept, parts, set(keys), template))
        facts.update({key: old[key] for key in keys if key in old})
        facts.update({part.key: part.facts for part in parts})
        made += len(parts)
    duplicates = dict(load_groups(store).duplicate_of)
    reports = [Report(key, facts[key].identifiers, duplicates[key][0] if key in duplicates else "") for key in order]
    reader.study_of = group_studies(reports, load_links(store))
    tables = assemble(frames, order, facts, reader.study_of, duplicates, template)
    return AggregateInputs(read_at, order, facts, tables, duplicates, made, reader, stamps, settings)


_RUN_INPUTS: dict[str, AggregateInputs] = {}  # the latest run's (one run at a time per process)


def inputs_of_run(context: dg.AssetExecutionContext, deployment: Deployment) -> AggregateInputs:
    """The aggregates' inputs, read once per run and process and shared by the aggregates that run in it (task
    completion, the exports, the search index): with the default in-process executor a refresh reads each changed
    document once, not three times. The aggregates do not change the inputs they are given."""
    kept = _RUN_INPUTS.get(context.run_id)
    if kept is None:
        kept = aggregate_inputs(context.instance, deployment)
        _RUN_INPUTS.clear()
        _RUN_INPUTS[context.run_id] = kept
        context.log.info(
            f"aggregates: {len(kept.order)} document(s), {kept.made} made again from their records "
            f"(the others unchanged since the last refresh)"
        )
    return kept
