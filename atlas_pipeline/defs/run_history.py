"""The run history's answers to the planner (``knowledge/planning.py``): which documents were extracted already from
their current bytes with this extraction version, which a person cancelled, and when the aggregates were made
against what landed since."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import dagster as dg

from atlas_pipeline.defs.asset_names import (
    AGGREGATE_ASSET_NAMES,
    EXTRACTION_ASSET_NAME,
    FINAL_VALUES_POLICY,
    REVIEW_ASSET_NAME,
    STATES_READ_AT,
)
from atlas_pipeline.defs.cancellation import cancelled_documents
from atlas_pipeline.defs.document_states import already_extracted
from atlas_pipeline.knowledge.catalog import Catalog, CatalogEntry
from atlas_pipeline.knowledge.planning import AggregateFacts
from atlas_pipeline.store.files import Store

POLICY_AGGREGATES = ("task_completion", "extraction_exports")  # their figures follow what makes a value final


@dataclass(frozen=True)
class InstanceFacts:
    """``DocumentFacts`` read from a Dagster instance."""

    instance: dg.DagsterInstance
    store: Store
    version: str  # the extraction version's tag

    def extracted(self, entries: Sequence[CatalogEntry]) -> set[str]:
        return already_extracted(self.instance, list(entries), self.version)

    def cancelled(self, keys: Sequence[str]) -> set[str]:
        return set(cancelled_documents(self.instance, self.store, list(keys))) if keys else set()


def aggregate_facts(
    instance: dg.DagsterInstance,
    names: tuple[str, ...] = AGGREGATE_ASSET_NAMES,
    catalog: Catalog | None = None,
    decided_at: float = 0.0,
    exported: bool = True,
    policy: str = "",
) -> AggregateFacts:
    """``AggregateFacts`` from the instance: ``names``, the aggregates of this deployment (the evaluation too, when a
    gold file is configured); ``catalog`` and ``decided_at`` (when people last split or joined a duplicate group)
    give the newest change the aggregates read besides the documents; ``exported``: every export file is there;
    ``policy``: what makes a value final now, compared with what the aggregates that depend on it were made with."""
    made, policies = {}, {}
    for name in names:
        event = instance.get_latest_materialization_event(dg.AssetKey(name))
        if event is None or event.asset_materialization is None:
            continue
        read_at = event.asset_materialization.metadata.get(STATES_READ_AT)
        made[name] = (event.timestamp, None if read_at is None else float(read_at.value))
        if name in POLICY_AGGREGATES:
            recorded = event.asset_materialization.metadata.get(FINAL_VALUES_POLICY)
            policies[name] = None if recorded is None else str(recorded.value)
    landings = [
        event.timestamp
        for name in (EXTRACTION_ASSET_NAME, REVIEW_ASSET_NAME)
        if (event := instance.get_latest_materialization_event(dg.AssetKey(name))) is not None
    ]
    changes = [
        datetime.fromisoformat(entry.updated).timestamp() for entry in (catalog.entries.values() if catalog else ())
    ]
    facts = AggregateFacts(
        made=made,
        expected=names,
        landed_at=max(landings) if landings else None,
        changed_at=max([*changes, decided_at]),
        exported=exported,
        policy=policy,
        policies=policies,
    )
    refreshed = facts.refreshed_at
    if refreshed is None:
        return facts
    ended_badly = instance.get_run_records(
        dg.RunsFilter(
            statuses=[dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED],
            updated_after=datetime.fromtimestamp(refreshed, UTC),
        ),
        limit=1,
    )
    return dataclasses.replace(facts, ended_badly=bool(ended_badly))


@dataclass(frozen=True)
class FaultedBatch:
    """A batch run of the sensor that failed before some of its documents were extracted (one raised, a fault): they
    run again one per run, as ``atlas run`` does at once, so a document that raises fails alone."""

    run_id: str
    missed: tuple[str, ...]


def faulted_batches(
    instance: dg.DagsterInstance, since: float, order: Sequence[str]
) -> tuple[list[FaultedBatch], float]:
    """The sensor's failed ``document_batch_job`` runs updated after ``since`` (a timestamp, a minute's overlap kept:
    the run keys make a second request of the same one a no-op), each with the documents whose extraction is not
    materialised now; and the newest update seen. ``order``: the partitions in their order, as the sensor read them
    (a batch's documents are its partition range)."""
    from atlas_pipeline.dagster_internals import AssetPartitionStatus
    from atlas_pipeline.defs.document_runs import documents_of
    from atlas_pipeline.defs.partitions import documents_partitions

    order = list(order)
    records = instance.get_run_records(
        dg.RunsFilter(
            job_name="document_batch_job",
            statuses=[dg.DagsterRunStatus.FAILURE],
            tags={"dagster/sensor_name": "knowledge_base_sensor"},
            updated_after=datetime.fromtimestamp(max(0.0, since - 60), UTC),
        )
    )
    if not records:
        return [], since
    found, newest = [], since
    for record in records:
        updated = record.update_timestamp
        newest = max(newest, (updated if updated.tzinfo else updated.replace(tzinfo=UTC)).timestamp())
        members = sorted(documents_of(record.dagster_run, order))
        statuses = instance.get_status_by_partition(dg.AssetKey(EXTRACTION_ASSET_NAME), members, documents_partitions)
        missed = tuple(key for key in members if (statuses or {}).get(key) != AssetPartitionStatus.MATERIALIZED)
        if missed:
            found.append(FaultedBatch(record.dagster_run.run_id, missed))
    return found, newest
