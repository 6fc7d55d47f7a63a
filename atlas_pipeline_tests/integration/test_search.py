"""Search on the embedded SQLite FTS5 index and on the real PostgreSQL server: ranked results with snippets, filters
by status, field and source, kept current incrementally (unchanged documents skipped, removed ones dropped), and
the review page's search box."""

from __future__ import annotations

import hashlib
import shutil

import dagster as dg
import pytest

from atlas_pipeline.config.settings import PROJECT_ROOT
from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.knowledge.catalog import refresh_catalog
from atlas_pipeline.ops.runs import QUIET_RUN_CONFIG
from atlas_pipeline.review_page.app import create_app
from atlas_pipeline.search.entries import QueryTooLongError
from atlas_pipeline.store.layout import provenance_path
from atlas_pipeline_tests.support.corpus import copy_into, corpus_file
from atlas_pipeline_tests.support.helpers import http_request, latest_metadata, serve
from atlas_pipeline_tests.support.juice_trial import KEY, answer

DOCUMENTS = (
    "rct/PMC3508963.pdf",
    "html/plos_one_article.html",
    "rct_jats/PMC3648394.nxml",
    "awkward/derived/empty_zero_bytes.pdf",
)


def build(instance, settings, atlas, knowledge_base):
    copy_into(knowledge_base, *DOCUMENTS)
    scan = refresh_catalog(atlas.open_knowledge_base(), atlas.store())
    instance.add_dynamic_partitions(documents_partitions.name, list(scan.catalog.entries))
    defs = build_definitions(settings)
    for key in scan.catalog.entries:
        defs.resolve_job_def("document_job").execute_in_process(
            partition_key=key, instance=instance, run_config=QUIET_RUN_CONFIG, raise_on_error=False
        )
    assert defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
    return defs


def check_search(instance, settings, atlas, knowledge_base, backend: str) -> None:
    collected = hashlib.sha256(corpus_file("rct/PMC3508963.pdf").read_bytes()).hexdigest()
    atlas.store().write_json(  # as a collector records what it brought
        provenance_path(collected),
        {"source": "renal-feed", "url": "http://127.0.0.1/x.pdf", "fetched_at": 1.0, "path": "PMC3508963.pdf"},
    )
    defs = build(instance, settings, atlas, knowledge_base)
    metadata = latest_metadata(instance, "search_index")
    assert metadata["backend"].value == backend
    assert metadata["documents"].value == 3 and metadata["updated"].value == 3  # the empty file has no text
    with atlas.search_index(instance) as index:
        hits = index.search("renal colic")
        assert hits[0].key == "PMC3508963.pdf" and "\ue000" in hits[0].snippet  # matches marked in the snippet
        assert "[renal]" in hits[0].marked().lower() or "[colic]" in hits[0].marked().lower()
        yoga = index.search('"heart rate variability" yoga')
        assert [h.key for h in yoga] == ["PMC3648394.nxml"]
        assert index.search("heart rate variability", status="failed") == []
        assert isinstance(index.search('AND OR ( -renal "unbalanced'), list)  # typed operators never break a query
        assert index.search("xyzzyplugh") == []
        assert [h.key for h in index.search("renal", source="renal-feed")] == ["PMC3508963.pdf"]
        assert index.search("renal", source="another-feed") == []
        with pytest.raises(QueryTooLongError, match="at most 32 words"):  # a clear message, never SQL's refusal
            index.search(" ".join(["renal colic"] * 2_300))
        assert index.search(" ".join(["renal"] * 32))  # 32 words: still a search
    # unchanged documents are skipped; a removed source leaves the index
    assert defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
    again = latest_metadata(instance, "search_index")
    assert again["updated"].value == 0 and again["unchanged"].value == 3
    (knowledge_base / "plos_one_article.html").unlink()
    refresh_catalog(atlas.open_knowledge_base(), atlas.store())
    assert defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
    metadata = latest_metadata(instance, "search_index")
    assert metadata["removed"].value == 1 and metadata["updated"].value == 0 and metadata["unchanged"].value == 2
    with atlas.search_index(instance) as index:
        assert index.search("reticuloendotheliosis") == [] and index.count() == 2


def test_search_on_sqlite(instance, settings_for, atlas_for, knowledge_base):
    check_search(instance, settings_for(knowledge_base), atlas_for(knowledge_base), knowledge_base, "sqlite")


def test_search_on_postgres(postgres, tmp_path, knowledge_base, settings_for, atlas_for, monkeypatch):
    for name, value in postgres.items():
        monkeypatch.setenv(name, value)
    home = tmp_path / "home"
    home.mkdir()
    shutil.copyfile(PROJECT_ROOT / "deploy" / "postgres" / "dagster.yaml", home / "dagster.yaml")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        check_search(instance, settings_for(knowledge_base), atlas_for(knowledge_base), knowledge_base, "postgres")


def test_values_are_searchable_by_field_and_on_the_review_page(run, llm_server, instance):
    hostile = {"value": "<script>alert(1)</script> <1> colored and flavored water", "quote": None}
    llm_server.script({"content": answer(control_name=hostile)})
    result, record = run()
    assert result.success and record.status.value in ("done", "partial")
    # tags are cleaned from the value (the raw answer kept); what is left is still shown escaped
    assert record.fields["control_name"]["value"] == "alert(1) <1> colored and flavored water"
    assert record.fields["control_name"]["raw_value"] == hostile["value"]
    assert run.defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
    with run.atlas.search_index(instance) as index:
        hits = index.search("grape juice", field="treatment_name")
        assert [(h.key, h.field) for h in hits] == [(KEY, "treatment_name")]
        assert index.search("grape juice", field="control_name") == []
    with serve(create_app(Deployment.from_settings(run.settings), instance=lambda: instance)) as url:
        status, page = http_request(f"{url}/search?q=grape+juice")
        assert status == 200 and f'href="/documents/{KEY}"' in page and "<mark>" in page
        status, page = http_request(f"{url}/search?q=alert+flavored")  # a value holding markup, and the query
        assert status == 200 and "&lt;1&gt;" in page and "<script>alert(1)" not in page, page
        status, page = http_request(f"{url}/search?q=%3Cscript%3Ealert(1)%3C%2Fscript%3E")
        assert status == 200 and "<script>alert(1)" not in page
        status, page = http_request(f"{url}/search?q=" + "+".join(["grape"] * 4_600))
        assert status == 200 and "at most 32 words" in page and len(page) < 50_000
