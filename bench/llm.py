"""An LLM endpoint's latency, paid at the concurrency it allows: documents per minute and requests in flight.

``python -m bench.llm [--documents 24] [--latency 6] [--concurrency 8]`` (``make bench-llm``); writes
``bench/reports/llm.md``. A scripted OpenAI-compatible server answers every request after ``--latency`` seconds and
serves any number at once (it counts how many it answered at once). The same small documents (plain-text slices of
the corpus' trial articles, so that parsing is negligible) go through:

- ``atlas run --batch 1`` — one document per run, one after another (what ``atlas run`` did before this issue);
- ``atlas run`` — LLM mode's default: ``ATLAS_LLM_CONCURRENCY`` documents a run, extracted at once;
- ``atlas run --workers 2`` — the same batches in two processes (the gate holds the limit across them);
- the daemon, one run per document (``ATLAS_DOCUMENTS_PER_RUN=1``: the sensor before batching), ``max_concurrent_runs``
  of them at a time (dagster.yaml);
- the daemon as it is: the sensor cuts the waiting documents into runs of ``ATLAS_LLM_CONCURRENCY`` (the planner's
  ``documents_per_run``, the same decision as ``atlas run``'s);
- the Celery deployment with two workers on PostgreSQL and S3, one request cap for both (the gate in PostgreSQL).

Each is timed with the endpoint answering at once and with ``--latency``: what the latency *adds* is compared to
the ideal, ``ceil(n / concurrency) × latency``. The daemon is timed as a living review meets it: running already
(warmed by one document it has extracted), from the moment the documents land in the knowledge base until the last
is extracted. The goals: ``atlas run`` within 2× the ideal; the daemon at ≥ 0.8× ``atlas run``'s documents per minute
with ≥ 6 requests in flight.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dagster as dg

from atlas_pipeline.ops.instance import project_file
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.records import ExtractionRecord, read_record
from bench.pipeline import small_documents
from bench.report import table, write_report
from scripted_servers.processes import dagster_daemon, scripted_openai_server

REPORT = Path(__file__).resolve().parent / "reports" / "llm.md"
ATLAS = Path(sys.executable).with_name("atlas")


def _deployment(root: Path, documents: list[tuple[str, str]], base_url: str, concurrency: int) -> dict[str, str]:
    kb, home = root / "kb", root / "home"
    kb.mkdir(parents=True)
    home.mkdir()
    shutil.copyfile(project_file("dagster.yaml"), home / "dagster.yaml")
    _write(kb, documents)
    return {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "ATLAS_KNOWLEDGE_BASE": str(kb),
        "ATLAS_ARTIFACTS": str(root / "artifacts"),
        "ATLAS_EXPORTS": str(root / "exports"),
        "ATLAS_LLM_BASE_URL": base_url,
        "ATLAS_LLM_MODEL": "gpt-4o-mini",
        "ATLAS_LLM_CONCURRENCY": str(concurrency),
        "ATLAS_LLM_GATE_DIR": str(root / "gate"),
        "ATLAS_SENSOR_INTERVAL_SECONDS": "1",
    }


def _write(folder: Path, documents: list[tuple[str, str]]) -> None:
    for name, text in documents:
        (folder / name).write_text(text)


def _extracted(root: Path, keys: list[str]) -> int:
    store = Store(str(root / "artifacts"))
    return sum(1 for key in keys if read_record(store, key, "extraction", ExtractionRecord) is not None)


def _time_cli(root: Path, env: dict[str, str], args: list[str]) -> float:
    began = time.perf_counter()
    result = subprocess.run([str(ATLAS), "run", *args], env=env, cwd=root, capture_output=True, text=True)
    if result.returncode not in (0, 1):
        raise RuntimeError(f"atlas run {' '.join(args)} failed: {result.stderr[-2000:]}")
    return time.perf_counter() - began


def _wait(root: Path, keys: list[str], began: float, limit: float) -> float:
    while _extracted(root, keys) < len(keys):
        if time.perf_counter() - began > limit:
            raise RuntimeError(f"the daemon extracted {_extracted(root, keys)} of {len(keys)} in {limit} s")
        time.sleep(0.25)
    return time.perf_counter() - began


def _time_daemon(
    root: Path, env: dict[str, str], documents: list[tuple[str, str]], rescript, limit: float = 1800
) -> float:
    """The daemon running already: one document extracted first (the daemon, its code server and the sensor warm),
    then the documents dropped in and timed until the last is extracted."""
    kb = Path(env["ATLAS_KNOWLEDGE_BASE"])
    for path in kb.iterdir():
        path.unlink()
    warm = [("warm-up.txt", documents[0][1] + "\nwarm-up")]
    _write(kb, warm)
    with dagster_daemon(env, root):
        _wait(root, ["warm-up.txt"], time.perf_counter(), limit)
        rescript()  # the requests in flight counted from here
        began = time.perf_counter()
        _write(kb, documents)
        return _wait(root, [name for name, _ in documents], began, limit)


CELERY = "Celery, 2 workers, one cap in PostgreSQL (the sensor's batches)"
MODES = {
    "atlas run --batch 1 (one document a run, before)": ["--batch", "1"],
    "atlas run (LLM mode default: a batch of ATLAS_LLM_CONCURRENCY)": [],
    "atlas run --workers 2": ["--workers", "2"],
    "daemon, one run per document (ATLAS_DOCUMENTS_PER_RUN=1, before)": {"ATLAS_DOCUMENTS_PER_RUN": "1"},
    "daemon (the sensor's batches of ATLAS_LLM_CONCURRENCY)": {},
    CELERY: None,
}


def _time_celery(folder: Path, texts: list[tuple[str, str]], server, delay: float, concurrency: int) -> float:
    """The Celery deployment of the tests (Redis, PostgreSQL, an S3-compatible server, the daemon, two workers):
    every step a Celery task, the request gate in the instance's PostgreSQL database for both workers' processes.
    Timed from the drop into the bucket (the cluster running already) until the last document is extracted."""
    from scripted_servers.processes import S3_CREDENTIALS, create_database, moto_s3_server, postgres_server

    folder.mkdir(parents=True, exist_ok=True)
    saved = dict(os.environ)
    with postgres_server() as postgres, moto_s3_server(folder) as s3:
        database = create_database(postgres.env, "bench_llm_celery")
        os.environ.update({**S3_CREDENTIALS, "ATLAS_S3_ENDPOINT_URL": s3, **database})  # this process reads it too
        try:
            return _celery_wall(folder, database, texts, server, delay, concurrency)
        finally:
            os.environ.clear()
            os.environ.update(saved)


def _celery_wall(folder: Path, database: dict[str, str], texts, server, delay: float, concurrency: int) -> float:
    """The cluster started and warmed by one document, then the documents dropped in and timed."""
    from scripted_servers.celery_cluster import celery_deployment

    extra = {"ATLAS_LLM_BASE_URL": server.base_url, "ATLAS_LLM_CONCURRENCY": str(concurrency)}
    with celery_deployment(folder / "cluster", database, workers=2, pool_limit=2, extra_env=extra) as cluster:
        warm, began = texts[0][1] + "\nwarm-up", time.perf_counter()  # the cluster warmed by one document
        cluster.drop("warm-up.txt", warm.encode())
        while not cluster.instance.get_materialized_partitions(dg.AssetKey("document_extraction")):
            if time.perf_counter() - began > 600:
                raise RuntimeError(f"the warm-up document never came through{cluster.logs()}")
            time.sleep(0.5)
        texts = [*texts, ("warm-up.txt", warm)]  # counted among the extracted, already done
        server.script(default={"content": "{}", "delay": delay})  # requests in flight counted from here
        began = time.perf_counter()
        for name, text in texts[:-1]:
            cluster.drop(name, text.encode())
        while True:
            done = cluster.instance.get_materialized_partitions(dg.AssetKey("document_extraction"))
            if len(done) >= len(texts):
                return time.perf_counter() - began
            if time.perf_counter() - began > 1800:
                raise RuntimeError(f"Celery extracted {len(done)} of {len(texts)} in 1800 s{cluster.logs()}")
            time.sleep(0.5)


def measure(documents: int, latency: float, concurrency: int, only: str = "") -> list[list[object]]:
    texts = small_documents(documents)
    ideal = math.ceil(documents / concurrency) * latency
    rows = []
    with (
        tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as folder,
        scripted_openai_server(Path(folder)) as server,
    ):
        for name, args in MODES.items():
            if only and only not in name:
                continue
            walls, most = [], 0
            for delay in (0.0, latency):
                root = Path(folder) / f"{len(rows)}-{delay}"
                env = _deployment(root, texts, server.base_url, concurrency)
                answers = {"content": "{}", "delay": delay}
                server.script(default=answers)
                if args is None:
                    wall = _time_celery(root, texts, server, delay, concurrency)
                elif isinstance(args, dict):  # a daemon
                    wall = _time_daemon(root, env | args, texts, functools.partial(server.script, default=answers))
                else:
                    wall = _time_cli(root, env, args)
                walls.append(wall)
                most = max(most, server.most_in_flight())
                print(f"{name}, latency {delay:g} s: {wall:.1f} s, {server.most_in_flight()} in flight at most")
            added = walls[1] - walls[0]
            rows.append(
                [
                    name,
                    round(walls[0], 1),
                    round(walls[1], 1),
                    round(documents / walls[1] * 60, 1),
                    most,
                    round(added, 1),
                    round(ideal, 1),
                    round(added / ideal, 2),
                ]
            )
    baseline = next((row[3] for row in rows if row[0].startswith("atlas run (")), None)
    for row in rows:  # documents a minute against `atlas run`'s in the same benchmark
        row.append(round(row[3] / baseline, 2) if baseline else "")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=24)
    parser.add_argument("--latency", type=float, default=6.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--report", type=Path, default=REPORT)
    parser.add_argument("--only", default="", help="only the modes whose name contains this (e.g. daemon)")
    args = parser.parse_args()
    rows = measure(args.documents, args.latency, args.concurrency, args.only)
    headers = [
        "mode",
        "wall, endpoint at once (s)",
        f"wall, {args.latency:g} s an answer (s)",
        "documents / min",
        "in flight at most",
        "latency added (s)",
        "ideal n×latency/concurrency (s)",
        "added / ideal",
        "documents / min vs atlas run",
    ]
    note = (
        f"{args.documents} small documents, one request each, ATLAS_LLM_CONCURRENCY={args.concurrency}; the "
        "endpoint serves any number at once. *Latency added* is the wall time with the latency minus the wall time "
        "without it (Dagster's runs, parsing and grading are the same in both); the ideal is "
        "ceil(n / concurrency) × latency. The daemon is timed running already (warmed by one document), from the "
        "moment the documents land until the last is extracted; its requests in flight are counted over that time. "
        "One run per document, the runs' own cost (a process each, ~2.5 s of Dagster's work on 2 cores) and the "
        "runs at a time bound the daemon, not the endpoint; the sensor's batches pay that cost once a batch and keep "
        "ATLAS_LLM_CONCURRENCY requests in flight. The Celery row runs the tests' Celery deployment (Redis, "
        "PostgreSQL, an S3-compatible server, two workers taking every step as a task): two extraction steps at once "
        "would send twice ATLAS_LLM_CONCURRENCY requests, the gate in the instance's database holds them to one cap "
        "for both workers (its 'in flight at most' is the cap, or the cap was not shared); its walls move with "
        "Celery's task dispatch and the sensor's interval by more than the latency (its 'latency added' is noise). "
        "The goals: `atlas run` "
        "within 2× the ideal; the batched daemon at "
        "≥ 0.8× `atlas run`'s documents a minute with ≥ 6 requests in flight."
    )
    write_report(args.report, "LLM concurrency", [("Requests in flight", note + "\n\n" + table(headers, rows))])


if __name__ == "__main__":
    main()
