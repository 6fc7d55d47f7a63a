"""One trial counted once in every analysis file: the yoga trial's PDF and its JATS (one study, by their shared
registration), its push-up test typed on the PDF's grid by two reviewers and on the JATS's by one, in the default
mode — k = 1 for the trial in metafor's escalc file (and in R), in the forest plot and in RevMan's results. A value
that cannot be what it says (a 29-digit group size) is refused where it enters, and when put straight into the
decision log is left out of the analysis files and named, while every other file is written."""

import csv
import io
import json
import os
import shutil
import subprocess
import urllib.parse

import dagster as dg
import polars as pl

from atlas_pipeline.core.clock import now_stamp
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.outputs.analysis_files import read_escalc
from atlas_pipeline.outputs.forest_plots import forest_plots
from atlas_pipeline.review.decisions import decision_file, load_decisions
from atlas_pipeline.review.workbook_import import import_workbook
from atlas_pipeline.store.layout import decisions_dir
from atlas_pipeline.store.records import ExtractionRecord, read_record
from atlas_pipeline_tests.support.by_hand import processed_in_skip_mode
from atlas_pipeline_tests.support.helpers import http_request, serve

PDF, JATS = "PMC3648394.pdf", "PMC3648394.nxml"
STUDY = "ACTRN12611000536965"
# the corpus gold (outcome_values.jsonl, Week 11): yoga 21 (SD 11), n = 18; control 20 (SD 13), n = 19
PUSH_UPS = {
    "outcome": "Push-up test",
    "time_point": "week 11",
    "intervention": "10-week yoga program",
    "comparator": "Control",
    "mean_intervention": "21",
    "sd_intervention": "11",
    "n_intervention": "18",
    "mean_comparator": "20",
    "sd_comparator": "13",
    "n_comparator": "19",
}
R_COUNT = """
library(metafor)
dat <- read.csv(commandArgs(trailingOnly = TRUE)[1])
dat <- dat[tolower(dat$outcome) == "push-up test", ]
es <- escalc(measure = "MD", m1i = m1i, sd1i = sd1i, n1i = n1i, m2i = m2i, sd2i = sd2i, n2i = n2i, data = dat)
fit <- rma(yi, vi, data = es, method = "DL")
cat(sprintf("%d %.10f %.10f\\n", fit$k, coef(fit)[[1]], fit$ci.ub))
"""


def _post(url: str, form: dict) -> tuple[int, str]:
    return http_request(url, urllib.parse.urlencode(form).encode())


def _grid(site: str, key: str, shown: dict, reviewer: str, row: dict) -> tuple[int, str]:
    form = {**shown, "reviewer": reviewer, **{f"cell:new:{name}": value for name, value in row.items()}}
    return _post(f"{site}/documents/{key}/groups/outcomes/grid", form)


def test_the_pdf_the_jats_and_two_reviewers_entries_give_the_trial_once(
    knowledge_base, settings_for, atlas_for, instance, tmp_path, monkeypatch
):
    from atlas_pipeline.review_page.app import create_app

    settings, atlas = settings_for(knowledge_base), atlas_for(knowledge_base)
    defs = processed_in_skip_mode(knowledge_base, settings, atlas, instance, [f"rct/{PDF}", f"rct_jats/{JATS}"])

    with serve(create_app(Deployment.from_settings(settings), instance=lambda: instance)) as site:
        shown = {}
        for key in (PDF, JATS):
            record = read_record(atlas.store(), key, "extraction", ExtractionRecord)
            shown[key] = {"sha256": record.sha256, "extraction_version": record.extraction_version}
        # ana and ben each type the push-up test on the PDF's grid (ben in lower case), ana on the JATS's too
        for key, reviewer, row in (
            (PDF, "ana", PUSH_UPS),
            (PDF, "ben", {**PUSH_UPS, "outcome": "push-up test "}),
            (JATS, "ana", PUSH_UPS),
        ):
            status, page = _grid(site, key, shown[key], reviewer, row)
            assert status == 200 and f"added by {reviewer}" in page, page[-400:]
        # the grid shows what most rows need; medians, quartiles, group CIs … on demand (their inputs still there)
        status, page = http_request(f"{site}/documents/{PDF}")
        assert status == 200 and 'class="show-details"' in page
        assert 'class="s- detail"><input name="cell:1001:median_intervention"' in page
        assert '<td class="s-reviewer_added"><input name="cell:1001:mean_intervention"' in page
        # a group size no trial has, by the grid and by a crafted POST of an existing cell: refused, nothing recorded
        before = len(load_decisions(atlas.store(), PDF))
        status, page = _grid(site, PDF, shown[PDF], "ana", {**PUSH_UPS, "n_comparator": "9" * 29})
        assert status == 409 and "beyond any plausible n_comparator" in page
        crafted = {**shown[PDF], "reviewer": "ana", "cell:1001:n_comparator": "9" * 29, "was:1001:n_comparator": "19"}
        status, page = _post(f"{site}/documents/{PDF}/groups/outcomes/grid", crafted)
        assert status == 409 and "beyond any plausible" in page
        crafted = {**shown[PDF], "reviewer": "ana", "cell:1001:sd_comparator": "-13", "was:1001:sd_comparator": "13"}
        status, page = _post(f"{site}/documents/{PDF}/groups/outcomes/grid", crafted)
        assert status == 409 and "a standard deviation or error is 0 or more" in page
        crafted = {**shown[PDF], "reviewer": "ana", "cell:5000:n_comparator": "19", "was:5000:n_comparator": ""}
        status, page = _post(f"{site}/documents/{PDF}/groups/outcomes/grid", crafted)
        assert status == 409 and "has no entry 5000" in page
        for written, reason in (
            ("1_000", "without underscores"),
            ("١٩", "write numbers with the digits 0–9"),
            ("19,5", "a decimal comma is not read"),
        ):
            crafted = {
                **shown[PDF],
                "reviewer": "ana",
                "cell:1001:n_comparator": written,
                "was:1001:n_comparator": "19",
            }
            status, page = _post(f"{site}/documents/{PDF}/groups/outcomes/grid", crafted)
            assert status == 409 and reason in page, (written, page[-300:])
        # the same by a reviewed workbook: every such row refused with its reason, nothing recorded
        report = import_workbook(atlas.store(), _workbook(tmp_path, shown[PDF]), "hostile.xlsx", atlas.load_template())
        reasons = {row.field: row.reason for row in report.refused}
        assert report.applied == [] and len(reasons) == 4, reasons
        assert "beyond any plausible n_comparator" in reasons["outcomes[1001].n_comparator"]
        assert "beyond any plausible sd_intervention" in reasons["outcomes[1001].sd_intervention"]
        assert "has no extracted field" in reasons[f"outcomes[{'9' * 29}].n_intervention"]
        assert "has no extracted field" in reasons["outcomes[5000].n_intervention"]  # the group holds 500 at most
        assert len(load_decisions(atlas.store(), PDF)) == before

    for key in (PDF, JATS):
        assert defs.resolve_job_def("review_job").execute_in_process(partition_key=key, instance=instance).success
    assert defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
    exports = atlas.exports_store()

    escalc = read_escalc(exports)
    (row,) = [r for r in escalc["continuous"] if r["outcome"].casefold() == "push-up test"]
    assert row["study_id"] == STUDY and (row["m1i"], row["sd1i"], row["n1i"]) == (21, 11, 18)
    assert (row["m2i"], row["sd2i"], row["n2i"], row["values"]) == (20, 13, 19, "final")
    # ana's and ben's rows of the PDF are one entry (the same outcome, compared cell by cell), the JATS's joins them
    assert row["reports"] == f"{JATS}; {PDF}" and row["derived"] is None
    (plot,) = [p for p in forest_plots(escalc) if p.outcome.casefold() == "push-up test"]
    assert [effect.study_id for effect in plot.effects] == [STUDY] and plot.pooled.k == 1
    raw = exports.read_bytes("atlas_revman_study_results.csv").decode()
    results = [r for r in csv.DictReader(io.StringIO(raw.removeprefix("\ufeff"))) if "push-up" in r["Outcome"].lower()]
    assert sorted((r["Arm"], r["Mean"], r["SD"], r["Sample size"]) for r in results) == [
        ("10-week yoga program", "21", "11", "18"),
        ("Control", "20", "13", "19"),
    ]
    assert shutil.which("Rscript"), "scripts/install_system_deps.sh --tests installs r-base-core and r-cran-metafor"
    done = subprocess.run(
        ["Rscript", "-e", R_COUNT, exports.path("atlas_escalc_continuous.csv")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    k, estimate, _ = done.stdout.split()
    assert int(k) == 1 and float(estimate) == 1.0  # the trial's own mean difference, once
    # `atlas evaluate` in the default mode measures the people's values: the two reviewers' entry is one entry
    scores = _evaluate_people(atlas, tmp_path)
    for field in ("mean_intervention", "sd_intervention", "n_intervention", "mean_comparator", "sd_comparator"):
        assert (scores[f"outcomes.{field}"]["recall"], scores[f"outcomes.{field}"]["accuracy"]) == (1.0, 1.0), field

    # a value that slipped past every check into the decision log (an older version, a hand-edited file): left
    # out of the analysis files and named; every other file still written
    for key, entry in ((PDF, 1001), (JATS, 1001)):  # every source, so that the study agrees on it
        for name, value in (("n_comparator", int("9" * 29)), ("sd_intervention", 1e308)):
            field = f"outcomes[{entry}].{name}"
            latest = [d for d in load_decisions(atlas.store(), key) if d.field == field][-1]
            forged = latest.model_copy(update={"id": f"forged{entry}{name}", "value": value, "decided_at": now_stamp()})
            _forge(atlas, key, forged)
    # and an entry number no group holds, straight into the log
    huge = {"id": "forgedentry", "document": PDF, "field": f"outcomes[{'9' * 29}].n_comparator"}
    _forge(atlas, PDF, forged.model_copy(update=huge))
    for key in (PDF, JATS):
        assert defs.resolve_job_def("review_job").execute_in_process(partition_key=key, instance=instance).success
    result = defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance)
    assert result.success
    left_out = pl.read_csv(exports.path("atlas_analysis_excluded.csv")).to_dicts()
    assert any(r["field"] == "n_comparator" and "beyond any plausible" in r["reason"] for r in left_out), left_out
    assert any(r["field"] == "sd_intervention" and "beyond any plausible" in r["reason"] for r in left_out), left_out
    assert [r for r in read_escalc(exports)["continuous"] if r["outcome"].casefold() == "push-up test"] == []
    for name in ("atlas_documents.xlsx", "atlas_fields.csv", "atlas_studies.csv", "atlas_revman_study_results.csv"):
        assert exports.exists(name)
    assert exports.exists("atlas_outcomes.parquet")  # the typed table leaves the values out, never fails on them
    exported = instance.get_latest_materialization_event(dg.AssetKey("extraction_exports")).asset_materialization
    assert exported.metadata["analysis_values_left_out"].value >= 2
    assert exported.metadata["files_not_written"].value == {}
    with serve(
        create_app(Deployment.from_settings(settings), instance=lambda: instance)
    ) as site:  # the Analysis tab answers all the same
        status, page = http_request(f"{site}/analysis")
        assert status == 200 and "beyond any plausible sd_intervention" in page

    # a file that cannot be written (here: the agreement table, whose rows fail) is named; every other one is written
    from atlas_pipeline.outputs import exports as export_module

    def broken_rows(*_):
        raise ValueError("cannot compare")

    monkeypatch.setattr(export_module, "agreement_rows_of", broken_rows)
    os.remove(exports.path("atlas_fields.csv"))  # written again: every file but the one that fails
    assert defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
    exported = instance.get_latest_materialization_event(dg.AssetKey("extraction_exports")).asset_materialization
    assert exported.metadata["files_not_written"].value == {"atlas_agreement.csv": "ValueError: cannot compare"}
    assert exports.exists("atlas_fields.csv") and exports.exists("atlas_escalc_continuous.csv")
    # the analysis itself failing (a value no reader foresaw) when the study is made again: its files named, the
    # rest written — the studies export too — and the study not kept, so it is made again at the next refresh
    from atlas_pipeline.outputs import study_parts

    monkeypatch.setattr(study_parts, "study_entries", broken_rows)
    shutil.rmtree(atlas.store().path("aggregates/studies"))  # (the study's kept part would be read as it is)
    assert defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
    exported = instance.get_latest_materialization_event(dg.AssetKey("extraction_exports")).asset_materialization
    not_written = exported.metadata["files_not_written"].value
    for name in ("atlas_escalc_continuous.csv", "atlas_arms.parquet", "atlas_revman_study_results.csv"):
        assert not_written[name] == "ValueError: cannot compare", not_written
    assert "atlas_fields.csv" not in not_written and "atlas_documents.xlsx" not in not_written
    assert "atlas_studies.csv" not in not_written
    assert not atlas.store().exists("aggregates/studies") or not atlas.store().files("aggregates/studies")


def _forge(atlas, key: str, decision) -> None:
    """A decision written straight into the log (an older version, a hand-edited file): no check on the way in."""
    atlas.store().write_json(f"{decisions_dir(key)}/{decision_file(decision)}", json.loads(decision.model_dump_json()))


def _workbook(tmp_path, shown: dict) -> bytes:
    """A reviewed workbook of hostile rows: a 29-digit value, an SD of 1e308, a 29-digit entry number, entry 5000."""
    rows = [
        ("outcomes[1001].n_comparator", "9" * 29),
        ("outcomes[1001].sd_intervention", "1e308"),
        (f"outcomes[{'9' * 29}].n_intervention", "18"),
        ("outcomes[5000].n_intervention", "18"),
    ]
    frame = pl.DataFrame(
        {
            "document_key": [PDF] * len(rows),
            "field": [field for field, _ in rows],
            "sha256": [shown["sha256"]] * len(rows),
            "extraction_version": [shown["extraction_version"]] * len(rows),
            "decision": ["correct"] * len(rows),
            "corrected_value": [value for _, value in rows],
            "reviewer": ["ana"] * len(rows),
        }
    )
    frame.write_excel(tmp_path / "hostile.xlsx", worksheet="fields")
    return (tmp_path / "hostile.xlsx").read_bytes()


def _evaluate_people(atlas, tmp_path) -> dict:
    """``atlas evaluate``'s measure of the final values (the default mode: people's) against the corpus gold."""
    from atlas_pipeline.outputs.evaluation import evaluate_gold
    from atlas_pipeline_tests.support.corpus import corpus_file

    rows = [json.loads(line) for line in corpus_file("gold/outcome_values.jsonl").read_text().splitlines()]
    gold = tmp_path / "gold.jsonl"
    gold.write_text("\n".join(json.dumps(r) for r in rows if r["pmcid"] == 3648394 and r["outcome"] == "Push-up test"))
    report = evaluate_gold(atlas.store(), atlas.load_template(), str(gold), 0.005, derivations=atlas.derivations())
    assert report.measured == "final" and "Measured: the final values" in report.markdown()
    return {row["field"]: row for row in report.rows()}
