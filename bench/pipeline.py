"""Orchestration overhead and re-materialisation: the Dagster pipeline next to the library called directly.

``python -m bench.pipeline [--sizes 10 50 200]`` (``make bench-pipeline``); writes ``bench/reports/pipeline.md``.

- overhead: N small real documents (slices of the corpus' evidence articles, plain text) processed by calling
  ``take_snapshot → parse_snapshot → extract_document`` directly, and by one Dagster run per document
  (``document_job``, in-process executor, SQLite instance): overhead = (Dagster − direct) / Dagster.
- re-materialisation: the corpus RCT PDFs through Dagster twice (skip mode), and once more in LLM mode against a
  local scripted OpenAI-compatible server: second pass time, cache hits and LLM calls.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import dagster as dg

from atlas_pipeline.catalog import load_catalog, refresh_catalog
from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.defs.resources import AtlasResource
from atlas_pipeline.instance import project_file
from atlas_pipeline.processing import extract_document, parse_snapshot, take_snapshot
from atlas_pipeline.records import ExtractionRecord, read_record
from atlas_pipeline.settings import PROJECT_ROOT, load_settings
from atlas_pipeline_tests.servers import scripted_openai_server
from bench.report import table, write_report
from eval.fidelity import CORPUS

OVERHEAD_NOTE = (
    "The overhead documents are small plain-text slices (about 3,000 characters each), the worst case for "
    "orchestration: the library handles one in about 2 ms, a Dagster run costs about half a second. Per-document "
    "runs therefore cannot meet the 10% goal on small documents; partition-range (batched) runs are what would "
    "amortise it. A cProfile of five runs shows where the half second goes: Dagster's SQLite storage (about 145 "
    "connection opens, 120 commits per run for the ~60 events of three steps), not Atlas code."
)
QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}


class Workspace:
    """A fresh knowledge base, artifact store and SQLite Dagster instance in a temporary folder."""

    def __init__(self, root: Path, **extra: str) -> None:
        self.root = root
        self.kb = root / "kb"
        self.kb.mkdir(parents=True)
        home = root / "home"
        home.mkdir()
        shutil.copyfile(project_file("dagster.yaml"), home / "dagster.yaml")
        self.instance = dg.DagsterInstance.from_config(str(home))
        env = {
            "ATLAS_KNOWLEDGE_BASE": str(self.kb),
            "ATLAS_ARTIFACTS": str(root / "artifacts"),
            "ATLAS_EXPORTS": str(root / "exports"),
            **extra,
        }
        self.settings = load_settings(env)
        self.atlas = AtlasResource.from_settings(self.settings)

    def register(self) -> list[str]:
        keys = list(refresh_catalog(self.atlas.open_knowledge_base(), self.atlas.store()).catalog.entries)
        self.instance.add_dynamic_partitions(documents_partitions.name, keys)
        return keys

    def run_all(self, keys: list[str]) -> float:
        job = build_definitions(self.settings).resolve_job_def("document_job")
        started = time.perf_counter()
        for key in keys:
            job.execute_in_process(partition_key=key, instance=self.instance, run_config=QUIET)
        return time.perf_counter() - started


def small_documents(count: int) -> list[tuple[str, str]]:
    texts = [p.read_text(errors="replace") for p in sorted((CORPUS / "gold" / "evidence_txt").glob("*.txt"))]
    documents = []
    while len(documents) < count:
        for number, text in enumerate(texts):
            part = len(documents) // len(texts)
            piece = text[part * 3000 : (part + 1) * 3000] or text[:3000]
            documents.append((f"article-{number:02d}-part-{part:02d}.txt", piece))
            if len(documents) == count:
                break
    return documents


def direct(workspace: Workspace, keys: list[str]) -> float:
    store, atlas = workspace.atlas.store(), workspace.atlas
    catalog = load_catalog(store)
    template, rule, options = atlas.load_template(), atlas.load_rule(), atlas.parse_options()
    started = time.perf_counter()
    for key in keys:
        snapshot = take_snapshot(atlas.open_knowledge_base(), store, catalog.entries[key])
        parse, _ = parse_snapshot(store, snapshot, options)
        extract_document(store, snapshot, parse, template, rule)
    return time.perf_counter() - started


def overhead(sizes: list[int]) -> list[list[object]]:
    rows = []
    for size in sizes:
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            plain, orchestrated = Workspace(Path(a)), Workspace(Path(b))
            for name, text in small_documents(size):
                (plain.kb / name).write_text(text)
                (orchestrated.kb / name).write_text(text)
            library = direct(plain, plain.register())
            dagster = orchestrated.run_all(orchestrated.register())
            rows.append([size, library, dagster, (dagster - library) / size, (dagster - library) / dagster])
            print(f"N={size}: direct {library:.1f}s, dagster {dagster:.1f}s", flush=True)
    return rows


def rematerialisation(limit: int | None) -> list[list[object]]:
    pdfs = sorted((CORPUS / "rct").glob("*.pdf"))[:limit]
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        workspace = Workspace(Path(folder))
        for pdf in pdfs:
            shutil.copyfile(pdf, workspace.kb / pdf.name)
        keys = workspace.register()
        first = workspace.run_all(keys)
        second = workspace.run_all(keys)
        rows.append(["skip mode", len(keys), first, second, first / second, "-"])
        print(f"skip mode: first {first:.1f}s, second {second:.1f}s", flush=True)
        with scripted_openai_server(Path(folder)) as server:
            server.script(default={"content": "{}"})
            llm = Workspace(Path(folder) / "llm", ATLAS_LLM_BASE_URL=server.base_url)
            for pdf in pdfs:
                shutil.copyfile(pdf, llm.kb / pdf.name)
            shutil.copytree(Path(folder) / "artifacts" / "parsed", Path(folder) / "llm" / "artifacts" / "parsed")
            keys = llm.register()
            first = llm.run_all(keys)
            calls_first = len(server.requests())
            second = llm.run_all(keys)
            calls_second = len(server.requests()) - calls_first
            hits = sum(read_record(llm.atlas.store(), k, "extraction", ExtractionRecord).llm_cache_hits for k in keys)
            rows.append(
                [
                    "llm mode (parses cached)",
                    len(keys),
                    first,
                    second,
                    first / second,
                    f"{calls_first} → {calls_second} ({hits} cache hits)",
                ]
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 50, 200])
    parser.add_argument("--limit", type=int, help="only the first N RCT PDFs for re-materialisation")
    args = parser.parse_args()
    over = overhead(args.sizes)
    remat = rematerialisation(args.limit)
    largest = over[-1]
    verdict_over = "met" if largest[4] <= 0.10 else f"NOT met ({largest[4]:.0%} at N={largest[0]})"
    verdict_remat = "met" if remat[0][4] >= 20 else f"NOT met ({remat[0][4]:.1f}x)"
    write_report(
        PROJECT_ROOT / "bench" / "reports" / "pipeline.md",
        "Orchestration overhead and re-materialisation",
        [
            ("Orchestration overhead (one Dagster run per document)", table(
                ["documents", "direct s", "Dagster s", "overhead s/document", "overhead share"], over
            )),
            ("Re-materialisation of unchanged documents", table(
                ["mode", "documents", "first s", "second s", "speed-up", "LLM calls first → second"], remat
            )),
            ("Notes", OVERHEAD_NOTE),
            ("Goals", f"- overhead ≤ 10% of wall time for the largest load: {verdict_over}\n"
                      f"- re-materialisation ≥ 20× faster than the first pass: {verdict_remat}\n"
                      "- batched (partition-range) runs: not implemented yet, so not measured"),
        ],
    )  # fmt: skip


if __name__ == "__main__":
    main()
