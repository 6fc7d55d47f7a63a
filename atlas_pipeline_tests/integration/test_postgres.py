"""The pipeline, the sensor and the aggregates on a real PostgreSQL instance store (deploy/postgres/dagster.yaml)."""

import shutil

import dagster as dg

from atlas_pipeline.config.settings import PROJECT_ROOT
from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.document_states import document_states
from atlas_pipeline.store.records import ExtractionRecord, read_record
from atlas_pipeline_tests.support.corpus import copy_into
from atlas_pipeline_tests.support.helpers import SensorHarness, ran_as_its_document, run_atlas


def test_pipeline_sensor_and_aggregates_on_postgres(
    postgres, tmp_path, knowledge_base, settings_for, atlas_for, monkeypatch
):
    for name, value in postgres.items():
        monkeypatch.setenv(name, value)
    home = tmp_path / "home"
    home.mkdir()
    shutil.copyfile(PROJECT_ROOT / "deploy" / "postgres" / "dagster.yaml", home / "dagster.yaml")
    copy_into(knowledge_base, "rct/PMC3508963.pdf", "awkward/derived/empty_zero_bytes.pdf")
    settings, atlas = settings_for(knowledge_base), atlas_for(knowledge_base)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
        harness = SensorHarness(instance, settings, atlas)
        requests = harness.tick().run_requests
        assert {r.partition_key for r in requests} == {"PMC3508963.pdf", "empty_zero_bytes.pdf"}
        defs = build_definitions(settings)
        for request in requests:
            result = defs.resolve_job_def("document_job").execute_in_process(
                partition_key=request.partition_key,
                instance=instance,
                tags={"dagster/run_key": request.run_key},
                raise_on_error=False,
            )
            record = read_record(atlas.store(), request.partition_key, "extraction", ExtractionRecord)
            assert ran_as_its_document(result, record.status)
        assert defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
        completion = instance.get_latest_materialization_event(dg.AssetKey("task_completion")).asset_materialization
        assert completion.metadata["total"].value == 2
        assert completion.metadata["count_done"].value == 1 and completion.metadata["count_failed"].value == 1
        states = {s.key: s for s in document_states(instance, atlas)}
        assert states["empty_zero_bytes.pdf"].reason == "snapshot: empty file (0 bytes)"
        assert harness.tick().run_requests == []
        for run in instance.get_runs():  # the database password never reaches the logs
            for entry in instance.all_logs(run.run_id):
                assert postgres["DAGSTER_PG_PASSWORD"] not in str(entry)
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert postgres["DAGSTER_PG_PASSWORD"].encode() not in path.read_bytes(), path


def test_atlas_run_selects_postgres_by_environment(postgres, tmp_path, knowledge_base, monkeypatch):
    copy_into(knowledge_base, "html/plos_one_article.html")
    for name, value in postgres.items():
        monkeypatch.setenv(name, value)
    env = {
        **postgres,
        "DAGSTER_HOME": str(tmp_path / "home"),
        "ATLAS_INSTANCE_CONFIG": str(PROJECT_ROOT / "deploy" / "postgres" / "dagster.yaml"),
        "ATLAS_KNOWLEDGE_BASE": str(knowledge_base),
        "ATLAS_ARTIFACTS": str(tmp_path / "artifacts"),
        "ATLAS_EXPORTS": str(tmp_path / "exports"),
    }
    result = run_atlas("run", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 documents: 1 finished, 0 open" in result.stdout
    assert "postgres" in (tmp_path / "home" / "dagster.yaml").read_text()
    with dg.DagsterInstance.from_config(str(tmp_path / "home")) as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert instance.get_dynamic_partitions("documents") == ["plos_one_article.html"]
    missing = run_atlas(
        "status",
        env={**env, "DAGSTER_HOME": str(tmp_path / "other"), "ATLAS_INSTANCE_CONFIG": "nope.yaml"},
        cwd=tmp_path,
    )
    expected = f"ATLAS_INSTANCE_CONFIG='{tmp_path / 'nope.yaml'}': no such instance config file"  # made absolute
    assert missing.returncode == 2 and expected in missing.stderr
