"""From a corpus trial to a meta-analysis: a heart-failure trial (PMC1475568) writes percentages where the analysis
needs counts — its gold counts were derived by the annotators ("Used percentage found in text to calculate actual
number"). Through the real LLM path (the scripted OpenAI-compatible server), the real grader and the real exports,
Atlas derives the counts from the accepted percentages and group sizes, refuses to derive from a value no one
accepted, and writes metafor's escalc file — which R reads and fits a random-effects model on, beside the same
computed from the corpus gold."""

import csv
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.knowledge.catalog import refresh_catalog
from atlas_pipeline.outputs.analysis_files import read_escalc
from atlas_pipeline.outputs.forest_plots import dersimonian_laird, forest_plots
from atlas_pipeline.review.final_values import DocumentReview
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.records import ExtractionRecord, read_record
from atlas_pipeline_tests.support.browser import browser_page, shoot
from atlas_pipeline_tests.support.corpus import CORPUS, copy_into
from atlas_pipeline_tests.support.helpers import serve
from atlas_pipeline_tests.support.juice_trial import API_KEY

KEY = "PMC1475568.pdf"
NOT_REPORTED = {"value": None, "quote": None}
SIZES = "123 patients (64 control, 59 intervention) participated"


def _given(value, quote):
    return {"value": value, "quote": quote}


def _entry(outcome, intervention_pct, comparator_pct, total_comparator_quote=SIZES, time_point="12 months"):
    return {
        "outcome": _given(outcome[0], outcome[1]),
        "intervention": _given("self-management program", "heart failure self-management program"),
        "comparator": _given("usual care", "Control patients received a generic heart failure brochure and usual care"),
        "time_point": _given(time_point, "at the end of 12\nmonths"),
        "outcome_type": _given("dichotomous", outcome[1]),
        "percent_intervention": _given(intervention_pct[0], intervention_pct[1]),
        "total_intervention": _given(59, SIZES),
        "percent_comparator": _given(comparator_pct[0], comparator_pct[1]),
        "total_comparator": _given(64, total_comparator_quote),
    }


CONCEALED = "We then randomized patients by concealed allocation based on a random number generator"
NOT_BLINDED = "The research assistant was not blinded to the patient's study group."
ANSWER = {
    "study_id": _given("DeWalt 2006", "DeWalt"),
    "rob_allocation": _given("low", CONCEALED),
    "rob_blinding": _given("high", NOT_BLINDED),
    "outcomes": [
        _entry(
            ("Hospitalization or death", "Hospitalization or death"),
            (42, "42% of patients in the intervention group had at least 1 hospitalization or died"),
            (61, "61% of patients in the control group had at least one hospitalization or died"),
        ),
        _entry(
            ("Cardiac hospitalization", "Cardiac hospitalization"),
            (34, "34% of patients in the intervention group had at least one hospitalization for cardiac causes"),
            (39, "39% of patients in the control group"),
        ),
        # a group size whose quote the paper does not hold: unverified, awaiting a person — nothing derived from it
        _entry(
            ("Cardiac hospitalization", "Cardiac hospitalization"),
            (34, "34% of patients in the intervention group had at least one hospitalization for cardiac causes"),
            (39, "39% of patients in the control group"),
            total_comparator_quote="64 patients were randomised to the control arm",
            time_point="end of study",
        ),
    ],
}


def _gold_rows():
    rows = [json.loads(line) for line in (CORPUS / "gold" / "outcome_values.jsonl").read_text().splitlines()]
    wanted = {"Hospitalization or death", "Cardiac-related hospitalization"}
    return [row for row in rows if row["pmcid"] == 1475568 and row["outcome"] in wanted]


R_FIT = """
library(metafor)
dat <- read.csv(commandArgs(trailingOnly = TRUE)[1])
es <- escalc(measure = "RR", ai = ai, bi = bi, ci = ci, di = di, n1i = n1i, n2i = n2i, data = dat)
fit <- rma(yi, vi, data = es, method = commandArgs(trailingOnly = TRUE)[2])
cat(sprintf("%.10f %.10f %d\\n", coef(fit)[[1]], fit$se, fit$k))
"""


def _fit(path, method: str = "REML") -> tuple[float, float, int]:
    done = subprocess.run(["Rscript", "-e", R_FIT, str(path), method], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    estimate, se, k = done.stdout.split()
    return float(estimate), float(se), int(k)


def _run(llm_server, knowledge_base, settings_for, instance, monkeypatch, tmp_path, accept: str):
    copy_into(knowledge_base, f"rct/{KEY}")
    monkeypatch.setenv("ATLAS_LLM_API_KEY", API_KEY)
    options = {"llm_base_url": llm_server.base_url, "llm_model": "scripted-model", "llm_api_key": API_KEY}
    options["review_accept_tiers"] = accept
    settings = settings_for(knowledge_base, **options)
    defs = build_definitions(settings)
    from atlas_pipeline.deployment import Deployment

    atlas = Deployment.from_settings(settings)
    refresh_catalog(atlas.open_knowledge_base(), atlas.store())
    instance.add_dynamic_partitions(documents_partitions.name, [KEY])
    llm_server.script({"content": json.dumps(ANSWER)})
    result = defs.resolve_job_def("document_job").execute_in_process(partition_key=KEY, instance=instance)
    assert result.success
    assert defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
    return atlas, tmp_path / "exports", defs


@pytest.fixture
def derived_run(llm_server, knowledge_base, settings_for, instance, monkeypatch, tmp_path):
    """The team's policy: verified values, and values derived from accepted ones, count without a person."""
    atlas, exports, _ = _run(
        llm_server, knowledge_base, settings_for, instance, monkeypatch, tmp_path, "verified,derived"
    )
    return atlas, exports


def test_a_derived_value_waits_for_a_person_who_accepts_it_in_the_workbook(
    llm_server, knowledge_base, settings_for, instance, monkeypatch, tmp_path
):
    import openpyxl

    from atlas_pipeline.review.workbook_import import import_workbook

    atlas, exports, defs = _run(llm_server, knowledge_base, settings_for, instance, monkeypatch, tmp_path, "verified")
    field = "outcomes[1].events_intervention"
    review = read_record(atlas.store(), KEY, "review", DocumentReview)
    assert (review.fields[field].provenance, review.fields[field].model_value) == ("awaiting_review", 25)
    with (exports / "atlas_arms.csv").open() as handle:
        arms = {(row["entry"], row["arm"]): row for row in csv.DictReader(handle)}
    assert arms["1", "intervention"]["events"] == ""  # not accepted yet: not in the analysis files
    book = openpyxl.load_workbook(exports / "atlas_documents.xlsx")
    sheet = book["fields"]
    header = [cell.value for cell in sheet[1]]
    column = {name: header.index(name) + 1 for name in header}
    (row,) = [n for n in range(2, sheet.max_row + 1) if sheet.cell(n, column["field"]).value == field]
    assert (str(sheet.cell(row, column["model_value"]).value), sheet.cell(row, column["tier"]).value) == (
        "25",
        "derived",
    )
    assert sheet.cell(row, column["quote"]).value.endswith("= round(24.78) = 25")  # the arithmetic to check
    sheet.cell(row, column["decision"]).value = "approve"
    sheet.cell(row, column["reviewer"]).value = "ana"
    book.save(tmp_path / "reviewed.xlsx")
    report = import_workbook(
        atlas.store(),
        (tmp_path / "reviewed.xlsx").read_bytes(),
        "reviewed.xlsx",
        atlas.load_template(),
        derivations=atlas.derivations(),
        accepted_tiers=atlas.accepted_tiers(),
    )
    assert len(report.applied) == 1 and not report.refused, report
    assert defs.resolve_job_def("review_job").execute_in_process(partition_key=KEY, instance=instance).success
    assert defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
    with (exports / "atlas_arms.csv").open() as handle:
        arms = {(row["entry"], row["arm"]): row for row in csv.DictReader(handle)}
    assert float(arms["1", "intervention"]["events"]) == 25
    assert arms["1", "intervention"]["events_source"] == "derived (reviewer_approved)"


def test_counts_derived_from_written_percentages_reach_the_exports_and_r(derived_run, tmp_path):
    atlas, exports = derived_run
    record = read_record(atlas.store(), KEY, "extraction", ExtractionRecord)
    assert record.fields["outcomes[1].percent_intervention"]["tier"] == "verified"
    assert record.fields["outcomes[3].total_comparator"]["tier"] == "unverified"
    review = read_record(atlas.store(), KEY, "review", DocumentReview)
    events = review.fields["outcomes[1].events_intervention"]
    assert (events.tier, events.final_value, events.provenance) == ("derived", 25, "model_verified")
    assert [i["field"] for i in events.derivation["inputs"]] == [
        "outcomes[1].percent_intervention",
        "outcomes[1].total_intervention",
    ]
    refused = review.fields["outcomes[3].events_comparator"]
    assert refused.final_value is None and refused.derivation["state"] == "refused"
    assert refused.derivation["reason"] == (
        "not from an unaccepted input: outcomes[3].total_comparator is awaiting review"
    )

    with (exports / "atlas_arms.csv").open() as handle:
        arms = {(row["entry"], row["arm"]): row for row in csv.DictReader(handle)}
    hospital = arms["1", "intervention"]
    assert float(hospital["events"]) == 25 and hospital["events_source"] == "derived (model_verified)"
    assert hospital["events_evidence"] == "events = round(% × n / 100) = round(42 × 59 / 100) = round(24.78) = 25"
    assert float(hospital["total"]) == 59 and hospital["total_source"] == "model_verified"
    assert hospital["total_evidence"] == SIZES and hospital["n"] == ""  # the outcome's total, not a continuous n
    assert (
        hospital["derived"] == "intervention events: events_from_percentage; comparator events: events_from_percentage"
    )
    assert float(arms["1", "comparator"]["events"]) == 39
    assert (float(arms["2", "intervention"]["events"]), float(arms["2", "comparator"]["events"])) == (20, 25)
    # never from an unaccepted input: the control group's size of entry 3 awaits a person, so no count, no n
    refused = arms["3", "comparator"]
    assert refused["events"] == "" and refused["total"] == "" and refused["events_source"] == ""
    assert float(arms["3", "intervention"]["events"]) == 20  # its own inputs are accepted

    with (exports / "atlas_escalc_dichotomous.csv").open() as handle:
        escalc = list(csv.DictReader(handle))
    assert [(r["outcome"], r["ai"], r["bi"], r["ci"], r["di"]) for r in escalc] == [
        ("Hospitalization or death", "25", "34", "39", "25"),
        ("Cardiac hospitalization", "20", "39", "25", "39"),
    ]
    assert {r["study_id"] for r in escalc} == {"ISRCTN11535170"}  # keyed by study: the trial's registration

    # the same from the corpus gold (the annotators' derived counts), fitted by R's metafor the same way
    gold = tmp_path / "gold_escalc.csv"
    with gold.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["outcome", "ai", "bi", "ci", "di", "n1i", "n2i"])
        for row in _gold_rows():
            sizes = ("intervention_events", "intervention_group_size", "comparator_events", "comparator_group_size")
            e1, n1, e2, n2 = (row[name] for name in sizes)
            writer.writerow([row["outcome"], e1, n1 - e1, e2, n2 - e2, n1, n2])
    extracted, from_gold = _fit(exports / "atlas_escalc_dichotomous.csv"), _fit(gold)
    assert extracted[2] == from_gold[2] == 2
    assert extracted[0] == pytest.approx(from_gold[0], abs=1e-9)  # pooled log RR: extraction and gold agree
    assert extracted[1] == pytest.approx(from_gold[1], abs=1e-9)
    assert extracted[0] < 0  # fewer events with the program
    # the forest plots' own pooling (DerSimonian-Laird, as RevMan) is metafor's rma(method = "DL") on the same rows
    effects = [effect for plot in forest_plots(read_escalc(Store(str(exports)))) for effect in plot.effects]
    assert sorted(effect.entry for effect in effects) == [1, 2]  # entry 3's comparator waits for a person: not plotted
    pooled, r_dl = dersimonian_laird(effects), _fit(exports / "atlas_escalc_dichotomous.csv", "DL")
    assert pooled.estimate == pytest.approx(r_dl[0], abs=1e-8) and pooled.se == pytest.approx(r_dl[1], abs=1e-8)
    assert sorted((exports / "forest_plots").iterdir()) == [
        exports / "forest_plots" / "cardiac-hospitalization_rr.svg",
        exports / "forest_plots" / "hospitalization-or-death_rr.svg",
    ]


def test_the_forest_plot_in_the_browser_links_each_study_to_its_derived_evidence(derived_run, instance):
    from atlas_pipeline.review_page.app import create_app

    atlas, _ = derived_run
    with (
        serve(create_app(atlas, instance=lambda: instance)) as site,
        browser_page() as page,
    ):
        page.goto(f"{site}/analysis")
        plots = page.locator("section.forest")
        assert plots.count() == 2
        hospital = page.locator("section.forest[data-outcome='Hospitalization or death']")
        assert hospital.get_attribute("data-measure") == "RR"
        row = hospital.locator("g.study")
        assert row.count() == 1 and row.get_attribute("data-document") == KEY
        # RR = (25/59) / (39/64) = 0.70, with its 95% CI and the pooled diamond
        assert "0.70 [" in row.text_content() and hospital.locator("g.pooled polygon").count() == 1
        shoot(page, "analysis-forest.png")
        hospital.locator("a").first.click()
        page.wait_for_url("**/documents/**")
        assert "field=outcomes%5B1%5D.events_intervention" in page.url or "outcomes[1].events_intervention" in page.url
        assert page.locator("#model-value").inner_text() == "25"
        derivation = page.locator("#derivation")
        assert "events_from_percentage" in derivation.inner_text()
        assert page.locator("#arithmetic").inner_text().endswith("= round(24.78) = 25")
        assert "42% of patients in the intervention group" in derivation.inner_text()
        # the inputs' quotes are highlighted on the paper's page
        page.wait_for_selector(".highlight", state="attached", timeout=20_000)
        assert page.locator(".highlight").count() >= 2
        shoot(page, "review-derived.png")


def test_r_is_installed_by_the_test_set_up():
    assert shutil.which("Rscript"), "scripts/install_system_deps.sh --tests installs r-base-core and r-cran-metafor"


LAYOUT = Path(__file__).parents[1] / "support" / "revman_layout"


def _revman(exports, name: str) -> tuple[bytes, list[dict]]:
    raw = (exports / f"atlas_revman_{name}.csv").read_bytes()
    return raw, list(csv.DictReader(io.StringIO(raw.decode("utf-8-sig"), newline="")))


def _header(raw: bytes) -> bytes:
    return raw.split(b"\r\n", 1)[0]


def test_revman_web_import_files_have_revmans_layout_and_the_final_values(derived_run):
    _, exports = derived_run
    # study information: the very header RevMan writes in its own data package (BOM, CRLF, column names)
    raw, info = _revman(exports, "study_information")
    assert _header(raw) == _header((LAYOUT / "study-information.csv").read_bytes())
    assert raw.startswith(b"\xef\xbb\xbf") and raw.endswith(b"\r\n") and b"\n" not in raw.replace(b"\r\n", b"")
    (study,) = info
    assert (study["Study"], study["Year"], study["Data source"]) == ("DeWalt 2006", "2006", "PUB")
    assert study["Char: Interventions"] == "self-management program; usual care"
    assert "Hospitalization or death (12 months)" in study["Char: Outcomes"]
    assert "ISRCTN11535170" in study["Char: Notes"] and KEY in study["Char: Notes"]  # back to Atlas's study

    raw, arms = _revman(exports, "study_arms")
    assert _header(raw) == _header((LAYOUT / "study-arms.csv").read_bytes())
    assert [(a["Study"], a["Arm"], a["Intervention"]) for a in arms] == [
        ("DeWalt 2006", "self-management program", "self-management program"),
        ("DeWalt 2006", "usual care", "usual care"),
    ]

    raw, results = _revman(exports, "study_results")
    assert _header(raw) == _header((LAYOUT / "study-results.csv").read_bytes())
    rows = {(r["Outcome"], r["Arm"]): r for r in results}
    hospital = rows["Hospitalization or death (12 months)", "self-management program"]
    assert (hospital["Data type"], hospital["Sample size"], hospital["Cases"]) == ("Dichotomous", "59", "25")
    # the derived count says how it was derived, the group size where it is written
    derived = f"Cases derived (events_from_percentage) from {KEY} outcomes[1].events_intervention: events = round("
    assert derived + "% × n / 100) = round(42 × 59 / 100) = round(24.78) = 25" in hospital["Footnotes"]
    assert f'Sample size "{SIZES}" ({KEY} outcomes[1].total_intervention)' in hospital["Footnotes"]
    control = rows["Hospitalization or death (12 months)", "usual care"]
    assert (control["Sample size"], control["Cases"]) == ("64", "39")
    # the same numbers as the escalc file R fits: RevMan and metafor analyse the same final values
    with (exports / "atlas_escalc_dichotomous.csv").open() as handle:
        escalc = {row["outcome"]: row for row in csv.DictReader(handle)}
    cardiac = escalc["Cardiac hospitalization"]
    assert rows["Cardiac hospitalization (12 months)", "self-management program"]["Cases"] == cardiac["ai"]
    assert rows["Cardiac hospitalization (12 months)", "usual care"]["Cases"] == cardiac["ci"]
    # never from an unaccepted input: entry 3's control group awaits a person, so its 2×2 table is incomplete —
    # neither arm is written (metafor cannot use half a table, and RevMan is handed what metafor is)
    end_of_study = [r["Arm"] for r in results if r["Outcome"] == "Cardiac hospitalization (end of study)"]
    assert end_of_study == []

    raw, rob = _revman(exports, "risk_of_bias")
    header = _header(raw).decode("utf-8-sig").split(",")
    reference = _header((LAYOUT / "risk-of-bias.csv").read_bytes()).decode("utf-8-sig").split(",")
    assert header[0] == reference[0] == "Study"
    # RevMan's pairs: "Domain (judgement): D" then "Domain (support): D", one pair per domain
    pattern = re.compile(r"^Domain \((judgement|support)\): (.+)$")
    for columns in (header[1:], reference[1:]):
        pairs = [pattern.match(column).groups() for column in columns]
        assert [kind for kind, _ in pairs] == ["judgement", "support"] * (len(pairs) // 2)
        assert all(pairs[i][1] == pairs[i + 1][1] for i in range(0, len(pairs), 2))
    assert "Domain (judgement): Random sequence generation (selection bias)" in header
    (judged,) = rob
    # a risk-of-bias judgement is a person's to confirm (never verified by its quote): none is written yet
    assert set(judged.values()) == {"DeWalt 2006", ""}


def test_risk_of_bias_judgements_reach_revman_once_a_person_confirms_them(
    llm_server, knowledge_base, settings_for, instance, monkeypatch, tmp_path
):
    from atlas_pipeline.review.decisions import DecisionRequest, decide

    atlas, exports, defs = _run(
        llm_server, knowledge_base, settings_for, instance, monkeypatch, tmp_path, "verified,derived"
    )
    record = read_record(atlas.store(), KEY, "extraction", ExtractionRecord)
    for field in ("rob_allocation", "rob_blinding"):
        shown = (record.sha256, record.extraction_version)
        decide(atlas.store(), record, DecisionRequest(field, "approve", reviewer="ana", shown=shown))
    assert defs.resolve_job_def("review_job").execute_in_process(partition_key=KEY, instance=instance).success
    assert defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
    _, (judged,) = _revman(exports, "risk_of_bias")
    allocation, blinding = (
        "Allocation concealment (selection bias)",
        "Blinding of participants and personnel (performance bias)",
    )
    assert judged[f"Domain (judgement): {allocation}"] == "Low risk"
    assert judged[f"Domain (support): {allocation}"].startswith('"We then randomized patients by concealed allocation')
    assert judged[f"Domain (support): {allocation}"].endswith(f"({KEY})")
    assert judged[f"Domain (judgement): {blinding}"] == "High risk"
    assert NOT_BLINDED in judged[f"Domain (support): {blinding}"]
    assert judged["Domain (judgement): Incomplete outcome data (attrition bias)"] == ""  # not assessed


def test_a_policy_change_then_a_plain_atlas_run_leaves_no_value_the_new_policy_does_not_accept(
    llm_server, knowledge_base, monkeypatch, tmp_path
):
    from atlas_pipeline_tests.support.helpers import run_atlas

    copy_into(knowledge_base, f"rct/{KEY}")
    llm_server.script({"content": json.dumps(ANSWER)})
    env = {
        "DAGSTER_HOME": str(tmp_path / "home"),
        "ATLAS_KNOWLEDGE_BASE": str(knowledge_base),
        "ATLAS_ARTIFACTS": str(tmp_path / "artifacts"),
        "ATLAS_EXPORTS": str(tmp_path / "exports"),
        "ATLAS_LLM_GATE_DIR": str(tmp_path / "llm-gate"),
        "ATLAS_LLM_BASE_URL": llm_server.base_url,
        "ATLAS_LLM_MODEL": "scripted-model",
        "ATLAS_LLM_API_KEY": API_KEY,
        "ATLAS_REVIEW_ACCEPT_TIERS": "verified,derived",
    }
    (tmp_path / "home").mkdir()
    first = run_atlas("run", env=env, cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr

    def counts() -> list[tuple[str, str]]:
        with (tmp_path / "exports" / "atlas_escalc_dichotomous.csv").open() as handle:
            return [(row["ai"], row["derived"]) for row in csv.DictReader(handle)]

    assert counts() == [("25", "ai: events_from_percentage; ci: events_from_percentage")] * 1 + [
        ("20", "ai: events_from_percentage; ci: events_from_percentage")
    ]
    # the team goes back to the default policy: derived values wait for a person — and a plain run says so
    second = run_atlas("run", env={**env, "ATLAS_REVIEW_ACCEPT_TIERS": "verified"}, cwd=tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "policy, derivation rules or template changed" in second.stdout
    assert "up to date: not refreshed" not in second.stdout
    assert counts() == []  # every count was derived: none is accepted now
    with (tmp_path / "exports" / "atlas_arms.csv").open() as handle:
        assert all(
            not row["events"] and "derived" not in (row["events_source"] or "") for row in csv.DictReader(handle)
        )
    third = run_atlas("run", env={**env, "ATLAS_REVIEW_ACCEPT_TIERS": "verified"}, cwd=tmp_path)
    assert "up to date: not refreshed" in third.stdout  # and once they follow it, they are up to date

    # a group size of 29 digits that reached the decision log by hand (no page, grid or workbook lets it in): the
    # run exits 0, names it, leaves it out of the analysis files and writes every file
    from atlas_pipeline.config.settings import PROJECT_ROOT
    from atlas_pipeline.core.clock import now_stamp
    from atlas_pipeline.core.templates import load_template
    from atlas_pipeline.review.decisions import DecisionRequest, decide, decision_file
    from atlas_pipeline.store.layout import decisions_dir

    store = Store(str(tmp_path / "artifacts"))
    record = read_record(store, KEY, "extraction", ExtractionRecord)
    field = "outcomes[1].total_intervention"
    template = load_template(PROJECT_ROOT / "seeds" / "templates", "rct_base")
    made = decide(
        store,
        record,
        DecisionRequest(
            field, "correct", reviewer="ana", shown=None, template_field=template.field_definition(field), value="20"
        ),
    )
    forged = made.model_copy(update={"id": "forged", "value": int("9" * 29), "decided_at": now_stamp()})
    store.write_json(f"{decisions_dir(KEY)}/{decision_file(forged)}", json.loads(forged.model_dump_json()))
    fourth = run_atlas("run", env={**env, "ATLAS_REVIEW_ACCEPT_TIERS": "verified"}, cwd=tmp_path)
    assert fourth.returncode == 0, fourth.stdout + fourth.stderr
    assert (
        "left out of the analysis files" in fourth.stdout and "beyond any plausible total_intervention" in fourth.stdout
    )
    assert "not written" not in fourth.stdout
    for name in ("atlas_documents.xlsx", "atlas_fields.parquet", "atlas_outcomes.parquet", "atlas_arms.csv"):
        assert (tmp_path / "exports" / name).exists()
