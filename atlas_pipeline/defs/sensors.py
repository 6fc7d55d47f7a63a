"""Sensors: the knowledge-base scanner that adds partitions and requests runs, the review sensor that imports
reviewed workbooks and re-merges documents people decided on, and the automation sensor."""

import hashlib
import json
import time

import dagster as dg

from atlas_pipeline.core.statuses import DocumentStatus
from atlas_pipeline.dagster_internals import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from atlas_pipeline.defs.aggregate_assets import GROUP as AGGREGATES_GROUP
from atlas_pipeline.defs.asset_names import AGGREGATE_ASSET_NAMES
from atlas_pipeline.defs.document_runs import DOCUMENT_JOBS, WAITING_OR_RUNNING
from atlas_pipeline.defs.jobs import aggregates_job, document_batch_job, document_job, review_job
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.defs.resources import AtlasResource
from atlas_pipeline.defs.run_history import InstanceFacts, aggregate_facts, faulted_batches
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.knowledge.catalog import CatalogEntry, refresh_catalog
from atlas_pipeline.knowledge.duplicate_records import load_splits
from atlas_pipeline.knowledge.listing import KnowledgeBaseError
from atlas_pipeline.knowledge.planning import (
    RunPlan,
    StepKind,
    aggregates_missed,
    plan_batches,
    plan_runs,
    plan_steps,
    reviews_to_merge,
)
from atlas_pipeline.review.decisions import decision_marks
from atlas_pipeline.review.final_values import merged_marks
from atlas_pipeline.review.study_values import choices_changed_at
from atlas_pipeline.store.records import ExtractionRecord, read_record
from atlas_pipeline.store.sensor_marks import SensorMarks

FAULTS_SEEN_MARK = ":faulted-batches-seen"  # in the cursor beside the documents (keys have no ':'): runs looked at
SHOWN_ALIASES = 20  # an observation names a document's first copies and counts the rest (100k copies: no 1.6 MB)


def _aliases_shown(aliases: list[str]) -> str:
    if not aliases:
        return "none"
    more = f" … and {len(aliases) - SHOWN_ALIASES} more" if len(aliases) > SHOWN_ALIASES else ""
    return ", ".join(aliases[:SHOWN_ALIASES]) + more


def document_run_request(batch: list[CatalogEntry], tag: str) -> dg.RunRequest:
    """The run of one batch: ``document_job`` for a document alone (its run key is its bytes' and the extraction's
    version), ``document_batch_job`` over the partition range for several (its key names every member's)."""
    if len(batch) == 1:
        (entry,) = batch
        return dg.RunRequest(
            run_key=f"{entry.run_key}:{tag}",
            partition_key=entry.key,
            job_name=document_job.name,
            tags={"atlas/sha256": entry.sha256},
        )
    members = hashlib.sha256("\n".join(entry.run_key for entry in batch).encode()).hexdigest()[:16]
    return dg.RunRequest(
        run_key=f"batch:{members}:{tag}",
        job_name=document_batch_job.name,
        tags={
            ASSET_PARTITION_RANGE_START_TAG: batch[0].key,
            ASSET_PARTITION_RANGE_END_TAG: batch[-1].key,
            "atlas/documents": str(len(batch)),
        },
    )


def build_knowledge_base_sensor(deployment: Deployment, extraction_version: str = "") -> dg.SensorDefinition:
    """``extraction_version`` (the tag of ``extraction.version``) is part of every run key: when it changes, every
    document is requested again (parses are cached, so only the extraction is redone)."""
    pace = deployment.pace()
    tag = hashlib.sha256(extraction_version.encode()).hexdigest()[:8]

    @dg.sensor(
        name="knowledge_base_sensor",
        jobs=[document_job, document_batch_job, aggregates_job],
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=pace.scan_interval_seconds,
        description="Scans the knowledge base: adds a partition per new document and requests runs for every new or "
        "edited version (run_key = key:fingerprint:extraction version), several documents a run when a model "
        "extracts (ATLAS_DOCUMENTS_PER_RUN). Removed sources are flagged, never deleted; "
        "a removal, restoration or duplicate refreshes the aggregates and is recorded on the document's snapshot.",
    )
    def knowledge_base_sensor(context: dg.SensorEvaluationContext, atlas: AtlasResource) -> dg.SensorResult:
        store = atlas.deployment.store()
        try:
            scan = refresh_catalog(atlas.deployment.open_knowledge_base(), store, pace.scan_budget_seconds)
        except KnowledgeBaseError as error:  # gone (an unmounted share, a deleted bucket): say so, keep every result
            context.log.error(f"{error}; nothing is scanned until it is back (results so far are kept)")
            return dg.SensorResult(skip_reason=f"{error}: nothing scanned, results kept", cursor=context.cursor)
        book = SensorMarks(store, "knowledge_base_sensor")  # key → ``fingerprint:extraction tag`` requested already
        requested, extra = book.read(context.cursor)
        known = context.instance.get_dynamic_partitions(documents_partitions.name)  # in the partition order
        existing = set(known)
        marks = {entry.key: f"{entry.fingerprint}:{tag}" for entry in scan.catalog.active()}
        asked = {key for key, mark in marks.items() if requested.get(key) == mark}
        plan = plan_runs(
            scan.catalog,
            existing,
            InstanceFacts(context.instance, store, extraction_version),
            asked_already=asked,
            limit=pace.max_runs_per_tick,
            leave_cancelled=False,  # a cancellation was of one queued run: new bytes are a new request
        )
        # a source removed, restored or duplicated changes no document's run, but it changes what the aggregates
        # and the exports say: they are refreshed now, and the document's own history says it
        entries = {entry.key: entry for entry in plan.to_run}
        catalog_changes = [*scan.removed, *scan.restored, *scan.moved, *(key for _, key in scan.duplicates)]
        steps = {step.kind: step for step in plan_steps(plan, catalog_changed=bool(catalog_changes), automated=True)}
        to_add = list(steps[StepKind.ADD_PARTITIONS].keys) if StepKind.ADD_PARTITIONS in steps else []
        # the EXTRACT step's documents, a run per batch of partitions consecutive in the partition order (the new
        # ones are added in this order, after those the instance knows): one document alone in a run of its own
        order = [*known, *to_add]
        batches = plan_batches([e.key for e in plan.to_run], order, atlas.deployment.documents_per_run())
        run_requests = [document_run_request([entries[key] for key in batch], tag) for batch in batches]
        # a batch that faulted (a document raised): its documents not extracted run again, one per run
        faulted, seen = faulted_batches(context.instance, float(extra.get(FAULTS_SEEN_MARK) or 0), known)
        for batch in faulted:
            for key in batch.missed:
                entry = scan.catalog.entries.get(key)
                if entry is not None and not entry.removed and key not in entries:
                    run_requests.append(
                        dg.RunRequest(
                            run_key=f"{entry.run_key}:{tag}:alone-after:{batch.run_id}",
                            partition_key=key,
                            job_name=document_job.name,
                            tags={"atlas/sha256": entry.sha256, "atlas/after_batch": batch.run_id},
                        )
                    )
        # made already (e.g. by `atlas run`) from these bytes with this version: marked, nothing requested
        requested.update({key: marks[key] for key in [*plan.unchanged, *plan.keys]})
        extra[FAULTS_SEEN_MARK] = str(seen)
        observations = [
            dg.AssetObservation(
                asset_key="document_snapshot",
                partition=key,
                metadata={
                    "source_removed": scan.catalog.entries[key].removed,
                    "source_path": scan.catalog.entries[key].source_path,
                    "aliases": _aliases_shown(scan.catalog.entries[key].aliases),
                },
            )
            for key in dict.fromkeys(catalog_changes)
            if key in scan.catalog.entries and key in existing
        ]
        if StepKind.REFRESH_AGGREGATES in steps:
            state = hashlib.sha256(json.dumps(sorted(catalog_changes)).encode() + scan.stamp.encode()).hexdigest()
            run_requests.append(dg.RunRequest(run_key=f"catalog:{state[:16]}", job_name=aggregates_job.name))
        summary = f"scan: {scan.summary()}; {len(run_requests)} run(s) requested"
        if plan.unchanged:
            summary += f", {len(plan.unchanged)} already extracted (e.g. by `atlas run`)"
        if plan.later:
            summary += f", {len(plan.later)} waiting for the next tick"
        context.log.info(summary)
        return dg.SensorResult(
            run_requests=run_requests,
            asset_events=observations,
            dynamic_partitions_requests=[documents_partitions.build_add_request(to_add)] if to_add else [],
            cursor=book.cursor(requested, extra),
            skip_reason=None if run_requests or to_add else summary,
        )

    return knowledge_base_sensor


SPLITS_MARK = ":duplicate-splits"  # not a partition key (keys have no ':')


def build_review_sensor(deployment: Deployment) -> dg.SensorDefinition:
    @dg.sensor(
        name="review_sensor",
        jobs=[review_job, aggregates_job],
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=deployment.pace().review_interval_seconds,
        description="Imports reviewed workbooks dropped into the review inbox (ATLAS_REVIEW_INBOX; a report per "
        "workbook, shown on the review page) and requests a document_review run for every document with a new "
        "decision (from the review page or a workbook); task completion and the exports follow.",
    )
    def review_sensor(context: dg.SensorEvaluationContext, atlas: AtlasResource) -> dg.SensorResult:
        deployment = atlas.deployment
        store, inbox = deployment.store(), deployment.review_policy().inbox  # settings alone: nothing read yet
        try:
            for report in deployment.import_review_inbox():
                context.log.info(f"review inbox: {report.summary()}")
        except Exception as error:  # an inbox that cannot be read never stops decisions from being merged
            context.log.error(f"review inbox {inbox}: {type(error).__name__}: {error}")
        book = SensorMarks(store, "review_sensor")  # key → the mark of the decisions merged or asked for
        seen, extra = book.read(context.cursor)
        splits = str(max(load_splits(store).changed_at, choices_changed_at(store)))
        if splits != extra.get(SPLITS_MARK, "0.0"):  # a person split a duplicate group or chose a study's value
            context.log.info("duplicate groups or a study's values changed by a person: refreshing the aggregates")
            return dg.SensorResult(
                run_requests=[dg.RunRequest(run_key=f"splits:{splits}", job_name=aggregates_job.name)],
                cursor=book.cursor(seen, {**extra, SPLITS_MARK: splits}),
            )
        marks = decision_marks(store)
        known = context.instance.get_dynamic_partitions(documents_partitions.name)  # in the partition order
        existing = set(known)
        asked = {key for key, mark in marks.items() if seen.get(key) == mark}  # requested for these very decisions
        merged = merged_marks(store, [key for key in marks if key not in asked and key in existing])
        merges = reviews_to_merge(marks, merged, existing, asked_already=asked)
        steps = plan_steps(RunPlan(new_partitions=[], to_run=[]), merges, automated=True)  # the merges alone
        changed = {key: marks[key] for step in steps if step.kind == StepKind.MERGE_REVIEWS for key in step.keys}
        up_to_date = {key: mark for key, mark in merged.items() if marks[key] == mark}  # merged by another run
        run_requests = [
            dg.RunRequest(run_key=f"review:{key}:{mark}", partition_key=key, job_name=review_job.name)
            for key, mark in changed.items()
        ]
        summary = f"{len(run_requests)} document(s) with new decisions"
        if run_requests:
            context.log.info(summary)
        return dg.SensorResult(
            run_requests=run_requests,
            cursor=book.cursor({**seen, **up_to_date, **changed}, extra),
            skip_reason=None if run_requests else "no new decisions",
        )

    return review_sensor


def build_freshness_sensor(deployment: Deployment) -> dg.SensorDefinition:
    pace = deployment.pace()

    @dg.sensor(
        name="aggregates_freshness_sensor",
        jobs=[aggregates_job],
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=pace.automation_interval_seconds,
        description="Catches the aggregates up when an extraction or a review landed while they were being computed "
        "(the automation counts it as handled by that run, which had read the states before): requests the "
        "aggregates again once nothing refreshes them.",
    )
    def aggregates_freshness_sensor(context: dg.SensorEvaluationContext, atlas: AtlasResource) -> dg.SensorResult:
        policy = atlas.deployment.final_values_policy()
        facts = aggregate_facts(context.instance, policy=policy)
        behind = aggregates_missed(facts, now=time.time(), grace=3 * pace.automation_interval_seconds)
        made = facts.refreshed_at is not None
        if behind is None and not (made and facts.policy_changed):
            return dg.SensorResult(skip_reason="the aggregates include every document that landed")
        for record in context.instance.get_run_records(dg.RunsFilter(statuses=WAITING_OR_RUNNING), limit=200):
            run = record.dagster_run
            selection = {key.to_user_string() for key in run.asset_selection or ()}
            if run.job_name == aggregates_job.name or selection & set(AGGREGATE_ASSET_NAMES):
                return dg.SensorResult(skip_reason=f"run {run.run_id[:8]} is refreshing the aggregates")
        if behind is None:  # the policy changed: the exports follow it
            context.log.info("the acceptance policy, derivation rules or template changed: refreshing the aggregates")
            # keyed by what it replaces: a policy changed back later, or a refresh that failed, is asked for again
            key = f"policy:{policy}@{facts.refreshed_at}:{int(time.time() // 3600)}"
            return dg.SensorResult(run_requests=[dg.RunRequest(run_key=key, job_name=aggregates_job.name)])
        context.log.info("a document landed while the aggregates were computed: refreshing them")
        return dg.SensorResult(run_requests=[dg.RunRequest(run_key=f"catch-up:{behind}", job_name=aggregates_job.name)])

    return aggregates_freshness_sensor


def build_cancellation_sensor(deployment: Deployment) -> dg.SensorDefinition:
    pace = deployment.pace()

    @dg.run_status_sensor(
        name="cancelled_documents_sensor",
        run_status=dg.DagsterRunStatus.CANCELED,
        monitor_all_code_locations=False,
        request_job=aggregates_job,
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=pace.automation_interval_seconds,
        description="Counts a cancelled document run (`atlas cancel`, or a queued run terminated in the UI) in the "
        "aggregates: its documents are `cancelled` now, though nothing was materialised.",
    )
    def cancelled_documents_sensor(context: dg.RunStatusSensorContext):
        run = context.dagster_run
        if run.job_name not in DOCUMENT_JOBS:
            return dg.SkipReason(f"run {run.run_id[:8]} of {run.job_name} is not a document run")
        return dg.RunRequest(run_key=f"cancelled:{run.run_id}")

    return cancelled_documents_sensor


def build_llm_batch_sensor(deployment: Deployment) -> dg.SensorDefinition:
    pace = deployment.pace()

    @dg.sensor(
        name="llm_batch_sensor",
        jobs=[document_job],
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=pace.batch_poll_seconds,
        description="Batch API mode (ATLAS_LLM_BATCH): submits the queued extraction requests as a batch, looks at "
        "the open batches, takes in the answers of those that ended and runs their documents again to grade them.",
    )
    def llm_batch_sensor(context: dg.SensorEvaluationContext, atlas: AtlasResource):
        deployment = atlas.deployment
        store = deployment.store()
        report = deployment.llm_client(cache=store).batch_tick()
        context.log.info(report.summary())
        requests = []
        for key, arrived in sorted(deployment.batch_queue(store).ready().items()):
            record = read_record(store, key, "extraction", ExtractionRecord)
            if record is not None and record.status != DocumentStatus.WAITING:
                deployment.batch_queue(store).read(key)  # its run has read what arrived
                continue  # one run per arrival (the run key), however many ticks see the mark
            run_key = f"batch-answers:{key}:{arrived}"
            requests.append(dg.RunRequest(run_key=run_key, partition_key=key, job_name=document_job.name))
        return dg.SensorResult(run_requests=requests, skip_reason=None if requests else report.summary())

    return llm_batch_sensor


def build_automation_sensor(deployment: Deployment) -> dg.AutomationConditionSensorDefinition:
    return dg.AutomationConditionSensorDefinition(
        "aggregates_automation_sensor",
        target=dg.AssetSelection.groups(AGGREGATES_GROUP),
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=deployment.pace().automation_interval_seconds,
        description="Refreshes task_completion, the exports (and the evaluation against the gold, when configured) "
        "after documents land.",
    )
