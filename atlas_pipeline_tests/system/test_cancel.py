"""Cancelling queued documents under the real daemon: `atlas cancel` and Dagster's own termination of a queued run
put them in `cancelled` (who, when), a running one is refused, the aggregates count them, and they run again when
asked."""

import os
import shutil
import time

import dagster as dg
import pytest

from atlas_pipeline.ops.instance import project_file
from atlas_pipeline.parsing.providers.base import neutral_name
from atlas_pipeline_tests.support.corpus import corpus_file
from atlas_pipeline_tests.support.helpers import latest_metadata, run_atlas
from scripted_servers.processes import dagster_daemon, provider_site, watched_folder_env

pytestmark = pytest.mark.daemon
DEADLINE_SECONDS = 240


def wait_for(what, condition, daemon, log, seconds=DEADLINE_SECONDS):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert daemon.poll() is None, "dagster-daemon exited:\n" + log.read_text()[-3000:]
        value = condition()
        if value:
            return value
        time.sleep(1)
    pytest.fail(f"{what}: not within {seconds} s\n--- daemon log ---\n{log.read_text()[-4000:]}")


def runs_of(instance, key, statuses=None):
    return instance.get_runs(dg.RunsFilter(tags={"dagster/partition": key}, statuses=statuses))


def test_queued_documents_are_cancelled_running_ones_refused_and_they_run_again(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    config = project_file("dagster.yaml").read_text().replace("max_concurrent_runs: 8", "max_concurrent_runs: 1")
    (home / "dagster.yaml").write_text(config)
    kb = tmp_path / "kb"
    kb.mkdir()
    slow = corpus_file("rct/PMC3508963.pdf")
    with provider_site(tmp_path / "provider") as provider:
        # the first document's parse takes a while at the provider: with one run at a time, the others queue
        provider.control(hang=[neutral_name(slow.read_bytes(), "application/pdf")], hang_seconds=25)
        env = {
            **os.environ,
            "DAGSTER_HOME": str(home),
            **watched_folder_env(tmp_path, kb),
            "ATLAS_PARSER": "mineru",
            "ATLAS_MINERU_URL": provider.url,
        }
        log = tmp_path / "daemon.log"
        shutil.copyfile(slow, kb / "running.pdf")
        # the instance's storage made here first: the daemon and its code server then find it (no two creators racing)
        instance = dg.DagsterInstance.from_config(str(home))
        with dagster_daemon(env, tmp_path) as daemon:
            wait_for(
                "the first run started",
                lambda: runs_of(instance, "running.pdf", [dg.DagsterRunStatus.STARTED]),
                daemon,
                log,
            )
            shutil.copyfile(corpus_file("rct/PMC5154016.pdf"), kb / "by-cli.pdf")
            shutil.copyfile(corpus_file("rct/PMC3510731.pdf"), kb / "by-ui.pdf")
            queued = [dg.DagsterRunStatus.QUEUED]
            wait_for(
                "both queued",
                lambda: runs_of(instance, "by-cli.pdf", queued) and runs_of(instance, "by-ui.pdf", queued),
                daemon,
                log,
            )

            refused = run_atlas("cancel", "running.pdf", env=env, cwd=tmp_path)
            assert refused.returncode == 1
            assert "running.pdf: run " in refused.stderr and "a running document cannot be cancelled" in refused.stderr
            unknown = run_atlas("cancel", "by-cli.pdf", "nothing.pdf", env=env, cwd=tmp_path)
            assert unknown.returncode == 1 and "nothing.pdf: no such document (known: " in unknown.stderr
            assert runs_of(instance, "by-cli.pdf", queued)  # all or nothing: the other was not cancelled

            cancelled = run_atlas("cancel", "by-cli.pdf", "--by", "alice", env=env, cwd=tmp_path)
            assert cancelled.returncode == 0, cancelled.stderr
            assert "by-cli.pdf: cancelled (run " in cancelled.stdout and "by alice" in cancelled.stdout
            (ui_run,) = runs_of(instance, "by-ui.pdf", queued)
            assert instance.run_coordinator.cancel_run(ui_run.run_id)  # what the UI's Terminate does to a queued run

            def counted():
                completion = latest_metadata(instance, "task_completion")
                ok = completion and completion["count_cancelled"].value == 2 and completion["count_done"].value == 1
                return completion if ok else None

            completion = wait_for("the aggregates count both cancelled", counted, daemon, log)
            assert completion["total"].value == 3
            assert runs_of(instance, "by-cli.pdf")[0].status == dg.DagsterRunStatus.CANCELED

            status = run_atlas("status", "--documents", env=env, cwd=tmp_path)
            lines = {
                line.split()[0]: line for line in status.stdout.splitlines() if line.endswith(".pdf") or " " in line
            }
            assert "cancelled   cancelled by alice at " in lines["by-cli.pdf"]
            assert "with `atlas cancel` while queued" in lines["by-cli.pdf"]
            assert "cancelled in Dagster at " in lines["by-ui.pdf"] and "while queued" in lines["by-ui.pdf"]
            assert " done " in lines["running.pdf"]

            # a plain `atlas run` leaves them alone; naming one runs it again
            again = run_atlas("run", env=env, cwd=tmp_path)
            assert again.returncode == 0, again.stderr
            assert "2 cancelled document(s) left alone" in again.stdout
            named = run_atlas("run", "--only", "by-cli.pdf", env=env, cwd=tmp_path)
            assert named.returncode == 0, named.stderr
            status = run_atlas("status", "--documents", env=env, cwd=tmp_path)
            lines = {line.split()[0]: line for line in status.stdout.splitlines() if line.strip()}
            assert " done " in lines["by-cli.pdf"] and " cancelled " in lines["by-ui.pdf"]
