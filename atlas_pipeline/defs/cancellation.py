"""Cancelling documents that wait in the run queue, and telling which documents were cancelled.

A person cancels a queued document with ``atlas cancel KEY`` (or terminates its queued run in the Dagster UI —
Dagster's own run termination). A run that is already processing the document is refused: a document half
processed would leave its records from two parses. The cancelled run stays in Dagster's history as ``CANCELED``; a
document whose newest run was cancelled, and that has no extraction made after it, is ``cancelled`` — a terminal
status with who and when, counted by the aggregates — until it runs again (``atlas run KEY``, or a materialisation
in the UI). ``atlas cancel`` writes who and when to ``documents/<key>/cancellation.json``; for a run cancelled in the
UI, Dagster keeps when, not who.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import dagster as dg
from pydantic import BaseModel

from atlas_pipeline.core.clock import now_iso
from atlas_pipeline.core.errors import AtlasError
from atlas_pipeline.dagster_internals import PARTITION_NAME_TAG
from atlas_pipeline.defs.document_runs import documents_of
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.records import ExtractionRecord, read_record, write_record

QUEUED = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED]
RUNNING = [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]
STAGE = "cancellation"
CANCELLABLE_JOBS = ("document_job", "document_batch_job")  # a review merge is not a document's processing
RUNS_LOOKED_AT = 5000  # the newest runs of each kind: an older cancelled run has been followed by others


class Cancellation(BaseModel):
    """Who cancelled a document's queued run, and when (``atlas cancel``)."""

    key: str
    run_id: str
    cancelled_by: str
    cancelled_at: str
    how: str = "atlas cancel"


@dataclass(frozen=True)
class Cancelled:
    key: str
    run_id: str
    queued_since: str


class CancelRefused(AtlasError):
    """The document cannot be cancelled now; the message says why and what to do. ``cancelled``: what was cancelled
    before the refusal (a run that started at the same moment is found only while cancelling)."""

    def __init__(self, message: str, cancelled: list[Cancelled] | None = None) -> None:
        super().__init__(message)
        self.cancelled = cancelled or []


def _when(timestamp: float | datetime | None) -> str:
    if timestamp is None:
        return "?"
    moment = timestamp if isinstance(timestamp, datetime) else datetime.fromtimestamp(timestamp, UTC)
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Order:
    """The partition order, read once and only if a batched run (a partition range) asks for it."""

    def __init__(self, instance: dg.DagsterInstance) -> None:
        self.instance = instance
        self.keys: list[str] | None = None

    def documents_of(self, run: dg.DagsterRun) -> set[str]:
        if PARTITION_NAME_TAG in run.tags:
            return {run.tags[PARTITION_NAME_TAG]}
        if self.keys is None:
            self.keys = list(self.instance.get_dynamic_partitions(documents_partitions.name))
        return documents_of(run, self.keys)


def _runs_on(
    instance: dg.DagsterInstance, statuses: list[dg.DagsterRunStatus], keys: set[str], order: _Order
) -> dict[str, list[dg.RunRecord]]:
    found: dict[str, list[dg.RunRecord]] = {}
    for record in instance.get_run_records(dg.RunsFilter(statuses=statuses), limit=RUNS_LOOKED_AT):
        if record.dagster_run.job_name not in CANCELLABLE_JOBS:
            continue
        for key in order.documents_of(record.dagster_run) & keys:
            found.setdefault(key, []).append(record)
    return found


def cancel_documents(instance: dg.DagsterInstance, store: Store, keys: list[str], by: str) -> list[Cancelled]:
    """Cancel the queued runs of ``keys``; raise ``CancelRefused`` (before cancelling anything) when one of them is
    being processed, has no queued run, or waits in a batched run with documents not named."""
    wanted = set(keys)
    order = _Order(instance)
    running = _runs_on(instance, RUNNING, wanted, order)
    queued = _runs_on(instance, QUEUED, wanted, order)
    known = set(instance.get_dynamic_partitions(documents_partitions.name))
    problems = []
    for key in keys:
        if key in running:
            run = running[key][0]
            problems.append(
                f"{key}: run {run.dagster_run.run_id[:8]} is processing it (since {_when(run.start_time)}): a running "
                "document cannot be cancelled; it ends on its own (done, failed) — or terminate the whole run in the "
                "Dagster UI"
            )
        elif key not in queued and key not in known:
            shown = ", ".join(sorted(known)[:5]) + (" …" if len(known) > 5 else "") or "none yet"
            problems.append(f"{key}: no such document (known: {shown}; `atlas status --documents` lists them)")
        elif key not in queued:
            problems.append(f"{key}: no queued run: nothing to cancel (`atlas status --documents` shows where it is)")
        else:
            for record in queued[key]:
                others = sorted(order.documents_of(record.dagster_run) - wanted)
                if others:
                    problems.append(
                        f"{key}: it waits in run {record.dagster_run.run_id[:8]} with {len(others)} other document(s) "
                        f"({', '.join(others[:5])}{' …' if len(others) > 5 else ''}): name them too to cancel that run"
                    )
    if problems:
        raise CancelRefused("\n".join(problems))
    done: list[Cancelled] = []
    cancelled_runs: set[str] = set()
    for key in keys:
        for record in queued[key]:
            run = record.dagster_run
            if run.run_id not in cancelled_runs:
                current = instance.get_run_by_id(run.run_id)
                if current is not None and current.status in QUEUED:
                    instance.report_run_canceled(current, message=f"cancelled with `atlas cancel` by {by}")
                current = instance.get_run_by_id(run.run_id)
                if current is None or current.status != dg.DagsterRunStatus.CANCELED:
                    status = current.status.value if current else "gone"
                    raise CancelRefused(
                        f"{key}: run {run.run_id[:8]} started before the cancel landed ({status})", done
                    )
                cancelled_runs.add(run.run_id)
            write_record(
                store, key, STAGE, Cancellation(key=key, run_id=run.run_id, cancelled_by=by, cancelled_at=now_iso())
            )
            done.append(Cancelled(key, run.run_id, _when(record.create_timestamp)))
    return done


def cancelled_documents(instance: dg.DagsterInstance, store: Store, keys: list[str]) -> dict[str, str]:
    """The documents among ``keys`` whose newest run was cancelled and that have no extraction made since, with the
    reason (who, when, how) their status carries."""
    canceled = _runs_on(instance, [dg.DagsterRunStatus.CANCELED], set(keys), _Order(instance))
    reasons = {}
    for key, records in canceled.items():
        newest = max(records, key=lambda record: record.create_timestamp)
        planned = instance.get_latest_planned_materialization_info(dg.AssetKey("document_snapshot"), key)
        if planned is not None and planned.run_id != newest.dagster_run.run_id:
            continue  # a newer run was asked for since
        extraction = read_record(store, key, "extraction", ExtractionRecord)
        created, updated = (
            (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
            for moment in (newest.create_timestamp, newest.update_timestamp)
        )
        cancelled_at = updated
        # extracted by that run before it was stopped (a batch terminated midway), or by a later one: not cancelled
        if extraction is not None and datetime.fromisoformat(extraction.extracted_at).timestamp() >= created:
            continue
        run_id = newest.dagster_run.run_id
        note = read_record(store, key, STAGE, Cancellation)
        if note is not None and note.run_id == run_id:
            by, at = note.cancelled_by, note.cancelled_at
            reasons[key] = f"cancelled by {by} at {at} with `{note.how}` while queued (run {run_id[:8]})"
        elif newest.start_time:
            reasons[key] = f"its run {run_id[:8]} was terminated in Dagster at {_when(cancelled_at)} while running"
        else:
            reasons[key] = (
                f"cancelled in Dagster at {_when(cancelled_at)} while queued (run {run_id[:8]}; Dagster does not "
                "record who)"
            )
        reasons[key] += f"; `atlas run --only {key}` runs it again"
    return reasons
