"""One run per document at a time: a run waits while an older run is still processing one of its documents.

The sensor, `atlas run`, a batched run and a click in the UI can each start a run for the same document; two at once
would write each other's records (``documents/<key>/…``) with different bytes or parses. Before its first step
touches a document, a run looks for older runs of the document jobs still going on any of its documents (a run's
``dagster/partition`` tag, or its partition range) and waits for them to finish; the older run goes first, always
(the run storage's row id: creation order), so two runs never wait for each other. The second then finds the parse
and the LLM answers cached: the work is not done twice.
"""

from __future__ import annotations

import time
from datetime import UTC

import dagster as dg

from atlas_pipeline.dagster_internals import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    PARTITION_NAME_TAG,
)
from atlas_pipeline.defs.partitions import documents_partitions

DOCUMENT_JOBS = ("document_job", "document_batch_job", "review_job")
ACTIVE = [dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
# runs that still have work ahead, queued ones included: the backlog collectors pace against, and what the
# aggregates' catch-up waits for
WAITING_OR_RUNNING = [dg.DagsterRunStatus.QUEUED, *ACTIVE]
# a run created a moment ago and about to start counts too (two `atlas run` at once: the older may not have started
# when the younger looks); one left NOT_STARTED longer than this was never launched and blocks nothing
NOT_STARTED_GRACE_SECONDS = 120.0
POLL_SECONDS = 1.0
MAX_WAIT_SECONDS = 3600.0  # a run that never ends (its process lost, not yet reaped) does not block for ever


def documents_of(run: dg.DagsterRun, order: list[str]) -> set[str]:
    if PARTITION_NAME_TAG in run.tags:
        return {run.tags[PARTITION_NAME_TAG]}
    start, end = run.tags.get(ASSET_PARTITION_RANGE_START_TAG), run.tags.get(ASSET_PARTITION_RANGE_END_TAG)
    if start in order and end in order:
        return set(order[order.index(start) : order.index(end) + 1])
    return set()


def older_runs_on(instance: dg.DagsterInstance, run_id: str, keys: list[str]) -> list[dg.DagsterRun]:
    """Runs of the document jobs, older than ``run_id`` and still going, that process one of ``keys``."""
    own = instance.get_run_record_by_id(run_id)
    if own is None:
        return []
    order = list(instance.get_dynamic_partitions(documents_partitions.name))
    wanted = set(keys)
    blocking = []
    for record in instance.get_run_records(dg.RunsFilter(statuses=ACTIVE, job_name=None)):
        run = record.dagster_run
        if run.run_id == run_id or run.job_name not in DOCUMENT_JOBS:
            continue
        created = record.create_timestamp
        created = created if created.tzinfo else created.replace(tzinfo=UTC)  # stored as UTC
        if (
            run.status == dg.DagsterRunStatus.NOT_STARTED
            and time.time() - created.timestamp() > NOT_STARTED_GRACE_SECONDS
        ):
            continue
        # the storage's row id, not the creation time: SQLite stores that to the second, and two runs created in the
        # same second would be ordered by their random ids — not the order in which they were created
        older = record.storage_id < own.storage_id
        if older and wanted & documents_of(run, order):
            blocking.append(run)
    return blocking


def wait_for_older_runs(context: dg.AssetExecutionContext, keys: list[str], max_wait: float = MAX_WAIT_SECONDS) -> None:
    """Block until no older run is processing any of ``keys`` (logging what it waits for), or ``max_wait``."""
    deadline = time.monotonic() + max_wait
    announced: set[str] = set()
    while True:
        blocking = older_runs_on(context.instance, context.run_id, keys)
        if not blocking:
            return
        new = [run.run_id for run in blocking if run.run_id not in announced]
        if new:
            context.log.info(
                f"waiting for run(s) {', '.join(r[:8] for r in new)}: they are processing the same document(s)"
            )
            announced.update(new)
        if time.monotonic() > deadline:
            context.log.warning(f"still waiting after {max_wait:.0f} s: going on beside them")
            return
        time.sleep(POLL_SECONDS)
