"""A reviewed workbook's import, rows per second at 100, 1,000 and 10,000 rows, next to the import as it was (each row's
decision reading the document's whole log again: quadratic), and how long another person's decision waits while a
workbook is imported with the review page's write lock held 100 rows at a time.

``python -m bench.workbook_import`` (``make bench-workbook``); writes ``bench/reports/workbook_import.md``. The
document is an extraction of the seed template in a local artifact store (the import reads nothing else); the rows
correct three numeric fields, each with a value of its own.
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from pathlib import Path

import polars as pl

from atlas_pipeline.config.settings import PROJECT_ROOT
from atlas_pipeline.core.templates import load_template
from atlas_pipeline.review import workbook_import
from atlas_pipeline.review.decisions import DecisionRequest, decide
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.records import ExtractionRecord, write_record
from atlas_pipeline_tests.support.records import extraction_record
from bench.report import table, write_report

KEY = "trial.pdf"
FIELDS = ("age_control", "age_treatment", "male_percent")
SIZES = (100, 1_000, 10_000)
BASELINE_SIZES = (100, 1_000)  # the quadratic import: 10,000 rows would take hours


def _record() -> ExtractionRecord:
    fields = {name: {"module": "baseline", "value": None, "tier": "not_extracted"} for name in FIELDS}
    return extraction_record(KEY, fields)


RECORD = _record()


def _workbook(folder: Path, rows: int, base: int) -> bytes:
    path = folder / f"rows-{rows}-{base}.xlsx"
    pl.DataFrame(
        {
            "document_key": [KEY] * rows,
            "field": [FIELDS[n % len(FIELDS)] for n in range(rows)],
            "sha256": [RECORD.sha256] * rows,
            "extraction_version": [RECORD.extraction_version] * rows,
            "decision": ["correct"] * rows,
            "corrected_value": [f"{base + n / 100_000:.5f}" for n in range(rows)],
            "reviewer": ["ana"] * rows,
        }
    ).write_excel(path, worksheet="fields")
    return path.read_bytes()


def _read_every_row(store, record, request, known=None):
    """The import as it was: each row's decision read the document's whole log again (``decide`` without a log)."""
    return decide(store, record, request)


def _import(rows: int, baseline: bool, lock: threading.Lock | None = None) -> tuple[float, Store, bytes]:
    folder = Path(tempfile.mkdtemp(prefix="atlas-bench-workbook-"))
    store = Store(str(folder / "artifacts"))
    write_record(store, KEY, "extraction", _record())
    data = _workbook(folder, rows, base=20)
    template = load_template(PROJECT_ROOT / "seeds" / "templates", "rct_base")
    if baseline:
        workbook_import.decide = _read_every_row  # type: ignore[assignment]
    try:
        started = time.perf_counter()
        report = workbook_import.import_workbook(store, data, "bench.xlsx", template, writing=lock)
        seconds = time.perf_counter() - started
    finally:
        workbook_import.decide = decide
    assert report.counts.get("applied") == rows, report.summary()
    return seconds, store, data


def _waits_meanwhile(rows: int) -> list[float]:
    """Seconds another person's decision waits for the write lock, one every 0.2 s while ``rows`` rows go in."""
    lock, waits, done = threading.Lock(), [], threading.Event()
    folder = Path(tempfile.mkdtemp(prefix="atlas-bench-workbook-"))
    store = Store(str(folder / "artifacts"))
    record = _record()
    write_record(store, KEY, "extraction", record)
    data = _workbook(folder, rows, base=20)
    template = load_template(PROJECT_ROOT / "seeds" / "templates", "rct_base")

    def someone_else() -> None:
        number = 0
        while not done.is_set():
            time.sleep(0.2)
            started = time.perf_counter()
            with lock:
                shown = (record.sha256, record.extraction_version)
                request = DecisionRequest("male_percent", "correct", "ben", shown, value=str(50 + number))
                decide(store, record, request)
            waits.append(time.perf_counter() - started)
            number += 1

    other = threading.Thread(target=someone_else)
    other.start()
    workbook_import.import_workbook(store, data, "bench.xlsx", template, writing=lock)
    done.set()
    other.join()
    return waits


def main() -> None:
    rows_table = []
    for rows in SIZES:
        seconds = _import(rows, baseline=False)[0]
        before = _import(rows, baseline=True)[0] if rows in BASELINE_SIZES else None
        rows_table.append(
            [
                f"{rows:,}",
                f"{seconds:.2f}",
                f"{rows / seconds:,.0f}",
                "—" if before is None else f"{before:.2f}",
                "—" if before is None else f"{rows / before:,.0f}",
                "—" if before is None else f"{before / seconds:.1f}×",
            ]
        )
    waits = _waits_meanwhile(10_000)
    wait_table = [
        [
            len(waits),
            f"{statistics.median(waits) * 1000:.1f}",
            f"{sorted(waits)[int(len(waits) * 0.95) - 1] * 1000:.1f}",
            f"{max(waits) * 1000:.1f}",
        ]
    ]
    write_report(
        PROJECT_ROOT / "bench" / "reports" / "workbook_import.md",
        "A workbook import, linear in its rows",
        [
            (
                "Rows per second (one document; the log read once, against read again for every row)",
                table(["rows", "seconds", "rows/s", "before: seconds", "before: rows/s", "faster"], rows_table),
            ),
            (
                "Another person's decision during a 10,000-row import (the write lock held 100 rows at a time)",
                table(["decisions", "wait p50 (ms)", "wait p95 (ms)", "wait max (ms)"], wait_table),
            ),
        ],
    )


if __name__ == "__main__":
    main()
