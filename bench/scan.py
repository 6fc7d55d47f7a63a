"""Knowledge-base scan: seconds to scan 10,000, 50,000 and 100,000 files into the catalog, and to rescan them unchanged.

``python -m bench.scan [--sizes 10000 50000 100000]``; writes ``bench/reports/scan.md``. Two knowledge bases per size:
copies of one empty file (one document, every other file an alias of it: issue #40, where a search per alias made
the scan quadratic) and distinct one-line text files (one document each). Each is scanned with ``refresh_catalog``
as the sensor and ``atlas run`` do (listing, fingerprints, saving the catalog and the changed entries' files), then
scanned again unchanged (listing only: nothing is read).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from atlas_pipeline.config.settings import PROJECT_ROOT
from atlas_pipeline.knowledge.catalog import refresh_catalog
from atlas_pipeline.knowledge.listing import KnowledgeBase
from atlas_pipeline.store.files import Store
from bench.report import table, write_report


def measure(size: int, kind: str) -> list[object]:
    with tempfile.TemporaryDirectory() as folder:
        kb = Path(folder) / "kb"
        kb.mkdir()
        for number in range(size):
            with open(kb / f"note-{number:06d}.txt", "wb") as handle:
                if kind == "distinct":
                    handle.write(f"Synthetic trial note {number}.\n".encode())
        store = Store(str(Path(folder) / "artifacts"))
        started = time.perf_counter()
        first = refresh_catalog(KnowledgeBase(str(kb)), store)
        first_seconds = time.perf_counter() - started
        started = time.perf_counter()
        again = refresh_catalog(KnowledgeBase(str(kb)), store)
        again_seconds = time.perf_counter() - started
        assert not again.changed
        aliases = sum(len(entry.aliases) for entry in first.catalog.entries.values())
        return [f"{size:,}", kind, len(first.catalog.entries), aliases, first_seconds, again_seconds]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000, 100_000])
    args = parser.parse_args()
    rows = []
    for size in args.sizes:
        for kind in ("identical", "distinct"):
            rows.append(measure(size, kind))
            print(rows[-1], flush=True)
    write_report(
        PROJECT_ROOT / "bench" / "reports" / "scan.md",
        "Knowledge-base scan",
        [
            ("Scan and rescan (seconds)", table(
                ["files", "contents", "documents", "aliases", "first scan (all new)", "rescan (unchanged)"], rows
            )),
            ("Notes", f"Local disk, {os.cpu_count()} cores. The first scan opens and hashes every file (the first "
                      "bytes of a document's source are read once more to tell x.pdf from x.txt); the rescan lists "
                      "the files and compares size and mtime. Both grow linearly with the number of files."),
        ],
    )  # fmt: skip


if __name__ == "__main__":
    main()
