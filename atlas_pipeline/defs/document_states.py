"""What the Dagster instance says of the documents (partition statuses, failures, cancellations), read for the
document read model (``read_model.states``), which weighs them with the documents' own records.

Partitions are never loaded through an IO manager: missing or failed partitions are exactly what must be counted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import dagster as dg

from atlas_pipeline.core.document_status import RunFacts
from atlas_pipeline.core.redaction import redact
from atlas_pipeline.core.statuses import Stage
from atlas_pipeline.dagster_internals import AssetPartitionStatus, SerializableErrorInfo
from atlas_pipeline.defs.asset_names import (
    DOCUMENT_ASSET_NAMES,
    EXTRACTION_ASSET_NAME,
    REVIEW_ASSET_NAME,
    STATUS_ASSET_NAME,
)
from atlas_pipeline.defs.cancellation import cancelled_documents
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.extraction.version import ExtractionVersion
from atlas_pipeline.knowledge.catalog import Catalog, CatalogEntry, load_catalog
from atlas_pipeline.read_model.document_state import DocumentState
from atlas_pipeline.read_model.states import build_states
from atlas_pipeline.review.derivations import Derivations
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.records import legacy_stage

_EXCEPTION_PREFIX = re.compile(r"^[\w.]*(Error|Failure|Exception)\w*: ")
# what a document's status is read from: the review is merged after it and has its own status (approved or not)
# (the status only mirrors the outcome for the Dagster UI: its failure is the document's, already in its record)
DOCUMENT_ASSET_KEYS = [
    dg.AssetKey(name) for name in DOCUMENT_ASSET_NAMES if name not in (REVIEW_ASSET_NAME, STATUS_ASSET_NAME)
]
EXTRACTION_KEY = dg.AssetKey(EXTRACTION_ASSET_NAME)


def root_cause(error: SerializableErrorInfo) -> str:
    """The first line of the innermost error: Dagster wraps a step's exception ("Error occurred while executing op
    …:") and the exception may wrap its own cause; the person needs the bottom one ("OSError: [Errno 28] No space
    left on device")."""
    while error.cause is not None or (error.context is not None and not error.message.strip()):
        error = error.cause or error.context
    first = (error.message.strip().splitlines() or [error.cls_name or "error"])[0]
    if error.cls_name in ("Failure", "DagsterExecutionStepExecutionError", "SecretInErrorError"):
        first = _EXCEPTION_PREFIX.sub("", first)  # our own messages: the description alone
    return first


INTERRUPTED = ("DagsterExecutionInterruptedError", "KeyboardInterrupt")
INTERRUPTED_REASON = (
    "interrupted: its run was stopped (a signal, or its process died) before the document was done; it runs again "
    "with the next `atlas run` or materialisation"
)


def _interrupted(error: SerializableErrorInfo | None) -> bool:
    while error is not None:
        if error.cls_name in INTERRUPTED:
            return True
        error = error.cause
    return False


def failure_reason(instance: dg.DagsterInstance, asset_key: dg.AssetKey, partition: str) -> tuple[str, bool]:
    """Why the run that last tried to materialise ``asset_key`` for this partition failed, and whether it was only
    interrupted (stopped, or its process died) — then the document is pending, not failed."""
    planned = instance.get_latest_planned_materialization_info(asset_key, partition)
    if planned is None:
        return f"{asset_key.to_user_string()} failed (no run found)", False
    run_id = planned.run_id
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE):
        data = entry.dagster_event.step_failure_data if entry.dagster_event else None
        if data and data.error:
            if _interrupted(data.error):
                return INTERRUPTED_REASON, True
            return redact(f"{asset_key.to_user_string()}: {root_cause(data.error)}"), False
    run = instance.get_run_by_id(run_id)
    status = run.status.value.lower() if run else "unknown"
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_FAILURE):
        if "interrupted" in (entry.dagster_event.message or "" if entry.dagster_event else ""):
            return INTERRUPTED_REASON, True
    return f"{asset_key.to_user_string()}: run {run_id[:8]} ended {status} before the step reported an error", False


@dataclass(frozen=True)
class PartitionFacts:
    """What the Dagster instance says of some documents' partitions — each asset's status, the runs cancelled, why
    a failed step failed — read in one go, so a reader that knows nothing ran since (``instance_stamp``) can keep
    them."""

    keys: tuple[str, ...]
    statuses: dict[dg.AssetKey, dict[str, AssetPartitionStatus]]
    cancelled: dict[str, str]
    failures: dict[str, tuple[str, bool]]  # key → (reason, interrupted) of its first failed asset

    def run_facts(self, key: str) -> RunFacts:
        """What Dagster says of one document, as the read model takes it (``core.document_status``)."""
        per_asset = [self.statuses[asset_key].get(key) for asset_key in DOCUMENT_ASSET_KEYS]
        running = AssetPartitionStatus.IN_PROGRESS in per_asset
        crash, interrupted = ("", False)
        if AssetPartitionStatus.FAILED in per_asset and not running:
            crash, interrupted = self.failures[key]
        return RunFacts(
            running=running,
            crash=crash,
            interrupted=interrupted,
            extracted=self.statuses[EXTRACTION_KEY].get(key) == AssetPartitionStatus.MATERIALIZED,
            cancelled=self.cancelled.get(key, ""),
        )


def partition_facts(instance: dg.DagsterInstance, store: Store, keys: list[str]) -> PartitionFacts:
    statuses = {
        asset_key: instance.get_status_by_partition(asset_key, keys, documents_partitions) or {}
        for asset_key in DOCUMENT_ASSET_KEYS
    }
    failures = {}
    for key in keys:
        failed = [a for a in DOCUMENT_ASSET_KEYS if statuses[a].get(key) == AssetPartitionStatus.FAILED]
        in_progress = any(statuses[a].get(key) == AssetPartitionStatus.IN_PROGRESS for a in DOCUMENT_ASSET_KEYS)
        if failed and not in_progress:
            failures[key] = failure_reason(instance, failed[0], key)
    return PartitionFacts(tuple(keys), statuses, cancelled_documents(instance, store, keys), failures)


def instance_stamp(instance: dg.DagsterInstance) -> tuple[object, ...] | None:
    """Changes whenever anything that ``partition_facts`` reads may have (an asset event, a run's status); None
    where the storage cannot tell cheaply."""
    try:
        newest = instance.get_run_records(limit=1, order_by="update_timestamp", ascending=False)
        run = (newest[0].dagster_run.run_id, newest[0].update_timestamp) if newest else None
        return (instance.event_log_storage.get_maximum_record_id(), run)
    except NotImplementedError:
        return None


def document_states(
    instance: dg.DagsterInstance,
    deployment: Deployment,
    only: list[str] | None = None,
    facts: Callable[[list[str]], PartitionFacts] | None = None,
) -> list[DocumentState]:
    """Where every known document of ``deployment`` (or just ``only``) stands now (``collect_document_states``);
    ``facts``: where the partitions' facts come from (a reader's cache), else read now."""
    store = deployment.store()
    version, tiers = deployment.extraction_version(), deployment.accepted_tiers()
    derivations, catalog = deployment.derivations(), load_catalog(store)
    team = deployment.team_review()
    return collect_document_states(instance, store, catalog, version, only, tiers, derivations, facts, team=team)


def known_keys(instance: dg.DagsterInstance, catalog: Catalog) -> list[str]:
    """Every known document: the partitions, then catalogued documents not yet registered as partitions."""
    keys = list(instance.get_dynamic_partitions(documents_partitions.name))
    known = set(keys)
    return keys + [key for key in catalog.entries if key not in known]


def collect_document_states(
    instance: dg.DagsterInstance,
    store: Store,
    catalog: Catalog,
    version: ExtractionVersion | None = None,
    only: list[str] | None = None,
    accepted_tiers: frozenset[str] = frozenset({"verified"}),
    derivations: Derivations | None = None,
    facts: Callable[[list[str]], PartitionFacts] | None = None,
    marks: Mapping[str, str] | None = None,
    team: bool = False,
) -> list[DocumentState]:
    """One state per known document partition (plus catalogued documents not yet registered as partitions; ``only``:
    just these documents): Dagster's facts read here, the states built by the read model (``read_model.states``)."""
    keys = list(only) if only is not None else known_keys(instance, catalog)
    read = facts(keys) if facts is not None else partition_facts(instance, store, keys)
    runs = {key: read.run_facts(key) for key in keys}
    every = only is None
    return build_states(
        store, catalog, runs, version, accepted_tiers, derivations, every_document=every, marks=marks, team=team
    )


RECORDS_PER_READ = 1000  # Dagster reads at most 10,000 event records at once; a tick may plan 10,000 documents


def latest_extractions(instance: dg.DagsterInstance, keys: list[str]) -> dict[str, dg.AssetMaterialization]:
    """Each partition's newest ``document_extraction`` materialisation: the storage id of each partition's latest
    event (one indexed query), then those records, a thousand at a time — one document materialised a hundred times
    never hides another's latest, and a tick of 10,000 documents stays inside Dagster's limit per read."""
    latest: dict[str, dg.AssetMaterialization] = {}
    for start in range(0, len(keys), RECORDS_PER_READ):
        chunk = set(keys[start : start + RECORDS_PER_READ])
        ids = instance.get_latest_storage_id_by_partition(
            EXTRACTION_KEY, dg.DagsterEventType.ASSET_MATERIALIZATION, chunk
        )
        if not ids:
            continue
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=EXTRACTION_KEY, storage_ids=list(ids.values())), limit=len(ids)
        ).records
        for record in records:
            materialization = record.asset_materialization
            if materialization is not None and materialization.partition:
                latest[materialization.partition] = materialization
    return latest


def already_extracted(instance: dg.DagsterInstance, entries: list[CatalogEntry], version: str) -> set[str]:
    """Keys whose latest extraction was made from these very bytes (or, for a source that is never read, for the
    same reason) with this extraction version — by the sensor, ``atlas run`` or the UI — so running them again would
    redo the same work. A document whose extraction failed for a reason outside it (the LLM endpoint) is not among
    them: running it again may succeed; nor is one whose last run failed at a step (a fault, seen as `failed`)."""
    if not entries:
        return set()
    keys = [entry.key for entry in entries]
    faulted = {
        key
        for asset_key in DOCUMENT_ASSET_KEYS
        for key, status in (instance.get_status_by_partition(asset_key, keys, documents_partitions) or {}).items()
        if status == AssetPartitionStatus.FAILED
    }
    latest = latest_extractions(instance, keys)
    done = set()
    for entry in entries:
        materialization = latest.get(entry.key)
        if materialization is None or (materialization.tags or {}).get("dagster/code_version") != version:
            continue
        if entry.key in faulted:
            continue
        metadata = materialization.metadata
        reason = str(metadata["reason"].value) if "reason" in metadata else ""
        stopped = metadata.get("stopped_at")
        stage = (stopped.value or None) if stopped is not None else legacy_stage(reason)
        if stage == Stage.EXTRACT:  # the LLM step failed: worth another try
            continue
        retryable = metadata.get("retryable")
        if retryable is not None and retryable.value:  # a parsing provider failed: worth another try too
            continue
        if entry.problem:
            if entry.problem in reason:
                done.add(entry.key)
            continue
        sha = metadata.get("sha256")  # per partition, also in batched runs
        made_from = sha.value if sha is not None else (materialization.tags or {}).get("dagster/data_version", "")
        if entry.sha256 and str(made_from).startswith(entry.sha256):
            done.add(entry.key)
    return done
