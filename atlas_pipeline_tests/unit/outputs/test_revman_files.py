"""RevMan's import files without a pipeline: study names as Cochrane writes them, and RevMan's CSV encoding."""

import csv
import io

from atlas_pipeline.config.settings import PROJECT_ROOT
from atlas_pipeline.core.statuses import DocumentStatus
from atlas_pipeline.core.templates import load_template
from atlas_pipeline.outputs.completion import DocumentState
from atlas_pipeline.outputs.revman_files import (
    REVMAN_STEMS,
    STUDY_ARMS_COLUMNS,
    csv_bytes,
    revman_files,
    study_labels,
    surname_of,
)
from atlas_pipeline.outputs.study_report import Study
from atlas_pipeline.review.study_values import StudyValue
from atlas_pipeline.store.records import ParseRecord


def test_the_family_name_is_found_in_every_way_papers_write_an_author():
    assert surname_of("Darren A DeWalt") == "DeWalt"
    assert surname_of("Darren A. DeWalt") == "DeWalt"
    assert surname_of("DeWalt, Darren A") == "DeWalt"
    assert surname_of("DeWalt DA") == "DeWalt"
    assert surname_of("van der Berg, Anna") == "van der Berg"
    assert surname_of("") == ""


def _study(study_id: str, label: str | None, state: str = "single") -> Study:
    study = Study(study_id)
    if label is not None:
        study.values["study_id"] = StudyValue(field="study_id", state=state, value=label)
    return study


def test_two_studies_of_one_name_become_a_and_b_and_a_study_without_a_name_keeps_its_id():
    labels = study_labels(
        [
            _study("NCT1", "Smith 2020"),
            _study("NCT2", "Smith 2020"),
            _study("NCT3", None),
            _study("NCT4", None, state="conflict"),
        ]
    )
    assert labels == {"NCT1": "Smith 2020a", "NCT2": "Smith 2020b", "NCT3": "NCT3", "NCT4": "NCT4"}


def test_revmans_encoding_and_no_formula_a_spreadsheet_would_run():
    rows = [{"Study": "Smith 2020", "Arm": '=HYPERLINK("http://x")', "Description": "-2", "Intervention": "a, b"}]
    raw = csv_bytes(STUDY_ARMS_COLUMNS, rows)
    assert raw.startswith("\ufeff".encode()) and raw.count(b"\r\n") == 2
    (row,) = csv.DictReader(io.StringIO(raw.decode("utf-8-sig")))
    assert row["Arm"] == '\'=HYPERLINK("http://x")'  # opens as text
    assert row["Description"] == "-2"  # a number stays a number
    assert row["Intervention"] == "a, b"


def test_only_studies_that_went_through_extraction_are_written_named_by_their_first_author():

    def report(key, status, authors=(), year=None):
        parse = ParseRecord(key=key, sha256="0" * 64, parser="test", authors=list(authors), year=year)
        return DocumentState(key=key, status=status, reason="", study_id=key, parse=parse)

    done, broken = Study("a.pdf"), Study("b.pdf")
    done.reports.append(report("a.pdf", DocumentStatus.DONE, ["Darren A. DeWalt", "Robert M Malone"], 2006))
    broken.reports.append(report("b.pdf", DocumentStatus.FAILED))
    template = load_template(PROJECT_ROOT / "seeds" / "templates", "rct_base")
    files = revman_files([broken, done], template, [])
    info = list(csv.DictReader(io.StringIO(files[REVMAN_STEMS["study_information"]].decode("utf-8-sig"))))
    assert [(row["Study"], row["Year"]) for row in info] == [("DeWalt 2006", "2006")]
    rob = list(csv.DictReader(io.StringIO(files[REVMAN_STEMS["risk_of_bias"]].decode("utf-8-sig"))))
    assert [row["Study"] for row in rob] == ["DeWalt 2006"]
