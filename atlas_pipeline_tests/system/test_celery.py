"""Scale-out for real: two Celery workers (their own processes and working directories, a Redis broker) run the
document steps of runs the daemon launches, with the instance on PostgreSQL and everything else on S3 — nothing
shared but what a real deployment shares. A worker killed mid-step is recovered; the parse pool and the LLM request
gate hold across workers; the LLM answers are cached on S3; the UI started with the guide's command shows the runs."""

import itertools
import json
import os
import signal
import time
import urllib.request
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from atlas_pipeline_tests.support.corpus import corpus_file
from atlas_pipeline_tests.support.helpers import latest_metadata
from scripted_servers.celery_cluster import celery_deployment
from scripted_servers.processes import create_database, scripted_openai_server

pytestmark = [pytest.mark.daemon, pytest.mark.postgres, pytest.mark.s3, pytest.mark.corpus]
DEADLINE_SECONDS = 420
BUCKET = "atlas-celery"  # celery_deployment's default
VICTIM = "long.pdf"  # 17 pages: its parse takes seconds, the worker running it is killed
DOCUMENTS = {
    VICTIM: "rct/PMC4144850.pdf",
    "lidocaine.pdf": "rct/PMC3508963.pdf",
    "second.pdf": "rct/PMC5154016.pdf",
    "third.pdf": "rct/PMC3510731.pdf",
}
WORKER_LOST_AFTER = 15  # the test's Redis visibility timeout (deploy/celery/executor.yaml: 3600 s)


def _celery_events(instance: dg.DagsterInstance) -> list[tuple[str, str, str, str]]:
    """(run id, step key, Celery worker, document) of every "Executing steps … in celery worker" event so far."""
    found = []
    for run in instance.get_runs(dg.RunsFilter(job_name="document_job")):
        for entry in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
            event = entry.dagster_event
            metadata = event.engine_event_data.metadata if event and event.engine_event_data else {}
            if "Celery worker" in metadata:
                worker, document = str(metadata["Celery worker"].value), run.tags.get("dagster/partition", "")
                found.append((run.run_id, event.step_key or "", worker, document))
    return found


def _step_intervals(instance: dg.DagsterInstance, step: str) -> list[tuple[float, float, int, str]]:
    """(start, end, pid, run id) of each successful execution of ``step`` in the document runs."""
    intervals = []
    for run in instance.get_runs(dg.RunsFilter(job_name="document_job")):
        starts = {}
        for entry in instance.all_logs(run.run_id):
            event = entry.dagster_event
            if event is None or event.step_key != step:
                continue
            if event.event_type == dg.DagsterEventType.STEP_START:
                starts[step] = (entry.timestamp, event.pid)
            elif event.event_type == dg.DagsterEventType.STEP_SUCCESS and step in starts:
                intervals.append((starts[step][0], entry.timestamp, starts[step][1], run.run_id))
    return sorted(intervals)


def test_celery_workers_run_the_document_steps_and_survive_a_killed_worker(
    tmp_path, postgres_cluster, s3_endpoint, monkeypatch
):
    database = create_database(postgres_cluster, "celery_scale_out")
    for name, value in database.items():  # this process reads the instance too
        monkeypatch.setenv(name, value)
    # the parse pool at one step at a time and one LLM request in flight (the request gate), to see both hold across
    # the workers; the model answers nothing (each document "incomplete"), enough to see every extraction ask it once
    # and keep the answer on S3
    with (
        scripted_openai_server(tmp_path) as llm,
        celery_deployment(
            tmp_path,
            database,
            workers=2,
            visibility_timeout=WORKER_LOST_AFTER,
            pool_limit=1,
            extra_env={"ATLAS_LLM_BASE_URL": llm.base_url, "ATLAS_LLM_CONCURRENCY": "1"},
            webserver=True,
        ) as cluster,
    ):
        llm.script(default={"content": "{}", "delay": 0.3})
        instance, daemon = cluster.instance, cluster.daemon
        fs = cluster.fs
        for name, relative in DOCUMENTS.items():
            cluster.drop(name, corpus_file(relative).read_bytes())
        cluster.drop("broken.pdf", b"<html><body>not a pdf</body></html>")
        log = tmp_path / "daemon" / "daemon.log"

        def fail(what: str) -> None:
            pytest.fail(f"{what}\n{cluster.logs()}")

        # the worker that parses the long document is killed (the whole machine, say) in the middle of it
        deadline = time.monotonic() + DEADLINE_SECONDS
        while True:
            taken = [
                (run, who)
                for run, step, who, key in _celery_events(instance)
                if (step, key) == ("document_parse", VICTIM)
            ]
            if taken:
                break
            if time.monotonic() > deadline or daemon.poll() is not None:
                fail("the long document's parse never started")
            time.sleep(0.2)
        ((victim, lost),) = taken
        killed, survivor = ("worker1", "worker2") if lost.startswith("worker1@") else ("worker2", "worker1")
        os.killpg(cluster.workers[killed].pid, signal.SIGKILL)
        killed_at = time.time()

        completion = None
        while time.monotonic() < deadline:
            assert daemon.poll() is None, log.read_text()[-3000:]
            completion = latest_metadata(instance, "task_completion")
            exports = latest_metadata(instance, "extraction_exports")
            counted = completion and completion["count_incomplete"].value == 4 and completion["count_failed"].value == 1
            if counted and exports and exports["documents"].value == 5:
                break
            time.sleep(2)
        else:
            fail(f"not every document finished: {completion and {k: v.value for k, v in completion.items()}}")

        # every step ran in a worker, not in the run's process: both workers took steps
        events = _celery_events(instance)
        workers = {who.split("@")[0] for _, _, who, _ in events}
        assert workers == {"worker1", "worker2"}, events
        runs = instance.get_runs(dg.RunsFilter(job_name="document_job"))
        # every run went through; broken.pdf's failed at its last step, document_status (red in the UI)
        statuses = {run.tags["dagster/partition"]: run.status for run in runs}
        assert len(runs) == 5 and statuses.pop("broken.pdf") == dg.DagsterRunStatus.FAILURE
        assert set(statuses.values()) == {dg.DagsterRunStatus.SUCCESS}
        for run in runs:  # each of the run's steps was handed to a Celery worker
            steps = {e.step_key for e in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_START)}
            assert steps == {"document_snapshot", "document_parse", "document_extraction", "document_review"} | {
                "document_status"
            }
            failures = {e.step_key for e in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_FAILURE)}
            assert failures == ({"document_status"} if run.tags["dagster/partition"] == "broken.pdf" else set())
            assert steps == {step for run_id, step, _, _ in events if run_id == run.run_id}, events
        # the killed worker's parse came back to the other worker and finished there, after the kill
        again = [who.split("@")[0] for run, step, who, _ in events if run == victim and step == "document_parse"]
        assert again == [killed, survivor], events
        parses = _step_intervals(instance, "document_parse")
        assert len(parses) == 5
        assert any(run == victim and end > killed_at for _, end, _, run in parses), parses
        # the parse pool (one at a time) held across the two workers: no two parses overlapped
        for (_, end, _, _), (start, _, _, _) in itertools.pairwise(parses):
            assert start >= end - 0.05, parses
        # the request gate (ATLAS_LLM_CONCURRENCY=1) held across the workers' processes: one request at a time — in
        # the instance's PostgreSQL database (ATLAS_LLM_GATE=auto), as it would across machines
        assert len(_step_intervals(instance, "document_extraction")) == 5
        assert llm.most_in_flight() == 1
        with instance.run_storage.connect() as connection:
            gates = connection.exec_driver_sql("SELECT count(*) FROM atlas_llm_gate").scalar()
        assert gates == 1
        # each readable document asked the model once; the answers are kept on S3 for any worker to find
        asked = llm.requests()  # a long document may be read in chunks: a request each
        assert len(asked) >= 4 and len(fs.find(f"{BUCKET}/artifacts/llm_cache")) == len(asked), asked
        # no step ran in a run worker's process
        run_pids = {
            int(event.dagster_event.pid)
            for run in runs
            for event in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.RUN_START)
        }
        assert not run_pids & {pid for _, _, pid, _ in parses}

        # the aggregates and the exports, on S3
        assert completion["total"].value == 5
        exported = pl.read_parquet(fs.open(f"{BUCKET}/exports/atlas_documents.parquet", "rb").read())
        statuses = dict(zip(exported["document_key"], exported["status"], strict=True))
        assert statuses == {**dict.fromkeys(DOCUMENTS, "incomplete"), "broken.pdf": "failed"}
        # the UI, started with the guide's command on its own machine (its own DAGSTER_HOME), shows these runs
        query = {"query": "{ runsOrError { ... on Runs { results { runId status jobName } } } }"}
        request = urllib.request.Request(
            f"{cluster.webserver}/graphql",
            data=json.dumps(query).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            shown = json.loads(response.read())["data"]["runsOrError"]["results"]
        shown_documents = {r["runId"]: r["status"] for r in shown if r["jobName"] == "document_job"}
        # (and the broken document's run as failed: its document_status is red in the asset's partitions)
        assert shown_documents == {run.run_id: run.status.value for run in runs}
        # nothing was written on a local disk of the workers but logs and Dagster's own compute logs
        for name in ("worker1", "worker2"):
            written = {p.relative_to(tmp_path / name).parts[0] for p in Path(tmp_path / name).rglob("*") if p.is_file()}
            assert written <= {"worker.log", "dagster_home"}, written
