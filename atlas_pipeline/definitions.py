"""The Dagster ``Definitions`` of Atlas Pipeline (``workspace.yaml`` points here). Settings are validated on load."""

import dagster as dg

from atlas_pipeline.config.settings import AtlasSettings
from atlas_pipeline.core.redaction import install_log_redaction
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


def build_definitions(settings: AtlasSettings | Deployment) -> dg.Definitions:
    """The definitions of one deployment: the settings are read here, once, into the ``Deployment`` that every
    sensor, asset and check is given (the ``defs`` floor never reads a setting itself)."""
    deployment = Deployment.of(settings)
    version = deployment.extraction_version().tag
    gold, executor = deployment.gold(), deployment.executor()
    return dg.Definitions(
        assets=[
            *build_document_assets(version),
            document_review,
            document_status,
            *AGGREGATE_ASSETS,
            *([build_evaluation_asset(gold.path, gold.tolerance)] if gold else []),
        ],
        jobs=[document_job, document_batch_job, review_job, aggregates_job],
        sensors=[
            build_knowledge_base_sensor(deployment, version),
            build_review_sensor(deployment),
            build_automation_sensor(deployment),
            build_freshness_sensor(deployment),
            build_cancellation_sensor(deployment),
            *build_source_sensors(deployment),
            *([build_llm_batch_sensor(deployment)] if deployment.llm_batch else []),
        ],
        resources={"atlas": AtlasResource.from_deployment(deployment)},
        executor=build_executor(executor.name, executor.config),
    )


install_log_redaction()
enable_event_batching()  # code servers and run workers of any instance (PostgreSQL too) send asset events in batches
defs = build_definitions(Deployment.from_environment())
