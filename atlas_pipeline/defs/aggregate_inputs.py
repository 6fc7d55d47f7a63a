"""What the aggregates read, once per run: each document's part (``outputs.document_products``) — made again only
for documents whose stamp changed since the last refresh (``read_model.document_stamps``) —, the export tables
assembled from the parts, and the states of the documents that the studies and analysis files are made from.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

import dagster as dg

from atlas_pipeline.core.redaction import secret_values
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
    make_part,
    part_shard,
    read_facts,
    read_shard,
    update_shard,
)
from atlas_pipeline.outputs.exports import ExportTables
from atlas_pipeline.read_model.document_stamps import document_stamps, record_versions, settings_stamp
from atlas_pipeline.read_model.document_state import DocumentState
from atlas_pipeline.review.decisions import decision_marks
from atlas_pipeline.search.entries import mark_material, mark_of
from atlas_pipeline.search.refresh import Candidate

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

    def analysed(self) -> list[DocumentState]:
        """The states the studies, analysis files and agreement report are made from: every report of each study
        one of whose reports was extracted. Other studies have no value to report."""
        members: dict[str, list[str]] = defaultdict(list)
        for key in self.order:
            members[self.states.study_of.get(key, key)].append(key)
        wanted = {key for keys in members.values() if any(self.facts[k].extracted for k in keys) for key in keys}
        return self.states([key for key in self.order if key in wanted])


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
        by_shard[part_shard(key)].append(key)
    facts: dict[str, DocumentFacts] = {}
    frames, made = [], 0
    for shard in sorted(by_shard):
        keys = by_shard[shard]
        kept = read_shard(store, shard, template)
        old = dict(kept.select("key", "stamp").iter_rows()) if kept is not None else {}
        changed = [key for key in keys if old.get(key) != stamps[key]]
        parts: list[Part] = []
        for chunk in _chunks(changed, STATES_PER_READ):
            for state in reader(chunk):
                parts.append(make_part(state, stamps[state.key], template, secrets, mark_material(state)))
        frame = update_shard(store, shard, kept, parts, set(keys), template)
        facts.update({key: fact for key, (_, fact) in read_facts(frame).items()})
        made += len(parts)
        frames.append(frame)
    duplicates = dict(load_groups(store).duplicate_of)
    reports = [Report(key, facts[key].identifiers, duplicates[key][0] if key in duplicates else "") for key in order]
    reader.study_of = group_studies(reports, load_links(store))
    tables = assemble(frames, order, facts, reader.study_of, duplicates, template)
    return AggregateInputs(read_at, order, facts, tables, duplicates, made, reader)


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
