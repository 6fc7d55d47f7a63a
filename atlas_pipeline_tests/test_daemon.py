"""End to end with the real dagster-daemon: drop a PDF into the knowledge base — next to hostile links — and see it
processed and counted."""

import os
import shutil
import time

import dagster as dg
import pytest

from atlas_pipeline.instance import project_file
from atlas_pipeline_tests.conftest import corpus_file
from atlas_pipeline_tests.servers import dagster_daemon, watched_folder_env

pytestmark = pytest.mark.daemon
DEADLINE_SECONDS = 300


def latest_metadata(instance: dg.DagsterInstance, asset: str, partition: str | None = None):
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition] if partition else None),
        limit=1,
    ).records
    return records[0].asset_materialization.metadata if records else None


def test_daemon_picks_up_a_dropped_pdf_and_counts_it(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(project_file("dagster.yaml"), home / "dagster.yaml")
    kb = tmp_path / "kb"
    kb.mkdir()
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$hashedpasswordvalue:19000::::::\n")
    (kb / "loop").symlink_to(kb / "loop")  # a link loop and a link out of the knowledge base: the sensor goes on
    (kb / "escape.txt").symlink_to(secret)
    env = {**os.environ, "DAGSTER_HOME": str(home), **watched_folder_env(tmp_path, kb)}
    log_path = tmp_path / "daemon.log"
    with dagster_daemon(env, tmp_path) as daemon:
        time.sleep(5)  # the daemon sees an empty knowledge base first
        shutil.copyfile(corpus_file("rct/PMC3508963.pdf"), kb / "lidocaine trial.pdf")
        instance = dg.DagsterInstance.from_config(str(home))
        deadline = time.monotonic() + DEADLINE_SECONDS
        extraction = completion = None
        while time.monotonic() < deadline:
            assert daemon.poll() is None, "dagster-daemon exited:\n" + log_path.read_text()[-3000:]
            extraction = latest_metadata(instance, "document_extraction", "lidocaine-trial.pdf")
            completion = latest_metadata(instance, "task_completion")
            exported = (tmp_path / "exports" / "atlas_documents.xlsx").exists()
            counted = completion and completion["count_done"].value == 1 and completion["count_skipped"].value == 2
            if extraction and counted and exported:
                break
            time.sleep(2)
        else:
            runs = [(r.job_name, r.status.value) for r in instance.get_runs(limit=20)]
            pytest.fail(
                f"not processed within {DEADLINE_SECONDS}s: extraction={extraction} completion={completion} "
                f"runs={runs}\n--- daemon log ---\n{log_path.read_text()[-4000:]}"
            )
        assert sorted(instance.get_dynamic_partitions("documents")) == ["escape.txt", "lidocaine-trial.pdf", "loop"]
        assert extraction["status"].value == "done"
        assert completion["total"].value == 3 and completion["count_failed"].value == 0
        assert completion["count_skipped"].value == 2
        for path in tmp_path.rglob("*"):
            if path.is_file() and path != secret and "dagster_home" not in path.parts:
                assert b"hashedpasswordvalue" not in path.read_bytes(), path
        sensor_runs = instance.get_runs(dg.RunsFilter(tags={"dagster/partition": "lidocaine-trial.pdf"}))
        assert len(sensor_runs) == 1 and sensor_runs[0].tags.get("dagster/sensor_name") == "knowledge_base_sensor"
        assert latest_metadata(instance, "extraction_exports")["documents"].value == 3
