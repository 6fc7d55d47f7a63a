"""Search latency at 1,000 and 10,000 documents, on SQLite FTS5 and on PostgreSQL full-text search.

``python -m bench.search [--sizes 1000 10000] [--no-postgres]`` (``make bench-search``); writes
``bench/reports/search.md``. Documents are the corpus's JATS articles (full text, tables, a few extracted values),
cycled under distinct keys, statuses and sources until the size is reached. Each query runs ``--repeat`` times; the
table gives the median and 95th percentile, and the ratio to the smallest size measured in the same run. The issue's
threshold: a search server is worth it when a query passes 2 s.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from atlas_pipeline.parsing import parse_document
from atlas_pipeline.search.entries import IndexedDocument, Part
from atlas_pipeline.search.sqlite import SqliteIndex
from bench.report import table, write_report
from eval.fidelity import CORPUS

REPORT = Path(__file__).resolve().parent / "reports" / "search.md"
QUERIES = {
    "two common words": ("blood pressure", {}),
    "phrase": ('"quality of life"', {}),
    "rare word": ("lidocaine", {}),
    "words + status filter": ("randomized placebo", {"status": "approved"}),
    "value of one field": ("juice", {"field": "treatment_name"}),
    "no match": ("xyzzyplugh", {}),
}
STATUSES = ("done", "approved", "partial", "failed")


def corpus_texts() -> list[tuple[str, str, str]]:
    texts = []
    for path in sorted((CORPUS / "rct_jats").glob("*.nxml")):
        parsed = parse_document(path.read_bytes(), path.name)
        texts.append((path.stem, parsed.title, parsed.markdown))
    return texts


def documents(texts: list[tuple[str, str, str]], size: int) -> list[IndexedDocument]:
    out = []
    for number in range(size):
        stem, title, text = texts[number % len(texts)]
        parts = [Part("text", "", text), Part("field", "treatment_name", f"treatment name: juice {number}.")]
        out.append(
            IndexedDocument(
                key=f"{stem}-{number:05d}.nxml",
                mark=str(number),
                status=STATUSES[number % len(STATUSES)],
                source=f"feed-{number % 7}",
                title=title,
                path=f"collected/{stem}-{number}.nxml",
                parts=parts,
            )
        )
    return out


def measure(index, docs: list[IndexedDocument], repeat: int) -> tuple[float, dict[str, tuple[float, float, int]]]:
    started = time.perf_counter()
    for start in range(0, len(docs), 500):
        index.upsert(docs[start : start + 500])
    indexing = time.perf_counter() - started
    results = {}
    for name, (query, filters) in QUERIES.items():
        times, hits = [], 0
        for _ in range(repeat):
            begin = time.perf_counter()
            hits = len(index.search(query, limit=20, **filters))
            times.append(time.perf_counter() - begin)
        times.sort()
        results[name] = (statistics.median(times), times[int(0.95 * (len(times) - 1))], hits)
    return indexing, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--report", type=Path, default=REPORT)
    args = parser.parse_args()
    texts = corpus_texts()
    rows, indexing_rows = [], []
    backends = ["sqlite"] + ([] if args.no_postgres else ["postgres"])
    baseline: dict[tuple[str, str], float] = {}
    for backend in backends:
        for size in args.sizes:
            docs = documents(texts, size)
            with tempfile.TemporaryDirectory() as folder:
                if backend == "sqlite":
                    with SqliteIndex(str(Path(folder) / "search.sqlite")) as index:
                        indexing, results = measure(index, docs, args.repeat)
                else:
                    from atlas_pipeline.search.postgres import PostgresIndex
                    from scripted_servers.processes import create_database, postgres_server

                    with postgres_server() as server:
                        env = create_database(server.env, f"bench_{size}")
                        url = (
                            f"postgresql+psycopg2://{env['DAGSTER_PG_USERNAME']}:{env['DAGSTER_PG_PASSWORD']}@"
                            f"{env['DAGSTER_PG_HOST']}:{env['DAGSTER_PG_PORT']}/{env['DAGSTER_PG_DB']}"
                        )
                        with PostgresIndex(url) as index:
                            indexing, results = measure(index, docs, args.repeat)
            indexing_rows.append([backend, size, round(indexing, 1), round(size / indexing, 1)])
            for name, (median, p95, hits) in results.items():
                key = (backend, name)
                baseline.setdefault(key, median)
                rows.append(
                    [
                        backend,
                        size,
                        name,
                        hits,
                        round(median * 1000, 2),
                        round(p95 * 1000, 2),
                        round(median / baseline[key], 2) if baseline[key] else "-",
                        "yes" if p95 < 2.0 else "NO",
                    ]
                )
            print(f"{backend} {size}: indexed in {indexing:.1f} s", flush=True)
    write_report(
        args.report,
        "Search latency",
        [
            (
                "Query latency (ms; ratio: median against the smallest size, same backend and query)",
                table(["backend", "documents", "query", "hits", "median ms", "p95 ms", "ratio", "under 2 s"], rows),
            ),
            ("Indexing", table(["backend", "documents", "seconds", "documents/s"], indexing_rows)),
            ("Documents", f"{len(texts)} JATS articles of the corpus cycled under distinct keys."),
        ],
    )


if __name__ == "__main__":
    main()
