"""`atlas migrate`: the embedded default (SQLite + local folders) moved to PostgreSQL + S3 without loss."""

import hashlib
import io
import shutil
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from atlas_pipeline.config.settings import PROJECT_ROOT, load_settings
from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.outputs.export_files import EXPORT_STEM, FIELDS_STEM
from atlas_pipeline.store.files import Store, filesystem_for
from atlas_pipeline.store.records import ParseRecord, read_record
from atlas_pipeline_tests.support.corpus import copy_into
from atlas_pipeline_tests.support.helpers import SensorHarness, run_atlas
from scripted_servers.processes import S3_CREDENTIALS, create_database, local_env

EXPORT_FILES = [f"{EXPORT_STEM}.{fmt}" for fmt in ("csv", "jsonl", "parquet", "xlsx")] + [
    f"{FIELDS_STEM}.{fmt}" for fmt in ("csv", "jsonl", "parquet")
]


def _export_contents(store: Store) -> dict[str, object]:
    """Export files as comparable values: csv/jsonl bytes, parquet/xlsx as data frames (sheet by sheet)."""
    contents: dict[str, object] = {}
    for name in EXPORT_FILES:
        data = store.read_bytes(name)
        if name.endswith(".parquet"):
            contents[name] = pl.read_parquet(io.BytesIO(data)).to_dicts()
        elif name.endswith(".xlsx"):
            sheets = pl.read_excel(io.BytesIO(data), sheet_id=0)
            contents[name] = {sheet: frame.to_dicts() for sheet, frame in sheets.items()}
        else:
            contents[name] = data
    return contents


def test_embedded_deployment_moves_to_postgres_and_s3_without_loss(tmp_path, knowledge_base, new_deployment):
    copy_into(
        knowledge_base,
        "rct/PMC3508963.pdf",
        "html/plos_one_article.html",
        "awkward/malformed/qpdf_bad1.pdf",
        "awkward/derived/PMC3508963_user_password_aes256.pdf",
    )
    old = {"DAGSTER_HOME": str(tmp_path / "old_home"), **local_env(tmp_path, knowledge_base)}
    first = run_atlas("run", env=old, cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    old_artifacts, old_exports = Store(old["ATLAS_ARTIFACTS"]), Store(old["ATLAS_EXPORTS"])
    before = _export_contents(old_exports)
    checksums = {path: hashlib.sha256(old_artifacts.read_bytes(path)).hexdigest() for path in old_artifacts.files()}
    assert any(path.startswith("parsed/") for path in checksums) and any(p.startswith("snapshots/") for p in checksums)

    source_args = ["--from-home", old["DAGSTER_HOME"], "--from-artifacts", old["ATLAS_ARTIFACTS"]]
    source_args += ["--from-exports", old["ATLAS_EXPORTS"]]
    migrated = run_atlas("migrate", *source_args, env={**new_deployment, **old_kb(old)}, cwd=tmp_path)
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    out = migrated.stdout
    assert (
        f"store s3://atlas-new/artifacts: {len(checksums)} objects verified by sha256 ({len(checksums)} copied" in out
    )
    assert "documents: 4 before, 4 after, 0 with another status/reason" in out
    assert "search index: 2 document(s) indexed in postgres" in out and "old deployment's index: 2 in sqlite" in out
    assert "DIFFERENT" not in out and "migrated without loss" in out
    found = run_atlas("search", "renal colic", env={**new_deployment, **old_kb(old)}, cwd=tmp_path)
    assert found.returncode == 0 and "PMC3508963.pdf" in found.stdout and "(postgres," in found.stdout, found.stdout

    again = run_atlas("migrate", *source_args, "--quiet", env={**new_deployment, **old_kb(old)}, cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr  # interrupted or repeated: resumes, copies nothing
    assert (
        f"{len(checksums)} objects verified by sha256 (0 copied, 0 bytes; {len(checksums)} already there)"
        in again.stdout
    )
    assert "instance: 0 of" in again.stdout

    # every artifact (snapshots, parse cache, records, catalog) is in the bucket with the same bytes
    new_artifacts = Store(new_deployment["ATLAS_ARTIFACTS"])
    assert {path: hashlib.sha256(new_artifacts.read_bytes(path)).hexdigest() for path in checksums} == checksums

    with dg.DagsterInstance.from_config(new_deployment["DAGSTER_HOME"]) as instance:
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
        with dg.DagsterInstance.from_config(old["DAGSTER_HOME"]) as source:
            assert sorted(r.run_id for r in instance.get_runs()) == sorted(r.run_id for r in source.get_runs())
            old_runs = {r.run_id: r.status for r in source.get_runs()}
        assert {r.run_id: r.status for r in instance.get_runs()} == old_runs
        assert set(instance.get_dynamic_partitions(documents_partitions.name)) == {
            "PMC3508963.pdf",
            "plos_one_article.html",
            "qpdf_bad1.pdf",
            "PMC3508963_user_password_aes256.pdf",
        }
        # the knowledge base moves to the bucket too (any copy tool): same bytes, so nothing is processed again
        fs = filesystem_for("s3://atlas-new")[0]
        for path in knowledge_base.iterdir():
            fs.pipe_file(f"atlas-new/knowledge_base/{path.name}", path.read_bytes())
        settings = load_settings({**new_deployment, "ATLAS_KNOWLEDGE_BASE": "s3://atlas-new/knowledge_base"})
        atlas = Deployment.from_settings(settings)
        # the new deployment knows everything is done: the sensor requests nothing, the aggregates rebuild the
        # exports from the migrated history and they are identical to the old ones
        harness = SensorHarness(instance, settings, atlas)
        assert harness.tick().run_requests == []
        assert (
            build_definitions(settings).resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
        )
        assert _export_contents(atlas.exports_store()) == before
        # a document processed again on the new deployment hits the migrated parse cache
        assert (
            build_definitions(settings)
            .resolve_job_def("document_job")
            .execute_in_process(partition_key="PMC3508963.pdf", instance=instance)
            .success
        )
        assert read_record(atlas.store(), "PMC3508963.pdf", "parse", ParseRecord).cached

    # once the new deployment has moved on, migrating again refuses instead of overwriting its newer artifacts
    late = run_atlas("migrate", *source_args, "--quiet", env={**new_deployment, **old_kb(old)}, cwd=tmp_path)
    assert late.returncode == 1 and "already exists with other bytes" in late.stderr
    assert read_record(atlas.store(), "PMC3508963.pdf", "parse", ParseRecord).cached


def old_kb(old: dict[str, str]) -> dict[str, str]:
    return {"ATLAS_KNOWLEDGE_BASE": old["ATLAS_KNOWLEDGE_BASE"]}


def test_migrate_refuses_a_folder_that_is_not_a_dagster_home(tmp_path):
    result = run_atlas("migrate", "--from-home", str(tmp_path / "nothing"), env={}, cwd=tmp_path)
    assert result.returncode == 2 and "holds no dagster.yaml (not a Dagster home)" in result.stderr


def test_copy_is_verified_and_resumable(tmp_path):
    from atlas_pipeline.ops.migration import MigrationError, copy_store

    source, target = Store(str(tmp_path / "a")), Store(str(tmp_path / "b"))
    source.write_bytes("x/one.json", b"1")
    source.write_bytes("two.bin", b"\x00" * 10)
    report = copy_store(source, target)
    assert (report.objects, report.copied, report.already_present) == (2, 2, 0)
    assert (
        target.read_bytes("x/one.json") == b"1"
        and report.checksums["two.bin"] == hashlib.sha256(b"\x00" * 10).hexdigest()
    )
    assert copy_store(source, target).already_present == 2
    shutil.rmtree(Path(tmp_path / "b" / "x"))
    assert copy_store(source, target).copied == 1
    target.write_bytes("two.bin", b"newer")  # the target moved on: refused, not overwritten
    with pytest.raises(MigrationError, match="already exists with other bytes"):
        copy_store(source, target)
    assert target.read_bytes("two.bin") == b"newer"


def _event_count(database: dict[str, str]) -> int:
    import psycopg2

    with (
        psycopg2.connect(
            host=database["DAGSTER_PG_HOST"],
            port=database["DAGSTER_PG_PORT"],
            dbname=database["DAGSTER_PG_DB"],
            user=database["DAGSTER_PG_USERNAME"],
            password=database["DAGSTER_PG_PASSWORD"],
        ) as connection,
        connection.cursor() as cursor,
    ):
        try:
            cursor.execute("select count(*) from event_logs")
        except psycopg2.Error:
            return 0
        return cursor.fetchone()[0]


def test_a_migration_killed_during_the_history_copy_resumes_event_for_event(
    tmp_path, knowledge_base, monkeypatch, postgres_cluster, s3_endpoint
):
    """SIGKILL `atlas migrate` once a share of the events is in the new database (early, midway, late — each on a
    fresh PostgreSQL database and bucket prefix), run it again: the new side equals the old, run for run, event for
    event, with the runs' creation times."""
    import subprocess
    import sys
    import time

    copy_into(
        knowledge_base, "html/plos_one_article.html", "rct_jats/PMC1216327.nxml", "awkward/malformed/qpdf_bad1.pdf"
    )
    old = {"DAGSTER_HOME": str(tmp_path / "old_home"), **local_env(tmp_path, knowledge_base)}
    assert run_atlas("run", env=old, cwd=tmp_path).returncode == 0
    with dg.DagsterInstance.from_config(old["DAGSTER_HOME"]) as source:
        expected = {r.run_id: (r.status, len(source.all_logs(r.run_id))) for r in source.get_runs()}
        created = {r.dagster_run.run_id: r.create_timestamp for r in source.get_run_records()}
    total = sum(events for _, events in expected.values())
    source_args = ["--from-home", old["DAGSTER_HOME"], "--from-artifacts", old["ATLAS_ARTIFACTS"]]
    source_args += ["--from-exports", old["ATLAS_EXPORTS"]]
    filesystem_for("s3://atlas-kill")[0].mkdir("atlas-kill")
    for attempt, share in enumerate((0.05, 0.5, 0.9)):
        database = create_database(postgres_cluster, f"atlas_killed_{attempt}")
        env = {
            **S3_CREDENTIALS,
            **database,
            **old_kb(old),
            "ATLAS_S3_ENDPOINT_URL": s3_endpoint,
            "DAGSTER_HOME": str(tmp_path / f"home_{attempt}"),
            "ATLAS_INSTANCE_CONFIG": str(PROJECT_ROOT / "deploy" / "postgres" / "dagster.yaml"),
            "ATLAS_ARTIFACTS": f"s3://atlas-kill/{attempt}/artifacts",
            "ATLAS_EXPORTS": f"s3://atlas-kill/{attempt}/exports",
        }
        process = subprocess.Popen(
            [str(Path(sys.executable).parent / "atlas"), "migrate", *source_args],
            env={**__import__("os").environ, **env},
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        threshold = max(1, int(share * total))
        while process.poll() is None and _event_count(database) < threshold:
            time.sleep(0.01)
        process.kill()
        process.wait(timeout=60)
        copied = _event_count(database)
        assert process.returncode == -9 and 0 < copied < total, (share, copied, total)
        resumed = run_atlas("migrate", *source_args, env=env, cwd=tmp_path)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert "runs: 0 differ in status or events" in resumed.stdout and "migrated without loss" in resumed.stdout
        for name, value in database.items():
            monkeypatch.setenv(name, value)
        with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as target:
            got = {r.run_id: (r.status, len(target.all_logs(r.run_id))) for r in target.get_runs()}
            assert got == expected
            assert {r.dagster_run.run_id: r.create_timestamp for r in target.get_run_records()} == created
