"""Materialising the real assets on a real (ephemeral) Dagster instance over corpus documents."""

import dagster as dg
import polars as pl
import pytest

from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.document_states import collect_document_states, document_states
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.extraction.version import extraction_version
from atlas_pipeline.knowledge.catalog import load_catalog
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import COMPLETION_PATH
from atlas_pipeline.store.records import ExtractionRecord, ParseRecord, SnapshotRecord, read_record
from atlas_pipeline_tests.support.corpus import copy_into
from atlas_pipeline_tests.support.helpers import document_failed, register, run_document


@pytest.fixture
def pipeline(knowledge_base, settings_for, atlas_for, instance):
    copy_into(
        knowledge_base, "rct/PMC3508963.pdf", "awkward/malformed/ocrmypdf_invalid.pdf", "html/plos_one_article.html"
    )
    settings = settings_for(knowledge_base)
    atlas = atlas_for(knowledge_base)
    keys = register(instance, atlas)
    return build_definitions(settings), atlas, keys


def test_document_assets_materialise_with_records_and_metadata(pipeline, instance):
    defs, atlas, keys = pipeline
    assert sorted(keys) == ["PMC3508963.pdf", "ocrmypdf_invalid.pdf", "plos_one_article.html"]
    result = run_document(defs, instance, "PMC3508963.pdf")
    assert result.success
    store = atlas.store()
    snapshot = read_record(store, "PMC3508963.pdf", "snapshot", SnapshotRecord)
    parse = read_record(store, "PMC3508963.pdf", "parse", ParseRecord)
    extraction = read_record(store, "PMC3508963.pdf", "extraction", ExtractionRecord)
    assert snapshot.media_type == "application/pdf" and snapshot.pages == 5 and snapshot.problem is None
    assert store.read_bytes(f"snapshots/{snapshot.sha256[:2]}/{snapshot.sha256}") == (
        atlas.open_knowledge_base().read("PMC3508963.pdf")
    )
    assert parse.tables >= 2 and parse.characters > 15_000 and not parse.cached
    assert extraction.status == "done" and extraction.mode == "skip"
    wrapper = store.read_json("documents/PMC3508963.pdf/extraction_output.json")
    assert wrapper["schema"] == "atlas.skip_wrapper/1"
    assert wrapper["content"]["markdown_path"] == parse.text_path
    assert set(wrapper["fields"]) >= {"n_treatment", "hr_value", "rob_blinding"}
    assert wrapper["identifiers"]["doi"][0] == "10.1186/1471-2490-12-13"

    text_event = instance.get_latest_materialization_event(dg.AssetKey("document_text"))
    metadata = text_event.asset_materialization.metadata
    assert metadata["pages"].value == 5 and metadata["characters"].value == parse.characters
    assert "preview" in metadata and metadata["cached"].value is False
    tables_meta = instance.get_latest_materialization_event(dg.AssetKey("document_tables")).asset_materialization
    assert tables_meta.metadata["tables"].value == parse.tables
    assert tables_meta.partition == "PMC3508963.pdf"


def test_second_materialisation_is_a_parse_cache_hit(pipeline, instance):
    defs, atlas, _ = pipeline
    assert run_document(defs, instance, "PMC3508963.pdf").success
    first = read_record(atlas.store(), "PMC3508963.pdf", "parse", ParseRecord)
    assert run_document(defs, instance, "PMC3508963.pdf").success
    second = read_record(atlas.store(), "PMC3508963.pdf", "parse", ParseRecord)
    assert not first.cached and second.cached
    assert second.text_path == first.text_path and second.tables == first.tables
    event = instance.get_latest_materialization_event(dg.AssetKey("document_text"))
    assert event.asset_materialization.metadata["cached"].value is True


def test_broken_file_ends_failed_with_its_reason_and_others_go_on(pipeline, instance):
    defs, atlas, _ = pipeline
    # the document failed, not the pipeline: every step went through but the last, which says so
    assert document_failed(run_document(defs, instance, "ocrmypdf_invalid.pdf"))
    assert run_document(defs, instance, "plos_one_article.html").success
    broken = read_record(atlas.store(), "ocrmypdf_invalid.pdf", "extraction", ExtractionRecord)
    assert broken.status == "failed"
    assert broken.reason.startswith("parse: not a readable PDF")
    html = read_record(atlas.store(), "plos_one_article.html", "extraction", ExtractionRecord)
    assert html.status == "done"
    # what a Dagster user sees: the broken document's checks failed with its reason, the good one's passed
    for name in ("quote_grounding", "value_consistency"):
        key = dg.AssetCheckKey(dg.AssetKey("document_extraction"), name)
        history = instance.event_log_storage.get_asset_check_execution_history(key, limit=10)
        evaluations = {r.event.dagster_event.event_specific_data.partition: r for r in history}
        failed = evaluations["ocrmypdf_invalid.pdf"].event.dagster_event.event_specific_data
        assert failed.passed is False and "failed: parse: not a readable PDF" in failed.description
        assert evaluations["plos_one_article.html"].event.dagster_event.event_specific_data.passed is True
    # the outcome check: an error (red) for the failed document, its stage and reason; passed for the good one
    key = dg.AssetCheckKey(dg.AssetKey("document_extraction"), "document_outcome")
    history = instance.event_log_storage.get_asset_check_execution_history(key, limit=10)
    outcomes = {
        r.event.dagster_event.event_specific_data.partition: r.event.dagster_event.event_specific_data for r in history
    }
    failed = outcomes["ocrmypdf_invalid.pdf"]
    assert failed.passed is False and failed.severity == dg.AssetCheckSeverity.ERROR
    assert failed.description.startswith("failed: parse: not a readable PDF")
    assert outcomes["plos_one_article.html"].passed is True
    # the partitions: the broken document red (failed), the good one green (materialised), every earlier asset green
    keys = ["ocrmypdf_invalid.pdf", "plos_one_article.html"]
    statuses = instance.get_status_by_partition(dg.AssetKey("document_status"), keys, documents_partitions)
    assert {key: status.value for key, status in statuses.items()} == {
        "ocrmypdf_invalid.pdf": "FAILED",
        "plos_one_article.html": "MATERIALIZED",
    }
    for asset in ("document_snapshot", "document_text", "document_extraction", "document_review"):
        statuses = instance.get_status_by_partition(dg.AssetKey(asset), keys, documents_partitions)
        assert {status.value for status in statuses.values()} == {"MATERIALIZED"}, asset
    failure = instance.all_logs(
        instance.get_latest_planned_materialization_info(dg.AssetKey("document_status"), keys[0]).run_id,
        of_type=dg.DagsterEventType.STEP_FAILURE,
    )[0].dagster_event.step_failure_data.error
    assert "ocrmypdf_invalid.pdf: parse: not a readable PDF" in failure.message


def test_aggregates_count_every_document_including_failed_and_never_run(pipeline, instance, tmp_path):
    defs, atlas, _ = pipeline
    assert run_document(defs, instance, "PMC3508963.pdf").success
    assert document_failed(run_document(defs, instance, "ocrmypdf_invalid.pdf"))
    # a partition whose run fails in Dagster (not a document problem): its catalog entry is gone
    instance.add_dynamic_partitions(documents_partitions.name, ["ghost.pdf"])
    assert not run_document(defs, instance, "ghost.pdf").success
    # plos_one_article.html is known but never run
    assert defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success

    completion = atlas.store().read_json(COMPLETION_PATH)
    assert completion["total"] == 4
    assert completion["counts"]["done"] == 1
    assert completion["counts"]["failed"] == 2
    assert completion["counts"]["pending"] == 1
    assert completion["terminal"] == 3 and completion["open"] == 1
    assert completion["failure_rate"] == 0.5 and completion["completion_rate"] == 0.25
    assert completion["average_processing_seconds"] > 0

    states = {s.key: s for s in collect_document_states(instance, atlas.store(), load_catalog(atlas.store()))}
    assert "is not in the catalog" in states["ghost.pdf"].reason
    assert states["ghost.pdf"].reason.startswith("document_snapshot: ")
    assert states["plos_one_article.html"].reason == "known, not processed yet"

    event = instance.get_latest_materialization_event(dg.AssetKey("task_completion"))
    assert event.asset_materialization.metadata["count_failed"].value == 2

    exports = tmp_path / "exports"
    frames = {
        "csv": pl.read_csv(exports / "atlas_documents.csv"),
        "parquet": pl.read_parquet(exports / "atlas_documents.parquet"),
        "jsonl": pl.read_ndjson(exports / "atlas_documents.jsonl"),
        "xlsx": pl.read_excel(exports / "atlas_documents.xlsx", sheet_name="documents"),
    }
    for fmt, frame in frames.items():
        assert frame.height == 4, fmt
        statuses = dict(zip(frame["document_key"].to_list(), frame["status"].to_list(), strict=True))
        assert statuses == {
            "PMC3508963.pdf": "done",
            "ocrmypdf_invalid.pdf": "failed",
            "plos_one_article.html": "pending",
            "ghost.pdf": "failed",
        }, fmt
    summary = pl.read_excel(exports / "atlas_documents.xlsx", sheet_name="task_completion")
    assert dict(zip(summary["figure"], summary["count"], strict=True))["count_failed"] == 2
    # skip mode: every field of the processed document waits to be extracted by hand; none of the failed one's
    fields = pl.read_excel(exports / "atlas_documents.xlsx", sheet_name="fields")
    assert set(fields["document_key"]) == {"PMC3508963.pdf"}
    assert fields.height == len(atlas.load_template().fields)
    assert set(fields["tier"]) == {"not_extracted"} and set(fields["provenance"]) == {"awaiting_review"}


def test_definitions_have_the_lineage_of_the_design():
    from atlas_pipeline.config.settings import load_settings

    defs = build_definitions(load_settings({}))
    graph = defs.resolve_asset_graph()

    def parents(name):
        return {key.to_user_string() for key in graph.get(dg.AssetKey(name)).parent_keys}

    assert parents("document_text") == {"document_snapshot"}
    assert parents("document_tables") == {"document_snapshot"}
    assert parents("document_extraction") == {"document_text", "document_tables"}
    assert parents("document_status") == {"document_extraction", "document_review"}  # the last step of a document
    assert "document_extraction" in parents("task_completion")
    assert {"document_extraction", "task_completion"} <= parents("extraction_exports")
    sensors = {sensor.name: sensor for sensor in defs.sensors}
    assert sensors["knowledge_base_sensor"].default_status == dg.DefaultSensorStatus.RUNNING
    assert sensors["aggregates_automation_sensor"].default_status == dg.DefaultSensorStatus.RUNNING


def test_exports_store_rejects_nothing_it_should_not(tmp_path):
    store = Store(str(tmp_path / "exports"))
    assert store.url("atlas_documents.csv") == str(tmp_path / "exports" / "atlas_documents.csv")


def test_extractions_from_another_template_are_stale_not_mixed(pipeline, instance):
    defs, atlas, _ = pipeline
    assert run_document(defs, instance, "PMC3508963.pdf").success
    assert document_failed(run_document(defs, instance, "ocrmypdf_invalid.pdf"))
    current = {s.key: s for s in document_states(instance, atlas)}
    assert current["PMC3508963.pdf"].status == "done" and not current["PMC3508963.pdf"].stale
    store = atlas.store()
    template = atlas.load_template().model_copy(update={"version": "9.9.9"})
    newer = extraction_version(template, atlas.load_rule(), "skip", parser=atlas.parser_choice().describe())
    changed = {s.key: s for s in collect_document_states(instance, store, load_catalog(store), newer)}
    stale = changed["PMC3508963.pdf"]
    assert stale.status == "pending" and stale.stale
    old = current["PMC3508963.pdf"].extraction.extraction_version
    assert old == atlas.extraction_version().tag != newer.tag
    assert (
        stale.reason
        == f"stale: extracted with version {old}, now {newer.tag} (template changed); re-extraction pending"
    )
    assert changed["ocrmypdf_invalid.pdf"].status == "failed"  # a broken file stays broken whatever the template
