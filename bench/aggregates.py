"""The aggregates over extracted documents: a refresh reading every document's records (before) against one making
again only the parts of documents that changed (``outputs.document_products``), at N documents.

``python -m bench.aggregates [--sizes 2000 10000]`` (``make bench-aggregates``); writes
``bench/reports/aggregates.md``. The documents are the seed knowledge base extracted in LLM mode (a scripted
OpenAI-compatible server answering as for the juice trial: values, quotes — verified where the text has them —
and outcome entries), their records copied N times under new keys (each copy its own document to the aggregates;
the snapshots and texts are shared), every copy's extraction recorded in the Dagster instance (SQLite) as a run
records it. Per size, each measure runs in a process of its own (its peak memory is its own), in this order:

- before: the states of every document read at once, the exports written from them (``export_tables`` +
  ``write_exports``: what the aggregates did before), with the task completion;
- first refresh: every document's part made and its shards written, the exports written from the parts;
- unchanged: a refresh with nothing changed (the parts read from their shards);
- one decision: a person corrects one value of one document, then a refresh (that document's part made again).

The workbook is written with its default cap per sheet (``ATLAS_REVIEW_WORKBOOK_SHEET_ROWS``), in every measure.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dagster as dg

from atlas_pipeline.config.settings import PROJECT_ROOT, load_settings
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.knowledge.catalog import Catalog, load_catalog, save_catalog
from atlas_pipeline.ops.instance import project_file
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.records import ExtractionRecord, read_record
from bench.report import table, write_report

ATLAS = Path(sys.executable).parent / "atlas"
SEEDS = PROJECT_ROOT / "seeds" / "knowledge_base"


def _settings(root: Path) -> dict[str, str]:
    return {
        "ATLAS_KNOWLEDGE_BASE": str(root / "kb"),
        "ATLAS_ARTIFACTS": str(root / "artifacts"),
        "ATLAS_EXPORTS": str(root / "exports"),
        "ATLAS_LLM_BASE_URL": "http://127.0.0.1:9/v1",  # never asked: nothing is extracted in a measure
        "ATLAS_LLM_MODEL": "scripted-model",
    }


def seed_records(root: Path) -> list[str]:
    """The seed knowledge base through ``atlas run`` in LLM mode against a scripted server; the keys extracted."""
    from atlas_pipeline_tests.support.juice_trial import API_KEY, answer
    from scripted_servers.processes import scripted_openai_server

    (root / "kb").mkdir(parents=True)
    for path in SEEDS.iterdir():
        if path.is_file() and not path.name.startswith("."):
            shutil.copy(path, root / "kb" / path.name)
    home = root / "home"
    home.mkdir()
    shutil.copyfile(project_file("dagster.yaml"), home / "dagster.yaml")
    (root / "llm").mkdir()
    with scripted_openai_server(root / "llm") as server:
        server.script(default={"content": answer()})
        env = {
            **os.environ,
            **_settings(root),
            "DAGSTER_HOME": str(home),
            "ATLAS_LLM_BASE_URL": server.base_url,
            "ATLAS_LLM_API_KEY": API_KEY,
        }
        done = subprocess.run([str(ATLAS), "run"], env=env, cwd=root, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"atlas run failed: {done.stderr[-2000:]}")
    store = Store(str(root / "artifacts"))
    return [p.name for p in (root / "kb").iterdir() if read_record(store, p.name, "extraction", ExtractionRecord)]


def make_dataset(root: Path, size: int) -> None:
    """``size`` documents: the seeds' records copied under new keys, their extractions recorded in the instance."""
    seeds = root / "seeds"
    keys = seed_records(seeds)
    source = Store(str(seeds / "artifacts"))
    artifacts = root / "artifacts"
    for folder in ("parsed", "snapshots"):
        shutil.copytree(seeds / "artifacts" / folder, artifacts / folder)
    catalog = load_catalog(source)
    entries, made = {}, []
    for number in range(size):
        seed = keys[number % len(keys)]
        key = f"copy{number:06d}-{seed}"
        target = artifacts / "documents" / key
        shutil.copytree(seeds / "artifacts" / "documents" / seed, target)
        for record in target.glob("*.json"):  # each copy's records name it, as its own run would have written them
            data = json.loads(record.read_text())
            if isinstance(data, dict) and data.get("key") == seed:
                record.write_text(json.dumps({**data, "key": key}))
        entries[key] = catalog.entries[seed].model_copy(update={"key": key, "source_path": key})
        made.append(key)
    save_catalog(Store(str(artifacts)), Catalog(entries=entries))
    (root / "kb").mkdir()
    (root / "home").mkdir()
    deployment = Deployment.from_settings(load_settings(_settings(root)))
    version = deployment.extraction_version().tag
    with dg.DagsterInstance.local_temp(str(root / "home")) as instance:
        instance.add_dynamic_partitions(documents_partitions.name, made)
        for key in made:
            tags = {"dagster/code_version": version}
            event = dg.AssetMaterialization(asset_key="document_extraction", partition=key, tags=tags)
            instance.report_runless_asset_event(event)


def measure(root: Path, what: str) -> dict[str, float]:
    """One measure, in this process (see the module's docstring)."""
    from atlas_pipeline.defs.aggregate_inputs import aggregate_inputs
    from atlas_pipeline.defs.document_states import document_states
    from atlas_pipeline.outputs.completion import summarise
    from atlas_pipeline.outputs.exports import export_tables, write_exports
    from atlas_pipeline.outputs.study_parts import analysis_from_states
    from atlas_pipeline.review.decisions import DecisionRequest, decide
    from atlas_pipeline.review.study_values import load_choices

    deployment = Deployment.from_settings(load_settings(_settings(root)))
    store, exports, template = deployment.store(), deployment.exports_store(), deployment.load_template()
    sheet_rows = deployment.review_policy().workbook_sheet_rows
    with dg.DagsterInstance.local_temp(str(root / "home")) as instance:
        if what == "one":
            record = next(
                found
                for path in sorted((root / "artifacts" / "documents").iterdir())
                if (found := read_record(store, path.name, "extraction", ExtractionRecord)) and found.status == "done"
            )
            field = template.field_definition("n_control")
            shown = (record.sha256, record.extraction_version)
            decide(
                store, record, DecisionRequest("n_control", "correct", "bench", shown, template_field=field, value=7)
            )
        began = time.perf_counter()
        if what == "before":
            states = document_states(instance, deployment)
            read = time.perf_counter() - began
            tables, completion = export_tables(states, template), summarise(states)
            analysis = analysis_from_states(states, template, load_choices(store))
            made = len(states)
        else:
            inputs = aggregate_inputs(instance, deployment)
            read = time.perf_counter() - began
            tables, completion = inputs.tables, inputs.completion()
            analysis = inputs.analysis(template, load_choices(store))
            made = inputs.made
        written = write_exports(exports, tables, analysis, completion, template, sheet_rows)
        if written.not_written:
            raise RuntimeError(f"not written: {written.not_written}")
    return {
        "seconds": time.perf_counter() - began,
        "read": read,
        "made": made,
        "fields": tables.fields.height,
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


MEASURES = ("before", "first", "unchanged", "one")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2_000, 10_000])
    parser.add_argument("--measure", nargs=2, help=argparse.SUPPRESS)  # a child: ROOT WHAT
    parser.add_argument("--dataset", nargs=2, help=argparse.SUPPRESS)  # ROOT SIZE: make one and keep it
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(Path(args.measure[0]), args.measure[1])))
        return
    if args.dataset:
        make_dataset(Path(args.dataset[0]), int(args.dataset[1]))
        return
    rows = []
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            started = time.perf_counter()
            make_dataset(root, size)
            print(f"{size:,} documents ready in {time.perf_counter() - started:.0f} s", flush=True)
            facts = {}
            for what in MEASURES:
                child = subprocess.run(
                    [sys.executable, "-m", "bench.aggregates", "--measure", str(root), what],
                    capture_output=True,
                    text=True,
                    cwd=PROJECT_ROOT,
                )
                if child.returncode != 0:
                    raise SystemExit(f"{size} {what}: {child.stderr[-3000:]}")
                facts[what] = json.loads(child.stdout.strip().splitlines()[-1])
                print(size, what, facts[what], flush=True)
        before = facts["before"]["seconds"]
        rows.append(
            [
                size,
                facts["before"]["fields"],
                *(round(facts[what]["seconds"], 2) for what in MEASURES),
                round(before / facts["unchanged"]["seconds"], 1),
                round(before / facts["one"]["seconds"], 1),
                *(round(facts[what]["peak_mib"], 1) for what in MEASURES),
                facts["one"]["made"],
            ]
        )
    write_report(
        PROJECT_ROOT / "bench" / "reports" / "aggregates.md",
        "Aggregates over extracted documents",
        [
            ("Refresh: the exports and task completion (seconds, peak MiB)", table(
                ["documents", "field rows", "before: every state", "first refresh", "unchanged", "one decision",
                 "before ÷ unchanged", "before ÷ one decision", "peak MiB before", "peak MiB first",
                 "peak MiB unchanged", "peak MiB one decision", "parts made after one decision"],
                rows,
            )),
            ("Notes", __doc__.split("\n\n", 1)[1].replace("\n", " ")),
        ],
    )  # fmt: skip


if __name__ == "__main__":
    main()
