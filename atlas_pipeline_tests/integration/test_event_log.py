"""Fewer writes per document: the embedded default's event log stores a batch of asset events in one transaction,
and per-document metadata is recorded without Dagster re-listing every partition — with the same events, metadata,
partition statuses and check results as Dagster's own one-event-at-a-time path."""

import collections
import shutil
from pathlib import Path

import dagster as dg
import pytest

from atlas_pipeline.config.settings import load_settings
from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.asset_names import DOCUMENT_ASSET_NAMES
from atlas_pipeline.defs.document_batch import DocumentBatch
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.ops.event_log import BATCH_SIZE_VARIABLE, BatchedSqliteEventLogStorage
from atlas_pipeline.ops.instance import project_file
from atlas_pipeline.ops.runs import run_documents
from atlas_pipeline_tests.support.corpus import copy_into
from atlas_pipeline_tests.support.helpers import register

DOCUMENTS = ["html/plos_one_article.html", "rct_jats/PMC1216327.nxml", "awkward/malformed/qpdf_bad1.pdf"]
# every document materialises these; document_status only the documents that went through (not qpdf_bad1.pdf)
EVERY = [name for name in DOCUMENT_ASSET_NAMES if name != "document_status"]
WENT_THROUGH = ["PMC1216327.nxml", "plos_one_article.html"]
VOLATILE = {"parse_seconds", "processing_seconds", "snapshot", "text", "tables_file", "extraction", "review_page"}


def _home_run(root: Path) -> tuple[dg.DagsterInstance, list[str]]:
    """The documents through one batched run on a fresh SQLite home holding the project's ``dagster.yaml``."""
    home = root / "home"
    home.mkdir(parents=True)
    shutil.copyfile(project_file("dagster.yaml"), home / "dagster.yaml")
    copy_into(root / "kb", *DOCUMENTS)
    settings = load_settings(
        {
            "ATLAS_KNOWLEDGE_BASE": str(root / "kb"),
            "ATLAS_ARTIFACTS": str(root / "artifacts"),
            "ATLAS_EXPORTS": str(root / "exports"),
        }
    )
    instance = dg.DagsterInstance.from_config(str(home))
    keys = sorted(register(instance, Deployment.from_settings(settings)))
    outcomes = list(run_documents(keys, workers=1, defs=build_definitions(settings), instance=instance, batch=10))
    assert sorted(key for key, success, _ in outcomes if success) == keys
    return instance, keys


def _view(instance: dg.DagsterInstance, keys: list[str]) -> dict:
    """What the UI and Atlas read back: per asset and document the materialisations and their stable metadata,
    the planned run, the partitions materialised, the last materialisation, check results, and the run's events."""
    view: dict = {}
    (run,) = instance.get_runs(dg.RunsFilter(job_name="document_batch_job"))
    for asset in DOCUMENT_ASSET_NAMES:
        asset_key = dg.AssetKey(asset)
        for key in keys:
            records = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=asset_key, asset_partitions=[key]), limit=10
            ).records
            view[asset, key] = [
                {k: v.value for k, v in r.asset_materialization.metadata.items() if k not in VOLATILE} for r in records
            ]
            planned = instance.get_latest_planned_materialization_info(asset_key, key)
            view[asset, key, "planned"] = planned.run_id == run.run_id if planned else None
        view[asset, "materialised"] = sorted(instance.get_materialized_partitions(asset_key))
        (record,) = instance.get_asset_records([asset_key])
        view[asset, "last"] = record.asset_entry.last_materialization.asset_materialization.partition
    for name in ("quote_grounding", "value_consistency"):
        check = dg.AssetCheckKey(dg.AssetKey("document_extraction"), name)
        history = instance.event_log_storage.get_asset_check_execution_history(check, limit=10)
        view[name] = sorted((r.event.dagster_event.event_specific_data.partition, r.status.value) for r in history)
    view["events"] = collections.Counter(
        e.dagster_event.event_type_value for e in instance.all_logs(run.run_id) if e.dagster_event
    )
    return view


def test_batched_writes_store_what_one_at_a_time_writes_store(tmp_path, monkeypatch):
    batches: list[int] = []
    original = BatchedSqliteEventLogStorage.store_event_batch

    def spy(self, events):
        batches.append(len(events))
        original(self, events)

    monkeypatch.setattr(BatchedSqliteEventLogStorage, "store_event_batch", spy)
    monkeypatch.delenv(BATCH_SIZE_VARIABLE, raising=False)  # the storage turns Dagster's batching on by itself
    batched, keys = _home_run(tmp_path / "batched")
    storage = batched.event_log_storage
    assert isinstance(storage, BatchedSqliteEventLogStorage)
    assert Path(storage._base_dir) == tmp_path / "batched" / "home" / "history" / "runs"  # Dagster's default place
    assert (tmp_path / "batched" / "home" / "history" / "runs" / "index.db").is_file()
    # the run's plan in one batch, and each asset's materialisations of the three documents in one batch
    assert max(batches) >= len(EVERY) * len(keys)
    assert batches.count(len(keys)) >= len(EVERY)

    monkeypatch.setenv(BATCH_SIZE_VARIABLE, "0")  # Dagster's own path: every event written on its own
    batches.clear()
    single, same_keys = _home_run(tmp_path / "single")
    assert batches == [] and same_keys == keys

    expected, got = _view(single, keys), _view(batched, keys)
    assert got == expected
    assert got["document_extraction", "materialised"] == keys
    assert got["document_extraction", "qpdf_bad1.pdf"][0]["status"] == "failed"
    assert all(got[asset, key, "planned"] for asset in DOCUMENT_ASSET_NAMES for key in keys)
    assert got["events"]["ASSET_MATERIALIZATION"] == len(EVERY) * len(keys) + len(WENT_THROUGH)
    assert got["document_status", "materialised"] == WENT_THROUGH


def test_an_index_write_that_fails_is_retried_event_by_event_without_doubling_the_run_s_events(tmp_path, monkeypatch):
    import sqlalchemy

    original, failed = BatchedSqliteEventLogStorage._mirror, []

    def locked_once_per_batch(self, connection, events):
        if len(events) > 1:  # the batch's transaction fails (as when the index stays locked), after some writes
            original(self, connection, events[:1])
            failed.append(len(events))
            raise sqlalchemy.exc.OperationalError("INSERT", {}, Exception("database is locked"))
        original(self, connection, events)

    monkeypatch.setattr(BatchedSqliteEventLogStorage, "_mirror", locked_once_per_batch)
    monkeypatch.delenv(BATCH_SIZE_VARIABLE, raising=False)
    instance, keys = _home_run(tmp_path)
    assert failed  # the batches did fail, and were written again one event at a time
    view = _view(instance, keys)
    assert all(len(view[asset, key]) == 1 for asset in EVERY for key in keys)  # no duplicate
    assert [len(view["document_status", key]) for key in keys] == [1 if key in WENT_THROUGH else 0 for key in keys]
    assert view["events"]["ASSET_MATERIALIZATION"] == len(EVERY) * len(keys) + len(WENT_THROUGH)
    assert view["events"]["ASSET_MATERIALIZATION_PLANNED"] == len(DOCUMENT_ASSET_NAMES) * len(keys)
    assert all(view[asset, "materialised"] == keys for asset in EVERY)
    assert view["document_status", "materialised"] == WENT_THROUGH


@dg.asset(partitions_def=documents_partitions)
def _noted(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    batch = DocumentBatch(context)
    assert batch.records_directly  # this Dagster's accumulator is used: no partition listing per document
    for key in batch.keys:
        batch.add_metadata(key, {"document": key, "letters": len(key)})
    with pytest.raises(dg.DagsterInvariantViolationError, match="not one of this run's partitions"):
        batch.add_metadata("elsewhere.pdf", {"document": "elsewhere.pdf"})
    with pytest.raises(dg.DagsterInvariantViolationError, match="not in this step"):
        batch.add_metadata(batch.keys[0], {"x": 1}, asset="document_text")
    return dg.MaterializeResult()


def test_each_document_gets_its_own_metadata_in_a_range(instance):
    keys = ["a.pdf", "bb.pdf", "ccc.pdf", "elsewhere.pdf"]
    instance.add_dynamic_partitions(documents_partitions.name, keys)
    job = dg.Definitions(assets=[_noted]).resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(
        instance=instance,
        tags={"dagster/asset_partition_range_start": "a.pdf", "dagster/asset_partition_range_end": "ccc.pdf"},
    )
    assert result.success
    for key in keys[:3]:
        (record,) = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("_noted"), asset_partitions=[key]), limit=5
        ).records
        metadata = record.asset_materialization.metadata
        assert metadata["document"].value == key and metadata["letters"].value == len(key)
    assert sorted(instance.get_materialized_partitions(dg.AssetKey("_noted"))) == keys[:3]
