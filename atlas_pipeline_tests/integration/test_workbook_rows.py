"""A workbook import is linear in its rows: each document's decision log is read once for the whole workbook (it
was read again for every row — 1,000 rows took 163 s), and the review page's write lock is held 100 rows at a time, so
another person's decision never waits for a whole workbook. Timings are ``bench/workbook_import.py``'s; here, what
makes them linear: the reads counted, and a decision made while an import runs."""

from __future__ import annotations

import threading
import time

import polars as pl

from atlas_pipeline.review import decisions as decisions_module
from atlas_pipeline.review import workbook_import
from atlas_pipeline.review.decisions import DecisionRequest, decide, load_decisions
from atlas_pipeline.review.workbook_import import import_inbox, import_workbook
from atlas_pipeline.store.files import Store
from atlas_pipeline_tests.support.by_hand import processed_by_hand
from atlas_pipeline_tests.support.juice_trial import KEY

FIELDS = ("age_control", "age_treatment", "male_percent")


def _workbook(path, record, rows: int, base: int = 20) -> bytes:
    """A reviewed workbook of ``rows`` corrections on the juice trial (each a value of its own)."""
    pl.DataFrame(
        {
            "document_key": [KEY] * rows,
            "field": [FIELDS[number % len(FIELDS)] for number in range(rows)],
            "sha256": [record.sha256] * rows,
            "extraction_version": [record.extraction_version] * rows,
            "decision": ["correct"] * rows,
            "corrected_value": [f"{base + number / 1000:.3f}" for number in range(rows)],
            "reviewer": ["ana"] * rows,
        }
    ).write_excel(path, worksheet="fields")
    return path.read_bytes()


def _counting_reads(monkeypatch) -> list[str]:
    """Every read of a decision log from now on, by document."""
    reads: list[str] = []
    real = decisions_module.load_decisions

    def counted(store, key, **options):
        reads.append(key)
        return real(store, key, **options)

    monkeypatch.setattr(decisions_module, "load_decisions", counted)
    monkeypatch.setattr(workbook_import, "load_decisions", counted)
    return reads


def test_an_inbox_workbook_and_an_upload_read_each_log_once_whatever_their_rows(
    knowledge_base, settings_for, atlas_for, instance, tmp_path, monkeypatch
):
    settings, atlas = settings_for(knowledge_base), atlas_for(knowledge_base)
    _, record = processed_by_hand(knowledge_base, settings, atlas, instance)
    store, template = atlas.store(), atlas.load_template()
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "inbox.xlsx").write_bytes(_workbook(tmp_path / "inbox.xlsx", record, 1_500))
    reads = _counting_reads(monkeypatch)
    (report,) = import_inbox(Store(str(inbox)), store, template, derivations=atlas.derivations())
    assert report.summary().startswith("inbox.xlsx: 1500 decision(s) applied"), report.summary()
    assert reads.count(KEY) <= 2, len(reads)  # the log once (and once for the derived values it may show): not 1,500

    reads.clear()
    upload = _workbook(tmp_path / "upload.xlsx", record, 1_000, base=40)
    lock, waited = threading.Lock(), []

    def someone_else() -> None:  # a decision on the page while the import runs: it waits for a row, not for all
        time.sleep(0.2)
        started = time.perf_counter()
        with lock:
            shown = (record.sha256, record.extraction_version)
            decide(store, record, DecisionRequest("p_value", "reject", reviewer="ben", shown=shown))
        waited.append(time.perf_counter() - started)

    other = threading.Thread(target=someone_else)
    other.start()
    report = import_workbook(store, upload, "upload.xlsx", template, writing=lock)
    other.join()
    assert report.summary().startswith("upload.xlsx: 1000 decision(s) applied"), report.summary()
    assert reads.count(KEY) <= 2, len(reads)
    (ben,) = [d for d in load_decisions(store, KEY) if d.reviewer == "ben"]
    mine = [d for d in load_decisions(store, KEY) if d.source == "workbook:upload.xlsx"]
    assert mine[0].decided_at < ben.decided_at < mine[-1].decided_at  # recorded in the middle of the import
    assert waited and waited[0] < 1.0, waited

    again = import_workbook(store, upload, "upload.xlsx", template)  # the same rows again: applied once
    assert again.summary().startswith("upload.xlsx: 0 decision(s) applied"), again.summary()
