"""The Dagster ``Definitions`` of Atlas Pipeline (``workspace.yaml`` points here). Settings are validated on load."""

import dagster as dg

from atlas_pipeline.config.redaction import install_log_redaction
from atlas_pipeline.config.settings import AtlasSettings, load_settings
from atlas_pipeline.defs.aggregate_assets import AGGREGATE_ASSETS, build_evaluation_asset
from atlas_pipeline.defs.document_assets import build_document_assets
from atlas_pipeline.defs.jobs import aggregates_job, document_batch_job, document_job, review_job
from atlas_pipeline.defs.resources import AtlasResource
from atlas_pipeline.defs.review_assets import document_review
from atlas_pipeline.defs.sensors import (
    build_automation_sensor,
    build_cancellation_sensor,
    build_freshness_sensor,
    build_knowledge_base_sensor,
    build_llm_batch_sensor,
    build_review_sensor,
)
from atlas_pipeline.defs.source_sensors import build_source_sensors
from atlas_pipeline.defs.status_assets import document_status
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.ops.event_log import enable_event_batching
from atlas_pipeline.ops.executors import build_executor


def extraction_code_version(settings: AtlasSettings) -> str:
    """The extraction version's tag (``extraction.version``): a change makes existing extractions stale."""
    return Deployment.from_settings(settings).extraction_version().tag


def build_definitions(settings: AtlasSettings) -> dg.Definitions:
    version = extraction_code_version(settings)
    return dg.Definitions(
        assets=[
            *build_document_assets(version),
            document_review,
            document_status,
            *AGGREGATE_ASSETS,
            *([build_evaluation_asset(settings.gold, settings.gold_tolerance)] if settings.gold else []),
        ],
        jobs=[document_job, document_batch_job, review_job, aggregates_job],
        sensors=[
            build_knowledge_base_sensor(settings, version),
            build_review_sensor(settings),
            build_automation_sensor(settings),
            build_freshness_sensor(settings),
            build_cancellation_sensor(settings),
            *build_source_sensors(settings),
            *([build_llm_batch_sensor(settings)] if settings.llm_batch and settings.llm_base_url else []),
        ],
        resources={"atlas": AtlasResource.from_settings(settings)},
        executor=build_executor(settings.executor, settings.executor_config),
    )


install_log_redaction()
enable_event_batching()  # code servers and run workers of any instance (PostgreSQL too) send asset events in batches
defs = build_definitions(load_settings())
