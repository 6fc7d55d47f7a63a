"""The LLM endpoint misbehaving under the real daemon: 429 and 500 without end, garbage, hanging, and gone
altogether. Each affected document is retried inside its run, then ends `failed` with the reason; none is left
`extracting`, no run fails or loops, and once the endpoint is back a re-run extracts the document."""

import os
import shutil
import time

import dagster as dg
import pytest

from atlas_pipeline.config.settings import load_settings
from atlas_pipeline.core.statuses import DocumentStatus
from atlas_pipeline.defs.document_states import document_states
from atlas_pipeline.deployment import Deployment
from atlas_pipeline_tests.support.corpus import corpus_file
from atlas_pipeline_tests.support.helpers import latest_metadata, run_atlas
from scripted_servers.processes import dagster_daemon, free_port, scripted_openai_server, watched_folder_env

pytestmark = pytest.mark.daemon

PHASES = [  # (document, endpoint behaviour, reason the document must end with)
    ("rct_jats/PMC1216327.nxml", {"status": 429, "message": "rate limited"}, "HTTP 429 (gave up after 2 attempts)"),
    ("rct_jats/PMC1475568.nxml", {"status": 500, "message": "boom"}, "HTTP 500 (gave up after 2 attempts)"),
    ("rct_jats/PMC1513406.nxml", {"content": "I cannot answer in JSON"}, "not valid JSON for the schema"),
    ("rct_jats/PMC1574360.nxml", {"delay": 20, "content": "{}"}, "request timed out (gave up after 2 attempts)"),
    ("rct_jats/PMC1949842.nxml", None, "connection failed (gave up after 2 attempts)"),  # endpoint gone
]


def wait_for_extraction(instance: dg.DagsterInstance, key: str, log: str, timeout: float = 240) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        metadata = latest_metadata(instance, "document_extraction", key)
        if metadata is not None:
            return metadata
        time.sleep(1)
    raise AssertionError(f"{key} not extracted within {timeout} s; daemon log:\n{log[-3000:]}")


def test_llm_faults_end_failed_with_reasons_never_stuck(tmp_path):
    home, kb = tmp_path / "home", tmp_path / "kb"
    home.mkdir()
    kb.mkdir()
    port = free_port()
    llm = {
        "ATLAS_POSTPROCESS_MODE": "llm",
        "ATLAS_LLM_BASE_URL": f"http://127.0.0.1:{port}/v1",
        "ATLAS_LLM_MODEL": "scripted-model",
        "ATLAS_LLM_API_KEY": "sk-atlas-daemon-test",
        "ATLAS_LLM_TIMEOUT_SECONDS": "2",
        "ATLAS_LLM_MAX_RETRIES": "1",
        "ATLAS_LLM_BACKOFF_SECONDS": "0.05",
    }
    env = {**os.environ, "DAGSTER_HOME": str(home), **watched_folder_env(tmp_path, kb), **llm}
    server = scripted_openai_server(tmp_path, port=port)
    endpoint = server.__enter__()
    try:
        # the instance's storage made before the daemon starts: two processes creating one SQLite schema at once race
        # ("table alembic_version already exists") and the daemon may never start
        instance = dg.DagsterInstance.from_config(str(home))
        with dagster_daemon(env, tmp_path):
            for document, behaviour, reason in PHASES:
                if behaviour is None:
                    server.__exit__(None, None, None)  # the endpoint goes away
                    server = None
                else:
                    endpoint.script(default=behaviour)
                shutil.copyfile(corpus_file(document), kb / os.path.basename(document))
                key = os.path.basename(document)
                metadata = wait_for_extraction(instance, key, (tmp_path / "daemon.log").read_text())
                assert metadata["status"].value == "failed", (key, metadata["reason"].value)
                assert metadata["reason"].value.startswith("extract: LLM") and reason in metadata["reason"].value

            settings = load_settings({k: v for k, v in env.items() if k.startswith("ATLAS_")})
            states = {s.key: s for s in document_states(instance, Deployment.from_settings(settings))}
            assert len(states) == len(PHASES)
            assert all(s.status == DocumentStatus.FAILED for s in states.values())
            assert not [s for s in states.values() if s.status == DocumentStatus.EXTRACTING]
            # each run merges the document's review after its extraction: let the last one finish
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and instance.get_runs(
                dg.RunsFilter(
                    job_name="document_job", statuses=[dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
                )
            ):
                time.sleep(1)
            runs = instance.get_runs(dg.RunsFilter(job_name="document_job"))
            assert len(runs) == len(PHASES)  # one run per document: nothing loops
            # the document failed, not the pipeline: each run's only failed step is document_status (red in the UI)
            assert {run.status for run in runs} == {dg.DagsterRunStatus.FAILURE}
            for run in runs:
                failed = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_FAILURE)
                assert {entry.step_key for entry in failed} == {"document_status"}

        # the endpoint is back: re-running a failed document (UI "materialize" / atlas run --only) extracts it
        with scripted_openai_server(tmp_path, port=port) as back:
            back.script(default={"content": "{}"})
            run = run_atlas("run", "--only", "PMC1949842.nxml", env=env, cwd=tmp_path)
            assert run.returncode == 0, run.stdout + run.stderr
            assert (
                "[1/1] PMC1949842.nxml: " in run.stdout and "failed" not in run.stdout.split("[1/1]")[1].split("\n")[0]
            )
            assert back.requests(), "the re-run did not call the endpoint"
    finally:
        if server is not None:
            server.__exit__(None, None, None)
