"""Parsing providers swapped in by settings: MinerU (local mineru-api and the hosted task API) and docling-serve,
against a scripted server that follows each one's documented HTTP API and answers from the real corpus PDF."""

import shutil
from pathlib import Path

import pytest

from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.document_states import already_extracted
from atlas_pipeline.grading.locations import EvidenceScope
from atlas_pipeline.knowledge.catalog import load_catalog
from atlas_pipeline.parsing.document_parse import load_markdown, load_tables
from atlas_pipeline.parsing.providers.base import neutral_name
from atlas_pipeline.store.records import ExtractionRecord, ParseRecord, read_record
from atlas_pipeline_tests.support.corpus import copy_into, corpus_file, parsed_corpus
from atlas_pipeline_tests.support.helpers import document_failed, latest_metadata, register, run_document
from scripted_servers.processes import provider_site

TABLES_PDF = "rct/PMC5777645.pdf"  # 13 pages, 4 ruled tables with captions
TEXT_PDF = "rct/PMC3508963.pdf"
FAST = {"provider_backoff_seconds": "0.01", "provider_poll_seconds": "0.1"}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    with provider_site(tmp_path_factory.mktemp("provider")) as value:
        yield value


@pytest.fixture
def provider(site):
    site.control()
    start = len(site.requests())

    class Handle:
        url = site.url

        @staticmethod
        def control(**values):
            site.control(**values)

        @staticmethod
        def requests(path_start: str = "/"):
            return [r for r in site.requests()[start:] if r["path"].startswith(path_start) and r["path"] != "/ready"]

    return Handle


def deploy(knowledge_base, settings_for, atlas_for, instance, **options):
    settings, atlas = settings_for(knowledge_base, **options), atlas_for(knowledge_base, **options)
    register(instance, atlas)
    return build_definitions(settings), atlas


def parse_of(atlas, key) -> ParseRecord:
    return read_record(atlas.store(), key, "parse", ParseRecord)


def extraction_of(atlas, key) -> ExtractionRecord:
    return read_record(atlas.store(), key, "extraction", ExtractionRecord)


def pdf_name(relative: str) -> str:
    return neutral_name(corpus_file(relative).read_bytes(), "application/pdf")


def test_mineru_local_api_parses_pdfs_through_the_pipeline_and_is_asked_once(
    provider, knowledge_base, settings_for, atlas_for, instance, tmp_path
):
    copy_into(knowledge_base, TABLES_PDF, "html/plos_one_article.html")
    options = {"parser": "mineru", "mineru_url": provider.url, "provider_version": "a100-mineru", **FAST}
    defs, atlas = deploy(knowledge_base, settings_for, atlas_for, instance, **options)
    for key in ("PMC5777645.pdf", "plos_one_article.html"):
        assert run_document(defs, instance, key).success

    parse = parse_of(atlas, "PMC5777645.pdf")
    assert parse.provider == "mineru" and parse.engine == "mineru 2.5.4-scripted (pipeline, local API)"
    assert parse.problem is None and parse.pages == 13 and parse.tables >= 3
    assert parse.provider_version == "2.5.4-scripted (a100-mineru)"  # what it reported, and the deployment's label
    markdown = load_markdown(atlas.store(), parse)
    assert "<!-- page 1 -->" in markdown and "<!-- page 13 -->" in markdown
    tables = load_tables(atlas.store(), parse)
    assert all(table.page for table in tables) and any(table.caption.startswith("Table") for table in tables)
    # HTML is never sent: it is parsed here, with the local parser's own fingerprint
    html = parse_of(atlas, "plos_one_article.html")
    assert html.provider == "local" and html.engine.startswith("beautifulsoup")
    # what was sent: the bytes under a neutral name, and the documented form fields
    sent = provider.requests("/file_parse")
    assert len(sent) == 1 and sent[0]["file"] == pdf_name(TABLES_PDF) and "PMC" not in sent[0]["file"]
    assert sent[0]["fields"]["return_content_list"] == ["true"] and sent[0]["fields"]["backend"] == ["pipeline"]
    # every record carries the parser; the extraction version names the provider
    extraction = extraction_of(atlas, "PMC5777645.pdf")
    assert extraction.status == "done" and extraction.parser == parse.parser
    assert extraction.version_parts["parser"].startswith("mineru:")
    metadata = latest_metadata(instance, "document_text", "PMC5777645.pdf")
    assert metadata["provider"].value == "mineru" and metadata["parser_fingerprint"].value == parse.parser
    wrapper = atlas.store().read_json(extraction.extraction_path)
    assert wrapper["providers"]["parse_provider"] == "mineru"

    # a re-run: the parse is cached, MinerU is not asked again
    assert run_document(defs, instance, "PMC5777645.pdf").success
    assert parse_of(atlas, "PMC5777645.pdf").cached and len(provider.requests("/file_parse")) == 1
    # even with the parse cache gone (another local parser revision, say), the provider's answer is kept
    shutil.rmtree(tmp_path / "artifacts" / "parsed")
    assert run_document(defs, instance, "PMC5777645.pdf").success
    again = parse_of(atlas, "PMC5777645.pdf")
    assert not again.cached and again.provider_cached and len(provider.requests("/file_parse")) == 1
    assert load_markdown(atlas.store(), again) == markdown


def test_mineru_hosted_task_api_uploads_polls_and_fetches_without_leaking_the_token(
    provider, knowledge_base, settings_for, atlas_for, instance, monkeypatch
):
    token = "mineru-secret-token-0123456789"
    provider.control(token=token, polls=2)
    monkeypatch.setenv("ATLAS_MINERU_TOKEN", token)
    copy_into(knowledge_base, TEXT_PDF)
    options = {"parser": "mineru", "mineru_url": provider.url, "mineru_api": "hosted", "mineru_token": token, **FAST}
    defs, atlas = deploy(knowledge_base, settings_for, atlas_for, instance, **options)
    assert run_document(defs, instance, "PMC3508963.pdf").success

    parse = parse_of(atlas, "PMC3508963.pdf")
    assert parse.problem is None and parse.provider == "mineru" and "hosted API" in parse.engine
    submitted = provider.requests("/api/v4/file-urls/batch")
    assert len(submitted) == 1 and submitted[0]["authorization"]
    assert submitted[0]["json"]["files"][0]["name"] == pdf_name(TEXT_PDF)
    assert submitted[0]["json"]["enable_table"] is True and submitted[0]["json"]["model_version"] == "pipeline"
    polls = provider.requests("/api/v4/extract-results/batch/")
    assert len(polls) == 3 and parse.provider_task_id == polls[0]["path"].rsplit("/", 1)[-1]
    # the presigned upload and download URLs are another host: the token is not sent there
    (upload,) = provider.requests("/upload/")
    (download,) = provider.requests("/zips/")
    assert upload["host"].startswith("localhost") and not upload["authorization"] and not download["authorization"]
    assert upload["size"] == corpus_file(TEXT_PDF).stat().st_size
    assert set(parse.timings) >= {"upload_seconds", "queue_and_parse_seconds", "provider_seconds"}
    assert "Lidocaine" in load_markdown(atlas.store(), parse) or "lidocaine" in load_markdown(atlas.store(), parse)
    for path in (Path(atlas.settings.project.artifacts)).rglob("*.json"):
        assert token not in path.read_text(errors="replace")
    asked_again_if_not_kept(defs, instance, atlas, "PMC3508963.pdf", lambda: provider.requests("/api/v4/"))

    # a refused token: the document fails with MinerU's own message
    provider.control(token="another-token-value-xyz")
    copy_into(knowledge_base, TABLES_PDF)
    register(instance, atlas)
    assert document_failed(run_document(defs, instance, "PMC5777645.pdf"))
    refused = extraction_of(atlas, "PMC5777645.pdf")
    assert refused.status == "failed"
    assert refused.reason == "parse: mineru: submit refused: token error: the token is invalid or expired"


def test_docling_serve_async_api_gives_text_with_pages_and_tables_with_captions(
    provider, knowledge_base, settings_for, atlas_for, instance, monkeypatch
):
    key = "docling-api-key-0123456789"
    provider.control(api_key=key, polls=1)
    monkeypatch.setenv("ATLAS_DOCLING_API_KEY", key)
    copy_into(knowledge_base, TABLES_PDF)
    options = {"parser": "docling", "docling_url": provider.url, "docling_api_key": key, **FAST}
    defs, atlas = deploy(knowledge_base, settings_for, atlas_for, instance, **options)
    assert run_document(defs, instance, "PMC5777645.pdf").success

    parse = parse_of(atlas, "PMC5777645.pdf")
    assert parse.problem is None and parse.provider == "docling" and parse.engine == "docling-serve (accurate tables)"
    (submitted,) = provider.requests("/v1/convert/file/async")
    assert submitted["api_key"] and submitted["file"] == pdf_name(TABLES_PDF)
    assert submitted["fields"]["to_formats"] == ["md", "json"] and submitted["fields"]["table_mode"] == ["accurate"]
    assert parse.provider_task_id and provider.requests(f"/v1/result/{parse.provider_task_id}")
    markdown = load_markdown(atlas.store(), parse)
    assert markdown.count("<!-- page ") == 13 and "atlas:page-break" not in markdown
    tables = load_tables(atlas.store(), parse)
    assert len(tables) >= 3 and all(t.page for t in tables) and any(t.caption.startswith("Table") for t in tables)
    assert all("<th>" in t.html for t in tables)  # the grid's column headers
    asked_again_if_not_kept(defs, instance, atlas, "PMC5777645.pdf", lambda: provider.requests("/v1/"))


def asked_again_if_not_kept(defs, instance, atlas, key: str, calls) -> None:
    """A re-run never calls the provider again: not with the parse cached, nor with only its answer kept."""
    before, markdown = len(calls()), load_markdown(atlas.store(), parse_of(atlas, key))
    assert run_document(defs, instance, key).success
    assert parse_of(atlas, key).cached and len(calls()) == before
    shutil.rmtree(Path(atlas.settings.project.artifacts) / "parsed")
    assert run_document(defs, instance, key).success
    again = parse_of(atlas, key)
    assert not again.cached and again.provider_cached and len(calls()) == before
    assert load_markdown(atlas.store(), again) == markdown


def test_tables_from_mineru_beside_the_local_text_keep_quote_spans_valid(
    provider, knowledge_base, settings_for, atlas_for, instance
):
    copy_into(knowledge_base, TABLES_PDF)
    options = {"tables_parser": "mineru", "mineru_url": provider.url, **FAST}
    defs, atlas = deploy(knowledge_base, settings_for, atlas_for, instance, **options)
    assert run_document(defs, instance, "PMC5777645.pdf").success

    parse = parse_of(atlas, "PMC5777645.pdf")
    assert parse.provider == "local + tables: mineru" and "; tables: mineru" in parse.engine
    markdown, tables = load_markdown(atlas.store(), parse), load_tables(atlas.store(), parse)
    assert markdown == parsed_corpus(TABLES_PDF).markdown  # the text is exactly the local parser's
    assert len(provider.requests("/file_parse")) == 1
    local_tables = parsed_corpus(TABLES_PDF).tables
    assert [t.text for t in tables] != [t.text for t in local_tables]  # the tables are MinerU's
    # a row of a MinerU table is evidence: found verbatim, located in that table; a changed number is not
    scope = EvidenceScope(markdown, tables)
    table = next(t for t in tables if any(ch.isdigit() for ch in t.text))
    row = next(line for line in table.text.splitlines() if any(ch.isdigit() for ch in line) and len(line) > 12)
    found = scope.find(row)
    assert found.match.tier == "verified"
    digit = next(ch for ch in row if ch.isdigit())
    changed = row.replace(digit, str((int(digit) + 1) % 10), 1)
    assert scope.find(changed).match.tier != "verified"


def test_provider_failures_timeouts_and_malformed_results_are_reasons_and_never_cached(
    provider, knowledge_base, settings_for, atlas_for, instance
):
    copy_into(knowledge_base, TABLES_PDF, TEXT_PDF)
    failing, hanging = pdf_name(TABLES_PDF), pdf_name(TEXT_PDF)
    provider.control(fail=[failing], hang=[hanging], polls=1)
    options = {
        "parser": "docling",
        "docling_url": provider.url,
        "provider_max_seconds": "2",
        "provider_max_retries": "1",
        **FAST,
    }
    defs, atlas = deploy(knowledge_base, settings_for, atlas_for, instance, **options)
    assert document_failed(run_document(defs, instance, "PMC5777645.pdf"))
    assert document_failed(run_document(defs, instance, "PMC3508963.pdf"))
    failed, hung = extraction_of(atlas, "PMC5777645.pdf"), extraction_of(atlas, "PMC3508963.pdf")
    assert failed.status == "failed" and failed.reason.startswith("parse: docling: task ")
    assert failed.reason.endswith(" failed: no message") or "failed:" in failed.reason
    assert hung.status == "failed"
    assert hung.reason.endswith("did not finish within 2 s (ATLAS_PROVIDER_MAX_SECONDS); last status: started")
    # a provider that did not answer in time may next time: `atlas run` tries it again; a task it failed is done
    assert hung.retryable and not failed.retryable
    entries = list(load_catalog(atlas.store()).entries.values())
    assert already_extracted(instance, entries, atlas.extraction_version().tag) == {"PMC5777645.pdf"}

    # a malformed result, from the MinerU local API: no markdown and no content list
    provider.control(malformed=[failing])
    mineru = {"parser": "mineru", "mineru_url": provider.url, "provider_max_retries": "1", **FAST}
    defs, atlas = deploy(knowledge_base, settings_for, atlas_for, instance, **mineru)
    assert document_failed(run_document(defs, instance, "PMC5777645.pdf"))
    malformed = extraction_of(atlas, "PMC5777645.pdf")
    assert malformed.reason == "parse: mineru: malformed result: neither a content list nor markdown came back"
    # a synchronous parse slower than the document's time: not sent again (MinerU may still be working on it)
    provider.control(hang=[hanging], hang_seconds=4)
    slow = {**mineru, "provider_max_seconds": "2"}
    defs, atlas = deploy(knowledge_base, settings_for, atlas_for, instance, **slow)
    sent = len(provider.requests("/file_parse"))
    assert document_failed(run_document(defs, instance, "PMC3508963.pdf"))
    timed_out = extraction_of(atlas, "PMC3508963.pdf")
    assert timed_out.reason == "parse: mineru: parse: no answer within 2 s (ATLAS_PROVIDER_MAX_SECONDS)"
    assert timed_out.retryable and len(provider.requests("/file_parse")) == sent + 1
    # a malformed answer is not worth asking again by itself (`atlas run --force` does)
    assert not malformed.retryable
    # transient refusals (503 at capacity) are retried; and nothing failed was cached: both parse now
    provider.control(transient=2)
    defs, atlas = deploy(knowledge_base, settings_for, atlas_for, instance, **{**mineru, "provider_max_retries": "3"})
    for key in ("PMC5777645.pdf", "PMC3508963.pdf"):
        assert run_document(defs, instance, key).success
        assert extraction_of(atlas, key).status == "done", extraction_of(atlas, key).reason
    assert [r["path"] for r in provider.requests("/file_parse")][-4:] == ["/file_parse"] * 4


def test_llm_extraction_reads_the_providers_text_and_tables_and_names_them_in_the_prompt(
    provider, llm_server, knowledge_base, settings_for, atlas_for, instance, monkeypatch
):
    copy_into(knowledge_base, TABLES_PDF)
    llm_server.script(default={"content": "{}"})
    monkeypatch.setenv("ATLAS_LLM_API_KEY", "sk-test-0123456789")
    options = {
        "tables_parser": "docling",
        "docling_url": provider.url,
        "llm_base_url": llm_server.base_url,
        "llm_model": "scripted-model",
        "llm_api_key": "sk-test-0123456789",
        "llm_max_retries": "0",
        **FAST,
    }
    defs, atlas = deploy(knowledge_base, settings_for, atlas_for, instance, **options)
    assert run_document(defs, instance, "PMC5777645.pdf").success
    parse, extraction = parse_of(atlas, "PMC5777645.pdf"), extraction_of(atlas, "PMC5777645.pdf")
    assert parse.provider == "local + tables: docling" and extraction.mode == "llm" and extraction.llm_calls >= 1
    prompt = llm_server.requests()[0]["messages"][1]["content"]
    assert '<FULL_TEXT source="pymupdf4llm">' in prompt
    assert '<HIGH_FIDELITY_TABLES source="docling tables, HTML" priority="HIGHEST">' in prompt
    tables = load_tables(atlas.store(), parse)
    assert tables[0].html in prompt  # docling's tables are the ones offered
    assert extraction.version_parts["parser"].startswith("pymupdf4llm+tables:docling:")


API_OPTIONS = {
    "mineru-local": {"parser": "mineru", "mineru_api": "local"},
    "mineru-hosted": {"parser": "mineru", "mineru_api": "hosted", "mineru_token": "mineru-token-0123456789"},
    "docling": {"parser": "docling"},
}
EXPECTED = {  # what each API's failure, hang and malformed answer become (start of the reason after "parse: ")
    ("mineru-local", "fail"): "mineru: parse: HTTP 500: Failed to process file: scripted failure",
    ("mineru-local", "hang"): "mineru: parse: no answer within 2 s (ATLAS_PROVIDER_MAX_SECONDS)",
    ("mineru-local", "malformed"): "mineru: malformed result: neither a content list nor markdown came back",
    ("mineru-hosted", "fail"): "mineru: task ",
    ("mineru-hosted", "hang"): "mineru: task ",
    ("mineru-hosted", "malformed"): "mineru: malformed result: the result is not a zip file",
    ("docling", "fail"): "docling: task ",
    ("docling", "hang"): "docling: task ",
    ("docling", "malformed"): "docling: malformed result: no markdown (md_content)",
}


@pytest.mark.parametrize("api", sorted(API_OPTIONS))
def test_each_api_turns_a_failed_task_a_timeout_and_a_malformed_answer_into_reasons(
    api, provider, knowledge_base, settings_for, atlas_for, instance, monkeypatch
):
    monkeypatch.setenv("ATLAS_MINERU_TOKEN", "mineru-token-0123456789")
    copy_into(knowledge_base, "rct/PMC3508963.pdf", "rct/PMC5154016.pdf", "rct/PMC3510731.pdf")
    behaviours = {"fail": "PMC3508963.pdf", "hang": "PMC5154016.pdf", "malformed": "PMC3510731.pdf"}
    provider.control(**{kind: [pdf_name(f"rct/{key}")] for kind, key in behaviours.items()}, hang_seconds=4, polls=1)
    url = {"mineru_url": provider.url} if api.startswith("mineru") else {"docling_url": provider.url}
    options = {**API_OPTIONS[api], **url, "provider_max_seconds": "2", "provider_max_retries": "0", **FAST}
    defs, atlas = deploy(knowledge_base, settings_for, atlas_for, instance, **options)
    for kind, key in behaviours.items():
        assert document_failed(run_document(defs, instance, key))
        record = extraction_of(atlas, key)
        assert record.status == "failed" and record.reason.startswith("parse: " + EXPECTED[(api, kind)]), record.reason
        if kind == "fail" and api == "mineru-hosted":
            assert record.reason.endswith(" failed: scripted failure: the file could not be parsed"), record.reason
        if kind == "fail" and api == "docling":
            assert record.reason.endswith(" failed: no message"), record.reason
        if kind == "hang" and api != "mineru-local":
            assert record.reason.endswith(
                "did not finish within 2 s (ATLAS_PROVIDER_MAX_SECONDS); last "
                + ("state: running" if api == "mineru-hosted" else "status: started")
            ), record.reason
        # a slow provider is worth asking again by itself, and so is an HTTP 500 (mineru-api's answer to any error);
        # a task the provider reports failed, or a malformed answer, is not
        assert record.retryable == (kind == "hang" or (api == "mineru-local" and kind == "fail"))


def test_a_document_above_the_provider_size_limit_is_skipped_without_being_sent(
    provider, knowledge_base, settings_for, atlas_for, instance
):
    copy_into(knowledge_base, TEXT_PDF)
    options = {"parser": "mineru", "mineru_url": provider.url, "provider_max_mb": "0.1", **FAST}
    defs, atlas = deploy(knowledge_base, settings_for, atlas_for, instance, **options)
    assert run_document(defs, instance, "PMC3508963.pdf").success
    record = extraction_of(atlas, "PMC3508963.pdf")
    size = corpus_file(TEXT_PDF).stat().st_size / 1e6
    assert record.status == "skipped" and not record.retryable
    assert record.reason == f"parse: mineru: not sent: {size:.1f} MB is above ATLAS_PROVIDER_MAX_MB=0.1"
    assert provider.requests("/file_parse") == []


@pytest.mark.parametrize("kind", ["bomb", "endless"])
def test_a_providers_answer_is_counted_after_decoding_and_cut_at_its_cap(
    kind, provider, knowledge_base, settings_for, atlas_for, instance, monkeypatch
):
    """docling-serve's result as a gzip body of a few kilobytes inflating to 50 MB, or a chunked body that never
    ends, and no length said: counted as it arrives, after decoding, and cut at the cap (here 5 MB) with the document
    failed and the reason — the memory held to the cap and a piece past it, never the whole answer."""
    import tracemalloc

    from atlas_pipeline.parsing.providers import http

    monkeypatch.setattr(http, "MAX_RESULT_BYTES", 5_000_000)
    copy_into(knowledge_base, TEXT_PDF)
    provider.control(**{kind: [pdf_name(TEXT_PDF)]}, inflated_mb=50, polls=1)
    options = {"parser": "docling", "docling_url": provider.url, "provider_max_retries": "0", **FAST}
    defs, atlas = deploy(knowledge_base, settings_for, atlas_for, instance, **options)
    key = Path(TEXT_PDF).name
    tracemalloc.start()
    try:
        assert document_failed(run_document(defs, instance, key))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    record = extraction_of(atlas, key)
    assert record.status == "failed" and "passed 5,000,000 bytes" in record.reason, record.reason
    assert ("once decoded (gzip;" in record.reason) == (kind == "bomb")
    assert not record.retryable  # the same provider would send it again
    assert peak < 40_000_000, f"{peak / 1e6:.0f} MB at the peak"  # the answer inflated whole: 50 MB
