"""Decisions from a reviewed workbook: the exported xlsx with its ``fields`` sheet's decision columns filled in.

Reviewers live in Excel. The exported ``fields`` sheet carries, per row, what the row was made on (``sha256``,
``extraction_version``) and empty decision columns with drop-downs (``decision``: approve / correct / reject,
``corrected_value``, ``review_note``, ``reviewer``). A workbook dropped into the review inbox (``ATLAS_REVIEW_INBOX``)
is imported once (by its sha256): every row with a decision is checked — unknown document or field, a decision that
is not one of the three, a value of the wrong type, a row made on an older extraction — and refused with its reason
in the import report; the good rows become decisions exactly like the page's. Nothing else is changed or lost.
"""

from __future__ import annotations

import io
import posixpath
import re
import threading
import time
import zipfile
from collections.abc import Callable
from typing import Any

import fastexcel
import polars as pl
from pydantic import BaseModel, Field

from atlas_pipeline.core.clock import now_iso
from atlas_pipeline.core.hashing import sha256_of
from atlas_pipeline.core.redaction import redact
from atlas_pipeline.core.templates import Template, entry_field_parts
from atlas_pipeline.extraction.kept_extraction import reviewed_extraction
from atlas_pipeline.knowledge.partition_keys import is_safe_key
from atlas_pipeline.review.decisions import (
    DecisionRefused,
    DecisionRequest,
    KnownLog,
    decide,
    load_decisions,
    reviewer_name,
    stable_id,
)
from atlas_pipeline.review.derivations import DERIVED_TIER, Derivations
from atlas_pipeline.review.final_values import review_document
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import IMPORTS, import_report_path
from atlas_pipeline.store.records import ExtractionRecord

SHEET = "fields"
_CONTINUED = re.compile(re.escape(SHEET) + r" \(\d+\)")  # the sheets a long fields table goes on in
DECISION_COLUMNS = ("decision", "corrected_value", "review_note", "reviewer")
REQUIRED_COLUMNS = ("document_key", "field", "sha256", "extraction_version", "decision")


class RowOutcome(BaseModel):
    row: int  # the row number as Excel shows it (header is row 1)
    document: str = ""
    field: str = ""
    decision: str = ""
    reason: str = ""  # refused rows: why


LISTED_ROWS = 200  # rows a report lists by kind: the first ones, the rest counted (a report stays small)


class ImportReport(BaseModel):
    """What one workbook did: the rows applied, refused (each with its reason) and applied before — counted, and
    the first ``LISTED_ROWS`` of each listed."""

    workbook: str
    sha256: str
    imported_at: str
    applied: list[RowOutcome] = Field(default_factory=list)
    refused: list[RowOutcome] = Field(default_factory=list)
    already_applied: list[RowOutcome] = Field(default_factory=list)  # the same decision was in the log already
    counts: dict[str, int] = Field(
        default_factory=dict
    )  # applied / refused / already_applied: every row, listed or not
    rows_without_decision: int = 0
    error: str = ""  # the whole workbook could not be read
    author: str = ""  # the logged-in person who uploaded it on the review page ("": from the inbox, no login)

    def count(self, kind: str) -> int:
        return max(self.counts.get(kind, 0), len(getattr(self, kind)))

    def add(self, kind: str, outcome: RowOutcome) -> None:
        """Count a row's outcome; list it while fewer than ``LISTED_ROWS`` of its kind are."""
        self.counts[kind] = self.count(kind) + 1
        listed = getattr(self, kind)
        if len(listed) < LISTED_ROWS:
            listed.append(outcome)

    def summary(self) -> str:
        if self.error:
            return f"{self.workbook}: not imported: {self.error.removeprefix('not imported: ')}"
        uploaded = f" (uploaded by {self.author})" if self.author else ""
        return (
            f"{self.workbook}{uploaded}: {self.count('applied')} decision(s) applied, {self.count('refused')} row(s) "
            "refused, "
            f"{self.count('already_applied')} already applied before, {self.rows_without_decision} row(s) without a "
            "decision"
        )


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


MAX_WORKBOOK_BYTES = 50_000_000  # an exported workbook of 10,000 documents is a few MB
MAX_UNPACKED_BYTES = 400_000_000  # what its XML may unpack to, counted as it unpacks (headers may lie)
MAX_ENTRIES = 5_000
MAX_RATIO = 200  # unpacked / packed of one entry: sheet XML packs ~10–50×, a zip bomb 1,000× and more
MAX_ROWS = 300_000  # rows over every sheet: the export of ~2,000 documents; counted before any reader opens it
MAX_CELLS = 20_000_000  # a sheet's grid up to its farthest cell: what a reader allocates (300,000 rows × 66 columns)
_ROW = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?row[\s/>]")
_CELL = re.compile(rb'\br(?:ef)?="\$?([A-Z]{1,3})\$?(\d{1,8})(?::\$?([A-Z]{1,3})\$?(\d{1,8}))?"')


def _column(letters: bytes) -> int:
    number = 0
    for letter in letters:
        number = number * 26 + letter - 64
    return number


def _farthest(text: bytes, corner: tuple[int, int]) -> tuple[int, int]:
    """The farthest (row, column) of the cell references in ``text`` (``r="XFD1048576"``, a ``ref`` range's end)
    and ``corner``: a spreadsheet reader allocates a sheet's grid up to it."""
    rows, columns = corner
    for match in _CELL.finditer(text):
        for letters, digits in ((match.group(1), match.group(2)), (match.group(3), match.group(4))):
            if letters:
                rows, columns = max(rows, int(digits)), max(columns, _column(letters))
    return rows, columns


def check_workbook(data: bytes, max_rows: int = MAX_ROWS) -> None:
    """Refuse (ValueError, with the reason) a file that is no xlsx archive or one that would unpack to far more
    than a workbook: its size, entry count, each entry's ratio as declared, the bytes really unpacked, counted
    in bounded chunks, and the rows of its sheets (``max_rows`` over all of them) — before any spreadsheet reader
    sees it (a reader holds a whole sheet in memory)."""
    if len(data) > MAX_WORKBOOK_BYTES:
        raise ValueError(
            f"too large for a workbook: {len(data) / 1e6:.0f} MB (limit {MAX_WORKBOOK_BYTES / 1e6:.0f} MB)"
        )
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        entries = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        raise ValueError(f"not a workbook: an xlsx file is a zip archive ({error})") from None
    if len(entries) > MAX_ENTRIES:
        raise ValueError(f"an archive of {len(entries)} entries is no workbook (limit {MAX_ENTRIES})")
    unpacked = rows = 0
    for entry in entries:
        if entry.file_size > MAX_RATIO * max(entry.compress_size, 10_000):
            raise ValueError(
                f"{entry.filename} would unpack {entry.file_size // max(entry.compress_size, 1)}× (a zip bomb?)"
            )
        try:
            with archive.open(entry) as member:
                tail, corner = b"", (0, 0)
                while chunk := member.read(1 << 20):
                    unpacked += len(chunk)
                    if unpacked > MAX_UNPACKED_BYTES:
                        raise ValueError(f"unpacks to more than {MAX_UNPACKED_BYTES / 1e6:.0f} MB (a zip bomb?)")
                    # every part, whatever its name (a sheet may live anywhere the archive's relations say):
                    # rows counted (a tag cut between two chunks once: the tail's own were counted before) and
                    # no cell beyond the rows and columns a workbook may hold
                    rows += len(_ROW.findall(tail + chunk)) - len(_ROW.findall(tail))
                    corner = _farthest(tail + chunk, corner)
                    tail = chunk[-60:]
                    if rows > max_rows or corner[0] > max_rows + 1:
                        raise ValueError(
                            f"more than {max_rows:,} rows: too many to import at once "
                            "(ATLAS_REVIEW_WORKBOOK_MAX_ROWS; split the review into several workbooks)"
                        )
                    if corner[0] * corner[1] > MAX_CELLS:
                        raise ValueError(
                            f"a sheet reaching row {corner[0]:,} and column {corner[1]:,} is more than "
                            f"{MAX_CELLS:,} cells: no exported workbook is (a sheet's far cell makes a reader fill "
                            "the whole grid)"
                        )
        except (zipfile.BadZipFile, OSError, EOFError, RuntimeError, NotImplementedError) as error:
            raise ValueError(f"not a workbook that can be read ({entry.filename}: {error})") from None


def read_rows(data: bytes, max_rows: int = MAX_ROWS) -> list[dict[str, Any]]:
    """The ``fields`` sheet (and those it goes on in, ``fields (2)``…) as rows of cells (values as Excel holds
    them), or ValueError saying what is missing (or why the file is refused before it is opened:
    ``check_workbook``)."""
    check_workbook(data, max_rows)
    try:
        names = fastexcel.read_excel(data).sheet_names
        parts = [SHEET, *(name for name in names if _CONTINUED.fullmatch(name))]  # past Excel's rows per sheet
        frame = pl.concat(
            [pl.read_excel(io.BytesIO(data), sheet_name=name, infer_schema_length=0) for name in parts],
            how="diagonal",
        )
    except Exception as error:  # fastexcel raises its own types for every kind of unreadable file
        raise ValueError(f"not a workbook with a {SHEET!r} sheet ({type(error).__name__}: {error})") from None
    missing = [column for column in REQUIRED_COLUMNS if column not in frame.columns]
    if missing:
        raise ValueError(f"the {SHEET!r} sheet has no column(s) {', '.join(missing)}: use the exported workbook")
    return frame.to_dicts()


def import_workbook(
    store: Store,
    data: bytes,
    name: str,
    template: Template,
    default_reviewer: str = "",
    derivations: Derivations | None = None,
    accepted_tiers: frozenset[str] = frozenset({"verified"}),
    max_rows: int = MAX_ROWS,
    author: str = "",
    may_decide: Callable[[str], str | None] | None = None,
    writing: threading.Lock | None = None,
    fresh: Callable[[], None] | None = None,
) -> ImportReport:
    """Apply the decisions of one reviewed workbook and keep its report in the artifact store. ``derivations`` and
    ``accepted_tiers``: what the review derives (a row of a derived value is decided on the value derived);
    ``max_rows``: the most rows a workbook may hold (``check_workbook``). ``author``: the logged-in person who
    uploaded it — every row is recorded as theirs, and a row whose ``reviewer`` column names someone else is
    refused (the column is checked, never trusted); ``writing``: held for a slice of rows at a time (the review page's
    write lock: another person's decision waits for a slice, not for the workbook), ``fresh`` called at each slice
    (what ``may_decide`` remembers is read again: the team may have moved on meanwhile); ``may_decide``: why the
    author may not decide on a document
    now (``extraction_team.Team.refusal``), or None."""
    report = ImportReport(workbook=name, sha256=sha256_of(data), imported_at=now_iso(), author=author)
    try:
        rows = read_rows(data, max_rows)
    except ValueError as error:
        report.error = str(error)
        rows = []
    records: dict[str, ExtractionRecord | None] = {}
    proposals: dict[str, dict[str, dict[str, Any]]] = {}
    logs: dict[str, KnownLog] = {}  # each document's log, read once: the import is linear in its rows

    def proposed(record: ExtractionRecord, field: str) -> dict[str, Any] | None:
        """The derived value the workbook showed in a field the model left empty."""
        if derivations is None:
            return None
        if record.key not in proposals:
            review = review_document(record, load_decisions(store, record.key), accepted_tiers, derivations)
            proposals[record.key] = {
                name: {"value": final.model_value, "tier": DERIVED_TIER}
                for name, final in (review.fields.items() if review else [])
                if final.tier == DERIVED_TIER
            }
        return proposals[record.key].get(field)

    slices = _Slices(writing, fresh)
    try:
        for number, row in enumerate(rows, start=2):
            slices.row(number - 2)
            decision = _text(row.get("decision")).lower()
            if not decision:
                report.rows_without_decision += 1
                continue
            outcome = RowOutcome(
                row=number, document=_text(row.get("document_key")), field=_text(row.get("field")), decision=decision
            )
            try:
                if not is_safe_key(outcome.document):
                    raise DecisionRefused(f"unknown document {outcome.document!r}")
                if outcome.document not in records:
                    records[outcome.document] = reviewed_extraction(store, outcome.document)
                record = records[outcome.document]
                if record is None:
                    raise DecisionRefused(f"unknown document {outcome.document!r}")
                named = _text(row.get("reviewer"))
                if author and named and _same_person(named) != author:
                    raise DecisionRefused(
                        f"the row names {named[:80]!r}, but {author} uploaded this workbook: a workbook records only "
                        "its uploader's decisions (each person uploads their own)"
                    )
                refusal = may_decide(record.key) if may_decide is not None else None
                if refusal:
                    raise DecisionRefused(refusal)
                if template.rob2 is not None and entry_field_parts(outcome.field)[0] == template.rob2.name:
                    # its rules (conditions, NI's note, overrides of judged domains) are the panel's
                    raise DecisionRefused(
                        "RoB 2 is answered on the document's RoB 2 panel, a domain at a time, where its rules apply: "
                        "not from a workbook"
                    )
                if record.key not in logs:
                    logs[record.key] = KnownLog(load_decisions(store, record.key, withdrawn=True))
                recorded = decide(
                    store,
                    record,
                    DecisionRequest(
                        outcome.field,
                        decision,
                        reviewer=author or named or default_reviewer,
                        shown=(_text(row.get("sha256")), _text(row.get("extraction_version"))),
                        shown_value=_text(row.get("model_value")) if "model_value" in row else None,
                        template_field=template.field_definition(outcome.field),
                        identity=template.identity_for(outcome.field),
                        value=row.get("corrected_value"),
                        note=_text(row.get("review_note")),
                        reason=_text(row.get("reject_reason")),
                        source=f"workbook:{name}",
                        decision_id=stable_id(report.sha256, str(number)),  # imported again after a crash: not twice
                        proposed=proposed(record, outcome.field),
                    ),
                    logs[record.key],
                )
            except DecisionRefused as refused:
                reason = str(refused)
                if "say who decides" in reason:
                    reason = "no reviewer: fill the reviewer column (or set ATLAS_REVIEWER)"
                outcome.reason = reason
                report.add("refused", outcome)
                continue
            except Exception as error:  # one row that breaks something never stops the others or the report
                outcome.reason = redact(f"could not be applied: {type(error).__name__}: {error}")
                report.add("refused", outcome)
                continue
            report.add("already_applied" if recorded is None else "applied", outcome)
    finally:
        slices.close()
    _keep(store, report)
    return report


SLICE_ROWS = 100  # rows imported under one hold of the page's write lock (some 30 ms)
HANDOVER_SECONDS = 0.002  # between two slices: the lock's turn for anyone waiting


class _Slices:
    """The page's write lock held a slice of rows at a time, released in between; ``fresh`` at each new slice."""

    def __init__(self, lock: threading.Lock | None, fresh: Callable[[], None] | None) -> None:
        self.lock, self.fresh, self.held = lock, fresh, False

    def row(self, index: int) -> None:
        if self.lock is None or index % SLICE_ROWS:
            return
        if self.held:
            self.close()
            time.sleep(HANDOVER_SECONDS)  # a lock is not fair: a person waiting for it gets it now, not after us
        self.lock.acquire()
        self.held = True
        if self.fresh is not None:
            self.fresh()

    def close(self) -> None:
        if self.held and self.lock is not None:
            self.lock.release()
            self.held = False


def _same_person(name: str) -> str:
    """A name as the audit log records it (``reviewer_name``), or the name as given when it cannot be recorded."""
    try:
        return reviewer_name(" ".join(name.split()))
    except ValueError:
        return name


def _keep(store: Store, report: ImportReport) -> None:
    stamp = report.imported_at.replace("-", "").replace(":", "").replace("+0000", "Z").replace("+00:00", "Z")
    store.write_json(import_report_path(stamp, report.sha256), report.model_dump(mode="json"))


def import_reports(store: Store, start: int = 0, count: int | None = None) -> tuple[list[ImportReport], int]:
    """The import reports newest first — ``count`` of them from the ``start``-th (all by default) — and how many
    there are in all: a page lists a few, never every report's rows."""
    paths = list(reversed(store.files(IMPORTS)))
    chosen = paths[start:] if count is None else paths[start : start + count]
    return [ImportReport.model_validate(store.read_json(path)) for path in chosen], len(paths)


def imported_already(store: Store) -> set[str]:
    """The sha256 prefixes of workbooks imported before (their report names end with it)."""
    return {posixpath.basename(path).rsplit("-", 1)[-1].removesuffix(".json") for path in store.files(IMPORTS)}


def import_inbox(
    inbox: Store,
    store: Store,
    template: Template,
    default_reviewer: str = "",
    derivations: Derivations | None = None,
    accepted_tiers: frozenset[str] = frozenset({"verified"}),
    max_rows: int = MAX_ROWS,
    authors_required: bool = False,
) -> list[ImportReport]:
    """Import every workbook in the inbox not imported before (by content): dropping the same file twice, or
    leaving it there, applies it once. Every other file (but hidden ones and Excel's ``~$`` lock files) gets a report
    saying why it was not read — once, by its name and size, never read — as does a file too large for a workbook.
    ``authors_required`` (reviewers log in): a file in the inbox has no author anyone verified, so none is applied —
    each gets a report saying to upload it on the review page, where it is recorded as the uploader's."""
    done = imported_already(store)
    reports = []
    for path in inbox.files():
        base = posixpath.basename(path)
        if base.startswith((".", "~$")):
            continue
        size = inbox.size(path)
        not_read = _not_a_workbook(base)
        if size > MAX_WORKBOOK_BYTES:
            not_read = f"too large for a workbook: {size / 1e6:.0f} MB (limit {MAX_WORKBOOK_BYTES / 1e6:.0f} MB)"
        if authors_required and not not_read:
            not_read = NO_AUTHOR
        if not_read:  # known by its name and size, never read: reported once
            marker = sha256_of(f"{path}\0{size}".encode())
            if marker[:16] not in done:
                reports.append(ImportReport(workbook=path, sha256=marker, imported_at=now_iso(), error=not_read))
                _keep(store, reports[-1])
                done.add(marker[:16])
            continue
        data = inbox.read_bytes(path)
        if sha256_of(data)[:16] not in done:
            reports.append(
                import_workbook(store, data, path, template, default_reviewer, derivations, accepted_tiers, max_rows)
            )
            done.add(reports[-1].sha256[:16])
    return reports


NO_AUTHOR = (
    "not imported: reviewers log in, and a workbook dropped in the inbox has no verified author — upload it on the "
    "review page (Workbook imports), where its decisions are recorded as the uploader's"
)
WORKBOOK_SUFFIXES = (".xlsx", ".xlsm")  # the Office Open XML workbooks (.xlsm: the same with macros, never run)


def _not_a_workbook(name: str) -> str:
    """Why a file in the inbox is not read as a reviewed workbook ("" when it is one)."""
    lower = name.lower()
    if lower.endswith(WORKBOOK_SUFFIXES):
        return ""
    if lower.endswith((".xls", ".xlsb", ".ods", ".numbers")):
        kind = lower.rsplit(".", 1)[-1]
        return (
            f"not read: a .{kind} file is not the exported workbook — save it as .xlsx (Excel Workbook), drop it again"
        )
    if lower.endswith(".csv"):
        return "not read: a CSV has no decision columns to trust — fill the exported .xlsx workbook's fields sheet"
    return (
        "not read: only reviewed workbooks (.xlsx, from the exported atlas_documents.xlsx) are imported from the inbox"
    )
