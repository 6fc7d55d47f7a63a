"""Bulk loads at the Batch API's price, against a scripted server that follows OpenAI's documented API (files,
batches, statuses, output and error files, expiry, a failed batch): with ``ATLAS_LLM_BATCH`` documents wait at the
endpoint (status ``waiting``) instead of sending requests, survive restarts (every ``atlas run`` is a new process),
are graded as usual when the answers arrive — by ``atlas run`` or by the ``llm_batch_sensor`` — and cost half."""

from __future__ import annotations

import shutil
import time

import dagster as dg

from atlas_pipeline.config.settings import PROJECT_ROOT
from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.defs.resources import AtlasResource
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.extraction.prices import load_prices
from atlas_pipeline.knowledge.catalog import refresh_catalog
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.records import ExtractionRecord, read_record
from atlas_pipeline_tests.support.corpus import copy_into
from atlas_pipeline_tests.support.helpers import document_failed, run_atlas
from atlas_pipeline_tests.support.juice_trial import KEY, answer
from scripted_servers.processes import local_env

PRICE = load_prices(PROJECT_ROOT / "seeds" / "llm_prices.toml").price_of("gpt-4o-mini")
OTHER = "other-trial.md"


def _direct(llm_server) -> list[dict]:
    """Requests sent as chat completions, not through a batch."""
    return [request for request in llm_server.requests() if "_batch" not in request]


def test_documents_wait_at_the_endpoint_across_restarts_and_are_graded_when_the_answers_arrive(
    llm_server, knowledge_base, parse_cache, tmp_path
):
    copy_into(knowledge_base, f"rct/{KEY}")
    (knowledge_base / OTHER).write_text("# Another trial\n\nWe randomised 40 adults to juice or water.\n")
    shutil.copytree(parse_cache, tmp_path / "artifacts" / "parsed")
    env = {
        **local_env(tmp_path, knowledge_base),
        "DAGSTER_HOME": str(tmp_path / "home"),
        "ATLAS_LLM_BASE_URL": llm_server.base_url,
        "ATLAS_LLM_BATCH": "true",
    }
    llm_server.script(default={"content": answer()})
    store = Store(str(tmp_path / "artifacts"))

    def status(key: str) -> ExtractionRecord:
        return read_record(store, key, "extraction", ExtractionRecord)

    estimate = run_atlas("run", "--estimate", env=env, cwd=tmp_path)
    first = run_atlas("run", env=env, cwd=tmp_path)
    assert first.returncode == 0, first.stderr  # waiting at the Batch API is the run's work done, and said
    assert _direct(llm_server) == []  # nothing sent as a chat completion
    (batch,) = llm_server.batches()
    assert batch["status"] == "in_progress" and batch["request_counts"]["total"] == 2
    assert "2 document(s) waiting at the endpoint's Batch API" in first.stdout
    for key in (KEY, OTHER):
        assert status(key).status == "waiting" and "waiting at the endpoint's Batch API" in status(key).reason
    # a restart while the batch runs: it is looked at, not sent again
    second = run_atlas("run", env=env, cwd=tmp_path)
    assert "1 batch(es) at the endpoint; batch_1: in_progress 0/2" in second.stdout
    assert len(llm_server.batches()) == 1 and _direct(llm_server) == []
    status_out = run_atlas("status", env=env, cwd=tmp_path).stdout
    assert "Batch API: 0 request(s) queued for the next batch, 1 batch(es) open" in status_out
    assert "waiting" in status_out

    llm_server.end_batches("expire", answered=1)  # the window ends with one answer in
    third = run_atlas("run", env=env, cwd=tmp_path)
    assert "1 answer(s) in, 1 queued again, 0 refused" in third.stdout
    graded = [key for key in (KEY, OTHER) if status(key).status != "waiting"]
    assert len(graded) == 1
    assert len(llm_server.batches()) == 2  # the expired request went out again in a new batch
    llm_server.end_batches("complete")
    fourth = run_atlas("run", env=env, cwd=tmp_path)
    assert fourth.returncode in (0, 1), fourth.stderr
    juice = status(KEY)
    assert juice.status in ("done", "partial") and juice.fields["n_treatment"]["tier"] == "verified"
    for key in (KEY, OTHER):
        record = status(key)
        assert record.status != "waiting" and record.llm_calls == 1  # one request each, through a batch
        # the Batch API's price: half the list price
        assert record.cost == round(PRICE.cost(record.prompt_tokens, record.completion_tokens, batch=True), 6) > 0
    assert _direct(llm_server) == []
    # the estimate before all this already priced it as a batch: half of what the same tokens cost sent one by one
    assert "≈ $0.0" in estimate.stdout
    again = run_atlas("run", "--force", env=env, cwd=tmp_path)  # every answer is in the cache now: no batch
    assert len(llm_server.batches()) == 2, again.stdout


def test_the_batch_sensor_submits_polls_and_runs_the_documents_again(
    llm_server, knowledge_base, settings_for, instance, parse_cache, tmp_path
):
    copy_into(knowledge_base, f"rct/{KEY}")
    (knowledge_base / OTHER).write_text("# Another trial\n\nWe randomised 40 adults to juice or water.\n")
    shutil.copytree(parse_cache, tmp_path / "artifacts" / "parsed")
    settings = settings_for(knowledge_base, llm_base_url=llm_server.base_url, llm_batch="true")
    atlas = Deployment.from_settings(settings)
    refresh_catalog(atlas.open_knowledge_base(), atlas.store())
    instance.add_dynamic_partitions(documents_partitions.name, [KEY, OTHER])
    defs = build_definitions(settings)
    # the other trial's request is refused for good (a 400): its document fails with the endpoint's words
    llm_server.script(
        {"status": 400, "message": "unsupported parameter", "when": "Another trial"}, default={"content": answer()}
    )
    for key in (KEY, OTHER):
        assert defs.resolve_job_def("document_job").execute_in_process(partition_key=key, instance=instance).success
    sensor = defs.resolve_sensor_def("llm_batch_sensor")
    resources = {"atlas": AtlasResource.from_deployment(Deployment.from_settings(settings))}

    def tick() -> dg.SensorResult:
        return sensor(dg.build_sensor_context(instance=instance, resources=resources, definitions=defs))

    first = tick()  # submits the two queued requests
    assert not first.run_requests and len(llm_server.batches()) == 1
    assert "batch_1: in_progress" in first.skip_reason.skip_message
    llm_server.end_batches("complete")
    second = tick()
    assert sorted(request.partition_key for request in second.run_requests) == [KEY, OTHER]
    ran = {}
    for request in second.run_requests:
        job = defs.resolve_job_def(request.job_name)
        ran[request.partition_key] = job.execute_in_process(
            partition_key=request.partition_key, instance=instance, raise_on_error=False
        )
    assert ran[KEY].success and document_failed(ran[OTHER])  # the refused one red in the UI
    store = atlas.store()
    juice = read_record(store, KEY, "extraction", ExtractionRecord)
    other = read_record(store, OTHER, "extraction", ExtractionRecord)
    assert juice.status in ("done", "partial") and juice.llm_calls == 1
    assert (
        other.status == "failed"
        and "the Batch API refused the request (HTTP 400): unsupported parameter" in other.reason
    )
    assert _direct(llm_server) == []


def _other_waiting(llm_server, knowledge_base, settings_for, instance, **extra: str):
    """Another trial run in batch mode, its request queued: (deployment, document job, LLM client)."""
    (knowledge_base / OTHER).write_text("# Another trial\n\nWe randomised 40 adults to juice or water.\n")
    settings = settings_for(knowledge_base, llm_base_url=llm_server.base_url, llm_batch="true", **extra)
    atlas = Deployment.from_settings(settings)
    refresh_catalog(atlas.open_knowledge_base(), atlas.store())
    instance.add_dynamic_partitions(documents_partitions.name, [OTHER])
    llm_server.script(default={"content": "{}"})
    job = build_definitions(settings).resolve_job_def("document_job")
    assert job.execute_in_process(partition_key=OTHER, instance=instance).success
    return atlas, job, atlas.llm_client(cache=atlas.store())


def test_a_batch_that_failed_fails_its_documents_with_the_reason(
    llm_server, knowledge_base, settings_for, instance, tmp_path
):
    atlas, job, client = _other_waiting(llm_server, knowledge_base, settings_for, instance)
    assert client.batch_tick().submitted == ["batch_1"]
    llm_server.end_batches("fail")
    report = client.batch_tick()
    assert report.failed == 1 and report.ready == {OTHER}
    assert document_failed(job.execute_in_process(partition_key=OTHER, instance=instance, raise_on_error=False))
    record = read_record(atlas.store(), OTHER, "extraction", ExtractionRecord)
    assert record.status == "failed" and "invalid_file: the input file is invalid" in record.reason


def test_a_batch_the_endpoint_never_ends_is_given_up_at_the_local_deadline(
    llm_server, knowledge_base, settings_for, instance
):
    atlas, job, client = _other_waiting(
        llm_server, knowledge_base, settings_for, instance, llm_batch_deadline_hours="0.0003"
    )
    assert read_record(atlas.store(), OTHER, "extraction", ExtractionRecord).status == "waiting"
    assert client.batch_tick().submitted == ["batch_1"]
    assert client.batch_tick().overdue == 0  # within the deadline (about a second): still waiting
    time.sleep(1.2)
    report = client.batch_tick()  # the endpoint never ended it: cancelled there, given up here
    assert report.overdue == 1 and report.ready == {OTHER}, report.summary()
    assert "did not end batch batch_1 within ATLAS_LLM_BATCH_DEADLINE_HOURS=0.0003" in report.summary()
    assert [batch["status"] for batch in llm_server.batches()] == ["cancelled"]
    assert atlas.batch_queue(atlas.store()).open_batches() == []
    job.execute_in_process(partition_key=OTHER, instance=instance, raise_on_error=False)
    record = read_record(atlas.store(), OTHER, "extraction", ExtractionRecord)
    assert record.status != "waiting" and len(_direct(llm_server)) >= 1  # asked directly, not queued again
