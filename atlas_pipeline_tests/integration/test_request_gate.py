"""LLM requests in flight, with manners (``extraction.llm.gate``): a limit that holds across processes, a 429 or
``Retry-After`` that slows every sender at once (the window halves, then grows back by one a window of answers),
requests- and tokens-per-minute budgets, and a killed sender that gives its slot back. Against the scripted
OpenAI-compatible server, which counts the requests it answers at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from atlas_pipeline.extraction.llm.gate import RequestGate, gate_directory
from atlas_pipeline_tests.support.llm_sender import client, send

OK = {"content": '{"ok": true}'}


def test_the_limit_holds_across_processes(llm_server, tmp_path):
    llm_server.script(default={**OK, "delay": 0.3})
    senders = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "atlas_pipeline_tests.support.llm_sender",
                llm_server.base_url,
                str(tmp_path),
                "3",
                "6",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outputs = [sender.communicate(timeout=120)[0] for sender in senders]
    assert outputs == ["sent 6\n"] * 3
    assert len(llm_server.requests()) == 18
    assert llm_server.most_in_flight() == 3  # 18 requests from 3 processes, never more than 3 at once


def test_a_429_pauses_every_sender_and_halves_the_window(llm_server, tmp_path):
    refused = {"status": 429, "message": "slow down", "headers": {"Retry-After": "1"}}
    llm_server.script(refused, default={**OK, "delay": 0.2})
    llm = client(llm_server.base_url, str(tmp_path), 4, backoff_seconds=0.01)
    assert send(llm, 8) == 8
    requests = llm_server.requests()
    first = requests[0]["_received"]
    after = sorted(request["_received"] for request in requests[1:] if request["_received"] > first + 0.05)
    # nothing was sent during the second the endpoint asked for: every sender waited, not only the refused one
    assert after and after[0] >= first + 0.95, [round(t - first, 2) for t in after]
    # then at most 2 at once (the window of 4 halved), growing back as answers come
    assert sum(1 for t in after if t < after[0] + 0.15) <= 2
    assert 2 < llm.gate.window() <= 4


def test_senders_refused_together_halve_the_window_once_and_it_grows_back(tmp_path):
    now = [1000.0]
    gate = RequestGate(tmp_path / "gate", 8, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    assert gate.throttled(None) == 4
    assert gate.throttled(None) == 4  # the same burst of refusals: halved once
    now[0] += 1.5
    assert gate.throttled(None) == 2
    for _ in range(6):
        gate.answered()
    assert 4 <= gate.window() < 5  # additive increase: about one slot a window of answers
    for _ in range(40):
        gate.answered()
    assert gate.window() == 8  # never above the limit


def test_an_endpoint_at_capacity_is_met_by_a_smaller_window(llm_server, tmp_path):
    llm_server.script(default={**OK, "delay": 0.3}, capacity=3, retry_after=0.3)
    llm = client(llm_server.base_url, str(tmp_path), 8, backoff_seconds=0.05, max_retries=8)
    assert send(llm, 16) == 16  # every request answered in the end
    requests = llm_server.requests()
    assert any(request.get("_refused") for request in requests)
    assert llm_server.most_in_flight() == 3
    assert len(requests) < 16 * 2  # refusals slowed the senders down instead of doubling the traffic


def test_requests_and_tokens_per_minute_budgets(tmp_path):
    now, slept = [1000.0], []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    gate = RequestGate(tmp_path / "rpm", 4, requests_per_minute=3, clock=lambda: now[0], sleep=sleep)
    for _ in range(3):
        with gate.slot():
            now[0] += 1
    assert slept == []
    with gate.slot():  # the fourth of the minute waits for the first to be a minute old
        pass
    assert 56.9 < sum(slept) < 57.1 and now[0] >= 1060
    slept.clear()
    gate = RequestGate(tmp_path / "tpm", 4, tokens_per_minute=1000, clock=lambda: now[0], sleep=sleep)
    start = now[0]
    for _ in range(2):
        with gate.slot(tokens=400):
            pass
        gate.answered(estimated=400, used=450)  # the answer said what it really cost
    with gate.slot(tokens=400):  # 900 used in this minute: 400 more must wait until they have aged out
        pass
    assert now[0] >= start + 60 and slept


def test_a_killed_sender_gives_its_slot_back(tmp_path):
    base_url = "http://127.0.0.1:9/v1"
    holder = subprocess.Popen(
        [sys.executable, "-m", "atlas_pipeline_tests.support.llm_sender", base_url, str(tmp_path), "1", "1", "--hold"]
    )
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "holding").exists():
            assert time.monotonic() < deadline and holder.poll() is None
            time.sleep(0.05)
        gate = RequestGate(gate_directory(base_url, "scripted-model", str(tmp_path)), 1)
        assert gate.storage.take(1) is None  # the one slot is held by the other process
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    began = time.monotonic()
    with gate.slot():
        assert time.monotonic() - began < 2  # the kernel released the dead process's lock


def test_the_gate_folder_is_one_per_endpoint_and_model(tmp_path):
    one = gate_directory("http://a/v1/", "m", str(tmp_path))
    assert one == gate_directory("http://a/v1", "m", str(tmp_path))
    assert one != gate_directory("http://a/v1", "n", str(tmp_path))
    assert one != gate_directory("http://b/v1", "m", str(tmp_path))
    assert Path(str(one)).parent == tmp_path


def _database_url(postgres: dict[str, str]) -> str:
    """The test database's libpq URL (what the instance's ``postgres_url`` is, without SQLAlchemy's driver name)."""
    return (
        f"postgresql://{postgres['DAGSTER_PG_USERNAME']}@{postgres['DAGSTER_PG_HOST']}:{postgres['DAGSTER_PG_PORT']}"
        f"/{postgres['DAGSTER_PG_DB']}"
    )


def _senders(llm_server, tmp_path, database: str, processes: int = 2, limit: int = 3, threads: int = 6) -> list[str]:
    """``processes`` senders, each with a gate folder of its own — as on machines of their own — and the same
    ``database`` (none: each keeps its own cap)."""
    command = [sys.executable, "-m", "atlas_pipeline_tests.support.llm_sender", llm_server.base_url]
    senders = [
        subprocess.Popen(
            [*command, str(tmp_path / f"machine-{number}"), str(limit), str(threads), "--database", database],
            stdout=subprocess.PIPE,
            text=True,
        )
        for number in range(processes)
    ]
    return [sender.communicate(timeout=180)[0] for sender in senders]


def test_two_processes_on_one_postgresql_never_exceed_the_cap_together(llm_server, postgres, tmp_path):
    """ATLAS_LLM_GATE on PostgreSQL: slots are advisory locks in the deployment's database, so processes that share
    no folder (two machines, two Celery workers) share one ATLAS_LLM_CONCURRENCY; without it each has the whole."""
    from atlas_pipeline.extraction.llm.gate_postgres import TABLE

    url = _database_url(postgres)
    llm_server.script(default={**OK, "delay": 0.4})
    assert _senders(llm_server, tmp_path / "apart", "") == ["sent 6\n"] * 2
    assert llm_server.most_in_flight() > 3  # the control: two machines' folders, a cap each
    llm_server.script(default={**OK, "delay": 0.4})
    assert _senders(llm_server, tmp_path / "shared", url) == ["sent 6\n"] * 2
    assert len(llm_server.requests()) == 12
    assert llm_server.most_in_flight() == 3  # 12 requests from two "machines", never more than 3 at once
    import psycopg2

    with psycopg2.connect(url) as connection, connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {TABLE}")
        assert cursor.fetchone()[0] == 1  # one gate (endpoint and model), its window and budgets shared too
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")
        assert cursor.fetchone()[0] == 0  # every slot given back when the senders ended


def test_a_sender_killed_on_postgresql_gives_its_slot_back(llm_server, postgres, tmp_path):
    url = _database_url(postgres)
    folder = tmp_path / "holder"
    folder.mkdir()
    command = [sys.executable, "-m", "atlas_pipeline_tests.support.llm_sender", llm_server.base_url, str(folder)]
    holder = subprocess.Popen([*command, "1", "1", "--hold", "--database", url])
    try:
        deadline = time.monotonic() + 60
        while not (folder / "holding").exists():
            assert time.monotonic() < deadline and holder.poll() is None
            time.sleep(0.1)
        from atlas_pipeline_tests.support.llm_sender import client

        gate = client(llm_server.base_url, str(tmp_path / "other"), 1, gate_url=url).transport.gate
        assert gate.storage.take(1) is None  # the one slot is held, on another "machine"
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    deadline = time.monotonic() + 30
    while (held := gate.storage.take(1)) is None:  # the server ends the dead session and its lock with it
        assert time.monotonic() < deadline, "the killed sender's slot was never given back"
        time.sleep(0.2)
    gate.storage.release(held[1])


def test_an_unreachable_gate_database_is_said_without_its_password():
    from atlas_pipeline.extraction.llm.gate_postgres import GateDatabaseError, PostgresGateStorage, libpq_url

    assert libpq_url("postgresql+psycopg2://u:p@h:5/db") == "postgresql://u:p@h:5/db"
    storage = PostgresGateStorage("postgresql+psycopg2://atlas:s3cret-pw@127.0.0.1:9/atlas", "gate")
    for attempt in (lambda: storage.take(1), lambda: storage.transaction().__enter__()):
        try:
            attempt()
        except GateDatabaseError as error:
            assert "127.0.0.1:9/atlas is not reachable" in str(error) and "s3cret-pw" not in str(error)
        else:
            raise AssertionError("an unreachable database was not said")
