"""A run killed with SIGKILL mid-way (under the real daemon) is marked failed and the document is processed again by
run retries (dagster.yaml: run_retries, retry_on_asset_or_op_failure false) without a manual step."""

import os
import shutil
import signal
import time

import dagster as dg
import pytest

from atlas_pipeline.ops.instance import project_file
from atlas_pipeline_tests.support.corpus import corpus_file
from atlas_pipeline_tests.support.helpers import latest_metadata, run_worker_pid
from scripted_servers.processes import dagster_daemon, watched_folder_env

pytestmark = pytest.mark.daemon


def test_killed_run_is_retried_and_the_document_lands(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    config = project_file("dagster.yaml").read_text().replace("poll_interval_seconds: 30", "poll_interval_seconds: 2")
    (home / "dagster.yaml").write_text(config)
    kb = tmp_path / "kb"
    kb.mkdir()
    shutil.copyfile(corpus_file("awkward/derived/PMC3508963_image_only_200dpi.pdf"), kb / "scan.pdf")
    env = {**os.environ, "DAGSTER_HOME": str(home), **watched_folder_env(tmp_path, kb)}
    log_path = tmp_path / "daemon.log"
    with dagster_daemon(env, tmp_path):
        instance = dg.DagsterInstance.from_config(str(home))
        killed = None
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and killed is None:
            for run in instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED])):
                pid = run_worker_pid(instance, run.run_id)
                if pid is not None:  # the run is inside document_parse (OCR of 5 scanned pages): kill it
                    os.kill(pid, signal.SIGKILL)
                    killed = run.run_id
            time.sleep(0.5)
        assert killed, "no run reached document_parse"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:  # the extraction lands, and the run that made it has finished
            extraction = latest_metadata(instance, "document_extraction", "scan.pdf")
            runs = instance.get_runs(dg.RunsFilter(tags={"dagster/partition": "scan.pdf"}))
            if extraction is not None and all(run.is_finished for run in runs):
                break
            time.sleep(2)
        assert instance.get_run_by_id(killed).status == dg.DagsterRunStatus.FAILURE
        retries = [r for r in runs if r.tags.get("dagster/retry_number") == "1"]
        assert retries and retries[0].status == dg.DagsterRunStatus.SUCCESS  # re-run by run retries, no manual step
        assert extraction is not None and extraction["status"].value == "done", log_path.read_text()[-3000:]
