"""One sensor per declared source (``source_<name>``): a collection pass per tick. It only writes files into the
knowledge base; the knowledge-base sensor takes them from there, as any file a person drops in."""

from __future__ import annotations

import dagster as dg

from atlas_pipeline.defs.document_runs import WAITING_OR_RUNNING
from atlas_pipeline.defs.resources import AtlasResource
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.sources.collector import Collector
from atlas_pipeline.sources.config import Source, SourcesError
from atlas_pipeline.sources.state import PAUSE_AFTER_FAILURES
from atlas_pipeline.store.files import Store

TICK_BUDGET_SECONDS = 30  # Dagster stops a sensor tick at 60 s: a pass ends by here, the rest next tick


def extraction_backlog(instance: dg.DagsterInstance) -> int:
    """Runs waiting or in progress: what collection paces itself against."""
    return instance.get_runs_count(dg.RunsFilter(statuses=WAITING_OR_RUNNING))


def build_source_sensor(source: Source, deployment: Deployment) -> dg.SensorDefinition:
    where = source.feed or f"{len(source.urls)} URL(s)"

    @dg.sensor(
        name=source.sensor_name,
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=deployment.pace().sources_interval_seconds,
        description=f"Collects {source.kind} {where} into {source.target}/ of the knowledge base (robots.txt, "
        f"conditional GET, ≥ {source.min_domain_interval_seconds:g} s between requests to a domain; paused after "
        f"{PAUSE_AFTER_FAILURES} failures in a row — `atlas sources resume` — and slowed while the extraction backlog "
        "is long).",
    )
    def source_sensor(context: dg.SensorEvaluationContext, atlas: AtlasResource) -> dg.SkipReason:
        collector = Collector(
            source, atlas.deployment.store(), Store(atlas.deployment.knowledge_base), atlas.deployment.politeness()
        )
        report = collector.run(backlog=extraction_backlog(context.instance), budget_seconds=TICK_BUDGET_SECONDS)
        if report.paused:
            context.log.error(report.summary())
        elif report.failures:
            context.log.warning(report.summary())
        elif report.collected or report.queued:
            context.log.info(report.summary())
        return dg.SkipReason(report.summary())

    return source_sensor


def sources_error_sensor(error: SourcesError) -> dg.SensorDefinition:
    """A sources file that cannot be used stops no other part of the pipeline: this sensor says what is wrong on
    every tick (and ``atlas sources`` / ``atlas status`` print it)."""

    @dg.sensor(
        name="sources_file_error",
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=300,
        description=f"No source collects: {error}",
    )
    def sources_file_error(context: dg.SensorEvaluationContext) -> dg.SkipReason:
        context.log.error(str(error))
        return dg.SkipReason(f"no source collects: {error}")

    return sources_file_error


def build_source_sensors(deployment: Deployment) -> list[dg.SensorDefinition]:
    try:
        sources = deployment.declared_sources()
    except SourcesError as error:
        return [sources_error_sensor(error)]
    return [build_source_sensor(source, deployment) for source in sources]
