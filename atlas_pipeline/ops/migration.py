"""Moving a deployment up without loss: embedded default (SQLite + local folders) → PostgreSQL + S3, or any
instance/store pair to any other.

Two independent parts, both idempotent (run again after an interruption and it resumes):

* ``copy_store`` copies every object of an artifact or export store, verifying each copy by sha256 after the write;
  objects already present with the same checksum are left alone, and an object present with other bytes stops the
  migration (the target has moved on; nothing of it is overwritten).
* ``copy_instance`` copies the Dagster history: dynamic partitions, every run with its snapshots and full event log
  (materialisations, failures, asset checks, logs), sensor and schedule state (cursors) and backfills. Because the
  history is copied rather than summarised, partition statuses, failure reasons, data and code versions and the
  sensor's memory of what it requested are the same on the new instance.

``verify_instance`` then compares what each asset has materialised on both sides, and ``verify_runs`` every run's
status and number of events: a migration killed at any point and run again ends with both sides equal, event for
event (a run found half-copied — its row written, not all its events — is deleted and copied again), and every run
keeps its creation time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

import dagster as dg

from atlas_pipeline.core.errors import AtlasError
from atlas_pipeline.dagster_internals import NOT_FINISHED_STATUSES, datetime_from_timestamp, run_storage_tables
from atlas_pipeline.read_model.document_state import DocumentState
from atlas_pipeline.store.files import Store

Progress = Callable[[str], None]


class MigrationError(AtlasError, RuntimeError):
    """The migration cannot go on safely; the message says why and what to do."""


@dataclass
class StoreCopyReport:
    source: str
    target: str
    objects: int = 0
    copied: int = 0
    already_present: int = 0
    kept_derived: int = 0
    bytes_copied: int = 0
    checksums: dict[str, str] = field(default_factory=dict)  # relative path → sha256 (verified on both sides)


@dataclass
class InstanceCopyReport:
    partitions_added: dict[str, int] = field(default_factory=dict)
    runs: int = 0
    runs_copied: int = 0
    runs_repaired: int = 0  # half-copied by an interrupted migration, copied again
    events_copied: int = 0
    snapshots_copied: int = 0
    instigator_states: int = 0
    backfills: int = 0


@dataclass
class AssetComparison:
    asset_key: str
    source_materialized: int
    target_materialized: int
    same: bool


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def copy_store(
    source: Store,
    target: Store,
    progress: Progress | None = None,
    derived: Callable[[str], bool] = lambda relative: False,
) -> StoreCopyReport:
    """Copy every object from ``source`` to ``target`` and check each one by sha256 after writing it. An object the
    target holds with other bytes stops the copy — unless ``derived(path)``: then the target recomputed it from its
    own history (aggregates, exports) and its version is kept."""
    report = StoreCopyReport(source=source.location, target=target.location)
    paths = source.files()
    report.objects = len(paths)
    for number, relative in enumerate(paths, start=1):
        data = source.read_bytes(relative)
        digest = _sha256(data)
        present = _sha256(target.read_bytes(relative)) if target.exists(relative) else None
        if present == digest:
            report.already_present += 1
        elif present is not None and derived(relative):
            report.kept_derived += 1  # the target recomputed it (an aggregate, an export): it is its own now
        elif present is not None:
            raise MigrationError(
                f"{target.url(relative)} already exists with other bytes than {source.url(relative)}: the new "
                "deployment has moved on since an earlier migration, so nothing there is overwritten. Migrate "
                "into empty stores (and a new DAGSTER_HOME/database), or remove the target first."
            )
        else:
            target.write_bytes(relative, data)
            written = _sha256(target.read_bytes(relative))
            if written != digest:
                raise MigrationError(
                    f"checksum mismatch after copying {relative} to {target.url(relative)}: "
                    f"{digest} written, {written} read back"
                )
            report.copied += 1
            report.bytes_copied += len(data)
        report.checksums[relative] = digest
        if progress and (number % 200 == 0 or number == len(paths)):
            progress(f"{source.location} → {target.location}: {number}/{len(paths)} objects")
    return report


def unfinished_runs(instance: dg.DagsterInstance) -> list[dg.DagsterRun]:
    """Runs whose history is still being written (queued, starting, running, cancelling)."""
    statuses = [status for status in NOT_FINISHED_STATUSES if status != dg.DagsterRunStatus.NOT_STARTED]
    return list(instance.get_runs(dg.RunsFilter(statuses=statuses)))


def copy_instance(
    source: dg.DagsterInstance,
    target: dg.DagsterInstance,
    partition_names: list[str],
    progress: Progress | None = None,
) -> InstanceCopyReport:
    """Copy partitions, runs with their event logs, instigator state and backfills from ``source`` to ``target``.

    Refuses while the source has queued or running runs: their history is not final yet."""
    running = unfinished_runs(source)
    if running:
        listed = ", ".join(f"{run.run_id[:8]} ({run.status.value})" for run in running[:5])
        raise MigrationError(
            f"{len(running)} run(s) on the source instance have not finished: {listed}. Stop the daemon "
            "(`atlas dev`/dagster-daemon), let them finish or terminate them, then migrate again."
        )
    report = InstanceCopyReport()
    for name in partition_names:
        present = set(target.get_dynamic_partitions(name))
        missing = [key for key in source.get_dynamic_partitions(name) if key not in present]
        if missing:
            target.add_dynamic_partitions(name, missing)
        report.partitions_added[name] = len(missing)

    runs = list(source.get_runs(ascending=True))  # oldest first: the newest materialisation stays the latest
    report.runs = len(runs)
    for number, run in enumerate(runs, start=1):
        events = source.all_logs(run.run_id)
        if target.has_run(run.run_id):
            if _same_run(target, run, len(events)):
                continue
            # an interrupted copy left this run half there (no events, some, or not its final status): again
            _forget_run(target, run.run_id)
            report.runs_repaired += 1
        _copy_run(source, target, run, events, report)
        if progress and (number % 50 == 0 or number == len(runs)):
            progress(f"runs: {number}/{len(runs)} ({report.events_copied} events copied)")

    for state in source.all_instigator_state():
        if target.get_instigator_state(state.instigator_origin_id, state.selector_id) is None:
            target.add_instigator_state(state)
        else:
            target.update_instigator_state(state)
        report.instigator_states += 1
    for backfill in source.get_backfills():
        if target.get_backfill(backfill.backfill_id) is None:
            target.add_backfill(backfill)
            report.backfills += 1
    return report


def _same_run(target: dg.DagsterInstance, run: dg.DagsterRun, events: int) -> bool:
    """Is ``run`` on the target whole: its final status and every one of its events?"""
    copied = target.get_run_by_id(run.run_id)
    return copied is not None and copied.status == run.status and len(target.all_logs(run.run_id)) == events


def _copy_run(
    source: dg.DagsterInstance,
    target: dg.DagsterInstance,
    run: dg.DagsterRun,
    events: list,
    report: InstanceCopyReport,
) -> None:
    """One run with its snapshots and events, and its creation time kept. A copy killed half-way is detected and
    redone by the next migration (``_same_run``)."""
    for snapshot_id, load in (
        (run.job_snapshot_id, source.get_job_snapshot),
        (run.execution_plan_snapshot_id, source.get_execution_plan_snapshot),
    ):
        if snapshot_id and not target.has_snapshot(snapshot_id):
            target.add_snapshot(load(snapshot_id))
            report.snapshots_copied += 1
    target.add_run(run)
    record = source.get_run_record_by_id(run.run_id)
    if record is not None:
        _keep_creation_time(target, run.run_id, record.create_timestamp)
    handles_run_events = target.event_log_storage.handles_run_events_in_store_event
    for event in events:
        target.store_event(event)
        dagster_event = event.dagster_event
        if not handles_run_events and dagster_event is not None and dagster_event.is_job_event:
            # run start/end times and status live in the run storage, updated from these events
            target.run_storage.handle_run_event(run.run_id, dagster_event, datetime_from_timestamp(event.timestamp))
        report.events_copied += 1
    report.runs_copied += 1


def _forget_run(target: dg.DagsterInstance, run_id: str) -> None:
    """Remove a half-copied run: its row, its events, and the asset-check executions its events recorded (which
    Dagster's ``delete_run`` leaves behind)."""
    _, AssetCheckExecutionsTable = run_storage_tables()

    target.delete_run(run_id)
    index_connection = getattr(target.event_log_storage, "index_connection", None)
    if index_connection is not None:
        with index_connection() as connection:
            connection.execute(AssetCheckExecutionsTable.delete().where(AssetCheckExecutionsTable.c.run_id == run_id))


def _keep_creation_time(target: dg.DagsterInstance, run_id: str, created: object) -> None:
    """The run's creation time on the source (a run storage stamps the time of the insert otherwise)."""
    RunsTable, _ = run_storage_tables()

    storage = target.run_storage
    connect = getattr(storage, "connect", None)
    if connect is None:  # a run storage that is not SQL: nothing to correct
        return
    with connect() as connection:
        connection.execute(RunsTable.update().where(RunsTable.c.run_id == run_id).values(create_timestamp=created))


@dataclass
class RunComparison:
    run_id: str
    source_status: str
    target_status: str
    source_events: int
    target_events: int


def verify_runs(source: dg.DagsterInstance, target: dg.DagsterInstance) -> list[RunComparison]:
    """Every source run whose status or number of events differs on the target (or that is missing there)."""
    differences = []
    for run in source.get_runs():
        copied = target.get_run_by_id(run.run_id)
        events = len(source.all_logs(run.run_id))
        copied_events = len(target.all_logs(run.run_id)) if copied is not None else 0
        if copied is None or copied.status != run.status or copied_events != events:
            status = copied.status.value if copied is not None else "missing"
            differences.append(RunComparison(run.run_id, run.status.value, status, events, copied_events))
    return differences


def verify_instance(source: dg.DagsterInstance, target: dg.DagsterInstance) -> list[AssetComparison]:
    """Per asset: the materialised partitions (or, unpartitioned, the latest materialisation) on both sides."""
    comparisons = []
    for asset_key in sorted(source.get_asset_keys(), key=lambda k: k.to_user_string()):
        before, after = source.get_materialized_partitions(asset_key), target.get_materialized_partitions(asset_key)
        if before or after:
            same, counts = before == after, (len(before), len(after))
        else:
            old, new = (
                source.get_latest_materialization_event(asset_key),
                target.get_latest_materialization_event(asset_key),
            )
            same = (old is None) == (new is None) and (old is None or old.timestamp == new.timestamp)
            counts = (int(old is not None), int(new is not None))
        comparisons.append(AssetComparison(asset_key.to_user_string(), counts[0], counts[1], same))
    return comparisons


def changed_documents(
    before: list[DocumentState], after: list[DocumentState]
) -> list[tuple[str, tuple[str, str] | None, tuple[str, str] | None]]:
    """Documents whose (status, reason) differs between the two deployments (None: unknown on that side)."""
    old = {state.key: (state.status.value, state.reason) for state in before}
    new = {state.key: (state.status.value, state.reason) for state in after}
    return [
        (key, old.get(key), new.get(key)) for key in sorted(old.keys() | new.keys()) if old.get(key) != new.get(key)
    ]
