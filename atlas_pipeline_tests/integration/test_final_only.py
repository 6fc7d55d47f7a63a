"""Only what the team's process made final reaches an analysis (``review.finality``): a team of three logs in and
extracts four corpus trials in the default mode (no LLM), leaving in each a value the process has not made final —

- the juice trial: two extractions complete, the extractors differ on the intervention's events (515 / 516);
- PMC1574360: Ana completed, Ben has not started (waiting for the second extraction);
- PMC3508963: Ana is still extracting, nobody completed (never compared);
- PMC3510731: the adjudicator decided (999) before anyone extracted — refused on the page now, planted in the log as
  an older version let it be —, then the extractors differ (61 / 62) and complete.

None of these numbers reaches any consumer that pools or reports values — metafor's escalc files, the arms file,
RevMan's four files, the forest plots, ``atlas_studies``, the typed exports, ``atlas_fields``' final values, the
Analysis and study pages —, and no RoB 2 answer given in the same states (the review assesses RoB 2: a result
assessed by each extractor, signalling question 1.1) reaches the RoB 2 files; and each is named with what it waits
for and who can settle it, in ``atlas_analysis_excluded.csv`` and on the Analysis page. Settled (the adjudicator
after the comparison, the second extraction completed), they are in every file."""

import csv
import io
import re
from pathlib import Path

import polars as pl

from atlas_pipeline.deployment import Deployment
from atlas_pipeline.outputs.export_files import ESCALC_STEMS, EXCLUDED_STEM, REVMAN_STEMS
from atlas_pipeline.review.accounts import add_account
from atlas_pipeline.review.decisions import DecisionRequest, decide, load_decisions
from atlas_pipeline.store.records import ExtractionRecord, read_record
from atlas_pipeline_tests.support.by_hand import processed_in_skip_mode
from atlas_pipeline_tests.support.helpers import http_request, post_form, serve, session_cookie

PASSWORD = "a long passphrase"
DISPUTED, WAITING, UNCOMPARED, EARLY = "PMC1216327.pdf", "PMC1574360.pdf", "PMC3508963.pdf", "PMC3510731.pdf"
COUNTS = ("event_treatment", "total_treatment", "event_control", "total_control")
# every document's values (the primary binary outcome's four fields) as each extractor gives them
VALUES = {
    DISPUTED: {"Ana": (515, 1200, 300, 1201), "Ben": (516, 1200, 300, 1201)},
    WAITING: {"Ana": (41, 123, 37, 124)},
    UNCOMPARED: {"Ana": (43, 211, 39, 212)},
    EARLY: {"Ana": (61, 150, 20, 151), "Ben": (62, 150, 20, 151)},
}
NOT_FINAL = {515, 516, 41, 123, 37, 124, 43, 211, 39, 212, 999, 61, 62}
# each extractor's answer to RoB 2's question 1.1 on the primary binary outcome (the disputed documents differ)
ROB2 = {
    DISPUTED: {"Ana": "Y", "Ben": "N"},
    WAITING: {"Ana": "Y"},
    UNCOMPARED: {"Ana": "Y"},
    EARLY: {"Ana": "Y", "Ben": "PY"},
}


def answer_rob2(store, record, who: str, answer: str, template) -> None:
    """As the RoB 2 panel records it: the result assessed (its own entry), then the answer to 1.1."""
    number = 1001 if who == "Ana" else 1002  # each extractor's own series
    shown = (record.sha256, record.extraction_version)
    for field, value in (("result_outcome", "Primary binary outcome"), ("q1_1", answer)):
        name = f"rob2[{number}].{field}"
        request = DecisionRequest(
            name,
            "correct",
            reviewer=who,
            shown=shown,
            template_field=template.field_definition(name),
            identity=template.identity_for(name),
            value=answer if field == "q1_1" else value,
            blind_to=["reviewers"],
        )
        decide(store, record, request)


def _rob2_rows(exports: Path) -> dict[str, dict]:
    with (exports / "atlas_rob2_results.csv").open(encoding="utf-8-sig") as table:
        return {row["report"] or row["study_id"]: row for row in csv.DictReader(table)}


def _numbers(raw: bytes) -> set[float]:
    """Every number in a CSV's cells (a cell read whole: no coordinate or date is split into numbers)."""
    found = set()
    for row in csv.reader(io.StringIO(raw.decode("utf-8-sig"))):
        for cell in row:
            try:
                found.add(float(cell))
            except ValueError:
                continue
    return found


def _files(exports: Path) -> dict[str, bytes]:
    names = [f"{stem}.csv" for stem in (*ESCALC_STEMS.values(), *REVMAN_STEMS.values(), "atlas_arms")]
    names += ["atlas_studies.csv", "atlas_approved.csv"]
    return {name: (exports / name).read_bytes() for name in names}


def _excluded(exports: Path) -> list[dict]:
    return list(csv.DictReader(io.StringIO((exports / f"{EXCLUDED_STEM}.csv").read_text("utf-8-sig"))))


def test_nothing_the_process_has_not_made_final_reaches_a_consumer(
    knowledge_base, settings_for, atlas_for, instance, tmp_path
):
    from atlas_pipeline.review_page.app import create_app

    settings, atlas = settings_for(knowledge_base, rule="rob2"), atlas_for(knowledge_base, rule="rob2")
    paths = [f"rct/{key}" for key in VALUES]
    defs = processed_in_skip_mode(knowledge_base, settings, atlas, instance, paths)
    for name, role in (("Ana", "extractor"), ("Ben", "extractor"), ("Dan", "adjudicator")):
        add_account(settings.review.users, name, role, PASSWORD)
    store, exports = atlas.store(), Path(settings.project.exports)
    records = {key: read_record(store, key, "extraction", ExtractionRecord) for key in VALUES}
    shown = {key: {"sha256": r.sha256, "extraction_version": r.extraction_version} for key, r in records.items()}

    def refresh() -> dict[str, bytes]:
        assert defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
        return _files(exports)

    with serve(create_app(Deployment.from_settings(settings), instance=lambda: instance)) as site:
        cookie = {name: session_cookie(site, name, PASSWORD)[1] for name in ("Ana", "Ben", "Dan")}

        def extract(key: str, who: str, values: tuple[int, ...]) -> None:
            for field, value in zip(COUNTS, values, strict=True):
                form = {**shown[key], "action": "correct", "value": str(value)}
                status, body = post_form(f"{site}/documents/{key}/fields/{field}", form, cookie[who])
                assert status == 200, body[-500:]

        def complete(key: str, who: str) -> None:
            assert post_form(f"{site}/documents/{key}/extraction", {"action": "complete"}, cookie[who])[0] == 200

        def settle(key: str, field: str, value: int) -> tuple[int, str]:
            form = {**shown[key], "action": "correct", "value": str(value), "role": "adjudicator"}
            return post_form(f"{site}/documents/{key}/fields/{field}", form, cookie["Dan"])

        for key in (DISPUTED, WAITING, UNCOMPARED):
            form = {"action": "assign", "key": key, "extractor": ["Ana", "Ben"]}
            assert post_form(f"{site}/team/assignments", form, cookie["Dan"])[0] == 200
        # an adjudicator settles what was compared: never an unassigned, unstarted document, nor an assigned one
        for key in (EARLY, UNCOMPARED):
            status, body = settle(key, "event_treatment", 999)
            assert status == 409 and ("no extraction of" in body or "is being extracted by Ana and Ben" in body)
        assert not [d for d in load_decisions(store, EARLY) if d.reviewer == "Dan"]
        # … as an older version let one do: planted in the log, before anyone extracted
        decide(
            store,
            records[EARLY],
            DecisionRequest(
                "event_treatment",
                "correct",
                reviewer="Dan",
                shown=(records[EARLY].sha256, records[EARLY].extraction_version),
                template_field=atlas.load_template().field_definition("event_treatment"),
                value="999",
                role="adjudicator",
            ),
        )
        for key, people in VALUES.items():
            for who, values in people.items():
                extract(key, who, values)
                answer_rob2(store, records[key], who, ROB2[key][who], atlas.load_template())
        for key, who in ((DISPUTED, "Ana"), (DISPUTED, "Ben"), (WAITING, "Ana"), (EARLY, "Ana"), (EARLY, "Ben")):
            complete(key, who)
        # before the comparison Ben sees no trace of Ana's work: not her counts, her name, nor her entry numbers
        listed = {row["key"]: row for row in http_json(site, "/api/documents", cookie["Ben"])}
        waiting = listed[WAITING]
        assert (waiting["decisions"], waiting["reviewers"], waiting["to_review"]) == (0, "", None)
        team = http_request(f"{site}/team", headers={"Cookie": cookie["Ben"]})[1]
        assert 'data-reviewer="Ana"' not in team and 'data-reviewer="Ben"' in team  # his own progress only
        assert 'data-reviewer="Ana"' in http_request(f"{site}/team", headers={"Cookie": cookie["Dan"]})[1]
        for _ in range(2):  # Ana adds two outcomes to the grid; Ben's first is numbered as if she had added none
            row = {"cell:new:outcome": "Relapse", "cell:new:time_point": "1 year", **shown[UNCOMPARED]}
            assert post_form(f"{site}/documents/{UNCOMPARED}/groups/outcomes/grid", row, cookie["Ana"])[0] == 200
        row = {"cell:new:outcome": "Relapse", "cell:new:time_point": "1 year", **shown[UNCOMPARED]}
        status, body = post_form(f"{site}/documents/{UNCOMPARED}/groups/outcomes/grid", row, cookie["Ben"])
        assert status == 200 and "entry 1002 added by Ben" in body
        numbers = {
            (d.reviewer, int(d.field.split("[")[1].split("]")[0]))
            for d in load_decisions(store, UNCOMPARED)
            if d.field.startswith(("outcomes[", "rob2["))
        }
        assert {n for who, n in numbers if who == "Ana"} == {1001, 1003, 1005}  # her own series: 1001, 1003 …
        assert {n for who, n in numbers if who == "Ben"} == {1002}  # his: 1002, whatever she added

        files = refresh()
        for name, raw in files.items():  # in no file that pools or reports values
            assert not _numbers(raw) & NOT_FINAL, (name, _numbers(raw) & NOT_FINAL)
        assert pl.read_csv(io.BytesIO(files["atlas_escalc_dichotomous.csv"])).height == 0
        rob2 = _rob2_rows(exports)  # no answer judged from, the disputed ones named as conflicts
        assert all(not row["answers"] and not row["D1"] for row in rob2.values()), rob2
        disputed_rob2 = [row for row in rob2.values() if row["conflicts"]]
        assert len(disputed_rob2) == 2 and all(row["conflicts"] == "1.1" for row in disputed_rob2), rob2
        assert not list((exports / "forest_plots").glob("*.svg"))
        fields = pl.read_parquet(exports / "atlas_fields.parquet").filter(pl.col("field") == "event_treatment")
        states = {row["document_key"]: row for row in fields.iter_rows(named=True)}
        assert all(row["final_value"] is None and row["needs_review"] for row in states.values())
        assert {key: row["final_state"] for key, row in states.items()} == {
            DISPUTED: "disputed",
            WAITING: "extracting",
            UNCOMPARED: "extracting",
            EARLY: "disputed",
        }
        # … and named, with what it waits for and who can settle it
        named = {(row["field"], row["reason"].split(":", 1)[0]): row for row in _excluded(exports)}
        disputed = named[("event_treatment", DISPUTED)]
        assert "Ana: correct → 515; Ben: correct → 516" in disputed["reason"] and "an adjudicator" in disputed["reason"]
        assert "waiting for Ben to complete their extraction" in named[("event_treatment", WAITING)]["reason"]
        assert "no extraction of this document is complete" in named[("total_control", UNCOMPARED)]["reason"]
        early = named[("event_treatment", EARLY)]["reason"]
        assert "Ana: correct → 61; Ben: correct → 62" in early and "Dan's adjudication before the comparison" in early
        analysis = http_request(f"{site}/analysis", headers={"Cookie": cookie["Dan"]})[1]
        shown_excluded = analysis.split('id="excluded"')[1]
        for key in VALUES:
            assert f"{key}: " in shown_excluded, key
        assert "Ana: correct → 515; Ben: correct → 516" in shown_excluded.replace("&gt;", ">")
        assert "<svg" not in analysis.split('id="excluded"')[0]  # nothing to pool, nothing drawn
        # the study page shows the dispute and offers no disputed value to take
        study = next(row["study_id"] for row in fields.iter_rows(named=True) if row["document_key"] == DISPUTED)
        page = http_request(f"{site}/studies/{study}", headers={"Cookie": cookie["Dan"]})[1]
        assert 'data-waiting="event_treatment"' in page and 'data-field="event_treatment"' not in page
        assert "take this" not in page
        consensus = http_request(f"{site}/disagreements", headers={"Cookie": cookie["Dan"]})[1]
        assert f"{EARLY}" in consensus and f"{DISPUTED}" in consensus

        # settled: the adjudicator after the comparison, the second extraction completed — in every file
        assert settle(DISPUTED, "event_treatment", 515)[0] == 200
        assert settle(EARLY, "event_treatment", 61)[0] == 200
        extract(WAITING, "Ben", VALUES[WAITING]["Ana"])
        answer_rob2(store, records[WAITING], "Ben", "Y", atlas.load_template())  # the same answer as Ana's
        complete(WAITING, "Ben")
    files = refresh()
    escalc = pl.read_csv(io.BytesIO(files["atlas_escalc_dichotomous.csv"]))
    rows = {row["document_key"]: (row["ai"], row["n1i"], row["ci"], row["n2i"]) for row in escalc.iter_rows(named=True)}
    assert rows == {DISPUTED: (515, 1200, 300, 1201), WAITING: (41, 123, 37, 124), EARLY: (61, 150, 20, 151)}
    results = files[f"{REVMAN_STEMS['study_results']}.csv"].decode("utf-8-sig")
    assert {"515", "41", "61"} <= set(re.findall(r"\d+", results)) and "999" not in results
    assert len(list((exports / "forest_plots").glob("*.svg"))) == 1
    answered = [row["answers"] for row in _rob2_rows(exports).values() if row["answers"]]
    assert answered == ["1.1=Y"], answered  # the waiting document, compared and agreed; the disputed ones unsettled
    assert _numbers(files["atlas_arms.csv"]) >= {515, 41, 61} and 999 not in _numbers(files["atlas_arms.csv"])
    left = {(row["field"], row["reason"].split(":", 1)[0]) for row in _excluded(exports)}
    assert ("event_treatment", UNCOMPARED) in left and ("event_treatment", DISPUTED) not in left


def http_json(site: str, path: str, cookie: str) -> list[dict]:
    import json

    status, body = http_request(f"{site}{path}", headers={"Cookie": cookie})
    assert status == 200, body
    return json.loads(body)
