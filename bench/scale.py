"""Scale: sensor tick and task_completion time with 1,000 and 10,000 partitions, peak memory of parsing a
300-page PDF, and throughput of the Celery scale-out with 1 and 2 workers.

``python -m bench.scale [--sizes 1000 10000] [--workers 1 2] [--celery-documents 8]`` (``make bench-scale``); writes
``bench/reports/scale.md``. The many documents are small synthetic text files (one line each); the 300-page PDF is
made by concatenating corpus RCTs; the Celery deployment is the test's (``scripted_servers.celery_cluster``:
Redis, PostgreSQL, an S3-compatible server, the daemon, N workers) fed corpus RCT reports. On a 2-core machine two
workers share the same cores: the figure says little here — the point is a script a team runs on its own cluster.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dagster as dg
import pymupdf

from atlas_pipeline.config.settings import PROJECT_ROOT
from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.document_states import document_states
from atlas_pipeline.defs.resources import AtlasResource
from atlas_pipeline.deployment import Deployment
from bench.pipeline import QUIET, Workspace
from bench.report import table, write_report
from eval.fidelity import CORPUS

PAGES = 300


def sensor_and_completion(size: int) -> list[object]:
    with tempfile.TemporaryDirectory() as folder:
        workspace = Workspace(Path(folder), ATLAS_SENSOR_SCAN_BUDGET_SECONDS="600")
        for number in range(size):
            (workspace.kb / f"note-{number:05d}.txt").write_text(f"Synthetic trial note {number}.\n")
        defs = build_definitions(workspace.settings)
        sensor = defs.resolve_sensor_def("knowledge_base_sensor")

        def tick(cursor: str | None) -> tuple[dg.SensorResult, float]:
            context = dg.build_sensor_context(
                instance=workspace.instance,
                cursor=cursor,
                resources={"atlas": AtlasResource.from_deployment(Deployment.from_settings(workspace.settings))},
                definitions=defs,
            )
            started = time.perf_counter()
            result = sensor(context)
            return result, time.perf_counter() - started

        first, first_seconds = tick(None)
        started = time.perf_counter()
        for request in first.dynamic_partitions_requests:
            workspace.instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        add_seconds = time.perf_counter() - started
        _, second_seconds = tick(first.cursor)
        started = time.perf_counter()
        states = document_states(workspace.instance, workspace.atlas)
        states_seconds = time.perf_counter() - started
        job = defs.resolve_job_def("aggregates_job")
        started = time.perf_counter()
        job.execute_in_process(instance=workspace.instance, run_config=QUIET)
        aggregates_seconds = time.perf_counter() - started
        assert len(states) == size
        return [
            f"{size:,}",
            first_seconds,
            len(first.run_requests),
            add_seconds,
            second_seconds,
            states_seconds,
            aggregates_seconds,
        ]


PARSE_CHILD = """
import json, resource, sys, time
from atlas_pipeline.parsing import parse_document
data = open(sys.argv[1], "rb").read()
started = time.perf_counter()
parsed = parse_document(data, "big.pdf")
print(json.dumps({"seconds": time.perf_counter() - started, "pages": parsed.page_count,
                  "tables": len(parsed.tables), "chars": len(parsed.markdown),
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def big_pdf_memory() -> list[object]:
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "big.pdf"
        out = pymupdf.open()
        sources = sorted((CORPUS / "rct").glob("PMC*.pdf"))
        while out.page_count < PAGES:
            for source in sources:
                with pymupdf.open(source) as doc:
                    out.insert_pdf(doc, to_page=min(doc.page_count, PAGES - out.page_count) - 1)
                if out.page_count >= PAGES:
                    break
        out.save(target)
        out.close()
        baseline = subprocess.run(
            [sys.executable, "-c", "import resource, atlas_pipeline.parsing; "
             "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        result = subprocess.run([sys.executable, "-c", PARSE_CHILD, str(target)], capture_output=True, text=True)
        if result.returncode != 0:
            return [PAGES, "error", result.stderr[-300:], "", "", ""]
        facts = json.loads(result.stdout.strip().splitlines()[-1])
        return [
            facts["pages"],
            facts["seconds"],
            facts["pages"] / facts["seconds"],
            float(baseline.stdout.strip()),
            facts["peak_mib"],
            facts["tables"],
        ]


def celery_throughput(workers: int, documents: int) -> list[object]:
    """Documents per minute through the Celery deployment with ``workers`` workers (from the drop into the bucket
    until every document has its extraction)."""
    import os

    from scripted_servers.celery_cluster import celery_deployment
    from scripted_servers.processes import S3_CREDENTIALS, create_database, moto_s3_server, postgres_server

    sources = sorted((CORPUS / "rct").glob("*.pdf"))[:documents]
    with tempfile.TemporaryDirectory() as folder, postgres_server() as postgres, moto_s3_server(Path(folder)) as s3:
        database = create_database(postgres.env, f"bench_celery_{workers}")
        os.environ.update({**S3_CREDENTIALS, "ATLAS_S3_ENDPOINT_URL": s3, **database})
        with celery_deployment(Path(folder) / "cluster", database, workers=workers, pool_limit=workers) as cluster:
            started = time.perf_counter()
            for source in sources:
                cluster.drop(source.name, source.read_bytes())
            pages = sum(pymupdf.open(source).page_count for source in sources)
            while True:
                done = cluster.instance.get_materialized_partitions(dg.AssetKey("document_extraction"))
                if len(done) >= len(sources):
                    break
                if time.perf_counter() - started > 3600:
                    return [workers, len(sources), pages, "timeout", "", ""]
                time.sleep(1)
            seconds = time.perf_counter() - started
    return [workers, len(sources), pages, seconds, len(sources) / seconds * 60, pages / seconds]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 2], help="Celery workers to measure")
    parser.add_argument("--celery-documents", type=int, default=8)
    args = parser.parse_args()
    rows = []
    for size in args.sizes:
        rows.append(sensor_and_completion(size))
        print(rows[-1], flush=True)
    celery = []
    for workers in args.workers:
        celery.append(celery_throughput(workers, args.celery_documents))
        print(celery[-1], flush=True)
    memory = big_pdf_memory()
    write_report(
        PROJECT_ROOT / "bench" / "reports" / "scale.md",
        "Scale",
        [
            ("Sensor and task completion (seconds)", table(
                ["partitions", "first tick (all new)", "runs requested", "add partitions", "next tick (unchanged)",
                 "document states", "aggregates run (completion + exports)"], rows
            )),
            ("Parsing a 300-page PDF (corpus RCTs concatenated)", table(
                ["pages", "seconds", "pages/s", "peak MiB after import", "peak MiB parsing", "tables"], [memory]
            )),
            ("Celery scale-out: documents through the daemon and N workers (skip mode)", table(
                ["workers", "documents", "pages", "seconds (drop → every extraction)", "documents/min", "pages/s"],
                celery,
            )),
            ("Notes", "The first tick fingerprints every new file (sha256) and requests runs in batches of "
                      "ATLAS_SENSOR_MAX_RUNS_PER_TICK (200); the rest are requested on later ticks. Nothing was "
                      "materialised, so every document counts as pending in task completion. The Celery figures "
                      "include the daemon's sensor interval (2 s), one Dagster run per document and the parse pool "
                      "set to the number of workers; on 2 cores the second worker competes with the first."),
        ],
    )  # fmt: skip


if __name__ == "__main__":
    main()
