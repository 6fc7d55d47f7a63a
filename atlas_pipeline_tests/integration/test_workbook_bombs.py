"""Workbooks dropped in the review inbox are checked before any spreadsheet reader opens them: a zip bomb (an 8 MB
file unpacking to gigabytes), an archive of countless entries, a file that is no archive — each refused with a report
saying why, in bounded memory, and ``atlas run`` goes on to write its exports."""

from __future__ import annotations

import resource
import zipfile

import polars as pl

from atlas_pipeline.review.workbook_import import check_workbook, import_inbox
from atlas_pipeline.store.files import Store
from atlas_pipeline_tests.servers.processes import local_env
from atlas_pipeline_tests.support.helpers import run_atlas


def _workbook(path, extra: dict[str, int] | None = None, entries: int = 0) -> bytes:
    """A real xlsx (polars + xlsxwriter) with a ``fields`` sheet, plus ``extra`` entries of that many zero bytes
    (streamed in: never held whole) and ``entries`` tiny ones."""
    pl.DataFrame({"document_key": ["a.md"], "field": ["n_control"], "decision": [""]}).write_excel(
        path, worksheet="fields"
    )
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, size in (extra or {}).items():
            with archive.open(name, "w", force_zip64=True) as member:
                block = bytes(1 << 20)
                for _ in range(size >> 20):
                    member.write(block)
        for number in range(entries):
            archive.writestr(f"xl/media/{number}.xml", "<a/>")
    return path.read_bytes()


def test_a_zip_bomb_is_refused_before_it_is_opened(tmp_path):
    bomb = _workbook(tmp_path / "bomb.xlsx", {"xl/worksheets/sheet9.xml": 2_000 << 20})  # 2 GB of XML
    assert len(bomb) < 5_000_000
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "bomb.xlsx").write_bytes(bomb)
    (inbox / "many.xlsx").write_bytes(_workbook(tmp_path / "many.xlsx", entries=6_000))
    (inbox / "fake.xlsx").write_bytes(b"PK\x03\x04 not really a zip")
    reports = {r.workbook: r for r in import_inbox(Store(str(inbox)), Store(str(tmp_path / "artifacts")), None)}
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert "would unpack" in reports["bomb.xlsx"].error and "zip bomb" in reports["bomb.xlsx"].error
    assert "6" in reports["many.xlsx"].error and "is no workbook" in reports["many.xlsx"].error
    assert reports["fake.xlsx"].error.startswith("not a workbook: an xlsx file is a zip archive")
    assert (after - before) < 200_000  # KB: nothing unpacked whole


def test_an_entry_that_lies_about_its_size_is_counted_as_it_unpacks(tmp_path, monkeypatch):
    from atlas_pipeline.review import workbook_import

    data = _workbook(tmp_path / "big.xlsx", {"xl/worksheets/sheet9.xml": 64 << 20})
    monkeypatch.setattr(workbook_import, "MAX_RATIO", 10**9)  # the declared ratio passes: the count catches it
    monkeypatch.setattr(workbook_import, "MAX_UNPACKED_BYTES", 32 << 20)
    try:
        check_workbook(data)
    except ValueError as error:
        assert "unpacks to more than 34 MB" in str(error)
    else:
        raise AssertionError("a workbook unpacking past the limit was accepted")


def test_atlas_run_goes_on_with_a_bomb_in_the_inbox(knowledge_base, tmp_path):
    (knowledge_base / "a.md").write_text("# A trial\n\nWe randomised 40 adults.\n")
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "bomb.xlsx").write_bytes(_workbook(tmp_path / "bomb.xlsx", {"xl/worksheets/sheet9.xml": 2_000 << 20}))
    env = {
        **local_env(tmp_path, knowledge_base),
        "DAGSTER_HOME": str(tmp_path / "home"),
        "ATLAS_REVIEW_INBOX": str(inbox),
    }
    result = run_atlas("run", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "review inbox: bomb.xlsx: not imported:" in result.stdout and "zip bomb" in result.stdout
    assert (tmp_path / "exports" / "atlas_documents.csv").exists()
