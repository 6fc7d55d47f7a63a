"""Batched runs (``atlas run --batch N``): many documents in one Dagster run over a partition range, each with its
own materialisations and metadata; a document that raises fails alone."""

import dagster as dg

from atlas_pipeline.core.statuses import DocumentStatus
from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.asset_names import DOCUMENT_ASSET_NAMES
from atlas_pipeline.defs.document_states import document_states
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.knowledge.catalog import refresh_catalog
from atlas_pipeline.knowledge.planning import documents_per_run
from atlas_pipeline.knowledge.planning import plan_batches as batches
from atlas_pipeline.ops.runs import run_documents
from atlas_pipeline_tests.support.corpus import copy_into
from atlas_pipeline_tests.support.helpers import SensorHarness

DOCUMENTS = ["html/plos_one_article.html", "rct_jats/PMC1216327.nxml", "awkward/malformed/qpdf_bad1.pdf"]


def _load(instance, knowledge_base, settings_for, atlas_for):
    copy_into(knowledge_base, *DOCUMENTS)
    settings, atlas = settings_for(knowledge_base), atlas_for(knowledge_base)
    catalog = refresh_catalog(atlas.open_knowledge_base(), atlas.store()).catalog
    keys = sorted(catalog.entries)
    instance.add_dynamic_partitions(documents_partitions.name, keys)
    return settings, atlas, catalog, keys


def latest(instance, asset: str, key: str) -> dg.AssetMaterialization:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[key]), limit=1
    ).records
    return records[0].asset_materialization


def test_one_run_materialises_every_document_with_its_own_metadata(instance, knowledge_base, settings_for, atlas_for):
    settings, atlas, catalog, keys = _load(instance, knowledge_base, settings_for, atlas_for)
    defs = build_definitions(settings)
    outcomes = list(run_documents(keys, workers=1, defs=defs, instance=instance, batch=10))
    assert sorted(key for key, success, _ in outcomes if success) == keys
    runs = instance.get_runs(dg.RunsFilter(job_name="document_batch_job"))
    assert len(runs) == 1 and not instance.get_runs(dg.RunsFilter(job_name="document_job"))
    assert runs[0].tags["dagster/asset_partition_range_start"] == keys[0]
    assert runs[0].tags["dagster/asset_partition_range_end"] == keys[-1]
    for key in keys:
        for asset in (name for name in DOCUMENT_ASSET_NAMES if name != "document_status"):
            assert latest(instance, asset, key).partition == key
        assert latest(instance, "document_snapshot", key).metadata["sha256"].value == catalog.entries[key].sha256
        assert latest(instance, "document_extraction", key).metadata["sha256"].value == catalog.entries[key].sha256
    bad = latest(instance, "document_extraction", "qpdf_bad1.pdf").metadata
    assert bad["status"].value == "failed" and bad["reason"].value == "snapshot: not a PDF (no %PDF- header)"
    assert latest(instance, "document_text", "plos_one_article.html").metadata["characters"].value > 10_000
    # the extraction's checks are evaluated per document, also in a batch
    for name in ("quote_grounding", "value_consistency"):
        key = dg.AssetCheckKey(dg.AssetKey("document_extraction"), name)
        history = instance.event_log_storage.get_asset_check_execution_history(key, limit=10)
        evaluations = {r.event.dagster_event.event_specific_data.partition: r for r in history}
        assert set(evaluations) == set(keys)
        passed = {k: r.event.dagster_event.event_specific_data.passed for k, r in evaluations.items()}
        assert passed == {"PMC1216327.nxml": True, "plos_one_article.html": True, "qpdf_bad1.pdf": False}
    states = {s.key: s for s in document_states(instance, atlas)}
    assert {k: s.status for k, s in states.items()} == {
        "PMC1216327.nxml": DocumentStatus.DONE,
        "plos_one_article.html": DocumentStatus.DONE,
        "qpdf_bad1.pdf": DocumentStatus.FAILED,
    }
    # the batch's run failed at document_status only, because one of its documents failed: red for that one alone,
    # and the batch was not run again one document at a time (above: no document_job run)
    assert runs[0].status == dg.DagsterRunStatus.FAILURE
    statuses = instance.get_status_by_partition(dg.AssetKey("document_status"), keys, documents_partitions)
    assert {key: status.value for key, status in statuses.items()} == {
        "PMC1216327.nxml": "MATERIALIZED",
        "plos_one_article.html": "MATERIALIZED",
        "qpdf_bad1.pdf": "FAILED",
    }
    # the sensor sees these documents as extracted from these very bytes: nothing is requested again
    assert SensorHarness(instance, settings, atlas).tick().run_requests == []


def test_a_document_that_raises_fails_alone(instance, knowledge_base, settings_for, atlas_for):
    settings, atlas, _, keys = _load(instance, knowledge_base, settings_for, atlas_for)
    # a partition the catalog does not know: its snapshot step raises (a fault, not a document problem)
    instance.add_dynamic_partitions(documents_partitions.name, ["ghost.pdf"])
    ordered = [*keys, "ghost.pdf"]
    outcomes = {key: success for key, success, _ in run_documents(ordered, 1, build_definitions(settings), instance, 4)}
    assert outcomes == {**dict.fromkeys(keys, True), "ghost.pdf": False}
    batch_runs = instance.get_runs(dg.RunsFilter(job_name="document_batch_job"))
    assert [run.status.value for run in batch_runs] == ["FAILURE"]
    runs = instance.get_runs(dg.RunsFilter(job_name="document_job"))  # then one run per document
    # ghost.pdf's fault, and qpdf_bad1.pdf's document failure (its document_status red); the other two went through
    assert sorted(run.status.value for run in runs) == ["FAILURE", "FAILURE", "SUCCESS", "SUCCESS"]
    states = {s.key: s for s in document_states(instance, atlas)}
    assert states["ghost.pdf"].status == DocumentStatus.FAILED
    assert "'ghost.pdf' is not in the catalog" in states["ghost.pdf"].reason
    assert all(states[key].status != DocumentStatus.FAILED or key == "qpdf_bad1.pdf" for key in keys)


def test_batches_follow_the_partition_order_and_never_take_in_other_documents():
    ordered = ["a", "b", "c", "d", "e", "f"]
    assert batches(["a", "b", "c", "e", "f"], ordered, 2) == [["a", "b"], ["c"], ["e", "f"]]
    assert batches(["f", "a"], ordered, 10) == [["a"], ["f"]]
    assert batches(["a", "z"], ordered, 10) == [["a"], ["z"]]


def test_documents_per_run_is_one_decision_for_both_drivers():
    assert documents_per_run("llm", concurrency=8) == 8  # a run keeps the endpoint's requests in flight
    assert documents_per_run("skip", concurrency=8) == 1  # without a model: a run per document
    assert documents_per_run("skip", concurrency=8, chosen=5) == documents_per_run("llm", 8, chosen=5) == 5


def test_the_sensor_requests_a_batch_of_waiting_documents_and_a_lone_one_alone(
    instance, knowledge_base, settings_for, atlas_for
):
    """The daemon's path: the knowledge-base sensor cuts the waiting documents into runs as `atlas run` does; the
    batch run materialises every document with its own status, the failing one red alone."""
    copy_into(knowledge_base, *DOCUMENTS)
    settings = settings_for(knowledge_base, documents_per_run="8")
    atlas = atlas_for(knowledge_base, documents_per_run="8")
    harness = SensorHarness(instance, settings, atlas)
    (request,) = harness.tick().run_requests
    keys = list(instance.get_dynamic_partitions(documents_partitions.name))
    assert sorted(keys) == ["PMC1216327.nxml", "plos_one_article.html", "qpdf_bad1.pdf"]
    assert request.job_name == "document_batch_job" and request.run_key.startswith("batch:")
    assert (request.partition_key_range.start, request.partition_key_range.end) == (keys[0], keys[-1])
    result = harness.defs.resolve_job_def(request.job_name).execute_in_process(
        instance=instance, tags=request.tags, raise_on_error=False
    )
    assert not result.success  # at document_status, for qpdf_bad1.pdf alone
    statuses = instance.get_status_by_partition(dg.AssetKey("document_status"), keys, documents_partitions)
    assert {key: status.value for key, status in statuses.items()} == {
        "PMC1216327.nxml": "MATERIALIZED",
        "plos_one_article.html": "MATERIALIZED",
        "qpdf_bad1.pdf": "FAILED",
    }
    states = {s.key: s for s in document_states(instance, atlas)}
    assert states["qpdf_bad1.pdf"].reason == "snapshot: not a PDF (no %PDF- header)"
    assert [states[key].status for key in ("PMC1216327.nxml", "plos_one_article.html")] == [DocumentStatus.DONE] * 2
    assert harness.tick().run_requests == []  # asked and made: nothing again
    copy_into(knowledge_base, "rct_jats/PMC1475568.nxml")  # one new document: at once, alone
    (alone,) = harness.tick().run_requests
    assert (alone.job_name, alone.partition_key) == ("document_job", "PMC1475568.nxml")


def test_a_batch_that_faults_has_its_documents_run_again_one_per_run(
    instance, knowledge_base, settings_for, atlas_for, monkeypatch
):
    """A document that raises (a fault, not a document problem: here a store that fails for it) stops its batch's
    step; the sensor's next tick asks for each document the batch did not extract in a run of its own, so the others
    are extracted and the one that raises fails alone — what `atlas run` does at once."""
    from atlas_pipeline.defs import document_assets

    copy_into(knowledge_base, *DOCUMENTS)
    settings = settings_for(knowledge_base, documents_per_run="8")
    atlas = atlas_for(knowledge_base, documents_per_run="8")
    real = document_assets.take_snapshot

    def failing(knowledge_base, store, entry, **options):
        if entry.key == "plos_one_article.html":
            raise OSError("the store refused the write")
        return real(knowledge_base, store, entry, **options)

    monkeypatch.setattr(document_assets, "take_snapshot", failing)
    harness = SensorHarness(instance, settings, atlas)
    (batch,) = harness.tick().run_requests
    tags = {**batch.tags, "dagster/sensor_name": "knowledge_base_sensor"}  # as the daemon launches it
    job = harness.defs.resolve_job_def(batch.job_name)
    assert not job.execute_in_process(instance=instance, tags=tags, raise_on_error=False).success
    again = harness.tick().run_requests
    assert sorted((r.job_name, r.partition_key) for r in again) == [
        ("document_job", "PMC1216327.nxml"),
        ("document_job", "plos_one_article.html"),
        ("document_job", "qpdf_bad1.pdf"),
    ]
    assert all(r.run_key.endswith(f":alone-after:{instance.get_runs()[0].run_id}") for r in again)
    for request in again:
        job = harness.defs.resolve_job_def(request.job_name)
        job.execute_in_process(instance=instance, partition_key=request.partition_key, raise_on_error=False)
    states = {s.key: s for s in document_states(instance, atlas)}
    assert states["PMC1216327.nxml"].status == DocumentStatus.DONE
    assert states["qpdf_bad1.pdf"].reason == "snapshot: not a PDF (no %PDF- header)"  # its own, handled failure
    assert states["plos_one_article.html"].status == DocumentStatus.FAILED
    assert "the store refused the write" in states["plos_one_article.html"].reason  # the fault, on it alone
    # the batch is not looked at twice: what its documents needed was asked (the daemon drops a run key it saw)
    assert {r.run_key for r in harness.tick().run_requests} <= {r.run_key for r in again}
