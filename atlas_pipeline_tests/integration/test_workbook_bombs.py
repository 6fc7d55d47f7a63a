"""Workbooks dropped in the review inbox are checked before any spreadsheet reader opens them: a zip bomb (an 8 MB
file unpacking to gigabytes), an archive of countless entries, a file that is no archive — each refused with a report
saying why, in bounded memory, and ``atlas run`` goes on to write its exports."""

from __future__ import annotations

import resource
import threading
import time
import zipfile

import polars as pl

from atlas_pipeline.deployment import Deployment
from atlas_pipeline.review.workbook_import import LISTED_ROWS, check_workbook, import_inbox, import_workbook
from atlas_pipeline.store.files import Store
from atlas_pipeline_tests.support.helpers import http_request, run_atlas, serve
from scripted_servers.processes import local_env


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


def _rows_sheet(path, rows: int, document: str = "nowhere.md") -> bytes:
    """A real workbook whose ``fields`` sheet is followed by a sheet of ``rows`` decided rows (written as Excel
    writes inline strings, streamed into the archive)."""
    _workbook(path)
    with (
        zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED) as archive,
        archive.open("xl/worksheets/sheet2.xml", "w", force_zip64=True) as member,
    ):
        member.write(b'<?xml version="1.0"?><worksheet><sheetData>')
        for start in range(1, rows + 1, 10_000):
            member.write(
                "".join(
                    f'<row r="{n}"><c r="A{n}" t="inlineStr"><is><t>{document}</t></is></c>'
                    f'<c r="B{n}" t="inlineStr"><is><t>approve</t></is></c></row>'
                    for n in range(start, min(start + 10_000, rows + 1))
                ).encode()
            )
        member.write(b"</sheetData></worksheet>")
    return path.read_bytes()


def test_a_million_row_workbook_is_refused_in_bounded_memory_while_the_page_answers(
    tmp_path, settings_for, knowledge_base
):
    from atlas_pipeline.review_page.app import create_app

    data = _rows_sheet(tmp_path / "million.xlsx", 1_000_000)
    assert len(data) < 12_000_000
    artifacts = Store(str(tmp_path / "artifacts"))
    settings = settings_for(knowledge_base, review_inbox=str(tmp_path))
    with serve(create_app(Deployment.from_settings(settings))) as site:
        answered: list[float] = []

        def ask_meanwhile() -> None:
            while not done.is_set():
                started = time.monotonic()
                status, _ = http_request(f"{site}/login")
                answered.append(time.monotonic() - started if status in (200, 303) else 99.0)

        done = threading.Event()
        asker = threading.Thread(target=ask_meanwhile)
        asker.start()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.monotonic()
        report = import_workbook(artifacts, data, "million.xlsx", None)
        took = time.monotonic() - started
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        done.set()
        asker.join()
        assert (
            "more than 300,000 rows: too many to import at once" in report.error
            and "ATLAS_REVIEW_WORKBOOK_MAX_ROWS" in report.error
        )
        assert took < 30 and (after - before) < 300_000, (took, after - before)  # KB: never read into memory
        assert answered and max(answered) < 5, answered  # the page kept answering

        # a workbook of 5,000 refused rows: its report counts them all and lists the first ones; the page is small
        frame = pl.DataFrame(
            {
                "document_key": ["nowhere.md"] * 5_000,
                "field": ["n_control"] * 5_000,
                "sha256": [""] * 5_000,
                "extraction_version": [""] * 5_000,
                "decision": ["approve"] * 5_000,
            }
        )
        frame.write_excel(tmp_path / "many.xlsx", worksheet="fields")
        many = (tmp_path / "many.xlsx").read_bytes()
        report = import_workbook(artifacts, many, "many.xlsx", None)
        assert report.count("refused") == 5_000 and len(report.refused) == LISTED_ROWS
        assert "5000 row(s) refused" in report.summary()
        for number in range(25):  # more imports than a page shows
            import_workbook(artifacts, b"PK not a workbook %d" % number, f"broken{number}.xlsx", None)
        status, page = http_request(f"{site}/imports")
        assert status == 200 and len(page) < 200_000 and "Page 1 of 3 (27 imports)" in page
        pages = [http_request(f"{site}/imports?page={number}") for number in (1, 2, 3)]
        assert all(status == 200 for status, _ in pages)
        shown = "".join(page for _, page in pages)  # (imports of one second are listed in any order)
        assert f"The first {LISTED_ROWS} of 5000 refused rows" in shown and "more than 300,000 rows" in shown


def test_a_far_cell_or_a_sheet_under_another_name_is_refused_before_a_reader_allocates_it(tmp_path):
    """A reader allocates a sheet's whole grid up to its farthest cell (one row, a cell at XFD5000: 80M cells),
    and a sheet may live in any part the archive's relations name: every part is read for rows and cells."""
    far = _workbook(tmp_path / "far.xlsx")
    with zipfile.ZipFile(tmp_path / "far.xlsx", "a") as archive:
        archive.writestr("xl/worksheets/sheet3.xml", '<worksheet><sheetData><row r="1"><c r="XFD5000"/></row>')
    far = (tmp_path / "far.xlsx").read_bytes()
    _rows_sheet(tmp_path / "hidden.xlsx", 2_000)
    with zipfile.ZipFile(tmp_path / "hidden.xlsx") as source, zipfile.ZipFile(tmp_path / "moved.xlsx", "w") as moved:
        for item in source.infolist():  # the sheet's part renamed: its rows are counted all the same
            name = "xl/hidden/data.bin" if item.filename == "xl/worksheets/sheet2.xml" else item.filename
            moved.writestr(name, source.read(item))
    for data, rows, said in (
        (far, 300_000, "reaching row 5,000 and column 16,384 is more than 20,000,000 cells"),
        ((tmp_path / "moved.xlsx").read_bytes(), 1_000, "more than 1,000 rows"),
    ):
        try:
            check_workbook(data, max_rows=rows)
        except ValueError as error:
            assert said in str(error), error
        else:
            raise AssertionError(f"accepted: {said}")
    check_workbook(_rows_sheet(tmp_path / "fine.xlsx", 900), max_rows=1_000)  # within both limits
