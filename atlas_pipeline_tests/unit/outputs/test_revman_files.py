"""RevMan's import files without a pipeline: study names as Cochrane writes them, and RevMan's CSV encoding."""

import csv
import io

from atlas_pipeline.config.settings import PROJECT_ROOT
from atlas_pipeline.core.statuses import DocumentStatus
from atlas_pipeline.core.templates import load_template
from atlas_pipeline.outputs.analysis_files import escalc_rows, study_entries
from atlas_pipeline.outputs.export_files import REVMAN_STEMS
from atlas_pipeline.outputs.revman_files import STUDY_ARMS_COLUMNS, csv_bytes, revman_files
from atlas_pipeline.outputs.study_labels import study_labels, surname_of
from atlas_pipeline.outputs.study_report import Study, studies
from atlas_pipeline.read_model.document_state import DocumentState
from atlas_pipeline.review.study_values import StudyChoice, StudyValue
from atlas_pipeline.store.records import ParseRecord
from atlas_pipeline_tests.support.records import accepted_report


def test_the_family_name_is_found_in_every_way_papers_write_an_author():
    assert surname_of("Darren A DeWalt") == "DeWalt"
    assert surname_of("Darren A. DeWalt") == "DeWalt"
    assert surname_of("DeWalt, Darren A") == "DeWalt"
    assert surname_of("DeWalt DA") == "DeWalt"
    assert surname_of("Smith J.A.") == surname_of("Smith J.") == "Smith"
    assert surname_of("John Smith Jr") == "Smith"
    assert surname_of("Darren A LI") == "LI"  # a family name in capitals (JATS) after a middle initial
    assert surname_of("van der Berg, Anna") == "van der Berg"
    assert surname_of("WHO Collaborative Group") == "WHO Collaborative Group"
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
            _study("NCT4", "Jones 2019", state="conflict"),  # reports disagree on the name: Atlas's id
        ]
    )
    assert labels == {"NCT1": "Smith 2020a", "NCT2": "Smith 2020b", "NCT3": "NCT3", "NCT4": "NCT4"}


def test_a_suffix_never_gives_a_study_the_name_of_another():
    labels = study_labels([_study("1", "Smith 2020"), _study("2", "Smith 2020"), _study("3", "Smith 2020a")])
    assert labels["3"] == "Smith 2020a" and sorted(labels.values()) == ["Smith 2020a", "Smith 2020b", "Smith 2020c"]


def test_thousands_of_studies_of_one_name_each_get_their_own():
    """A knowledge base of 100,000 trials holds hundreds of "Wang 2020": past z and zz the suffixes go on (they ran
    out at 702, and RevMan's files and the forest plots were not written)."""
    labels = study_labels([_study(str(n), "Wang 2020") for n in range(800)])
    assert len(set(labels.values())) == 800
    assert [labels[n] for n in ("0", "25", "26", "701", "702", "799")] == [
        "Wang 2020a", "Wang 2020z", "Wang 2020aa", "Wang 2020zz", "Wang 2020aaa", "Wang 2020adt",
    ]  # fmt: skip


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
    failed = _report("b.pdf", {})  # a failed document has a review too (nothing to review)
    broken.reports[0].extraction, broken.reports[0].review = failed.extraction, failed.review
    assert broken.reports[0].current_review is not None
    template = load_template(PROJECT_ROOT / "seeds" / "templates", "rct_base")
    files = revman_files([broken, done], template, [], escalc_rows([]))
    info = list(csv.DictReader(io.StringIO(files[REVMAN_STEMS["study_information"]].decode("utf-8-sig"))))
    assert [(row["Study"], row["Year"]) for row in info] == [("DeWalt 2006", "2006")]
    rob = list(csv.DictReader(io.StringIO(files[REVMAN_STEMS["risk_of_bias"]].decode("utf-8-sig"))))
    assert [row["Study"] for row in rob] == ["DeWalt 2006"]


def _report(key: str, values: dict, provenance: str = "model_verified") -> DocumentState:
    return accepted_report(key, values, "NCT9", provenance)


ENTRY = {
    "outcomes[1].outcome": "Death",
    "outcomes[1].time_point": "12 months",
    "outcomes[1].intervention": "drug",
    "outcomes[1].comparator": "placebo",
    "outcomes[1].total_intervention": 50,
    "outcomes[1].total_comparator": 50,
    "outcomes[1].events_comparator": 9,
}


def _results(states: list[DocumentState], choices=()) -> dict[tuple[str, str], dict]:
    template = load_template(PROJECT_ROOT / "seeds" / "templates", "rct_base")
    found = studies(states, template, {"NCT9": list(choices)})
    entries, _ = study_entries(found, template)
    files = revman_files(found, template, entries, escalc_rows(entries))
    text = files[REVMAN_STEMS["study_results"]].decode("utf-8-sig")
    return {(row["Arm"], row["Data type"]): row for row in csv.DictReader(io.StringIO(text))}


def test_two_reports_of_one_study_give_the_study_value_never_the_first_reports_by_default():
    first = _report("a.pdf", {**ENTRY, "outcomes[1].events_intervention": 10})
    second = _report("b.nxml", {**ENTRY, "outcomes[1].events_intervention": 12})
    # the reports disagree and no person chose: the count is the study's to settle, so the entry's 2×2 table is not
    # written (neither arm: RevMan is handed what metafor is, and metafor needs both)
    rows = _results([first, second])
    assert ("drug", "Dichotomous") not in rows and ("placebo", "Dichotomous") not in rows
    # a person takes the second report's count: that one is written, whichever report comes first, once
    choice = StudyChoice(
        id="c1",
        study="NCT9",
        field="outcomes[Death | 12 months | drug | placebo].events_intervention",
        value=12,
        from_report="b.nxml",
        reviewer="dan",
        decided_at="2026-11-25T00:00:00Z",
        values_then={"a.pdf": "10", "b.nxml": "12"},
    )
    rows = _results([first, second], [choice])
    drug, placebo = rows["drug", "Dichotomous"], rows["placebo", "Dichotomous"]
    assert (drug["Cases"], drug["Sample size"], placebo["Cases"]) == ("12", "50", "9")
    assert drug["Footnotes"].startswith("Atlas study NCT9")
    assert (
        "events_intervention in b.nxml" in drug["Footnotes"]
        and "(b.nxml outcomes[1].events_intervention)" in drug["Footnotes"]
    )


def test_counts_escalc_would_refuse_are_not_written_and_nan_writes_nothing():
    state = _report("a.pdf", {**ENTRY, "outcomes[1].events_intervention": 60, "outcomes[1].events_comparator": 9.5})
    assert _results([state]) == {}  # more events than participants; half an event
    nan = {"outcomes[1].mean_intervention": float("nan"), "outcomes[1].sd_intervention": 1.5}
    assert ("drug", "Continuous") not in _results([_report("a.pdf", {**ENTRY, **nan})])  # and nothing crashed


def test_continuous_arms_and_a_ratio_against_its_reference_arm():
    continuous = {
        "outcomes[1].mean_intervention": 4.25,
        "outcomes[1].sd_intervention": 1.5,
        "outcomes[1].n_intervention": 48,
        "outcomes[1].mean_comparator": 5.5,
        "outcomes[1].sd_comparator": 1.25,
        "outcomes[1].n_comparator": 47,
    }
    entry = {name: value for name, value in ENTRY.items() if "events" not in name and "total" not in name}
    ratio_only = {name.replace("[1]", "[2]"): value for name, value in entry.items()}
    ratio_only |= {
        "outcomes[2].outcome": "Relapse",
        "outcomes[2].effect_measure": "RR",
        "outcomes[2].effect_estimate": 0.7,
        "outcomes[2].ci_lower": 0.52,
        "outcomes[2].ci_upper": 0.94,
    }
    rows = _results([_report("a.pdf", {**entry, **continuous, **ratio_only})])
    drug = rows["drug", "Continuous"]
    assert (drug["Mean"], drug["SD"], drug["Sample size"]) == ("4.25", "1.5", "48")
    assert rows["placebo", "Continuous"]["SD"] == "1.25"
    ratio = next(row for row in rows.values() if row["Effect measure"])
    assert (ratio["Effect measure"], ratio["Arm"], ratio["Reference arm"]) == ("Risk Ratio", "drug", "placebo")
    assert (ratio["Exp mean"], ratio["Exp CI start"], ratio["Exp CI end"], ratio["CI level"]) == (
        "0.7",
        "0.52",
        "0.94",
        "95",
    )
    assert ratio["Mean"] == ratio["CI start"] == ""  # the log scale is RevMan's to compute


def _parsed(key: str, authors: list[str], year: int | None) -> DocumentState:
    parse = ParseRecord(
        key=key, sha256=key.encode().hex()[:64].ljust(64, "0"), parser="test", authors=authors, year=year
    )
    return DocumentState(key=key, status=DocumentStatus.DONE, reason="", parse=parse)


def test_a_name_without_a_year_takes_the_year_its_reports_give():
    """ "Adams" (a study_id accepted without its year, or a first report whose page states none) is "Adams 2019" in
    every file, and RevMan's ``Year`` is filled, from whichever report gives the year."""
    named, unnamed = _study("NCT1", "Adams"), Study("NCT2")
    named.reports += [_parsed("a.pdf", ["Adams, Ann"], None), _parsed("a.nxml", [], 2019)]
    unnamed.reports += [_parsed("b.pdf", ["Bo Li"], None), _parsed("b.nxml", [], 2021)]
    assert study_labels([named, unnamed, _study("NCT3", "Smith 2020")]) == {
        "NCT1": "Adams 2019",
        "NCT2": "Li 2021",
        "NCT3": "Smith 2020",
    }
    template = load_template(PROJECT_ROOT / "seeds" / "templates", "rct_base")
    files = revman_files([named, unnamed], template, [], escalc_rows([]))
    info = list(csv.DictReader(io.StringIO(files[REVMAN_STEMS["study_information"]].decode("utf-8-sig"))))
    assert [(row["Study"], row["Year"]) for row in info] == [("Adams 2019", "2019"), ("Li 2021", "2021")]


def test_a_difference_with_a_90_percent_ci_goes_to_revman_as_revman_reads_it():
    """RevMan computes the SE of a CI of another level than 95% itself, with the normal z of that level: the CI goes
    alone (no SE that would contradict it), and the footnote says what RevMan computes and what escalc's vi holds."""
    entry = {name: value for name, value in ENTRY.items() if "events" not in name and "total" not in name}
    entry |= {
        "outcomes[1].n_intervention": 20,
        "outcomes[1].n_comparator": 21,
        "outcomes[1].effect_measure": "MD",
        "outcomes[1].effect_estimate": -2.0,
        "outcomes[1].ci_lower": -5.0,
        "outcomes[1].ci_upper": 1.0,
        "outcomes[1].ci_level": 90,
    }
    row = next(row for row in _results([_report("a.pdf", entry)]).values() if row["Effect measure"])
    assert (row["Mean"], row["CI start"], row["CI end"], row["CI level"], row["SE"]) == ("-2", "-5", "1", "90", "")
    revman_se = 6.0 / (2 * 1.6448536269514722)
    assert f"= {revman_se:.4f}" in row["Footnotes"] and "escalc's vi" in row["Footnotes"]
    at_95 = _results([_report("a.pdf", {**entry, "outcomes[1].ci_level": 95})])
    row = next(row for row in at_95.values() if row["Effect measure"])
    assert row["SE"] not in ("", None) and row["CI level"] == "95"  # at 95%, escalc's own SE, as before
