"""RoB 2 per result, from the paper to the files: on the juice trial, the model (a scripted OpenAI-compatible
endpoint) proposes every domain's answers with their quotes in one request per domain; two reviewers answer one
question differently and an adjudicator settles it; a person overrides a domain's judgement with a reason; and the
judgements, RevMan's and robvis's files, the plots and the Analysis page follow the final answers."""

import csv
import html
import io
import re

import openpyxl
import pytest

from atlas_pipeline.cli.run import print_exports
from atlas_pipeline.core.rob2_module import GROUP
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.review.decisions import DecisionRefused, DecisionRequest, decide, load_decisions
from atlas_pipeline.review.workbook_import import import_workbook
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.records import ExtractionRecord, read_record
from atlas_pipeline_tests.support.helpers import http_request, post_form, serve
from atlas_pipeline_tests.support.juice_trial import CORRECT, DURATION, FECAL, KEY

RANDOM = (
    "To establish the randomization list, permuted blocks of variable length, with four blocks for each group, were "
    "used in order to avoid imbalance between treatment groups."
)
UNAWARE = (
    "The investigators involved with the care of the patients in the study were not aware of the code identifying "
    "the bottle content or of the type of juice that the infant was randomized to be fed."
)
NONE_WITHDRAWN = "no patient was withdrawn or shifted to another therapy due to vomiting"
DOUBLE_BLIND = "The study was conducted in a double-blind design."


def _a(value, quote=None) -> dict:
    return {"value": value, "quote": quote}


def _answers(result: int) -> dict:
    """What a careful model answers for one result of the juice trial, every domain at once (each domain's request
    takes its own questions)."""
    return {
        "result": _a(result),
        "q1_1": _a("Y", RANDOM),
        "q1_2": _a("PY", UNAWARE),
        "q1_3": _a("NI", "looked for: a comparison of the groups' baseline characteristics"),
        "q2_1": _a("PN", DOUBLE_BLIND),
        "q2_2": _a("N", UNAWARE),
        "q2_3": _a(None),
        "q2_4": _a(None),
        "q2_5": _a(None),
        "q2_6": _a("NI", "looked for: whether every randomized infant was analysed in its group"),
        "q2_7": _a("PN", NONE_WITHDRAWN),
        "q3_1": _a("Y", NONE_WITHDRAWN),
        "q4_1": _a("N", "Duration of diarrhea in hours after randomization"),
        "q4_2": _a("N", DOUBLE_BLIND),
        "q4_3": _a("PN", UNAWARE),
        "q5_1": _a("NI", "looked for: a registered protocol or statistical analysis plan"),
        "q5_2": _a("N", "Duration of diarrhea in hours after randomization"),
        "q5_3": _a("PN", "Data were analyzed by Analysis of Variance (ANOVA)"),
    }


@pytest.fixture
def rob2_run(llm_deployment):
    return llm_deployment(rule="rob2", llm_max_retries="1")


def _rows(data: bytes) -> list[dict]:
    return list(csv.DictReader(io.StringIO(data.decode("utf-8-sig"))))


def test_rob2_from_the_model_through_two_reviewers_to_the_files(rob2_run, llm_server, instance, capsys):
    settings, atlas, defs = rob2_run
    odd = {**_answers(2), "q1_1": _a("yes", RANDOM), "q2_3": _a("NA")}  # a word that is no answer; an NA
    whole = {**CORRECT, "outcomes": [DURATION, FECAL], GROUP: [_answers(1), odd]}
    llm_server.script(default={"answer": whole})
    assert defs.resolve_job_def("document_job").execute_in_process(partition_key=KEY, instance=instance).success
    record = read_record(atlas.store(), KEY, "extraction", ExtractionRecord)
    asked = [r for r in llm_server.requests() if "one domain only" in r["messages"][-1]["content"]]
    assert len(asked) == 5  # one request per domain, every result in each
    d1 = next(r["messages"][-1]["content"] for r in asked if "D1 Risk of bias arising from the randomization" in str(r))
    assert "1. Duration of diarrhea | —" in d1 and "2. Fecal losses | —" in d1
    fields = record.fields
    q1_1 = fields[f"{GROUP}[1].q1_1"]
    assert (q1_1["value"], q1_1["tier"]) == ("Y", "approximate")  # the quote found, the judgment a person's
    assert "a person decides" in q1_1["note"]
    ni = fields[f"{GROUP}[1].q1_3"]
    assert ni["value"] == "NI" and ni["quote"] is None
    assert ni["note"].startswith("No information; looked for: a comparison of the groups' baseline")
    assert f"{GROUP}[1].q2_3" not in fields  # not asked (2.1 and 2.2 no): nothing for a person to settle
    assert f"{GROUP}[2].q2_3" not in fields  # answered NA where it is not asked: nothing to settle either
    odd_answer = fields[f"{GROUP}[2].q1_1"]
    assert odd_answer["value"] is None and "answered 'yes', not one of this question's answers" in odd_answer["note"]
    assert fields[f"{GROUP}[1].result_outcome"]["module"] == GROUP
    assert fields[f"{GROUP}[2].result_outcome"]["value"] == "Fecal losses"
    assert "RoB 2: 27 answer(s) proposed for 2 result(s)" in record.reason
    assert record.status.value in ("done", "partial")  # the data extraction's status, not RoB 2's

    store = atlas.store()
    shown = (record.sha256, record.extraction_version)
    template = Deployment.from_settings(settings).load_template()

    def said(name, action, reviewer, value=None, role="reviewer", note=""):
        definition = template.field_definition(name)
        decide(
            store,
            record,
            DecisionRequest(
                name,
                action,
                reviewer,
                shown,
                template_field=definition,
                identity=template.identity_for(name),
                value=value,
                role=role,
                note=note,
            ),
        )

    first = sorted(name for name in fields if name.startswith(f"{GROUP}[1].q"))
    for name in first:
        said(name, "approve", "Ana")  # Ana keeps every proposal of the first result
    said(f"{GROUP}[1].q1_2", "correct", "Ben", "PN", note="concealment not described")  # Ben differs on 1.2
    exports = settings.project.exports

    def files():
        assert defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
        with open(f"{exports}/atlas_rob2_results.csv", "rb") as table:
            rows = {row["outcome"]: row for row in _rows(table.read())}
        return rows

    rows = files()
    duration = rows["Duration of diarrhea"]
    assert duration["D1"] == "" and "1.2" in duration["missing"]  # a disagreement is no answer: D1 waits
    assert duration["D2"] == "Some concerns" and duration["D3"] == "Low" and duration["D4"] == "Low"
    assert duration["D5"] == "Some concerns" and duration["Overall"] == ""

    from atlas_pipeline.review_page.app import create_app

    with serve(create_app(Deployment.from_settings(settings), instance=lambda: instance)) as site:
        desk = http_request(f"{site}/documents/{KEY}")[1]
        assert "disputed — Ana: approve; Ben: correct → PN" in desk  # what each said, for the adjudicator
        assert 'id="selected-field">rob2' not in desk  # the desk's next field is never a RoB 2 answer: the panel's
        assert "model: PY — “The investigators" in desk  # the proposal beside its question …
        blind = http_request(f"{site}/documents/{KEY}?blind=models")[1]  # … never in a pass blind to the models
        assert 'id="rob2-1-D1"' in blind and "rob2-proposal" not in blind and "The investigators involved" not in blind
        form = {
            **dict(zip(("sha256", "extraction_version"), shown, strict=True)),
            **{"reviewer": "Dan", "role": "adjudicator", "domain": "D1"},
            **{"answer:1.1": "Y", "was:1.1": "Y", "shown:1.1": "Y", "answer:1.3": "NI", "was:1.3": "NI"},
            **{"answer:1.2": "PY", "was:1.2": "", "shown:1.2": "PN", "disputed:1.2": "1"},  # as the panel sends it
        }
        status, body = post_form(f"{site}/documents/{KEY}/rob2/1", form)  # the adjudicator settles 1.2 on the panel
        assert status == 200 and "RoB 2 D1 of result 1: 1 decision(s) recorded by Dan" in body
        base = {**dict(zip(("sha256", "extraction_version"), shown, strict=True)), "reviewer": "Ana"}
        emptied = {**base, "domain": "D5", "answer:5.1": "", "was:5.1": "", "shown:5.1": "NI"}
        assert post_form(f"{site}/documents/{KEY}/rob2/2", emptied)[0] == 200  # a proposal emptied: rejected
        refused = {**base, "domain": "D2", "answer:2.3": "NA", "was:2.3": ""}
        status, body = post_form(f"{site}/documents/{KEY}/rob2/2", refused)
        assert status == 409 and "'Not applicable' is for a question its condition does not ask" in html.unescape(body)
    second = [(d.field, d.action) for d in load_decisions(store, KEY) if d.field.startswith(f"{GROUP}[2]")]
    assert second == [(f"{GROUP}[2].q5_1", "reject")]
    settled = [d for d in load_decisions(store, KEY) if d.field == f"{GROUP}[1].q1_2" and d.reviewer == "Dan"]
    assert [(d.action, d.value, d.role) for d in settled] == [("correct", "PY", "adjudicator")]
    with pytest.raises(DecisionRefused, match="needs its reason"):
        said(f"{GROUP}[1].d5_override", "correct", "Dan", "Low", role="adjudicator")
    reason = "the outcome and its analysis are those the sample size was computed for"
    said(f"{GROUP}[1].d5_override", "correct", "Dan", "Low", role="adjudicator", note=reason)

    for reviewer, judgement in (("Ana", "High"), ("Ben", "Low")):  # two reviewers who differ on an override
        said(f"{GROUP}[1].d4_override", "correct", reviewer, judgement, note=f"{reviewer}'s reading of the assessors")

    rows = files()
    duration = rows["Duration of diarrhea"]
    assert duration["D4"] == "Low" and "D4 override" in duration["conflicts"]  # disputed: not applied until settled
    assert duration["D1"] == "Low" and duration["proposed_D1"] == "Low"
    assert "1.2=PY" in duration["paths"] and "1.1=Y" in duration["paths"]
    assert duration["D5"] == "Low" and duration["proposed_D5"] == "Some concerns"  # the override beside the proposal
    assert reason in duration["overrides"] and "Dan" in duration["overrides"]
    assert duration["Overall"] == "Some concerns"  # D2 still some concerns
    assert f'1.2 PY: "{UNAWARE}"' in duration["support_D1"]
    fecal = rows["Fecal losses"]
    assert fecal["Overall"] == "" and fecal["D1"] == ""  # nobody answered: nothing judged

    book = openpyxl.load_workbook(f"{exports}/atlas_documents.xlsx")
    assert list(book["rob2"].tables) == ["table_rob2"]  # "rob2" reads as a cell (ROB2): Excel would repair the file
    with open(f"{exports}/atlas_revman_rob2.csv", "rb") as handle:
        revman = _rows(handle.read())
    assert [row["Outcome"] for row in revman] == ["Duration of diarrhea", "Fecal losses"]
    assert revman[0]["Domain (judgement): Bias arising from the randomization process"] == "Low risk"
    assert revman[0]["Domain (judgement): Overall bias"] == "Some concerns"
    assert (
        "the algorithm proposed Some concerns"
        in revman[0]["Domain (support): Bias in selection of the reported result"]
    )
    assert "Not judged yet" in revman[1]["Domain (support): Bias arising from the randomization process"]
    with open(f"{exports}/atlas_robvis_rob2.csv", "rb") as handle:
        robvis = _rows(handle.read())
    assert list(robvis[0]) == ["Study", "D1", "D2", "D3", "D4", "D5", "Overall", "Weight"]
    assert len(robvis) == 1 and robvis[0]["Study"].endswith(": Duration of diarrhea")  # only what is judged
    assert [robvis[0][c] for c in ("D1", "D2", "Overall")] == ["Low", "Some concerns", "Some concerns"]
    with open(f"{exports}/atlas_rob2_traffic_light.svg", encoding="utf-8") as handle:
        light = handle.read()
    results = light.split('class="rob2-legend"')[0].split("</svg>")[0]
    assert results.count('data-judgement="Low"') == 4 + 1  # D1, D3, D4, D5 (+ the legend's)
    assert results.count('data-judgement="Some concerns"') == 2 + 1  # D2 and overall
    assert results.count('data-judgement=""') == 6 + 1  # the fecal losses' result: not judged yet
    with open(f"{exports}/atlas_rob2_summary.svg", encoding="utf-8") as handle:
        summary = handle.read()
    assert "2 result(s)" in summary and 'data-judgement="Low"' in summary

    # a workbook does not go round the panel's rules (NI without what was looked for, a question not asked, an
    # override of a domain not judged): a row on RoB 2 is refused, and says where RoB 2 is answered
    sheet = book["fields"]
    header = [cell.value for cell in sheet[1]]
    column = {name: header.index(name) + 1 for name in header}
    rows = {sheet.cell(n, column["field"]).value: n for n in range(2, sheet.max_row + 1)}
    on_rob2 = [f"{GROUP}[2].q1_1", next(name for name in rows if name.startswith(f"{GROUP}[2].q2"))]
    for field, value in zip(on_rob2, ("NI", "Y"), strict=True):  # an NI with no note, a question maybe not asked
        sheet.cell(rows[field], column["decision"]).value = "correct"
        sheet.cell(rows[field], column["corrected_value"]).value = value
        sheet.cell(rows[field], column["reviewer"]).value = "Ana"
    sheet.cell(rows["n_control"], column["decision"]).value = "approve"  # and the other rows go in as ever
    sheet.cell(rows["n_control"], column["reviewer"]).value = "Ana"
    filled = io.BytesIO()
    book.save(filled)
    report = import_workbook(store, filled.getvalue(), "ana.xlsx", atlas.load_template())
    refused = {row.field: row.reason for row in report.refused}
    assert set(refused) == set(on_rob2), refused
    assert all("answered on the document's RoB 2 panel" in reason for reason in refused.values())
    assert [d.field for d in load_decisions(store, KEY) if d.source == "workbook:ana.xlsx"] == ["n_control"]

    print_exports(Store(exports), by_hand=False)  # what `atlas run` says of the exports
    said = capsys.readouterr().out
    assert "risk of bias (RoB 2, per result): " in said and "atlas_robvis_rob2.csv" in said

    with serve(create_app(Deployment.from_settings(settings), instance=lambda: instance)) as site:
        page = http_request(f"{site}/analysis")[1]
        assert 'class="rob2-traffic-light"' in page and 'class="rob2-summary"' in page
        desk = http_request(f"{site}/documents/{KEY}")[1]
        assert 'id="rob2-1-D1"' in desk and "algorithm: " in desk
        assert re.search(r'data-question="2\.3" data-conditions="[^"]*" hidden', desk)  # 2.1, 2.2 no: not asked
        assert "Low (Dan" not in desk and 'value="the outcome and its analysis' in desk  # the override's reason


def test_a_domain_the_endpoint_refuses_is_left_to_a_person_and_said(rob2_run, llm_server, instance):
    _, atlas, defs = rob2_run
    whole = {**CORRECT, "outcomes": [DURATION, FECAL], GROUP: [_answers(1), _answers(2)]}
    refused = {"when": "D3 Risk of bias due to missing outcome data", "status": 400, "message": "context too long"}
    llm_server.script(refused, default={"answer": whole})
    assert defs.resolve_job_def("document_job").execute_in_process(partition_key=KEY, instance=instance).success
    record = read_record(atlas.store(), KEY, "extraction", ExtractionRecord)
    assert record.status.value in ("done", "partial")  # the data extraction stands
    assert "not proposed: D3: " in record.reason and "context too long" in record.reason
    lost = record.fields[f"{GROUP}[1].q3_1"]
    assert lost["value"] is None and lost["note"] == "the D3 request failed" and not lost["answered"]
    assert record.fields[f"{GROUP}[1].q4_1"]["value"] == "N"  # the other domains proposed
