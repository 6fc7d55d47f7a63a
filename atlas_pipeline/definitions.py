"""The Dagster ``Definitions`` of Atlas Pipeline (``workspace.yaml`` points here). Settings are validated on load."""

import dagster as dg

from atlas_pipeline.defs.aggregate_assets import AGGREGATE_ASSETS
from atlas_pipeline.defs.document_assets import DOCUMENT_ASSETS
from atlas_pipeline.defs.jobs import aggregates_job, document_job
from atlas_pipeline.defs.resources import AtlasResource
from atlas_pipeline.defs.sensors import build_automation_sensor, build_knowledge_base_sensor
from atlas_pipeline.settings import AtlasSettings, load_settings


def build_definitions(settings: AtlasSettings) -> dg.Definitions:
    return dg.Definitions(
        assets=[*DOCUMENT_ASSETS, *AGGREGATE_ASSETS],
        jobs=[document_job, aggregates_job],
        sensors=[build_knowledge_base_sensor(settings), build_automation_sensor(settings)],
        resources={"atlas": AtlasResource.from_settings(settings)},
        executor=dg.in_process_executor,
    )


defs = build_definitions(load_settings())
