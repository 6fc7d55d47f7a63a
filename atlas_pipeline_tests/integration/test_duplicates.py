"""The same work under different bytes, on real corpus documents: an article's PDF and its JATS XML are one work
(also with every identifier removed from the text, and as a re-saved PDF with other metadata), different trials are
not; through the pipeline the exports mark the copy, and a person's split holds."""

from __future__ import annotations

import dagster as dg
import polars as pl
import pymupdf

from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.knowledge.catalog import refresh_catalog
from atlas_pipeline.knowledge.duplicate_records import load_groups, split
from atlas_pipeline.knowledge.duplicates import Member, compare, fingerprint, group_duplicates
from atlas_pipeline.ops.runs import QUIET_RUN_CONFIG
from atlas_pipeline_tests.support.corpus import copy_into, corpus_file, parsed_corpus
from eval.duplicates import IDENTIFIERS  # every DOI, PMCID, PMID, registration: what the text-only measure removes


def member(relative: str, strip_ids: bool = False) -> Member:
    parsed = parsed_corpus(relative)
    text = IDENTIFIERS.sub(" ", parsed.markdown) if strip_ids else parsed.markdown
    return Member(relative, fingerprint(relative, text), parsed.media_type)


def test_pdf_and_jats_of_one_article_are_one_work_and_different_trials_are_not():
    members = [
        member(path)
        for path in (
            "rct/PMC1216327.pdf",
            "rct_jats/PMC1216327.nxml",
            "rct/PMC3648394.pdf",
            "rct_jats/PMC3648394.nxml",
            "rct/PMC5154016.pdf",
            "rct_jats/PMC1475568.nxml",
        )
    ]
    groups = group_duplicates(members)
    assert [sorted(g.members) for g in groups] == [
        ["rct/PMC1216327.pdf", "rct_jats/PMC1216327.nxml"],
        ["rct/PMC3648394.pdf", "rct_jats/PMC3648394.nxml"],
    ]
    assert all(g.canonical.endswith(".pdf") for g in groups)  # the version of record people read
    evidence = groups[0].evidence["rct_jats/PMC1216327.nxml"]
    assert "same DOI 10.1186/1475-2891-4-23" in evidence and "passages shared" in evidence


def test_text_alone_recognises_the_work_when_no_identifier_is_left():
    pdf, jats = member("rct/PMC3648394.pdf", strip_ids=True), member("rct_jats/PMC3648394.nxml", strip_ids=True)
    assert not pdf.fingerprint.identifiers and not jats.fingerprint.identifiers
    evidence = compare(pdf.fingerprint, jats.fingerprint)
    assert evidence is not None and evidence.rule == "text" and evidence.containment >= 0.8
    other = member("rct/PMC5154016.pdf", strip_ids=True)
    assert compare(pdf.fingerprint, other.fingerprint) is None


def test_a_shared_trial_registration_alone_does_not_make_one_work():
    a, b = member("rct/PMC5154016.pdf"), member("rct/PMC1216327.pdf")
    forged = type(b.fingerprint)(
        b.fingerprint.sha256, {"isrctn": a.fingerprint.identifiers["isrctn"]}, b.fingerprint.shingles
    )
    assert compare(a.fingerprint, forged) is None  # a protocol and its results paper share it, not their text


def test_the_pipeline_marks_the_copy_and_keeps_a_persons_split(
    knowledge_base, settings_for, atlas_for, instance, tmp_path
):
    copy_into(knowledge_base, "rct/PMC1216327.pdf", "rct_jats/PMC1216327.nxml", "rct/PMC3508963.pdf")
    settings, atlas = settings_for(knowledge_base), atlas_for(knowledge_base)
    refresh_catalog(atlas.open_knowledge_base(), atlas.store())
    resaved = pymupdf.open(corpus_file("rct/PMC3508963.pdf"))  # later, the same PDF downloaded again
    resaved.set_metadata({"title": "Re-downloaded copy", "producer": "another site"})
    resaved.save(knowledge_base / "PMC3508963-again.pdf")
    scan = refresh_catalog(atlas.open_knowledge_base(), atlas.store())
    assert len(scan.catalog.entries) == 4  # different bytes: four documents
    instance.add_dynamic_partitions(documents_partitions.name, list(scan.catalog.entries))
    defs = build_definitions(settings)
    for key in scan.catalog.entries:
        result = defs.resolve_job_def("document_job").execute_in_process(
            partition_key=key, instance=instance, run_config=QUIET_RUN_CONFIG
        )
        assert result.success
    assert defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success

    groups = load_groups(atlas.store())
    assert {g["canonical"]: sorted(g["members"]) for g in groups.groups} == {
        "PMC1216327.pdf": ["PMC1216327.nxml", "PMC1216327.pdf"],
        "PMC3508963.pdf": ["PMC3508963-again.pdf", "PMC3508963.pdf"],
    }
    documents = pl.read_csv(tmp_path / "exports" / "atlas_documents.csv")
    marked = dict(zip(documents["document_key"], documents["duplicate_of"], strict=True))
    assert marked["PMC1216327.nxml"] == "PMC1216327.pdf" and marked["PMC3508963-again.pdf"] == "PMC3508963.pdf"
    assert marked["PMC1216327.pdf"] is None
    completion = instance.get_latest_materialization_event(dg.AssetKey("task_completion")).asset_materialization
    assert "2 document(s) are other versions" in completion.metadata["summary"].value

    split(atlas.store(), "PMC3508963-again.pdf", by="Dr. Split")  # a person says: not the same work
    assert defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
    groups = load_groups(atlas.store())
    assert [g["canonical"] for g in groups.groups] == ["PMC1216327.pdf"]
    documents = pl.read_csv(tmp_path / "exports" / "atlas_documents.csv")
    assert documents.filter(pl.col("duplicate_of").is_not_null())["document_key"].to_list() == ["PMC1216327.nxml"]
