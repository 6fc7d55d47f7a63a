"""Two reports of one corpus trial — the yoga trial's PDF and its JATS — reviewed as one study: grouped by their
shared registration, values extracted by hand in each, the agreeing one the study's, the differing one a conflict
until a person takes one report's value, and the exports keyed by study as well as by document."""

import re
import urllib.parse

import polars as pl

from atlas_pipeline.defs.document_states import document_states
from atlas_pipeline.defs.run_history import aggregate_facts
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.knowledge.planning import aggregates_stale
from atlas_pipeline.review.study_values import choices_changed_at, choose
from atlas_pipeline.store.records import ExtractionRecord, read_record
from atlas_pipeline_tests.support.by_hand import processed_in_skip_mode
from atlas_pipeline_tests.support.helpers import http_request, serve

PDF, JATS = "PMC3648394.pdf", "PMC3648394.nxml"
STUDY = "ACTRN12611000536965"


def _post(url: str, form: dict) -> tuple[int, str]:
    return http_request(url, urllib.parse.urlencode(form).encode())


def test_two_reports_of_one_trial_are_reviewed_as_one_study(knowledge_base, settings_for, atlas_for, instance):
    from atlas_pipeline.review_page.app import create_app

    settings, atlas = settings_for(knowledge_base), atlas_for(knowledge_base)
    defs = processed_in_skip_mode(knowledge_base, settings, atlas, instance, [f"rct/{PDF}", f"rct_jats/{JATS}"])
    states = {s.key: s for s in document_states(instance, atlas)}
    assert states[PDF].study_id == states[JATS].study_id == STUDY  # the registration both name
    assert states[JATS].parse.authors[0] == "Birinder S Cheema" and states[JATS].parse.year == 2013

    with serve(create_app(Deployment.from_settings(settings), instance=lambda: instance)) as site:
        for key, n_treatment in ((PDF, "18"), (JATS, "19")):
            record = read_record(atlas.store(), key, "extraction", ExtractionRecord)
            shown = {"sha256": record.sha256, "extraction_version": record.extraction_version, "reviewer": "ana"}
            for field, value in (("study_design", "randomized controlled trial"), ("n_treatment", n_treatment)):
                status, _ = _post(
                    f"{site}/documents/{key}/fields/{field}", {**shown, "action": "correct", "value": value}
                )
                assert status == 200
            _post(f"{site}/documents/{key}/fields/nct_number", {**shown, "action": "reject", "reason": "not_reported"})
        for key in (PDF, JATS):
            assert defs.resolve_job_def("review_job").execute_in_process(partition_key=key, instance=instance).success

        status, page = http_request(f"{site}/studies")
        assert status == 200 and f'data-study="{STUDY}"' in page and f"/documents/{JATS}" in page
        label = re.search(r"data-label>([^<]+)<", page).group(1)  # named as RevMan's files and the plots name it
        assert re.fullmatch(r"[\w' -]+ (19|20)\d\d[a-z]?", label) and label != STUDY, label
        status, page = http_request(f"{site}/studies/{STUDY}")
        assert status == 200
        assert (
            'data-field="study_design" class="agreed"' in page and 'data-field="n_treatment" class="conflict"' in page
        )
        assert 'data-field="nct_number"' not in page  # a rejected value is no value of the study
        status, page = _post(
            f"{site}/studies/{STUDY}/values",
            {"field": "n_treatment", "from_report": JATS, "reviewer": "dan", "note": "the JATS has the erratum"},
        )
        assert status == 200 and f"n_treatment of {STUDY} taken from {JATS} by dan" in page
        assert 'data-field="n_treatment" class="chosen"' in page
        status, page = _post(
            f"{site}/studies/{STUDY}/values", {"field": "n_treatment", "from_report": "nowhere.pdf", "reviewer": "dan"}
        )
        assert status == 409 and "gives no accepted value" in page

        # a person sets the JATS apart (then takes that back): two studies, never under one name
        _post(f"{site}/studies/links", {"key": JATS, "action": "apart", "reviewer": "dan"})
        apart = {s.key: s.study_id for s in document_states(instance, atlas)}
        assert apart[PDF] == STUDY and apart[JATS] == JATS
        _post(f"{site}/studies/links", {"key": JATS, "action": "unlink", "reviewer": "dan"})

    assert defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
    rows = {
        r["field"]: r
        for r in pl.read_parquet(f"{settings.project.exports}/atlas_studies.parquet").iter_rows(named=True)
    }
    assert (rows["study_design"]["state"], rows["study_design"]["reports"]) == ("agreed", 2)
    chosen = rows["n_treatment"]
    assert (chosen["study_id"], chosen["value"], chosen["state"], chosen["source_report"]) == (
        STUDY,
        "19",
        "chosen",
        JATS,
    )
    assert chosen["chosen_by"] == "dan" and f"{PDF}: 18" in chosen["values_by_report"]
    fields = pl.read_parquet(f"{settings.project.exports}/atlas_fields.parquet")
    assert set(fields["study_id"].unique()) == {STUDY}
    documents = pl.read_parquet(f"{settings.project.exports}/atlas_documents.parquet")
    assert set(documents["study_id"]) == {STUDY} and documents.filter(pl.col("document_key") == JATS)["year"][0] == 2013

    # a choice made on the study's page after the exports makes them stale, as a decision does (`atlas run` and the
    # review sensor refresh them): the page never uses a choice the files do not have
    store = atlas.store()

    def stale() -> str | None:
        people = choices_changed_at(store)
        return aggregates_stale(aggregate_facts(instance, decided_at=people, policy=atlas.final_values_policy()))

    assert stale() is None
    values = {source: dict(fields) for source, fields in _values(instance, atlas, STUDY).items()}
    choose(store, STUDY, "n_treatment", PDF, values, reviewer="dan", note="the PDF after all")
    assert stale() == "the catalog, a duplicate group or a study's chosen value changed since"
    assert defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
    assert stale() is None


def _values(instance, atlas, study_id: str) -> dict:
    from atlas_pipeline.outputs.study_report import studies
    from atlas_pipeline.review.study_values import load_choices

    states = document_states(instance, atlas)
    (study,) = [s for s in studies(states, atlas.load_template(), load_choices(atlas.store())) if s.id == study_id]
    return study.values_by_report()
