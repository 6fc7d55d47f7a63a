"""Scale: the knowledge-base sensor, the planner and the aggregates at 10,000, 50,000 and 100,000 documents on
PostgreSQL; peak memory of parsing a 300-page PDF; throughput of the Celery scale-out with 1 and 2 workers.

``python -m bench.scale [--sizes 10000 50000 100000] [--workers 1 2] [--no-pdf]`` (``make bench-scale``); writes
``bench/reports/scale.md``. Each size runs in a process of its own (its peak memory is its own) against a throw-away
PostgreSQL server (``scripted_servers.processes``) with the deployment's defaults, except
``ATLAS_SENSOR_MAX_RUNS_PER_TICK`` at its maximum (10,000 documents requested a tick: the heaviest tick there is, and
every document requested within the run). The documents are small synthetic text files (one line each): what is
measured is the bookkeeping per document — listing, fingerprints, the catalog, partitions, the cursor, the run
history, the aggregates — not parsing. The sensor is ticked as the daemon does (partitions added between ticks,
the cursor kept) until a tick has nothing to do; then five ticks with nothing changed. The 300-page PDF is made by
concatenating corpus RCTs; the Celery deployment is the test's (``scripted_servers.celery_cluster``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dagster as dg
import pymupdf

from atlas_pipeline.config.settings import PROJECT_ROOT, load_settings
from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.document_states import document_states
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.defs.resources import AtlasResource
from atlas_pipeline.defs.run_history import InstanceFacts
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.knowledge.catalog import load_catalog
from atlas_pipeline.knowledge.planning import plan_runs
from bench.pipeline import QUIET
from bench.report import table, write_report
from eval.fidelity import CORPUS

PAGES = 300
UNCHANGED_TICKS = 5
HISTORY = 5000  # documents given an extraction in the run history before the plan is timed
TICK_GOAL_SECONDS = 10.0  # issue #45: every tick well inside Dagster's 60 s


def measure_size(size: int) -> dict[str, object]:
    """One size, in this process: the sensor's ticks from an empty catalog to nothing left to do, then unchanged;
    a plan made without the cursor (a sensor whose cursor was lost); every document's state; the aggregates."""
    from scripted_servers.processes import create_database, postgres_server

    with tempfile.TemporaryDirectory() as folder, postgres_server() as postgres:
        root = Path(folder)
        os.environ.update(create_database(postgres.env, "scale"))
        kb = root / "kb"
        kb.mkdir()
        for number in range(size):
            with open(kb / f"note-{number:06d}.txt", "wb") as handle:
                handle.write(f"Synthetic trial note {number}.\n".encode())
        home = root / "home"
        home.mkdir()
        shutil.copyfile(PROJECT_ROOT / "deploy" / "postgres" / "dagster.yaml", home / "dagster.yaml")
        settings = load_settings(
            {
                "ATLAS_KNOWLEDGE_BASE": str(kb),
                "ATLAS_ARTIFACTS": str(root / "artifacts"),
                "ATLAS_EXPORTS": str(root / "exports"),
                "ATLAS_SENSOR_MAX_RUNS_PER_TICK": "10000",
            }
        )
        deployment = Deployment.from_settings(settings)
        defs = build_definitions(settings)
        sensor = defs.resolve_sensor_def("knowledge_base_sensor")
        resources = {"atlas": AtlasResource.from_deployment(deployment)}
        with dg.DagsterInstance.from_config(str(home)) as instance:

            def tick(cursor: str | None) -> tuple[dg.SensorResult, float]:
                context = dg.build_sensor_context(
                    instance=instance, cursor=cursor, resources=resources, definitions=defs
                )
                started = time.perf_counter()
                result = sensor(context)
                return result, time.perf_counter() - started

            cursor, ticks, requested, adding = None, [], 0, 0.0
            while True:
                result, seconds = tick(cursor)
                ticks.append(seconds)
                requested += sum(int(r.tags.get("atlas/documents", 1)) for r in result.run_requests)
                started = time.perf_counter()
                for request in result.dynamic_partitions_requests:
                    instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
                adding += time.perf_counter() - started
                cursor = result.cursor
                print(f"  {size:,}: tick {len(ticks)} {seconds:.2f} s, {requested:,} requested", flush=True)
                if not result.run_requests and not result.dynamic_partitions_requests:
                    break
                if len(ticks) > 200:
                    raise RuntimeError("the sensor never settled")
            unchanged = [tick(cursor)[1] for _ in range(UNCHANGED_TICKS)]
            catalog = load_catalog(deployment.store())
            known = instance.get_dynamic_partitions(documents_partitions.name)
            version = deployment.extraction_version().tag
            history = catalog.active()[:HISTORY]
            for entry in history:  # a run history to read: these were extracted (as a run records it)
                event = dg.AssetMaterialization(
                    asset_key="document_extraction",
                    partition=entry.key,
                    metadata={"sha256": entry.sha256, "reason": ""},
                    tags={"dagster/code_version": version},
                )
                instance.report_runless_asset_event(event)
            started = time.perf_counter()
            plan = plan_runs(
                catalog, set(known), InstanceFacts(instance, deployment.store(), version), limit=10000
            )  # no cursor: the run history is asked about 10,000 documents, the first HISTORY of them extracted
            plan_seconds = time.perf_counter() - started
            started = time.perf_counter()
            states = document_states(instance, deployment)
            states_seconds = time.perf_counter() - started
            result = defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance, run_config=QUIET)
            steps = {
                stat.step_key: stat.end_time - stat.start_time for stat in instance.get_run_step_stats(result.run_id)
            }
            run = instance.get_run_record_by_id(result.run_id)
            assert len(states) == size and requested == size and len(plan.unchanged) == len(history)
            assert len(plan.to_run) == min(size, 10000) - len(history)
            cursor_bytes = len(cursor or "")
        return {
            "size": size,
            "ticks": ticks,
            "unchanged": unchanged,
            "add_partitions": adding,
            "requested": requested,
            "cursor_bytes": cursor_bytes,
            "plan": plan_seconds,
            "states": states_seconds,
            "aggregates": run.end_time - run.start_time,
            "steps": steps,
            "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        }


def size_rows(facts: dict[str, object]) -> tuple[list[object], list[object]]:
    """The sensor row and the aggregates row of one size."""
    ticks = list(facts["ticks"]) + list(facts["unchanged"])
    quantiles = statistics.quantiles(ticks, n=20, method="inclusive") if len(ticks) > 1 else ticks * 19
    steps = facts["steps"]
    sensor = [
        f"{facts['size']:,}",
        len(facts["ticks"]),
        statistics.median(ticks),
        quantiles[18],
        max(ticks),
        "yes" if max(ticks) <= TICK_GOAL_SECONDS else "no",
        statistics.median(facts["unchanged"]),
        facts["add_partitions"],
        f"{facts['cursor_bytes']:,}",
        facts["plan"],
    ]
    aggregates = [
        f"{facts['size']:,}",
        facts["states"],
        facts["aggregates"],
        steps.get("task_completion", ""),
        steps.get("duplicate_groups", ""),
        steps.get("extraction_exports", ""),
        steps.get("search_index", ""),
        facts["peak_mib"],
    ]
    return sensor, aggregates


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
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000, 100_000])
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 2], help="Celery workers to measure")
    parser.add_argument("--celery-documents", type=int, default=8)
    parser.add_argument("--no-pdf", action="store_true", help="leave out the 300-page PDF")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child: one size, its facts as JSON
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure_size(args.one)))
        return
    sensor_rows, aggregate_rows = [], []
    for size in args.sizes:
        child = subprocess.run(
            [sys.executable, "-m", "bench.scale", "--one", str(size)], capture_output=True, text=True, cwd=PROJECT_ROOT
        )
        if child.returncode != 0:
            raise SystemExit(f"size {size}: {child.stderr[-2000:]}")
        sensor, aggregates = size_rows(json.loads(child.stdout.strip().splitlines()[-1]))
        sensor_rows.append(sensor)
        aggregate_rows.append(aggregates)
        print(sensor, aggregates, flush=True)
    celery = []
    for workers in args.workers:
        celery.append(celery_throughput(workers, args.celery_documents))
        print(celery[-1], flush=True)
    memory = [] if args.no_pdf else [big_pdf_memory()]
    write_report(
        PROJECT_ROOT / "bench" / "reports" / "scale.md",
        "Scale",
        [
            ("The knowledge-base sensor on PostgreSQL (seconds)", table(
                ["documents", "ticks to settle", "tick p50", "tick p95", "tick max",
                 f"every tick ≤ {TICK_GOAL_SECONDS:g} s", "unchanged tick p50", "adding partitions (all ticks)",
                 "cursor bytes", "plan without cursor"],
                sensor_rows,
            )),
            ("Document states and the aggregates (seconds; nothing extracted yet)", table(
                ["documents", "document states", "aggregates run", "task completion", "duplicate groups", "exports",
                 "search index", "peak MiB"], aggregate_rows,
            )),
            ("Parsing a 300-page PDF (corpus RCTs concatenated)", table(
                ["pages", "seconds", "pages/s", "peak MiB after import", "peak MiB parsing", "tables"], memory
            )),
            ("Celery scale-out: documents through the daemon and N workers (skip mode)", table(
                ["workers", "documents", "pages", "seconds (drop → every extraction)", "documents/min", "pages/s"],
                celery,
            )),
            ("Notes", "Ticks are timed as the sensor's evaluation (what counts against Dagster's 60 s); the partitions "
                      "a tick asks for are added between ticks, as the daemon does, and timed apart. A tick's scan "
                      "(listing, the catalog, fingerprints of new files) takes ATLAS_SENSOR_SCAN_BUDGET_SECONDS (5 s) "
                      "and defers the new files left, so the first ticks of a large knowledge base are the scan's; "
                      "then 10,000 documents are requested a "
                      "tick (ATLAS_SENSOR_MAX_RUNS_PER_TICK at its maximum; the default is 200). The cursor holds "
                      "what was requested per document in a file of the artifact store once past 500 documents "
                      "(store/sensor_marks.py): the figure is the cursor Dagster keeps with each tick. 'Plan without "
                      "cursor': the planner asking the run history about 10,000 documents, 5,000 of them with an "
                      "extraction recorded, as a sensor whose cursor was reset does. Nothing else is materialised, so "
                      "the aggregates read every document's (missing) "
                      "records and count every document pending; peak MiB is the measuring process's (the sensor, "
                      "the planner and the aggregates in one process). On 2 cores the second Celery worker competes "
                      "with the first."),
        ],
    )  # fmt: skip


if __name__ == "__main__":
    main()
