"""Reliability under the real daemon on PostgreSQL: the awkward corpus (its encrypted, malformed and derived files)
beside part of the sample knowledge base, one run killed mid-way, PostgreSQL restarted once — and at the end every
document has a terminal status, none is stuck, and every failure says why. Scanned pages are read by OCR in
test_hostile_inputs; the long haul under the daemon is bench/soak."""

import hashlib
import os
import shutil
import signal
import time

import dagster as dg
import pytest

from atlas_pipeline.config.settings import PROJECT_ROOT, load_settings
from atlas_pipeline.core.statuses import TERMINAL
from atlas_pipeline.defs.document_states import document_states
from atlas_pipeline.deployment import Deployment
from atlas_pipeline_tests.support.corpus import CORPUS, SEED_KB
from atlas_pipeline_tests.support.helpers import run_worker_pid
from scripted_servers.processes import create_database, dagster_daemon, postgres_server, watched_folder_env

pytestmark = [pytest.mark.daemon, pytest.mark.postgres]  # its own PostgreSQL: it restarts it
KILL_TARGET = "PMC3508963_image_only_200dpi.pdf"
ACTIVE = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]


def settle(function, *args):
    """Call ``function``, retrying while PostgreSQL is restarting."""
    for _ in range(60):
        try:
            return function(*args)
        except Exception:  # connection refused / terminated while the server restarts
            time.sleep(1)
    return function(*args)


@pytest.mark.timeout(1500)
def test_awkward_corpus_and_sample_survive_a_killed_run_and_a_postgres_restart(tmp_path, monkeypatch):
    kb = tmp_path / "kb"
    kb.mkdir()
    seed_pdfs = sorted(SEED_KB.glob("*.pdf"))[:2]  # two papers parsed in full; the others are the same work again
    for path in seed_pdfs + [p for p in sorted(SEED_KB.iterdir()) if p.suffix != ".pdf"]:
        shutil.copyfile(path, kb / path.name)
    for path in sorted((CORPUS / "awkward").rglob("*")):
        if path.parent.name == "scanned":
            continue
        if path.is_file() and path.suffix not in (".txt", ".out") and not (kb / path.name).exists():
            shutil.copyfile(path, kb / path.name)
    contents = {hashlib.sha256(p.read_bytes()).hexdigest() for p in kb.iterdir()}  # the same bytes are one document
    documents = len(contents)
    with postgres_server() as server:
        pg_env = create_database(server.env, "reliability")
        home = tmp_path / "home"
        home.mkdir()
        config = (PROJECT_ROOT / "deploy" / "postgres" / "dagster.yaml").read_text()
        (home / "dagster.yaml").write_text(config.replace("poll_interval_seconds: 30", "poll_interval_seconds: 2"))
        atlas_env = watched_folder_env(tmp_path, kb, automation_seconds=5)
        env = {**os.environ, **pg_env, **atlas_env, "DAGSTER_HOME": str(home)}
        for name, value in pg_env.items():  # the test's own instance reads the same database
            monkeypatch.setenv(name, value)
        log_path = tmp_path / "daemon.log"
        with dagster_daemon(env, tmp_path) as daemon:
            instance = dg.DagsterInstance.from_config(str(home))
            atlas = Deployment.from_settings(load_settings(atlas_env))
            killed = restarted = False
            states = []
            # 22 documents, one of them OCR'd, on two cores: about 3 minutes; stuck is never terminal
            deadline = time.monotonic() + 1000
            while time.monotonic() < deadline:
                assert daemon.poll() is None, "dagster-daemon exited:\n" + log_path.read_text()[-3000:]
                runs = settle(instance.get_runs, dg.RunsFilter(statuses=ACTIVE))
                if not killed:
                    for run in runs:
                        if run.tags.get("dagster/partition") == KILL_TARGET:
                            pid = settle(run_worker_pid, instance, run.run_id)
                            if pid is not None:
                                os.kill(pid, signal.SIGKILL)
                                killed = True
                done = settle(instance.get_runs, dg.RunsFilter(statuses=[dg.DagsterRunStatus.SUCCESS]))
                if not restarted and len(done) >= 8:
                    server.restart()
                    restarted = True
                states = settle(document_states, instance, atlas)
                finished = [s for s in states if s.status in TERMINAL]
                landed = any(s.key == KILL_TARGET and s.status == "done" for s in states)
                # the killed run's retry is the run-retry daemon's: under load it may come a tick after every other
                # run ended, so the pass waits for that document itself (the deadline says so if it never lands)
                if killed and restarted and not runs and len(states) == documents == len(finished) and landed:
                    break
                time.sleep(2)
            summary = "\n".join(f"{s.key}: {s.status.value}: {s.reason}" for s in states)
            assert killed and restarted, summary
            assert len(states) == documents, summary  # documents in = statuses out
            stuck = [s for s in states if s.status not in TERMINAL]
            assert not stuck, summary
            for state in states:
                if state.status in ("failed", "skipped"):
                    assert state.reason and "no run found" not in state.reason, summary
            by_key = {s.key: s for s in states}
            assert by_key[KILL_TARGET].status == "done", summary  # the killed run was retried
            print(f"\n{len(states)} documents, all terminal after a killed run and a PostgreSQL restart:\n{summary}")
