"""End to end with the real dagster-daemon: drop a PDF into the knowledge base — next to hostile links — and see it
processed and counted."""

import json
import os
import shutil
import time
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.ops.instance import project_file
from atlas_pipeline_tests.support.corpus import corpus_file
from atlas_pipeline_tests.support.helpers import latest_metadata
from scripted_servers.processes import dagster_daemon, watched_folder_env

pytestmark = pytest.mark.daemon
DEADLINE_SECONDS = 300


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
            # the exports' materialisation, not their files: the files are written before the step's event is stored
            exported = latest_metadata(instance, "extraction_exports")
            counted = completion and completion["count_done"].value == 1 and completion["count_skipped"].value == 2
            if extraction and counted and exported and exported["documents"].value == 3:
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
            if path.is_file() and not path.is_symlink() and path != secret and "dagster_home" not in path.parts:
                assert b"hashedpasswordvalue" not in path.read_bytes(), path
        sensor_runs = instance.get_runs(dg.RunsFilter(tags={"dagster/partition": "lidocaine-trial.pdf"}))
        assert len(sensor_runs) == 1 and sensor_runs[0].tags.get("dagster/sensor_name") == "knowledge_base_sensor"
        assert exported["documents"].value == 3 and (tmp_path / "exports" / "atlas_documents.xlsx").exists()

        # a deleted source reaches the aggregates and the exports with no manual step
        (kb / "lidocaine trial.pdf").unlink()
        deadline = time.monotonic() + DEADLINE_SECONDS
        while time.monotonic() < deadline:
            assert daemon.poll() is None, "dagster-daemon exited:\n" + log_path.read_text()[-3000:]
            completion = latest_metadata(instance, "task_completion")
            if completion and completion["removed_sources"].value == 1:
                exported = pl.read_parquet(tmp_path / "exports" / "atlas_documents.parquet")
                row = exported.filter(pl.col("document_key") == "lidocaine-trial.pdf").row(0, named=True)
                if row["source_removed"]:
                    break
            time.sleep(2)
        else:
            pytest.fail("the removal did not reach the exports:\n" + log_path.read_text()[-4000:])
        assert row["status"] == "done"  # the results are kept
        observation = instance.fetch_observations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("document_snapshot"), asset_partitions=["lidocaine-trial.pdf"]),
            limit=1,
        ).records[0]
        assert observation.asset_observation.metadata["source_removed"].value is True


def test_the_daemon_runs_waiting_documents_in_one_batch_each_with_its_own_status(tmp_path):
    """Several documents waiting: the sensor requests one run over their partition range (ATLAS_DOCUMENTS_PER_RUN),
    the daemon launches it, and every document is materialised with its own status — the failing one red alone."""
    home, kb = tmp_path / "dagster_home", tmp_path / "kb"
    home.mkdir()
    shutil.copyfile(project_file("dagster.yaml"), home / "dagster.yaml")
    kb.mkdir()
    for relative in ("html/plos_one_article.html", "rct_jats/PMC1216327.nxml", "awkward/malformed/qpdf_bad1.pdf"):
        shutil.copyfile(corpus_file(relative), kb / Path(relative).name)
    env = {**os.environ, "DAGSTER_HOME": str(home), **watched_folder_env(tmp_path, kb), "ATLAS_DOCUMENTS_PER_RUN": "8"}
    keys = ["PMC1216327.nxml", "plos_one_article.html", "qpdf_bad1.pdf"]
    with dagster_daemon(env, tmp_path) as daemon:
        instance = dg.DagsterInstance.from_config(str(home))
        deadline, statuses = time.monotonic() + DEADLINE_SECONDS, {}
        while time.monotonic() < deadline:
            assert daemon.poll() is None, "dagster-daemon exited:\n" + (tmp_path / "daemon.log").read_text()[-3000:]
            if sorted(instance.get_dynamic_partitions("documents")) == keys:
                found = instance.get_status_by_partition(dg.AssetKey("document_status"), keys, documents_partitions)
                statuses = {key: status.value for key, status in (found or {}).items()}
                if len(statuses) == 3 and "IN_PROGRESS" not in statuses.values():
                    break
            time.sleep(2)
        runs = instance.get_runs(dg.RunsFilter(tags={"dagster/sensor_name": "knowledge_base_sensor"}))
        said = f"runs={[(r.job_name, r.status.value) for r in runs]}\n" + (tmp_path / "daemon.log").read_text()[-3000:]
        assert statuses == {
            "PMC1216327.nxml": "MATERIALIZED",
            "plos_one_article.html": "MATERIALIZED",
            "qpdf_bad1.pdf": "FAILED",
        }, said
        (run,) = [run for run in runs if run.job_name != "aggregates_job"]
        assert run.job_name == "document_batch_job" and run.tags["atlas/documents"] == "3", said
        assert run.status == dg.DagsterRunStatus.FAILURE  # at document_status, for qpdf_bad1.pdf alone
        extracted = instance.get_status_by_partition(dg.AssetKey("document_extraction"), keys, documents_partitions)
        assert {status.value for status in extracted.values()} == {"MATERIALIZED"}
        failed = latest_metadata(instance, "document_extraction", "qpdf_bad1.pdf")
        assert failed["reason"].value == "snapshot: not a PDF (no %PDF- header)"


def test_atlas_dev_serves_the_ui_runs_the_daemon_and_stops_cleanly(tmp_path):
    """`atlas dev` from a shell whose PATH does not hold the virtual environment (a fresh clone's `make dev`)."""
    import signal
    import subprocess
    import sys
    import urllib.error
    import urllib.request

    from scripted_servers.processes import free_port

    kb = tmp_path / "kb"
    kb.mkdir()
    shutil.copyfile(corpus_file("html/plos_one_article.html"), kb / "plos_one_article.html")
    shutil.copyfile(corpus_file("awkward/malformed/ocrmypdf_invalid.pdf"), kb / "broken.pdf")
    port, review_port = free_port(), free_port()
    env = {
        "PATH": "/usr/bin:/bin",
        "ATLAS_REVIEW_PORT": str(review_port),
        "HOME": str(tmp_path),
        "DAGSTER_HOME": str(tmp_path / "home"),
        **watched_folder_env(tmp_path, kb),
        "ATLAS_KNOWLEDGE_BASE": "kb",  # relative to where `atlas dev` starts, as in `make dev`
    }
    shutil.copyfile(project_file("dagster.yaml"), tmp_path / "dagster.yaml")  # like the repository root
    atlas = str(Path(sys.executable).parent / "atlas")
    log = (tmp_path / "dev.log").open("wb")
    process = subprocess.Popen(
        [atlas, "dev", "--port", str(port)], env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
        # as from a shell that runs it in the background (or under nohup): SIGINT ignored from the start
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + DEADLINE_SECONDS
        answered = exported = reviewing = False
        while time.monotonic() < deadline and not (answered and exported and reviewing):
            assert process.poll() is None, (tmp_path / "dev.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=5) as response:
                    answered = response.status == 200 and b"dagster_webserver_version" in response.read()
                with urllib.request.urlopen(f"http://127.0.0.1:{review_port}/api/documents", timeout=5) as response:
                    reviewing = b"plos_one_article.html" in response.read()  # the review page, same instance
            except OSError:
                pass
            exported = (tmp_path / "exports" / "atlas_documents.xlsx").exists()  # the daemon's sensor ran it
            time.sleep(2)
        assert answered and exported and reviewing, (tmp_path / "dev.log").read_text()[-3000:]
        # the UI's own API: the broken document red in the partitions of document_status, the good one green
        query = (
            '{ assetNodeOrError(assetKey: {path: ["document_status"]}) { ... on AssetNode { assetPartitionStatuses '
            "{ ... on DefaultPartitionStatuses { materializedPartitions failedPartitions } } } } }"
        )
        statuses = {}
        while time.monotonic() < deadline:
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/graphql",
                data=json.dumps({"query": query}).encode(),
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                statuses = json.loads(response.read())["data"]["assetNodeOrError"]["assetPartitionStatuses"]
            if statuses["failedPartitions"] and statuses["materializedPartitions"]:
                break
            time.sleep(2)
        assert statuses == {"materializedPartitions": ["plos_one_article.html"], "failedPartitions": ["broken.pdf"]}
        # DNS rebinding: a foreign name resolving to 127.0.0.1, its page posting GraphQL with its own Origin
        query = json.dumps({"query": "{ version }"}).encode()
        for host, expected in (("rebind.example", 400), (f"attacker.test:{port}", 400), (f"localhost:{port}", 200)):
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/graphql",
                data=query,
                headers={"Host": host, "Origin": f"http://{host}", "Content-Type": "application/json"},
            )
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    status, body = response.status, response.read()
            except urllib.error.HTTPError as error:
                status, body = error.code, error.read()
            assert status == expected, (host, status, body[:300])
            assert (b'"version"' in body) == (expected == 200), body[:300]
    finally:
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C in the terminal
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            raise
        log.close()
    assert process.returncode is not None
    said = (tmp_path / "dev.log").read_text()
    for noise in ("will not be used", "SupersessionWarning", "Traceback"):  # nothing alarming for a new user
        assert noise not in said, said[-3000:]
    deadline = time.monotonic() + 30  # a run worker may take a few seconds to see its run stopped
    while leftovers := subprocess.run(["pgrep", "-a", "-s", str(process.pid)], capture_output=True, text=True).stdout:
        if time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            raise AssertionError(f"processes left behind 30 s after Ctrl-C:\n{leftovers}")
        time.sleep(1)


def test_a_trickling_source_holds_neither_its_sensor_nor_the_others(tmp_path):
    """A feed that sends a byte now and then, with the default 30 s read timeout: each tick of its sensor ends within
    the pass budget (well under Dagster's 60 s sensor timeout), counts a failure and, after three, pauses the source;
    meanwhile another source collects and the knowledge-base sensor has the collected document extracted."""
    from atlas_pipeline.sources.state import load_state
    from atlas_pipeline.store.files import Store
    from scripted_servers.processes import feed_site

    home, kb = tmp_path / "dagster_home", tmp_path / "kb"
    home.mkdir()
    kb.mkdir()
    shutil.copyfile(project_file("dagster.yaml"), home / "dagster.yaml")
    with feed_site(tmp_path / "site") as site:
        site.publish("a", corpus_file("rct/PMC3508963.pdf"), after=10**9)  # served, never in the feed
        site.control(trickle={"/feed.xml": 0.5})
        sources = tmp_path / "sources.toml"
        sources.write_text(
            f'[[source]]\nname = "trickling"\nfeed = "{site.feed}"\ntarget = "slow"\npoll_minutes = 0.02\n'
            "min_domain_interval_seconds = 0\ntimeout_seconds = 30\n\n"
            f'[[source]]\nname = "healthy"\nurls = ["{site.url}/docs/PMC3508963.pdf"]\ntarget = "healthy"\n'
            "poll_minutes = 0.02\nmin_domain_interval_seconds = 0\n"
        )
        env = {**os.environ, "DAGSTER_HOME": str(home), **watched_folder_env(tmp_path, kb)}
        env |= {"ATLAS_SOURCES": str(sources), "ATLAS_SOURCES_INTERVAL_SECONDS": "2"}
        store = Store(str(tmp_path / "artifacts"))
        log_path = tmp_path / "daemon.log"
        with dagster_daemon(env, tmp_path) as daemon:
            instance = dg.DagsterInstance.from_config(str(home))
            deadline = time.monotonic() + DEADLINE_SECONDS
            paused = extracted = False
            while time.monotonic() < deadline and not (paused and extracted):
                assert daemon.poll() is None, "dagster-daemon exited:\n" + log_path.read_text()[-3000:]
                paused = load_state(store, "trickling").paused
                extraction = latest_metadata(instance, "document_extraction", "PMC3508963.pdf")
                extracted = extraction is not None
                time.sleep(2)
            said = log_path.read_text(errors="replace")
            assert paused and extracted, said[-3000:]
    state = load_state(store, "trickling")
    assert state.consecutive_failures >= 3 and "longer than" in state.paused_reason, state.paused_reason
    for timeout in ("DEADLINE_EXCEEDED", "timed out after 60", "SensorTimeout"):  # no tick hit Dagster's limit
        assert timeout not in said, said[-3000:]
