"""A document that lands while the aggregates are being computed is caught up: the automation counts it as handled
by that run, which read the states before it landed; ``aggregates_freshness_sensor`` asks for the aggregates again —
and only then (a document landing after them is the automation's)."""

import time

import dagster as dg

import atlas_pipeline.defs.aggregate_assets as aggregate_assets
from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.defs.resources import AtlasResource
from atlas_pipeline.defs.run_history import aggregate_facts
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.knowledge.catalog import refresh_catalog
from atlas_pipeline.knowledge.planning import aggregates_missed
from atlas_pipeline.ops.runs import QUIET_RUN_CONFIG
from atlas_pipeline_tests.support.corpus import copy_into

KEY = "plos_one_article.html"


def test_a_review_landing_during_the_aggregates_is_caught_up(
    instance, knowledge_base, settings_for, atlas_for, monkeypatch
):
    copy_into(knowledge_base, f"html/{KEY}")
    settings, atlas = settings_for(knowledge_base), atlas_for(knowledge_base)
    refresh_catalog(atlas.open_knowledge_base(), atlas.store())
    instance.add_dynamic_partitions(documents_partitions.name, [KEY])
    defs = build_definitions(settings)
    sensor = defs.resolve_sensor_def("aggregates_freshness_sensor")

    default = AtlasResource.from_deployment(Deployment.from_settings(settings))

    def tick(resource: AtlasResource = default) -> dg.SensorResult:
        return sensor(dg.build_sensor_context(instance=instance, definitions=defs, resources={"atlas": resource}))

    document_job, review_job = defs.resolve_job_def("document_job"), defs.resolve_job_def("review_job")
    aggregates_job = defs.resolve_job_def("aggregates_job")
    assert document_job.execute_in_process(partition_key=KEY, instance=instance, run_config=QUIET_RUN_CONFIG).success
    assert aggregates_job.execute_in_process(instance=instance, run_config=QUIET_RUN_CONFIG).success
    assert aggregates_missed(aggregate_facts(instance), now=time.time()) is None and tick().run_requests == []

    # a document landing after the aggregates: the automation's to refresh, not this sensor's
    assert review_job.execute_in_process(partition_key=KEY, instance=instance, run_config=QUIET_RUN_CONFIG).success
    assert aggregates_missed(aggregate_facts(instance), now=time.time()) is None and tick().run_requests == []
    # … unless the automation let it pass (it landed in the tick that saw the aggregates materialised): past the
    # grace it is behind too
    review = instance.get_latest_materialization_event(dg.AssetKey("document_review"))
    assert aggregates_missed(aggregate_facts(instance), now=time.time(), grace=0) == review.timestamp

    # the race: a review lands after the exports read the states and before they are written
    write_exports = aggregate_assets.write_exports

    def review_lands_meanwhile(*args, **kwargs):
        review_job.execute_in_process(partition_key=KEY, instance=instance, run_config=QUIET_RUN_CONFIG)
        return write_exports(*args, **kwargs)

    monkeypatch.setattr(aggregate_assets, "write_exports", review_lands_meanwhile)
    assert aggregates_job.execute_in_process(instance=instance, run_config=QUIET_RUN_CONFIG).success
    landed = instance.get_latest_materialization_event(dg.AssetKey("document_review")).timestamp
    assert aggregates_missed(aggregate_facts(instance), now=time.time()) == landed
    requests = tick().run_requests
    assert [r.job_name for r in requests] == ["aggregates_job"] and requests[0].run_key == f"catch-up:{landed}"

    monkeypatch.setattr(aggregate_assets, "write_exports", write_exports)
    assert aggregates_job.execute_in_process(instance=instance, run_config=QUIET_RUN_CONFIG).success
    assert aggregates_missed(aggregate_facts(instance), now=time.time()) is None and tick().run_requests == []

    # the team changes its acceptance policy (the code location restarts with it): the exports follow, once
    other = AtlasResource.from_deployment(
        Deployment.from_settings(settings_for(knowledge_base, review_accept_tiers="verified,derived"))
    )
    requests = tick(other).run_requests
    assert [r.job_name for r in requests] == ["aggregates_job"] and requests[0].run_key.startswith("policy:")
    changed = build_definitions(settings_for(knowledge_base, review_accept_tiers="verified,derived"))
    assert changed.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
    assert tick(other).run_requests == []
