"""Where each known document stands, read from the Dagster instance (partition statuses) and the small records.

Partitions are never loaded through an IO manager: missing or failed partitions are exactly what must be counted.
"""

from __future__ import annotations

import re

import dagster as dg
from dagster._core.storage.partition_status_cache import AssetPartitionStatus

from atlas_pipeline.catalog import Catalog
from atlas_pipeline.completion import DocumentState
from atlas_pipeline.defs.document_assets import DOCUMENT_ASSET_NAMES
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.extraction.version import ExtractionVersion
from atlas_pipeline.records import ExtractionRecord, ParseRecord, SnapshotRecord, read_record
from atlas_pipeline.status import DocumentStatus
from atlas_pipeline.storage import Store

_EXCEPTION_PREFIX = re.compile(r"^[\w.]*(Error|Failure|Exception)\w*: ")
DOCUMENT_ASSET_KEYS = [dg.AssetKey(name) for name in DOCUMENT_ASSET_NAMES]


def failure_reason(instance: dg.DagsterInstance, asset_key: dg.AssetKey, partition: str) -> str:
    """The error message of the run that last tried (and failed) to materialise ``asset_key`` for this partition."""
    planned = instance.get_latest_planned_materialization_info(asset_key, partition)
    if planned is None:
        return f"{asset_key.to_user_string()} failed (no run found)"
    run_id = planned.run_id
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE):
        data = entry.dagster_event.step_failure_data if entry.dagster_event else None
        if data and data.error:
            lines = data.error.message.strip().splitlines() or ["error"]
            return f"{asset_key.to_user_string()}: {_EXCEPTION_PREFIX.sub('', lines[0])}"
    run = instance.get_run_by_id(run_id)
    status = run.status.value.lower() if run else "unknown"
    return f"{asset_key.to_user_string()}: run {run_id[:8]} ended {status} before the step reported an error"


def collect_document_states(
    instance: dg.DagsterInstance, store: Store, catalog: Catalog, version: ExtractionVersion | None = None
) -> list[DocumentState]:
    """One state per known document partition (plus catalogued documents not yet registered as partitions).

    An extraction made with another extraction ``version`` (template, custom fields or instructions, strategy,
    mode, model, prompt, grading) is stale: the document counts as pending and its old values stay out of the
    exports, so two versions are never mixed."""
    keys = list(instance.get_dynamic_partitions(documents_partitions.name))
    known = set(keys)
    keys += [key for key in catalog.entries if key not in known]
    statuses = {
        asset_key: instance.get_status_by_partition(asset_key, keys, documents_partitions) or {}
        for asset_key in DOCUMENT_ASSET_KEYS
    }
    states = []
    for key in keys:
        entry = catalog.entries.get(key)
        per_asset = {asset_key: statuses[asset_key].get(key) for asset_key in DOCUMENT_ASSET_KEYS}
        state = DocumentState(
            key=key,
            status=DocumentStatus.PENDING,
            reason="known, not processed yet",
            source_path=entry.source_path if entry else None,
            source_removed=bool(entry and entry.removed),
            snapshot=read_record(store, key, "snapshot", SnapshotRecord),
            parse=read_record(store, key, "parse", ParseRecord),
            extraction=read_record(store, key, "extraction", ExtractionRecord),
        )
        failed = [k for k, s in per_asset.items() if s == AssetPartitionStatus.FAILED]
        if any(s == AssetPartitionStatus.IN_PROGRESS for s in per_asset.values()):
            state.status, state.reason = DocumentStatus.EXTRACTING, "a run is processing it"
        elif failed:
            state.status, state.reason = DocumentStatus.FAILED, failure_reason(instance, failed[0], key)
        elif per_asset[DOCUMENT_ASSET_KEYS[-1]] == AssetPartitionStatus.MATERIALIZED and state.extraction:
            state.status = DocumentStatus(state.extraction.status)
            state.reason = state.extraction.reason
            document_problem = state.extraction.reason.startswith(("snapshot:", "parse:"))
            if version and state.extraction.extraction_version != version.tag and not document_problem:
                state.status, state.stale = DocumentStatus.PENDING, True
                changed = version.changes_from(state.extraction.version_parts) or ["version"]
                state.reason = (
                    f"stale: extracted with version {state.extraction.extraction_version or 'unknown'}, now "
                    f"{version.tag} ({', '.join(changed)} changed); re-extraction pending"
                )
        states.append(state)
    return states
